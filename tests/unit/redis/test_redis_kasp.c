/*
 * test_redis_kasp.c — the operator requests a Redis zone's driving node applies
 * (redis_kasp_request(), private to src/redis: redis_int.h), the same function ternctl's check
 * runs on a copy of the state: "rollover zsk|ksk|csk", "ds-seen TAG", "ds-seen" (every KSK whose
 * DS is wanted), "ds-gone" (unsigning), each refused with the state machine's reason or the
 * request's fault; and redis_kasp_dropped(), the refusal of a config dropping a policy in use.
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
#include "tern/dnssec/dnssec_kasp.h"

#include "redis_int.h"

#define T0 1800000000LL

/* A zone signed at T0 (a KSK and a ZSK, tags 1000 and 2000), stepped until its KSK is ready:
 * its DS wanted. */
static dnssec_kasp_t *signed_zone(dnssec_kasp_policy_t *pol, int64_t *now)
{
    dnssec_kasp_policy_default(pol);
    pol->zone_max_ttl = 3600;
    dnssec_kasp_t *st = dnssec_kasp_new();
    dnssec_kasp_plan_t *plan = calloc(1, sizeof(*plan));
    char err[256];
    assert_int_equal(dnssec_kasp_step(st, pol, T0, plan), 0);
    assert_int_equal(plan->ngenerate, 2);
    for (size_t i = 0; i < plan->ngenerate; i++) {
        uint16_t tag = plan->generate[i].role == DNSSEC_KASP_ZSK ? 2000 : 1000;
        char id[32];
        snprintf(id, sizeof(id), "K%u", tag);
        assert_int_equal(
            dnssec_kasp_add_key(st, plan->generate[i].role, 13, tag, id, T0, err, sizeof(err)), 0);
    }
    *now = T0;
    for (int i = 0; i < 8 && plan->nds_wanted == 0; i++) {
        assert_int_equal(dnssec_kasp_step(st, pol, *now, plan), 0);
        if (plan->nds_wanted == 0 && plan->next_event)
            *now = plan->next_event;
    }
    assert_int_equal(plan->nds_wanted, 1);
    assert_int_equal(plan->ds_wanted[0], 1000);
    free(plan);
    return st;
}

static void test_ds_seen(void **state)
{
    (void)state;
    dnssec_kasp_policy_t pol;
    int64_t now;
    char err[256] = "";
    dnssec_kasp_t *st = signed_zone(&pol, &now);
    assert_int_equal(redis_kasp_request(st, &pol, "ds-seen 999", now, err, sizeof(err)),
                     TERN_ENOENT);
    assert_int_equal(redis_kasp_request(st, &pol, "ds-seen 70000", now, err, sizeof(err)),
                     TERN_EINVAL);
    assert_non_null(strstr(err, "bad key tag \"70000\""));
    assert_int_equal(redis_kasp_request(st, &pol, "ds-seen x1", now, err, sizeof(err)),
                     TERN_EINVAL);
    /* every KSK waiting: the one */
    assert_int_equal(redis_kasp_request(st, &pol, "ds-seen", now, err, sizeof(err)), 0);
    const dnssec_kasp_key_t *k = NULL;
    for (size_t i = 0; i < dnssec_kasp_key_count(st); i++)
        if (dnssec_kasp_key_at(st, i)->tag == 1000)
            k = dnssec_kasp_key_at(st, i);
    assert_non_null(k);
    assert_int_equal(k->ds_seen, now);
    /* nothing waits any more */
    assert_int_equal(redis_kasp_request(st, &pol, "DS-SEEN", now, err, sizeof(err)), TERN_ENOENT);
    assert_non_null(strstr(err, "no KSK waits for its DS"));
    /* the same tag again is no error (seen is seen) */
    assert_int_equal(redis_kasp_request(st, &pol, "ds-seen 1000", now, err, sizeof(err)), 0);
    dnssec_kasp_free(st);
}

static void test_rollover(void **state)
{
    (void)state;
    dnssec_kasp_policy_t pol;
    int64_t now;
    char err[256] = "";
    dnssec_kasp_t *st = signed_zone(&pol, &now);
    assert_int_equal(redis_kasp_request(st, &pol, "rollover zsk", now, err, sizeof(err)), 0);
    /* one is asked for: a second is refused with the machine's reason */
    err[0] = 0;
    assert_int_equal(redis_kasp_request(st, &pol, "rollover ZSK", now, err, sizeof(err)),
                     TERN_EAGAIN);
    assert_true(err[0] != 0);
    assert_int_equal(redis_kasp_request(st, &pol, "rollover dsk", now, err, sizeof(err)),
                     TERN_EINVAL);
    assert_non_null(strstr(err, "expected ksk, zsk or csk, got \"dsk\""));
    assert_int_equal(redis_kasp_request(st, &pol, "rollover", now, err, sizeof(err)), TERN_EINVAL);
    assert_int_equal(redis_kasp_request(st, &pol, "rollover zsk now", now, err, sizeof(err)),
                     TERN_EINVAL);
    assert_int_equal(redis_kasp_request(st, &pol, "", now, err, sizeof(err)), TERN_EINVAL);
    assert_int_equal(redis_kasp_request(st, &pol, "unsign", now, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "expected \"rollover ksk|zsk|csk\" or \"ds-seen [TAG]\""));
    /* the KSK waits for its first DS: no KSK rollover before it */
    assert_true(redis_kasp_request(st, &pol, "rollover ksk", now, err, sizeof(err)) < 0);
    dnssec_kasp_free(st);
}

/* "ds-gone": refused until the zone is being unsigned, then the parent's DS is marked gone and
 * the keys go a DS TTL later; a second time keeps the first time */
static void test_ds_gone(void **state)
{
    (void)state;
    dnssec_kasp_policy_t pol;
    int64_t now, gone = -1;
    char err[256] = "";
    dnssec_kasp_t *st = signed_zone(&pol, &now);
    assert_int_equal(redis_kasp_request(st, &pol, "ds-gone", now, err, sizeof(err)), TERN_EINVAL);
    assert_true(err[0] != 0);
    assert_int_equal(redis_kasp_request(st, &pol, "ds-gone now", now, err, sizeof(err)),
                     TERN_EINVAL);
    assert_non_null(strstr(err, "\"ds-gone\""));
    assert_int_equal(dnssec_kasp_unsign(st, now, err, sizeof(err)), 0);
    assert_int_equal(dnssec_kasp_unsigning(st, &gone), now);
    assert_int_equal(gone, 0);
    assert_int_equal(redis_kasp_request(st, &pol, "DS-GONE", now + 10, err, sizeof(err)), 0);
    assert_int_equal(redis_kasp_request(st, &pol, "ds-gone", now + 20, err, sizeof(err)), 0);
    assert_int_equal(dnssec_kasp_unsigning(st, &gone), now);
    assert_int_equal(gone, now + 10);
    /* no rollover while unsigning */
    assert_true(redis_kasp_request(st, &pol, "rollover zsk", now, err, sizeof(err)) < 0);
    dnssec_kasp_free(st);
}

/* A config without a policy: refused while the state in Redis has keys in use (the way out
 * named), accepted with no state, a state that no longer signs, or one that does not parse */
static void test_dropped(void **state)
{
    (void)state;
    dnssec_kasp_policy_t pol;
    int64_t now;
    char err[512] = "", origin[] = "example.test";
    struct zst z = {.origin = origin};
    dnssec_kasp_t *st = signed_zone(&pol, &now);
    char *text = dnssec_kasp_to_text(st);
    assert_non_null(text);
    redisReply nil = {.type = REDIS_REPLY_NIL}, bad = {.type = REDIS_REPLY_STRING, .str = "x y"};
    redisReply used = {.type = REDIS_REPLY_STRING, .str = text, .len = strlen(text)};
    assert_int_equal(redis_kasp_dropped(&z, NULL, err, sizeof(err)), 0);
    assert_int_equal(redis_kasp_dropped(&z, &nil, err, sizeof(err)), 0);
    assert_int_equal(redis_kasp_dropped(&z, &bad, err, sizeof(err)), 0);
    assert_int_equal(redis_kasp_dropped(&z, &used, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "zone example.test: "));
    assert_non_null(strstr(err, "set \"dnssec_unsign\": true first"));
    free(text);
    /* unsigned to the end: every key removed, so dropping the policy is accepted */
    assert_int_equal(dnssec_kasp_unsign(st, now, err, sizeof(err)), 0);
    assert_int_equal(dnssec_kasp_ds_gone(st, now, err, sizeof(err)), 0);
    dnssec_kasp_plan_t *plan = calloc(1, sizeof(*plan));
    for (int i = 0; i < 8 && dnssec_kasp_in_use(st); i++) {
        assert_int_equal(dnssec_kasp_step(st, &pol, now, plan), 0);
        if (plan->next_event)
            now = plan->next_event;
    }
    free(plan);
    assert_false(dnssec_kasp_in_use(st));
    text = dnssec_kasp_to_text(st);
    used.str = text;
    used.len = strlen(text);
    assert_int_equal(redis_kasp_dropped(&z, &used, err, sizeof(err)), 0);
    free(text);
    dnssec_kasp_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ds_seen),
        cmocka_unit_test(test_rollover),
        cmocka_unit_test(test_ds_gone),
        cmocka_unit_test(test_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
