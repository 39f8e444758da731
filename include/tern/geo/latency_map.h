/*
 * latency_map.h — the operator's latency map: client network → measured latency per record group
 * (PoP), compiled into an mmapped range table and looked up per query by geo_filter "latency"
 * (src/answer/steer_latency.c).
 *
 * Text, one measurement a line: "<network>/<len> <group> <ms>" (IPv4 or IPv6; fields separated
 * by spaces or tabs; '#' starts a comment, to the end of the line; blank lines are skipped), e.g.
 * "198.51.100.0/24 fra1 23". A network may have several lines, one per group; overlapping
 * networks are fine and the most specific one that holds the client wins (as in the ASN table):
 * its lines, not a merge with the enclosing network's. Errors name "<source>:<line>:" and what
 * is wrong: a bad network, host bits set, a length out of range, a group name that is not 1..63
 * of [A-Za-z0-9_-] (tern/geo/latency_group.h), ms not an integer 0..60000, the same network and
 * group twice, two group names with one id, more than LATENCY_MAP_GROUPS_MAX groups for one
 * network.
 *
 * Compiled form: an ASN table (tern/geo/asn_table.h: the same compiler resolves the overlaps
 * and writes the B+ trees, the same reader maps and looks it up) whose "ASN" is an entry number
 * and whose "name" of entry k is the entry: (u32 group id, u32 ms) pairs, little-endian, sorted
 * by ms then id. Networks with the same list share one entry, so adjacent networks with the same
 * measurements merge into one range and the ECS scope is that range's largest aligned block.
 * The table is written to an anonymous memory file (memfd) and mapped read-only MAP_SHARED: one
 * copy for every worker, nothing on disk to clean up.
 * Cost, measured (bench/latency_map.sh: 1M lines = 333k networks × 3 groups, 80% IPv4 /24s and
 * 20% IPv6 /48s; Release build on the shared 2-core dev machine, whose speed drifts): 0.7-1.0 s to
 * compile, 18.3 MB mapped (533k IPv4 + 133k IPv6 ranges, 332k entries), the text freed after the
 * compile. A lookup (the ASN table's tree walk, then entry k is record k - 1 of the names: no
 * search) costs 73-105 ns with 4096 distinct clients and 185-610 ns with a million (cache misses
 * on the 18 MB table); the whole filter adds ~155 ns / ~310 ns to answer_select() over a 5-record
 * RRset (half the clients unmapped, so falling back).
 *
 * Owns: the mapping (through its asn_table_t) and the group names (heap), until
 * latency_map_free().
 * Lifecycle: compiled on the loader thread (start and SIGHUP: src/load/view_db.c) → published
 * with a snapshot, immutable → freed after the RCU grace period when no snapshot holds it.
 * Threading: compile on any non-worker thread (it allocates and makes syscalls); lookups from any
 * number of workers at once: no allocation, lock or syscall.
 */
#ifndef TERN_GEO_LATENCY_MAP_H
#define TERN_GEO_LATENCY_MAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tern/common/compiler.h"
#include "tern/geo/latency_group.h"

/* Largest ms a line may give: a minute is far beyond any RTT worth steering by, and the bound
 * catches a column of microseconds pasted by mistake. */
#define LATENCY_MAP_MS_MAX 60000u
/* Groups one network may list: the entry is stored as an ASN table "name", whose length field is
 * 16 bits (65535 / 8 bytes a pair). Thousands of PoPs is beyond any deployment. */
#define LATENCY_MAP_GROUPS_MAX 8191u
/* The largest map file read: 1 GiB of text is ~40M lines, well past any measured table. */
#define LATENCY_MAP_FILE_MAX (1ull << 30)

typedef struct latency_map latency_map_t;

/** What a compile read and produced. */
typedef struct latency_map_stats {
    size_t lines;     /* data lines (measurements) */
    size_t networks;  /* distinct networks */
    size_t entries;   /* distinct (group, ms) lists */
    size_t groups;    /* distinct group names */
    size_t ranges_v4; /* range table entries per family, after overlaps and merging */
    size_t ranges_v6;
    size_t bytes; /* the compiled table's size */
} latency_map_stats_t;

/** A client's entry: n pairs of (u32 group id, u32 ms), little-endian, sorted by ms, inside the
 * mapping (valid while the map is). n == 0: the client's network is not in the map. */
typedef struct latency_entry {
    const uint8_t *pairs;
    uint32_t n;
} latency_entry_t;

/**
 * Compile len bytes of map text (need not be NUL-terminated); source names it in messages ("the
 * file", "redis key K"). Returns 0 with *out; TERN_ESYNTAX with "<source>:<line>: message" in err
 * for a bad line; TERN_ENOMEM; a negated errno when the memory file cannot be made. stats may be
 * NULL.
 */
int latency_map_compile(const char *text, size_t len, const char *source, latency_map_t **out,
                        latency_map_stats_t *stats, char *err, size_t errlen) TERN_WUR;

/** Read the file at path (at most LATENCY_MAP_FILE_MAX bytes) and compile it, messages naming
 * path. Returns as latency_map_compile(), or what tern_file_read_text() returns. */
int latency_map_load_file(const char *path, latency_map_t **out, latency_map_stats_t *stats,
                          char *err, size_t errlen) TERN_WUR;

/** Unmap and free. NULL is a no-op. */
void latency_map_free(latency_map_t *m);

/**
 * The entry of a client address (family AF_INET: 4 bytes, AF_INET6: 16, network order) into *e,
 * and in *prefix the length of the largest aligned block around the address that the same entry
 * (or the same absence of one) covers: the ECS scope an answer from it may claim. Returns e->n.
 */
uint32_t latency_map_lookup(const latency_map_t *m, int family, const uint8_t *addr,
                            latency_entry_t *e, uint8_t *prefix);

/** Pair i (< e->n) of an entry. */
static inline void latency_entry_at(const latency_entry_t *e, uint32_t i, uint32_t *group,
                                    uint32_t *ms)
{
    uint32_t v[2];
    memcpy(v, e->pairs + 8 * (size_t)i, sizeof(v)); /* little-endian hosts only (asn_format.h) */
    *group = v[0];
    *ms = v[1];
}

/** The name of group id as the map first spelled it (NUL-terminated), or NULL when the map has no
 * such group. For explain and logs: a binary search. */
const char *latency_map_group_name(const latency_map_t *m, uint32_t id);

/** The counts of m's compile (for logs and ctl). */
void latency_map_counts(const latency_map_t *m, latency_map_stats_t *out);

#endif
