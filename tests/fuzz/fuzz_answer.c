/*
 * fuzz_answer.c — libFuzzer target for the whole query path: parse → lookup → write.
 *
 * On the first call it builds a zone table from fuzz.zone (fuzz.test), fuzz_other.zone
 * (other.test) and fuzz_child.zone (child.fuzz.test, delegated from fuzz.test) in the directory
 * $TERN_FUZZ_DIR, or the source directory compiled in as TERN_FUZZ_DIR. Each input is answered
 * four times: over UDP into a buffer of exactly edns_max_udp bytes (so ASan sees any write past
 * the limit), over UDP into a 65535-byte buffer, over TCP into a 65535-byte buffer, and with no
 * table at all (everything REFUSED). Every non-empty response must be a well-formed DNS message
 * (ldns_wire2pkt accepts it), start with the query's id, have QR set, echo the question byte for
 * byte, and respect the size limit of its transport; both UDP answers must be identical. The
 * input and its two halves are also answered as a worker's UDP batch (parse all, prefetch,
 * answer each), which must give answer_query()'s bytes.
 * A broken invariant aborts, which libFuzzer reports as a crash with the input.
 *
 * The same file is linked with replay.c (no libFuzzer) to replay the corpus under ctest.
 */
#include <ldns/ldns.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/answer/answer.h"
#include "tern/answer/select.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_json.h"
#include "tern/zone/zone_table.h"

#ifndef TERN_FUZZ_DIR
#define TERN_FUZZ_DIR "."
#endif

#define TCP_CAP       65535u
#define UDP_EDNS_MAX  1232u /* what ternd advertises by default (ANSWER_EDNS_DEFAULT) */
#define PLAIN_UDP_MAX 512u  /* RFC 1035 §4.2.1, for responses without OPT */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static zone_table_t *table;
static answer_ctx_t ctx;
static uint8_t *out_big;  /* TCP_CAP bytes */
static uint8_t *out_udp;  /* exactly UDP_EDNS_MAX bytes, heap, so ASan catches an overrun */
static uint8_t *out_udp2; /* TCP_CAP bytes, for the same UDP answer with a roomy buffer */
static bool dump;         /* TERN_FUZZ_DUMP=1: print every response (debugging the corpus) */

static const answer_config_t config = {
    .edns_max_udp = UDP_EDNS_MAX,
    .identity = "fuzz-identity",
    .version = "fuzz-version",
};

static void die(const char *what, const uint8_t *data, size_t size)
{
    fprintf(stderr, "fuzz_answer: invariant broken: %s\ninput (%zu bytes): ", what, size);
    for (size_t i = 0; i < size; i++)
        fprintf(stderr, "%02x", data[i]);
    fprintf(stderr, "\n");
    abort();
}

static void load_zone(const char *dir, const char *origin, const char *file)
{
    char path[4096];
    char err[512];
    zone_t *z = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, file);
    int rc = zone_file_load(origin, path, &z, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "fuzz_answer: cannot load %s: %s\n", path, err);
        exit(1);
    }
    if (zone_table_add(table, z) != 0) {
        fprintf(stderr, "fuzz_answer: cannot add zone %s\n", origin);
        exit(1);
    }
}

static void load_json_zone(const char *dir, const char *origin, const char *file)
{
    char path[4096];
    char err[512];
    zone_t *z = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (zone_json_load_file(origin, path, NULL, &z, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_answer: cannot load %s: %s\n", path, err);
        exit(1);
    }
    if (zone_table_add(table, z) != 0) {
        fprintf(stderr, "fuzz_answer: cannot add zone %s\n", origin);
        exit(1);
    }
}

static void setup(void)
{
    const char *dir = getenv("TERN_FUZZ_DIR");
    if (dir == NULL || *dir == '\0')
        dir = TERN_FUZZ_DIR;
    const char *d = getenv("TERN_FUZZ_DUMP");
    dump = d != NULL && strcmp(d, "1") == 0;
    table = zone_table_new();
    out_big = malloc(TCP_CAP);
    out_udp = malloc(UDP_EDNS_MAX);
    out_udp2 = malloc(TCP_CAP);
    if (table == NULL || out_big == NULL || out_udp == NULL || out_udp2 == NULL) {
        fprintf(stderr, "fuzz_answer: out of memory\n");
        exit(1);
    }
    load_zone(dir, "fuzz.test", "fuzz.zone");
    load_zone(dir, "other.test", "fuzz_other.zone");
    load_zone(dir, "child.fuzz.test", "fuzz_child.zone");
    load_json_zone(dir, "geo.test", "fuzz_geo.json"); /* geo-steered RRsets (no databases) */
    if (zone_table_freeze(table) != 0) {
        fprintf(stderr, "fuzz_answer: zone_table_freeze failed\n");
        exit(1);
    }
}

/* Length of the uncompressed name at msg[off..len), or 0 if it is not one. */
static size_t plain_name_len(const uint8_t *msg, size_t len, size_t off)
{
    size_t start = off;
    while (off < len) {
        uint8_t l = msg[off];
        if (l == 0)
            return off + 1 - start;
        if (l > 63)
            return 0;
        off += 1u + l;
    }
    return 0;
}

/* ldns 1.8's wire2pkt, which udp_limit() runs on the raw input, keeps only the last TSIG record
 * of a message and leaks the others (and a few RRs on its error paths): not tern's leaks, and
 * tern's query path never calls ldns, so LeakSanitizer is told to pass over them. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:ldns_rr_new\nleak:ldns_rdf_new_frm_data\n";
}

/* The UDP size a response to this query may have: RFC 6891 §6.2.5, 512 without EDNS, else the
 * client's payload clamped to [512, edns_max_udp]. ldns parses the query independently of tern;
 * when it cannot, the only bound is edns_max_udp. */
static size_t udp_limit(const uint8_t *q, size_t qlen)
{
    ldns_pkt *p = NULL;
    if (ldns_wire2pkt(&p, q, qlen) != LDNS_STATUS_OK)
        return UDP_EDNS_MAX;
    size_t limit = PLAIN_UDP_MAX;
    if (ldns_pkt_edns(p) && ldns_pkt_edns_udp_size(p) > PLAIN_UDP_MAX)
        limit = ldns_pkt_edns_udp_size(p) < UDP_EDNS_MAX ? ldns_pkt_edns_udp_size(p) : UDP_EDNS_MAX;
    ldns_pkt_free(p);
    return limit;
}

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

/* A UDP answer that was not truncated must say what the TCP answer says (the TCP one may only
 * carry more additional records). Transfers are the exception: FORMERR over UDP by design. */
static void check_same_answer(const uint8_t *u, size_t ulen, const uint8_t *t, size_t tlen,
                              const uint8_t *data, size_t size)
{
    if (ulen < 12 || tlen < 12 || (u[2] & 0x02) || rd16(u + 4) != 1)
        return;
    size_t n = plain_name_len(u, ulen, 12);
    if (n == 0 || 12 + n + 4 > ulen)
        return;
    uint16_t qtype = rd16(u + 12 + n);
    if (qtype == 251 || qtype == 252)
        return;
    if (u[2] != t[2] || u[3] != t[3] || rd16(u + 6) != rd16(t + 6) || rd16(u + 8) != rd16(t + 8))
        die("an untruncated UDP answer differs from the TCP answer", data, size);
}

static void check_response(const uint8_t *q, size_t qlen, const uint8_t *r, size_t rlen,
                           answer_transport_t tr, const uint8_t *data, size_t size)
{
    if (rlen == 0)
        return;
    if (rlen < 12)
        die("response shorter than a header", data, size);
    if (qlen < 12)
        die("response to a query shorter than a header", data, size);
    if (rlen > TCP_CAP)
        die("response longer than 65535", data, size);
    if (r[0] != q[0] || r[1] != q[1])
        die("response id differs from the query id", data, size);
    if (!(r[2] & 0x80))
        die("response without QR", data, size);
    if ((r[2] & 0x78) != (q[2] & 0x78))
        die("response opcode differs from the query opcode", data, size);
    if ((r[3] & 0x80))
        die("RA set", data, size);

    ldns_pkt *p = NULL;
    if (ldns_wire2pkt(&p, r, rlen) != LDNS_STATUS_OK)
        die("ldns_wire2pkt rejects the response", data, size);
    bool opt = ldns_pkt_edns(p); /* ldns moves the OPT record into the edns fields */
    if (dump) {
        printf(";; %s response, %zu bytes\n", tr == ANSWER_UDP ? "UDP" : "TCP", rlen);
        ldns_pkt_print(stdout, p);
    }
    ldns_pkt_free(p);

    if (tr == ANSWER_UDP) {
        if (rlen > UDP_EDNS_MAX)
            die("UDP response larger than edns_max_udp", data, size);
        if (!opt && rlen > PLAIN_UDP_MAX)
            die("UDP response without OPT larger than 512", data, size);
        if (rlen > udp_limit(q, qlen))
            die("UDP response larger than the client's payload size", data, size);
    }

    unsigned qd = ((unsigned)r[4] << 8) | r[5];
    if (qd > 1)
        die("QDCOUNT > 1 in a response", data, size);
    if (qd == 1) {
        size_t n = plain_name_len(r, rlen, 12);
        if (n == 0 || 12 + n + 4 > rlen)
            die("response question is not a plain name", data, size);
        if (12 + n + 4 > qlen || memcmp(r + 12, q + 12, n + 4) != 0)
            die("question not echoed byte for byte", data, size);
    }
}

/* A worker's UDP batch (wire_parse_query() of each, answer_prefetch(), answer_parsed() of each) of
 * the input, its first half and its second half, each copied to a buffer of exactly its length:
 * every answer must be answer_query()'s, byte for byte. */
static void check_batch(const answer_view_t *view, const uint8_t *data, size_t size)
{
    static wire_query_t qs[3];
    wire_parse_result_t prs[3];
    const size_t half = size / 2, lens[3] = {size, half, size - half};
    const uint8_t *src[3] = {data, data, data + half};
    uint8_t *pk[3];
    for (int i = 0; i < 3; i++) {
        pk[i] = malloc(lens[i] ? lens[i] : 1);
        if (!pk[i])
            abort();
        memcpy(pk[i], src[i], lens[i]);
        prs[i] = wire_parse_query(&qs[i], pk[i], lens[i]);
    }
    answer_prefetch(view, qs, 3);
    for (int i = 0; i < 3; i++) {
        answer_ctx_seed(&ctx, 1);
        size_t nb = answer_parsed(view, &ctx, &qs[i], prs[i], NULL, pk[i], lens[i], out_udp2,
                                  TCP_CAP, ANSWER_UDP);
        answer_ctx_seed(&ctx, 1);
        size_t nq = answer_query(view, &ctx, NULL, pk[i], lens[i], out_big, TCP_CAP, ANSWER_UDP);
        if (nb != nq || memcmp(out_udp2, out_big, nb) != 0)
            die("a batch answer differs from answer_query()'s", data, size);
    }
    for (int i = 0; i < 3; i++)
        free(pk[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (table == NULL)
        setup();
    answer_view_t view = {.table = table, .cfg = config};
    answer_view_t noview = {.table = NULL, .cfg = config};

    answer_ctx_seed(&ctx, 1); /* rr/weighted picks: the same for every transport */
    size_t n1 = answer_query(&view, &ctx, NULL, data, size, out_udp, UDP_EDNS_MAX, ANSWER_UDP);
    check_response(data, size, out_udp, n1, ANSWER_UDP, data, size);

    answer_ctx_seed(&ctx, 1); /* rr/weighted picks: the same for every transport */
    size_t n2 = answer_query(&view, &ctx, NULL, data, size, out_udp2, TCP_CAP, ANSWER_UDP);
    check_response(data, size, out_udp2, n2, ANSWER_UDP, data, size);
    if (n1 != n2 || memcmp(out_udp, out_udp2, n1) != 0)
        die("UDP answer depends on the buffer capacity", data, size);

    answer_ctx_seed(&ctx, 1); /* rr/weighted picks: the same for every transport */
    size_t n3 = answer_query(&view, &ctx, NULL, data, size, out_big, TCP_CAP, ANSWER_TCP);
    check_response(data, size, out_big, n3, ANSWER_TCP, data, size);
    if ((n1 == 0) != (n3 == 0))
        die("dropped over one transport but not the other", data, size);
    check_same_answer(out_udp, n1, out_big, n3, data, size);

    answer_ctx_seed(&ctx, 1); /* rr/weighted picks: the same for every transport */
    size_t n4 = answer_query(&noview, &ctx, NULL, data, size, out_big, TCP_CAP, ANSWER_UDP);
    check_response(data, size, out_big, n4, ANSWER_UDP, data, size);
    if ((n1 == 0) != (n4 == 0))
        die("dropped with a table but not without one", data, size);

    check_batch(&view, data, size);
    return 0;
}
