/*
 * asn_table.c — the mmapped IP → ASN table: open and validate a compiled file, and the lookups.
 * (The compiler that writes the file is asn_compile.c; the layout both follow is asn_format.h.)
 *
 * Lookups descend a static B+ tree (layout in the header): per level, the count of keys <= x in
 * one 128-byte node, with AVX2 compares when the CPU has them (chosen at open) or a branch-free
 * scalar loop otherwise. Nothing on the path branches on the data, so the CPU overlaps
 * consecutive lookups instead of flushing on mispredictions. The leaves hold the ASNs (and, for
 * v6, the exception bits) next to their keys: the common path reads one node per level and
 * nothing else. The levels above the leaves are a few hundred KB and stay cached; the leaf is
 * usually the one miss. Figures: bench/README.md.
 */
#include "tern/geo/asn_table.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asn_format.h"
#include "tern/common/err.h"
#include "tern/common/file.h"

static uint16_t get_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof(v)); /* little-endian host, checked in asn_format.h */
    return v;
}
static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* keys are stored biased (asn_format.h) */
static uint64_t get_key(const uint8_t *p, size_t ksize)
{
    return ksize == 4 ? get_u32(p) ^ BIAS32 : get_u64(p) ^ BIAS64;
}

/* Loader: the invariants the descent relies on — entry keys strictly ascending from 0, pad
 * lanes all-ones with ASN 0, every internal key the first key of its child, pads all-ones. */
static bool tree_check(const uint8_t *sec, const struct tree_layout *L, size_t ksize,
                       size_t per_leaf, size_t leaf_size, size_t asn_off, size_t fan)
{
    size_t n = L->keys[0];
    uint64_t prev = 0;
    for (size_t i = 0; i < L->leaves * per_leaf; i++) {
        const uint8_t *leaf = sec + leaf_size * (i / per_leaf);
        size_t lane = i % per_leaf;
        uint64_t k = get_key(leaf + ksize * lane, ksize);
        if (i < n ? (i == 0 ? k != 0 : k <= prev)
                  : (k != asn_format_key_max(ksize) || get_u32(leaf + asn_off + 4 * lane) != 0))
            return false;
        prev = k;
    }
    for (unsigned l = 1; l <= L->levels; l++) {
        const uint8_t *below = sec + L->off[l - 1], *k = sec + L->off[l];
        size_t stride = l == 1 ? leaf_size : NODE_SIZE, nodes = (L->keys[l] + fan - 1) / fan;
        for (size_t q = 0; q < nodes * fan; q++) {
            if (q < L->keys[l] ? memcmp(k + ksize * q, below + stride * q, ksize) != 0
                               : get_key(k + ksize * q, ksize) != asn_format_key_max(ksize))
                return false;
        }
    }
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * the handle and the descents
 */

struct tree {
    const uint8_t *level[MAX_LEVELS + 1]; /* level[0]: the leaves; level[levels]: the root */
    unsigned levels;
};

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* an entry: its leaf and its lane in the leaf */
struct slot {
    const uint8_t *leaf;
    size_t lane;
};

struct asn_table {
    const uint8_t *map;
    size_t size;
    uint32_t flags; /* ASN_F_* */
    struct tree v4, v6;
    /* The lookups, compiled once per descent (AVX2 or portable) and chosen at open. */
    uint32_t (*look4)(const struct asn_table *t, uint32_t addr);
    uint32_t (*look6)(const struct asn_table *t, const uint8_t *addr);
    uint32_t (*pfx4)(const struct asn_table *t, uint32_t addr, uint8_t *prefix);
    uint32_t (*pfx6)(const struct asn_table *t, const uint8_t *addr, uint8_t *prefix);
    /* The descents compare "key < x + 1", so the all-ones key is left to the lookups: it is the
     * last entry's. */
    struct slot last4, last6;
    const uint8_t *last4_key, *last6_key; /* where the last entries' keys are */
    const uint64_t *exc_hi, *exc_lo;
    const uint32_t *exc_first, *exc_asn;
    const uint8_t *names;
    const char *strings;
    size_t n4, n6, n6_bounds, ne, nsub, n_names, strings_len;
    int v6_whole; /* one v6 entry for the whole space */
};

#if defined(__SSE2__)
#include <emmintrin.h>
/* Keys (biased) below x1 (unbiased, >= 1) among n (a multiple of 16). With SSE2, x86-64's
 * baseline, 16 at a time: four compares, two order-preserving packs, one movemask; the keys are
 * sorted, so the set bits are a prefix and their count is the trailing zeros of the complement. */
ALWAYS_INLINE size_t count_lt32(const uint8_t *k, size_t n, uint32_t x1)
{
    const __m128i x = _mm_set1_epi32((int)(x1 ^ BIAS32));
    size_t c = 0;
    for (size_t i = 0; i < n; i += 16) {
        const __m128i *p = (const __m128i *)(const void *)(k + 4 * i); /* 64-aligned */
        __m128i a = _mm_packs_epi32(_mm_cmpgt_epi32(x, _mm_load_si128(p)),
                                    _mm_cmpgt_epi32(x, _mm_load_si128(p + 1)));
        __m128i b = _mm_packs_epi32(_mm_cmpgt_epi32(x, _mm_load_si128(p + 2)),
                                    _mm_cmpgt_epi32(x, _mm_load_si128(p + 3)));
        c += (size_t)__builtin_ctz(~(unsigned)_mm_movemask_epi8(_mm_packs_epi16(a, b)));
    }
    return c;
}
#else
/* Keys (biased) below x1 (unbiased, >= 1) among n: independent compares, no branch. */
ALWAYS_INLINE size_t count_lt32(const uint8_t *k, size_t n, uint32_t x1)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += (get_u32(k + 4 * i) ^ BIAS32) < x1;
    return c;
}
#endif

ALWAYS_INLINE size_t count_lt64(const uint8_t *k, size_t n, uint64_t x1)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += (get_u64(k + 8 * i) ^ BIAS64) < x1;
    return c;
}

/* The portable descent (SSE2 for v4 on x86-64, plain C otherwise). Every visited node's first key
 * is <= x (the root's is 0, every other one is the key that chose it), so a count is >= 1; the
 * all-ones pads are never < x + 1. */
ALWAYS_INLINE struct slot find4_scalar(const asn_table_t *t, uint32_t x)
{
    size_t j = 0;
    for (unsigned l = t->v4.levels; l > 0; l--)
        j = V4_FAN * j + count_lt32(t->v4.level[l] + NODE_SIZE * j, V4_FAN, x + 1) - 1;
    const uint8_t *leaf = t->v4.level[0] + V4_LEAF * j;
    return (struct slot){leaf, count_lt32(leaf, V4_PER_LEAF, x + 1) - 1};
}

ALWAYS_INLINE struct slot find6_scalar(const asn_table_t *t, uint64_t hi)
{
    size_t j = 0;
    for (unsigned l = t->v6.levels; l > 0; l--)
        j = V6_FAN * j + count_lt64(t->v6.level[l] + NODE_SIZE * j, V6_FAN, hi + 1) - 1;
    const uint8_t *leaf = t->v6.level[0] + V6_LEAF * j;
    return (struct slot){leaf, count_lt64(leaf + 8, V6_PER_LEAF - 1, hi + 1)}; /* key 0 <= hi */
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2 1
#include <immintrin.h>
#include <cpuid.h>
#define TARGET_AVX2 __attribute__((target("avx2,popcnt,lzcnt")))
#define FALLTHROUGH __attribute__((fallthrough))

/* Keys < x + 1 in one node: the compares take the keys straight from memory (biased keys, so a
 * signed compare is right, and "<" against x + 1 lets the key be the memory operand), two
 * saturating packs narrow the lane masks to one byte per key — in-lane packing scrambles the
 * order, which a popcount doesn't care about — and one movemask + popcount counts them. */
TARGET_AVX2 static inline unsigned v4_node_avx2(const uint8_t *nd, __m256i x1)
{
    const __m256i *p = (const __m256i *)(const void *)nd; /* 128-aligned in the map */
    __m256i a = _mm256_packs_epi32(_mm256_cmpgt_epi32(x1, _mm256_load_si256(p)),
                                   _mm256_cmpgt_epi32(x1, _mm256_load_si256(p + 1)));
    __m256i b = _mm256_packs_epi32(_mm256_cmpgt_epi32(x1, _mm256_load_si256(p + 2)),
                                   _mm256_cmpgt_epi32(x1, _mm256_load_si256(p + 3)));
    return (unsigned)__builtin_popcount((unsigned)_mm256_movemask_epi8(_mm256_packs_epi16(a, b)));
}

TARGET_AVX2 static inline unsigned v4_leaf_avx2(const uint8_t *lf, __m256i x1)
{
    const __m256i *p = (const __m256i *)(const void *)lf; /* two bits per key */
    __m256i a = _mm256_packs_epi32(_mm256_cmpgt_epi32(x1, _mm256_load_si256(p)),
                                   _mm256_cmpgt_epi32(x1, _mm256_load_si256(p + 1)));
    return (unsigned)__builtin_popcount((unsigned)_mm256_movemask_epi8(a)) / 2;
}

TARGET_AVX2 static inline unsigned v6_node_avx2(const uint8_t *nd, __m256i x1)
{
    const __m256i *p = (const __m256i *)(const void *)nd; /* two bytes per key */
    __m256i a = _mm256_packs_epi32(_mm256_cmpgt_epi64(x1, _mm256_load_si256(p)),
                                   _mm256_cmpgt_epi64(x1, _mm256_load_si256(p + 1)));
    __m256i b = _mm256_packs_epi32(_mm256_cmpgt_epi64(x1, _mm256_load_si256(p + 2)),
                                   _mm256_cmpgt_epi64(x1, _mm256_load_si256(p + 3)));
    return (unsigned)__builtin_popcount((unsigned)_mm256_movemask_epi8(_mm256_packs_epi16(a, b))) /
           2;
}

/* The levels unrolled: a jump into the chain at the tree's height (always the same target, so
 * predicted) rather than a loop, which measured ~15% slower. */
#define STEP4(l) j = V4_FAN * j + v4_node_avx2(t->v4.level[l] + NODE_SIZE * j, x1) - 1
#define STEP6(l) j = V6_FAN * j + v6_node_avx2(t->v6.level[l] + NODE_SIZE * j, x1) - 1

TARGET_AVX2 ALWAYS_INLINE struct slot find4_avx2(const asn_table_t *t, uint32_t x)
{
    const __m256i x1 = _mm256_set1_epi32((int)((x + 1) ^ BIAS32));
    size_t j = 0;
    switch (t->v4.levels) {
    case 8:
        STEP4(8);
        FALLTHROUGH;
    case 7:
        STEP4(7);
        FALLTHROUGH;
    case 6:
        STEP4(6);
        FALLTHROUGH;
    case 5:
        STEP4(5);
        FALLTHROUGH;
    case 4:
        STEP4(4);
        FALLTHROUGH;
    case 3:
        STEP4(3);
        FALLTHROUGH;
    case 2:
        STEP4(2);
        FALLTHROUGH;
    case 1:
        STEP4(1);
        FALLTHROUGH;
    default:
        break;
    }
    const uint8_t *leaf = t->v4.level[0] + V4_LEAF * j;
    return (struct slot){leaf, v4_leaf_avx2(leaf, x1) - 1};
}

TARGET_AVX2 ALWAYS_INLINE struct slot find6_avx2(const asn_table_t *t, uint64_t hi)
{
    const __m256i x1 = _mm256_set1_epi64x((long long)((hi + 1) ^ BIAS64));
    size_t j = 0;
    switch (t->v6.levels) {
    case 8:
        STEP6(8);
        FALLTHROUGH;
    case 7:
        STEP6(7);
        FALLTHROUGH;
    case 6:
        STEP6(6);
        FALLTHROUGH;
    case 5:
        STEP6(5);
        FALLTHROUGH;
    case 4:
        STEP6(4);
        FALLTHROUGH;
    case 3:
        STEP6(3);
        FALLTHROUGH;
    case 2:
        STEP6(2);
        FALLTHROUGH;
    case 1:
        STEP6(1);
        FALLTHROUGH;
    default:
        break;
    }
    const uint8_t *leaf = t->v6.level[0] + V6_LEAF * j;
    /* keys 1..4 (key 0 <= hi), one unaligned 256-bit load inside the leaf's line */
    __m256i k = _mm256_loadu_si256((const __m256i *)(const void *)(leaf + 8));
    unsigned m = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(x1, k)));
    return (struct slot){leaf, (size_t)__builtin_popcount(m)};
}
#endif

/* ---------------------------------------------------------------------------------------------
 * the lookups, written once over a descent and instantiated per descent (below), so that the
 * descent inlines and, with AVX2, the bit scan is lzcnt (bsr is microcoded on AMD, ~5 cycles)
 */

typedef struct slot (*find4_fn)(const asn_table_t *t, uint32_t x);
typedef struct slot (*find6_fn)(const asn_table_t *t, uint64_t hi);

static inline uint64_t load_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return __builtin_bswap64(v);
}

/* The sub-entry of exception e holding low 64 bits lo (exc_lo[first[e]] == 0 <= lo). */
static size_t exc_sub(const asn_table_t *t, uint32_t e, uint64_t lo)
{
    size_t f = t->exc_first[e], n = t->exc_first[e + 1] - f;
    const uint64_t *base = t->exc_lo + f;
    while (n > 1) {
        size_t half = n / 2;
        base = base[half] <= lo ? base + half : base;
        n -= half;
    }
    return (size_t)(base - t->exc_lo);
}

static inline int hibit(uint64_t v) /* v != 0 */
{
    return 63 - __builtin_clzll(v);
}

/* Exception /64 e: the sub-entry's ASN and prefix. Only the low 64 bits matter: the sub-entry
 * lies inside the /64 and (being one of several) is never all of it. Out of line: it is rare, and
 * a call in the common path would cost it a stack frame. */
__attribute__((noinline, cold)) static uint32_t exc_prefix(const asn_table_t *t, uint32_t e,
                                                           uint64_t lo, uint8_t *prefix)
{
    size_t k = exc_sub(t, e, lo);
    uint64_t start = t->exc_lo[k];
    uint64_t a = start ? lo ^ (start - 1) : UINT64_MAX;
    uint64_t b = k + 1 < t->exc_first[e + 1] ? lo ^ t->exc_lo[k + 1] : UINT64_MAX;
    *prefix = (uint8_t)(128 - hibit(a < b ? a : b));
    return t->exc_asn[k];
}

ALWAYS_INLINE uint32_t look4(const asn_table_t *t, find4_fn find, uint32_t addr)
{
    struct slot s = likely(addr != UINT32_MAX) ? find(t, addr) : t->last4;
    return get_u32(s.leaf + V4_LEAF_ASN + 4 * s.lane);
}

ALWAYS_INLINE uint32_t look6(const asn_table_t *t, find6_fn find, const uint8_t *addr)
{
    uint64_t hi = load_be64(addr);
    struct slot s = likely(hi != UINT64_MAX) ? find(t, hi) : t->last6;
    uint32_t v = get_u32(s.leaf + V6_LEAF_ASN + 4 * s.lane);
    /* the exception bits share the leaf's line: the check costs no miss */
    if (unlikely(get_u32(s.leaf + V6_LEAF_EXC) >> s.lane & 1))
        v = t->exc_asn[exc_sub(t, v, load_be64(addr + 8))];
    return v;
}

/* ECS prefixes. The largest aligned block of 2^k addresses around x inside one entry
 * [start, next) is the largest that holds neither start - 1 nor next; a block around x holds y
 * iff x and y agree above bit k - 1, so k <= hibit(x ^ y) for both, and since hibit is monotonic,
 * k = hibit(min(x ^ (start - 1), x ^ next)) — one bit scan. A side the entry is open to (start 0,
 * no next entry) gets a bit above any bound instead. Masks and conditional moves, no branch:
 * fewer instructions and no mispredictions keep more lookups in flight. */
ALWAYS_INLINE uint32_t pfx4(const asn_table_t *t, find4_fn find, uint32_t addr, uint8_t *prefix)
{
    struct slot s = likely(addr != UINT32_MAX) ? find(t, addr) : t->last4;
    const uint8_t *key = s.leaf + 4 * s.lane;
    /* next: the next lane's key, or for the last lane the next leaf's first — that leaf exists
     * unless this is the last entry, which is open upwards: then its own key is read (offset
     * masked to 0) and bit 32 marks "no bound". Not a branch: the last entry is no rarity (with
     * the real data it is 224/3, an eighth of uniform v4 addresses). */
    size_t last = key == t->last4_key;
    size_t nx = (4 + (s.lane + 1 == V4_PER_LEAF) * (V4_LEAF - V4_LEAF_ASN)) & (last - 1);
    uint64_t next = get_u32(key + nx) ^ BIAS32;
    uint64_t before = (uint64_t)(get_u32(key) ^ BIAS32) - 1;              /* start 0: all-ones */
    uint64_t a = addr ^ before, b = (addr ^ next) | (uint64_t)last << 32; /* b < 2^33 */
    *prefix = (uint8_t)(32 - hibit(a < b ? a : b));
    return get_u32(s.leaf + V4_LEAF_ASN + 4 * s.lane);
}

/* A main entry covers whole /64s, so only the top 64 bits matter: every block up to a /64 fits,
 * and the larger ones are blocks of /64s between its key and the next (exceptions: above). Where
 * the table splits a merged entry at a /64 edge (the entry after an exception /64; an exception's
 * first and last sub-entries) the answer is exact all the same: the real boundary next to such a
 * split lies inside a /64, so no block reaching across the split fits either way. */
ALWAYS_INLINE uint32_t pfx6(const asn_table_t *t, find6_fn find, const uint8_t *addr,
                            uint8_t *prefix)
{
    uint64_t hi = load_be64(addr), lo = load_be64(addr + 8);
    struct slot s = likely(hi != UINT64_MAX) ? find(t, hi) : t->last6;
    uint32_t v = get_u32(s.leaf + V6_LEAF_ASN + 4 * s.lane);
    if (unlikely(get_u32(s.leaf + V6_LEAF_EXC) >> s.lane & 1))
        return exc_prefix(t, v, lo, prefix);
    const uint8_t *key = s.leaf + 8 * s.lane;
    size_t last = key == t->last6_key; /* as for v4; bit 63 marks "no bound" */
    size_t nx = (8 + (s.lane + 1 == V6_PER_LEAF) * (V6_LEAF - V6_LEAF_ASN)) & (last - 1);
    uint64_t start = get_u64(key) ^ BIAS64, next = get_u64(key + nx) ^ BIAS64;
    uint64_t a = (hi ^ (start - 1)) | (uint64_t)(start == 0) << 63; /* start 0: open */
    uint64_t b = (hi ^ next) | (uint64_t)last << 63;
    /* both sides open (one entry for all of v6): the /0 that bit 63 can't say */
    *prefix = (uint8_t)(64 - hibit(a < b ? a : b) - t->v6_whole);
    return v;
}

#define LOOKUPS(isa, ATTR)                                                                         \
    ATTR static uint32_t look4_##isa(const asn_table_t *t, uint32_t addr)                          \
    {                                                                                              \
        return look4(t, find4_##isa, addr);                                                        \
    }                                                                                              \
    ATTR static uint32_t look6_##isa(const asn_table_t *t, const uint8_t *addr)                    \
    {                                                                                              \
        return look6(t, find6_##isa, addr);                                                        \
    }                                                                                              \
    ATTR static uint32_t pfx4_##isa(const asn_table_t *t, uint32_t addr, uint8_t *prefix)          \
    {                                                                                              \
        return pfx4(t, find4_##isa, addr, prefix);                                                 \
    }                                                                                              \
    ATTR static uint32_t pfx6_##isa(const asn_table_t *t, const uint8_t *addr, uint8_t *prefix)    \
    {                                                                                              \
        return pfx6(t, find6_##isa, addr, prefix);                                                 \
    }

LOOKUPS(scalar, )
#ifdef HAVE_AVX2
LOOKUPS(avx2, TARGET_AVX2)
#endif

static bool section_ok(uint64_t off, uint64_t len, size_t size, unsigned align)
{
    return off % align == 0 && off >= HDR_SIZE && off <= size && len <= size - off;
}

static struct slot slot_of(const struct tree *tr, size_t leaf_size, size_t per_leaf, size_t e)
{
    return (struct slot){tr->level[0] + leaf_size * (e / per_leaf), e % per_leaf};
}

static uint64_t v6_key(const asn_table_t *t, size_t e)
{
    struct slot s = slot_of(&t->v6, V6_LEAF, V6_PER_LEAF, e);
    return get_u64(s.leaf + 8 * s.lane) ^ BIAS64;
}

/* Open-time check of the v6 exception bits: an exception entry's asn field is its index (in
 * order, each once), its key is that /64, and the next entry starts at the next /64 (or it is
 * the last entry and the last /64) — so a lookup can trust a set bit. */
static bool v6_exc_check(const asn_table_t *t, size_t leaves)
{
    size_t seen = 0;
    for (size_t i = 0; i < leaves * V6_PER_LEAF; i++) {
        struct slot s = slot_of(&t->v6, V6_LEAF, V6_PER_LEAF, i);
        uint32_t bits = get_u32(s.leaf + V6_LEAF_EXC);
        size_t real = t->n6 - i < V6_PER_LEAF ? t->n6 - i : V6_PER_LEAF; /* i < n6 at lane 0 */
        if (s.lane == 0 && bits >> real != 0)
            return false;
        if (!(bits >> s.lane & 1))
            continue;
        uint64_t k = get_u64(s.leaf + 8 * s.lane) ^ BIAS64;
        if (seen >= t->ne || get_u32(s.leaf + V6_LEAF_ASN + 4 * s.lane) != seen ||
            t->exc_hi[seen] != k || (i + 1 < t->n6 ? v6_key(t, i + 1) != k + 1 : k != UINT64_MAX))
            return false;
        seen++;
    }
    return seen == t->ne;
}

/* What a header says, once its sections are known to lie inside the file. */
struct header {
    uint32_t flags;
    size_t n4, n6, nn, ne, nsub;
    uint64_t v4_off, v6_off, exc_off, names_off, str_off, str_len;
    struct tree_layout L4, L6;
};

/* Map fd (a regular file of *size bytes, at least a header's worth; name labels messages)
 * read-only into *map. */
static int map_fd(int fd, const char *name, const uint8_t **map, size_t *size, char *err,
                  size_t errlen)
{
    if (*size < HDR_SIZE) {
        tern_set_err(err, errlen, "%s: truncated: %zu bytes, the header alone is %d", name, *size,
                     HDR_SIZE);
        return TERN_EINVAL;
    }
    void *m = mmap(NULL, *size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        int rc = -errno;
        tern_set_err(err, errlen, "%s: mmap: %s", name, strerror(-rc));
        return rc;
    }
    *map = m;
    return 0;
}

/* Map path read-only into *map (*size bytes; at least a header's worth). */
static int map_file(const char *path, const uint8_t **map, size_t *size, char *err, size_t errlen)
{
    struct stat sb;
    int fd = tern_open_regular(path, 0, &sb, err, errlen); /* a FIFO must not block */
    if (fd < 0)
        return fd;
    *size = (size_t)sb.st_size;
    int rc = map_fd(fd, path, map, size, err, errlen);
    close(fd); /* the mapping stays valid without the descriptor */
    return rc;
}

/* Magic, version, payload length, every section inside the file, and the checksum. */
static int check_header(const uint8_t *m, size_t size, const char *path, struct header *h,
                        char *err, size_t errlen)
{
    if (memcmp(m + HDR_MAGIC, ASN_TABLE_MAGIC, 8) != 0) {
        tern_set_err(err, errlen, "%s: bad magic (not a compiled ASN table)", path);
        return TERN_EINVAL;
    }
    uint32_t version = get_u32(m + HDR_VERSION);
    if (version != ASN_TABLE_VERSION) {
        tern_set_err(err, errlen, "%s: unsupported version %u (expected %u; recompile the table)",
                     path, version, ASN_TABLE_VERSION);
        return TERN_EINVAL;
    }
    uint64_t payload = get_u64(m + HDR_PAYLOAD_LEN);
    if (payload != size - HDR_SIZE) {
        tern_set_err(err, errlen, "%s: truncated: header says %llu payload bytes, file has %zu",
                     path, (unsigned long long)payload, size - HDR_SIZE);
        return TERN_EINVAL;
    }
    /* the sections end where a source record starts */
    h->flags = get_u32(m + HDR_FLAGS);
    if (h->flags & ~ASN_F_KNOWN) {
        tern_set_err(err, errlen, "%s: unsupported flags 0x%x (written by a newer tern?)", path,
                     h->flags);
        return TERN_EINVAL;
    }
    size_t end = size;
    if (h->flags & ASN_F_SOURCE) {
        if (size - HDR_SIZE < SRC_SIZE || get_u32(m + size - SRC_SIZE + SRC_PAD) != 0) {
            tern_set_err(err, errlen,
                         "%s: corrupt header: the flags announce a source record that is not there",
                         path);
            return TERN_EINVAL;
        }
        end = size - SRC_SIZE;
    }
    h->n4 = get_u32(m + HDR_V4_COUNT);
    h->n6 = get_u32(m + HDR_V6_COUNT);
    h->nn = get_u32(m + HDR_NAME_COUNT);
    h->ne = get_u32(m + HDR_EXC_COUNT);
    h->nsub = get_u32(m + HDR_EXC_SUB_COUNT);
    h->v4_off = get_u64(m + HDR_V4_OFF);
    h->v6_off = get_u64(m + HDR_V6_OFF);
    h->exc_off = get_u64(m + HDR_EXC_OFF);
    h->names_off = get_u64(m + HDR_NAMES_OFF);
    h->str_off = get_u64(m + HDR_STRINGS_OFF);
    h->str_len = get_u64(m + HDR_STRINGS_LEN);
    if (h->n4 == 0 || h->n6 == 0 ||
        !asn_format_tree_layout(h->n4, V4_PER_LEAF, V4_LEAF, V4_FAN, &h->L4) ||
        !asn_format_tree_layout(h->n6, V6_PER_LEAF, V6_LEAF, V6_FAN, &h->L6) ||
        !section_ok(h->v4_off, h->L4.total, end, 128) ||
        !section_ok(h->v6_off, h->L6.total, end, 128) ||
        !section_ok(h->exc_off, asn_format_exc_size(h->ne, h->nsub), end, 8) ||
        !section_ok(h->names_off, (uint64_t)h->nn * NAME_REC, end, 4) ||
        !section_ok(h->str_off, h->str_len, end, 1)) {
        tern_set_err(err, errlen, "%s: corrupt header: a section lies outside the file", path);
        return TERN_EINVAL;
    }
    if (asn_format_crc32(m + HDR_SIZE, size - HDR_SIZE) != get_u32(m + HDR_CRC)) {
        tern_set_err(err, errlen, "%s: checksum mismatch", path);
        return TERN_EINVAL;
    }
    return 0;
}

/* The handle over a checked mapping: pointers into it, and the descent for this CPU. */
static void table_init(asn_table_t *t, const uint8_t *m, size_t size, const struct header *h)
{
    t->map = m;
    t->size = size;
    t->flags = h->flags;
    t->n4 = h->n4;
    t->n6 = h->n6;
    t->ne = h->ne;
    t->nsub = h->nsub;
    t->n_names = h->nn;
    t->v4.levels = h->L4.levels;
    t->v6.levels = h->L6.levels;
    for (unsigned l = 0; l <= h->L4.levels; l++)
        t->v4.level[l] = m + h->v4_off + h->L4.off[l];
    for (unsigned l = 0; l <= h->L6.levels; l++)
        t->v6.level[l] = m + h->v6_off + h->L6.off[l];
    t->last4 = slot_of(&t->v4, V4_LEAF, V4_PER_LEAF, h->n4 - 1);
    t->last6 = slot_of(&t->v6, V6_LEAF, V6_PER_LEAF, h->n6 - 1);
    t->last4_key = t->last4.leaf + 4 * t->last4.lane;
    t->last6_key = t->last6.leaf + 8 * t->last6.lane;
    t->v6_whole = h->n6 == 1;
    t->look4 = look4_scalar;
    t->look6 = look6_scalar;
    t->pfx4 = pfx4_scalar;
    t->pfx6 = pfx6_scalar;
#ifdef HAVE_AVX2
    /* TERN_ASN_TABLE_SCALAR=1 forces the portable descent (tests, benchmarks). */
    const char *scalar = getenv("TERN_ASN_TABLE_SCALAR");
    unsigned a, b, c, d;
    if (!(scalar && *scalar && strcmp(scalar, "0") != 0) && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("popcnt") && __get_cpuid(0x80000001, &a, &b, &c, &d) &&
        (c & bit_LZCNT)) {
        t->look4 = look4_avx2;
        t->look6 = look6_avx2;
        t->pfx4 = pfx4_avx2;
        t->pfx6 = pfx6_avx2;
    }
#endif
    const uint8_t *exc = m + h->exc_off;
    t->n6_bounds = get_u32(exc);
    t->exc_hi = (const uint64_t *)(const void *)(exc + EXC_HI_OFF);
    t->exc_first = (const uint32_t *)(const void *)(exc + asn_format_exc_first_off(h->ne));
    t->exc_lo = (const uint64_t *)(const void *)(exc + asn_format_exc_lo_off(h->ne));
    t->exc_asn = (const uint32_t *)(const void *)(t->exc_lo + h->nsub);
    t->names = m + h->names_off;
    t->strings = (const char *)(m + h->str_off);
    t->strings_len = h->str_len;
}

/* The checksum proves the file is what a compiler wrote, not that the compiler was ours: check
 * the invariants the search relies on, once, so a lookup never needs to. */
static bool table_check(const asn_table_t *t, const struct header *h)
{
    const uint8_t *m = t->map;
    bool ok = tree_check(m + h->v4_off, &h->L4, 4, V4_PER_LEAF, V4_LEAF, V4_LEAF_ASN, V4_FAN) &&
              tree_check(m + h->v6_off, &h->L6, 8, V6_PER_LEAF, V6_LEAF, V6_LEAF_ASN, V6_FAN) &&
              t->exc_first[0] == 0 && t->exc_first[h->ne] == h->nsub;
    for (size_t e = 0; ok && e < h->ne; e++) {
        uint32_t f = t->exc_first[e], l = t->exc_first[e + 1];
        ok = f + 1 < l && l <= h->nsub && t->exc_lo[f] == 0 &&
             (e == 0 || t->exc_hi[e - 1] < t->exc_hi[e]);
        for (uint32_t k = f + 1; ok && k < l; k++)
            ok = t->exc_lo[k - 1] < t->exc_lo[k];
    }
    ok = ok && v6_exc_check(t, h->L6.leaves);
    for (size_t i = 0; ok && i < h->nn; i++) {
        const uint8_t *rec = t->names + NAME_REC * i;
        uint64_t end = (uint64_t)get_u32(rec + 4) + get_u16(rec + 8) + get_u16(rec + 10);
        ok = end <= h->str_len && (i == 0 || get_u32(rec - NAME_REC) < get_u32(rec));
    }
    return ok;
}

/* Validate the mapping m of size bytes (name labels messages) into a handle; unmaps m on
 * failure. */
static asn_table_t *open_mapped(const uint8_t *m, size_t size, const char *name, char *err,
                                size_t errlen)
{
    struct header h;
    asn_table_t *t = NULL;
    if (check_header(m, size, name, &h, err, errlen) < 0)
        goto fail;
    if (!(t = calloc(1, sizeof(*t)))) {
        tern_set_err(err, errlen, "%s: out of memory", name);
        goto fail;
    }
    table_init(t, m, size, &h);
    if (!table_check(t, &h)) {
        tern_set_err(err, errlen,
                     "%s: corrupt table: keys, exceptions or names out of order or out of bounds",
                     name);
        goto fail;
    }
    return t;
fail:
    free(t);
    munmap((void *)(uintptr_t)m, size);
    return NULL;
}

asn_table_t *asn_table_open(const char *path, char *err, size_t errlen)
{
    const uint8_t *m = NULL;
    size_t size = 0;
    if (map_file(path, &m, &size, err, errlen) < 0)
        return NULL;
    return open_mapped(m, size, path, err, errlen);
}

asn_table_t *asn_table_open_fd(int fd, const char *name, char *err, size_t errlen)
{
    const uint8_t *m = NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        tern_set_err(err, errlen, "%s: fstat: %s", name, strerror(errno));
        return NULL;
    }
    size_t size = (size_t)sb.st_size;
    if (map_fd(fd, name, &m, &size, err, errlen) < 0)
        return NULL;
    return open_mapped(m, size, name, err, errlen);
}

void asn_table_close(asn_table_t *t)
{
    if (!t)
        return;
    munmap((void *)(uintptr_t)t->map, t->size);
    free(t);
}

uint32_t asn_table_lookup_v4(const asn_table_t *t, uint32_t addr)
{
    return t->look4(t, addr);
}

uint32_t asn_table_lookup_v6(const asn_table_t *t, const uint8_t addr[16])
{
    return t->look6(t, addr);
}

uint32_t asn_table_lookup_v4_prefix(const asn_table_t *t, uint32_t addr, uint8_t *prefix)
{
    return t->pfx4(t, addr, prefix);
}

uint32_t asn_table_lookup_v6_prefix(const asn_table_t *t, const uint8_t addr[16], uint8_t *prefix)
{
    return t->pfx6(t, addr, prefix);
}

int asn_table_info(const asn_table_t *t, uint32_t asn, const char **country, size_t *country_len,
                   const char **name, size_t *name_len)
{
    size_t lo = 0, hi = t->n_names;
    /* dense tables (a latency map's entries are numbered 1..n, tern/geo/latency_map.h): record
     * asn - 1 is the one, found without the search's cache misses */
    if (asn >= 1 && asn <= hi && get_u32(t->names + NAME_REC * (asn - 1)) == asn)
        lo = asn - 1, hi = asn;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t a = get_u32(t->names + NAME_REC * mid);
        if (a < asn) {
            lo = mid + 1;
        } else if (a > asn) {
            hi = mid;
        } else {
            const uint8_t *rec = t->names + NAME_REC * mid;
            const char *s = t->strings + get_u32(rec + 4);
            size_t cl = get_u16(rec + 8), nl = get_u16(rec + 10);
            if (country)
                *country = s;
            if (country_len)
                *country_len = cl;
            if (name)
                *name = s + cl;
            if (name_len)
                *name_len = nl;
            return 0;
        }
    }
    return TERN_ENOENT;
}

void asn_table_counts(const asn_table_t *t, size_t *v4, size_t *v6, size_t *names)
{
    if (v4)
        *v4 = t->n4;
    if (v6)
        *v6 = t->n6_bounds;
    if (names)
        *names = t->n_names;
}

int asn_table_source(const asn_table_t *t, asn_table_source_t *out)
{
    if (!(t->flags & ASN_F_SOURCE))
        return TERN_ENOENT;
    const uint8_t *r = t->map + t->size - SRC_SIZE; /* room checked at open */
    out->size = get_u64(r + SRC_FILE_SIZE);
    out->hash = get_u64(r + SRC_HASH);
    out->dev = get_u64(r + SRC_DEV);
    out->ino = get_u64(r + SRC_INO);
    out->mtime_sec = (int64_t)get_u64(r + SRC_MTIME);
    out->mtime_nsec = get_u32(r + SRC_MTIME_NS);
    out->compiler = get_u32(r + SRC_COMPILER);
    out->ctime_sec = (int64_t)get_u64(r + SRC_CTIME);
    out->ctime_nsec = get_u32(r + SRC_CTIME_NS);
    return 0;
}
