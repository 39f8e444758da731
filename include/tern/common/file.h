/*
 * file.h — opening the files tern reads (zone files, their includes, databases) safely.
 *
 * Whatever path an operator or a zone names may turn out to be a FIFO (open(2) for reading blocks
 * until a writer appears, and the loader thread with it, for good), a device, a directory or a
 * huge sparse file. tern_open_regular() opens without blocking, accepts only regular files, and
 * refuses one larger than the caller's bound before a byte is read, so a bad path fails a load
 * with a message instead of hanging it or filling memory. tern_file_replace() writes a file the
 * way a reader or a crash never sees half of it.
 *
 * Loader-side only (it blocks on disk I/O); thread-safe, no state.
 */
#ifndef TERN_COMMON_FILE_H
#define TERN_COMMON_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tern/common/compiler.h"

/**
 * Open path read-only (O_CLOEXEC, never blocking on a FIFO or device) and return the descriptor,
 * in blocking mode again, with its fstat in *st. Refused, with a message naming the path in err:
 * a directory ("is a directory"), anything not a regular file ("is not a regular file (a FIFO)"),
 * a file larger than max_bytes when max_bytes > 0 (TERN_ELIMIT). Returns the descriptor or a
 * negative TERN_E* code (a negated errno for open/fstat failures).
 */
int tern_open_regular(const char *path, uint64_t max_bytes, struct stat *st, char *err,
                      size_t errlen) TERN_WUR;

/**
 * Read a whole text file opened with tern_open_regular(path, max_bytes): every byte and a NUL
 * after them in *out (the caller frees it). Refused with a message naming the path in err: a NUL
 * byte inside (TERN_ESYNTAX: "holds a NUL byte: not a text file"), a file that shrinks while read
 * (TERN_EIO), and whatever tern_open_regular() refuses. With secret (private keys), the buffer is
 * wiped before it is freed on failure. 0 or a negative code.
 */
int tern_file_read_text(const char *path, uint64_t max_bytes, bool secret, char **out, char *err,
                        size_t errlen) TERN_WUR;

/** fsync the directory holding path, so that a rename into it survives a crash. 0 or a negative
 * code. */
int tern_file_sync_dir(const char *path) TERN_WUR;

/** Write all len bytes of data to fd, retrying short writes and EINTR. 0, or a negative errno
 * (TERN_EIO when the descriptor takes nothing). For files and memfds: it blocks as fd does. */
int tern_write_all(int fd, const void *data, size_t len) TERN_WUR;

/**
 * Replace path with len bytes of data, atomically: a temporary file beside it (mkstemp, mode
 * mode), written, fsync'ed and renamed over path, then the directory fsync'ed so the rename
 * survives a crash. A reader sees the old file or the whole new one. 0, or a negative code with a
 * message naming the file in err; the temporary file is removed on failure.
 */
int tern_file_replace(const char *path, const void *data, size_t len, mode_t mode, char *err,
                      size_t errlen) TERN_WUR;

#endif
