/*
 * xfr_update.c — UPDATE (RFC 2136) on the out thread: verified like any signed request, handed
 * to the update service (hooks.update) with a token, and answered when the service gives the
 * rcode back (xfr_update_done(), from its thread, wakes the out thread). The out thread keeps
 * what the answer needs — the request, its TSIG state, where to send it — in a slot of
 * x->upd, so the update service never touches a socket or a key: it returns an rcode only.
 *
 * A TCP connection with an UPDATE pending reads nothing more until the answer (its requests are
 * answered in order), and its idle deadline is XFR_UPDATE_WAIT_MS meanwhile; one closed
 * meanwhile (its slot's gen moved on) gets nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "tern/common/byteorder.h"
#include "tern/common/clock.h"
#include "tern/common/log.h"
#include "xfr_int.h"

static struct upending *slot_take(xfr_t *x)
{
    for (size_t i = 0; i < XFR_UPDATES_MAX; i++)
        if (!x->upd[i].used) {
            struct upending *p = &x->upd[i];
            p->used = true;
            p->gen++;
            return p;
        }
    return NULL;
}

static void slot_release(struct upending *p)
{
    if (!p->tcp) {
        tsig_ctx_clear(&p->ctx);
        explicit_bzero(&p->key, sizeof(p->key));
    }
    free(p->im);
    free(p->req);
    p->im = NULL;
    p->req = NULL;
    p->used = false;
}

static uint64_t token_of(const xfr_t *x, const struct upending *p)
{
    return (uint64_t)p->gen << 32 | (uint64_t)(p - x->upd + 1);
}

/* Give p's request to the update service. */
static bool hand_on(xfr_t *x, struct upending *p, size_t len, const struct sockaddr_storage *peer)
{
    const char *key = p->im->tsig ? p->im->key->name : NULL;
    return x->hooks.update(x->hooks.update_ctx, p->req, len, key, peer, token_of(x, p));
}

void xfr_update_udp(xfr_t *x, const struct handoff *r)
{
    uint8_t out[512];
    struct upending *p = slot_take(x);
    if (!p) {
        if (xfr_out_refusal_log_ok())
            log_warn("xfr: UPDATE over UDP dropped: %d are waiting for the update service",
                     XFR_UPDATES_MAX);
        return; /* the client sends again */
    }
    p->tcp = false;
    p->r = *r;
    p->r.buf = NULL;
    p->req = malloc(r->len ? r->len : 1);
    p->im = malloc(sizeof(*p->im));
    tsig_ctx_init(&p->ctx);
    if (!p->req || !p->im) {
        slot_release(p);
        return;
    }
    memcpy(p->req, r->buf, r->len);
    p->im->ctx = &p->ctx;
    p->im->key = &p->key;
    xfr_out_check_msg(x, p->req, r->len, p->im);
    size_t n = 0;
    if (!p->im->ok) {
        if (p->im->q.has_question)
            n = xfr_out_reply_head(out, p->req, p->im->q.question_len, WIRE_RC_FORMERR, false);
    } else if (p->im->tsig_err) {
        n = xfr_out_error_reply(p->im, p->req, out, sizeof(out), WIRE_RC_NOTAUTH);
    } else if (!x->hooks.update) {
        n = xfr_out_error_reply(p->im, p->req, out, sizeof(out), WIRE_RC_NOTIMP);
    } else if (hand_on(x, p, r->len, &r->peer)) {
        return; /* answered by xfr_update_finish() */
    } else {
        n = xfr_out_error_reply(p->im, p->req, out, sizeof(out), WIRE_RC_SERVFAIL);
    }
    if (n)
        xfr_out_udp_reply(&p->r, out, n);
    slot_release(p);
}

size_t xfr_update_tcp(xfr_t *x, struct oconn *c, xfr_msg_t *im, const uint8_t *m, size_t mlen,
                      uint8_t *out, size_t cap)
{
    if (!x->hooks.update)
        return xfr_out_error_reply(im, m, out, cap, WIRE_RC_NOTIMP);
    struct upending *p = slot_take(x);
    if (!p)
        return xfr_out_error_reply(im, m, out, cap, WIRE_RC_SERVFAIL);
    p->tcp = true;
    p->conn = (size_t)(c - x->conns);
    p->conn_gen = c->gen;
    p->req = malloc(mlen ? mlen : 1);
    p->im = malloc(sizeof(*p->im));
    if (!p->req || !p->im) {
        slot_release(p);
        return xfr_out_error_reply(im, m, out, cap, WIRE_RC_SERVFAIL);
    }
    memcpy(p->req, m, mlen);
    *p->im = *im; /* its ctx and key are the connection's, which waits */
    if (!hand_on(x, p, mlen, &c->peer)) {
        slot_release(p);
        return xfr_out_error_reply(im, m, out, cap, WIRE_RC_SERVFAIL);
    }
    c->upd_wait = true;
    c->deadline = tern_monotonic_ms() + XFR_UPDATE_WAIT_MS;
    return 0;
}

void xfr_update_done(void *ctx, uint64_t token, unsigned rcode)
{
    xfr_t *x = ctx;
    pthread_mutex_lock(&x->qmu);
    /* a slot answers once: at most XFR_UPDATES_MAX answers are ever outstanding */
    if (x->nupd_done < XFR_UPDATES_MAX) {
        x->upd_done[x->nupd_done].token = token;
        x->upd_done[x->nupd_done].rcode = rcode;
        x->nupd_done++;
    }
    pthread_mutex_unlock(&x->qmu);
    ev_signal(x->out_ev);
}

/* The answer of p with rcode, sent where it goes. */
static void answer(xfr_t *x, struct upending *p, unsigned rcode)
{
    if (!p->tcp) {
        uint8_t out[512];
        size_t n = xfr_out_reply_head(out, p->req, p->im->q.question_len, rcode, false);
        n = xfr_out_finish_reply(p->im, out, n, sizeof(out));
        xfr_out_udp_reply(&p->r, out, n);
        return;
    }
    struct oconn *c = &x->conns[p->conn];
    if (c->fd < 0 || c->gen != p->conn_gen || !c->upd_wait)
        return; /* closed meanwhile */
    uint8_t *out = c->wbuf + 2;
    size_t n = xfr_out_reply_head(out, p->req, p->im->q.question_len, rcode, false);
    n = xfr_out_finish_reply(p->im, out, n, XFR_OUT_MSG);
    xfr_out_resume(x, c, n);
}

void xfr_update_finish(xfr_t *x)
{
    pthread_mutex_lock(&x->qmu);
    size_t n = x->nupd_done;
    uint64_t tok[XFR_UPDATES_MAX];
    unsigned rc[XFR_UPDATES_MAX];
    for (size_t i = 0; i < n; i++) {
        tok[i] = x->upd_done[i].token;
        rc[i] = x->upd_done[i].rcode;
    }
    x->nupd_done = 0;
    pthread_mutex_unlock(&x->qmu);
    for (size_t i = 0; i < n; i++) {
        size_t idx = (size_t)(tok[i] & 0xFFFFFFFFu);
        if (idx == 0 || idx > XFR_UPDATES_MAX)
            continue;
        struct upending *p = &x->upd[idx - 1];
        if (!p->used || p->gen != (uint32_t)(tok[i] >> 32))
            continue;
        answer(x, p, rc[i]);
        slot_release(p);
    }
}

void xfr_update_release_all(xfr_t *x)
{
    for (size_t i = 0; i < XFR_UPDATES_MAX; i++)
        if (x->upd[i].used)
            slot_release(&x->upd[i]);
}
