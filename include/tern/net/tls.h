/*
 * tls.h — DNS over TLS (RFC 7858) for the workers: the server's credentials, and the non-blocking
 * steps of one connection (handshake, read, write, close) over OpenSSL.
 *
 * Owner: the server (server.c) makes one tls_server_t at bind, when "tls:" has listen
 * addresses, and frees it after the workers are joined. It holds one SSL_CTX, shared by every
 * worker: one set of session ticket keys, so a ticket issued by one worker resumes on any
 * other (the kernel spreads a client's connections over the workers' SO_REUSEPORT listeners).
 *
 * Lifecycle: tls_server_new() reads the certificate, key and client CAs (as root, before the
 * privileges are dropped); tls_server_reload() (SIGHUP, the signal thread) reads them again
 * into a new SSL_CTX that keeps the ticket keys, publishes it with RCU and releases the old one
 * after a grace period. A file that cannot be used is refused with its path and OpenSSL's
 * reason; the old credentials stay. Connections made before a reload keep their SSL_CTX
 * (OpenSSL counts the references) until they close.
 *
 * Threading: tls_conn_*() run on the worker that owns the connection (or on the transfer
 * thread once a connection is handed over: one thread at a time). The worker reads the
 * published SSL_CTX with tern_rcu_deref() inside an event, so it is a QSBR reader like for the
 * view. Each call clears the thread's OpenSSL error queue first, so SSL_get_error() speaks of
 * this call only.
 *
 * Memory: an SSL object (and OpenSSL's record buffers, about 40 KiB) is allocated per
 * connection at accept and freed at close; nothing is allocated per query. UDP is untouched.
 */
#ifndef TERN_NET_TLS_H
#define TERN_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tern/common/compiler.h"
#include "tern/net/server_settings.h"

typedef struct tls_server tls_server_t;
typedef struct ssl_st SSL; /* OpenSSL's; callers need not include <openssl/ssl.h> */

/* What a non-blocking step needs next (tls_conn_handshake(), tls_conn_read(), tls_conn_write()
 * return it, or a byte count for the last two). */
enum {
    TLS_IO_WANT_READ = -1,  /* wait for the socket to be readable */
    TLS_IO_WANT_WRITE = -2, /* wait for it to be writable */
    TLS_IO_EOF = -3,        /* the peer closed (close_notify, or its TCP FIN) */
    TLS_IO_ERROR = -4,      /* a protocol or socket error: close */
};

/** Credentials and settings from set (copied). NULL with the reason, naming the file, in err. */
tls_server_t *tls_server_new(const server_tls_settings_t *set, char *err, size_t errlen) TERN_WUR;

/** Read the certificate, key and client CAs again (their paths from tls_server_new()) and
 * publish them for new connections; the session ticket keys stay. 0, or negative with the
 * reason in err (the old credentials stay). Any thread but a worker; not two at once. */
int tls_server_reload(tls_server_t *t, char *err, size_t errlen) TERN_WUR;

/** Free the server's SSL_CTX (connections still open keep theirs alive). NULL is a no-op. */
void tls_server_free(tls_server_t *t);

/** A server-side SSL for the accepted non-blocking socket fd, with the published credentials;
 * NULL when out of memory. The worker, inside an event (an RCU read). */
SSL *tls_conn_new(tls_server_t *t, int fd) TERN_WUR;

/** One step of the handshake: 0 when it is done, else TLS_IO_WANT_READ/WRITE, or TLS_IO_EOF /
 * TLS_IO_ERROR (close). */
int tls_conn_handshake(SSL *s) TERN_WUR;

/** Up to len bytes of application data into buf: the count (> 0), or a TLS_IO_* code. */
ssize_t tls_conn_read(SSL *s, void *buf, size_t len) TERN_WUR;

/** Write up to len bytes (partial writes on; a retry after TLS_IO_WANT_* passes the same bytes
 * again, possibly moved, possibly with more after them): the count taken, or a TLS_IO_* code. */
ssize_t tls_conn_write(SSL *s, const void *buf, size_t len) TERN_WUR;

/** Bytes OpenSSL has decrypted and not yet handed out: more to read without the socket being
 * readable. */
size_t tls_conn_pending(const SSL *s);

/** Whether the session was resumed (a ticket), after the handshake. */
bool tls_conn_resumed(const SSL *s);

/** Whether the client and we agreed on ALPN "dot" (RFC 9103 §7.1 asks it of zone transfers). */
bool tls_conn_alpn_dot(const SSL *s);

/** Whether the client presented a certificate that verified against client_ca (mutual TLS). */
bool tls_conn_client_verified(const SSL *s);

/** Block SIGPIPE on the calling thread: OpenSSL writes with write(2), which raises it on a reset
 * peer (send(MSG_NOSIGNAL) avoids it for plain TCP); blocked, the write fails with EPIPE. Every
 * thread that writes through tls_conn_*() calls it once. */
void tls_thread_init(void);

/** Close: one close_notify attempt when the handshake finished (never waiting), then free. The
 * socket is the caller's to close. NULL is a no-op. */
void tls_conn_free(SSL *s);

#endif
