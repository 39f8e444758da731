/*
 * dname.h — domain names in wire format (RFC 1035 §3.1).
 *
 * A "wire name" here is always uncompressed: length-prefixed labels ending with the root label,
 * at most DNAME_MAXLEN bytes, labels at most 63 bytes. dname_unpack() is the one reader of a
 * name inside a message (compression pointers, RFC 1035 §4.1.4): the query parser, TSIG and the
 * transfers all read names through it. Names are compared case-insensitively
 * (ASCII only, RFC 4343) by comparing lowercased copies.
 *
 * dname_view_t splits a name once into labels and precomputes the hash of every suffix, so the
 * zone table can find the zone (longest suffix) and the closest encloser with hash probes only,
 * never scanning. The suffix hash is defined right to left — hash(label.rest) depends only on
 * the lowercased label and hash(rest) — so a node's hash is the same whether computed from its
 * own name or as a suffix of a longer query name.
 *
 * No allocation; all functions are pure and thread-safe.
 */
#ifndef TERN_WIRE_DNAME_H
#define TERN_WIRE_DNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"

#define DNAME_MAXLEN    255
#define DNAME_MAXLABEL  63
#define DNAME_MAXLABELS 128 /* 127 one-byte labels + the root */

typedef struct dname_view {
    uint8_t len;                    /* wire length of the whole name, root included */
    uint8_t nlabels;                /* labels excluding the root; 0 for the root name */
    uint8_t off[DNAME_MAXLABELS];   /* off[i]: start of label i in lc; off[nlabels] = len-1 */
    uint32_t hash[DNAME_MAXLABELS]; /* hash[i]: hash of the suffix starting at label i */
    uint8_t lc[DNAME_MAXLEN + 8];   /* lowercased wire name, then zeros up to the next 8 bytes
                                       (hashing reads whole words) */
} dname_view_t;

/**
 * Validate an uncompressed wire name at buf[0..maxlen). Returns its length (1..255) or
 * TERN_EMALF if a label is longer than 63, a compression pointer or reserved label type appears,
 * the name exceeds 255 bytes or runs past maxlen.
 */
int dname_check(const uint8_t *buf, size_t maxlen) TERN_WUR;

/** Fill v from a name already validated by dname_check(). */
void dname_view_init(dname_view_t *v, const uint8_t *name);

/** Hash of a whole lowercased wire name; equals v->hash[0] of a view of the same name. */
uint32_t dname_hash(const uint8_t *lcname);

/** Copy name (validated) to dst lowercased; returns its length. dst has room for 255 bytes. */
size_t dname_lower(uint8_t *dst, const uint8_t *name);

/** Length of a validated wire name. */
size_t dname_len(const uint8_t *name);

/** Number of labels of a validated wire name, root excluded. */
unsigned dname_labels(const uint8_t *name);

/** Case-insensitive equality of two validated wire names. */
bool dname_equal(const uint8_t *a, const uint8_t *b);

/** True if name is sub or equal to parent (case-insensitive; both validated). */
bool dname_is_subdomain(const uint8_t *name, const uint8_t *parent);

/**
 * Presentation form of a validated wire name into dst (always NUL-terminated, "." for root,
 * with a trailing dot; non-printable bytes and specials escaped as \DDD / \c). Returns the
 * string length, or TERN_ENOSPC if dst (size dstlen) was too small (then truncated).
 * For logs and tools, never on the query path.
 */
int dname_to_str(const uint8_t *name, char *dst, size_t dstlen);

/**
 * Presentation name s (len bytes, not NUL-terminated) to an uncompressed wire name in out (room
 * for DNAME_MAXLEN). relative: only labels, for a label of a zone (no root label written, a final
 * dot refused); otherwise the name is absolute whether or not it ends with "." and "." alone is
 * the root. Escapes \DDD and \c as in RFC 1035 §5.1. Returns the wire length, or TERN_ESYNTAX
 * with *why set (a static string: "empty label in name", "label longer than 63 bytes", ...).
 */
int dname_from_str(const char *s, size_t len, bool relative, uint8_t *out,
                   const char **why) TERN_WUR;

/* Compression pointers one name may follow: a name has at most 127 labels, so a compressor never
 * needs more pointers than that to spell it; a longer chain is a message built to make us walk it
 * again and again. */
#define DNAME_PTR_HOPS_MAX DNAME_MAXLABELS

/* Why dname_unpack() refused a name, for callers whose messages say exactly what was wrong. */
typedef enum dname_fault {
    DNAME_FAULT_NONE = 0,
    DNAME_FAULT_TRUNCATED,   /* the name runs past its end, or a pointer past the message */
    DNAME_FAULT_LABEL,       /* a reserved label type (0x40, 0x80) */
    DNAME_FAULT_PTR_HEADER,  /* a pointer into the message header, where no name can be */
    DNAME_FAULT_PTR_FORWARD, /* a pointer not strictly below every byte of the name read so far */
    DNAME_FAULT_PTR_HOPS,    /* more than DNAME_PTR_HOPS_MAX pointers */
    DNAME_FAULT_TOO_LONG,    /* longer than DNAME_MAXLEN once expanded */
} dname_fault_t;

typedef struct dname_unpack_err {
    dname_fault_t fault;
    size_t at;     /* offset of the byte at fault (a label or pointer; the name's start when
                      TRUNCATED, TOO_LONG or PTR_HOPS) */
    size_t to;     /* a pointer's target (PTR_HEADER, PTR_FORWARD) */
    uint8_t label; /* the label byte (LABEL) */
} dname_unpack_err_t;

/**
 * Read the possibly compressed name at msg[*pos] of a message of len bytes. The name's own bytes
 * (up to and including its first pointer) must end by end (<= len: a record's RDATA end, or len);
 * pointers lead anywhere after the 12-byte header and before len, each strictly below every
 * offset of the name visited so far, so every walk ends; at most DNAME_PTR_HOPS_MAX of them, and
 * the name expanded at most DNAME_MAXLEN bytes. Trusts no byte of msg.
 * On success *pos is just past the name's own bytes, out (NULL, or room for DNAME_MAXLEN) holds
 * the name uncompressed (case kept), and its length (1..255; 1 is the root) is returned.
 * Otherwise TERN_EMALF, *pos and out unspecified, and err (if not NULL) says why.
 */
int dname_unpack(const uint8_t *msg, size_t len, size_t end, size_t *pos, uint8_t *out,
                 dname_unpack_err_t *err) TERN_WUR;

/** What err says, as a sentence fragment ("truncated name at offset 12") in buf. Returns buf. */
const char *dname_unpack_err_text(const dname_unpack_err_t *err, char *buf, size_t len);

/* Room for any dname_key() (every byte escaped as \DDD) and its NUL. */
#define DNAME_KEY_MAX (DNAME_MAXLEN * 4 + 1)

/**
 * The canonical key of a zone origin given in presentation form: the name parsed (escapes
 * resolved), lowercased and printed again without the final dot ("." for the root), so that
 * "Example.TEST.", "example.test" and "\101xample.test" are one key. Every byte that is not
 * printable ASCII is escaped (\DDD), so the key is safe to put in a log line. Returns the key's
 * length, or a negative code with *why set (out then undefined). outlen >= DNAME_KEY_MAX always
 * suffices.
 */
int dname_key(const char *origin, char *out, size_t outlen, const char **why) TERN_WUR;

#endif
