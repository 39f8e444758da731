#!/usr/bin/python3
"""Zone transfers end to end, with real secondaries and a real primary.

One ternd is the primary of two zones and the secondary of a third:
  - p.test (a zone file) goes to a real NSD by AXFR/IXFR, unsigned, with NOTIFY;
  - k.test (a zone file) goes to a real Knot by AXFR/IXFR signed with a TSIG key
    (hmac-sha256, transfer_key), with signed NOTIFY;
  - s.test is transferred in from that Knot (primary: with the key), refreshed on Knot's NOTIFY,
    written to an on-disk copy;
and, for the bad-input checks, a fake primary written here (UDP SOA + TCP AXFR from
dnspython messages) serves f.test broken on purpose.

Checks (dnspython, ternctl, the servers' logs):
  nsd_axfr / knot_axfr_tsig   every name and type of the zone answers the same from the
                              secondary as from tern (the differential harness: answer and
                              authority sections, rcode, AA)
  nsd_ixfr_notify             a changed record, an added and a removed label, a new serial,
                              SIGHUP: NSD serves the new data within a bound (NOTIFY + IXFR),
                              tern logged an IXFR to it, and the answers are equal again
  knot_ixfr_notify_tsig       the same for k.test and Knot (signed NOTIFY and IXFR)
  secondary_from_knot         tern serves s.test as Knot has it; Knot changes it (file + zone-
                              reload): tern serves the change within a bound (NOTIFY, IXFR)
  transfer_acl                AXFR of k.test unsigned: REFUSED; with a wrong secret: NOTAUTH
                              (BADSIG); of a zone without allow_transfer: REFUSED; IXFR over UDP:
                              TC; AXFR over UDP: NOTIMP
  ixfr_not_in_journal         IXFR from a serial tern never had: the whole zone (AXFR-style)
  axfr_pinned_across_reload   a 30,000-record AXFR read slowly (a 4 KiB receive buffer) while a
                              reload publishes the next version: every message holds the old
                              version only, the old SOA at both ends, and the workers already
                              answer the new serial
  ternctl_zone                serial, journal versions, last transfer out, NOTIFY acknowledged;
                              for s.test the last transfer in
  secondary_primary_down      Knot stopped: tern keeps serving s.test; the failed refresh is
                              logged; ternd restarted with Knot still down serves its copy
  secondary_wrong_key         a zone whose primary is Knot with a wrong secret: a clear TSIG
                              log line, SERVFAIL (nothing was ever transferred)
  bad_primary                 the fake primary sends a truncated stream, a serial that goes
                              back, a transfer larger than xfr_max_mib: each logged, the old
                              version still served
  secondary_expires           a second fake primary (SOA expire 4 s) stops answering: e.test
                              answers SERVFAIL once expired (logged); back with the same
                              serial: served again without a transfer
  clean_exit                  ternd exits 0 on SIGTERM

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded; only the processes started here are stopped.

    test_xfr.py --ternd build/ternd --ternctl build/ternctl
"""

import argparse
import base64
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
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
import dns.rrset
import dns.tsig
import dns.tsigkeyring
import dns.zone

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import (LOOPBACK, Failure, Redis, Server, clean_exit_result,  # noqa: E402
                     expect, find_program, free_port, report, run_check, write_atomic)

TIMEOUT = 2.0
CONVERGE = 10.0  # seconds a change may take to reach a secondary (NOTIFY + IXFR: well under 1)
KEY_NAME = "xfr-key"
SECRET = base64.b64encode(os.urandom(32)).decode()
WRONG = base64.b64encode(os.urandom(32)).decode()


def zone_text(origin, serial, variant=0):
    """A small zone with a delegation and glue, a wildcard, an ENT, a multi-RR RRset, a long
    TXT and an MX; variant 1 changes a record, adds a label and removes one."""
    lines = [
        "$ORIGIN %s." % origin,
        "$TTL 300",
        "@ SOA ns1.%s. hostmaster.%s. %d 2 2 30 60" % (origin, origin, serial),
        "@ NS ns1.%s." % origin,
        "ns1 A 192.0.2.53",
        "www A 192.0.2.1",
        "www A %s" % ("192.0.2.2" if variant == 0 else "192.0.2.22"),
        "mail MX 10 mx.%s." % origin,
        "mx AAAA 2001:db8::25",
        "sub NS ns.sub.%s." % origin,
        "ns.sub A 192.0.2.99",
        "*.wild TXT \"wild\"",
        "long TXT \"%s\" \"%s\"" % ("x" * 200, "y" * 200),
        "alias CNAME www",
    ]
    if variant == 0:
        lines.append("a.b.c A 192.0.2.7")  # b.c and c: empty non-terminals
        lines.append("gone A 192.0.2.66")
    else:
        lines.append("added A 192.0.2.77")
    for i in range(40):  # enough for several messages with small caps, and a diff of note
        lines.append("h%d A 198.51.100.%d" % (i, i))
    return "\n".join(lines) + "\n"


def names_types(text, origin):
    z = dns.zone.from_text(text, origin=origin, relativize=False, check_origin=False)
    out = []
    for name, node in z.nodes.items():
        for rds in node.rdatasets:
            out.append((name, rds.rdtype))
    return out


def ask(port, name, rdtype, tcp=False, keyring=None, keyname=None):
    q = dns.message.make_query(name, rdtype)
    q.flags &= ~dns.flags.RD
    if keyring:
        q.use_tsig(keyring, keyname=keyname, algorithm=dns.tsig.HMAC_SHA256)
    if tcp:
        return dns.query.tcp(q, LOOPBACK, port=port, timeout=TIMEOUT)
    return dns.query.udp(q, LOOPBACK, port=port, timeout=TIMEOUT)


def shape(r):
    """A response as what must match between two servers."""
    def sec(rrsets):
        return sorted("\n".join(sorted(rr.to_text().split("\n"))) for rr in rrsets)
    return (dns.rcode.to_text(r.rcode()), bool(r.flags & dns.flags.AA), sec(r.answer),
            sec(r.authority))


def differential(a_port, b_port, text, origin):
    bad = []
    for name, rdtype in names_types(text, origin) + [(dns.name.from_text("nx." + origin), 1)]:
        ra = shape(ask(a_port, name, rdtype))
        rb = shape(ask(b_port, name, rdtype))
        if ra != rb:
            bad.append("%s %s: tern %s, secondary %s" % (name, dns.rdatatype.to_text(rdtype),
                                                         ra, rb))
    expect(not bad, "; ".join(bad[:3]))


def recv_exact(sk, n):
    data = b""
    while len(data) < n:
        chunk = sk.recv(n - len(data))
        if not chunk:
            raise Failure("connection closed after %d of %d bytes" % (len(data), n))
        data += chunk
    return data


def read_query(c):
    """The length-prefixed query a client sent on TCP socket c (OSError if it closes first)."""
    try:
        n = struct.unpack("!H", recv_exact(c, 2))[0]
        return dns.message.from_wire(recv_exact(c, n))
    except Failure as e:
        raise ConnectionError(str(e)) from e


wait_for = servers.wait_until


def serial_of(port, origin):
    r = ask(port, origin, "SOA")
    if r.rcode() != dns.rcode.NOERROR or not r.answer:
        return None
    return r.answer[0][0].serial


class Ternd(servers.YamlTernd):
    pass


class Nsd(servers.Nsd):
    """NSD as the secondary of p.test and r.test, transferred from tern unsigned."""

    def __init__(self, workdir, primary_port):
        # NSD applies transfers at most once per xfrd-reload-timeout (1 s by default): 0, so
        # what is measured is tern's NOTIFY and IXFR, not NSD's batching
        zones = "server:\n    xfrd-reload-timeout: 0\n" + "".join(f"""zone:
    name: "{z}"
    zonefile: "{{dir}}/{z}.zone"
    request-xfr: {LOOPBACK}@{primary_port} NOKEY
    allow-notify: {LOOPBACK} NOKEY
""" for z in ("p.test", "r.test"))
        super().__init__(workdir, [], "nsd", "nsd", extra_conf=zones)

    def nsd_log(self):
        try:
            with open(os.path.join(self.dir, "nsd.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""


class Knot(Server):
    name = "knot"

    def __init__(self, workdir, tern_port, s_text):
        self.tern_port = tern_port
        super().__init__(workdir, [])
        self.s_path = os.path.join(self.dir, "s.test.zone")
        write_atomic(self.s_path, s_text)
        os.makedirs(os.path.join(self.dir, "db"), exist_ok=True)

    def command(self):
        d = self.dir
        conf = os.path.join(d, "knot.conf")
        with open(conf, "w") as f:
            f.write(servers.knot_conf_head(d, self.port, log="info"))
            f.write(f"""key:
  - id: {KEY_NAME}
    algorithm: hmac-sha256
    secret: {SECRET}
remote:
  - id: tern
    address: {LOOPBACK}@{self.tern_port}
    key: {KEY_NAME}
acl:
  - id: from_tern
    address: {LOOPBACK}
    key: {KEY_NAME}
    action: [transfer, notify]
template:
  - id: default
    storage: "{d}"
    zonefile-sync: -1
    zonefile-load: difference
    journal-content: changes
zone:
  - domain: s.test
    file: s.test.zone
    notify: tern
    acl: from_tern
  - domain: k.test
    file: k.test.secondary
    master: tern
    acl: from_tern
""")
        self.conf = conf
        return [find_program("knotd"), "-c", conf]

    def knotc(self, *args):
        return subprocess.run([find_program("knotc"), "-c", self.conf] + list(args),
                              capture_output=True, text=True, timeout=20)


class FakePrimary:
    """A primary for one zone (f.test) that misbehaves on request: UDP SOA answers with a serial
    we choose; TCP AXFR answers from a mode: good, truncated, big, or down (nothing answered);
    its SOA's expire is ours to choose too."""

    def __init__(self, zone="f.test", expire=3600):
        self.zone, self.expire = zone, expire
        self.port = free_port()
        self.serial = 1
        self.mode = "good"
        self.stop = False
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind((LOOPBACK, self.port))
        self.udp.settimeout(0.2)
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind((LOOPBACK, self.port))
        self.tcp.listen(8)
        self.tcp.settimeout(0.2)
        self.threads = [threading.Thread(target=self.serve_udp, daemon=True),
                        threading.Thread(target=self.serve_tcp, daemon=True)]
        for t in self.threads:
            t.start()

    def soa(self):
        z = self.zone
        return dns.rrset.from_text(z + ".", 300, "IN", "SOA", "ns1.%s. h.%s. %d 2 2 %d 60"
                                   % (z, z, self.serial, self.expire))

    def serve_udp(self):
        while not self.stop:
            try:
                data, peer = self.udp.recvfrom(4096)
            except OSError:
                continue
            if self.mode == "down":
                continue
            try:
                q = dns.message.from_wire(data)
            except dns.exception.DNSException:
                continue
            r = dns.message.make_response(q)
            r.flags |= dns.flags.AA
            r.answer.append(self.soa())
            self.udp.sendto(r.to_wire(), peer)

    def messages(self, q):
        soa = self.soa()
        z = self.zone
        recs = [dns.rrset.from_text(z + ".", 300, "IN", "NS", "ns1.%s." % z),
                dns.rrset.from_text("ns1.%s." % z, 300, "IN", "A", "192.0.2.53"),
                dns.rrset.from_text("www.%s." % z, 300, "IN", "A",
                                    "192.0.2.%d" % (self.serial % 250))]
        if self.mode == "big":
            for i in range(3000):  # about 1.2 MB of TXT: beyond xfr_max_mib 1
                recs.append(dns.rrset.from_text("t%d.%s." % (i, z), 300, "IN", "TXT",
                                                '"%s"' % ("z" * 250), '"%s"' % ("q" * 150)))
        out = []
        batch = [soa]
        for rr in recs:
            batch.append(rr)
            if len(batch) >= 50:
                out.append(batch)
                batch = []
        batch.append(soa)
        out.append(batch)
        wires = []
        for b in out:
            r = dns.message.make_response(q)
            r.flags |= dns.flags.AA
            r.answer = b
            wires.append(r.to_wire(max_size=65535))
        if self.mode == "truncated":
            wires[-1] = wires[-1][:len(wires[-1]) - 7]
        return wires

    def serve_tcp(self):
        while not self.stop:
            try:
                c, _ = self.tcp.accept()
            except OSError:
                continue
            if self.mode == "down":
                c.close()
                continue
            try:
                c.settimeout(3)
                for w in self.messages(read_query(c)):
                    c.sendall(struct.pack("!H", len(w)) + w)
            except (OSError, dns.exception.DNSException, struct.error):
                pass
            finally:
                c.close()

    def close(self):
        self.stop = True
        for t in self.threads:
            t.join(timeout=2)
        self.udp.close()
        self.tcp.close()


def big_zone_text(serial):
    """b.test: 30,000 A records (about 1 MB of AXFR, many 64 KiB messages); the version shows in
    every address's last byte, so a record of another version stands out."""
    lines = ["$ORIGIN b.test.", "$TTL 300",
             "@ SOA ns1.b.test. h.b.test. %d 3600 600 86400 60" % serial, "@ NS ns1.b.test.",
             "ns1 A 192.0.2.53"]
    lines += ["h%d A 10.%d.%d.%d" % (i, i >> 8 & 255, i & 255, serial) for i in range(30000)]
    return "\n".join(lines) + "\n"


def put_redis_zone(redis, serial, addr):
    soa = {"ttl": 300, "ns": "ns1.r.test.", "MBox": "hostmaster.r.test.", "refresh": 3600,
           "retry": 600, "expire": 86400, "minttl": 60, "serial": serial}
    redis.put_zone("r.test.", {
        "@": {"ns": {"ttl": 300, "records": [{"host": "ns1.r.test."}]}},
        "ns1": {"a": {"ttl": 300, "records": [{"ip": "192.0.2.53"}]}},
        "www": {"a": {"ttl": 300, "records": [{"ip": addr}]}},
    }, soa)


def redis_zone_text(serial, addr):
    return """$ORIGIN r.test.
@ 300 SOA ns1.r.test. hostmaster.r.test. %d 3600 600 86400 60
@ 300 NS ns1.r.test.
ns1 300 A 192.0.2.53
www 300 A %s
""" % (serial, addr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl", required=True)
    args = ap.parse_args()
    for prog in ("nsd", "knotd", "knotc"):
        if not find_program(prog):
            print("%s not installed" % prog)
            return 1
    work = tempfile.mkdtemp(prefix="tern-xfr-")
    results = []
    keyring = dns.tsigkeyring.from_text({KEY_NAME: SECRET})
    wrongring = dns.tsigkeyring.from_text({KEY_NAME: WRONG})
    p_text, k_text = zone_text("p.test", 1), zone_text("k.test", 1)
    s_text = zone_text("s.test", 10)
    zdir = os.path.join(work, "zones")
    os.makedirs(zdir)
    p_path, k_path = os.path.join(zdir, "p.zone"), os.path.join(zdir, "k.zone")
    n_path = os.path.join(zdir, "n.zone")
    write_atomic(p_path, p_text)
    write_atomic(k_path, k_text)
    write_atomic(n_path, zone_text("n.test", 1))
    b_path = os.path.join(zdir, "b.zone")
    write_atomic(b_path, big_zone_text(1))
    s_copy = os.path.join(zdir, "s.copy")
    f_copy = os.path.join(zdir, "f.copy")

    tern_port = free_port()
    fake = FakePrimary()
    efake = FakePrimary("e.test", expire=4)  # expires 4 s after its primary goes away
    redis = Redis(work)
    # Knot first (the primary of s.test, a secondary of k.test that retries until tern runs)
    knot = Knot(work, tern_port, s_text)
    nsd = Nsd(work, tern_port)
    yaml = f"""tsig_keys:
  - {{name: {KEY_NAME}, algorithm: hmac-sha256, secret: "{SECRET}"}}
  - {{name: wrong-key, algorithm: hmac-sha256, secret: "{WRONG}"}}
xfr_max_mib: 1
xfr_timeout_ms: 3000
redis:
  address: "{LOOPBACK}:{redis.port}"
  connect_timeout: 500
zones:
  - origin: r.test
    allow_transfer: [127.0.0.1]
    notify: ["{LOOPBACK}@{nsd.port}"]
  - origin: p.test
    file: "{p_path}"
    allow_transfer: [127.0.0.0/8]
    notify: ["{LOOPBACK}@{nsd.port}"]
  - origin: k.test
    file: "{k_path}"
    allow_transfer: [127.0.0.1]
    transfer_key: {KEY_NAME}
    notify: [{{address: "{LOOPBACK}@{knot.port}", key: {KEY_NAME}}}]
  - origin: n.test
    file: "{n_path}"
  - origin: b.test
    file: "{b_path}"
    allow_transfer: [127.0.0.1]
  - origin: s.test
    primary: {{address: "{LOOPBACK}@{knot.port}", key: {KEY_NAME}}}
    file: "{s_copy}"
  - origin: w.test
    primary: {{address: "{LOOPBACK}@{knot.port}", key: wrong-key}}
  - origin: e.test
    primary: "{LOOPBACK}@{efake.port}"
  - origin: f.test
    primary: "{LOOPBACK}@{fake.port}"
    file: "{f_copy}"
"""
    tern = Ternd(work, args.ternd, yaml)
    tern.port = tern_port
    started = []
    started_at = int(time.time())
    try:
        redis.start()
        started.append(redis)
        put_redis_zone(redis, 1, "192.0.2.1")
        knot.start("s.test")
        started.append(knot)
        tern.start("p.test")
        started.append(tern)
        nsd.start("p.test")  # answers once its first AXFR is in
        started.append(nsd)

        def nsd_axfr():
            differential(tern.port, nsd.port, p_text, "p.test")
            expect(tern.log_has("AXFR p.test serial 1 to"), "tern logged no AXFR to NSD")

        def knot_axfr_tsig():
            wait_for(lambda: serial_of(knot.port, "k.test") == 1, CONVERGE, "Knot has k.test")
            differential(tern.port, knot.port, k_text, "k.test")

        run_check(results, "nsd_axfr", nsd_axfr)

        def redis_zone_to_nsd():
            # redins' writers rarely raise soa.serial: tern raises it for a zone secondaries
            # follow, to the Unix time when that is higher (so it also rises across restarts)
            s0 = serial_of(tern.port, "r.test")
            expect(s0 is not None and s0 >= started_at, "r.test serial %s not raised" % s0)
            wait_for(lambda: serial_of(nsd.port, "r.test") == s0, CONVERGE, "NSD has r.test")
            differential(tern.port, nsd.port, redis_zone_text(1, "192.0.2.1"), "r.test")
            # a label changes in Redis, named on the change channel, the serial left as it was
            put_redis_zone(redis, 1, "192.0.2.9")
            t0 = time.monotonic()
            redis.cmd("PUBLISH", "redins:zones:changed", "r.test. www")
            wait_for(lambda: (serial_of(tern.port, "r.test") or 0) > s0, CONVERGE,
                     "tern raising r.test's serial")
            s1 = serial_of(tern.port, "r.test")
            wait_for(lambda: serial_of(nsd.port, "r.test") == s1, CONVERGE,
                     "NSD at r.test serial %d" % s1)
            took = time.monotonic() - t0
            differential(tern.port, nsd.port, redis_zone_text(1, "192.0.2.9"), "r.test")
            wait_for(lambda: tern.log_has("IXFR r.test serial %d to" % s1), 3,
                     "tern's IXFR of r.test")
            print("  NSD at the Redis zone's raised serial %.2f s after PUBLISH" % took)

        run_check(results, "redis_zone_to_nsd", redis_zone_to_nsd)
        run_check(results, "knot_axfr_tsig", knot_axfr_tsig)

        def change(path, origin, serial):
            text = zone_text(origin, serial, variant=serial % 2 == 0 and 1 or 0)
            write_atomic(path, text)
            tern.proc.send_signal(signal.SIGHUP)
            return text

        def nsd_ixfr_notify():
            nonlocal p_text
            p_text = change(p_path, "p.test", 2)
            took = wait_for(lambda: serial_of(nsd.port, "p.test") == 2, CONVERGE,
                            "NSD at serial 2")
            differential(tern.port, nsd.port, p_text, "p.test")
            wait_for(lambda: tern.log_has("IXFR p.test serial 2 to"), 3, "tern's IXFR log line")
            print("  NSD at the new serial %.2f s after SIGHUP" % took)

        def knot_ixfr_notify_tsig():
            nonlocal k_text
            k_text = change(k_path, "k.test", 2)
            took = wait_for(lambda: serial_of(knot.port, "k.test") == 2, CONVERGE,
                            "Knot at serial 2")
            differential(tern.port, knot.port, k_text, "k.test")
            expect(tern.log_has("IXFR k.test serial 2 to"), "tern logged no IXFR to Knot")
            print("  Knot at the new serial %.2f s after SIGHUP" % took)

        run_check(results, "nsd_ixfr_notify", nsd_ixfr_notify)
        run_check(results, "knot_ixfr_notify_tsig", knot_ixfr_notify_tsig)

        def secondary_from_knot():
            global_s = s_text
            wait_for(lambda: serial_of(tern.port, "s.test") == 10, CONVERGE, "tern has s.test")
            differential(knot.port, tern.port, global_s, "s.test")
            new = zone_text("s.test", 11, variant=1)
            write_atomic(knot.s_path, new)
            out = knot.knotc("zone-reload", "s.test")
            expect(out.returncode == 0, "knotc zone-reload: %s %s" % (out.stdout, out.stderr))
            took = wait_for(lambda: serial_of(tern.port, "s.test") == 11, CONVERGE,
                            "tern at Knot's serial 11")
            differential(knot.port, tern.port, new, "s.test")
            expect(tern.log_has("NOTIFY for s.test. from"), "no NOTIFY from Knot logged")
            expect(tern.log_has("IXFR from %s@%d, serial 11 (was 10)" % (LOOPBACK, knot.port)),
                   "no IXFR from Knot logged:\n" + tern.log_text())
            expect(os.path.exists(s_copy) and "192.0.2.22" in open(s_copy).read(),
                   "the on-disk copy was not written")
            print("  tern at Knot's new serial %.2f s after zone-reload" % took)

        run_check(results, "secondary_from_knot", secondary_from_knot)

        def transfer_acl():
            def axfr_rcode(origin, ring=None, port=tern.port):
                q = dns.message.make_query(origin, "AXFR")
                if ring:
                    q.use_tsig(ring, keyname=KEY_NAME, algorithm=dns.tsig.HMAC_SHA256)
                try:
                    r = dns.query.tcp(q, LOOPBACK, port=port, timeout=TIMEOUT)
                except dns.tsig.PeerBadSignature:
                    return "BADSIG"
                except dns.tsig.PeerError as e:
                    return type(e).__name__
                return dns.rcode.to_text(r.rcode())
            expect(axfr_rcode("k.test") == "REFUSED", "unsigned AXFR of k.test not REFUSED")
            got = axfr_rcode("k.test", wrongring)
            expect(got == "BADSIG", "AXFR with a wrong secret: %s" % got)
            expect(axfr_rcode("k.test", keyring) == "NOERROR", "signed AXFR of k.test failed")
            expect(axfr_rcode("n.test") == "REFUSED", "AXFR of n.test (no allow_transfer)")
            r = ask(tern.port, "p.test", "IXFR")
            expect(r.flags & dns.flags.TC, "IXFR over UDP without TC")
            r = ask(tern.port, "p.test", "AXFR")
            expect(r.rcode() == dns.rcode.NOTIMP, "AXFR over UDP: %s" % dns.rcode.to_text(r.rcode()))

        run_check(results, "transfer_acl", transfer_acl)

        def ixfr_not_in_journal():
            msgs = list(dns.query.xfr(LOOPBACK, "p.test", rdtype="IXFR", serial=0,
                                      port=tern.port, timeout=TIMEOUT, lifetime=10,
                                      relativize=False))
            names = set()
            for m in msgs:
                for rr in m.answer:
                    names.add(rr.name.to_text())
            expect("h39.p.test." in names and "added.p.test." in names,
                   "not the whole zone: %d names" % len(names))
            # and from the serial the journal has: only the change
            msgs = list(dns.query.xfr(LOOPBACK, "p.test", rdtype="IXFR", serial=1,
                                      port=tern.port, timeout=TIMEOUT, lifetime=10))
            n = sum(len(rr) for m in msgs for rr in m.answer)
            expect(n < 12, "IXFR from serial 1 has %d records" % n)

        run_check(results, "ixfr_not_in_journal", ixfr_not_in_journal)

        def axfr_pinned_across_reload():
            # a transfer pins its version: a reload published in the middle of it changes
            # nothing in what the client gets (no record of the new version, the old SOA at
            # both ends), while every worker already answers from the new one
            q = dns.message.make_query("b.test", "AXFR")
            w = q.to_wire()
            sk = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sk.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the stream stalls
            sk.settimeout(TIMEOUT * 5)
            sk.connect((LOOPBACK, tern.port))
            sk.sendall(struct.pack("!H", len(w)) + w)

            def read_msg():
                n = struct.unpack("!H", recv_exact(sk, 2))[0]
                return dns.message.from_wire(recv_exact(sk, n))
            msgs = [read_msg()]
            write_atomic(b_path, big_zone_text(2))
            tern.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: serial_of(tern.port, "b.test") == 2, CONVERGE, "b.test reloaded")
            def soa_count():
                return sum(1 for m in msgs for rrset in m.answer
                           if rrset.rdtype == dns.rdatatype.SOA)
            while soa_count() < 2:  # the stream ends with the SOA it began with
                msgs.append(read_msg())
            sk.close()
            soas = [rrset[0].serial for m in msgs for rrset in m.answer
                    if rrset.rdtype == dns.rdatatype.SOA]
            addrs = [rr.address for m in msgs for rrset in m.answer
                     if rrset.rdtype == dns.rdatatype.A for rr in rrset]
            expect(soas == [1, 1], "SOAs in the stream: %s" % soas)
            bad = [a for a in addrs if not a.endswith(".1") and a != "192.0.2.53"]
            expect(not bad, "records of another version: %s" % bad[:3])
            expect(len(addrs) == 30001, "%d A records, want 30001" % len(addrs))
            expect(len(msgs) > 5, "only %d messages: the reload did not land mid-stream" % len(msgs))

        run_check(results, "axfr_pinned_across_reload", axfr_pinned_across_reload)

        def ternctl_zone():
            ctl = [args.ternctl, "-s", os.path.join(tern.dir, "ctl.sock")]
            out = subprocess.run(ctl + ["zone", "p.test"], capture_output=True, text=True,
                                 timeout=10)
            expect(out.returncode == 0, "ternctl zone p.test: %s" % out.stderr)
            t = out.stdout
            for want in ("serial: 2", "transfers: primary", "version: 1 -> 2",
                         "serial 2 to 127.0.0.1", "notify: %s@%d serial 2 acknowledged"
                         % (LOOPBACK, nsd.port)):
                expect(want in t, "ternctl zone p.test lacks %r:\n%s" % (want, t))
            out = subprocess.run(ctl + ["zone", "s.test"], capture_output=True, text=True,
                                 timeout=10)
            expect("last_transfer_in: IXFR from" in out.stdout,
                   "ternctl zone s.test:\n%s" % out.stdout)

        run_check(results, "ternctl_zone", ternctl_zone)

        def secondary_wrong_key():
            wait_for(lambda: tern.log_has("zone w.test: refresh failed"), CONVERGE,
                     "a failed refresh of w.test")
            expect("TSIG" in tern.log_text(limit=400000).split("zone w.test: refresh failed")[1]
                   .split("\n")[0], "the failure does not name TSIG")
            r = ask(tern.port, "www.w.test", "A")
            expect(r.rcode() == dns.rcode.SERVFAIL, "w.test: %s" % dns.rcode.to_text(r.rcode()))

        run_check(results, "secondary_wrong_key", secondary_wrong_key)

        def bad_primary():
            wait_for(lambda: serial_of(tern.port, "f.test") == 1, CONVERGE, "f.test from the fake")
            for mode, serial, what in (("truncated", 2, "truncated"), ("good", 0, "backwards"),
                                       ("big", 3, "big")):
                fake.mode, fake.serial = mode, serial
                mark = len(tern.log_text(limit=10**7))
                q = dns.message.make_query("f.test", "SOA")
                q.set_opcode(dns.opcode.NOTIFY)
                q.flags |= dns.flags.AA
                dns.query.udp(q, LOOPBACK, port=tern.port, timeout=TIMEOUT, source=LOOPBACK,
                              ignore_unexpected=True)

                def failed():
                    return "zone f.test: refresh failed" in tern.log_text(limit=10**7)[mark:] \
                        or (mode == "good" and "zone f.test: up to date" in tern.log_text(limit=10**7)[mark:])
                if mode == "good":
                    time.sleep(1.0)  # an older serial on the primary: nothing to transfer
                else:
                    wait_for(failed, CONVERGE, "a failed refresh (%s)" % what)
                expect(serial_of(tern.port, "f.test") == 1, "%s: serial now %s" %
                       (what, serial_of(tern.port, "f.test")))
                r = ask(tern.port, "www.f.test", "A")
                expect(r.answer and r.answer[0][0].address == "192.0.2.1",
                       "%s: the old version is not served" % what)

        run_check(results, "bad_primary", bad_primary)

        def secondary_expires():
            # RFC 1034: no successful refresh within the SOA expire: SERVFAIL; the primary back
            # with the same version: served again without a transfer
            wait_for(lambda: serial_of(tern.port, "e.test") == 1, CONVERGE, "e.test transferred")
            efake.mode = "down"
            t0 = time.monotonic()
            wait_for(lambda: ask(tern.port, "www.e.test", "A").rcode() == dns.rcode.SERVFAIL,
                     CONVERGE + 10, "e.test answering SERVFAIL after its expire")
            took = time.monotonic() - t0
            # expire counts from the last good refresh, at most one refresh (2 s) before
            expect(took >= 1.9, "expired %.1f s after its primary went away: before its 4 s "
                   "expire less one 2 s refresh" % took)
            expect(tern.log_has("zone e.test expired"), "no expiry logged")
            efake.mode = "good"
            wait_for(lambda: ask(tern.port, "www.e.test", "A").rcode() == dns.rcode.NOERROR,
                     CONVERGE, "e.test served again once its primary answers")
            expect(tern.log_has("zone e.test: the primary answers again with serial 1"),
                   "no revival logged")
            print("  e.test answered SERVFAIL %.1f s after its primary went away" % took)

        run_check(results, "secondary_expires", secondary_expires)

        def secondary_primary_down():
            knot.stop()
            started.remove(knot)
            mark = len(tern.log_text(limit=10**7))
            q = dns.message.make_query("s.test", "SOA")
            q.set_opcode(dns.opcode.NOTIFY)
            q.flags |= dns.flags.AA
            # a NOTIFY from a host not allowed: REFUSED, and nothing happens
            r = dns.query.udp(q, LOOPBACK, port=tern.port, timeout=TIMEOUT, source="127.0.0.2")
            expect(r.rcode() == dns.rcode.REFUSED, "NOTIFY from 127.0.0.2: %s"
                   % dns.rcode.to_text(r.rcode()))
            expect(serial_of(tern.port, "s.test") == 11, "s.test lost with Knot down")
            tern.stop()
            started.remove(tern)
            res = clean_exit_result(tern)
            expect(res is None, res[1] if res else "")
            tern.start("p.test")
            started.append(tern)
            expect(serial_of(tern.port, "s.test") == 11, "s.test not served from its copy")
            wait_for(lambda: "zone s.test: refresh failed" in tern.log_text(limit=10**7),
                     CONVERGE, "a failed refresh logged")
            del mark

        run_check(results, "secondary_primary_down", secondary_primary_down)
        tern.stop()
        started.remove(tern)
        res = clean_exit_result(tern)
        results.append(res if res else ("clean_exit", None))
    except Exception as e:  # noqa: BLE001
        results.append(("setup", "%s: %s\n%s" % (type(e).__name__, e, tern.log_text())))
    finally:
        for s in started:
            s.stop()
        fake.close()
        efake.close()
    rc = report(results, width=28)
    if rc:
        print("--- ternd log ---\n" + tern.log_text(limit=20000))
        print("--- knot log ---\n" + knot.log_text(limit=4000))
        print("--- nsd log ---\n" + nsd.nsd_log()[-4000:])
    shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
