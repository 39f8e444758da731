/*
 * test_update_service.c — the update service (tern/update/update.h) over a real loader and a
 * master-file zone in a scratch directory: a change through update_apply_msg() is in the
 * journal and in the view served when the call returns; one through update_submit() comes back
 * through the reply hook with its token; a change that changes nothing keeps the serial; a zone
 * not served is NOTAUTH, one without allow_update REFUSED; the audit lists who changed what;
 * update_flush() writes the file back and empties the journal; a stopped service refuses.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <ldns/ldns.h>

#include "test_util.h"

#include "tern/common/err.h"
#include "tern/common/rcu.h"
#include "tern/load/loader.h"
#include "tern/source/source_journal.h"
#include "tern/update/update.h"
#include "tern/wire/dname.h"
#include "tern/wire/parse.h"

static char dir[64];

static int read_config(void *ctx, config_t *cfg, char *err, size_t errlen)
{
    (void)ctx;
    (void)err;
    (void)errlen;
    char path[256];
    config_init(cfg);
    snprintf(path, sizeof(path), "%s/u.zone", dir);
    if (config_add_listen(cfg, "127.0.0.1:53") < 0 || config_add_zone(cfg, "u.test", path) < 0)
        return TERN_ENOMEM;
    snprintf(path, sizeof(path), "%s/n.zone", dir);
    if (config_add_zone(cfg, "n.test", path) < 0)
        return TERN_ENOMEM;
    config_zone_t *z = &cfg->zones[0];
    z->allow_update = calloc(1, sizeof(*z->allow_update));
    z->allow_update[0].addresses.p = calloc(1, sizeof(config_prefix_t));
    if (!z->allow_update || !z->allow_update[0].addresses.p)
        return TERN_ENOMEM;
    z->nallow_update = 1;
    z->allow_update[0].addresses.n = 1;
    z->allow_update[0].addresses.p[0] = (config_prefix_t){.family = 4, .len = 8, .addr = {127}};
    cfg->update_max_records = 100;
    cfg->update_rate = 1000;
    return 0;
}

static void write_zone(const char *file, const char *origin)
{
    char text[512];
    snprintf(text, sizeof(text),
             "$ORIGIN %s.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n"
             "ns1 A 192.0.2.53\nwww A 192.0.2.1\n",
             origin);
    tu_write_file(dir, file, text);
}

/* An UPDATE of zone adding the RR given in text (del: deleting its RRset instead). */
static uint8_t *msg_wire(const char *zone, const char *rr, bool del, size_t *len)
{
    ldns_rdf *z = ldns_dname_new_frm_str(zone);
    ldns_rr *r = NULL;
    assert_int_equal(ldns_rr_new_frm_str(&r, rr, 0, NULL, NULL), LDNS_STATUS_OK);
    if (del) {
        ldns_rr_set_class(r, LDNS_RR_CLASS_ANY);
        ldns_rr_set_ttl(r, 0);
        while (ldns_rr_rd_count(r))
            ldns_rdf_deep_free(ldns_rr_pop_rdf(r));
    }
    ldns_rr_list *ups = ldns_rr_list_new();
    ldns_rr_list_push_rr(ups, r);
    ldns_pkt *p = ldns_update_pkt_new(z, LDNS_RR_CLASS_IN, NULL, ups, NULL);
    assert_non_null(p);
    uint8_t *w = NULL;
    assert_int_equal(ldns_pkt2wire(&w, p, len), LDNS_STATUS_OK);
    ldns_pkt_free(p); /* it owns the zone name, not the list */
    ldns_rr_list_deep_free(ups);
    return w;
}

/* The A RRset of name in the version served: how many RRs (0: none). */
static unsigned served_a(loader_t *l, const char *zone, const char *name)
{
    uint8_t apex[DNAME_MAXLEN], n[DNAME_MAXLEN];
    const char *why;
    assert_true(dname_from_str(zone, strlen(zone), false, apex, &why) > 0);
    assert_true(dname_from_str(name, strlen(name), false, n, &why) > 0);
    zone_t *z = answer_pin_zone(loader_published(l), apex);
    if (!z)
        return 0;
    const zone_node_t *node = zone_find_node(z, n, dname_len(n), dname_hash(n));
    const zone_rrset_t *s = node ? zone_node_rrset(node, 1) : NULL;
    unsigned c = s ? s->count : 0;
    zone_free(z);
    return c;
}

static uint32_t served_serial(loader_t *l)
{
    uint8_t apex[DNAME_MAXLEN];
    const char *why;
    assert_true(dname_from_str("u.test", 6, false, apex, &why) > 0);
    zone_t *z = answer_pin_zone(loader_published(l), apex);
    assert_non_null(z);
    uint32_t s = z->serial;
    zone_free(z);
    return s;
}

/* The reply hook: the last token and rcode, under a lock the test waits on. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static uint64_t got_token;
static unsigned got_rcode;
static bool got;
static unsigned got_count, got_noerror; /* replies, and NOERROR ones, since the last reset */

static void on_reply(void *ctx, uint64_t token, unsigned rcode)
{
    (void)ctx;
    pthread_mutex_lock(&mu);
    got_token = token;
    got_rcode = rcode;
    got = true;
    got_count++;
    got_noerror += rcode == WIRE_RC_NOERROR;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

static void test_service(void **state)
{
    (void)state;
    tern_rcu_register();
    tern_rcu_offline();
    tu_mkdtemp(dir, sizeof(dir), "tern-update");
    write_zone("u.zone", "u.test");
    write_zone("n.zone", "n.test");
    loader_t *l = loader_new(read_config, NULL);
    assert_non_null(l);
    assert_int_equal(loader_add_source(l, &update_source_ops), 0);
    update_t *u = update_of(loader_source(l, "update"));
    assert_non_null(u);
    update_wire(u, loader_published(l), on_reply, NULL);
    const config_t *cfg;
    assert_int_equal(loader_load(l, &cfg), 0);
    assert_int_equal(loader_start(l), 0);

    /* an authorised caller's change: journaled and served when the call returns */
    char why[256], path[256];
    size_t len;
    uint8_t *w = msg_wire("u.test.", "new.u.test. 60 IN A 192.0.2.7", false, &len);
    assert_int_equal(update_apply_msg(u, w, len, "api key ops from 127.0.0.1", why, sizeof(why)),
                     WIRE_RC_NOERROR);
    assert_int_equal(served_a(l, "u.test", "new.u.test"), 1);
    assert_int_equal(served_serial(l), 2);
    snprintf(path, sizeof(path), "%s/u.zone.jnl", dir);
    source_journal_info_t ji;
    assert_int_equal(source_journal_info(path, &ji, why, sizeof(why)), 0);
    assert_int_equal(ji.entries, 1);
    assert_int_equal(ji.last, 2);

    /* the same again changes nothing: NOERROR, the serial stays */
    assert_int_equal(update_apply_msg(u, w, len, "api key ops", why, sizeof(why)), WIRE_RC_NOERROR);
    assert_string_equal(why, "nothing to change");
    assert_int_equal(served_serial(l), 2);
    free(w);

    /* an UPDATE from the wire: its rcode comes back with its token */
    w = msg_wire("u.test.", "www.u.test. 0 IN A 192.0.2.1", true, &len);
    struct sockaddr_storage peer = {0};
    struct sockaddr_in *sin = (struct sockaddr_in *)&peer;
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(0x7f000001);
    assert_true(update_submit(u, w, len, NULL, &peer, 42));
    pthread_mutex_lock(&mu);
    while (!got)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    assert_int_equal(got_token, 42);
    assert_int_equal(got_rcode, WIRE_RC_NOERROR);
    assert_int_equal(served_a(l, "u.test", "www.u.test"), 0);
    assert_int_equal(served_serial(l), 3);
    free(w);

    /* refusals: a zone without allow_update over the wire, a zone not served */
    w = msg_wire("n.test.", "x.n.test. 60 IN A 192.0.2.9", false, &len);
    got = false;
    assert_true(update_submit(u, w, len, NULL, &peer, 43));
    pthread_mutex_lock(&mu);
    while (!got)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    assert_int_equal(got_rcode, WIRE_RC_REFUSED);
    free(w);
    w = msg_wire("x.test.", "a.x.test. 60 IN A 192.0.2.9", false, &len);
    assert_int_equal(update_apply_msg(u, w, len, "api", why, sizeof(why)), WIRE_RC_NOTAUTH);
    free(w);

    /* several at once: one batch, each change over the one before it, all served */
    uint32_t s0 = served_serial(l);
    pthread_mutex_lock(&mu);
    got_count = got_noerror = 0;
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < 6; i++) {
        char rr[64];
        snprintf(rr, sizeof(rr), "b%d.u.test. 60 IN A 192.0.2.%d", i, 100 + i);
        w = msg_wire("u.test.", rr, false, &len);
        assert_true(update_submit(u, w, len, NULL, &peer, 100 + (uint64_t)i));
        free(w);
    }
    pthread_mutex_lock(&mu);
    while (got_count < 6)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    assert_int_equal(got_noerror, 6);
    assert_int_equal(served_serial(l), s0 + 6);
    for (int i = 0; i < 6; i++) {
        char name[32];
        snprintf(name, sizeof(name), "b%d.u.test", i);
        assert_int_equal(served_a(l, "u.test", name), 1);
    }

    /* the audit */
    update_audit_t a[4];
    update_audit_t all[16];
    assert_int_equal(update_recent(u, "u.test", all, 16), 8);
    assert_int_equal(all[0].to, 9); /* the batch's last */
    assert_int_equal(all[6].to, 3);
    assert_int_equal(all[6].removed, 1);
    assert_int_equal(all[7].to, 2);
    assert_string_equal(all[7].who, "api key ops from 127.0.0.1");
    assert_int_equal(update_recent(u, "u.test", a, 4), 4);

    /* flush: the file holds the changes, the journal none */
    char msg[256];
    assert_int_equal(update_flush(u, "u.test", msg, sizeof(msg)), 0);
    assert_non_null(strstr(msg, "8 changes written back"));
    assert_int_equal(source_journal_info(path, &ji, why, sizeof(why)), 0);
    assert_int_equal(ji.entries, 0);
    assert_int_equal(update_flush(u, "nothere.test", msg, sizeof(msg)), TERN_ENOENT);
    assert_true(loader_reload_wait(l, NULL));
    assert_int_equal(served_a(l, "u.test", "new.u.test"), 1);
    assert_int_equal(served_serial(l), 9);

    update_stats_t st;
    update_get_stats(u, &st);
    assert_int_equal(st.applied, 8);
    assert_int_equal(st.unchanged, 1);
    assert_int_equal(st.flushes, 1);
    assert_int_equal(st.rcode[WIRE_RC_REFUSED], 1);

    /* stopped: nothing is taken */
    loader_stop(l);
    w = msg_wire("u.test.", "late.u.test. 60 IN A 192.0.2.8", false, &len);
    assert_false(update_submit(u, w, len, NULL, &peer, 44));
    assert_int_equal(update_apply_msg(u, w, len, "api", why, sizeof(why)), WIRE_RC_SERVFAIL);
    free(w);
    loader_free(l);
    tu_rmtree(dir);
    tern_rcu_unregister();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_service),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
