/*
 * reqlog.c — redins' request log (reqlog.h says what a line holds and who calls what).
 *
 * A line is formatted straight into the output buffer, with no allocation and no stdio: the
 * writer thread may see every query of every worker. The query's bytes are parsed again here
 * (wire_parse_query(), the workers' own parser, so the name logged is the name answered) for
 * the qname; the workers keep only bytes, never text, in their rings.
 */
#include "tern/qlog/reqlog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tern/answer/answer.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/common/logfd.h"
#include "tern/wire/dname.h"
#include "tern/wire/parse.h"
#include "tern/wire/rr.h"

/* 64 KiB: a few hundred lines per write(2), so a busy server costs the writer thread one
 * syscall per few hundred queries, and a pipe (the journal's stdout) takes a whole buffer in
 * one write. */
#define REQLOG_BUF (64u << 10)

/* Room kept for one line before formatting it. The longest line is about 2.7 KiB: the fixed
 * keys and numbers (~400 bytes), two IPv6 addresses and an ECS prefix (~150), and a 255-byte
 * qname in presentation form with every byte escaped (\DDD, 1020 bytes) and each of its
 * backslashes escaped again for JSON or a quoted text value (2040). */
#define REQLOG_LINE_MAX 4096u

/* At close (shutdown), how long a stalled reader may still take what is buffered before it is
 * dropped: shutdown is promised in under a second, and the server log's own last flush shares
 * that second. */
#define REQLOG_CLOSE_MS 250

/* Presentation form of any name: every byte \DDD, the dots, the NUL. */
#define NAME_TEXT_MAX (DNAME_MAXLEN * 4 + 1)

struct qlog_reqlog {
    qlog_reqlog_target_t target;
    qlog_reqlog_format_t format;
    int fd;           /* the file's (ours), or 1 or 2 */
    logfd_t out;      /* fd, written without blocking (logfd.h) */
    char *path;       /* file target */
    const char *name; /* for messages: the path, "stdout" or "stderr" */
    size_t len;       /* bytes buffered: the first may be the rest of a line partly written */
    uint64_t nbuf;    /* lines buffered (newlines in buf[0..len)) */
    bool failing;     /* the last write failed: said once, and once again when writes work */
    bool stalled;     /* lines are being dropped for a full reader: said once per stall */
    uint64_t lines;   /* written by the owner thread, read by any: relaxed atomics */
    uint64_t errors;
    uint64_t dropped; /* lines the buffer had no room for: the reader stalled */
    int64_t tsec;     /* the second tprefix shows; -1: none yet */
    char tprefix[24]; /* "2026-11-26T04:05:06" */
    wire_query_t q;   /* scratch for the query's bytes (its name view is 1.4 KiB) */
    char buf[REQLOG_BUF];
};

/* ---- output ------------------------------------------------------------------------------- */

/* A cursor into the buffer; every put stops at end (a line never exceeds REQLOG_LINE_MAX, so
 * nothing is ever cut, but a bug would cut a line, still ended by its newline, rather than
 * overrun the buffer). */
typedef struct out {
    char *p;
    char *end;
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
    size_t room = (size_t)(o->end - o->p);
    if (n > room)
        n = room;
    memcpy(o->p, s, n);
    o->p += n;
}

static void put_s(out_t *o, const char *s)
{
    put(o, s, strlen(s));
}

static void put_c(out_t *o, char c)
{
    if (o->p < o->end)
        *o->p++ = c;
}

static void put_u64(out_t *o, uint64_t v)
{
    char d[20];
    size_t n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        put_c(o, d[--n]);
}

/* v as exactly width digits, zero-padded (width <= 9). */
static void put_digits(out_t *o, uint32_t v, unsigned width)
{
    char d[9];
    for (unsigned i = width; i-- > 0; v /= 10)
        d[i] = (char)('0' + v % 10);
    put(o, d, width);
}

/* s (n bytes of anything) inside a JSON string: '"' and '\' escaped, every control byte and
 * every byte outside ASCII as \u00XX (a byte, not UTF-8: the line stays valid JSON whatever the
 * bytes were). */
static void put_json_str(out_t *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    put_c(o, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            put_c(o, '\\');
            put_c(o, (char)c);
        } else if (c < 0x20 || c >= 0x7f) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(o, e, sizeof(e));
        } else {
            put_c(o, (char)c);
        }
    }
    put_c(o, '"');
}

/* A text value that needs quotes: empty, or holding a byte that would end it (a space), start a
 * forged line (a control byte), or make it ambiguous ('"', '=', '\', non-ASCII). */
static bool text_needs_quotes(const char *s, size_t n)
{
    if (n == 0)
        return true;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '=' || c == '\\')
            return true;
    }
    return false;
}

static void put_text_value(out_t *o, const char *s, size_t n)
{
    if (!text_needs_quotes(s, n)) {
        put(o, s, n);
        return;
    }
    char esc[TERN_ESCAPE_MAX(NAME_TEXT_MAX)];
    if (n > NAME_TEXT_MAX)
        n = NAME_TEXT_MAX; /* nothing longer is ever logged (see NAME_TEXT_MAX) */
    put_c(o, '"');
    put_s(o, tern_escape(esc, sizeof(esc), s, n));
    put_c(o, '"');
}

/* ,"key": or " key=" */
static void put_key(const qlog_reqlog_t *l, out_t *o, const char *key)
{
    if (l->format == QLOG_REQLOG_JSON) {
        put_s(o, ",\"");
        put_s(o, key);
        put_s(o, "\":");
    } else {
        put_c(o, ' ');
        put_s(o, key);
        put_c(o, '=');
    }
}

static void field_str(const qlog_reqlog_t *l, out_t *o, const char *key, const char *s, size_t n)
{
    put_key(l, o, key);
    if (l->format == QLOG_REQLOG_JSON)
        put_json_str(o, s, n);
    else
        put_text_value(o, s, n);
}

static void field_s(const qlog_reqlog_t *l, out_t *o, const char *key, const char *s)
{
    field_str(l, o, key, s, strlen(s));
}

static void field_u64(const qlog_reqlog_t *l, out_t *o, const char *key, uint64_t v)
{
    put_key(l, o, key);
    put_u64(o, v);
}

/* ---- values ------------------------------------------------------------------------------- */

/* "2026-11-26T04:05:06.123456Z" for ns since the epoch. gmtime_r() and strftime() only when the
 * second changes: the lines of one drain pass mostly share it. */
static void put_time(qlog_reqlog_t *l, out_t *o, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    int64_t sec = ns / 1000000000;
    uint32_t us = (uint32_t)(ns % 1000000000 / 1000);
    if (sec != l->tsec) {
        struct tm tm;
        time_t t = (time_t)sec;
        if (!gmtime_r(&t, &tm) ||
            strftime(l->tprefix, sizeof(l->tprefix), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
            snprintf(l->tprefix, sizeof(l->tprefix), "1970-01-01T00:00:00");
        l->tsec = sec;
    }
    put_s(o, l->tprefix);
    put_c(o, '.');
    put_digits(o, us, 6);
    put_c(o, 'Z');
}

/* The types tern names (rr.h), the common ones first: a lookup is a short scan. */
static const struct {
    uint16_t type;
    const char *name;
} type_names[] = {
    {WIRE_T_A, "A"},         {WIRE_T_AAAA, "AAAA"},     {WIRE_T_HTTPS, "HTTPS"},
    {WIRE_T_CNAME, "CNAME"}, {WIRE_T_TXT, "TXT"},       {WIRE_T_MX, "MX"},
    {WIRE_T_NS, "NS"},       {WIRE_T_SOA, "SOA"},       {WIRE_T_PTR, "PTR"},
    {WIRE_T_SRV, "SRV"},     {WIRE_T_SVCB, "SVCB"},     {WIRE_T_CAA, "CAA"},
    {WIRE_T_DS, "DS"},       {WIRE_T_DNSKEY, "DNSKEY"}, {WIRE_T_ANY, "ANY"},
    {WIRE_T_HINFO, "HINFO"}, {WIRE_T_NAPTR, "NAPTR"},   {WIRE_T_DNAME, "DNAME"},
    {WIRE_T_OPT, "OPT"},     {WIRE_T_RRSIG, "RRSIG"},   {WIRE_T_NSEC, "NSEC"},
    {WIRE_T_NSEC3, "NSEC3"}, {WIRE_T_TLSA, "TLSA"},     {WIRE_T_NSEC3PARAM, "NSEC3PARAM"},
    {WIRE_T_TSIG, "TSIG"},   {WIRE_T_IXFR, "IXFR"},     {WIRE_T_AXFR, "AXFR"},
    {WIRE_T_MAILB, "MAILB"}, {WIRE_T_MAILA, "MAILA"},   {WIRE_T_ANAME, "ANAME"},
};

/* The mnemonic of t, or RFC 3597's TYPE<n> in tmp. */
static const char *type_name(uint16_t t, char tmp[16])
{
    for (size_t i = 0; i < TERN_ARRAY_SIZE(type_names); i++)
        if (type_names[i].type == t)
            return type_names[i].name;
    snprintf(tmp, 16, "TYPE%u", (unsigned)t);
    return tmp;
}

/* The text of addr (family 4 or 6, or AF_INET/AF_INET6 as af); "" for anything else. */
static const char *addr_text(int af, const uint8_t *addr, char buf[INET6_ADDRSTRLEN])
{
    if ((af != AF_INET && af != AF_INET6) || !inet_ntop(af, addr, buf, INET6_ADDRSTRLEN))
        buf[0] = '\0';
    return buf;
}

static int rec_af(uint8_t family)
{
    return family == 6 ? AF_INET6 : family == 4 ? AF_INET : AF_UNSPEC;
}

/* The query's name (lowercased, presentation form) into name and its type into *qtype, from r's
 * query bytes; false when there are none or they hold no question. */
static bool query_name(qlog_reqlog_t *l, const qlog_rec_t *r, char *name, size_t len,
                       uint16_t *qtype)
{
    const size_t hdr = offsetof(qlog_rec_t, wire);
    /* a record's lengths come from our own workers; a bad one must still not read past it */
    if ((r->flags & QLOG_F_QUERY_CUT) || r->qlen < WIRE_HDR_LEN || r->size < hdr ||
        (size_t)r->qlen + r->rlen > r->size - hdr)
        return false;
    wire_parse_result_t pr = wire_parse_query(&l->q, r->wire, r->qlen);
    if (pr == WIRE_DROP || !l->q.has_question)
        return false;
    if (dname_to_str(l->q.name.lc, name, len) < 0)
        return false;
    *qtype = l->q.qtype;
    return true;
}

/* redins' client_subnet: the query's ECS option as miekg/dns's EDNS0_SUBNET.String() writes
 * it ("198.51.100.0/24/0", "[2001:db8::]/56/0": address, source prefix, scope prefix; an
 * IPv4-mapped address in dotted form, as Go's To4() finds it), "" without one. Its length. */
static size_t subnet_text(const qlog_rec_t *r, char *buf, size_t len)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char abuf[INET6_ADDRSTRLEN];
    if (!(r->flags & QLOG_F_ECS) || (r->ecs_family != 1 && r->ecs_family != 2)) {
        buf[0] = '\0';
        return 0;
    }
    bool v4 = r->ecs_family == 1 || memcmp(r->ecs_addr, mapped, sizeof(mapped)) == 0;
    const uint8_t *a = r->ecs_family == 2 && v4 ? r->ecs_addr + 12 : r->ecs_addr;
    addr_text(v4 ? AF_INET : AF_INET6, a, abuf);
    int k = snprintf(buf, len, v4 ? "%s/%u/%u" : "[%s]/%u/%u", abuf, (unsigned)r->ecs_source,
                     (unsigned)r->ecs_scope_q);
    return k > 0 && (size_t)k < len ? (size_t)k : 0;
}

/* redins' destination_country: the picked record's countries, a JSON array of strings (Go's
 * []string; null when it lists none, "" for its "" entry), or a comma-separated text value. */
static void field_dest_cc(const qlog_reqlog_t *l, out_t *o, const qlog_rec_t *r)
{
    put_key(l, o, "destination_country");
    bool json = l->format == QLOG_REQLOG_JSON;
    if (json && r->dest_ncc == 0) {
        put_s(o, "null");
        return;
    }
    char cc[QLOG_DEST_CC * 3 + 1];
    size_t n = 0;
    if (json)
        put_c(o, '[');
    for (unsigned i = 0; i < r->dest_ncc && i < QLOG_DEST_CC; i++) {
        char c[2] = {(char)(r->dest_cc[i] >> 8), (char)(r->dest_cc[i] & 0xFF)};
        size_t k = r->dest_cc[i] ? 2 : 0;
        if (json) {
            if (i)
                put_c(o, ',');
            put_json_str(o, c, k);
        } else {
            if (i)
                cc[n++] = ',';
            memcpy(cc + n, c, k);
            n += k;
        }
    }
    if (json)
        put_c(o, ']');
    else
        put_text_value(o, cc, n);
}

/* tern's steer_* fields: what the steering rules beyond redins decided (QLOG_F_STEER; reqlog.h
 * lists them), each only when its rule ran. Their keys sort between source_port and time. */
static void field_steer(const qlog_reqlog_t *l, out_t *o, const qlog_rec_t *r)
{
    static const char *const how[] = {"matched", "unmapped", "nogroup"};
    unsigned rules = r->steer_rules;
    if (rules & ANSWER_STEER_LATENCY) {
        unsigned h = r->steer_latency_how;
        field_s(l, o, "steer_latency", h < 3 ? how[h] : "");
        if (h == ANSWER_LATENCY_MATCHED) {
            size_t n = r->steer_group_len;
            field_str(l, o, "steer_latency_group", r->steer_group,
                      n < QLOG_STEER_GROUP_MAX ? n : QLOG_STEER_GROUP_MAX);
            field_u64(l, o, "steer_latency_ms", r->steer_latency_ms);
        }
    }
    if (rules & ANSWER_STEER_SHED) {
        field_u64(l, o, "steer_shed_out", r->steer_shed_out);
        field_u64(l, o, "steer_shed_scaled", r->steer_shed_scaled);
    }
    if (rules & ANSWER_STEER_STICKY)
        field_u64(l, o, "steer_sticky_prefix", r->steer_sticky_prefix);
    if (rules & ANSWER_STEER_TIER) {
        field_u64(l, o, "steer_tier", r->steer_tier);
        field_u64(l, o, "steer_tier_skipped", r->steer_tier_skipped);
    }
}

/* One record as a line at o, without its newline. The JSON keys in Go's order (encoding/json
 * sorts a map's keys, and redins' logger marshals one map: its fields with time, level, msg),
 * the text fields in the same order after the time, the level and the message. */
static void format_line(qlog_reqlog_t *l, out_t *o, const qlog_rec_t *r)
{
    char name[NAME_TEXT_MAX], abuf[INET6_ADDRSTRLEN], tmp[16], subnet[INET6_ADDRSTRLEN + 16];
    bool json = l->format == QLOG_REQLOG_JSON;
    int af = rec_af(r->family);

    if (json) {
        put_s(o, "{\"client_subnet\":");
        put_json_str(o, subnet, subnet_text(r, subnet, sizeof(subnet)));
    } else {
        put_time(l, o, r->qtime_ns);
        put_s(o, " info dns request");
        field_str(l, o, "client_subnet", subnet, subnet_text(r, subnet, sizeof(subnet)));
    }
    if (r->flags & QLOG_F_DEST) {
        /* redins' meaning: the record chosen for the client, not this server's address */
        field_dest_cc(l, o, r);
        field_s(l, o, "destination_ip", addr_text(rec_af(r->dest_family), r->dest_addr, abuf));
    }
    if (r->flags & QLOG_F_ZONE) /* redins: when the name is in a served zone, "" without an id */
        field_str(l, o, "domain_uuid", r->domain_id,
                  r->domain_id_len < QLOG_DOMAIN_ID_MAX ? r->domain_id_len : QLOG_DOMAIN_ID_MAX);
    bool ecs = r->flags & QLOG_F_ECS;
    if (ecs || r->scope)
        field_u64(l, o, "ecs_scope", r->scope); /* tern's: the scope the response gave */
    if (json)
        put_s(o, ",\"level\":\"info\"");
    field_s(l, o, "log_type", "request");
    if (json)
        put_s(o, ",\"msg\":\"dns request\"");

    /* redins': whole milliseconds, cut as Go's Nanoseconds() / 1000000; tern's: microseconds */
    uint64_t ns = r->rtime_ns > r->qtime_ns ? (uint64_t)(r->rtime_ns - r->qtime_ns) : 0;
    field_u64(l, o, "process_time", ns / 1000000);
    field_u64(l, o, "process_time_us", ns / 1000);

    uint16_t qtype = r->qtype;
    const char *type;
    if (query_name(l, r, name, sizeof(name), &qtype)) {
        type = type_name(qtype, tmp);
    } else {
        name[0] = '\0';
        type = qtype ? type_name(qtype, tmp) : "";
    }
    field_s(l, o, "record", name);
    /* redins' integer rcode; -1: no response was sent (dropped by a limit) */
    put_key(l, o, "response_code");
    if (r->rcode == 0xFFFF)
        put_s(o, "-1");
    else
        put_u64(o, r->rcode);

    field_s(l, o, "server_ip", addr_text(af, r->server_addr, abuf));
    field_u64(l, o, "server_port", r->server_port);
    if (r->flags & QLOG_F_ASN)
        field_u64(l, o, "source_asn", r->asn);
    if (r->flags & QLOG_F_COUNTRY)
        field_str(l, o, "source_country", r->country, strnlen(r->country, sizeof(r->country)));
    field_s(l, o, "source_ip", addr_text(af, r->client_addr, abuf));
    field_u64(l, o, "source_port", r->client_port);
    if (r->flags & QLOG_F_STEER)
        field_steer(l, o, r);
    if (json) {
        put_s(o, ",\"time\":\"");
        put_time(l, o, r->qtime_ns);
        put_c(o, '"');
    }
    field_s(l, o, "transport", r->flags & QLOG_F_TCP ? "tcp" : "udp");
    field_s(l, o, "type", type);
    if (json)
        put_c(o, '}');
}

/* ---- writing ------------------------------------------------------------------------------ */

static void add(uint64_t *counter, uint64_t n)
{
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* The buffered lines as one syslog message each, without waiting: a message the reader has no
 * room for is dropped, one that cannot be sent (no syslog socket) is an error. */
static void to_syslog(qlog_reqlog_t *l)
{
    for (size_t off = 0; off < l->len;) {
        const char *p = l->buf + off;
        const char *nl = memchr(p, '\n', l->len - off);
        size_t n = nl ? (size_t)(nl - p) : l->len - off;
        int rc = logfd_syslog(&l->out, LOG_DAEMON | LOG_INFO, "ternd", p, n);
        add(rc == 0 ? &l->lines : rc == -EAGAIN ? &l->dropped : &l->errors, 1);
        off += n + 1;
    }
    l->len = 0;
    l->nbuf = 0;
}

/* What the reader takes of the buffer now, or within timeout_ms; the rest stays buffered. 0, or
 * a negated errno when the reader is gone. */
static int write_some(qlog_reqlog_t *l, int timeout_ms)
{
    if (l->target == QLOG_REQLOG_SYSLOG) {
        to_syslog(l);
        return 0;
    }
    if (l->target != QLOG_REQLOG_FILE)
        logfd_sync(&l->out); /* descriptor 1 or 2 as it is now */
    int64_t w = logfd_flush(&l->out, l->buf, &l->len, timeout_ms);
    if (w < 0)
        return (int)w;
    add(&l->lines, (uint64_t)w);
    l->nbuf -= (uint64_t)w;
    return 0;
}

/* qlog_reqlog_flush(), waiting timeout_ms at most for a stalled reader. */
static int flush_within(qlog_reqlog_t *l, int timeout_ms)
{
    if (l->len == 0)
        return 0;
    int rc = write_some(l, timeout_ms);
    if (rc < 0) {
        add(&l->errors, l->nbuf);
        /* said once per outage, not per buffer: a full disk would otherwise flood the log */
        if (!l->failing)
            log_err("requests: %s: %s; request log lines are lost until it works again", l->name,
                    tern_strerror(rc));
        l->failing = true;
        l->len = 0;
        l->nbuf = 0;
        return TERN_EIO;
    }
    if (l->failing)
        log_info("requests: %s: writing again", l->name);
    l->failing = false;
    if (l->stalled && l->len == 0) {
        log_info("requests: %s: the reader takes lines again", l->name);
        l->stalled = false;
    }
    return 0;
}

int qlog_reqlog_flush(qlog_reqlog_t *l)
{
    return flush_within(l, 0);
}

int qlog_reqlog_write(qlog_reqlog_t *l, const qlog_rec_t *r)
{
    /* stalled: the next drain pass's flush tries again, not one failed write per record */
    if (sizeof(l->buf) - l->len < REQLOG_LINE_MAX && !l->stalled && qlog_reqlog_flush(l) < 0) {
        add(&l->errors, 1);
        return TERN_EIO;
    }
    if (sizeof(l->buf) - l->len < REQLOG_LINE_MAX) {
        /* the reader is not taking lines (a pipe nobody reads): this one is dropped, never
         * waited for, so the writer thread keeps draining the rings and stops when told */
        add(&l->dropped, 1);
        if (!l->stalled)
            log_warn("requests: %s: the reader does not keep up; request log lines are dropped "
                     "until it does",
                     l->name);
        l->stalled = true;
        return TERN_EIO;
    }
    /* the newline's byte is kept out of the cursor's reach */
    out_t o = {l->buf + l->len, l->buf + l->len + REQLOG_LINE_MAX - 1};
    format_line(l, &o, r);
    *o.p++ = '\n';
    l->len = (size_t)(o.p - l->buf);
    l->nbuf++;
    return 0;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

/* path opened for appending: never blocking (a FIFO without a reader fails with ENXIO instead),
 * only what a log can be written to. The descriptor, or a negated errno with why in err. */
static int open_file(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0640);
    if (fd < 0) {
        int e = errno;
        tern_set_err(err, errlen, "requests: %s: %s", path, tern_strerror(-e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        tern_set_err(err, errlen, "requests: %s: %s", path, tern_strerror(-e));
        return -e;
    }
    if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        close(fd);
        tern_set_err(err, errlen, "requests: %s: %s", path,
                     S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
        return TERN_EINVAL;
    }
    /* O_NONBLOCK stays: the description is ours, and a FIFO's reader that stalls must not
     * stall the writer thread (a regular file ignores it: the disk is waited for) */
    return fd;
}

qlog_reqlog_t *qlog_reqlog_open(const qlog_reqlog_opts_t *o, char *err, size_t errlen)
{
    if ((o->target != QLOG_REQLOG_FILE && o->target != QLOG_REQLOG_STDOUT &&
         o->target != QLOG_REQLOG_STDERR && o->target != QLOG_REQLOG_SYSLOG) ||
        (o->format != QLOG_REQLOG_JSON && o->format != QLOG_REQLOG_TEXT)) {
        tern_set_err(err, errlen, "requests: bad target or format");
        return NULL;
    }
    if (o->target == QLOG_REQLOG_FILE && (!o->path || !o->path[0])) {
        tern_set_err(err, errlen, "requests: target file needs a path");
        return NULL;
    }
    qlog_reqlog_t *l = calloc(1, sizeof(*l));
    if (!l) {
        tern_set_err(err, errlen, "requests: out of memory");
        return NULL;
    }
    l->target = o->target;
    l->format = o->format;
    l->tsec = -1;
    if (o->target == QLOG_REQLOG_FILE) {
        if (!(l->path = strdup(o->path))) {
            tern_set_err(err, errlen, "requests: out of memory");
            free(l);
            return NULL;
        }
        if ((l->fd = open_file(l->path, err, errlen)) < 0) {
            free(l->path);
            free(l);
            return NULL;
        }
        l->name = l->path;
        logfd_init(&l->out, l->fd);
    } else if (o->target == QLOG_REQLOG_SYSLOG) {
        l->fd = -1;
        l->name = "syslog";
        logfd_init_syslog(&l->out);
    } else {
        l->fd = o->target == QLOG_REQLOG_STDOUT ? STDOUT_FILENO : STDERR_FILENO;
        l->name = o->target == QLOG_REQLOG_STDOUT ? "stdout" : "stderr";
        logfd_init(&l->out, l->fd);
    }
    return l;
}

int qlog_reqlog_reopen(qlog_reqlog_t *l, char *err, size_t errlen)
{
    /* the lines of before the rotation go to the file they belong in */
    (void)qlog_reqlog_flush(l);
    if (l->target != QLOG_REQLOG_FILE)
        return 0;
    int fd = open_file(l->path, err, errlen);
    if (fd < 0)
        return fd;
    logfd_close(&l->out);
    close(l->fd);
    l->fd = fd;
    logfd_init(&l->out, fd);
    return 0;
}

void qlog_reqlog_stats(const qlog_reqlog_t *l, uint64_t *lines, uint64_t *errors, uint64_t *dropped)
{
    *lines = __atomic_load_n(&l->lines, __ATOMIC_RELAXED);
    *errors = __atomic_load_n(&l->errors, __ATOMIC_RELAXED);
    *dropped = __atomic_load_n(&l->dropped, __ATOMIC_RELAXED);
}

void qlog_reqlog_close(qlog_reqlog_t *l)
{
    if (!l)
        return;
    /* the last lines get REQLOG_CLOSE_MS of a stalled reader's time, then are dropped */
    (void)flush_within(l, REQLOG_CLOSE_MS);
    add(&l->dropped, l->nbuf);
    logfd_close(&l->out);
    if (l->target == QLOG_REQLOG_FILE)
        close(l->fd);
    free(l->path);
    free(l);
}
