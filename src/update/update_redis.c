/*
 * update_redis.c — a change of a zone Redis serves, written into Redis in redins' schema
 * (tern/redis/redis_write.h): each touched name's label gets its changed RRsets' new JSON
 * (zone_json_label_set(): everything else the label holds stays, geo fields of the records that
 * stay included), the zone config its new SOA, in one MULTI/EXEC, and the labels are named on the
 * change channel. tern's own Redis source then serves it, as every other node reading the same
 * Redis does; the update service waits for that like for a file zone's publish.
 *
 * The update thread's alone: its Redis connection (made anew when the settings change) and
 * every call here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/redis/redis_write.h"
#include "tern/update/update_msg.h"
#include "tern/zone/zone_json.h"
#include "update_int.h"

/* Timeouts of the update thread's Redis connection where the settings give none: an UPDATE
 * waits for it, so a dead Redis must fail it within seconds. */
#define UREDIS_TIMEOUT_MS     2000
#define UREDIS_BACKOFF_MIN_MS 500
#define UREDIS_BACKOFF_MAX_MS 5000

void update_redis_close(update_t *u)
{
    redis_conn_free(u->rconn);
    u->rconn = NULL;
    redis_settings_free(&u->rconn_cfg);
}

/* The connection to the Redis configured now, open; NULL with why. */
static redis_conn_t *conn(update_t *u, char *why, size_t whylen)
{
    pthread_mutex_lock(&u->mu);
    bool enabled = u->rcfg.enabled, fresh = u->rconn_gen != u->rgen || !u->rconn;
    config_redis_t copy = {0};
    int rc = enabled && fresh ? redis_settings_copy(&copy, &u->rcfg) : 0;
    uint64_t gen = u->rgen;
    pthread_mutex_unlock(&u->mu);
    if (!enabled) {
        snprintf(why, whylen, "no Redis is configured");
        return NULL;
    }
    if (rc < 0) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    if (fresh) {
        update_redis_close(u);
        u->rconn_cfg = copy;
        u->rconn_gen = gen;
        char where[160], err[256];
        redis_conn_where_of(&u->rconn_cfg, where, sizeof(where));
        char name[200];
        snprintf(name, sizeof(name), "update: redis %s", where);
        redis_conn_config_t cc;
        redis_conn_config_of(&u->rconn_cfg, name, UREDIS_TIMEOUT_MS, UREDIS_BACKOFF_MIN_MS,
                             UREDIS_BACKOFF_MAX_MS, &cc);
        if (!(u->rconn = redis_conn_new(&cc, err, sizeof(err)))) {
            snprintf(why, whylen, "redis: %s", err);
            return NULL;
        }
    }
    if (!redis_conn_is_open(u->rconn) && redis_conn_open(u->rconn) < 0) {
        snprintf(why, whylen, "redis: %s", redis_conn_why(u->rconn));
        redis_conn_failed(u->rconn);
        return NULL;
    }
    return u->rconn;
}

/* One RRset after the change: owner, type, TTL and its RRs (pointers into the zone or the
 * change). */
typedef struct rgroup {
    const uint8_t *owner;
    uint8_t owner_len;
    uint16_t type;
    uint32_t ttl;
    const uint8_t **rd;
    uint16_t *len;
    size_t n, cap;
    size_t label; /* index in the labels */
} rgroup_t;

typedef struct redit {
    const zone_t *z;
    const update_change_t *ch;
    rgroup_t *g;
    size_t ng, capg;
    char **labels;
    size_t nlabels, caplabels;
} redit_t;

static int push_rr(rgroup_t *g, const uint8_t *rd, uint16_t len)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 8;
        const uint8_t **a = realloc(g->rd, cap * sizeof(*a));
        if (!a)
            return TERN_ENOMEM;
        g->rd = a;
        uint16_t *b = realloc(g->len, cap * sizeof(*b));
        if (!b)
            return TERN_ENOMEM;
        g->len = b;
        g->cap = cap;
    }
    g->rd[g->n] = rd;
    g->len[g->n++] = len;
    return 0;
}

/* The label text of owner in zone z: "@" for the apex, else the names before it. */
static char *label_of(const zone_t *z, const uint8_t *owner)
{
    char o[DNAME_KEY_MAX], a[DNAME_KEY_MAX];
    if (dname_to_str(owner, o, sizeof(o)) < 0 || dname_to_str(z->apex, a, sizeof(a)) < 0)
        return NULL;
    size_t lo = strlen(o), la = strlen(a);
    if (lo == la)
        return strdup("@");
    if (la == 1) /* the root zone */
        return strndup(o, lo - 1);
    return lo > la ? strndup(o, lo - la - 1) : NULL;
}

/* The group of (owner, type), made with the zone's RRs on first sight. */
static rgroup_t *group_of(redit_t *e, const update_rr_t *r)
{
    for (size_t i = 0; i < e->ng; i++)
        if (e->g[i].type == r->type && e->g[i].owner_len == r->owner_len &&
            memcmp(e->g[i].owner, r->owner, r->owner_len) == 0)
            return &e->g[i];
    if (tern_grow((void **)&e->g, &e->capg, e->ng + 1, sizeof(*e->g)) < 0)
        return NULL;
    rgroup_t *g = &e->g[e->ng++];
    memset(g, 0, sizeof(*g));
    g->owner = r->owner;
    g->owner_len = r->owner_len;
    g->type = r->type;
    char *lab = label_of(e->z, r->owner);
    if (!lab)
        return NULL;
    size_t li = 0;
    while (li < e->nlabels && strcmp(e->labels[li], lab) != 0)
        li++;
    if (li == e->nlabels) {
        if (tern_grow((void **)&e->labels, &e->caplabels, e->nlabels + 1, sizeof(*e->labels)) < 0) {
            free(lab);
            return NULL;
        }
        e->labels[e->nlabels++] = lab;
    } else {
        free(lab);
    }
    g->label = li;
    const zone_node_t *n = zone_find_node(e->z, r->owner, r->owner_len, dname_hash(r->owner));
    const zone_rrset_t *s = n ? zone_node_rrset(n, r->type) : NULL;
    if (s) {
        g->ttl = s->ttl;
        const uint8_t *p = s->rdata;
        for (unsigned k = 0; k < s->count; k++, p += 2 + tern_rd16(p))
            if (push_rr(g, p + 2, tern_rd16(p)) < 0)
                return NULL;
    }
    return g;
}

/* Every touched RRset as it is after the change. */
static int groups(redit_t *e)
{
    const update_change_t *ch = e->ch;
    for (size_t i = 0; i < ch->nremoved; i++) {
        const update_rr_t *r = &ch->removed[i];
        rgroup_t *g = group_of(e, r);
        if (!g)
            return TERN_ENOMEM;
        for (size_t k = 0; k < g->n; k++)
            if (g->len[k] == r->rdlen && memcmp(g->rd[k], r->rdata, r->rdlen) == 0) {
                memmove(&g->rd[k], &g->rd[k + 1], (g->n - k - 1) * sizeof(*g->rd));
                memmove(&g->len[k], &g->len[k + 1], (g->n - k - 1) * sizeof(*g->len));
                g->n--;
                break;
            }
    }
    for (size_t i = 0; i < ch->nadded; i++) {
        const update_rr_t *r = &ch->added[i];
        rgroup_t *g = group_of(e, r);
        if (!g || push_rr(g, r->rdata, r->rdlen) < 0)
            return TERN_ENOMEM;
        g->ttl = r->ttl;
    }
    return 0;
}

/* redis_edit_fn: label i's RRsets set one after another, or the config's SOA. */
static int edit(void *ctx, size_t i, const char *json, size_t len, char **out, char *err,
                size_t errlen)
{
    redit_t *e = ctx;
    *out = NULL;
    if (i == e->nlabels)
        return zone_json_config_set_soa(json, len, e->ch->soa_ttl, e->ch->soa, e->ch->soa_len, out,
                                        err, errlen);
    char *cur = json ? strndup(json, len) : NULL;
    if (json && !cur)
        return TERN_ENOMEM;
    for (size_t k = 0; k < e->ng; k++) {
        const rgroup_t *g = &e->g[k];
        if (g->label != i)
            continue;
        char *next = NULL, why[256];
        int rc = zone_json_label_set(cur, cur ? strlen(cur) : 0, g->type, g->ttl, g->rd, g->len,
                                     g->n, &next, why, sizeof(why));
        free(cur);
        if (rc < 0) {
            snprintf(err, errlen, "label %s: %s", e->labels[i], why);
            return rc;
        }
        cur = next;
    }
    *out = cur;
    return 0;
}

static void redit_free(redit_t *e)
{
    for (size_t i = 0; i < e->ng; i++) {
        free(e->g[i].rd);
        free(e->g[i].len);
    }
    free(e->g);
    for (size_t i = 0; i < e->nlabels; i++)
        free(e->labels[i]);
    free(e->labels);
}

int update_redis_write(update_t *u, const zone_t *z, const update_change_t *ch, char *why,
                       size_t whylen)
{
    redit_t e = {.z = z, .ch = ch};
    int rc = groups(&e);
    if (rc < 0) {
        snprintf(why, whylen, "out of memory");
        redit_free(&e);
        return rc;
    }
    redis_conn_t *c = conn(u, why, whylen);
    if (!c) {
        redit_free(&e);
        return TERN_EIO;
    }
    char origin[DNAME_KEY_MAX], member[DNAME_KEY_MAX + 2];
    if (dname_to_str(z->apex, origin, sizeof(origin)) < 0) {
        redit_free(&e);
        return TERN_EINVAL;
    }
    size_t ol = strlen(origin);
    if (ol > 1)
        origin[ol - 1] = '\0'; /* "example.com": redis_write_member() tries it with the dot */
    rc = redis_write_member(c, &u->rconn_cfg, origin, member, sizeof(member), why, whylen);
    if (rc == 0) {
        const redis_write_t w = {.cfg = &u->rconn_cfg,
                                 .member = member,
                                 .labels = (const char *const *)e.labels,
                                 .nlabels = e.nlabels,
                                 .edit = edit,
                                 .ctx = &e};
        rc = redis_write_zone(c, &w, why, whylen);
    }
    if (rc == REDIS_CONN_DOWN)
        redis_conn_lost(c);
    redit_free(&e);
    return rc;
}
