/*
 * ctl_explain.c — `explain NAME [TYPE] --client ADDR [--ecs PREFIX] [--do] [--tcp] [--json]`:
 * what the running server answers that client, and why, by the workers' own code path.
 *
 * The serving thread builds the query a resolver at ADDR would send (EDNS with the ECS option and
 * the DO bit asked for), registers with RCU for the length of the command, takes the published
 * view and runs answer_query() over it with ADDR as the packet's source, in an answer context of
 * its own that carries a trace (tern/answer/answer_trace.h): every stage records its decisions as
 * it makes them. Then it reads the trace and parses the response it made, while the same view is
 * held (the trace points into it), and formats both (ctl_explain_fmt.c): as "key: value" lines,
 * or one JSON object.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl_explain_fmt.h"
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
static void run(ctl_t *c, struct ctl_explain *e, const explain_req_t *r,
                const ctl_explain_health_t *hl, json_t *root)
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
    json_object_set_new(root, "zone", ctl_explain_fmt_zone(ctx->info.zone));
    json_object_set_new(root, "policy", ctl_explain_fmt_policy(t, ctx, r->tcp));
    json_t *steps = json_array();
    for (unsigned i = 0; i < t->nsteps; i++)
        json_array_append_new(steps, ctl_explain_fmt_step(&t->steps[i]));
    json_object_set_new(root, "path", steps);
    json_t *sel = json_array();
    for (unsigned i = 0; i < t->nselects; i++)
        if (t->selects[i].rr)
            json_array_append_new(sel, ctl_explain_fmt_select(&t->selects[i], v, hl));
    json_object_set_new(root, "selection", sel);
    json_object_set_new(root, "response", ctl_explain_fmt_response(e->out, len, &ctx->info));
    json_object_set_new(root, "dnssec", ctl_explain_fmt_sigs(t));
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
    json_object_set_new(q, "name", ctl_explain_fmt_name(r->qname));
    json_object_set_new(q, "type", ctl_explain_fmt_type(r->qtype));
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
    ctl_explain_health_t hl = {0};
    health_registry_t *reg = loader_health(c->loader);
    if (reg)
        (void)health_each(reg, ctl_explain_fmt_health, &hl);
    json_object_set_new(root, "query", query_json(&r));
    run(c, e, &r, &hl, root);
    free(hl.v);
    if (r.json) {
        char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(9));
        if (s)
            sb_append(body, s, strlen(s)), sb_append(body, "\n", 1);
        else
            body->failed = true;
        free(s);
    } else {
        const char *k;
        json_t *v;
        json_object_foreach(root, k, v) ctl_explain_fmt_text(body, k, v, "");
    }
    json_decref(root);
}
