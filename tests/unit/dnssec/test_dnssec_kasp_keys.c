/*
 * test_dnssec_kasp_keys.c — the step that makes the keys a plan asks for and the plan turned into
 * keys and roles (dnssec_kasp_keys.h), over an in-memory key store standing for the files or the
 * Redis hash: the first signing makes a KSK and a ZSK through the store and registers them, the
 * keys come back with their roles; a reader's step (no store) makes nothing and writes nothing; a
 * taken id makes the step try another key; a key gone from the store is an error naming the zone
 * and the key; and a key's BIND texts (dnssec_key_texts(), what the Redis store keeps) parse back
 * to the same key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/dnssec/dnssec_kasp_keys.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/wire/dname.h"

#define T0 1800000000LL

/* The store: a few keys by id, kept as their texts (as the Redis hash keeps them). */
typedef struct mem_store {
    char id[8][DNSSEC_KASP_ID_MAX + 1];
    char *pub[8], *priv[8];
    size_t n;
    unsigned puts, gets;
    unsigned eexist; /* refuse this many puts with TERN_EEXIST first */
    uint8_t origin[DNAME_MAXLEN];
} mem_store_t;

static int mem_put(void *ctx, const dnssec_key_t *key, char *id, size_t idlen, char *err,
                   size_t errlen)
{
    mem_store_t *s = ctx;
    s->puts++;
    if (s->eexist) {
        s->eexist--;
        return TERN_EEXIST;
    }
    assert_true(s->n < 8);
    snprintf(id, idlen, "key-%u-%u", key->tag, key->flags);
    snprintf(s->id[s->n], sizeof(s->id[s->n]), "%s", id);
    int rc = dnssec_key_texts(key, &s->pub[s->n], &s->priv[s->n], err, errlen);
    if (rc == 0)
        s->n++;
    return rc;
}

static int mem_get(void *ctx, const char *id, dnssec_key_t **out, char *err, size_t errlen)
{
    mem_store_t *s = ctx;
    s->gets++;
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->id[i], id) == 0)
            return dnssec_key_parse(s->pub[i], s->priv[i], id, s->origin, out, err, errlen);
    snprintf(err, errlen, "no key %s", id);
    return TERN_ENOENT;
}

static void mem_free(mem_store_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->pub[i]);
        free(s->priv[i]);
    }
}

static void setup(mem_store_t *s, dnssec_kasp_policy_t *pol)
{
    memset(s, 0, sizeof(*s));
    assert_true(dname_from_str("kk.test", 7, false, s->origin, NULL) > 0);
    dnssec_kasp_policy_default(pol);
    pol->zone_max_ttl = 3600;
}

static void test_first_signing(void **state)
{
    (void)state;
    mem_store_t s;
    dnssec_kasp_policy_t pol;
    setup(&s, &pol);
    dnssec_kasp_store_t store = {mem_put, mem_get, &s};
    dnssec_kasp_t *st = dnssec_kasp_new();
    dnssec_kasp_plan_t *plan = calloc(1, sizeof(*plan));
    char err[512] = "";
    bool changed = false;
    assert_int_equal(dnssec_kasp_keys_step(st, &pol, "kk.test", s.origin, T0, &store, plan,
                                           &changed, err, sizeof(err)),
                     0);
    assert_true(changed);
    assert_int_equal(s.n, 2);
    assert_int_equal(dnssec_kasp_key_count(st), 2);
    assert_int_equal(plan->ngenerate, 0);
    for (size_t i = 0; i < 2; i++)
        assert_string_equal(dnssec_kasp_key_at(st, i)->id, s.id[i]);

    dnssec_kasp_keys_t kk;
    assert_int_equal(dnssec_kasp_keys_load(plan, &pol, "kk.test", &store, &kk, err, sizeof(err)),
                     0);
    assert_int_equal(kk.n, 2);
    assert_int_equal(kk.cds_digest, 2);
    assert_false(kk.cds_delete);
    unsigned ksk = 0, zsk = 0;
    for (unsigned i = 0; i < kk.n; i++) {
        if (kk.keys[i]->flags == DNSSEC_FLAGS_KSK) {
            ksk++;
            assert_int_equal(kk.roles[i], DNSSEC_ROLE_PUBLISH | DNSSEC_ROLE_SIGN_DNSKEY);
        } else {
            zsk++;
            assert_int_equal(kk.roles[i], DNSSEC_ROLE_PUBLISH | DNSSEC_ROLE_SIGN_ZONE);
        }
    }
    assert_int_equal(ksk, 1);
    assert_int_equal(zsk, 1);
    dnssec_kasp_keys_release(&kk);
    assert_int_equal(kk.n, 0);

    /* the same state stepped again at the same time: nothing new, nothing made */
    unsigned puts = s.puts;
    assert_int_equal(dnssec_kasp_keys_step(st, &pol, "kk.test", s.origin, T0, &store, plan,
                                           &changed, err, sizeof(err)),
                     0);
    assert_false(changed);
    assert_int_equal(s.puts, puts);
    dnssec_kasp_free(st);
    free(plan);
    mem_free(&s);
}

static void test_reader_makes_nothing(void **state)
{
    (void)state;
    mem_store_t s;
    dnssec_kasp_policy_t pol;
    setup(&s, &pol);
    dnssec_kasp_t *st = dnssec_kasp_new();
    dnssec_kasp_plan_t *plan = calloc(1, sizeof(*plan));
    char err[512] = "";
    bool changed = true;
    /* a state another node drives, not signed yet: the plan asks for keys, none is made */
    assert_int_equal(dnssec_kasp_keys_step(st, &pol, "kk.test", s.origin, T0, NULL, plan, &changed,
                                           err, sizeof(err)),
                     0);
    assert_false(changed);
    assert_int_equal(plan->ngenerate, 2);
    assert_int_equal(dnssec_kasp_key_count(st), 0);
    dnssec_kasp_store_t store = {mem_put, mem_get, &s};
    dnssec_kasp_keys_t kk;
    assert_int_equal(dnssec_kasp_keys_load(plan, &pol, "kk.test", &store, &kk, err, sizeof(err)),
                     0);
    assert_int_equal(kk.n, 0); /* nothing to sign with yet */
    assert_int_equal(s.gets, 0);
    dnssec_kasp_free(st);
    free(plan);
}

static void test_taken_id_retried(void **state)
{
    (void)state;
    mem_store_t s;
    dnssec_kasp_policy_t pol;
    setup(&s, &pol);
    s.eexist = 3;
    dnssec_kasp_store_t store = {mem_put, mem_get, &s};
    dnssec_kasp_t *st = dnssec_kasp_new();
    dnssec_kasp_plan_t *plan = calloc(1, sizeof(*plan));
    char err[512] = "";
    bool changed;
    assert_int_equal(dnssec_kasp_keys_step(st, &pol, "kk.test", s.origin, T0, &store, plan,
                                           &changed, err, sizeof(err)),
                     0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.puts, 5); /* three refused, two kept */

    /* a store that refuses every id: the step gives up, naming the zone and the role */
    dnssec_kasp_t *st2 = dnssec_kasp_new();
    s.eexist = 1000;
    assert_int_equal(dnssec_kasp_keys_step(st2, &pol, "kk.test", s.origin, T0, &store, plan,
                                           &changed, err, sizeof(err)),
                     TERN_EEXIST);
    assert_non_null(strstr(err, "zone kk.test: dnssec: cannot make a"));
    dnssec_kasp_free(st);
    dnssec_kasp_free(st2);
    free(plan);
    mem_free(&s);
}

static void test_key_gone(void **state)
{
    (void)state;
    mem_store_t s;
    dnssec_kasp_policy_t pol;
    setup(&s, &pol);
    dnssec_kasp_store_t store = {mem_put, mem_get, &s};
    dnssec_kasp_t *st = dnssec_kasp_new();
    dnssec_kasp_plan_t *plan = calloc(1, sizeof(*plan));
    char err[512] = "";
    bool changed;
    assert_int_equal(dnssec_kasp_keys_step(st, &pol, "kk.test", s.origin, T0, &store, plan,
                                           &changed, err, sizeof(err)),
                     0);
    snprintf(s.id[1], sizeof(s.id[1]), "renamed"); /* the second key is gone from the store */
    dnssec_kasp_keys_t kk;
    assert_int_equal(dnssec_kasp_keys_load(plan, &pol, "kk.test", &store, &kk, err, sizeof(err)),
                     TERN_ENOENT);
    assert_int_equal(kk.n, 0);
    assert_non_null(strstr(err, "zone kk.test: dnssec: key "));
    assert_non_null(strstr(err, "no key key-"));
    dnssec_kasp_free(st);
    free(plan);
    mem_free(&s);
}

static void test_texts_round_trip(void **state)
{
    (void)state;
    uint8_t origin[DNAME_MAXLEN];
    assert_true(dname_from_str("kk.test", 7, false, origin, NULL) > 0);
    static const unsigned algs[] = {8, 13, 15};
    for (size_t i = 0; i < 3; i++) {
        dnssec_key_t *k = NULL, *back = NULL;
        char err[512] = "", *pub = NULL, *priv = NULL;
        assert_int_equal(dnssec_key_generate(origin, algs[i], i == 1, 1024, &k, err, sizeof(err)),
                         0);
        assert_int_equal(dnssec_key_texts(k, &pub, &priv, err, sizeof(err)), 0);
        assert_non_null(strstr(priv, "Private-key-format: v1.3"));
        assert_int_equal(dnssec_key_parse(pub, priv, "round trip", origin, &back, err, sizeof(err)),
                         0);
        assert_int_equal(back->tag, k->tag);
        assert_int_equal(back->flags, k->flags);
        assert_memory_equal(back->rdata, k->rdata, k->rdlen);
        dnssec_key_free(back);
        free(pub);
        free(priv);
        /* a public key alone has nothing to write */
        dnssec_key_t *pubonly = dnssec_key_dup(k);
        EVP_PKEY *save = pubonly->pkey;
        pubonly->pkey = NULL;
        assert_int_equal(dnssec_key_texts(pubonly, &pub, &priv, err, sizeof(err)), TERN_EINVAL);
        assert_null(pub);
        assert_null(priv);
        pubonly->pkey = save;
        dnssec_key_free(pubonly);
        dnssec_key_free(k);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_signing),    cmocka_unit_test(test_reader_makes_nothing),
        cmocka_unit_test(test_taken_id_retried), cmocka_unit_test(test_key_gone),
        cmocka_unit_test(test_texts_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
