#!/usr/bin/python3
"""Write the seed corpus of fuzz_answer (one binary DNS query per file in corpus/) and its
libFuzzer dictionary fuzz_answer.dict (the zones' labels in wire form, types, EDNS fragments).

The seeds cover the cases of the answer spec against fuzz.zone / fuzz_other.zone (exact
matches, NODATA, ENT, NXDOMAIN, CNAME chains and loops, wildcards, delegations, DS, additional
records, ANY, CHAOS, truncation) and of the parser (EDNS, ECS, cookies, malformed headers and
names), DNAME synthesis, loops and YXDOMAIN, glue that does not fit. Deterministic: running it again rewrites the same bytes.

    /usr/bin/python3 tests/fuzz/make_corpus.py [OUTDIR]     (the dictionary goes beside this file)
"""

import os
import re
import struct
import sys

import dns.message

HERE = os.path.dirname(os.path.abspath(__file__))
Z = "fuzz.test"


def query(name, rdtype="A", rdclass="IN", edns=None, do=False, options=None, qid=0x2a2a):
    # dnspython turns EDNS on as soon as any EDNS argument is given, so pass them only then
    kw = {}
    if edns is not None or do:
        kw = dict(use_edns=0, want_dnssec=do, payload=1232, options=options)
    q = dns.message.make_query(name, rdtype, rdclass, **kw)
    q.id = qid
    return q.to_wire()


def wire_name(text):
    out = b""
    for label in text.rstrip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def header(flags=0x0100, qd=1, an=0, ns=0, ar=0, qid=0x2a2a):
    return struct.pack("!HHHHHH", qid, flags, qd, an, ns, ar)


def question(name="www." + Z, qtype=1, qclass=1):
    return wire_name(name) + struct.pack("!HH", qtype, qclass)


def opt_rr(payload=1232, version=0, do=False, options=b""):
    ttl = (version << 16) | (0x8000 if do else 0)
    return b"\0" + struct.pack("!HHIH", 41, payload, ttl, len(options)) + options


def ecs(family, source, scope, addr):
    body = struct.pack("!HBB", family, source, scope) + addr
    return struct.pack("!HH", 8, len(body)) + body


def seeds():
    s = {}
    # answers
    s["exact_a"] = query("www." + Z)
    s["exact_aaaa"] = query("www." + Z, "AAAA")
    s["apex_soa"] = query(Z, "SOA")
    s["apex_ns"] = query(Z, "NS")
    s["apex_mx_additional"] = query(Z, "MX", edns=0)
    s["txt"] = query("txt." + Z, "TXT")
    s["srv_additional"] = query("_sip._udp." + Z, "SRV")
    s["nodata"] = query("www." + Z, "MX")
    s["ent"] = query("c.ent." + Z, "A")
    s["nxdomain"] = query("nothere." + Z, "A")
    s["cname_chain"] = query("chain1." + Z, "A")
    s["cname_qtype_cname"] = query("chain1." + Z, "CNAME")
    s["cname_other_zone"] = query("to-other-back." + Z, "A")
    s["cname_outside"] = query("to-outside." + Z, "A")
    s["cname_dangling"] = query("dangling." + Z, "A")
    s["cname_loop"] = query("loop1." + Z, "A")
    s["cname_self"] = query("self." + Z, "AAAA")
    s["wildcard_a"] = query("foo.wild." + Z, "A")
    s["wildcard_nodata"] = query("foo.wild." + Z, "AAAA")
    s["wildcard_cname"] = query("a.b.wcname." + Z, "A")
    s["wildcard_blocked_nx"] = query("x.sub.wild." + Z, "A")
    s["referral"] = query("host.deleg." + Z, "A")
    s["ds_at_cut"] = query("signed." + Z, "DS")
    s["ds_nodata_at_cut"] = query("deleg." + Z, "DS")
    s["any"] = query(Z, "ANY")
    s["mixed_case"] = query("WwW.FuZz.TeSt", "A")
    s["refused_outside"] = query("www.example.org", "A")
    s["chaos_version"] = query("version.bind", "TXT", "CH")
    s["chaos_id"] = query("id.server", "TXT", "CH")
    s["truncated_big"] = query("big." + Z, "TXT")
    s["edns_big_do"] = query("big." + Z, "TXT", edns=0, do=True)
    s["unknown_type"] = query("unknown." + Z, "TYPE65000")
    s["axfr"] = query(Z, "AXFR")
    s["deep"] = query("a.b.c.d.e.f.g.h.i.j.deep." + Z, "A")
    s["cname_too_long"] = query("long1." + Z, "A")
    s["additional_overflow"] = query("mxmany." + Z, "MX")
    s["child_ds_from_parent"] = query("child." + Z, "DS")
    s["child_data"] = query("www.child." + Z, "A")
    s["sibling_glue"] = query("x.sib." + Z, "A")
    s["long_name"] = query("a123456789012345678901234567890123456789012345678901234567890."
                           "b123456789012345678901234567890123456789012345678901234567890."
                           "c123456789012345678901234567890123456789012345678901234567890." + Z)
    s["dname"] = query("a.dname." + Z, "A")
    s["dname_cname"] = query("A.DName." + Z, "CNAME")
    s["dname_other_zone"] = query("www.dn-other." + Z, "A")
    s["dname_loop"] = query("x.dn-loop." + Z, "A")
    s["dname_grow"] = query("x.dn-grow." + Z, "A")
    s["dname_yxdomain"] = query("y" * 60 + "." + "y" * 60 + ".dn-yx." + Z, "A")
    s["glue_tc"] = query("x.bigdeleg." + Z, "A")
    s["qclass_any"] = query("www." + Z, "A", "ANY")
    s["opcode15_header_only"] = header(flags=15 << 11, qd=0)
    # EDNS options
    s["ecs_v4"] = header(ar=1) + question() + opt_rr(options=ecs(1, 24, 0, b"\xc0\x00\x02"))
    s["ecs_v6"] = header(ar=1) + question() + opt_rr(
        options=ecs(2, 56, 0, b"\x20\x01\x0d\xb8\x00\x01\x02"))
    s["ecs_bad_prefix"] = header(ar=1) + question() + opt_rr(
        options=ecs(1, 33, 0, b"\xc0\x00\x02\x01\x00"))
    s["cookie"] = header(ar=1) + question() + opt_rr(
        options=struct.pack("!HH", 10, 8) + b"\x01\x02\x03\x04\x05\x06\x07\x08")
    s["edns_payload_100"] = header(ar=1) + question("_sip._udp." + Z, 33) + opt_rr(payload=100)
    s["edns_version_1"] = header(ar=1) + question() + opt_rr(version=1)
    s["two_opt"] = header(ar=2) + question() + opt_rr() + opt_rr()
    # TSIG-like extra record in the additional section (compressed owner pointing back)
    tsig = b"\xc0\x0c" + struct.pack("!HHIH", 250, 255, 0, 4) + b"\0\0\0\0"
    s["additional_tsig"] = header(ar=1) + question() + tsig
    # malformed
    s["short"] = b"\x2a\x2a\x01\x00\x00\x01"
    s["qr_set"] = header(flags=0x8100) + question()
    s["qdcount_2"] = header(qd=2) + question() + question("mail." + Z)
    s["qdcount_0"] = header(qd=0)
    s["pointer_in_question"] = header() + b"\x03www\xc0\x0c" + struct.pack("!HH", 1, 1)
    s["label_64"] = header() + b"\x40" + b"a" * 64 + wire_name(Z) + struct.pack("!HH", 1, 1)
    s["trailing"] = header() + question() + b"\xde\xad"
    s["notify"] = header(flags=(4 << 11) | 0x0400) + question(Z, 6)
    s["update"] = header(flags=(5 << 11), qd=1, ns=1) + question(Z, 6) + \
        b"\x03new\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4) + b"\xc0\x00\x02\x07"
    s["class_hs"] = header() + question(qclass=4)
    return s


RR_TYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "MX": 15, "TXT": 16, "AAAA": 28, "SRV": 33,
            "DNAME": 39, "OPT": 41, "DS": 43, "IXFR": 251, "AXFR": 252, "ANY": 255}


def dictionary():
    """libFuzzer dictionary entries: every label of the zone files, in wire form."""
    labels = set()
    for f in ("fuzz.zone", "fuzz_other.zone", "fuzz_child.zone"):
        with open(os.path.join(HERE, f)) as zf:
            for line in zf:
                line = line.split(";")[0]
                if line.startswith("$"):
                    continue
                for tok in line.split():
                    for lab in tok.rstrip(".").split("."):
                        if re.fullmatch(r"[A-Za-z0-9_*-]{1,63}", lab) and not lab.isdigit() \
                                and lab.upper() not in RR_TYPES and lab.upper() != "IN":
                            labels.add(lab.lower())
    out = ["# fuzz_answer.dict: libFuzzer dictionary (-dict=), written by make_corpus.py from",
           "# the zones' labels (wire form), record types, EDNS and ECS fragments.",
           '"\\x04fuzz\\x04test\\x00"', '"\\x05other\\x04test\\x00"', '"\\xc0\\x0c"',
           '"\\x07version\\x04bind\\x00"', '"\\x02id\\x06server\\x00"']
    for lab in sorted(labels - {"fuzz", "test", "other"}):
        out.append('"\\x%02x%s"' % (len(lab), lab))
    for code in sorted(set(RR_TYPES.values()) | {3}):  # 3: class CH
        out.append('"\\x00\\x%02x"' % code)
    out += ['"\\x00\\x00\\x29\\x04\\xd0\\x00\\x00\\x80\\x00\\x00\\x00"',  # OPT, DO
            '"\\x00\\x08\\x00\\x07\\x00\\x01\\x18\\x00"',  # ECS IPv4 /24 header
            '"\\x00\\x08\\x00\\x0b\\x00\\x02\\x38\\x00"',  # ECS IPv6 /56 header
            '"\\x00\\x0a\\x00\\x08"']  # cookie header
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
    os.makedirs(out, exist_ok=True)
    for name, data in sorted(seeds().items()):
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(seeds()), out))
    entries = dictionary()
    with open(os.path.join(HERE, "fuzz_answer.dict"), "w") as f:
        f.write("\n".join(entries) + "\n")
    print("wrote %d dictionary entries" % (len(entries) - 2))


if __name__ == "__main__":
    main()
