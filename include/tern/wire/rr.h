/*
 * rr.h — the one set of DNS constants for resource records: classes and types (IANA "Domain
 * Name System (DNS) Parameters"). Every module names a type as WIRE_T_*; no file keeps a copy.
 *
 * Header-only constants, no state.
 */
#ifndef TERN_WIRE_RR_H
#define TERN_WIRE_RR_H

/* RFC 1035 §3.2.1, RFC 2181 §8: a TTL is a 31-bit value; zone files, redins JSON and the config
 * refuse larger ones. */
#define WIRE_TTL_MAX 0x7fffffffu

enum wire_class {
    WIRE_CLASS_IN = 1,
    WIRE_CLASS_CH = 3,
    WIRE_CLASS_NONE = 254,
    WIRE_CLASS_ANY = 255
};

enum wire_type {
    WIRE_T_A = 1,
    WIRE_T_NS = 2,
    WIRE_T_CNAME = 5,
    WIRE_T_SOA = 6,
    WIRE_T_PTR = 12,
    WIRE_T_HINFO = 13,
    WIRE_T_MX = 15,
    WIRE_T_TXT = 16,
    WIRE_T_AAAA = 28,
    WIRE_T_SRV = 33,
    WIRE_T_NAPTR = 35,
    WIRE_T_DNAME = 39,
    WIRE_T_OPT = 41,
    WIRE_T_DS = 43,
    WIRE_T_RRSIG = 46,
    WIRE_T_NSEC = 47,
    WIRE_T_DNSKEY = 48,
    WIRE_T_CDS = 59,     /* RFC 7344 */
    WIRE_T_CDNSKEY = 60, /* RFC 7344 */
    WIRE_T_NSEC3 = 50,
    WIRE_T_NSEC3PARAM = 51,
    WIRE_T_TLSA = 52,
    WIRE_T_SVCB = 64,
    WIRE_T_HTTPS = 65,
    WIRE_T_TSIG = 250,
    WIRE_T_IXFR = 251,
    WIRE_T_AXFR = 252,
    WIRE_T_MAILB = 253,
    WIRE_T_MAILA = 254,
    WIRE_T_ANY = 255,
    WIRE_T_CAA = 257,
    /* ANAME (draft-ietf-dnsop-aname, the type code it asked for in the private range): an
     * address alias, RDATA one uncompressed name. Zone files may also write it ALIAS
     * (PowerDNS's name for the same thing); tern answers A/AAAA at its owner from its target. */
    WIRE_T_ANAME = 65305,
};

/* RFC 6895 §3.1: types 128-255 are meta and question-only types (TKEY, TSIG, IXFR, AXFR, MAILB,
 * MAILA, ANY); with 0 and OPT (41) they are never zone data. */
#define WIRE_T_META_MIN 128u
#define WIRE_T_META_MAX 255u

#endif
