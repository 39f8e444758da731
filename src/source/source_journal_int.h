/*
 * source_journal_int.h — what the journal's reader (source_journal.c: the cache, reading,
 * replaying, listing) shares with its writer (source_journal_write.c: append, flush). Private
 * to src/source.
 */
#ifndef TERN_SOURCE_SOURCE_JOURNAL_INT_H
#define TERN_SOURCE_SOURCE_JOURNAL_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "tern/source/source_journal.h"
#include "tern/wire/dname.h"

#define JNL_FILE_MAGIC     "TERNJNL1"
#define JNL_FILE_MAGIC_LEN 8
#define JNL_ENTRY_MAGIC    0x544A4531u /* "TJE1" */
#define JNL_ENTRY_HDR      12          /* magic, payload length, CRC */
/* The payload's fixed part: from, to, when, who length; then the SOA's ttl and rdlength; then
 * the two counts. The smallest RR is a root owner, type, ttl and rdlength. */
#define JNL_PAYLOAD_MIN (4 + 4 + 8 + 2 + 4 + 2 + 4 + 4)
#define JNL_RR_MIN      (1 + 2 + 4 + 2)
/* The smallest SOA RDATA: two root names and the five counters; its serial is 20 bytes from
 * the end whatever the names. */
#define JNL_SOA_MIN 22
/* A name in presentation form, every byte escaped as \DDD at worst. */
#define JNL_NAME_STR_MAX (DNAME_MAXLEN * 4 + 1)

/* The positions of a journal's last entry, remembered per path (the position cache: see
 * source_journal.c), and the file they are of. */
typedef struct source_journal_pos {
    char *path; /* NULL: the slot is free */
    dev_t dev;  /* the file the positions are of */
    ino_t ino;
    uint64_t size; /* its size and mtime when they were taken */
    struct timespec mtime;
    uint32_t from, to; /* the last whole entry's serials */
    uint64_t off, end; /* where it starts and ends */
} source_journal_pos_t;

typedef struct source_journal_file {
    const char *path;
    int fd;
    struct stat st;
    uint8_t origin[DNAME_MAXLEN];
    size_t origin_len;
    uint64_t first;   /* offset of the first entry (the header's end) */
    uint8_t *payload; /* the last entry read */
    size_t cap;
    source_journal_rr_t *rrs; /* its RRs: removed, then added */
    size_t rrcap;
    /* a torn tail source_journal_next() stopped at: where it starts (0: none) */
    uint64_t torn;
    char who[UINT16_MAX + 1]; /* the last entry's, NUL-terminated (last: source_journal_open()
                                 clears the rest) */
} source_journal_file_t;

/** The positions remembered for path when they are of the file st describes (same inode, not
 * shorter than the last entry's end), into *out; false when none are. Any thread. */
bool source_journal_cache_get(const char *path, const struct stat *st, source_journal_pos_t *out);

/** Remember that path (as st describes it) ends with the entry from -> to at [off, end). */
void source_journal_cache_put(const char *path, const struct stat *st, uint32_t from, uint32_t to,
                              uint64_t off, uint64_t end);

/** Forget path's positions (it was emptied, or a write failed). */
void source_journal_cache_drop(const char *path);

/** Open the journal (flags: O_RDONLY or O_RDWR) into j, its fstat in j->st: 0; TERN_ENOENT
 * (no message) when it does not exist; another code with err when it cannot be opened or is not
 * a regular file. */
int source_journal_open(source_journal_file_t *j, const char *path, int flags, char *err,
                        size_t errlen);

/** Close j and free its buffers (not j). */
void source_journal_close(source_journal_file_t *j);

/** The header: 1 when it is whole and of origin (NULL: any; j->origin is the file's), 0 when
 * the file is shorter than a header (its creation was interrupted: an empty journal),
 * TERN_EMALF or TERN_EINVAL (another zone's) with err. */
int source_journal_header(source_journal_file_t *j, const uint8_t *origin, char *err,
                          size_t errlen);

/** The entry at off into e (valid until the next call), *next past it: 1; 0 at the end of the
 * file or at a torn tail (j->torn set); TERN_EMALF (path and offset in err) for a defect that is
 * no tail; TERN_EIO; TERN_ENOMEM. */
int source_journal_next(source_journal_file_t *j, uint64_t off, source_journal_entry_t *e,
                        uint64_t *next, char *err, size_t errlen);

#endif
