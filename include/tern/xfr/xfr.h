/*
 * xfr.h — zone transfers at run time: AXFR/IXFR out (RFC 5936, RFC 1995), NOTIFY out and in
 * (RFC 1996), secondary zones transferred in, all with TSIG (RFC 8945) and per-zone ACLs.
 *
 * Threads of its own, never a worker:
 *   - "tern-xfr-out": an epoll loop. Workers hand it what answer_query() marks ANSWER_HANDOFF
 *     (net/server.h: a bounded queue, one eventfd write when it was empty): TCP connections that
 *     asked for AXFR/IXFR, NOTIFY, UPDATE and TSIG-signed messages. An UPDATE goes on, verified,
 *     to the update service (hooks.update); the out thread answers it when its rcode comes back
 *     (xfr_update.c), holding the connection's further requests until then. It checks the key and
 * the zone's allow_transfer, pins the zone version (a reference taken inside an RCU read-side
 * section, so the transfer holds no grace period up and never sees half a reload), and streams the
 *     zone across as many events as the client's window needs. IXFR comes from the zone's
 *     journal (journal.h); a serial not in it gets the whole zone. It holds at most 64
 *     connections, 8 per client address; one with nothing in progress (answered and silent)
 *     keeps its slot only until a newcomer needs it (RFC 7766 §10, RFC 5936 §4.1): the newcomer
 *     closes the idle connection of the address holding the most idle ones, else one stalled
 *     for 2 s, and is refused only when all are busy (xfr_out.c, oconn_victim()). A transfer
 *     making progress is never closed for a newcomer.
 *   - "tern-notify": timers. It turns each published change of a zone with transfers into a
 *     journal entry (xfr_diff) and NOTIFYs the zone's secondaries until they answer
 *     (xfr_notify.c; a NOTIFY received is answered by tern-xfr-out and wakes a puller).
 *   - "tern-xfr-inN", the pullers: one per secondary zone, at most xfr_in_concurrency (Knot's
 *     background workers). Each takes a due zone no other puller has (a zone is refreshed by
 *     one at a time) and keeps it: SOA refresh/retry/expire from the zone's own SOA, IXFR with
 *     AXFR fallback, at once on NOTIFY, the new version handed to the loader (hooks.zone_in,
 *     from any puller). After expire without a successful refresh, the zone answers SERVFAIL (a
 *     NULL zone_in). Every step of a transfer in has a deadline (xfr_timeout_ms) and the whole
 *     transfer one more (xfr_total_timeout_ms), and every wait watches the stop flag, so a slow
 *     or dead primary holds its own zone only and xfr_free() waits for none (xfr_secondary.c).
 *
 *   - Catalog zones consumed (RFC 9432, xfr_catalog.h): a secondary zone with
 *     `catalog_consumer:` adds its members as secondary zones of their own, decided on the
 *     puller that transferred the catalog (xfr_catalog.c) and told through hooks.member_*.
 *
 * Files: xfr.c (the service: settings, zone state, info, stats, the workers' hand-off queue),
 * xfr_out.c, xfr_notify.c, xfr_secondary.c (one per thread above), xfr_update.c (UPDATE handed
 * on and answered), xfr_catalog.c (catalog members), sharing src/xfr/xfr_int.h.
 *
 * Threading: xfr_configure() and xfr_zone_changed() are the loader thread's; xfr_handoff() the
 * workers'; xfr_zone_info() any thread's. The state the threads share is under one mutex; the
 * workers' queue has a lock of its own, so a hand-over never waits for a TSIG check.
 */
#ifndef TERN_XFR_XFR_H
#define TERN_XFR_XFR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "tern/answer/answer.h"
#include "tern/common/compiler.h"
#include "tern/conf/config.h"
#include "tern/net/server.h"
#include "tern/zone/zone.h"

typedef struct xfr xfr_t;

typedef struct xfr_hooks {
    /* a puller (tern-xfr-inN): a new version of secondary zone key (a canonical origin) — the
     * callee owns the reference — or NULL: the zone expired (answer SERVFAIL for it). */
    void (*zone_in)(void *ctx, const char *key, zone_t *z);
    void *ctx;
    /* a catalog's member zone (tern/xfr/xfr_catalog.h), from a puller or the loader thread
     * (xfr_configure()), each in the order the service decided them (called under its lock):
     * member_in, a new version of member key (the callee owns the reference) or NULL: no data
     * (not transferred yet, reset, or expired: SERVFAIL); member_gone, key left its catalog (or
     * its catalog left the config): no longer served. NULL: members are not served. */
    void (*member_in)(void *ctx, const char *key, zone_t *z);
    void (*member_gone)(void *ctx, const char *key);
    void *member_ctx;
    /* the out thread: an UPDATE (RFC 2136) for the update service (tern/update/update.h), its
     * TSIG verified (key: the key's name; NULL: unsigned), from peer. Its rcode comes back
     * through xfr_update_done(token), and the out thread answers it, signed as it came. false:
     * not taken (answered SERVFAIL). NULL: UPDATE is answered NOTIMP. */
    bool (*update)(void *ctx, const uint8_t *msg, size_t len, const char *key,
                   const struct sockaddr_storage *peer, uint64_t token);
    void *update_ctx;
} xfr_hooks_t;

/** A transfer service reading zones from *published (the view the workers answer from). */
xfr_t *xfr_new(const answer_view_t *const *published, const xfr_hooks_t *hooks) TERN_WUR;

/** Whether cfg configures anything of this module: a zone with primary, notify,
 * allow_transfer or allow_update, or a TSIG key. Off, workers answer transfers REFUSED and
 * UPDATE NOTIMP by themselves. */
bool xfr_wanted(const config_t *cfg);

/**
 * The zones' transfer settings and keys from cfg (loader thread; first before xfr_start(),
 * again after each reload). Secondary zones that appear are refreshed at once; state of zones
 * that stay (journals, timers, notify state) is kept. 0 or TERN_ENOMEM (the old settings stay).
 */
int xfr_configure(xfr_t *x, const config_t *cfg) TERN_WUR;

/**
 * Loader thread, after a publish: zone key went from old (NULL: new zone) to new. The callee
 * takes a reference to each it keeps (callers keep theirs). Zones without transfer settings
 * are ignored at the cost of one lookup.
 */
void xfr_zone_changed(xfr_t *x, const char *key, zone_t *old, zone_t *new);

/** Whether key has outgoing transfer settings (allow_transfer or notify): the loader tells
 * only those zones' changes. Any thread. */
bool xfr_zone_wanted(xfr_t *x, const char *key);

/** Any thread (the HTTP API): send NOTIFY for zone key's current serial to each of its
 * secondaries again, as after a change. The number of secondaries (0: none, or no such zone). */
int xfr_notify_now(xfr_t *x, const char *key);

/** Any thread (the update service's): the rcode of the UPDATE handed over with token; the out
 * thread answers it (a connection closed meanwhile: nothing). ctx: the xfr_t. */
void xfr_update_done(void *ctx, uint64_t token, unsigned rcode);

/** The hooks the workers hand requests to (server_set_handoff()). */
server_handoff_t xfr_handoff(xfr_t *x);

/** Start both threads. 0 or a negative code (logged). */
int xfr_start(xfr_t *x) TERN_WUR;

/** Stop the threads, close every transfer, free everything. NULL is a no-op. */
void xfr_free(xfr_t *x);

/* One zone as `ternctl zone` shows it. */
typedef struct xfr_zone_info {
    bool known;     /* the zone has transfer settings */
    bool secondary; /* transferred in */
    uint32_t serial;
    /* versions in the journal, oldest first */
    size_t nversions;
    struct {
        uint32_t from, to;
        size_t removed, added, bytes;
        int64_t when; /* wall clock, s */
    } versions[16];
    /* the last transfer out */
    int64_t out_when; /* 0: none */
    char out_peer[64];
    char out_kind[8]; /* AXFR, IXFR */
    uint32_t out_serial;
    uint64_t out_records, out_count;
    /* the last transfer in (a secondary) */
    int64_t in_when; /* 0: none */
    char in_primary[64];
    char in_kind[8];
    uint64_t in_records, in_count;
    int64_t refresh_at, expire_at; /* wall clock, s; 0: none */
    bool expired;
    char in_error[256]; /* the last failure, "" if none */
    /* the secondaries told of changes */
    size_t nnotify;
    struct {
        char peer[64];
        uint32_t serial;    /* last serial notified */
        bool acked;         /* it answered */
        unsigned attempts;  /* sends for that serial */
        int64_t acked_when; /* wall clock, s */
    } notify[8];
} xfr_zone_info_t;

/** Fill out for zone key (canonical origin). Any thread. */
void xfr_zone_info(xfr_t *x, const char *key, xfr_zone_info_t *out);

/* Counters, for metrics. */
typedef struct xfr_stats {
    uint64_t out_axfr, out_ixfr, out_refused, out_failed;
    /* connections taken over by the out thread: closed for a newcomer (idle, or stalled), and
     * newcomers closed because every slot they could take was busy (xfr_out.c, oconn_victim()) */
    uint64_t out_conn_evicted, out_conn_refused;
    uint64_t notify_sent, notify_acked, notify_failed, notify_received;
    uint64_t in_ok, in_failed, in_up_to_date;
    uint64_t tsig_bad;
} xfr_stats_t;

void xfr_get_stats(xfr_t *x, xfr_stats_t *out);

#endif
