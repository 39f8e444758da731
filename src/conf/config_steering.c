/*
 * config_steering.c — "steering:", the server-wide settings of issue 33's steering rules that an
 * RRset may override in its own "filter": for now the client network the sticky order hashes
 * (select.h). Its rows, reset and parse; config_steering_t owns no pointer, so the shallow copy
 * config_copy() makes is the copy.
 *
 * Lifecycle and threading: as config_parse.h; read-only once loaded. A reload applies it (the
 * view carries it to the workers, src/load/view_build.c).
 */
#include "config_blocks.h"

#define SFIELD(f)                                                                                  \
    .offset = offsetof(config_steering_t, f), .size = sizeof(((config_steering_t *)0)->f)

enum { ST_STICKY_V4, ST_STICKY_V6, ST_COUNT };

/* RFC 7871 §11.1's recommended ECS source prefixes, /24 and /56, are the defaults: what resolvers
 * send, so the network hashed is the one the resolver's cache keys by. 0 would make every client
 * one network (a fixed answer), which an operator gets with order none instead. */
static const opt_t steering_rows[ST_COUNT] = {
    [ST_STICKY_V4] = {.key = "sticky_prefix_v4",
                      .type = OPT_UINT,
                      SFIELD(sticky_prefix_v4),
                      .def = 24,
                      .min = 1,
                      .max = 32,
                      .desc = "bits of an IPv4 client's address the sticky order hashes (an "
                              "RRset's filter.sticky_prefix.v4 overrides it)"},
    [ST_STICKY_V6] = {.key = "sticky_prefix_v6",
                      .type = OPT_UINT,
                      SFIELD(sticky_prefix_v6),
                      .def = 56,
                      .min = 1,
                      .max = 128,
                      .desc = "bits of an IPv6 client's address the sticky order hashes (an "
                              "RRset's filter.sticky_prefix.v6 overrides it)"},
};

static void steering_reset(config_t *c)
{
    config_set_defaults(&c->steering, steering_rows, ST_COUNT);
}

static int steering_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *key_node,
                          const yaml_node_t *n)
{
    (void)key_node;
    steering_reset(pc->c);
    if (is_null(n))
        return 0;
    field_t fields[ST_COUNT];
    const yaml_node_t *val[ST_COUNT];
    config_row_fields(fields, steering_rows, ST_COUNT);
    int rc = config_get_fields(pc, n, o->key, fields, ST_COUNT, val);
    for (size_t i = 0; rc == 0 && i < ST_COUNT; i++)
        if (val[i])
            rc = config_get_row(pc, val[i], o->key, &steering_rows[i], &pc->c->steering);
    return rc;
}

const conf_block_t config_steering_block = {
    .rows = steering_rows, .nrows = ST_COUNT, .parse = steering_parse, .reset = steering_reset};
