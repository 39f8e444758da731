/*
 * source_json.h — zones from redins JSON files behind zone_source.h: the configured zones
 * (`format: json`) the loader reads at each reload, whole (records are located in the geo
 * databases and checked as they are built, so a changed database or check reads them again).
 *
 * Owner: the loader, as one entry of zone_source.c's table (source_json_ops). No thread, no
 * state; as source_file.h otherwise.
 *
 * Threading: read() on the loader thread (or the main thread at startup).
 */
#ifndef TERN_SOURCE_SOURCE_JSON_H
#define TERN_SOURCE_SOURCE_JSON_H

#include "tern/source/zone_source.h"

extern const zone_source_ops_t source_json_ops;

#endif
