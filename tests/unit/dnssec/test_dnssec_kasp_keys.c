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

/* One test's zone: the store, the policy, an empty state and its plan. */
typedef struct fx {
    mem_store_t s;
    dnssec_kasp_policy_t pol;
    dnssec_kasp_store_t store;
    dnssec_kasp_t *st;
    dnssec_kasp_plan_t *plan;
    char err[512];
    bool changed;
} fx_t;

static fx_t *fx_new(void)
{
    fx_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_true(dname_from_str("kk.test", 7, false, f->s.origin, NULL) > 0);
    dnssec_kasp_policy_default(&f->pol);
    f->pol.zone_max_ttl = 3600;
    f->store = (dnssec_kasp_store_t){mem_put, mem_get, &f->s};
    f->st = dnssec_kasp_new();
    f->plan = calloc(1, sizeof(*f->plan));
    assert_non_null(f->st);
    assert_non_null(f->plan);
    return f;
}

/* Step f's state at T0, making keys through its store (with_store) or as a reader. */
static int fx_step(fx_t *f, bool with_store)
{
    return dnssec_kasp_keys_step(f->st, &f->pol, "kk.test", f->s.origin, T0,
                                 with_store ? &f->store : NULL, f->plan, &f->changed, f->err,
                                 sizeof(f->err));
}

static int fx_load(fx_t *f, dnssec_kasp_keys_t *kk)
{
    return dnssec_kasp_keys_load(f->plan, &f->pol, "kk.test", &f->store, kk, f->err,
                                 sizeof(f->err));
}

static void fx_free(fx_t *f)
{
    dnssec_kasp_free(f->st);
    free(f->plan);
    mem_free(&f->s);
    free(f);
}

static void test_first_signing(void **state)
{
    (void)state;
    fx_t *f = fx_new();
    assert_int_equal(fx_step(f, true), 0);
    assert_true(f->changed);
    assert_int_equal(f->s.n, 2);
    assert_int_equal(dnssec_kasp_key_count(f->st), 2);
    assert_int_equal(f->plan->ngenerate, 0);
    for (size_t i = 0; i < 2; i++)
        assert_string_equal(dnssec_kasp_key_at(f->st, i)->id, f->s.id[i]);

    dnssec_kasp_keys_t kk;
    assert_int_equal(fx_load(f, &kk), 0);
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
    unsigned puts = f->s.puts;
    assert_int_equal(fx_step(f, true), 0);
    assert_false(f->changed);
    assert_int_equal(f->s.puts, puts);
    fx_free(f);
}

/* The unsign setting against a state: no key yet, keys in use, unsigning, unsigned. */
static void test_unsign_steps(void **state)
{
    (void)state;
    fx_t *f = fx_new();
    assert_int_equal(dnssec_kasp_keys_unsign_step(f->st, true), DNSSEC_KASP_UNSIGN_NO_KEYS);
    assert_int_equal(dnssec_kasp_keys_unsign_step(f->st, false), DNSSEC_KASP_UNSIGN_NOTHING);
    assert_int_equal(fx_step(f, true), 0); /* signed: keys in use */
    assert_int_equal(dnssec_kasp_keys_unsign_step(f->st, false), DNSSEC_KASP_UNSIGN_NOTHING);
    dnssec_kasp_unsign_step_t s = dnssec_kasp_keys_unsign_step(f->st, true);
    assert_int_equal(s, DNSSEC_KASP_UNSIGN_START);
    bool changed = false;
    assert_int_equal(dnssec_kasp_keys_unsign(&f->st, s, "kk.test", "unsign: true", T0, &changed,
                                             f->err, sizeof(f->err)),
                     0);
    assert_true(changed);
    assert_int_equal(dnssec_kasp_keys_unsign_step(f->st, true), DNSSEC_KASP_UNSIGN_NOTHING);
    s = dnssec_kasp_keys_unsign_step(f->st, false); /* dropped half way */
    assert_int_equal(s, DNSSEC_KASP_UNSIGN_REFUSED);
    assert_int_equal(dnssec_kasp_keys_unsign(&f->st, s, "kk.test", "unsign: true", T0, &changed,
                                             f->err, sizeof(f->err)),
                     TERN_EINVAL);
    assert_non_null(strstr(f->err, "zone kk.test: dnssec: it is being unsigned"));
    assert_non_null(strstr(f->err, "keep unsign: true until"));
    fx_free(f);
}

static void test_reader_makes_nothing(void **state)
{
    (void)state;
    fx_t *f = fx_new();
    f->changed = true;
    /* a state another node drives, not signed yet: the plan asks for keys, none is made */
    assert_int_equal(fx_step(f, false), 0);
    assert_false(f->changed);
    assert_int_equal(f->plan->ngenerate, 2);
    assert_int_equal(dnssec_kasp_key_count(f->st), 0);
    dnssec_kasp_keys_t kk;
    assert_int_equal(fx_load(f, &kk), 0);
    assert_int_equal(kk.n, 0); /* nothing to sign with yet */
    assert_int_equal(f->s.gets, 0);
    fx_free(f);
}

static void test_taken_id_retried(void **state)
{
    (void)state;
    fx_t *f = fx_new();
    f->s.eexist = 3;
    assert_int_equal(fx_step(f, true), 0);
    assert_int_equal(f->s.n, 2);
    assert_int_equal(f->s.puts, 5); /* three refused, two kept */

    /* a store that refuses every id: the step gives up, naming the zone and the role */
    dnssec_kasp_free(f->st);
    f->st = dnssec_kasp_new();
    f->s.eexist = 1000;
    assert_int_equal(fx_step(f, true), TERN_EEXIST);
    assert_non_null(strstr(f->err, "zone kk.test: dnssec: cannot make a"));
    fx_free(f);
}

static void test_key_gone(void **state)
{
    (void)state;
    fx_t *f = fx_new();
    assert_int_equal(fx_step(f, true), 0);
    snprintf(f->s.id[1], sizeof(f->s.id[1]), "renamed"); /* the second key left the store */
    dnssec_kasp_keys_t kk;
    assert_int_equal(fx_load(f, &kk), TERN_ENOENT);
    assert_int_equal(kk.n, 0);
    assert_non_null(strstr(f->err, "zone kk.test: dnssec: key "));
    assert_non_null(strstr(f->err, "no key key-"));
    fx_free(f);
}

static void test_ds_and_roles(void **state)
{
    (void)state;
    fx_t *f = fx_new();
    assert_int_equal(fx_step(f, true), 0);
    /* no DS wanted yet: nothing to look for */
    dnssec_kasp_ds_t ds[DNSSEC_KASP_DS_MAX];
    assert_int_equal(dnssec_kasp_keys_ds(f->plan, &f->pol, "kk.test", &f->store, ds), 0);
    /* once the KSK is ready its DS is wanted: the DS of the key in the store */
    bool changed;
    for (int i = 0; i < 4 && f->plan->nds_wanted == 0; i++) {
        int64_t at = f->plan->next_event;
        assert_true(at > T0);
        assert_int_equal(dnssec_kasp_keys_step(f->st, &f->pol, "kk.test", f->s.origin, at,
                                               &f->store, f->plan, &changed, f->err,
                                               sizeof(f->err)),
                         0);
    }
    assert_int_equal(f->plan->nds_wanted, 1);
    assert_int_equal(dnssec_kasp_keys_ds(f->plan, &f->pol, "kk.test", &f->store, ds), 1);
    assert_int_equal(ds[0].tag, f->plan->ds_wanted[0]);
    assert_int_equal(ds[0].len, 4 + 32); /* SHA-256 */
    dnssec_kasp_role_t r;
    char err[128];
    assert_int_equal(dnssec_kasp_keys_role("ZSK", &r, err, sizeof(err)), 0);
    assert_int_equal(r, DNSSEC_KASP_ZSK);
    assert_int_equal(dnssec_kasp_keys_role("csk", &r, err, sizeof(err)), 0);
    assert_int_equal(r, DNSSEC_KASP_CSK);
    assert_int_equal(dnssec_kasp_keys_role("dsk", &r, err, sizeof(err)), TERN_EINVAL);
    assert_string_equal(err, "rollover: expected ksk, zsk or csk, got \"dsk\"");
    fx_free(f);
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
        cmocka_unit_test(test_ds_and_roles),     cmocka_unit_test(test_texts_round_trip),
        cmocka_unit_test(test_unsign_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
