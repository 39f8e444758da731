/*
 * ldns_verify.h — the dnssec tests' independent validator: an RRSIG tern made, checked by ldns.
 * Included by one test file each (static functions; cmocka's asserts).
 */
#ifndef TERN_TEST_LDNS_VERIFY_H
#define TERN_TEST_LDNS_VERIFY_H

#include <ldns/ldns.h>

#include "tern/dnssec/dnssec_key.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"

/* An ldns RR from owner, type and one RDATA (wire). */
static inline ldns_rr *mk_rr(const uint8_t *owner, uint16_t type, uint32_t ttl, const uint8_t *rd,
                             size_t rdlen)
{
    uint8_t wire[4096];
    size_t ol = dname_len(owner);
    memcpy(wire, owner, ol);
    size_t p = ol;
    wire[p++] = (uint8_t)(type >> 8);
    wire[p++] = (uint8_t)type;
    wire[p++] = 0;
    wire[p++] = 1;
    wire[p++] = (uint8_t)(ttl >> 24);
    wire[p++] = (uint8_t)(ttl >> 16);
    wire[p++] = (uint8_t)(ttl >> 8);
    wire[p++] = (uint8_t)ttl;
    wire[p++] = (uint8_t)(rdlen >> 8);
    wire[p++] = (uint8_t)rdlen;
    memcpy(wire + p, rd, rdlen);
    p += rdlen;
    ldns_rr *rr = NULL;
    size_t pos = 0;
    assert_int_equal(ldns_wire2rr(&rr, wire, p, &pos, LDNS_SECTION_ANSWER), LDNS_STATUS_OK);
    return rr;
}

/* ldns' verdict on an RRSIG (rdata sig, len) over the RRs of seq picked by offs (or all). */
static inline ldns_status verify(const dnssec_key_t *k, const uint8_t *owner, uint16_t type,
                                 uint32_t ttl, uint16_t count, const uint8_t *seq,
                                 const uint32_t *offs, const uint8_t *sig, size_t siglen)
{
    ldns_rr_list *set = ldns_rr_list_new(), *keys = ldns_rr_list_new(), *good = ldns_rr_list_new();
    const uint8_t *p = seq;
    for (unsigned i = 0; i < count; i++) {
        const uint8_t *r = offs ? seq + offs[i] : p;
        size_t l = (size_t)r[0] << 8 | r[1];
        ldns_rr_list_push_rr(set, mk_rr(owner, type, ttl, r + 2, l));
        p = r + 2 + l;
    }
    ldns_rr *rrsig = mk_rr(owner, WIRE_T_RRSIG, ttl, sig, siglen);
    ldns_rr_list_push_rr(keys, mk_rr(k->owner, WIRE_T_DNSKEY, 3600, k->rdata, k->rdlen));
    ldns_status st = ldns_verify_rrsig_keylist(set, rrsig, keys, good);
    ldns_rr_list_deep_free(set);
    ldns_rr_list_deep_free(keys);
    ldns_rr_list_free(good);
    ldns_rr_free(rrsig);
    return st;
}

#endif
