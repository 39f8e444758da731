/*
 * xdp_prog.bpf.c — the XDP program of the AF_XDP listener: UDP to a served port goes to the
 * XSK socket of the receiving queue, everything else to the kernel stack.
 *
 * Built with `clang -target bpf` at build time (src/net/CMakeLists.txt) into tern_xdp.bpf.o,
 * loaded and attached by the user-space loader (libxdp/libbpf), which fills both maps:
 *   tern_xdp_ports  UDP destination ports served over XDP (key: port in network byte order);
 *   tern_xdp_xsks   one AF_XDP socket per receive queue (key: queue index);
 * and counts what it decided in tern_xdp_stats (per CPU, summed by the reader; TERN_XDP_STAT_*).
 * A queue with no socket in tern_xdp_xsks passes its frames to the stack (the redirect's
 * fallback action), so attaching before the sockets exist loses nothing.
 *
 * Passed to the stack, never redirected: VLAN-tagged frames (the kernel owns the VLAN devices),
 * non-IP, TCP, ICMP, other ports, IPv4 and IPv6 fragments (a DNS worker cannot reassemble them),
 * IPv4 with a bad header length, IPv6 with more extension headers than TERN_XDP_EXT_MAX. The
 * program checks only what it needs to route a frame; user space validates lengths and checksums
 * again (xdp_frame.c), so a frame this program lets through may still be refused there.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

/* Extension headers skipped before the UDP header: real queries carry none or one (hop-by-hop);
 * the verifier needs a bound, and 4 is well above what a resolver sends. */
#define TERN_XDP_EXT_MAX 4
/* More queues than any NIC tern runs on today has (ixgbe 64, i40e/ice 64-256 with one per CPU):
 * the map is an array of socket pointers, 8 bytes each. */
#define TERN_XDP_QUEUES_MAX 256
/* Served ports: a server listens on a handful (53, maybe a second service port). */
#define TERN_XDP_PORTS_MAX 16

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, TERN_XDP_QUEUES_MAX);
    __type(key, __u32);
    __type(value, __u32);
} tern_xdp_xsks SEC(".maps");

/* Indices of tern_xdp_stats; user space mirrors them (xdp.h). */
enum {
    TERN_XDP_STAT_REDIRECT = 0,  /* handed to the queue's XSK socket */
    TERN_XDP_STAT_NO_SOCKET = 1, /* ours, but no socket on that queue: passed to the stack */
    TERN_XDP_STAT_PASS = 2,      /* not ours: passed to the stack */
    TERN_XDP_STAT_COUNT = 3,
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, TERN_XDP_STAT_COUNT);
    __type(key, __u32);
    __type(value, __u64);
} tern_xdp_stats SEC(".maps");

/* Count one decision and return its action. */
static __always_inline int count(__u32 stat, int action)
{
    __u64 *n = bpf_map_lookup_elem(&tern_xdp_stats, &stat);
    if (n)
        *n += 1; /* per CPU: no other writer */
    return action;
}

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, TERN_XDP_PORTS_MAX);
    __type(key, __u16);
    __type(value, __u8);
} tern_xdp_ports SEC(".maps");

/* IPv4 "more fragments" flag and fragment offset mask, in host order of frag_off. */
#define TERN_IP_MF      0x2000
#define TERN_IP_OFFMASK 0x1fff

/* Finds the UDP header of an IPv4 packet at l3, or NULL (not UDP, fragment, bad header). */
static __always_inline struct udphdr *udp_of_ipv4(void *l3, void *end)
{
    struct iphdr *ip = l3;
    if ((void *)(ip + 1) > end || ip->ihl < 5 || ip->protocol != IPPROTO_UDP)
        return NULL;
    if (bpf_ntohs(ip->frag_off) & (TERN_IP_MF | TERN_IP_OFFMASK))
        return NULL;
    struct udphdr *udp = (void *)ip + ip->ihl * 4;
    if ((void *)(udp + 1) > end)
        return NULL;
    return udp;
}

/* Finds the UDP header of an IPv6 packet at l3 past its extension headers, or NULL (not UDP,
 * fragment, too many extension headers, truncated). */
static __always_inline struct udphdr *udp_of_ipv6(void *l3, void *end)
{
    struct ipv6hdr *ip6 = l3;
    if ((void *)(ip6 + 1) > end)
        return NULL;
    __u8 next = ip6->nexthdr;
    void *p = ip6 + 1;
#pragma unroll
    for (int i = 0; i < TERN_XDP_EXT_MAX; i++) {
        if (next != IPPROTO_HOPOPTS && next != IPPROTO_ROUTING && next != IPPROTO_DSTOPTS)
            break;
        /* Generic extension header: next header, length in 8-octet units not counting the
         * first 8. (Fragment headers, IPPROTO_FRAGMENT, end the walk and are passed.) */
        __u8 *ext = p;
        if ((void *)(ext + 2) > end)
            return NULL;
        next = ext[0];
        p = ext + ((__u32)ext[1] + 1) * 8;
    }
    if (next != IPPROTO_UDP)
        return NULL;
    struct udphdr *udp = p;
    if ((void *)(udp + 1) > end)
        return NULL;
    return udp;
}

SEC("xdp")
int tern_xdp(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end)
        return count(TERN_XDP_STAT_PASS, XDP_PASS);

    struct udphdr *udp;
    if (eth->h_proto == bpf_htons(ETH_P_IP))
        udp = udp_of_ipv4(eth + 1, end);
    else if (eth->h_proto == bpf_htons(ETH_P_IPV6))
        udp = udp_of_ipv6(eth + 1, end);
    else
        udp = NULL; /* ARP, VLAN (802.1Q/802.1ad), everything else */
    if (!udp)
        return count(TERN_XDP_STAT_PASS, XDP_PASS);

    __u16 port = udp->dest;
    if (!bpf_map_lookup_elem(&tern_xdp_ports, &port))
        return count(TERN_XDP_STAT_PASS, XDP_PASS);
    /* The low bits of flags are the action when the queue has no socket (kernel >= 5.3). */
    int action = bpf_redirect_map(&tern_xdp_xsks, ctx->rx_queue_index, XDP_PASS);
    return count(action == XDP_REDIRECT ? TERN_XDP_STAT_REDIRECT : TERN_XDP_STAT_NO_SOCKET, action);
}

char _license[] SEC("license") = "Dual BSD/GPL";
