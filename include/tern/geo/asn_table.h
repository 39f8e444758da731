/*
 * asn_table.h — the IP → ASN range table: an offline compiler and an mmapped, read-only lookup.
 *
 * Owns: one compiled file (built by asn_table_compile(), typically from `ternctl`) and, once
 * opened, its read-only MAP_SHARED mapping. Nothing is copied onto the heap except the small
 * handle.
 *
 * Lifecycle: compile (offline, may allocate freely) → asn_table_open() on the loader thread
 * (validates everything once: sizes, order, checksum) → the handle is published with the rest of
 * a snapshot and is immutable from then on → after the RCU grace period asn_table_close().
 * Threading: any number of workers may call the lookups concurrently; they never allocate, lock
 * or make a syscall (page faults on the mapping aside).
 *
 * Inputs (format detected per line; blank lines and lines starting with '#' are skipped):
 *   - iptoasn.com TSV:   start \t end \t asn \t country \t name   (country, name optional)
 *   - ip-location-db CSV: start,end,asn,name   — exactly 4 fields; a field may be "quoted",
 *     with "" as an escaped quote, so names can contain commas.
 * A line containing a tab is TSV, otherwise CSV. start/end are IPv4 or IPv6 addresses of the
 * same family, start <= end; asn is a decimal u32 (an "AS" prefix is accepted). ASN 0 means
 * "not routed" and is kept as a range (it can punch a hole into an enclosing range).
 *
 * Overlaps (deterministic, independent of input order): every address belongs to the covering
 * range with the greatest start; among covering ranges with the same start, the narrower (smaller
 * end) wins; among identical ranges, the one read last wins (later line, later file). Addresses
 * covered by no range map to 0. Adjacent ranges with the same ASN are merged.
 * Names: per ASN, the first non-empty country and the first non-empty name seen are kept.
 *
 * File layout (all integers little-endian; offsets are from the file start; the arrays are used
 * in place, so the loader only supports little-endian hosts):
 *   header, 96 bytes:
 *     0  char[8] magic "TERNASN1"     8 u32 version (2)       12 u32 flags (0)
 *    16  u32 v4_count                20 u32 v6_count (main)   24 u32 name_count   28 u32 exc_count
 *    32  u64 v4_off                  40 u64 v6_off            48 u64 names_off
 *    56  u64 strings_off             64 u64 strings_len       72 u64 payload_len
 *    80  u32 crc32 (IEEE, of the payload = bytes [96, file end))
 *    84  u32 exc_sub_count           88 u64 exc_off
 *   Search index (a static B+ tree over one sorted key array, "levels"): level 0 is the key array,
 *   padded with all-ones keys to whole 64-byte blocks (16 u32 or 8 u64 keys); level l+1 holds
 *   every block-th key of level l, padded the same way, until a level fits one block. Every level
 *   starts 64-aligned within its section, so a lookup reads one cache line per level. Level sizes
 *   and offsets follow from the entry count alone (the loader recomputes them and checks every
 *   index key against the level below).
 *   v4 section (64-aligned, at v4_off): the levels over u32 start[v4_count] (strictly ascending,
 *                start[0] == 0), then u32 asn[v4_count]; entry i covers [start[i], start[i+1]) —
 *                the last one runs to 255.255.255.255.
 *   v6 section (64-aligned, right after v4): the levels over u64 hi[v6_count] — the distinct top
 *                64 bits of the v6 starts (strictly ascending, hi[0] == 0) — then
 *                u32 asn[v6_count]: the ASN in effect from hi[i]:: (or, for an exception /64,
 *                from the end of that /64) up to hi[i+1]::. So a v6 entry costs 12 bytes.
 *   exceptions (8-aligned, at exc_off): the /64s holding a boundary below their first address or
 *                more than one boundary: u32 v6 boundary count (for asn_table_counts()), u32 0,
 *                u64 hi[exc_count] (strictly ascending), u32 first[exc_count + 1] (8-aligned
 *                end), u64 lo[exc_sub_count], u32 asn[exc_sub_count]. /64 hi[e] resolves by the
 *                last lo <= the address's low 64 bits among lo[first[e] .. first[e+1]) (strictly
 *                ascending, the first is 0). ip-location-db/asn has 133 such /64s (in 178k).
 *   names:       name_count records of 16 bytes sorted by asn:
 *                { u32 asn, u32 str_off, u16 country_len, u16 name_len, u32 0 }
 *   strings:     country bytes then name bytes at strings_off + str_off, not NUL-terminated.
 */
#ifndef TERN_GEO_ASN_TABLE_H
#define TERN_GEO_ASN_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"

#define ASN_TABLE_MAGIC   "TERNASN1"
#define ASN_TABLE_VERSION 2u /* 1: plain sorted arrays, 20-byte v6 entries */

typedef struct asn_table asn_table_t;

/** What a compile saw and produced (all counts). */
typedef struct asn_table_compile_stats {
    size_t lines;     /* data lines parsed (comments and blanks excluded) */
    size_t ranges_v4; /* input ranges per family */
    size_t ranges_v6;
    size_t overlaps;   /* input ranges that overlapped a range still open when they started */
    size_t entries_v4; /* entries written (after overlap resolution, gap filling and merging) */
    size_t entries_v6;
    size_t names; /* ASNs with a country or a name */
} asn_table_compile_stats_t;

/**
 * Compile n ip2asn inputs (paths, read in order) into one table file at out_path, written to
 * "<out_path>.tmp" then renamed, so a reader never sees half a file.
 * Returns 0; TERN_ESYNTAX with "file:line: message" in err for a bad line (invalid address,
 * mixed families, start > end, bad ASN, wrong field count); a negated errno for I/O (message
 * names the path); TERN_ENOMEM. err may be NULL. stats (may be NULL) is filled on success.
 */
int asn_table_compile_ex(const char *const *inputs, size_t n, const char *out_path,
                         asn_table_compile_stats_t *stats, char *err, size_t errlen) TERN_WUR;

/** asn_table_compile_ex() without stats. */
int asn_table_compile(const char *const *inputs, size_t n, const char *out_path, char *err,
                      size_t errlen) TERN_WUR;

/**
 * Map and validate a compiled table: magic, version, section bounds against the file size,
 * ordering of the starts, name records, and the payload checksum. Returns a handle, or NULL with
 * a message in err (e.g. "x.asn: truncated ...", "bad magic", "unsupported version 2",
 * "checksum mismatch"). err may be NULL.
 */
asn_table_t *asn_table_open(const char *path, char *err, size_t errlen) TERN_WUR;

/** Unmap and free. NULL is a no-op. */
void asn_table_close(asn_table_t *t);

/** ASN for an IPv4 address in host byte order, 0 when none. */
uint32_t asn_table_lookup_v4(const asn_table_t *t, uint32_t addr_host_order);

/** ASN for an IPv6 address (16 bytes, network order), 0 when none. */
uint32_t asn_table_lookup_v6(const asn_table_t *t, const uint8_t addr[16]);

/**
 * Country code and name of an ASN, pointing into the mapping (valid until asn_table_close();
 * not NUL-terminated; lengths may be 0). Any out-pointer may be NULL.
 * Returns 0, or TERN_ENOENT when the ASN has no record.
 */
int asn_table_info(const asn_table_t *t, uint32_t asn, const char **country, size_t *country_len,
                   const char **name, size_t *name_len) TERN_WUR;

/** Entry counts of the v4 and v6 sections (for ctl/stats). Either pointer may be NULL. */
void asn_table_counts(const asn_table_t *t, size_t *v4, size_t *v6, size_t *names);

#endif
