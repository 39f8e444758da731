#!/usr/bin/python3
"""Differential test: ternd against NSD and Knot on the same zones.

Starts NSD and Knot (the oracles) and ternd on free loopback ports, all serving the zones of
data/ (diff.test, other.test for cross-zone CNAMEs, child.diff.test delegated from diff.test),
sends every query of data/queries.txt to the three with dnspython (UDP without and with EDNS,
and TCP where the list says so) and compares rcode, header flags (QR AA TC RD RA), the question
(exactly, case included), the EDNS presence, version and DO bit, and each section as a set of RRs
(owner name case-insensitive, TTL, class, type, canonical rdata).

ternd must agree with at least one oracle on every compared part of every query. Where NSD and
Knot disagree with each other the table notes it: that is information about the oracles, not a
failure. Prints one line per query and a final "N passed, N failed"; exits 1 on any failure.

    differential.py --ternd build/ternd [--verbose] [--keep]
    differential.py --only-oracles            # NSD against Knot, no tern
    differential.py --tern-port 5300          # against a tern started by hand on the data/ zones

The ternd binary may also come from the TERND environment variable.
"""

import argparse
import os
import shlex
import shutil
import socket
import struct
import sys
import tempfile
import time

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
ZONES = [("diff.test", "diff.zone"), ("other.test", "other.zone"),
         ("child.diff.test", "child.zone")]
IDENTITY = "tern-test-id"
VERSION = "tern-test"
PARTS = ("rcode", "flags", "question", "answer", "authority", "additional", "edns")
QUERY_TIMEOUT = 2.0
QUERY_TRIES = 2
TOTAL_BUDGET = 240.0  # seconds for all queries; the test gives up (and fails) beyond it


class Query:
    def __init__(self, lineno, text):
        self.lineno = lineno
        self.reason = ""
        if " -- " in text:
            text, self.reason = text.split(" -- ", 1)
            self.reason = self.reason.strip()
        words = shlex.split(text)
        if len(words) < 2:
            raise ValueError("line %d: need NAME TYPE" % lineno)
        self.name, self.rdtype = words[0], words[1].upper()
        self.rdclass = "IN"
        self.edns = None
        self.do = False
        self.transports = ["udp"]
        self.compare = list(PARTS)
        self.any_subset = False
        self.answer_rrs = None
        self.opcode = None   # dns.opcode value, when not QUERY
        self.flags = None    # exact header flags to send (names), when not dnspython's RD
        self.qdcount = None  # QDCOUNT to send: 0 = header only, 2 = the question twice
        for w in words[2:]:
            key, _, value = w.partition("=")
            if key == "class":
                self.rdclass = value.upper()
            elif key == "edns":
                self.edns = int(value)
            elif key == "do":
                self.do = value == "1"
            elif key == "any":
                self.any_subset = value == "1"
            elif key == "answer_rrs":
                self.answer_rrs = int(value)
            elif key == "opcode":
                self.opcode = int(value) if value.isdigit() else dns.opcode.from_text(value)
            elif key == "flags":
                self.flags = [f for f in value.upper().split(",") if f]
            elif key == "qdcount":
                self.qdcount = int(value)
            elif key == "transport":
                self.transports = ["udp", "tcp"] if value == "both" else [value]
            elif key == "compare":
                self.compare = value.split(",")
                unknown = set(self.compare) - set(PARTS)
                if unknown:
                    raise ValueError("line %d: unknown parts %s" % (lineno, unknown))
            else:
                raise ValueError("line %d: unknown key %r" % (lineno, key))
        if self.compare != list(PARTS) and not self.reason:
            raise ValueError("line %d: a narrowed compare= needs a reason after --" % lineno)
        if self.do and self.edns is None:
            self.edns = 1232

    def label(self, edns):
        s = "%s %s" % (self.name, self.rdtype)
        if self.opcode is not None:
            s += " " + dns.opcode.to_text(self.opcode)
        if self.qdcount is not None:
            s += " qd=%d" % self.qdcount
        if self.rdclass != "IN":
            s += " " + self.rdclass
        if edns is not None:
            s += " edns=%d" % edns
        if self.do:
            s += " +do"
        return s

    def variants(self):
        """(transport, EDNS payload or None) pairs to send. A query without edns= is also sent
        over UDP with EDNS 1232, so every case is compared with and without EDNS."""
        out = [(tr, self.edns) for tr in self.transports]
        if self.edns is None and "udp" in self.transports and self.qdcount is None:
            out.append(("udp", 1232))
        return out

    def message(self, edns):
        # dnspython turns EDNS on as soon as any EDNS argument is given: pass them only then
        kw = {}
        if edns is not None:
            kw = dict(use_edns=0, payload=edns, want_dnssec=self.do)
        msg = dns.message.make_query(dns.name.from_text(self.name), self.rdtype, self.rdclass,
                                     **kw)
        if self.opcode is not None:
            msg.set_opcode(self.opcode)
        if self.flags is not None:
            msg.flags = 0
            for f in self.flags:
                msg.flags |= dns.flags.from_text(f)
            if self.opcode is not None:
                msg.set_opcode(self.opcode)
        return msg

    def wire(self, edns):
        """The query as bytes, with QDCOUNT rewritten when qdcount= asks for it."""
        w = self.message(edns).to_wire()
        if self.qdcount is None:
            return w
        qend = 12 + len(dns.name.from_text(self.name).to_wire()) + 4
        question, rest = w[12:qend], w[qend:]
        header = bytearray(w[:12])
        header[4:6] = struct.pack("!H", self.qdcount)
        if self.qdcount == 0:
            header[10:12] = b"\0\0"  # the header alone
            return bytes(header)
        return bytes(header) + question * self.qdcount + rest


def load_queries(path):
    queries = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            queries.append(Query(lineno, line))
    return queries


def ask(server, query, transport, edns):
    """The response of server to query over transport, or the string 'timeout' / 'error: ...'."""
    for _ in range(QUERY_TRIES):
        msg = query.message(edns)
        try:
            if query.qdcount is not None:
                return ask_raw(server, query.wire(edns), transport)
            if transport == "udp":
                return dns.query.udp(msg, servers.LOOPBACK, port=server.port,
                                     timeout=QUERY_TIMEOUT, ignore_trailing=False)
            return dns.query.tcp(msg, servers.LOOPBACK, port=server.port, timeout=QUERY_TIMEOUT)
        except (dns.exception.Timeout, socket.timeout):
            continue
        except Exception as e:  # a malformed answer is a finding, not a crash of the test
            return "error: %s: %s" % (type(e).__name__, e)
    return "timeout"


def ask_raw(server, wire, transport):
    """Send bytes dnspython would not build (a header alone, two questions); parse the answer,
    or summarise its header when dnspython cannot parse it (an opcode it does not know)."""
    data = exchange(server, wire, transport)
    try:
        return dns.message.from_wire(data, ignore_trailing=False)
    except ValueError:
        return header_summary(data)


def header_summary(data):
    """The comparable parts of a response dnspython cannot parse, from its header alone."""
    if len(data) < 12:
        return "error: %d-byte response" % len(data)
    _, flags, qd, an, ns, ar = struct.unpack("!6H", data[:12])
    return {
        "rcode": "%s opcode %d" % (dns.rcode.to_text(flags & 15), flags >> 11 & 15),
        "flags": " ".join(n for n, bit in FLAG_BITS if flags & bit),
        "question": ("QDCOUNT", qd),
        "answer": ("ANCOUNT", an),
        "authority": ("NSCOUNT", ns),
        "additional": ("ARCOUNT", ar),
        "edns": "unparsed",
    }


def answer_count(server, query, transport, edns):
    """ANCOUNT of the server's response as sent (dnspython merges equal RRs when it parses)."""
    data = exchange(server, query.wire(edns), transport)
    return struct.unpack("!H", data[6:8])[0]


def exchange(server, wire, transport):
    """The response bytes of server to the query bytes wire."""
    if transport == "udp":
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(QUERY_TIMEOUT)
            s.sendto(wire, (servers.LOOPBACK, server.port))
            data = s.recv(65535)
    else:
        with socket.create_connection((servers.LOOPBACK, server.port), QUERY_TIMEOUT) as s:
            s.settimeout(QUERY_TIMEOUT)
            s.sendall(struct.pack("!H", len(wire)) + wire)
            head = s.recv(2, socket.MSG_WAITALL)
            data = s.recv(struct.unpack("!H", head)[0], socket.MSG_WAITALL)
    return data


FLAG_BITS = (("qr", dns.flags.QR), ("aa", dns.flags.AA), ("tc", dns.flags.TC),
             ("rd", dns.flags.RD), ("ra", dns.flags.RA), ("ad", dns.flags.AD),
             ("cd", dns.flags.CD))


# presentation form of each (type, canonical rdata) seen, for printing differences
RDATA_TEXT = {}


def section_set(section):
    """A section as a set of (owner, ttl, class, type, canonical rdata). Names compare
    case-insensitively (RFC 4343): owners are lowercased and rdata is in canonical form
    (RFC 4034 §6.2), which lowercases the names inside NS, CNAME, SOA, MX, SRV, ... data."""
    out = set()
    for rrset in section:
        owner = rrset.name.to_text().lower()
        rdtype = dns.rdatatype.to_text(rrset.rdtype)
        for rd in rrset:
            digest = rd.to_digestable()
            RDATA_TEXT[(rdtype, digest)] = rd.to_text()
            out.add((owner, rrset.ttl, dns.rdataclass.to_text(rrset.rdclass), rdtype, digest))
    return frozenset(out)


def summarize(resp):
    """The comparable parts of a response, as a dict part -> hashable value."""
    if isinstance(resp, str):
        return {p: resp for p in PARTS}
    if isinstance(resp, dict):  # header_summary()
        return resp
    return {
        "rcode": dns.rcode.to_text(resp.rcode()) + (
            "" if resp.opcode() == dns.opcode.QUERY else " opcode " +
            dns.opcode.to_text(resp.opcode())),
        "flags": " ".join(n for n, bit in FLAG_BITS if resp.flags & bit),
        "question": tuple((rr.name.to_text(), dns.rdataclass.to_text(rr.rdclass),
                           dns.rdatatype.to_text(rr.rdtype)) for rr in resp.question),
        "answer": section_set(resp.answer),
        "authority": section_set(resp.authority),
        "additional": section_set(resp.additional),
        "edns": (resp.edns, bool(resp.ednsflags & dns.flags.DO)) if resp.edns >= 0 else None,
    }


def show(part, value):
    if isinstance(value, frozenset):
        if not value:
            return "(empty)"
        return "; ".join(sorted("%s %d %s %s %s" % (o, ttl, c, t, RDATA_TEXT[(t, d)])
                                for o, ttl, c, t, d in value))
    return str(value)


def differences(a, b, parts):
    return [p for p in parts if a[p] != b[p]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"),
                    help="path of the ternd binary (or $TERND)")
    ap.add_argument("--queries", default=os.path.join(DATA, "queries.txt"))
    ap.add_argument("--tern-port", type=int,
                    help="compare against a tern already listening on 127.0.0.1:PORT instead "
                    "of starting --ternd (it must serve the data/ zones)")
    ap.add_argument("--only-oracles", action="store_true",
                    help="run NSD and Knot only and report where they disagree")
    ap.add_argument("--verbose", "-v", action="store_true",
                    help="also show the differing parts of queries that pass")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()

    missing = [p for p in ("nsd", "knotd") if servers.find_program(p) is None]
    if missing:
        print("differential: %s not installed; the oracles are required "
              "(apt-get install nsd knot, or .ci/install-deps --test)" % " and ".join(missing))
        return 2
    if not args.only_oracles and not args.tern_port and (
            not args.ternd or not os.access(args.ternd, os.X_OK)):
        print("differential: no ternd binary (--ternd PATH or $TERND), got %r" % args.ternd)
        return 2

    queries = load_queries(args.queries)
    workdir = tempfile.mkdtemp(prefix="tern-diff-")
    zones = [(origin, os.path.join(DATA, f)) for origin, f in ZONES]
    started = []
    tern = None
    try:
        nsd = servers.Nsd(workdir, zones, IDENTITY, VERSION)
        knot = servers.Knot(workdir, zones, IDENTITY, VERSION)
        if args.tern_port:
            tern = servers.External("tern", args.tern_port)
        elif not args.only_oracles:
            tern = servers.Ternd(workdir, zones, os.path.abspath(args.ternd), IDENTITY, VERSION)
        for s in [nsd, knot] + ([tern] if isinstance(tern, servers.Ternd) else []):
            started.append(s)
            s.start("diff.test")
        passed, failed, disagree = run(queries, nsd, knot, tern, args.verbose)
    except RuntimeError as e:
        print("differential: %s" % e)
        return 2
    finally:
        for s in started:
            s.stop()
        if args.keep:
            print("kept %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    # a sanitizer report or a crash at shutdown is a failure too
    if isinstance(tern, servers.Ternd) and tern.proc.returncode not in (0, -15):
        print("ternd exited with status %s on SIGTERM:\n%s"
              % (tern.proc.returncode, tern.log_text()))
        failed += 1
    print("oracles disagreed on %d queries (not failures)" % disagree)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def run(queries, nsd, knot, tern, verbose):
    passed = failed = disagree = 0
    deadline = time.monotonic() + TOTAL_BUDGET
    print("%-4s %-44s %-4s %-22s %s" % ("line", "query", "tr", "nsd vs knot", "tern"))
    for q in queries:
        for tr, edns in q.variants():
            if time.monotonic() > deadline:
                print("differential: time budget of %.0f s exhausted" % TOTAL_BUDGET)
                return passed, failed + 1, disagree
            rn, rk = summarize(ask(nsd, q, tr, edns)), summarize(ask(knot, q, tr, edns))
            odiff = differences(rn, rk, q.compare)
            if odiff:
                disagree += 1
            oracle_note = "agree" if not odiff else "differ:" + ",".join(odiff)
            if tern is None:
                print("%-4d %-44s %-4s %-22s" % (q.lineno, q.label(edns), tr, oracle_note))
                if odiff:
                    for p in odiff:
                        print("       %-10s nsd : %s" % (p, show(p, rn[p])))
                        print("       %-10s knot: %s" % (p, show(p, rk[p])))
                continue
            rt = summarize(ask(tern, q, tr, edns))
            dn, dk = differences(rt, rn, q.compare), differences(rt, rk, q.compare)
            ok = not dn or not dk
            extra_problem = check_extra(q, rt, rn, rk)
            if q.answer_rrs is not None and not extra_problem:
                n = answer_count(tern, q, tr, edns)
                if n != q.answer_rrs:
                    extra_problem = "ANCOUNT %d, expected %d" % (n, q.answer_rrs)
            if extra_problem:
                ok = False
            verdict = "ok" if ok else "FAIL"
            if ok:
                verdict += " (=nsd)" if not dn and dk else " (=knot)" if not dk and dn else ""
            reason = "  [" + q.reason + "]" if q.reason else ""
            print("%-4d %-44s %-4s %-22s %s%s"
                  % (q.lineno, q.label(edns), tr, oracle_note, verdict, reason))
            if ok:
                passed += 1
            else:
                failed += 1
            if extra_problem:
                print("       extra      %s" % extra_problem)
            if not ok or verbose:
                for p in sorted(set(dn) | set(dk), key=PARTS.index):
                    print("       %-10s tern: %s" % (p, show(p, rt[p])))
                    print("       %-10s nsd : %s" % (p, show(p, rn[p])))
                    print("       %-10s knot: %s" % (p, show(p, rk[p])))
    return passed, failed, disagree


def check_extra(q, rt, rn, rk):
    """The tern-only checks of a query: answer_rrs=N, and any=1 (RFC 8482 minimal ANY: one
    RRset, contained in an oracle's answer). Returns a description of the problem or None."""
    if isinstance(rt["answer"], str):
        return None
    if q.answer_rrs is not None and len(rt["answer"]) != q.answer_rrs:
        return "%d RRs in the answer, expected %d" % (len(rt["answer"]), q.answer_rrs)
    if not q.any_subset:
        return None
    answer = rt["answer"]
    rrsets = {(owner, rtype) for owner, _, _, rtype, _ in answer}
    if len(rrsets) != 1:
        return "ANY answered with %d RRsets, expected exactly one" % len(rrsets)
    for ro in (rn, rk):
        if not isinstance(ro["answer"], str) and answer <= ro["answer"]:
            return None
    return "ANY answer %s is not in any oracle's answer" % show("answer", answer)


if __name__ == "__main__":
    sys.exit(main())
