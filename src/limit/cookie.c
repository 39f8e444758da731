/*
 * cookie.c — DNS Cookies: SipHash-2-4 and RFC 9018 server cookies (see limit.h).
 *
 * Server Cookie (RFC 9018 §4): Version 1 | Reserved 0 0 0 | Timestamp (32 bits, Unix seconds)
 * | Hash (64 bits), Hash = SipHash-2-4 over Client Cookie | Version | Reserved | Timestamp |
 * Client IP (4 or 16 bytes) keyed by the 16-byte server secret, written as SipHash's reference
 * writes its result (little-endian). Servers sharing a secret (a fleet, or tern beside Knot,
 * BIND or PowerDNS) accept each other's cookies.
 *
 * SipHash-2-4 is libsodium's crypto_shorthash_siphash24 (allocation-free, a few dozen ns for a
 * cookie's 20 or 32 bytes); the unit test checks it against SipHash's and RFC 9018's vectors.
 */
#include <sodium.h>
#include <string.h>

#include "limit_int.h"
#include "tern/common/err.h"
#include "tern/common/rcu.h"

/* RFC 9018 §4.3: a cookie whose timestamp is more than an hour old, or more than five minutes
 * ahead of our clock, is not ours to accept. */
#define COOKIE_PAST_S   3600u
#define COOKIE_FUTURE_S 300u

static inline uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

uint64_t limit_siphash24(const uint8_t key[16], const void *data, size_t n)
{
    uint8_t out[crypto_shorthash_siphash24_BYTES];
    (void)crypto_shorthash_siphash24(out, data, n, key);
    return le64(out);
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
    /* libsodium writes the 64-bit result little-endian, as SipHash's reference does */
    (void)crypto_shorthash_siphash24(out, msg, 16 + alen, secret);
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
