/*
 * mem.c — see mem.h. Three builds: jemalloc (mallctl), ASan (sanitizer hooks count calls), and
 * anything else (no arenas, no counters).
 */
#include "tern/common/mem.h"

#include <stdio.h>

#include "tern/common/err.h"

#if defined(TERN_JEMALLOC)
#include <jemalloc/jemalloc.h>

/* jemalloc reads this at start. ldns allocates its token buffers (up to 64 KiB) for every record
 * it parses; above jemalloc's default thread-cache limit (32 KiB) each of those went to the arena
 * and its mutex, twice per record: the 1,000,000-name zone loaded in 4.7 s, with this in 3.0 s.
 * The workers run with their thread cache off (worker.c), so this touches loading only. */
const char *malloc_conf = "tcache_max:131072";

const char *mem_allocator(void)
{
    static char name[96];
    const char *v = NULL;
    size_t sz = sizeof(v);
    if (name[0] == '\0')
        snprintf(name, sizeof(name), "jemalloc %s",
                 mallctl("version", &v, &sz, NULL, 0) == 0 && v ? v : "?");
    return name;
}

unsigned mem_arena_create(void)
{
    unsigned idx;
    size_t sz = sizeof(idx);
    if (mallctl("arenas.create", &idx, &sz, NULL, 0) != 0)
        return MEM_NO_ARENA;
    return idx;
}

unsigned mem_thread_arena(void)
{
    unsigned idx;
    size_t sz = sizeof(idx);
    if (mallctl("thread.arena", &idx, &sz, NULL, 0) != 0)
        return MEM_NO_ARENA;
    return idx;
}

int mem_thread_bind(unsigned arena)
{
    if (arena == MEM_NO_ARENA)
        return 0;
    int e = mallctl("thread.arena", NULL, NULL, &arena, sizeof(arena));
    return e ? -e : 0;
}

void mem_thread_tcache(bool on)
{
    /* Flush first so objects cached so far go back to their arenas rather than being held. */
    if (!on)
        (void)mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    (void)mallctl("thread.tcache.enabled", NULL, NULL, &on, sizeof(on));
}

void mem_arena_purge(unsigned arena)
{
    char name[64];
    if (arena == MEM_NO_ARENA)
        return;
    snprintf(name, sizeof(name), "arena.%u.purge", arena);
    (void)mallctl(name, NULL, NULL, NULL, 0);
}

int mem_thread_counters(const uint64_t **alloc, const uint64_t **dealloc)
{
    uint64_t *a, *d;
    size_t sz = sizeof(a);
    if (mallctl("thread.allocatedp", &a, &sz, NULL, 0) != 0 ||
        mallctl("thread.deallocatedp", &d, &sz, NULL, 0) != 0)
        return TERN_ENOTSUP;
    *alloc = a;
    *dealloc = d;
    return 0;
}

#else /* no jemalloc */

#if defined(__SANITIZE_ADDRESS__)
#define TERN_MEM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TERN_MEM_ASAN 1
#endif
#endif

unsigned mem_arena_create(void)
{
    return MEM_NO_ARENA;
}

unsigned mem_thread_arena(void)
{
    return MEM_NO_ARENA;
}

int mem_thread_bind(unsigned arena)
{
    (void)arena;
    return 0;
}

void mem_thread_tcache(bool on)
{
    (void)on;
}

void mem_arena_purge(unsigned arena)
{
    (void)arena;
}

#if defined(TERN_MEM_ASAN)
/* From <sanitizer/allocator_interface.h>, which clang ships and gcc does not; both runtimes
 * export the function. */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));

static __thread uint64_t tls_allocs, tls_frees;

static void on_malloc(const volatile void *p, size_t n)
{
    (void)p;
    (void)n;
    __atomic_store_n(&tls_allocs, tls_allocs + 1, __ATOMIC_RELAXED);
}

static void on_free(const volatile void *p)
{
    (void)p;
    __atomic_store_n(&tls_frees, tls_frees + 1, __ATOMIC_RELAXED);
}

/* Installed before main(): every thread's allocations are counted from the start. */
__attribute__((constructor)) static void install_hooks(void)
{
    __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}

const char *mem_allocator(void)
{
    return "AddressSanitizer";
}

int mem_thread_counters(const uint64_t **alloc, const uint64_t **dealloc)
{
    *alloc = &tls_allocs;
    *dealloc = &tls_frees;
    return 0;
}
#else
const char *mem_allocator(void)
{
    return "libc";
}

int mem_thread_counters(const uint64_t **alloc, const uint64_t **dealloc)
{
    (void)alloc;
    (void)dealloc;
    return TERN_ENOTSUP;
}
#endif

#endif
