/*
 * limit_thread.c — the shared state's life and its thread ("tern-limit", see limit.h): drains
 * the workers' rings of newly limited prefixes into log lines (at most LOG_PER_S a second, the
 * rest summed up), and rotates a random cookie secret every cookies.rotate seconds.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sodium.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "limit_int.h"
#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/common/rcu.h"

/* How often the thread looks at the rings: a limited prefix shows in the log within this. */
#define TICK_MS 200
/* Log lines about limited prefixes per second at most: a spoofed-source flood from a million
 * prefixes must not become a million log lines; the rest is one summary line per second. */
#define LOG_PER_S 10

static const char *const class_names[LIMIT_RC_COUNT] = {
    [LIMIT_RC_ANSWER] = "answers",    [LIMIT_RC_NODATA] = "nodata",
    [LIMIT_RC_NXDOMAIN] = "nxdomain", [LIMIT_RC_REFERRAL] = "referrals",
    [LIMIT_RC_WILDCARD] = "wildcard", [LIMIT_RC_ERROR] = "errors"};

/* A fresh random secret (libsodium's CSPRNG: getrandom() underneath). */
static int random_secret(uint8_t out[16])
{
    randombytes_buf(out, 16);
    return 0;
}

limit_shared_t *limit_shared_new(unsigned workers)
{
    /* libsodium (SipHash-2-4, the random secret) wants this once; later calls return 1 */
    if (sodium_init() < 0)
        return NULL;
    return limit_shared_alloc(workers);
}

/* Log what the rings hold, LOG_PER_S lines per second at most. */
static void drain(limit_shared_t *sh, unsigned *budget)
{
    uint64_t suppressed = 0, dropped = 0;
    for (unsigned i = 0; i < sh->nrings; i++) {
        ring_t *r = &sh->rings[i];
        uint32_t tail = r->tail, head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
        for (; tail != head; tail++) {
            const ring_rec_t *rec = &r->rec[tail % RING_SIZE];
            if (*budget == 0) {
                suppressed++;
                continue;
            }
            (*budget)--;
            char a[64];
            inet_ntop(rec->family == 6 ? AF_INET6 : AF_INET, rec->addr, a, sizeof(a));
            log_info("rrl: limiting %s/%u (%s)", a, rec->len,
                     rec->cls < LIMIT_RC_COUNT ? class_names[rec->cls] : "?");
        }
        __atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
        dropped += __atomic_exchange_n(&r->dropped, 0, __ATOMIC_RELAXED);
    }
    if (suppressed || dropped)
        log_info("rrl: %llu more newly limited prefixes not logged (%llu beyond the rings)",
                 (unsigned long long)(suppressed + dropped), (unsigned long long)dropped);
    pthread_mutex_lock(&sh->mu);
    sh->st.log_dropped += suppressed + dropped;
    pthread_mutex_unlock(&sh->mu);
}

static void *run(void *arg)
{
    limit_shared_t *sh = arg;
    (void)pthread_setname_np(pthread_self(), "tern-limit");
    unsigned budget = LOG_PER_S;
    int64_t second = tern_monotonic_ms();
    while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p = {.fd = sh->evfd, .events = POLLIN};
        (void)poll(&p, 1, TICK_MS);
        int64_t now = tern_monotonic_ms();
        if (now - second >= 1000) {
            second = now;
            budget = LOG_PER_S;
        }
        unsigned before = budget;
        drain(sh, &budget);
        if (before != budget) {
            pthread_mutex_lock(&sh->mu);
            sh->st.logged += before - budget;
            pthread_mutex_unlock(&sh->mu);
        }
        /* a random secret is replaced every rotate seconds; the old one stays valid an hour as
         * the previous one (cookies live an hour: RFC 9018 §4.3) */
        pthread_mutex_lock(&sh->mu);
        bool rotate = !sh->secret_fixed && sh->rotate_s && sh->secrets &&
                      now - sh->rotated_at >= (int64_t)sh->rotate_s * 1000;
        pthread_mutex_unlock(&sh->mu);
        if (rotate) {
            uint8_t s[16];
            if (random_secret(s) == 0 && limit_publish_secret(sh, s) == 0) {
                pthread_mutex_lock(&sh->mu);
                sh->rotated_at = now;
                sh->st.rotations++;
                pthread_mutex_unlock(&sh->mu);
                log_info("cookies: server secret rotated");
            }
        }
    }
    return NULL;
}

int limit_shared_start(limit_shared_t *sh)
{
    if (sh->started)
        return 0;
    sh->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (sh->evfd < 0)
        return -errno;
    int rc = pthread_create(&sh->thread, NULL, run, sh);
    if (rc != 0) {
        log_err("limit: cannot start its thread: %s", strerror(rc));
        close(sh->evfd);
        sh->evfd = -1;
        return -rc;
    }
    sh->started = true;
    return 0;
}

void limit_shared_free(limit_shared_t *sh)
{
    if (!sh)
        return;
    if (sh->started) {
        uint64_t one = 1;
        __atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
        (void)!write(sh->evfd, &one, sizeof(one));
        pthread_join(sh->thread, NULL);
    }
    if (sh->evfd >= 0)
        close(sh->evfd);
    limit_shared_release_tables(sh);
    free(sh);
}

/* The cookie settings of cfg (loader thread): a configured secret is published as it is (the
 * previous one stays valid); without one, a random secret is made once and then rotated. */
int limit_shared_cookies(limit_shared_t *sh, const config_cookies_t *ck)
{
    if (!ck->enabled)
        return 0;
    int rc = 0;
    if (ck->have_secret) {
        pthread_mutex_lock(&sh->mu);
        bool same =
            sh->secret_fixed && sh->secrets && memcmp(sh->secrets->cur, ck->secret, 16) == 0;
        pthread_mutex_unlock(&sh->mu);
        if (!same)
            rc = limit_publish_secret(sh, ck->secret);
        pthread_mutex_lock(&sh->mu);
        sh->secret_fixed = true;
        pthread_mutex_unlock(&sh->mu);
        return rc;
    }
    pthread_mutex_lock(&sh->mu);
    bool need = !sh->secrets || sh->secret_fixed;
    sh->secret_fixed = false;
    sh->rotate_s = ck->rotate_s ? ck->rotate_s : 86400;
    pthread_mutex_unlock(&sh->mu);
    if (need) {
        uint8_t s[16];
        if ((rc = random_secret(s)) < 0)
            return rc;
        if ((rc = limit_publish_secret(sh, s)) < 0)
            return rc;
        pthread_mutex_lock(&sh->mu);
        sh->rotated_at = tern_monotonic_ms();
        pthread_mutex_unlock(&sh->mu);
    }
    return 0;
}

void limit_shared_stats(limit_shared_t *sh, limit_stats_t *out)
{
    pthread_mutex_lock(&sh->mu);
    *out = sh->st;
    pthread_mutex_unlock(&sh->mu);
}
