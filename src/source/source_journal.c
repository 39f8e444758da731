/*
 * source_journal.c — the journal of a master-file zone's changes (source_journal.h), read side:
 * the per-path position cache, the reader (one entry at a time, telling a torn tail from
 * corruption), the replay through zone_delta_ixfr, the listing. The writer (append, flush) is
 * source_journal_write.c.
 */
#include "tern/source/source_journal.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_delta.h"
#include "tern/zone/zone_patch.h"

#include "source_journal_int.h"

/* ---- the position cache ---- */

/* Direct-mapped by the path's hash: one slot per journaled zone a loader and an update service
 * touch, and a collision (two zones on one slot) costs one of them a full scan, never a wrong
 * answer (every hit is checked against the file: same inode, the entry read chains). 256 slots
 * of ~80 bytes cover a server with hundreds of dynamic zones. */
#define CACHE_SLOTS 256

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static source_journal_pos_t cache[CACHE_SLOTS];

static source_journal_pos_t *cache_slot(const char *path)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = path; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return &cache[tern_mix64(h) % CACHE_SLOTS];
}

/* The positions remembered for path when they are of the file st describes (same inode, not
 * shorter than the last entry's end), into *out. */
bool source_journal_cache_get(const char *path, const struct stat *st, source_journal_pos_t *out)
{
    pthread_mutex_lock(&cache_lock);
    source_journal_pos_t *c = cache_slot(path);
    bool hit = c->path && strcmp(c->path, path) == 0 && c->dev == st->st_dev &&
               c->ino == st->st_ino && (uint64_t)st->st_size >= c->end;
    if (hit)
        *out = *c;
    pthread_mutex_unlock(&cache_lock);
    return hit;
}

void source_journal_cache_put(const char *path, const struct stat *st, uint32_t from, uint32_t to,
                              uint64_t off, uint64_t end)
{
    pthread_mutex_lock(&cache_lock);
    source_journal_pos_t *c = cache_slot(path);
    if (!c->path || strcmp(c->path, path) != 0) {
        free(c->path);
        c->path = strdup(path); /* out of memory: the slot stays empty, nothing is wrong */
    }
    if (c->path) {
        c->dev = st->st_dev;
        c->ino = st->st_ino;
        c->size = (uint64_t)st->st_size;
        c->mtime = st->st_mtim;
        c->from = from;
        c->to = to;
        c->off = off;
        c->end = end;
    }
    pthread_mutex_unlock(&cache_lock);
}

void source_journal_cache_drop(const char *path)
{
    pthread_mutex_lock(&cache_lock);
    source_journal_pos_t *c = cache_slot(path);
    if (c->path && strcmp(c->path, path) == 0) {
        free(c->path);
        c->path = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
}

/* ---- reading ---- */

int source_journal_open(source_journal_file_t *j, const char *path, int flags, char *err,
                        size_t errlen)
{
    memset(j, 0, sizeof(*j) - sizeof(j->who));
    j->who[0] = '\0';
    j->path = path;
    j->fd = open(path, flags | O_CLOEXEC);
    if (j->fd < 0) {
        int rc = -errno;
        if (rc != TERN_ENOENT)
            tern_set_err(err, errlen, "journal %s: cannot open: %s", path, tern_strerror(rc));
        return rc;
    }
    if (fstat(j->fd, &j->st) < 0 || !S_ISREG(j->st.st_mode)) {
        tern_set_err(err, errlen, "journal %s: not a regular file", path);
        close(j->fd);
        j->fd = -1;
        return TERN_EIO;
    }
    return 0;
}

void source_journal_close(source_journal_file_t *j)
{
    if (j->fd >= 0)
        close(j->fd);
    j->fd = -1;
    free(j->payload);
    free(j->rrs);
    j->payload = NULL;
    j->rrs = NULL;
}

/* n bytes at off, all of them: 0, or TERN_EIO with err. */
static int pread_all(const source_journal_file_t *j, void *buf, size_t n, uint64_t off, char *err,
                     size_t errlen)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(j->fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
        if (r <= 0) {
            tern_set_err(err, errlen, "journal %s: cannot read at offset %" PRIu64 ": %s", j->path,
                         off + got, r < 0 ? strerror(errno) : "end of file");
            return TERN_EIO;
        }
        got += (size_t)r;
    }
    return 0;
}

/*
 * The header: 1 when it is whole and of origin (NULL: any, then j->origin is the file's), 0
 * when the file is shorter than a header (its creation was interrupted before any entry was
 * appended: an empty journal), TERN_EMALF or TERN_EINVAL (another zone's) with err.
 */
int source_journal_header(source_journal_file_t *j, const uint8_t *origin, char *err, size_t errlen)
{
    uint8_t h[JNL_FILE_MAGIC_LEN + 1];
    uint64_t size = (uint64_t)j->st.st_size;
    if (size < sizeof(h))
        return 0;
    int rc = pread_all(j, h, sizeof(h), 0, err, errlen);
    if (rc < 0)
        return rc;
    if (memcmp(h, JNL_FILE_MAGIC, JNL_FILE_MAGIC_LEN) != 0 || h[JNL_FILE_MAGIC_LEN] == 0) {
        tern_set_err(err, errlen, "journal %s: not a tern journal (bad header)", j->path);
        return TERN_EMALF;
    }
    j->origin_len = h[JNL_FILE_MAGIC_LEN];
    j->first = sizeof(h) + j->origin_len;
    if (size < j->first)
        return 0;
    if ((rc = pread_all(j, j->origin, j->origin_len, sizeof(h), err, errlen)) < 0)
        return rc;
    if (dname_check(j->origin, j->origin_len) != (int)j->origin_len) {
        tern_set_err(err, errlen, "journal %s: bad origin in the header", j->path);
        return TERN_EMALF;
    }
    if (origin && !dname_equal(origin, j->origin)) {
        char a[JNL_NAME_STR_MAX], b[JNL_NAME_STR_MAX];
        (void)dname_to_str(j->origin, a, sizeof(a));
        (void)dname_to_str(origin, b, sizeof(b));
        tern_set_err(err, errlen, "journal %s is of zone %s, not %s", j->path, a, b);
        return TERN_EINVAL;
    }
    return 1;
}

/* One RR of a payload at p[*pos..len) into r: 0, or -1 when it does not fit or its owner is no
 * name inside origin. */
static int parse_rr(const uint8_t *p, size_t len, size_t *pos, const uint8_t *origin,
                    source_journal_rr_t *r)
{
    int n = dname_check(p + *pos, len - *pos);
    if (n < 0 || len - *pos - (size_t)n < 8 || !dname_is_subdomain(p + *pos, origin))
        return -1;
    r->owner = p + *pos;
    r->owner_len = (uint8_t)n;
    const uint8_t *f = p + *pos + n;
    r->type = tern_rd16(f);
    r->ttl = tern_rd32(f + 2);
    r->rdlen = tern_rd16(f + 6);
    *pos += (size_t)n + 8;
    if (len - *pos < r->rdlen)
        return -1;
    r->rdata = p + *pos;
    *pos += r->rdlen;
    return 0;
}

/* The payload j->payload[0..len) into e (pointing into it): 0, or the first thing wrong with
 * it (a static string). */
static const char *parse_payload(source_journal_file_t *j, size_t len, source_journal_entry_t *e)
{
    const uint8_t *p = j->payload;
    if (len < JNL_PAYLOAD_MIN)
        return "shorter than an entry";
    memset(e, 0, sizeof(*e));
    e->from = tern_rd32(p);
    e->to = tern_rd32(p + 4);
    e->when = (int64_t)((uint64_t)tern_rd32(p + 8) << 32 | tern_rd32(p + 12));
    size_t wl = tern_rd16(p + 16), pos = 18;
    if (len - pos < wl + 6 + 8)
        return "who runs past the entry";
    memcpy(j->who, p + pos, wl);
    j->who[wl] = '\0';
    e->who = j->who;
    pos += wl;
    e->soa_ttl = tern_rd32(p + pos);
    e->soa_len = tern_rd16(p + pos + 4);
    pos += 6;
    if (len - pos < (size_t)e->soa_len + 8 || e->soa_len < JNL_SOA_MIN)
        return "bad SOA";
    e->soa = p + pos;
    if (tern_rd32(e->soa + e->soa_len - 20) != e->to)
        return "the SOA's serial is not the entry's";
    pos += e->soa_len;
    e->nremoved = tern_rd32(p + pos);
    e->nadded = tern_rd32(p + pos + 4);
    pos += 8;
    size_t n = e->nremoved + e->nadded;
    if (n > (len - pos) / JNL_RR_MIN)
        return "more RRs than the entry holds";
    if (n > j->rrcap) {
        source_journal_rr_t *r = realloc(j->rrs, n * sizeof(*r));
        if (!r)
            return "out of memory";
        j->rrs = r;
        j->rrcap = n;
    }
    for (size_t i = 0; i < n; i++)
        if (parse_rr(p, len, &pos, j->origin, &j->rrs[i]) < 0)
            return "a bad RR (or one outside the zone)";
    if (pos != len)
        return "bytes after its RRs";
    e->removed = j->rrs;
    e->added = j->rrs + e->nremoved;
    return NULL;
}

/* Whether a whole entry with a good CRC starts anywhere in (off, end of file): what tells a
 * damaged length in the middle of the journal from a write a crash cut short (nothing whole can
 * follow that). Reads the rest of the file: only ever on a defect. */
static bool whole_entry_after(const source_journal_file_t *j, uint64_t off)
{
    uint64_t size = (uint64_t)j->st.st_size;
    if (size - off < JNL_ENTRY_HDR + 1)
        return false;
    size_t n = (size_t)(size - off - 1);
    uint8_t *b = malloc(n);
    bool found = false;
    if (!b || pread_all(j, b, n, off + 1, NULL, 0) < 0) {
        free(b);
        return true; /* cannot tell: call it corruption rather than drop an answered change */
    }
    for (size_t i = 0; i + JNL_ENTRY_HDR <= n && !found; i++) {
        if (tern_rd32(b + i) != JNL_ENTRY_MAGIC)
            continue;
        uint32_t len = tern_rd32(b + i + 4);
        found = len <= n - i - JNL_ENTRY_HDR &&
                crc32(0L, b + i + JNL_ENTRY_HDR, len) == tern_rd32(b + i + 8);
    }
    free(b);
    return found;
}

static bool all_zero_from(const source_journal_file_t *j, uint64_t off)
{
    uint8_t b[4096];
    uint64_t size = (uint64_t)j->st.st_size;
    while (off < size) {
        size_t n = size - off < sizeof(b) ? (size_t)(size - off) : sizeof(b);
        if (pread_all(j, b, n, off, NULL, 0) < 0)
            return false;
        for (size_t i = 0; i < n; i++)
            if (b[i])
                return false;
        off += n;
    }
    return true;
}

/*
 * The entry at off into e (valid until the next call), *next past it: 1; 0 at the end of the
 * file, or at a torn tail (j->torn set to off); TERN_EMALF (err: the path and offset) for a
 * defect that is not a tail, TERN_EIO, TERN_ENOMEM.
 * A tail is torn when the entry is cut short (and nothing whole follows), its CRC fails and it
 * ends the file, or the rest of the file is zeros (a file system that grew the file before it
 * wrote the data).
 */
int source_journal_next(source_journal_file_t *j, uint64_t off, source_journal_entry_t *e,
                        uint64_t *next, char *err, size_t errlen)
{
    uint64_t size = (uint64_t)j->st.st_size;
    uint8_t h[JNL_ENTRY_HDR];
    const char *why = NULL;
    if (off >= size)
        return 0;
    if (size - off < JNL_ENTRY_HDR)
        goto tail;
    int rc = pread_all(j, h, sizeof(h), off, err, errlen);
    if (rc < 0)
        return rc;
    if (tern_rd32(h) != JNL_ENTRY_MAGIC) {
        if (all_zero_from(j, off))
            goto torn;
        why = "bad entry magic";
        goto corrupt;
    }
    uint32_t len = tern_rd32(h + 4);
    if (len > size - off - JNL_ENTRY_HDR)
        goto tail;
    if (len + 1 > j->cap) {
        uint8_t *p = realloc(j->payload, (size_t)len + 1);
        if (!p) {
            tern_set_err(err, errlen, "journal %s: out of memory", j->path);
            return TERN_ENOMEM;
        }
        j->payload = p;
        j->cap = (size_t)len + 1;
    }
    if ((rc = pread_all(j, j->payload, len, off + JNL_ENTRY_HDR, err, errlen)) < 0)
        return rc;
    if (crc32(0L, j->payload, len) != tern_rd32(h + 8)) {
        if (off + JNL_ENTRY_HDR + len == size)
            goto torn;
        why = "CRC mismatch";
        goto corrupt;
    }
    if ((why = parse_payload(j, len, e)) != NULL)
        goto corrupt;
    *next = off + JNL_ENTRY_HDR + len;
    return 1;
tail:
    if (whole_entry_after(j, off)) {
        why = "entry length runs past whole entries";
        goto corrupt;
    }
torn:
    j->torn = off;
    return 0;
corrupt:
    tern_set_err(err, errlen, "journal %s: corrupt entry at offset %" PRIu64 ": %s", j->path, off,
                 why);
    return TERN_EMALF;
}

/* ---- replaying ---- */

/* What a replay keeps of the entries it reads. */
typedef struct replay {
    const zone_t *base;
    /* the caller's: build the new version whole, the signer's DNSKEYs given to the builder
     * (source_journal_apply_whole()) */
    bool whole;
    const uint8_t *dnskeys;
    size_t dnskeys_len;
    zone_delta_ixfr_t *x; /* NULL until the entry from base's serial */
    size_t entries, applied;
    uint32_t first, last; /* the chain read: first from, last to */
    uint32_t last_from;   /* the last entry's from, offset and end (for the cache) */
    uint64_t last_off, last_end;
    uint32_t soa_ttl; /* the last replayed entry's SOA */
    uint16_t soa_len;
    uint8_t soa[UINT16_MAX];
} replay_t;

/* One entry's RRs into the delta: removals, its SOA, additions. */
static int replay_entry(replay_t *r, const char *path, const source_journal_entry_t *e,
                        uint64_t off, char *err, size_t errlen)
{
    char why[1024];
    int rc = zone_delta_ixfr_begin(r->x, e->from, why, sizeof(why));
    for (size_t i = 0; i < e->nremoved && rc == 0; i++) {
        const source_journal_rr_t *x = &e->removed[i];
        rc = zone_delta_ixfr_remove(r->x, x->owner, x->type, x->rdata, x->rdlen, why, sizeof(why));
    }
    if (rc == 0)
        rc = zone_delta_ixfr_end(r->x, e->to);
    for (size_t i = 0; i < e->nadded && rc == 0; i++) {
        const source_journal_rr_t *x = &e->added[i];
        rc = zone_delta_ixfr_add(r->x, x->owner, x->type, x->ttl, x->rdata, x->rdlen);
        if (rc > 0)
            rc = 0;
        else if (rc < 0)
            snprintf(why, sizeof(why), "cannot add a record: %s", tern_strerror(rc));
    }
    if (rc < 0) {
        tern_set_err(err, errlen, "journal %s: entry %u -> %u at offset %" PRIu64 ": %s", path,
                     e->from, e->to, off, why);
        return rc;
    }
    r->soa_ttl = e->soa_ttl;
    r->soa_len = e->soa_len;
    memcpy(r->soa, e->soa, e->soa_len);
    r->applied++;
    return 0;
}

/* A cached start that turned out not to hold (the file changed behind the cache): scan. */
#define RESCAN 1

/*
 * Read the entries from start on, replaying those from base's serial. cached: start came from
 * the cache, so the first entry must be the one from base's serial (or none, when base is at the
 * cached last serial); anything else, a defect included, is RESCAN.
 */
static int replay_from(source_journal_file_t *j, replay_t *r, uint64_t start, bool cached,
                       char *err, size_t errlen)
{
    source_journal_entry_t e;
    uint64_t off = start, next;
    int rc;
    while ((rc = source_journal_next(j, off, &e, &next, err, errlen)) == 1) {
        if (r->entries && e.from != r->last) {
            if (cached)
                return RESCAN;
            tern_set_err(err, errlen,
                         "journal %s: corrupt: entry %u -> %u at offset %" PRIu64
                         " does not follow serial %u",
                         j->path, e.from, e.to, off, r->last);
            return TERN_EMALF;
        }
        if (!r->entries)
            r->first = e.from;
        r->entries++;
        r->last = e.to;
        r->last_from = e.from;
        r->last_off = off;
        r->last_end = next;
        if (!r->x && e.from == r->base->serial) {
            if (!(r->x = zone_delta_ixfr_new(r->base))) {
                tern_set_err(err, errlen, "journal %s: out of memory", j->path);
                return TERN_ENOMEM;
            }
        } else if (!r->x && cached) {
            return RESCAN;
        }
        if (r->x && (rc = replay_entry(r, j->path, &e, off, err, errlen)) < 0)
            return rc;
        off = next;
    }
    if (rc < 0)
        return cached ? RESCAN : rc;
    if (cached && !r->x && r->entries == 0 && start != j->first)
        r->last = r->base->serial; /* the cached end: base is at the last serial */
    else if (cached && !r->x)
        return RESCAN;
    return 0;
}

/* The replayed delta as the new version: patched onto base, or built whole when the patch
 * cannot be made (the whole build then says what the builder refuses). */
static int replay_finish(replay_t *r, const char *path, const char *source, zone_t **out, char *err,
                         size_t errlen)
{
    zone_delta_t *d = NULL;
    char why[1024];
    int rc = r->whole ? TERN_ENOTSUP
                      : zone_delta_ixfr_finish(r->x, r->soa_ttl, r->soa, r->soa_len, source, &d,
                                               why, sizeof(why));
    if (rc == 0) {
        rc = zone_patch(r->base, d, out, why, sizeof(why));
        if (rc == 0) /* named as a build from source would be (fresh's blob holds the string) */
            (*out)->source = zone_delta_fresh(d)->source;
        zone_delta_release(d);
        if (rc <= 0 && rc != TERN_ENOMEM)
            return rc;
    }
    if (rc == TERN_ENOMEM) {
        tern_set_err(err, errlen, "journal %s: out of memory", path);
        return rc;
    }
    zone_builder_t *b = zone_builder_new(r->base->apex, source);
    if (!b || (r->dnskeys && zone_builder_set_dnssec(b, r->dnskeys, r->dnskeys_len, 0) < 0)) {
        zone_builder_free(b);
        tern_set_err(err, errlen, "journal %s: out of memory", path);
        return TERN_ENOMEM;
    }
    rc = zone_delta_ixfr_build(r->x, r->soa_ttl, r->soa, r->soa_len, b);
    if (rc < 0) {
        tern_set_err(err, errlen, "journal %s: serials %u to %u: %s", path, r->base->serial,
                     r->last, zone_builder_error(b));
        zone_builder_free(b);
        return rc;
    }
    rc = zone_builder_finish(b, out, why, sizeof(why));
    if (rc < 0)
        tern_set_err(err, errlen, "journal %s: serials %u to %u: %s", path, r->base->serial,
                     r->last, why);
    return rc;
}

static int apply(const char *path, const zone_t *base, const char *source, bool whole,
                 const uint8_t *dnskeys, size_t dnskeys_len, zone_t **out, size_t *applied,
                 char *err, size_t errlen)
{
    *out = NULL;
    *applied = 0;
    source_journal_file_t *j = malloc(sizeof(*j));
    replay_t *r = calloc(1, sizeof(*r));
    int rc = TERN_ENOMEM;
    if (!j || !r) {
        tern_set_err(err, errlen, "journal %s: out of memory", path);
        free(j);
        j = NULL;
        goto done;
    }
    r->base = base;
    r->whole = whole;
    r->dnskeys = dnskeys;
    r->dnskeys_len = dnskeys_len;
    if ((rc = source_journal_open(j, path, O_RDONLY, err, errlen)) < 0) {
        free(j);
        j = NULL;
        rc = rc == TERN_ENOENT ? 0 : TERN_EIO; /* no journal: nothing to replay */
        goto done;
    }
    if ((rc = source_journal_header(j, base->apex, err, errlen)) <= 0)
        goto done; /* shorter than its header: empty */
    source_journal_pos_t c;
    bool cached = source_journal_cache_get(path, &j->st, &c);
    if (cached && base->serial == c.to && c.size == (uint64_t)j->st.st_size &&
        c.mtime.tv_sec == j->st.st_mtim.tv_sec && c.mtime.tv_nsec == j->st.st_mtim.tv_nsec) {
        rc = 0; /* at the last serial, and nothing was appended since */
        goto done;
    }
    rc = RESCAN;
    if (cached && (base->serial == c.to || base->serial == c.from))
        rc = replay_from(j, r, base->serial == c.from ? c.off : c.end, true, err, errlen);
    if (rc == RESCAN) {
        zone_delta_ixfr_free(r->x);
        memset(r, 0, offsetof(replay_t, soa));
        r->base = base;
        r->whole = whole;
        r->dnskeys = dnskeys;
        r->dnskeys_len = dnskeys_len;
        j->torn = 0;
        rc = replay_from(j, r, j->first, false, err, errlen);
    }
    if (rc < 0)
        goto done;
    if (j->torn)
        log_debug("journal %s: ignoring %" PRIu64
                  " bytes of an interrupted write at offset %" PRIu64,
                  path, (uint64_t)j->st.st_size - j->torn, j->torn);
    if (r->entries && r->last_end > j->first)
        source_journal_cache_put(path, &j->st, r->last_from, r->last, r->last_off, r->last_end);
    if (!r->x) {
        if (r->entries && base->serial != r->last) {
            tern_set_err(err, errlen,
                         "journal %s: the zone file's serial %u is not in the journal (serials %u "
                         "to %u): the file was edited while changes were pending (flush first)",
                         path, base->serial, r->first, r->last);
            rc = TERN_EINVAL;
        }
        goto done; /* empty, or base at the last serial */
    }
    if ((rc = replay_finish(r, path, source, out, err, errlen)) == 0)
        *applied = r->applied;
done:
    if (j)
        source_journal_close(j);
    free(j);
    if (r)
        zone_delta_ixfr_free(r->x);
    free(r);
    return rc;
}

int source_journal_apply(const char *path, const zone_t *base, const char *source, zone_t **out,
                         size_t *applied, char *err, size_t errlen)
{
    return apply(path, base, source, false, NULL, 0, out, applied, err, errlen);
}

int source_journal_apply_whole(const char *path, const zone_t *base, const char *source,
                               const uint8_t *dnskeys, size_t dnskeys_len, zone_t **out,
                               size_t *applied, char *err, size_t errlen)
{
    return apply(path, base, source, true, dnskeys, dnskeys_len, out, applied, err, errlen);
}

/* ---- listing ---- */

/* Every whole entry to fn; *size the file's. */
static int walk(const char *path, source_journal_list_fn fn, void *ctx, uint64_t *size, char *err,
                size_t errlen)
{
    source_journal_file_t *j = malloc(sizeof(*j));
    if (!j) {
        tern_set_err(err, errlen, "journal %s: out of memory", path);
        return TERN_ENOMEM;
    }
    int rc = source_journal_open(j, path, O_RDONLY, err, errlen);
    if (rc < 0) {
        free(j);
        return rc == TERN_ENOENT ? 0 : TERN_EIO;
    }
    *size = (uint64_t)j->st.st_size;
    if ((rc = source_journal_header(j, NULL, err, errlen)) == 1) {
        source_journal_entry_t e;
        uint64_t off = j->first, next;
        while ((rc = source_journal_next(j, off, &e, &next, err, errlen)) == 1 &&
               (rc = fn(ctx, &e, off)) == 0)
            off = next;
    }
    source_journal_close(j);
    free(j);
    return rc < 0 ? rc : 0;
}

int source_journal_list(const char *path, source_journal_list_fn fn, void *ctx, char *err,
                        size_t errlen)
{
    uint64_t size;
    return walk(path, fn, ctx, &size, err, errlen);
}

static int count_entry(void *ctx, const source_journal_entry_t *e, uint64_t off)
{
    (void)off;
    source_journal_info_t *in = ctx;
    if (!in->entries++)
        in->first = e->from;
    in->last = e->to;
    return 0;
}

int source_journal_info(const char *path, source_journal_info_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    uint64_t size = 0;
    int rc = walk(path, count_entry, out, &size, err, errlen);
    out->bytes = size;
    return rc;
}

char *source_journal_path(const char *file)
{
    char *p = NULL;
    return asprintf(&p, "%s.jnl", file) < 0 ? NULL : p;
}
