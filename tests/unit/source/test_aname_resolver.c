/*
 * test_aname_resolver.c — the ANAME resolver thread against a real upstream: a knotd started on a
 * free loopback port in a scratch directory, serving up.test. with TTLs of 1–3 s. Covers OK,
 * NODATA, NXDOMAIN and a CNAME chain; a changed zone reaching a new table within its TTL; the last
 * good answer kept (and failures counted) while the upstream is down, and changes flowing again
 * when it is back; a target nobody answers staying pending; set_targets() adding and removing;
 * TCP and failing over from a dead upstream; the table marked complete after the first round; the
 * state file written, loaded with the upstream dead, refused when too old or cut short. Every
 * wait is bounded. Fails without knotd.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "knot_server.h"
#include "test_util.h"

#include "tern/common/err.h"
#include "tern/source/aname_resolver.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"

/* How long a published table may take to show what the test waits for: the zone's TTLs are 1–3 s
 * and failed queries back off to a few seconds, so this is generous. */
#define PUB_WAIT_MS 10000

/* ---- a real knotd ---- */

static knot_server_t knot;

/* The zone file: target's addresses given; everything else fixed. TTLs of 1–3 s. */
static void write_zone(unsigned serial, const char *target_a)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "$ORIGIN up.test.\n"
             "@        30 SOA   ns.up.test. host.up.test. %u 7200 900 1209600 3\n"
             "@        30 NS    ns\n"
             "ns       30 A     192.0.2.53\n"
             "target    2 A     %s\n"
             "target    2 AAAA  2001:db8::1\n"
             "cn        1 CNAME target\n"
             "cn2       3 CNAME cn\n"
             "v4only    2 A     192.0.2.4\n"
             "v4only    2 A     192.0.2.3\n"
             "late      2 A     192.0.2.5\n",
             serial, target_a);
    tu_write_file(knot.dir, "up.test.zone", text);
}

static void knot_spawn(void)
{
    if (!ksrv_start(&knot))
        fail_msg("knotd did not start");
}

static void knot_kill(void)
{
    ksrv_stop(&knot);
}

static bool have_knot;

static int group_setup(void **state)
{
    (void)state;
    /* knot is a test dependency the README's test command installs: its absence is a broken
     * install, not a reason to skip */
    have_knot = ksrv_init(&knot, "tern-knot", "up.test.");
    if (!have_knot)
        return -1;
    char conf[2048];
    int h = ksrv_conf_head(&knot, conf, sizeof(conf));
    snprintf(conf + h, sizeof(conf) - (size_t)h,
             "template:\n"
             "  - id: default\n"
             "    storage: \"%s\"\n"
             "    zonefile-sync: -1\n"
             "    zonefile-load: whole\n"
             "    journal-content: none\n"
             "zone:\n"
             "  - domain: \"up.test.\"\n"
             "    file: \"%s/up.test.zone\"\n",
             knot.dir, knot.dir);
    tu_write_file(knot.dir, "knot.conf", conf);
    write_zone(1, "192.0.2.1");
    knot_spawn();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (!have_knot)
        return 0;
    knot_kill();
    tu_rmtree(knot.dir);
    return 0;
}

/* Tell knotd to read its zone file again; bounded by knotc's own timeout. */
static void knot_reload(void)
{
    assert_int_equal(ksrv_ctl(&knot, "zone-reload up.test."), 0);
}

/* ---- what the resolver publishes ---- */

struct pubs {
    pthread_mutex_t mu;
    aname_results_t *last;
    unsigned n;
};

static void on_publish(void *ctx, aname_results_t *t)
{
    struct pubs *p = ctx;
    pthread_mutex_lock(&p->mu);
    aname_results_t *old = p->last;
    p->last = t;
    p->n++;
    pthread_mutex_unlock(&p->mu);
    aname_results_release(old);
}

static void pubs_init(struct pubs *p)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->mu, NULL);
}

static void pubs_free(struct pubs *p)
{
    aname_results_release(p->last);
    pthread_mutex_destroy(&p->mu);
}

/* The latest table (one reference for the caller), NULL before the first; *n publishes so far. */
static aname_results_t *pubs_get(struct pubs *p, unsigned *n)
{
    pthread_mutex_lock(&p->mu);
    aname_results_t *t = aname_results_retain(p->last);
    if (n)
        *n = p->n;
    pthread_mutex_unlock(&p->mu);
    return t;
}

static size_t wire(uint8_t *dst, const char *s)
{
    const char *why;
    int n = dname_from_str(s, strlen(s), false, dst, &why);
    assert_true(n > 0);
    return (size_t)n;
}

static const aname_result_t *find(const aname_results_t *t, const char *name, uint16_t qtype)
{
    uint8_t w[DNAME_MAXLEN];
    size_t len = wire(w, name);
    return aname_results_find(t, w, len, dname_hash(w), qtype);
}

/* Whether r holds the address given as text (IPv4 or IPv6 by its type). */
static bool has_addr(const aname_result_t *r, uint16_t qtype, const char *addr)
{
    uint8_t want[16];
    size_t rl = qtype == WIRE_T_A ? 4 : 16;
    assert_int_equal(inet_pton(qtype == WIRE_T_A ? AF_INET : AF_INET6, addr, want), 1);
    if (!r || r->state != ANAME_OK)
        return false;
    for (size_t off = 0; off + 2 + rl <= r->rdata_len; off += 2 + rl)
        if (memcmp(r->rdata + off + 2, want, rl) == 0)
            return true;
    return false;
}

/* Whether (name, qtype) of t is in state, holding addr when addr is not NULL. */
static bool entry_is(const aname_results_t *t, const char *name, uint16_t qtype, int state,
                     const char *addr)
{
    const aname_result_t *r = find(t, name, qtype);
    return r && r->state == state && (!addr || has_addr(r, qtype, addr));
}

/* Wait (bounded) until the latest table has (name, qtype) in state (holding addr, if given);
 * returns that table (the caller releases it). */
static aname_results_t *wait_entry(struct pubs *p, const char *name, uint16_t qtype, int state,
                                   const char *addr)
{
    int64_t deadline = tu_now_ms() + PUB_WAIT_MS;
    for (;;) {
        aname_results_t *t = pubs_get(p, NULL);
        if (t && entry_is(t, name, qtype, state, addr))
            return t;
        const aname_result_t *r = t ? find(t, name, qtype) : NULL;
        int got = r ? r->state : -1;
        aname_results_release(t);
        if (tu_now_ms() > deadline)
            fail_msg("%s type %u: state %d after %d ms, want %d%s%s", name, qtype, got, PUB_WAIT_MS,
                     state, addr ? " with " : "", addr ? addr : "");
        tu_sleep_ms(20);
    }
}

static aname_upstream_t knot_upstream(bool tcp)
{
    aname_upstream_t u = {.port = knot.port, .tcp = tcp, .timeout_ms = 400};
    snprintf(u.host, sizeof(u.host), "127.0.0.1");
    return u;
}

static void set_targets(aname_resolver_t *r, const char *const *names, size_t n)
{
    uint8_t w[16][DNAME_MAXLEN];
    const uint8_t *ptrs[16];
    assert_true(n <= 16);
    for (size_t i = 0; i < n; i++) {
        wire(w[i], names[i]);
        ptrs[i] = w[i];
    }
    assert_int_equal(aname_resolver_set_targets(r, ptrs, n), 0);
}

/* ---- the tests, in order: they share one knotd, whose zone they change ---- */

static struct pubs pubs;
static aname_resolver_t *res;

static void test_states(void **state)
{
    (void)state;
    pubs_init(&pubs);
    res = aname_resolver_new(on_publish, &pubs);
    assert_non_null(res);
    aname_upstream_t u = knot_upstream(false);
    assert_int_equal(aname_resolver_configure(res, &u, 1), 0);
    /* duplicates allowed; other.invalid. is refused by knotd (not its zone): never answered */
    const char *names[] = {"target.up.test.", "cn2.up.test.",    "v4only.up.test.",
                           "nope.up.test.",   "TARGET.up.test.", "other.invalid."};
    set_targets(res, names, 6);
    assert_int_equal(aname_resolver_start(res), 0);
    assert_int_equal(aname_resolver_start(res), TERN_EINVAL);

    aname_results_release(wait_entry(&pubs, "target.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.1"));
    aname_results_release(wait_entry(&pubs, "nope.up.test.", WIRE_T_AAAA, ANAME_NXDOMAIN, NULL));
    aname_results_release(wait_entry(&pubs, "v4only.up.test.", WIRE_T_AAAA, ANAME_NODATA, NULL));
    aname_results_release(wait_entry(&pubs, "cn2.up.test.", WIRE_T_AAAA, ANAME_OK, NULL));
    aname_results_t *t = wait_entry(&pubs, "target.up.test.", WIRE_T_AAAA, ANAME_OK, "2001:db8::1");
    /* every (target, type) has an entry, pending ones too */
    assert_int_equal(aname_results_count(t), 10);

    const aname_result_t *r = find(t, "target.up.test.", WIRE_T_A);
    assert_int_equal(r->count, 1);
    assert_int_equal(r->ttl, 2);
    assert_int_equal(r->rdata_len, 6);
    const uint8_t want[] = {0, 4, 192, 0, 2, 1};
    assert_memory_equal(r->rdata, want, 6);
    r = find(t, "target.up.test.", WIRE_T_AAAA);
    assert_int_equal(r->count, 1);
    assert_int_equal(r->rdata_len, 18);
    /* two A records, sorted; the AAAA is NODATA with min(SOA TTL 30, MINIMUM 3) */
    r = find(t, "v4only.up.test.", WIRE_T_A);
    if (!r || r->state != ANAME_OK) {
        aname_results_release(t);
        t = wait_entry(&pubs, "v4only.up.test.", WIRE_T_A, ANAME_OK, NULL);
        r = find(t, "v4only.up.test.", WIRE_T_A);
    }
    assert_int_equal(r->count, 2);
    const uint8_t want2[] = {0, 4, 192, 0, 2, 3, 0, 4, 192, 0, 2, 4};
    assert_memory_equal(r->rdata, want2, 12);
    r = find(t, "v4only.up.test.", WIRE_T_AAAA);
    assert_int_equal(r->state, ANAME_NODATA);
    assert_int_equal(r->ttl, 3);
    assert_int_equal(r->count, 0);
    r = find(t, "nope.up.test.", WIRE_T_AAAA);
    assert_int_equal(r->ttl, 3);
    /* cn2 -> cn (TTL 1) -> target: the chain's lowest TTL */
    r = find(t, "cn2.up.test.", WIRE_T_AAAA);
    assert_int_equal(r->ttl, 1);
    assert_true(has_addr(r, WIRE_T_AAAA, "2001:db8::1"));
    aname_results_release(t);
    t = wait_entry(&pubs, "cn2.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.1");
    assert_int_equal(find(t, "cn2.up.test.", WIRE_T_A)->ttl, 1);
    /* refused by the upstream: stays pending, and is counted as a failure */
    assert_int_equal(find(t, "other.invalid.", WIRE_T_A)->state, ANAME_PENDING);
    assert_int_equal(find(t, "other.invalid.", WIRE_T_AAAA)->state, ANAME_PENDING);
    aname_results_release(t);

    aname_stats_t st;
    aname_resolver_stats(res, &st);
    assert_int_equal(st.targets, 5);
    assert_int_equal(st.pending, 1);
    assert_true(st.failures >= 1);
    assert_true(st.queries >= 10);
    assert_true(st.changes >= 8);
    assert_true(st.publishes >= 1);
}

static void test_zone_change(void **state)
{
    (void)state;
    assert_non_null(res);
    write_zone(2, "192.0.2.99");
    knot_reload();
    /* within the TTL (2 s) and a refresh: the new address, directly and through the chain */
    aname_results_release(wait_entry(&pubs, "target.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.99"));
    aname_results_t *t = wait_entry(&pubs, "cn2.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.99");
    assert_int_equal(find(t, "cn2.up.test.", WIRE_T_A)->count, 1);
    aname_results_release(t);
}

static void test_upstream_down_and_back(void **state)
{
    (void)state;
    assert_non_null(res);
    aname_stats_t st0, st;
    aname_resolver_stats(res, &st0);
    knot_kill();
    /* failures are counted (the refused name counts too, so wait for more than it alone) */
    int64_t deadline = tu_now_ms() + PUB_WAIT_MS;
    do {
        tu_sleep_ms(50);
        aname_resolver_stats(res, &st);
        if (tu_now_ms() > deadline)
            fail_msg("no failures counted with the upstream down");
    } while (st.failures < st0.failures + 6);
    /* ... and the last good answers stay */
    aname_results_t *t = pubs_get(&pubs, NULL);
    assert_true(entry_is(t, "target.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.99"));
    assert_true(entry_is(t, "target.up.test.", WIRE_T_AAAA, ANAME_OK, "2001:db8::1"));
    assert_true(entry_is(t, "v4only.up.test.", WIRE_T_AAAA, ANAME_NODATA, NULL));
    assert_true(entry_is(t, "nope.up.test.", WIRE_T_A, ANAME_NXDOMAIN, NULL));
    assert_true(entry_is(t, "other.invalid.", WIRE_T_A, ANAME_PENDING, NULL));
    aname_results_release(t);
    assert_int_equal(st.targets, 5);
    assert_int_equal(st.pending, 1);

    /* back, with another address: it flows again (after the backoff of the failed queries) */
    write_zone(3, "192.0.2.77");
    knot_spawn();
    aname_results_release(wait_entry(&pubs, "target.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.77"));
    aname_results_release(wait_entry(&pubs, "cn2.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.77"));
}

static void test_set_targets(void **state)
{
    (void)state;
    assert_non_null(res);
    const char *names[] = {"target.up.test.", "late.up.test.", "late.up.test."};
    unsigned n0;
    aname_results_release(pubs_get(&pubs, &n0));
    set_targets(res, names, 3);
    /* published at once: the removed targets are gone, the kept one keeps its answer, the new
     * one is pending or already answered */
    int64_t deadline = tu_now_ms() + PUB_WAIT_MS;
    aname_results_t *t;
    for (;;) {
        unsigned n;
        t = pubs_get(&pubs, &n);
        if (n > n0 && aname_results_count(t) == 4)
            break;
        aname_results_release(t);
        if (tu_now_ms() > deadline)
            fail_msg("no table with the new set of targets");
        tu_sleep_ms(10);
    }
    assert_true(entry_is(t, "target.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.77"));
    assert_null(find(t, "nope.up.test.", WIRE_T_A));
    assert_null(find(t, "cn2.up.test.", WIRE_T_AAAA));
    assert_non_null(find(t, "late.up.test.", WIRE_T_A));
    aname_results_release(t);
    t = wait_entry(&pubs, "late.up.test.", WIRE_T_AAAA, ANAME_NODATA, NULL);
    assert_true(entry_is(t, "late.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.5") ||
                find(t, "late.up.test.", WIRE_T_A)->state == ANAME_PENDING);
    aname_results_release(t);
    aname_results_release(wait_entry(&pubs, "late.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.5"));
    aname_stats_t st;
    aname_resolver_stats(res, &st);
    assert_int_equal(st.targets, 2);
    assert_int_equal(st.pending, 0);

    /* the same set again changes nothing: no table for it */
    aname_results_release(pubs_get(&pubs, &n0));
    set_targets(res, names, 2);
    /* an empty set: an empty table */
    set_targets(res, NULL, 0);
    deadline = tu_now_ms() + PUB_WAIT_MS;
    for (;;) {
        t = pubs_get(&pubs, NULL);
        if (aname_results_count(t) == 0)
            break;
        aname_results_release(t);
        if (tu_now_ms() > deadline)
            fail_msg("no empty table after an empty set of targets");
        tu_sleep_ms(10);
    }
    aname_results_release(t);
    aname_resolver_stats(res, &st);
    assert_int_equal(st.targets, 0);

    /* an invalid name changes nothing */
    const uint8_t bad[] = {0xc0, 0x0c};
    const uint8_t *ptrs[] = {bad};
    assert_int_equal(aname_resolver_set_targets(res, ptrs, 1), TERN_EINVAL);

    aname_resolver_free(res);
    res = NULL;
    pubs_free(&pubs);
}

/* Failing over from an upstream nobody listens on to knotd over TCP; a resolver without any
 * upstream publishes pending entries and asks nothing. */
static void test_failover_tcp(void **state)
{
    (void)state;
    struct pubs p;
    pubs_init(&p);
    aname_resolver_t *r = aname_resolver_new(on_publish, &p);
    assert_non_null(r);
    aname_upstream_t ups[2] = {{.port = tu_free_port(), .timeout_ms = 200}, knot_upstream(true)};
    snprintf(ups[0].host, sizeof(ups[0].host), "127.0.0.1");
    aname_upstream_t bad = {.host = "not-an-address"};
    assert_int_equal(aname_resolver_configure(r, &bad, 1), TERN_EINVAL);
    assert_int_equal(aname_resolver_configure(r, ups, 2), 0);
    const char *names[] = {"target.up.test."};
    set_targets(r, names, 1);
    assert_int_equal(aname_resolver_start(r), 0);
    aname_results_release(wait_entry(&p, "target.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.77"));
    aname_results_release(wait_entry(&p, "target.up.test.", WIRE_T_AAAA, ANAME_OK, NULL));
    aname_stats_t st;
    aname_resolver_stats(r, &st);
    assert_int_equal(st.failures, 0); /* the second upstream answered each time */
    assert_true(st.queries >= 3);     /* the dead one was asked first, once at least */
    aname_resolver_free(r);
    pubs_free(&p);

    pubs_init(&p);
    r = aname_resolver_new(on_publish, &p);
    assert_non_null(r);
    set_targets(r, names, 1);
    assert_int_equal(aname_resolver_start(r), 0);
    aname_results_t *t = wait_entry(&p, "target.up.test.", WIRE_T_AAAA, ANAME_PENDING, NULL);
    assert_true(entry_is(t, "target.up.test.", WIRE_T_A, ANAME_PENDING, NULL));
    aname_results_release(t);
    aname_resolver_stats(r, &st);
    assert_int_equal(st.queries, 0);
    assert_int_equal(st.pending, 1);
    aname_resolver_free(r);
    pubs_free(&p);
    aname_resolver_free(NULL);
}

/* Wait (bounded) for a table marked complete (the first round in); the caller releases it. */
static aname_results_t *wait_complete(struct pubs *p)
{
    int64_t deadline = tu_now_ms() + PUB_WAIT_MS;
    for (;;) {
        aname_results_t *t = pubs_get(p, NULL);
        if (aname_results_complete(t))
            return t;
        aname_results_release(t);
        if (tu_now_ms() > deadline)
            fail_msg("no complete table within %d ms", PUB_WAIT_MS);
        tu_sleep_ms(20);
    }
}

/* A started resolver publishing into p (initialised here) for the n names, asking u (if not
 * NULL), keeping its results in path (if not NULL). */
static aname_resolver_t *start(struct pubs *p, const aname_upstream_t *u, const char *path,
                               uint32_t max_stale, const char *const *names, size_t n)
{
    pubs_init(p);
    aname_resolver_t *r = aname_resolver_new(on_publish, p);
    assert_non_null(r);
    if (u)
        assert_int_equal(aname_resolver_configure(r, u, 1), 0);
    assert_int_equal(aname_resolver_set_state(r, path, max_stale), 0);
    set_targets(r, names, n);
    assert_int_equal(aname_resolver_start(r), 0);
    return r;
}

/* The resolver's latest table marked complete has (name, A) in state (with addr, if given);
 * then the resolver is freed. */
static void complete_then_stop(aname_resolver_t *r, struct pubs *p, const char *name, int state,
                               const char *addr)
{
    aname_results_t *t = wait_complete(p);
    assert_true(entry_is(t, name, WIRE_T_A, state, addr));
    aname_results_release(t);
    aname_resolver_free(r);
    pubs_free(p);
}

/* (The earlier tests left target.up.test. at 192.0.2.77.) The first round: the table that says it
 * is complete has every target asked once, the one no upstream answers included; with no upstream
 * at all the first table is complete. */
static void test_first_round(void **state)
{
    (void)state;
    struct pubs p;
    aname_upstream_t u = knot_upstream(false);
    const char *names[] = {"target.up.test.", "other.invalid.", "v4only.up.test."};
    aname_resolver_t *r = start(&p, &u, NULL, 0, names, 3);
    aname_results_t *t = wait_complete(&p);
    assert_true(entry_is(t, "target.up.test.", WIRE_T_AAAA, ANAME_OK, "2001:db8::1"));
    assert_true(entry_is(t, "v4only.up.test.", WIRE_T_AAAA, ANAME_NODATA, NULL));
    assert_true(entry_is(t, "other.invalid.", WIRE_T_A, ANAME_PENDING, NULL));
    aname_results_release(t);
    complete_then_stop(r, &p, "target.up.test.", ANAME_OK, "192.0.2.77");

    r = start(&p, NULL, NULL, 0, names, 3);
    complete_then_stop(r, &p, "target.up.test.", ANAME_PENDING, NULL);
}

/* The state file: written once the first round is in; a resolver whose upstream is dead
 * publishes the saved answers before it asks anyone; max_stale 0 refuses one whose TTL ran out;
 * a name that becomes a target later gets its saved answer then; a bad file is ignored. */
static void test_state_file(void **state)
{
    (void)state;
    char dir[256], path[300], text[512];
    tu_mkdtemp(dir, sizeof(dir), "tern-aname-state");
    snprintf(path, sizeof(path), "%s/aname.state", dir);
    const char *names[] = {"target.up.test.", "v4only.up.test."};
    struct pubs p;
    aname_upstream_t u = knot_upstream(false);
    aname_resolver_t *r = start(&p, &u, path, 86400, names, 2);
    aname_results_release(wait_complete(&p));
    int64_t deadline = tu_now_ms() + PUB_WAIT_MS;
    while (access(path, F_OK) != 0) {
        if (tu_now_ms() > deadline)
            fail_msg("%s not written within %d ms", path, PUB_WAIT_MS);
        tu_sleep_ms(20);
    }
    aname_resolver_free(r);
    pubs_free(&p);

    /* upstream dead: the saved answers, at once, with at most their own TTL (2 s) or the stale
     * one (30 s); the failed round keeps them */
    aname_upstream_t dead = {.port = tu_free_port(), .timeout_ms = 200};
    snprintf(dead.host, sizeof(dead.host), "127.0.0.1");
    r = start(&p, &dead, path, 86400, names, 2);
    aname_results_t *t = wait_entry(&p, "target.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.77");
    const aname_result_t *x = find(t, "target.up.test.", WIRE_T_A);
    assert_true(x->ttl >= 1 && (x->ttl <= 2 || x->ttl == 30));
    assert_true(entry_is(t, "v4only.up.test.", WIRE_T_AAAA, ANAME_NODATA, NULL));
    aname_results_release(t);
    complete_then_stop(r, &p, "target.up.test.", ANAME_OK, "192.0.2.77");

    /* a saved answer an hour past its TTL: refused with max_stale 0, served (TTL 30) with an
     * hour and a bit */
    snprintf(text, sizeof(text),
             "tern-aname-state 1\ntarget.up.test. A ok 2 %lld 192.0.2.9\nend 1\n",
             (long long)time(NULL) - 3600);
    tu_write_file(dir, "aname.state", text);
    r = start(&p, &dead, path, 0, names, 1);
    complete_then_stop(r, &p, "target.up.test.", ANAME_PENDING, NULL);
    r = start(&p, &dead, path, 3700, names, 1);
    t = wait_complete(&p);
    assert_int_equal(find(t, "target.up.test.", WIRE_T_A)->ttl, 30);
    aname_results_release(t);
    complete_then_stop(r, &p, "target.up.test.", ANAME_OK, "192.0.2.9");

    /* a name that becomes a target only after the start (a zone from Redis): its saved answer */
    snprintf(text, sizeof(text),
             "tern-aname-state 1\nlate.up.test. A ok 60 %lld 192.0.2.8\n"
             "target.up.test. A ok 60 %lld 192.0.2.9\nend 2\n",
             (long long)time(NULL), (long long)time(NULL));
    tu_write_file(dir, "aname.state", text);
    r = start(&p, &dead, path, 0, names, 1);
    aname_results_release(wait_complete(&p));
    const char *later[] = {"target.up.test.", "late.up.test."};
    set_targets(r, later, 2);
    t = wait_entry(&p, "late.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.8");
    assert_true(entry_is(t, "target.up.test.", WIRE_T_A, ANAME_OK, "192.0.2.9"));
    aname_results_release(t);
    aname_resolver_free(r);
    pubs_free(&p);

    /* cut short (no end line): ignored whole */
    snprintf(text, sizeof(text), "tern-aname-state 1\ntarget.up.test. A ok 2 %lld 192.0.2.9\n",
             (long long)time(NULL));
    tu_write_file(dir, "aname.state", text);
    r = start(&p, &dead, path, 86400, names, 1);
    complete_then_stop(r, &p, "target.up.test.", ANAME_PENDING, NULL);
    tu_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_states),
        cmocka_unit_test(test_zone_change),
        cmocka_unit_test(test_upstream_down_and_back),
        cmocka_unit_test(test_set_targets),
        cmocka_unit_test(test_failover_tcp),
        cmocka_unit_test(test_first_round),
        cmocka_unit_test(test_state_file),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
