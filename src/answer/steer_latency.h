/*
 * steer_latency.h — private to src/answer: geo_filter "latency" (issue 33), one stage of
 * answer_select()'s pipeline (select.c): among the candidates left by health, keep those of the
 * group whose measured latency from the client's network is the lowest, per the operator's
 * latency map (tern/geo/latency_map.h).
 *
 * Owns nothing. Runs on the workers: no allocation, lock or syscall; it reads the view's mapped
 * map and the RRset's records. When the client's network is not in the map, or none of the
 * candidates' groups is in its entry, it keeps nothing and says so: select.c then falls back to
 * location (keep_nearest), as the issue asks.
 */
#ifndef TERN_ANSWER_STEER_LATENCY_H
#define TERN_ANSWER_STEER_LATENCY_H

#include "tern/answer/answer_trace.h"
#include "tern/answer/select.h"

/**
 * Filter c[0 .. n) of g for the client in ctx (client_family / client_addr, set by select.c)
 * by v's latency map: keep the candidates whose group has the lowest latency in the client's
 * entry among the groups some candidate belongs to (every group tied at that latency). Widens
 * ctx->scope to the map range's prefix, fills ctx->info.steer (rules, latency_how, and the group
 * and ms when matched) and, when ts is not NULL, its latency block. Returns the candidates kept,
 * or 0 (c untouched) when it fell back: no map, the client not in it, or no candidate's group in
 * its entry.
 */
unsigned steer_latency(answer_ctx_t *ctx, const answer_view_t *v, const zone_geo_t *g, uint16_t *c,
                       unsigned n, answer_trace_select_t *ts);

#endif
