/*
 * source_journal.h — the on-disk journal of a master-file zone's dynamic changes (RFC 2136
 * UPDATE, the HTTP API), replayed over the file at every read, and the zone file written back
 * from the version served (`ternctl zone flush`, zonefile_sync), as Knot and BIND keep theirs.
 *
 * Why a journal and not rewriting the file per change: a change must be on disk before it is
 * answered NOERROR (a crash or SIGKILL after the answer loses nothing), and rewriting a
 * 100,000-name file per change costs the zone's size; an append and an fsync cost the change's.
 * The file is written back only on demand or on an interval.
 *
 * Format (all integers big-endian): a header, then entries back to back.
 *   header: "TERNJNL1" (8 bytes), u8 origin length, the origin (lowercased wire name)
 *   entry:  u32 magic "TJE1", u32 payload length, u32 CRC-32 of the payload, payload:
 *           u32 from serial, u32 to serial, i64 wall-clock time (s), u16 who length, who (text),
 *           the new apex SOA: u32 ttl, u16 rdlength, rdata,
 *           u32 removed count, u32 added count, then each RR removed, then each added:
 *           owner (uncompressed lowercased wire name), u16 type, u32 ttl, u16 rdlength, rdata.
 * The entries chain: each from is the previous to. An entry cut short or whose CRC fails at the
 * end of the file is a write a crash interrupted: it was never answered (the answer follows the
 * fsync), so it is dropped (logged, the file truncated to the last whole entry on the next
 * append). One in the middle is corruption: an error naming the journal and the offset.
 *
 * What matches what: the file's SOA serial must be the `from` of some entry (its changes are
 * replayed from there), or the last entry's `to` (the file was flushed: nothing to replay), or
 * the journal is empty. Anything else means the file was edited while changes were pending:
 * an error naming both serials (the zone then fails to load; a reload keeps serving the old
 * version), as BIND's "journal out of sync with zone".
 *
 * Threading: the functions are reentrant; one zone's journal is appended and flushed by one
 * thread (the update service's), and read by the loader thread while it may be appended (a
 * reader stops at the last whole entry). Nothing here runs on a worker.
 */
#ifndef TERN_SOURCE_SOURCE_JOURNAL_H
#define TERN_SOURCE_SOURCE_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/zone/zone.h"

/* One RR of an entry. */
typedef struct source_journal_rr {
    const uint8_t *owner; /* wire name, inside the zone (any case: lowercased when written) */
    uint8_t owner_len;
    uint16_t type;
    uint32_t ttl;
    uint16_t rdlen;
    const uint8_t *rdata;
} source_journal_rr_t;

/* One change: from → to, the RRs it removed and added (RFC 1995 terms, the apex SOA apart). */
typedef struct source_journal_entry {
    uint32_t from, to;
    int64_t when;    /* wall clock, s */
    const char *who; /* "key NAME from ADDR", "api key NAME from ADDR": the audit's who */
    uint32_t soa_ttl;
    uint16_t soa_len;
    const uint8_t *soa; /* the new apex SOA's rdata (serial `to`) */
    size_t nremoved, nadded;
    const source_journal_rr_t *removed, *added;
} source_journal_entry_t;

/** The journal of master file `file`: "<file>.jnl", malloc'd (NULL when out of memory). */
char *source_journal_path(const char *file) TERN_WUR;

/**
 * Append e to the journal at path (zone origin, lowercased wire name, origin_len bytes): created
 * with its header when missing (and its directory fsync'd), a torn tail truncated first, then
 * the entry written and fsync'd. e->from must be the last entry's to (or anything when empty).
 * 0; TERN_EINVAL (err: the serials) when it does not chain; TERN_EIO (err: the path and errno).
 */
int source_journal_append(const char *path, const uint8_t *origin, size_t origin_len,
                          const source_journal_entry_t *e, char *err, size_t errlen) TERN_WUR;

/**
 * The version base (read from the master file, or a version made by this function before)
 * with the journal's entries from base's serial on: 0 with *out a new version (one reference)
 * and *applied the entries replayed; 0 with *out NULL when nothing is to be replayed (no
 * journal, an empty one, or base at its last serial); TERN_EINVAL (err: the serials) when
 * base's serial is not in the chain; TERN_EIO, TERN_EMALF (err: path and offset) for a
 * journal that cannot be read or is corrupt; the zone builder's error when an entry does not
 * apply (err: its serials and the RR). source names the new version (zone_t.source).
 * Replays through zone_delta_ixfr (one step per entry) then zone_patch(), so it costs the
 * entries, not the zone; the last entry's position is remembered per path (under a lock) so the
 * common case — the entry just appended — seeks straight to it.
 */
int source_journal_apply(const char *path, const zone_t *base, const char *source, zone_t **out,
                         size_t *applied, char *err, size_t errlen) TERN_WUR;

/**
 * source_journal_apply() building the new version whole, never as a patch: for a zone tern
 * signs (its signatures are made per build, over the build's array of RRsets, so a patched
 * version cannot be signed). base is the file read without the signer's DNSKEYs; the builder is
 * given dnskeys (dnskeys_len bytes, zone_builder_set_dnssec()) as the file's own read would be.
 */
int source_journal_apply_whole(const char *path, const zone_t *base, const char *source,
                               const uint8_t *dnskeys, size_t dnskeys_len, zone_t **out,
                               size_t *applied, char *err, size_t errlen) TERN_WUR;

/**
 * The lock a whole read of a master file with its journal holds (the loader: source_file.c),
 * and that source_journal_flush() holds while it writes the file and empties the journal, so a
 * read never takes the file from before a flush with the journal from after it (the changes
 * would be missing from what it builds). One process-wide mutex: flushes are rare, and a read
 * holding it up only delays a flush, never a query.
 */
void source_journal_lock(void);
void source_journal_unlock(void);

/** Summary of the journal at path: entries, the first from and the last to serial, its size
 * in bytes. 0 (all zero when it does not exist), or TERN_EIO/TERN_EMALF with err. */
typedef struct source_journal_info {
    size_t entries;
    uint32_t first, last;
    uint64_t bytes;
} source_journal_info_t;
int source_journal_info(const char *path, source_journal_info_t *out, char *err,
                        size_t errlen) TERN_WUR;

/** What source_journal_list() calls for each entry; e and everything it points at are valid
 * during the call only. 0 to go on, a negative TERN_E* code to stop (list() returns it). */
typedef int (*source_journal_list_fn)(void *ctx, const source_journal_entry_t *e, uint64_t off);

/**
 * Every whole entry of the journal at path in order, with its offset in the file, for the
 * audit listing (`ternctl zone`: who changed what, when) and the tools: a torn tail is not
 * listed, a corrupt entry stops the walk. 0 (nothing called when it does not exist), fn's
 * negative code, or TERN_EIO/TERN_EMALF/TERN_ENOMEM with err (path and offset).
 */
int source_journal_list(const char *path, source_journal_list_fn fn, void *ctx, char *err,
                        size_t errlen) TERN_WUR;

/**
 * Write z's data back to master file `file` atomically (a temporary file in the same
 * directory, fsync, rename, fsync of the directory), one RR per line with absolute names, the
 * apex SOA first, in the text form ldns writes (so zone_file_load() reads back the same RRs),
 * leaving out the DNSKEYs tern adds to a zone it signs (skip_dnskey), then empty the journal at
 * journal (only once the file is on disk: a crash between leaves a file at the journal's last
 * serial, which apply() accepts). Comments, $INCLUDE and formatting of the old file are not
 * kept (Knot's flush does the same). The journal keeps its header (it is emptied, not removed);
 * one of another zone is left as it is (TERN_EIO). 0, or TERN_EIO/TERN_ENOMEM with err.
 */
int source_journal_flush(const char *journal, const char *file, const zone_t *z, bool skip_dnskey,
                         char *err, size_t errlen) TERN_WUR;

#endif
