/*
 * select_int.h — what select.c shares with the steering rules it calls (steer_*.c, issue 33),
 * private to src/answer.
 *
 * Owner: select.c runs the pipeline (select.h); each rule lives in its own file and reads the
 * candidates' weights only through cand_weight(), so a rule that scales weights (load shedding)
 * changes them in one place for every order.
 * Threading: per worker, like answer_select(); no allocation, lock or syscall.
 */
#ifndef TERN_ANSWER_SELECT_INT_H
#define TERN_ANSWER_SELECT_INT_H

#include <stdint.h>

#include "tern/answer/answer.h"
#include "tern/common/compiler.h"
#include "tern/zone/zone.h"

/* The weight the orders use for candidate i (a position in c) of g: the record's own, or when
 * the RRset sheds, the load-scaled one steer_shed.c left in ctx->wscaled. That one is kept by
 * record (c[i]), not by position, since the tier step compacts c and the sticky order reorders
 * it. */
static inline uint32_t cand_weight(const answer_ctx_t *ctx, const zone_geo_t *g, const uint16_t *c,
                                   unsigned i)
{
    return unlikely(g->policy.shed) ? ctx->wscaled[c[i]] : g->rr[c[i]].weight;
}

#endif
