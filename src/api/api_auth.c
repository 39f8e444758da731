/*
 * api_auth.c — the API's keys: constant-time lookup of X-API-Key, and a key's zones and methods.
 */
#include <sodium.h>
#include <string.h>
#include <strings.h>

#include "tern/api/api_auth.h"

/* BLAKE2b-256 of s: secrets of any length compared as equal-length digests, so the comparison's
 * time does not depend on the length of either. */
static void digest(const char *s, unsigned char out[crypto_generichash_BYTES])
{
    crypto_generichash(out, crypto_generichash_BYTES, (const unsigned char *)s, strlen(s), NULL, 0);
}

const config_api_key_t *api_auth_find(const config_api_key_t *keys, size_t n, const char *presented)
{
    if (!presented || !presented[0])
        return NULL;
    unsigned char want[crypto_generichash_BYTES], have[crypto_generichash_BYTES];
    digest(presented, have);
    const config_api_key_t *found = NULL;
    /* every key is compared, whichever matches */
    for (size_t i = 0; i < n; i++) {
        digest(keys[i].secret, want);
        if (sodium_memcmp(want, have, sizeof(want)) == 0 && !found)
            found = &keys[i];
    }
    sodium_memzero(have, sizeof(have));
    return found;
}

bool api_auth_zone_ok(const config_api_key_t *k, const char *origin)
{
    if (k->all_zones)
        return true;
    for (size_t i = 0; i < k->nzones; i++)
        if (strcasecmp(k->zones[i], origin) == 0)
            return true;
    return false;
}

bool api_auth_method_ok(const config_api_key_t *k, const char *method)
{
    return !k->read_only || strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}
