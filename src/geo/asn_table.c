/*
 * asn_table.c — ip2asn compiler (TSV/CSV → one binary file) and the mmapped lookup.
 *
 * The compiler works on 128-bit keys for both families (an IPv4 address is just a small key),
 * resolves overlaps with one sweep over the ranges sorted by (start asc, end desc, input order
 * asc) keeping a stack of open ranges: the top of the stack is always the winner under the rule
 * documented in the header, and popping it hands the addresses back to the range below. The
 * output is a list of boundaries (start, asn), each running to the next, so gaps need no special
 * case: they are boundaries with asn 0.
 *
 * Lookups descend a static B+ tree (layout in the header): one 64-byte block of sorted keys per
 * level, the count of keys <= x taken with SIMD compares (SSE2 for the u32 v4 keys, AVX2 when the
 * CPU has it for the u64 v6 keys) and a bsf, since in a sorted block the "<=" lanes are a prefix.
 * The ~500k-entry v4 table is 5 levels, the ~180k v6 main entries 6; all but the bottom two fit
 * in L1/L2, so a random lookup costs about two cache misses plus the ASN load, against ~19
 * dependent loads for the plain binary search of version 1 (figures: bench/README.md).
 */
#include "tern/geo/asn_table.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tern/common/err.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "asn_table uses the file's little-endian arrays in place; big-endian hosts need a port"
#endif

__extension__ typedef unsigned __int128 u128;

#define HDR_SIZE    96u
#define NAME_REC    16u
#define V4_MAX      ((u128)UINT32_MAX)
#define V6_MAX      (~(u128)0)
#define NAME_MAXLEN 65535u /* u16 length field */
#define CC_MAXLEN   65535u

/* ---------------------------------------------------------------------------------------------
 * helpers
 */

static void set_err(char *err, size_t errlen, const char *fmt, ...) TERN_PRINTF(3, 4);
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static uint32_t crc32_ieee(const uint8_t *p, size_t n)
{
    /* A 1 KiB table rebuilt per call: open and compile are rare, and no global state means no
     * init race between a loader thread and ternctl-style callers. */
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

static void put_u16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, sizeof(v)); /* little-endian host, checked above */
}
static void put_u32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, sizeof(v));
}
static void put_u64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof(v));
}
static uint16_t get_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}
static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static size_t align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* ---------------------------------------------------------------------------------------------
 * search index layout (shared by the compiler and the loader, derived from the entry count only)
 *
 * Level 0 is the sorted key array itself, padded with all-ones keys to a whole number of blocks
 * (B keys = one 64-byte cache line: 16 u32 or 8 u64). Level l+1 holds every B-th key of level l,
 * padded the same way, until a level fits one block (the root). A lookup counts the keys <= x in
 * one block per level, so it touches one cache line per level; the upper levels of a 500k-entry
 * table are a few KB and stay in L1/L2.
 */

#define MAX_LEVELS 16

struct idx_layout {
    unsigned levels;         /* including level 0 (the keys) */
    size_t size[MAX_LEVELS]; /* real keys per level */
    size_t off[MAX_LEVELS];  /* byte offset of each level from the section start */
    size_t asn_off, total;   /* u32 asn[n] after the levels; section bytes */
};

static void idx_layout(size_t n, size_t ksize, struct idx_layout *L)
{
    size_t b = 64 / ksize, off = 0, sz = n ? n : 1;
    L->levels = 0;
    for (;;) {
        L->size[L->levels] = sz;
        L->off[L->levels] = off;
        off += align64(((sz + b - 1) / b) * b * ksize);
        L->levels++;
        if (sz <= b || L->levels == MAX_LEVELS)
            break;
        sz = (sz + b - 1) / b;
    }
    L->asn_off = off;
    L->total = align64(off + 4 * n);
}

/* Fill the levels of a section from its level-0 keys (already written). */
static void idx_fill32(uint8_t *sec, size_t n, const struct idx_layout *L)
{
    for (unsigned l = 0; l < L->levels; l++) {
        uint32_t *k = (uint32_t *)(void *)(sec + L->off[l]);
        size_t sz = L->size[l], padded = (sz + 15) / 16 * 16;
        if (l > 0)
            for (size_t i = 0; i < sz; i++)
                k[i] = ((const uint32_t *)(const void *)(sec + L->off[l - 1]))[i * 16];
        for (size_t i = (l == 0 ? n : sz); i < padded; i++)
            k[i] = UINT32_MAX;
    }
}

static void idx_fill64(uint8_t *sec, size_t n, const struct idx_layout *L)
{
    for (unsigned l = 0; l < L->levels; l++) {
        uint64_t *k = (uint64_t *)(void *)(sec + L->off[l]);
        size_t sz = L->size[l], padded = (sz + 7) / 8 * 8;
        if (l > 0)
            for (size_t i = 0; i < sz; i++)
                k[i] = ((const uint64_t *)(const void *)(sec + L->off[l - 1]))[i * 8];
        for (size_t i = (l == 0 ? n : sz); i < padded; i++)
            k[i] = UINT64_MAX;
    }
}

/* ---------------------------------------------------------------------------------------------
 * compiler: input collection
 */

struct range {
    u128 start, end;
    size_t seq;
    uint32_t asn;
};

struct ranges {
    struct range *v;
    size_t n, cap;
};

struct name_in {
    uint32_t asn;
    size_t seq;
    size_t cc_off, cc_len, name_off, name_len; /* into struct compiler.str */
};

struct compiler {
    struct ranges r4, r6;
    struct name_in *names;
    size_t n_names, cap_names;
    char *str;
    size_t str_len, str_cap;
    size_t seq;
};

static int grow(void **v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / elem)
            return TERN_ENOMEM;
        nc *= 2;
    }
    void *p = realloc(*v, nc * elem);
    if (!p)
        return TERN_ENOMEM;
    *v = p;
    *cap = nc;
    return 0;
}

static int ranges_push(struct ranges *rs, const struct range *r)
{
    void *v = rs->v;
    int rc = grow(&v, &rs->cap, rs->n + 1, sizeof(*rs->v));
    rs->v = v;
    if (rc)
        return rc;
    rs->v[rs->n++] = *r;
    return 0;
}

static int str_add(struct compiler *c, const char *s, size_t len, size_t *off)
{
    void *v = c->str;
    int rc = grow(&v, &c->str_cap, c->str_len + len + 1, 1);
    c->str = v;
    if (rc)
        return rc;
    *off = c->str_len;
    if (len)
        memcpy(c->str + c->str_len, s, len);
    c->str_len += len;
    return 0;
}

static int name_add(struct compiler *c, uint32_t asn, const char *cc, const char *name)
{
    size_t cc_len = cc ? strlen(cc) : 0, name_len = name ? strlen(name) : 0;
    if (asn == 0 || (cc_len == 0 && name_len == 0))
        return 0;
    if (cc_len > CC_MAXLEN)
        cc_len = CC_MAXLEN;
    if (name_len > NAME_MAXLEN)
        name_len = NAME_MAXLEN;
    void *v = c->names;
    int rc = grow(&v, &c->cap_names, c->n_names + 1, sizeof(*c->names));
    c->names = v;
    if (rc)
        return rc;
    struct name_in *n = &c->names[c->n_names];
    n->asn = asn;
    n->seq = c->seq;
    n->cc_len = cc_len;
    n->name_len = name_len;
    if ((rc = str_add(c, cc, cc_len, &n->cc_off)) ||
        (rc = str_add(c, name, name_len, &n->name_off)))
        return rc;
    c->n_names++;
    return 0;
}

static char *trim(char *s)
{
    while (*s == ' ')
        s++;
    size_t n = strlen(s);
    while (n && s[n - 1] == ' ')
        s[--n] = '\0';
    return s;
}

/* Split a CSV line in place. Quoted fields may contain commas and "" escapes. Returns the field
 * count (up to max; one more is reported as max + 1) or -1 on an unterminated quote. */
static int split_csv(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ')
            p++;
        char *start = p, *w = p;
        if (*p == '"') {
            start = w = ++p;
            for (;;) {
                if (*p == '\0')
                    return -1;
                if (*p == '"') {
                    if (p[1] == '"') {
                        *w++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                *w++ = *p++;
            }
            while (*p == ' ')
                p++;
            if (*p != ',' && *p != '\0')
                return -1;
        } else {
            while (*p != ',' && *p != '\0')
                p++;
            w = p;
            while (w > start && w[-1] == ' ')
                w--;
        }
        char sep = *p;
        *w = '\0';
        if (n < max)
            f[n] = start;
        n++;
        if (sep == '\0')
            break;
        p++;
    }
    if (n > max)
        return max + 1;
    return n;
}

static int split_tsv(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        char *tab = strchr(p, '\t');
        if (n < max)
            f[n] = p;
        n++;
        if (!tab)
            break;
        *tab = '\0';
        p = tab + 1;
    }
    if (n > max)
        return max + 1;
    for (int i = 0; i < n; i++)
        f[i] = trim(f[i]);
    return n;
}

/* 0 = v4, 1 = v6, -1 invalid */
static int parse_addr(const char *s, u128 *out)
{
    if (strchr(s, ':')) {
        uint8_t b[16];
        if (inet_pton(AF_INET6, s, b) != 1)
            return -1;
        u128 v = 0;
        for (int i = 0; i < 16; i++)
            v = (v << 8) | b[i];
        *out = v;
        return 1;
    }
    struct in_addr a;
    if (inet_pton(AF_INET, s, &a) != 1)
        return -1;
    *out = ntohl(a.s_addr);
    return 0;
}

static bool parse_asn(const char *s, uint32_t *out)
{
    if ((s[0] == 'A' || s[0] == 'a') && (s[1] == 'S' || s[1] == 's'))
        s += 2;
    if (*s == '\0')
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > UINT32_MAX)
            return false;
    }
    *out = (uint32_t)v;
    return true;
}

static int read_line(struct compiler *c, char *line, const char *file, size_t lineno, char *err,
                     size_t errlen)
{
    char *f[5] = {0};
    int nf;
    const char *cc = NULL, *name = NULL;
    if (strchr(line, '\t')) {
        nf = split_tsv(line, f, 5);
        if (nf < 3 || nf > 5) {
            set_err(err, errlen, "%s:%zu: expected 3 to 5 tab-separated fields, got %s%d", file,
                    lineno, nf > 5 ? "more than " : "", nf > 5 ? 5 : nf);
            return TERN_ESYNTAX;
        }
        cc = nf > 3 ? f[3] : NULL;
        name = nf > 4 ? f[4] : NULL;
    } else {
        nf = split_csv(line, f, 4);
        if (nf < 0) {
            set_err(err, errlen, "%s:%zu: unterminated or misplaced quote", file, lineno);
            return TERN_ESYNTAX;
        }
        if (nf != 4) {
            set_err(err, errlen, "%s:%zu: expected 4 comma-separated fields, got %s%d", file,
                    lineno, nf > 4 ? "more than " : "", nf > 4 ? 4 : nf);
            return TERN_ESYNTAX;
        }
        name = f[3];
    }
    struct range r = {.seq = c->seq};
    u128 end;
    int fam = parse_addr(f[0], &r.start);
    if (fam < 0) {
        set_err(err, errlen, "%s:%zu: invalid start address '%s'", file, lineno, f[0]);
        return TERN_ESYNTAX;
    }
    int fam2 = parse_addr(f[1], &end);
    if (fam2 < 0) {
        set_err(err, errlen, "%s:%zu: invalid end address '%s'", file, lineno, f[1]);
        return TERN_ESYNTAX;
    }
    if (fam != fam2) {
        set_err(err, errlen, "%s:%zu: start and end are of different address families", file,
                lineno);
        return TERN_ESYNTAX;
    }
    r.end = end;
    if (r.start > r.end) {
        set_err(err, errlen, "%s:%zu: start %s > end %s", file, lineno, f[0], f[1]);
        return TERN_ESYNTAX;
    }
    if (!parse_asn(f[2], &r.asn)) {
        set_err(err, errlen, "%s:%zu: bad ASN '%s'", file, lineno, f[2]);
        return TERN_ESYNTAX;
    }
    int rc = ranges_push(fam ? &c->r6 : &c->r4, &r);
    if (rc == 0 && cc && strcmp(cc, "None") == 0)
        cc = NULL; /* iptoasn writes "None" for unrouted space */
    if (rc == 0)
        rc = name_add(c, r.asn, cc, name);
    if (rc)
        set_err(err, errlen, "%s:%zu: out of memory", file, lineno);
    c->seq++;
    return rc;
}

static int read_file(struct compiler *c, const char *path, asn_table_compile_stats_t *st, char *err,
                     size_t errlen)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        int e = errno;
        set_err(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t len;
    int rc = 0;
    while ((len = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if ((size_t)len != strlen(line)) {
            set_err(err, errlen, "%s:%zu: NUL byte in line", path, lineno);
            rc = TERN_ESYNTAX;
            break;
        }
        char *p = line;
        while (*p == ' ')
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        if ((rc = read_line(c, p, path, lineno, err, errlen)))
            break;
        st->lines++;
    }
    if (rc == 0 && ferror(fp)) {
        rc = TERN_EINVAL;
        set_err(err, errlen, "%s: read error", path);
    }
    free(line);
    fclose(fp);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * compiler: overlap resolution
 */

struct bound {
    u128 key;
    uint32_t asn;
};

struct bounds {
    struct bound *v;
    size_t n, cap;
};

static int range_cmp(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end > y->end ? -1 : 1; /* wider first: the narrower ends on top of the stack */
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Append boundary (key, asn): a boundary at the same key replaces the previous one, and a
 * boundary that doesn't change the ASN is dropped, so the output is minimal. */
static int emit(struct bounds *b, u128 key, uint32_t asn)
{
    if (b->n && b->v[b->n - 1].key == key) {
        b->v[b->n - 1].asn = asn;
        if (b->n > 1 && b->v[b->n - 2].asn == asn)
            b->n--;
        return 0;
    }
    if (b->n && b->v[b->n - 1].asn == asn)
        return 0;
    void *v = b->v;
    int rc = grow(&v, &b->cap, b->n + 1, sizeof(*b->v));
    b->v = v;
    if (rc)
        return rc;
    b->v[b->n++] = (struct bound){key, asn};
    return 0;
}

struct sweep {
    const struct range **stack;
    size_t depth;
    u128 cur;  /* first address not yet assigned by a popped range */
    bool done; /* a range ending at the family's last address was popped */
};

/* Close every open range that ends before p (all of them when all is set), emitting the
 * boundary where each hands its addresses back to the range below it (or to "no ASN"). */
static int flush(struct sweep *s, struct bounds *b, u128 p, bool all, u128 max)
{
    while (s->depth && (all || s->stack[s->depth - 1]->end < p)) {
        const struct range *t = s->stack[--s->depth];
        if (s->done || t->end < s->cur)
            continue; /* fully shadowed by a range above it */
        if (t->end == max) {
            s->done = true;
            continue;
        }
        s->cur = t->end + 1;
        while (s->depth && s->stack[s->depth - 1]->end < s->cur)
            s->depth--;
        int rc = emit(b, s->cur, s->depth ? s->stack[s->depth - 1]->asn : 0);
        if (rc)
            return rc;
    }
    return 0;
}

static int resolve(struct ranges *rs, u128 max, struct bounds *out, size_t *overlaps)
{
    int rc = 0;
    struct sweep s = {.stack = NULL};
    if (rs->n)
        qsort(rs->v, rs->n, sizeof(*rs->v), range_cmp);
    s.stack = malloc((rs->n ? rs->n : 1) * sizeof(*s.stack));
    if (!s.stack)
        return TERN_ENOMEM;
    if ((rc = emit(out, 0, 0)))
        goto done;
    for (size_t i = 0; i < rs->n; i++) {
        const struct range *r = &rs->v[i];
        if ((rc = flush(&s, out, r->start, false, max)))
            goto done;
        if (s.depth)
            (*overlaps)++;
        s.stack[s.depth++] = r;
        s.cur = r->start;
        s.done = false;
        if ((rc = emit(out, r->start, r->asn)))
            goto done;
    }
    rc = flush(&s, out, 0, true, max);
done:
    free(s.stack);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * compiler: output
 */

static int name_cmp(const void *a, const void *b)
{
    const struct name_in *x = a, *y = b;
    if (x->asn != y->asn)
        return x->asn < y->asn ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* exception section: u32 v6 boundaries, u32 0, u64 hi[ne], u32 first[ne + 1], u64 lo[nsub],
 * u32 asn[nsub] */
#define EXC_HI_OFF 8u
static size_t exc_first_off(size_t ne)
{
    return EXC_HI_OFF + 8 * ne;
}
static size_t exc_lo_off(size_t ne)
{
    return align8(exc_first_off(ne) + 4 * (ne + 1));
}
static size_t exc_size(size_t ne, size_t nsub)
{
    return exc_lo_off(ne) + 12 * nsub;
}

static int write_table(struct compiler *c, const struct bounds *b4, const struct bounds *b6,
                       const char *out_path, asn_table_compile_stats_t *st, char *err,
                       size_t errlen)
{
    int rc = 0;
    uint8_t *buf = NULL;
    char *tmp = NULL;
    FILE *fp = NULL;

    /* merge names: per ASN the first non-empty country and name */
    if (c->n_names)
        qsort(c->names, c->n_names, sizeof(*c->names), name_cmp);
    size_t n_names = 0, str_total = 0;
    for (size_t i = 0; i < c->n_names;) {
        size_t j = i, cc = SIZE_MAX, nm = SIZE_MAX;
        for (; j < c->n_names && c->names[j].asn == c->names[i].asn; j++) {
            if (cc == SIZE_MAX && c->names[j].cc_len)
                cc = j;
            if (nm == SIZE_MAX && c->names[j].name_len)
                nm = j;
        }
        /* reuse slot n_names: cc_* from cc, name_* from nm */
        struct name_in m = {.asn = c->names[i].asn};
        if (cc != SIZE_MAX) {
            m.cc_off = c->names[cc].cc_off;
            m.cc_len = c->names[cc].cc_len;
        }
        if (nm != SIZE_MAX) {
            m.name_off = c->names[nm].name_off;
            m.name_len = c->names[nm].name_len;
        }
        c->names[n_names++] = m;
        str_total += m.cc_len + m.name_len;
        i = j;
    }
    /* v6: one main entry per distinct top 64 bits; a /64 holding boundaries below its first
     * address (lo != 0) or several boundaries becomes an exception: its main entry carries the ASN
     * in effect at the /64's end, and a sub-list (lo, asn) starting at lo 0 resolves inside it. */
    size_t n6 = 0, ne = 0, nsub = 0;
    for (size_t i = 0; i < b6->n;) {
        uint64_t hi = (uint64_t)(b6->v[i].key >> 64);
        size_t j = i;
        while (j < b6->n && (uint64_t)(b6->v[j].key >> 64) == hi)
            j++;
        n6++;
        if (j - i > 1 || (uint64_t)b6->v[i].key != 0) {
            ne++;
            nsub += (j - i) + ((uint64_t)b6->v[i].key != 0);
        }
        i = j;
    }
    if (b4->n > UINT32_MAX || b6->n > UINT32_MAX || n6 > UINT32_MAX || nsub > UINT32_MAX ||
        n_names > UINT32_MAX || str_total > UINT32_MAX) {
        set_err(err, errlen, "%s: table too large", out_path);
        return TERN_ERANGE;
    }

    struct idx_layout L4, L6;
    idx_layout(b4->n, 4, &L4);
    idx_layout(n6, 8, &L6);
    size_t v4_off = align64(HDR_SIZE);
    size_t v6_off = v4_off + L4.total;
    size_t exc_off = v6_off + L6.total;
    size_t names_off = align8(exc_off + exc_size(ne, nsub));
    size_t strings_off = align8(names_off + n_names * NAME_REC);
    size_t total = strings_off + str_total;
    buf = calloc(1, total);
    if (!buf) {
        set_err(err, errlen, "%s: out of memory", out_path);
        return TERN_ENOMEM;
    }
    memcpy(buf, ASN_TABLE_MAGIC, 8);
    put_u32(buf + 8, ASN_TABLE_VERSION);
    put_u32(buf + 12, 0);
    put_u32(buf + 16, (uint32_t)b4->n);
    put_u32(buf + 20, (uint32_t)n6);
    put_u32(buf + 24, (uint32_t)n_names);
    put_u32(buf + 28, (uint32_t)ne);
    put_u64(buf + 32, v4_off);
    put_u64(buf + 40, v6_off);
    put_u64(buf + 48, names_off);
    put_u64(buf + 56, strings_off);
    put_u64(buf + 64, str_total);
    put_u64(buf + 72, total - HDR_SIZE);
    put_u32(buf + 84, (uint32_t)nsub);
    put_u64(buf + 88, exc_off);
    uint8_t *sec = buf + v4_off;
    for (size_t i = 0; i < b4->n; i++) {
        put_u32(sec + 4 * i, (uint32_t)b4->v[i].key);
        put_u32(sec + L4.asn_off + 4 * i, b4->v[i].asn);
    }
    idx_fill32(sec, b4->n, &L4);
    sec = buf + v6_off;
    uint8_t *exc = buf + exc_off;
    size_t eh_off = EXC_HI_OFF, ef_off = exc_first_off(ne), el_off = exc_lo_off(ne),
           ea_off = el_off + 8 * nsub;
    put_u32(exc, (uint32_t)b6->n);
    size_t mi = 0, e = 0, s = 0;
    for (size_t i = 0; i < b6->n;) {
        uint64_t hi = (uint64_t)(b6->v[i].key >> 64);
        size_t j = i;
        while (j < b6->n && (uint64_t)(b6->v[j].key >> 64) == hi)
            j++;
        put_u64(sec + 8 * mi, hi);
        put_u32(sec + L6.asn_off + 4 * mi, b6->v[j - 1].asn);
        mi++;
        if (j - i > 1 || (uint64_t)b6->v[i].key != 0) {
            put_u64(exc + eh_off + 8 * e, hi);
            put_u32(exc + ef_off + 4 * e, (uint32_t)s);
            e++;
            if ((uint64_t)b6->v[i].key != 0) { /* i > 0: the first boundary is :: */
                put_u64(exc + el_off + 8 * s, 0);
                put_u32(exc + ea_off + 4 * s, b6->v[i - 1].asn);
                s++;
            }
            for (size_t k = i; k < j; k++, s++) {
                put_u64(exc + el_off + 8 * s, (uint64_t)b6->v[k].key);
                put_u32(exc + ea_off + 4 * s, b6->v[k].asn);
            }
        }
        i = j;
    }
    put_u32(exc + ef_off + 4 * ne, (uint32_t)nsub);
    idx_fill64(sec, n6, &L6);
    size_t so = 0;
    for (size_t i = 0; i < n_names; i++) {
        const struct name_in *m = &c->names[i];
        uint8_t *rec = buf + names_off + NAME_REC * i;
        put_u32(rec, m->asn);
        put_u32(rec + 4, (uint32_t)so);
        put_u16(rec + 8, (uint16_t)m->cc_len);
        put_u16(rec + 10, (uint16_t)m->name_len);
        if (m->cc_len)
            memcpy(buf + strings_off + so, c->str + m->cc_off, m->cc_len);
        so += m->cc_len;
        if (m->name_len)
            memcpy(buf + strings_off + so, c->str + m->name_off, m->name_len);
        so += m->name_len;
    }
    put_u32(buf + 80, crc32_ieee(buf + HDR_SIZE, total - HDR_SIZE));

    size_t plen = strlen(out_path);
    tmp = malloc(plen + 5);
    if (!tmp) {
        rc = TERN_ENOMEM;
        set_err(err, errlen, "%s: out of memory", out_path);
        goto done;
    }
    memcpy(tmp, out_path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    fp = fopen(tmp, "wb");
    if (!fp || fwrite(buf, 1, total, fp) != total || fflush(fp) != 0 || fsync(fileno(fp)) != 0) {
        rc = errno ? -errno : TERN_EINVAL;
        set_err(err, errlen, "%s: %s", tmp, strerror(-rc));
        if (fp)
            fclose(fp);
        fp = NULL;
        unlink(tmp);
        goto done;
    }
    if (fclose(fp) != 0) {
        fp = NULL;
        rc = -errno;
        set_err(err, errlen, "%s: %s", tmp, strerror(-rc));
        unlink(tmp);
        goto done;
    }
    fp = NULL;
    if (rename(tmp, out_path) != 0) {
        rc = -errno;
        set_err(err, errlen, "%s: rename: %s", out_path, strerror(-rc));
        unlink(tmp);
        goto done;
    }
    st->entries_v4 = b4->n;
    st->entries_v6 = b6->n;
    st->names = n_names;
done:
    free(tmp);
    free(buf);
    return rc;
}

int asn_table_compile_ex(const char *const *inputs, size_t n, const char *out_path,
                         asn_table_compile_stats_t *stats, char *err, size_t errlen)
{
    struct compiler c = {0};
    struct bounds b4 = {0}, b6 = {0};
    asn_table_compile_stats_t st = {0};
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if ((rc = read_file(&c, inputs[i], &st, err, errlen)))
            goto done;
    st.ranges_v4 = c.r4.n;
    st.ranges_v6 = c.r6.n;
    if ((rc = resolve(&c.r4, V4_MAX, &b4, &st.overlaps)) ||
        (rc = resolve(&c.r6, V6_MAX, &b6, &st.overlaps))) {
        set_err(err, errlen, "%s: out of memory", out_path);
        goto done;
    }
    if ((rc = write_table(&c, &b4, &b6, out_path, &st, err, errlen)))
        goto done;
    if (stats)
        *stats = st;
done:
    free(b4.v);
    free(b6.v);
    free(c.r4.v);
    free(c.r6.v);
    free(c.names);
    free(c.str);
    return rc;
}

int asn_table_compile(const char *const *inputs, size_t n, const char *out_path, char *err,
                      size_t errlen)
{
    return asn_table_compile_ex(inputs, n, out_path, NULL, err, errlen);
}

/* ---------------------------------------------------------------------------------------------
 * loader and lookups
 */

struct asn_table {
    const uint8_t *map;
    size_t size;
    unsigned levels4, levels6;
    const uint32_t *lv4[MAX_LEVELS]; /* lv4[0] = the starts; lv4[levels4 - 1] = the root block */
    size_t last4[MAX_LEVELS];        /* real keys per level - 1 */
    const uint32_t *v4_asn;
    const uint64_t *lv6[MAX_LEVELS]; /* top 64 bits of the v6 starts, same scheme */
    size_t last6[MAX_LEVELS];
    const uint32_t *v6_asn;
    size_t (*find6)(const struct asn_table *t, uint64_t hi);
    const uint64_t *exc_hi, *exc_lo;
    const uint32_t *exc_first, *exc_asn;
    const uint8_t *names;
    const char *strings;
    size_t n4, n6, n6_bounds, ne, nsub, n_names, strings_len;
};

static size_t find6_scalar(const asn_table_t *t, uint64_t hi);
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_FIND6_AVX2 1
__attribute__((target("avx2"))) static size_t find6_avx2(const asn_table_t *t, uint64_t hi);
#endif

static bool section_ok(uint64_t off, uint64_t len, size_t size)
{
    return off % 8 == 0 && off >= HDR_SIZE && off <= size && len <= size - off;
}

/* Open-time check of one family's section: keys strictly ascending from 0, pads all-ones, every
 * index level exactly the sampling of the level below (so a lookup can trust the index). */
static bool check32(const uint8_t *sec, size_t n, const struct idx_layout *L)
{
    const uint32_t *k = (const uint32_t *)(const void *)sec;
    bool ok = k[0] == 0;
    for (size_t i = 1; ok && i < n; i++)
        ok = k[i - 1] < k[i];
    for (unsigned l = 0; ok && l < L->levels; l++) {
        const uint32_t *c = (const uint32_t *)(const void *)(sec + L->off[l]);
        const uint32_t *below = l ? (const uint32_t *)(const void *)(sec + L->off[l - 1]) : NULL;
        size_t sz = L->size[l], padded = (sz + 15) / 16 * 16;
        for (size_t i = 0; ok && i < padded; i++)
            ok = i >= sz ? c[i] == UINT32_MAX : (!below || c[i] == below[i * 16]);
    }
    return ok;
}

static bool check64(const uint8_t *sec, size_t n, const struct idx_layout *L)
{
    const uint64_t *k = (const uint64_t *)(const void *)sec;
    bool ok = k[0] == 0;
    for (size_t i = 1; ok && i < n; i++)
        ok = k[i - 1] < k[i];
    for (unsigned l = 0; ok && l < L->levels; l++) {
        const uint64_t *c = (const uint64_t *)(const void *)(sec + L->off[l]);
        const uint64_t *below = l ? (const uint64_t *)(const void *)(sec + L->off[l - 1]) : NULL;
        size_t sz = L->size[l], padded = (sz + 7) / 8 * 8;
        for (size_t i = 0; ok && i < padded; i++)
            ok = i >= sz ? c[i] == UINT64_MAX : (!below || c[i] == below[i * 8]);
    }
    return ok;
}

asn_table_t *asn_table_open(const char *path, char *err, size_t errlen)
{
    asn_table_t *t = NULL;
    void *map = MAP_FAILED;
    struct stat sb;
    size_t size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        set_err(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &sb) != 0) {
        set_err(err, errlen, "%s: %s", path, strerror(errno));
        goto fail;
    }
    size = (size_t)sb.st_size;
    if (size < HDR_SIZE) {
        set_err(err, errlen, "%s: truncated: %zu bytes, the header alone is %u", path, size,
                HDR_SIZE);
        goto fail;
    }
    map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        set_err(err, errlen, "%s: mmap: %s", path, strerror(errno));
        goto fail;
    }
    const uint8_t *m = map;
    if (memcmp(m, ASN_TABLE_MAGIC, 8) != 0) {
        set_err(err, errlen, "%s: bad magic (not a compiled ASN table)", path);
        goto fail;
    }
    uint32_t version = get_u32(m + 8);
    if (version != ASN_TABLE_VERSION) {
        set_err(err, errlen, "%s: unsupported version %u (expected %u)", path, version,
                ASN_TABLE_VERSION);
        goto fail;
    }
    uint64_t payload = get_u64(m + 72);
    if (payload != size - HDR_SIZE) {
        set_err(err, errlen, "%s: truncated: header says %llu payload bytes, file has %zu", path,
                (unsigned long long)payload, size - HDR_SIZE);
        goto fail;
    }
    size_t n4 = get_u32(m + 16), n6 = get_u32(m + 20), nn = get_u32(m + 24);
    size_t ne = get_u32(m + 28), nsub = get_u32(m + 84);
    uint64_t v4_off = get_u64(m + 32), v6_off = get_u64(m + 40), names_off = get_u64(m + 48);
    uint64_t str_off = get_u64(m + 56), str_len = get_u64(m + 64), exc_off = get_u64(m + 88);
    struct idx_layout L4, L6;
    idx_layout(n4, 4, &L4);
    idx_layout(n6, 8, &L6);
    if (n4 == 0 || n6 == 0 || v4_off % 64 || v6_off % 64 || L4.levels == MAX_LEVELS ||
        L6.levels == MAX_LEVELS || !section_ok(v4_off, L4.total, size) ||
        !section_ok(v6_off, L6.total, size) || !section_ok(exc_off, exc_size(ne, nsub), size) ||
        !section_ok(names_off, (uint64_t)nn * NAME_REC, size) ||
        !section_ok(str_off, str_len, size)) {
        set_err(err, errlen, "%s: corrupt header: a section lies outside the file", path);
        goto fail;
    }
    if (crc32_ieee(m + HDR_SIZE, size - HDR_SIZE) != get_u32(m + 80)) {
        set_err(err, errlen, "%s: checksum mismatch", path);
        goto fail;
    }
    t = calloc(1, sizeof(*t));
    if (!t) {
        set_err(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    t->map = m;
    t->size = size;
    t->n4 = n4;
    t->n6 = n6;
    t->ne = ne;
    t->nsub = nsub;
    t->n_names = nn;
    t->levels4 = L4.levels;
    for (unsigned l = 0; l < L4.levels; l++) {
        t->lv4[l] = (const uint32_t *)(const void *)(m + v4_off + L4.off[l]);
        t->last4[l] = L4.size[l] - 1;
    }
    t->v4_asn = (const uint32_t *)(const void *)(m + v4_off + L4.asn_off);
    t->levels6 = L6.levels;
    for (unsigned l = 0; l < L6.levels; l++) {
        t->lv6[l] = (const uint64_t *)(const void *)(m + v6_off + L6.off[l]);
        t->last6[l] = L6.size[l] - 1;
    }
    t->v6_asn = (const uint32_t *)(const void *)(m + v6_off + L6.asn_off);
    t->find6 = find6_scalar;
#ifdef HAVE_FIND6_AVX2
    if (__builtin_cpu_supports("avx2"))
        t->find6 = find6_avx2;
#endif
    const uint8_t *exc = m + exc_off;
    t->n6_bounds = get_u32(exc);
    t->exc_hi = (const uint64_t *)(const void *)(exc + EXC_HI_OFF);
    t->exc_first = (const uint32_t *)(const void *)(exc + exc_first_off(ne));
    t->exc_lo = (const uint64_t *)(const void *)(exc + exc_lo_off(ne));
    t->exc_asn = (const uint32_t *)(const void *)(t->exc_lo + nsub);
    t->names = m + names_off;
    t->strings = (const char *)(m + str_off);
    t->strings_len = str_len;

    /* The checksum proves the file is what a compiler wrote, not that the compiler was ours:
     * check the invariants the search relies on, once, so a lookup never needs to. */
    bool ok = check32(m + v4_off, n4, &L4) && check64(m + v6_off, n6, &L6) &&
              t->exc_first[0] == 0 && t->exc_first[ne] == nsub;
    for (size_t e = 0; ok && e < ne; e++) {
        uint32_t f = t->exc_first[e], l = t->exc_first[e + 1];
        ok = f < l && l <= nsub && t->exc_lo[f] == 0 && (e == 0 || t->exc_hi[e - 1] < t->exc_hi[e]);
        for (uint32_t k = f + 1; ok && k < l; k++)
            ok = t->exc_lo[k - 1] < t->exc_lo[k];
    }
    for (size_t i = 0; ok && i < nn; i++) {
        const uint8_t *rec = t->names + NAME_REC * i;
        uint64_t end = (uint64_t)get_u32(rec + 4) + get_u16(rec + 8) + get_u16(rec + 10);
        ok = end <= str_len && (i == 0 || get_u32(rec - NAME_REC) < get_u32(rec));
    }
    if (!ok) {
        set_err(err, errlen, "%s: corrupt table: starts or names out of order or out of bounds",
                path);
        goto fail;
    }
    close(fd); /* the mapping stays valid without the descriptor */
    return t;
fail:
    free(t);
    if (map != MAP_FAILED)
        munmap(map, size);
    close(fd);
    return NULL;
}

void asn_table_close(asn_table_t *t)
{
    if (!t)
        return;
    munmap((void *)(uintptr_t)t->map, t->size);
    free(t);
}

/* Keys <= x in one sorted block. Sorted means the "<=" lanes are a prefix, so the count is the
 * position of the first ">" lane: with SSE2, four compares, two packs, one movemask and a bsf —
 * a short dependency chain instead of sixteen chained compare-and-adds. */
static inline unsigned count16(const uint32_t *blk, uint32_t x)
{
#if defined(__SSE2__)
    const __m128i bias = _mm_set1_epi32(INT32_MIN); /* unsigned compare via signed */
    const __m128i xv = _mm_xor_si128(_mm_set1_epi32((int32_t)x), bias);
    const __m128i *p = (const __m128i *)(const void *)blk; /* 64-byte aligned in the map */
    __m128i g0 = _mm_cmpgt_epi32(_mm_xor_si128(_mm_load_si128(p), bias), xv);
    __m128i g1 = _mm_cmpgt_epi32(_mm_xor_si128(_mm_load_si128(p + 1), bias), xv);
    __m128i g2 = _mm_cmpgt_epi32(_mm_xor_si128(_mm_load_si128(p + 2), bias), xv);
    __m128i g3 = _mm_cmpgt_epi32(_mm_xor_si128(_mm_load_si128(p + 3), bias), xv);
    __m128i g = _mm_packs_epi16(_mm_packs_epi32(g0, g1), _mm_packs_epi32(g2, g3));
    return (unsigned)__builtin_ctz((unsigned)_mm_movemask_epi8(g) | 0x10000u);
#else
    unsigned c[16];
    for (unsigned k = 0; k < 16; k++)
        c[k] = blk[k] <= x;
    return ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7])) +
           ((c[8] + c[9]) + (c[10] + c[11])) + ((c[12] + c[13]) + (c[14] + c[15]));
#endif
}

/* The same for 8 u64 keys: SSE2 has no 64-bit compare, so a balanced sum of independent
 * compares (depth 3) rather than a chain. */
static inline unsigned count8(const uint64_t *blk, uint64_t x)
{
    unsigned c0 = blk[0] <= x, c1 = blk[1] <= x, c2 = blk[2] <= x, c3 = blk[3] <= x;
    unsigned c4 = blk[4] <= x, c5 = blk[5] <= x, c6 = blk[6] <= x, c7 = blk[7] <= x;
    return ((c0 + c1) + (c2 + c3)) + ((c4 + c5) + (c6 + c7));
}

/* v6 index descent, the last main entry whose top 64 bits are <= hi. With AVX2 (chosen at open
 * time) a block of 8 u64 keys is two 4-lane compares; SSE2 has no 64-bit compare. */
static size_t find6_scalar(const asn_table_t *t, uint64_t hi)
{
    size_t j = 0;
    for (unsigned l = t->levels6; l-- > 0;) {
        j = 8 * j + count8(t->lv6[l] + 8 * j, hi) - 1;
        j = j > t->last6[l] ? t->last6[l] : j;
    }
    return j;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2"))) static size_t find6_avx2(const asn_table_t *t, uint64_t hi)
{
    const __m256i bias = _mm256_set1_epi64x(INT64_MIN); /* unsigned compare via signed */
    const __m256i xv = _mm256_xor_si256(_mm256_set1_epi64x((int64_t)hi), bias);
    size_t j = 0;
    for (unsigned l = t->levels6; l-- > 0;) {
        const __m256i *p = (const __m256i *)(const void *)(t->lv6[l] + 8 * j);
        __m256i g0 = _mm256_cmpgt_epi64(_mm256_xor_si256(_mm256_load_si256(p), bias), xv);
        __m256i g1 = _mm256_cmpgt_epi64(_mm256_xor_si256(_mm256_load_si256(p + 1), bias), xv);
        unsigned m = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(g0)) |
                     (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(g1)) << 4 | 0x100u;
        j = 8 * j + (unsigned)__builtin_ctz(m) - 1;
        j = j > t->last6[l] ? t->last6[l] : j;
    }
    return j;
}
#endif

/* Index of the last key <= x: one block per level, root first. The first key of every visited
 * block is <= x (the root starts with key 0, every other block with the key that chose it), so
 * the count is >= 1; all-ones pads only count for x = all-ones and are clamped away. */
uint32_t asn_table_lookup_v4(const asn_table_t *t, uint32_t addr)
{
    size_t j = 0;
    for (unsigned l = t->levels4; l-- > 0;) {
        j = 16 * j + count16(t->lv4[l] + 16 * j, addr) - 1;
        j = j > t->last4[l] ? t->last4[l] : j;
    }
    return t->v4_asn[j];
}

uint32_t asn_table_lookup_v6(const asn_table_t *t, const uint8_t addr[16])
{
    uint64_t hi, lo;
    memcpy(&hi, addr, 8);
    memcpy(&lo, addr + 8, 8);
    hi = __builtin_bswap64(hi);
    lo = __builtin_bswap64(lo);
    size_t j = t->find6(t, hi);
    if (__builtin_expect(t->lv6[0][j] == hi, 0) && t->ne) {
        /* the address is in a /64 that starts a range: is it one with finer boundaries? */
        size_t a = 0, b = t->ne;
        while (a < b) {
            size_t mid = a + (b - a) / 2;
            if (t->exc_hi[mid] < hi)
                a = mid + 1;
            else
                b = mid;
        }
        if (a < t->ne && t->exc_hi[a] == hi) {
            size_t f = t->exc_first[a], n = t->exc_first[a + 1] - f; /* exc_lo[f] == 0 */
            const uint64_t *base = t->exc_lo + f;
            while (n > 1) {
                size_t half = n / 2;
                base = base[half] <= lo ? base + half : base;
                n -= half;
            }
            return t->exc_asn[base - t->exc_lo];
        }
    }
    return t->v6_asn[j];
}

int asn_table_info(const asn_table_t *t, uint32_t asn, const char **country, size_t *country_len,
                   const char **name, size_t *name_len)
{
    size_t lo = 0, hi = t->n_names;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t a = get_u32(t->names + NAME_REC * mid);
        if (a < asn) {
            lo = mid + 1;
        } else if (a > asn) {
            hi = mid;
        } else {
            const uint8_t *rec = t->names + NAME_REC * mid;
            const char *s = t->strings + get_u32(rec + 4);
            size_t cl = get_u16(rec + 8), nl = get_u16(rec + 10);
            if (country)
                *country = s;
            if (country_len)
                *country_len = cl;
            if (name)
                *name = s + cl;
            if (name_len)
                *name_len = nl;
            return 0;
        }
    }
    return TERN_ENOENT;
}

void asn_table_counts(const asn_table_t *t, size_t *v4, size_t *v6, size_t *names)
{
    if (v4)
        *v4 = t->n4;
    if (v6)
        *v6 = t->n6_bounds;
    if (names)
        *names = t->n_names;
}
