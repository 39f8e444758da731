#!/usr/bin/python3
"""DNS over TLS (RFC 7858) against the real ternd, with real clients.

One ternd serves d.test over UDP/TCP and over TLS (tls: listen, an ECDSA certificate for
dns.test signed by a CA made here, client_ca set: clients are asked for a certificate and
need none), with a 1 s handshake timeout and a 2 s idle timeout.

Checks:
  kdig_same_as_udp      kdig +tls (CA and hostname verified) gets, for every name and type of
                        the zone and an NXDOMAIN, the same answer as dnspython over UDP
  python_pipelined      Python ssl, ALPN "dot" negotiated, TLS 1.3 and TLS 1.2: 20 queries
                        pipelined on one connection, answered in order, same as UDP (and
                        counted: ternctl stats tls_queries)
  resumption            a second connection with the first one's session resumes it
                        (session_reused True), on TLS 1.3 and on TLS 1.2 (tickets);
                        tls_resumed counts them
  unbound_forward_tls   Unbound forwarding d.test over TLS (forward-tls-upstream, tls-cert-
                        bundle with the test CA, the name checked) answers as UDP does
  slow_handshake        a client that sends half a ClientHello and stalls, and one that
                        connects and sends nothing, are closed by the handshake timeout
                        (tls_handshake_timeout counts them)
  half_open             a client that finishes its handshake, sends half a query and goes
                        silent is closed by the idle timeout; an answer is still served to
                        a new connection meanwhile
  handshake_flood       openssl s_time (4 processes, new sessions, 3 s) makes as many full
                        handshakes as it can while UDP queries go on: every UDP query is
                        answered, and DoT still answers afterwards
  sighup_new_cert       a new certificate and SIGHUP: a new connection gets it; a broken one
                        and SIGHUP: refused (logged with its path), the last good one stays
  clean_exit            ternd exits 0 on SIGTERM

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded; only the processes started here are stopped.

    test_dot.py --ternd build/ternd --ternctl build/ternctl
"""

import argparse
import hashlib
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import (LOOPBACK, Failure, YamlTernd, expect, find_program, finish,  # noqa: E402
                     free_port, make_tls_certs, read_exact, run_checks, stop_process,
                     wait_until)

ZONE = "d.test"
HOST = "dns.test"
TIMEOUT = 3.0
HS_TIMEOUT_MS = 1000
IDLE_S = 2
NAMES = [("d.test", "SOA"), ("d.test", "NS"), ("www.d.test", "A"), ("www.d.test", "AAAA"),
         ("mail.d.test", "MX"), ("txt.d.test", "TXT"), ("alias.d.test", "A"),
         ("nope.d.test", "A")]


def zone_text():
    return "\n".join([
        "$ORIGIN d.test.", "$TTL 300",
        "@ SOA ns1 hostmaster 1 3600 600 86400 300",
        "@ NS ns1", "ns1 A 192.0.2.53",
        "www A 192.0.2.1", "www A 192.0.2.2", "www AAAA 2001:db8::1",
        "mail MX 10 www", "txt TXT \"dot test\" \"second string\"",
        "alias CNAME www"]) + "\n"


def udp(name, rtype, port):
    return dns.query.udp(dns.message.make_query(name, rtype), LOOPBACK, port=port,
                         timeout=TIMEOUT)


def rrsets(msg):
    """The answer section as sorted text, TTLs and order aside: what two servers must agree on."""
    out = []
    for rr in msg.answer:
        for rd in rr:
            out.append("%s %s %s" % (rr.name.to_text().lower(), dns.rdatatype.to_text(rr.rdtype),
                                     rd.to_text()))
    return sorted(out)


def tls_context(ca, version=None, alpn=True):
    ctx = ssl.create_default_context(cafile=ca)
    if version:
        ctx.minimum_version = ctx.maximum_version = version
    if alpn:
        ctx.set_alpn_protocols(["dot"])
    return ctx


def tls_connect(ctx, port, session=None, timeout=TIMEOUT):
    s = socket.create_connection((LOOPBACK, port), timeout=timeout)
    return ctx.wrap_socket(s, server_hostname=HOST, session=session)


def tls_query(t, name, rtype, qid=None):
    q = dns.message.make_query(name, rtype)
    if qid is not None:
        q.id = qid
    w = q.to_wire()
    t.sendall(struct.pack("!H", len(w)) + w)
    n = struct.unpack("!H", read_exact(t, 2))[0]
    return dns.message.from_wire(read_exact(t, n))


def closed_within(s, limit):
    """Seconds until the server closes s (EOF or reset), Failure past limit."""
    t0 = time.monotonic()
    s.settimeout(limit)
    try:
        while True:
            if not s.recv(4096):
                return time.monotonic() - t0
    except (ConnectionResetError, ssl.SSLError, ssl.SSLEOFError):
        return time.monotonic() - t0
    except socket.timeout:
        raise Failure("still open after %.1f s" % limit)


class Dot:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="tern_dot_")
        self.pki = os.path.join(self.work, "pki")
        os.makedirs(self.pki)
        self.ca, self.ca_key, cert, key = make_tls_certs(self.pki, HOST)
        self.cert = os.path.join(self.work, "dot.pem")
        self.key = os.path.join(self.work, "dot.key")
        shutil.copy(cert, self.cert)
        shutil.copy(key, self.key)
        with open(os.path.join(self.work, "d.zone"), "w") as f:
            f.write(zone_text())
        self.tls_port = free_port()
        self.tern = None
        self.unbound = None

    def start(self):
        yaml = f"""zones:
  - origin: {ZONE}
    file: {self.work}/d.zone
tcp_idle_timeout: {IDLE_S}
tls:
  listen: ["{LOOPBACK}:{self.tls_port}"]
  certificate: {self.cert}
  key: {self.key}
  client_ca: {self.ca}
  handshake_timeout_ms: {HS_TIMEOUT_MS}
"""
        self.tern = YamlTernd(self.work, self.args.ternd, yaml, ternctl=self.args.ternctl)
        self.tern.start(ZONE)

    def stats(self):
        """ternctl stats as {name: int}."""
        r = self.tern.ctl("stats")
        expect(r.returncode == 0, "ternctl stats: %s" % r.stderr)
        out = {}
        for line in r.stdout.splitlines():
            k, _, v = line.strip().partition(": ")
            if v.isdigit():
                out[k] = int(v)
        return out

    def counted(self, name, at_least):
        wait_until(lambda: self.stats().get(name, 0) >= at_least, 5,
                   "ternctl stats %s >= %d" % (name, at_least))

    # ---- checks ------------------------------------------------------------------------------

    def kdig_same_as_udp(self):
        kdig = find_program("kdig")
        expect(kdig, "kdig not found")
        for name, rtype in NAMES:
            r = subprocess.run([kdig, "@%s" % LOOPBACK, "-p", str(self.tls_port), "+tls",
                                "+tls-ca=%s" % self.ca, "+tls-hostname=%s" % HOST, name, rtype],
                               capture_output=True, text=True, timeout=15)
            expect(r.returncode == 0 and "status:" in r.stdout,
                   "kdig %s %s failed: %s%s" % (name, rtype, r.stdout, r.stderr))
            want = udp(name, rtype, self.tern.port)
            status = dns.rcode.to_text(want.rcode())
            expect("status: %s;" % status in r.stdout,
                   "kdig %s %s: want %s, got:\n%s" % (name, rtype, status, r.stdout))
            expect("TLS" in r.stdout or "(TCP)" in r.stdout,
                   "kdig %s %s: not over TLS:\n%s" % (name, rtype, r.stdout))
            got, inside = [], False
            for line in r.stdout.splitlines():
                if line.startswith(";; ANSWER SECTION"):
                    inside = True
                elif inside and (not line.strip() or line.startswith(";;")):
                    inside = False
                elif inside:
                    f = line.split()
                    got.append("%s %s %s" % (f[0].lower(), f[3], " ".join(f[4:])))
            got = sorted(g.lower() for g in got)
            exp = sorted(x.lower() for x in rrsets(want))
            expect(got == exp, "kdig %s %s over TLS: %s, UDP: %s" % (name, rtype, got, exp))

    def python_pipelined(self):
        for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
            t = tls_connect(tls_context(self.ca, version), self.tls_port)
            try:
                expect(t.selected_alpn_protocol() == "dot",
                       "%s: ALPN %r, not dot" % (version, t.selected_alpn_protocol()))
                wire = b""
                qs = []
                for i in range(20):
                    name, rtype = NAMES[i % len(NAMES)]
                    q = dns.message.make_query(name, rtype)
                    q.id = 1000 + i
                    qs.append((q.id, name, rtype))
                    w = q.to_wire()
                    wire += struct.pack("!H", len(w)) + w
                t.sendall(wire)
                for qid, name, rtype in qs:
                    n = struct.unpack("!H", read_exact(t, 2))[0]
                    r = dns.message.from_wire(read_exact(t, n))
                    expect(r.id == qid, "%s: answer id %d, want %d (order)" % (version, r.id, qid))
                    expect(rrsets(r) == rrsets(udp(name, rtype, self.tern.port)),
                           "%s: %s %s differs from UDP" % (version, name, rtype))
            finally:
                t.close()
        self.counted("tls_queries", 40)

    def resumption(self):
        for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
            ctx = tls_context(self.ca, version)
            t = tls_connect(ctx, self.tls_port)
            tls_query(t, "www.d.test", "A")  # TLS 1.3: the ticket comes after the handshake
            sess = t.session
            expect(not t.session_reused, "%s: first connection reused a session" % version)
            t.close()
            reused = 0
            for _ in range(4):  # the kernel spreads them over both workers: one key for all
                t = tls_connect(ctx, self.tls_port, session=sess)
                r = tls_query(t, "www.d.test", "A")
                expect(r.rcode() == dns.rcode.NOERROR, "resumed: %s" % r.rcode())
                reused += t.session_reused
                sess = t.session
                t.close()
            expect(reused == 4, "%s: %d of 4 connections resumed" % (version, reused))
        self.counted("tls_resumed", 8)

    def unbound_forward_tls(self):
        binary = find_program("unbound")
        expect(binary, "unbound not found")
        d = os.path.join(self.work, "unbound")
        os.makedirs(d, exist_ok=True)
        port = free_port()
        conf = os.path.join(d, "unbound.conf")
        with open(conf, "w") as f:
            f.write(f"""server:
    verbosity: 1
    interface: {LOOPBACK}
    port: {port}
    do-ip6: no
    num-threads: 1
    so-reuseport: no
    directory: "{d}"
    chroot: ""
    username: ""
    use-syslog: no
    logfile: "{d}/unbound.log"
    pidfile: "{d}/unbound.pid"
    do-not-query-localhost: no
    module-config: "iterator"
    qname-minimisation: no
    tls-cert-bundle: "{self.ca}"
    local-zone: "test." nodefault
    local-zone: "d.test." nodefault
remote-control:
    control-enable: no
forward-zone:
    name: "{ZONE}."
    forward-tls-upstream: yes
    forward-addr: {LOOPBACK}@{self.tls_port}#{HOST}
""")
        out = open(os.path.join(d, "output.log"), "wb")
        self.unbound = subprocess.Popen([binary, "-d", "-c", conf], stdout=out,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_until(lambda: udp("www.d.test", "A", port).rcode() == dns.rcode.NOERROR, 15,
                       "unbound answers www.d.test over its TLS forwarder")
            for name, rtype in NAMES:
                got = dns.query.udp(dns.message.make_query(name, rtype), LOOPBACK, port=port,
                                    timeout=TIMEOUT)
                want = udp(name, rtype, self.tern.port)
                expect(got.rcode() == want.rcode(), "%s %s: rcode %s via unbound, %s direct"
                       % (name, rtype, got.rcode(), want.rcode()))
                expect(rrsets(got) == rrsets(want), "%s %s: %s via unbound, %s direct"
                       % (name, rtype, rrsets(got), rrsets(want)))
        finally:
            stop_process(self.unbound)
            out.close()

    def slow_handshake(self):
        # half a ClientHello: a TLS record header promising 512 bytes, then 5 of them
        s1 = socket.create_connection((LOOPBACK, self.tls_port), timeout=TIMEOUT)
        s1.sendall(bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03]))
        s2 = socket.create_connection((LOOPBACK, self.tls_port), timeout=TIMEOUT)
        try:
            for s, what in ((s1, "half a ClientHello"), (s2, "nothing sent")):
                took = closed_within(s, HS_TIMEOUT_MS / 1000 + 2)
                expect(took <= HS_TIMEOUT_MS / 1000 + 1.5,
                       "%s: closed after %.1f s, handshake timeout %d ms" % (what, took,
                                                                            HS_TIMEOUT_MS))
        finally:
            s1.close()
            s2.close()
        self.counted("tls_handshake_timeout", 2)

    def half_open(self):
        t = tls_connect(tls_context(self.ca), self.tls_port)
        try:
            q = dns.message.make_query("www.d.test", "A").to_wire()
            t.sendall(struct.pack("!H", len(q)) + q[:5])  # half a query, then silence
            # meanwhile a new connection is served
            t2 = tls_connect(tls_context(self.ca), self.tls_port)
            r = tls_query(t2, "www.d.test", "A")
            t2.close()
            expect(r.rcode() == dns.rcode.NOERROR, "a second client: %s" % r.rcode())
            took = closed_within(t, IDLE_S + 3)
            expect(took <= IDLE_S + 2, "half-open client closed after %.1f s (idle %d s)"
                   % (took, IDLE_S))
        finally:
            t.close()

    def handshake_flood(self):
        openssl = find_program("openssl")
        expect(openssl, "openssl not found")
        procs = [subprocess.Popen([openssl, "s_time", "-connect", "%s:%d" % (LOOPBACK,
                                   self.tls_port), "-new", "-time", "3", "-CAfile", self.ca],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, text=True) for _ in range(4)]
        sent = answered = 0
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < 3.0:
                sent += 1
                try:
                    r = dns.query.udp(dns.message.make_query("www.d.test", "A"), LOOPBACK,
                                      port=self.tern.port, timeout=1.0)
                    answered += r.rcode() == dns.rcode.NOERROR
                except dns.exception.Timeout:
                    pass
                time.sleep(0.01)
        finally:
            outs = []
            for p in procs:
                try:
                    outs.append(p.communicate(timeout=20)[0])
                except subprocess.TimeoutExpired:
                    stop_process(p)
                    outs.append("")
        conns = 0
        for o in outs:
            for line in o.splitlines():
                if "connections in" in line and "real seconds" in line:
                    conns += int(line.split()[0])
        self.flood_rate = conns / 3.0
        print("handshake_flood: %d full handshakes in 3 s (%.0f/s) by openssl s_time; UDP %d "
              "of %d answered" % (conns, conns / 3.0, answered, sent))
        expect(conns > 0, "openssl s_time made no connection:\n%s" % "\n".join(outs)[-2000:])
        expect(answered == sent, "UDP during the flood: %d of %d answered" % (answered, sent))
        t = tls_connect(tls_context(self.ca), self.tls_port)
        r = tls_query(t, "www.d.test", "A")
        t.close()
        expect(r.rcode() == dns.rcode.NOERROR, "DoT after the flood: %s" % r.rcode())

    def peer_cert_digest(self):
        t = tls_connect(tls_context(self.ca), self.tls_port)
        der = t.getpeercert(binary_form=True)
        tls_query(t, "www.d.test", "A")
        t.close()
        return hashlib.sha256(der).hexdigest()

    def sighup_new_cert(self):
        old = self.peer_cert_digest()
        _, _, cert, key = make_tls_certs(self.pki, HOST, stem="second",
                                         ca=(self.ca, self.ca_key))
        shutil.copy(cert, self.cert)
        shutil.copy(key, self.key)
        self.tern.proc.send_signal(1)
        wait_until(lambda: self.tern.log_has("tls: certificate and key read again"), 10,
                   "the reload of the certificate logged")
        new = self.peer_cert_digest()
        expect(new != old, "a new connection after SIGHUP still gets the old certificate")
        with open(self.cert, "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n")
        self.tern.proc.send_signal(1)
        wait_until(lambda: self.tern.log_has("the certificate in use stays"), 10,
                   "the broken certificate refused")
        expect(self.tern.log_has("tls: certificate %s" % self.cert),
               "the refusal does not name the file:\n%s" % self.tern.log_text())
        expect(self.peer_cert_digest() == new, "after a refused reload, not the last good "
               "certificate")

    def run(self):
        results = []
        checks = [("kdig_same_as_udp", self.kdig_same_as_udp),
                  ("python_pipelined", self.python_pipelined),
                  ("resumption", self.resumption),
                  ("unbound_forward_tls", self.unbound_forward_tls),
                  ("slow_handshake", self.slow_handshake),
                  ("half_open", self.half_open),
                  ("handshake_flood", self.handshake_flood),
                  ("sighup_new_cert", self.sighup_new_cert)]
        try:
            self.start()
            for name, fn in checks:  # independent: each runs even if one before failed
                run_checks(results, [(name, fn)])
        finally:
            if self.tern:
                self.tern.stop()
        rc = finish(self.tern, results) if self.tern else 1
        if rc == 0:
            shutil.rmtree(self.work, ignore_errors=True)
        return rc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl", required=True)
    return Dot(ap.parse_args()).run()


if __name__ == "__main__":
    sys.exit(main())
