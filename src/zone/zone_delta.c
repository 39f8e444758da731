/*
 * zone_delta.c — the one zone change type (zone_delta.h says what it holds and why).
 *
 * The names are kept back to back in one buffer and sorted by length, then bytes: any total
 * order makes the set unique and searchable, and this one decides most compares on the length.
 */
#include "tern/zone/zone_delta.h"

#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/wire/dname.h"

struct zone_delta {
    uint32_t refs; /* atomic */
    uint32_t from, to;
    zone_t *fresh;         /* one reference */
    const uint8_t **names; /* n, sorted, unique, pointing into bytes */
    size_t n;
    uint8_t *bytes;
};

static int name_cmp(const uint8_t *a, const uint8_t *b)
{
    size_t la = dname_len(a), lb = dname_len(b);
    if (la != lb)
        return la < lb ? -1 : 1;
    return memcmp(a, b, la);
}

static int name_qcmp(const void *a, const void *b)
{
    return name_cmp(*(const uint8_t *const *)a, *(const uint8_t *const *)b);
}

zone_delta_t *zone_delta_new(const zone_t *base, zone_t *fresh, const uint8_t *const *names,
                             size_t n)
{
    zone_delta_t *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->refs = 1;
    d->from = base->serial;
    d->to = fresh->serial;
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += dname_len(names[i]);
    d->bytes = malloc(bytes ? bytes : 1);
    d->names = malloc((n ? n : 1) * sizeof(*d->names));
    if (!d->bytes || !d->names)
        goto fail;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = dname_len(names[i]);
        memcpy(d->bytes + off, names[i], len);
        d->names[i] = d->bytes + off;
        off += len;
    }
    qsort(d->names, n, sizeof(*d->names), name_qcmp);
    for (size_t i = 0; i < n; i++) /* duplicates: kept once */
        if (d->n == 0 || name_cmp(d->names[d->n - 1], d->names[i]) != 0)
            d->names[d->n++] = d->names[i];
    d->fresh = zone_retain(fresh);
    return d;
fail:
    free(d->bytes);
    free(d->names);
    free(d);
    return NULL;
}

uint32_t zone_delta_from(const zone_delta_t *d)
{
    return d->from;
}

uint32_t zone_delta_to(const zone_delta_t *d)
{
    return d->to;
}

const uint8_t *const *zone_delta_names(const zone_delta_t *d, size_t *n)
{
    *n = d->n;
    return d->names;
}

bool zone_delta_has(const zone_delta_t *d, const uint8_t *lc)
{
    size_t lo = 0, hi = d->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp(d->names[mid], lc);
        if (c == 0)
            return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

const zone_t *zone_delta_fresh(const zone_delta_t *d)
{
    return d->fresh;
}

zone_delta_t *zone_delta_retain(zone_delta_t *d)
{
    __atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
    return d;
}

void zone_delta_release(zone_delta_t *d)
{
    if (!d || __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    zone_free(d->fresh);
    free(d->names);
    free(d->bytes);
    free(d);
}
