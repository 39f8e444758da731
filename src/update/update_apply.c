/*
 * update_apply.c — one UPDATE, start to end, on the update thread (update.h says the order and
 * why): parse → find the zone and authorise → rate → evaluate over the version served → check
 * the change builds → journal (fsync) → audit → ask the loader to read the zone again → wait
 * for the publish → the rcode. And the zone files written back (ternctl zone flush,
 * zonefile_sync).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <ldns/ldns.h>

#include "tern/common/byteorder.h"
#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/limit/limit.h"
#include "tern/source/source_journal.h"
#include "tern/update/update_msg.h"
#include "tern/wire/parse.h"
#include "tern/wire/rr.h"
#include "tern/xfr/journal.h" /* RFC 1982 serial arithmetic */
#include "tern/zone/zone_delta.h"
#include "tern/zone/zone_patch.h"
#include "update_int.h"

/* A refusal is logged at most this often a second: a client hammering with a wrong key must not
 * fill the log (the counters still count every one). */
#define REFUSAL_LOG_PER_S 10

/* An audit line names at most this many RRs (the rest are counted). */
#define AUDIT_RRS_MAX 16

/* What one request needs of its zone's settings, copied under mu: a reload may replace them. */
typedef struct zview {
    bool found, secondary, json, signed_, allowed, any_rule;
    bool redis; /* a zone Redis serves: the change goes to Redis */
    char key[DNAME_KEY_MAX], origin[DNAME_KEY_MAX];
    char file[PATH_MAX], journal[PATH_MAX];
    unsigned max_records, rate;
} zview_t;

static bool log_refusal_ok(void)
{
    static int64_t second;
    static unsigned n;
    int64_t now = tern_monotonic_ms() / 1000;
    if (now != second) {
        second = now;
        n = 0;
    }
    return n++ < REFUSAL_LOG_PER_S;
}

/* "xfr-key" and "XFR-Key." are one key. */
static bool same_key(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    la -= la && a[la - 1] == '.';
    lb -= lb && b[lb - 1] == '.';
    return la == lb && strncasecmp(a, b, la) == 0;
}

static bool rule_match(const config_update_rule_t *r, const ureq_t *q)
{
    if (!r->key && !r->addresses.n)
        return false;
    if (r->key && (!q->signed_ || !same_key(r->key, q->key)))
        return false;
    return !r->addresses.n || limit_prefix_match(&r->addresses, &q->peer);
}

static void zone_view(update_t *u, const uint8_t *apex, size_t len, const ureq_t *q, zview_t *zv)
{
    memset(zv, 0, sizeof(*zv));
    pthread_mutex_lock(&u->mu);
    zv->max_records = u->max_records;
    zv->rate = u->rate;
    for (size_t i = 0; i < u->nz && !zv->found; i++) {
        const uzone_t *z = &u->z[i];
        if (z->apex_len != len || memcmp(z->apex, apex, len) != 0)
            continue;
        zv->found = true;
        zv->secondary = z->secondary;
        zv->json = z->json;
        zv->redis = z->redis;
        zv->signed_ = z->signed_;
        zv->any_rule = z->nrules > 0;
        snprintf(zv->key, sizeof(zv->key), "%s", z->key);
        snprintf(zv->origin, sizeof(zv->origin), "%s", z->origin);
        snprintf(zv->file, sizeof(zv->file), "%s", z->file ? z->file : "");
        snprintf(zv->journal, sizeof(zv->journal), "%s", z->journal ? z->journal : "");
        zv->allowed = q->preauth;
        for (size_t j = 0; j < z->nrules && !zv->allowed; j++)
            zv->allowed = rule_match(&z->rules[j], q);
    }
    pthread_mutex_unlock(&u->mu);
}

static const char *who_text(const ureq_t *q, char *buf, size_t len)
{
    char addr[80];
    if (q->preauth)
        return snprintf(buf, len, "%s", q->key), buf;
    limit_addr_text(&q->peer, addr, sizeof(addr));
    if (q->signed_)
        snprintf(buf, len, "key %s from %s", q->key, addr);
    else
        snprintf(buf, len, "%s (unsigned)", addr);
    return buf;
}

/* A token bucket per principal (the key, or the address of an unsigned update): rate a second,
 * as many in a burst. */
static bool rate_ok(update_t *u, const ureq_t *q, unsigned rate)
{
    char who[sizeof(((ubucket_t *)0)->who)];
    if (q->preauth)
        snprintf(who, sizeof(who), "%.150s", q->key);
    else if (q->signed_)
        snprintf(who, sizeof(who), "key %.150s", q->key);
    else
        limit_addr_text(&q->peer, who, sizeof(who)), *strchrnul(who, '@') = '\0';
    int64_t now = tern_monotonic_ms();
    ubucket_t *b = NULL, *oldest = NULL;
    for (size_t i = 0; i < u->nbuckets && !b; i++) {
        if (strcasecmp(u->buckets[i].who, who) == 0)
            b = &u->buckets[i];
        else if (!oldest || u->buckets[i].last_ms < oldest->last_ms)
            oldest = &u->buckets[i];
    }
    if (!b) {
        if (u->nbuckets < UPDATE_BUCKETS_MAX) {
            ubucket_t *n = realloc(u->buckets, (u->nbuckets + 1) * sizeof(*n));
            if (!n)
                return true; /* a limit that cannot count lets the update through */
            u->buckets = n;
            b = &u->buckets[u->nbuckets++];
        } else {
            b = oldest;
        }
        snprintf(b->who, sizeof(b->who), "%s", who);
        b->tokens = rate;
        b->last_ms = now;
    }
    b->tokens += (double)(now - b->last_ms) * rate / 1000.0;
    if (b->tokens > rate)
        b->tokens = rate;
    b->last_ms = now;
    if (b->tokens < 1.0)
        return false;
    b->tokens -= 1.0;
    return true;
}

/* The change patched onto z off to the side: every check a build runs on the names it touches
 * (a zone tern signs is not patched, its delta is built all the same). */
static int check_change(const zone_t *z, const update_change_t *ch, zone_t **patched, char *why,
                        size_t whylen)
{
    *patched = NULL;
    zone_delta_ixfr_t *x = zone_delta_ixfr_new(z);
    zone_delta_t *d = NULL;
    zone_t *out = NULL;
    int rc = x ? zone_delta_ixfr_begin(x, ch->from, why, whylen) : TERN_ENOMEM;
    for (size_t i = 0; rc == 0 && i < ch->nremoved; i++) {
        const update_rr_t *r = &ch->removed[i];
        rc = zone_delta_ixfr_remove(x, r->owner, r->type, r->rdata, r->rdlen, why, whylen);
    }
    if (rc == 0)
        rc = zone_delta_ixfr_end(x, ch->to);
    for (size_t i = 0; rc >= 0 && i < ch->nadded; i++) {
        const update_rr_t *r = &ch->added[i];
        rc = zone_delta_ixfr_add(x, r->owner, r->type, r->ttl, r->rdata, r->rdlen);
    }
    if (rc >= 0)
        rc =
            zone_delta_ixfr_finish(x, ch->soa_ttl, ch->soa, ch->soa_len, "update", &d, why, whylen);
    if (rc >= 0 && !z->dnssec)
        rc = zone_patch(z, d, &out, why, whylen);
    if (rc == TERN_ENOMEM)
        snprintf(why, whylen, "out of memory");
    if (rc >= 0)
        *patched = out; /* the next change of the batch is checked over it */
    else
        zone_free(out);
    zone_delta_release(d);
    zone_delta_ixfr_free(x);
    return rc < 0 ? rc : 0;
}

static void to_journal(const update_rr_t *in, size_t n, source_journal_rr_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (source_journal_rr_t){.owner = in[i].owner,
                                       .owner_len = in[i].owner_len,
                                       .type = in[i].type,
                                       .ttl = in[i].ttl,
                                       .rdlen = in[i].rdlen,
                                       .rdata = in[i].rdata};
}

static int journal_append(const zview_t *zv, const zone_t *z, const update_change_t *ch,
                          const char *who, char *why, size_t whylen)
{
    source_journal_rr_t *rm = calloc(ch->nremoved + 1, sizeof(*rm));
    source_journal_rr_t *ad = calloc(ch->nadded + 1, sizeof(*ad));
    int rc = TERN_ENOMEM;
    if (rm && ad) {
        to_journal(ch->removed, ch->nremoved, rm);
        to_journal(ch->added, ch->nadded, ad);
        const source_journal_entry_t e = {.from = ch->from,
                                          .to = ch->to,
                                          .when = (int64_t)time(NULL),
                                          .who = who,
                                          .soa_ttl = ch->soa_ttl,
                                          .soa_len = ch->soa_len,
                                          .soa = ch->soa,
                                          .nremoved = ch->nremoved,
                                          .nadded = ch->nadded,
                                          .removed = rm,
                                          .added = ad};
        rc = source_journal_append(zv->journal, z->apex, z->apex_len, &e, why, whylen);
    } else {
        snprintf(why, whylen, "out of memory");
    }
    free(rm);
    free(ad);
    return rc;
}

/* One RR as a zone file line (ldns's text), into out. */
static void rr_text(const update_rr_t *r, char *out, size_t len)
{
    uint8_t w[DNAME_MAXLEN + 10 + UINT16_MAX];
    memcpy(w, r->owner, r->owner_len);
    uint8_t *p = w + r->owner_len;
    tern_wr16(p, r->type);
    tern_wr16(p + 2, WIRE_CLASS_IN);
    tern_wr32(p + 4, r->ttl);
    tern_wr16(p + 8, r->rdlen);
    memcpy(p + 10, r->rdata, r->rdlen);
    ldns_rr *rr = NULL;
    size_t pos = 0;
    char *s = NULL;
    if (ldns_wire2rr(&rr, w, r->owner_len + 10u + r->rdlen, &pos, LDNS_SECTION_ANSWER) ==
        LDNS_STATUS_OK)
        s = ldns_rr2str_fmt(ldns_output_format_nocomments, rr);
    snprintf(out, len, "%s", s ? s : "?");
    for (char *c = out; *c; c++)
        if (*c == '\t' || *c == '\n')
            *c = *c == '\t' ? ' ' : '\0';
    free(s);
    ldns_rr_free(rr);
}

/* The audit: one log line with the RRs out and in, and the ring `ternctl zone` reads. */
static void audit(update_t *u, const zview_t *zv, const update_change_t *ch, const char *who)
{
    char list[2048] = "", t[600];
    size_t n = 0, len = 0;
    for (size_t i = 0; i < ch->nremoved + ch->nadded && n < AUDIT_RRS_MAX; i++, n++) {
        bool add = i >= ch->nremoved;
        rr_text(add ? &ch->added[i - ch->nremoved] : &ch->removed[i], t, sizeof(t));
        len += (size_t)snprintf(list + len, len < sizeof(list) ? sizeof(list) - len : 0, "%s%c%s",
                                n ? "; " : "", add ? '+' : '-', t);
        if (len >= sizeof(list))
            break;
    }
    size_t more = ch->nremoved + ch->nadded - n;
    log_info("update: zone %s: serial %u to %u by %s: %zu removed, %zu added: %s%s", zv->origin,
             ch->from, ch->to, who, ch->nremoved, ch->nadded, list, more ? " ..." : "");
    update_audit_t a = {.when = (int64_t)time(NULL),
                        .from = ch->from,
                        .to = ch->to,
                        .removed = ch->nremoved,
                        .added = ch->nadded};
    snprintf(a.who, sizeof(a.who), "%.127s", who);
    update_audit_note(u, zv->key, &a);
}

/* Wait until the view served holds zone apex at serial `to` or later (true), the deadline
 * passes or the service stops (false). */
static bool wait_published(update_t *u, const uint8_t *apex, uint32_t to)
{
    int64_t deadline = tern_monotonic_ms() + UPDATE_PUBLISH_WAIT_MS;
    for (;;) {
        pthread_mutex_lock(&u->mu);
        uint64_t gen = u->pubgen;
        bool stop = u->stop;
        pthread_mutex_unlock(&u->mu);
        if (stop)
            return false;
        zone_t *z = answer_pin_zone(u->published, apex);
        /* the source's serial: a signed zone's served one may have been raised past `to` */
        bool ok = z && !z->unavailable && xfr_serial_ge(z->src_serial, to);
        zone_free(z);
        if (ok)
            return true;
        int64_t now = tern_monotonic_ms();
        if (now >= deadline)
            return false;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ms = deadline - now < 1000 ? deadline - now : 1000;
        until.tv_sec += ms / 1000;
        until.tv_nsec += (ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&u->mu);
        if (u->pubgen == gen && !u->stop)
            pthread_cond_timedwait(&u->pub, &u->mu, &until);
        pthread_mutex_unlock(&u->mu);
    }
}

/* Who may change the zone, and whether it takes changes here: WIRE_RC_NOERROR, or the rcode
 * with why. */
static unsigned authorise(update_t *u, const update_msg_t *m, const ureq_t *q, zview_t *zv,
                          char *why, size_t whylen)
{
    zone_view(u, m->zone, m->zone_len, q, zv);
    char name[DNAME_KEY_MAX];
    if (dname_to_str(m->zone, name, sizeof(name)) < 0)
        snprintf(name, sizeof(name), "?");
    if (!zv->found) {
        zone_t *z = answer_pin_zone(u->published, m->zone);
        bool served = z != NULL;
        zone_free(z);
        if (!served)
            return snprintf(why, whylen, "tern is not authoritative for zone %s", name),
                   WIRE_RC_NOTAUTH;
        if (!q->preauth)
            return snprintf(why, whylen,
                            "zone %s is served from Redis and has no allow_update (a zones: "
                            "entry with its origin and allow_update, no file)",
                            name),
                   WIRE_RC_REFUSED;
        /* an authorised caller's change of a Redis zone the config does not name */
        zv->found = zv->redis = zv->allowed = true;
        snprintf(zv->origin, sizeof(zv->origin), "%s", name);
        char *key = zone_source_key(name);
        snprintf(zv->key, sizeof(zv->key), "%s", key ? key : name);
        free(key);
    }
    if (m->zclass != WIRE_CLASS_IN)
        return snprintf(why, whylen, "zone %s: class %u", name, m->zclass), WIRE_RC_NOTAUTH;
    if (zv->secondary)
        return snprintf(why, whylen, "zone %s is a secondary zone: its primary takes updates",
                        name),
               WIRE_RC_NOTAUTH;
    if (zv->json || (!zv->redis && !zv->journal[0]))
        return snprintf(why, whylen, "zone %s is a redins JSON file: it takes no updates", name),
               WIRE_RC_REFUSED;
    if (!zv->any_rule && !q->preauth)
        return snprintf(why, whylen, "zone %s has no allow_update", name), WIRE_RC_REFUSED;
    if (!zv->allowed)
        return snprintf(why, whylen, "zone %s: no allow_update rule matches", name),
               WIRE_RC_REFUSED;
    if (!rate_ok(u, q, zv->rate)) {
        pthread_mutex_lock(&u->mu);
        u->st.refused_rate++;
        pthread_mutex_unlock(&u->mu);
        return snprintf(why, whylen, "zone %s: more than update_rate (%u) changes a second", name,
                        zv->rate),
               WIRE_RC_REFUSED;
    }
    return WIRE_RC_NOERROR;
}

/* A change of a Redis zone: written into Redis, audited, then waited for until tern's Redis
 * source serves it. */
static unsigned redis_apply(update_t *u, const zview_t *zv, const zone_t *z, const update_msg_t *m,
                            const update_change_t *ch, const char *who, char *why, size_t whylen)
{
    int rc = update_redis_write(u, z, ch, why, whylen);
    if (rc == TERN_ENOTSUP || rc == TERN_ESYNTAX || rc == TERN_ENOENT)
        return WIRE_RC_REFUSED; /* what redins' schema (or the data there) cannot take */
    if (rc < 0) {
        log_err("update: zone %s: %s; the change is not made", zv->origin, why);
        return WIRE_RC_SERVFAIL;
    }
    audit(u, zv, ch, who);
    if (!wait_published(u, m->zone, ch->to)) {
        log_err("update: zone %s: serial %u is in Redis but not served yet; answered SERVFAIL "
                "(it is served once the Redis source reads it)",
                zv->origin, ch->to);
        return WIRE_RC_SERVFAIL;
    }
    pthread_mutex_lock(&u->mu);
    u->st.applied++;
    pthread_mutex_unlock(&u->mu);
    return WIRE_RC_NOERROR;
}

/* Evaluate over the version served, check, journal, audit, publish. */
/* The first RR of the change whose RRset is geo-steered or health-checked in z (tern's own:
 * zone_rrset_geo()), named in why; false when none is. */
static bool steered_touched(const zone_t *z, const update_change_t *ch, const char *origin,
                            char *why, size_t whylen)
{
    for (size_t i = 0; i < ch->nremoved + ch->nadded; i++) {
        const update_rr_t *r = i < ch->nremoved ? &ch->removed[i] : &ch->added[i - ch->nremoved];
        const zone_node_t *n = zone_find_node(z, r->owner, r->owner_len, dname_hash(r->owner));
        const zone_rrset_t *s = n ? zone_node_rrset(n, r->type) : NULL;
        if (s && zone_rrset_geo(z, s)) {
            char name[DNAME_KEY_MAX];
            if (dname_to_str(r->owner, name, sizeof(name)) < 0)
                snprintf(name, sizeof(name), "?");
            snprintf(why, whylen,
                     "RRset %s %s is geo-steered or health-checked (filter, health_check or "
                     "records with country, asn or weight): a change here would drop that "
                     "silently; change it as redins JSON (GET/PUT .../zones/%s/redins/<label>)",
                     name, r->type == WIRE_T_A ? "A" : "AAAA", origin);
            return true;
        }
    }
    return false;
}

/* The batch's entry of zone zv (made on first sight), or NULL when the batch is full. */
static ubzone_t *batch_zone(ubatch_t *b, const zview_t *zv, const uint8_t *apex, size_t len)
{
    for (size_t i = 0; i < b->n; i++)
        if (strcmp(b->z[i].key, zv->key) == 0)
            return &b->z[i];
    if (b->n == UPDATE_BATCH_MAX)
        return NULL;
    ubzone_t *e = &b->z[b->n++];
    memset(e, 0, sizeof(*e));
    snprintf(e->key, sizeof(e->key), "%s", zv->key);
    snprintf(e->origin, sizeof(e->origin), "%s", zv->origin);
    memcpy(e->apex, apex, len);
    return e;
}

/* A master-file zone's change: journaled (fsync), audited, its zone marked dirty. */
static unsigned journal_change(update_t *u, const zview_t *zv, const zone_t *z,
                               const update_change_t *ch, const char *who, char *why, size_t whylen)
{
    if (journal_append(zv, z, ch, who, why, whylen) < 0) {
        pthread_mutex_lock(&u->mu);
        u->st.journal_errors++;
        pthread_mutex_unlock(&u->mu);
        log_err("update: zone %s: %s; the change is not made", zv->origin, why);
        return WIRE_RC_SERVFAIL;
    }
    audit(u, zv, ch, who);
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->nz; i++)
        if (strcmp(u->z[i].key, zv->key) == 0 && !u->z[i].dirty_since)
            u->z[i].dirty_since = (int64_t)time(NULL);
    pthread_mutex_unlock(&u->mu);
    return WIRE_RC_NOERROR;
}

/* Evaluate over the version served (or the one the batch's previous change of the zone made),
 * check, then write it where the zone lives: a Redis zone's change is written and waited for
 * here; a master-file zone's is journaled and left to the batch's publish (*zi), but for a
 * signed zone (never patched: each change is its own build and publish). */
static unsigned apply(update_t *u, const update_msg_t *m, const zview_t *zv, const char *who,
                      bool preauth, ubatch_t *b, int *zi, char *why, size_t whylen)
{
    ubzone_t *e = zv->redis ? NULL : batch_zone(b, zv, m->zone, m->zone_len);
    if (!zv->redis && !e) {
        snprintf(why, whylen, "the batch is full");
        return WIRE_RC_SERVFAIL; /* cannot happen: a batch has as many zones as requests */
    }
    zone_t *z = e && e->work ? zone_retain(e->work) : answer_pin_zone(u->published, m->zone);
    if (!z || z->unavailable) {
        zone_free(z);
        snprintf(why, whylen, "zone %s is not loaded", zv->origin);
        return WIRE_RC_SERVFAIL;
    }
    update_change_t ch;
    const update_opts_t o = {.dnssec = z->dnssec != NULL};
    unsigned rc = update_eval(z, m, &o, &ch, why, whylen);
    zone_t *next = NULL;
    if (rc != WIRE_RC_NOERROR) {
        zone_free(z);
        return rc;
    }
    if (ch.from == ch.to && !ch.nremoved && !ch.nadded) {
        pthread_mutex_lock(&u->mu);
        u->st.unchanged++;
        pthread_mutex_unlock(&u->mu);
        snprintf(why, whylen, "nothing to change");
    } else if (preauth && steered_touched(z, &ch, zv->origin, why, whylen)) {
        rc = WIRE_RC_REFUSED; /* the API's clients see plain records only (issue 29) */
    } else if (check_change(z, &ch, &next, why, whylen) < 0) {
        rc = WIRE_RC_REFUSED;
    } else if (zv->redis) {
        rc = redis_apply(u, zv, z, m, &ch, who, why, whylen);
    } else if ((rc = journal_change(u, zv, z, &ch, who, why, whylen)) != WIRE_RC_NOERROR) {
        /* not made */
    } else if (next) { /* published with the batch */
        zone_free(e->work);
        e->work = next;
        next = NULL;
        e->to = ch.to;
        *zi = (int)(e - b->z);
    } else if (u->sink.reread(u->sink.ctx, zv->key) < 0 || !wait_published(u, m->zone, ch.to)) {
        log_err("update: zone %s: serial %u is in the journal but not served yet; answered "
                "SERVFAIL (it is served once the zone is read again)",
                zv->origin, ch.to);
        rc = WIRE_RC_SERVFAIL;
    } else {
        pthread_mutex_lock(&u->mu);
        u->st.applied++;
        pthread_mutex_unlock(&u->mu);
    }
    zone_free(next);
    update_change_free(&ch);
    zone_free(z);
    return rc;
}

void update_batch_publish(update_t *u, ubatch_t *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->z[i].work && u->sink.reread(u->sink.ctx, b->z[i].key) < 0)
            b->z[i].failed = true;
    for (size_t i = 0; i < b->n; i++) {
        ubzone_t *e = &b->z[i];
        if (e->work && !e->failed && !wait_published(u, e->apex, e->to))
            e->failed = true;
        if (e->failed)
            log_err("update: zone %s: serial %u is in the journal but not served yet; answered "
                    "SERVFAIL (it is served once the zone is read again)",
                    e->origin, e->to);
        zone_free(e->work);
        e->work = NULL;
    }
}

unsigned update_handle(update_t *u, const ureq_t *q, ubatch_t *b, int *zi, char *why, size_t whylen)
{
    char who[400];
    *zi = -1;
    who_text(q, who, sizeof(who));
    update_msg_t m;
    zview_t zv;
    pthread_mutex_lock(&u->mu);
    unsigned max = u->max_records;
    pthread_mutex_unlock(&u->mu);
    unsigned rc = update_msg_parse(&m, q->msg, q->len, max, why, whylen);
    if (rc == WIRE_RC_NOERROR)
        rc = authorise(u, &m, q, &zv, why, whylen);
    if (rc == WIRE_RC_NOERROR)
        rc = apply(u, &m, &zv, who, q->preauth, b, zi, why, whylen);
    update_msg_free(&m);
    if (rc != WIRE_RC_NOERROR && rc != WIRE_RC_SERVFAIL && log_refusal_ok())
        log_info("update: %s from %s: %s", update_rcode_name(rc), who, why);
    return rc;
}

/* ---- writing zone files back ------------------------------------------------------------ */

int update_flush_zone(update_t *u, const char *key, char *msg, size_t msglen)
{
    zview_t zv = {0};
    uint8_t apex[DNAME_MAXLEN];
    size_t apex_len = 0;
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->nz && !zv.found; i++)
        if (strcmp(u->z[i].key, key) == 0 && u->z[i].journal && !u->z[i].json) {
            zv.found = true;
            zv.signed_ = u->z[i].signed_;
            snprintf(zv.origin, sizeof(zv.origin), "%s", u->z[i].origin);
            snprintf(zv.file, sizeof(zv.file), "%s", u->z[i].file);
            snprintf(zv.journal, sizeof(zv.journal), "%s", u->z[i].journal);
            memcpy(apex, u->z[i].apex, u->z[i].apex_len);
            apex_len = u->z[i].apex_len;
        }
    pthread_mutex_unlock(&u->mu);
    if (!zv.found || !apex_len) {
        snprintf(msg, msglen, "no master-file zone %s", key);
        return TERN_ENOENT;
    }
    source_journal_info_t ji;
    int rc = source_journal_info(zv.journal, &ji, msg, msglen);
    if (rc < 0)
        return rc;
    if (!ji.entries) {
        snprintf(msg, msglen, "zone %s: no changes to write back", zv.origin);
        return 0;
    }
    zone_t *z = answer_pin_zone(u->published, apex);
    if (!z || z->unavailable || z->src_serial != ji.last) {
        snprintf(msg, msglen,
                 "zone %s: the version served (serial %u) is not the journal's last (%u): not "
                 "written",
                 zv.origin, z ? z->serial : 0, ji.last);
        zone_free(z);
        return TERN_EAGAIN;
    }
    rc = source_journal_flush(zv.journal, zv.file, z, zv.signed_, msg, msglen);
    zone_free(z);
    if (rc < 0) {
        log_err("update: zone %s: %s", zv.origin, msg);
        return rc;
    }
    snprintf(msg, msglen, "zone %s: %zu changes written back to %s (serial %u)", zv.origin,
             ji.entries, zv.file, ji.last);
    log_info("update: %s", msg);
    pthread_mutex_lock(&u->mu);
    u->st.flushes++;
    for (size_t i = 0; i < u->nz; i++)
        if (strcmp(u->z[i].key, key) == 0)
            u->z[i].dirty_since = 0;
    pthread_mutex_unlock(&u->mu);
    return 0;
}

void update_sync_due(update_t *u)
{
    char keys[8][DNAME_KEY_MAX];
    size_t n = 0;
    int64_t now = (int64_t)time(NULL);
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; u->sync_s && i < u->nz && n < 8; i++)
        if (u->z[i].dirty_since && now - u->z[i].dirty_since >= (int64_t)u->sync_s)
            snprintf(keys[n++], sizeof(keys[0]), "%s", u->z[i].key);
    pthread_mutex_unlock(&u->mu);
    for (size_t i = 0; i < n; i++) {
        char msg[512];
        if (update_flush_zone(u, keys[i], msg, sizeof(msg)) >= 0)
            continue;
        log_err("update: zonefile_sync: %s; trying again in %u s", msg, u->sync_s);
        pthread_mutex_lock(&u->mu);
        for (size_t j = 0; j < u->nz; j++)
            if (strcmp(u->z[j].key, keys[i]) == 0 && u->z[j].dirty_since)
                u->z[j].dirty_since = now;
        pthread_mutex_unlock(&u->mu);
    }
}
