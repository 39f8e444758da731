/*
 * test_dnssec_key.c — DNSSEC keys as operators' tools write them: BIND dnssec-keygen pairs
 * (ZSK, KSK, with a TTL) and ldns-keygen pairs for algorithms 8, 13 and 15, read from files and
 * as redins' strings (real newlines or the two characters "\n"). Their tags must be the ones in
 * the file names and their DS records what `dnssec-dsfromkey -2` / `-a SHA-384` printed for them
 * (recorded below). Refused, each with one line naming where and what: a mismatched pair, RSASHA1
 * keys (algorithms 5 and 7), another zone, bad base64 and broken private texts. Generated keys of
 * each algorithm go through write and load unchanged; every key signs bytes that verify with the
 * public key rebuilt here, independently, from its DNSKEY RDATA.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include "tern/common/err.h"
#include "tern/dnssec/dnssec_key.h"
#include "test_util.h"

static const uint8_t ZONE[] = "\7example\4test";
static const uint8_t ZONE_UPPER[] = "\7EXAMPLE\4Test";

/* The fixtures in tests/data/dnssec, with the DS records dnssec-dsfromkey 9.18 printed for them
 * (digest types 2 and 4) when they were made. */
typedef struct fixture {
    const char *stem;
    uint8_t alg;
    uint16_t flags, tag, bits;
    uint32_t ttl;
    const char *ds2, *ds4;
} fixture_t;

static const fixture_t fixtures[] = {
    {"Kexample.test.+013+63675", 13, 256, 63675, 256, 0,
     "example.test. IN DS 63675 13 2 "
     "B2F748405780CECF41ED40CD117EDEAA435FA66E0AE52279F9BF1E2548576E49",
     "example.test. IN DS 63675 13 4 "
     "9470989D527C7C946D418476456FA5778ACD622BFA4D8F76A971FDFF6707290515B4C9606F6C1BD606E9BCD0D2F5"
     "3E12"},
    {"Kexample.test.+013+09564", 13, 257, 9564, 256, 0,
     "example.test. IN DS 9564 13 2 "
     "32C3F59B03B71F9A6FB3A7F09FEB9192513369A1A8E99DB296955B9D7AD46695",
     "example.test. IN DS 9564 13 4 "
     "8E1C1A685422360F241EDA1ADC6767A65BBFE0B7D9CFF0DC03D0291F775360E911243AB0B9EFA660A68E16748C2F"
     "E900"},
    {"Kexample.test.+013+38510", 13, 257, 38510, 256, 3600,
     "example.test. IN DS 38510 13 2 "
     "5EEE3745396BF4560DC69B511566E5ADCB711CDEA33AAF93051CA846E8880922",
     "example.test. IN DS 38510 13 4 "
     "D1D6FCD671D7D23037AEFB64BE0D726477FA4914BB836C584A3F9A7E16FDB86ABA14A56F347D128C0DB025E12521"
     "9510"},
    {"Kexample.test.+015+38045", 15, 256, 38045, 256, 0,
     "example.test. IN DS 38045 15 2 "
     "C6F94E31AFE832608810720476E88B20F01CEA25A992875B1955EC8A5C723D5C",
     "example.test. IN DS 38045 15 4 "
     "9B2CB799E152DDC8E79263627F0320B653088ACEC9DB2E1F0FCB4B39E6E29BEE8919C13FD721291C164823C95DA5"
     "722B"},
    {"Kexample.test.+015+26230", 15, 257, 26230, 256, 0,
     "example.test. IN DS 26230 15 2 "
     "1278459BF0901B3EF057D8CF98D3CD63A6A7150695A5781BEC2D1C5D56AF9EDA",
     "example.test. IN DS 26230 15 4 "
     "F3CA50E999AADA2C7546BB5664590BBB3D3202905065F839F795B8B35752733A7A082C5DDDAD3AF03F506DE71D24"
     "5A1A"},
    {"Kexample.test.+008+12925", 8, 256, 12925, 2048, 0,
     "example.test. IN DS 12925 8 2 "
     "F490CA544B07F75F794D407DAB0B8799E6430F73A13A4B575EBA8EB2A41998CF",
     "example.test. IN DS 12925 8 4 "
     "F66A18E0FEE74872634B34F437A7B5A01C6530C031CE4C76801BDF24C079EC52529DAAE330BF0E260F67C6EEFA3A"
     "46E7"},
    {"Kexample.test.+008+08885", 8, 257, 8885, 2048, 0,
     "example.test. IN DS 8885 8 2 "
     "4333EF0433FC2B499190A70E09FC82915FB2CCBDB58277C861168A34E2B764A1",
     "example.test. IN DS 8885 8 4 "
     "2BEF52CED8EA05F090206243EA78D9F48CFBA0F012253A69C728E30F928AF738A6A8484AD934BB01EB63B1560501"
     "9FEE"},
    /* ldns-keygen: v1.2 private files, the key in one word and a comment after it */
    {"ldns/Kexample.test.+013+14071", 13, 256, 14071, 256, 0,
     "example.test. IN DS 14071 13 2 "
     "54B734A06D5B30AC9343862F42D195E291E443102F58D505B6766E99EFB31736",
     "example.test. IN DS 14071 13 4 "
     "BDF76F2EED65CF044ABCDE365E7B5A0795FF340E9BF02863E070CC209ECCE0A444288E338C120A3E7586FCB4CF8A"
     "FD93"},
    {"ldns/Kexample.test.+015+19058", 15, 257, 19058, 256, 0,
     "example.test. IN DS 19058 15 2 "
     "4B5F6F6FF73D7AFB3B094E41CE24E7F897A93AD52A4468822CE799E27CB02630",
     "example.test. IN DS 19058 15 4 "
     "C3CFAAE9932A406D9262E58C3BE52E4194B1E36E80B41A580972DEAA82DA1B957C75A741547302B3710191B58412"
     "CB95"},
    {"ldns/Kexample.test.+008+34528", 8, 256, 34528, 1024, 0,
     "example.test. IN DS 34528 8 2 "
     "C2DC462E33F8418CE32CC6DAF2D39ED9A074D69EE1B82121594338A74375209A",
     "example.test. IN DS 34528 8 4 "
     "A8E467E47D539EE6075108AA2DBA45CFE6D2E966B4DCB2C691242CCD72D9536BB116C3758141E54F1A389A3DA164"
     "0C7B"},
};

/* --- helpers */

static void data_path(char *out, size_t len, const char *name)
{
    const char *dir = getenv("TERN_TEST_DATA");
    snprintf(out, len, "%s/dnssec/%s", dir ? dir : "tests/data", name);
}

/* A fixture file's text (malloc'd). */
static char *slurp(const char *name)
{
    char path[512];
    data_path(path, sizeof(path), name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s", path);
    char *buf = calloc(1, 65536);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 65535, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* text with every newline written as the two characters "\n", as redins may store it. */
static char *escape_newlines(const char *text)
{
    char *o = calloc(1, strlen(text) * 2 + 1);
    assert_non_null(o);
    for (char *q = o; *text; text++) {
        if (*text == '\n') {
            *q++ = '\\';
            *q++ = 'n';
        } else {
            *q++ = *text;
        }
    }
    return o;
}

/* text with one occurrence of what replaced by with (malloc'd). */
static char *replace(const char *text, const char *what, const char *with)
{
    const char *at = strstr(text, what);
    if (!at)
        fail_msg("'%s' not in the text", what);
    size_t n = strlen(text) - strlen(what) + strlen(with);
    char *o = calloc(1, n + 1);
    assert_non_null(o);
    memcpy(o, text, (size_t)(at - text));
    strcat(o, with);
    strcat(o, at + strlen(what));
    return o;
}

static void expect_msg(const char *err, const char *want)
{
    if (!strstr(err, want))
        fail_msg("want '%s' in the message, got '%s'", want, err);
}

/* The public key of a DNSKEY RDATA as an EVP_PKEY, built here from RFC 3110 / 6605 / 8080
 * without the module's code: the oracle that a key's pkey is the pair of what it publishes. */
static EVP_PKEY *pub_from_rdata(const uint8_t *rd, size_t len)
{
    const uint8_t *key = rd + 4;
    size_t kl = len - 4;
    if (rd[3] == DNSSEC_ALG_ED25519)
        return EVP_PKEY_new_raw_public_key_ex(NULL, "ED25519", NULL, key, kl);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    BIGNUM *n = NULL, *e = NULL;
    const char *type = "EC";
    uint8_t pt[65];
    if (rd[3] == DNSSEC_ALG_ECDSAP256SHA256) {
        assert_int_equal(kl, 64);
        pt[0] = 4; /* uncompressed point */
        memcpy(pt + 1, key, 64);
        assert_true(
            OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0));
        assert_true(OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pt, 65));
    } else {
        size_t el = key[0], off = 1;
        if (el == 0) {
            el = (size_t)key[1] << 8 | key[2];
            off = 3;
        }
        e = BN_bin2bn(key + off, (int)el, NULL);
        n = BN_bin2bn(key + off + el, (int)(kl - off - el), NULL);
        assert_true(OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n));
        assert_true(OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e));
        type = "RSA";
    }
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    EVP_PKEY *pkey = NULL;
    assert_int_equal(EVP_PKEY_fromdata_init(ctx), 1);
    assert_int_equal(EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params), 1);
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(n);
    BN_free(e);
    return pkey;
}

/* Bytes signed with signer's private key verify with the public key of pub's DNSKEY. */
static bool signs_for(const dnssec_key_t *signer, const dnssec_key_t *pub)
{
    static const uint8_t msg[] = "example.test. 3600 IN A 192.0.2.1";
    const char *md = signer->alg == DNSSEC_ALG_ED25519 ? NULL : "SHA256";
    uint8_t sig[600];
    size_t sl = sizeof(sig);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    assert_int_equal(EVP_DigestSignInit_ex(c, NULL, md, NULL, NULL, signer->pkey, NULL), 1);
    assert_int_equal(EVP_DigestSign(c, sig, &sl, msg, sizeof(msg)), 1);
    if (signer->alg != DNSSEC_ALG_ECDSAP256SHA256) /* ECDSA's DER form varies in length */
        assert_int_equal(sl, signer->siglen);
    EVP_MD_CTX_free(c);
    EVP_PKEY *pk = pub_from_rdata(pub->rdata, pub->rdlen);
    assert_non_null(pk);
    c = EVP_MD_CTX_new();
    assert_int_equal(EVP_DigestVerifyInit_ex(c, NULL, md, NULL, NULL, pk, NULL), 1);
    bool ok = EVP_DigestVerify(c, sig, sl, msg, sizeof(msg)) == 1;
    EVP_MD_CTX_free(c);
    EVP_PKEY_free(pk);
    return ok;
}

static void check_fixture(const dnssec_key_t *k, const fixture_t *f)
{
    assert_int_equal(k->alg, f->alg);
    assert_int_equal(k->flags, f->flags);
    assert_int_equal(k->tag, f->tag);
    assert_int_equal(k->tag, dnssec_key_tag(k->rdata, k->rdlen));
    assert_int_equal(k->bits, f->bits);
    assert_int_equal(k->siglen, f->alg == 8 ? f->bits / 8 : 64);
    assert_int_equal(k->ttl, f->ttl);
    assert_true(dname_equal(k->owner, ZONE));
    assert_memory_equal(k->owner, ZONE, sizeof(ZONE)); /* lowercase */
    char label[64];
    snprintf(label, sizeof(label), "Kexample.test+%03u+%05u", f->alg, f->tag);
    assert_string_equal(k->label, label);
    assert_non_null(k->pkey);
    char ds[600];
    assert_int_equal(dnssec_key_ds_text(k, 2, ds, sizeof(ds)), (int)strlen(f->ds2));
    assert_string_equal(ds, f->ds2);
    assert_true(dnssec_key_ds_text(k, 4, ds, sizeof(ds)) > 0);
    assert_string_equal(ds, f->ds4);
    uint8_t rd[100];
    assert_int_equal(dnssec_key_ds(k, 2, rd, sizeof(rd)), 4 + 32);
    assert_int_equal(rd[0] << 8 | rd[1], f->tag);
    assert_int_equal(rd[2], f->alg);
    assert_int_equal(rd[3], 2);
    assert_int_equal(dnssec_key_ds(k, 4, rd, sizeof(rd)), 4 + 48);
    assert_int_equal(dnssec_key_ds(k, 1, rd, sizeof(rd)), TERN_EINVAL);
    assert_int_equal(dnssec_key_ds(k, 2, rd, 35), TERN_ENOSPC);
    assert_true(signs_for(k, k));
}

/* --- tests */

/* Every fixture from its files, whichever name is given: stem, .key or .private. */
static void test_files(void **state)
{
    for (size_t i = 0; i < TERN_ARRAY_SIZE(fixtures); i++) {
        const fixture_t *f = &fixtures[i];
        static const char *const suffix[3] = {"", ".key", ".private"};
        for (int s = 0; s < 3; s++) {
            char path[512], name[128], err[512] = "";
            snprintf(name, sizeof(name), "%s%s", f->stem, suffix[s]);
            data_path(path, sizeof(path), name);
            dnssec_key_t *k = NULL;
            int rc = dnssec_key_load(path, s == 1 ? ZONE_UPPER : ZONE, &k, err, sizeof(err));
            if (rc < 0)
                fail_msg("%s: %s", path, err);
            check_fixture(k, f);
            dnssec_key_free(k);
        }
        /* the public file alone: the same DS, no private key */
        char path[512], err[512] = "";
        data_path(path, sizeof(path), f->stem);
        dnssec_key_t *k = NULL;
        assert_int_equal(dnssec_key_load_public(path, NULL, &k, err, sizeof(err)), 0);
        assert_null(k->pkey);
        char ds[600];
        assert_true(dnssec_key_ds_text(k, 2, ds, sizeof(ds)) > 0);
        assert_string_equal(ds, f->ds2);
        dnssec_key_free(k);
    }
}

/* The same texts as redins' strings: real newlines, "\n" escapes, CRLF. */
static void test_strings(void **state)
{
    for (size_t i = 0; i < TERN_ARRAY_SIZE(fixtures); i++) {
        const fixture_t *f = &fixtures[i];
        char name[128];
        snprintf(name, sizeof(name), "%s.key", f->stem);
        char *pub = slurp(name);
        snprintf(name, sizeof(name), "%s.private", f->stem);
        char *priv = slurp(name);
        char *epub = escape_newlines(pub), *epriv = escape_newlines(priv);
        const char *pubs[3] = {pub, epub, epub}, *privs[3] = {priv, priv, epriv};
        for (int v = 0; v < 3; v++) {
            char err[512] = "";
            dnssec_key_t *k = NULL;
            int rc = dnssec_key_parse(pubs[v], privs[v], "redis key redins:zones:example.test.:zsk",
                                      ZONE, &k, err, sizeof(err));
            if (rc < 0)
                fail_msg("%s variant %d: %s", f->stem, v, err);
            check_fixture(k, f);
            dnssec_key_free(k);
        }
        free(epub);
        free(epriv);
        free(pub);
        free(priv);
    }
    /* CRLF lines (a file edited on Windows) */
    char *pub = slurp("Kexample.test.+013+63675.key");
    char *priv = slurp("Kexample.test.+013+63675.private");
    char *cpub = calloc(1, strlen(pub) * 2 + 1), *cpriv = calloc(1, strlen(priv) * 2 + 1);
    for (char *s = pub, *q = cpub; *s; s++)
        q += *s == '\n' ? sprintf(q, "\r\n") : sprintf(q, "%c", *s);
    for (char *s = priv, *q = cpriv; *s; s++)
        q += *s == '\n' ? sprintf(q, "\r\n") : sprintf(q, "%c", *s);
    char err[512] = "";
    dnssec_key_t *k = NULL;
    assert_int_equal(dnssec_key_parse(cpub, cpriv, "crlf", ZONE, &k, err, sizeof(err)), 0);
    check_fixture(k, &fixtures[0]);
    dnssec_key_free(k);
    free(cpub);
    free(cpriv);
    free(pub);
    free(priv);
}

/* Presentation variants of one DNSKEY: parentheses over lines, class before TTL, the algorithm
 * by name, the owner in another case, the base64 cut anywhere, no final dot, a TTL in hours. */
static void test_presentation(void **state)
{
    char *priv = slurp("Kexample.test.+013+63675.private");
    static const char *const texts[] = {
        "; comment\n"
        "Example.TEST. 7200 IN DNSKEY ( 256 3 13 ; flags, protocol, algorithm\n"
        "   +jrTah1KQWrohZw/WKXWeQ32QTiNdIshdV7k3clIPjHLdf8gBJejDw4d\n"
        "   jniul2RQ3W+D9s2lNPi19miKIn6ENg== ) ; the key\n"
        "; trailing comment\n",
        "example.test. IN 7200 DNSKEY 256 3 ECDSAP256SHA256 +jr "
        "Tah1KQWrohZw/WKXWeQ32QTiNdIshdV7k3cl"
        "IPjHLdf8gBJejDw4djniul2RQ3W+D9s2lNPi19miKIn6E Ng==",
        "  example.test 7200 dnskey 256 3 13 "
        "+jrTah1KQWrohZw/WKXWeQ32QTiNdIshdV7k3clIPjHLdf8gBJejDw4djniul2RQ3W+D9s2lNPi19miKIn6ENg==",
        /* the TTL with a unit, the mnemonic in lower case, CR line ends */
        "example.test. 2h DNSKEY 256 3 ecdsap256sha256 (\r\n"
        "+jrTah1KQWrohZw/WKXWeQ32QTiNdIshdV7k3clIPjHLdf8gBJejDw4d\r\n"
        "jniul2RQ3W+D9s2lNPi19miKIn6ENg== )\r\n",
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(texts); i++) {
        char err[512] = "";
        dnssec_key_t *k = NULL;
        if (dnssec_key_parse(texts[i], priv, "variant", ZONE, &k, err, sizeof(err)) < 0)
            fail_msg("variant %zu: %s", i, err);
        assert_int_equal(k->tag, 63675);
        assert_int_equal(k->ttl, 7200);
        assert_memory_equal(k->owner, ZONE, sizeof(ZONE));
        char line[800];
        int n = dnssec_key_dnskey_text(k, 300, line, sizeof(line));
        assert_int_equal(n, (int)strlen(line));
        assert_string_equal(line, "example.test. 300 IN DNSKEY 256 3 13 "
                                  "+jrTah1KQWrohZw/WKXWeQ32QTiNdIshdV7k3clIPjHLdf8gBJejDw4djniul2RQ"
                                  "3W+D9s2lNPi19miKIn6ENg==");
        assert_int_equal(dnssec_key_dnskey_text(k, 300, line, 20), TERN_ENOSPC);
        dnssec_key_free(k);
    }
    free(priv);
}

/* The pair of another key is refused, from strings and from files, naming both files. */
static void test_mismatch(void **state)
{
    static const char *const pairs[][2] = {
        {"Kexample.test.+013+63675", "Kexample.test.+013+09564"},
        {"Kexample.test.+015+38045", "Kexample.test.+015+26230"},
        {"Kexample.test.+008+12925", "Kexample.test.+008+08885"},
    };
    char dir[64];
    tu_mkdtemp(dir, sizeof(dir), "tern-keys");
    for (size_t i = 0; i < TERN_ARRAY_SIZE(pairs); i++) {
        char name[128];
        snprintf(name, sizeof(name), "%s.key", pairs[i][0]);
        char *pub = slurp(name);
        snprintf(name, sizeof(name), "%s.private", pairs[i][1]);
        char *priv = slurp(name);
        char err[512] = "";
        dnssec_key_t *k = NULL;
        assert_int_equal(dnssec_key_parse(pub, priv, "redis key x", ZONE, &k, err, sizeof(err)),
                         TERN_EINVAL);
        assert_null(k);
        assert_string_equal(err, "redis key x (private key): the private key is not the pair of "
                                 "the DNSKEY");
        /* as files: K+mixed.key / .private */
        tu_write_file(dir, "Kmixed.key", pub);
        tu_write_file(dir, "Kmixed.private", priv);
        char stem[128], want[400];
        snprintf(stem, sizeof(stem), "%s/Kmixed", dir);
        assert_int_equal(dnssec_key_load(stem, ZONE, &k, err, sizeof(err)), TERN_EINVAL);
        snprintf(want, sizeof(want),
                 "%s.private: the private key is not the pair of the DNSKEY in %s.key", stem, stem);
        assert_string_equal(err, want);
        free(pub);
        free(priv);
    }
    /* the two ECDSA keys of the fixtures do not verify each other's signatures */
    char path[512], err[512];
    dnssec_key_t *a = NULL, *b = NULL;
    data_path(path, sizeof(path), pairs[0][0]);
    assert_int_equal(dnssec_key_load(path, ZONE, &a, err, sizeof(err)), 0);
    data_path(path, sizeof(path), pairs[0][1]);
    assert_int_equal(dnssec_key_load(path, ZONE, &b, err, sizeof(err)), 0);
    assert_false(signs_for(a, b));
    assert_false(signs_for(b, a));
    dnssec_key_free(a);
    dnssec_key_free(b);
    tu_rmtree(dir);
}

/* RSASHA1 (5) and RSASHA1-NSEC3-SHA1 (7) keys are refused by name, at the DNSKEY's line. */
static void test_unsupported(void **state)
{
    static const struct {
        const char *stem, *want;
    } cases[] = {
        {"Kexample.test.+005+58876",
         ".key:5: algorithm 5 (RSASHA1) is not supported: use 8, 13 or 15"},
        {"Kexample.test.+007+21423",
         ".key:5: algorithm 7 (RSASHA1-NSEC3-SHA1) is not supported: use 8, 13 or 15"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        char path[512], err[512] = "";
        data_path(path, sizeof(path), cases[i].stem);
        dnssec_key_t *k = NULL;
        assert_int_equal(dnssec_key_load(path, ZONE, &k, err, sizeof(err)), TERN_ENOTSUP);
        assert_null(k);
        expect_msg(err, cases[i].stem);
        expect_msg(err, cases[i].want);
    }
    dnssec_key_t *k = NULL;
    char err[256];
    assert_int_equal(dnssec_key_generate(ZONE, 14, false, 0, &k, err, sizeof(err)), TERN_ENOTSUP);
    expect_msg(err, "algorithm 14 (ECDSAP384SHA384) is not supported");
    assert_int_equal(dnssec_key_generate(ZONE, 8, false, 512, &k, err, sizeof(err)), TERN_ERANGE);
    expect_msg(err, "512 bits");
}

/* A key of example.test is refused for other.test, naming both. */
static void test_wrong_zone(void **state)
{
    char path[512], err[512] = "";
    data_path(path, sizeof(path), "Kexample.test.+013+63675");
    dnssec_key_t *k = NULL;
    assert_int_equal(dnssec_key_load(path, (const uint8_t *)"\5other\4test", &k, err, sizeof(err)),
                     TERN_EOUTZONE);
    assert_null(k);
    expect_msg(err, "Kexample.test.+013+63675.key:5: the key's owner example.test. is not the "
                    "zone other.test.");
    char *pub = slurp("Kexample.test.+013+63675.key"),
         *priv = slurp("Kexample.test.+013+63675.private");
    /* a subdomain is another zone too */
    assert_int_equal(dnssec_key_parse(pub, priv, "w", (const uint8_t *)"\3sub\7example\4test", &k,
                                      err, sizeof(err)),
                     TERN_EOUTZONE);
    assert_string_equal(err, "w (DNSKEY): line 5: the key's owner example.test. is not the zone "
                             "sub.example.test.");
    free(pub);
    free(priv);
}

/* Broken public texts: each error names the line and what is wrong. */
static void test_bad_public(void **state)
{
    char *priv = slurp("Kexample.test.+013+63675.private");
    static const char *const K = "+jrTah1KQWrohZw/WKXWeQ32QTiNdIshdV7k3clIPjHLdf8gBJejDw4d";
    static const struct {
        const char *text, *want;
        int rc;
    } cases[] = {
        /* truncated base64 on the last line of a record that starts on line 2: ldns joins the
         * lines, the message names the record's */
        {"; c\nexample.test. IN DNSKEY ( 256 3 13\n"
         "+jrTah1KQWrohZw/WKXWeQ32QTiNdIshdV7k3clIPjHLdf8gBJejDw4d\njniul2RQ3W+D9s2 )\n",
         "w (DNSKEY): line 2: bad base64 in the key: Conversion error, b64 encoding expected",
         TERN_ESYNTAX},
        {"example.test. IN DNSKEY 256 3 13 +jrTah1KQWrohZw/WKXWeQ32QTiNdIshdV7k3clIPjHLdf8gBJejDw4d"
         "jniul2RQ3W+D9s2lNPi19miKIn6EN",
         "w (DNSKEY): line 1: bad base64 in the key: Conversion error, b64 encoding expected",
         TERN_ESYNTAX},
        {"example.test. IN DNSKEY 256 3 13 "
         "+jrTah1KQWroh!w/WKXWeQ32QTiNdIshdV7k3clIPjHLdf8gBJejDw4d",
         "w (DNSKEY): line 1: bad base64 in the key: Conversion error, b64 encoding expected",
         TERN_ESYNTAX},
        {"example.test. IN DNSKEY 256 3 13 +jrT=h1K",
         "w (DNSKEY): line 1: bad base64 in the key: Conversion error, b64 encoding expected",
         TERN_ESYNTAX},
        /* a whole base64 of the wrong length for P-256 */
        {"example.test. IN DNSKEY 256 3 13 "
         "+jrTah1KQWrohZw/WKXWeQ32QTiNdIshdV7k3clIPjHLdf8gBJejDw4d",
         "w (DNSKEY): line 1: an ECDSA P-256 key is 64 bytes (RFC 6605), this one 42",
         TERN_ESYNTAX},
        {"", "w (DNSKEY): no DNSKEY record", TERN_ESYNTAX},
        {"; only a comment\n", "w (DNSKEY): no DNSKEY record", TERN_ESYNTAX},
        {"example.test. IN DS 1 13 2 AA", "w (DNSKEY): line 1: 'DS' where DNSKEY was expected",
         TERN_ESYNTAX},
        {"example.test. CH DNSKEY 256 3 13 AA==", "line 1: class CH: a DNSKEY is of class IN",
         TERN_ESYNTAX},
        {"example.test. IN DNSKEY 256 3",
         "line 1: a DNSKEY has flags, protocol, algorithm and the "
         "key",
         TERN_ESYNTAX},
        {"example.test. IN DNSKEY 256 2 13 AA==", "line 1: protocol '2'", TERN_ESYNTAX},
        {"example.test. IN DNSKEY 70000 3 13 AA==", "line 1: bad flags '70000'", TERN_ESYNTAX},
        {"example.test. IN DNSKEY 256 3 FOO AA==", "line 1: unknown algorithm 'FOO'", TERN_ESYNTAX},
        {"example..test. IN DNSKEY 256 3 13 AA==", "line 1: bad owner name 'example..test.'",
         TERN_ESYNTAX},
        {"example.test. IN DNSKEY ( 256 3 13\nAA==\n", "line 1: '(' without ')'", TERN_ESYNTAX},
        {"example.test. IN DNSKEY 256 3 13 AA== )", "line 1: ')' without '('", TERN_ESYNTAX},
        {"example.test. IN DNSKEY 256 3 8 AwEAAQ==", "line 1: the RSA exponent's length runs past",
         TERN_ESYNTAX},
        {"example.test. IN DNSKEY 256 3 5 AwEAAQ==", "algorithm 5 (RSASHA1) is not supported",
         TERN_ENOTSUP},
        /* numbers ldns alone would wrap (259 as protocol 3, 269 as algorithm 13) */
        {"example.test. IN DNSKEY 256 259 13 AA==", "line 1: protocol '259'", TERN_ESYNTAX},
        {"example.test. IN DNSKEY 256 3 269 AA==", "line 1: unknown algorithm '269'", TERN_ESYNTAX},
        {"example.test. IN DNSKEY -1 3 13 AA==", "line 1: bad flags '-1'", TERN_ESYNTAX},
        {"example.test. 4294967295 IN DNSKEY 256 3 13 AA==", "line 1: bad TTL '4294967295'",
         TERN_ESYNTAX},
        {"example.test. 1x IN DNSKEY 256 3 13 AA==", "line 1: bad TTL '1x'", TERN_ESYNTAX},
        {"example.test. IN", "line 1: the record ends before its type", TERN_ESYNTAX},
        {"example.test. IN DNSKEY 256 3 13", "line 1: a DNSKEY has flags, protocol, algorithm",
         TERN_ESYNTAX},
        /* a key whose closing ')' is missing: the text may have been cut short (ldns alone
         * takes it) */
        {"\nexample.test. IN DNSKEY ( 256 3 13 "
         "+jrTah1KQWrohZw/WKXWeQ32QTiNdIshdV7k3clIPjHLdf8gBJejDw4djniul2RQ3W+D9s2lNPi19miKIn6ENg==",
         "w (DNSKEY): line 2: '(' without ')'", TERN_ESYNTAX},
        {"example.test. IN DNSKEY 256 3 13 AA==\n; c\n)\n", "line 3: ')' without '('",
         TERN_ESYNTAX},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        char err[512] = "";
        dnssec_key_t *k = NULL;
        int rc = dnssec_key_parse(cases[i].text, priv, "w", ZONE, &k, err, sizeof(err));
        if (rc != cases[i].rc)
            fail_msg("case %zu: rc %d, want %d (%s)", i, rc, cases[i].rc, err);
        assert_null(k);
        expect_msg(err, cases[i].want);
    }
    /* a second record after the key */
    char text[400], err[512] = "";
    snprintf(text, sizeof(text),
             "example.test. IN DNSKEY 256 3 13 %sjniul2RQ3W+D9s2lNPi19miKIn6ENg==\n"
             "example.test. IN DNSKEY 256 3 13 %sjniul2RQ3W+D9s2lNPi19miKIn6ENg==\n",
             K, K);
    dnssec_key_t *k = NULL;
    assert_int_equal(dnssec_key_parse(text, priv, "w", ZONE, &k, err, sizeof(err)), TERN_ESYNTAX);
    expect_msg(err, "w (DNSKEY): line 2: a second record: one DNSKEY per key");
    assert_int_equal(dnssec_key_parse(NULL, priv, "w", ZONE, &k, err, sizeof(err)), TERN_EINVAL);
    expect_msg(err, "w (DNSKEY): missing");
    /* bad base64 in a file names the file and line */
    char dir[64];
    tu_mkdtemp(dir, sizeof(dir), "tern-keys");
    char *pub = slurp("Kexample.test.+013+63675.key");
    char *cut = replace(pub, "lNPi19miKIn6ENg==", "lNPi19miKIn6ENg=");
    tu_write_file(dir, "Kcut.key", cut);
    tu_write_file(dir, "Kcut.private", priv);
    char stem[128], want[400];
    snprintf(stem, sizeof(stem), "%s/Kcut", dir);
    assert_int_equal(dnssec_key_load(stem, ZONE, &k, err, sizeof(err)), TERN_ESYNTAX);
    snprintf(want, sizeof(want), "%s.key:5: bad base64 in the key: ", stem);
    expect_msg(err, want);
    /* a missing file */
    snprintf(stem, sizeof(stem), "%s/Knone.private", dir);
    assert_int_equal(dnssec_key_load(stem, ZONE, &k, err, sizeof(err)), -ENOENT);
    snprintf(want, sizeof(want), "%s/Knone.key: No such file or directory", dir);
    assert_string_equal(err, want);
    free(cut);
    free(pub);
    free(priv);
    tu_rmtree(dir);
}

/* Broken private texts: each error names the line (or the field missing) and what. */
static void test_bad_private(void **state)
{
    char *pub = slurp("Kexample.test.+013+63675.key");
    char *priv = slurp("Kexample.test.+013+63675.private");
    char *rpub = slurp("Kexample.test.+008+12925.key");
    char *rpriv = slurp("Kexample.test.+008+12925.private");
    static const char *const P = "FM+uX9aTwn+D9ALjoQDYqxiS6ey1VRARxwPcU252HGo=";
    struct {
        const char *pub;
        char *priv;
        const char *want;
        int rc;
    } cases[] = {
        {pub, replace(priv, P, "FM+uX9aTwn+D9ALjoQDYqxiS6ey1VRARxwPcU252HG"),
         "w (private key): line 3: bad base64 in PrivateKey: its length is not a multiple of 4",
         TERN_ESYNTAX},
        {pub, replace(priv, P, "FM+uX9aTwn+D9ALjoQDYqxiS6ey1VRARxwPcU252HGo=FM+uX9aT"),
         "line 3: bad base64 in PrivateKey: '=' before the end", TERN_ESYNTAX},
        {pub, replace(priv, P, "FM+uX9aTwn+D9ALjoQDYqxiS6ey1VRARxwPcU252HGo+FM+uX9aT"),
         "line 3: bad base64 in PrivateKey: too long", TERN_ESYNTAX},
        {pub, replace(priv, "PrivateKey: ", "PrivateKey:"), NULL, 0}, /* no blank: fine */
        {pub, replace(priv, "PrivateKey", "PublicKey"), "w (private key): no PrivateKey field",
         TERN_ESYNTAX},
        {pub, replace(priv, "Algorithm: 13", "Algorithm: 15"),
         "line 2: Algorithm 15 (ECDSAP256SHA256), but the DNSKEY's is 13 (ECDSAP256SHA256)",
         TERN_EINVAL},
        {pub, replace(priv, "Algorithm: 13 (ECDSAP256SHA256)\n", ""), "no Algorithm line",
         TERN_ESYNTAX},
        {pub, replace(priv, "v1.3", "v2.0"), "line 1: Private-key-format v2.0: only v1.x",
         TERN_ENOTSUP},
        {pub, replace(priv, "Private-key-format", "Format"),
         "line 1: not a BIND private key: the first line is not Private-key-format", TERN_ESYNTAX},
        {pub, replace(priv, "Created: ", "Created "), "line 4: expected 'Field: value'",
         TERN_ESYNTAX},
        {pub, replace(priv, "Created: 20261125232005", "PrivateKey: AAAA"),
         "line 4: PrivateKey given again (first on line 3)", TERN_ESYNTAX},
        {pub, replace(priv, P, "AQ=="), "the private key is not the pair of the DNSKEY",
         TERN_EINVAL},
        {pub, replace(priv, P, "//////////////////////////////////////////8="),
         "PrivateKey is not a P-256 private key (out of range)", TERN_EINVAL},
        {pub, calloc(1, 1), "w (private key): no Private-key-format line (empty?)", TERN_ESYNTAX},
        {rpub, replace(rpriv, "Prime2", "Prime3"), "w (private key): no Prime2 field",
         TERN_ESYNTAX},
        /* d of another key: n and e still match the DNSKEY, the signatures do not */
        {rpub,
         replace(
             rpriv,
             "RKQUyW7mb2clcc1EbkGbMvnihWgzqpVXOylKYdMhIwSwtoqGfaH28uHQCyNNgqfUQo4lk3gnD4Kr3n2Y",
             "AAQUyW7mb2clcc1EbkGbMvnihWgzqpVXOylKYdMhIwSwtoqGfaH28uHQCyNNgqfUQo4lk3gnD4Kr3n2Y"),
         NULL, 0}, /* d wrong, CRT right: libcrypto signs with the CRT values, correctly */
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        char err[512] = "";
        dnssec_key_t *k = NULL;
        int rc = dnssec_key_parse(cases[i].pub, cases[i].priv, "w", ZONE, &k, err, sizeof(err));
        if (rc != cases[i].rc)
            fail_msg("case %zu: rc %d, want %d (%s)", i, rc, cases[i].rc, err);
        if (cases[i].want) {
            assert_null(k);
            expect_msg(err, cases[i].want);
        } else {
            assert_true(signs_for(k, k));
        }
        dnssec_key_free(k);
        free(cases[i].priv);
    }
    /* every RSA private number wrong but n and e: its signatures do not verify */
    char *bad = strdup(rpriv);
    static const char *const fields[] = {
        "PrivateExponent: ", "Prime1: ", "Prime2: ", "Exponent1: ", "Exponent2: ", "Coefficient: "};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(fields); i++) {
        char *v = strstr(bad, fields[i]) + strlen(fields[i]);
        v[0] = v[0] == 'A' ? 'B' : 'A'; /* a different leading digit, still base64 */
    }
    char err[512] = "";
    dnssec_key_t *k = NULL;
    assert_int_equal(dnssec_key_parse(rpub, bad, "w", ZONE, &k, err, sizeof(err)), TERN_EINVAL);
    expect_msg(err, "w (private key): the private fields make signatures the DNSKEY does not "
                    "verify");
    free(bad);
    free(pub);
    free(priv);
    free(rpub);
    free(rpriv);
}

/* Generated keys of each algorithm: written as BIND pairs, read back unchanged, never
 * overwritten, the private file 0600; each signs for its DNSKEY. */
static void test_generate_write_load(void **state)
{
    static const unsigned algs[] = {13, 15, 8};
    char dir[64];
    tu_mkdtemp(dir, sizeof(dir), "tern-keys");
    for (size_t i = 0; i < TERN_ARRAY_SIZE(algs); i++) {
        for (int ksk = 0; ksk < 2; ksk++) {
            dnssec_key_t *k = NULL, *back = NULL;
            char err[512] = "", stem[256], want[256];
            assert_int_equal(
                dnssec_key_generate(ZONE_UPPER, algs[i], ksk, 1024, &k, err, sizeof(err)), 0);
            assert_int_equal(k->flags, ksk ? 257 : 256);
            assert_int_equal(k->alg, algs[i]);
            assert_int_equal(k->bits, algs[i] == 8 ? 1024 : 256);
            assert_int_equal(k->siglen, algs[i] == 8 ? 128 : 64);
            assert_int_equal(k->ttl, 0);
            assert_memory_equal(k->owner, ZONE, sizeof(ZONE));
            assert_true(signs_for(k, k));
            assert_int_equal(dnssec_key_write(k, dir, stem, sizeof(stem), err, sizeof(err)), 0);
            snprintf(want, sizeof(want), "%s/Kexample.test.+%03u+%05u", dir, algs[i], k->tag);
            assert_string_equal(stem, want);
            char path[300];
            struct stat st;
            snprintf(path, sizeof(path), "%s.private", stem);
            assert_int_equal(stat(path, &st), 0);
            assert_int_equal(st.st_mode & 0777, 0600);
            snprintf(path, sizeof(path), "%s.key", stem);
            assert_int_equal(stat(path, &st), 0);
            assert_int_equal(st.st_mode & 0600, 0600);
            assert_int_equal(dnssec_key_load(path, ZONE, &back, err, sizeof(err)), 0);
            assert_int_equal(back->rdlen, k->rdlen);
            assert_memory_equal(back->rdata, k->rdata, k->rdlen);
            assert_int_equal(back->tag, k->tag);
            assert_string_equal(back->label, k->label);
            assert_true(signs_for(back, k));
            assert_true(signs_for(k, back));
            /* never overwritten */
            assert_int_equal(dnssec_key_write(k, dir, stem, sizeof(stem), err, sizeof(err)),
                             TERN_EEXIST);
            expect_msg(err, ".private: exists already");
            dnssec_key_free(k);
            dnssec_key_free(back);
        }
    }
    /* the root zone: "K." in the label, "K.+013+..." in the file name; TTL kept */
    dnssec_key_t *k = NULL, *back = NULL;
    char err[512] = "", stem[256], want[256];
    assert_int_equal(dnssec_key_generate((const uint8_t *)"", 13, true, 0, &k, err, sizeof(err)),
                     0);
    k->ttl = 172800;
    snprintf(want, sizeof(want), "K.+013+%05u", k->tag);
    assert_string_equal(k->label, want);
    char sub[128];
    snprintf(sub, sizeof(sub), "%s/", dir); /* a trailing slash is not doubled */
    assert_int_equal(dnssec_key_write(k, sub, stem, sizeof(stem), err, sizeof(err)), 0);
    snprintf(want, sizeof(want), "%s/K.+013+%05u", dir, k->tag);
    assert_string_equal(stem, want);
    assert_int_equal(dnssec_key_load(stem, (const uint8_t *)"", &back, err, sizeof(err)), 0);
    assert_int_equal(back->ttl, 172800);
    assert_memory_equal(back->rdata, k->rdata, k->rdlen);
    dnssec_key_free(back);
    /* a public-only key cannot be written */
    assert_int_equal(dnssec_key_load_public(stem, NULL, &back, err, sizeof(err)), 0);
    assert_int_equal(dnssec_key_write(back, dir, stem, sizeof(stem), err, sizeof(err)),
                     TERN_EINVAL);
    expect_msg(err, "no private key");
    dnssec_key_free(back);
    dnssec_key_free(k);
    /* a stem buffer too small, a directory that is not there */
    assert_int_equal(dnssec_key_generate(ZONE, 15, false, 0, &k, err, sizeof(err)), 0);
    assert_int_equal(dnssec_key_write(k, dir, stem, 10, err, sizeof(err)), TERN_ENOSPC);
    assert_int_equal(dnssec_key_write(k, "/nonexistent/dir", stem, sizeof(stem), err, sizeof(err)),
                     -ENOENT);
    expect_msg(err, "/nonexistent/dir/Kexample.test.+015+");
    dnssec_key_free(k);
    tu_rmtree(dir);
}

/* A long zone name is shortened in the label, whose last five characters stay the tag. */
static void test_label(void **state)
{
    uint8_t zone[DNAME_MAXLEN];
    const char *name = "a-rather-long-label-of-a-zone.another-long-label-of-it.example.test.";
    assert_true(dname_from_str(name, strlen(name), false, zone, NULL) > 0);
    dnssec_key_t *k = NULL;
    char err[256];
    assert_int_equal(dnssec_key_generate(zone, 15, false, 0, &k, err, sizeof(err)), 0);
    char tag[8];
    snprintf(tag, sizeof(tag), "%05u", k->tag);
    size_t n = strlen(k->label);
    assert_true(n <= 63);
    assert_string_equal(k->label + n - 5, tag);
    assert_memory_equal(k->label, "Ka-rather-long", 14);
    assert_non_null(strstr(k->label, "...+015+"));
    char ds[600];
    assert_true(dnssec_key_ds_text(k, 2, ds, sizeof(ds)) > 0);
    assert_memory_equal(ds, name, strlen(name));
    dnssec_key_free(k);
}

/* The key tag of RFC 4034 Appendix B over a hand-made RDATA: the carry is folded in. */
static void test_tag(void **state)
{
    uint8_t rd[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    /* words 0xffff * 3 + 0xff00 = 0x3fefd; + 0x3 carry = 0xff00 */
    assert_int_equal(dnssec_key_tag(rd, 7), 0xff00);
    assert_int_equal(dnssec_key_tag(rd, 0), 0);
    dnssec_key_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_presentation),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_wrong_zone),
        cmocka_unit_test(test_bad_public),
        cmocka_unit_test(test_bad_private),
        cmocka_unit_test(test_generate_write_load),
        cmocka_unit_test(test_label),
        cmocka_unit_test(test_tag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
