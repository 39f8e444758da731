/*
 * xdp_test_util.h — query frames built byte by byte for the AF_XDP tests (include after
 * <cmocka.h>): IPv4 with options, IPv6 with extension headers, UDP with checksums from ref_csum(),
 * a reference written apart from xdp_frame_csum_add() (bytes weighted by position into a 32-bit
 * sum, folded once at the end). Header-only, so each test stays one executable.
 */
#ifndef TERN_TESTS_UNIT_NET_XDP_TEST_UTIL_H
#define TERN_TESTS_UNIT_NET_XDP_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
static inline uint16_t ref_csum(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
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

static inline void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline unsigned get16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

/* The UDP checksum over the pseudo-header for addresses of alen bytes and the UDP datagram. */
static inline uint16_t ref_udp_csum(const uint8_t *src, const uint8_t *dst, size_t alen,
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
static inline size_t build_udp(uint8_t *udp, unsigned sport, unsigned dport, const uint8_t *pl,
                               size_t plen)
{
    put16(udp, sport);
    put16(udp + 2, dport);
    put16(udp + 4, (unsigned)(8 + plen));
    put16(udp + 6, 0);
    memcpy(udp + 8, pl, plen);
    return 8 + plen;
}

/* An IPv4 frame with optlen bytes of options (NOPs) and protocol proto carrying the UDP payload
 * pl (plen bytes); returns its length. */
static inline size_t build_v4_pl(uint8_t *f, size_t optlen, uint8_t proto, unsigned dport,
                                 const uint8_t *pl, size_t plen)
{
    memcpy(f, SERVER_MAC, 6);
    memcpy(f + 6, CLIENT_MAC, 6);
    put16(f + 12, 0x0800);
    uint8_t *ip = f + 14;
    size_t ihl = 20 + optlen;
    uint8_t *udp = ip + ihl;
    size_t ulen = build_udp(udp, CLIENT_PORT, dport, pl, plen);
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

/* An IPv4 query frame with optlen bytes of options (NOPs) and protocol proto; returns its length.
 */
static inline size_t build_v4(uint8_t *f, size_t optlen, uint8_t proto, unsigned dport)
{
    return build_v4_pl(f, optlen, proto, dport, QUERY, sizeof QUERY);
}

/* Recompute the IPv4 header checksum after a test changed a field. */
static inline void fix_v4_csum(uint8_t *f)
{
    uint8_t *ip = f + 14;
    put16(ip + 10, 0);
    put16(ip + 10, ref_csum(ip, (size_t)(ip[0] & 0xf) * 4, NULL, 0));
}

/* An IPv6 frame with the extension headers exts (nexts of them, each 8 bytes, types as given)
 * carrying the UDP payload pl (plen bytes); returns its length. */
static inline size_t build_v6_pl(uint8_t *f, const uint8_t *exts, size_t nexts, const uint8_t *pl,
                                 size_t plen)
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
    size_t ulen = build_udp(p, CLIENT_PORT, PORT, pl, plen);
    ip[0] = 0x60;
    ip[1] = ip[2] = ip[3] = 0;
    put16(ip + 4, (unsigned)(8 * nexts + ulen));
    ip[7] = 64;
    memcpy(ip + 8, CLIENT6, 16);
    memcpy(ip + 24, SERVER6, 16);
    put16(p + 6, ref_udp_csum(CLIENT6, SERVER6, 16, p, ulen));
    return (size_t)(p + ulen - f);
}

/* An IPv6 query frame with the extension headers exts (nexts of them); returns its length. */
static inline size_t build_v6(uint8_t *f, const uint8_t *exts, size_t nexts)
{
    return build_v6_pl(f, exts, nexts, QUERY, sizeof QUERY);
}

#endif
