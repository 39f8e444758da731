#include "tern/common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *tern_strerror(int code)
{
    switch (code) {
    case TERN_EOK:
        return "success";
    case TERN_EMALF:
        return "malformed data";
    case TERN_ESYNTAX:
        return "syntax error";
    case TERN_ENOSOA:
        return "no SOA record at the zone apex";
    case TERN_ENONS:
        return "no NS record at the zone apex";
    case TERN_ECNAME:
        return "CNAME beside other data";
    case TERN_EOUTZONE:
        return "record outside the zone";
    case TERN_ETRUNC:
        return "does not fit";
    case TERN_EDUPZONE:
        return "zone given twice";
    case TERN_ELIMIT:
        return "limit exceeded";
    case TERN_ENOTSUP:
        return "not supported by this build";
    default:
        break;
    }
    if (code < 0 && code > TERN_EBASE) {
        /* strerror() of glibc returns static text for known values; thread-safe in practice
         * for valid codes, and we only pass negated errno values here. */
        return strerror(-code);
    }
    return "unknown error";
}

void tern_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
