/*
 * qlog_rec.h — one logged query as the workers hand it to the log writer (tern/qlog/qlog.h):
 * a fixed header, then the query's wire bytes and the response's. Workers fill it in place in
 * their ring (no allocation, no formatting); the writer thread turns it into a dnstap frame
 * (tern/qlog/dnstap.h) and/or a request-log line (tern/qlog/reqlog.h).
 *
 * Addresses are in network byte order: IPv4 in the first 4 bytes of the 16. Times are wall
 * clock nanoseconds since the epoch (the worker's clock for the batch the query came in).
 */
#ifndef TERN_QLOG_QLOG_REC_H
#define TERN_QLOG_QLOG_REC_H

#include <stdint.h>

/* Query plus response bytes one record keeps. A response that does not fit beside its query is
 * logged without its bytes (QLOG_F_RESPONSE_CUT); a query that does not fit is cut the same way
 * (QLOG_F_QUERY_CUT: its qname/qtype fields still say what was asked). */
#define QLOG_WIRE_MAX 4096u

enum qlog_flags {
    QLOG_F_TCP = 1u << 0,          /* else UDP */
    QLOG_F_RESPONSE = 1u << 1,     /* a response was sent (else dropped: rcode says why) */
    QLOG_F_QUERY_CUT = 1u << 2,    /* the query's bytes are not kept (qlen 0) */
    QLOG_F_RESPONSE_CUT = 1u << 3, /* the response's bytes are not kept (rlen 0) */
    QLOG_F_ECS = 1u << 4,          /* the query had a usable ECS option: ecs_* are set */
    QLOG_F_COUNTRY = 1u << 5,      /* the answer was steered by the client's country: country */
    QLOG_F_ASN = 1u << 6,          /* ... by its ASN: asn */
    QLOG_F_DEST = 1u << 7,         /* a count-single RRset picked one record of several for
                                      the client: dest_* (answer_info_t.pick) */
    QLOG_F_ZONE = 1u << 8,         /* the name asked is in a served zone: domain_id (maybe "") */
    QLOG_F_STEER = 1u << 9,        /* a steering rule beyond redins' ran: steer_* (the answer's
                                      answer_steer_info_t, tern/answer/answer.h) */
};

/* Bytes of the zone's domain_id a record keeps: redins' are UUIDs (36 bytes); a longer id is
 * cut (a few bytes more per record for every query, so no more than a UUID needs). */
#define QLOG_DOMAIN_ID_MAX 40

/* Bytes of a latency-map group name a record keeps: group names are 1..63 characters (the
 * zone's "group" field), so none is cut; only records with QLOG_F_STEER carry them. */
#define QLOG_STEER_GROUP_MAX 64

/* Countries of the picked record a record keeps: redins' records list a handful; a record
 * listing more is logged with its first QLOG_DEST_CC. */
#define QLOG_DEST_CC 8

typedef struct qlog_rec {
    uint32_t size;  /* bytes of this record: header + qlen + rlen, rounded up to 8 */
    uint16_t flags; /* enum qlog_flags */
    uint8_t family; /* 4 or 6: of client and server addresses */
    uint8_t scope;  /* ECS scope prefix of the response (0: none or not steered) */
    uint16_t qtype; /* as asked (0 when the query did not parse) */
    uint16_t rcode; /* full (extended) rcode of the response; 0xFFFF when none was sent */
    uint16_t client_port, server_port;
    uint8_t client_addr[16], server_addr[16];
    uint8_t ecs_family; /* 1 (IPv4) or 2 (IPv6), RFC 7871 */
    uint8_t ecs_source; /* source prefix length */
    uint8_t ecs_addr[16];
    char country[2];       /* ISO 3166 code of the client when QLOG_F_COUNTRY */
    uint32_t asn;          /* the client's ASN when QLOG_F_ASN */
    uint8_t ecs_scope_q;   /* the query's ECS scope prefix (0 in a valid query), with ecs_* */
    uint8_t dest_family;   /* QLOG_F_DEST: 4 or 6, the picked record's address family */
    uint8_t dest_ncc;      /* ... its countries kept in dest_cc (0: it lists none) */
    uint8_t dest_addr[16]; /* ... its address (IPv4 in the first 4 bytes) */
    uint16_t dest_cc[QLOG_DEST_CC];     /* ... its countries, ZONE_CC-packed; 0 is redins' "" */
    uint8_t domain_id_len;              /* QLOG_F_ZONE: bytes of domain_id */
    char domain_id[QLOG_DOMAIN_ID_MAX]; /* ... the zone's (zone_t.domain_id), cut */
    /* QLOG_F_STEER: answer_steer_info_t's fields (steer_rules: its ANSWER_STEER_* bits), the
     * latency group's name copied (steer_group_len bytes, no NUL) */
    uint8_t steer_rules, steer_tier_skipped, steer_sticky_prefix, steer_shed_out;
    uint8_t steer_shed_scaled, steer_latency_how, steer_group_len;
    uint16_t steer_tier;
    uint32_t steer_latency_ms;
    char steer_group[QLOG_STEER_GROUP_MAX];
    int64_t qtime_ns; /* when the query arrived (the worker's batch clock), wall clock */
    int64_t rtime_ns; /* when the response was written */
    uint16_t qlen;    /* query bytes at wire[0..qlen) */
    uint16_t rlen;    /* response bytes at wire[qlen..qlen+rlen) */
    uint8_t wire[];
} qlog_rec_t;

#endif
