/*
 * redis_kasp.c — keys tern makes and rolls for Redis zones (redis_int.h), shared by a fleet:
 * every ternd reading the same Redis signs such a zone with the same keys, and one of them, the
 * holder of the zone's lock, drives its key-state machine (tern/dnssec/dnssec_kasp.h).
 *
 * A zone's config JSON names a policy of ternd.yaml's dnssec_policies ("dnssec_policy": "NAME");
 * redins' four key strings are then not read. Beside redins' layout (P and S the configured
 * prefix and suffix, as for every key):
 *   P redins:zones:<zone>:kasp S           the key state, the text of a file zone's <zone>.kasp
 *   P redins:zones:<zone>:kasp:keys S      a hash: "<id>.key" and "<id>.private" → the BIND
 *                                          texts of each key tern made (<id>: K<zone>+013+12345)
 *   P redins:zones:<zone>:kasp:lock S      the node that drives the zone: SET NX PX with its id
 *   P redins:zones:<zone>:kasp:requests S  a list of operator requests for the driver:
 *                                          "rollover zsk|ksk|csk", "ds-seen [TAG]", "ds-gone"
 *                                          (RPUSH it)
 *
 * Driving (redis_kasp_tick(), on the source thread every lock_ms / 3): the lock is taken or
 * renewed with one script (a dead holder's lock expires after lock_ms, another node takes it at
 * its next tick). The holder, when it takes the lock, at the zone's next key event, when the
 * state is missing or a request waits: reads the state, applies the requests, steps it to now,
 * makes the keys the plan asks for (HSETNX into the keys hash: in Redis before the state that
 * names them), and writes the state with a script that checks it still holds the lock (a node
 * that lost it writes nothing). It then PUBLISHes the zone on the change channel, for nodes
 * without keyspace notifications.
 *
 * Signing (redis_kasp_sign(), at each build, on every node, holder or not): the state read with
 * the zone (MGET, its digest part of the zone's: a new state rebuilds the zone everywhere), a
 * copy stepped to now without making anything, and the plan's keys read from the hash read with
 * it (HGETALL). So every node publishes the same DNSKEY set, and builds the zone again at its
 * next key event even when no driver is alive (a rollover in progress goes on by its timeline;
 * only a step that needs a new key waits for a driver).
 *
 * The DS check at the parent (the policy's parents) is the holder's alone: after each drive it
 * hands the DS its plan waits for to redis_source_callbacks_t.ds_want (the loader's checker),
 * which turns a DS seen into a "ds-seen TAG" request; a node that loses the lock drops its check.
 *
 * Unsigning (RFC 8078): "dnssec_unsign": true beside the policy in the config; the driver calls
 * dnssec_kasp_unsign() once (CDS/CDNSKEY DELETE from the next build on every node), its DS check
 * then waits for the parent's whole DS RRset to go, which (or `ternctl dnssec ds-gone`) becomes a
 * "ds-gone" request; the keys go a DS TTL later. A config that drops the policy while the state
 * still has keys in use is rejected (redis_kasp_dropped()): the signed version keeps serving.
 *
 * ternctl (any thread, under rs->mu): the status of each zone as its last build here stepped it,
 * and requests tried on that state, then queued for the thread to RPUSH (redis_kasp_flush()).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/dnssec/dnssec_kasp_keys.h"
#include "tern/dnssec/dnssec_setup.h"
#include "tern/wire/dname.h"

#include "redis_int.h"

/* Zones whose locks one tick takes or renews in one pipelined round trip, as a read's batch: a
 * fleet's 10,000 zones cost each node 157 round trips every lock_ms / 3. */
#define LOCK_BATCH 64

/* Requests taken from a zone's list at one drive: an operator types them one by one; more wait
 * for the next tick. */
#define REQUESTS_PER_DRIVE 16

/* Take the lock if free, renew it if ours: {1 renewed | 2 taken | 0 another's, holder, pending
 * requests}. One script, so a renewal never extends a lock another node took meanwhile. */
static const char LOCK_LUA[] =
    "local v = redis.call('GET', KEYS[1]) "
    "local n = redis.call('LLEN', KEYS[2]) "
    "if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return {1, v, n} end "
    "if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return {2, ARGV[1], n} end "
    "return {0, v, n}";

/* Write the state only while holding the lock: 1 written, 0 not the holder. */
static const char WRITE_LUA[] = "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end "
                                "redis.call('SET', KEYS[2], ARGV[2]) return 1";

/* Release the lock if ours. */
static const char RELEASE_LUA[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
    "return 0";

const redis_kasp_policy_t *redis_kasp_policy(const redis_source_t *rs, const char *name)
{
    for (size_t i = 0; name && i < rs->nkasp; i++)
        if (strcmp(rs->kasp[i].name, name) == 0)
            return &rs->kasp[i];
    return NULL;
}

/* The policy as the zone's waits use it: the zone's largest TTL when the policy sets none. */
static dnssec_kasp_policy_t zone_policy(const redis_kasp_policy_t *p, const struct zst *z)
{
    dnssec_kasp_policy_t pol = p->pol;
    if (!pol.zone_max_ttl)
        pol.zone_max_ttl = z->kasp_max_ttl ? z->kasp_max_ttl : REDIS_KASP_MAX_TTL_UNKNOWN;
    return pol;
}

/* --- the keys hash as the zone's key store --- */

struct redis_store {
    redis_source_t *rs;
    struct zst *z;
    const uint8_t *origin;
    const char *khash;      /* P redins:zones:<zone>:kasp:keys S */
    const redisReply *hash; /* its HGETALL reply (signing), or NULL (driving) */
    int conn_rc;            /* E_CONN or E_STOP when a write failed with the connection */
};

static int store_put(void *ctx, const dnssec_key_t *key, char *id, size_t idlen, char *err,
                     size_t errlen)
{
    struct redis_store *s = ctx;
    char zone[DNAME_MAXLEN * 4 + 1], fpub[DNSSEC_KASP_ID_MAX + 16], fpriv[DNSSEC_KASP_ID_MAX + 16];
    (void)dname_to_str(key->owner, zone, sizeof(zone));
    snprintf(id, idlen, "K%s+%03u+%05u", zone, key->alg, key->tag);
    snprintf(fpub, sizeof(fpub), "%s.key", id);
    snprintf(fpriv, sizeof(fpriv), "%s.private", id);
    char *pub = NULL, *priv = NULL;
    int rc = dnssec_key_texts(key, &pub, &priv, err, errlen);
    redisReply *r = NULL;
    if (rc < 0)
        return rc;
    /* the private first, never over an existing one: a taken id is another key's */
    const char *nx[] = {"HSETNX", s->khash, fpriv, priv, NULL};
    const char *set[] = {"HSET", s->khash, fpub, pub, NULL};
    if ((rc = rs_run(s->rs, &r, nx)) == 0) {
        if (r->type == REDIS_REPLY_INTEGER && r->integer == 0)
            rc = TERN_EEXIST;
        else if (r->type != REDIS_REPLY_INTEGER) {
            snprintf(err, errlen, "HSETNX %s: %s", s->khash,
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            rc = TERN_EIO;
        }
        freeReplyObject(r);
        r = NULL;
    } else {
        snprintf(err, errlen, "Redis: %s", redis_conn_why(s->rs->conn));
        s->conn_rc = rc;
    }
    if (rc == 0 && (rc = rs_run(s->rs, &r, set)) < 0)
        s->conn_rc = rc;
    if (rc == 0) {
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "HSET %s: %s", s->khash, r->str);
            rc = TERN_EIO;
        }
        freeReplyObject(r);
    }
    OPENSSL_cleanse(priv, strlen(priv));
    free(priv);
    free(pub);
    return rc;
}

/* The value of field name in an HGETALL reply, or NULL. */
static const char *hash_field(const redisReply *h, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; h && h->type == REDIS_REPLY_ARRAY && i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i], *v = h->element[i + 1];
        if (is_str(f) && f->len == nl && memcmp(f->str, name, nl) == 0 && is_str(v))
            return v->str;
    }
    return NULL;
}

static int store_get(void *ctx, const char *id, dnssec_key_t **out, char *err, size_t errlen)
{
    struct redis_store *s = ctx;
    char fpub[DNSSEC_KASP_ID_MAX + 16], fpriv[DNSSEC_KASP_ID_MAX + 16], where[ESC_MAX + 32];
    snprintf(fpub, sizeof(fpub), "%s.key", id);
    snprintf(fpriv, sizeof(fpriv), "%s.private", id);
    const char *pub = hash_field(s->hash, fpub), *priv = hash_field(s->hash, fpriv);
    if (!pub || !priv) {
        snprintf(err, errlen, "%s has no field %s", s->khash, !pub ? fpub : fpriv);
        return TERN_ENOENT;
    }
    snprintf(where, sizeof(where), "%s %s", s->khash, id);
    return dnssec_key_parse(pub, priv, where, s->origin, out, err, errlen);
}

/* --- ternctl: status snapshots and requests (any thread, under rs->mu) --- */

struct redis_kasp_view {
    char *origin;     /* the zone's key */
    char *name;       /* its set member, the part of its Redis keys */
    char *policy;     /* the policy its last build named */
    char *state;      /* the state text that build read; NULL: none yet */
    char *status;     /* dnssec_kasp_status_text() of the plan it signed with; NULL: none */
    char holder[128]; /* the lock's value at the last tick ("" none seen yet) */
    bool ours;        /* this node holds it */
};

struct redis_kasp_req {
    char *name; /* the zone's set member, its keys' part */
    char *text;
};

static void view_free(struct redis_kasp_view *v)
{
    free(v->origin);
    free(v->name);
    free(v->policy);
    free(v->state);
    free(v->status);
}

/* Under mu: the view of origin, made on first sight when make (NULL: none, or no memory). */
static struct redis_kasp_view *view_of(redis_source_t *rs, const char *origin, bool make)
{
    for (size_t i = 0; i < rs->nviews; i++)
        if (strcmp(rs->views[i].origin, origin) == 0)
            return &rs->views[i];
    if (!make ||
        tern_grow((void **)&rs->views, &rs->capviews, rs->nviews + 1, sizeof(*rs->views)) < 0)
        return NULL;
    struct redis_kasp_view *v = &rs->views[rs->nviews];
    memset(v, 0, sizeof(*v));
    if (!(v->origin = strdup(origin)))
        return NULL;
    rs->nviews++;
    return v;
}

/* A zone's build: its view for ternctl (state and status NULL: it has none yet). */
static void view_built(redis_source_t *rs, const struct zst *z, const char *policy,
                       const char *state, char *status)
{
    pthread_mutex_lock(&rs->mu);
    struct redis_kasp_view *v = view_of(rs, z->origin, true);
    char *p = strdup(policy), *s = state ? strdup(state) : NULL, *n = strdup(z->name);
    if (v && p && n && (s || !state)) {
        free(v->name);
        v->name = n;
        n = NULL;
        free(v->policy);
        free(v->state);
        free(v->status);
        v->policy = p;
        v->state = s;
        v->status = status;
        p = s = status = NULL;
    }
    pthread_mutex_unlock(&rs->mu);
    free(p);
    free(s);
    free(n);
    free(status);
}

static void view_holder(redis_source_t *rs, const struct zst *z, const char *holder, size_t len,
                        bool ours)
{
    pthread_mutex_lock(&rs->mu);
    struct redis_kasp_view *v = view_of(rs, z->origin, false);
    if (v) {
        tern_escape(v->holder, sizeof(v->holder), holder, len);
        v->ours = ours;
    }
    pthread_mutex_unlock(&rs->mu);
}

/* --- signing: every node, at each build --- */

int redis_kasp_sign(redis_source_t *rs, struct zst *z, const char *policy, const redisReply *state,
                    const redisReply *hash, bool exported, dnssec_zone_t **dz, uint8_t *dnskeys,
                    size_t *len, char *err, size_t errlen)
{
    *dz = NULL;
    *len = 0;
    char zn[ESC_MAX];
    tern_escape(zn, sizeof(zn), z->name, strlen(z->name));
    const redis_kasp_policy_t *p = redis_kasp_policy(rs, policy);
    if (!p) {
        char pn[ESC_MAX];
        snprintf(err, errlen,
                 "zone %s: \"dnssec_policy\": \"%s\" in %sredins:zones:%s:config%s names no "
                 "policy of ternd.yaml's dnssec_policies",
                 z->origin, tern_escape(pn, sizeof(pn), policy, strlen(policy)), rs->prefix, zn,
                 rs->suffix);
        return TERN_EINVAL;
    }
    if (!z->kasp_policy || strcmp(z->kasp_policy, p->name) != 0) {
        free(z->kasp_policy);
        z->kasp_policy = strdup(p->name);
        z->kasp_drive = true;
        rs->kasp_tick = 0; /* a zone new to its policy: its lock and state at once */
    }
    char *kstate = redis_read_zone_key(rs, z->name, ":kasp");
    char *khash = redis_read_zone_key(rs, z->name, ":kasp:keys");
    uint8_t origin[DNAME_MAXLEN];
    dnssec_kasp_t *st = NULL;
    dnssec_kasp_plan_t *plan = calloc(1, sizeof(*plan));
    dnssec_kasp_keys_t kk = {0};
    int rc = TERN_ENOMEM;
    if (!kstate || !khash || !plan) {
        snprintf(err, errlen, "zone %s: out of memory", z->origin);
        goto out;
    }
    if ((rc = dname_from_str(z->name, strlen(z->name), false, origin, NULL)) < 0) {
        snprintf(err, errlen, "zone %s: bad name", z->origin);
        goto out;
    }
    if ((!state || state->type != REDIS_REPLY_STRING) && z->kasp_unsign) {
        view_built(rs, z, p->name, NULL, NULL);
        rc = 0; /* never signed: nothing to unsign, served unsigned */
        goto out;
    }
    if (!state || state->type != REDIS_REPLY_STRING) {
        view_built(rs, z, p->name, NULL, NULL);
        z->kasp_drive = true;
        snprintf(err, errlen,
                 "zone %s: dnssec policy %s: no key state yet at %s (the node holding %s:lock "
                 "makes it)",
                 z->origin, p->name, kstate, kstate);
        rc = TERN_EAGAIN;
        goto out;
    }
    char lerr[512];
    if ((rc = dnssec_kasp_from_text(state->str, kstate, &st, lerr, sizeof(lerr))) < 0) {
        snprintf(err, errlen, "zone %s: dnssec: %s", z->origin, lerr);
        goto out;
    }
    dnssec_kasp_unsign_step_t ustep = dnssec_kasp_keys_unsign_step(st, z->kasp_unsign);
    if (ustep == DNSSEC_KASP_UNSIGN_REFUSED) {
        bool unused;
        rc = dnssec_kasp_keys_unsign(&st, ustep, z->origin, "\"dnssec_unsign\": true", 0, &unused,
                                     err, errlen);
        goto out;
    }
    if (ustep == DNSSEC_KASP_UNSIGN_START || ustep == DNSSEC_KASP_UNSIGN_AFRESH)
        z->kasp_drive = true; /* the driver starts the unsigning, or signs an unsigned zone anew */
    dnssec_kasp_policy_t pol = zone_policy(p, z);
    struct redis_store s = {rs, z, origin, khash, hash, 0};
    const dnssec_kasp_store_t store = {store_put, store_get, &s};
    bool changed;
    int64_t now = (int64_t)time(NULL);
    if ((rc = dnssec_kasp_keys_step(st, &pol, z->origin, origin, now, NULL, plan, &changed, err,
                                    errlen)) < 0 ||
        (rc = dnssec_kasp_keys_load(plan, &pol, z->origin, &store, &kk, err, errlen)) < 0)
        goto out;
    z->kasp_at = plan->next_event;
    view_built(rs, z, p->name, state->str, dnssec_kasp_status_text(st, &pol, now));
    if (plan->ngenerate)
        z->kasp_drive = true; /* the driver makes the keys; this plan signs with those there are */
    if (kk.n == 0)
        goto out; /* unsigned: the plan's end of an unsigning */
    dnssec_policy_t sp = rs->dnssec_policy;
    sp.export = exported;
    rc = dnssec_zone_new_roles(origin, kk.keys, kk.roles, kk.n, kk.cds_digest, kk.cds_delete,
                               rs->dnssec_workers, &sp, dz, err, errlen); /* takes the keys */
    kk.n = 0;
    if (rc < 0)
        goto out;
    if ((rc = dnssec_zone_dnskeys(*dz, dnskeys, DNSSEC_SETUP_DNSKEYS_MAX)) < 0) {
        snprintf(err, errlen, "zone %s: too many keys", z->origin);
        dnssec_zone_free(*dz);
        *dz = NULL;
        goto out;
    }
    *len = (size_t)rc;
    rc = 0;
out:
    dnssec_kasp_keys_release(&kk);
    dnssec_kasp_free(st);
    free(plan);
    free(kstate);
    free(khash);
    return rc;
}

/* --- driving: the lock holder --- */

int redis_kasp_request(dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol, const char *text,
                       int64_t now, char *err, size_t errlen)
{
    char verb[16] = "", arg[16] = "", extra[2] = "";
    int n = sscanf(text, "%15s %15s %1s", verb, arg, extra);
    if (n >= 2 && strcasecmp(verb, "rollover") == 0 && n == 2) {
        dnssec_kasp_role_t r;
        if (dnssec_kasp_keys_role(arg, &r, err, errlen) < 0)
            return TERN_EINVAL;
        return dnssec_kasp_rollover(st, pol, r, now, err, errlen);
    }
    if (n >= 1 && n <= 2 && strcasecmp(verb, "ds-seen") == 0) {
        char *end = NULL;
        long tag = n == 2 ? strtol(arg, &end, 10) : -1;
        if (n == 2 && (*end || tag < 0 || tag > 65535)) {
            snprintf(err, errlen, "ds-seen: bad key tag \"%s\"", arg);
            return TERN_EINVAL;
        }
        if (tag >= 0)
            return dnssec_kasp_ds_seen(st, (uint16_t)tag, now, err, errlen);
        /* every KSK/CSK whose DS is wanted and not seen yet */
        bool any = false;
        for (size_t i = 0; i < dnssec_kasp_key_count(st); i++) {
            const dnssec_kasp_key_t *k = dnssec_kasp_key_at(st, i);
            if (k->role == DNSSEC_KASP_ZSK || !k->ds_submitted || k->ds_seen ||
                dnssec_kasp_key_state(k) == DNSSEC_KASP_REMOVED)
                continue;
            int rc = dnssec_kasp_ds_seen(st, k->tag, now, err, errlen);
            if (rc < 0)
                return rc;
            any = true;
        }
        if (!any)
            snprintf(err, errlen, "no KSK waits for its DS");
        return any ? 0 : TERN_ENOENT;
    }
    if (n == 1 && strcasecmp(verb, "ds-gone") == 0)
        return dnssec_kasp_ds_gone(st, now, err, errlen);
    snprintf(err, errlen,
             "expected \"rollover ksk|zsk|csk\" or \"ds-seen [TAG]\" (or, unsigning, \"ds-gone\")");
    return TERN_EINVAL;
}

/* One request from the zone's list, applied and logged. */
static void request(const struct zst *z, dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol,
                    const char *text, int64_t now)
{
    char esc[ESC_MAX], err[256] = "";
    int rc = redis_kasp_request(st, pol, text, now, err, sizeof(err));
    tern_escape(esc, sizeof(esc), text, strlen(text));
    if (rc == 0)
        log_info("dnssec: zone %s: request \"%s\" done", z->origin, esc);
    else
        log_warn("dnssec: zone %s: request \"%s\" refused: %s", z->origin, esc, err);
}

/* Take up to REQUESTS_PER_DRIVE requests from the zone's list and apply them. *any: one was. */
static int requests(redis_source_t *rs, const struct zst *z, dnssec_kasp_t *st,
                    const dnssec_kasp_policy_t *pol, int64_t now, bool *any)
{
    char *kreq = redis_read_zone_key(rs, z->name, ":kasp:requests");
    if (!kreq)
        return redis_conn_fail(rs->conn, "out of memory");
    int rc = 0;
    for (int i = 0; i < REQUESTS_PER_DRIVE && rc == 0; i++) {
        redisReply *r = NULL;
        const char *pop[] = {"LPOP", kreq, NULL};
        if ((rc = rs_run(rs, &r, pop)) < 0)
            break;
        bool got = r->type == REDIS_REPLY_STRING;
        if (got) {
            request(z, st, pol, r->str, now);
            *any = true;
        }
        freeReplyObject(r);
        if (!got)
            break;
    }
    free(kreq);
    return rc;
}

/* After a state was written: every node builds the zone again (keyspace events; the change
 * channel for those without), this one at once. */
static int announce(redis_source_t *rs, struct zst *z)
{
    z->resign = true;
    redis_source_mark_dirty(rs, z);
    if (!rs->channel)
        return 0;
    redisReply *r = NULL;
    const char *pub[] = {"PUBLISH", rs->channel, z->name, NULL};
    int rc = rs_run(rs, &r, pub);
    if (r)
        freeReplyObject(r);
    return rc;
}

/* The DS the holder's plan waits for, to the parent checker (redis_source_callbacks_t.ds_want);
 * plan NULL: none (this node no longer drives the zone); gone: unsigning, the parent's whole DS
 * RRset is to go instead. E_CONN or E_STOP, else 0. */
static int want_ds(redis_source_t *rs, struct zst *z, const redis_kasp_policy_t *p,
                   const dnssec_kasp_plan_t *plan, bool gone, struct redis_store *s)
{
    if (!rs->cb.ds_want || (!z->kasp_ds && !gone && (!plan || !plan->nds_wanted)))
        return 0;
    dnssec_kasp_ds_t wants[DNSSEC_KASP_DS_MAX] = {{0}};
    size_t n = 0;
    redisReply *r = NULL;
    int rc = 0;
    if (gone)
        wants[n++] = (dnssec_kasp_ds_t){.gone = true};
    else if (plan && plan->nds_wanted && p->nparents) {
        const char *all[] = {"HGETALL", s->khash, NULL};
        if ((rc = rs_run(rs, &r, all)) < 0)
            return rc;
        s->hash = r;
        const dnssec_kasp_store_t store = {store_put, store_get, s};
        n = dnssec_kasp_keys_ds(plan, &p->pol, z->origin, &store, wants);
        s->hash = NULL;
        freeReplyObject(r);
    }
    rs->cb.ds_want(rs->cb.ctx, z->origin, z->name, wants, n, p->parents, p->nparents,
                   p->ds_check_interval);
    z->kasp_ds = n > 0;
    return 0;
}

/* The config's "dnssec_unsign" applied to the driver's state *st (the rules are
 * dnssec_kasp_keys_unsign_step()'s; a refusal is the reader's, at the build). *changed when so.
 * 0, or E_CONN for want of memory. */
static int follow_unsign(redis_source_t *rs, const struct zst *z, dnssec_kasp_t **st, int64_t now,
                         bool *changed)
{
    dnssec_kasp_unsign_step_t step = dnssec_kasp_keys_unsign_step(*st, z->kasp_unsign);
    if (step == DNSSEC_KASP_UNSIGN_REFUSED)
        return 0;
    char err[256];
    int rc = dnssec_kasp_keys_unsign(st, step, z->origin, "\"dnssec_unsign\": true", now, changed,
                                     err, sizeof(err));
    if (rc == TERN_ENOMEM)
        return redis_conn_fail(rs->conn, "out of memory");
    if (rc < 0)
        log_err("dnssec: %s", err);
    return 0;
}

/* The holder's step of zone z: state read, requests applied, stepped, keys made, state written
 * if it changed (and still the holder). 0, E_CONN or E_STOP; a zone's own trouble is logged. */
static int drive(redis_source_t *rs, struct zst *z, const redis_kasp_policy_t *p)
{
    char *kstate = redis_read_zone_key(rs, z->name, ":kasp");
    char *khash = redis_read_zone_key(rs, z->name, ":kasp:keys");
    char *klock = redis_read_zone_key(rs, z->name, ":kasp:lock");
    dnssec_kasp_plan_t *plan = calloc(1, sizeof(*plan));
    dnssec_kasp_t *st = NULL;
    redisReply *r = NULL;
    char err[768], *text = NULL;
    uint8_t origin[DNAME_MAXLEN];
    int rc = 0;
    bool fresh = false, changed = false, asked = false, turned = false;
    if (!kstate || !khash || !klock || !plan) {
        rc = redis_conn_fail(rs->conn, "out of memory");
        goto out;
    }
    z->kasp_drive = false;
    if (dname_from_str(z->name, strlen(z->name), false, origin, NULL) < 0)
        goto out; /* the build says why */
    const char *get[] = {"GET", kstate, NULL};
    if ((rc = rs_run(rs, &r, get)) < 0)
        goto out;
    if (r->type == REDIS_REPLY_STRING) {
        if (dnssec_kasp_from_text(r->str, kstate, &st, err, sizeof(err)) < 0) {
            /* never overwritten: an operator's state that does not parse is theirs to mend */
            log_err("dnssec: zone %s: %s; its keys stay as they are", z->origin, err);
            goto out;
        }
    } else if (r->type == REDIS_REPLY_NIL && z->kasp_unsign) {
        goto out; /* never signed, to be unsigned: no state to make */
    } else if (r->type == REDIS_REPLY_NIL) {
        log_info("dnssec: zone %s: no key state yet (%s): signing it from scratch", z->origin,
                 kstate);
        fresh = (st = dnssec_kasp_new()) != NULL;
    } else {
        log_err("dnssec: zone %s: GET %s: %s", z->origin, kstate,
                r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        goto out;
    }
    if (!st) {
        rc = redis_conn_fail(rs->conn, "out of memory");
        goto out;
    }
    dnssec_kasp_policy_t pol = zone_policy(p, z);
    int64_t now = (int64_t)time(NULL);
    if ((rc = requests(rs, z, st, &pol, now, &asked)) < 0)
        goto out;
    if ((rc = follow_unsign(rs, z, &st, now, &turned)) < 0)
        goto out;
    struct redis_store s = {rs, z, origin, khash, NULL, 0};
    const dnssec_kasp_store_t store = {store_put, store_get, &s};
    if (dnssec_kasp_keys_step(st, &pol, z->origin, origin, now, &store, plan, &changed, err,
                              sizeof(err)) < 0) {
        log_err("%s", err);
        rc = s.conn_rc; /* a key not written: the connection's fault, or the zone's (logged) */
        goto out;
    }
    int64_t gone, unsigning = dnssec_kasp_unsigning(st, &gone);
    if ((rc = want_ds(rs, z, p, plan, plan->cds_delete && unsigning && !gone, &s)) < 0)
        goto out;
    if (!(changed || fresh || asked || turned))
        goto out;
    if (!(text = dnssec_kasp_to_text(st))) {
        rc = redis_conn_fail(rs->conn, "out of memory");
        goto out;
    }
    freeReplyObject(r);
    r = NULL;
    const char *write[] = {"EVAL", WRITE_LUA, "2", klock, kstate, rs->node_id, text, NULL};
    if ((rc = rs_run(rs, &r, write)) < 0)
        goto out;
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
        log_debug("dnssec: zone %s: key state written to %s", z->origin, kstate);
        rc = announce(rs, z);
    } else {
        log_warn("dnssec: zone %s: lost the key lock %s before writing its state: the new holder "
                 "steps it",
                 z->origin, klock);
        z->kasp_holder = false;
        (void)want_ds(rs, z, p, NULL, false, NULL);
    }
out:
    if (r)
        freeReplyObject(r);
    free(text);
    dnssec_kasp_free(st);
    free(plan);
    free(kstate);
    free(khash);
    free(klock);
    return rc;
}

/* Queue the script that takes or renews zone z's lock (and counts its requests). */
static int lock_append(redis_source_t *rs, const struct zst *z)
{
    char *klock = redis_read_zone_key(rs, z->name, ":kasp:lock");
    char *kreq = redis_read_zone_key(rs, z->name, ":kasp:requests");
    char ms[24];
    snprintf(ms, sizeof(ms), "%lld", (long long)rs->kasp_lock_ms);
    int rc;
    if (!klock || !kreq)
        rc = redis_conn_fail(rs->conn, "out of memory");
    else {
        const char *ev[] = {"EVAL", LOCK_LUA, "2", klock, kreq, rs->node_id, ms, NULL};
        rc = rs_append(rs, ev);
    }
    free(klock);
    free(kreq);
    return rc;
}

/* The lock script's reply r for zone z: whether this node holds the lock, and whether it should
 * step the zone now (it just took it, the zone asks for it, a request waits, an event is due). */
static bool lock_reply(redis_source_t *rs, struct zst *z, const redisReply *r, int64_t now)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || !is_str(r->element[1]) ||
        r->element[2]->type != REDIS_REPLY_INTEGER) {
        log_err("dnssec: zone %s: its key lock: %s", z->origin,
                r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        return false;
    }
    long long code = r->element[0]->integer;
    if (code == 2)
        log_info("dnssec: zone %s: this node (%s) drives its keys now (its lock is ours)",
                 z->origin, rs->node_id);
    else if (code == 0 && z->kasp_holder) {
        char who[ESC_MAX];
        log_warn("dnssec: zone %s: node %s took its key lock; this node only signs", z->origin,
                 tern_escape(who, sizeof(who), r->element[1]->str, r->element[1]->len));
    }
    bool was = z->kasp_holder;
    z->kasp_holder = code != 0;
    const redis_kasp_policy_t *p = redis_kasp_policy(rs, z->kasp_policy);
    if (was && !z->kasp_holder && p) /* its checker's job dropped: no command, no error */
        (void)want_ds(rs, z, p, NULL, false, NULL);
    view_holder(rs, z, r->element[1]->str, r->element[1]->len, z->kasp_holder);
    return z->kasp_holder && (!was || z->kasp_drive || r->element[2]->integer > 0 ||
                              (z->kasp_at && now >= z->kasp_at));
}

/* Zone z's next key event: built again on every node, driver or not, once it is due; else the
 * tick comes back for it (*next, monotonic ms). */
static void key_event(redis_source_t *rs, struct zst *z, int64_t now, int64_t *next)
{
    if (z->kasp_at && now >= z->kasp_at) {
        z->kasp_at = 0;
        z->resign = true;
        redis_source_mark_dirty(rs, z);
    } else if (z->kasp_at) {
        int64_t at = tern_monotonic_ms() + (z->kasp_at - now) * 1000;
        if (at < *next)
            *next = at;
    }
}

/* One batch of a tick: the locks in one pipelined round trip, then the zones this node drives,
 * then the rebuilds their key events ask for. */
static int tick_batch(redis_source_t *rs, struct zst **zs, size_t n, int64_t now, int64_t *next)
{
    bool drive_now[LOCK_BATCH] = {false};
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = lock_append(rs, zs[i]);
    for (size_t i = 0; i < n && rc == 0; i++) {
        redisReply *r = NULL;
        if ((rc = rs_reply(rs, &r)) == 0)
            drive_now[i] = lock_reply(rs, zs[i], r, now);
        if (r)
            freeReplyObject(r);
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct zst *z = zs[i];
        if (drive_now[i])
            rc = drive(rs, z, redis_kasp_policy(rs, z->kasp_policy));
        key_event(rs, z, now, next);
    }
    return rc;
}

int redis_kasp_dropped(const struct zst *z, const redisReply *state, char *err, size_t errlen)
{
    if (!state || state->type != REDIS_REPLY_STRING)
        return 0;
    dnssec_kasp_t *st = NULL;
    char lerr[256];
    if (dnssec_kasp_from_text(state->str, z->origin, &st, lerr, sizeof(lerr)) < 0)
        return 0; /* a state that does not parse signs nothing: the policy's build said why */
    bool in_use = dnssec_kasp_in_use(st);
    dnssec_kasp_free(st);
    if (!in_use)
        return 0;
    snprintf(err, errlen,
             "zone %s: its config names no \"dnssec_policy\" but its key state in Redis still has "
             "keys in use: set \"dnssec_unsign\": true first (beside the policy), and drop the "
             "policy once `ternctl dnssec status` shows no key in use (the parent's DS gone)",
             z->origin);
    return TERN_EINVAL;
}

int redis_kasp_tick(redis_source_t *rs)
{
    int64_t now = (int64_t)time(NULL);
    int64_t next = tern_monotonic_ms() + rs->kasp_lock_ms / 3;
    if (redis_conn_replica(rs->conn)) {
        /* a replica takes no writes: this node signs by the state it reads, the nodes reading
         * the primary drive; its zones are still built again at their key events */
        if (!rs->kasp_replica_logged)
            log_info("%s: reading a replica: the zones with a key policy are driven by the nodes "
                     "reading the primary",
                     rs->where);
        rs->kasp_replica_logged = true;
        for (size_t b = 0; b < rs->nbucket; b++)
            for (struct zst *z = rs->bucket[b]; z; z = z->next)
                key_event(rs, z, now, &next);
        rs->kasp_tick = next;
        return 0;
    }
    rs->kasp_replica_logged = false;
    struct zst *zs[LOCK_BATCH];
    size_t n = 0;
    int rc = 0;
    for (size_t b = 0; b < rs->nbucket && rc == 0; b++)
        for (struct zst *z = rs->bucket[b]; z && rc == 0; z = z->next) {
            if (!redis_kasp_policy(rs, z->kasp_policy))
                continue;
            zs[n++] = z;
            if (n == LOCK_BATCH) {
                rc = tick_batch(rs, zs, n, now, &next);
                n = 0;
            }
        }
    if (rc == 0 && n)
        rc = tick_batch(rs, zs, n, now, &next);
    rs->kasp_tick = next;
    return rc;
}

void redis_kasp_release(redis_source_t *rs)
{
    for (size_t b = 0; b < rs->nbucket; b++)
        for (struct zst *z = rs->bucket[b]; z; z = z->next) {
            if (!z->kasp_holder)
                continue;
            char *klock = redis_read_zone_key(rs, z->name, ":kasp:lock");
            redisReply *r = NULL;
            const char *ev[] = {"EVAL", RELEASE_LUA, "1", klock, rs->node_id, NULL};
            if (klock && rs_run(rs, &r, ev) == 0)
                log_info("dnssec: zone %s: key lock released", z->origin);
            if (r)
                freeReplyObject(r);
            free(klock);
            z->kasp_holder = false;
        }
}

void redis_kasp_forget(redis_source_t *rs, const char *origin)
{
    pthread_mutex_lock(&rs->mu);
    struct redis_kasp_view *v = view_of(rs, origin, false);
    if (v) {
        view_free(v);
        *v = rs->views[--rs->nviews];
    }
    pthread_mutex_unlock(&rs->mu);
}

void redis_kasp_free(redis_source_t *rs)
{
    for (size_t i = 0; i < rs->nviews; i++)
        view_free(&rs->views[i]);
    free(rs->views);
    for (size_t i = 0; i < rs->nreqs; i++) {
        free(rs->reqs[i].name);
        free(rs->reqs[i].text);
    }
    free(rs->reqs);
}

char *redis_kasp_status(redis_source_t *rs, const char *key, char *err, size_t errlen)
{
    char *out = NULL;
    size_t len = 0, shown = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&rs->mu);
    for (size_t i = 0; i < rs->nviews; i++) {
        const struct redis_kasp_view *v = &rs->views[i];
        if (key && strcmp(key, v->origin) != 0)
            continue;
        fprintf(f, "zone: %s\nsource: %s (policy %s)\ndriver: %s%s\n%s", v->origin, rs->where,
                v->policy, v->holder[0] ? v->holder : "none yet", v->ours ? " (this node)" : "",
                v->status ? v->status : "not signed yet: no key state in Redis\n");
        shown++;
    }
    pthread_mutex_unlock(&rs->mu);
    if (fclose(f) != 0 || !shown) {
        free(out);
        if (!shown)
            snprintf(err, errlen, "zone %s has no dnssec policy", key ? key : "(any)");
        else
            snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return out;
}

int redis_kasp_ctl_request(redis_source_t *rs, const char *key, const char *text, char *err,
                           size_t errlen)
{
    int rc = TERN_ENOENT;
    dnssec_kasp_t *st = NULL;
    pthread_mutex_lock(&rs->mu);
    struct redis_kasp_view *v = view_of(rs, key, false);
    const redis_kasp_policy_t *p = v ? redis_kasp_policy(rs, v->policy) : NULL;
    if (!v || !p) {
        snprintf(err, errlen, "zone %s has no dnssec policy", key);
        goto out;
    }
    if (!v->state || !v->name) {
        snprintf(err, errlen, "zone %s has no key state yet", key);
        goto out;
    }
    /* tried on a copy of the state the zone was last built with, so a request that cannot be
     * made is refused here with its reason; the driving node applies it to the state in Redis */
    if ((rc = dnssec_kasp_from_text(v->state, key, &st, err, errlen)) < 0)
        goto out;
    dnssec_kasp_policy_t pol = p->pol;
    if (!pol.zone_max_ttl)
        pol.zone_max_ttl = REDIS_KASP_MAX_TTL_UNKNOWN;
    if ((rc = redis_kasp_request(st, &pol, text, (int64_t)time(NULL), err, errlen)) < 0)
        goto out;
    rc = TERN_ENOMEM;
    snprintf(err, errlen, "out of memory");
    if (tern_grow((void **)&rs->reqs, &rs->capreqs, rs->nreqs + 1, sizeof(*rs->reqs)) < 0)
        goto out;
    struct redis_kasp_req *r = &rs->reqs[rs->nreqs];
    r->text = strdup(text);
    if (!(r->name = strdup(v->name)) || !r->text) {
        free(r->name);
        free(r->text);
        goto out;
    }
    rs->nreqs++;
    err[0] = 0;
    rc = 0;
out:
    pthread_mutex_unlock(&rs->mu);
    dnssec_kasp_free(st);
    return rc;
}

int redis_kasp_flush(redis_source_t *rs)
{
    pthread_mutex_lock(&rs->mu);
    struct redis_kasp_req *reqs = rs->reqs;
    size_t n = rs->nreqs;
    rs->reqs = NULL;
    rs->nreqs = rs->capreqs = 0;
    pthread_mutex_unlock(&rs->mu);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char *kreq = rc == 0 ? redis_read_zone_key(rs, reqs[i].name, ":kasp:requests") : NULL;
        redisReply *r = NULL;
        const char *push[] = {"RPUSH", kreq, reqs[i].text, NULL};
        if (rc == 0 && !kreq)
            rc = redis_conn_fail(rs->conn, "out of memory");
        if (rc == 0 && (rc = rs_run(rs, &r, push)) == 0) {
            char zn[ESC_MAX];
            tern_escape(zn, sizeof(zn), reqs[i].name, strlen(reqs[i].name));
            if (r->type == REDIS_REPLY_ERROR)
                log_err("dnssec: zone %s: RPUSH %s: %s", zn, kreq, r->str);
            else
                log_info("dnssec: zone %s: request \"%s\" (ternctl) queued in %s for the node "
                         "driving its keys",
                         zn, reqs[i].text, kreq);
            struct zst *z = redis_sync_zone_by_name(rs, reqs[i].name, strlen(reqs[i].name), true);
            if (z && z->kasp_holder)
                rs->kasp_tick = 0; /* this node drives it: at once */
        }
        if (r)
            freeReplyObject(r);
        free(kreq);
        free(reqs[i].name);
        free(reqs[i].text);
    }
    free(reqs);
    return rc;
}
