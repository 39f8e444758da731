/*
 * http_responder.c — the "local HTTP servers" of bench/health.py: one epoll thread that answers
 * every HTTP request on PORT, whatever loopback address it was sent to, with 200 and closes.
 *
 *   http_responder PORT [SECONDS]
 *
 * Listening on 0.0.0.0 makes every address of 127/8 a server, so 10,000 health-checked
 * endpoints (127.1.x.y) need one process. The request head is read up to its blank line (or
 * 2 KiB), then "HTTP/1.1 200 OK" with no body is written and the connection closed, as a health
 * page of a load balancer would. Prints the number of requests answered when it stops (SIGTERM,
 * SIGINT, or after SECONDS, default 3600). Not a general HTTP server: a benchmark fixture.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXFD    65536
#define HEAD_MAX 2048

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

struct conn {
    unsigned len;
    char buf[HEAD_MAX];
};

static struct conn *conns[MAXFD];

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: http_responder PORT [SECONDS]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    time_t end = time(NULL) + (argc > 2 ? atol(argv[2]) : 3600);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 4096) < 0) {
        perror("bind/listen");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    unsigned long answered = 0;
    struct epoll_event evs[256];
    while (!stop && time(NULL) < end) {
        int n = epoll_wait(ep, evs, 256, 200);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == lfd) {
                for (;;) {
                    int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
                    if (c < 0)
                        break;
                    if (c >= MAXFD || !(conns[c] = calloc(1, sizeof(struct conn)))) {
                        close(c);
                        continue;
                    }
                    struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
                }
                continue;
            }
            struct conn *k = conns[fd];
            ssize_t r = read(fd, k->buf + k->len, HEAD_MAX - 1 - k->len);
            if (r > 0) {
                k->len += (unsigned)r;
                k->buf[k->len] = '\0';
                if (!strstr(k->buf, "\r\n\r\n") && k->len < HEAD_MAX - 1)
                    continue;
                (void)!write(fd, resp, sizeof(resp) - 1);
                answered++;
            } else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
                continue;
            }
            close(fd);
            free(k);
            conns[fd] = NULL;
        }
    }
    printf("%lu\n", answered);
    return 0;
}
