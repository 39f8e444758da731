/*
 * test_reqlog.c — redins' request log (src/qlog/reqlog.c): records built from real query and
 * response bytes become one line each; every JSON line parses (jansson) with the right fields;
 * a hostile qname (quotes, backslashes, control bytes, non-ASCII) stays one valid JSON object
 * and one text line that reads back to the same name; dropped, cut and unparsable records; the
 * text format; a rotated file reopened; the stdout target; write errors counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tern/answer/answer.h"
#include "tern/qlog/qlog_rec.h"
#include "tern/qlog/reqlog.h"

#include "test_util.h"

/* ---- records ------------------------------------------------------------------------------ */

/* A record with its bytes: qlog_rec_t is 8-byte aligned in the rings. */
typedef struct {
    uint64_t words[(sizeof(qlog_rec_t) + 2 * QLOG_WIRE_MAX) / 8 + 1];
} recbuf_t;

#define REC(b) ((qlog_rec_t *)(void *)(b)->words)

/* 2026-11-26T04:05:06.123456Z in nanoseconds. */
static int64_t test_time_ns(void)
{
    struct tm tm = {.tm_year = 2026 - 1900,
                    .tm_mon = 10,
                    .tm_mday = 26,
                    .tm_hour = 4,
                    .tm_min = 5,
                    .tm_sec = 6};
    return (int64_t)timegm(&tm) * 1000000000 + 123456789;
}

/* A query for the wire name (len bytes) and qtype into q; with ECS when ecs_len (an OPT with
 * one ECS option for 198.51.100.0/24). Returns its length. */
static size_t make_query(uint8_t *q, const uint8_t *name, size_t len, uint16_t qtype, bool ecs)
{
    size_t n = 0;
    static const uint8_t hdr[12] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(q, hdr, sizeof(hdr));
    n = sizeof(hdr);
    memcpy(q + n, name, len);
    n += len;
    q[n++] = (uint8_t)(qtype >> 8);
    q[n++] = (uint8_t)qtype;
    q[n++] = 0;
    q[n++] = 1; /* IN */
    if (ecs) {
        q[11] = 1;                                                                /* ARCOUNT */
        static const uint8_t opt[] = {0,   0,  41, 0x04, 0xd0, 0, 0, 0, 0, 0, 11, /* OPT */
                                      0,   8,  0,  7,                             /* ECS, 7 bytes */
                                      0,   1,  24, 0, /* IPv4, /24, scope 0 */
                                      198, 51, 100};
        memcpy(q + n, opt, sizeof(opt));
        n += sizeof(opt);
    }
    return n;
}

/* The response to query q (qlen bytes) with rcode into r: the query's bytes, QR and AA set. */
static size_t make_response(uint8_t *r, const uint8_t *q, size_t qlen, uint8_t rcode)
{
    memcpy(r, q, qlen);
    r[2] |= 0x84;
    r[3] = (uint8_t)((r[3] & 0xf0) | rcode);
    return qlen;
}

static const uint8_t www_example[] = "\3www\7Example\4test";
#define WWW_EXAMPLE_LEN sizeof(www_example) /* its NUL is the root label */

/* A UDP IPv4 record: 192.0.2.1:53124 asked 192.0.2.53:53 the query of q (qlen bytes), with the
 * response rbytes (rlen, 0 for none) and rcode; qtime test_time_ns(), 12 µs to answer. */
static qlog_rec_t *make_rec(recbuf_t *b, const uint8_t *q, size_t qlen, const uint8_t *resp,
                            size_t rlen, uint16_t qtype, uint16_t rcode)
{
    memset(b, 0, sizeof(*b));
    qlog_rec_t *r = REC(b);
    r->flags = rlen ? QLOG_F_RESPONSE : 0;
    r->family = 4;
    r->qtype = qtype;
    r->rcode = rcode;
    r->client_port = 53124;
    r->server_port = 53;
    assert_int_equal(inet_pton(AF_INET, "192.0.2.1", r->client_addr), 1);
    assert_int_equal(inet_pton(AF_INET, "192.0.2.53", r->server_addr), 1);
    r->qtime_ns = test_time_ns();
    r->rtime_ns = r->qtime_ns + 12000;
    r->qlen = (uint16_t)qlen;
    r->rlen = (uint16_t)rlen;
    if (qlen)
        memcpy(r->wire, q, qlen);
    if (rlen)
        memcpy(r->wire + qlen, resp, rlen);
    r->size = (uint32_t)((offsetof(qlog_rec_t, wire) + qlen + rlen + 7) & ~(size_t)7);
    return r;
}

/* The full example: www.Example.test A with ECS, steered by country and ASN, NOERROR. */
static qlog_rec_t *make_full(recbuf_t *b)
{
    uint8_t q[512], resp[512];
    size_t qlen = make_query(q, www_example, WWW_EXAMPLE_LEN, 1, true);
    size_t rlen = make_response(resp, q, qlen, 0);
    qlog_rec_t *r = make_rec(b, q, qlen, resp, rlen, 1, 0);
    r->flags |= QLOG_F_ECS | QLOG_F_COUNTRY | QLOG_F_ASN;
    r->ecs_family = 1;
    r->ecs_source = 24;
    r->ecs_addr[0] = 198;
    r->ecs_addr[1] = 51;
    r->ecs_addr[2] = 100;
    r->scope = 24;
    memcpy(r->country, "GB", 2);
    r->asn = 64500;
    return r;
}

/* ---- files -------------------------------------------------------------------------------- */

static char dir[64];

static int setup(void **state)
{
    (void)state;
    tu_mkdtemp(dir, sizeof(dir), "tern-reqlog");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(dir);
    return 0;
}

static void path_of(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

/* The whole file (malloc'd, NUL-terminated). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(1 << 22);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 22) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static size_t count_lines(const char *text)
{
    size_t n = 0;
    for (const char *p = text; (p = strchr(p, '\n')); p++)
        n++;
    return n;
}

static qlog_reqlog_t *open_file(const char *name, qlog_reqlog_format_t format)
{
    char path[128], err[256] = "";
    path_of(path, sizeof(path), name);
    qlog_reqlog_opts_t o = {.target = QLOG_REQLOG_FILE, .format = format, .path = path};
    qlog_reqlog_t *l = qlog_reqlog_open(&o, err, sizeof(err));
    if (!l)
        fail_msg("open: %s", err);
    return l;
}

/* The one line a log of r in format holds (malloc'd, its newline included). */
static char *one_line(const qlog_rec_t *r, qlog_reqlog_format_t format)
{
    char path[128];
    qlog_reqlog_t *l = open_file("one.log", format);
    assert_int_equal(qlog_reqlog_write(l, r), 0);
    qlog_reqlog_close(l);
    path_of(path, sizeof(path), "one.log");
    char *text = slurp(path);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(count_lines(text), 1);
    assert_int_equal(text[strlen(text) - 1], '\n');
    return text;
}

/* One JSON line as an object; fails the test unless it parses. */
static json_t *parse_json(const char *line)
{
    json_error_t e;
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &e);
    if (!o)
        fail_msg("not JSON (%s at %d): %s", e.text, e.position, line);
    assert_true(json_is_object(o));
    return o;
}

static const char *jstr(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_string(v))
        fail_msg("\"%s\" is not a string", key);
    return json_string_value(v);
}

static json_int_t jint(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        fail_msg("\"%s\" is not an integer", key);
    return json_integer_value(v);
}

/* A JSON line of the record r. */
static json_t *json_of(const qlog_rec_t *r)
{
    char *line = one_line(r, QLOG_REQLOG_JSON);
    json_t *o = parse_json(line);
    free(line);
    return o;
}

/* ---- JSON --------------------------------------------------------------------------------- */

/* r as a count-single pick of 203.0.113.7, a record listing cc0 and cc1 (ZONE_CC-packed). */
static void set_pick(qlog_rec_t *r, uint16_t cc0, uint16_t cc1)
{
    r->flags |= QLOG_F_DEST;
    r->dest_family = 4;
    assert_int_equal(inet_pton(AF_INET, "203.0.113.7", r->dest_addr), 1);
    r->dest_ncc = 2;
    r->dest_cc[0] = cc0;
    r->dest_cc[1] = cc1;
}

static bool jnull(const json_t *o, const char *key)
{
    return json_is_null(json_object_get(o, key));
}

/* redins' fields (handler/handler.go: HandleRequest's logData, Filter(), LogRequest(); its
 * logger's time, level and msg), each by name and JSON type, and tern's under names redins does
 * not use. */
static void test_json_fields(void **state)
{
    (void)state;
    recbuf_t b;
    json_t *o = json_of(make_full(&b));
    /* redins' */
    assert_string_equal(jstr(o, "time"), "2026-11-26T04:05:06.123456Z");
    assert_string_equal(jstr(o, "level"), "info");
    assert_string_equal(jstr(o, "msg"), "dns request");
    assert_string_equal(jstr(o, "log_type"), "request");
    assert_string_equal(jstr(o, "source_ip"), "192.0.2.1");
    assert_string_equal(jstr(o, "record"), "www.example.test."); /* lowercased, as redins */
    assert_string_equal(jstr(o, "type"), "A");
    assert_string_equal(jstr(o, "client_subnet"), "198.51.100.0/24/0"); /* miekg/dns' String() */
    assert_string_equal(jstr(o, "source_country"), "GB");
    assert_int_equal(jint(o, "source_asn"), 64500);
    assert_int_equal(jint(o, "response_code"), 0);     /* the integer rcode */
    assert_int_equal(jint(o, "process_time"), 0);      /* whole milliseconds: 12 µs is 0 */
    assert_null(json_object_get(o, "destination_ip")); /* no pick: redins writes none */
    assert_null(json_object_get(o, "destination_country"));
    /* tern's */
    assert_int_equal(jint(o, "process_time_us"), 12);
    assert_string_equal(jstr(o, "server_ip"), "192.0.2.53");
    assert_int_equal(jint(o, "server_port"), 53);
    assert_int_equal(jint(o, "source_port"), 53124);
    assert_int_equal(jint(o, "ecs_scope"), 24);
    assert_string_equal(jstr(o, "transport"), "udp");
    assert_null(json_object_get(o, "destination_port"));
    assert_int_equal(json_object_size(o), 18);
    json_decref(o);

    /* a count-single pick: destination_ip and destination_country are the record chosen for
     * the client (redins' Filter()), not this server's address */
    qlog_rec_t *r = make_full(&b);
    set_pick(r, (uint16_t)('D' << 8 | 'E'), 0); /* 0: redins' "" entry */
    o = json_of(r);
    assert_string_equal(jstr(o, "destination_ip"), "203.0.113.7");
    const json_t *cc = json_object_get(o, "destination_country");
    assert_true(json_is_array(cc));
    assert_int_equal(json_array_size(cc), 2);
    assert_string_equal(json_string_value(json_array_get(cc, 0)), "DE");
    assert_string_equal(json_string_value(json_array_get(cc, 1)), "");
    assert_string_equal(jstr(o, "server_ip"), "192.0.2.53");
    assert_int_equal(json_object_size(o), 20);
    json_decref(o);
    /* the name is in a served zone: domain_uuid, its id (redins' record.Zone.Config.DomainId),
     * "" for a zone that gives none */
    r->flags |= QLOG_F_ZONE;
    memcpy(r->domain_id, "5b9c6d4e-0f1a-4b2c-8d3e-7f6a5b4c3d2e", 36);
    r->domain_id_len = 36;
    o = json_of(r);
    assert_string_equal(jstr(o, "domain_uuid"), "5b9c6d4e-0f1a-4b2c-8d3e-7f6a5b4c3d2e");
    json_decref(o);
    r->domain_id_len = 0;
    o = json_of(r);
    assert_string_equal(jstr(o, "domain_uuid"), "");
    json_decref(o);
    r->flags &= (uint16_t)~QLOG_F_ZONE;
    /* a picked record listing no country: Go's nil []string, null */
    r->dest_ncc = 0;
    r->dest_family = 6;
    assert_int_equal(inet_pton(AF_INET6, "2001:db8::7", r->dest_addr), 1);
    o = json_of(r);
    assert_string_equal(jstr(o, "destination_ip"), "2001:db8::7");
    assert_true(jnull(o, "destination_country"));
    json_decref(o);

    /* IPv6 over TCP, NXDOMAIN, nothing steered: client_subnet "" (redins always writes it),
     * the other optional keys left out */
    uint8_t q[512], resp[512];
    size_t qlen = make_query(q, www_example, WWW_EXAMPLE_LEN, 28, false);
    size_t rlen = make_response(resp, q, qlen, 3);
    r = make_rec(&b, q, qlen, resp, rlen, 28, 3);
    r->family = 6;
    r->flags |= QLOG_F_TCP;
    assert_int_equal(inet_pton(AF_INET6, "2001:db8::1", r->client_addr), 1);
    assert_int_equal(inet_pton(AF_INET6, "2001:db8::53", r->server_addr), 1);
    r->rtime_ns = r->qtime_ns + 2345678; /* 2.345678 ms */
    o = json_of(r);
    assert_string_equal(jstr(o, "source_ip"), "2001:db8::1");
    assert_string_equal(jstr(o, "server_ip"), "2001:db8::53");
    assert_string_equal(jstr(o, "type"), "AAAA");
    assert_int_equal(jint(o, "response_code"), 3);
    assert_string_equal(jstr(o, "transport"), "tcp");
    assert_int_equal(jint(o, "process_time"), 2); /* cut, as Go's integer division */
    assert_int_equal(jint(o, "process_time_us"), 2345);
    assert_string_equal(jstr(o, "client_subnet"), "");
    assert_null(json_object_get(o, "source_country"));
    assert_null(json_object_get(o, "source_asn"));
    assert_null(json_object_get(o, "ecs_scope"));
    assert_null(json_object_get(o, "destination_ip"));
    json_decref(o);

    /* a scope without ECS (steered by the client's own address) is still said */
    r->scope = 16;
    o = json_of(r);
    assert_int_equal(jint(o, "ecs_scope"), 16);
    assert_string_equal(jstr(o, "client_subnet"), "");
    json_decref(o);

    /* an IPv6 ECS subnet, as miekg/dns writes it: in brackets */
    r->flags |= QLOG_F_ECS;
    r->ecs_family = 2;
    r->ecs_source = 56;
    assert_int_equal(inet_pton(AF_INET6, "2001:db8:1200::", r->ecs_addr), 1);
    o = json_of(r);
    assert_string_equal(jstr(o, "client_subnet"), "[2001:db8:1200::]/56/0");
    json_decref(o);
}

/* The exact JSON line of the full example: the keys in Go's order (encoding/json sorts a map's
 * keys; redins' logger marshals one map), tern's among them. */
static void test_json_exact(void **state)
{
    (void)state;
    recbuf_t b;
    char *line = one_line(make_full(&b), QLOG_REQLOG_JSON);
    assert_string_equal(
        line, "{\"client_subnet\":\"198.51.100.0/24/0\",\"ecs_scope\":24,\"level\":\"info\","
              "\"log_type\":\"request\",\"msg\":\"dns request\",\"process_time\":0,"
              "\"process_time_us\":12,\"record\":\"www.example.test.\",\"response_code\":0,"
              "\"server_ip\":\"192.0.2.53\",\"server_port\":53,\"source_asn\":64500,"
              "\"source_country\":\"GB\",\"source_ip\":\"192.0.2.1\",\"source_port\":53124,"
              "\"time\":\"2026-11-26T04:05:06.123456Z\",\"transport\":\"udp\",\"type\":\"A\"}\n");
    free(line);
}

/* ---- hostile names ------------------------------------------------------------------------ */

/* A text value as written: quoted values read back (\\, \", \DDD), others as they are. */
static char *text_value(const char *line, const char *key, char *out, size_t len)
{
    char want[64];
    snprintf(want, sizeof(want), " %s=", key);
    const char *p = strstr(line, want);
    assert_non_null(p);
    p += strlen(want);
    size_t n = 0;
    if (*p != '"') {
        while (*p && *p != ' ' && *p != '\n' && n + 1 < len)
            out[n++] = *p++;
        out[n] = '\0';
        return out;
    }
    for (p++; *p != '"'; p++) {
        assert_true(*p && *p != '\n' && n + 1 < len);
        if (*p != '\\') {
            out[n++] = *p;
        } else if (p[1] == '\\' || p[1] == '"') {
            out[n++] = *++p;
        } else {
            assert_true(p[1] >= '0' && p[1] <= '9' && p[2] && p[3]);
            out[n++] = (char)((p[1] - '0') * 100 + (p[2] - '0') * 10 + (p[3] - '0'));
            p += 3;
        }
    }
    out[n] = '\0';
    return out;
}

/* No byte of the line is a control byte (but its final newline) or outside ASCII. */
static void expect_clean(const char *line)
{
    size_t n = strlen(line);
    for (size_t i = 0; i + 1 < n; i++)
        if ((unsigned char)line[i] < 0x20 || (unsigned char)line[i] >= 0x7f)
            fail_msg("byte %zu of the line is 0x%02x", i, (unsigned char)line[i]);
}

static void test_hostile_qname(void **state)
{
    (void)state;
    /* a"b\cX, a newline, a NUL, 0xff, a space, '=', 'é' in UTF-8, a dot: one label */
    static const uint8_t name[] = "\20a\"b\\cX\n\0\xff =\xc3\xa9.\"x\4test";
    /* its presentation form (dname_to_str(), lowercased): what the log must say */
    static const char want[] = "a\\\"b\\\\cx\\010\\000\\255\\032=\\195\\169\\.\\\"x.test.";
    uint8_t q[512];
    recbuf_t b;
    size_t qlen = make_query(q, name, sizeof(name), 16, false);
    qlog_rec_t *r = make_rec(&b, q, qlen, NULL, 0, 16, 0xFFFF);

    char *line = one_line(r, QLOG_REQLOG_JSON);
    expect_clean(line);
    json_t *o = parse_json(line);
    assert_string_equal(jstr(o, "record"), want);
    assert_string_equal(jstr(o, "type"), "TXT");
    json_decref(o);
    free(line);

    char value[2048];
    line = one_line(r, QLOG_REQLOG_TEXT);
    expect_clean(line);
    assert_non_null(strstr(line, " record=\"")); /* quoted: it holds '"' and '\' */
    assert_string_equal(text_value(line, "record", value, sizeof(value)), want);
    assert_string_equal(text_value(line, "type", value, sizeof(value)), "TXT");
    assert_string_equal(text_value(line, "response_code", value, sizeof(value)), "-1");
    free(line);

    /* the longest name there is, every byte escaped: the line still fits and parses */
    uint8_t big[256];
    size_t off = 0;
    for (int i = 0; i < 4; i++) {
        size_t lab = i < 3 ? 63 : 61;
        big[off++] = (uint8_t)lab;
        memset(big + off, i == 0 ? '"' : i == 1 ? '\\' : 0x01, lab);
        off += lab;
    }
    big[off++] = 0;
    assert_int_equal(off, 255);
    qlen = make_query(q, big, off, 1, false);
    r = make_rec(&b, q, qlen, NULL, 0, 1, 0xFFFF);
    line = one_line(r, QLOG_REQLOG_JSON);
    expect_clean(line);
    o = parse_json(line);
    assert_true(strlen(jstr(o, "record")) > 63 * 2 * 2 + 61 * 4);
    json_decref(o);
    free(line);
    line = one_line(r, QLOG_REQLOG_TEXT);
    expect_clean(line);
    assert_true(strlen(text_value(line, "record", value, sizeof(value))) > 500);
    free(line);

    /* a country code is bytes too: escaped, never raw */
    r->flags |= QLOG_F_COUNTRY;
    memcpy(r->country, "\"\n", 2);
    line = one_line(r, QLOG_REQLOG_JSON);
    expect_clean(line);
    o = parse_json(line);
    assert_string_equal(jstr(o, "source_country"), "\"\n");
    json_decref(o);
    free(line);
    line = one_line(r, QLOG_REQLOG_TEXT);
    expect_clean(line);
    assert_string_equal(text_value(line, "source_country", value, sizeof(value)), "\"\n");
    free(line);
}

/* ---- dropped, cut and unparsable ---------------------------------------------------------- */

/* The steering rules beyond redins (issue 33): each group of steer_* keys only when its rule
 * ran, in Go's key order (between source_port and time), and in the text format too. */
static void test_steer_fields(void **state)
{
    (void)state;
    recbuf_t b;
    qlog_rec_t *r = make_full(&b);
    r->flags |= QLOG_F_STEER;
    r->steer_rules =
        ANSWER_STEER_TIER | ANSWER_STEER_STICKY | ANSWER_STEER_SHED | ANSWER_STEER_LATENCY;
    r->steer_tier = 2;
    r->steer_tier_skipped = 1;
    r->steer_sticky_prefix = 24;
    r->steer_shed_out = 1;
    r->steer_shed_scaled = 3;
    r->steer_latency_how = ANSWER_LATENCY_MATCHED;
    r->steer_latency_ms = 23;
    memcpy(r->steer_group, "fra1", 4);
    r->steer_group_len = 4;
    char *line = one_line(r, QLOG_REQLOG_JSON);
    const char *want = "\"source_port\":53124,\"steer_latency\":\"matched\","
                       "\"steer_latency_group\":\"fra1\",\"steer_latency_ms\":23,"
                       "\"steer_shed_out\":1,\"steer_shed_scaled\":3,"
                       "\"steer_sticky_prefix\":24,\"steer_tier\":2,\"steer_tier_skipped\":1,"
                       "\"time\":";
    if (!strstr(line, want))
        fail_msg("steer keys not in order in %s", line);
    json_t *o = parse_json(line);
    assert_int_equal(json_object_size(o), 18 + 8);
    json_decref(o);
    free(line);

    /* only the rules that ran; a fallback names no group */
    r->steer_rules = ANSWER_STEER_LATENCY;
    r->steer_latency_how = ANSWER_LATENCY_UNMAPPED;
    o = json_of(r);
    assert_string_equal(jstr(o, "steer_latency"), "unmapped");
    assert_null(json_object_get(o, "steer_latency_group"));
    assert_null(json_object_get(o, "steer_latency_ms"));
    assert_null(json_object_get(o, "steer_tier"));
    assert_null(json_object_get(o, "steer_sticky_prefix"));
    assert_null(json_object_get(o, "steer_shed_out"));
    assert_int_equal(json_object_size(o), 18 + 1);
    json_decref(o);

    r->steer_rules = ANSWER_STEER_STICKY;
    line = one_line(r, QLOG_REQLOG_TEXT);
    char v[64];
    assert_string_equal(text_value(line, "steer_sticky_prefix", v, sizeof(v)), "24");
    assert_null(strstr(line, "steer_tier"));
    free(line);

    /* no rule ran: redins' line, with no steer_* key at all */
    r->flags &= (uint16_t)~QLOG_F_STEER;
    line = one_line(r, QLOG_REQLOG_JSON);
    assert_null(strstr(line, "steer_"));
    free(line);
}

static void test_dropped_and_cut(void **state)
{
    (void)state;
    uint8_t q[512];
    recbuf_t b;
    size_t qlen = make_query(q, www_example, WWW_EXAMPLE_LEN, 1, false);

    /* dropped: no response */
    qlog_rec_t *r = make_rec(&b, q, qlen, NULL, 0, 1, 0xFFFF);
    json_t *o = json_of(r);
    assert_int_equal(jint(o, "response_code"), -1);
    assert_string_equal(jstr(o, "record"), "www.example.test.");
    json_decref(o);

    /* the query's bytes cut: the record's own qtype, no name */
    r = make_rec(&b, NULL, 0, NULL, 0, 28, 0);
    r->flags |= QLOG_F_QUERY_CUT | QLOG_F_RESPONSE | QLOG_F_RESPONSE_CUT;
    o = json_of(r);
    assert_string_equal(jstr(o, "record"), "");
    assert_string_equal(jstr(o, "type"), "AAAA");
    assert_int_equal(jint(o, "response_code"), 0);
    json_decref(o);

    /* nothing known of the question */
    r = make_rec(&b, NULL, 0, NULL, 0, 0, 1);
    o = json_of(r);
    assert_string_equal(jstr(o, "record"), "");
    assert_string_equal(jstr(o, "type"), "");
    assert_int_equal(jint(o, "response_code"), 1);
    json_decref(o);

    /* bytes that do not parse: a response (QR set), and garbage */
    uint8_t bad[512];
    memcpy(bad, q, qlen);
    bad[2] |= 0x80;
    r = make_rec(&b, bad, qlen, NULL, 0, 1, 0xFFFF);
    o = json_of(r);
    assert_string_equal(jstr(o, "record"), "");
    assert_string_equal(jstr(o, "type"), "A");
    json_decref(o);
    r = make_rec(&b, (const uint8_t *)"\1\2\3\4\5", 5, NULL, 0, 0, 0xFFFF);
    o = json_of(r);
    assert_string_equal(jstr(o, "record"), "");
    assert_string_equal(jstr(o, "type"), "");
    json_decref(o);

    /* a question followed by garbage (FORMERR): the question is still logged */
    memcpy(bad, q, qlen);
    bad[qlen] = 0xee;
    r = make_rec(&b, bad, qlen + 1, NULL, 0, 1, 1);
    o = json_of(r);
    assert_string_equal(jstr(o, "record"), "www.example.test.");
    assert_int_equal(jint(o, "response_code"), 1);
    json_decref(o);

    /* types and rcodes tern has no name for; a clock that went back */
    qlen = make_query(q, www_example, WWW_EXAMPLE_LEN, 65280, false);
    r = make_rec(&b, q, qlen, NULL, 0, 65280, 11);
    r->rtime_ns = r->qtime_ns - 5000;
    o = json_of(r);
    assert_string_equal(jstr(o, "type"), "TYPE65280");
    assert_int_equal(jint(o, "response_code"), 11);
    assert_int_equal(jint(o, "process_time"), 0);
    assert_int_equal(jint(o, "process_time_us"), 0);
    json_decref(o);
    qlen = make_query(q, www_example, WWW_EXAMPLE_LEN, 65305, false);
    r = make_rec(&b, q, qlen, NULL, 0, 65305, 23);
    o = json_of(r);
    assert_string_equal(jstr(o, "type"), "ANAME");
    assert_int_equal(jint(o, "response_code"), 23);
    json_decref(o);

    /* the root */
    qlen = make_query(q, (const uint8_t *)"", 1, 2, false);
    r = make_rec(&b, q, qlen, NULL, 0, 2, 5);
    o = json_of(r);
    assert_string_equal(jstr(o, "record"), ".");
    assert_string_equal(jstr(o, "type"), "NS");
    assert_int_equal(jint(o, "response_code"), 5);
    json_decref(o);
}

/* ---- text --------------------------------------------------------------------------------- */

static void test_text_format(void **state)
{
    (void)state;
    recbuf_t b;
    char *line = one_line(make_full(&b), QLOG_REQLOG_TEXT);
    assert_string_equal(line, "2026-11-26T04:05:06.123456Z info dns request "
                              "client_subnet=198.51.100.0/24/0 ecs_scope=24 log_type=request "
                              "process_time=0 process_time_us=12 record=www.example.test. "
                              "response_code=0 server_ip=192.0.2.53 server_port=53 "
                              "source_asn=64500 source_country=GB source_ip=192.0.2.1 "
                              "source_port=53124 transport=udp type=A\n");
    free(line);

    /* a pick: its countries comma-separated, "" entries kept */
    qlog_rec_t *p = make_full(&b);
    set_pick(p, (uint16_t)('D' << 8 | 'E'), (uint16_t)('F' << 8 | 'R'));
    line = one_line(p, QLOG_REQLOG_TEXT);
    assert_non_null(strstr(line, " destination_country=DE,FR destination_ip=203.0.113.7 "));
    free(line);

    /* an empty value is quoted, so the line still splits into key=value pairs */
    qlog_rec_t *r = make_rec(&b, NULL, 0, NULL, 0, 0, 0xFFFF);
    line = one_line(r, QLOG_REQLOG_TEXT);
    assert_non_null(strstr(line, " record=\"\" response_code=-1 "));
    assert_non_null(strstr(line, " type=\"\"\n"));
    free(line);
}

/* ---- buffering, rotation, targets --------------------------------------------------------- */

/* More lines than one buffer holds: written as the buffer fills, whole, every one valid. */
static void test_many_lines(void **state)
{
    (void)state;
    char path[128];
    recbuf_t b;
    qlog_rec_t *r = make_full(&b);
    qlog_reqlog_t *l = open_file("many.log", QLOG_REQLOG_JSON);
    path_of(path, sizeof(path), "many.log");
    for (int i = 0; i < 2000; i++) {
        r->client_port = (uint16_t)i;
        assert_int_equal(qlog_reqlog_write(l, r), 0);
    }
    /* before any flush, whole buffers are in the file already */
    char *text = slurp(path);
    size_t early = count_lines(text);
    assert_true(early > 0 && early < 2000);
    assert_int_equal(text[strlen(text) - 1], '\n');
    free(text);
    uint64_t lines = 0, errors = 0, dropped = 0;
    qlog_reqlog_stats(l, &lines, &errors, &dropped);
    assert_int_equal(lines, early);
    assert_int_equal(qlog_reqlog_flush(l), 0);
    qlog_reqlog_stats(l, &lines, &errors, &dropped);
    assert_int_equal(lines, 2000);
    assert_int_equal(errors, 0);
    qlog_reqlog_close(l);

    text = slurp(path);
    assert_int_equal(count_lines(text), 2000);
    int i = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), i++) {
        json_t *o = parse_json(line);
        assert_int_equal(jint(o, "source_port"), i);
        json_decref(o);
    }
    assert_int_equal(i, 2000);
    free(text);
}

/* logrotate's way: rename the file, SIGHUP (reopen), the new lines go to a new file. */
static void test_reopen_rotation(void **state)
{
    (void)state;
    char path[128], rotated[128], err[256] = "";
    recbuf_t b;
    qlog_rec_t *r = make_full(&b);
    path_of(path, sizeof(path), "requests.log");
    path_of(rotated, sizeof(rotated), "requests.log.1");
    qlog_reqlog_t *l = open_file("requests.log", QLOG_REQLOG_TEXT);
    assert_int_equal(qlog_reqlog_write(l, r), 0);
    assert_int_equal(qlog_reqlog_flush(l), 0);
    assert_int_equal(rename(path, rotated), 0);
    assert_int_equal(qlog_reqlog_write(l, r), 0); /* buffered: belongs to the old file */
    assert_int_equal(qlog_reqlog_reopen(l, err, sizeof(err)), 0);
    r->client_port = 1;
    assert_int_equal(qlog_reqlog_write(l, r), 0);
    assert_int_equal(qlog_reqlog_flush(l), 0);

    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    mode_t mask = umask(0);
    umask(mask);
    assert_int_equal(st.st_mode & 0777, 0640 & ~mask); /* created 0640, less the umask */
    char *text = slurp(rotated);
    assert_int_equal(count_lines(text), 2);
    free(text);
    text = slurp(path);
    assert_int_equal(count_lines(text), 1);
    assert_non_null(strstr(text, " source_port=1 "));
    free(text);

    /* a reopen that fails keeps the file in use */
    assert_int_equal(rename(path, rotated), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_true(qlog_reqlog_reopen(l, err, sizeof(err)) < 0);
    char want[200];
    snprintf(want, sizeof(want), "requests: %s: ", path);
    assert_memory_equal(err, want, strlen(want));
    assert_int_equal(qlog_reqlog_write(l, r), 0);
    qlog_reqlog_close(l);
    text = slurp(rotated);
    assert_int_equal(count_lines(text), 2);
    free(text);
}

/* The stdout target writes to descriptor 1 as it is (the journal under systemd). */
static void test_stdout_target(void **state)
{
    (void)state;
    char path[128], err[256] = "";
    recbuf_t b;
    qlog_rec_t *r = make_full(&b);
    path_of(path, sizeof(path), "stdout.log");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, STDOUT_FILENO), STDOUT_FILENO);
    qlog_reqlog_opts_t o = {.target = QLOG_REQLOG_STDOUT, .format = QLOG_REQLOG_JSON};
    qlog_reqlog_t *l = qlog_reqlog_open(&o, err, sizeof(err));
    int w = l ? qlog_reqlog_write(l, r) : -1;
    qlog_reqlog_close(l); /* flushes, leaves descriptor 1 open */
    int still_open = fcntl(STDOUT_FILENO, F_GETFD);
    assert_int_equal(dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
    close(saved);
    close(fd);
    assert_non_null(l);
    assert_int_equal(w, 0);
    assert_true(still_open >= 0);
    char *text = slurp(path);
    assert_int_equal(count_lines(text), 1);
    json_t *j = parse_json(text);
    assert_string_equal(jstr(j, "record"), "www.example.test.");
    json_decref(j);
    free(text);

    /* stderr opens too; reopen is only a flush there */
    o.target = QLOG_REQLOG_STDERR;
    l = qlog_reqlog_open(&o, err, sizeof(err));
    assert_non_null(l);
    assert_int_equal(qlog_reqlog_reopen(l, err, sizeof(err)), 0);
    qlog_reqlog_close(l);
}

/* The stdout target on a pipe nobody reads (a stuck journal): writing and flushing never
 * wait, the lines that do not fit are dropped and counted, and close returns (a blocking write
 * would hang here, and ctest's timeout fail the test). What the reader then finds are whole
 * lines. */
static void test_stalled_reader(void **state)
{
    (void)state;
    char err[256] = "";
    recbuf_t b;
    qlog_rec_t *r = make_full(&b);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    (void)fcntl(p[1], F_SETPIPE_SZ, 4096);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(p[1], STDOUT_FILENO), STDOUT_FILENO);
    qlog_reqlog_opts_t o = {.target = QLOG_REQLOG_STDOUT, .format = QLOG_REQLOG_JSON};
    qlog_reqlog_t *l = qlog_reqlog_open(&o, err, sizeof(err));
    assert_non_null(l);
    int refused = 0;
    for (int i = 0; i < 2000; i++) { /* some 800 KiB of lines for a 4 KiB pipe */
        refused += qlog_reqlog_write(l, r) < 0;
        if (i % 100 == 99)
            assert_int_equal(qlog_reqlog_flush(l), 0); /* a full reader is no error */
    }
    uint64_t lines = 0, errors = 0, dropped = 0;
    qlog_reqlog_stats(l, &lines, &errors, &dropped);
    assert_int_equal(errors, 0);
    assert_int_equal(dropped, (uint64_t)refused);
    assert_true(dropped > 1000);
    assert_true(lines > 0 && lines < 2000);
    qlog_reqlog_close(l); /* 250 ms for the reader, then the rest is dropped */
    assert_int_equal(dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
    close(saved);
    close(p[1]);
    static char text[8192];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof(text) - 1 && (n = read(p[0], text + len, sizeof(text) - 1 - len)) > 0)
        len += (size_t)n;
    text[len] = '\0';
    close(p[0]);
    assert_true(len > 0);
    assert_int_equal(text[len - 1], '\n');
    for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        json_t *j = parse_json(line);
        assert_string_equal(jstr(j, "record"), "www.example.test.");
        json_decref(j);
    }
}

/* target syslog: each line one message to the local syslog socket. A child process gets a
 * mount namespace of its own with a tmpfs on /dev, binds /dev/log there itself and reads what
 * the sink sends (root only: the namespace needs CAP_SYS_ADMIN; CI runs as root); then stops
 * reading. */
static int syslog_child(int s)
{
    recbuf_t b;
    qlog_rec_t *r = make_full(&b);
    char err[256];
    qlog_reqlog_opts_t o = {.target = QLOG_REQLOG_SYSLOG, .format = QLOG_REQLOG_JSON};
    qlog_reqlog_t *l = qlog_reqlog_open(&o, err, sizeof(err));
    if (!l || qlog_reqlog_write(l, r) < 0 || qlog_reqlog_write(l, r) < 0 ||
        qlog_reqlog_flush(l) < 0)
        return 12;
    uint64_t lines, errors, dropped;
    qlog_reqlog_stats(l, &lines, &errors, &dropped);
    if (lines != 2 || errors != 0)
        return 13;
    char msg[4096], tag[32];
    snprintf(tag, sizeof(tag), " ternd[%d]: {", (int)getpid());
    for (int i = 0; i < 2; i++) {
        ssize_t n = recv(s, msg, sizeof(msg) - 1, 0);
        if (n <= 0)
            return 14;
        msg[n] = '\0';
        /* "<30>Nov 26 04:05:06 ternd[pid]: {...}": LOG_DAEMON|LOG_INFO, the JSON line */
        const char *json = strchr(msg, '{');
        if (strncmp(msg, "<30>", 4) != 0 || !strstr(msg, tag) || !json ||
            !strstr(json, "\"www.example.test.\"") || strchr(json, '\n'))
            return 15;
    }
    /* the reader stops reading (a stuck journal): messages are dropped, never waited for */
    for (int i = 0; i < 5000; i++) {
        (void)qlog_reqlog_write(l, r);
        if (i % 100 == 99 && qlog_reqlog_flush(l) < 0)
            return 16;
    }
    qlog_reqlog_stats(l, &lines, &errors, &dropped);
    qlog_reqlog_close(l);
    return errors == 0 && dropped > 0 ? 0 : 17;
}

static void test_syslog_target(void **state)
{
    (void)state;
    tu_with_fake_dev_log(syslog_child);
}

/* Write errors are counted, the lines lost, and the log goes on. */
static void test_write_errors(void **state)
{
    (void)state;
    char err[256] = "";
    recbuf_t b;
    qlog_rec_t *r = make_full(&b);
    qlog_reqlog_opts_t o = {.target = QLOG_REQLOG_FILE, .path = "/dev/full"};
    qlog_reqlog_t *l = qlog_reqlog_open(&o, err, sizeof(err));
    if (!l)
        skip(); /* no /dev/full here */
    for (int i = 0; i < 3; i++)
        assert_int_equal(qlog_reqlog_write(l, r), 0);
    assert_int_equal(qlog_reqlog_flush(l), -EIO);
    uint64_t lines = 1, errors = 0, dropped = 0;
    qlog_reqlog_stats(l, &lines, &errors, &dropped);
    assert_int_equal(lines, 0);
    assert_int_equal(errors, 3);
    /* a full buffer that cannot be written: this line is lost too */
    int failed = 0;
    for (int i = 0; i < 2000; i++)
        failed += qlog_reqlog_write(l, r) < 0;
    assert_true(failed >= 1);
    assert_int_equal(qlog_reqlog_flush(l), -EIO);
    qlog_reqlog_stats(l, &lines, &errors, &dropped);
    assert_int_equal(lines, 0);
    assert_int_equal(errors, 3 + 2000);
    qlog_reqlog_close(l);
}

static void test_open_errors(void **state)
{
    (void)state;
    char err[256] = "", path[128], want[256];
    path_of(path, sizeof(path), "no/such/dir/requests.log");
    qlog_reqlog_opts_t o = {.target = QLOG_REQLOG_FILE, .path = path};
    assert_null(qlog_reqlog_open(&o, err, sizeof(err)));
    snprintf(want, sizeof(want), "requests: %s: No such file or directory", path);
    assert_string_equal(err, want);
    o.path = dir; /* a directory */
    assert_null(qlog_reqlog_open(&o, err, sizeof(err)));
    snprintf(want, sizeof(want), "requests: %s: ", dir);
    assert_memory_equal(err, want, strlen(want));
    o.path = NULL;
    assert_null(qlog_reqlog_open(&o, err, sizeof(err)));
    assert_string_equal(err, "requests: target file needs a path");
    qlog_reqlog_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_fields),     cmocka_unit_test(test_json_exact),
        cmocka_unit_test(test_steer_fields),    cmocka_unit_test(test_hostile_qname),
        cmocka_unit_test(test_dropped_and_cut), cmocka_unit_test(test_text_format),
        cmocka_unit_test(test_many_lines),      cmocka_unit_test(test_reopen_rotation),
        cmocka_unit_test(test_stdout_target),   cmocka_unit_test(test_write_errors),
        cmocka_unit_test(test_open_errors),     cmocka_unit_test(test_syslog_target),
        cmocka_unit_test(test_stalled_reader),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
