/*
 * test_util.h — helpers shared by the unit tests (include after <cmocka.h>): a scratch directory,
 * files written into it atomically, and a socket address from text. Header-only, so each test
 * stays one executable.
 */
#ifndef TERN_TESTS_UNIT_TEST_UTIL_H
#define TERN_TESTS_UNIT_TEST_UTIL_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

/* dir (at least 32 bytes) becomes a fresh "/tmp/<prefix>-XXXXXX" directory. */
static inline void tu_mkdtemp(char *dir, size_t len, const char *prefix)
{
    snprintf(dir, len, "/tmp/%s-XXXXXX", prefix);
    assert_non_null(mkdtemp(dir));
}

/* Remove dir and everything in it. */
static inline void tu_rmtree(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* dir/name holds text afterwards, replaced in one rename as an operator's tools would. */
static inline void tu_write_file(const char *dir, const char *name, const char *text)
{
    char path[512], tmp[520];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, path), 0);
}

/* The sockaddr for addr (IPv4 or IPv6 text of the given family) and port; returns its length. */
static inline socklen_t tu_sockaddr(struct sockaddr_storage *ss, int family, const char *addr,
                                    uint16_t port)
{
    *ss = (struct sockaddr_storage){0};
    if (family == AF_INET) {
        struct sockaddr_in *sa = (struct sockaddr_in *)ss;
        sa->sin_family = AF_INET;
        sa->sin_port = htons(port);
        assert_int_equal(inet_pton(AF_INET, addr, &sa->sin_addr), 1);
        return sizeof(*sa);
    }
    struct sockaddr_in6 *sa = (struct sockaddr_in6 *)ss;
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(port);
    assert_int_equal(inet_pton(AF_INET6, addr, &sa->sin6_addr), 1);
    return sizeof(*sa);
}

/* Run argv[0] (a path, or a name looked up in PATH) as a child that dies with the test
 * (PR_SET_PDEATHSIG: a crashed test leaves no server behind), stdin from /dev/null, stdout and
 * stderr appended to log (NULL: /dev/null). Returns its pid; stop it by that pid. */
static inline pid_t tu_spawn(const char *const argv[], const char *log)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        int null = open("/dev/null", O_RDWR);
        int out = log ? open(log, O_WRONLY | O_CREAT | O_APPEND, 0644) : null;
        if (null >= 0)
            dup2(null, 0);
        if (out >= 0) {
            dup2(out, 1);
            dup2(out, 2);
        }
        execvp(argv[0], (char *const *)(uintptr_t)argv);
        _exit(127);
    }
    return pid;
}

/* The monotonic clock in milliseconds, and a sleep of ms milliseconds (for bounded polls). */
static inline int64_t tu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void tu_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A loopback port free for both UDP and TCP right now (bounded tries). */
static inline uint16_t tu_free_port(void)
{
    for (int tries = 0; tries < 50; tries++) {
        int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        assert_true(u >= 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(bind(u, (struct sockaddr *)&sa, sizeof(sa)), 0);
        socklen_t sl = sizeof(sa);
        assert_int_equal(getsockname(u, (struct sockaddr *)&sa, &sl), 0);
        int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(t >= 0);
        int ok = bind(t, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        close(t);
        close(u);
        if (ok)
            return ntohs(sa.sin_port);
    }
    fail_msg("no free loopback port");
    return 0;
}

/* An executable at /usr/sbin/<name> or on PATH into out; 0 when there is none. */
static inline int tu_find_program(const char *name, char *out, size_t outlen)
{
    snprintf(out, outlen, "/usr/sbin/%s", name);
    if (access(out, X_OK) == 0)
        return 1;
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        snprintf(out, outlen, "%.*s/%s", (int)n, path, name);
        if (access(out, X_OK) == 0)
            return 1;
        path = end ? end + 1 : NULL;
    }
    return 0;
}

/* In a forked child only: a private mount namespace with a tmpfs on /dev and a datagram
 * socket bound at /dev/log, for a test to read what a syslog target sends (root only: the
 * namespace needs CAP_SYS_ADMIN). The socket, or -1. */
static inline int tu_fake_dev_log(void)
{
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("tmpfs", "/dev", "tmpfs", 0, "size=64k") < 0)
        return -1;
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = "/dev/log"};
    if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -1;
    struct timeval tv = {.tv_sec = 2}; /* a bound on every recv() of the test */
    (void)setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return s;
}

/* fn(s) in a forked child with tu_fake_dev_log()'s socket s, its result the child's exit
 * status, which must be 0. Skipped unless root. */
static inline void tu_with_fake_dev_log(int (*fn)(int s))
{
    if (geteuid() != 0)
        skip();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int s = tu_fake_dev_log();
        _exit(s < 0 ? 99 : fn(s));
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

#endif
