/*
 * dnstap.h — the dnstap sink of the query log: each logged query (qlog_rec_t) becomes dnstap
 * messages (AUTH_QUERY and/or AUTH_RESPONSE) sent as Frame Streams to a UNIX socket reader
 * (fstrm_capture, dnstap collectors: bidirectional handshake) or written to a file.
 *
 * Owner and lifecycle: the query log's writer thread opens the sink at startup, feeds it records
 * drained from the workers' rings, reopens it on SIGHUP (file rotation) and closes it at shutdown.
 * Each message is a protobuf (src/qlog/dnstap.proto, protobuf-c) in a malloc'd buffer handed to
 * libfstrm's I/O thread (fstrm_iothr), which owns the connection or file: it writes in batches,
 * does the Frame Streams handshake, and when the reader goes away retries every second on its own.
 *
 * Threading rule: qlog_dnstap_open/write/reopen/close are called by one thread, the writer (the
 * fstrm queue is single-producer). qlog_dnstap_write never blocks: when fstrm's queue is full the
 * message is dropped and counted. qlog_dnstap_stats may be called from any thread; the counters
 * are atomics written by the writer thread and by fstrm's I/O thread, read relaxed.
 *
 * Threads and memory: one fstrm I/O thread per sink (two for a moment during a file reopen); a
 * queue of DNSTAP_QUEUE_SIZE messages, each one malloc'd buffer of about 100 bytes plus the DNS
 * message(s) it carries (at most about 2 * QLOG_WIRE_MAX).
 *
 * The transport: libfstrm does all of Frame Streams (framing, the bidirectional handshake on a
 * socket, START/STOP, the queue, batching, retrying), but under its writer runs tern's own small
 * fstrm_rdwr (connect/open, write, read, close) instead of fstrm_unix_writer/fstrm_file_writer,
 * because those hide what this sink must know:
 *   - when a socket connection is made (fstrm exposes no hook): with our transport, reconnects
 *     are counted exactly;
 *   - when fstrm's I/O thread throws queued messages away because no reader is connected (its
 *     queue does not refuse them: it drains and discards): with our transport, they count in
 *     dropped instead of vanishing;
 *   - a reader that stops reading blocks the stock writer without limit, and fstrm_iothr_destroy
 *     with it: our sends and handshake reads time out (DNSTAP_IO_TIMEOUT_S), then the connection
 *     is dropped and retried;
 *   - fstrm_file_writer opens the file by name in its own thread, later: an error cannot be
 *     reported by open/reopen, and a rename right after can make two threads write one file. We
 *     open it in the calling thread and hand fstrm the descriptor.
 *
 * The socket: a socket that does not exist yet at open is not an error: messages are dropped
 * (counted) until a reader listens, and the I/O thread tries again every second.
 *
 * The file: opened with O_TRUNC (a Frame Streams file holds one stream, from START to STOP), so
 * restarting on an existing file replaces it: rotate first. A reopen when the path still names the
 * file being written (nothing was rotated) keeps writing it. After a write error (disk full) the
 * file stays closed, messages counted dropped, until the next reopen.
 */
#ifndef TERN_QLOG_DNSTAP_H
#define TERN_QLOG_DNSTAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/common/err.h"
#include "tern/qlog/qlog_rec.h"

/* Messages fstrm's queue holds before qlog_dnstap_write drops (see dnstap.c for the reason). */
#define DNSTAP_QUEUE_SIZE 16384u
/* Messages queued before fstrm's I/O thread is woken (it also wakes each second to flush), and
 * the most one writev() takes. */
#define DNSTAP_NOTIFY       512u
#define DNSTAP_OUTPUT_QUEUE 512u

/* Longest a send to, or a handshake read from, a stalled socket reader may block fstrm's I/O
 * thread (and so qlog_dnstap_close) before the connection is given up. */
#define DNSTAP_IO_TIMEOUT_S 2

/* Seconds between fstrm's attempts to connect to the reader again. */
#define DNSTAP_REOPEN_S 1

typedef struct qlog_dnstap qlog_dnstap_t;

typedef struct qlog_dnstap_opts {
    const char *socket_path; /* UNIX socket of a Frame Streams reader (bidirectional), or NULL */
    const char *file_path;   /* or a file (exactly one of the two) */
    bool queries, responses; /* which messages to write for each record */
    const char *identity;    /* dnstap identity (NULL: the host name) */
    const char *version;     /* dnstap version (NULL: "tern " TERN_VERSION) */
} qlog_dnstap_opts_t;

/*
 * Counters since open; a message is counted once, when its fate is known:
 *   written — reached the reader: sent on the socket after the handshake, or written to the
 *             file; counted by fstrm's I/O thread after the write, so it lags by the queue;
 *   dropped — will never reach it: refused by fstrm's full queue (qlog_dnstap_write returned
 *             TERN_EAGAIN), or taken by the I/O thread while no reader was connected (or the
 *             file was closed by a write error), or in a batch whose write failed (the reader
 *             went away: some of that batch may have arrived whole; counted dropped all the same).
 * Once fstrm is done with the queue (after qlog_dnstap_close; when running, about two seconds
 * after the last write: it flushes when idle for a second), every message given to the sink is
 * in exactly one of the two.
 *   reconnects — socket connections that completed the Frame Streams handshake, after the first
 *             one (connections the reader refused in the handshake do not count); 0 for a file.
 */
typedef struct qlog_dnstap_stats {
    uint64_t written;
    uint64_t dropped;
    uint64_t reconnects;
} qlog_dnstap_stats_t;

/**
 * A sink for o (copied: the strings need not outlive the call), its I/O thread started. NULL on
 * failure with the reason in err ("dnstap: /path: why"): not exactly one of socket_path and
 * file_path, a socket path too long for sun_path, a file that cannot be opened for writing, no
 * memory. A socket nobody listens on yet is not a failure. With neither queries nor responses the
 * sink writes nothing (the config decides whether that is an error).
 */
qlog_dnstap_t *qlog_dnstap_open(const qlog_dnstap_opts_t *o, char *err, size_t errlen) TERN_WUR;

/**
 * Queue the messages for r (AUTH_QUERY when opts.queries and r has query bytes; AUTH_RESPONSE
 * when opts.responses and QLOG_F_RESPONSE is set). r is only read during the call. Never blocks.
 * 0 when every message was queued; TERN_EAGAIN when fstrm's queue refused one (counted dropped);
 * TERN_ENOMEM when a buffer could not be allocated (counted dropped); TERN_EINVAL when r is
 * inconsistent (its size does not hold qlen + rlen bytes: nothing is written or counted). Not
 * warn_unused_result: every loss is already counted, so the writer may ignore the result.
 */
int qlog_dnstap_write(qlog_dnstap_t *d, const qlog_rec_t *r);

/**
 * SIGHUP. File sink: when the path no longer names the file being written (it was renamed or
 * removed), the current file is finished (fstrm flushes and closes it) and the path opened anew;
 * when it does, nothing changes. Socket sink: nothing to do. 0, or a negative TERN_E* code with
 * err set ("dnstap: /path: why"), in which case the old file stays in use.
 */
int qlog_dnstap_reopen(qlog_dnstap_t *d, char *err, size_t errlen) TERN_WUR;

/** The counters (see qlog_dnstap_stats_t), read with relaxed atomics: any thread. */
void qlog_dnstap_stats(const qlog_dnstap_t *d, qlog_dnstap_stats_t *out);

/**
 * Flush what is queued and free the sink; NULL is fine. Joins fstrm's I/O thread
 * (fstrm_iothr_destroy), which sends what is queued, then the STOP frame and waits for the
 * reader's FINISH: bounded by DNSTAP_IO_TIMEOUT_S per step when the reader has stalled.
 */
void qlog_dnstap_close(qlog_dnstap_t *d);

#endif
