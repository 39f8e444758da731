/*
 * log.h — leveled logging for the control path (startup, reload, shutdown).
 *
 * Never called per query. Thread-safe: each message is formatted into a stack buffer and written
 * with one write(2) so lines from different threads do not interleave.
 */
#ifndef TERN_COMMON_LOG_H
#define TERN_COMMON_LOG_H

#include "tern/common/compiler.h"

typedef enum { LOG_LVL_ERR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG } log_level_t;

/** Messages above level are dropped. Default LOG_LVL_INFO. */
void log_set_level(log_level_t level);

void log_msg(log_level_t level, const char *fmt, ...) TERN_PRINTF(2, 3);

#define log_err(...)   log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
