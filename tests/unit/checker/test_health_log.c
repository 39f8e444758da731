/*
 * test_health_log.c — the health result log (src/checker/health_log.c): redins' healthcheck
 * line (handler/healthcheck.go, logHealthcheck(), through its logger), field by field and type
 * by type, tern's fields beside them, the text form, and a reader that stalls: lines are
 * dropped, never waited for.
 */
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "health_log.h"

static const health_log_line_t down = {.ip = "192.0.2.7",
                                       .port = 8080,
                                       .host = "www.example.test",
                                       .uri = "/health",
                                       .protocol = "http",
                                       .describe = "http://www.example.test:8080/health@192.0.2.7",
                                       .status = -3,
                                       .state = "down",
                                       .ok = false,
                                       .error = "HTTP status 500",
                                       .latency_us = 1500,
                                       .wall_ms = 1764129906123};

/* What a log to a fresh pipe writes for line r (one line, NUL-terminated, newline cut). */
static void one_line(const health_log_line_t *r, bool json, char *out, size_t len)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    int saved = dup(STDOUT_FILENO);
    assert_true(dup2(p[1], STDOUT_FILENO) >= 0);
    health_log_t *l = health_log_open(NULL, STDOUT_FILENO, json);
    assert_non_null(l);
    assert_true(health_log_put(l, r));
    assert_int_equal(health_log_close(l), 0);
    assert_true(dup2(saved, STDOUT_FILENO) >= 0);
    close(saved);
    close(p[1]);
    ssize_t n = read(p[0], out, len - 1);
    close(p[0]);
    assert_true(n > 0);
    out[n] = '\0';
    assert_non_null(strchr(out, '\n'));
    assert_ptr_equal(strchr(out, '\n'), out + n - 1);
    out[n - 1] = '\0';
}

static void test_json_fields(void **state)
{
    (void)state;
    char line[4096];
    one_line(&down, true, line, sizeof(line));
    json_error_t e;
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &e);
    assert_non_null(o);
    /* redins': its logger's, then logHealthcheck()'s */
    assert_true(json_is_string(json_object_get(o, "time")));
    assert_string_equal(json_string_value(json_object_get(o, "level")), "info");
    assert_string_equal(json_string_value(json_object_get(o, "msg")), "dns healthcheck");
    assert_string_equal(json_string_value(json_object_get(o, "log_type")), "healthcheck");
    assert_string_equal(json_string_value(json_object_get(o, "ip")), "192.0.2.7");
    assert_true(json_is_integer(json_object_get(o, "port")));
    assert_int_equal(json_integer_value(json_object_get(o, "port")), 8080);
    assert_string_equal(json_string_value(json_object_get(o, "host")), "www.example.test");
    assert_string_equal(json_string_value(json_object_get(o, "domain_uuid")), "");
    assert_string_equal(json_string_value(json_object_get(o, "uri")), "/health");
    assert_true(json_is_integer(json_object_get(o, "status")));
    assert_int_equal(json_integer_value(json_object_get(o, "status")), -3);
    assert_string_equal(json_string_value(json_object_get(o, "error")), "HTTP status 500");
    /* tern's */
    assert_string_equal(json_string_value(json_object_get(o, "protocol")), "http");
    assert_string_equal(json_string_value(json_object_get(o, "state")), "down");
    assert_true(json_is_false(json_object_get(o, "ok")));
    assert_true(json_is_real(json_object_get(o, "latency_ms")));
    assert_int_equal(json_object_size(o), 15);
    json_decref(o);

    /* a passing check: error "" (redins writes it always) */
    health_log_line_t up = down;
    up.ok = true;
    up.status = 2;
    up.state = "up";
    one_line(&up, true, line, sizeof(line));
    o = json_loads(line, 0, &e);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "error")), "");
    assert_true(json_is_true(json_object_get(o, "ok")));
    json_decref(o);
}

static void test_text(void **state)
{
    (void)state;
    char line[4096];
    one_line(&down, false, line, sizeof(line));
    assert_non_null(strstr(line, " healthcheck http://www.example.test:8080/health@192.0.2.7 "
                                 "status -3 down 1.500 ms error: HTTP status 500"));
}

/* A reader that stalls (a pipe nobody reads): put and flush never wait, lines beyond the
 * buffer are dropped (the caller counts them), close gives up after its bound. A blocking
 * write would hang here, and ctest's timeout fail the test. */
static void test_stalled_reader(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    (void)fcntl(p[1], F_SETPIPE_SZ, 4096);
    int saved = dup(STDERR_FILENO);
    assert_true(dup2(p[1], STDERR_FILENO) >= 0);
    health_log_t *l = health_log_open(NULL, STDERR_FILENO, true);
    assert_non_null(l);
    unsigned dropped = 0;
    for (int i = 0; i < 1000; i++) {
        dropped += !health_log_put(l, &down);
        assert_int_equal(health_log_flush(l), 0);
    }
    uint64_t lost = health_log_close(l);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    close(p[1]);
    assert_true(dropped > 500);
    assert_true(lost > 0);
    /* what went out is whole lines */
    char buf[8192];
    ssize_t n = read(p[0], buf, sizeof(buf));
    close(p[0]);
    assert_true(n > 0);
    assert_int_equal(buf[n - 1], '\n');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_fields),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_stalled_reader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
