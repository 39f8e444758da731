/*
 * redis_settings.h — where a Redis is and how to talk to it, and the bounds of the Redis zone
 * source, as plain data.
 *
 * Owners: the redis module: the Redis zone source (tern/redis/redis_source.h) reads all of it,
 * the connection (tern/redis/redis_conn.h) the connection part, which is all the health
 * checker's shared state (tern/checker/health_settings.h) uses. The config parser
 * (conf, config.h) fills it from "redis:" (or redins' handler) and health's "redis:".
 * Lifecycle: filled on the control thread, read-only after; strings are malloc'd by conf.
 */
#ifndef TERN_REDIS_REDIS_SETTINGS_H
#define TERN_REDIS_REDIS_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"

/* The Redis zone source (tern/redis/redis_source.h). Zero/NULL fields mean the source's default,
 * except zone_reload_s (0 = never; its default 600 is set by config_init()). */
typedef struct config_redis {
    bool enabled;                /* a redis block was given (tern "redis:" or redins handler) */
    char *host;                  /* NULL = 127.0.0.1 */
    uint16_t port;               /* 0 = 6379 */
    char *unix_path;             /* a UNIX socket instead of host:port; NULL = none */
    unsigned db;                 /* SELECTed database, 0..CONFIG_REDIS_MAX_DB */
    char *password;              /* NULL = no AUTH */
    char *prefix, *suffix;       /* key prefix / suffix; NULL = none */
    unsigned connect_timeout_ms; /* 0 = the source's default (2000) */
    unsigned read_timeout_ms;    /* 0 = the source's default (5000) */
    unsigned zone_reload_s;      /* verify interval; default 600 (redins' zone_reload); 0 = never */
    char *changes_channel;       /* NULL = the default channel; "" = none */
    uint32_t default_ttl;        /* TTL of RRsets without one; 0 = 300 */
    uint32_t max_ttl;            /* cap on every RRset's TTL (redins' handler.max_ttl); 0 = none */
    /* Bounds on untrusted data (each breach skipped, logged once and counted by the source) */
    unsigned max_value_bytes;   /* bytes of one label's JSON or zone config; default 1 MiB */
    unsigned max_labels;        /* labels per zone; default 4,000,000 */
    unsigned max_rrset_records; /* records per RRset; default 10,000 (at most 65,535) */
    unsigned max_zones;         /* zones read from the set; default 100,000 */
    /* High availability: with sentinels the source asks them for the node to read (host, port
     * and unix_path are then unset; "sentinel" and "address" are exclusive) */
    char **sentinels;        /* "IP:PORT" or "[V6]:PORT", tried in order; NULL = no Sentinel */
    size_t nsentinels;       /* 1..CONFIG_REDIS_MAX_SENTINELS when sentinels is set */
    char *sentinel_master;   /* the name the sentinels monitor (required with sentinels) */
    char *sentinel_password; /* AUTH to the sentinels; NULL = none (the data nodes: password) */
    unsigned read_from;      /* CONFIG_REDIS_READ_PRIMARY (default) or _REPLICA (needs sentinels) */
} config_redis_t;

/* config_redis_t.read_from */
enum { CONFIG_REDIS_READ_PRIMARY = 0, CONFIG_REDIS_READ_REPLICA = 1 };

/* Redis' own default is 16 databases; a few hundred is already unusual, and the bound catches a
 * port number typed as db. */
#define CONFIG_REDIS_MAX_DB 1023
/* Sentinels of one redis block: a quorum is 3 or 5; 16 leaves room for any real deployment. */
#define CONFIG_REDIS_MAX_SENTINELS 16

/** Free r's strings and sentinels and zero it (the config parser then sets its defaults). */
void redis_settings_free(config_redis_t *r);

/** Free only r's sentinels (sentinels NULL, nsentinels 0). */
void redis_settings_free_sentinels(config_redis_t *r);

/** Deep copy of src into dst, which owns nothing (its contents are overwritten). 0, or
 * TERN_ENOMEM with dst owning only what redis_settings_free() frees. */
int redis_settings_copy(config_redis_t *dst, const config_redis_t *src) TERN_WUR;

/** Every field alike, strings by content (NULL and "" differ), sentinels in order: false means
 * a reader of a (the zone reader, the health checker) must reconnect to read b. */
bool redis_settings_same(const config_redis_t *a, const config_redis_t *b);

#endif
