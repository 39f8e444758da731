/*
 * test_log.c — levels, targets and whole lines: stderr (or stdout) is swapped for a pipe while
 * a test logs, then the pipe is read back.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/common/log.h"

/* What was written to fd while capturing. */
typedef struct capture {
    int fd;    /* STDERR_FILENO or STDOUT_FILENO */
    int saved; /* the original fd */
    int pipe[2];
    char text[65536];
    size_t len;
} capture_t;

static void capture_start(capture_t *c, int fd)
{
    c->fd = fd;
    c->len = 0;
    assert_int_equal(pipe2(c->pipe, O_NONBLOCK | O_CLOEXEC), 0);
    /* every test here writes less than the default 64 KiB pipe buffer */
    c->saved = dup(fd);
    assert_true(c->saved >= 0);
    assert_true(dup2(c->pipe[1], fd) >= 0);
}

static const char *capture_end(capture_t *c)
{
    assert_true(dup2(c->saved, c->fd) >= 0);
    close(c->saved);
    close(c->pipe[1]);
    ssize_t n;
    while (c->len < sizeof(c->text) - 1 &&
           (n = read(c->pipe[0], c->text + c->len, sizeof(c->text) - 1 - c->len)) > 0)
        c->len += (size_t)n;
    c->text[c->len] = '\0';
    close(c->pipe[0]);
    return c->text;
}

static int reset(void **state)
{
    (void)state;
    log_set_level(LOG_LVL_INFO);
    log_set_target(LOG_TARGET_STDERR);
    return 0;
}

static void test_default_level(void **state)
{
    (void)state;
    static capture_t c;
    assert_int_equal(log_get_level(), LOG_LVL_INFO);
    assert_int_equal(log_get_target(), LOG_TARGET_STDERR);
    capture_start(&c, STDERR_FILENO);
    log_debug("hidden %d", 1);
    log_info("shown %d", 2);
    log_warn("careful");
    log_err("broken: %s", "disk");
    const char *out = capture_end(&c);
    assert_string_equal(out, "ternd: info: shown 2\n"
                             "ternd: warning: careful\n"
                             "ternd: error: broken: disk\n");
}

static void test_set_level(void **state)
{
    (void)state;
    static capture_t c;
    log_set_level(LOG_LVL_ERR);
    assert_int_equal(log_get_level(), LOG_LVL_ERR);
    capture_start(&c, STDERR_FILENO);
    log_debug("d");
    log_info("i");
    log_warn("w");
    log_err("e");
    assert_string_equal(capture_end(&c), "ternd: error: e\n");

    log_set_level(LOG_LVL_DEBUG);
    capture_start(&c, STDERR_FILENO);
    log_debug("d");
    log_info("i");
    log_msg(LOG_LVL_WARN, "%s", "w");
    assert_string_equal(capture_end(&c), "ternd: debug: d\nternd: info: i\nternd: warning: w\n");

    log_set_level(LOG_LVL_WARN);
    capture_start(&c, STDERR_FILENO);
    log_info("i");
    log_warn("w");
    /* a level outside the enum counts as debug, not as an index out of bounds */
    log_msg((log_level_t)9, "odd");
    assert_string_equal(capture_end(&c), "ternd: warning: w\n");
}

/* A message longer than a line is cut, still one line ending in a newline. */
static void test_long_message(void **state)
{
    (void)state;
    static capture_t c;
    static char big[5000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    capture_start(&c, STDERR_FILENO);
    log_info("%s", big);
    log_info("after");
    const char *out = capture_end(&c);
    const char *nl = strchr(out, '\n');
    assert_non_null(nl);
    assert_int_equal(nl - out + 1, 2047);
    assert_true(strncmp(out, "ternd: info: xxx", 16) == 0);
    assert_string_equal(nl + 1, "ternd: info: after\n");
}

/* A name holding a newline (a Redis set member can) must not forge a second line. */
static void test_control_characters_escaped(void **state)
{
    (void)state;
    static capture_t c;
    capture_start(&c, STDERR_FILENO);
    log_err("zone %s: bad", "evil.\nternd: info: reload ok\r\t\x7f");
    assert_string_equal(
        capture_end(&c),
        "ternd: error: zone evil.\\010ternd: info: reload ok\\013\\009\\127: bad\n");
}

static void test_parse(void **state)
{
    (void)state;
    log_level_t level = LOG_LVL_INFO;
    static const char *const levels[] = {"error", "warning", "info", "debug"};
    for (int i = 0; i < LOG_LVL_COUNT; i++) {
        assert_int_equal(log_parse_level(levels[i], &level), 0);
        assert_int_equal(level, i);
        assert_string_equal(log_level_names[i], levels[i]);
    }
    level = LOG_LVL_WARN;
    assert_int_equal(log_parse_level("warn", &level), TERN_EINVAL);
    assert_int_equal(log_parse_level("INFO", &level), TERN_EINVAL);
    assert_int_equal(log_parse_level("", &level), TERN_EINVAL);
    assert_int_equal(level, LOG_LVL_WARN);

    log_target_t target = LOG_TARGET_STDERR;
    assert_int_equal(log_parse_target("syslog", &target), 0);
    assert_int_equal(target, LOG_TARGET_SYSLOG);
    assert_int_equal(log_parse_target("stdout", &target), 0);
    assert_int_equal(target, LOG_TARGET_STDOUT);
    assert_int_equal(log_parse_target("stderr", &target), 0);
    assert_int_equal(target, LOG_TARGET_STDERR);
    assert_int_equal(log_parse_target("file", &target), TERN_EINVAL);
    assert_int_equal(target, LOG_TARGET_STDERR);
    for (int i = 0; i < LOG_TARGET_COUNT; i++) {
        assert_int_equal(log_parse_target(log_target_names[i], &target), 0);
        assert_int_equal(target, i);
    }
}

static void test_target_stdout(void **state)
{
    (void)state;
    static capture_t out, err;
    fflush(stdout);
    log_set_target(LOG_TARGET_STDOUT);
    assert_int_equal(log_get_target(), LOG_TARGET_STDOUT);
    capture_start(&err, STDERR_FILENO);
    capture_start(&out, STDOUT_FILENO);
    log_warn("to stdout");
    log_debug("hidden");
    capture_end(&out);
    capture_end(&err);
    assert_string_equal(out.text, "ternd: warning: to stdout\n");
    assert_string_equal(err.text, "");
}

/* Syslog's output is not ours to read; what matters is that nothing reaches stderr and that
 * switching back restores it. */
static void test_target_syslog(void **state)
{
    (void)state;
    static capture_t c;
    log_set_target(LOG_TARGET_SYSLOG);
    log_set_target(LOG_TARGET_SYSLOG); /* twice: no second openlog */
    assert_int_equal(log_get_target(), LOG_TARGET_SYSLOG);
    capture_start(&c, STDERR_FILENO);
    log_err("test_log: to syslog, not stderr");
    log_debug("test_log: dropped by level");
    assert_string_equal(capture_end(&c), "");

    log_set_target(LOG_TARGET_STDERR);
    capture_start(&c, STDERR_FILENO);
    log_err("back");
    assert_string_equal(capture_end(&c), "ternd: error: back\n");
}

#define THREADS 4
#define LINES   100

static void *writer(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < LINES; i++)
        log_info("thread %d line %03d %s", t, i, "padding-padding-padding");
    return NULL;
}

/* Lines from concurrent threads never interleave: each is one write(2). */
static void test_threads(void **state)
{
    (void)state;
    static capture_t c;
    pthread_t th[THREADS];
    capture_start(&c, STDERR_FILENO);
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, writer, (void *)(intptr_t)t), 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    capture_end(&c);
    int next[THREADS] = {0};
    size_t lines = 0;
    for (char *line = strtok(c.text, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        int t, i;
        char pad[32];
        if (sscanf(line, "ternd: info: thread %d line %d %31s", &t, &i, pad) != 3 || t < 0 ||
            t >= THREADS || strcmp(pad, "padding-padding-padding") != 0)
            fail_msg("mangled line '%s'", line);
        assert_int_equal(i, next[t]); /* one thread's lines stay in order */
        next[t]++;
    }
    assert_int_equal(lines, THREADS * LINES);
}

/* Untrusted text in a log line: one line whatever it holds, and readable back. */
static void test_escape(void **state)
{
    (void)state;
    char out[TERN_ESCAPE_MAX(64)];
    static const char forged[] = "a.test.\nternd: error: forged\r\x1b[2J\"q\"\\\xff";
    assert_string_equal(tern_escape(out, sizeof(out), forged, sizeof(forged) - 1),
                        "a.test.\\010ternd: error: forged\\013\\027[2J\\\"q\\\"\\\\\\255");
    /* a NUL inside is shown, not an end */
    assert_string_equal(tern_escape(out, sizeof(out), "a\0b", 3), "a\\000b");
    assert_string_equal(tern_escape(out, sizeof(out), "", 0), "");
    /* too long: cut at a whole escape, and says so */
    char small[10];
    assert_string_equal(tern_escape(small, sizeof(small), "abcdefghijkl", 12), "abcdef...");
    assert_string_equal(tern_escape(small, sizeof(small), "abcde\nfgh", 9), "abcde...");
    assert_string_equal(tern_escape(small, sizeof(small), "abcdefghi", 9), "abcdefghi");
    assert_string_equal(tern_escape(small, 1, "abc", 3), "");
    /* through a log line: still one line */
    capture_t c;
    capture_start(&c, STDERR_FILENO);
    char esc[TERN_ESCAPE_MAX(sizeof(forged))];
    log_err("zone %s: skipped", tern_escape(esc, sizeof(esc), forged, sizeof(forged) - 1));
    const char *text = capture_end(&c);
    assert_non_null(strchr(text, '\n'));
    assert_ptr_equal(strchr(text, '\n'), text + strlen(text) - 1);
    assert_null(strchr(text, '\r'));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_default_level, reset, reset),
        cmocka_unit_test_setup_teardown(test_set_level, reset, reset),
        cmocka_unit_test_setup_teardown(test_long_message, reset, reset),
        cmocka_unit_test_setup_teardown(test_parse, reset, reset),
        cmocka_unit_test_setup_teardown(test_control_characters_escaped, reset, reset),
        cmocka_unit_test_setup_teardown(test_target_stdout, reset, reset),
        cmocka_unit_test_setup_teardown(test_target_syslog, reset, reset),
        cmocka_unit_test_setup_teardown(test_threads, reset, reset),
        cmocka_unit_test_setup_teardown(test_escape, reset, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
