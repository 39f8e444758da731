/*
 * grow.h — the one growable-array helper: amortised doubling of a malloc'd array.
 *
 * Loader-side code (builders, parsers, the Redis source) appends to arrays whose final size it
 * does not know; every one of them grows through tern_grow() so the overflow checks and the
 * doubling policy live in one place. Never used on the query path (it allocates).
 */
#ifndef TERN_COMMON_GROW_H
#define TERN_COMMON_GROW_H

#include <stddef.h>

#include "tern/common/compiler.h"

/* First capacity of an empty array: small, because thousands of tiny zones are built one after
 * another, and doubling reaches a million entries in 17 steps. */
#define TERN_GROW_MIN 16

/**
 * Make *p (an array of *cap elements of elem bytes, NULL when *cap is 0) hold at least need
 * elements, doubling from TERN_GROW_MIN. The contents are kept; on failure *p and *cap are
 * unchanged. Returns 0 or TERN_ENOMEM (also when need * elem would overflow).
 */
int tern_grow(void **p, size_t *cap, size_t need, size_t elem) TERN_WUR;

#endif
