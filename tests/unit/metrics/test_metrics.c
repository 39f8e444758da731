/*
 * test_metrics.c — the Prometheus endpoint against a real loader and a real server.
 *
 * Each test writes two zones into a fresh temporary directory, loads them with loader_load(),
 * starts the workers on 127.0.0.1:0 and the endpoint on 127.0.0.1:0, sends DNS queries over
 * plain sockets and reads /metrics with a minimal HTTP/1.0 client (request, then read to EOF).
 * Every exposition is checked line by line by check_exposition(). Every wait is bounded.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "test_util.h"

#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/conf/config.h"
#include "tern/load/loader.h"
#include "tern/metrics/metrics.h"
#include "tern/net/server.h"

/* How long a reply may take before the test fails: generous for a loaded CI box under ASan. */
#define REPLY_TIMEOUT_MS 3000
/* The largest HTTP response the client reads; ours are a few KiB. */
#define HTTP_MAX (1u << 20)

static char dir[64];

static struct {
    bool fail; /* read_config() reports a syntax error: the reload fails */
    const char *a_origin;
} want;

typedef struct fixture {
    loader_t *loader;
    const config_t *cfg;
    server_t *srv;
    metrics_t *m;
    uint16_t dns_port;
    uint16_t port; /* metrics */
} fixture_t;

static fixture_t fx;

/* ---- zones and config ------------------------------------------------------------------- */

static void write_file(const char *name, const char *text)
{
    tu_write_file(dir, name, text);
}

static void write_zone(const char *name, const char *origin, unsigned long serial)
{
    char text[512];
    snprintf(text, sizeof(text),
             "$ORIGIN %s.\n$TTL 300\n@ SOA ns1 hostmaster %lu 3600 600 86400 60\n@ NS ns1\n"
             "ns1 A 192.0.2.53\nwww A 192.0.2.1\n",
             origin, serial);
    write_file(name, text);
}

static int read_config(void *ctx, config_t *cfg, char *err, size_t errlen)
{
    (void)ctx;
    config_init(cfg);
    if (want.fail) {
        snprintf(err, errlen, "test.yaml:3: unknown key 'bogus'");
        return TERN_ESYNTAX;
    }
    cfg->workers = 2;
    if (config_add_listen(cfg, "127.0.0.1:0") < 0)
        return TERN_EINVAL;
    static const char *const files[] = {"a.zone", "b.zone"};
    const char *origins[] = {want.a_origin ? want.a_origin : "a.test", "b.test"};
    for (size_t i = 0; i < 2; i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        if (config_add_zone(cfg, origins[i], path) < 0)
            return TERN_ENOMEM;
    }
    return 0;
}

static void start_all(void)
{
    write_zone("a.zone", want.a_origin ? want.a_origin : "a.test", 2024010101);
    write_zone("b.zone", "b.test", 7);
    fx.loader = loader_new(read_config, NULL);
    assert_non_null(fx.loader);
    assert_int_equal(loader_load(fx.loader, &fx.cfg), 0);
    fx.srv = server_start(config_server_settings(fx.cfg), loader_published(fx.loader));
    assert_non_null(fx.srv);
    fx.dns_port = server_port(fx.srv, 0);
    assert_int_equal(loader_start(fx.loader), 0);
    fx.m = metrics_start("127.0.0.1:0", fx.loader, fx.srv);
    assert_non_null(fx.m);
    fx.port = metrics_port(fx.m);
    assert_true(fx.port != 0);
}

/* In main.c's order: the endpoint reads both the loader and the server. */
static void stop_all(void)
{
    metrics_stop(fx.m);
    loader_stop(fx.loader);
    server_stop(fx.srv);
    loader_free(fx.loader);
    memset(&fx, 0, sizeof(fx));
}

static int setup(void **state)
{
    (void)state;
    tu_mkdtemp(dir, sizeof(dir), "tern-metrics");
    memset(&want, 0, sizeof(want));
    memset(&fx, 0, sizeof(fx));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(dir);
    return 0;
}

/* ---- HTTP client ------------------------------------------------------------------------ */

typedef struct http_resp {
    char *raw; /* the whole response, NUL-terminated */
    size_t len;
    int status;       /* 0 if there was no status line */
    const char *head; /* headers (within raw), ends at the blank line */
    const char *body; /* within raw; "" if none */
    bool timed_out;   /* no EOF within REPLY_TIMEOUT_MS (or timeout_ms) */
} http_resp_t;

static int connect_to(int family, const char *addr, uint16_t port)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_storage ss;
    socklen_t len = tu_sockaddr(&ss, family, addr, port);
    if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Send req on a new connection and read until EOF (or timeout_ms of silence). */
static http_resp_t http_on(int family, const char *addr, uint16_t port, const char *req,
                           int timeout_ms)
{
    http_resp_t r = {0};
    int fd = connect_to(family, addr, port);
    if (fd < 0)
        fail_msg("connect to %s port %u: %s", addr, port, strerror(errno));
    size_t qlen = strlen(req);
    assert_int_equal(send(fd, req, qlen, MSG_NOSIGNAL), (ssize_t)qlen);
    r.raw = malloc(HTTP_MAX + 1);
    assert_non_null(r.raw);
    /* bounded: every round reads at least one byte, times out or ends */
    while (r.len < HTTP_MAX) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) != 1) {
            r.timed_out = true;
            break;
        }
        ssize_t n = recv(fd, r.raw + r.len, HTTP_MAX - r.len, 0);
        if (n <= 0)
            break; /* EOF, or a reset (a refused connection) */
        r.len += (size_t)n;
    }
    close(fd);
    r.raw[r.len] = '\0';
    r.body = "";
    if (sscanf(r.raw, "HTTP/1.%*d %d", &r.status) != 1)
        r.status = 0;
    char *end = strstr(r.raw, "\r\n\r\n");
    if (end) {
        r.head = r.raw;
        end[2] = '\0'; /* headers end with their last CRLF */
        r.body = end + 4;
    }
    return r;
}

static http_resp_t http(const char *req)
{
    return http_on(AF_INET, "127.0.0.1", fx.port, req, REPLY_TIMEOUT_MS);
}

static http_resp_t get(const char *path)
{
    char req[256];
    snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    return http(req);
}

static void http_free(http_resp_t *r)
{
    free(r->raw);
    r->raw = NULL;
}

/* The value of header name (case-insensitive), copied into out; false if absent. */
static bool header(const http_resp_t *r, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    const char *line = r->head ? strstr(r->head, "\r\n") : NULL;
    while (line && line[2]) { /* bounded by the header block's length */
        line += 2;
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            v += strspn(v, " \t");
            size_t len = strcspn(v, "\r");
            if (len >= cap)
                len = cap - 1;
            memcpy(out, v, len);
            out[len] = '\0';
            return true;
        }
        line = strstr(line, "\r\n");
    }
    return false;
}

/* ---- exposition checker ----------------------------------------------------------------- */

#define MAX_FAMILIES 64

typedef struct family {
    char name[96];
    char type[16];
    bool help, closed;
    unsigned samples;
} family_t;

typedef struct expo {
    family_t f[MAX_FAMILIES];
    size_t n;
} expo_t;

static family_t *family_find(expo_t *e, const char *name, size_t len)
{
    for (size_t i = 0; i < e->n; i++)
        if (strlen(e->f[i].name) == len && memcmp(e->f[i].name, name, len) == 0)
            return &e->f[i];
    return NULL;
}

static family_t *family_add(expo_t *e, const char *name, size_t len, int lineno)
{
    family_t *f = family_find(e, name, len);
    if (f)
        return f;
    if (e->n == MAX_FAMILIES || len >= sizeof(f->name))
        fail_msg("line %d: too many families or too long a name", lineno);
    f = &e->f[e->n++];
    memset(f, 0, sizeof(*f));
    memcpy(f->name, name, len);
    return f;
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* (metric) or [a-zA-Z_][a-zA-Z0-9_]* (label); returns its length. */
static size_t name_len(const char *s, bool metric)
{
    size_t i = 0;
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_' || (metric && s[0] == ':')))
        return 0;
    while (isalnum((unsigned char)s[i]) || s[i] == '_' || (metric && s[i] == ':'))
        i++;
    return i;
}

/* One sample line: name{label="value",...} value — escapes limited to \\ \" \n. */
static void check_sample(expo_t *e, const char *line, int lineno, family_t **current)
{
    size_t n = name_len(line, true);
    if (!n)
        fail_msg("line %d: bad metric name: %s", lineno, line);
    family_t *f = family_find(e, line, n);
    if (!f || !f->type[0])
        fail_msg("line %d: sample before its # TYPE: %s", lineno, line);
    if (f->closed)
        fail_msg("line %d: family %s is not contiguous", lineno, f->name);
    if (*current && *current != f)
        (*current)->closed = true;
    *current = f;
    const char *p = line + n;
    if (*p == '{') {
        p++;
        for (unsigned labels = 0; *p != '}'; labels++) {
            if (labels > 16)
                fail_msg("line %d: too many labels", lineno);
            size_t ln = name_len(p, false);
            if (!ln || p[ln] != '=' || p[ln + 1] != '"')
                fail_msg("line %d: bad label: %s", lineno, line);
            p += ln + 2;
            while (*p != '"') { /* bounded by the line's NUL */
                if (*p == '\0' || *p == '\n')
                    fail_msg("line %d: unterminated label value", lineno);
                if (*p == '\\') {
                    if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
                        fail_msg("line %d: bad escape", lineno);
                    p++;
                }
                p++;
            }
            p++;
            if (*p == ',')
                p++;
            else if (*p != '}')
                fail_msg("line %d: expected , or }: %s", lineno, line);
        }
        p++;
    }
    if (*p != ' ')
        fail_msg("line %d: no space before the value: %s", lineno, line);
    p++;
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    if (end == p || *end != '\0' || errno)
        fail_msg("line %d: bad value: %s", lineno, line);
    if (strcmp(f->type, "counter") == 0 && v < 0)
        fail_msg("line %d: negative counter", lineno);
    f->samples++;
}

/* The whole body: HELP/TYPE at most once per family and before its samples, families
 * contiguous, counters named *_total, and a final newline. */
static void check_exposition(const char *body, expo_t *e)
{
    memset(e, 0, sizeof(*e));
    size_t len = strlen(body);
    assert_true(len > 0);
    assert_int_equal(body[len - 1], '\n');
    char *copy = strdup(body);
    assert_non_null(copy);
    family_t *current = NULL;
    int lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (line[0] != '#') {
            check_sample(e, line, lineno, &current);
            continue;
        }
        bool help = strncmp(line, "# HELP ", 7) == 0;
        bool type = strncmp(line, "# TYPE ", 7) == 0;
        if (!help && !type)
            fail_msg("line %d: unexpected comment: %s", lineno, line);
        const char *name = line + 7;
        size_t n = name_len(name, true);
        if (!n || name[n] != ' ' || !name[n + 1])
            fail_msg("line %d: bad %s line: %s", lineno, help ? "HELP" : "TYPE", line);
        family_t *f = family_add(e, name, n, lineno);
        if (f->samples || f->closed)
            fail_msg("line %d: %s after the samples of %s", lineno, line, f->name);
        if (current && current != f)
            current->closed = true;
        current = f;
        if (help) {
            if (f->help)
                fail_msg("line %d: second HELP for %s", lineno, f->name);
            f->help = true;
            continue;
        }
        if (f->type[0])
            fail_msg("line %d: second TYPE for %s", lineno, f->name);
        const char *t = name + n + 1;
        if (strcmp(t, "counter") != 0 && strcmp(t, "gauge") != 0 && strcmp(t, "untyped") != 0)
            fail_msg("line %d: unknown type %s", lineno, t);
        snprintf(f->type, sizeof(f->type), "%s", t);
        size_t nl = strlen(f->name);
        bool total = nl > 6 && strcmp(f->name + nl - 6, "_total") == 0;
        if ((strcmp(t, "counter") == 0) != total)
            fail_msg("line %d: %s: counters and only counters end in _total", lineno, f->name);
    }
    free(copy);
    for (size_t i = 0; i < e->n; i++)
        if (!e->f[i].help || !e->f[i].type[0])
            fail_msg("family %s lacks HELP or TYPE", e->f[i].name);
}

/* The value of the sample written exactly as series ("name" or "name{...}"); -1 if absent. */
static double value_of(const char *body, const char *series)
{
    size_t n = strlen(series);
    const char *p = body;
    while ((p = strstr(p, series)) != NULL) { /* bounded: p advances each round */
        bool at_line_start = p == body || p[-1] == '\n';
        if (at_line_start && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p += n;
    }
    return -1;
}

static const struct {
    const char *name, *type;
} families[] = {
    {"tern_build_info", "gauge"},
    {"tern_start_time_seconds", "gauge"},
    {"tern_workers", "gauge"},
    {"tern_queries_total", "counter"},
    {"tern_queries_by_type_total", "counter"},
    {"tern_responses_total", "counter"},
    {"tern_responses_truncated_total", "counter"},
    {"tern_dropped_total", "counter"},
    {"tern_xfr_handoffs_total", "counter"},
    {"tern_worker_queries_total", "counter"},
    {"tern_udp_received_total", "counter"},
    {"tern_udp_sent_total", "counter"},
    {"tern_udp_dropped_total", "counter"},
    {"tern_udp_stage_dropped_total", "counter"},
    {"tern_tcp_connections_total", "counter"},
    {"tern_tcp_accept_paused_total", "counter"},
    {"tern_tls_total", "counter"},
    {"tern_edns_queries_total", "counter"},
    {"tern_ecs_queries_total", "counter"},
    {"tern_health_fail_open_total", "counter"},
    {"tern_limited_total", "counter"},
    {"tern_cookies_total", "counter"},
    {"tern_badcookie_total", "counter"},
    {"tern_tcp_client_capped_total", "counter"},
    {"tern_tcp_evicted_total", "counter"},
    {"tern_dnssec_cache_total", "counter"},
    {"tern_dnssec_signatures_total", "counter"},
    {"tern_dnssec_sign_seconds_total", "counter"},
    {"tern_dnssec_sign_failures_total", "counter"},
    {"tern_zones", "gauge"},
    {"tern_zone_serial", "gauge"},
    {"tern_zone_records", "gauge"},
    {"tern_zone_bytes", "gauge"},
    {"tern_resident_memory_bytes", "gauge"},
    {"tern_virtual_memory_bytes", "gauge"},
    {"tern_reloads_total", "counter"},
    {"tern_last_reload_duration_seconds", "gauge"},
    {"tern_last_reload_success", "gauge"},
    {"tern_last_reload_timestamp_seconds", "gauge"},
    {"tern_log_dropped_total", "counter"},
};

/* GET /metrics, check status, content type and the exposition; the caller frees. */
static http_resp_t scrape(expo_t *e)
{
    http_resp_t r = get("/metrics");
    if (r.status != 200)
        fail_msg("GET /metrics: status %d, response: %.200s", r.status, r.raw);
    char ct[128];
    assert_true(header(&r, "Content-Type", ct, sizeof(ct)));
    assert_string_equal(ct, "text/plain; version=0.0.4; charset=utf-8");
    check_exposition(r.body, e);
    for (size_t i = 0; i < TERN_ARRAY_SIZE(families); i++) {
        family_t *f = family_find(e, families[i].name, strlen(families[i].name));
        if (!f)
            fail_msg("family %s missing", families[i].name);
        assert_string_equal(f->type, families[i].type);
    }
    assert_int_equal(e->n, TERN_ARRAY_SIZE(families));
    return r;
}

static void expect(const char *body, const char *series, double want_value)
{
    double v = value_of(body, series);
    if (v != want_value)
        fail_msg("%s = %g, want %g", series, v, want_value);
}

/* ---- DNS client ------------------------------------------------------------------------- */

/* A query for name (dotted) and type; with edns, an OPT record (and with ecs, a /24 ECS). */
static size_t make_query(uint8_t *buf, uint16_t id, const char *name, uint16_t qtype, bool edns,
                         bool ecs)
{
    const uint8_t hdr[12] = {id >> 8, id & 0xff, 0, 0, 0, 1, 0, 0, 0, 0, 0, edns ? 1 : 0};
    memcpy(buf, hdr, sizeof(hdr));
    size_t len = sizeof(hdr);
    for (const char *p = name; *p;) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        buf[len++] = (uint8_t)l;
        memcpy(buf + len, p, l);
        len += l;
        p += l + (dot ? 1 : 0);
    }
    buf[len++] = 0;
    buf[len++] = (uint8_t)(qtype >> 8);
    buf[len++] = (uint8_t)qtype;
    buf[len++] = 0;
    buf[len++] = 1; /* IN */
    if (edns) {
        /* root name, type OPT (41), UDP size 1232, TTL 0, RDLEN */
        const uint8_t opt[] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, ecs ? 11 : 0};
        memcpy(buf + len, opt, sizeof(opt));
        len += sizeof(opt);
        if (ecs) {
            /* option 8, length 7: family 1, source /24, scope 0, 192.0.2 */
            const uint8_t o[] = {0, 8, 0, 7, 0, 1, 24, 0, 192, 0, 2};
            memcpy(buf + len, o, sizeof(o));
            len += sizeof(o);
        }
    }
    return len;
}

static int udp_socket(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(fx.dns_port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* Send one datagram; wait for the reply and return its rcode. */
static int udp_ask(int fd, const uint8_t *q, size_t len)
{
    uint8_t r[1500];
    assert_int_equal(send(fd, q, len, 0), (ssize_t)len);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, REPLY_TIMEOUT_MS) != 1)
        fail_msg("no UDP reply");
    ssize_t n = recv(fd, r, sizeof(r), 0);
    assert_true(n >= 12);
    assert_int_equal(r[0] << 8 | r[1], q[0] << 8 | q[1]);
    return r[3] & 0x0f;
}

/* One query over TCP on a new connection, then close it. */
static void tcp_ask(const uint8_t *q, size_t len)
{
    int fd = connect_to(AF_INET, "127.0.0.1", fx.dns_port);
    assert_true(fd >= 0);
    uint8_t msg[514];
    msg[0] = (uint8_t)(len >> 8);
    msg[1] = (uint8_t)len;
    memcpy(msg + 2, q, len);
    assert_int_equal(send(fd, msg, len + 2, MSG_NOSIGNAL), (ssize_t)(len + 2));
    uint8_t r[2];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, REPLY_TIMEOUT_MS), 1);
    assert_int_equal(recv(fd, r, 2, MSG_WAITALL), 2);
    close(fd);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Scrape until series reaches want_value (counters the workers bump after answering, or for
 * datagrams that get no answer at all) or REPLY_TIMEOUT_MS passes; the caller frees. */
static http_resp_t scrape_until(expo_t *e, const char *series, double want_value)
{
    int64_t deadline = now_ms() + REPLY_TIMEOUT_MS;
    for (;;) { /* bounded by the deadline */
        http_resp_t r = scrape(e);
        if (value_of(r.body, series) == want_value || now_ms() > deadline)
            return r;
        http_free(&r);
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_counters(void **state)
{
    (void)state;
    start_all();
    expo_t e;

    /* before any query: every family there, counters zero, no reload sample yet */
    http_resp_t r = scrape(&e);
    expect(r.body, "tern_build_info{version=\"" TERN_VERSION "\"}", 1);
    expect(r.body, "tern_workers", 2);
    expect(r.body, "tern_queries_total{transport=\"udp\"}", 0);
    expect(r.body, "tern_zones", 2);
    expect(r.body, "tern_zone_serial{zone=\"a.test\"}", 2024010101);
    expect(r.body, "tern_zone_serial{zone=\"b.test\"}", 7);
    expect(r.body, "tern_zone_records{zone=\"a.test\"}", 4);
    expect(r.body, "tern_reloads_total{result=\"ok\"}", 0);
    expect(r.body, "tern_reloads_total{result=\"failed\"}", 0);
    expect(r.body, "tern_last_reload_success", -1);
    expect(r.body, "tern_last_reload_duration_seconds", -1);
    double started = value_of(r.body, "tern_start_time_seconds");
    assert_true(started > 1.6e9 && started <= (double)time(NULL));
    http_free(&r);

    uint8_t q[512];
    size_t len;
    int fd = udp_socket();
    uint16_t id = 1;
    for (int i = 0; i < 5; i++) {
        len = make_query(q, id++, "www.a.test", 1, false, false);
        assert_int_equal(udp_ask(fd, q, len), 0);
    }
    for (int i = 0; i < 2; i++) {
        len = make_query(q, id++, "www.a.test", 28, false, false); /* AAAA: NODATA */
        assert_int_equal(udp_ask(fd, q, len), 0);
    }
    len = make_query(q, id++, "nx.a.test", 1, false, false);
    assert_int_equal(udp_ask(fd, q, len), 3); /* NXDOMAIN */
    len = make_query(q, id++, "www.b.test", 1, true, false);
    assert_int_equal(udp_ask(fd, q, len), 0);
    len = make_query(q, id++, "www.b.test", 1, true, true);
    assert_int_equal(udp_ask(fd, q, len), 0);
    /* no answer for these two: shorter than a header, and a response (QR set) */
    assert_int_equal(send(fd, "\x12\x34\x00", 3, 0), 3);
    len = make_query(q, id++, "www.a.test", 1, false, false);
    q[2] |= 0x80;
    assert_int_equal(send(fd, q, len, 0), (ssize_t)len);
    close(fd);
    len = make_query(q, id++, "www.a.test", 1, false, false);
    tcp_ask(q, len);

    /* 12 datagrams in all (the two without an answer are counted whenever the worker gets to
     * them), and the TCP query */
    r = scrape_until(&e, "tern_udp_received_total", 12);
    http_free(&r);
    r = scrape_until(&e, "tern_queries_total{transport=\"tcp\"}", 1);
    expect(r.body, "tern_udp_received_total", 12);
    expect(r.body, "tern_udp_sent_total", 10);
    expect(r.body, "tern_udp_dropped_total", 2);
    /* ... both at the answer stage (no reply for a non-DNS datagram or a response); none lost
     * in the kernel's socket buffer, cut, or refused on send */
    expect(r.body, "tern_udp_stage_dropped_total{stage=\"answer\"}", 2);
    expect(r.body, "tern_udp_stage_dropped_total{stage=\"socket\"}", 0);
    expect(r.body, "tern_udp_stage_dropped_total{stage=\"truncated\"}", 0);
    expect(r.body, "tern_udp_stage_dropped_total{stage=\"send\"}", 0);
    expect(r.body, "tern_queries_total{transport=\"udp\"}", 12);
    expect(r.body, "tern_queries_total{transport=\"tcp\"}", 1);
    /* the two workers' shares add up to every message */
    assert_true(value_of(r.body, "tern_worker_queries_total{worker=\"0\"}") +
                    value_of(r.body, "tern_worker_queries_total{worker=\"1\"}") ==
                13);
    expect(r.body, "tern_queries_by_type_total{qtype=\"a\"}", 9);
    expect(r.body, "tern_queries_by_type_total{qtype=\"aaaa\"}", 2);
    expect(r.body, "tern_queries_by_type_total{qtype=\"mx\"}", 0);
    expect(r.body, "tern_queries_by_type_total{qtype=\"other\"}", 0);
    expect(r.body, "tern_responses_total{rcode=\"noerror\"}", 10);
    expect(r.body, "tern_responses_total{rcode=\"nxdomain\"}", 1);
    expect(r.body, "tern_responses_total{rcode=\"refused\"}", 0);
    expect(r.body, "tern_responses_truncated_total", 0);
    expect(r.body, "tern_dropped_total{reason=\"short\"}", 1);
    expect(r.body, "tern_dropped_total{reason=\"qr\"}", 1);
    expect(r.body, "tern_edns_queries_total", 2);
    expect(r.body, "tern_ecs_queries_total", 1);
    expect(r.body, "tern_tcp_connections_total{event=\"accepted\"}", 1);
    expect(r.body, "tern_tcp_connections_total{event=\"refused\"}", 0);
    expect(r.body, "tern_tcp_connections_total{event=\"closed_idle\"}", 0);
    expect(r.body, "tern_tcp_connections_total{event=\"closed_lifetime\"}", 0);
    /* every qtype and rcode slot has its line */
    family_t *f =
        family_find(&e, "tern_queries_by_type_total", strlen("tern_queries_by_type_total"));
    assert_non_null(f);
    assert_int_equal(f->samples, SERVER_QTYPE_COUNT);
    f = family_find(&e, "tern_responses_total", strlen("tern_responses_total"));
    assert_non_null(f);
    assert_int_equal(f->samples, SERVER_RCODE_COUNT);
    f = family_find(&e, "tern_tcp_connections_total", strlen("tern_tcp_connections_total"));
    assert_non_null(f);
    assert_int_equal(f->samples, 8); /* accepted ... closed_peer, handed_off */
    http_free(&r);
    stop_all();
}

static void test_reloads(void **state)
{
    (void)state;
    start_all();
    expo_t e;
    loader_stats_t st;

    write_zone("a.zone", "a.test", 2024010102);
    assert_true(loader_reload_wait(fx.loader, &st));
    http_resp_t r = scrape(&e);
    expect(r.body, "tern_reloads_total{result=\"ok\"}", 1);
    expect(r.body, "tern_reloads_total{result=\"failed\"}", 0);
    expect(r.body, "tern_last_reload_success", 1);
    expect(r.body, "tern_last_reload_duration_seconds", (double)st.last_duration_ms / 1000);
    expect(r.body, "tern_last_reload_timestamp_seconds", (double)st.last_time);
    expect(r.body, "tern_zone_serial{zone=\"a.test\"}", 2024010102);
    expect(r.body, "tern_zone_serial{zone=\"b.test\"}", 7);
    expect(r.body, "tern_zones", 2);
    http_free(&r);

    /* a failed reload: counted, and the old serial keeps serving */
    want.fail = true;
    write_zone("a.zone", "a.test", 2024010103);
    assert_false(loader_reload_wait(fx.loader, &st));
    r = scrape(&e);
    expect(r.body, "tern_reloads_total{result=\"ok\"}", 1);
    expect(r.body, "tern_reloads_total{result=\"failed\"}", 1);
    expect(r.body, "tern_last_reload_success", 0);
    expect(r.body, "tern_zone_serial{zone=\"a.test\"}", 2024010102);
    http_free(&r);

    want.fail = false;
    assert_true(loader_reload_wait(fx.loader, &st));
    r = scrape(&e);
    expect(r.body, "tern_reloads_total{result=\"ok\"}", 2);
    expect(r.body, "tern_last_reload_success", 1);
    expect(r.body, "tern_zone_serial{zone=\"a.test\"}", 2024010103);
    http_free(&r);
    stop_all();
}

static void test_http(void **state)
{
    (void)state;
    start_all();
    char v[128];

    http_resp_t r = get("/other");
    assert_int_equal(r.status, 404);
    http_free(&r);
    r = get("/metrics/");
    assert_int_equal(r.status, 404);
    http_free(&r);

    /* a query string is not part of the path */
    r = get("/metrics?name=tern_zones");
    assert_int_equal(r.status, 200);
    http_free(&r);

    r = http("POST /metrics HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello");
    assert_int_equal(r.status, 405);
    assert_true(header(&r, "Allow", v, sizeof(v)));
    assert_string_equal(v, "GET, HEAD");
    http_free(&r);
    r = http("DELETE /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_int_equal(r.status, 405);
    http_free(&r);

    /* HEAD: the headers of a GET, no body */
    r = http("HEAD /metrics HTTP/1.0\r\n\r\n");
    assert_int_equal(r.status, 200);
    assert_true(header(&r, "Content-Type", v, sizeof(v)));
    assert_string_equal(r.body, "");
    http_free(&r);

    /* HTTP/1.1 keep-alive: two scrapes on one connection (read the first by Content-Length) */
    int fd = connect_to(AF_INET, "127.0.0.1", fx.port);
    assert_true(fd >= 0);
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    for (int i = 0; i < 2; i++) {
        assert_int_equal(send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(req) - 1);
        char buf[65536];
        size_t got = 0, want_len = 0;
        int64_t deadline = now_ms() + REPLY_TIMEOUT_MS;
        while (now_ms() < deadline && got < sizeof(buf) - 1) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            assert_int_equal(poll(&p, 1, REPLY_TIMEOUT_MS), 1);
            ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
            assert_true(n > 0);
            got += (size_t)n;
            buf[got] = '\0';
            char *end = strstr(buf, "\r\n\r\n");
            const char *cl = strcasestr(buf, "\r\nContent-Length: ");
            if (end && cl) {
                want_len = (size_t)(end + 4 - buf) + strtoul(cl + 18, NULL, 10);
                if (got >= want_len)
                    break;
            }
        }
        assert_true(want_len > 0 && got == want_len);
        assert_int_equal(strncmp(buf, "HTTP/1.1 200", 12), 0);
    }
    close(fd);
    stop_all();
}

static void test_bad_address(void **state)
{
    (void)state;
    start_all();
    static const char *const bad[] = {
        "nonsense", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "300.0.0.1:80", "::1:80",
        "[::1]",    "[::1:80",   "",
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(bad); i++)
        assert_null(metrics_start(bad[i], fx.loader, fx.srv));
    assert_null(metrics_start(NULL, fx.loader, fx.srv));
    /* not an address of this machine */
    assert_null(metrics_start("192.0.2.1:0", fx.loader, fx.srv));
    stop_all();
}

static void test_address_in_use(void **state)
{
    (void)state;
    start_all();
    char addr[64];

    /* our own endpoint's port */
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", fx.port);
    assert_null(metrics_start(addr, fx.loader, fx.srv));

    /* the DNS server's TCP port (its listeners are SO_REUSEPORT, ours is not) */
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", fx.dns_port);
    assert_null(metrics_start(addr, fx.loader, fx.srv));

    /* a plain listening socket */
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(l, 1), 0);
    socklen_t sl = sizeof(sa);
    assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
    assert_null(metrics_start(addr, fx.loader, fx.srv));
    close(l);

    /* the failures left the running endpoint alone */
    expo_t e;
    http_resp_t r = scrape(&e);
    http_free(&r);
    stop_all();
}

/* Bound to exactly the configured address: another loopback address gets nothing. IPv6 works. */
static void test_exact_address(void **state)
{
    (void)state;
    start_all();
    int fd = connect_to(AF_INET, "127.0.0.2", fx.port);
    assert_int_equal(fd, -1);
    assert_int_equal(errno, ECONNREFUSED);

    metrics_t *m6 = metrics_start("[::1]:0", fx.loader, fx.srv);
    assert_non_null(m6);
    uint16_t p6 = metrics_port(m6);
    http_resp_t r = http_on(AF_INET6, "::1", p6, "GET /metrics HTTP/1.0\r\n\r\n", REPLY_TIMEOUT_MS);
    assert_int_equal(r.status, 200);
    expo_t e;
    check_exposition(r.body, &e);
    http_free(&r);
    metrics_stop(m6);
    stop_all();
}

/* Idle connections cannot hold the endpoint: one address keeps at most METRICS_PER_ADDR (8) of
 * them, a new connection closing its oldest idle one, so a scrape is answered beside 24; and
 * metrics_stop() closes the rest at once instead of waiting them out (libmicrohttpd's own thread
 * took ~9 s to stop with idle clients). */
#define PER_ADDR 8
static void test_idle_connections(void **state)
{
    (void)state;
    start_all();
    int idle[24];
    for (size_t i = 0; i < TERN_ARRAY_SIZE(idle); i++) {
        idle[i] = connect_to(AF_INET, "127.0.0.1", fx.port);
        assert_true(idle[i] >= 0);
    }
    http_resp_t r =
        http_on(AF_INET, "127.0.0.1", fx.port, "GET /metrics HTTP/1.0\r\n\r\n", REPLY_TIMEOUT_MS);
    assert_int_equal(r.status, 200);
    http_free(&r);
    /* every idle connection beyond PER_ADDR - 1 (the scrape took a place) has been closed */
    size_t want_closed = TERN_ARRAY_SIZE(idle) - (PER_ADDR - 1), closed = 0;
    bool gone[TERN_ARRAY_SIZE(idle)] = {false};
    int64_t deadline = now_ms() + REPLY_TIMEOUT_MS;
    while (closed < want_closed && now_ms() < deadline) { /* bounded by the deadline */
        for (size_t i = 0; i < TERN_ARRAY_SIZE(idle); i++) {
            struct pollfd p = {.fd = idle[i], .events = POLLIN};
            char c;
            if (!gone[i] && poll(&p, 1, 10) == 1 && recv(idle[i], &c, 1, MSG_DONTWAIT) <= 0) {
                gone[i] = true;
                closed++;
            }
        }
    }
    if (closed < want_closed)
        fail_msg("%zu of %zu idle connections closed, want %zu or more", closed,
                 TERN_ARRAY_SIZE(idle), want_closed);
    int64_t t0 = now_ms();
    metrics_stop(fx.m);
    fx.m = NULL;
    /* liveness: well under the 5 s request-head deadline the idle ones would otherwise meet */
    assert_true(now_ms() - t0 < 2000);
    for (size_t i = 0; i < TERN_ARRAY_SIZE(idle); i++)
        close(idle[i]);
    stop_all();
}

/* Label values are escaped: a zone whose origin holds a backslash. */
static void test_label_escape(void **state)
{
    (void)state;
    want.a_origin = "we\\.ird.test"; /* one label "we.ird" */
    start_all();
    expo_t e;
    http_resp_t r = scrape(&e);
    expect(r.body, "tern_zone_serial{zone=\"we\\\\.ird.test\"}", 2024010101);
    http_free(&r);
    stop_all();
}

/* Scrapes during traffic: every exposition parses and no counter goes backwards. The server counts
 * a query before it sends the reply, so once the client holds N replies the counter is at least N.
 */
static atomic_bool traffic_stop;
static atomic_uint traffic_answered;

static void *traffic(void *arg)
{
    (void)arg;
    int fd = udp_socket();
    uint8_t q[512];
    for (uint16_t id = 0; !atomic_load(&traffic_stop) && id < 20000; id++) {
        size_t len = make_query(q, id, "www.a.test", 1, false, false);
        (void)udp_ask(fd, q, len);
        atomic_fetch_add(&traffic_answered, 1);
    }
    close(fd);
    return NULL;
}

static void test_scrape_under_load(void **state)
{
    (void)state;
    start_all();
    atomic_store(&traffic_stop, false);
    atomic_store(&traffic_answered, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, traffic, NULL), 0);
    double last_udp = 0, last_a = 0;
    int64_t deadline = now_ms() + REPLY_TIMEOUT_MS;
    /* at least 30 scrapes, and keep going (up to the deadline) until traffic has been answered */
    for (int i = 0; i < 30 || (atomic_load(&traffic_answered) < 100 && now_ms() < deadline); i++) {
        expo_t e;
        http_resp_t r = scrape(&e);
        double udp = value_of(r.body, "tern_queries_total{transport=\"udp\"}");
        double a = value_of(r.body, "tern_queries_by_type_total{qtype=\"a\"}");
        assert_true(udp >= last_udp && a >= last_a);
        last_udp = udp;
        last_a = a;
        http_free(&r);
    }
    atomic_store(&traffic_stop, true);
    assert_int_equal(pthread_join(t, NULL), 0);
    unsigned answered = atomic_load(&traffic_answered);
    assert_true(answered > 0);
    expo_t e;
    http_resp_t r = scrape(&e);
    double udp = value_of(r.body, "tern_queries_total{transport=\"udp\"}");
    assert_true(udp >= last_udp);
    assert_true(udp >= (double)answered);
    http_free(&r);
    stop_all();
}

/* The status page beside /metrics: GET / (the page, its CSP), GET /status.json (the zones and
 * counters /metrics shows, as JSON), HEAD, and the same 404 and 405 as /metrics. */
static void test_status(void **state)
{
    (void)state;
    start_all();
    char v[256];
    /* idle clients hold the pool: the page is answered beside them, as /metrics is */
    int idle[24];
    for (size_t i = 0; i < TERN_ARRAY_SIZE(idle); i++) {
        idle[i] = connect_to(AF_INET, "127.0.0.1", fx.port);
        assert_true(idle[i] >= 0);
    }
    http_resp_t r = get("/");
    assert_int_equal(r.status, 200);
    assert_true(header(&r, "Content-Type", v, sizeof(v)));
    assert_string_equal(v, "text/html; charset=utf-8");
    assert_true(header(&r, "Content-Security-Policy", v, sizeof(v)));
    assert_non_null(strstr(v, "default-src 'none'"));
    assert_non_null(strstr(r.body, "<title>ternd status</title>"));
    http_free(&r);
    r = http("HEAD / HTTP/1.0\r\n\r\n");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "");
    http_free(&r);
    r = http("POST /status.json HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}");
    assert_int_equal(r.status, 405);
    http_free(&r);
    r = get("/status.json/");
    assert_int_equal(r.status, 404);
    http_free(&r);

    uint8_t q[512];
    int fd = udp_socket();
    size_t len = make_query(q, 1, "nx.a.test", 1, false, false);
    assert_int_equal(udp_ask(fd, q, len), 3);
    close(fd);

    /* the query is counted once its worker has counted it: bounded retries */
    json_t *doc = NULL;
    int64_t deadline = now_ms() + REPLY_TIMEOUT_MS;
    for (;;) {
        r = get("/status.json");
        assert_int_equal(r.status, 200);
        assert_true(header(&r, "Content-Type", v, sizeof(v)));
        assert_string_equal(v, "application/json");
        assert_true(header(&r, "Cache-Control", v, sizeof(v)));
        assert_string_equal(v, "no-store");
        json_error_t err;
        doc = json_loads(r.body, 0, &err);
        if (!doc)
            fail_msg("status.json does not parse: %s (%s)", err.text, r.body);
        http_free(&r);
        json_t *nx =
            json_object_get(json_object_get(json_object_get(doc, "queries"), "rcode"), "nxdomain");
        if (json_integer_value(nx) == 1 || now_ms() > deadline)
            break;
        json_decref(doc);
        usleep(20000);
    }
    assert_string_equal(json_string_value(json_object_get(doc, "version")), TERN_VERSION);
    assert_int_equal(json_integer_value(json_object_get(doc, "workers")), 2);
    json_t *queries = json_object_get(doc, "queries");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(queries, "rcode"), "nxdomain")), 1);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(queries, "transport"), "udp")), 1);
    json_t *zones = json_object_get(doc, "zones");
    assert_int_equal(json_array_size(zones), 2);
    json_t *a = json_array_get(zones, 0), *b = json_array_get(zones, 1);
    assert_string_equal(json_string_value(json_object_get(a, "name")), "a.test");
    assert_int_equal(json_integer_value(json_object_get(a, "serial")), 2024010101);
    assert_int_equal(json_integer_value(json_object_get(a, "records")), 4);
    assert_true(json_is_false(json_object_get(a, "signed")));
    assert_non_null(strstr(json_string_value(json_object_get(a, "source")), "a.zone"));
    assert_true(json_integer_value(json_object_get(a, "loaded")) <= (json_int_t)time(NULL));
    assert_string_equal(json_string_value(json_object_get(json_object_get(a, "transfer"), "role")),
                        "none");
    assert_string_equal(json_string_value(json_object_get(b, "name")), "b.test");
    assert_int_equal(json_integer_value(json_object_get(b, "serial")), 7);
    assert_int_equal(json_array_size(json_object_get(doc, "health")), 0);
    assert_true(json_is_object(json_object_get(doc, "drops")));
    assert_non_null(json_object_get(json_object_get(doc, "drops"), "rrl_dropped"));
    /* no Redis, no ANAME upstream configured: no such link shown */
    assert_int_equal(json_object_size(json_object_get(doc, "connections")), 0);
    json_decref(doc);
    for (size_t i = 0; i < TERN_ARRAY_SIZE(idle); i++)
        close(idle[i]);
    stop_all();
}

int main(void)
{
    log_set_level(LOG_LVL_ERR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_counters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reloads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_address, setup, teardown),
        cmocka_unit_test_setup_teardown(test_address_in_use, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exact_address, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_connections, setup, teardown),
        cmocka_unit_test_setup_teardown(test_label_escape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scrape_under_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
