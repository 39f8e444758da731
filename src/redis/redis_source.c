/*
 * redis_source.c — see redis_source.h. The source's thread: it connects through redis_conn.h
 * (two connections to the data node, and with Sentinel one to a sentinel), subscribes, and then
 * serves change events, idle PINGs, periodic verifies and Sentinel checks in one poll(2) loop
 * beside a wakeup eventfd, so no wait outlives its deadline or a stop request. Reading and
 * building zones is redis_read.c; the zone table and the set's membership redis_sync.c.
 */
#include "tern/redis/redis_source.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/common/mem.h"

#include "redis_int.h"

/* Coalescing of change events: a zone is re-read once its events pause for QUIET_MS, and at the
 * latest MAX_DELAY_MS after the first one, so 200 quick HSETs cost one or two rebuilds and a
 * steady stream of writes still shows up twice a second. A message on the change channel naming
 * labels is a writer's whole change, published after it: flushed at once. */
#define QUIET_MS     50
#define MAX_DELAY_MS 500

/* Reconnect backoff: quick for a Redis restart, at most one attempt per 5 s for a long outage. */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

/* With Sentinel, a reconnect is one SENTINEL query and one connect, and the wait for a failover
 * (down-after-milliseconds plus an election: seconds) is when it matters: retry at least once a
 * second, not every 5 s. */
#define SENTINEL_BACKOFF_MAX_MS 1000

/* After this long without traffic a connection is PINGed: a Redis that vanished without closing
 * the socket (a host gone, a partition) is noticed within PING_IDLE_MS + the read timeout. */
#define PING_IDLE_MS 15000

/* How long stop() lets the thread release its key locks: one round trip per zone it drives on
 * a Redis that answers; a shutdown is never held longer. */
#define RELEASE_WAIT_MS 1000

/* Zone builds yield to the DNS workers when they share a CPU, as the loader's do. */
#define SOURCE_NICE 10

static int64_t now_ms(void)
{
    return tern_monotonic_ms();
}

static bool stopping(redis_source_t *rs)
{
    return atomic_load_explicit(&rs->stop, memory_order_acquire);
}

void redis_int_stats(redis_source_t *rs, void (*fn)(redis_source_stats_t *, void *), void *arg)
{
    pthread_mutex_lock(&rs->mu);
    fn(&rs->stats, arg);
    pthread_mutex_unlock(&rs->mu);
}

/* --- change events --- */

static void touch(redis_source_t *rs)
{
    int64_t t = now_ms();
    if (!rs->pending) {
        rs->pending = true;
        rs->first_ev = t;
    }
    rs->last_ev = t;
}

void redis_source_mark_dirty(redis_source_t *rs, struct zst *z)
{
    if (!z->dirty) {
        if (rs->ndirty == rs->capdirty) {
            size_t cap = rs->capdirty ? rs->capdirty * 2 : 64;
            struct zst **d = realloc(rs->dirty, cap * sizeof(*d));
            if (!d) {
                /* no room to remember it: a verify of everything covers it */
                int none = 0;
                atomic_compare_exchange_strong(&rs->resync, &none, 1);
                return;
            }
            rs->dirty = d;
            rs->capdirty = cap;
        }
        rs->dirty[rs->ndirty++] = z;
        z->dirty = true;
    }
    touch(rs);
}

static void ldirty_add(redis_source_t *rs, struct zst *z)
{
    for (size_t i = 0; i < rs->nldirty; i++)
        if (rs->ldirty[i] == z)
            return;
    if (tern_grow((void **)&rs->ldirty, &rs->capldirty, rs->nldirty + 1, sizeof(*rs->ldirty)) < 0) {
        redis_sync_plab_clear(z);
        redis_source_mark_dirty(rs, z);
        return;
    }
    rs->ldirty[rs->nldirty++] = z;
}

/* Whether the part of a key after "<zone>" (from its ':', len bytes) names a key of the zone. */
static bool is_zone_suffix(const char *s, size_t len)
{
    if (len == sizeof(":config") - 1 && memcmp(s, ":config", len) == 0)
        return true;
    /* the key state tern's driving node writes (redis_kasp.c); its lock, keys and requests
     * change no zone by themselves */
    if (len == sizeof(":kasp") - 1 && memcmp(s, ":kasp", len) == 0)
        return true;
    for (size_t i = 0; i < 4; i++)
        if (len == strlen(redis_read_key_suffixes[i]) &&
            memcmp(s, redis_read_key_suffixes[i], len) == 0)
            return true;
    return false;
}

/* A keyspace event on key (P + inner + S). */
static void on_key_event(redis_source_t *rs, const char *key, size_t len)
{
    static const char set[] = "redins:zones";
    if (len < rs->plen + rs->slen || memcmp(key, rs->prefix, rs->plen) != 0 ||
        memcmp(key + len - rs->slen, rs->suffix, rs->slen) != 0)
        return;
    const char *in = key + rs->plen;
    size_t n = len - rs->plen - rs->slen;
    if (n == sizeof(set) - 1 && memcmp(in, set, n) == 0) {
        rs->set_dirty = true;
        touch(rs);
        return;
    }
    if (n <= sizeof(set) || memcmp(in, set, sizeof(set) - 1) != 0 || in[sizeof(set) - 1] != ':')
        return;
    in += sizeof(set);
    n -= sizeof(set);
    /* "<zone>" is the hash, "<zone>:config" the config, "<zone>:zsk:pub" and the like its
     * DNSSEC keys (redins' layout); zone names hold no ':' */
    const char *colon = memchr(in, ':', n);
    if (colon && !is_zone_suffix(colon, (size_t)(in + n - colon)))
        return;
    struct zst *z = redis_sync_zone_by_name(rs, in, colon ? (size_t)(colon - in) : n, true);
    if (z)
        redis_source_mark_dirty(rs,
                                z); /* a zone not (yet) in the set is read when the set names it */
}

/* "<zone> <label> ...": those labels of the zone changed (or were deleted). Remembered for a
 * patch (patch_zone()); too many, or no memory, make it a full read of the zone. */
static void on_label_message(redis_source_t *rs, struct zst *z, const char *p, const char *end)
{
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const char *q = p;
        while (q < end && *q != ' ' && *q != '\t')
            q++;
        if (q == p)
            break;
        char *lab = z->nplab < PLAB_MAX ? strndup(p, (size_t)(q - p)) : NULL;
        if (!lab || tern_grow((void **)&z->plab, &z->capplab, z->nplab + 1, sizeof(*z->plab)) < 0) {
            free(lab);
            redis_sync_plab_clear(z);
            redis_source_mark_dirty(rs, z);
            return;
        }
        z->plab[z->nplab++] = lab;
        p = q;
    }
    if (z->nplab)
        ldirty_add(rs, z);
}

/* A message on the change channel: a zone name, or "*" / "" for everything; a zone name
 * followed by labels ("example.com. www mail") names what changed in it, which is patched into
 * the zone served instead of building it again (zone_patch.h). */
static void on_change_message(redis_source_t *rs, const char *msg, size_t len)
{
    if (len == 0 || (len == 1 && msg[0] == '*')) {
        int expected = 0;
        atomic_compare_exchange_strong(&rs->resync, &expected, 1);
        return;
    }
    const char *sp = memchr(msg, ' ', len);
    if (sp) {
        struct zst *z = redis_sync_zone_by_name(rs, msg, (size_t)(sp - msg), false);
        if (z && z->served) {
            on_label_message(rs, z, sp + 1, msg + len);
            touch(rs);
            rs->named = true; /* published after its write: nothing more of it is coming */
            return;
        }
        len = (size_t)(sp - msg); /* a zone not served yet: read it whole */
    }
    /* the name may have been added to or removed from the set with it */
    rs->set_dirty = true;
    touch(rs);
    struct zst *z =
        redis_sync_zone_by_name(rs, msg, len, false); /* a writer may spell it another way */
    if (z)
        redis_source_mark_dirty(rs, z);
}

static bool str_eq(const redisReply *r, const char *s)
{
    return is_str(r) && r->len == strlen(s) && memcmp(r->str, s, r->len) == 0;
}

/* One reply on the subscriber connection. */
static void on_sub_reply(redis_source_t *rs, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !is_str(r->element[0]))
        return;
    const redisReply *kind = r->element[0];
    if (str_eq(kind, "pmessage") && r->elements == 4 && is_str(r->element[2])) {
        const redisReply *ch = r->element[2];
        size_t kp = strlen(rs->ks_prefix);
        if (ch->len > kp && memcmp(ch->str, rs->ks_prefix, kp) == 0)
            on_key_event(rs, ch->str + kp, ch->len - kp);
    } else if (str_eq(kind, "message") && r->elements == 3 && is_str(r->element[2])) {
        on_change_message(rs, r->element[2]->str, r->element[2]->len);
    } else if (str_eq(kind, "pong")) {
        rs->sub_ping_out = false;
    } else if (str_eq(kind, "psubscribe") || str_eq(kind, "subscribe")) {
        rs->sub_confirm++;
    }
}

/* on_sub_reply() as redis_conn.h's on_sub. */
static void on_sub_void(void *ctx, const redisReply *r)
{
    on_sub_reply(ctx, r);
}

/* Check notify-keyspace-events; warn (once per distinct value) when changes would be missed. */
static bool check_notifications(redis_source_t *rs)
{
    redisReply *r;
    const char *argv[] = {"CONFIG", "GET", "notify-keyspace-events", NULL};
    if (rs_run(rs, &r, argv) < 0)
        return false; /* the caller sees the connection fail on its next command */
    /* what changes are seen through without keyspace events */
    char fallback[256];
    int o = snprintf(fallback, sizeof(fallback), "%s%s%s", rs->channel ? "the change channel " : "",
                     rs->channel ? rs->channel : "", rs->channel ? ", " : "");
    if (rs->zone_reload)
        snprintf(fallback + o, sizeof(fallback) - (size_t)o, "a verify every %lld s (zone_reload)",
                 (long long)(rs->zone_reload / 1000));
    else
        snprintf(fallback + o, sizeof(fallback) - (size_t)o,
                 "a verify on reconnect or reload (zone_reload is off)");
    const char *v = "?";
    bool readable = r->type == REDIS_REPLY_ARRAY && r->elements == 2 && is_str(r->element[1]) &&
                    r->element[1]->len < sizeof(rs->notify_value);
    if (readable)
        v = r->element[1]->str;
    /* the flags needed: K (keyspace channel) and the classes of every command that changes a
     * zone: g (DEL, RENAME, EXPIRE), $ (SET), s (SADD, SREM), h (HSET, HDEL), x (expired); A is
     * all the classes */
    static const char need[] = "Kg$shx";
    char want[sizeof(rs->notify_value) + sizeof(need)];
    size_t n = (size_t)snprintf(want, sizeof(want), "%s", readable ? v : "");
    bool ok = readable;
    for (const char *k = need; readable && *k; k++) {
        if (strchr(v, *k) || (*k != 'K' && strchr(v, 'A')))
            continue;
        ok = false;
        want[n++] = *k;
        want[n] = '\0';
    }
    bool again = rs->notify_warned && strcmp(rs->notify_value, v) == 0;
    if (!readable && !again)
        log_warn("%s: cannot read notify-keyspace-events (%s); if keyspace notifications are "
                 "off, changes are seen only through %s",
                 rs->where, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply", fallback);
    else if (!ok && !again)
        log_warn("%s: keyspace notifications are %s (notify-keyspace-events \"%s\"), so changes "
                 "are seen only through %s; to see them at once run: "
                 "CONFIG SET notify-keyspace-events '%s'%s",
                 rs->where, v[0] ? "incomplete" : "off", v, fallback, want,
                 redis_conn_sentinel(rs->conn)
                     ? (redis_conn_replica(rs->conn)
                            ? " on this replica (a replica fires events for the writes "
                              "it replicates only with its own setting; CONFIG SET "
                              "works on a replica; tern never changes it): set it on "
                              "every node a failover may pick"
                            : " (tern never changes it): set it on every node a "
                              "failover may promote")
                     : "");
    rs->notify_warned = !ok;
    snprintf(rs->notify_value, sizeof(rs->notify_value), "%s", v);
    freeReplyObject(r);
    return ok;
}

static void set_connected(redis_source_stats_t *st, void *arg)
{
    st->connected = *(bool *)arg;
    if (!st->connected)
        st->disconnects++;
}

static void set_notifications(redis_source_stats_t *st, void *arg)
{
    st->notifications = *(bool *)arg;
}

/* Subscribe the subscriber connection to the keyspace channel and the change channel, and wait
 * for the confirmations. */
static int subscribe(redis_source_t *rs)
{
    redisContext *sub = redis_conn_sub(rs->conn);
    const char *psub[] = {"PSUBSCRIBE", rs->k_pattern, NULL};
    const char *chan[] = {"SUBSCRIBE", rs->channel, NULL};
    int rc;
    rs->sub_confirm = 0;
    if ((rc = redis_conn_append(rs->conn, sub, psub)) < 0 ||
        (rs->channel && (rc = redis_conn_append(rs->conn, sub, chan)) < 0))
        return rc;
    unsigned want = rs->channel ? 2 : 1;
    while (rs->sub_confirm < want) {
        redisReply *r;
        if ((rc = redis_conn_reply(rs->conn, sub, &r)) < 0)
            return rc;
        if (r->type == REDIS_REPLY_ERROR) {
            redis_conn_fail(rs->conn, "PSUBSCRIBE: %s", r->str);
            freeReplyObject(r);
            return E_CONN;
        }
        on_sub_reply(rs, r);
        freeReplyObject(r);
    }
    return 0;
}

/* Both connections (redis_conn_open()), subscribed, or E_CONN / E_STOP with both closed. */
static int connect_all(redis_source_t *rs)
{
    int rc = redis_conn_open(rs->conn);
    if (rc == 0)
        rc = subscribe(rs);
    if (rc < 0)
        return rc;
    bool notify = check_notifications(rs);
    redis_int_stats(rs, set_notifications, &notify);
    rs->sub_ping_out = false;
    return 0;
}

/* --- the thread --- */

static void went_down(redis_source_t *rs)
{
    redis_conn_lost(rs->conn); /* the next attempt in BACKOFF_MIN_MS */
    if (rs->up) {
        const char *why = redis_conn_why(rs->conn);
        rs->up = false;
        log_warn("%s: connection lost (%s); serving the zones already read, reconnecting",
                 rs->where, why);
        snprintf(rs->last_down, sizeof(rs->last_down), "%s", why);
        bool up = false;
        redis_int_stats(rs, set_connected, &up);
        if (rs->cb.on_state)
            rs->cb.on_state(rs->cb.ctx, false);
    }
}

/* Wait until deadline (monotonic ms) or a wakeup. */
static void wait_until(redis_source_t *rs, int64_t deadline)
{
    int64_t left = deadline - now_ms();
    if (left <= 0)
        return;
    struct pollfd p = {.fd = rs->wakefd, .events = POLLIN};
    uint64_t v;
    if (poll(&p, 1, left > 60000 ? 60000 : (int)left) > 0 && read(rs->wakefd, &v, sizeof(v)) < 0)
        v = 0; /* EAGAIN: already drained; the flags are what matter */
}

static int try_connect(redis_source_t *rs)
{
    int rc = connect_all(rs);
    if (rc == E_STOP)
        return rc;
    if (rc < 0) {
        /* logged once per distinct reason, not per attempt */
        const char *why = redis_conn_why(rs->conn);
        if (strcmp(rs->last_down, why) != 0) {
            log_warn("%s: cannot connect (%s); retrying every %d ms at most", rs->where, why,
                     redis_conn_sentinel(rs->conn) ? SENTINEL_BACKOFF_MAX_MS : BACKOFF_MAX_MS);
            snprintf(rs->last_down, sizeof(rs->last_down), "%s", why);
        } else {
            log_debug("%s: cannot connect (%s)", rs->where, why);
        }
        redis_conn_failed(rs->conn); /* the next attempt after the backoff, which doubles */
        return 0;
    }
    rs->up = true;
    rs->last_down[0] = '\0';
    redis_conn_reset_backoff(rs->conn);
    if (redis_conn_sentinel(rs->conn)) {
        char buf[128];
        log_info("%s: connected to %s %s of %s", rs->where,
                 redis_conn_replica(rs->conn) ? "the replica" : "the primary",
                 redis_conn_node_text(rs->conn, buf, sizeof(buf)), rs->master);
    } else {
        log_info("%s: connected", rs->where);
    }
    bool up = true;
    redis_int_stats(rs, set_connected, &up);
    if (rs->cb.on_state)
        rs->cb.on_state(rs->cb.ctx, true);
    /* a (re)connect may have missed any number of changes: verify everything */
    int req = atomic_exchange(&rs->resync, 0);
    return redis_sync_full(rs, req == 2);
}

/* Send a PING on the subscriber connection without waiting; the pong comes with the events. */
static int sub_ping(redis_source_t *rs)
{
    const char *ping[] = {"PING", NULL};
    redisContext *sub = redis_conn_sub(rs->conn);
    int done;
    int rc = redis_conn_append(rs->conn, sub, ping);
    if (rc < 0)
        return rc;
    if (redisBufferWrite(sub, &done) != REDIS_OK)
        return redis_conn_fail(rs->conn, "subscriber connection: %s", sub->errstr);
    rs->sub_ping_out = true;
    rs->sub_ping_at = now_ms();
    return 0;
}

/* Wait up to left ms for an event on the subscriber connection (handled) or a wakeup. */
static int wait_events(redis_source_t *rs, int64_t left)
{
    if (left <= 0)
        return 0;
    struct pollfd p[2] = {{.fd = rs->wakefd, .events = POLLIN},
                          {.fd = redis_conn_sub(rs->conn)->fd, .events = POLLIN}};
    int k = poll(p, 2, left > 60000 ? 60000 : (int)left);
    if (k < 0 && errno != EINTR)
        return redis_conn_fail(rs->conn, "poll: %s", strerror(errno));
    uint64_t v;
    if (k > 0 && p[0].revents && read(rs->wakefd, &v, sizeof(v)) < 0)
        v = 0; /* EAGAIN: already drained; the flags are what matter */
    if (stopping(rs))
        return E_STOP;
    if (k > 0 && p[1].revents)
        return redis_conn_sub_drain(rs->conn);
    return 0;
}

/* How often the thread looks for signed zones whose signatures are due (the ones secondaries
 * transfer, redis_source_callbacks_t.exported): a minute is nothing against a refresh window of
 * days, as the loader's own check for the others. */
#define RESIGN_CHECK_MS 60000

/* Those zones, built and signed again as a change would (the version gets a new serial). */
static void resign_due(redis_source_t *rs)
{
    int64_t now = (int64_t)time(NULL);
    for (size_t b = 0; b < rs->nbucket; b++)
        for (struct zst *z = rs->bucket[b]; z; z = z->next)
            if (z->resign_at && now >= z->resign_at) {
                log_info("%s: zone %s: signatures due; signing a new version for its "
                         "secondaries",
                         rs->where, z->origin);
                z->resign_at = 0;
                z->resign = true;
                redis_source_mark_dirty(rs, z);
                touch(rs);
                rs->named = true; /* nothing else is coming: now */
            }
}

/* One turn of the loop while connected. */
static int serve(redis_source_t *rs)
{
    int64_t t = now_ms();
    if (t >= rs->resign_check) {
        rs->resign_check = t + RESIGN_CHECK_MS;
        resign_due(rs);
    }
    if (rs->nkasp) {
        int rc = redis_kasp_flush(rs); /* ternctl's requests, into Redis first */
        if (rc < 0)
            return rc;
    }
    if (rs->nkasp && t >= rs->kasp_tick) {
        int rc = redis_kasp_tick(rs);
        if (rc < 0)
            return rc;
    }
    int64_t next = rs->next_verify;
    if (rs->resign_check < next)
        next = rs->resign_check;
    if (rs->nkasp && rs->kasp_tick < next)
        next = rs->kasp_tick;
    if (rs->pending) {
        int64_t at = rs->named ? t : rs->last_ev + QUIET_MS;
        if (at > rs->first_ev + MAX_DELAY_MS)
            at = rs->first_ev + MAX_DELAY_MS;
        if (at < next)
            next = at;
    }
    int64_t cmd_last = redis_conn_last_reply(rs->conn, false);
    int64_t sub_last = redis_conn_last_reply(rs->conn, true);
    if (cmd_last + PING_IDLE_MS < next)
        next = cmd_last + PING_IDLE_MS;
    if (redis_conn_next_check(rs->conn) < next)
        next = redis_conn_next_check(rs->conn);
    if (rs->sub_ping_out && rs->sub_ping_at + rs->read_timeout < next)
        next = rs->sub_ping_at + rs->read_timeout;
    else if (!rs->sub_ping_out && sub_last + PING_IDLE_MS < next)
        next = sub_last + PING_IDLE_MS;
    int rc = wait_events(rs, next - t);
    if (rc < 0)
        return rc;
    t = now_ms();
    int req = atomic_exchange(&rs->resync, 0);
    if (req || t >= rs->next_verify)
        return redis_sync_full(rs, req == 2);
    if (rs->pending &&
        (rs->named || t >= rs->last_ev + QUIET_MS || t >= rs->first_ev + MAX_DELAY_MS)) {
        rs->named = false;
        return redis_sync_flush(rs);
    }
    if (t >= redis_conn_next_check(rs->conn))
        return redis_conn_sentinel_check(rs->conn);
    if (rs->sub_ping_out && t >= rs->sub_ping_at + rs->read_timeout)
        return redis_conn_fail(rs->conn, "subscriber connection: no reply to PING within %lld ms",
                               (long long)rs->read_timeout);
    if (!rs->sub_ping_out && t >= sub_last + PING_IDLE_MS && (rc = sub_ping(rs)) < 0)
        return rc;
    if (t >= cmd_last + PING_IDLE_MS) {
        const char *ping[] = {"PING", NULL};
        return redis_conn_run_ok(rs->conn, redis_conn_cmd(rs->conn), "PING", ping);
    }
    return 0;
}

static void *source_main(void *arg)
{
    redis_source_t *rs = arg;
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), SOURCE_NICE) < 0)
        log_debug("%s: cannot lower the source thread's priority", rs->where);
    if (mem_thread_bind(rs->arena) < 0)
        log_debug("%s: cannot bind to its jemalloc arena; using the default one", rs->where);
    while (!stopping(rs)) {
        int rc;
        if (atomic_load_explicit(&rs->release, memory_order_acquire) == 1) {
            if (rs->up)
                redis_kasp_release(rs); /* another node takes the zones at once */
            atomic_store_explicit(&rs->release, 2, memory_order_release);
        }
        if (!rs->up) {
            if (now_ms() < redis_conn_retry_at(rs->conn)) {
                wait_until(rs, redis_conn_retry_at(rs->conn));
                continue;
            }
            rc = try_connect(rs);
        } else {
            rc = serve(rs);
        }
        if (rc == E_STOP)
            break;
        if (rc < 0)
            went_down(rs);
    }
    redis_conn_free(rs->conn); /* closed on the thread that used it */
    rs->conn = NULL;
    return NULL;
}

/* --- public --- */

void redis_source_config_init(redis_source_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->zone_reload_s = REDIS_SOURCE_DEFAULT_ZONE_RELOAD;
    cfg->max_value_bytes = REDIS_SOURCE_DEFAULT_MAX_VALUE_BYTES;
    cfg->max_labels = REDIS_SOURCE_DEFAULT_MAX_LABELS;
    cfg->max_rrset_records = REDIS_SOURCE_DEFAULT_MAX_RRSET_RECORDS;
    cfg->max_zones = REDIS_SOURCE_DEFAULT_MAX_ZONES;
}

static char *printf_dup(const char *fmt, ...) TERN_PRINTF(1, 2);

static char *printf_dup(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* s with Redis glob specials escaped, so a prefix or suffix matches only itself. */
static char *glob_escape(const char *s)
{
    char *e = malloc(2 * strlen(s) + 1), *o = e;
    if (!e)
        return NULL;
    for (; *s; s++) {
        if (strchr("*?[]\\", *s))
            *o++ = '\\';
        *o++ = *s;
    }
    *o = '\0';
    return e;
}

static void source_free(redis_source_t *rs)
{
    if (!rs)
        return;
    redis_conn_free(rs->conn);
    redis_sync_free(rs);
    free(rs->bad_members);
    free(rs->dirty);
    free(rs->ldirty);
    free(rs->master);
    free(rs->prefix);
    free(rs->suffix);
    free(rs->where);
    free(rs->k_set);
    free(rs->ks_prefix);
    free(rs->k_pattern);
    free(rs->channel);
    for (size_t i = 0; i < rs->nkasp; i++) {
        free(rs->kasp[i].name);
        for (size_t j = 0; j < rs->kasp[i].nparents; j++)
            free(rs->kasp[i].parents[j]);
        free(rs->kasp[i].parents);
    }
    free(rs->kasp);
    free(rs->node_id);
    redis_kasp_free(rs);
    if (rs->wakefd >= 0)
        close(rs->wakefd);
    pthread_mutex_destroy(&rs->mu);
    free(rs);
}

/* The settings of cfg that are the zone reader's (the connection's are redis_conn's). */
static void take_settings(redis_source_t *rs, const redis_source_config_t *cfg)
{
    rs->db = cfg->db;
    rs->read_timeout =
        cfg->read_timeout_ms ? cfg->read_timeout_ms : REDIS_SOURCE_DEFAULT_READ_TIMEOUT;
    rs->zone_reload = (int64_t)cfg->zone_reload_s * 1000;
    rs->json = cfg->json;
    rs->json.dnssec_deferred = true; /* the keys come with the config (zb_keys()) */
    rs->dnssec_workers = cfg->dnssec_workers ? cfg->dnssec_workers : 1;
    rs->dnssec_policy = cfg->dnssec_policy;
    rs->json.max_rrset_records =
        cfg->max_rrset_records ? cfg->max_rrset_records : REDIS_SOURCE_DEFAULT_MAX_RRSET_RECORDS;
    rs->max_value_bytes =
        cfg->max_value_bytes ? cfg->max_value_bytes : REDIS_SOURCE_DEFAULT_MAX_VALUE_BYTES;
    rs->max_labels = cfg->max_labels ? cfg->max_labels : REDIS_SOURCE_DEFAULT_MAX_LABELS;
    rs->max_zones = cfg->max_zones ? cfg->max_zones : REDIS_SOURCE_DEFAULT_MAX_ZONES;
    rs->next_verify = INT64_MAX;
    rs->kasp_lock_ms = cfg->kasp_lock_ms ? cfg->kasp_lock_ms : REDIS_SOURCE_DEFAULT_KASP_LOCK;
}

/* The key policies and this node's id in their locks (redis_kasp.c). False: no memory. */
static bool take_kasp(redis_source_t *rs, const redis_source_config_t *cfg)
{
    if (cfg->nkasp && !(rs->kasp = calloc(cfg->nkasp, sizeof(*rs->kasp))))
        return false;
    for (size_t i = 0; i < cfg->nkasp; i++) {
        redis_kasp_policy_t *k = &rs->kasp[rs->nkasp++]; /* counted first: freed whatever fails */
        k->pol = cfg->kasp[i].pol;
        k->ds_check_interval = cfg->kasp[i].ds_check_interval;
        if (!(k->name = strdup(cfg->kasp[i].name)) ||
            (cfg->kasp[i].nparents &&
             !(k->parents = calloc(cfg->kasp[i].nparents, sizeof(*k->parents)))))
            return false;
        for (; k->nparents < cfg->kasp[i].nparents; k->nparents++)
            if (!(k->parents[k->nparents] = strdup(cfg->kasp[i].parents[k->nparents])))
                return false;
    }
    if (cfg->node_id && cfg->node_id[0])
        rs->node_id = strdup(cfg->node_id);
    else {
        /* unique in a fleet: the host, and the process (two ternd on one host are two nodes) */
        char host[256] = "";
        if (gethostname(host, sizeof(host) - 1) < 0)
            snprintf(host, sizeof(host), "?");
        rs->node_id = printf_dup("%s:%d", host, (int)getpid());
    }
    return rs->node_id != NULL;
}

/* "redis://host:port/db" and the like, for messages and the zones' source. NULL: no memory. */
static char *where_of(const redis_source_config_t *cfg, const char *host, uint16_t port)
{
    if (cfg->nsentinels)
        return printf_dup("redis+sentinel://%s/%u",
                          cfg->sentinel_master ? cfg->sentinel_master : "", cfg->db);
    if (cfg->unix_path && cfg->unix_path[0])
        return printf_dup("redis+unix://%s/%u", cfg->unix_path, cfg->db);
    if (strchr(host, ':'))
        return printf_dup("redis://[%s]:%u/%u", host, port, cfg->db);
    return printf_dup("redis://%s:%u/%u", host, port, cfg->db);
}

/* The keys and channels: P redins:zones S, the keyspace channel and its pattern, the change
 * channel. False: no memory. */
static bool make_keys(redis_source_t *rs, const redis_source_config_t *cfg)
{
    rs->plen = strlen(rs->prefix);
    rs->slen = strlen(rs->suffix);
    char *ep = glob_escape(rs->prefix), *es = glob_escape(rs->suffix);
    rs->k_set = printf_dup("%sredins:zones%s", rs->prefix, rs->suffix);
    rs->ks_prefix = printf_dup("__keyspace@%u__:", rs->db);
    if (ep && es)
        rs->k_pattern = printf_dup("__keyspace@%u__:%sredins:zones*%s", rs->db, ep, es);
    free(ep);
    free(es);
    if (!cfg->changes_channel)
        rs->channel = printf_dup("%sredins:zones:changed%s", rs->prefix, rs->suffix);
    else if (cfg->changes_channel[0])
        rs->channel = strdup(cfg->changes_channel);
    return rs->k_set && rs->ks_prefix && rs->k_pattern &&
           (rs->channel || (cfg->changes_channel && !cfg->changes_channel[0]));
}

/* The connection (redis_conn.h): the node of cfg, two connections to it, this source's wakeup
 * and stop flag, its subscriber replies to on_sub_reply(). */
static int make_conn(redis_source_t *rs, const redis_source_config_t *cfg, const char *host,
                     uint16_t port, char *err, size_t errlen)
{
    bool sentinel = cfg->nsentinels > 0;
    redis_conn_config_t cc = {
        .where = rs->where,
        .host = host,
        .port = port,
        .unix_path = cfg->unix_path,
        .db = cfg->db,
        .password = cfg->password,
        .connect_timeout_ms = cfg->connect_timeout_ms ? cfg->connect_timeout_ms
                                                      : REDIS_SOURCE_DEFAULT_CONNECT_TIMEOUT,
        .read_timeout_ms = (uint32_t)rs->read_timeout,
        .sentinels = cfg->sentinels,
        .nsentinels = cfg->nsentinels,
        .sentinel_master = cfg->sentinel_master,
        .sentinel_password = cfg->sentinel_password,
        .read_replica = cfg->read_replica,
        .subscriber = true,
        .backoff_min_ms = BACKOFF_MIN_MS,
        .backoff_max_ms = sentinel ? SENTINEL_BACKOFF_MAX_MS : BACKOFF_MAX_MS,
        .wakefd = rs->wakefd,
        .stop = &rs->stop,
        .on_sub = on_sub_void,
        .ctx = rs,
    };
    char cerr[256];
    if (!(rs->conn = redis_conn_new(&cc, cerr, sizeof(cerr)))) {
        if (strcmp(cerr, "out of memory") == 0)
            snprintf(err, errlen, "out of memory");
        else
            snprintf(err, errlen, "redis source: %s", cerr);
        return TERN_EINVAL;
    }
    return 0;
}

redis_source_t *redis_source_start(const redis_source_config_t *cfg,
                                   const redis_source_callbacks_t *cb, char *err, size_t errlen)
{
    if (!cfg || !cb || !cb->on_zone || !cb->on_zone_gone) {
        snprintf(err, errlen, "redis source: on_zone and on_zone_gone are required");
        return NULL;
    }
    redis_source_t *rs = calloc(1, sizeof(*rs));
    if (!rs) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    rs->wakefd = -1;
    pthread_mutex_init(&rs->mu, NULL);
    rs->stats.last_sync_ms = -1;
    rs->cb = *cb;
    take_settings(rs, cfg);
    const char *host = cfg->host && cfg->host[0] ? cfg->host : REDIS_SOURCE_DEFAULT_HOST;
    uint16_t port = cfg->port ? cfg->port : REDIS_SOURCE_DEFAULT_PORT;
    rs->prefix = strdup(cfg->prefix ? cfg->prefix : "");
    rs->suffix = strdup(cfg->suffix ? cfg->suffix : "");
    rs->where = where_of(cfg, host, port);
    rs->master = cfg->sentinel_master ? strdup(cfg->sentinel_master) : NULL;
    if (!rs->prefix || !rs->suffix || !rs->where || (cfg->sentinel_master && !rs->master) ||
        !take_kasp(rs, cfg))
        goto nomem;
    rs->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (rs->wakefd < 0) {
        snprintf(err, errlen, "redis source: eventfd: %s", strerror(errno));
        goto fail;
    }
    if (make_conn(rs, cfg, host, port, err, errlen) < 0)
        goto fail;
    if (!make_keys(rs, cfg))
        goto nomem;
    rs->arena = mem_arena_create();
    int e = pthread_create(&rs->thread, NULL, source_main, rs);
    if (e != 0) {
        snprintf(err, errlen, "redis source: cannot start its thread: %s", strerror(e));
        goto fail;
    }
    return rs;
nomem:
    snprintf(err, errlen, "out of memory");
fail:
    source_free(rs);
    return NULL;
}

static void wake(redis_source_t *rs)
{
    uint64_t one = 1;
    ssize_t n = write(rs->wakefd, &one, sizeof(one));
    (void)n; /* EAGAIN: the counter is already non-zero, the thread will wake */
}

void redis_source_resync(redis_source_t *rs, bool force)
{
    if (!rs)
        return;
    int want = force ? 2 : 1, cur = atomic_load(&rs->resync);
    while (cur < want && !atomic_compare_exchange_weak(&rs->resync, &cur, want))
        ;
    wake(rs);
}

void redis_source_get_stats(redis_source_t *rs, redis_source_stats_t *out)
{
    pthread_mutex_lock(&rs->mu);
    *out = rs->stats;
    pthread_mutex_unlock(&rs->mu);
}

char *redis_source_dnssec_status(redis_source_t *rs, const char *key, char *err, size_t errlen)
{
    return redis_kasp_status(rs, key, err, errlen);
}

int redis_source_dnssec_request(redis_source_t *rs, const char *key, const char *request, char *err,
                                size_t errlen)
{
    int rc = redis_kasp_ctl_request(rs, key, request, err, errlen);
    if (rc == 0)
        wake(rs);
    return rc;
}

void redis_source_stop(redis_source_t *rs)
{
    if (!rs)
        return;
    if (rs->nkasp) {
        /* the thread releases the key locks it holds first, so another node drives those zones
         * at once rather than after the lock's expiry; a thread that does not get to it within
         * RELEASE_WAIT_MS (Redis slow or gone) leaves them to expire */
        atomic_store_explicit(&rs->release, 1, memory_order_release);
        wake(rs);
        for (int i = 0; i < RELEASE_WAIT_MS / 10 &&
                        atomic_load_explicit(&rs->release, memory_order_acquire) != 2;
             i++)
            usleep(10000);
    }
    atomic_store_explicit(&rs->stop, true, memory_order_release);
    wake(rs);
    pthread_join(rs->thread, NULL);
    source_free(rs);
}
