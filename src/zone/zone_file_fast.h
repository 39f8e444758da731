/*
 * zone_file_fast.h — the master-file reader's fast path (private to src/zone).
 *
 * Owner: zone_file.c, which tries it on every entry before ldns. Pure: no allocation, no state
 * beyond its arguments; any thread.
 *
 * Why: ldns_rr_new_frm_str() allocates a dozen buffers and tokenises byte by byte for every
 * record: on a 1.9M-record zone that is ~40 % of the load (perf, bench/load.py --zone 1m-rich).
 * Nearly every record of a real zone is one of a handful of types written plainly. Those are
 * parsed here straight into wire form; everything else — another type, an escape, a TTL with
 * units, a class other than IN, anything unusual — is left to ldns, which stays the judge of
 * what the file means. The fast path must never accept an entry ldns refuses nor read one
 * differently: tests/unit/zone/test_zone_file_fast.c compares the two on every entry of its
 * corpus.
 */
#ifndef TERN_ZONE_FILE_FAST_H
#define TERN_ZONE_FILE_FAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/wire/dname.h"

/* The largest RDATA the fast path writes: a TXT of several strings; a longer one goes to ldns. */
#define ZONE_FILE_FAST_RDMAX 4096

/* One record read by the fast path. */
typedef struct zone_file_fast_rec {
    uint8_t owner[DNAME_MAXLEN]; /* wire, as written (case kept) */
    bool owner_given;            /* false: the entry began with a blank (the previous owner) */
    uint16_t type;
    uint32_t ttl;
    uint16_t rdlen;
    uint8_t rdata[ZONE_FILE_FAST_RDMAX];
} zone_file_fast_rec_t;

/**
 * Name token s (n bytes) of an entry into out (room for DNAME_MAXLEN) as ldns reads an owner:
 * "@" is origin (wire), a final dot makes it absolute, any other is completed by origin; RFC 1035
 * escapes as dname_from_str(). The wire length, or 0 when it does not parse here.
 */
size_t zone_file_name(const char *s, size_t n, const uint8_t *origin, uint8_t *out);

/**
 * Entry e (one joined entry of a master file: comments gone, parentheses blanked) read as ldns
 * would read it with origin (wire), prev (the previous record's owner, wire, or NULL) and
 * default TTL def (RFC 1035 §5.1 $TTL). True with *r filled when it is a plain A, AAAA, NS,
 * CNAME, PTR, MX, SRV or TXT record of class IN; false when ldns must read it (then *r is
 * undefined).
 */
bool zone_file_fast(const char *e, const uint8_t *origin, const uint8_t *prev, uint32_t def,
                    zone_file_fast_rec_t *r);

#endif
