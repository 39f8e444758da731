/*
 * redis_sentinel.c — see redis_sentinel.h.
 */
#include "redis_sentinel.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* Sentinel's replica list is a few entries; more than this is not a real deployment, and the
 * bound keeps the choice a fixed-size pass. */
#define MAX_REPLICAS 64

static bool parse_port(const char *s, size_t n, uint16_t *port)
{
    unsigned long v = 0;
    if (n == 0 || n > 5)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v == 0 || v > 65535)
        return false;
    *port = (uint16_t)v;
    return true;
}

/* host (n bytes, brackets already removed) and port text into out, if host is numeric. */
static bool set_node(const char *host, size_t n, const char *port, size_t pn, redis_node_t *out)
{
    struct in_addr a4;
    struct in6_addr a6;
    redis_node_t v;
    if (n == 0 || n >= sizeof(v.host) || !parse_port(port, pn, &v.port))
        return false;
    memcpy(v.host, host, n);
    v.host[n] = '\0';
    if (inet_pton(AF_INET, v.host, &a4) != 1 && inet_pton(AF_INET6, v.host, &a6) != 1)
        return false;
    *out = v;
    return true;
}

bool redis_sentinel_split(const char *addr, redis_node_t *out)
{
    const char *colon = strrchr(addr, ':');
    if (!colon)
        return false;
    size_t hl = (size_t)(colon - addr);
    if (addr[0] == '[') {
        if (hl < 2 || addr[hl - 1] != ']')
            return false;
        return set_node(addr + 1, hl - 2, colon + 1, strlen(colon + 1), out);
    }
    return set_node(addr, hl, colon + 1, strlen(colon + 1), out);
}

static bool is_str(const redisReply *r)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

bool redis_sentinel_master(const redisReply *r, redis_node_t *out)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !is_str(r->element[0]) ||
        !is_str(r->element[1]))
        return false;
    return set_node(r->element[0]->str, r->element[0]->len, r->element[1]->str, r->element[1]->len,
                    out);
}

/* The value of field name in a flat field/value array, or NULL. */
static const redisReply *field(const redisReply *e, const char *name)
{
    if (e->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < e->elements; i += 2)
        if (is_str(e->element[i]) && strcmp(e->element[i]->str, name) == 0)
            return is_str(e->element[i + 1]) ? e->element[i + 1] : NULL;
    return NULL;
}

/* Whether flag is one of the comma-separated flags. */
static bool has_flag(const char *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = flags; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && memcmp(p, flag, n) == 0)
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

size_t redis_sentinel_pick_replica(const redisReply *r, const redis_node_t *prefer, unsigned start,
                                   redis_node_t *out)
{
    redis_node_t ok[MAX_REPLICAS];
    size_t n = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return 0;
    for (size_t i = 0; i < r->elements && n < MAX_REPLICAS; i++) {
        const redisReply *e = r->element[i];
        const redisReply *ip = field(e, "ip"), *port = field(e, "port"), *flags = field(e, "flags"),
                         *link = field(e, "master-link-status");
        if (!ip || !port || !flags || !link || strcmp(link->str, "ok") != 0 ||
            has_flag(flags->str, "s_down") || has_flag(flags->str, "o_down") ||
            has_flag(flags->str, "disconnected"))
            continue;
        if (set_node(ip->str, ip->len, port->str, port->len, &ok[n]))
            n++;
    }
    if (n == 0)
        return 0;
    for (size_t i = 0; prefer && i < n; i++) {
        if (redis_node_same(&ok[i], prefer)) {
            *out = ok[i];
            return n;
        }
    }
    *out = ok[start % n];
    return n;
}

bool redis_node_same(const redis_node_t *a, const redis_node_t *b)
{
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

const char *redis_node_text(const redis_node_t *n, char *buf, size_t len)
{
    snprintf(buf, len, strchr(n->host, ':') ? "[%s]:%u" : "%s:%u", n->host, n->port);
    return buf;
}

const char *redis_sentinel_move_text(char *buf, size_t len, const redis_node_t *now,
                                     bool now_replica, const redis_node_t *was, bool was_replica)
{
    char a[REDIS_NODE_TEXT_MAX], b[REDIS_NODE_TEXT_MAX];
    const char *role = now_replica ? "a replica" : "the primary";
    if (redis_node_same(now, was)) /* a promotion (or a demotion) of the node read */
        snprintf(buf, len, "Sentinel now names %s %s (read as %s until now)",
                 redis_node_text(now, a, sizeof(a)), role,
                 was_replica ? "a replica" : "the primary");
    else
        snprintf(buf, len, "Sentinel now names %s %s instead of %s", role,
                 redis_node_text(now, a, sizeof(a)), redis_node_text(was, b, sizeof(b)));
    return buf;
}
