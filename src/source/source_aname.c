/*
 * source_aname.c — see source_aname.h. Moved out of the loader (issue 28): the loader's aname_*
 * code.
 */
#include "tern/source/source_aname.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tern/answer/answer.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"

typedef struct source_aname {
    zone_source_t base;
    zone_source_env_t env;
    /* made by the loader thread the first time some zone has a target outside the served
     * zones; read by the stats readers (atomic) */
    aname_resolver_t *r;
    bool may_start; /* the loader thread runs (start()) */
    bool started;
    pthread_mutex_t mu;    /* next */
    aname_results_t *next; /* arrived, not collected yet */
    aname_results_t *cur;  /* in the next view (loader thread) */
    /* readable once a complete first round is in the published view; made with the resolver */
    int ready_fd;
    bool ready_told;
    size_t warned; /* exits last warned about for want of an upstream */
} source_aname_t;

/* Resolver thread: new results; the loader thread takes them (collect()). */
static void arrived(void *ctx, aname_results_t *res)
{
    source_aname_t *a = ctx;
    pthread_mutex_lock(&a->mu);
    aname_results_t *old = a->next;
    a->next = res;
    pthread_mutex_unlock(&a->mu);
    aname_results_release(old);
    a->env.sink.poke(a->env.sink.ctx, &a->base);
}

static bool collect(zone_source_t *s)
{
    source_aname_t *a = (source_aname_t *)s;
    pthread_mutex_lock(&a->mu);
    aname_results_t *res = a->next;
    a->next = NULL;
    pthread_mutex_unlock(&a->mu);
    if (!res)
        return false;
    aname_results_release(a->cur);
    a->cur = res;
    return true;
}

aname_results_t *source_aname_results(zone_source_t *s)
{
    source_aname_t *a = (source_aname_t *)s;
    return a->cur ? aname_results_retain(a->cur) : NULL;
}

/* cfg's upstreams to the resolver (a reload may change them). */
static int configure(zone_source_t *s, const config_t *cfg, const config_t *prev, bool geo_changed)
{
    source_aname_t *a = (source_aname_t *)s;
    if (!a->r || !cfg)
        return 0;
    aname_upstream_t ups[CONFIG_MAX_UPSTREAMS];
    size_t n =
        cfg->aname.nupstreams < CONFIG_MAX_UPSTREAMS ? cfg->aname.nupstreams : CONFIG_MAX_UPSTREAMS;
    for (size_t i = 0; i < n; i++) {
        const config_upstream_t *u = &cfg->aname.upstreams[i];
        memset(&ups[i], 0, sizeof(ups[i]));
        snprintf(ups[i].host, sizeof(ups[i].host), "%s", u->host ? u->host : "");
        ups[i].port = u->port;
        ups[i].tcp = u->tcp;
        ups[i].timeout_ms = u->timeout_ms;
    }
    if (aname_resolver_configure(a->r, ups, n) < 0)
        log_err("aname: out of memory; the resolver keeps its previous upstreams");
    char def[4096];
    if (aname_resolver_set_state(a->r, config_aname_state_file(&cfg->aname, def, sizeof(def)),
                                 cfg->aname.max_stale_s) < 0)
        log_err("aname: out of memory; the resolver keeps its previous state file");
    return 0;
}

static void start(zone_source_t *s)
{
    source_aname_t *a = (source_aname_t *)s;
    a->may_start = true;
    if (a->r && !a->started)
        a->started = aname_resolver_start(a->r) == 0;
}

/* Every name where an ANAME's A or AAAA leaves the zones of t (answer_aname_exit()), back to
 * back in *names (malloc'd), n of them. False when out of memory. */
static bool exits(const zone_table_t *t, uint8_t **names, size_t *n)
{
    size_t len = 0, cap = 0;
    *names = NULL;
    *n = 0;
    for (size_t i = 0; i < zone_table_count(t); i++) {
        const zone_t *z = zone_table_at(t, i);
        if (!z || !z->aname_count)
            continue;
        for (size_t k = 0; k < z->node_count; k++) {
            const zone_rrset_t *an = zone_node_rrset(zone_node_at(z, (uint32_t)k), WIRE_T_ANAME);
            if (!an)
                continue;
            static const uint16_t types[] = {WIRE_T_A, WIRE_T_AAAA};
            for (size_t ty = 0; ty < 2; ty++) {
                uint8_t out[DNAME_MAXLEN];
                if (!answer_aname_exit(t, an->rdata + 2, types[ty], out))
                    continue;
                size_t ol = dname_len(out);
                if (tern_grow((void **)names, &cap, len + ol, 1) < 0)
                    return false;
                memcpy(*names + len, out, ol);
                len += ol;
                (*n)++;
            }
        }
    }
    return true;
}

/* published(): the resolver told the targets in list (made the first time there is one). */
static void follow(source_aname_t *a, const uint8_t **list, size_t n, const config_t *cfg)
{
    aname_resolver_t *made = NULL;
    if (!a->r && (made = aname_resolver_new(arrived, a)) != NULL) {
        a->ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        __atomic_store_n(&a->r, made, __ATOMIC_RELEASE); /* source_aname_stats() */
    }
    if (!a->r) {
        log_err("aname: out of memory; targets outside the served zones are not resolved");
    } else {
        if (!a->started)
            (void)configure(&a->base, cfg, NULL, false);
        if (aname_resolver_set_targets(a->r, list, n) < 0)
            log_err("aname: out of memory; the resolver keeps its previous targets");
        if (a->may_start)
            start(&a->base);
    }
    if (n && cfg && cfg->aname.nupstreams == 0 && n != a->warned) {
        char nm[DNAME_MAXLEN * 4 + 1];
        (void)dname_to_str(list[0], nm, sizeof(nm));
        log_warn("aname: %zu ANAME targets (such as %s) are outside the served zones and no "
                 "upstream is configured (aname.upstreams): A and AAAA at their owners "
                 "answer SERVFAIL",
                 n, nm);
    }
    a->warned = n && cfg && !cfg->aname.nupstreams ? n : 0;
}

/* After each publish: every exit of the table served, to the resolver; and, once a complete
 * first round is in that view, the ready descriptor. */
static void published(zone_source_t *s, const zone_table_t *t, const config_t *cfg)
{
    source_aname_t *a = (source_aname_t *)s;
    uint8_t *names = NULL;
    const uint8_t **list = NULL;
    size_t n = 0;
    bool ok = exits(t, &names, &n);
    if (ok && n && !(list = malloc(n * sizeof(*list))))
        ok = false;
    for (size_t i = 0, off = 0; ok && i < n; i++, off += dname_len(names + off))
        list[i] = names + off;
    if (!ok)
        log_err("aname: out of memory; the resolver keeps its previous targets");
    else if (n || a->r)
        follow(a, list, n, cfg);
    free(list);
    free(names);
    if (a->cur && aname_results_complete(a->cur) && !a->ready_told && a->ready_fd >= 0) {
        uint64_t one = 1;
        a->ready_told = write(a->ready_fd, &one, sizeof(one)) == sizeof(one);
    }
}

bool source_aname_stats(zone_source_t *s, aname_stats_t *out)
{
    source_aname_t *a = (source_aname_t *)s;
    memset(out, 0, sizeof(*out));
    aname_resolver_t *r = __atomic_load_n(&a->r, __ATOMIC_ACQUIRE);
    if (!r)
        return false;
    aname_resolver_stats(r, out);
    return true;
}

int source_aname_ready_fd(zone_source_t *s)
{
    source_aname_t *a = (source_aname_t *)s;
    /* made with the resolver, before it is stored (release) */
    return __atomic_load_n(&a->r, __ATOMIC_ACQUIRE) ? a->ready_fd : -1;
}

void source_aname_log_pending(zone_source_t *s)
{
    source_aname_t *a = (source_aname_t *)s;
    aname_resolver_t *r = __atomic_load_n(&a->r, __ATOMIC_ACQUIRE);
    if (r)
        aname_resolver_log_pending(r);
}

static void stats(zone_source_t *s, zone_source_stats_t *out)
{
    aname_stats_t st;
    *out = (zone_source_stats_t){.running = source_aname_stats(s, &st), .connected = true};
}

/* The resolver is freed here (its thread joined): the supervisor stops the sources after the
 * control and metrics threads, which read its counters. */
static void stop(zone_source_t *s)
{
    source_aname_t *a = (source_aname_t *)s;
    aname_resolver_free(a->r);
    __atomic_store_n(&a->r, NULL, __ATOMIC_RELEASE);
    a->started = false;
}

static zone_source_t *new_source(const zone_source_env_t *env)
{
    source_aname_t *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->base.ops = &source_aname_ops;
    a->env = *env;
    a->ready_fd = -1;
    pthread_mutex_init(&a->mu, NULL);
    return &a->base;
}

static void free_source(zone_source_t *s)
{
    source_aname_t *a = (source_aname_t *)s;
    stop(s);
    aname_results_release(a->cur);
    aname_results_release(a->next);
    if (a->ready_fd >= 0)
        close(a->ready_fd);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

const zone_source_ops_t source_aname_ops = {
    .name = "aname",
    .what = "new results",
    .previous = "ones",
    .new = new_source,
    .configure = configure,
    .start = start,
    .collect = collect,
    .published = published,
    .stats = stats,
    .stop = stop,
    .free = free_source,
};
