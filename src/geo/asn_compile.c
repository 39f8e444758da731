/*
 * asn_compile.c — see asn_compile.h. Inputs → ranges → boundaries → one table file.
 *
 * The passes: read each input, as its content says (asn_text.c or asn_mmdb.c), into a collection
 * of ranges (both families on 128-bit keys: an IPv4 address is just a small key) and per-ASN
 * names (asn_collect.h); resolve overlaps with one sweep over the ranges sorted by (start
 * asc, end desc, input order asc), keeping a stack of open ranges: the top of the stack is always
 * the winner under the rule documented in the header, and popping it hands the addresses back to
 * the range below. The output of that is a list of boundaries (start, asn), each running to the
 * next, so gaps need no special case: they are boundaries with asn 0. Then plan the file (section
 * sizes from the counts, asn_format.h), write each section into one buffer, checksum it, and
 * write the buffer to a temporary file renamed over the output.
 */
#include "tern/geo/asn_compile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asn_collect.h"
#include "asn_format.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/hash.h"
#include "tern/geo/asn_table.h"

#define V4_MAX ((u128)UINT32_MAX)
#define V6_MAX (~(u128)0)

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
    const struct asn_range *x = a, *y = b;
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
    const struct asn_range **stack;
    size_t depth;
    u128 cur;  /* first address not yet assigned by a popped range */
    bool done; /* a range ending at the family's last address was popped */
};

/* Close every open range that ends before p (all of them when all is set), emitting the
 * boundary where each hands its addresses back to the range below it (or to "no ASN"). */
static int flush(struct sweep *s, struct bounds *b, u128 p, bool all, u128 max)
{
    while (s->depth && (all || s->stack[s->depth - 1]->end < p)) {
        const struct asn_range *t = s->stack[--s->depth];
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

static int resolve(struct asn_ranges *rs, u128 max, struct bounds *out, size_t *overlaps)
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
        const struct asn_range *r = &rs->v[i];
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
    const struct asn_name *x = a, *y = b;
    if (x->asn != y->asn)
        return x->asn < y->asn ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Per ASN, keep the first non-empty country and name (in input order): c->names[0 .. *n) become
 * one record per ASN, sorted; *str_total is the bytes of strings they need. */
static void merge_names(asn_collect_t *c, size_t *n, size_t *str_total)
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
        struct asn_name m = {.asn = c->names[i].asn};
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
    size_t v4_off, v6_off, exc_off, names_off, strings_off, src_off, total;
    bool has_src; /* a source record ends the file */
};

/* Lay the file out; TERN_ERANGE when a count does not fit its u32 field. */
static int plan_table(const struct bounds *b4, const struct bounds *b6, size_t n_names,
                      size_t str_total, bool has_src, struct plan *p)
{
    struct v6_out count = {0};
    v6_build(b6, &count);
    *p = (struct plan){.n4 = b4->n,
                       .n6 = count.main,
                       .ne = count.e,
                       .nsub = count.s,
                       .n6_bounds = b6->n,
                       .n_names = n_names,
                       .str_total = str_total,
                       .has_src = has_src};
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
    p->src_off = asn_format_align8(p->strings_off + str_total);
    p->total = has_src ? p->src_off + SRC_SIZE : p->strings_off + str_total;
    return 0;
}

static void write_header(uint8_t *buf, const struct plan *p)
{
    memcpy(buf + HDR_MAGIC, ASN_TABLE_MAGIC, 8);
    put_u32(buf + HDR_VERSION, ASN_TABLE_VERSION);
    put_u32(buf + HDR_FLAGS, p->has_src ? ASN_F_SOURCE : 0);
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
static void write_names(uint8_t *buf, const struct plan *p, const asn_collect_t *c)
{
    size_t so = 0;
    for (size_t i = 0; i < p->n_names; i++) {
        const struct asn_name *m = &c->names[i];
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

/* The source record (layout in asn_format.h). */
static void write_source(uint8_t *buf, const struct plan *p, const asn_table_source_t *src)
{
    uint8_t *r = buf + p->src_off;
    put_u64(r + SRC_FILE_SIZE, src->size);
    put_u64(r + SRC_HASH, src->hash);
    put_u64(r + SRC_DEV, src->dev);
    put_u64(r + SRC_INO, src->ino);
    put_u64(r + SRC_MTIME, (uint64_t)src->mtime_sec);
    put_u32(r + SRC_MTIME_NS, src->mtime_nsec);
    put_u32(r + SRC_COMPILER, src->compiler);
    put_u64(r + SRC_CTIME, (uint64_t)src->ctime_sec);
    put_u32(r + SRC_CTIME_NS, src->ctime_nsec);
}

/* Attempts at a fresh temporary name: only a stale file of an earlier process with our pid can
 * be in the way, and the counter moves past it. */
#define TEMP_TRIES 16

/* A new temporary file beside path, "<path>.tmp.<pid>.<n>", created exclusively with mode 0666
 * less the umask (as fopen would): ternctl and a ternd compiling the same cache at once each
 * write their own file, and the last rename wins whole. The fd, or a negated errno. */
static int open_temp(const char *path, char *tmp, size_t len)
{
    static unsigned seq; /* the loader thread and ternctl: names only need to differ */
    int e = EEXIST;
    for (int i = 0; i < TEMP_TRIES && e == EEXIST; i++) {
        snprintf(tmp, len, "%s.tmp.%ld.%u", path, (long)getpid(),
                 __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0)
            return fd;
        e = errno;
    }
    return -e;
}

/* Write len bytes to a temporary file, fsync, rename over path: a reader sees the old file or
 * the whole new one. The temporary file is removed on failure. */
static int write_file_atomic(const char *path, const uint8_t *buf, size_t len, char *err,
                             size_t errlen)
{
    size_t tlen = strlen(path) + 48;
    char *tmp = malloc(tlen);
    if (!tmp) {
        tern_set_err(err, errlen, "%s: out of memory", path);
        return TERN_ENOMEM;
    }
    int rc = 0, fd = open_temp(path, tmp, tlen);
    if (fd < 0) {
        rc = fd;
        tern_set_err(err, errlen, "%s: %s", tmp, strerror(-rc));
        goto done;
    }
    for (size_t off = 0; off < len && rc == 0;) {
        ssize_t n = write(fd, buf + off, len - off);
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && errno != EINTR)
            rc = -errno;
    }
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -errno;
        tern_set_err(err, errlen, "%s: rename: %s", path, strerror(-rc));
    } else if (rc < 0) {
        tern_set_err(err, errlen, "%s: %s", tmp, strerror(-rc));
    }
    if (rc < 0)
        unlink(tmp);
done:
    free(tmp);
    return rc;
}

/* The resolved boundaries and names laid out in one calloc'd buffer (*out, *len), ending with
 * src's record unless src is NULL. name labels messages. */
static int build_table(asn_collect_t *c, const struct bounds *b4, const struct bounds *b6,
                       const asn_table_source_t *src, const char *name, uint8_t **out, size_t *len,
                       asn_compile_stats_t *st, char *err, size_t errlen)
{
    size_t n_names, str_total;
    struct plan p;
    merge_names(c, &n_names, &str_total);
    if (plan_table(b4, b6, n_names, str_total, src != NULL, &p) < 0) {
        tern_set_err(err, errlen, "%s: table too large", name);
        return TERN_ERANGE;
    }
    uint8_t *buf = calloc(1, p.total);
    if (!buf) {
        tern_set_err(err, errlen, "%s: out of memory", name);
        return TERN_ENOMEM;
    }
    write_header(buf, &p);
    write_v4(buf, &p, b4);
    write_v6(buf, &p, b6);
    write_names(buf, &p, c);
    if (src)
        write_source(buf, &p, src);
    put_u32(buf + HDR_CRC, asn_format_crc32(buf + HDR_SIZE, p.total - HDR_SIZE));
    st->entries_v4 = b4->n;
    st->entries_v6 = b6->n;
    st->names = n_names;
    *out = buf;
    *len = p.total;
    return 0;
}

/* Resolve what c holds into one table buffer (with src's record unless NULL). */
static int build_collected(asn_collect_t *c, const asn_table_source_t *src, const char *name,
                           uint8_t **out, size_t *len, asn_compile_stats_t *st, char *err,
                           size_t errlen)
{
    struct bounds b4 = {0}, b6 = {0};
    int rc;
    st->ranges_v4 = c->r4.n;
    st->ranges_v6 = c->r6.n;
    if ((rc = resolve(&c->r4, V4_MAX, &b4, &st->overlaps)) ||
        (rc = resolve(&c->r6, V6_MAX, &b6, &st->overlaps)))
        tern_set_err(err, errlen, "%s: out of memory", name);
    else
        rc = build_table(c, &b4, &b6, src, name, out, len, st, err, errlen);
    free(b4.v);
    free(b6.v);
    return rc;
}

int asn_compile_build(asn_collect_t *c, const char *name, uint8_t **out, size_t *len,
                      asn_compile_stats_t *st, char *err, size_t errlen)
{
    return build_collected(c, NULL, name, out, len, st, err, errlen);
}

/* ---------------------------------------------------------------------------------------------
 * sources
 */

/* Whether st still describes the file r was compiled from: same identity, size and times (an
 * unknown identity, ino 0, never matches). */
static bool same_stat(const asn_table_source_t *r, const struct stat *st)
{
    return r->ino != 0 && r->dev == (uint64_t)st->st_dev && r->ino == (uint64_t)st->st_ino &&
           r->size == (uint64_t)st->st_size && r->mtime_sec == (int64_t)st->st_mtim.tv_sec &&
           r->mtime_nsec == (uint32_t)st->st_mtim.tv_nsec &&
           r->ctime_sec == (int64_t)st->st_ctim.tv_sec &&
           r->ctime_nsec == (uint32_t)st->st_ctim.tv_nsec;
}

/* The source record of db, opened from path: the size and hash of the very bytes mapped, and the
 * file's identity and times from before (a stat taken before the open) — kept only when path
 * still shows them after the open, so a file replaced in between is never vouched for by
 * identity; the record then matches by content alone. */
static void source_of(const MMDB_s *db, const char *path, const struct stat *before,
                      asn_table_source_t *src)
{
    struct stat after;
    *src = (asn_table_source_t){
        .size = (uint64_t)db->file_size,
        .hash = tern_hash64(db->file_content, (size_t)db->file_size, ASN_TABLE_SOURCE_SEED),
        .compiler = ASN_COMPILE_REVISION,
    };
    asn_table_source_t id = {
        .size = src->size,
        .dev = (uint64_t)before->st_dev,
        .ino = (uint64_t)before->st_ino,
        .mtime_sec = (int64_t)before->st_mtim.tv_sec,
        .mtime_nsec = (uint32_t)before->st_mtim.tv_nsec,
        .ctime_sec = (int64_t)before->st_ctim.tv_sec,
        .ctime_nsec = (uint32_t)before->st_ctim.tv_nsec,
    };
    if (stat(path, &after) == 0 && same_stat(&id, &after)) {
        src->dev = id.dev;
        src->ino = id.ino;
        src->mtime_sec = id.mtime_sec;
        src->mtime_nsec = id.mtime_nsec;
        src->ctime_sec = id.ctime_sec;
        src->ctime_nsec = id.ctime_nsec;
    }
}

/* Add one input, read as what its content says it is. When src is not NULL and the input is a
 * MaxMind DB, *src is its source record and *has_src is set. */
static int read_input(asn_collect_t *c, const char *path, asn_compile_stats_t *st,
                      asn_table_source_t *src, bool *has_src, char *err, size_t errlen)
{
    bool is_mmdb;
    int rc = asn_mmdb_sniff(path, &is_mmdb, err, errlen);
    if (rc < 0 || !is_mmdb)
        return rc < 0 ? rc : asn_text_read(c, path, st, err, errlen);
    struct stat before = {0};
    if (stat(path, &before) != 0)
        before.st_ino = 0; /* no identity: the open says what is wrong */
    MMDB_s db;
    if ((rc = asn_mmdb_open(path, &db, err, errlen)) < 0)
        return rc;
    rc = asn_mmdb_read(c, &db, path, st, err, errlen);
    if (rc == 0 && src) {
        source_of(&db, path, &before, src);
        *has_src = true;
    }
    MMDB_close(&db);
    return rc;
}

/* Resolve what c holds and write the table to out_path (with src's record unless NULL). */
static int compile_collected(asn_collect_t *c, const asn_table_source_t *src, const char *out_path,
                             asn_compile_stats_t *st, char *err, size_t errlen)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = build_collected(c, src, out_path, &buf, &len, st, err, errlen);
    if (rc == 0)
        rc = write_file_atomic(out_path, buf, len, err, errlen);
    free(buf);
    return rc;
}

/* The source record of the valid table at path, compiled by this revision; false if there is
 * none (no file, not a valid table, compiled from text or by another revision). */
static bool cache_source(const char *path, asn_table_source_t *out)
{
    asn_table_t *t = asn_table_open(path, NULL, 0);
    bool ok = t && asn_table_source(t, out) == 0 && out->compiler == ASN_COMPILE_REVISION;
    asn_table_close(t);
    return ok;
}

/* ---------------------------------------------------------------------------------------------
 * public
 */

int asn_compile(const char *const *inputs, size_t n, const char *out_path,
                asn_compile_stats_t *stats, char *err, size_t errlen)
{
    asn_collect_t c = {0};
    asn_compile_stats_t st = {0};
    asn_table_source_t src;
    bool has_src = false;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = read_input(&c, inputs[i], &st, n == 1 ? &src : NULL, &has_src, err, errlen);
    if (rc == 0)
        rc = compile_collected(&c, has_src ? &src : NULL, out_path, &st, err, errlen);
    if (rc == 0 && stats)
        *stats = st;
    asn_collect_free(&c);
    return rc;
}

bool asn_compile_source_unchanged(const asn_table_t *t, const char *mmdb_path)
{
    asn_table_source_t r;
    struct stat st;
    return asn_table_source(t, &r) == 0 && r.compiler == ASN_COMPILE_REVISION &&
           stat(mmdb_path, &st) == 0 && same_stat(&r, &st);
}

char *asn_compile_default_cache(const char *mmdb_path)
{
    size_t n = strlen(mmdb_path);
    char *p = malloc(n + sizeof(ASN_COMPILE_CACHE_SUFFIX));
    if (p) {
        memcpy(p, mmdb_path, n);
        memcpy(p + n, ASN_COMPILE_CACHE_SUFFIX, sizeof(ASN_COMPILE_CACHE_SUFFIX));
    }
    return p;
}

int asn_compile_cached(const char *mmdb_path, const char *cache_path, asn_compile_stats_t *stats,
                       bool *rebuilt, char *err, size_t errlen)
{
    asn_compile_stats_t st = {0};
    asn_table_source_t have, src;
    asn_collect_t c = {0};
    struct stat before;
    MMDB_s db;
    int rc;
    *rebuilt = false;
    if (stat(mmdb_path, &before) != 0) {
        rc = -errno;
        tern_set_err(err, errlen, "%s: %s", mmdb_path, strerror(-rc));
        return rc;
    }
    bool cached = cache_source(cache_path, &have);
    if (cached && same_stat(&have, &before))
        goto done; /* the very file it was compiled from, untouched */
    if ((rc = asn_mmdb_open(mmdb_path, &db, err, errlen)) < 0)
        return rc;
    source_of(&db, mmdb_path, &before, &src);
    if (cached && have.size == src.size && have.hash == src.hash) {
        MMDB_close(&db); /* touched, copied or restored: the same bytes */
        goto done;
    }
    rc = asn_mmdb_read(&c, &db, mmdb_path, &st, err, errlen);
    MMDB_close(&db); /* the collection holds copies of the names */
    if (rc == 0)
        rc = compile_collected(&c, &src, cache_path, &st, err, errlen);
    asn_collect_free(&c);
    if (rc == -EACCES || rc == -EROFS || rc == -EPERM)
        tern_set_err(err, errlen,
                     "cannot write the compiled table %s (%s): set asn_table: to a writable path "
                     "for it, or compile it where it may be written with 'ternctl asn compile -o "
                     "%s %s'",
                     cache_path, strerror(-rc), cache_path, mmdb_path);
    if (rc < 0)
        return rc;
    *rebuilt = true;
done:
    if (stats)
        *stats = st;
    return 0;
}
