/*
 * xdp_echo.c — the AF_XDP listener end to end without ternd: attach the XDP program to an
 * interface, serve its queue 0 and echo every DNS query back as a response (QR set, nothing else
 * changed), until SIGTERM or SIGINT; then close the socket and detach. Used by test_xdp.py in
 * network namespaces; prints "ready zero_copy=<0|1>" once serving and its counters on exit.
 *
 *   xdp_echo <ifname> <tern_xdp.bpf.o> <port>
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/net/xdp.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

/* Echo: each query becomes its own response (QR set). Too short for a DNS header: no reply. */
static void echo(void *arg, xdp_query_t *qs, unsigned n)
{
    (void)arg;
    for (unsigned i = 0; i < n; i++) {
        if (qs[i].len < 12 || qs[i].len > qs[i].cap)
            continue;
        qs[i].buf[2] |= 0x80;
        qs[i].out = qs[i].len;
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: xdp_echo <ifname> <bpf object> <port>\n");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    uint16_t port = (uint16_t)atoi(argv[3]);
    char err[256] = "";
    xdp_t *x = NULL;
    xdp_sock_t *s = NULL;
    int rc = xdp_attach(argv[1], argv[2], &port, 1, &x, err, sizeof err);
    if (rc == 0)
        rc = xdp_sock_open(x, 0, &s, err, sizeof err);
    if (rc) {
        fprintf(stderr, "xdp_echo: %s\n", err);
        xdp_detach(x);
        return 1;
    }
    printf("ready zero_copy=%d\n", xdp_sock_zero_copy(s));
    fflush(stdout);
    while (!stop)
        if (xdp_sock_poll(s, 100, echo, NULL) < 0)
            break;
    const xdp_sock_stats_t *st = xdp_sock_stats(s);
    printf("rx=%llu tx=%llu not_ours=%llu no_answer=%llu tx_full=%llu fill_short=%llu\n",
           (unsigned long long)st->rx, (unsigned long long)st->tx, (unsigned long long)st->not_ours,
           (unsigned long long)st->no_answer, (unsigned long long)st->tx_full,
           (unsigned long long)st->fill_short);
    xdp_sock_close(s);
    xdp_detach(x);
    return 0;
}
