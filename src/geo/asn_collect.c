/*
 * asn_collect.c — see asn_collect.h. Growable arrays of ranges and names, one string pool.
 */
#include "asn_collect.h"

#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/common/grow.h"

#define TEXT_MAXLEN 65535u /* the table's u16 country and name length fields */

static int ranges_push(struct asn_ranges *rs, const struct asn_range *r)
{
    void *v = rs->v;
    int rc = tern_grow(&v, &rs->cap, rs->n + 1, sizeof(*rs->v));
    rs->v = v;
    if (rc)
        return rc;
    rs->v[rs->n++] = *r;
    return 0;
}

static int str_add(asn_collect_t *c, const char *s, size_t len, size_t *off)
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

static int name_add(asn_collect_t *c, uint32_t asn, const char *cc, size_t cc_len, const char *name,
                    size_t name_len)
{
    if (!cc)
        cc_len = 0;
    if (!name)
        name_len = 0;
    if (asn == 0 || (cc_len == 0 && name_len == 0))
        return 0;
    if (cc_len > TEXT_MAXLEN)
        cc_len = TEXT_MAXLEN;
    if (name_len > TEXT_MAXLEN)
        name_len = TEXT_MAXLEN;
    void *v = c->names;
    int rc = tern_grow(&v, &c->cap_names, c->n_names + 1, sizeof(*c->names));
    c->names = v;
    if (rc)
        return rc;
    struct asn_name *n = &c->names[c->n_names];
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

int asn_collect_add(asn_collect_t *c, bool v6, u128 start, u128 end, uint32_t asn, const char *cc,
                    size_t cc_len, const char *name, size_t name_len)
{
    struct asn_range r = {.start = start, .end = end, .seq = c->seq, .asn = asn};
    int rc = ranges_push(v6 ? &c->r6 : &c->r4, &r);
    if (rc == 0)
        rc = name_add(c, asn, cc, cc_len, name, name_len);
    c->seq++;
    return rc;
}

void asn_collect_free(asn_collect_t *c)
{
    free(c->r4.v);
    free(c->r6.v);
    free(c->names);
    free(c->str);
    memset(c, 0, sizeof(*c));
}
