/*
 * aname_state.h — the ANAME resolver's last good results on disk, so that a restart during an
 * upstream outage still answers (source/aname_resolver.h reads the file once at start and writes
 * it after rounds that changed or confirmed something).
 *
 * The file is text, one line per (target, type) with an answer, sorted by name then type:
 *
 *   # comment lines start with '#'
 *   tern-aname-state 1
 *   <target> <A|AAAA> <ok|nodata|nxdomain> <ttl> <confirmed> [<address> ...]
 *   end <number of entry lines>
 *
 * target is a name in presentation form (escapes as dname_to_str() writes them), ttl the TTL
 * the upstream gave (0..2^31-1), confirmed the Unix time an upstream last gave that answer; ok
 * carries at least one address of the type, the others none. Reading is strict: anything else —
 * an unknown version, a bad field, entries out of order or twice, no "end" line or a wrong count
 * (a truncated file) — rejects the whole file with its name and line.
 *
 * Threading: no state; the resolver thread calls these (they do disk I/O, never on a worker).
 */
#ifndef TERN_SOURCE_ANAME_STATE_H
#define TERN_SOURCE_ANAME_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/buf.h"
#include "tern/common/compiler.h"
#include "tern/wire/dname.h"

/* A larger file is refused unread: far beyond any real set of targets (a 2 KiB line each for a
 * hundred thousand of them would be 200 MiB; real ones are tens of bytes). */
#define ANAME_STATE_MAX_BYTES (64u << 20)

typedef struct aname_state_entry {
    uint8_t name[DNAME_MAXLEN]; /* lowercased wire name */
    uint8_t len;
    uint16_t qtype;     /* WIRE_T_A or WIRE_T_AAAA */
    uint8_t state;      /* ANAME_OK, ANAME_NODATA or ANAME_NXDOMAIN (never pending) */
    uint16_t count;     /* addresses (ANAME_OK) */
    uint32_t ttl;       /* as the upstream gave it */
    int64_t confirmed;  /* Unix time an upstream last gave this answer */
    uint32_t rdata_len; /* as aname_result_t.rdata: per address a u16 length, then it */
    uint8_t *rdata;     /* read: malloc'd (aname_state_free()); written: the caller's */
} aname_state_entry_t;

/** The order of the file's entries by name (and of the resolver's targets): the lowercased wire
 * bytes, then the length. <0, 0, >0 like memcmp. */
int aname_state_name_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);

/** Sort the n entries at e into file order and append the whole file for them to b; b->failed
 * tells whether it is complete. */
void aname_state_format(tern_buf_t *b, aname_state_entry_t *e, size_t n);

/**
 * Read the file at path into *out (a malloc'd array of *n entries; free with aname_state_free()).
 * 0; TERN_ENOENT when there is no such file (nothing in err); any other negative code with err
 * saying "path: line N: why" (or why the file could not be read) and nothing in *out.
 */
int aname_state_read(const char *path, aname_state_entry_t **out, size_t *n, char *err,
                     size_t errlen) TERN_WUR;

/** Free what aname_state_read() returned. NULL is a no-op. */
void aname_state_free(aname_state_entry_t *e, size_t n);

#endif
