/*
 * test_supervisor.c — the supervisor (tern/load/supervisor.h): starts in the order added and
 * stops at the first failure; stops every service added, started or not, by rank and in the
 * order added within a rank; a stop past its deadline is waited for (and logged), never skipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/load/supervisor.h"

static char trace[64]; /* "s<name>" for a start, "x<name>" for a stop */

static void note(char what, const char *name)
{
    size_t n = strlen(trace);
    trace[n] = what;
    trace[n + 1] = name[0];
    trace[n + 2] = '\0';
}

static int start_ok(void *ctx)
{
    note('s', ctx);
    return 0;
}

static int start_fails(void *ctx)
{
    note('s', ctx);
    return TERN_EINVAL;
}

static void stop(void *ctx)
{
    note('x', ctx);
}

static void stop_slow(void *ctx)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 150 * 1000000};
    nanosleep(&ts, NULL);
    note('x', ctx);
}

static void add(supervisor_t *sv, const char *name, int (*st)(void *), void (*sp)(void *),
                supervisor_rank_t rank, uint32_t deadline_ms)
{
    const supervisor_service_t s = {.name = name,
                                    .start = st,
                                    .stop = sp,
                                    .ctx = (void *)name,
                                    .rank = rank,
                                    .deadline_ms = deadline_ms};
    assert_int_equal(supervisor_add(sv, &s), 0);
}

static void test_order(void **state)
{
    (void)state;
    trace[0] = '\0';
    supervisor_t *sv = supervisor_new();
    assert_non_null(sv);
    add(sv, "workers", start_ok, stop, SUPERVISOR_WORKERS, 0);
    add(sv, "xfr", start_ok, stop, SUPERVISOR_XFR, 0);
    add(sv, "qlog", start_ok, stop, SUPERVISOR_QLOG, 0);
    add(sv, "loader", start_ok, stop, SUPERVISOR_LOADER, 0);
    add(sv, "health", NULL, stop, SUPERVISOR_HEALTH, 0);
    add(sv, "ctl", start_ok, stop, SUPERVISOR_CTL, 0);
    add(sv, "metrics", NULL, stop, SUPERVISOR_METRICS, 0);
    assert_int_equal(supervisor_start(sv), 0);
    assert_string_equal(trace, "swsxsqslsc");
    trace[0] = '\0';
    supervisor_stop(sv);
    /* ctl, metrics, loader, health, xfr, workers, qlog */
    assert_string_equal(trace, "xcxmxlxhxxxwxq");
    trace[0] = '\0';
    supervisor_stop(sv); /* idempotent */
    assert_string_equal(trace, "");
    supervisor_free(sv);
}

static void test_start_failure(void **state)
{
    (void)state;
    trace[0] = '\0';
    supervisor_t *sv = supervisor_new();
    add(sv, "a", start_ok, stop, SUPERVISOR_WORKERS, 0);
    add(sv, "b", start_fails, stop, SUPERVISOR_XFR, 0);
    add(sv, "c", start_ok, stop, SUPERVISOR_LOADER, 0);
    assert_int_equal(supervisor_start(sv), TERN_EINVAL);
    assert_string_equal(trace, "sasb"); /* c never starts */
    trace[0] = '\0';
    supervisor_free(sv); /* every service added is stopped, started or not */
    assert_string_equal(trace, "xcxbxa");
}

static void test_deadline(void **state)
{
    (void)state;
    trace[0] = '\0';
    supervisor_t *sv = supervisor_new();
    add(sv, "slow", NULL, stop_slow, SUPERVISOR_LOADER, 20); /* logged, waited for */
    add(sv, "next", NULL, stop, SUPERVISOR_WORKERS, 0);
    supervisor_free(sv);
    assert_string_equal(trace, "xsxn");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_start_failure),
        cmocka_unit_test(test_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
