/*
 * update.h — the dynamic-update service: RFC 2136 UPDATE messages authorised (a zone's
 * allow_update), rate limited, evaluated over the version served (update_msg.h), persisted where
 * the zone lives, published through the loader, audited, then answered.
 *
 * Where a change lives: a master-file zone's change is appended to its journal and fsync'd
 * (tern/source/source_journal.h) before anything else; the loader is then asked to read the
 * zone again (zone_sink_t.reread), which replays the journal's new entry over the version served
 * (source_file.c): the same recipe as a reload — validate, sign, publish, journal for IXFR,
 * NOTIFY. The answer waits for that publish, so a client that got NOERROR queries the change at
 * once, and a crash after the answer loses nothing (the journal is replayed at start). A
 * secondary zone answers NOTAUTH (its primary takes updates), a zone from redins JSON or Redis
 * REFUSED (named in the log), a zone tern does not serve NOTAUTH.
 *
 * Every change is checked whole before its journal entry is written: the RR-level change is
 * patched onto the version served off to the side (zone_delta_ixfr, zone_patch), which runs
 * every check a build runs on the names it touches, so what the journal holds always builds.
 * Nothing is applied in part: an update is one journal entry, one version.
 *
 * Threads: "tern-update", one, so updates to a zone are serialised (each one's prerequisites
 * see every change answered before it). It takes requests from the transfer service's out
 * thread (which owns the connections and TSIG: tern/xfr/xfr.h) through a bounded queue, and
 * answers through the reply hook with the rcode only; the out thread writes and signs the
 * answer. It waits on nothing it does not own without a deadline: a publish it waits for has
 * UPDATE_PUBLISH_WAIT_MS, and stop wakes every wait.
 *
 * The service is a zone source (update_source_ops, added to the loader by ternd): the loader
 * gives it each config in force (configure) and tells it of each publish (published), and
 * stops it with the sources.
 */
#ifndef TERN_UPDATE_UPDATE_H
#define TERN_UPDATE_UPDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "tern/answer/answer.h"
#include "tern/common/compiler.h"
#include "tern/source/zone_source.h"

typedef struct update update_t;

/* How long an answered change may take to be published before the client is told SERVFAIL (it
 * is in the journal then, and is served once the loader catches up): a build of a large signed
 * zone takes seconds. */
#define UPDATE_PUBLISH_WAIT_MS 30000

/* Requests waiting for the update thread: an ACME client sends one or two, a provisioning run a
 * few dozen in a row; past this many, the rest are refused (SERVFAIL) at once. */
#define UPDATE_QUEUE_MAX 64

/* The service as ternd adds it to the loader (loader_add_source()); name "update". */
extern const zone_source_ops_t update_source_ops;

/** The service of a source made by update_source_ops (loader_source(l, "update")). */
update_t *update_of(zone_source_t *s);

/* Where answers go: the out thread's hook (xfr_update_done()), from the update thread. */
typedef void (*update_reply_fn)(void *ctx, uint64_t token, unsigned rcode);

/** Before the loader starts: the view the workers answer from (loader_published()) and where
 * answers go. */
void update_wire(update_t *u, const answer_view_t *const *published, update_reply_fn reply,
                 void *reply_ctx);

/**
 * Any thread (the transfer service's out thread): queue an UPDATE (copied), signed with TSIG key
 * `key` (its name, verified by the caller; NULL: unsigned), from peer. Its rcode comes back
 * through the reply hook with token. False when the queue is full or the service is stopped:
 * the caller answers by itself.
 */
bool update_submit(update_t *u, const uint8_t *msg, size_t len, const char *key,
                   const struct sockaddr_storage *peer, uint64_t token);

/**
 * Any thread but the update thread (the HTTP API): apply an UPDATE message the caller built
 * (unsigned) on behalf of `who` ("api key NAME from ADDR"), whom the caller has authorised for
 * the zone: the zone's allow_update is not consulted; everything else is as for an UPDATE
 * received (the zone must take changes, update_max_records, update_rate per who, the checks, the
 * journal, the publish, the audit). Blocks until the change is served or refused (at most
 * UPDATE_PUBLISH_WAIT_MS and the change's own work). Returns the rcode, with why for anything but
 * a change made ("nothing to change" for NOERROR without one).
 */
unsigned update_apply_msg(update_t *u, const uint8_t *msg, size_t len, const char *who, char *why,
                          size_t whylen);

/**
 * Any thread (ternctl): write zone key's file back from the version served and empty its
 * journal (source_journal_flush()), on the update thread between two updates, waiting for it
 * at most UPDATE_PUBLISH_WAIT_MS. 0; TERN_ENOENT (no such zone taking updates); TERN_ETIMEDOUT;
 * or the write's error, with msg saying what happened.
 */
int update_flush(update_t *u, const char *key, char *msg, size_t msglen) TERN_WUR;

typedef struct update_stats {
    uint64_t received;     /* UPDATE messages taken */
    uint64_t applied;      /* changes published (NOERROR with a new serial) */
    uint64_t unchanged;    /* NOERROR, nothing to change */
    uint64_t rcode[16];    /* answers by rcode */
    uint64_t refused_rate; /* over update_rate */
    uint64_t queue_full;   /* not taken: the queue was full */
    uint64_t flushes;      /* zone files written back */
    uint64_t journal_errors;
} update_stats_t;

/** The counters (any thread). */
void update_get_stats(update_t *u, update_stats_t *out);

/* One applied change, as `ternctl zone` lists it. */
typedef struct update_audit {
    int64_t when; /* wall clock, s */
    char who[128];
    uint32_t from, to;
    size_t removed, added;
} update_audit_t;

/** Any thread: remember a change for `ternctl zone` — an applied update, or one made elsewhere
 * (the API's zone creates, deletes and label writes). */
void update_audit_note(update_t *u, const char *key, const update_audit_t *a);

/** The last changes of zone key, newest first: at most max into out; how many. Any thread. */
size_t update_recent(update_t *u, const char *key, update_audit_t *out, size_t max);

#endif
