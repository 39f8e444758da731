/*
 * qlog.c — the workers' rings and the writer thread (qlog.h says what and why).
 *
 * Ring protocol (single producer, single consumer): head and tail count bytes since the start,
 * the buffer is a power of two. The producer reads tail (acquire), writes a record at head, then
 * publishes head (release); the consumer reads head (acquire), reads records up to it, then
 * publishes tail (release). A record never wraps: when it does not fit before the end of the
 * buffer, the producer writes a pad record over the rest and starts at 0.
 */
#include "tern/qlog/qlog.h"

#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/common/compiler.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/qlog/dnstap.h"
#include "tern/qlog/reqlog.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone.h"

/* A pad record: the bytes up to the end of the buffer are not a record. */
#define QLOG_F_PAD 0x8000u

struct qlog_ring {
    _Alignas(64) uint64_t head; /* producer: bytes committed */
    uint64_t records;           /* producer only (relaxed: stats read it) */
    uint64_t dropped;
    uint32_t nth;               /* sampling counter */
    _Alignas(64) uint64_t tail; /* consumer: bytes consumed */
    uint8_t *buf;
    size_t size; /* a power of two */
};

struct qlog {
    qlog_ring_t *rings;
    unsigned nrings;
    unsigned sample;
    /* exclude_zones: lowercased wire names and their hashes (a few: a linear scan) */
    uint8_t (*excl)[DNAME_MAXLEN];
    uint32_t *excl_hash;
    size_t nexcl;
    qlog_dnstap_t *dnstap;
    qlog_reqlog_t *reqlog;

    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stop;
    int reopen; /* atomic: SIGHUP asked for the files to be reopened */
};

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* ---- worker side ----------------------------------------------------------------------------- */

static bool excluded(const qlog_t *q, const zone_t *z)
{
    for (size_t i = 0; i < q->nexcl; i++)
        if (q->excl_hash[i] == z->hash && q->excl[i][0] == z->apex[0] &&
            memcmp(q->excl[i], z->apex, z->apex_len) == 0)
            return true;
    return false;
}

/* Address and port of sa into addr (16 bytes, IPv4 in the first 4) / *port; its family (4, 6). */
static uint8_t put_addr(const struct sockaddr *sa, uint8_t *addr, uint16_t *port)
{
    if (sa && sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        memcpy(addr, &in->sin_addr, 4);
        *port = ntohs(in->sin_port);
        return 4;
    }
    if (sa && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        memcpy(addr, &in6->sin6_addr, 16);
        *port = ntohs(in6->sin6_port);
        return 6;
    }
    return 0;
}

/* The record a count-single RRset picked (its RR at rdata + pick->off: RDLENGTH, then the
 * address) into rec's dest_* fields: copies only. QLOG_F_DEST, or 0 when it is no address. */
static uint16_t put_dest(qlog_rec_t *rec, const zone_geo_rr_t *pick, const uint8_t *rdata)
{
    const uint8_t *rr = rdata + pick->off;
    uint16_t rdlen = (uint16_t)(rr[0] << 8 | rr[1]);
    if (rdlen != 4 && rdlen != 16)
        return 0;
    rec->dest_family = rdlen == 4 ? 4 : 6;
    memcpy(rec->dest_addr, rr + 2, rdlen);
    unsigned n = pick->ncountries < QLOG_DEST_CC ? pick->ncountries : QLOG_DEST_CC;
    memcpy(rec->dest_cc, pick->countries, n * sizeof(rec->dest_cc[0]));
    rec->dest_ncc = (uint8_t)n;
    return QLOG_F_DEST;
}

/* What the steering rules beyond redins decided (answer_info_t.steer) into rec: copies only.
 * QLOG_F_STEER, or 0 when no such rule ran (redins' own line). */
static uint16_t put_steer(qlog_rec_t *rec, const answer_steer_info_t *st)
{
    if (likely(st->rules == 0))
        return 0;
    rec->steer_rules = st->rules;
    rec->steer_tier = st->tier;
    rec->steer_tier_skipped = st->tier_skipped;
    rec->steer_sticky_prefix = st->sticky_prefix;
    rec->steer_shed_out = st->shed_out;
    rec->steer_shed_scaled = st->shed_scaled;
    rec->steer_latency_how = st->latency_how;
    rec->steer_latency_ms = st->latency_ms;
    if ((st->rules & ANSWER_STEER_LATENCY) && st->latency_group) {
        size_t n = strnlen(st->latency_group, QLOG_STEER_GROUP_MAX);
        memcpy(rec->steer_group, st->latency_group, n);
        rec->steer_group_len = (uint8_t)n;
    }
    return QLOG_F_STEER;
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* vDSO: no system call */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Room for size bytes at the ring's head (a pad record written first if the end is too near),
 * or NULL: full. */
static qlog_rec_t *reserve(qlog_ring_t *r, size_t size, uint64_t *head)
{
    uint64_t h = r->head;
    uint64_t t = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
    size_t pos = (size_t)(h & (r->size - 1));
    size_t room = r->size - (size_t)(h - t);
    size_t to_end = r->size - pos;
    if (to_end < size) {
        if (room < to_end + size)
            return NULL;
        qlog_rec_t *pad = (qlog_rec_t *)(void *)(r->buf + pos);
        pad->size = (uint32_t)to_end;
        pad->flags = QLOG_F_PAD;
        h += to_end;
        pos = 0;
    } else if (room < size) {
        return NULL;
    }
    *head = h;
    return (qlog_rec_t *)(void *)(r->buf + pos);
}

void qlog_worker_put(qlog_t *q, qlog_ring_t *r, const answer_ctx_t *ctx, const qlog_query_t *qq)
{
    const answer_info_t *info = &ctx->info;
    if (info->outcome == ANSWER_DROP_SHORT || info->outcome == ANSWER_DROP_QR)
        return; /* not a DNS query */
    if (q->sample > 1 && ++r->nth % q->sample != 0)
        return;
    if (q->nexcl && info->zone && excluded(q, info->zone))
        return;
    bool sent = info->outcome == ANSWER_SENT && qq->response;
    size_t qlen = qq->qlen, rlen = sent ? qq->rlen : 0;
    uint16_t flags = (uint16_t)((qq->tcp ? QLOG_F_TCP : 0) | (sent ? QLOG_F_RESPONSE : 0));
    if (qlen > QLOG_WIRE_MAX) {
        qlen = 0;
        flags |= QLOG_F_QUERY_CUT;
    }
    if (qlen + rlen > QLOG_WIRE_MAX) {
        rlen = 0;
        flags |= QLOG_F_RESPONSE_CUT;
    }
    size_t size = align8(sizeof(qlog_rec_t) + qlen + rlen);
    uint64_t head;
    qlog_rec_t *rec = reserve(r, size, &head);
    if (!rec) {
        __atomic_store_n(&r->dropped, r->dropped + 1, __ATOMIC_RELAXED);
        return;
    }
    memset(rec, 0, sizeof(*rec));
    rec->size = (uint32_t)size;
    rec->family = put_addr(qq->client, rec->client_addr, &rec->client_port);
    (void)put_addr(qq->server, rec->server_addr, &rec->server_port);
    rec->scope = info->scope;
    rec->qtype = info->qtype;
    rec->rcode = sent ? (uint16_t)info->rcode : 0xFFFF;
    const wire_ecs_t *ecs = ctx->q_ecs;
    if (ecs) {
        flags |= QLOG_F_ECS;
        rec->ecs_family = (uint8_t)ecs->family;
        rec->ecs_source = ecs->source_prefix;
        rec->ecs_scope_q = ecs->scope_prefix;
        memcpy(rec->ecs_addr, ecs->addr, sizeof(rec->ecs_addr));
    }
    if (info->pick && info->pick_rdata)
        flags |= put_dest(rec, info->pick, info->pick_rdata);
    flags |= put_steer(rec, &info->steer);
    if (info->zone) { /* redins' domain_uuid: the zone of the name asked, its id or "" */
        size_t n = info->zone->domain_id_len;
        n = n < QLOG_DOMAIN_ID_MAX ? n : QLOG_DOMAIN_ID_MAX;
        if (n)
            memcpy(rec->domain_id, info->zone->domain_id, n);
        rec->domain_id_len = (uint8_t)n;
        flags |= QLOG_F_ZONE;
    }
    const answer_geo_entry_t *ent = ctx->ent;
    if (ent && ent->have_geo && ent->geo.country) {
        flags |= QLOG_F_COUNTRY;
        rec->country[0] = (char)(ent->geo.country >> 8);
        rec->country[1] = (char)(ent->geo.country & 0xFF);
    }
    if (ent && ent->have_asn) {
        flags |= QLOG_F_ASN;
        rec->asn = ent->asn;
    }
    rec->flags = flags;
    rec->qtime_ns = qq->qtime_ns;
    rec->rtime_ns = wall_ns();
    rec->qlen = (uint16_t)qlen;
    rec->rlen = (uint16_t)rlen;
    if (qlen)
        memcpy(rec->wire, qq->query, qlen);
    if (rlen)
        memcpy(rec->wire + qlen, qq->response, rlen);
    __atomic_store_n(&r->records, r->records + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&r->head, head + size, __ATOMIC_RELEASE);
}

/* ---- writer side ------------------------------------------------------------------------------
 */

static void dispatch(qlog_t *q, const qlog_rec_t *rec)
{
    if (q->dnstap)
        (void)qlog_dnstap_write(q->dnstap, rec); /* a refusal is counted there */
    if (q->reqlog)
        (void)qlog_reqlog_write(q->reqlog, rec);
}

/* Everything the workers committed so far, to the sinks. */
static void drain(qlog_t *q)
{
    for (unsigned i = 0; i < q->nrings; i++) {
        qlog_ring_t *r = &q->rings[i];
        uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
        uint64_t tail = r->tail;
        while (tail < head) {
            const qlog_rec_t *rec =
                (const qlog_rec_t *)(const void *)(r->buf + (size_t)(tail & (r->size - 1)));
            if (!(rec->flags & QLOG_F_PAD))
                dispatch(q, rec);
            tail += rec->size;
        }
        __atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
    }
    if (q->reqlog)
        (void)qlog_reqlog_flush(q->reqlog);
}

static void reopen_sinks(qlog_t *q)
{
    char err[512];
    if (q->dnstap && qlog_dnstap_reopen(q->dnstap, err, sizeof(err)) < 0)
        log_err("query log: %s; still writing the previous file", err);
    if (q->reqlog && qlog_reqlog_reopen(q->reqlog, err, sizeof(err)) < 0)
        log_err("query log: %s; still writing the previous file", err);
}

static void *writer_main(void *arg)
{
    qlog_t *q = arg;
    (void)pthread_setname_np(pthread_self(), "tern-qlog");
    /* a request log on a pipe whose reader went away: EPIPE (counted), not the process killed */
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    (void)pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    pthread_mutex_lock(&q->mu);
    while (!q->stop) {
        pthread_mutex_unlock(&q->mu);
        drain(q);
        if (__atomic_exchange_n(&q->reopen, 0, __ATOMIC_ACQ_REL))
            reopen_sinks(q);
        pthread_mutex_lock(&q->mu);
        if (q->stop)
            break;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += QLOG_DRAIN_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&q->wake, &q->mu, &until);
    }
    pthread_mutex_unlock(&q->mu);
    drain(q); /* the workers have stopped: the last records */
    return NULL;
}

/* ---- lifecycle --------------------------------------------------------------------------------
 */

static int open_sinks(qlog_t *q, const config_qlog_t *c, char *err, size_t errlen)
{
    if (c->dnstap_socket || c->dnstap_file) {
        const qlog_dnstap_opts_t o = {.socket_path = c->dnstap_socket,
                                      .file_path = c->dnstap_file,
                                      .queries = c->dnstap_queries,
                                      .responses = c->dnstap_responses,
                                      .identity = c->dnstap_identity,
                                      .version = c->dnstap_version};
        if (!(q->dnstap = qlog_dnstap_open(&o, err, errlen)))
            return TERN_EIO;
    }
    if (c->requests) {
        const qlog_reqlog_opts_t o = {.target = (qlog_reqlog_target_t)c->requests_target,
                                      .format = (qlog_reqlog_format_t)c->requests_format,
                                      .path = c->requests_path};
        if (!(q->reqlog = qlog_reqlog_open(&o, err, errlen)))
            return TERN_EIO;
    }
    return 0;
}

static int set_exclusions(qlog_t *q, const config_qlog_t *c, char *err, size_t errlen)
{
    if (!c->nexclude_zones)
        return 0;
    q->excl = calloc(c->nexclude_zones, sizeof(*q->excl));
    q->excl_hash = calloc(c->nexclude_zones, sizeof(*q->excl_hash));
    if (!q->excl || !q->excl_hash)
        return TERN_ENOMEM;
    for (size_t i = 0; i < c->nexclude_zones; i++) {
        const char *why = "";
        uint8_t wire[DNAME_MAXLEN];
        const char *k = c->exclude_zones[i];
        if (dname_from_str(k, strlen(k), false, wire, &why) < 0) {
            snprintf(err, errlen, "query_log: exclude_zones: %s: %s", k, why);
            return TERN_EINVAL;
        }
        (void)dname_lower(q->excl[q->nexcl], wire);
        q->excl_hash[q->nexcl] = dname_hash(q->excl[q->nexcl]);
        q->nexcl++;
    }
    return 0;
}

qlog_t *qlog_new(const config_qlog_t *c, unsigned nworkers, char *err, size_t errlen)
{
    if (errlen)
        err[0] = '\0';
    if (!c->enabled || nworkers == 0)
        return NULL;
    qlog_t *q = calloc(1, sizeof(*q));
    if (!q) {
        snprintf(err, errlen, "query_log: out of memory");
        return NULL;
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->wake, &ca);
    pthread_condattr_destroy(&ca);
    q->sample = c->sample ? c->sample : 1;
    size_t size = 64 * 1024;
    size_t want = (size_t)(c->ring_kib ? c->ring_kib : 4096) * 1024;
    while (size < want)
        size *= 2;
    int rc = 0;
    q->rings = aligned_alloc(64, sizeof(*q->rings) * nworkers);
    if (!q->rings) {
        rc = TERN_ENOMEM;
    } else {
        memset(q->rings, 0, sizeof(*q->rings) * nworkers);
        q->nrings = nworkers;
        for (unsigned i = 0; i < nworkers && rc == 0; i++) {
            q->rings[i].size = size;
            /* touched now, so a worker's first records do not fault pages in */
            if (!(q->rings[i].buf = aligned_alloc(64, size)))
                rc = TERN_ENOMEM;
            else
                memset(q->rings[i].buf, 0, size);
        }
    }
    if (rc == 0)
        rc = set_exclusions(q, c, err, errlen);
    if (rc == 0)
        rc = open_sinks(q, c, err, errlen);
    if (rc < 0) {
        if (!err[0])
            snprintf(err, errlen, "query_log: %s", tern_strerror(rc));
        qlog_free(q);
        return NULL;
    }
    return q;
}

qlog_ring_t *qlog_ring(qlog_t *q, unsigned i)
{
    return i < q->nrings ? &q->rings[i] : NULL;
}

int qlog_start(qlog_t *q)
{
    int e = pthread_create(&q->thread, NULL, writer_main, q);
    if (e != 0)
        return -e;
    q->started = true;
    return 0;
}

void qlog_reopen(qlog_t *q)
{
    if (q)
        __atomic_store_n(&q->reopen, 1, __ATOMIC_RELEASE);
}

void qlog_stats(qlog_t *q, qlog_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; i < q->nrings; i++) {
        out->records += __atomic_load_n(&q->rings[i].records, __ATOMIC_RELAXED);
        out->dropped += __atomic_load_n(&q->rings[i].dropped, __ATOMIC_RELAXED);
    }
    if (q->dnstap) {
        qlog_dnstap_stats_t d;
        qlog_dnstap_stats(q->dnstap, &d);
        out->written = d.written;
        out->sink_drops = d.dropped;
        out->reconnects = d.reconnects;
    }
    if (q->reqlog)
        qlog_reqlog_stats(q->reqlog, &out->lines, &out->line_errors, &out->line_drops);
}

void qlog_free(qlog_t *q)
{
    if (!q)
        return;
    if (q->started) {
        pthread_mutex_lock(&q->mu);
        q->stop = true;
        pthread_cond_signal(&q->wake);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->thread, NULL);
    } else {
        drain(q); /* never started (or it failed to): what the workers wrote still goes out */
    }
    qlog_dnstap_close(q->dnstap);
    qlog_reqlog_close(q->reqlog);
    for (unsigned i = 0; i < q->nrings; i++)
        free(q->rings[i].buf);
    free(q->rings);
    free(q->excl);
    free(q->excl_hash);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->wake);
    free(q);
}
