/*
 * xfr_in.h — incoming zone transfers (tern as a secondary): the response messages of an AXFR
 * (RFC 5936) or IXFR (RFC 1995) turned into a new version of the zone, and that version written
 * to disk as a master file.
 *
 * Owns: every rule of what makes a transfer response acceptable, and the application of IXFR
 * deltas. Not the connection, the request or TSIG: the transfer thread opens the TCP connection,
 * sends the query, verifies TSIG on each message, and feeds each message here without its TSIG
 * RR (ARCOUNT already decremented).
 *
 * Lifecycle: new (one per request) → set_id → feed each message until feed returns 0 → kind /
 * serial → finish (builds the zone; only for FULL and INCREMENTAL) → free. A feed error is final:
 * the transfer is abandoned and every later feed fails too.
 * Memory: an AXFR (or an AXFR-style IXFR answer) streams straight into a zone builder, no message
 * is kept. An IXFR keeps its deltas in a zone_delta_ixfr_t (zone/zone_delta.h: the RRs added
 * copied, the RRs removed as their positions in `have`); finish() turns them into one
 * zone_delta_t (the touched names' new data) and patches `have` with it (zone_patch.h), in time
 * and memory proportional to the change and the zone's small arrays. When the patch cannot be
 * made (a delegation changes, patches have piled up: zone_patch.h) it walks `have` once, feeding
 * a builder every RR not removed and then the RRs added, so the zone's records exist in one
 * extra copy at most (the builder's), never as ldns objects.
 * Threading: an xfr_in_t belongs to one thread (the puller that runs it); `have` is an immutable
 * version the caller keeps alive (its own reference) until xfr_in_free().
 *
 * Choices where the RFCs leave room, each as Knot makes it:
 *   - a record outside the zone in an AXFR or IXFR answer fails the transfer (RFC 5936 §3.3 lets
 *     a client skip or refuse: a primary sending one is misconfigured);
 *   - an IXFR delta removing a record the zone does not hold fails the transfer (the versions
 *     have diverged: only a full transfer repairs that); adding a record the zone already holds
 *     is accepted (the RRset's TTL becomes the added record's);
 *   - the TTL of an RRset some delta adds to becomes the lowest TTL of the RRs added to it (a
 *     primary changes an RRset's TTL by removing and re-adding its RRs);
 *   - names inside RDATA are decompressed for every type whose layout tern knows (wire/rdata.h:
 *     the RFC 1035 types, and RP, AFSDB, RT, PX, KX, SRV, DNAME as RFC 3597 §4 asks); other
 *     types' RDATA is taken as it is;
 *   - a compression pointer must point before the start of the name (or name piece) it is read
 *     from, so every pointer chain ends; TTLs above 2^31 - 1 are taken as 0 (RFC 2181 §8).
 */
#ifndef TERN_XFR_XFR_IN_H
#define TERN_XFR_XFR_IN_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/zone/zone.h"

typedef struct xfr_in xfr_in_t;

/**
 * A transfer of the zone origin (a validated wire name, any case) asked with qtype WIRE_T_AXFR
 * or WIRE_T_IXFR. have is the version the secondary serves (NULL if none, or an unavailable zone:
 * then only AXFR may be asked): an IXFR's deltas apply to it, and an AXFR older than it is
 * refused. max_bytes (0: no cap) caps both the bytes of all messages together and what the
 * transfer will cost in memory: each record taken in is counted at its owner name and RDATA
 * twice plus a measured per-record cost (xfr_in.c RR_COST), and applying an IXFR at 3/2 of the
 * footprint of `have` (what building it whole costs, should the patch ask for that), so the peak
 * stays near max_bytes,
 * not several times it. source names the
 * primary, e.g. "primary 127.0.0.1@5300": it prefixes every message and becomes the built zone's
 * `source`. Returns NULL when out of memory or for an IXFR without a `have` to apply it to.
 */
xfr_in_t *xfr_in_new(const uint8_t *origin, uint16_t qtype, const zone_t *have, size_t max_bytes,
                     const char *source) TERN_WUR;

/** The id of the query: a response with another id fails the transfer. Before the first feed. */
void xfr_in_set_id(xfr_in_t *x, uint16_t id);

/**
 * Feed the next response message (len bytes, its TSIG RR already removed). Returns 1 when more
 * messages are expected, 0 when the transfer is complete, or a negative TERN_E* code with err
 * (errlen bytes) saying exactly what was wrong, e.g. "<source>: message 3: RCODE NOTAUTH":
 * TERN_EMALF for a malformed message, TERN_EINVAL for one that breaks the transfer's rules (a bad
 * header or question, a first record that is not the zone's SOA, a broken delta chain, a removal
 * of an absent record, an old serial; also a feed after the end or after an error),
 * TERN_EOUTZONE for a record outside the zone, TERN_ELIMIT past max_bytes (of messages or of
 * memory), TERN_ENOMEM.
 */
int xfr_in_feed(xfr_in_t *x, const uint8_t *msg, size_t len, char *err, size_t errlen) TERN_WUR;

/* What a complete transfer brought: a whole zone (an AXFR, or an IXFR answered AXFR-style), a
 * chain of deltas, or the single SOA that means "nothing newer than what you have". */
typedef enum { XFR_IN_FULL, XFR_IN_INCREMENTAL, XFR_IN_UP_TO_DATE } xfr_in_kind_t;

/** The kind of answer, once xfr_in_feed() has returned 0. */
xfr_in_kind_t xfr_in_kind(const xfr_in_t *x);

/** The serial of the primary's version (the answer's first SOA); 0 before the first record. */
uint32_t xfr_in_serial(const xfr_in_t *x);

/** Messages, answer records (every SOA included) and message bytes fed so far. */
size_t xfr_in_messages(const xfr_in_t *x);
size_t xfr_in_records(const xfr_in_t *x);
size_t xfr_in_bytes(const xfr_in_t *x);
/** What the records fed so far will cost in memory, as counted against max_bytes. */
size_t xfr_in_memory(const xfr_in_t *x);

/**
 * Build the new version: FULL, the records received; INCREMENTAL, `have` with every delta
 * applied in order (a patched version of `have`, or built whole when it cannot be patched). The
 * zone builder validates it (zone_builder_finish()). Returns 0 with *out (one reference, the
 * caller's), or a negative TERN_E* code with err: the builder's, TERN_EINVAL when the transfer is
 * not complete, UP_TO_DATE (nothing to build) or finish was called before, TERN_ELIMIT when
 * applying an IXFR would take more than max_bytes. Frees the transfer's buffers either way.
 */
int xfr_in_finish(xfr_in_t *x, zone_t **out, char *err, size_t errlen) TERN_WUR;

/** Abandon or release a transfer. NULL is a no-op. */
void xfr_in_free(xfr_in_t *x);

/**
 * Write z as an RFC 1035 master file at path, for the secondary's on-disk copy that
 * zone_file_load() reads at startup: the apex SOA first, then every RR of every node with its
 * RRset's TTL, absolute names, class IN, in ldns presentation format — or RFC 3597 generic form
 * (TYPEnnn \# len hex) for any record ldns would not read back to the same bytes. Atomic: a
 * temporary file in path's directory, fsync, rename over path, fsync of the directory; on any
 * failure path is untouched and the temporary removed. Returns 0 or a negative TERN_E* code
 * with err naming the path.
 */
int xfr_zone_write_file(const zone_t *z, const char *path, char *err, size_t errlen) TERN_WUR;

/** xfr_zone_write_file() leaving out every RRset of type skip_type (0: none): a master-file
 * zone's write-back (source_journal_flush()) leaves out the DNSKEYs tern adds when it signs. */
int xfr_zone_write_file_skip(const zone_t *z, const char *path, uint16_t skip_type, char *err,
                             size_t errlen) TERN_WUR;

#endif
