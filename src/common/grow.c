/*
 * grow.c — see grow.h.
 */
#include "tern/common/grow.h"

#include <stdint.h>
#include <stdlib.h>

#include "tern/common/err.h"

int tern_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    if (elem == 0 || need > SIZE_MAX / 2 / elem)
        return TERN_ENOMEM;
    size_t ncap = *cap ? *cap : TERN_GROW_MIN;
    while (ncap < need)
        ncap *= 2;
    void *n = realloc(*p, ncap * elem);
    if (!n)
        return TERN_ENOMEM;
    *p = n;
    *cap = ncap;
    return 0;
}
