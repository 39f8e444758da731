/*
 * view_latency.c — see view_latency.h.
 */
#include "view_latency.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"
#include "tern/redis/redis_conn.h"

/* One GET of the map: a Redis that takes longer than this for one string is in trouble, and the
 * reload waits for it (the loader's stop does not: view_build_env_t.stop). */
#define LATENCY_REDIS_TIMEOUT_MS 5000

void view_latency_put(struct latency_ref *r)
{
    if (r && --r->refs == 0) {
        latency_map_free(r->m);
        free(r->dep.path);
        free(r->key);
        free(r);
    }
}

/* The value of key in the Redis of cfg (malloc'd, NUL-terminated, *len bytes), or NULL with a
 * message in err: Redis unreachable, no such key, not a string, or the owner stopping (*stop
 * with stop_fd written: a stalled Redis does not hold the loader's stop for its timeouts). */
static char *redis_get(const config_t *cfg, const char *key, const atomic_bool *stop, int stop_fd,
                       size_t *len, char *err, size_t errlen)
{
    char where[160], name[200], cerr[256];
    redis_conn_where_of(&cfg->redis, where, sizeof(where));
    snprintf(name, sizeof(name), "latency_map: redis %s", where);
    redis_conn_config_t cc;
    redis_conn_config_of(&cfg->redis, name, LATENCY_REDIS_TIMEOUT_MS, 1, 1, &cc);
    cc.stop = stop;
    cc.wakefd = stop ? stop_fd : -1;
    redis_conn_t *c = redis_conn_new(&cc, cerr, sizeof(cerr));
    redisReply *r = NULL;
    char *out = NULL;
    if (!c) {
        snprintf(err, errlen, "redis: %s", cerr);
        return NULL;
    }
    const char *argv[] = {"GET", key, NULL};
    if (redis_conn_open(c) < 0 || redis_conn_run(c, redis_conn_cmd(c), &r, argv) < 0) {
        snprintf(err, errlen, "redis %s: %s", where, redis_conn_why(c));
    } else if (r->type == REDIS_REPLY_NIL) {
        snprintf(err, errlen, "redis key %s: no such key", key);
    } else if (r->type != REDIS_REPLY_STRING) {
        snprintf(err, errlen, "redis key %s: %s", key,
                 r->type == REDIS_REPLY_ERROR ? r->str : "not a string");
    } else if (!(out = malloc(r->len + 1))) {
        snprintf(err, errlen, "out of memory");
    } else {
        memcpy(out, r->str, r->len);
        out[r->len] = 0;
        *len = r->len;
    }
    if (r)
        freeReplyObject(r);
    redis_conn_free(c);
    return out;
}

/* A new reference for the compiled map, from the file or the key's text. */
static int load(const config_t *cfg, struct latency_ref *prev, const atomic_bool *stop, int stop_fd,
                struct latency_ref **out, char *err, size_t errlen)
{
    const config_latency_map_t *lm = &cfg->latency_map;
    char lerr[512] = "", source[1100];
    char *text = NULL;
    size_t len = 0;
    struct stat st;
    struct latency_ref *r = calloc(1, sizeof(*r));
    latency_map_stats_t ls;
    int64_t t0 = tern_monotonic_ms();
    int rc = TERN_ENOMEM;
    if (!r)
        goto fail;
    if (lm->file) {
        /* stat first: a file replaced in between is seen as changed by the next reload */
        if (stat(lm->file, &st) < 0) {
            rc = -errno;
            snprintf(lerr, sizeof(lerr), "%s: %s", lm->file, strerror(errno));
            goto fail;
        }
        snapshot_dep_set(&r->dep, &st);
        if (!(r->dep.path = strdup(lm->file)))
            goto fail;
        rc = latency_map_load_file(lm->file, &r->m, &ls, lerr, sizeof(lerr));
    } else {
        if (!(text = redis_get(cfg, lm->redis_key, stop, stop_fd, &len, lerr, sizeof(lerr)))) {
            rc = TERN_EIO;
            goto fail;
        }
        r->hash = tern_hash64(text, len, 0);
        if (prev && prev->key && strcmp(prev->key, lm->redis_key) == 0 &&
            prev->hash == r->hash) { /* the same value: the same map, no compile */
            free(text);
            free(r);
            prev->refs++;
            *out = prev;
            return 0;
        }
        if (!(r->key = strdup(lm->redis_key)))
            goto fail;
        snprintf(source, sizeof(source), "redis key %s", lm->redis_key);
        rc = latency_map_compile(text, len, source, &r->m, &ls, lerr, sizeof(lerr));
    }
    if (rc < 0)
        goto fail;
    free(text);
    r->refs = 1;
    *out = r;
    log_info("latency_map %s%s: %zu lines, %zu networks, %zu groups: %zu IPv4 and %zu IPv6 "
             "ranges, %zu bytes, compiled in %lld ms",
             lm->file ? "" : "redis key ", lm->file ? lm->file : lm->redis_key, ls.lines,
             ls.networks, ls.groups, ls.ranges_v4, ls.ranges_v6, ls.bytes,
             (long long)(tern_monotonic_ms() - t0));
    return 0;
fail:
    free(text);
    if (r) {
        latency_map_free(r->m);
        free(r->dep.path);
        free(r->key);
        free(r);
    }
    snprintf(err, errlen, "latency_map: %s", lerr[0] ? lerr : tern_strerror(rc));
    return rc;
}

int view_latency_get(struct latency_ref *prev, const config_t *cfg, bool quick,
                     const atomic_bool *stop, int stop_fd, struct latency_ref **out, char *err,
                     size_t errlen)
{
    const config_latency_map_t *lm = &cfg->latency_map;
    bool same = prev && (lm->file ? prev->dep.path && strcmp(prev->dep.path, lm->file) == 0
                                  : prev->key && strcmp(prev->key, lm->redis_key) == 0);
    if (same && (quick || (lm->file && snapshot_dep_unchanged(&prev->dep)))) {
        prev->refs++;
        *out = prev;
        return 0;
    }
    return load(cfg, prev, stop, stop_fd, out, err, errlen);
}
