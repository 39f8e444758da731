/*
 * xfr_stream.h — the DNS messages of an AXFR (RFC 5936) or IXFR (RFC 1995) response, produced
 * one at a time from a pinned zone version and, for IXFR, the journal's deltas.
 *
 * Owns: the response layout. A stream is a cursor over the zone's nodes or the deltas' RRs; it
 * never materialises the response (a zone of a million names streams in messages of the
 * caller's size, with the memory of one cursor), and each message is written straight into the
 * caller's buffer.
 * Every message: the query's id, QR and AA set, RD copied, opcode 0, RCODE 0, the question
 * echoed as asked (as NSD and Knot do), the RRs in the answer section, as many as fit. Owner
 * names are compressed cheaply: the labels above the apex, then a pointer to the apex inside the
 * echoed question (the next RR of the same owner is a pointer to the first). Names inside RDATA
 * stay uncompressed, which RFC 1035 allows for every type. The last `reserve` bytes of each
 * message are left free for the caller's TSIG RR.
 * Lifecycle: new (query parsed, deltas retained) → next ... until it returns 0 → free. The caller
 * keeps the zone version alive (its own reference) until xfr_stream_free().
 * Threading: one stream belongs to one thread (the transfer thread); the zone and the deltas it
 * reads are immutable, so any number of streams run at once.
 */
#ifndef TERN_XFR_XFR_STREAM_H
#define TERN_XFR_XFR_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/xfr/journal.h"
#include "tern/zone/zone.h"

/* The largest DNS message over TCP (RFC 1035 §4.2.2: a 16-bit length prefix). */
#define XFR_MSG_MAX 65535

typedef struct xfr_stream xfr_stream_t;

/**
 * An AXFR response of z: the SOA, every RR of every node but the apex SOA (glue and everything
 * below a cut included; empty non-terminals hold nothing; a steered A/AAAA RRset is sent whole),
 * then the SOA again. query (qlen bytes) is the request as received; only its header and
 * question are read (the question's name must be uncompressed, as RFC 1035 requires of a
 * question). Returns NULL when out of memory or when the query has no valid question.
 */
xfr_stream_t *xfr_stream_axfr(const zone_t *z, const uint8_t *query, size_t qlen) TERN_WUR;

/**
 * An IXFR response (RFC 1995 §4) of z. deltas[0..n) chain from the client's serial to z's serial
 * (each delta's from is the previous one's to; the last one's to is z->serial): the current SOA,
 * then per delta its old SOA, the RRs removed, its new SOA, the RRs added, then the current SOA
 * again. n == 0 with deltas not NULL: the client is up to date, the answer is the single current
 * SOA. deltas == NULL: the client's serial is not in the journal, the answer is AXFR-style (SOA,
 * every RR, SOA). The stream takes its own reference to each delta.
 * Returns NULL when out of memory, when the query has no valid question, or when the deltas do
 * not chain to z's serial.
 */
xfr_stream_t *xfr_stream_ixfr(const zone_t *z, xfr_delta_t *const *deltas, size_t n,
                              const uint8_t *query, size_t qlen) TERN_WUR;

/**
 * Write the next message into buf: at most min(cap, XFR_MSG_MAX) - reserve bytes, so that the
 * last `reserve` bytes of cap stay free for a TSIG RR; *len is the message length. Returns 1
 * when more messages follow, 0 when this was the last one, TERN_ETRUNC when a single RR (or
 * the header and question) does not fit in cap - reserve bytes (the stream cannot go on),
 * TERN_EINVAL when called again after the last message.
 */
int xfr_stream_next(xfr_stream_t *s, uint8_t *buf, size_t cap, size_t reserve,
                    size_t *len) TERN_WUR;

/** RRs written so far, over all messages (for logs). */
uint64_t xfr_stream_records(const xfr_stream_t *s);

/** Release the stream and its delta references. NULL is a no-op. */
void xfr_stream_free(xfr_stream_t *s);

#endif
