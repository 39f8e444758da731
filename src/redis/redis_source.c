/*
 * redis_source.c — see redis_source.h. One thread drives two non-blocking hiredis connections with
 * poll(2), beside a wakeup eventfd, so no wait is ever longer than the read timeout and none
 * outlives a stop request. Zones are read in pipelined batches and built with zone_json.
 */
#include "tern/redis/redis_source.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"
#include "tern/common/mem.h"
#include "tern/wire/dname.h"

#include "redis_sentinel.h"
#include "zone_sign.h"

/* Zones per pipelined batch of a full read: one round trip per 64 zones instead of two per zone
 * (10,000 small zones read in ~160 round trips), while the replies in flight stay a few MB. */
#define BATCH_ZONES 64

/* HSCAN COUNT. Redis answers one call in about 1.6 ms (bench/redis_load.sh, 1,000,000 labels),
 * so a huge zone is read in about 1000 short commands, each leaving room for other clients. A
 * hash of up to about 1000 fields comes back whole from the first call, which is pipelined with
 * the zone's GET. */
#define SCAN_COUNT "1000"

/* Coalescing of change events: a zone is re-read once its events pause for QUIET_MS, and at the
 * latest MAX_DELAY_MS after the first one, so 200 quick HSETs cost one or two rebuilds and a
 * steady stream of writes still shows up twice a second. */
#define QUIET_MS     50
#define MAX_DELAY_MS 500

/* Reconnect backoff: quick for a Redis restart, at most one attempt per 5 s for a long outage. */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

/* With Sentinel, a reconnect is one SENTINEL query and one connect, and the wait for a failover
 * (down-after-milliseconds plus an election: seconds) is when it matters: retry at least once a
 * second, not every 5 s. */
#define SENTINEL_BACKOFF_MAX_MS 1000

/* With Sentinel, while connected, the sentinels are asked this often whether the node read is
 * still the one to read (one SENTINEL command; two for read_from replica): a failover that does
 * not break the connection (the old primary still up, demoted) is followed within this. */
#define SENTINEL_CHECK_MS 2000

/* After this long without traffic a connection is PINGed: a Redis that vanished without closing
 * the socket (a host gone, a partition) is noticed within PING_IDLE_MS + the read timeout. */
#define PING_IDLE_MS 15000

/* New bad labels (or set members) logged one per line in one build (or read); the rest are
 * counted in one line, so a zone full of bad labels cannot flood the log. */
#define BAD_LABELS_LOGGED 10

/* Other members naming one zone, and zones beyond max_zones, named in their one log line. */
#define NAMES_LOGGED 3

/* Untrusted text (a set member, a label) in a log line: tern_escape() into a buffer this large,
 * enough for a whole domain name in presentation form. */
#define ESC_MAX 1024

/* Zone builds yield to the DNS workers when they share a CPU, as the loader's do. */
#define SOURCE_NICE 10

/* Internal outcomes of a Redis exchange besides 0. */
#define E_STOP (-ECANCELED)  /* stop() was called */
#define E_CONN (-ECONNRESET) /* the connection is unusable; rs->why says why */

/* Breaches of a zone's bounds that reject its version, logged once while they last (zst). */
#define ZB_OVER_LABELS 1u /* more than max_labels */
#define ZB_BIG_CONFIG  2u /* a config over max_value_bytes */

/* Labels already seen in one multi-call HSCAN (which may return a field twice). */
typedef struct seen {
    uint64_t *hash;
    uint32_t *off; /* into buf, + 1; 0 = empty slot */
    uint64_t *dig; /* per slot: digest_label() of the label's value */
    size_t mask, n;
    char *buf;
    size_t len, cap;
} seen_t;

static void seen_free(seen_t *s)
{
    free(s->hash);
    free(s->off);
    free(s->dig);
    free(s->buf);
    memset(s, 0, sizeof(*s));
}

static int seen_grow(seen_t *s)
{
    size_t n = s->mask ? (s->mask + 1) * 2 : 4096;
    uint64_t *h = malloc(n * sizeof(*h));
    uint32_t *o = calloc(n, sizeof(*o));
    uint64_t *d = malloc(n * sizeof(*d));
    if (!h || !o || !d) {
        free(h);
        free(o);
        free(d);
        return TERN_ENOMEM;
    }
    for (size_t i = 0; s->mask && i <= s->mask; i++) {
        if (!s->off[i])
            continue;
        size_t j = s->hash[i] & (n - 1);
        while (o[j])
            j = (j + 1) & (n - 1);
        h[j] = s->hash[i];
        o[j] = s->off[i];
        d[j] = s->dig[i];
    }
    free(s->hash);
    free(s->off);
    free(s->dig);
    s->hash = h;
    s->off = o;
    s->dig = d;
    s->mask = n - 1;
    return 0;
}

/* The slot of label (len bytes), or -1. */
static long seen_find(const seen_t *s, const char *label, size_t len)
{
    if (!s->mask)
        return -1;
    uint64_t h = tern_hash64(label, len, 0x7365656eull);
    for (size_t j = h & s->mask; s->off[j]; j = (j + 1) & s->mask) {
        const char *l = s->buf + s->off[j] - 1;
        if (s->hash[j] == h && strlen(l) == len && memcmp(l, label, len) == 0)
            return (long)j;
    }
    return -1;
}

/* 1 if label (len bytes) is new (and remembers it, its slot in *slot), 0 if seen, TERN_ENOMEM. */
static int seen_add(seen_t *s, const char *label, size_t len, size_t *slot)
{
    if ((s->n + 1) * 2 > (s->mask ? s->mask + 1 : 0) && seen_grow(s) < 0)
        return TERN_ENOMEM;
    uint64_t h = tern_hash64(label, len, 0x7365656eull);
    size_t j = h & s->mask;
    for (; s->off[j]; j = (j + 1) & s->mask) {
        if (s->hash[j] != h)
            continue;
        const char *l = s->buf + s->off[j] - 1;
        if (strlen(l) == len && memcmp(l, label, len) == 0)
            return 0;
    }
    if (s->len + len + 1 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 65536;
        while (cap < s->len + len + 1)
            cap *= 2;
        if (cap > UINT32_MAX)
            return TERN_ENOMEM;
        char *b = realloc(s->buf, cap);
        if (!b)
            return TERN_ENOMEM;
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, label, len);
    s->buf[s->len + len] = '\0';
    s->hash[j] = h;
    s->off[j] = (uint32_t)s->len + 1;
    s->dig[j] = 0;
    *slot = j;
    s->len += len + 1;
    s->n++;
    return 1;
}

/* One zone of the set. Keyed by origin; name is the set member the keys are built from. */
struct zst {
    char *name;   /* as in the set: "example.com." (untrusted: tern_escape() it for logs) */
    char *origin; /* its canonical key (dname_key): "example.com" ("." for the root) */
    uint64_t digest;
    bool have_digest; /* digest is that of the last version built or rejected */
    bool failed;      /* the last version read was rejected */
    bool served;      /* handed out by on_zone and not gone since */
    bool dirty;       /* in rs->dirty */
    uint64_t mark;    /* generation of the last set read / run that listed it */
    uint64_t dups;    /* digest of the other members naming this zone, as last logged; 0 none */
    unsigned breach;  /* ZB_* logged for the last version (cleared by one without) */
    uint64_t *rep;    /* label breaches logged at the last build (label_report()), sorted */
    size_t nrep;
    uint64_t cfg_digest; /* of the config (and keys) the last version was built with */
    seen_t *lt;  /* a large zone's labels with their digests, as last built or patched (diff) */
    char **plab; /* labels named on the change channel since the last flush */
    size_t nplab, capplab;
    struct zst *next; /* hash chain */
};

/* How process() treats a zone whose digest has not changed. */
typedef enum {
    RUN_VERIFY, /* skip it; read a large zone once for its digest before building */
    RUN_DIRTY,  /* skip it, but build a large zone in the same pass that computes its digest */
    RUN_FORCE,  /* build and hand out every zone */
} run_mode_t;

struct redis_source {
    /* configuration (owned copies) */
    char *host, *unix_path, *password, *prefix, *suffix;
    uint16_t port;
    unsigned db;
    int64_t connect_timeout, read_timeout, zone_reload; /* ms; zone_reload 0 = never */
    zone_json_opts_t json;
    unsigned dnssec_workers; /* signed zones: their workers and signature policy */
    dnssec_policy_t dnssec_policy;
    redis_source_callbacks_t cb;
    char *where; /* "redis://host:port/db", for messages and zone sources */
    /* Sentinel (nsentinels > 0): where to ask for the node; host and port are then unused */
    redis_node_t *sentinels;
    size_t nsentinels;
    char *master, *sentinel_password;
    bool read_replica;
    unsigned replica_start; /* per-process random start among the usable replicas */
    char *k_set;            /* P redins:zones S */
    char *ks_prefix;        /* "__keyspace@<db>__:" */
    char *k_pattern;        /* the keyspace channel pattern */
    char *channel;          /* the change channel, or NULL */
    size_t plen, slen;      /* strlen(prefix), strlen(suffix) */
    size_t max_value_bytes, max_labels, max_zones; /* bounds (json.max_rrset_records: the 4th) */

    /* shared with other threads */
    pthread_t thread;
    int wakefd;
    atomic_bool stop;
    atomic_int resync; /* 0 none, 1 verify, 2 force */
    pthread_mutex_t mu;
    redis_source_stats_t stats;

    /* source thread only */
    redisContext *cmd, *sub;
    redisContext *sen;    /* Sentinel: the connection to the sentinel that answered last */
    redis_node_t node;    /* Sentinel: the node connected to (or last chosen) */
    bool node_set;        /* node holds a node */
    bool node_replica;    /* node is a replica (read_from replica and one was usable) */
    bool no_replica_said; /* "no usable replica" was logged (until one is usable again) */
    char sen_down[256];   /* the last sentinel failure logged while connected, "" if none */
    int64_t next_sen_check;
    bool up;
    int64_t backoff, next_connect;
    char why[256];         /* why the last exchange failed */
    char last_down[256];   /* the last connect failure logged, "" if none since the last success */
    bool notify_warned;    /* a warning about notify-keyspace-events was logged ... */
    char notify_value[64]; /* ... for this value ("?" when unreadable) */
    int64_t cmd_last, sub_last; /* last traffic, for the idle PINGs */
    bool sub_ping_out;
    int64_t sub_ping_at;
    unsigned sub_confirm; /* subscribe confirmations received */
    int64_t next_verify;
    bool synced; /* a full read has finished */

    struct zst **bucket;
    size_t nbucket, nzones;
    uint64_t gen;
    uint64_t *bad_members; /* hashes of the unparsable members logged at the last read, sorted */
    size_t nbad_members;
    size_t zones_skipped; /* beyond max_zones at the last read (logged when it changes) */

    struct zst **dirty;
    size_t ndirty, capdirty;
    struct zst **ldirty; /* zones with labels named on the change channel (plab) */
    size_t nldirty, capldirty;
    bool set_dirty, pending;
    int64_t first_ev, last_ev;
    unsigned arena;
};

static int64_t now_ms(void)
{
    return tern_monotonic_ms();
}

static bool stopping(redis_source_t *rs)
{
    return atomic_load_explicit(&rs->stop, memory_order_acquire);
}

static void stats_update(redis_source_t *rs, void (*fn)(redis_source_stats_t *, void *), void *arg)
{
    pthread_mutex_lock(&rs->mu);
    fn(&rs->stats, arg);
    pthread_mutex_unlock(&rs->mu);
}

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
static void plab_clear(struct zst *z)
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

static void zt_del(redis_source_t *rs, struct zst *z)
{
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
    free(z->name);
    free(z->origin);
    free(z->rep);
    plab_clear(z);
    free(z->plab);
    if (z->lt)
        seen_free(z->lt);
    free(z->lt);
    free(z);
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

static void mark_dirty(redis_source_t *rs, struct zst *z)
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
        plab_clear(z);
        mark_dirty(rs, z);
        return;
    }
    rs->ldirty[rs->nldirty++] = z;
}

/* The zone named name (n bytes), whatever its spelling; with exact, only when name is the very
 * member it is read from (the keys of another member of the same zone are not its data). */
static struct zst *zone_by_name(redis_source_t *rs, const char *name, size_t n, bool exact)
{
    char key[DNAME_KEY_MAX];
    if (!member_key(name, n, key))
        return NULL;
    struct zst *z = zt_find(rs, key);
    if (z && exact && !(strlen(z->name) == n && memcmp(z->name, name, n) == 0))
        return NULL;
    return z;
}

/* redins' DNSSEC keys of a zone: "<zone>:zsk:pub" etc. (the order of key_replies()). */
static const char *const key_suffixes[4] = {":zsk:pub", ":zsk:priv", ":ksk:pub", ":ksk:priv"};

/* Whether the part of a key after "<zone>" (from its ':', len bytes) names a key of the zone. */
static bool is_zone_suffix(const char *s, size_t len)
{
    if (len == sizeof(":config") - 1 && memcmp(s, ":config", len) == 0)
        return true;
    for (size_t i = 0; i < 4; i++)
        if (len == strlen(key_suffixes[i]) && memcmp(s, key_suffixes[i], len) == 0)
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
    struct zst *z = zone_by_name(rs, in, colon ? (size_t)(colon - in) : n, true);
    if (z)
        mark_dirty(rs, z); /* a zone not (yet) in the set is read when the set names it */
}

/* Labels a zone may have pending from the change channel before a full read is cheaper. */
#define PLAB_MAX 65536

static void ldirty_add(redis_source_t *rs, struct zst *z);

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
            plab_clear(z);
            mark_dirty(rs, z);
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
        struct zst *z = zone_by_name(rs, msg, (size_t)(sp - msg), false);
        if (z && z->served) {
            on_label_message(rs, z, sp + 1, msg + len);
            touch(rs);
            return;
        }
        len = (size_t)(sp - msg); /* a zone not served yet: read it whole */
    }
    /* the name may have been added to or removed from the set with it */
    rs->set_dirty = true;
    touch(rs);
    struct zst *z = zone_by_name(rs, msg, len, false); /* a writer may spell it another way */
    if (z)
        mark_dirty(rs, z);
}

static bool is_str(const redisReply *r)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
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

/* --- connections --- */

static int fail(redis_source_t *rs, const char *fmt, ...) TERN_PRINTF(2, 3);

static int fail(redis_source_t *rs, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rs->why, sizeof(rs->why), fmt, ap);
    va_end(ap);
    return E_CONN;
}

static void drain_wake(redis_source_t *rs)
{
    uint64_t v;
    ssize_t n = read(rs->wakefd, &v, sizeof(v));
    (void)n; /* EAGAIN: already drained; the flags are what matter */
}

/* Read what the subscriber connection has and act on every complete reply. */
static int sub_drain(redis_source_t *rs)
{
    if (redisBufferRead(rs->sub) != REDIS_OK)
        return fail(rs, "subscriber connection: %s", rs->sub->errstr);
    for (;;) {
        void *r = NULL;
        if (redisGetReplyFromReader(rs->sub, &r) != REDIS_OK)
            return fail(rs, "subscriber connection: %s", rs->sub->errstr);
        if (!r)
            break;
        on_sub_reply(rs, r);
        freeReplyObject(r);
    }
    rs->sub_last = now_ms();
    return 0;
}

/*
 * The next reply on c, writing its pending commands first. Waits at most read_timeout without
 * progress; meanwhile drains the subscriber connection (when c is the command connection) and
 * returns E_STOP as soon as stop() is called.
 */
static int get_reply(redis_source_t *rs, redisContext *c, redisReply **out)
{
    const char *what = c == rs->sub   ? "subscriber connection"
                       : c == rs->sen ? "sentinel connection"
                                      : "connection";
    int64_t deadline = now_ms() + rs->read_timeout;
    *out = NULL;
    for (;;) {
        void *r = NULL;
        if (redisGetReplyFromReader(c, &r) != REDIS_OK)
            return fail(rs, "%s: %s", what, c->errstr);
        if (r) {
            *out = r;
            if (c == rs->cmd)
                rs->cmd_last = now_ms();
            return 0;
        }
        int done = 1;
        if (sdslen(c->obuf) > 0 && redisBufferWrite(c, &done) != REDIS_OK)
            return fail(rs, "%s: %s", what, c->errstr);
        struct pollfd p[3] = {
            {.fd = rs->wakefd, .events = POLLIN},
            {.fd = c->fd, .events = (short)(POLLIN | (done ? 0 : POLLOUT))},
        };
        nfds_t n = 2;
        if (rs->sub && c != rs->sub)
            p[n++] = (struct pollfd){.fd = rs->sub->fd, .events = POLLIN};
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return fail(rs, "%s: no reply within %lld ms (read_timeout)", what,
                        (long long)rs->read_timeout);
        if (poll(p, n, (int)left) < 0) {
            if (errno == EINTR)
                continue;
            return fail(rs, "poll: %s", strerror(errno));
        }
        if (p[0].revents) {
            drain_wake(rs);
            if (stopping(rs))
                return E_STOP;
        }
        if (n == 3 && p[2].revents) {
            int rc = sub_drain(rs);
            if (rc < 0)
                return rc;
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (redisBufferRead(c) != REDIS_OK)
                return fail(rs, "%s: %s", what, c->errstr);
            deadline = now_ms() + rs->read_timeout;
        }
    }
}

/* Queue one command (argv of NUL-terminated strings, NULL-terminated). */
static int append(redis_source_t *rs, redisContext *c, const char *const *argv)
{
    int argc = 0;
    size_t len[8];
    while (argv[argc]) {
        len[argc] = strlen(argv[argc]);
        argc++;
    }
    if (redisAppendCommandArgv(c, argc, (const char **)argv, len) != REDIS_OK)
        return fail(rs, "cannot queue a command: %s", c->errstr);
    return 0;
}

/* Run one command and return its reply (error replies included: the caller decides). */
static int run(redis_source_t *rs, redisContext *c, redisReply **out, const char *const *argv)
{
    int rc = append(rs, c, argv);
    return rc < 0 ? rc : get_reply(rs, c, out);
}

static void conn_close(redis_source_t *rs)
{
    if (rs->cmd)
        redisFree(rs->cmd);
    if (rs->sub)
        redisFree(rs->sub);
    rs->cmd = rs->sub = NULL;
}

static void sen_close(redis_source_t *rs)
{
    if (rs->sen)
        redisFree(rs->sen);
    rs->sen = NULL;
}

/* Open one connection within connect_timeout (non-blocking connect, waited on with poll), to
 * unix_path if set, else to host:port. */
static int conn_open(redis_source_t *rs, const char *host, uint16_t port, const char *unix_path,
                     redisContext **out)
{
    redisContext *c =
        unix_path ? redisConnectUnixNonBlock(unix_path) : redisConnectNonBlock(host, port);
    *out = NULL;
    if (!c)
        return fail(rs, "out of memory");
    if (c->err) {
        fail(rs, "%s", c->errstr);
        redisFree(c);
        return E_CONN;
    }
    int64_t deadline = now_ms() + rs->connect_timeout;
    for (;;) {
        struct pollfd p[2] = {{.fd = rs->wakefd, .events = POLLIN},
                              {.fd = c->fd, .events = POLLOUT}};
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            redisFree(c);
            return fail(rs, "connect: no answer within %lld ms (connect_timeout)",
                        (long long)rs->connect_timeout);
        }
        if (poll(p, 2, (int)left) < 0) {
            if (errno == EINTR)
                continue;
            redisFree(c);
            return fail(rs, "poll: %s", strerror(errno));
        }
        if (p[0].revents) {
            drain_wake(rs);
            if (stopping(rs)) {
                redisFree(c);
                return E_STOP;
            }
        }
        if (p[1].revents)
            break;
    }
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
        soerr = errno;
    if (soerr) {
        redisFree(c);
        return fail(rs, "connect: %s", strerror(soerr));
    }
    if (!unix_path)
        (void)redisEnableKeepAlive(c);
    *out = c;
    return 0;
}

/* Run a command whose reply must not be an error; what names it in the message. */
static int run_ok(redis_source_t *rs, redisContext *c, const char *what, const char *const *argv)
{
    redisReply *r;
    int rc = run(rs, c, &r, argv);
    if (rc < 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR) {
        fail(rs, "%s: %s", what, r->str);
        rc = E_CONN;
    }
    freeReplyObject(r);
    return rc;
}

/* Check notify-keyspace-events; warn (once per distinct value) when changes would be missed. */
static bool check_notifications(redis_source_t *rs)
{
    redisReply *r;
    const char *argv[] = {"CONFIG", "GET", "notify-keyspace-events", NULL};
    if (run(rs, rs->cmd, &r, argv) < 0)
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
                 rs->nsentinels ? (rs->node_replica
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

/* Greet a fresh connection: AUTH, SELECT (command connection only), PING. */
static int greet(redis_source_t *rs, redisContext *c, bool select_db)
{
    int rc;
    if (rs->password) {
        const char *auth[] = {"AUTH", rs->password, NULL};
        if ((rc = run_ok(rs, c, "AUTH", auth)) < 0)
            return rc;
    }
    if (select_db && rs->db) {
        char db[16];
        snprintf(db, sizeof(db), "%u", rs->db);
        const char *sel[] = {"SELECT", db, NULL};
        if ((rc = run_ok(rs, c, "SELECT", sel)) < 0)
            return rc;
    }
    /* an error here (LOADING after a restart, NOAUTH) means "not ready yet": retry later */
    const char *ping[] = {"PING", NULL};
    return run_ok(rs, c, "PING", ping);
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

/* --- Sentinel --- */

/* Run one command on a sentinel: the one that answered last, else each in the configured order
 * (connect, AUTH with sentinel_password). The reply may be an error reply (the caller decides);
 * E_CONN when no sentinel answered, rs->why naming the last failure. */
static int sen_run(redis_source_t *rs, redisReply **out, const char *const *argv)
{
    int rc = E_CONN;
    for (size_t i = 0; i <= rs->nsentinels; i++) {
        if (!rs->sen) {
            if (i == rs->nsentinels)
                break;
            const redis_node_t *s = &rs->sentinels[i];
            if ((rc = conn_open(rs, s->host, s->port, NULL, &rs->sen)) < 0) {
                if (rc == E_STOP)
                    return rc;
                continue;
            }
            if (rs->sentinel_password) {
                const char *auth[] = {"AUTH", rs->sentinel_password, NULL};
                if ((rc = run_ok(rs, rs->sen, "sentinel AUTH", auth)) < 0) {
                    sen_close(rs);
                    if (rc == E_STOP)
                        return rc;
                    continue;
                }
            }
        }
        if ((rc = run(rs, rs->sen, out, argv)) == 0)
            return 0;
        sen_close(rs);
        if (rc == E_STOP)
            return rc;
    }
    char why[sizeof(rs->why)];
    snprintf(why, sizeof(why), "%s", rs->why);
    return fail(rs, "no sentinel answered (last: %s)", why);
}

/* Ask the sentinels for the node to read: the primary of master, or for read_from replica a
 * usable replica (the current one while it stays usable), else the primary (logged). */
static int discover(redis_source_t *rs, redis_node_t *out, bool *replica)
{
    const char *get[] = {"SENTINEL", "get-master-addr-by-name", rs->master, NULL};
    redisReply *r;
    int rc = sen_run(rs, &r, get);
    if (rc < 0)
        return rc;
    bool ok = redis_sentinel_master(r, out);
    freeReplyObject(r);
    if (!ok) {
        sen_close(rs); /* this sentinel does not know master: ask the next one next time */
        return fail(rs, "Sentinel does not know a primary named \"%s\"", rs->master);
    }
    *replica = false;
    if (!rs->read_replica)
        return 0;
    const char *list[] = {"SENTINEL", "replicas", rs->master, NULL};
    if ((rc = sen_run(rs, &r, list)) < 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR) { /* Redis before 5: "slaves" */
        freeReplyObject(r);
        const char *old[] = {"SENTINEL", "slaves", rs->master, NULL};
        if ((rc = sen_run(rs, &r, old)) < 0)
            return rc;
    }
    redis_node_t pick;
    size_t n = redis_sentinel_pick_replica(r, rs->node_set && rs->node_replica ? &rs->node : NULL,
                                           rs->replica_start, &pick);
    freeReplyObject(r);
    char buf[INET6_ADDRSTRLEN + 8];
    if (n == 0) {
        if (!rs->no_replica_said)
            log_warn("%s: Sentinel names no usable replica of %s; reading from the primary %s "
                     "until one is",
                     rs->where, rs->master, redis_node_text(out, buf, sizeof(buf)));
        rs->no_replica_said = true;
        return 0;
    }
    rs->no_replica_said = false;
    *out = pick;
    *replica = true;
    return 0;
}

/* A primary must say so (a sentinel that has not seen a failover yet may name the demoted one):
 * ROLE's first element is "master". A Redis without ROLE (before 2.8.12) is taken at its word. */
static int check_role(redis_source_t *rs)
{
    const char *role[] = {"ROLE", NULL};
    redisReply *r;
    int rc = run(rs, rs->cmd, &r, role);
    if (rc < 0)
        return rc;
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 && is_str(r->element[0]) &&
        strcmp(r->element[0]->str, "master") != 0) {
        char buf[INET6_ADDRSTRLEN + 8];
        fail(rs, "%s is a %s, not the primary Sentinel named (a failover in progress?)",
             redis_node_text(&rs->node, buf, sizeof(buf)), r->element[0]->str);
        rc = E_CONN;
    }
    freeReplyObject(r);
    return rc;
}

/* While connected: whether Sentinel still names the node read. E_CONN (and rs->why) when it
 * names another: the caller reconnects, through discover(). Sentinels out of reach are logged
 * once and change nothing: the node read is still up. */
static int sentinel_check(redis_source_t *rs)
{
    redis_node_t n;
    bool replica;
    rs->next_sen_check = now_ms() + SENTINEL_CHECK_MS;
    int rc = discover(rs, &n, &replica);
    if (rc == E_STOP)
        return rc;
    if (rc < 0) {
        if (strcmp(rs->sen_down, rs->why) != 0)
            log_warn("%s: cannot ask Sentinel (%s); staying on the node read", rs->where, rs->why);
        snprintf(rs->sen_down, sizeof(rs->sen_down), "%s", rs->why);
        return 0;
    }
    if (rs->sen_down[0])
        log_info("%s: Sentinel answers again", rs->where);
    rs->sen_down[0] = '\0';
    if (redis_node_same(&n, &rs->node) && replica == rs->node_replica)
        return 0;
    char why[3 * REDIS_NODE_TEXT_MAX + 64];
    return fail(
        rs, "%s, moving",
        redis_sentinel_move_text(why, sizeof(why), &n, replica, &rs->node, rs->node_replica));
}

/* Both connections, subscribed, or E_CONN / E_STOP with both closed. */
static int connect_all(redis_source_t *rs)
{
    int rc;
    const char *host = rs->host;
    uint16_t port = rs->port;
    rs->why[0] = '\0';
    if (rs->nsentinels) {
        bool replica = false;
        if ((rc = discover(rs, &rs->node, &replica)) < 0)
            return rc;
        rs->node_set = true;
        rs->node_replica = replica;
        host = rs->node.host;
        port = rs->node.port;
        rs->next_sen_check = now_ms() + SENTINEL_CHECK_MS;
    }
    if ((rc = conn_open(rs, host, port, rs->unix_path, &rs->cmd)) < 0 ||
        (rc = greet(rs, rs->cmd, true)) < 0 ||
        (rs->nsentinels && !rs->node_replica && (rc = check_role(rs)) < 0) ||
        (rc = conn_open(rs, host, port, rs->unix_path, &rs->sub)) < 0 ||
        (rc = greet(rs, rs->sub, false)) < 0)
        goto fail;
    const char *psub[] = {"PSUBSCRIBE", rs->k_pattern, NULL};
    const char *sub[] = {"SUBSCRIBE", rs->channel, NULL};
    rs->sub_confirm = 0;
    if ((rc = append(rs, rs->sub, psub)) < 0 ||
        (rs->channel && (rc = append(rs, rs->sub, sub)) < 0))
        goto fail;
    unsigned want = rs->channel ? 2 : 1;
    while (rs->sub_confirm < want) {
        redisReply *r;
        if ((rc = get_reply(rs, rs->sub, &r)) < 0)
            goto fail;
        if (r->type == REDIS_REPLY_ERROR) {
            fail(rs, "PSUBSCRIBE: %s", r->str);
            freeReplyObject(r);
            rc = E_CONN;
            goto fail;
        }
        on_sub_reply(rs, r);
        freeReplyObject(r);
    }
    bool notify = check_notifications(rs);
    stats_update(rs, set_notifications, &notify);
    rs->cmd_last = rs->sub_last = now_ms();
    rs->sub_ping_out = false;
    return 0;
fail:
    conn_close(rs);
    return rc;
}

/* --- building zones --- */

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
    size_t labels;       /* read so far; past max_labels the read stops */
    size_t bad;          /* labels skipped */
    size_t bad_new;      /* of those, not reported by the zone's last build: logged */
    int rc;              /* TERN_ENOMEM aborts */
    bool rejected;       /* set by zb_end() */
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
    seen_free(&b->seen);
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

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool has_u64(const uint64_t *sorted, size_t n, uint64_t v)
{
    return n && bsearch(&v, sorted, n, sizeof(v), cmp_u64);
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

/* A zone whose config says "dnssec": true: its keys from the MGET reply of redins' four key
 * strings (zsk pub, priv, ksk pub, priv), the signing state, and the DNSKEYs for the build. */
static void zb_keys(zbuild_t *b, const redisReply *keys)
{
    redis_source_t *rs = b->rs;
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
    uint8_t dnskeys[ZONE_SIGN_DNSKEYS_MAX];
    size_t len = 0;
    char err[768];
    const char *const whr[2] = {where[0], where[1]};
    if (zone_sign_prepare_redins(b->z->name, pub, priv, whr, rs->dnssec_workers, &rs->dnssec_policy,
                                 &b->dz, dnskeys, &len, err, sizeof(err)) < 0) {
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
static void zb_config(zbuild_t *b, const redisReply *cfg, const redisReply *keys)
{
    redis_source_t *rs = b->rs;
    b->cfg_digest = digest_config(cfg);
    for (size_t i = 0; keys && keys->type == REDIS_REPLY_ARRAY && i < keys->elements; i++)
        b->cfg_digest += digest_config(keys->element[i]) * (i + 3); /* a changed key rebuilds */
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
    } else if (b->zj && zone_json_dnssec(b->zj)) {
        zb_keys(b, keys);
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
            rc = zone_sign_attach(zone, b->dz, err, sizeof(err));
            b->dz = NULL; /* the zone owns it, or it is freed */
            if (rc < 0) {
                zone_free(zone);
                zone = NULL;
                snprintf(b->err, sizeof(b->err), "%s: %s", rs->where, err);
            }
        }
    }
    dnssec_zone_free(b->dz);
    b->dz = NULL;
    zb_keep_reports(b, whole);
    /* a zone-level breach is logged and counted when it appears, not at each version with it */
    unsigned fresh = b->breach & ~z->breach;
    z->breach = b->breach;
    uint64_t counts[3] = {b->over_value + !!(fresh & ZB_BIG_CONFIG), !!(fresh & ZB_OVER_LABELS),
                          b->over_rrset};
    if (counts[0] || counts[1] || counts[2])
        stats_update(rs, add_breaches, counts);
    bool same = z->have_digest && z->digest == b->digest;
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
    stats_update(rs, add_build, b);
    if (!zone) {
        z->failed = true;
        if (!b->breach || fresh)
            log_err("%s; %s", b->err,
                    z->served ? "the previous version stays" : "the zone is not served");
        else
            log_debug("%s; still", b->err);
        return 2;
    }
    z->failed = false;
    z->served = true;
    z->cfg_digest = b->cfg_digest;
    log_debug("%s: zone %s: built, serial %u, %zu labels, %zu records", rs->where, z->origin,
              zone->serial, b->labels, zone->rr_count);
    rs->cb.on_zone(rs->cb.ctx, z->origin, zone);
    return 1;
}

/* Counts of one run, for the summary line. */
typedef struct run_counts {
    size_t built, rejected, unchanged;
} run_counts_t;

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
    long o = seen_find(b->old, k->str, k->len);
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

/* P redins:zones:<name>[:config] S */
static char *redis_zone_key(const redis_source_t *rs, const char *name, bool config)
{
    size_t n = rs->plen + sizeof("redins:zones:") + strlen(name) + sizeof(":config") + rs->slen;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "%sredins:zones:%s%s%s", rs->prefix, name, config ? ":config" : "",
                 rs->suffix);
    return k;
}

/* Queue MGET of the zone's four DNSSEC key strings (P redins:zones:<name>:zsk:pub S, ...):
 * one more command per zone in the pipeline, read whether or not the config wants them, so a
 * zone turned to "dnssec": true needs no second round trip. */
static int append_keys(redis_source_t *rs, const char *name)
{
    char *k[4] = {NULL, NULL, NULL, NULL};
    int rc = 0;
    for (size_t i = 0; i < 4 && rc == 0; i++) {
        size_t n = rs->plen + sizeof("redins:zones:") + strlen(name) + 16 + rs->slen;
        if (!(k[i] = malloc(n)))
            rc = fail(rs, "out of memory");
        else
            snprintf(k[i], n, "%sredins:zones:%s%s%s", rs->prefix, name, key_suffixes[i],
                     rs->suffix);
    }
    if (rc == 0) {
        const char *mget[] = {"MGET", k[0], k[1], k[2], k[3], NULL};
        rc = append(rs, rs->cmd, mget);
    }
    for (size_t i = 0; i < 4; i++)
        free(k[i]);
    return rc;
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
    redisReply *keys = NULL;
    if ((rc = append(rs, rs->cmd, get)) < 0 || (rc = append_keys(rs, b->z->name)) < 0 ||
        (rc = append(rs, rs->cmd, scan0)) < 0 || (rc = get_reply(rs, rs->cmd, &r)) < 0)
        goto out;
    if ((rc = get_reply(rs, rs->cmd, &keys)) < 0) {
        in_flight = true; /* the HSCAN's reply is still to come */
        goto out;
    }
    in_flight = true;
    zb_config(b, r, keys);
    freeReplyObject(keys);
    freeReplyObject(r);
    r = NULL;
    while (in_flight) {
        if ((rc = get_reply(rs, rs->cmd, &r)) < 0)
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
            if ((rc = append(rs, rs->cmd, next)) < 0)
                goto out;
            if (redisBufferWrite(rs->cmd, &done) != REDIS_OK) {
                rc = fail(rs, "connection: %s", rs->cmd->errstr);
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
            int isnew = seen_add(seen, k->str, k->len, &slot);
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
    if (in_flight && (rc = get_reply(rs, rs->cmd, &r)) < 0)
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
    stats_update(rs, add_patch, NULL);
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
                seen_free(z->lt);
            *t = b->seen;
            memset(&b->seen, 0, sizeof(b->seen));
            z->lt = t;
            return;
        }
    }
    if (built && z->lt) { /* too small now, or no memory: no diff next time */
        seen_free(z->lt);
        free(z->lt);
        z->lt = NULL;
    }
    seen_free(&b->seen);
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
    bool ok = b.zj && b.rc == 0 && !b.breach && !b.bad && !b.list_lost &&
              b.cfg_digest == z->cfg_digest && !zone_json_dnssec(b.zj) &&
              n <= b.labels / 8 + 1024 && n <= PLAB_MAX;
    uint8_t(*owners)[DNAME_MAXLEN] = ok && n ? malloc(n * sizeof(*owners)) : NULL;
    const uint8_t **names = ok && n ? malloc(n * sizeof(*names)) : NULL;
    size_t nn = 0;
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
        if (ok)
            cnt->built++;
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
    if (mode == RUN_DIRTY && z->lt && z->served && rs->cb.on_patch) {
        bool done;
        if ((rc = diff_read(rs, z, cnt, &done)) < 0 || done)
            return rc;
    }
    if (mode == RUN_VERIFY && z->have_digest) {
        zb_begin(&b, rs, z, false);
        rc = read_large(rs, &b);
        seen_free(&b.seen);
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
                          const redisReply *keys, const redisReply *scan, run_mode_t mode,
                          bool *large, run_counts_t *cnt)
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
    if (mode != RUN_FORCE && z->have_digest) {
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

/*
 * A served zone whose changed labels were named on the change channel: read those labels (with
 * the config, the DNSSEC keys and the apex label every build needs) and build a zone of them
 * alone, handed out through on_patch. The apex named is read once (it is always read) and
 * patched like any label. Whatever a patch cannot carry — a changed config or keys, a signed
 * zone, a build that fails — makes it a full read instead.
 */
static int patch_zone(redis_source_t *rs, struct zst *z)
{
    qsort(z->plab, z->nplab, sizeof(*z->plab), cmp_str);
    size_t n = 0;
    bool apex = false;
    for (size_t i = 0; i < z->nplab; i++) {
        if (n && strcmp(z->plab[i], z->plab[n - 1]) == 0) {
            free(z->plab[i]);
            continue;
        }
        if (strcmp(z->plab[i], "@") == 0) { /* read anyway (argv[2] below) */
            apex = true;
            free(z->plab[i]);
            continue;
        }
        z->plab[n++] = z->plab[i];
    }
    z->nplab = n;
    if (!rs->cb.on_patch || !z->served) {
        log_debug("%s: zone %s: no zone to patch; reading it whole", rs->where, z->origin);
        plab_clear(z);
        mark_dirty(rs, z);
        return 0;
    }
    char *kcfg = redis_zone_key(rs, z->name, true);
    char *khash = redis_zone_key(rs, z->name, false);
    const char **argv = malloc((n + 3) * sizeof(*argv));
    size_t *lens = malloc((n + 3) * sizeof(*lens));
    uint8_t(*owners)[DNAME_MAXLEN] = malloc((n + 1) * sizeof(*owners));
    const uint8_t **names = malloc((n + 1) * sizeof(*names));
    int rc = 0;
    if (!kcfg || !khash || !argv || !lens || !owners || !names) {
        rc = fail(rs, "out of memory");
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
    redisReply *cfg = NULL, *keys = NULL, *vals = NULL;
    if ((rc = append(rs, rs->cmd, get)) < 0 || (rc = append_keys(rs, z->name)) < 0)
        goto out;
    if (redisAppendCommandArgv(rs->cmd, (int)(n + 3), argv, lens) != REDIS_OK) {
        rc = fail(rs, "cannot queue a command: %s", rs->cmd->errstr);
        goto out;
    }
    if ((rc = get_reply(rs, rs->cmd, &cfg)) == 0 && (rc = get_reply(rs, rs->cmd, &keys)) == 0)
        rc = get_reply(rs, rs->cmd, &vals);
    if (rc == 0) {
        zbuild_t b;
        zb_begin(&b, rs, z, true);
        zb_config(&b, cfg, keys);
        bool ok = b.zj && b.cfg_digest == z->cfg_digest && !zone_json_dnssec(b.zj) &&
                  vals->type == REDIS_REPLY_ARRAY && vals->elements == n + 1 &&
                  vals->element[0]->type == REDIS_REPLY_STRING;
        size_t nn = 0;
        for (size_t i = 0; ok && i <= n; i++) {
            const char *lab = i ? z->plab[i - 1] : "@";
            redisReply f = {.type = REDIS_REPLY_STRING, .str = (char *)lab, .len = strlen(lab)};
            if (vals->element[i]->type == REDIS_REPLY_STRING)
                zb_label(&b, &f, vals->element[i]);
            if ((i || apex) && label_owner(z, lab, owners[nn]))
                names[nn] = owners[nn], nn++;
            ok = b.zj != NULL;
        }
        bool handed = ok && zb_hand_patch(&b, names, nn); /* which logs a failure itself */
        if (!ok)
            log_debug("%s: zone %s: %s; reading it whole", rs->where, z->origin,
                      !b.zj && b.err[0]               ? b.err
                      : b.cfg_digest != z->cfg_digest ? "the config or keys changed"
                                                      : "the labels cannot be patched");
        zb_abandon(&b);
        if (!handed)
            mark_dirty(rs, z);
    }
    if (cfg)
        freeReplyObject(cfg);
    if (keys)
        freeReplyObject(keys);
    if (vals)
        freeReplyObject(vals);
out:
    plab_clear(z);
    free(kcfg);
    free(khash);
    free(argv);
    free(lens);
    free(owners);
    free(names);
    return rc;
}

/* Read (and build what changed of) the zones in list. */
static int process(redis_source_t *rs, struct zst **list, size_t n, run_mode_t mode,
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
                rc = fail(rs, "out of memory");
            else if ((rc = append(rs, rs->cmd, get)) == 0 &&
                     (rc = append_keys(rs, list[i + j]->name)) == 0)
                rc = append(rs, rs->cmd, scan);
            free(kcfg);
            free(khash);
        }
        for (size_t j = 0; j < m && rc == 0; j++) {
            redisReply *cfg = NULL, *keys = NULL, *scan = NULL;
            if ((rc = get_reply(rs, rs->cmd, &cfg)) == 0 &&
                (rc = get_reply(rs, rs->cmd, &keys)) == 0 &&
                (rc = get_reply(rs, rs->cmd, &scan)) == 0) {
                bool big;
                process_small(rs, list[i + j], cfg, keys, scan, mode, &big, cnt);
                if (big) {
                    struct zst **l = realloc(large, (nlarge + 1) * sizeof(*l));
                    if (!l)
                        rc = fail(rs, "out of memory");
                    else
                        (large = l)[nlarge++] = list[i + j];
                }
            }
            if (cfg)
                freeReplyObject(cfg);
            if (keys)
                freeReplyObject(keys);
            if (scan)
                freeReplyObject(scan);
        }
    }
    for (size_t i = 0; i < nlarge && rc == 0; i++)
        rc = process_large(rs, large[i], mode, cnt);
    free(large);
    return rc;
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
    return fail(rs, "out of memory");
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
        return fail(rs, "out of memory");
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
    stats_update(rs, set_zones_skipped, &skipped);
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
        rc = fail(rs, "out of memory");
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
                rc = fail(rs, "out of memory");
                goto out;
            }
            ad[nad++] = z;
        } else if (strcmp(z->name, m[i].name) != 0) {
            char *nm2 = strdup(m[i].name);
            if (!nm2) {
                rc = fail(rs, "out of memory");
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
    int rc = run(rs, rs->cmd, out, argv);
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
static int full_sync(redis_source_t *rs, bool force)
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
    rc = process(rs, all, n, force ? RUN_FORCE : RUN_VERIFY, &cnt);
    size_t failed = 0;
    for (size_t i = 0; i < n; i++)
        failed += all[i]->failed;
    free(all);
    if (rc < 0)
        return rc;
    int64_t ms = now_ms() - t0;
    size_t counts[2] = {n, failed};
    stats_update(rs, set_zone_counts, counts);
    stats_update(rs, after_sync, &ms);
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
static int flush(redis_source_t *rs)
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
        return fail(rs, "out of memory");
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
    rc = process(rs, list, n, RUN_DIRTY, &cnt);
    free(list);
    if (rc < 0)
        return rc;
    /* labels named on the change channel: patches, unless their zone was just read whole */
    size_t npatch = rs->nldirty;
    for (size_t i = 0; i < rs->nldirty && rc == 0; i++) {
        struct zst *z = rs->ldirty[i];
        if (z->mark == gen)
            plab_clear(z);
        else
            rc = patch_zone(rs, z);
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
    stats_update(rs, set_zone_counts, counts);
    if (cnt.built)
        mem_arena_purge(rs->arena);
    if (cnt.built || cnt.rejected)
        log_info("%s: changes: %zu zones re-read, %zu built, %zu rejected in %lld ms", rs->where, n,
                 cnt.built, cnt.rejected, (long long)(now_ms() - t0));
    return 0;
}

/* --- the thread --- */

static void went_down(redis_source_t *rs)
{
    conn_close(rs);
    if (rs->up) {
        rs->up = false;
        log_warn("%s: connection lost (%s); serving the zones already read, reconnecting",
                 rs->where, rs->why);
        snprintf(rs->last_down, sizeof(rs->last_down), "%s", rs->why);
        bool up = false;
        stats_update(rs, set_connected, &up);
        if (rs->cb.on_state)
            rs->cb.on_state(rs->cb.ctx, false);
    }
    rs->backoff = BACKOFF_MIN_MS;
    rs->next_connect = now_ms() + rs->backoff;
}

/* Wait until deadline (monotonic ms) or a wakeup. */
static void wait_until(redis_source_t *rs, int64_t deadline)
{
    int64_t left = deadline - now_ms();
    if (left <= 0)
        return;
    struct pollfd p = {.fd = rs->wakefd, .events = POLLIN};
    if (poll(&p, 1, left > 60000 ? 60000 : (int)left) > 0)
        drain_wake(rs);
}

static int try_connect(redis_source_t *rs)
{
    int rc = connect_all(rs);
    if (rc == E_STOP)
        return rc;
    if (rc < 0) {
        /* logged once per distinct reason, not per attempt */
        if (strcmp(rs->last_down, rs->why) != 0) {
            log_warn("%s: cannot connect (%s); retrying every %d ms at most", rs->where, rs->why,
                     rs->nsentinels ? SENTINEL_BACKOFF_MAX_MS : BACKOFF_MAX_MS);
            snprintf(rs->last_down, sizeof(rs->last_down), "%s", rs->why);
        } else {
            log_debug("%s: cannot connect (%s)", rs->where, rs->why);
        }
        int64_t max = rs->nsentinels ? SENTINEL_BACKOFF_MAX_MS : BACKOFF_MAX_MS;
        rs->next_connect = now_ms() + rs->backoff;
        rs->backoff = rs->backoff * 2 > max ? max : rs->backoff * 2;
        return 0;
    }
    rs->up = true;
    rs->last_down[0] = '\0';
    rs->backoff = BACKOFF_MIN_MS;
    if (rs->nsentinels) {
        char buf[INET6_ADDRSTRLEN + 8];
        log_info("%s: connected to %s %s of %s", rs->where,
                 rs->node_replica ? "the replica" : "the primary",
                 redis_node_text(&rs->node, buf, sizeof(buf)), rs->master);
    } else {
        log_info("%s: connected", rs->where);
    }
    bool up = true;
    stats_update(rs, set_connected, &up);
    if (rs->cb.on_state)
        rs->cb.on_state(rs->cb.ctx, true);
    /* a (re)connect may have missed any number of changes: verify everything */
    int req = atomic_exchange(&rs->resync, 0);
    return full_sync(rs, req == 2);
}

/* Send a PING on the subscriber connection without waiting; the pong comes with the events. */
static int sub_ping(redis_source_t *rs)
{
    const char *ping[] = {"PING", NULL};
    int done;
    int rc = append(rs, rs->sub, ping);
    if (rc < 0)
        return rc;
    if (redisBufferWrite(rs->sub, &done) != REDIS_OK)
        return fail(rs, "subscriber connection: %s", rs->sub->errstr);
    rs->sub_ping_out = true;
    rs->sub_ping_at = now_ms();
    return 0;
}

/* One turn of the loop while connected. */
static int serve(redis_source_t *rs)
{
    int64_t t = now_ms();
    int64_t next = rs->next_verify;
    if (rs->pending) {
        int64_t at = rs->last_ev + QUIET_MS;
        if (at > rs->first_ev + MAX_DELAY_MS)
            at = rs->first_ev + MAX_DELAY_MS;
        if (at < next)
            next = at;
    }
    if (rs->cmd_last + PING_IDLE_MS < next)
        next = rs->cmd_last + PING_IDLE_MS;
    if (rs->nsentinels && rs->next_sen_check < next)
        next = rs->next_sen_check;
    if (rs->sub_ping_out && rs->sub_ping_at + rs->read_timeout < next)
        next = rs->sub_ping_at + rs->read_timeout;
    else if (!rs->sub_ping_out && rs->sub_last + PING_IDLE_MS < next)
        next = rs->sub_last + PING_IDLE_MS;
    int64_t left = next - t;
    if (left > 0) {
        struct pollfd p[2] = {{.fd = rs->wakefd, .events = POLLIN},
                              {.fd = rs->sub->fd, .events = POLLIN}};
        int k = poll(p, 2, left > 60000 ? 60000 : (int)left);
        if (k < 0 && errno != EINTR)
            return fail(rs, "poll: %s", strerror(errno));
        if (k > 0 && p[0].revents)
            drain_wake(rs);
        if (stopping(rs))
            return E_STOP;
        if (k > 0 && p[1].revents) {
            int rc = sub_drain(rs);
            if (rc < 0)
                return rc;
        }
    }
    t = now_ms();
    int req = atomic_exchange(&rs->resync, 0);
    if (req || t >= rs->next_verify)
        return full_sync(rs, req == 2);
    if (rs->pending && (t >= rs->last_ev + QUIET_MS || t >= rs->first_ev + MAX_DELAY_MS))
        return flush(rs);
    if (rs->nsentinels && t >= rs->next_sen_check)
        return sentinel_check(rs);
    if (rs->sub_ping_out && t >= rs->sub_ping_at + rs->read_timeout)
        return fail(rs, "subscriber connection: no reply to PING within %lld ms",
                    (long long)rs->read_timeout);
    if (!rs->sub_ping_out && t >= rs->sub_last + PING_IDLE_MS) {
        int rc = sub_ping(rs);
        if (rc < 0)
            return rc;
    }
    if (t >= rs->cmd_last + PING_IDLE_MS) {
        const char *ping[] = {"PING", NULL};
        return run_ok(rs, rs->cmd, "PING", ping);
    }
    return 0;
}

static void *source_main(void *arg)
{
    redis_source_t *rs = arg;
    /* a write to a socket Redis closed must fail with EPIPE, not kill the process */
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), SOURCE_NICE) < 0)
        log_debug("%s: cannot lower the source thread's priority", rs->where);
    if (mem_thread_bind(rs->arena) < 0)
        log_debug("%s: cannot bind to its jemalloc arena; using the default one", rs->where);
    rs->backoff = BACKOFF_MIN_MS;
    rs->next_connect = 0;
    while (!stopping(rs)) {
        int rc;
        if (!rs->up) {
            if (now_ms() < rs->next_connect) {
                wait_until(rs, rs->next_connect);
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
    conn_close(rs);
    sen_close(rs);
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

static char *dup_or_null(const char *s, bool *oom)
{
    if (!s || !s[0])
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = true;
    return d;
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
    conn_close(rs);
    sen_close(rs);
    free(rs->sentinels);
    free(rs->master);
    free(rs->sentinel_password);
    for (size_t b = 0; b < rs->nbucket; b++) {
        struct zst *z = rs->bucket[b], *next;
        for (; z; z = next) {
            next = z->next;
            free(z->name);
            free(z->origin);
            free(z->rep);
            plab_clear(z);
            free(z->plab);
            if (z->lt)
                seen_free(z->lt);
            free(z->lt);
            free(z);
        }
    }
    free(rs->bucket);
    free(rs->bad_members);
    free(rs->dirty);
    free(rs->ldirty);
    free(rs->host);
    free(rs->unix_path);
    free(rs->password);
    free(rs->prefix);
    free(rs->suffix);
    free(rs->where);
    free(rs->k_set);
    free(rs->ks_prefix);
    free(rs->k_pattern);
    free(rs->channel);
    if (rs->wakefd >= 0)
        close(rs->wakefd);
    pthread_mutex_destroy(&rs->mu);
    free(rs);
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
    bool oom = false;
    rs->host = dup_or_null(cfg->host && cfg->host[0] ? cfg->host : REDIS_SOURCE_DEFAULT_HOST, &oom);
    rs->unix_path = dup_or_null(cfg->unix_path, &oom);
    rs->password = dup_or_null(cfg->password, &oom);
    rs->prefix = strdup(cfg->prefix ? cfg->prefix : "");
    rs->suffix = strdup(cfg->suffix ? cfg->suffix : "");
    rs->port = cfg->port ? cfg->port : REDIS_SOURCE_DEFAULT_PORT;
    rs->db = cfg->db;
    rs->connect_timeout =
        cfg->connect_timeout_ms ? cfg->connect_timeout_ms : REDIS_SOURCE_DEFAULT_CONNECT_TIMEOUT;
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
    rs->cb = *cb;
    rs->next_verify = INT64_MAX;
    rs->master = dup_or_null(cfg->sentinel_master, &oom);
    rs->sentinel_password = dup_or_null(cfg->sentinel_password, &oom);
    rs->read_replica = cfg->read_replica;
    if (oom || !rs->prefix || !rs->suffix)
        goto nomem;
    if (cfg->nsentinels) {
        if (!rs->master) {
            snprintf(err, errlen, "redis source: sentinels without a master name");
            goto fail;
        }
        if (!(rs->sentinels = calloc(cfg->nsentinels, sizeof(*rs->sentinels))))
            goto nomem;
        for (; rs->nsentinels < cfg->nsentinels; rs->nsentinels++) {
            if (!redis_sentinel_split(cfg->sentinels[rs->nsentinels],
                                      &rs->sentinels[rs->nsentinels])) {
                snprintf(err, errlen, "redis source: bad sentinel address \"%s\"",
                         cfg->sentinels[rs->nsentinels]);
                goto fail;
            }
        }
        free(rs->unix_path);
        rs->unix_path = NULL;
        rs->replica_start = (unsigned)tern_monotonic_us() ^ (unsigned)getpid() * 2654435761u;
    } else if (rs->read_replica) {
        snprintf(err, errlen, "redis source: read_from replica needs sentinels");
        goto fail;
    }
    if (!rs->host && !rs->unix_path) {
        snprintf(err, errlen, "redis source: no host");
        goto fail;
    }
    rs->plen = strlen(rs->prefix);
    rs->slen = strlen(rs->suffix);
    char *ep = glob_escape(rs->prefix), *es = glob_escape(rs->suffix);
    if (rs->nsentinels)
        rs->where = printf_dup("redis+sentinel://%s/%u", rs->master, rs->db);
    else if (rs->unix_path)
        rs->where = printf_dup("redis+unix://%s/%u", rs->unix_path, rs->db);
    else if (strchr(rs->host, ':'))
        rs->where = printf_dup("redis://[%s]:%u/%u", rs->host, rs->port, rs->db);
    else
        rs->where = printf_dup("redis://%s:%u/%u", rs->host, rs->port, rs->db);
    rs->k_set = printf_dup("%sredins:zones%s", rs->prefix, rs->suffix);
    rs->ks_prefix = printf_dup("__keyspace@%u__:", rs->db);
    if (ep && es)
        rs->k_pattern = printf_dup("__keyspace@%u__:%sredins:zones*%s", rs->db, ep, es);
    free(ep);
    free(es);
    if (!cfg->changes_channel)
        rs->channel = printf_dup("%sredins:zones:changed%s", rs->prefix, rs->suffix);
    else if (cfg->changes_channel[0] && !(rs->channel = strdup(cfg->changes_channel)))
        goto nomem;
    if (!rs->where || !rs->k_set || !rs->ks_prefix || !rs->k_pattern ||
        (!cfg->changes_channel && !rs->channel))
        goto nomem;
    rs->arena = mem_arena_create();
    rs->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (rs->wakefd < 0) {
        snprintf(err, errlen, "redis source: eventfd: %s", strerror(errno));
        goto fail;
    }
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

void redis_source_stop(redis_source_t *rs)
{
    if (!rs)
        return;
    atomic_store_explicit(&rs->stop, true, memory_order_release);
    wake(rs);
    pthread_join(rs->thread, NULL);
    source_free(rs);
}
