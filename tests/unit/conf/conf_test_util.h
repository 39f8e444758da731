/*
 * conf_test_util.h — helpers shared by the config unit tests: a config text written to a fresh
 * temporary file and loaded, expecting success or exactly one "file:line: message" error.
 * Header-only (static functions) so each test stays one executable. Include after <cmocka.h>.
 */
#ifndef TERN_TEST_CONF_TEST_UTIL_H
#define TERN_TEST_CONF_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tern/conf/config.h"

static char tmp_path[64];

/* Write text to a fresh temporary file; its path is tmp_path. */
static inline const char *write_tmp(const char *text)
{
    snprintf(tmp_path, sizeof(tmp_path), "/tmp/tern_conf_XXXXXX");
    int fd = mkstemp(tmp_path);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    return tmp_path;
}

/* Load text (valid) from a temporary file. */
static inline config_t load_text(const char *text)
{
    config_t c;
    char err[512] = "";
    config_init(&c);
    int r = config_load(&c, write_tmp(text), err, sizeof(err));
    if (r < 0)
        print_error("%s\n", err);
    assert_int_equal(r, 0);
    unlink(tmp_path);
    return c;
}

/* Load text and expect failure with exactly "<tmpfile>:<line>: <msg>". */
static inline void expect_error(const char *text, unsigned line, const char *msg)
{
    config_t c;
    char err[512] = "", want[1024];
    config_init(&c);
    const char *path = write_tmp(text);
    int r = config_load(&c, path, err, sizeof(err));
    snprintf(want, sizeof(want), "%s:%u: %s", path, line, msg);
    if (r >= 0 || strcmp(err, want) != 0)
        print_error("got r=%d err='%s'\nwant '%s'\n", r, err, want);
    unlink(path);
    config_free(&c);
    assert_true(r < 0);
    assert_string_equal(err, want);
}

#endif
