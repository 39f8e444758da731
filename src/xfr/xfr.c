/*
 * xfr.c — the transfer service (xfr.h): its lifecycle, each zone's transfer settings and state,
 * what `ternctl zone` and the metrics read, and the workers' hand-off queue. The threads live in
 * xfr_out.c, xfr_notify.c and xfr_secondary.c (xfr_int.h).
 */
#include "tern/xfr/xfr.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"
#include "tern/common/rcu.h"
#include "tern/zone/zone_table.h"

#include "xfr_int.h"
#include "xfr_tls.h"

/* ---- helpers ------------------------------------------------------------------------------ */

bool xfr_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                      &((const struct sockaddr_in *)b)->sin_addr, 4) == 0;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

/* Under mu. */
struct zst *xfr_zone_find(const xfr_t *x, const char *key)
{
    for (size_t i = 0; i < x->nzones; i++)
        if (strcmp(x->zones[i]->key, key) == 0)
            return x->zones[i];
    return NULL;
}

/* Under mu: the zone whose apex is exactly name (wire, any case). */
struct zst *xfr_zone_find_apex(const xfr_t *x, const uint8_t *name)
{
    for (size_t i = 0; i < x->nzones; i++)
        if (dname_equal(x->zones[i]->apex, name))
            return x->zones[i];
    return NULL;
}

struct zst *xfr_zmap_get(const xfr_zmap_t *m, const char *key)
{
    if (!m->slot) {
        for (size_t i = 0; i < m->n; i++)
            if (m->zs[i] && strcmp(m->zs[i]->key, key) == 0)
                return m->zs[i];
        return NULL;
    }
    for (size_t i = tern_hash_str(key) & m->mask;; i = (i + 1) & m->mask)
        if (!m->slot[i] || strcmp(m->slot[i]->key, key) == 0)
            return m->slot[i];
}

void xfr_zmap_put(xfr_zmap_t *m, struct zst *z, struct zst *const *zs, size_t n)
{
    m->zs = zs;
    m->n = n;
    if (!m->slot)
        return;
    size_t i = tern_hash_str(z->key) & m->mask;
    while (m->slot[i])
        i = (i + 1) & m->mask;
    m->slot[i] = z;
}

void xfr_zmap_init(xfr_zmap_t *m, struct zst *const *zs, size_t n, size_t extra)
{
    size_t cap = 16;
    while (cap < 2 * (n + extra))
        cap <<= 1;
    *m = (xfr_zmap_t){.slot = calloc(cap, sizeof(*m->slot)), .mask = cap - 1, .zs = zs, .n = n};
    for (size_t i = 0; m->slot && i < n; i++)
        if (zs[i])
            xfr_zmap_put(m, zs[i], zs, n);
}

void xfr_zmap_free(xfr_zmap_t *m)
{
    free(m->slot);
    m->slot = NULL;
}

int xfr_key_index(const tsig_key_t *keys, size_t nkeys, const char *name)
{
    if (!name)
        return -1;
    char n[256];
    size_t l = strlen(name);
    if (l >= sizeof(n))
        return -1;
    memcpy(n, name, l + 1);
    if (l && n[l - 1] == '.')
        n[l - 1] = '\0';
    for (size_t i = 0; i < nkeys; i++)
        if (strcasecmp(keys[i].name, n) == 0)
            return (int)i;
    return -1;
}

void xfr_zst_free(struct zst *z)
{
    if (!z)
        return;
    xfr_catalog_cfg_free(z->cat);
    free(z->member_of);
    free(z->member_id);
    free(z->member_group);
    free(z->member_coo);
    free(z->key);
    free(z->allow_transfer.p);
    free(z->allow_notify.p);
    xfr_journal_free(z->journal);
    free(z->nt);
    for (size_t k = 0; z->prim_tls && k < z->nprim; k++)
        xfr_tls_release(z->prim_tls[k]);
    free(z->prim_tls);
    free(z->prim);
    free(z->prim_key);
    free(z->file);
    zone_free(z->base);
    free(z);
}

size_t xfr_msg_question(uint8_t *m, uint16_t id, uint16_t flags, const uint8_t *name, size_t nlen,
                        uint16_t qtype)
{
    memset(m, 0, 12);
    tern_wr16(m, id);
    tern_wr16(m + 2, flags);
    tern_wr16(m + 4, 1);
    memcpy(m + 12, name, nlen);
    tern_wr16(m + 12 + nlen, qtype);
    tern_wr16(m + 12 + nlen + 2, WIRE_CLASS_IN);
    return 12 + nlen + 4;
}

size_t xfr_msg_soa(uint8_t *m, uint32_t ttl, const uint8_t *rd, size_t rdlen)
{
    tern_wr16(m, 0xC00C);
    tern_wr16(m + 2, WIRE_T_SOA);
    tern_wr16(m + 4, WIRE_CLASS_IN);
    tern_wr32(m + 6, ttl);
    tern_wr16(m + 10, (uint16_t)rdlen);
    memcpy(m + 12, rd, rdlen);
    return 12 + rdlen;
}

/* Pin the published version of the zone whose apex is name: a reference taken while the view
 * cannot be freed (RCU read side, this thread online only for that), so the transfer holds no
 * grace period up afterwards. NULL if not served. */
zone_t *xfr_pin_zone(xfr_t *x, const uint8_t *name)
{
    return answer_pin_zone(x->published, name);
}

bool xfr_wanted(const config_t *cfg)
{
    if (cfg->ntsig_keys)
        return true;
    for (size_t i = 0; i < cfg->nzones; i++) {
        const config_zone_t *z = &cfg->zones[i];
        if (z->nprimaries || z->nnotify || z->allow_transfer.n || z->nallow_update)
            return true;
    }
    return false;
}

/* The TLS contexts one xfr_configure() has made: a primary named by many zones with the same tls
 * settings (a catalog's members all come from one) gets one context — one CA store in memory, one
 * session its pulls resume — not one per zone. The set holds a reference to each. */
typedef struct {
    struct xfr_tls **t;
    size_t n, cap;
} tls_set_t;

static void tls_set_free(tls_set_t *ts)
{
    for (size_t i = 0; i < ts->n; i++)
        xfr_tls_release(ts->t[i]);
    free(ts->t);
}

/* Primary k of cz's TLS context (XoT): one of ts, or a new one added to it. The config check
 * read its files, so a failure here is a file changed since (or out of memory): logged, and the
 * new settings are not taken (xfr_configure() fails, the previous ones stay) — never the
 * primary reached in clear text. */
static struct xfr_tls *prim_tls_new(const config_zone_t *cz, size_t k, tls_set_t *ts)
{
    const config_xfr_peer_t *p = &cz->primaries[k];
    for (size_t i = 0; i < ts->n; i++)
        if (xfr_tls_matches(ts->t[i], p->text, p->tls))
            return xfr_tls_retain(ts->t[i]);
    if (ts->n == ts->cap) {
        size_t cap = ts->cap ? 2 * ts->cap : 8;
        struct xfr_tls **n = realloc(ts->t, cap * sizeof(*n));
        if (!n)
            return NULL;
        ts->t = n;
        ts->cap = cap;
    }
    char err[512];
    xfr_tls_t *t = xfr_tls_new(p->tls, p->text, err, sizeof(err));
    if (!t) {
        log_err("xfr: zone %s: primary %s: TLS settings unusable: %s", cz->origin, p->text, err);
        return NULL;
    }
    ts->t[ts->n++] = t;
    return xfr_tls_retain(t);
}

/* One zone's transfer settings from its config; key indexes into keys (the new config's). NULL
 * when out of memory. */
static struct zst *zst_new(const config_zone_t *cz, const tsig_key_t *keys, size_t nkeys,
                           tls_set_t *ts)
{
    struct zst *z = calloc(1, sizeof(*z));
    if (!z)
        return NULL;
    char key[DNAME_KEY_MAX];
    const char *why;
    int al;
    if (dname_key(cz->origin, key, sizeof(key), &why) < 0 || !(z->key = strdup(key)) ||
        (al = dname_from_str(cz->origin, strlen(cz->origin), false, z->apex, &why)) < 0)
        goto fail;
    z->apex_len = (size_t)al;
    z->configured = true;
    z->transfer_key = xfr_key_index(keys, nkeys, cz->transfer_key);
    z->transfer_tls = cz->transfer_tls;
    if (config_prefix_list_copy(&z->allow_transfer, &cz->allow_transfer) < 0 ||
        config_prefix_list_copy(&z->allow_notify, &cz->allow_notify) < 0)
        goto fail;
    if (cz->nnotify) {
        if (!(z->nt = calloc(cz->nnotify, sizeof(*z->nt))))
            goto fail;
        for (size_t k = 0; k < cz->nnotify; k++) {
            z->nt[k].peer = cz->notify[k];
            z->nt[k].peer.key = NULL;
            z->nt[k].key = xfr_key_index(keys, nkeys, cz->notify[k].key);
        }
        z->nnt = cz->nnotify;
    }
    if (cz->nprimaries) {
        z->secondary = true;
        if (!(z->prim = calloc(cz->nprimaries, sizeof(*z->prim))) ||
            !(z->prim_key = calloc(cz->nprimaries, sizeof(int))) ||
            !(z->prim_tls = calloc(cz->nprimaries, sizeof(*z->prim_tls))))
            goto fail;
        z->nprim = cz->nprimaries;
        for (size_t k = 0; k < cz->nprimaries; k++) {
            z->prim[k] = cz->primaries[k];
            z->prim[k].key = NULL;
            z->prim[k].tls = NULL; /* the config's; prim_tls is ours */
            z->prim_key[k] = xfr_key_index(keys, nkeys, cz->primaries[k].key);
            if (cz->primaries[k].tls && !(z->prim_tls[k] = prim_tls_new(cz, k, ts)))
                goto fail;
        }
        if (cz->file && !(z->file = strdup(cz->file)))
            goto fail;
        if (cz->catalog_consumer &&
            !(z->cat = xfr_catalog_cfg_new(cz->catalog_consumer, keys, nkeys)))
            goto fail;
    }
    return z;
fail:
    xfr_zst_free(z);
    return NULL;
}

/* Under mu: what z, replacing o across a reload, keeps of what o learnt as a zone served out —
 * its journal (with the same bounds: new bounds need a new journal), serial, last transfer out,
 * and each NOTIFY target's state. */
static void zst_keep_out(const xfr_t *x, struct zst *z, struct zst *o)
{
    if (x->journal_versions == o->journal_versions && x->journal_bytes == o->journal_bytes) {
        z->journal = o->journal;
        o->journal = NULL;
    }
    z->serial = o->serial;
    z->warned_serial = o->warned_serial;
    z->out_when = o->out_when;
    memcpy(z->out_peer, o->out_peer, sizeof(z->out_peer));
    memcpy(z->out_kind, o->out_kind, sizeof(z->out_kind));
    z->out_serial = o->out_serial;
    z->out_records = o->out_records;
    z->out_count = o->out_count;
    for (size_t k = 0; k < z->nnt; k++)
        for (size_t j = 0; j < o->nnt; j++)
            if (strcmp(z->nt[k].peer.text, o->nt[j].peer.text) == 0) {
                struct ntarget keep = z->nt[k];
                z->nt[k] = o->nt[j];
                z->nt[k].peer = keep.peer;
                z->nt[k].key = keep.key;
            }
}

/* Under mu: ... and as a secondary (both are): its base version, timers and last transfer in. */
static void zst_keep_in(struct zst *z, struct zst *o)
{
    if (!z->secondary || !o->secondary)
        return;
    z->base = o->base;
    o->base = NULL;
    z->base_tried = o->base_tried;
    z->next_ms = o->next_ms;
    z->expire_ms = o->expire_ms;
    z->refresh_wall = o->refresh_wall;
    z->expire_wall = o->expire_wall;
    z->expired = o->expired;
    z->busy = o->busy;
    z->in_when = o->in_when;
    memcpy(z->in_primary, o->in_primary, sizeof(z->in_primary));
    memcpy(z->in_kind, o->in_kind, sizeof(z->in_kind));
    memcpy(z->in_error, o->in_error, sizeof(z->in_error));
    z->in_records = o->in_records;
    z->in_count = o->in_count;
}

/* Under mu: a journal, with x's bounds, for each of zs that kept none. */
static void zst_journals(const xfr_t *x, struct zst **zs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        zs[i]->journal_versions = x->journal_versions;
        zs[i]->journal_bytes = x->journal_bytes;
        if (!zs[i]->journal && x->journal_versions &&
            !(zs[i]->journal = xfr_journal_new(x->journal_versions, x->journal_bytes)))
            log_err("xfr: zone %s: out of memory for its journal: IXFR falls back to AXFR",
                    zs[i]->key);
    }
}

/* Under mu: zs (n zones) and keys replace x's, with cfg's settings; the old ones are returned
 * through the pointers to be freed outside mu. */
static void swap_config(xfr_t *x, const config_t *cfg, struct zst ***zs, size_t *n,
                        tsig_key_t **keys, size_t *nkeys)
{
    struct zst **oz = x->zones;
    size_t on = x->nzones;
    tsig_key_t *ok = x->keys;
    size_t onk = x->nkeys;
    x->zones = *zs;
    x->nzones = *n;
    x->keys = *keys;
    x->nkeys = *nkeys;
    *zs = oz;
    *n = on;
    *keys = ok;
    *nkeys = onk;
    x->notify_retries = cfg->xfr_notify_retries;
    x->notify_timeout_ms = cfg->xfr_notify_timeout_ms;
    x->timeout_ms = cfg->xfr_timeout_ms;
    x->total_ms = cfg->xfr_total_timeout_ms;
    x->in_max = cfg->xfr_in_concurrency;
    x->max_bytes = (size_t)cfg->xfr_max_mib << 20;
}

int xfr_configure(xfr_t *x, const config_t *cfg)
{
    tsig_key_t *keys = NULL;
    size_t nkeys = cfg->ntsig_keys, n = 0;
    if (nkeys) {
        if (!(keys = malloc(nkeys * sizeof(*keys))))
            return TERN_ENOMEM;
        memcpy(keys, cfg->tsig_keys, nkeys * sizeof(*keys));
    }
    tls_set_t ts = {0};
    size_t cap = cfg->nzones + 1, nloaded = 0;
    struct zst **zs = calloc(cap, sizeof(*zs)), **loaded = NULL;
    if (!zs)
        goto nomem;
    for (size_t i = 0; i < cfg->nzones; i++) {
        const config_zone_t *cz = &cfg->zones[i];
        if (!cz->nprimaries && !cz->nnotify && !cz->allow_transfer.n)
            continue;
        if (!(zs[n] = zst_new(cz, keys, nkeys, &ts)))
            goto nomem;
        n++;
    }
    tls_set_free(&ts); /* the zones hold theirs */
    /* the members of catalogs followed from now on, read from their directories (files: before
     * mu) */
    if (xfr_catalog_load(x, zs, n, &loaded, &nloaded) < 0)
        goto nomem;
    pthread_mutex_lock(&x->mu);
    /* the journals' bounds first: zst_journals() makes the new zones' journals with them */
    x->journal_versions = cfg->xfr_journal_versions;
    x->journal_bytes = (size_t)cfg->xfr_journal_mib << 20;
    xfr_zmap_t old; /* the zones followed so far by key: a scan each is n^2 with 100k zones */
    xfr_zmap_init(&old, x->zones, x->nzones, 0);
    for (size_t i = 0; i < n; i++) {
        struct zst *o = xfr_zmap_get(&old, zs[i]->key);
        if (o) {
            zst_keep_out(x, zs[i], o);
            zst_keep_in(zs[i], o);
        }
    }
    xfr_zmap_free(&old);
    /* the catalogs' members, their primaries from the catalogs' new settings */
    if (xfr_catalog_configure(x, &zs, &n, &cap, loaded, nloaded) < 0)
        log_err("xfr: out of memory; some catalog members wait for their catalog's next refresh");
    free(loaded);
    zst_journals(x, zs, n);
    swap_config(x, cfg, &zs, &n, &keys, &nkeys); /* zs, n, keys, nkeys: the old ones now */
    x->capzones = cap;
    pthread_mutex_unlock(&x->mu);
    for (size_t i = 0; i < n; i++)
        xfr_zst_free(zs[i]);
    free(zs);
    if (keys)
        explicit_bzero(keys, nkeys * sizeof(*keys));
    free(keys);
    if (x->started) {
        ev_signal(x->notify_ev);
        xfr_secondary_grow(x);
    }
    return 0;
nomem:
    tls_set_free(&ts);
    for (size_t i = 0; i < n; i++)
        xfr_zst_free(zs[i]);
    free(zs);
    free(keys);
    return TERN_ENOMEM;
}

bool xfr_zone_wanted(xfr_t *x, const char *key)
{
    pthread_mutex_lock(&x->mu);
    const struct zst *z = xfr_zone_find(x, key);
    bool want = z && (z->nnt || z->allow_transfer.n);
    pthread_mutex_unlock(&x->mu);
    return want;
}

/* ---- the workers' hand-off queue ---------------------------------------------------------- */

static bool submit(xfr_t *x, bool tcp, int fd, SSL *ssl, const uint8_t *msg, size_t len,
                   const struct sockaddr_storage *peer, const struct sockaddr_storage *local,
                   bool pktinfo)
{
    if (len > RBUF_CAP)
        return false;
    pthread_mutex_lock(&x->qmu);
    if (x->qlen == XFR_QUEUE_MAX || __atomic_load_n(&x->stop, __ATOMIC_ACQUIRE)) {
        pthread_mutex_unlock(&x->qmu);
        return false;
    }
    struct handoff *r = &x->q[(x->qhead + x->qlen) % XFR_QUEUE_MAX];
    x->qlen++;
    bool wake = x->qlen == 1;
    r->tcp = tcp;
    r->fd = fd;
    r->ssl = ssl;
    r->peer = *peer;
    r->local = *local;
    r->pktinfo = pktinfo;
    r->len = len;
    memcpy(r->buf, msg, len);
    pthread_mutex_unlock(&x->qmu);
    if (wake)
        ev_signal(x->out_ev);
    return true;
}

static bool handoff_udp(void *ctx, int fd, const uint8_t *msg, size_t len,
                        const struct sockaddr_storage *peer, const struct sockaddr_storage *local,
                        bool pktinfo)
{
    return submit(ctx, false, fd, NULL, msg, len, peer, local, pktinfo);
}

static bool handoff_tcp(void *ctx, int fd, const uint8_t *buf, size_t len,
                        const struct sockaddr_storage *peer, const struct sockaddr_storage *local)
{
    return submit(ctx, true, fd, NULL, buf, len, peer, local, false);
}

/* XoT (RFC 9103): a DoT connection with its TLS state, served like a TCP one through it */
static bool handoff_tls(void *ctx, int fd, void *ssl, const uint8_t *buf, size_t len,
                        const struct sockaddr_storage *peer, const struct sockaddr_storage *local)
{
    return submit(ctx, true, fd, ssl, buf, len, peer, local, false);
}

server_handoff_t xfr_handoff(xfr_t *x)
{
    return (server_handoff_t){.udp = handoff_udp, .tcp = handoff_tcp, .tls = handoff_tls, .ctx = x};
}

bool xfr_handoff_take(xfr_t *x, struct handoff *r)
{
    for (;;) {
        pthread_mutex_lock(&x->qmu);
        if (x->qlen == 0) {
            pthread_mutex_unlock(&x->qmu);
            return false;
        }
        /* copy out of the slot so workers may refill it meanwhile */
        struct handoff *s = &x->q[x->qhead];
        *r = *s;
        r->buf = malloc(s->len ? s->len : 1);
        if (r->buf)
            memcpy(r->buf, s->buf, s->len);
        x->qhead = (x->qhead + 1) % XFR_QUEUE_MAX;
        x->qlen--;
        pthread_mutex_unlock(&x->qmu);
        if (r->buf)
            return true;
        tls_conn_free(r->ssl);
        if (r->tcp)
            close(r->fd);
    }
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

xfr_t *xfr_new(const answer_view_t *const *published, const xfr_hooks_t *hooks)
{
    xfr_t *x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    x->published = published;
    if (hooks)
        x->hooks = *hooks;
    pthread_mutex_init(&x->mu, NULL);
    pthread_mutex_init(&x->qmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* pull_main()'s deadlines are monotonic */
    pthread_cond_init(&x->pull_cv, &ca);
    pthread_condattr_destroy(&ca);
    x->out_ev = x->notify_ev = x->out_ep = x->ns4 = x->ns6 = -1;
    for (size_t i = 0; i < XFR_CONNS_MAX; i++) {
        x->conns[i].fd = -1;
        tsig_ctx_init(&x->conns[i].tsig);
    }
    /* malloc, not calloc: buffers cost address space until a transfer touches them */
    x->qbufs = malloc((size_t)XFR_QUEUE_MAX * RBUF_CAP);
    x->conn_bufs = malloc((size_t)XFR_CONNS_MAX * (RBUF_CAP + WBUF_CAP + 1024));
    x->out_ev = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    x->notify_ev = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    x->out_ep = epoll_create1(EPOLL_CLOEXEC);
    if (!x->qbufs || !x->conn_bufs || x->out_ev < 0 || x->notify_ev < 0 || x->out_ep < 0) {
        xfr_free(x);
        return NULL;
    }
    for (size_t i = 0; i < XFR_QUEUE_MAX; i++)
        x->q[i].buf = x->qbufs + i * RBUF_CAP;
    for (size_t i = 0; i < XFR_CONNS_MAX; i++) {
        x->conns[i].rbuf = x->conn_bufs + i * (RBUF_CAP + WBUF_CAP + 1024);
        x->conns[i].wbuf = x->conns[i].rbuf + RBUF_CAP;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    if (epoll_ctl(x->out_ep, EPOLL_CTL_ADD, x->out_ev, &ev) < 0) {
        xfr_free(x);
        return NULL;
    }
    x->ns4 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    x->ns6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    x->notify_retries = 5;
    x->notify_timeout_ms = 2000;
    x->timeout_ms = 10000;
    x->total_ms = 600000;
    x->in_max = 8;
    x->max_bytes = (size_t)1 << 30;
    x->journal_versions = 64;
    x->journal_bytes = (size_t)64 << 20;
    return x;
}

int xfr_start(xfr_t *x)
{
    if (pthread_create(&x->out_thread, NULL, xfr_out_main, x) != 0) {
        log_err("xfr: cannot start the transfer-out thread");
        return TERN_ENOMEM;
    }
    if (pthread_create(&x->notify_thread, NULL, xfr_notify_main, x) != 0) {
        log_err("xfr: cannot start the NOTIFY thread");
        pthread_mutex_lock(&x->mu);
        __atomic_store_n(&x->stop, true, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&x->mu);
        ev_signal(x->out_ev);
        pthread_join(x->out_thread, NULL);
        return TERN_ENOMEM;
    }
    x->started = true;
    xfr_secondary_grow(x);
    return 0;
}

void xfr_free(xfr_t *x)
{
    if (!x)
        return;
    if (x->started) {
        pthread_mutex_lock(&x->mu);
        __atomic_store_n(&x->stop, true, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&x->pull_cv);
        pthread_mutex_unlock(&x->mu);
        ev_signal(x->out_ev);
        ev_signal(x->notify_ev);
        pthread_join(x->out_thread, NULL);
        pthread_join(x->notify_thread, NULL);
        /* each gives up its primary within WAIT_SLICE_MS of the stop (wait_fd()) */
        for (unsigned i = 0; i < x->npullers; i++)
            pthread_join(x->pullers[i].t, NULL);
    }
    for (size_t i = 0; i < x->qlen; i++) {
        struct handoff *r = &x->q[(x->qhead + i) % XFR_QUEUE_MAX];
        tls_conn_free(r->ssl);
        if (r->tcp)
            close(r->fd);
    }
    for (size_t i = 0; i < x->nch; i++) {
        zone_free(x->ch[i].old);
        zone_free(x->ch[i].new);
        free(x->ch[i].key);
    }
    free(x->ch);
    xfr_update_release_all(x);
    for (size_t i = 0; i < x->nzones; i++)
        xfr_zst_free(x->zones[i]);
    free(x->zones);
    if (x->keys)
        explicit_bzero(x->keys, x->nkeys * sizeof(*x->keys));
    free(x->keys);
    free(x->qbufs);
    free(x->conn_bufs);
    if (x->out_ev >= 0)
        close(x->out_ev);
    if (x->notify_ev >= 0)
        close(x->notify_ev);
    if (x->out_ep >= 0)
        close(x->out_ep);
    if (x->ns4 >= 0)
        close(x->ns4);
    if (x->ns6 >= 0)
        close(x->ns6);
    pthread_cond_destroy(&x->pull_cv);
    pthread_mutex_destroy(&x->mu);
    pthread_mutex_destroy(&x->qmu);
    free(x);
}

void xfr_zone_info(xfr_t *x, const char *key, xfr_zone_info_t *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&x->mu);
    const struct zst *z = xfr_zone_find(x, key);
    if (z) {
        out->known = true;
        out->secondary = z->secondary;
        out->serial = z->secondary && z->base ? z->base->serial : z->serial;
        if (z->journal) {
            xfr_journal_entry_t e[64];
            size_t n = xfr_journal_list(z->journal, e, 64);
            size_t from = n > 16 ? n - 16 : 0;
            for (size_t i = from; i < n; i++) {
                size_t k = out->nversions++;
                out->versions[k].from = e[i].from;
                out->versions[k].to = e[i].to;
                out->versions[k].removed = e[i].removed;
                out->versions[k].added = e[i].added;
                out->versions[k].bytes = e[i].bytes;
                out->versions[k].when = (int64_t)e[i].when.tv_sec;
            }
        }
        out->out_when = z->out_when;
        memcpy(out->out_peer, z->out_peer, sizeof(out->out_peer));
        memcpy(out->out_kind, z->out_kind, sizeof(out->out_kind));
        out->out_serial = z->out_serial;
        out->out_records = z->out_records;
        out->out_count = z->out_count;
        out->in_when = z->in_when;
        memcpy(out->in_primary, z->in_primary, sizeof(out->in_primary));
        memcpy(out->in_kind, z->in_kind, sizeof(out->in_kind));
        out->in_records = z->in_records;
        out->in_count = z->in_count;
        out->refresh_at = z->secondary ? z->refresh_wall : 0;
        out->expire_at = z->secondary ? z->expire_wall : 0;
        out->expired = z->expired;
        memcpy(out->in_error, z->in_error, sizeof(out->in_error));
        for (size_t i = 0; i < z->nnt && out->nnotify < 8; i++) {
            size_t k = out->nnotify++;
            snprintf(out->notify[k].peer, sizeof(out->notify[k].peer), "%s", z->nt[i].peer.text);
            out->notify[k].serial = z->nt[i].serial;
            out->notify[k].acked = z->nt[i].acked;
            out->notify[k].attempts = z->nt[i].attempts;
            out->notify[k].acked_when = z->nt[i].acked_when;
        }
    }
    pthread_mutex_unlock(&x->mu);
}

void xfr_get_stats(xfr_t *x, xfr_stats_t *out)
{
    uint64_t *o = (uint64_t *)out;
    const uint64_t *s = (const uint64_t *)&x->stats;
    for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
        o[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}
