/*
 * xdp_frame.h — the Ethernet/IP/UDP headers of the AF_XDP listener: reading a query frame and
 * writing its reply frame in place, with no kernel in between.
 *
 * Owner: the net module's AF_XDP path (issue 34). Pure functions over caller-owned bytes: no
 * allocation, no syscall, no global state; any thread, any number at once. Every read and write
 * is bounds-checked against the length or capacity given.
 *
 * What is ours: an untagged Ethernet II frame carrying IPv4 (options allowed) or IPv6 (hop-by-hop,
 * routing and destination-options extension headers skipped) and UDP to the served port. Not
 * ours, and refused here so that a frame the BPF program should have passed is dropped rather
 * than misread: VLAN-tagged frames (the BPF program passes them to the kernel, which owns the
 * VLAN devices), other ethertypes, other protocols, fragments (IPv4 MF/offset, IPv6 fragment
 * header: a worker cannot reassemble), other ports.
 *
 * Checksums: the IPv4 header checksum is verified on read (software always computes it in full).
 * The UDP checksum is NOT verified by xdp_frame_parse(): a frame from the local stack over veth,
 * or from a NIC with TX offload on the sender's side, may carry only the pseudo-header's partial
 * sum (CHECKSUM_PARTIAL), and XDP sees it before anything completes it. xdp_frame_udp_ok() checks
 * it where the caller knows sums are complete. Replies always carry full IPv4 header and UDP
 * checksums (UDP over IPv6 requires one).
 *
 * A reply's headers have a fixed length per IP version (no IPv4 options, no IPv6 extension
 * headers): the caller writes the reply's DNS payload at xdp_frame_hdr_len(flow) from the frame's
 * start (which may overlap the query's payload; move it first when the query had options or
 * extension headers) and then calls xdp_frame_write().
 */
#ifndef TERN_NET_XDP_FRAME_H
#define TERN_NET_XDP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XDP_FRAME_ETH_LEN 14
#define XDP_FRAME_IP4_LEN 20
#define XDP_FRAME_IP6_LEN 40
#define XDP_FRAME_UDP_LEN 8
/* IPv6 extension headers skipped before UDP: real queries carry none, or one hop-by-hop header;
 * the bound keeps a hostile chain from costing more than a few reads (the BPF program stops at
 * 4, so this is a margin, not a limit anyone meets). */
#define XDP_FRAME_EXT_MAX 8

/* The addresses and ports of a query as received (src is the client). */
typedef struct xdp_frame_flow {
    uint8_t eth_src[6];
    uint8_t eth_dst[6];
    uint8_t ip_version; /* 4 or 6 */
    uint8_t src[16];    /* IPv4: the first 4 bytes; network byte order */
    uint8_t dst[16];
    uint16_t sport; /* host byte order */
    uint16_t dport;
    uint32_t l4_off;      /* offset of the UDP header in the query frame */
    uint32_t payload_off; /* offset of the UDP payload in the query frame */
    uint16_t payload_len;
} xdp_frame_flow_t;

/**
 * Parse a received frame of len bytes: fills *flow (payload at frame + flow->payload_off,
 * flow->payload_len bytes) when it is UDP to port (host byte order; 0: any port, for callers
 * behind the BPF program, which already chose by port).
 * Returns 0; TERN_EMALF when truncated or inconsistent (lengths, IPv4 header checksum, version,
 * UDP source port 0); TERN_ENOTSUP when not ours (VLAN, other ethertype or protocol, fragment,
 * too many or unknown IPv6 extension headers); TERN_ENOENT for UDP to another port.
 */
int xdp_frame_parse(const uint8_t *frame, size_t len, uint16_t port, xdp_frame_flow_t *flow);

/** Whether the UDP checksum of a parsed frame is right (IPv4: 0 means "none" and is accepted;
 * IPv6: 0 is refused, RFC 8200 8.1). */
bool xdp_frame_udp_ok(const uint8_t *frame, const xdp_frame_flow_t *flow);

/** Length of the reply's Ethernet, IP and UDP headers for flow's IP version (42 or 62): where the
 * reply's payload starts. */
size_t xdp_frame_hdr_len(const xdp_frame_flow_t *flow);

/**
 * Write the reply's headers at the start of frame (cap bytes) around the payload_len bytes the
 * caller put at xdp_frame_hdr_len(flow): MACs, addresses and ports swapped from flow, lengths,
 * IPv4 header checksum (DF set, ID 0: RFC 6864 atomic datagram), UDP checksum (IPv4 and IPv6).
 * Sets *frame_len to the frame's length. Returns 0, or TERN_ETRUNC when the headers and payload
 * exceed cap or an IP/UDP length field (nothing written).
 */
int xdp_frame_write(uint8_t *frame, size_t cap, const xdp_frame_flow_t *flow, size_t payload_len,
                    size_t *frame_len);

/** The Internet checksum (RFC 1071) of len bytes added to sum: the ones' complement sum before
 * negation, kept below 2^17 so calls chain (pseudo-header, then header and payload); every chunk
 * but the last must have an even length. */
uint32_t xdp_frame_csum_add(uint32_t sum, const uint8_t *data, size_t len);

/** Fold a chained sum to 16 bits and negate it: the value a checksum field carries (host byte
 * order). */
uint16_t xdp_frame_csum_fold(uint32_t sum);

#endif
