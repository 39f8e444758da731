/*
 * fuzz_xfr.c — libFuzzer target for what a zone-transfer peer sends tern: a primary's AXFR/IXFR
 * response stream (xfr_in) and the TSIG of any message (tsig_find, tsig_verify_request, and the
 * client side, tsig_verify_response).
 *
 * Input: one byte of mode, then messages, each a 2-byte length and its bytes (the TCP framing).
 *   mode & 1: AXFR (else IXFR against fuzz.zone, serial 2024010101, as the version held)
 *   mode & 2: also check each message's TSIG as a request (against one key) and as a response
 *             to a request tern signed
 * Every message goes to xfr_in_feed() until it says complete or fails; complete transfers are
 * built (xfr_in_finish) and freed. Invariants: no crash, no sanitizer report, and a feed that
 * said "complete" builds a zone whose serial is the one xfr_in_serial() reported.
 * The zone is read from $TERN_FUZZ_DIR or the source directory compiled in as TERN_FUZZ_DIR;
 * TERN_FUZZ_DUMP=1 prints what each input came to.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/wire/rr.h"
#include "tern/tsig/tsig.h"
#include "tern/xfr/xfr_in.h"
#include "tern/zone/zone.h"
#include "tern/zone/zone_file.h"

#ifndef TERN_FUZZ_DIR
#define TERN_FUZZ_DIR "."
#endif

/* A transfer larger than this is refused (xfr_in's cap), so an input cannot grow memory. */
#define FUZZ_MAX_BYTES (1u << 20)

static zone_t *have;
static tsig_key_t key;
static uint8_t origin[256];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void setup(void)
{
    const char *dir = getenv("TERN_FUZZ_DIR");
    if (dir == NULL || *dir == '\0')
        dir = TERN_FUZZ_DIR;
    char path[4096], err[512];
    snprintf(path, sizeof(path), "%s/fuzz.zone", dir);
    if (zone_file_load("fuzz.test", path, &have, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_xfr: cannot load %s: %s\n", path, err);
        exit(1);
    }
    memcpy(origin, have->apex, have->apex_len);
    if (tsig_key_init(&key, "fuzz.key", "hmac-sha256", "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", err,
                      sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_xfr: %s\n", err);
        exit(1);
    }
}

static void check_tsig(const uint8_t *msg, size_t len)
{
    tsig_rr_t rr;
    int f = tsig_find(msg, len, &rr);
    if (f != 0 && f != TERN_EMALF)
        abort();
    if (f == 0 && rr.present && rr.off >= len)
        abort();
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    int v = tsig_verify_request(&ctx, &key, 1, msg, len, 1795000000);
    if (v != 0 && v != TERN_EMALF && v != TERN_ENOENT && v != TERN_ENOMEM && v != TSIG_BADKEY &&
        v != TSIG_BADSIG && v != TSIG_BADTIME && v != TSIG_BADTRUNC)
        abort();
    if (v == 0 && !(f == 0 && rr.present)) /* verified: there was a TSIG to verify */
        abort();
    tsig_ctx_clear(&ctx);
    /* as the answer to a request we signed */
    uint8_t q[512] = {0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    size_t n = 12;
    memcpy(q + n, origin, have->apex_len);
    n += have->apex_len;
    tern_wr16(q + n, WIRE_T_AXFR);
    tern_wr16(q + n + 2, WIRE_CLASS_IN);
    n += 4;
    tsig_ctx_init(&ctx);
    size_t signed_len = n;
    if (tsig_sign_request(&ctx, &key, q, n, sizeof(q), 1795000000, &signed_len) == 0) {
        size_t stripped = len;
        int r = tsig_verify_response(&ctx, msg, len, 1795000000, &stripped);
        if (stripped > len || (r == 0 && stripped >= len)) /* verified: its TSIG came off */
            abort();
    }
    tsig_ctx_clear(&ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!have)
        setup();
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    bool axfr = mode & 1;
    xfr_in_t *x = xfr_in_new(origin, axfr ? WIRE_T_AXFR : WIRE_T_IXFR, axfr ? NULL : have,
                             FUZZ_MAX_BYTES, "fuzz");
    if (!x)
        abort(); /* only out of memory may fail here */
    xfr_in_set_id(x, 0x1234);
    char err[512];
    int rc = 1;
    size_t pos = 1;
    while (rc == 1 && size - pos >= 2) {
        size_t len = tern_rd16(data + pos);
        pos += 2;
        if (len > size - pos)
            len = size - pos;
        /* an exact-size copy, so the sanitizers see reads past the message */
        uint8_t *msg = malloc(len ? len : 1);
        if (!msg)
            abort();
        memcpy(msg, data + pos, len);
        pos += len;
        if (mode & 2)
            check_tsig(msg, len);
        rc = xfr_in_feed(x, msg, len, err, sizeof(err));
        free(msg);
    }
    if (getenv("TERN_FUZZ_DUMP")) /* what the input came to, when looking at a corpus */
        fprintf(stderr, "fuzz_xfr: %s feed %d%s%s\n", axfr ? "AXFR" : "IXFR", rc,
                rc < 0 ? ": " : "", rc < 0 ? err : "");
    if (rc == 0 && xfr_in_kind(x) != XFR_IN_UP_TO_DATE) {
        zone_t *z = NULL;
        if (xfr_in_finish(x, &z, err, sizeof(err)) == 0) {
            if (!z || z->serial != xfr_in_serial(x))
                abort();
            zone_free(z);
        }
    }
    xfr_in_free(x);
    return 0;
}
