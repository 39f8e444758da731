/*
 * limit_addr.c — see limit.h ("addresses"): a client address against a prefix list, and an
 * address as text, for the services that check peers outside the query path (transfers,
 * updates).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "tern/limit/limit.h"

bool limit_prefix_match(const config_prefix_list_t *l, const struct sockaddr_storage *ss)
{
    uint8_t a[16];
    unsigned fam;
    if (ss->ss_family == AF_INET) {
        memcpy(a, &((const struct sockaddr_in *)ss)->sin_addr, 4);
        fam = 4;
    } else {
        const struct in6_addr *v6 = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(v6)) {
            memcpy(a, v6->s6_addr + 12, 4);
            fam = 4;
        } else {
            memcpy(a, v6->s6_addr, 16);
            fam = 6;
        }
    }
    for (size_t i = 0; i < l->n; i++) {
        const config_prefix_t *p = &l->p[i];
        if (p->family != fam)
            continue;
        unsigned full = p->len / 8, rest = p->len % 8;
        if (memcmp(a, p->addr, full) != 0)
            continue;
        if (rest && ((a[full] ^ p->addr[full]) & (uint8_t)(0xFF << (8 - rest))))
            continue;
        return true;
    }
    return false;
}

void limit_addr_text(const struct sockaddr_storage *ss, char *out, size_t len)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (ss->ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, ip, sizeof(ip));
        port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, ip, sizeof(ip));
        port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    }
    snprintf(out, len, "%s@%u", ip, port);
}
