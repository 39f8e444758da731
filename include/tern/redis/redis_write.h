/*
 * redis_write.h — a change of a redins zone written into Redis as redins' writers write it, so
 * that every node of a fleet reading the same Redis (tern's Redis source, redins itself) serves
 * it: the labels' JSON in the zone's hash (HSET, HDEL), the zone config (SET), in one MULTI/EXEC
 * guarded by WATCH, then the labels named on the change channel (PUBLISH), which tern's Redis
 * source patches into the version served.
 *
 * Keys (P, S: the configured prefix and suffix, as the reader's): the set "P redins:zones S",
 * the zone's hash "P redins:zones:<member> S" (fields: labels, "@" the apex), its config
 * "P redins:zones:<member>:config S"; <member> is the zone as the set names it.
 *
 * Threading: the caller's connection (redis_conn.h: one thread per connection). Every wait is
 * the connection's (read_timeout); nothing here retries a connection.
 */
#ifndef TERN_REDIS_REDIS_WRITE_H
#define TERN_REDIS_REDIS_WRITE_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/common/compiler.h"
#include "tern/redis/redis_conn.h"
#include "tern/redis/redis_settings.h"

/* The attempts of one change when another writer changes the zone between the read and the
 * write (EXEC aborted by WATCH): each reads again and edits what is there then. */
#define REDIS_WRITE_ATTEMPTS 3

/** What a change does with label i's JSON in Redis (i == nlabels: the zone config), given as it
 * is there (json NULL: absent): 0 with *out the new text (malloc'd; NULL: delete the label), or a
 * negative code with err (the change is not written). */
typedef int (*redis_edit_fn)(void *ctx, size_t i, const char *json, size_t len, char **out,
                             char *err, size_t errlen);

typedef struct redis_write {
    const config_redis_t *cfg; /* prefix, suffix, changes_channel */
    const char *member;        /* the zone as the set names it ("example.com.") */
    const char *const *labels; /* the labels changed ("www", "@") */
    size_t nlabels;
    redis_edit_fn edit;
    void *ctx;
} redis_write_t;

/**
 * The set's name for zone origin (canonical, no final dot): "origin." or "origin", whichever the
 * set holds (redins writes the first), into member (len bytes). 0; TERN_ENOENT (neither is a
 * member); REDIS_CONN_DOWN or REDIS_CONN_STOP (err: why).
 */
int redis_write_member(redis_conn_t *c, const config_redis_t *cfg, const char *origin, char *member,
                       size_t len, char *err, size_t errlen) TERN_WUR;

/**
 * Write one change (w): WATCH the zone's hash and config, read the labels and the config, let
 * w->edit make each one's new text, then MULTI, HSET/HDEL per label, SET the config, EXEC —
 * again from the WATCH when another writer got in between, at most REDIS_WRITE_ATTEMPTS times —
 * and PUBLISH "<member> <label> ..." on the change channel. 0; TERN_EAGAIN (err: other writers
 * kept changing the zone); the edit's code; REDIS_CONN_DOWN or REDIS_CONN_STOP (err: why).
 */
int redis_write_zone(redis_conn_t *c, const redis_write_t *w, char *err, size_t errlen) TERN_WUR;

/*
 * Whole zones, as redins' writers create and remove them: the set's member, the config and the
 * hash of labels change together in one MULTI/EXEC, then "<member>" alone is published on the
 * change channel (a reader re-reads the set and that zone).
 */

/**
 * Create zone member ("example.com.") with its config text and the n labels' texts: WATCH the
 * set; TERN_EEXIST (err names it) when the set holds member with or without its final dot;
 * else MULTI, DEL of a hash or config left over without a member, HSET of the labels, SET the
 * config, SADD the member, EXEC (again from the WATCH, at most REDIS_WRITE_ATTEMPTS times, when
 * another writer changed the set), and PUBLISH "<member>". 0; TERN_EEXIST; TERN_EAGAIN;
 * TERN_EPROTO (Redis refused a command: err); REDIS_CONN_DOWN or REDIS_CONN_STOP (err: why).
 */
int redis_write_create_zone(redis_conn_t *c, const config_redis_t *cfg, const char *member,
                            const char *config, const char *const *labels, const char *const *texts,
                            size_t n, char *err, size_t errlen) TERN_WUR;

/**
 * Delete zone origin (canonical, no final dot) as the set names it (redis_write_member()):
 * MULTI, SREM, DEL the hash, the config and redins' DNSSEC keys of the zone
 * (":zsk:pub", ":zsk:priv", ":ksk:pub", ":ksk:priv"), EXEC, PUBLISH "<member>". 0; TERN_ENOENT (not
 * in the set); TERN_EPROTO; REDIS_CONN_DOWN or REDIS_CONN_STOP (err: why).
 */
int redis_write_delete_zone(redis_conn_t *c, const config_redis_t *cfg, const char *origin,
                            char *err, size_t errlen) TERN_WUR;

/**
 * Label label's JSON text in zone member's hash (HGET), into *out (malloc'd, NUL-terminated).
 * 0; TERN_ENOENT (no such field); TERN_ENOMEM; REDIS_CONN_DOWN or REDIS_CONN_STOP (err: why).
 */
int redis_write_label_get(redis_conn_t *c, const config_redis_t *cfg, const char *member,
                          const char *label, char **out, char *err, size_t errlen) TERN_WUR;

#endif
