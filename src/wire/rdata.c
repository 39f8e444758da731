/*
 * rdata.c — see rdata.h. The table lists every type whose RDATA holds domain names at fixed
 * places; NAPTR (a name after variable-length strings) is not among them, and neither are
 * RRSIG and NSEC, whose names RFC 6840 §5.1 took out of the canonical lowercasing.
 */
#include "tern/wire/rdata.h"

#include <string.h>

#include "tern/common/err.h"

#include "tern/wire/dname.h"

bool wire_rdata_layout(uint16_t type, wire_rdata_layout_t *l)
{
    switch (type) {
    case 2:  /* NS */
    case 3:  /* MD */
    case 4:  /* MF */
    case 5:  /* CNAME */
    case 7:  /* MB */
    case 8:  /* MG */
    case 9:  /* MR */
    case 12: /* PTR */
        *l = (wire_rdata_layout_t){0, 1, 0, true};
        return true;
    case 6: /* SOA: mname, rname, serial refresh retry expire minimum */
        *l = (wire_rdata_layout_t){0, 2, 20, true};
        return true;
    case 14: /* MINFO: rmailbx, emailbx */
        *l = (wire_rdata_layout_t){0, 2, 0, true};
        return true;
    case 15: /* MX: preference, exchange */
        *l = (wire_rdata_layout_t){2, 1, 0, true};
        return true;
    case 17: /* RP: mbox, txt */
        *l = (wire_rdata_layout_t){0, 2, 0, false};
        return true;
    case 18: /* AFSDB: subtype, hostname */
    case 21: /* RT: preference, intermediate host */
    case 36: /* KX: preference, exchanger */
        *l = (wire_rdata_layout_t){2, 1, 0, false};
        return true;
    case 26: /* PX: preference, map822, mapx400 */
        *l = (wire_rdata_layout_t){2, 2, 0, false};
        return true;
    case 33: /* SRV: priority, weight, port, target */
        *l = (wire_rdata_layout_t){6, 1, 0, false};
        return true;
    case 39: /* DNAME (RFC 6672 §2.5: never compressed) */
        *l = (wire_rdata_layout_t){0, 1, 0, false};
        return true;
    default:
        return false;
    }
}

void wire_rdata_canon(uint16_t type, const uint8_t *rd, size_t len, uint8_t *out)
{
    memcpy(out, rd, len);
    wire_rdata_layout_t l;
    if (!wire_rdata_layout(type, &l) || len < (size_t)l.head + l.tail)
        return;
    /* check the whole layout before touching a byte: a bad RDATA stays a verbatim copy */
    size_t p = l.head;
    for (unsigned k = 0; k < l.names; k++) {
        int n = dname_check(rd + p, len - p);
        if (n < 0)
            return;
        p += (size_t)n;
    }
    if (len - p != l.tail)
        return;
    p = l.head;
    for (unsigned k = 0; k < l.names; k++)
        p += dname_lower(out + p, rd + p);
}

int wire_rdata_unpack(const uint8_t *msg, size_t len, size_t start, uint16_t rdlen, uint16_t type,
                      uint8_t *out, struct dname_unpack_err *err)
{
    wire_rdata_layout_t l;
    size_t end = start + rdlen;
    if (!wire_rdata_layout(type, &l)) {
        memcpy(out, msg + start, rdlen);
        return rdlen;
    }
    err->fault = DNAME_FAULT_NONE;
    if (rdlen < l.head)
        return TERN_EMALF;
    memcpy(out, msg + start, l.head);
    size_t p = start + l.head, o = l.head;
    for (unsigned k = 0; k < l.names; k++) {
        int n = dname_unpack(msg, len, end, &p, out + o, err);
        if (n < 0)
            return n;
        o += (size_t)n;
    }
    /* at most 6 + 2 * 255 + 20 bytes: always room */
    if (end - p != l.tail) {
        err->fault = DNAME_FAULT_NONE;
        return TERN_EMALF;
    }
    memcpy(out + o, msg + p, l.tail);
    return (int)(o + l.tail);
}
