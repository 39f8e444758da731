/*
 * api_zones.c — the endpoints that change zones in Redis (api.h): POST .../zones creates a zone
 * in redins' schema (api_newzone.h builds it, redis_write_create_zone() writes it), DELETE
 * .../zones/{zone} removes one, and .../zones/{zone}/redins/{label} reads, replaces or deletes
 * one label's redins JSON (tern's own endpoint: a steered or health-checked RRset whole, which
 * PowerDNS' rrsets cannot say).
 *
 * tern's Redis source is what serves every change (it sees the write on the change channel and
 * through keyspace events), as it serves any other writer's: each endpoint waits, at most
 * API_SERVE_WAIT_MS, until the loader's published view has the change before it answers, so a
 * client's next query sees it.
 *
 * Every request opens its own Redis connection (the startup config's redis:) and closes it:
 * creating and deleting zones is rare, and a connection thread then holds no state between
 * requests. Each change is logged with the API key's name and the client's address.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_int.h"
#include "tern/api/api_auth.h"
#include "tern/api/api_newzone.h"
#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/xfr/journal.h" /* RFC 1982 serial arithmetic */
#include "tern/common/log.h"
#include "tern/redis/redis_write.h"
#include "tern/zone/zone_json.h"

/* How long a change written to Redis may take to be served before the answer says it is not:
 * the Redis source reads a new zone whole (one round trip per label batch and a build), which
 * takes milliseconds for the zones an API creates; 10 s leaves room for a loaded loader. */
#define API_SERVE_WAIT_MS 10000
/* How often the wait looks at the published view. */
#define API_SERVE_POLL_MS 20
/* The request's Redis connection, where the config gives no timeout: a dead Redis fails the
 * request within seconds, not the client's timeout. */
#define API_REDIS_TIMEOUT_MS 2000

/* ---- helpers ------------------------------------------------------------------------------ */

/* A change made here, in the update service's list `ternctl zone` shows (removed and added
 * count labels here: a zone created adds its labels, one deleted removes the zone). */
static void audit(api_t *a, const api_req_t *q, const char *key, uint32_t from, uint32_t to,
                  size_t removed, size_t added)
{
    if (!a->upd)
        return;
    update_audit_t e = {
        .when = (int64_t)time(NULL), .from = from, .to = to, .removed = removed, .added = added};
    snprintf(e.who, sizeof(e.who), "api key %.40s from %.60s", q->key->name, q->peer);
    update_audit_note(a->upd, key, &e);
}

/* A Redis connection for this request, open; NULL with r answered. */
static redis_conn_t *rconn(const api_req_t *q, api_resp_t *r)
{
    const config_redis_t *rc = &q->cfg->redis;
    char where[160], name[200], err[256];
    redis_conn_where_of(rc, where, sizeof(where));
    snprintf(name, sizeof(name), "api: redis %s", where);
    redis_conn_config_t cc;
    /* no retries within a request: the backoff is never waited for */
    redis_conn_config_of(rc, name, API_REDIS_TIMEOUT_MS, 1, 1, &cc);
    redis_conn_t *c = redis_conn_new(&cc, err, sizeof(err));
    if (!c) {
        api_error(r, 500, "redis: %s", err);
        return NULL;
    }
    if (redis_conn_open(c) < 0) {
        api_error(r, 500, "redis %s: %s", where, redis_conn_why(c));
        redis_conn_free(c);
        return NULL;
    }
    return c;
}

/* A Redis write's code as the answer: the client's mistakes 4xx, Redis' trouble 500. */
static void write_error(api_resp_t *r, int rc, const char *why)
{
    unsigned status =
        rc == TERN_EEXIST                                                                    ? 409
        : rc == TERN_ENOENT                                                                  ? 404
        : rc == TERN_EINVAL || rc == TERN_ESYNTAX || rc == TERN_ELIMIT || rc == TERN_ENOTSUP ? 422
                                                                                             : 500;
    if (status == 409)
        api_error(r, 409, "Conflict: %s", why);
    else
        api_error(r, status, "%s", why[0] ? why : tern_strerror(rc));
}

/* The SOA of the version of zone key served now: 1 with its TTL and RDATA (copied into soa,
 * SOA_MAX bytes), 0 when none is served. */
#define SOA_MAX (2 * DNAME_MAXLEN + 20)
static int served_soa(api_t *a, const char *key, uint32_t *ttl, uint8_t *soa, uint16_t *len)
{
    zone_t *z = api_pin(a, key);
    int served = 0;
    if (z && !z->unavailable && z->soa) {
        uint16_t l = tern_rd16(z->soa->rdata);
        if (l >= 22 && l <= SOA_MAX) {
            memcpy(soa, z->soa->rdata + 2, l);
            *len = l;
            *ttl = z->soa->ttl;
            served = 1;
        }
    }
    zone_free(z);
    return served;
}

static uint32_t soa_serial(const uint8_t *soa, uint16_t len)
{
    return tern_rd32(soa + len - 20);
}

/* Wait until zone key is served with a serial at or after want (RFC 1982; any: any serial), or
 * not served at all (gone). Whether it happened within API_SERVE_WAIT_MS; a stop ends the wait
 * (false), so a shutdown never waits on it. */
static bool wait_served(api_t *a, const char *key, bool gone, bool any, uint32_t want)
{
    struct timespec step = {0, API_SERVE_POLL_MS * 1000000L};
    for (int waited = 0; waited <= API_SERVE_WAIT_MS && !atomic_load(&a->stopping);
         waited += API_SERVE_POLL_MS) {
        uint8_t soa[SOA_MAX];
        uint16_t len = 0;
        uint32_t ttl;
        int served = served_soa(a, key, &ttl, soa, &len);
        if (gone ? !served : served && (any || xfr_serial_ge(soa_serial(soa, len), want)))
            return true;
        nanosleep(&step, NULL);
    }
    return false;
}

/* Whether ternd.yaml gives zone key a source of its own (a file, or primaries): such a zone is
 * the config's, not Redis'. A zones: entry with neither only carries settings (allow_update)
 * for a zone another source serves. */
static bool configured(const api_req_t *q, const char *key)
{
    for (size_t i = 0; i < q->cfg->nzones; i++) {
        const config_zone_t *cz = &q->cfg->zones[i];
        char ck[DNAME_KEY_MAX];
        const char *why;
        if ((cz->file || cz->nprimaries) && dname_key(cz->origin, ck, sizeof(ck), &why) >= 0 &&
            strcmp(ck, key) == 0)
            return true;
    }
    return false;
}

/* "YYYYMMDD01" for today (UTC): the serial pdns' SOA-EDIT-API DEFAULT gives a new zone. */
static uint32_t date_serial(void)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    return (uint32_t)((tm.tm_year + 1900) * 1000000 + (tm.tm_mon + 1) * 10000 + tm.tm_mday * 100 +
                      1);
}

/* ---- POST and DELETE of zones ------------------------------------------------------------- */

void api_zones_create(api_t *a, const api_req_t *q, api_resp_t *r)
{
    api_newzone_t z;
    char why[1024] = "";
    int rc = api_newzone_build(q->body, q->len, date_serial(), &z, why, sizeof(why));
    if (rc < 0) {
        api_error(r, rc == TERN_ENOMEM ? 500 : 422, "%s", why);
        goto out;
    }
    if (!api_auth_zone_ok(q->key, z.origin)) {
        api_error(r, 403, "Forbidden: API key %s may not create zone %s", q->key->name, z.origin);
        goto out;
    }
    uint8_t soa[SOA_MAX];
    uint16_t len;
    uint32_t ttl;
    if (configured(q, z.origin) || served_soa(a, z.origin, &ttl, soa, &len)) {
        api_error(r, 409, "Conflict: zone %s is already served%s", z.origin,
                  configured(q, z.origin) ? " (ternd.yaml configures it)" : "");
        goto out;
    }
    if (!q->cfg->redis.enabled) {
        api_error(r, 422,
                  "cannot create zone %s: tern creates zones in Redis; configure redis:", z.origin);
        goto out;
    }
    redis_conn_t *c = rconn(q, r);
    if (!c)
        goto out;
    char member[DNAME_KEY_MAX + 2];
    snprintf(member, sizeof(member), "%s.", z.origin);
    rc = redis_write_create_zone(c, &q->cfg->redis, member, z.config, (const char *const *)z.labels,
                                 (const char *const *)z.texts, z.n, why, sizeof(why));
    redis_conn_free(c);
    if (rc < 0) {
        write_error(r, rc, why);
        goto out;
    }
    log_info("api: zone %s created in Redis (%zu labels, serial %u) by api key %s from %s",
             z.origin, z.n, z.serial, q->key->name, q->peer);
    audit(a, q, z.origin, 0, z.serial, 0, z.n);
    if (!wait_served(a, z.origin, false, true, 0)) {
        api_error(r, 500,
                  "zone %s was written to Redis but is not served after %d ms; it is served once "
                  "tern's Redis source reads it (DELETE the zone to undo)",
                  z.origin, API_SERVE_WAIT_MS);
        goto out;
    }
    api_zone_get(a, q, z.origin, 201, r);
out:
    api_newzone_free(&z);
}

/* DELETE of zone key that Redis does not hold: 422 for a zone served from elsewhere, else 404. */
static void not_in_redis(api_t *a, const char *key, const char *why, api_resp_t *r)
{
    uint8_t soa[SOA_MAX];
    uint16_t len;
    uint32_t ttl;
    if (served_soa(a, key, &ttl, soa, &len))
        api_error(r, 422, "zone %s is not in Redis%s: remove it where it comes from", key, why);
    else
        api_error(r, 404, "Not Found");
}

void api_zones_delete(api_t *a, const api_req_t *q, const char *key, api_resp_t *r)
{
    if (!api_auth_zone_ok(q->key, key)) {
        api_error(r, 404, "Not Found");
        return;
    }
    if (configured(q, key)) {
        api_error(r, 422, "zone %s is configured in ternd.yaml: remove it there", key);
        return;
    }
    if (!q->cfg->redis.enabled) {
        not_in_redis(a, key, " (no redis: is configured)", r);
        return;
    }
    redis_conn_t *c = rconn(q, r);
    if (!c)
        return;
    char why[512] = "";
    int rc = redis_write_delete_zone(c, &q->cfg->redis, key, why, sizeof(why));
    redis_conn_free(c);
    if (rc == TERN_ENOENT) {
        not_in_redis(a, key, "", r);
        return;
    }
    if (rc < 0) {
        write_error(r, rc, why);
        return;
    }
    log_info("api: zone %s deleted from Redis by api key %s from %s", key, q->key->name, q->peer);
    audit(a, q, key, 0, 0, 1, 0);
    if (!wait_served(a, key, true, false, 0)) {
        api_error(r, 500,
                  "zone %s was deleted from Redis but is still served after %d ms; it goes once "
                  "tern's Redis source reads the set",
                  key, API_SERVE_WAIT_MS);
        return;
    }
    r->status = 204;
}

/* ---- one label's redins JSON -------------------------------------------------------------- */

/* A PUT or DELETE of one label: redis_edit_fn's context. */
typedef struct ledit {
    const char *origin, *label;
    const char *body; /* the new JSON (NULL: delete) */
    size_t len;
    uint32_t ttl; /* the served SOA, its serial raised */
    uint8_t soa[SOA_MAX];
    uint16_t soa_len;
} ledit_t;

/* The label and config as tern's reader reads them (zone_json.h): its message, else 0. */
static int validate(const ledit_t *e, const char *config, char *err, size_t errlen)
{
    const zone_json_opts_t opts = {.dnssec_deferred = true};
    zone_json_t *zj = zone_json_new(e->origin, "redins JSON", &opts, err, errlen);
    if (!zj)
        return TERN_EINVAL;
    int rc = zone_json_config(zj, config, strlen(config), err, errlen);
    if (rc == 0 && e->body)
        rc = zone_json_label(zj, e->label, e->body, e->len, err, errlen);
    zone_json_free(zj);
    return rc;
}

/* redis_edit_fn: label 0 becomes the body (or goes), the config gets the raised SOA and is
 * read with the label as tern's reader will. */
static int label_edit(void *ctx, size_t i, const char *json, size_t len, char **out, char *err,
                      size_t errlen)
{
    ledit_t *e = ctx;
    *out = NULL;
    if (i == 0) {
        if (!e->body && !json) {
            snprintf(err, errlen, "no label %s in zone %s", e->label, e->origin);
            return TERN_ENOENT;
        }
        return e->body && !(*out = strndup(e->body, e->len)) ? TERN_ENOMEM : 0;
    }
    int rc = zone_json_config_set_soa(json, len, e->ttl, e->soa, e->soa_len, out, err, errlen);
    if (rc == 0 && (rc = validate(e, *out, err, errlen)) < 0) {
        free(*out);
        *out = NULL;
        rc = rc == TERN_ENOMEM ? rc : TERN_EINVAL;
    }
    return rc;
}

/* GET: the label's text as Redis holds it. */
static void label_get(redis_conn_t *c, const config_redis_t *cfg, const char *member,
                      const char *label, api_resp_t *r)
{
    char *text = NULL, why[512] = "";
    int rc = redis_write_label_get(c, cfg, member, label, &text, why, sizeof(why));
    if (rc == TERN_ENOENT) {
        api_error(r, 404, "Not Found: %s", why);
    } else if (rc < 0) {
        write_error(r, rc, why);
    } else {
        r->status = 200;
        tern_buf_append(&r->body, text, strlen(text));
    }
    free(text);
}

/* PUT or DELETE: written as one change with the raised serial, answered once it is served. */
static void label_change(api_t *a, const api_req_t *q, redis_conn_t *c, const char *member,
                         ledit_t *e, api_resp_t *r)
{
    if (e->body) {
        json_error_t je;
        json_t *doc = json_loadb(e->body, e->len, 0, &je);
        bool obj = json_is_object(doc);
        json_decref(doc);
        if (!obj) {
            api_error(r, 422, "label %s: not a JSON object%s%s", e->label, doc ? "" : ": ",
                      doc ? "" : je.text);
            return;
        }
    }
    if (!served_soa(a, e->origin, &e->ttl, e->soa, &e->soa_len)) {
        api_error(r, 404, "Not Found");
        return;
    }
    uint32_t serial = soa_serial(e->soa, e->soa_len) + 1;
    tern_wr32(e->soa + e->soa_len - 20, serial);
    const char *labels[] = {e->label};
    const redis_write_t w = {.cfg = &q->cfg->redis,
                             .member = member,
                             .labels = labels,
                             .nlabels = 1,
                             .edit = label_edit,
                             .ctx = e};
    char why[1024] = "";
    int rc = redis_write_zone(c, &w, why, sizeof(why));
    if (rc < 0) {
        write_error(r, rc, why);
        return;
    }
    log_info("api: zone %s label %s %s in Redis (serial %u) by api key %s from %s", e->origin,
             e->label, e->body ? "replaced" : "deleted", serial, q->key->name, q->peer);
    audit(a, q, e->origin, serial - 1, serial, 1, e->body ? 1 : 0);
    if (!wait_served(a, e->origin, false, false, serial)) {
        api_error(r, 500,
                  "label %s of zone %s was written to Redis but serial %u is not served after "
                  "%d ms; it is served once tern's Redis source reads it",
                  e->label, e->origin, serial, API_SERVE_WAIT_MS);
        return;
    }
    r->status = 204;
}

void api_zones_redins(api_t *a, const api_req_t *q, const char *key, const char *label,
                      api_resp_t *r)
{
    if (!api_auth_zone_ok(q->key, key)) {
        api_error(r, 404, "Not Found");
        return;
    }
    if (!label[0] || strchr(label, '/') || strchr(label, ' ')) {
        api_error(r, 404, "Not Found");
        return;
    }
    if (!q->cfg->redis.enabled) {
        api_error(r, 422, "zone %s is not in Redis: no redis: is configured", key);
        return;
    }
    redis_conn_t *c = rconn(q, r);
    if (!c)
        return;
    char member[DNAME_KEY_MAX + 2], why[512] = "";
    int rc = redis_write_member(c, &q->cfg->redis, key, member, sizeof(member), why, sizeof(why));
    if (rc == TERN_ENOENT)
        api_error(r, 422, "zone %s is not in Redis: %s", key, why);
    else if (rc < 0)
        write_error(r, rc, why);
    else if (strcmp(q->method, "GET") == 0 || strcmp(q->method, "HEAD") == 0)
        label_get(c, &q->cfg->redis, member, label, r);
    else {
        ledit_t e = {.origin = key,
                     .label = label,
                     .body = strcmp(q->method, "PUT") == 0 ? (q->body ? q->body : "") : NULL,
                     .len = q->len};
        label_change(a, q, c, member, &e, r);
    }
    redis_conn_free(c);
}
