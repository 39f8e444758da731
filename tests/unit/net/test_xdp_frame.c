/*
 * test_xdp_frame.c — xdp_frame_parse() and xdp_frame_write() on hand-built frames, no kernel.
 *
 * Frames are built here byte by byte, their checksums by ref_csum(), a reference written
 * differently from xdp_frame_csum_add() (bytes weighted by position into a 32-bit sum, folded
 * once at the end); replies are checked with it, and the IPv4 header checksum
 * against the textbook vector. Truncated frames are copied into buffers of exactly their length,
 * so ASan catches any read past the end.
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

#define PORT        53
#define CLIENT_PORT 40000

static const uint8_t SERVER_MAC[6] = {0x02, 0, 0, 0, 0, 0x01};
static const uint8_t CLIENT_MAC[6] = {0x02, 0, 0, 0, 0, 0x02};
static const uint8_t SERVER4[4] = {192, 0, 2, 1};
static const uint8_t CLIENT4[4] = {198, 51, 100, 7};
static const uint8_t SERVER6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};
static const uint8_t CLIENT6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0,    0,
                                    0,    0,    0,    0,    0, 0, 0xbe, 0xef};
/* A DNS query for example.com/A: its content does not matter here, only its bytes. */
static const uint8_t QUERY[] = {0x12, 0x34, 0x01, 0x00, 0,   1, 0,   0,   0,   0, 0, 0, 7, 'e', 'x',
                                'a',  'm',  'p',  'l',  'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1};

/* Reference ones' complement sum: the sum of 16-bit big-endian words, folded at the end. */
static uint16_t ref_csum(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    uint32_t s = 0;
    const uint8_t *parts[2] = {a, b};
    size_t lens[2] = {alen, blen};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < lens[k]; i++)
            s += (i % 2 == 0) ? (uint32_t)parts[k][i] * 256u : parts[k][i];
    while (s > 0xffff)
        s = (s >> 16) + (s & 0xffff);
    return (uint16_t)(0xffff - s);
}

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static unsigned get16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

/* The UDP checksum over the pseudo-header for addresses of alen bytes and the UDP datagram. */
static uint16_t ref_udp_csum(const uint8_t *src, const uint8_t *dst, size_t alen,
                             const uint8_t *udp, size_t ulen)
{
    uint8_t pseudo[40];
    memcpy(pseudo, src, alen);
    memcpy(pseudo + alen, dst, alen);
    size_t n = 2 * alen;
    if (alen == 4) {
        pseudo[n++] = 0;
        pseudo[n++] = 17;
        put16(pseudo + n, (unsigned)ulen);
        n += 2;
    } else {
        memset(pseudo + n, 0, 8); /* 32-bit length, 3 zero bytes, next header */
        put16(pseudo + n + 2, (unsigned)ulen);
        pseudo[n + 7] = 17;
        n += 8;
    }
    return ref_csum(pseudo, n, udp, ulen);
}

/* Writes the UDP header and payload at udp; returns its length. */
static size_t build_udp(uint8_t *udp, unsigned sport, unsigned dport, const uint8_t *pl,
                        size_t plen)
{
    put16(udp, sport);
    put16(udp + 2, dport);
    put16(udp + 4, (unsigned)(8 + plen));
    put16(udp + 6, 0);
    memcpy(udp + 8, pl, plen);
    return 8 + plen;
}

/* An IPv4 query frame with optlen bytes of options (NOPs) and protocol proto; returns its length.
 */
static size_t build_v4(uint8_t *f, size_t optlen, uint8_t proto, unsigned dport)
{
    memcpy(f, SERVER_MAC, 6);
    memcpy(f + 6, CLIENT_MAC, 6);
    put16(f + 12, 0x0800);
    uint8_t *ip = f + 14;
    size_t ihl = 20 + optlen;
    uint8_t *udp = ip + ihl;
    size_t ulen = build_udp(udp, CLIENT_PORT, dport, QUERY, sizeof QUERY);
    ip[0] = (uint8_t)(0x40 | ihl / 4);
    ip[1] = 0;
    put16(ip + 2, (unsigned)(ihl + ulen));
    put16(ip + 4, 0x1234);
    put16(ip + 6, 0);
    ip[8] = 64;
    ip[9] = proto;
    put16(ip + 10, 0);
    memcpy(ip + 12, CLIENT4, 4);
    memcpy(ip + 16, SERVER4, 4);
    memset(ip + 20, 1, optlen); /* NOP options */
    put16(ip + 10, ref_csum(ip, ihl, NULL, 0));
    put16(udp + 6, ref_udp_csum(CLIENT4, SERVER4, 4, udp, ulen));
    return 14 + ihl + ulen;
}

/* Recompute the IPv4 header checksum after a test changed a field. */
static void fix_v4_csum(uint8_t *f)
{
    uint8_t *ip = f + 14;
    put16(ip + 10, 0);
    put16(ip + 10, ref_csum(ip, (size_t)(ip[0] & 0xf) * 4, NULL, 0));
}

/* An IPv6 query frame with the extension headers exts (nexts of them, each 8 bytes, types as
 * given); returns its length. */
static size_t build_v6(uint8_t *f, const uint8_t *exts, size_t nexts)
{
    memcpy(f, SERVER_MAC, 6);
    memcpy(f + 6, CLIENT_MAC, 6);
    put16(f + 12, 0x86dd);
    uint8_t *ip = f + 14;
    uint8_t *p = ip + 40;
    ip[6] = nexts ? exts[0] : 17;
    for (size_t i = 0; i < nexts; i++, p += 8) {
        memset(p, 0, 8);
        p[0] = i + 1 < nexts ? exts[i + 1] : 17;
        p[1] = 0; /* 8 bytes */
        p[2] = 1; /* a PadN option filling the rest */
        p[3] = 4;
    }
    size_t ulen = build_udp(p, CLIENT_PORT, PORT, QUERY, sizeof QUERY);
    ip[0] = 0x60;
    ip[1] = ip[2] = ip[3] = 0;
    put16(ip + 4, (unsigned)(8 * nexts + ulen));
    ip[7] = 64;
    memcpy(ip + 8, CLIENT6, 16);
    memcpy(ip + 24, SERVER6, 16);
    put16(p + 6, ref_udp_csum(CLIENT6, SERVER6, 16, p, ulen));
    return (size_t)(p + ulen - f);
}

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
