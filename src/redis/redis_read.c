/*
 * redis_read.c — reading zones and building them (redis_int.h): per zone a pipelined GET of its
 * config, MGET of its DNSSEC keys and HSCAN of its labels (64 zones a round trip), built with
 * zone_json and handed out through on_zone; a digest of each version so a verify builds only what
 * changed; large zones (LT_MIN labels) kept label by label so a change is a patch of what
 * differs (diff_read()); labels named on the change channel read alone (HMGET) and handed out
 * through on_patch. Every bad label and breach of a bound is logged once (label_report()).
 * Source thread only.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"
#include "tern/wire/dname.h"

#include "redis_int.h"
#include "tern/dnssec/dnssec_setup.h"

/* Zones per pipelined batch of a full read: one round trip per 64 zones instead of two per zone
 * (10,000 small zones read in ~160 round trips), while the replies in flight stay a few MB. */
#define BATCH_ZONES 64

/* HSCAN COUNT. Redis answers one call in about 1.6 ms (bench/redis_load.sh, 1,000,000 labels),
 * so a huge zone is read in about 1000 short commands, each leaving room for other clients. A
 * hash of up to about 1000 fields comes back whole from the first call, which is pipelined with
 * the zone's GET. */
#define SCAN_COUNT "1000"

/* Breaches of a zone's bounds that reject its version, logged once while they last (zst). */
#define ZB_OVER_LABELS 1u /* more than max_labels */
#define ZB_BIG_CONFIG  2u /* a config over max_value_bytes */

const char *const redis_read_key_suffixes[4] = {":zsk:pub", ":zsk:priv", ":ksk:pub", ":ksk:priv"};

/* --- hashing: zone table keys and data digests --- */

/* Digest of one zone version: the config, plus the sum of one hash per label, so the order in
 * which HSCAN returns the labels does not matter. */
#define DIGEST_NO_CONFIG 0x6e6f636f6e666967ull

static uint64_t digest_config(const redisReply *cfg)
{
    if (!cfg || cfg->type != REDIS_REPLY_STRING)
        return DIGEST_NO_CONFIG;
    return tern_mix64(tern_hash64(cfg->str, cfg->len, 0x636f6e666967ull));
}

static uint64_t digest_label(const redisReply *f, const redisReply *v)
{
    return tern_mix64(tern_hash64(v->str, v->len, tern_hash64(f->str, f->len, 0x6c6162656cull)));
}

/* --- building zones --- */

/* The two replies of append_keys() (freed by keys_free()): the MGET of redins' keys and the
 * key state, the HGETALL of the keys tern made. */
typedef struct zkeys {
    redisReply *mget, *hash;
} zkeys_t;

/* Kinds of label breach, in the hash that remembers a report (label_report()). */
typedef enum { LB_BAD = 1, LB_VALUE, LB_RRSET } label_breach_t;

/* One read of one zone: its digest, and when building, the zone_json builder fed as data comes. */
typedef struct zbuild {
    redis_source_t *rs;
    struct zst *z;
    zone_json_t *zj; /* NULL when only the digest is wanted, or after the build failed */
    bool build;      /* a build was wanted */
    uint64_t digest;
    uint64_t cfg_digest; /* the config's and keys' part of digest */
    uint64_t cfg_wide;   /* the config without its SOA, and the keys (zst.cfg_wide) */
    size_t labels;       /* read so far; past max_labels the read stops */
    size_t bad;          /* labels skipped */
    size_t bad_new;      /* of those, not reported by the zone's last build: logged */
    int rc;              /* TERN_ENOMEM aborts */
    bool rejected;       /* set by zb_end() */
    bool kasp_wait;      /* rejected for want of its first key state (redis_kasp_sign()) */
    unsigned breach;     /* ZB_* found in this version */
    uint64_t *rep;       /* label breaches found (label_report()), for z->rep */
    size_t nrep, caprep;
    uint64_t over_value, over_rrset; /* breaches logged now, for the counters */
    dnssec_zone_t *dz;               /* "dnssec": true: the zone's signing state, to attach */
    seen_t seen;                     /* read_large(): the labels read, with their digests */
    /* diff mode (diff_read()): only the labels that differ from old are built */
    const seen_t *old;
    uint8_t *omark; /* per slot of old: read again */
    char **changed; /* labels built (changed or new), "@" among them when it changed */
    size_t nchanged, capchanged;
    bool list_lost; /* no memory for the list of changed labels: a full build */
    char err[1024]; /* why the version is rejected; "" if it is not */
} zbuild_t;

static void zb_begin(zbuild_t *b, redis_source_t *rs, struct zst *z, bool build)
{
    memset(b, 0, sizeof(*b));
    b->rs = rs;
    b->z = z;
    b->build = build;
    if (build && !(b->zj = zone_json_new(z->name, rs->where, &rs->json, b->err, sizeof(b->err)))) {
        if (!b->err[0])
            snprintf(b->err, sizeof(b->err), "%s: zone %s: cannot start the build", rs->where,
                     z->origin);
    }
}

/* Drop what zb_begin() and the reads gathered, when no zb_end() follows. */
static void zb_abandon(zbuild_t *b)
{
    for (size_t i = 0; i < b->nchanged; i++)
        free(b->changed[i]);
    free(b->changed);
    b->changed = NULL;
    b->nchanged = b->capchanged = 0;
    free(b->omark);
    b->omark = NULL;
    redis_seen_free(&b->seen);
    zone_json_free(b->zj);
    b->zj = NULL;
    dnssec_zone_free(b->dz);
    b->dz = NULL;
    free(b->rep);
    b->rep = NULL;
}

static void zb_reject(zbuild_t *b, const char *fmt, ...) TERN_PRINTF(2, 3);

static void zb_reject(zbuild_t *b, const char *fmt, ...)
{
    if (!b->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->err, sizeof(b->err), fmt, ap);
        va_end(ap);
    }
    zone_json_free(b->zj);
    b->zj = NULL;
    dnssec_zone_free(b->dz);
    b->dz = NULL;
}

/*
 * A breach of kind by label f of this build. Remembered for the zone's next build, and true when
 * its last build did not report it already: then the caller logs and counts it. So a bad label
 * is logged once, not again each time another label of its zone changes (every rebuild reads it
 * again), and again only after it was fixed and broken anew.
 */
static bool label_report(zbuild_t *b, const redisReply *f, label_breach_t kind)
{
    uint64_t h = tern_hash64(f->str, f->len, 0x7265706f7274ull + (uint64_t)kind);
    if (tern_grow((void **)&b->rep, &b->caprep, b->nrep + 1, sizeof(*b->rep)) == 0)
        b->rep[b->nrep++] = h; /* out of memory: it is only logged again next time */
    return !has_u64(b->z->rep, b->z->nrep, h);
}

/* The key state (:kasp) in the MGET reply of a zone's keys, or NULL. */
static const redisReply *kasp_state(const redisReply *keys)
{
    return keys && keys->type == REDIS_REPLY_ARRAY && keys->elements > 4 ? keys->element[4] : NULL;
}

/* A zone whose config says "dnssec": true: its keys from the MGET reply of redins' four key
 * strings (zsk pub, priv, ksk pub, priv), the signing state, and the DNSKEYs for the build. */
static void zb_keys(zbuild_t *b, const zkeys_t *zk)
{
    redis_source_t *rs = b->rs;
    const redisReply *keys = zk->mget;
    uint8_t dnskeys[DNSSEC_SETUP_DNSKEYS_MAX];
    size_t len = 0;
    char err[768];
    bool exported = rs->cb.exported && rs->cb.exported(rs->cb.ctx, b->z->origin);
    const char *policy = zone_json_dnssec_policy(b->zj);
    b->z->kasp_unsign = zone_json_dnssec_unsign(b->zj);
    if (policy) {
        /* keys tern makes and rolls (redis_kasp.c); redins' four strings are not read */
        const redisReply *state = kasp_state(keys);
        int rc = redis_kasp_sign(rs, b->z, policy, state, zk->hash, exported, &b->dz, dnskeys, &len,
                                 err, sizeof(err));
        b->kasp_wait = rc == TERN_EAGAIN;
        if (rc < 0)
            zb_reject(b, "%s: %s", rs->where, err);
        else if (len && zone_json_set_dnssec(b->zj, dnskeys, len) < 0) {
            b->rc = TERN_ENOMEM;
            zb_reject(b, "%s: zone %s: out of memory", rs->where, b->z->origin);
        }
        return;
    }
    if (b->z->kasp_policy) { /* the policy was dropped: redins' keys again */
        redis_kasp_forget(rs, b->z->origin);
        free(b->z->kasp_policy);
        b->z->kasp_policy = NULL;
        b->z->kasp_at = 0;
    }
    const char *pub[2] = {NULL, NULL}, *priv[2] = {NULL, NULL};
    char where[2][ESC_MAX + 64];
    for (size_t i = 0; keys && keys->type == REDIS_REPLY_ARRAY && i < keys->elements && i < 4;
         i++) {
        const redisReply *v = keys->element[i];
        if (v->type != REDIS_REPLY_STRING)
            continue;
        if (i % 2 == 0)
            pub[i / 2] = v->str;
        else
            priv[i / 2] = v->str;
    }
    for (size_t r = 0; r < 2; r++) {
        char k[ESC_MAX];
        /* "P redins:zones:<zone>:zsk:{pub,priv} S": messages name both strings of the key */
        const char *role = r == 0 ? ":zsk" : ":ksk";
        const char *zn = tern_escape(k, sizeof(k), b->z->name, strlen(b->z->name));
        if (!pub[r] || !priv[r]) {
            /* redins needs both keys; so do we, and say which string is missing */
            zb_reject(b, "%s: zone %s: \"dnssec\" is true but %sredins:zones:%s%s:%s%s is missing",
                      rs->where, b->z->origin, rs->prefix, zn, role, !pub[r] ? "pub" : "priv",
                      rs->suffix);
            return;
        }
        snprintf(where[r], sizeof(where[r]), "%sredins:zones:%s%s:{pub,priv}%s", rs->prefix, zn,
                 role, rs->suffix);
    }
    const char *const whr[2] = {where[0], where[1]};
    dnssec_policy_t pol = rs->dnssec_policy;
    pol.export = exported;
    if (dnssec_setup_redins(b->z->name, pub, priv, whr, rs->dnssec_workers, &pol, &b->dz, dnskeys,
                            &len, err, sizeof(err)) < 0) {
        zb_reject(b, "%s: %s", rs->where, err);
        return;
    }
    if (zone_json_set_dnssec(b->zj, dnskeys, len) < 0) {
        b->rc = TERN_ENOMEM;
        zb_reject(b, "%s: zone %s: out of memory", rs->where, b->z->origin);
    }
}

/* The GET reply of the zone's config key (NIL when missing), and the MGET reply of its DNSSEC
 * keys (used when the config turns DNSSEC on). */
static void zb_config(zbuild_t *b, const redisReply *cfg, const zkeys_t *zk)
{
    redis_source_t *rs = b->rs;
    const redisReply *keys = zk->mget;
    char kerr[512];
    b->cfg_digest = digest_config(cfg);
    uint64_t kd = 0;
    for (size_t i = 0; keys && keys->type == REDIS_REPLY_ARRAY && i < keys->elements; i++)
        kd += digest_config(keys->element[i]) * (i + 3); /* a changed key rebuilds */
    b->cfg_digest += kd;
    b->cfg_wide = (cfg && cfg->type == REDIS_REPLY_STRING
                       ? zone_json_config_digest_zone_wide(cfg->str, cfg->len)
                       : DIGEST_NO_CONFIG) +
                  kd;
    b->digest += b->cfg_digest;
    if (cfg->type == REDIS_REPLY_ERROR) {
        zb_reject(b, "%s: zone %s config: %s", rs->where, b->z->origin, cfg->str);
    } else if (cfg->type != REDIS_REPLY_STRING) {
        char k[ESC_MAX];
        zb_reject(b, "%s: zone %s: no config (key %sredins:zones:%s:config%s is missing)",
                  rs->where, b->z->origin, rs->prefix,
                  tern_escape(k, sizeof(k), b->z->name, strlen(b->z->name)), rs->suffix);
    } else if (cfg->len > rs->max_value_bytes) {
        /* checked before parsing: the parse of an outsized value is the cost being bounded */
        b->breach |= ZB_BIG_CONFIG;
        zb_reject(b, "%s: zone %s config: %zu bytes, more than max_value_bytes (%zu)", rs->where,
                  b->z->origin, cfg->len, rs->max_value_bytes);
    } else if (b->zj && zone_json_config(b->zj, cfg->str, cfg->len, b->err, sizeof(b->err)) < 0) {
        zb_reject(b, "%s: zone %s config: invalid", rs->where, b->z->origin);
    } else if (b->zj && !zone_json_dnssec_policy(b->zj) &&
               redis_kasp_dropped(b->z, kasp_state(keys), kerr, sizeof(kerr)) < 0) {
        zb_reject(b, "%s: %s", rs->where, kerr);
    } else if (b->zj && zone_json_dnssec(b->zj)) {
        zb_keys(b, zk);
    }
}

/* A skipped label: counted, and logged (the first few new ones of a build) if new. */
static void label_skipped(zbuild_t *b, const redisReply *f, label_breach_t kind, const char *why)
{
    b->bad++;
    if (!label_report(b, f, kind))
        return;
    if (kind == LB_VALUE)
        b->over_value++;
    else if (kind == LB_RRSET)
        b->over_rrset++;
    if (b->bad_new++ < BAD_LABELS_LOGGED)
        log_warn("%s; label skipped", why);
}

/* One field/value pair of the hash; built unless feed is false (a diff that found it unchanged:
 * only counted and digested). */
static void zb_label_feed(zbuild_t *b, const redisReply *f, const redisReply *v, bool feed)
{
    redis_source_t *rs = b->rs;
    if (!is_str(f) || !is_str(v) || b->breach & ZB_OVER_LABELS)
        return;
    b->digest += digest_label(f, v);
    if (++b->labels > rs->max_labels) {
        /* the reads stop here: a digest of the labels so far still tells a change */
        b->breach |= ZB_OVER_LABELS;
        zb_reject(b, "%s: zone %s: more than max_labels (%zu) labels", rs->where, b->z->origin,
                  rs->max_labels);
        return;
    }
    if (!b->zj || !feed)
        return;
    char err[1024], lab[ESC_MAX];
    err[0] = '\0';
    if (memchr(f->str, '\0', f->len)) {
        snprintf(err, sizeof(err), "%s: zone %s label %s: a NUL byte in the label", rs->where,
                 b->z->origin, tern_escape(lab, sizeof(lab), f->str, f->len));
        label_skipped(b, f, LB_BAD, err);
        return;
    }
    if (v->len > rs->max_value_bytes) {
        snprintf(err, sizeof(err),
                 "%s: zone %s label %s: %zu bytes, more than max_value_bytes (%zu)", rs->where,
                 b->z->origin, tern_escape(lab, sizeof(lab), f->str, f->len), v->len,
                 rs->max_value_bytes);
        label_skipped(b, f, LB_VALUE, err);
        return;
    }
    int rc = zone_json_label(b->zj, f->str, v->str, v->len, err, sizeof(err));
    if (rc == 0)
        return;
    if (rc == TERN_ENOMEM) {
        b->rc = rc;
        zb_reject(b, "%s: zone %s: out of memory", rs->where, b->z->origin);
        return;
    }
    label_skipped(b, f, rc == TERN_ELIMIT ? LB_RRSET : LB_BAD, err);
}

static void zb_label(zbuild_t *b, const redisReply *f, const redisReply *v)
{
    zb_label_feed(b, f, v, true);
}

static void add_build(redis_source_stats_t *st, void *arg)
{
    const zbuild_t *b = arg;
    if (b->rejected)
        st->rejected++;
    else
        st->builds++;
    st->labels_skipped += b->bad;
}

static void add_breaches(redis_source_stats_t *st, void *arg)
{
    const uint64_t *v = arg;
    st->over_value_bytes += v[0];
    st->over_labels += v[1];
    st->over_rrset_records += v[2];
}

/* The label reports of this build become the zone's. A version rejected before all its labels
 * were judged keeps the old ones too, so the labels it did not reach are not logged anew. */
static void zb_keep_reports(zbuild_t *b, bool whole)
{
    struct zst *z = b->z;
    if (!whole && z->nrep) {
        if (tern_grow((void **)&b->rep, &b->caprep, b->nrep + z->nrep, sizeof(*b->rep)) < 0) {
            free(b->rep); /* keep the old ones: at worst some labels are logged again */
            b->rep = NULL;
            return;
        }
        memcpy(b->rep + b->nrep, z->rep, z->nrep * sizeof(*z->rep));
        b->nrep += z->nrep;
    }
    if (b->nrep)
        qsort(b->rep, b->nrep, sizeof(*b->rep), cmp_u64);
    size_t n = 0;
    for (size_t i = 0; i < b->nrep; i++)
        if (n == 0 || b->rep[i] != b->rep[n - 1])
            b->rep[n++] = b->rep[i];
    free(z->rep);
    z->rep = b->rep;
    z->nrep = n;
    b->rep = NULL;
}

/* A signed zone its secondaries transfer: every version signed is a new one for them, so it gets
 * a serial above the last one signed (zone_serial_next()) before it is signed. */
static int export_serial(zbuild_t *b, zone_t *zone, char *err, size_t errlen)
{
    struct zst *z = b->z;
    uint32_t was = zone->serial;
    uint32_t want = zone_serial_next(z->had_serial, z->last_serial, was, (uint32_t)time(NULL));
    if (want == was)
        return 0;
    int rc = zone_set_serial_fresh(zone, want);
    if (rc < 0) {
        snprintf(err, errlen, "zone %s: cannot raise its serial to %u: %s", z->origin, want,
                 tern_strerror(rc));
        return rc;
    }
    log_info("%s: zone %s: serial %u -> %u (signed anew for its secondaries)", b->rs->where,
             z->origin, was, want);
    return 0;
}

/*
 * The end of a build: hand the zone out, or reject the version. With unless_same, a zone whose
 * digest matches the last version is dropped silently (a change that changed nothing).
 * Returns 1 if a zone was handed out, 2 if rejected, 0 if nothing happened.
 */
static int zb_end(zbuild_t *b, bool unless_same)
{
    redis_source_t *rs = b->rs;
    struct zst *z = b->z;
    if (b->bad_new > BAD_LABELS_LOGGED)
        log_warn("%s: zone %s: %zu more labels skipped", rs->where, z->origin,
                 b->bad_new - BAD_LABELS_LOGGED);
    bool whole = b->zj != NULL; /* every label was judged */
    zone_t *zone = NULL;
    if (b->zj) {
        int rc = zone_json_finish(b->zj, &zone, b->err, sizeof(b->err));
        b->zj = NULL;
        if (rc < 0) {
            zone = NULL;
            if (!b->err[0])
                snprintf(b->err, sizeof(b->err), "%s: zone %s: %s", rs->where, z->origin,
                         tern_strerror(rc));
        } else if (b->dz) {
            /* signed here, on the source's thread: never on a worker */
            char err[768];
            bool exported = b->dz->policy.export;
            uint32_t refresh = b->dz->policy.refresh;
            rc = exported ? export_serial(b, zone, err, sizeof(err)) : 0;
            if (rc == 0)
                rc = dnssec_setup_attach(zone, b->dz, exported ? z->signed_last : NULL, err,
                                         sizeof(err));
            else
                dnssec_zone_free(b->dz);
            b->dz = NULL; /* the zone owns it, or it is freed */
            if (rc < 0) {
                zone_free(zone);
                zone = NULL;
                snprintf(b->err, sizeof(b->err), "%s: %s", rs->where, err);
            } else if (exported) {
                z->had_serial = true;
                z->last_serial = zone->serial;
                z->resign_at = (int64_t)dnssec_zone_earliest(zone->dnssec) - refresh;
                zone_free(z->signed_last);
                z->signed_last = zone_retain(zone);
            }
        }
    }
    dnssec_zone_free(b->dz);
    b->dz = NULL;
    if (zone && z->kasp_policy)
        z->kasp_max_ttl = zone_max_ttl(zone); /* the waits of its next rollover steps */
    zb_keep_reports(b, whole);
    /* a zone-level breach is logged and counted when it appears, not at each version with it */
    unsigned fresh = b->breach & ~z->breach;
    z->breach = b->breach;
    uint64_t counts[3] = {b->over_value + !!(fresh & ZB_BIG_CONFIG), !!(fresh & ZB_OVER_LABELS),
                          b->over_rrset};
    if (counts[0] || counts[1] || counts[2])
        redis_int_stats(rs, add_breaches, counts);
    bool same = z->have_digest && z->digest == b->digest && !z->resign;
    z->resign = false;
    if (b->rc == TERN_ENOMEM) {
        /* not the data's fault: try again at the next read */
        log_err("%s", b->err);
        z->have_digest = false;
        zone_free(zone);
        return 2;
    }
    z->digest = b->digest;
    z->have_digest = true;
    if (unless_same && same) {
        zone_free(zone);
        return 0;
    }
    b->rejected = !zone;
    redis_int_stats(rs, add_build, b);
    if (!zone) {
        z->failed = true;
        if (b->kasp_wait) /* the driving node is making its first keys: not an error */
            log_info("%s; %s until then", b->err,
                     z->served ? "the previous version stays" : "the zone is not served");
        else if (!b->breach || fresh)
            log_err("%s; %s", b->err,
                    z->served ? "the previous version stays" : "the zone is not served");
        else
            log_debug("%s; still", b->err);
        return 2;
    }
    z->failed = false;
    z->served = true;
    z->cfg_digest = b->cfg_digest;
    z->cfg_wide = b->cfg_wide;
    log_debug("%s: zone %s: built, serial %u, %zu labels, %zu records", rs->where, z->origin,
              zone->serial, b->labels, zone->rr_count);
    rs->cb.on_zone(rs->cb.ctx, z->origin, zone);
    return 1;
}

static void count(run_counts_t *c, int outcome)
{
    if (outcome == 1)
        c->built++;
    else if (outcome == 2)
        c->rejected++;
    else
        c->unchanged++;
}

/* In a diff read: whether label k (its value's digest d) must be built — it is new or changed,
 * or it is the apex, which every build needs. Remembers the changed ones (the apex too, when it
 * changed: zone_patch() takes it like any name). Outside one: true. */
static bool diff_label(zbuild_t *b, const redisReply *k, uint64_t d)
{
    if (!b->old)
        return true;
    long o = redis_seen_find(b->old, k->str, k->len);
    bool same = o >= 0 && b->old->dig[o] == d;
    if (o >= 0)
        b->omark[o] = 1;
    bool apex = k->len == 1 && k->str[0] == '@';
    if (same)
        return apex;
    char *lab = strndup(k->str, k->len);
    if (!lab ||
        tern_grow((void **)&b->changed, &b->capchanged, b->nchanged + 1, sizeof(*b->changed)) < 0) {
        free(lab);
        b->list_lost = true; /* no memory for the list: a full build */
        return true;
    }
    b->changed[b->nchanged++] = lab;
    return true;
}

char *redis_read_zone_key(const redis_source_t *rs, const char *name, const char *tail)
{
    size_t n = rs->plen + sizeof("redins:zones:") + strlen(name) + strlen(tail) + rs->slen;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "%sredins:zones:%s%s%s", rs->prefix, name, tail, rs->suffix);
    return k;
}

/* P redins:zones:<name>[:config] S */
static char *redis_zone_key(const redis_source_t *rs, const char *name, bool config)
{
    return redis_read_zone_key(rs, name, config ? ":config" : "");
}

/* Queue MGET of the zone's four DNSSEC key strings (P redins:zones:<name>:zsk:pub S, ...) and
 * its key state (:kasp), and HGETALL of the keys tern made (:kasp:keys): read whether or not the
 * config wants them, so a zone turned to "dnssec": true or to a policy needs no second round
 * trip, and a new key state changes the zone's digest. Two replies (keys_reply()). */
static int append_keys(redis_source_t *rs, const char *name)
{
    char *k[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    int rc = 0;
    for (size_t i = 0; i < 6 && rc == 0; i++) {
        const char *tail = i < 4 ? redis_read_key_suffixes[i] : i == 4 ? ":kasp" : ":kasp:keys";
        if (!(k[i] = redis_read_zone_key(rs, name, tail)))
            rc = redis_conn_fail(rs->conn, "out of memory");
    }
    if (rc == 0) {
        const char *mget[] = {"MGET", k[0], k[1], k[2], k[3], k[4], NULL};
        const char *hall[] = {"HGETALL", k[5], NULL};
        if ((rc = rs_append(rs, mget)) == 0)
            rc = rs_append(rs, hall);
    }
    for (size_t i = 0; i < 6; i++)
        free(k[i]);
    return rc;
}

static int keys_reply(redis_source_t *rs, zkeys_t *k)
{
    int rc = rs_reply(rs, &k->mget);
    return rc < 0 ? rc : rs_reply(rs, &k->hash);
}

static void keys_free(zkeys_t *k)
{
    if (k->mget)
        freeReplyObject(k->mget);
    if (k->hash)
        freeReplyObject(k->hash);
    k->mget = k->hash = NULL;
}

static bool scan_reply_ok(const redisReply *r)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements == 2 && is_str(r->element[0]) &&
           r->element[1]->type == REDIS_REPLY_ARRAY && r->element[1]->elements % 2 == 0;
}

/*
 * Read a zone with GET + HSCAN calls from cursor 0 to the end into b (zb_begin()ed). The next
 * HSCAN is sent as soon as a reply gives its cursor, before that reply's labels are parsed, so
 * Redis prepares one chunk while this thread builds the previous one. Labels are deduplicated
 * (a multi-call HSCAN may repeat a field).
 */
static int read_large(redis_source_t *rs, zbuild_t *b)
{
    char *kcfg = redis_zone_key(rs, b->z->name, true),
         *khash = redis_zone_key(rs, b->z->name, false);
    seen_t *seen = &b->seen;
    redisReply *r = NULL;
    bool in_flight = false; /* an HSCAN whose reply is still to be read */
    int rc = TERN_ENOMEM;
    if (!kcfg || !khash)
        goto out;
    const char *get[] = {"GET", kcfg, NULL};
    const char *scan0[] = {"HSCAN", khash, "0", "COUNT", SCAN_COUNT, NULL};
    zkeys_t keys = {NULL, NULL};
    if ((rc = rs_append(rs, get)) < 0 || (rc = append_keys(rs, b->z->name)) < 0 ||
        (rc = rs_append(rs, scan0)) < 0 || (rc = rs_reply(rs, &r)) < 0)
        goto out;
    if ((rc = keys_reply(rs, &keys)) < 0) {
        keys_free(&keys);
        in_flight = true; /* the HSCAN's reply is still to come */
        goto out;
    }
    in_flight = true;
    zb_config(b, r, &keys);
    keys_free(&keys);
    freeReplyObject(r);
    r = NULL;
    while (in_flight) {
        if ((rc = rs_reply(rs, &r)) < 0)
            goto out;
        in_flight = false;
        if (r->type == REDIS_REPLY_ERROR || !scan_reply_ok(r)) {
            char k[ESC_MAX];
            zb_reject(b, "%s: zone %s: HSCAN %s: %s", rs->where, b->z->origin,
                      tern_escape(k, sizeof(k), khash, strlen(khash)),
                      r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            b->digest = 0; /* unreadable: no digest to remember */
            break;
        }
        const char *cursor = r->element[0]->str;
        if (strcmp(cursor, "0") != 0 && !(b->breach & ZB_OVER_LABELS)) {
            const char *next[] = {"HSCAN", khash, cursor, "COUNT", SCAN_COUNT, NULL};
            int done;
            if ((rc = rs_append(rs, next)) < 0)
                goto out;
            if (redisBufferWrite(redis_conn_cmd(rs->conn), &done) != REDIS_OK) {
                rc = redis_conn_fail(rs->conn, "connection: %s", redis_conn_cmd(rs->conn)->errstr);
                goto out;
            }
            in_flight = true;
        }
        const redisReply *f = r->element[1];
        for (size_t i = 0; i + 1 < f->elements && b->rc == 0; i += 2) {
            const redisReply *k = f->element[i];
            if (!is_str(k))
                continue;
            size_t slot = 0;
            int isnew = redis_seen_add(seen, k->str, k->len, &slot);
            if (isnew < 0) {
                b->rc = TERN_ENOMEM;
                zb_reject(b, "%s: zone %s: out of memory", rs->where, b->z->origin);
            } else if (isnew) {
                const redisReply *v = f->element[i + 1];
                if (is_str(v))
                    seen->dig[slot] = digest_label(k, v);
                zb_label_feed(b, k, v, diff_label(b, k, seen->dig[slot]));
            }
        }
        freeReplyObject(r);
        r = NULL;
        if (b->rc != 0 || b->breach & ZB_OVER_LABELS)
            break; /* over max_labels: the rest is not read, the version is rejected anyway */
    }
    /* stopped early with a chunk on its way: read it, so the next reply is the next command's */
    if (in_flight && (rc = rs_reply(rs, &r)) < 0)
        goto out;
    rc = 0;
out:
    if (r)
        freeReplyObject(r);
    free(kcfg);
    free(khash);
    return rc;
}

static void add_patch(redis_source_stats_t *st, void *arg)
{
    (void)arg;
    st->patches++;
}

/* The owner name of label in zone z ("@": the apex), lowercased wire form, into out. false if
 * it is none. */
static bool label_owner(const struct zst *z, const char *label, uint8_t out[DNAME_MAXLEN])
{
    uint8_t rel[DNAME_MAXLEN], apex[DNAME_MAXLEN];
    const char *why = NULL;
    int al = dname_from_str(z->origin, strlen(z->origin), false, apex, &why);
    if (al > 0 && strcmp(label, "@") == 0) {
        (void)dname_lower(out, apex);
        return true;
    }
    int rl = dname_from_str(label, strlen(label), true, rel, &why);
    if (rl <= 0 || al <= 0 || (size_t)rl + (size_t)al > DNAME_MAXLEN)
        return false;
    memcpy(rel + rl, apex, (size_t)al);
    (void)dname_lower(out, rel);
    return true;
}

/* Finish b's build of the changed labels alone and hand it out through on_patch with the n
 * owner names they change. False (logged at debug) when the build fails: read it whole then. */
static bool zb_hand_patch(zbuild_t *b, const uint8_t *const *names, size_t n)
{
    redis_source_t *rs = b->rs;
    zone_t *fresh = NULL;
    char err[1024];
    int rc = zone_json_finish(b->zj, &fresh, err, sizeof(err));
    b->zj = NULL;
    if (rc < 0) {
        log_debug("%s: zone %s: patch: %s; reading it whole", rs->where, b->z->origin, err);
        return false;
    }
    log_debug("%s: zone %s: %zu names changed, handed out as a patch", rs->where, b->z->origin, n);
    redis_int_stats(rs, add_patch, NULL);
    rs->cb.on_patch(rs->cb.ctx, b->z->origin, fresh, names, n);
    return true;
}

/* Zones of at least this many labels keep them with their digests (zst.lt), so that a change
 * found by a keyspace event is read once and patched (diff_read()) instead of built whole. */
#define LT_MIN 10000

/* After a full read of a large zone: its labels and digests become the zone's, when it was
 * built (handed out); otherwise the ones of the version served stay. */
static void keep_labels(struct zst *z, zbuild_t *b, bool built)
{
    if (built && b->labels >= LT_MIN) {
        seen_t *t = z->lt ? z->lt : malloc(sizeof(*t));
        if (t) {
            if (z->lt)
                redis_seen_free(z->lt);
            *t = b->seen;
            memset(&b->seen, 0, sizeof(b->seen));
            z->lt = t;
            return;
        }
    }
    if (built && z->lt) { /* too small now, or no memory: no diff next time */
        redis_seen_free(z->lt);
        free(z->lt);
        z->lt = NULL;
    }
    redis_seen_free(&b->seen);
}

/*
 * A dirty large zone with its labels kept: read it once, build only the labels whose digest
 * changed (and the apex every build needs), and hand them out as a patch with the deleted ones.
 * *done is false when the change needs a full build after all (the apex, the config or keys,
 * a signed zone, a breach, too many labels): the caller reads it again, whole.
 */
static int diff_read(redis_source_t *rs, struct zst *z, run_counts_t *cnt, bool *done)
{
    zbuild_t b;
    *done = false;
    zb_begin(&b, rs, z, true);
    b.old = z->lt;
    b.omark = calloc(z->lt->mask + 1, 1);
    if (!b.omark) {
        zb_abandon(&b);
        return 0;
    }
    int rc = read_large(rs, &b);
    if (rc < 0) {
        zb_abandon(&b);
        return rc;
    }
    size_t ndel = 0;
    for (size_t i = 0; i <= z->lt->mask; i++)
        ndel += z->lt->off[i] && !b.omark[i];
    size_t n = b.nchanged + ndel;
    /* only the SOA of the config changed: the apex carries it */
    bool soa = b.cfg_digest != z->cfg_digest;
    n += soa;
    bool ok = b.zj && b.rc == 0 && !b.breach && !b.bad && !b.list_lost &&
              b.cfg_wide == z->cfg_wide && !zone_json_dnssec(b.zj) && n <= b.labels / 8 + 1024 &&
              n <= PLAB_MAX;
    uint8_t(*owners)[DNAME_MAXLEN] = ok && n ? malloc(n * sizeof(*owners)) : NULL;
    const uint8_t **names = ok && n ? malloc(n * sizeof(*names)) : NULL;
    size_t nn = 0;
    if (ok && soa && owners && names && label_owner(z, "@", owners[nn]))
        names[nn] = owners[nn], nn++;
    if (ok && n && (!owners || !names))
        ok = false;
    if (ok && n) {
        for (size_t i = 0; i < b.nchanged; i++)
            if (label_owner(z, b.changed[i], owners[nn]))
                names[nn] = owners[nn], nn++;
        for (size_t i = 0; i <= z->lt->mask; i++)
            if (z->lt->off[i] && !b.omark[i] &&
                label_owner(z, z->lt->buf + z->lt->off[i] - 1, owners[nn]))
                names[nn] = owners[nn], nn++;
        ok = zb_hand_patch(&b, names, nn);
        if (ok) {
            cnt->built++;
            z->cfg_digest = b.cfg_digest;
        }
    } else if (ok) {
        count(cnt, 0); /* the event changed nothing */
    }
    if (ok) {
        z->digest = b.digest;
        z->have_digest = true;
        keep_labels(z, &b, true);
        *done = true;
    }
    free(owners);
    free(names);
    zb_abandon(&b);
    return 0;
}

/* A zone too large for one HSCAN call. */
static int process_large(redis_source_t *rs, struct zst *z, run_mode_t mode, run_counts_t *cnt)
{
    zbuild_t b;
    int rc;
    if (mode == RUN_DIRTY && z->lt && z->served && rs->cb.on_patch && !z->resign) {
        bool done;
        if ((rc = diff_read(rs, z, cnt, &done)) < 0 || done)
            return rc;
    }
    if (mode == RUN_VERIFY && z->have_digest && !z->resign) {
        zb_begin(&b, rs, z, false);
        rc = read_large(rs, &b);
        redis_seen_free(&b.seen);
        if (rc < 0)
            return rc;
        if (b.digest == z->digest && b.rc == 0) {
            count(cnt, 0);
            return 0;
        }
    }
    zb_begin(&b, rs, z, true);
    if ((rc = read_large(rs, &b)) < 0) {
        zb_abandon(&b);
        return rc;
    }
    int outcome = zb_end(&b, mode != RUN_FORCE);
    keep_labels(z, &b, outcome == 1);
    count(cnt, outcome);
    return 0;
}

/* A zone whose config and first HSCAN chunk are in hand. Sets *large when the chunk was not all. */
static void process_small(redis_source_t *rs, struct zst *z, const redisReply *cfg,
                          const zkeys_t *keys, const redisReply *scan, run_mode_t mode, bool *large,
                          run_counts_t *cnt)
{
    zbuild_t b;
    *large = false;
    if (scan->type == REDIS_REPLY_ERROR || !scan_reply_ok(scan)) {
        zb_begin(&b, rs, z, false);
        zb_reject(&b, "%s: zone %s: HSCAN: %s", rs->where, z->origin,
                  scan->type == REDIS_REPLY_ERROR ? scan->str : "unexpected reply");
        b.digest = 0; /* unreadable: logged once, until it reads again */
        count(cnt, zb_end(&b, true));
        return;
    }
    if (strcmp(scan->element[0]->str, "0") != 0) {
        *large = true;
        return;
    }
    const redisReply *f = scan->element[1];
    /* the digest first (a hash of the bytes), the build only if the data changed */
    if (mode != RUN_FORCE && z->have_digest && !z->resign) {
        zb_begin(&b, rs, z, false);
        zb_config(&b, cfg, keys);
        for (size_t i = 0; i + 1 < f->elements; i += 2)
            zb_label(&b, f->element[i], f->element[i + 1]);
        if (b.digest == z->digest) {
            count(cnt, 0);
            return;
        }
    }
    zb_begin(&b, rs, z, true);
    zb_config(&b, cfg, keys);
    for (size_t i = 0; i + 1 < f->elements && b.rc == 0; i += 2)
        zb_label(&b, f->element[i], f->element[i + 1]);
    count(cnt, zb_end(&b, false));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort z's named labels and drop the repeats; the apex is always read, so it is dropped too and
 * *apex says whether it was named. */
static void plab_dedupe(struct zst *z, bool *apex)
{
    qsort(z->plab, z->nplab, sizeof(*z->plab), cmp_str);
    size_t n = 0;
    *apex = false;
    for (size_t i = 0; i < z->nplab; i++) {
        if (n && strcmp(z->plab[i], z->plab[n - 1]) == 0) {
            free(z->plab[i]);
            continue;
        }
        if (strcmp(z->plab[i], "@") == 0) { /* read anyway (argv[2] of the HMGET) */
            *apex = true;
            free(z->plab[i]);
            continue;
        }
        z->plab[n++] = z->plab[i];
    }
    z->nplab = n;
}

/* Build the replies of GET config, MGET keys and HMGET "@" + z's named labels into a zone of
 * their own and hand it out as a patch (owners: room for nplab + 1 names). False when a patch
 * cannot carry the change (logged at debug): the caller reads the zone whole. */
static bool patch_build(redis_source_t *rs, struct zst *z, const redisReply *cfg,
                        const zkeys_t *keys, const redisReply *vals, bool apex,
                        uint8_t (*owners)[DNAME_MAXLEN], const uint8_t **names)
{
    size_t n = z->nplab;
    zbuild_t b;
    zb_begin(&b, rs, z, true);
    zb_config(&b, cfg, keys);
    /* a config whose SOA alone changed (an UPDATE's new serial) is carried by the apex */
    bool soa = b.cfg_digest != z->cfg_digest;
    bool ok = b.zj && b.cfg_wide == z->cfg_wide && !zone_json_dnssec(b.zj) &&
              vals->type == REDIS_REPLY_ARRAY && vals->elements == n + 1 &&
              vals->element[0]->type == REDIS_REPLY_STRING;
    size_t nn = 0;
    for (size_t i = 0; ok && i <= n; i++) {
        const char *lab = i ? z->plab[i - 1] : "@";
        redisReply f = {.type = REDIS_REPLY_STRING, .str = (char *)lab, .len = strlen(lab)};
        if (vals->element[i]->type == REDIS_REPLY_STRING)
            zb_label(&b, &f, vals->element[i]);
        if ((i || apex || soa) && label_owner(z, lab, owners[nn]))
            names[nn] = owners[nn], nn++;
        ok = b.zj != NULL;
    }
    bool handed = ok && zb_hand_patch(&b, names, nn); /* which logs a failure itself */
    if (handed)
        z->cfg_digest = b.cfg_digest;
    if (!ok)
        log_debug("%s: zone %s: %s; reading it whole", rs->where, z->origin,
                  !b.zj && b.err[0]           ? b.err
                  : b.cfg_wide != z->cfg_wide ? "the config or keys changed"
                                              : "the labels cannot be patched");
    zb_abandon(&b);
    return handed;
}

/*
 * A served zone whose changed labels were named on the change channel: read those labels (with
 * the config, the DNSSEC keys and the apex label every build needs) and build a zone of them
 * alone, handed out through on_patch. The apex named is read once (it is always read) and
 * patched like any label. Whatever a patch cannot carry — a changed config or keys, a signed
 * zone, a build that fails — makes it a full read instead.
 */
int redis_read_patch(redis_source_t *rs, struct zst *z)
{
    bool apex;
    plab_dedupe(z, &apex);
    size_t n = z->nplab;
    if (!rs->cb.on_patch || !z->served) {
        log_debug("%s: zone %s: no zone to patch; reading it whole", rs->where, z->origin);
        redis_sync_plab_clear(z);
        redis_source_mark_dirty(rs, z);
        return 0;
    }
    char *kcfg = redis_zone_key(rs, z->name, true);
    char *khash = redis_zone_key(rs, z->name, false);
    const char **argv = malloc((n + 3) * sizeof(*argv));
    size_t *lens = malloc((n + 3) * sizeof(*lens));
    uint8_t(*owners)[DNAME_MAXLEN] = malloc((n + 1) * sizeof(*owners));
    const uint8_t **names = malloc((n + 1) * sizeof(*names));
    redisReply *cfg = NULL, *vals = NULL;
    zkeys_t keys = {NULL, NULL};
    int rc = 0;
    if (!kcfg || !khash || !argv || !lens || !owners || !names) {
        rc = redis_conn_fail(rs->conn, "out of memory");
        goto out;
    }
    argv[0] = "HMGET";
    argv[1] = khash;
    argv[2] = "@";
    for (size_t i = 0; i < n; i++)
        argv[3 + i] = z->plab[i];
    for (size_t i = 0; i < n + 3; i++)
        lens[i] = strlen(argv[i]);
    const char *get[] = {"GET", kcfg, NULL};
    if ((rc = rs_append(rs, get)) < 0 || (rc = append_keys(rs, z->name)) < 0 ||
        (rc = redis_conn_append_argv(rs->conn, redis_conn_cmd(rs->conn), (int)(n + 3), argv,
                                     lens)) < 0)
        goto out;
    if ((rc = rs_reply(rs, &cfg)) == 0 && (rc = keys_reply(rs, &keys)) == 0 &&
        (rc = rs_reply(rs, &vals)) == 0 &&
        !patch_build(rs, z, cfg, &keys, vals, apex, owners, names))
        redis_source_mark_dirty(rs, z);
out:
    if (cfg)
        freeReplyObject(cfg);
    keys_free(&keys);
    if (vals)
        freeReplyObject(vals);
    redis_sync_plab_clear(z);
    free(kcfg);
    free(khash);
    free(argv);
    free(lens);
    free(owners);
    free(names);
    return rc;
}

/* Read (and build what changed of) the zones in list. */
int redis_read_process(redis_source_t *rs, struct zst **list, size_t n, run_mode_t mode,
                       run_counts_t *cnt)
{
    struct zst **large = NULL;
    size_t nlarge = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i += BATCH_ZONES) {
        size_t m = n - i < BATCH_ZONES ? n - i : BATCH_ZONES;
        for (size_t j = 0; j < m && rc == 0; j++) {
            char *kcfg = redis_zone_key(rs, list[i + j]->name, true);
            char *khash = redis_zone_key(rs, list[i + j]->name, false);
            const char *get[] = {"GET", kcfg, NULL};
            const char *scan[] = {"HSCAN", khash, "0", "COUNT", SCAN_COUNT, NULL};
            if (!kcfg || !khash)
                rc = redis_conn_fail(rs->conn, "out of memory");
            else if ((rc = rs_append(rs, get)) == 0 &&
                     (rc = append_keys(rs, list[i + j]->name)) == 0)
                rc = rs_append(rs, scan);
            free(kcfg);
            free(khash);
        }
        for (size_t j = 0; j < m && rc == 0; j++) {
            redisReply *cfg = NULL, *scan = NULL;
            zkeys_t keys = {NULL, NULL};
            if ((rc = rs_reply(rs, &cfg)) == 0 && (rc = keys_reply(rs, &keys)) == 0 &&
                (rc = rs_reply(rs, &scan)) == 0) {
                bool big;
                process_small(rs, list[i + j], cfg, &keys, scan, mode, &big, cnt);
                if (big) {
                    struct zst **l = realloc(large, (nlarge + 1) * sizeof(*l));
                    if (!l)
                        rc = redis_conn_fail(rs->conn, "out of memory");
                    else
                        (large = l)[nlarge++] = list[i + j];
                }
            }
            if (cfg)
                freeReplyObject(cfg);
            keys_free(&keys);
            if (scan)
                freeReplyObject(scan);
        }
    }
    for (size_t i = 0; i < nlarge && rc == 0; i++)
        rc = process_large(rs, large[i], mode, cnt);
    free(large);
    return rc;
}
