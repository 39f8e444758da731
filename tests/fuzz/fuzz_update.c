/*
 * fuzz_update.c — libFuzzer target for an RFC 2136 UPDATE a client sends: parsed
 * (update_msg_parse) and evaluated (update_eval) over fuzz.zone, as the update service does.
 *
 * Input: one byte of mode, then the message.
 *   mode & 1: evaluate as for a zone tern signs (its DNSSEC types refused, its DNSKEYs unseen)
 * Invariants: no crash, no sanitizer report; a NOERROR evaluation's change applies to the zone
 * it was made from: every RR it removes is in the zone (zone_delta_ixfr_remove() takes it), the
 * serial chains (from is the zone's), an empty change keeps the serial, a non-empty one moves it;
 * the builder may still refuse what the change makes (that is the service's REFUSED), never by
 * crashing. The zone is read from $TERN_FUZZ_DIR or TERN_FUZZ_DIR; TERN_FUZZ_DUMP=1 prints each
 * input's rcode and reason.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/update/update_msg.h"
#include "tern/wire/parse.h"
#include "tern/zone/zone.h"
#include "tern/zone/zone_delta.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_patch.h"

#ifndef TERN_FUZZ_DIR
#define TERN_FUZZ_DIR "."
#endif

static zone_t *have;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void setup(void)
{
    const char *dir = getenv("TERN_FUZZ_DIR");
    if (dir == NULL || *dir == '\0')
        dir = TERN_FUZZ_DIR;
    char path[4096], err[512];
    snprintf(path, sizeof(path), "%s/fuzz.zone", dir);
    if (zone_file_load("fuzz.test", path, &have, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_update: cannot load %s: %s\n", path, err);
        exit(1);
    }
}

/* The change over the zone, as the service checks it: the removals must all apply. */
static void apply(const update_change_t *ch)
{
    char why[512];
    zone_delta_ixfr_t *x = zone_delta_ixfr_new(have);
    if (!x)
        return;
    if (zone_delta_ixfr_begin(x, ch->from, why, sizeof(why)) != 0)
        abort(); /* from is the zone's serial */
    for (size_t i = 0; i < ch->nremoved; i++) {
        const update_rr_t *r = &ch->removed[i];
        int rc = zone_delta_ixfr_remove(x, r->owner, r->type, r->rdata, r->rdlen, why, sizeof(why));
        if (rc == TERN_ENOENT) {
            fprintf(stderr, "fuzz_update: a removal not in the zone: %s\n", why);
            abort();
        }
        if (rc < 0)
            goto out;
    }
    if (zone_delta_ixfr_end(x, ch->to) != 0)
        abort();
    for (size_t i = 0; i < ch->nadded; i++) {
        const update_rr_t *r = &ch->added[i];
        if (zone_delta_ixfr_add(x, r->owner, r->type, r->ttl, r->rdata, r->rdlen) < 0)
            goto out;
    }
    zone_delta_t *d = NULL;
    if (zone_delta_ixfr_finish(x, ch->soa_ttl, ch->soa, ch->soa_len, "fuzz", &d, why,
                               sizeof(why)) == 0) {
        zone_t *z = NULL;
        if (zone_patch(have, d, &z, why, sizeof(why)) == 0)
            zone_free(z);
        zone_delta_release(d);
    }
out:
    zone_delta_ixfr_free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!have)
        setup();
    if (size < 1)
        return 0;
    const update_opts_t o = {.dnssec = data[0] & 1};
    update_msg_t m;
    update_change_t ch;
    char why[512] = "";
    unsigned rc = update_msg_parse(&m, data + 1, size - 1, 200, why, sizeof(why));
    if (rc == WIRE_RC_NOERROR) {
        rc = update_eval(have, &m, &o, &ch, why, sizeof(why));
        if (rc == WIRE_RC_NOERROR) {
            bool empty = !ch.nremoved && !ch.nadded;
            if (ch.from != have->serial)
                abort(); /* a change is of the version evaluated */
            if (!empty && ch.to == ch.from)
                abort(); /* a change that moves nothing would not reach the secondaries */
            if (!empty || ch.to != ch.from)
                apply(&ch);
            update_change_free(&ch);
        }
    }
    update_msg_free(&m);
    if (getenv("TERN_FUZZ_DUMP"))
        fprintf(stderr, "%s: %s\n", update_rcode_name(rc), why);
    return 0;
}
