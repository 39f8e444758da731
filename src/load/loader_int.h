/*
 * loader_int.h — private to src/load: what loader.c lends its companion files (loader_dnssec.c).
 * Threading: as the functions that call them (tern/load/loader.h says which thread for each).
 */
#ifndef TERN_LOAD_LOADER_INT_H
#define TERN_LOAD_LOADER_INT_H

#include "tern/load/loader.h"

#include "ds_check.h"
#include "zone_kasp.h"

/** The file zones' key registry (zone_kasp.h); the loader's, for its lifetime. */
zone_kasp_t *loader_kasp(loader_t *l);

/** Have zone key read and built again at the next build (any thread). 0 or TERN_ENOMEM. */
int loader_reread(loader_t *l, const char *key) TERN_WUR;

/** The DS checker's callback (ds_check.h; its thread, ctx the loader): the DS a managed zone
 * waited for is at its parent, or (want->gone) a zone being unsigned has none left there. */
void loader_dnssec_ds_found(void *ctx, const char *key, const ds_check_want_t *want);

#endif
