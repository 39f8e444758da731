/*
 * asn_table.h — the IP → ASN range table: a compiled file, mapped read-only, and its lookups.
 *
 * Owns: once opened, one compiled table file's read-only MAP_SHARED mapping (the file is written
 * by the offline compiler, tern/geo/asn_compile.h). Nothing is copied onto the heap except the
 * small handle.
 *
 * Lifecycle: asn_table_open() on the loader thread (validates everything once: sizes, order,
 * checksum) → the handle is published with the rest of a snapshot and is immutable from then on →
 * after the RCU grace period asn_table_close().
 * Threading: any number of workers may call the lookups concurrently; they never allocate, lock
 * or make a syscall (page faults on the mapping aside). They use AVX2 when the CPU has it (chosen
 * at open; TERN_ASN_TABLE_SCALAR=1 in the environment forces the portable code, for tests and
 * benchmarks).
 *
 * Prefixes (for EDNS Client Subnet scopes): the table entries are maximal — adjacent entries with
 * the same ASN are merged — so the *_prefix() lookups report the exact largest aligned block
 * around the address that one entry covers (the /64 edges the v6 layout splits an entry at, see
 * below, do not shorten it).
 *
 * File layout (all integers little-endian; offsets are from the file start; the arrays are used
 * in place, so the loader only supports little-endian hosts):
 *   header, 96 bytes:
 *     0  char[8] magic "TERNASN1"     8 u32 version (3)       12 u32 flags (bit 0: source)
 *    16  u32 v4_count                20 u32 v6_count (main)   24 u32 name_count   28 u32 exc_count
 *    32  u64 v4_off                  40 u64 v6_off            48 u64 names_off
 *    56  u64 strings_off             64 u64 strings_len       72 u64 payload_len
 *    80  u32 crc32 (IEEE, of the payload = bytes [96, file end))
 *    84  u32 exc_sub_count           88 u64 exc_off
 *   Search trees (one per family, a static B+ tree over a sorted array of entries): the entries
 *   are packed into leaves that hold their keys AND their ASNs, so the leaf that answers a lookup
 *   is one memory access. Above the leaves, internal level 1 holds the first key of every leaf,
 *   level l+1 the first key of every node of level l, until a level is one node (the root); a
 *   node is 128 bytes (two cache lines). A section is the leaves, then levels 1, 2, ... (root
 *   last), each starting 128-aligned, the last leaf and the last node of a level padded with
 *   all-ones keys (ASN 0). Keys are stored with their top bit flipped (x ^ 0x80..0), so that
 *   signed SIMD compares order them as unsigned. Leaf, level and pad sizes follow from the entry
 *   count alone; the loader recomputes them and checks every key.
 *   v4 section (128-aligned, at v4_off): entry i = (start, asn) covers [start[i], start[i+1]) —
 *                the last one runs to 255.255.255.255; starts strictly ascending, start[0] == 0.
 *                Leaf: 128 bytes, u32 key[16] then u32 asn[16]. Internal node: u32 key[32].
 *   v6 section (128-aligned, at v6_off): main entries keyed by the top 64 bits of the address
 *                ("hi"; strictly ascending, hi[0] == 0). Entry i covers the /64s [hi[i], hi[i+1])
 *                with one ASN, unless it is an exception: then it covers the single /64 hi[i]
 *                (the next entry is hi[i] + 1, or hi[i] is the last /64) and its asn field is
 *                the index of that /64 in the exception list. Leaf: 64 bytes, u64 key[5],
 *                u32 asn[5], u32 exception bits (bit i: entry i of the leaf is an exception).
 *                Internal node: u64 key[16].
 *   exceptions (8-aligned, at exc_off): the /64s holding a boundary below their first address or
 *                more than one boundary: u32 v6 boundary count (for asn_table_counts()), u32 0,
 *                u64 hi[exc_count] (strictly ascending), u32 first[exc_count + 1] (8-aligned
 *                end), u64 lo[exc_sub_count], u32 asn[exc_sub_count]. /64 hi[e] resolves by the
 *                last lo <= the address's low 64 bits among lo[first[e] .. first[e+1]) (at least
 *                two, strictly ascending, the first is 0). ip-location-db/asn has 133 such /64s
 *                (in 178k); the v6 section has an entry for each (exception bit set, asn field
 *                e) and, unless a boundary starts the next /64, one for the /64 after it.
 *   names (4-aligned): name_count records of 12 bytes sorted by asn:
 *                { u32 asn, u32 str_off, u16 country_len, u16 name_len }
 *   strings:     country bytes then name bytes at strings_off + str_off, not NUL-terminated.
 *   source record (flags bit 0; written when the table was compiled from one MaxMind DB, so that
 *                a cache can tell whether it still matches its source): the last 64 bytes of the
 *                file, after every section, covered by the checksum:
 *                { u64 size, u64 hash (tern_hash64() of the source's bytes, seed
 *                ASN_TABLE_SOURCE_SEED), u64 st_dev, u64 st_ino, i64 mtime s, u32 mtime ns,
 *                u32 compiler revision, i64 ctime s, u32 ctime ns, u32 0 }. Other flag bits are
 *                refused. A reader of version 3 that predates the flag ignores the record.
 */
#ifndef TERN_GEO_ASN_TABLE_H
#define TERN_GEO_ASN_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"

#define ASN_TABLE_MAGIC       "TERNASN1"
#define ASN_TABLE_VERSION     3u /* 1: plain sorted arrays; 2: B+ tree, ASNs apart, 16-byte names */
#define ASN_TABLE_SOURCE_SEED 0x7465726e61736e31ull /* "ternasn1": tern_hash64()'s seed */

typedef struct asn_table asn_table_t;

/** The source record of a table compiled from one MaxMind DB (see the layout above). */
typedef struct asn_table_source {
    uint64_t size, hash; /* the source's size and tern_hash64() of its bytes */
    uint64_t dev, ino;   /* its st_dev and st_ino when it was compiled */
    int64_t mtime_sec, ctime_sec;
    uint32_t mtime_nsec, ctime_nsec;
    uint32_t compiler; /* the compiler revision that wrote the table (asn_compile.h) */
} asn_table_source_t;

/**
 * Map and validate a compiled table: magic, version, section bounds against the file size,
 * ordering of the starts, name records, flags, the source record's place, and the payload
 * checksum. Returns a handle, or NULL with a message in err (e.g. "x.asn: truncated ...", "bad
 * magic", "unsupported version 2", "checksum mismatch"). err may be NULL.
 */
asn_table_t *asn_table_open(const char *path, char *err, size_t errlen) TERN_WUR;

/**
 * The same for a table already written to fd (a regular file or a memfd; the caller keeps and
 * closes fd, the mapping outlives it): for tables compiled in memory (tern/geo/latency_map.h).
 * name labels messages.
 */
asn_table_t *asn_table_open_fd(int fd, const char *name, char *err, size_t errlen) TERN_WUR;

/** Unmap and free. NULL is a no-op. */
void asn_table_close(asn_table_t *t);

/** ASN for an IPv4 address in host byte order, 0 when none. */
uint32_t asn_table_lookup_v4(const asn_table_t *t, uint32_t addr_host_order);

/** ASN for an IPv6 address (16 bytes, network order), 0 when none. */
uint32_t asn_table_lookup_v6(const asn_table_t *t, const uint8_t addr[16]);

/** As asn_table_lookup_v4(), and *prefix (0..32) = length of the largest aligned prefix containing
 * the address whose every address maps to the same table entry (so the same ASN): the ECS scope an
 * answer that depended on this lookup may claim. */
uint32_t asn_table_lookup_v4_prefix(const asn_table_t *t, uint32_t addr_host_order,
                                    uint8_t *prefix);

/** Same for IPv6 (0..128). */
uint32_t asn_table_lookup_v6_prefix(const asn_table_t *t, const uint8_t addr[16], uint8_t *prefix);

/**
 * Country code and name of an ASN, pointing into the mapping (valid until asn_table_close();
 * not NUL-terminated; lengths may be 0). Any out-pointer may be NULL.
 * Returns 0, or TERN_ENOENT when the ASN has no record.
 */
int asn_table_info(const asn_table_t *t, uint32_t asn, const char **country, size_t *country_len,
                   const char **name, size_t *name_len) TERN_WUR;

/** Entry counts of the v4 and v6 sections (for ctl/stats). Either pointer may be NULL. */
void asn_table_counts(const asn_table_t *t, size_t *v4, size_t *v6, size_t *names);

/**
 * The source record of t into *out: 0, or TERN_ENOENT when the table has none (compiled from
 * text inputs, or from several files).
 */
int asn_table_source(const asn_table_t *t, asn_table_source_t *out) TERN_WUR;

#endif
