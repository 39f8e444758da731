/*
 * xfr_catalog_parse.c — see xfr_catalog.h: a catalog zone's members (RFC 9432 §4) and the member
 * list kept in the catalog's directory. No threads, no state: the transfer service
 * (xfr_catalog.c) calls these on a puller or the loader thread.
 */
#include "tern/xfr/xfr_catalog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"

/* A member list file past this is not one of ours: 100 bytes a member, 100,000 members. */
#define LIST_FILE_MAX (16u << 20)

/* The first line of a member list file: its format, so a later one can be told apart. */
#define LIST_MAGIC "tern-catalog-members 1"

static void member_clear(xfr_catalog_member_t *m);

int xfr_catalog_list_add(xfr_catalog_list_t *l, const char *zone, const char *id, const char *group,
                         const char *coo)
{
    if (tern_grow((void **)&l->m, &l->cap, l->n + 1, sizeof(*l->m)) < 0)
        return TERN_ENOMEM;
    xfr_catalog_member_t *m = &l->m[l->n];
    *m = (xfr_catalog_member_t){.zone = strdup(zone), .id = strdup(id)};
    if (group)
        m->group = strdup(group);
    if (coo)
        m->coo = strdup(coo);
    if (!m->zone || !m->id || (group && !m->group) || (coo && !m->coo)) {
        member_clear(m);
        return TERN_ENOMEM;
    }
    l->n++;
    return 0;
}

/* qsort_r(): indexes into the list ctx by zone, then by position (the first listed first). */
static int by_zone(const void *a, const void *b, void *ctx)
{
    const xfr_catalog_list_t *l = ctx;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(l->m[i].zone, l->m[j].zone);
    return c ? c : (i > j) - (i < j);
}

int xfr_catalog_list_index(xfr_catalog_list_t *l)
{
    size_t *ix = malloc((l->n ? l->n : 1) * sizeof(*ix));
    if (!ix)
        return TERN_ENOMEM;
    for (size_t i = 0; i < l->n; i++)
        ix[i] = i;
    qsort_r(ix, l->n, sizeof(*ix), by_zone, l);
    free(l->ix);
    l->ix = ix;
    l->nix = l->n;
    return 0;
}

const xfr_catalog_member_t *xfr_catalog_list_find(const xfr_catalog_list_t *l, const char *key)
{
    if (!l->ix || l->nix != l->n) {
        for (size_t i = 0; i < l->n; i++)
            if (strcmp(l->m[i].zone, key) == 0)
                return &l->m[i];
        return NULL;
    }
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(l->m[l->ix[mid]].zone, key);
        if (c == 0)
            return &l->m[l->ix[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void member_clear(xfr_catalog_member_t *m)
{
    free(m->zone);
    free(m->id);
    free(m->group);
    free(m->coo);
}

void xfr_catalog_list_clear(xfr_catalog_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        member_clear(&l->m[i]);
    free(l->m);
    free(l->ix);
    *l = (xfr_catalog_list_t){0};
}

/* ---- the parse ------------------------------------------------------------------------------ */

/* label (wire, its length byte first) + rest (wire) into out; its length, 0 if too long. */
static size_t prepend(uint8_t *out, const char *label, const uint8_t *rest, size_t rest_len)
{
    size_t l = strlen(label);
    if (1 + l + rest_len > DNAME_MAXLEN)
        return 0;
    out[0] = (uint8_t)l;
    memcpy(out + 1, label, l);
    memcpy(out + 1 + l, rest, rest_len);
    return 1 + l + rest_len;
}

/* The RRset of type at name (lowercased wire, len bytes) in z, or NULL. */
static const zone_rrset_t *rrset_at(const zone_t *z, const uint8_t *name, size_t len, uint16_t type)
{
    const zone_node_t *n = zone_find_node(z, name, len, dname_hash(name));
    return n ? zone_node_rrset(n, type) : NULL;
}

/* The first character-string of a one-RR TXT RRset into out (room for cap, NUL-terminated).
 * false: not one RR, or an empty RDATA. */
static bool txt_first(const zone_rrset_t *s, char *out, size_t cap)
{
    if (s->count != 1)
        return false;
    size_t rdlen = tern_rd16(s->rdata);
    const uint8_t *rd = s->rdata + 2;
    if (rdlen < 1 || rd[0] + 1u > rdlen)
        return false;
    size_t n = rd[0] < cap - 1 ? rd[0] : cap - 1;
    memcpy(out, rd + 1, n);
    out[n] = '\0';
    return strlen(out) == n; /* no NUL inside */
}

/* A one-RR PTR RRset's target as a zone key into out (DNAME_KEY_MAX). false: not one RR or not a
 * name. */
static bool ptr_key(const zone_rrset_t *s, char *out)
{
    if (s->count != 1)
        return false;
    size_t rdlen = tern_rd16(s->rdata);
    const uint8_t *rd = s->rdata + 2;
    char text[DNAME_KEY_MAX];
    const char *why;
    return dname_check(rd, rdlen) >= 0 && dname_to_str(rd, text, sizeof(text)) >= 0 &&
           dname_key(text, out, DNAME_KEY_MAX, &why) >= 0;
}

/* The first label of wire name into out (presentation, escaped), "" if it does not fit. */
static void first_label(const uint8_t *name, char *out, size_t cap)
{
    uint8_t one[DNAME_MAXLABEL + 2];
    memcpy(one, name, name[0] + 1u);
    one[name[0] + 1] = 0;
    if (dname_to_str(one, out, cap) < 0) {
        out[0] = '\0';
        return;
    }
    size_t l = strlen(out);
    if (l && out[l - 1] == '.')
        out[l - 1] = '\0';
}

/* A group name we keep and write to the member list: printable ASCII, no space (a TXT string may
 * hold any byte; such a group names no template here). */
static bool group_ok(const char *g)
{
    if (!*g)
        return false;
    for (const char *p = g; *p; p++)
        if (*p <= ' ' || *p > '~')
            return false;
    return true;
}

/* version.<catalog> TXT must be "2" (RFC 9432 §4.2.1). 0 or TERN_EINVAL with err. */
static int check_version(const zone_t *cat, const char *ckey, char *err, size_t errlen)
{
    uint8_t name[DNAME_MAXLEN];
    size_t len = prepend(name, "version", cat->apex, cat->apex_len);
    const zone_rrset_t *s = len ? rrset_at(cat, name, len, WIRE_T_TXT) : NULL;
    char v[256];
    if (!s) {
        snprintf(err, errlen,
                 "catalog %s: no version property (version.%s TXT): not a catalog "
                 "zone tern can follow",
                 ckey, ckey);
        return TERN_EINVAL;
    }
    if (!txt_first(s, v, sizeof(v)) || strcmp(v, "2") != 0) {
        snprintf(err, errlen,
                 "catalog %s: version.%s TXT is %s%.32s%s, not \"2\": only version 2 "
                 "(RFC 9432) is supported",
                 ckey, ckey, s->count == 1 ? "\"" : "", s->count == 1 ? v : "several records",
                 s->count == 1 ? "\"" : "");
        return TERN_EINVAL;
    }
    return 0;
}

/* The group and coo properties of member id (its node name: wire, lowercased, len bytes). */
static void properties(const zone_t *cat, const char *ckey, const char *id, const uint8_t *name,
                       size_t len, char *group, size_t gcap, char *coo)
{
    uint8_t pn[DNAME_MAXLEN];
    size_t pl = prepend(pn, "group", name, len);
    const zone_rrset_t *s = pl ? rrset_at(cat, pn, pl, WIRE_T_TXT) : NULL;
    group[0] = coo[0] = '\0';
    if (s && (!txt_first(s, group, gcap) || !group_ok(group))) {
        log_warn("xfr: catalog %s: group.%s.zones.%s: not one TXT of printable text; the member "
                 "takes the catalog's primaries",
                 ckey, id, ckey);
        group[0] = '\0';
    }
    pl = prepend(pn, "coo", name, len);
    s = pl ? rrset_at(cat, pn, pl, WIRE_T_PTR) : NULL;
    if (s && !ptr_key(s, coo)) {
        log_warn("xfr: catalog %s: coo.%s.zones.%s: not one PTR; ignored", ckey, id, ckey);
        coo[0] = '\0';
    }
}

/* Node n of cat, a member's (<id>.zones.<catalog>), into out unless it is ignored (logged). */
static int parse_member(const zone_t *cat, const char *ckey, const zone_node_t *n,
                        xfr_catalog_list_t *out)
{
    char id[DNAME_KEY_MAX], key[DNAME_KEY_MAX], group[256], coo[DNAME_KEY_MAX];
    first_label(n->name, id, sizeof(id));
    const zone_rrset_t *ptr = zone_node_rrset(n, WIRE_T_PTR);
    if (!ptr)
        return 0; /* a property's parent only (an empty non-terminal), or other data */
    if (!ptr_key(ptr, key)) {
        log_warn("xfr: catalog %s: member %s.zones.%s has %u PTR records (RFC 9432 4.1: exactly "
                 "one); ignored",
                 ckey, id, ckey, ptr->count);
        return 0;
    }
    properties(cat, ckey, id, n->name, n->name_len, group, sizeof(group), coo);
    return xfr_catalog_list_add(out, key, id, group[0] ? group : NULL, coo[0] ? coo : NULL);
}

/* A zone listed under two ids (RFC 9432 4.1): the first in l is kept, the others dropped
 * (logged); l indexed by zone after. 0 or TERN_ENOMEM. */
static int dedupe(xfr_catalog_list_t *l, const char *ckey)
{
    if (xfr_catalog_list_index(l) < 0)
        return TERN_ENOMEM;
    bool *drop = calloc(l->n ? l->n : 1, sizeof(*drop));
    if (!drop)
        return TERN_ENOMEM;
    size_t dups = 0;
    for (size_t k = 1; k < l->n; k++) {
        const xfr_catalog_member_t *first = &l->m[l->ix[k - 1]], *m = &l->m[l->ix[k]];
        if (strcmp(first->zone, m->zone) != 0)
            continue;
        /* equal zones sort by position: the one before is the first listed, or dropped too */
        size_t keep = k - 1;
        while (drop[l->ix[keep]])
            keep--;
        log_warn("xfr: catalog %s: zone %s is listed twice, as %s and %s; the first (%s) is used",
                 ckey, m->zone, l->m[l->ix[keep]].id, m->id, l->m[l->ix[keep]].id);
        drop[l->ix[k]] = true;
        dups++;
    }
    if (dups) {
        size_t w = 0;
        for (size_t i = 0; i < l->n; i++) {
            if (drop[i])
                member_clear(&l->m[i]);
            else
                l->m[w++] = l->m[i];
        }
        l->n = w;
    }
    free(drop);
    return dups ? xfr_catalog_list_index(l) : 0;
}

int xfr_catalog_parse(const zone_t *cat, xfr_catalog_list_t *out, char *err, size_t errlen)
{
    char ckey[DNAME_KEY_MAX];
    if (dname_to_str(cat->apex, ckey, sizeof(ckey)) < 0)
        snprintf(ckey, sizeof(ckey), "?");
    size_t cl = strlen(ckey);
    if (cl > 1 && ckey[cl - 1] == '.')
        ckey[cl - 1] = '\0';
    int rc = check_version(cat, ckey, err, errlen);
    if (rc < 0)
        return rc;
    uint8_t zones[DNAME_MAXLEN];
    size_t zl = prepend(zones, "zones", cat->apex, cat->apex_len);
    if (!zl)
        return 0; /* no room for a member below: an empty catalog */
    unsigned member_labels = dname_labels(zones) + 1;
    for (size_t i = 0; i < cat->node_count && rc == 0; i++) {
        const zone_node_t *n = zone_node_at(cat, (uint32_t)i);
        if (n->labels == member_labels && dname_is_subdomain(n->name, zones))
            rc = parse_member(cat, ckey, n, out);
    }
    if (rc == 0)
        rc = dedupe(out, ckey);
    if (rc < 0) {
        snprintf(err, errlen, "catalog %s: out of memory", ckey);
        xfr_catalog_list_clear(out);
    }
    return rc;
}

/* ---- the member list file ------------------------------------------------------------------ */

char *xfr_catalog_path(const char *dir, const char *key, const char *suffix)
{
    size_t dl = strlen(dir), kl = strlen(key), sl = strlen(suffix);
    char *p = malloc(dl + 1 + kl + sl + 1);
    if (!p)
        return NULL;
    memcpy(p, dir, dl);
    p[dl] = '/';
    for (size_t i = 0; i < kl; i++) {
        char c = key[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-' || c == '_';
        p[dl + 1 + i] = ok ? c : '_';
    }
    memcpy(p + dl + 1 + kl, suffix, sl + 1);
    return p;
}

int xfr_catalog_list_write(const xfr_catalog_list_t *l, const char *path, char *err, size_t errlen)
{
    /* one line a member: zone, id, group, coo, tab-separated ("-": none); keys and ids are
     * escaped by dname_key()/dname_to_str() and groups printable, so none holds a tab */
    size_t cap = sizeof(LIST_MAGIC) + 1, len = 0;
    for (size_t i = 0; i < l->n; i++)
        cap += strlen(l->m[i].zone) + strlen(l->m[i].id) +
               (l->m[i].group ? strlen(l->m[i].group) : 1) +
               (l->m[i].coo ? strlen(l->m[i].coo) : 1) + 5;
    char *buf = malloc(cap);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        return TERN_ENOMEM;
    }
    len += (size_t)snprintf(buf, cap, "%s\n", LIST_MAGIC);
    for (size_t i = 0; i < l->n; i++)
        len +=
            (size_t)snprintf(buf + len, cap - len, "%s\t%s\t%s\t%s\n", l->m[i].zone, l->m[i].id,
                             l->m[i].group ? l->m[i].group : "-", l->m[i].coo ? l->m[i].coo : "-");
    int rc = tern_file_replace(path, buf, len, 0644, err, errlen);
    free(buf);
    return rc;
}

/* One line (NUL-terminated, no newline) of a list file into out. 0, TERN_ESYNTAX or ENOMEM. */
static int read_line(char *line, xfr_catalog_list_t *out)
{
    char *f[4];
    for (int i = 0; i < 4; i++) {
        f[i] = strsep(&line, "\t");
        if (!f[i] || !*f[i])
            return TERN_ESYNTAX;
    }
    if (line)
        return TERN_ESYNTAX;
    char key[DNAME_KEY_MAX];
    const char *why;
    if (dname_key(f[0], key, sizeof(key), &why) < 0 || strcmp(key, f[0]) != 0)
        return TERN_ESYNTAX;
    return xfr_catalog_list_add(out, f[0], f[1], strcmp(f[2], "-") ? f[2] : NULL,
                                strcmp(f[3], "-") ? f[3] : NULL);
}

int xfr_catalog_list_read(const char *path, xfr_catalog_list_t *out, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) < 0 && errno == ENOENT)
        return TERN_ENOENT;
    char *text;
    int rc = tern_file_read_text(path, LIST_FILE_MAX, false, &text, err, errlen);
    if (rc < 0)
        return rc;
    char *p = text, *line = strsep(&p, "\n");
    size_t lineno = 1;
    if (!line || strcmp(line, LIST_MAGIC) != 0) {
        snprintf(err, errlen, "%s:1: not a member list (\"%s\" expected)", path, LIST_MAGIC);
        rc = TERN_ESYNTAX;
    }
    while (rc == 0 && p && *p) {
        line = strsep(&p, "\n");
        lineno++;
        if ((rc = read_line(line, out)) == TERN_ESYNTAX)
            snprintf(err, errlen, "%s:%zu: expected zone, id, group and coo, tab-separated", path,
                     lineno);
        else if (rc < 0)
            snprintf(err, errlen, "%s: out of memory", path);
    }
    free(text);
    if (rc < 0)
        xfr_catalog_list_clear(out);
    return rc;
}
