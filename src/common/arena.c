#include "tern/common/arena.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tern/common/err.h"

/* Chunks grow geometrically from 4 KiB to 1 MiB: a tiny zone (one arena per zone, 10,000 of them
 * in one table) costs a page or two, a million-record zone a few hundred mallocs. */
#define ARENA_CHUNK_MIN (4u << 10)
#define ARENA_CHUNK     (1u << 20)
#define ARENA_ALIGN     16u

/* A chunk this big (a zone of some 30,000 names and up: its whole table is reserved at once) is
 * mapped on its own at a 2 MiB boundary and marked for transparent huge pages. A lookup touches
 * a few random cache lines of the table, and with 4 KiB pages each of them is also a TLB miss —
 * under a hypervisor a two-dimensional page walk, and one that evicts the kernel's own TLB
 * entries for the socket path. With 2 MiB pages the table of a 100,000-name zone needs 6 TLB
 * entries instead of 3,000. Smaller chunks stay with malloc (jemalloc). */
#define ARENA_HUGE_MIN  (4u << 20)
#define ARENA_HUGE_PAGE (2u << 20)

struct chunk {
    struct chunk *next;
    size_t size;
    size_t used;
    size_t mapped; /* bytes mapped with mmap (then munmap), 0 if from malloc */
    /* data follows, aligned */
    max_align_t data[];
};

struct arena {
    struct chunk *head;
    size_t footprint;
};

/* A chunk with room for size bytes of data, not linked anywhere yet. */
static struct chunk *chunk_new(size_t size)
{
    struct chunk *c;
    size_t total = sizeof(*c) + size;
    if (total < ARENA_HUGE_MIN) {
        c = malloc(total);
        if (!c)
            return NULL;
        c->mapped = 0;
    } else {
        /* over-map by one huge page, then unmap what lies outside the aligned run */
        total = (total + 4095) & ~(size_t)4095;
        size_t len = total + ARENA_HUGE_PAGE;
        uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        uint8_t *start =
            (uint8_t *)(((uintptr_t)m + ARENA_HUGE_PAGE - 1) & ~(uintptr_t)(ARENA_HUGE_PAGE - 1));
        if (start > m)
            (void)munmap(m, (size_t)(start - m));
        if (m + len > start + total)
            (void)munmap(start + total, (size_t)(m + len - (start + total)));
        /* best effort: without THP (or with it disabled) the pages are simply small */
        (void)madvise(start, total, MADV_HUGEPAGE);
        c = (struct chunk *)(void *)start;
        c->mapped = total;
    }
    c->size = size;
    c->used = 0;
    return c;
}

static void chunk_free(struct chunk *c)
{
    if (c->mapped)
        (void)munmap(c, c->mapped);
    else
        free(c);
}

arena_t *arena_create(void)
{
    return calloc(1, sizeof(arena_t));
}

void arena_destroy(arena_t *a)
{
    if (!a)
        return;
    struct chunk *c = a->head;
    while (c) {
        struct chunk *next = c->next;
        chunk_free(c);
        c = next;
    }
    free(a);
}

int arena_reserve(arena_t *a, size_t bytes)
{
    struct chunk *c = a->head;
    bytes = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (bytes == 0 || (c && c->size - c->used >= bytes))
        return 0;
    struct chunk *n = chunk_new(bytes);
    if (!n)
        return TERN_ENOMEM;
    n->next = c;
    a->head = n;
    a->footprint += sizeof(*n) + bytes;
    return 0;
}

/* size bytes (rounded) from a, and the chunk they came from. */
static void *alloc_from(arena_t *a, size_t size, const struct chunk **from)
{
    size = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (size == 0)
        size = ARENA_ALIGN;
    struct chunk *c = a->head;
    if (!c || c->size - c->used < size) {
        /* A big object gets a chunk of its own, placed behind the current one so the
         * current chunk's free space is not abandoned. */
        size_t grow = a->footprint < ARENA_CHUNK_MIN ? ARENA_CHUNK_MIN : a->footprint;
        if (grow > ARENA_CHUNK)
            grow = ARENA_CHUNK;
        bool own = size > grow / 4;
        size_t csize = own ? size : grow;
        struct chunk *n = chunk_new(csize);
        if (!n)
            return NULL;
        a->footprint += sizeof(*n) + csize;
        if (c && own) {
            n->next = c->next;
            c->next = n;
        } else {
            n->next = c;
            a->head = n;
        }
        c = n;
    }
    void *p = (uint8_t *)c->data + c->used;
    c->used += size;
    *from = c;
    return p;
}

void *arena_alloc(arena_t *a, size_t size)
{
    const struct chunk *c;
    return alloc_from(a, size, &c);
}

void *arena_calloc(arena_t *a, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    const struct chunk *c;
    void *p = alloc_from(a, n * size, &c);
    /* A mapped chunk is zero from the kernel and its bytes are handed out once: no memset, so
     * its pages stay untouched (not resident) until the builder fills them. Loading a large
     * zone then never holds the whole new table and the builder's records at once. */
    if (p && !c->mapped)
        memset(p, 0, n * size);
    return p;
}

void *arena_memdup(arena_t *a, const void *src, size_t len)
{
    void *p = arena_alloc(a, len);
    if (p && len)
        memcpy(p, src, len);
    return p;
}

size_t arena_footprint(const arena_t *a)
{
    return a->footprint;
}
