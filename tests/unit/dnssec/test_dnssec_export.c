/*
 * test_dnssec_export.c — the signed zone secondaries get (dnssec_export.h): canonical order
 * (RFC 4034 §6.1's own example), the NSEC chain over a zone with a wildcard, empty
 * non-terminals, a delegation with DS and glue, and a steered RRset; every RRSIG of the export
 * checked by ldns; the sets in the order the IXFR diff merges them by; a new version taking
 * over the signatures of what did not change, and only while they are not due.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tern/dnssec/dnssec_export.h"
#include "tern/dnssec/dnssec_key.h"
#include "tern/dnssec/dnssec_setup.h"
#include "tern/dnssec/dnssec_sign.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_builder.h"

#include "ldns_verify.h"

static const uint8_t ORIGIN[] = "\7example\4test";

static void test_name_order(void **state)
{
    (void)state;
    /* RFC 4034 §6.1's list, in canonical order (lowercased, as zones hold names) */
    static const char *const names[] = {
        "\7example",        "\1a\7example",       "\10yljkjljk\1a\7example",
        "\1z\1a\7example",  "\4zabc\1a\7example", "\1z\7example",
        "\1\1\1z\7example", "\1*\1z\7example",    "\1\200\1z\7example",
    };
    size_t n = sizeof(names) / sizeof(names[0]);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < n; k++) {
            int c = dnssec_export_name_cmp((const uint8_t *)names[i], (const uint8_t *)names[k]);
            if (i < k)
                assert_true(c < 0);
            else if (i > k)
                assert_true(c > 0);
            else
                assert_int_equal(c, 0);
        }
    /* the root sorts before everything */
    assert_true(dnssec_export_name_cmp((const uint8_t *)"", (const uint8_t *)"\7example") < 0);
}

static dnssec_key_t *gen(bool ksk)
{
    dnssec_key_t *k = NULL;
    char err[256] = "";
    if (dnssec_key_generate(ORIGIN, DNSSEC_ALG_ECDSAP256SHA256, ksk, 0, &k, err, sizeof(err)) < 0)
        fail_msg("generate: %s", err);
    return k;
}

static const uint8_t SOA_RD[] = "\2ns\7example\4test\0\4host\7example\4test\0"
                                "\0\0\0\1\0\0\x0e\x10\0\0\x07\x08\0\x09\x3a\x80\0\0\x00\x3c";

#define N(s) ((const uint8_t *)(s))

static void add(zone_builder_t *b, const char *owner, uint16_t type, uint32_t ttl, const void *rd,
                size_t len)
{
    if (zone_builder_add(b, N(owner), type, 1, ttl, rd, (uint16_t)len, NULL, 0) < 0)
        fail_msg("add: %s", zone_builder_error(b));
}

/* apex (SOA NS MX DNSKEY), www (A, AAAA), *.wild TXT, a.b.c TXT (b.c and c are empty
 * non-terminals), sub NS + DS with glue ns.sub A, steered (three weighted A). */
static zone_t *build_v(dnssec_zone_t *dz, uint8_t serial, uint8_t www, bool extra);

static zone_t *build(dnssec_zone_t *dz)
{
    return build_v(dz, 1, 3, false);
}

/* The zone at SOA serial `serial`, www's A 192.0.2.<www>, with extra: one more name (zz). */
static zone_t *build_v(dnssec_zone_t *dz, uint8_t serial, uint8_t www, bool extra)
{
    zone_builder_t *b = zone_builder_new(ORIGIN, "test");
    uint8_t keys[4096];
    int kl = dnssec_zone_dnskeys(dz, keys, sizeof(keys));
    assert_true(kl > 0);
    assert_int_equal(zone_builder_set_dnssec(b, keys, (size_t)kl, 0), 0);
    uint8_t soa[sizeof(SOA_RD) - 1];
    memcpy(soa, SOA_RD, sizeof(soa));
    soa[sizeof(soa) - 20 + 3] = serial;
    add(b, "\7example\4test", WIRE_T_SOA, 3600, soa, sizeof(soa));
    if (extra)
        add(b, "\2zz\7example\4test", WIRE_T_TXT, 300, "\2zz", 3);
    add(b, "\7example\4test", WIRE_T_NS, 3600, "\2ns\7example\4test", 17);
    add(b, "\7example\4test", WIRE_T_MX, 3600, "\0\12\2mx\7example\4test", 19);
    add(b, "\2ns\7example\4test", WIRE_T_A, 3600, "\300\0\2\1", 4);
    const uint8_t wa[4] = {192, 0, 2, www};
    add(b, "\3www\7example\4test", WIRE_T_A, 600, wa, 4);
    add(b, "\3www\7example\4test", WIRE_T_AAAA, 300, "\x20\1\xd\xb8\0\0\0\0\0\0\0\0\0\0\0\3", 16);
    add(b, "\1*\4wild\7example\4test", WIRE_T_TXT, 300, "\4wild", 5);
    add(b, "\1a\1b\1c\7example\4test", WIRE_T_TXT, 300, "\4deep", 5);
    add(b, "\3sub\7example\4test", WIRE_T_NS, 300, "\2ns\3sub\7example\4test", 21);
    static const uint8_t ds[] = {0x30, 0x39, 13, 2, [4 ... 35] = 0xab};
    add(b, "\3sub\7example\4test", WIRE_T_DS, 300, ds, sizeof(ds));
    add(b, "\2ns\3sub\7example\4test", WIRE_T_A, 300, "\300\0\2\11", 4);
    for (unsigned i = 0; i < 3; i++) {
        uint8_t a[4] = {192, 0, 2, (uint8_t)(30 + i)};
        zone_geo_meta_t m = {.weight = i + 1};
        assert_int_equal(
            zone_builder_add_geo(b, N("\7steered\7example\4test"), WIRE_T_A, 60, a, 4, &m, NULL, 0),
            0);
    }
    zone_geo_policy_t pol = {.count = ZONE_GEO_COUNT_SINGLE, .order = ZONE_GEO_ORDER_WEIGHTED};
    assert_int_equal(zone_builder_set_policy(b, N("\7steered\7example\4test"), WIRE_T_A, &pol), 0);
    zone_t *z = NULL;
    char err[256];
    if (zone_builder_finish(b, &z, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    return z;
}

/* The NSEC owners in chain order, and what each must list. */
static const struct {
    const char *owner, *next;
    uint16_t types[8];
} CHAIN[] = {
    {"\7example\4test",
     "\1a\1b\1c\7example\4test",
     {WIRE_T_NS, WIRE_T_SOA, WIRE_T_MX, WIRE_T_RRSIG, WIRE_T_NSEC, WIRE_T_DNSKEY}},
    {"\1a\1b\1c\7example\4test", "\2ns\7example\4test", {WIRE_T_TXT, WIRE_T_RRSIG, WIRE_T_NSEC}},
    {"\2ns\7example\4test", "\7steered\7example\4test", {WIRE_T_A, WIRE_T_RRSIG, WIRE_T_NSEC}},
    {"\7steered\7example\4test", "\3sub\7example\4test", {WIRE_T_A, WIRE_T_RRSIG, WIRE_T_NSEC}},
    /* the delegation: NS and DS, not the glue's A (RFC 4035 §2.3) */
    {"\3sub\7example\4test",
     "\1*\4wild\7example\4test",
     {WIRE_T_NS, WIRE_T_DS, WIRE_T_RRSIG, WIRE_T_NSEC}},
    {"\1*\4wild\7example\4test", "\3www\7example\4test", {WIRE_T_TXT, WIRE_T_RRSIG, WIRE_T_NSEC}},
    {"\3www\7example\4test", "\7example\4test", {WIRE_T_A, WIRE_T_AAAA, WIRE_T_RRSIG, WIRE_T_NSEC}},
};

static void check_nsec(const dnssec_export_set_t *s, unsigned i)
{
    assert_int_equal(s->count, 1);
    assert_int_equal(s->ttl, 60); /* min(SOA TTL 3600, MINIMUM 60) */
    const uint8_t *rd = s->rdata + 2;
    size_t rdlen = (size_t)s->rdata[0] << 8 | s->rdata[1];
    size_t nl = dname_len(N(CHAIN[i].next));
    assert_memory_equal(rd, CHAIN[i].next, nl);
    unsigned nt = 0;
    while (nt < 8 && CHAIN[i].types[nt])
        nt++;
    uint8_t want[64];
    int wl = dnssec_nsec_bitmap(CHAIN[i].types, nt, NULL, 0, want, sizeof(want));
    assert_true(wl > 0);
    assert_int_equal(rdlen - nl, (size_t)wl);
    assert_memory_equal(rd + nl, want, (size_t)wl);
}

/* What RRSIG group s of an export covers: the zone's RRset at its node *n (returned), or the
 * NSEC after it in the export's list (NULL returned); its RRs, count and TTL. */
static const zone_rrset_t *covered(const zone_t *z, const dnssec_export_set_t *s,
                                   const zone_node_t **n, const uint8_t **seq, uint16_t *count,
                                   uint32_t *ttl)
{
    *n = zone_find_node(z, s->owner, s->owner_len, dname_hash(s->owner));
    assert_non_null(*n);
    if (s->covered == WIRE_T_NSEC) {
        const dnssec_export_set_t *x = s + 1;
        while (x->type != WIRE_T_NSEC)
            x++;
        *seq = x->rdata, *count = 1, *ttl = x->ttl;
        return NULL;
    }
    const zone_rrset_t *rs = zone_node_rrset(*n, s->covered);
    assert_non_null(rs);
    *seq = rs->rdata, *count = rs->count, *ttl = rs->ttl;
    return rs;
}

static void test_export(void **state)
{
    (void)state;
    dnssec_key_t *keys[2] = {gen(true), gen(false)};
    const dnssec_key_t *ksk = keys[0], *zsk = keys[1];
    dnssec_policy_t pol = {.export = true};
    dnssec_zone_t *dz = NULL;
    char err[256];
    if (dnssec_zone_new(ORIGIN, keys, 2, 1, &pol, &dz, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    zone_t *z = build(dz);
    if (dnssec_setup_attach(z, dz, NULL, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    const dnssec_export_t *e = dz->export;
    assert_non_null(e);
    assert_int_equal(e->names, sizeof(CHAIN) / sizeof(CHAIN[0]));
    /* the steered A (signed now), each NSEC: made for the export */
    assert_int_equal(e->made, 1 + e->names);

    unsigned nsec = 0, sigs = 0;
    bool steered_signed = false, glue_signed = false, sub_ns_signed = false;
    for (size_t i = 0; i < e->count; i++) {
        const dnssec_export_set_t *s = &e->sets[i];
        if (i > 0)
            assert_true(dnssec_export_set_cmp(&e->sets[i - 1], s) < 0);
        if (s->type == WIRE_T_NSEC) {
            assert_true(nsec < e->names);
            assert_memory_equal(s->owner, CHAIN[nsec].owner, s->owner_len);
            check_nsec(s, nsec++);
            continue;
        }
        assert_int_equal(s->type, WIRE_T_RRSIG);
        const zone_node_t *n;
        const uint8_t *seq;
        uint16_t count;
        uint32_t ttl;
        const zone_rrset_t *rs = covered(z, s, &n, &seq, &count, &ttl);
        if (rs) {
            if (n->cut && s->covered == WIRE_T_NS)
                sub_ns_signed = true;
            if (zone_rrset_geo(z, rs)) {
                steered_signed = true;
                assert_int_equal(count, 3); /* every record, not a subset */
            }
        }
        if (dname_equal(s->owner, N("\2ns\3sub\7example\4test")))
            glue_signed = true;
        assert_int_equal(s->ttl, ttl); /* RFC 4034 §3: the TTL of what it covers */
        const uint8_t *p = s->rdata;
        for (unsigned k = 0; k < s->count; k++) {
            size_t len = (size_t)p[0] << 8 | p[1];
            const dnssec_key_t *k2 = s->covered == WIRE_T_DNSKEY ? ksk : zsk;
            assert_int_equal(verify(k2, s->owner, s->covered, ttl, count, seq, NULL, p + 2, len),
                             LDNS_STATUS_OK);
            p += 2 + len;
            sigs++;
        }
    }
    assert_int_equal(nsec, e->names);
    assert_true(steered_signed);
    assert_false(glue_signed);
    assert_false(sub_ns_signed);
    /* per name its RRSIGs and one NSEC; apex SOA NS MX DNSKEY NSEC, ns A, steered A, sub DS,
     * www A AAAA, wild TXT, a.b.c TXT, and an NSEC's at each of the 7 names */
    assert_int_equal(sigs, 4 + 1 + 1 + 1 + 2 + 1 + 1 + 7);
    assert_int_equal(e->records, sigs + nsec);
    zone_free(z);
}

/* The RRSIG RDATA sequence over type at owner in export e, or NULL. */
static const dnssec_export_set_t *sigs_of(const dnssec_export_t *e, const char *owner,
                                          uint16_t covered)
{
    for (size_t i = 0; i < e->count; i++)
        if (e->sets[i].type == WIRE_T_RRSIG && e->sets[i].covered == covered &&
            dname_equal(e->sets[i].owner, N(owner)))
            return &e->sets[i];
    return NULL;
}

static bool same_sigs(const dnssec_export_t *a, const dnssec_export_t *b, const char *owner,
                      uint16_t covered)
{
    const dnssec_export_set_t *x = sigs_of(a, owner, covered), *y = sigs_of(b, owner, covered);
    assert_non_null(x);
    assert_non_null(y);
    return x->rdata_len == y->rdata_len && memcmp(x->rdata, y->rdata, x->rdata_len) == 0;
}

static void test_reuse(void **state)
{
    (void)state;
    dnssec_key_t *keys[2] = {gen(true), gen(false)};
    char err[256];
    dnssec_policy_t pol = {.export = true};
    dnssec_zone_t *dz1 = NULL, *dz2 = NULL, *dz3 = NULL;
    if (dnssec_zone_new(ORIGIN, keys, 2, 1, &pol, &dz1, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    zone_t *z1 = build(dz1);
    if (dnssec_setup_attach(z1, dz1, NULL, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_int_equal(dnssec_zone_sigs(dz1)->reused, 0);

    /* v2: a new serial, www's address changed, a name added: the rest is taken over */
    /* the same keys for the next versions (each signing state owns its keys) */
    dnssec_key_t *k2[2] = {dnssec_key_dup(keys[0]), dnssec_key_dup(keys[1])};
    assert_non_null(k2[0]);
    assert_non_null(k2[1]);
    if (dnssec_zone_new(ORIGIN, k2, 2, 1, &pol, &dz2, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    zone_t *z2 = build_v(dz2, 2, 4, true);
    if (dnssec_setup_attach(z2, dz2, z1, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    const dnssec_sigs_t *s2 = dnssec_zone_sigs(dz2);
    /* made ahead: apex NS MX DNSKEY, ns A, www AAAA, wild TXT, a.b.c TXT, sub DS taken over;
     * SOA, www A and zz TXT made */
    assert_int_equal(s2->reused, 8);
    assert_int_equal(s2->made, 3);
    const dnssec_export_t *e1 = dz1->export, *e2 = dz2->export;
    /* the NSECs of the apex and a.b.c... unchanged but for www's neighbour: www's now points
     * at zz, zz's is new; the steered A is unchanged */
    assert_true(same_sigs(e1, e2, "\7steered\7example\4test", WIRE_T_A));
    assert_true(same_sigs(e1, e2, "\7example\4test", WIRE_T_NSEC));
    assert_true(same_sigs(e1, e2, "\7example\4test", WIRE_T_NS));
    assert_false(same_sigs(e1, e2, "\3www\7example\4test", WIRE_T_NSEC));
    assert_false(same_sigs(e1, e2, "\3www\7example\4test", WIRE_T_A));
    assert_false(same_sigs(e1, e2, "\7example\4test", WIRE_T_SOA));
    assert_true(same_sigs(e1, e2, "\3www\7example\4test", WIRE_T_AAAA));
    /* NSECs made: www's (new next) and zz's; the other 6 taken over with the steered A's */
    assert_int_equal(e2->made, 2);
    assert_int_equal(e2->reused, 6 + 1);

    /* v3 with a refresh window (20 days) wider than what remains of v2's (14 days less an
     * hour): all due, nothing is taken over */
    dnssec_policy_t wide = {.export = true, .lifetime = 30 * 86400, .refresh = 20 * 86400};
    dnssec_key_t *k3[2] = {dnssec_key_dup(keys[0]), dnssec_key_dup(keys[1])};
    if (dnssec_zone_new(ORIGIN, k3, 2, 1, &wide, &dz3, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    zone_t *z3 = build_v(dz3, 3, 4, true);
    if (dnssec_setup_attach(z3, dz3, z2, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_int_equal(dnssec_zone_sigs(dz3)->reused, 0);
    assert_int_equal(dz3->export->reused, 0);
    zone_free(z1);
    zone_free(z2);
    zone_free(z3);
}

/* Keys with roles (a managed zone mid-rollover): who is published, who signs what, the CDS and
 * CDNSKEY at the apex and the DNSKEY signers' signatures over them. */
static void test_roles(void **state)
{
    (void)state;
    dnssec_key_t *ksk = gen(true), *zold = gen(false), *znew = gen(false);
    dnssec_key_t *keys[3] = {ksk, zold, znew};
    /* copies for the states below (the first state, and the zone, own the originals) */
    dnssec_key_t *k2[2] = {dnssec_key_dup(ksk), dnssec_key_dup(zold)};
    dnssec_key_t *k3[2] = {dnssec_key_dup(ksk), dnssec_key_dup(zold)};
    dnssec_key_t *k4[2] = {dnssec_key_dup(ksk), dnssec_key_dup(zold)};
    uint8_t ds[64];
    int dsl = dnssec_key_ds(ksk, 2, ds, sizeof(ds));
    assert_true(dsl > 0);
    const uint8_t roles[3] = {DNSSEC_ROLE_PUBLISH | DNSSEC_ROLE_SIGN_DNSKEY | DNSSEC_ROLE_CDS,
                              DNSSEC_ROLE_PUBLISH | DNSSEC_ROLE_SIGN_ZONE, DNSSEC_ROLE_PUBLISH};
    dnssec_zone_t *dz = NULL;
    char err[256];
    if (dnssec_zone_new_roles(ORIGIN, keys, roles, 3, 2, false, 1, NULL, &dz, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_ptr_equal(dz->zsk[0], zold);
    assert_int_equal(dz->nksk, 1);
    uint8_t blob[4096];
    int bl = dnssec_zone_dnskeys(dz, blob, sizeof(blob));
    assert_true(bl > 0);
    /* three DNSKEYs, then the KSK's CDS (SHA-256) and CDNSKEY */
    unsigned counts[65536 / 8] = {0};
    for (int pos = 0; pos < bl;) {
        uint16_t type = (uint16_t)(blob[pos] << 8 | blob[pos + 1]);
        uint16_t len = (uint16_t)(blob[pos + 2] << 8 | blob[pos + 3]);
        if (type == WIRE_T_CDS)
            assert_memory_equal(blob + pos + 4, ds, (size_t)dsl);
        if (type == WIRE_T_CDNSKEY)
            assert_memory_equal(blob + pos + 4, ksk->rdata, ksk->rdlen);
        counts[type % (sizeof(counts) / sizeof(counts[0]))]++;
        pos += 4 + len;
    }
    assert_int_equal(counts[WIRE_T_DNSKEY], 3);
    assert_int_equal(counts[WIRE_T_CDS], 1);
    assert_int_equal(counts[WIRE_T_CDNSKEY], 1);
    /* a zone built with them: CDS and CDNSKEY are signed by the KSK, the rest by the old ZSK */
    zone_t *z = build(dz);
    if (dnssec_setup_attach(z, dz, NULL, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    const dnssec_sigs_t *sg = dnssec_zone_sigs(dz);
    static const uint16_t types[] = {WIRE_T_CDS, WIRE_T_CDNSKEY, WIRE_T_DNSKEY, WIRE_T_SOA};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        const zone_rrset_t *rs = zone_node_rrset(z->apex_node, types[i]);
        assert_non_null(rs);
        uint16_t n = 0;
        const uint8_t *sig = dnssec_static(sg, z, rs, &n);
        assert_non_null(sig);
        assert_int_equal(n, 1);
        const dnssec_key_t *by = types[i] == WIRE_T_SOA ? zold : ksk;
        assert_int_equal(verify(by, ORIGIN, types[i], rs->ttl, rs->count, rs->rdata, NULL, sig + 2,
                                (size_t)(sig[0] << 8 | sig[1])),
                         LDNS_STATUS_OK);
    }
    zone_free(z);

    /* two zone signers of one algorithm (a CSK rollover: old and new CSK sign everything) */
    const uint8_t two[2] = {DNSSEC_ROLE_PUBLISH | DNSSEC_ROLE_SIGN_DNSKEY | DNSSEC_ROLE_SIGN_ZONE,
                            DNSSEC_ROLE_PUBLISH | DNSSEC_ROLE_SIGN_ZONE};
    if (dnssec_zone_new_roles(ORIGIN, k2, two, 2, 0, false, 1, NULL, &dz, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_int_equal(dz->nzsk, 2);
    dnssec_zone_free(dz);
    /* refused: a CDS for a key not published */
    const uint8_t hidden[2] = {DNSSEC_ROLE_SIGN_DNSKEY | DNSSEC_ROLE_CDS,
                               DNSSEC_ROLE_PUBLISH | DNSSEC_ROLE_SIGN_ZONE};
    assert_true(
        dnssec_zone_new_roles(ORIGIN, k3, hidden, 2, 2, false, 1, NULL, &dz, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "offered to the parent (CDS) but not published"));
    /* CDS DELETE (RFC 8078): "0 0 0 00" and "0 3 0 AA==" instead of the keys' */
    const uint8_t r4[2] = {DNSSEC_ROLE_PUBLISH | DNSSEC_ROLE_SIGN_DNSKEY | DNSSEC_ROLE_CDS,
                           DNSSEC_ROLE_PUBLISH | DNSSEC_ROLE_SIGN_ZONE};
    if (dnssec_zone_new_roles(ORIGIN, k4, r4, 2, 2, true, 1, NULL, &dz, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    bl = dnssec_zone_dnskeys(dz, blob, sizeof(blob));
    static const uint8_t del[] = {0, WIRE_T_CDS,     0, 5, 0, 0, 0, 0, 0,
                                  0, WIRE_T_CDNSKEY, 0, 5, 0, 0, 3, 0, 0};
    assert_true(bl > (int)sizeof(del));
    assert_memory_equal(blob + bl - sizeof(del), del, sizeof(del));
    dnssec_zone_free(dz);
}

static dnssec_key_t *gen_alg(uint8_t alg, bool ksk)
{
    dnssec_key_t *k = NULL;
    char err[256] = "";
    if (dnssec_key_generate(ORIGIN, alg, ksk, 0, &k, err, sizeof(err)) < 0)
        fail_msg("generate: %s", err);
    return k;
}

/* Every RRSIG of rdata sequence p (count of them, over RRset seq/n/ttl of type at owner) checked
 * by ldns against the key of its algorithm (ksk for DNSKEY, else zsk); which algorithms signed. */
static unsigned verify_each(const uint8_t *p, unsigned count, dnssec_key_t *const ksk[2],
                            dnssec_key_t *const zsk[2], const uint8_t *owner, uint16_t type,
                            uint32_t ttl, uint16_t n, const uint8_t *seq, const uint32_t *offs)
{
    unsigned algs = 0;
    for (unsigned k = 0; k < count; k++) {
        size_t len = (size_t)p[0] << 8 | p[1];
        unsigned i = p[2 + 2] == DNSSEC_ALG_ED25519;
        const dnssec_key_t *by = dnssec_ksk_signed(type) ? ksk[i] : zsk[i];
        assert_int_equal(verify(by, owner, type, ttl, n, seq, offs, p + 2, len), LDNS_STATUS_OK);
        algs |= 1u << i;
        p += 2 + len;
    }
    return algs;
}

/* An algorithm rollover's middle (RFC 6781 §4.1.4): keys of algorithms 13 and 15 all published,
 * each algorithm signing DNSKEY and the zone. Every RRset ahead, in the export and per query
 * carries one RRSIG of each algorithm; a published algorithm that signs nothing is refused. */
static void test_two_algorithms(void **state)
{
    (void)state;
    dnssec_key_t *ksk[2] = {gen_alg(DNSSEC_ALG_ECDSAP256SHA256, true),
                            gen_alg(DNSSEC_ALG_ED25519, true)};
    dnssec_key_t *zsk[2] = {gen_alg(DNSSEC_ALG_ECDSAP256SHA256, false),
                            gen_alg(DNSSEC_ALG_ED25519, false)};
    dnssec_key_t *keys[4] = {ksk[0], zsk[0], ksk[1], zsk[1]};
    dnssec_key_t *lone[3] = {dnssec_key_dup(ksk[0]), dnssec_key_dup(zsk[0]),
                             dnssec_key_dup(ksk[1])};
    dnssec_key_t *pre[3] = {dnssec_key_dup(ksk[0]), dnssec_key_dup(zsk[0]), dnssec_key_dup(zsk[1])};
    const uint8_t P = DNSSEC_ROLE_PUBLISH, SD = DNSSEC_ROLE_SIGN_DNSKEY, SZ = DNSSEC_ROLE_SIGN_ZONE;
    const uint8_t roles[4] = {P | SD, P | SZ, P | SD, P | SZ};
    dnssec_policy_t pol = {.export = true};
    dnssec_zone_t *dz = NULL;
    char err[256];
    if (dnssec_zone_new_roles(ORIGIN, keys, roles, 4, 2, false, 1, &pol, &dz, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_int_equal(dz->nzsk, 2);
    assert_int_equal(dz->nksk, 2);
    zone_t *z = build(dz);
    if (dnssec_setup_attach(z, dz, NULL, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    /* ahead: the SOA and DNSKEY */
    const dnssec_sigs_t *sg = dnssec_zone_sigs(dz);
    static const uint16_t types[] = {WIRE_T_SOA, WIRE_T_DNSKEY, WIRE_T_MX};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        const zone_rrset_t *rs = zone_node_rrset(z->apex_node, types[i]);
        uint16_t n = 0;
        const uint8_t *sig = dnssec_static(sg, z, rs, &n);
        assert_non_null(sig);
        assert_int_equal(n, 2);
        assert_int_equal(
            verify_each(sig, n, ksk, zsk, ORIGIN, types[i], rs->ttl, rs->count, rs->rdata, NULL),
            3);
    }
    /* the export: every RRSIG group, the NSECs' and the steered RRset's (signed for it) too */
    const dnssec_export_t *e = dz->export;
    for (size_t i = 0; i < e->count; i++) {
        const dnssec_export_set_t *s = &e->sets[i];
        if (s->type != WIRE_T_RRSIG)
            continue;
        assert_int_equal(s->count, 2);
        const zone_node_t *n;
        const uint8_t *seq;
        uint16_t count;
        uint32_t ttl;
        (void)covered(z, s, &n, &seq, &count, &ttl);
        assert_int_equal(
            verify_each(s->rdata, s->count, ksk, zsk, s->owner, s->covered, ttl, count, seq, NULL),
            3);
    }
    /* per query: a steered subset, once per zone signer, each from its key */
    const zone_node_t *st =
        zone_find_node(z, N("steeredexampletest"), 22, dname_hash(N("steeredexampletest")));
    const zone_rrset_t *a = zone_node_rrset(st, WIRE_T_A);
    dnssec_worker_t *w = dnssec_worker_new(0, 64);
    const uint32_t offs[1] = {6};
    uint8_t out[2 + DNSSEC_RRSIG_MAX];
    for (unsigned j = 0; j < 2; j++) {
        int len = dnssec_online(w, dz, j, z, st->name, 3, WIRE_T_A, 60, 1, a->rdata, offs,
                                (uint32_t)time(NULL), out + 2);
        assert_true(len > 0);
        out[0] = (uint8_t)(len >> 8), out[1] = (uint8_t)len;
        assert_int_equal(verify_each(out, 1, ksk, zsk, st->name, WIRE_T_A, 60, 1, a->rdata, offs),
                         1u << j);
    }
    dnssec_worker_free(w);
    zone_free(z);

    /* refused: algorithm 15 published (its KSK) but nothing of it signs the zone */
    const uint8_t r3[3] = {P | SD, P | SZ, P | SD};
    assert_true(
        dnssec_zone_new_roles(ORIGIN, lone, r3, 3, 0, false, 1, NULL, &dz, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "no key of its algorithm signs the zone"));
    /* pre-active: the new algorithm signs before it is published (validators ignore it) */
    const uint8_t rp[3] = {P | SD, P | SZ, SZ};
    if (dnssec_zone_new_roles(ORIGIN, pre, rp, 3, 0, false, 1, NULL, &dz, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_int_equal(dz->nzsk, 2);
    dnssec_zone_free(dz);
}

int main(void)
{
    dnssec_mem_install();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_order),     cmocka_unit_test(test_export),
        cmocka_unit_test(test_reuse),          cmocka_unit_test(test_roles),
        cmocka_unit_test(test_two_algorithms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
