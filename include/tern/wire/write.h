/*
 * write.h — render a response into a caller's buffer, with name compression and truncation.
 *
 * Owns: the response layout. The writer never allocates and never writes past `limit`; a worker
 * keeps one writer and one buffer and reuses them for every response.
 *
 * Use, in this order:
 *   wire_writer_init()            header copied from the query, question echoed byte for byte
 *   wire_writer_reserve()         keep room for the OPT record if the response will carry one
 *   wire_write_rrset() ...        answer, then authority, then additional (sections in order)
 *   wire_write_opt()              uses the reserved room
 *   wire_writer_finish()          flags, rcode and counts into the header; returns the length
 *
 * RRset data ("rdata sequence") is the format zone stores pre-rendered: for each RR, a 16-bit
 * big-endian RDLENGTH followed by that many bytes of uncompressed RDATA.
 *
 * Compression (RFC 1035 §4.1.4): owner names and the names inside the RDATA of the types RFC 3597
 * §4 lists as compressible (NS, MD, MF, CNAME, SOA, MB, MG, MR, PTR, MINFO, MX) are compressed
 * against names already in the message through a small table of (offset, suffix hash, labels).
 * Other types' names (SRV, NAPTR, RRSIG, ...) are written uncompressed, as RFC 3597 requires.
 *
 * Truncation (RFC 2181 §9): wire_write_rrset() writes a whole RRset or nothing; on TERN_ENOSPC the
 * message is exactly as before the call and the caller decides: the answer and authority
 * sections set TC, the additional section just stops.
 */
#ifndef TERN_WIRE_WRITE_H
#define TERN_WIRE_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/wire/parse.h"

/* 64 names cover every response that fits a UDP payload (a name costs at least 2 bytes); past
 * that, names are still written correctly, only less compressed. */
#define WIRE_COMP_MAX 64

typedef enum { WIRE_SEC_AN = 0, WIRE_SEC_NS = 1, WIRE_SEC_AR = 2 } wire_section_t;

typedef struct wire_comp_entry {
    uint16_t off;   /* where the suffix starts in the message */
    uint8_t labels; /* labels of that suffix, root excluded */
    uint32_t hash;  /* dname suffix hash (dname.h) of that suffix */
} wire_comp_entry_t;

typedef struct wire_writer {
    uint8_t *buf;
    size_t limit;    /* the message never grows beyond this */
    size_t reserved; /* bytes kept free at the end (OPT) */
    size_t len;
    uint16_t count[3];      /* RRs per section */
    int section;            /* last section written to; sections only move forward */
    uint16_t last_name_off; /* offset of the name in the RDATA of the last RR written, or 0 */
    unsigned ncomp;
    wire_comp_entry_t comp[WIRE_COMP_MAX];
} wire_writer_t;

/**
 * Start a response to q in buf (capacity limit, at least 512). Copies the id, sets QR, copies
 * opcode and RD from the query; echoes the question byte for byte if q->has_question (the name
 * is registered for compression at offset 12). Counts are zero.
 */
void wire_writer_init(wire_writer_t *w, uint8_t *buf, size_t limit, const wire_query_t *q);

/** Keep n bytes free at the end for a later wire_write_opt(). TERN_ENOSPC if they don't fit. */
int wire_writer_reserve(wire_writer_t *w, size_t n) TERN_WUR;

/**
 * Append count RRs of one RRset to section sec. The owner is written as a pointer to owner_off
 * when owner_off != 0 (it must be the offset of a name already in the message, e.g. 12 for the
 * question or w->last_name_off), else from owner (an uncompressed wire name, compressed here).
 * Class is IN. Returns 0, or TERN_ENOSPC with the message unchanged.
 * After success, w->last_name_off is the offset of the name in the RDATA of the last RR for
 * types whose RDATA starts with a name (CNAME, NS, PTR, DNAME) or ends with one (MX, SRV), else 0.
 */
int wire_write_rrset(wire_writer_t *w, wire_section_t sec, uint16_t owner_off, const uint8_t *owner,
                     uint16_t type, uint32_t ttl, uint16_t count, const uint8_t *rdata) TERN_WUR;

/** Same, with an explicit class (CHAOS answers). */
int wire_write_rrset_class(wire_writer_t *w, wire_section_t sec, uint16_t owner_off,
                           const uint8_t *owner, uint16_t type, uint16_t rclass, uint32_t ttl,
                           uint16_t count, const uint8_t *rdata) TERN_WUR;

/**
 * Append one RR the caller rendered ahead (a template): a compression pointer to owner_off (the
 * offset of a name already in the message, < 0x4000), then the n bytes of rest (TYPE, CLASS, TTL,
 * RDLENGTH and RDATA as they go on the wire), with a compression pointer written at each of the
 * nptr offsets ptr_at[i] of rest, to ptr_to[i] (< 0x4000: a name in the message before, or in
 * the record itself). Nothing is registered for compression, so nothing written after it can
 * point into it. Returns 0, or TERN_ENOSPC with the message unchanged.
 */
int wire_write_rr_raw(wire_writer_t *w, wire_section_t sec, uint16_t owner_off, const uint8_t *rest,
                      size_t n, const uint16_t *ptr_at, const uint16_t *ptr_to,
                      unsigned nptr) TERN_WUR;

/**
 * wire_write_rrset() (class IN) given the views (dname_view_init()) of the first n names in the
 * RDATA of RR 0, in order, made by the caller from exactly those bytes: the same message, without
 * making the views again (the negative answers' SOA, whose two names a flood writes every time).
 * A NULL view, or one of another length, is made here as usual.
 */
int wire_write_rrset_names(wire_writer_t *w, wire_section_t sec, uint16_t owner_off,
                           const uint8_t *owner, uint16_t type, uint32_t ttl, uint16_t count,
                           const uint8_t *rdata, const dname_view_t *const *names,
                           unsigned n) TERN_WUR;

/** Same (class IN), writing a chosen subset of an RRset in a chosen order: RR r is the one whose
 * RDLENGTH is at rdata + offs[r] (geo-steered answers). */
int wire_write_rrs(wire_writer_t *w, wire_section_t sec, uint16_t owner_off, const uint8_t *owner,
                   uint16_t type, uint32_t ttl, uint16_t count, const uint8_t *rdata,
                   const uint32_t *offs) TERN_WUR;

/** Bytes an OPT record needs: 11, plus 4 + 4 + ceil(source/8) when ecs is not NULL, plus
 * 4 + cookie_len when cookie_len is not 0. */
size_t wire_opt_size(const wire_ecs_t *ecs, size_t cookie_len);

/**
 * Write the OPT record into the space reserved earlier (releases it first). udp_size is our
 * advertised payload size; ext_rcode the upper 8 bits of the rcode; do_bit echoes DO. ecs, if not
 * NULL, is echoed with its family, source prefix and address and the given scope prefix
 * (RFC 7871 §7.2.1). cookie (cookie_len bytes, at most WIRE_COOKIE_MAX), if any, goes in a
 * COOKIE option after it (RFC 7873: the client cookie, then the server cookie). Returns 0,
 * TERN_ENOSPC, or TERN_EINVAL for an impossible ECS prefix or cookie length.
 */
int wire_write_opt(wire_writer_t *w, uint16_t udp_size, uint8_t ext_rcode, bool do_bit,
                   const wire_ecs_t *ecs, uint8_t scope_prefix, const uint8_t *cookie,
                   size_t cookie_len) TERN_WUR;

/**
 * Finish: sets AA and TC as given plus the low 4 bits of rcode in the header, writes the counts.
 * Returns the message length.
 */
size_t wire_writer_finish(wire_writer_t *w, bool aa, bool tc, unsigned rcode);

#endif
