/*
 * xfr_int.h — what the files of the transfer service share (not a public header): its state
 * (struct xfr, one zone's transfer state, the out thread's connections, the pullers) and the
 * helpers more than one of them calls.
 *
 *   xfr.c           the service: new/configure/free, zone state, info, stats, the workers'
 *                   hand-off queue
 *   xfr_out.c       "tern-xfr-out": requests handed over by workers, AXFR/IXFR out, its
 *                   connection pool
 *   xfr_notify.c    "tern-notify": each published change into a journal entry, NOTIFY out; and
 *                   NOTIFY in (answered on the out thread, refreshing the zone's puller)
 *   xfr_secondary.c "tern-xfr-inN": the pullers — SOA timers, pulls from a primary, refreshes
 *   xfr_catalog.c   catalogs consumed: their members as secondary zones (xfr_catalog_parse.c
 *                   reads a catalog's version and keeps the member list on disk)
 *
 * Threading: everything in struct xfr is under mu, except the queue (qmu), the out thread's own
 * connections (conns, out_ep) and the counters (atomics); xfr.h says who calls what.
 */
#ifndef TERN_XFR_XFR_INT_H
#define TERN_XFR_XFR_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tern/limit/limit.h"
#include "tern/net/tls.h"
#include "tern/tsig/tsig.h"
#include "tern/wire/dname.h"
#include "tern/wire/parse.h"
#include "tern/xfr/journal.h"
#include "tern/xfr/xfr.h"
#include "tern/xfr/xfr_stream.h"

/* Requests queued by workers for the out thread. A transfer request is rare (a secondary asks
 * after a NOTIFY or at its refresh); 64 waiting means a flood, and the rest are refused (the
 * worker closes or drops), which bounds what a flood of NOTIFY or signed queries can make us
 * hold: 64 x 64 KiB of buffers, untouched until used. */
#define XFR_QUEUE_MAX 64

/* Connections the out thread holds at once: a fleet of a few dozen secondaries refreshing together
 * fits. Each holds 128 KiB of buffers, allocated once. A slot kept without work must not keep a
 * newcomer out (RFC 7766 §10, RFC 5936 §4.1: a server may close idle connections; idle ones must
 * not lock others out), so a newcomer to a full pool takes the place of another (oconn_victim())
 * and is refused only when every slot is busy. NSD and Knot serve transfers from their query TCP
 * pool: NSD stops accepting at tcp-count and gives connections accepted past half of it a 200 ms
 * timeout (server.c, handle_tcp_accept), Knot sweeps idle ones every 2 s (tcp-handler.c); both
 * leave a newcomer in the listen backlog meanwhile. Ours is a pool of its own behind the workers',
 * so it applies their rule (net/tcp.c: idle slots make room on demand). */
#define XFR_CONNS_MAX 64

/* The largest message of a transfer out: RFC 5936 allows 65535; fewer, larger messages cost
 * fewer TSIG computations and writes. */
#define XFR_OUT_MSG 65535

/* The most pullers (xfr_in_concurrency's bound): each is a thread that mostly waits on a
 * primary, with a 64 KiB message buffer; past this many, a secondary fleet wants NSD's one
 * epoll loop, not more threads. */
#define XFR_PULLERS_MAX 64

/* A secondary told of the zone's changes (a `notify` address) and where its NOTIFY stands. */
struct ntarget {
    config_xfr_peer_t peer; /* key: NULL here, see key */
    int key;                /* index in xfr.keys, -1: unsigned */
    uint32_t serial;        /* to notify */
    bool pending;           /* not answered yet */
    bool acked;
    unsigned attempts;
    uint16_t id;
    int64_t next_ms;
    int64_t acked_when;
};

/* A catalog zone's consumer settings (xfr_catalog.c, from config_catalog_consumer_t): a group's
 * primaries kept as a zone's (key indexes into xfr.keys). */
struct catgroup {
    char *name;
    config_xfr_peer_t *prim; /* keys: see prim_key; tls: see prim_tls */
    int *prim_key;
    struct xfr_tls **prim_tls; /* XoT: each primary's TLS context, NULL: clear */
    size_t nprim;
};
struct catcfg {
    char *dir;
    struct catgroup *groups;
    size_t ngroups;
    bool parsed; /* a version was read into members (else the list on disk stands) */
};

/* One zone's transfer state: its settings from the config, and what it learnt (journal, the
 * last transfers, timers), kept across reloads (xfr_configure()). */
struct zst {
    char *key;
    uint8_t apex[DNAME_MAXLEN];
    size_t apex_len;
    bool configured; /* in the current config */
    /* out */
    config_prefix_list_t allow_transfer;
    int transfer_key;      /* index in xfr.keys, -1: any or none */
    unsigned transfer_tls; /* config_transfer_tls_t: XoT required, with a client certificate */
    xfr_journal_t *journal;
    unsigned journal_versions; /* the bounds it was made with */
    size_t journal_bytes;
    uint32_t serial;
    bool warned_serial;
    struct ntarget *nt;
    size_t nnt;
    int64_t out_when;
    char out_peer[64], out_kind[8];
    uint32_t out_serial;
    uint64_t out_records, out_count;
    /* in */
    bool secondary;
    config_xfr_peer_t *prim; /* keys: see prim_key */
    int *prim_key;
    struct xfr_tls **prim_tls; /* XoT: each primary's TLS context (xfr_tls.h), NULL: clear */
    size_t nprim, cur_prim;
    config_prefix_list_t allow_notify;
    char *file;
    zone_t *base;
    bool base_tried;
    int64_t next_ms, expire_ms; /* monotonic */
    int64_t refresh_wall, expire_wall;
    bool expired, notified;
    bool busy; /* a puller refreshes it now: no other takes it */
    int64_t in_when;
    char in_primary[64], in_kind[8], in_error[256];
    uint64_t in_records, in_count;
    /* catalogs consumed (xfr_catalog.c) */
    struct catcfg *cat; /* this zone is a catalog: its consumer settings; NULL: not one */
    char *member_of;    /* a catalog's member: that catalog's key; NULL: a configured zone */
    char *member_id, *member_group, *member_coo; /* its unique id, group and coo (or NULL) */
    uint64_t member_gen; /* new at each reset (RFC 9432 §5.6): a transfer begun before is dropped */
};

/* A request a worker handed over (xfr_handoff()): its message and where to answer. */
struct handoff {
    bool tcp, pktinfo;
    int fd;
    SSL *ssl; /* a DoT connection's TLS state (tern/net/tls.h), or NULL */
    struct sockaddr_storage peer, local;
    size_t len;
    uint8_t *buf; /* TCP_MSG_MAX + 2 */
};

/* UPDATEs handed to the update service and not answered yet: its queue holds 64 (update.h), so
 * this many covers all it can take. */
#define XFR_UPDATES_MAX 64

/* How long a connection waits for an UPDATE's answer before it is closed: the update service
 * answers within its publish deadline (30 s) plus a change's own work. */
#define XFR_UPDATE_WAIT_MS 60000

/* An UPDATE the update service holds (xfr_update.c). */
struct upending {
    bool used;
    uint32_t gen; /* bumped at each use: a stale token finds a different gen */
    bool tcp;
    size_t conn; /* tcp: the connection's slot and its gen */
    uint32_t conn_gen;
    struct handoff r;   /* udp: where to answer from; r.buf: NULL (req holds the request) */
    uint8_t *req;       /* the request: the answer echoes its header and zone section */
    struct xfr_msg *im; /* its parse and TSIG state (udp: ctx and key below; tcp: the conn's) */
    tsig_key_t key;
    tsig_ctx_t ctx;
};

/* A published change of a zone, for the NOTIFY thread to journal and announce. */
struct change {
    char *key;
    zone_t *old, *new;
};

/* A connection of the out thread's pool (xfr_out.c): a request read, a reply or a transfer
 * written. fd -1: the slot is free. */
struct oconn {
    int fd;   /* -1: free */
    SSL *ssl; /* XoT: the DoT connection's TLS state, handed over with fd; NULL: plain TCP */
    /* bumped at each close: an event already fetched for the slot's previous connection (one
     * closed for a newcomer in the same batch) is not the new one's */
    uint32_t gen;
    int64_t deadline;
    struct sockaddr_storage peer, local;
    uint8_t *rbuf;
    size_t rlen;
    uint8_t *wbuf;
    size_t woff, wlen;
    xfr_stream_t *st;
    zone_t *zone;
    bool tsig_on;
    tsig_key_t key;
    tsig_ctx_t tsig;
    bool closing;
    bool eof;      /* the client half-closed: nothing more to read */
    bool upd_wait; /* an UPDATE is with the update service: nothing more is read until its answer */
    int64_t start_ms;
    size_t msgs;
    char zname[DNAME_KEY_MAX], kind[8];
    uint32_t serial;
    struct zst *z; /* for the stats; looked up again under mu at the end */
};

/* A connection's buffers: the largest DNS message over TCP with its 2-byte length (RFC 1035
 * §4.2.2) to read; the largest message we send with its length to write. */
#define RBUF_CAP (2u + 65535u)
#define WBUF_CAP (2u + XFR_OUT_MSG)

/* A puller thread (xfr_secondary.c). */
struct puller {
    xfr_t *x;
    unsigned idx; /* takes work while idx < xfr.in_max (a reload may lower it) */
    pthread_t t;
};

/* The transfer service. */
struct xfr {
    const answer_view_t *const *published;
    xfr_hooks_t hooks;
    pthread_mutex_t mu;
    tsig_key_t *keys;
    size_t nkeys;
    unsigned notify_retries, notify_timeout_ms, timeout_ms;
    size_t max_bytes;
    unsigned journal_versions;
    size_t journal_bytes;
    struct zst **zones;
    size_t nzones, capzones; /* capzones: room in zones (catalog members are added to it) */
    xfr_stats_t stats;
    bool stop, started;
    /* the workers' queue, under a lock of its own: a worker handing a request over never
     * waits for the transfer threads' work under mu (a TSIG check, a journal lookup) */
    pthread_mutex_t qmu;
    struct handoff q[XFR_QUEUE_MAX];
    size_t qhead, qlen;
    uint8_t *qbufs;
    int out_ev;    /* eventfd: the queue went non-empty, or stop */
    int notify_ev; /* eventfd: a change to journal and notify, a new config, or stop */
    /* UPDATEs with the update service (the out thread's), and their answers back (under qmu) */
    struct upending upd[XFR_UPDATES_MAX];
    struct {
        uint64_t token;
        unsigned rcode;
    } upd_done[XFR_UPDATES_MAX];
    size_t nupd_done;
    int out_ep; /* the out thread's epoll */
    struct change *ch;
    size_t nch, capch;
    pthread_t out_thread, notify_thread;
    struct oconn conns[XFR_CONNS_MAX];
    uint8_t *conn_bufs;
    /* the NOTIFY thread's sockets (NOTIFY out, and their answers) */
    int ns4, ns6;
    /* the pullers: each refreshes one due secondary zone at a time, so a slow or dead primary
     * holds its own zone only; under mu */
    unsigned in_max;        /* xfr_in_concurrency */
    unsigned total_ms;      /* xfr_total_timeout_ms */
    pthread_cond_t pull_cv; /* a zone may be due: a NOTIFY, a new config, a stop */
    struct puller pullers[XFR_PULLERS_MAX];
    unsigned npullers;
    /* catalog members made or reset so far (member_gen); atomic: xfr_catalog_load() counts
     * outside mu */
    uint64_t member_gens;
};

/* A request being answered: parsed and, if signed, verified (xfr_out_check_msg()). */
typedef struct xfr_msg {
    bool ok;           /* the message is well formed (and, if signed, its TSIG parsed) */
    bool tsig;         /* it was signed (verified unless tsig_err) */
    unsigned tsig_err; /* a TSIG error to answer with (NOTAUTH), 0 if none */
    tsig_key_t *key;   /* where the key it was signed with is copied (ctx->key points there) */
    tsig_ctx_t *ctx;   /* the transaction (a transfer's lives in its connection) */
    wire_query_t q;
} xfr_msg_t;

/* ---- helpers (xfr.c unless said) ---- */

static inline void ev_signal(int fd)
{
    uint64_t one = 1;
    ssize_t r = write(fd, &one, sizeof(one));
    (void)r;
}

static inline void ev_drain(int fd)
{
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof(v));
    (void)r;
}

/* Wall clock seconds: what TSIG signs and `ternctl zone` shows. */
static inline uint64_t now_s(void)
{
    return (uint64_t)time(NULL);
}

/* Under mu: the zone state of key, or NULL. */
struct zst *xfr_zone_find(const xfr_t *x, const char *key);

/* Under mu: the zone whose apex is exactly name (wire, any case), or NULL. */
struct zst *xfr_zone_find_apex(const xfr_t *x, const uint8_t *name);

/* Zones by key, for matching many zones against the zones followed in linear time (a list scan
 * per zone is n^2: 100,000 zones, 10^10 compares under mu). Open addressing, at most half full;
 * a map that could not be made (out of memory) is a scan of the zones it was made from. Made and
 * read under mu; it borrows the zones. */
typedef struct xfr_zmap {
    struct zst **slot; /* NULL: scan zs[0..n) instead */
    size_t mask;
    struct zst *const *zs;
    size_t n;
} xfr_zmap_t;

/** A map of zs (n of them, NULLs skipped) with room for extra more. */
void xfr_zmap_init(xfr_zmap_t *m, struct zst *const *zs, size_t n, size_t extra);

/** The zone of key in m, or NULL. */
struct zst *xfr_zmap_get(const xfr_zmap_t *m, const char *key);

/** z added to m, its key not there yet; zs (n) is what a scan reads when m has no slots. */
void xfr_zmap_put(xfr_zmap_t *m, struct zst *z, struct zst *const *zs, size_t n);

/** Free m's slots (never the zones). */
void xfr_zmap_free(xfr_zmap_t *m);

/* Same address (the port aside). */
bool xfr_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

/* A header (id, flags, one question, no records) and the question name qtype IN into m; returns
 * the length (12 + nlen + 4). The messages tern sends as a client: SOA queries, AXFR/IXFR
 * requests, NOTIFY. */
size_t xfr_msg_question(uint8_t *m, uint16_t id, uint16_t flags, const uint8_t *name, size_t nlen,
                        uint16_t qtype);

/* An SOA record at m owned by the question's name (a pointer to offset 12) with ttl and RDATA rd
 * (rdlen bytes); returns its length. The caller counts it in the header. */
size_t xfr_msg_soa(uint8_t *m, uint32_t ttl, const uint8_t *rd, size_t rdlen);

/* A reference to the published version of the zone whose apex is name, NULL if not served. The
 * calling thread is registered with RCU (and offline between calls). */
zone_t *xfr_pin_zone(xfr_t *x, const uint8_t *name);

/* The next queued request into r (its buf malloc'd: the caller frees it) — the out thread.
 * false: the queue is empty. A request whose copy failed is dropped (its TCP connection
 * closed) and the next one taken. */
bool xfr_handoff_take(xfr_t *x, struct handoff *r);

/* ---- xfr_out.c ---- */

/* The out thread ("tern-xfr-out"). */
void *xfr_out_main(void *arg);

/* Header + the question of req echoed (qlen bytes), rcode and AA set; returns the length. */
size_t xfr_out_reply_head(uint8_t *out, const uint8_t *req, size_t qlen, unsigned rcode, bool aa);

/* Finish a reply in out (len bytes, cap room): signed when the request was. New length. */
size_t xfr_out_finish_reply(xfr_msg_t *im, uint8_t *out, size_t len, size_t cap);

/* Whether a refusal may be logged now (at most a few a second; the out thread's alone). */
bool xfr_out_refusal_log_ok(void);

/* Parse and, if signed, verify one request into im (its key and ctx set by the caller). */
void xfr_out_check_msg(xfr_t *x, const uint8_t *m, size_t len, xfr_msg_t *im);

/* A datagram reply through the worker's socket, from the address the request went to. */
void xfr_out_udp_reply(const struct handoff *r, const uint8_t *buf, size_t len);

/* A reply with rcode only (signed when the request was) into out; its length. */
size_t xfr_out_error_reply(xfr_msg_t *im, const uint8_t *req, uint8_t *out, size_t cap,
                           unsigned rcode);

/* c's reply of n bytes queued at wbuf + 2; then what it pipelined processed, written, armed
 * (or c closed). The out thread, after an UPDATE's answer came back. */
void xfr_out_resume(xfr_t *x, struct oconn *c, size_t n);

/* ---- xfr_update.c ---- */

/* An UPDATE over UDP handed over by a worker: verified, then given to the update service (the
 * answer follows its rcode) or answered at once (FORMERR, NOTAUTH, NOTIMP, SERVFAIL). */
void xfr_update_udp(xfr_t *x, const struct handoff *r);

/* An UPDATE read on connection c (im verified, m its mlen bytes): given to the update service
 * (returns 0: c waits for the answer), or the length of the answer written at out. */
size_t xfr_update_tcp(xfr_t *x, struct oconn *c, xfr_msg_t *im, const uint8_t *m, size_t mlen,
                      uint8_t *out, size_t cap);

/* The out thread, when woken: the answers the update service gave, sent. */
void xfr_update_finish(xfr_t *x);

/* xfr_free(): what is still pending, released. */
void xfr_update_release_all(xfr_t *x);

/* ---- xfr_notify.c ---- */

/* The NOTIFY thread ("tern-notify"): changes into journal entries, NOTIFY out and its answers. */
void *xfr_notify_main(void *arg);

/* A NOTIFY received (on the out thread) from peer: the reply into out (cap room), its length;
 * the zone's refresh is due at once when the NOTIFY is accepted. */
size_t xfr_notify_in(xfr_t *x, xfr_msg_t *im, const uint8_t *req,
                     const struct sockaddr_storage *peer, uint8_t *out, size_t cap);

/* The index in keys of the key named name (any case, final dot optional), -1 if none or NULL. */
int xfr_key_index(const tsig_key_t *keys, size_t nkeys, const char *name);

/* Free a zone's state (NULL: nothing). */
void xfr_zst_free(struct zst *z);

/* ---- xfr_catalog.c ---- */

/* A catalog's settings from cc (key indexes into keys), NULL when out of memory. */
struct catcfg *xfr_catalog_cfg_new(const config_catalog_consumer_t *cc, const tsig_key_t *keys,
                                   size_t nkeys);

void xfr_catalog_cfg_free(struct catcfg *c);

/* Members read from disk for the catalogs of zs (n zones) that x does not follow yet; the loader
 * thread, mu not held (it reads files). *out (*nout of them) are new member zones, their copies
 * loaded as their base. 0 or TERN_ENOMEM. */
int xfr_catalog_load(xfr_t *x, struct zst *const *zs, size_t n, struct zst ***out, size_t *nout);

/* Under mu, in xfr_configure(): the catalog members of x that stay (their catalog is still one
 * in zs) moved into *zs (their primaries taken from the new settings), the loaded ones (from
 * xfr_catalog_load(), taken) added, the rest retired (hooks.member_gone). *zs grows (*cap). 0
 * or TERN_ENOMEM (then some members may be missing until the catalog's next refresh). */
int xfr_catalog_configure(xfr_t *x, struct zst ***zs, size_t *n, size_t *cap, struct zst **loaded,
                          size_t nloaded);

/* A puller, mu not held: catalog zone key's version v was transferred (or, for the first time,
 * found current): its members parsed (RFC 9432) and applied — added, reset, retired — under
 * mu, the member list written. A catalog that is not version 2 changes nothing (logged). */
void xfr_catalog_refreshed(xfr_t *x, const char *key, const zone_t *v);

/* ---- xfr_secondary.c ---- */

/* As many pullers as there are secondary zones, up to in_max; never fewer than before. Wakes
 * them all: a zone may be due. Any thread (a puller after a catalog's change), mu not held. */
void xfr_secondary_grow(xfr_t *x);

#endif
