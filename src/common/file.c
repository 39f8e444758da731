/*
 * file.c — see file.h.
 */
#include "tern/common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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
