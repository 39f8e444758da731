/*
 * ds_check.c — see ds_check.h. Queries go through ldns (already in the process for zone files
 * and the ANAME resolver): one resolver per question, one try, its own timeout.
 */
#include "ds_check.h"

#include <errno.h>
#include <ldns/ldns.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/common/log.h"

/* One question's timeout: a parent's authoritative server answers in milliseconds; 2 s is a
 * lost packet, and bounds what a stop waits for. */
#define QUERY_TIMEOUT_S 2
/* Servers asked per zone: a parent has a handful. */
#define SERVERS_MAX 16
#define WANTS_MAX   4

struct job {
    char *key, *origin;
    ds_check_want_t wants[WANTS_MAX];
    size_t nwants;
    char *servers[SERVERS_MAX];
    size_t nservers;
    unsigned interval;
    time_t next; /* monotonic seconds */
};

struct ds_check {
    ds_check_seen_fn seen;
    void *ctx;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
    bool started, stop;
    struct job *jobs;
    size_t n, cap;
};

static time_t mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static void job_clear(struct job *j)
{
    free(j->key);
    free(j->origin);
    for (size_t i = 0; i < j->nservers; i++)
        free(j->servers[i]);
    memset(j, 0, sizeof(*j));
}

static int job_copy(struct job *d, const struct job *s)
{
    memset(d, 0, sizeof(*d));
    *d = *s;
    d->key = strdup(s->key);
    d->origin = strdup(s->origin);
    d->nservers = 0;
    for (size_t i = 0; i < s->nservers; i++)
        if ((d->servers[i] = strdup(s->servers[i])))
            d->nservers++;
    if (!d->key || !d->origin || d->nservers != s->nservers) {
        job_clear(d);
        return -1;
    }
    return 0;
}

ds_check_t *ds_check_new(ds_check_seen_fn seen, void *ctx)
{
    ds_check_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->seen = seen;
    c->ctx = ctx;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&c->wake, &a);
    pthread_condattr_destroy(&a);
    return c;
}

void ds_check_set(ds_check_t *c, const char *key, const char *origin, const ds_check_want_t *wants,
                  size_t n, char *const *servers, size_t nservers, unsigned interval)
{
    pthread_mutex_lock(&c->mu);
    size_t i = 0;
    while (i < c->n && strcmp(c->jobs[i].key, key) != 0)
        i++;
    if (i < c->n) {
        job_clear(&c->jobs[i]);
        c->jobs[i] = c->jobs[--c->n];
    }
    if (n && nservers) {
        struct job j = {.interval = interval ? interval : 60, .next = mono_s()};
        j.key = (char *)key;
        j.origin = (char *)origin;
        j.nwants = n < WANTS_MAX ? n : WANTS_MAX;
        memcpy(j.wants, wants, j.nwants * sizeof(*wants));
        j.nservers = nservers < SERVERS_MAX ? nservers : SERVERS_MAX;
        memcpy(j.servers, servers, j.nservers * sizeof(*servers));
        struct job *v = c->n < c->cap ? c->jobs : realloc(c->jobs, (c->cap + 4) * sizeof(*v));
        if (!v || job_copy(&v[c->n], &j) < 0) {
            log_err("dnssec: zone %s: out of memory; its DS is not looked for at the parent", key);
        } else {
            if (v != c->jobs) {
                c->jobs = v;
                c->cap += 4;
            }
            c->n++;
        }
    }
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->mu);
}

/* The DS RRset of origin at server ("ADDR" or "ADDR@PORT"): does it meet want (hold its DS;
 * gone: hold none, said with authority)? 1 yes, 0 no (or no answer: *why says). */
static int server_has(const char *server, const char *origin, const ds_check_want_t *want,
                      const char **why)
{
    char host[128];
    unsigned port = 53;
    const char *at = strchr(server, '@');
    size_t hl = at ? (size_t)(at - server) : strlen(server);
    if (hl >= sizeof(host)) {
        *why = "bad server";
        return 0;
    }
    memcpy(host, server, hl);
    host[hl] = '\0';
    if (at)
        port = (unsigned)strtoul(at + 1, NULL, 10);
    ldns_resolver *res = ldns_resolver_new();
    ldns_rdf *addr =
        ldns_rdf_new_frm_str(strchr(host, ':') ? LDNS_RDF_TYPE_AAAA : LDNS_RDF_TYPE_A, host);
    ldns_rdf *qname = ldns_dname_new_frm_str(origin);
    ldns_pkt *q = NULL, *p = NULL;
    int found = 0;
    *why = "no answer";
    if (!res || !addr || !qname || ldns_resolver_push_nameserver(res, addr) != LDNS_STATUS_OK) {
        *why = "out of memory";
        goto out;
    }
    ldns_resolver_set_port(res, (uint16_t)port);
    ldns_resolver_set_timeout(res, (struct timeval){.tv_sec = QUERY_TIMEOUT_S});
    ldns_resolver_set_retry(res, 1);
    ldns_resolver_set_retrans(res, 0);
    ldns_resolver_set_fallback(res, true);
    ldns_resolver_set_recursive(res, false);
    ldns_resolver_set_random(res, false);
    ldns_resolver_set_defnames(res, false);
    ldns_resolver_set_dnsrch(res, false);
    if (ldns_resolver_prepare_query_pkt(&q, res, qname, LDNS_RR_TYPE_DS, LDNS_RR_CLASS_IN, 0) !=
        LDNS_STATUS_OK)
        goto out;
    ldns_status s = ldns_resolver_send_pkt(&p, res, q);
    if (s != LDNS_STATUS_OK || !p) {
        *why = s != LDNS_STATUS_OK ? ldns_get_errorstr_by_id(s) : "no answer";
        goto out;
    }
    *why = want->gone ? "a DS is still there" : "no such DS";
    ldns_pkt_rcode rc = ldns_pkt_get_rcode(p);
    if (want->gone &&
        (!ldns_pkt_aa(p) || (rc != LDNS_RCODE_NOERROR && rc != LDNS_RCODE_NXDOMAIN))) {
        /* a lame or failing server proves nothing about the parent's data */
        *why = "no authoritative answer";
        goto out;
    }
    ldns_rr_list *an = ldns_pkt_answer(p);
    bool any = false;
    for (size_t i = 0; an && i < ldns_rr_list_rr_count(an) && !found; i++) {
        ldns_rr *rr = ldns_rr_list_rr(an, i);
        if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_DS ||
            ldns_dname_compare(ldns_rr_owner(rr), qname) != 0)
            continue;
        any = true;
        if (want->gone)
            break;
        uint8_t buf[512];
        size_t len = 0;
        for (size_t k = 0; k < ldns_rr_rd_count(rr); k++) {
            const ldns_rdf *f = ldns_rr_rdf(rr, k);
            if (len + ldns_rdf_size(f) > sizeof(buf))
                break;
            memcpy(buf + len, ldns_rdf_data(f), ldns_rdf_size(f));
            len += ldns_rdf_size(f);
        }
        found = len == want->len && memcmp(buf, want->rdata, len) == 0;
    }
    if (want->gone)
        found = !any;
out:
    ldns_pkt_free(q);
    ldns_pkt_free(p);
    ldns_rdf_deep_free(qname);
    ldns_rdf_deep_free(addr);
    if (res)
        ldns_resolver_deep_free(res);
    return found;
}

/* One round of job j (a copy, off the lock): the wants every server has. */
static void round_of(ds_check_t *c, struct job *j)
{
    for (size_t w = 0; w < j->nwants; w++) {
        size_t have = 0;
        const char *why = "";
        for (size_t s = 0; s < j->nservers; s++) {
            if (__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
                return;
            if (server_has(j->servers[s], j->origin, &j->wants[w], &why))
                have++;
            else if (j->wants[w].gone)
                log_debug("dnssec: zone %s: DS not gone from %s yet (%s)", j->key, j->servers[s],
                          why);
            else
                log_debug("dnssec: zone %s: DS of key %u not at %s yet (%s)", j->key,
                          j->wants[w].tag, j->servers[s], why);
        }
        if (have < j->nservers)
            continue;
        if (j->wants[w].gone)
            log_info("dnssec: zone %s: its DS is gone from every server of the parent (%zu)",
                     j->key, j->nservers);
        else
            log_info("dnssec: zone %s: DS of key %u seen at every server of the parent (%zu)",
                     j->key, j->wants[w].tag, j->nservers);
        c->seen(c->ctx, j->key, &j->wants[w]);
    }
}

static void *main_loop(void *arg)
{
    ds_check_t *c = arg;
    (void)pthread_setname_np(pthread_self(), "tern-dscheck");
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        time_t now = mono_s(), next = now + 3600;
        size_t due = c->n;
        for (size_t i = 0; i < c->n; i++) {
            if (c->jobs[i].next <= now && due == c->n)
                due = i;
            if (c->jobs[i].next < next)
                next = c->jobs[i].next;
        }
        if (due == c->n) {
            struct timespec until = {.tv_sec = next};
            (void)pthread_cond_timedwait(&c->wake, &c->mu, &until);
            continue;
        }
        struct job j;
        c->jobs[due].next = now + c->jobs[due].interval;
        int copied = job_copy(&j, &c->jobs[due]);
        pthread_mutex_unlock(&c->mu);
        if (copied == 0) {
            round_of(c, &j);
            job_clear(&j);
        }
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int ds_check_start(ds_check_t *c)
{
    int rc = pthread_create(&c->thread, NULL, main_loop, c);
    if (rc != 0)
        return -rc;
    c->started = true;
    return 0;
}

void ds_check_free(ds_check_t *c)
{
    if (!c)
        return;
    if (c->started) {
        pthread_mutex_lock(&c->mu);
        __atomic_store_n(&c->stop, true, __ATOMIC_RELEASE);
        pthread_cond_signal(&c->wake);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
    }
    for (size_t i = 0; i < c->n; i++)
        job_clear(&c->jobs[i]);
    free(c->jobs);
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
