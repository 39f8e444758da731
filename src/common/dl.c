/*
 * dl.c — see dl.h.
 */
#include "tern/common/dl.h"

#include <dlfcn.h>
#include <stdio.h>

#include "tern/common/err.h"

int tern_dl_load(const char *const *names, size_t count, const char *const *syms, void **out,
                 size_t nsyms, char *err, size_t errlen)
{
    void *h = NULL;
    for (size_t i = 0; !h && i < count; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, errlen, "cannot load %s: %s", count ? names[0] : "?", dlerror());
        return TERN_ENOENT;
    }
    for (size_t i = 0; i < nsyms; i++) {
        if (!(out[i] = dlsym(h, syms[i]))) {
            snprintf(err, errlen, "%s lacks %s", names[0], syms[i]);
            return TERN_ENOENT;
        }
    }
    return 0; /* h stays open: callers' threads run its code */
}
