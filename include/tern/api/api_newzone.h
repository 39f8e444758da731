/*
 * api_newzone.h — a PowerDNS API zone object (the body of POST .../zones) turned into a zone in
 * redins' schema: the zone config with its SOA and the JSON text of each label, ready for
 * redis_write_create_zone() (tern/redis/redis_write.h).
 *
 * As pdns/ws-auth.cc apiServerZonesPOST() reads it: "name" (required), "kind" (required;
 * Native, Master or Primary: tern creates no secondary, consumer or producer zone through the
 * API), "nameservers" (canonical names: the apex NS, not mixed with an apex NS in rrsets),
 * "rrsets" (each {name, type, ttl, records: [{content, disabled}], comments}; changetype is
 * ignored, as pdns does), "serial"; without an apex SOA one is made from pdns'
 * default-soa-content "a.misconfigured.dns.server.invalid hostmaster.@ 0 10800 3600 604800 3600"
 * and default-ttl 3600, its serial "serial" when given, else the caller's default (pdns'
 * SOA-EDIT-API DEFAULT turns a new zone's serial into YYYYMMDD01). soa_edit_api, soa_edit,
 * account, catalog, masters, api_rectify and comments are accepted and not kept (tern keeps no
 * zone metadata). Refused, each with its reason (answered 422): "zone" as text, "dnssec": true
 * (tern signs the zones its config gives keys), another kind, and any RRset redins' schema
 * cannot hold (zone_json_label_set(): the type, or the RDATA).
 *
 * The records are parsed exactly as a PATCH's are (api_patch_build(): the same checks and
 * texts), then grouped per owner into labels. Pure functions (no state, any thread).
 */
#ifndef TERN_API_API_NEWZONE_H
#define TERN_API_API_NEWZONE_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/wire/dname.h"

/* pdns' default-ttl: the TTL of the SOA and NS it makes for a new zone. */
#define API_NEWZONE_TTL 3600u

typedef struct api_newzone {
    char origin[DNAME_KEY_MAX]; /* canonical: lowercased, no final dot */
    char *config;               /* the zone config: {"soa": {...}} */
    char **labels, **texts;     /* n labels ("@", "www") and their JSON */
    size_t n;
    uint32_t serial; /* the SOA's */
} api_newzone_t;

/**
 * Read the zone object body (len bytes of JSON) into *z (zeroed first; api_newzone_free() it
 * whatever the outcome). serial is the SOA serial when the body gives neither an SOA nor
 * "serial". 0; TERN_EINVAL with the client's error in err (answered 422); TERN_ENOMEM.
 */
int api_newzone_build(const char *body, size_t len, uint32_t serial, api_newzone_t *z, char *err,
                      size_t errlen) TERN_WUR;

/** Free what *z holds. */
void api_newzone_free(api_newzone_t *z);

#endif
