/*
 * server.h — the workers: epoll loops answering UDP and TCP.
 *
 * Each worker is a thread with its own epoll instance, its own SO_REUSEPORT UDP socket per listen
 * address (recvmmsg/sendmmsg batches) and its own SO_REUSEPORT TCP listener per address, its own
 * buffers, answer context and connection pool, all allocated before it serves its first query.
 * Workers share only the read-only zone table and configuration. The query path takes no lock
 * and allocates nothing.
 *
 * Lifecycle: server_start() binds every socket (failing fast with a clear message if one cannot
 * be bound) and starts the workers; server_stop() asks them to finish and joins them.
 * The zone table is read through a pointer the caller owns (*table); the runtime issue replaces
 * this with RCU publication.
 */
#ifndef TERN_NET_SERVER_H
#define TERN_NET_SERVER_H

#include "tern/answer/answer.h"
#include "tern/common/compiler.h"
#include "tern/conf/config.h"
#include "tern/zone/zone_table.h"

typedef struct server server_t;

/**
 * Bind and start. cfg and acfg must outlive the server; *table is read by the workers for every
 * batch. Returns NULL after logging why (address in use, bad address...).
 */
server_t *server_start(const config_t *cfg, const answer_config_t *acfg,
                       const zone_table_t *const *table) TERN_WUR;

/** Stop every worker (they finish the batch in hand), join and free. NULL is a no-op. */
void server_stop(server_t *s);

#endif
