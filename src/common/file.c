/*
 * file.c — see file.h.
 */
#include "tern/common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tern/common/err.h"

static const char *kind(mode_t m)
{
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    return "not a plain file";
}

int tern_open_regular(const char *path, uint64_t max_bytes, struct stat *st, char *err,
                      size_t errlen)
{
    /* O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer;
     * O_NOCTTY: a terminal device never becomes ours */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int rc = -errno;
        tern_set_err(err, errlen, "%s: %s", path, strerror(-rc));
        return rc;
    }
    int rc = 0;
    if (fstat(fd, st) < 0) {
        rc = -errno;
        tern_set_err(err, errlen, "%s: %s", path, strerror(-rc));
    } else if (S_ISDIR(st->st_mode)) {
        rc = TERN_EINVAL;
        tern_set_err(err, errlen, "%s: is a directory", path);
    } else if (!S_ISREG(st->st_mode)) {
        rc = TERN_EINVAL;
        tern_set_err(err, errlen, "%s: is not a regular file (%s)", path, kind(st->st_mode));
    } else if (max_bytes && (uint64_t)st->st_size > max_bytes) {
        rc = TERN_ELIMIT;
        tern_set_err(err, errlen, "%s: %" PRIu64 " bytes, more than the limit of %" PRIu64, path,
                     (uint64_t)st->st_size, max_bytes);
    } else {
        /* reads of a regular file never block for long; plain blocking reads from here on */
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
            rc = -errno;
            tern_set_err(err, errlen, "%s: %s", path, strerror(-rc));
        }
    }
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

int tern_file_sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return TERN_ENOMEM;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int tern_file_read_text(const char *path, uint64_t max_bytes, bool secret, char **out, char *err,
                        size_t errlen)
{
    struct stat st;
    *out = NULL;
    int fd = tern_open_regular(path, max_bytes, &st, err, errlen);
    if (fd < 0)
        return fd;
    int rc = TERN_ENOMEM;
    size_t len = (size_t)st.st_size, got = 0;
    char *buf = malloc(len + 1);
    if (!buf) {
        tern_set_err(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -errno : TERN_EIO;
            tern_set_err(err, errlen, "%s: %s", path,
                         r < 0 ? strerror(errno) : "shrank while read");
            goto fail;
        }
        got += (size_t)r;
    }
    buf[len] = '\0';
    if (strlen(buf) != len) {
        rc = TERN_ESYNTAX;
        tern_set_err(err, errlen, "%s: holds a NUL byte: not a text file", path);
        goto fail;
    }
    close(fd);
    *out = buf;
    return 0;
fail:
    if (buf && secret)
        explicit_bzero(buf, len + 1);
    free(buf);
    close(fd);
    return rc;
}

int tern_file_replace(const char *path, const void *data, size_t len, mode_t mode, char *err,
                      size_t errlen)
{
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
        tern_set_err(err, errlen, "%s: out of memory", path);
        return TERN_ENOMEM;
    }
    int rc = 0, fd = mkstemp(tmp);
    if (fd < 0) {
        rc = -errno;
        tern_set_err(err, errlen, "%s: %s", tmp, strerror(-rc));
        free(tmp);
        return rc;
    }
    /* mkstemp makes it 0600 */
    if (fchmod(fd, mode) < 0)
        rc = -errno;
    if (rc == 0)
        rc = tern_write_all(fd, data, len);
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc < 0) {
        tern_set_err(err, errlen, "%s: %s", tmp, tern_strerror(rc));
    } else if (rename(tmp, path) != 0) {
        rc = -errno;
        tern_set_err(err, errlen, "%s: rename: %s", path, strerror(-rc));
    } else if ((rc = tern_file_sync_dir(path)) < 0) {
        tern_set_err(err, errlen, "%s: syncing its directory: %s", path, tern_strerror(rc));
    }
    if (rc < 0)
        unlink(tmp); /* gone already when only the directory's sync failed */
    free(tmp);
    return rc;
}

int tern_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, p + off, len - off);
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && errno != EINTR)
            return -errno;
        else if (n == 0)
            return TERN_EIO;
    }
    return 0;
}
