/*
 * config_rows.c — the schema engine: rows (opt_t) and blocks (conf_block_t), and what they drive.
 *
 * libyaml loads the whole file into a node tree (configs are small), and every node carries its
 * start mark, so each error can name file:line. A table of rows is the only place an option is
 * described: its defaults feed config_init(), its types and bounds drive parsing and validation,
 * its string rows and blocks drive config_copy() and config_free(), and its descriptions are what
 * config_schema_print() shows. A nested block (OPT_BLOCK) is parsed, reset, copied, compared,
 * printed and checked through its own hooks (config_parse.h), so this file names no feature:
 * config.c's table names the blocks, and the files that own them declare them. Nested mappings
 * have small field tables of their own, checked by config_get_fields(), so an unknown or
 * duplicate key is an error at any depth.
 */
#include "tern/conf/config.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "config_parse.h"
#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/common/hash.h"

/* A config of tens of thousands of zones is a few MiB; 64 MiB refuses a runaway file before
 * libyaml builds a node tree of it. */
#define CONFIG_FILE_MAX (64u << 20)

/* ---- errors and nodes --------------------------------------------------------------------- */

/* The longest message before escaping: two PATH_MAX paths (the file's name and a value) and the
 * words around them. Callers' buffers are smaller, so nothing they could hold is cut here. */
#define ERR_RAW_MAX (2 * PATH_MAX + 256)

/* fmt into err, its control characters escaped (tern_escape_controls()). */
static void set_err(char *err, size_t errlen, const char *fmt, ...) TERN_PRINTF(3, 4);

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    char raw[ERR_RAW_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    (void)tern_escape_controls(err, errlen, raw);
}

int config_fail(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *fmt, ...)
{
    char raw[ERR_RAW_MAX];
    int k = snprintf(raw, sizeof(raw), "%s:%zu: %s%s", pc->path, n->start_mark.line + 1,
                     key ? key : "", key ? ": " : "");
    if (k >= 0 && (size_t)k < sizeof(raw)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw + k, sizeof(raw) - (size_t)k, fmt, ap);
        va_end(ap);
    }
    (void)tern_escape_controls(pc->err, pc->errlen, raw);
    return TERN_ESYNTAX;
}

const char *config_node_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return is_plain(n) ? "a plain scalar" : "a string";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

/* "a, b or c" from count names. */
static void join_names(const char *const *names, size_t count, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < count && off < len; i++) {
        const char *sep = i == 0 ? "" : i + 1 == count ? " or " : ", ";
        int k = snprintf(buf + off, len - off, "%s%s", sep, names[i]);
        if (k < 0)
            break;
        off += (size_t)k;
    }
}

/* Plain decimal integer, optionally negative; anything else (hex, floats, quotes) is refused so
 * "10" in JSON or 1e3 in YAML are type errors rather than silent conversions. */
static bool parse_int(const yaml_node_t *n, long long *out)
{
    if (!is_plain(n))
        return false;
    const char *s = scalar(n);
    const char *p = s + (*s == '-');
    if (*p == '\0' || strspn(p, "0123456789") != strlen(p) || strlen(p) > 12)
        return false;
    *out = strtoll(s, NULL, 10);
    return true;
}

static bool parse_bool(const yaml_node_t *n, bool *out)
{
    if (is_plain(n) && strcasecmp(scalar(n), "true") == 0)
        *out = true;
    else if (is_plain(n) && strcasecmp(scalar(n), "false") == 0)
        *out = false;
    else
        return false;
    return true;
}

/* An integer in [min, max] at n, or an error naming key and field. */
int config_get_int(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                   long long min, long long max, long long *out)
{
    const char *sep = field ? ": " : "";
    field = field ? field : "";
    if (!parse_int(n, out)) {
        if (n->type == YAML_SCALAR_NODE)
            return config_fail(pc, n, key, "%s%sexpected an integer, got \"%s\"", field, sep,
                               scalar(n));
        return config_fail(pc, n, key, "%s%sexpected an integer, got %s", field, sep,
                           config_node_kind(n));
    }
    if (*out < min || *out > max)
        return config_fail(pc, n, key, "%s%s%lld is out of range %lld..%lld", field, sep, *out, min,
                           max);
    return 0;
}

int config_get_bool(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                    bool *out)
{
    if (!parse_bool(n, out))
        return config_fail(pc, n, key, "%s%sexpected true or false, got %s", field ? field : "",
                           field ? ": " : "", config_node_kind(n));
    return 0;
}

/* One of names (count of them), as its index. */
int config_get_enum(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                    const char *const *names, size_t count, size_t *out)
{
    const char *sep = field ? ": " : "";
    char want[128];
    field = field ? field : "";
    join_names(names, count, want, sizeof(want));
    if (!is_text(n))
        return config_fail(pc, n, key, "%s%sexpected %s, got %s", field, sep, want,
                           config_node_kind(n));
    for (size_t i = 0; i < count; i++) {
        if (strcmp(names[i], scalar(n)) == 0) {
            *out = i;
            return 0;
        }
    }
    return config_fail(pc, n, key, "%s%sexpected %s, got \"%s\"", field, sep, want, scalar(n));
}

/* ---- nested mappings ---------------------------------------------------------------------- */

/* Check that n is a mapping whose keys are among fields, each at most once, none refused, every
 * required one present; val[i] gets each field's value node or NULL. Errors are "key: ...". */
int config_get_fields(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const field_t *fields,
                      size_t nfields, const yaml_node_t **val)
{
    const char *names[MAX_FIELDS];
    const yaml_node_t *keys[MAX_FIELDS] = {NULL};
    size_t nnames = 0;
    char want[256];
    for (size_t i = 0; i < nfields; i++) {
        val[i] = NULL;
        if (!fields[i].later)
            names[nnames++] = fields[i].key;
    }
    want[0] = '\0';
    for (size_t i = 0, off = 0; i < nnames && off < sizeof(want); i++) {
        int k = snprintf(want + off, sizeof(want) - off, "%s%s", i ? ", " : "", names[i]);
        off += k < 0 ? sizeof(want) : (size_t)k;
    }
    if (n->type != YAML_MAPPING_NODE)
        return config_fail(pc, n, key, "expected a mapping {%s}, got %s", want,
                           config_node_kind(n));
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(pc, p->key);
        if (k->type != YAML_SCALAR_NODE)
            return config_fail(pc, k, key, "keys must be strings, got %s", config_node_kind(k));
        size_t i = 0;
        while (i < nfields && strcmp(fields[i].key, scalar(k)) != 0)
            i++;
        if (i == nfields)
            return config_fail(pc, k, key, "unknown key \"%s\" (want %s)", scalar(k), want);
        if (keys[i])
            return config_fail(pc, k, key, "duplicate key \"%s\" (first at line %zu)", scalar(k),
                               line_of(keys[i]));
        if (fields[i].later)
            return config_fail(pc, k, key, "%s: not supported yet (%s)", fields[i].key,
                               fields[i].later);
        keys[i] = k;
        val[i] = node(pc, p->value);
    }
    for (size_t i = 0; i < nfields; i++)
        if (fields[i].required && !val[i])
            return config_fail(pc, n, key, "missing \"%s\" (%s)", fields[i].key, fields[i].desc);
    return 0;
}

/* "key" for a single item, "key[index]" for an item of a sequence. */
void config_item_key(char *buf, size_t len, const char *key, const yaml_node_t *parent,
                     size_t index)
{
    if (parent->type == YAML_SEQUENCE_NODE)
        snprintf(buf, len, "%s[%zu]", key, index);
    else
        snprintf(buf, len, "%s", key);
}

/* Call fn for n's items if it is a sequence, else for n itself (index 0). */
int config_each_item(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n, item_fn fn)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fn(pc, o, n, n, 0);
    size_t index = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++, index++) {
        int r = fn(pc, o, n, node(pc, *it), index);
        if (r < 0)
            return r;
    }
    return 0;
}

char *config_resolve_path(const parse_ctx_t *pc, const char *path)
{
    if (path[0] == '/' || !pc->dir)
        return strdup(path);
    size_t dl = strlen(pc->dir), pl = strlen(path);
    char *joined = malloc(dl + pl + 1);
    if (joined) {
        memcpy(joined, pc->dir, dl);
        memcpy(joined + dl, path, pl + 1);
    }
    return joined;
}

/* ---- scalar options ----------------------------------------------------------------------- */

static char **str_field(config_t *c, const opt_t *o)
{
    return (char **)(void *)((char *)c + o->offset);
}

static const char *str_value(const config_t *c, const opt_t *o)
{
    const char *p;
    memcpy(&p, (const char *)c + o->offset, sizeof(p));
    return p;
}

static bool is_str_opt(const opt_t *o)
{
    return o->type == OPT_STR || o->type == OPT_PATH || o->type == OPT_ADDR;
}

/* v into the field of o in base (a config_t, or a config_redis_t for config_redis_schema). */
static void store_uint(void *base, const opt_t *o, long long v)
{
    char *field = (char *)base + o->offset;
    if (o->size == sizeof(uint16_t)) {
        uint16_t u = (uint16_t)v;
        memcpy(field, &u, sizeof(u));
    } else {
        uint32_t u = (uint32_t)v;
        memcpy(field, &u, sizeof(u));
    }
}

/* The value of workers: "auto" (an OPT_WORKERS row). */
unsigned config_auto_workers(void)
{
    /* The affinity mask, not the machine's CPU count: under taskset or a container cpuset only
     * those CPUs run our threads. */
    cpu_set_t set;
    long n = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = CPU_COUNT(&set);
    if (n <= 0)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > CONFIG_MAX_WORKERS ? CONFIG_MAX_WORKERS : (unsigned)n;
}

static int set_uint(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n, bool allow_auto)
{
    long long v = 0;
    if (allow_auto && n->type == YAML_SCALAR_NODE && strcmp(scalar(n), "auto") == 0) {
        store_uint(pc->c, o, config_auto_workers());
        return 0;
    }
    if (allow_auto && !parse_int(n, &v)) {
        if (n->type == YAML_SCALAR_NODE)
            return config_fail(pc, n, o->key, "expected an integer or \"auto\", got \"%s\"",
                               scalar(n));
        return config_fail(pc, n, o->key, "expected an integer or \"auto\", got %s",
                           config_node_kind(n));
    }
    int r = config_get_int(pc, n, o->key, NULL, o->min, o->max, &v);
    if (r < 0)
        return r;
    store_uint(pc->c, o, v);
    return 0;
}

static int set_bool(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n)
{
    bool v;
    int r = config_get_bool(pc, n, o->key, NULL, &v);
    if (r < 0)
        return r;
    memcpy((char *)pc->c + o->offset, &v, sizeof(v));
    return 0;
}

static int set_enum(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n)
{
    size_t v = 0;
    int r = config_get_enum(pc, n, o->key, NULL, o->names, (size_t)o->max + 1, &v);
    if (r < 0)
        return r;
    store_uint(pc->c, o, (long long)v);
    return 0;
}

/* An OPT_STR, OPT_PATH or OPT_ADDR value at n into *out, replacing it; null unsets it (NULL), and
 * so does "" for an empty_unsets option. Errors are "key: field: ..." (field may be NULL). */
int config_get_str(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                   const opt_t *o, char **out)
{
    const char *sep = field ? ": " : "";
    field = field ? field : "";
    if (n->type != YAML_SCALAR_NODE)
        return config_fail(pc, n, key, "%s%sexpected a string, got %s", field, sep,
                           config_node_kind(n));
    const char *s = scalar(n);
    if (is_null(n) || (o->empty_unsets && is_text(n) && *s == '\0')) {
        free(*out);
        *out = NULL;
        return 0;
    }
    if (!is_text(n))
        return config_fail(pc, n, key, "%s%scontains a NUL byte", field, sep);
    if ((long long)strlen(s) < o->min)
        return config_fail(pc, n, key, "%s%smust not be empty", field, sep);
    if (o->type == OPT_ADDR && o->valid && !o->valid(s))
        return config_fail(pc, n, key, "%s%sbad address \"%s\" (want ADDR:PORT or [V6]:PORT)",
                           field, sep, s);
    char *copy = o->type == OPT_PATH ? config_resolve_path(pc, s) : strdup(s);
    if (!copy)
        return TERN_ENOMEM;
    size_t len = strlen(copy);
    if ((long long)len > o->max) {
        int r = config_fail(pc, n, key, "%s%s\"%s\" is %zu bytes long, more than the %lld allowed",
                            field, sep, copy, len, o->max);
        free(copy);
        return r;
    }
    free(*out);
    *out = copy;
    return 0;
}

static int set_str(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n)
{
    return config_get_str(pc, n, o->key, NULL, o, str_field(pc->c, o));
}

/* The value of a nested schema's row o at n into its field in base: "key: o->key: ...". */
int config_get_row(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const opt_t *o,
                   void *base)
{
    char *field = (char *)base + o->offset;
    long long v = 0;
    size_t e = 0;
    bool b = false;
    int rc;
    switch (o->type) {
    case OPT_UINT:
        if ((rc = config_get_int(pc, n, key, o->key, o->min, o->max, &v)) == 0)
            store_uint(base, o, v);
        return rc;
    case OPT_BOOL:
        if ((rc = config_get_bool(pc, n, key, o->key, &b)) == 0)
            memcpy(field, &b, sizeof(b));
        return rc;
    case OPT_ENUM:
        if ((rc = config_get_enum(pc, n, key, o->key, o->names, (size_t)o->max + 1, &e)) == 0)
            store_uint(base, o, (long long)e);
        return rc;
    case OPT_STR:
    case OPT_PATH:
    case OPT_ADDR:
        return config_get_str(pc, n, key, o->key, o, (char **)(void *)field);
    default:
        return TERN_EINVAL; /* the caller parses the others itself */
    }
}

void config_set_defaults(void *base, const opt_t *rows, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const opt_t *o = &rows[i];
        if (o->size == 0)
            continue; /* no field of its own: its owner stores it */
        if (o->type == OPT_UINT || o->type == OPT_WORKERS || o->type == OPT_ENUM) {
            store_uint(base, o, o->def);
        } else if (o->type == OPT_BOOL) {
            bool v = o->def != 0;
            memcpy((char *)base + o->offset, &v, sizeof(v));
        }
    }
}

/* The key node of name in mapping n, or n itself when there is none. */
const yaml_node_t *config_key_node(const parse_ctx_t *pc, const yaml_node_t *n, const char *name)
{
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(pc, p->key);
        if (k->type == YAML_SCALAR_NODE && strcmp(scalar(k), name) == 0)
            return k;
    }
    return n;
}

/* k (named key) is about to set the field of claim: the first one in a file may, a second is an
 * error. */
int config_claim(parse_ctx_t *pc, int claim, const yaml_node_t *k, const char *key)
{
    if (pc->claimed[claim].by)
        return config_fail(pc, k, key, "conflicts with %s at line %zu (give one of them)",
                           pc->claimed[claim].name, line_of(pc->claimed[claim].by));
    pc->claimed[claim].by = k;
    pc->claimed[claim].name = key;
    return 0;
}

/* ---- the document ------------------------------------------------------------------------- */

/* Whether o stores one value in a field of config_t of its own (and can have an origin). */
static bool has_field(const opt_t *o)
{
    return is_str_opt(o) || o->type == OPT_UINT || o->type == OPT_WORKERS || o->type == OPT_ENUM ||
           o->type == OPT_BOOL;
}

/* A hash of o's value in c: equal later means the value is still the one the file gave. */
static uint64_t value_hash(const config_t *c, const opt_t *o)
{
    if (is_str_opt(o)) {
        const char *s = str_value(c, o);
        return s ? tern_hash_str(s) : 0;
    }
    return tern_hash64((const char *)c + o->offset, o->size, 0);
}

size_t config_rows_line_of(const config_t *c, const opt_t *rows, size_t count, const char *key)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(rows[i].key, key) == 0)
            return has_field(&rows[i]) && c->origin[i].line &&
                           c->origin[i].value == value_hash(c, &rows[i])
                       ? c->origin[i].line
                       : 0;
    return 0;
}

static int apply(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    switch (o->type) {
    case OPT_UINT:
        return set_uint(pc, o, n, false);
    case OPT_WORKERS:
        return set_uint(pc, o, n, true);
    case OPT_BOOL:
        return set_bool(pc, o, n);
    case OPT_ENUM:
        return set_enum(pc, o, n);
    case OPT_STR:
    case OPT_PATH:
    case OPT_ADDR:
        return set_str(pc, o, n);
    case OPT_BLOCK:
        return o->block && o->block->parse ? o->block->parse(pc, o, k, n) : TERN_EINVAL;
    case OPT_CUSTOM:
        break;
    case OPT_LATER:
        return config_fail(pc, k, o->key, "redins option not supported yet (%s)", o->desc);
    }
    return TERN_EINVAL;
}

/* The root node: a mapping with at least one option. */
static int check_root(parse_ctx_t *pc, const yaml_node_t *root)
{
    /* A file with no options is what a crashed editor or a half-finished deploy leaves behind,
     * never a configuration: taken as "all defaults" it would reload into serving no zone at
     * all. A config that means something names at least a listen address or a zone. */
    if (!root) {
        set_err(pc->err, pc->errlen,
                "%s: the file holds no options (empty, or only comments): refused, as a "
                "truncated file would be",
                pc->path);
        return TERN_EINVAL;
    }
    if (root->type != YAML_MAPPING_NODE)
        return config_fail(pc, root, NULL, "the top level must be a mapping of options, got %s",
                           config_node_kind(root));
    if (root->data.mapping.pairs.start == root->data.mapping.pairs.top)
        return config_fail(pc, root, NULL,
                           "an empty mapping ({}) holds no options: refused, as a truncated file "
                           "would be");
    return 0;
}

/* The row of top-level key k, or an error: unknown, given twice, or in conflict with a row of
 * its group (a redins key and another way to set the same fields). */
static int find_row(parse_ctx_t *pc, const opt_t *rows, size_t count, const yaml_node_t *k,
                    size_t *at)
{
    if (k->type != YAML_SCALAR_NODE)
        return config_fail(pc, k, NULL, "option names must be strings, got %s",
                           config_node_kind(k));
    size_t i = 0;
    while (i < count && strcmp(rows[i].key, scalar(k)) != 0)
        i++;
    if (i == count)
        return config_fail(pc, k, scalar(k), "unknown key");
    if (pc->seen[i])
        return config_fail(pc, k, scalar(k), "duplicate key (first at line %zu)",
                           line_of(pc->seen[i]));
    for (size_t j = 0; j < count && rows[i].group != 0; j++)
        if (pc->seen[j] && rows[j].group == rows[i].group && (rows[i].redins || rows[j].redins))
            return config_fail(pc, k, scalar(k), "conflicts with %s at line %zu (give one of them)",
                               rows[j].key, line_of(pc->seen[j]));
    *at = i;
    return 0;
}

static int load_root(parse_ctx_t *pc, const opt_t *rows, size_t count)
{
    const yaml_node_t *root = yaml_document_get_root_node(pc->doc);
    int r = check_root(pc, root);
    if (r < 0)
        return r;
    /* a redins config.json, whatever order its keys come in: redins' defaults apply where the
     * two differ (ratelimit's enable) */
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = node(pc, p->key);
        for (size_t i = 0; i < count && k->type == YAML_SCALAR_NODE; i++)
            if (rows[i].redins && strcmp(rows[i].key, scalar(k)) == 0)
                pc->redins = true;
    }
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = node(pc, p->key);
        size_t i = 0;
        if ((r = find_row(pc, rows, count, k, &i)) < 0)
            return r;
        /* geoip_db or asn_db itself always sets its field (null included: it unsets what the
         * file did not); a redins geoip block claims only what it sets */
        if (rows[i].claim && (r = config_claim(pc, rows[i].claim, k, rows[i].key)) < 0)
            return r;
        pc->seen[i] = k;
        if ((r = apply(pc, &rows[i], k, node(pc, p->value))) < 0)
            return r;
        if (has_field(&rows[i]))
            pc->c->origin[i] = (config_origin_t){(uint32_t)line_of(k), value_hash(pc->c, &rows[i])};
    }
    return 0;
}

/* The document's checks: the caller's, then each block's, the first error. */
static int check_doc(parse_ctx_t *pc, const opt_t *rows, size_t count, int (*check)(parse_ctx_t *))
{
    int r = check ? check(pc) : 0;
    for (size_t i = 0; i < count && r == 0; i++)
        if (rows[i].type == OPT_BLOCK && rows[i].block->check)
            r = rows[i].block->check(pc);
    return r;
}

/* path as a stdio stream: a regular file of sane size only (the config is read again on the
 * loader thread at every SIGHUP, where a FIFO would hang reloads for good and libyaml keeps the
 * whole file). NULL with the reason in err. */
static FILE *open_file(const char *path, char *err, size_t errlen, int *rc)
{
    struct stat st;
    char oerr[ERR_RAW_MAX];
    int fd = tern_open_regular(path, CONFIG_FILE_MAX, &st, oerr, sizeof(oerr));
    if (fd < 0) {
        set_err(err, errlen, "%s", oerr);
        *rc = fd;
        return NULL;
    }
    FILE *f = fdopen(fd, "r");
    if (!f) {
        int e = errno;
        close(fd);
        set_err(err, errlen, "%s: %s", path, strerror(e));
        *rc = -e;
    }
    return f;
}

/* The directory of path with a trailing '/' (malloc'd) into *dir, NULL for none. */
static int dir_of(const char *path, char **dir)
{
    const char *slash = strrchr(path, '/');
    *dir = NULL;
    if (!slash)
        return 0;
    size_t n = (size_t)(slash - path) + 1;
    if (!(*dir = malloc(n + 1)))
        return TERN_ENOMEM;
    memcpy(*dir, path, n);
    (*dir)[n] = '\0';
    return 0;
}

int config_rows_read(config_t *c, const char *path, const opt_t *rows, size_t count,
                     int (*check)(parse_ctx_t *pc), char *err, size_t errlen)
{
    const yaml_node_t *seen[CONFIG_MAX_OPTIONS] = {NULL};
    parse_ctx_t pc = {.c = c, .path = path, .err = err, .errlen = errlen, .seen = seen};
    yaml_parser_t parser;
    yaml_document_t doc;
    int r = TERN_ENOMEM;
    bool have_parser = false, have_doc = false;

    FILE *f = open_file(path, err, errlen, &r);
    if (!f)
        return r;
    r = TERN_ENOMEM;
    /* this file's lines replace any earlier one's: an option it leaves alone has none */
    free(c->file);
    memset(c->origin, 0, sizeof(c->origin));
    if (!(c->file = strdup(path)) || dir_of(path, &pc.dir) < 0)
        goto out;
    if (!yaml_parser_initialize(&parser))
        goto out;
    have_parser = true;
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &doc))
        goto syntax;
    have_doc = true;
    pc.doc = &doc;
    if ((r = load_root(&pc, rows, count)) < 0 || (r = check_doc(&pc, rows, count, check)) < 0)
        goto out;
    yaml_document_delete(&doc);
    have_doc = false;
    /* A second document ("---") would otherwise be skipped without a word. */
    if (!yaml_parser_load(&parser, &doc))
        goto syntax;
    have_doc = true;
    const yaml_node_t *extra = yaml_document_get_root_node(&doc);
    if (extra) {
        pc.doc = &doc;
        r = config_fail(&pc, extra, NULL, "a second YAML document (one configuration per file)");
    }
    goto out;

syntax:;
    const char *what = parser.problem ? parser.problem : "cannot parse";
    set_err(err, errlen, "%s:%zu: YAML syntax error: %s%s%s", path, parser.problem_mark.line + 1,
            what, parser.context ? " " : "", parser.context ? parser.context : "");
    r = parser.error == YAML_MEMORY_ERROR ? TERN_ENOMEM : TERN_ESYNTAX;
out:
    if (r == TERN_ENOMEM)
        set_err(err, errlen, "%s: out of memory", path);
    if (have_doc)
        yaml_document_delete(&doc);
    if (have_parser)
        yaml_parser_delete(&parser);
    free(pc.dir);
    fclose(f);
    return r;
}

/* ---- a whole config_t --------------------------------------------------------------------- */

/* Whether a and b hold the same value of row o (a field of its own, or a block's settings). */
static bool same_value(const config_t *a, const config_t *b, const opt_t *o)
{
    switch (o->type) {
    case OPT_STR:
    case OPT_PATH:
    case OPT_ADDR:
        return config_same_str(str_value(a, o), str_value(b, o));
    case OPT_UINT:
    case OPT_WORKERS:
    case OPT_ENUM:
    case OPT_BOOL:
        return memcmp((const char *)a + o->offset, (const char *)b + o->offset, o->size) == 0;
    case OPT_BLOCK:
        /* whichever key set them (query_log's settings: a redins log too) */
        return !o->block->same || o->block->same(a, b);
    default:
        return true;
    }
}

size_t config_rows_changes(const config_t *from, const config_t *to, const opt_t *rows,
                           size_t count, char *buf, size_t len)
{
    size_t n = 0, off = 0;
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        if (!rows[i].restart || same_value(from, to, &rows[i]))
            continue;
        if (off < len) {
            int k = snprintf(buf + off, len - off, "%s%s", n ? ", " : "", rows[i].key);
            off += k < 0 ? len : (size_t)k;
        }
        n++;
    }
    return n;
}

void config_rows_init(config_t *c, const opt_t *rows, size_t count)
{
    config_set_defaults(c, rows, count);
    for (size_t i = 0; i < count; i++)
        if (rows[i].type == OPT_BLOCK && rows[i].block->reset)
            rows[i].block->reset(c);
}

void config_rows_free(config_t *c, const opt_t *rows, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (is_str_opt(&rows[i])) {
            free(*str_field(c, &rows[i]));
            *str_field(c, &rows[i]) = NULL;
        } else if (rows[i].type == OPT_BLOCK && rows[i].block->reset) {
            rows[i].block->reset(c);
        }
    }
}

int config_rows_copy(config_t *dst, const config_t *src, const opt_t *rows, size_t count)
{
    int rc = 0;
    *dst = *src;
    for (size_t i = 0; i < count; i++)
        if (is_str_opt(&rows[i]))
            *str_field(dst, &rows[i]) = NULL;
    /* every block, even after a failure: none may keep src's pointers in dst */
    for (size_t i = 0; i < count; i++)
        if (rows[i].type == OPT_BLOCK && rows[i].block->copy && rows[i].block->copy(dst, src) < 0)
            rc = TERN_ENOMEM;
    for (size_t i = 0; i < count && rc == 0; i++) {
        const char *s = is_str_opt(&rows[i]) ? str_value(src, &rows[i]) : NULL;
        if (s && !(*str_field(dst, &rows[i]) = strdup(s)))
            rc = TERN_ENOMEM;
    }
    return rc;
}

/* One row of --help: the key indented by depth, its description and bounds. */
static void print_opt(FILE *out, int depth, const opt_t *o)
{
    char names[128];
    fprintf(out, "%*s%-*s %s", 2 + 2 * depth, "", 20 - 2 * depth, o->key, o->desc);
    switch (o->type) {
    case OPT_UINT:
        fprintf(out, " [%lld..%lld, default %lld]\n", o->min, o->max, o->def);
        break;
    case OPT_WORKERS:
        fprintf(out, " [%lld..%lld or auto, default %lld]\n", o->min, o->max, o->def);
        break;
    case OPT_BOOL:
        fprintf(out, " [default %s]\n", o->def ? "true" : "false");
        break;
    case OPT_ENUM:
        join_names(o->names, (size_t)o->max + 1, names, sizeof(names));
        fprintf(out, " [%s, default %s]\n", names, o->names[o->def]);
        break;
    case OPT_STR:
    case OPT_PATH:
    case OPT_ADDR:
        fprintf(out, " [at most %lld bytes, default unset]\n", o->max);
        break;
    default:
        fputc('\n', out);
        break;
    }
}

void config_print_fields(FILE *out, int depth, const field_t *fields, size_t count)
{
    for (size_t j = 0; j < count; j++) {
        const field_t *f = &fields[j];
        int indent = 2 + 2 * depth, width = 20 - 2 * depth;
        if (f->later)
            fprintf(out, "%*s%-*s not supported yet: %s\n", indent, "", width, f->key, f->later);
        else
            fprintf(out, "%*s%-*s %s\n", indent, "", width, f->key, f->desc);
    }
}

/* Row o and, under it, its block's rows (or what the block prints), indented by depth. */
static void print_row(FILE *out, int depth, const opt_t *o)
{
    print_opt(out, depth, o);
    if (o->type != OPT_BLOCK || !o->block)
        return;
    if (o->block->print)
        o->block->print(out, depth + 1);
    else
        config_print_rows(out, depth + 1, o->block->rows, o->block->nrows);
}

void config_print_rows(FILE *out, int depth, const opt_t *rows, size_t count)
{
    for (size_t j = 0; j < count; j++)
        print_row(out, depth, &rows[j]);
}

void config_row_fields(field_t *fields, const opt_t *rows, size_t count)
{
    for (size_t i = 0; i < count; i++)
        fields[i] = (field_t){rows[i].key, rows[i].desc, false, NULL};
}

void config_rows_print(FILE *out, const opt_t *rows, size_t count)
{
    bool redins_header = false;
    for (size_t i = 0; i < count; i++) {
        const opt_t *o = &rows[i];
        if ((o->redins || o->type == OPT_LATER) && !redins_header) {
            fprintf(out, "\nredins-style JSON keys (its config.json):\n");
            redins_header = true;
        }
        if (o->type == OPT_LATER)
            fprintf(out, "  %-20s not supported yet: %s\n", o->key, o->desc);
        else
            print_row(out, 0, o);
    }
}
