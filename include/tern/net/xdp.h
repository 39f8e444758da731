/*
 * xdp.h — the AF_XDP listener's kernel side: the XDP program attached to an interface, and one
 * XSK socket per receive queue with its UMEM, receiving query frames and sending replies in place.
 *
 * Owner: the net module; server.c attaches and opens them for config's xdp: listen:, and each
 * worker (worker.c) polls its share of the sockets.
 * Lifecycle: xdp_attach() loads tern_xdp.bpf.o (xdp_prog.bpf.c) with libxdp, attaches it in native
 * (driver) mode and fills its port map; xdp_sock_open() creates a queue's UMEM, rings and socket
 * and registers it in the program's socket map; xdp_sock_poll() serves; xdp_sock_close() before
 * xdp_detach(), which removes the program (nothing stays attached after a clean stop).
 * libxdp's and libbpf's own messages go to tern's log (their warnings at info, the rest at debug).
 * Threading: an xdp_t is set up and torn down by one control thread; each xdp_sock_t belongs to
 * one worker thread, which alone polls it (the rings are single-producer, single-consumer).
 * xdp_sock_poll() allocates nothing; its only syscalls are the wakeups the kernel asks for
 * (need-wakeup) and poll() when idle.
 */
#ifndef TERN_NET_XDP_H
#define TERN_NET_XDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/net/xdp_frame.h"

typedef struct xdp xdp_t;
typedef struct xdp_sock xdp_sock_t;

/* Served ports per interface: mirrors TERN_XDP_PORTS_MAX in xdp_prog.bpf.c. */
#define XDP_PORTS_MAX 16

/* Counters of one socket, written by its worker only (read them from it, or tolerate tearing). */
typedef struct xdp_sock_stats {
    uint64_t rx;         /* frames received from the RX ring */
    uint64_t tx;         /* replies put on the TX ring */
    uint64_t not_ours;   /* refused by xdp_frame_parse() (malformed, fragment, other port) */
    uint64_t no_answer;  /* the handler sent no reply and did not pass the query on */
    uint64_t tx_full;    /* replies dropped: no room on the TX ring */
    uint64_t fill_short; /* times the fill ring could not be refilled completely */
} xdp_sock_stats_t;

/* The kernel's counters of one socket (XDP_STATISTICS): frames it could not hand to the worker. */
typedef struct xdp_sock_kstats {
    uint64_t rx_ring_full; /* dropped: the RX ring was full (the worker fell behind) */
    uint64_t fill_empty;   /* frames that found no free buffer on the fill ring */
    uint64_t rx_dropped;   /* dropped for other reasons (a frame too large for its buffer) */
    uint64_t invalid;      /* RX and TX descriptors the kernel found invalid (a bug of ours) */
} xdp_sock_kstats_t;

/* Frames per poll: amortises the ring index updates and the TX wakeup over a batch, as recvmmsg
 * does on the socket path, and is what the handler answers at once (the answer path prefetches
 * the whole batch's zone data before the first answer waits on it); small enough that the first
 * query of a batch waits little. ANSWER_PREFETCH_MAX covers it. */
#define XDP_BATCH 64

/* One query of a batch, for the handler: who asked (flow), and its DNS payload at buf (len bytes,
 * already moved to where the reply's payload goes). The handler writes the reply there (at most
 * cap bytes) and sets out to its length, or 0 to send nothing; passed with out 0 says the query
 * was passed on to be answered elsewhere (not a drop). */
typedef struct xdp_query {
    xdp_frame_flow_t flow;
    uint8_t *buf;
    size_t len;
    size_t cap;
    size_t out;
    bool passed;
} xdp_query_t;

/**
 * The batch handler: answer the n (<= XDP_BATCH) queries qs of one received batch, each in place
 * (xdp_query_t). Runs on the polling thread, once per batch.
 */
typedef void (*xdp_batch_fn)(void *arg, xdp_query_t *qs, unsigned n);

/* One received frame of a batch: its bytes (len of them, cap of room from data to the end of its
 * UMEM frame). xdp_frames_answer() sets len to the reply frame's length, 0 for none. */
typedef struct xdp_frame_ref {
    uint8_t *data;
    uint32_t len;
    uint32_t cap;
} xdp_frame_ref_t;

/**
 * Answer n (<= XDP_BATCH) received frames in place, for an interface of the given MTU: parse each
 * (xdp_frame_parse(); not ours: stats->not_ours, len 0) and move its DNS payload to where the
 * reply's goes, let handler answer all of them in one call, then write each reply's headers
 * around it (none: len 0, and stats->no_answer unless the handler passed the query on). No kernel,
 * no allocation: xdp_sock_poll()'s work between its rings, and what the tests drive over synthetic
 * frames.
 */
void xdp_frames_answer(xdp_frame_ref_t *frames, unsigned n, size_t mtu, xdp_batch_fn handler,
                       void *arg, xdp_sock_stats_t *stats);

/** Where the build installs the XDP program (<libdir>/tern/tern_xdp.bpf.o), or the path in the
 * environment variable TERN_XDP_OBJ (an uninstalled build, the tests): xdp_attach()'s default. */
const char *xdp_obj_path(void);

/**
 * Load the BPF object at obj_path (NULL: xdp_obj_path()), attach it to ifname in native mode and
 * serve the nports UDP ports (host byte order) over XDP. Returns 0 and *out; TERN_ENOENT (no such
 * interface or object), -EPERM (privilege), TERN_ENOTSUP (the driver refuses native XDP),
 * TERN_EINVAL, or another negative errno, with the reason in err.
 */
int xdp_attach(const char *ifname, const char *obj_path, const uint16_t *ports, size_t nports,
               xdp_t **out, char *err, size_t errlen);

/** Detach the program and free x (NULL: nothing). Close its sockets first. */
void xdp_detach(xdp_t *x);

/**
 * Open the XSK socket of receive queue `queue` of x's interface: UMEM, fill/completion/RX/TX
 * rings, bound with need-wakeup, zero-copy when the driver allows it and copy mode otherwise,
 * and registered in the program's socket map. Returns 0 and *out, or a negative code with err.
 */
int xdp_sock_open(xdp_t *x, uint32_t queue, xdp_sock_t **out, char *err, size_t errlen);

/** Whether s runs in zero-copy mode (false: copy mode). */
bool xdp_sock_zero_copy(const xdp_sock_t *s);

/** The socket's descriptor (for an epoll set; readable when frames wait). */
int xdp_sock_fd(const xdp_sock_t *s);

/** Whether replies of s are still on their way out (the TX ring or the kernel): call
 * xdp_sock_poll() again within a millisecond even without new frames, to kick and reclaim them. */
bool xdp_sock_sending(const xdp_sock_t *s);

/**
 * The receive queues of ifname, one XSK socket each: the driver's channel count (ethtool's
 * ETHTOOL_GCHANNELS through the SIOCETHTOOL ioctl: the larger of its combined and RX counts), or
 * 1 when it cannot say (no such ioctl for the driver, or an error: every interface has queue 0).
 */
unsigned xdp_queue_count(const char *ifname);

/** The socket's counters. */
const xdp_sock_stats_t *xdp_sock_stats(const xdp_sock_t *s);

/** The kernel's counters of s, read with getsockopt(XDP_STATISTICS): any thread (a syscall, so
 * never a worker's). 0, or a negative errno with *out zeroed. */
int xdp_sock_kstats(const xdp_sock_t *s, xdp_sock_kstats_t *out) TERN_WUR;

/** The interface s serves. */
const char *xdp_sock_ifname(const xdp_sock_t *s);

/** The receive queue s serves. */
uint32_t xdp_sock_queue(const xdp_sock_t *s);

/**
 * Serve one batch: reclaim sent frames, refill the fill ring, receive up to XDP_BATCH frames,
 * answer them through one handler call (xdp_frames_answer()) and put the replies on the TX ring
 * at once. When nothing is waiting, wait up to
 * timeout_ms in poll() (0: do not wait). Returns the number of frames received, or a negative
 * errno from poll().
 */
int xdp_sock_poll(xdp_sock_t *s, int timeout_ms, xdp_batch_fn handler, void *arg);

/** Remove s from the socket map and free its socket and UMEM (NULL: nothing). */
void xdp_sock_close(xdp_sock_t *s);

#endif
