/*
 * answer_trace.c — the trace's recorders (answer_trace.h). Called from the stages' hooks only
 * when a context carries a trace, i.e. never on a worker; they copy what the stage decided and
 * decide nothing themselves.
 *
 * No allocation, no locks, no syscalls: the trace is the caller's.
 */
#include "tern/answer/answer_trace.h"

#include <string.h>

#include "tern/health/health.h"

void answer_trace_reset(answer_trace_t *t)
{
    t->limits = false;
    t->client_vd = t->client_why = t->zone_vd = t->rrl_vd = 0;
    t->rrl_class = 0;
    t->zone_judged = t->rrl_judged = false;
    t->nsteps = t->nselects = t->nsigs = 0;
    t->lost = false;
}

/* A wire name into dst (DNAME_MAXLEN bytes): the root for NULL. */
static void copy_name(uint8_t *dst, const uint8_t *name)
{
    if (!name) {
        dst[0] = 0;
        return;
    }
    size_t n = dname_len(name);
    memcpy(dst, name, n <= DNAME_MAXLEN ? n : 1);
    if (n > DNAME_MAXLEN)
        dst[0] = 0;
}

answer_trace_step_t *answer_trace_step(answer_trace_t *t, answer_step_kind_t kind, const zone_t *z,
                                       const uint8_t *name, const uint8_t *target)
{
    if (t->nsteps == ANSWER_TRACE_STEPS) {
        t->lost = true;
        return NULL;
    }
    answer_trace_step_t *s = &t->steps[t->nsteps++];
    s->kind = (uint8_t)kind;
    s->detail = 0;
    s->flag = 0;
    s->type = 0;
    s->zone = z;
    copy_name(s->name, name);
    copy_name(s->target, target);
    s->target2[0] = 0;
    return s;
}

answer_trace_select_t *answer_trace_select_begin(answer_trace_t *t, const zone_geo_t *g)
{
    if (t->nselects == ANSWER_TRACE_SELECTS) {
        t->lost = true;
        return NULL;
    }
    answer_trace_select_t *s = &t->selects[t->nselects++];
    memset(s, 0, sizeof(*s));
    s->g = g;
    s->count = g->count;
    for (unsigned i = 0; i < g->count && i < ANSWER_TRACE_RRS; i++)
        s->rank[i] = (uint8_t)health_ep_rank(g->rr[i].health);
    for (unsigned k = 0; k < 4; k++)
        s->left[k] = g->count;
    return s;
}

void answer_trace_select_stage(answer_trace_select_t *s, unsigned stage, const uint16_t *c,
                               unsigned n)
{
    if (!s)
        return;
    bool in[ANSWER_TRACE_RRS] = {false};
    for (unsigned i = 0; i < n; i++)
        if (c[i] < ANSWER_TRACE_RRS)
            in[c[i]] = true;
    for (unsigned i = 0; i < s->count && i < ANSWER_TRACE_RRS; i++)
        if (s->dropped[i] == ANSWER_SEL_KEPT && !in[i])
            s->dropped[i] = (uint8_t)stage;
    for (unsigned k = stage - 1; stage <= ANSWER_SEL_ORDER && k < 4; k++)
        s->left[k] = (uint16_t)n; /* the later rules' stages keep their own counts */
}

/* Whether record r lists key (a country, or an ASN when asn). */
static bool lists(const zone_geo_rr_t *r, bool asn, uint32_t key)
{
    unsigned n = asn ? r->nasns : r->ncountries;
    for (unsigned i = 0; i < n; i++)
        if ((asn ? r->asns[i] : r->countries[i]) == key)
            return true;
    return false;
}

void answer_trace_select_filter(answer_trace_select_t *s, unsigned step, bool asn, uint32_t key,
                                const zone_geo_t *g, const uint16_t *c, unsigned n)
{
    if (!s || step > 1)
        return;
    s->nfilters = (uint8_t)(step + 1);
    s->filter_key[step] = key;
    /* the step keeps matching records first: the first kept one tells which case it was */
    if (n && key && lists(&g->rr[c[0]], asn, key))
        s->filter_end[step] = ANSWER_FILTER_MATCHED;
    else if (n && ((asn ? g->rr[c[0]].nasns : g->rr[c[0]].ncountries) == 0 ||
                   lists(&g->rr[c[0]], asn, 0)))
        s->filter_end[step] = ANSWER_FILTER_UNLISTED;
    else
        s->filter_end[step] = ANSWER_FILTER_ALL;
}

void answer_trace_select_end(answer_trace_t *t, const answer_ctx_t *ctx, const zone_geo_t *g,
                             const zone_t *z, const zone_rrset_t *rr, const uint8_t *owner,
                             const uint32_t *offs, unsigned n)
{
    answer_trace_select_t *s = t->nselects ? &t->selects[t->nselects - 1] : NULL;
    if (!s || s->g != g || s->rr)
        return; /* its begin did not fit */
    s->zone = z;
    s->rr = rr;
    copy_name(s->owner, owner);
    if (ctx->ent) {
        s->client_known = true;
        s->client_family = ctx->client_family;
        memcpy(s->client_addr, ctx->client_addr, sizeof(s->client_addr));
        s->geo = *ctx->ent;
    }
    /* the records given, by their RDATA offsets (what the writer was handed) */
    s->nout = 0;
    for (unsigned k = 0; k < n; k++)
        for (unsigned i = 0; i < s->count; i++)
            if (s->g->rr[i].off == offs[k]) {
                if (s->nout < ANSWER_TRACE_RRS)
                    s->out[s->nout++] = (uint16_t)i;
                break;
            }
    /* kept through the filters but not given: order + count single left them out */
    for (unsigned i = 0; i < s->count && i < ANSWER_TRACE_RRS; i++) {
        bool given = false;
        for (unsigned k = 0; k < s->nout && !given; k++)
            given = s->out[k] == i;
        if (s->dropped[i] == ANSWER_SEL_KEPT && !given)
            s->dropped[i] = ANSWER_SEL_ORDER;
    }
    s->left[3] = (uint16_t)n;
}

void answer_trace_sig(answer_trace_t *t, const zone_t *z, const uint8_t *owner, uint16_t type,
                      answer_sig_how_t how, unsigned sigs)
{
    if (t->nsigs == ANSWER_TRACE_SIGS) {
        t->lost = true;
        return;
    }
    answer_trace_sig_t *s = &t->sigs[t->nsigs++];
    s->type = type;
    s->how = (uint8_t)how;
    s->sigs = (uint8_t)sigs;
    s->zone = z;
    copy_name(s->owner, owner);
}
