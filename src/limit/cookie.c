/*
 * cookie.c — DNS Cookies: SipHash-2-4 and RFC 9018 server cookies (see limit.h).
 *
 * Server Cookie (RFC 9018 §4): Version 1 | Reserved 0 0 0 | Timestamp (32 bits, Unix seconds)
 * | Hash (64 bits), Hash = SipHash-2-4 over Client Cookie | Version | Reserved | Timestamp |
 * Client IP (4 or 16 bytes) keyed by the 16-byte server secret, written as SipHash's reference
 * writes its result (little-endian). Servers sharing a secret (a fleet, or tern beside Knot,
 * BIND or PowerDNS) accept each other's cookies.
 *
 * SipHash-2-4 is written from its specification (Aumasson and Bernstein, 2012): 2 compression
 * rounds per 8-byte word, 4 finalisation rounds. It is small, allocation-free and needs no
 * library; its test vectors are in the unit test.
 */
#include <string.h>

#include "limit_int.h"
#include "tern/common/err.h"
#include "tern/common/rcu.h"

/* RFC 9018 §4.3: a cookie whose timestamp is more than an hour old, or more than five minutes
 * ahead of our clock, is not ours to accept. */
#define COOKIE_PAST_S   3600u
#define COOKIE_FUTURE_S 300u

static inline uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static inline uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = rotl(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = rotl(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = rotl(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = rotl(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = rotl(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = rotl(v2, 32);                                                                         \
    } while (0)

uint64_t limit_siphash24(const uint8_t key[16], const void *data, size_t n)
{
    const uint8_t *in = data;
    uint64_t k0 = le64(key), k1 = le64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ull ^ k0, v1 = 0x646f72616e646f6dull ^ k1;
    uint64_t v2 = 0x6c7967656e657261ull ^ k0, v3 = 0x7465646279746573ull ^ k1;
    size_t whole = n & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = le64(in + i);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    /* the last word: the remaining bytes, little-endian, and the length in the top byte */
    uint64_t b = (uint64_t)n << 56;
    for (size_t i = 0; i < (n & 7); i++)
        b |= (uint64_t)in[whole + i] << (8 * i);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* The 8-byte hash of a server cookie with header hdr (version, reserved, timestamp). */
static void cookie_hash(const uint8_t secret[16], const uint8_t *cc, const uint8_t hdr[8],
                        const limit_client_t *c, uint8_t out[8])
{
    uint8_t msg[8 + 8 + 16];
    size_t alen = c->family == 6 ? 16 : 4;
    memcpy(msg, cc, 8);
    memcpy(msg + 8, hdr, 8);
    memcpy(msg + 16, c->addr, alen);
    uint64_t h = limit_siphash24(secret, msg, 16 + alen);
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(h >> (8 * i));
}

static void header(uint8_t hdr[8], uint32_t ts)
{
    hdr[0] = 1; /* version */
    hdr[1] = hdr[2] = hdr[3] = 0;
    hdr[4] = (uint8_t)(ts >> 24);
    hdr[5] = (uint8_t)(ts >> 16);
    hdr[6] = (uint8_t)(ts >> 8);
    hdr[7] = (uint8_t)ts;
}

void limit_cookie_make(const limit_t *l, const uint8_t *cc, const limit_client_t *c, uint32_t now,
                       uint8_t out[LIMIT_SERVER_COOKIE_LEN])
{
    const secrets_t *s = tern_rcu_deref(l->sh->secrets);
    header(out, now);
    if (s)
        cookie_hash(s->cur, cc, out, c, out + 8);
    else
        memset(out + 8, 0, 8); /* no secret yet (cannot happen once cookies are on) */
}

bool limit_cookie_valid(const limit_t *l, const uint8_t *cc, const uint8_t *server, size_t len,
                        const limit_client_t *c, uint32_t now)
{
    const secrets_t *s = tern_rcu_deref(l->sh->secrets);
    if (!s || len != LIMIT_SERVER_COOKIE_LEN || server[0] != 1 || server[1] || server[2] ||
        server[3] || c->family == 0)
        return false;
    uint32_t ts = (uint32_t)server[4] << 24 | (uint32_t)server[5] << 16 | (uint32_t)server[6] << 8 |
                  server[7];
    /* serial-number arithmetic (RFC 1982), so the 2106 wrap is no cliff */
    int32_t age = (int32_t)(now - ts);
    if (age > (int32_t)COOKIE_PAST_S || age < -(int32_t)COOKIE_FUTURE_S)
        return false;
    uint8_t h[8];
    cookie_hash(s->cur, cc, server, c, h);
    if (memcmp(h, server + 8, 8) == 0)
        return true;
    if (!s->has_prev)
        return false;
    cookie_hash(s->prev, cc, server, c, h);
    return memcmp(h, server + 8, 8) == 0;
}

int limit_publish_secret(limit_shared_t *sh, const uint8_t secret[16])
{
    secrets_t *n = calloc(1, sizeof(*n));
    if (!n)
        return TERN_ENOMEM;
    pthread_mutex_lock(&sh->mu); /* the loader and the limit thread both rotate */
    const secrets_t *old = sh->secrets;
    memcpy(n->cur, secret, 16);
    if (old && memcmp(old->cur, secret, 16) != 0) {
        memcpy(n->prev, old->cur, 16);
        n->has_prev = true;
    } else if (old) {
        *n = *old;
    }
    secrets_t *prev = tern_rcu_xchg(&sh->secrets, n);
    pthread_mutex_unlock(&sh->mu);
    if (prev) {
        tern_rcu_synchronize(); /* no worker reads the old pair any more */
        free(prev);
    }
    return 0;
}
