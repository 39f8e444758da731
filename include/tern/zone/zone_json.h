/*
 * zone_json.h — zones in the redins schema (arvancloud/redins): JSON per label, as redins keeps
 * them in Redis, turned into an immutable zone_t through the zone builder.
 *
 * Owns: the mapping from redins' JSON to wire RDATA and geo metadata. Two entry points share it:
 *   - a JSON zone file (zone_json_load_file): one object
 *       {"config": <the zone config, as redins:zones:<zone>:config holds it>,
 *        "records": {"<label>": <RRsets, as the hash field <label> of redins:zones:<zone> holds>,
 *                    ...}}
 *     where "@" is the apex and other labels are relative to the origin;
 *   - the Redis source (load/), which feeds the same JSON texts one label at a time through the
 *     incremental API (zone_json_new / _config / _label / _finish).
 *
 * Schema (redins 1.x; keys matched case-insensitively, as Go's encoding/json does):
 *   config: {"soa": {"ttl", "ns", "mbox", "refresh", "retry", "expire", "minttl", "serial"},
 *            "domain_id", "dnssec", "cname_flattening"}   — the SOA is required;
 *   label:  {"a"|"aaaa": {"ttl", "records": [{"ip", "country": "US"|["US",..], "asn": n|[n,..],
 *                                             "weight"}],
 *                         "filter": {"count": "multi"|"single", "order": "none"|"weighted"|"rr",
 *                                    "geo_filter": "none"|"country"|"location"|"asn"|
 *                                                  "asn+country"},
 *                         "health_check": {"enable", "protocol": "http"|"https"|"ping"|"icmp"|
 *                                          "tcp", "uri", "port", "up_count", "down_count",
 *                                          "timeout", and tern's "method": "HEAD"|"GET",
 *                                          "expect": code|[codes], "tls_verify", "host"}},
 *            "cname": {"ttl", "host"}, "txt": {"ttl", "records": [{"text"}]},
 *            "ns": {"ttl", "records": [{"host"}]},
 *            "mx": {"ttl", "records": [{"host", "preference"}]},
 *            "srv": {"ttl", "records": [{"target", "priority", "weight", "port"}]},
 *            "caa": {"ttl", "records": [{"tag", "value", "flag"}]}, "ptr": {"ttl", "domain"},
 *            "tlsa": {"ttl", "records": [{"usage", "selector", "matching_type", "certificate"}]},
 *            "aname": {"ttl", "location"}}
 *
 * Beyond the schema, as redins behaves: names inside records are absolute with or without their
 * final dot; a record without its ip/host/target, or with an empty text, is skipped (redins skips
 * it when answering); an RRset TTL of 0 or none is opts->default_ttl; SOA timers left out are
 * redins' defaults (refresh 86400, retry 7200, expire 3600, minttl 300) and a serial left out is
 * the load time. Where tern differs: without an NS RRset at the apex one NS naming the SOA's
 * primary is added (the builder needs one; logged at info); "aname" becomes an ANAME record
 * (WIRE_T_ANAME) to location, TTL as any RRset's (answer.h: how it is answered); "dnssec" true
 * needs the zone's keys (opts.dnskeys), else the config is refused; a filter value other than those
 * listed is an error, where redins would fall back to a default. An enabled health_check gives each
 * record of its RRset an endpoint (tern/health/health.h) keyed by the check, the record's address
 * and the owner (the HTTP Host, as redins sends it), so the RRset is served health-first
 * (answer/select.h); its port is checked (redins ignored it: 80 for http and 443 for https when
 * left out), a down_count of 3 means -3 as in redins, a timeout of 0 means the default 1000 ms, and
 * a bad value (port 0, an unknown protocol, a negative timeout) fails the label with its path
 * ("a.health_check.port"). A disabled check is ignored.
 *
 * Lifecycle: loader thread only (new → config → label* → finish, or free); not thread-safe.
 */
#ifndef TERN_ZONE_ZONE_JSON_H
#define TERN_ZONE_ZONE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/health/health.h"
#include "tern/zone/zone.h"
#include "tern/zone/zone_builder.h"

/* Locates a record's address at build time (for the "location" filter): family 4 or 6, addr 4 or
 * 16 bytes. Returns true with lat/lon in degrees, false when unknown. */
typedef bool (*zone_json_locate_fn)(void *ctx, int family, const uint8_t *addr, double *lat,
                                    double *lon);

typedef struct zone_json_opts {
    zone_json_locate_fn locate; /* NULL: no record has a location */
    void *locate_ctx;
    uint32_t default_ttl; /* TTL for RRsets that give none (redins: 300); 0 = 300 */
    uint32_t max_ttl;     /* cap on every RRset's TTL (redins' handler max_ttl); 0 = none */
    /* Records one RRset of a label may give, as given ("records" entries); a label with more is
     * refused whole (TERN_ELIMIT). 0 or above 65,535: 65,535, what an RRset can hold. */
    uint32_t max_rrset_records;
    /* Where enabled health_checks intern their endpoints; NULL: health checking is off, checks
     * are still validated, no record is checked (redins with healthcheck disabled) */
    health_registry_t *health;
    /* Checks by address for records without a health_check of their own (ternd.yaml's
     * health: checks), handed to the builder (zone_builder_set_health()); NULL = none */
    zone_builder_health_fn health_fn;
    void *health_ctx;
    /* DNSSEC: the DNSKEY RDATA of the zone's signing keys (an rdata sequence,
     * dnssec_zone_dnskeys()), handed to zone_builder_set_dnssec(); NULL = the zone is not signed
     * by tern, and a config with "dnssec": true is an error (its keys are missing) */
    const uint8_t *dnskeys;
    size_t dnskeys_len;
    /* the keys come after the config (the Redis source reads them with it): "dnssec": true is
     * not an error in zone_json_config(); the caller asks zone_json_dnssec() and hands them to
     * zone_json_set_dnssec() before the first label */
    bool dnssec_deferred;
} zone_json_opts_t;

typedef struct zone_json zone_json_t;

/** Start a zone at origin (text, e.g. "example.com" or "example.com."). source names it in
 * messages (a path, or "redis://host:port/zone"). NULL with a message in err on a bad origin. */
zone_json_t *zone_json_new(const char *origin, const char *source, const zone_json_opts_t *opts,
                           char *err, size_t errlen) TERN_WUR;

/** The zone config JSON (text of len bytes). 0, or TERN_ESYNTAX/TERN_EINVAL with "source: zone X
 * config: message" in err: the zone cannot be built. */
int zone_json_config(zone_json_t *zj, const char *json, size_t len, char *err,
                     size_t errlen) TERN_WUR;

/** Whether the config read by zone_json_config() says "dnssec": true or names a policy. */
bool zone_json_dnssec(const zone_json_t *zj);

/** The config's "dnssec_policy" (tern's field: the ternd.yaml key policy whose keys sign the
 * zone, for a Redis zone; dnssec_deferred only), or NULL. Valid while zj lives. */
const char *zone_json_dnssec_policy(const zone_json_t *zj);

/** The config's "dnssec_unsign": true (tern's field, beside "dnssec_policy", which it needs):
 * unsign the zone (RFC 8078) by its policy's key state. */
bool zone_json_dnssec_unsign(const zone_json_t *zj);

/** The zone is signed with keys whose DNSKEY RDATA is dnskeys (rdata sequence, len bytes):
 * zone_builder_set_dnssec(). After zone_json_config(), before the first label. 0 or
 * TERN_ENOMEM. */
int zone_json_set_dnssec(zone_json_t *zj, const uint8_t *dnskeys, size_t len) TERN_WUR;

/**
 * One label's RRsets (JSON text of len bytes). label is relative ("www", "a.b") or "@".
 * On error nothing of the label is added and err holds "source: zone X label Y: message" naming
 * the field (e.g. "a.records[2].ip"); the caller may go on with other labels (the Redis source
 * does). Every rule one label could otherwise break only at zone_json_finish() — failing the
 * whole zone, every version of it while the label stays — is checked here, so that it costs the
 * label, never the zone:
 *   - a CNAME beside other data in the label (TERN_EINVAL);
 *   - an RRset of more than opts->max_rrset_records records, or more than an RRset can hold
 *     (TERN_ELIMIT);
 *   - an owner that an earlier label of this build already gave: "www" after "WWW" or
 *     "\119ww" (TERN_EEXIST). The first one added stays, whatever it holds; one owner comes
 *     from one label.
 * Returns 0, TERN_ESYNTAX (bad JSON), TERN_EINVAL (a bad value, out of zone), TERN_ELIMIT,
 * TERN_EEXIST, or TERN_ENOMEM (after which part of the label may be in the zone: abandon it).
 */
int zone_json_label(zone_json_t *zj, const char *label, const char *json, size_t len, char *err,
                    size_t errlen) TERN_WUR;

/** Build the zone (consumes zj). 0 with *out set, or a TERN_E* code and the message: TERN_ENOSOA
 * "source: zone X: no SOA (zone config missing)" when no config was given, else the builder's.
 * Labels given through zone_json_label() cannot make it fail (see there); only the zone as a
 * whole can (no config, out of memory). */
int zone_json_finish(zone_json_t *zj, zone_t **out, char *err, size_t errlen) TERN_WUR;

/** Abandon. NULL is a no-op. */
void zone_json_free(zone_json_t *zj);

/**
 * Load a JSON zone file (format above). Syntax errors are "path:line:column: message"; a bad
 * label is "path: zone X label Y: message" and fails the whole file (a file is edited as a whole,
 * unlike Redis). Two labels naming one owner ("www", "WWW") merge here, and the builder judges
 * the result (a CNAME beside the other's data fails the file). 0 with *out, or a TERN_E* code.
 */
int zone_json_load_file(const char *origin, const char *path, const zone_json_opts_t *opts,
                        zone_t **out, char *err, size_t errlen) TERN_WUR;

/*
 * Editing: redins JSON written back (zone_json_edit.c), for a change made through tern (an
 * UPDATE of a Redis zone): the inverse of what the reader takes, field for field.
 */

/**
 * A redins label (JSON text of len bytes; NULL or len 0 for a label Redis does not hold yet)
 * with its RRset of type replaced by the n RRs given (RDATA as the zone holds it, names
 * uncompressed; one TTL; n 0: the type's key removed). Everything else the label holds is kept:
 * its other RRsets, the set's "filter" and "health_check", and for A/AAAA each record that stays
 * (same "ip") as it was, with its own fields (country, asn, weight, ...). 0 with *out the new
 * text (malloc'd; NULL when the label holds nothing any more: delete it); TERN_ENOTSUP (err:
 * redins' schema has no such RRset, or cannot hold this RDATA: a TXT split other than at 255
 * bytes, two CNAMEs); TERN_ESYNTAX (the label's JSON does not parse); TERN_ENOMEM.
 */
int zone_json_label_set(const char *json, size_t len, uint16_t type, uint32_t ttl,
                        const uint8_t *const *rdata, const uint16_t *rdlen, size_t n, char **out,
                        char *err, size_t errlen) TERN_WUR;

/**
 * A zone config (JSON text of len bytes) with its "soa" set from an apex SOA (ttl, RDATA of
 * soa_len bytes): ns, mbox, ttl, serial, refresh, retry, expire, minttl; its other keys kept.
 * 0 with *out (malloc'd), TERN_ESYNTAX (it does not parse), TERN_EINVAL, TERN_ENOMEM.
 */
int zone_json_config_set_soa(const char *json, size_t len, uint32_t ttl, const uint8_t *soa,
                             uint16_t soa_len, char **out, char *err, size_t errlen) TERN_WUR;

/**
 * A digest of a zone config (JSON text) without its "soa" (whatever its case): what applies to
 * the whole zone beside the SOA (dnssec, domain_id, ...). Two configs with the same digest differ
 * at most in the SOA, which a patch of the apex carries (the Redis source patches an UPDATE's new
 * serial instead of reading the zone again). Text that does not parse digests as its bytes.
 */
uint64_t zone_json_config_digest_zone_wide(const char *json, size_t len);

#endif
