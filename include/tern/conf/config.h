/*
 * config.h — ternd's configuration as a plain, immutable struct.
 *
 * Lifecycle: config_init() then config_load() and/or the command line (main.c) at startup
 * (control thread), read-only after; config_free() at exit. Never read on the query path (workers
 * get copies of what they need).
 *
 * The options live in one static schema table in config.c (key, type, default, bounds, one-line
 * description); it drives config_init() defaults, parsing, validation and config_schema_print().
 *
 * YAML (JSON is valid YAML, so redins-style JSON parses too):
 *   listen: ["127.0.0.1:5353", "[::1]:5353"]   # or a single string; port 0 = ephemeral (tests)
 *   workers: 2                                  # or "auto" = number of usable CPUs
 *   edns_max_udp: 1232                          # 512..4096
 *   identity: ns1.example.net                   # CHAOS id.server / hostname.bind
 *   version: "tern"                             # CHAOS version.bind
 *   tcp_idle_timeout: 10                        # seconds
 *   tcp_max_connections: 256                    # per worker
 *   udp_mmsg: true                              # false: one datagram per syscall
 *   zones:
 *     - origin: example.test
 *       file: example.zone                      # relative to the config file's directory
 * Unknown keys, duplicate keys, wrong types and out-of-range values are errors with file:line.
 * Integers and booleans must be plain (unquoted) scalars, as they are in JSON.
 */
#ifndef TERN_CONF_CONFIG_H
#define TERN_CONF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "tern/common/compiler.h"

/* Every listen address costs two sockets per worker; 32 is far beyond any real deployment and
 * keeps the array fixed-size. */
#define CONFIG_MAX_LISTEN 32

/* Past this, threads outnumber any machine we run on; the bound catches typos like 10000. */
#define CONFIG_MAX_WORKERS 256

typedef struct config_listen {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char text[64]; /* as given, for logs */
} config_listen_t;

typedef struct config_zone {
    char *origin;
    char *file; /* resolved path */
} config_zone_t;

typedef struct config {
    config_listen_t listen[CONFIG_MAX_LISTEN];
    size_t nlisten;
    unsigned workers;             /* 1..CONFIG_MAX_WORKERS */
    uint16_t edns_max_udp;        /* 512..4096, default 1232 */
    char *identity;               /* NULL if unset */
    char *version;                /* NULL if unset */
    unsigned tcp_idle_timeout;    /* seconds, default 10 */
    unsigned tcp_max_connections; /* per worker, default 256 */
    bool udp_mmsg;                /* recvmmsg/sendmmsg (default) or recvmsg/sendmsg */
    config_zone_t *zones;
    size_t nzones;
} config_t;

/** Defaults from the schema: no listen, workers = 1, edns 1232, tcp 10 s / 256, udp_mmsg. */
void config_init(config_t *c);

/**
 * Parse YAML file path into c (initialised by config_init()). Keys present in the file replace
 * the values in c; a "listen" key replaces the whole listen list; zones are appended.
 * Returns 0, or a negative TERN_E* code with "file:line: message" in err (the message names the
 * key). On error c may be partly filled; config_free() it as usual.
 */
int config_load(config_t *c, const char *path, char *err, size_t errlen) TERN_WUR;

/**
 * Parse "ADDR:PORT" (IPv4) or "[V6]:PORT" into l; a port is always required ("::1" alone is an
 * error), 0 means ephemeral. 0 or TERN_EINVAL.
 */
int config_parse_listen(config_listen_t *l, const char *text) TERN_WUR;

/** Append a listen address (parsed as config_parse_listen). 0, TERN_EINVAL or TERN_ELIMIT. */
int config_add_listen(config_t *c, const char *text) TERN_WUR;

/** Append a zone (copies strings). 0 or TERN_ENOMEM. */
int config_add_zone(config_t *c, const char *origin, const char *file) TERN_WUR;

/** Number of usable CPUs (the value of workers: "auto"), clamped to 1..CONFIG_MAX_WORKERS. */
unsigned config_auto_workers(void);

/** Print every option of the schema with its default, bounds and description (for --help). */
void config_schema_print(FILE *out);

/** Release strings and arrays; c is left as after config_init(). */
void config_free(config_t *c);

#endif
