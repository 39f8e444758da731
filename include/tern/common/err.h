/*
 * err.h — tern's one error vocabulary.
 *
 * Fallible functions return int: 0 on success or a negative TERN_E* code. Where an errno value
 * fits, the code is that errno negated (TERN_ENOMEM == -ENOMEM), so system errors pass through
 * unchanged. Constructors return a pointer or NULL. tern_strerror() is thread-safe and returns
 * static text.
 */
#ifndef TERN_COMMON_ERR_H
#define TERN_COMMON_ERR_H

#include <errno.h>
#include <stddef.h>

#include "tern/common/compiler.h"

enum {
    TERN_EOK = 0,
    TERN_ENOMEM = -ENOMEM,
    TERN_EINVAL = -EINVAL,
    TERN_ENOSPC = -ENOSPC,
    TERN_ENOENT = -ENOENT,
    TERN_EEXIST = -EEXIST,
    TERN_ERANGE = -ERANGE,
    TERN_ENOTSUP = -ENOTSUP,
    TERN_EIO = -EIO,               /* a write to a log or socket failed */
    TERN_EAGAIN = -EAGAIN,         /* would block: refused instead (a full queue) */
    TERN_ETIMEDOUT = -ETIMEDOUT,   /* a peer did not answer in time (zone transfers) */
    TERN_ECONNRESET = -ECONNRESET, /* a peer closed the connection early */
    TERN_EPROTO = -EPROTO,         /* a peer broke the protocol (a bad answer, rcode, serial) */
    TERN_EACCES = -EACCES,         /* refused by a key or an access list (TSIG) */
    /* tern's own codes live below every errno value */
    TERN_EBASE = -1000,
    TERN_EMALF = -1001,    /* malformed wire data */
    TERN_ESYNTAX = -1002,  /* zone or config syntax error */
    TERN_ENOSOA = -1003,   /* zone without SOA at its apex */
    TERN_ENONS = -1004,    /* zone without NS at its apex */
    TERN_ECNAME = -1005,   /* CNAME beside other data */
    TERN_EOUTZONE = -1006, /* record outside the zone */
    TERN_ETRUNC = -1007,   /* data did not fit its buffer */
    TERN_EDUPZONE = -1008, /* the same zone given twice */
    TERN_ELIMIT = -1009,   /* a configured limit was exceeded */
};

/** Text for a TERN_E* code or negated errno; never NULL. */
const char *tern_strerror(int code);

/** Format a message into the caller's err buffer (errlen bytes); err NULL or errlen 0: nothing. */
void tern_set_err(char *err, size_t errlen, const char *fmt, ...) TERN_PRINTF(3, 4);

#endif
