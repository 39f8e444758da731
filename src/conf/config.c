/*
 * config.c — the YAML/JSON configuration: the top-level table of options, and config_t's
 * lifecycle (init, load, copy, free) and --help, all driven by that table.
 *
 * The table below is the only place a top-level option is described: key, type, default, bounds,
 * whether it applies only on restart, and a one-line description. Scalar options are parsed,
 * bounded, copied, freed and printed by the schema engine (config_rows.c); an option that is a
 * nested block names the block its owner declares (config_blocks.h: "health:" is
 * config_health.c's, "acl:" config_limit.c's, ...), and the engine reaches it only through that
 * block's hooks.
 *
 * redins' config.json keys (server, error_log, handler, geoip, healthcheck, upstream, log) have
 * rows here too (marked redins), so they are found, refused twice and printed like any option;
 * what they map onto is their blocks' business (config_redins.c, and config_qlog.c for "log").
 */
#include "tern/conf/config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/err.h"
#include "tern/common/log.h"

#define FIELD(f) .offset = offsetof(config_t, f), .size = sizeof(((config_t *)0)->f)

_Static_assert(sizeof(log_level_t) == sizeof(uint32_t) && sizeof(log_target_t) == sizeof(uint32_t),
               "OPT_ENUM fields are stored as 32-bit integers");

/* RFC 1035 §3.3: a CHAOS TXT answer is one <character-string>, at most 255 bytes. */
#define TXT_MAX 255
/* LOGIN_NAME_MAX: the longest user or group name the C library handles. */
#define NAME_MAX_LEN (LOGIN_NAME_MAX - 1)

/* Options that set the same fields share a group (opt_t.group). */
enum { GROUP_NONE = 0, GROUP_LISTEN, GROUP_LOG, GROUP_REDIS, GROUP_HEALTH };

static const char *const udp_steering_names[] = {"hash", "random", "cpu"};

static const opt_t schema[] = {
    {.key = "listen",
     .type = OPT_BLOCK,
     .block = &config_listen_block,
     .group = GROUP_LISTEN,
     .restart = true,
     .desc = "addresses to serve: \"ADDR:PORT\", \"[V6]:PORT\" or {address, udp, tcp}; one or a "
             "list"},
    {.key = "xdp",
     .type = OPT_BLOCK,
     .block = &config_xdp_block,
     .restart = true,
     .desc = "AF_XDP (as Knot's xdp:): UDP on these interfaces answered from XSK sockets; "
             "unset or ~ = none"},
    {.key = "workers",
     .type = OPT_WORKERS,
     FIELD(workers),
     .def = 1,
     .min = 1,
     .max = CONFIG_MAX_WORKERS,
     .restart = true,
     .desc = "worker threads, each with its own sockets; \"auto\" = one per usable CPU"},
    {.key = "zones",
     .type = OPT_BLOCK,
     .block = &config_zones_block,
     .desc = "list of zones, each a mapping of these keys"},
    {.key = "catalogs",
     .type = OPT_BLOCK,
     .block = &config_catalogs_block,
     .desc = "catalog zones (RFC 9432) tern makes of its primary zones: a list of {origin, "
             "members, notify, allow_transfer, transfer_key}"},
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
    {.key = "dnssec_policies",
     .type = OPT_BLOCK,
     .block = &config_dnssec_policies_block,
     .desc = "key policies (dnssec: {policy: NAME}): a list of mappings of these keys"},
    {.key = "dnssec_state_dir",
     .type = OPT_PATH,
     FIELD(dnssec_state_dir),
     .min = 1,
     .max = PATH_MAX - 1,
     .desc = "keys and key states of zones with a policy; unset = $STATE_DIRECTORY/dnssec"},
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
    /* Busy polling (SO_BUSY_POLL, SO_PREFER_BUSY_POLL, SO_BUSY_POLL_BUDGET): an empty UDP
     * socket's receive polls the device's NAPI queue itself for up to this long before sleeping.
     * With the device's napi_defer_hard_irqs and gro_flush_timeout set (README: "Floods on
     * sockets"), the kernel then runs the receive path only when a worker asks for packets, so
     * under a flood the CPU goes to queries that get answered, not to datagrams the socket
     * buffer would drop after the whole stack has processed them. It costs CPU at low rates
     * (the spin), so it is off by default. restart-only: set when the sockets are bound (as
     * root, or with CAP_NET_ADMIN, which all three need). 10 ms is far past any useful spin. */
    {.key = "udp_busy_poll_us",
     .type = OPT_UINT,
     FIELD(udp_busy_poll_us),
     .def = 0,
     .max = 10000,
     .restart = true,
     .desc = "microseconds an empty UDP socket busy-polls its device queue; 0 = off"},
    /* The kernel's default budget is 8 (BUSY_POLL_BUDGET); one recvmmsg batch (UDP_BATCH) wants
     * more per poll, and NAPI's own weight is 64. */
    {.key = "udp_busy_poll_budget",
     .type = OPT_UINT,
     FIELD(udp_busy_poll_budget),
     .def = 64,
     .min = 1,
     .max = 65535,
     .restart = true,
     .desc = "packets one busy poll may take from the device queue"},
    {.key = "udp_prefer_busy_poll",
     .type = OPT_BOOL,
     FIELD(udp_prefer_busy_poll),
     .def = 1,
     .restart = true,
     .desc = "with busy polling: the workers, not the kernel's softirq, drive the device queue"},
    /* Socket buffers of the UDP sockets. 4 MiB absorbs several milliseconds of line rate before a
     * worker's next recvmmsg (dnsperf-style bursts overflow the kernel's 208 KiB default). With
     * busy polling 256 KiB is better: while the kernel's receive thread holds the device queue it
     * keeps a large buffer full, and a worker polls only once its socket is empty, so with 4 MiB
     * the thread kept the queue through a whole flood (README, "Floods on sockets"). As root
     * (SO_RCVBUFFORCE) the value is set as given; otherwise the kernel caps it at net.core.rmem_max
     * / wmem_max. restart-only: set when the sockets are bound. 0: leave the kernel's default
     * (net.core.rmem_default / wmem_default), as gdnsd does unless told. */
    {.key = "udp_rcvbuf",
     .type = OPT_UINT,
     FIELD(udp_rcvbuf),
     .def = 4 << 20,
     .max = 1 << 30,
     .restart = true,
     .desc = "bytes of receive buffer per UDP socket; 0 = the kernel's default"},
    {.key = "udp_sndbuf",
     .type = OPT_UINT,
     FIELD(udp_sndbuf),
     .def = 4 << 20,
     .max = 1 << 30,
     .restart = true,
     .desc = "bytes of send buffer per UDP socket; 0 = the kernel's default"},
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
    {.key = "latency_map",
     .type = OPT_BLOCK,
     .block = &config_latency_map_block,
     .desc = "geo_filter latency's map (network, group, ms): {file} or {redis_key}; read on "
             "start and reload; unset or ~ = none"},
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
     .valid = config_listen_text_ok,
     FIELD(metrics_listen),
     .min = 1,
     .max = sizeof(((config_listen_t *)0)->text) - 1,
     .restart = true,
     .desc = "\"ADDR:PORT\" of the Prometheus HTTP endpoint (/metrics); unset = none"},
    /* restart-only: the API service takes its listener, certificate and keys at startup */
    {.key = "tls",
     .type = OPT_BLOCK,
     .block = &config_tls_block,
     .restart = true,
     .desc = "DNS over TLS (RFC 7858) and zone transfers over it (RFC 9103): a mapping of these "
             "keys; unset or ~ = none"},
    {.key = "api",
     .type = OPT_BLOCK,
     .block = &config_api_block,
     .restart = true,
     .desc = "the HTTP API of PowerDNS' zone subset (src/api): a mapping of these keys; unset "
             "or ~ = none"},
    {.key = "redis",
     .type = OPT_BLOCK,
     .block = &config_redis_block,
     .group = GROUP_REDIS,
     .desc = "zones kept in Redis (redins' layout): a mapping of these keys; unset or ~ = none"},
    {.key = "health",
     .type = OPT_BLOCK,
     .block = &config_health_block,
     .group = GROUP_HEALTH,
     .claim = CLAIM_HEALTH,
     .desc = "health checks of A/AAAA answers: a mapping of these keys; unset or ~ = none"},
    {.key = "load",
     .type = OPT_BLOCK,
     .block = &config_load_block,
     .desc = "load shedding (an RRset's \"shed\"): a mapping of these keys; unset or ~ = the "
             "defaults"},
    {.key = "acl",
     .type = OPT_BLOCK,
     .block = &config_acl_block,
     .desc = "the access list of every query: a mapping of these keys (a zone's acl too); unset "
             "or ~ = none"},
    /* the same key, keys and meaning as in redins' config.json: not a redins-only row */
    {.key = "ratelimit",
     .type = OPT_BLOCK,
     .block = &config_ratelimit_block,
     .desc = "redins' per-client rate limit (the same key in its config.json): a mapping of "
             "these keys; unset or ~ = none"},
    {.key = "rrl",
     .type = OPT_BLOCK,
     .block = &config_rrl_block,
     .desc = "response rate limiting (as Knot and BIND): a mapping of these keys; unset or ~ = "
             "none"},
    {.key = "cookies",
     .type = OPT_BLOCK,
     .block = &config_cookies_block,
     .desc = "DNS Cookies (RFC 7873, RFC 9018 server cookies): a mapping of these keys; unset or "
             "~ = none"},
    {.key = "steering",
     .type = OPT_BLOCK,
     .block = &config_steering_block,
     .desc = "server-wide defaults of the steering rules beyond redins (sticky order): a "
             "mapping of these keys; unset or ~ = the defaults"},
    /* not restart-only: a reload hands the resolver the new list */
    {.key = "aname",
     .type = OPT_BLOCK,
     .block = &config_aname_block,
     .claim = CLAIM_ANAME,
     .desc = "upstream servers for ANAME targets outside the served zones (never for client "
             "queries): a mapping of these keys; unset or ~ = none"},
    /* restart-only: the rings and the writer thread are made at startup (SIGHUP reopens the
     * files, for log rotation, whatever the config says) */
    {.key = "query_log",
     .type = OPT_BLOCK,
     .block = &config_qlog_block,
     .restart = true,
     .desc = "query logging (dnstap, redins' request log); workers never wait (a full ring "
             "drops): a mapping of these keys; unset or ~ = none"},

    /* Zone transfers (tern/xfr): keys, then the bounds of the journal and of transfers in. A
     * zone's own settings are in its entry (primary, notify, allow_transfer, ...). */
    {.key = "tsig_keys",
     .type = OPT_BLOCK,
     .block = &config_tsig_keys_block,
     .desc = "TSIG keys (RFC 8945) for transfers and NOTIFY: a list of {name, algorithm, "
             "secret}"},
    {.key = "tsig_key_file",
     .type = OPT_BLOCK,
     .block = &config_tsig_file_block,
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
    /* an ACME client sends one or two records, a provisioning tool a few hundred; a thousand
     * bounds what one message makes the update thread hold and log */
    {.key = "update_max_records",
     .type = OPT_UINT,
     FIELD(update_max_records),
     .def = 1000,
     .min = 1,
     .max = 65535,
     .desc = "prerequisites and updates one UPDATE may carry; more is REFUSED"},
    /* each change is an fsync and a publish; 50 a second per key is far beyond any ACME or
     * provisioning client and keeps one key from starving the others */
    {.key = "update_rate",
     .type = OPT_UINT,
     FIELD(update_rate),
     .def = 50,
     .min = 1,
     .max = 100000,
     .desc = "changes a second one TSIG key (or, unsigned, one address) may make; more are "
             "REFUSED"},
    {.key = "zonefile_sync",
     .type = OPT_UINT,
     FIELD(zonefile_sync),
     .def = 0,
     .min = 0,
     .max = 604800,
     .desc = "seconds between writing changed zone files back from their journal (0: only "
             "`ternctl zone flush` does)"},

    /* redins's config.json: the keys that map onto the options above ... */
    {.key = "server",
     .type = OPT_BLOCK,
     .block = &config_server_block,
     .redins = true,
     .group = GROUP_LISTEN,
     .desc = "list of {ip, port, protocol: udp|tcp}, into listen (same ip and port: one entry)"},
    {.key = "error_log",
     .type = OPT_BLOCK,
     .block = &config_error_log_block,
     .redins = true,
     .group = GROUP_LOG,
     .desc = "{enable: true, level, target: stderr|stdout|syslog, format: text}, into log_*"},
    {.key = "handler",
     .type = OPT_BLOCK,
     .block = &config_handler_block,
     .redins = true,
     .group = GROUP_REDIS,
     .desc = "{redis, zone_reload, max_ttl, geoip, upstream, ...}, into redis, geoip_db, asn_db, "
             "health and aname:"},
    /* older redins kept geoip, healthcheck and upstream at the top level */
    {.key = "geoip",
     .type = OPT_BLOCK,
     .block = &config_geoip_block,
     .redins = true,
     .desc = "(older redins) {enable, db}, into geoip_db"},
    {.key = "healthcheck",
     .type = OPT_BLOCK,
     .block = &config_healthcheck_block,
     .redins = true,
     .group = GROUP_HEALTH,
     .claim = CLAIM_HEALTH,
     .desc = "(older redins) {enable, max_requests, ..., redis, log}, into health:"},
    {.key = "upstream",
     .type = OPT_BLOCK,
     .block = &config_upstream_block,
     .redins = true,
     .claim = CLAIM_ANAME,
     .desc = "(older redins) list of {ip, port: 53, protocol: udp|tcp, timeout: 400 ms}, into "
             "aname: upstreams"},
    {.key = "log",
     .type = OPT_BLOCK,
     .block = &config_redins_log_block,
     .redins = true,
     .claim = CLAIM_REQLOG,
     .desc = "(older redins) the request log {enable, level, target, format, path, ...}, into "
             "query_log: requests"},
    /* (a redins key that did not map would be an OPT_LATER row here: refused, never ignored) */
};

#define NOPTS TERN_ARRAY_SIZE(schema)

_Static_assert(NOPTS <= CONFIG_MAX_OPTIONS, "config_t.origin has a slot for every option");

/* A fresh signature has the lifetime less the hour of its inception's skew left: the refresh
 * must come after that, or every check would sign again. */
static int check_dnssec(parse_ctx_t *pc)
{
    const config_t *c = pc->c;
    if ((uint64_t)c->dnssec_refresh + 3600 < c->dnssec_lifetime)
        return 0;
    size_t at = 0;
    while (at < NOPTS && strcmp(schema[at].key, "dnssec_refresh") != 0)
        at++;
    const yaml_node_t *where =
        at < NOPTS && pc->seen[at] ? pc->seen[at] : yaml_document_get_root_node(pc->doc);
    return config_fail(pc, where, "dnssec_refresh",
                       "%u must be less than dnssec_lifetime (%u) minus 3600", c->dnssec_refresh,
                       c->dnssec_lifetime);
}

/* What needs the whole file: the dnssec bounds, and health.redis following the top-level
 * Sentinel (config_health.c). */
static int check_loaded(parse_ctx_t *pc)
{
    int r = check_dnssec(pc);
    return r < 0 ? r : config_health_follow_sentinel(pc->c);
}

int config_load(config_t *c, const char *path, char *err, size_t errlen)
{
    return config_rows_read(c, path, schema, NOPTS, check_loaded, err, errlen);
}

size_t config_line_of(const config_t *c, const char *key)
{
    return config_rows_line_of(c, schema, NOPTS, key);
}

size_t config_restart_only_changes(const config_t *from, const config_t *to, char *buf, size_t len)
{
    return config_rows_changes(from, to, schema, NOPTS, buf, len);
}

void config_init(config_t *c)
{
    memset(c, 0, sizeof(*c));
    config_rows_init(c, schema, NOPTS);
}

int config_copy(config_t *dst, const config_t *src)
{
    int rc = config_rows_copy(dst, src, schema, NOPTS);
    dst->file = NULL;
    if (rc == 0 && src->file && !(dst->file = strdup(src->file)))
        rc = TERN_ENOMEM;
    if (rc < 0) {
        config_free(dst);
        return TERN_ENOMEM;
    }
    return 0;
}

void config_schema_print(FILE *out)
{
    config_rows_print(out, schema, NOPTS);
}

void config_free(config_t *c)
{
    config_rows_free(c, schema, NOPTS);
    free(c->file);
    config_init(c);
}
