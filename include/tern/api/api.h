/*
 * api.h — the HTTP API compatible with the PowerDNS Authoritative server's zone subset
 * (pdns/ws-auth.cc, pdns/ws-api.cc, docs/http-api/ pages), so its clients (octoDNS'
 * PowerDNS provider, ACME hooks, scripts) work unchanged against tern:
 *   GET   /api, /api/v1, /api/v1/servers, /api/v1/servers/localhost
 *   GET   /api/v1/servers/localhost/zones                the zones the key may see
 *   GET   /api/v1/servers/localhost/zones/{zone}         with its rrsets
 *   PATCH /api/v1/servers/localhost/zones/{zone}         rrsets REPLACE/DELETE/EXTEND/PRUNE
 *   PUT   /api/v1/servers/localhost/zones/{zone}/notify  NOTIFY its secondaries again
 *   GET   /api/v1/servers/localhost/zones/{zone}/export  the zone as text
 *   POST  /api/v1/servers/localhost/zones                a zone created in Redis (redins' schema)
 *   DELETE /api/v1/servers/localhost/zones/{zone}        a Redis zone deleted
 *   GET|PUT|DELETE .../zones/{zone}/redins/{label}       tern's own: a label's redins JSON
 * Zones ternd.yaml configures are its own (DELETE: 422); POST, DELETE and the redins endpoint
 * are api_zones.c's and need redis:. Not here: metadata, cryptokeys, TSIG keys, search,
 * statistics (404).
 *
 * A PATCH is one RFC 2136 UPDATE (api_patch.h) applied by the update service
 * (update_apply_msg()): atomic, journaled, published before the 204, audited with "api key NAME
 * from ADDR". Only master-file zones change; Redis and redins JSON zones are listed and read
 * (their steered RRsets with every record) but refused (422).
 *
 * Every request under /api presents X-API-Key, one of the config's keys (tern/conf/config_api.h);
 * a key limited to zones sees only those (another is 404, as an unknown zone), a read_only key
 * may only GET (403). Errors are PowerDNS' {"error": "..."}.
 *
 * Lifecycle: api_new() (after the loader, the update service and the transfer service exist;
 * nothing runs) → api_start() once the first view is published (binds, starts serving) →
 * api_free() (stops: before the loader and the update service, which a PATCH waits for). The
 * listener, certificate and keys are the startup config's: restart-only.
 *
 * Threads: libmicrohttpd's listening thread and a thread per connection (at most
 * API_MAX_CONNECTIONS): a PATCH blocks its connection's thread until the change is served, and
 * only that connection. A thread registers with RCU for the time of a request that pins a zone.
 * libmicrohttpd is dlopen()ed (as the metrics endpoint does): ternd without an API pays nothing
 * for it and GnuTLS.
 */
#ifndef TERN_API_API_H
#define TERN_API_API_H

#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/conf/config.h"
#include "tern/load/loader.h"
#include "tern/update/update.h"
#include "tern/xfr/xfr.h"

/* Clients of an API are a few tools (octoDNS, an ACME hook, an operator's script); 16 leave
 * room for bursts and bound the threads a misbehaving client can hold. */
#define API_MAX_CONNECTIONS 16u
/* Half of them from one address: a stuck script cannot take them all. */
#define API_PER_ADDR 8u
/* A connection idle this long (no byte either way) is closed: a client between two requests,
 * or one that stopped sending mid-request. Longer than a PATCH may take
 * (UPDATE_PUBLISH_WAIT_MS), so a slow publish is not cut. */
#define API_IDLE_TIMEOUT_S 40u

typedef struct api api_t;

/**
 * An API for cfg->api (the startup config: it must outlive the API, as the loader's does),
 * reading zones through loader, changing them through upd, sending NOTIFY through x. Reads the
 * certificate and key (cfg->api.cert, cert_key) now. NULL after logging why.
 */
api_t *api_new(const config_t *cfg, loader_t *loader, update_t *upd, xfr_t *x) TERN_WUR;

/** Bind cfg->api.listen and serve. 0, or a negative code after logging why (a bad address, the
 * address in use, no libmicrohttpd, no TLS in it). */
int api_start(api_t *a) TERN_WUR;

/** The port bound (the ephemeral one when 0 was configured); 0 before api_start(). */
uint16_t api_port(const api_t *a);

/** Stop serving (every connection closed, a PATCH in progress answered first) and free. NULL is
 * a no-op. */
void api_free(api_t *a);

/** ternd --check-config: whether the API's certificate and key (when configured) can be read as
 * a start would read them; 0, or TERN_EINVAL after logging which. */
int api_check(const config_t *cfg) TERN_WUR;

/** Stop serving: every connection's thread joined (a PATCH in progress answered first).
 * Idempotent; the api stays valid for api_configure() until api_free(). */
void api_stop(api_t *a);

/** The loader's config hook (loader_set_config_hook(); ctx: the api_t): a reload's keys, zones
 * and redis: apply to the requests that begin after it; listen, cert and cert_key only at the
 * next restart (logged when they changed). */
void api_configure(void *ctx, const config_t *cfg);

#endif
