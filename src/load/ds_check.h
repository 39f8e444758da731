/*
 * ds_check.h — private to src/load: the thread that looks for a zone's new DS at its parent
 * ("tern-dscheck"), as Knot's ksk-submission check does, so a KSK becomes active on its own once
 * the registrar has put its DS in place.
 *
 * The loader (zone_kasp.c) tells it, per zone, which DS the key-state machine waits for (the
 * RDATA of each wanted KSK's DS, by key tag) and which servers of the parent to ask. Every
 * `interval` seconds the thread asks each of those servers for the zone's DS RRset (RD=0, UDP,
 * TCP when truncated, a 2 s timeout, one try); a wanted DS that every server answers is seen:
 * the callback is called with the zone and key tag (it records it and builds the zone again) and
 * the DS is no longer looked for. A server that does not answer, or answers without it, means
 * "not yet" (logged at debug level; the next round asks again). A zone being unsigned (RFC 8078)
 * waits for the opposite, its DS RRset gone: a want with `gone` set is met when every server
 * answers authoritatively (AA, NOERROR or NXDOMAIN) with no DS for the zone.
 *
 * Threading: ds_check_set() from the loader thread; the callback on the checker's thread,
 * without its lock held. The thread waits on a condition variable with a deadline and never
 * holds its lock while it waits on the network; ds_check_stop() wakes it and waits at most for
 * the query in flight (its timeout), never for a schedule.
 */
#ifndef TERN_LOAD_DS_CHECK_H
#define TERN_LOAD_DS_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/dnssec/dnssec_kasp_keys.h"

typedef struct ds_check ds_check_t;

/* A DS the zone waits for: its key's tag and the DS RDATA (tern/dnssec/dnssec_kasp_keys.h). */
typedef dnssec_kasp_ds_t ds_check_want_t;

/* Called with the want met (seen, or gone). */
typedef void (*ds_check_seen_fn)(void *ctx, const char *key, const ds_check_want_t *want);

/** A checker calling seen(ctx, ...) for each DS it finds. NULL when out of memory. */
ds_check_t *ds_check_new(ds_check_seen_fn seen, void *ctx) TERN_WUR;

/** Start its thread. 0 or a negative code. */
int ds_check_start(ds_check_t *c) TERN_WUR;

/**
 * Zone key (origin: its name in presentation form) waits for wants[0..n) at the parent's
 * servers (each "ADDR" or "ADDR@PORT"), asked every interval seconds (the first time at once).
 * n 0 or nservers 0: nothing to look for (a job is dropped). Copies everything.
 */
void ds_check_set(ds_check_t *c, const char *key, const char *origin, const ds_check_want_t *wants,
                  size_t n, char *const *servers, size_t nservers, unsigned interval);

/** Stop the thread (idempotent) and free. NULL is a no-op. */
void ds_check_free(ds_check_t *c);

#endif
