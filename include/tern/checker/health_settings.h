/*
 * health_settings.h — what the health checker is configured with (tern's "health:" block or
 * redins' healthcheck), as plain data.
 *
 * Owner: the checker (tern/checker/health_check.h, health_checker_configure()); the loader reads
 * the checks to attach them to records. The config parser (conf, config.h) fills it; this
 * header knows nothing of YAML. Lifecycle: filled on the control thread, read-only after;
 * strings and the checks array are malloc'd by conf.
 */
#ifndef TERN_CHECKER_HEALTH_SETTINGS_H
#define TERN_CHECKER_HEALTH_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/redis/redis_settings.h"
#include "tern/health/health.h"

/* One entry of health.checks: a check attached by address to the A/AAAA records of any zone
 * (file, JSON or Redis) that have no health_check of their own (tern/health/health.h). */
typedef struct config_health_check {
    health_spec_t spec; /* family and addr set; uri and host malloc'd and owned here (or NULL:
                           uri "/", host the record's owner for http/https, none for tcp/icmp) */
    char *owner;        /* only records at this owner (lowercase, no final dot); NULL = any */
    unsigned line;      /* where the entry starts in the config file, for messages */
} config_health_check_t;

typedef enum {
    CONFIG_HEALTH_LOG_FILE = 0, /* log_path */
    CONFIG_HEALTH_LOG_STDOUT,
    CONFIG_HEALTH_LOG_STDERR,
} config_health_log_target_t;

/* Health checking (tern's "health:" block, or redins' healthcheck block). */
typedef struct config_health {
    bool enabled;               /* the block is given and not disabled (enable: false) */
    unsigned check_interval_ms; /* between checks of one endpoint; default 10000 (redins' block:
                                   check_interval s x 1000, default 600 s as in redins) */
    unsigned max_requests;      /* checks in flight at once; default 100 (redins: 10) */
    unsigned max_pending;       /* redins' max_pending_requests: accepted; no queue to bound */
    unsigned update_interval_s; /* how long a state written to Redis lives (EX); default 600 */
    unsigned load_poll_ms;      /* load shedding: HGET the Redis loads this often; default 1000
                                   (ternd.yaml's load: redis_poll_ms; kept by a health reset) */
    char *ca_file;              /* CA bundle for https checks; NULL = the system's */
    config_redis_t redis;       /* state shared in redins' keys; redis.enabled false = none */
    bool log_enabled;           /* one line per check result (redins' healthcheck log) */
    unsigned log_target;        /* config_health_log_target_t */
    bool log_json;              /* format json (default) or text */
    char *log_path;             /* CONFIG_HEALTH_LOG_FILE: resolved path */
    config_health_check_t *checks;
    size_t nchecks;
} config_health_t;

#endif
