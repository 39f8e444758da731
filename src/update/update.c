/*
 * update.c — see update.h. The service's state, its queue and its thread; what one request goes
 * through is update_apply.c's.
 */
#include "tern/update/update.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/common/rcu.h"
#include "tern/source/source_journal.h"
#include "tern/wire/parse.h"
#include "update_int.h"

update_t *update_of(zone_source_t *s)
{
    return s && s->ops == &update_source_ops ? (update_t *)s : NULL;
}

void update_wire(update_t *u, const answer_view_t *const *published, update_reply_fn reply,
                 void *reply_ctx)
{
    u->published = published;
    u->reply = reply;
    u->reply_ctx = reply_ctx;
}

bool update_submit(update_t *u, const uint8_t *msg, size_t len, const char *key,
                   const struct sockaddr_storage *peer, uint64_t token)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return false;
    memcpy(copy, msg, len);
    pthread_mutex_lock(&u->mu);
    u->st.received++;
    if (u->qlen == UPDATE_QUEUE_MAX || u->stop || !u->started) {
        u->st.queue_full++;
        pthread_mutex_unlock(&u->mu);
        free(copy);
        return false;
    }
    ureq_t *r = &u->q[(u->qhead + u->qlen++) % UPDATE_QUEUE_MAX];
    r->msg = copy;
    r->len = len;
    r->peer = *peer;
    r->token = token;
    r->signed_ = key != NULL;
    snprintf(r->key, sizeof(r->key), "%s", key ? key : "");
    pthread_cond_signal(&u->wake);
    pthread_mutex_unlock(&u->mu);
    return true;
}

unsigned update_apply_msg(update_t *u, const uint8_t *msg, size_t len, const char *who, char *why,
                          size_t whylen)
{
    uwait_t w = {0};
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) {
        snprintf(why, whylen, "out of memory");
        return WIRE_RC_SERVFAIL;
    }
    memcpy(copy, msg, len);
    pthread_mutex_lock(&u->mu);
    if (u->qlen == UPDATE_QUEUE_MAX || u->stop || !u->started) {
        u->st.queue_full++;
        pthread_mutex_unlock(&u->mu);
        free(copy);
        snprintf(why, whylen, "the update service is %s",
                 u->stop || !u->started ? "not running" : "busy");
        return WIRE_RC_SERVFAIL;
    }
    ureq_t *r = &u->q[(u->qhead + u->qlen++) % UPDATE_QUEUE_MAX];
    memset(r, 0, sizeof(*r));
    r->msg = copy;
    r->len = len;
    r->preauth = true;
    r->wait = &w;
    snprintf(r->key, sizeof(r->key), "%s", who);
    pthread_cond_signal(&u->wake);
    /* the thread answers within its publish deadline; a stop answers nothing, so it ends the
     * wait too */
    while (!w.done && !u->stop)
        pthread_cond_wait(&u->done, &u->mu);
    if (!w.done) { /* stopped: take the request back if it is still queued */
        for (size_t i = 0; i < u->qlen; i++) {
            ureq_t *q = &u->q[(u->qhead + i) % UPDATE_QUEUE_MAX];
            if (q->wait == &w)
                q->wait = NULL;
        }
        for (size_t i = 0; i < UPDATE_BATCH_MAX; i++)
            if (u->inflight[i] == &w)
                u->inflight[i] = NULL;
    }
    pthread_mutex_unlock(&u->mu);
    if (!w.done) {
        snprintf(why, whylen, "the update service stopped");
        return WIRE_RC_SERVFAIL;
    }
    snprintf(why, whylen, "%s", w.why);
    return w.rcode;
}

int update_flush(update_t *u, const char *key, char *msg, size_t msglen)
{
    uflush_t f = {.rc = 1};
    snprintf(f.key, sizeof(f.key), "%s", key);
    pthread_mutex_lock(&u->mu);
    if (!u->started || u->stop || u->nflush == UPDATE_FLUSH_MAX) {
        pthread_mutex_unlock(&u->mu);
        snprintf(msg, msglen, "the update service is not running or busy");
        return TERN_EAGAIN;
    }
    u->flushq[u->nflush++] = &f;
    pthread_cond_signal(&u->wake);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += UPDATE_PUBLISH_WAIT_MS / 1000;
    while (f.rc == 1 && !u->stop)
        if (pthread_cond_timedwait(&u->done, &u->mu, &until) == ETIMEDOUT)
            break;
    int rc = f.rc;
    if (rc == 1) { /* still queued or running: take it back if it has not started */
        for (size_t i = 0; i < u->nflush; i++)
            if (u->flushq[i] == &f) {
                memmove(&u->flushq[i], &u->flushq[i + 1], (u->nflush - i - 1) * sizeof(*u->flushq));
                u->nflush--;
            }
        while (f.rc == 1 && f.running)
            pthread_cond_wait(&u->done, &u->mu); /* a write under way: its stack is ours */
        rc = f.rc == 1 ? TERN_ETIMEDOUT : f.rc;
    }
    pthread_mutex_unlock(&u->mu);
    snprintf(msg, msglen, "%s", rc == TERN_ETIMEDOUT ? "timed out" : f.msg);
    return rc;
}

void update_get_stats(update_t *u, update_stats_t *out)
{
    pthread_mutex_lock(&u->mu);
    *out = u->st;
    pthread_mutex_unlock(&u->mu);
}

size_t update_recent(update_t *u, const char *key, update_audit_t *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->nring && n < max; i++) {
        const uaudit_t *a = &u->ring[(u->rhead + UPDATE_AUDIT_MAX - 1 - i) % UPDATE_AUDIT_MAX];
        if (strcmp(a->key, key) == 0)
            out[n++] = a->a;
    }
    pthread_mutex_unlock(&u->mu);
    return n;
}

void update_audit_note(update_t *u, const char *key, const update_audit_t *a)
{
    pthread_mutex_lock(&u->mu);
    uaudit_t *r = &u->ring[u->rhead];
    snprintf(r->key, sizeof(r->key), "%s", key);
    r->a = *a;
    u->rhead = (u->rhead + 1) % UPDATE_AUDIT_MAX;
    if (u->nring < UPDATE_AUDIT_MAX)
        u->nring++;
    pthread_mutex_unlock(&u->mu);
}

/* ---- the zones' settings (configure, on the loader thread) ------------------------------- */

void update_zones_free(uzone_t *z, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(z[i].key);
        free(z[i].origin);
        free(z[i].file);
        free(z[i].journal);
        for (size_t j = 0; j < z[i].nrules; j++) {
            free(z[i].rules[j].key);
            free(z[i].rules[j].addresses.p);
        }
        free(z[i].rules);
    }
    free(z);
}

static int zone_settings(uzone_t *d, const config_zone_t *cz)
{
    if (!(d->key = zone_source_key(cz->origin)) || !(d->origin = strdup(cz->origin)))
        return TERN_ENOMEM;
    size_t n = dname_from_str(cz->origin, strlen(cz->origin), false, d->apex, NULL) > 0
                   ? dname_len(d->apex)
                   : 0;
    if (!n)
        return TERN_EINVAL;
    d->apex_len = (uint8_t)dname_lower(d->apex, d->apex);
    d->secondary = cz->nprimaries > 0;
    d->json = cz->file && cz->format == CONFIG_ZONE_JSON;
    d->redis = !cz->file && !cz->nprimaries;
    d->signed_ = cz->ndnssec_keys > 0;
    if (cz->file && !d->secondary &&
        (!(d->file = strdup(cz->file)) || !(d->journal = source_journal_path(cz->file))))
        return TERN_ENOMEM;
    if (cz->nallow_update && !(d->rules = calloc(cz->nallow_update, sizeof(*d->rules))))
        return TERN_ENOMEM;
    for (size_t j = 0; j < cz->nallow_update; j++) {
        d->nrules++;
        if ((cz->allow_update[j].key && !(d->rules[j].key = strdup(cz->allow_update[j].key))) ||
            config_prefix_list_copy(&d->rules[j].addresses, &cz->allow_update[j].addresses) < 0)
            return TERN_ENOMEM;
    }
    return 0;
}

static int update_configure(zone_source_t *s, const config_t *cfg, const config_t *prev,
                            bool geo_changed)
{
    (void)prev;
    (void)geo_changed;
    update_t *u = (update_t *)s;
    uzone_t *z = calloc(cfg->nzones ? cfg->nzones : 1, sizeof(*z));
    size_t n = 0;
    int rc = z ? 0 : TERN_ENOMEM;
    for (size_t i = 0; i < cfg->nzones && rc == 0; i++) {
        if (!cfg->zones[i].file && !cfg->zones[i].nprimaries && !cfg->zones[i].nallow_update)
            continue; /* transfer settings of a Redis zone, nothing about updates */
        rc = zone_settings(&z[n++], &cfg->zones[i]);
    }
    if (rc < 0) {
        update_zones_free(z, n);
        log_err("update: cannot take the new zones' settings (%s); the previous ones stay",
                tern_strerror(rc));
        return 0;
    }
    pthread_mutex_lock(&u->mu);
    uzone_t *old = u->z;
    size_t nold = u->nz;
    /* a zone that stays keeps what the service learnt of it (a journal not written back) */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < nold; j++)
            if (strcmp(z[i].key, old[j].key) == 0)
                z[i].dirty_since = old[j].dirty_since;
    u->z = z;
    u->nz = n;
    u->max_records = cfg->update_max_records;
    u->rate = cfg->update_rate;
    u->sync_s = cfg->zonefile_sync;
    config_redis_t nr = {0};
    bool redis_new = !redis_settings_same(&u->rcfg, &cfg->redis);
    if (redis_new && redis_settings_copy(&nr, &cfg->redis) == 0) {
        redis_settings_free(&u->rcfg);
        u->rcfg = nr;
        u->rgen++;
    }
    pthread_mutex_unlock(&u->mu);
    update_zones_free(old, nold);
    return 0;
}

/* ---- the thread ---------------------------------------------------------------------------- */

/* The requests r (n of them, taken off the queue): each handled, their changes published
 * together, then each answered — through the reply hook, or to its waiter (update_apply_msg()). */
static void handle_batch(update_t *u, ureq_t *r, size_t n)
{
    ubatch_t b = {.n = 0};
    unsigned rc[UPDATE_BATCH_MAX];
    int zi[UPDATE_BATCH_MAX];
    char why[UPDATE_BATCH_MAX][256];
    for (size_t i = 0; i < n; i++) {
        why[i][0] = '\0';
        rc[i] = update_handle(u, &r[i], &b, &zi[i], why[i], sizeof(why[i]));
    }
    update_batch_publish(u, &b);
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < n; i++) {
        if (rc[i] == WIRE_RC_NOERROR && zi[i] >= 0) {
            if (b.z[zi[i]].failed) {
                rc[i] = WIRE_RC_SERVFAIL;
                snprintf(why[i], sizeof(why[i]), "journaled but not served in time");
            } else {
                u->st.applied++;
            }
        }
        u->st.rcode[rc[i] & 15]++;
    }
    pthread_mutex_unlock(&u->mu);
    for (size_t i = 0; i < n; i++) {
        free(r[i].msg);
        if (!r[i].preauth && u->reply)
            u->reply(u->reply_ctx, r[i].token, rc[i]);
    }
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < n; i++) {
        /* a waiter waits on its stack until it sees done (or took its slot back) */
        if (r[i].preauth && u->inflight[i]) {
            u->inflight[i]->rcode = rc[i];
            snprintf(u->inflight[i]->why, sizeof(u->inflight[i]->why), "%.255s", why[i]);
            u->inflight[i]->done = true;
        }
        u->inflight[i] = NULL;
    }
    pthread_mutex_unlock(&u->mu);
}

/* Under mu: the next thing to do, waiting for it (at most a second: zonefile_sync's clock). */
static void *update_main(void *arg)
{
    update_t *u = arg;
    (void)pthread_setname_np(pthread_self(), "tern-update");
    tern_rcu_register();
    tern_rcu_offline();
    pthread_mutex_lock(&u->mu);
    while (!u->stop) {
        if (u->nflush) {
            uflush_t *f = u->flushq[0];
            memmove(&u->flushq[0], &u->flushq[1], (u->nflush - 1) * sizeof(*u->flushq));
            u->nflush--;
            f->running = true;
            pthread_mutex_unlock(&u->mu);
            int rc = update_flush_zone(u, f->key, f->msg, sizeof(f->msg));
            pthread_mutex_lock(&u->mu);
            f->rc = rc;
            f->running = false;
            pthread_cond_broadcast(&u->done);
        } else if (u->qlen) {
            ureq_t r[UPDATE_BATCH_MAX];
            size_t n = 0;
            for (; u->qlen && n < UPDATE_BATCH_MAX; n++) {
                r[n] = u->q[u->qhead];
                u->inflight[n] = r[n].wait;
                u->qhead = (u->qhead + 1) % UPDATE_QUEUE_MAX;
                u->qlen--;
            }
            pthread_mutex_unlock(&u->mu);
            handle_batch(u, r, n);
            pthread_mutex_lock(&u->mu);
            pthread_cond_broadcast(&u->done);
        } else {
            pthread_mutex_unlock(&u->mu);
            update_sync_due(u);
            pthread_mutex_lock(&u->mu);
            if (u->stop || u->qlen || u->nflush)
                continue;
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1;
            pthread_cond_timedwait(&u->wake, &u->mu, &until);
        }
    }
    pthread_cond_broadcast(&u->done);
    pthread_mutex_unlock(&u->mu);
    tern_rcu_unregister();
    return NULL;
}

/* ---- the source's hooks ---------------------------------------------------------------------- */

static zone_source_t *update_new(const zone_source_env_t *env)
{
    update_t *u = calloc(1, sizeof(*u));
    if (!u)
        return NULL;
    u->base.ops = &update_source_ops;
    u->sink = env->sink;
    pthread_mutex_init(&u->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&u->wake, &ca);
    pthread_cond_init(&u->done, &ca);
    pthread_cond_init(&u->pub, &ca);
    pthread_condattr_destroy(&ca);
    u->max_records = 1000;
    u->rate = 50;
    return &u->base;
}

static void update_start(zone_source_t *s)
{
    update_t *u = (update_t *)s;
    pthread_mutex_lock(&u->mu);
    bool go = !u->started && !u->stop && u->published;
    u->started = go;
    pthread_mutex_unlock(&u->mu);
    if (go && pthread_create(&u->t, NULL, update_main, u) != 0) {
        log_err("update: cannot start its thread: %s; UPDATE is answered SERVFAIL",
                strerror(errno));
        pthread_mutex_lock(&u->mu);
        u->started = false;
        pthread_mutex_unlock(&u->mu);
    }
}

static void update_published(zone_source_t *s, const zone_table_t *table, const config_t *cfg)
{
    (void)table;
    (void)cfg;
    update_t *u = (update_t *)s;
    pthread_mutex_lock(&u->mu);
    u->pubgen++;
    pthread_cond_broadcast(&u->pub);
    pthread_mutex_unlock(&u->mu);
}

static void update_stop(zone_source_t *s)
{
    update_t *u = (update_t *)s;
    pthread_mutex_lock(&u->mu);
    bool join = u->started && !u->stop;
    u->stop = true;
    pthread_cond_broadcast(&u->wake);
    pthread_cond_broadcast(&u->pub);
    pthread_cond_broadcast(&u->done);
    pthread_mutex_unlock(&u->mu);
    if (join)
        pthread_join(u->t, NULL);
    /* what was still queued is not answered: the out thread closes its connections */
    pthread_mutex_lock(&u->mu);
    for (; u->qlen; u->qlen--, u->qhead = (u->qhead + 1) % UPDATE_QUEUE_MAX)
        free(u->q[u->qhead].msg);
    pthread_mutex_unlock(&u->mu);
}

static void update_free(zone_source_t *s)
{
    update_t *u = (update_t *)s;
    update_redis_close(u);
    redis_settings_free(&u->rcfg);
    update_zones_free(u->z, u->nz);
    free(u->buckets);
    pthread_mutex_destroy(&u->mu);
    pthread_cond_destroy(&u->wake);
    pthread_cond_destroy(&u->done);
    pthread_cond_destroy(&u->pub);
    free(u);
}

static void update_stats_hook(zone_source_t *s, zone_source_stats_t *out)
{
    update_t *u = (update_t *)s;
    pthread_mutex_lock(&u->mu);
    out->running = u->started && !u->stop;
    out->connected = true;
    out->zones = 0;
    out->failed = 0;
    pthread_mutex_unlock(&u->mu);
}

const zone_source_ops_t update_source_ops = {
    .name = "update",
    .what = "dynamic updates",
    .previous = "data",
    .new = update_new,
    .configure = update_configure,
    .start = update_start,
    .published = update_published,
    .stats = update_stats_hook,
    .stop = update_stop,
    .free = update_free,
};
