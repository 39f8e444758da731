/*
 * base64.h — the one base64 decoder (RFC 4648 §4): TSIG secrets (tsig_keys.c, blanks inside
 * skipped as BIND does) and DNSSEC private-key fields (dnssec_key_text.c, strict) both decode
 * through it, so the two cannot disagree on what base64 is, only on whether blanks may cut it.
 *
 * Accepted: quantums of four alphabet characters, the last one padded "xx==" or "xxx=", nothing
 * after the padding; with TERN_BASE64_BLANKS, blanks (space, tab, CR, LF, FF, VT) anywhere are
 * skipped. An empty input decodes to nothing (callers say whether that is allowed). Faults are
 * reported precisely (which rule, at which offset) so each caller words them its own way.
 *
 * Pure, no allocation; secrets pass through a few stack bytes that are cleansed. Any thread.
 */
#ifndef TERN_COMMON_BASE64_H
#define TERN_COMMON_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"

/* tern_base64_decode() flags */
#define TERN_BASE64_BLANKS 1u /* skip blanks anywhere (else a blank is a bad character) */

typedef enum tern_base64_fault {
    TERN_BASE64_OK = 0,
    TERN_BASE64_BAD_CHAR,  /* a character outside the alphabet (and not '=') */
    TERN_BASE64_PAD_EARLY, /* '=' as the first or second character of a quantum */
    TERN_BASE64_AFTER_PAD, /* data (or another quantum) after the '=' padding */
    TERN_BASE64_LENGTH,    /* the characters end inside a quantum (cut short?) */
} tern_base64_fault_t;

typedef struct tern_base64_err {
    tern_base64_fault_t fault;
    size_t at;     /* offset in the input of the character at fault (LENGTH: the input's length) */
    size_t pad_at; /* offset of the first '=' seen before the fault, or SIZE_MAX */
} tern_base64_err_t;

/**
 * Decode s[0..len) into out (room for cap bytes; nothing is written beyond it). *n is the decoded
 * length even past cap, so the caller can say how long the data was. Returns 0, or TERN_ESYNTAX
 * with err (if not NULL) filled at the first fault, scanning left to right.
 */
int tern_base64_decode(const char *s, size_t len, unsigned flags, uint8_t *out, size_t cap,
                       size_t *n, tern_base64_err_t *err) TERN_WUR;

#endif
