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

#include "tern/common/log.h"

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
    redisContext *c;
    char *host, *unix_path, *password, *prefix, *suffix;
    uint16_t port;
    unsigned db;
    unsigned connect_ms, read_ms;
    int64_t retry_at; /* monotonic ms */
    int64_t backoff;
    uint64_t errors;
    bool logged_down; /* one "down" line per outage */
    char node[96];    /* lock value: who checks */
    char where[300];  /* host:port or the socket's path, for messages */
};

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

hredis_t *hredis_new(const config_redis_t *r)
{
    hredis_t *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->host = dup_or_null(r->host ? r->host : (r->unix_path ? NULL : "127.0.0.1"));
    h->unix_path = dup_or_null(r->unix_path);
    h->password = dup_or_null(r->password);
    h->prefix = dup_or_null(r->prefix ? r->prefix : "");
    h->suffix = dup_or_null(r->suffix ? r->suffix : "");
    h->port = r->port ? r->port : 6379;
    h->db = r->db;
    h->connect_ms = r->connect_timeout_ms ? r->connect_timeout_ms : HREDIS_TIMEOUT_MS;
    h->read_ms = r->read_timeout_ms ? r->read_timeout_ms : HREDIS_TIMEOUT_MS;
    h->backoff = BACKOFF_MIN_MS;
    char hn[64] = "?";
    (void)gethostname(hn, sizeof(hn) - 1);
    snprintf(h->node, sizeof(h->node), "%s %ld", hn, (long)getpid());
    if (h->unix_path)
        snprintf(h->where, sizeof(h->where), "%s", h->unix_path);
    else if (h->host)
        snprintf(h->where, sizeof(h->where), strchr(h->host, ':') ? "[%s]:%u" : "%s:%u", h->host,
                 h->port);
    if ((r->host || !r->unix_path) && !h->host) {
        hredis_free(h);
        return NULL;
    }
    if (!h->prefix || !h->suffix || (r->unix_path && !h->unix_path) ||
        (r->password && !h->password)) {
        hredis_free(h);
        return NULL;
    }
    return h;
}

static void drop(hredis_t *h, int64_t now_ms, const char *reason)
{
    char why[160]; /* reason is often h->c->errstr, freed just below */
    snprintf(why, sizeof(why), "%s", reason);
    if (h->c) {
        redisFree(h->c);
        h->c = NULL;
    }
    h->errors++;
    h->retry_at = now_ms + h->backoff;
    if (!h->logged_down)
        log_warn("health: redis %s: %s; checking locally, retrying every %d s at most", h->where,
                 why, BACKOFF_MAX_MS / 1000);
    h->logged_down = true;
    h->backoff = h->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : h->backoff * 2;
}

void hredis_free(hredis_t *h)
{
    if (!h)
        return;
    if (h->c)
        redisFree(h->c);
    free(h->host);
    free(h->unix_path);
    free(h->password);
    free(h->prefix);
    free(h->suffix);
    free(h);
}

bool hredis_connected(const hredis_t *h)
{
    return h->c != NULL;
}

uint64_t hredis_errors(const hredis_t *h)
{
    return h->errors;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A command whose reply must not be an error (AUTH, SELECT). */
static bool simple(hredis_t *h, const char *fmt, const char *arg)
{
    redisReply *r = redisCommand(h->c, fmt, arg);
    bool ok = r && r->type != REDIS_REPLY_ERROR;
    if (r)
        freeReplyObject(r);
    return ok;
}

bool hredis_ready(hredis_t *h, int64_t now_ms)
{
    if (h->c)
        return true;
    if (now_ms < h->retry_at)
        return false;
    struct timeval ct = {h->connect_ms / 1000, (h->connect_ms % 1000) * 1000};
    struct timeval rt = {h->read_ms / 1000, (h->read_ms % 1000) * 1000};
    h->c = h->unix_path ? redisConnectUnixWithTimeout(h->unix_path, ct)
                        : redisConnectWithTimeout(h->host, h->port, ct);
    if (!h->c || h->c->err) {
        char why[160];
        snprintf(why, sizeof(why), "%s", h->c ? h->c->errstr : "out of memory");
        drop(h, mono_ms(), why);
        return false;
    }
    char db[16];
    snprintf(db, sizeof(db), "%u", h->db);
    if (redisSetTimeout(h->c, rt) != REDIS_OK ||
        (h->password && !simple(h, "AUTH %s", h->password)) ||
        (h->db && !simple(h, "SELECT %s", db))) {
        drop(h, mono_ms(), h->c && h->c->err ? h->c->errstr : "AUTH or SELECT refused");
        return false;
    }
    if (h->logged_down)
        log_info("health: redis connected again: sharing check results");
    h->logged_down = false;
    h->backoff = BACKOFF_MIN_MS;
    return true;
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
    if (!h->c || n == 0)
        return h->c ? 0 : -1;
    for (unsigned i = 0; i < n; i++) {
        key_of(h, "", eps[i]->rkey, key, sizeof(key));
        if (redisAppendCommand(h->c, "GET %s", key) != REDIS_OK)
            goto fail;
    }
    bool need_lock = false;
    for (unsigned i = 0; i < n; i++) {
        redisReply *r;
        if (redisGetReply(h->c, (void **)&r) != REDIS_OK || !r)
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
        if (redisAppendCommand(h->c, "SET %s %s NX PX %s", key, h->node, ttl) != REDIS_OK)
            goto fail;
        sent++;
    }
    for (unsigned i = 0; i < n; i++) {
        if (out[i].decision != HREDIS_CHECK)
            continue;
        redisReply *r;
        if (redisGetReply(h->c, (void **)&r) != REDIS_OK || !r)
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
    drop(h, mono_ms(), h->c && h->c->err ? h->c->errstr : "no reply");
    memset(out, 0, n * sizeof(*out));
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
    if (!h->c)
        return -1;
    snprintf(ttl, sizeof(ttl), "%u", ttl_s ? ttl_s : 1);
    unsigned sent = 0;
    for (unsigned i = 0; i < n; i++) {
        char *json = state_json(&res[i]);
        if (!json)
            continue;
        key_of(h, "", res[i].e->rkey, key, sizeof(key));
        int rc = redisAppendCommand(h->c, "SET %s %s EX %s", key, json, ttl);
        free(json);
        if (rc != REDIS_OK)
            goto fail;
        key_of(h, "tern:healthlock:", res[i].e->rkey, key, sizeof(key));
        if (redisAppendCommand(h->c, "DEL %s", key) != REDIS_OK)
            goto fail;
        sent += 2;
    }
    for (unsigned i = 0; i < sent; i++) {
        redisReply *r;
        if (redisGetReply(h->c, (void **)&r) != REDIS_OK || !r)
            goto fail;
        if (r->type == REDIS_REPLY_ERROR)
            log_debug("health: redis: %s", r->str);
        freeReplyObject(r);
    }
    return 0;
fail:
    drop(h, mono_ms(), h->c && h->c->err ? h->c->errstr : "no reply");
    return -1;
}
