/*
 * byteorder.h — big-endian (network order) reads and writes of 16- and 32-bit fields, the one
 * copy every wire-format reader and writer uses (DNS headers, RR fields, TSIG, transfers).
 * Byte by byte, so any alignment is fine; the compiler turns each into one load/store + bswap.
 */
#ifndef TERN_COMMON_BYTEORDER_H
#define TERN_COMMON_BYTEORDER_H

#include <stdint.h>

static inline uint16_t tern_rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t tern_rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void tern_wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void tern_wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

#endif
