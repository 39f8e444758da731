/*
 * clock.h — the monotonic clock in the units tern uses. clock_gettime(CLOCK_MONOTONIC) is a vDSO
 * call (no syscall) with the TSC clocksource, so the workers may read it once per wakeup.
 */
#ifndef TERN_COMMON_CLOCK_H
#define TERN_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t tern_monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int64_t tern_monotonic_ms(void)
{
    return tern_monotonic_us() / 1000;
}

#endif
