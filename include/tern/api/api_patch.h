/*
 * api_patch.h — a PowerDNS API PATCH body (a zone's "rrsets" with their changetype) turned into
 * ONE RFC 2136 UPDATE message for the update service (tern/update/update.h,
 * update_apply_msg()), so a PATCH is applied as an UPDATE is: atomically, journaled, published,
 * audited.
 *
 * The shapes are PowerDNS' (pdns/ws-auth.cc patchZone(), applyReplace(), applyDelete(),
 * gatherRecords(), parseRecordNameAndType(); docs/http-api/zone.rst): each rrset is
 * {name (absolute), type, changetype, ttl, records: [{content, disabled}], comments}, and the
 * error texts are theirs where the same mistake is made. The translation:
 *   REPLACE  delete the RRset (class ANY), then add each record (class IN, the rrset's ttl);
 *            "records": [] deletes it; "comments" alone changes nothing (tern keeps no
 *            comments: they are accepted and ignored)
 *   DELETE   delete the RRset (class ANY)
 *   EXTEND   add each record (pdns 5's EXTEND)
 *   PRUNE    delete each record given (class NONE)
 * Record content is presentation form parsed by ldns against the zone origin; RDATA goes into
 * the message uncompressed. A disabled record is refused (tern serves every record it holds).
 *
 * Pure functions (no state, any thread); the caller owns every buffer.
 */
#ifndef TERN_API_API_PATCH_H
#define TERN_API_API_PATCH_H

#include <stddef.h>

#include "tern/common/buf.h"
#include "tern/common/compiler.h"

/**
 * Build the UPDATE for the PATCH body (len bytes of JSON) of zone origin (canonical key:
 * lowercased, no final dot, "." the root) into msg (empty, unbounded; binary). A change larger
 * than one DNS message (65535 bytes) is the client's error. *nupdates is the number of update RRs
 * (0: the PATCH changes nothing). Returns 0; TERN_EINVAL with the client's error in err (answered
 * 422); TERN_ENOMEM.
 */
int api_patch_build(const char *origin, const char *body, size_t len, tern_buf_t *msg,
                    size_t *nupdates, char *err, size_t errlen) TERN_WUR;

#endif
