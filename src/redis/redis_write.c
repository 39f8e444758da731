/*
 * redis_write.c — see redis_write.h.
 */
#include "tern/redis/redis_write.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/wire/dname.h"

static char *key_of(const config_redis_t *cfg, const char *mid, const char *member,
                    const char *tail)
{
    char *k = NULL;
    if (asprintf(&k, "%sredins:zones%s%s%s%s", cfg->prefix ? cfg->prefix : "", mid, member, tail,
                 cfg->suffix ? cfg->suffix : "") < 0)
        return NULL;
    return k;
}

static int conn_err(redis_conn_t *c, int rc, char *err, size_t errlen)
{
    snprintf(err, errlen, "redis: %s", redis_conn_why(c));
    return rc;
}

int redis_write_member(redis_conn_t *c, const config_redis_t *cfg, const char *origin, char *member,
                       size_t len, char *err, size_t errlen)
{
    char *set = key_of(cfg, "", "", "");
    if (!set)
        return TERN_ENOMEM;
    int rc = TERN_ENOENT;
    for (int dot = 1; dot >= 0 && rc == TERN_ENOENT; dot--) {
        snprintf(member, len, "%s%s", origin, dot && strcmp(origin, ".") != 0 ? "." : "");
        const char *argv[] = {"SISMEMBER", set, member, NULL};
        redisReply *r = NULL;
        int e = redis_conn_run(c, redis_conn_cmd(c), &r, argv);
        if (e < 0) {
            rc = conn_err(c, e, err, errlen);
            break;
        }
        if (r->type == REDIS_REPLY_INTEGER && r->integer == 1)
            rc = 0;
        freeReplyObject(r);
    }
    if (rc == TERN_ENOENT)
        snprintf(err, errlen, "zone %s is not in the set %s", origin, set);
    free(set);
    return rc;
}

/* The keys of a write: the hash, the config, the channel (NULL: none). */
typedef struct wkeys {
    char *hash, *config, *channel;
} wkeys_t;

static void keys_free(wkeys_t *k)
{
    free(k->hash);
    free(k->config);
    free(k->channel);
}

static int keys_make(const config_redis_t *cfg, const char *member, wkeys_t *k)
{
    k->hash = key_of(cfg, ":", member, "");
    k->config = key_of(cfg, ":", member, ":config");
    if (!cfg->changes_channel)
        k->channel = key_of(cfg, ":changed", "", "");
    else if (cfg->changes_channel[0])
        k->channel = strdup(cfg->changes_channel);
    bool channel_ok = k->channel || (cfg->changes_channel && !cfg->changes_channel[0]);
    return k->hash && k->config && channel_ok ? 0 : TERN_ENOMEM;
}

/* WATCH, then the labels' and the config's texts (HMGET, GET) into *labels and *config. */
static int read_watched(redis_conn_t *c, const redis_write_t *w, const wkeys_t *k,
                        redisReply **labels, redisReply **config, char *err, size_t errlen)
{
    redisContext *ctx = redis_conn_cmd(c);
    const char *watch[] = {"WATCH", k->hash, k->config, NULL};
    int rc = redis_conn_run_ok(c, ctx, "WATCH", watch);
    if (rc < 0)
        return conn_err(c, rc, err, errlen);
    size_t argc = 2 + w->nlabels;
    const char **argv = calloc(argc, sizeof(*argv));
    size_t *lens = calloc(argc, sizeof(*lens));
    if (!argv || !lens) {
        free(argv);
        free(lens);
        return TERN_ENOMEM;
    }
    argv[0] = "HMGET";
    argv[1] = k->hash;
    for (size_t i = 0; i < w->nlabels; i++)
        argv[2 + i] = w->labels[i];
    for (size_t i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    const char *get[] = {"GET", k->config, NULL};
    rc = redis_conn_append_argv(c, ctx, (int)argc, argv, lens);
    if (rc == 0)
        rc = redis_conn_append(c, ctx, get);
    if (rc == 0)
        rc = redis_conn_reply(c, ctx, labels);
    if (rc == 0 && (rc = redis_conn_reply(c, ctx, config)) < 0) {
        freeReplyObject(*labels);
        *labels = NULL;
    }
    free(argv);
    free(lens);
    if (rc < 0)
        return conn_err(c, rc, err, errlen);
    if ((*labels)->type != REDIS_REPLY_ARRAY || (*labels)->elements != w->nlabels ||
        ((*config)->type != REDIS_REPLY_STRING && (*config)->type != REDIS_REPLY_NIL)) {
        snprintf(err, errlen, "redis: unexpected replies to HMGET %s / GET %s", k->hash, k->config);
        return TERN_EPROTO;
    }
    return 0;
}

/* The edits' texts: labels' new texts (NULL: delete) and the config's. */
static int edit_all(const redis_write_t *w, const redisReply *labels, const redisReply *config,
                    char **out, char *err, size_t errlen)
{
    for (size_t i = 0; i <= w->nlabels; i++) {
        const redisReply *r = i < w->nlabels ? labels->element[i] : config;
        bool have = r->type == REDIS_REPLY_STRING;
        int rc = w->edit(w->ctx, i, have ? r->str : NULL, have ? r->len : 0, &out[i], err, errlen);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* MULTI, HSET/HDEL per label, SET the config, EXEC: 1 done, 0 aborted by WATCH. */
static int write_multi(redis_conn_t *c, const redis_write_t *w, const wkeys_t *k, char **out,
                       char *err, size_t errlen)
{
    redisContext *ctx = redis_conn_cmd(c);
    const char *multi[] = {"MULTI", NULL}, *exec[] = {"EXEC", NULL};
    int rc = redis_conn_append(c, ctx, multi);
    for (size_t i = 0; rc == 0 && i < w->nlabels; i++) {
        const char *hset[] = {"HSET", k->hash, w->labels[i], out[i], NULL};
        const char *hdel[] = {"HDEL", k->hash, w->labels[i], NULL};
        rc = redis_conn_append(c, ctx, out[i] ? hset : hdel);
    }
    const char *set[] = {"SET", k->config, out[w->nlabels], NULL};
    if (rc == 0 && out[w->nlabels])
        rc = redis_conn_append(c, ctx, set);
    if (rc == 0)
        rc = redis_conn_append(c, ctx, exec);
    size_t replies = 2 + w->nlabels + (out[w->nlabels] ? 1 : 0);
    int done = -1;
    for (size_t i = 0; rc == 0 && i < replies; i++) {
        redisReply *r = NULL;
        if ((rc = redis_conn_reply(c, ctx, &r)) < 0)
            break;
        if (i + 1 == replies && r->type != REDIS_REPLY_ERROR)
            done = r->type == REDIS_REPLY_ARRAY ? 1 : 0; /* nil: WATCH aborted it */
        else if (r->type == REDIS_REPLY_ERROR && done != -2) {
            snprintf(err, errlen, "redis: %s", r->str);
            done = -2;
        }
        freeReplyObject(r);
    }
    if (rc < 0)
        return conn_err(c, rc, err, errlen);
    return done == -2 ? TERN_EPROTO : done;
}

/* PUBLISH text on channel (NULL: none configured). */
static int publish_text(redis_conn_t *c, const char *channel, const char *text, char *err,
                        size_t errlen)
{
    if (!channel)
        return 0;
    const char *argv[] = {"PUBLISH", channel, text, NULL};
    int rc = redis_conn_run_ok(c, redis_conn_cmd(c), "PUBLISH", argv);
    return rc < 0 ? conn_err(c, rc, err, errlen) : 0;
}

/* PUBLISH "<member> <label> ..." on the change channel. */
static int publish(redis_conn_t *c, const redis_write_t *w, const wkeys_t *k, char *err,
                   size_t errlen)
{
    if (!k->channel)
        return 0;
    size_t n = strlen(w->member) + 1;
    for (size_t i = 0; i < w->nlabels; i++)
        n += strlen(w->labels[i]) + 1;
    char *msg = malloc(n);
    if (!msg)
        return TERN_ENOMEM;
    size_t o = (size_t)snprintf(msg, n, "%s", w->member);
    for (size_t i = 0; i < w->nlabels; i++)
        o += (size_t)snprintf(msg + o, n - o, " %s", w->labels[i]);
    int rc = publish_text(c, k->channel, msg, err, errlen);
    free(msg);
    return rc;
}

/* UNWATCH, when the connection is still open: a refused or failed change leaves no key
 * WATCHed to abort the connection's next transaction. */
static void unwatch(redis_conn_t *c)
{
    if (!redis_conn_is_open(c))
        return;
    const char *argv[] = {"UNWATCH", NULL};
    redisReply *r = NULL;
    if (redis_conn_run(c, redis_conn_cmd(c), &r, argv) == 0)
        freeReplyObject(r);
}

int redis_write_zone(redis_conn_t *c, const redis_write_t *w, char *err, size_t errlen)
{
    wkeys_t k = {0};
    char **out = calloc(w->nlabels + 1, sizeof(*out));
    int rc = out ? keys_make(w->cfg, w->member, &k) : TERN_ENOMEM;
    for (int attempt = 0; rc == 0 && attempt < REDIS_WRITE_ATTEMPTS; attempt++) {
        redisReply *labels = NULL, *config = NULL;
        if ((rc = read_watched(c, w, &k, &labels, &config, err, errlen)) == 0)
            rc = edit_all(w, labels, config, out, err, errlen);
        freeReplyObject(labels);
        freeReplyObject(config);
        if (rc == 0)
            rc = write_multi(c, w, &k, out, err, errlen);
        for (size_t i = 0; i <= w->nlabels; i++) {
            free(out[i]);
            out[i] = NULL;
        }
        if (rc == 1) { /* written */
            rc = publish(c, w, &k, err, errlen);
            goto done;
        }
        if (rc < 0)
            break;
        rc = 0; /* aborted: read again */
    }
    if (rc == 0) {
        snprintf(err, errlen, "redis: other writers changed zone %s %d times in a row", w->member,
                 REDIS_WRITE_ATTEMPTS);
        rc = TERN_EAGAIN;
    }
    if (rc < 0) /* nothing stays WATCHed for the next change */
        unwatch(c);
done:
    free(out);
    keys_free(&k);
    if (rc == TERN_ENOMEM)
        snprintf(err, errlen, "out of memory");
    return rc;
}

/* ---- whole zones -------------------------------------------------------------------------- */

/* The replies of count queued commands: the last one's into *last (NULL: freed), an error reply
 * before it TERN_EPROTO with err. */
static int replies(redis_conn_t *c, size_t count, redisReply **last, char *err, size_t errlen)
{
    redisContext *ctx = redis_conn_cmd(c);
    int rc = 0;
    for (size_t i = 0; i < count; i++) {
        redisReply *r = NULL;
        int e = redis_conn_reply(c, ctx, &r);
        if (e < 0)
            return conn_err(c, e, err, errlen);
        if (r->type == REDIS_REPLY_ERROR && rc == 0) {
            snprintf(err, errlen, "redis: %s", r->str);
            rc = TERN_EPROTO;
        }
        if (i + 1 == count && last)
            *last = r;
        else
            freeReplyObject(r);
    }
    return rc;
}

/* WATCH the set, then whether it holds member or member without its final dot: 1, 0, or <0. */
static int watched_member(redis_conn_t *c, const char *set, const char *member, char *err,
                          size_t errlen)
{
    redisContext *ctx = redis_conn_cmd(c);
    const char *watch[] = {"WATCH", set, NULL};
    int rc = redis_conn_run_ok(c, ctx, "WATCH", watch);
    if (rc < 0)
        return conn_err(c, rc, err, errlen);
    char bare[DNAME_KEY_MAX + 2];
    snprintf(bare, sizeof(bare), "%s", member);
    size_t bl = strlen(bare);
    if (bl > 1 && bare[bl - 1] == '.')
        bare[bl - 1] = '\0';
    const char *names[] = {member, bare};
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {"SISMEMBER", set, names[i], NULL};
        redisReply *r = NULL;
        if ((rc = redis_conn_run(c, ctx, &r, argv)) < 0)
            return conn_err(c, rc, err, errlen);
        bool is = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        freeReplyObject(r);
        if (is)
            return 1;
    }
    return 0;
}

/* MULTI; DEL hash, config; HSET the labels; SET config; SADD; EXEC: 1 done, 0 aborted. */
static int create_multi(redis_conn_t *c, const char *set, const wkeys_t *k, const char *member,
                        const char *config, const char *const *labels, const char *const *texts,
                        size_t n, char *err, size_t errlen)
{
    redisContext *ctx = redis_conn_cmd(c);
    const char *multi[] = {"MULTI", NULL}, *exec[] = {"EXEC", NULL};
    const char *del[] = {"DEL", k->hash, k->config, NULL};
    const char *cset[] = {"SET", k->config, config, NULL};
    const char *sadd[] = {"SADD", set, member, NULL};
    size_t argc = 2 + 2 * n;
    const char **argv = calloc(argc, sizeof(*argv));
    size_t *lens = calloc(argc, sizeof(*lens));
    int rc = argv && lens ? redis_conn_append(c, ctx, multi) : TERN_ENOMEM;
    if (rc == 0)
        rc = redis_conn_append(c, ctx, del);
    if (rc == 0 && n) {
        argv[0] = "HSET";
        argv[1] = k->hash;
        for (size_t i = 0; i < n; i++) {
            argv[2 + 2 * i] = labels[i];
            argv[3 + 2 * i] = texts[i];
        }
        for (size_t i = 0; i < argc; i++)
            lens[i] = strlen(argv[i]);
        rc = redis_conn_append_argv(c, ctx, (int)argc, argv, lens);
    }
    if (rc == 0)
        rc = redis_conn_append(c, ctx, cset);
    if (rc == 0)
        rc = redis_conn_append(c, ctx, sadd);
    if (rc == 0)
        rc = redis_conn_append(c, ctx, exec);
    free(argv);
    free(lens);
    if (rc == TERN_ENOMEM)
        return rc;
    if (rc < 0)
        return conn_err(c, rc, err, errlen);
    redisReply *r = NULL;
    rc = replies(c, 5 + (n ? 1 : 0), &r, err, errlen);
    int done = rc < 0 ? rc : r && r->type == REDIS_REPLY_ARRAY ? 1 : 0; /* nil: aborted */
    freeReplyObject(r);
    return done;
}

int redis_write_create_zone(redis_conn_t *c, const config_redis_t *cfg, const char *member,
                            const char *config, const char *const *labels, const char *const *texts,
                            size_t n, char *err, size_t errlen)
{
    wkeys_t k = {0};
    char *set = key_of(cfg, "", "", "");
    int rc = set ? keys_make(cfg, member, &k) : TERN_ENOMEM;
    for (int attempt = 0; rc == 0 && attempt < REDIS_WRITE_ATTEMPTS; attempt++) {
        int is = watched_member(c, set, member, err, errlen);
        if (is == 1) {
            snprintf(err, errlen, "zone %s is already in the set %s", member, set);
            rc = TERN_EEXIST;
        } else if (is < 0) {
            rc = is;
        } else if ((rc = create_multi(c, set, &k, member, config, labels, texts, n, err, errlen)) ==
                   1) {
            rc = publish_text(c, k.channel, member, err, errlen);
            goto done;
        }
    }
    if (rc == 0) {
        snprintf(err, errlen, "redis: other writers changed the set %s %d times in a row", set,
                 REDIS_WRITE_ATTEMPTS);
        rc = TERN_EAGAIN;
    }
    unwatch(c); /* nothing stays WATCHed (the zone existed, errors) */
done:
    free(set);
    keys_free(&k);
    if (rc == TERN_ENOMEM)
        snprintf(err, errlen, "out of memory");
    return rc;
}

int redis_write_delete_zone(redis_conn_t *c, const config_redis_t *cfg, const char *origin,
                            char *err, size_t errlen)
{
    char member[DNAME_KEY_MAX + 2];
    int rc = redis_write_member(c, cfg, origin, member, sizeof(member), err, errlen);
    if (rc < 0)
        return rc;
    wkeys_t k = {0};
    char *set = key_of(cfg, "", "", "");
    /* redins' DNSSEC keys of the zone go with it: "P redins:zones:<zone>:{zsk,ksk}:{pub,priv} S" */
    char *dk[4] = {key_of(cfg, ":", member, ":zsk:pub"), key_of(cfg, ":", member, ":zsk:priv"),
                   key_of(cfg, ":", member, ":ksk:pub"), key_of(cfg, ":", member, ":ksk:priv")};
    rc = set && dk[0] && dk[1] && dk[2] && dk[3] ? keys_make(cfg, member, &k) : TERN_ENOMEM;
    redisContext *ctx = redis_conn_cmd(c);
    const char *multi[] = {"MULTI", NULL}, *exec[] = {"EXEC", NULL};
    const char *srem[] = {"SREM", set, member, NULL};
    const char *del[] = {"DEL", k.hash, k.config, dk[0], dk[1], dk[2], dk[3], NULL};
    const char *const *cmds[] = {multi, srem, del, exec};
    for (size_t i = 0; rc == 0 && i < 4; i++)
        if ((rc = redis_conn_append(c, ctx, cmds[i])) < 0)
            rc = conn_err(c, rc, err, errlen);
    if (rc == 0)
        rc = replies(c, 4, NULL, err, errlen);
    if (rc == 0)
        rc = publish_text(c, k.channel, member, err, errlen);
    free(set);
    for (int i = 0; i < 4; i++)
        free(dk[i]);
    keys_free(&k);
    if (rc == TERN_ENOMEM)
        snprintf(err, errlen, "out of memory");
    return rc;
}

int redis_write_label_get(redis_conn_t *c, const config_redis_t *cfg, const char *member,
                          const char *label, char **out, char *err, size_t errlen)
{
    *out = NULL;
    char *hash = key_of(cfg, ":", member, "");
    if (!hash) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    const char *argv[] = {"HGET", hash, label, NULL};
    redisReply *r = NULL;
    int rc = redis_conn_run(c, redis_conn_cmd(c), &r, argv);
    free(hash);
    if (rc < 0)
        return conn_err(c, rc, err, errlen);
    if (r->type == REDIS_REPLY_STRING)
        rc = (*out = strndup(r->str, r->len)) ? 0 : TERN_ENOMEM;
    else if (r->type == REDIS_REPLY_ERROR)
        rc = (snprintf(err, errlen, "redis: %s", r->str), TERN_EPROTO);
    else
        rc = (snprintf(err, errlen, "no label %s in zone %s", label, member), TERN_ENOENT);
    freeReplyObject(r);
    return rc;
}
