/*
 * health_index.c — checks by address for the zone builders (see health_index.h).
 *
 * Entries are sorted by (family, address, config order), so a lookup is a binary search and a
 * short walk over the entries of one address: zone builds call it for every A/AAAA record.
 */
#include "tern/source/health_index.h"

#include <stdlib.h>
#include <string.h>

#include "tern/wire/dname.h"
#include "tern/wire/rr.h"

struct hent {
    health_spec_t spec; /* uri and host point into the entry's own copies */
    char *owner;        /* NULL = any owner */
    char *uri, *host;
    size_t order;
};

struct health_index {
    health_registry_t *reg;
    struct hent *e;
    size_t n;
};

static size_t alen(uint8_t family)
{
    return family == 6 ? 16 : 4;
}

static int cmp_ent(const void *pa, const void *pb)
{
    const struct hent *a = pa, *b = pb;
    if (a->spec.family != b->spec.family)
        return a->spec.family < b->spec.family ? -1 : 1;
    int c = memcmp(a->spec.addr, b->spec.addr, alen(a->spec.family));
    if (c)
        return c;
    return a->order < b->order ? -1 : a->order > b->order;
}

void health_index_free(health_index_t *x)
{
    if (!x)
        return;
    for (size_t i = 0; i < x->n; i++) {
        free(x->e[i].owner);
        free(x->e[i].uri);
        free(x->e[i].host);
    }
    free(x->e);
    free(x);
}

static int dup(char **dst, const char *src)
{
    *dst = NULL;
    return src && !(*dst = strdup(src)) ? -1 : 0;
}

health_index_t *health_index_new(health_registry_t *reg, const config_health_t *h, bool *nomem)
{
    *nomem = false;
    if (!h->enabled || h->nchecks == 0)
        return NULL;
    health_index_t *x = calloc(1, sizeof(*x));
    if (!x || !(x->e = calloc(h->nchecks, sizeof(*x->e))))
        goto nomem;
    x->reg = reg;
    for (size_t i = 0; i < h->nchecks; i++) {
        const config_health_check_t *c = &h->checks[i];
        struct hent *e = &x->e[x->n++];
        e->spec = c->spec;
        e->order = i;
        if (dup(&e->owner, c->owner) < 0 || dup(&e->uri, c->spec.uri) < 0 ||
            dup(&e->host, c->spec.host) < 0)
            goto nomem;
        e->spec.uri = e->uri;
        e->spec.host = e->host;
    }
    qsort(x->e, x->n, sizeof(*x->e), cmp_ent);
    return x;
nomem:
    health_index_free(x);
    *nomem = true;
    return NULL;
}

health_ep_t *health_index_lookup(void *ctx, const uint8_t *owner, uint16_t type,
                                 const uint8_t *addr)
{
    const health_index_t *x = ctx;
    if (!x)
        return NULL;
    uint8_t family = type == WIRE_T_AAAA ? 6 : 4;
    /* the first entry of this address */
    size_t lo = 0, hi = x->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct hent *m = &x->e[mid];
        int c = m->spec.family != family ? (m->spec.family < family ? -1 : 1)
                                         : memcmp(m->spec.addr, addr, alen(family));
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    char name[DNAME_MAXLEN * 4 + 2];
    bool have_name = false;
    const struct hent *any = NULL, *own = NULL;
    for (size_t i = lo; i < x->n && !own; i++) {
        const struct hent *e = &x->e[i];
        if (e->spec.family != family || memcmp(e->spec.addr, addr, alen(family)) != 0)
            break;
        if (!e->owner) {
            if (!any)
                any = e;
            continue;
        }
        if (!have_name) {
            size_t n = dname_to_str(owner, name, sizeof(name)) > 0 ? strlen(name) : 0;
            if (n > 1 && name[n - 1] == '.')
                name[n - 1] = '\0';
            have_name = true;
        }
        if (strcmp(e->owner, name) == 0)
            own = e;
    }
    const struct hent *e = own ? own : any;
    if (!e)
        return NULL;
    health_spec_t sp = e->spec;
    if (!sp.host && (sp.proto == HEALTH_HTTP || sp.proto == HEALTH_HTTPS)) {
        if (!have_name) {
            size_t n = dname_to_str(owner, name, sizeof(name)) > 0 ? strlen(name) : 0;
            if (n > 1 && name[n - 1] == '.')
                name[n - 1] = '\0';
        }
        sp.host = name;
    }
    return health_intern(x->reg, &sp);
}
