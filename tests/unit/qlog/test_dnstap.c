/*
 * test_dnstap.c — the dnstap sink against the real tools: fstrm_capture (fstrm-bin) reads the
 * Frame Streams on a UNIX socket with the bidirectional handshake, and dnstap-read
 * (bind9-dnsutils) decodes what it captured, and the sink's own files, to YAML that the tests
 * check message by message. Both tools are test dependencies: missing, the tests fail.
 *
 * Every wait is bounded; children are started and stopped by their PID only, and die with the
 * test (PR_SET_PDEATHSIG).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tern/qlog/dnstap.h"

#include "qlog_test_util.h"
#include "test_util.h"

/* How long a child may take to start listening, to exit after a signal, or to decode a file;
 * and how long the sink may take to deliver (fstrm flushes at least every second) or to count
 * 20,000 messages lost without a reader: generous, for the sanitizer builds (a bound, not a
 * timing assertion: the waits return as soon as the condition holds). */
#define WAIT_MS 30000

#define MAX_MSGS 64

/* ---- time ---- */

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the tools ---- */

/* name's path in PATH (or the usual directories), into buf; fails the test when absent. */
static const char *tool(const char *name, const char *package, char *buf, size_t len)
{
    const char *env = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof(dirs), "%s:/usr/local/bin:/usr/bin:/bin:/usr/sbin", env ? env : "");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(buf, len, "%s/%s", d, name);
        if (access(buf, X_OK) == 0)
            return buf;
    }
    fail_msg("%s not found: it is a test dependency (Debian package %s)", name, package);
    return NULL;
}

/* Wait (bounded) for pid to exit after sig; SIGKILL when it does not. Returns its wait status. */
static int stop_pid(pid_t pid, int sig)
{
    kill(pid, SIGCONT); /* a stopped child must be able to act on the signal */
    kill(pid, sig);
    int64_t deadline = tu_now_ms() + WAIT_MS;
    int st = 0;
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (tu_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("pid %d did not exit within %d ms of signal %d", (int)pid, WAIT_MS, sig);
        }
        tu_sleep_ms(10);
    }
    return st;
}

/* True when a UNIX stream socket is listening on path (/proc/net/unix: __SO_ACCEPTCON). */
static bool unix_listening(const char *path)
{
    FILE *f = fopen("/proc/net/unix", "r");
    assert_non_null(f);
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned long flags;
        char p[256] = "";
        if (sscanf(line, "%*s %*s %*s %lx %*s %*s %*s %255s", &flags, p) == 2)
            found = strcmp(p, path) == 0 && (flags & 0x10000);
    }
    fclose(f);
    return found;
}

/* A running fstrm_capture: its PID, output file and log (its stderr). */
typedef struct capture {
    pid_t pid;
    char out[PATH_MAX];
    char log[PATH_MAX];
} capture_t;

/* Start fstrm_capture reading dnstap on sock, writing dir/out; returns once it listens. */
static void cap_start(capture_t *c, const char *dir, const char *sock, const char *out)
{
    char bin[PATH_MAX];
    tool("fstrm_capture", "fstrm-bin", bin, sizeof(bin));
    snprintf(c->out, sizeof(c->out), "%s/%s", dir, out);
    snprintf(c->log, sizeof(c->log), "%s/%s.log", dir, out);
    const char *const argv[] = {bin,    "-t", "protobuf:dnstap.Dnstap", "-u", sock, "-w",
                                c->out, NULL};
    (void)unlink(c->log); /* a fresh log per start, as before */
    pid_t pid = tu_spawn(argv, c->log);
    c->pid = pid;
    int64_t deadline = tu_now_ms() + WAIT_MS;
    while (!unix_listening(sock)) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            c->pid = 0;
            fail_msg("fstrm_capture exited at start (see %s)", c->log);
        }
        if (tu_now_ms() > deadline)
            fail_msg("fstrm_capture does not listen on %s after %d ms", sock, WAIT_MS);
        tu_sleep_ms(10);
    }
}

/* SIGTERM: fstrm_capture writes the STOP frame, closes its file and exits 0. */
static void cap_stop(capture_t *c)
{
    int st = stop_pid(c->pid, SIGTERM);
    c->pid = 0;
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* The reader disappears: SIGKILL, nothing finished. */
static void cap_kill(capture_t *c)
{
    stop_pid(c->pid, SIGKILL);
    c->pid = 0;
}

/* `dnstap-read -y file`: its output (malloc'd). It exits 0 even when it cannot read the file,
 * saying so on stderr: the test fails on any line of its own ("dnstap-read: ..."). */
static char *dnstap_read(const char *file)
{
    char bin[PATH_MAX];
    tool("dnstap-read", "bind9-dnsutils", bin, sizeof(bin));
    int pfd[2];
    assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        execl(bin, "dnstap-read", "-y", file, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    size_t cap = 65536, len = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    int64_t deadline = tu_now_ms() + WAIT_MS;
    for (;;) {
        int64_t left = deadline - tu_now_ms();
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fail_msg("dnstap-read %s: no end after %d ms", file, WAIT_MS);
        }
        if (len + 4096 > cap) {
            cap *= 2;
            out = realloc(out, cap);
            assert_non_null(out);
        }
        ssize_t n = read(pfd[0], out + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        assert_true(n >= 0);
        if (n == 0)
            break;
        len += (size_t)n;
    }
    out[len] = '\0';
    close(pfd[0]);
    int st = stop_pid(pid, 0); /* signal 0: only wait, bounded */
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("dnstap-read -y %s failed (status %d)", file, st);
    const char *e = strstr(out, "dnstap-read: ");
    if (e && (e == out || e[-1] == '\n'))
        fail_msg("dnstap-read -y %s: %s", file, e + strlen("dnstap-read: "));
    return out;
}

/* ---- dnstap-read's YAML, one message per document ---- */

typedef struct tap_msg {
    char identity[64], version[64];
    char type[24];            /* AUTH_QUERY, AUTH_RESPONSE */
    char family[8], proto[8]; /* INET/INET6, UDP/TCP */
    char qaddr[64], raddr[64];
    unsigned qport, rport;
    unsigned size;     /* message_size: bytes of the DNS message it carries */
    bool qtime, rtime; /* query_time / response_time present */
    bool qmsg, rmsg;   /* query_message / response_message present */
    char status[16];   /* the carried message's rcode */
    unsigned answers;
    char question[128]; /* "www.example.com. IN A" */
} tap_msg_t;

/* line is "<key><value>": copy value (without double quotes) to out. */
static bool field(const char *line, const char *key, char *out, size_t len)
{
    size_t k = strlen(key);
    if (strncmp(line, key, k) != 0)
        return false;
    const char *v = line + k;
    size_t n = strlen(v);
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v++;
        n -= 2;
    }
    snprintf(out, len, "%.*s", (int)n, v);
    return true;
}

/* Decode file with dnstap-read into m (up to max); returns the number of messages. */
static int tap_read(const char *file, tap_msg_t *m, int max)
{
    char *text = dnstap_read(file);
    int n = 0;
    tap_msg_t *cur = NULL;
    bool in_question = false;
    char v[256], *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strcmp(l, "---") == 0) {
            cur = NULL;
            continue;
        }
        if (!cur) {
            assert_true(n < max);
            cur = &m[n++];
            memset(cur, 0, sizeof(*cur));
            in_question = false;
        }
        if (field(l, "identity: ", cur->identity, sizeof(cur->identity)) ||
            field(l, "version: ", cur->version, sizeof(cur->version)) ||
            field(l, "  type: ", cur->type, sizeof(cur->type)) ||
            field(l, "  socket_family: ", cur->family, sizeof(cur->family)) ||
            field(l, "  socket_protocol: ", cur->proto, sizeof(cur->proto)) ||
            field(l, "  query_address: ", cur->qaddr, sizeof(cur->qaddr)) ||
            field(l, "  response_address: ", cur->raddr, sizeof(cur->raddr)))
            continue;
        if (field(l, "  query_port: ", v, sizeof(v)))
            cur->qport = (unsigned)atoi(v);
        else if (field(l, "  response_port: ", v, sizeof(v)))
            cur->rport = (unsigned)atoi(v);
        else if (field(l, "  message_size: ", v, sizeof(v)))
            cur->size = (unsigned)atoi(v);
        else if (field(l, "  query_time: ", v, sizeof(v)))
            cur->qtime = true;
        else if (field(l, "  response_time: ", v, sizeof(v)))
            cur->rtime = true;
        else if (field(l, "  query_message: ", v, sizeof(v)))
            cur->qmsg = true;
        else if (field(l, "  response_message: ", v, sizeof(v)))
            cur->rmsg = true;
        else if (!cur->status[0] && field(l, "    status: ", cur->status, sizeof(cur->status)))
            continue;
        else if (field(l, "    ANSWER: ", v, sizeof(v)))
            cur->answers = (unsigned)atoi(v);
        else if (strcmp(l, "    QUESTION_SECTION:") == 0)
            in_question = !cur->question[0];
        else if (in_question && field(l, "      - '", v, sizeof(v))) {
            char *q = strchr(v, '\'');
            if (q)
                *q = '\0';
            snprintf(cur->question, sizeof(cur->question), "%.127s", v);
            in_question = false;
        }
    }
    free(text);
    return n;
}

/* m is a message of type about question, between the given endpoints over proto. */
static void check_msg(const tap_msg_t *m, const char *type, const char *proto, const char *qaddr,
                      unsigned qport, const char *raddr, unsigned rport, const char *question)
{
    assert_string_equal(m->type, type);
    assert_string_equal(m->family, strchr(qaddr, ':') ? "INET6" : "INET");
    assert_string_equal(m->proto, proto);
    assert_string_equal(m->qaddr, qaddr);
    assert_int_equal(m->qport, qport);
    assert_string_equal(m->raddr, raddr);
    assert_int_equal(m->rport, rport);
    assert_string_equal(m->question, question ? question : "");
    if (strcmp(type, "AUTH_QUERY") == 0) {
        assert_true(m->qtime);
        assert_false(m->rmsg);
    } else {
        assert_true(m->rtime);
        assert_false(m->qmsg);
    }
}

/* ---- records ---- */

/* The five kinds of record the sink must turn into messages, built from real DNS messages. */
enum { R_UDP4, R_TCP6, R_NORESP, R_RCUT, R_QCUT, R_COUNT };

/* Record kind k about name (id varies with it). */
static qlog_rec_t *make_rec(qtu_rec_buf_t *b, int k, const char *name)
{
    uint8_t q[512], r[512];
    size_t ql, rl;
    uint16_t id = (uint16_t)(0x1000 + k + strlen(name));
    int64_t t = wall_ns();
    switch (k) {
    case R_UDP4: {
        static const uint8_t a[4] = {192, 0, 2, 7};
        ql = qtu_query(q, id, name, QTU_T_A);
        rl = qtu_response(r, id, name, QTU_T_A, 0, a, sizeof(a));
        return qtu_rec(b, 4, "198.51.100.7", 53000, "192.0.2.53", 53, QLOG_F_RESPONSE, q, ql, r, rl,
                       t);
    }
    case R_TCP6: {
        uint8_t a6[16];
        assert_int_equal(inet_pton(AF_INET6, "2001:db8::80", a6), 1);
        ql = qtu_query(q, id, name, QTU_T_AAAA);
        rl = qtu_response(r, id, name, QTU_T_AAAA, 0, a6, sizeof(a6));
        return qtu_rec(b, 6, "2001:db8::7", 40000, "2001:db8::53", 53, QLOG_F_RESPONSE | QLOG_F_TCP,
                       q, ql, r, rl, t);
    }
    case R_NORESP: /* dropped by policy: no response was sent */
        ql = qtu_query(q, id, name, QTU_T_TXT);
        return qtu_rec(b, 4, "203.0.113.9", 1234, "192.0.2.53", 53, 0, q, ql, NULL, 0, t);
    case R_RCUT: /* the response did not fit beside the query in the ring */
        ql = qtu_query(q, id, name, QTU_T_TXT);
        return qtu_rec(b, 6, "2001:db8::9", 5353, "2001:db8::53", 53,
                       QLOG_F_RESPONSE | QLOG_F_RESPONSE_CUT, q, ql, NULL, 0, t);
    default: /* R_QCUT: the query's bytes were not kept; an NXDOMAIN answer over TCP */
        rl = qtu_response(r, id, name, QTU_T_A, 3, NULL, 0);
        return qtu_rec(b, 4, "198.51.100.8", 60000, "192.0.2.53", 53,
                       QLOG_F_RESPONSE | QLOG_F_TCP | QLOG_F_QUERY_CUT, NULL, 0, r, rl, t);
    }
}

static void write_rec(qlog_dnstap_t *d, int k, const char *name)
{
    qtu_rec_buf_t b;
    assert_int_equal(qlog_dnstap_write(d, make_rec(&b, k, name)), 0);
}

/* Wait (bounded) until the sink's counters satisfy written >= w and dropped >= dr. */
static qlog_dnstap_stats_t wait_stats(qlog_dnstap_t *d, uint64_t w, uint64_t dr)
{
    qlog_dnstap_stats_t s;
    int64_t deadline = tu_now_ms() + WAIT_MS;
    for (;;) {
        qlog_dnstap_stats(d, &s);
        if (s.written >= w && s.dropped >= dr)
            return s;
        if (tu_now_ms() > deadline)
            fail_msg("dnstap stats: written %llu dropped %llu, waited for %llu and %llu",
                     (unsigned long long)s.written, (unsigned long long)s.dropped,
                     (unsigned long long)w, (unsigned long long)dr);
        tu_sleep_ms(20);
    }
}

/* ---- tests ---- */

/* Over a socket to fstrm_capture: every kind of record, both message types, all fields. */
static void test_socket_messages(void **state)
{
    char dir[64], sock[128];
    tu_mkdtemp(dir, sizeof(dir), "tern-dnstap");
    snprintf(sock, sizeof(sock), "%s/tap.sock", dir);
    capture_t cap;
    cap_start(&cap, dir, sock, "out.tap");

    char err[256] = "";
    qlog_dnstap_opts_t o = {
        .socket_path = sock, .queries = true, .responses = true, .identity = "tern-test"};
    qlog_dnstap_t *d = qlog_dnstap_open(&o, err, sizeof(err));
    assert_non_null(d);
    write_rec(d, R_UDP4, "www.example.com");
    write_rec(d, R_TCP6, "v6.example.com");
    write_rec(d, R_NORESP, "dropped.example.com");
    write_rec(d, R_RCUT, "big.example.com");
    write_rec(d, R_QCUT, "cut.example.com");
    qlog_dnstap_stats_t s = wait_stats(d, 8, 0);
    assert_int_equal(s.written, 8);
    assert_int_equal(s.dropped, 0);
    assert_int_equal(s.reconnects, 0);
    qlog_dnstap_close(d); /* STOP; fstrm_capture answers FINISH */
    cap_stop(&cap);

    tap_msg_t m[MAX_MSGS];
    int n = tap_read(cap.out, m, MAX_MSGS);
    assert_int_equal(n, 8);
    for (int i = 0; i < n; i++) {
        assert_string_equal(m[i].identity, "tern-test");
        assert_string_equal(m[i].version, "tern " TERN_VERSION);
    }
    const char *v4c = "198.51.100.7", *v4s = "192.0.2.53", *v6c = "2001:db8::7";
    check_msg(&m[0], "AUTH_QUERY", "UDP", v4c, 53000, v4s, 53, "www.example.com. IN A");
    assert_int_equal(m[0].size, 33); /* 12 + 17 (name) + 4 */
    assert_int_equal(m[0].answers, 0);
    check_msg(&m[1], "AUTH_RESPONSE", "UDP", v4c, 53000, v4s, 53, "www.example.com. IN A");
    assert_true(m[1].rmsg);
    assert_int_equal(m[1].size, 33 + 16);
    assert_string_equal(m[1].status, "NOERROR");
    assert_int_equal(m[1].answers, 1);
    check_msg(&m[2], "AUTH_QUERY", "TCP", v6c, 40000, "2001:db8::53", 53,
              "v6.example.com. IN AAAA");
    assert_true(m[2].qmsg);
    check_msg(&m[3], "AUTH_RESPONSE", "TCP", v6c, 40000, "2001:db8::53", 53,
              "v6.example.com. IN AAAA");
    assert_int_equal(m[3].answers, 1);
    /* no response was sent: the query alone */
    check_msg(&m[4], "AUTH_QUERY", "UDP", "203.0.113.9", 1234, v4s, 53,
              "dropped.example.com. IN TXT");
    /* response cut: an AUTH_RESPONSE all the same, without its bytes */
    check_msg(&m[5], "AUTH_QUERY", "UDP", "2001:db8::9", 5353, "2001:db8::53", 53,
              "big.example.com. IN TXT");
    check_msg(&m[6], "AUTH_RESPONSE", "UDP", "2001:db8::9", 5353, "2001:db8::53", 53, NULL);
    assert_false(m[6].rmsg);
    /* query cut: no AUTH_QUERY; the response is all there is */
    check_msg(&m[7], "AUTH_RESPONSE", "TCP", "198.51.100.8", 60000, v4s, 53,
              "cut.example.com. IN A");
    assert_true(m[7].rmsg);
    assert_string_equal(m[7].status, "NXDOMAIN");
    tu_rmtree(dir);
}

/* opts.queries / opts.responses select the messages; identity defaults to the host name. */
static void test_file_selection(void **state)
{
    char dir[64], path[128], host[256] = "";
    tu_mkdtemp(dir, sizeof(dir), "tern-dnstap");
    assert_int_equal(gethostname(host, sizeof(host)), 0);
    for (int responses = 0; responses <= 1; responses++) {
        snprintf(path, sizeof(path), "%s/%s.tap", dir, responses ? "ar" : "aq");
        char err[256] = "";
        qlog_dnstap_opts_t o = {
            .file_path = path, .queries = !responses, .responses = responses, .version = "v-test"};
        qlog_dnstap_t *d = qlog_dnstap_open(&o, err, sizeof(err));
        assert_non_null(d);
        write_rec(d, R_UDP4, "one.example.com");
        write_rec(d, R_NORESP, "two.example.com");
        write_rec(d, R_QCUT, "three.example.com");
        qlog_dnstap_close(d);

        tap_msg_t m[MAX_MSGS];
        assert_int_equal(tap_read(path, m, MAX_MSGS), 2);
        for (int i = 0; i < 2; i++) {
            assert_string_equal(m[i].type, responses ? "AUTH_RESPONSE" : "AUTH_QUERY");
            assert_string_equal(m[i].identity, host);
            assert_string_equal(m[i].version, "v-test");
        }
        assert_string_equal(m[0].question, "one.example.com. IN A");
        assert_string_equal(m[1].question,
                            responses ? "three.example.com. IN A" : "two.example.com. IN TXT");
    }
    tu_rmtree(dir);
}

/* The messages in file, in order, as "AQ:name. AR:name. ...". */
static void file_questions(const char *file, char *out, size_t len)
{
    tap_msg_t m[MAX_MSGS];
    int n = tap_read(file, m, MAX_MSGS);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t l = strlen(out);
        char *sp = strchr(m[i].question, ' ');
        snprintf(out + l, len - l, "%s%s:%.*s", i ? " " : "",
                 strcmp(m[i].type, "AUTH_QUERY") == 0 ? "AQ" : "AR",
                 sp ? (int)(sp - m[i].question) : 0, m[i].question);
    }
}

/* SIGHUP after a rotation: the old file is finished, the path opened anew; a SIGHUP without a
 * rotation keeps the file; a path that cannot be opened keeps the old file in use. */
static void test_file_rotation(void **state)
{
    char dir[64], path[128], old1[140], old2[140], got[1024];
    tu_mkdtemp(dir, sizeof(dir), "tern-dnstap");
    snprintf(path, sizeof(path), "%s/q.tap", dir);
    snprintf(old1, sizeof(old1), "%s.1", path);
    snprintf(old2, sizeof(old2), "%s.2", path);
    char err[256] = "";
    qlog_dnstap_opts_t o = {.file_path = path, .queries = true, .responses = true};
    qlog_dnstap_t *d = qlog_dnstap_open(&o, err, sizeof(err));
    assert_non_null(d);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    write_rec(d, R_UDP4, "a.example");
    write_rec(d, R_NORESP, "b.example");

    assert_int_equal(rename(path, old1), 0);
    assert_int_equal(qlog_dnstap_reopen(d, err, sizeof(err)), 0);
    write_rec(d, R_TCP6, "c.example");
    /* nothing rotated: the same file goes on (a reopen must not truncate it) */
    assert_int_equal(qlog_dnstap_reopen(d, err, sizeof(err)), 0);
    write_rec(d, R_UDP4, "d.example");

    /* rotated, but the path cannot be opened: the error, and the old file stays in use */
    assert_int_equal(rename(path, old2), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_true(qlog_dnstap_reopen(d, err, sizeof(err)) < 0);
    char want[256];
    snprintf(want, sizeof(want), "dnstap: %s: Is a directory", path);
    assert_string_equal(err, want);
    write_rec(d, R_NORESP, "e.example");
    qlog_dnstap_close(d);
    assert_int_equal(rmdir(path), 0);

    file_questions(old1, got, sizeof(got));
    assert_string_equal(got, "AQ:a.example. AR:a.example. AQ:b.example.");
    file_questions(old2, got, sizeof(got));
    assert_string_equal(got,
                        "AQ:c.example. AR:c.example. AQ:d.example. AR:d.example. AQ:e.example.");
    tu_rmtree(dir);
}

/* The reader dies while we write: writes never block and the messages are counted dropped; a
 * new reader on the same socket is found again within seconds. */
static void test_reader_gone(void **state)
{
    char dir[64], sock[128];
    tu_mkdtemp(dir, sizeof(dir), "tern-dnstap");
    snprintf(sock, sizeof(sock), "%s/tap.sock", dir);
    capture_t cap1, cap2;
    cap_start(&cap1, dir, sock, "out1.tap");
    char err[256] = "";
    qlog_dnstap_opts_t o = {.socket_path = sock, .queries = true, .responses = true};
    qlog_dnstap_t *d = qlog_dnstap_open(&o, err, sizeof(err));
    assert_non_null(d);
    write_rec(d, R_UDP4, "before.example");
    wait_stats(d, 2, 0);

    cap_kill(&cap1);
    enum { N = 20000 };
    qtu_rec_buf_t b;
    qlog_rec_t *r = make_rec(&b, R_NORESP, "lost.example");
    int refused = 0;
    int64_t t0 = tu_now_ms();
    for (int i = 0; i < N; i++) {
        int rc = qlog_dnstap_write(d, r);
        assert_true(rc == 0 || rc == TERN_EAGAIN);
        refused += rc == TERN_EAGAIN;
    }
    /* no timing assert (the machine's speed is not the point): a write that blocked would hang
     * the test until ctest's timeout; the duration is printed for the record */
    int64_t took = tu_now_ms() - t0;
    /* every one of them is lost: refused by the full queue, or thrown away unsent */
    qlog_dnstap_stats_t s = wait_stats(d, 2, N);
    assert_int_equal(s.written, 2);
    assert_int_equal(s.dropped, N);
    assert_int_equal(s.reconnects, 0);
    print_message("20000 writes without a reader: %lld ms, %d refused by the queue\n",
                  (long long)took, refused);

    cap_start(&cap2, dir, sock, "out2.tap");
    int64_t deadline = tu_now_ms() + WAIT_MS;
    do {
        if (tu_now_ms() > deadline)
            fail_msg("no reconnect within %d ms", WAIT_MS);
        (void)qlog_dnstap_write(d, make_rec(&b, R_NORESP, "retry.example"));
        tu_sleep_ms(50);
        qlog_dnstap_stats(d, &s);
    } while (s.reconnects == 0 || s.written < 3);
    assert_int_equal(s.reconnects, 1);
    write_rec(d, R_UDP4, "after.example");
    qlog_dnstap_close(d);
    cap_stop(&cap2);

    tap_msg_t m[MAX_MSGS];
    int n = tap_read(cap2.out, m, MAX_MSGS);
    assert_true(n >= 3);
    for (int i = 0; i < n - 2; i++)
        assert_string_equal(m[i].question, "retry.example. IN TXT");
    assert_string_equal(m[n - 2].type, "AUTH_QUERY");
    assert_string_equal(m[n - 2].question, "after.example. IN A");
    assert_string_equal(m[n - 1].type, "AUTH_RESPONSE");
    assert_string_equal(m[n - 1].question, "after.example. IN A");
    tu_rmtree(dir);
}

/* A reader that stops reading: writes never block (the queue refuses), and closing the sink
 * gives up on it within the I/O timeouts instead of hanging. */
static void test_reader_stalled(void **state)
{
    char dir[64], sock[128];
    tu_mkdtemp(dir, sizeof(dir), "tern-dnstap");
    snprintf(sock, sizeof(sock), "%s/tap.sock", dir);
    capture_t cap;
    cap_start(&cap, dir, sock, "out.tap");
    char err[256] = "";
    qlog_dnstap_opts_t o = {.socket_path = sock, .queries = true, .responses = true};
    qlog_dnstap_t *d = qlog_dnstap_open(&o, err, sizeof(err));
    assert_non_null(d);
    write_rec(d, R_UDP4, "before.example");
    wait_stats(d, 2, 0);

    assert_int_equal(kill(cap.pid, SIGSTOP), 0);
    qtu_rec_buf_t b;
    qlog_rec_t *r = make_rec(&b, R_TCP6, "stalled.example");
    int refused = 0;
    int64_t t0 = tu_now_ms();
    for (int i = 0; i < 20000; i++)
        refused += qlog_dnstap_write(d, r) == TERN_EAGAIN;
    print_message("20000 writes to a stalled reader: %lld ms\n", (long long)(tu_now_ms() - t0));
    assert_true(refused > 0); /* the socket buffer and then fstrm's queue filled up */
    qlog_dnstap_stats_t s;
    qlog_dnstap_stats(d, &s);
    assert_true(s.dropped >= (uint64_t)refused);

    t0 = tu_now_ms();
    qlog_dnstap_close(d);
    int64_t took = tu_now_ms() - t0;
    print_message("close with a stalled reader: %lld ms (bounded by the socket timeouts)\n",
                  (long long)took);
    stop_pid(cap.pid, SIGTERM); /* it resumes to a cut stream: its exit status is not ours */
    tu_rmtree(dir);
}

/* No reader yet at open: not an error; messages are dropped until one comes. */
static void test_socket_absent(void **state)
{
    char dir[64], sock[128];
    tu_mkdtemp(dir, sizeof(dir), "tern-dnstap");
    snprintf(sock, sizeof(sock), "%s/nobody.sock", dir);
    char err[256] = "";
    qlog_dnstap_opts_t o = {.socket_path = sock, .queries = true, .responses = true};
    qlog_dnstap_t *d = qlog_dnstap_open(&o, err, sizeof(err));
    assert_non_null(d);
    for (int i = 0; i < 10; i++)
        write_rec(d, R_UDP4, "void.example");
    qlog_dnstap_stats_t s = wait_stats(d, 0, 20);
    assert_int_equal(s.written, 0);
    assert_int_equal(s.dropped, 20);
    int64_t t0 = tu_now_ms();
    qlog_dnstap_close(d);
    print_message("close without a reader: %lld ms\n", (long long)(tu_now_ms() - t0));
    tu_rmtree(dir);
}

static void expect_open_error(const qlog_dnstap_opts_t *o, const char *want)
{
    char err[512] = "";
    qlog_dnstap_t *d = qlog_dnstap_open(o, err, sizeof(err));
    if (d)
        qlog_dnstap_close(d);
    assert_null(d);
    assert_string_equal(err, want);
}

static void test_bad_options(void **state)
{
    char dir[64], path[128], want[512];
    tu_mkdtemp(dir, sizeof(dir), "tern-dnstap");
    snprintf(path, sizeof(path), "%s/missing/q.tap", dir);

    qlog_dnstap_opts_t o = {.socket_path = "/tmp/x.sock", .file_path = path, .queries = true};
    expect_open_error(&o, "dnstap: socket_path and file_path are both set");
    o = (qlog_dnstap_opts_t){.queries = true, .responses = true};
    expect_open_error(&o, "dnstap: neither socket_path nor file_path is set");
    o = (qlog_dnstap_opts_t){.file_path = path, .queries = true};
    snprintf(want, sizeof(want), "dnstap: %s: No such file or directory", path);
    expect_open_error(&o, want);
    o = (qlog_dnstap_opts_t){.file_path = dir, .queries = true};
    snprintf(want, sizeof(want), "dnstap: %s: Is a directory", dir);
    expect_open_error(&o, want);

    char longp[200];
    memset(longp, 'x', sizeof(longp) - 1);
    longp[0] = '/';
    longp[sizeof(longp) - 1] = '\0';
    o = (qlog_dnstap_opts_t){.socket_path = longp, .responses = true};
    snprintf(want, sizeof(want), "dnstap: %s: socket path longer than 107 bytes", longp);
    expect_open_error(&o, want);

    /* a record whose size cannot hold its bytes is refused, not read past */
    snprintf(path, sizeof(path), "%s/q.tap", dir);
    o = (qlog_dnstap_opts_t){.file_path = path, .queries = true};
    char err[256];
    qlog_dnstap_t *d = qlog_dnstap_open(&o, err, sizeof(err));
    assert_non_null(d);
    qtu_rec_buf_t b;
    qlog_rec_t *r = make_rec(&b, R_UDP4, "www.example.com");
    r->size = (uint32_t)sizeof(*r) + r->qlen; /* rlen does not fit */
    assert_int_equal(qlog_dnstap_write(d, r), TERN_EINVAL);
    qlog_dnstap_close(d);
    qlog_dnstap_close(NULL);
    tu_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socket_messages), cmocka_unit_test(test_file_selection),
        cmocka_unit_test(test_file_rotation),   cmocka_unit_test(test_reader_gone),
        cmocka_unit_test(test_reader_stalled),  cmocka_unit_test(test_socket_absent),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
