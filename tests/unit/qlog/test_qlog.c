/*
 * Unit tests for the query log's rings and writer thread (src/qlog/qlog.c), through the request
 * log as the sink (one line per record): a ring that fills drops and counts and never blocks;
 * once the writer runs every committed record becomes a line, including the ones that waited;
 * 1 in N sampling; zone exclusions; two producer threads against the writer (the TSan build
 * runs this too); and not one allocation in qlog_worker_put().
 */
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/common/mem.h"
#include "tern/conf/config.h"
#include "tern/qlog/qlog.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone.h"

static char dir[] = "/tmp/tern-qlog-XXXXXX";
static char path[256];

/* A query for www.example.test./A and a response header: real enough for the request log. */
static const uint8_t query[] = {0x12, 0x34, 0x01, 0x00, 0,   1,   0,   0,   0,   0,   0,   0,
                                3,    'w',  'w',  'w',  7,   'e', 'x', 'a', 'm', 'p', 'l', 'e',
                                4,    't',  'e',  's',  't', 0,   0,   1,   0,   1};
static uint8_t response[sizeof(query)];

static answer_ctx_t actx; /* large: not on the stack */

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    memcpy(response, query, sizeof(query));
    response[2] |= 0x84; /* QR, AA */
    actx.info.outcome = ANSWER_SENT;
    actx.info.rcode = 0;
    actx.info.qtype = 1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    (void)rmdir(dir);
    return 0;
}

/* A config with the JSON request log at a fresh path. */
static void config_for(config_t *c, const char *name, unsigned sample, unsigned ring_kib)
{
    config_init(c);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    c->qlog.enabled = true;
    c->qlog.requests = true;
    c->qlog.requests_target = CONFIG_REQLOG_FILE;
    c->qlog.requests_format = CONFIG_REQLOG_JSON;
    c->qlog.requests_path = strdup(path);
    c->qlog.sample = sample;
    c->qlog.ring_kib = ring_kib;
}

static size_t lines_in(const char *p)
{
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    size_t n = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

static void put(qlog_t *q, qlog_ring_t *r)
{
    struct sockaddr_in client = {.sin_family = AF_INET, .sin_port = htons(5300)};
    client.sin_addr.s_addr = htonl(0xC0000201);
    const qlog_query_t qq = {.client = (const struct sockaddr *)&client,
                             .server = NULL,
                             .qtime_ns = 1,
                             .query = query,
                             .qlen = sizeof(query),
                             .response = response,
                             .rlen = sizeof(response)};
    qlog_worker_put(q, r, &actx, &qq);
}

/* Wait (bounded) until the file has want lines. */
static size_t wait_lines(const char *p, size_t want)
{
    size_t n = 0;
    for (int i = 0; i < 400 && (n = lines_in(p)) < want; i++)
        usleep(10000);
    return n;
}

static void test_full_ring_drops_then_drains(void **state)
{
    (void)state;
    config_t c;
    config_for(&c, "full.log", 1, 64);
    char err[512];
    qlog_t *q = qlog_new(&c.qlog, 1, err, sizeof(err));
    assert_non_null(q);
    qlog_ring_t *r = qlog_ring(q, 0);
    /* no writer yet: 64 KiB hold a few hundred records; the rest are refused at once */
    for (int i = 0; i < 5000; i++)
        put(q, r);
    qlog_stats_t st;
    qlog_stats(q, &st);
    assert_true(st.records > 100);
    assert_true(st.dropped > 0);
    assert_int_equal(st.records + st.dropped, 5000);
    assert_int_equal(qlog_start(q), 0);
    assert_int_equal(wait_lines(path, st.records), st.records);
    /* room again: every new record is taken */
    for (int i = 0; i < 100; i++)
        put(q, r);
    uint64_t before = st.dropped;
    qlog_stats(q, &st);
    assert_int_equal(st.dropped, before);
    qlog_free(q); /* drains and flushes */
    assert_int_equal(lines_in(path), st.records);
    (void)unlink(path);
    config_free(&c);
}

static void test_sampling_and_exclusions(void **state)
{
    (void)state;
    config_t c;
    config_for(&c, "sample.log", 3, 64);
    c.qlog.exclude_zones = calloc(1, sizeof(char *));
    c.qlog.exclude_zones[0] = strdup("quiet.test");
    c.qlog.nexclude_zones = 1;
    char err[512];
    qlog_t *q = qlog_new(&c.qlog, 1, err, sizeof(err));
    assert_non_null(q);
    qlog_ring_t *r = qlog_ring(q, 0);
    for (int i = 0; i < 300; i++)
        put(q, r);
    /* the answer came from an excluded zone: nothing, sampled or not */
    static const uint8_t quiet[] = {5, 'q', 'u', 'i', 'e', 't', 4, 't', 'e', 's', 't', 0};
    zone_t z = {.apex = quiet, .apex_len = sizeof(quiet), .hash = dname_hash(quiet)};
    actx.info.zone = &z;
    for (int i = 0; i < 300; i++)
        put(q, r);
    actx.info.zone = NULL;
    qlog_stats_t st;
    qlog_stats(q, &st);
    assert_int_equal(st.records, 100);
    assert_int_equal(st.dropped, 0);
    qlog_free(q);
    assert_int_equal(lines_in(path), 100);
    (void)unlink(path);
    config_free(&c);
}

struct producer {
    qlog_t *q;
    qlog_ring_t *r;
    answer_ctx_t *ctx;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    struct sockaddr_in6 client = {.sin6_family = AF_INET6, .sin6_port = htons(5301)};
    const qlog_query_t qq = {.client = (const struct sockaddr *)&client,
                             .tcp = true,
                             .qtime_ns = 2,
                             .query = query,
                             .qlen = sizeof(query),
                             .response = response,
                             .rlen = sizeof(response)};
    for (int i = 0; i < 20000; i++) {
        qlog_worker_put(p->q, p->r, p->ctx, &qq);
        if (i % 1000 == 999)
            usleep(1000); /* let the writer keep up most of the time */
    }
    return NULL;
}

static void test_two_workers_and_the_writer(void **state)
{
    (void)state;
    config_t c;
    config_for(&c, "threads.log", 1, 256);
    char err[512];
    qlog_t *q = qlog_new(&c.qlog, 2, err, sizeof(err));
    assert_non_null(q);
    assert_int_equal(qlog_start(q), 0);
    static answer_ctx_t ctx2;
    ctx2.info = actx.info;
    struct producer p[2] = {{q, qlog_ring(q, 0), &actx}, {q, qlog_ring(q, 1), &ctx2}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, produce, &p[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    qlog_stats_t st;
    qlog_stats(q, &st);
    assert_int_equal(st.records + st.dropped, 40000);
    qlog_free(q);
    assert_int_equal(lines_in(path), st.records);
    (void)unlink(path);
    config_free(&c);
}

static void test_no_allocation_per_record(void **state)
{
    (void)state;
    const uint64_t *a, *d;
    if (mem_thread_counters(&a, &d) < 0)
        skip(); /* neither jemalloc nor ASan: nothing counts */
    config_t c;
    config_for(&c, "alloc.log", 1, 1024);
    char err[512];
    qlog_t *q = qlog_new(&c.qlog, 1, err, sizeof(err));
    assert_non_null(q);
    qlog_ring_t *r = qlog_ring(q, 0);
    put(q, r); /* first use */
    uint64_t a0 = *a, d0 = *d;
    for (int i = 0; i < 2000; i++)
        put(q, r);
    assert_int_equal(*a, a0);
    assert_int_equal(*d, d0);
    qlog_free(q);
    (void)unlink(path);
    config_free(&c);
}

/* The record a count-single RRset picked (answer_info_t.pick, as select.c leaves it) goes
 * through the ring into the line as redins' destination_ip and destination_country. */
static void test_pick_reaches_the_line(void **state)
{
    (void)state;
    config_t c;
    config_for(&c, "pick.log", 1, 256);
    char err[512];
    qlog_t *q = qlog_new(&c.qlog, 1, err, sizeof(err));
    assert_non_null(q);
    static const uint8_t rdata[] = {0, 4, 192, 0, 2, 99, 0, 4, 203, 0, 113, 7};
    static const uint16_t countries[] = {ZONE_CC('D', 'E'), 0};
    const zone_geo_rr_t pick = {.off = 6, .ncountries = 2, .countries = countries};
    actx.info.pick = &pick;
    actx.info.pick_rdata = rdata;
    put(q, qlog_ring(q, 0));
    actx.info.pick = NULL;
    actx.info.pick_rdata = NULL;
    put(q, qlog_ring(q, 0));
    qlog_free(q); /* never started: the rings are drained here */
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    assert_non_null(fgets(line, sizeof(line), f));
    assert_non_null(strstr(line, "\"destination_country\":[\"DE\",\"\"],"
                                 "\"destination_ip\":\"203.0.113.7\","));
    assert_non_null(fgets(line, sizeof(line), f)); /* no pick, no destination */
    assert_null(strstr(line, "destination_"));
    fclose(f);
    (void)unlink(path);
    config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_ring_drops_then_drains),
        cmocka_unit_test(test_sampling_and_exclusions),
        cmocka_unit_test(test_two_workers_and_the_writer),
        cmocka_unit_test(test_no_allocation_per_record),
        cmocka_unit_test(test_pick_reaches_the_line),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
