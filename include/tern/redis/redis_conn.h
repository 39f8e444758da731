/*
 * redis_conn.h — one connection to Redis as tern talks to it: the node configured, or with
 * Sentinel the node the sentinels name, followed through a failover. Used by the Redis zone
 * source (redis_source.h) and the health checker's shared state (src/checker/health_redis.c), so
 * both read and write the same node and both move when Sentinel promotes another.
 *
 * Owns: a command connection to the data node; optionally (subscriber) a second connection to the
 * same node, greeted but not SELECTed, for (P)SUBSCRIBE; with Sentinel, one connection to the
 * sentinel that answered last. All non-blocking hiredis contexts waited on with poll(2).
 *
 * Every wait has a total deadline (connect_timeout to connect, read_timeout without progress for
 * a reply) and watches the owner's wakeup fd: once *stop is true, every call returns
 * REDIS_CONN_STOP within milliseconds. While a reply is awaited on the command connection, the
 * subscriber connection is read too and each of its replies handed to on_sub.
 *
 * Lifecycle: redis_conn_new() → redis_conn_open() (Sentinel discovery, connect, AUTH, SELECT,
 * PING, ROLE) → commands … → redis_conn_lost() or redis_conn_failed() (closed, retried after
 * redis_conn_retry_at() with backoff) → redis_conn_open() … → redis_conn_free().
 * With Sentinel, while connected, redis_conn_sentinel_check() (due at redis_conn_next_check())
 * asks whether the node is still the one to use and fails the connection when it is not.
 *
 * Threading: one thread per instance, and only that thread calls its functions (hiredis contexts
 * are not thread-safe); two threads that talk to Redis each have their own instance.
 * redis_conn_open() blocks SIGPIPE on the calling thread: a write to a socket Redis closed fails
 * with EPIPE instead of killing the process.
 */
#ifndef TERN_REDIS_REDIS_CONN_H
#define TERN_REDIS_REDIS_CONN_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "tern/common/compiler.h"
#include "tern/redis/redis_settings.h"

/* Outcomes of a Redis exchange besides 0. */
#define REDIS_CONN_STOP (-ECANCELED)  /* *stop became true */
#define REDIS_CONN_DOWN (-ECONNRESET) /* the connection is unusable; redis_conn_why() says why */

typedef struct redis_conn_config {
    const char *where;     /* names the connection in messages ("redis://h:p/db"), required */
    const char *host;      /* the node without Sentinel (NULL: unix_path) */
    uint16_t port;         /* with host */
    const char *unix_path; /* a socket path instead of host:port (not with Sentinel) */
    unsigned db;           /* SELECTed on the command connection when not 0 */
    const char *password;  /* AUTH on every data connection; NULL = none */
    uint32_t connect_timeout_ms, read_timeout_ms; /* both required (> 0) */
    /* Sentinel: with nsentinels, host, port and unix_path are unused */
    const char *const *sentinels; /* "IP:PORT" or "[V6]:PORT", asked in order */
    size_t nsentinels;
    const char *sentinel_master;   /* required with sentinels */
    const char *sentinel_password; /* AUTH to the sentinels; NULL = none */
    bool read_replica;             /* use a usable replica Sentinel names, else the primary */
    bool subscriber;               /* open the second connection too */
    /* reconnect backoff: from backoff_min_ms doubling to backoff_max_ms */
    uint32_t backoff_min_ms, backoff_max_ms;
    int wakefd;              /* the owner's eventfd, polled beside every wait; -1 = none */
    const atomic_bool *stop; /* checked when wakefd fires; NULL = never */
    /* a reply that arrived on the subscriber connection (ownership stays with the callee) */
    void (*on_sub)(void *ctx, const redisReply *r);
    void *ctx;
} redis_conn_config_t;

typedef struct redis_conn redis_conn_t;

/**
 * cc for the primary of the Redis r configures (host or socket, db, password, Sentinel; no
 * subscriber, no wakeup fd: every wait ends within its timeout), named where; r's timeouts, or
 * timeout_ms where r gives none; backoff from backoff_min_ms to backoff_max_ms. cc points into
 * r (which must outlive it until redis_conn_new() copies it). For the writers of shared state
 * (the health checker, the update service).
 */
void redis_conn_config_of(const config_redis_t *r, const char *where, uint32_t timeout_ms,
                          uint32_t backoff_min_ms, uint32_t backoff_max_ms,
                          redis_conn_config_t *cc);

/** "host:port", the socket's path, or the Sentinel master of r, for messages, into buf. */
void redis_conn_where_of(const config_redis_t *r, char *buf, size_t len);

/** A closed connection for cfg (strings copied; sentinel addresses checked). NULL with a message
 * in err: a bad sentinel address, no master name, read_replica without sentinels, no memory. */
redis_conn_t *redis_conn_new(const redis_conn_config_t *cfg, char *err, size_t errlen) TERN_WUR;

/** Close everything and free. NULL is a no-op. */
void redis_conn_free(redis_conn_t *c);

/**
 * Connect: with Sentinel, ask the sentinels for the node (the primary, or for read_replica a
 * usable replica: the current one while it stays usable); then the command connection (AUTH,
 * SELECT, PING; ROLE must say "master" for a node Sentinel names as primary) and, if configured,
 * the subscriber (AUTH, PING). 0, or REDIS_CONN_DOWN / REDIS_CONN_STOP with the data connections
 * closed. Does not wait for redis_conn_retry_at(): the caller decides when to try.
 */
int redis_conn_open(redis_conn_t *c) TERN_WUR;

/** Whether the command connection is open. */
bool redis_conn_is_open(const redis_conn_t *c);

/** Close the data connections after a failure of an open connection: the next attempt is due in
 * backoff_min_ms (a restarted Redis is back quickly), and the backoff starts again. */
void redis_conn_lost(redis_conn_t *c);

/** Close the data connections after a failed attempt to connect: the next one is due after the
 * current backoff, which doubles (up to backoff_max_ms). */
void redis_conn_failed(redis_conn_t *c);

/** Start the backoff again (after a successful connect). */
void redis_conn_reset_backoff(redis_conn_t *c);

/** When (monotonic ms) the next attempt to connect is due. */
int64_t redis_conn_retry_at(const redis_conn_t *c);

/** The current backoff delay in ms (the next failure waits this long). */
int64_t redis_conn_backoff(const redis_conn_t *c);

/** Why the last exchange failed ("" if none did). */
const char *redis_conn_why(const redis_conn_t *c);

/** Record why an exchange failed (printf); returns REDIS_CONN_DOWN. */
int redis_conn_fail(redis_conn_t *c, const char *fmt, ...) TERN_PRINTF(2, 3);

/** The command and subscriber connections (NULL while closed), for their fds and buffered
 * writes. */
redisContext *redis_conn_cmd(const redis_conn_t *c);
redisContext *redis_conn_sub(const redis_conn_t *c);

/** Queue one command on ctx (argv NUL-terminated strings, NULL-terminated, at most 8). */
int redis_conn_append(redis_conn_t *c, redisContext *ctx, const char *const *argv) TERN_WUR;

/** Queue one command of argc arguments with their lengths (no bound on argc). */
int redis_conn_append_argv(redis_conn_t *c, redisContext *ctx, int argc, const char **argv,
                           const size_t *lens) TERN_WUR;

/**
 * The next reply on ctx (written first if commands are pending), into *out (freeReplyObject()).
 * Waits at most read_timeout without progress; meanwhile hands the subscriber's replies to
 * on_sub (when ctx is the command connection). 0, REDIS_CONN_DOWN or REDIS_CONN_STOP.
 */
int redis_conn_reply(redis_conn_t *c, redisContext *ctx, redisReply **out) TERN_WUR;

/** Run one command and return its reply (error replies included: the caller decides). */
int redis_conn_run(redis_conn_t *c, redisContext *ctx, redisReply **out,
                   const char *const *argv) TERN_WUR;

/** Run a command whose reply must not be an error; what names it in the message. */
int redis_conn_run_ok(redis_conn_t *c, redisContext *ctx, const char *what,
                      const char *const *argv) TERN_WUR;

/** Read what the subscriber connection has and hand every complete reply to on_sub. */
int redis_conn_sub_drain(redis_conn_t *c) TERN_WUR;

/** The last reply on the command (sub false) or subscriber connection, monotonic ms. */
int64_t redis_conn_last_reply(const redis_conn_t *c, bool sub);

/** Whether Sentinel names the node (sentinels configured). */
bool redis_conn_sentinel(const redis_conn_t *c);

/** Sentinel: whether the node used is a replica. */
bool redis_conn_replica(const redis_conn_t *c);

/** Sentinel: the node used (or last chosen), "IP:PORT" into buf; "" before the first. */
const char *redis_conn_node_text(const redis_conn_t *c, char *buf, size_t len);

/** Sentinel: when the next redis_conn_sentinel_check() is due; INT64_MAX without Sentinel. */
int64_t redis_conn_next_check(const redis_conn_t *c);

/**
 * Sentinel, while connected: whether the sentinels still name the node used. REDIS_CONN_DOWN
 * (why: "… moving") when they name another: the caller drops the connection and opens again.
 * Sentinels out of reach are logged once and change nothing (0). Without Sentinel: 0.
 */
int redis_conn_sentinel_check(redis_conn_t *c) TERN_WUR;

#endif
