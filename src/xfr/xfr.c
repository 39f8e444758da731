/*
 * xfr.c — the transfer threads (xfr.h): requests handed over by workers, AXFR/IXFR out from
 * pinned zone versions, the journals, NOTIFY both ways, and secondary zones.
 */
#include "tern/xfr/xfr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tern/common/byteorder.h"
#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/common/rcu.h"
#include "tern/wire/dname.h"
#include "tern/wire/parse.h"
#include "tern/wire/rr.h"
#include "tern/xfr/journal.h"
#include "tern/tsig/tsig.h"
#include "tern/xfr/xfr_in.h"
#include "tern/xfr/xfr_stream.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_table.h"

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

/* What one client address may hold of the XFR_CONNS_MAX: a secondary asks one transfer per zone
 * and a primary sends one NOTIFY at a time, so 8 is room for a secondary refreshing several zones
 * in parallel, while filling the pool takes 8 addresses, not one. At the cap, a newcomer takes the
 * place of its own address's idle (or stalled) connection, else it is refused. */
#define XFR_CONNS_PER_ADDR 8

/* A busy connection (a transfer being sent, a message half-read, a reply queued) that has made
 * no progress for this long may be closed for a newcomer when no connection is idle: a peer
 * that sends one byte of a next message, or stops reading its transfer, must not hold a slot
 * for the whole XFR_IDLE_MS while others wait. A secondary reading its transfer takes a window
 * every few milliseconds; 2 s without one while the pool is full and someone waits is a stall.
 * (The workers' TCP_EVICT_QUIET_MS is 1 s; a transfer's client writes a zone to disk as it
 * reads, hence the margin.) */
#define XFR_EVICT_QUIET_MS 2000

/* A connection with no progress (the client reads nothing, sends no whole message) for this
 * long is closed, as the workers' idle timeout does for queries; before that, only a newcomer
 * to a full pool closes it. */
#define XFR_IDLE_MS 30000

/* The largest message of a transfer out: RFC 5936 allows 65535; fewer, larger messages cost
 * fewer TSIG computations and writes. */
#define XFR_OUT_MSG 65535

/* RFC 8945 §5.2.3: a fudge of 300 s is what every implementation sends. */
#define TSIG_FUDGE 300

/* Secondary timers: the zone's SOA gives refresh, retry and expire; these bound them so a SOA
 * of zeros cannot spin the thread and one of years still refreshes daily. 2 s is Knot's
 * refresh-min-interval. */
#define REFRESH_MIN_MS 2000
#define REFRESH_MAX_MS (86400 * 1000LL)
/* before any SOA is known (nothing transferred yet): retry this often */
#define RETRY_FIRST_MS 5000

/* The most pullers (xfr_in_concurrency's bound): each is a thread that mostly waits on a
 * primary, with a 64 KiB message buffer; past this many, a secondary fleet wants NSD's one
 * epoll loop, not more threads. */
#define XFR_PULLERS_MAX 64

/* ---- small wire helpers ------------------------------------------------------------------- */

/* The serial in the SOA of an IXFR request's authority section (RFC 1995 §3). */
static bool ixfr_client_serial(const uint8_t *m, size_t len, size_t qend, uint32_t *serial)
{
    size_t p = qend;
    if (tern_rd16(m + 8) != 1 || dname_unpack(m, len, len, &p, NULL, NULL) < 0 || len - p < 10 ||
        tern_rd16(m + p) != WIRE_T_SOA)
        return false;
    size_t rdlen = tern_rd16(m + p + 8);
    p += 10;
    if (len - p < rdlen)
        return false;
    size_t end = p + rdlen;
    if (dname_unpack(m, len, end, &p, NULL, NULL) < 0 ||
        dname_unpack(m, len, end, &p, NULL, NULL) < 0 || end - p != 20)
        return false;
    *serial = tern_rd32(m + p);
    return true;
}

/* Header + the question echoed; returns the length (12 + question). */
static size_t reply_head(uint8_t *out, const uint8_t *req, size_t qlen, unsigned rcode, bool aa)
{
    memcpy(out, req, 12 + qlen);
    uint16_t f = tern_rd16(req + 2);
    f = (uint16_t)((f & (0xF << 11 | WIRE_FLAG_RD)) | WIRE_FLAG_QR | (aa ? WIRE_FLAG_AA : 0) |
                   (rcode & 0xF));
    tern_wr16(out + 2, f);
    tern_wr16(out + 4, 1);
    tern_wr16(out + 6, 0);
    tern_wr16(out + 8, 0);
    tern_wr16(out + 10, 0);
    return 12 + qlen;
}

static bool prefix_match(const config_prefix_list_t *l, const struct sockaddr_storage *ss)
{
    uint8_t a[16];
    unsigned fam;
    if (ss->ss_family == AF_INET) {
        memcpy(a, &((const struct sockaddr_in *)ss)->sin_addr, 4);
        fam = 4;
    } else {
        const struct in6_addr *v6 = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(v6)) {
            memcpy(a, v6->s6_addr + 12, 4);
            fam = 4;
        } else {
            memcpy(a, v6->s6_addr, 16);
            fam = 6;
        }
    }
    for (size_t i = 0; i < l->n; i++) {
        const config_prefix_t *p = &l->p[i];
        if (p->family != fam)
            continue;
        unsigned full = p->len / 8, rest = p->len % 8;
        if (memcmp(a, p->addr, full) != 0)
            continue;
        if (rest && ((a[full] ^ p->addr[full]) & (uint8_t)(0xFF << (8 - rest))))
            continue;
        return true;
    }
    return false;
}

static bool same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                      &((const struct sockaddr_in *)b)->sin_addr, 4) == 0;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

static void addr_text(const struct sockaddr_storage *ss, char *out, size_t len)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (ss->ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, ip, sizeof(ip));
        port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, ip, sizeof(ip));
        port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    }
    snprintf(out, len, "%s@%u", ip, port);
}

static uint64_t now_s(void)
{
    return (uint64_t)time(NULL);
}

/* ---- state -------------------------------------------------------------------------------- */

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

struct zst {
    char *key;
    uint8_t apex[DNAME_MAXLEN];
    size_t apex_len;
    bool configured; /* in the current config */
    /* out */
    config_prefix_list_t allow_transfer;
    int transfer_key; /* index in xfr.keys, -1: any or none */
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
};

struct req {
    bool tcp, pktinfo;
    int fd;
    struct sockaddr_storage peer, local;
    size_t len;
    uint8_t *buf; /* TCP_MSG_MAX + 2 */
};

struct change {
    char *key;
    zone_t *old, *new;
};

struct oconn {
    int fd; /* -1: free */
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
    bool eof; /* the client half-closed: nothing more to read */
    int64_t start_ms;
    size_t msgs;
    char zname[DNAME_KEY_MAX], kind[8];
    uint32_t serial;
    struct zst *z; /* for the stats; looked up again under mu at the end */
};

#define RBUF_CAP (2u + 65535u)
#define WBUF_CAP (2u + XFR_OUT_MSG)

struct puller {
    xfr_t *x;
    unsigned idx; /* takes work while idx < xfr.in_max (a reload may lower it) */
    pthread_t t;
};

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
    size_t nzones;
    xfr_stats_t stats;
    bool stop, started;
    /* the workers' queue, under a lock of its own: a worker handing a request over never
     * waits for the transfer threads' work under mu (a TSIG check, a journal lookup) */
    pthread_mutex_t qmu;
    struct req q[XFR_QUEUE_MAX];
    size_t qhead, qlen;
    uint8_t *qbufs;
    int out_ev; /* eventfd: the queue went non-empty, or stop */
    int in_ev;  /* eventfd: a change, a NOTIFY, a new config, or stop */
    int out_ep; /* the out thread's epoll */
    struct change *ch;
    size_t nch, capch;
    pthread_t out_thread, in_thread;
    struct oconn conns[XFR_CONNS_MAX];
    uint8_t *conn_bufs;
    /* the in thread's NOTIFY sockets */
    int ns4, ns6;
    /* the pullers: each refreshes one due secondary zone at a time, so a slow or dead primary
     * holds its own zone only; under mu */
    unsigned in_max;        /* xfr_in_concurrency */
    unsigned total_ms;      /* xfr_total_timeout_ms */
    pthread_cond_t pull_cv; /* a zone may be due: a NOTIFY, a new config, a stop */
    struct puller pullers[XFR_PULLERS_MAX];
    unsigned npullers;
};

static void ev_signal(int fd)
{
    uint64_t one = 1;
    ssize_t r = write(fd, &one, sizeof(one));
    (void)r;
}

static void ev_drain(int fd)
{
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof(v));
    (void)r;
}

/* Under mu. */
static struct zst *find_zone(const xfr_t *x, const char *key)
{
    for (size_t i = 0; i < x->nzones; i++)
        if (strcmp(x->zones[i]->key, key) == 0)
            return x->zones[i];
    return NULL;
}

/* Under mu: the zone whose apex is exactly name (wire, any case). */
static struct zst *find_apex(const xfr_t *x, const uint8_t *name)
{
    for (size_t i = 0; i < x->nzones; i++)
        if (dname_equal(x->zones[i]->apex, name))
            return x->zones[i];
    return NULL;
}

static int key_index(const xfr_t *x, const tsig_key_t *keys, size_t nkeys, const char *name)
{
    (void)x;
    if (!name)
        return -1;
    char n[256];
    size_t l = strlen(name);
    if (l >= sizeof(n))
        return -1;
    memcpy(n, name, l + 1);
    if (l && n[l - 1] == '.')
        n[l - 1] = '\0';
    for (size_t i = 0; i < nkeys; i++)
        if (strcasecmp(keys[i].name, n) == 0)
            return (int)i;
    return -1;
}

static void zst_free(struct zst *z)
{
    if (!z)
        return;
    free(z->key);
    free(z->allow_transfer.p);
    free(z->allow_notify.p);
    xfr_journal_free(z->journal);
    free(z->nt);
    free(z->prim);
    free(z->prim_key);
    free(z->file);
    zone_free(z->base);
    free(z);
}

static void pullers_grow(xfr_t *x);

bool xfr_wanted(const config_t *cfg)
{
    if (cfg->ntsig_keys)
        return true;
    for (size_t i = 0; i < cfg->nzones; i++) {
        const config_zone_t *z = &cfg->zones[i];
        if (z->nprimaries || z->nnotify || z->allow_transfer.n)
            return true;
    }
    return false;
}

int xfr_configure(xfr_t *x, const config_t *cfg)
{
    tsig_key_t *keys = NULL;
    if (cfg->ntsig_keys) {
        if (!(keys = malloc(cfg->ntsig_keys * sizeof(*keys))))
            return TERN_ENOMEM;
        memcpy(keys, cfg->tsig_keys, cfg->ntsig_keys * sizeof(*keys));
    }
    size_t n = 0;
    struct zst **zs = calloc(cfg->nzones + 1, sizeof(*zs));
    if (!zs)
        goto nomem;
    for (size_t i = 0; i < cfg->nzones; i++) {
        const config_zone_t *cz = &cfg->zones[i];
        if (!cz->nprimaries && !cz->nnotify && !cz->allow_transfer.n)
            continue;
        struct zst *z = calloc(1, sizeof(*z));
        if (!z)
            goto nomem;
        zs[n++] = z;
        char key[DNAME_KEY_MAX];
        const char *why;
        int al;
        if (dname_key(cz->origin, key, sizeof(key), &why) < 0 || !(z->key = strdup(key)) ||
            (al = dname_from_str(cz->origin, strlen(cz->origin), false, z->apex, &why)) < 0)
            goto nomem;
        z->apex_len = (size_t)al;
        z->configured = true;
        z->transfer_key = key_index(x, keys, cfg->ntsig_keys, cz->transfer_key);
        if (config_prefix_list_copy(&z->allow_transfer, &cz->allow_transfer) < 0 ||
            config_prefix_list_copy(&z->allow_notify, &cz->allow_notify) < 0)
            goto nomem;
        if (cz->nnotify) {
            if (!(z->nt = calloc(cz->nnotify, sizeof(*z->nt))))
                goto nomem;
            for (size_t k = 0; k < cz->nnotify; k++) {
                z->nt[k].peer = cz->notify[k];
                z->nt[k].peer.key = NULL;
                z->nt[k].key = key_index(x, keys, cfg->ntsig_keys, cz->notify[k].key);
            }
            z->nnt = cz->nnotify;
        }
        if (cz->nprimaries) {
            z->secondary = true;
            if (!(z->prim = calloc(cz->nprimaries, sizeof(*z->prim))) ||
                !(z->prim_key = calloc(cz->nprimaries, sizeof(int))))
                goto nomem;
            for (size_t k = 0; k < cz->nprimaries; k++) {
                z->prim[k] = cz->primaries[k];
                z->prim[k].key = NULL;
                z->prim_key[k] = key_index(x, keys, cfg->ntsig_keys, cz->primaries[k].key);
            }
            z->nprim = cz->nprimaries;
            if (cz->file && !(z->file = strdup(cz->file)))
                goto nomem;
        }
    }
    pthread_mutex_lock(&x->mu);
    /* the journals' bounds first: the loop below makes the new zones' journals with them */
    x->journal_versions = cfg->xfr_journal_versions;
    x->journal_bytes = (size_t)cfg->xfr_journal_mib << 20;
    /* keep what each zone that stays has learnt: journal, timers, the last transfers */
    for (size_t i = 0; i < n; i++) {
        struct zst *o = find_zone(x, zs[i]->key);
        struct zst *z = zs[i];
        if (!o)
            continue;
        /* a journal kept across a reload keeps its deltas; new bounds need a new journal */
        if (x->journal_versions == o->journal_versions && x->journal_bytes == o->journal_bytes) {
            z->journal = o->journal;
            o->journal = NULL;
        }
        z->serial = o->serial;
        z->warned_serial = o->warned_serial;
        z->out_when = o->out_when;
        memcpy(z->out_peer, o->out_peer, sizeof(z->out_peer));
        memcpy(z->out_kind, o->out_kind, sizeof(z->out_kind));
        z->out_serial = o->out_serial;
        z->out_records = o->out_records;
        z->out_count = o->out_count;
        for (size_t k = 0; k < z->nnt; k++)
            for (size_t j = 0; j < o->nnt; j++)
                if (strcmp(z->nt[k].peer.text, o->nt[j].peer.text) == 0) {
                    struct ntarget keep = z->nt[k];
                    z->nt[k] = o->nt[j];
                    z->nt[k].peer = keep.peer;
                    z->nt[k].key = keep.key;
                }
        if (z->secondary && o->secondary) {
            z->base = o->base;
            o->base = NULL;
            z->base_tried = o->base_tried;
            z->next_ms = o->next_ms;
            z->expire_ms = o->expire_ms;
            z->refresh_wall = o->refresh_wall;
            z->expire_wall = o->expire_wall;
            z->expired = o->expired;
            z->busy = o->busy;
            z->in_when = o->in_when;
            memcpy(z->in_primary, o->in_primary, sizeof(z->in_primary));
            memcpy(z->in_kind, o->in_kind, sizeof(z->in_kind));
            memcpy(z->in_error, o->in_error, sizeof(z->in_error));
            z->in_records = o->in_records;
            z->in_count = o->in_count;
        }
    }
    for (size_t i = 0; i < n; i++) {
        zs[i]->journal_versions = x->journal_versions;
        zs[i]->journal_bytes = x->journal_bytes;
        if (!zs[i]->journal && x->journal_versions &&
            !(zs[i]->journal = xfr_journal_new(x->journal_versions, x->journal_bytes)))
            log_err("xfr: zone %s: out of memory for its journal: IXFR falls back to AXFR",
                    zs[i]->key);
    }
    struct zst **old = x->zones;
    size_t nold = x->nzones;
    tsig_key_t *okeys = x->keys;
    size_t onkeys = x->nkeys;
    x->zones = zs;
    x->nzones = n;
    x->keys = keys;
    x->nkeys = cfg->ntsig_keys;
    x->notify_retries = cfg->xfr_notify_retries;
    x->notify_timeout_ms = cfg->xfr_notify_timeout_ms;
    x->timeout_ms = cfg->xfr_timeout_ms;
    x->total_ms = cfg->xfr_total_timeout_ms;
    x->in_max = cfg->xfr_in_concurrency;
    x->max_bytes = (size_t)cfg->xfr_max_mib << 20;
    pthread_mutex_unlock(&x->mu);
    for (size_t i = 0; i < nold; i++)
        zst_free(old[i]);
    free(old);
    if (okeys)
        explicit_bzero(okeys, onkeys * sizeof(*okeys));
    free(okeys);
    if (x->started) {
        ev_signal(x->in_ev);
        pullers_grow(x);
    }
    return 0;
nomem:
    for (size_t i = 0; i < n; i++)
        zst_free(zs[i]);
    free(zs);
    free(keys);
    return TERN_ENOMEM;
}

bool xfr_zone_wanted(xfr_t *x, const char *key)
{
    pthread_mutex_lock(&x->mu);
    const struct zst *z = find_zone(x, key);
    bool want = z && (z->nnt || z->allow_transfer.n);
    pthread_mutex_unlock(&x->mu);
    return want;
}

void xfr_zone_changed(xfr_t *x, const char *key, zone_t *old, zone_t *new)
{
    if (!new || new->unavailable || !xfr_zone_wanted(x, key))
        return;
    char *k = strdup(key);
    pthread_mutex_lock(&x->mu);
    if (!k || (x->nch == x->capch && !(x->capch = x->capch ? 2 * x->capch : 16,
                                       x->ch = realloc(x->ch, x->capch * sizeof(*x->ch))))) {
        pthread_mutex_unlock(&x->mu);
        free(k);
        log_err("xfr: zone %s: out of memory; its change is not journaled", key);
        return;
    }
    x->ch[x->nch++] = (struct change){
        .key = k,
        .old = old && !old->unavailable ? zone_retain(old) : NULL,
        .new = zone_retain(new),
    };
    pthread_mutex_unlock(&x->mu);
    ev_signal(x->in_ev);
}

/* ---- the workers' side -------------------------------------------------------------------- */

static bool submit(xfr_t *x, bool tcp, int fd, const uint8_t *msg, size_t len,
                   const struct sockaddr_storage *peer, const struct sockaddr_storage *local,
                   bool pktinfo)
{
    if (len > RBUF_CAP)
        return false;
    pthread_mutex_lock(&x->qmu);
    if (x->qlen == XFR_QUEUE_MAX || __atomic_load_n(&x->stop, __ATOMIC_ACQUIRE)) {
        pthread_mutex_unlock(&x->qmu);
        return false;
    }
    struct req *r = &x->q[(x->qhead + x->qlen) % XFR_QUEUE_MAX];
    x->qlen++;
    bool wake = x->qlen == 1;
    r->tcp = tcp;
    r->fd = fd;
    r->peer = *peer;
    r->local = *local;
    r->pktinfo = pktinfo;
    r->len = len;
    memcpy(r->buf, msg, len);
    pthread_mutex_unlock(&x->qmu);
    if (wake)
        ev_signal(x->out_ev);
    return true;
}

static bool handoff_udp(void *ctx, int fd, const uint8_t *msg, size_t len,
                        const struct sockaddr_storage *peer, const struct sockaddr_storage *local,
                        bool pktinfo)
{
    return submit(ctx, false, fd, msg, len, peer, local, pktinfo);
}

static bool handoff_tcp(void *ctx, int fd, const uint8_t *buf, size_t len,
                        const struct sockaddr_storage *peer, const struct sockaddr_storage *local)
{
    return submit(ctx, true, fd, buf, len, peer, local, false);
}

server_handoff_t xfr_handoff(xfr_t *x)
{
    return (server_handoff_t){.udp = handoff_udp, .tcp = handoff_tcp, .ctx = x};
}

/* ---- the out thread ------------------------------------------------------------------------ */

/* Refusals are logged, but a flood of NOTIFYs or transfer requests from strangers must not
 * become a flood of log lines: at most REFUSAL_LOG_PER_S a second, then one line saying how many
 * were left out. The out thread's alone, so no lock. */
#define REFUSAL_LOG_PER_S 10

static struct {
    int64_t second;
    unsigned logged;
    uint64_t suppressed;
} refusals;

static bool refusal_log_ok(void)
{
    int64_t now = tern_monotonic_ms() / 1000;
    if (now != refusals.second) {
        if (refusals.suppressed)
            log_info("xfr: %" PRIu64 " more refusals not logged", refusals.suppressed);
        refusals.second = now;
        refusals.logged = 0;
        refusals.suppressed = 0;
    }
    if (refusals.logged < REFUSAL_LOG_PER_S) {
        refusals.logged++;
        return true;
    }
    refusals.suppressed++;
    return false;
}

/* A datagram reply through the worker's socket, from the address the request went to. */
static void udp_reply(const struct req *r, const uint8_t *buf, size_t len)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union {
        char b[CMSG_SPACE(sizeof(struct in6_pktinfo))];
        struct cmsghdr align;
    } ctl;
    struct msghdr m = {.msg_name = (void *)&r->peer,
                       .msg_namelen = r->peer.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                                   : sizeof(struct sockaddr_in6),
                       .msg_iov = &iov,
                       .msg_iovlen = 1};
    if (r->pktinfo) {
        memset(&ctl, 0, sizeof(ctl));
        m.msg_control = ctl.b;
        struct cmsghdr *c = (struct cmsghdr *)ctl.b;
        if (r->local.ss_family == AF_INET) {
            m.msg_controllen = CMSG_SPACE(sizeof(struct in_pktinfo));
            c->cmsg_level = IPPROTO_IP;
            c->cmsg_type = IP_PKTINFO;
            c->cmsg_len = CMSG_LEN(sizeof(struct in_pktinfo));
            struct in_pktinfo pi = {0};
            pi.ipi_spec_dst = ((const struct sockaddr_in *)&r->local)->sin_addr;
            memcpy(CMSG_DATA(c), &pi, sizeof(pi));
        } else {
            m.msg_controllen = CMSG_SPACE(sizeof(struct in6_pktinfo));
            c->cmsg_level = IPPROTO_IPV6;
            c->cmsg_type = IPV6_PKTINFO;
            c->cmsg_len = CMSG_LEN(sizeof(struct in6_pktinfo));
            struct in6_pktinfo pi = {0};
            pi.ipi6_addr = ((const struct sockaddr_in6 *)&r->local)->sin6_addr;
            memcpy(CMSG_DATA(c), &pi, sizeof(pi));
        }
    }
    (void)sendmsg(r->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Pin the published version of the zone whose apex is name: a reference taken while the view
 * cannot be freed (RCU read side, this thread online only for that), so the transfer holds no
 * grace period up afterwards. NULL if not served. */
static zone_t *pin_zone(xfr_t *x, const uint8_t *name)
{
    dname_view_t v;
    dname_view_init(&v, name);
    tern_rcu_online();
    const answer_view_t *view = tern_rcu_deref(*x->published);
    zone_t *z = NULL;
    unsigned apex;
    const zone_t *f = view ? zone_table_find(view->table, &v, &apex) : NULL;
    if (f && apex == 0)
        z = zone_retain((zone_t *)f);
    tern_rcu_offline();
    return z;
}

typedef struct {
    bool ok;           /* the message is well formed (and, if signed, its TSIG parsed) */
    bool tsig;         /* it was signed (verified unless tsig_err) */
    unsigned tsig_err; /* a TSIG error to answer with (NOTAUTH), 0 if none */
    tsig_key_t *key;   /* where the key it was signed with is copied (ctx->key points there) */
    tsig_ctx_t *ctx;   /* the transaction (a transfer's lives in its connection) */
    wire_query_t q;
} inmsg_t;

/* Parse and, if signed, verify one request into im (key and ctx set by the caller). */
static void check_msg(xfr_t *x, const uint8_t *m, size_t len, inmsg_t *im)
{
    im->ok = im->tsig = false;
    im->tsig_err = 0;
    if (wire_parse_query(&im->q, m, len) != WIRE_OK)
        return;
    if (im->q.has_tsig) {
        pthread_mutex_lock(&x->mu);
        int rc = tsig_verify_request(im->ctx, x->keys, x->nkeys, m, len, now_s());
        if (im->ctx->key) {
            /* our copy: the config's keys may be replaced by a reload meanwhile */
            *im->key = *im->ctx->key;
            im->ctx->key = im->key;
        }
        pthread_mutex_unlock(&x->mu);
        if (rc < 0 && rc != TERN_ENOENT)
            return; /* a malformed or misplaced TSIG: FORMERR */
        im->tsig = rc != TERN_ENOENT;
        if (rc > 0) {
            im->tsig_err = (unsigned)rc;
            __atomic_add_fetch(&x->stats.tsig_bad, 1, __ATOMIC_RELAXED);
        }
    }
    im->ok = true;
}

/* Finish a reply in out (len bytes, cap room): signed when the request was. */
static size_t finish_reply(inmsg_t *im, uint8_t *out, size_t len, size_t cap)
{
    if (!im->tsig)
        return len;
    size_t nl = len;
    if (im->tsig_err) {
        if (tsig_append_error(im->ctx, out, len, cap, now_s(), &nl) < 0)
            return len;
        return nl;
    }
    if (tsig_sign_response(im->ctx, out, len, cap, now_s(), &nl) < 0)
        return len;
    return nl;
}

static size_t error_reply(inmsg_t *im, const uint8_t *req, uint8_t *out, size_t cap, unsigned rcode)
{
    size_t n = reply_head(out, req, im->q.question_len, rcode, false);
    return finish_reply(im, out, n, cap);
}

/* A NOTIFY for a zone we are secondary for (RFC 1996 §3.7): NOERROR, and a refresh now. */
static size_t on_notify(xfr_t *x, inmsg_t *im, const uint8_t *req,
                        const struct sockaddr_storage *peer, uint8_t *out, size_t cap)
{
    char from[64];
    addr_text(peer, from, sizeof(from));
    __atomic_add_fetch(&x->stats.notify_received, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&x->mu);
    struct zst *z = find_apex(x, im->q.qname);
    unsigned rcode = WIRE_RC_NOERROR;
    const char *why = NULL;
    if (!z || !z->secondary) {
        rcode = WIRE_RC_NOTAUTH;
        why = "not a secondary zone here";
    } else {
        bool allowed = false;
        if (z->allow_notify.n)
            allowed = prefix_match(&z->allow_notify, peer);
        else
            for (size_t i = 0; i < z->nprim && !allowed; i++)
                allowed = same_host(&z->prim[i].addr, peer);
        int need = -1;
        for (size_t i = 0; i < z->nprim && need < 0; i++)
            if (same_host(&z->prim[i].addr, peer))
                need = z->prim_key[i];
        if (!allowed) {
            rcode = WIRE_RC_REFUSED;
            why = "not in allow_notify (or a primary)";
        } else if (need >= 0 && (!im->tsig || strcasecmp(im->key->name, x->keys[need].name))) {
            rcode = WIRE_RC_NOTAUTH;
            why = "not signed with the primary's key";
        } else {
            z->notified = true;
            pthread_cond_broadcast(&x->pull_cv);
        }
    }
    pthread_mutex_unlock(&x->mu);
    char zn[DNAME_KEY_MAX];
    if (dname_to_str(im->q.qname, zn, sizeof(zn)) < 0)
        snprintf(zn, sizeof(zn), "?");
    if (why) {
        if (refusal_log_ok())
            log_info("xfr: NOTIFY for %s from %s refused: %s", zn, from, why);
    } else {
        log_info("xfr: NOTIFY for %s from %s: refreshing", zn, from);
    }
    size_t n = reply_head(out, req, im->q.question_len, rcode, rcode == WIRE_RC_NOERROR);
    tern_wr16(out + 2, (uint16_t)(tern_rd16(out + 2) | (WIRE_OP_NOTIFY << 11)));
    return finish_reply(im, out, n, cap);
}

/* A signed query (not a transfer): the SOA of a zone apex, which is what secondaries ask
 * before IXFR; anything else is REFUSED (signed answers are for transfer peers). */
static size_t on_signed_query(xfr_t *x, inmsg_t *im, const uint8_t *req, uint8_t *out, size_t cap,
                              bool udp)
{
    if (im->q.qtype == WIRE_T_IXFR && udp) {
        size_t n = reply_head(out, req, im->q.question_len, WIRE_RC_NOERROR, true);
        tern_wr16(out + 2, (uint16_t)(tern_rd16(out + 2) | WIRE_FLAG_TC));
        return finish_reply(im, out, n, cap);
    }
    if (im->q.qtype != WIRE_T_SOA)
        return error_reply(im, req, out, cap, WIRE_RC_REFUSED);
    zone_t *z = pin_zone(x, im->q.qname);
    if (!z || z->unavailable) {
        size_t n = error_reply(im, req, out, cap, z ? WIRE_RC_SERVFAIL : WIRE_RC_REFUSED);
        zone_free(z);
        return n;
    }
    size_t n = reply_head(out, req, im->q.question_len, WIRE_RC_NOERROR, true);
    const zone_rrset_t *soa = z->soa;
    size_t rdlen = tern_rd16(soa->rdata);
    if (n + 12 + rdlen + 512 < cap) {
        tern_wr16(out + n, 0xC00C);
        tern_wr16(out + n + 2, WIRE_T_SOA);
        tern_wr16(out + n + 4, WIRE_CLASS_IN);
        tern_wr32(out + n + 6, soa->ttl);
        tern_wr16(out + n + 10, (uint16_t)rdlen);
        memcpy(out + n + 12, soa->rdata + 2, rdlen);
        n += 12 + rdlen;
        tern_wr16(out + 6, 1);
    }
    zone_free(z);
    return finish_reply(im, out, n, cap);
}

static void oconn_close(xfr_t *x, struct oconn *c)
{
    (void)x;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->gen++;
    xfr_stream_free(c->st);
    c->st = NULL;
    zone_free(c->zone);
    c->zone = NULL;
    c->rlen = c->woff = c->wlen = 0;
    c->closing = c->eof = false;
    tsig_ctx_clear(&c->tsig);
    tsig_ctx_init(&c->tsig);
    explicit_bzero(&c->key, sizeof(c->key));
}

/* Queue one reply of n bytes at wbuf + 2 (length prefix written here). */
static void oconn_queue(struct oconn *c, size_t n)
{
    tern_wr16(c->wbuf, (uint16_t)n);
    c->woff = 0;
    c->wlen = 2 + n;
}

static void transfer_done(xfr_t *x, struct oconn *c, bool ok)
{
    char peer[64];
    addr_text(&c->peer, peer, sizeof(peer));
    uint64_t recs = c->st ? xfr_stream_records(c->st) : 0;
    if (ok) {
        log_info("xfr: %s %s serial %u to %s: %llu records in %zu messages, %lld ms", c->kind,
                 c->zname, c->serial, peer, (unsigned long long)recs, c->msgs,
                 (long long)(tern_monotonic_ms() - c->start_ms));
        __atomic_add_fetch(strcmp(c->kind, "IXFR") == 0 ? &x->stats.out_ixfr : &x->stats.out_axfr,
                           1, __ATOMIC_RELAXED);
        pthread_mutex_lock(&x->mu);
        for (size_t i = 0; i < x->nzones; i++) {
            struct zst *z = x->zones[i];
            if (strcmp(z->key, c->zname) != 0)
                continue;
            z->out_when = (int64_t)now_s();
            snprintf(z->out_peer, sizeof(z->out_peer), "%s", peer);
            snprintf(z->out_kind, sizeof(z->out_kind), "%s", c->kind);
            z->out_serial = c->serial;
            z->out_records = recs;
            z->out_count++;
        }
        pthread_mutex_unlock(&x->mu);
    } else {
        log_warn("xfr: %s %s to %s failed after %llu records (the client went away or stalled)",
                 c->kind, c->zname, peer, (unsigned long long)recs);
        __atomic_add_fetch(&x->stats.out_failed, 1, __ATOMIC_RELAXED);
    }
    xfr_stream_free(c->st);
    c->st = NULL;
    zone_free(c->zone);
    c->zone = NULL;
}

/* The next message of c's stream into wbuf, signed when the request was. false: done or
 * failed (c->st freed). */
static bool next_message(xfr_t *x, struct oconn *c)
{
    size_t reserve = c->tsig_on ? tsig_rr_size(&c->key) : 0, len = 0;
    int rc = xfr_stream_next(c->st, c->wbuf + 2, XFR_OUT_MSG, reserve, &len);
    if (rc < 0) {
        log_err("xfr: %s %s: %s", c->kind, c->zname, tern_strerror(rc));
        transfer_done(x, c, false);
        c->closing = true;
        return false;
    }
    if (c->tsig_on) {
        size_t nl = len;
        if (tsig_sign_response(&c->tsig, c->wbuf + 2, len, XFR_OUT_MSG, now_s(), &nl) < 0) {
            log_err("xfr: %s %s: cannot sign a message", c->kind, c->zname);
            transfer_done(x, c, false);
            c->closing = true;
            return false;
        }
        len = nl;
    }
    c->msgs++;
    oconn_queue(c, len);
    if (rc == 0)
        transfer_done(x, c, true); /* the last one is queued */
    return true;
}

/* A transfer request on c: check, pin, start the stream (its first message queued). */
static void start_transfer(xfr_t *x, struct oconn *c, inmsg_t *im, const uint8_t *req, size_t len)
{
    uint8_t *out = c->wbuf + 2;
    char peer[64];
    addr_text(&c->peer, peer, sizeof(peer));
    if (dname_to_str(im->q.qname, c->zname, sizeof(c->zname)) < 0)
        snprintf(c->zname, sizeof(c->zname), "?");
    size_t zl = strlen(c->zname);
    if (zl > 1 && c->zname[zl - 1] == '.')
        c->zname[zl - 1] = '\0';
    for (char *p = c->zname; *p; p++)
        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    snprintf(c->kind, sizeof(c->kind), "%s", im->q.qtype == WIRE_T_IXFR ? "IXFR" : "AXFR");
    /* who may: the zone's allow_transfer, and its key when one is set */
    pthread_mutex_lock(&x->mu);
    struct zst *z = find_apex(x, im->q.qname);
    const char *why = NULL;
    if (!z || !z->allow_transfer.n)
        why = "no allow_transfer for the zone";
    else if (!prefix_match(&z->allow_transfer, &c->peer))
        why = "address not in allow_transfer";
    else if (z->transfer_key >= 0 &&
             (!im->tsig || strcasecmp(im->key->name, x->keys[z->transfer_key].name) != 0))
        why = "not signed with transfer_key";
    xfr_delta_t **chain = NULL;
    size_t nchain = 0;
    bool have_chain = false;
    uint32_t client = 0;
    if (!why && im->q.qtype == WIRE_T_IXFR) {
        if (!ixfr_client_serial(req, len, 12 + im->q.question_len, &client))
            why = "IXFR without the client's SOA";
        else if (z->journal && xfr_journal_chain(z->journal, client, &chain, &nchain) == 0)
            have_chain = true;
    }
    pthread_mutex_unlock(&x->mu);
    if (why) {
        if (refusal_log_ok())
            log_info("xfr: %s %s from %s refused: %s", c->kind, c->zname, peer, why);
        __atomic_add_fetch(&x->stats.out_refused, 1, __ATOMIC_RELAXED);
        oconn_queue(c, error_reply(im, req, out, XFR_OUT_MSG,
                                   im->tsig_err ? WIRE_RC_NOTAUTH : WIRE_RC_REFUSED));
        c->closing = true;
        return;
    }
    zone_t *zone = pin_zone(x, im->q.qname);
    if (!zone || zone->unavailable) {
        log_info("xfr: %s %s from %s: the zone has no data (SERVFAIL)", c->kind, c->zname, peer);
        oconn_queue(c, error_reply(im, req, out, XFR_OUT_MSG, WIRE_RC_SERVFAIL));
        zone_free(zone);
        for (size_t i = 0; i < nchain; i++)
            xfr_delta_release(chain[i]);
        free(chain);
        c->closing = true;
        return;
    }
    c->serial = zone->serial;
    if (im->q.qtype == WIRE_T_IXFR) {
        static xfr_delta_t *const none[1] = {NULL};
        if (!xfr_serial_lt(client, zone->serial)) {
            c->st = xfr_stream_ixfr(zone, none, 0, req, len); /* up to date: the SOA alone */
        } else if (have_chain && nchain > 0 && xfr_delta_to(chain[nchain - 1]) == zone->serial) {
            c->st = xfr_stream_ixfr(zone, chain, nchain, req, len);
        } else {
            /* not in the journal: the whole zone, in IXFR's AXFR-style form (RFC 1995 §4) */
            c->st = xfr_stream_ixfr(zone, NULL, 0, req, len);
            snprintf(c->kind, sizeof(c->kind), "AXFR");
        }
    } else {
        c->st = xfr_stream_axfr(zone, req, len);
    }
    for (size_t i = 0; i < nchain; i++)
        xfr_delta_release(chain[i]);
    free(chain);
    if (!c->st) {
        zone_free(zone);
        oconn_queue(c, error_reply(im, req, out, XFR_OUT_MSG, WIRE_RC_SERVFAIL));
        c->closing = true;
        return;
    }
    c->zone = zone;
    c->tsig_on = im->tsig; /* c->tsig and c->key hold the request's transaction already */
    c->start_ms = tern_monotonic_ms();
    c->msgs = 0;
    (void)next_message(x, c);
}

/* Handle the complete messages in c's read buffer while nothing is being written. */
static void oconn_process(xfr_t *x, struct oconn *c)
{
    while (!c->st && !c->closing && c->woff == c->wlen && c->rlen >= 2) {
        size_t mlen = tern_rd16(c->rbuf);
        if (mlen == 0) {
            c->closing = true;
            return;
        }
        if (c->rlen < 2 + mlen)
            return;
        uint8_t *m = c->rbuf + 2;
        inmsg_t *im = malloc(sizeof(*im));
        if (!im) {
            c->closing = true;
            return;
        }
        im->ctx = &c->tsig;
        im->key = &c->key;
        check_msg(x, m, mlen, im);
        size_t n = 0;
        uint8_t *out = c->wbuf + 2;
        unsigned op = mlen >= 12 ? WIRE_OPCODE(tern_rd16(m + 2)) : 0;
        if (!im->ok) {
            if (im->q.has_question) {
                n = reply_head(out, m, im->q.question_len, WIRE_RC_FORMERR, false);
                oconn_queue(c, n);
            }
            c->closing = true;
        } else if (im->tsig_err) {
            oconn_queue(c, error_reply(im, m, out, XFR_OUT_MSG, WIRE_RC_NOTAUTH));
            c->closing = true;
        } else if (op == WIRE_OP_NOTIFY) {
            oconn_queue(c, on_notify(x, im, m, &c->peer, out, XFR_OUT_MSG));
        } else if (op == WIRE_OP_QUERY &&
                   (im->q.qtype == WIRE_T_AXFR || im->q.qtype == WIRE_T_IXFR)) {
            start_transfer(x, c, im, m, mlen);
        } else if (im->tsig) {
            oconn_queue(c, on_signed_query(x, im, m, out, XFR_OUT_MSG, false));
        } else {
            c->closing = true; /* a plain query: a worker's job; the client reconnects */
        }
        free(im);
        memmove(c->rbuf, c->rbuf + 2 + mlen, c->rlen - 2 - mlen);
        c->rlen -= 2 + mlen;
    }
}

/* Write what is queued; refill from the stream. Returns false when c is to be closed. */
static bool oconn_write(xfr_t *x, struct oconn *c)
{
    for (;;) {
        while (c->woff < c->wlen) {
            ssize_t k = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
            if (k < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return true;
                if (errno == EINTR)
                    continue;
                if (c->st)
                    transfer_done(x, c, false);
                return false;
            }
            c->woff += (size_t)k;
            c->deadline = tern_monotonic_ms() + XFR_IDLE_MS;
        }
        c->woff = c->wlen = 0;
        if (c->st) {
            if (!next_message(x, c))
                return !c->closing;
            continue;
        }
        if (c->closing)
            return false;
        oconn_process(x, c);
        if (c->woff == c->wlen)
            return !c->closing;
    }
}

static void oconn_arm(xfr_t *x, struct oconn *c, size_t idx)
{
    struct epoll_event ev = {.events = (c->eof ? 0 : EPOLLIN) | (c->woff < c->wlen ? EPOLLOUT : 0),
                             .data.u64 = (uint64_t)c->gen << 32 | (idx + 1)};
    if (epoll_ctl(x->out_ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        (void)epoll_ctl(x->out_ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void oconn_event(xfr_t *x, uint64_t tag, uint32_t events)
{
    size_t idx = (size_t)(tag & 0xFFFFFFFFu) - 1;
    struct oconn *c = &x->conns[idx];
    if (c->fd < 0 || c->gen != (uint32_t)(tag >> 32))
        return;
    if (events & EPOLLERR) {
        if (c->st)
            transfer_done(x, c, false);
        oconn_close(x, c);
        return;
    }
    if ((events & (EPOLLIN | EPOLLHUP)) && !c->eof && c->rlen < RBUF_CAP) {
        ssize_t k = recv(c->fd, c->rbuf + c->rlen, RBUF_CAP - c->rlen, MSG_DONTWAIT);
        if (k == 0) {
            /* the client has sent all it will (a half-close is legitimate): finish what it
             * asked for, then close */
            c->eof = true;
        } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            if (c->st)
                transfer_done(x, c, false);
            oconn_close(x, c);
            return;
        } else if (k > 0) {
            c->rlen += (size_t)k;
            /* progress is a whole message: a peer trickling one byte at a time, or sending a
             * length and stalling, neither refreshes its deadline nor counts as busy for
             * oconn_victim() */
            if (c->rlen >= 2 && c->rlen >= 2u + tern_rd16(c->rbuf))
                c->deadline = tern_monotonic_ms() + XFR_IDLE_MS;
        }
    }
    oconn_process(x, c);
    if (!oconn_write(x, c) || (c->eof && !c->st && c->woff == c->wlen)) {
        oconn_close(x, c);
        return;
    }
    oconn_arm(x, c, idx);
}

/* Nothing in progress on c: no transfer being sent, nothing half-read, nothing queued to write.
 * Such a connection only waits for its client's next request. */
static bool oconn_idle(const struct oconn *c)
{
    return c->fd >= 0 && !c->st && !c->closing && c->rlen == 0 && c->woff == c->wlen;
}

/* The last progress on c: a whole message read, or bytes written (the idle deadline's start). */
static int64_t oconn_active(const struct oconn *c)
{
    return c->deadline - XFR_IDLE_MS;
}

/* How many connections the address of c holds, and how many of them are idle. */
static void oconn_count(const xfr_t *x, const struct sockaddr_storage *peer, size_t *all,
                        size_t *idle)
{
    *all = *idle = 0;
    for (size_t i = 0; i < XFR_CONNS_MAX; i++) {
        const struct oconn *c = &x->conns[i];
        if (c->fd < 0 || !same_host(&c->peer, peer))
            continue;
        (*all)++;
        *idle += oconn_idle(c);
    }
}

/*
 * The connection a newcomer closes, or NULL (the newcomer is refused). Only connections of
 * peer's address when own (the newcomer's address is at XFR_CONNS_PER_ADDR), else any:
 *   1. an idle one of the address holding the most idle connections, the one idle longest:
 *      whoever hoards slots pays first, so many addresses each holding one connection open after
 *      a NOTIFY or a finished transfer cannot lock a secondary out;
 *   2. with none idle, the busy one quiet longest if it has made no progress for
 *      XFR_EVICT_QUIET_MS (stalled mid-message, or not reading its transfer).
 * A transfer that made progress within XFR_EVICT_QUIET_MS is never chosen. 64 slots: counting
 * by scanning (64 x 64 address compares) costs less than keeping counts in step.
 */
static struct oconn *oconn_victim(xfr_t *x, const struct sockaddr_storage *peer, bool own,
                                  int64_t now)
{
    struct oconn *best = NULL, *stalled = NULL;
    size_t best_n = 0;
    for (size_t i = 0; i < XFR_CONNS_MAX; i++) {
        struct oconn *c = &x->conns[i];
        if (c->fd < 0 || (own && !same_host(&c->peer, peer)))
            continue;
        if (!oconn_idle(c)) {
            if (now - oconn_active(c) >= XFR_EVICT_QUIET_MS &&
                (!stalled || oconn_active(c) < oconn_active(stalled)))
                stalled = c;
            continue;
        }
        size_t all, n;
        oconn_count(x, &c->peer, &all, &n);
        if (!best || n > best_n || (n == best_n && oconn_active(c) < oconn_active(best))) {
            best = c;
            best_n = n;
        }
    }
    return best ? best : stalled;
}

/* A newcomer is turned away: every slot it could take (its address's own when own) is busy.
 * Counted, logged at most REFUSAL_LOG_PER_S a second. */
static void oconn_refuse(xfr_t *x, struct req *r, bool own)
{
    __atomic_add_fetch(&x->stats.out_conn_refused, 1, __ATOMIC_RELAXED);
    if (refusal_log_ok()) {
        char peer[64];
        addr_text(&r->peer, peer, sizeof(peer));
        log_warn("xfr: connection from %s closed: %s %d transfer connections, all busy", peer,
                 own ? "its address holds" : "the thread holds",
                 own ? XFR_CONNS_PER_ADDR : XFR_CONNS_MAX);
    }
    close(r->fd);
}

static void take_tcp(xfr_t *x, struct req *r)
{
    int64_t now = tern_monotonic_ms();
    size_t mine, mine_idle, i = 0;
    oconn_count(x, &r->peer, &mine, &mine_idle);
    struct oconn *c = NULL;
    if (mine >= XFR_CONNS_PER_ADDR) {
        c = oconn_victim(x, &r->peer, true, now);
        if (!c) {
            oconn_refuse(x, r, true);
            return;
        }
    } else {
        while (i < XFR_CONNS_MAX && x->conns[i].fd >= 0)
            i++;
        if (i == XFR_CONNS_MAX && !(c = oconn_victim(x, &r->peer, false, now))) {
            oconn_refuse(x, r, false);
            return;
        }
    }
    if (c) {
        if (c->st)
            transfer_done(x, c, false);
        oconn_close(x, c);
        __atomic_add_fetch(&x->stats.out_conn_evicted, 1, __ATOMIC_RELAXED);
        i = (size_t)(c - x->conns);
    }
    c = &x->conns[i];
    c->fd = r->fd;
    c->peer = r->peer;
    c->local = r->local;
    memcpy(c->rbuf, r->buf, r->len);
    c->rlen = r->len;
    c->woff = c->wlen = 0;
    c->closing = c->eof = false;
    c->deadline = now + XFR_IDLE_MS;
    oconn_process(x, c);
    if (!oconn_write(x, c)) {
        oconn_close(x, c);
        return;
    }
    oconn_arm(x, c, i);
}

static void take_udp(xfr_t *x, struct req *r)
{
    uint8_t out[4096];
    inmsg_t *im = malloc(sizeof(*im));
    tsig_key_t *key = malloc(sizeof(*key));
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    if (!im || !key) {
        free(im);
        free(key);
        return;
    }
    im->ctx = &ctx;
    im->key = key;
    check_msg(x, r->buf, r->len, im);
    size_t n = 0;
    unsigned op = r->len >= 12 ? WIRE_OPCODE(tern_rd16(r->buf + 2)) : 0;
    if (!im->ok) {
        if (im->q.has_question)
            n = reply_head(out, r->buf, im->q.question_len, WIRE_RC_FORMERR, false);
    } else if (im->tsig_err) {
        n = error_reply(im, r->buf, out, sizeof(out), WIRE_RC_NOTAUTH);
    } else if (op == WIRE_OP_NOTIFY) {
        n = on_notify(x, im, r->buf, &r->peer, out, sizeof(out));
    } else if (op == WIRE_OP_QUERY && im->tsig) {
        n = on_signed_query(x, im, r->buf, out, sizeof(out), true);
    } else {
        n = error_reply(im, r->buf, out, sizeof(out), WIRE_RC_REFUSED);
    }
    tsig_ctx_clear(&ctx);
    explicit_bzero(key, sizeof(*key));
    free(key);
    free(im);
    if (n)
        udp_reply(r, out, n);
}

static void *out_main(void *arg)
{
    xfr_t *x = arg;
    (void)pthread_setname_np(pthread_self(), "tern-xfr-out");
    tern_rcu_register();
    tern_rcu_offline();
    struct epoll_event evs[32];
    for (;;) {
        int n = epoll_wait(x->out_ep, evs, 32, 1000);
        pthread_mutex_lock(&x->mu);
        bool stop = x->stop;
        pthread_mutex_unlock(&x->mu);
        if (stop)
            break;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == 0) {
                ev_drain(x->out_ev);
                for (;;) {
                    pthread_mutex_lock(&x->qmu);
                    if (x->qlen == 0) {
                        pthread_mutex_unlock(&x->qmu);
                        break;
                    }
                    /* copy out of the slot so workers may refill it meanwhile */
                    struct req *s = &x->q[x->qhead];
                    struct req r = *s;
                    r.buf = malloc(s->len ? s->len : 1);
                    if (r.buf)
                        memcpy(r.buf, s->buf, s->len);
                    x->qhead = (x->qhead + 1) % XFR_QUEUE_MAX;
                    x->qlen--;
                    pthread_mutex_unlock(&x->qmu);
                    if (!r.buf) {
                        if (r.tcp)
                            close(r.fd);
                        continue;
                    }
                    if (r.tcp)
                        take_tcp(x, &r);
                    else
                        take_udp(x, &r);
                    free(r.buf);
                }
            } else {
                oconn_event(x, evs[i].data.u64, evs[i].events);
            }
        }
        int64_t now = tern_monotonic_ms();
        for (size_t i = 0; i < XFR_CONNS_MAX; i++) {
            struct oconn *c = &x->conns[i];
            if (c->fd >= 0 && now > c->deadline) {
                if (c->st)
                    transfer_done(x, c, false);
                oconn_close(x, c);
            }
        }
    }
    for (size_t i = 0; i < XFR_CONNS_MAX; i++)
        if (x->conns[i].fd >= 0)
            oconn_close(x, &x->conns[i]);
    tern_rcu_unregister();
    return NULL;
}

/* ---- the in thread: journals, NOTIFY out ------------------------------------------------- */

static void journal_change(xfr_t *x, struct change *ch)
{
    xfr_delta_t *d = NULL;
    bool serial_up = ch->old && xfr_serial_lt(ch->old->serial, ch->new->serial);
    if (ch->old && serial_up)
        d = xfr_diff(ch->old, ch->new);
    pthread_mutex_lock(&x->mu);
    struct zst *z = find_zone(x, ch->key);
    if (z) {
        if (ch->old && !serial_up && ch->old->serial == ch->new->serial) {
            if (!z->warned_serial)
                log_warn("xfr: zone %s changed but its serial (%u) did not: secondaries keep "
                         "the old data until it increases",
                         ch->key, ch->new->serial);
            z->warned_serial = true;
        } else if (ch->old && !serial_up) {
            log_warn("xfr: zone %s: serial went back from %u to %u; IXFR history dropped", ch->key,
                     ch->old->serial, ch->new->serial);
            if (z->journal)
                xfr_journal_clear(z->journal);
        } else {
            z->warned_serial = false;
        }
        if (d && z->journal) {
            xfr_journal_add(z->journal, d);
            d = NULL;
        }
        z->serial = ch->new->serial;
        if (!ch->old || serial_up) {
            int64_t now = tern_monotonic_ms();
            for (size_t i = 0; i < z->nnt; i++) {
                struct ntarget *t = &z->nt[i];
                t->serial = ch->new->serial;
                t->pending = true;
                t->acked = false;
                t->attempts = 0;
                t->next_ms = now;
            }
        }
    }
    pthread_mutex_unlock(&x->mu);
    if (d)
        xfr_delta_release(d);
    zone_free(ch->old);
    zone_free(ch->new);
    free(ch->key);
}

/* A NOTIFY for zone apex with serial, id; signed with key when not NULL. */
static size_t make_notify(uint8_t *m, size_t cap, const uint8_t *apex, size_t alen, uint32_t serial,
                          uint16_t id, const tsig_key_t *key, tsig_ctx_t *ctx)
{
    memset(m, 0, 12);
    tern_wr16(m, id);
    tern_wr16(m + 2, (uint16_t)(WIRE_OP_NOTIFY << 11 | WIRE_FLAG_AA));
    tern_wr16(m + 4, 1);
    tern_wr16(m + 6, 1);
    size_t n = 12;
    memcpy(m + n, apex, alen);
    n += alen;
    tern_wr16(m + n, WIRE_T_SOA);
    tern_wr16(m + n + 2, WIRE_CLASS_IN);
    n += 4;
    /* RFC 1996 §3.7: the new SOA's serial as a hint (the rest of the SOA is not needed) */
    tern_wr16(m + n, 0xC00C);
    tern_wr16(m + n + 2, WIRE_T_SOA);
    tern_wr16(m + n + 4, WIRE_CLASS_IN);
    tern_wr32(m + n + 6, 0);
    tern_wr16(m + n + 10, 2 + 20);
    m[n + 12] = 0; /* mname: root */
    m[n + 13] = 0; /* rname: root */
    memset(m + n + 14, 0, 20);
    tern_wr32(m + n + 14, serial);
    n += 12 + 22;
    if (key) {
        size_t nl = n;
        if (tsig_sign_request(ctx, key, m, n, cap, now_s(), &nl) == 0)
            n = nl;
    }
    return n;
}

static void notify_send(xfr_t *x, int64_t now)
{
    pthread_mutex_lock(&x->mu);
    for (size_t i = 0; i < x->nzones; i++) {
        struct zst *z = x->zones[i];
        for (size_t k = 0; k < z->nnt; k++) {
            struct ntarget *t = &z->nt[k];
            if (!t->pending || t->next_ms > now)
                continue;
            if (t->attempts >= x->notify_retries) {
                log_warn("xfr: NOTIFY %s serial %u to %s: no answer after %u sends", z->key,
                         t->serial, t->peer.text, t->attempts);
                __atomic_add_fetch(&x->stats.notify_failed, 1, __ATOMIC_RELAXED);
                t->pending = false;
                continue;
            }
            uint8_t m[1024];
            tsig_ctx_t ctx;
            tsig_ctx_init(&ctx);
            uint16_t id;
            if (getrandom(&id, sizeof(id), 0) != sizeof(id))
                id = (uint16_t)now;
            t->id = id;
            const tsig_key_t *key = t->key >= 0 ? &x->keys[t->key] : NULL;
            size_t n = make_notify(m, sizeof(m), z->apex, z->apex_len, t->serial, id, key, &ctx);
            tsig_ctx_clear(&ctx);
            int fd = t->peer.addr.ss_family == AF_INET ? x->ns4 : x->ns6;
            if (fd >= 0)
                (void)sendto(fd, m, n, MSG_DONTWAIT, (const struct sockaddr *)&t->peer.addr,
                             t->peer.addr_len);
            if (t->attempts == 0)
                log_info("xfr: NOTIFY %s serial %u to %s", z->key, t->serial, t->peer.text);
            else
                log_debug("xfr: NOTIFY %s serial %u to %s again (send %u)", z->key, t->serial,
                          t->peer.text, t->attempts + 1);
            t->attempts++;
            t->next_ms = now + x->notify_timeout_ms;
            __atomic_add_fetch(&x->stats.notify_sent, 1, __ATOMIC_RELAXED);
        }
    }
    pthread_mutex_unlock(&x->mu);
}

/* Answers to our NOTIFYs on socket fd. */
static void notify_recv(xfr_t *x, int fd)
{
    for (;;) {
        uint8_t m[4096];
        struct sockaddr_storage from;
        socklen_t fl = sizeof(from);
        ssize_t k = recvfrom(fd, m, sizeof(m), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        if (k < 12)
            return;
        uint16_t id = tern_rd16(m), f = tern_rd16(m + 2);
        if (!(f & WIRE_FLAG_QR) || WIRE_OPCODE(f) != WIRE_OP_NOTIFY)
            continue;
        pthread_mutex_lock(&x->mu);
        for (size_t i = 0; i < x->nzones; i++) {
            struct zst *z = x->zones[i];
            for (size_t j = 0; j < z->nnt; j++) {
                struct ntarget *t = &z->nt[j];
                if (!t->pending || t->id != id || !same_host(&t->peer.addr, &from))
                    continue;
                t->pending = false;
                t->acked = WIRE_RCODE(f) == WIRE_RC_NOERROR;
                t->acked_when = (int64_t)now_s();
                if (t->acked)
                    __atomic_add_fetch(&x->stats.notify_acked, 1, __ATOMIC_RELAXED);
                else
                    log_warn("xfr: NOTIFY %s serial %u to %s: answered rcode %u", z->key, t->serial,
                             t->peer.text, WIRE_RCODE(f));
            }
        }
        pthread_mutex_unlock(&x->mu);
    }
}

/* ---- the in thread: secondary zones -------------------------------------------------------- */

/* The pullers' waits are sliced so that a stop (xfr_free()) never waits for a slow primary's
 * deadline: 100 ms is a shutdown nobody notices. */
#define WAIT_SLICE_MS 100

/* poll() one descriptor until the monotonic time until (ms), giving up early when x stops:
 * 1 ready, 0 timed out or stopping (the caller tells which by x->stop), -errno. */
static int wait_fd(xfr_t *x, int fd, short events, int64_t until)
{
    for (;;) {
        if (__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE))
            return 0;
        int64_t left = until - tern_monotonic_ms();
        if (left <= 0)
            return 0;
        struct pollfd pf = {.fd = fd, .events = events};
        int pr = poll(&pf, 1, left < WAIT_SLICE_MS ? (int)left : WAIT_SLICE_MS);
        if (pr > 0)
            return 1;
        if (pr < 0 && errno != EINTR)
            return -errno;
    }
}

/* A socket to peer p, connected (TCP: the handshake done by until). fd or a negative code:
 * TERN_ETIMEDOUT when until passed (or x stops). */
static int connect_to(xfr_t *x, const config_xfr_peer_t *p, int type, int64_t until)
{
    int fd = socket(p->addr.ss_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (const struct sockaddr *)&p->addr, p->addr_len) < 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (type == SOCK_STREAM) {
        int rc = wait_fd(x, fd, POLLOUT, until);
        if (rc != 1) {
            close(fd);
            return rc < 0 ? rc : TERN_ETIMEDOUT;
        }
        int err = 0;
        socklen_t el = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            close(fd);
            return -err;
        }
    }
    return fd;
}

/* Write or read len bytes by until: 0, TERN_ETIMEDOUT, TERN_ECONNRESET (closed) or -errno. */
static int io_all(xfr_t *x, int fd, uint8_t *buf, size_t len, bool wr, int64_t until)
{
    size_t done = 0;
    while (done < len) {
        int pr = wait_fd(x, fd, wr ? POLLOUT : POLLIN, until);
        if (pr == 0)
            return TERN_ETIMEDOUT;
        if (pr < 0)
            return pr;
        ssize_t k = wr ? send(fd, buf + done, len - done, MSG_NOSIGNAL)
                       : recv(fd, buf + done, len - done, 0);
        if (k == 0)
            return TERN_ECONNRESET;
        if (k < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return -errno;
        }
        done += (size_t)k;
    }
    return 0;
}

typedef struct {
    const uint8_t *apex;
    size_t apex_len;
    config_xfr_peer_t peer;
    bool has_key;
    tsig_key_t key;
    zone_t *base;
    size_t max_bytes;
    /* Deadlines (see step_end()): each step within timeout_ms, the transfer by until, which is
     * total_ms after its start. */
    xfr_t *x; /* whose stop every wait checks */
    int timeout_ms, total_ms;
    int64_t until;
    size_t wire, mem; /* the last transfer's message bytes and memory estimate, for the log */
    char key_name[DNAME_KEY_MAX];
} pull_t;

/*
 * The deadline of the step of p that starts now: one exchange (the SOA query and its answer,
 * the connect, the request written, one message of the answer read whole) must be done within
 * xfr_timeout_ms, and every step by the transfer's total deadline. Per step, not per byte: a
 * primary dripping a byte a second would otherwise keep a message, and the transfer, going for
 * ever (Knot decrements its tcp-remote-io-timeout across a message the same way, in
 * src/contrib/net.c io_exec()). The total deadline is BIND's max-transfer-time-in: a primary
 * sending a small message a second never breaks the per-step deadline.
 */
static int64_t step_end(const pull_t *p)
{
    int64_t step = tern_monotonic_ms() + p->timeout_ms;
    return step < p->until ? step : p->until;
}

/* err for a step (what) that ended with rc at the deadline step (from step_end()); returns rc. */
static int step_failed(const pull_t *p, int rc, int64_t step, const char *what, char *err,
                       size_t errlen)
{
    if (__atomic_load_n(&p->x->stop, __ATOMIC_ACQUIRE))
        snprintf(err, errlen, "%s: stopped (shutting down)", what);
    else if (rc != TERN_ETIMEDOUT)
        snprintf(err, errlen, "%s: %s", what, tern_strerror(rc));
    else if (step >= p->until)
        snprintf(err, errlen, "%s: the transfer was not done within %d ms (xfr_total_timeout_ms)",
                 what, p->total_ms);
    else
        snprintf(err, errlen, "%s: not done in %d ms (xfr_timeout_ms)", what, p->timeout_ms);
    return rc;
}

static int soa_exchange(pull_t *p, tsig_ctx_t *ctxp, uint8_t *m, size_t n, uint16_t id,
                        uint32_t *serial, char *err, size_t errlen);

/* The primary's serial (SOA over UDP, signed when a key is set). 0 or negative, err set. */
static int query_soa(pull_t *p, uint32_t *serial, char *err, size_t errlen)
{
    uint8_t m[1024];
    uint16_t id;
    if (getrandom(&id, sizeof(id), 0) != sizeof(id))
        id = 0x5a5a;
    memset(m, 0, 12);
    tern_wr16(m, id);
    tern_wr16(m + 4, 1);
    size_t n = 12;
    memcpy(m + n, p->apex, p->apex_len);
    n += p->apex_len;
    tern_wr16(m + n, WIRE_T_SOA);
    tern_wr16(m + n + 2, WIRE_CLASS_IN);
    n += 4;
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    int rc = soa_exchange(p, &ctx, m, n, id, serial, err, errlen);
    tsig_ctx_clear(&ctx);
    return rc;
}

static int soa_exchange(pull_t *p, tsig_ctx_t *ctxp, uint8_t *m, size_t n, uint16_t id,
                        uint32_t *serial, char *err, size_t errlen)
{
    if (p->has_key && tsig_sign_request(ctxp, &p->key, m, n, 1024, now_s(), &n) < 0) {
        snprintf(err, errlen, "cannot sign the SOA query");
        return TERN_EINVAL;
    }
    char what[96];
    snprintf(what, sizeof(what), "SOA query to %s", p->peer.text);
    p->until = tern_monotonic_ms() + p->total_ms;
    int64_t step = step_end(p);
    int fd = connect_to(p->x, &p->peer, SOCK_DGRAM, step);
    if (fd < 0)
        return step_failed(p, fd, step, what, err, errlen);
    (void)send(fd, m, n, MSG_NOSIGNAL);
    for (;;) {
        int wr = wait_fd(p->x, fd, POLLIN, step);
        if (wr != 1) {
            close(fd);
            return step_failed(p, wr < 0 ? wr : TERN_ETIMEDOUT, step, what, err, errlen);
        }
        uint8_t r[4096];
        ssize_t k = recv(fd, r, sizeof(r), 0);
        if (k < 12 || tern_rd16(r) != id || !(tern_rd16(r + 2) & WIRE_FLAG_QR))
            continue;
        close(fd);
        size_t len = (size_t)k;
        if (p->has_key) {
            size_t stripped = len;
            int rc = tsig_verify_response(ctxp, r, len, now_s(), &stripped);
            if (rc != 0) {
                snprintf(err, errlen, "SOA answer from %s: TSIG: %s%s%s", p->peer.text,
                         tsig_strerror(rc), rc == TSIG_EPEER ? " " : "",
                         rc == TSIG_EPEER ? tsig_error_name(ctxp->peer_error) : "");
                return TERN_EACCES;
            }
            len = stripped;
        }
        unsigned rc = WIRE_RCODE(tern_rd16(r + 2));
        if (rc != WIRE_RC_NOERROR || tern_rd16(r + 6) < 1) {
            snprintf(err, errlen, "SOA query to %s: rcode %u, %u answers", p->peer.text, rc,
                     tern_rd16(r + 6));
            return TERN_EPROTO;
        }
        size_t pos = 12;
        if (dname_unpack(r, len, len, &pos, NULL, NULL) < 0 || len - pos < 4) {
            snprintf(err, errlen, "SOA answer from %s: malformed", p->peer.text);
            return TERN_EPROTO;
        }
        pos += 4;
        if (dname_unpack(r, len, len, &pos, NULL, NULL) < 0 || len - pos < 10 ||
            tern_rd16(r + pos) != WIRE_T_SOA) {
            snprintf(err, errlen, "SOA answer from %s: no SOA", p->peer.text);
            return TERN_EPROTO;
        }
        size_t rdlen = tern_rd16(r + pos + 8), rd = pos + 10;
        if (len - rd < rdlen || rdlen < 22) {
            snprintf(err, errlen, "SOA answer from %s: malformed SOA", p->peer.text);
            return TERN_EPROTO;
        }
        *serial = tern_rd32(r + rd + rdlen - 20);
        return 0;
    }
}

/* Transfer the zone from p (IXFR from p->base's serial, else AXFR). 0 with *out (new version),
 * 1: up to date, negative with err. */
static int pull(pull_t *p, bool ixfr, zone_t **out, const char **kind, uint64_t *records, char *err,
                size_t errlen)
{
    uint8_t *m = malloc(RBUF_CAP + 512);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    uint16_t id;
    if (getrandom(&id, sizeof(id), 0) != sizeof(id))
        id = 0x4242;
    uint8_t *q = m + 2;
    memset(q, 0, 12);
    tern_wr16(q, id);
    tern_wr16(q + 4, 1);
    size_t n = 12;
    memcpy(q + n, p->apex, p->apex_len);
    n += p->apex_len;
    uint16_t qtype = ixfr ? WIRE_T_IXFR : WIRE_T_AXFR;
    tern_wr16(q + n, qtype);
    tern_wr16(q + n + 2, WIRE_CLASS_IN);
    n += 4;
    if (ixfr) {
        /* RFC 1995 §3: our SOA in the authority section */
        const zone_rrset_t *soa = p->base->soa;
        size_t rdlen = tern_rd16(soa->rdata);
        tern_wr16(q + 8, 1);
        tern_wr16(q + n, 0xC00C);
        tern_wr16(q + n + 2, WIRE_T_SOA);
        tern_wr16(q + n + 4, WIRE_CLASS_IN);
        tern_wr32(q + n + 6, soa->ttl);
        tern_wr16(q + n + 10, (uint16_t)rdlen);
        memcpy(q + n + 12, soa->rdata + 2, rdlen);
        n += 12 + rdlen;
    }
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    if (p->has_key && tsig_sign_request(&ctx, &p->key, q, n, RBUF_CAP, now_s(), &n) < 0) {
        free(m);
        tsig_ctx_clear(&ctx);
        snprintf(err, errlen, "cannot sign the request");
        return TERN_EINVAL;
    }
    tern_wr16(m, (uint16_t)n);
    char what[96];
    snprintf(what, sizeof(what), "connect to %s", p->peer.text);
    p->until = tern_monotonic_ms() + p->total_ms;
    int64_t step = step_end(p);
    int fd = connect_to(p->x, &p->peer, SOCK_STREAM, step);
    if (fd < 0) {
        free(m);
        tsig_ctx_clear(&ctx);
        return step_failed(p, fd, step, what, err, errlen);
    }
    err[0] = '\0';
    step = step_end(p);
    int rc = io_all(p->x, fd, m, n + 2, true, step);
    if (rc < 0)
        step_failed(p, rc, step, "the request", err, errlen);
    char src[128];
    snprintf(src, sizeof(src), "primary %s", p->peer.text);
    xfr_in_t *xi =
        rc == 0 ? xfr_in_new(p->apex, qtype, ixfr ? p->base : NULL, p->max_bytes, src) : NULL;
    if (rc == 0 && !xi)
        rc = TERN_ENOMEM;
    if (xi)
        xfr_in_set_id(xi, id);
    int more = 1;
    size_t msgs = 0;
    while (rc == 0 && more == 1) {
        /* the whole message, its length and its bytes, within one step */
        step = step_end(p);
        if ((rc = io_all(p->x, fd, m, 2, false, step)) < 0) {
            snprintf(what, sizeof(what), "message %zu", msgs + 1);
            step_failed(p, rc, step, what, err, errlen);
            break;
        }
        size_t len = tern_rd16(m);
        if (len < 12) {
            rc = TERN_EPROTO;
            snprintf(err, errlen, "message %zu: %zu bytes", msgs + 1, len);
            break;
        }
        if ((rc = io_all(p->x, fd, m + 2, len, false, step)) < 0) {
            snprintf(what, sizeof(what), "message %zu", msgs + 1);
            step_failed(p, rc, step, what, err, errlen);
            break;
        }
        msgs++;
        if (p->has_key) {
            size_t stripped = len;
            int tr = tsig_verify_response(&ctx, m + 2, len, now_s(), &stripped);
            if (tr < 0) {
                rc = TERN_EACCES;
                snprintf(err, errlen, "message %zu: TSIG: %s%s%s", msgs, tsig_strerror(tr),
                         tr == TSIG_EPEER ? " " : "",
                         tr == TSIG_EPEER ? tsig_error_name(ctx.peer_error) : "");
                break;
            }
            if (stripped < len) /* the TSIG RR is gone: ARCOUNT says so too */
                tern_wr16(m + 2 + 10, (uint16_t)(tern_rd16(m + 2 + 10) - 1));
            len = stripped;
        }
        more = xfr_in_feed(xi, m + 2, len, err, errlen);
        if (more < 0)
            rc = more;
    }
    close(fd);
    free(m);
    if (rc < 0 && !err[0])
        snprintf(err, errlen, "%s", tern_strerror(rc));
    bool unsigned_end = rc >= 0 && p->has_key && tsig_verify_end(&ctx) != 0;
    tsig_ctx_clear(&ctx);
    if (rc < 0) {
        xfr_in_free(xi);
        return rc;
    }
    if (unsigned_end) {
        xfr_in_free(xi);
        snprintf(err, errlen, "the last message is not signed");
        return TERN_EACCES;
    }
    *records = xfr_in_records(xi);
    p->wire = xfr_in_bytes(xi);
    p->mem = xfr_in_memory(xi);
    xfr_in_kind_t k = xfr_in_kind(xi);
    *kind = k == XFR_IN_INCREMENTAL ? "IXFR" : k == XFR_IN_FULL ? "AXFR" : "IXFR";
    if (k == XFR_IN_UP_TO_DATE) {
        xfr_in_free(xi);
        return 1;
    }
    rc = xfr_in_finish(xi, out, err, errlen);
    xfr_in_free(xi);
    return rc < 0 ? rc : 0;
}

/* SOA timer fields of z (refresh, retry, expire) in ms, bounded. */
static void soa_timers(const zone_t *z, int64_t *refresh, int64_t *retry, int64_t *expire)
{
    const uint8_t *rd = z->soa->rdata + 2;
    size_t rdlen = tern_rd16(z->soa->rdata);
    const uint8_t *t = rd + rdlen - 16;
    int64_t v[3] = {(int64_t)tern_rd32(t) * 1000, (int64_t)tern_rd32(t + 4) * 1000,
                    (int64_t)tern_rd32(t + 8) * 1000};
    for (int i = 0; i < 3; i++)
        v[i] = v[i] < REFRESH_MIN_MS   ? REFRESH_MIN_MS
               : v[i] > REFRESH_MAX_MS ? REFRESH_MAX_MS
                                       : v[i];
    *refresh = v[0];
    *retry = v[1];
    *expire = v[2] * 1;
    if (*expire < *refresh)
        *expire = *refresh;
}

/* A puller: one refresh attempt of secondary zone key, which it marked busy. */
static void refresh_zone(xfr_t *x, const char *key)
{
    pull_t p = {0};
    char zkey[DNAME_KEY_MAX];
    uint8_t apex[DNAME_MAXLEN];
    config_xfr_peer_t prims[8];
    int pkeys[8];
    size_t nprim;
    char *file = NULL;
    /* what this attempt needs, copied under mu; the transfer runs without it */
    pthread_mutex_lock(&x->mu);
    struct zst *z = find_zone(x, key);
    if (!z || !z->secondary) {
        pthread_mutex_unlock(&x->mu);
        return;
    }
    snprintf(zkey, sizeof(zkey), "%s", z->key);
    memcpy(apex, z->apex, z->apex_len);
    p.apex = apex;
    p.apex_len = z->apex_len;
    nprim = z->nprim < 8 ? z->nprim : 8;
    for (size_t i = 0; i < nprim; i++) {
        prims[i] = z->prim[(z->cur_prim + i) % z->nprim];
        pkeys[i] = z->prim_key[(z->cur_prim + i) % z->nprim];
    }
    p.base = z->base ? zone_retain(z->base) : NULL;
    bool first_try = !z->base_tried;
    z->base_tried = true;
    z->notified = false;
    p.max_bytes = x->max_bytes;
    p.x = x;
    p.timeout_ms = (int)x->timeout_ms;
    p.total_ms = (int)x->total_ms;
    file = z->file ? strdup(z->file) : NULL;
    tsig_key_t keys[8];
    for (size_t i = 0; i < nprim; i++)
        if (pkeys[i] >= 0)
            keys[i] = x->keys[pkeys[i]];
    pthread_mutex_unlock(&x->mu);

    if (!p.base && first_try) {
        /* the version the loader serves (the on-disk copy, read at startup) is our base */
        zone_t *cur = pin_zone(x, apex);
        if (cur && !cur->unavailable)
            p.base = cur;
        else
            zone_free(cur);
    }
    char err[512] = "", errs[1024] = "";
    zone_t *nz = NULL;
    const char *kind = "";
    uint64_t records = 0;
    int rc = TERN_EINVAL;
    size_t used = 0;
    for (size_t i = 0; i < nprim && !__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE); i++) {
        p.peer = prims[i];
        p.has_key = pkeys[i] >= 0;
        if (p.has_key)
            p.key = keys[i];
        uint32_t serial = 0;
        rc = query_soa(&p, &serial, err, sizeof(err));
        if (rc == 0 && p.base && !xfr_serial_lt(p.base->serial, serial)) {
            rc = 1; /* up to date */
            used = i;
            break;
        }
        if (rc == 0) {
            rc = pull(&p, p.base != NULL, &nz, &kind, &records, err, sizeof(err));
            if (rc < 0 && p.base && rc != TERN_ETIMEDOUT) {
                /* IXFR refused or broken: the whole zone (RFC 1995 §4 fallback); not after a
                 * deadline, which an AXFR from the same primary would only wait out again
                 * (Knot's refresh does not fall back after an I/O failure either) */
                char e2[512];
                log_info("xfr: zone %s: IXFR from %s failed (%s); trying AXFR", zkey, p.peer.text,
                         err);
                rc = pull(&p, false, &nz, &kind, &records, e2, sizeof(e2));
                if (rc < 0)
                    snprintf(err, sizeof(err), "%s", e2);
            }
            if (rc == 0 && p.base && xfr_serial_lt(nz->serial, p.base->serial)) {
                snprintf(err, sizeof(err), "serial went back from %u to %u", p.base->serial,
                         nz->serial);
                zone_free(nz);
                nz = NULL;
                rc = TERN_EPROTO;
            }
        }
        if (rc >= 0) {
            used = i;
            break;
        }
        size_t el = strlen(errs);
        snprintf(errs + el, sizeof(errs) - el, "%s%s: %s", el ? "; " : "", p.peer.text, err);
    }
    int64_t now = tern_monotonic_ms(), refresh = RETRY_FIRST_MS, retry = RETRY_FIRST_MS, expire = 0;
    zone_t *timer_zone = nz ? nz : p.base;
    if (timer_zone)
        soa_timers(timer_zone, &refresh, &retry, &expire);
    if (rc == 0) {
        char was[32] = "";
        if (p.base)
            snprintf(was, sizeof(was), " (was %u)", p.base->serial);
        log_info("xfr: zone %s: %s from %s, serial %u%s, %llu records, %zu KiB of messages, "
                 "~%zu MiB in memory while built",
                 zkey, kind, prims[used].text, nz->serial, was, (unsigned long long)records,
                 p.wire >> 10, p.mem >> 20);
        if (file) {
            char werr[512];
            if (xfr_zone_write_file(nz, file, werr, sizeof(werr)) < 0)
                log_err("xfr: zone %s: cannot write its copy: %s", zkey, werr);
        }
    } else if (rc == 1) {
        log_debug("xfr: zone %s: up to date (serial %u)", zkey, p.base->serial);
    } else {
        log_warn("xfr: zone %s: refresh failed: %s", zkey, errs);
    }
    bool expired_now = false, revived = false;
    zone_t *revive = NULL;
    pthread_mutex_lock(&x->mu);
    z = find_zone(x, key);
    if (z && z->secondary) {
        if (rc >= 0) {
            /* an expired zone whose primary answers again with the version we hold: it is
             * current once more, serve it again (a new version is handed over below anyway) */
            if (rc == 1 && z->expired && z->base) {
                revive = zone_retain(z->base);
                revived = true;
            }
            if (rc == 0) {
                zone_free(z->base);
                z->base = zone_retain(nz);
                z->in_when = (int64_t)now_s();
                snprintf(z->in_primary, sizeof(z->in_primary), "%s", prims[used].text);
                snprintf(z->in_kind, sizeof(z->in_kind), "%s", kind);
                z->in_records = records;
                z->in_count++;
            } else if (!z->base && p.base) {
                z->base = zone_retain(p.base);
            }
            z->in_error[0] = '\0';
            z->next_ms = now + refresh;
            z->expire_ms = now + expire;
            z->refresh_wall = (int64_t)now_s() + refresh / 1000;
            z->expire_wall = (int64_t)now_s() + expire / 1000;
            z->expired = false;
            z->cur_prim = (z->cur_prim + used) % z->nprim;
        } else {
            snprintf(z->in_error, sizeof(z->in_error), "%.255s", errs);
            z->next_ms = now + retry;
            z->refresh_wall = (int64_t)now_s() + retry / 1000;
            if (!z->expire_ms && p.base) {
                /* the startup copy: expire counts from now */
                z->expire_ms = now + expire;
                z->expire_wall = (int64_t)now_s() + expire / 1000;
                if (!z->base)
                    z->base = zone_retain(p.base);
            }
            if (z->expire_ms && now >= z->expire_ms && !z->expired) {
                z->expired = expired_now = true;
            }
        }
    }
    pthread_mutex_unlock(&x->mu);
    if (rc >= 0)
        __atomic_add_fetch(rc == 0 ? &x->stats.in_ok : &x->stats.in_up_to_date, 1,
                           __ATOMIC_RELAXED);
    else
        __atomic_add_fetch(&x->stats.in_failed, 1, __ATOMIC_RELAXED);
    if (rc == 0 && x->hooks.zone_in)
        x->hooks.zone_in(x->hooks.ctx, zkey, nz); /* the loader owns our reference now */
    else
        zone_free(nz);
    if (revived) {
        log_info("xfr: zone %s: the primary answers again with serial %u; serving it again", zkey,
                 revive->serial);
        if (x->hooks.zone_in)
            x->hooks.zone_in(x->hooks.ctx, zkey, revive);
        else
            zone_free(revive);
    }
    if (expired_now) {
        log_err("xfr: zone %s expired: no successful refresh within the SOA expire; answering "
                "SERVFAIL until a primary answers",
                zkey);
        if (x->hooks.zone_in)
            x->hooks.zone_in(x->hooks.ctx, zkey, NULL);
    }
    zone_free(p.base);
    free(file);
    explicit_bzero(keys, sizeof(keys));
    explicit_bzero(&p.key, sizeof(p.key));
}

static void *in_main(void *arg)
{
    xfr_t *x = arg;
    (void)pthread_setname_np(pthread_self(), "tern-xfr-in");
    tern_rcu_register();
    tern_rcu_offline();
    for (;;) {
        int64_t now = tern_monotonic_ms(), next = now + 1000;
        pthread_mutex_lock(&x->mu);
        if (x->stop) {
            pthread_mutex_unlock(&x->mu);
            break;
        }
        struct change *ch = x->ch;
        size_t nch = x->nch;
        x->ch = NULL;
        x->nch = x->capch = 0;
        pthread_mutex_unlock(&x->mu);
        for (size_t i = 0; i < nch; i++)
            journal_change(x, &ch[i]);
        free(ch);
        notify_send(x, now);
        pthread_mutex_lock(&x->mu);
        now = tern_monotonic_ms();
        for (size_t i = 0; i < x->nzones; i++) {
            struct zst *z = x->zones[i];
            for (size_t k = 0; k < z->nnt; k++)
                if (z->nt[k].pending && z->nt[k].next_ms < next)
                    next = z->nt[k].next_ms;
        }
        bool busy = x->nch > 0;
        pthread_mutex_unlock(&x->mu);
        int wait = busy ? 0 : next > now ? (int)(next - now) : 0;
        struct pollfd pf[3] = {{.fd = x->in_ev, .events = POLLIN},
                               {.fd = x->ns4, .events = POLLIN},
                               {.fd = x->ns6, .events = POLLIN}};
        if (poll(pf, 3, wait) > 0) {
            if (pf[0].revents)
                ev_drain(x->in_ev);
            if (pf[1].revents)
                notify_recv(x, x->ns4);
            if (pf[2].revents)
                notify_recv(x, x->ns6);
        }
    }
    tern_rcu_unregister();
    return NULL;
}

/* A puller thread: takes the first due secondary zone no other puller has, refreshes it, and
 * again; sleeps on pull_cv until the next zone is due, a NOTIFY or a new config. */
static void *pull_main(void *arg)
{
    struct puller *me = arg;
    xfr_t *x = me->x;
    char name[16];
    snprintf(name, sizeof(name), "tern-xfr-in%u", me->idx);
    (void)pthread_setname_np(pthread_self(), name);
    tern_rcu_register(); /* pin_zone() reads the published view */
    tern_rcu_offline();
    pthread_mutex_lock(&x->mu);
    while (!x->stop) {
        int64_t now = tern_monotonic_ms(), next = now + 1000;
        struct zst *due = NULL;
        for (size_t i = 0; i < x->nzones && !due && me->idx < x->in_max; i++) {
            struct zst *z = x->zones[i];
            if (!z->secondary || z->busy)
                continue;
            if (z->notified || z->next_ms <= now)
                due = z;
            else if (z->next_ms < next)
                next = z->next_ms;
        }
        if (!due) {
            struct timespec ts = {.tv_sec = (time_t)(next / 1000),
                                  .tv_nsec = (long)(next % 1000) * 1000000L};
            pthread_cond_timedwait(&x->pull_cv, &x->mu, &ts);
            continue;
        }
        char key[DNAME_KEY_MAX];
        snprintf(key, sizeof(key), "%s", due->key);
        due->busy = true;
        pthread_mutex_unlock(&x->mu);
        refresh_zone(x, key);
        pthread_mutex_lock(&x->mu);
        struct zst *z = find_zone(x, key); /* a reload may have replaced it meanwhile */
        if (z)
            z->busy = false;
    }
    pthread_mutex_unlock(&x->mu);
    tern_rcu_unregister();
    return NULL;
}

/* As many pullers as there are secondary zones, up to in_max; never fewer than before (a
 * puller past a lowered in_max idles). Wakes them all: a zone may be due. */
static void pullers_grow(xfr_t *x)
{
    pthread_mutex_lock(&x->mu);
    size_t nsec = 0;
    for (size_t i = 0; i < x->nzones; i++)
        nsec += x->zones[i]->secondary;
    size_t want = nsec < x->in_max ? nsec : x->in_max;
    while (x->npullers < want && !x->stop) {
        struct puller *pl = &x->pullers[x->npullers];
        pl->x = x;
        pl->idx = x->npullers;
        if (pthread_create(&pl->t, NULL, pull_main, pl) != 0) {
            log_err("xfr: cannot start a transfer-in thread (%u running)", x->npullers);
            break;
        }
        x->npullers++;
    }
    pthread_cond_broadcast(&x->pull_cv);
    pthread_mutex_unlock(&x->mu);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

xfr_t *xfr_new(const answer_view_t *const *published, const xfr_hooks_t *hooks)
{
    xfr_t *x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    x->published = published;
    if (hooks)
        x->hooks = *hooks;
    pthread_mutex_init(&x->mu, NULL);
    pthread_mutex_init(&x->qmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* pull_main()'s deadlines are monotonic */
    pthread_cond_init(&x->pull_cv, &ca);
    pthread_condattr_destroy(&ca);
    x->out_ev = x->in_ev = x->out_ep = x->ns4 = x->ns6 = -1;
    for (size_t i = 0; i < XFR_CONNS_MAX; i++) {
        x->conns[i].fd = -1;
        tsig_ctx_init(&x->conns[i].tsig);
    }
    /* malloc, not calloc: buffers cost address space until a transfer touches them */
    x->qbufs = malloc((size_t)XFR_QUEUE_MAX * RBUF_CAP);
    x->conn_bufs = malloc((size_t)XFR_CONNS_MAX * (RBUF_CAP + WBUF_CAP + 1024));
    x->out_ev = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    x->in_ev = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    x->out_ep = epoll_create1(EPOLL_CLOEXEC);
    if (!x->qbufs || !x->conn_bufs || x->out_ev < 0 || x->in_ev < 0 || x->out_ep < 0) {
        xfr_free(x);
        return NULL;
    }
    for (size_t i = 0; i < XFR_QUEUE_MAX; i++)
        x->q[i].buf = x->qbufs + i * RBUF_CAP;
    for (size_t i = 0; i < XFR_CONNS_MAX; i++) {
        x->conns[i].rbuf = x->conn_bufs + i * (RBUF_CAP + WBUF_CAP + 1024);
        x->conns[i].wbuf = x->conns[i].rbuf + RBUF_CAP;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    if (epoll_ctl(x->out_ep, EPOLL_CTL_ADD, x->out_ev, &ev) < 0) {
        xfr_free(x);
        return NULL;
    }
    x->ns4 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    x->ns6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    x->notify_retries = 5;
    x->notify_timeout_ms = 2000;
    x->timeout_ms = 10000;
    x->total_ms = 600000;
    x->in_max = 8;
    x->max_bytes = (size_t)1 << 30;
    x->journal_versions = 64;
    x->journal_bytes = (size_t)64 << 20;
    return x;
}

int xfr_start(xfr_t *x)
{
    if (pthread_create(&x->out_thread, NULL, out_main, x) != 0) {
        log_err("xfr: cannot start the transfer-out thread");
        return TERN_ENOMEM;
    }
    if (pthread_create(&x->in_thread, NULL, in_main, x) != 0) {
        log_err("xfr: cannot start the transfer-in thread");
        pthread_mutex_lock(&x->mu);
        __atomic_store_n(&x->stop, true, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&x->mu);
        ev_signal(x->out_ev);
        pthread_join(x->out_thread, NULL);
        return TERN_ENOMEM;
    }
    x->started = true;
    pullers_grow(x);
    return 0;
}

void xfr_free(xfr_t *x)
{
    if (!x)
        return;
    if (x->started) {
        pthread_mutex_lock(&x->mu);
        __atomic_store_n(&x->stop, true, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&x->pull_cv);
        pthread_mutex_unlock(&x->mu);
        ev_signal(x->out_ev);
        ev_signal(x->in_ev);
        pthread_join(x->out_thread, NULL);
        pthread_join(x->in_thread, NULL);
        /* each gives up its primary within WAIT_SLICE_MS of the stop (wait_fd()) */
        for (unsigned i = 0; i < x->npullers; i++)
            pthread_join(x->pullers[i].t, NULL);
    }
    for (size_t i = 0; i < x->qlen; i++) {
        struct req *r = &x->q[(x->qhead + i) % XFR_QUEUE_MAX];
        if (r->tcp)
            close(r->fd);
    }
    for (size_t i = 0; i < x->nch; i++) {
        zone_free(x->ch[i].old);
        zone_free(x->ch[i].new);
        free(x->ch[i].key);
    }
    free(x->ch);
    for (size_t i = 0; i < x->nzones; i++)
        zst_free(x->zones[i]);
    free(x->zones);
    if (x->keys)
        explicit_bzero(x->keys, x->nkeys * sizeof(*x->keys));
    free(x->keys);
    free(x->qbufs);
    free(x->conn_bufs);
    if (x->out_ev >= 0)
        close(x->out_ev);
    if (x->in_ev >= 0)
        close(x->in_ev);
    if (x->out_ep >= 0)
        close(x->out_ep);
    if (x->ns4 >= 0)
        close(x->ns4);
    if (x->ns6 >= 0)
        close(x->ns6);
    pthread_cond_destroy(&x->pull_cv);
    pthread_mutex_destroy(&x->mu);
    pthread_mutex_destroy(&x->qmu);
    free(x);
}

void xfr_zone_info(xfr_t *x, const char *key, xfr_zone_info_t *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&x->mu);
    const struct zst *z = find_zone(x, key);
    if (z) {
        out->known = true;
        out->secondary = z->secondary;
        out->serial = z->secondary && z->base ? z->base->serial : z->serial;
        if (z->journal) {
            xfr_journal_entry_t e[64];
            size_t n = xfr_journal_list(z->journal, e, 64);
            size_t from = n > 16 ? n - 16 : 0;
            for (size_t i = from; i < n; i++) {
                size_t k = out->nversions++;
                out->versions[k].from = e[i].from;
                out->versions[k].to = e[i].to;
                out->versions[k].removed = e[i].removed;
                out->versions[k].added = e[i].added;
                out->versions[k].bytes = e[i].bytes;
                out->versions[k].when = (int64_t)e[i].when.tv_sec;
            }
        }
        out->out_when = z->out_when;
        memcpy(out->out_peer, z->out_peer, sizeof(out->out_peer));
        memcpy(out->out_kind, z->out_kind, sizeof(out->out_kind));
        out->out_serial = z->out_serial;
        out->out_records = z->out_records;
        out->out_count = z->out_count;
        out->in_when = z->in_when;
        memcpy(out->in_primary, z->in_primary, sizeof(out->in_primary));
        memcpy(out->in_kind, z->in_kind, sizeof(out->in_kind));
        out->in_records = z->in_records;
        out->in_count = z->in_count;
        out->refresh_at = z->secondary ? z->refresh_wall : 0;
        out->expire_at = z->secondary ? z->expire_wall : 0;
        out->expired = z->expired;
        memcpy(out->in_error, z->in_error, sizeof(out->in_error));
        for (size_t i = 0; i < z->nnt && out->nnotify < 8; i++) {
            size_t k = out->nnotify++;
            snprintf(out->notify[k].peer, sizeof(out->notify[k].peer), "%s", z->nt[i].peer.text);
            out->notify[k].serial = z->nt[i].serial;
            out->notify[k].acked = z->nt[i].acked;
            out->notify[k].attempts = z->nt[i].attempts;
            out->notify[k].acked_when = z->nt[i].acked_when;
        }
    }
    pthread_mutex_unlock(&x->mu);
}

void xfr_get_stats(xfr_t *x, xfr_stats_t *out)
{
    uint64_t *o = (uint64_t *)out;
    const uint64_t *s = (const uint64_t *)&x->stats;
    for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
        o[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}
