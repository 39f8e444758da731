/*
 * test_xdp_prog.c — the XDP program (src/net/xdp_prog.bpf.c) run by the kernel on hand-built
 * frames with BPF_PROG_TEST_RUN: what it redirects and what it passes to the stack.
 *
 * No socket sits in tern_xdp_xsks here, so a frame the program wants for tern comes back as
 * XDP_PASS (the redirect's fallback) and is told apart by the program's own counters
 * (tern_xdp_stats): NO_SOCKET for ours, PASS for the stack's. Loading needs CAP_BPF (root) and a
 * kernel that allows BPF; without them the test exits 77 (ctest: skipped), saying why.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "xdp_test_util.h"

/* The exit status ctest reads as "skipped" (SKIP_RETURN_CODE in CMakeLists.txt). */
#define SKIP_CODE 77

/* Mirrors TERN_XDP_STAT_* in xdp_prog.bpf.c. */
enum { STAT_REDIRECT, STAT_NO_SOCKET, STAT_PASS, STAT_COUNT };

typedef struct fixture {
    struct bpf_object *obj;
    int prog_fd;
    int stats_fd;
} fixture_t;

static int setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof *fx);
    if (!fx)
        return -1;
    *state = fx;
    fx->obj = bpf_object__open_file(TERN_XDP_BPF_OBJ, NULL);
    if (!fx->obj) {
        fprintf(stderr, "cannot open %s: %s\n", TERN_XDP_BPF_OBJ, strerror(errno));
        return -1;
    }
    int rc = bpf_object__load(fx->obj);
    if (rc) {
        /* EPERM: no CAP_BPF/CAP_SYS_ADMIN, or kernel.unprivileged_bpf_disabled; anything else is
         * the kernel refusing the program, which is a failure to see, not to skip. */
        fprintf(stderr, "the kernel did not load %s: %s\n", TERN_XDP_BPF_OBJ, strerror(-rc));
        bpf_object__close(fx->obj);
        fx->obj = NULL;
        return rc == -EPERM || rc == -EACCES ? SKIP_CODE : -1;
    }
    fx->prog_fd = bpf_program__fd(bpf_object__find_program_by_name(fx->obj, "tern_xdp"));
    fx->stats_fd = bpf_object__find_map_fd_by_name(fx->obj, "tern_xdp_stats");
    int ports_fd = bpf_object__find_map_fd_by_name(fx->obj, "tern_xdp_ports");
    uint16_t port = htons(PORT);
    uint8_t one = 1;
    if (fx->prog_fd < 0 || fx->stats_fd < 0 || ports_fd < 0 ||
        bpf_map_update_elem(ports_fd, &port, &one, BPF_ANY) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;
    if (fx && fx->obj)
        bpf_object__close(fx->obj);
    free(fx);
    return 0;
}

/* The sum over CPUs of one counter. */
static uint64_t stat_of(const fixture_t *fx, uint32_t key)
{
    int ncpu = libbpf_num_possible_cpus();
    assert_true(ncpu > 0);
    uint64_t *vals = calloc((size_t)ncpu, sizeof *vals);
    assert_non_null(vals);
    assert_int_equal(bpf_map_lookup_elem(fx->stats_fd, &key, vals), 0);
    uint64_t sum = 0;
    for (int i = 0; i < ncpu; i++)
        sum += vals[i];
    free(vals);
    return sum;
}

/* Run the program on len bytes of f; returns which counter moved (exactly one must). */
static int run(const fixture_t *fx, const uint8_t *f, size_t len)
{
    uint64_t before[STAT_COUNT];
    for (uint32_t k = 0; k < STAT_COUNT; k++)
        before[k] = stat_of(fx, k);
    uint8_t out[2048];
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = f, .data_size_in = (uint32_t)len,
                .data_out = out, .data_size_out = sizeof out, .repeat = 1);
    assert_int_equal(bpf_prog_test_run_opts(fx->prog_fd, &opts), 0);
    assert_int_equal(opts.retval, XDP_PASS); /* no socket here: every frame falls back to PASS */
    int moved = -1;
    for (uint32_t k = 0; k < STAT_COUNT; k++) {
        uint64_t d = stat_of(fx, k) - before[k];
        assert_true(d <= 1);
        if (d == 1) {
            assert_int_equal(moved, -1);
            moved = (int)k;
        }
    }
    assert_int_not_equal(moved, -1);
    return moved;
}

#define SKIP_UNLESS_LOADED(fx)                                                                     \
    do {                                                                                           \
        if (!(fx)->obj)                                                                            \
            skip();                                                                                \
    } while (0)

static void test_ours(void **state)
{
    fixture_t *fx = *state;
    uint8_t f[512];
    assert_int_equal(run(fx, f, build_v4(f, 0, 17, PORT)), STAT_NO_SOCKET);
    assert_int_equal(run(fx, f, build_v4(f, 40, 17, PORT)), STAT_NO_SOCKET); /* options */
    assert_int_equal(run(fx, f, build_v6(f, NULL, 0)), STAT_NO_SOCKET);
    const uint8_t exts[] = {0, 60, 43, 60}; /* as many as the program skips */
    assert_int_equal(run(fx, f, build_v6(f, exts, sizeof exts)), STAT_NO_SOCKET);
}

static void test_passed(void **state)
{
    fixture_t *fx = *state;
    uint8_t f[512];
    size_t len = build_v4(f, 0, 17, 5353); /* another port */
    assert_int_equal(run(fx, f, len), STAT_PASS);
    len = build_v4(f, 0, 6, PORT); /* TCP to the served port */
    assert_int_equal(run(fx, f, len), STAT_PASS);
    len = build_v4(f, 0, 1, PORT); /* ICMP */
    assert_int_equal(run(fx, f, len), STAT_PASS);

    len = build_v4(f, 0, 17, PORT);
    put16(f + 14 + 6, 0x2000); /* first fragment */
    fix_v4_csum(f);
    assert_int_equal(run(fx, f, len), STAT_PASS);
    put16(f + 14 + 6, 0x0020); /* a later one */
    fix_v4_csum(f);
    assert_int_equal(run(fx, f, len), STAT_PASS);

    len = build_v4(f, 0, 17, PORT);
    put16(f + 12, 0x8100); /* VLAN */
    assert_int_equal(run(fx, f, len), STAT_PASS);
    put16(f + 12, 0x0806); /* ARP */
    assert_int_equal(run(fx, f, len), STAT_PASS);

    const uint8_t frag[] = {0, 44};
    assert_int_equal(run(fx, f, build_v6(f, frag, sizeof frag)), STAT_PASS);
    const uint8_t many[] = {60, 60, 60, 60, 60}; /* one more than the program skips */
    assert_int_equal(run(fx, f, build_v6(f, many, sizeof many)), STAT_PASS);

    len = build_v4(f, 0, 17, PORT);
    assert_int_equal(run(fx, f, 14 + 20 + 4), STAT_PASS); /* UDP header cut short */
    assert_int_equal(run(fx, f, 14), STAT_PASS);          /* Ethernet only */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ours),
        cmocka_unit_test(test_passed),
    };
    /* Probe once: without the privilege to load BPF, the whole test is skipped, not failed. */
    void *probe = NULL;
    int rc = setup(&probe);
    teardown(&probe);
    if (rc == SKIP_CODE) {
        fprintf(stderr, "SKIP: BPF programs cannot be loaded here (needs root / CAP_BPF)\n");
        return SKIP_CODE;
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
