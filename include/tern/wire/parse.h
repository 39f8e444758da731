/*
 * parse.h — parse one DNS query message into a fixed struct, trusting no byte of it.
 *
 * Owns: the wire_query_t layout and every rule of what makes a query malformed. Never allocates;
 * the struct lives in a worker's scratch space and is reused for every query.
 *
 * Rules (Knot-like):
 *   - fewer than 12 bytes, or QR=1: WIRE_DROP (no reply at all);
 *   - QDCOUNT != 1: WIRE_FORMERR with q->qdcount set, so policy can tell a header-only message
 *     of an unimplemented opcode (NOTIMP) from a malformed query;
 *   - QDCOUNT != 1, ANCOUNT != 0 or NSCOUNT != 0 (for opcode QUERY; an IXFR has its one SOA
 *     there), a bad question name
 *     (label > 63, name > 255, a compression pointer, running past the end), a question cut short:
 *     WIRE_FORMERR;
 *   - additional section: every record is walked with length checks; names may be compressed
 *     only there (pointers must point backwards); more than one OPT, an OPT whose owner is not the
 *     root, or a bad OPT option length: WIRE_FORMERR; a TSIG sets has_tsig (its checks are
 *     tern/tsig/tsig.h's); other additional records are skipped; trailing bytes after the last
 * counted record: WIRE_FORMERR (as Knot);
 *   - EDNS version != 0: WIRE_BADVERS (the response carries an OPT with extended rcode BADVERS);
 *   - EDNS Client Subnet (RFC 7871): family 1 or 2, source prefix <= 32/128, scope prefix 0 in a
 *     query, address length == ceil(source/8), bits beyond the prefix zero — else WIRE_FORMERR.
 *     Two ECS options: WIRE_FORMERR. COOKIE (RFC 7873 §5.2.2): 8 bytes, or 16 to 40; else, or
 *     twice, WIRE_FORMERR. Unknown options are ignored.
 * The question fields stay valid whenever the result is WIRE_OK, WIRE_BADVERS, or
 * WIRE_FORMERR with q->has_question set, so an error response can echo the question.
 */
#ifndef TERN_WIRE_PARSE_H
#define TERN_WIRE_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"

#define WIRE_HDR_LEN 12

/* Header flag bits in host order of the 16-bit flags word */
#define WIRE_FLAG_QR       0x8000u
#define WIRE_FLAG_AA       0x0400u
#define WIRE_FLAG_TC       0x0200u
#define WIRE_FLAG_RD       0x0100u
#define WIRE_FLAG_RA       0x0080u
#define WIRE_FLAG_AD       0x0020u
#define WIRE_FLAG_CD       0x0010u
#define WIRE_OPCODE(flags) (((flags) >> 11) & 0xFu)
#define WIRE_RCODE(flags)  ((flags)&0xFu)

enum wire_opcode { WIRE_OP_QUERY = 0, WIRE_OP_NOTIFY = 4, WIRE_OP_UPDATE = 5 };

enum wire_rcode {
    WIRE_RC_NOERROR = 0,
    WIRE_RC_FORMERR = 1,
    WIRE_RC_SERVFAIL = 2,
    WIRE_RC_NXDOMAIN = 3,
    WIRE_RC_NOTIMP = 4,
    WIRE_RC_REFUSED = 5,
    WIRE_RC_YXDOMAIN = 6,
    WIRE_RC_YXRRSET = 7, /* RFC 2136 §2.2: an RRset that should not exist does */
    WIRE_RC_NXRRSET = 8, /* ... one that should exist does not */
    WIRE_RC_NOTAUTH = 9,
    WIRE_RC_NOTZONE = 10,   /* a name outside the zone of the update */
    WIRE_RC_BADVERS = 16,   /* extended: upper 8 bits go in the OPT TTL */
    WIRE_RC_BADCOOKIE = 23, /* RFC 7873 §8, extended */
};

enum wire_edns_opt { WIRE_EDNS_ECS = 8, WIRE_EDNS_COOKIE = 10 };

/* COOKIE option sizes (RFC 7873 §4): an 8-byte client cookie, then 8..32 bytes of server
 * cookie. */
#define WIRE_COOKIE_CLIENT 8
#define WIRE_COOKIE_MAX    40

typedef enum {
    WIRE_OK = 0,
    WIRE_DROP,    /* send nothing */
    WIRE_FORMERR, /* answer FORMERR */
    WIRE_BADVERS, /* answer BADVERS (EDNS version not 0) */
} wire_parse_result_t;

typedef struct wire_ecs {
    uint16_t family; /* 1 = IPv4, 2 = IPv6 */
    uint8_t source_prefix;
    uint8_t scope_prefix; /* as sent (0 in a valid query) */
    uint8_t addr[16];     /* the address, zero-padded beyond the sent bytes */
} wire_ecs_t;

typedef struct wire_query {
    uint16_t id;
    uint16_t flags;   /* header flags word as received */
    uint16_t qdcount; /* QDCOUNT as received (a FORMERR when not 1) */
    uint16_t qtype;
    uint16_t qclass;
    bool has_question;    /* question parsed (may still be FORMERR for later sections) */
    const uint8_t *qname; /* points into the packet: the name as sent (case preserved) */
    size_t question_len;  /* bytes of the question section (name + type + class) */
    dname_view_t name;    /* lowercased labels and suffix hashes of qname */

    /* EDNS(0), RFC 6891 */
    bool has_edns;
    bool edns_do; /* DO bit */
    uint8_t edns_version;
    uint16_t edns_udp_size; /* as sent by the client (not clamped) */
    bool has_ecs;
    wire_ecs_t ecs;
    /* DNS Cookies, RFC 7873: the client cookie (8 bytes), then the server cookie if any */
    bool has_cookie;
    uint8_t cookie_len; /* WIRE_COOKIE_CLIENT, or 16..WIRE_COOKIE_MAX */
    uint8_t cookie[WIRE_COOKIE_MAX];
    /* a TSIG record in the additional section (RFC 8945): the request is the transfer side's
     * (tern/xfr), which verifies it */
    bool has_tsig;
} wire_query_t;

/**
 * Parse pkt[0..len) into q. Returns a wire_parse_result_t; see the rules above.
 * q->id and q->flags are valid for every result but WIRE_DROP.
 */
wire_parse_result_t wire_parse_query(wire_query_t *q, const uint8_t *pkt, size_t len) TERN_WUR;

#endif
