/*
 * latency_map.c — see tern/geo/latency_map.h. The text is parsed into one record per line,
 * sorted by network, each network's lines turned into a sorted (group, ms) list, identical lists
 * shared as one entry, and the networks handed to the ASN table compiler (asn_collect.h) with
 * the entry number as their "ASN" and the list as its "name".
 */
#include "tern/geo/latency_map.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asn_collect.h"
#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/common/grow.h"
#include "tern/geo/asn_table.h"

struct group {
    uint32_t id;
    uint32_t line; /* where it was first given */
    char name[LATENCY_GROUP_MAX + 1];
};

struct latency_map {
    asn_table_t *t;
    struct group *groups; /* sorted by id */
    size_t ngroups;
    latency_map_stats_t st;
};

/* One measurement line. */
struct lrec {
    u128 start;
    uint32_t gid, ms, line;
    uint8_t v6, plen;
};

/* One compile's state. */
struct comp {
    const char *source;
    char *err;
    size_t errlen;
    struct lrec *r;
    size_t n, cap;
    struct group *g; /* open addressing by id, gmask + 1 slots; id 0 = empty */
    size_t gmask, ng;
};

static int fail(struct comp *c, uint32_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct comp *c, uint32_t line, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    tern_set_err(c->err, c->errlen, "%s:%u: %s", c->source, line, msg);
    return TERN_ESYNTAX;
}

/* ---- groups ------------------------------------------------------------------------------- */

static int group_grow(struct comp *c)
{
    size_t cap = c->g ? (c->gmask + 1) * 2 : 64;
    struct group *g = calloc(cap, sizeof(*g));
    if (!g)
        return TERN_ENOMEM;
    for (size_t i = 0; c->g && i <= c->gmask; i++) {
        if (!c->g[i].id)
            continue;
        size_t j = c->g[i].id & (cap - 1);
        while (g[j].id)
            j = (j + 1) & (cap - 1);
        g[j] = c->g[i];
    }
    free(c->g);
    c->g = g;
    c->gmask = cap - 1;
    return 0;
}

/* The id of group s[0..len) of line, remembered; refused when another name has its id. */
static int group_add(struct comp *c, const char *s, size_t len, uint32_t line, uint32_t *id)
{
    if (!latency_group_valid(s, len))
        return fail(c, line, "group \"%.*s\": a name of 1..%u characters of a-z, 0-9, _ and -",
                    (int)(len > 80 ? 80 : len), s, LATENCY_GROUP_MAX);
    if ((c->ng + 1) * 2 > c->gmask + 1 || !c->g)
        if (group_grow(c) < 0)
            return TERN_ENOMEM;
    uint32_t h = latency_group_id(s, len);
    size_t j = h & c->gmask;
    for (; c->g[j].id; j = (j + 1) & c->gmask) {
        if (c->g[j].id != h)
            continue;
        if (strlen(c->g[j].name) == len && strncasecmp(c->g[j].name, s, len) == 0) {
            *id = h;
            return 0;
        }
        return fail(c, line,
                    "group \"%.*s\" has the same id as group \"%s\" (line %u): rename one of them",
                    (int)len, s, c->g[j].name, c->g[j].line);
    }
    c->g[j].id = h;
    c->g[j].line = line;
    memcpy(c->g[j].name, s, len);
    c->g[j].name[len] = 0;
    c->ng++;
    *id = h;
    return 0;
}

/* The host bits of a /plen of a family of `bits` bits. */
static u128 host_mask(unsigned bits, unsigned plen)
{
    if (plen == bits)
        return 0;
    u128 m = plen == 0 && bits == 128 ? ~(u128)0 : (((u128)1 << (bits - plen)) - 1);
    return m;
}

/* ---- lines -------------------------------------------------------------------------------- */

/* The next field of [*p, end): skips blanks; false at the end. */
static bool field(const char **p, const char *end, const char **f, size_t *flen)
{
    const char *s = *p;
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
        s++;
    if (s == end)
        return false;
    const char *e = s;
    while (e < end && *e != ' ' && *e != '\t' && *e != '\r')
        e++;
    *f = s;
    *flen = (size_t)(e - s);
    *p = e;
    return true;
}

static int parse_network(struct comp *c, const char *f, size_t len, uint32_t line, struct lrec *r)
{
    char buf[64];
    const char *slash = memchr(f, '/', len);
    size_t alen = slash ? (size_t)(slash - f) : 0;
    if (!slash || alen == 0 || alen >= sizeof(buf))
        return fail(c, line, "bad network \"%.*s\": expected <address>/<length>",
                    (int)(len > 80 ? 80 : len), f);
    memcpy(buf, f, alen);
    buf[alen] = 0;
    uint8_t b[16];
    r->v6 = memchr(buf, ':', alen) != NULL;
    if (inet_pton(r->v6 ? AF_INET6 : AF_INET, buf, b) != 1)
        return fail(c, line, "bad network \"%.*s\": %s is not an IPv%c address",
                    (int)(len > 80 ? 80 : len), f, buf, r->v6 ? '6' : '4');
    unsigned bits = r->v6 ? 128 : 32, plen = 0;
    const char *q = slash + 1, *end = f + len;
    if (q == end || end - q > 3)
        return fail(c, line, "bad network \"%.*s\": the length is not a number", (int)len, f);
    for (; q < end; q++) {
        if (*q < '0' || *q > '9')
            return fail(c, line, "bad network \"%.*s\": the length is not a number", (int)len, f);
        plen = plen * 10 + (unsigned)(*q - '0');
    }
    if (plen > bits)
        return fail(c, line, "prefix length %u out of range (0..%u for IPv%c)", plen, bits,
                    r->v6 ? '6' : '4');
    u128 v = 0;
    for (unsigned i = 0; i < bits / 8; i++)
        v = (v << 8) | b[i];
    u128 host = host_mask(bits, plen);
    if (v & host)
        return fail(c, line, "host bits set in %.*s (the network is %s/%u's prefix)", (int)len, f,
                    buf, plen);
    r->start = v;
    r->plen = (uint8_t)plen;
    return 0;
}

static int parse_ms(struct comp *c, const char *f, size_t len, uint32_t line, uint32_t *ms)
{
    uint32_t v = 0;
    bool ok = len > 0 && len <= 5;
    for (size_t i = 0; ok && i < len; i++) {
        ok = f[i] >= '0' && f[i] <= '9';
        v = v * 10 + (uint32_t)(f[i] - '0');
    }
    if (!ok || v > LATENCY_MAP_MS_MAX)
        return fail(c, line, "latency \"%.*s\": an integer number of ms, 0..%u",
                    (int)(len > 80 ? 80 : len), f, LATENCY_MAP_MS_MAX);
    *ms = v;
    return 0;
}

/* One line [s, end) (no newline); blank and comment-only lines add nothing. */
static int parse_line(struct comp *c, const char *s, const char *end, uint32_t line)
{
    const char *hash = memchr(s, '#', (size_t)(end - s));
    if (hash)
        end = hash;
    const char *f[4];
    size_t fl[4], nf = 0;
    const char *p = s;
    while (nf < 4 && field(&p, end, &f[nf], &fl[nf]))
        nf++;
    if (nf == 0)
        return 0;
    if (nf != 3)
        return fail(c, line, "expected \"<network>/<length> <group> <ms>\", got %zu field%s", nf,
                    nf == 1   ? ""
                    : nf == 4 ? "s or more"
                              : "s");
    if (tern_grow((void **)&c->r, &c->cap, c->n + 1, sizeof(*c->r)) < 0)
        return TERN_ENOMEM;
    struct lrec *r = &c->r[c->n];
    int rc;
    if ((rc = parse_network(c, f[0], fl[0], line, r)) < 0 ||
        (rc = group_add(c, f[1], fl[1], line, &r->gid)) < 0 ||
        (rc = parse_ms(c, f[2], fl[2], line, &r->ms)) < 0)
        return rc;
    r->line = line;
    c->n++;
    return 0;
}

static int lrec_cmp(const void *a, const void *b)
{
    const struct lrec *x = a, *y = b;
    if (x->v6 != y->v6)
        return x->v6 < y->v6 ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->plen != y->plen)
        return x->plen < y->plen ? -1 : 1;
    if (x->gid != y->gid)
        return x->gid < y->gid ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

/* ---- entries ------------------------------------------------------------------------------ */

/* The pairs of one network, and the shared entries: lists kept once in pool (u32 words: id,
 * ms, id, ms...), found by hash. */
struct pair {
    uint32_t ms, gid;
};

static int pair_cmp(const void *a, const void *b)
{
    const struct pair *x = a, *y = b;
    if (x->ms != y->ms)
        return x->ms < y->ms ? -1 : 1;
    return x->gid < y->gid ? -1 : x->gid > y->gid;
}

struct ent {
    size_t off; /* into pool, in u32 words */
    uint32_t n; /* pairs */
};

struct intern {
    uint32_t *pool;
    size_t pool_n, pool_cap;
    struct ent *e; /* e[id - 1] */
    size_t ne, ecap;
    uint32_t *slot; /* open addressing, entry ids, 0 = empty */
    size_t smask;
};

static int intern_grow(struct intern *in)
{
    size_t cap = in->slot ? (in->smask + 1) * 2 : 1024;
    uint32_t *s = calloc(cap, sizeof(*s));
    if (!s)
        return TERN_ENOMEM;
    for (size_t id = 1; id <= in->ne; id++) {
        const struct ent *e = &in->e[id - 1];
        size_t j = tern_hash64(in->pool + e->off, 8 * (size_t)e->n, 0) & (cap - 1);
        while (s[j])
            j = (j + 1) & (cap - 1);
        s[j] = (uint32_t)id;
    }
    free(in->slot);
    in->slot = s;
    in->smask = cap - 1;
    return 0;
}

/* The entry id of words[0 .. 2n), added when new (*fresh). */
static int intern_add(struct intern *in, const uint32_t *words, uint32_t n, uint32_t *id,
                      bool *fresh)
{
    if (!in->slot || (in->ne + 1) * 2 > in->smask + 1)
        if (intern_grow(in) < 0)
            return TERN_ENOMEM;
    size_t bytes = 8 * (size_t)n, j = tern_hash64(words, bytes, 0) & in->smask;
    for (; in->slot[j]; j = (j + 1) & in->smask) {
        const struct ent *e = &in->e[in->slot[j] - 1];
        if (e->n == n && memcmp(in->pool + e->off, words, bytes) == 0) {
            *id = in->slot[j];
            *fresh = false;
            return 0;
        }
    }
    if (in->ne >= UINT32_MAX - 1 ||
        tern_grow((void **)&in->e, &in->ecap, in->ne + 1, sizeof(*in->e)) < 0 ||
        tern_grow((void **)&in->pool, &in->pool_cap, in->pool_n + 2 * n, sizeof(*in->pool)) < 0)
        return TERN_ENOMEM;
    memcpy(in->pool + in->pool_n, words, bytes);
    in->e[in->ne] = (struct ent){.off = in->pool_n, .n = n};
    in->pool_n += 2 * (size_t)n;
    in->slot[j] = (uint32_t)++in->ne;
    *id = (uint32_t)in->ne;
    *fresh = true;
    return 0;
}

static void intern_free(struct intern *in)
{
    free(in->pool);
    free(in->e);
    free(in->slot);
}

/* The network of records r[0 .. n) (same network, sorted by group) into the collection. */
static int add_network(struct comp *c, struct intern *in, asn_collect_t *col, const struct lrec *r,
                       size_t n, struct pair *pairs, uint32_t *words)
{
    if (n > LATENCY_MAP_GROUPS_MAX)
        return fail(c, r[LATENCY_MAP_GROUPS_MAX].line, "more than %u groups for one network",
                    LATENCY_MAP_GROUPS_MAX);
    for (size_t i = 0; i < n; i++) {
        if (i && r[i].gid == r[i - 1].gid) {
            const struct lrec *a = &r[i - 1], *b = &r[i]; /* sorted by line too */
            return fail(c, b->line, "the same network and group as line %u", a->line);
        }
        pairs[i] = (struct pair){.ms = r[i].ms, .gid = r[i].gid};
    }
    qsort(pairs, n, sizeof(*pairs), pair_cmp);
    for (size_t i = 0; i < n; i++) {
        words[2 * i] = pairs[i].gid;
        words[2 * i + 1] = pairs[i].ms;
    }
    uint32_t id;
    bool fresh;
    if (intern_add(in, words, (uint32_t)n, &id, &fresh) < 0)
        return TERN_ENOMEM;
    unsigned bits = r->v6 ? 128 : 32;
    u128 host = host_mask(bits, r->plen);
    /* the list is the entry's "name", given once: the collection keeps the first */
    return asn_collect_add(col, r->v6, r->start, r->start | host, id, NULL, 0,
                           fresh ? (const char *)words : NULL, fresh ? 8 * n : 0);
}

/* Every network of the sorted records into col. */
static int collect(struct comp *c, asn_collect_t *col, latency_map_stats_t *st)
{
    struct intern in = {0};
    struct pair *pairs = malloc(LATENCY_MAP_GROUPS_MAX * sizeof(*pairs));
    uint32_t *words = malloc(LATENCY_MAP_GROUPS_MAX * 2 * sizeof(*words));
    int rc = pairs && words ? 0 : TERN_ENOMEM;
    for (size_t i = 0, j; rc == 0 && i < c->n; i = j) {
        for (j = i + 1; j < c->n && c->r[j].v6 == c->r[i].v6 && c->r[j].start == c->r[i].start &&
                        c->r[j].plen == c->r[i].plen;
             j++)
            ;
        /* a network with too many groups is reported, not cut: bound the copy */
        size_t n = j - i > LATENCY_MAP_GROUPS_MAX + 1 ? LATENCY_MAP_GROUPS_MAX + 1 : j - i;
        rc = add_network(c, &in, col, c->r + i, n, pairs, words);
        st->networks++;
    }
    st->entries = in.ne;
    intern_free(&in);
    free(pairs);
    free(words);
    return rc;
}

/* ---- the map ------------------------------------------------------------------------------ */

static int group_id_cmp(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The compiled table buf into a memory file, mapped as m->t. */
static int map_table(latency_map_t *m, const uint8_t *buf, size_t len, const char *source,
                     char *err, size_t errlen)
{
    int fd = memfd_create("tern-latency-map", MFD_CLOEXEC);
    if (fd < 0) {
        int rc = -errno;
        tern_set_err(err, errlen, "%s: memfd_create: %s", source, strerror(errno));
        return rc;
    }
    int rc = tern_write_all(fd, buf, len);
    if (rc < 0)
        tern_set_err(err, errlen, "%s: writing the compiled map: %s", source, strerror(-rc));
    else if (!(m->t = asn_table_open_fd(fd, source, err, errlen)))
        rc = TERN_EINVAL;
    close(fd);
    return rc;
}

/* The parsed records c into m. */
static int build(struct comp *c, latency_map_t *m, char *err, size_t errlen)
{
    asn_collect_t col = {0};
    asn_compile_stats_t ast = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    qsort(c->r, c->n, sizeof(*c->r), lrec_cmp);
    int rc = collect(c, &col, &m->st);
    if (rc == 0)
        rc = asn_compile_build(&col, c->source, &buf, &len, &ast, err, errlen);
    asn_collect_free(&col);
    if (rc == 0)
        rc = map_table(m, buf, len, c->source, err, errlen);
    free(buf);
    m->st.ranges_v4 = ast.entries_v4;
    m->st.ranges_v6 = ast.entries_v6;
    m->st.bytes = len;
    return rc;
}

int latency_map_compile(const char *text, size_t len, const char *source, latency_map_t **out,
                        latency_map_stats_t *stats, char *err, size_t errlen)
{
    struct comp c = {.source = source, .err = err, .errlen = errlen};
    latency_map_t *m = calloc(1, sizeof(*m));
    int rc = m ? 0 : TERN_ENOMEM;
    uint32_t line = 0;
    for (const char *p = text, *end = text + len; rc == 0 && p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        rc = parse_line(&c, p, le, ++line);
        p = nl ? nl + 1 : end;
    }
    if (rc == 0) {
        m->st.lines = c.n;
        m->st.groups = c.ng;
        rc = build(&c, m, err, errlen);
    }
    if (rc == 0 && c.ng && !(m->groups = malloc(c.ng * sizeof(*m->groups))))
        rc = TERN_ENOMEM;
    for (size_t i = 0; rc == 0 && i <= c.gmask && c.g; i++)
        if (c.g[i].id)
            m->groups[m->ngroups++] = c.g[i];
    if (rc == 0)
        qsort(m->groups, m->ngroups, sizeof(*m->groups), group_id_cmp);
    if (rc == TERN_ENOMEM)
        tern_set_err(err, errlen, "%s: out of memory", source);
    free(c.r);
    free(c.g);
    if (rc < 0) {
        latency_map_free(m);
        return rc;
    }
    if (stats)
        *stats = m->st;
    *out = m;
    return 0;
}

int latency_map_load_file(const char *path, latency_map_t **out, latency_map_stats_t *stats,
                          char *err, size_t errlen)
{
    char *text = NULL;
    int rc = tern_file_read_text(path, LATENCY_MAP_FILE_MAX, false, &text, err, errlen);
    if (rc == 0)
        rc = latency_map_compile(text, strlen(text), path, out, stats, err, errlen);
    free(text);
    return rc;
}

void latency_map_free(latency_map_t *m)
{
    if (!m)
        return;
    asn_table_close(m->t);
    free(m->groups);
    free(m);
}

uint32_t latency_map_lookup(const latency_map_t *m, int family, const uint8_t *addr,
                            latency_entry_t *e, uint8_t *prefix)
{
    uint32_t id;
    *prefix = 0;
    e->n = 0;
    e->pairs = NULL;
    if (family == AF_INET) {
        uint32_t h =
            (uint32_t)addr[0] << 24 | (uint32_t)addr[1] << 16 | (uint32_t)addr[2] << 8 | addr[3];
        id = asn_table_lookup_v4_prefix(m->t, h, prefix);
    } else if (family == AF_INET6) {
        id = asn_table_lookup_v6_prefix(m->t, addr, prefix);
    } else {
        return 0;
    }
    const char *p;
    size_t len;
    if (id && asn_table_info(m->t, id, NULL, NULL, &p, &len) == 0) {
        e->pairs = (const uint8_t *)p;
        e->n = (uint32_t)(len / 8);
    }
    return e->n;
}

const char *latency_map_group_name(const latency_map_t *m, uint32_t id)
{
    size_t lo = 0, hi = m->ngroups;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->groups[mid].id < id)
            lo = mid + 1;
        else if (m->groups[mid].id > id)
            hi = mid;
        else
            return m->groups[mid].name;
    }
    return NULL;
}

void latency_map_counts(const latency_map_t *m, latency_map_stats_t *out)
{
    *out = m->st;
}
