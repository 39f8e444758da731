/*
 * xfr_notify.c — NOTIFY (RFC 1996) both ways and the journal entries that go with a change: the
 * "tern-notify" thread turns each published change of a zone with transfers into a journal entry
 * (xfr_diff) and NOTIFYs the zone's secondaries until they answer; a NOTIFY received (handed to
 * the out thread) makes a secondary zone due for its puller at once.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "tern/common/byteorder.h"
#include "tern/common/clock.h"
#include "tern/common/log.h"
#include "tern/common/rcu.h"

#include "xfr_int.h"

void xfr_zone_changed(xfr_t *x, const char *key, zone_t *old, zone_t *new)
{
    if (!new || new->unavailable || !xfr_zone_wanted(x, key))
        return;
    char *k = strdup(key);
    pthread_mutex_lock(&x->mu);
    if (!k || (x->nch == x->capch && !(x->capch = x->capch ? 2 * x->capch : 16,
                                       x->ch = realloc(x->ch, x->capch * sizeof(*x->ch))))) {
        pthread_mutex_unlock(&x->mu);
        free(k);
        log_err("xfr: zone %s: out of memory; its change is not journaled", key);
        return;
    }
    x->ch[x->nch++] = (struct change){
        .key = k,
        .old = old && !old->unavailable ? zone_retain(old) : NULL,
        .new = zone_retain(new),
    };
    pthread_mutex_unlock(&x->mu);
    ev_signal(x->notify_ev);
}

int xfr_notify_now(xfr_t *x, const char *key)
{
    pthread_mutex_lock(&x->mu);
    struct zst *z = xfr_zone_find(x, key);
    size_t n = z ? z->nnt : 0;
    for (size_t i = 0; i < n; i++)
        z->nt[i] = (struct ntarget){.peer = z->nt[i].peer,
                                    .key = z->nt[i].key,
                                    .serial = z->serial,
                                    .pending = true,
                                    .next_ms = tern_monotonic_ms()};
    pthread_mutex_unlock(&x->mu);
    ev_signal(x->notify_ev);
    return (int)n;
}

/* A NOTIFY for a zone we are secondary for (RFC 1996 §3.7): NOERROR, and a refresh now. */
size_t xfr_notify_in(xfr_t *x, xfr_msg_t *im, const uint8_t *req,
                     const struct sockaddr_storage *peer, uint8_t *out, size_t cap)
{
    char from[64];
    limit_addr_text(peer, from, sizeof(from));
    __atomic_add_fetch(&x->stats.notify_received, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&x->mu);
    struct zst *z = xfr_zone_find_apex(x, im->q.qname);
    unsigned rcode = WIRE_RC_NOERROR;
    const char *why = NULL;
    if (!z || !z->secondary) {
        rcode = WIRE_RC_NOTAUTH;
        why = "not a secondary zone here";
    } else {
        bool allowed = false;
        if (z->allow_notify.n)
            allowed = limit_prefix_match(&z->allow_notify, peer);
        else
            for (size_t i = 0; i < z->nprim && !allowed; i++)
                allowed = xfr_same_host(&z->prim[i].addr, peer);
        int need = -1;
        for (size_t i = 0; i < z->nprim && need < 0; i++)
            if (xfr_same_host(&z->prim[i].addr, peer))
                need = z->prim_key[i];
        if (!allowed) {
            rcode = WIRE_RC_REFUSED;
            why = "not in allow_notify (or a primary)";
        } else if (need >= 0 && (!im->tsig || strcasecmp(im->key->name, x->keys[need].name))) {
            rcode = WIRE_RC_NOTAUTH;
            why = "not signed with the primary's key";
        } else {
            z->notified = true;
            pthread_cond_broadcast(&x->pull_cv);
        }
    }
    pthread_mutex_unlock(&x->mu);
    char zn[DNAME_KEY_MAX];
    if (dname_to_str(im->q.qname, zn, sizeof(zn)) < 0)
        snprintf(zn, sizeof(zn), "?");
    if (why) {
        if (xfr_out_refusal_log_ok())
            log_info("xfr: NOTIFY for %s from %s refused: %s", zn, from, why);
    } else {
        log_info("xfr: NOTIFY for %s from %s: refreshing", zn, from);
    }
    size_t n = xfr_out_reply_head(out, req, im->q.question_len, rcode, rcode == WIRE_RC_NOERROR);
    tern_wr16(out + 2, (uint16_t)(tern_rd16(out + 2) | (WIRE_OP_NOTIFY << 11)));
    return xfr_out_finish_reply(im, out, n, cap);
}

/* ---- the NOTIFY thread: journals, NOTIFY out -------------------------------------------- */

static void journal_change(xfr_t *x, struct change *ch)
{
    xfr_delta_t *d = NULL;
    bool serial_up = ch->old && xfr_serial_lt(ch->old->serial, ch->new->serial);
    if (ch->old && serial_up)
        d = xfr_diff(ch->old, ch->new);
    pthread_mutex_lock(&x->mu);
    struct zst *z = xfr_zone_find(x, ch->key);
    if (z) {
        if (ch->old && !serial_up && ch->old->serial == ch->new->serial) {
            if (!z->warned_serial)
                log_warn("xfr: zone %s changed but its serial (%u) did not: secondaries keep "
                         "the old data until it increases",
                         ch->key, ch->new->serial);
            z->warned_serial = true;
        } else if (ch->old && !serial_up) {
            log_warn("xfr: zone %s: serial went back from %u to %u; IXFR history dropped", ch->key,
                     ch->old->serial, ch->new->serial);
            if (z->journal)
                xfr_journal_clear(z->journal);
        } else {
            z->warned_serial = false;
        }
        if (d && z->journal) {
            xfr_journal_add(z->journal, d);
            d = NULL;
        }
        z->serial = ch->new->serial;
        if (!ch->old || serial_up) {
            int64_t now = tern_monotonic_ms();
            for (size_t i = 0; i < z->nnt; i++) {
                struct ntarget *t = &z->nt[i];
                t->serial = ch->new->serial;
                t->pending = true;
                t->acked = false;
                t->attempts = 0;
                t->next_ms = now;
            }
        }
    }
    pthread_mutex_unlock(&x->mu);
    if (d)
        xfr_delta_release(d);
    zone_free(ch->old);
    zone_free(ch->new);
    free(ch->key);
}

/* A NOTIFY for zone apex with serial, id; signed with key when not NULL. */
static size_t make_notify(uint8_t *m, size_t cap, const uint8_t *apex, size_t alen, uint32_t serial,
                          uint16_t id, const tsig_key_t *key, tsig_ctx_t *ctx)
{
    size_t n = xfr_msg_question(m, id, (uint16_t)(WIRE_OP_NOTIFY << 11 | WIRE_FLAG_AA), apex, alen,
                                WIRE_T_SOA);
    tern_wr16(m + 6, 1);
    /* RFC 1996 §3.7: the new SOA's serial as a hint (the rest of the SOA is not needed): mname
     * and rname the root, then the serial, the four timers zero */
    uint8_t rd[2 + 20] = {0};
    tern_wr32(rd + 2, serial);
    n += xfr_msg_soa(m + n, 0, rd, sizeof(rd));
    if (key) {
        size_t nl = n;
        if (tsig_sign_request(ctx, key, m, n, cap, now_s(), &nl) == 0)
            n = nl;
    }
    return n;
}

static void notify_send(xfr_t *x, int64_t now)
{
    pthread_mutex_lock(&x->mu);
    for (size_t i = 0; i < x->nzones; i++) {
        struct zst *z = x->zones[i];
        for (size_t k = 0; k < z->nnt; k++) {
            struct ntarget *t = &z->nt[k];
            if (!t->pending || t->next_ms > now)
                continue;
            if (t->attempts >= x->notify_retries) {
                log_warn("xfr: NOTIFY %s serial %u to %s: no answer after %u sends", z->key,
                         t->serial, t->peer.text, t->attempts);
                __atomic_add_fetch(&x->stats.notify_failed, 1, __ATOMIC_RELAXED);
                t->pending = false;
                continue;
            }
            uint8_t m[1024];
            tsig_ctx_t ctx;
            tsig_ctx_init(&ctx);
            uint16_t id;
            if (getrandom(&id, sizeof(id), 0) != sizeof(id))
                id = (uint16_t)now;
            t->id = id;
            const tsig_key_t *key = t->key >= 0 ? &x->keys[t->key] : NULL;
            size_t n = make_notify(m, sizeof(m), z->apex, z->apex_len, t->serial, id, key, &ctx);
            tsig_ctx_clear(&ctx);
            int fd = t->peer.addr.ss_family == AF_INET ? x->ns4 : x->ns6;
            if (fd >= 0)
                (void)sendto(fd, m, n, MSG_DONTWAIT, (const struct sockaddr *)&t->peer.addr,
                             t->peer.addr_len);
            if (t->attempts == 0)
                log_info("xfr: NOTIFY %s serial %u to %s", z->key, t->serial, t->peer.text);
            else
                log_debug("xfr: NOTIFY %s serial %u to %s again (send %u)", z->key, t->serial,
                          t->peer.text, t->attempts + 1);
            t->attempts++;
            t->next_ms = now + x->notify_timeout_ms;
            __atomic_add_fetch(&x->stats.notify_sent, 1, __ATOMIC_RELAXED);
        }
    }
    pthread_mutex_unlock(&x->mu);
}

/* Answers to our NOTIFYs on socket fd. */
static void notify_recv(xfr_t *x, int fd)
{
    for (;;) {
        uint8_t m[4096];
        struct sockaddr_storage from;
        socklen_t fl = sizeof(from);
        ssize_t k = recvfrom(fd, m, sizeof(m), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        if (k < 12)
            return;
        uint16_t id = tern_rd16(m), f = tern_rd16(m + 2);
        if (!(f & WIRE_FLAG_QR) || WIRE_OPCODE(f) != WIRE_OP_NOTIFY)
            continue;
        pthread_mutex_lock(&x->mu);
        for (size_t i = 0; i < x->nzones; i++) {
            struct zst *z = x->zones[i];
            for (size_t j = 0; j < z->nnt; j++) {
                struct ntarget *t = &z->nt[j];
                if (!t->pending || t->id != id || !xfr_same_host(&t->peer.addr, &from))
                    continue;
                t->pending = false;
                t->acked = WIRE_RCODE(f) == WIRE_RC_NOERROR;
                t->acked_when = (int64_t)now_s();
                if (t->acked)
                    __atomic_add_fetch(&x->stats.notify_acked, 1, __ATOMIC_RELAXED);
                else
                    log_warn("xfr: NOTIFY %s serial %u to %s: answered rcode %u", z->key, t->serial,
                             t->peer.text, WIRE_RCODE(f));
            }
        }
        pthread_mutex_unlock(&x->mu);
    }
}

void *xfr_notify_main(void *arg)
{
    xfr_t *x = arg;
    (void)pthread_setname_np(pthread_self(), "tern-notify");
    tern_rcu_register();
    tern_rcu_offline();
    for (;;) {
        int64_t now = tern_monotonic_ms(), next = now + 1000;
        pthread_mutex_lock(&x->mu);
        if (x->stop) {
            pthread_mutex_unlock(&x->mu);
            break;
        }
        struct change *ch = x->ch;
        size_t nch = x->nch;
        x->ch = NULL;
        x->nch = x->capch = 0;
        pthread_mutex_unlock(&x->mu);
        for (size_t i = 0; i < nch; i++)
            journal_change(x, &ch[i]);
        free(ch);
        notify_send(x, now);
        pthread_mutex_lock(&x->mu);
        now = tern_monotonic_ms();
        for (size_t i = 0; i < x->nzones; i++) {
            struct zst *z = x->zones[i];
            for (size_t k = 0; k < z->nnt; k++)
                if (z->nt[k].pending && z->nt[k].next_ms < next)
                    next = z->nt[k].next_ms;
        }
        bool busy = x->nch > 0;
        pthread_mutex_unlock(&x->mu);
        int wait = busy ? 0 : next > now ? (int)(next - now) : 0;
        struct pollfd pf[3] = {{.fd = x->notify_ev, .events = POLLIN},
                               {.fd = x->ns4, .events = POLLIN},
                               {.fd = x->ns6, .events = POLLIN}};
        if (poll(pf, 3, wait) > 0) {
            if (pf[0].revents)
                ev_drain(x->notify_ev);
            if (pf[1].revents)
                notify_recv(x, x->ns4);
            if (pf[2].revents)
                notify_recv(x, x->ns6);
        }
    }
    tern_rcu_unregister();
    return NULL;
}
