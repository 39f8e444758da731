/*
 * api.c — the API's HTTP side: libmicrohttpd (dlopen()ed), its listener and connection threads,
 * the request body, authentication (X-API-Key), and the responses' headers. Routing and the
 * endpoints are api_handle.c's.
 *
 * Why a thread per connection, unlike the metrics endpoint's single thread: a PATCH waits for
 * its change to be journaled and published (up to UPDATE_PUBLISH_WAIT_MS); on one thread that
 * would hold every other client, reads included. The connection pool is small
 * (API_MAX_CONNECTIONS, API_PER_ADDR from one address, API_IDLE_TIMEOUT_S idle), and every
 * request is authenticated before its body is read.
 *
 * Shapes from pdns/webserver.cc: apiWrapper() (401 with WWW-Authenticate: X-API-Key
 * realm="PowerDNS", the security headers, no Content-Type on 204) and setErrorResult() ({"error":
 * text}); 413 for a body over max_body_bytes as pdns' webserver-max-bodysize does.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api_int.h"
#include "tern/api/api_auth.h"
#include "tern/common/dl.h"
#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/common/log.h"
#include "tern/limit/limit.h"

/* libmicrohttpd is loaded when the API is configured, not linked: it drags GnuTLS and its
 * dependencies into every ternd otherwise (metrics.c says the same for the metrics endpoint). */
#define API_MHD_FUNCS(X)                                                                           \
    X(MHD_start_daemon)                                                                            \
    X(MHD_stop_daemon)                                                                             \
    X(MHD_get_daemon_info)                                                                         \
    X(MHD_get_connection_info)                                                                     \
    X(MHD_lookup_connection_value)                                                                 \
    X(MHD_create_response_from_buffer)                                                             \
    X(MHD_add_response_header)                                                                     \
    X(MHD_queue_response)                                                                          \
    X(MHD_destroy_response)                                                                        \
    X(MHD_is_feature_supported)

static struct {
#define API_MHD_FIELD(f) __typeof__(&f) f;
    API_MHD_FUNCS(API_MHD_FIELD)
#undef API_MHD_FIELD
} lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static char lib_error[256];

static void lib_load(void)
{
    static const char *const names[] = {"libmicrohttpd.so.12", "libmicrohttpd.so"};
#define API_MHD_NAME(f) #f,
    static const char *const syms[] = {API_MHD_FUNCS(API_MHD_NAME)};
#undef API_MHD_NAME
    void *p[sizeof(syms) / sizeof(syms[0])];
    if (tern_dl_load(names, 2, syms, p, sizeof(syms) / sizeof(syms[0]), lib_error,
                     sizeof(lib_error)) < 0)
        return;
    size_t i = 0;
#define API_MHD_SET(f) memcpy(&lib.f, &p[i++], sizeof(void *));
    API_MHD_FUNCS(API_MHD_SET)
#undef API_MHD_SET
}

/* A certificate chain or key file larger than this is not one (a chain of four 4096-bit
 * certificates is ~8 KiB). */
#define API_PEM_MAX (1u << 20)
/* Refusals logged a second at most (api_log_ok()). */
#define API_LOG_PER_S 10

/* ---- helpers shared with api_handle.c --------------------------------------------------- */

void api_error(api_resp_t *r, unsigned status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    r->status = status;
    r->ctype = NULL;
    tern_buf_free(&r->body);
    json_t *o = json_pack("{s:s}", "error", msg);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (s)
        tern_buf_append(&r->body, s, strlen(s));
    else
        r->body.failed = true;
    free(s);
    json_decref(o);
}

bool api_log_ok(uint64_t *suppressed)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static time_t second;
    static unsigned count;
    static uint64_t dropped;
    time_t now = time(NULL);
    bool ok;
    pthread_mutex_lock(&mu);
    if (now != second) {
        second = now;
        count = 0;
    }
    ok = count < API_LOG_PER_S;
    if (ok) {
        count++;
        *suppressed = dropped;
        dropped = 0;
    } else {
        dropped++;
    }
    pthread_mutex_unlock(&mu);
    return ok;
}

/* ---- requests ----------------------------------------------------------------------------- */

/* One request's state across libmicrohttpd's calls. */
typedef struct rctx {
    const config_api_key_t *key;
    tern_buf_t body;
    bool too_big;
    api_conf_t *conf; /* the config the request began under, one reference */
} rctx_t;

/* The config in force, one more reference. */
static api_conf_t *conf_get(api_t *a)
{
    pthread_mutex_lock(&a->cmu);
    api_conf_t *cf = a->conf;
    cf->refs++;
    pthread_mutex_unlock(&a->cmu);
    return cf;
}

static void conf_put(api_t *a, api_conf_t *cf)
{
    if (!cf)
        return;
    pthread_mutex_lock(&a->cmu);
    bool last = --cf->refs == 0;
    pthread_mutex_unlock(&a->cmu);
    if (last) {
        config_free(&cf->c);
        free(cf);
    }
}

/* A copy of cfg with one reference; NULL when out of memory. */
static api_conf_t *conf_new(const config_t *cfg)
{
    api_conf_t *cf = calloc(1, sizeof(*cf));
    if (!cf)
        return NULL;
    config_init(&cf->c);
    if (config_copy(&cf->c, cfg) < 0) {
        config_free(&cf->c);
        free(cf);
        return NULL;
    }
    cf->refs = 1;
    return cf;
}

static void peer_text(struct MHD_Connection *c, char *out, size_t len)
{
    const union MHD_ConnectionInfo *i =
        lib.MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    struct sockaddr_storage ss = {0};
    snprintf(out, len, "?");
    if (!i || !i->client_addr)
        return;
    memcpy(&ss, i->client_addr,
           i->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                 : sizeof(struct sockaddr_in));
    limit_addr_text(&ss, out, len);
    /* the address alone: the audit's who, and the update service's rate, are per key and
     * address, not per connection */
    char *at = strrchr(out, '@');
    if (at)
        *at = '\0';
}

static void refusal_log(struct MHD_Connection *c, const char *method, const char *url,
                        const char *key, unsigned status, const char *why)
{
    uint64_t dropped = 0;
    if (!api_log_ok(&dropped))
        return;
    char peer[64];
    peer_text(c, peer, sizeof(peer));
    char esc[256];
    tern_escape(esc, sizeof(esc), url, strlen(url));
    if (dropped)
        log_info("api: %llu refusals not logged", (unsigned long long)dropped);
    log_info("api: %s %s from %s%s%s: %u %s", method, esc, peer, key ? " with key " : "",
             key ? key : "", status, why);
}

/* Queue r on c with PowerDNS' headers; r's body is handed to libmicrohttpd. */
static enum MHD_Result send_resp(struct MHD_Connection *c, api_resp_t *r, bool www_auth)
{
    if (r->body.failed) {
        tern_buf_free(&r->body);
        api_error(r, 500, "out of memory");
        if (r->body.failed)
            return MHD_NO;
    }
    size_t len = r->status == 204 ? 0 : r->body.len;
    struct MHD_Response *resp =
        len ? lib.MHD_create_response_from_buffer(len, r->body.p, MHD_RESPMEM_MUST_FREE)
            : lib.MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        tern_buf_free(&r->body);
        return MHD_NO;
    }
    if (len)
        r->body.p = NULL; /* libmicrohttpd's now */
    else
        tern_buf_free(&r->body);
    /* pdns/webserver.cc apiWrapper()'s security headers */
    static const char *const hdr[][2] = {
        {"X-Content-Type-Options", "nosniff"},
        {"X-Frame-Options", "deny"},
        {"X-Permitted-Cross-Domain-Policies", "none"},
        {"X-XSS-Protection", "1; mode=block"},
        {"Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'"},
    };
    enum MHD_Result ok = MHD_YES;
    for (size_t i = 0; i < sizeof(hdr) / sizeof(hdr[0]) && ok == MHD_YES; i++)
        ok = lib.MHD_add_response_header(resp, hdr[i][0], hdr[i][1]);
    if (ok == MHD_YES && r->status != 204)
        ok = lib.MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                         r->ctype ? r->ctype : "application/json");
    if (ok == MHD_YES && r->allow)
        ok = lib.MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (ok == MHD_YES && www_auth)
        ok = lib.MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                         "X-API-Key realm=\"PowerDNS\"");
    if (ok == MHD_YES)
        ok = lib.MHD_queue_response(c, r->status, resp);
    lib.MHD_destroy_response(resp);
    return ok;
}

/* An answer before the body is read (404 outside /api, 401): libmicrohttpd then closes the
 * connection rather than read a body nobody wants. */
static enum MHD_Result send_early(struct MHD_Connection *c, unsigned status, const char *text,
                                  bool www_auth)
{
    api_resp_t r = {.status = status};
    tern_buf_init(&r.body, 0);
    api_error(&r, status, "%s", text);
    return send_resp(c, &r, www_auth);
}

static const char *arg(struct MHD_Connection *c, const char *name)
{
    return lib.MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
}

/* The request is whole: route it. */
static enum MHD_Result finish(api_t *a, struct MHD_Connection *c, rctx_t *x, const char *url,
                              const char *method)
{
    api_resp_t r = {.status = 200};
    tern_buf_init(&r.body, 0);
    char peer[64];
    peer_text(c, peer, sizeof(peer));
    if (x->too_big) {
        api_error(&r, 413,
                  "Request Entity Too Large: the body is over %u bytes (api: "
                  "max_body_bytes)",
                  x->conf->c.api.max_body_bytes);
    } else {
        const char *accept = lib.MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
        api_req_t q = {.cfg = &x->conf->c,
                       .key = x->key,
                       .method = method,
                       .path = url,
                       .peer = peer,
                       .body = x->body.p ? x->body.p : "",
                       .len = x->body.len,
                       .accept_json = accept && strstr(accept, "application/json"),
                       .arg_rrsets = arg(c, "rrsets"),
                       .arg_rrset_name = arg(c, "rrset_name"),
                       .arg_rrset_type = arg(c, "rrset_type"),
                       .arg_zone = arg(c, "zone")};
        api_handle(a, &q, &r);
    }
    if (r.status >= 400 && r.status != 404) {
        char why[300] = "";
        if (r.body.p)
            snprintf(why, sizeof(why), "%s", r.body.p);
        refusal_log(c, method, url, x->key->name, r.status, why);
    }
    return send_resp(c, &r, false);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    api_t *a = cls;
    rctx_t *x = *con_cls;
    (void)version;
    if (!x) {
        if (!(x = calloc(1, sizeof(*x))))
            return MHD_NO;
        *con_cls = x;
        tern_buf_init(&x->body, 0);
        if (strncmp(url, "/api", 4) != 0 || (url[4] && url[4] != '/'))
            return send_early(c, 404, "Not Found", false);
        const char *key = lib.MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-API-Key");
        x->conf = conf_get(a);
        const config_api_t *ac = &x->conf->c.api;
        if (!(x->key = api_auth_find(ac->keys, ac->nkeys, key))) {
            refusal_log(c, method, url, NULL, 401, key ? "a wrong X-API-Key" : "no X-API-Key");
            return send_early(c, 401, "Unauthorized", true);
        }
        const char *cl =
            lib.MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > ac->max_body_bytes)
            x->too_big = true;
        return MHD_YES;
    }
    if (*upload_size) {
        /* over the bound: the rest is read and dropped, then 413 (closing mid-body would make
         * the client see a reset instead of the answer) */
        if (!x->too_big && x->body.len + *upload_size > x->conf->c.api.max_body_bytes) {
            x->too_big = true;
            tern_buf_free(&x->body);
        }
        if (!x->too_big)
            tern_buf_append(&x->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (x->body.failed)
        return MHD_NO;
    return finish(a, c, x, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c, (void)toe;
    rctx_t *x = *con_cls;
    if (!x)
        return;
    conf_put(cls, x->conf);
    tern_buf_free(&x->body);
    free(x);
    *con_cls = NULL;
}

/* libmicrohttpd's messages: about single clients once serving (debug), else why it cannot. */
static atomic_bool serving;
static void mhd_log(void *cls, const char *fmt, va_list ap) TERN_PRINTF(2, 0);
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0)
        return;
    size_t len = strnlen(msg, sizeof(msg));
    if (len > 0 && msg[len - 1] == '\n')
        msg[len - 1] = '\0';
    log_msg(atomic_load(&serving) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "api: %s", msg);
}

/* ---- the service -------------------------------------------------------------------------- */

static char *read_pem(const char *path)
{
    char err[512];
    struct stat st;
    int fd = tern_open_regular(path, API_PEM_MAX, &st, err, sizeof(err));
    if (fd < 0) {
        log_err("api: %s", err);
        return NULL;
    }
    /* stdio: a short read is retried by fread() */
    FILE *f = fdopen(fd, "r");
    char *p = f ? malloc((size_t)st.st_size + 1) : NULL;
    size_t len = p ? fread(p, 1, (size_t)st.st_size, f) : 0;
    if (f)
        fclose(f);
    else
        close(fd);
    if (!p || len != (size_t)st.st_size) {
        log_err("api: %s: cannot read it", path);
        free(p);
        return NULL;
    }
    p[len] = '\0';
    return p;
}

static void free_pem(char *p)
{
    if (p)
        explicit_bzero(p, strlen(p));
    free(p);
}

int api_check(const config_t *cfg)
{
    if (!cfg->api.listen || !cfg->api.cert)
        return 0;
    char *cert = read_pem(cfg->api.cert), *key = cert ? read_pem(cfg->api.cert_key) : NULL;
    int rc = cert && key ? 0 : TERN_EINVAL;
    free_pem(cert);
    free_pem(key);
    return rc;
}

api_t *api_new(const config_t *cfg, loader_t *loader, update_t *upd, xfr_t *x)
{
    if (sodium_init() < 0) {
        log_err("api: libsodium cannot start");
        return NULL;
    }
    api_t *a = calloc(1, sizeof(*a));
    if (!a) {
        log_err("api: out of memory");
        return NULL;
    }
    *a = (api_t){.loader = loader, .upd = upd, .xfr = x};
    pthread_mutex_init(&a->cmu, NULL);
    if (!(a->conf = conf_new(cfg))) {
        log_err("api: out of memory");
        free(a);
        return NULL;
    }
    if (cfg->api.cert &&
        (!(a->cert_pem = read_pem(cfg->api.cert)) || !(a->key_pem = read_pem(cfg->api.cert_key)))) {
        api_free(a);
        return NULL;
    }
    return a;
}

int api_start(api_t *a)
{
    const config_api_t *c = &a->conf->c.api;
    config_listen_t addr;
    if (config_parse_listen(&addr, c->listen) < 0) {
        log_err("api: bad address \"%s\"", c->listen);
        return TERN_EINVAL;
    }
    pthread_once(&lib_once, lib_load);
    if (lib_error[0]) {
        log_err("api: %s (package libmicrohttpd12)", lib_error);
        return TERN_ENOENT;
    }
    unsigned flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG;
    if (addr.addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6; /* exactly this address, no IPv4 mapped */
    if (a->cert_pem) {
        if (lib.MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            log_err("api: this libmicrohttpd has no TLS: cert and cert_key cannot be served");
            return TERN_ENOTSUP;
        }
        flags |= MHD_USE_TLS;
    }
    struct MHD_OptionItem opts[] = {
        /* first, or libmicrohttpd writes to stderr about the options before it */
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL},
        {MHD_OPTION_SOCK_ADDR, 0, &addr.addr},
        {MHD_OPTION_CONNECTION_LIMIT, API_MAX_CONNECTIONS, NULL},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, API_PER_ADDR, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, API_IDLE_TIMEOUT_S, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, a},
        {a->cert_pem ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, a->key_pem},
        {a->cert_pem ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, a->cert_pem},
        {MHD_OPTION_END, 0, NULL},
    };
    a->daemon = lib.MHD_start_daemon(flags, 0, NULL, NULL, on_request, a, MHD_OPTION_ARRAY, opts,
                                     MHD_OPTION_END);
    if (!a->daemon) {
        log_err("api: cannot serve on %s", c->listen);
        return TERN_EIO;
    }
    atomic_store(&serving, true);
    const union MHD_DaemonInfo *info =
        lib.MHD_get_daemon_info(a->daemon, MHD_DAEMON_INFO_BIND_PORT);
    a->port = info ? info->port : 0;
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&addr.addr;
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&addr.addr;
    bool loopback = addr.addr.ss_family == AF_INET ? (ntohl(v4->sin_addr.s_addr) >> 24) == 127
                                                   : IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
    if (!loopback && !a->cert_pem)
        log_warn("api: %s is not a loopback address and has no cert: the keys and every change "
                 "cross the network in clear",
                 c->listen);
    log_info("api: serving %s://%s (port %u), %zu keys", a->cert_pem ? "https" : "http", c->listen,
             a->port, c->nkeys);
    return 0;
}

uint16_t api_port(const api_t *a)
{
    return a->port;
}

void api_stop(api_t *a)
{
    /* joins every connection's thread: a PATCH in progress is answered first (the update
     * service and the loader stop after the API) */
    if (a)
        atomic_store(&a->stopping, true);
    if (a && a->daemon)
        lib.MHD_stop_daemon(a->daemon);
    if (a)
        a->daemon = NULL;
}

void api_free(api_t *a)
{
    if (!a)
        return;
    api_stop(a);
    conf_put(a, a->conf);
    pthread_mutex_destroy(&a->cmu);
    free_pem(a->cert_pem);
    free_pem(a->key_pem);
    free(a);
}

void api_configure(void *ctx, const config_t *cfg)
{
    api_t *a = ctx;
    api_conf_t *cf = conf_new(cfg);
    if (!cf) {
        log_err("api: out of memory: the previous keys and settings stay");
        return;
    }
    pthread_mutex_lock(&a->cmu);
    api_conf_t *old = a->conf;
    const config_api_t *o = &old->c.api, *n = &cf->c.api;
    bool restart = !n->listen || strcmp(o->listen ? o->listen : "", n->listen) != 0 ||
                   strcmp(o->cert ? o->cert : "", n->cert ? n->cert : "") != 0 ||
                   strcmp(o->cert_key ? o->cert_key : "", n->cert_key ? n->cert_key : "") != 0;
    if (restart) { /* the listener stays as started: keep its settings for the record */
        char *keep[3] = {o->listen, o->cert, o->cert_key};
        char *drop[3] = {n->listen, n->cert, n->cert_key};
        cf->c.api.listen = keep[0] ? strdup(keep[0]) : NULL;
        cf->c.api.cert = keep[1] ? strdup(keep[1]) : NULL;
        cf->c.api.cert_key = keep[2] ? strdup(keep[2]) : NULL;
        for (int i = 0; i < 3; i++)
            free(drop[i]);
    }
    a->conf = cf;
    pthread_mutex_unlock(&a->cmu);
    conf_put(a, old);
    if (restart)
        log_warn("api: listen, cert and cert_key apply at the next restart; the keys and the "
                 "rest apply now");
    log_info("api: %zu keys in force", cf->c.api.nkeys);
}
