/*
 * reqlog.h — redins' request log: one line per logged query (qlog_rec_t), as redins wrote it
 * (handler/handler.go: HandleRequest's logData, Filter() and LogRequest(), through its logger
 * at level info), to a file, standard output, standard error or syslog.
 *
 * json: one object per line, redins' fields with redins' names, types and meanings, and tern's
 * under names redins does not use; the keys in Go's order (encoding/json sorts a map's keys,
 * and redins' logger marshals one map holding its fields with time, level and msg):
 *
 *   {"client_subnet":"198.51.100.0/24/0","destination_country":["DE"],
 *    "destination_ip":"203.0.113.7","ecs_scope":24,"level":"info","log_type":"request",
 *    "msg":"dns request","process_time":0,"process_time_us":12,"record":"www.example.test.",
 *    "response_code":0,"server_ip":"192.0.2.53","server_port":53,"source_asn":64500,
 *    "source_country":"DE","source_ip":"192.0.2.1","source_port":53124,
 *    "time":"2026-11-26T04:05:06.123456Z","transport":"udp","type":"A"}
 *
 *   redins' (handler.go):
 *     log_type       "request", always
 *     source_ip      the packet's source address (not the ECS address), string
 *     record, type   the qname lowercased in presentation form with its final dot (redins'
 *                    state.Name(); bytes outside printable ASCII as \DDD, dname_to_str()), and
 *                    the qtype's mnemonic (RFC 3597's TYPE<n> for types tern has no name for);
 *                    without query bytes (QLOG_F_QUERY_CUT) or when they do not parse, record
 *                    is "" and type the mnemonic of the record's qtype field ("" when 0)
 *     client_subnet  the query's ECS option as miekg/dns's EDNS0_SUBNET.String() writes it
 *                    ("198.51.100.0/24/0", "[2001:db8::]/56/0": address/source/scope), "" when
 *                    the query had none: always written, as redins does
 *     source_country the client's ISO code, when the answer was steered by country (string)
 *     source_asn     the client's ASN, when steered by ASN (integer)
 *     domain_uuid    the domain_id of the zone the name asked is in (its config in redins'
 *                    JSON or Redis layout), "" when it gives none; absent when no served zone
 *                    holds the name (redins: a record, even of an NXDOMAIN, was found); at most
 *                    QLOG_DOMAIN_ID_MAX bytes
 *     destination_ip, destination_country
 *                    only when a count-single RRset picked one record of several for the
 *                    client (QLOG_F_DEST): that record's address (string) and its countries
 *                    (redins' []string: an array of strings, "" for its "" entry, null when it
 *                    lists none). Never the server's own address.
 *     process_time   answering time in whole milliseconds, cut (Go's Nanoseconds()/1000000)
 *     response_code  the full rcode as an integer; -1 when no response was sent (a limit
 *                    dropped the query, which redins never did)
 *     time, level, msg
 *                    what redins' logger adds: the query's arrival, RFC 3339 UTC with
 *                    microseconds; "info"; "dns request"
 *   tern's:
 *     process_time_us answering time in microseconds (integer)
 *     server_ip, server_port  the address and port the query was sent to
 *     source_port    the client's port
 *     ecs_scope      the ECS scope the response gave, when the query had ECS or was steered
 *     transport      "udp" or "tcp"
 *     steer_*        what the steering rules redins does not have decided (issue 33), each
 *                    group only when its rule ran for the answer's last steered RRset that used
 *                    one, so a zone in redins' schema alone logs redins' line unchanged:
 *       steer_latency        geo_filter latency: "matched" (the client's network is in the
 *                            latency map and a candidate's group is in its entry), "unmapped"
 *                            or "nogroup" (fell back to location)
 *       steer_latency_group, steer_latency_ms   when matched: the group answered and its
 *                            measured latency in the map (string, integer)
 *       steer_shed_out, steer_shed_scaled       load shedding: records left out above their
 *                            high watermark, records kept with their weight scaled (integers)
 *       steer_sticky_prefix  order sticky: bits of the client's network hashed (integer)
 *       steer_tier, steer_tier_skipped          failover tiers: the priority of the tier
 *                            answered, tiers passed over for too few healthy records
 *   not written: redins' cache (HIT or MISS of redins' own record cache, which tern does
 *   not have).
 *
 * text: tern's own format, stable: the time, "info", "dns request", then the same fields
 *   (level, msg and time aside) as key=value in the same order, destination_country as a
 *   comma-separated list; a value that is empty or holds a space, a control or non-ASCII byte,
 *   '"', '=' or '\' is quoted, with tern_escape()'s escapes inside (\DDD, \\, \").
 *     2026-11-26T04:05:06.123456Z info dns request client_subnet=198.51.100.0/24/0 ...
 *
 * qnames are attacker-controlled: every string is escaped, so a line is always one valid JSON
 * object (or one text line), whatever the query held.
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
    QLOG_REQLOG_SYSLOG, /* /dev/log, one datagram per line as syslog(3) sends it (facility
                           daemon, ident ternd, the pid): journald under systemd */
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
