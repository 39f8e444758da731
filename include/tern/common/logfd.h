/*
 * logfd.h — a log's output descriptor that never blocks on a stalled reader.
 *
 * A log line must never hold up the thread that writes it: the loader, the signal thread, the
 * supervisor and shutdown all log, and a standard output or error that is a pipe nobody reads
 * (a stuck journal, a supervisor that stopped reading) would block a plain write(2) forever.
 * A logfd_t writes without blocking to what a descriptor points at, by its kind:
 *
 *   pipe or FIFO: through its own open file description, opened O_NONBLOCK (an inherited 1 or 2
 *                 is opened again through /proc/self/fd/N, so that O_NONBLOCK does not leak to
 *                 the description the parent and other processes share);
 *   socket:       send(2) with MSG_DONTWAIT | MSG_NOSIGNAL (the journal's stdout stream);
 *   regular file, character device (a terminal, /dev/null): write(2) as it is; they do not
 *                 stall on a reader;
 *   syslog:       the local syslog socket (/dev/log: journald or a syslog daemon) as a
 *                 non-blocking datagram socket of our own, one message per datagram in the
 *                 RFC 3164 form glibc's syslog(3) sends (which would block on a stuck reader).
 *
 * Writes to a pipe are cut after whole lines into pieces of at most PIPE_BUF bytes, which the
 * kernel writes whole or not at all: lines of different writers sharing one pipe (the server
 * log on stderr and the request log on stdout, both the journal's pipe) never interleave.
 * What a write could not take stays with the caller, who keeps it (bounded) for the next try
 * and drops, and counts, what does not fit: a log is worth less than the service.
 *
 * Threading: a logfd_t belongs to one thread at a time (its owner's lock or its own thread).
 */
#ifndef TERN_COMMON_LOGFD_H
#define TERN_COMMON_LOGFD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tern/common/compiler.h"

typedef struct logfd {
    int fd;       /* where writes go; -1: nowhere (the descriptor was closed or unusable) */
    int src;      /* the descriptor it was made from (1, 2, or the caller's own) */
    bool own;     /* fd is ours to close (a reopened pipe) */
    uint8_t kind; /* logfd.c's LFD_* */
    dev_t dev;    /* of src when made: logfd_sync() sees a descriptor swapped under it */
    ino_t ino;
} logfd_t;

/**
 * A writer for descriptor src (1, 2, or a descriptor the caller opened and keeps: it is not
 * closed by logfd_close()). Never fails: an unusable src gives a logfd_t whose writes fail
 * with a negated errno, as a plain write(2) would.
 */
void logfd_init(logfd_t *l, int src);

/** Made again if src now points elsewhere (dup2() over 1 or 2 since logfd_init()). */
void logfd_sync(logfd_t *l);

/**
 * Write a prefix of buf[0..len) without blocking: 0..len bytes taken (0: the reader is full,
 * try again later), or a negated errno (EPIPE, EBADF, ...: the bytes cannot be written).
 * A pipe takes whole lines only, unless one line alone exceeds PIPE_BUF.
 */
ssize_t logfd_write(logfd_t *l, const char *buf, size_t len) TERN_WUR;

/**
 * The bounded buffer every log keeps in front of its reader: write buf[0..*len) as far as the
 * reader takes it, now (timeout_ms 0) or waiting timeout_ms at most in all, and move what is
 * left to the front of buf (*len updated; a line partly written keeps its rest). The number of
 * lines (newlines) written, or a negated errno when the reader is gone (buf unchanged).
 */
int64_t logfd_flush(logfd_t *l, char *buf, size_t *len, int timeout_ms) TERN_WUR;

/** Newlines in p[0..n): the lines a buffer holds, for counting what is dropped. */
uint64_t logfd_lines(const char *p, size_t n);

/**
 * A writer to the local syslog socket (/dev/log), connected now (before a privilege drop can
 * get in the way, as openlog()'s LOG_NDELAY) and again when the daemon restarted. Never fails:
 * without a socket, logfd_syslog() fails.
 */
void logfd_init_syslog(logfd_t *l);

/**
 * One message "<pri>Mmm dd hh:mm:ss ident[pid]: msg" (msg len bytes, no newline) as one
 * datagram, without waiting. 0; -EAGAIN when the reader is full (the message
 * is not sent: drop and count it); another negated errno when there is no syslog socket.
 */
int logfd_syslog(logfd_t *l, int pri, const char *ident, const char *msg, size_t len) TERN_WUR;

/** Wait at most timeout_ms for l to take bytes again. true when it may. */
bool logfd_wait(const logfd_t *l, int timeout_ms);

/** Close what logfd_init() opened (never src). */
void logfd_close(logfd_t *l);

#endif
