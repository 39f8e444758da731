/*
 * view_db.c — see view_db.h.
 */
#include "view_db.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/geo/asn_compile.h"

void view_db_asn_put(struct asn_ref *a)
{
    if (a && --a->refs == 0) {
        asn_table_close(a->t);
        free(a->dep.path);
        free(a);
    }
}

void view_db_geo_put(struct geo_ref *g)
{
    if (g && --g->refs == 0) {
        geoip_close(g->db);
        free(g->dep.path);
        free(g);
    }
}

/*
 * The MaxMind DB at path for one role ("geoip_db" / "geoip_db_v6"): prev again when it is the same
 * unchanged file, else the file opened anew. A file that does not open fails the whole reload
 * (the old snapshot keeps its database). *changed tells whether a new file was opened.
 */
int view_db_geo_get(struct geo_ref *prev, const char *path, const char *role, bool quick,
                    struct geo_ref **out, bool *changed, char *err, size_t errlen)
{
    if (prev && strcmp(prev->dep.path, path) == 0 &&
        (quick || snapshot_dep_unchanged(&prev->dep))) {
        prev->refs++;
        *out = prev;
        return 0;
    }
    char gerr[512] = "";
    struct stat st;
    struct geo_ref *g = calloc(1, sizeof(*g));
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    /* stat first: a file replaced in between is seen as changed by the next reload */
    if (stat(path, &st) < 0 || !(g->db = geoip_open(path, gerr, sizeof(gerr)))) {
        snprintf(err, errlen, "%s: %s", role, gerr[0] ? gerr : strerror(errno));
        free(g);
        return TERN_EINVAL;
    }
    g->refs = 1;
    snapshot_dep_set(&g->dep, &st);
    if (!(g->dep.path = strdup(path))) {
        geoip_close(g->db);
        free(g);
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    log_info("%s %s: %s", role, path, geoip_describe(g->db));
    *out = g;
    *changed = true;
    return 0;
}

/* zone_json's locate callback: a record address's coordinates from the snapshot's DBs. */
bool view_db_locate(void *ctx, int family, const uint8_t *addr, double *lat, double *lon)
{
    const geoip_set_t *set = ctx;
    geoip_result_t r;
    geoip_set_lookup(set, family == 4 ? AF_INET : family == 6 ? AF_INET6 : family, addr, &r);
    if (!r.has_location)
        return false;
    *lat = r.lat;
    *lon = r.lon;
    return true;
}

/*
 * The ASN table of cfg. asn_table alone: that file, mapped. asn_db: the MaxMind ASN database
 * compiled into asn_table when that is set too, else into "<asn_db>.tern-asn" beside it
 * (asn_compile_cached(): reused while it matches the database, compiled again when the database
 * changed), then mapped. prev is shared while its file is unchanged and, with asn_db, the
 * database is still the one it was compiled from. A database or table that fails leaves prev
 * answering (the reload fails with the reason). The compile runs here, on the loader thread.
 */
int view_db_asn_get(struct asn_ref *prev, const config_t *cfg, bool quick, struct asn_ref **out,
                    char *err, size_t errlen)
{
    const char *role = cfg->asn_db ? "asn_db" : "asn_table";
    char *path = cfg->asn_table ? strdup(cfg->asn_table) : asn_compile_default_cache(cfg->asn_db);
    char aerr[512] = "";
    struct asn_ref *a = NULL;
    bool rebuilt = false;
    asn_compile_stats_t cst;
    int64_t t0 = tern_monotonic_ms();
    int rc = TERN_ENOMEM;
    if (!path)
        goto nomem;
    bool same = prev && strcmp(prev->dep.path, path) == 0;
    if (same && (quick || (snapshot_dep_unchanged(&prev->dep) &&
                           (!cfg->asn_db || asn_compile_source_unchanged(prev->t, cfg->asn_db)))))
        goto share;
    if (cfg->asn_db) {
        if ((rc = asn_compile_cached(cfg->asn_db, path, &cst, &rebuilt, aerr, sizeof(aerr))) < 0)
            goto fail;
        if (!rebuilt && same && snapshot_dep_unchanged(&prev->dep))
            goto share; /* the database was touched, not changed */
    }
    struct stat st;
    if (!(a = calloc(1, sizeof(*a))))
        goto nomem;
    /* stat first: a file replaced in between is seen as changed by the next reload */
    if (stat(path, &st) < 0 || !(a->t = asn_table_open(path, aerr, sizeof(aerr)))) {
        rc = TERN_EINVAL;
        if (!aerr[0])
            snprintf(aerr, sizeof(aerr), "%s: %s", path, strerror(errno));
        goto fail;
    }
    a->refs = 1;
    snapshot_dep_set(&a->dep, &st);
    a->dep.path = path;
    *out = a;
    size_t v4, v6, names;
    asn_table_counts(a->t, &v4, &v6, &names);
    if (rebuilt)
        log_info("asn_db %s: compiled into %s in %lld ms: %zu networks, %zu IPv4 and %zu IPv6 "
                 "entries, %zu names",
                 cfg->asn_db, path, (long long)(tern_monotonic_ms() - t0), cst.networks, v4, v6,
                 names);
    else if (cfg->asn_db)
        log_info("asn_db %s: mapped %s (compiled before from this file), %zu IPv4 and %zu IPv6 "
                 "entries, %zu names",
                 cfg->asn_db, path, v4, v6, names);
    else
        log_info("asn_table %s: mapped, %zu IPv4 and %zu IPv6 entries, %zu names", path, v4, v6,
                 names);
    return 0;
share:
    prev->refs++;
    *out = prev;
    free(path);
    return 0;
nomem:
    snprintf(aerr, sizeof(aerr), "out of memory");
fail:
    snprintf(err, errlen, "%s: %s", role, aerr[0] ? aerr : tern_strerror(rc));
    free(a);
    free(path);
    return rc;
}
