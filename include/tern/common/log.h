/*
 * log.h — leveled logging for the control path (startup, reload, shutdown).
 *
 * Never called per query. Thread-safe: each message is formatted into a stack buffer and written
 * whole (one write(2) of at most PIPE_BUF bytes, or one syslog datagram) so lines from different
 * threads do not interleave.
 *
 * Never blocks on a stalled reader (tern/common/logfd.h): a line that stdout or stderr cannot
 * take now (a pipe nobody reads) waits in a 64 KiB backlog that a "tern-log" thread writes out
 * when the reader takes bytes again; a line that does not fit is dropped and counted
 * (log_dropped_lines()). At exit the backlog gets 200 ms more, then is dropped. The loader, the
 * signal thread and shutdown can therefore log whatever happens to the journal.
 *
 * Level and target are process-wide. Set them once at startup from the config, before the workers
 * exist; changing them later is safe (both are atomics) but a line racing the change may still go
 * to the old target.
 */
#ifndef TERN_COMMON_LOG_H
#define TERN_COMMON_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"

typedef enum { LOG_LVL_ERR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG } log_level_t;
#define LOG_LVL_COUNT 4

/* stderr: "ternd: LEVEL: message" lines (the journal adds time and pid under systemd).
 * stdout: the same on standard output.
 * syslog: one datagram per message to /dev/log as syslog(3) would send it with
 * openlog("ternd", LOG_PID, LOG_DAEMON) (tern/common/logfd.h), levels mapped to LOG_ERR,
 * LOG_WARNING, LOG_INFO, LOG_DEBUG; the message without the "ternd: LEVEL:" prefix. A socket
 * whose reader is full drops the message (counted), where syslog(3) would block. */
typedef enum { LOG_TARGET_STDERR = 0, LOG_TARGET_STDOUT, LOG_TARGET_SYSLOG } log_target_t;
#define LOG_TARGET_COUNT 3

/* Names as written in the config, indexed by the enum: "error", "warning", "info", "debug" and
 * "stderr", "stdout", "syslog". */
extern const char *const log_level_names[LOG_LVL_COUNT];
extern const char *const log_target_names[LOG_TARGET_COUNT];

/** Messages above level are dropped. Default LOG_LVL_INFO. */
void log_set_level(log_level_t level);

/** The current level. */
log_level_t log_get_level(void);

/** Where lines go from now on. Default LOG_TARGET_STDERR. Switching to syslog connects its
 * socket now (before a chroot or privilege drop can get in the way); switching away closes it. */
void log_set_target(log_target_t target);

/** The current target. */
log_target_t log_get_target(void);

/** Exact, case-sensitive name from log_level_names into *out. 0, or TERN_EINVAL (out unchanged). */
int log_parse_level(const char *name, log_level_t *out) TERN_WUR;

/** Exact, case-sensitive name from log_target_names into *out. 0, or TERN_EINVAL (out unchanged).
 */
int log_parse_target(const char *name, log_target_t *out) TERN_WUR;

void log_msg(log_level_t level, const char *fmt, ...) TERN_PRINTF(2, 3);

/** Lines dropped since start because stdout or stderr did not take them (a stalled or vanished
 * reader). Any thread. */
uint64_t log_dropped_lines(void);

/* Room for tern_escape() of n bytes with nothing cut: every byte as \DDD, and the NUL. */
#define TERN_ESCAPE_MAX(n) (4 * (size_t)(n) + 1)

/**
 * Untrusted text (len bytes of anything: a Redis key, a label, a set member) made safe to put in
 * a log line, so that a value holding a newline cannot forge a line and a terminal escape reaches
 * no terminal: bytes outside printable ASCII become \DDD (as in zone files), a backslash \\ and
 * a double quote \", so the text can be quoted and read back unambiguously. Written to dst
 * (dstlen > 0 bytes, always NUL-terminated); what does not fit is cut at a whole escape and
 * "..." ends it. Returns dst, to be passed straight to log_*(). Names that parse as domain names
 * have their own form (dname_key(), dname_to_str()); this is for what may not even parse.
 */
const char *tern_escape(char *dst, size_t dstlen, const void *s, size_t len);

/**
 * A whole message with its control characters (below 0x20, and 0x7f) written as \DDD, the rest
 * (UTF-8, backslashes, quotes) as it is: what log_msg() does to every line, so that a zone, label
 * or file name holding a newline never starts a forged line, and what error messages that end up
 * elsewhere (systemd's STATUS=, ternctl) get too. dst has dstlen > 0 bytes and is always
 * NUL-terminated; an escape is never cut in half. Returns the length written.
 */
size_t tern_escape_controls(char *dst, size_t dstlen, const char *src);

#define log_err(...)   log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
