/*
 * test_config_rows.c — the schema engine (src/conf/config_rows.c) against a toy table of rows:
 * defaults and block resets at init, a nested block reached only through its hooks (parse,
 * reset, copy, same, print, check), the origins of scalar rows, groups of redins rows, the
 * order of the document's checks, and --help's layout of nested rows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "conf_test_util.h"
#include "config_parse.h"
#include "tern/common/err.h"

#define FIELD(f) .offset = offsetof(config_t, f), .size = sizeof(((config_t *)0)->f)

/* What the toy block's hooks saw. */
static struct {
    unsigned resets, copies, parses, checks;
    size_t parse_line; /* the key node's line at the last parse */
    bool fail_copy;    /* copy() fails */
    bool fail_check;   /* check() fails */
    char order[8];     /* "d" the document's check, "b" the block's, in call order */
} seen;

static void toy_reset(config_t *c)
{
    seen.resets++;
    c->tcp_max_inflight = 7; /* the block's default */
}

static int toy_copy(config_t *dst, const config_t *src)
{
    seen.copies++;
    dst->tcp_max_inflight = src->tcp_max_inflight;
    return seen.fail_copy ? TERN_ENOMEM : 0;
}

static bool toy_same(const config_t *a, const config_t *b)
{
    return a->tcp_max_inflight == b->tcp_max_inflight;
}

static int toy_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    long long v = 0;
    seen.parses++;
    seen.parse_line = line_of(k);
    int r = config_get_int(pc, n, o->key, NULL, 1, 100, &v);
    if (r == 0)
        pc->c->tcp_max_inflight = (unsigned)v;
    return r;
}

static int toy_check(parse_ctx_t *pc)
{
    seen.checks++;
    strcat(seen.order, "b");
    return seen.fail_check ? config_fail(pc, yaml_document_get_root_node(pc->doc), NULL, "toy") : 0;
}

static const opt_t toy_sub_rows[] = {
    {.key = "inner", .type = OPT_UINT, .min = 1, .max = 9, .def = 3, .desc = "an inner row"},
};
static const conf_block_t toy_sub = {.rows = toy_sub_rows, .nrows = 1};
static const opt_t toy_rows_nested[] = {
    {.key = "sub", .type = OPT_BLOCK, .block = &toy_sub, .desc = "a nested block"},
};

static const conf_block_t toy_block = {
    .rows = toy_rows_nested,
    .nrows = 1,
    .parse = toy_parse,
    .reset = toy_reset,
    .copy = toy_copy,
    .same = toy_same,
    .check = toy_check,
};
static const conf_block_t toy_redins = {.parse = toy_parse};

static const opt_t rows[] = {
    {.key = "workers",
     .type = OPT_WORKERS,
     FIELD(workers),
     .def = 2,
     .min = 1,
     .max = 256,
     .desc = "workers"},
    {.key = "identity", .type = OPT_STR, FIELD(identity), .max = 255, .desc = "a string"},
    {.key = "blk",
     .type = OPT_BLOCK,
     .block = &toy_block,
     .restart = true,
     .desc = "a block",
     .group = 1},
    {.key = "red",
     .type = OPT_BLOCK,
     .block = &toy_redins,
     .redins = true,
     .group = 1,
     .desc = "a redins key"},
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

static int doc_check(parse_ctx_t *pc)
{
    strcat(seen.order, "d");
    return 0;
}

static int setup(void **state)
{
    memset(&seen, 0, sizeof(seen));
    return 0;
}

static int read_text(config_t *c, const char *text, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    config_rows_init(c, rows, NROWS);
    int r = config_rows_read(c, write_tmp(text), rows, NROWS, doc_check, err, errlen);
    unlink(tmp_path);
    return r;
}

static void release(config_t *c)
{
    config_rows_free(c, rows, NROWS);
    free(c->file);
}

static void test_init_sets_defaults_and_resets_blocks(void **state)
{
    config_t c;
    memset(&c, 0, sizeof(c));
    config_rows_init(&c, rows, NROWS);
    assert_int_equal(c.workers, 2);
    assert_null(c.identity);
    assert_int_equal(c.tcp_max_inflight, 7);
    assert_int_equal(seen.resets, 1); /* the block that owns settings; the redins one has none */
}

static void test_block_parsed_through_its_hook(void **state)
{
    config_t c;
    char err[256] = "";
    assert_int_equal(read_text(&c, "workers: 4\n\nblk: 42\nidentity: x\n", err, sizeof(err)), 0);
    assert_int_equal(c.workers, 4);
    assert_int_equal(c.tcp_max_inflight, 42);
    assert_string_equal(c.identity, "x");
    assert_int_equal(seen.parses, 1);
    assert_int_equal(seen.parse_line, 3);
    assert_string_equal(seen.order, "db"); /* the document's check first, then the blocks' */
    /* origins: scalar rows have one, a block none */
    assert_int_equal(config_rows_line_of(&c, rows, NROWS, "workers"), 1);
    assert_int_equal(config_rows_line_of(&c, rows, NROWS, "identity"), 4);
    assert_int_equal(config_rows_line_of(&c, rows, NROWS, "blk"), 0);
    c.workers = 5; /* changed since the file set it: no longer the file's line */
    assert_int_equal(config_rows_line_of(&c, rows, NROWS, "workers"), 0);
    release(&c);
}

static void test_block_errors_keep_file_and_line(void **state)
{
    config_t c;
    char err[256] = "", want[256];
    assert_true(read_text(&c, "workers: 1\nblk: 500\n", err, sizeof(err)) < 0);
    snprintf(want, sizeof(want), "%s:2: blk: 500 is out of range 1..100", tmp_path);
    assert_string_equal(err, want);
    release(&c);
}

static void test_group_refuses_redins_and_other(void **state)
{
    config_t c;
    char err[256] = "", want[256];
    assert_true(read_text(&c, "blk: 1\nred: 2\n", err, sizeof(err)) < 0);
    snprintf(want, sizeof(want), "%s:2: red: conflicts with blk at line 1 (give one of them)",
             tmp_path);
    assert_string_equal(err, want);
    release(&c);
}

static void test_failed_check_fails_the_load(void **state)
{
    config_t c;
    char err[256] = "";
    seen.fail_check = true;
    assert_true(read_text(&c, "workers: 1\n", err, sizeof(err)) < 0);
    assert_non_null(strstr(err, ": toy"));
    assert_int_equal(seen.checks, 1);
    release(&c);
}

static void test_copy_calls_every_block_and_strdups_strings(void **state)
{
    config_t a, b;
    char err[256] = "";
    assert_int_equal(read_text(&a, "identity: id\nblk: 9\n", err, sizeof(err)), 0);
    assert_int_equal(config_rows_copy(&b, &a, rows, NROWS), 0);
    b.file = NULL;
    assert_int_equal(seen.copies, 1);
    assert_ptr_not_equal(a.identity, b.identity);
    assert_string_equal(b.identity, "id");
    assert_int_equal(config_rows_changes(&a, &b, rows, NROWS, err, sizeof(err)), 0);
    b.tcp_max_inflight = 10; /* the block's same() sees it: a restart-only row changed */
    assert_int_equal(config_rows_changes(&a, &b, rows, NROWS, err, sizeof(err)), 1);
    assert_string_equal(err, "blk");
    release(&b);
    seen.fail_copy = true;
    assert_int_equal(config_rows_copy(&b, &a, rows, NROWS), TERN_ENOMEM);
    b.file = NULL;
    release(&b);
    release(&a);
}

static void test_print_nests_block_rows(void **state)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    config_rows_print(out, rows, NROWS);
    fclose(out);
    assert_non_null(strstr(buf, "  blk                  a block\n"
                                "    sub                a nested block\n"
                                "      inner            an inner row [1..9, default 3]\n"));
    assert_non_null(strstr(buf, "\nredins-style JSON keys (its config.json):\n"
                                "  red                  a redins key\n"));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_init_sets_defaults_and_resets_blocks, setup),
        cmocka_unit_test_setup(test_block_parsed_through_its_hook, setup),
        cmocka_unit_test_setup(test_block_errors_keep_file_and_line, setup),
        cmocka_unit_test_setup(test_group_refuses_redins_and_other, setup),
        cmocka_unit_test_setup(test_failed_check_fails_the_load, setup),
        cmocka_unit_test_setup(test_copy_calls_every_block_and_strdups_strings, setup),
        cmocka_unit_test_setup(test_print_nests_block_rows, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
