/*
 * api_int.h — private to src/api: the service's state, and what the HTTP side (api.c) hands the
 * endpoints (api_handle.c) and gets back. api.c owns libmicrohttpd, the connections and
 * authentication; api_handle.c routes an authenticated request and fills a response, knowing
 * nothing of libmicrohttpd.
 */
#ifndef TERN_API_API_INT_H
#define TERN_API_API_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/api/api.h"
#include "tern/common/buf.h"

/* A config in force, shared by the requests that started under it (refs under api.cmu): a
 * reload's keys, zones and redis: apply to the requests after it; a request keeps the config it
 * began with to its end. */
typedef struct api_conf {
    unsigned refs;
    config_t c;
} api_conf_t;

struct api {
    pthread_mutex_t cmu;
    api_conf_t *conf; /* the config in force (listen and cert: the startup one's) */
    loader_t *loader;
    update_t *upd;
    xfr_t *xfr;
    struct MHD_Daemon *daemon;
    atomic_bool stopping; /* api_stop(): a request waiting for a publish gives up */
    uint16_t port;
    char *cert_pem, *key_pem; /* read by api_new() */
};

/* An authenticated request. */
typedef struct api_req {
    const config_t *cfg; /* the config the request began under (keys, zones, redis) */
    const config_api_key_t *key;
    const char *method; /* "GET", "PATCH", ... */
    const char *path;   /* the URL's path, decoded by libmicrohttpd */
    const char *peer;   /* the client's address, for the audit and the log */
    const char *body;   /* the request body (NUL-terminated), len bytes */
    size_t len;
    bool accept_json; /* Accept names application/json (export answers JSON then, as pdns) */
    /* query arguments (pdns fillZone(), apiServerZones()); NULL: absent */
    const char *arg_rrsets, *arg_rrset_name, *arg_rrset_type, *arg_zone;
} api_req_t;

/* The response: status, body (JSON unless ctype says otherwise), and an Allow for 405. */
typedef struct api_resp {
    unsigned status;
    tern_buf_t body;
    const char *ctype; /* NULL: application/json (nothing for 204) */
    const char *allow;
} api_resp_t;

/** Route q and fill r (its body initialised by the caller). Any connection thread. */
void api_handle(api_t *a, const api_req_t *q, api_resp_t *r);

/** r: status with PowerDNS' error shape {"error": text} (pdns/webserver.cc setErrorResult()). */
void api_error(api_resp_t *r, unsigned status, const char *fmt, ...) TERN_PRINTF(3, 4);

/** Whether to log another refusal now: at most API_LOG_PER_S a second, the rest counted and
 * said with the next one logged (a client hammering a bad key cannot flood the log). */
bool api_log_ok(uint64_t *suppressed);

/* api_handle.c, for api_zones.c */

/** The version of zone key (canonical) served now, pinned (zone_free() it); NULL: none. */
zone_t *api_pin(api_t *a, const char *key);

/** Answer the zone object of key with its rrsets (GET .../zones/{zone}) with status instead of
 * 200; 404 when key is not served. */
void api_zone_get(api_t *a, const api_req_t *q, const char *key, unsigned status, api_resp_t *r);

/* api_zones.c: zones in Redis (api.h) */

/** POST .../zones: create the body's zone in Redis, answered 201 with the zone once served. */
void api_zones_create(api_t *a, const api_req_t *q, api_resp_t *r);

/** DELETE .../zones/{zone} of zone key: 204 once a Redis zone is deleted and no longer
 * served; 422 for a zone ternd.yaml configures; 404 for one neither serves nor Redis holds. */
void api_zones_delete(api_t *a, const api_req_t *q, const char *key, api_resp_t *r);

/** GET, PUT or DELETE .../zones/{zone}/redins/{label}: one label's redins JSON in Redis. */
void api_zones_redins(api_t *a, const api_req_t *q, const char *key, const char *label,
                      api_resp_t *r);

#endif
