/*
 * test_xdp_frame.c — xdp_frame_parse() and xdp_frame_write() on hand-built frames, no kernel.
 *
 * Frames are built byte by byte (xdp_test_util.h), their checksums by ref_csum(), a reference
 * written apart from xdp_frame_csum_add(); replies are checked with it, and the IPv4 header
 * checksum against the textbook vector. Truncated frames are copied into buffers of exactly their
 * length, so ASan catches any read past the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/net/xdp_frame.h"
#include "xdp_test_util.h"

/* Parse len bytes of f from a heap copy of exactly len bytes (ASan sees any overread). */
static int parse_exact(const uint8_t *f, size_t len, xdp_frame_flow_t *flow)
{
    uint8_t *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, f, len);
    int rc = xdp_frame_parse(copy, len, PORT, flow);
    free(copy);
    return rc;
}

static void test_csum_textbook_vector(void **state)
{
    (void)state;
    /* The IPv4 header of the classic example: checksum 0xb861. */
    uint8_t ip[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                      0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
    assert_int_equal(xdp_frame_csum_fold(xdp_frame_csum_add(0, ip, sizeof ip)), 0xb861);
    assert_int_equal(ref_csum(ip, sizeof ip, NULL, 0), 0xb861);
    /* chained in even chunks, odd tail */
    uint8_t odd[5] = {0x01, 0x02, 0x03, 0x04, 0x05};
    uint32_t s = xdp_frame_csum_add(xdp_frame_csum_add(0, odd, 2), odd + 2, 3);
    assert_int_equal(xdp_frame_csum_fold(s), ref_csum(odd, 5, NULL, 0));
}

static void test_parse_v4(void **state)
{
    (void)state;
    uint8_t f[256];
    size_t len = build_v4(f, 0, 17, PORT);
    xdp_frame_flow_t flow;
    assert_int_equal(parse_exact(f, len, &flow), 0);
    assert_int_equal(flow.ip_version, 4);
    assert_memory_equal(flow.eth_src, CLIENT_MAC, 6);
    assert_memory_equal(flow.eth_dst, SERVER_MAC, 6);
    assert_memory_equal(flow.src, CLIENT4, 4);
    assert_memory_equal(flow.dst, SERVER4, 4);
    assert_int_equal(flow.sport, CLIENT_PORT);
    assert_int_equal(flow.dport, PORT);
    assert_int_equal(flow.payload_off, 42);
    assert_int_equal(flow.payload_len, sizeof QUERY);
    assert_memory_equal(f + flow.payload_off, QUERY, sizeof QUERY);
    assert_true(xdp_frame_udp_ok(f, &flow));

    /* options: 12 bytes of NOPs move the payload */
    len = build_v4(f, 12, 17, PORT);
    assert_int_equal(parse_exact(f, len, &flow), 0);
    assert_int_equal(flow.payload_off, 54);
    assert_memory_equal(f + flow.payload_off, QUERY, sizeof QUERY);

    /* Ethernet padding after the datagram is not an error */
    len = build_v4(f, 0, 17, PORT);
    memset(f + len, 0, 20);
    assert_int_equal(parse_exact(f, len + 20, &flow), 0);
    assert_int_equal(flow.payload_len, sizeof QUERY);
}

static void test_parse_v4_refused(void **state)
{
    (void)state;
    uint8_t f[256];
    xdp_frame_flow_t flow;
    size_t len = build_v4(f, 0, 17, PORT);
    for (size_t n = 0; n < len; n++) /* every truncation */
        assert_int_equal(parse_exact(f, n, &flow), TERN_EMALF);

    build_v4(f, 0, 17, 5353);
    assert_int_equal(parse_exact(f, len, &flow), TERN_ENOENT);
    assert_int_equal(xdp_frame_parse(f, len, 0, &flow), 0); /* port 0: any */
    assert_int_equal(flow.dport, 5353);
    build_v4(f, 0, 6, PORT); /* TCP */
    assert_int_equal(parse_exact(f, len, &flow), TERN_ENOTSUP);

    build_v4(f, 0, 17, PORT);
    f[14 + 10] ^= 1; /* header checksum */
    assert_int_equal(parse_exact(f, len, &flow), TERN_EMALF);

    build_v4(f, 0, 17, PORT);
    f[14] = 0x44; /* IHL 4 */
    fix_v4_csum(f);
    assert_int_equal(parse_exact(f, len, &flow), TERN_EMALF);

    build_v4(f, 0, 17, PORT);
    f[14] = 0x55; /* version 5 */
    fix_v4_csum(f);
    assert_int_equal(parse_exact(f, len, &flow), TERN_EMALF);

    build_v4(f, 0, 17, PORT);
    put16(f + 14 + 2, (unsigned)(len - 14 + 1)); /* total length past the frame */
    fix_v4_csum(f);
    assert_int_equal(parse_exact(f, len, &flow), TERN_EMALF);

    build_v4(f, 0, 17, PORT);
    put16(f + 14 + 6, 0x2000); /* more fragments */
    fix_v4_csum(f);
    assert_int_equal(parse_exact(f, len, &flow), TERN_ENOTSUP);
    put16(f + 14 + 6, 0x0010); /* a later fragment */
    fix_v4_csum(f);
    assert_int_equal(parse_exact(f, len, &flow), TERN_ENOTSUP);

    build_v4(f, 0, 17, PORT);
    put16(f + 34 + 4, (unsigned)(8 + sizeof QUERY - 1)); /* UDP length short of the IP payload */
    assert_int_equal(parse_exact(f, len, &flow), TERN_EMALF);
    put16(f + 34 + 4, 7); /* below the UDP header */
    assert_int_equal(parse_exact(f, len, &flow), TERN_EMALF);

    build_v4(f, 0, 17, PORT);
    put16(f + 34, 0); /* source port 0: nowhere to answer */
    assert_int_equal(parse_exact(f, len, &flow), TERN_EMALF);

    build_v4(f, 0, 17, PORT);
    put16(f + 12, 0x8100); /* a VLAN tag: the stack's */
    assert_int_equal(parse_exact(f, len, &flow), TERN_ENOTSUP);
    put16(f + 12, 0x88a8);
    assert_int_equal(parse_exact(f, len, &flow), TERN_ENOTSUP);
    put16(f + 12, 0x0806); /* ARP */
    assert_int_equal(parse_exact(f, len, &flow), TERN_ENOTSUP);
}

static void test_udp_checksum_check(void **state)
{
    (void)state;
    uint8_t f[256];
    xdp_frame_flow_t flow;
    size_t len = build_v4(f, 0, 17, PORT);
    assert_int_equal(parse_exact(f, len, &flow), 0);
    f[len - 1] ^= 0x40;
    assert_false(xdp_frame_udp_ok(f, &flow));
    put16(f + 34 + 6, 0); /* IPv4: no checksum */
    assert_true(xdp_frame_udp_ok(f, &flow));

    len = build_v6(f, NULL, 0);
    assert_int_equal(parse_exact(f, len, &flow), 0);
    assert_true(xdp_frame_udp_ok(f, &flow));
    put16(f + 54 + 6, 0); /* IPv6: a checksum is mandatory */
    assert_false(xdp_frame_udp_ok(f, &flow));
}

static void test_parse_v6(void **state)
{
    (void)state;
    uint8_t f[256];
    xdp_frame_flow_t flow;
    size_t len = build_v6(f, NULL, 0);
    assert_int_equal(parse_exact(f, len, &flow), 0);
    assert_int_equal(flow.ip_version, 6);
    assert_memory_equal(flow.src, CLIENT6, 16);
    assert_memory_equal(flow.dst, SERVER6, 16);
    assert_int_equal(flow.payload_off, 62);
    assert_memory_equal(f + flow.payload_off, QUERY, sizeof QUERY);

    const uint8_t exts[] = {0, 60, 43}; /* hop-by-hop, destination options, routing */
    len = build_v6(f, exts, 3);
    assert_int_equal(parse_exact(f, len, &flow), 0);
    assert_int_equal(flow.payload_off, 62 + 24);
    assert_int_equal(flow.payload_len, sizeof QUERY);
    assert_memory_equal(f + flow.payload_off, QUERY, sizeof QUERY);
    assert_true(xdp_frame_udp_ok(f, &flow));
    for (size_t n = 0; n < len; n++)
        assert_int_equal(parse_exact(f, n, &flow), TERN_EMALF);
}

static void test_parse_v6_refused(void **state)
{
    (void)state;
    uint8_t f[512];
    xdp_frame_flow_t flow;
    const uint8_t frag[] = {0, 44}; /* hop-by-hop, then a fragment header */
    size_t len = build_v6(f, frag, 2);
    assert_int_equal(parse_exact(f, len, &flow), TERN_ENOTSUP);

    uint8_t many[XDP_FRAME_EXT_MAX + 1];
    memset(many, 60, sizeof many);
    len = build_v6(f, many, sizeof many);
    assert_int_equal(parse_exact(f, len, &flow), TERN_ENOTSUP);
    len = build_v6(f, many, XDP_FRAME_EXT_MAX); /* exactly the bound: accepted */
    assert_int_equal(parse_exact(f, len, &flow), 0);

    const uint8_t hop[] = {0};
    len = build_v6(f, hop, 1);
    f[54 + 1] = 200; /* the extension header claims more than the packet holds */
    assert_int_equal(parse_exact(f, len, &flow), TERN_EMALF);

    len = build_v6(f, NULL, 0);
    f[14 + 6] = 6; /* TCP */
    assert_int_equal(parse_exact(f, len, &flow), TERN_ENOTSUP);
    f[14 + 6] = 51; /* AH: not skipped */
    assert_int_equal(parse_exact(f, len, &flow), TERN_ENOTSUP);

    len = build_v6(f, NULL, 0);
    put16(f + 14 + 4, (unsigned)(len - 54 + 1)); /* payload length past the frame */
    assert_int_equal(parse_exact(f, len, &flow), TERN_EMALF);
    put16(f + 14 + 4, 0); /* jumbogram */
    assert_int_equal(parse_exact(f, len, &flow), TERN_ENOTSUP);

    len = build_v6(f, NULL, 0);
    f[14] = 0x40; /* version 4 in an IPv6 ethertype */
    assert_int_equal(parse_exact(f, len, &flow), TERN_EMALF);
}

/* Check a reply frame: headers swapped, lengths, checksums against the reference. */
static void check_reply(const uint8_t *r, size_t rlen, int version, size_t plen)
{
    assert_memory_equal(r, CLIENT_MAC, 6);
    assert_memory_equal(r + 6, SERVER_MAC, 6);
    const uint8_t *ip = r + 14;
    const uint8_t *udp;
    size_t ulen = 8 + plen;
    if (version == 4) {
        assert_int_equal(get16(r + 12), 0x0800);
        assert_int_equal(ip[0], 0x45);
        assert_int_equal(get16(ip + 2), 20 + ulen);
        assert_int_equal(ip[9], 17);
        assert_int_equal(ref_csum(ip, 20, NULL, 0), 0); /* a right header sums to zero */
        assert_memory_equal(ip + 12, SERVER4, 4);
        assert_memory_equal(ip + 16, CLIENT4, 4);
        udp = ip + 20;
        assert_int_equal(ref_udp_csum(SERVER4, CLIENT4, 4, udp, ulen), 0);
    } else {
        assert_int_equal(get16(r + 12), 0x86dd);
        assert_int_equal(ip[0] >> 4, 6);
        assert_int_equal(get16(ip + 4), ulen);
        assert_int_equal(ip[6], 17);
        assert_memory_equal(ip + 8, SERVER6, 16);
        assert_memory_equal(ip + 24, CLIENT6, 16);
        udp = ip + 40;
        assert_int_equal(ref_udp_csum(SERVER6, CLIENT6, 16, udp, ulen), 0);
    }
    assert_int_not_equal(get16(udp + 6), 0);
    assert_int_equal(get16(udp), PORT);
    assert_int_equal(get16(udp + 2), CLIENT_PORT);
    assert_int_equal(get16(udp + 4), ulen);
    assert_int_equal(rlen, (size_t)(udp - r) + ulen);
}

/* Answer the query in f in place (payload moved to the reply's offset, one byte changed and
 * grown by grow bytes), check the reply, and parse it back as the client would. */
static void reply_roundtrip(uint8_t *f, size_t len, size_t cap, size_t grow)
{
    xdp_frame_flow_t flow;
    assert_int_equal(xdp_frame_parse(f, len, PORT, &flow), 0);
    size_t hdr = xdp_frame_hdr_len(&flow);
    size_t plen = flow.payload_len + grow;
    memmove(f + hdr, f + flow.payload_off, flow.payload_len);
    f[hdr + 2] |= 0x80; /* QR */
    memset(f + hdr + flow.payload_len, 0xab, grow);
    size_t rlen = 0;
    assert_int_equal(xdp_frame_write(f, cap, &flow, plen, &rlen), 0);
    check_reply(f, rlen, flow.ip_version, plen);

    xdp_frame_flow_t back;
    assert_int_equal(xdp_frame_parse(f, rlen, CLIENT_PORT, &back), 0);
    assert_int_equal(back.sport, PORT);
    assert_int_equal(back.payload_len, plen);
    assert_true(xdp_frame_udp_ok(f, &back));
}

static void test_write_reply(void **state)
{
    (void)state;
    uint8_t f[2048];
    size_t grow[] = {0, 1, 100, 1200}; /* odd lengths exercise the checksum's padding */
    for (size_t i = 0; i < sizeof grow / sizeof grow[0]; i++) {
        reply_roundtrip(f, build_v4(f, 0, 17, PORT), sizeof f, grow[i]);
        reply_roundtrip(f, build_v4(f, 40, 17, PORT), sizeof f, grow[i]); /* longest options */
        reply_roundtrip(f, build_v6(f, NULL, 0), sizeof f, grow[i]);
        const uint8_t exts[] = {0, 60};
        reply_roundtrip(f, build_v6(f, exts, 2), sizeof f, grow[i]);
    }
}

static void test_write_bounds(void **state)
{
    (void)state;
    uint8_t f[256];
    xdp_frame_flow_t flow;
    size_t len = build_v4(f, 0, 17, PORT);
    assert_int_equal(xdp_frame_parse(f, len, PORT, &flow), 0);
    uint8_t before[256];
    memcpy(before, f, sizeof f);
    size_t rlen = 7;
    assert_int_equal(xdp_frame_write(f, 42 + 9, &flow, 10, &rlen), TERN_ETRUNC);
    assert_int_equal(xdp_frame_write(f, 41, &flow, 0, &rlen), TERN_ETRUNC);
    assert_int_equal(xdp_frame_write(f, 10, &flow, 100, &rlen), TERN_ETRUNC);
    assert_int_equal(xdp_frame_write(f, SIZE_MAX, &flow, 65535 - 28 + 1, &rlen), TERN_ETRUNC);
    assert_memory_equal(f, before, sizeof f); /* nothing written */
    assert_int_equal(rlen, 7);
    assert_int_equal(xdp_frame_write(f, 42, &flow, 0, &rlen), 0);
    assert_int_equal(rlen, 42);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csum_textbook_vector),
        cmocka_unit_test(test_parse_v4),
        cmocka_unit_test(test_parse_v4_refused),
        cmocka_unit_test(test_udp_checksum_check),
        cmocka_unit_test(test_parse_v6),
        cmocka_unit_test(test_parse_v6_refused),
        cmocka_unit_test(test_write_reply),
        cmocka_unit_test(test_write_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
