#!/usr/bin/python3
"""ternd over real sockets: transports, malformed queries, EDNS, opcodes, classes, command line.

Starts one ternd (two workers) on a free loopback port serving the zones of data/, then runs
each check below against it with dnspython and hand-made packets. Prints one line per check and
a final "N passed, N failed"; exits 1 on any failure.

    test_server.py --ternd build/ternd      (or TERND=build/ternd test_server.py)
"""

import argparse
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.query
import dns.rcode
import dns.rdataclass
import dns.update

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

Failure = servers.Failure
expect = servers.expect

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
ZONES = [("diff.test", "diff.zone"), ("other.test", "other.zone"),
         ("child.diff.test", "child.zone")]
TIMEOUT = 2.0          # seconds to wait for an answer that must come
SILENCE = 1.0          # seconds of silence that count as "no reply"
IDLE_TIMEOUT = 2       # tcp_idle_timeout given to ternd, short so the idle check is quick

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn






# --- raw packet helpers

def wire_name(text):
    out = b""
    for label in text.rstrip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def header(qid=0x1234, flags=0x0100, qd=1, an=0, ns=0, ar=0):
    return struct.pack("!HHHHHH", qid, flags, qd, an, ns, ar)


def question(name="www.diff.test", qtype=1, qclass=1):
    return wire_name(name) + struct.pack("!HH", qtype, qclass)


def opt_rr(payload=1232, version=0, do=False, options=b"", ext_rcode=0):
    ttl = (ext_rcode << 24) | (version << 16) | (0x8000 if do else 0)
    return b"\0" + struct.pack("!HHIH", 41, payload, ttl, len(options)) + options


def ecs_option(family, source, scope, addr):
    body = struct.pack("!HBB", family, source, scope) + addr
    return struct.pack("!HH", 8, len(body)) + body


class Client:
    def __init__(self, port):
        self.port = port

    def udp_raw(self, pkt, timeout=TIMEOUT):
        """Send pkt, return the reply bytes or None on timeout."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(timeout)
            s.sendto(pkt, (servers.LOOPBACK, self.port))
            try:
                data, _ = s.recvfrom(65535)
                return data
            except socket.timeout:
                return None

    def udp_msg(self, pkt):
        data = self.udp_raw(pkt)
        expect(data is not None, "no reply within %.1f s" % TIMEOUT)
        return dns.message.from_wire(data)

    def udp(self, msg):
        return dns.query.udp(msg, servers.LOOPBACK, port=self.port, timeout=TIMEOUT)

    def tcp(self, msg):
        return dns.query.tcp(msg, servers.LOOPBACK, port=self.port, timeout=TIMEOUT)


def rcode_of(msg):
    return dns.rcode.to_text(msg.rcode())


def expect_rcode(msg, rcode):
    expect(rcode_of(msg) == rcode, "rcode %s, expected %s" % (rcode_of(msg), rcode))


def expect_id(msg, qid=0x1234):
    expect(msg.id == qid, "id 0x%04x, expected 0x%04x" % (msg.id, qid))


# --- transports

@check
def udp_answer(c):
    r = c.udp(dns.message.make_query("www.diff.test", "A"))
    expect_rcode(r, "NOERROR")
    expect(r.flags & dns.flags.AA, "AA not set")
    expect(not r.flags & dns.flags.RA, "RA set")
    expect(r.flags & dns.flags.RD, "RD not copied")
    expect([str(rd) for rd in r.answer[0]] == ["192.0.2.80"], "answer %s" % r.answer)


@check
def tcp_answer(c):
    r = c.tcp(dns.message.make_query("www.diff.test", "AAAA"))
    expect_rcode(r, "NOERROR")
    expect([str(rd) for rd in r.answer[0]] == ["2001:db8::80"], "answer %s" % r.answer)


@check
def tcp_large_answer(c):
    r = c.tcp(dns.message.make_query("big.diff.test", "TXT"))
    expect(not r.flags & dns.flags.TC, "TC over TCP")
    expect(len(r.answer) == 1 and len(r.answer[0]) == 40, "answer not complete")


@check
def udp_truncation(c):
    r = c.udp(dns.message.make_query("big.diff.test", "TXT"))
    expect(r.flags & dns.flags.TC, "TC not set for a 2.6 kB RRset over UDP without EDNS")


@check
def tcp_pipelined(c):
    names = ["www.diff.test", "mail.diff.test", "nothere.diff.test", "txt.diff.test",
             "chain1.diff.test", "www.other.test"]
    types = ["A", "AAAA", "A", "TXT", "A", "A"]
    buf = b""
    for i, (n, t) in enumerate(zip(names, types)):
        q = dns.message.make_query(n, t)
        q.id = 0x4000 + i
        w = q.to_wire()
        buf += struct.pack("!H", len(w)) + w
    with socket.create_connection((servers.LOOPBACK, c.port), timeout=TIMEOUT) as s:
        s.sendall(buf)  # all queries in one segment: the server must not stop after the first
        seen = {}
        deadline = time.monotonic() + 5
        data = b""
        while len(seen) < len(names) and time.monotonic() < deadline:
            chunk = s.recv(65535)
            if not chunk:
                break
            data += chunk
            while len(data) >= 2:
                n = struct.unpack("!H", data[:2])[0]
                if len(data) < 2 + n:
                    break
                m = dns.message.from_wire(data[2:2 + n])
                seen[m.id] = m
                data = data[2 + n:]
    expect(len(seen) == len(names), "got %d of %d pipelined answers" % (len(seen), len(names)))
    for i, n in enumerate(names):
        m = seen.get(0x4000 + i)
        expect(m is not None and m.question[0].name == dns.name.from_text(n),
               "answer %d does not match its query" % i)
    expect_rcode(seen[0x4002], "NXDOMAIN")


@check
def tcp_sequential_on_one_connection(c):
    with socket.create_connection((servers.LOOPBACK, c.port), timeout=TIMEOUT) as s:
        for i in range(5):
            q = dns.message.make_query("www.diff.test", "A")
            dns.query.send_tcp(s, q)
            r, _ = dns.query.receive_tcp(s, expiration=time.time() + TIMEOUT)
            expect(r.id == q.id, "id mismatch on query %d" % i)


@check
def tcp_split_length_prefix(c):
    # the 2-byte length and the message arrive in separate segments (RFC 7766 §8)
    q = dns.message.make_query("www.diff.test", "A")
    w = q.to_wire()
    with socket.create_connection((servers.LOOPBACK, c.port), timeout=TIMEOUT) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(struct.pack("!H", len(w))[:1])
        time.sleep(0.1)
        s.sendall(struct.pack("!H", len(w))[1:] + w[:5])
        time.sleep(0.1)
        s.sendall(w[5:])
        r, _ = dns.query.receive_tcp(s, expiration=time.time() + TIMEOUT)
    expect(r.id == q.id and r.answer, "no answer to a query sent in pieces")


@check
def tcp_idle_connection_closed(c):
    # ternd runs here with tcp_idle_timeout: 2 (see main()); an idle client must be let go
    with socket.create_connection((servers.LOOPBACK, c.port), timeout=TIMEOUT) as s:
        s.settimeout(IDLE_TIMEOUT + 3)
        start = time.monotonic()
        try:
            data = s.recv(1)
        except socket.timeout:
            data = None
        except ConnectionResetError:
            data = b""
        took = time.monotonic() - start
    expect(data == b"", "idle connection still open after %.1f s" % took)
    expect(took >= IDLE_TIMEOUT - 0.5, "idle connection closed too early (%.1f s)" % took)


@check
def udp_burst(c):
    # many queries back to back from one socket: every one must be answered (batched I/O)
    count = 100  # ~100 kB of socket buffer with skb overhead: below the default rmem (208 kB)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.settimeout(TIMEOUT)
        for i in range(count):
            q = dns.message.make_query("www.diff.test", "A")
            q.id = i
            s.sendto(q.to_wire(), (servers.LOOPBACK, c.port))
        got = set()
        try:
            while len(got) < count:
                data, _ = s.recvfrom(65535)
                got.add(struct.unpack("!H", data[:2])[0])
        except socket.timeout:
            pass
    expect(len(got) == count, "%d of %d answered" % (len(got), count))


# --- malformed packets

@check
def short_packet_dropped(c):
    expect(c.udp_raw(b"\x12\x34\x01\x00\x00\x01", SILENCE) is None, "reply to a 6-byte packet")


@check
def empty_packet_dropped(c):
    expect(c.udp_raw(b"", SILENCE) is None, "reply to an empty datagram")


@check
def qr_set_dropped(c):
    pkt = header(flags=0x8100) + question()
    expect(c.udp_raw(pkt, SILENCE) is None, "reply to a packet with QR=1")


@check
def qdcount_2_formerr(c):
    pkt = header(qd=2) + question() + question("mail.diff.test")
    r = c.udp_msg(pkt)
    expect_id(r)
    expect_rcode(r, "FORMERR")


@check
def qdcount_0_formerr(c):
    r = c.udp_msg(header(qd=0))
    expect_id(r)
    expect_rcode(r, "FORMERR")


@check
def compression_pointer_in_question_formerr(c):
    # "www" then a pointer to offset 12 (itself a name start): pointers are not allowed there
    pkt = header() + b"\x03www\xc0\x0c" + struct.pack("!HH", 1, 1)
    r = c.udp_msg(pkt)
    expect_id(r)
    expect_rcode(r, "FORMERR")


@check
def label_over_63_formerr(c):
    pkt = header() + b"\x40" + b"a" * 64 + wire_name("diff.test") + struct.pack("!HH", 1, 1)
    r = c.udp_msg(pkt)
    expect_id(r)
    expect_rcode(r, "FORMERR")


@check
def name_over_255_formerr(c):
    name = b"".join(b"\x3f" + b"a" * 63 for _ in range(4)) + b"\0"  # 257 bytes
    r = c.udp_msg(header() + name + struct.pack("!HH", 1, 1))
    expect_id(r)
    expect_rcode(r, "FORMERR")


@check
def truncated_question_formerr(c):
    pkt = header() + wire_name("www.diff.test") + b"\x00"  # type cut short
    r = c.udp_msg(pkt)
    expect_id(r)
    expect_rcode(r, "FORMERR")


@check
def two_opt_formerr(c):
    pkt = header(ar=2) + question() + opt_rr() + opt_rr()
    r = c.udp_msg(pkt)
    expect_id(r)
    expect_rcode(r, "FORMERR")
    expect(r.question and r.question[0].name == dns.name.from_text("www.diff.test"),
           "the FORMERR answer does not echo the (valid) question")


@check
def trailing_garbage_formerr(c):
    pkt = header() + question() + b"\xde\xad"
    r = c.udp_msg(pkt)
    expect_id(r)
    expect_rcode(r, "FORMERR")


@check
def edns_version_1_badvers(c):
    r = c.udp_msg(header(ar=1) + question() + opt_rr(version=1))
    expect_id(r)
    expect_rcode(r, "BADVERS")
    expect(r.edns == 0, "the BADVERS answer must carry an OPT with version 0, got %s" % r.edns)
    expect(not r.answer, "BADVERS with an answer")
    expect(r.question, "the BADVERS answer does not echo the question")


@check
def ecs_prefix_33_ipv4_formerr(c):
    opt = opt_rr(options=ecs_option(1, 33, 0, b"\xc0\x00\x02\x01\x00"))
    r = c.udp_msg(header(ar=1) + question() + opt)
    expect_rcode(r, "FORMERR")


@check
def ecs_bits_beyond_prefix_formerr(c):
    opt = opt_rr(options=ecs_option(1, 20, 0, b"\xc0\x00\x0f"))  # /20 but the low nibble is set
    r = c.udp_msg(header(ar=1) + question() + opt)
    expect_rcode(r, "FORMERR")


@check
def ecs_wrong_address_length_formerr(c):
    opt = opt_rr(options=ecs_option(1, 24, 0, b"\xc0\x00\x02\x00"))  # /24 needs 3 bytes, not 4
    r = c.udp_msg(header(ar=1) + question() + opt)
    expect_rcode(r, "FORMERR")


@check
def ecs_bad_family_formerr(c):
    opt = opt_rr(options=ecs_option(3, 8, 0, b"\x0a"))
    r = c.udp_msg(header(ar=1) + question() + opt)
    expect_rcode(r, "FORMERR")


@check
def ecs_nonzero_scope_in_query_formerr(c):
    opt = opt_rr(options=ecs_option(1, 24, 24, b"\xc0\x00\x02"))
    r = c.udp_msg(header(ar=1) + question() + opt)
    expect_rcode(r, "FORMERR")


@check
def ecs_valid_echoed_scope_0(c):
    for family, source, addr in ((1, 24, b"\xc0\x00\x02"),
                                 (2, 56, b"\x20\x01\x0d\xb8\x00\x01\x02")):
        opt = opt_rr(options=ecs_option(family, source, 0, addr))
        r = c.udp_msg(header(ar=1) + question() + opt)
        expect_rcode(r, "NOERROR")
        ecs = [o for o in r.options if o.otype == dns.edns.ECS]
        expect(len(ecs) == 1, "ECS not echoed (family %d)" % family)
        body = ecs[0].to_wire()
        expect(body == struct.pack("!HBB", family, source, 0) + addr,
               "ECS echoed as %s, expected family %d /%d scope 0 %s"
               % (body.hex(), family, source, addr.hex()))


@check
def edns_payload_100_is_512(c):
    # the SRV answer with its additional addresses is between 100 and 512 bytes: a payload of
    # 100 must be read as 512 (RFC 6891 §6.2.5), so no truncation
    q = dns.message.make_query("_sip._udp.diff.test", "SRV", use_edns=0, payload=100)
    raw = c.udp_raw(q.to_wire())
    expect(raw is not None, "no reply")
    r = dns.message.from_wire(raw)
    expect(len(raw) > 100, "reply of %d bytes: choose a bigger test answer" % len(raw))
    expect(not r.flags & dns.flags.TC, "TC set: payload 100 was not raised to 512")
    expect(len(r.answer) == 1 and len(r.answer[0]) == 2, "SRV answer incomplete")


@check
def edns_large_answer_fits_1232(c):
    q = dns.message.make_query("medium.diff.test", "TXT", use_edns=0, payload=1232)
    r = c.udp(q)
    expect(not r.flags & dns.flags.TC, "TC set for an ~850-byte answer with payload 1232")
    expect(r.edns == 0, "no OPT in the answer to an EDNS query")


@check
def edns_payload_capped_at_1232(c):
    # a client payload of 4096 is capped at our edns_max_udp (1232): the 2.6 kB answer truncates
    q = dns.message.make_query("big.diff.test", "TXT", use_edns=0, payload=4096)
    raw = c.udp_raw(q.to_wire())
    expect(raw is not None, "no reply")
    r = dns.message.from_wire(raw)
    expect(len(raw) <= 1232, "UDP answer of %d bytes (> 1232)" % len(raw))
    expect(r.flags & dns.flags.TC, "TC not set")
    expect(r.payload == 1232, "advertised payload %d, expected 1232" % r.payload)


@check
def edns_payload_600_respected(c):
    q = dns.message.make_query("medium.diff.test", "TXT", use_edns=0, payload=600)
    raw = c.udp_raw(q.to_wire())
    expect(raw is not None, "no reply")
    r = dns.message.from_wire(raw)
    expect(len(raw) <= 600, "UDP answer of %d bytes for payload 600" % len(raw))
    expect(r.flags & dns.flags.TC, "TC not set for an ~850-byte answer with payload 600")


@check
def no_edns_at_most_512(c):
    raw = c.udp_raw(dns.message.make_query("many-a.diff.test", "A").to_wire())
    expect(raw is not None, "no reply")
    r = dns.message.from_wire(raw)
    expect(len(raw) <= 512, "answer of %d bytes without EDNS" % len(raw))
    expect(r.flags & dns.flags.TC, "TC not set for 40 A records without EDNS")


@check
def edns_do_echoed(c):
    q = dns.message.make_query("www.diff.test", "A", want_dnssec=True)
    r = c.udp(q)
    expect(r.ednsflags & dns.flags.DO, "DO not echoed")
    q = dns.message.make_query("www.diff.test", "A", use_edns=0)
    r = c.udp(q)
    expect(r.edns == 0, "no OPT")
    expect(not r.ednsflags & dns.flags.DO, "DO set without being asked")


@check
def no_edns_no_opt(c):
    r = c.udp(dns.message.make_query("www.diff.test", "A"))
    expect(r.edns == -1, "OPT in the answer to a query without EDNS")


# --- opcodes, classes, transfers

@check
def opcode_notify_notauth(c):
    # tern is secondary for no zone: a NOTIFY is not for it (Knot's answer)
    q = dns.message.make_query("diff.test", "SOA")
    q.set_opcode(dns.opcode.NOTIFY)
    q.flags |= dns.flags.AA
    r = c.udp(q)
    expect_rcode(r, "NOTAUTH")
    expect(r.opcode() == dns.opcode.NOTIFY, "opcode not copied")


@check
def header_only_opcode15_notimp(c):
    # genreport's "opcode" check: a bare header with opcode 15
    data = c.udp_raw(header(flags=(15 << 11), qd=0))  # dnspython knows no opcode 15
    expect(data is not None and len(data) == 12, "no 12-byte reply: %r" % data)
    flags = struct.unpack("!H", data[2:4])[0]
    expect(flags >> 11 & 15 == 15, "opcode not copied: %#x" % flags)
    expect(flags & 15 == 4, "rcode %d, expected NOTIMP (4)" % (flags & 15))


@check
def opcode_update_notimp(c):
    u = dns.update.UpdateMessage("diff.test")
    u.add("new", 300, "A", "192.0.2.7")
    r = c.udp(u)
    expect_rcode(r, "NOTIMP")


@check
def opcode_status_notimp(c):
    pkt = header(flags=(2 << 11)) + question()
    r = c.udp_msg(pkt)
    expect_rcode(r, "NOTIMP")


@check
def axfr_over_udp_notimp(c):
    r = c.udp_msg(header() + question("diff.test", 252))
    expect_rcode(r, "NOTIMP")


@check
def axfr_over_tcp_refused(c):
    # no allow_transfer in this config: nobody may transfer (test_xfr.py covers transfers)
    q = dns.message.make_query("diff.test", "AXFR")
    with socket.create_connection((servers.LOOPBACK, c.port), timeout=TIMEOUT) as s:
        dns.query.send_tcp(s, q)
        r, _ = dns.query.receive_tcp(s, expiration=time.time() + TIMEOUT)
    expect_rcode(r, "REFUSED")


@check
def ixfr_over_udp_refused(c):
    r = c.udp_msg(header() + question("diff.test", 251))
    expect_rcode(r, "REFUSED")


@check
def class_ch_refused(c):
    r = c.udp(dns.message.make_query("www.diff.test", "A", "CH"))
    expect_rcode(r, "REFUSED")


@check
def class_hs_refused(c):
    r = c.udp(dns.message.make_query("www.diff.test", "A", "HS"))
    expect_rcode(r, "REFUSED")


@check
def chaos_version(c):
    r = c.udp(dns.message.make_query("version.bind", "TXT", "CH"))
    expect_rcode(r, "NOERROR")
    expect(r.answer and r.answer[0].rdclass == dns.rdataclass.CH, "no CH answer")
    expect(r.answer[0][0].strings == (b"tern-test",), "version %s" % r.answer[0][0])


@check
def outside_zones_refused(c):
    r = c.udp(dns.message.make_query("www.example.org", "A"))
    expect_rcode(r, "REFUSED")
    expect(not r.flags & dns.flags.AA, "AA on REFUSED")


@check
def question_case_echoed(c):
    q = dns.message.make_query("WwW.DiFf.TeSt", "A")
    raw = c.udp_raw(q.to_wire())
    expect(raw is not None, "no reply")
    expect(raw[12:12 + 15] == wire_name("WwW.DiFf.TeSt"), "question case not echoed")


@check
def still_alive_after_malformed(c):
    r = c.udp(dns.message.make_query("www.diff.test", "A"))
    expect_rcode(r, "NOERROR")


# --- command line (no server needed, but run here to share the binary)

def cmdline_checks(binary, workdir):
    results = []

    def run(name, fn):
        try:
            fn()
            results.append((name, None))
        except Failure as e:
            results.append((name, str(e)))

    def version():
        p = subprocess.run([binary, "--version"], capture_output=True, timeout=10)
        expect(p.returncode == 0, "--version exit %d" % p.returncode)
        expect(p.stdout.strip() or p.stderr.strip(), "--version printed nothing")

    def help_():
        p = subprocess.run([binary, "--help"], capture_output=True, timeout=10)
        expect(p.returncode == 0, "--help exit %d" % p.returncode)
        expect(b"--listen" in p.stdout + p.stderr, "--help does not mention --listen")

    def bad_zone():
        path = os.path.join(workdir, "bad.zone")
        with open(path, "w") as f:
            f.write("$ORIGIN bad.test.\n$TTL 300\n"
                    "@ SOA ns1 hostmaster 1 2 3 4 5\n@ NS ns1\n"
                    "www A 192.0.2.300\n")  # line 5: not an IPv4 address
        port = servers.free_port()
        # as root, allowed to stay root: zones are read after the privilege checks
        root = ["--allow-root"] if os.geteuid() == 0 else []
        p = subprocess.run([binary, "--listen", "%s:%d" % (servers.LOOPBACK, port),
                            "--zone", "bad.test=" + path] + root, capture_output=True, timeout=20)
        err = p.stderr.decode("utf-8", "replace")
        expect(p.returncode != 0, "exit 0 with a bad zone")
        expect("bad.zone:5" in err, "stderr lacks file:line (bad.zone:5): %r" % err[-300:])

    def missing_zone():
        port = servers.free_port()
        p = subprocess.run([binary, "--listen", "%s:%d" % (servers.LOOPBACK, port),
                            "--zone", "x.test=" + os.path.join(workdir, "missing.zone")],
                           capture_output=True, timeout=20)
        expect(p.returncode != 0, "exit 0 with a missing zone file")

    def bad_option():
        p = subprocess.run([binary, "--no-such-option"], capture_output=True, timeout=10)
        expect(p.returncode != 0, "exit 0 with an unknown option")

    run("cmdline_version", version)
    run("cmdline_help", help_)
    run("cmdline_bad_zone_file_line", bad_zone)
    run("cmdline_missing_zone_file", missing_zone)
    run("cmdline_unknown_option", bad_option)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if not args.ternd or not os.access(args.ternd, os.X_OK):
        print("test_server: no ternd binary (--ternd PATH or $TERND), got %r" % args.ternd)
        return 2
    binary = os.path.abspath(args.ternd)
    workdir = tempfile.mkdtemp(prefix="tern-server-")
    zones = [(origin, os.path.join(DATA, f)) for origin, f in ZONES]
    results = []
    tern = servers.Ternd(workdir, zones, binary, identity="tern-test-id", version="tern-test",
                         extra_yaml="tcp_idle_timeout: %d\n" % IDLE_TIMEOUT, workers=2)
    try:
        try:
            tern.start("diff.test")
        except RuntimeError as e:
            print("test_server: %s" % e)
            print("0 passed, 1 failed")
            return 1
        c = Client(tern.port)
        for fn in CHECKS:
            try:
                fn(c)
                results.append((fn.__name__, None))
            except Failure as e:
                results.append((fn.__name__, str(e)))
            except Exception as e:
                results.append((fn.__name__, "%s: %s" % (type(e).__name__, e)))
                if os.environ.get("VERBOSE"):
                    traceback.print_exc()
            if tern.proc.poll() is not None:
                results.append(("server_alive", "ternd exited (%s) after %s:\n%s"
                                % (tern.proc.returncode, fn.__name__, tern.log_text())))
                break
        results += cmdline_checks(binary, workdir)
    finally:
        tern.stop()
        bad = servers.clean_exit_result(tern)
        if bad:
            results.append(bad)
        if args.keep:
            print("kept %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    return servers.report(results, 42)


if __name__ == "__main__":
    sys.exit(main())
