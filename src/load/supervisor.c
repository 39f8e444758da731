/*
 * supervisor.c — see supervisor.h. The deadline watch is one thread for the whole stop sequence:
 * it sleeps until the current stop's deadline and logs that stop if it is still running.
 */
#include "tern/load/supervisor.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"

struct svc {
    supervisor_service_t s;
    bool started, stopped;
};

struct supervisor {
    struct svc *v;
    size_t n, cap;
    /* the stop sequence, as the watch sees it (under mu) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const struct svc *cur; /* the stop running, or NULL */
    uint64_t seq;          /* stops begun so far */
    bool done;
};

supervisor_t *supervisor_new(void)
{
    supervisor_t *sv = calloc(1, sizeof(*sv));
    if (!sv)
        return NULL;
    pthread_mutex_init(&sv->mu, NULL);
    pthread_cond_init(&sv->cv, NULL);
    return sv;
}

int supervisor_add(supervisor_t *sv, const supervisor_service_t *svc)
{
    if (tern_grow((void **)&sv->v, &sv->cap, sv->n + 1, sizeof(*sv->v)) < 0) {
        log_err("supervisor: out of memory; %s stopped at once", svc->name);
        if (svc->stop)
            svc->stop(svc->ctx);
        return TERN_ENOMEM;
    }
    sv->v[sv->n++] = (struct svc){.s = *svc};
    return 0;
}

int supervisor_start(supervisor_t *sv)
{
    for (size_t i = 0; i < sv->n; i++) {
        struct svc *v = &sv->v[i];
        if (v->started || v->stopped)
            continue;
        int rc = v->s.start ? v->s.start(v->s.ctx) : 0;
        if (rc < 0)
            return rc;
        v->started = true;
    }
    return 0;
}

/* The watch thread: logs a stop still running at its deadline (once per stop). */
static void *watch(void *arg)
{
    supervisor_t *sv = arg;
    (void)pthread_setname_np(pthread_self(), "tern-supervise");
    pthread_mutex_lock(&sv->mu);
    while (!sv->done) {
        if (!sv->cur) {
            pthread_cond_wait(&sv->cv, &sv->mu);
            continue;
        }
        const struct svc *v = sv->cur;
        uint64_t seq = sv->seq;
        uint32_t ms = v->s.deadline_ms ? v->s.deadline_ms : SUPERVISOR_STOP_DEADLINE_MS;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += ms / 1000;
        until.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        int e = 0;
        while (!sv->done && sv->seq == seq && e != ETIMEDOUT)
            e = pthread_cond_timedwait(&sv->cv, &sv->mu, &until);
        if (e == ETIMEDOUT && sv->seq == seq && sv->cur) {
            log_warn("supervisor: %s has not stopped after %u ms; still waiting for it", v->s.name,
                     ms);
            while (!sv->done && sv->seq == seq)
                pthread_cond_wait(&sv->cv, &sv->mu);
        }
    }
    pthread_mutex_unlock(&sv->mu);
    return NULL;
}

/* Tell the watch which stop runs now (NULL: none). */
static void watching(supervisor_t *sv, const struct svc *v)
{
    pthread_mutex_lock(&sv->mu);
    sv->cur = v;
    sv->seq++;
    pthread_cond_signal(&sv->cv);
    pthread_mutex_unlock(&sv->mu);
}

void supervisor_stop(supervisor_t *sv)
{
    if (!sv)
        return;
    pthread_t w;
    sv->done = false;
    bool watched = pthread_create(&w, NULL, watch, sv) == 0; /* else: stops unwatched */
    for (int rank = SUPERVISOR_CTL; rank <= SUPERVISOR_QLOG; rank++) {
        for (size_t i = 0; i < sv->n; i++) {
            struct svc *v = &sv->v[i];
            if ((int)v->s.rank != rank || v->stopped)
                continue;
            watching(sv, v);
            int64_t t0 = tern_monotonic_ms();
            if (v->s.stop)
                v->s.stop(v->s.ctx);
            v->stopped = true;
            log_debug("supervisor: %s stopped in %lld ms", v->s.name,
                      (long long)(tern_monotonic_ms() - t0));
        }
    }
    watching(sv, NULL);
    if (watched) {
        pthread_mutex_lock(&sv->mu);
        sv->done = true;
        pthread_cond_signal(&sv->cv);
        pthread_mutex_unlock(&sv->mu);
        pthread_join(w, NULL);
    }
}

void supervisor_free(supervisor_t *sv)
{
    if (!sv)
        return;
    supervisor_stop(sv);
    pthread_mutex_destroy(&sv->mu);
    pthread_cond_destroy(&sv->cv);
    free(sv->v);
    free(sv);
}
