/*
 * mem.h — jemalloc arenas and per-thread allocation counters, behind one small interface.
 *
 * Each worker gets its own arena (arenas.create), and its long-lived buffers are allocated from
 * it; the loader thread builds every zone table in an arena of its own, so a reload's churn never
 * fragments the workers' memory and freeing an old table returns whole pages (mem_arena_purge).
 *
 * tcache: workers run with the thread cache off — they allocate nothing per query, so a cache
 * would only hold memory; the loader keeps it on, because ldns allocates and frees millions of
 * small objects while parsing and the cache makes each of those a few instructions.
 *
 * Builds without jemalloc (the sanitizer builds: ASan and TSan bring their own allocator) keep the
 * same calls: arenas become no-ops, and under ASan the per-thread counters come from the
 * sanitizer's malloc/free hooks instead, so the zero-allocation test runs in both builds.
 */
#ifndef TERN_COMMON_MEM_H
#define TERN_COMMON_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"

#define MEM_NO_ARENA UINT32_MAX

/** The allocator in use, e.g. "jemalloc 5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c". */
const char *mem_allocator(void);

/** A new arena index, or MEM_NO_ARENA without jemalloc or on failure. */
unsigned mem_arena_create(void);

/** The calling thread's arena (MEM_NO_ARENA without jemalloc). */
unsigned mem_thread_arena(void);

/** Make the calling thread allocate from arena (no-op for MEM_NO_ARENA). 0 or TERN_E*. */
int mem_thread_bind(unsigned arena) TERN_WUR;

/** Turn the calling thread's cache on or off (no-op without jemalloc). */
void mem_thread_tcache(bool on);

/** Return an arena's unused dirty pages to the kernel now (after freeing a large table). */
void mem_arena_purge(unsigned arena);

/**
 * Pointers to the calling thread's monotonic allocation and deallocation counters (bytes with
 * jemalloc's thread.allocatedp, calls under ASan). Another thread may read them (relaxed) while
 * this thread lives. TERN_ENOTSUP when the build has no way to count.
 */
int mem_thread_counters(const uint64_t **alloc, const uint64_t **dealloc) TERN_WUR;

#endif
