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
 * Lookups are a branchless "last start <= key" binary search (the compiler turns the ternary into
 * a cmov), so the cost is log2(n) dependent loads and no mispredictions. A real table is ~500k v4
 * entries: 19 steps, the first dozen of which hit the same few cache lines for every query.
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
    if (b4->n > UINT32_MAX || b6->n > UINT32_MAX || n_names > UINT32_MAX ||
        str_total > UINT32_MAX) {
        set_err(err, errlen, "%s: table too large", out_path);
        return TERN_ERANGE;
    }

    size_t v4_off = HDR_SIZE;
    size_t v6_off = align8(v4_off + b4->n * 8);
    size_t names_off = align8(v6_off + b6->n * 20);
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
    put_u32(buf + 20, (uint32_t)b6->n);
    put_u32(buf + 24, (uint32_t)n_names);
    put_u64(buf + 32, v4_off);
    put_u64(buf + 40, v6_off);
    put_u64(buf + 48, names_off);
    put_u64(buf + 56, strings_off);
    put_u64(buf + 64, str_total);
    put_u64(buf + 72, total - HDR_SIZE);
    for (size_t i = 0; i < b4->n; i++) {
        put_u32(buf + v4_off + 4 * i, (uint32_t)b4->v[i].key);
        put_u32(buf + v4_off + 4 * b4->n + 4 * i, b4->v[i].asn);
    }
    for (size_t i = 0; i < b6->n; i++) {
        put_u64(buf + v6_off + 8 * i, (uint64_t)(b6->v[i].key >> 64));
        put_u64(buf + v6_off + 8 * b6->n + 8 * i, (uint64_t)b6->v[i].key);
        put_u32(buf + v6_off + 16 * b6->n + 4 * i, b6->v[i].asn);
    }
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
    const uint32_t *v4_start, *v4_asn;
    const uint64_t *v6_hi, *v6_lo;
    const uint32_t *v6_asn;
    const uint8_t *names;
    const char *strings;
    size_t n4, n6, n_names, strings_len;
};

static bool section_ok(uint64_t off, uint64_t len, size_t size)
{
    return off % 8 == 0 && off >= HDR_SIZE && off <= size && len <= size - off;
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
    uint64_t v4_off = get_u64(m + 32), v6_off = get_u64(m + 40), names_off = get_u64(m + 48);
    uint64_t str_off = get_u64(m + 56), str_len = get_u64(m + 64);
    if (n4 == 0 || n6 == 0 || !section_ok(v4_off, (uint64_t)n4 * 8, size) ||
        !section_ok(v6_off, (uint64_t)n6 * 20, size) ||
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
    t->n_names = nn;
    t->v4_start = (const uint32_t *)(const void *)(m + v4_off);
    t->v4_asn = t->v4_start + n4;
    t->v6_hi = (const uint64_t *)(const void *)(m + v6_off);
    t->v6_lo = t->v6_hi + n6;
    t->v6_asn = (const uint32_t *)(const void *)(t->v6_lo + n6);
    t->names = m + names_off;
    t->strings = (const char *)(m + str_off);
    t->strings_len = str_len;

    /* The checksum proves the file is what a compiler wrote, not that the compiler was ours:
     * check the invariants the search relies on, once, so a lookup never needs to. */
    bool ok = t->v4_start[0] == 0 && t->v6_hi[0] == 0 && t->v6_lo[0] == 0;
    for (size_t i = 1; ok && i < n4; i++)
        ok = t->v4_start[i - 1] < t->v4_start[i];
    for (size_t i = 1; ok && i < n6; i++)
        ok = t->v6_hi[i - 1] < t->v6_hi[i] ||
             (t->v6_hi[i - 1] == t->v6_hi[i] && t->v6_lo[i - 1] < t->v6_lo[i]);
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

uint32_t asn_table_lookup_v4(const asn_table_t *t, uint32_t addr)
{
    /* invariant: base[0] <= addr (start[0] == 0), the answer lies in [base, base + len) */
    const uint32_t *base = t->v4_start;
    size_t len = t->n4;
    while (len > 1) {
        size_t half = len / 2;
        base = base[half] <= addr ? base + half : base;
        len -= half;
    }
    return t->v4_asn[base - t->v4_start];
}

uint32_t asn_table_lookup_v6(const asn_table_t *t, const uint8_t addr[16])
{
    uint64_t hi = 0, lo = 0;
    for (int i = 0; i < 8; i++) {
        hi = (hi << 8) | addr[i];
        lo = (lo << 8) | addr[8 + i];
    }
    size_t base = 0, len = t->n6;
    while (len > 1) {
        size_t half = len / 2, mid = base + half;
        uint64_t mh = t->v6_hi[mid];
        bool le = mh < hi || (mh == hi && t->v6_lo[mid] <= lo);
        base = le ? mid : base;
        len -= half;
    }
    return t->v6_asn[base];
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
        *v6 = t->n6;
    if (names)
        *names = t->n_names;
}
