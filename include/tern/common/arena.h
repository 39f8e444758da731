/*
 * arena.h — bump allocator for per-generation data (a zone table and everything it points to).
 *
 * Lifecycle: create → many arena_alloc() calls while a table is built (loader thread only) →
 * the table is published and the arena is frozen by convention (nobody allocates from it again)
 * → after the RCU grace period arena_destroy() frees every chunk in one call.
 * Not thread-safe: one builder thread owns an arena while it grows.
 */
#ifndef TERN_COMMON_ARENA_H
#define TERN_COMMON_ARENA_H

#include <stddef.h>

#include "tern/common/compiler.h"

typedef struct arena arena_t;

/** New empty arena; NULL when out of memory. */
arena_t *arena_create(void) TERN_WUR;

/** Free every allocation of the arena and the arena itself. NULL is a no-op. */
void arena_destroy(arena_t *a);

/**
 * Make room for bytes more (in allocations of any sizes, each rounded up to 16) in one chunk of
 * exactly that size, so a builder that knows its total up front wastes nothing: 10,000 tiny zones
 * then cost their data, not a minimum chunk each. 0 or TERN_ENOMEM.
 */
int arena_reserve(arena_t *a, size_t bytes) TERN_WUR;

/** size bytes aligned to 16 (uninitialised); NULL when out of memory. */
void *arena_alloc(arena_t *a, size_t size) TERN_WUR;

/** Like arena_alloc but zeroed. */
void *arena_calloc(arena_t *a, size_t n, size_t size) TERN_WUR;

/** Copy of len bytes of src in the arena; NULL when out of memory. */
void *arena_memdup(arena_t *a, const void *src, size_t len) TERN_WUR;

/** Bytes obtained from the system (chunk sizes), for reporting memory use. */
size_t arena_footprint(const arena_t *a);

#endif
