/*
 * source_aname.h — ANAME results behind zone_source.h: the A and AAAA of ANAME targets outside
 * the served zones, as the resolver thread (aname_resolver.h) learns them.
 *
 * Owner: the loader, as one entry of zone_source.c's table (source_aname_ops). After each
 * publish (published()) it hands the resolver every name where an ANAME's A or AAAA leaves the
 * served zones, making the resolver the first time there is one; the resolver's new results
 * poke() the loader, whose collect() takes them in and whose next view carries them
 * (source_aname_results()). Once a complete first round is in a published view, the ready
 * descriptor turns readable (main holds READY=1 for it).
 *
 * Threading: as zone_source.h. source_aname_stats(), source_aname_ready_fd() and
 * source_aname_log_pending() any thread (the resolver is made by the loader thread and freed
 * only by free(), after the control and metrics threads stop).
 */
#ifndef TERN_SOURCE_SOURCE_ANAME_H
#define TERN_SOURCE_SOURCE_ANAME_H

#include <stdbool.h>

#include "tern/source/aname_resolver.h"
#include "tern/source/zone_source.h"
#include "tern/zone/aname_results.h"

extern const zone_source_ops_t source_aname_ops;

/** Loader thread: a new reference to the results the next view carries, or NULL: none yet. */
aname_results_t *source_aname_results(zone_source_t *s);

/** The resolver's counters; false (out zeroed) while no zone has a target outside the served
 * zones. Any thread. */
bool source_aname_stats(zone_source_t *s, aname_stats_t *out);

/** A descriptor that polls readable once the first complete round is in the published view
 * (never read it; free() closes it), or -1 when there is nothing to wait for. Any thread. */
int source_aname_ready_fd(zone_source_t *s);

/** Log the targets still without an answer. Any thread. */
void source_aname_log_pending(zone_source_t *s);

#endif
