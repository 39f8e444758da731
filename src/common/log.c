#include "tern/common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static volatile log_level_t log_level = LOG_LVL_INFO;

void log_set_level(log_level_t level)
{
    log_level = level;
}

void log_msg(log_level_t level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    if (level > log_level)
        return;
    char buf[2048];
    int n = snprintf(buf, sizeof(buf), "ternd: %s: ", names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(buf) - 2)
        len = sizeof(buf) - 2;
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}
