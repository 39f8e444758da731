/*
 * test_xfr.c — the transfer service (src/xfr/xfr.c) over real loopback sockets, no mocks: the
 * test plays the worker (it accepts or receives the request and hands it over through
 * xfr_handoff(), as src/net/tcp.c and udp.c do), the loader (it publishes views with RCU and
 * calls xfr_zone_changed()) and the peers (an AXFR/IXFR client, secondaries that are sent NOTIFY,
 * a primary that sends one). ldns parses every message the service writes.
 *
 *   axfr      a zone of several messages to an allowed client, every record compared with the
 *             zone file; REFUSED without allow_transfer or from an address not in it; TSIG with
 *             the zone's transfer_key (each message verified), REFUSED unsigned, NOTAUTH with a
 *             key the server does not know or a wrong secret
 *   ixfr      two published versions (serial 1 -> 2) journaled: IXFR from 1 is the RFC 1995
 *             delta, from 2 the SOA alone, from a serial not in the journal the whole zone
 *   journal   xfr_journal_versions 0: IXFR always gets the whole zone
 *   notify    NOTIFY out to a secondary that answers (acked) and to one that does not (sent again
 *             every xfr_notify_timeout_ms, xfr_notify_retries times, signed with its key)
 *   notify_in NOTIFY in through the UDP hand-over: REFUSED from an address allow_notify does not
 *             name, NOERROR from the primary, NOTAUTH for a zone that is not a secondary here
 *   queue     65 UDP hand-overs before the threads run: the 65th refused, the 64 answered after
 *             xfr_start()
 *   pool      64 addresses each holding a connection idle after a NOTIFY: an AXFR from another
 *             one takes the place of the one idle longest; one address holds at most 8 (its 9th
 *             takes its own oldest idle one's place)
 * Every wait is bounded (WAIT_MS). Run under ASan (no leaks) and TSan (tests/tsan.supp).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <ldns/ldns.h>

#include "tern/common/err.h"
#include "tern/common/rcu.h"
#include "tern/conf/config.h"
#include "tern/wire/dname.h"
#include "tern/tsig/tsig.h"
#include "tern/xfr/xfr.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_table.h"
#include "test_util.h"

/* Any wait for the service: generous for a loaded 2-core box under TSan, where a reply takes
 * milliseconds; a wait that runs out is a failure, never a hang. */
#define WAIT_MS 10000

/* TXT records of 200 bytes added to a zone so that its AXFR takes two messages or more
 * (600 x ~215 bytes > 65535). */
#define BULK 600

#define SECRET     "dGVybi14ZnItdGVzdC1zZWNyZXQtMDEyMzQ1Njc4OWE="
#define SECRET_BAD "c2Vjb25kLWtleS1mb3ItdGhlLXRlcm4tdGVzdHMhISE="

#define MAX_ZONES 8

typedef struct fixture {
    char dir[64];
    config_t cfg;
    zone_table_t *table;
    answer_view_t *view;
    const answer_view_t *published; /* what the service reads (RCU) */
    xfr_t *x;
    server_handoff_t h;
    zone_t *zones[MAX_ZONES]; /* borrowed from table, by cfg zone index (NULL: not loaded) */
    int wfd[4];               /* "worker" sockets the service answers through: closed after it */
    size_t nwfd;
} fixture_t;

static fixture_t fx;

/* ---- zones, config, the published view ---------------------------------------------------- */

/* dir/file: zone origin at serial; version 1 has "old" and www A .80, version 2 drops "old",
 * moves www to .81 and adds "new"; bulk TXT records of 200 bytes each. */
static void write_zone(const char *file, const char *origin, uint32_t serial, int version, int bulk)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", fx.dir, file);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "$ORIGIN %s.\n"
            "$TTL 3600\n"
            "@ SOA ns1 hostmaster %u 7200 900 1209600 300\n"
            "@ NS ns1\n"
            "@ NS ns2.other.test.\n"
            "@ MX 10 mail\n"
            "ns1 A 192.0.2.1\n"
            "ns1 AAAA 2001:db8::1\n"
            "mail A 192.0.2.25\n"
            "www 300 AAAA 2001:db8::80\n"
            "sub NS ns.sub\n"
            "ns.sub A 192.0.2.53\n",
            origin, serial);
    if (version == 1)
        fprintf(f, "old TXT \"removed in version 2\"\nwww 300 A 192.0.2.80\n");
    else
        fprintf(f, "www 300 A 192.0.2.81\nnew A 192.0.2.99\n");
    for (int i = 0; i < bulk; i++)
        fprintf(f, "t%d TXT \"%0200d\"\n", i, i);
    assert_int_equal(fclose(f), 0);
}

/* Every RR of dir/file (ldns's reading of it: the oracle), SOA first. */
static ldns_rr_list *zone_rrs(const char *file)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", fx.dir, file);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    ldns_zone *z = NULL;
    assert_int_equal(ldns_zone_new_frm_fp(&z, f, NULL, 3600, LDNS_RR_CLASS_IN), LDNS_STATUS_OK);
    fclose(f);
    ldns_rr_list *l = ldns_rr_list_new();
    assert_true(ldns_rr_list_push_rr(l, ldns_rr_clone(ldns_zone_soa(z))));
    assert_true(ldns_rr_list_push_rr_list(l, ldns_zone_rrs(z)));
    /* push_rr_list took the RRs themselves: free only the zone's list and SOA */
    ldns_rr_list_free(ldns_zone_rrs(z));
    ldns_zone_set_rrs(z, NULL);
    ldns_zone_deep_free(z);
    return l;
}

/* A secondary zone's new version (or NULL: expired): the loader's job, here only released. */
static void on_zone_in(void *ctx, const char *key, zone_t *z)
{
    (void)ctx;
    (void)key;
    zone_free(z);
}

/* Write yaml as dir/ternd.yaml, load it, load its zones with a file (not the secondaries'),
 * publish them, make the service and configure it; start its threads when run. */
static void start(const char *yaml, bool run)
{
    char path[256], err[512] = "";
    snprintf(path, sizeof(path), "%s/ternd.yaml", fx.dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(yaml, f);
    assert_int_equal(fclose(f), 0);
    if (config_load(&fx.cfg, path, err, sizeof(err)) < 0)
        fail_msg("config_load: %s", err);
    assert_true(fx.cfg.nzones <= MAX_ZONES);
    fx.table = zone_table_new();
    assert_non_null(fx.table);
    for (size_t i = 0; i < fx.cfg.nzones; i++) {
        const config_zone_t *cz = &fx.cfg.zones[i];
        if (!cz->file || cz->nprimaries)
            continue;
        zone_t *z = NULL;
        if (zone_file_load(cz->origin, cz->file, &z, err, sizeof(err)) < 0)
            fail_msg("zone_file_load: %s", err);
        assert_int_equal(zone_table_add(fx.table, z), 0);
        fx.zones[i] = z;
    }
    assert_int_equal(zone_table_freeze(fx.table), 0);
    fx.view = calloc(1, sizeof(*fx.view));
    assert_non_null(fx.view);
    fx.view->table = fx.table;
    fx.published = fx.view;
    assert_true(xfr_wanted(&fx.cfg));
    xfr_hooks_t hooks = {.zone_in = on_zone_in, .ctx = NULL};
    fx.x = xfr_new(&fx.published, &hooks);
    assert_non_null(fx.x);
    assert_int_equal(xfr_configure(fx.x, &fx.cfg), 0);
    fx.h = xfr_handoff(fx.x);
    if (run)
        assert_int_equal(xfr_start(fx.x), 0);
}

static int setup(void **state)
{
    (void)state;
    memset(&fx, 0, sizeof(fx));
    config_init(&fx.cfg);
    tu_mkdtemp(fx.dir, sizeof(fx.dir), "tern-xfr");
    return 0;
}

/* After every test, passed or failed: the threads stopped before what they read is freed. */
static int teardown(void **state)
{
    (void)state;
    xfr_free(fx.x); /* first, as main.c does: it answers through the workers' sockets */
    for (size_t i = 0; i < fx.nwfd; i++)
        close(fx.wfd[i]);
    zone_table_free(fx.table);
    free(fx.view);
    config_free(&fx.cfg);
    tu_rmtree(fx.dir);
    memset(&fx, 0, sizeof(fx));
    return 0;
}

/* Publish a view where nz (a new version of key, zone index i) replaces the zone of the same apex,
 * tell the service as the loader does, then retire the old view after the grace period. */
static void publish_version(size_t i, const char *key, zone_t *nz)
{
    zone_table_t *t = zone_table_new();
    assert_non_null(t);
    zone_t *old = NULL;
    for (size_t k = 0; k < zone_table_count(fx.table); k++) {
        zone_t *o = (zone_t *)zone_table_at(fx.table, k);
        if (dname_equal(o->apex, nz->apex)) {
            old = o;
            assert_int_equal(zone_table_add(t, nz), 0);
        } else {
            assert_int_equal(zone_table_add(t, zone_retain(o)), 0);
        }
    }
    assert_non_null(old);
    assert_int_equal(zone_table_freeze(t), 0);
    answer_view_t *v = calloc(1, sizeof(*v));
    assert_non_null(v);
    v->table = t;
    const answer_view_t *prev = tern_rcu_xchg(&fx.published, v);
    assert_ptr_equal(prev, fx.view);
    xfr_zone_changed(fx.x, key, old, nz);
    tern_rcu_synchronize();
    zone_table_free(fx.table);
    free(fx.view);
    fx.table = t;
    fx.view = v;
    fx.zones[i] = nz;
}

/* ---- sockets -------------------------------------------------------------------------------- */

static int udp_socket(struct sockaddr_storage *addr)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    socklen_t l = tu_sockaddr(addr, AF_INET, "127.0.0.1", 0);
    assert_int_equal(bind(fd, (struct sockaddr *)addr, l), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)addr, &l), 0);
    return fd;
}

/* A UDP socket that plays a worker's: the service may send through it until xfr_free(). */
static int worker_socket(struct sockaddr_storage *addr)
{
    int fd = udp_socket(addr);
    assert_true(fx.nwfd < sizeof(fx.wfd) / sizeof(fx.wfd[0]));
    fx.wfd[fx.nwfd++] = fd;
    return fd;
}

static uint16_t port_of(const struct sockaddr_storage *a)
{
    return ntohs(((const struct sockaddr_in *)a)->sin_port);
}

static int tcp_listener(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_storage a;
    socklen_t l = tu_sockaddr(&a, AF_INET, "127.0.0.1", 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, l), 0);
    assert_int_equal(listen(fd, 8), 0);
    return fd;
}

/* Wait for fd to be readable until deadline (monotonic ms); false when it runs out. */
static bool wait_readable(int fd, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - tu_now_ms();
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return true;
        assert_true(r == 0 || errno == EINTR);
    }
}

/* len bytes from fd into buf by deadline: 1 done, 0 EOF, -1 timed out. */
static int recv_exact(int fd, uint8_t *buf, size_t len, int64_t deadline)
{
    size_t got = 0;
    while (got < len) {
        if (!wait_readable(fd, deadline))
            return -1;
        ssize_t k = recv(fd, buf + got, len - got, MSG_DONTWAIT);
        if (k == 0)
            return 0;
        if (k < 0) {
            assert_true(errno == EAGAIN || errno == EINTR);
            continue;
        }
        got += (size_t)k;
    }
    return 1;
}

/*
 * A client connected to lfd (from src, an IPv4 loopback address, or any when NULL) and the
 * server's end of it, as a worker holds it (non-blocking); the client sends msg
 * (length-prefixed), the "worker" reads it and hands the connection over. Returns the client's
 * socket.
 */
static int hand_over_tcp_from(int lfd, const char *src, const uint8_t *msg, size_t len)
{
    struct sockaddr_storage srv, peer, local;
    socklen_t l = sizeof(srv);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&srv, &l), 0);
    int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(cfd >= 0);
    if (src) {
        struct sockaddr_storage from;
        socklen_t fl = tu_sockaddr(&from, AF_INET, src, 0);
        assert_int_equal(bind(cfd, (struct sockaddr *)&from, fl), 0);
    }
    assert_int_equal(connect(cfd, (struct sockaddr *)&srv, l), 0);
    l = sizeof(peer);
    int sfd = accept4(lfd, (struct sockaddr *)&peer, &l, SOCK_NONBLOCK | SOCK_CLOEXEC);
    assert_true(sfd >= 0);
    l = sizeof(local);
    assert_int_equal(getsockname(sfd, (struct sockaddr *)&local, &l), 0);
    uint8_t buf[2 + 65535];
    buf[0] = (uint8_t)(len >> 8);
    buf[1] = (uint8_t)len;
    memcpy(buf + 2, msg, len);
    assert_int_equal(send(cfd, buf, 2 + len, MSG_NOSIGNAL), (ssize_t)(2 + len));
    uint8_t in[2 + 65535];
    assert_int_equal(recv_exact(sfd, in, 2 + len, tu_now_ms() + WAIT_MS), 1);
    assert_memory_equal(in, buf, 2 + len);
    assert_true(fx.h.tcp(fx.h.ctx, sfd, in, 2 + len, &peer, &local));
    return cfd;
}

static int hand_over_tcp(int lfd, const uint8_t *msg, size_t len)
{
    return hand_over_tcp_from(lfd, NULL, msg, len);
}

/* ---- messages ------------------------------------------------------------------------------- */

/* A query for zone (presentation, no final dot) and type, with id; an IXFR carries the client's
 * SOA with serial in its authority section. Returns its length. */
static size_t make_query(uint8_t *buf, size_t cap, uint16_t id, const char *zone, ldns_rr_type type,
                         uint32_t serial)
{
    ldns_pkt *p = NULL;
    char name[300];
    snprintf(name, sizeof(name), "%s.", zone);
    assert_int_equal(ldns_pkt_query_new_frm_str(&p, name, type, LDNS_RR_CLASS_IN, 0),
                     LDNS_STATUS_OK);
    ldns_pkt_set_id(p, id);
    if (type == LDNS_RR_TYPE_IXFR) {
        char soa[1024];
        ldns_rr *rr = NULL;
        snprintf(soa, sizeof(soa), "%s 0 IN SOA ns1.%s hostmaster.%s %u 7200 900 1209600 300", name,
                 name, name, serial);
        assert_int_equal(ldns_rr_new_frm_str(&rr, soa, 0, NULL, NULL), LDNS_STATUS_OK);
        assert_true(ldns_pkt_push_rr(p, LDNS_SECTION_AUTHORITY, rr));
    }
    uint8_t *wire = NULL;
    size_t len = 0;
    assert_int_equal(ldns_pkt2wire(&wire, p, &len), LDNS_STATUS_OK);
    assert_true(len <= cap);
    memcpy(buf, wire, len);
    free(wire);
    ldns_pkt_free(p);
    return len;
}

/* A NOTIFY for zone (RFC 1996 §3.3: opcode NOTIFY, AA, the SOA question) with id. */
static size_t make_notify(uint8_t *buf, uint16_t id, const char *zone)
{
    memset(buf, 0, 12);
    buf[0] = (uint8_t)(id >> 8);
    buf[1] = (uint8_t)id;
    buf[2] = (uint8_t)(LDNS_PACKET_NOTIFY << 3) | 0x04; /* opcode, AA */
    buf[5] = 1;
    size_t n = 12;
    for (const char *s = zone; *s;) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        buf[n++] = (uint8_t)l;
        memcpy(buf + n, s, l);
        n += l;
        s += l + (dot ? 1 : 0);
    }
    buf[n++] = 0;
    buf[n++] = 0;
    buf[n++] = LDNS_RR_TYPE_SOA;
    buf[n++] = 0;
    buf[n++] = LDNS_RR_CLASS_IN;
    return n;
}

static uint32_t soa_serial(const ldns_rr *rr)
{
    return ldns_rdf2native_int32(ldns_rr_rdf(rr, 2));
}

static bool is_soa(const ldns_rr *rr)
{
    return ldns_rr_get_type(rr) == LDNS_RR_TYPE_SOA;
}

/* Whether the RRs received so far are a whole transfer (as a client decides, RFC 1995 §4 and
 * RFC 5936 §2.2): a lone SOA (IXFR, up to date); SOA(S) SOA(older) ... ending on the SOA(S) that
 * closes the last delta (an even count of SOAs); or SOA(S) ... SOA(S) (AXFR form). */
static bool xfr_complete(const ldns_rr_list *l)
{
    size_t n = ldns_rr_list_rr_count(l);
    if (n == 0)
        return false;
    const ldns_rr *first = ldns_rr_list_rr(l, 0), *last = ldns_rr_list_rr(l, n - 1);
    assert_true(is_soa(first));
    if (n == 1)
        return true;
    if (!is_soa(last) || soa_serial(last) != soa_serial(first))
        return false;
    if (!is_soa(ldns_rr_list_rr(l, 1)))
        return true; /* AXFR form: the second SOA ends it */
    size_t soas = 0;
    for (size_t i = 0; i < n; i++)
        soas += is_soa(ldns_rr_list_rr(l, i));
    return soas >= 4 && soas % 2 == 0;
}

typedef struct reply {
    ldns_rr_list *rrs; /* the answer RRs of every message, in order */
    size_t msgs;
    int rcode;       /* of the first message */
    bool aa, closed; /* closed: the server closed the connection after the last message */
    int tsig_rc;     /* with tsig: the first error of tsig_verify_response(), or tsig_verify_end()
                        at the end */
    uint16_t tsig_peer_error;
} reply_t;

/* Read a transfer (or an error reply) on fd: every message parsed by ldns and, with tsig,
 * verified. */
static void read_xfr(int fd, uint16_t id, tsig_ctx_t *tsig, reply_t *r)
{
    memset(r, 0, sizeof(*r));
    r->rrs = ldns_rr_list_new();
    int64_t deadline = tu_now_ms() + WAIT_MS;
    static uint8_t buf[65536];
    for (;;) {
        uint8_t lp[2];
        int k = recv_exact(fd, lp, 2, deadline);
        if (k == 0) {
            r->closed = true;
            break;
        }
        if (k < 0)
            fail_msg("transfer: no message after %zu in %d ms", r->msgs, WAIT_MS);
        size_t len = (size_t)lp[0] << 8 | lp[1];
        if (recv_exact(fd, buf, len, deadline) != 1)
            fail_msg("transfer: message %zu cut short", r->msgs);
        if (tsig && r->tsig_rc == 0) {
            size_t nl = 0;
            int rc = tsig_verify_response(tsig, buf, len, (uint64_t)time(NULL), &nl);
            if (rc != 0 && rc != TSIG_PENDING) {
                r->tsig_rc = rc;
                r->tsig_peer_error = tsig->peer_error;
            }
        }
        ldns_pkt *p = NULL;
        if (ldns_wire2pkt(&p, buf, len) != LDNS_STATUS_OK)
            fail_msg("transfer: ldns cannot parse message %zu", r->msgs);
        assert_int_equal(ldns_pkt_id(p), id);
        assert_true(ldns_pkt_qr(p));
        assert_int_equal(ldns_pkt_get_opcode(p), LDNS_PACKET_QUERY);
        if (r->msgs++ == 0) {
            r->rcode = ldns_pkt_get_rcode(p);
            r->aa = ldns_pkt_aa(p);
        }
        ldns_rr_list *an = ldns_pkt_answer(p);
        for (size_t i = 0; i < ldns_rr_list_rr_count(an); i++)
            assert_true(ldns_rr_list_push_rr(r->rrs, ldns_rr_clone(ldns_rr_list_rr(an, i))));
        ldns_pkt_free(p);
        if (r->rcode != LDNS_RCODE_NOERROR || xfr_complete(r->rrs))
            break;
    }
    if (tsig && r->tsig_rc == 0)
        r->tsig_rc = tsig_verify_end(tsig);
}

static void reply_free(reply_t *r)
{
    ldns_rr_list_deep_free(r->rrs);
    r->rrs = NULL;
}

/* got[from, to) and want hold the same RRs (owner, type, class, RDATA and TTL), in any order. */
static void expect_same_rrs(const ldns_rr_list *got, size_t from, size_t to,
                            const ldns_rr_list *want)
{
    ldns_rr_list *a = ldns_rr_list_new(), *b = ldns_rr_list_clone(want);
    for (size_t i = from; i < to; i++)
        assert_true(ldns_rr_list_push_rr(a, ldns_rr_clone(ldns_rr_list_rr(got, i))));
    ldns_rr_list_sort(a);
    ldns_rr_list_sort(b);
    size_t na = ldns_rr_list_rr_count(a), nb = ldns_rr_list_rr_count(b);
    for (size_t i = 0; i < na || i < nb; i++) {
        ldns_rr *x = i < na ? ldns_rr_list_rr(a, i) : NULL,
                *y = i < nb ? ldns_rr_list_rr(b, i) : NULL;
        if (!x || !y || ldns_rr_compare(x, y) != 0 || ldns_rr_ttl(x) != ldns_rr_ttl(y)) {
            char *sx = x ? ldns_rr2str(x) : NULL, *sy = y ? ldns_rr2str(y) : NULL;
            print_error("RR %zu differs (%zu received, %zu expected):\n got  %s want %s", i, na, nb,
                        sx ? sx : "(none)\n", sy ? sy : "(none)\n");
            free(sx);
            free(sy);
            fail();
        }
    }
    ldns_rr_list_deep_free(a);
    ldns_rr_list_deep_free(b);
}

/* The RRs of text (one per line, $ORIGIN-relative names absolute already). */
static ldns_rr_list *rrs_of(const char *const *lines, size_t n)
{
    ldns_rr_list *l = ldns_rr_list_new();
    for (size_t i = 0; i < n; i++) {
        ldns_rr *rr = NULL;
        assert_int_equal(ldns_rr_new_frm_str(&rr, lines[i], 3600, NULL, NULL), LDNS_STATUS_OK);
        assert_true(ldns_rr_list_push_rr(l, rr));
    }
    return l;
}

static tsig_key_t make_key(const char *name, const char *secret)
{
    tsig_key_t k;
    char err[256];
    if (tsig_key_init(&k, name, "hmac-sha256", secret, err, sizeof(err)) < 0)
        fail_msg("tsig_key_init: %s", err);
    return k;
}

/* ---- AXFR out ------------------------------------------------------------------------------- */

static const char axfr_yaml[] =
    "tsig_keys: [{name: xfr-key, algorithm: hmac-sha256, secret: \"" SECRET "\"}]\n"
    "zones:\n"
    "  - {origin: example.test, file: example.zone, allow_transfer: [192.0.2.0/24, 127.0.0.1]}\n"
    "  - {origin: closed.test, file: closed.zone}\n"
    "  - {origin: other.test, file: other.zone, allow_transfer: 192.0.2.0/24}\n"
    "  - origin: signed.test\n"
    "    file: signed.zone\n"
    "    allow_transfer: 127.0.0.0/8\n"
    "    transfer_key: xfr-key\n";

/* An AXFR of zone (file) over a new handed-over connection; signed with key when not NULL. */
static void axfr_ok(int lfd, const char *zone, const char *file, const tsig_key_t *key, uint16_t id)
{
    uint8_t q[1024];
    size_t n = make_query(q, sizeof(q), id, zone, LDNS_RR_TYPE_AXFR, 0);
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    if (key)
        assert_int_equal(tsig_sign_request(&ctx, key, q, n, sizeof(q), (uint64_t)time(NULL), &n),
                         0);
    int cfd = hand_over_tcp(lfd, q, n);
    reply_t r;
    read_xfr(cfd, id, key ? &ctx : NULL, &r);
    assert_int_equal(r.rcode, LDNS_RCODE_NOERROR);
    assert_true(r.aa);
    assert_true(r.msgs >= 2); /* BULK records do not fit in one message */
    if (key)
        assert_int_equal(r.tsig_rc, 0); /* every signed message verified, the last one signed */
    size_t cnt = ldns_rr_list_rr_count(r.rrs);
    ldns_rr_list *want = zone_rrs(file);
    assert_int_equal(cnt, ldns_rr_list_rr_count(want) + 1);
    /* the SOA first and last, everything else once in between */
    assert_true(is_soa(ldns_rr_list_rr(r.rrs, 0)));
    assert_int_equal(ldns_rr_compare(ldns_rr_list_rr(r.rrs, 0), ldns_rr_list_rr(want, 0)), 0);
    assert_int_equal(ldns_rr_compare(ldns_rr_list_rr(r.rrs, cnt - 1), ldns_rr_list_rr(want, 0)), 0);
    for (size_t i = 1; i + 1 < cnt; i++)
        assert_false(is_soa(ldns_rr_list_rr(r.rrs, i)));
    expect_same_rrs(r.rrs, 0, cnt - 1, want);
    ldns_rr_list_deep_free(want);
    reply_free(&r);
    tsig_ctx_clear(&ctx);
    close(cfd);
}

/* One refused AXFR request for zone: rcode, on a connection the server closes. */
static void axfr_refused(int lfd, const char *zone, const tsig_key_t *key, uint16_t id, int rcode,
                         int tsig_rc, uint16_t peer_error)
{
    uint8_t q[1024];
    size_t n = make_query(q, sizeof(q), id, zone, LDNS_RR_TYPE_AXFR, 0);
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    if (key)
        assert_int_equal(tsig_sign_request(&ctx, key, q, n, sizeof(q), (uint64_t)time(NULL), &n),
                         0);
    int cfd = hand_over_tcp(lfd, q, n);
    reply_t r;
    read_xfr(cfd, id, key ? &ctx : NULL, &r);
    assert_int_equal(r.msgs, 1);
    assert_int_equal(r.rcode, rcode);
    assert_false(r.aa);
    assert_int_equal(ldns_rr_list_rr_count(r.rrs), 0);
    if (key) {
        assert_int_equal(r.tsig_rc, tsig_rc);
        assert_int_equal(r.tsig_peer_error, peer_error);
    }
    uint8_t b;
    assert_int_equal(recv_exact(cfd, &b, 1, tu_now_ms() + WAIT_MS), 0); /* then closed */
    reply_free(&r);
    tsig_ctx_clear(&ctx);
    close(cfd);
}

static void test_axfr(void **state)
{
    (void)state;
    write_zone("example.zone", "example.test", 1, 1, BULK);
    write_zone("closed.zone", "closed.test", 1, 1, 0);
    write_zone("other.zone", "other.test", 1, 1, 0);
    write_zone("signed.zone", "signed.test", 7, 2, BULK);
    start(axfr_yaml, true);
    int lfd = tcp_listener();

    axfr_ok(lfd, "example.test", "example.zone", NULL, 101);
    /* the client's spelling of the name is not the zone's */
    axfr_ok(lfd, "EXAMPLE.Test", "example.zone", NULL, 102);
    axfr_refused(lfd, "closed.test", NULL, 103, LDNS_RCODE_REFUSED, 0, 0);
    axfr_refused(lfd, "other.test", NULL, 104, LDNS_RCODE_REFUSED, 0, 0);
    axfr_refused(lfd, "nowhere.test", NULL, 105, LDNS_RCODE_REFUSED, 0, 0);

    /* TSIG: the zone's key, none, one the server does not know, the right name and a wrong
     * secret */
    const tsig_key_t *key = config_tsig_key(&fx.cfg, "xfr-key");
    assert_non_null(key);
    axfr_ok(lfd, "signed.test", "signed.zone", key, 201);
    axfr_refused(lfd, "signed.test", NULL, 202, LDNS_RCODE_REFUSED, 0, 0);
    tsig_key_t stranger = make_key("stranger", SECRET);
    axfr_refused(lfd, "signed.test", &stranger, 203, LDNS_RCODE_NOTAUTH, TSIG_EPEER, TSIG_BADKEY);
    tsig_key_t forged = make_key("xfr-key", SECRET_BAD);
    axfr_refused(lfd, "signed.test", &forged, 204, LDNS_RCODE_NOTAUTH, TSIG_EPEER, TSIG_BADSIG);
    /* a zone without transfer_key takes a request signed with a key the server knows, and
     * answers it signed */
    axfr_ok(lfd, "example.test", "example.zone", key, 205);

    xfr_stats_t st;
    xfr_get_stats(fx.x, &st);
    assert_int_equal(st.out_axfr, 4);
    assert_int_equal(st.out_ixfr, 0);
    assert_int_equal(st.out_refused, 4);
    assert_int_equal(st.tsig_bad, 2);
    xfr_zone_info_t info;
    xfr_zone_info(fx.x, "example.test", &info);
    assert_true(info.known);
    assert_false(info.secondary);
    assert_string_equal(info.out_kind, "AXFR");
    assert_int_equal(info.out_serial, 1);
    assert_int_equal(info.out_count, 3);
    assert_true(info.out_when > 0);
    assert_memory_equal(info.out_peer, "127.0.0.1@", 10);
    xfr_zone_info(fx.x, "signed.test", &info);
    assert_int_equal(info.out_serial, 7);
    assert_int_equal(info.out_count, 1);
    xfr_zone_info(fx.x, "closed.test", &info);
    assert_false(info.known);
    close(lfd);
}

/* ---- IXFR out from the journal ----------------------------------------------------------- */

/* An IXFR from serial over a new connection, read whole. */
static void ixfr(int lfd, uint32_t serial, uint16_t id, reply_t *r)
{
    uint8_t q[1024];
    size_t n = make_query(q, sizeof(q), id, "example.test", LDNS_RR_TYPE_IXFR, serial);
    int cfd = hand_over_tcp(lfd, q, n);
    read_xfr(cfd, id, NULL, r);
    close(cfd);
    assert_int_equal(r->rcode, LDNS_RCODE_NOERROR);
    assert_true(r->aa);
}

/* Load dir/file as example.test (version 2) and publish it in place of version 1, as the loader
 * does; wait (bounded) until the service has journaled the change (journaled: 1 version) or at
 * least taken it (its serial). */
static void publish_v2(bool journaled)
{
    char path[256], err[512];
    snprintf(path, sizeof(path), "%s/example2.zone", fx.dir);
    zone_t *v2 = NULL;
    if (zone_file_load("example.test", path, &v2, err, sizeof(err)) < 0)
        fail_msg("zone_file_load: %s", err);
    assert_int_equal(v2->serial, 2);
    publish_version(0, "example.test", v2);
    int64_t deadline = tu_now_ms() + WAIT_MS;
    xfr_zone_info_t info;
    for (;;) {
        xfr_zone_info(fx.x, "example.test", &info);
        if (info.serial == 2 && (!journaled || info.nversions == 1))
            break;
        if (tu_now_ms() > deadline)
            fail_msg("the change 1 -> 2 not taken in %d ms (serial %u, %zu versions)", WAIT_MS,
                     info.serial, info.nversions);
        tu_sleep_ms(5);
    }
}

static const char ixfr_yaml[] =
    "zones:\n"
    "  - {origin: example.test, file: example.zone, allow_transfer: 127.0.0.1}\n";

static void test_ixfr(void **state)
{
    (void)state;
    write_zone("example.zone", "example.test", 1, 1, 3);
    write_zone("example2.zone", "example.test", 2, 2, 3);
    start(ixfr_yaml, true);
    /* the loader's first publish of the zone, then its second version */
    xfr_zone_changed(fx.x, "example.test", NULL, fx.zones[0]);
    publish_v2(true);
    xfr_zone_info_t info;
    xfr_zone_info(fx.x, "example.test", &info);
    assert_true(info.known);
    assert_int_equal(info.nversions, 1);
    assert_int_equal(info.versions[0].from, 1);
    assert_int_equal(info.versions[0].to, 2);
    assert_int_equal(info.versions[0].removed, 2);
    assert_int_equal(info.versions[0].added, 2);
    assert_true(info.versions[0].bytes > 0);
    int lfd = tcp_listener();

    /* from 1: SOA 2, SOA 1, what went, SOA 2, what came, SOA 2 (RFC 1995 §4) */
    reply_t r;
    ixfr(lfd, 1, 301, &r);
    size_t n = ldns_rr_list_rr_count(r.rrs);
    assert_int_equal(n, 8);
    static const size_t soa_at[] = {0, 1, 4, 7};
    static const uint32_t soa_serials[] = {2, 1, 2, 2};
    for (size_t i = 0; i < 4; i++) {
        const ldns_rr *rr = ldns_rr_list_rr(r.rrs, soa_at[i]);
        assert_true(is_soa(rr));
        assert_int_equal(soa_serial(rr), soa_serials[i]);
    }
    static const char *const removed[] = {
        "old.example.test. 3600 IN TXT \"removed in version 2\"",
        "www.example.test. 300 IN A 192.0.2.80",
    };
    static const char *const added[] = {
        "www.example.test. 300 IN A 192.0.2.81",
        "new.example.test. 3600 IN A 192.0.2.99",
    };
    ldns_rr_list *want = rrs_of(removed, 2);
    expect_same_rrs(r.rrs, 2, 4, want);
    ldns_rr_list_deep_free(want);
    want = rrs_of(added, 2);
    expect_same_rrs(r.rrs, 5, 7, want);
    ldns_rr_list_deep_free(want);
    reply_free(&r);

    /* from 2: up to date, the SOA alone */
    ixfr(lfd, 2, 302, &r);
    assert_int_equal(ldns_rr_list_rr_count(r.rrs), 1);
    assert_int_equal(soa_serial(ldns_rr_list_rr(r.rrs, 0)), 2);
    reply_free(&r);

    /* from 0, older than anything journaled: the whole zone, AXFR-style */
    ixfr(lfd, 0, 303, &r);
    n = ldns_rr_list_rr_count(r.rrs);
    want = zone_rrs("example2.zone");
    assert_int_equal(n, ldns_rr_list_rr_count(want) + 1);
    assert_int_equal(soa_serial(ldns_rr_list_rr(r.rrs, 0)), 2);
    assert_true(is_soa(ldns_rr_list_rr(r.rrs, n - 1)));
    assert_false(is_soa(ldns_rr_list_rr(r.rrs, 1)));
    expect_same_rrs(r.rrs, 0, n - 1, want);
    ldns_rr_list_deep_free(want);
    reply_free(&r);

    xfr_stats_t st;
    xfr_get_stats(fx.x, &st);
    assert_int_equal(st.out_ixfr, 2);
    assert_int_equal(st.out_axfr, 1);
    xfr_zone_info(fx.x, "example.test", &info);
    assert_int_equal(info.out_count, 3);
    assert_int_equal(info.out_serial, 2);
    assert_string_equal(info.out_kind, "AXFR");
    close(lfd);
}

/* xfr_journal_versions: 0 is "every transfer is AXFR" (config.h): IXFR from the previous
 * serial gets the whole zone. */
static void test_journal_off(void **state)
{
    (void)state;
    write_zone("example.zone", "example.test", 1, 1, 3);
    write_zone("example2.zone", "example.test", 2, 2, 3);
    char yaml[512];
    snprintf(yaml, sizeof(yaml), "xfr_journal_versions: 0\n%s", ixfr_yaml);
    start(yaml, true);
    xfr_zone_changed(fx.x, "example.test", NULL, fx.zones[0]);
    publish_v2(false);
    int lfd = tcp_listener();
    reply_t r;
    ixfr(lfd, 1, 401, &r);
    ldns_rr_list *want = zone_rrs("example2.zone");
    size_t n = ldns_rr_list_rr_count(r.rrs);
    xfr_zone_info_t info;
    xfr_zone_info(fx.x, "example.test", &info);
    bool delta = is_soa(ldns_rr_list_rr(r.rrs, 1));
    if (info.nversions != 0 || delta) {
        reply_free(&r); /* a failure leaks nothing either (ASan) */
        ldns_rr_list_deep_free(want);
        close(lfd);
        fail_msg("xfr_journal_versions 0: the journal holds %zu versions and IXFR from 1 got %s",
                 info.nversions, delta ? "a delta" : "the zone");
    }
    assert_int_equal(n, ldns_rr_list_rr_count(want) + 1);
    expect_same_rrs(r.rrs, 0, n - 1, want);
    ldns_rr_list_deep_free(want);
    reply_free(&r);
    close(lfd);
}

/* ---- NOTIFY out ---------------------------------------------------------------------------- */

/* The NOTIFY timer: small, so retries come quickly; 3 of it is the window the first two sends
 * must fall in. */
#define NOTIFY_TIMEOUT_MS 150
#define NOTIFY_RETRIES    3

typedef struct notify_msg {
    size_t len;
    uint8_t buf[1024];
    struct sockaddr_storage from;
    socklen_t fromlen;
    int64_t at;
} notify_msg_t;

/* The next datagram on fd by deadline, into m; false if none came. */
static bool recv_dgram(int fd, notify_msg_t *m, int64_t deadline)
{
    if (!wait_readable(fd, deadline))
        return false;
    m->fromlen = sizeof(m->from);
    ssize_t k = recvfrom(fd, m->buf, sizeof(m->buf), MSG_DONTWAIT, (struct sockaddr *)&m->from,
                         &m->fromlen);
    assert_true(k >= 12);
    m->len = (size_t)k;
    m->at = tu_now_ms();
    return true;
}

/* m is a NOTIFY for zone with the SOA serial hint serial (RFC 1996 §3.7). */
static void expect_notify(const notify_msg_t *m, const char *zone, uint32_t serial)
{
    ldns_pkt *p = NULL;
    assert_int_equal(ldns_wire2pkt(&p, m->buf, m->len), LDNS_STATUS_OK);
    assert_int_equal(ldns_pkt_get_opcode(p), LDNS_PACKET_NOTIFY);
    assert_false(ldns_pkt_qr(p));
    assert_true(ldns_pkt_aa(p));
    assert_int_equal(ldns_pkt_qdcount(p), 1);
    const ldns_rr *q = ldns_rr_list_rr(ldns_pkt_question(p), 0);
    assert_int_equal(ldns_rr_get_type(q), LDNS_RR_TYPE_SOA);
    char want[300];
    snprintf(want, sizeof(want), "%s.", zone);
    ldns_rdf *wname = ldns_dname_new_frm_str(want);
    assert_int_equal(ldns_dname_compare(ldns_rr_owner(q), wname), 0);
    ldns_rdf_deep_free(wname);
    assert_int_equal(ldns_pkt_ancount(p), 1);
    const ldns_rr *soa = ldns_rr_list_rr(ldns_pkt_answer(p), 0);
    assert_true(is_soa(soa));
    assert_int_equal(soa_serial(soa), serial);
    ldns_pkt_free(p);
}

/* Answer NOTIFY m on fd (RFC 1996 §4.7: header and question echoed, QR set). */
static void answer_notify(int fd, const notify_msg_t *m)
{
    uint8_t out[1024];
    size_t q = 12;
    while (m->buf[q])
        q += 1u + m->buf[q];
    q += 1 + 4;
    memcpy(out, m->buf, q);
    out[2] |= 0x80; /* QR */
    memset(out + 6, 0, 6);
    assert_int_equal(sendto(fd, out, q, 0, (const struct sockaddr *)&m->from, m->fromlen),
                     (ssize_t)q);
}

static void test_notify_out(void **state)
{
    (void)state;
    struct sockaddr_storage a1, a2;
    int s1 = udp_socket(&a1), s2 = udp_socket(&a2);
    write_zone("example.zone", "example.test", 5, 1, 0);
    write_zone("quiet.zone", "quiet.test", 9, 1, 0);
    char yaml[1024];
    snprintf(yaml, sizeof(yaml),
             "tsig_keys: [{name: xfr-key, algorithm: hmac-sha256, secret: \"" SECRET "\"}]\n"
             "xfr_notify_timeout_ms: %d\n"
             "xfr_notify_retries: %d\n"
             "zones:\n"
             "  - {origin: example.test, file: example.zone, notify: \"127.0.0.1@%u\"}\n"
             "  - origin: quiet.test\n"
             "    file: quiet.zone\n"
             "    notify: [{address: \"127.0.0.1@%u\", key: xfr-key}]\n",
             NOTIFY_TIMEOUT_MS, NOTIFY_RETRIES, port_of(&a1), port_of(&a2));
    start(yaml, true);
    const tsig_key_t *key = config_tsig_key(&fx.cfg, "xfr-key");

    /* a secondary that answers: one NOTIFY, acked */
    xfr_zone_changed(fx.x, "example.test", NULL, fx.zones[0]);
    notify_msg_t m;
    if (!recv_dgram(s1, &m, tu_now_ms() + WAIT_MS))
        fail_msg("no NOTIFY in %d ms", WAIT_MS);
    expect_notify(&m, "example.test", 5);
    answer_notify(s1, &m);
    int64_t deadline = tu_now_ms() + WAIT_MS;
    xfr_zone_info_t info;
    for (;;) {
        xfr_zone_info(fx.x, "example.test", &info);
        assert_int_equal(info.nnotify, 1);
        if (info.notify[0].acked)
            break;
        if (tu_now_ms() > deadline)
            fail_msg("NOTIFY answered but not acked in %d ms", WAIT_MS);
        tu_sleep_ms(5);
    }
    char peer[64];
    snprintf(peer, sizeof(peer), "127.0.0.1@%u", port_of(&a1));
    assert_string_equal(info.notify[0].peer, peer);
    assert_int_equal(info.notify[0].serial, 5);
    assert_int_equal(info.notify[0].attempts, 1);
    assert_true(info.notify[0].acked_when > 0);
    /* acked: not sent again */
    notify_msg_t extra;
    assert_false(recv_dgram(s1, &extra, tu_now_ms() + 3 * NOTIFY_TIMEOUT_MS));

    /* a secondary that never answers: sent again every timeout, signed each time, and given up
     * after the retries */
    int64_t t0 = tu_now_ms();
    xfr_zone_changed(fx.x, "quiet.test", NULL, fx.zones[1]);
    notify_msg_t sent[NOTIFY_RETRIES];
    for (int i = 0; i < NOTIFY_RETRIES; i++) {
        if (!recv_dgram(s2, &sent[i], tu_now_ms() + WAIT_MS))
            fail_msg("NOTIFY %d of %d not sent in %d ms", i + 1, NOTIFY_RETRIES, WAIT_MS);
        expect_notify(&sent[i], "quiet.test", 9);
        tsig_ctx_t ctx;
        tsig_ctx_init(&ctx);
        assert_int_equal(
            tsig_verify_request(&ctx, key, 1, sent[i].buf, sent[i].len, (uint64_t)time(NULL)), 0);
        assert_string_equal(ctx.key->name, "xfr-key");
        tsig_ctx_clear(&ctx);
    }
    if (sent[1].at - t0 > 3 * NOTIFY_TIMEOUT_MS)
        fail_msg("the second NOTIFY came %lld ms after the change (timeout %d ms)",
                 (long long)(sent[1].at - t0), NOTIFY_TIMEOUT_MS);
    /* each resend waited for the timeout (a little scheduling slack below it) */
    for (int i = 1; i < NOTIFY_RETRIES; i++)
        assert_true(sent[i].at - sent[i - 1].at >= NOTIFY_TIMEOUT_MS - 20);
    deadline = tu_now_ms() + WAIT_MS;
    xfr_stats_t st;
    for (;;) {
        xfr_get_stats(fx.x, &st);
        if (st.notify_failed == 1)
            break;
        if (tu_now_ms() > deadline)
            fail_msg("NOTIFY to a silent secondary not given up in %d ms", WAIT_MS);
        tu_sleep_ms(5);
    }
    assert_false(recv_dgram(s2, &extra, tu_now_ms() + 2 * NOTIFY_TIMEOUT_MS));
    xfr_zone_info(fx.x, "quiet.test", &info);
    assert_int_equal(info.nnotify, 1);
    assert_false(info.notify[0].acked);
    assert_int_equal(info.notify[0].attempts, NOTIFY_RETRIES);
    assert_int_equal(st.notify_sent, 1 + NOTIFY_RETRIES);
    assert_int_equal(st.notify_acked, 1);
    close(s1);
    close(s2);
}

/* ---- NOTIFY in through the UDP hand-over --------------------------------------------------- */

/* A NOTIFY for zone from cli to srv (the worker's socket): the "worker" reads it and hands it
 * over; returns the reply's rcode (its id, opcode and question checked), and its AA bit. */
static int notify_in(int cli, int srv, const struct sockaddr_storage *srv_addr, const char *zone,
                     uint16_t id, bool *aa)
{
    uint8_t m[512];
    size_t n = make_notify(m, id, zone);
    assert_int_equal(
        sendto(cli, m, n, 0, (const struct sockaddr *)srv_addr, sizeof(struct sockaddr_in)),
        (ssize_t)n);
    notify_msg_t in;
    assert_true(recv_dgram(srv, &in, tu_now_ms() + WAIT_MS));
    struct sockaddr_storage local;
    socklen_t l = sizeof(local);
    assert_int_equal(getsockname(srv, (struct sockaddr *)&local, &l), 0);
    assert_true(fx.h.udp(fx.h.ctx, srv, in.buf, in.len, &in.from, &local, false));
    notify_msg_t r;
    if (!recv_dgram(cli, &r, tu_now_ms() + WAIT_MS))
        fail_msg("no reply to the NOTIFY for %s in %d ms", zone, WAIT_MS);
    /* from the worker's socket, to the client */
    assert_int_equal(port_of(&r.from), port_of(srv_addr));
    ldns_pkt *p = NULL;
    assert_int_equal(ldns_wire2pkt(&p, r.buf, r.len), LDNS_STATUS_OK);
    assert_int_equal(ldns_pkt_id(p), id);
    assert_true(ldns_pkt_qr(p));
    assert_int_equal(ldns_pkt_get_opcode(p), LDNS_PACKET_NOTIFY);
    assert_int_equal(ldns_pkt_qdcount(p), 1);
    assert_int_equal(ldns_rr_get_type(ldns_rr_list_rr(ldns_pkt_question(p), 0)), LDNS_RR_TYPE_SOA);
    int rcode = ldns_pkt_get_rcode(p);
    *aa = ldns_pkt_aa(p);
    ldns_pkt_free(p);
    return rcode;
}

static void test_notify_in(void **state)
{
    (void)state;
    write_zone("example.zone", "example.test", 1, 1, 0);
    /* the primaries: port 1 on loopback, where nothing answers (each refresh fails after
     * xfr_timeout_ms, on the other thread) */
    start("xfr_timeout_ms: 1000\n"
          "zones:\n"
          "  - {origin: sec.test, primary: \"127.0.0.1@1\", allow_notify: [192.0.2.1]}\n"
          "  - {origin: sec2.test, primary: \"127.0.0.1@1\"}\n"
          "  - {origin: example.test, file: example.zone, allow_transfer: 127.0.0.1}\n",
          true);
    struct sockaddr_storage sa, ca;
    int srv = worker_socket(&sa), cli = udp_socket(&ca);
    bool aa;
    /* from an address allow_notify does not name */
    assert_int_equal(notify_in(cli, srv, &sa, "sec.test", 501, &aa), LDNS_RCODE_REFUSED);
    assert_false(aa);
    /* from the primary's address (allow_notify's default) */
    assert_int_equal(notify_in(cli, srv, &sa, "sec2.test", 502, &aa), LDNS_RCODE_NOERROR);
    assert_true(aa);
    /* for a zone we are primary for, and one we do not have */
    assert_int_equal(notify_in(cli, srv, &sa, "example.test", 503, &aa), LDNS_RCODE_NOTAUTH);
    assert_int_equal(notify_in(cli, srv, &sa, "nowhere.test", 504, &aa), LDNS_RCODE_NOTAUTH);
    xfr_stats_t st;
    xfr_get_stats(fx.x, &st);
    assert_int_equal(st.notify_received, 4);
    xfr_zone_info_t info;
    xfr_zone_info(fx.x, "sec.test", &info);
    assert_true(info.known);
    assert_true(info.secondary);
    close(cli);
}

/* ---- the hand-over queue ------------------------------------------------------------------- */

static void test_queue_bound(void **state)
{
    (void)state;
    write_zone("example.zone", "example.test", 1, 1, 0);
    start(ixfr_yaml, false); /* the threads not running: nothing drains the queue */
    struct sockaddr_storage sa, ca;
    int srv = worker_socket(&sa), cli = udp_socket(&ca);
    uint8_t q[512];
    size_t n = 0;
    for (uint16_t id = 0; id < 64; id++) {
        n = make_query(q, sizeof(q), id, "example.test", LDNS_RR_TYPE_SOA, 0);
        if (!fx.h.udp(fx.h.ctx, srv, q, n, &ca, &sa, false))
            fail_msg("hand-over %u of 64 refused", id + 1);
    }
    n = make_query(q, sizeof(q), 64, "example.test", LDNS_RR_TYPE_SOA, 0);
    assert_false(fx.h.udp(fx.h.ctx, srv, q, n, &ca, &sa, false));
    /* a connection too: refused, the descriptor stays the caller's */
    int tfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(tfd >= 0);
    assert_false(fx.h.tcp(fx.h.ctx, tfd, q, n, &ca, &sa));
    assert_int_equal(close(tfd), 0);

    /* once running, the 64 are answered (plain unsigned queries: REFUSED, through srv) */
    assert_int_equal(xfr_start(fx.x), 0);
    uint8_t seen[64] = {0};
    for (int i = 0; i < 64; i++) {
        notify_msg_t r;
        if (!recv_dgram(cli, &r, tu_now_ms() + WAIT_MS))
            fail_msg("%d of 64 queued requests answered in %d ms", i, WAIT_MS);
        assert_int_equal(port_of(&r.from), port_of(&sa));
        uint16_t id = (uint16_t)(r.buf[0] << 8 | r.buf[1]);
        assert_true(id < 64);
        assert_false(seen[id]);
        seen[id] = 1;
        assert_int_equal(r.buf[3] & 0x0F, LDNS_RCODE_REFUSED);
        assert_true(r.buf[2] & 0x80);
    }
    /* the refused one never got in; and the queue takes requests again */
    notify_msg_t r;
    assert_false(recv_dgram(cli, &r, tu_now_ms() + 200));
    assert_true(fx.h.udp(fx.h.ctx, srv, q, n, &ca, &sa, false));
    assert_true(recv_dgram(cli, &r, tu_now_ms() + WAIT_MS));
    assert_int_equal(r.buf[0] << 8 | r.buf[1], 64);
    close(cli);
}

/* ---- the out thread's pool of connections ------------------------------------------------- */

/* A NOTIFY for example.test handed over from src and its answer read (NOTAUTH: not a secondary
 * zone here); the connection stays open, idle. Returns the client's socket. */
static int notify_held(int lfd, const char *src, uint16_t id)
{
    uint8_t q[512], in[512];
    size_t n = make_notify(q, id, "example.test");
    int cfd = hand_over_tcp_from(lfd, src, q, n);
    assert_int_equal(recv_exact(cfd, in, 2, tu_now_ms() + WAIT_MS), 1);
    size_t len = (size_t)(in[0] << 8 | in[1]);
    assert_true(len >= 12 && len <= sizeof(in));
    assert_int_equal(recv_exact(cfd, in, len, tu_now_ms() + WAIT_MS), 1);
    assert_int_equal(in[0] << 8 | in[1], id);
    assert_int_equal(in[3] & 0x0F, LDNS_RCODE_NOTAUTH);
    return cfd;
}

/* Whether the server closed cfd (EOF) by deadline; with deadline 0, whether it has now. */
static bool closed_by(int cfd, int64_t deadline)
{
    uint8_t b;
    struct pollfd p = {.fd = cfd, .events = POLLIN};
    bool ready = deadline ? wait_readable(cfd, deadline) : poll(&p, 1, 0) > 0;
    return ready && recv(cfd, &b, 1, MSG_DONTWAIT) == 0;
}

/* Of the n connections held (oldest first), the server closed the first only, for one newcomer;
 * then all are closed here. */
static void expect_first_made_room(int *held, int n, int lfd)
{
    assert_true(closed_by(held[0], tu_now_ms() + WAIT_MS));
    for (int i = 1; i < n; i++)
        assert_false(closed_by(held[i], 0));
    xfr_stats_t st;
    xfr_get_stats(fx.x, &st);
    assert_int_equal(st.out_conn_evicted, 1);
    assert_int_equal(st.out_conn_refused, 0);
    for (int i = 0; i < n; i++)
        close(held[i]);
    close(lfd);
}

/* 64 addresses each holding an idle connection after one NOTIFY (the pool full): an AXFR from
 * another address takes the place of the one idle longest (the first), and nobody else's. */
static void test_pool_idle_make_room(void **state)
{
    (void)state;
    write_zone("example.zone", "example.test", 1, 1, BULK);
    start("zones:\n  - {origin: example.test, file: example.zone, allow_transfer: 127.0.0.1}\n",
          true);
    int lfd = tcp_listener();
    int held[64];
    char src[32];
    for (int i = 0; i < 64; i++) {
        snprintf(src, sizeof(src), "127.1.0.%d", i + 1);
        held[i] = notify_held(lfd, src, (uint16_t)(700 + i));
    }
    axfr_ok(lfd, "example.test", "example.zone", NULL, 800);
    xfr_stats_t st;
    xfr_get_stats(fx.x, &st);
    assert_int_equal(st.out_axfr, 1);
    expect_first_made_room(held, 64, lfd);
}

/* One address holds at most 8 (XFR_CONNS_PER_ADDR), the pool far from full: its 9th connection
 * takes the place of its own idle one, the oldest. */
static void test_pool_per_address(void **state)
{
    (void)state;
    write_zone("example.zone", "example.test", 1, 1, 0);
    start("zones:\n  - {origin: example.test, file: example.zone, allow_transfer: 127.0.0.1}\n",
          true);
    int lfd = tcp_listener();
    int held[9];
    for (int i = 0; i < 9; i++)
        held[i] = notify_held(lfd, "127.0.0.1", (uint16_t)(900 + i));
    expect_first_made_room(held, 9, lfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_axfr, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ixfr, setup, teardown),
        cmocka_unit_test_setup_teardown(test_journal_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notify_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notify_in, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_idle_make_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_per_address, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
