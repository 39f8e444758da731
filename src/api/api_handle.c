/*
 * api_handle.c — the API's endpoints (api.h lists them): routing an authenticated request, the
 * server and zone objects, PATCH through the update service, NOTIFY, export.
 *
 * Shapes, each from PowerDNS: the server object from pdns/ws-api.cc getServerDetail(); /api and
 * /api/v1 from apiDiscovery(), apiDiscoveryV1(); a zone from pdns/ws-auth.cc getZoneInfo() and
 * fillZone() (and the Zone definition in docs/http-api/swagger/authoritative-api-swagger.yaml);
 * the zone id from ws-api.cc apiZoneNameToId() / apiZoneIdToName(); 204 for a PATCH,
 * {"result": "Notification queued"} for a NOTIFY (apiServerZoneNotify()); text/plain;
 * charset=us-ascii or {"zone": text} for an export (apiServerZoneExport()); 404 {"error": "Not
 * Found"} for an unknown zone or route, 405 {"error": "Method Not Allowed"}
 * (pdns/webserver.cc), 422 {"error": why} for anything the client sent wrong (ApiException).
 *
 * tern's own choices, where PowerDNS has no counterpart: a key limited to zones gets 404 for
 * another zone (as if it did not exist: a key cannot probe which zones are served); a read_only
 * key gets 403 for anything but GET (authenticated, not permitted: 401 would tell the client
 * its key is wrong). POST zones, DELETE zone and the redins label endpoint are api_zones.c's
 * (zones in Redis).
 */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api_int.h"
#include "tern/api/api_auth.h"
#include "tern/api/api_patch.h"
#include "tern/api/api_zone.h"
#include "tern/common/err.h"
#include "tern/common/rcu.h"
#include "tern/wire/dname.h"
#include "tern/wire/parse.h"

#define SERVER_URL "/api/v1/servers/localhost"
#define ZONES_URL  SERVER_URL "/zones"

/* ---- zones -------------------------------------------------------------------------------- */

/* A served zone as the loader lists it. */
typedef struct zinfo {
    char key[DNAME_KEY_MAX]; /* canonical: lowercased, no final dot, "." the root */
    uint32_t serial;
    bool dnssec;
} zinfo_t;

typedef struct zlist {
    zinfo_t *v;
    size_t n, cap;
    bool oom;
} zlist_t;

static void collect(void *ctx, const loader_zone_info_t *z)
{
    zlist_t *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        zinfo_t *v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    zinfo_t *i = &l->v[l->n++];
    snprintf(i->key, sizeof(i->key), "%s", z->origin);
    i->serial = z->serial;
    i->dnssec = z->dnssec != NULL;
}

/* pdns/ws-api.cc apiNameToId(): the name with a final dot, bytes outside [A-Za-z0-9.-_] as
 * =XX; the root is "=2E". */
static void zone_id(const char *key, char *out, size_t len)
{
    size_t o = 0;
    if (strcmp(key, ".") == 0) {
        snprintf(out, len, "=2E");
        return;
    }
    for (const char *p = key; *p && o + 4 < len; p++) {
        unsigned char c = (unsigned char)*p;
        if (isalnum(c) || c == '.' || c == '-' || c == '_')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, len - o, "=%02X", c);
    }
    if (o + 1 < len)
        out[o++] = '.';
    out[o] = '\0';
}

/* pdns/ws-api.cc apiZoneIdToName(): =XX decoded; then our canonical key. false: not a name. */
static bool id_to_key(const char *id, size_t idlen, char *key, size_t keylen)
{
    char name[DNAME_KEY_MAX];
    size_t o = 0;
    for (size_t i = 0; i < idlen; i++) {
        if (o + 1 >= sizeof(name))
            return false;
        if (id[i] == '=' && i + 2 < idlen && isxdigit((unsigned char)id[i + 1]) &&
            isxdigit((unsigned char)id[i + 2])) {
            char hex[3] = {id[i + 1], id[i + 2], 0};
            name[o++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else if (id[i] == '=') {
            return false;
        } else {
            name[o++] = id[i];
        }
    }
    name[o] = '\0';
    const char *why;
    return o && dname_key(name, key, keylen, &why) >= 0;
}

/* The served zone of key that k may see, into *out; false: none (404). */
static bool find_zone(api_t *a, const config_api_key_t *k, const char *key, zinfo_t *out, bool *oom)
{
    zlist_t l = {0};
    loader_zones(a->loader, collect, &l);
    bool found = false;
    for (size_t i = 0; i < l.n && !found; i++)
        if (strcmp(l.v[i].key, key) == 0 && api_auth_zone_ok(k, key)) {
            *out = l.v[i];
            found = true;
        }
    *oom = l.oom;
    free(l.v);
    return found;
}

/* Pin the version of zone key served now (a reference: no RCU section held after). */
static zone_t *pin(api_t *a, const char *key)
{
    uint8_t wire[DNAME_MAXLEN];
    const char *why;
    if (dname_from_str(key, strlen(key), false, wire, &why) < 0)
        return NULL;
    tern_rcu_register();
    tern_rcu_offline();
    zone_t *z = answer_pin_zone(loader_published(a->loader), wire);
    tern_rcu_unregister();
    return z;
}

zone_t *api_pin(api_t *a, const char *key)
{
    return pin(a, key);
}

/* A primary as pdns prints one (ComboAddress::toStringWithPortExcept(53)). */
static void master_text(const config_xfr_peer_t *p, char *out, size_t len)
{
    char host[80];
    snprintf(host, sizeof(host), "%s", p->text);
    char *at = strrchr(host, '@');
    const char *port = at ? at + 1 : "53";
    if (at)
        *at = '\0';
    if (strcmp(port, "53") == 0)
        snprintf(out, len, "%s", host);
    else if (strchr(host, ':'))
        snprintf(out, len, "[%s]:%s", host, port);
    else
        snprintf(out, len, "%s:%s", host, port);
}

/* pdns/ws-auth.cc getZoneInfo(): the zone object without its RRsets. kind as pdns maps a
 * zone's role: transferred in "Slave", sending NOTIFY "Master", else "Native". */
static json_t *zone_object(api_t *a, const api_req_t *q, const zinfo_t *z)
{
    char id[DNAME_KEY_MAX * 3 + 8], url[sizeof(id) + 64], name[DNAME_KEY_MAX + 2];
    zone_id(z->key, id, sizeof(id));
    snprintf(url, sizeof(url), ZONES_URL "/%s", id);
    snprintf(name, sizeof(name), "%s%s", z->key, strcmp(z->key, ".") == 0 ? "" : ".");
    xfr_zone_info_t *xi = calloc(1, sizeof(*xi));
    if (!xi)
        return NULL;
    if (a->xfr)
        xfr_zone_info(a->xfr, z->key, xi);
    uint32_t notified = 0;
    for (size_t i = 0; i < xi->nnotify && i < 8; i++)
        if (xi->notify[i].acked && xi->notify[i].serial > notified)
            notified = xi->notify[i].serial;
    const char *kind = xi->secondary ? "Slave" : xi->nnotify ? "Master" : "Native";
    json_t *masters = json_array();
    for (size_t i = 0; masters && i < q->cfg->nzones; i++) {
        const config_zone_t *cz = &q->cfg->zones[i];
        char ck[DNAME_KEY_MAX];
        const char *why;
        if (dname_key(cz->origin, ck, sizeof(ck), &why) < 0 || strcmp(ck, z->key) != 0)
            continue;
        for (size_t j = 0; j < cz->nprimaries; j++) {
            char m[96];
            master_text(&cz->primaries[j], m, sizeof(m));
            json_array_append_new(masters, json_string(m));
        }
    }
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:b}", "id", id, "url",
                  url, "name", name, "kind", kind, "catalog", "", "account", "", "masters",
                  masters ? masters : json_array(), "serial", (json_int_t)z->serial,
                  "notified_serial", (json_int_t)notified, "edited_serial", (json_int_t)z->serial,
                  "last_check", (json_int_t)(xi->secondary ? xi->in_when : 0), "dnssec", z->dnssec);
    free(xi);
    return o;
}

/* ---- responses ---------------------------------------------------------------------------- */

static void send_json(api_resp_t *r, unsigned status, json_t *doc)
{
    char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!s) {
        api_error(r, 500, "out of memory");
        return;
    }
    r->status = status;
    tern_buf_append(&r->body, s, strlen(s));
    free(s);
}

static json_t *server_object(void)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "type", "Server", "id", "localhost",
                     "url", SERVER_URL, "daemon_type", "authoritative", "version", TERN_VERSION,
                     "config_url", SERVER_URL "/config{/config_setting}", "zones_url",
                     ZONES_URL "{/zone}");
}

/* Whether q's method is one of allow ("GET, PATCH"); else 405 with why (NULL: pdns' text). */
static bool method_ok(const api_req_t *q, api_resp_t *r, const char *allow, const char *why)
{
    const char *m = strcmp(q->method, "HEAD") == 0 ? "GET" : q->method;
    size_t ml = strlen(m);
    for (const char *p = allow; (p = strstr(p, m)); p += ml)
        if ((p == allow || p[-1] == ' ') && (p[ml] == ',' || p[ml] == '\0'))
            return true;
    api_error(r, 405, "Method Not Allowed%s%s", why ? ": " : "", why ? why : "");
    r->allow = allow;
    return false;
}

/* A read_only key and a change: 403. */
static bool may_change(const api_req_t *q, api_resp_t *r)
{
    if (api_auth_method_ok(q->key, q->method))
        return true;
    api_error(r, 403, "Forbidden: API key %s is read-only", q->key->name);
    return false;
}

/* ---- the endpoints ------------------------------------------------------------------------ */

static void get_zones(api_t *a, const api_req_t *q, api_resp_t *r)
{
    char only[DNAME_KEY_MAX];
    const char *why;
    if (q->arg_zone && dname_key(q->arg_zone, only, sizeof(only), &why) < 0) {
        api_error(r, 422, "Unable to parse DNS Name '%s'", q->arg_zone);
        return;
    }
    zlist_t l = {0};
    loader_zones(a->loader, collect, &l);
    json_t *arr = l.oom ? NULL : json_array();
    for (size_t i = 0; arr && i < l.n; i++) {
        if (!api_auth_zone_ok(q->key, l.v[i].key) || (q->arg_zone && strcmp(only, l.v[i].key)))
            continue;
        json_t *o = zone_object(a, q, &l.v[i]);
        if (!o || json_array_append_new(arr, o) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    free(l.v);
    send_json(r, 200, arr);
}

static void get_zone(api_t *a, const api_req_t *q, const zinfo_t *zi, api_resp_t *r)
{
    bool rrsets = true;
    if (q->arg_rrsets && strcmp(q->arg_rrsets, "true") != 0) {
        if (strcmp(q->arg_rrsets, "false") != 0) {
            api_error(r, 422, "'rrsets' request parameter value '%s' is not supported",
                      q->arg_rrsets);
            return;
        }
        rrsets = false;
    }
    json_t *o = zone_object(a, q, zi);
    if (!o) {
        api_error(r, 500, "out of memory");
        return;
    }
    /* the rest of fillZone()'s keys: tern keeps no such metadata */
    json_object_set_new(o, "soa_edit_api", json_string(""));
    json_object_set_new(o, "soa_edit", json_string(""));
    json_object_set_new(o, "nsec3param", json_string(""));
    json_object_set_new(o, "nsec3narrow", json_false());
    json_object_set_new(o, "api_rectify", json_false());
    json_object_set_new(o, "master_tsig_key_ids", json_array());
    json_object_set_new(o, "slave_tsig_key_ids", json_array());
    if (rrsets) {
        zone_t *z = pin(a, zi->key);
        json_t *sets = NULL;
        size_t records = 0;
        int rc = !z ? TERN_ENOENT
                 : z->unavailable
                     ? ((sets = json_array()) ? 0 : TERN_ENOMEM)
                     : api_zone_rrsets(z, q->arg_rrset_name, q->arg_rrset_type, &sets, &records);
        zone_free(z);
        if (rc < 0) {
            json_decref(o);
            if (rc == TERN_EINVAL)
                api_error(r, 422, "bad rrset_name or rrset_type");
            else if (rc == TERN_ENOENT)
                api_error(r, 404, "Not Found");
            else
                api_error(r, 500, "cannot read the zone: %s", tern_strerror(rc));
            return;
        }
        json_object_set_new(o, "rrsets", sets);
        json_object_set_new(o, "record_count", json_integer((json_int_t)records));
    }
    send_json(r, 200, o);
}

void api_zone_get(api_t *a, const api_req_t *q, const char *key, unsigned status, api_resp_t *r)
{
    zinfo_t zi;
    bool oom = false;
    if (!find_zone(a, q->key, key, &zi, &oom)) {
        api_error(r, oom ? 500 : 404, "%s", oom ? "out of memory" : "Not Found");
        return;
    }
    get_zone(a, q, &zi, r);
    if (r->status == 200)
        r->status = status;
}

/* The update service's rcode as PowerDNS' status (api.h): NOERROR 204; NOTAUTH for a zone not
 * served 404, for a secondary 422; SERVFAIL 500; anything else is the request's fault, 422. */
static void patch_zone(api_t *a, const api_req_t *q, const zinfo_t *zi, api_resp_t *r)
{
    tern_buf_t msg;
    tern_buf_init(&msg, 0);
    char why[1024] = "";
    size_t n = 0;
    int rc = api_patch_build(zi->key, q->body, q->len, &msg, &n, why, sizeof(why));
    if (rc == TERN_EINVAL) {
        api_error(r, 422, "%s", why);
    } else if (rc < 0) {
        api_error(r, 500, "out of memory");
    } else if (n == 0) {
        r->status = 204; /* nothing to change (comments only, or no rrsets) */
    } else {
        char who[200];
        snprintf(who, sizeof(who), "api key %s from %s", q->key->name, q->peer);
        unsigned rcode =
            update_apply_msg(a->upd, (const uint8_t *)msg.p, msg.len, who, why, sizeof(why));
        if (rcode == WIRE_RC_NOERROR)
            r->status = 204;
        else if (rcode == WIRE_RC_NOTAUTH && !strstr(why, "secondary"))
            api_error(r, 404, "Not Found");
        else if (rcode == WIRE_RC_SERVFAIL || rcode == WIRE_RC_NOTIMP)
            api_error(r, 500, "%s", why[0] ? why : "the change could not be made");
        else
            api_error(r, 422, "%s", why[0] ? why : "the change was refused");
    }
    tern_buf_free(&msg);
}

static void notify_zone(api_t *a, const zinfo_t *zi, api_resp_t *r)
{
    int n = a->xfr ? xfr_notify_now(a->xfr, zi->key) : 0;
    if (n <= 0) {
        api_error(r, 422, "zone %s has no secondaries to notify (its notify: list is empty)",
                  zi->key);
        return;
    }
    send_json(r, 200, json_pack("{s:s}", "result", "Notification queued"));
}

static void export_zone(api_t *a, const api_req_t *q, const zinfo_t *zi, api_resp_t *r)
{
    zone_t *z = pin(a, zi->key);
    tern_buf_t text;
    tern_buf_init(&text, 0);
    int rc = !z ? TERN_ENOENT : z->unavailable ? 0 : api_zone_export(z, &text);
    zone_free(z);
    if (rc < 0) {
        api_error(r, rc == TERN_ENOENT ? 404 : 500, "%s",
                  rc == TERN_ENOENT ? "Not Found" : "cannot read the zone");
    } else if (q->accept_json) {
        send_json(r, 200, json_pack("{s:s}", "zone", text.p ? text.p : ""));
    } else {
        r->status = 200;
        r->ctype = "text/plain; charset=us-ascii";
        if (text.len)
            tern_buf_append(&r->body, text.p, text.len);
    }
    tern_buf_free(&text);
}

/* DELETE .../zones/{id}, .../zones/{id}/redins/{label} (api_zones.c): id idlen bytes, label
 * NULL for the zone. */
static void redis_route(api_t *a, const api_req_t *q, const char *id, size_t idlen,
                        const char *label, api_resp_t *r)
{
    if ((label && !method_ok(q, r, "GET, PUT, DELETE", NULL)) || !may_change(q, r))
        return;
    char key[DNAME_KEY_MAX];
    if (!id_to_key(id, idlen, key, sizeof(key)))
        api_error(r, 404, "Not Found");
    else if (label)
        api_zones_redins(a, q, key, label, r);
    else
        api_zones_delete(a, q, key, r);
}

/* /zones/{id}[/notify|/export|/redins/{label}]: rest is what follows "/zones/". */
static void zone_route(api_t *a, const api_req_t *q, const char *rest, api_resp_t *r)
{
    const char *slash = strchr(rest, '/');
    size_t idlen = slash ? (size_t)(slash - rest) : strlen(rest);
    const char *sub = slash ? slash + 1 : NULL;
    if ((!sub && strcmp(q->method, "DELETE") == 0) || (sub && strncmp(sub, "redins/", 7) == 0)) {
        redis_route(a, q, rest, idlen, sub ? sub + 7 : NULL, r);
        return;
    }
    if (!sub) {
        if (!method_ok(q, r, "GET, PATCH, DELETE",
                       strcmp(q->method, "PUT") == 0
                           ? "a zone's settings come from tern's configuration"
                           : NULL))
            return;
    } else if (strcmp(sub, "notify") == 0) {
        if (!method_ok(q, r, "PUT", NULL))
            return;
    } else if (strcmp(sub, "export") == 0) {
        if (!method_ok(q, r, "GET", NULL))
            return;
    } else {
        api_error(r, 404, "Not Found");
        return;
    }
    if (!may_change(q, r))
        return;
    char key[DNAME_KEY_MAX];
    zinfo_t zi;
    bool oom = false;
    if (!id_to_key(rest, idlen, key, sizeof(key)) || !find_zone(a, q->key, key, &zi, &oom)) {
        if (oom)
            api_error(r, 500, "out of memory");
        else
            api_error(r, 404, "Not Found");
        return;
    }
    if (sub && sub[0] == 'n')
        notify_zone(a, &zi, r);
    else if (sub)
        export_zone(a, q, &zi, r);
    else if (strcmp(q->method, "PATCH") == 0)
        patch_zone(a, q, &zi, r);
    else
        get_zone(a, q, &zi, r);
}

void api_handle(api_t *a, const api_req_t *q, api_resp_t *r)
{
    const char *p = q->path;
    if (strcmp(p, "/api") == 0 || strcmp(p, "/api/") == 0) {
        if (method_ok(q, r, "GET", NULL))
            send_json(r, 200, json_pack("[{s:s, s:i}]", "url", "/api/v1", "version", 1));
    } else if (strcmp(p, "/api/v1") == 0 || strcmp(p, "/api/v1/") == 0) {
        if (method_ok(q, r, "GET", NULL))
            send_json(r, 200,
                      json_pack("[{s:s, s:[]}]", "server_url", "/api/v1/servers{/server}",
                                "api_features"));
    } else if (strcmp(p, "/api/v1/servers") == 0) {
        if (method_ok(q, r, "GET", NULL))
            send_json(r, 200, json_pack("[o]", server_object()));
    } else if (strcmp(p, SERVER_URL) == 0) {
        if (method_ok(q, r, "GET", NULL))
            send_json(r, 200, server_object());
    } else if (strcmp(p, ZONES_URL) == 0) {
        if (method_ok(q, r, "GET, POST", NULL) &&
            (strcmp(q->method, "POST") != 0 || may_change(q, r)))
            strcmp(q->method, "POST") == 0 ? api_zones_create(a, q, r) : get_zones(a, q, r);
    } else if (strncmp(p, ZONES_URL "/", sizeof(ZONES_URL)) == 0 && p[sizeof(ZONES_URL)]) {
        zone_route(a, q, p + sizeof(ZONES_URL), r);
    } else {
        api_error(r, 404, "Not Found");
    }
}
