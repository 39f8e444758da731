/*
 * health_log.c — the health result log (health_log.h says what a line holds and why writes
 * never block).
 */
#include "health_log.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "health_redis.h"
#include "tern/common/log.h"
#include "tern/common/logfd.h"

/* 16 KiB: a few dozen result lines, a burst of checks finishing together, while the reader is
 * briefly behind; beyond that lines are dropped rather than waited for. */
#define HEALTH_LOG_BUF (16u << 10)

/* At close (reload or shutdown), how long a stalled reader may still take what is buffered:
 * a small share of the second shutdown is promised in. */
#define HEALTH_LOG_CLOSE_MS 100

struct health_log {
    int fd; /* ours (a file), or 1 or 2 */
    bool own;
    bool json;
    bool stalled;  /* said once per stall */
    uint64_t lost; /* lines a write error lost in health_log_put(): told by the next flush */
    logfd_t out;
    size_t len;
    char buf[HEALTH_LOG_BUF];
};

health_log_t *health_log_open(const char *path, int fd, bool json)
{
    health_log_t *l = calloc(1, sizeof(*l));
    if (!l) {
        log_err("health: out of memory for the result log; check results are not logged");
        return NULL;
    }
    l->json = json;
    l->fd = fd;
    if (path) {
        /* O_NONBLOCK: a FIFO without a reader fails now instead of hanging the checker, and
         * one whose reader stalls refuses bytes instead of blocking (a regular file ignores
         * it) */
        l->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0640);
        if (l->fd < 0) {
            log_err("health: log %s: %s; check results are not logged", path, strerror(errno));
            free(l);
            return NULL;
        }
        l->own = true;
    }
    logfd_init(&l->out, l->fd);
    return l;
}

/* The JSON line of r (malloc'd, no newline), or NULL. */
static char *json_line(const health_log_line_t *r, const char *time)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    /* redins' line: its logger's time, level and message, then logHealthcheck()'s fields */
    json_object_set_new(o, "time", json_string(time));
    json_object_set_new(o, "level", json_string("info"));
    json_object_set_new(o, "msg", json_string("dns healthcheck"));
    json_object_set_new(o, "log_type", json_string("healthcheck"));
    json_object_set_new(o, "ip", json_string(r->ip));
    json_object_set_new(o, "port", json_integer(r->port));
    json_object_set_new(o, "host", json_string(r->host ? r->host : ""));
    json_object_set_new(o, "domain_uuid", json_string(""));
    json_object_set_new(o, "uri", json_string(r->uri ? r->uri : "/"));
    json_object_set_new(o, "status", json_integer(r->status));
    json_object_set_new(o, "error", json_string(r->ok || !r->error ? "" : r->error));
    /* tern's */
    json_object_set_new(o, "protocol", json_string(r->protocol));
    json_object_set_new(o, "state", json_string(r->state));
    json_object_set_new(o, "ok", json_boolean(r->ok));
    json_object_set_new(o, "latency_ms", json_real(r->latency_us / 1000.0));
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return line;
}

bool health_log_put(health_log_t *l, const health_log_line_t *r)
{
    char t[40];
    hredis_format_time(r->wall_ms, t, sizeof(t));
    char text[1024];
    char *line = NULL;
    int n;
    if (l->json) {
        if (!(line = json_line(r, t)))
            return false;
        n = (int)strlen(line);
    } else {
        n = snprintf(text, sizeof(text), "%s healthcheck %s status %d %s %.3f ms%s%s", t,
                     r->describe, r->status, r->state, r->latency_us / 1000.0,
                     r->ok ? "" : " error: ", r->ok || !r->error ? "" : r->error);
        if (n >= (int)sizeof(text))
            n = (int)sizeof(text) - 1; /* a long error cut, still one line */
    }
    const char *p = line ? line : text;
    if (n < 0 || (size_t)n + 1 > sizeof(l->buf) - l->len) {
        l->lost += health_log_flush(l);
        if (n < 0 || (size_t)n + 1 > sizeof(l->buf) - l->len) {
            if (!l->stalled)
                log_warn("health: the result log's reader does not keep up; result lines are "
                         "dropped until it does");
            l->stalled = true;
            free(line);
            return false;
        }
    }
    memcpy(l->buf + l->len, p, (size_t)n);
    l->buf[l->len + (size_t)n] = '\n';
    l->len += (size_t)n + 1;
    free(line);
    return true;
}

/* health_log_flush(), waiting timeout_ms at most for a stalled reader. */
static uint64_t flush_within(health_log_t *l, int timeout_ms)
{
    uint64_t lost = l->lost;
    l->lost = 0;
    if (l->len == 0)
        return lost;
    if (!l->own)
        logfd_sync(&l->out);
    if (logfd_flush(&l->out, l->buf, &l->len, timeout_ms) < 0) {
        lost += logfd_lines(l->buf, l->len);
        l->len = 0;
    }
    if (l->len == 0)
        l->stalled = false;
    return lost;
}

uint64_t health_log_flush(health_log_t *l)
{
    return flush_within(l, 0);
}

uint64_t health_log_close(health_log_t *l)
{
    if (!l)
        return 0;
    uint64_t lost = flush_within(l, HEALTH_LOG_CLOSE_MS);
    lost += logfd_lines(l->buf, l->len);
    logfd_close(&l->out);
    if (l->own)
        close(l->fd);
    free(l);
    return lost;
}
