#include "tern/common/log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "tern/common/err.h"

/* One line, formatted on the stack. Below PIPE_BUF (4096 on Linux), so a line written to a pipe
 * (a supervisor, the journal's stream) is atomic too, not only one write(2); longer messages are
 * cut, control-path messages never need more. */
#define LOG_LINE_MAX 2048

const char *const log_level_names[LOG_LVL_COUNT] = {"error", "warning", "info", "debug"};
const char *const log_target_names[LOG_TARGET_COUNT] = {"stderr", "stdout", "syslog"};

static const int syslog_priority[LOG_LVL_COUNT] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};

static atomic_int log_level = LOG_LVL_INFO;
static atomic_int log_target = LOG_TARGET_STDERR;

void log_set_level(log_level_t level)
{
    atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

log_level_t log_get_level(void)
{
    return (log_level_t)atomic_load_explicit(&log_level, memory_order_relaxed);
}

void log_set_target(log_target_t target)
{
    int old = atomic_exchange_explicit(&log_target, (int)target, memory_order_relaxed);
    if (old == (int)target)
        return;
    if (target == LOG_TARGET_SYSLOG)
        openlog("ternd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
    else if (old == LOG_TARGET_SYSLOG)
        closelog();
}

log_target_t log_get_target(void)
{
    return (log_target_t)atomic_load_explicit(&log_target, memory_order_relaxed);
}

static int parse_name(const char *const *names, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

int log_parse_level(const char *name, log_level_t *out)
{
    int i = parse_name(log_level_names, LOG_LVL_COUNT, name);
    if (i < 0)
        return TERN_EINVAL;
    *out = (log_level_t)i;
    return 0;
}

int log_parse_target(const char *name, log_target_t *out)
{
    int i = parse_name(log_target_names, LOG_TARGET_COUNT, name);
    if (i < 0)
        return TERN_EINVAL;
    *out = (log_target_t)i;
    return 0;
}

size_t tern_escape_controls(char *dst, size_t dstlen, const char *src)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p && o + 1 < dstlen; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            if (o + 5 > dstlen)
                break;
            dst[o++] = '\\';
            dst[o++] = (char)('0' + *p / 100);
            dst[o++] = (char)('0' + *p / 10 % 10);
            dst[o++] = (char)('0' + *p % 10);
        } else {
            dst[o++] = (char)*p;
        }
    }
    dst[o] = '\0';
    return o;
}

void log_msg(log_level_t level, const char *fmt, ...)
{
    if ((unsigned)level >= LOG_LVL_COUNT)
        level = LOG_LVL_DEBUG;
    if ((int)level > atomic_load_explicit(&log_level, memory_order_relaxed))
        return;
    int target = atomic_load_explicit(&log_target, memory_order_relaxed);
    char msg[LOG_LINE_MAX], buf[LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (target == LOG_TARGET_SYSLOG) {
        /* syslog carries ident, pid and priority itself */
        tern_escape_controls(buf, sizeof(buf), msg);
        syslog(syslog_priority[level], "%s", buf);
        return;
    }
    int n = snprintf(buf, sizeof(buf), "ternd: %s: ", log_level_names[level]);
    size_t len = (size_t)n + tern_escape_controls(buf + n, sizeof(buf) - (size_t)n - 1, msg);
    buf[len++] = '\n';
    ssize_t w = write(target == LOG_TARGET_STDOUT ? STDOUT_FILENO : STDERR_FILENO, buf, len);
    (void)w;
}

/* The escape of byte c (see tern_escape()) into e; returns its length. */
static size_t escape_byte(unsigned char c, char e[5])
{
    if (c == '\\' || c == '"') {
        e[0] = '\\';
        e[1] = (char)c;
        return 2;
    }
    if (c < 0x20 || c >= 0x7f) {
        snprintf(e, 5, "\\%03u", c);
        return 4;
    }
    e[0] = (char)c;
    return 1;
}

const char *tern_escape(char *dst, size_t dstlen, const void *s, size_t len)
{
    static const char cut[] = "...";
    const size_t ncut = sizeof(cut) - 1;
    const unsigned char *p = s;
    char e[5];
    size_t whole = 0, o = 0;
    for (size_t i = 0; i < len; i++)
        whole += escape_byte(p[i], e);
    size_t room = dstlen - 1; /* the NUL aside */
    bool cutting = whole > room;
    if (cutting) /* keep room for "..." after the last whole escape */
        room = room >= ncut ? room - ncut : 0;
    for (size_t i = 0; i < len; i++) {
        size_t n = escape_byte(p[i], e);
        if (o + n > room)
            break;
        memcpy(dst + o, e, n);
        o += n;
    }
    if (cutting && o + ncut < dstlen) {
        memcpy(dst + o, cut, ncut);
        o += ncut;
    }
    dst[o] = '\0';
    return dst;
}
