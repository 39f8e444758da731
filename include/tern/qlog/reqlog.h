/*
 * reqlog.h — redins' request log: one line per logged query (qlog_rec_t), as redins'
 * handler.LogRequest wrote it, to a file, standard output or standard error.
 *
 * A line carries what redins logged (source_ip, record, type, client_subnet, source_country,
 * source_asn, destination_ip, process_time in milliseconds, response_code, msg "dns request")
 * and what tern adds (source_port, destination_port, ecs_scope, transport). redins' domain_uuid
 * is not in a qlog_rec_t and is not written. Two formats:
 *
 *   json: one object per line,
 *     {"time":"2026-11-26T04:05:06.123456Z","level":"info","msg":"dns request",
 *      "source_ip":"192.0.2.1","source_port":53124,"destination_ip":"192.0.2.53",
 *      "destination_port":53,"record":"www.example.test.","type":"A",
 *      "client_subnet":"198.51.100.0/24","source_country":"GB","source_asn":64500,
 *      "ecs_scope":24,"response_code":"NOERROR","process_time":0.012,"transport":"udp"}
 *   text: the same fields as key=value after the time, the level and the message,
 *     2026-11-26T04:05:06.123456Z info dns request source_ip=192.0.2.1 source_port=53124 ...
 *     a value that is empty or holds a space, a control or non-ASCII byte, '"', '=' or '\' is
 *     quoted, with tern_escape()'s escapes inside (\DDD, \\, \").
 *
 * time is the query's arrival (qtime_ns), RFC 3339 in UTC with microseconds; process_time is
 * rtime_ns - qtime_ns in milliseconds with three decimals (0 when the clock went back).
 * client_subnet only with QLOG_F_ECS, source_country only with QLOG_F_COUNTRY, source_asn only
 * with QLOG_F_ASN, ecs_scope when it is not 0 or the query had ECS. response_code is the rcode's
 * name (NOERROR, FORMERR, SERVFAIL, NXDOMAIN, NOTIMP, REFUSED, YXDOMAIN, NOTAUTH, BADVERS,
 * BADCOOKIE, else RCODE<n>) or DROPPED when no response was sent (rcode 0xFFFF). record and type
 * come from the query's bytes: the qname lowercased (as redins' state.Name()) in presentation
 * form with a final dot, every byte outside printable ASCII as \DDD (dname_to_str()), and the
 * qtype's mnemonic (RFC 3597's TYPE<n> for types tern has no name for). Without query bytes
 * (QLOG_F_QUERY_CUT) or when they do not parse, record is "" and type the mnemonic of the
 * record's qtype field ("" when that is 0). qnames are attacker-controlled: every string is
 * escaped, so a line is always one valid JSON object (or one text line), whatever the query held.
 *
 * Lifecycle: qlog_reqlog_open() at startup; qlog_reqlog_write() per record and
 * qlog_reqlog_flush() after each drain pass; qlog_reqlog_reopen() on SIGHUP (a rotated file is
 * opened again by name); qlog_reqlog_close() at shutdown.
 *
 * Threading: one writer thread owns a qlog_reqlog_t and is the only caller of everything but
 * qlog_reqlog_stats(), which any thread may call (relaxed atomics). Lines are formatted into a
 * 64 KiB buffer that is written, at a flush, at a reopen and at close, without ever blocking on
 * the reader (tern/common/logfd.h): a pipe, FIFO or socket takes what it has room for, in whole
 * lines, and the rest stays buffered for the next flush; a line that finds the buffer full is
 * dropped and counted (a stalled journal costs lines, never the writer thread's progress, so
 * reload and shutdown never wait for it). A regular file is written as it is (the disk is
 * waited for). The stdout and stderr targets write to descriptors 1 and 2 as they are at each
 * write and never close them. A writer thread that writes to a pipe should block SIGPIPE, so
 * that a reader that went away makes write(2) fail (counted) instead of killing the process.
 */
#ifndef TERN_QLOG_REQLOG_H
#define TERN_QLOG_REQLOG_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/qlog/qlog_rec.h"

typedef enum {
    QLOG_REQLOG_FILE = 0,
    QLOG_REQLOG_STDOUT,
    QLOG_REQLOG_STDERR,
    QLOG_REQLOG_SYSLOG, /* syslog(3), one message per line: journald under systemd */
} qlog_reqlog_target_t;
typedef enum { QLOG_REQLOG_JSON = 0, QLOG_REQLOG_TEXT } qlog_reqlog_format_t;

typedef struct qlog_reqlog_opts {
    qlog_reqlog_target_t target;
    qlog_reqlog_format_t format;
    const char *path; /* file target: appended to (created mode 0640); copied */
} qlog_reqlog_opts_t;

typedef struct qlog_reqlog qlog_reqlog_t;

/**
 * A request log as o says. The file target opens path now (O_APPEND | O_CREAT, mode 0640; a
 * regular file, a character device or a FIFO with a reader, never blocking on one without);
 * the others use descriptor 1 or 2. NULL with "requests: /path: why" (or "requests: ...") in
 * err (errlen bytes) when the file cannot be opened, o is bad, or memory runs out.
 */
qlog_reqlog_t *qlog_reqlog_open(const qlog_reqlog_opts_t *o, char *err, size_t errlen) TERN_WUR;

/**
 * Format r (r->size bytes, as a ring holds it) as one line into the buffer, writing the buffer
 * first when the line might not fit. 0, or TERN_EIO (-EIO) when that write failed: the lines
 * that were buffered and this one are lost and counted as errors (the next call starts afresh).
 * Not TERN_WUR: every failure is counted (qlog_reqlog_stats()) and logged once when writes
 * start failing, so the writer thread may ignore the result.
 */
int qlog_reqlog_write(qlog_reqlog_t *l, const qlog_rec_t *r);

/** Write what is buffered (the writer thread calls it after each drain pass). 0, or TERN_EIO:
 * the buffered lines are lost and counted as errors. Not TERN_WUR, as qlog_reqlog_write(). */
int qlog_reqlog_flush(qlog_reqlog_t *l);

/**
 * On SIGHUP (log rotation): what is buffered is written to the old file, then the path is
 * opened again and the old descriptor closed. The stdout and stderr targets: only the flush.
 * 0, or a negative code with "requests: /path: why" in err; the old file stays in use then.
 */
int qlog_reqlog_reopen(qlog_reqlog_t *l, char *err, size_t errlen) TERN_WUR;

/** Lines written, lines lost to write errors, and lines dropped because the reader did not
 * take them (the buffer full, or at close), since open. Any thread (relaxed loads). */
void qlog_reqlog_stats(const qlog_reqlog_t *l, uint64_t *lines, uint64_t *errors,
                       uint64_t *dropped);

/** Flush (a stalled reader gets 250 ms at most, then what is left is dropped and counted),
 * close the file (not stdout or stderr) and free l. NULL is fine. */
void qlog_reqlog_close(qlog_reqlog_t *l);

#endif
