/*
 * redis_sentinel.h — private to src/redis: what the connection (redis_conn.c) needs to read Redis
 * Sentinel's answers: the node a sentinel address names, the primary of
 * SENTINEL get-master-addr-by-name, and a usable replica among SENTINEL replicas.
 *
 * Owns nothing: pure functions over hiredis replies and strings, no I/O (redis_conn.c sends the
 * commands on its own non-blocking connections). Any thread; no shared state.
 */
#ifndef TERN_REDIS_REDIS_SENTINEL_H
#define TERN_REDIS_REDIS_SENTINEL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

/* One Redis node (a sentinel or a data node): a numeric address, as Sentinel reports them. */
typedef struct redis_node {
    char host[INET6_ADDRSTRLEN];
    uint16_t port;
} redis_node_t;

/** "IP:PORT" or "[V6]:PORT" (the config checked it) into out. false if it is neither. */
bool redis_sentinel_split(const char *addr, redis_node_t *out);

/** The reply of SENTINEL get-master-addr-by-name (an array of ip and port) into out. false for
 * anything else (nil: the master name is unknown to that sentinel). */
bool redis_sentinel_master(const redisReply *r, redis_node_t *out);

/**
 * A usable replica in the reply of SENTINEL replicas (or slaves): an array of flat field/value
 * arrays; usable = flags name none of s_down, o_down, disconnected and master-link-status is ok.
 * prefer, if usable, wins (a node keeps its replica while it stays healthy); else the usable
 * ones are taken in the reply's order from index start % count (a per-process random start
 * spreads a fleet over the replicas). Returns the number of usable replicas (0: out untouched).
 */
size_t redis_sentinel_pick_replica(const redisReply *r, const redis_node_t *prefer, unsigned start,
                                   redis_node_t *out);

/** Whether a and b are the same node. */
bool redis_node_same(const redis_node_t *a, const redis_node_t *b);

/* Room for redis_node_text(): "[V6]:PORT" and its NUL. */
#define REDIS_NODE_TEXT_MAX (INET6_ADDRSTRLEN + 8)

/** n as "IP:PORT" or "[V6]:PORT" into buf; returns buf. */
const char *redis_node_text(const redis_node_t *n, char *buf, size_t len);

/**
 * Why the source moves (buf, returned): Sentinel names node now (a replica when now_replica) in
 * place of was. The same address in a new role (a replica read, then promoted) says so rather
 * than "X instead of X".
 */
const char *redis_sentinel_move_text(char *buf, size_t len, const redis_node_t *now,
                                     bool now_replica, const redis_node_t *was, bool was_replica);

#endif
