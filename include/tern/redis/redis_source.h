/*
 * redis_source.h — zones kept in Redis in the redins schema, fetched with hiredis and watched for
 * changes; every new version of a zone is built (zone_json.h) and handed to the caller.
 *
 * Owns: one background thread and the two Redis connections it uses — a command connection and a
 * subscriber connection (and, with Sentinel, a third to one sentinel), all one redis_conn
 * (tern/redis/redis_conn.h), the type the health checker's shared state uses too. No Redis
 * command ever runs on another thread (and never on a DNS worker).
 *
 * Key layout (redins 1.x; P and S are the configured prefix and suffix, which wrap every key
 * exactly as redins' Redis layer does: P + key + S):
 *   P redins:zones S                a set: the names of the zones served ("example.com.")
 *   P redins:zones:<zone> S         a hash: label → that label's RRsets as JSON ("@" = the apex)
 *   P redins:zones:<zone>:config S  a string: the zone's config JSON, with its SOA
 *   P redins:zones:<zone>:zsk:pub S  (and :zsk:priv, :ksk:pub, :ksk:priv) redins' static keys
 *   P redins:zones:<zone>:kasp S     (and :kasp:keys, :kasp:lock, :kasp:requests) tern's own: the
 *                                   key state and keys of a zone whose config names a key
 *                                   policy, shared by a fleet (src/redis/redis_kasp.c says how)
 * <zone> is the set member exactly as written there; the origin handed to the callbacks is that
 * name's canonical key (dname_key(): escapes resolved, lowercased, no final dot, "." for the root,
 * unprintable bytes as \DDD) — the loader's key, and safe in a log line.
 *
 * One zone, one member: members are matched by their key, so "example.com.", "Example.COM" and
 * "\101xample.com." are one zone. When the set names a zone more than once, one member is served —
 * the one written in its canonical form ("example.com." or "example.com"), else the smallest in
 * byte order — and an error naming the others is logged once (again only when they change); it
 * never fails a read. A member that does not parse as a domain name is skipped, logged once.
 *
 * Lifecycle: redis_source_start() → (callbacks on the source thread) → redis_source_stop().
 *   1. Connect (connect_timeout_ms) and AUTH / SELECT; subscribe the second connection to the
 *      keyspace channel __keyspace@<db>__:P redins:zones* S and to the change channel (below);
 *      only then read, so no change made during the read is missed.
 *   2. Full read: SMEMBERS of the set, then per zone GET the config and HSCAN the hash with COUNT
 *      1000. The first HSCAN call returns a hash of up to about 1000 labels whole (as HGETALL
 *      would), and is pipelined with the GET across 64 zones at a time; a larger hash is read
 *      with further HSCAN calls, one chunk of about 1000 labels each, so a 1,000,000-label zone
 *      never blocks Redis for longer than one chunk (1.6 ms on average in bench/redis_load.sh).
 *      Each zone is built with zone_json_new/_config/_label/_finish.
 *   3. Watch: keyspace events (hset, hdel, del, set, sadd, srem, expired, rename, ... — any event
 *      on a watched key) mark the zone, or the set, dirty. Dirty zones are re-read once the events
 *      pause for 50 ms, and at most 500 ms after the first one, so a burst of writes to one zone
 *      costs one rebuild; live changes are served well within a second. A change re-reads and
 *      rebuilds its whole zone: milliseconds for ordinary zones. A zone of LT_MIN (10,000)
 *      labels or more keeps every label's digest from its last build, so its change is read
 *      once, compared label by label, and only what differs (or is gone) is patched: 1.4 s for
 *      1,000,000 labels instead of 5.3 s (bench/redis_load.sh) — unless the writer names the
 *      labels it changed on the change
 *      channel ("<zone> <label> ..."): then only those labels are read (HMGET, with the config
 *      and the apex), built into a zone of their own and handed out through on_patch, which
 *      patches them into the zone served (zone_patch.h): 73 ms from HSET to answer on a
 *      1,000,000-label zone, 19 ms of it the patch, the rest the 50 ms window. A zone with
 *      labels named skips the whole re-read its keyspace events would cause in the same window
 *      (a writer that names labels names all it changes). The apex among them, a changed
 *      config or keys, a signed zone, or a patch the loader cannot apply read the zone whole.
 *   4. Periodic verify every zone_reload seconds, on reconnect, and on redis_source_resync(): the
 *      whole set again, but a zone is rebuilt only when a digest of its config and labels differs
 *      from the last one read (a verify reads each zone, but builds only the changed ones).
 *
 * Outcomes per zone:
 *   - built: on_zone(origin, zone) — ownership of the zone passes to the callback;
 *   - a bad label is skipped, the other labels are served: invalid JSON or values, an RRset over
 *     max_rrset_records (or the 65,535 an RRset can hold), a value over max_value_bytes, or a
 *     second label naming an owner an earlier one gave ("WWW" beside "www": the one HSCAN gave
 *     first stays, see zone_json_label()). So no label can make its zone fail: later changes to the
 *     other labels keep applying;
 *   - no config, no valid SOA, a config over max_value_bytes, or more labels than max_labels:
 *     the whole version is rejected and logged, on_zone is not called — the caller keeps the
 *     previous version; the same rejected data is not retried until it changes;
 *   - the same data as last time (a digest match): nothing is called;
 *   - the zone left the set: on_zone_gone(origin), if it had been handed out;
 *   - beyond max_zones: zones new to the source are not read once it holds max_zones (the ones it
 *     already serves keep their place; the rest in key order), until the set shrinks.
 *
 * Untrusted data: whoever can write to Redis decides what the source reads, so every name that
 * reaches a log line is printed by dname_key()/dname_to_str() or tern_escape() (a member holding
 * a newline cannot forge a line), and every bad label or breach of a bound is logged once per
 * zone, label and kind: not again at each verify or rebuild while it lasts, anew only once it
 * was fixed and came back. The breaches are counted in redis_source_stats_t the same way (each
 * once); zones beyond max_zones are a gauge.
 *
 * Change notifications need Redis' notify-keyspace-events to hold K (keyspace) and the classes
 * g $ s h x (or A). At connect the source reads it with CONFIG GET and, when something is
 * missing, logs a warning naming the exact "CONFIG SET notify-keyspace-events <value>" to run;
 * it never changes the server's configuration itself. Without notifications, changes arrive
 * through the change channel, or at the next zone_reload verify.
 *
 * The change channel, P redins:zones:changed S by default (changes_channel), is for writers in
 * places where CONFIG is not allowed: PUBLISH it a zone name ("example.com.") after changing that
 * zone, or "*" (or an empty message) after changing many; and for any writer that wants a change
 * of a large zone served in milliseconds: "example.com. www mail" after changing (or deleting)
 * the labels www and mail (step 3). It works with or without keyspace
 * notifications. A published name also re-reads the set (SMEMBERS), so that a zone added or
 * removed with it is seen: with very large sets, prefer keyspace notifications.
 *
 * Resilience: start() succeeds whether Redis is up or not. The thread connects with exponential
 * backoff (100 ms doubling to 5 s) and logs once per state change, not per attempt. When Redis
 * goes away the zones already handed out stay as they are (no callbacks), the thread reconnects
 * with the same backoff, and on reconnect runs a verify (step 4), so changes made meanwhile
 * arrive. Every read has read_timeout_ms; a Redis that stops answering counts as gone. The thread
 * waits on a wakeup eventfd beside its sockets, so stop() returns within milliseconds even while
 * a read is pending (a zone build in progress finishes its current step first).
 *
 * Sentinel (sentinels set): the node is not configured but asked for. At every (re)connect the
 * thread asks the sentinels in order (keeping a third connection to the one that answered):
 * SENTINEL get-master-addr-by-name, and for read_replica SENTINEL replicas (slaves before Redis
 * 5), taking a replica whose flags hold no s_down, o_down, disconnected and whose
 * master-link-status is ok — the current one while it stays so, else from a per-process random
 * start (src/redis/redis_sentinel.h) — or the primary, logged, when none is. Then it connects to
 * that node as above (step 1, and a verify), after checking with ROLE that a node named as primary
 * is one. While connected it asks again every 2 s and moves (reconnect + verify) when the answer
 * changes; a lost connection rediscovers, retrying at most every second. Sentinels out of reach
 * while connected are logged once and change nothing. The notify-keyspace-events warning names
 * the replica case: a replica fires events for replicated writes only with its own setting.
 *
 * Redis is the source of truth: a Redis restarted empty (no persistence) or a deleted set makes
 * every zone leave, and on_zone_gone is called for each.
 *
 * Threads: start(), resync(), get_stats() and stop() may be called from any thread (stop() once,
 * not from a callback). The callbacks, and the zone_json locate callback, run on the source thread;
 * keep them short (hand the zone to the loader and return).
 */
#ifndef TERN_REDIS_REDIS_SOURCE_H
#define TERN_REDIS_REDIS_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/zone/zone.h"
#include "tern/dnssec/dnssec_kasp.h"
#include "tern/dnssec/dnssec_kasp_keys.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/zone/zone_json.h"

/* Defaults, as redins' handler documents them where it has one. */
#define REDIS_SOURCE_DEFAULT_HOST            "127.0.0.1"
#define REDIS_SOURCE_DEFAULT_PORT            6379
#define REDIS_SOURCE_DEFAULT_CONNECT_TIMEOUT 2000 /* ms */
#define REDIS_SOURCE_DEFAULT_READ_TIMEOUT    5000 /* ms */
#define REDIS_SOURCE_DEFAULT_ZONE_RELOAD     600  /* s (redins' handler "zone_reload") */
/* A zone's key lock outlives its holder's last renewal by this (renewed every third of it): a
 * dead driver's rollover is taken over within 15 s, far inside any rollover's waits (TTLs), and
 * a Redis pause of a few seconds does not move the lock. */
#define REDIS_SOURCE_DEFAULT_KASP_LOCK 15000 /* ms */

/* Bounds on untrusted data, as the config schema's defaults: room for a 1,000,000-label zone and
 * a few hundred addresses per RRset, far below what would exhaust memory or a builder. */
#define REDIS_SOURCE_DEFAULT_MAX_VALUE_BYTES   (1u << 20) /* one label's JSON, or a zone config */
#define REDIS_SOURCE_DEFAULT_MAX_LABELS        4000000u   /* labels of one zone */
#define REDIS_SOURCE_DEFAULT_MAX_RRSET_RECORDS 10000u     /* records of one RRset (<= 65,535) */
#define REDIS_SOURCE_DEFAULT_MAX_ZONES         100000u    /* zones of the set */

/* A key policy by name (zone_max_ttl 0: the zone's largest TTL as built). */
typedef struct redis_source_kasp {
    const char *name;
    dnssec_kasp_policy_t pol;
    char *const *parents; /* "ADDR" or "ADDR@PORT": asked for a new KSK's DS (ds_want) */
    size_t nparents;
    unsigned ds_check_interval; /* seconds between those questions */
} redis_source_kasp_t;

/*
 * Where the zones are and how to watch them. Strings are copied by start(); NULL and "" mean
 * "not set". Option names in the comments are redins' (handler.redis.* and handler.zone_reload).
 */
typedef struct redis_source_config {
    const char *host;      /* "ip", or the host of "address" (host:port); default 127.0.0.1 */
    uint16_t port;         /* "port", or the port of "address"; default 6379 */
    const char *unix_path; /* "address" when "net" is "unix": a socket path (host/port unused) */
    unsigned db;           /* "db": SELECTed after connecting; also names the keyspace channel */
    const char *password;  /* "password": AUTH <password> when set */
    const char *prefix;    /* "prefix": put before every key */
    const char *suffix;    /* "suffix": put after every key */
    uint32_t
        connect_timeout_ms;   /* "connect_timeout" (redins: connection.connect_timeout); 0 = 2000 */
    uint32_t read_timeout_ms; /* "read_timeout" (redins: connection.read_timeout); 0 = 5000 */
    uint32_t zone_reload_s;   /* "zone_reload": verify every zone this often; 0 = never */
    const char *changes_channel; /* NULL: P redins:zones:changed S; "" : no change channel */
    zone_json_opts_t json;       /* how zones are built (locate callback, default TTL); its
                                    max_rrset_records is the one below */
    /* Bounds on untrusted data (see "Untrusted data" above); 0 = the default. */
    uint32_t max_value_bytes;   /* a label's JSON or a zone config longer: skipped / rejected */
    uint32_t max_labels;        /* a zone with more labels: rejected whole */
    uint32_t max_rrset_records; /* a label with a larger RRset: skipped (65,535 at most) */
    uint32_t max_zones;         /* zones of the set beyond: not read */
    /* Zones whose config says "dnssec": true are signed with redins' keys (P
     * redins:zones:<zone>:zsk:pub, :zsk:priv, :ksk:pub, :ksk:priv S, read with the config):
     * for this many workers, with this signature lifetime and refresh (0: the defaults). */
    unsigned dnssec_workers;
    dnssec_policy_t dnssec_policy;
    /* Key policies a zone's config may name instead ("dnssec_policy": "NAME", ternd.yaml's
     * dnssec_policies): tern makes and rolls its keys, kept in Redis beside redins' layout and
     * shared by every node reading it; one node at a time (the holder of the zone's lock)
     * drives them (src/redis/redis_kasp.c says how). */
    const redis_source_kasp_t *kasp;
    size_t nkasp;
    const char *node_id;   /* this node in those locks; NULL: "<hostname>:<pid>" */
    uint32_t kasp_lock_ms; /* 0: REDIS_SOURCE_DEFAULT_KASP_LOCK */
    /* High availability (see "Sentinel" above): with sentinels, host, port and unix_path are
     * unused and the node read is the one the sentinels name for sentinel_master. */
    const char *const *sentinels; /* "IP:PORT" or "[V6]:PORT", tried in order; NULL = none */
    size_t nsentinels;
    const char *sentinel_master;   /* required with sentinels */
    const char *sentinel_password; /* AUTH to the sentinels; NULL = none */
    bool read_replica;             /* read from a replica Sentinel names (needs sentinels) */
} redis_source_config_t;

/** Fill cfg with the defaults above (zone_reload 600 s, the bounds; everything else unset). */
void redis_source_config_init(redis_source_config_t *cfg);

typedef struct redis_source_callbacks {
    /* A new version of the zone at origin. Ownership of z passes to the callee (zone_free()). */
    void (*on_zone)(void *ctx, const char *origin, zone_t *z);
    /* The zone left the set (SREM, the set deleted, a Redis that came back empty). Only for a
     * zone handed out by on_zone: one that was never built is just forgotten. */
    void (*on_zone_gone)(void *ctx, const char *origin);
    /* Optional: the source connected (up) or lost Redis (down). Not called for failed attempts
     * while down. */
    void (*on_state)(void *ctx, bool up);
    /* Optional: a full read or verify finished; zones = zones in the set, failed = zones of the
     * set that could not be built (rejected data). The first call marks the end of the initial
     * load, for a caller that waits for it before serving. Not called for a read that failed
     * (Redis went away, or answered SMEMBERS with an error: then the zones stay as they are). */
    void (*on_synced)(void *ctx, size_t zones, size_t failed);
    /* Optional: the labels named on the change channel ("<zone> <label> ..."), built alone into
     * fresh (ownership passes), with their n owner names (lowercased wire names; the array is the
     * caller's): patch the zone last handed out with them (zone_patch()). A callee that cannot
     * calls redis_source_resync() and the verify builds the zone whole. Without this callback
     * such messages re-read the zone whole. */
    void (*on_patch)(void *ctx, const char *origin, zone_t *fresh, const uint8_t *const *names,
                     size_t n);
    /* Optional, called on the source's thread: true when secondaries transfer the zone at
     * origin (its canonical key). A signed one is then built with its export
     * (tern/dnssec/dnssec_export.h), each version with a serial above the last one
     * (zone_serial_next()), and built and signed again by this thread when its signatures come
     * due (the loader re-signs the others in place). */
    bool (*exported)(void *ctx, const char *origin);
    /* Optional, called on the source's thread by the node driving a zone's keys (and with n 0
     * when it stops driving it): the DS its plan waits for at the parent, for the policy's
     * parents (zone_source_env_t.ds_want); a DS seen comes back as a "ds-seen TAG" request
     * (redis_source_dnssec_request()). */
    void (*ds_want)(void *ctx, const char *origin, const char *name, const dnssec_kasp_ds_t *wants,
                    size_t n, char *const *parents, size_t nparents, unsigned interval);
    void *ctx;
} redis_source_callbacks_t;

typedef struct redis_source redis_source_t;

/**
 * Start the source thread. cfg and cb are copied (cfg->json.locate_ctx and cb->ctx must outlive
 * the source); cb->on_zone and cb->on_zone_gone are required. Returns the source, or NULL with a
 * message in err (invalid config, out of memory, no thread) — never because Redis is down.
 */
redis_source_t *redis_source_start(const redis_source_config_t *cfg,
                                   const redis_source_callbacks_t *cb, char *err,
                                   size_t errlen) TERN_WUR;

/**
 * Ask for a verify of every zone (SIGHUP, ternctl reload). Non-blocking; requests coalesce until
 * the thread gets to them. With force, every zone is rebuilt and handed out even when its data did
 * not change (e.g. the geo database behind the locate callback was replaced). Any thread.
 */
void redis_source_resync(redis_source_t *rs, bool force);

typedef struct redis_source_stats {
    bool connected;
    bool notifications;      /* keyspace notifications verified enabled at the last connect */
    size_t zones;            /* in the set at the last read */
    size_t failed;           /* of those, rejected at their last build */
    uint64_t syncs;          /* full reads and verifies finished */
    uint64_t builds;         /* zones built and handed out */
    uint64_t patches;        /* label changes handed out as patches (on_patch) */
    uint64_t rejected;       /* zone versions rejected */
    uint64_t labels_skipped; /* labels skipped in builds (bad data or a bound), per build */
    uint64_t disconnects;    /* connections lost */
    int64_t last_sync_ms;    /* duration of the last full read or verify; -1 before the first */
    /* Breaches of the bounds, each counted once, when it is logged (a label that stays too large
     * is not counted again at every rebuild of its zone) */
    uint64_t over_value_bytes;   /* labels skipped and configs refused for max_value_bytes */
    uint64_t over_labels;        /* zone versions rejected for max_labels */
    uint64_t over_rrset_records; /* labels skipped for max_rrset_records (or 65,535) */
    size_t zones_skipped;        /* zones of the set not read for max_zones, at the last read */
} redis_source_stats_t;

/** A consistent copy of the counters. Any thread. */
void redis_source_get_stats(redis_source_t *rs, redis_source_stats_t *out);

/**
 * `ternctl dnssec status [ZONE]` for the zones whose config names a key policy: zone key's (NULL:
 * every one) key states as its last build on this node stepped them, its policy and the node
 * driving its keys. A malloc'd text; NULL with err set when no such zone. Any thread.
 */
char *redis_source_dnssec_status(redis_source_t *rs, const char *key, char *err, size_t errlen);

/**
 * `ternctl dnssec rollover ZONE ROLE` ("rollover zsk") and `ds-seen ZONE [TAG]` ("ds-seen 12345",
 * "ds-seen"): tried on the zone's last key state (refused at once with the reason when the state
 * machine would refuse it), then put in Redis (P redins:zones:<zone>:kasp:requests S) for the
 * node driving the zone's keys, whichever it is, which applies it at its next tick. So any node
 * of the fleet takes the request. 0 or a negative code with the reason in err. Any thread.
 */
int redis_source_dnssec_request(redis_source_t *rs, const char *key, const char *request, char *err,
                                size_t errlen) TERN_WUR;

/** Stop the thread, close the connections, free the source. Returns within milliseconds unless a
 * build step or a callback is running. NULL is a no-op. */
void redis_source_stop(redis_source_t *rs);

#endif
