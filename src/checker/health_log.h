/*
 * health_log.h — the health result log: one line per check result, in redins' healthcheck log
 * format (handler/healthcheck.go, logHealthcheck()) or as a text line, to a file, stdout or
 * stderr.
 *
 * JSON lines carry redins' fields with redins' types: "time", "level":"info", "msg":"dns
 * healthcheck" (what redins' logger adds to every line), "log_type":"healthcheck", "ip",
 * "port" (number), "host", "domain_uuid" (tern keeps none: ""), "uri", "status" (number: the
 * endpoint's counter, from down_count to up_count), "error" ("" when the check passed); and
 * tern's, under names redins' line does not use: "protocol", "state", "ok" (boolean),
 * "latency_ms" (number, microsecond precision).
 *
 * A line never waits for its reader (tern/common/logfd.h): lines go into a 16 KiB buffer that
 * health_log_flush() writes out as far as the reader takes it, without blocking; a line that
 * finds the buffer full is dropped, and the caller counts it. A stalled journal therefore costs
 * result lines, never the checker thread's progress or the shutdown that joins it.
 *
 * Threading: the checker thread owns a health_log_t.
 */
#ifndef TERN_HEALTH_LOG_H
#define TERN_HEALTH_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include "tern/common/compiler.h"

typedef struct health_log health_log_t;

/* One result, as the checker has it. */
typedef struct health_log_line {
    const char *ip;       /* the endpoint's address, as text */
    unsigned port;        /* its port */
    const char *host;     /* HTTP(S) Host, or NULL */
    const char *uri;      /* HTTP(S) path, or NULL ("/") */
    const char *protocol; /* health_proto_name() */
    const char *describe; /* health_spec_describe()'s text, for the text format */
    int status;           /* the endpoint's counter after this result */
    const char *state;    /* health_ep_state() */
    bool ok;
    const char *error; /* why it failed, or NULL */
    uint32_t latency_us;
    int64_t wall_ms; /* when it finished */
} health_log_line_t;

/**
 * A result log to path (appended to, created 0640) when path is set, else to descriptor fd
 * (1 or 2, never closed here); JSON lines when json. NULL when the file cannot be opened (said
 * in the server log) or memory runs out.
 */
health_log_t *health_log_open(const char *path, int fd, bool json) TERN_WUR;

/** Format r as one line into the buffer. false when it was dropped (no room: the reader does
 * not keep up; or the line could not be made). The caller counts drops. */
bool health_log_put(health_log_t *l, const health_log_line_t *r) TERN_WUR;

/** Write what the reader takes now, without waiting. The number of lines lost because the
 * reader is gone (a write error): the caller counts them. */
uint64_t health_log_flush(health_log_t *l) TERN_WUR;

/** Flush, giving a stalled reader 100 ms at most, then free l (closing a file, never 1 or 2).
 * The number of lines that did not go out. NULL: 0. */
uint64_t health_log_close(health_log_t *l);

#endif
