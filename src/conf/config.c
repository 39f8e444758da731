/*
 * config.c — the YAML/JSON configuration, driven by one schema table.
 *
 * libyaml loads the whole file into a node tree (configs are small), and every node carries its
 * start mark, so each error can name file:line. The schema below is the only place an option is
 * described: its defaults feed config_init(), its types and bounds drive parsing and validation,
 * its string options drive config_copy() and config_free(), and its descriptions are what
 * config_schema_print() shows. Nested mappings (a zone, a listen entry) have small field tables
 * of their own, checked by config_get_fields(), so an unknown or duplicate key is an error at any
 * depth. The "redis" mapping has a schema of its own (config_redis_schema, the same opt_t rows
 * with offsets into config_redis_t), and so has "health" (config_health.c's rows, offsets into
 * config_health_t), which this file only finds, copies, frees, compares and prints; so have
 * the flood-resistance blocks (config_limit.c: "acl", a zone's "acl", "ratelimit", "rrl",
 * "cookies"), "aname" (config_aname.c: the upstreams of ANAME targets) and "query_log"
 * (config_qlog.c: dnstap and the request log, which redins' "log" blocks fill too).
 *
 * redins' config.json keys (server, error_log, handler, geoip, healthcheck, upstream, log) have
 * rows in the schema, so they are found, refused twice and printed like any option, but what they
 * map onto is config_redins.c's business (the request log "log" is config_qlog.c's);
 * config_parse.h is what these files share.
 */
#include "tern/conf/config.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <yaml.h>

#include "config_parse.h"
#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/common/log.h"
#include "tern/common/hash.h"

#define FIELD(f)  .offset = offsetof(config_t, f), .size = sizeof(((config_t *)0)->f)
#define RFIELD(f) .offset = offsetof(config_redis_t, f), .size = sizeof(((config_redis_t *)0)->f)

_Static_assert(sizeof(log_level_t) == sizeof(uint32_t) && sizeof(log_target_t) == sizeof(uint32_t),
               "OPT_ENUM fields are stored as 32-bit integers");

/* RFC 1035 §3.3: a CHAOS TXT answer is one <character-string>, at most 255 bytes. */
#define TXT_MAX 255
/* LOGIN_NAME_MAX: the longest user or group name the C library handles. */
#define NAME_MAX_LEN (LOGIN_NAME_MAX - 1)
/* Redis accepts much longer strings; 1024 bytes is beyond any real password, key prefix or
 * channel name and keeps messages about them printable. */
#define REDIS_STR_MAX 1024
/* A config of tens of thousands of zones is a few MiB; 64 MiB refuses a runaway file before
 * libyaml builds a node tree of it. */
#define CONFIG_FILE_MAX (64u << 20)

static const char *const redis_read_from_names[] = {"primary", "replica"};
static const char *const udp_steering_names[] = {"hash", "random", "cpu"};

const opt_t config_redis_schema[RS_COUNT] = {
    [RS_ADDRESS] = {.key = "address",
                    .type = OPT_REDIS_ADDR,
                    .desc = "\"HOST:PORT\", \"[V6]:PORT\" or /path/of/redis.sock; default "
                            "127.0.0.1:6379"},
    [RS_DB] = {.key = "db",
               .type = OPT_UINT,
               RFIELD(db),
               .max = CONFIG_REDIS_MAX_DB,
               .desc = "database to SELECT"},
    [RS_PASSWORD] = {.key = "password",
                     .type = OPT_STR,
                     RFIELD(password),
                     .max = REDIS_STR_MAX,
                     .empty_unsets = true,
                     .desc = "AUTH password; unset or \"\" = no AUTH"},
    [RS_PREFIX] = {.key = "prefix",
                   .type = OPT_STR,
                   RFIELD(prefix),
                   .max = REDIS_STR_MAX,
                   .empty_unsets = true,
                   .desc = "put before every key (redins' prefix)"},
    [RS_SUFFIX] = {.key = "suffix",
                   .type = OPT_STR,
                   RFIELD(suffix),
                   .max = REDIS_STR_MAX,
                   .empty_unsets = true,
                   .desc = "put after every key (redins' suffix)"},
    [RS_CONNECT_TIMEOUT] = {.key = "connect_timeout",
                            .type = OPT_UINT,
                            RFIELD(connect_timeout_ms),
                            .max = REDIS_TIMEOUT_MAX,
                            .desc = "milliseconds to connect; 0 = 2000"},
    [RS_READ_TIMEOUT] = {.key = "read_timeout",
                         .type = OPT_UINT,
                         RFIELD(read_timeout_ms),
                         .max = REDIS_TIMEOUT_MAX,
                         .desc = "milliseconds for each reply; 0 = 5000"},
    /* redins' handler default: its zone list was reloaded every 600 s */
    [RS_ZONE_RELOAD] = {.key = "zone_reload",
                        .type = OPT_UINT,
                        RFIELD(zone_reload_s),
                        .def = 600,
                        .max = ZONE_RELOAD_MAX,
                        .desc = "seconds between verifies of every zone; 0 = never"},
    [RS_CHANGES_CHANNEL] = {.key = "changes_channel",
                            .type = OPT_STR,
                            RFIELD(changes_channel),
                            .max = REDIS_STR_MAX,
                            .desc = "where writers PUBLISH changed zones; unset = "
                                    "<prefix>redins:zones:changed<suffix>, \"\" = none"},
    [RS_DEFAULT_TTL] = {.key = "default_ttl",
                        .type = OPT_UINT,
                        RFIELD(default_ttl),
                        .max = TTL_MAX,
                        .desc = "TTL of RRsets that give none; 0 = 300"},
    [RS_MAX_TTL] = {.key = "max_ttl",
                    .type = OPT_UINT,
                    RFIELD(max_ttl),
                    .max = TTL_MAX,
                    .desc = "cap on every RRset's TTL (redins' max_ttl); 0 = none"},
    /* Bounds on untrusted Redis data: whoever can write to Redis must not be able to make the
     * source read or build without limit. The defaults fit a 1,000,000-label zone with room to
     * spare; the maxima are Redis' own (512 MiB strings) or what a zone can index. */
    [RS_MAX_VALUE_BYTES] = {.key = "max_value_bytes",
                            .type = OPT_UINT,
                            RFIELD(max_value_bytes),
                            .def = 1 << 20,
                            .min = 1024,
                            .max = 512 << 20,
                            .desc = "bytes of one label's JSON or a zone config; longer ones "
                                    "are skipped and logged"},
    [RS_MAX_LABELS] = {.key = "max_labels",
                       .type = OPT_UINT,
                       RFIELD(max_labels),
                       .def = 4000000,
                       .min = 1,
                       .max = 100000000,
                       .desc = "labels of one zone; a larger zone is rejected (its previous "
                               "version keeps serving)"},
    [RS_MAX_RRSET_RECORDS] = {.key = "max_rrset_records",
                              .type = OPT_UINT,
                              RFIELD(max_rrset_records),
                              .def = 10000,
                              .min = 1,
                              .max = 65535,
                              .desc = "records of one RRset; a label with more is skipped and "
                                      "logged"},
    [RS_MAX_ZONES] = {.key = "max_zones",
                      .type = OPT_UINT,
                      RFIELD(max_zones),
                      .def = 100000,
                      .min = 1,
                      .max = 10000000,
                      .desc = "zones read from the set; the ones beyond are skipped and logged"},
    [RS_SENTINEL] = {.key = "sentinel",
                     .type = OPT_CUSTOM,
                     .desc = "{addresses: [\"IP:PORT\", ...], master, password}: ask Redis "
                             "Sentinel for the node and follow its failovers; not with address"},
    [RS_READ_FROM] = {.key = "read_from",
                      .type = OPT_ENUM,
                      RFIELD(read_from),
                      .names = redis_read_from_names,
                      .max = 1,
                      .desc = "read zones from the primary or a replica Sentinel names "
                              "(replica needs sentinel)"},
};

_Static_assert(sizeof(unsigned) == sizeof(uint32_t),
               "config_redis_schema stores unsigned as 32 bits");

static const opt_t schema[] = {
    {.key = "listen",
     .type = OPT_LISTEN,
     .group = GROUP_LISTEN,
     .restart = true,
     .desc = "addresses to serve: \"ADDR:PORT\", \"[V6]:PORT\" or {address, udp, tcp}; one or a "
             "list"},
    {.key = "workers",
     .type = OPT_WORKERS,
     FIELD(workers),
     .def = 1,
     .min = 1,
     .max = CONFIG_MAX_WORKERS,
     .restart = true,
     .desc = "worker threads, each with its own sockets; \"auto\" = one per usable CPU"},
    {.key = "zones", .type = OPT_ZONES, .desc = "list of zones, each a mapping of these keys"},
    /* 512 is the RFC 1035 floor; 4096 the largest payload the UDP buffers are sized for. */
    {.key = "edns_max_udp",
     .type = OPT_UINT,
     FIELD(edns_max_udp),
     .def = 1232,
     .min = 512,
     .max = 4096,
     .desc = "EDNS UDP payload size advertised and the cap on the client's (bytes)"},
    {.key = "identity",
     .type = OPT_STR,
     FIELD(identity),
     .max = TXT_MAX,
     .desc = "CHAOS TXT id.server / hostname.bind answer; unset = REFUSED"},
    {.key = "version",
     .type = OPT_STR,
     FIELD(version),
     .max = TXT_MAX,
     .desc = "CHAOS TXT version.bind answer; unset = REFUSED"},
    /* RFC 6781 §4.4.2: signatures valid for weeks, refreshed halfway, ride out a signer that
     * stops; a year is the sanity cap, an hour the least that survives clock skew. */
    {.key = "dnssec_lifetime",
     .type = OPT_UINT,
     FIELD(dnssec_lifetime),
     .def = 14 * 86400,
     .min = 3600,
     .max = 366 * 86400,
     .desc = "seconds a DNSSEC signature tern makes is valid"},
    {.key = "dnssec_refresh",
     .type = OPT_UINT,
     FIELD(dnssec_refresh),
     .def = 7 * 86400,
     .min = 600,
     .max = 365 * 86400,
     .desc = "make signatures again when less than this (seconds) remains"},
    /* An entry is about 600 bytes, touched only when used: 16384 is 10 MiB at most per worker,
     * room for the subsets of thousands of steered names. */
    {.key = "dnssec_cache",
     .type = OPT_UINT,
     FIELD(dnssec_cache),
     .def = 16384,
     .min = 2,
     .max = 1u << 24,
     .restart = true,
     .desc = "per-query DNSSEC signatures each worker keeps (a power of two)"},
    /* RFC 7766 §6.2.3 wants idle timeouts of seconds, not minutes: an hour is the sanity cap. */
    {.key = "tcp_idle_timeout",
     .type = OPT_UINT,
     FIELD(tcp_idle_timeout),
     .def = 10,
     .min = 1,
     .max = 3600,
     .restart = true,
     .desc = "seconds a TCP connection may stay without a complete query or write progress"},
    /* Each connection preallocates two 64 KiB buffers; 65536 per worker is already 8 GiB. */
    {.key = "tcp_max_connections",
     .type = OPT_UINT,
     FIELD(tcp_max_connections),
     .def = 256,
     .min = 1,
     .max = 65536,
     .restart = true,
     .desc = "TCP connections per worker; when full a newcomer takes an idle one's place, or is "
             "closed"},
    /* The idle timeout alone lets a peer that keeps querying hold a slot forever; a total
     * lifetime bounds that, as NSD bounds a session by tcp-timeout (default 120 s) and
     * tcp-query-count, and Knot each message by tcp-io-timeout (500 ms). 120 s, NSD's default, is
     * far beyond one client's burst of pipelined queries; a day is the sanity cap. */
    {.key = "tcp_max_lifetime",
     .type = OPT_UINT,
     FIELD(tcp_max_lifetime),
     .def = 120,
     .min = 1,
     .max = 86400,
     .restart = true,
     .desc = "seconds a TCP connection may stay open from accept, however busy it is"},
    /* Answers queued but not yet taken by the kernel: past this a connection stops reading
     * (backpressure) until the peer takes its answers. 64 coalesces a pipelining client's answers
     * into few writes while bounding the work one peer can make us queue ahead of it; beyond
     * 4681 (the 64 KiB write queue full of minimal answers) the value changes nothing. */
    {.key = "tcp_max_inflight",
     .type = OPT_UINT,
     FIELD(tcp_max_inflight),
     .def = 64,
     .min = 1,
     .max = 65535,
     .restart = true,
     .desc = "answers queued on one TCP connection, unwritten, before it stops reading"},
    /* One client (an address, or with IPv6 a /64: one host's privacy addresses) filling the TCP
     * pools would lock every other client out; 64 connections is more than any resolver pipelines
     * over. The count is kept in a fixed table sized at startup (limit.h), hence restart-only. */
    {.key = "tcp_max_per_client",
     .type = OPT_UINT,
     FIELD(tcp_max_per_client),
     .def = 64,
     .max = 65535,
     .restart = true,
     .desc = "TCP connections one client prefix may hold over all workers; 0 = no cap"},
    {.key = "tcp_client_prefix_v4",
     .type = OPT_UINT,
     FIELD(tcp_client_prefix_v4),
     .def = 32,
     .min = 8,
     .max = 32,
     .restart = true,
     .desc = "IPv4 prefix length that is one client for tcp_max_per_client"},
    {.key = "tcp_client_prefix_v6",
     .type = OPT_UINT,
     FIELD(tcp_client_prefix_v6),
     .def = 64,
     .min = 16,
     .max = 128,
     .restart = true,
     .desc = "IPv6 prefix length that is one client for tcp_max_per_client"},
    {.key = "udp_mmsg",
     .type = OPT_BOOL,
     FIELD(udp_mmsg),
     .def = 1,
     .restart = true,
     .desc = "batch UDP with recvmmsg/sendmmsg; false = one recvmsg/sendmsg per datagram"},
    /* restart-only: the steering program is attached when the sockets are bound */
    {.key = "udp_steering",
     .type = OPT_ENUM,
     FIELD(udp_steering),
     .def = CONFIG_UDP_STEER_HASH,
     .max = CONFIG_UDP_STEER_CPU,
     .names = udp_steering_names,
     .restart = true,
     .desc = "a datagram's worker: hash (one client, one worker), random (even), cpu (the "
             "receiving CPU's, pinned)"},
    {.key = "log_level",
     .type = OPT_ENUM,
     FIELD(log_level),
     .def = LOG_LVL_INFO,
     .max = LOG_LVL_COUNT - 1,
     .names = log_level_names,
     .group = GROUP_LOG,
     .desc = "log messages up to this severity"},
    {.key = "log_target",
     .type = OPT_ENUM,
     FIELD(log_target),
     .def = LOG_TARGET_STDERR,
     .max = LOG_TARGET_COUNT - 1,
     .names = log_target_names,
     .group = GROUP_LOG,
     .desc = "where log lines go; syslog uses facility daemon"},
    {.key = "user",
     .type = OPT_STR,
     FIELD(user),
     .min = 1,
     .max = NAME_MAX_LEN,
     .restart = true,
     .desc = "account (name or uid) to switch to once sockets are bound; unset = stay"},
    {.key = "group",
     .type = OPT_STR,
     FIELD(group),
     .min = 1,
     .max = NAME_MAX_LEN,
     .restart = true,
     .desc = "group (name or gid) to switch to; unset = the user's primary group"},
    {.key = "allow_root",
     .type = OPT_BOOL,
     FIELD(allow_root),
     .def = 0,
     .restart = true,
     .desc = "allow serving as root (no user, or user root); false refuses to"},
    {.key = "pid_file",
     .type = OPT_PATH,
     FIELD(pid_file),
     .min = 1,
     .max = PATH_MAX - 1,
     .restart = true,
     .desc = "file to write the pid to, relative to the config file's directory; unset = none"},
    {.key = "control_socket",
     .type = OPT_PATH,
     FIELD(control_socket),
     .min = 1,
     .max = SUN_PATH_MAX,
     .restart = true,
     .desc = "UNIX socket for ternctl, relative to the config file's directory; unset = none"},
    {.key = "asn_table",
     .type = OPT_PATH,
     FIELD(asn_table),
     .min = 1,
     .max = PATH_MAX - 1,
     .desc = "IP-to-ASN table from 'ternctl asn compile', relative to the config; unset = none"},
    {.key = "asn_db",
     .type = OPT_PATH,
     FIELD(asn_db),
     .min = 1,
     .max = PATH_MAX - 1,
     .claim = CLAIM_ASN_DB,
     .desc = "MaxMind ASN database (GeoLite2-ASN .mmdb), compiled into an ASN table cached "
             "beside it; unset = none"},
    {.key = "geoip_db",
     .type = OPT_PATH,
     FIELD(geoip_db),
     .min = 1,
     .max = PATH_MAX - 1,
     .claim = CLAIM_GEOIP_DB,
     .desc = "MaxMind DB for clients' country/location (IPv6 too if a v6 DB); unset = none"},
    {.key = "geoip_db_v6",
     .type = OPT_PATH,
     FIELD(geoip_db_v6),
     .min = 1,
     .max = PATH_MAX - 1,
     .desc = "MaxMind DB for IPv6 clients, if in a separate file; unset = geoip_db"},
    {.key = "metrics_listen",
     .type = OPT_ADDR,
     FIELD(metrics_listen),
     .min = 1,
     .max = sizeof(((config_listen_t *)0)->text) - 1,
     .restart = true,
     .desc = "\"ADDR:PORT\" of the Prometheus HTTP endpoint (/metrics); unset = none"},
    {.key = "redis",
     .type = OPT_REDIS,
     .group = GROUP_REDIS,
     .desc = "zones kept in Redis (redins' layout): a mapping of these keys; unset or ~ = none"},
    {.key = "health",
     .type = OPT_HEALTH,
     .group = GROUP_HEALTH,
     .claim = CLAIM_HEALTH,
     .desc = "health checks of A/AAAA answers: a mapping of these keys; unset or ~ = none"},
    {.key = "acl",
     .type = OPT_ACL,
     .desc = "the access list of every query: a mapping of these keys (a zone's acl too); unset "
             "or ~ = none"},
    /* the same key, keys and meaning as in redins' config.json: not a redins-only row */
    {.key = "ratelimit",
     .type = OPT_RATELIMIT,
     .desc = "redins' per-client rate limit (the same key in its config.json): a mapping of "
             "these keys; unset or ~ = none"},
    {.key = "rrl",
     .type = OPT_RRL,
     .desc = "response rate limiting (as Knot and BIND): a mapping of these keys; unset or ~ = "
             "none"},
    {.key = "cookies",
     .type = OPT_COOKIES,
     .desc = "DNS Cookies (RFC 7873, RFC 9018 server cookies): a mapping of these keys; unset or "
             "~ = none"},
    /* not restart-only: a reload hands the resolver the new list */
    {.key = "aname",
     .type = OPT_ANAME,
     .claim = CLAIM_ANAME,
     .desc = "upstream servers for ANAME targets outside the served zones (never for client "
             "queries): a mapping of these keys; unset or ~ = none"},
    /* restart-only: the rings and the writer thread are made at startup (SIGHUP reopens the
     * files, for log rotation, whatever the config says) */
    {.key = "query_log",
     .type = OPT_QUERY_LOG,
     .restart = true,
     .desc = "query logging (dnstap, redins' request log); workers never wait (a full ring "
             "drops): a mapping of these keys; unset or ~ = none"},

    /* Zone transfers (tern/xfr): keys, then the bounds of the journal and of transfers in. A
     * zone's own settings are in its entry (primary, notify, allow_transfer, ...). */
    {.key = "tsig_keys",
     .type = OPT_TSIG_KEYS,
     .desc = "TSIG keys (RFC 8945) for transfers and NOTIFY: a list of {name, algorithm, "
             "secret}"},
    {.key = "tsig_key_file",
     .type = OPT_TSIG_KEY_FILE,
     .desc = "BIND key files (key \"name\" { algorithm ...; secret \"...\"; };), one or a list"},
    /* 64 versions cover an hour of minutely Redis changes; a secondary further behind gets
     * the zone whole (AXFR), which is always correct */
    {.key = "xfr_journal_versions",
     .type = OPT_UINT,
     FIELD(xfr_journal_versions),
     .def = 64,
     .min = 0,
     .max = 1000000,
     .desc = "changes kept per zone for IXFR; 0 = every transfer is AXFR"},
    {.key = "xfr_journal_mib",
     .type = OPT_UINT,
     FIELD(xfr_journal_mib),
     .def = 64,
     .min = 1,
     .max = 65536,
     .desc = "MiB of changes kept per zone at most (older ones go first)"},
    /* a transfer in that would take more memory than this is refused before it exhausts it
     * (xfr_in.c counts records as built): 1 GiB is a zone of ~7M A records, far beyond the
     * zones tern is tested with */
    {.key = "xfr_max_mib",
     .type = OPT_UINT,
     FIELD(xfr_max_mib),
     .def = 1024,
     .min = 1,
     .max = 1048576,
     .desc = "memory one zone transfer in may take, MiB; a larger one fails and the old "
             "version stays"},
    /* RFC 1996 §3.6: retry until answered, a few times, a few seconds apart */
    {.key = "xfr_notify_retries",
     .type = OPT_UINT,
     FIELD(xfr_notify_retries),
     .def = 5,
     .min = 1,
     .max = 100,
     .desc = "NOTIFY sends per change to a secondary that does not answer"},
    {.key = "xfr_notify_timeout_ms",
     .type = OPT_UINT,
     FIELD(xfr_notify_timeout_ms),
     .def = 2000,
     .min = 10,
     .max = 600000,
     .desc = "ms to wait for a NOTIFY answer before sending again"},
    {.key = "xfr_timeout_ms",
     .type = OPT_UINT,
     FIELD(xfr_timeout_ms),
     .def = 10000,
     .min = 100,
     .max = 3600000,
     .desc = "a step of a transfer in (the SOA query, the connect, one message) not done in "
             "this long fails it"},
    /* BIND's max-transfer-time-in: a primary that sends a small message now and then would
     * otherwise hold a transfer for ever. 10 min moves a zone of the default xfr_max_mib
     * (~190 MB of messages) at 2.5 Mbit/s */
    {.key = "xfr_total_timeout_ms",
     .type = OPT_UINT,
     FIELD(xfr_total_timeout_ms),
     .def = 600000,
     .min = 1000,
     .max = 86400000,
     .desc = "a transfer in (connect, request, every message) not done in this long fails"},
    /* Knot's background-workers bound refreshes the same way (at most 10 by default); each
     * transfer has its own xfr_max_mib */
    {.key = "xfr_in_concurrency",
     .type = OPT_UINT,
     FIELD(xfr_in_concurrency),
     .def = 8,
     .min = 1,
     .max = 64,
     .desc = "secondary zones refreshed at once: a slow or dead primary holds only its own"},

    /* redins's config.json: the keys that map onto the options above ... */
    {.key = "server",
     .type = OPT_SERVER,
     .group = GROUP_LISTEN,
     .desc = "list of {ip, port, protocol: udp|tcp}, into listen (same ip and port: one entry)"},
    {.key = "error_log",
     .type = OPT_ERROR_LOG,
     .group = GROUP_LOG,
     .desc = "{enable: true, level, target: stderr|stdout|syslog, format: text}, into log_*"},
    {.key = "handler",
     .type = OPT_HANDLER,
     .group = GROUP_REDIS,
     .desc = "{redis, zone_reload, max_ttl, geoip, upstream, ...}, into redis, geoip_db, asn_db, "
             "health and aname:"},
    /* older redins kept geoip, healthcheck and upstream at the top level */
    {.key = "geoip", .type = OPT_GEOIP, .desc = "(older redins) {enable, db}, into geoip_db"},
    {.key = "healthcheck",
     .type = OPT_HEALTHCHECK,
     .group = GROUP_HEALTH,
     .claim = CLAIM_HEALTH,
     .desc = "(older redins) {enable, max_requests, ..., redis, log}, into health:"},
    {.key = "upstream",
     .type = OPT_UPSTREAM,
     .claim = CLAIM_ANAME,
     .desc = "(older redins) list of {ip, port: 53, protocol: udp|tcp, timeout: 400 ms}, into "
             "aname: upstreams"},
    {.key = "log",
     .type = OPT_REDINS_LOG,
     .claim = CLAIM_REQLOG,
     .desc = "(older redins) the request log {enable, level, target, format, path, ...}, into "
             "query_log: requests"},
    /* (a redins key that did not map would be an OPT_LATER row here: refused, never ignored) */
};

#define NOPTS TERN_ARRAY_SIZE(schema)

_Static_assert(NOPTS <= CONFIG_MAX_OPTIONS, "config_t.origin has a slot for every option");

/* ---- errors and nodes --------------------------------------------------------------------- */

/* The longest message before escaping: two PATH_MAX paths (the file's name and a value) and the
 * words around them. Callers' buffers are smaller, so nothing they could hold is cut here. */
#define ERR_RAW_MAX (2 * PATH_MAX + 256)

/* fmt into err, its control characters escaped (tern_escape_controls()). */
static void set_err(char *err, size_t errlen, const char *fmt, ...) TERN_PRINTF(3, 4);

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    char raw[ERR_RAW_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    (void)tern_escape_controls(err, errlen, raw);
}

int config_fail(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *fmt, ...)
{
    char raw[ERR_RAW_MAX];
    int k = snprintf(raw, sizeof(raw), "%s:%zu: %s%s", pc->path, n->start_mark.line + 1,
                     key ? key : "", key ? ": " : "");
    if (k >= 0 && (size_t)k < sizeof(raw)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw + k, sizeof(raw) - (size_t)k, fmt, ap);
        va_end(ap);
    }
    (void)tern_escape_controls(pc->err, pc->errlen, raw);
    return TERN_ESYNTAX;
}

const char *config_node_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return is_plain(n) ? "a plain scalar" : "a string";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

/* "a, b or c" from count names. */
static void join_names(const char *const *names, size_t count, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < count && off < len; i++) {
        const char *sep = i == 0 ? "" : i + 1 == count ? " or " : ", ";
        int k = snprintf(buf + off, len - off, "%s%s", sep, names[i]);
        if (k < 0)
            break;
        off += (size_t)k;
    }
}

/* Plain decimal integer, optionally negative; anything else (hex, floats, quotes) is refused so
 * "10" in JSON or 1e3 in YAML are type errors rather than silent conversions. */
static bool parse_int(const yaml_node_t *n, long long *out)
{
    if (!is_plain(n))
        return false;
    const char *s = scalar(n);
    const char *p = s + (*s == '-');
    if (*p == '\0' || strspn(p, "0123456789") != strlen(p) || strlen(p) > 12)
        return false;
    *out = strtoll(s, NULL, 10);
    return true;
}

static bool parse_bool(const yaml_node_t *n, bool *out)
{
    if (is_plain(n) && strcasecmp(scalar(n), "true") == 0)
        *out = true;
    else if (is_plain(n) && strcasecmp(scalar(n), "false") == 0)
        *out = false;
    else
        return false;
    return true;
}

/* An integer in [min, max] at n, or an error naming key and field. */
int config_get_int(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                   long long min, long long max, long long *out)
{
    const char *sep = field ? ": " : "";
    field = field ? field : "";
    if (!parse_int(n, out)) {
        if (n->type == YAML_SCALAR_NODE)
            return config_fail(pc, n, key, "%s%sexpected an integer, got \"%s\"", field, sep,
                               scalar(n));
        return config_fail(pc, n, key, "%s%sexpected an integer, got %s", field, sep,
                           config_node_kind(n));
    }
    if (*out < min || *out > max)
        return config_fail(pc, n, key, "%s%s%lld is out of range %lld..%lld", field, sep, *out, min,
                           max);
    return 0;
}

int config_get_bool(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                    bool *out)
{
    if (!parse_bool(n, out))
        return config_fail(pc, n, key, "%s%sexpected true or false, got %s", field ? field : "",
                           field ? ": " : "", config_node_kind(n));
    return 0;
}

/* One of names (count of them), as its index. */
int config_get_enum(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                    const char *const *names, size_t count, size_t *out)
{
    const char *sep = field ? ": " : "";
    char want[128];
    field = field ? field : "";
    join_names(names, count, want, sizeof(want));
    if (!is_text(n))
        return config_fail(pc, n, key, "%s%sexpected %s, got %s", field, sep, want,
                           config_node_kind(n));
    for (size_t i = 0; i < count; i++) {
        if (strcmp(names[i], scalar(n)) == 0) {
            *out = i;
            return 0;
        }
    }
    return config_fail(pc, n, key, "%s%sexpected %s, got \"%s\"", field, sep, want, scalar(n));
}

/* ---- nested mappings ---------------------------------------------------------------------- */

/* Check that n is a mapping whose keys are among fields, each at most once, none refused, every
 * required one present; val[i] gets each field's value node or NULL. Errors are "key: ...". */
int config_get_fields(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const field_t *fields,
                      size_t nfields, const yaml_node_t **val)
{
    const char *names[MAX_FIELDS];
    const yaml_node_t *keys[MAX_FIELDS] = {NULL};
    size_t nnames = 0;
    char want[256];
    for (size_t i = 0; i < nfields; i++) {
        val[i] = NULL;
        if (!fields[i].later)
            names[nnames++] = fields[i].key;
    }
    want[0] = '\0';
    for (size_t i = 0, off = 0; i < nnames && off < sizeof(want); i++) {
        int k = snprintf(want + off, sizeof(want) - off, "%s%s", i ? ", " : "", names[i]);
        off += k < 0 ? sizeof(want) : (size_t)k;
    }
    if (n->type != YAML_MAPPING_NODE)
        return config_fail(pc, n, key, "expected a mapping {%s}, got %s", want,
                           config_node_kind(n));
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(pc, p->key);
        if (k->type != YAML_SCALAR_NODE)
            return config_fail(pc, k, key, "keys must be strings, got %s", config_node_kind(k));
        size_t i = 0;
        while (i < nfields && strcmp(fields[i].key, scalar(k)) != 0)
            i++;
        if (i == nfields)
            return config_fail(pc, k, key, "unknown key \"%s\" (want %s)", scalar(k), want);
        if (keys[i])
            return config_fail(pc, k, key, "duplicate key \"%s\" (first at line %zu)", scalar(k),
                               line_of(keys[i]));
        if (fields[i].later)
            return config_fail(pc, k, key, "%s: not supported yet (%s)", fields[i].key,
                               fields[i].later);
        keys[i] = k;
        val[i] = node(pc, p->value);
    }
    for (size_t i = 0; i < nfields; i++)
        if (fields[i].required && !val[i])
            return config_fail(pc, n, key, "missing \"%s\" (%s)", fields[i].key, fields[i].desc);
    return 0;
}

/* "key" for a single item, "key[index]" for an item of a sequence. */
void config_item_key(char *buf, size_t len, const char *key, const yaml_node_t *parent,
                     size_t index)
{
    if (parent->type == YAML_SEQUENCE_NODE)
        snprintf(buf, len, "%s[%zu]", key, index);
    else
        snprintf(buf, len, "%s", key);
}

/* Call fn for n's items if it is a sequence, else for n itself (index 0). */
int config_each_item(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n, item_fn fn)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fn(pc, o, n, n, 0);
    size_t index = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++, index++) {
        int r = fn(pc, o, n, node(pc, *it), index);
        if (r < 0)
            return r;
    }
    return 0;
}

char *config_resolve_path(const parse_ctx_t *pc, const char *path)
{
    if (path[0] == '/' || !pc->dir)
        return strdup(path);
    size_t dl = strlen(pc->dir), pl = strlen(path);
    char *joined = malloc(dl + pl + 1);
    if (joined) {
        memcpy(joined, pc->dir, dl);
        memcpy(joined + dl, path, pl + 1);
    }
    return joined;
}

/* ---- scalar options ----------------------------------------------------------------------- */

static char **str_field(config_t *c, const opt_t *o)
{
    return (char **)(void *)((char *)c + o->offset);
}

static const char *str_value(const config_t *c, const opt_t *o)
{
    const char *p;
    memcpy(&p, (const char *)c + o->offset, sizeof(p));
    return p;
}

static bool is_str_opt(const opt_t *o)
{
    return o->type == OPT_STR || o->type == OPT_PATH || o->type == OPT_ADDR;
}

/* v into the field of o in base (a config_t, or a config_redis_t for config_redis_schema). */
static void store_uint(void *base, const opt_t *o, long long v)
{
    char *field = (char *)base + o->offset;
    if (o->size == sizeof(uint16_t)) {
        uint16_t u = (uint16_t)v;
        memcpy(field, &u, sizeof(u));
    } else {
        uint32_t u = (uint32_t)v;
        memcpy(field, &u, sizeof(u));
    }
}

static int set_uint(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n, bool allow_auto)
{
    long long v = 0;
    if (allow_auto && n->type == YAML_SCALAR_NODE && strcmp(scalar(n), "auto") == 0) {
        store_uint(pc->c, o, config_auto_workers());
        return 0;
    }
    if (allow_auto && !parse_int(n, &v)) {
        if (n->type == YAML_SCALAR_NODE)
            return config_fail(pc, n, o->key, "expected an integer or \"auto\", got \"%s\"",
                               scalar(n));
        return config_fail(pc, n, o->key, "expected an integer or \"auto\", got %s",
                           config_node_kind(n));
    }
    int r = config_get_int(pc, n, o->key, NULL, o->min, o->max, &v);
    if (r < 0)
        return r;
    store_uint(pc->c, o, v);
    return 0;
}

static int set_bool(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n)
{
    bool v;
    int r = config_get_bool(pc, n, o->key, NULL, &v);
    if (r < 0)
        return r;
    memcpy((char *)pc->c + o->offset, &v, sizeof(v));
    return 0;
}

static int set_enum(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n)
{
    size_t v = 0;
    int r = config_get_enum(pc, n, o->key, NULL, o->names, (size_t)o->max + 1, &v);
    if (r < 0)
        return r;
    store_uint(pc->c, o, (long long)v);
    return 0;
}

/* An OPT_STR, OPT_PATH or OPT_ADDR value at n into *out, replacing it; null unsets it (NULL), and
 * so does "" for an empty_unsets option. Errors are "key: field: ..." (field may be NULL). */
int config_get_str(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                   const opt_t *o, char **out)
{
    const char *sep = field ? ": " : "";
    field = field ? field : "";
    if (n->type != YAML_SCALAR_NODE)
        return config_fail(pc, n, key, "%s%sexpected a string, got %s", field, sep,
                           config_node_kind(n));
    const char *s = scalar(n);
    if (is_null(n) || (o->empty_unsets && is_text(n) && *s == '\0')) {
        free(*out);
        *out = NULL;
        return 0;
    }
    if (!is_text(n))
        return config_fail(pc, n, key, "%s%scontains a NUL byte", field, sep);
    if ((long long)strlen(s) < o->min)
        return config_fail(pc, n, key, "%s%smust not be empty", field, sep);
    if (o->type == OPT_ADDR) {
        config_listen_t tmp;
        if (config_parse_listen(&tmp, s) < 0)
            return config_fail(pc, n, key, "%s%sbad address \"%s\" (want ADDR:PORT or [V6]:PORT)",
                               field, sep, s);
    }
    char *copy = o->type == OPT_PATH ? config_resolve_path(pc, s) : strdup(s);
    if (!copy)
        return TERN_ENOMEM;
    size_t len = strlen(copy);
    if ((long long)len > o->max) {
        int r = config_fail(pc, n, key, "%s%s\"%s\" is %zu bytes long, more than the %lld allowed",
                            field, sep, copy, len, o->max);
        free(copy);
        return r;
    }
    free(*out);
    *out = copy;
    return 0;
}

static int set_str(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n)
{
    return config_get_str(pc, n, o->key, NULL, o, str_field(pc->c, o));
}

/* The value of a nested schema's row o at n into its field in base: "key: o->key: ...". */
int config_get_row(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const opt_t *o,
                   void *base)
{
    char *field = (char *)base + o->offset;
    long long v = 0;
    size_t e = 0;
    bool b = false;
    int rc;
    switch (o->type) {
    case OPT_UINT:
        if ((rc = config_get_int(pc, n, key, o->key, o->min, o->max, &v)) == 0)
            store_uint(base, o, v);
        return rc;
    case OPT_BOOL:
        if ((rc = config_get_bool(pc, n, key, o->key, &b)) == 0)
            memcpy(field, &b, sizeof(b));
        return rc;
    case OPT_ENUM:
        if ((rc = config_get_enum(pc, n, key, o->key, o->names, (size_t)o->max + 1, &e)) == 0)
            store_uint(base, o, (long long)e);
        return rc;
    case OPT_STR:
    case OPT_PATH:
    case OPT_ADDR:
        return config_get_str(pc, n, key, o->key, o, (char **)(void *)field);
    default:
        return TERN_EINVAL; /* the caller parses the others itself */
    }
}

void config_set_defaults(void *base, const opt_t *rows, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const opt_t *o = &rows[i];
        if (o->size == 0)
            continue; /* no field of its own: its owner stores it */
        if (o->type == OPT_UINT || o->type == OPT_WORKERS || o->type == OPT_ENUM) {
            store_uint(base, o, o->def);
        } else if (o->type == OPT_BOOL) {
            bool v = o->def != 0;
            memcpy((char *)base + o->offset, &v, sizeof(v));
        }
    }
}

/* ---- listen ------------------------------------------------------------------------------- */

static uint16_t listen_port(const config_listen_t *e)
{
    if (e->addr.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&e->addr)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)&e->addr)->sin6_port);
}

/* Same family, address and port (the text as written does not matter). */
static bool same_endpoint(const config_listen_t *a, const config_listen_t *b)
{
    if (a->addr.ss_family != b->addr.ss_family)
        return false;
    if (a->addr.ss_family == AF_INET) {
        const struct sockaddr_in *x = (const struct sockaddr_in *)&a->addr;
        const struct sockaddr_in *y = (const struct sockaddr_in *)&b->addr;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)&a->addr;
    const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)&b->addr;
    return x->sin6_port == y->sin6_port &&
           memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
}

/* Append e, or merge it into an earlier entry for the same address and port when their
 * protocols do not overlap (redins lists UDP and TCP separately). The same protocol twice on a
 * fixed port is an error: SO_REUSEPORT would let both bind and silently split the traffic. Port 0
 * entries are each their own ephemeral port and never merge. */
int config_put_listen(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                      const config_listen_t *e)
{
    config_t *c = pc->c;
    for (size_t i = 0; i < c->nlisten && listen_port(e) != 0; i++) {
        config_listen_t *o = &c->listen[i];
        if (!same_endpoint(o, e))
            continue;
        if ((o->udp && e->udp) || (o->tcp && e->tcp))
            return config_fail(pc, n, key, "%s on %s is given twice (first at line %zu)",
                               o->udp && e->udp ? "udp" : "tcp", e->text, pc->listen_line[i]);
        o->udp |= e->udp;
        o->tcp |= e->tcp;
        return 0;
    }
    if (c->nlisten >= CONFIG_MAX_LISTEN)
        return config_fail(pc, n, key, "more than %d addresses", CONFIG_MAX_LISTEN);
    pc->listen_line[c->nlisten] = line_of(n);
    c->listen[c->nlisten++] = *e;
    return 0;
}

static const field_t listen_fields[] = {
    {"address", "\"ADDR:PORT\" or \"[V6]:PORT\"", true, NULL},
    {"udp", "serve UDP, default true", false, NULL},
    {"tcp", "serve TCP, default true", false, NULL},
};

static int parse_address(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                         config_listen_t *e)
{
    const char *want = field ? "\"ADDR:PORT\"" : "\"ADDR:PORT\" or {address, udp, tcp}";
    const char *sep = field ? ": " : "";
    field = field ? field : "";
    if (!is_text(n))
        return config_fail(pc, n, key, "%s%sexpected %s, got %s", field, sep, want,
                           config_node_kind(n));
    if (config_parse_listen(e, scalar(n)) < 0)
        return config_fail(pc, n, key, "%s%sbad address \"%s\" (want ADDR:PORT or [V6]:PORT)",
                           field, sep, scalar(n));
    return 0;
}

static int add_listen_item(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *parent,
                           const yaml_node_t *n, size_t index)
{
    char key[64];
    config_listen_t e;
    int r;
    config_item_key(key, sizeof(key), o->key, parent, index);
    if (n->type != YAML_MAPPING_NODE) {
        if ((r = parse_address(pc, n, key, NULL, &e)) < 0)
            return r;
        return config_put_listen(pc, n, key, &e);
    }
    const yaml_node_t *val[TERN_ARRAY_SIZE(listen_fields)];
    if ((r = config_get_fields(pc, n, key, listen_fields, TERN_ARRAY_SIZE(listen_fields), val)) < 0)
        return r;
    if ((r = parse_address(pc, val[0], key, "address", &e)) < 0)
        return r;
    if (val[1] && (r = config_get_bool(pc, val[1], key, "udp", &e.udp)) < 0)
        return r;
    if (val[2] && (r = config_get_bool(pc, val[2], key, "tcp", &e.tcp)) < 0)
        return r;
    if (!e.udp && !e.tcp)
        return config_fail(pc, n, key, "udp and tcp are both false");
    return config_put_listen(pc, n, key, &e);
}

static int set_listen(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n)
{
    pc->c->nlisten = 0; /* the file's list replaces whatever was there */
    return config_each_item(pc, o, n, add_listen_item);
}

/* ---- redis -------------------------------------------------------------------------------- */

static bool parse_port(const char *s, uint16_t *port);

/* The strings of config_redis_t, for config_free(), config_copy() and config_same_redis(). */
static const size_t redis_strs[] = {
    offsetof(config_redis_t, host),
    offsetof(config_redis_t, unix_path),
    offsetof(config_redis_t, password),
    offsetof(config_redis_t, prefix),
    offsetof(config_redis_t, suffix),
    offsetof(config_redis_t, changes_channel),
    offsetof(config_redis_t, sentinel_master),
    offsetof(config_redis_t, sentinel_password),
};

static void free_sentinels(config_redis_t *r)
{
    for (size_t i = 0; i < r->nsentinels; i++)
        free(r->sentinels[i]);
    free(r->sentinels);
    r->sentinels = NULL;
    r->nsentinels = 0;
}

static char **redis_str(config_redis_t *r, size_t i)
{
    return (char **)(void *)((char *)r + redis_strs[i]);
}

static const char *redis_str_value(const config_redis_t *r, size_t i)
{
    const char *p;
    memcpy(&p, (const char *)r + redis_strs[i], sizeof(p));
    return p;
}

/* Free r's strings and set it to the defaults (no Redis; zone_reload 600). */
void config_redis_reset(config_redis_t *r)
{
    for (size_t i = 0; i < TERN_ARRAY_SIZE(redis_strs); i++)
        free(*redis_str(r, i));
    free_sentinels(r);
    memset(r, 0, sizeof(*r));
    config_set_defaults(r, config_redis_schema, RS_COUNT);
}

int config_redis_copy(config_redis_t *dst, const config_redis_t *src)
{
    *dst = *src;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(redis_strs); i++)
        *redis_str(dst, i) = NULL;
    dst->sentinels = NULL;
    dst->nsentinels = 0;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(redis_strs); i++) {
        const char *s = redis_str_value(src, i);
        if (s && !(*redis_str(dst, i) = strdup(s)))
            return TERN_ENOMEM;
    }
    if (src->nsentinels) {
        if (!(dst->sentinels = calloc(src->nsentinels, sizeof(*dst->sentinels))))
            return TERN_ENOMEM;
        for (; dst->nsentinels < src->nsentinels; dst->nsentinels++)
            if (!(dst->sentinels[dst->nsentinels] = strdup(src->sentinels[dst->nsentinels])))
                return TERN_ENOMEM;
    }
    return 0;
}

/* A host for hiredis: an IPv4 address or a DNS name (hiredis resolves it when it connects).
 * Digits and dots alone must be a whole dotted quad: getaddrinfo() would take "10.1" for
 * 10.0.0.1. */
bool config_is_host(const char *h)
{
    static const char name_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789.-_";
    struct in_addr a;
    size_t n = strlen(h);
    if (n == 0 || n > 253 || strspn(h, name_chars) != n || h[0] == '.' || h[0] == '-')
        return false;
    return strspn(h, "0123456789.") != n || inet_pton(AF_INET, h, &a) == 1;
}

/* "HOST:PORT" or "[V6]:PORT", port 1..65535, into r's host (malloc'd, without brackets) and
 * port; r's unix_path is cleared. 0, TERN_EINVAL or TERN_ENOMEM. */
int config_redis_set_host_port(config_redis_t *r, const char *s)
{
    char host[256];
    const char *end, *port_text;
    uint16_t port;
    struct in6_addr a6;
    bool bracketed = s[0] == '[';
    if (bracketed) {
        end = strchr(s, ']');
        if (!end || end[1] != ':')
            return TERN_EINVAL;
        s++;
        port_text = end + 2;
    } else {
        end = strrchr(s, ':');
        if (!end || memchr(s, ':', (size_t)(end - s)))
            return TERN_EINVAL;
        port_text = end + 1;
    }
    size_t hl = (size_t)(end - s);
    if (hl >= sizeof(host))
        return TERN_EINVAL;
    memcpy(host, s, hl);
    host[hl] = '\0';
    if (!(bracketed ? inet_pton(AF_INET6, host, &a6) == 1 : config_is_host(host)) ||
        !parse_port(port_text, &port) || port == 0)
        return TERN_EINVAL;
    char *copy = strdup(host);
    if (!copy)
        return TERN_ENOMEM;
    free(r->host);
    free(r->unix_path);
    r->host = copy;
    r->unix_path = NULL;
    r->port = port;
    return 0;
}

/* The UNIX socket at path (resolved against the config's directory) for r; host and port are
 * cleared. Errors are "key: address: ...". */
int config_redis_set_unix(parse_ctx_t *pc, const yaml_node_t *n, const char *key, config_redis_t *r,
                          const char *path)
{
    char *copy = config_resolve_path(pc, path);
    if (!copy)
        return TERN_ENOMEM;
    size_t len = strlen(copy);
    if ((long long)len > SUN_PATH_MAX) {
        int rc =
            config_fail(pc, n, key, "address: \"%s\" is %zu bytes long, more than the %lld allowed",
                        copy, len, SUN_PATH_MAX);
        free(copy);
        return rc;
    }
    free(r->host);
    free(r->unix_path);
    r->host = NULL;
    r->port = 0;
    r->unix_path = copy;
    return 0;
}

/* tern's "address": "HOST:PORT", "[V6]:PORT", or an absolute path for a UNIX socket; null = the
 * default (127.0.0.1:6379). */
static int get_redis_address(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                             config_redis_t *r)
{
    static const char want[] = "HOST:PORT, [V6]:PORT or /path/of/redis.sock";
    if (is_null(n)) {
        free(r->host);
        free(r->unix_path);
        r->host = r->unix_path = NULL;
        r->port = 0;
        return 0;
    }
    if (!is_text(n))
        return config_fail(pc, n, key, "address: expected %s, got %s", want, config_node_kind(n));
    const char *s = scalar(n);
    if (s[0] == '/')
        return config_redis_set_unix(pc, n, key, r, s);
    int rc = config_redis_set_host_port(r, s);
    if (rc == TERN_EINVAL)
        return config_fail(pc, n, key, "address: bad address \"%s\" (want %s)", s, want);
    return rc;
}

/* One sentinel address: numeric "IP:PORT" or "[V6]:PORT" (a name would make every reconnect,
 * the moment a failover needs it, wait on DNS). */
static bool sentinel_addr_ok(const char *s)
{
    char host[INET6_ADDRSTRLEN + 2];
    struct in_addr a4;
    struct in6_addr a6;
    uint16_t port;
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof(host) || !parse_port(colon + 1, &port) || !port)
        return false;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    size_t hl = strlen(host);
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        return inet_pton(AF_INET6, host + 1, &a6) == 1;
    }
    return inet_pton(AF_INET, host, &a4) == 1;
}

/* tern's "sentinel": {addresses, master, password} into r; null = no Sentinel. */
static int get_redis_sentinel(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                              config_redis_t *r)
{
    static const opt_t master_row = {.key = "master", .type = OPT_STR, .min = 1, .max = 256};
    static const opt_t password_row = {
        .key = "password", .type = OPT_STR, .max = REDIS_STR_MAX, .empty_unsets = true};
    static const field_t fields[] = {
        {"addresses", "the sentinels, a list of \"IP:PORT\"", true, NULL},
        {"master", "the name the sentinels monitor", true, NULL},
        {"password", "AUTH to the sentinels", false, NULL},
    };
    const yaml_node_t *val[TERN_ARRAY_SIZE(fields)];
    char path[64];
    int rc;
    free_sentinels(r);
    free(r->sentinel_master);
    free(r->sentinel_password);
    r->sentinel_master = r->sentinel_password = NULL;
    if (is_null(n))
        return 0;
    snprintf(path, sizeof(path), "%s: sentinel", key);
    if ((rc = config_get_fields(pc, n, path, fields, TERN_ARRAY_SIZE(fields), val)) < 0)
        return rc;
    const yaml_node_t *a = val[0];
    size_t count = a->type == YAML_SEQUENCE_NODE
                       ? (size_t)(a->data.sequence.items.top - a->data.sequence.items.start)
                       : 0;
    if (a->type != YAML_SEQUENCE_NODE || count == 0 || count > CONFIG_REDIS_MAX_SENTINELS)
        return config_fail(pc, a, path, "addresses: expected a list of 1 to %d \"IP:PORT\", got %s",
                           CONFIG_REDIS_MAX_SENTINELS,
                           a->type == YAML_SEQUENCE_NODE ? "an empty list or a longer one"
                                                         : config_node_kind(a));
    if (!(r->sentinels = calloc(count, sizeof(*r->sentinels))))
        return TERN_ENOMEM;
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *e = node(pc, a->data.sequence.items.start[i]);
        if (!is_text(e) || !sentinel_addr_ok(scalar(e)))
            return config_fail(pc, e, path,
                               "addresses[%zu]: expected a numeric \"IP:PORT\" or \"[V6]:PORT\", "
                               "got %s%s%s",
                               i, is_text(e) ? "\"" : "",
                               is_text(e) ? scalar(e) : config_node_kind(e),
                               is_text(e) ? "\"" : "");
        for (size_t j = 0; j < i; j++)
            if (strcmp(r->sentinels[j], scalar(e)) == 0)
                return config_fail(pc, e, path, "addresses[%zu]: \"%s\" given twice", i, scalar(e));
        if (!(r->sentinels[i] = strdup(scalar(e))))
            return TERN_ENOMEM;
        r->nsentinels++;
    }
    if ((rc = config_get_str(pc, val[1], path, "master", &master_row, &r->sentinel_master)) < 0)
        return rc;
    if (!r->sentinel_master || strpbrk(r->sentinel_master, " \t\r\n"))
        return config_fail(pc, val[1], path, "master: expected the name Sentinel monitors, got %s",
                           r->sentinel_master ? "one with blanks" : "nothing");
    if (val[2] && (rc = config_get_str(pc, val[2], path, "password", &password_row,
                                       &r->sentinel_password)) < 0)
        return rc;
    return 0;
}

/* The key node of name in mapping n, or n itself when there is none. */
const yaml_node_t *config_key_node(const parse_ctx_t *pc, const yaml_node_t *n, const char *name)
{
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(pc, p->key);
        if (k->type == YAML_SCALAR_NODE && strcmp(scalar(k), name) == 0)
            return k;
    }
    return n;
}

/* A tern Redis mapping (or null: no Redis) of the first nrows rows of config_redis_schema into
 * r, replacing every earlier setting. */
int config_get_redis(parse_ctx_t *pc, const yaml_node_t *n, const char *key, size_t nrows,
                     config_redis_t *r)
{
    field_t fields[RS_COUNT] = {{0}};
    const yaml_node_t *val[RS_COUNT];
    int rc;
    if (nrows > RS_COUNT)
        nrows = RS_COUNT;
    if (is_null(n)) {
        config_redis_reset(r);
        return 0;
    }
    /* the zone source's settings where only a connection is wanted (health's redis) */
    for (size_t j = nrows; n->type == YAML_MAPPING_NODE && j < RS_COUNT; j++) {
        const yaml_node_t *k = config_key_node(pc, n, config_redis_schema[j].key);
        if (k != n)
            return config_fail(pc, k, key,
                               "%s: not a key of %s (it sets the Redis zone source: give it in "
                               "the top-level redis)",
                               config_redis_schema[j].key, key);
    }
    for (size_t i = 0; i < nrows; i++)
        fields[i] = (field_t){config_redis_schema[i].key, config_redis_schema[i].desc, false, NULL};
    if ((rc = config_get_fields(pc, n, key, fields, nrows, val)) < 0)
        return rc;
    config_redis_reset(r);
    r->enabled = true;
    for (size_t i = 0; i < nrows; i++) {
        const opt_t *f = &config_redis_schema[i];
        if (!val[i])
            continue;
        if (f->type == OPT_REDIS_ADDR)
            rc = get_redis_address(pc, val[i], key, r);
        else if (i == RS_SENTINEL)
            rc = get_redis_sentinel(pc, val[i], key, r);
        else
            rc = config_get_row(pc, val[i], key, f, r);
        if (rc < 0)
            return rc;
    }
    if (r->nsentinels && val[RS_ADDRESS])
        return config_fail(pc, config_key_node(pc, n, "sentinel"), key,
                           "sentinel: and address (line %zu) are exclusive: Sentinel names the "
                           "node, give one of them",
                           line_of(config_key_node(pc, n, "address")));
    if (r->read_from == CONFIG_REDIS_READ_REPLICA && !r->nsentinels)
        return config_fail(pc, config_key_node(pc, n, "read_from"), key,
                           "read_from: replica needs sentinel: (the replicas are found through "
                           "Sentinel)");
    if (r->nsentinels) {
        free(r->host);
        r->host = NULL;
        r->port = 0;
    }
    return 0;
}

/* tern's "redis:" mapping (or null: no Redis). The mapping replaces every earlier setting. */
static int set_redis(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n)
{
    /* redins' keys here are a redins config's handler.redis moved up a level: say where they go */
    static const char *const redins_keys[] = {"ip", "port", "net", "connection"};
    for (size_t j = 0; n->type == YAML_MAPPING_NODE && j < TERN_ARRAY_SIZE(redins_keys); j++) {
        const yaml_node_t *k = config_key_node(pc, n, redins_keys[j]);
        if (k != n)
            return config_fail(pc, k, o->key,
                               "%s: is a key of redins' handler: redis, not of tern's redis (give "
                               "address: \"HOST:PORT\", or move the block under handler)",
                               redins_keys[j]);
    }
    return config_get_redis(pc, n, o->key, RS_COUNT, &pc->c->redis);
}

/* k (named key) is about to set geoip_db: the first one in a file may, a second is an error. */
int config_claim(parse_ctx_t *pc, claim_t claim, const yaml_node_t *k, const char *key)
{
    if (pc->claimed[claim].by)
        return config_fail(pc, k, key, "conflicts with %s at line %zu (give one of them)",
                           pc->claimed[claim].name, line_of(pc->claimed[claim].by));
    pc->claimed[claim].by = k;
    pc->claimed[claim].name = key;
    return 0;
}

/* ---- zones -------------------------------------------------------------------------------- */

enum {
    ZF_ORIGIN,
    ZF_FILE,
    ZF_FORMAT,
    ZF_ACL,
    ZF_DNSSEC,
    ZF_PRIMARY,
    ZF_NOTIFY,
    ZF_ALLOW_TRANSFER,
    ZF_TRANSFER_KEY,
    ZF_ALLOW_NOTIFY,
    ZF_COUNT
};

static const field_t zone_fields[ZF_COUNT] = {
    [ZF_ORIGIN] = {"origin", "the zone's apex name", true, NULL},
    [ZF_FILE] = {"file",
                 "master file (RFC 1035) or redins JSON, relative to the config file's "
                 "directory (a secondary zone's on-disk copy, optional)",
                 false, NULL},
    [ZF_FORMAT] = {"format", "rfc1035 or json (default: json for a file name ending in .json)",
                   false, NULL},
    [ZF_ACL] = {"acl", "the zone's access list {allow, deny, action}", false, NULL},
    [ZF_DNSSEC] = {"dnssec", "{keys: [BIND key pairs]}: tern signs the zone", false, NULL},
    [ZF_PRIMARY] = {"primary",
                    "\"ADDR[@PORT]\" or {address, key}, or a list: a secondary zone, "
                    "transferred from these",
                    false, NULL},
    [ZF_NOTIFY] = {"notify", "secondaries sent NOTIFY on a change (as primary)", false, NULL},
    [ZF_ALLOW_TRANSFER] = {"allow_transfer", "who may AXFR/IXFR the zone (prefixes)", false, NULL},
    [ZF_TRANSFER_KEY] = {"transfer_key", "the TSIG key transfers must be signed with", false, NULL},
    [ZF_ALLOW_NOTIFY] = {"allow_notify", "who may NOTIFY a secondary zone (default: its primaries)",
                         false, NULL},
};

enum { ZD_KEYS, ZD_COUNT };
static const field_t zone_dnssec_fields[ZD_COUNT] = {
    [ZD_KEYS] = {"keys",
                 "the zone's BIND key pairs (K<zone>.+<alg>+<tag>, with or without .key or "
                 ".private; a KSK and a ZSK, or one combined key)",
                 true, NULL},
};

/* "dnssec: {keys: [...]}" of a zone: the key paths, resolved, into z. */
static int get_zone_dnssec(parse_ctx_t *pc, const yaml_node_t *n, const char *key, config_zone_t *z)
{
    const yaml_node_t *val[ZD_COUNT];
    int r = config_get_fields(pc, n, key, zone_dnssec_fields, ZD_COUNT, val);
    if (r < 0)
        return r;
    const yaml_node_t *k = val[ZD_KEYS];
    if (k->type != YAML_SEQUENCE_NODE || k->data.sequence.items.start == k->data.sequence.items.top)
        return config_fail(pc, k, key, "keys: expected a non-empty list of key files, got %s",
                           config_node_kind(k));
    size_t cnt = (size_t)(k->data.sequence.items.top - k->data.sequence.items.start);
    if (!(z->dnssec_keys = calloc(cnt, sizeof(*z->dnssec_keys))))
        return TERN_ENOMEM;
    for (yaml_node_item_t *it = k->data.sequence.items.start; it < k->data.sequence.items.top;
         it++) {
        const yaml_node_t *e = node(pc, *it);
        if (!is_text(e) || scalar(e)[0] == '\0')
            return config_fail(pc, e, key, "keys: expected a key file name, got %s",
                               config_node_kind(e));
        if (!(z->dnssec_keys[z->ndnssec_keys] = config_resolve_path(pc, scalar(e))))
            return TERN_ENOMEM;
        z->ndnssec_keys++;
    }
    return 0;
}

static config_zone_format_t zone_format_of(const char *file)
{
    size_t n = strlen(file);
    return n > 5 && strcasecmp(file + n - 5, ".json") == 0 ? CONFIG_ZONE_JSON : CONFIG_ZONE_RFC1035;
}

static int add_zone_item(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *parent,
                         const yaml_node_t *n, size_t index)
{
    char key[64], akey[80];
    const yaml_node_t *val[ZF_COUNT];
    config_acl_t acl = {0};
    int r;
    config_item_key(key, sizeof(key), o->key, parent, index);
    if ((r = config_get_fields(pc, n, key, zone_fields, ZF_COUNT, val)) < 0)
        return r;
    for (size_t i = 0; i < ZF_ACL; i++) /* the scalar fields */
        if (val[i] && (!is_text(val[i]) || scalar(val[i])[0] == '\0'))
            return config_fail(pc, val[i], key, "%s: expected a non-empty string, got %s",
                               zone_fields[i].key, config_node_kind(val[i]));
    /* no file and no primary: the transfer settings of a zone another source (Redis) serves */
    if (!val[ZF_FILE] && !val[ZF_PRIMARY] && !val[ZF_ALLOW_TRANSFER] && !val[ZF_NOTIFY])
        return config_fail(pc, n, key, "missing \"file\" (%s)", zone_fields[ZF_FILE].desc);
    if (!val[ZF_FILE] && !val[ZF_PRIMARY] && (val[ZF_DNSSEC] || val[ZF_ACL] || val[ZF_FORMAT]))
        return config_fail(pc, n, key,
                           "a zone entry without file or primary only holds transfer settings "
                           "(for a zone from Redis): no acl, dnssec or format");
    config_zone_format_t fmt =
        val[ZF_FILE] ? zone_format_of(scalar(val[ZF_FILE])) : CONFIG_ZONE_RFC1035;
    if (val[ZF_FORMAT]) {
        const char *f = scalar(val[ZF_FORMAT]);
        if (strcmp(f, "rfc1035") == 0)
            fmt = CONFIG_ZONE_RFC1035;
        else if (strcmp(f, "json") == 0)
            fmt = CONFIG_ZONE_JSON;
        else
            return config_fail(pc, val[ZF_FORMAT], key,
                               "format: expected rfc1035 or json, got \"%s\"", f);
    }
    snprintf(akey, sizeof(akey), "%s: acl", key);
    if (val[ZF_ACL] && (r = config_get_acl(pc, val[ZF_ACL], akey, &acl)) < 0)
        goto out;
    if (val[ZF_PRIMARY] && fmt != CONFIG_ZONE_RFC1035) {
        r = config_fail(pc, val[ZF_FORMAT] ? val[ZF_FORMAT] : val[ZF_FILE], key,
                        "a secondary zone's copy is a master file (format rfc1035)");
        goto out;
    }
    char *file = val[ZF_FILE] ? config_resolve_path(pc, scalar(val[ZF_FILE])) : NULL;
    if (val[ZF_FILE] && !file) {
        r = TERN_ENOMEM;
        goto out;
    }
    r = config_add_zone_format(pc->c, scalar(val[ZF_ORIGIN]), file, fmt);
    free(file);
    if (r == 0) {
        config_zone_t *z = &pc->c->zones[pc->c->nzones - 1];
        z->acl = acl; /* the zone owns the lists now */
        if ((r = config_get_zone_xfr(pc, key, z, val[ZF_PRIMARY], val[ZF_NOTIFY],
                                     val[ZF_ALLOW_TRANSFER], val[ZF_TRANSFER_KEY],
                                     val[ZF_ALLOW_NOTIFY])) < 0)
            return r;
        snprintf(akey, sizeof(akey), "%s: dnssec", key);
        if (val[ZF_DNSSEC] && val[ZF_PRIMARY])
            return config_fail(pc, val[ZF_DNSSEC], akey,
                               "a secondary zone is served as transferred (sign it on the "
                               "primary)");
        return val[ZF_DNSSEC] ? get_zone_dnssec(pc, val[ZF_DNSSEC], akey, z) : 0;
    }
out:
    config_acl_reset(&acl);
    return r;
}

static int set_zones(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return config_fail(pc, n, o->key, "expected a list of {origin, file}, got %s",
                           config_node_kind(n));
    return config_each_item(pc, o, n, add_zone_item);
}

/* ---- the document ------------------------------------------------------------------------- */

static bool is_redins(const opt_t *o)
{
    return o->type == OPT_SERVER || o->type == OPT_ERROR_LOG || o->type == OPT_HANDLER ||
           o->type == OPT_GEOIP || o->type == OPT_HEALTHCHECK || o->type == OPT_UPSTREAM ||
           o->type == OPT_REDINS_LOG;
}

/* Whether o stores one value in a field of config_t of its own (and can have an origin). */
static bool has_field(const opt_t *o)
{
    return is_str_opt(o) || o->type == OPT_UINT || o->type == OPT_WORKERS || o->type == OPT_ENUM ||
           o->type == OPT_BOOL;
}

/* A hash of o's value in c: equal later means the value is still the one the file gave. */
static uint64_t value_hash(const config_t *c, const opt_t *o)
{
    if (is_str_opt(o)) {
        const char *s = str_value(c, o);
        return s ? tern_hash_str(s) : 0;
    }
    return tern_hash64((const char *)c + o->offset, o->size, 0);
}

size_t config_line_of(const config_t *c, const char *key)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (strcmp(schema[i].key, key) == 0)
            return has_field(&schema[i]) && c->origin[i].line &&
                           c->origin[i].value == value_hash(c, &schema[i])
                       ? c->origin[i].line
                       : 0;
    return 0;
}

static int apply(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    switch (o->type) {
    case OPT_UINT:
        return set_uint(pc, o, n, false);
    case OPT_WORKERS:
        return set_uint(pc, o, n, true);
    case OPT_BOOL:
        return set_bool(pc, o, n);
    case OPT_ENUM:
        return set_enum(pc, o, n);
    case OPT_STR:
    case OPT_PATH:
    case OPT_ADDR:
        return set_str(pc, o, n);
    case OPT_LISTEN:
        return set_listen(pc, o, n);
    case OPT_ZONES:
        return set_zones(pc, o, n);
    case OPT_SERVER:
        return config_redins_server(pc, o, n);
    case OPT_ERROR_LOG:
        return config_redins_error_log(pc, o, n);
    case OPT_REDIS:
        return set_redis(pc, o, n);
    case OPT_HANDLER:
        return config_redins_handler(pc, o, n);
    case OPT_GEOIP:
        return config_redins_geoip(pc, o, k, n);
    case OPT_HEALTH:
        return config_health(pc, o, n);
    case OPT_HEALTHCHECK:
        return config_redins_healthcheck(pc, o, n);
    case OPT_ACL:
        return config_acl(pc, o, n);
    case OPT_RATELIMIT:
        return config_ratelimit(pc, o, n);
    case OPT_RRL:
        return config_rrl(pc, o, n);
    case OPT_COOKIES:
        return config_cookies(pc, o, n);
    case OPT_ANAME:
        return config_aname(pc, o, n);
    case OPT_UPSTREAM:
        return config_redins_upstream(pc, o, n);
    case OPT_QUERY_LOG:
        return config_query_log(pc, o, k, n);
    case OPT_REDINS_LOG:
        return config_get_redins_log(pc, n, o->key);
    case OPT_TSIG_KEYS:
        return config_tsig_keys(pc, o, n);
    case OPT_TSIG_KEY_FILE:
        return config_tsig_key_file(pc, o, n);
    case OPT_REDIS_ADDR:
    case OPT_CUSTOM:
        break;
    case OPT_LATER:
        return config_fail(pc, k, o->key, "redins option not supported yet (%s)", o->desc);
    }
    return TERN_EINVAL;
}

static int load_root(parse_ctx_t *pc)
{
    const yaml_node_t *root = yaml_document_get_root_node(pc->doc);
    /* A file with no options is what a crashed editor or a half-finished deploy leaves behind,
     * never a configuration: taken as "all defaults" it would reload into serving no zone at
     * all. A config that means something names at least a listen address or a zone. */
    if (!root) {
        set_err(pc->err, pc->errlen,
                "%s: the file holds no options (empty, or only comments): refused, as a "
                "truncated file would be",
                pc->path);
        return TERN_EINVAL;
    }
    if (root->type != YAML_MAPPING_NODE)
        return config_fail(pc, root, NULL, "the top level must be a mapping of options, got %s",
                           config_node_kind(root));
    if (root->data.mapping.pairs.start == root->data.mapping.pairs.top)
        return config_fail(pc, root, NULL,
                           "an empty mapping ({}) holds no options: refused, as a truncated file "
                           "would be");
    /* a redins config.json, whatever order its keys come in: redins' defaults apply where the
     * two differ (ratelimit's enable) */
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = node(pc, p->key);
        for (size_t i = 0; i < NOPTS && k->type == YAML_SCALAR_NODE; i++)
            if (is_redins(&schema[i]) && strcmp(schema[i].key, scalar(k)) == 0)
                pc->redins = true;
    }
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = node(pc, p->key);
        const yaml_node_t *v = node(pc, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return config_fail(pc, k, NULL, "option names must be strings, got %s",
                               config_node_kind(k));
        size_t i = 0;
        while (i < NOPTS && strcmp(schema[i].key, scalar(k)) != 0)
            i++;
        if (i == NOPTS)
            return config_fail(pc, k, scalar(k), "unknown key");
        if (pc->seen[i])
            return config_fail(pc, k, scalar(k), "duplicate key (first at line %zu)",
                               line_of(pc->seen[i]));
        for (size_t j = 0; j < NOPTS && schema[i].group != GROUP_NONE; j++)
            if (pc->seen[j] && schema[j].group == schema[i].group &&
                (is_redins(&schema[i]) || is_redins(&schema[j])))
                return config_fail(pc, k, scalar(k),
                                   "conflicts with %s at line %zu (give one of them)",
                                   schema[j].key, line_of(pc->seen[j]));
        /* geoip_db or asn_db itself always sets its field (null included: it unsets what the
         * file did not); a redins geoip block claims only what it sets */
        if (schema[i].claim != CLAIM_NONE) {
            int r = config_claim(pc, schema[i].claim, k, schema[i].key);
            if (r < 0)
                return r;
        }
        pc->seen[i] = k;
        int r = apply(pc, &schema[i], k, v);
        if (r < 0)
            return r;
        if (has_field(&schema[i]))
            pc->c->origin[i] =
                (config_origin_t){(uint32_t)line_of(k), value_hash(pc->c, &schema[i])};
    }
    /* a fresh signature has the lifetime less the hour of its inception's skew left: the
     * refresh must come after that, or every check would sign again */
    const config_t *c = pc->c;
    if ((uint64_t)c->dnssec_refresh + 3600 >= c->dnssec_lifetime) {
        size_t at = 0;
        while (at < NOPTS && strcmp(schema[at].key, "dnssec_refresh") != 0)
            at++;
        const yaml_node_t *where = at < NOPTS && pc->seen[at] ? pc->seen[at] : root;
        return config_fail(pc, where, "dnssec_refresh",
                           "%u must be less than dnssec_lifetime (%u) minus 3600",
                           c->dnssec_refresh, c->dnssec_lifetime);
    }
    return 0;
}

int config_load(config_t *c, const char *path, char *err, size_t errlen)
{
    const yaml_node_t *seen[NOPTS] = {NULL};
    parse_ctx_t pc = {.c = c, .path = path, .err = err, .errlen = errlen, .seen = seen};
    yaml_parser_t parser;
    yaml_document_t doc;
    int r = TERN_ENOMEM;
    bool have_parser = false, have_doc = false;

    /* a regular file of sane size only: the config is read again on the loader thread at every
     * SIGHUP, where a FIFO would hang reloads for good and libyaml keeps the whole file */
    struct stat st;
    char oerr[ERR_RAW_MAX];
    int fd = tern_open_regular(path, CONFIG_FILE_MAX, &st, oerr, sizeof(oerr));
    if (fd < 0) {
        set_err(err, errlen, "%s", oerr);
        return fd;
    }
    FILE *f = fdopen(fd, "r");
    if (!f) {
        int e = errno;
        close(fd);
        set_err(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    /* this file's lines replace any earlier one's: an option it leaves alone has none */
    free(c->file);
    memset(c->origin, 0, sizeof(c->origin));
    if (!(c->file = strdup(path)))
        goto out;
    const char *slash = strrchr(path, '/');
    if (slash) {
        size_t n = (size_t)(slash - path) + 1;
        if (!(pc.dir = malloc(n + 1)))
            goto out;
        memcpy(pc.dir, path, n);
        pc.dir[n] = '\0';
    }
    if (!yaml_parser_initialize(&parser))
        goto out;
    have_parser = true;
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &doc))
        goto syntax;
    have_doc = true;
    pc.doc = &doc;
    if ((r = load_root(&pc)) < 0)
        goto out;
    if ((r = config_health_follow_sentinel(c)) < 0)
        goto out;
    /* the keys zones name may be defined anywhere in the file */
    if ((r = config_xfr_check(c, path, err, errlen)) < 0)
        goto out;
    yaml_document_delete(&doc);
    have_doc = false;
    /* A second document ("---") would otherwise be skipped without a word. */
    if (!yaml_parser_load(&parser, &doc))
        goto syntax;
    have_doc = true;
    const yaml_node_t *extra = yaml_document_get_root_node(&doc);
    if (extra) {
        pc.doc = &doc;
        r = config_fail(&pc, extra, NULL, "a second YAML document (one configuration per file)");
    }
    goto out;

syntax:;
    const char *what = parser.problem ? parser.problem : "cannot parse";
    set_err(err, errlen, "%s:%zu: YAML syntax error: %s%s%s", path, parser.problem_mark.line + 1,
            what, parser.context ? " " : "", parser.context ? parser.context : "");
    r = parser.error == YAML_MEMORY_ERROR ? TERN_ENOMEM : TERN_ESYNTAX;
out:
    if (r == TERN_ENOMEM)
        set_err(err, errlen, "%s: out of memory", path);
    if (have_doc)
        yaml_document_delete(&doc);
    if (have_parser)
        yaml_parser_delete(&parser);
    free(pc.dir);
    fclose(f);
    return r;
}

/* ---- the API ------------------------------------------------------------------------------ */

/* Strict port: 1-5 digits, 0..65535, nothing after. */
static bool parse_port(const char *s, uint16_t *port)
{
    size_t n = strlen(s);
    if (n == 0 || n > 5 || strspn(s, "0123456789") != n)
        return false;
    unsigned long v = strtoul(s, NULL, 10);
    if (v > 65535)
        return false;
    *port = (uint16_t)v;
    return true;
}

int config_parse_listen(config_listen_t *l, const char *text)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *port_text;
    size_t tl = strlen(text);
    if (tl >= sizeof(l->text))
        return TERN_EINVAL;
    memset(l, 0, sizeof(*l));
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':' || (size_t)(close - text - 1) >= sizeof(host))
            return TERN_EINVAL;
        size_t hl = (size_t)(close - text - 1);
        memcpy(host, text + 1, hl);
        host[hl] = '\0';
        port_text = close + 2;
        struct sockaddr_in6 *sa = (struct sockaddr_in6 *)&l->addr;
        if (inet_pton(AF_INET6, host, &sa->sin6_addr) != 1 ||
            !parse_port(port_text, &sa->sin6_port))
            return TERN_EINVAL;
        sa->sin6_family = AF_INET6;
        sa->sin6_port = htons(sa->sin6_port);
        l->addrlen = sizeof(*sa);
    } else {
        /* One colon only: a bare IPv6 address has several and needs brackets and a port. */
        const char *colon = strchr(text, ':');
        if (!colon || strchr(colon + 1, ':') || (size_t)(colon - text) >= sizeof(host))
            return TERN_EINVAL;
        size_t hl = (size_t)(colon - text);
        memcpy(host, text, hl);
        host[hl] = '\0';
        port_text = colon + 1;
        struct sockaddr_in *sa = (struct sockaddr_in *)&l->addr;
        if (inet_pton(AF_INET, host, &sa->sin_addr) != 1 || !parse_port(port_text, &sa->sin_port))
            return TERN_EINVAL;
        sa->sin_family = AF_INET;
        sa->sin_port = htons(sa->sin_port);
        l->addrlen = sizeof(*sa);
    }
    memcpy(l->text, text, tl + 1);
    l->udp = l->tcp = true;
    return 0;
}

int config_add_listen(config_t *c, const char *text)
{
    if (c->nlisten >= CONFIG_MAX_LISTEN)
        return TERN_ELIMIT;
    int r = config_parse_listen(&c->listen[c->nlisten], text);
    if (r < 0)
        return r;
    c->nlisten++;
    return 0;
}

int config_add_zone(config_t *c, const char *origin, const char *file)
{
    return config_add_zone_format(c, origin, file, zone_format_of(file));
}

static int config_zone_keys_copy(config_zone_t *dst, const config_zone_t *src)
{
    if (!src->ndnssec_keys)
        return 0;
    if (!(dst->dnssec_keys = calloc(src->ndnssec_keys, sizeof(*dst->dnssec_keys))))
        return TERN_ENOMEM;
    for (size_t k = 0; k < src->ndnssec_keys; k++) {
        if (!(dst->dnssec_keys[k] = strdup(src->dnssec_keys[k])))
            return TERN_ENOMEM;
        dst->ndnssec_keys++;
    }
    return 0;
}

int config_add_zone_format(config_t *c, const char *origin, const char *file,
                           config_zone_format_t format)
{
    config_zone_t *z = realloc(c->zones, (c->nzones + 1) * sizeof(*z));
    if (!z)
        return TERN_ENOMEM;
    c->zones = z;
    z = &c->zones[c->nzones];
    memset(z, 0, sizeof(*z));
    z->origin = strdup(origin);
    z->file = file ? strdup(file) : NULL;
    z->format = format;
    if (!z->origin || (file && !z->file)) {
        free(z->origin);
        free(z->file);
        return TERN_ENOMEM;
    }
    c->nzones++;
    return 0;
}

unsigned config_auto_workers(void)
{
    /* The affinity mask, not the machine's CPU count: under taskset or a container cpuset only
     * those CPUs run our threads. */
    cpu_set_t set;
    long n = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = CPU_COUNT(&set);
    if (n <= 0)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > CONFIG_MAX_WORKERS ? CONFIG_MAX_WORKERS : (unsigned)n;
}

/* The same listen list: same length, and entry by entry (in order) the same address, port and
 * udp/tcp flags; the text as written does not matter. */
static bool same_listen_list(const config_t *a, const config_t *b)
{
    if (a->nlisten != b->nlisten)
        return false;
    for (size_t i = 0; i < a->nlisten; i++) {
        const config_listen_t *x = &a->listen[i], *y = &b->listen[i];
        if (!same_endpoint(x, y) || x->udp != y->udp || x->tcp != y->tcp)
            return false;
    }
    return true;
}

bool config_same_listen(const config_t *a, const config_t *b)
{
    return a->workers == b->workers && same_listen_list(a, b);
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* Whether a and b hold the same value of option o (one with a field of its own, or listen). */
static bool same_value(const config_t *a, const config_t *b, const opt_t *o)
{
    switch (o->type) {
    case OPT_LISTEN:
        return same_listen_list(a, b);
    case OPT_STR:
    case OPT_PATH:
    case OPT_ADDR:
        return same_str(str_value(a, o), str_value(b, o));
    case OPT_UINT:
    case OPT_WORKERS:
    case OPT_ENUM:
    case OPT_BOOL:
        return memcmp((const char *)a + o->offset, (const char *)b + o->offset, o->size) == 0;
    case OPT_QUERY_LOG:
        return config_same_qlog(&a->qlog, &b->qlog); /* whichever key set it */
    default:
        return true; /* no field of its own (zones, redis, the redins keys): never restart-only */
    }
}

size_t config_restart_only_changes(const config_t *from, const config_t *to, char *buf, size_t len)
{
    size_t n = 0, off = 0;
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < NOPTS; i++) {
        if (!schema[i].restart || same_value(from, to, &schema[i]))
            continue;
        if (off < len) {
            int k = snprintf(buf + off, len - off, "%s%s", n ? ", " : "", schema[i].key);
            off += k < 0 ? len : (size_t)k;
        }
        n++;
    }
    return n;
}

bool config_same_redis(const config_redis_t *a, const config_redis_t *b)
{
    if (a->enabled != b->enabled || a->port != b->port || a->db != b->db ||
        a->connect_timeout_ms != b->connect_timeout_ms ||
        a->read_timeout_ms != b->read_timeout_ms || a->zone_reload_s != b->zone_reload_s ||
        a->default_ttl != b->default_ttl || a->max_ttl != b->max_ttl ||
        a->max_value_bytes != b->max_value_bytes || a->max_labels != b->max_labels ||
        a->max_rrset_records != b->max_rrset_records || a->max_zones != b->max_zones ||
        a->read_from != b->read_from || a->nsentinels != b->nsentinels)
        return false;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(redis_strs); i++)
        if (!same_str(redis_str_value(a, i), redis_str_value(b, i)))
            return false;
    for (size_t i = 0; i < a->nsentinels; i++)
        if (strcmp(a->sentinels[i], b->sentinels[i]) != 0)
            return false;
    return true;
}

/* The same check: every field of the spec (strings by content), and the same owner. */
static bool same_check(const config_health_check_t *x, const config_health_check_t *y)
{
    const health_spec_t *a = &x->spec, *b = &y->spec;
    size_t alen = a->family == 6 ? 16 : 4;
    return a->proto == b->proto && a->family == b->family && a->method == b->method &&
           a->tls_verify == b->tls_verify && a->nexpect == b->nexpect && a->port == b->port &&
           a->up_count == b->up_count && a->down_count == b->down_count &&
           a->timeout_ms == b->timeout_ms && memcmp(a->addr, b->addr, alen) == 0 &&
           memcmp(a->expect, b->expect, a->nexpect * sizeof(a->expect[0])) == 0 &&
           same_str(a->uri, b->uri) && same_str(a->host, b->host) && same_str(x->owner, y->owner);
}

bool config_same_health_checks(const config_health_t *a, const config_health_t *b)
{
    if (a->enabled != b->enabled || a->nchecks != b->nchecks)
        return false;
    for (size_t i = 0; i < a->nchecks; i++)
        if (!same_check(&a->checks[i], &b->checks[i]))
            return false;
    return true;
}

void config_init(config_t *c)
{
    memset(c, 0, sizeof(*c));
    config_set_defaults(c, schema, NOPTS);
    config_redis_reset(&c->redis);   /* its strings are NULL after the memset */
    config_health_reset(&c->health); /* and so are health's */
    config_limit_reset(c);           /* and the prefix lists */
    config_aname_reset(&c->aname);   /* and the upstreams' hosts */
    config_qlog_reset(&c->qlog);     /* and query logging's strings */
}

int config_copy(config_t *dst, const config_t *src)
{
    *dst = *src;
    dst->zones = NULL;
    dst->nzones = 0;
    dst->file = NULL;
    for (size_t i = 0; i < NOPTS; i++)
        if (is_str_opt(&schema[i]))
            *str_field(dst, &schema[i]) = NULL;
    /* nothing of redis and health is dst's yet: what the copies below fail to make stays NULL */
    memset(&dst->redis, 0, sizeof(dst->redis));
    memset(&dst->health, 0, sizeof(dst->health));
    memset(&dst->aname, 0, sizeof(dst->aname));
    memset(&dst->qlog, 0, sizeof(dst->qlog));
    if (config_tsig_keys_copy(dst, src) < 0)
        goto fail;
    /* the prefix lists are dst's own (or NULL) from here, whatever fails */
    if (config_limit_copy(dst, src) < 0)
        goto fail;
    if (src->file && !(dst->file = strdup(src->file)))
        goto fail;
    for (size_t i = 0; i < NOPTS; i++) {
        const char *s = is_str_opt(&schema[i]) ? str_value(src, &schema[i]) : NULL;
        if (s && !(*str_field(dst, &schema[i]) = strdup(s)))
            goto fail;
    }
    if (config_redis_copy(&dst->redis, &src->redis) < 0 ||
        config_health_copy(&dst->health, &src->health) < 0 ||
        config_aname_copy(&dst->aname, &src->aname) < 0 ||
        config_qlog_copy(&dst->qlog, &src->qlog) < 0)
        goto fail;
    for (size_t i = 0; i < src->nzones; i++)
        if (config_add_zone_format(dst, src->zones[i].origin, src->zones[i].file,
                                   src->zones[i].format) < 0 ||
            config_acl_copy(&dst->zones[i].acl, &src->zones[i].acl) < 0 ||
            config_zone_xfr_copy(&dst->zones[i], &src->zones[i]) < 0 ||
            config_zone_keys_copy(&dst->zones[i], &src->zones[i]) < 0)
            goto fail;
    return 0;
fail:
    config_free(dst);
    return TERN_ENOMEM;
}

/* One row of --help: the key indented by depth, its description and bounds. */
static void print_opt(FILE *out, int depth, const opt_t *o)
{
    char names[128];
    fprintf(out, "%*s%-*s %s", 2 + 2 * depth, "", 20 - 2 * depth, o->key, o->desc);
    switch (o->type) {
    case OPT_UINT:
        fprintf(out, " [%lld..%lld, default %lld]\n", o->min, o->max, o->def);
        break;
    case OPT_WORKERS:
        fprintf(out, " [%lld..%lld or auto, default %lld]\n", o->min, o->max, o->def);
        break;
    case OPT_BOOL:
        fprintf(out, " [default %s]\n", o->def ? "true" : "false");
        break;
    case OPT_ENUM:
        join_names(o->names, (size_t)o->max + 1, names, sizeof(names));
        fprintf(out, " [%s, default %s]\n", names, o->names[o->def]);
        break;
    case OPT_STR:
    case OPT_PATH:
    case OPT_ADDR:
        fprintf(out, " [at most %lld bytes, default unset]\n", o->max);
        break;
    default:
        fputc('\n', out);
        break;
    }
}

void config_print_fields(FILE *out, int depth, const field_t *fields, size_t count)
{
    for (size_t j = 0; j < count; j++) {
        const field_t *f = &fields[j];
        int indent = 2 + 2 * depth, width = 20 - 2 * depth;
        if (f->later)
            fprintf(out, "%*s%-*s not supported yet: %s\n", indent, "", width, f->key, f->later);
        else
            fprintf(out, "%*s%-*s %s\n", indent, "", width, f->key, f->desc);
    }
}

/* count rows under their option, indented by depth. */
static void print_rows(FILE *out, int depth, const opt_t *rows, size_t count)
{
    for (size_t j = 0; j < count; j++)
        print_opt(out, depth, &rows[j]);
}

/* health's rows under it, and the rows of its log and of one of its checks under those. */
static void print_health(FILE *out)
{
    for (size_t j = 0; j < HS_COUNT; j++) {
        print_opt(out, 1, &config_health_schema[j]);
        if (j == HS_LOG)
            for (size_t k = 0; k < HL_COUNT; k++)
                print_opt(out, 2, &config_health_log_schema[k]);
        if (j == HS_CHECKS)
            for (size_t k = 0; k < HC_COUNT; k++)
                print_opt(out, 2, &config_health_check_schema[k]);
    }
}

void config_schema_print(FILE *out)
{
    bool redins_header = false;
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_t *o = &schema[i];
        if ((is_redins(o) || o->type == OPT_LATER) && !redins_header) {
            fprintf(out, "\nredins-style JSON keys (its config.json):\n");
            redins_header = true;
        }
        if (o->type == OPT_LATER) {
            fprintf(out, "  %-20s not supported yet: %s\n", o->key, o->desc);
            continue;
        }
        print_opt(out, 0, o);
        if (o->type == OPT_ZONES) { /* every key of a zone, dnssec's under it */
            for (size_t j = 0; j < ZF_COUNT; j++) {
                config_print_fields(out, 1, &zone_fields[j], 1);
                if (j == ZF_DNSSEC)
                    config_print_fields(out, 2, zone_dnssec_fields, ZD_COUNT);
            }
        }
        if (o->type == OPT_REDIS)
            for (size_t j = 0; j < RS_COUNT; j++)
                print_opt(out, 1, &config_redis_schema[j]);
        if (o->type == OPT_HEALTH)
            print_health(out);
        if (o->type == OPT_ACL)
            print_rows(out, 1, config_acl_schema, ACL_COUNT);
        if (o->type == OPT_RATELIMIT)
            print_rows(out, 1, config_ratelimit_schema, RATE_COUNT);
        if (o->type == OPT_RRL)
            print_rows(out, 1, config_rrl_schema, RRL_COUNT);
        if (o->type == OPT_COOKIES)
            print_rows(out, 1, config_cookies_schema, COOKIE_COUNT);
        if (o->type == OPT_ANAME) {
            print_rows(out, 1, config_aname_schema, AN_COUNT);
            print_rows(out, 2, config_aname_upstream_schema, AU_COUNT);
        }
        if (o->type == OPT_QUERY_LOG) {
            for (size_t j = 0; j < QL_COUNT; j++) {
                print_opt(out, 1, &config_qlog_schema[j]);
                if (j == QL_DNSTAP)
                    print_rows(out, 2, config_qlog_dnstap_schema, QD_COUNT);
                if (j == QL_REQUESTS)
                    print_rows(out, 2, config_qlog_requests_schema, QR_COUNT);
            }
        }
        if (o->type == OPT_REDINS_LOG)
            config_redins_print_log(out, 1);
        if (o->type == OPT_HANDLER)
            config_redins_print_handler(out);
        if (o->type == OPT_HEALTHCHECK)
            config_redins_print_healthcheck(out, 1);
    }
}

void config_free(config_t *c)
{
    for (size_t i = 0; i < c->nzones; i++) {
        free(c->zones[i].origin);
        free(c->zones[i].file);
        config_acl_reset(&c->zones[i].acl);
        config_zone_xfr_reset(&c->zones[i]);
        for (size_t k = 0; k < c->zones[i].ndnssec_keys; k++)
            free(c->zones[i].dnssec_keys[k]);
        free(c->zones[i].dnssec_keys);
    }
    free(c->zones);
    config_tsig_keys_reset(c);
    for (size_t i = 0; i < NOPTS; i++)
        if (is_str_opt(&schema[i]))
            free(*str_field(c, &schema[i]));
    config_redis_reset(&c->redis);
    config_health_reset(&c->health);
    config_limit_reset(c);
    config_aname_reset(&c->aname);
    config_qlog_reset(&c->qlog);
    free(c->file);
    config_init(c);
}
