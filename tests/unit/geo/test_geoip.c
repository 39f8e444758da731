/* Unit tests for the MaxMind DB lookups: nested (GeoIP2) and flat (ip-location-db) layouts,
 * IPv4 in an IPv6 tree (prefix normalised), IPv6, IPv4-mapped addresses, not-found prefixes,
 * geoip_set routing, refused files (neither layout, truncated, garbage, missing, corrupt tree or
 * data) and no allocation on lookups.
 *
 * The fixtures come from tests/data/make_mmdb.pl: ctest runs it first (fixture "geoip_mmdb") and
 * passes the directory in TERN_GEOIP_DATA; run by hand, the test runs the script itself. The
 * networks and values below mirror that script. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_util.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <maxminddb.h>
#include <sys/stat.h>

#include "tern/common/err.h"
#include "tern/common/mem.h"
#include "tern/geo/geoip.h"

static char tmpdir[128];
static char datadir[256];
static char errbuf[512];
static geoip_db_t *nested6, *flat4, *flat6;

static const char *fixture(const char *name)
{
    static char bufs[4][600];
    static int i;
    char *p = bufs[i++ % 4];
    snprintf(p, 600, "%s/%s", datadir, name);
    return p;
}

static const char *scratch(const char *name)
{
    static char bufs[4][600];
    static int i;
    char *p = bufs[i++ % 4];
    snprintf(p, 600, "%s/%s", tmpdir, name);
    return p;
}

static geoip_db_t *open_ok(const char *name)
{
    errbuf[0] = '\0';
    geoip_db_t *db = geoip_open(fixture(name), errbuf, sizeof(errbuf));
    if (!db)
        fail_msg("open %s: %s", name, errbuf);
    return db;
}

static int setup(void **state)
{
    (void)state;
    tu_mkdtemp(tmpdir, sizeof(tmpdir), "tern_geoip");
    const char *env = getenv("TERN_GEOIP_DATA");
    if (env && *env) {
        snprintf(datadir, sizeof(datadir), "%s", env);
    } else {
        char cmd[800];
        snprintf(datadir, sizeof(datadir), "%s/data", tmpdir);
        snprintf(cmd, sizeof(cmd), "perl '%s' '%s'", TERN_MAKE_MMDB, datadir);
        assert_int_equal(system(cmd), 0);
    }
    nested6 = open_ok("nested6.mmdb");
    flat4 = open_ok("flat4.mmdb");
    flat6 = open_ok("flat6.mmdb");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    geoip_close(nested6);
    geoip_close(flat4);
    geoip_close(flat6);
    tu_rmtree(tmpdir);
    return 0;
}

/* ---- lookup helpers ------------------------------------------------------------------------ */

/* Look s up in db (family from the text) and return the result. */
static geoip_result_t look(const geoip_db_t *db, const char *s)
{
    uint8_t a[16];
    geoip_result_t r;
    memset(&r, 0xAA, sizeof(r)); /* every field must be written */
    if (strchr(s, ':')) {
        assert_int_equal(inet_pton(AF_INET6, s, a), 1);
        geoip_lookup(db, AF_INET6, a, &r);
    } else {
        assert_int_equal(inet_pton(AF_INET, s, a), 1);
        geoip_lookup(db, AF_INET, a, &r);
    }
    return r;
}

static geoip_result_t set_look(const geoip_set_t *set, const char *s)
{
    uint8_t a[16];
    geoip_result_t r;
    memset(&r, 0xAA, sizeof(r));
    int family = strchr(s, ':') ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(family, s, a), 1);
    geoip_set_lookup(set, family, a, &r);
    return r;
}

#define CC(s) GEOIP_CC((s)[0], (s)[1])

/* A hit: country, location (exact doubles: the fixture's value as the file stores it) and
 * prefix. */
static void expect_hit(geoip_result_t r, const char *cc, double lat, double lon, unsigned prefix)
{
    assert_int_equal(r.country, CC(cc));
    assert_true(r.has_location);
    if (r.lat != lat || r.lon != lon)
        fail_msg("location %.9g,%.9g, want %.9g,%.9g", r.lat, r.lon, lat, lon);
    assert_int_equal(r.prefix, prefix);
}

/* A record without a usable location (country may be 0). */
static void expect_noloc(geoip_result_t r, uint16_t cc, unsigned prefix)
{
    assert_int_equal(r.country, cc);
    assert_false(r.has_location);
    assert_true(r.lat == 0.0 && r.lon == 0.0);
    assert_int_equal(r.prefix, prefix);
}

static void expect_unknown(geoip_result_t r, unsigned prefix)
{
    expect_noloc(r, 0, prefix);
}

/* ---- layouts -------------------------------------------------------------------------------- */

static void test_nested6(void **state)
{
    (void)state;
    assert_int_equal(geoip_ip_version(nested6), 6);
    const char *d = geoip_describe(nested6);
    if (strncmp(d, "GeoLite2-City, IPv6, nested keys, 20", 36) != 0)
        fail_msg("describe: %s", d);

    /* IPv4 through the IPv4 subtree: prefixes are IPv4 lengths, not 96 + n */
    expect_hit(look(nested6, "1.2.3.4"), "AU", -27.4679, 153.0281, 24);
    expect_hit(look(nested6, "1.2.3.255"), "AU", -27.4679, 153.0281, 24);
    expect_hit(look(nested6, "::ffff:1.2.3.4"), "AU", -27.4679, 153.0281, 24);
    expect_hit(look(nested6, "81.2.69.160"), "GB", 51.5142, -0.0931, 26);
    /* no country: registered_country */
    expect_hit(look(nested6, "5.6.7.8"), "DE", 52.5, 13.4, 16);
    /* latitude without longitude */
    expect_noloc(look(nested6, "9.9.9.9"), CC("FR"), 24);

    /* IPv6 */
    expect_hit(look(nested6, "2a02:1234::1"), "SE", 59.3293, 18.0686, 32);
    expect_noloc(look(nested6, "2a03:1::1"), CC("NL"), 16);    /* latitude 91 */
    expect_noloc(look(nested6, "2c0f:f000::1"), CC("ZA"), 20); /* NaN latitude */
    /* 6to4 is aliased to the IPv4 subtree but stays an IPv6 lookup: 16 + 24 */
    expect_hit(look(nested6, "2002:102:304::1"), "AU", -27.4679, 153.0281, 40);

    /* not found: the length of the empty network the address fell into */
    expect_unknown(look(nested6, "1.2.4.1"), 22);  /* 1.2.3.0/24 shares 21 bits */
    expect_unknown(look(nested6, "128.0.0.1"), 1); /* no IPv4 network starts with bit 1 */
    expect_unknown(look(nested6, "3000::1"), 4);   /* 2xxx: 001 shared */
    expect_unknown(look(nested6, "2a02:1235::1"), 32);
}

static void test_flat4(void **state)
{
    (void)state;
    assert_int_equal(geoip_ip_version(flat4), 4);
    const char *d = geoip_describe(flat4);
    if (strncmp(d, "city ipv4, IPv4, flat keys, 20", 30) != 0)
        fail_msg("describe: %s", d);

    /* float coordinates: the float nearest the written value, widened */
    expect_hit(look(flat4, "1.2.3.4"), "AU", (double)-27.4679f, (double)153.0281f, 24);
    expect_hit(look(flat4, "::ffff:1.2.3.4"), "AU", (double)-27.4679f, (double)153.0281f, 24);
    expect_hit(look(flat4, "81.2.69.190"), "GB", (double)51.5142f, (double)-0.0931f, 26);
    expect_hit(look(flat4, "100.127.255.255"), "US", (double)37.751f, (double)-97.822f, 10);
    expect_noloc(look(flat4, "198.51.100.7"), 0, 24); /* "U1", longitude 200 */
    geoip_result_t r = look(flat4, "203.0.113.9");    /* "USA": no country, location fine */
    expect_hit(r, "\0\0", (double)-33.9f, (double)151.2f, 24);

    expect_unknown(look(flat4, "1.2.4.1"), 22);
    expect_unknown(look(flat4, "8.8.8.8"), 5);   /* 0000 shared with 1.2.3.0 */
    expect_unknown(look(flat4, "128.0.0.1"), 2); /* 1 shared with 198/203 */
    /* IPv6 in an IPv4-only database: no answer at all */
    expect_unknown(look(flat4, "2a02:1234::1"), 0);
}

static void test_flat6(void **state)
{
    (void)state;
    assert_int_equal(geoip_ip_version(flat6), 6);
    const char *d = geoip_describe(flat6);
    if (strncmp(d, "city ipv6, IPv6, flat keys, 20", 30) != 0)
        fail_msg("describe: %s", d);

    /* coordinates stored as strings: parsed to the correctly rounded double */
    expect_hit(look(flat6, "2a02:1234:ffff::1"), "SE", 59.3293, 18.0686, 32);
    expect_hit(look(flat6, "2a03:5::1"), "NL", 52.37, 4.89, 48);
    expect_noloc(look(flat6, "2c0f:f000::1"), CC("ZA"), 20); /* latitude "abc" */

    expect_unknown(look(flat6, "2a02:1235::1"), 32);
    expect_unknown(look(flat6, "3000::1"), 4);
    /* no IPv4 subtree: the whole IPv4 space is one not-found network */
    expect_unknown(look(flat6, "1.2.3.4"), 0);
    expect_unknown(look(flat6, "::ffff:1.2.3.4"), 0);
}

static void test_bad_args(void **state)
{
    (void)state;
    uint8_t a[16] = {1, 2, 3, 4};
    geoip_result_t r;
    memset(&r, 0xAA, sizeof(r));
    geoip_lookup(NULL, AF_INET, a, &r);
    expect_unknown(r, 0);
    memset(&r, 0xAA, sizeof(r));
    geoip_lookup(nested6, AF_UNIX, a, &r);
    expect_unknown(r, 0);
    geoip_close(NULL);
}

/* ---- sets ----------------------------------------------------------------------------------- */

static void test_set_routing(void **state)
{
    (void)state;
    /* flat4's coordinates are floats, nested6's doubles: the latitude tells who answered */
    geoip_set_t both = {.v4 = flat4, .v6 = nested6};
    expect_hit(set_look(&both, "1.2.3.4"), "AU", (double)-27.4679f, (double)153.0281f, 24);
    expect_hit(set_look(&both, "::ffff:1.2.3.4"), "AU", (double)-27.4679f, (double)153.0281f, 24);
    expect_unknown(set_look(&both, "5.6.7.8"), 6); /* only nested6 has it; flat4 answers */
    expect_hit(set_look(&both, "2a02:1234::1"), "SE", 59.3293, 18.0686, 32);

    geoip_set_t v6only = {.v6 = nested6};
    expect_hit(set_look(&v6only, "1.2.3.4"), "AU", -27.4679, 153.0281, 24);
    expect_hit(set_look(&v6only, "::ffff:5.6.7.8"), "DE", 52.5, 13.4, 16);
    expect_hit(set_look(&v6only, "2a02:1234::1"), "SE", 59.3293, 18.0686, 32);

    geoip_set_t split = {.v4 = flat4, .v6 = flat6};
    expect_hit(set_look(&split, "81.2.69.160"), "GB", (double)51.5142f, (double)-0.0931f, 26);
    expect_hit(set_look(&split, "2a03:5::1"), "NL", 52.37, 4.89, 48);

    /* a v6 database without an IPv4 subtree answers IPv4 with "unknown, whole space" */
    geoip_set_t flat6only = {.v6 = flat6};
    expect_unknown(set_look(&flat6only, "1.2.3.4"), 0);

    geoip_set_t v4only = {.v4 = flat4};
    expect_hit(set_look(&v4only, "1.2.3.4"), "AU", (double)-27.4679f, (double)153.0281f, 24);
    expect_unknown(set_look(&v4only, "2a02:1234::1"), 0);

    geoip_set_t none = {0};
    expect_unknown(set_look(&none, "1.2.3.4"), 0);
    expect_unknown(set_look(&none, "2a02:1234::1"), 0);
    expect_unknown(set_look(NULL, "1.2.3.4"), 0);
    expect_unknown(set_look(NULL, "2a02:1234::1"), 0);
}

/* ---- refused files -------------------------------------------------------------------------- */

static void expect_refused(const char *path, const char *needle)
{
    errbuf[0] = '\0';
    geoip_db_t *db = geoip_open(path, errbuf, sizeof(errbuf));
    if (db) {
        char desc[256];
        snprintf(desc, sizeof(desc), "%s", geoip_describe(db));
        geoip_close(db);
        fail_msg("%s opened: %s", path, desc);
    }
    if (!strstr(errbuf, path) || !strstr(errbuf, needle))
        fail_msg("%s: message \"%s\" lacks the path or \"%s\"", path, errbuf, needle);
}

static size_t read_all(const char *path, uint8_t **buf)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    struct stat st;
    assert_int_equal(fstat(fileno(f), &st), 0);
    *buf = malloc((size_t)st.st_size);
    assert_non_null(*buf);
    assert_int_equal(fread(*buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
    fclose(f);
    return (size_t)st.st_size;
}

static const char *write_bytes(const char *name, const uint8_t *p, size_t n)
{
    const char *path = scratch(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    return path;
}

static void test_refuse_neither_layout(void **state)
{
    (void)state;
    expect_refused(fixture("asn.mmdb"), "neither");
    expect_refused(fixture("shape.mmdb"), "neither");
}

static void test_refuse_missing(void **state)
{
    (void)state;
    expect_refused(scratch("missing.mmdb"), "No such file");
    /* err may be NULL */
    assert_null(geoip_open(scratch("missing.mmdb"), NULL, 0));
    expect_refused(tmpdir, "not a regular file");
}

static void test_refuse_truncated(void **state)
{
    (void)state;
    uint8_t *p;
    size_t n = read_all(fixture("nested6.mmdb"), &p);
    expect_refused(write_bytes("half.mmdb", p, n / 2), "not a valid MaxMind DB");
    expect_refused(write_bytes("empty.mmdb", p, 0), "");
    free(p);
}

static void test_refuse_garbage(void **state)
{
    (void)state;
    uint8_t buf[4096];
    uint64_t s = 42;
    for (size_t i = 0; i < sizeof(buf); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = (uint8_t)(s >> 56);
    }
    expect_refused(write_bytes("garbage.mmdb", buf, sizeof(buf)), "not a valid MaxMind DB");
}

/* Damage inside an otherwise valid file (metadata intact), which MMDB_open does not notice. */
static void test_refuse_corrupt_inside(void **state)
{
    (void)state;
    MMDB_s m;
    assert_int_equal(MMDB_open(fixture("nested6.mmdb"), MMDB_MODE_MMAP, &m), MMDB_SUCCESS);
    size_t tree = (size_t)m.metadata.node_count * m.full_record_byte_size;
    size_t data_end = (size_t)(m.metadata_section - m.file_content) - 14; /* marker */
    MMDB_close(&m);

    uint8_t *p;
    size_t n = read_all(fixture("nested6.mmdb"), &p);
    uint8_t *q = malloc(n);
    assert_non_null(q);

    /* search tree records pointing past the data section */
    memcpy(q, p, n);
    memset(q, 0xFF, 64);
    expect_refused(write_bytes("tree.mmdb", q, n), "corrupt search tree");

    /* non-zero separator between tree and data */
    memcpy(q, p, n);
    q[tree + 3] = 1;
    expect_refused(write_bytes("sep.mmdb", q, n), "separator");

    /* data section overwritten: 0xFF is a map of 65821+ entries, over and over */
    memcpy(q, p, n);
    memset(q + tree + 16, 0xFF, data_end - tree - 16);
    expect_refused(write_bytes("data.mmdb", q, n), "corrupt data record");
    free(q);
    free(p);
}

/* ---- no allocation -------------------------------------------------------------------------- */

static void lookup_storm(unsigned rounds)
{
    const geoip_db_t *dbs[] = {nested6, flat4, flat6};
    geoip_set_t set = {.v4 = flat4, .v6 = nested6};
    uint64_t s = 7, sink = 0;
    for (unsigned i = 0; i < rounds; i++) {
        uint8_t a[16];
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t x = s;
        memcpy(a, &x, 8);
        memcpy(a + 8, &x, 8);
        if (i % 4 == 0) { /* land in the fixtures' networks often */
            static const uint8_t hits[][4] = {{1, 2, 3, 4}, {81, 2, 69, 160}, {5, 6, 7, 8}};
            memcpy(a, hits[i / 4 % 3], 4);
        }
        if (i % 8 == 1) {
            a[0] = 0x2a;
            a[1] = 0x02;
            a[2] = 0x12;
            a[3] = 0x34;
        }
        geoip_result_t r;
        const geoip_db_t *db = dbs[i % 3];
        geoip_lookup(db, AF_INET, a, &r);
        sink += r.country + r.prefix;
        geoip_lookup(db, AF_INET6, a, &r);
        sink += r.country + r.prefix;
        geoip_set_lookup(&set, i & 1 ? AF_INET : AF_INET6, a, &r);
        sink += r.country + r.prefix + r.has_location;
    }
    assert_true(sink > 0);
}

static void test_no_alloc(void **state)
{
    (void)state;
    const uint64_t *alloc, *dealloc;
    if (mem_thread_counters(&alloc, &dealloc) == 0) {
        uint64_t a0 = *alloc, d0 = *dealloc;
        lookup_storm(100000);
        assert_int_equal(*alloc, a0);
        assert_int_equal(*dealloc, d0);
        return;
    }
    /* No counters in this build (plain libc): the heap must at least not grow. */
    struct mallinfo2 m0 = mallinfo2();
    lookup_storm(100000);
    struct mallinfo2 m1 = mallinfo2();
    assert_int_equal(m1.uordblks, m0.uordblks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nested6),        cmocka_unit_test(test_flat4),
        cmocka_unit_test(test_flat6),          cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_set_routing),    cmocka_unit_test(test_refuse_neither_layout),
        cmocka_unit_test(test_refuse_missing), cmocka_unit_test(test_refuse_truncated),
        cmocka_unit_test(test_refuse_garbage), cmocka_unit_test(test_refuse_corrupt_inside),
        cmocka_unit_test(test_no_alloc),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
