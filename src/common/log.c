#include "tern/common/log.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/logfd.h"

/* One line, formatted on the stack. Below PIPE_BUF (4096 on Linux), so a line written to a pipe
 * (a supervisor, the journal's stream) is atomic too, not only one write(2); longer messages are
 * cut, control-path messages never need more. */
#define LOG_LINE_MAX 2048

const char *const log_level_names[LOG_LVL_COUNT] = {"error", "warning", "info", "debug"};
const char *const log_target_names[LOG_TARGET_COUNT] = {"stderr", "stdout", "syslog"};

static const int syslog_priority[LOG_LVL_COUNT] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};

static atomic_int log_level = LOG_LVL_INFO;
static atomic_int log_target = LOG_TARGET_STDERR;

/* Lines a stalled stdout or stderr could not take yet wait here for the flusher thread: 64 KiB,
 * some 500 typical lines (a reload's worth of messages, or a minute of warnings), and then
 * the newest are dropped and counted. More would only delay the same loss behind a reader that
 * is gone for good. */
#define LOG_BACKLOG (64u << 10)

/* How long the flusher waits for a stalled reader before looking again: short enough that a
 * reader coming back gets the backlog promptly, long enough to cost nothing while stalled. */
#define LOG_RETRY_MS 200

/* At exit, how long the backlog may still wait for its reader: the README promises a shutdown
 * in under a second, and the request log's last drain shares that second. */
#define LOG_EXIT_FLUSH_MS 200

/* stdout's and stderr's: where lines go, and what waits for them. Under log_mu. */
typedef struct log_sink {
    logfd_t out;
    bool ready; /* out was made */
    size_t len; /* bytes in backlog */
    char backlog[LOG_BACKLOG];
} log_sink_t;

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t log_wake = PTHREAD_COND_INITIALIZER;
static log_sink_t log_sinks[2];         /* [0] stderr, [1] stdout */
static logfd_t log_syslog = {.fd = -1}; /* the syslog target's socket (logfd_init_syslog()) */
static bool log_flusher;                /* the flusher thread runs */
static uint64_t log_dropped;            /* lines dropped (relaxed atomics; log_dropped_lines()) */

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
    pthread_mutex_lock(&log_mu);
    if (target == LOG_TARGET_SYSLOG)
        logfd_init_syslog(&log_syslog); /* connected now, as openlog()'s LOG_NDELAY */
    else if (old == LOG_TARGET_SYSLOG)
        logfd_close(&log_syslog);
    pthread_mutex_unlock(&log_mu);
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

static void count_dropped(uint64_t n)
{
    __atomic_fetch_add(&log_dropped, n, __ATOMIC_RELAXED);
}

uint64_t log_dropped_lines(void)
{
    return __atomic_load_n(&log_dropped, __ATOMIC_RELAXED);
}

/* What the sink's reader takes of its backlog now, or within timeout_ms (log_mu held). An
 * error other than a full reader (the reader is gone: EPIPE) drops the backlog. */
static void sink_flush(log_sink_t *s, int timeout_ms)
{
    if (s->len && logfd_flush(&s->out, s->backlog, &s->len, timeout_ms) < 0) {
        count_dropped(logfd_lines(s->backlog, s->len));
        s->len = 0;
    }
}

/* Write the backlogs out while the readers take them, waiting LOG_RETRY_MS at most at a time
 * with log_mu released. Runs for the life of the process; all signals blocked (see
 * start_flusher()). */
static void *flusher_main(void *arg)
{
    (void)arg;
    (void)pthread_setname_np(pthread_self(), "tern-log");
    pthread_mutex_lock(&log_mu);
    for (;;) {
        logfd_t waiting = {.fd = -1};
        for (int i = 0; i < 2; i++) {
            sink_flush(&log_sinks[i], 0);
            if (log_sinks[i].len && waiting.fd < 0)
                waiting = log_sinks[i].out;
        }
        if (waiting.fd < 0) {
            pthread_cond_wait(&log_wake, &log_mu);
            continue;
        }
        pthread_mutex_unlock(&log_mu);
        (void)logfd_wait(&waiting, LOG_RETRY_MS);
        pthread_mutex_lock(&log_mu);
    }
    return NULL;
}

/* At exit: what the backlogs hold gets LOG_EXIT_FLUSH_MS in all, then is dropped. */
static void flush_at_exit(void)
{
    int64_t until = tern_monotonic_ms() + LOG_EXIT_FLUSH_MS;
    struct timespec by;
    clock_gettime(CLOCK_REALTIME, &by);
    by.tv_sec += 1; /* the flusher holds log_mu only around writes that cannot block */
    if (pthread_mutex_timedlock(&log_mu, &by) != 0)
        return;
    for (int i = 0; i < 2; i++) {
        int64_t left = until - tern_monotonic_ms();
        sink_flush(&log_sinks[i], left > 0 ? (int)left : 0);
        count_dropped(logfd_lines(log_sinks[i].backlog, log_sinks[i].len));
        log_sinks[i].len = 0;
    }
    pthread_mutex_unlock(&log_mu);
}

/* The flusher, on the first line a reader could not take (log_mu held). Every signal blocked
 * in it, whatever the caller's mask: it may start before main() routes SIGTERM and SIGHUP to
 * its signalfd, and must never be the thread they kill the process in. */
static void start_flusher(void)
{
    if (log_flusher)
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    log_flusher = pthread_create(&t, &a, flusher_main, NULL) == 0;
    pthread_attr_destroy(&a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (log_flusher)
        (void)atexit(flush_at_exit);
}

/* One whole line to stderr (sink 0) or stdout (1): written now if the reader takes it and
 * nothing waits before it, else kept in the backlog for the flusher, else dropped and counted.
 * Never blocks on the reader. */
static void log_put(int sink, const char *line, size_t len)
{
    log_sink_t *s = &log_sinks[sink];
    pthread_mutex_lock(&log_mu);
    if (!s->ready) {
        logfd_init(&s->out, sink ? STDOUT_FILENO : STDERR_FILENO);
        s->ready = true;
    } else {
        logfd_sync(&s->out); /* 1 or 2 swapped by dup2() (tests, a daemon's redirection) */
    }
    sink_flush(s, 0);
    if (s->len == 0) {
        ssize_t w = logfd_write(&s->out, line, len);
        if (w < 0) {
            count_dropped(1);
            w = (ssize_t)len; /* the reader is gone: nothing to keep */
        }
        line += w;
        len -= (size_t)w;
    }
    if (len > LOG_BACKLOG - s->len) {
        count_dropped(1);
    } else if (len) {
        memcpy(s->backlog + s->len, line, len);
        s->len += len;
        start_flusher();
        pthread_cond_signal(&log_wake);
    }
    pthread_mutex_unlock(&log_mu);
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
        /* syslog carries ident, pid and priority itself; a full reader drops the message */
        size_t len = tern_escape_controls(buf, sizeof(buf), msg);
        pthread_mutex_lock(&log_mu);
        int rc = logfd_syslog(&log_syslog, LOG_DAEMON | syslog_priority[level], "ternd", buf, len);
        pthread_mutex_unlock(&log_mu);
        if (rc < 0)
            count_dropped(1);
        return;
    }
    int n = snprintf(buf, sizeof(buf), "ternd: %s: ", log_level_names[level]);
    size_t len = (size_t)n + tern_escape_controls(buf + n, sizeof(buf) - (size_t)n - 1, msg);
    buf[len++] = '\n';
    log_put(target == LOG_TARGET_STDOUT ? 1 : 0, buf, len);
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
