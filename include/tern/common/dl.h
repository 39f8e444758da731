/*
 * dl.h — loading an optional library at run time (dlopen), for the features whose libraries
 * would otherwise cost every ternd their memory: libmicrohttpd (metrics), libsystemd (sd_notify),
 * libcurl (health checks). Each caller keeps a table of the functions it uses; this fills it.
 *
 * The library stays loaded for the life of the process (threads may run its code). Call from one
 * thread at a time per table (pthread_once in the callers); no other state.
 */
#ifndef TERN_COMMON_DL_H
#define TERN_COMMON_DL_H

#include <stddef.h>

#include "tern/common/compiler.h"

/**
 * dlopen() the first of the count names that loads (RTLD_NOW | RTLD_LOCAL) and resolve each of
 * the nsyms symbols syms[i] into out[i]. Returns 0, or TERN_ENOENT with "cannot load NAME: why"
 * or "NAME lacks SYMBOL" in err (out is then partly filled and must not be used).
 */
int tern_dl_load(const char *const *names, size_t count, const char *const *syms, void **out,
                 size_t nsyms, char *err, size_t errlen) TERN_WUR;

#endif
