/*
 * reflector.c — the benchmark floor: a UDP "server" that does no DNS work.
 *
 * It receives a batch of datagrams with recvmmsg(), sets the QR bit of each (so dnsperf counts it
 * as a response) and sends the batch back with sendmmsg(). Whatever a real server costs above this
 * program's CPU time per query is the price of its DNS work; the kernel's share of the UDP path is
 * the same for both.
 *
 * Usage: reflector ADDR:PORT   (IPv4 only; runs in the foreground until SIGINT/SIGTERM)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* 64 datagrams per syscall is what Knot and gdnsd use: past that the batch no longer fits in L1
 * and the saving per syscall is already below 1%. */
#define BATCH 64
/* A query never needs more; a longer datagram is truncated and reflected as is. */
#define BUF_LEN 1500
/* The same socket buffers as ternd's default (udp_rcvbuf, udp_sndbuf): under a CPU quota the socket
 * must absorb the throttled milliseconds, and the floor must not lose for a smaller buffer. */
#define SOCKBUF (4 << 20)

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static int parse_addr(const char *s, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof host)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port <= 0 || port > 65535)
        return -1;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct sockaddr_in sa;
    if (argc != 2 || parse_addr(argv[1], &sa) != 0) {
        fprintf(stderr, "usage: reflector ADDR:PORT\n");
        return 2;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        perror("reflector: socket/bind");
        return 1;
    }
    int sz = SOCKBUF;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) != 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) != 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    /* SA_RESTART off: a signal must interrupt the blocking recvmmsg. */
    struct sigaction act = {.sa_handler = on_signal};
    sigaction(SIGINT, &act, NULL);
    sigaction(SIGTERM, &act, NULL);

    static unsigned char bufs[BATCH][BUF_LEN];
    static struct mmsghdr msgs[BATCH];
    static struct iovec iovs[BATCH];
    static struct sockaddr_in peers[BATCH];

    while (!stop) {
        for (int i = 0; i < BATCH; i++) {
            iovs[i].iov_base = bufs[i];
            iovs[i].iov_len = BUF_LEN;
            msgs[i].msg_hdr = (struct msghdr){.msg_name = &peers[i],
                                              .msg_namelen = sizeof peers[i],
                                              .msg_iov = &iovs[i],
                                              .msg_iovlen = 1};
        }
        /* Block for the first datagram, then take whatever else is already queued. */
        int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("reflector: recvmmsg");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            if (msgs[i].msg_len >= 3)
                bufs[i][2] |= 0x80; /* QR */
            iovs[i].iov_len = msgs[i].msg_len;
        }
        for (int sent = 0; sent < n;) {
            int r = sendmmsg(fd, msgs + sent, (unsigned)(n - sent), 0);
            if (r < 0) {
                if (errno == EINTR)
                    continue;
                break; /* drop the rest of the batch, as a server would */
            }
            sent += r;
        }
    }
    close(fd);
    return 0;
}
