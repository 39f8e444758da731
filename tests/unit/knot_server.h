/*
 * knot_server.h — a real knotd for the unit tests (include after <cmocka.h>): a free loopback
 * port, a scratch directory, started and stopped by its PID only, every wait bounded. The
 * caller writes the rest of knot.conf after ksrv_conf_head() (keys, ACLs, zones) and names the
 * zone whose SOA answering NOERROR means "loaded". Header-only, like redis_server.h, so each
 * test stays one executable. knotd is a test dependency the README's test command installs:
 * its absence fails the test, it never skips.
 */
#ifndef TERN_TESTS_UNIT_KNOT_SERVER_H
#define TERN_TESTS_UNIT_KNOT_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

/* How long knotd may take to answer after start, or to exit after SIGTERM. */
#define KSRV_WAIT_MS 5000

typedef struct knot_server {
    pid_t pid; /* 0 when not running */
    uint16_t port;
    char dir[64];
    char knotd[256], knotc[256];
    char probe[256]; /* the zone whose SOA says knotd is ready ("up.test.") */
} knot_server_t;

/* Whether knotd answers probe's SOA with NOERROR (the zone is loaded) within 200 ms. */
static inline bool ksrv_answers(const knot_server_t *k)
{
    uint8_t q[300] = {0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    size_t n = 12;
    const char *s = k->probe;
    while (*s && *s != '.') { /* presentation to wire, plain labels only (test zones) */
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        q[n++] = (uint8_t)l;
        memcpy(q + n, s, l);
        n += l;
        s += l + (dot ? 1 : 0);
    }
    q[n++] = 0;
    q[n++] = 0;
    q[n++] = 6; /* SOA */
    q[n++] = 0;
    q[n++] = 1;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_storage ss;
    socklen_t sl = tu_sockaddr(&ss, AF_INET, "127.0.0.1", k->port);
    struct timeval tv = {0, 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    uint8_t buf[512];
    bool ok = sendto(fd, q, n, 0, (struct sockaddr *)&ss, sl) == (ssize_t)n &&
              recv(fd, buf, sizeof(buf), 0) >= 12 && buf[0] == 0x12 && buf[1] == 0x34 &&
              (buf[3] & 0x0f) == 0;
    close(fd);
    return ok;
}

/* Find knotd and knotc, make the scratch directory (with db/ for journals) and pick a port.
 * false (with a message) when knot is not installed. */
static inline bool ksrv_init(knot_server_t *k, const char *prefix, const char *probe)
{
    memset(k, 0, sizeof(*k));
    if (!tu_find_program("knotd", k->knotd, sizeof(k->knotd)) ||
        !tu_find_program("knotc", k->knotc, sizeof(k->knotc))) {
        fprintf(stderr, "knotd/knotc not found (install Debian's knot)\n");
        return false;
    }
    snprintf(k->probe, sizeof(k->probe), "%s", probe);
    tu_mkdtemp(k->dir, sizeof(k->dir), prefix);
    char db[128];
    snprintf(db, sizeof(db), "%s/db", k->dir);
    assert_int_equal(mkdir(db, 0755), 0);
    k->port = tu_free_port();
    return true;
}

/* The common part of knot.conf into out: server on the port with one worker of each kind,
 * storage, the control socket, warnings to stderr. The caller appends the rest. */
static inline int ksrv_conf_head(const knot_server_t *k, char *out, size_t len)
{
    return snprintf(out, len,
                    "server:\n"
                    "    rundir: \"%s\"\n"
                    "    listen: 127.0.0.1@%u\n"
                    "    udp-workers: 1\n"
                    "    tcp-workers: 1\n"
                    "    background-workers: 1\n"
                    "database:\n"
                    "    storage: \"%s/db\"\n"
                    "control:\n"
                    "    listen: \"%s/knot.sock\"\n"
                    "log:\n"
                    "  - target: stderr\n"
                    "    any: warning\n",
                    k->dir, k->port, k->dir, k->dir);
}

/* Start knotd on k->dir/knot.conf and wait until it serves the probe zone; false (after a
 * message naming its log) when it exits or does not answer in time. */
static inline bool ksrv_start(knot_server_t *k)
{
    char conf[128], log[128];
    snprintf(conf, sizeof(conf), "%s/knot.conf", k->dir);
    snprintf(log, sizeof(log), "%s/knotd.log", k->dir);
    const char *const argv[] = {k->knotd, "-c", conf, NULL};
    k->pid = tu_spawn(argv, log);
    int64_t deadline = tu_now_ms() + KSRV_WAIT_MS;
    while (!ksrv_answers(k)) {
        int st;
        if (waitpid(k->pid, &st, WNOHANG) == k->pid) {
            k->pid = 0;
            fprintf(stderr, "knotd exited at start (see %s)\n", log);
            return false;
        }
        if (tu_now_ms() > deadline) {
            fprintf(stderr, "knotd on port %u does not answer after %d ms (see %s)\n", k->port,
                    KSRV_WAIT_MS, log);
            return false;
        }
        tu_sleep_ms(20);
    }
    return true;
}

/* SIGTERM to our knotd (by PID) and wait until it has gone; SIGKILL if it does not. */
static inline void ksrv_stop(knot_server_t *k)
{
    if (!k->pid)
        return;
    kill(k->pid, SIGTERM);
    int64_t deadline = tu_now_ms() + KSRV_WAIT_MS;
    int st;
    while (waitpid(k->pid, &st, WNOHANG) != k->pid) {
        if (tu_now_ms() > deadline) {
            kill(k->pid, SIGKILL);
            waitpid(k->pid, &st, 0);
            break;
        }
        tu_sleep_ms(10);
    }
    k->pid = 0;
}

/* knotc COMMAND... against our knotd; its exit status (bounded by knotc's own timeout). */
static inline int ksrv_ctl(const knot_server_t *k, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "'%s' -t 5 -s '%s/knot.sock' %s >/dev/null 2>&1", k->knotc, k->dir,
             args);
    return system(cmd);
}

#endif
