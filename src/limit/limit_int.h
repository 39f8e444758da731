/*
 * limit_int.h — private to src/limit: the shared tables, the policy's layout, the log rings.
 */
#ifndef TERN_LIMIT_LIMIT_INT_H
#define TERN_LIMIT_LIMIT_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "tern/limit/limit.h"

/* One rate bucket: a key (0 = empty) and its GCRA state, each a 64-bit word read and written
 * atomically. Four share a cache line: a key probes the four of its line and nothing else. */
typedef struct gslot {
    uint64_t key;
    uint64_t tat; /* theoretical arrival time, monotonic microseconds */
} gslot_t;

#define GSLOT_WAYS 4

typedef struct gtable {
    gslot_t *slots;
    uint64_t mask; /* slots - 1 (a power of two, a multiple of GSLOT_WAYS) */
    size_t size;   /* as asked (table_size) */
} gtable_t;

/* Prefix lists compiled to sorted, merged, disjoint ranges. */
typedef struct range4 {
    uint32_t lo, hi;
} range4_t;
typedef struct range6 {
    unsigned __int128 lo, hi;
} range6_t;
typedef struct pset {
    range4_t *r4;
    size_t n4;
    range6_t *r6;
    size_t n6;
} pset_t;

typedef struct acl {
    pset_t allow, deny;
    bool has_allow;
    uint8_t action; /* config_limit_action_t */
} acl_t;

/* A zone's ACL by its apex. */
typedef struct zacl {
    uint8_t apex[256]; /* lowercased wire name */
    uint8_t len;
    uint32_t hash;
    acl_t acl;
} zacl_t;

/* The cookie secrets the workers read (RCU-published, replaced whole). */
typedef struct secrets {
    uint8_t cur[16];
    uint8_t prev[16];
    bool has_prev;
} secrets_t;

/* One worker's reports of newly limited prefixes (single producer, the limit thread consumes). */
#define RING_SIZE 256
typedef struct ring_rec {
    uint8_t family, len, cls;
    uint8_t addr[16];
} ring_rec_t;
typedef struct ring {
    uint32_t head; /* written by the worker (release) */
    uint32_t tail; /* written by the thread (release) */
    uint64_t dropped;
    ring_rec_t rec[RING_SIZE];
} __attribute__((aligned(64))) ring_t;

struct limit_shared {
    pthread_mutex_t mu; /* the loader's table allocation vs the thread; not the query path */
    gtable_t *rl;       /* redins' rate, allocated on first use */
    gtable_t *rrl;      /* RRL */
    uint32_t *tcp;      /* connection counts by hashed client prefix */
    uint64_t tcp_mask;
    unsigned tcp_cap, tcp_pfx4, tcp_pfx6;
    secrets_t *secrets; /* RCU: workers read it with tern_rcu_deref() */
    bool secret_fixed;  /* configured: never rotated */
    unsigned rotate_s;  /* rotation period of a random secret; 0 = cookies off */
    int64_t rotated_at; /* monotonic ms */
    bool rrl_log;       /* log newly limited prefixes */
    unsigned nrings;
    ring_t *rings;
    pthread_t thread;
    bool started;
    int stop;         /* atomic */
    int evfd;         /* wakes the thread for stop */
    limit_stats_t st; /* under mu */
};

struct limit {
    limit_shared_t *sh;
    bool acl_on;
    acl_t acl;
    zacl_t *zacl; /* open addressing by hash, zmask + 1 slots; len 0 = empty */
    uint32_t zmask;
    bool rl_on;
    uint64_t rl_T, rl_tau;
    pset_t rl_white, rl_black;
    uint8_t rl_action, rl_black_action;
    bool rrl_on;
    uint64_t rrl_T, rrl_tau;
    unsigned slip;
    uint8_t pfx4, pfx6;
    pset_t rrl_white;
    bool ck_on, ck_require;
};

/** Whether c falls in s. */
bool pset_has(const pset_t *s, const limit_client_t *c);

/** The ring of worker id, for limit_rrl(). */
static inline ring_t *limit_ring(limit_shared_t *sh, unsigned id)
{
    return sh->nrings ? &sh->rings[id % sh->nrings] : NULL;
}

/** Publish a new secret (loader or limit thread): the current one becomes the previous. */
int limit_publish_secret(limit_shared_t *sh, const uint8_t secret[16]);

/** limit_thread.c: the cookie settings of a config into the shared state (loader thread). */
int limit_shared_cookies(limit_shared_t *sh, const config_cookies_t *ck);

/** limit.c: allocate the shared state (tables empty), and free its tables. */
limit_shared_t *limit_shared_alloc(unsigned workers);
void limit_shared_release_tables(limit_shared_t *sh);

#endif
