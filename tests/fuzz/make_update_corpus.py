#!/usr/bin/python3
"""Write the seed inputs of fuzz_update (tests/fuzz/fuzz_update.c) into tests/fuzz/corpus_update/.

An input is a mode byte (bit 0: the zone is signed by tern) and an UPDATE message for fuzz.test.
Seeds cover each prerequisite kind, each update kind (add, delete RR, RRset, name), the apex
rules, a CNAME beside data, an SOA with a greater serial, TSIG-signed and compressed messages.
The fuzzer mutates from there; the replay under ctest runs each once.

    /usr/bin/python3 tests/fuzz/make_update_corpus.py
"""
import base64
import os

import dns.rdataclass
import dns.tsig
import dns.tsigkeyring
import dns.update

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus_update")
ZONE = "fuzz.test."
KEY = dns.tsigkeyring.from_text({"fuzz.key": base64.b64encode(b"secret" * 4).decode()})


def seeds():
    u = dns.update.UpdateMessage(ZONE)
    u.add("new.fuzz.test.", 60, "A", "192.0.2.7")
    yield "add", u
    u = dns.update.UpdateMessage(ZONE)
    u.delete("www.fuzz.test.", "A", "192.0.2.80")
    u.delete("txt.fuzz.test.", "TXT")
    u.delete("mail.fuzz.test.")
    yield "deletes", u
    u = dns.update.UpdateMessage(ZONE)
    u.present("www.fuzz.test.")
    u.present("www.fuzz.test.", "A")
    u.absent("nothere.fuzz.test.")
    u.absent("www.fuzz.test.", "TXT")
    u.present("www.fuzz.test.", "A", "192.0.2.80")
    u.add("p.fuzz.test.", 60, "TXT", "p")
    yield "prereqs", u
    u = dns.update.UpdateMessage(ZONE)
    u.delete(ZONE)
    u.delete(ZONE, "NS")
    u.delete(ZONE, "SOA")
    u.delete(ZONE, "NS", "ns1.fuzz.test.")
    u.delete(ZONE, "NS", "ns2.fuzz.test.")
    yield "apex", u
    u = dns.update.UpdateMessage(ZONE)
    u.add("www.fuzz.test.", 60, "CNAME", "x.example.")
    u.add("cname.fuzz.test.", 60, "A", "192.0.2.1")
    yield "cname", u
    u = dns.update.UpdateMessage(ZONE)
    u.add(ZONE, 3600, "SOA", "ns1.fuzz.test. hostmaster.fuzz.test. 2024010200 7200 3600 "
                              "1209600 300")
    u.add("_sip._udp.fuzz.test.", 60, "SRV", "1 2 3 sipserver.fuzz.test.")
    u.add("mx.fuzz.test.", 60, "MX", "5 mail.fuzz.test.")
    yield "soa_srv_mx", u
    u = dns.update.UpdateMessage(ZONE, keyring=KEY, keyname="fuzz.key",
                                 keyalgorithm=dns.tsig.HMAC_SHA256)
    u.add("signed.fuzz.test.", 60, "AAAA", "2001:db8::7")
    yield "signed", u
    u = dns.update.UpdateMessage(ZONE)
    u.delete(ZONE, "DNSKEY")
    u.add("other.example.", 60, "A", "192.0.2.1")
    yield "dnssec_notzone", u


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, u in seeds():
        wire = u.to_wire()
        for mode in (0, 1):
            with open(os.path.join(OUT, "%s-%d" % (name, mode)), "wb") as f:
                f.write(bytes([mode]) + wire)


if __name__ == "__main__":
    main()
