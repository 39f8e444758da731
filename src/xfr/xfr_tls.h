/*
 * xfr_tls.h — the TLS client of zone transfers in (XoT, RFC 9103): private to src/xfr.
 *
 * Owns one OpenSSL client context per configured primary with `tls` (xfr_tls_t): TLS 1.3 only
 * (RFC 9103 §7.2), ALPN "dot" (§7.1), the CA store, our certificate for mutual TLS, the identities
 * to check (name, pins) and the last session ticket, so each pull from that primary resumes the
 * previous session. A connection (xfr_tls_conn_t) is stepped without blocking: each call either
 * makes progress or says which readiness (POLLIN or POLLOUT) it waits for, and the caller waits
 * for it with its own deadline and stop flag (xfr_secondary.c's wait_fd()); nothing here waits.
 *
 * Authentication (RFC 8310 §6, RFC 9103 §9.3): in strict mode every identity configured must be
 * proved — the chain verifies against the CA with name in its SAN, and the SPKI's SHA-256 is one
 * of the pins — or the handshake fails with the reason (name mismatch, pin mismatch, untrusted
 * CA) and not a byte of DNS is sent. In opportunistic mode a failed check is only reported
 * (xfr_tls_conn_describe()); the transfer is encrypted all the same. Neither mode ever falls
 * back to clear text: RFC 9103 §9.3.1 lets opportunistic TLS fall back to it (MAY), and we do not.
 *
 * Lifecycle: xfr_tls_new() at configure time (xfr_configure(), the loader thread), shared by
 * reference (retain/release: a puller holds one across a pull while a reload replaces the
 * zone's settings). Threading: a context is used by any puller at once (OpenSSL's SSL_CTX is
 * thread-safe for SSL_new()); the stored session is under the context's mutex. A connection
 * belongs to the one puller that made it.
 */
#ifndef TERN_XFR_XFR_TLS_H
#define TERN_XFR_XFR_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tern/common/compiler.h"
#include "tern/conf/config.h"

typedef struct xfr_tls xfr_tls_t;
typedef struct xfr_tls_conn xfr_tls_conn_t;

/** A client context for primary peer ("ADDR@PORT") with settings cfg (copied: cfg may go). NULL
 * with err set when a file cannot be used (the config check read them once already) or out of
 * memory. The caller holds the one reference. */
xfr_tls_t *xfr_tls_new(const config_xfr_tls_t *cfg, const char *peer, char *err,
                       size_t errlen) TERN_WUR;

/** Whether t was made for peer with the same settings as cfg: then it serves there too (one
 * context, one CA store and one session per primary, however many zones name it). */
bool xfr_tls_matches(const xfr_tls_t *t, const char *peer, const config_xfr_tls_t *cfg);

/** Another reference to t (t may be NULL); returns t. */
xfr_tls_t *xfr_tls_retain(xfr_tls_t *t);

/** Drop a reference (NULL: nothing); the last one frees the context and its session. */
void xfr_tls_release(xfr_tls_t *t);

/** A connection over fd (connected TCP, non-blocking; not owned: the caller closes it after
 * xfr_tls_conn_free()), resuming t's last session if any. NULL when out of memory. */
xfr_tls_conn_t *xfr_tls_conn_new(xfr_tls_t *t, int fd) TERN_WUR;

/**
 * One step of c's handshake and, once it is done, the authentication its mode asks for.
 * 0: done (strict: authenticated); POLLIN or POLLOUT: call again once fd is ready so;
 * TERN_EACCES: strict authentication failed (err says why: "name mismatch", "pin mismatch",
 * "untrusted CA", with details); TERN_EPROTO: the handshake failed (err: OpenSSL's reason, e.g.
 * a primary without TLS 1.3); TERN_ECONNRESET: the primary closed.
 */
int xfr_tls_handshake(xfr_tls_conn_t *c, char *err, size_t errlen) TERN_WUR;

/**
 * Write (wr) or read up to len bytes over c. > 0: bytes moved; 0: nothing yet, wait for *want
 * (POLLIN or POLLOUT) and call again with the same buffer; TERN_ECONNRESET: closed by the
 * primary; TERN_EPROTO: a TLS error.
 */
ssize_t xfr_tls_io(xfr_tls_conn_t *c, void *buf, size_t len, bool wr, short *want) TERN_WUR;

/** The reason of the last TLS error xfr_tls_io() returned TERN_EPROTO for ("TLS: ..." with
 * OpenSSL's words, e.g. the primary's alert), "" if none. */
const char *xfr_tls_conn_error(const xfr_tls_conn_t *c);

/** After a completed handshake: "TLSv1.3, resumed" or "TLSv1.3" and, in opportunistic mode,
 * "; unauthenticated: <why>" when a configured check failed, into buf; returns buf. */
const char *xfr_tls_conn_describe(const xfr_tls_conn_t *c, char *buf, size_t len);

/** Whether c's handshake resumed the context's previous session. */
bool xfr_tls_conn_resumed(const xfr_tls_conn_t *c);

/** A close_notify sent if it goes out at once (never waits), and c freed (NULL: nothing). */
void xfr_tls_conn_free(xfr_tls_conn_t *c);

#endif
