/*
 * source_file.h — zones from master files (RFC 1035) behind zone_source.h: the configured
 * zones (`format: rfc1035`) the loader reads at each reload.
 *
 * Owner: the loader, as one entry of zone_source.c's table (source_file_ops). No thread, no
 * state: the loader's build decides which zones changed (every file a zone was read from is
 * remembered with its identity and times) and asks read() for those, so a reload stays
 * all-or-nothing. A changed master file is first read as a patch of the version served
 * (zone_file_patch()); source_json.h is the same for redins JSON files.
 *
 * Threading: read() on the loader thread (or the main thread at startup); nothing is kept.
 */
#ifndef TERN_SOURCE_SOURCE_FILE_H
#define TERN_SOURCE_SOURCE_FILE_H

#include "tern/source/zone_source.h"

extern const zone_source_ops_t source_file_ops;

#endif
