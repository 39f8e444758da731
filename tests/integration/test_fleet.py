#!/usr/bin/python3
"""A tern fleet provisioned by a catalog over TLS: one ternd the primary of the other.

Primary ternd (A): zones a1.fleet and a2.fleet from files, each with transfer_tls: required (a
transfer only over TLS), transfer_key fleet-key, NOTIFY (signed) to B; a DoT/XoT listener with an
ECDSA certificate for dns.test signed by a CA made here; a catalog cat.fleet (members: all)
produced from its zones, NOTIFY to B.

Secondary ternd (B): only cat.fleet in its config, primary A's TLS port in strict mode (name
dns.test, the test's CA) with the key, and catalog_consumer: its members are pulled from the
catalog's primary with the catalog's TLS settings.

Checks:
  provisioned     B serves a1.fleet and a2.fleet as A does; A logged their transfers and B
                  logged them over TLSv1.3 (A refuses them in clear text: transfer_tls)
  member_added    a3.fleet added to A's config, SIGHUP: B serves it, with no change to B
  member_changed  a record of a1.fleet changed on A, SIGHUP: B serves the change (IXFR, NOTIFY)
  member_removed  a2.fleet out of A's config, SIGHUP: B answers REFUSED for it
"""

import argparse
import os
import shutil
import signal
import sys
import tempfile

import dns.message
import dns.query
import dns.rcode

import servers
from servers import LOOPBACK, Failure, YamlTernd, expect, run_checks, wait_until

KEY = "fleet-key"
SECRET = "ZmxlZXQtc2VjcmV0LWZvci10aGUtdGVzdHMtb2YtdGVybiE="
CONVERGE = 20.0  # seconds for a change on A to be served by B (NOTIFY, catalog, transfer)


def zone_text(origin, serial, www="192.0.2.1"):
    return ("$ORIGIN %s.\n$TTL 300\n"
            "@ SOA ns.%s. host.%s. %d 3600 600 86400 60\n"
            "@ NS ns\nns A 192.0.2.53\nwww A %s\n" % (origin, origin, origin, serial, www))


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def answer(port, name, qtype):
    q = dns.message.make_query(name, qtype)
    return dns.query.udp(q, LOOPBACK, port=port, timeout=2)


def rrsets(port, name, qtype):
    r = answer(port, name, qtype)
    return r.rcode(), sorted(rr.to_text() for rr in r.answer)


def primary_yaml(w, b_port, tls_port, cert, key, zones):
    zl = "".join("""  - origin: %s
    file: "%s/%s.zone"
    allow_transfer: [%s]
    transfer_key: %s
    transfer_tls: required
    notify: [{address: "%s@%d", key: %s}]
""" % (z, w, z, LOOPBACK, KEY, LOOPBACK, b_port, KEY) for z in zones)
    return """log_level: info
tsig_keys: [{name: %s, algorithm: hmac-sha256, secret: "%s"}]
tls:
  listen: ["%s:%d"]
  certificate: "%s"
  key: "%s"
catalogs:
  - origin: cat.fleet
    members: all
    allow_transfer: [%s]
    transfer_key: %s
    notify: [{address: "%s@%d", key: %s}]
zones:
%s""" % (KEY, SECRET, LOOPBACK, tls_port, cert, key, LOOPBACK, KEY, LOOPBACK, b_port, KEY, zl)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tern-fleet-")
    results = []
    a = b = None
    try:
        pki = os.path.join(work, "pki")
        os.makedirs(pki)
        ca, _, cert, key = servers.make_tls_certs(pki, name="dns.test")
        wa = os.path.join(work, "a")
        os.makedirs(wa)
        for i, z in enumerate(("a1.fleet", "a2.fleet", "a3.fleet")):
            write_atomic(os.path.join(wa, z + ".zone"), zone_text(z, 10, "192.0.2.%d" % (i + 1)))
        tls_port = servers.free_port()
        b_port = servers.free_port()
        a = YamlTernd(wa, args.ternd, primary_yaml(wa, b_port, tls_port, cert, key,
                                                   ["a1.fleet", "a2.fleet"]), name="tern-a")
        catdir = os.path.join(work, "b-catalog")
        b_yaml = """log_level: info
tsig_keys: [{name: %s, algorithm: hmac-sha256, secret: "%s"}]
zones:
  - origin: cat.fleet
    primary: {address: "%s@%d", key: %s, tls: {mode: strict, name: dns.test, ca: "%s"}}
    allow_notify: [%s]
    catalog_consumer: {directory: "%s"}
""" % (KEY, SECRET, LOOPBACK, tls_port, KEY, ca, LOOPBACK, catdir)
        b = YamlTernd(os.path.join(work, "b"), args.ternd, b_yaml, name="tern-b")
        b.port = b_port
        a.start("a1.fleet")
        b.start("cat.fleet")

        def same(zone, name, qtype):
            want = rrsets(a.port, name, qtype)
            wait_until(lambda: rrsets(b.port, name, qtype) == want, CONVERGE,
                       "B serves %s %s as A does %s" % (name, qtype, want))

        def provisioned():
            for z in ("a1.fleet", "a2.fleet"):
                same(z, z, "SOA")
                same(z, "www." + z, "A")
                expect(os.path.exists(os.path.join(catdir, z + ".zone")), "no copy of " + z)
            for z in ("a1.fleet", "a2.fleet"):
                wait_until(lambda z=z: b.log_has("zone %s: AXFR from %s@%d over TLSv1.3"
                                                 % (z, LOOPBACK, tls_port)), 5,
                           "B logged %s's transfer over TLS" % z)
            expect(a.log_has("AXFR a1.fleet serial 10 to"), "A logged no transfer of a1.fleet")
            expect(not b.log_has("refused: transfer_tls"), "a transfer tried in clear text")

        def member_added():
            a.yaml = primary_yaml(wa, b_port, tls_port, cert, key,
                                  ["a1.fleet", "a2.fleet", "a3.fleet"])
            a.command()  # writes the config
            a.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: answer(a.port, "www.a3.fleet", "A").answer, CONVERGE,
                       "A serves a3.fleet")
            same("a3.fleet", "www.a3.fleet", "A")

        def member_changed():
            write_atomic(os.path.join(wa, "a1.fleet.zone"), zone_text("a1.fleet", 11, "198.51.100.7"))
            a.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: "198.51.100.7" in str(answer(a.port, "www.a1.fleet", "A").answer),
                       CONVERGE, "A serves the change")
            same("a1.fleet", "www.a1.fleet", "A")
            got = rrsets(b.port, "www.a1.fleet", "A")
            expect(got[1] and "198.51.100.7" in got[1][0], "B's www.a1.fleet: %s" % (got,))
            wait_until(lambda: b.log_has("zone a1.fleet: IXFR from %s@%d over TLSv1.3"
                                         % (LOOPBACK, tls_port)), 5, "B logged an IXFR over TLS")

        def member_removed():
            a.yaml = primary_yaml(wa, b_port, tls_port, cert, key, ["a1.fleet", "a3.fleet"])
            a.command()
            a.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: answer(a.port, "a2.fleet", "SOA").rcode() == dns.rcode.REFUSED,
                       CONVERGE, "A no longer serves a2.fleet")
            wait_until(lambda: answer(b.port, "a2.fleet", "SOA").rcode() == dns.rcode.REFUSED,
                       CONVERGE, "B answers REFUSED for a2.fleet")
            same("a1.fleet", "www.a1.fleet", "A")

        run_checks(results, [
            ("provisioned", provisioned),
            ("member_added", member_added),
            ("member_changed", member_changed),
            ("member_removed", member_removed),
        ])
    except (Failure, RuntimeError, OSError) as e:
        results.append(("setup", str(e)))
    finally:
        for s in (b, a):
            if s:
                s.stop()
    rc = servers.finish(b, results) if b else 1
    if rc and a:
        print(a.log_text(20000))
    if args.keep:
        print("kept", work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
