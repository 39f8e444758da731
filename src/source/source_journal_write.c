/*
 * source_journal_write.c — the journal's write side (source_journal.h): an entry appended and
 * fsync'd (a torn tail dropped first), and the zone file written back, the journal emptied.
 */
#include "tern/source/source_journal.h"

#include <fcntl.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/common/log.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"
#include "tern/xfr/xfr_in.h"

#include "source_journal_int.h"

/* ---- writing ---- */

static size_t rr_size(const source_journal_rr_t *r)
{
    return (size_t)r->owner_len + 8 + r->rdlen;
}

/* What append() refuses before it touches the file: 0, or TERN_EINVAL with err. */
static int check_entry(const char *path, const uint8_t *origin, const source_journal_entry_t *e,
                       char *err, size_t errlen)
{
    if (e->from == e->to) {
        tern_set_err(err, errlen, "journal %s: entry %u -> %u changes no serial", path, e->from,
                     e->to);
        return TERN_EINVAL;
    }
    if (!e->soa || e->soa_len < JNL_SOA_MIN || tern_rd32(e->soa + e->soa_len - 20) != e->to) {
        tern_set_err(err, errlen, "journal %s: entry %u -> %u: its SOA is not of serial %u", path,
                     e->from, e->to, e->to);
        return TERN_EINVAL;
    }
    if (e->who && strlen(e->who) > UINT16_MAX) {
        tern_set_err(err, errlen, "journal %s: entry %u -> %u: who is too long", path, e->from,
                     e->to);
        return TERN_EINVAL;
    }
    for (size_t i = 0; i < e->nremoved + e->nadded; i++) {
        const source_journal_rr_t *r =
            i < e->nremoved ? &e->removed[i] : &e->added[i - e->nremoved];
        const char *why = NULL;
        if (dname_check(r->owner, r->owner_len) != (int)r->owner_len)
            why = "a bad owner name";
        else if (!dname_is_subdomain(r->owner, origin))
            why = "an owner outside the zone";
        else if (r->type == WIRE_T_SOA && dname_equal(r->owner, origin))
            why = "the apex SOA among its RRs (it is the entry's SOA)";
        if (why) {
            tern_set_err(err, errlen, "journal %s: entry %u -> %u: %s", path, e->from, e->to, why);
            return TERN_EINVAL;
        }
    }
    return 0;
}

static uint8_t *put_rr(uint8_t *w, const source_journal_rr_t *r)
{
    w += dname_lower(w, r->owner);
    tern_wr16(w, r->type);
    tern_wr32(w + 2, r->ttl);
    tern_wr16(w + 6, r->rdlen);
    memcpy(w + 8, r->rdata, r->rdlen);
    return w + 8 + r->rdlen;
}

/* e as an entry (header and payload), malloc'd, its size in *n; NULL when out of memory or
 * larger than a u32 length. */
static uint8_t *encode(const source_journal_entry_t *e, size_t *n)
{
    size_t wl = e->who ? strlen(e->who) : 0;
    size_t len = JNL_PAYLOAD_MIN + wl + e->soa_len;
    for (size_t i = 0; i < e->nremoved; i++)
        len += rr_size(&e->removed[i]);
    for (size_t i = 0; i < e->nadded; i++)
        len += rr_size(&e->added[i]);
    if (len > UINT32_MAX)
        return NULL;
    uint8_t *b = malloc(JNL_ENTRY_HDR + len), *w = b + JNL_ENTRY_HDR;
    if (!b)
        return NULL;
    tern_wr32(w, e->from);
    tern_wr32(w + 4, e->to);
    tern_wr32(w + 8, (uint32_t)((uint64_t)e->when >> 32));
    tern_wr32(w + 12, (uint32_t)e->when);
    tern_wr16(w + 16, (uint16_t)wl);
    memcpy(w + 18, e->who ? e->who : "", wl);
    w += 18 + wl;
    tern_wr32(w, e->soa_ttl);
    tern_wr16(w + 4, e->soa_len);
    memcpy(w + 6, e->soa, e->soa_len);
    w += 6 + e->soa_len;
    tern_wr32(w, (uint32_t)e->nremoved);
    tern_wr32(w + 4, (uint32_t)e->nadded);
    w += 8;
    for (size_t i = 0; i < e->nremoved; i++)
        w = put_rr(w, &e->removed[i]);
    for (size_t i = 0; i < e->nadded; i++)
        w = put_rr(w, &e->added[i]);
    tern_wr32(b, JNL_ENTRY_MAGIC);
    tern_wr32(b + 4, (uint32_t)len);
    tern_wr32(b + 8, (uint32_t)crc32(0L, b + JNL_ENTRY_HDR, (uInt)len));
    *n = JNL_ENTRY_HDR + len;
    return b;
}

static int pwrite_all(int fd, const uint8_t *b, size_t n, uint64_t off)
{
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(fd, b + done, n - done, (off_t)(off + done));
        if (w < 0)
            return -errno;
        done += (size_t)w;
    }
    return 0;
}

/* The header of a new (or never finished) journal, written and fsync'd at offset 0. */
static int write_header(source_journal_file_t *j, const uint8_t *origin, size_t origin_len)
{
    uint8_t h[JNL_FILE_MAGIC_LEN + 1 + DNAME_MAXLEN];
    memcpy(h, JNL_FILE_MAGIC, JNL_FILE_MAGIC_LEN);
    h[JNL_FILE_MAGIC_LEN] = (uint8_t)origin_len;
    dname_lower(h + JNL_FILE_MAGIC_LEN + 1, origin);
    size_t n = JNL_FILE_MAGIC_LEN + 1 + origin_len;
    int rc = ftruncate(j->fd, 0) < 0 ? -errno : pwrite_all(j->fd, h, n, 0);
    if (rc == 0 && fsync(j->fd) < 0)
        rc = -errno;
    memcpy(j->origin, h + JNL_FILE_MAGIC_LEN + 1, origin_len);
    j->origin_len = origin_len;
    j->first = n;
    j->st.st_size = (off_t)n;
    return rc;
}

/* Open the journal for an append, made with its header when missing (its directory fsync'd so
 * the new name survives a crash); the header checked against origin. */
static int open_for_append(source_journal_file_t *j, const char *path, const uint8_t *origin,
                           size_t origin_len, char *err, size_t errlen)
{
    int rc = source_journal_open(j, path, O_RDWR, err, errlen);
    bool created = false;
    if (rc == TERN_ENOENT) {
        j->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (j->fd < 0 || fstat(j->fd, &j->st) < 0) {
            rc = -errno;
            tern_set_err(err, errlen, "journal %s: cannot create: %s", path, tern_strerror(rc));
            return TERN_EIO;
        }
        created = true;
    } else if (rc < 0) {
        return TERN_EIO;
    }
    if (!created && (rc = source_journal_header(j, origin, err, errlen)) != 0)
        return rc < 0 ? rc : 0;
    /* new, or its creation was interrupted before its first entry */
    if ((rc = write_header(j, origin, origin_len)) < 0 ||
        (created && (rc = tern_file_sync_dir(path)) < 0)) {
        tern_set_err(err, errlen, "journal %s: cannot write its header: %s", path,
                     tern_strerror(rc));
        return TERN_EIO;
    }
    return 0;
}

int source_journal_append(const char *path, const uint8_t *origin, size_t origin_len,
                          const source_journal_entry_t *e, char *err, size_t errlen)
{
    if (dname_check(origin, origin_len) != (int)origin_len) {
        tern_set_err(err, errlen, "journal %s: bad origin", path);
        return TERN_EINVAL;
    }
    int rc = check_entry(path, origin, e, err, errlen);
    if (rc < 0)
        return rc;
    size_t n = 0;
    uint8_t *buf = encode(e, &n);
    if (!buf) {
        tern_set_err(err, errlen, "journal %s: entry %u -> %u: out of memory (or over 4 GiB)", path,
                     e->from, e->to);
        return TERN_ENOMEM;
    }
    source_journal_file_t *j = malloc(sizeof(*j));
    if (!j) {
        free(buf);
        tern_set_err(err, errlen, "journal %s: out of memory", path);
        return TERN_ENOMEM;
    }
    if ((rc = open_for_append(j, path, origin, origin_len, err, errlen)) < 0)
        goto done;
    /* the last whole entry: where the cache says when the file is as it was left, else a scan */
    uint64_t end = j->first, size = (uint64_t)j->st.st_size;
    size_t entries = 0;
    uint32_t last = 0;
    source_journal_pos_t c;
    if (source_journal_cache_get(path, &j->st, &c) && c.size == size &&
        c.mtime.tv_sec == j->st.st_mtim.tv_sec && c.mtime.tv_nsec == j->st.st_mtim.tv_nsec) {
        end = c.end, last = c.to, entries = 1;
    } else {
        source_journal_entry_t x;
        uint64_t off = j->first, next;
        while ((rc = source_journal_next(j, off, &x, &next, err, errlen)) == 1) {
            end = off = next;
            last = x.to;
            entries++;
        }
        if (rc < 0)
            goto done;
    }
    if (entries && e->from != last) {
        tern_set_err(err, errlen,
                     "journal %s: entry %u -> %u does not follow its last entry (serial %u)", path,
                     e->from, e->to, last);
        rc = TERN_EINVAL;
        goto done;
    }
    if (size > end) {
        log_warn("journal %s: dropping %" PRIu64 " bytes at offset %" PRIu64
                 " (a write a crash interrupted, never answered)",
                 path, size - end, end);
        if (ftruncate(j->fd, (off_t)end) < 0) {
            rc = -errno;
            goto io;
        }
    }
    if ((rc = pwrite_all(j->fd, buf, n, end)) < 0)
        goto io;
    if (fsync(j->fd) < 0 || fstat(j->fd, &j->st) < 0) {
        rc = -errno;
        goto io;
    }
    source_journal_cache_put(path, &j->st, e->from, e->to, end, end + n);
    rc = 0;
    goto done;
io:
    tern_set_err(err, errlen, "journal %s: cannot append entry %u -> %u at offset %" PRIu64 ": %s",
                 path, e->from, e->to, end, tern_strerror(rc));
    /* nothing half-written stays for the next append to find (it would drop it anyway) */
    if (ftruncate(j->fd, (off_t)end) < 0)
        source_journal_cache_drop(path);
    rc = TERN_EIO;
done:
    if (rc < 0)
        source_journal_cache_drop(path);
    source_journal_close(j);
    free(j);
    free(buf);
    return rc;
}

/* ---- the write-back ---- */

static pthread_mutex_t flush_mu = PTHREAD_MUTEX_INITIALIZER;

void source_journal_lock(void)
{
    pthread_mutex_lock(&flush_mu);
}

void source_journal_unlock(void)
{
    pthread_mutex_unlock(&flush_mu);
}

static int flush_locked(const char *journal, const char *file, const zone_t *z, bool skip_dnskey,
                        char *err, size_t errlen);

int source_journal_flush(const char *journal, const char *file, const zone_t *z, bool skip_dnskey,
                         char *err, size_t errlen)
{
    source_journal_lock();
    int rc = flush_locked(journal, file, z, skip_dnskey, err, errlen);
    source_journal_unlock();
    return rc;
}

static int flush_locked(const char *journal, const char *file, const zone_t *z, bool skip_dnskey,
                        char *err, size_t errlen)
{
    int rc = xfr_zone_write_file_skip(z, file, skip_dnskey ? WIRE_T_DNSKEY : 0, err, errlen);
    if (rc < 0)
        return rc == TERN_ENOMEM ? rc : TERN_EIO;
    /* The file is on disk at z's serial, the journal's last: its entries are done with. */
    source_journal_cache_drop(journal);
    source_journal_file_t *j = malloc(sizeof(*j));
    if (!j) {
        tern_set_err(err, errlen, "journal %s: out of memory", journal);
        return TERN_ENOMEM;
    }
    if ((rc = source_journal_open(j, journal, O_RDWR, err, errlen)) < 0) {
        free(j);
        return rc == TERN_ENOENT ? 0 : TERN_EIO;
    }
    char why[512];
    rc = source_journal_header(j, z->apex, why, sizeof(why));
    if (rc == 1) /* keep the header: the next append only writes its entry */
        rc = ftruncate(j->fd, (off_t)j->first) < 0 || fsync(j->fd) < 0 ? -errno : 0;
    else if (rc == 0) /* its creation never finished: nothing in it */
        rc = unlink(journal) < 0 ? -errno : tern_file_sync_dir(journal);
    if (rc < 0 && rc != TERN_EMALF && rc != TERN_EINVAL) {
        tern_set_err(err, errlen, "journal %s: cannot empty it after writing %s: %s", journal, file,
                     tern_strerror(rc));
        rc = TERN_EIO;
    } else if (rc < 0) { /* another zone's, or no journal: not ours to empty */
        tern_set_err(err, errlen, "%s written, but its journal was left as it is: %s", file, why);
        rc = TERN_EIO;
    }
    source_journal_close(j);
    free(j);
    return rc;
}
