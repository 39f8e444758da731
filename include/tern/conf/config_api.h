/*
 * config_api.h — what the HTTP API (tern/api/api.h) is configured with: the "api:" block,
 * parsed by src/conf/config_api.c into config_t.api. Here rather than in tern/api: the API
 * module reads the loader, which reads the config (an include of tern/api from conf would be a
 * cycle).
 *
 * Owner: the config (config_free() frees it). Read-only once loaded; the API service copies
 * what it keeps at startup (the block is restart-only, see config_api.c).
 */
#ifndef TERN_CONF_CONFIG_API_H
#define TERN_CONF_CONFIG_API_H

#include <stdbool.h>
#include <stddef.h>

/* One X-API-Key a client may present. */
typedef struct config_api_key {
    char *name;   /* for the log and the audit ("api key NAME from ADDR") */
    char *secret; /* the X-API-Key value, compared in constant time */
    char **zones; /* origins it may see and change (lowercased, no final dot; "." the root) */
    size_t nzones;
    bool all_zones; /* no "zones": every zone */
    bool read_only; /* GET only */
} config_api_key_t;

/* "api:"; listen NULL: no API. */
typedef struct config_api {
    char *listen;   /* "ADDR:PORT" */
    char *cert;     /* PEM certificate (chain) for HTTPS; NULL: plain HTTP */
    char *cert_key; /* its PEM private key */
    unsigned max_body_bytes;
    config_api_key_t *keys;
    size_t nkeys;
} config_api_t;

#endif
