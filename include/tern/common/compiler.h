/*
 * compiler.h — portable attributes and branch hints used across tern.
 *
 * Header-only; no state. Every fallible function in tern carries TERN_WUR so a
 * forgotten error check fails the -Werror build.
 */
#ifndef TERN_COMMON_COMPILER_H
#define TERN_COMMON_COMPILER_H

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define TERN_WUR          __attribute__((warn_unused_result))
#define TERN_UNUSED       __attribute__((unused))
#define TERN_NORETURN     __attribute__((noreturn))
#define TERN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define TERN_CACHELINE    64
#define TERN_ALIGNED(n)   __attribute__((aligned(n)))

#define TERN_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
