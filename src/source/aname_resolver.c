/*
 * aname_resolver.c — see aname_resolver.h. The targets (sorted by name), their answers and
 * schedules live under one mutex; the thread picks the (target, type) due first, asks the
 * upstreams without the lock, and applies the answer under it again — looking the target up by
 * name, since set_targets() may have dropped or replaced it meanwhile.
 */
#include "tern/source/aname_resolver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ldns/ldns.h>

#include "tern/common/buf.h"
#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/common/log.h"
#include "tern/source/aname_state.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"

/* Ask again at 90% of the TTL: the new answer is in before clients' copies of the old one
 * expire, with room for a timeout and a second upstream. */
#define REFRESH_PERMILLE 900
/* Never more often than once a second per (target, type), even for TTL 0 or 1: an upstream that
 * hands out TTL 0 must not turn this thread into a flood. */
#define REFRESH_MIN_MS 1000
/* At least once a day, even under a week-long TTL: a changed target shows within a day. */
#define REFRESH_MAX_MS (86400 * 1000)
/* A failed (target, type) is asked again after 1 s, doubling to 30 s: a short upstream outage
 * heals quickly, a long one costs one query per target per half minute. */
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000
/* Tables are published at most this often; changes in between are coalesced into one table, so
 * thousands of targets answered in a burst cost a few publishes (each a reader-side swap). */
#define PUBLISH_GAP_MS 100
/* Negative TTL when a NODATA/NXDOMAIN answer carries no SOA (RFC 2308 §5 leaves it to us). */
#define NEG_TTL_DEFAULT 60
/* CNAME steps followed inside one answer: resolvers give up around here too (BIND: 16). */
#define CHAIN_MAX 16
/* EDNS buffer size of our queries (DNS flag day 2020): no fragments; larger answers come truncated
 * and ldns asks again over TCP. */
#define EDNS_UDP_SIZE 1232
/* With nothing due (no targets, or no upstreams) the thread still wakes up this often: nothing
 * depends on it, it only bounds a sleep that a lost wake-up could otherwise make endless. */
#define IDLE_WAIT_MS (3600 * 1000)
/* The state file is written at most this often (and at once when the first round is in): a
 * restart loses at most a minute of confirmations, which its own first round asks again, and an
 * upstream whose TTLs count down (a caching resolver) costs one small fsync'ed write a minute. */
#define STATE_SAVE_GAP_MS 60000
/* TTL of a saved answer whose own TTL ran out before the restart (RFC 8767 §4: 30 s). */
#define STALE_TTL 30
/* Targets named in the log line of aname_resolver_log_pending(); the rest are counted. */
#define PENDING_LOG_MAX 5

enum { QT_A = 0, QT_AAAA = 1 };
static const uint16_t qtypes[2] = {WIRE_T_A, WIRE_T_AAAA};
static const char *const qtype_names[2] = {"A", "AAAA"};

/* What a client could see of one (target, type), as aname_result_t has it. */
struct answer {
    uint8_t state; /* aname_state_t */
    uint16_t count;
    uint32_t ttl;
    uint32_t rdata_len;
    uint8_t *rdata; /* malloc'd; NULL when rdata_len is 0 */
};

/* One (target, type). */
struct item {
    struct answer a; /* the last answer (ANAME_PENDING until the first) */
    int64_t due;     /* monotonic ms: when to ask next */
    /* the last retry delay (ms) while failing; 0 when the last attempt answered */
    uint32_t backoff;
    bool tried;         /* asked at least once since the target appeared (the first round) */
    uint32_t ttl_given; /* the TTL of a.state as the upstream gave it (a.ttl of a saved one is
                           what is left of it) */
    int64_t confirmed;  /* Unix time an upstream last gave a (for the state file) */
};

struct target {
    uint8_t name[DNAME_MAXLEN]; /* lowercased wire name */
    uint8_t len;
    bool failing;      /* logged as failing, not yet as answering again */
    struct item it[2]; /* QT_A, QT_AAAA */
};

struct aname_resolver {
    aname_publish_fn fn;
    void *ctx;
    pthread_t thread;
    bool started;

    pthread_mutex_t mu;
    pthread_cond_t wake; /* CLOCK_MONOTONIC */
    /* Everything below is under mu. */
    bool stop;
    aname_upstream_t *ups;
    size_t nups;
    uint64_t ups_gen;  /* bumped by every configure() that changed the list */
    struct target **t; /* nt targets sorted by target_cmp() */
    size_t nt;
    bool dirty;         /* something a client could see changed since the last publish */
    size_t untried;     /* (target, type) pairs not tried yet: the first round is in at 0 */
    char *state_path;   /* the state file, or NULL */
    uint32_t max_stale; /* seconds a saved answer may have outlived its TTL to be loaded */
    bool state_dirty;   /* an answer arrived (changed or confirmed) since the file was written */
    aname_state_entry_t *saved; /* read from the file for names that were no targets (yet), */
    size_t nsaved;              /* in file order; taken by set_targets() */
    bool warned_no_ups;         /* "targets but no upstream" logged since the last configure() */
    aname_stats_t st;           /* targets and pending are computed by aname_resolver_stats() */
};

/* The thread's own connections: one ldns resolver per upstream, in the order they are tried. */
struct conn {
    ldns_resolver *res;
};

struct conns {
    struct conn *c;
    size_t n;
    uint64_t gen; /* the ups_gen they were built from */
};

/* ---- targets ---- */

static int target_cmp(const void *a, const void *b)
{
    const struct target *x = *(const struct target *const *)a;
    const struct target *y = *(const struct target *const *)b;
    return aname_state_name_cmp(x->name, x->len, y->name, y->len);
}

static void target_free(struct target *t)
{
    if (!t)
        return;
    free(t->it[QT_A].a.rdata);
    free(t->it[QT_AAAA].a.rdata);
    free(t);
}

/* The target named name (len bytes, lowercased), or NULL. Under mu. */
static struct target *target_find(aname_resolver_t *r, const uint8_t *name, size_t len)
{
    size_t lo = 0, hi = r->nt;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = aname_state_name_cmp(r->t[mid]->name, r->t[mid]->len, name, len);
        if (c == 0)
            return r->t[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- asking the upstreams ---- */

static void conns_free(struct conns *cs)
{
    for (size_t i = 0; i < cs->n; i++)
        ldns_resolver_deep_free(cs->c[i].res);
    free(cs->c);
    cs->c = NULL;
    cs->n = 0;
}

/* One ldns resolver for u: its own port, timeout and transport, one attempt, no shuffling. */
static ldns_resolver *conn_new(const aname_upstream_t *u)
{
    ldns_resolver *res = ldns_resolver_new();
    if (!res)
        return NULL;
    ldns_rdf *addr =
        ldns_rdf_new_frm_str(strchr(u->host, ':') ? LDNS_RDF_TYPE_AAAA : LDNS_RDF_TYPE_A, u->host);
    ldns_status s = addr ? ldns_resolver_push_nameserver(res, addr) : LDNS_STATUS_MEM_ERR;
    ldns_rdf_deep_free(addr);
    if (s != LDNS_STATUS_OK) {
        ldns_resolver_deep_free(res);
        return NULL;
    }
    ldns_resolver_set_port(res, u->port);
    ldns_resolver_set_timeout(res, (struct timeval){.tv_sec = u->timeout_ms / 1000,
                                                    .tv_usec = (u->timeout_ms % 1000) * 1000});
    ldns_resolver_set_retry(res, 1);   /* one attempt; the schedule does the retrying */
    ldns_resolver_set_retrans(res, 0); /* never sleep between attempts */
    ldns_resolver_set_usevc(res, u->tcp);
    ldns_resolver_set_fallback(res, true); /* TC=1 over UDP: ask again over TCP */
    ldns_resolver_set_random(res, false);
    ldns_resolver_set_recursive(res, true);
    ldns_resolver_set_dnssec(res, false);
    ldns_resolver_set_defnames(res, false);
    ldns_resolver_set_dnsrch(res, false);
    ldns_resolver_set_edns_udp_size(res, EDNS_UDP_SIZE);
    return res;
}

/* Rebuild cs from r's upstreams if they changed. Under mu (no network involved). */
static void conns_sync(aname_resolver_t *r, struct conns *cs)
{
    if (cs->gen == r->ups_gen)
        return;
    conns_free(cs);
    cs->gen = r->ups_gen;
    if (!r->nups)
        return;
    if (!(cs->c = calloc(r->nups, sizeof(*cs->c)))) {
        log_err("aname: out of memory for %zu upstreams; not resolving", r->nups);
        return;
    }
    for (size_t i = 0; i < r->nups; i++) {
        struct conn *c = &cs->c[cs->n];
        if (!(c->res = conn_new(&r->ups[i]))) {
            log_err("aname: cannot set up upstream %s port %u; skipping it", r->ups[i].host,
                    r->ups[i].port);
            continue;
        }
        cs->n++;
    }
}

/* TTL as RFC 2181 §8 wants it read: a value with the top bit set is 0. */
static uint32_t rr_ttl(const ldns_rr *rr)
{
    uint32_t ttl = ldns_rr_ttl(rr);
    return ttl > INT32_MAX ? 0 : ttl;
}

/* Whether rdf is a domain name equal (ASCII case-insensitively) to the wire name of len bytes.
 * Length bytes (0..63) are never ASCII letters, so a byte-wise comparison of the two uncompressed
 * wire forms is a label-wise one. */
static bool rdf_name_is(const ldns_rdf *rdf, const uint8_t *name, size_t len)
{
    if (!rdf || ldns_rdf_get_type(rdf) != LDNS_RDF_TYPE_DNAME || ldns_rdf_size(rdf) != len)
        return false;
    const uint8_t *d = ldns_rdf_data(rdf);
    for (size_t i = 0; i < len; i++) {
        uint8_t x = d[i], y = name[i];
        if (x >= 'A' && x <= 'Z')
            x |= 0x20;
        if (y >= 'A' && y <= 'Z')
            y |= 0x20;
        if (x != y)
            return false;
    }
    return true;
}

static bool rr_owned_by(const ldns_rr *rr, const uint8_t *name, size_t len)
{
    return ldns_rr_get_class(rr) == LDNS_RR_CLASS_IN && rdf_name_is(ldns_rr_owner(rr), name, len);
}

/* The negative TTL of answer p: min(TTL, MINIMUM) of its authority SOA (RFC 2308 §5), else the
 * default. *soa tells whether there was one. */
static uint32_t negative_ttl(const ldns_pkt *p, bool *soa)
{
    const ldns_rr_list *au = ldns_pkt_authority(p);
    for (size_t i = 0; i < ldns_rr_list_rr_count(au); i++) {
        const ldns_rr *rr = ldns_rr_list_rr(au, i);
        if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_SOA || ldns_rr_rd_count(rr) < 7)
            continue;
        const ldns_rdf *m = ldns_rr_rdf(rr, 6);
        if (ldns_rdf_size(m) != 4)
            continue;
        uint32_t min = ldns_rdf2native_int32(m), ttl = rr_ttl(rr);
        *soa = true;
        if (min > INT32_MAX)
            min = 0;
        return ttl < min ? ttl : min;
    }
    *soa = false;
    return NEG_TTL_DEFAULT;
}

/* Whether the authority section of p holds NS records (with no answer: a referral). */
static bool has_ns(const ldns_pkt *p)
{
    const ldns_rr_list *au = ldns_pkt_authority(p);
    for (size_t i = 0; i < ldns_rr_list_rr_count(au); i++)
        if (ldns_rr_get_type(ldns_rr_list_rr(au, i)) == LDNS_RR_TYPE_NS)
            return true;
    return false;
}

/* qsort_r() order of address pointers; arg points to the address size. */
static int addr_cmp(const void *a, const void *b, void *arg)
{
    return memcmp(*(const uint8_t *const *)a, *(const uint8_t *const *)b, *(const size_t *)arg);
}

/*
 * The addresses of type qtype owned by name (len bytes) in the answer section of p, sorted and
 * without duplicates, as an RDATA sequence in *a (ANAME_OK), or nothing (count 0). *ttl is lowered
 * to the lowest TTL of those RRs. 0, or TERN_EMALF for an A/AAAA of the wrong size, TERN_ENOMEM.
 */
static int take_addresses(const ldns_pkt *p, const uint8_t *name, size_t len, uint16_t qtype,
                          struct answer *a, uint32_t *ttl)
{
    const ldns_rr_list *an = ldns_pkt_answer(p);
    size_t n = ldns_rr_list_rr_count(an), rl = qtype == WIRE_T_A ? 4 : 16, count = 0;
    const uint8_t **addrs = malloc((n ? n : 1) * sizeof(*addrs));
    if (!addrs)
        return TERN_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const ldns_rr *rr = ldns_rr_list_rr(an, i);
        if ((uint16_t)ldns_rr_get_type(rr) != qtype || !rr_owned_by(rr, name, len))
            continue;
        const ldns_rdf *d = ldns_rr_rd_count(rr) == 1 ? ldns_rr_rdf(rr, 0) : NULL;
        if (!d || ldns_rdf_size(d) != rl) {
            free(addrs);
            return TERN_EMALF;
        }
        addrs[count++] = ldns_rdf_data(d);
        uint32_t t = rr_ttl(rr);
        if (t < *ttl)
            *ttl = t;
    }
    /* sorted, so that an upstream that rotates its RRs does not look like a change */
    qsort_r(addrs, count, sizeof(*addrs), addr_cmp, &rl);
    size_t m = 0;
    for (size_t i = 0; i < count; i++)
        if (m == 0 || memcmp(addrs[m - 1], addrs[i], rl) != 0)
            addrs[m++] = addrs[i];
    a->count = 0;
    a->rdata_len = 0;
    a->rdata = NULL;
    if (m > UINT16_MAX)
        m = UINT16_MAX;
    if (m) {
        if (!(a->rdata = malloc(m * (2 + rl)))) {
            free(addrs);
            return TERN_ENOMEM;
        }
        for (size_t i = 0; i < m; i++) {
            uint8_t *w = a->rdata + i * (2 + rl);
            w[0] = 0;
            w[1] = (uint8_t)rl;
            memcpy(w + 2, addrs[i], rl);
        }
        a->count = (uint16_t)m;
        a->rdata_len = (uint32_t)(m * (2 + rl));
    }
    free(addrs);
    return 0;
}

/*
 * What answer p to query q says about name (len bytes) and qtype, into *a (rdata malloc'd).
 * 0, or a negative code with *why set when p is no usable answer (the next upstream is asked).
 */
static int interpret(const ldns_pkt *q, const ldns_pkt *p, const uint8_t *name, size_t len,
                     uint16_t qtype, struct answer *a, const char **why)
{
    const ldns_rr_list *qs = ldns_pkt_question(p);
    const ldns_rr *qrr = ldns_rr_list_rr_count(qs) == 1 ? ldns_rr_list_rr(qs, 0) : NULL;
    if (!ldns_pkt_qr(p) || ldns_pkt_id(p) != ldns_pkt_id(q) ||
        ldns_pkt_get_opcode(p) != LDNS_PACKET_QUERY || !qrr ||
        (uint16_t)ldns_rr_get_type(qrr) != qtype || !rr_owned_by(qrr, name, len)) {
        *why = "the answer does not match the question";
        return TERN_EMALF;
    }
    if (ldns_pkt_tc(p)) {
        *why = "truncated answer";
        return TERN_EMALF;
    }
    ldns_pkt_rcode rc = ldns_pkt_get_rcode(p);
    if (rc != LDNS_RCODE_NOERROR && rc != LDNS_RCODE_NXDOMAIN) {
        const ldns_lookup_table *lt = ldns_lookup_by_id(ldns_rcodes, (int)rc);
        *why = lt ? lt->name : "unknown rcode";
        return TERN_EINVAL;
    }

    /* The CNAME chain from the target, inside the answer section. */
    const ldns_rr_list *an = ldns_pkt_answer(p);
    const uint8_t *cur = name;
    size_t cur_len = len;
    uint32_t ttl = UINT32_MAX;
    for (unsigned step = 0;; step++) {
        const ldns_rr *cn = NULL;
        for (size_t i = 0; i < ldns_rr_list_rr_count(an) && !cn; i++) {
            const ldns_rr *rr = ldns_rr_list_rr(an, i);
            if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_CNAME && ldns_rr_rd_count(rr) == 1 &&
                rr_owned_by(rr, cur, cur_len) &&
                ldns_rdf_get_type(ldns_rr_rdf(rr, 0)) == LDNS_RDF_TYPE_DNAME)
                cn = rr;
        }
        if (!cn)
            break;
        if (step == CHAIN_MAX) {
            *why = "CNAME loop or chain too long";
            return TERN_EMALF;
        }
        uint32_t t = rr_ttl(cn);
        if (t < ttl)
            ttl = t;
        cur = ldns_rdf_data(ldns_rr_rdf(cn, 0));
        cur_len = ldns_rdf_size(ldns_rr_rdf(cn, 0));
    }

    *a = (struct answer){0};
    if (rc == LDNS_RCODE_NOERROR) {
        int err = take_addresses(p, cur, cur_len, qtype, a, &ttl);
        if (err < 0) {
            *why = err == TERN_ENOMEM ? "out of memory" : "malformed address record";
            return err;
        }
        if (a->count) {
            a->state = ANAME_OK;
            a->ttl = ttl;
            return 0;
        }
    }
    bool soa;
    uint32_t neg = negative_ttl(p, &soa);
    if (rc == LDNS_RCODE_NOERROR && !soa && has_ns(p)) {
        *why = "a referral (the upstream does not recurse for this name)";
        return TERN_EINVAL;
    }
    a->state = rc == LDNS_RCODE_NOERROR ? ANAME_NODATA : ANAME_NXDOMAIN;
    a->ttl = neg < ttl ? neg : ttl;
    return 0;
}

/*
 * Ask the upstreams in order for (name, qtype) until one answers; it moves to the front (redins'
 * upstream.go does the same). 0 with *a filled, or a negative code with *why set to the last
 * upstream's reason. *sent counts the queries sent. Without the lock: this waits on the network.
 */
static int resolve(struct conns *cs, const uint8_t *name, size_t len, uint16_t qtype,
                   struct answer *a, uint64_t *sent, const char **why)
{
    *why = "no upstream";
    ldns_rdf *qname = ldns_dname_new_frm_data((uint16_t)len, name);
    if (!qname) {
        *why = "out of memory";
        return TERN_ENOMEM;
    }
    int rc = TERN_ENOENT;
    for (size_t i = 0; i < cs->n; i++) {
        ldns_resolver *res = cs->c[i].res;
        /* ldns marks a server that failed once as unreachable for good; ours get every query */
        ldns_resolver_set_nameserver_rtt(res, 0, LDNS_RESOLV_RTT_MIN);
        ldns_pkt *q = NULL, *p = NULL;
        ldns_status s = ldns_resolver_prepare_query_pkt(&q, res, qname, (ldns_rr_type)qtype,
                                                        LDNS_RR_CLASS_IN, LDNS_RD);
        if (s != LDNS_STATUS_OK) {
            *why = ldns_get_errorstr_by_id(s);
            rc = TERN_ENOMEM;
            break;
        }
        (*sent)++;
        s = ldns_resolver_send_pkt(&p, res, q);
        if (s != LDNS_STATUS_OK || !p) {
            *why = s != LDNS_STATUS_OK ? ldns_get_errorstr_by_id(s) : "no answer";
            rc = TERN_EINVAL;
        } else {
            rc = interpret(q, p, name, len, qtype, a, why);
        }
        ldns_pkt_free(q);
        ldns_pkt_free(p);
        if (rc == 0) {
            if (i) {
                struct conn c = cs->c[i];
                cs->c[i] = cs->c[0];
                cs->c[0] = c;
            }
            break;
        }
    }
    ldns_rdf_deep_free(qname);
    return rc;
}

/* ---- the thread ---- */

static bool answer_equal(const struct answer *x, const struct answer *y)
{
    return x->state == y->state && x->ttl == y->ttl && x->count == y->count &&
           x->rdata_len == y->rdata_len &&
           (!x->rdata_len || memcmp(x->rdata, y->rdata, x->rdata_len) == 0);
}

/* Record the outcome of asking (name, type ti): rc 0 with answer *a (whose rdata is taken), or a
 * failure for reason why. Under mu. */
static void apply(aname_resolver_t *r, const uint8_t *name, size_t len, int ti, int rc,
                  struct answer *a, const char *why)
{
    struct target *t = target_find(r, name, len);
    if (!t)
        return; /* dropped by set_targets() while it was being asked */
    struct item *it = &t->it[ti];
    int64_t now = tern_monotonic_ms();
    char str[DNAME_KEY_MAX];
    if (!it->tried) {
        it->tried = true;
        /* the last of the first round: publish a table that says so (aname_results_complete) */
        if (--r->untried == 0)
            r->dirty = true;
    }
    if (rc < 0) {
        r->st.failures++;
        it->backoff = it->backoff ? it->backoff * 2 : BACKOFF_MIN_MS;
        if (it->backoff > BACKOFF_MAX_MS)
            it->backoff = BACKOFF_MAX_MS;
        it->due = now + it->backoff;
        if (!t->failing) {
            t->failing = true;
            (void)dname_to_str(t->name, str, sizeof(str));
            log_warn("aname: cannot resolve %s %s: %s; %s", str, qtype_names[ti], why,
                     it->a.state == ANAME_PENDING ? "it has no address yet"
                                                  : "serving its last answer");
        }
        return;
    }
    if (!answer_equal(&it->a, a)) {
        free(it->a.rdata);
        it->a = *a;
        a->rdata = NULL;
        r->st.changes++;
        r->dirty = true;
    }
    it->ttl_given = it->a.ttl;
    it->confirmed = (int64_t)time(NULL);
    r->state_dirty = true;
    it->backoff = 0;
    int64_t delay = (int64_t)it->a.ttl * REFRESH_PERMILLE;
    it->due = now + (delay < REFRESH_MIN_MS   ? REFRESH_MIN_MS
                     : delay > REFRESH_MAX_MS ? REFRESH_MAX_MS
                                              : delay);
    if (t->failing && !t->it[QT_A].backoff && !t->it[QT_AAAA].backoff) {
        t->failing = false;
        (void)dname_to_str(t->name, str, sizeof(str));
        log_info("aname: %s resolves again", str);
    }
}

/* The table of every (target, type) now; complete when the first round is in. Under mu. NULL
 * when out of memory. */
static aname_results_t *build_table(aname_resolver_t *r, bool complete)
{
    aname_results_builder_t *b = aname_results_builder_new();
    if (!b)
        return NULL;
    if (complete)
        aname_results_set_complete(b);
    for (size_t i = 0; i < r->nt; i++) {
        const struct target *t = r->t[i];
        for (int ti = 0; ti < 2; ti++) {
            const struct answer *a = &t->it[ti].a;
            aname_result_t res = {.state = a->state,
                                  .count = a->count,
                                  .ttl = a->ttl,
                                  .rdata_len = a->rdata_len,
                                  .rdata = a->rdata};
            if (aname_results_add(b, t->name, qtypes[ti], &res) < 0) {
                aname_results_builder_free(b);
                return NULL;
            }
        }
    }
    return aname_results_finish(b);
}

/* The (target, type) due first, or INT64_MAX when there is none. Under mu. */
static int64_t next_due(aname_resolver_t *r, struct target **tp, int *tip)
{
    int64_t best = INT64_MAX;
    for (size_t i = 0; i < r->nt; i++)
        for (int ti = 0; ti < 2; ti++)
            if (r->t[i]->it[ti].due < best) {
                best = r->t[i]->it[ti].due;
                *tp = r->t[i];
                *tip = ti;
            }
    return best;
}

/* Sleep on r->wake until the monotonic time until_ms (or a wake-up). Under mu. */
static void wait_until(aname_resolver_t *r, int64_t until_ms)
{
    struct timespec ts = {.tv_sec = (time_t)(until_ms / 1000),
                          .tv_nsec = (long)(until_ms % 1000) * 1000000L};
    (void)pthread_cond_timedwait(&r->wake, &r->mu, &ts);
}

/* ---- the state file ---- */

/* Whether saved entry e may still be served at Unix time now: not older than its TTL plus
 * max_stale. */
static bool saved_fresh(const aname_resolver_t *r, const aname_state_entry_t *e, int64_t now)
{
    return now < e->confirmed + (int64_t)e->ttl + r->max_stale;
}

/* Saved entry e (fresh) into the item of its type in t if that still waits for its first answer;
 * its rdata is taken. Under mu. */
static void load_into(aname_resolver_t *r, struct target *t, aname_state_entry_t *e, int64_t now)
{
    struct item *it = &t->it[e->qtype == WIRE_T_A ? QT_A : QT_AAAA];
    int64_t expires = e->confirmed + e->ttl;
    if (it->a.state != ANAME_PENDING)
        return;
    it->a = (struct answer){.state = e->state,
                            .count = e->count,
                            .ttl = now < expires ? (uint32_t)(expires - now) : STALE_TTL,
                            .rdata_len = e->rdata_len,
                            .rdata = e->rdata};
    e->rdata = NULL;
    it->ttl_given = e->ttl;
    it->confirmed = e->confirmed;
    r->dirty = true;
}

/* The saved entries of t, a target new to the set: the file's answers for a name that was no
 * target yet when it was read (a zone from Redis arrives after the start). They leave the saved
 * list. Under mu. */
static void saved_take(aname_resolver_t *r, struct target *t)
{
    size_t lo = 0, hi = r->nsaved, end;
    if (!r->nsaved)
        return;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (aname_state_name_cmp(r->saved[mid].name, r->saved[mid].len, t->name, t->len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int64_t now = (int64_t)time(NULL);
    for (end = lo; end < r->nsaved && aname_state_name_cmp(r->saved[end].name, r->saved[end].len,
                                                           t->name, t->len) == 0;
         end++) {
        if (saved_fresh(r, &r->saved[end], now))
            load_into(r, t, &r->saved[end], now);
        free(r->saved[end].rdata);
    }
    memmove(r->saved + lo, r->saved + end, (r->nsaved - end) * sizeof(*r->saved));
    r->nsaved -= end - lo;
}

/* At start, before the first round: what the state file holds for the current targets, so they
 * answer while the upstreams do not (yet); entries for names that are no targets yet are kept
 * for set_targets() (and written back). A missing file is no error; a bad one is logged and
 * ignored whole. Without the lock while it reads the file. */
static void state_load(aname_resolver_t *r)
{
    pthread_mutex_lock(&r->mu);
    char *path = r->state_path ? strdup(r->state_path) : NULL;
    pthread_mutex_unlock(&r->mu);
    if (!path)
        return;
    aname_state_entry_t *e = NULL;
    size_t n = 0, used = 0, kept = 0;
    char err[1024];
    int rc = aname_state_read(path, &e, &n, err, sizeof(err));
    if (rc == TERN_ENOENT)
        log_info("aname: no saved results in %s yet", path);
    else if (rc < 0)
        log_warn("aname: ignoring the saved results: %s", err);
    int64_t now = (int64_t)time(NULL);
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < n; i++) {
        struct target *t = target_find(r, e[i].name, e[i].len);
        if (!saved_fresh(r, &e[i], now)) {
            free(e[i].rdata);
        } else if (t) {
            load_into(r, t, &e[i], now);
            free(e[i].rdata); /* NULL when taken */
            used++;
        } else {
            e[kept++] = e[i]; /* in order still */
        }
    }
    aname_state_free(r->saved, r->nsaved);
    r->saved = e;
    r->nsaved = kept;
    pthread_mutex_unlock(&r->mu);
    if (rc == 0)
        log_info("aname: %zu saved results from %s: %zu served, %zu kept for names that are no "
                 "targets yet, %zu too old",
                 n, path, used, kept, n - used - kept);
    free(path);
}

/* Write every answered (target, type), and the saved entries still fresh, to the state file.
 * Under mu, which it drops while it writes (local disk, bounded by the file's size; never the
 * workers' or the loader's wait). */
static void state_save(aname_resolver_t *r, bool *failing)
{
    aname_state_entry_t *e = calloc(2 * r->nt + r->nsaved + 1, sizeof(*e));
    char *path = strdup(r->state_path);
    tern_buf_t b;
    tern_buf_init(&b, 0);
    size_t n = 0;
    int64_t now = (int64_t)time(NULL);
    for (size_t i = 0; e && i < r->nt; i++)
        for (int ti = 0; ti < 2; ti++) {
            const struct target *t = r->t[i];
            const struct item *it = &t->it[ti];
            if (it->a.state == ANAME_PENDING)
                continue;
            e[n] = (aname_state_entry_t){.len = t->len,
                                         .qtype = qtypes[ti],
                                         .state = it->a.state,
                                         .count = it->a.count,
                                         .ttl = it->ttl_given,
                                         .confirmed = it->confirmed,
                                         .rdata_len = it->a.rdata_len,
                                         .rdata = it->a.rdata};
            memcpy(e[n++].name, t->name, t->len);
        }
    for (size_t i = 0; e && i < r->nsaved; i++)
        if (saved_fresh(r, &r->saved[i], now))
            e[n++] = r->saved[i];
    bool made = e && path;
    if (e)
        aname_state_format(&b, e, n); /* under mu: the entries point into the items */
    free(e);
    r->state_dirty = false;
    pthread_mutex_unlock(&r->mu);
    char err[1024] = "out of memory";
    int rc = !made || b.failed ? TERN_ENOMEM
                               : tern_file_replace(path, b.p, b.len, 0644, err, sizeof(err));
    if (rc < 0 && !*failing)
        log_warn("aname: cannot save the results: %s; trying again after the next change", err);
    else if (rc == 0 && *failing)
        log_info("aname: results saved to %s again", path);
    *failing = rc < 0;
    tern_buf_free(&b);
    free(path);
    pthread_mutex_lock(&r->mu);
}

static void *resolver_main(void *arg)
{
    aname_resolver_t *r = arg;
    (void)pthread_setname_np(pthread_self(), "tern-aname");
    struct conns cs = {0};
    int64_t last_pub = INT64_MIN / 2, last_save = INT64_MIN / 2;
    bool save_failing = false;
    state_load(r);
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        conns_sync(r, &cs);
        int64_t now = tern_monotonic_ms();
        /* no upstream to ask: the round is as complete as it will get */
        bool complete = r->untried == 0 || cs.n == 0;
        if (r->dirty && now - last_pub >= PUBLISH_GAP_MS) {
            aname_results_t *tbl = build_table(r, complete);
            last_pub = now;
            if (!tbl) {
                log_err("aname: out of memory building the results table; trying again");
                continue;
            }
            r->dirty = false;
            r->st.publishes++;
            pthread_mutex_unlock(&r->mu);
            r->fn(r->ctx, tbl);
            pthread_mutex_lock(&r->mu);
            continue;
        }
        int64_t wake = r->dirty ? last_pub + PUBLISH_GAP_MS : now + IDLE_WAIT_MS;
        if (r->state_dirty && r->state_path && complete) {
            if (now - last_save >= STATE_SAVE_GAP_MS) {
                last_save = now;
                state_save(r, &save_failing);
                continue;
            }
            if (last_save + STATE_SAVE_GAP_MS < wake)
                wake = last_save + STATE_SAVE_GAP_MS;
        }
        if (cs.n) {
            struct target *t = NULL;
            int ti = 0;
            int64_t due = next_due(r, &t, &ti);
            if (due <= now) {
                uint8_t name[DNAME_MAXLEN];
                size_t len = t->len;
                memcpy(name, t->name, len);
                /* ask without the lock: the loader must never wait for an upstream */
                pthread_mutex_unlock(&r->mu);
                struct answer a = {0};
                uint64_t sent = 0;
                const char *why = NULL;
                int rc = resolve(&cs, name, len, qtypes[ti], &a, &sent, &why);
                pthread_mutex_lock(&r->mu);
                r->st.queries += sent;
                apply(r, name, len, ti, rc, &a, why);
                free(a.rdata);
                continue;
            }
            if (due < wake)
                wake = due;
        } else if (r->nt && !r->warned_no_ups) {
            /* debug only: the loader warns about a configuration without upstreams */
            r->warned_no_ups = true;
            log_debug("aname: %zu out-of-zone targets but no usable upstream: they stay pending",
                      r->nt);
        }
        wait_until(r, wake);
    }
    pthread_mutex_unlock(&r->mu);
    conns_free(&cs);
    return NULL;
}

/* ---- the interface ---- */

aname_resolver_t *aname_resolver_new(aname_publish_fn fn, void *ctx)
{
    if (!fn)
        return NULL;
    aname_resolver_t *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->fn = fn;
    r->ctx = ctx;
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) {
        free(r);
        return NULL;
    }
    /* CLOCK_MONOTONIC: a wall-clock step must not stall or rush the schedule */
    int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(&r->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        free(r);
        return NULL;
    }
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        pthread_cond_destroy(&r->wake);
        free(r);
        return NULL;
    }
    return r;
}

/* Whether two upstream lists (defaults applied) are the same. */
static bool ups_equal(const aname_upstream_t *a, size_t na, const aname_upstream_t *b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i].host, b[i].host) != 0 || a[i].port != b[i].port || a[i].tcp != b[i].tcp ||
            a[i].timeout_ms != b[i].timeout_ms)
            return false;
    return true;
}

int aname_resolver_configure(aname_resolver_t *r, const aname_upstream_t *ups, size_t n)
{
    aname_upstream_t *copy = NULL;
    if (n) {
        if (!ups)
            return TERN_EINVAL;
        if (!(copy = calloc(n, sizeof(*copy))))
            return TERN_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const aname_upstream_t *u = &ups[i];
        uint8_t buf[sizeof(struct in6_addr)];
        if (!memchr(u->host, 0, sizeof(u->host)) ||
            (inet_pton(AF_INET, u->host, buf) != 1 && inet_pton(AF_INET6, u->host, buf) != 1)) {
            free(copy);
            return TERN_EINVAL;
        }
        memcpy(copy[i].host, u->host, strlen(u->host) + 1);
        copy[i].port = u->port ? u->port : ANAME_UPSTREAM_PORT;
        copy[i].tcp = u->tcp;
        copy[i].timeout_ms = u->timeout_ms ? u->timeout_ms : ANAME_UPSTREAM_TIMEOUT_MS;
    }
    pthread_mutex_lock(&r->mu);
    if (ups_equal(copy, n, r->ups, r->nups)) {
        pthread_mutex_unlock(&r->mu);
        free(copy);
        return 0;
    }
    aname_upstream_t *old = r->ups;
    r->ups = copy;
    r->nups = n;
    r->ups_gen++;
    r->warned_no_ups = false;
    /* new upstreams may answer what the old ones did not: ask those again now */
    for (size_t i = 0; i < r->nt; i++)
        for (int ti = 0; ti < 2; ti++) {
            struct item *it = &r->t[i]->it[ti];
            if (it->a.state == ANAME_PENDING || it->backoff)
                it->due = 0;
        }
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->mu);
    free(old);
    return 0;
}

int aname_resolver_set_targets(aname_resolver_t *r, const uint8_t *const *lcnames, size_t n)
{
    if (n && !lcnames)
        return TERN_EINVAL;
    int rc = TERN_ENOMEM;
    struct target **cand = calloc(n ? n : 1, sizeof(*cand));
    struct target **next = NULL;
    if (!cand)
        return TERN_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!lcnames[i] || dname_check(lcnames[i], DNAME_MAXLEN) < 0) {
            rc = TERN_EINVAL;
            goto out;
        }
        if (!(cand[i] = calloc(1, sizeof(*cand[i]))))
            goto out;
        cand[i]->len = (uint8_t)dname_lower(cand[i]->name, lcnames[i]);
        /* the rest is zero: ANAME_PENDING, due at once, not failing */
    }
    qsort(cand, n, sizeof(*cand), target_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && target_cmp(&cand[m - 1], &cand[i]) == 0) {
            target_free(cand[i]);
            cand[i] = NULL;
        } else {
            struct target *c = cand[i];
            cand[i] = NULL;
            cand[m++] = c;
        }
    }
    if (!(next = malloc((m ? m : 1) * sizeof(*next))))
        goto out;

    pthread_mutex_lock(&r->mu);
    /* Merge the two sorted lists: kept targets keep their answers and schedule. */
    size_t i = 0, j = 0, k = 0;
    bool changed = false;
    while (i < r->nt || j < m) {
        int c = i == r->nt ? 1 : j == m ? -1 : target_cmp(&r->t[i], &cand[j]);
        if (c < 0) { /* removed */
            r->untried -= !r->t[i]->it[QT_A].tried + !r->t[i]->it[QT_AAAA].tried;
            target_free(r->t[i++]);
            changed = true;
        } else if (c > 0) { /* new */
            r->untried += 2;
            saved_take(r, cand[j]);
            next[k++] = cand[j];
            cand[j++] = NULL;
            changed = true;
        } else { /* kept; the candidate is freed below */
            next[k++] = r->t[i++];
            j++;
        }
    }
    free(r->t);
    r->t = next;
    r->nt = k;
    next = NULL;
    if (changed) {
        r->dirty = true;
        pthread_cond_signal(&r->wake);
    }
    pthread_mutex_unlock(&r->mu);
    rc = 0;
out:
    for (size_t x = 0; x < n; x++)
        target_free(cand[x]);
    free(cand);
    free(next);
    return rc;
}

int aname_resolver_set_state(aname_resolver_t *r, const char *path, uint32_t max_stale_s)
{
    char *copy = NULL;
    if (path && !(copy = strdup(path)))
        return TERN_ENOMEM;
    pthread_mutex_lock(&r->mu);
    /* a reload that names another file: it gets what is known now */
    if (copy && r->state_path && strcmp(copy, r->state_path) != 0)
        r->state_dirty = true;
    free(r->state_path);
    r->state_path = copy;
    r->max_stale = max_stale_s;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

void aname_resolver_log_pending(aname_resolver_t *r)
{
    char names[PENDING_LOG_MAX * (DNAME_KEY_MAX + 2)] = "";
    size_t pending = 0, off = 0;
    pthread_mutex_lock(&r->mu);
    size_t untried = r->untried;
    for (size_t i = 0; i < r->nt; i++) {
        const struct target *t = r->t[i];
        if (t->it[QT_A].a.state != ANAME_PENDING && t->it[QT_AAAA].a.state != ANAME_PENDING)
            continue;
        if (pending++ < PENDING_LOG_MAX) {
            char str[DNAME_KEY_MAX];
            (void)dname_to_str(t->name, str, sizeof(str));
            off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", off ? ", " : "", str);
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (pending)
        log_warn("aname: %zu targets have no answer yet (%s%s): their owners answer SERVFAIL "
                 "until an upstream answers",
                 pending, names, pending > PENDING_LOG_MAX ? ", ..." : "");
    if (untried)
        log_warn("aname: %zu (target, type) pairs not asked yet: the first round is not in",
                 untried);
}

int aname_resolver_start(aname_resolver_t *r)
{
    if (r->started)
        return TERN_EINVAL;
    int rc = pthread_create(&r->thread, NULL, resolver_main, r);
    if (rc != 0) {
        log_err("aname: cannot start the resolver thread: %s", tern_strerror(-rc));
        return -rc;
    }
    r->started = true;
    return 0;
}

void aname_resolver_stats(aname_resolver_t *r, aname_stats_t *out)
{
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    out->targets = r->nt;
    out->pending = 0;
    for (size_t i = 0; i < r->nt; i++)
        if (r->t[i]->it[QT_A].a.state == ANAME_PENDING ||
            r->t[i]->it[QT_AAAA].a.state == ANAME_PENDING)
            out->pending++;
    pthread_mutex_unlock(&r->mu);
}

void aname_resolver_free(aname_resolver_t *r)
{
    if (!r)
        return;
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_cond_signal(&r->wake);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
    }
    for (size_t i = 0; i < r->nt; i++)
        target_free(r->t[i]);
    free(r->t);
    free(r->ups);
    free(r->state_path);
    aname_state_free(r->saved, r->nsaved);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->wake);
    free(r);
}
