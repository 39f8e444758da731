/*
 * ctl_explain_fmt.h — private to src/ctl: explain's report, built from the trace and the
 * response (ctl_explain_fmt.c) for ctl_explain.c, which runs the query.
 *
 * Every function builds a new JSON value (jansson) from what answer_query() recorded; the text
 * form is the same object written as lines (ctl_explain_fmt_text()). The trace's zone, RRset and
 * steering pointers point into the view, so the caller builds the report while it still holds
 * that view (online in RCU). Threading: the control socket's serving thread.
 */
#ifndef TERN_CTL_CTL_EXPLAIN_FMT_H
#define TERN_CTL_CTL_EXPLAIN_FMT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl_int.h"
#include "tern/answer/answer.h"
#include "tern/answer/answer_trace.h"
#include "tern/health/health.h"

/* One health-checked endpoint as the registry last said, copied before going online in RCU. */
typedef struct ctl_explain_ep {
    const health_ep_t *ep; /* what the records point at: the key */
    char desc[160];
    char state[16];
    bool checked, last_ok, remote;
    int64_t last_check; /* wall ms */
} ctl_explain_ep_t;

typedef struct ctl_explain_health {
    ctl_explain_ep_t *v;
    size_t n, cap;
} ctl_explain_health_t;

/** health_each() callback (ctx: a ctl_explain_health_t): copy one endpoint; on no memory the
 * record shows its rank alone. */
void ctl_explain_fmt_health(void *ctx, const health_ep_info_t *info);

/** A wire name in presentation form; an RR type's mnemonic. */
json_t *ctl_explain_fmt_name(const uint8_t *name);
json_t *ctl_explain_fmt_type(uint16_t type);

/** The zone of the name asked: name, serial, source, patches, records, signed (null: none). */
json_t *ctl_explain_fmt_zone(const zone_t *z);

/** The policy stage's verdicts (and RRL's), none of them charged. */
json_t *ctl_explain_fmt_policy(const answer_trace_t *t, const answer_ctx_t *ctx, bool tcp);

/** One step of the resolve stage's path. */
json_t *ctl_explain_fmt_step(const answer_trace_step_t *s);

/** One steered RRset's selection: the client, each stage, every record and its fate. */
json_t *ctl_explain_fmt_select(const answer_trace_select_t *s, const answer_view_t *v,
                               const ctl_explain_health_t *hl);

/** Where each RRSIG set came from. */
json_t *ctl_explain_fmt_sigs(const answer_trace_t *t);

/** The response answer_query() made (len bytes of out; 0: none), parsed. */
json_t *ctl_explain_fmt_response(const uint8_t *out, size_t len, const answer_info_t *info);

/** v under key as "key: k=v ..." lines into b, nested parts indented two more spaces. */
void ctl_explain_fmt_text(sb_t *b, const char *key, json_t *v, const char *indent);

#endif
