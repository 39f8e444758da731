/*
 * health_load.h — private to src/checker: reading an endpoint's load (issue 33's load shedding,
 * answer/steer_shed.c) out of what a check brought back — a response header's value, a number
 * in a JSON body — into the milli-unit cell the workers read (health_ep_t.load).
 *
 * A load is a non-negative decimal number as operators write it: 0.85 or 85 (any scale; the
 * RRset's watermarks are in the same one). It is kept in milli-units, so 0.001 is the finest step
 * and 4294967.294 the largest (above: clamped to it; a load that high is above any watermark).
 *
 * Threading: pure functions; the checker thread calls them.
 */
#ifndef TERN_CHECKER_HEALTH_LOAD_H
#define TERN_CHECKER_HEALTH_LOAD_H

#include <stddef.h>
#include <stdint.h>

/* The most of a JSON body a check reads for its load: a status document is a few hundred bytes;
 * 64 KiB leaves room for a verbose one while 500 checks in flight (the default max_requests)
 * still hold at most 32 MiB. A longer body is no status document: its load is unknown. */
#define HEALTH_LOAD_BODY_MAX 65536

/** The load written as text in s[0..len): optional blanks around a decimal number (digits, one
 * '.', an exponent), finite and >= 0. 0 and *milli set, or TERN_EINVAL (empty, a sign, hex,
 * nan/inf, trailing text). */
int health_load_parse_text(const char *s, size_t len, uint32_t *milli);

/** A finite x >= 0 in milli-units (rounded, clamped below HEALTH_LOAD_UNKNOWN); TERN_EINVAL for
 * a negative or non-finite x. */
int health_load_from_double(double x, uint32_t *milli);

/** The number at dotted path (a.b.c: object keys; no arrays) of the JSON document in
 * body[0..len). A JSON number, or a string holding one (health_load_parse_text()). 0 and *milli
 * set, or TERN_EINVAL (not JSON, path missing, not a number). */
int health_load_parse_json(const char *body, size_t len, const char *path, uint32_t *milli);

/** If header line p[0..len) ("Name: value\r\n") is header name (case-insensitive), its value
 * parsed as health_load_parse_text(): 1 and *milli set; 0 another header; TERN_EINVAL when it is
 * the header but its value is no load. */
int health_load_header(const char *p, size_t len, const char *name, uint32_t *milli);

#endif
