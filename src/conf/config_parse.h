/*
 * config_parse.h — private to src/conf: the schema engine (config_rows.c) that every block of the
 * configuration is written against.
 *
 * The engine knows rows (opt_t: a key, a type, a field, a default, bounds and a one-line
 * description), YAML nodes, and how to turn a node into a checked value or a
 * "file:line: key: message" error. It knows no feature: a row of type OPT_BLOCK is a nested block
 * that carries its own rows and hooks (conf_block_t: parse, reset, copy, same, print, check),
 * declared by the file that owns it (config_health.c declares "health:", config_limit.c "acl:",
 * "ratelimit:", "rrl:" and "cookies:", ...; config_blocks.h lists them). config.c holds the
 * top-level table of rows and hands it to the engine to load, print, copy and free a config_t,
 * as Knot's conf/schema.c has each module declare its own schema items.
 *
 * Dependencies point one way: config.c → the block files (config_blocks.h) → the engine (this
 * header). The engine calls a block only through its hooks. Nothing outside src/conf includes
 * this header (it is not installed).
 *
 * Lifecycle and threading: a parse_ctx_t lives for one config_load() call, on the caller's
 * thread; the libyaml document and every node pointer here die with that call.
 */
#ifndef TERN_CONF_CONFIG_PARSE_H
#define TERN_CONF_CONFIG_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "tern/common/compiler.h"
#include "tern/conf/config.h"

typedef enum {
    OPT_UINT,    /* plain integer in [min, max], stored in a field of `size` bytes */
    OPT_BOOL,    /* plain true / false */
    OPT_ENUM,    /* one of `names` (any scalar style); the index is stored like OPT_UINT */
    OPT_STR,     /* any scalar of min..max bytes; plain null, ~ or empty = unset (NULL) */
    OPT_PATH,    /* OPT_STR resolved against the config file's directory; max bounds the result */
    OPT_ADDR,    /* OPT_STR that the row's valid() accepts as an ADDR:PORT */
    OPT_WORKERS, /* OPT_UINT or the string "auto" */
    OPT_BLOCK,   /* a nested block: its rows and hooks in `block` (conf_block_t) */
    OPT_CUSTOM,  /* a nested value with a parser of its own (health's check address, expect): the
                    row names and describes it, its owner parses it */
    OPT_LATER,   /* a redins key tern does not implement yet: always an error saying so */
} opt_type_t;

/* Options that set the same fields share a group (a non-zero number): a redins option and any
 * other option of its group may not both appear in one file (which one would win is a guess we
 * refuse to make). config.c numbers them. */

/* Fields that several options may set, finer than a group (config_claim()): a claim is a small
 * number (config_blocks.h names them); the first option in a file to set one may, a second is an
 * error naming both lines. */
#define CONFIG_CLAIM_MAX 8

typedef struct conf_block conf_block_t;

typedef struct opt {
    const char *key;
    opt_type_t type;
    size_t offset; /* of the field in config_t (or in the struct a nested schema fills) */
    size_t size;   /* of that field (OPT_UINT, OPT_WORKERS, OPT_ENUM) */
    long long def; /* OPT_UINT, OPT_WORKERS, OPT_BOOL, OPT_ENUM */
    long long min; /* OPT_UINT, OPT_WORKERS: value; OPT_STR, OPT_PATH, OPT_ADDR: length */
    long long max;
    const char *const *names;     /* OPT_ENUM: the values, max + 1 of them */
    const conf_block_t *block;    /* OPT_BLOCK: the nested block's rows and hooks */
    bool (*valid)(const char *s); /* OPT_ADDR: whether s is an address */
    int group;
    int claim;         /* the field this option sets (a claim), when another may set it too */
    bool redins;       /* a key of redins' config.json only: such a file takes redins' defaults */
    bool restart;      /* bound at startup: a reload that changes it cannot apply it */
    bool empty_unsets; /* OPT_STR: "" unsets too (redins writes "password": "" for none) */
    const char *desc;  /* OPT_LATER: what the redins key is for */
} opt_t;

/* One config_load() call. */
typedef struct parse_ctx {
    config_t *c;
    yaml_document_t *doc;
    const char *path;
    char *dir; /* directory of path with a trailing '/', or NULL for the cwd */
    char *err;
    size_t errlen;
    const yaml_node_t **seen; /* key node of each schema option given in the file */
    bool redins; /* the file has a key only redins' config.json has (server, error_log, handler,
                    geoip, healthcheck, upstream, log): its "ratelimit" takes redins' defaults */
    size_t listen_line[CONFIG_MAX_LISTEN]; /* where each listen entry was given */
    struct {
        const yaml_node_t *by; /* key node of what set the claimed field, if anything did */
        const char *name;      /* its name: "geoip_db", "handler: geoip", ... */
    } claimed[CONFIG_CLAIM_MAX];
} parse_ctx_t;

/*
 * A nested block: the value of an OPT_BLOCK row. Every hook may be NULL. A block that owns
 * settings of config_t has reset and copy; a redins key that fills another block's settings has
 * only parse (and print, for --help); a block nested in another (health's log) may have only
 * rows, which its owner parses and the engine prints.
 */
struct conf_block {
    const opt_t *rows; /* the block's keys, printed under the row by --help */
    size_t nrows;
    /** The value n of row o (whose key node is k) into pc->c: replaces the block's settings. */
    int (*parse)(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n);
    /** Free the block's settings in c and set their defaults (no block given). c's part may be
     * all zero bytes (config_init()). */
    void (*reset)(config_t *c);
    /** dst's part is a shallow copy of src's (config_copy()): make it dst's own. 0, or
     * TERN_ENOMEM with dst's part owning only what reset() frees (never src's). */
    int (*copy)(config_t *dst, const config_t *src);
    /** The same settings in a and b (restart-only rows: a reload that changes them warns). */
    bool (*same)(const config_t *a, const config_t *b);
    /** --help rows under the row, indented by depth; NULL: rows, each with its own block's. */
    void (*print)(FILE *out, int depth);
    /** What the whole file must satisfy once every key is read (keys named across blocks). */
    int (*check)(parse_ctx_t *pc);
};

/* A key of a nested mapping (a zone, a listen entry, a redins block). */
typedef struct field {
    const char *key;
    const char *desc; /* what the value is, for "missing" errors */
    bool required;
    const char *later; /* non-NULL: a redins key tern refuses for now; what it is for */
} field_t;

/* --help rows for fields (a nested mapping's keys), indented by depth (1: under a top-level
 * key); a field tern refuses for now says so. */
void config_print_fields(FILE *out, int depth, const field_t *fields, size_t count);

/* --help rows for count rows, indented by depth, each followed by its block's rows. */
void config_print_rows(FILE *out, int depth, const opt_t *rows, size_t count);

/* field_t entries of count rows (key, desc), for config_get_fields(). */
void config_row_fields(field_t *fields, const opt_t *rows, size_t count);

/* Nested mappings have at most this many fields (tern's redis has 17). */
#define MAX_FIELDS 20

/* ---- nodes -------------------------------------------------------------------------------- */

static inline size_t line_of(const yaml_node_t *n)
{
    return n->start_mark.line + 1;
}

static inline const char *scalar(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static inline bool is_plain(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* YAML's null: ~, null or nothing at all, unquoted. */
static inline bool is_null(const yaml_node_t *n)
{
    const char *s = is_plain(n) ? scalar(n) : NULL;
    return s && (*s == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0);
}

/* Scalar text without an embedded NUL (a "\0" escape would cut it short silently). */
static inline bool is_text(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && strlen(scalar(n)) == n->data.scalar.length;
}

static inline const yaml_node_t *node(const parse_ctx_t *pc, int id)
{
    return yaml_document_get_node(pc->doc, id);
}

/* Two optional strings alike: by content, NULL only equal to NULL. */
static inline bool config_same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/** "a plain scalar", "a string", "a list", "a mapping" or "nothing", for type errors. */
const char *config_node_kind(const yaml_node_t *n);

/** dir + path for a relative path (malloc'd), or a copy of path. NULL: out of memory. */
char *config_resolve_path(const parse_ctx_t *pc, const char *path);

/** The key node of name in mapping n, or n itself when there is none (an error's line). */
const yaml_node_t *config_key_node(const parse_ctx_t *pc, const yaml_node_t *n, const char *name);

/* ---- values: 0, or TERN_ESYNTAX with "file:line: key: field: message" in pc->err ---------- */

/** Record an error at n's line: "path:line: key: <fmt>" (no "key: " when key is NULL), escaped
 * by tern_escape_controls(). Always returns TERN_ESYNTAX. */
int config_fail(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *fmt, ...)
    TERN_PRINTF(4, 5);

/** A plain integer in [min, max] at n; field (or NULL) names the key inside key. */
int config_get_int(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                   long long min, long long max, long long *out) TERN_WUR;

/** A plain true or false at n. */
int config_get_bool(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                    bool *out) TERN_WUR;

/** One of names (count of them) at n, as its index. */
int config_get_enum(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                    const char *const *names, size_t count, size_t *out) TERN_WUR;

/** An OPT_STR, OPT_PATH or OPT_ADDR value of row o at n into *out, replacing (freeing) it; null
 * unsets it, and so does "" when o->empty_unsets. TERN_ENOMEM too. */
int config_get_str(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                   const opt_t *o, char **out) TERN_WUR;

/** Check that n is a mapping whose keys are among fields, each at most once, none refused
 * (field_t.later), every required one present; val[i] gets each field's value node or NULL. */
int config_get_fields(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const field_t *fields,
                      size_t nfields, const yaml_node_t **val) TERN_WUR;

/** The value of row o (OPT_UINT, OPT_BOOL, OPT_ENUM, OPT_STR, OPT_PATH or OPT_ADDR) at n into
 * its field in base (the struct o's schema describes), checked against o's bounds; errors are
 * "key: o->key: ...". */
int config_get_row(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const opt_t *o,
                   void *base) TERN_WUR;

/** The defaults of the count rows at rows (OPT_UINT, OPT_WORKERS, OPT_ENUM, OPT_BOOL) into their
 * fields in base; other rows, and rows without a field (size 0), are left alone. */
void config_set_defaults(void *base, const opt_t *rows, size_t count);

/** "key" for a single item, "key[index]" for an item of a sequence (parent). */
void config_item_key(char *buf, size_t len, const char *key, const yaml_node_t *parent,
                     size_t index);

typedef int (*item_fn)(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *parent,
                       const yaml_node_t *n, size_t index);

/** Call fn for n's items if it is a sequence, else for n itself (index 0); the first error. */
int config_each_item(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n, item_fn fn) TERN_WUR;

/** k (named key, a string that outlives the parse) is about to set the field of claim: the first
 * one in a file may, a second is an error naming both lines. */
int config_claim(parse_ctx_t *pc, int claim, const yaml_node_t *k, const char *key) TERN_WUR;

/* ---- a whole table of rows (config.c's top level) ---------------------------------------- */

/** Defaults of rows into c (all zero bytes before), and every block's reset(). */
void config_rows_init(config_t *c, const opt_t *rows, size_t count);

/** Free the string rows' values and every block's settings (reset()). */
void config_rows_free(config_t *c, const opt_t *rows, size_t count);

/** *dst = *src, then every string row and every block dst's own (each block's copy() is called
 * even after one failed, so dst never holds src's pointers). 0 or TERN_ENOMEM; either way dst is
 * config_rows_free()'s to release. dst->file is left as src's: the caller replaces it. */
int config_rows_copy(config_t *dst, const config_t *src, const opt_t *rows, size_t count) TERN_WUR;

/** Read the YAML file path into c against rows (config_load()): the file opened safely, one
 * document; its top-level mapping against rows (unknown and duplicate keys, groups, claims, each
 * row's value, its origin in c->origin by row); then check (NULL: none), then every block's
 * check(). */
int config_rows_read(config_t *c, const char *path, const opt_t *rows, size_t count,
                     int (*check)(parse_ctx_t *pc), char *err, size_t errlen) TERN_WUR;

/** See config_line_of(); rows is the table c was loaded with. */
size_t config_rows_line_of(const config_t *c, const opt_t *rows, size_t count, const char *key);

/** See config_restart_only_changes(). */
size_t config_rows_changes(const config_t *from, const config_t *to, const opt_t *rows,
                           size_t count, char *buf, size_t len);

/** Every row with its bounds and default, the blocks' rows under theirs; the redins rows
 * (opt_t.redins, OPT_LATER) under a heading of their own. */
void config_rows_print(FILE *out, const opt_t *rows, size_t count);

#endif
