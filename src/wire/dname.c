#include "tern/wire/dname.h"

#include <stdio.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/common/hash.h"

/* ASCII-only lowercase (RFC 4343): a table beats branches on the lookup path. */
static const uint8_t lower_tab[256] = {
#define L(c)   [c] = (uint8_t)((c) >= 'A' && (c) <= 'Z' ? (c) + 32 : (c))
#define L4(c)  L(c), L(c + 1), L(c + 2), L(c + 3)
#define L16(c) L4(c), L4(c + 4), L4(c + 8), L4(c + 12)
#define L64(c) L16(c), L16(c + 16), L16(c + 32), L16(c + 48)
    L64(0), L64(64), L64(128), L64(192)
#undef L64
#undef L16
#undef L4
#undef L
};

/* The hash of the root name; every other suffix hash chains from it. */
#define DNAME_HASH_ROOT 0x811c9dc5u

/* A label (length byte + bytes, already lowercase) is hashed on top of the suffix hash below it,
 * eight bytes per step; the last step takes the bytes left as one little-endian word, so the
 * value does not depend on what follows the label (label_hash_padded()). */
#define HASH_K 0x9E3779B97F4A7C15ull

static inline uint64_t hash_step(uint64_t h, uint64_t w)
{
    h = (h ^ w) * HASH_K;
    return h ^ (h >> 29);
}

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof(w));
    return w;
}

static inline uint32_t hash_fold(uint64_t h)
{
    return tern_mix32((uint32_t)(h ^ (h >> 32)));
}

/* Hash of a label followed by at least 7 readable bytes (a view's lc, dname_hash()'s copy): the
 * last word is loaded whole and the bytes past the label masked off. */
static inline uint32_t label_hash_padded(uint32_t parent, const uint8_t *label)
{
    uint64_t h = parent;
    size_t n = (size_t)label[0] + 1;
    for (; n >= 8; n -= 8, label += 8)
        h = hash_step(h, load64(label));
    if (n)
        h = hash_step(h, load64(label) & ((1ull << (8 * n)) - 1));
    return hash_fold(h);
}

/* ASCII lowercase of 8 bytes at once: bytes in 'A'..'Z' (high bit clear) gain 0x20. */
static inline uint64_t lower8(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, high = ones * 0x80;
    uint64_t low7 = x & ~high;
    uint64_t ge_a = low7 + ones * (0x80 - 'A');     /* high bit: byte >= 'A' */
    uint64_t gt_z = low7 + ones * (0x80 - 'Z' - 1); /* high bit: byte > 'Z' */
    uint64_t upper = (ge_a ^ gt_z) & ~x & high;
    return x | (upper >> 2);
}

int dname_check(const uint8_t *buf, size_t maxlen)
{
    size_t pos = 0;
    for (;;) {
        if (pos >= maxlen)
            return TERN_EMALF;
        uint8_t l = buf[pos];
        if (l == 0)
            break;
        if (l > DNAME_MAXLABEL) /* 0xC0 pointers and 0x40/0x80 reserved types */
            return TERN_EMALF;
        pos += (size_t)l + 1;
        if (pos >= DNAME_MAXLEN)
            return TERN_EMALF;
    }
    return (int)pos + 1;
}

/* RFC 1035 §4.1.1: the header before the question; no name lives there. */
#define MSG_HEADER_LEN 12

static int unpack_fail(dname_unpack_err_t *err, dname_fault_t f, size_t at, size_t to,
                       uint8_t label)
{
    if (err)
        *err = (dname_unpack_err_t){.fault = f, .at = at, .to = to, .label = label};
    return TERN_EMALF;
}

int dname_unpack(const uint8_t *msg, size_t len, size_t end, size_t *pos, uint8_t *out,
                 dname_unpack_err_t *err)
{
    size_t start = *pos, p = start, lowest = start, lim = end < len ? end : len, o = 0, after = 0;
    unsigned hops = 0;
    for (;;) {
        if (p >= lim)
            return unpack_fail(err, DNAME_FAULT_TRUNCATED, start, 0, 0);
        uint8_t c = msg[p];
        if ((c & 0xC0) == 0xC0) {
            if (p + 1 >= lim)
                return unpack_fail(err, DNAME_FAULT_TRUNCATED, start, 0, 0);
            size_t to = (size_t)(c & 0x3F) << 8 | msg[p + 1];
            if (to < MSG_HEADER_LEN)
                return unpack_fail(err, DNAME_FAULT_PTR_HEADER, p, to, 0);
            if (to >= lowest)
                return unpack_fail(err, DNAME_FAULT_PTR_FORWARD, p, to, 0);
            if (++hops > DNAME_PTR_HOPS_MAX)
                return unpack_fail(err, DNAME_FAULT_PTR_HOPS, start, 0, 0);
            if (!after)
                after = p + 2;
            p = lowest = to;
            lim = len; /* what a pointer leads to may lie anywhere before it */
            continue;
        }
        if (c > DNAME_MAXLABEL) /* 0x40 and 0x80: extended and reserved label types */
            return unpack_fail(err, DNAME_FAULT_LABEL, p, 0, c);
        if (c + 1u > lim - p)
            return unpack_fail(err, DNAME_FAULT_TRUNCATED, start, 0, 0);
        if (o + 1u + c > DNAME_MAXLEN)
            return unpack_fail(err, DNAME_FAULT_TOO_LONG, start, 0, 0);
        if (out)
            memcpy(out + o, msg + p, 1u + c);
        o += 1u + c;
        p += 1u + c;
        if (c == 0) {
            *pos = after ? after : p;
            return (int)o;
        }
    }
}

void dname_view_init(dname_view_t *v, const uint8_t *name)
{
    unsigned n = 0;
    size_t pos = 0;
    while (name[pos] != 0) {
        v->off[n++] = (uint8_t)pos;
        pos += (size_t)name[pos] + 1;
    }
    v->off[n] = (uint8_t)pos;
    v->len = (uint8_t)(pos + 1);
    v->nlabels = (uint8_t)n;
    /* the whole wire name lowercased as a byte string: length bytes (<= 63) are below 'A' */
    if (pos >= 8) {
        for (size_t i = 0; i + 8 <= pos; i += 8) {
            uint64_t w = lower8(load64(name + i));
            memcpy(v->lc + i, &w, sizeof(w));
        }
        /* the last (partial) word again, as the 8 bytes ending at the root: same values */
        uint64_t w = lower8(load64(name + pos - 8));
        memcpy(v->lc + pos - 8, &w, sizeof(w));
    } else {
        for (size_t i = 0; i < pos; i++)
            v->lc[i] = lower_tab[name[i]];
    }
    memset(v->lc + pos, 0, 8); /* the root label, and the pad label_hash_padded() reads */
    uint32_t h = DNAME_HASH_ROOT;
    v->hash[n] = h;
    for (unsigned k = n; k-- > 0;) {
        h = label_hash_padded(h, v->lc + v->off[k]);
        v->hash[k] = h;
    }
}

uint32_t dname_hash(const uint8_t *lcname)
{
    /* a padded copy, so the labels hash exactly as a view's do */
    uint8_t buf[DNAME_MAXLEN + 8] = {0};
    memcpy(buf, lcname, dname_len(lcname));
    const uint8_t *labels[DNAME_MAXLABELS];
    unsigned n = 0;
    for (const uint8_t *p = buf; *p; p += *p + 1)
        labels[n++] = p;
    uint32_t h = DNAME_HASH_ROOT;
    while (n-- > 0)
        h = label_hash_padded(h, labels[n]);
    return h;
}

size_t dname_lower(uint8_t *dst, const uint8_t *name)
{
    size_t pos = 0;
    for (;;) {
        uint8_t l = name[pos];
        dst[pos] = l;
        if (l == 0)
            return pos + 1;
        for (unsigned i = 1; i <= l; i++)
            dst[pos + i] = lower_tab[name[pos + i]];
        pos += (size_t)l + 1;
    }
}

size_t dname_len(const uint8_t *name)
{
    size_t pos = 0;
    while (name[pos])
        pos += (size_t)name[pos] + 1;
    return pos + 1;
}

unsigned dname_labels(const uint8_t *name)
{
    unsigned n = 0;
    for (const uint8_t *p = name; *p; p += *p + 1)
        n++;
    return n;
}

bool dname_equal(const uint8_t *a, const uint8_t *b)
{
    size_t pos = 0;
    for (;;) {
        if (a[pos] != b[pos])
            return false;
        uint8_t l = a[pos];
        if (l == 0)
            return true;
        for (unsigned i = 1; i <= l; i++)
            if (lower_tab[a[pos + i]] != lower_tab[b[pos + i]])
                return false;
        pos += (size_t)l + 1;
    }
}

bool dname_is_subdomain(const uint8_t *name, const uint8_t *parent)
{
    unsigned nl = dname_labels(name), pl = dname_labels(parent);
    if (nl < pl)
        return false;
    const uint8_t *p = name;
    for (unsigned i = 0; i < nl - pl; i++)
        p += *p + 1;
    return dname_equal(p, parent);
}

int dname_to_str(const uint8_t *name, char *dst, size_t dstlen)
{
    size_t o = 0;
    int rc = 0;
#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (o + 1 < dstlen)                                                                        \
            dst[o++] = (c);                                                                        \
        else                                                                                       \
            rc = TERN_ENOSPC;                                                                      \
    } while (0)
    if (dstlen == 0)
        return TERN_ENOSPC;
    if (name[0] == 0)
        PUT('.');
    for (const uint8_t *p = name; *p; p += *p + 1) {
        for (unsigned i = 1; i <= *p; i++) {
            uint8_t c = p[i];
            if (c == '.' || c == '\\' || c == '"' || c == '(' || c == ')' || c == ';' || c == '@' ||
                c == '$') {
                PUT('\\');
                PUT((char)c);
            } else if (c <= 0x20 || c >= 0x7f) {
                char esc[5];
                snprintf(esc, sizeof(esc), "\\%03u", c);
                for (int k = 0; k < 4; k++)
                    PUT(esc[k]);
            } else {
                PUT((char)c);
            }
        }
        PUT('.');
    }
#undef PUT
    dst[o] = 0;
    return rc ? rc : (int)o;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int dname_from_str(const char *s, size_t len, bool relative, uint8_t *out, const char **why)
{
    size_t o = 0, i = 0;
    if (len == 0) {
        *why = "empty name";
        return TERN_ESYNTAX;
    }
    if (!relative && len == 1 && s[0] == '.') {
        out[0] = 0;
        return 1;
    }
    while (i < len) {
        size_t lab = o++;
        size_t n = 0;
        while (i < len && s[i] != '.') {
            unsigned c = (unsigned char)s[i++];
            if (c == 0) {
                *why = "NUL byte in name";
                return TERN_ESYNTAX;
            }
            if (c == '\\') {
                if (i >= len) {
                    *why = "dangling '\\' in name";
                    return TERN_ESYNTAX;
                }
                if (is_digit(s[i])) {
                    if (i + 2 >= len || !is_digit(s[i + 1]) || !is_digit(s[i + 2])) {
                        *why = "bad \\DDD escape in name";
                        return TERN_ESYNTAX;
                    }
                    c = (unsigned)(s[i] - '0') * 100 + (unsigned)(s[i + 1] - '0') * 10 +
                        (unsigned)(s[i + 2] - '0');
                    if (c > 255) {
                        *why = "bad \\DDD escape in name";
                        return TERN_ESYNTAX;
                    }
                    i += 3;
                } else {
                    c = (unsigned char)s[i++];
                }
            }
            if (++n > DNAME_MAXLABEL) {
                *why = "label longer than 63 bytes";
                return TERN_ESYNTAX;
            }
            if (o + 1 >= DNAME_MAXLEN) {
                *why = "name longer than 255 bytes";
                return TERN_ESYNTAX;
            }
            out[o++] = (uint8_t)c;
        }
        if (n == 0) {
            *why = "empty label in name";
            return TERN_ESYNTAX;
        }
        out[lab] = (uint8_t)n;
        if (i < len) { /* at a '.' */
            i++;
            if (i == len) {
                if (relative) {
                    *why = "a label of the zone is relative: no final dot";
                    return TERN_ESYNTAX;
                }
                break;
            }
        }
    }
    if (relative)
        return (int)o;
    out[o++] = 0;
    return (int)o;
}

int dname_key(const char *origin, char *out, size_t outlen, const char **why)
{
    uint8_t wire[DNAME_MAXLEN], lc[DNAME_MAXLEN];
    int n = dname_from_str(origin, strlen(origin), false, wire, why);
    if (n < 0)
        return n;
    (void)dname_lower(lc, wire);
    int len = dname_to_str(lc, out, outlen);
    if (len < 0) {
        *why = "name too long for its key";
        return len;
    }
    if (len > 1) /* "example.test." -> "example.test"; the root stays "." */
        out[--len] = '\0';
    return len;
}

const char *dname_unpack_err_text(const dname_unpack_err_t *e, char *buf, size_t len)
{
    switch (e->fault) {
    case DNAME_FAULT_PTR_HEADER:
        snprintf(buf, len, "compression pointer at offset %zu points into the header (%zu)", e->at,
                 e->to);
        break;
    case DNAME_FAULT_PTR_FORWARD:
        snprintf(buf, len, "compression pointer at offset %zu to %zu does not point backwards",
                 e->at, e->to);
        break;
    case DNAME_FAULT_PTR_HOPS:
        snprintf(buf, len, "more than %d compression pointers in the name at %zu",
                 DNAME_PTR_HOPS_MAX, e->at);
        break;
    case DNAME_FAULT_LABEL:
        snprintf(buf, len, "bad label type 0x%02x at offset %zu", e->label, e->at);
        break;
    case DNAME_FAULT_TOO_LONG:
        snprintf(buf, len, "name at offset %zu longer than %d bytes", e->at, DNAME_MAXLEN);
        break;
    default:
        snprintf(buf, len, "truncated name at offset %zu", e->at);
        break;
    }
    return buf;
}
