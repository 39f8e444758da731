/*
 * zone_file.h — load an RFC 1035 master file with ldns into a zone.
 *
 * Supports every RR type ldns parses, unknown types in RFC 3597 form (TYPE12345 \# 3 abcdef),
 * $ORIGIN, $TTL and $INCLUDE (a relative path is relative to the including file's directory;
 * nesting is limited to 8 levels). Out-of-zone records are skipped with a warning naming
 * file:line. Loader-thread only.
 *
 * A reload of a large zone need not build a second copy of it: zone_file_patch() reads the file
 * as a change of the published version (zone_diff.h finds the names whose data differ; a second
 * read builds only those names and the apex; zone_patch.h makes the new version sharing the
 * rest), and says when a full build (zone_file_load_opts()) is the better way.
 */
#ifndef TERN_ZONE_ZONE_FILE_H
#define TERN_ZONE_ZONE_FILE_H

#include <stddef.h>
#include <sys/stat.h>

#include "tern/common/compiler.h"
#include "tern/zone/zone.h"
#include "tern/zone/zone_builder.h"

/**
 * Load the zone origin (presentation form, e.g. "example.test" or "example.test.") from path.
 * Returns 0 and the zone in *out, or a negative TERN_E* code with "file:line: message" in err.
 */
int zone_file_load(const char *origin, const char *path, zone_t **out, char *err,
                   size_t errlen) TERN_WUR;

/** Called once for every file a load opens (the zone file, then each $INCLUDE), with its fstat. */
typedef int (*zone_file_seen_fn)(void *ctx, const char *path, const struct stat *st);

/**
 * zone_file_load() that also reports every file it read to seen (which may fail the load by
 * returning a negative TERN_E* code), so a reloader can tell later whether any of them changed.
 */
int zone_file_load_seen(const char *origin, const char *path, zone_file_seen_fn seen, void *ctx,
                        zone_t **out, char *err, size_t errlen) TERN_WUR;

/** zone_file_load_seen() with health checks by address: health (may be NULL) is handed to the
 * zone builder (zone_builder_set_health()) with health_ctx. */
int zone_file_load_health(const char *origin, const char *path, zone_file_seen_fn seen, void *ctx,
                          zone_builder_health_fn health, void *health_ctx, zone_t **out, char *err,
                          size_t errlen) TERN_WUR;

/** Everything a load may be given (NULL fields: none). */
typedef struct zone_file_opts {
    zone_file_seen_fn seen;
    void *seen_ctx;
    zone_builder_health_fn health;
    void *health_ctx;
    /* the DNSKEY RDATA of the keys tern signs the zone with (zone_builder_set_dnssec()) */
    const uint8_t *dnskeys;
    size_t dnskeys_len;
} zone_file_opts_t;

/** zone_file_load() with opts (may be NULL). */
int zone_file_load_opts(const char *origin, const char *path, const zone_file_opts_t *opts,
                        zone_t **out, char *err, size_t errlen) TERN_WUR;

/* zone_file_patch()'s answers besides 0 and errors. */
#define ZONE_FILE_SAME  1 /* the file holds exactly the base's data: nothing to publish */
#define ZONE_FILE_BUILD 2 /* load it with zone_file_load_opts() instead (err says why) */

/**
 * The file as a new version of base (a zone of the same origin, loaded from the same source and
 * published; only read here), built from the names whose data differ and sharing the rest.
 * The file is read twice: first every record is compared with base (opts->seen is told of each
 * file then, and out-of-zone records are warned about then), then the records of the changed
 * names and of the apex are built into a small zone that zone_patch() applies.
 *
 * Returns 0 with *out the new version (refs 1); ZONE_FILE_SAME with *out NULL; ZONE_FILE_BUILD
 * with *out NULL and the reason in err, when a full build is needed: a signed zone
 * (opts->dnskeys, base->dnssec), more than base->node_count / 8 + ZONE_PATCH_NAMES changed
 * names (a second read would copy most of the zone anyway), a change zone_patch() cannot make,
 * or a file that changed between or during the two reads (never a version of half of each);
 * or a negative TERN_E* with "file:line: message" in err, the message zone_file_load_opts()
 * gives for the same file (the builder's, about a changed name, for what only it checks).
 */
int zone_file_patch(const char *origin, const char *path, const zone_file_opts_t *opts,
                    const zone_t *base, zone_t **out, char *err, size_t errlen) TERN_WUR;

#endif
