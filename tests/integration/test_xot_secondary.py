#!/usr/bin/python3
"""XFR over TLS (RFC 9103) with tern as the secondary and BIND 9.18 as the primary.

The test makes a CA (openssl CLI), a certificate for primary.example and one for tern (mutual
TLS). BIND serves the zones on a TLS port only for transfers (allow-transfer transport tls), and
on a second TLS port that requires a client certificate from that CA (mutual TLS: its tls block's
ca-file). One ternd is the secondary of:
  good.test    strict, name primary.example + ca, TSIG on top (BIND asks for the key)
  pin.test     strict, pin = the SHA-256 of BIND's SPKI
  badname.test strict, name wrong.example          -> refused, "name mismatch"
  badpin.test  strict, a pin of another key         -> refused, "pin mismatch"
  noca.test    strict, right name, system CA store  -> refused, "untrusted CA"
  opp.test     opportunistic, name wrong.example    -> transferred all the same
  mtls.test    strict, our certificate and key, from the mutual-TLS port
  nocert.test  strict, no certificate, from the mutual-TLS port -> refused by BIND
  stall.test   from a port written here that accepts and never says a word (a stalled TLS
               primary: the handshake hangs)

Checks:
  strict_name_tsig     good.test served as BIND has it; the log says "over TLSv1.3"
  ixfr_after_notify    a change at BIND (rndc-less: a new zone file + SIGHUP-free reload via
                       a second serial, NOTIFY to tern): served within a bound, by IXFR
  strict_pin           pin.test served
  strict_refusals      badname/badpin/noca: not served (SERVFAIL), each logged with the zone,
                       the primary and the reason; nothing reached BIND's transfer log for them
  opportunistic        opp.test served though the name is wrong; the log says unauthenticated
  mutual_tls           mtls.test served; nocert.test not
  stalled_primary      stall.test's handshake ends at xfr_timeout_ms (logged); SIGTERM while one
                       hangs: ternd exits 0 within 2 s
  wire_clear_of_dns    (in a network namespace made here) BIND and tern run there, every frame
                       on its lo is captured (AF_PACKET) through the first transfer and an IXFR:
                       no record name or address of the zone in the bytes, no datagram to BIND,
                       and each TCP stream to or from port 853 is a sequence of TLS records
                       (handshake first, application data after); a later pull (an SOA
                       poll) resumed the TLS session

Prints one line per check and "N passed, N failed"; exits 1 on a failure, 77 when named is
missing. Every wait is bounded; only processes started here are stopped (by pid).

    test_xot_secondary.py --ternd build/ternd
"""

import argparse
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import dns.message
import dns.query
import dns.rcode

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import (LOOPBACK, Failure, expect, find_program, free_port,  # noqa: E402
                     report, run_check, stop_process, wait_until)

WAIT = 20.0  # seconds for a transfer or a log line (a handshake and a small zone: well under 1 s)
KEY_SECRET = "c2VjcmV0LWtleS1mb3IteG90LXRlc3Rz"
# what must never cross the wire in clear: a label and an address of the zone's records
SECRET_LABEL = "hidden-host"
SECRET_ADDR = "198.51.100.77"
ZONES_OK = ["good.test", "pin.test", "opp.test", "mtls.test"]
ZONES_REFUSED = {"badname.test": "name mismatch", "badpin.test": "pin mismatch",
                 "noca.test": "untrusted CA"}


def zone_text(origin, serial, extra="", refresh=3600):
    return f"""$ORIGIN {origin}.
$TTL 300
@ SOA ns1 hostmaster {serial} {refresh} 600 86400 60
@ NS ns1
ns1 A 192.0.2.53
{SECRET_LABEL} A {SECRET_ADDR}
www A 192.0.2.{serial % 250}
{extra}"""


def sh(*args, **kw):
    subprocess.run(args, check=True, capture_output=True, timeout=60, **kw)


def make_pki(d):
    """A CA, BIND's certificate for primary.example, tern's client certificate, another key (a
    wrong pin); returns the pins (base64 SHA-256 of the DER SPKI) of BIND's key and the other."""
    ossl = find_program("openssl")
    sh(ossl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem", "-days", "2", "-subj", "/CN=xot test CA")
    for name, cn, ext in (("srv", "primary.example", "subjectAltName=DNS:primary.example"),
                          ("cli", "tern.example", "extendedKeyUsage=clientAuth")):
        sh(ossl, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.csr", "-subj", f"/CN={cn}")
        with open(f"{d}/{name}.ext", "w") as f:
            f.write(ext + "\n")
        sh(ossl, "x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/ca.pem", "-CAkey",
           f"{d}/ca.key", "-CAcreateserial", "-out", f"{d}/{name}.pem", "-days", "2",
           "-extfile", f"{d}/{name}.ext")
    pins = []
    for name in ("srv", "cli"):
        der = subprocess.run([ossl, "pkey", "-in", f"{d}/{name}.key", "-pubout", "-outform",
                              "der"], check=True, capture_output=True, timeout=30).stdout
        import base64
        import hashlib
        pins.append(base64.b64encode(hashlib.sha256(der).digest()).decode())
    return pins


class Named(servers.Server):
    """BIND as the XoT primary of zones: plain port for the probe and NOTIFY's source, tls port
    (transfers over TLS only), mtls port (a client certificate from the CA required)."""

    name = "named"

    def __init__(self, workdir, zones, pki, notify_port, tls_port=None, mtls_port=None):
        self.zones_list = zones
        self.pki = pki
        self.notify_port = notify_port
        self.refresh = 3600  # the zones' SOA refresh
        super().__init__(workdir, [])
        self.tls_port = tls_port or free_port()
        self.mtls_port = mtls_port or free_port()

    def zone_file(self, z):
        return os.path.join(self.dir, z + ".db")

    def write_zone(self, z, serial, extra=""):
        servers.write_atomic(self.zone_file(z), zone_text(z, serial, extra, self.refresh))

    def command(self):
        d, p = self.dir, self.pki
        zones = "".join(f"""zone "{z}" {{
    type primary;
    file "{self.zone_file(z)}";
    also-notify {{ {LOOPBACK} port {self.notify_port}{" key xfr-key" if z == "good.test"
                                                        else ""}; }};
    allow-transfer transport tls {{ {"key xfr-key" if z == "good.test" else "any"}; }};
    ixfr-from-differences yes;
    max-ixfr-ratio unlimited;
}};
""" for z in self.zones_list)
        with open(os.path.join(d, "named.conf"), "w") as f:
            f.write(f"""key "xfr-key" {{ algorithm hmac-sha256; secret "{KEY_SECRET}"; }};
tls srv {{ key-file "{p}/srv.key"; cert-file "{p}/srv.pem"; session-tickets yes; }};
tls srvm {{ key-file "{p}/srv.key"; cert-file "{p}/srv.pem"; ca-file "{p}/ca.pem"; }};
options {{
    directory "{d}";
    pid-file "{d}/named.pid";
    listen-on port {self.port} {{ {LOOPBACK}; }};
    listen-on port {self.tls_port} tls srv {{ {LOOPBACK}; }};
    listen-on port {self.mtls_port} tls srvm {{ {LOOPBACK}; }};
    listen-on-v6 {{ none; }};
    recursion no;
    dnssec-validation no;
    notify explicit;
    allow-query {{ any; }};
    session-keyfile "{d}/session.key";
    managed-keys-directory "{d}";
}};
controls {{ }};
logging {{ category xfer-out {{ default_stderr; }}; category notify {{ default_stderr; }}; }};
{zones}""")
        return [find_program("named"), "-g", "-c", os.path.join(d, "named.conf"), "-n", "1"]

    def reload(self):
        """SIGHUP: named reloads changed zone files (and NOTIFYs with ixfr-from-differences)."""
        self.proc.send_signal(1)


class SocketThread:
    """A socket served by a thread of its own until stop(): take() each time it is ready (a
    timeout of 0.2 s between, so stop() is prompt)."""

    def __init__(self, sock):
        self.sock = sock
        self.sock.settimeout(0.2)
        self.stop_flag = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def take(self):
        raise NotImplementedError

    def run(self):
        while not self.stop_flag:
            try:
                self.take()
            except socket.timeout:
                continue

    def stop(self):
        self.stop_flag = True
        self.t.join(timeout=5)
        self.sock.close()


class Staller(SocketThread):
    """A TCP port that accepts and says nothing (a TLS primary stalled before its ServerHello);
    counts the connections open now."""

    def __init__(self):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((LOOPBACK, 0))
        sock.listen(16)
        self.port = sock.getsockname()[1]
        self.conns = []
        super().__init__(sock)

    def take(self):
        c, _ = self.sock.accept()
        c.setblocking(False)
        self.conns.append(c)

    def open_now(self):
        """Connections the client has not closed."""
        n = 0
        for c in self.conns:
            try:
                n += c.recv(65536, socket.MSG_PEEK) != b"" or 0
            except BlockingIOError:
                n += 1  # nothing to read: still open
            except OSError:
                pass
        return n

    def stop(self):
        super().stop()
        for c in self.conns:
            c.close()


def tern_yaml(named, pki, pins, log_level="info", stall_port=None):
    tls = f'ca: "{pki}/ca.pem"'
    prim = {
        "good.test": f'{{address: "{LOOPBACK}@{named.tls_port}", key: xfr-key, tls: {{mode: '
                     f'strict, name: primary.example, {tls}}}}}',
        "pin.test": f'{{address: "{LOOPBACK}@{named.tls_port}", tls: {{pin: "{pins[0]}"}}}}',
        "badname.test": f'{{address: "{LOOPBACK}@{named.tls_port}", tls: {{name: wrong.example, '
                        f'{tls}}}}}',
        "badpin.test": f'{{address: "{LOOPBACK}@{named.tls_port}", tls: {{pin: ["{pins[1]}"]}}}}',
        "noca.test": f'{{address: "{LOOPBACK}@{named.tls_port}", tls: {{name: primary.example}}}}',
        "opp.test": f'{{address: "{LOOPBACK}@{named.tls_port}", tls: {{mode: opportunistic, '
                    f'name: wrong.example, {tls}}}}}',
        "mtls.test": f'{{address: "{LOOPBACK}@{named.mtls_port}", tls: {{name: primary.example, '
                     f'{tls}, certificate: "{pki}/cli.pem", key: "{pki}/cli.key"}}}}',
        "nocert.test": f'{{address: "{LOOPBACK}@{named.mtls_port}", tls: {{name: '
                       f'primary.example, {tls}}}}}',
    }
    if stall_port:
        prim["stall.test"] = f'{{address: "{LOOPBACK}@{stall_port}", tls: {{mode: opportunistic}}}}'
    y = f"""log_level: {log_level}
xfr_timeout_ms: 3000
tsig_keys:
  - {{name: xfr-key, algorithm: hmac-sha256, secret: "{KEY_SECRET}"}}
zones:
"""
    for z, p in prim.items():
        y += f"  - origin: {z}\n    primary: {p}\n    allow_notify: [{LOOPBACK}]\n"
    return y


class Tern(servers.YamlTernd):
    def __init__(self, workdir, binary, yaml, port=None):
        super().__init__(workdir, binary, yaml)
        if port:
            self.port = port

    def start_plain(self):
        """Start without a probe zone of its own: wait for the port to answer anything."""
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.dir)


def ask(port, name, rdtype="A"):
    q = dns.message.make_query(name, rdtype)
    return dns.query.udp(q, LOOPBACK, port=port, timeout=2)


def serial(port, zone):
    try:
        r = ask(port, zone, "SOA")
    except Exception:  # noqa: BLE001 - not up yet
        return None
    if r.rcode() != dns.rcode.NOERROR or not r.answer:
        return None
    return r.answer[0][0].serial


def served(port, zone):
    r = ask(port, f"{SECRET_LABEL}.{zone}")
    return r.rcode() == dns.rcode.NOERROR and r.answer and r.answer[0][0].address == SECRET_ADDR


# ---- the checks against the loopback setup -------------------------------------------------

def run_loopback(args, work, results):
    pki = os.path.join(work, "pki")
    os.makedirs(pki)
    pins = make_pki(pki)
    tern_port = free_port()
    named = Named(work, ZONES_OK + list(ZONES_REFUSED) + ["nocert.test"], pki, tern_port)
    for z in named.zones_list:
        named.write_zone(z, 1)
    staller = Staller()
    tern = Tern(work, args.ternd, tern_yaml(named, pki, pins, "debug", staller.port),
                port=tern_port)
    try:
        named.start("good.test")
        tern.start_plain()
        checks_loopback(results, named, tern, staller)
    finally:
        tern.stop()
        named.stop()
        staller.stop()
        if any(err for _, err in results):
            print("--- named ---\n" + named.log_text(6000))
            print("--- tern ---\n" + tern.log_text(12000))


def checks_loopback(results, named, tern, staller):
    port = tern.port

    def strict_name_tsig():
        wait_until(lambda: serial(port, "good.test") == 1, WAIT, "good.test served")
        expect(served(port, "good.test"), "good.test's records as BIND has them")
        expect(tern.log_has("zone good.test: AXFR from %s@%d over TLSv1.3"
                            % (LOOPBACK, named.tls_port)), "the AXFR logged as over TLSv1.3")

    def ixfr_after_notify():
        named.write_zone("good.test", 2, "new A 192.0.2.2\n")
        named.reload()
        wait_until(lambda: serial(port, "good.test") == 2, WAIT, "good.test serial 2 served")
        r = ask(port, "new.good.test")
        expect(r.rcode() == dns.rcode.NOERROR and r.answer, "the added name served")
        expect(tern.log_has("zone good.test: IXFR from"), "the change came by IXFR")

    def strict_pin():
        wait_until(lambda: serial(port, "pin.test") == 1, WAIT, "pin.test served")

    def strict_refusals():
        for z, why in ZONES_REFUSED.items():
            wait_until(lambda z=z, why=why: tern.log_has(
                "zone %s: refresh failed: %s@%d: TLS authentication failed (strict): %s"
                % (z, LOOPBACK, named.tls_port, why)), WAIT, "%s refused: %s" % (z, why))
            r = ask(port, f"{SECRET_LABEL}.{z}")
            expect(r.rcode() != dns.rcode.NOERROR, "%s not served (rcode %s)" % (z, r.rcode()))
        log = named.log_text(200000)
        for z in ZONES_REFUSED:
            expect(f"'{z}/IN'" not in log or "transfer of '%s" % z not in log,
                   "BIND never got a transfer request for %s" % z)

    def opportunistic():
        wait_until(lambda: serial(port, "opp.test") == 1, WAIT, "opp.test served")
        expect(tern.log_has("unauthenticated: name mismatch"), "logged as unauthenticated")

    def mutual_tls():
        wait_until(lambda: serial(port, "mtls.test") == 1, WAIT, "mtls.test served")
        wait_until(lambda: tern.log_has("zone nocert.test: refresh failed"), WAIT,
                   "nocert.test refused")
        expect(serial(port, "nocert.test") is None, "nocert.test not served")
        line = [x for x in tern.log_text(400000).splitlines()
                if "zone nocert.test: refresh failed" in x][0]
        print("  " + line)

    def stalled_primary():
        wait_until(lambda: tern.log_has(
            "zone stall.test: refresh failed: %s@%d: TLS to %s@%d: not done in 3000 ms "
            "(xfr_timeout_ms)" % (LOOPBACK, staller.port, LOOPBACK, staller.port)), WAIT,
            "the stalled handshake given up at xfr_timeout_ms")
        # SIGTERM while a handshake hangs (the retry comes every 5 s and waits 3 s)
        wait_until(lambda: staller.open_now() > 0, WAIT, "a handshake hanging")
        t0 = time.monotonic()
        tern.stop()
        took = time.monotonic() - t0
        expect(tern.proc.returncode == 0, "ternd exit status %s" % tern.proc.returncode)
        expect(took < 2.0, "SIGTERM took %.2f s with a handshake hanging" % took)
        print("  SIGTERM with a TLS handshake hanging: exit in %.2f s" % took)

    for name, fn in (("strict_name_tsig", strict_name_tsig),
                     ("ixfr_after_notify", ixfr_after_notify), ("strict_pin", strict_pin),
                     ("strict_refusals", strict_refusals), ("opportunistic", opportunistic),
                     ("mutual_tls", mutual_tls), ("stalled_primary", stalled_primary)):
        run_check(results, name, fn)


# ---- the wire check, in a network namespace -------------------------------------------------

ETH_P_ALL = 0x0003


class Capture(SocketThread):
    """Every frame on lo (this process's network namespace) while running."""

    def __init__(self):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        sock.bind(("lo", 0))
        self.frames = []
        super().__init__(sock)

    def take(self):
        self.frames.append(self.sock.recv(262144))


def parse_frames(frames):
    """(udp datagrams [(sport, dport, payload)], tcp streams {(src, sport, dst, dport): bytes})
    from Ethernet frames of IPv4; TCP segments deduplicated and ordered by sequence number."""
    udp, segs = [], {}
    for f in frames:
        if len(f) < 34 or f[12:14] != b"\x08\x00":
            continue
        ip = f[14:]
        ihl = (ip[0] & 15) * 4
        total = struct.unpack("!H", ip[2:4])[0]
        proto, src, dst = ip[9], ip[12:16], ip[16:20]
        l4 = ip[ihl:total]
        if proto == 17:
            sport, dport = struct.unpack("!HH", l4[:4])
            udp.append((sport, dport, l4[8:]))
        elif proto == 6:
            sport, dport, seq = struct.unpack("!HHI", l4[:8])
            off = (l4[12] >> 4) * 4
            if len(l4) > off:
                segs.setdefault((src, sport, dst, dport), {})[seq] = l4[off:]
    streams = {}
    for k, by_seq in segs.items():
        data, nxt = b"", None
        for seq in sorted(by_seq):  # one connection each (fresh ports); no wrap in a test
            if nxt is not None and seq < nxt:
                continue
            data += by_seq[seq]
            nxt = seq + len(by_seq[seq])
        streams[k] = data
    return udp, streams


def tls_records(data):
    """The record types of a TLS byte stream, or raise Failure where it is not one."""
    types, pos = [], 0
    while pos < len(data):
        if len(data) - pos < 5 or data[pos] not in (0x14, 0x15, 0x16, 0x17) or \
                data[pos + 1] != 3:
            raise Failure("not a TLS record at byte %d: %r" % (pos, data[pos:pos + 8]))
        types.append(data[pos])
        pos += 5 + struct.unpack("!H", data[pos + 3:pos + 5])[0]
    return types


def run_inside(args):
    """In the namespace (re-executed with --inside): BIND on 853, tern; the capture; a verdict
    printed as the last line ("WIRE OK" or "WIRE FAIL: why"); exit 0 either way."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
    work = tempfile.mkdtemp(prefix="xot-wire-")
    named = tern = cap = None
    try:
        pki = os.path.join(work, "pki")
        os.makedirs(pki)
        pins = make_pki(pki)
        named = Named(work, ["good.test"], pki, 53, tls_port=853)
        named.refresh = 2  # tern polls the SOA every 2 s: the polls after the IXFR resume
        named.write_zone("good.test", 1)
        tern = Tern(work, args.ternd,
                    tern_yaml(named, pki, pins, "debug").split("  - origin: pin.test")[0],
                    port=53)
        named.start("good.test")
        cap = Capture()
        tern.start_plain()
        wait_until(lambda: tern.log_has("zone good.test: AXFR from"), WAIT, "the AXFR")
        named.write_zone("good.test", 2, "new A 192.0.2.2\n")
        named.reload()
        wait_until(lambda: tern.log_has("zone good.test: IXFR from"), WAIT, "the IXFR")
        # a later SOA poll resumes the TLS session of an earlier pull (BIND's session-tickets; a
        # SIGHUP makes BIND new ticket keys, so the IXFR's own connection could not)
        wait_until(lambda: tern.log_has("TLS to 127.0.0.1@853: TLSv1.3, resumed"), WAIT,
                   "a pull resuming the TLS session")
        time.sleep(0.5)
        cap.stop()
        frames, cap = cap.frames, None
        blob = b"".join(frames)
        label = bytes([len(SECRET_LABEL)]) + SECRET_LABEL.encode()
        expect(len(frames) > 20, "frames captured (%d)" % len(frames))
        expect(label not in blob, "the record name %s in clear on the wire" % SECRET_LABEL)
        expect(socket.inet_aton(SECRET_ADDR) not in blob, "the address in clear on the wire")
        udp, streams = parse_frames(frames)
        expect(not [u for u in udp if u[1] in (named.port, 853)],
               "a datagram to the primary (the SOA query in clear?)")
        tls = {k: v for k, v in streams.items() if 853 in (k[1], k[3])}
        expect(len(tls) >= 2, "TCP streams on port 853 (%d)" % len(tls))
        plain = [k for k in streams if k[1] == named.port or k[3] == named.port]
        expect(not plain, "no TCP to the primary's clear port: %r" % plain)
        for k, data in tls.items():
            types = tls_records(data)
            expect(types and types[0] == 0x16, "stream %r starts with a handshake record" % (k,))
        expect(any(0x17 in tls_records(v) for v in tls.values()), "application data records")
        print("WIRE OK: %d frames, %d TLS streams, %d bytes" % (len(frames), len(tls),
                                                                  sum(map(len, tls.values()))))
    except Failure as e:
        print("WIRE FAIL: %s" % e)
        if tern:
            print(tern.log_text(4000))
    finally:
        if cap:
            cap.stop()
        if tern:
            tern.stop()
        if named:
            named.stop()
        shutil.rmtree(work, ignore_errors=True)


def wire_clear_of_dns(args):
    ns = "ternxot%d" % os.getpid()
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True, timeout=10)
    try:
        out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, os.path.abspath(__file__),
                              "--ternd", args.ternd, "--inside"], capture_output=True, text=True,
                             timeout=120)
        last = (out.stdout.strip().splitlines() or ["(no output) " + out.stderr[-2000:]])[-1]
        expect(last.startswith("WIRE OK"), out.stdout[-4000:] + out.stderr[-2000:])
        print("  " + last)
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-wire", action="store_true", help="skip the namespace check")
    args = ap.parse_args()
    args.ternd = os.path.abspath(args.ternd)
    if args.inside:
        run_inside(args)
        return 0
    if not find_program("named") or not find_program("openssl"):
        print("SKIP: named or openssl not installed")
        return 77
    results = []
    work = tempfile.mkdtemp(prefix="xot-")
    try:
        run_loopback(args, work, results)
        if not args.no_wire and os.geteuid() == 0:
            run_check(results, "wire_clear_of_dns", lambda: wire_clear_of_dns(args))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report(results)


if __name__ == "__main__":
    sys.exit(main())
