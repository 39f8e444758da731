/*
 * buf.h — the one growable text buffer: responses of the control socket and the metrics page.
 *
 * Appends never fail loudly: an allocation failure or the caller's size bound marks the buffer
 * failed, later appends do nothing, and the owner checks `failed` once at the end (a half-built
 * response is never sent). Always NUL-terminated once anything was written.
 * Never used on the query path (it allocates); one owner thread per buffer.
 */
#ifndef TERN_COMMON_BUF_H
#define TERN_COMMON_BUF_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/common/compiler.h"

typedef struct tern_buf {
    char *p;     /* the text, NUL-terminated; NULL until the first append */
    size_t len;  /* bytes, the NUL excluded */
    size_t cap;  /* bytes allocated */
    size_t max;  /* bound on cap (a response size limit); 0 = none */
    bool failed; /* out of memory or over max: the content is incomplete */
} tern_buf_t;

/** An empty buffer that may grow to max bytes (0: unbounded). Allocates nothing. */
void tern_buf_init(tern_buf_t *b, size_t max);

/** Room for n more bytes and the NUL; false (and failed set) when it cannot be had. */
bool tern_buf_reserve(tern_buf_t *b, size_t n);

/** Append n bytes of data. */
void tern_buf_append(tern_buf_t *b, const void *data, size_t n);

/** Append printf-formatted text. */
void tern_buf_printf(tern_buf_t *b, const char *fmt, ...) TERN_PRINTF(2, 3);

/** Release the memory; b is empty again (init state, same max). */
void tern_buf_free(tern_buf_t *b);

#endif
