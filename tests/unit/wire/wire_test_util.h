/* wire_test_util.h — helpers shared by the wire unit tests. */
#ifndef TERN_TESTS_WIRE_TEST_UTIL_H
#define TERN_TESTS_WIRE_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* "www.Example.com" -> wire form (no escapes; test names only). Returns the wire length. */
static inline size_t to_wire(const char *s, uint8_t *out)
{
    size_t o = 0;
    while (*s) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        out[o++] = (uint8_t)l;
        memcpy(out + o, s, l);
        o += l;
        s += l;
        if (*s == '.')
            s++;
    }
    out[o++] = 0;
    return o;
}

#endif
