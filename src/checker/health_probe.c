/*
 * health_probe.c — one check of one endpoint: an HTTP(S) request, a TCP connect or an ICMP echo,
 * and how its answer is judged. The checker (health_check.c) decides when checks run, owns the
 * jobs and their sockets' epoll registration, and records the results.
 *
 * Decisions (the checker's header comment says why in full): a fresh connection per HTTP check;
 * libcurl never resolves a name (CONNECT_TO the record's address); an HTTP check reads the status
 * line and headers, never the body — except a check whose load is in its JSON body (load
 * shedding), which reads at most HEALTH_LOAD_BODY_MAX of it; check connections close with a
 * reset (sockopt_nolinger()).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "health_check_int.h"
#include "health_load.h"
#include "tern/common/err.h"
#include "tern/common/log.h"

/* The headers of the final response are in: note its status and stop the transfer (see the
 * checker's decisions, health_check.c). CURL_WRITEFUNC_ERROR from a callback makes libcurl end
 * the transfer with CURLE_WRITE_ERROR; health_probe_http_result() judges the noted status. */
static size_t header_end(struct job *j)
{
    long code = 0;
    curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &code);
    j->http_status = code > 0 ? code : -1; /* -1: stopped, but no status (cannot happen) */
    return CURL_WRITEFUNC_ERROR;
}

/* CURLOPT_HEADERFUNCTION: one header line at a time; the empty line ends a response's headers.
 * An interim response (1xx: 100 Continue, 103 Early Hints) is followed by the final one. A load
 * header is read as it passes; a load in the body lets the transfer go on past the headers. */
static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    struct job *j = ctx;
    size_t len = size * n;
    const health_spec_t *s = &j->e->spec;
    if (!((len == 2 && p[0] == '\r' && p[1] == '\n') || (len == 1 && p[0] == '\n'))) {
        uint32_t m;
        int rc =
            s->load_src == HEALTH_LOAD_HEADER ? health_load_header(p, len, s->load_key, &m) : 0;
        if (rc != 0) /* the last one counts; a bad value is no reading */
            j->load = rc > 0 ? m : HEALTH_LOAD_UNKNOWN;
        return len;
    }
    long code = 0;
    curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 100 && code < 200) {
        j->load = HEALTH_LOAD_UNKNOWN; /* an interim response's headers are not the answer's */
        return len;
    }
    if (s->load_src == HEALTH_LOAD_JSON) {
        j->http_status = code > 0 ? code : -1; /* judged by this, however the body ends */
        return len;
    }
    return header_end(j);
}

/* CURLOPT_WRITEFUNCTION: body bytes mean the headers are over; on_header() stops before any
 * arrive unless the load is in the body, so otherwise this only guards against a response it
 * did not see end (and keeps libcurl's default, writing to stdout, away). */
static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    struct job *j = ctx;
    size_t len = size * n;
    if (j->e->spec.load_src != HEALTH_LOAD_JSON || j->http_status == 0)
        return header_end(j);
    if (j->body_len + len > HEALTH_LOAD_BODY_MAX) {
        j->body_over = true; /* no status document: stop reading, the load is unknown */
        return CURL_WRITEFUNC_ERROR;
    }
    if (j->body_len + len > j->body_cap) {
        size_t cap = j->body_cap ? j->body_cap : 1024;
        while (cap < j->body_len + len)
            cap *= 2;
        char *b = realloc(j->body, cap);
        if (!b)
            return CURL_WRITEFUNC_ERROR; /* no memory: no reading (the status stands) */
        j->body = b;
        j->body_cap = cap;
    }
    memcpy(j->body + j->body_len, p, len);
    j->body_len += len;
    return len;
}

/* A name libcurl takes as a URL host as it is. */
static bool url_host(const char *h)
{
    return h && *h &&
           strspn(h, "abcdefghijklmnopqrstuvwxyz0123456789-._ABCDEFGHIJKLMNOPQRSTUVWXYZ") ==
               strlen(h);
}

/* CURLOPT_SOCKOPTFUNCTION: close check connections with a reset (SO_LINGER 0), as HAProxy closes
 * its health checks: the answer is in, and a reset saves the FIN exchange and a TIME_WAIT socket
 * per check — on loopback, where both ends' packets are this thread's CPU, about a third of the
 * cost of a check. */
static int sockopt_nolinger(void *ctx, curl_socket_t fd, curlsocktype purpose)
{
    (void)ctx;
    if (purpose == CURLSOCKTYPE_IPCXN) {
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    return CURL_SOCKOPT_OK;
}

int health_probe_http(struct job *j, const char *ca_file)
{
    const health_spec_t *s = &j->e->spec;
    const char *scheme = s->proto == HEALTH_HTTPS ? "https" : "http";
    char ip[64], url[HEALTH_URI_MAX + 400], ct[400];
    snprintf(ip, sizeof(ip), s->family == 6 ? "[%s]" : "%s", j->e->addr_text);
    const char *uri = s->uri ? s->uri : "/";
    bool named = url_host(s->host);
    snprintf(url, sizeof(url), "%s://%s:%u%s", scheme, named ? s->host : ip, s->port, uri);
    CURL *h = j->easy;
    if (named) {
        snprintf(ct, sizeof(ct), "%s:%u:%s:%u", s->host, s->port, ip, s->port);
        if (!(j->connect_to = curl_slist_append(NULL, ct)))
            return TERN_ENOMEM;
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, j->connect_to);
    }
    j->err[0] = '\0';
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PRIVATE, j);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, j->err);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)s->timeout_ms);
    curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_USERAGENT, "tern-health/" TERN_VERSION);
    /* No DNS cache: every URL host here is connected through CONNECT_TO to an address literal,
     * so the cache only grows by one entry per endpoint, and libcurl prunes it by walking all
     * of them on every lookup — at 10,000 endpoints that walk was most of a check's CPU. */
    curl_easy_setopt(h, CURLOPT_DNS_CACHE_TIMEOUT, 0L);
    curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, sockopt_nolinger);
    /* A health answer is a status line and a few headers: libcurl's 16 KiB receive buffer per
     * handle is memory that 500 concurrent checks would hold for nothing. */
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 4096L);
    /* the status and headers, never the body (see the checker's decisions) */
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, j);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, j);
    if (s->method == HEALTH_GET)
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    else
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (s->proto == HEALTH_HTTPS) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, s->tls_verify ? 1L : 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, s->tls_verify ? 2L : 0L);
        if (ca_file)
            curl_easy_setopt(h, CURLOPT_CAINFO, ca_file);
    }
    return 0;
}

static void sockaddr_of(const struct ep *e, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    if (e->spec.family == 6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(e->spec.port);
        memcpy(&a->sin6_addr, e->spec.addr, 16);
        *len = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(e->spec.port);
        memcpy(&a->sin_addr, e->spec.addr, 4);
        *len = sizeof(*a);
    }
}

int health_probe_tcp(struct job *j)
{
    struct sockaddr_storage ss;
    socklen_t len;
    sockaddr_of(j->e, &ss, &len);
    j->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (j->fd < 0) {
        snprintf(j->err, sizeof(j->err), "socket: %s", strerror(errno));
        return 1;
    }
    if (connect(j->fd, (struct sockaddr *)&ss, len) == 0) {
        j->err[0] = '\0';
        return 1;
    }
    if (errno != EINPROGRESS) {
        snprintf(j->err, sizeof(j->err), "connect: %s", strerror(errno));
        return 1;
    }
    return 0;
}

static uint16_t csum(const uint8_t *p, size_t n)
{
    uint32_t s = 0;
    for (size_t i = 0; i + 1 < n; i += 2)
        s += (uint32_t)p[i] << 8 | p[i + 1];
    if (n & 1)
        s += (uint32_t)p[n - 1] << 8;
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

/* ICMP echo through a ping socket (the kernel sets the identifier and, for IPv6, the checksum). */
int health_probe_icmp(struct job *j, uint16_t *seq, bool *logged)
{
    bool v6 = j->e->spec.family == 6;
    j->fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                   v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP);
    if (j->fd < 0) {
        if (errno == EACCES || errno == EPERM) {
            snprintf(j->err, sizeof(j->err),
                     "ICMP echo: this system forbids unprivileged ping sockets to group %ld "
                     "(allow it with sysctl net.ipv4.ping_group_range=\"%ld %ld\", or use a tcp "
                     "check)",
                     (long)getegid(), (long)getegid(), (long)getegid());
            if (!*logged)
                log_err("health: %s", j->err);
            *logged = true;
        } else {
            snprintf(j->err, sizeof(j->err), "ICMP socket: %s", strerror(errno));
        }
        return 1;
    }
    uint8_t pkt[24] = {v6 ? ICMP6_ECHO_REQUEST : ICMP_ECHO, 0, 0, 0, 0, 0};
    j->seq = ++*seq;
    pkt[6] = (uint8_t)(j->seq >> 8);
    pkt[7] = (uint8_t)j->seq;
    memcpy(pkt + 8, "tern-health-chk!", 16);
    if (!v6) {
        uint16_t s = csum(pkt, sizeof(pkt));
        pkt[2] = (uint8_t)(s >> 8);
        pkt[3] = (uint8_t)s;
    }
    struct sockaddr_storage ss;
    socklen_t len;
    sockaddr_of(j->e, &ss, &len);
    ((struct sockaddr_in *)&ss)->sin_port = 0;
    if (v6)
        ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
    if (sendto(j->fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&ss, len) < 0) {
        snprintf(j->err, sizeof(j->err), "ICMP echo: %s", strerror(errno));
        return 1;
    }
    j->sent = true;
    return 0;
}

int health_probe_ready(struct job *j, short revents)
{
    if (j->e->spec.proto == HEALTH_TCP) {
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (getsockopt(j->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
            soerr = errno;
        if (soerr == 0 && !(revents & (POLLERR | POLLHUP)))
            return 1;
        snprintf(j->err, sizeof(j->err), "connect: %s", strerror(soerr ? soerr : ECONNRESET));
        return 0;
    }
    uint8_t buf[256];
    for (;;) {
        ssize_t k = recv(j->fd, buf, sizeof(buf), 0);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return -1;
            snprintf(j->err, sizeof(j->err), "ICMP echo: %s", strerror(errno));
            return 0;
        }
        bool v6 = j->e->spec.family == 6;
        if (k >= 8 && buf[0] == (v6 ? ICMP6_ECHO_REPLY : ICMP_ECHOREPLY) &&
            ((uint16_t)buf[6] << 8 | buf[7]) == j->seq)
            return 1;
    }
}

bool health_probe_http_result(struct job *j, CURLcode rc, CURL *easy)
{
    long code = j->http_status;
    /* stopped after the headers: the status is the result, whatever error libcurl gives
     * the stop (CURLE_WRITE_ERROR; some versions said CURLE_RECV_ERROR) */
    if (code == 0 && rc != CURLE_OK) {
        if (!j->err[0])
            snprintf(j->err, sizeof(j->err), "%s", curl_easy_strerror(rc));
        return false;
    }
    j->err[0] = '\0'; /* libcurl's word on the stop */
    if (code == 0)
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    const health_spec_t *s = &j->e->spec;
    if (s->load_src == HEALTH_LOAD_JSON) {
        uint32_t m;
        bool whole = rc == CURLE_OK && !j->body_over && j->body_len;
        j->load = whole && health_load_parse_json(j->body, j->body_len, s->load_key, &m) == 0
                      ? m
                      : HEALTH_LOAD_UNKNOWN;
    }
    bool ok = false;
    if (s->nexpect == 0) {
        ok = code == 200 || code == 301 || code == 302;
    } else {
        for (unsigned i = 0; i < s->nexpect && !ok; i++)
            ok = code == s->expect[i];
    }
    if (!ok)
        snprintf(j->err, sizeof(j->err), "HTTP status %ld", code);
    return ok;
}
