/*
 * config.h — ternd's configuration as a plain, immutable struct.
 *
 * Lifecycle: config_init() then config_load() and/or the command line (main.c) at startup
 * (control thread), read-only after; config_free() at exit. A reload loads a fresh config_t and
 * compares it with the running one: config_restart_only_changes() names the options that only
 * change on restart (listen addresses, workers, sockets, privileges, the pid file and sockets,
 * query logging).
 * Never read on the query path (workers get copies of what they need): the settings a module
 * reads are structs of its own header (tern/limit/limit_settings.h, tern/checker/health_settings.h,
 * tern/qlog/qlog_settings.h, tern/net/server_settings.h, tern/redis/redis_settings.h), which
 * this header includes and fills; none of them includes this one.
 *
 * The options live in one static schema table in config.c (key, type, default, bounds, one-line
 * description); it drives config_init() defaults, parsing, validation, copying, freeing and
 * config_schema_print(). A nested block (health:, acl:, query_log:, ...) is declared by its
 * owner in src/conf (config_health.c, config_limit.c, config_qlog.c, ...) with its own rows and
 * hooks; the engine (src/conf/config_rows.c) knows none of them by name. conf/ternd.yaml shows
 * every option with a comment.
 *
 * YAML (JSON is valid YAML, so JSON parses too):
 *   listen:                                     # or a single string; port 0 = ephemeral (tests)
 *     - "127.0.0.1:5353"                        # UDP and TCP
 *     - {address: "[::1]:5353", tcp: false}     # UDP only (udp/tcp default true, one must be)
 *   xdp:                                        # AF_XDP: UDP on these interfaces bypasses
 *     listen: [eth0]                            # the socket path (restart-only; unset = none)
 *   workers: 2                                  # or "auto" = number of usable CPUs
 *   zones:
 *     - origin: example.test
 *       file: example.zone                      # relative to the config file's directory
 *     - origin: geo.example.test
 *       file: geo.json                          # redins-schema JSON (by the .json suffix)
 *       format: json                            # or rfc1035; default: by the file name
 *   edns_max_udp: 1232                          # 512..4096
 *   identity: ns1.example.net                   # CHAOS id.server / hostname.bind
 *   version: "tern"                             # CHAOS version.bind
 *   tcp_idle_timeout: 10                        # seconds
 *   tcp_max_connections: 256                    # per worker
 *   tcp_max_lifetime: 120                       # seconds, from accept, whatever the peer does
 *   tcp_max_inflight: 64                        # answers queued per connection, then pause
 *   udp_mmsg: true                              # false: one datagram per syscall
 *   udp_steering: hash                          # hash | random | cpu: a datagram's worker
 *   udp_busy_poll_us: 0                         # µs a UDP socket polls the NIC when empty
 *   udp_busy_poll_budget: 64                    # packets per busy poll
 *   udp_prefer_busy_poll: true                  # the poller, not the kernel, drives the queue
 *   udp_rcvbuf: 4194304                         # bytes, SO_RCVBUF(FORCE); 0 = kernel default
 *   udp_sndbuf: 4194304                         # bytes, SO_SNDBUF(FORCE); 0 = kernel default
 *   log_level: info                             # error | warning | info | debug
 *   log_target: stderr                          # stderr | stdout | syslog
 *   user: tern                                  # after binding; unset = stay who we are
 *   group: tern
 *   allow_root: false                           # true: may keep running as root
 *   pid_file: /run/tern/ternd.pid               # unset = none; relative to the config's dir
 *   control_socket: /run/tern/ternd.sock        # unset = no control socket (ternctl)
 *   metrics_listen: "127.0.0.1:9153"            # Prometheus endpoint; unset = none
 *   asn_table: asn.bin                          # ternctl asn compile; unset = none
 *   asn_db: GeoLite2-ASN.mmdb                   # or a MaxMind ASN DB, compiled and cached
 *   geoip_db: GeoLite2-City.mmdb                # MaxMind DB (IPv4, and IPv6 if a v6 DB)
 *   geoip_db_v6: geoip-v6.mmdb                  # a separate IPv6 DB; unset = geoip_db
 *   redis:                                      # zones kept in Redis (tern/redis/redis_source.h)
 *     address: "127.0.0.1:6379"                 # or "[::1]:6379", or /run/redis/redis.sock
 *     db: 0                                     # 0..1023
 *     password: secret                          # AUTH; unset = none
 *     prefix: "" / suffix: ""                   # wrapped around every key
 *     connect_timeout: 2000 / read_timeout: 5000  # ms; 0 = these defaults
 *     zone_reload: 600                          # s between verifies; 0 = never
 *     changes_channel: ~                        # ~ = P redins:zones:changed S; "" = none
 *     default_ttl: 300                          # TTL of RRsets without one; 0 = 300
 *     max_ttl: 0                                # cap on every TTL; 0 = none
 *     max_value_bytes: 1048576                  # bounds on untrusted data: one value,
 *     max_labels: 4000000                       #   labels per zone, records per RRset,
 *     max_rrset_records: 10000                  #   zones in the set
 *     max_zones: 100000
 *     sentinel:                                 # instead of address: ask Sentinel for the node
 *       addresses: ["127.0.0.1:26379", "[::1]:26380"]  # numeric IP:PORT, tried in order
 *       master: mymaster                        # the name the sentinels monitor
 *       password: ~                             # AUTH to the sentinels; unset = none
 *     read_from: primary                        # primary | replica (replica needs sentinel)
 *   (redis: ~ or no redis key: no Redis.)
 *   load:                                       # load shedding (an RRset's "shed" block)
 *     redis_poll_ms: 1000                       # shed.redis loads read this often over
 *                                               #   health: redis, 100..3600000
 *   health:                                     # health checks (tern/health/health.h)
 *     enable: true                              # default true in a given block; false = none
 *     check_interval_ms: 10000                  # between checks of one endpoint, 100..86400000
 *     max_requests: 100                         # checks in flight at once, 1..100000
 *     update_interval: 600                      # s a state written to Redis lives, 1..604800
 *     ca_file: /etc/ssl/certs/ca-certificates.crt  # https; unset = the system's
 *     redis: {address: "127.0.0.1:6379"}        # share states in redins' keys; the keys of
 *                                               #   redis up to read_timeout; unset or ~ = none
 *     log: {enable: true, target: file, path: health.log, format: json}  # one line per result
 *                                               #   target file|stdout|stderr (default file, then
 *                                               #   path is required); format json|text
 *     checks:                                   # by address, for A/AAAA records of any zone
 *       - address: 192.0.2.1                    # required: IPv4 or IPv6
 *         owner: www.example.test               # only records at this name; default any
 *         protocol: http                        # http | https | tcp | icmp (ping); default http
 *         port: 80                              # default 80/443; tcp: required; icmp: none
 *         uri: /health                          # http(s): default "/"
 *         method: HEAD                          # http(s): HEAD | GET
 *         host: www.example.test                # http(s): default the record's owner
 *         expect: [200, 204]                    # http(s): 100..599, at most 8; 200, 301, 302
 *         tls_verify: true                      # https
 *         timeout: 1000                         # ms, 1..60000
 *         up_count: 3                           # 1..1000
 *         down_count: 3                         # 1..1000 (or -3, redins' sign); stored negative
 *   (health: ~ or no health key: no health checks. An entry with the address, port, protocol and
 *   owner of an earlier one is an error.)
 *   acl:                                        # every query (src/conf/config_limit.c)
 *     allow: [192.0.2.0/24, "2001:db8::/32", 127.0.0.1]  # empty or unset = every client
 *     deny: 192.0.2.66                          # refused whatever allow says
 *     action: refuse                            # refuse (REFUSED, default) | drop (no answer)
 *   zones: [{origin: a.test, file: a.zone, acl: {allow: [10.0.0.0/8]}}]  # a zone's own acl,
 *                                               #   same keys; checked once the zone is known
 *   ratelimit:                                  # redins' block: same key, keys and meaning
 *     enable: true                              # default true in a given block (false in a
 *                                               #   redins config.json, as redins' Go default)
 *     rate: 60                                  # requests a minute per client address, 1..6000000
 *     burst: 10                                 # beyond the rate at once, 0..1000000
 *     whitelist: [127.0.0.1]                    # never limited; addresses or prefixes
 *     blacklist: [10.10.10.1]                   # always refused (checked first, as redins)
 *     action: refuse                            # over the rate: refuse | drop
 *     blacklist_action: refuse                  # blacklisted: refuse | drop
 *     table_size: 65536                         # addresses tracked, 1024..16777216
 *   rrl:                                        # response rate limiting, per client prefix
 *     enable: true                              # default true in a given block
 *     rate: 20                                  # responses a second per class, 1..1000000
 *     burst: 0                                  # 0 = rate; else 1..1000000
 *     slip: 2                                   # every slip-th limited answer TC; 0..100, 0 = none
 *     ipv4_prefix: 24 / ipv6_prefix: 56         # 8..32 / 16..128 -> prefix_v4 / prefix_v6
 *     whitelist: []                             # prefixes never limited
 *     table_size: 262144                        # buckets, 1024..16777216
 *     log: true                                 # log each newly limited prefix
 *   steering:                                   # issue 33's rules, server-wide defaults
 *     sticky_prefix_v4: 24 / sticky_prefix_v6: 56  # 1..32 / 1..128: the network order sticky
 *                                               #   hashes (an RRset's sticky_prefix wins)
 *   cookies:                                    # DNS Cookies, RFC 7873 / RFC 9018
 *     enable: true                              # default true in a given block
 *     secret: "000102030405060708090a0b0c0d0e0f"  # 32 hex digits, shared by a fleet; unset =
 *                                               #   random, replaced every rotate_s
 *     rotate_s: 86400                           # 60..31536000; an error beside secret
 *     require: false                            # UDP without a valid server cookie: BADCOOKIE
 *   tcp_max_per_client: 64                      # TCP connections per client prefix, 0..65535,
 *   tcp_client_prefix_v4: 32                    #   0 = no cap; the prefix is /8../32 and
 *   tcp_client_prefix_v6: 64                    #   /16../128; the three only change on restart
 *   (acl, ratelimit, rrl, cookies: ~ or no key: none. A list of prefixes may be one prefix, or
 *   ~ for none; "192.0.2.1/24" is an error: host bits set. At most 100000 prefixes a list.)
 *   aname:                                      # upstreams for ANAME targets outside the zones
 *     upstreams:                                # at most 8, tried in this order (config_aname.c)
 *       - address: 127.0.0.1                    # required: IPv4 or IPv6, never a name; "ip"
 *         port: 53                              #   works too; port 1..65535
 *         protocol: udp                         # udp | tcp
 *         timeout: 400                          # ms, 1..60000
 *     state_file: /var/lib/tern/aname.state     # last good results (default: in systemd's
 *                                               #   $STATE_DIRECTORY, else none)
 *     ready_wait: 5000                          # ms READY waits for the first round, 0..60000
 *     max_stale: 86400                          # s a saved result outlives its TTL, 0..604800
 *   (aname: ~, no aname key, or no upstreams: none. tern never forwards a client's query; a
 *   reload applies a new list.)
 *   query_log:                                  # query logging (config_qlog.c, tern/qlog/)
 *     sample: 1                                 # log 1 query in N, 1..1000000
 *     ring_size: 4096                           # KiB per worker ring, 64..1048576
 *     exclude_zones: [internal.example.test]    # queries in these zones are never logged; one
 *                                               #   name or a list; not the root
 *     dnstap:                                   # dnstap frames (Frame Streams); ~ = none
 *       socket: /run/tern/dnstap.sock           # a collector's UNIX socket, or
 *       file: ~                                 #   a file: exactly one of the two
 *       queries: true / responses: true         # which messages; not both false
 *       identity: ns1.example.test              # unset = the host name
 *       version: "..."                          # unset = "tern VERSION"
 *     requests:                                 # redins' request log, one line a query; ~ = none
 *       enable: true                            # default true in a given block
 *       target: file                            # file | stdout | stderr
 *       format: json                            # json | text
 *       path: /var/log/tern/requests.log        # required with target file, only then
 *   (query_log: ~ or no key: none. Restart-only: the rings and the writer are made at startup;
 *   SIGHUP reopens the files, for log rotation.)
 *   zones:                                      # zone transfers (src/conf/config_xfr.c)
 *     - origin: example.test                    # a primary zone of ours
 *       file: example.zone
 *       allow_transfer: [192.0.2.0/24, 127.0.0.1]  # AXFR/IXFR clients; unset = nobody
 *       transfer_key: xfr-key                   # requests must be signed with it; unset = any
 *       notify: [192.0.2.7, "192.0.2.8@5300", {address: 192.0.2.9, key: xfr-key}]
 *     - origin: sec.test                        # a secondary zone: transferred in
 *       primary: {address: "192.0.2.1@53", key: xfr-key}  # or a list of them, tried in order
 *       file: sec.zone                          # optional on-disk copy (written after each
 *                                               #   transfer, read at startup)
 *       allow_notify: [192.0.2.1]               # default: the primaries' addresses
 *     - origin: xot.test                        # transferred over TLS (RFC 9103; port 853)
 *       primary: {address: 192.0.2.1, key: xfr-key, tls: {mode: strict, name: ns1.example,
 *                 pin: ["base64 SHA-256 of the SPKI"], ca: ca.pem, certificate: me.pem,
 *                 key: me.key}}               # src/conf/config_xfr_tls.c
 *   tsig_keys:                                  # RFC 8945; hmac-md5, -sha1, -sha224..-sha512
 *     - {name: xfr-key, algorithm: hmac-sha256, secret: "base64=="}
 *   tsig_key_file: [keys.conf]                  # BIND syntax: key "name" { algorithm ...;
 *                                               #   secret "..."; }; as tsig-keygen writes
 *   xfr_journal_versions: 64                    # changes kept per zone for IXFR (0 = AXFR only)
 *   xfr_journal_mib: 64                         # and at most this much memory per zone
 *   xfr_max_mib: 1024                           # memory a transfer in may take
 *   xfr_notify_retries: 5                       # NOTIFY sends per change and secondary
 *   xfr_notify_timeout_ms: 2000
 *   xfr_timeout_ms: 10000                       # each step of a transfer in (one message)
 *   xfr_total_timeout_ms: 600000                # a whole transfer in
 *   xfr_in_concurrency: 8                       # secondary zones refreshed at once
 *   catalogs:                                   # catalog zones tern makes (RFC 9432,
 *     - origin: catalog.example.test            #   src/conf/config_catalog.c)
 *       members: all                            # all | listed (default: zones naming it)
 *       allow_transfer: [192.0.2.0/24]          # and notify, transfer_key: as a zone's
 *   zones: [{origin: a.test, file: a.zone, catalog: catalog.example.test,
 *            catalog_group: blue, catalog_coo: new.example.test}]  # a member's properties
 *   zones:                                      # dynamic updates (src/conf/config_update.c)
 *     - origin: example.test
 *       file: example.zone                      # changes go to example.zone.jnl (fsync'd)
 *       allow_update: [acme-key, {key: ops-key, address: [192.0.2.0/24]}, {address: 127.0.0.1}]
 *   update_max_records: 1000                    # prerequisites + updates in one UPDATE
 *   update_rate: 50                             # changes a second per key (or address)
 *   zonefile_sync: 0                            # s between writing changed files back; 0 = on
 *                                               #   `ternctl zone flush` only
 *
 * redins-style JSON (arvancloud/redins config.json) is accepted where its keys map
 * (src/conf/config_redins.c):
 *   "server": [{"ip": "127.0.0.1", "port": 1053, "protocol": "udp"}, ...]  → listen (entries
 *       with the same ip and port merge into one UDP+TCP listen entry); a single object works too
 *   "error_log": {"enable": true, "level": "info", "target": "stderr", "format": "text"} →
 *       log_level / log_target
 *   "handler": {...} → redis (redins' handler always reads Redis, so a handler block enables it):
 *       "redis": {"ip", "port" | "address", "net": "tcp"|"unix", "db", "password", "prefix",
 *                 "suffix", "connect_timeout", "read_timeout", "connection": {...}} → redis;
 *           connection's connect_timeout/read_timeout map the same, its pool settings
 *           (max_idle_connections, max_active_connections, idle_keep_alive, max_keep_alive,
 *           wait_for_connection) are accepted and ignored: the source uses one connection
 *       "zone_reload" → redis.zone_reload_s (1..604800)
 *       "max_ttl" → redis.max_ttl (redins caps every TTL at it) and redis.default_ttl (redins
 *           gives it to RRsets without a TTL) unless "default_ttl" is given too
 *       "default_ttl" (older redins) → redis.default_ttl
 *       "cache_timeout", "log_source_location" → accepted and ignored (every zone is in memory:
 *           there is no cache; there is no per-query event log to add the location to)
 *       "upstream_fallback": false → fine; true → error (forwarding what tern is not
 *           authoritative for would make it an open resolver)
 *       "upstream": [{"ip", "port", "protocol", "timeout"}, ...] → aname.upstreams (at most 8,
 *           in order), with redins' defaults: port 53, protocol "udp", timeout 400 ms; [] = none
 *       "geoip": {"enable", "db" | "country_db", "asn_db"} → with enable true, "db" (or
 *           "country_db") → geoip_db and "asn_db" → asn_db (at least one of them); with enable
 *           false or left out, neither (as in redins)
 *       "healthcheck": {...} → health, as the top-level "healthcheck" below
 *       "log": {...} → query_log's request log, as the top-level "log" below
 *   "geoip": {"enable", "db"} (older redins, top level) → as handler's geoip
 *   "log" (redins' request log: in handler, or at the top level in older redins) → query_log:
 *       requests (a line per query, the fields redins wrote): "enable" (default false: none),
 *       "level" debug|info (or trace) → on, warning|error|fatal|panic → off (redins logged
 *       requests at info), "target" file|stdout|stderr (default stdout), "format" json|text
 *       (default text), "path" (target file: required), "time_format" accepted and ignored
 *       (tern writes RFC 3339 UTC); "target" udp or kafka, and "kafka", "sentry" or "syslog"
 *       with "enable": true, are errors saying why (Kafka and Sentry are out of scope: dnstap
 *       or the file with a shipper)
 *   "upstream" (older redins, top level) → as handler's upstream (a single object works too)
 *   "healthcheck" (older redins, top level; newer ones have it in handler) → health, replacing
 *       every health setting, with redins' defaults:
 *       "enable" → health.enabled (default false: no checks, as in redins)
 *       "max_requests" → health.max_requests (1..100000, default 10 as in redins' README)
 *       "max_pending_requests" → health.max_pending (kept; tern's checker has no queue to bound)
 *       "update_interval" → health.update_interval_s (1..604800, default 600)
 *       "check_interval" (s) → health.check_interval_ms = s x 1000 (1..86400 s, default 600 s)
 *       "redis" → health.redis, exactly as handler's redis (uperdis' or redigo's keys); redins
 *           always kept the states in Redis: without it, 127.0.0.1:6379
 *       "log": {"enable" (default false), "level" (accepted, ignored: every result is one line),
 *           "target": "file"|"stdout"|"stderr" (default stdout), "format": "json"|"text"
 *           (default text), "path" (used with target file, required then)} → health.log_*;
 *           its "sentry", "syslog", "kafka", "time_format" and targets udp, syslog, kafka, sentry
 *           are errors saying why
 *       (redins has no per-address checks: the zones' health_check objects are its checks)
 *   "ratelimit": {"enable", "rate", "burst", "whitelist", "blacklist"} → ratelimit, the same
 *       key as tern's; in a redins config.json (a file with any of server, error_log, handler,
 *       geoip or healthcheck) "enable" left out is false, as in redins; "rate": 0 is an error
 *       (redins divided by it)
 * redins keys tern does not implement yet (error_log's "path", "time_format", "sentry",
 * "syslog", "kafka") are errors saying so; nothing is silently ignored. A file may not give both
 * "listen" and "server", nor "error_log" with "log_level"/"log_target", nor "handler" with
 * "redis", nor "health" with a redins "healthcheck" (top level or handler's), nor two of those,
 * nor "aname" with a redins "upstream" (top level or handler's), nor two of those, nor
 * query_log's "requests" (or "query_log: ~") with a redins "log" (top level or handler's), nor
 * two of those, nor set geoip_db or asn_db twice ("geoip_db" / "asn_db", and redins' "geoip" or
 * handler's "geoip" when enabled and giving that database); the error names both lines.
 *
 * Unknown keys (at any depth), duplicate keys, wrong types, out-of-range values and a second
 * YAML document are errors with file:line naming the key. Integers and booleans must be plain
 * (unquoted) scalars, as they are in JSON.
 */
#ifndef TERN_CONF_CONFIG_H
#define TERN_CONF_CONFIG_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "tern/common/compiler.h"
#include "tern/common/log.h"
#include "tern/redis/redis_settings.h"
#include "tern/checker/health_settings.h"
#include "tern/limit/limit.h"
#include "tern/limit/limit_settings.h"
#include "tern/net/server_settings.h"
#include "tern/qlog/qlog_settings.h"
#include "tern/conf/config_api.h"
#include "tern/conf/config_tls.h"
#include "tern/conf/config_dnssec.h"

/* The settings structs live with the modules that read them (the headers above): conf fills
 * them and sits above their owners, which never include this file. */

struct tsig_key; /* tern/tsig/tsig.h */

typedef enum {
    CONFIG_ZONE_RFC1035 = 0, /* master file (ldns) */
    CONFIG_ZONE_JSON,        /* redins-schema JSON (tern/zone/zone_json.h) */
} config_zone_format_t;

/* A peer of zone transfers (tern/xfr): a primary a secondary zone is transferred from, or a
 * secondary told of changes with NOTIFY. "ADDR" or "ADDR@PORT" (port 53 by default), or a
 * mapping {address: "ADDR@PORT", key: NAME}. */
typedef struct config_xfr_peer {
    struct sockaddr_storage addr; /* port set */
    socklen_t addr_len;
    char text[INET6_ADDRSTRLEN + 8]; /* "ADDR@PORT", for logs */
    char *key;                       /* the TSIG key (tsig_keys) to sign with; NULL = none */
    uint32_t line;                   /* where it was given, for the key check */
    struct config_xfr_tls *tls;      /* a primary's XoT settings; NULL = clear text */
} config_xfr_peer_t;

/* XFR over TLS (RFC 9103) to a primary: `tls: {mode, name, pin, ca, certificate, key}` in a
 * primary's mapping (src/conf/config_xfr_tls.c). Strict (RFC 8310 §6, RFC 9103 §9.3.2): the
 * primary must prove every identity given — name (the certificate chains to ca, or the system
 * store, and carries the name in its SAN) and pin (the SHA-256 of its SubjectPublicKeyInfo is one
 * of pins, RFC 7858 §4.2) — or nothing is sent. Opportunistic: encrypted, unauthenticated, and
 * never clear text. certificate and key: ours, for a primary that asks (mutual TLS). */
typedef enum {
    CONFIG_XFR_TLS_STRICT = 0,
    CONFIG_XFR_TLS_OPPORTUNISTIC,
} config_xfr_tls_mode_t;

/* A pin set holds the key in use and a backup or two (RFC 7858 §4.2 asks for a backup pin);
 * eight covers a rollover of both with room to spare. */
#define CONFIG_XFR_TLS_PINS_MAX 8

typedef struct config_xfr_tls {
    config_xfr_tls_mode_t mode;
    char *name; /* the authentication domain name (SAN), NULL = none */
    uint8_t pins[CONFIG_XFR_TLS_PINS_MAX][32];
    size_t npins;
    char *ca;          /* resolved path of the trusted CA bundle; NULL = the system store */
    char *certificate; /* resolved paths of our certificate and key (mutual TLS); NULL = none */
    char *key;
} config_xfr_tls_t;

/* One rule of a zone's allow_update (tern/update/update.h): an UPDATE is allowed when it
 * matches every part the rule gives — signed with `key` (a TSIG key of tsig_keys), sent from one
 * of `addresses` — and some rule matches. A rule with addresses only lets unsigned updates in
 * from there: TSIG is the default only because an operator has to write that out. */
typedef struct config_update_rule {
    char *key;                      /* NULL: any key or none */
    config_prefix_list_t addresses; /* empty: any address */
    uint32_t line;                  /* where it was given, for the key check */
} config_update_rule_t;

/* Catalog zones consumed (RFC 9432, tern/xfr/xfr_catalog.h): a secondary zone with
 * "catalog_consumer: {directory, groups}" is a catalog whose member zones tern serves as
 * secondary zones of their own. A member takes the catalog's primaries (and their keys), or those
 * of the group its "group" property names (Knot's catalog-template, chosen by group). */
typedef struct config_catalog_group {
    char *name;                   /* the group property's value, as written (case kept) */
    config_xfr_peer_t *primaries; /* the member's primaries (keys as in a zone's primary) */
    size_t nprimaries;
} config_catalog_group_t;

typedef struct config_catalog_consumer {
    char *directory; /* resolved: the member list and every member's copy (BIND's zone-directory) */
    config_catalog_group_t *groups;
    size_t ngroups;
} config_catalog_consumer_t;
/* A zone's transfer_tls: what a transfer out of it needs (RFC 9103). */
typedef enum {
    CONFIG_TRANSFER_TLS_ANY = 0,  /* plain TCP or TLS */
    CONFIG_TRANSFER_TLS_REQUIRED, /* TLS (a DoT connection, ALPN "dot") */
    CONFIG_TRANSFER_TLS_MUTUAL,   /* TLS, and a client certificate verified against client_ca */
} config_transfer_tls_t;

typedef struct config_zone {
    char *origin;
    char *file; /* resolved path; for a secondary zone its on-disk copy, NULL = none */
    config_zone_format_t format;
    config_acl_t acl; /* the zone's own access list; acl.enabled false = none */
    /* "dnssec: {keys: [...]}": the zone is signed by tern with these BIND key pairs (resolved
     * stems or file paths, tern/dnssec/dnssec_key.h); none = served as its source has it */
    char **dnssec_keys;
    size_t ndnssec_keys;
    /* "dnssec: {policy: NAME}": tern makes and rolls the zone's keys (config_dnssec.h) */
    char *dnssec_policy;
    /* "dnssec: {policy: NAME, unsign: true}": go insecure safely (RFC 8078): CDS DELETE, the
     * keys removed once the parent's DS is gone */
    bool dnssec_unsign;
    /* Zone transfers (tern/xfr). primaries non-empty: a secondary zone, transferred in (and
     * refreshed on NOTIFY from allow_notify, default the primaries' addresses). */
    config_xfr_peer_t *primaries;
    size_t nprimaries;
    config_xfr_peer_t *notify; /* secondaries sent NOTIFY when the zone changes */
    size_t nnotify;
    config_prefix_list_t allow_transfer; /* who may AXFR/IXFR it; empty = nobody */
    config_prefix_list_t allow_notify;   /* who may NOTIFY it (a secondary zone) */
    char *transfer_key;                  /* a transfer must be signed with this key; NULL = any
                                            key or none (the addresses still apply) */
    uint32_t transfer_key_line;
    unsigned transfer_tls; /* config_transfer_tls_t: whether AXFR/IXFR out needs XoT */
    /* Dynamic updates (RFC 2136, tern/update): who may change the zone; none = nobody */
    config_update_rule_t *allow_update;
    size_t nallow_update;
    /* "catalog_consumer: {...}" (a secondary zone only): its members are served too; NULL: not
     * a catalog */
    config_catalog_consumer_t *catalog_consumer;
    /* Catalog zones (RFC 9432, src/conf/config_catalog.c): the catalog (catalogs:) this zone is a
     * member of, its group property (§4.4.2) and its change-of-ownership property (§4.4.1: the
     * catalog that may take it over); NULL = none */
    char *catalog;
    char *catalog_group;
    char *catalog_coo;
    uint32_t catalog_line; /* where the first of them was given, for the whole-file check */
} config_zone_t;

/* "catalogs:" (src/conf/config_catalog.c): a catalog zone (RFC 9432, version 2) tern makes of
 * the zones it is primary for (tern/source/source_catalog.h). Its transfer settings are a zone
 * entry of zones (no file: served by its source, as a Redis zone's settings are). */
typedef struct config_catalog {
    char *origin;
    bool members_all; /* every primary zone; false: the zones naming it (catalog:) */
    uint32_t line;
} config_catalog_t;

/* Upstreams are tried one after another, each for up to its timeout: eight already wait longer
 * than an ANAME answer is worth; a longer list is a mistake (a pasted resolver list). */
#define CONFIG_MAX_UPSTREAMS 8

/* One DNS server asked for ANAME targets outside the served zones (redins' upstream entry). */
typedef struct config_upstream {
    char *host;          /* numeric IPv4 or IPv6 address (validated with inet_pton), owned */
    uint16_t port;       /* 1..65535, default 53 */
    bool tcp;            /* protocol: "udp" (default) or "tcp" */
    unsigned timeout_ms; /* 1..60000, default 400 (redins') */
} config_upstream_t;

/* "aname:" (or redins' upstream): where targets of ANAME records that tern does not serve are
 * resolved, in the background; client queries are never forwarded. */
typedef struct config_aname {
    config_upstream_t upstreams[CONFIG_MAX_UPSTREAMS]; /* tried in this order */
    size_t nupstreams;                                 /* 0 = none */
    char *state_file;       /* last good results kept here, owned; NULL = the default
                               (config_aname_state_file()) */
    unsigned ready_wait_ms; /* READY waits this long at most for the first round; default 5000 */
    unsigned max_stale_s;   /* results older than their TTL plus this are not loaded; 86400 */
} config_aname_t;

/* More than the schema's options (config.c checks): each has an origin slot in config_t. */
#define CONFIG_MAX_OPTIONS 96

/* Where config_load() set an option, so that a check made later (config_check_runtime()) can
 * name the line of a value it finds wrong. Read it through config_line_of(). */
typedef struct config_origin {
    uint32_t line;  /* 1-based line in config_t.file; 0 = not set by the file */
    uint64_t value; /* a hash of the value set there: a different value now was set since */
} config_origin_t;

/* latency_map: the operator's latency map (issue 33, tern/geo/latency_map.h), read at start
 * and on every reload (SIGHUP): from a file, or from a Redis string in the redis: server (the
 * same text). Both NULL: none. config_latency.c. */
typedef struct config_latency_map {
    char *file;      /* resolved path */
    char *redis_key; /* the key, as given (redis: prefix not applied) */
} config_latency_map_t;
/* "steering:" (config_steering.c): server-wide defaults of issue 33's steering rules. */
typedef struct config_steering {
    uint32_t sticky_prefix_v4; /* 1..32, default 24: the IPv4 network the sticky order hashes */
    uint32_t sticky_prefix_v6; /* 1..128, default 56 */
} config_steering_t;

typedef struct config {
    config_listen_t listen[CONFIG_MAX_LISTEN];
    size_t nlisten;
    /* xdp: listen: interfaces answered over AF_XDP (restart-only); none = sockets only */
    char xdp_listen[CONFIG_MAX_XDP][CONFIG_XDP_IFNAME_MAX + 1];
    size_t nxdp;
    unsigned workers;              /* 1..CONFIG_MAX_WORKERS */
    uint16_t edns_max_udp;         /* 512..4096, default 1232 */
    char *identity;                /* NULL if unset; at most 255 bytes */
    char *version;                 /* NULL if unset; at most 255 bytes */
    unsigned tcp_idle_timeout;     /* seconds, default 10 */
    unsigned tcp_max_connections;  /* per worker, default 256 */
    unsigned tcp_max_lifetime;     /* seconds from accept to close, default 120 */
    unsigned tcp_max_inflight;     /* answers queued per connection before it pauses, default 64 */
    bool udp_mmsg;                 /* recvmmsg/sendmmsg (default) or recvmsg/sendmsg */
    unsigned udp_steering;         /* config_udp_steering_t: which worker a datagram goes to */
    unsigned udp_busy_poll_us;     /* SO_BUSY_POLL on UDP sockets: µs; 0 (default) = off */
    unsigned udp_busy_poll_budget; /* SO_BUSY_POLL_BUDGET: packets per poll, default 64 */
    bool udp_prefer_busy_poll;     /* SO_PREFER_BUSY_POLL (default true when busy polling) */
    unsigned udp_rcvbuf;           /* SO_RCVBUF(FORCE) of UDP sockets, bytes; 0 = kernel's */
    unsigned udp_sndbuf;           /* SO_SNDBUF(FORCE) of UDP sockets, bytes; 0 = kernel's */
    unsigned dnssec_lifetime;      /* seconds a signature is valid, default 14 days */
    unsigned dnssec_refresh;       /* re-sign when less remains, default 7 days */
    unsigned dnssec_cache;         /* per-query signatures cached per worker, default 16384 */
    config_zone_t *zones;
    size_t nzones;
    config_catalog_t *catalogs; /* catalog zones tern produces (RFC 9432) */
    size_t ncatalogs;
    /* TSIG keys (RFC 8945) for transfers and NOTIFY: tsig_keys and the BIND key files of
     * tsig_key_file, one name each */
    struct tsig_key *tsig_keys;
    size_t ntsig_keys;
    unsigned xfr_journal_versions;  /* changes kept per zone for IXFR, default 64; 0 = AXFR only */
    unsigned xfr_journal_mib;       /* and at most this many MiB of them per zone, default 64 */
    unsigned xfr_max_mib;           /* memory a transfer in may take, MiB, default 1024 */
    unsigned xfr_notify_retries;    /* NOTIFY sends to a secondary until it answers, default 5 */
    unsigned xfr_notify_timeout_ms; /* between those, default 2000 */
    unsigned xfr_timeout_ms;        /* a step of a transfer in (SOA query, connect, one
                                       message) not done in this long fails it, default 10000 */
    unsigned xfr_total_timeout_ms;  /* a whole transfer in, default 600000 */
    unsigned xfr_in_concurrency;    /* secondary zones refreshed at once, default 8 */
    unsigned update_max_records;    /* prerequisites + updates in one UPDATE, default 1000 */
    unsigned update_rate;           /* changes a second per TSIG key (or address), default 50 */
    unsigned zonefile_sync;         /* s between writing changed zone files back; 0 = only on
                                       `ternctl zone flush` (the journal keeps every change) */
    log_level_t log_level;          /* default LOG_LVL_INFO */
    log_target_t log_target;        /* default LOG_TARGET_STDERR */
    char *user;                     /* account to switch to after binding; NULL = stay */
    char *group;                    /* group to switch to; NULL = the user's primary group */
    bool allow_root;                /* may keep running as uid 0; default false */
    char *pid_file;                 /* resolved path; NULL = write none */
    char *control_socket;           /* resolved path of the ternctl UNIX socket; NULL = disabled */
    char *metrics_listen;         /* "ADDR:PORT" (valid for config_parse_listen); NULL = disabled */
    char *asn_table;              /* resolved path of the compiled IP-to-ASN table; NULL = none */
    char *asn_db;                 /* resolved path of a MaxMind ASN .mmdb (compiled and cached) */
    char *geoip_db;               /* MaxMind DB for IPv4 clients (and IPv6 if it is an IPv6 DB) */
    char *geoip_db_v6;            /* MaxMind DB for IPv6 clients; NULL = geoip_db if IPv6 */
    config_redis_t redis;         /* the Redis zone source; redis.enabled false = none */
    config_health_t health;       /* health checks; health.enabled false = none */
    config_acl_t acl;             /* the global access list; acl.enabled false = none */
    config_ratelimit_t ratelimit; /* redins' per-client rate limit */
    config_rrl_t rrl;             /* response rate limiting */
    config_cookies_t cookies;     /* DNS Cookies */
    config_steering_t steering;   /* issue 33's rules: server-wide defaults (config_steering.c) */
    config_aname_t aname;         /* upstreams for out-of-zone ANAME targets; nupstreams 0 = none;
                                     a reload may change them */
    config_qlog_t qlog;           /* query logging: dnstap and the request log; enabled false
                                     = none; restart-only */
    config_tls_t tls;             /* DoT listeners and credentials (tern/net/tls.h); nlisten 0 =
                                     none; restart-only (SIGHUP re-reads the files) */
    config_api_t api;             /* the HTTP API (tern/api/api.h); listen NULL = none;
                                     restart-only */
    config_latency_map_t latency_map; /* geo_filter latency's map; file and redis_key NULL = none */
    config_dnssec_policy_t *dnssec_policies; /* the key policies zones may name */
    size_t ndnssec_policies;
    char *dnssec_state_dir;        /* keys and key states of zones with a policy; NULL: the default
                                      (config_dnssec_state_dir()) */
    unsigned tcp_max_per_client;   /* TCP connections of one client prefix (all workers);
                                      default 64, 0 = no cap; restart-only */
    unsigned tcp_client_prefix_v4; /* what "one client" is for that cap: default /32 */
    unsigned tcp_client_prefix_v6; /* default /64 */
    char *file;                    /* the config file last loaded; NULL = none */
    config_origin_t origin[CONFIG_MAX_OPTIONS]; /* by schema row; see config_line_of() */
} config_t;

/** dst (owning nothing) gets a copy of src's prefixes. 0 or TERN_ENOMEM (dst empty). */
int config_prefix_list_copy(config_prefix_list_t *dst, const config_prefix_list_t *src) TERN_WUR;

/**
 * Parse "ADDR" or "ADDR@PORT" (numeric IPv4 or IPv6, port 1..65535, default 53) into p's address
 * and text (p->key and p->line untouched). 0 or TERN_EINVAL.
 */
int config_parse_xfr_peer(config_xfr_peer_t *p, const char *text) TERN_WUR;

/** The TSIG key called name (case-insensitive, without a final dot), or NULL. */
const struct tsig_key *config_tsig_key(const config_t *c, const char *name);

/**
 * Every TSIG key a zone names (primary, notify, transfer_key) is defined. 0, or TERN_EINVAL with
 * "file:line: zone Z: ..." in err. config_load() checks this at the end of each file.
 */
int config_xfr_check(const config_t *c, const char *file, char *err, size_t errlen) TERN_WUR;

/** Defaults from the schema: no listen, workers = 1, edns 1232, tcp idle 10 s / 256 connections /
 * lifetime 120 s / 64 in flight / 64 per client (/32, /64), udp_mmsg, log info to stderr,
 * allow_root false, every string NULL, no Redis (redis.enabled false, redis.zone_reload_s 600,
 * everything else 0/NULL), no health checks; no acl, ratelimit, rrl or cookies (each enabled
 * false, its other fields the defaults of a given block, lists empty); no ANAME upstreams
 * (aname.nupstreams 0, every host NULL); no query logging (qlog.enabled and qlog.requests
 * false, every string NULL, no excluded zones; sample 1, ring_kib 4096, dnstap_queries and
 * dnstap_responses true, requests_target file, requests_format json). */
void config_init(config_t *c);

/**
 * Parse YAML file path into c (initialised by config_init()). Keys present in the file replace
 * the values in c; a "listen" (or redins "server") key replaces the whole listen list, a "redis"
 * (or redins "handler") key every redis setting; zones are appended. Relative paths (zone files,
 * pid_file, control_socket, the databases, a redins UNIX socket address) are resolved against the
 * directory of path.
 * Returns 0, or a negative TERN_E* code with "file:line: message" in err (the message names the
 * key). On error c may be partly filled; config_free() it as usual.
 */
int config_load(config_t *c, const char *path, char *err, size_t errlen) TERN_WUR;

/**
 * The line of c->file where option key (e.g. "user") got its current value, or 0 when the value
 * did not come from that file: never set there, or replaced since (main.c applies the command
 * line over the file). Only options with a value of their own have lines (not listen, zones,
 * redis or redins' keys).
 */
size_t config_line_of(const config_t *c, const char *key);

/**
 * Check what the config names outside ternd before anything depends on it, so that a mistake
 * is reported at startup (and by --check-config) instead of after binding: user and group must
 * exist (as getpwnam()/getgrnam() see them), and the directories of pid_file and control_socket
 * must exist or be creatable (their parent exists). With create_dirs, such a missing directory
 * is created (one level, mode 0755) and, when running as root with user or group set, given to
 * them, so the pid file can be removed and the socket made after privileges are dropped; an
 * existing directory is never changed. Without create_dirs nothing is changed (--check-config):
 * a directory to be created is only logged.
 * Returns 0, or a negative TERN_E* code with every problem in err ("file:line: user 'x': no such
 * user; ..."; a value not from the file names its flag instead, "user 'x' (--user): ...").
 */
int config_check_runtime(const config_t *c, bool create_dirs, char *err, size_t errlen) TERN_WUR;

/**
 * What a start requires of the complete config (the file with the command line applied over
 * it) beyond the schema: a listen address. Startup, --check-config and every reload call it,
 * so a reload refuses exactly what a start refuses and keeps the old config (`ternctl
 * check-config` does not: the file may be meant for a command line with --listen). Returns 0,
 * or TERN_EINVAL with the reason in err.
 */
int config_check_complete(const config_t *c, char *err, size_t errlen) TERN_WUR;

struct passwd;
struct group;

/** The account a `user` value names: a name, or else a number taken as a uid (the schema says
 * "name or uid"). NULL when there is none. Not reentrant (getpwnam/getpwuid). */
const struct passwd *config_user(const char *user);

/** The group a `group` value names, by name or else gid; NULL when there is none. */
const struct group *config_group(const char *group);

/**
 * Parse "ADDR:PORT" (IPv4) or "[V6]:PORT" into l, with udp and tcp true; a port is always
 * required ("::1" alone is an error), 0 means ephemeral. 0 or TERN_EINVAL.
 */
int config_parse_listen(config_listen_t *l, const char *text) TERN_WUR;

/**
 * Parse an address prefix into p: "192.0.2.0/24", "2001:db8::/32", or a bare address (a
 * full-length prefix). The length is decimal, 0..32 (IPv4) or 0..128 (IPv6); the bits past it
 * must be zero ("192.0.2.1/24" is refused, as Knot does, rather than silently widened). 0, or
 * TERN_EINVAL with why (whylen bytes) saying what is wrong, e.g. "host bits set; did you mean
 * 192.0.2.0/24?".
 */
int config_parse_prefix(config_prefix_t *p, const char *text, char *why, size_t whylen) TERN_WUR;

/** Append a UDP+TCP listen address (parsed as config_parse_listen). 0, TERN_EINVAL or
 * TERN_ELIMIT. */
int config_add_listen(config_t *c, const char *text) TERN_WUR;

/** Append a zone (copies strings); a file name ending in ".json" is a redins-schema JSON zone,
 * anything else a master file. 0 or TERN_ENOMEM. */
int config_add_zone(config_t *c, const char *origin, const char *file) TERN_WUR;

/** Append a zone in the given format. 0 or TERN_ENOMEM. */
int config_add_zone_format(config_t *c, const char *origin, const char *file,
                           config_zone_format_t format) TERN_WUR;

/** Number of usable CPUs (the value of workers: "auto"), clamped to 1..CONFIG_MAX_WORKERS. */
unsigned config_auto_workers(void);

/**
 * Whether a and b have the same workers and the same listen list: same length, and entry by entry
 * (in order) the same address, port and udp/tcp flags. The text as written is not compared. At
 * reload, false means the new listen setup needs a restart.
 */
bool config_same_listen(const config_t *a, const config_t *b);

/**
 * The options bound at startup (listen, workers, the tcp_* and udp_mmsg socket settings, user,
 * group, allow_root, pid_file, control_socket, metrics_listen, query_log (all of config_qlog_t,
 * whichever key set it: a redins log too): the schema marks them) whose value differs between
 * from and to, by key in schema order, comma-separated into buf ("tcp_max_lifetime,
 * tcp_max_inflight"; "" when none; cut short if len is too small, 320 holds them all). Returns
 * how many differ. At reload, a non-zero count means those settings apply only on restart.
 */
size_t config_restart_only_changes(const config_t *from, const config_t *to, char *buf, size_t len);

/* config_redis_t as a value (free, copy, compare): tern/redis/redis_settings.h. */

/**
 * Whether a and b attach the same checks to records: enabled alike and the same checks list
 * (entry by entry: spec, owner). At reload, false means every zone must be built again so its
 * records get the new endpoints; the other health settings apply without rebuilding.
 */
bool config_same_health_checks(const config_health_t *a, const config_health_t *b);

/**
 * Whether a and b are the same ANAME upstreams: the same count and, entry by entry (in order),
 * the same host text, port, protocol and timeout. At reload, false means the resolver must take
 * the new list (no restart is needed).
 */
bool config_same_aname(const config_aname_t *a, const config_aname_t *b);

/**
 * "$STATE_DIRECTORY/leaf" (the first directory of systemd's StateDirectory= list) into buf (len
 * bytes): the default place of a state file. NULL when systemd gives none or it does not fit.
 */
const char *config_state_path(const char *leaf, char *buf, size_t len);

/**
 * Where the ANAME results are kept: a->state_file, else "$STATE_DIRECTORY/aname.state" when
 * systemd gives ternd a state directory (StateDirectory=; the first of a list), else NULL (none).
 * buf (len bytes) holds the default; NULL too when it does not fit.
 */
const char *config_aname_state_file(const config_aname_t *a, char *buf, size_t len);

/**
 * Whether a and b are the same query logging: every field of config_qlog_t equal (strings by
 * content, NULL only equal to NULL; the excluded zones in order). At reload, false means the new
 * query_log applies only on restart (config_restart_only_changes() names it).
 */
bool config_same_qlog(const config_qlog_t *a, const config_qlog_t *b);

/**
 * Deep copy of src into dst (strings, zones with their acls, the redis and health strings, the
 * ANAME upstreams' hosts, query logging's paths and excluded zones and every prefix list
 * duplicated). dst must hold no
 * allocations (uninitialised, or after config_init()/config_free()); it is overwritten. 0, or
 * TERN_ENOMEM with dst left as after config_init().
 */
int config_copy(config_t *dst, const config_t *src) TERN_WUR;

/** The settings of the workers and their sockets (server_bind()): c's values, listen pointing
 * into c->listen (c must outlive the server). */
server_settings_t config_server_settings(const config_t *c);

/**
 * limit_new() with the settings of c: the global acl, ratelimit, rrl and cookies, and the acl of
 * every zone that has one. NULL when nothing is configured, or with *rc TERN_ENOMEM.
 */
limit_t *config_limit_new(limit_shared_t *sh, const config_t *c, int *rc) TERN_WUR;

/** Print every option of the schema with its default, bounds and description (for --help),
 * then the redins-style keys and what they map to. */
void config_schema_print(FILE *out);

/** Release strings and arrays (zones' acls, every prefix list, the ANAME upstreams' hosts and
 * query logging's strings and excluded zones too); c is left as after config_init(). */
void config_free(config_t *c);

#endif
