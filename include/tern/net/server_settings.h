/*
 * server_settings.h — what the workers and their sockets are made with: the listen addresses,
 * the worker count, the TCP limits and UDP batching and steering, as plain data.
 *
 * Owner: the net module (tern/net/server.h, server_bind()). The config parser
 * (conf, config.h) keeps these values in config_t and hands them over with
 * config_server_settings(); this header knows nothing of YAML. Lifecycle: copied into the server
 * at server_bind() and read-only after (every value is restart-only); listen points into the
 * caller's list, which must outlive the server.
 */
#ifndef TERN_NET_SERVER_SETTINGS_H
#define TERN_NET_SERVER_SETTINGS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Every listen address costs two sockets per worker; 32 is far beyond any real deployment and
 * keeps the array fixed-size. */
#define CONFIG_MAX_LISTEN 32

/* Past this, threads outnumber any machine we run on; the bound catches typos like 10000. */
#define CONFIG_MAX_WORKERS 256

/* AF_XDP listener interfaces (xdp: listen:): one program per interface, each with its queues'
 * sockets; 8 covers a host's NICs, and the array stays fixed-size. */
#define CONFIG_MAX_XDP 8

/* IFNAMSIZ - 1: the longest name the kernel gives an interface. */
#define CONFIG_XDP_IFNAME_MAX 15

typedef struct config_listen {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char text[64]; /* as given (or "ip:port" built from a redins server entry), for logs */
    bool udp;      /* serve UDP on this address; at least one of udp, tcp is true */
    bool tcp;      /* serve TCP on this address */
} config_listen_t;

/* Which worker's socket the kernel hands a datagram to (SO_REUSEPORT group of a listen
 * address): its 4-tuple hash (the default: one client stays with one worker), a random one per
 * datagram (even whatever the clients), or the worker of the CPU that received it (with the
 * workers pinned one per CPU: the NIC's receive queue steering decides, as Knot and NSD do). */
typedef enum {
    CONFIG_UDP_STEER_HASH = 0,
    CONFIG_UDP_STEER_RANDOM,
    CONFIG_UDP_STEER_CPU,
} config_udp_steering_t;

/* DNS over TLS (RFC 7858) and zone transfers over it (RFC 9103): the "tls:" block. nlisten 0:
 * no TLS listener. The paths are re-read by server_tls_reload() (SIGHUP); the rest is
 * restart-only. */
typedef struct server_tls_settings {
    const config_listen_t *listen; /* nlisten of them (tcp only); outlive the server */
    size_t nlisten;
    const char *certificate;       /* PEM chain, leaf first */
    const char *key;               /* its PEM private key */
    const char *client_ca;         /* PEM CAs a client certificate is verified against (mutual TLS
                                      for transfers); NULL: no client certificates asked for */
    unsigned max_connections;      /* per worker: the DoT pool's slots (RFC 7766 limits as TCP's) */
    unsigned handshake_timeout_ms; /* accept to finished handshake, else closed */
    unsigned max_handshakes;       /* in progress per worker */
    unsigned max_handshakes_per_client; /* in progress per worker and client prefix */
    bool session_tickets;               /* resumption (RFC 8446 tickets, RFC 5077 for 1.2) */
} server_tls_settings_t;

/* Everything server_bind() reads (config_t's fields of the same names). */
typedef struct server_settings {
    const config_listen_t *listen; /* nlisten of them; outlives the server */
    size_t nlisten;
    unsigned workers;             /* 1..CONFIG_MAX_WORKERS */
    unsigned tcp_idle_timeout;    /* seconds */
    unsigned tcp_max_connections; /* per worker */
    unsigned tcp_max_lifetime;    /* seconds from accept */
    unsigned tcp_max_inflight;    /* answers queued per connection before it pauses */
    unsigned tcp_client_prefix_v4;
    unsigned tcp_client_prefix_v6;
    bool udp_mmsg;         /* recvmmsg/sendmmsg, or one datagram per syscall */
    unsigned udp_steering; /* config_udp_steering_t */
    /* busy polling of the UDP sockets (SO_BUSY_POLL µs, 0 = off; SO_BUSY_POLL_BUDGET;
     * SO_PREFER_BUSY_POLL): see config.c's udp_busy_poll_us */
    unsigned udp_busy_poll_us;
    unsigned udp_busy_poll_budget;
    bool udp_prefer_busy_poll;
    unsigned udp_rcvbuf;   /* SO_RCVBUF(FORCE) of UDP sockets, bytes; 0 = the kernel's default */
    unsigned udp_sndbuf;   /* SO_SNDBUF(FORCE) of UDP sockets, bytes; 0 = the kernel's default */
    unsigned dnssec_cache; /* per-query signatures cached per worker */
    /* AF_XDP (xdp: listen:): UDP to xdp_port on these interfaces is answered from XSK sockets,
     * one worker per receive queue; none = sockets only */
    const char (*xdp_ifaces)[CONFIG_XDP_IFNAME_MAX + 1]; /* nxdp of them; outlive the server */
    size_t nxdp;
    uint16_t xdp_port;         /* the listen addresses' UDP port, 53 when none has one */
    server_tls_settings_t tls; /* DoT listeners and credentials; tls.nlisten 0 = none */
} server_settings_t;

#endif
