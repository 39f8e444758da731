/*
 * redis_seen.c — the labels of one zone read (redis_int.h's seen_t): an open-addressing hash of
 * label strings, each with the digest of its value. It removes the duplicates a multi-call HSCAN
 * may return, and a large zone keeps the one of its last build so a change is read once and
 * compared label by label (redis_read.c's diff_read()). Source thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/common/hash.h"

#include "redis_int.h"

void redis_seen_free(seen_t *s)
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

long redis_seen_find(const seen_t *s, const char *label, size_t len)
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

int redis_seen_add(seen_t *s, const char *label, size_t len, size_t *slot)
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
