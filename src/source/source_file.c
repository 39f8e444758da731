/*
 * source_file.c — see source_file.h.
 */
#include "tern/source/source_file.h"

#include <stdio.h>
#include <stdlib.h>

#include "tern/common/log.h"

static int read_zone(zone_source_t *s, const zone_source_read_t *rd, zone_t **out, char *err,
                     size_t errlen)
{
    const config_zone_t *cz = rd->cz;
    const zone_file_opts_t fo = {.seen = rd->seen,
                                 .seen_ctx = rd->seen_ctx,
                                 .health = rd->health_fn,
                                 .health_ctx = rd->health_ctx,
                                 .dnskeys = rd->dnskeys,
                                 .dnskeys_len = rd->dnskeys_len};
    if (!rd->base)
        return zone_file_load_opts(cz->origin, cz->file, &fo, out, err, errlen);
    char why[512];
    int rc = zone_file_patch(cz->origin, cz->file, &fo, rd->base, out, why, sizeof(why));
    if (rc < 0)
        snprintf(err, errlen, "%s", why);
    else if (rc == 0)
        log_info("zone %s: %s: %zu names changed, patched (%u patches since its last full read)",
                 cz->origin, cz->file, (*out)->patched - rd->base->patched, (*out)->patches);
    else if (rc == ZONE_FILE_BUILD)
        log_info("zone %s: %s: reading it in full (%s)", cz->origin, cz->file, why);
    return rc;
}

static bool owns(const config_zone_t *cz)
{
    return cz->file && cz->format == CONFIG_ZONE_RFC1035;
}

const zone_source_ops_t source_file_ops = {
    .name = "file",
    .what = "the zones",
    .previous = "data",
    .owns = owns,
    .read = read_zone,
};
