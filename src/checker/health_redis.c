/*
 * health_redis.c — endpoint state in Redis, shared with other tern and redins nodes (see
 * health_redis.h and health_check.h).
 *
 * Key layout (P and S: the configured prefix and suffix, around every key as redins' Redis
 * layer puts them):
 *   P redins:healthcheck:<owner>.:<ip> S   the state, JSON as redins writes it: {"protocol",
 *                                         "uri", "port", "status", "lastcheck", "timeout",
 *                                         "up_count", "down_count", "enable", "domain_uuid"}
 *                                         plus tern's "error"; EX update_interval
 *   P tern:healthcheck:... S               the same for checks redins cannot make (tcp, or no
 *                                         owner), so a redins node never probes them
 *   P tern:healthlock:<state key> S        "node pid" while one node checks (SET NX PX)
 * redins reads every key matching redins:healthcheck:* as a state: the lock must not match it.
 *
 * The connection is a redis_conn (tern/redis/redis_conn.h), the zone source's type: with
 * Sentinel (health.redis without an address of its own, beside "redis: sentinel:") the states
 * are kept on the primary Sentinel names, and follow it through a failover as the zones do.
 */
#include "health_redis.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tern/common/clock.h"
#include "tern/common/log.h"
#include "health_load.h"
#include "tern/redis/redis_conn.h"

/* Redis on loopback or the LAN answers in well under a millisecond; a second without an answer
 * means it is gone for now, and every second the checker waits is a second without checks. */
#define HREDIS_TIMEOUT_MS 1000
/* Reconnect backoff: 1 s doubling to 30 s. */
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000
/* The lock outlives the check by this much: the check ends (timeout) before the lock does. */
#define LOCK_SLACK_MS 2000
/* A state key's JSON is a few hundred bytes; anything much larger is not one of ours. */
#define STATE_MAX 8192

struct hredis {
    redis_conn_t *conn; /* the node: configured, or the primary Sentinel names */
    char *prefix, *suffix;
    uint64_t errors;
    bool logged_down; /* one "down" line per outage */
    char node[96];    /* lock value: who checks */
    char where[300];  /* host:port or the socket's path, for messages */
};

hredis_t *hredis_new(const config_redis_t *r)
{
    hredis_t *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    redis_conn_where_of(r, h->where, sizeof(h->where));
    char cwhere[sizeof(h->where) + 16], err[256];
    snprintf(cwhere, sizeof(cwhere), "health: redis %s", h->where);
    redis_conn_config_t cc; /* states are written: the primary */
    redis_conn_config_of(r, cwhere, HREDIS_TIMEOUT_MS, BACKOFF_MIN_MS, BACKOFF_MAX_MS, &cc);
    h->conn = redis_conn_new(&cc, err, sizeof(err));
    h->prefix = strdup(r->prefix ? r->prefix : "");
    h->suffix = strdup(r->suffix ? r->suffix : "");
    char hn[64] = "?";
    (void)gethostname(hn, sizeof(hn) - 1);
    snprintf(h->node, sizeof(h->node), "%s %ld", hn, (long)getpid());
    if (!h->conn || !h->prefix || !h->suffix) {
        if (!h->conn)
            log_err("health: redis %s: %s", h->where, err);
        hredis_free(h);
        return NULL;
    }
    return h;
}

/* A failed connect or command: closed, retried after the backoff (which doubles). */
static void drop(hredis_t *h, const char *reason)
{
    char why[160]; /* reason is often the connection's own text, overwritten by the next call */
    snprintf(why, sizeof(why), "%s", reason);
    redis_conn_failed(h->conn);
    h->errors++;
    if (!h->logged_down)
        log_warn("health: redis %s: %s; checking locally, retrying every %d s at most", h->where,
                 why, BACKOFF_MAX_MS / 1000);
    h->logged_down = true;
}

void hredis_free(hredis_t *h)
{
    if (!h)
        return;
    redis_conn_free(h->conn);
    free(h->prefix);
    free(h->suffix);
    free(h);
}

bool hredis_connected(const hredis_t *h)
{
    return redis_conn_is_open(h->conn);
}

uint64_t hredis_errors(const hredis_t *h)
{
    return h->errors;
}

/* With Sentinel, while connected: still the primary Sentinel names? False when it moved (the
 * connection is closed; the caller connects again at once). */
static bool still_primary(hredis_t *h, int64_t now_ms)
{
    if (now_ms < redis_conn_next_check(h->conn) || redis_conn_sentinel_check(h->conn) == 0)
        return true;
    log_info("health: redis %s: %s", h->where, redis_conn_why(h->conn));
    redis_conn_lost(h->conn);
    return false;
}

bool hredis_ready(hredis_t *h, int64_t now_ms)
{
    if (redis_conn_is_open(h->conn)) {
        if (still_primary(h, now_ms))
            return true;
        /* Sentinel names another primary: connect to it at once */
    } else if (now_ms < redis_conn_retry_at(h->conn)) {
        return false;
    }
    if (redis_conn_open(h->conn) < 0) {
        drop(h, redis_conn_why(h->conn));
        return false;
    }
    redis_conn_reset_backoff(h->conn);
    if (h->logged_down)
        log_info("health: redis connected again: sharing check results");
    h->logged_down = false;
    return true;
}

/* Queue one command (argv NULL-terminated) on the connection. */
static int cmd(hredis_t *h, const char *const *argv)
{
    return redis_conn_append(h->conn, redis_conn_cmd(h->conn), argv);
}

/* The next reply (ours to free); a failure leaves redis_conn_why() saying why. */
static int reply(hredis_t *h, redisReply **r)
{
    return redis_conn_reply(h->conn, redis_conn_cmd(h->conn), r);
}

static void key_of(const hredis_t *h, const char *mid, const char *rkey, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s%s", h->prefix, mid, rkey, h->suffix);
}

/* ---- time ---------------------------------------------------------------------------------- */

void hredis_format_time(int64_t wall_ms, char *buf, size_t len)
{
    time_t s = (time_t)(wall_ms / 1000);
    unsigned ms = (unsigned)(((wall_ms % 1000) + 1000) % 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char base[24]; /* "2026-11-25T10:00:00": 19 */
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%09uZ", base, ms * 1000000u);
}

bool hredis_parse_time(const char *s, int64_t *wall_ms)
{
    struct tm tm = {0};
    int n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &n) != 6 ||
        n != 19)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const char *p = s + n;
    int64_t ms = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3)
                ms = ms * 10 + (*p - '0');
        if (digits == 0)
            return false;
        for (; digits < 3; digits++)
            ms *= 10;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int hh, mm;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
            return false;
        off = (int64_t)(hh * 60 + mm) * 60 * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return false;
    }
    if (*p)
        return false;
    time_t t = timegm(&tm);
    *wall_ms = ((int64_t)t - off) * 1000 + ms;
    return true;
}

/* ---- claim and publish --------------------------------------------------------------------- */

/* A state value as redins or tern wrote it: status and lastcheck; false when it is not one. */
static bool parse_state(const char *text, size_t len, hredis_state_t *st)
{
    if (len > STATE_MAX)
        return false;
    json_t *root = json_loadb(text, len, 0, NULL);
    if (!root)
        return false;
    json_t *status = json_object_get(root, "status");
    json_t *last = json_object_get(root, "lastcheck");
    json_t *err = json_object_get(root, "error");
    bool ok = json_is_object(root) && json_is_integer(status) && json_is_string(last) &&
              hredis_parse_time(json_string_value(last), &st->lastcheck);
    if (ok) {
        json_int_t v = json_integer_value(status);
        st->status = v > HEALTH_COUNT_MAX    ? HEALTH_COUNT_MAX
                     : v < -HEALTH_COUNT_MAX ? -HEALTH_COUNT_MAX
                                             : (int)v;
        snprintf(st->error, sizeof(st->error), "%s",
                 json_is_string(err) ? json_string_value(err) : "");
    }
    json_decref(root);
    return ok;
}

int hredis_claim(hredis_t *h, struct ep *const *eps, unsigned n, unsigned interval_ms,
                 int64_t now_wall, hredis_state_t *out)
{
    char key[HEALTH_RKEY_MAX + 256];
    memset(out, 0, n * sizeof(*out));
    if (!hredis_connected(h) || n == 0)
        return hredis_connected(h) ? 0 : -1;
    for (unsigned i = 0; i < n; i++) {
        key_of(h, "", eps[i]->rkey, key, sizeof(key));
        if (cmd(h, (const char *[]){"GET", key, NULL}) < 0)
            goto fail;
    }
    bool need_lock = false;
    for (unsigned i = 0; i < n; i++) {
        redisReply *r;
        if (reply(h, &r) < 0)
            goto fail;
        hredis_state_t st = {0};
        bool have = r->type == REDIS_REPLY_STRING && parse_state(r->str, r->len, &st) &&
                    st.lastcheck <= now_wall + 60000; /* a clock far ahead must not stop checks */
        if (have)
            out[i] = st;
        out[i].have_state = have;
        /* fresh: checked (by anyone) less than an interval ago */
        if (have && st.lastcheck > now_wall - (int64_t)interval_ms) {
            out[i].decision = HREDIS_ADOPT;
        } else {
            out[i].decision = HREDIS_CHECK;
            need_lock = true;
        }
        freeReplyObject(r);
    }
    if (!need_lock)
        return 0;
    unsigned sent = 0;
    for (unsigned i = 0; i < n; i++) {
        if (out[i].decision != HREDIS_CHECK)
            continue;
        char ttl[24];
        snprintf(ttl, sizeof(ttl), "%u", eps[i]->spec.timeout_ms + LOCK_SLACK_MS);
        key_of(h, "tern:healthlock:", eps[i]->rkey, key, sizeof(key));
        if (cmd(h, (const char *[]){"SET", key, h->node, "NX", "PX", ttl, NULL}) < 0)
            goto fail;
        sent++;
    }
    for (unsigned i = 0; i < n; i++) {
        if (out[i].decision != HREDIS_CHECK)
            continue;
        redisReply *r;
        if (reply(h, &r) < 0)
            goto fail;
        /* OK: ours; nil: someone else's */
        if (r->type == REDIS_REPLY_NIL)
            out[i].decision = HREDIS_WAIT;
        else if (r->type == REDIS_REPLY_ERROR)
            log_debug("health: redis: lock refused: %s", r->str);
        freeReplyObject(r);
    }
    (void)sent;
    return 0;
fail:
    drop(h, redis_conn_why(h->conn));
    memset(out, 0, n * sizeof(*out));
    return -1;
}

int hredis_loads(hredis_t *h, struct ep *const *eps, unsigned n, uint32_t *out)
{
    if (!hredis_connected(h))
        return -1;
    for (unsigned i = 0; i < n; i++)
        if (cmd(h, (const char *[]){"HGET", eps[i]->spec.load_key, eps[i]->addr_text, NULL}) < 0)
            goto fail;
    for (unsigned i = 0; i < n; i++) {
        redisReply *r;
        if (reply(h, &r) < 0)
            goto fail;
        uint32_t m;
        out[i] = r->type == REDIS_REPLY_STRING && health_load_parse_text(r->str, r->len, &m) == 0
                     ? m
                     : HEALTH_LOAD_UNKNOWN;
        if (r->type == REDIS_REPLY_ERROR) /* e.g. WRONGTYPE: the key is not a hash */
            log_debug("health: redis: HGET %s: %s", eps[i]->spec.load_key, r->str);
        freeReplyObject(r);
    }
    return 0;
fail:
    drop(h, redis_conn_why(h->conn));
    return -1;
}

/* The state JSON of one result, in redins' HealthCheckItem fields (and tern's "error"). */
static char *state_json(const hredis_result_t *x)
{
    const health_spec_t *s = &x->e->spec;
    char when[40];
    hredis_format_time(x->wall_ms, when, sizeof(when));
    const char *proto = health_proto_name(s->proto);
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "protocol", json_string(proto));
    json_object_set_new(o, "uri", json_string(s->uri ? s->uri : "/"));
    json_object_set_new(o, "port", json_integer(s->port));
    json_object_set_new(o, "status", json_integer(x->status));
    json_object_set_new(o, "lastcheck", json_string(when));
    json_object_set_new(o, "timeout", json_integer(s->timeout_ms));
    json_object_set_new(o, "up_count", json_integer(s->up_count));
    json_object_set_new(o, "down_count", json_integer(s->down_count));
    json_object_set_new(o, "enable", json_true());
    json_object_set_new(o, "domain_uuid", json_string(""));
    json_object_set_new(o, "error", json_string(x->error ? x->error : ""));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

int hredis_publish(hredis_t *h, const hredis_result_t *res, unsigned n, unsigned ttl_s)
{
    char key[HEALTH_RKEY_MAX + 256], ttl[16];
    if (!hredis_connected(h))
        return -1;
    snprintf(ttl, sizeof(ttl), "%u", ttl_s ? ttl_s : 1);
    unsigned sent = 0;
    for (unsigned i = 0; i < n; i++) {
        char *json = state_json(&res[i]);
        if (!json)
            continue;
        key_of(h, "", res[i].e->rkey, key, sizeof(key));
        int rc = cmd(h, (const char *[]){"SET", key, json, "EX", ttl, NULL});
        free(json);
        if (rc < 0)
            goto fail;
        key_of(h, "tern:healthlock:", res[i].e->rkey, key, sizeof(key));
        if (cmd(h, (const char *[]){"DEL", key, NULL}) < 0)
            goto fail;
        sent += 2;
    }
    for (unsigned i = 0; i < sent; i++) {
        redisReply *r;
        if (reply(h, &r) < 0)
            goto fail;
        if (r->type == REDIS_REPLY_ERROR)
            log_debug("health: redis: %s", r->str);
        freeReplyObject(r);
    }
    return 0;
fail:
    drop(h, redis_conn_why(h->conn));
    return -1;
}
