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
 * Lookups descend a static B+ tree (layout in the header): per level, the count of keys <= x in
 * one 128-byte node, with AVX2 compares when the CPU has them (chosen at open) or a branch-free
 * scalar loop otherwise. Nothing on the path branches on the data, so the CPU overlaps
 * consecutive lookups instead of flushing on mispredictions. The leaves hold the ASNs (and, for
 * v6, the exception bits) next to their keys: the common path reads one node per level and
 * nothing else. The levels above the leaves are a few hundred KB and stay cached; the leaf is
 * usually the one miss. Figures: bench/README.md.
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

#include "tern/common/err.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "asn_table uses the file's little-endian arrays in place; big-endian hosts need a port"
#endif

__extension__ typedef unsigned __int128 u128;

#define HDR_SIZE    96u
#define NAME_REC    12u
#define V4_MAX      ((u128)UINT32_MAX)
#define V6_MAX      (~(u128)0)
#define NAME_MAXLEN 65535u /* u16 length field */
#define CC_MAXLEN   65535u

/* ---------------------------------------------------------------------------------------------
 * helpers
 */

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

static size_t align128(size_t n)
{
    return (n + 127) & ~(size_t)127;
}

/* ---------------------------------------------------------------------------------------------
 * search trees (layout in the header), shared by the compiler and the loader: sizes and offsets
 * follow from the entry count only.
 *
 * Why these sizes: a node is two adjacent cache lines, fetched as a pair, compared with four
 * 256-bit loads; 32 u32 or 16 u64 keys per node keep the real tables at 3 (v4, 467k entries)
 * and 4 (v6, 178k) internal levels, and the few hundred KB of level 1 in L2. The v4 leaf
 * (16 entries, 128 bytes) halves level 1 against a one-line leaf; the v6 leaf stays one line
 * (5 keys of 8 bytes, their ASNs and the exception bits fill 64 bytes) so a leaf miss is one
 * line. Wider nodes or more levels measured slower (bench/README.md).
 */
#define NODE_SIZE   128u
#define V4_FAN      32u /* u32 keys per internal v4 node */
#define V6_FAN      16u /* u64 keys per internal v6 node */
#define V4_PER_LEAF 16u /* v4 leaf: u32 key[16], u32 asn[16] */
#define V4_LEAF     128u
#define V4_LEAF_ASN 64u
#define V6_PER_LEAF 5u /* v6 leaf: u64 key[5], u32 asn[5], u32 exception bits */
#define V6_LEAF     64u
#define V6_LEAF_ASN 40u
#define V6_LEAF_EXC 60u
#define MAX_LEVELS  8u /* internal levels: 5 * 16^8 > 2^32 v6 entries, 16 * 32^6 > 2^32 v4 ones */
#define BIAS32      0x80000000u
#define BIAS64      0x8000000000000000ull

struct tree_layout {
    size_t leaves;               /* >= 1 */
    unsigned levels;             /* internal levels above the leaves (0: a single leaf) */
    size_t keys[MAX_LEVELS + 1]; /* real keys of level l = leaves or nodes of level l - 1 */
    size_t off[MAX_LEVELS + 1];  /* offset of level l in the section (level 0: the leaves) */
    size_t total;                /* section bytes, a multiple of 128 */
};

/* false when n needs more than MAX_LEVELS levels (impossible for a u32 count) */
static bool tree_layout(size_t n, size_t per_leaf, size_t leaf_size, size_t fan,
                        struct tree_layout *L)
{
    size_t cnt = n ? (n + per_leaf - 1) / per_leaf : 1;
    size_t off = align128(cnt * leaf_size);
    L->leaves = cnt;
    L->levels = 0;
    L->off[0] = 0;
    L->keys[0] = n;
    while (cnt > 1) {
        if (L->levels == MAX_LEVELS)
            return false;
        L->levels++;
        L->keys[L->levels] = cnt;
        L->off[L->levels] = off;
        cnt = (cnt + fan - 1) / fan;
        off += cnt * NODE_SIZE;
    }
    L->total = off;
    return true;
}

/* keys are stored biased (top bit flipped): signed compares then order them as unsigned */
static void put_key(uint8_t *p, size_t ksize, uint64_t k)
{
    if (ksize == 4)
        put_u32(p, (uint32_t)k ^ BIAS32);
    else
        put_u64(p, k ^ BIAS64);
}

static uint64_t get_key(const uint8_t *p, size_t ksize)
{
    return ksize == 4 ? get_u32(p) ^ BIAS32 : get_u64(p) ^ BIAS64;
}

static uint64_t key_max(size_t ksize)
{
    return ksize == 4 ? UINT32_MAX : UINT64_MAX;
}

/* Compiler: fill the internal levels from the leaves' keys (already written). */
static void tree_fill(uint8_t *sec, const struct tree_layout *L, size_t ksize, size_t leaf_size,
                      size_t fan)
{
    for (unsigned l = 1; l <= L->levels; l++) {
        const uint8_t *below = sec + L->off[l - 1];
        size_t stride = l == 1 ? leaf_size : NODE_SIZE, nodes = (L->keys[l] + fan - 1) / fan;
        for (size_t q = 0; q < nodes * fan; q++) {
            if (q < L->keys[l])
                memcpy(sec + L->off[l] + ksize * q, below + stride * q, ksize);
            else
                put_key(sec + L->off[l] + ksize * q, ksize, key_max(ksize));
        }
    }
}

/* Loader: the invariants the descent relies on — entry keys strictly ascending from 0, pad
 * lanes all-ones with ASN 0, every internal key the first key of its child, pads all-ones. */
static bool tree_check(const uint8_t *sec, const struct tree_layout *L, size_t ksize,
                       size_t per_leaf, size_t leaf_size, size_t asn_off, size_t fan)
{
    size_t n = L->keys[0];
    uint64_t prev = 0;
    for (size_t i = 0; i < L->leaves * per_leaf; i++) {
        const uint8_t *leaf = sec + leaf_size * (i / per_leaf);
        size_t lane = i % per_leaf;
        uint64_t k = get_key(leaf + ksize * lane, ksize);
        if (i < n ? (i == 0 ? k != 0 : k <= prev)
                  : (k != key_max(ksize) || get_u32(leaf + asn_off + 4 * lane) != 0))
            return false;
        prev = k;
    }
    for (unsigned l = 1; l <= L->levels; l++) {
        const uint8_t *below = sec + L->off[l - 1], *k = sec + L->off[l];
        size_t stride = l == 1 ? leaf_size : NODE_SIZE, nodes = (L->keys[l] + fan - 1) / fan;
        for (size_t q = 0; q < nodes * fan; q++) {
            if (q < L->keys[l] ? memcmp(k + ksize * q, below + stride * q, ksize) != 0
                               : get_key(k + ksize * q, ksize) != key_max(ksize))
                return false;
        }
    }
    return true;
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
            tern_set_err(err, errlen, "%s:%zu: expected 3 to 5 tab-separated fields, got %s%d",
                         file, lineno, nf > 5 ? "more than " : "", nf > 5 ? 5 : nf);
            return TERN_ESYNTAX;
        }
        cc = nf > 3 ? f[3] : NULL;
        name = nf > 4 ? f[4] : NULL;
    } else {
        nf = split_csv(line, f, 4);
        if (nf < 0) {
            tern_set_err(err, errlen, "%s:%zu: unterminated or misplaced quote", file, lineno);
            return TERN_ESYNTAX;
        }
        if (nf != 4) {
            tern_set_err(err, errlen, "%s:%zu: expected 4 comma-separated fields, got %s%d", file,
                         lineno, nf > 4 ? "more than " : "", nf > 4 ? 4 : nf);
            return TERN_ESYNTAX;
        }
        name = f[3];
    }
    struct range r = {.seq = c->seq};
    u128 end;
    int fam = parse_addr(f[0], &r.start);
    if (fam < 0) {
        tern_set_err(err, errlen, "%s:%zu: invalid start address '%s'", file, lineno, f[0]);
        return TERN_ESYNTAX;
    }
    int fam2 = parse_addr(f[1], &end);
    if (fam2 < 0) {
        tern_set_err(err, errlen, "%s:%zu: invalid end address '%s'", file, lineno, f[1]);
        return TERN_ESYNTAX;
    }
    if (fam != fam2) {
        tern_set_err(err, errlen, "%s:%zu: start and end are of different address families", file,
                     lineno);
        return TERN_ESYNTAX;
    }
    r.end = end;
    if (r.start > r.end) {
        tern_set_err(err, errlen, "%s:%zu: start %s > end %s", file, lineno, f[0], f[1]);
        return TERN_ESYNTAX;
    }
    if (!parse_asn(f[2], &r.asn)) {
        tern_set_err(err, errlen, "%s:%zu: bad ASN '%s'", file, lineno, f[2]);
        return TERN_ESYNTAX;
    }
    int rc = ranges_push(fam ? &c->r6 : &c->r4, &r);
    if (rc == 0 && cc && strcmp(cc, "None") == 0)
        cc = NULL; /* iptoasn writes "None" for unrouted space */
    if (rc == 0)
        rc = name_add(c, r.asn, cc, name);
    if (rc)
        tern_set_err(err, errlen, "%s:%zu: out of memory", file, lineno);
    c->seq++;
    return rc;
}

static int read_file(struct compiler *c, const char *path, asn_table_compile_stats_t *st, char *err,
                     size_t errlen)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        int e = errno;
        tern_set_err(err, errlen, "%s: %s", path, strerror(e));
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
            tern_set_err(err, errlen, "%s:%zu: NUL byte in line", path, lineno);
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
        tern_set_err(err, errlen, "%s: read error", path);
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

/* The v6 main entries and exceptions, from the boundaries: one main entry per /64 that holds a
 * boundary; a /64 holding a boundary below its first address or several becomes an exception
 * (sub-list (lo, asn) from lo 0, the main entry's asn field is its index), and is followed by a
 * main entry at the next /64 carrying the ASN in effect at its end, unless a boundary starts
 * there anyway — so an exception entry covers exactly its /64. Run once with sec == NULL to
 * count, once to write. */
struct v6_out {
    uint8_t *sec, *exc; /* NULL: count only */
    size_t ne, nsub;    /* totals from the counting pass (exception section offsets) */
    size_t main, e, s;  /* running counts */
};

static void v6_put_main(struct v6_out *o, uint64_t hi, uint32_t asn, bool exc)
{
    if (o->sec) {
        uint8_t *leaf = o->sec + V6_LEAF * (o->main / V6_PER_LEAF);
        size_t lane = o->main % V6_PER_LEAF;
        put_key(leaf + 8 * lane, 8, hi);
        put_u32(leaf + V6_LEAF_ASN + 4 * lane, asn);
        if (exc)
            put_u32(leaf + V6_LEAF_EXC, get_u32(leaf + V6_LEAF_EXC) | 1u << lane);
    }
    o->main++;
}

static void v6_put_sub(struct v6_out *o, uint64_t lo, uint32_t asn)
{
    if (o->exc) {
        put_u64(o->exc + exc_lo_off(o->ne) + 8 * o->s, lo);
        put_u32(o->exc + exc_lo_off(o->ne) + 8 * o->nsub + 4 * o->s, asn);
    }
    o->s++;
}

static void v6_build(const struct bounds *b6, struct v6_out *o)
{
    for (size_t i = 0; i < b6->n;) {
        uint64_t hi = (uint64_t)(b6->v[i].key >> 64);
        size_t j = i + 1;
        while (j < b6->n && (uint64_t)(b6->v[j].key >> 64) == hi)
            j++;
        if (j - i == 1 && (uint64_t)b6->v[i].key == 0) {
            v6_put_main(o, hi, b6->v[i].asn, false);
            i = j;
            continue;
        }
        if (o->exc) {
            put_u64(o->exc + EXC_HI_OFF + 8 * o->e, hi);
            put_u32(o->exc + exc_first_off(o->ne) + 4 * o->e, (uint32_t)o->s);
        }
        v6_put_main(o, hi, (uint32_t)o->e, true);
        o->e++;
        if ((uint64_t)b6->v[i].key != 0) /* i > 0: the first boundary is :: */
            v6_put_sub(o, 0, b6->v[i - 1].asn);
        for (size_t k = i; k < j; k++)
            v6_put_sub(o, (uint64_t)b6->v[k].key, b6->v[k].asn);
        if (hi != UINT64_MAX && (j == b6->n || (uint64_t)(b6->v[j].key >> 64) != hi + 1))
            v6_put_main(o, hi + 1, b6->v[j - 1].asn, false);
        i = j;
    }
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
    struct v6_out plan = {0};
    v6_build(b6, &plan);
    size_t n6 = plan.main, ne = plan.e, nsub = plan.s;
    struct tree_layout L4, L6;
    if (b4->n > UINT32_MAX || b6->n > UINT32_MAX || n6 > UINT32_MAX || nsub > UINT32_MAX ||
        n_names > UINT32_MAX || str_total > UINT32_MAX ||
        !tree_layout(b4->n, V4_PER_LEAF, V4_LEAF, V4_FAN, &L4) ||
        !tree_layout(n6, V6_PER_LEAF, V6_LEAF, V6_FAN, &L6)) {
        tern_set_err(err, errlen, "%s: table too large", out_path);
        return TERN_ERANGE;
    }

    size_t v4_off = align128(HDR_SIZE);
    size_t v6_off = v4_off + L4.total;
    size_t exc_off = v6_off + L6.total;
    size_t names_off = align8(exc_off + exc_size(ne, nsub));
    size_t strings_off = names_off + n_names * NAME_REC;
    size_t total = strings_off + str_total;
    buf = calloc(1, total);
    if (!buf) {
        tern_set_err(err, errlen, "%s: out of memory", out_path);
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

    uint8_t *sec = buf + v4_off; /* pad lanes: all-ones keys, ASN 0 (calloc) */
    for (size_t i = 0; i < L4.leaves * V4_PER_LEAF; i++) {
        uint8_t *leaf = sec + V4_LEAF * (i / V4_PER_LEAF);
        size_t lane = i % V4_PER_LEAF;
        put_key(leaf + 4 * lane, 4, i < b4->n ? (uint64_t)b4->v[i].key : UINT32_MAX);
        if (i < b4->n)
            put_u32(leaf + V4_LEAF_ASN + 4 * lane, b4->v[i].asn);
    }
    tree_fill(sec, &L4, 4, V4_LEAF, V4_FAN);

    sec = buf + v6_off;
    for (size_t i = n6; i < L6.leaves * V6_PER_LEAF; i++)
        put_key(sec + V6_LEAF * (i / V6_PER_LEAF) + 8 * (i % V6_PER_LEAF), 8, UINT64_MAX);
    uint8_t *exc = buf + exc_off;
    struct v6_out o = {.sec = sec, .exc = exc, .ne = ne, .nsub = nsub};
    v6_build(b6, &o);
    put_u32(exc, (uint32_t)b6->n);
    put_u32(exc + exc_first_off(ne) + 4 * ne, (uint32_t)nsub);
    tree_fill(sec, &L6, 8, V6_LEAF, V6_FAN);

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
        tern_set_err(err, errlen, "%s: out of memory", out_path);
        goto done;
    }
    memcpy(tmp, out_path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    fp = fopen(tmp, "wb");
    if (!fp || fwrite(buf, 1, total, fp) != total || fflush(fp) != 0 || fsync(fileno(fp)) != 0) {
        rc = errno ? -errno : TERN_EINVAL;
        tern_set_err(err, errlen, "%s: %s", tmp, strerror(-rc));
        if (fp)
            fclose(fp);
        fp = NULL;
        unlink(tmp);
        goto done;
    }
    if (fclose(fp) != 0) {
        fp = NULL;
        rc = -errno;
        tern_set_err(err, errlen, "%s: %s", tmp, strerror(-rc));
        unlink(tmp);
        goto done;
    }
    fp = NULL;
    if (rename(tmp, out_path) != 0) {
        rc = -errno;
        tern_set_err(err, errlen, "%s: rename: %s", out_path, strerror(-rc));
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
        tern_set_err(err, errlen, "%s: out of memory", out_path);
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

struct tree {
    const uint8_t *level[MAX_LEVELS + 1]; /* level[0]: the leaves; level[levels]: the root */
    unsigned levels;
};

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* an entry: its leaf and its lane in the leaf */
struct slot {
    const uint8_t *leaf;
    size_t lane;
};

struct asn_table {
    const uint8_t *map;
    size_t size;
    struct tree v4, v6;
    /* The lookups, compiled once per descent (AVX2 or portable) and chosen at open. */
    uint32_t (*look4)(const struct asn_table *t, uint32_t addr);
    uint32_t (*look6)(const struct asn_table *t, const uint8_t *addr);
    uint32_t (*pfx4)(const struct asn_table *t, uint32_t addr, uint8_t *prefix);
    uint32_t (*pfx6)(const struct asn_table *t, const uint8_t *addr, uint8_t *prefix);
    /* The descents compare "key < x + 1", so the all-ones key is left to the lookups: it is the
     * last entry's. */
    struct slot last4, last6;
    const uint8_t *last4_key, *last6_key; /* where the last entries' keys are */
    const uint64_t *exc_hi, *exc_lo;
    const uint32_t *exc_first, *exc_asn;
    const uint8_t *names;
    const char *strings;
    size_t n4, n6, n6_bounds, ne, nsub, n_names, strings_len;
    int v6_whole; /* one v6 entry for the whole space */
};

#if defined(__SSE2__)
#include <emmintrin.h>
/* Keys (biased) below x1 (unbiased, >= 1) among n (a multiple of 16). With SSE2, x86-64's
 * baseline, 16 at a time: four compares, two order-preserving packs, one movemask; the keys are
 * sorted, so the set bits are a prefix and their count is the trailing zeros of the complement. */
ALWAYS_INLINE size_t count_lt32(const uint8_t *k, size_t n, uint32_t x1)
{
    const __m128i x = _mm_set1_epi32((int)(x1 ^ BIAS32));
    size_t c = 0;
    for (size_t i = 0; i < n; i += 16) {
        const __m128i *p = (const __m128i *)(const void *)(k + 4 * i); /* 64-aligned */
        __m128i a = _mm_packs_epi32(_mm_cmpgt_epi32(x, _mm_load_si128(p)),
                                    _mm_cmpgt_epi32(x, _mm_load_si128(p + 1)));
        __m128i b = _mm_packs_epi32(_mm_cmpgt_epi32(x, _mm_load_si128(p + 2)),
                                    _mm_cmpgt_epi32(x, _mm_load_si128(p + 3)));
        c += (size_t)__builtin_ctz(~(unsigned)_mm_movemask_epi8(_mm_packs_epi16(a, b)));
    }
    return c;
}
#else
/* Keys (biased) below x1 (unbiased, >= 1) among n: independent compares, no branch. */
ALWAYS_INLINE size_t count_lt32(const uint8_t *k, size_t n, uint32_t x1)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += (get_u32(k + 4 * i) ^ BIAS32) < x1;
    return c;
}
#endif

ALWAYS_INLINE size_t count_lt64(const uint8_t *k, size_t n, uint64_t x1)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += (get_u64(k + 8 * i) ^ BIAS64) < x1;
    return c;
}

/* The portable descent (SSE2 for v4 on x86-64, plain C otherwise). Every visited node's first key
 * is <= x (the root's is 0, every other one is the key that chose it), so a count is >= 1; the
 * all-ones pads are never < x + 1. */
ALWAYS_INLINE struct slot find4_scalar(const asn_table_t *t, uint32_t x)
{
    size_t j = 0;
    for (unsigned l = t->v4.levels; l > 0; l--)
        j = V4_FAN * j + count_lt32(t->v4.level[l] + NODE_SIZE * j, V4_FAN, x + 1) - 1;
    const uint8_t *leaf = t->v4.level[0] + V4_LEAF * j;
    return (struct slot){leaf, count_lt32(leaf, V4_PER_LEAF, x + 1) - 1};
}

ALWAYS_INLINE struct slot find6_scalar(const asn_table_t *t, uint64_t hi)
{
    size_t j = 0;
    for (unsigned l = t->v6.levels; l > 0; l--)
        j = V6_FAN * j + count_lt64(t->v6.level[l] + NODE_SIZE * j, V6_FAN, hi + 1) - 1;
    const uint8_t *leaf = t->v6.level[0] + V6_LEAF * j;
    return (struct slot){leaf, count_lt64(leaf + 8, V6_PER_LEAF - 1, hi + 1)}; /* key 0 <= hi */
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2 1
#include <immintrin.h>
#include <cpuid.h>
#define TARGET_AVX2 __attribute__((target("avx2,popcnt,lzcnt")))
#define FALLTHROUGH __attribute__((fallthrough))

/* Keys < x + 1 in one node: the compares take the keys straight from memory (biased keys, so a
 * signed compare is right, and "<" against x + 1 lets the key be the memory operand), two
 * saturating packs narrow the lane masks to one byte per key — in-lane packing scrambles the
 * order, which a popcount doesn't care about — and one movemask + popcount counts them. */
TARGET_AVX2 static inline unsigned v4_node_avx2(const uint8_t *nd, __m256i x1)
{
    const __m256i *p = (const __m256i *)(const void *)nd; /* 128-aligned in the map */
    __m256i a = _mm256_packs_epi32(_mm256_cmpgt_epi32(x1, _mm256_load_si256(p)),
                                   _mm256_cmpgt_epi32(x1, _mm256_load_si256(p + 1)));
    __m256i b = _mm256_packs_epi32(_mm256_cmpgt_epi32(x1, _mm256_load_si256(p + 2)),
                                   _mm256_cmpgt_epi32(x1, _mm256_load_si256(p + 3)));
    return (unsigned)__builtin_popcount((unsigned)_mm256_movemask_epi8(_mm256_packs_epi16(a, b)));
}

TARGET_AVX2 static inline unsigned v4_leaf_avx2(const uint8_t *lf, __m256i x1)
{
    const __m256i *p = (const __m256i *)(const void *)lf; /* two bits per key */
    __m256i a = _mm256_packs_epi32(_mm256_cmpgt_epi32(x1, _mm256_load_si256(p)),
                                   _mm256_cmpgt_epi32(x1, _mm256_load_si256(p + 1)));
    return (unsigned)__builtin_popcount((unsigned)_mm256_movemask_epi8(a)) / 2;
}

TARGET_AVX2 static inline unsigned v6_node_avx2(const uint8_t *nd, __m256i x1)
{
    const __m256i *p = (const __m256i *)(const void *)nd; /* two bytes per key */
    __m256i a = _mm256_packs_epi32(_mm256_cmpgt_epi64(x1, _mm256_load_si256(p)),
                                   _mm256_cmpgt_epi64(x1, _mm256_load_si256(p + 1)));
    __m256i b = _mm256_packs_epi32(_mm256_cmpgt_epi64(x1, _mm256_load_si256(p + 2)),
                                   _mm256_cmpgt_epi64(x1, _mm256_load_si256(p + 3)));
    return (unsigned)__builtin_popcount((unsigned)_mm256_movemask_epi8(_mm256_packs_epi16(a, b))) /
           2;
}

/* The levels unrolled: a jump into the chain at the tree's height (always the same target, so
 * predicted) rather than a loop, which measured ~15% slower. */
#define STEP4(l) j = V4_FAN * j + v4_node_avx2(t->v4.level[l] + NODE_SIZE * j, x1) - 1
#define STEP6(l) j = V6_FAN * j + v6_node_avx2(t->v6.level[l] + NODE_SIZE * j, x1) - 1

TARGET_AVX2 ALWAYS_INLINE struct slot find4_avx2(const asn_table_t *t, uint32_t x)
{
    const __m256i x1 = _mm256_set1_epi32((int)((x + 1) ^ BIAS32));
    size_t j = 0;
    switch (t->v4.levels) {
    case 8:
        STEP4(8);
        FALLTHROUGH;
    case 7:
        STEP4(7);
        FALLTHROUGH;
    case 6:
        STEP4(6);
        FALLTHROUGH;
    case 5:
        STEP4(5);
        FALLTHROUGH;
    case 4:
        STEP4(4);
        FALLTHROUGH;
    case 3:
        STEP4(3);
        FALLTHROUGH;
    case 2:
        STEP4(2);
        FALLTHROUGH;
    case 1:
        STEP4(1);
        FALLTHROUGH;
    default:
        break;
    }
    const uint8_t *leaf = t->v4.level[0] + V4_LEAF * j;
    return (struct slot){leaf, v4_leaf_avx2(leaf, x1) - 1};
}

TARGET_AVX2 ALWAYS_INLINE struct slot find6_avx2(const asn_table_t *t, uint64_t hi)
{
    const __m256i x1 = _mm256_set1_epi64x((long long)((hi + 1) ^ BIAS64));
    size_t j = 0;
    switch (t->v6.levels) {
    case 8:
        STEP6(8);
        FALLTHROUGH;
    case 7:
        STEP6(7);
        FALLTHROUGH;
    case 6:
        STEP6(6);
        FALLTHROUGH;
    case 5:
        STEP6(5);
        FALLTHROUGH;
    case 4:
        STEP6(4);
        FALLTHROUGH;
    case 3:
        STEP6(3);
        FALLTHROUGH;
    case 2:
        STEP6(2);
        FALLTHROUGH;
    case 1:
        STEP6(1);
        FALLTHROUGH;
    default:
        break;
    }
    const uint8_t *leaf = t->v6.level[0] + V6_LEAF * j;
    /* keys 1..4 (key 0 <= hi), one unaligned 256-bit load inside the leaf's line */
    __m256i k = _mm256_loadu_si256((const __m256i *)(const void *)(leaf + 8));
    unsigned m = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(x1, k)));
    return (struct slot){leaf, (size_t)__builtin_popcount(m)};
}
#endif

/* ---------------------------------------------------------------------------------------------
 * the lookups, written once over a descent and instantiated per descent (below), so that the
 * descent inlines and, with AVX2, the bit scan is lzcnt (bsr is microcoded on AMD, ~5 cycles)
 */

typedef struct slot (*find4_fn)(const asn_table_t *t, uint32_t x);
typedef struct slot (*find6_fn)(const asn_table_t *t, uint64_t hi);

static inline uint64_t load_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return __builtin_bswap64(v);
}

/* The sub-entry of exception e holding low 64 bits lo (exc_lo[first[e]] == 0 <= lo). */
static size_t exc_sub(const asn_table_t *t, uint32_t e, uint64_t lo)
{
    size_t f = t->exc_first[e], n = t->exc_first[e + 1] - f;
    const uint64_t *base = t->exc_lo + f;
    while (n > 1) {
        size_t half = n / 2;
        base = base[half] <= lo ? base + half : base;
        n -= half;
    }
    return (size_t)(base - t->exc_lo);
}

static inline int hibit(uint64_t v) /* v != 0 */
{
    return 63 - __builtin_clzll(v);
}

/* Exception /64 e: the sub-entry's ASN and prefix. Only the low 64 bits matter: the sub-entry
 * lies inside the /64 and (being one of several) is never all of it. Out of line: it is rare, and
 * a call in the common path would cost it a stack frame. */
__attribute__((noinline, cold)) static uint32_t exc_prefix(const asn_table_t *t, uint32_t e,
                                                           uint64_t lo, uint8_t *prefix)
{
    size_t k = exc_sub(t, e, lo);
    uint64_t start = t->exc_lo[k];
    uint64_t a = start ? lo ^ (start - 1) : UINT64_MAX;
    uint64_t b = k + 1 < t->exc_first[e + 1] ? lo ^ t->exc_lo[k + 1] : UINT64_MAX;
    *prefix = (uint8_t)(128 - hibit(a < b ? a : b));
    return t->exc_asn[k];
}

ALWAYS_INLINE uint32_t look4(const asn_table_t *t, find4_fn find, uint32_t addr)
{
    struct slot s = likely(addr != UINT32_MAX) ? find(t, addr) : t->last4;
    return get_u32(s.leaf + V4_LEAF_ASN + 4 * s.lane);
}

ALWAYS_INLINE uint32_t look6(const asn_table_t *t, find6_fn find, const uint8_t *addr)
{
    uint64_t hi = load_be64(addr);
    struct slot s = likely(hi != UINT64_MAX) ? find(t, hi) : t->last6;
    uint32_t v = get_u32(s.leaf + V6_LEAF_ASN + 4 * s.lane);
    /* the exception bits share the leaf's line: the check costs no miss */
    if (unlikely(get_u32(s.leaf + V6_LEAF_EXC) >> s.lane & 1))
        v = t->exc_asn[exc_sub(t, v, load_be64(addr + 8))];
    return v;
}

/* ECS prefixes. The largest aligned block of 2^k addresses around x inside one entry
 * [start, next) is the largest that holds neither start - 1 nor next; a block around x holds y
 * iff x and y agree above bit k - 1, so k <= hibit(x ^ y) for both, and since hibit is monotonic,
 * k = hibit(min(x ^ (start - 1), x ^ next)) — one bit scan. A side the entry is open to (start 0,
 * no next entry) gets a bit above any bound instead. Masks and conditional moves, no branch:
 * fewer instructions and no mispredictions keep more lookups in flight. */
ALWAYS_INLINE uint32_t pfx4(const asn_table_t *t, find4_fn find, uint32_t addr, uint8_t *prefix)
{
    struct slot s = likely(addr != UINT32_MAX) ? find(t, addr) : t->last4;
    const uint8_t *key = s.leaf + 4 * s.lane;
    /* next: the next lane's key, or for the last lane the next leaf's first — that leaf exists
     * unless this is the last entry, which is open upwards: then its own key is read (offset
     * masked to 0) and bit 32 marks "no bound". Not a branch: the last entry is no rarity (with
     * the real data it is 224/3, an eighth of uniform v4 addresses). */
    size_t last = key == t->last4_key;
    size_t nx = (4 + (s.lane + 1 == V4_PER_LEAF) * (V4_LEAF - V4_LEAF_ASN)) & (last - 1);
    uint64_t next = get_u32(key + nx) ^ BIAS32;
    uint64_t before = (uint64_t)(get_u32(key) ^ BIAS32) - 1;              /* start 0: all-ones */
    uint64_t a = addr ^ before, b = (addr ^ next) | (uint64_t)last << 32; /* b < 2^33 */
    *prefix = (uint8_t)(32 - hibit(a < b ? a : b));
    return get_u32(s.leaf + V4_LEAF_ASN + 4 * s.lane);
}

/* A main entry covers whole /64s, so only the top 64 bits matter: every block up to a /64 fits,
 * and the larger ones are blocks of /64s between its key and the next (exceptions: above). Where
 * the table splits a merged entry at a /64 edge (the entry after an exception /64; an exception's
 * first and last sub-entries) the answer is exact all the same: the real boundary next to such a
 * split lies inside a /64, so no block reaching across the split fits either way. */
ALWAYS_INLINE uint32_t pfx6(const asn_table_t *t, find6_fn find, const uint8_t *addr,
                            uint8_t *prefix)
{
    uint64_t hi = load_be64(addr), lo = load_be64(addr + 8);
    struct slot s = likely(hi != UINT64_MAX) ? find(t, hi) : t->last6;
    uint32_t v = get_u32(s.leaf + V6_LEAF_ASN + 4 * s.lane);
    if (unlikely(get_u32(s.leaf + V6_LEAF_EXC) >> s.lane & 1))
        return exc_prefix(t, v, lo, prefix);
    const uint8_t *key = s.leaf + 8 * s.lane;
    size_t last = key == t->last6_key; /* as for v4; bit 63 marks "no bound" */
    size_t nx = (8 + (s.lane + 1 == V6_PER_LEAF) * (V6_LEAF - V6_LEAF_ASN)) & (last - 1);
    uint64_t start = get_u64(key) ^ BIAS64, next = get_u64(key + nx) ^ BIAS64;
    uint64_t a = (hi ^ (start - 1)) | (uint64_t)(start == 0) << 63; /* start 0: open */
    uint64_t b = (hi ^ next) | (uint64_t)last << 63;
    /* both sides open (one entry for all of v6): the /0 that bit 63 can't say */
    *prefix = (uint8_t)(64 - hibit(a < b ? a : b) - t->v6_whole);
    return v;
}

#define LOOKUPS(isa, ATTR)                                                                         \
    ATTR static uint32_t look4_##isa(const asn_table_t *t, uint32_t addr)                          \
    {                                                                                              \
        return look4(t, find4_##isa, addr);                                                        \
    }                                                                                              \
    ATTR static uint32_t look6_##isa(const asn_table_t *t, const uint8_t *addr)                    \
    {                                                                                              \
        return look6(t, find6_##isa, addr);                                                        \
    }                                                                                              \
    ATTR static uint32_t pfx4_##isa(const asn_table_t *t, uint32_t addr, uint8_t *prefix)          \
    {                                                                                              \
        return pfx4(t, find4_##isa, addr, prefix);                                                 \
    }                                                                                              \
    ATTR static uint32_t pfx6_##isa(const asn_table_t *t, const uint8_t *addr, uint8_t *prefix)    \
    {                                                                                              \
        return pfx6(t, find6_##isa, addr, prefix);                                                 \
    }

LOOKUPS(scalar, )
#ifdef HAVE_AVX2
LOOKUPS(avx2, TARGET_AVX2)
#endif

static bool section_ok(uint64_t off, uint64_t len, size_t size, unsigned align)
{
    return off % align == 0 && off >= HDR_SIZE && off <= size && len <= size - off;
}

static struct slot slot_of(const struct tree *tr, size_t leaf_size, size_t per_leaf, size_t e)
{
    return (struct slot){tr->level[0] + leaf_size * (e / per_leaf), e % per_leaf};
}

static uint64_t v6_key(const asn_table_t *t, size_t e)
{
    struct slot s = slot_of(&t->v6, V6_LEAF, V6_PER_LEAF, e);
    return get_u64(s.leaf + 8 * s.lane) ^ BIAS64;
}

/* Open-time check of the v6 exception bits: an exception entry's asn field is its index (in
 * order, each once), its key is that /64, and the next entry starts at the next /64 (or it is
 * the last entry and the last /64) — so a lookup can trust a set bit. */
static bool v6_exc_check(const asn_table_t *t, size_t leaves)
{
    size_t seen = 0;
    for (size_t i = 0; i < leaves * V6_PER_LEAF; i++) {
        struct slot s = slot_of(&t->v6, V6_LEAF, V6_PER_LEAF, i);
        uint32_t bits = get_u32(s.leaf + V6_LEAF_EXC);
        size_t real = t->n6 - i < V6_PER_LEAF ? t->n6 - i : V6_PER_LEAF; /* i < n6 at lane 0 */
        if (s.lane == 0 && bits >> real != 0)
            return false;
        if (!(bits >> s.lane & 1))
            continue;
        uint64_t k = get_u64(s.leaf + 8 * s.lane) ^ BIAS64;
        if (seen >= t->ne || get_u32(s.leaf + V6_LEAF_ASN + 4 * s.lane) != seen ||
            t->exc_hi[seen] != k || (i + 1 < t->n6 ? v6_key(t, i + 1) != k + 1 : k != UINT64_MAX))
            return false;
        seen++;
    }
    return seen == t->ne;
}

asn_table_t *asn_table_open(const char *path, char *err, size_t errlen)
{
    asn_table_t *t = NULL;
    void *map = MAP_FAILED;
    struct stat sb;
    size_t size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tern_set_err(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &sb) != 0) {
        tern_set_err(err, errlen, "%s: %s", path, strerror(errno));
        goto fail;
    }
    size = (size_t)sb.st_size;
    if (size < HDR_SIZE) {
        tern_set_err(err, errlen, "%s: truncated: %zu bytes, the header alone is %u", path, size,
                     HDR_SIZE);
        goto fail;
    }
    map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        tern_set_err(err, errlen, "%s: mmap: %s", path, strerror(errno));
        goto fail;
    }
    const uint8_t *m = map;
    if (memcmp(m, ASN_TABLE_MAGIC, 8) != 0) {
        tern_set_err(err, errlen, "%s: bad magic (not a compiled ASN table)", path);
        goto fail;
    }
    uint32_t version = get_u32(m + 8);
    if (version != ASN_TABLE_VERSION) {
        tern_set_err(err, errlen, "%s: unsupported version %u (expected %u; recompile the table)",
                     path, version, ASN_TABLE_VERSION);
        goto fail;
    }
    uint64_t payload = get_u64(m + 72);
    if (payload != size - HDR_SIZE) {
        tern_set_err(err, errlen, "%s: truncated: header says %llu payload bytes, file has %zu",
                     path, (unsigned long long)payload, size - HDR_SIZE);
        goto fail;
    }
    size_t n4 = get_u32(m + 16), n6 = get_u32(m + 20), nn = get_u32(m + 24);
    size_t ne = get_u32(m + 28), nsub = get_u32(m + 84);
    uint64_t v4_off = get_u64(m + 32), v6_off = get_u64(m + 40), names_off = get_u64(m + 48);
    uint64_t str_off = get_u64(m + 56), str_len = get_u64(m + 64), exc_off = get_u64(m + 88);
    struct tree_layout L4, L6;
    if (n4 == 0 || n6 == 0 || !tree_layout(n4, V4_PER_LEAF, V4_LEAF, V4_FAN, &L4) ||
        !tree_layout(n6, V6_PER_LEAF, V6_LEAF, V6_FAN, &L6) ||
        !section_ok(v4_off, L4.total, size, 128) || !section_ok(v6_off, L6.total, size, 128) ||
        !section_ok(exc_off, exc_size(ne, nsub), size, 8) ||
        !section_ok(names_off, (uint64_t)nn * NAME_REC, size, 4) ||
        !section_ok(str_off, str_len, size, 1)) {
        tern_set_err(err, errlen, "%s: corrupt header: a section lies outside the file", path);
        goto fail;
    }
    if (crc32_ieee(m + HDR_SIZE, size - HDR_SIZE) != get_u32(m + 80)) {
        tern_set_err(err, errlen, "%s: checksum mismatch", path);
        goto fail;
    }
    t = calloc(1, sizeof(*t));
    if (!t) {
        tern_set_err(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    t->map = m;
    t->size = size;
    t->n4 = n4;
    t->n6 = n6;
    t->ne = ne;
    t->nsub = nsub;
    t->n_names = nn;
    t->v4.levels = L4.levels;
    t->v6.levels = L6.levels;
    for (unsigned l = 0; l <= L4.levels; l++)
        t->v4.level[l] = m + v4_off + L4.off[l];
    for (unsigned l = 0; l <= L6.levels; l++)
        t->v6.level[l] = m + v6_off + L6.off[l];
    t->last4 = slot_of(&t->v4, V4_LEAF, V4_PER_LEAF, n4 - 1);
    t->last6 = slot_of(&t->v6, V6_LEAF, V6_PER_LEAF, n6 - 1);
    t->last4_key = t->last4.leaf + 4 * t->last4.lane;
    t->last6_key = t->last6.leaf + 8 * t->last6.lane;
    t->v6_whole = n6 == 1;
    t->look4 = look4_scalar;
    t->look6 = look6_scalar;
    t->pfx4 = pfx4_scalar;
    t->pfx6 = pfx6_scalar;
#ifdef HAVE_AVX2
    /* TERN_ASN_TABLE_SCALAR=1 forces the portable descent (tests, benchmarks). */
    const char *scalar = getenv("TERN_ASN_TABLE_SCALAR");
    unsigned a, b, c, d;
    if (!(scalar && *scalar && strcmp(scalar, "0") != 0) && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("popcnt") && __get_cpuid(0x80000001, &a, &b, &c, &d) &&
        (c & bit_LZCNT)) {
        t->look4 = look4_avx2;
        t->look6 = look6_avx2;
        t->pfx4 = pfx4_avx2;
        t->pfx6 = pfx6_avx2;
    }
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
    bool ok = tree_check(m + v4_off, &L4, 4, V4_PER_LEAF, V4_LEAF, V4_LEAF_ASN, V4_FAN) &&
              tree_check(m + v6_off, &L6, 8, V6_PER_LEAF, V6_LEAF, V6_LEAF_ASN, V6_FAN) &&
              t->exc_first[0] == 0 && t->exc_first[ne] == nsub;
    for (size_t e = 0; ok && e < ne; e++) {
        uint32_t f = t->exc_first[e], l = t->exc_first[e + 1];
        ok = f + 1 < l && l <= nsub && t->exc_lo[f] == 0 &&
             (e == 0 || t->exc_hi[e - 1] < t->exc_hi[e]);
        for (uint32_t k = f + 1; ok && k < l; k++)
            ok = t->exc_lo[k - 1] < t->exc_lo[k];
    }
    ok = ok && v6_exc_check(t, L6.leaves);
    for (size_t i = 0; ok && i < nn; i++) {
        const uint8_t *rec = t->names + NAME_REC * i;
        uint64_t end = (uint64_t)get_u32(rec + 4) + get_u16(rec + 8) + get_u16(rec + 10);
        ok = end <= str_len && (i == 0 || get_u32(rec - NAME_REC) < get_u32(rec));
    }
    if (!ok) {
        tern_set_err(err, errlen,
                     "%s: corrupt table: keys, exceptions or names out of order or out of bounds",
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

uint32_t asn_table_lookup_v4(const asn_table_t *t, uint32_t addr)
{
    return t->look4(t, addr);
}

uint32_t asn_table_lookup_v6(const asn_table_t *t, const uint8_t addr[16])
{
    return t->look6(t, addr);
}

uint32_t asn_table_lookup_v4_prefix(const asn_table_t *t, uint32_t addr, uint8_t *prefix)
{
    return t->pfx4(t, addr, prefix);
}

uint32_t asn_table_lookup_v6_prefix(const asn_table_t *t, const uint8_t addr[16], uint8_t *prefix)
{
    return t->pfx6(t, addr, prefix);
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
