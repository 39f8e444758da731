/*
 * config.h — ternd's configuration as a plain, immutable struct.
 *
 * Lifecycle: config_load() or config_from_args() at startup (control thread), read-only after;
 * config_free() at exit. Never read on the query path (workers get copies of what they need).
 *
 * This is the minimal schema of the core issue: listen addresses, workers, zones, EDNS payload,
 * CHAOS identity/version. The runtime issue turns it into the full table-driven schema.
 *
 * YAML (JSON is valid YAML, so redins-style JSON parses too):
 *   listen: ["127.0.0.1:5353", "[::1]:5353"]   # or a single string
 *   workers: 2                                  # or "auto" = number of CPUs
 *   edns_max_udp: 1232
 *   identity: ns1.example.net                   # CHAOS id.server / hostname.bind
 *   version: "tern"                             # CHAOS version.bind
 *   tcp_idle_timeout: 10                        # seconds
 *   tcp_max_connections: 256                    # per worker
 *   zones:
 *     - origin: example.test
 *       file: example.zone                      # relative to the config file's directory
 * Unknown keys, wrong types and out-of-range values are errors with file:line.
 */
#ifndef TERN_CONF_CONFIG_H
#define TERN_CONF_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "tern/common/compiler.h"

#define CONFIG_MAX_LISTEN 32

typedef struct config_listen {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char text[64]; /* as given, for logs */
} config_listen_t;

typedef struct config_zone {
    char *origin;
    char *file;    /* resolved path */
} config_zone_t;

typedef struct config {
    config_listen_t listen[CONFIG_MAX_LISTEN];
    size_t nlisten;
    unsigned workers;           /* >= 1 */
    uint16_t edns_max_udp;      /* 512..4096, default 1232 */
    char *identity;             /* NULL if unset */
    char *version;              /* NULL if unset */
    unsigned tcp_idle_timeout;  /* seconds, default 10 */
    unsigned tcp_max_connections; /* per worker, default 256 */
    config_zone_t *zones;
    size_t nzones;
} config_t;

/** Defaults: no listen, workers = 1, edns 1232, tcp 10 s / 256. */
void config_init(config_t *c);

/**
 * Parse YAML file path into c (initialised by config_init()). Returns 0, or a negative TERN_E*
 * code with "file:line: message" in err.
 */
int config_load(config_t *c, const char *path, char *err, size_t errlen) TERN_WUR;

/** Parse "ADDR:PORT", "[V6]:PORT" or "V6-without-port-is-an-error" into l. 0 or TERN_EINVAL. */
int config_parse_listen(config_listen_t *l, const char *text) TERN_WUR;

/** Append a zone (copies strings). 0 or TERN_ENOMEM. */
int config_add_zone(config_t *c, const char *origin, const char *file) TERN_WUR;

/** Release strings and arrays. */
void config_free(config_t *c);

#endif
