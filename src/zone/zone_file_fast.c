/*
 * zone_file_fast.c — see zone_file_fast.h. The forms read here, and what sends an entry to ldns:
 *
 *   [owner] [TTL] [IN] TYPE RDATA
 *
 * - owner: "@", a name relative to the origin, or an absolute one; a blank first character
 *   means the previous owner (none known: ldns).
 * - TTL: decimal digits only, at most 9 (units such as "1h" and huge values: ldns); absent:
 *   the default. ldns reads no class before the TTL, so neither do we.
 * - class: IN only, any case, or absent.
 * - TYPE: A, AAAA, NS, CNAME, PTR, MX, SRV, TXT in any case.
 * - RDATA: the exact number of fields of the type (TXT: one or more strings). Names without any
 *   backslash (escapes: ldns); numbers of 1 to 5 digits up to 65535 (ldns wraps larger ones
 *   without a word, so those stay its business); addresses as inet_pton() reads them, which is
 *   what ldns calls; TXT strings quoted without escapes or bare without a quote, at most 255
 *   bytes each.
 */
#include "zone_file_fast.h"

#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

#include "tern/wire/rr.h"

/* Fields of an entry: owner, TTL, class, type and at most this many RDATA tokens (a TXT of
 * more strings goes to ldns). */
#define FAST_TOKENS_MAX 64

typedef struct tok {
    const char *s;
    size_t n;
    bool quoted; /* "..." (s, n: inside the quotes) */
} tok_t;

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Split e at blanks into t (at most max); quoted strings are one token. False when a token
 * cannot be read plainly (an unterminated quote, a quote inside a bare token, text glued to a
 * closing quote) or there are too many. */
static bool split(const char *e, tok_t *t, size_t max, size_t *n)
{
    size_t k = 0;
    const char *p = e;
    for (;;) {
        while (is_blank(*p))
            p++;
        if (!*p)
            break;
        if (k == max)
            return false;
        if (*p == '"') {
            const char *q = strchr(p + 1, '"');
            if (!q || (q[1] && !is_blank(q[1])))
                return false;
            t[k++] = (tok_t){.s = p + 1, .n = (size_t)(q - p - 1), .quoted = true};
            p = q + 1;
            continue;
        }
        const char *s = p;
        while (*p && !is_blank(*p)) {
            if (*p == '"')
                return false;
            p++;
        }
        t[k++] = (tok_t){.s = s, .n = (size_t)(p - s)};
    }
    *n = k;
    return true;
}

static bool tok_is(const tok_t *t, const char *word)
{
    size_t n = strlen(word);
    return !t->quoted && t->n == n && strncasecmp(t->s, word, n) == 0;
}

/* Decimal digits only, 1..maxdig of them, value at most max. */
static bool tok_uint(const tok_t *t, size_t maxdig, uint32_t max, uint32_t *out)
{
    if (t->quoted || t->n == 0 || t->n > maxdig)
        return false;
    uint32_t v = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->s[i] < '0' || t->s[i] > '9')
            return false;
        v = v * 10 + (uint32_t)(t->s[i] - '0');
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

size_t zone_file_name(const char *s, size_t n, const uint8_t *origin, uint8_t *out)
{
    if (n == 0)
        return 0;
    if (n == 1 && s[0] == '@') {
        size_t ol = dname_len(origin);
        memcpy(out, origin, ol);
        return ol;
    }
    const char *why;
    if (s[n - 1] == '.') {
        int l = dname_from_str(s, n, false, out, &why);
        return l > 0 ? (size_t)l : 0;
    }
    int l = dname_from_str(s, n, true, out, &why);
    size_t ol = dname_len(origin);
    if (l <= 0 || (size_t)l + ol > DNAME_MAXLEN)
        return 0;
    memcpy(out + l, origin, ol);
    return (size_t)l + ol;
}

/* Name token t into out (DNAME_MAXLEN) as zone_file_name() reads it; 0 also for an escape, which
 * ldns must judge. */
static size_t name_of(const tok_t *t, const uint8_t *origin, uint8_t *out)
{
    if (t->quoted || memchr(t->s, '\\', t->n))
        return 0;
    return zone_file_name(t->s, t->n, origin, out);
}

static bool put(zone_file_fast_rec_t *r, const void *p, size_t n)
{
    if ((size_t)r->rdlen + n > ZONE_FILE_FAST_RDMAX)
        return false;
    memcpy(r->rdata + r->rdlen, p, n);
    r->rdlen = (uint16_t)(r->rdlen + n);
    return true;
}

static bool put_u16(zone_file_fast_rec_t *r, const tok_t *t)
{
    uint32_t v;
    if (!tok_uint(t, 5, 65535, &v))
        return false;
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    return put(r, b, 2);
}

static bool put_name(zone_file_fast_rec_t *r, const tok_t *t, const uint8_t *origin)
{
    uint8_t w[DNAME_MAXLEN];
    size_t n = name_of(t, origin, w);
    return n > 0 && put(r, w, n);
}

static bool put_addr(zone_file_fast_rec_t *r, const tok_t *t, int af)
{
    char buf[64];
    uint8_t a[16];
    if (t->quoted || t->n >= sizeof(buf))
        return false;
    memcpy(buf, t->s, t->n);
    buf[t->n] = '\0';
    if (inet_pton(af, buf, a) != 1)
        return false;
    return put(r, a, af == AF_INET ? 4 : 16);
}

/* TXT character-strings: quoted ones without escapes (a backslash anywhere sent the entry to
 * ldns already), bare ones as they are. */
static bool put_txt(zone_file_fast_rec_t *r, const tok_t *t, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (t[i].n > 255 || (!t[i].quoted && t[i].n == 0))
            return false;
        uint8_t len = (uint8_t)t[i].n;
        if (!put(r, &len, 1) || !put(r, t[i].s, t[i].n))
            return false;
    }
    return true;
}

/* The RDATA of type from its n tokens. */
static bool rdata_of(zone_file_fast_rec_t *r, const tok_t *t, size_t n, const uint8_t *origin)
{
    switch (r->type) {
    case WIRE_T_A:
        return n == 1 && put_addr(r, &t[0], AF_INET);
    case WIRE_T_AAAA:
        return n == 1 && put_addr(r, &t[0], AF_INET6);
    case WIRE_T_NS:
    case WIRE_T_CNAME:
    case WIRE_T_PTR:
        return n == 1 && put_name(r, &t[0], origin);
    case WIRE_T_MX:
        return n == 2 && put_u16(r, &t[0]) && put_name(r, &t[1], origin);
    case WIRE_T_SRV:
        return n == 4 && put_u16(r, &t[0]) && put_u16(r, &t[1]) && put_u16(r, &t[2]) &&
               put_name(r, &t[3], origin);
    case WIRE_T_TXT:
        return put_txt(r, t, n);
    default:
        return false;
    }
}

static const struct {
    const char *name;
    uint16_t type;
} fast_types[] = {
    {"A", WIRE_T_A},     {"AAAA", WIRE_T_AAAA}, {"NS", WIRE_T_NS},   {"CNAME", WIRE_T_CNAME},
    {"PTR", WIRE_T_PTR}, {"MX", WIRE_T_MX},     {"SRV", WIRE_T_SRV}, {"TXT", WIRE_T_TXT},
};

static uint16_t type_of(const tok_t *t)
{
    for (size_t i = 0; i < sizeof(fast_types) / sizeof(fast_types[0]); i++)
        if (tok_is(t, fast_types[i].name))
            return fast_types[i].type;
    return 0;
}

bool zone_file_fast(const char *e, const uint8_t *origin, const uint8_t *prev, uint32_t def,
                    zone_file_fast_rec_t *r)
{
    if (strchr(e, '\\'))
        return false;
    tok_t t[FAST_TOKENS_MAX];
    size_t n, i = 0;
    if (!split(e, t, FAST_TOKENS_MAX, &n))
        return false;
    r->owner_given = !is_blank(e[0]);
    if (r->owner_given) {
        if (n == 0 || name_of(&t[0], origin, r->owner) == 0)
            return false;
        i = 1;
    } else {
        if (!prev)
            return false;
        memmove(r->owner, prev, dname_len(prev)); /* prev may be r->owner itself */
    }
    r->ttl = def;
    if (i < n && tok_uint(&t[i], 9, UINT32_MAX, &r->ttl))
        i++;
    if (i < n && tok_is(&t[i], "IN"))
        i++;
    if (i >= n || !(r->type = type_of(&t[i])))
        return false;
    i++;
    r->rdlen = 0;
    return rdata_of(r, t + i, n - i, origin);
}
