/*
 * test_log.c — levels, targets and whole lines: stderr (or stdout) is swapped for a pipe while
 * a test logs, then the pipe is read back.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/common/log.h"
#include "test_util.h"

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
    log_set_target(LOG_TARGET_SYSLOG); /* twice: no second socket */
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

/* The syslog target to a socket of our own at /dev/log (a mount namespace with a tmpfs on /dev:
 * root only, as CI runs): one datagram per message in syslog(3)'s form, and a reader that stops
 * reading costs messages (dropped, counted), never a wait. */
static int syslog_child(int s)
{
    log_set_target(LOG_TARGET_SYSLOG);
    log_err("to syslog %d", 7);
    char msg[512], want[64];
    ssize_t n = recv(s, msg, sizeof(msg) - 1, 0);
    if (n <= 0)
        return 12;
    msg[n] = '\0';
    /* "<27>Dec  6 07:16:37 ternd[pid]: to syslog 7": LOG_DAEMON | LOG_ERR */
    snprintf(want, sizeof(want), " ternd[%d]: to syslog 7", (int)getpid());
    if (strncmp(msg, "<27>", 4) != 0 || !strstr(msg, want) || strchr(msg, '\n'))
        return 13;
    uint64_t before = log_dropped_lines();
    for (int i = 0; i < 5000; i++)
        log_info("nobody reads %04d", i);
    return log_dropped_lines() > before ? 0 : 14;
}

static void test_syslog_socket(void **state)
{
    (void)state;
    tu_with_fake_dev_log(syslog_child);
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

/* A pipe of one page whose reader does not read, filled to the brim. */
static void full_pipe(int p[2])
{
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    (void)fcntl(p[1], F_SETPIPE_SZ, 4096);
    assert_int_equal(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
    char junk[512];
    memset(junk, 'x', sizeof(junk));
    junk[sizeof(junk) - 1] = '\n';
    while (write(p[1], junk, sizeof(junk)) > 0)
        ;
    /* the log must not rely on the shared description being non-blocking */
    assert_int_equal(fcntl(p[1], F_SETFL, 0), 0);
}

/* stderr is a pipe nobody reads (a stuck journal): logging returns at once, the lines wait in
 * the backlog and reach the reader, in order, when it reads; past the backlog they are dropped
 * and counted. A blocking write would hang here (and ctest's timeout fail the test). */
static void test_stalled_reader(void **state)
{
    (void)state;
    int p[2];
    full_pipe(p);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(p[1], STDERR_FILENO) >= 0);
    uint64_t before = log_dropped_lines();
    for (int i = 0; i < 100; i++)
        log_info("kept %03d", i);
    assert_int_equal(log_dropped_lines(), before); /* 100 short lines fit the backlog */
    char pad[200];
    memset(pad, 'p', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    for (int i = 0; i < 1000; i++) /* some 210 KiB: more than the 64 KiB backlog */
        log_info("overflow %04d %s", i, pad);
    assert_true(log_dropped_lines() > before);

    /* the reader wakes up: the kept lines arrive, whole and in order */
    static char text[1 << 20];
    size_t len = 0;
    for (int tries = 0; tries < 100 && !strstr(text, "kept 099\n"); tries++) {
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        if (poll(&pf, 1, 100) != 1)
            continue;
        ssize_t n = read(p[0], text + len, sizeof(text) - 1 - len);
        if (n > 0)
            len += (size_t)n;
        text[len] = '\0';
    }
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    const char *k0 = strstr(text, "ternd: info: kept 000\n");
    const char *k99 = strstr(text, "ternd: info: kept 099\n");
    assert_non_null(k0);
    assert_non_null(k99);
    assert_true(k0 < k99);
    /* what is left in the backlog goes to the new stderr's reader or is dropped: read the pipe
     * empty so the flusher is not left waiting on it */
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    for (int quiet = 0; quiet < 3;) {
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        if (poll(&pf, 1, 100) != 1 || read(p[0], text, sizeof(text)) <= 0)
            quiet++;
    }
    close(p[0]);
    close(p[1]);
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
        cmocka_unit_test_setup_teardown(test_syslog_socket, reset, reset),
        cmocka_unit_test_setup_teardown(test_threads, reset, reset),
        cmocka_unit_test_setup_teardown(test_escape, reset, reset),
        cmocka_unit_test_setup_teardown(test_stalled_reader, reset, reset), /* last: see it */
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
