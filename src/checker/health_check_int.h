/*
 * health_check_int.h — private to src/health: the checker (health_check.c) and its probes
 * (health_probe.c), which make one check each: an HTTP(S) request through libcurl, a TCP connect,
 * an ICMP echo.
 *
 * A job is one check in flight; the checker owns it (its slot, its epoll registration, its
 * result), the probe fills it in. Both run on the checker thread only.
 */
#ifndef TERN_HEALTH_HEALTH_CHECK_INT_H
#define TERN_HEALTH_HEALTH_CHECK_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "health_curl.h"
#include "health_int.h"

/* curl's error buffer. */
#define ERRBUF CURL_ERROR_SIZE

struct job {
    struct ep *e; /* referenced while busy */
    unsigned idx; /* in health_checker.jobs: the epoll tag of its socket */
    bool busy;
    CURL *easy;
    struct curl_slist *connect_to;
    /* http(s): the status of the final response, noted when its headers end and the transfer
     * is stopped (header_end()); 0 until then */
    long http_status;
    /* load shedding (health_load.h): the reading this check brought (HEALTH_LOAD_UNKNOWN: none),
     * and for a load in the JSON body the body read so far (at most HEALTH_LOAD_BODY_MAX;
     * body_over: it was longer, the load is unknown) */
    uint32_t load;
    char *body;
    size_t body_len, body_cap;
    bool body_over;
    int fd;    /* tcp, icmp */
    bool sent; /* icmp: the request went out */
    uint16_t seq;
    int64_t start_us, deadline_us;
    char err[ERRBUF];
};

/** Set up the HTTP(S) check of job j on its easy handle j->easy (fresh or reset): the URL, the
 * connection to the record's address, the timeouts, the callbacks that stop at the headers.
 * ca_file may be NULL. 0 or TERN_ENOMEM. The caller adds the handle to its multi. */
int health_probe_http(struct job *j, const char *ca_file);

/** The result of j's finished transfer (rc, libcurl's code for it): true when the status is one
 * the spec expects; false with j->err set otherwise. Also sets j->load from the JSON body when
 * the spec reads its load there (a header load was read as the headers came). */
bool health_probe_http_result(struct job *j, CURLcode rc, CURL *easy);

/** TCP: a non-blocking connect; done when the socket turns writable. Returns 1 when the result
 * is already known (j->err set on failure, "" on success), 0 when it is pending on j->fd. */
int health_probe_tcp(struct job *j);

/** ICMP echo through a ping socket; *seq numbers the requests (advanced once the socket is
 * open), *logged says whether a forbidden ping socket was logged already. Returns as
 * health_probe_tcp(). */
int health_probe_icmp(struct job *j, uint16_t *seq, bool *logged);

/** TCP or ICMP job j's socket reported revents: 1 the check passed, 0 it failed (j->err set),
 * -1 nothing yet (an ICMP packet that is not our reply). */
int health_probe_ready(struct job *j, short revents);

#endif
