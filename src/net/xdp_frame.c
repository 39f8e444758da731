/*
 * xdp_frame.c — reading query frames and writing reply frames for the AF_XDP listener
 * (tern/net/xdp_frame.h). Multi-byte header fields are read and written byte by byte in network
 * order: frames come from a UMEM at any offset, so no field is assumed aligned.
 */
#include "tern/net/xdp_frame.h"

#include <string.h>

#include "tern/common/err.h"

#define ETH_P_IPV4     0x0800
#define ETH_P_IPV6     0x86dd
#define PROTO_HOPOPTS  0
#define PROTO_UDP      17
#define PROTO_ROUTING  43
#define PROTO_FRAGMENT 44
#define PROTO_DSTOPTS  60
/* Hop limit of replies: Linux's default (net.ipv4.ip_default_ttl), what a socket reply carries. */
#define REPLY_TTL   64
#define IP4_DF      0x4000
#define IP4_MF      0x2000
#define IP4_OFFMASK 0x1fff

static inline uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

uint32_t xdp_frame_csum_add(uint32_t sum, const uint8_t *data, size_t len)
{
    uint64_t s = sum;
    size_t i = 0;
    for (; i + 1 < len; i += 2)
        s += get16(data + i);
    if (i < len)
        s += (uint32_t)data[i] << 8; /* an odd last byte is padded with zero (RFC 1071) */
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint32_t)s;
}

uint16_t xdp_frame_csum_fold(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

/* The UDP pseudo-header's sum: addresses, protocol, UDP length (RFC 768, RFC 8200 8.1). */
static uint32_t pseudo_sum(int version, const uint8_t *src, const uint8_t *dst, uint16_t udp_len)
{
    size_t alen = version == 4 ? 4 : 16;
    uint32_t sum = xdp_frame_csum_add(0, src, alen);
    sum = xdp_frame_csum_add(sum, dst, alen);
    return sum + PROTO_UDP + udp_len;
}

/* The UDP header at l4 (avail bytes to the end of the IP payload): ports and payload into flow. */
static int parse_udp(const uint8_t *frame, size_t l4, size_t ip_payload_len, uint16_t port,
                     xdp_frame_flow_t *flow)
{
    if (ip_payload_len < XDP_FRAME_UDP_LEN)
        return TERN_EMALF;
    const uint8_t *udp = frame + l4;
    if (get16(udp + 4) != ip_payload_len) /* the UDP length must match what IP carries */
        return TERN_EMALF;
    flow->sport = get16(udp);
    flow->dport = get16(udp + 2);
    if (port != 0 && flow->dport != port)
        return TERN_ENOENT;
    if (flow->sport == 0) /* no port to answer to */
        return TERN_EMALF;
    flow->l4_off = (uint32_t)l4;
    flow->payload_off = (uint32_t)(l4 + XDP_FRAME_UDP_LEN);
    flow->payload_len = (uint16_t)(ip_payload_len - XDP_FRAME_UDP_LEN);
    return 0;
}

static int parse_ipv4(const uint8_t *frame, size_t len, uint16_t port, xdp_frame_flow_t *flow)
{
    const uint8_t *ip = frame + XDP_FRAME_ETH_LEN;
    size_t avail = len - XDP_FRAME_ETH_LEN;
    if (avail < XDP_FRAME_IP4_LEN || ip[0] >> 4 != 4)
        return TERN_EMALF;
    size_t ihl = (size_t)(ip[0] & 0xf) * 4;
    size_t total = get16(ip + 2);
    /* total < avail is Ethernet padding (a 60-byte minimum frame), not an error */
    if (ihl < XDP_FRAME_IP4_LEN || total < ihl || total > avail)
        return TERN_EMALF;
    if (xdp_frame_csum_fold(xdp_frame_csum_add(0, ip, ihl)) != 0)
        return TERN_EMALF;
    if (get16(ip + 6) & (IP4_MF | IP4_OFFMASK))
        return TERN_ENOTSUP;
    if (ip[9] != PROTO_UDP)
        return TERN_ENOTSUP;
    flow->ip_version = 4;
    memset(flow->src, 0, sizeof flow->src);
    memset(flow->dst, 0, sizeof flow->dst);
    memcpy(flow->src, ip + 12, 4);
    memcpy(flow->dst, ip + 16, 4);
    return parse_udp(frame, XDP_FRAME_ETH_LEN + ihl, total - ihl, port, flow);
}

static int parse_ipv6(const uint8_t *frame, size_t len, uint16_t port, xdp_frame_flow_t *flow)
{
    const uint8_t *ip = frame + XDP_FRAME_ETH_LEN;
    size_t avail = len - XDP_FRAME_ETH_LEN;
    if (avail < XDP_FRAME_IP6_LEN || ip[0] >> 4 != 6)
        return TERN_EMALF;
    size_t plen = get16(ip + 4);
    if (plen == 0) /* a jumbogram (RFC 2675): never a DNS query over Ethernet */
        return TERN_ENOTSUP;
    if (plen > avail - XDP_FRAME_IP6_LEN)
        return TERN_EMALF;
    uint8_t next = ip[6];
    size_t off = 0; /* from the end of the fixed header, within plen */
    for (int i = 0; next != PROTO_UDP; i++) {
        if (next == PROTO_FRAGMENT || i == XDP_FRAME_EXT_MAX)
            return TERN_ENOTSUP;
        if (next != PROTO_HOPOPTS && next != PROTO_ROUTING && next != PROTO_DSTOPTS)
            return TERN_ENOTSUP; /* another protocol, or a header we cannot skip safely */
        const uint8_t *ext = ip + XDP_FRAME_IP6_LEN + off;
        if (plen - off < 8) /* every one of these headers is at least 8 bytes */
            return TERN_EMALF;
        size_t elen = ((size_t)ext[1] + 1) * 8;
        if (elen > plen - off)
            return TERN_EMALF;
        next = ext[0];
        off += elen;
    }
    flow->ip_version = 6;
    memcpy(flow->src, ip + 8, 16);
    memcpy(flow->dst, ip + 24, 16);
    return parse_udp(frame, XDP_FRAME_ETH_LEN + XDP_FRAME_IP6_LEN + off, plen - off, port, flow);
}

int xdp_frame_parse(const uint8_t *frame, size_t len, uint16_t port, xdp_frame_flow_t *flow)
{
    if (len < XDP_FRAME_ETH_LEN)
        return TERN_EMALF;
    memcpy(flow->eth_dst, frame, 6);
    memcpy(flow->eth_src, frame + 6, 6);
    uint16_t type = get16(frame + 12);
    if (type == ETH_P_IPV4)
        return parse_ipv4(frame, len, port, flow);
    if (type == ETH_P_IPV6)
        return parse_ipv6(frame, len, port, flow);
    return TERN_ENOTSUP; /* ARP, 802.1Q/802.1ad VLAN tags (0x8100/0x88a8), anything else */
}

bool xdp_frame_udp_ok(const uint8_t *frame, const xdp_frame_flow_t *flow)
{
    const uint8_t *udp = frame + flow->l4_off;
    uint16_t ulen = (uint16_t)(flow->payload_len + XDP_FRAME_UDP_LEN);
    if (get16(udp + 6) == 0)
        return flow->ip_version == 4;
    uint32_t sum = pseudo_sum(flow->ip_version, flow->src, flow->dst, ulen);
    return xdp_frame_csum_fold(xdp_frame_csum_add(sum, udp, ulen)) == 0;
}

size_t xdp_frame_hdr_len(const xdp_frame_flow_t *flow)
{
    size_t ip = flow->ip_version == 4 ? XDP_FRAME_IP4_LEN : XDP_FRAME_IP6_LEN;
    return XDP_FRAME_ETH_LEN + ip + XDP_FRAME_UDP_LEN;
}

/* The reply's IPv4 header (no options) at ip, for a UDP datagram of ulen bytes. */
static void write_ipv4(uint8_t *ip, const xdp_frame_flow_t *flow, size_t ulen)
{
    ip[0] = 0x45;
    ip[1] = 0; /* DSCP/ECN: best effort, not ECN-capable */
    put16(ip + 2, (uint16_t)(XDP_FRAME_IP4_LEN + ulen));
    put16(ip + 4, 0); /* ID 0 with DF: an atomic datagram (RFC 6864 4.1) */
    put16(ip + 6, IP4_DF);
    ip[8] = REPLY_TTL;
    ip[9] = PROTO_UDP;
    put16(ip + 10, 0);
    memcpy(ip + 12, flow->dst, 4);
    memcpy(ip + 16, flow->src, 4);
    put16(ip + 10, xdp_frame_csum_fold(xdp_frame_csum_add(0, ip, XDP_FRAME_IP4_LEN)));
}

/* The reply's IPv6 header (no extension headers) at ip, for a UDP datagram of ulen bytes. */
static void write_ipv6(uint8_t *ip, const xdp_frame_flow_t *flow, size_t ulen)
{
    ip[0] = 0x60; /* version 6, traffic class 0, flow label 0 */
    ip[1] = ip[2] = ip[3] = 0;
    put16(ip + 4, (uint16_t)ulen);
    ip[6] = PROTO_UDP;
    ip[7] = REPLY_TTL;
    memcpy(ip + 8, flow->dst, 16);
    memcpy(ip + 24, flow->src, 16);
}

int xdp_frame_write(uint8_t *frame, size_t cap, const xdp_frame_flow_t *flow, size_t payload_len,
                    size_t *frame_len)
{
    size_t hdr = xdp_frame_hdr_len(flow);
    size_t ulen = XDP_FRAME_UDP_LEN + payload_len;
    size_t iplen = flow->ip_version == 4 ? XDP_FRAME_IP4_LEN + ulen : ulen;
    if (payload_len > cap || hdr > cap - payload_len || iplen > UINT16_MAX)
        return TERN_ETRUNC;

    memcpy(frame, flow->eth_src, 6);
    memcpy(frame + 6, flow->eth_dst, 6);
    put16(frame + 12, flow->ip_version == 4 ? ETH_P_IPV4 : ETH_P_IPV6);
    uint8_t *ip = frame + XDP_FRAME_ETH_LEN;
    if (flow->ip_version == 4)
        write_ipv4(ip, flow, ulen);
    else
        write_ipv6(ip, flow, ulen);

    uint8_t *udp = frame + hdr - XDP_FRAME_UDP_LEN;
    put16(udp, flow->dport);
    put16(udp + 2, flow->sport);
    put16(udp + 4, (uint16_t)ulen);
    put16(udp + 6, 0);
    /* reply addresses: source is the query's destination */
    uint32_t sum = pseudo_sum(flow->ip_version, flow->dst, flow->src, (uint16_t)ulen);
    uint16_t csum = xdp_frame_csum_fold(xdp_frame_csum_add(sum, udp, ulen));
    put16(udp + 6, csum ? csum : 0xffff); /* 0 means "no checksum": send its equal, all ones */
    *frame_len = hdr + payload_len;
    return 0;
}
