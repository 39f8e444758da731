/*
 * hash.h — the one general-purpose hash of tern, and the mixers built on it.
 *
 * tern_hash64() hashes any byte string (zone keys, addresses, Redis data digests); tern_mix32()
 * and tern_mix64() are bijective finalisers for tables indexed by the low bits. The suffix hash
 * of domain names (wire/dname.h) is a separate, chained definition — hash(label.rest) from
 * hash(rest) — built from the same 32-bit mixer, because it must be computable label by label.
 *
 * Header-only, pure functions, no state: safe on the query path and from any thread.
 * Not a cryptographic or keyed hash: never use it where an attacker chooses inputs to collide
 * a table that has no bound on probe length (every tern table is sized by the loader).
 */
#ifndef TERN_COMMON_HASH_H
#define TERN_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* murmur3's 32-bit finaliser: a bijection that spreads every input bit over the low bits. */
static inline uint32_t tern_mix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

/* splitmix64's finaliser: every input bit reaches every output bit. */
static inline uint64_t tern_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/** A fast 64-bit hash of n bytes at p, 8 at a time; seed separates uses (and chains hashes). */
static inline uint64_t tern_hash64(const void *p, size_t n, uint64_t seed)
{
    const uint8_t *s = p;
    uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = tern_mix64(h ^ w) + 0x9e3779b97f4a7c15ull;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    if (n)
        memcpy(&w, s, n);
    return tern_mix64(h ^ w ^ ((uint64_t)n << 56));
}

/** tern_hash64() of a NUL-terminated string, for string-keyed tables. */
static inline uint64_t tern_hash_str(const char *s)
{
    return tern_hash64(s, strlen(s), 0x7a6f6e65ull);
}

#endif
