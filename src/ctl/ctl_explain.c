/*
 * ctl_explain.c — `explain NAME [TYPE] --client ADDR [--ecs PREFIX] [--do] [--tcp] [--json]`:
 * what the running server answers that client, and why, by the workers' own code path.
 *
 * The serving thread builds the query a resolver at ADDR would send (EDNS with the ECS option and
 * the DO bit asked for), registers with RCU for the length of the command, takes the published
 * view and runs answer_query() over it with ADDR as the packet's source, in an answer context of
 * its own that carries a trace (tern/answer/answer_trace.h): every stage records its decisions as
 * it makes them. Then it reads the trace and parses the response it made, while the same view is
 * held (the trace points into it), and formats both: as "key: value" lines, or one JSON object.
 *
 * Decisions, and why:
 *   - Not a re-implementation: the answer explained is the pipeline's, byte for byte what a worker
 *     would send for that query (same view, same client); only the random pick of order rr or
 *     weighted may differ, which is why the probabilities are shown.
 *   - Nothing is charged: the policy stage judges the client's rate and RRL with limit_*_dry() when
 *     a trace is present (the verdict is what the client would get now), so an explain neither uses
 *     up a client's rate nor counts toward RRL, and a response RRL would drop or slip is still
 *     shown, with the verdict beside it.
 *   - The context (1.4 MiB: geo cache, scratch) is made once, on the first explain, and kept: its
 *     DNSSEC signature cache is this thread's own, not a worker's, so "made now" means the control
 *     thread signed it for this explain (a worker may have it cached already, or sign it likewise),
 *     and "from the cache" means an earlier explain made it.
 *   - Health state is copied (health_each(), under the registry's mutex) before going online in
 *     RCU: nothing that can wait for a lock held across a grace period runs while online.
 *
 * Threading: the serving thread only (ctl_cmd_dispatch()).
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <jansson.h>
#include <ldns/ldns.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl_int.h"
#include "tern/answer/answer.h"
#include "tern/answer/answer_trace.h"
#include "tern/answer/select.h"
#include "tern/common/clock.h"
#include "tern/common/rcu.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/health/health.h"
#include "tern/wire/dname.h"

/* The EDNS payload size of the query: what dig and the big resolvers send (flag day 2020). */
#define EXPLAIN_UDP_SIZE 1232
/* Signature cache of the explain context: an explain signs a handful of RRsets; 1024 entries
 * (about 600 KiB, touched only when used) keep those of many explains apart. */
#define EXPLAIN_SIG_CACHE 1024
/* Mean Earth radius (km): distances shown for the location filter. */
#define EARTH_KM 6371.0

struct ctl_explain {
    answer_ctx_t *ctx;
    answer_trace_t *trace;
    uint8_t out[65535];
};

typedef struct explain_req {
    uint8_t qname[DNAME_MAXLEN];
    size_t qname_len;
    uint16_t qtype;
    struct sockaddr_storage client;
    bool ecs;
    uint8_t ecs_family; /* 1 IPv4, 2 IPv6 (RFC 7871 §6) */
    uint8_t ecs_prefix;
    uint8_t ecs_addr[16];
    bool dnssec_ok, tcp, json;
} explain_req_t;

/* --- the request */

static bool parse_addr(const char *s, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *b = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, s, &a->sin_addr) == 1) {
        a->sin_family = AF_INET;
        a->sin_port = htons(53000);
        return true;
    }
    if (inet_pton(AF_INET6, s, &b->sin6_addr) == 1) {
        b->sin6_family = AF_INET6;
        b->sin6_port = htons(53000);
        return true;
    }
    return false;
}

/* "ADDR/LEN" (LEN optional: the whole address) into the request's ECS option. */
static bool parse_ecs(const char *s, explain_req_t *r)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n >= sizeof(host))
        return false;
    memcpy(host, s, n);
    host[n] = '\0';
    unsigned max;
    memset(r->ecs_addr, 0, sizeof(r->ecs_addr));
    if (inet_pton(AF_INET, host, r->ecs_addr) == 1) {
        r->ecs_family = 1;
        max = 32;
    } else if (inet_pton(AF_INET6, host, r->ecs_addr) == 1) {
        r->ecs_family = 2;
        max = 128;
    } else {
        return false;
    }
    unsigned long len = max;
    if (slash) {
        char *end;
        len = strtoul(slash + 1, &end, 10);
        if (!slash[1] || *end || len > max)
            return false;
    }
    r->ecs_prefix = (uint8_t)len;
    /* RFC 7871 §6: the address bits past the source prefix are zero */
    for (unsigned i = 0; i < 16; i++) {
        unsigned keep = len > i * 8 ? (len - i * 8 >= 8 ? 8 : len - i * 8) : 0;
        r->ecs_addr[i] &= (uint8_t)(0xFF00u >> keep);
    }
    r->ecs = true;
    return true;
}

#define EXPLAIN_USAGE "explain NAME [TYPE] --client ADDR [--ecs PREFIX] [--do] [--tcp] [--json]"

static bool parse_req(char **argv, explain_req_t *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof(*r));
    r->qtype = LDNS_RR_TYPE_A;
    const char *why = "bad name";
    int n = dname_from_str(argv[1], strlen(argv[1]), false, r->qname, &why);
    if (n < 0) {
        snprintf(err, errlen, "explain: %s: %s", argv[1], why);
        return false;
    }
    r->qname_len = (size_t)n;
    unsigned i = 2;
    if (argv[i] && strncmp(argv[i], "--", 2) != 0) {
        ldns_rr_type t = ldns_get_rr_type_by_name(argv[i]);
        if (t == 0) {
            snprintf(err, errlen, "explain: unknown type %s", argv[i]);
            return false;
        }
        r->qtype = (uint16_t)t;
        i++;
    }
    bool client = false;
    for (; argv[i]; i++) {
        if (strcmp(argv[i], "--client") == 0 && argv[i + 1]) {
            if (!parse_addr(argv[++i], &r->client)) {
                snprintf(err, errlen, "explain: --client %s: not an IP address", argv[i]);
                return false;
            }
            client = true;
        } else if (strcmp(argv[i], "--ecs") == 0 && argv[i + 1]) {
            if (!parse_ecs(argv[++i], r)) {
                snprintf(err, errlen, "explain: --ecs %s: want ADDR/LEN", argv[i]);
                return false;
            }
        } else if (strcmp(argv[i], "--do") == 0) {
            r->dnssec_ok = true;
        } else if (strcmp(argv[i], "--tcp") == 0) {
            r->tcp = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            r->json = true;
        } else {
            break;
        }
    }
    if (!client || argv[i]) {
        snprintf(err, errlen, "usage: %s", EXPLAIN_USAGE);
        return false;
    }
    return true;
}

static size_t put16(uint8_t *p, size_t at, unsigned v)
{
    p[at] = (uint8_t)(v >> 8);
    p[at + 1] = (uint8_t)v;
    return at + 2;
}

/* The query a resolver would send: RD clear, EDNS (size 1232, DO as asked, ECS if given). */
static size_t build_query(const explain_req_t *r, uint8_t *p)
{
    memset(p, 0, 12);
    put16(p, 0, 0x7e57);
    put16(p, 4, 1);  /* QDCOUNT */
    put16(p, 10, 1); /* ARCOUNT: the OPT */
    size_t at = 12;
    memcpy(p + at, r->qname, r->qname_len);
    at += r->qname_len;
    at = put16(p, at, r->qtype);
    at = put16(p, at, LDNS_RR_CLASS_IN);
    p[at++] = 0; /* OPT owner: the root */
    at = put16(p, at, LDNS_RR_TYPE_OPT);
    at = put16(p, at, EXPLAIN_UDP_SIZE);
    at = put16(p, at, 0);                         /* extended rcode, version */
    at = put16(p, at, r->dnssec_ok ? 0x8000 : 0); /* DO */
    size_t alen = r->ecs ? (r->ecs_prefix + 7u) / 8u : 0;
    at = put16(p, at, r->ecs ? (unsigned)(8 + alen) : 0);
    if (r->ecs) {
        at = put16(p, at, LDNS_EDNS_CLIENT_SUBNET);
        at = put16(p, at, (unsigned)(4 + alen));
        at = put16(p, at, r->ecs_family);
        p[at++] = r->ecs_prefix;
        p[at++] = 0; /* scope: 0 in queries */
        memcpy(p + at, r->ecs_addr, alen);
        at += alen;
    }
    return at;
}

/* --- health, copied before going online in RCU */

typedef struct hinfo {
    const health_ep_t *ep;
    char desc[160];
    char state[16];
    bool checked, last_ok, remote;
    int64_t last_check; /* wall ms */
} hinfo_t;

typedef struct hlist {
    hinfo_t *v;
    size_t n, cap;
} hlist_t;

static void hcopy(void *arg, const health_ep_info_t *i)
{
    hlist_t *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        hinfo_t *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return; /* a record then shows its rank only */
        l->v = v;
        l->cap = cap;
    }
    hinfo_t *h = &l->v[l->n++];
    h->ep = i->ep;
    health_spec_describe(i->spec, h->desc, sizeof(h->desc));
    snprintf(h->state, sizeof(h->state), "%s", i->state);
    h->checked = i->checked;
    h->last_ok = i->last_ok;
    h->remote = i->last_remote;
    h->last_check = i->last_check;
}

static const hinfo_t *hfind(const hlist_t *l, const health_ep_t *ep)
{
    for (size_t i = 0; ep && i < l->n; i++)
        if (l->v[i].ep == ep)
            return &l->v[i];
    return NULL;
}

/* --- formatting helpers */

static json_t *name_json(const uint8_t *name)
{
    char buf[1024];
    if (dname_to_str(name, buf, sizeof(buf)) < 0)
        snprintf(buf, sizeof(buf), "?");
    return json_string(buf);
}

static json_t *type_json(uint16_t type)
{
    char *s = ldns_rr_type2str((ldns_rr_type)type);
    json_t *j = json_string(s ? s : "?");
    free(s);
    return j;
}

static json_t *zone_name_json(const zone_t *z)
{
    return z ? name_json(z->apex) : json_null();
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

static json_t *policy_json(const answer_trace_t *t, const answer_ctx_t *ctx, const explain_req_t *r)
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
    json_object_set_new(p, "rate_charged", json_false());
    if (t->zone_judged) {
        json_object_set_new(p, "zone_acl", json_string(verdict_name(t->zone_vd)));
        if (t->zone_vd != LIMIT_PASS && ctx->info.zone)
            json_object_set_new(p, "zone_acl_of", zone_name_json(ctx->info.zone));
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
                                        : r->tcp   ? "not applied (tcp)"
                                                   : "not applied (off, whitelisted "
                                                     "or a valid cookie)"));
    }
    return p;
}

static json_t *step_json(const answer_trace_step_t *s)
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
    json_object_set_new(j, "name", name_json(s->name));
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
        json_object_set_new(j, "target", name_json(s->target));
        break;
    case ANSWER_STEP_DNAME:
        json_object_set_new(j, "dname_owner", name_json(s->target2));
        json_object_set_new(j, "target", name_json(s->target));
        break;
    case ANSWER_STEP_ANAME:
        json_object_set_new(j, "target", name_json(s->target));
        json_object_set_new(j, "walk", json_string(walks[s->detail % 4]));
        if (s->detail == ANSWER_ANAME_OUT)
            json_object_set_new(j, "leaves_at", name_json(s->target2));
        break;
    case ANSWER_STEP_ANSWER:
    case ANSWER_STEP_NODATA:
        json_object_set_new(j, "type", type_json(s->type));
        if (s->flag)
            json_object_set_new(j, "wildcard", name_json(s->target));
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

static const char *const filter_names[] = {"none", "country", "asn", "asn+country", "location"};
static const char *const order_names[] = {"none", "weighted", "rr"};
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

/* Each record of the steered RRset: its steering, its health, and its fate. */
static json_t *record_json(const answer_trace_select_t *s, unsigned i, const hlist_t *hl,
                           double wsum, unsigned kept)
{
    static const char *const fates[] = {"given", "dropped by health", "dropped by filter 1",
                                        "dropped by filter 2", "not picked (order, count)"};
    static const char *const ranks[] = {"down", "between", "nearly up", "up"};
    const zone_geo_rr_t *g = &s->g->rr[i];
    json_t *j = json_object();
    char ip[INET6_ADDRSTRLEN], cc[3];
    rdata_text(s->rr, g->off, ip, sizeof(ip));
    json_object_set_new(j, "rdata", json_string(ip));
    json_object_set_new(j, "fate", json_string(fates[s->dropped[i] % 5]));
    json_object_set_new(j, "health", json_string(g->health ? ranks[s->rank[i] % 4] : "no check"));
    const hinfo_t *h = hfind(hl, g->health);
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
    if (s->g->policy.filter == ZONE_GEO_FILTER_LOCATION && g->has_loc && s->geo.have_geo &&
        s->geo.geo.has_location) {
        double d =
            g->loc[0] * s->geo.loc[0] + g->loc[1] * s->geo.loc[1] + g->loc[2] * s->geo.loc[2];
        d = d > 1 ? 1 : d < -1 ? -1 : d;
        json_object_set_new(j, "distance_km", json_real(round(acos(d) * EARTH_KM * 10) / 10));
    }
    if (s->g->policy.order == ZONE_GEO_ORDER_WEIGHTED)
        json_object_set_new(j, "weight", json_integer(g->weight));
    /* the chance that order picks this record first, among what the filters kept */
    bool survived = s->dropped[i] == ANSWER_SEL_KEPT || s->dropped[i] == ANSWER_SEL_ORDER;
    if (survived && s->g->policy.order != ZONE_GEO_ORDER_NONE && kept > 1) {
        double p = s->g->policy.order == ZONE_GEO_ORDER_WEIGHTED && wsum > 0 ? g->weight / wsum
                                                                             : 1.0 / kept;
        json_object_set_new(j, "probability_first", json_real(round(p * 10000) / 10000));
    }
    return j;
}

static json_t *select_json(const answer_trace_select_t *s, const answer_view_t *v,
                           const hlist_t *hl)
{
    static const char *const ends[] = {"matched", "fell back to records listing none",
                                       "none matched: all kept"};
    json_t *j = json_object();
    char cc[3];
    json_object_set_new(j, "owner", name_json(s->owner));
    json_object_set_new(j, "type", type_json(s->rr ? s->rr->type : 0));
    json_object_set_new(j, "zone", zone_name_json(s->zone));
    json_object_set_new(j, "filter", json_string(filter_names[s->g->policy.filter % 5]));
    json_object_set_new(j, "order", json_string(order_names[s->g->policy.order % 3]));
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
    if (s->client_known)
        json_object_set_new(j, "client", client_json(s, v));
    double wsum = 0;
    unsigned kept = 0;
    for (unsigned i = 0; i < s->count && i < ANSWER_TRACE_RRS; i++)
        if (s->dropped[i] == ANSWER_SEL_KEPT || s->dropped[i] == ANSWER_SEL_ORDER) {
            wsum += s->g->rr[i].weight;
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

static json_t *sigs_json(const answer_trace_t *t)
{
    static const char *const how[] = {
        "made ahead by the loader", "per query, from the explain context's own cache",
        "per query, made now by the explain context", "per query, but no signer: unsigned"};
    json_t *a = json_array();
    for (unsigned i = 0; i < t->nsigs; i++) {
        const answer_trace_sig_t *s = &t->sigs[i];
        json_t *j = json_object();
        json_object_set_new(j, "owner", name_json(s->owner));
        json_object_set_new(j, "type", type_json(s->type));
        json_object_set_new(j, "signature", json_string(how[s->how % 4]));
        json_object_set_new(j, "rrsigs", json_integer(s->sigs));
        json_array_append_new(a, j);
    }
    return a;
}

/* The zone that answered the name asked: its version and where its data came from. */
static json_t *zone_json(const zone_t *z)
{
    if (!z)
        return json_null();
    json_t *j = json_object();
    json_object_set_new(j, "name", name_json(z->apex));
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

static json_t *response_json(const uint8_t *out, size_t len, const answer_info_t *info)
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

static void text_value(sb_t *b, const char *key, json_t *v, const char *indent);

/* An object's scalar members on one "key: k=v k=v" line; its arrays and objects below it. */
static void text_object(sb_t *b, const char *key, json_t *o, const char *indent)
{
    char line[4096];
    size_t at = 0;
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (json_is_object(v) || (json_is_array(v) && json_is_object(json_array_get(v, 0))))
            continue;
        /* a scalar, or a list of them as "a,b" */
        for (size_t i = 0; i < (json_is_array(v) ? json_array_size(v) : 1); i++) {
            json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
            char *s =
                json_is_string(e) ? strdup(json_string_value(e)) : json_dumps(e, JSON_ENCODE_ANY);
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
        if (json_is_object(v) || (json_is_array(v) && json_is_object(json_array_get(v, 0))))
            text_value(b, k, v, sub);
    }
}

static void text_value(sb_t *b, const char *key, json_t *v, const char *indent)
{
    if (json_is_object(v)) {
        text_object(b, key, v, indent);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *e;
        if (json_array_size(v) == 0)
            ctl_cmd_line(b, "%s%s: (none)", indent, key);
        json_array_foreach(v, i, e) text_value(b, key, e, indent);
    } else if (json_is_string(v)) {
        ctl_cmd_line(b, "%s%s: %s", indent, key, json_string_value(v));
    } else {
        char *s = json_dumps(v, JSON_ENCODE_ANY);
        ctl_cmd_line(b, "%s%s: %s", indent, key, s ? s : "?");
        free(s);
    }
}

/* --- the command */

static struct ctl_explain *explain_state(ctl_t *c)
{
    if (c->explain)
        return c->explain;
    struct ctl_explain *e = calloc(1, sizeof(*e));
    if (!e || !(e->ctx = calloc(1, sizeof(*e->ctx))) ||
        !(e->trace = calloc(1, sizeof(*e->trace)))) {
        if (e)
            free(e->ctx);
        free(e);
        return NULL;
    }
    answer_ctx_seed(e->ctx, (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid());
    c->explain = e;
    return e;
}

void ctl_explain_free(ctl_t *c)
{
    struct ctl_explain *e = c->explain;
    if (!e)
        return;
    dnssec_worker_free(e->ctx->dnssec);
    free(e->ctx);
    free(e->trace);
    free(e);
    c->explain = NULL;
}

/* Run the query through the published view and describe it into root (online in RCU). */
static void run(ctl_t *c, struct ctl_explain *e, const explain_req_t *r, const hlist_t *hl,
                json_t *root)
{
    uint8_t pkt[DNAME_MAXLEN + 64];
    size_t qlen = build_query(r, pkt);
    answer_ctx_t *ctx = e->ctx;
    tern_rcu_register(); /* online: the view cannot be freed until unregistered */
    const answer_view_t *v = tern_rcu_deref(*loader_published(c->loader));
    if (!v) { /* not before the first view (ctl starts after it): nothing to explain */
        tern_rcu_unregister();
        json_object_set_new(root, "error", json_string("no view published yet"));
        return;
    }
    if (v->dnssec && !ctx->dnssec)
        ctx->dnssec = dnssec_worker_new(DNSSEC_WORKER_CONTROL, EXPLAIN_SIG_CACHE);
    ctx->now_us = tern_monotonic_us();
    ctx->now_s = (uint32_t)time(NULL);
    ctx->trace = e->trace;
    answer_trace_reset(e->trace);
    size_t len =
        answer_query(v, ctx, (const struct sockaddr *)&r->client, pkt, qlen, e->out,
                     r->tcp ? sizeof(e->out) : EXPLAIN_UDP_SIZE, r->tcp ? ANSWER_TCP : ANSWER_UDP);
    const answer_trace_t *t = e->trace;
    json_object_set_new(root, "zone", zone_json(ctx->info.zone));
    json_object_set_new(root, "policy", policy_json(t, ctx, r));
    json_t *steps = json_array();
    for (unsigned i = 0; i < t->nsteps; i++)
        json_array_append_new(steps, step_json(&t->steps[i]));
    json_object_set_new(root, "path", steps);
    json_t *sel = json_array();
    for (unsigned i = 0; i < t->nselects; i++)
        if (t->selects[i].rr)
            json_array_append_new(sel, select_json(&t->selects[i], v, hl));
    json_object_set_new(root, "selection", sel);
    json_object_set_new(root, "response", response_json(e->out, len, &ctx->info));
    json_object_set_new(root, "dnssec", sigs_json(t));
    if (t->lost)
        json_object_set_new(root, "trace_cut", json_true());
    ctx->trace = NULL;
    ctx->view = NULL;
    tern_rcu_unregister();
}

static json_t *query_json(const explain_req_t *r)
{
    json_t *q = json_object();
    char ip[INET6_ADDRSTRLEN];
    json_object_set_new(q, "name", name_json(r->qname));
    json_object_set_new(q, "type", type_json(r->qtype));
    const struct sockaddr *sa = (const struct sockaddr *)&r->client;
    const void *a = sa->sa_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    inet_ntop(sa->sa_family, a, ip, sizeof(ip));
    json_object_set_new(q, "client", json_string(ip));
    if (r->ecs) {
        char e[INET6_ADDRSTRLEN + 8];
        inet_ntop(r->ecs_family == 1 ? AF_INET : AF_INET6, r->ecs_addr, ip, sizeof(ip));
        snprintf(e, sizeof(e), "%s/%u", ip, r->ecs_prefix);
        json_object_set_new(q, "ecs", json_string(e));
    }
    json_object_set_new(q, "do", json_boolean(r->dnssec_ok));
    json_object_set_new(q, "transport", json_string(r->tcp ? "tcp" : "udp"));
    return q;
}

void ctl_explain(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen)
{
    explain_req_t r;
    if (!parse_req(argv, &r, err, errlen))
        return;
    if (!c->loader) {
        snprintf(err, errlen, "no loader: explain is not available");
        return;
    }
    struct ctl_explain *e = explain_state(c);
    json_t *root = json_object();
    if (!e || !root) {
        json_decref(root);
        snprintf(err, errlen, "out of memory");
        return;
    }
    hlist_t hl = {0};
    health_registry_t *reg = loader_health(c->loader);
    if (reg)
        (void)health_each(reg, hcopy, &hl);
    json_object_set_new(root, "query", query_json(&r));
    run(c, e, &r, &hl, root);
    free(hl.v);
    if (r.json) {
        char *s = json_dumps(root, JSON_COMPACT);
        if (s)
            sb_append(body, s, strlen(s)), sb_append(body, "\n", 1);
        else
            body->failed = true;
        free(s);
    } else {
        const char *k;
        json_t *v;
        json_object_foreach(root, k, v) text_value(body, k, v, "");
    }
    json_decref(root);
}
