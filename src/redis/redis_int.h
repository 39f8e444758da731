/*
 * redis_int.h — private to src/redis: the state the zone reader's four files share.
 *
 *   redis_source.c  the thread (connect and subscribe, serve change events, idle PINGs), the
 *                   public API, the stats; change events mark zones dirty here
 *   redis_read.c    reading zones (pipelined GET + MGET + HGETALL + HSCAN, HMGET of named
 *                   labels) and building them (zone_json), digests, diffs of large zones, patches
 *   redis_sync.c    the zone table and the set's membership: SMEMBERS, reconcile, zones gone,
 *                   max_zones; a full read or verify (full_sync) and a flush of dirty zones
 *   redis_kasp.c    zones with a key policy: their keys and state in Redis, the fleet lock and
 *                   the driving node's steps, signing at each build, ternctl's status and requests
 *
 * Threading: everything below the "shared with other threads" fields belongs to the source's
 * thread; stats, the key policies' views and ternctl's requests are under mu, resync, release
 * and stop are atomics.
 */
#ifndef TERN_REDIS_REDIS_INT_H
#define TERN_REDIS_REDIS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <hiredis/hiredis.h>

#include "tern/redis/redis_conn.h"
#include "tern/dnssec/dnssec_kasp.h"
#include "tern/redis/redis_source.h"

/* Internal outcomes of a Redis exchange besides 0 (redis_conn.h). */
#define E_STOP REDIS_CONN_STOP /* stop() was called */
#define E_CONN REDIS_CONN_DOWN /* the connection is unusable; redis_conn_why() says why */

/* New bad labels (or set members) logged one per line in one build (or read); the rest are
 * counted in one line, so a zone full of bad labels cannot flood the log. */
#define BAD_LABELS_LOGGED 10

/* Untrusted text (a set member, a label) in a log line: tern_escape() into a buffer this large,
 * enough for a whole domain name in presentation form. */
#define ESC_MAX 1024

/* Labels a zone may have pending from the change channel before a full read is cheaper. */
#define PLAB_MAX 65536

/* Labels already seen in one multi-call HSCAN (which may return a field twice). */
typedef struct seen {
    uint64_t *hash;
    uint32_t *off; /* into buf, + 1; 0 = empty slot */
    uint64_t *dig; /* per slot: digest_label() of the label's value */
    size_t mask, n;
    char *buf;
    size_t len, cap;
} seen_t;

/* One zone of the set. Keyed by origin; name is the set member the keys are built from. */
struct zst {
    char *name;   /* as in the set: "example.com." (untrusted: tern_escape() it for logs) */
    char *origin; /* its canonical key (dname_key): "example.com" ("." for the root) */
    uint64_t digest;
    bool have_digest; /* digest is that of the last version built or rejected */
    bool failed;      /* the last version read was rejected */
    bool served;      /* handed out by on_zone and not gone since */
    bool dirty;       /* in rs->dirty */
    uint64_t mark;    /* generation of the last set read / run that listed it */
    uint64_t dups;    /* digest of the other members naming this zone, as last logged; 0 none */
    unsigned breach;  /* ZB_* logged for the last version (cleared by one without) */
    uint64_t *rep;    /* label breaches logged at the last build (label_report()), sorted */
    size_t nrep;
    uint64_t cfg_digest; /* of the config (and keys) the last version was built with */
    uint64_t cfg_wide;   /* ... of its zone-wide part (without the SOA) and keys: equal, a
                            patch can carry the change (the apex with the new SOA) */
    seen_t *lt;  /* a large zone's labels with their digests, as last built or patched (diff) */
    char **plab; /* labels named on the change channel since the last flush */
    size_t nplab, capplab;
    /* a signed zone secondaries transfer (redis_source_callbacks_t.exported) */
    bool had_serial; /* last_serial is the serial of the last version signed */
    uint32_t last_serial;
    int64_t resign_at;   /* wall clock (s) its signatures come due; 0: not such a zone */
    bool resign;         /* built again for that: not a patch, whatever its digest */
    zone_t *signed_last; /* our reference to the last such version: its unchanged signatures
                            are taken over by the next (never re-signed in place) */
    /* a zone whose config names a key policy (redis_kasp.c) */
    char *kasp_policy;     /* the policy its last build named; NULL: none */
    uint32_t kasp_max_ttl; /* its largest TTL at its last build; 0: not built */
    int64_t kasp_at;       /* wall clock (s) of its next key event: built again; 0: none */
    bool kasp_holder;      /* this node holds its lock and drives its keys */
    bool kasp_drive;       /* the holder should step it at the next tick (no state, a key to
                              make, a new policy) */
    bool kasp_ds;          /* a DS check was asked for it (redis_source_callbacks_t.ds_want) */
    bool kasp_unsign;      /* its last build's config says "dnssec_unsign": true */
    struct zst *next;      /* hash chain */
};

/* A key policy zones may name (redis_source_config_t.kasp, copied). */
typedef struct redis_kasp_policy {
    char *name;
    dnssec_kasp_policy_t pol; /* zone_max_ttl 0: the zone's largest TTL as built */
    char **parents;           /* asked for a new KSK's DS by the driving node's checker */
    size_t nparents;
    unsigned ds_check_interval;
} redis_kasp_policy_t;

/* The zone_max_ttl a zone's rollovers wait for before its first build says what it is: a day,
 * the policy default, errs on the slow side (as for file zones). */
#define REDIS_KASP_MAX_TTL_UNKNOWN 86400

/* How redis_read_process() treats a zone whose digest has not changed. */
typedef enum {
    RUN_VERIFY, /* skip it; read a large zone once for its digest before building */
    RUN_DIRTY,  /* skip it, but build a large zone in the same pass that computes its digest */
    RUN_FORCE,  /* build and hand out every zone */
} run_mode_t;

struct redis_source {
    /* configuration (owned copies) */
    char *prefix, *suffix;
    unsigned db;
    int64_t read_timeout, zone_reload; /* ms; zone_reload 0 = never */
    zone_json_opts_t json;
    unsigned dnssec_workers; /* signed zones: their workers and signature policy */
    dnssec_policy_t dnssec_policy;
    redis_source_callbacks_t cb;
    char *where;       /* "redis://host:port/db", for messages and zone sources */
    char *master;      /* the name Sentinel monitors, for messages */
    char *k_set;       /* P redins:zones S */
    char *ks_prefix;   /* "__keyspace@<db>__:" */
    char *k_pattern;   /* the keyspace channel pattern */
    char *channel;     /* the change channel, or NULL */
    size_t plen, slen; /* strlen(prefix), strlen(suffix) */
    size_t max_value_bytes, max_labels, max_zones; /* bounds (json.max_rrset_records: the 4th) */
    redis_kasp_policy_t *kasp;                     /* key policies zones may name */
    size_t nkasp;
    char *node_id;        /* this node in the zones' key locks */
    int64_t kasp_lock_ms; /* how long a lock outlives its holder's last renewal */

    /* shared with other threads */
    pthread_t thread;
    int wakefd;
    atomic_bool stop;
    atomic_int resync;  /* 0 none, 1 verify, 2 force */
    atomic_int release; /* stop(): 1 release the key locks, 2 done */
    /* ternctl dnssec, under mu (redis_kasp.c): the zones with a policy as last built, and the
     * requests for the source thread to queue in Redis */
    struct redis_kasp_view *views;
    size_t nviews, capviews;
    struct redis_kasp_req *reqs;
    size_t nreqs, capreqs;
    pthread_mutex_t mu;
    redis_source_stats_t stats;

    /* source thread only */
    redis_conn_t *conn;    /* the data node (and, with Sentinel, the sentinels): redis_conn.h */
    bool up;               /* connected and subscribed */
    char last_down[256];   /* the last connect failure logged, "" if none since the last success */
    bool notify_warned;    /* a warning about notify-keyspace-events was logged ... */
    char notify_value[64]; /* ... for this value ("?" when unreadable) */
    bool sub_ping_out;
    int64_t sub_ping_at;
    unsigned sub_confirm; /* subscribe confirmations received */
    int64_t next_verify;
    bool synced; /* a full read has finished */

    struct zst **bucket;
    size_t nbucket, nzones;
    uint64_t gen;
    uint64_t *bad_members; /* hashes of the unparsable members logged at the last read, sorted */
    size_t nbad_members;
    size_t zones_skipped; /* beyond max_zones at the last read (logged when it changes) */

    struct zst **dirty;
    size_t ndirty, capdirty;
    struct zst **ldirty; /* zones with labels named on the change channel (plab) */
    size_t nldirty, capldirty;
    bool set_dirty, pending;
    bool named; /* a writer named the labels it changed (change channel): its change is whole,
                   flushed without waiting for events to pause */
    int64_t first_ev, last_ev;
    int64_t resign_check; /* monotonic ms of the next look for zones whose signatures are due */
    unsigned arena;
    int64_t kasp_tick;        /* monotonic ms of the next redis_kasp_tick() */
    bool kasp_replica_logged; /* "reading a replica: not driving" was said */
};

/* Counts of one run, for the summary line. */
typedef struct run_counts {
    size_t built, rejected, unchanged;
} run_counts_t;

/* --- helpers every file uses --- */

static inline bool is_str(const redisReply *r)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

static inline int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static inline bool has_u64(const uint64_t *sorted, size_t n, uint64_t v)
{
    return n && bsearch(&v, sorted, n, sizeof(v), cmp_u64);
}

/** Change the stats under their mutex: fn(stats, arg). */
void redis_int_stats(redis_source_t *rs, void (*fn)(redis_source_stats_t *, void *), void *arg);

/* Queue, await and run commands on the command connection (redis_conn.h). */
static inline int rs_append(redis_source_t *rs, const char *const *argv)
{
    return redis_conn_append(rs->conn, redis_conn_cmd(rs->conn), argv);
}

static inline int rs_reply(redis_source_t *rs, redisReply **out)
{
    return redis_conn_reply(rs->conn, redis_conn_cmd(rs->conn), out);
}

static inline int rs_run(redis_source_t *rs, redisReply **out, const char *const *argv)
{
    return redis_conn_run(rs->conn, redis_conn_cmd(rs->conn), out, argv);
}

/* --- redis_source.c --- */

/** A keyspace event or message changed zone z: re-read it once the events pause. */
void redis_source_mark_dirty(redis_source_t *rs, struct zst *z);

/* --- redis_read.c --- */

/** Read (and build what changed of) the zones in list. 0, E_CONN or E_STOP. */
int redis_read_process(redis_source_t *rs, struct zst **list, size_t n, run_mode_t mode,
                       run_counts_t *cnt) TERN_WUR;

/** A served zone whose changed labels were named on the change channel: read and hand them out
 * as a patch (on_patch), or mark the zone dirty for a full read. 0, E_CONN or E_STOP. */
int redis_read_patch(redis_source_t *rs, struct zst *z) TERN_WUR;

/* redins' DNSSEC keys of a zone: "<zone>:zsk:pub" etc. (the order of zb_keys()'s MGET). */
extern const char *const redis_read_key_suffixes[4];

/** P redins:zones:<name><tail> S (tail "" for the zone's hash, ":config", ":kasp"...), malloc'd;
 * NULL when out of memory. */
char *redis_read_zone_key(const redis_source_t *rs, const char *name, const char *tail);

/* --- redis_kasp.c --- */

/** The policy named name (NULL: none), or NULL. */
const redis_kasp_policy_t *redis_kasp_policy(const redis_source_t *rs, const char *name);

/**
 * A build of zone z whose config names policy: its signing state from the state read with it
 * (state: the MGET element, NIL when missing) and its keys hash (hash: the HGETALL reply), a copy
 * of the state stepped to now (nothing written). 0 and *dz with the DNSKEY records for the
 * builder in dnskeys[0..*len) (*dz NULL: the plan serves the zone unsigned); or a negative code
 * with err set (an unknown policy naming the config key, no state yet, a key missing).
 */
int redis_kasp_sign(redis_source_t *rs, struct zst *z, const char *policy, const redisReply *state,
                    const redisReply *hash, bool exported, dnssec_zone_t **dz, uint8_t *dnskeys,
                    size_t *len, char *err, size_t errlen) TERN_WUR;

/**
 * A build of zone z whose config names no policy (any more): TERN_EINVAL with the way out in err
 * when its key state (state: the MGET element, NIL when missing) still has keys in use, so the
 * signed version keeps serving until the zone is unsigned ("dnssec_unsign" first); else 0.
 */
int redis_kasp_dropped(const struct zst *z, const redisReply *state, char *err, size_t errlen);

/** Take or renew the locks of the zones with a policy and drive those this node holds; build
 * again the zones whose key event is due. Sets rs->kasp_tick. 0, E_CONN or E_STOP. */
int redis_kasp_tick(redis_source_t *rs) TERN_WUR;

/** Release the locks this node holds (shutdown). */
void redis_kasp_release(redis_source_t *rs);

/**
 * Apply one operator request to st: "rollover ksk|zsk|csk", "ds-seen TAG", "ds-seen" (every
 * KSK whose DS is wanted), or "ds-gone" (unsigning: the parent has no DS any more). 0, or a
 * negative code with the reason in err (a bad request, or the state machine's refusal: a rollover
 * in progress, no such DS wanted).
 */
int redis_kasp_request(dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol, const char *text,
                       int64_t now, char *err, size_t errlen) TERN_WUR;

/** Any thread: the status of zone key (NULL: every zone with a policy), malloc'd; NULL with
 * err set when none. */
char *redis_kasp_status(redis_source_t *rs, const char *key, char *err, size_t errlen);

/** Any thread: request text for zone key, tried on its last state and queued for the source
 * thread (redis_kasp_flush()) to put in Redis for the driving node. 0 or a negative code with
 * the reason in err. */
int redis_kasp_ctl_request(redis_source_t *rs, const char *key, const char *text, char *err,
                           size_t errlen) TERN_WUR;

/** Source thread: put the queued requests in Redis. 0, E_CONN or E_STOP. */
int redis_kasp_flush(redis_source_t *rs) TERN_WUR;

/** Forget zone origin's status (it left the set). */
void redis_kasp_forget(redis_source_t *rs, const char *origin);

/** Free the views and requests (the source is freed). */
void redis_kasp_free(redis_source_t *rs);

/* --- redis_seen.c --- */

/** Free what a seen_t holds (not s itself), and clear it. */
void redis_seen_free(seen_t *s);

/** The slot of label (len bytes) in s, or -1. */
long redis_seen_find(const seen_t *s, const char *label, size_t len);

/** 1 if label (len bytes) is new (remembered, its digest 0, its slot in *slot), 0 if seen,
 * TERN_ENOMEM. */
int redis_seen_add(seen_t *s, const char *label, size_t len, size_t *slot) TERN_WUR;

/* --- redis_sync.c --- */

/** A full read (force: rebuild everything) or a verify of the whole set. */
int redis_sync_full(redis_source_t *rs, bool force) TERN_WUR;

/** Re-read what the events since the last read touched (the set, dirty zones, patches). */
int redis_sync_flush(redis_source_t *rs) TERN_WUR;

/** The zone named name (n bytes), whatever its spelling; with exact, only when name is the very
 * member it is read from. NULL if none. */
struct zst *redis_sync_zone_by_name(redis_source_t *rs, const char *name, size_t n, bool exact);

/** Forget the labels named for z (a full read covers them, or they were patched). */
void redis_sync_plab_clear(struct zst *z);

/** Free the zone table. */
void redis_sync_free(redis_source_t *rs);

#endif
