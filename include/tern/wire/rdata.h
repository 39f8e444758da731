/*
 * rdata.h — what tern knows about the layout of RDATA: where the domain names are.
 *
 * One table serves two rules: name compression when writing (RFC 3597 §4: only the RFC 1035
 * types may be compressed) and the canonical form used to compare RDATA (RFC 4034 §6.2 as
 * amended by RFC 6840 §5.1: the names inside these types compare case-insensitively, so
 * "NS ns1.example." and "NS NS1.EXAMPLE." are one RR, RFC 2181 §5).
 *
 * Pure functions over caller buffers; no state, no allocation: usable on the query path.
 */
#ifndef TERN_WIRE_RDATA_H
#define TERN_WIRE_RDATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"

/* Fixed bytes before the names, how many uncompressed names follow, fixed bytes after them. */
typedef struct wire_rdata_layout {
    uint8_t head;
    uint8_t names;
    uint8_t tail;
    bool compress; /* an RFC 1035 type: its names may be compressed in a message */
} wire_rdata_layout_t;

/** The layout of type's RDATA if it holds domain names at fixed places, else false. */
bool wire_rdata_layout(uint16_t type, wire_rdata_layout_t *l);

/**
 * Canonical form of one RDATA of type (len bytes at rd) into out (len bytes: the form has the
 * same length): the names of wire_rdata_layout() lowercased (ASCII), everything else copied.
 * RDATA that does not parse as its layout, and types without names, are copied unchanged.
 */
void wire_rdata_canon(uint16_t type, const uint8_t *rd, size_t len, uint8_t *out);

struct dname_unpack_err; /* tern/wire/dname.h */

/**
 * The RDATA of type at msg[start .. start + rdlen) of a message of len bytes (start + rdlen <=
 * len), with the names of its layout decompressed (dname_unpack(): pointers lead backwards into
 * msg) into out, room for UINT16_MAX bytes. Types without a layout are copied as they are.
 * Returns the RDATA's length; TERN_EMALF when a name is bad (err: its fault, as dname_unpack()
 * says) or the layout does not fit rdlen (err->fault DNAME_FAULT_NONE).
 */
int wire_rdata_unpack(const uint8_t *msg, size_t len, size_t start, uint16_t rdlen, uint16_t type,
                      uint8_t *out, struct dname_unpack_err *err) TERN_WUR;

#endif
