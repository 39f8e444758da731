/*
 * update_int.h — what update.c (the service, its queue and thread) and update_apply.c (what one
 * request goes through) share. Not a public header.
 *
 * Threading: everything in struct update is under mu, but published/reply (set before the
 * thread starts) and buckets (the update thread's alone).
 */
#ifndef TERN_UPDATE_UPDATE_INT_H
#define TERN_UPDATE_UPDATE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "tern/conf/config.h"
#include "tern/redis/redis_conn.h"
#include "tern/update/update.h"
#include "tern/wire/dname.h"

/* Flushes (ternctl) waiting at once: one operator, a script or two. */
#define UPDATE_FLUSH_MAX 8

/* Changes remembered for `ternctl zone` across all zones. */
#define UPDATE_AUDIT_MAX 64

/* Requests the update thread takes at once: their changes of one zone are checked one after the
 * other over the version the previous one made, journaled, and published as one version — so N
 * clients at once cost about one publish, not N — and answered together. 32 bounds what one
 * client waits for the others. */
#define UPDATE_BATCH_MAX 32

/* Principals (keys, or addresses of unsigned updates) the rate limit tracks; the one not seen
 * for longest makes room. */
#define UPDATE_BUCKETS_MAX 256

/* A caller waiting for its change (update_apply_msg()), on its own stack. */
typedef struct uwait {
    bool done;
    unsigned rcode;
    char why[256];
} uwait_t;

/* A request: an UPDATE from the out thread, or a change an authorised caller built (preauth:
 * who names it; allow_update is the caller's business, the rest applies). */
typedef struct ureq {
    uint8_t *msg;
    size_t len;
    bool signed_;
    bool preauth;
    char key[256]; /* the TSIG key's name when signed; preauth: who */
    struct sockaddr_storage peer;
    uint64_t token;
    uwait_t *wait; /* preauth: where the answer goes (NULL: the caller gave up) */
} ureq_t;

/* A zone with changes journaled in the batch being handled, waiting for its publish. */
typedef struct ubzone {
    char key[DNAME_KEY_MAX], origin[DNAME_KEY_MAX];
    uint8_t apex[DNAME_MAXLEN];
    zone_t *work; /* the version the batch's last change made (the next one's base) */
    uint32_t to;  /* its serial: published, the batch is served */
    bool failed;  /* not served within the deadline */
} ubzone_t;

typedef struct ubatch {
    ubzone_t z[UPDATE_BATCH_MAX];
    size_t n;
} ubatch_t;

/* A ternctl flush, on the caller's stack while it waits. */
typedef struct uflush {
    char key[DNAME_KEY_MAX];
    int rc; /* 1: not done */
    bool running;
    char msg[256];
} uflush_t;

/* A configured zone, as updates see it. */
typedef struct uzone {
    char *key, *origin;
    uint8_t apex[DNAME_MAXLEN];
    uint8_t apex_len;
    bool secondary, json, signed_;
    bool redis;           /* an entry without file or primary: a zone Redis serves */
    char *file, *journal; /* a primary zone from a file: where changes go */
    config_update_rule_t *rules;
    size_t nrules;
    int64_t dirty_since; /* wall clock of the first change not written back; 0: none */
} uzone_t;

typedef struct ubucket {
    char who[160];
    double tokens;
    int64_t last_ms;
} ubucket_t;

typedef struct uaudit {
    char key[DNAME_KEY_MAX];
    update_audit_t a;
} uaudit_t;

struct update {
    zone_source_t base;
    zone_sink_t sink;
    const answer_view_t *const *published;
    update_reply_fn reply;
    void *reply_ctx;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* a request, a flush, stop */
    pthread_cond_t done; /* a flush finished */
    pthread_cond_t pub;  /* the loader published */
    uint64_t pubgen;
    ureq_t q[UPDATE_QUEUE_MAX];
    size_t qhead, qlen;
    uwait_t *inflight[UPDATE_BATCH_MAX]; /* the waiters of the batch being handled */
    uflush_t *flushq[UPDATE_FLUSH_MAX];
    size_t nflush;
    uzone_t *z;
    size_t nz;
    unsigned max_records, rate, sync_s;
    pthread_t t;
    bool started, stop;
    update_stats_t st;
    uaudit_t ring[UPDATE_AUDIT_MAX];
    size_t rhead, nring;
    ubucket_t *buckets; /* the update thread's */
    size_t nbuckets;
    /* Redis zones: the settings in force (under mu; rgen counts their changes), and the update
     * thread's own connection with the copy it was made from */
    config_redis_t rcfg;
    uint64_t rgen;
    redis_conn_t *rconn;
    config_redis_t rconn_cfg;
    uint64_t rconn_gen;
};

/* update_apply.c: one request of batch b: its rcode, why saying why for anything but a change
 * made. NOERROR with *zi >= 0: the change is journaled and waits for b's publish (zone b->z[*zi]);
 * *zi -1: done (answered as it is). */
unsigned update_handle(update_t *u, const ureq_t *r, ubatch_t *b, int *zi, char *why,
                       size_t whylen);

/* update_apply.c: after a batch, its zones read again and waited for until served (or the
 * deadline: failed); their working versions released. */
void update_batch_publish(update_t *u, ubatch_t *b);

/* update_apply.c: write zone key's file back (update_flush()). 0 or a negative code, msg. */
int update_flush_zone(update_t *u, const char *key, char *msg, size_t msglen);

/* update_apply.c: write back the zones whose changes are older than zonefile_sync. */
void update_sync_due(update_t *u);

/* update_redis.c: a change of a zone Redis serves (zv: its settings), written into Redis; 0 or a
 * negative code with why (the change is not made). */
struct update_change;
int update_redis_write(update_t *u, const zone_t *z, const struct update_change *ch, char *why,
                       size_t whylen);

/* update_redis.c: the update thread's Redis connection, freed (stop). */
void update_redis_close(update_t *u);

/* update.c: free n zone settings and the array. */
void update_zones_free(uzone_t *z, size_t n);

#endif
