#include "tern/common/arena.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"

/* Chunks grow geometrically from 4 KiB to 1 MiB: a tiny zone (one arena per zone, 10,000 of them
 * in one table) costs a page or two, a million-record zone a few hundred mallocs. */
#define ARENA_CHUNK_MIN (4u << 10)
#define ARENA_CHUNK     (1u << 20)
#define ARENA_ALIGN     16u

struct chunk {
    struct chunk *next;
    size_t size;
    size_t used;
    /* data follows, aligned */
    max_align_t data[];
};

struct arena {
    struct chunk *head;
    size_t footprint;
};

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
        free(c);
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
    struct chunk *n = malloc(sizeof(*n) + bytes);
    if (!n)
        return TERN_ENOMEM;
    n->size = bytes;
    n->used = 0;
    n->next = c;
    a->head = n;
    a->footprint += sizeof(*n) + bytes;
    return 0;
}

void *arena_alloc(arena_t *a, size_t size)
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
        struct chunk *n = malloc(sizeof(*n) + csize);
        if (!n)
            return NULL;
        n->size = csize;
        n->used = 0;
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
    return p;
}

void *arena_calloc(arena_t *a, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = arena_alloc(a, n * size);
    if (p)
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
