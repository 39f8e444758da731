/*
 * ctl_explain_fmt.c — explain's report (ctl_explain_fmt.h): the trace the pipeline filled and the
 * response it made, as one JSON object, and that object as "key: k=v" lines.
 *
 * Decisions, and why:
 *   - One builder, two forms: the text is the JSON object written as lines, so the two cannot
 *     say different things and a script's field is the operator's word.
 *   - A record's chance to come first is its weight over the weights of what the filters kept
 *     (order weighted; zero weights are never picked), or one in that many (order rr): the
 *     answer shown is one draw, the chances say what the others would be.
 *   - Distances (location filter) are great-circle kilometres from the same unit vectors the
 *     filter compares, so their order is the filter's.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <ldns/ldns.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_explain_fmt.h"
#include "tern/wire/dname.h"

/* Mean Earth radius (km): distances shown for the location filter. */
#define EARTH_KM 6371.0

/* --- health, copied before going online in RCU */

void ctl_explain_fmt_health(void *arg, const health_ep_info_t *i)
{
    ctl_explain_health_t *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        ctl_explain_ep_t *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return; /* a record then shows its rank only */
        l->v = v;
        l->cap = cap;
    }
    ctl_explain_ep_t *h = &l->v[l->n++];
    h->ep = i->ep;
    health_spec_describe(i->spec, h->desc, sizeof(h->desc));
    snprintf(h->state, sizeof(h->state), "%s", i->state);
    h->checked = i->checked;
    h->last_ok = i->last_ok;
    h->remote = i->last_remote;
    h->last_check = i->last_check;
}

static const ctl_explain_ep_t *hfind(const ctl_explain_health_t *l, const health_ep_t *ep)
{
    for (size_t i = 0; ep && i < l->n; i++)
        if (l->v[i].ep == ep)
            return &l->v[i];
    return NULL;
}

/* --- formatting helpers */

json_t *ctl_explain_fmt_name(const uint8_t *name)
{
    char buf[1024];
    if (dname_to_str(name, buf, sizeof(buf)) < 0)
        snprintf(buf, sizeof(buf), "?");
    return json_string(buf);
}

json_t *ctl_explain_fmt_type(uint16_t type)
{
    char *s = ldns_rr_type2str((ldns_rr_type)type);
    json_t *j = json_string(s ? s : "?");
    free(s);
    return j;
}

static json_t *zone_name_json(const zone_t *z)
{
    return z ? ctl_explain_fmt_name(z->apex) : json_null();
}

static const char *verdict_name(unsigned vd)
{
    static const char *const n[] = {"pass", "refuse", "drop", "slip"};
    return vd < 4 ? n[vd] : "?";
}

static void cc_text(uint32_t cc, char out[3])
{
    out[0] = cc ? (char)(cc >> 8) : '-';
    out[1] = cc ? (char)cc : '-';
    out[2] = '\0';
}

/* --- the decisions */

json_t *ctl_explain_fmt_policy(const answer_trace_t *t, const answer_ctx_t *ctx, bool tcp)
{
    static const char *const why[] = {"none",      "the global acl", "the zone's acl",
                                      "blacklist", "rate limit",     "rrl"};
    static const char *const cls[] = {"answer",   "nodata",   "nxdomain",
                                      "referral", "wildcard", "error"};
    json_t *p = json_object();
    json_object_set_new(p, "limits", json_boolean(t->limits));
    json_object_set_new(p, "client", json_string(verdict_name(t->client_vd)));
    if (t->client_vd != LIMIT_PASS)
        json_object_set_new(p, "client_rule", json_string(why[t->client_why % 6]));
    /* the access list's own words: which of its lists refused (ctx->lc: the client judged) */
    const char *rule = t->client_vd != LIMIT_PASS && t->client_why == LIMIT_WHY_ACL
                           ? limit_acl_rule(ctx->view->limit, &ctx->lc, NULL, 0)
                           : NULL;
    if (rule)
        json_object_set_new(p, "client_acl_rule", json_string(rule));
    json_object_set_new(p, "rate_charged", json_false());
    if (t->zone_judged) {
        json_object_set_new(p, "zone_acl", json_string(verdict_name(t->zone_vd)));
        const zone_t *z = ctx->info.zone;
        if (t->zone_vd != LIMIT_PASS && z) {
            json_object_set_new(p, "zone_acl_of", zone_name_json(z));
            const char *zr = limit_acl_rule(ctx->view->limit, &ctx->lc, z->apex, z->hash);
            if (zr)
                json_object_set_new(p, "zone_acl_rule", json_string(zr));
        }
    }
    if (t->rrl_judged) {
        json_object_set_new(
            p, "rrl",
            json_string(t->rrl_vd == LIMIT_PASS ? "pass" : "over the limit: drop or slip"));
        json_object_set_new(p, "rrl_class", json_string(cls[t->rrl_class % 6]));
        json_object_set_new(p, "rrl_charged", json_false());
    } else {
        json_object_set_new(p, "rrl",
                            json_string(!t->limits ? "off"
                                        : tcp      ? "not applied (tcp)"
                                                   : "not applied (off, whitelisted "
                                                     "or a valid cookie)"));
    }
    return p;
}

json_t *ctl_explain_fmt_step(const answer_trace_step_t *s)
{
    static const char *const kinds[] = {"lookup",   "cname",  "dname",  "aname", "referral",
                                        "nxdomain", "nodata", "answer", "stop"};
    static const char *const lk[] = {"exact", "wildcard", "nxdomain", "dname"};
    static const char *const stops[] = {"left the served zones",
                                        "chain limit",
                                        "loop",
                                        "zone hidden by its acl",
                                        "zone unavailable",
                                        "yxdomain",
                                        "no zone (refused)",
                                        "aname target not resolved upstream yet (servfail)"};
    static const char *const walks[] = {"found", "nodata", "outside (resolver thread)",
                                        "loop or unresolved (servfail)"};
    json_t *j = json_object();
    json_object_set_new(j, "step", json_string(kinds[s->kind % 9]));
    json_object_set_new(j, "name", ctl_explain_fmt_name(s->name));
    if (s->zone)
        json_object_set_new(j, "zone", zone_name_json(s->zone));
    switch (s->kind) {
    case ANSWER_STEP_LOOKUP:
        json_object_set_new(j, "found", json_string(lk[s->detail % 4]));
        if (s->flag)
            json_object_set_new(j, "below_delegation", json_true());
        break;
    case ANSWER_STEP_CNAME:
    case ANSWER_STEP_REFERRAL:
        json_object_set_new(j, "target", ctl_explain_fmt_name(s->target));
        break;
    case ANSWER_STEP_DNAME:
        json_object_set_new(j, "dname_owner", ctl_explain_fmt_name(s->target2));
        json_object_set_new(j, "target", ctl_explain_fmt_name(s->target));
        break;
    case ANSWER_STEP_ANAME:
        json_object_set_new(j, "target", ctl_explain_fmt_name(s->target));
        json_object_set_new(j, "walk", json_string(walks[s->detail % 4]));
        if (s->detail == ANSWER_ANAME_OUT)
            json_object_set_new(j, "leaves_at", ctl_explain_fmt_name(s->target2));
        break;
    case ANSWER_STEP_ANSWER:
    case ANSWER_STEP_NODATA:
        json_object_set_new(j, "type", ctl_explain_fmt_type(s->type));
        if (s->flag)
            json_object_set_new(j, "wildcard", ctl_explain_fmt_name(s->target));
        if (s->kind == ANSWER_STEP_ANSWER && s->detail)
            json_object_set_new(j, "from", json_string("aname results"));
        break;
    case ANSWER_STEP_STOP:
        json_object_set_new(j, "why", json_string(stops[s->detail % 8]));
        break;
    default:
        break;
    }
    return j;
}

static void rdata_text(const zone_rrset_t *rr, uint32_t off, char *buf, size_t len)
{
    const uint8_t *p = rr->rdata + off;
    unsigned rdlen = (unsigned)p[0] << 8 | p[1];
    if (!inet_ntop(rdlen == 4 ? AF_INET : AF_INET6, p + 2, buf, (socklen_t)len))
        snprintf(buf, len, "?");
}

static const char *const filter_names[] = {"none",        "country",  "asn",
                                           "asn+country", "location", "latency"};
static const char *const order_names[] = {"none", "weighted", "rr", "sticky"};
static const char *const count_names[] = {"multi", "single"};

static json_t *client_json(const answer_trace_select_t *s, const answer_view_t *v)
{
    json_t *c = json_object();
    char ip[INET6_ADDRSTRLEN], cc[3];
    if (!inet_ntop(s->client_family == AF_INET6 ? AF_INET6 : AF_INET, s->client_addr, ip,
                   sizeof(ip)))
        snprintf(ip, sizeof(ip), "?");
    json_object_set_new(c, "address", json_string(ip));
    if (s->geo.have_geo) {
        cc_text(s->geo.geo.country, cc);
        json_object_set_new(c, "country", json_string(cc));
        bool v6db = s->client_family == AF_INET6 || !v->geoip.v4;
        json_object_set_new(c, "geo_database",
                            json_string(!(v6db ? v->geoip.v6 : v->geoip.v4) ? "none"
                                        : v6db                              ? "maxmind (ipv6 db)"
                                                                            : "maxmind (ipv4 db)"));
        json_object_set_new(c, "geo_prefix", json_integer(s->geo.geo.prefix));
        if (s->geo.geo.has_location) {
            json_object_set_new(c, "latitude", json_real(s->geo.geo.lat));
            json_object_set_new(c, "longitude", json_real(s->geo.geo.lon));
        }
    }
    if (s->geo.have_asn) {
        json_object_set_new(c, "asn", json_integer(s->geo.asn));
        json_object_set_new(c, "asn_database", json_string(v->asn ? "asn table" : "none"));
        json_object_set_new(c, "asn_prefix", json_integer(s->geo.asn_prefix));
    }
    return c;
}

/* The weight the order read for record i: scaled by load when the RRset sheds. */
static double cand_w(const answer_trace_select_t *s, unsigned i)
{
    return s->shed ? s->wscaled[i] : s->g->rr[i].weight;
}

/* Load shedding's word on record i: its load as read and what it decided (steer_shed.h). */
static void shed_json(json_t *j, const answer_trace_select_t *s, unsigned i)
{
    static const char *const hows[] = {
        "",
        "load unknown: treated as unloaded",
        "below low: kept",
        "between low and high: kept, weight scaled down",
        "between low and high: left out by the draw",
        "between low and high: kept by the draw",
        "at or above high: left out",
        "at or above high: kept (every record is: shed fail open)",
    };
    if (s->load[i] == HEALTH_LOAD_UNKNOWN)
        json_object_set_new(j, "load", json_string("unknown"));
    else
        json_object_set_new(j, "load", json_real(s->load[i] / 1000.0));
    json_object_set_new(j, "shed", json_string(hows[s->shed_how[i] % 8]));
    if (s->shed_how[i] == ANSWER_SHED_SCALED)
        json_object_set_new(j, "weight_scaled", json_integer(s->wscaled[i]));
}

/* Each record of the steered RRset: its steering, its health, and its fate. */
static json_t *record_json(const answer_trace_select_t *s, unsigned i,
                           const ctl_explain_health_t *hl, double wsum, unsigned kept)
{
    static const char *const fates[] = {"given",
                                        "dropped by health",
                                        "dropped by filter 1",
                                        "dropped by filter 2",
                                        "not picked (order, count)",
                                        "dropped by load (shed)",
                                        "not in the failover tier answered"};
    static const char *const ranks[] = {"down", "between", "nearly up", "up"};
    const zone_geo_rr_t *g = &s->g->rr[i];
    json_t *j = json_object();
    char ip[INET6_ADDRSTRLEN], cc[3];
    rdata_text(s->rr, g->off, ip, sizeof(ip));
    json_object_set_new(j, "rdata", json_string(ip));
    json_object_set_new(j, "fate", json_string(fates[s->dropped[i] % TERN_ARRAY_SIZE(fates)]));
    json_object_set_new(j, "health", json_string(g->health ? ranks[s->rank[i] % 4] : "no check"));
    const ctl_explain_ep_t *h = hfind(hl, g->health);
    if (h) {
        char t[40];
        time_t tt = (time_t)(h->last_check / 1000);
        struct tm tm;
        if (!h->last_check || !gmtime_r(&tt, &tm) ||
            !strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%SZ", &tm))
            snprintf(t, sizeof(t), "never");
        json_object_set_new(j, "check", json_string(h->desc));
        json_object_set_new(j, "check_state", json_string(h->state));
        json_object_set_new(j, "last_check", json_string(t));
        json_object_set_new(j, "last_result",
                            json_string(!h->checked  ? "none"
                                        : h->last_ok ? "ok"
                                                     : "failed"));
        if (h->checked)
            json_object_set_new(j, "checked_by", json_string(h->remote ? "redis" : "self"));
    }
    if (g->ncountries) {
        json_t *a = json_array();
        for (unsigned k = 0; k < g->ncountries; k++) {
            cc_text(g->countries[k], cc);
            json_array_append_new(a, json_string(cc));
        }
        json_object_set_new(j, "countries", a);
    }
    if (g->nasns) {
        json_t *a = json_array();
        for (unsigned k = 0; k < g->nasns; k++)
            json_array_append_new(a, json_integer(g->asns[k]));
        json_object_set_new(j, "asns", a);
    }
    if (g->group_name)
        json_object_set_new(j, "group", json_string(g->group_name));
    if (s->g->policy.filter == ZONE_GEO_FILTER_LOCATION && g->has_loc && s->geo.have_geo &&
        s->geo.geo.has_location) {
        double d =
            g->loc[0] * s->geo.loc[0] + g->loc[1] * s->geo.loc[1] + g->loc[2] * s->geo.loc[2];
        d = d > 1 ? 1 : d < -1 ? -1 : d;
        json_object_set_new(j, "distance_km", json_real(round(acos(d) * EARTH_KM * 10) / 10));
    }
    if (s->g->policy.order == ZONE_GEO_ORDER_WEIGHTED ||
        s->g->policy.order == ZONE_GEO_ORDER_STICKY)
        json_object_set_new(j, "weight", json_integer(g->weight));
    if (s->shed && s->shed_how[i] != ANSWER_SHED_NONE)
        shed_json(j, s, i);
    if (s->g->tiers)
        json_object_set_new(j, "priority", json_integer(g->priority));
    /* the chance that order picks this record first, among what the filters kept */
    bool survived = s->dropped[i] == ANSWER_SEL_KEPT || s->dropped[i] == ANSWER_SEL_ORDER;
    if (survived && s->g->policy.order != ZONE_GEO_ORDER_NONE &&
        s->g->policy.order != ZONE_GEO_ORDER_STICKY && kept > 1) {
        double p = s->g->policy.order == ZONE_GEO_ORDER_WEIGHTED && wsum > 0 ? cand_w(s, i) / wsum
                                                                             : 1.0 / kept;
        json_object_set_new(j, "probability_first", json_real(round(p * 10000) / 10000));
    }
    return j;
}

/* geo_filter latency's decision: the client's map entry (each group's latency, fastest first),
 * the group answered, or why it fell back to location. */
static json_t *latency_json(const answer_trace_select_t *s)
{
    static const char *const how[] = {
        [ANSWER_LATENCY_MATCHED] = "the fastest group with a record answered",
        [ANSWER_LATENCY_UNMAPPED] = "the client's network is not in the map: fell back to location",
        [ANSWER_LATENCY_NOGROUP] = "no record's group is in the client's entry: fell back to "
                                   "location"};
    json_t *j = json_object();
    if (!s->latency.map) {
        json_object_set_new(j, "result",
                            json_string("no latency_map configured: fell back to location"));
        return j;
    }
    json_object_set_new(j, "result", json_string(how[s->latency.how % 3]));
    json_object_set_new(j, "map_prefix", json_integer(s->latency.prefix));
    json_t *e = json_array();
    for (uint32_t i = 0; i < s->latency.nentry && i < ANSWER_TRACE_LATENCY; i++) {
        json_t *g = json_object();
        const char *name = s->latency.name[i];
        json_object_set_new(g, "group", json_string(name ? name : "?"));
        json_object_set_new(g, "ms", json_integer(s->latency.ms[i]));
        json_array_append_new(e, g);
    }
    json_object_set_new(j, "entry", e);
    if (s->latency.nentry > ANSWER_TRACE_LATENCY)
        json_object_set_new(j, "entry_not_shown",
                            json_integer(s->latency.nentry - ANSWER_TRACE_LATENCY));
    if (s->latency.how == ANSWER_LATENCY_MATCHED) {
        json_object_set_new(j, "group", json_string(s->latency.chosen ? s->latency.chosen : "?"));
        json_object_set_new(j, "ms", json_integer(s->latency.chosen_ms));
    }
    return j;
}

/* The failover tiers' decision (steer_tier.c): the tier answered, why, and the better tiers
 * passed over with what they had and needed. */
static json_t *tiers_json(const answer_trace_select_t *s)
{
    static const char *const hows[] = {
        "the best tier with at least min_healthy candidates",
        "no tier had min_healthy candidates: the one with the most (ties: the better priority)",
        "every record was down (health failed open): the best priority present"};
    json_t *j = json_object();
    json_object_set_new(j, "answered", json_integer(s->tier));
    json_object_set_new(j, "why", json_string(hows[s->tier_how % 3]));
    json_object_set_new(j, "passed_over", json_integer(s->tier_skipped));
    json_t *a = json_array();
    for (unsigned k = 0; k < s->ntiers; k++) {
        if (s->tier_how == ANSWER_TIER_FULLEST && s->tiers[k].priority >= s->tier)
            continue; /* only the better tiers were passed over */
        json_t *t = json_object();
        json_object_set_new(t, "priority", json_integer(s->tiers[k].priority));
        json_object_set_new(t, "candidates", json_integer(s->tiers[k].have));
        json_object_set_new(t, "min_healthy", json_integer(s->tiers[k].need));
        json_array_append_new(a, t);
    }
    json_object_set_new(j, "tiers_passed_over", a);
    return j;
}

/* The sticky order's input (steer_sticky.c): the client network hashed. */
static json_t *sticky_json(const answer_trace_select_t *s)
{
    char ip[INET6_ADDRSTRLEN], net[INET6_ADDRSTRLEN + 8];
    json_t *j = json_object();
    if (!s->sticky_family || !inet_ntop(s->sticky_family == AF_INET6 ? AF_INET6 : AF_INET,
                                        s->sticky_net, ip, sizeof(ip)))
        snprintf(ip, sizeof(ip), "unknown");
    snprintf(net, sizeof(net), "%s/%u", ip, s->sticky_bits);
    json_object_set_new(j, "network", json_string(net));
    json_object_set_new(j, "prefix", json_integer(s->sticky_bits));
    json_object_set_new(j, "how",
                        json_string("weighted rendezvous hash of the network: the same records "
                                    "for every client in it"));
    return j;
}

json_t *ctl_explain_fmt_select(const answer_trace_select_t *s, const answer_view_t *v,
                               const ctl_explain_health_t *hl)
{
    static const char *const ends[] = {"matched", "fell back to records listing none",
                                       "none matched: all kept"};
    json_t *j = json_object();
    char cc[3];
    json_object_set_new(j, "owner", ctl_explain_fmt_name(s->owner));
    json_object_set_new(j, "type", ctl_explain_fmt_type(s->rr ? s->rr->type : 0));
    json_object_set_new(j, "zone", zone_name_json(s->zone));
    json_object_set_new(j, "filter", json_string(filter_names[s->g->policy.filter % 6]));
    json_object_set_new(j, "order", json_string(order_names[s->g->policy.order % 4]));
    json_object_set_new(j, "count", json_string(count_names[s->g->policy.count % 2]));
    json_object_set_new(j, "records", json_integer(s->count));
    if (s->g->health) {
        json_object_set_new(j, "after_health", json_integer(s->left[0]));
        json_object_set_new(j, "fail_open", json_boolean(s->fail_open));
    }
    for (unsigned k = 0; k < s->nfilters; k++) {
        bool asn = s->g->policy.filter == ZONE_GEO_FILTER_ASN ||
                   (s->g->policy.filter == ZONE_GEO_FILTER_ASN_COUNTRY && k == 0);
        json_t *f = json_object();
        json_object_set_new(f, "by", json_string(asn ? "asn" : "country"));
        cc_text(s->filter_key[k], cc);
        json_object_set_new(f, "client", asn ? json_integer(s->filter_key[k]) : json_string(cc));
        json_object_set_new(f, "result", json_string(ends[s->filter_end[k] % 3]));
        json_object_set_new(f, "left", json_integer(s->left[1 + k]));
        json_object_set_new(j, k ? "filter_2" : "filter_1", f);
    }
    if (s->g->policy.filter == ZONE_GEO_FILTER_LOCATION)
        json_object_set_new(j, "nearest", json_integer(s->left[1]));
    if (s->latency.ran)
        json_object_set_new(j, "latency", latency_json(s));
    if (s->shed) {
        json_t *sh = json_object();
        json_object_set_new(sh, "low", json_real(s->g->policy.shed_low / 1000.0));
        json_object_set_new(sh, "high", json_real(s->g->policy.shed_high / 1000.0));
        json_object_set_new(sh, "fail_open", json_boolean(s->shed_fail_open));
        json_object_set_new(j, "shed", sh);
    }
    if (s->tiered)
        json_object_set_new(j, "tiers", tiers_json(s));
    if (s->sticky)
        json_object_set_new(j, "sticky", sticky_json(s));
    if (s->client_known)
        json_object_set_new(j, "client", client_json(s, v));
    double wsum = 0;
    unsigned kept = 0;
    for (unsigned i = 0; i < s->count && i < ANSWER_TRACE_RRS; i++)
        if (s->dropped[i] == ANSWER_SEL_KEPT || s->dropped[i] == ANSWER_SEL_ORDER) {
            wsum += cand_w(s, i);
            kept++;
        }
    json_t *rs = json_array();
    for (unsigned i = 0; i < s->count && i < ANSWER_TRACE_RRS; i++)
        json_array_append_new(rs, record_json(s, i, hl, wsum, kept));
    json_object_set_new(j, "record", rs);
    if (s->count > ANSWER_TRACE_RRS)
        json_object_set_new(j, "records_not_shown", json_integer(s->count - ANSWER_TRACE_RRS));
    json_t *given = json_array();
    for (unsigned k = 0; k < s->nout; k++) {
        char ip[INET6_ADDRSTRLEN];
        rdata_text(s->rr, s->g->rr[s->out[k]].off, ip, sizeof(ip));
        json_array_append_new(given, json_string(ip));
    }
    json_object_set_new(j, "given", given);
    return j;
}

json_t *ctl_explain_fmt_sigs(const answer_trace_t *t)
{
    static const char *const how[] = {
        "made ahead by the loader", "per query, from the explain context's own cache",
        "per query, made now by the explain context", "per query, but no signer: unsigned"};
    json_t *a = json_array();
    for (unsigned i = 0; i < t->nsigs; i++) {
        const answer_trace_sig_t *s = &t->sigs[i];
        json_t *j = json_object();
        json_object_set_new(j, "owner", ctl_explain_fmt_name(s->owner));
        json_object_set_new(j, "type", ctl_explain_fmt_type(s->type));
        json_object_set_new(j, "signature", json_string(how[s->how % 4]));
        json_object_set_new(j, "rrsigs", json_integer(s->sigs));
        json_array_append_new(a, j);
    }
    return a;
}

/* The zone that answered the name asked: its version and where its data came from. */
json_t *ctl_explain_fmt_zone(const zone_t *z)
{
    if (!z)
        return json_null();
    json_t *j = json_object();
    json_object_set_new(j, "name", ctl_explain_fmt_name(z->apex));
    json_object_set_new(j, "serial", json_integer(z->serial));
    if (z->src_serial != z->serial)
        json_object_set_new(j, "source_serial", json_integer(z->src_serial));
    json_object_set_new(j, "source", json_string(z->source ? z->source : "?"));
    json_object_set_new(j, "patches", json_integer(z->patches));
    json_object_set_new(j, "records", json_integer((json_int_t)z->rr_count));
    json_object_set_new(j, "signed", json_boolean(z->dnssec != NULL));
    if (z->unavailable)
        json_object_set_new(j, "unavailable", json_true());
    return j;
}

/* --- the response, parsed */

static json_t *section_json(ldns_rr_list *l, json_t *tags)
{
    json_t *a = json_array();
    for (size_t i = 0; i < ldns_rr_list_rr_count(l); i++) {
        ldns_rr *rr = ldns_rr_list_rr(l, i);
        char *s = ldns_rr2str_fmt(ldns_output_format_nocomments, rr);
        if (s) {
            size_t n = strlen(s);
            while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
                s[--n] = '\0';
            for (char *p = s; *p; p++)
                if (*p == '\t')
                    *p = ' ';
            json_array_append_new(a, json_string(s));
        }
        free(s);
        if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_RRSIG && ldns_rr_rrsig_keytag(rr)) {
            json_int_t tag = ldns_rdf2native_int16(ldns_rr_rrsig_keytag(rr));
            bool seen = false;
            for (size_t k = 0; k < json_array_size(tags) && !seen; k++)
                seen = json_integer_value(json_array_get(tags, k)) == tag;
            if (!seen)
                json_array_append_new(tags, json_integer(tag));
        }
    }
    return a;
}

json_t *ctl_explain_fmt_response(const uint8_t *out, size_t len, const answer_info_t *info)
{
    static const char *const outcomes[] = {"sent", "dropped (short)", "dropped (qr)",
                                           "dropped by policy", "handed to the transfer thread"};
    json_t *j = json_object();
    json_object_set_new(j, "outcome", json_string(outcomes[info->outcome % 5]));
    ldns_pkt *pkt = NULL;
    if (!len || ldns_wire2pkt(&pkt, out, len) != LDNS_STATUS_OK)
        return j;
    char *rc = ldns_pkt_rcode2str(ldns_pkt_get_rcode(pkt));
    json_object_set_new(j, "rcode", json_string(rc ? rc : "?"));
    free(rc);
    json_object_set_new(j, "aa", json_boolean(ldns_pkt_aa(pkt)));
    json_object_set_new(j, "tc", json_boolean(ldns_pkt_tc(pkt)));
    json_t *tags = json_array();
    json_object_set_new(j, "answer", section_json(ldns_pkt_answer(pkt), tags));
    json_object_set_new(j, "authority", section_json(ldns_pkt_authority(pkt), tags));
    json_object_set_new(j, "additional", section_json(ldns_pkt_additional(pkt), tags));
    if (ldns_rr_list_rr_count(ldns_pkt_answer(pkt)))
        json_object_set_new(j, "ttl",
                            json_integer(ldns_rr_ttl(ldns_rr_list_rr(ldns_pkt_answer(pkt), 0))));
    json_object_set_new(j, "ecs_scope", json_integer(info->scope));
    json_object_set_new(j, "rrsig_key_tags", tags);
    json_object_set_new(j, "bytes", json_integer((json_int_t)len));
    ldns_pkt_free(pkt);
    return j;
}

/* --- text: the JSON object as "key: value" lines */

/* Scalars print with this many significant digits (coordinates, chances): enough for a metre. */
#define TEXT_REAL JSON_REAL_PRECISION(9)

/* Whether v goes on lines of its own below its object's line: an object, or a list of objects
 * or of strings with spaces (records); other lists are written inline as "k=a,b". */
static bool nested(json_t *v)
{
    if (json_is_object(v))
        return true;
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *e = json_array_get(v, i);
        if (json_is_object(e) || (json_is_string(e) && strchr(json_string_value(e), ' ')))
            return true;
    }
    return false;
}

/* An object's scalar members on one "key: k=v k=v" line; its arrays and objects below it. */
static void text_object(sb_t *b, const char *key, json_t *o, const char *indent)
{
    char line[4096];
    size_t at = 0;
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (nested(v))
            continue;
        /* a scalar, or a list of them as "a,b" */
        for (size_t i = 0; i < (json_is_array(v) ? json_array_size(v) : 1); i++) {
            json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
            char *s = json_is_string(e) ? strdup(json_string_value(e))
                                        : json_dumps(e, JSON_ENCODE_ANY | TEXT_REAL);
            if (s && at < sizeof(line))
                at += (size_t)snprintf(line + at, sizeof(line) - at, "%s%s%s%s",
                                       i    ? ","
                                       : at ? " "
                                            : "",
                                       i ? "" : k, i ? "" : "=", s);
            free(s);
        }
    }
    ctl_cmd_line(b, "%s%s: %s", indent, key, at < sizeof(line) ? line : "...");
    char sub[32];
    snprintf(sub, sizeof(sub), "%s  ", indent);
    json_object_foreach(o, k, v)
    {
        if (nested(v))
            ctl_explain_fmt_text(b, k, v, sub);
    }
}

void ctl_explain_fmt_text(sb_t *b, const char *key, json_t *v, const char *indent)
{
    if (json_is_object(v)) {
        text_object(b, key, v, indent);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *e;
        if (json_array_size(v) == 0)
            ctl_cmd_line(b, "%s%s: (none)", indent, key);
        json_array_foreach(v, i, e) ctl_explain_fmt_text(b, key, e, indent);
    } else if (json_is_string(v)) {
        ctl_cmd_line(b, "%s%s: %s", indent, key, json_string_value(v));
    } else {
        char *s = json_dumps(v, JSON_ENCODE_ANY | TEXT_REAL);
        ctl_cmd_line(b, "%s%s: %s", indent, key, s ? s : "?");
        free(s);
    }
}
