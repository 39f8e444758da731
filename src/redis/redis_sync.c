/*
 * redis_sync.c — the zone table and the set's membership (redis_int.h): which zones the set
 * P redins:zones S names (members_of(), one zone per canonical key), making the table match it
 * (reconcile(): new zones, zones gone, max_zones), and the two ways the source reads: a full read
 * or verify of every zone, and a flush of what change events marked dirty. The reading and
 * building itself is redis_read.c. Source thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"
#include "tern/common/mem.h"
#include "tern/wire/dname.h"

#include "redis_int.h"

/* Other members naming one zone, and zones beyond max_zones, named in their one log line. */
#define NAMES_LOGGED 3

static int64_t now_ms(void)
{
    return tern_monotonic_ms();
}

/* --- the zone table --- */

/* The canonical key of set member name (n bytes) into key: what "the same zone" means here and in
 * the loader. False when it is no domain name (empty, a NUL inside, a bad escape, too long). */
static bool member_key(const char *name, size_t n, char key[DNAME_KEY_MAX])
{
    char buf[DNAME_KEY_MAX];
    const char *why;
    if (n == 0 || n >= sizeof(buf) || memchr(name, '\0', n))
        return false;
    memcpy(buf, name, n);
    buf[n] = '\0';
    return dname_key(buf, key, DNAME_KEY_MAX, &why) >= 0;
}

/* True when member name is written in the canonical form of its key: the key itself, or with the
 * final dot redins writes ("example.com."). Such a member is served first when several name one
 * zone, so the choice does not depend on the order Redis lists them in. */
static bool member_canonical(const char *name, const char *key)
{
    size_t k = strlen(key);
    return strcmp(name, key) == 0 ||
           (strncmp(name, key, k) == 0 && name[k] == '.' && name[k + 1] == '\0');
}

/* Forget the labels named for the zone (a full read covers them, or they were patched). */
void redis_sync_plab_clear(struct zst *z)
{
    for (size_t i = 0; i < z->nplab; i++)
        free(z->plab[i]);
    z->nplab = 0;
}

static struct zst *zt_find(const redis_source_t *rs, const char *origin)
{
    if (!rs->nbucket)
        return NULL;
    for (struct zst *z = rs->bucket[tern_hash_str(origin) & (rs->nbucket - 1)]; z; z = z->next)
        if (strcmp(z->origin, origin) == 0)
            return z;
    return NULL;
}

static int zt_grow(redis_source_t *rs)
{
    size_t n = rs->nbucket ? rs->nbucket * 2 : 64;
    struct zst **b = calloc(n, sizeof(*b));
    if (!b)
        return TERN_ENOMEM;
    for (size_t i = 0; i < rs->nbucket; i++) {
        struct zst *z = rs->bucket[i], *next;
        for (; z; z = next) {
            next = z->next;
            size_t j = tern_hash_str(z->origin) & (n - 1);
            z->next = b[j];
            b[j] = z;
        }
    }
    free(rs->bucket);
    rs->bucket = b;
    rs->nbucket = n;
    return 0;
}

static struct zst *zt_add(redis_source_t *rs, const char *name, const char *origin)
{
    if (rs->nzones >= rs->nbucket && zt_grow(rs) < 0)
        return NULL;
    struct zst *z = calloc(1, sizeof(*z));
    if (!z || !(z->name = strdup(name)) || !(z->origin = strdup(origin))) {
        if (z)
            free(z->name);
        free(z);
        return NULL;
    }
    size_t j = tern_hash_str(origin) & (rs->nbucket - 1);
    z->next = rs->bucket[j];
    rs->bucket[j] = z;
    rs->nzones++;
    return z;
}

static void zst_free(struct zst *z)
{
    zone_free(z->signed_last);
    free(z->kasp_policy);
    free(z->name);
    free(z->origin);
    free(z->rep);
    redis_sync_plab_clear(z);
    free(z->plab);
    if (z->lt)
        redis_seen_free(z->lt);
    free(z->lt);
    free(z);
}

static void zt_del(redis_source_t *rs, struct zst *z)
{
    if (z->kasp_policy)
        redis_kasp_forget(rs, z->origin);
    struct zst **pp = &rs->bucket[tern_hash_str(z->origin) & (rs->nbucket - 1)];
    while (*pp != z)
        pp = &(*pp)->next;
    *pp = z->next;
    rs->nzones--;
    if (z->dirty) {
        for (size_t i = 0; i < rs->ndirty; i++) {
            if (rs->dirty[i] == z) {
                rs->dirty[i] = rs->dirty[--rs->ndirty];
                break;
            }
        }
    }
    for (size_t i = 0; i < rs->nldirty; i++) {
        if (rs->ldirty[i] == z) {
            rs->ldirty[i] = rs->ldirty[--rs->nldirty];
            break;
        }
    }
    zst_free(z);
}

void redis_sync_free(redis_source_t *rs)
{
    for (size_t b = 0; b < rs->nbucket; b++) {
        struct zst *z = rs->bucket[b], *next;
        for (; z; z = next) {
            next = z->next;
            zst_free(z);
        }
    }
    free(rs->bucket);
    rs->bucket = NULL;
    rs->nbucket = rs->nzones = 0;
}

/* The zone named name (n bytes), whatever its spelling; with exact, only when name is the very
 * member it is read from (the keys of another member of the same zone are not its data). */
struct zst *redis_sync_zone_by_name(redis_source_t *rs, const char *name, size_t n, bool exact)
{
    char key[DNAME_KEY_MAX];
    if (!member_key(name, n, key))
        return NULL;
    struct zst *z = zt_find(rs, key);
    if (z && exact && !(strlen(z->name) == n && memcmp(z->name, name, n) == 0))
        return NULL;
    return z;
}

/* --- reading the set --- */

typedef struct member {
    char *key;        /* member_key() */
    const char *name; /* as in the set (in the SMEMBERS reply) */
    bool canonical;   /* member_canonical() */
} member_t;

/* By key; within one key the member served first: the canonical one, else the smallest. */
static int member_cmp(const void *a, const void *b)
{
    const member_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    if (x->canonical != y->canonical)
        return x->canonical ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void set_zone_counts(redis_source_stats_t *st, void *arg)
{
    const size_t *v = arg;
    st->zones = v[0];
    st->failed = v[1];
}

static void set_zones_skipped(redis_source_stats_t *st, void *arg)
{
    st->zones_skipped = *(const size_t *)arg;
}

/* Names to put in one log line: up to NAMES_LOGGED of them, each escaped and quoted, then how
 * many more there are. Each cut to a few hundred bytes, so the line stays whole. */
typedef struct name_list {
    char text[NAMES_LOGGED * 260 + 32];
    size_t len, count;
} name_list_t;

static void names_add(name_list_t *l, const char *name)
{
    if (l->count++ >= NAMES_LOGGED)
        return;
    char esc[256];
    tern_escape(esc, sizeof(esc), name, strlen(name));
    int n =
        snprintf(l->text + l->len, sizeof(l->text) - l->len, "%s\"%s\"", l->len ? ", " : "", esc);
    if (n > 0)
        l->len = strlen(l->text);
}

static const char *names_text(name_list_t *l)
{
    if (l->count > NAMES_LOGGED)
        snprintf(l->text + l->len, sizeof(l->text) - l->len, " and %zu more",
                 l->count - NAMES_LOGGED);
    return l->text;
}

/* Set members that are no domain names: skipped, and logged when the last read did not have them
 * already. hash takes over this read's (n of them). */
static void bad_members_seen(redis_source_t *rs, uint64_t *hash, size_t n, size_t new_ones)
{
    if (new_ones > BAD_LABELS_LOGGED)
        log_err("%s: %zu more members of %s are no domain names; skipped", rs->where,
                new_ones - BAD_LABELS_LOGGED, rs->k_set);
    if (n)
        qsort(hash, n, sizeof(*hash), cmp_u64);
    free(rs->bad_members);
    rs->bad_members = hash;
    rs->nbad_members = n;
}

/* g[0] is served for zone z; g[1..n) name it too. An error naming them, once per such set. */
static void other_members(redis_source_t *rs, struct zst *z, const member_t *g, size_t n)
{
    uint64_t d = 0;
    for (size_t k = 1; k < n; k++)
        d += tern_hash64(g[k].name, strlen(g[k].name), 0x64757073ull) | 1;
    if (d == z->dups)
        return;
    z->dups = d;
    if (!d)
        return;
    name_list_t l = {0};
    for (size_t k = 1; k < n; k++)
        names_add(&l, g[k].name);
    char esc[ESC_MAX];
    log_err("%s: zone %s is named by %zu members of %s; serving \"%s\", ignoring %s (remove the "
            "others)",
            rs->where, z->origin, n, rs->k_set,
            tern_escape(esc, sizeof(esc), g[0].name, strlen(g[0].name)), names_text(&l));
}

/*
 * The members of the SMEMBERS reply that name zones, with their keys, sorted by member_cmp();
 * the others are skipped and logged (bad_members_seen()). 0 or E_CONN (out of memory).
 */
static int members_of(redis_source_t *rs, const redisReply *reply, member_t **out, size_t *nout)
{
    size_t n = reply->elements, nm = 0, nbad = 0, bad_new = 0;
    member_t *m = calloc(n ? n : 1, sizeof(*m));
    uint64_t *bad = calloc(n ? n : 1, sizeof(*bad));
    if (!m || !bad)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = reply->element[i];
        char key[DNAME_KEY_MAX];
        if (!is_str(e))
            continue;
        if (!member_key(e->str, e->len, key)) {
            uint64_t h = tern_hash64(e->str, e->len, 0x6261646dull);
            bad[nbad++] = h;
            char esc[ESC_MAX];
            if (!has_u64(rs->bad_members, rs->nbad_members, h) && bad_new++ < BAD_LABELS_LOGGED)
                log_err("%s: member \"%s\" of %s is no domain name; skipped", rs->where,
                        tern_escape(esc, sizeof(esc), e->str, e->len), rs->k_set);
            continue;
        }
        if (!(m[nm].key = strdup(key)))
            goto nomem;
        m[nm].name = e->str;
        m[nm++].canonical = member_canonical(e->str, key);
    }
    bad_members_seen(rs, bad, nbad, bad_new);
    qsort(m, nm, sizeof(*m), member_cmp);
    *out = m;
    *nout = nm;
    return 0;
nomem:
    for (size_t i = 0; m && i < nm; i++)
        free(m[i].key);
    free(m);
    free(bad);
    return redis_conn_fail(rs->conn, "out of memory");
}

/* The zones of the table that the set read as generation gen no longer names: forgotten, and
 * on_zone_gone for those handed out. 0 or E_CONN. */
static int drop_gone(redis_source_t *rs, uint64_t gen, size_t kept)
{
    if (rs->nzones <= kept)
        return 0;
    struct zst **gone = malloc((rs->nzones - kept) * sizeof(*gone));
    size_t ngone = 0;
    if (!gone)
        return redis_conn_fail(rs->conn, "out of memory");
    for (size_t b = 0; b < rs->nbucket; b++)
        for (struct zst *z = rs->bucket[b]; z; z = z->next)
            if (z->mark != gen)
                gone[ngone++] = z;
    for (size_t i = 0; i < ngone; i++) {
        struct zst *z = gone[i];
        log_info("%s: zone %s left the set%s", rs->where, z->origin,
                 z->served ? "; no longer served" : "");
        if (z->served)
            rs->cb.on_zone_gone(rs->cb.ctx, z->origin);
        zt_del(rs, z);
    }
    free(gone);
    return 0;
}

/* Zones of the set not read for max_zones: logged when their number changes, and a gauge. */
static void zones_skipped_now(redis_source_t *rs, size_t skipped, name_list_t *names)
{
    if (skipped == rs->zones_skipped)
        return;
    if (skipped)
        log_err("%s: %s names more zones than max_zones (%zu): %zu not read (%s); the zones "
                "read keep their place",
                rs->where, rs->k_set, rs->max_zones, skipped, names_text(names));
    else
        log_info("%s: every zone of %s is read again (max_zones %zu)", rs->where, rs->k_set,
                 rs->max_zones);
    rs->zones_skipped = skipped;
    redis_int_stats(rs, set_zones_skipped, &skipped);
}

/*
 * Make the table match the set members in reply (an array): add the new zones, drop the gone
 * ones (on_zone_gone for those handed out). *all gets every zone of the set, *added the new ones
 * (either may be NULL). Returns 0 or E_CONN (out of memory).
 */
static int reconcile(redis_source_t *rs, const redisReply *reply, struct zst ***all, size_t *nall,
                     struct zst ***added, size_t *nadded)
{
    size_t n = reply->elements, nm = 0, na = 0, nad = 0;
    member_t *m = NULL;
    struct zst **a = calloc(n ? n : 1, sizeof(*a)), **ad = calloc(n ? n : 1, sizeof(*ad));
    int rc = 0;
    if (!a || !ad) {
        rc = redis_conn_fail(rs->conn, "out of memory");
        goto out;
    }
    if ((rc = members_of(rs, reply, &m, &nm)) < 0)
        goto out;
    /* max_zones: the zones already read keep their place, new ones take what room is left, in
     * key order, so which zones are served does not change with the order Redis lists them in */
    size_t known = 0, skipped = 0;
    for (size_t i = 0; i < nm; i++)
        if ((i == 0 || strcmp(m[i].key, m[i - 1].key) != 0) && zt_find(rs, m[i].key))
            known++;
    size_t room = rs->max_zones > known ? rs->max_zones - known : 0;
    name_list_t over = {0};
    uint64_t gen = ++rs->gen;
    for (size_t i = 0, j; i < nm; i = j) {
        for (j = i + 1; j < nm && strcmp(m[j].key, m[i].key) == 0; j++)
            ; /* m[i .. j) name one zone; m[i] is served */
        struct zst *z = zt_find(rs, m[i].key);
        if (!z) {
            if (room == 0) {
                skipped++;
                names_add(&over, m[i].key);
                continue;
            }
            room--;
            if (!(z = zt_add(rs, m[i].name, m[i].key))) {
                rc = redis_conn_fail(rs->conn, "out of memory");
                goto out;
            }
            ad[nad++] = z;
        } else if (strcmp(z->name, m[i].name) != 0) {
            char *nm2 = strdup(m[i].name);
            if (!nm2) {
                rc = redis_conn_fail(rs->conn, "out of memory");
                goto out;
            }
            free(z->name);
            z->name = nm2; /* other keys now: read it as new, its data judged anew */
            z->have_digest = false;
            z->breach = 0;
            free(z->rep);
            z->rep = NULL;
            z->nrep = 0;
            ad[nad++] = z;
        }
        z->mark = gen;
        a[na++] = z;
        other_members(rs, z, m + i, j - i);
    }
    zones_skipped_now(rs, skipped, &over);
    rc = drop_gone(rs, gen, na);
out:
    for (size_t i = 0; i < nm; i++)
        free(m[i].key);
    free(m);
    if (rc == 0 && all) {
        *all = a;
        *nall = na;
        a = NULL;
    }
    if (rc == 0 && added) {
        *added = ad;
        *nadded = nad;
        ad = NULL;
    }
    free(a);
    free(ad);
    return rc;
}

/* SMEMBERS of the set. 0 with *out, 1 when Redis answered with an error (logged), or E_*. */
static int read_set(redis_source_t *rs, redisReply **out)
{
    const char *argv[] = {"SMEMBERS", rs->k_set, NULL};
    int rc = rs_run(rs, out, argv);
    if (rc < 0)
        return rc;
    if ((*out)->type != REDIS_REPLY_ARRAY) {
        log_err("%s: SMEMBERS %s: %s; the zones stay as they are", rs->where, rs->k_set,
                (*out)->type == REDIS_REPLY_ERROR ? (*out)->str : "unexpected reply");
        freeReplyObject(*out);
        *out = NULL;
        return 1;
    }
    return 0;
}

static void clear_dirty(redis_source_t *rs)
{
    for (size_t i = 0; i < rs->ndirty; i++)
        rs->dirty[i]->dirty = false;
    rs->ndirty = 0;
}

static void after_sync(redis_source_stats_t *st, void *arg)
{
    st->syncs++;
    st->last_sync_ms = *(int64_t *)arg;
}

/* A full read (force: rebuild everything) or a verify. */
int redis_sync_full(redis_source_t *rs, bool force)
{
    int64_t t0 = now_ms();
    rs->next_verify = rs->zone_reload ? t0 + rs->zone_reload : INT64_MAX;
    /* this read covers every event seen so far; later ones mark zones again */
    rs->set_dirty = false;
    rs->pending = false;
    clear_dirty(rs);
    redisReply *r;
    int rc = read_set(rs, &r);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    struct zst **all = NULL;
    size_t n = 0;
    rc = reconcile(rs, r, &all, &n, NULL, NULL);
    freeReplyObject(r);
    if (rc < 0)
        return rc;
    run_counts_t cnt = {0};
    rc = redis_read_process(rs, all, n, force ? RUN_FORCE : RUN_VERIFY, &cnt);
    size_t failed = 0;
    for (size_t i = 0; i < n; i++)
        failed += all[i]->failed;
    free(all);
    if (rc < 0)
        return rc;
    int64_t ms = now_ms() - t0;
    size_t counts[2] = {n, failed};
    redis_int_stats(rs, set_zone_counts, counts);
    redis_int_stats(rs, after_sync, &ms);
    log_info("%s: %s: %zu zones read in %lld ms, %zu built, %zu unchanged, %zu rejected", rs->where,
             !rs->synced ? "initial read"
             : force     ? "full rebuild"
                         : "verify",
             n, (long long)ms, cnt.built, cnt.unchanged, cnt.rejected);
    rs->synced = true;
    mem_arena_purge(rs->arena);
    if (rs->cb.on_synced)
        rs->cb.on_synced(rs->cb.ctx, n, failed);
    return 0;
}

/* Re-read what the events since the last read touched. */
int redis_sync_flush(redis_source_t *rs)
{
    int64_t t0 = now_ms();
    rs->pending = false;
    struct zst **added = NULL;
    size_t nadded = 0;
    int rc;
    if (rs->set_dirty) {
        rs->set_dirty = false;
        redisReply *r;
        if ((rc = read_set(rs, &r)) < 0)
            return rc;
        if (rc == 0) {
            rc = reconcile(rs, r, NULL, NULL, &added, &nadded);
            freeReplyObject(r);
            if (rc < 0)
                return rc;
        }
    }
    /* the list to read: new zones, then dirty ones not already listed */
    size_t n = 0;
    struct zst **list = malloc((nadded + rs->ndirty + 1) * sizeof(*list));
    if (!list) {
        free(added);
        return redis_conn_fail(rs->conn, "out of memory");
    }
    uint64_t gen = ++rs->gen;
    for (size_t i = 0; i < nadded; i++) {
        added[i]->mark = gen;
        list[n++] = added[i];
    }
    for (size_t i = 0; i < rs->ndirty; i++) {
        struct zst *z = rs->dirty[i];
        z->dirty = false;
        /* a writer that names the labels it changed names them all: its keyspace events in
         * the same window are those changes, patched below, not a reason to read it whole */
        if (z->nplab && z->served && rs->cb.on_patch)
            continue;
        if (z->mark != gen) {
            z->mark = gen;
            list[n++] = z;
        }
    }
    rs->ndirty = 0;
    free(added);
    run_counts_t cnt = {0};
    rc = redis_read_process(rs, list, n, RUN_DIRTY, &cnt);
    free(list);
    if (rc < 0)
        return rc;
    /* labels named on the change channel: patches, unless their zone was just read whole */
    size_t npatch = rs->nldirty;
    for (size_t i = 0; i < rs->nldirty && rc == 0; i++) {
        struct zst *z = rs->ldirty[i];
        if (z->mark == gen)
            redis_sync_plab_clear(z);
        else
            rc = redis_read_patch(rs, z);
    }
    rs->nldirty = 0;
    if (rc < 0)
        return rc;
    if (npatch && !n)
        return 0;
    size_t counts[2] = {rs->nzones, 0};
    for (size_t b = 0; b < rs->nbucket; b++)
        for (struct zst *z = rs->bucket[b]; z; z = z->next)
            counts[1] += z->failed;
    redis_int_stats(rs, set_zone_counts, counts);
    if (cnt.built)
        mem_arena_purge(rs->arena);
    if (cnt.built || cnt.rejected)
        log_info("%s: changes: %zu zones re-read, %zu built, %zu rejected in %lld ms", rs->where, n,
                 cnt.built, cnt.rejected, (long long)(now_ms() - t0));
    return 0;
}
