/*
 * test_ctl_cmd.c — the control socket's commands (ctl_cmd.c) without a socket: what one request
 * line answers, with no loader or server behind it (the "tests" case of ctl_start()), and how a
 * response line keeps control characters out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl_int.h"

/* The response to line, as text (the caller frees it). */
static char *ask(const char *line)
{
    ctl_t *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    c->workers = 3;
    char buf[CTL_MAX_REQUEST + 1];
    snprintf(buf, sizeof(buf), "%s", line);
    sb_t resp = SB_INIT;
    ctl_cmd_dispatch(c, buf, &resp);
    assert_false(resp.failed);
    assert_non_null(resp.p);
    char *out = strdup(resp.p);
    tern_buf_free(&resp);
    free(c);
    return out;
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *request, *answer;
    } cases[] = {
        {"", "error: empty request (commands: reload, status, stats, zone NAME, health)\n"},
        {" \t ", "error: empty request (commands: reload, status, stats, zone NAME, health)\n"},
        {"bogus", "error: unknown command 'bogus' (commands: reload, status, stats, zone NAME, "
                  "health)\n"},
        {"status now", "error: usage: status\n"},
        {"zone", "error: usage: zone NAME | zone flush NAME\n"},
        {"zone a b", "error: usage: zone NAME | zone flush NAME\n"},
        /* no loader: no update service to write a zone back */
        {"zone flush a.test", "error: dynamic updates are not running\n"},
        {"reload now", "error: usage: reload\n"},
        {"dnssec ds", "error: usage: dnssec ds ZONE | dnssec status [ZONE] | dnssec rollover "
                      "ZONE ksk|zsk|csk | dnssec ds-seen ZONE [TAG] | dnssec ds-gone ZONE\n"},
        {"dnssec rollover x.test", "error: usage: dnssec ds ZONE | dnssec status [ZONE] | "
                                   "dnssec rollover ZONE ksk|zsk|csk | dnssec ds-seen ZONE "
                                   "[TAG] | dnssec ds-gone ZONE\n"},
        /* health takes nothing or "set ADDR state": two words are neither */
        {"health set 192.0.2.1", "error: usage: health | health set ADDR[:PORT] up|down|auto\n"},
        {"a b c d e f g", "error: unknown command 'a' (commands: reload, status, stats, zone NAME, "
                          "health)\n"},
        /* no loader: nothing is served, and the name is shown in the loader's form */
        {"zone Example.COM.", "error: zone example.com is not served\n"},
        {"reload", "error: no loader: reload is not available\n"},
        {"dnssec status", "error: no loader: dnssec status is not available\n"},
        {"health", "error: no health checks here\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = ask(cases[i].request);
        if (strcmp(out, cases[i].answer) != 0)
            fail_msg("request '%s': got '%s', want '%s'", cases[i].request, out, cases[i].answer);
        free(out);
    }
}

static void test_status_without_loader(void **state)
{
    (void)state;
    char *out = ask("  status  ");
    assert_true(starts_with(out, "ok\nversion: "));
    assert_non_null(strstr(out, "\npid: "));
    assert_non_null(strstr(out, "\nworkers: 3\n"));
    assert_null(strstr(out, "zones:")); /* nothing from a loader that is not there */
    free(out);
}

static void test_line_escapes(void **state)
{
    (void)state;
    sb_t b = SB_INIT;
    ctl_cmd_line(&b, "file: %s", "a\nb\rc\x7f");
    ctl_cmd_line(&b, "n: %d", 7);
    assert_false(b.failed);
    assert_string_equal(b.p, "file: a?b?c?\nn: 7\n");
    tern_buf_free(&b);
}

/* explain: its arguments are checked before anything is run (no loader here to run it on). */
static void test_explain_errors(void **state)
{
    (void)state;
#define EXPLAIN_USAGE_LINE                                                                         \
    "error: usage: explain NAME [TYPE] --client ADDR [--ecs PREFIX] [--do] [--tcp] [--json]\n"
    static const struct {
        const char *request, *answer;
    } cases[] = {
        {"explain www.a.test", EXPLAIN_USAGE_LINE},
        {"explain www.a.test A", EXPLAIN_USAGE_LINE},
        {"explain www.a.test A --do", EXPLAIN_USAGE_LINE},                     /* no --client */
        {"explain www.a.test A --client 192.0.2.1 --ecs", EXPLAIN_USAGE_LINE}, /* no PREFIX */
        {"explain www.a.test A --client 192.0.2.1 --bogus", EXPLAIN_USAGE_LINE},
        {"explain www.a.test BOGUS --client 192.0.2.1", "error: explain: unknown type BOGUS\n"},
        {"explain www.a.test --client nowhere",
         "error: explain: --client nowhere: not an IP address\n"},
        {"explain www.a.test --client 192.0.2.1 --ecs 10.0.0.0/33",
         "error: explain: --ecs 10.0.0.0/33: want ADDR/LEN\n"},
        {"explain a..test --client 192.0.2.1", "error: explain: a..test: empty label in name\n"},
        /* well formed: then it needs the server's view */
        {"explain www.a.test AAAA --client 2001:db8::1 --ecs 2001:db8::/48 --do --tcp --json",
         "error: no loader: explain is not available\n"},
    };
#undef EXPLAIN_USAGE_LINE
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = ask(cases[i].request);
        if (strcmp(out, cases[i].answer) != 0)
            fail_msg("request '%s': got '%s', want '%s'", cases[i].request, out, cases[i].answer);
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_status_without_loader),
        cmocka_unit_test(test_line_escapes),
        cmocka_unit_test(test_explain_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
