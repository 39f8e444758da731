/*
 * base64.c — the one base64 decoder (base64.h). A quantum of four characters at a time, so a
 * fault is found where it is (a padding rule needs only the quantum it is in) and reported at
 * its offset. Not libcrypto's: EVP_DecodeBlock() alone takes '=' anywhere and counts padding as
 * data, and neither it nor EVP_DecodeUpdate() says which rule an input broke or where, which the
 * callers' messages (and their tests) need.
 */
#include "tern/common/base64.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tern/common/err.h"

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

static bool is_blank(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int fault(tern_base64_err_t *err, tern_base64_fault_t f, size_t at, size_t pad_at)
{
    if (err)
        *err = (tern_base64_err_t){.fault = f, .at = at, .pad_at = pad_at};
    return TERN_ESYNTAX;
}

int tern_base64_decode(const char *s, size_t len, unsigned flags, uint8_t *out, size_t cap,
                       size_t *n, tern_base64_err_t *err)
{
    unsigned q[4];
    unsigned nq = 0, pad = 0;
    bool done = false; /* a padded quantum ended the data */
    size_t pad_at = SIZE_MAX;
    int rc = 0;
    *n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((flags & TERN_BASE64_BLANKS) && is_blank(c))
            continue;
        if (done) {
            rc = fault(err, TERN_BASE64_AFTER_PAD, i, pad_at);
            goto out;
        }
        if (c == '=') {
            if (nq < 2) {
                rc = fault(err, TERN_BASE64_PAD_EARLY, i, i); /* no '=' before: see done */
                goto out;
            }
            if (pad_at == SIZE_MAX)
                pad_at = i;
            pad++;
            q[nq++] = 0;
        } else {
            int v = b64_value(c);
            if (v < 0) {
                rc = fault(err, TERN_BASE64_BAD_CHAR, i, pad_at);
                goto out;
            }
            if (pad) {
                rc = fault(err, TERN_BASE64_AFTER_PAD, i, pad_at);
                goto out;
            }
            q[nq++] = (unsigned)v;
        }
        if (nq == 4) {
            uint8_t b[3] = {(uint8_t)(q[0] << 2 | q[1] >> 4), (uint8_t)(q[1] << 4 | q[2] >> 2),
                            (uint8_t)(q[2] << 6 | q[3])};
            for (unsigned k = 0; k < 3 - pad; k++, (*n)++)
                if (*n < cap)
                    out[*n] = b[k];
            explicit_bzero(b, sizeof(b));
            nq = 0;
            done = pad > 0;
        }
    }
    if (nq != 0)
        rc = fault(err, TERN_BASE64_LENGTH, len, pad_at);
out:
    explicit_bzero(q, sizeof(q));
    return rc;
}
