/*
 * asn_compile.c — see asn_compile.h. Inputs → ranges → boundaries → one table file.
 *
 * The passes: read the inputs into ranges (both families on 128-bit keys: an IPv4 address is just
 * a small key) and per-ASN names; resolve overlaps with one sweep over the ranges sorted by (start
 * asc, end desc, input order asc), keeping a stack of open ranges: the top of the stack is always
 * the winner under the rule documented in the header, and popping it hands the addresses back to
 * the range below. The output of that is a list of boundaries (start, asn), each running to the
 * next, so gaps need no special case: they are boundaries with asn 0. Then plan the file (section
 * sizes from the counts, asn_format.h), write each section into one buffer, checksum it, and
 * write the buffer to a temporary file renamed over the output.
 */
#include "tern/geo/asn_compile.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asn_format.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/geo/asn_table.h"

__extension__ typedef unsigned __int128 u128;

#define V4_MAX      ((u128)UINT32_MAX)
#define V6_MAX      (~(u128)0)
#define NAME_MAXLEN 65535u /* u16 length fields */
#define CC_MAXLEN   65535u

static void put_u16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, sizeof(v)); /* little-endian host, checked in asn_format.h */
}
static void put_u32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, sizeof(v));
}
static void put_u64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof(v));
}

/* keys are stored biased (top bit flipped): signed compares then order them as unsigned */
static void put_key(uint8_t *p, size_t ksize, uint64_t k)
{
    if (ksize == 4)
        put_u32(p, (uint32_t)k ^ BIAS32);
    else
        put_u64(p, k ^ BIAS64);
}

/* ---------------------------------------------------------------------------------------------
 * input collection
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

static int ranges_push(struct ranges *rs, const struct range *r)
{
    void *v = rs->v;
    int rc = tern_grow(&v, &rs->cap, rs->n + 1, sizeof(*rs->v));
    rs->v = v;
    if (rc)
        return rc;
    rs->v[rs->n++] = *r;
    return 0;
}

static int str_add(struct compiler *c, const char *s, size_t len, size_t *off)
{
    void *v = c->str;
    int rc = tern_grow(&v, &c->str_cap, c->str_len + len + 1, 1);
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
    int rc = tern_grow(&v, &c->cap_names, c->n_names + 1, sizeof(*c->names));
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

/* ---------------------------------------------------------------------------------------------
 * text inputs: iptoasn TSV and ip-location-db CSV
 */

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

/* The fields of one line, split in place: start, end, asn, and country/name (NULL when absent). */
struct fields {
    char *f[5];
    const char *cc, *name;
};

/* Split a TSV (any tab) or CSV line; TERN_ESYNTAX with "file:line: ..." on a wrong field count. */
static int split_line(char *line, struct fields *fl, const char *file, size_t lineno, char *err,
                      size_t errlen)
{
    int nf;
    if (strchr(line, '\t')) {
        nf = split_tsv(line, fl->f, 5);
        if (nf < 3 || nf > 5) {
            tern_set_err(err, errlen, "%s:%zu: expected 3 to 5 tab-separated fields, got %s%d",
                         file, lineno, nf > 5 ? "more than " : "", nf > 5 ? 5 : nf);
            return TERN_ESYNTAX;
        }
        fl->cc = nf > 3 ? fl->f[3] : NULL;
        fl->name = nf > 4 ? fl->f[4] : NULL;
        return 0;
    }
    nf = split_csv(line, fl->f, 4);
    if (nf < 0) {
        tern_set_err(err, errlen, "%s:%zu: unterminated or misplaced quote", file, lineno);
        return TERN_ESYNTAX;
    }
    if (nf != 4) {
        tern_set_err(err, errlen, "%s:%zu: expected 4 comma-separated fields, got %s%d", file,
                     lineno, nf > 4 ? "more than " : "", nf > 4 ? 4 : nf);
        return TERN_ESYNTAX;
    }
    fl->cc = NULL;
    fl->name = fl->f[3];
    return 0;
}

static int read_line(struct compiler *c, char *line, const char *file, size_t lineno, char *err,
                     size_t errlen)
{
    struct fields fl = {.cc = NULL};
    int rc = split_line(line, &fl, file, lineno, err, errlen);
    if (rc)
        return rc;
    char **f = fl.f;
    const char *cc = fl.cc;
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
    rc = ranges_push(fam ? &c->r6 : &c->r4, &r);
    if (rc == 0 && cc && strcmp(cc, "None") == 0)
        cc = NULL; /* iptoasn writes "None" for unrouted space */
    if (rc == 0)
        rc = name_add(c, r.asn, cc, fl.name);
    if (rc)
        tern_set_err(err, errlen, "%s:%zu: out of memory", file, lineno);
    c->seq++;
    return rc;
}

static int read_text(struct compiler *c, const char *path, asn_compile_stats_t *st, char *err,
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
 * overlap resolution
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
    int rc = tern_grow(&v, &b->cap, b->n + 1, sizeof(*b->v));
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
 * output
 */

static int name_cmp(const void *a, const void *b)
{
    const struct name_in *x = a, *y = b;
    if (x->asn != y->asn)
        return x->asn < y->asn ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Per ASN, keep the first non-empty country and name (in input order): c->names[0 .. *n) become
 * one record per ASN, sorted; *str_total is the bytes of strings they need. */
static void merge_names(struct compiler *c, size_t *n, size_t *str_total)
{
    if (c->n_names)
        qsort(c->names, c->n_names, sizeof(*c->names), name_cmp);
    size_t n_names = 0, total = 0;
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
        total += m.cc_len + m.name_len;
        i = j;
    }
    *n = n_names;
    *str_total = total;
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
        if (exc) {
            uint32_t bits;
            memcpy(&bits, leaf + V6_LEAF_EXC, sizeof(bits));
            put_u32(leaf + V6_LEAF_EXC, bits | 1u << lane);
        }
    }
    o->main++;
}

static void v6_put_sub(struct v6_out *o, uint64_t lo, uint32_t asn)
{
    if (o->exc) {
        put_u64(o->exc + asn_format_exc_lo_off(o->ne) + 8 * o->s, lo);
        put_u32(o->exc + asn_format_exc_lo_off(o->ne) + 8 * o->nsub + 4 * o->s, asn);
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
            put_u32(o->exc + asn_format_exc_first_off(o->ne) + 4 * o->e, (uint32_t)o->s);
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

/* Fill the internal levels of a tree section from its leaves' keys (already written). */
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
                put_key(sec + L->off[l] + ksize * q, ksize, asn_format_key_max(ksize));
        }
    }
}

/* Where everything goes in the file: section offsets and counts, from the boundaries. */
struct plan {
    struct tree_layout L4, L6;
    size_t n4, n6, ne, nsub, n6_bounds, n_names, str_total;
    size_t v4_off, v6_off, exc_off, names_off, strings_off, total;
};

/* Lay the file out; TERN_ERANGE when a count does not fit its u32 field. */
static int plan_table(const struct bounds *b4, const struct bounds *b6, size_t n_names,
                      size_t str_total, struct plan *p)
{
    struct v6_out count = {0};
    v6_build(b6, &count);
    *p = (struct plan){.n4 = b4->n,
                       .n6 = count.main,
                       .ne = count.e,
                       .nsub = count.s,
                       .n6_bounds = b6->n,
                       .n_names = n_names,
                       .str_total = str_total};
    if (p->n4 > UINT32_MAX || p->n6_bounds > UINT32_MAX || p->n6 > UINT32_MAX ||
        p->nsub > UINT32_MAX || n_names > UINT32_MAX || str_total > UINT32_MAX ||
        !asn_format_tree_layout(p->n4, V4_PER_LEAF, V4_LEAF, V4_FAN, &p->L4) ||
        !asn_format_tree_layout(p->n6, V6_PER_LEAF, V6_LEAF, V6_FAN, &p->L6))
        return TERN_ERANGE;
    p->v4_off = asn_format_align128(HDR_SIZE);
    p->v6_off = p->v4_off + p->L4.total;
    p->exc_off = p->v6_off + p->L6.total;
    p->names_off = asn_format_align8(p->exc_off + asn_format_exc_size(p->ne, p->nsub));
    p->strings_off = p->names_off + p->n_names * NAME_REC;
    p->total = p->strings_off + str_total;
    return 0;
}

static void write_header(uint8_t *buf, const struct plan *p)
{
    memcpy(buf + HDR_MAGIC, ASN_TABLE_MAGIC, 8);
    put_u32(buf + HDR_VERSION, ASN_TABLE_VERSION);
    put_u32(buf + HDR_FLAGS, 0);
    put_u32(buf + HDR_V4_COUNT, (uint32_t)p->n4);
    put_u32(buf + HDR_V6_COUNT, (uint32_t)p->n6);
    put_u32(buf + HDR_NAME_COUNT, (uint32_t)p->n_names);
    put_u32(buf + HDR_EXC_COUNT, (uint32_t)p->ne);
    put_u64(buf + HDR_V4_OFF, p->v4_off);
    put_u64(buf + HDR_V6_OFF, p->v6_off);
    put_u64(buf + HDR_NAMES_OFF, p->names_off);
    put_u64(buf + HDR_STRINGS_OFF, p->strings_off);
    put_u64(buf + HDR_STRINGS_LEN, p->str_total);
    put_u64(buf + HDR_PAYLOAD_LEN, p->total - HDR_SIZE);
    put_u32(buf + HDR_EXC_SUB_COUNT, (uint32_t)p->nsub);
    put_u64(buf + HDR_EXC_OFF, p->exc_off);
}

/* The v4 tree: leaves of (key, asn) lanes, pad lanes all-ones keys with ASN 0 (buf is zeroed). */
static void write_v4(uint8_t *buf, const struct plan *p, const struct bounds *b4)
{
    uint8_t *sec = buf + p->v4_off;
    for (size_t i = 0; i < p->L4.leaves * V4_PER_LEAF; i++) {
        uint8_t *leaf = sec + V4_LEAF * (i / V4_PER_LEAF);
        size_t lane = i % V4_PER_LEAF;
        put_key(leaf + 4 * lane, 4, i < b4->n ? (uint64_t)b4->v[i].key : UINT32_MAX);
        if (i < b4->n)
            put_u32(leaf + V4_LEAF_ASN + 4 * lane, b4->v[i].asn);
    }
    tree_fill(sec, &p->L4, 4, V4_LEAF, V4_FAN);
}

/* The v6 tree and the exception section. */
static void write_v6(uint8_t *buf, const struct plan *p, const struct bounds *b6)
{
    uint8_t *sec = buf + p->v6_off, *exc = buf + p->exc_off;
    for (size_t i = p->n6; i < p->L6.leaves * V6_PER_LEAF; i++)
        put_key(sec + V6_LEAF * (i / V6_PER_LEAF) + 8 * (i % V6_PER_LEAF), 8, UINT64_MAX);
    struct v6_out o = {.sec = sec, .exc = exc, .ne = p->ne, .nsub = p->nsub};
    v6_build(b6, &o);
    put_u32(exc, (uint32_t)p->n6_bounds);
    put_u32(exc + asn_format_exc_first_off(p->ne) + 4 * p->ne, (uint32_t)p->nsub);
    tree_fill(sec, &p->L6, 8, V6_LEAF, V6_FAN);
}

/* The name records (merged, sorted by ASN) and their strings. */
static void write_names(uint8_t *buf, const struct plan *p, const struct compiler *c)
{
    size_t so = 0;
    for (size_t i = 0; i < p->n_names; i++) {
        const struct name_in *m = &c->names[i];
        uint8_t *rec = buf + p->names_off + NAME_REC * i;
        put_u32(rec, m->asn);
        put_u32(rec + 4, (uint32_t)so);
        put_u16(rec + 8, (uint16_t)m->cc_len);
        put_u16(rec + 10, (uint16_t)m->name_len);
        if (m->cc_len)
            memcpy(buf + p->strings_off + so, c->str + m->cc_off, m->cc_len);
        so += m->cc_len;
        if (m->name_len)
            memcpy(buf + p->strings_off + so, c->str + m->name_off, m->name_len);
        so += m->name_len;
    }
}

/* Write len bytes to "<path>.tmp", fsync, rename over path: a reader sees the old file or the
 * whole new one. The temporary file is removed on failure. */
static int write_file_atomic(const char *path, const uint8_t *buf, size_t len, char *err,
                             size_t errlen)
{
    int rc = 0;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) {
        tern_set_err(err, errlen, "%s: out of memory", path);
        return TERN_ENOMEM;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *fp = fopen(tmp, "wb");
    if (!fp || fwrite(buf, 1, len, fp) != len || fflush(fp) != 0 || fsync(fileno(fp)) != 0) {
        rc = errno ? -errno : TERN_EINVAL;
        tern_set_err(err, errlen, "%s: %s", tmp, strerror(-rc));
        if (fp)
            fclose(fp);
        unlink(tmp);
        goto done;
    }
    if (fclose(fp) != 0) {
        rc = -errno;
        tern_set_err(err, errlen, "%s: %s", tmp, strerror(-rc));
        unlink(tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        rc = -errno;
        tern_set_err(err, errlen, "%s: rename: %s", path, strerror(-rc));
        unlink(tmp);
    }
done:
    free(tmp);
    return rc;
}

/* The resolved boundaries and names as one file at out_path. */
static int write_table(struct compiler *c, const struct bounds *b4, const struct bounds *b6,
                       const char *out_path, asn_compile_stats_t *st, char *err, size_t errlen)
{
    size_t n_names, str_total;
    struct plan p;
    merge_names(c, &n_names, &str_total);
    if (plan_table(b4, b6, n_names, str_total, &p) < 0) {
        tern_set_err(err, errlen, "%s: table too large", out_path);
        return TERN_ERANGE;
    }
    uint8_t *buf = calloc(1, p.total);
    if (!buf) {
        tern_set_err(err, errlen, "%s: out of memory", out_path);
        return TERN_ENOMEM;
    }
    write_header(buf, &p);
    write_v4(buf, &p, b4);
    write_v6(buf, &p, b6);
    write_names(buf, &p, c);
    put_u32(buf + HDR_CRC, asn_format_crc32(buf + HDR_SIZE, p.total - HDR_SIZE));
    int rc = write_file_atomic(out_path, buf, p.total, err, errlen);
    free(buf);
    if (rc == 0) {
        st->entries_v4 = b4->n;
        st->entries_v6 = b6->n;
        st->names = n_names;
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * public
 */

int asn_compile(const char *const *inputs, size_t n, const char *out_path,
                asn_compile_stats_t *stats, char *err, size_t errlen)
{
    struct compiler c = {0};
    struct bounds b4 = {0}, b6 = {0};
    asn_compile_stats_t st = {0};
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if ((rc = read_text(&c, inputs[i], &st, err, errlen)))
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
