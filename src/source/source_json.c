/*
 * source_json.c — see source_json.h.
 */
#include "tern/source/source_json.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tern/common/err.h"

/* A JSON file is read whole (no patch: records are located and checked as they are built). */
static int read_zone(zone_source_t *s, const zone_source_read_t *rd, zone_t **out, char *err,
                     size_t errlen)
{
    const config_zone_t *cz = rd->cz;
    const zone_json_opts_t zo = {.locate = rd->locate,
                                 .locate_ctx = rd->locate_ctx,
                                 .health = rd->health,
                                 .health_fn = rd->health_fn,
                                 .health_ctx = rd->health_ctx,
                                 .dnskeys = rd->dnskeys,
                                 .dnskeys_len = rd->dnskeys_len};
    struct stat st;
    if (stat(cz->file, &st) < 0) {
        int rc = -errno;
        snprintf(err, errlen, "%s: %s", cz->file, strerror(-rc));
        return rc;
    }
    if (rd->seen(rd->seen_ctx, cz->file, &st) < 0) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    return zone_json_load_file(cz->origin, cz->file, &zo, out, err, errlen);
}

static bool owns(const config_zone_t *cz)
{
    return cz->file && cz->format == CONFIG_ZONE_JSON;
}

const zone_source_ops_t source_json_ops = {
    .name = "json",
    .what = "the zones",
    .previous = "data",
    .owns = owns,
    .read = read_zone,
};
