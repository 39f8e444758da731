/*
 * redis_conn.c — see redis_conn.h. Non-blocking hiredis contexts waited on with poll(2) beside
 * the owner's wakeup fd, so no wait outlives its deadline or a stop request.
 */
#include "tern/redis/redis_conn.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/log.h"

#include "redis_sentinel.h"

/* With Sentinel, while connected, the sentinels are asked this often whether the node used is
 * still the one to use (one SENTINEL command; two for read_replica): a failover that does not
 * break the connection (the old primary still up, demoted) is followed within this. */
#define SENTINEL_CHECK_MS 2000

struct redis_conn {
    /* configuration (owned copies) */
    char *where, *host, *unix_path, *password;
    uint16_t port;
    unsigned db;
    int64_t connect_timeout, read_timeout; /* ms */
    redis_node_t *sentinels;
    size_t nsentinels;
    char *master, *sentinel_password;
    bool read_replica, subscriber;
    int64_t backoff_min, backoff_max;
    int wakefd;
    const atomic_bool *stop;
    void (*on_sub)(void *ctx, const redisReply *r);
    void *ctx;
    unsigned replica_start; /* per-process random start among the usable replicas */

    /* state (the owner's thread) */
    redisContext *cmd, *sub;
    redisContext *sen;    /* the connection to the sentinel that answered last */
    redis_node_t node;    /* Sentinel: the node connected to (or last chosen) */
    bool node_set;        /* node holds a node */
    bool node_replica;    /* node is a replica (read_replica and one was usable) */
    bool no_replica_said; /* "no usable replica" was logged (until one is usable again) */
    char sen_down[256];   /* the last sentinel failure logged while connected, "" if none */
    int64_t next_check;
    int64_t backoff, retry_at;
    int64_t cmd_last, sub_last; /* last reply on each, for the owner's idle PINGs */
    char why[256];              /* why the last exchange failed */
};

static int64_t now_ms(void)
{
    return tern_monotonic_ms();
}

static bool stopping(const redis_conn_t *c)
{
    return c->stop && atomic_load_explicit(c->stop, memory_order_acquire);
}

int redis_conn_fail(redis_conn_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof(c->why), fmt, ap);
    va_end(ap);
    return REDIS_CONN_DOWN;
}

const char *redis_conn_why(const redis_conn_t *c)
{
    return c->why;
}

/* The owner's wakeup fired: drained (its flags, not the counter, carry the news). */
static void drain_wake(const redis_conn_t *c)
{
    uint64_t v;
    ssize_t n = read(c->wakefd, &v, sizeof(v));
    (void)n; /* EAGAIN: already drained */
}

/* poll() over fds, the wakeup first when there is one (p[0]); REDIS_CONN_STOP once stop is set,
 * 1 when something is ready, 0 on timeout or EINTR. p[0] is {-1} without a wakeup fd (poll()
 * skips a negative fd). */
static int wait_fds(redis_conn_t *c, struct pollfd *p, nfds_t n, int64_t left)
{
    p[0] = (struct pollfd){.fd = c->wakefd, .events = POLLIN};
    int k = poll(p, n, left > 60000 ? 60000 : (int)left);
    if (k < 0)
        return errno == EINTR ? 0 : redis_conn_fail(c, "poll: %s", strerror(errno));
    if (k > 0 && p[0].revents) {
        drain_wake(c);
        if (stopping(c))
            return REDIS_CONN_STOP;
    }
    return k > 0;
}

int redis_conn_sub_drain(redis_conn_t *c)
{
    if (redisBufferRead(c->sub) != REDIS_OK)
        return redis_conn_fail(c, "subscriber connection: %s", c->sub->errstr);
    for (;;) {
        void *r = NULL;
        if (redisGetReplyFromReader(c->sub, &r) != REDIS_OK)
            return redis_conn_fail(c, "subscriber connection: %s", c->sub->errstr);
        if (!r)
            break;
        if (c->on_sub)
            c->on_sub(c->ctx, r);
        freeReplyObject(r);
    }
    c->sub_last = now_ms();
    return 0;
}

static const char *ctx_name(const redis_conn_t *c, const redisContext *ctx)
{
    return ctx == c->sub   ? "subscriber connection"
           : ctx == c->sen ? "sentinel connection"
                           : "connection";
}

int redis_conn_reply(redis_conn_t *c, redisContext *ctx, redisReply **out)
{
    const char *what = ctx_name(c, ctx);
    int64_t deadline = now_ms() + c->read_timeout;
    *out = NULL;
    for (;;) {
        void *r = NULL;
        if (redisGetReplyFromReader(ctx, &r) != REDIS_OK)
            return redis_conn_fail(c, "%s: %s", what, ctx->errstr);
        if (r) {
            *out = r;
            if (ctx == c->cmd)
                c->cmd_last = now_ms();
            return 0;
        }
        int done = 1;
        if (sdslen(ctx->obuf) > 0 && redisBufferWrite(ctx, &done) != REDIS_OK)
            return redis_conn_fail(c, "%s: %s", what, ctx->errstr);
        struct pollfd p[3] = {
            [1] = {.fd = ctx->fd, .events = (short)(POLLIN | (done ? 0 : POLLOUT))},
        };
        nfds_t n = 2;
        if (c->sub && ctx != c->sub)
            p[n++] = (struct pollfd){.fd = c->sub->fd, .events = POLLIN};
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return redis_conn_fail(c, "%s: no reply within %lld ms (read_timeout)", what,
                                   (long long)c->read_timeout);
        int k = wait_fds(c, p, n, left);
        if (k <= 0) {
            if (k < 0)
                return k;
            continue;
        }
        if (n == 3 && p[2].revents) {
            int rc = redis_conn_sub_drain(c);
            if (rc < 0)
                return rc;
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (redisBufferRead(ctx) != REDIS_OK)
                return redis_conn_fail(c, "%s: %s", what, ctx->errstr);
            deadline = now_ms() + c->read_timeout;
        }
    }
}

int redis_conn_append(redis_conn_t *c, redisContext *ctx, const char *const *argv)
{
    int argc = 0;
    size_t len[8];
    while (argv[argc]) {
        len[argc] = strlen(argv[argc]);
        argc++;
    }
    return redis_conn_append_argv(c, ctx, argc, (const char **)argv, len);
}

int redis_conn_append_argv(redis_conn_t *c, redisContext *ctx, int argc, const char **argv,
                           const size_t *lens)
{
    if (redisAppendCommandArgv(ctx, argc, argv, lens) != REDIS_OK)
        return redis_conn_fail(c, "cannot queue a command: %s", ctx->errstr);
    return 0;
}

int redis_conn_run(redis_conn_t *c, redisContext *ctx, redisReply **out, const char *const *argv)
{
    int rc = redis_conn_append(c, ctx, argv);
    return rc < 0 ? rc : redis_conn_reply(c, ctx, out);
}

int redis_conn_run_ok(redis_conn_t *c, redisContext *ctx, const char *what, const char *const *argv)
{
    redisReply *r;
    int rc = redis_conn_run(c, ctx, &r, argv);
    if (rc < 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR) {
        redis_conn_fail(c, "%s: %s", what, r->str);
        rc = REDIS_CONN_DOWN;
    }
    freeReplyObject(r);
    return rc;
}

static void data_close(redis_conn_t *c)
{
    if (c->cmd)
        redisFree(c->cmd);
    if (c->sub)
        redisFree(c->sub);
    c->cmd = c->sub = NULL;
}

static void sen_close(redis_conn_t *c)
{
    if (c->sen)
        redisFree(c->sen);
    c->sen = NULL;
}

/* Wait (within connect_timeout) until the non-blocking connect of ctx is done. */
static int connect_wait(redis_conn_t *c, redisContext *ctx)
{
    int64_t deadline = now_ms() + c->connect_timeout;
    for (;;) {
        struct pollfd p[2] = {[1] = {.fd = ctx->fd, .events = POLLOUT}};
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return redis_conn_fail(c, "connect: no answer within %lld ms (connect_timeout)",
                                   (long long)c->connect_timeout);
        int k = wait_fds(c, p, 2, left);
        if (k < 0)
            return k;
        if (k > 0 && p[1].revents)
            break;
    }
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    if (getsockopt(ctx->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
        soerr = errno;
    if (soerr)
        return redis_conn_fail(c, "connect: %s", strerror(soerr));
    return 0;
}

/* Open one connection within connect_timeout, to unix_path if set, else to host:port. */
static int ctx_open(redis_conn_t *c, const char *host, uint16_t port, const char *unix_path,
                    redisContext **out)
{
    redisContext *ctx =
        unix_path ? redisConnectUnixNonBlock(unix_path) : redisConnectNonBlock(host, port);
    *out = NULL;
    if (!ctx)
        return redis_conn_fail(c, "out of memory");
    int rc = ctx->err ? redis_conn_fail(c, "%s", ctx->errstr) : connect_wait(c, ctx);
    if (rc < 0) {
        redisFree(ctx);
        return rc;
    }
    if (!unix_path)
        (void)redisEnableKeepAlive(ctx);
    *out = ctx;
    return 0;
}

/* Greet a fresh data connection: AUTH, SELECT (command connection only), PING. */
static int greet(redis_conn_t *c, redisContext *ctx, bool select_db)
{
    int rc;
    if (c->password) {
        const char *auth[] = {"AUTH", c->password, NULL};
        if ((rc = redis_conn_run_ok(c, ctx, "AUTH", auth)) < 0)
            return rc;
    }
    if (select_db && c->db) {
        char db[16];
        snprintf(db, sizeof(db), "%u", c->db);
        const char *sel[] = {"SELECT", db, NULL};
        if ((rc = redis_conn_run_ok(c, ctx, "SELECT", sel)) < 0)
            return rc;
    }
    /* an error here (LOADING after a restart, NOAUTH) means "not ready yet": retry later */
    const char *ping[] = {"PING", NULL};
    return redis_conn_run_ok(c, ctx, "PING", ping);
}

/* --- Sentinel --- */

/* Connect to sentinel i and AUTH with sentinel_password. */
static int sen_open(redis_conn_t *c, size_t i)
{
    const redis_node_t *s = &c->sentinels[i];
    int rc = ctx_open(c, s->host, s->port, NULL, &c->sen);
    if (rc < 0 || !c->sentinel_password)
        return rc;
    const char *auth[] = {"AUTH", c->sentinel_password, NULL};
    if ((rc = redis_conn_run_ok(c, c->sen, "sentinel AUTH", auth)) < 0)
        sen_close(c);
    return rc;
}

/* Run one command on a sentinel: the one that answered last, else each in the configured order.
 * The reply may be an error reply (the caller decides); REDIS_CONN_DOWN when no sentinel
 * answered, why naming the last failure. */
static int sen_run(redis_conn_t *c, redisReply **out, const char *const *argv)
{
    int rc = REDIS_CONN_DOWN;
    for (size_t i = 0; i <= c->nsentinels; i++) {
        if (!c->sen) {
            if (i == c->nsentinels)
                break;
            if ((rc = sen_open(c, i)) < 0) {
                if (rc == REDIS_CONN_STOP)
                    return rc;
                continue;
            }
        }
        if ((rc = redis_conn_run(c, c->sen, out, argv)) == 0)
            return 0;
        sen_close(c);
        if (rc == REDIS_CONN_STOP)
            return rc;
    }
    char why[sizeof(c->why)];
    snprintf(why, sizeof(why), "%s", c->why);
    return redis_conn_fail(c, "no sentinel answered (last: %s)", why);
}

/* For read_replica: a usable replica into *out (the current one while it stays usable); the
 * primary (out untouched, logged once) when none is. */
static int discover_replica(redis_conn_t *c, redis_node_t *out, bool *replica)
{
    const char *list[] = {"SENTINEL", "replicas", c->master, NULL};
    redisReply *r;
    int rc = sen_run(c, &r, list);
    if (rc < 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR) { /* Redis before 5: "slaves" */
        freeReplyObject(r);
        const char *old[] = {"SENTINEL", "slaves", c->master, NULL};
        if ((rc = sen_run(c, &r, old)) < 0)
            return rc;
    }
    redis_node_t pick;
    size_t n = redis_sentinel_pick_replica(r, c->node_set && c->node_replica ? &c->node : NULL,
                                           c->replica_start, &pick);
    freeReplyObject(r);
    char buf[REDIS_NODE_TEXT_MAX];
    if (n == 0) {
        if (!c->no_replica_said)
            log_warn("%s: Sentinel names no usable replica of %s; reading from the primary %s "
                     "until one is",
                     c->where, c->master, redis_node_text(out, buf, sizeof(buf)));
        c->no_replica_said = true;
        return 0;
    }
    c->no_replica_said = false;
    *out = pick;
    *replica = true;
    return 0;
}

/* Ask the sentinels for the node to use: the primary of master, or for read_replica a usable
 * replica, else the primary. */
static int discover(redis_conn_t *c, redis_node_t *out, bool *replica)
{
    const char *get[] = {"SENTINEL", "get-master-addr-by-name", c->master, NULL};
    redisReply *r;
    int rc = sen_run(c, &r, get);
    if (rc < 0)
        return rc;
    bool ok = redis_sentinel_master(r, out);
    freeReplyObject(r);
    if (!ok) {
        sen_close(c); /* this sentinel does not know master: ask the next one next time */
        return redis_conn_fail(c, "Sentinel does not know a primary named \"%s\"", c->master);
    }
    *replica = false;
    return c->read_replica ? discover_replica(c, out, replica) : 0;
}

/* A primary must say so (a sentinel that has not seen a failover yet may name the demoted one):
 * ROLE's first element is "master". A Redis without ROLE (before 2.8.12) is taken at its word. */
static int check_role(redis_conn_t *c)
{
    const char *role[] = {"ROLE", NULL};
    redisReply *r;
    int rc = redis_conn_run(c, c->cmd, &r, role);
    if (rc < 0)
        return rc;
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        (r->element[0]->type == REDIS_REPLY_STRING || r->element[0]->type == REDIS_REPLY_STATUS) &&
        strcmp(r->element[0]->str, "master") != 0) {
        char buf[REDIS_NODE_TEXT_MAX];
        redis_conn_fail(c, "%s is a %s, not the primary Sentinel named (a failover in progress?)",
                        redis_node_text(&c->node, buf, sizeof(buf)), r->element[0]->str);
        rc = REDIS_CONN_DOWN;
    }
    freeReplyObject(r);
    return rc;
}

int redis_conn_sentinel_check(redis_conn_t *c)
{
    if (!c->nsentinels)
        return 0;
    redis_node_t n;
    bool replica;
    c->next_check = now_ms() + SENTINEL_CHECK_MS;
    int rc = discover(c, &n, &replica);
    if (rc == REDIS_CONN_STOP)
        return rc;
    if (rc < 0) {
        if (strcmp(c->sen_down, c->why) != 0)
            log_warn("%s: cannot ask Sentinel (%s); staying on the node read", c->where, c->why);
        snprintf(c->sen_down, sizeof(c->sen_down), "%s", c->why);
        return 0;
    }
    if (c->sen_down[0])
        log_info("%s: Sentinel answers again", c->where);
    c->sen_down[0] = '\0';
    if (redis_node_same(&n, &c->node) && replica == c->node_replica)
        return 0;
    char why[3 * REDIS_NODE_TEXT_MAX + 64];
    return redis_conn_fail(
        c, "%s, moving",
        redis_sentinel_move_text(why, sizeof(why), &n, replica, &c->node, c->node_replica));
}

/* --- connect --- */

int redis_conn_open(redis_conn_t *c)
{
    /* a write to a socket Redis closed must fail with EPIPE, not kill the process: blocked on
     * every thread that talks to Redis, before its first write */
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    int rc;
    const char *host = c->host;
    uint16_t port = c->port;
    c->why[0] = '\0';
    data_close(c);
    if (c->nsentinels) {
        bool replica = false;
        if ((rc = discover(c, &c->node, &replica)) < 0)
            return rc;
        c->node_set = true;
        c->node_replica = replica;
        host = c->node.host;
        port = c->node.port;
        c->next_check = now_ms() + SENTINEL_CHECK_MS;
    }
    if ((rc = ctx_open(c, host, port, c->unix_path, &c->cmd)) < 0 ||
        (rc = greet(c, c->cmd, true)) < 0 ||
        (c->nsentinels && !c->node_replica && (rc = check_role(c)) < 0) ||
        (c->subscriber && ((rc = ctx_open(c, host, port, c->unix_path, &c->sub)) < 0 ||
                           (rc = greet(c, c->sub, false)) < 0))) {
        data_close(c);
        return rc;
    }
    c->cmd_last = c->sub_last = now_ms();
    return 0;
}

bool redis_conn_is_open(const redis_conn_t *c)
{
    return c->cmd != NULL;
}

void redis_conn_lost(redis_conn_t *c)
{
    data_close(c);
    c->backoff = c->backoff_min;
    c->retry_at = now_ms() + c->backoff;
}

void redis_conn_failed(redis_conn_t *c)
{
    data_close(c);
    c->retry_at = now_ms() + c->backoff;
    c->backoff = c->backoff * 2 > c->backoff_max ? c->backoff_max : c->backoff * 2;
}

void redis_conn_reset_backoff(redis_conn_t *c)
{
    c->backoff = c->backoff_min;
}

int64_t redis_conn_retry_at(const redis_conn_t *c)
{
    return c->retry_at;
}

int64_t redis_conn_backoff(const redis_conn_t *c)
{
    return c->backoff;
}

redisContext *redis_conn_cmd(const redis_conn_t *c)
{
    return c->cmd;
}

redisContext *redis_conn_sub(const redis_conn_t *c)
{
    return c->sub;
}

int64_t redis_conn_last_reply(const redis_conn_t *c, bool sub)
{
    return sub ? c->sub_last : c->cmd_last;
}

bool redis_conn_sentinel(const redis_conn_t *c)
{
    return c->nsentinels > 0;
}

bool redis_conn_replica(const redis_conn_t *c)
{
    return c->node_replica;
}

const char *redis_conn_node_text(const redis_conn_t *c, char *buf, size_t len)
{
    if (!c->node_set) {
        if (len)
            buf[0] = '\0';
        return buf;
    }
    return redis_node_text(&c->node, buf, len);
}

int64_t redis_conn_next_check(const redis_conn_t *c)
{
    return c->nsentinels ? c->next_check : INT64_MAX;
}

/* --- lifecycle --- */

void redis_conn_free(redis_conn_t *c)
{
    if (!c)
        return;
    data_close(c);
    sen_close(c);
    free(c->where);
    free(c->host);
    free(c->unix_path);
    free(c->password);
    free(c->sentinels);
    free(c->master);
    free(c->sentinel_password);
    free(c);
}

static char *dup_or_null(const char *s, bool *oom)
{
    if (!s || !s[0])
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = true;
    return d;
}

/* The sentinel addresses of cfg into c. */
static int take_sentinels(redis_conn_t *c, const redis_conn_config_t *cfg, char *err, size_t errlen)
{
    if (!c->master) {
        snprintf(err, errlen, "sentinels without a master name");
        return TERN_EINVAL;
    }
    if (!(c->sentinels = calloc(cfg->nsentinels, sizeof(*c->sentinels)))) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    for (; c->nsentinels < cfg->nsentinels; c->nsentinels++) {
        if (!redis_sentinel_split(cfg->sentinels[c->nsentinels], &c->sentinels[c->nsentinels])) {
            snprintf(err, errlen, "bad sentinel address \"%s\"", cfg->sentinels[c->nsentinels]);
            return TERN_EINVAL;
        }
    }
    free(c->unix_path);
    c->unix_path = NULL;
    c->replica_start = (unsigned)tern_monotonic_us() ^ (unsigned)getpid() * 2654435761u;
    return 0;
}

redis_conn_t *redis_conn_new(const redis_conn_config_t *cfg, char *err, size_t errlen)
{
    redis_conn_t *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    bool oom = false;
    c->where = dup_or_null(cfg->where ? cfg->where : "redis", &oom);
    c->host = dup_or_null(cfg->host, &oom);
    c->unix_path = dup_or_null(cfg->unix_path, &oom);
    c->password = dup_or_null(cfg->password, &oom);
    c->master = dup_or_null(cfg->sentinel_master, &oom);
    c->sentinel_password = dup_or_null(cfg->sentinel_password, &oom);
    c->port = cfg->port;
    c->db = cfg->db;
    c->connect_timeout = cfg->connect_timeout_ms;
    c->read_timeout = cfg->read_timeout_ms;
    c->read_replica = cfg->read_replica;
    c->subscriber = cfg->subscriber;
    c->backoff_min = c->backoff = cfg->backoff_min_ms;
    c->backoff_max = cfg->backoff_max_ms;
    c->wakefd = cfg->wakefd;
    c->stop = cfg->stop;
    c->on_sub = cfg->on_sub;
    c->ctx = cfg->ctx;
    c->next_check = INT64_MAX;
    if (oom) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (cfg->nsentinels) {
        if (take_sentinels(c, cfg, err, errlen) < 0)
            goto fail;
    } else if (c->read_replica) {
        snprintf(err, errlen, "read_from replica needs sentinels");
        goto fail;
    } else if (!c->host && !c->unix_path) {
        snprintf(err, errlen, "no host");
        goto fail;
    }
    return c;
fail:
    redis_conn_free(c);
    return NULL;
}

void redis_conn_config_of(const config_redis_t *r, const char *where, uint32_t timeout_ms,
                          uint32_t backoff_min_ms, uint32_t backoff_max_ms, redis_conn_config_t *cc)
{
    *cc = (redis_conn_config_t){
        .where = where,
        .host = r->unix_path ? NULL : (r->host ? r->host : "127.0.0.1"),
        .port = r->port ? r->port : 6379,
        .unix_path = r->unix_path,
        .db = r->db,
        .password = r->password,
        .connect_timeout_ms = r->connect_timeout_ms ? r->connect_timeout_ms : timeout_ms,
        .read_timeout_ms = r->read_timeout_ms ? r->read_timeout_ms : timeout_ms,
        .sentinels = (const char *const *)r->sentinels,
        .nsentinels = r->nsentinels,
        .sentinel_master = r->sentinel_master,
        .sentinel_password = r->sentinel_password,
        .read_replica = false, /* a writer: the primary */
        .backoff_min_ms = backoff_min_ms,
        .backoff_max_ms = backoff_max_ms,
        .wakefd = -1,
    };
}

void redis_conn_where_of(const config_redis_t *r, char *buf, size_t len)
{
    if (r->nsentinels)
        snprintf(buf, len, "redis+sentinel://%s/%u", r->sentinel_master ? r->sentinel_master : "",
                 r->db);
    else if (r->unix_path)
        snprintf(buf, len, "%s", r->unix_path);
    else
        snprintf(buf, len, r->host && strchr(r->host, ':') ? "[%s]:%u" : "%s:%u",
                 r->host ? r->host : "127.0.0.1", r->port ? r->port : 6379);
}
