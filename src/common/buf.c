/*
 * buf.c — see buf.h. Growth is by doubling from BUF_MIN, through tern_grow().
 */
#include "tern/common/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/grow.h"

void tern_buf_init(tern_buf_t *b, size_t max)
{
    *b = (tern_buf_t){.max = max};
}

bool tern_buf_reserve(tern_buf_t *b, size_t n)
{
    if (b->failed)
        return false;
    size_t need = b->len + n + 1;
    if (need < b->len || (b->max && need > b->max)) {
        b->failed = true;
        return false;
    }
    if (need <= b->cap)
        return true;
    void *p = b->p;
    size_t cap = b->cap;
    if (tern_grow(&p, &cap, need, 1) < 0) {
        b->failed = true;
        return false;
    }
    if (b->max && cap > b->max) { /* doubling past the bound: keep exactly the bound */
        char *q = realloc(p, b->max);
        if (q) {
            p = q;
            cap = b->max;
        }
    }
    if (!b->p)
        ((char *)p)[0] = '\0';
    b->p = p;
    b->cap = cap;
    return true;
}

void tern_buf_append(tern_buf_t *b, const void *data, size_t n)
{
    if (!tern_buf_reserve(b, n) || n == 0) /* n == 0: data may be an empty buffer's NULL */
        return;
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void tern_buf_printf(tern_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if (!tern_buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void tern_buf_free(tern_buf_t *b)
{
    free(b->p);
    tern_buf_init(b, b->max);
}
