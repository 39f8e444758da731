/*
 * test_loader.c — the loader: initial load, reloads that share unchanged zones, change detection
 * (edit in place, rename over, $INCLUDE), failures that keep the published view, coalesced
 * requests; the ASN table from asn_table or compiled from asn_db, and the MaxMind DBs; and
 * stopping while reloads restart the Redis source (a real redis-server on a free loopback port).
 * Zone files are written by the tests into a fresh temporary directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "redis_server.h"
#include "test_util.h"

#include "tern/common/err.h"
#include "tern/common/rcu.h"
#include "tern/geo/asn_compile.h"
#include "tern/geo/asn_table.h"
#include "tern/geo/geoip.h"
#include "tern/load/loader.h"
#include "tern/zone/zone_table.h"

static char dir[64];

/* What read_config() gives the loader: zones[i] = {origin, file name in dir}. */
static struct {
    const char *origin[4];
    const char *file[4];
    size_t n;
    bool fail;
    const char *identity;
    const char *asn;            /* file name in dir of the asn_table, or NULL */
    const char *asn_db;         /* file name in dir of the asn_db (a MaxMind ASN DB), or NULL */
    const char *geoip, *geoip6; /* file names in dir of geoip_db / geoip_db_v6, or NULL */
    uint16_t redis_port;        /* non-zero: a Redis source on 127.0.0.1 at this port ... */
    bool redis_flip;            /* ... whose db flips every second read, restarting the source */
    unsigned redis_reads;
    unsigned redis_max_zones, redis_max_rrset; /* bounds; 0 = the schema's defaults */
    bool no_listen; /* the config has no listen address: what a start refuses */
} want;

static int read_config(void *ctx, config_t *cfg, char *err, size_t errlen)
{
    (void)ctx;
    config_init(cfg);
    if (want.fail) {
        snprintf(err, errlen, "test.yaml:3: unknown key 'bogus'");
        return TERN_ESYNTAX;
    }
    if (want.identity && !(cfg->identity = strdup(want.identity)))
        return TERN_ENOMEM;
    /* a start needs a listen address, so every reload does (nothing is bound here) */
    if (!want.no_listen && config_add_listen(cfg, "127.0.0.1:53") < 0)
        return TERN_ENOMEM;
    if (want.asn) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, want.asn);
        if (!(cfg->asn_table = strdup(path)))
            return TERN_ENOMEM;
    }
    if (want.asn_db) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, want.asn_db);
        if (!(cfg->asn_db = strdup(path)))
            return TERN_ENOMEM;
    }
    if (want.geoip) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, want.geoip);
        if (!(cfg->geoip_db = strdup(path)))
            return TERN_ENOMEM;
    }
    if (want.geoip6) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, want.geoip6);
        if (!(cfg->geoip_db_v6 = strdup(path)))
            return TERN_ENOMEM;
    }
    for (size_t i = 0; i < want.n; i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, want.file[i]);
        if (config_add_zone(cfg, want.origin[i], path) < 0)
            return TERN_ENOMEM;
    }
    if (want.redis_port) {
        cfg->redis.enabled = true;
        if (!(cfg->redis.host = strdup("127.0.0.1")))
            return TERN_ENOMEM;
        cfg->redis.port = want.redis_port;
        cfg->redis.connect_timeout_ms = 500;
        cfg->redis.read_timeout_ms = 1000;
        cfg->redis.zone_reload_s = 0;
        cfg->redis.db = want.redis_flip ? (want.redis_reads++ / 2) % 2 : 0;
        if (want.redis_max_zones)
            cfg->redis.max_zones = want.redis_max_zones;
        if (want.redis_max_rrset)
            cfg->redis.max_rrset_records = want.redis_max_rrset;
    }
    return 0;
}

static void write_file(const char *name, const char *text)
{
    tu_write_file(dir, name, text);
}

/* A zone with the given serial and address for www. */
static void write_zone(const char *name, const char *origin, unsigned serial, unsigned octet)
{
    char text[512];
    snprintf(text, sizeof(text),
             "$ORIGIN %s.\n$TTL 300\n@ SOA ns1 hostmaster %u 3600 600 86400 60\n@ NS ns1\n"
             "ns1 A 192.0.2.53\nwww A 192.0.2.%u\n",
             origin, serial, octet);
    write_file(name, text);
}

static int setup(void **state)
{
    (void)state;
    tu_mkdtemp(dir, sizeof(dir), "tern-loader");
    memset(&want, 0, sizeof(want));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(dir);
    return 0;
}

static const answer_view_t *current(loader_t *l)
{
    return tern_rcu_deref(*loader_published(l));
}

static const zone_t *zone_of(loader_t *l, size_t i)
{
    const answer_view_t *v = current(l);
    assert_true(i < zone_table_count(v->table));
    return zone_table_at(v->table, i);
}

static loader_t *two_zones(void)
{
    write_zone("a.zone", "a.test", 1, 1);
    write_zone("b.zone", "b.test", 1, 1);
    want.origin[0] = "a.test";
    want.file[0] = "a.zone";
    want.origin[1] = "b.test";
    want.file[1] = "b.zone";
    want.n = 2;
    loader_t *l = loader_new(read_config, NULL);
    assert_non_null(l);
    const config_t *cfg;
    assert_int_equal(loader_load(l, &cfg), 0);
    assert_int_equal(cfg->nzones, 2);
    assert_int_equal(loader_start(l), 0);
    return l;
}

static void test_initial_load(void **state)
{
    (void)state;
    want.identity = "ns1.test";
    loader_t *l = two_zones();
    const answer_view_t *v = current(l);
    assert_int_equal(zone_table_count(v->table), 2);
    assert_string_equal(v->cfg.identity, "ns1.test");
    loader_stats_t st;
    loader_get_stats(l, &st);
    assert_int_equal(st.zones, 2);
    assert_int_equal(st.records, 8);
    assert_int_equal(st.reloads_ok, 0);
    loader_free(l);
}

/* Nothing changed: a new view, but both zones are the very same objects. */
static void test_reload_unchanged_shares(void **state)
{
    (void)state;
    loader_t *l = two_zones();
    const answer_view_t *v0 = current(l);
    const zone_t *a = zone_of(l, 0), *b = zone_of(l, 1);
    loader_stats_t st;
    assert_true(loader_reload_wait(l, &st));
    assert_ptr_not_equal(current(l), v0);
    assert_ptr_equal(zone_of(l, 0), a);
    assert_ptr_equal(zone_of(l, 1), b);
    assert_int_equal(a->refs, 1); /* the old table's reference was dropped */
    assert_int_equal(st.reloads_ok, 1);
    assert_true(st.last_ok);
    loader_free(l);
}

/* The config hook sees each config a reload puts in force, with what it says. */
static _Atomic unsigned hooked;
static char hooked_identity[64];

static void on_config(void *ctx, const config_t *cfg)
{
    (void)ctx;
    snprintf(hooked_identity, sizeof(hooked_identity), "%s", cfg->identity ? cfg->identity : "");
    hooked++;
}

static void test_config_hook(void **state)
{
    (void)state;
    write_zone("a.zone", "a.test", 1, 1);
    want.origin[0] = "a.test";
    want.file[0] = "a.zone";
    want.n = 1;
    want.identity = "first.test";
    loader_t *l = loader_new(read_config, NULL);
    assert_non_null(l);
    loader_set_config_hook(l, on_config, NULL);
    const config_t *cfg;
    assert_int_equal(loader_load(l, &cfg), 0);
    assert_int_equal(loader_start(l), 0);
    unsigned before = hooked;
    want.identity = "second.test";
    assert_true(loader_reload_wait(l, NULL));
    assert_int_equal(hooked, before + 1);
    assert_string_equal(hooked_identity, "second.test");
    loader_free(l);
}

/* One zone rewritten (rename over it): only that one is re-read. */
static void test_reload_one_changed(void **state)
{
    (void)state;
    loader_t *l = two_zones();
    const zone_t *b = zone_of(l, 1);
    write_zone("a.zone", "a.test", 2, 7);
    assert_true(loader_reload_wait(l, NULL));
    assert_int_equal(zone_of(l, 0)->serial, 2);
    assert_ptr_equal(zone_of(l, 1), b);
    loader_free(l);
}

/* Edited in place with the same size: the mtime/ctime still tell. */
static void test_reload_edit_in_place(void **state)
{
    (void)state;
    loader_t *l = two_zones();
    char path[256];
    snprintf(path, sizeof(path), "%s/a.zone", dir);
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL); /* a coarse-timestamp filesystem still sees a new time */
    FILE *f = fopen(path, "r+");
    assert_non_null(f);
    char text[512];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    char *serial = strstr(text, "hostmaster 1 ");
    assert_non_null(serial);
    serial[strlen("hostmaster ")] = '9';
    rewind(f);
    fwrite(text, 1, n, f);
    assert_int_equal(fclose(f), 0);
    assert_true(loader_reload_wait(l, NULL));
    assert_int_equal(zone_of(l, 0)->serial, 9);
    loader_free(l);
}

/* A change in an $INCLUDEd file reloads the zone that includes it. */
static void test_reload_include_changed(void **state)
{
    (void)state;
    write_file("main.zone", "$ORIGIN i.test.\n$TTL 300\n@ SOA ns1 hostmaster 5 3600 600 86400 60\n"
                            "@ NS ns1\nns1 A 192.0.2.53\n$INCLUDE part.inc\n");
    write_file("part.inc", "www A 192.0.2.1\n");
    want.origin[0] = "i.test";
    want.file[0] = "main.zone";
    want.n = 1;
    loader_t *l = loader_new(read_config, NULL);
    const config_t *cfg;
    assert_int_equal(loader_load(l, &cfg), 0);
    assert_int_equal(loader_start(l), 0);
    const zone_t *z = zone_of(l, 0);
    assert_int_equal(z->rr_count, 4);
    assert_true(loader_reload_wait(l, NULL));
    assert_ptr_equal(zone_of(l, 0), z);
    write_file("part.inc", "www A 192.0.2.1\nftp A 192.0.2.2\n");
    assert_true(loader_reload_wait(l, NULL));
    assert_int_equal(zone_of(l, 0)->rr_count, 5);
    loader_free(l);
}

/* Errors keep the published view and are counted with their message. */
static void test_reload_failures_keep_view(void **state)
{
    (void)state;
    loader_t *l = two_zones();
    const answer_view_t *v0 = current(l);
    loader_stats_t st;

    write_file("a.zone", "$ORIGIN a.test.\n@ SOA ns1 hostmaster 3 3600 600 86400 60\n"
                         "@ NS ns1\nwww A 300.1.1.1\n");
    assert_false(loader_reload_wait(l, &st));
    assert_ptr_equal(current(l), v0);
    assert_int_equal(st.reloads_failed, 1);
    assert_false(st.last_ok);
    assert_non_null(strstr(st.last_error, "a.zone:4"));

    write_zone("a.zone", "a.test", 3, 3);
    char path[256];
    snprintf(path, sizeof(path), "%s/b.zone", dir);
    assert_int_equal(unlink(path), 0);
    assert_false(loader_reload_wait(l, &st));
    assert_ptr_equal(current(l), v0);
    assert_non_null(strstr(st.last_error, "b.zone"));

    want.fail = true;
    assert_false(loader_reload_wait(l, &st));
    assert_non_null(strstr(st.last_error, "test.yaml:3"));
    assert_int_equal(st.reloads_failed, 3);
    want.fail = false;

    /* a config a start would refuse: the view and config in force stay */
    write_zone("a.zone", "a.test", 4, 4);
    write_zone("b.zone", "b.test", 4, 4);
    want.no_listen = true;
    assert_false(loader_reload_wait(l, &st));
    assert_ptr_equal(current(l), v0);
    assert_non_null(strstr(st.last_error, "no listen address"));
    assert_int_equal(st.reloads_failed, 4);

    /* fixed: the next reload publishes */
    want.no_listen = false;
    write_zone("a.zone", "a.test", 4, 4);
    write_zone("b.zone", "b.test", 4, 4);
    assert_true(loader_reload_wait(l, &st));
    assert_ptr_not_equal(current(l), v0);
    assert_int_equal(zone_of(l, 0)->serial, 4);
    assert_int_equal(st.reloads_ok, 1);
    loader_free(l);
}

/* The same zone configured twice is a failed reload, not a crash or a half table. */
static void test_reload_duplicate_zone(void **state)
{
    (void)state;
    loader_t *l = two_zones();
    want.origin[2] = "A.TEST.";
    want.file[2] = "a.zone";
    want.n = 3;
    loader_stats_t st;
    assert_false(loader_reload_wait(l, &st));
    assert_non_null(strstr(st.last_error, "configured twice"));
    loader_free(l);
}

/* The configuration lists the same zones in another order: still shared, not re-read. */
static void test_reload_reordered_shares(void **state)
{
    (void)state;
    loader_t *l = two_zones();
    const zone_t *a = zone_of(l, 0), *b = zone_of(l, 1);
    want.origin[0] = "b.test";
    want.file[0] = "b.zone";
    want.origin[1] = "a.test";
    want.file[1] = "a.zone";
    assert_true(loader_reload_wait(l, NULL));
    assert_ptr_equal(zone_of(l, 0), b);
    assert_ptr_equal(zone_of(l, 1), a);
    loader_free(l);
}

/* Zones added and removed by the configuration. */
static void test_reload_zone_set_changes(void **state)
{
    (void)state;
    loader_t *l = two_zones();
    const zone_t *b = zone_of(l, 1);
    write_zone("c.zone", "c.test", 1, 3);
    want.origin[0] = "b.test";
    want.file[0] = "b.zone";
    want.origin[1] = "c.test";
    want.file[1] = "c.zone";
    assert_true(loader_reload_wait(l, NULL));
    assert_int_equal(zone_table_count(current(l)->table), 2);
    assert_ptr_equal(zone_of(l, 0), b);
    assert_int_equal(zone_of(l, 1)->apex_len, 8);
    loader_free(l);
}

/* Many requests while a reload runs: all answered, in fewer reloads than requests. */
static void test_requests_coalesce(void **state)
{
    (void)state;
    loader_t *l = two_zones();
    for (int i = 0; i < 50; i++)
        loader_request(l);
    loader_stats_t st;
    assert_true(loader_reload_wait(l, &st));
    assert_true(st.reloads_ok >= 1);
    assert_true(st.reloads_ok <= 51);
    /* the loader is idle again and the last reload came after the last request */
    uint64_t before = st.reloads_ok;
    assert_true(loader_reload_wait(l, &st));
    assert_int_equal(st.reloads_ok, before + 1);
    loader_free(l);
}

/* The initial load reports its errors and publishes nothing. */
static void test_initial_failure(void **state)
{
    (void)state;
    write_file("bad.zone", "$ORIGIN x.test.\n@ NS ns1\n");
    want.origin[0] = "x.test";
    want.file[0] = "bad.zone";
    want.n = 1;
    loader_t *l = loader_new(read_config, NULL);
    const config_t *cfg = NULL;
    assert_true(loader_load(l, &cfg) < 0);
    assert_null(*loader_published(l));
    loader_free(l);
}

/* Compile a one-range ASN table (1.0.0.0/24 -> asn) into dir/name. */
static void write_asn(const char *name, uint32_t asn)
{
    char csv[256], out[256], text[128], err[256] = "";
    snprintf(csv, sizeof(csv), "%s/asn.csv", dir);
    snprintf(out, sizeof(out), "%s/%s", dir, name);
    snprintf(text, sizeof(text), "1.0.0.0,1.0.0.255,%u,\"Test %u\"\n", asn, asn);
    write_file("asn.csv", text);
    const char *in[] = {csv};
    if (asn_compile(in, 1, out, NULL, err, sizeof(err)) < 0)
        fail_msg("asn_compile: %s", err);
}

/* A reload fails naming what and why, and table kept still answers asn for addr. */
static void expect_asn_reload_fails(loader_t *l, const char *what, const char *why,
                                    const asn_table_t *kept, uint32_t addr, uint32_t asn)
{
    loader_stats_t st;
    assert_false(loader_reload_wait(l, &st));
    assert_non_null(strstr(st.last_error, what));
    assert_non_null(strstr(st.last_error, why));
    assert_ptr_equal(current(l)->asn, kept);
    assert_int_equal(asn_table_lookup_v4(current(l)->asn, addr), asn);
}

/* The ASN table rides with the view: shared while unchanged, re-mapped when rewritten, and a
 * corrupt file fails the reload with the old mapping still answering. */
static void test_asn_table_reload(void **state)
{
    (void)state;
    write_asn("asn.bin", 13335);
    want.asn = "asn.bin";
    loader_t *l = two_zones();
    const asn_table_t *t0 = current(l)->asn;
    assert_non_null(t0);
    assert_int_equal(asn_table_lookup_v4(t0, 0x01000001), 13335);
    assert_int_equal(asn_table_lookup_v4(t0, 0x02000001), 0);

    assert_true(loader_reload_wait(l, NULL));
    assert_ptr_equal(current(l)->asn, t0); /* unchanged: the same mapping */

    write_asn("asn.bin", 64500);
    assert_true(loader_reload_wait(l, NULL));
    const asn_table_t *t1 = current(l)->asn;
    assert_ptr_not_equal(t1, t0);
    assert_int_equal(asn_table_lookup_v4(t1, 0x01000001), 64500);

    /* a truncated file renamed into place (files are replaced by rename, as ternctl asn compile
     * does; truncating a mapped file in place would pull the pages from under any reader): the
     * reload fails and names the problem, and the old mapping keeps answering */
    char path[256], part[264];
    snprintf(path, sizeof(path), "%s/asn.bin", dir);
    snprintf(part, sizeof(part), "%s/asn.part", dir);
    FILE *in = fopen(path, "rb"), *outf = fopen(part, "wb");
    assert_non_null(in);
    assert_non_null(outf);
    char head[40];
    assert_int_equal(fread(head, 1, sizeof(head), in), sizeof(head));
    assert_int_equal(fwrite(head, 1, sizeof(head), outf), sizeof(head));
    fclose(in);
    assert_int_equal(fclose(outf), 0);
    assert_int_equal(rename(part, path), 0);
    expect_asn_reload_fails(l, "asn_table", "truncated", t1, 0x01000001, 64500);

    /* unset in the config: no table */
    want.asn = NULL;
    assert_true(loader_reload_wait(l, NULL));
    assert_null(current(l)->asn);
    loader_free(l);
}

/* Copy fixture name (from the MaxMind DB fixtures of tests/unit/geo) to dir/to by rename. */
static void put_mmdb(const char *name, const char *to, long cut)
{
    const char *data = getenv("TERN_GEOIP_DATA");
    assert_non_null(data);
    char src[256], tmp[256], dst[256];
    snprintf(src, sizeof(src), "%s/%s", data, name);
    snprintf(tmp, sizeof(tmp), "%s/%s.part", dir, to);
    snprintf(dst, sizeof(dst), "%s/%s", dir, to);
    FILE *in = fopen(src, "rb"), *out = fopen(tmp, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[4096];
    size_t n, total = 0;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0 && (cut < 0 || (long)total < cut)) {
        if (cut >= 0 && (long)(total + n) > cut)
            n = (size_t)cut - total;
        assert_int_equal(fwrite(buf, 1, n, out), n);
        total += n;
    }
    fclose(in);
    assert_int_equal(fclose(out), 0);
    assert_int_equal(rename(tmp, dst), 0);
}

/* The www A RRset of the JSON zone (zone index i). */
static const zone_geo_t *www_geo(loader_t *l, size_t i)
{
    const zone_t *z = zone_of(l, i);
    static const uint8_t www[] = "\3www\3geo\4test";
    const zone_node_t *n = zone_find_node(z, www, sizeof(www), dname_hash(www));
    assert_non_null(n);
    const zone_geo_t *g = zone_rrset_geo(z, zone_node_rrset(n, 1));
    assert_non_null(g);
    return g;
}

/* MaxMind DBs: opened with the zones, shared while unchanged, re-opened when replaced (and the
 * JSON zones, whose records they locate, rebuilt), refused when truncated (the old one stays). */
static void test_geoip_reload(void **state)
{
    (void)state;
    put_mmdb("nested6.mmdb", "g.mmdb", -1);
    write_file("geo.json",
               "{\"config\": {\"soa\": {\"ns\": \"ns1.geo.test.\", \"mbox\": \"h.geo.test.\"}},"
               " \"records\": {\"@\": {\"ns\": {\"records\": [{\"host\": \"ns1.geo.test.\"}]}},"
               " \"www\": {\"a\": {\"filter\": {\"geo_filter\": \"location\"}, \"records\": ["
               "{\"ip\": \"1.2.3.10\"}, {\"ip\": \"81.2.69.130\"}, {\"ip\": \"192.0.2.1\"}]}}}}");
    want.origin[0] = "geo.test";
    want.file[0] = "geo.json";
    want.n = 1;
    want.geoip = "g.mmdb";
    loader_t *l = loader_new(read_config, NULL);
    assert_non_null(l);
    const config_t *cfg;
    assert_int_equal(loader_load(l, &cfg), 0);
    assert_int_equal(loader_start(l), 0);
    const answer_view_t *v = current(l);
    const geoip_db_t *db0 = v->geoip.v4;
    assert_non_null(db0);
    assert_ptr_equal(v->geoip.v6, db0); /* an IPv6 database answers both families */
    const zone_t *z0 = zone_of(l, 0);
    const zone_geo_t *g = www_geo(l, 0);
    assert_true(g->rr[0].has_loc && g->rr[1].has_loc);
    assert_false(g->rr[2].has_loc); /* 192.0.2.1 is nowhere */

    assert_true(loader_reload_wait(l, NULL)); /* unchanged: the same database, the same zone */
    assert_ptr_equal(current(l)->geoip.v4, db0);
    assert_ptr_equal(zone_of(l, 0), z0);

    put_mmdb("flat4.mmdb", "g.mmdb", -1); /* replaced by rename: an IPv4-only database */
    assert_true(loader_reload_wait(l, NULL));
    v = current(l);
    assert_ptr_not_equal(v->geoip.v4, db0);
    assert_null(v->geoip.v6);
    assert_ptr_not_equal(zone_of(l, 0), z0); /* located again */
    const geoip_db_t *db1 = v->geoip.v4;

    put_mmdb("nested6.mmdb", "g.mmdb", 600); /* truncated: refused, the old one stays */
    loader_stats_t st;
    assert_false(loader_reload_wait(l, &st));
    assert_non_null(strstr(st.last_error, "geoip_db"));
    assert_ptr_equal(current(l)->geoip.v4, db1);

    put_mmdb("flat4.mmdb", "g.mmdb", -1);
    put_mmdb("flat4.mmdb", "g4.mmdb", -1);
    want.geoip6 = "g4.mmdb"; /* an IPv4 database cannot serve IPv6 clients */
    assert_false(loader_reload_wait(l, &st));
    assert_non_null(strstr(st.last_error, "geoip_db_v6"));
    put_mmdb("flat6.mmdb", "g6.mmdb", -1);
    want.geoip6 = "g6.mmdb";
    assert_true(loader_reload_wait(l, NULL));
    v = current(l);
    assert_non_null(v->geoip.v4);
    assert_non_null(v->geoip.v6);
    assert_ptr_not_equal(v->geoip.v4, v->geoip.v6);

    want.geoip = want.geoip6 = NULL;
    assert_true(loader_reload_wait(l, NULL));
    assert_null(current(l)->geoip.v4);
    assert_null(current(l)->geoip.v6);
    assert_false(www_geo(l, 0)->rr[0].has_loc); /* no database: nothing is located */
    loader_free(l);
}

/* A Redis zone, as redins keeps it, in the selected database of c. */
static void put_redis_zone(redisContext *c, const char *zone, const char *www_ip)
{
    char cfg[256], v[128];
    snprintf(cfg, sizeof(cfg),
             "{\"soa\":{\"ttl\":300,\"mbox\":\"h.%s.\",\"ns\":\"ns1.%s.\",\"serial\":1}}", zone,
             zone);
    rsrv_cmd(c, "SET redins:zones:%s.:config %s", zone, cfg);
    snprintf(v, sizeof(v), "{\"a\":{\"records\":[{\"ip\":\"%s\"}]}}", www_ip);
    rsrv_cmd(c, "HSET redins:zones:%s. www %s", zone, v);
    rsrv_cmd(c, "SADD redins:zones %s.", zone);
}

/*
 * Stop while the loader thread is in a reload that stops and starts the Redis source (its db
 * flips), and while Redis changes arrive: the loader thread must be joined before the source is
 * stopped, or both threads stop it at once (a double free, a source started after the stop and
 * never freed, a use after free). Meant for the ASan and TSan builds; bounded in count and time.
 */
static void test_stop_during_redis_reloads(void **state)
{
    (void)state;
    redis_server_t srv;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_redis_zone(c, "r.test", "192.0.2.1");
    rsrv_cmd(c, "SELECT 1");
    put_redis_zone(c, "r.test", "192.0.2.2");
    write_zone("a.zone", "a.test", 1, 1);
    want.origin[0] = "a.test";
    want.file[0] = "a.zone";
    want.n = 1;
    want.redis_port = srv.port;
    want.redis_flip = true;
    int64_t deadline = rsrv_now_ms() + 30000;
    int rounds = 0;
    for (; rounds < 24 && rsrv_now_ms() < deadline; rounds++) {
        loader_t *l = loader_new(read_config, NULL);
        assert_non_null(l);
        const config_t *cfg;
        assert_int_equal(loader_load(l, &cfg), 0);
        assert_int_equal(loader_start(l), 0);
        for (int k = 0; k < 4; k++) {
            loader_request(l);
            char ip[32];
            snprintf(ip, sizeof(ip), "192.0.2.%d", 10 + (rounds * 4 + k) % 200);
            put_redis_zone(c, "r.test", ip);
        }
        rsrv_sleep_ms(rounds % 4 * 3); /* stop at different points of the reloads */
        loader_free(l);
    }
    print_message("%d rounds of start, reloads and stop\n", rounds);
    assert_true(rounds >= 4);
    redisFree(c);
    rsrv_stop(&srv);
}

/* The bounds configured for Redis reach the source, and its counters loader_get_stats() (which
 * ternctl status and /metrics show). */
static void test_redis_bounds_reach_source(void **state)
{
    (void)state;
    redis_server_t srv;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_redis_zone(c, "r.test", "192.0.2.1");
    put_redis_zone(c, "s.test", "192.0.2.2");
    rsrv_cmd(c, "HSET redins:zones:r.test. pool %s",
             "{\"a\":{\"records\":[{\"ip\":\"192.0.2.7\"},{\"ip\":\"192.0.2.8\"},"
             "{\"ip\":\"192.0.2.9\"}]}}");
    write_zone("a.zone", "a.test", 1, 1);
    want.origin[0] = "a.test";
    want.file[0] = "a.zone";
    want.n = 1;
    want.redis_port = srv.port;
    want.redis_max_zones = 1;
    want.redis_max_rrset = 2;
    loader_t *l = loader_new(read_config, NULL);
    const config_t *cfg;
    assert_int_equal(loader_load(l, &cfg), 0);
    loader_stats_t st;
    loader_get_stats(l, &st);
    assert_true(st.redis_enabled);
    assert_int_equal(st.zones, 2); /* a.test and r.test: s.test is beyond max_zones */
    assert_int_equal(st.redis_zones, 1);
    assert_int_equal(st.redis_zones_skipped, 1);
    assert_int_equal(st.redis_over_rrset_records, 1);
    assert_int_equal(st.redis_labels_skipped, 1);
    assert_int_equal(st.redis_over_value_bytes + st.redis_over_labels, 0);
    loader_free(l);
    redisFree(c);
    rsrv_stop(&srv);
}

static ino_t inode_in_dir(const char *name)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_int_equal(stat(path, &st), 0);
    return st.st_ino;
}

/* asn_db: the MaxMind ASN database compiled beside it (<file>.tern-asn) and mapped; shared while
 * unchanged, compiled and mapped anew when replaced, a truncated replacement fails the reload with
 * the old table answering; a new loader (a restart) reuses the cache; with asn_table set too, the
 * cache lives there. */
static void test_asn_db_reload(void **state)
{
    (void)state;
    put_mmdb("asn_geolite.mmdb", "GeoLite2-ASN.mmdb", -1);
    want.asn_db = "GeoLite2-ASN.mmdb";
    loader_t *l = two_zones();
    const asn_table_t *t0 = current(l)->asn;
    assert_non_null(t0);
    assert_int_equal(asn_table_lookup_v4(t0, 0x51024501), 64500); /* 81.2.69.1 */
    ino_t cache_ino = inode_in_dir("GeoLite2-ASN.mmdb.tern-asn");

    assert_true(loader_reload_wait(l, NULL));
    assert_ptr_equal(current(l)->asn, t0); /* unchanged: the same mapping, nothing compiled */
    assert_int_equal(inode_in_dir("GeoLite2-ASN.mmdb.tern-asn"), cache_ino);

    put_mmdb("asn_geolite_b.mmdb", "GeoLite2-ASN.mmdb", -1); /* a new release, by rename */
    assert_true(loader_reload_wait(l, NULL));
    const asn_table_t *t1 = current(l)->asn;
    assert_ptr_not_equal(t1, t0);
    assert_int_equal(asn_table_lookup_v4(t1, 0x51024501), 64501);
    cache_ino = inode_in_dir("GeoLite2-ASN.mmdb.tern-asn");

    put_mmdb("asn_geolite.mmdb", "GeoLite2-ASN.mmdb", 1000); /* truncated */
    expect_asn_reload_fails(l, "asn_db: ", "GeoLite2-ASN.mmdb: not a valid MaxMind DB file", t1,
                            0x51024501, 64501);
    assert_int_equal(inode_in_dir("GeoLite2-ASN.mmdb.tern-asn"), cache_ino); /* kept */
    loader_free(l);

    put_mmdb("asn_geolite_b.mmdb", "GeoLite2-ASN.mmdb", -1); /* the same bytes as the cache */
    l = two_zones(); /* a restart: the cache is current by content, so it is mapped as it is */
    assert_int_equal(asn_table_lookup_v4(current(l)->asn, 0x51024501), 64501);
    assert_int_equal(inode_in_dir("GeoLite2-ASN.mmdb.tern-asn"), cache_ino);

    want.asn = "asn-cache.bin"; /* asn_table names where the compiled table lives */
    assert_true(loader_reload_wait(l, NULL));
    assert_int_equal(asn_table_lookup_v4(current(l)->asn, 0x51024501), 64501);
    inode_in_dir("asn-cache.bin");
    want.asn = NULL;
    want.asn_db = NULL;
    assert_true(loader_reload_wait(l, NULL));
    assert_null(current(l)->asn);
    loader_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_initial_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_unchanged_shares, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_hook, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_one_changed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_edit_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_include_changed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_failures_keep_view, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_duplicate_zone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_zone_set_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_reordered_shares, setup, teardown),
        cmocka_unit_test_setup_teardown(test_requests_coalesce, setup, teardown),
        cmocka_unit_test_setup_teardown(test_initial_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_asn_table_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_geoip_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_during_redis_reloads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redis_bounds_reach_source, setup, teardown),
        cmocka_unit_test_setup_teardown(test_asn_db_reload, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
