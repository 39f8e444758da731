/*
 * test_dnssec_sign.c — RRSIGs tern makes, checked by an independent validator (ldns), for the
 * three algorithms; the signature made ahead for a zone and the per-worker cache (hits, subsets
 * in another order, zone versions, refresh); the compact-denial NSEC; and that a worker's
 * signatures allocate nothing once warm (libcrypto's allocations come from the signer's region,
 * which is poisoned after every signature here: a kept object would break what follows).
 */
#include <ldns/ldns.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tern/common/mem.h"
#include "tern/dnssec/dnssec_key.h"
#include "tern/dnssec/dnssec_sign.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_builder.h"

#include "ldns_verify.h"

uint64_t dnssec_signer_spills(const dnssec_signer_t *s); /* dnssec_sign.c, for tests */

static const uint8_t ORIGIN[] = "\7example\4test";
static const uint8_t OWNER_MIXED[] = "\3WwW\7ExAmple\4test";

static dnssec_key_t *gen(unsigned alg, bool ksk)
{
    dnssec_key_t *k = NULL;
    char err[256] = "";
    int rc = dnssec_key_generate(ORIGIN, alg, ksk, alg == DNSSEC_ALG_RSASHA256 ? 1024 : 0, &k, err,
                                 sizeof(err));
    if (rc < 0)
        fail_msg("generate alg %u: %s", alg, err);
    return k;
}

/* Three A records as an rdata sequence. */
static const uint8_t THREE_A[] = {0, 4, 192, 0, 2, 3, 0, 4, 192, 0, 2, 1, 0, 4, 192, 0, 2, 2};

static void sign_alg(unsigned alg)
{
    dnssec_key_t *k = gen(alg, false);
    char err[256];
    dnssec_keyctx_t *kc = dnssec_keyctx_new(k, err, sizeof(err));
    assert_non_null(kc);
    dnssec_signer_t *s = dnssec_signer_new(65536, false);
    assert_non_null(s);
    uint32_t now = (uint32_t)time(NULL);
    dnssec_rrsig_req_t req = {.owner = OWNER_MIXED,
                              .labels = 3,
                              .type = WIRE_T_A,
                              .ttl = 300,
                              .inception = now - 3600,
                              .expiration = now + 86400,
                              .signer = ORIGIN};
    uint8_t out[DNSSEC_RRSIG_MAX];
    int len = dnssec_sign(s, kc, &req, 3, THREE_A, NULL, out, sizeof(out));
    assert_int_equal(len, DNSSEC_RRSIG_FIXED + (int)sizeof(ORIGIN) + k->siglen);
    assert_int_equal(verify(k, OWNER_MIXED, WIRE_T_A, 300, 3, THREE_A, NULL, out, (size_t)len),
                     LDNS_STATUS_OK);
    /* a subset, given in reverse order: the signature covers exactly it */
    const uint32_t offs[2] = {12, 0};
    len = dnssec_sign(s, kc, &req, 2, THREE_A, offs, out, sizeof(out));
    assert_true(len > 0);
    assert_int_equal(verify(k, OWNER_MIXED, WIRE_T_A, 300, 2, THREE_A, offs, out, (size_t)len),
                     LDNS_STATUS_OK);
    assert_int_not_equal(verify(k, OWNER_MIXED, WIRE_T_A, 300, 3, THREE_A, NULL, out, (size_t)len),
                         LDNS_STATUS_OK);
    /* a tampered signature is refused: the check can fail */
    out[len - 1] ^= 1;
    assert_int_not_equal(verify(k, OWNER_MIXED, WIRE_T_A, 300, 2, THREE_A, offs, out, (size_t)len),
                         LDNS_STATUS_OK);
    dnssec_signer_free(s);
    dnssec_keyctx_free(kc);
    dnssec_key_free(k);
}

static void test_sign_ecdsa(void **state)
{
    (void)state;
    sign_alg(DNSSEC_ALG_ECDSAP256SHA256);
}

static void test_sign_ed25519(void **state)
{
    (void)state;
    sign_alg(DNSSEC_ALG_ED25519);
}

static void test_sign_rsa(void **state)
{
    (void)state;
    sign_alg(DNSSEC_ALG_RSASHA256);
}

/* Warm ECDSA and Ed25519 signatures allocate nothing, and nothing libcrypto keeps lives in the
 * region: it is poisoned after each signature and every signature still verifies. */
static void test_no_alloc(void **state)
{
    (void)state;
    const uint64_t *a, *d;
    bool counted = mem_thread_counters(&a, &d) == 0;
    unsigned algs[] = {DNSSEC_ALG_ECDSAP256SHA256, DNSSEC_ALG_ED25519, DNSSEC_ALG_RSASHA256};
    for (size_t ai = 0; ai < 3; ai++) {
        dnssec_key_t *k = gen(algs[ai], false);
        char err[256];
        dnssec_keyctx_t *kc = dnssec_keyctx_new(k, err, sizeof(err));
        dnssec_signer_t *s = dnssec_signer_new(65536, false);
        assert_non_null(kc);
        assert_non_null(s);
        uint32_t now = (uint32_t)time(NULL);
        dnssec_rrsig_req_t req = {.owner = OWNER_MIXED,
                                  .labels = 3,
                                  .type = WIRE_T_A,
                                  .ttl = 300,
                                  .inception = now - 3600,
                                  .expiration = now + 86400,
                                  .signer = ORIGIN};
        uint8_t out[DNSSEC_RRSIG_MAX];
        assert_true(dnssec_sign(s, kc, &req, 3, THREE_A, NULL, out, sizeof(out)) > 0);
        unsigned n = algs[ai] == DNSSEC_ALG_RSASHA256 ? 200 : 2000;
        uint64_t a0 = counted ? *a : 0;
        for (unsigned i = 0; i < n; i++) {
            req.ttl = 300 + i;
            int len = dnssec_sign(s, kc, &req, 3, THREE_A, NULL, out, sizeof(out));
            assert_true(len > 0);
            assert_int_equal(dnssec_signer_spills(s), 0);
            if (i % 97 == 0) {
                uint64_t a1 = counted ? *a : 0;
                assert_int_equal(
                    verify(k, OWNER_MIXED, WIRE_T_A, 300 + i, 3, THREE_A, NULL, out, (size_t)len),
                    LDNS_STATUS_OK);
                a0 += counted ? *a - a1 : 0; /* ldns' own allocations do not count */
            }
        }
        /* RSA's blinding state is renewed in place by libcrypto: its signatures allocate (the
         * README says so); ECDSA and Ed25519 do not */
        if (counted && algs[ai] != DNSSEC_ALG_RSASHA256)
            assert_int_equal(*a - a0, 0);
        dnssec_signer_free(s);
        dnssec_keyctx_free(kc);
        dnssec_key_free(k);
    }
}

static void test_nsec_rdata(void **state)
{
    (void)state;
    uint8_t out[DNSSEC_NSEC_MAX];
    /* NXNAME: \000.www.example.test, window 0 with RRSIG, NSEC and NXNAME (128 = octet 16) */
    int len = dnssec_nsec_rdata(OWNER_MIXED, NULL, 0, true, out, sizeof(out));
    size_t ol = sizeof(OWNER_MIXED);
    assert_int_equal(len, (int)(2 + ol + 2 + 17));
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 0);
    assert_memory_equal(out + 2, "\3www\7example\4test", ol); /* lowercased */
    const uint8_t *b = out + 2 + ol;
    assert_int_equal(b[0], 0);
    assert_int_equal(b[1], 17);
    assert_int_equal(b[2 + 5], 0x03);  /* 46, 47 */
    assert_int_equal(b[2 + 16], 0x80); /* 128 */
    /* NODATA at a name with A, MX, AAAA and CAA: two windows, no NXNAME */
    const uint16_t types[] = {WIRE_T_A, WIRE_T_MX, WIRE_T_AAAA, WIRE_T_CAA};
    len = dnssec_nsec_rdata(OWNER_MIXED, types, 4, false, out, sizeof(out));
    b = out + 2 + ol;
    assert_int_equal(b[0], 0);
    assert_int_equal(b[1], 6);        /* up to type 47 */
    assert_int_equal(b[2], 0x40);     /* A = 1 */
    assert_int_equal(b[2 + 1], 0x01); /* MX = 15 */
    assert_int_equal(b[2 + 3], 0x08); /* AAAA = 28 */
    assert_int_equal(b[2 + 5], 0x03);
    assert_int_equal(b[8], 1); /* window 1: CAA = 257, bit 1 */
    assert_int_equal(b[9], 1);
    assert_int_equal(b[10], 0x40);
    assert_int_equal(len, (int)(2 + ol + 8 + 3));
    /* no successor under 255 bytes: no NSEC */
    uint8_t longname[DNAME_MAXLEN];
    size_t p = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t l = i < 3 ? 63 : 60;
        longname[p++] = l;
        memset(longname + p, 'a', l);
        p += l;
    }
    longname[p++] = 0; /* 254 bytes: "\000." would make 256 */
    assert_int_equal(dnssec_nsec_rdata(longname, NULL, 0, true, out, sizeof(out)), -ENOSPC);
}

/* A small zone with its DNSKEYs, signed ahead; then per-query signatures through the cache. */
static const uint8_t SOA_RD[] = "\2ns\7example\4test\0\4host\7example\4test\0"
                                "\0\0\0\1\0\0\x0e\x10\0\0\x07\x08\0\x09\x3a\x80\0\0\x0e\x10";

static zone_t *build(dnssec_zone_t *dz)
{
    zone_builder_t *b = zone_builder_new(ORIGIN, "test");
    uint8_t keys[4096];
    int kl = dnssec_zone_dnskeys(dz, keys, sizeof(keys));
    assert_true(kl > 0);
    assert_int_equal(zone_builder_set_dnssec(b, keys, (size_t)kl, 0), 0);
    assert_int_equal(
        zone_builder_add(b, ORIGIN, WIRE_T_SOA, 1, 3600, SOA_RD, sizeof(SOA_RD) - 1, NULL, 0), 0);
    assert_int_equal(zone_builder_add(b, ORIGIN, WIRE_T_NS, 1, 3600,
                                      (const uint8_t *)"\2ns\7example\4test", 17, NULL, 0),
                     0);
    /* an RRSIG from the source is dropped: tern signs */
    uint8_t junk[40] = {0, 1, 13, 2};
    assert_int_equal(
        zone_builder_add(b, ORIGIN, WIRE_T_RRSIG, 1, 3600, junk, sizeof(junk), NULL, 0), 0);
    assert_int_equal(zone_builder_dnssec_dropped(b), 1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(zone_builder_add(b, (const uint8_t *)"\3www\7example\4test", WIRE_T_A, 1,
                                          300, THREE_A + 2 + 6 * i, 4, NULL, 0),
                         0);
    zone_t *z = NULL;
    char err[256];
    if (zone_builder_finish(b, &z, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    return z;
}

static void test_zone_and_cache(void **state)
{
    (void)state;
    dnssec_key_t *keys[2] = {gen(DNSSEC_ALG_ECDSAP256SHA256, true),
                             gen(DNSSEC_ALG_ECDSAP256SHA256, false)};
    const dnssec_key_t *ksk = keys[0], *zsk = keys[1];
    dnssec_zone_t *dz = NULL;
    char err[256];
    if (dnssec_zone_new(ORIGIN, keys, 2, 1, NULL, &dz, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_ptr_equal(dz->zsk[0], zsk);
    zone_t *z = build(dz);
    uint32_t now = (uint32_t)time(NULL);
    dnssec_sigs_t *old = NULL;
    if (dnssec_zone_sign(dz, z, now, &old, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_null(old);
    assert_false(dnssec_zone_due(dz, now));
    assert_true(dnssec_zone_due(dz, now + DNSSEC_LIFETIME_DEFAULT - DNSSEC_REFRESH_DEFAULT));

    /* DNSKEY by the KSK, SOA (and the negative SOA) and NS by the ZSK */
    const dnssec_sigs_t *sg = dnssec_zone_sigs(dz);
    const zone_node_t *apex = z->apex_node;
    uint16_t n;
    const zone_rrset_t *dnskey = zone_node_rrset(apex, WIRE_T_DNSKEY);
    assert_non_null(dnskey);
    assert_int_equal(dnskey->count, 2);
    const uint8_t *sig = dnssec_static(sg, z, dnskey, &n);
    assert_non_null(sig);
    assert_int_equal(n, 1);
    assert_int_equal(verify(ksk, ORIGIN, WIRE_T_DNSKEY, dnskey->ttl, 2, dnskey->rdata, NULL,
                            sig + 2, (size_t)(sig[0] << 8 | sig[1])),
                     LDNS_STATUS_OK);
    const uint8_t *soasig = dnssec_static(sg, z, z->soa, &n);
    assert_non_null(soasig);
    assert_int_equal(verify(zsk, ORIGIN, WIRE_T_SOA, 3600, 1, z->soa->rdata, NULL, soasig + 2,
                            (size_t)(soasig[0] << 8 | soasig[1])),
                     LDNS_STATUS_OK);
    assert_ptr_equal(dnssec_static(sg, z, z->neg_soa, &n), soasig);
    const zone_node_t *www = zone_find_node(z, (const uint8_t *)"\3www\7example\4test", 18,
                                            dname_hash((const uint8_t *)"\3www\7example\4test"));
    assert_non_null(www);
    const zone_rrset_t *a = zone_node_rrset(www, WIRE_T_A);
    assert_non_null(dnssec_static(sg, z, a, &n));
    assert_null(zone_node_rrset(apex, WIRE_T_RRSIG)); /* the source's RRSIG is gone */

    /* per query: a subset, then the same subset in another order is a hit */
    dnssec_worker_t *w = dnssec_worker_new(0, 64);
    assert_non_null(w);
    uint8_t out[DNSSEC_RRSIG_MAX];
    const uint32_t o1[2] = {0, 6}, o2[2] = {6, 0}, o3[1] = {12};
    int len = dnssec_online(w, dz, 0, z, OWNER_MIXED, 3, WIRE_T_A, 300, 2, a->rdata, o1, now, out);
    assert_true(len > 0);
    assert_int_equal(verify(zsk, OWNER_MIXED, WIRE_T_A, 300, 2, a->rdata, o1, out, (size_t)len),
                     LDNS_STATUS_OK);
    uint8_t again[DNSSEC_RRSIG_MAX];
    int len2 = dnssec_online(w, dz, 0, z, (const uint8_t *)"\3www\7example\4test", 3, WIRE_T_A, 300,
                             2, a->rdata, o2, now + 60, again);
    assert_int_equal(len2, len);
    assert_memory_equal(again, out, (size_t)len); /* the cached one */
    dnssec_worker_stats_t st;
    dnssec_worker_stats(w, &st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.sigs, 1);
    /* another subset: a miss */
    len = dnssec_online(w, dz, 0, z, OWNER_MIXED, 3, WIRE_T_A, 300, 1, a->rdata, o3, now, out);
    assert_int_equal(verify(zsk, OWNER_MIXED, WIRE_T_A, 300, 1, a->rdata, o3, out, (size_t)len),
                     LDNS_STATUS_OK);
    /* close to its expiry the cached one is made again */
    len = dnssec_online(w, dz, 0, z, OWNER_MIXED, 3, WIRE_T_A, 300, 2, a->rdata, o1,
                        now + DNSSEC_LIFETIME_DEFAULT - DNSSEC_REFRESH_DEFAULT, out);
    dnssec_worker_stats(w, &st);
    assert_int_equal(st.misses, 3);
    /* eviction: a cache of one set of 4 holds 4 subsets; a 5th pushes out the oldest */
    dnssec_worker_t *w4 = dnssec_worker_new(0, 4);
    assert_non_null(w4);
    const uint32_t sub[5][2] = {{0, 6}, {0, 12}, {6, 12}, {0, 0}, {6, 6}};
    const uint16_t cnt[5] = {2, 2, 2, 1, 1};
    for (int i = 0; i < 5; i++)
        assert_true(dnssec_online(w4, dz, 0, z, OWNER_MIXED, 3, WIRE_T_A, 300, cnt[i], a->rdata,
                                  sub[i], now + (uint32_t)i, out) > 0);
    dnssec_worker_stats(w4, &st);
    assert_int_equal(st.misses, 5);
    assert_true(dnssec_online(w4, dz, 0, z, OWNER_MIXED, 3, WIRE_T_A, 300, 1, a->rdata, sub[4], now,
                              out) > 0); /* the newest: still there */
    assert_true(dnssec_online(w4, dz, 0, z, OWNER_MIXED, 3, WIRE_T_A, 300, 2, a->rdata, sub[0], now,
                              out) > 0); /* the oldest: gone */
    dnssec_worker_stats(w4, &st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 6);
    dnssec_worker_free(w4);
    /* a worker beyond the zone's contexts fails, counted */
    dnssec_worker_t *w9 = dnssec_worker_new(9, 64);
    assert_true(
        dnssec_online(w9, dz, 0, z, OWNER_MIXED, 3, WIRE_T_A, 300, 1, a->rdata, o3, now, out) < 0);
    dnssec_worker_stats(w9, &st);
    assert_int_equal(st.fails, 1);
    /* an NSEC made per query is keyed by its content */
    uint8_t nsec[2 + DNSSEC_NSEC_MAX];
    int nl = dnssec_nsec_rdata(OWNER_MIXED, NULL, 0, true, nsec + 2, sizeof(nsec) - 2);
    nsec[0] = (uint8_t)(nl >> 8);
    nsec[1] = (uint8_t)nl;
    len = dnssec_online(w, dz, 0, z, OWNER_MIXED, 3, WIRE_T_NSEC, 3600, 1, nsec, NULL, now, out);
    assert_int_equal(verify(zsk, OWNER_MIXED, WIRE_T_NSEC, 3600, 1, nsec, NULL, out, (size_t)len),
                     LDNS_STATUS_OK);
    const uint16_t at[] = {WIRE_T_A};
    nl = dnssec_nsec_rdata(OWNER_MIXED, at, 1, false, nsec + 2, sizeof(nsec) - 2);
    nsec[0] = (uint8_t)(nl >> 8);
    nsec[1] = (uint8_t)nl;
    len = dnssec_online(w, dz, 0, z, OWNER_MIXED, 3, WIRE_T_NSEC, 3600, 1, nsec, NULL, now, out);
    assert_int_equal(verify(zsk, OWNER_MIXED, WIRE_T_NSEC, 3600, 1, nsec, NULL, out, (size_t)len),
                     LDNS_STATUS_OK);

    /* a new version of the zone (another signing state): nothing cached applies */
    dnssec_worker_stats(w, &st);
    uint64_t misses = st.misses;
    dnssec_worker_free(w9);
    dnssec_worker_free(w);
    /* a refresh replaces the set and hands back the old one */
    if (dnssec_zone_sign(dz, z, now + 86400, &old, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_non_null(old);
    assert_ptr_not_equal(old, dnssec_zone_sigs(dz));
    assert_true(dnssec_zone_sigs(dz)->inception > old->inception);
    dnssec_sigs_free(old);
    (void)misses;
    z->dnssec = dz;
    z->dnssec_free = dnssec_zone_free;
    zone_free(z);
}

static void test_zone_errors(void **state)
{
    (void)state;
    char err[256];
    dnssec_zone_t *dz = NULL;
    /* no key */
    assert_true(dnssec_zone_new(ORIGIN, NULL, 0, 1, NULL, &dz, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "no key"));
    /* two algorithms */
    dnssec_key_t *mix[2] = {gen(DNSSEC_ALG_ECDSAP256SHA256, true), gen(DNSSEC_ALG_ED25519, false)};
    assert_true(dnssec_zone_new(ORIGIN, mix, 2, 1, NULL, &dz, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "one algorithm per zone"));
    /* a key of another zone */
    dnssec_key_t *other = NULL;
    assert_int_equal(dnssec_key_generate((const uint8_t *)"\5other\4test", 13, true, 0, &other, err,
                                         sizeof(err)),
                     0);
    dnssec_key_t *ks[1] = {other};
    assert_true(dnssec_zone_new(ORIGIN, ks, 1, 1, NULL, &dz, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "belongs to another zone"));
    /* refresh not shorter than the lifetime */
    dnssec_key_t *one[1] = {gen(DNSSEC_ALG_ECDSAP256SHA256, true)};
    const dnssec_policy_t bad = {.lifetime = 3600, .refresh = 7200};
    assert_true(dnssec_zone_new(ORIGIN, one, 1, 1, &bad, &dz, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "must be shorter"));
    /* a single key signs everything (a combined signing key) */
    dnssec_key_t *csk[1] = {gen(DNSSEC_ALG_ECDSAP256SHA256, true)};
    assert_int_equal(dnssec_zone_new(ORIGIN, csk, 1, 2, NULL, &dz, err, sizeof(err)), 0);
    assert_ptr_equal(dz->zsk[0], csk[0]);
    assert_int_equal(dz->nksk, 1);
    dnssec_zone_free(dz);
}

int main(void)
{
    (void)dnssec_mem_install();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sign_ecdsa),  cmocka_unit_test(test_sign_ed25519),
        cmocka_unit_test(test_sign_rsa),    cmocka_unit_test(test_no_alloc),
        cmocka_unit_test(test_nsec_rdata),  cmocka_unit_test(test_zone_and_cache),
        cmocka_unit_test(test_zone_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
