/*
 * spoof.c — a paced UDP query flood from random source addresses (the spoofed-source case of
 * bench/limit.py), over a raw socket on loopback only.
 *
 *   spoof -p PORT -d FILE -Q QPS -l SECS [-s 127.16.0.0/12] [-v VPORT]
 *
 * Every query goes to 127.0.0.1:PORT from a random address of the -s prefix (which must lie in
 * 127.0.0.0/8: the answers stay on this machine) and a random port, with EDNS (1232). FILE is
 * dnsperf's format ("name type" per line); its lines are used in turn. Queries go out in
 * sendmmsg() batches of up to 64, paced to QPS, for SECS seconds.
 *
 * Without -v the answers go to addresses nobody listens on. With -v (the reflection case: the
 * flood spoofs one victim), every query comes from port VPORT of the -s address (give a /32),
 * where spoof itself listens as the victim and counts what the server sends it: answers, how
 * many of them truncated (TC), and their bytes against the bytes of the queries (DNS payloads,
 * the amplification), until half a second after the last query.
 *
 * Prints "sent N in S s (F not taken by the kernel)" and, with -v, "victim: received R
 * responses (T truncated), B bytes for Q query bytes". Needs root (CAP_NET_RAW).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define MAXQ  300 /* IPv4 + UDP headers and a query with a name of at most 255 octets */

typedef struct {
    uint8_t dns[MAXQ];
    size_t len;
} query_t;

static const struct {
    const char *name;
    uint16_t code;
} types[] = {{"A", 1},       {"NS", 2},    {"CNAME", 5}, {"SOA", 6},  {"PTR", 12},
             {"MX", 15},     {"TXT", 16},  {"AAAA", 28}, {"SRV", 33}, {"DS", 43},
             {"DNSKEY", 48}, {"CAA", 257}, {"ANY", 255}};

static int type_code(const char *s)
{
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcasecmp(s, types[i].name) == 0)
            return types[i].code;
    return -1;
}

/* The DNS message for "name type" (id 0, RD 0, EDNS 1232); 0 on success. */
static int build(query_t *q, const char *name, int type)
{
    uint8_t *p = q->dns, *end = q->dns + MAXQ - 28 - 4 - 11;
    memset(p, 0, 12);
    p[5] = 1;  /* QDCOUNT */
    p[11] = 1; /* ARCOUNT: the OPT record */
    p += 12;
    const char *s = name;
    while (*s && !(s[0] == '.' && s[1] == 0)) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        if (n == 0 || n > 63 || p + 1 + n >= end)
            return -1;
        *p++ = (uint8_t)n;
        memcpy(p, s, n);
        p += n;
        s += n + (dot ? 1 : 0);
    }
    *p++ = 0;
    *p++ = (uint8_t)(type >> 8);
    *p++ = (uint8_t)type;
    *p++ = 0;
    *p++ = 1; /* IN */
    /* OPT: root owner, type 41, class = UDP size 1232, TTL 0, no options */
    const uint8_t opt[11] = {0, 0, 41, 1232 >> 8, 1232 & 0xff, 0, 0, 0, 0, 0, 0};
    memcpy(p, opt, sizeof(opt));
    p += sizeof(opt);
    q->len = (size_t)(p - q->dns);
    return 0;
}

static query_t *load(const char *path, size_t *n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "spoof: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1024, cnt = 0;
    query_t *qs = malloc(cap * sizeof(*qs));
    char line[512], name[300], type[32];
    unsigned lineno = 0;
    while (qs && fgets(line, sizeof(line), f)) {
        lineno++;
        if (line[0] == '#' || line[0] == ';' || isspace((unsigned char)line[0]))
            continue;
        int code;
        if (sscanf(line, "%299s %31s", name, type) != 2 || (code = type_code(type)) < 0 ||
            (cnt == cap && !(qs = realloc(qs, (cap *= 2) * sizeof(*qs)))) ||
            build(&qs[cnt], name, code) != 0) {
            fprintf(stderr, "spoof: %s:%u: cannot use this line\n", path, lineno);
            free(qs);
            fclose(f);
            return NULL;
        }
        cnt++;
    }
    fclose(f);
    if (qs && cnt == 0) {
        fprintf(stderr, "spoof: %s: no queries\n", path);
        free(qs);
        return NULL;
    }
    *n = cnt;
    return qs;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* xorshift64*: addresses, ports and ids need spread, not secrecy */
static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state >> 12;
    rnd_state ^= rnd_state << 25;
    rnd_state ^= rnd_state >> 27;
    return rnd_state * 2685821657736338717ull;
}

/* what the victim received (-v) */
static unsigned long long v_resp, v_tc, v_bytes;

static void victim_drain(int vfd)
{
    static uint8_t bufs[BATCH][1500];
    struct iovec iov[BATCH];
    struct mmsghdr m[BATCH];
    for (;;) {
        memset(m, 0, sizeof(m));
        for (int i = 0; i < BATCH; i++) {
            iov[i].iov_base = bufs[i];
            iov[i].iov_len = sizeof(bufs[i]);
            m[i].msg_hdr.msg_iov = &iov[i];
            m[i].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(vfd, m, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0)
            return;
        for (int i = 0; i < n; i++) {
            v_resp++;
            v_bytes += m[i].msg_len;
            if (m[i].msg_len >= 4 && (bufs[i][2] & 0x02))
                v_tc++;
        }
    }
}

int main(int argc, char **argv)
{
    int port = 0, opt;
    const char *file = NULL, *prefix = "127.16.0.0/12";
    double qps = 0, secs = 0;
    int vport = 0;
    while ((opt = getopt(argc, argv, "p:d:Q:l:s:v:")) != -1) {
        switch (opt) {
        case 'p':
            port = atoi(optarg);
            break;
        case 'd':
            file = optarg;
            break;
        case 'Q':
            qps = atof(optarg);
            break;
        case 'l':
            secs = atof(optarg);
            break;
        case 's':
            prefix = optarg;
            break;
        case 'v':
            vport = atoi(optarg);
            break;
        default:
            goto usage;
        }
    }
    char pbuf[64];
    snprintf(pbuf, sizeof(pbuf), "%s", prefix);
    char *slash = strchr(pbuf, '/');
    struct in_addr base;
    int plen = slash ? atoi(slash + 1) : 32;
    if (slash)
        *slash = 0;
    if (port <= 0 || port > 65535 || !file || qps <= 0 || secs <= 0 || secs > 600 ||
        inet_pton(AF_INET, pbuf, &base) != 1 || plen < 8 || plen > 32 || vport < 0 ||
        vport > 65535 || (vport && plen != 32))
        goto usage;
    uint32_t net = ntohl(base.s_addr), mask = plen == 32 ? 0xffffffffu : ~(0xffffffffu >> plen);
    if ((net & 0xff000000u) != 0x7f000000u) {
        fprintf(stderr, "spoof: %s is not in 127.0.0.0/8: loopback only\n", prefix);
        return 2;
    }
    net &= mask;

    size_t nq;
    query_t *qs = load(file, &nq);
    if (!qs)
        return 1;
    int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW); /* IPPROTO_RAW implies IP_HDRINCL */
    if (fd < 0) {
        fprintf(stderr, "spoof: raw socket: %s (needs root)\n", strerror(errno));
        return 1;
    }
    rnd_state ^= (uint64_t)getpid() << 17 ^ (uint64_t)time(NULL);
    int vfd = -1;
    if (vport) {
        struct sockaddr_in va = {.sin_family = AF_INET, .sin_port = htons((uint16_t)vport)};
        va.sin_addr.s_addr = htonl(net);
        int big = 8 << 20;
        if ((vfd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0)) < 0 ||
            setsockopt(vfd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) < 0 ||
            bind(vfd, (struct sockaddr *)&va, sizeof(va)) < 0) {
            fprintf(stderr, "spoof: victim socket %s:%d: %s\n", pbuf, vport, strerror(errno));
            return 1;
        }
    }

    static uint8_t pkt[BATCH][MAXQ];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    dst.sin_addr.s_addr = htonl(0x7f000001u);
    memset(msgs, 0, sizeof(msgs));

    unsigned long long sent = 0, failed = 0, qbytes = 0;
    size_t next = 0;
    double start = now_s(), end = start + secs;
    for (;;) {
        double t = now_s();
        if (t >= end)
            break;
        if (vfd >= 0)
            victim_drain(vfd);
        long long due = (long long)((t - start) * qps) - (long long)sent;
        if (due <= 0) {
            struct timespec ns = {0, 200000};
            nanosleep(&ns, NULL);
            continue;
        }
        int n = due < BATCH ? (int)due : BATCH;
        for (int i = 0; i < n; i++) {
            const query_t *q = &qs[next++ % nq];
            uint8_t *p = pkt[i];
            uint32_t src = net | ((uint32_t)rnd() & ~mask);
            if (src == 0x7f000001u)
                src = net | 2;
            size_t ulen = 8 + q->len;
            struct iphdr *ip = (struct iphdr *)p;
            memset(ip, 0, sizeof(*ip));
            ip->version = 4;
            ip->ihl = 5;
            ip->ttl = 64;
            ip->protocol = IPPROTO_UDP;
            ip->saddr = htonl(src);
            ip->daddr = dst.sin_addr.s_addr;
            /* tot_len, id and the header checksum are the kernel's with IP_HDRINCL */
            struct udphdr *udp = (struct udphdr *)(p + 20);
            udp->source = htons(vport ? (uint16_t)vport : (uint16_t)(1024 + rnd() % 64000));
            udp->dest = htons((uint16_t)port);
            udp->len = htons((uint16_t)ulen);
            udp->check = 0; /* optional over IPv4 */
            memcpy(p + 28, q->dns, q->len);
            uint16_t id = (uint16_t)rnd();
            p[28] = (uint8_t)(id >> 8);
            p[29] = (uint8_t)id;
            iov[i].iov_base = p;
            iov[i].iov_len = 20 + ulen;
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = &dst;
            msgs[i].msg_hdr.msg_namelen = sizeof(dst);
        }
        int k = sendmmsg(fd, msgs, (unsigned)n, 0);
        if (k < 0) {
            if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
                fprintf(stderr, "spoof: sendmmsg: %s\n", strerror(errno));
                return 1;
            }
            failed += (unsigned)n;
            sent += (unsigned)n; /* paced as if sent: a full queue must not turn into a burst */
            continue;
        }
        sent += (unsigned)k;
        for (int i = 0; i < k; i++)
            qbytes += iov[i].iov_len - 28;
    }
    double took = now_s() - start;
    printf("sent %llu in %.2f s (%llu not taken by the kernel)\n", sent - failed, took, failed);
    if (vfd >= 0) {
        for (double until = now_s() + 0.5; now_s() < until;) {
            victim_drain(vfd);
            struct timespec ns = {0, 1000000};
            nanosleep(&ns, NULL);
        }
        printf("victim: received %llu responses (%llu truncated), %llu bytes for %llu query "
               "bytes\n",
               v_resp, v_tc, v_bytes, qbytes);
        close(vfd);
    }
    close(fd);
    free(qs);
    return 0;
usage:
    fprintf(stderr, "usage: spoof -p PORT -d FILE -Q QPS -l SECS [-s 127.16.0.0/12] [-v VPORT]\n");
    return 2;
}
