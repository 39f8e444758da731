/*
 * asn_collect.h — private to src/geo: the ASN compiler's input stage. A collection holds the
 * ranges and per-ASN names read so far, in input order; the readers add to it — asn_text.c
 * (iptoasn TSV, ip-location-db CSV) and asn_mmdb.c (MaxMind DB) — and asn_compile.c resolves
 * the overlaps and writes the table (tern/geo/asn_compile.h has the rules).
 *
 * Owner: one compile (a local of asn_compile.c), built by the readers, then read by the output
 * passes, then asn_collect_free(). Single-threaded; it allocates freely (offline or the loader
 * thread, never a worker).
 */
#ifndef TERN_GEO_ASN_COLLECT_H
#define TERN_GEO_ASN_COLLECT_H

#include <maxminddb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/geo/asn_compile.h"

__extension__ typedef unsigned __int128 u128; /* an address of either family, host order */

struct asn_range {
    u128 start, end; /* inclusive */
    size_t seq;      /* input order */
    uint32_t asn;
};

struct asn_ranges {
    struct asn_range *v;
    size_t n, cap;
};

struct asn_name {
    uint32_t asn;
    size_t seq;
    size_t cc_off, cc_len, name_off, name_len; /* into asn_collect_t.str */
};

typedef struct asn_collect {
    struct asn_ranges r4, r6;
    struct asn_name *names;
    size_t n_names, cap_names;
    char *str; /* country and name bytes, not NUL-terminated */
    size_t str_len, str_cap;
    size_t seq; /* items added so far: the input order the overlap rule breaks ties by */
} asn_collect_t;

/**
 * Add one input item: the range [start, end] of IPv4 (v6 false) or IPv6 addresses mapping to
 * asn, with its country and name (either may be NULL or of length 0; both are cut to the u16
 * length field). A name without an ASN (0) is not kept. Returns 0 or TERN_ENOMEM.
 */
int asn_collect_add(asn_collect_t *c, bool v6, u128 start, u128 end, uint32_t asn, const char *cc,
                    size_t cc_len, const char *name, size_t name_len) TERN_WUR;

/** Free everything a collection holds (it is zeroed, and may be reused). */
void asn_collect_free(asn_collect_t *c);

/**
 * asn_text.c: add every line of an iptoasn TSV / ip-location-db CSV file (format per line, see
 * asn_compile.h); st->lines counts the data lines. 0; TERN_ESYNTAX with "path:line: message" for
 * a bad line; a negated errno for I/O; TERN_ENOMEM.
 */
int asn_text_read(asn_collect_t *c, const char *path, asn_compile_stats_t *st, char *err,
                  size_t errlen) TERN_WUR;

/**
 * asn_mmdb.c: what the file at path is, by its content: *is_mmdb true for a MaxMind DB (its
 * metadata marker is in the last 128 KiB), false for text. 0; a negated errno when it cannot be
 * read, TERN_EMALF for binary data without the marker (a truncated .mmdb, say); err says which.
 */
int asn_mmdb_sniff(const char *path, bool *is_mmdb, char *err, size_t errlen) TERN_WUR;

/**
 * asn_mmdb.c: MMDB_open(path) in MMDB_MODE_MMAP, with a message naming the path and what is
 * wrong (not a regular file, I/O, not a valid MaxMind DB, an ip_version other than 4 or 6).
 * 0, or a negative code; on success the caller MMDB_close()s db.
 */
int asn_mmdb_open(const char *path, MMDB_s *db, char *err, size_t errlen) TERN_WUR;

/**
 * asn_mmdb.c: add every network of db's search tree (see asn_compile.h for what is read and how
 * IPv4 inside an IPv6 tree is mapped); st->networks and st->aliases count what was read and
 * skipped. 0; TERN_EMALF with "path: network N/L: message" for a bad record or "path: corrupt
 * search tree ..."; TERN_ENOMEM.
 */
int asn_mmdb_read(asn_collect_t *c, const MMDB_s *db, const char *path, asn_compile_stats_t *st,
                  char *err, size_t errlen) TERN_WUR;

/**
 * asn_compile.c: resolve the overlaps of what c holds and lay the table out (the layout of
 * tern/geo/asn_table.h, no source record) in one malloc'd buffer: *out (the caller frees it),
 * *len bytes. For compilers of other range tables (latency_map.c) that build the collection
 * themselves. name labels messages. st's range and entry counts are filled. 0, TERN_ENOMEM or
 * TERN_ERANGE ("table too large").
 */
int asn_compile_build(asn_collect_t *c, const char *name, uint8_t **out, size_t *len,
                      asn_compile_stats_t *st, char *err, size_t errlen) TERN_WUR;

#endif
