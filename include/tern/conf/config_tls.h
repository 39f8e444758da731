/*
 * config_tls.h — the "tls:" block (src/conf/config_tls.c): DNS over TLS (RFC 7858) and zone
 * transfers over it (RFC 9103) as a primary. Its settings are handed to the workers as
 * server_tls_settings_t (tern/net/server_settings.h, config_server_settings()).
 *
 * Owner: the config (config_free() frees it). Read-only once loaded. Restart-only (the row says
 * so): the listeners and limits are bound at startup; SIGHUP re-reads the files at the paths
 * given at startup (server_tls_reload()).
 */
#ifndef TERN_CONF_CONFIG_TLS_H
#define TERN_CONF_CONFIG_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/net/server_settings.h"

/* The port of a DoT address given without one (RFC 7858 §3.1). */
#define CONFIG_TLS_PORT 853

typedef struct config_tls {
    char *certificate; /* PEM chain, leaf first (resolved path); NULL: no DoT */
    char *key;         /* its PEM private key */
    char *client_ca;   /* CAs for client certificates (mutual TLS for transfers); NULL: none */
    config_listen_t listen[CONFIG_MAX_LISTEN]; /* tcp only */
    size_t nlisten;
    unsigned max_connections;           /* per worker */
    unsigned handshake_timeout_ms;      /* accept to finished handshake */
    unsigned max_handshakes;            /* in progress per worker */
    unsigned max_handshakes_per_client; /* in progress per worker and client prefix */
    bool session_tickets;               /* resumption */
} config_tls_t;

#endif
