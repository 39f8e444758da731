/*
 * qlog_settings.h — query logging's settings ("query_log:", or redins' log blocks for the request
 * log), as plain data.
 *
 * Owner: the qlog module (tern/qlog/qlog.h, qlog_new()). The config parser (conf, config.h)
 * fills it; this header knows nothing of YAML, so the workers never compile against it.
 * Lifecycle: filled at startup on the control thread, read-only after (restart-only); strings
 * are malloc'd by conf.
 */
#ifndef TERN_QLOG_QLOG_SETTINGS_H
#define TERN_QLOG_QLOG_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where the request log goes (query_log: requests: target, redins' log target). */
typedef enum {
    CONFIG_REQLOG_FILE = 0, /* requests_path */
    CONFIG_REQLOG_STDOUT,
    CONFIG_REQLOG_STDERR,
    CONFIG_REQLOG_SYSLOG /* the local syslog socket: journald under systemd */
} config_reqlog_target_t;

/* A line of the request log: one JSON object, or key=value text. */
typedef enum { CONFIG_REQLOG_JSON = 0, CONFIG_REQLOG_TEXT } config_reqlog_format_t;

/* Excluded zones are compared with every logged query's name: a list longer than this is a
 * pasted zone list, not a list of exceptions. */
#define CONFIG_QLOG_MAX_EXCLUDE 4096

/* Query logging ("query_log:", or redins' log blocks for the request log): workers copy each
 * query (1 in sample) into their own ring, and one writer thread hands them to dnstap and the
 * request log. Bound at startup (the rings and the writer are made then): a reload that changes
 * any of it warns that it applies on restart; SIGHUP only reopens the files (log rotation). */
typedef struct config_qlog {
    bool enabled;            /* a dnstap or requests sink is configured */
    char *dnstap_socket;     /* resolved path of a Frame Streams UNIX socket, or NULL */
    char *dnstap_file;       /* resolved path of a dnstap file, or NULL (at most one of the two) */
    bool dnstap_queries;     /* default true */
    bool dnstap_responses;   /* default true */
    char *dnstap_identity;   /* NULL: the host name */
    char *dnstap_version;    /* NULL: "tern VERSION" */
    bool requests;           /* the request log is on */
    uint8_t requests_target; /* config_reqlog_target_t */
    uint8_t requests_format; /* config_reqlog_format_t */
    char *requests_path;     /* resolved path (file target) */
    unsigned sample;         /* log 1 query in N, default 1 = every query; 1..1000000 */
    char **exclude_zones;    /* canonical zone keys (dname_key(), see include/tern/wire/dname.h)
                                never logged */
    size_t nexclude_zones;
    unsigned ring_kib; /* per-worker ring, KiB: default 4096, 64..1048576 */
} config_qlog_t;

#endif
