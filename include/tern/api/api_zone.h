/*
 * api_zone.h — a served zone version as the PowerDNS API shows it: its RRsets (pdns/ws-auth.cc
 * fillZone(): [{name, type, ttl, records: [{content, disabled}], comments: []}], sorted by name,
 * type, content; ttl the least of the records') and its export (apiServerZoneExport(): one
 * "name<TAB>ttl<TAB>IN<TAB>type<TAB>content" line per record).
 *
 * The records are those an AXFR of the version carries (tern/xfr/xfr_stream.h): every RR of
 * every node, glue included, a geo-steered or health-checked RRset (Redis, redins JSON) with all
 * its records, the apex SOA once; for a zone tern signs, not the records its keys make (DNSKEY,
 * CDS, CDNSKEY, RRSIG, NSEC, NSEC3, NSEC3PARAM), which PowerDNS keeps out of rrsets too. Content
 * is ldns' presentation form.
 *
 * The caller pins the version (answer_pin_zone()) for the call; nothing is kept after it. Any
 * thread but a worker (it allocates).
 */
#ifndef TERN_API_API_ZONE_H
#define TERN_API_API_ZONE_H

#include <jansson.h>
#include <stddef.h>

#include "tern/common/buf.h"
#include "tern/common/compiler.h"
#include "tern/zone/zone.h"

/**
 * The RRsets of z into *out (a new JSON array), only those of owner name when only_name is not
 * NULL (absolute, any case) and of type only_type when it is not NULL (pdns' rrset_name and
 * rrset_type); *records counts the records. 0, TERN_EINVAL (a bad only_name or only_type) or
 * TERN_ENOMEM.
 */
int api_zone_rrsets(const zone_t *z, const char *only_name, const char *only_type, json_t **out,
                    size_t *records) TERN_WUR;

/** The zone's text into out (appended). 0 or TERN_ENOMEM. */
int api_zone_export(const zone_t *z, tern_buf_t *out) TERN_WUR;

#endif
