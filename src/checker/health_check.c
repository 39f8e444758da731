/*
 * health_check.c — the checker thread (see health_check.h).
 *
 * One loop: take the endpoints that are due (at most max_requests in flight), ask Redis who
 * checks them (when configured), start their checks, then wait in epoll for any of them — the
 * sockets libcurl asks us to watch (CURLMOPT_SOCKETFUNCTION, driven by curl_multi_socket_action)
 * and the TCP and ICMP sockets of our own checks — or for the next due time, libcurl's timer, a
 * wakeup (eventfd: new endpoint, override, new settings, stop) or a deadline. Results go to the
 * registry (rank, log of state changes), to the log file and, batched, to Redis.
 *
 * Decisions, and why:
 *   - epoll and curl_multi_socket_action(), not curl_multi_poll(): each event costs the one
 *     socket it is about, so 500 checks in flight cost the same per check as 5.
 *   - The due scan walks the registry's list under its mutex; it runs at most every
 *     SCAN_MIN_MS (checks due within that window start together) or when woken, so 10,000
 *     endpoints on a 1 s interval cost ~100 scans a second, not one per completed check. It
 *     starts after the endpoint the previous scan took last (a referenced cursor), so when more
 *     are due than may run, every endpoint gets its turn instead of the head of the list.
 *   - Easy handles are reused (curl_easy_reset()) from a pool: a check costs its connection,
 *     not a handle's setup.
 *   - A fresh connection per HTTP check (no keep-alive): a check must see what a new client
 *     sees — a server that stopped accepting is down even if an old connection still works.
 *   - libcurl never resolves a name here: the URL's host is the owner (Host header and TLS name)
 *     and CONNECT_TO sends the connection to the record's address literal.
 *   - An HTTP check reads the status line and headers, never the body: the header callback
 *     notes the final status at the blank line and stops the transfer there (header_end()). A
 *     GET of a page of 100 MB costs its headers, not 100 MB per check. libcurl has no option for
 *     "a GET without its body" (NOBODY turns it into a HEAD), so the stop is the callback's
 *     error return, and the noted status, not the transfer's CURLE_WRITE_ERROR, is the result.
 *     The connection cannot be reused after a stop, and is not meant to be (fresh per check);
 *     the reset close (sockopt_nolinger()) tells the server at once to stop sending.
 *   - Load shedding's loads (health_load.h) ride on the checks: a header is read as it passes, a
 *     JSON body (GET) up to HEALTH_LOAD_BODY_MAX; the Redis loads are one pipelined HGET round
 *     trip every load_poll_ms over this thread's Redis connection (poll_loads()). A reading not
 *     renewed for HEALTH_LOAD_STALE_CHECKS intervals is turned unknown by the due scan, so a
 *     stalled source never keeps a record shed.
 *   - Once per load the checker compares what the endpoints ask with what max_requests can give
 *     (check_capacity()) and says so when checks that run to their timeouts cannot keep
 *     check_interval_ms.
 *
 * How one check is made and judged (the HTTP request, the TCP connect, the ICMP echo) is
 * health_probe.c's; this file decides when checks run and where their results go.
 */
#include "tern/checker/health_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "health_check_int.h"
#include "health_int.h"
#include "health_log.h"
#include "health_redis.h"
#include "tern/common/clock.h"
#include "tern/common/dl.h"
#include "tern/common/err.h"
#include "tern/common/log.h"

/* Due checks are gathered at most this often (or at once when woken): a check that starts up
 * to 10 ms late changes nothing, and the scan walks every endpoint. */
#define SCAN_MIN_MS 10
/* With nothing due, look again at least this often (settings, Redis reconnects). */
#define IDLE_MAX_MS 1000
/* An endpoint another node is checking right now is read again this long after its timeout. */
#define WAIT_SLACK_MS 250
/* The capacity check waits this long after new settings: at a reload the loader hands them over
 * before it publishes the new zones and frees the old ones, whose endpoints (gone from the new
 * config) would otherwise be counted too. Publishing takes milliseconds; a second is ample and
 * still "at load" for whoever reads the log. */
#define CAPACITY_SETTLE_MS 1000

struct settings {
    unsigned interval_ms;
    unsigned max_requests;
    unsigned update_interval_s;
    unsigned load_poll_ms;
    char *ca_file;
    config_redis_t redis; /* strings owned; enabled false = none */
    bool log_enabled;
    unsigned log_target;
    bool log_json;
    char *log_path;
};

struct health_checker {
    health_registry_t *reg;
    pthread_t thread;
    bool started;
    int stop;   /* atomic */
    int rescan; /* atomic: look for due endpoints at once */

    pthread_mutex_t mu; /* pending settings and stats */
    struct settings pending;
    bool have_pending;
    health_checker_stats_t st;

    /* checker thread only */
    int epfd;            /* the loop's epoll: curl's sockets, our TCP/ICMP sockets, evfd */
    int evfd;            /* eventfd: wake the loop (any thread) */
    int64_t curl_due_us; /* libcurl's timer (monotonic us), -1 = none */
    int64_t expire_us;   /* the earliest deadline of a TCP/ICMP job, or INT64_MAX */
    CURL **pool;         /* idle easy handles, reset, up to njobs */
    unsigned npool;
    struct ep *cursor;   /* where the next due scan starts (referenced), or NULL */
    int64_t capacity_at; /* monotonic ms: check_capacity() then; 0 = done for these settings */
    CURLM *multi;
    struct settings cur;
    bool have_cur;
    struct job **jobs; /* each allocated once: curl keeps pointers into them */
    unsigned njobs, nbusy;
    hredis_t *redis;
    health_log_t *log; /* the result log (health_log.h), or NULL */
    int64_t load_due;  /* monotonic ms: the next poll of the Redis loads (poll_loads()) */
    bool load_warned;  /* Redis loads wanted without health: redis: said (once while so) */
    bool icmp_logged;
    uint16_t echo_seq;
    hredis_result_t *pub; /* results waiting for Redis */
    unsigned npub, cappub;
};

/* epoll tags: what a ready descriptor is */
enum { TAG_WAKE = 1, TAG_CURL = 2, TAG_JOB = 3 };
#define TAG(kind, v) ((uint64_t)(kind) << 32 | (uint32_t)(v))

/* Look for due endpoints at once (any thread). */
static void wake_loop(health_checker_t *c)
{
    uint64_t one = 1;
    __atomic_store_n(&c->rescan, 1, __ATOMIC_RELEASE);
    (void)!write(c->evfd, &one, sizeof(one));
}

/* ---- settings --------------------------------------------------------------------------- */

static void settings_free(struct settings *s)
{
    free(s->ca_file);
    free(s->log_path);
    redis_settings_free(&s->redis);
    memset(s, 0, sizeof(*s));
}

static int copy_str(char **dst, const char *src)
{
    *dst = NULL;
    return src && !(*dst = strdup(src)) ? TERN_ENOMEM : 0;
}

static int settings_copy(struct settings *d, const config_health_t *h)
{
    memset(d, 0, sizeof(*d));
    d->interval_ms = h->check_interval_ms ? h->check_interval_ms : 10000;
    d->max_requests = h->max_requests ? h->max_requests : 1;
    d->update_interval_s = h->update_interval_s;
    d->load_poll_ms = h->load_poll_ms ? h->load_poll_ms : 1000;
    d->log_enabled = h->log_enabled;
    d->log_target = h->log_target;
    d->log_json = h->log_json;
    if (copy_str(&d->ca_file, h->ca_file) < 0 || copy_str(&d->log_path, h->log_path) < 0 ||
        redis_settings_copy(&d->redis, &h->redis) < 0) {
        settings_free(d);
        return TERN_ENOMEM;
    }
    return 0;
}

int health_checker_configure(health_checker_t *c, const config_health_t *cfg)
{
    struct settings s;
    if (settings_copy(&s, cfg) < 0)
        return TERN_ENOMEM;
    pthread_mutex_lock(&c->mu);
    if (c->have_pending)
        settings_free(&c->pending);
    c->pending = s;
    c->have_pending = true;
    pthread_mutex_unlock(&c->mu);
    wake_loop(c);
    return 0;
}

/* Result lines a log lost (dropped for a stalled reader, or a failed write). */
static void count_log_dropped(health_checker_t *c, uint64_t n)
{
    if (!n)
        return;
    pthread_mutex_lock(&c->mu);
    c->st.log_dropped += n;
    pthread_mutex_unlock(&c->mu);
}

static void open_log(health_checker_t *c)
{
    count_log_dropped(c, health_log_close(c->log));
    c->log = NULL;
    if (!c->cur.log_enabled)
        return;
    if (c->cur.log_target == CONFIG_HEALTH_LOG_STDOUT)
        c->log = health_log_open(NULL, STDOUT_FILENO, c->cur.log_json);
    else if (c->cur.log_target == CONFIG_HEALTH_LOG_STDERR)
        c->log = health_log_open(NULL, STDERR_FILENO, c->cur.log_json);
    else if (c->cur.log_path)
        c->log = health_log_open(c->cur.log_path, -1, c->cur.log_json);
}

static bool same_redis(const config_redis_t *a, const config_redis_t *b)
{
    if (!a->enabled || !b->enabled)
        return a->enabled == b->enabled;
    config_redis_t x = *a, y = *b;
    /* only what the connection uses */
    x.zone_reload_s = y.zone_reload_s = 0;
    return redis_settings_same(&x, &y);
}

/* Take pending settings, if any (checker thread). */
static void apply_settings(health_checker_t *c)
{
    struct settings s;
    pthread_mutex_lock(&c->mu);
    bool have = c->have_pending;
    if (have) {
        s = c->pending;
        c->have_pending = false;
        c->st.redis_enabled = s.redis.enabled;
        if (!s.redis.enabled)
            c->st.redis_connected = false;
    }
    pthread_mutex_unlock(&c->mu);
    if (!have)
        return;
    bool redis_changed = !c->have_cur || !same_redis(&c->cur.redis, &s.redis);
    if (c->have_cur)
        settings_free(&c->cur);
    c->cur = s;
    c->have_cur = true;
    if (redis_changed) {
        hredis_free(c->redis);
        c->redis = s.redis.enabled ? hredis_new(&s.redis) : NULL;
        if (s.redis.enabled && !c->redis)
            log_err("health: out of memory for the redis client; checking locally");
    }
    open_log(c); /* every reload: reopens a rotated file */
    c->capacity_at = tern_monotonic_ms() + CAPACITY_SETTLE_MS;
    /* jobs grow with max_requests; a smaller value just starts fewer */
    if (s.max_requests > c->njobs) {
        struct job **j = realloc(c->jobs, s.max_requests * sizeof(*j));
        if (j) {
            c->jobs = j;
            while (c->njobs < s.max_requests && (j[c->njobs] = calloc(1, sizeof(**j)))) {
                j[c->njobs]->fd = -1;
                j[c->njobs]->idx = c->njobs;
                c->njobs++;
            }
            CURL **p = realloc(c->pool, c->njobs * sizeof(*p));
            if (p)
                c->pool = p;
        }
    }
}

/* ---- results ----------------------------------------------------------------------------- */

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One result line (redins' healthcheck log fields, and tern's state and latency). */
static void log_result(health_checker_t *c, const struct ep *e, int status, const char *state,
                       bool ok, const char *err, uint32_t latency_us, int64_t when)
{
    if (!c->log)
        return;
    const health_spec_t *s = &e->spec;
    char d[HEALTH_RKEY_MAX];
    health_spec_describe(s, d, sizeof(d));
    const health_log_line_t line = {.ip = e->addr_text,
                                    .port = s->port,
                                    .host = s->host,
                                    .uri = s->uri,
                                    .protocol = health_proto_name(s->proto),
                                    .describe = d,
                                    .status = status,
                                    .state = state,
                                    .ok = ok,
                                    .error = err,
                                    .latency_us = latency_us,
                                    .wall_ms = when};
    if (!health_log_put(c->log, &line))
        count_log_dropped(c, 1);
}

/* Queue an own result for Redis (flushed once per loop). */
static void queue_publish(health_checker_t *c, struct ep *e, int status, int64_t when,
                          const char *err)
{
    if (!c->redis)
        return;
    if (c->npub == c->cappub) {
        unsigned n = c->cappub ? c->cappub * 2 : 64;
        hredis_result_t *p = realloc(c->pub, n * sizeof(*p));
        if (!p)
            return;
        c->pub = p;
        c->cappub = n;
    }
    health_ep_retain(&e->pub); /* until published */
    char *copy = err && *err ? strdup(err) : NULL;
    c->pub[c->npub++] = (hredis_result_t){.e = e, .status = status, .wall_ms = when, .error = copy};
}

static void flush_publish(health_checker_t *c)
{
    if (!c->npub)
        return;
    if (hredis_ready(c->redis, tern_monotonic_ms()))
        (void)hredis_publish(c->redis, c->pub, c->npub, c->cur.update_interval_s);
    for (unsigned i = 0; i < c->npub; i++) {
        free((char *)c->pub[i].error);
        health_ep_release((health_ep_t *)&c->pub[i].e->pub);
    }
    c->npub = 0;
}

/* The end of job j: record, log, queue for Redis, free the job. */
static void finish(health_checker_t *c, struct job *j, bool ok, const char *err)
{
    struct ep *e = j->e;
    int64_t now_us = tern_monotonic_us(), when = wall_ms();
    uint32_t lat = (uint32_t)(now_us - j->start_us);
    health_registry_t *r = c->reg;
    pthread_mutex_lock(&r->mu);
    health_ep_result(e, ok, err, lat, when);
    if (e->spec.load_src && e->spec.load_src != HEALTH_LOAD_REDIS) {
        /* this check's reading, or none (load shedding: health_load.h) */
        __atomic_store_n(&e->pub.load, j->load, __ATOMIC_RELAXED);
        e->load_ms = now_us / 1000;
    }
    e->in_flight = false;
    e->due_ms = now_us / 1000 + c->cur.interval_ms;
    int status = e->status;
    const char *state = health_ep_state(e);
    pthread_mutex_unlock(&r->mu);
    log_result(c, e, status, state, ok, err, lat, when);
    queue_publish(c, e, status, when, ok ? NULL : err);
    pthread_mutex_lock(&c->mu);
    c->st.checks++;
    if (!ok)
        c->st.failures++;
    c->st.in_flight = --c->nbusy;
    pthread_mutex_unlock(&c->mu);
    if (j->easy) {
        curl_multi_remove_handle(c->multi, j->easy);
        if (c->pool && c->npool < c->njobs) {
            curl_easy_reset(j->easy);
            c->pool[c->npool++] = j->easy;
        } else {
            curl_easy_cleanup(j->easy);
        }
        j->easy = NULL;
    }
    curl_slist_free_all(j->connect_to);
    j->connect_to = NULL;
    free(j->body);
    j->body = NULL;
    if (j->fd >= 0)
        close(j->fd); /* leaves the epoll set with it */
    j->fd = -1;
    j->busy = false;
    j->e = NULL;
    health_ep_release(&e->pub);
    __atomic_store_n(&c->rescan, 1, __ATOMIC_RELEASE); /* a slot is free */
}

/* ---- starting checks --------------------------------------------------------------------- */

static int start_http(health_checker_t *c, struct job *j)
{
    CURL *h = c->npool ? c->pool[--c->npool] : curl_easy_init();
    if (!h)
        return TERN_ENOMEM;
    j->easy = h;
    if (health_probe_http(j, c->cur.ca_file) < 0)
        return TERN_ENOMEM;
    return curl_multi_add_handle(c->multi, h) == CURLM_OK ? 0 : TERN_ENOMEM;
}

/* Start the check of e (referenced by the caller, handed to the job). */
static void start(health_checker_t *c, struct ep *e)
{
    struct job *j = NULL;
    for (unsigned i = 0; i < c->njobs && !j; i++)
        if (!c->jobs[i]->busy)
            j = c->jobs[i];
    if (!j) { /* cannot happen: the scan takes no more than the free slots */
        pthread_mutex_lock(&c->reg->mu);
        e->in_flight = false;
        pthread_mutex_unlock(&c->reg->mu);
        health_ep_release(&e->pub);
        return;
    }
    unsigned idx = j->idx;
    memset(j, 0, sizeof(*j));
    j->idx = idx;
    j->fd = -1;
    j->load = HEALTH_LOAD_UNKNOWN;
    j->e = e;
    j->busy = true;
    j->start_us = tern_monotonic_us();
    j->deadline_us = j->start_us + (int64_t)e->spec.timeout_ms * 1000;
    pthread_mutex_lock(&c->mu);
    c->st.in_flight = ++c->nbusy;
    pthread_mutex_unlock(&c->mu);
    int done;
    switch (e->spec.proto) {
    case HEALTH_HTTP:
    case HEALTH_HTTPS:
        if (start_http(c, j) < 0) {
            snprintf(j->err, sizeof(j->err), "cannot start the request (out of memory)");
            done = 1;
        } else {
            done = 0;
        }
        break;
    case HEALTH_TCP:
        done = health_probe_tcp(j);
        break;
    default:
        done = health_probe_icmp(j, &c->echo_seq, &c->icmp_logged);
        break;
    }
    if (!done && j->fd >= 0) {
        struct epoll_event ev = {.events = e->spec.proto == HEALTH_TCP ? EPOLLOUT : EPOLLIN,
                                 .data.u64 = TAG(TAG_JOB, j->idx)};
        if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, j->fd, &ev) < 0) {
            snprintf(j->err, sizeof(j->err), "epoll: %s", strerror(errno));
            done = 1;
        } else if (j->deadline_us < c->expire_us) {
            c->expire_us = j->deadline_us;
        }
    }
    if (done)
        finish(c, j, j->err[0] == '\0', j->err);
}

/* ---- the loop ---------------------------------------------------------------------------- */

/* Load shedding's Redis source, every load_poll_ms: the loads of the endpoints that read theirs
 * from Redis, in one pipelined round trip (hredis_loads()) over the checker's connection, with
 * its timeouts (the loop, and so a stop, waits at most one of them). The endpoints are
 * referenced while the lock is not held. A failed poll writes nothing: the stale sweep
 * (take_due()) turns the loads unknown after HEALTH_LOAD_STALE_CHECKS polls. */
static void poll_loads(health_checker_t *c, int64_t now)
{
    if (!c->have_cur || now < c->load_due)
        return;
    c->load_due = now + c->cur.load_poll_ms;
    health_registry_t *r = c->reg;
    pthread_mutex_lock(&r->mu);
    size_t n = 0, cap = c->redis ? r->count : 0;
    struct ep **eps = cap ? malloc(cap * sizeof(*eps)) : NULL;
    bool wanted = false;
    for (struct ep *e = r->head; e; e = e->next)
        if (e->spec.load_src == HEALTH_LOAD_REDIS) {
            wanted = true;
            if (!eps || n == cap)
                break;
            e->refs++;
            eps[n++] = e;
        }
    pthread_mutex_unlock(&r->mu);
    if (wanted && !c->redis && !c->load_warned) /* once: the zones say what they need */
        log_warn("health: an RRset's shed block reads loads from Redis, but health: redis is not "
                 "configured: those loads stay unknown (nothing is shed by them)");
    c->load_warned = wanted && !c->redis;
    uint32_t *loads = n ? malloc(n * sizeof(*loads)) : NULL;
    bool ok = loads && hredis_ready(c->redis, now) &&
              hredis_loads(c->redis, eps, (unsigned)n, loads) == 0;
    int64_t at = tern_monotonic_ms();
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; ok && i < n; i++) {
        __atomic_store_n(&eps[i]->pub.load, loads[i], __ATOMIC_RELAXED);
        eps[i]->load_ms = at;
    }
    pthread_mutex_unlock(&r->mu);
    for (size_t i = 0; i < n; i++)
        health_ep_release(&eps[i]->pub);
    free(loads);
    free(eps);
}

/* The endpoints due now, marked in flight and referenced, up to room of them; *next gets the
 * earliest due time of the others. */
static unsigned take_due(health_checker_t *c, int64_t now, struct ep **out, unsigned room,
                         int64_t *next)
{
    unsigned n = 0;
    int64_t soonest = now + IDLE_MAX_MS;
    health_registry_t *r = c->reg;
    struct ep *old = c->cursor;
    pthread_mutex_lock(&r->mu);
    /* once round the list, starting after the cursor (which its reference keeps linked) */
    struct ep *e = old && old->next ? old->next : r->head;
    for (size_t seen = 0, total = r->count; e && seen < total;
         seen++, e = e->next ? e->next : r->head) {
        /* in flight, or kept alive by the cursor alone (no zone checks it any more) */
        if (e->in_flight || (e == old && e->refs == 1))
            continue;
        /* a load reading that stopped coming (checks taken over by another node, or late;
         * Redis unreachable) is not steered by for long: unknown after
         * HEALTH_LOAD_STALE_CHECKS intervals of its source */
        unsigned every =
            e->spec.load_src == HEALTH_LOAD_REDIS ? c->cur.load_poll_ms : c->cur.interval_ms;
        if (e->spec.load_src && e->load_ms &&
            now - e->load_ms > (int64_t)HEALTH_LOAD_STALE_CHECKS * every) {
            __atomic_store_n(&e->pub.load, HEALTH_LOAD_UNKNOWN, __ATOMIC_RELAXED);
            e->load_ms = 0;
        }
        if (e->due_ms > now) {
            if (e->due_ms < soonest)
                soonest = e->due_ms;
            continue;
        }
        if (n == room) {
            soonest = now; /* more are due: look again once a slot frees */
            continue;
        }
        e->in_flight = true;
        e->refs++;
        out[n++] = e;
    }
    if (n && out[n - 1] != old) { /* the next scan starts after the last one taken */
        out[n - 1]->refs++;
        c->cursor = out[n - 1];
    }
    pthread_mutex_unlock(&r->mu);
    if (old && old != c->cursor)
        health_ep_release(&old->pub); /* outside the mutex: it may be the last reference */
    *next = soonest;
    return n;
}

/* Gather due endpoints, settle the ones Redis says another node has, start the rest. */
static int64_t schedule(health_checker_t *c, int64_t now)
{
    unsigned room = c->njobs > c->nbusy ? c->njobs - c->nbusy : 0;
    if (c->cur.max_requests < c->njobs) {
        unsigned cap = c->cur.max_requests > c->nbusy ? c->cur.max_requests - c->nbusy : 0;
        room = cap < room ? cap : room;
    }
    int64_t next;
    struct ep **due = room ? malloc(room * sizeof(*due)) : NULL;
    unsigned n = take_due(c, now, due, due ? room : 0, &next);
    if (n == 0) {
        free(due);
        return next;
    }
    hredis_state_t *st = NULL;
    if (c->redis && hredis_ready(c->redis, now) && (st = calloc(n, sizeof(*st))) &&
        hredis_claim(c->redis, due, n, c->cur.interval_ms, wall_ms(), st) < 0) {
        free(st);
        st = NULL;
    }
    int64_t wall = wall_ms();
    for (unsigned i = 0; i < n; i++) {
        struct ep *e = due[i];
        if (!st || st[i].decision == HREDIS_CHECK) {
            /* a state newer than ours, even too old to stand for a check: the counter goes on
             * from it, as redins' checks move the stored status */
            if (st && st[i].have_state && st[i].lastcheck > e->last_check) {
                pthread_mutex_lock(&c->reg->mu);
                health_ep_adopt(e, st[i].status, st[i].lastcheck, st[i].error);
                pthread_mutex_unlock(&c->reg->mu);
            }
            start(c, e);
            continue;
        }
        pthread_mutex_lock(&c->reg->mu);
        if (st[i].decision == HREDIS_ADOPT) {
            health_ep_adopt(e, st[i].status, st[i].lastcheck, st[i].error);
            int64_t due_in = st[i].lastcheck + c->cur.interval_ms - wall;
            e->due_ms = now + (due_in > SCAN_MIN_MS ? due_in : SCAN_MIN_MS);
        } else {
            e->due_ms = now + e->spec.timeout_ms + WAIT_SLACK_MS;
        }
        e->in_flight = false;
        if (e->due_ms < next)
            next = e->due_ms;
        pthread_mutex_unlock(&c->reg->mu);
        if (st[i].decision == HREDIS_ADOPT) {
            pthread_mutex_lock(&c->mu);
            c->st.adopted++;
            pthread_mutex_unlock(&c->mu);
        }
        health_ep_release(&e->pub);
    }
    free(st);
    free(due);
    return next;
}

/* TCP or ICMP job j's socket reported revents. */
static void on_socket(health_checker_t *c, struct job *j, short revents)
{
    int r = health_probe_ready(j, revents);
    if (r == 1)
        finish(c, j, true, NULL);
    else if (r == 0)
        finish(c, j, false, j->err);
}

static void harvest_curl(health_checker_t *c)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct job *j = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&j);
        if (!j || !j->busy)
            continue;
        bool ok = health_probe_http_result(j, m->data.result, m->easy_handle);
        finish(c, j, ok, j->err);
    }
}

/* CURLMOPT_SOCKETFUNCTION: watch (or stop watching) one of curl's sockets in our epoll. */
static int curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)easy;
    health_checker_t *c = userp;
    if (what == CURL_POLL_REMOVE) {
        if (socketp)
            (void)epoll_ctl(c->epfd, EPOLL_CTL_DEL, fd, NULL);
        curl_multi_assign(c->multi, fd, NULL);
        return 0;
    }
    struct epoll_event ev = {.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
                                       (what & CURL_POLL_OUT ? EPOLLOUT : 0u),
                             .data.u64 = TAG(TAG_CURL, fd)};
    if (epoll_ctl(c->epfd, socketp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) < 0 && !socketp &&
        errno == EEXIST)
        (void)epoll_ctl(c->epfd, EPOLL_CTL_MOD, fd, &ev); /* a reused fd number */
    curl_multi_assign(c->multi, fd, (void *)1);
    return 0;
}

/* CURLMOPT_TIMERFUNCTION: when curl wants curl_multi_socket_action(CURL_SOCKET_TIMEOUT). */
static int curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    health_checker_t *c = userp;
    c->curl_due_us = timeout_ms < 0 ? -1 : tern_monotonic_us() + timeout_ms * 1000;
    return 0;
}

/* Jobs of our own sockets past their deadline fail (curl enforces its own timeouts); the
 * earliest deadline still pending, or INT64_MAX. */
static int64_t expire_jobs(health_checker_t *c, int64_t now_us)
{
    int64_t soonest = INT64_MAX;
    for (unsigned i = 0; i < c->njobs; i++) {
        struct job *j = c->jobs[i];
        if (!j->busy || j->easy)
            continue;
        if (now_us < j->deadline_us) {
            if (j->deadline_us < soonest)
                soonest = j->deadline_us;
            continue;
        }
        snprintf(j->err, sizeof(j->err), "%s: no answer within %u ms",
                 j->e->spec.proto == HEALTH_TCP ? "connect" : "ICMP echo", j->e->spec.timeout_ms);
        finish(c, j, false, j->err);
    }
    return soonest;
}

/*
 * Say once per load when the endpoints ask more than max_requests can give. Each endpoint is due
 * check_interval after its last result and its check holds one of max_requests slots for up to
 * its timeout; when every check runs to its timeout (endpoints down or unreachable: when checks
 * matter most) a round of all of them takes sum(timeout) / max_requests. Past check_interval,
 * that round is the interval each endpoint really gets, and failover is that much slower.
 */
static void check_capacity(health_checker_t *c)
{
    c->capacity_at = 0;
    uint64_t sum = 0;
    size_t n = 0;
    pthread_mutex_lock(&c->reg->mu);
    for (struct ep *e = c->reg->head; e; e = e->next) {
        if (e == c->cursor && e->refs == 1)
            continue; /* kept alive by the scan's cursor alone: no zone checks it any more */
        sum += e->spec.timeout_ms;
        n++;
    }
    pthread_mutex_unlock(&c->reg->mu);
    unsigned m = c->cur.max_requests, iv = c->cur.interval_ms;
    uint64_t round = (sum + m - 1) / m;
    if (round <= iv)
        return;
    log_warn("health: %zu endpoints every %u ms with max_requests %u: when every check runs to "
             "its timeout (%llu ms of checks per round), the achievable interval is %llu ms; "
             "max_requests %llu would keep %u ms",
             n, iv, m, (unsigned long long)sum, (unsigned long long)round,
             (unsigned long long)((sum + iv - 1) / iv), iv);
}

static void *run(void *arg)
{
    health_checker_t *c = arg;
    (void)pthread_setname_np(pthread_self(), "tern-health"); /* for top -H and the bench */
    int64_t next_scan = 0;
    struct epoll_event evs[256];
    while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
        apply_settings(c);
        int64_t now = tern_monotonic_ms();
        if (c->have_cur &&
            (now >= next_scan || __atomic_exchange_n(&c->rescan, 0, __ATOMIC_ACQ_REL))) {
            int64_t due = schedule(c, now);
            now = tern_monotonic_ms();
            next_scan = due > now + SCAN_MIN_MS ? due : now + SCAN_MIN_MS;
        }
        if (c->capacity_at && now >= c->capacity_at)
            check_capacity(c);
        poll_loads(c, now);
        flush_publish(c);
        /* sleep until the next scan, curl's timer or a job's deadline, or an event */
        int64_t wake_ms = next_scan;
        if (c->curl_due_us >= 0 && c->curl_due_us / 1000 < wake_ms)
            wake_ms = c->curl_due_us / 1000;
        if (c->expire_us != INT64_MAX && c->expire_us / 1000 + 1 < wake_ms)
            wake_ms = c->expire_us / 1000 + 1;
        if (c->capacity_at && c->capacity_at < wake_ms)
            wake_ms = c->capacity_at;
        if (c->have_cur && c->load_due < wake_ms)
            wake_ms = c->load_due;
        int64_t wait = wake_ms - tern_monotonic_ms();
        wait = wait < 0 ? 0 : wait > IDLE_MAX_MS ? IDLE_MAX_MS : wait;
        int n = epoll_wait(c->epfd, evs, (int)(sizeof(evs) / sizeof(evs[0])), (int)wait);
        int running;
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            unsigned kind = (unsigned)(tag >> 32), v = (uint32_t)tag;
            if (kind == TAG_WAKE) {
                uint64_t x;
                (void)!read(c->evfd, &x, sizeof(x));
            } else if (kind == TAG_CURL) {
                int mask = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                           (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                           (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
                (void)curl_multi_socket_action(c->multi, (curl_socket_t)v, mask, &running);
            } else if (kind == TAG_JOB && v < c->njobs) {
                struct job *j = c->jobs[v];
                if (j->busy && j->fd >= 0 && !j->easy)
                    on_socket(c, j, (short)((evs[i].events & (EPOLLERR | EPOLLHUP)) ? POLLERR : 0));
            }
        }
        if (c->curl_due_us >= 0 && tern_monotonic_us() >= c->curl_due_us) {
            c->curl_due_us = -1;
            (void)curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        harvest_curl(c);
        int64_t now_us = tern_monotonic_us();
        if (now_us >= c->expire_us)
            c->expire_us = expire_jobs(c, now_us);
        flush_publish(c);
        if (c->log)
            count_log_dropped(c, health_log_flush(c->log));
        if (c->redis) {
            pthread_mutex_lock(&c->mu);
            c->st.redis_connected = hredis_connected(c->redis);
            c->st.redis_errors = hredis_errors(c->redis);
            pthread_mutex_unlock(&c->mu);
        }
    }
    return NULL;
}

/* The registry's wakeup (under its mutex): a new endpoint or override. */
static void wake(void *ctx)
{
    wake_loop(ctx);
}

health_checker_t *health_checker_new(health_registry_t *r)
{
    const char *why = health_curl_load();
    if (why) {
        log_err("health: %s; no health checks are made", why);
        return NULL;
    }
    health_checker_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->reg = r;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    c->curl_due_us = -1;
    c->expire_us = INT64_MAX;
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    c->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG(TAG_WAKE, 0)};
    if (c->epfd < 0 || c->evfd < 0 || epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->evfd, &ev) < 0 ||
        !(c->multi = curl_multi_init())) {
        log_err("health: cannot set up the checker's event loop: %s", strerror(errno));
        if (c->epfd >= 0)
            close(c->epfd);
        if (c->evfd >= 0)
            close(c->evfd);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return NULL;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, curl_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, curl_timer);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    pthread_mutex_lock(&r->mu);
    r->wake = wake;
    r->wake_ctx = c;
    pthread_mutex_unlock(&r->mu);
    return c;
}

int health_checker_start(health_checker_t *c)
{
    int rc = pthread_create(&c->thread, NULL, run, c);
    if (rc != 0) {
        log_err("health: cannot start the checker thread: %s", strerror(rc));
        return -rc;
    }
    c->started = true;
    return 0;
}

void health_checker_free(health_checker_t *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->reg->mu);
    c->reg->wake = NULL;
    c->reg->wake_ctx = NULL;
    pthread_mutex_unlock(&c->reg->mu);
    if (c->started) {
        __atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
        wake_loop(c);
        pthread_join(c->thread, NULL);
    }
    for (unsigned i = 0; i < c->njobs; i++) {
        struct job *j = c->jobs[i];
        if (!j->busy) {
            free(j);
            continue;
        }
        if (j->easy) {
            curl_multi_remove_handle(c->multi, j->easy);
            curl_easy_cleanup(j->easy);
        }
        curl_slist_free_all(j->connect_to);
        if (j->fd >= 0)
            close(j->fd);
        pthread_mutex_lock(&c->reg->mu);
        j->e->in_flight = false;
        pthread_mutex_unlock(&c->reg->mu);
        health_ep_release(&j->e->pub);
        free(j);
    }
    flush_publish(c);
    free(c->pub);
    free(c->jobs);
    for (unsigned i = 0; i < c->npool; i++)
        curl_easy_cleanup(c->pool[i]);
    free(c->pool);
    health_ep_release(c->cursor ? &c->cursor->pub : NULL);
    curl_multi_cleanup(c->multi);
    close(c->epfd);
    close(c->evfd);
    hredis_free(c->redis);
    (void)health_log_close(c->log); /* nobody reads the counters any more */
    if (c->have_cur)
        settings_free(&c->cur);
    if (c->have_pending)
        settings_free(&c->pending);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void health_checker_stats(health_checker_t *c, health_checker_stats_t *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}
