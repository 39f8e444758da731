/*
 * redis_server.h — a real redis-server for the unit tests (include after <cmocka.h>): started on
 * 127.0.0.1 at a free port in a scratch directory, by PID, and stopped by that PID only. Every
 * wait is bounded. The server dies with the test process (PR_SET_PDEATHSIG), so a crashed test
 * leaves none behind. Header-only, so each test stays one executable; needs hiredis.
 */
#ifndef TERN_TESTS_UNIT_REDIS_SERVER_H
#define TERN_TESTS_UNIT_REDIS_SERVER_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "test_util.h"

/* How long a server may take to start answering, or to exit after a signal. */
#define RSRV_WAIT_MS 5000

typedef struct redis_server {
    pid_t pid; /* 0 when not running */
    uint16_t port;
    char dir[64];     /* its working directory (dump.rdb, redis.log) */
    bool own_dir;     /* created by rsrv_start(): removed by rsrv_stop() */
    char args[8][64]; /* extra "--option value" arguments, for rsrv_restart() */
    int nargs;
} redis_server_t;

static inline int64_t rsrv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void rsrv_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A loopback TCP port nobody listens on right now (bound to port 0 and released). */
static inline uint16_t rsrv_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    socklen_t sl = sizeof(sa);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* A connection to the server (AUTH with password when not NULL), or NULL. */
static inline redisContext *rsrv_try_connect(const redis_server_t *s, const char *password)
{
    struct timeval tv = {0, 500000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
    if (!c || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, (struct timeval){2, 0});
    if (password) {
        redisReply *r = redisCommand(c, "AUTH %s", password);
        bool ok = r && r->type == REDIS_REPLY_STATUS;
        if (r)
            freeReplyObject(r);
        if (!ok) {
            redisFree(c);
            return NULL;
        }
    }
    return c;
}

/* True once the server answers PING (an error reply such as NOAUTH counts: it is up). */
static inline bool rsrv_answers(const redis_server_t *s)
{
    redisContext *c = rsrv_try_connect(s, NULL);
    if (!c)
        return false;
    redisReply *r = redisCommand(c, "PING");
    bool ok = r && (r->type == REDIS_REPLY_STATUS ||
                    (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "LOADING", 7) != 0));
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* (Re)start the server of s on s->port in s->dir with s->args. */
static inline void rsrv_spawn(redis_server_t *s)
{
    char port[8], log[128];
    snprintf(port, sizeof(port), "%u", s->port);
    snprintf(log, sizeof(log), "%s/redis.log", s->dir);
    const char *argv[40] = {"redis-server", "--port",      port,     "--bind",    "127.0.0.1",
                            "--dir",        s->dir,        "--save", "",          "--appendonly",
                            "no",           "--daemonize", "no",     "--logfile", log};
    int n = 15;
    for (int i = 0; i < s->nargs; i++)
        argv[n++] = s->args[i];
    argv[n] = NULL;
    pid_t pid = tu_spawn(argv, NULL);
    s->pid = pid;
    int64_t deadline = rsrv_now_ms() + RSRV_WAIT_MS;
    while (!rsrv_answers(s)) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            s->pid = 0;
            fail_msg("redis-server exited at start (see %s)", log);
        }
        if (rsrv_now_ms() > deadline)
            fail_msg("redis-server on port %u does not answer after %d ms", s->port, RSRV_WAIT_MS);
        rsrv_sleep_ms(20);
    }
}

/*
 * Start a server on port (0: a free one) in dir (NULL: a new scratch directory), with extra
 * arguments given as "--option", "value" pairs, NULL-terminated (e.g. "--requirepass", "pw").
 * Keyspace notifications are on ("KEA") unless the arguments set them.
 */
static inline void rsrv_start(redis_server_t *s, uint16_t port, const char *dir, ...)
{
    memset(s, 0, sizeof(*s));
    s->port = port ? port : rsrv_free_port();
    if (dir) {
        snprintf(s->dir, sizeof(s->dir), "%s", dir);
    } else {
        snprintf(s->dir, sizeof(s->dir), "/tmp/tern-redis-XXXXXX");
        assert_non_null(mkdtemp(s->dir));
        s->own_dir = true;
    }
    bool notify = false;
    va_list ap;
    va_start(ap, dir);
    for (const char *a; (a = va_arg(ap, const char *));) {
        assert_true(s->nargs < 8 && strlen(a) < 64);
        if (strcmp(a, "--notify-keyspace-events") == 0)
            notify = true;
        snprintf(s->args[s->nargs++], 64, "%s", a);
    }
    va_end(ap);
    if (!notify) {
        assert_true(s->nargs <= 6);
        snprintf(s->args[s->nargs++], 64, "--notify-keyspace-events");
        snprintf(s->args[s->nargs++], 64, "KEA");
    }
    rsrv_spawn(s);
}

/* Send sig to the server and wait (bounded) until it has exited; SIGKILL if it does not. */
static inline void rsrv_kill(redis_server_t *s, int sig)
{
    if (!s->pid)
        return;
    kill(s->pid, SIGCONT); /* a stopped server must be able to act on the signal */
    kill(s->pid, sig);
    int64_t deadline = rsrv_now_ms() + RSRV_WAIT_MS;
    int st;
    while (waitpid(s->pid, &st, WNOHANG) != s->pid) {
        if (rsrv_now_ms() > deadline) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            break;
        }
        rsrv_sleep_ms(10);
    }
    s->pid = 0;
}

/* Start the server again, same port, directory and arguments (after rsrv_kill()). */
static inline void rsrv_restart(redis_server_t *s)
{
    assert_int_equal(s->pid, 0);
    rsrv_spawn(s);
}

/* Stop the server and remove its scratch directory. */
static inline void rsrv_stop(redis_server_t *s)
{
    rsrv_kill(s, SIGTERM);
    if (s->own_dir) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", s->dir);
        s->own_dir = false;
    }
}

/* A client connection for the test; fails the test if there is none. */
static inline redisContext *rsrv_connect(const redis_server_t *s, const char *password)
{
    redisContext *c = rsrv_try_connect(s, password);
    if (!c)
        fail_msg("cannot connect to redis-server on port %u", s->port);
    return c;
}

/* Run a command (redisCommand format); fails the test on an error or no reply. */
static inline void rsrv_cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (!r)
        fail_msg("redis command \"%s\": %s", fmt, c->errstr);
    if (r->type == REDIS_REPLY_ERROR) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%s", r->str);
        freeReplyObject(r);
        fail_msg("redis command \"%s\": %s", fmt, msg);
    }
    freeReplyObject(r);
}

#endif
