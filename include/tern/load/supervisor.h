/*
 * supervisor.h — one owner for the lifecycle of every background thread: the workers, the
 * loader, the zone sources, the health checker and limit thread, zone transfers, the query-log
 * writer, the control socket and the metrics endpoint.
 *
 * Owner: main. It registers each service as soon as the service's object exists (so a failed
 * startup stops exactly what was made), calls supervisor_start() once everything is wired and
 * the first view is published, and supervisor_stop() on the way out.
 *
 * Lifecycle: new → add (each service) → start (in the order added; the first failure ends it)
 *   → stop (every service added, started or not, by rank: the order the services need, written
 *   beside each rank) → free. A stop runs under a deadline: one that takes longer is logged by
 *   name while the supervisor goes on waiting (freeing what a thread still uses would be worse
 *   than a slow exit), so a hung shutdown says which thread holds it.
 *
 * Threads a service starts later by itself follow its config (the loader starts the health
 * checker, the limit thread and the sources' threads when a config first asks for them); the
 * supervisor still stops them, in their rank.
 *
 * Threading: main's thread only.
 */
#ifndef TERN_LOAD_SUPERVISOR_H
#define TERN_LOAD_SUPERVISOR_H

#include <stdint.h>

#include "tern/common/compiler.h"

typedef struct supervisor supervisor_t;

/* When a service stops, relative to the others. */
typedef enum supervisor_rank {
    SUPERVISOR_CTL,     /* first: a reload it waits for finishes, then nobody asks for more */
    SUPERVISOR_API,     /* a PATCH it answers waits for the update service and the loader */
    SUPERVISOR_METRICS, /* it reads the loader and the workers: before either */
    SUPERVISOR_LOADER,  /* the loader thread: a reload in progress may be waiting for the
                           workers' grace period */
    SUPERVISOR_SOURCES, /* after the loader thread: only it starts and stops them while it runs */
    SUPERVISOR_HEALTH,  /* the checker after the sources: a reload no longer configures it */
    SUPERVISOR_XFR,     /* before the workers: it answers through their sockets */
    SUPERVISOR_WORKERS,
    SUPERVISOR_QLOG, /* after the workers: the writer drains their rings a last time */
} supervisor_rank_t;

/* How long a stop may take before it is logged: a reload in progress finishes first (a large
 * zone takes seconds) and every thread's own waits are bounded well below this. */
#define SUPERVISOR_STOP_DEADLINE_MS 10000

typedef struct supervisor_service {
    const char *name;        /* for the log ("loader", "workers", ...) */
    int (*start)(void *ctx); /* 0 or a negative code (logged by it); NULL: nothing to start */
    void (*stop)(void *ctx); /* joins its threads (and frees it); NULL-safe in ctx */
    void *ctx;
    supervisor_rank_t rank;
    uint32_t deadline_ms; /* 0: SUPERVISOR_STOP_DEADLINE_MS */
} supervisor_service_t;

/** An empty supervisor; NULL when out of memory. */
supervisor_t *supervisor_new(void) TERN_WUR;

/** Register svc (copied). 0 or TERN_ENOMEM (then svc->stop is called at once: nothing is left
 * running that nobody stops). */
int supervisor_add(supervisor_t *sv, const supervisor_service_t *svc) TERN_WUR;

/** Start every service not started yet, in the order added. 0, or the first failure's code
 * (the services started stay started: supervisor_stop() stops them). */
int supervisor_start(supervisor_t *sv) TERN_WUR;

/** Stop every service added, by rank (services of one rank in the order added), each under its
 * deadline. Idempotent. NULL is a no-op. */
void supervisor_stop(supervisor_t *sv);

/** supervisor_stop(), then free it. NULL is a no-op. */
void supervisor_free(supervisor_t *sv);

#endif
