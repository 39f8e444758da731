/*
 * asn_format.h — private to src/geo: the compiled ASN table's file layout as constants and the
 * few computations its writer (asn_compile.c) and its reader (asn_table.c) must agree on, so
 * they exist once. The layout itself is documented in tern/geo/asn_table.h.
 *
 * Owns nothing; header-only pure functions and constants, safe from any thread. Section sizes
 * and offsets follow from the entry counts alone: the writer lays a table out with them and the
 * reader recomputes them to check a file, so a change here is a change of the file format (bump
 * ASN_TABLE_VERSION).
 */
#ifndef TERN_GEO_ASN_FORMAT_H
#define TERN_GEO_ASN_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "asn_table uses the file's little-endian arrays in place; big-endian hosts need a port"
#endif

/* Header fields: byte offsets (types in asn_table.h). */
enum {
    HDR_MAGIC = 0,
    HDR_VERSION = 8,
    HDR_FLAGS = 12,
    HDR_V4_COUNT = 16,
    HDR_V6_COUNT = 20,
    HDR_NAME_COUNT = 24,
    HDR_EXC_COUNT = 28,
    HDR_V4_OFF = 32,
    HDR_V6_OFF = 40,
    HDR_NAMES_OFF = 48,
    HDR_STRINGS_OFF = 56,
    HDR_STRINGS_LEN = 64,
    HDR_PAYLOAD_LEN = 72,
    HDR_CRC = 80,
    HDR_EXC_SUB_COUNT = 84,
    HDR_EXC_OFF = 88,
    HDR_SIZE = 96,
};

/* Header flags. ASN_F_SOURCE: the payload ends with a source record (below). */
#define ASN_F_SOURCE 1u
#define ASN_F_KNOWN  ASN_F_SOURCE

/* The source record: the last SRC_SIZE bytes of a table compiled from one MaxMind DB, after
 * every section (8-aligned). Field offsets: */
enum {
    SRC_FILE_SIZE = 0, /* u64 the source's size in bytes */
    SRC_HASH = 8,      /* u64 tern_hash64() of its bytes */
    SRC_DEV = 16,      /* u64 st_dev, u64 st_ino, as when it was compiled (0: unknown) */
    SRC_INO = 24,
    SRC_MTIME = 32, /* i64 seconds, u32 nanoseconds */
    SRC_MTIME_NS = 40,
    SRC_COMPILER = 44, /* u32 the compiler revision that wrote the table */
    SRC_CTIME = 48,    /* i64 seconds, u32 nanoseconds, u32 0 */
    SRC_CTIME_NS = 56,
    SRC_PAD = 60,
    SRC_SIZE = 64,
};

#define NAME_REC 12u /* { u32 asn, u32 str_off, u16 country_len, u16 name_len } */

/*
 * Search trees (layout in asn_table.h).
 *
 * Why these sizes: a node is two adjacent cache lines, fetched as a pair, compared with four
 * 256-bit loads; 32 u32 or 16 u64 keys per node keep the real tables at 3 (v4, 467k entries)
 * and 4 (v6, 178k) internal levels, and the few hundred KB of level 1 in L2. The v4 leaf
 * (16 entries, 128 bytes) halves level 1 against a one-line leaf; the v6 leaf stays one line
 * (5 keys of 8 bytes, their ASNs and the exception bits fill 64 bytes) so a leaf miss is one
 * line. Wider nodes or more levels measured slower (bench/README.md).
 */
#define NODE_SIZE   128u
#define V4_FAN      32u /* u32 keys per internal v4 node */
#define V6_FAN      16u /* u64 keys per internal v6 node */
#define V4_PER_LEAF 16u /* v4 leaf: u32 key[16], u32 asn[16] */
#define V4_LEAF     128u
#define V4_LEAF_ASN 64u
#define V6_PER_LEAF 5u /* v6 leaf: u64 key[5], u32 asn[5], u32 exception bits */
#define V6_LEAF     64u
#define V6_LEAF_ASN 40u
#define V6_LEAF_EXC 60u
#define MAX_LEVELS  8u /* internal levels: 5 * 16^8 > 2^32 v6 entries, 16 * 32^6 > 2^32 v4 ones */
#define BIAS32      0x80000000u /* keys are stored biased (top bit flipped): signed compares */
#define BIAS64      0x8000000000000000ull /* then order them as unsigned */

struct tree_layout {
    size_t leaves;               /* >= 1 */
    unsigned levels;             /* internal levels above the leaves (0: a single leaf) */
    size_t keys[MAX_LEVELS + 1]; /* real keys of level l = leaves or nodes of level l - 1 */
    size_t off[MAX_LEVELS + 1];  /* offset of level l in the section (level 0: the leaves) */
    size_t total;                /* section bytes, a multiple of 128 */
};

static inline size_t asn_format_align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static inline size_t asn_format_align128(size_t n)
{
    return (n + 127) & ~(size_t)127;
}

/* The layout of a tree of n entries; false when it needs more than MAX_LEVELS levels (impossible
 * for a u32 count). */
static inline bool asn_format_tree_layout(size_t n, size_t per_leaf, size_t leaf_size, size_t fan,
                                          struct tree_layout *L)
{
    size_t cnt = n ? (n + per_leaf - 1) / per_leaf : 1;
    size_t off = asn_format_align128(cnt * leaf_size);
    L->leaves = cnt;
    L->levels = 0;
    L->off[0] = 0;
    L->keys[0] = n;
    while (cnt > 1) {
        if (L->levels == MAX_LEVELS)
            return false;
        L->levels++;
        L->keys[L->levels] = cnt;
        L->off[L->levels] = off;
        cnt = (cnt + fan - 1) / fan;
        off += cnt * NODE_SIZE;
    }
    L->total = off;
    return true;
}

/* The largest key of a size (the pad key): all-ones. */
static inline uint64_t asn_format_key_max(size_t ksize)
{
    return ksize == 4 ? UINT32_MAX : UINT64_MAX;
}

/* The exception section: u32 v6 boundaries, u32 0, u64 hi[ne], u32 first[ne + 1], u64 lo[nsub],
 * u32 asn[nsub]. */
#define EXC_HI_OFF 8u

static inline size_t asn_format_exc_first_off(size_t ne)
{
    return EXC_HI_OFF + 8 * ne;
}

static inline size_t asn_format_exc_lo_off(size_t ne)
{
    return asn_format_align8(asn_format_exc_first_off(ne) + 4 * (ne + 1));
}

static inline size_t asn_format_exc_size(size_t ne, size_t nsub)
{
    return asn_format_exc_lo_off(ne) + 12 * nsub;
}

/* CRC-32 (IEEE) of the payload. A 1 KiB table rebuilt per call: open and compile are rare, and no
 * global state means no init race between a loader thread and ternctl-style callers. */
static inline uint32_t asn_format_crc32(const uint8_t *p, size_t n)
{
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

#endif
