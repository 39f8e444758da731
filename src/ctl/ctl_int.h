/*
 * ctl_int.h — private to src/ctl: the control socket as its files see it.
 *
 *   ctl.c       lifecycle (bind, start and stop the threads, remove the socket) and the client
 *               side ternctl uses;
 *   ctl_conn.c  the serving thread's poll() loop over the connections (reading, writing,
 *               deadlines) and the waiter thread that runs reloads;
 *   ctl_cmd.c   the commands: one request line in, one response out, built in memory;
 *   ctl_explain.c, ctl_explain_fmt.c  the explain command (a query through the workers'
 *               pipeline, traced) and its report.
 *
 * Threading: conns[] and accept_resume belong to the serving thread (ctl_stop() touches them
 * only after joining it); asked, done, result and stopping are guarded by mu; everything else is
 * set by ctl_start() (xfr by ctl_set_xfr(), before clients connect) and read-only afterwards.
 */
#ifndef TERN_CTL_CTL_INT_H
#define TERN_CTL_CTL_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "tern/common/buf.h"
#include "tern/common/compiler.h"
#include "tern/ctl/ctl.h"
#include "tern/xfr/xfr.h"

/* Served at once. Control traffic is an operator and a monitoring script or two; 32 leave room
 * for bursts of those (each costs a descriptor and a 1 KiB request buffer), and a client beyond
 * them closes the one that has waited longest for its request line, so idle connections cannot
 * keep anyone out. */
#define CTL_MAX_CONNECTIONS 32

/* ctl_exchange() refuses a larger response: a line per zone is ~150 bytes, so this allows
 * hundreds of thousands of zones while bounding what a confused peer can make ternctl buffer. */
#define CTL_MAX_RESPONSE ((size_t)64 << 20)

/* A response being built: bounded by CTL_MAX_RESPONSE; an append beyond it (or out of memory)
 * fails the buffer and the response becomes "error: out of memory". */
typedef tern_buf_t sb_t;

#define SB_INIT                                                                                    \
    {                                                                                              \
        .max = CTL_MAX_RESPONSE + 1                                                                \
    }
#define sb_append tern_buf_append

/* One client: its request line is read, then its response written, each under a deadline. */
typedef struct ctl_conn {
    enum { CONN_FREE, CONN_READ, CONN_RELOAD, CONN_WRITE } state;
    int fd;
    int64_t deadline; /* monotonic ms: READ, for the whole line; WRITE, the whole response */
    uint64_t ticket;  /* RELOAD: answered by the first reload done with done >= ticket */
    size_t len;       /* READ: bytes in req */
    char req[CTL_MAX_REQUEST + 1];
    sb_t resp; /* WRITE: the response, sent from off */
    size_t off;
} ctl_conn_t;

struct ctl {
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    loader_t *loader; /* may be NULL (tests) */
    server_t *server; /* may be NULL (tests) */
    xfr_t *xfr;       /* zone transfers; may be NULL */
    unsigned workers;
    int lfd;   /* the listening socket */
    int evfd;  /* ctl_stop() writes it */
    dev_t dev; /* identity of the socket file we bound, so ctl_stop() removes only ours */
    ino_t ino;
    int64_t start_ms; /* monotonic, for the uptime */
    int64_t start_wall;
    pthread_t thread;
    int64_t accept_resume; /* after a failed accept(), accept again from then on (monotonic) */
    ctl_conn_t conns[CTL_MAX_CONNECTIONS]; /* the serving thread's */
    /* The waiter thread runs the reloads asked for, so that a reload (which waits for the
     * loader) holds up no other request. */
    pthread_t waiter;
    pthread_mutex_t mu; /* guards asked, done, result, stopping */
    pthread_cond_t cv;  /* asked moved, or stopping */
    uint64_t asked;     /* reload tickets handed out */
    uint64_t done;      /* the last ticket the last finished reload answers */
    sb_t result;        /* that reload's whole response */
    bool stopping;
    int donefd; /* eventfd: the waiter has a result */
    /* explain (ctl_explain.c): the serving thread's own answer context, kept from one explain
     * to the next (its signature cache with it), made on first use; NULL until then */
    struct ctl_explain *explain;
};

/** Append one printf-formatted line and its "\n" to b. Control characters that came in through a
 * name, a path or an error message are written as '?', so one line stays one line. (ctl_cmd.c) */
void ctl_cmd_line(sb_t *b, const char *fmt, ...) TERN_PRINTF(2, 3);

/** The whole response to one request line (NUL-terminated, without its "\n"; split in place)
 * appended to resp. A reload waits for the loader: only the waiter thread asks for one.
 * (ctl_cmd.c) */
void ctl_cmd_dispatch(ctl_t *c, char *line, sb_t *resp);

/** explain NAME [TYPE] --client ADDR [--ecs PREFIX] [--do] [--tcp] [--json]: the running
 * pipeline's answer to that query and why (argv as split, NULL-terminated). (ctl_explain.c) */
void ctl_explain(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen);

/** Free what explain kept in c (the serving thread has stopped). (ctl_explain.c) */
void ctl_explain_free(ctl_t *c);

/** The serving thread (pthread start routine, arg c): runs until ctl_stop() writes c->evfd.
 * (ctl_conn.c) */
void *ctl_conn_main(void *arg);

/** The waiter thread (arg c): runs the reloads asked for, one at a time, until c->stopping.
 * (ctl_conn.c) */
void *ctl_conn_waiter(void *arg);

/** Hand every finished reload's response to the connections that asked before it started.
 * Takes mu. (ctl_conn.c) */
void ctl_conn_deliver_reloads(ctl_t *c);

/** Close k's socket, free its response; the slot is free again. (ctl_conn.c) */
void ctl_conn_close(ctl_conn_t *k);

#endif
