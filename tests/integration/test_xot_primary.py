#!/usr/bin/python3
"""Zone transfers over TLS (XoT, RFC 9103) with tern as the primary, and real secondaries.

One ternd (tls: listen, an ECDSA certificate for dns.test signed by a CA made here, client_ca
that CA) is the primary of:
  - xt.test: transfer_tls: required, transfer_key xfr-key (TSIG), NOTIFY (signed) to BIND 9.18
    and NSD 4.6, both its XoT secondaries (BIND: primaries { ... key xfr-key tls NAME; } with
    tls NAME { ca-file; remote-hostname; }; NSD: tls-auth with auth-domain-name, request-xfr
    ... xfr-key NAME, tls-cert-bundle);
  - mt.test: transfer_tls: mutual (a client certificate verified against client_ca);
  - pt.test: no transfer_tls (plain TCP or TLS).

Checks:
  bind_xot            BIND transfers xt.test over TLS and answers as tern does
  nsd_xot             NSD does the same
  ixfr_after_change   xt.test changes (a record changed, one added, a new serial), SIGHUP:
                      both secondaries serve the change within a bound, and tern logged an
                      IXFR to each (over TLS: the zone takes no other)
  plain_tcp_refused   a signed AXFR of xt.test over plain TCP: REFUSED, logged with the reason;
                      the same over TLS (kdig +tls -y): the whole zone
  mutual_tls          mt.test over TLS without a client certificate: REFUSED; with one from
                      client_ca's CA (kdig +tls-certfile): the whole zone; with one from
                      another CA: REFUSED
  alpn_dot            pt.test over TLS without ALPN: REFUSED (RFC 9103 section 7.1); with
                      ALPN "dot": the zone; over plain TCP: the zone
  clean_exit          ternd exits 0 on SIGTERM

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded; only the processes started here are stopped.

    test_xot_primary.py --ternd build/ternd
"""

import argparse
import base64
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
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsigkeyring

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import (LOOPBACK, Failure, Nsd, Server, YamlTernd, expect, named_conf,  # noqa: E402
                     find_program, finish, free_port, make_tls_certs, read_exact, run_check,
                     wait_until, write_atomic)

HOST = "dns.test"
KEY = "xfr-key"
SECRET = base64.b64encode(os.urandom(32)).decode()
TIMEOUT = 3.0
CONVERGE = 15.0  # seconds for a change to reach a secondary (NOTIFY + IXFR: well under 1)
KEYRING = dns.tsigkeyring.from_text({KEY: ("hmac-sha256", SECRET)})


def zone_text(origin, serial, variant=0):
    lines = ["$ORIGIN %s." % origin, "$TTL 300",
             "@ SOA ns1 hostmaster %d 3600 600 86400 300" % serial,
             "@ NS ns1", "ns1 A 192.0.2.53",
             "www A %s" % ("192.0.2.1" if variant == 0 else "192.0.2.11"),
             "mail MX 10 www", "txt TXT \"xot\""]
    if variant:
        lines.append("added A 192.0.2.77")
    for i in range(30):
        lines.append("h%d A 198.51.100.%d" % (i, i))
    return "\n".join(lines) + "\n"


class NamedXot(Server):
    """BIND 9.18 as the XoT secondary of one zone from tern's DoT port."""

    name = "named"

    def __init__(self, workdir, zone, tls_port, ca):
        self.zone, self.tls_port, self.ca = zone, tls_port, ca
        super().__init__(workdir, [])

    def command(self):
        d = self.dir
        conf = os.path.join(d, "named.conf")
        with open(conf, "w") as f:
            f.write(named_conf(d, self.port, (
                "notify no;", "allow-notify { 127.0.0.0/8; };", "min-refresh-time 1;"), f"""\
key "{KEY}" {{ algorithm hmac-sha256; secret "{SECRET}"; }};
tls tern-tls {{ ca-file "{self.ca}"; remote-hostname "{HOST}"; }};
zone "{self.zone}" {{
    type secondary;
    primaries {{ {LOOPBACK} port {self.tls_port} key "{KEY}" tls tern-tls; }};
    file "{d}/{self.zone}.db";
    masterfile-format text;
}};
"""))
        return [find_program("named"), "-g", "-c", conf, "-n", "1"]


def nsd_xot(workdir, zone, tls_port, ca):
    """NSD 4.6 (servers.Nsd) as the XoT secondary of one zone from tern's DoT port: a second
    server: clause for the CA bundle, the key, the tls-auth and the zone."""
    return Nsd(workdir, [], "nsd", "nsd", extra_conf=f"""server:
    tls-cert-bundle: "{ca}"
key:
    name: "{KEY}"
    algorithm: hmac-sha256
    secret: "{SECRET}"
tls-auth:
    name: "tern"
    auth-domain-name: "{HOST}"
zone:
    name: "{zone}"
    zonefile: "{{dir}}/{zone}.zone"
    request-xfr: {LOOPBACK}@{tls_port} {KEY} tern
    allow-notify: {LOOPBACK} {KEY}
""")


def xfr_over(sock, zone, keyring=None):
    """AXFR of zone on a connected stream socket (TLS or not): (rcode, records) of the answer,
    reading messages until the closing SOA or an error rcode."""
    q = dns.message.make_query(zone, "AXFR")
    if keyring:
        q.use_tsig(keyring, keyname=KEY)
    w = q.to_wire()
    sock.sendall(struct.pack("!H", len(w)) + w)
    records, soas = 0, 0
    while True:
        n = struct.unpack("!H", read_exact(sock, 2))[0]
        r = dns.message.from_wire(read_exact(sock, n), keyring=keyring, request_mac=q.mac,
                                  xfr=True)
        if r.rcode() != dns.rcode.NOERROR:
            return r.rcode(), records
        for rr in r.answer:
            records += len(rr)
            soas += len(rr) if rr.rdtype == dns.rdatatype.SOA else 0
        if soas >= 2:
            return dns.rcode.NOERROR, records


class Xot:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="tern_xot_")
        pki = os.path.join(self.work, "pki")
        rogue = os.path.join(self.work, "rogue")
        os.makedirs(pki)
        os.makedirs(rogue)
        self.ca, ca_key, self.cert, self.key = make_tls_certs(pki, HOST)
        _, _, self.client_cert, self.client_key = make_tls_certs(pki, "xfr.client", "client",
                                                                 ca=(self.ca, ca_key))
        _, _, self.rogue_cert, self.rogue_key = make_tls_certs(rogue, "xfr.client", "client")
        for z in ("xt.test", "mt.test", "pt.test"):
            write_atomic(os.path.join(self.work, z + ".zone"), zone_text(z, 1))
        self.tls_port = free_port()
        self.tern = self.named = self.nsd = None

    def start(self):
        # the secondaries' ports first: tern's NOTIFY names them
        self.named = NamedXot(self.work, "xt.test", self.tls_port, self.ca)
        self.nsd = nsd_xot(self.work, "xt.test", self.tls_port, self.ca)
        w = self.work
        yaml = f"""tsig_keys: [{{name: {KEY}, algorithm: hmac-sha256, secret: "{SECRET}"}}]
zones:
  - origin: xt.test
    file: {w}/xt.test.zone
    allow_transfer: [127.0.0.1]
    transfer_key: {KEY}
    transfer_tls: required
    notify: [{{address: "{LOOPBACK}@{self.named.port}", key: {KEY}}},
             {{address: "{LOOPBACK}@{self.nsd.port}", key: {KEY}}}]
  - origin: mt.test
    file: {w}/mt.test.zone
    allow_transfer: [127.0.0.1]
    transfer_tls: mutual
  - origin: pt.test
    file: {w}/pt.test.zone
    allow_transfer: [127.0.0.1]
tls:
  listen: ["{LOOPBACK}:{self.tls_port}"]
  certificate: {self.cert}
  key: {self.key}
  client_ca: {self.ca}
"""
        self.tern = YamlTernd(w, self.args.ternd, yaml)
        self.tern.start("xt.test")

    def answers(self, port, names):
        out = {}
        for name in names:
            r = dns.query.udp(dns.message.make_query(name, "A"), LOOPBACK, port=port,
                              timeout=TIMEOUT)
            out[name] = (r.rcode(), sorted(rd.to_text() for rr in r.answer for rd in rr))
        return out

    def same_as_tern(self, srv, names):
        def ok():
            return self.answers(srv.port, names) == self.answers(self.tern.port, names)
        wait_until(ok, CONVERGE, "%s serves xt.test as tern does" % srv.name)

    def bind_xot(self):
        expect(find_program("named"), "named not found")
        self.named.start("xt.test")
        self.same_as_tern(self.named, ["www.xt.test", "h7.xt.test", "ns1.xt.test"])

    def nsd_xot(self):
        expect(find_program("nsd"), "nsd not found")
        self.nsd.start("xt.test")
        self.same_as_tern(self.nsd, ["www.xt.test", "h7.xt.test", "ns1.xt.test"])

    def ixfr_after_change(self):
        write_atomic(os.path.join(self.work, "xt.test.zone"), zone_text("xt.test", 2, 1))
        self.tern.proc.send_signal(1)
        names = ["www.xt.test", "added.xt.test", "h3.xt.test"]
        wait_until(lambda: self.answers(self.tern.port, ["added.xt.test"])["added.xt.test"][1],
                   10, "tern serves the change")
        self.same_as_tern(self.named, names)
        self.same_as_tern(self.nsd, names)
        log = self.tern.log_text(limit=400000)
        n = log.count("xfr: IXFR xt.test serial 2 to")
        expect(n >= 2, "tern logged %d IXFR of serial 2 (want one per secondary):\n%s"
               % (n, log[-3000:]))

    def tls_socket(self, alpn=True, cert=None, key=None):
        ctx = ssl.create_default_context(cafile=self.ca)
        if alpn:
            ctx.set_alpn_protocols(["dot"])
        if cert:
            ctx.load_cert_chain(cert, key)
        s = socket.create_connection((LOOPBACK, self.tls_port), timeout=TIMEOUT)
        return ctx.wrap_socket(s, server_hostname=HOST)

    def plain_tcp_refused(self):
        with socket.create_connection((LOOPBACK, self.tern.port), timeout=TIMEOUT) as s:
            rc, _ = xfr_over(s, "xt.test", KEYRING)
        expect(rc == dns.rcode.REFUSED, "plain TCP AXFR of xt.test: %s, want REFUSED"
               % dns.rcode.to_text(rc))
        wait_until(lambda: self.tern.log_has("transfer_tls: required"), 5,
                   "the refusal logged with its reason")
        kdig = find_program("kdig")
        expect(kdig, "kdig not found")
        r = subprocess.run([kdig, "@%s" % LOOPBACK, "-p", str(self.tls_port), "+tls",
                            "+tls-ca=%s" % self.ca, "+tls-hostname=%s" % HOST, "-y",
                            "hmac-sha256:%s:%s" % (KEY, SECRET), "xt.test", "AXFR"],
                           capture_output=True, text=True, timeout=30)
        expect(r.returncode == 0 and "(2 messages" not in r.stdout and "records)" in r.stdout
               and "Transfer failed" not in r.stdout,
               "kdig +tls AXFR xt.test:\n%s%s" % (r.stdout, r.stderr))
        expect("added.xt.test." in r.stdout, "kdig +tls AXFR xt.test lacks added.xt.test:\n%s"
               % r.stdout)

    def mutual_tls(self):
        with self.tls_socket() as t:
            rc, _ = xfr_over(t, "mt.test")
        expect(rc == dns.rcode.REFUSED, "mt.test without a client certificate: %s"
               % dns.rcode.to_text(rc))
        with self.tls_socket(cert=self.rogue_cert, key=self.rogue_key) as t:
            rc, _ = xfr_over(t, "mt.test")
        expect(rc == dns.rcode.REFUSED, "mt.test with another CA's certificate: %s"
               % dns.rcode.to_text(rc))
        kdig = find_program("kdig")
        r = subprocess.run([kdig, "@%s" % LOOPBACK, "-p", str(self.tls_port), "+tls",
                            "+tls-ca=%s" % self.ca, "+tls-hostname=%s" % HOST,
                            "+tls-certfile=%s" % self.client_cert,
                            "+tls-keyfile=%s" % self.client_key, "mt.test", "AXFR"],
                           capture_output=True, text=True, timeout=30)
        expect(r.returncode == 0 and "h29.mt.test." in r.stdout
               and "Transfer failed" not in r.stdout,
               "kdig +tls with a client certificate, AXFR mt.test:\n%s%s" % (r.stdout, r.stderr))
        with self.tls_socket(cert=self.client_cert, key=self.client_key) as t:
            rc, n = xfr_over(t, "mt.test")
        expect(rc == dns.rcode.NOERROR and n == 37, "mt.test with a client certificate: %s, %d "
               "records" % (dns.rcode.to_text(rc), n))

    def alpn_dot(self):
        with self.tls_socket(alpn=False) as t:
            rc, _ = xfr_over(t, "pt.test")
        expect(rc == dns.rcode.REFUSED, "pt.test over TLS without ALPN: %s, want REFUSED"
               % dns.rcode.to_text(rc))
        with self.tls_socket() as t:
            rc, n = xfr_over(t, "pt.test")
        expect(rc == dns.rcode.NOERROR and n == 37, "pt.test over TLS with ALPN dot: %s, %d "
               "records" % (dns.rcode.to_text(rc), n))
        with socket.create_connection((LOOPBACK, self.tern.port), timeout=TIMEOUT) as s:
            rc, n = xfr_over(s, "pt.test")
        expect(rc == dns.rcode.NOERROR and n == 37, "pt.test over TCP: %s, %d records"
               % (dns.rcode.to_text(rc), n))

    def run(self):
        results = []
        try:
            self.start()
            for name, fn in [("bind_xot", self.bind_xot), ("nsd_xot", self.nsd_xot),
                             ("ixfr_after_change", self.ixfr_after_change),
                             ("plain_tcp_refused", self.plain_tcp_refused),
                             ("mutual_tls", self.mutual_tls), ("alpn_dot", self.alpn_dot)]:
                run_check(results, name, fn)
        finally:
            for s in (self.named, self.nsd):
                if s:
                    s.stop()
            if self.tern:
                self.tern.stop()
        if any(err for _, err in results):
            for s in (self.named, self.nsd):
                if s:
                    print("---- %s\n%s" % (s.name, s.log_text()))
        rc = finish(self.tern, results) if self.tern else 1
        if rc == 0:
            shutil.rmtree(self.work, ignore_errors=True)
        return rc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    return Xot(ap.parse_args()).run()


if __name__ == "__main__":
    sys.exit(main())
