#!/usr/bin/python3
"""Write the seed inputs of fuzz_xfr (tests/fuzz/fuzz_xfr.c) into tests/fuzz/corpus_xfr/.

An input is a mode byte (bit 0: AXFR, else IXFR against fuzz.zone; bit 1: check TSIG too) and
messages in TCP framing (2-byte length, bytes). Seeds: a whole AXFR of fuzz.zone in several
messages, an IXFR delta from its serial, an up-to-date IXFR, an AXFR-style IXFR, the same AXFR
signed with the target's key, and a few broken ones (cut short, wrong id, an RCODE). The fuzzer
mutates from there; the replay under ctest runs each once.

    /usr/bin/python3 tests/fuzz/make_xfr_corpus.py
"""
import base64
import os
import struct

import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset
import dns.tsig
import dns.tsigkeyring
import dns.zone

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus_xfr")
ORIGIN = dns.name.from_text("fuzz.test.")
SERIAL = 2024010101
KEY = dns.tsigkeyring.from_text({"fuzz.key": base64.b64encode(b"secret" * 4).decode()})


def zone_rrsets():
    z = dns.zone.from_file(os.path.join(HERE, "fuzz.zone"), origin=ORIGIN, relativize=False,
                           check_origin=False)
    soa = None
    rest = []
    for name, node in z.nodes.items():
        for rds in node.rdatasets:
            rrs = dns.rrset.from_rdata_list(name, rds.ttl, list(rds))
            if rds.rdtype == dns.rdatatype.SOA and name == ORIGIN:
                soa = rrs
            else:
                rest.append(rrs)
    return soa, rest


def messages(qtype, sections, per=8, key=False):
    q = dns.message.make_query(ORIGIN, qtype)
    q.id = 0x1234
    out = []
    ctx = None
    for i in range(0, len(sections), per):
        r = dns.message.make_response(q)
        r.answer = sections[i:i + per]
        if key:
            r.use_tsig(KEY, keyname="fuzz.key", algorithm=dns.tsig.HMAC_SHA256)
            w = r.to_wire(multi=True, tsig_ctx=ctx)
            ctx = r.tsig_ctx
        else:
            w = r.to_wire()
        out.append(w)
    return out


def frame(mode, msgs):
    return bytes([mode]) + b"".join(struct.pack("!H", len(m)) + m for m in msgs)


def main():
    os.makedirs(OUT, exist_ok=True)
    soa, rest = zone_rrsets()
    new_soa = dns.rrset.from_text(ORIGIN, 300, "IN", "SOA",
                                  soa[0].to_text().replace(str(SERIAL), str(SERIAL + 1)))
    axfr = messages("AXFR", [soa] + rest + [soa])
    removed = rest[0]
    added = dns.rrset.from_text("fuzz-added.fuzz.test.", 300, "IN", "A", "192.0.2.200")
    ixfr = messages("IXFR", [new_soa, soa, removed, new_soa, added, new_soa])
    seeds = {
        "axfr": frame(1, axfr),
        "axfr_tsig": frame(3, messages("AXFR", [soa] + rest + [soa], key=True)),
        "ixfr_delta": frame(0, ixfr),
        "ixfr_up_to_date": frame(0, messages("IXFR", [soa])),
        "ixfr_axfr_style": frame(0, messages("IXFR", [new_soa] + rest + [new_soa])),
        "axfr_cut": frame(1, axfr)[:-9],
        "axfr_no_end": frame(1, axfr[:-1]),
    }
    bad = dns.message.make_response(dns.message.make_query(ORIGIN, "AXFR"))
    bad.id = 0x1234
    bad.set_rcode(dns.rcode.NOTAUTH)
    seeds["axfr_notauth"] = frame(1, [bad.to_wire()])
    wrong = bytearray(axfr[0])
    wrong[0:2] = b"\x43\x21"
    seeds["axfr_wrong_id"] = frame(1, [bytes(wrong)] + axfr[1:])
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(seeds), OUT))


if __name__ == "__main__":
    main()
