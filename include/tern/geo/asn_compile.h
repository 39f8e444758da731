/*
 * asn_compile.h — the ASN table compiler: IP-to-ASN data (text files or a MaxMind ASN database)
 * in, one compiled table file out (the layout of tern/geo/asn_table.h, which maps and looks it
 * up).
 *
 * Owns: nothing between calls. A compile holds every input range in memory (about 40 bytes
 * each: tens of MB for the full data sets), builds the file in one buffer, writes it to a
 * temporary file beside the output and renames it over the output, so a reader mapping the old
 * file (ternd) never sees half a file.
 *
 * Lifecycle: offline — `ternctl asn compile` — or on the loader thread, which keeps a table
 * compiled from the configured MaxMind ASN database (asn_db) with asn_compile_cached(); no state
 * is kept between calls; the result is opened with asn_table_open().
 * Threading: no shared state: any thread may compile. It allocates and does file I/O, so never
 * on a worker. Concurrent compiles to one output (ternctl and ternd, say) each write their own
 * temporary file; the last rename wins, whole.
 *
 * Inputs, each recognised by its content (never its name): a file with the MaxMind DB metadata
 * marker ("\xab\xcd\xefMaxMind.com") in its last 128 KiB is a MaxMind DB, any other text file is
 * read line by line, binary data without the marker (a truncated .mmdb) is an error.
 * Text (format detected per line; blank lines and lines starting with '#' are skipped):
 *   - iptoasn.com TSV:   start \t end \t asn \t country \t name   (country, name optional)
 *   - ip-location-db CSV: start,end,asn,name   — exactly 4 fields; a field may be "quoted",
 *     with "" as an escaped quote, so names can contain commas.
 * A line containing a tab is TSV, otherwise CSV. start/end are IPv4 or IPv6 addresses of the
 * same family, start <= end; asn is a decimal u32 (an "AS" prefix is accepted). ASN 0 means
 * "not routed" and is kept as a range (it can punch a hole into an enclosing range).
 * MaxMind DB (GeoLite2-ASN.mmdb; ip-location-db's asn mmdb packages — asn, dbip-asn,
 * geolite2-asn, iptoasn-asn, iplocate-asn — have the same layout): each record is a map with
 * autonomous_system_number (an unsigned integer of at most 32 bits) and, optionally,
 * autonomous_system_organization (a string, kept as the name; there is no country). The whole
 * search tree is walked with libmaxminddb; every network is one range. In an IPv6 tree the IPv4
 * ranges are read once: from the IPv4 subtree at ::/96 (where libmaxminddb answers IPv4 lookups);
 * records pointing back into it — MaxMind's aliases at ::ffff:0:0/96, 2001::/32 (Teredo) and
 * 2002::/16 (6to4) — are skipped, so those IPv6 ranges map to no ASN; a file that stores IPv4
 * only as IPv4-mapped networks (::ffff:a.b.c.d, nothing under ::/96) has those read as IPv4.
 * A record without autonomous_system_number, with a value of another type or above 2^32 - 1, or
 * that does not decode, fails the compile with "file: network N/L: message", as a bad text line
 * does with "file:line: message".
 *
 * Source records and the cache: a table compiled from exactly one MaxMind DB ends with a record
 * of that file (asn_table.h: its size and tern_hash64() of its bytes, its device, inode, mtime and
 * ctime, and ASN_COMPILE_REVISION). asn_compile_cached() reuses such a table while it matches the
 * database — by identity and times when the file is the one compiled, else by size and content
 * hash (a touched or copied file) — and compiles it again otherwise. ternd keeps its cache at
 * asn_table when the config sets that too, else beside the database as "<asn_db>.tern-asn"
 * (ASN_COMPILE_CACHE_SUFFIX); `ternctl asn compile -o <that path> <asn_db>` writes the same
 * file, so a table compiled where ternd may not write is reused as it is.
 *
 * Overlaps (deterministic, independent of input order): every address belongs to the covering
 * range with the greatest start; among covering ranges with the same start, the narrower (smaller
 * end) wins; among identical ranges, the one read last wins (later line, later file). Addresses
 * covered by no range map to 0. Adjacent ranges with the same ASN are merged.
 * Names: per ASN, the first non-empty country and the first non-empty name seen are kept.
 */
#ifndef TERN_GEO_ASN_COMPILE_H
#define TERN_GEO_ASN_COMPILE_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/common/compiler.h"
#include "tern/geo/asn_table.h"

/* The compiler's revision, kept in source records: bump it when the compiler writes a different
 * table from the same input (a fix in how a MaxMind DB is read, say), so caches are rebuilt. */
#define ASN_COMPILE_REVISION 1u

/* The default cache of a MaxMind ASN database: this suffix appended to its path. */
#define ASN_COMPILE_CACHE_SUFFIX ".tern-asn"

/** What a compile saw and produced (all counts). */
typedef struct asn_compile_stats {
    size_t lines;     /* text data lines parsed (comments and blanks excluded) */
    size_t networks;  /* MaxMind DB networks (data records of the search tree) read */
    size_t aliases;   /* MaxMind DB subtrees and networks skipped as copies of the IPv4 data */
    size_t ranges_v4; /* input ranges per family */
    size_t ranges_v6;
    size_t overlaps;   /* input ranges that overlapped a range still open when they started */
    size_t entries_v4; /* entries written (after overlap resolution, gap filling and merging) */
    size_t entries_v6;
    size_t names; /* ASNs with a country or a name */
} asn_compile_stats_t;

/**
 * Compile n inputs (paths, read in order) into one table file at out_path, written to a
 * temporary file beside it ("<out_path>.tmp.<pid>.<n>") then renamed, so a reader never sees
 * half a file. With one input that is a MaxMind DB, the table ends with its source record.
 * Returns 0; TERN_ESYNTAX with "file:line: message" in err for a bad line (invalid address,
 * mixed families, start > end, bad ASN, wrong field count); TERN_EMALF with "file: network N/L:
 * message" for a bad MaxMind DB record, "file: corrupt search tree ..." or "file: not a valid
 * MaxMind DB file ..." for a damaged database; a negated errno for I/O (message names the path);
 * TERN_ENOMEM. err may be NULL. stats (may be NULL) is filled on success.
 */
int asn_compile(const char *const *inputs, size_t n, const char *out_path,
                asn_compile_stats_t *stats, char *err, size_t errlen) TERN_WUR;

/**
 * Make cache_path hold the table compiled from the MaxMind ASN database at mmdb_path: reuse it
 * when it is a valid table whose source record matches the database (see above), else compile
 * the database (read once, mapped: the record describes the very bytes compiled) and rename the
 * result over cache_path. *rebuilt tells which; stats (may be NULL) holds the compile's counts,
 * zeros when reused. Returns 0, or what asn_compile() returns for the database (a damaged
 * database leaves cache_path as it was), with "cannot write the compiled table ... set
 * asn_table: ... or ... ternctl asn compile ..." in err when its directory is not writable.
 */
int asn_compile_cached(const char *mmdb_path, const char *cache_path, asn_compile_stats_t *stats,
                       bool *rebuilt, char *err, size_t errlen) TERN_WUR;

/**
 * Whether t (a mapped table) was compiled from the file now at mmdb_path, judged by its source
 * record's identity and times against a stat() of the file (no read): the loader's check that
 * its mapping is current. false for a table without a record, or from another compiler revision.
 */
bool asn_compile_source_unchanged(const asn_table_t *t, const char *mmdb_path);

/** "<mmdb_path>.tern-asn", malloc'd (the caller frees it); NULL when out of memory. */
char *asn_compile_default_cache(const char *mmdb_path);

#endif
