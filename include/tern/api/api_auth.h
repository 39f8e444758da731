/*
 * api_auth.h — the API's keys: which configured key (tern/conf/config_api.h) a request's
 * X-API-Key is, and which zones and methods it allows.
 *
 * A presented key is compared with every configured key in constant time (BLAKE2b digests of
 * both compared with sodium_memcmp()), so neither the timing of a match nor of a near miss says
 * anything about a secret. Pure functions on the caller's config; any thread.
 */
#ifndef TERN_API_API_AUTH_H
#define TERN_API_API_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/conf/config_api.h"

/** The key among keys[0..n) whose secret is presented (NUL-terminated; NULL: no header), or
 * NULL. */
const config_api_key_t *api_auth_find(const config_api_key_t *keys, size_t n,
                                      const char *presented);

/** Whether k may see and change zone origin (a canonical key: lowercased, no final dot, "."). */
bool api_auth_zone_ok(const config_api_key_t *k, const char *origin);

/** Whether k may use method ("GET", "PATCH", ...): a read_only key GET and HEAD only. */
bool api_auth_method_ok(const config_api_key_t *k, const char *method);

#endif
