#!/usr/bin/env python3
"""Signed zones out: secondaries that do not sign serve what tern transfers, and validators accept it.

ternd signs three zones it is primary for and sends them to a real NSD and a real BIND 9 by
AXFR, then IXFR on its NOTIFYs: sig.test (a master file with a wildcard, a delegation with DS
and glue, empty non-terminals, names at many depths; keys from `ternctl dnssec keygen`),
geo.test (redins JSON with steered A RRsets: a secondary has no steering, so it gets every
record, signed) and red.test (in Redis, redins' schema and key strings, signed on the Redis
thread). Signatures are short-lived (dnssec_lifetime 4260 s, dnssec_refresh 600 s: due a
minute after they are made), so ternd signs new versions by itself within two minutes.

Checks:
  axfr_verifies       tern's AXFR of each zone: ldns-verify-zone and kzonecheck (DNSSEC checks
                      on) accept it; one NSEC per authoritative name and delegation, none for
                      glue or empty non-terminals; the steered RRsets whole and signed
  secondaries_valid   NSD and BIND reach tern's serial; a validating Unbound asking only NSD,
                      one asking only BIND and one asking tern get AD=1 for positive answers,
                      the steered RRset (every record from a secondary), a wildcard expansion,
                      NXDOMAIN and NODATA (NSEC proofs from the secondaries, compact denial
                      from tern), and DNSKEY
  ixfr_after_change   a name added to the file and ternctl reload: a new serial; NSD and BIND
                      follow by IXFR (tern's log) that carries only what changed (the signatures
                      of unchanged RRsets are kept: at most 20 of the zone's 50 records), the
                      new name validates through both, and their copies (AXFR from each)
                      still verify
  ixfr_redis_change   a label HSET in Redis (the zone's soa.serial untouched): a higher serial,
                      the secondaries follow, the new label validates through NSD
  ixfr_after_resign   nothing edited: the signatures come due, tern signs new versions of the
                      file zone and the Redis zone with higher serials, the secondaries follow by
                      IXFR, and their copies verify with the new signatures (a later inception)
  update_raised       an RFC 2136 UPDATE to sig.test, whose served serial tern raised above its
                      file's: NOERROR, the name served at once, journaled in the file's serials
                      (the journal continues the source's, not the raised one), the
                      secondaries follow
  unsigned_no_export  a zone without keys transfers exactly its records (no NSEC, no RRSIG)
Skips (77) with a clear message when nsd, named, unbound, kzonecheck or ldns-verify-zone is
missing.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.tsig
import dns.tsigkeyring
import dns.update
import dns.zone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, Failure, expect, find_program, free_port, run_check  # noqa: E402

CONVERGE = 15.0  # seconds for a NOTIFY + IXFR to reach a secondary (well under 1 s here)
RESIGN_WAIT = 150.0  # due 60 s after signing, looked for every 60 s
TOOL_TIMEOUT = 60
UPD_SECRET = "c2lnbmVkLXpvbmUtdXBkYXRlLWtleS0wMTIzNDU2Nzg="

SIG_ZONE = """$ORIGIN sig.test.
$TTL 300
@ IN SOA ns1 hostmaster 10 3600 600 86400 60
@ NS ns1
@ MX 10 mail
@ TXT "v=spf1 mx -all"
ns1 A 192.0.2.1
mail A 192.0.2.2
www 600 A 192.0.2.3
www AAAA 2001:db8::3
*.wild TXT "wild"
a.b.c TXT "deep"
x.y.z.deep TXT "deeper"
sub NS ns.sub
sub DS 12345 13 2 0000000000000000000000000000000000000000000000000000000000000000
ns.sub A 192.0.2.9
insecure NS ns.insecure
ns.insecure A 192.0.2.10
"""

GEO = {
    "config": {"soa": {"ttl": 300, "ns": "ns1.geo.test.", "mbox": "hostmaster.geo.test.",
                       "refresh": 3600, "retry": 600, "expire": 86400, "minttl": 60,
                       "serial": 5},
               "dnssec": True},
    "records": {
        "@": {"ns": {"ttl": 3600, "records": [{"host": "ns1.geo.test."}]}},
        "ns1": {"a": {"ttl": 3600, "records": [{"ip": "192.0.2.53"}]}},
        "wrr": {"a": {"ttl": 60, "filter": {"count": "single", "order": "weighted"},
                      "records": [{"ip": "192.0.2.31", "weight": 1},
                                  {"ip": "192.0.2.32", "weight": 3},
                                  {"ip": "192.0.2.33", "weight": 5}]}},
        "country": {"a": {"ttl": 60, "filter": {"count": "multi", "order": "none",
                                                 "geo_filter": "country"},
                          "records": [{"ip": "192.0.2.1", "country": "AU"},
                                      {"ip": "192.0.2.2", "country": ["GB"]},
                                      {"ip": "192.0.2.3"}]}},
        "plain": {"a": {"ttl": 60, "records": [{"ip": "192.0.2.100"}]}},
    },
}
STEERED = {"wrr.geo.test.": {"192.0.2.31", "192.0.2.32", "192.0.2.33"},
           "country.geo.test.": {"192.0.2.1", "192.0.2.2", "192.0.2.3"}}

PLAIN_ZONE = """$ORIGIN plain.test.
$TTL 300
@ IN SOA ns1 hostmaster 1 3600 600 86400 60
@ NS ns1
ns1 A 192.0.2.1
"""


def keygen(ternctl, kdir, zone):
    """A KSK and a ZSK (algorithm 13) from ternctl; their stems and the KSK's DS RDATA."""
    out = subprocess.run([ternctl, "dnssec", "keygen", zone, "-a", "13", "-d", kdir],
                         capture_output=True, text=True, timeout=TOOL_TIMEOUT)
    stems = out.stdout.split()
    if out.returncode != 0 or len(stems) != 2:
        raise RuntimeError("ternctl dnssec keygen %s: %s %s" % (zone, out.stdout, out.stderr))
    ds = subprocess.run([ternctl, "dnssec", "ds", stems[0]], capture_output=True, text=True,
                        timeout=TOOL_TIMEOUT)
    m = re.search(r"\sDS\s+(\d+ \d+ 2 [0-9A-Fa-f]+)", ds.stdout)
    if ds.returncode != 0 or not m:
        raise RuntimeError("ternctl dnssec ds: %s %s" % (ds.stdout, ds.stderr))
    return stems, m.group(1)


def soa_serial(port, zone):
    try:
        r = dns.query.udp(dns.message.make_query(zone, "SOA"), LOOPBACK, port=port, timeout=1.0)
    except (dns.exception.Timeout, OSError):
        return None
    for rrset in r.answer:
        if rrset.rdtype == dns.rdatatype.SOA:
            return rrset[0].serial
    return None


def axfr_text(port, zone):
    """The zone as `kdig axfr` prints it (its closing SOA dropped), for the zone checkers."""
    out = subprocess.run(["kdig", "@%s" % LOOPBACK, "-p", str(port), "axfr", zone, "+nocomments",
                          "+nostats", "+noquestion"],
                         capture_output=True, text=True, timeout=TOOL_TIMEOUT)
    lines = [ln for ln in out.stdout.splitlines() if ln.strip() and not ln.startswith(";")]
    if out.returncode != 0 or len(lines) < 2 or " SOA " not in lines[0].replace("\t", " "):
        raise Failure("AXFR %s from port %d failed: %s %s" % (zone, port, out.stdout[-500:],
                                                             out.stderr))
    return "\n".join(lines[:-1]) + "\n"


def verify(text, zone, work, label):
    """ldns-verify-zone and kzonecheck (DNSSEC on) over a zone's text; the zone parsed."""
    path = os.path.join(work, "%s-%s.zone" % (label, zone.rstrip(".")))
    with open(path, "w") as f:
        f.write(text)
    for cmd in (["ldns-verify-zone", path], ["kzonecheck", "-o", zone, "-d", "on", path]):
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT)
        if out.returncode != 0:
            raise Failure("%s (%s): %s rejects it:\n%s%s" % (zone, label, cmd[0], out.stdout[-1500:],
                                                            out.stderr[-1500:]))
    return dns.zone.from_text(text, origin=zone, relativize=False, check_origin=False)


def rrsig_inception(z, zone):
    soa_sigs = z.find_rdataset(zone, dns.rdatatype.RRSIG, dns.rdatatype.SOA)
    return max(s.inception for s in soa_sigs)


class Named(servers.Named):
    pass


RED = {"@": {"ns": {"ttl": 300, "records": [{"host": "ns1.red.test."}]}},
       "ns1": {"a": {"ttl": 300, "records": [{"ip": "192.0.2.53"}]}},
       "www": {"a": {"ttl": 300, "records": [{"ip": "192.0.2.80"}, {"ip": "192.0.2.81"}]}}}
RED_SOA = {"ttl": 300, "ns": "ns1.red.test.", "MBox": "hostmaster.red.test.", "refresh": 3600,
           "retry": 600, "expire": 86400, "minttl": 60, "serial": 7}


def put_red(redis, keys, labels):
    """red.test as redins keeps it (with keys: its config, labels and key strings; without:
    only the labels given, HSET into the zone)."""
    zone = "red.test."
    if keys:
        redis.cmd("SET", "redins:zones:%s:config" % zone,
                  json.dumps({"soa": RED_SOA, "dnssec": True}))
        for role, stem in (("ksk", keys[0]), ("zsk", keys[1])):
            for part, ext in (("pub", ".key"), ("priv", ".private")):
                with open(stem + ext) as f:
                    redis.cmd("SET", "redins:zones:%s:%s:%s" % (zone, role, part), f.read())
        labels = dict(RED, **labels)
    for label, value in labels.items():
        redis.cmd("HSET", "redins:zones:%s" % zone, label, json.dumps(value))
    if keys:
        redis.cmd("SADD", "redins:zones", zone)


def nsd_conf(tern_port, zones):
    return "server:\n    xfrd-reload-timeout: 0\n" + "".join(f"""zone:
    name: "{z}"
    zonefile: "{{dir}}/{z}zone"
    request-xfr: {LOOPBACK}@{tern_port} NOKEY
    allow-notify: {LOOPBACK} NOKEY
    provide-xfr: 127.0.0.0/8 NOKEY
""" for z in zones)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl", required=True)
    args = ap.parse_args()
    for prog in ("nsd", "named", "unbound", "kzonecheck", "ldns-verify-zone", "kdig",
                 "redis-server"):
        if find_program(prog) is None:
            print("%s not found: skipped" % prog)
            return 77
    work = tempfile.mkdtemp(prefix="tern-dnssec-xfr-")
    results = []
    zdir = os.path.join(work, "zones")
    kdir = os.path.join(work, "keys")
    os.makedirs(zdir)
    os.makedirs(kdir)
    sig_path = os.path.join(zdir, "sig.test.zone")
    geo_path = os.path.join(zdir, "geo.test.json")
    plain_path = os.path.join(zdir, "plain.test.zone")
    servers.write_atomic(sig_path, SIG_ZONE)
    servers.write_atomic(geo_path, json.dumps(GEO))
    servers.write_atomic(plain_path, PLAIN_ZONE)
    sig_keys, sig_ds = keygen(args.ternctl, kdir, "sig.test")
    geo_keys, geo_ds = keygen(args.ternctl, kdir, "geo.test")
    red_keys, red_ds = keygen(args.ternctl, kdir, "red.test")
    zones = ["sig.test.", "geo.test.", "red.test."]
    redis = servers.Redis(work)
    tern_port = free_port()
    nsd = servers.Nsd(work, [], "nsd", "nsd", extra_conf=nsd_conf(tern_port, zones))
    named = Named(work, [(z, tern_port) for z in zones])
    notify = '["%s@%d", "%s@%d"]' % (LOOPBACK, nsd.port, LOOPBACK, named.port)
    yaml = f"""dnssec_lifetime: 4260
dnssec_refresh: 600
tsig_keys:
  - {{name: upd, algorithm: hmac-sha256, secret: "{UPD_SECRET}"}}
redis:
  address: "{LOOPBACK}:{redis.port}"
zones:
  - origin: red.test
    allow_transfer: [127.0.0.0/8]
    notify: {notify}
  - origin: sig.test
    file: "{sig_path}"
    allow_update: [upd]
    allow_transfer: [127.0.0.0/8]
    notify: {notify}
    dnssec: {{keys: [{", ".join(sig_keys)}]}}
  - origin: geo.test
    file: "{geo_path}"
    format: json
    allow_transfer: [127.0.0.0/8]
    notify: {notify}
    dnssec: {{keys: [{", ".join(geo_keys)}]}}
  - origin: plain.test
    file: "{plain_path}"
    allow_transfer: [127.0.0.0/8]
"""
    tern = servers.YamlTernd(work, args.ternd, yaml, ternctl=args.ternctl)
    tern.port = tern_port
    unbounds = {}
    try:
        redis.start()
        put_red(redis, red_keys, {})
        tern.start("sig.test.")
        servers.wait_until(lambda: soa_serial(tern.port, "red.test.") is not None, CONVERGE,
                           "tern serving red.test")
        nsd.start("sig.test.")
        named.start("sig.test.")
        anchors = {"sig.test.": sig_ds, "geo.test.": geo_ds, "red.test.": red_ds}
        for label, srv in (("tern", tern), ("nsd", nsd), ("named", named)):
            u = servers.Unbound(work, "unbound-" + label,
                                [(z, srv.port, anchors[z]) for z in zones])
            u.start()
            unbounds[label] = u
        secondaries = (("NSD", nsd), ("BIND", named))

        def converge(zone, serial):
            for name, srv in secondaries:
                servers.wait_until(lambda: soa_serial(srv.port, zone) == serial, CONVERGE,
                                   "%s at %s serial %s (has %s)"
                                   % (name, zone, serial, soa_serial(srv.port, zone)))

        def axfr_verifies():
            z = verify(axfr_text(tern.port, "sig.test."), "sig.test.", work, "tern")
            owners = {n.to_text() for n, node in z.nodes.items()
                      if node.get_rdataset(dns.rdataclass.IN, dns.rdatatype.NSEC)}
            want = {"sig.test.", "ns1.sig.test.", "mail.sig.test.", "www.sig.test.",
                    "*.wild.sig.test.", "a.b.c.sig.test.", "x.y.z.deep.sig.test.",
                    "sub.sig.test.", "insecure.sig.test."}
            expect(owners == want, "NSEC owners %s, want %s" % (sorted(owners), sorted(want)))
            sub = z.find_rdataset("sub.sig.test.", dns.rdatatype.NSEC)[0]
            types = set(sub.to_text().split()[1:])
            expect(types == {"NS", "DS", "RRSIG", "NSEC"},
                   "NSEC at the delegation has %s" % sorted(types))
            ins = set(z.find_rdataset("insecure.sig.test.", dns.rdatatype.NSEC)[0]
                      .to_text().split()[1:])
            expect(ins == {"NS", "RRSIG", "NSEC"}, "NSEC at the insecure delegation has %s"
                   % sorted(ins))
            expect(z.get_rdataset("ns.sub.sig.test.", dns.rdatatype.RRSIG) is None,
                   "glue is signed")
            verify(axfr_text(tern.port, "red.test."), "red.test.", work, "tern")
            g = verify(axfr_text(tern.port, "geo.test."), "geo.test.", work, "tern")
            for name, addrs in STEERED.items():
                a = g.find_rdataset(name, dns.rdatatype.A)
                expect({r.address for r in a} == addrs, "%s A in the AXFR: %s" % (name, a))
                sig = g.find_rdataset(name, dns.rdatatype.RRSIG, dns.rdatatype.A)
                expect(len(sig) == 1, "%s: %d RRSIGs over its A" % (name, len(sig)))
            print("  sig.test: %d NSECs; both zones verified (ldns-verify-zone, kzonecheck)"
                  % len(owners))

        def check_validated(label, u, steered_whole):
            # tern denies a name with a compact NSEC (RFC 9824: NOERROR), a secondary with
            # the chain (NXDOMAIN)
            nx = dns.rcode.NOERROR if label == "tern" else dns.rcode.NXDOMAIN
            cases = [("www.sig.test.", "A", dns.rcode.NOERROR, True),
                     ("x.wild.sig.test.", "TXT", dns.rcode.NOERROR, True),
                     ("nope.sig.test.", "A", nx, False),
                     ("www.sig.test.", "MX", dns.rcode.NOERROR, False),
                     ("b.c.sig.test.", "TXT", dns.rcode.NOERROR, False),
                     ("sig.test.", "DNSKEY", dns.rcode.NOERROR, True),
                     ("plain.geo.test.", "A", dns.rcode.NOERROR, True),
                     ("nope.geo.test.", "A", nx, False),
                     ("www.red.test.", "A", dns.rcode.NOERROR, True),
                     ("nope.red.test.", "TXT", nx, False)]
            cases += [(n, "A", dns.rcode.NOERROR, True) for n in STEERED]
            for name, rtype, rcode, has_answer in cases:
                r = u.ask(name, rtype)
                what = "%s %s via %s" % (name, rtype, label)
                expect(r.rcode() == rcode, "%s: %s, want %s\n%s" % (
                    what, dns.rcode.to_text(r.rcode()), dns.rcode.to_text(rcode),
                    u.log_text()))
                expect(r.flags & dns.flags.AD, "%s: no AD\n%s" % (what, u.log_text()))
                expect(bool(r.answer) == has_answer, "%s: answer %s" % (what, r.answer))
                if name in STEERED and steered_whole:
                    got = {rd.address for rrset in r.answer
                           if rrset.rdtype == dns.rdatatype.A for rd in rrset}
                    expect(got == STEERED[name], "%s: %s, want every record" % (what, got))

        def secondaries_valid():
            for zone in zones:
                converge(zone, soa_serial(tern.port, zone))
            check_validated("tern", unbounds["tern"], False)
            check_validated("NSD", unbounds["nsd"], True)
            check_validated("BIND", unbounds["named"], True)
            print("  NSD and BIND at tern's serials; 10 cases AD=1 through each and tern")

        def ixfr_after_change():
            before = soa_serial(tern.port, "sig.test.")
            servers.write_atomic(sig_path, SIG_ZONE + "added TXT \"after the change\"\n")
            out = tern.ctl("reload")
            expect(out.returncode == 0, "ternctl reload: %s %s" % (out.stdout, out.stderr))
            after = soa_serial(tern.port, "sig.test.")
            expect(after is not None and after != before, "serial %s -> %s" % (before, after))
            converge("sig.test.", after)
            for label in ("nsd", "named"):
                r = unbounds[label].ask("added.sig.test.", "TXT")
                expect(r.rcode() == dns.rcode.NOERROR and r.answer and r.flags & dns.flags.AD,
                       "added.sig.test. via %s: %s" % (label, r))
            servers.wait_until(lambda: tern.log_has("IXFR sig.test serial %d to" % after),
                               CONVERGE, "tern logging an IXFR to serial %d" % after)
            # only what changed is signed anew: the new name's TXT and NSEC, its neighbour's
            # NSEC, the SOA (each with its RRSIG), not the zone's 50 records
            sizes = [int(n) for n in re.findall(r"IXFR sig\.test serial %d to \S+: (\d+) records"
                                                  % after, tern.log_text(limit=400000))]
            expect(sizes and max(sizes) <= 20, "IXFR of one added name: %s records" % sizes)
            for name, srv in secondaries:
                verify(axfr_text(srv.port, "sig.test."), "sig.test.", work, name + "-change")
            print("  serial %d -> %d; NSD and BIND by IXFR, their copies verify" % (before, after))

        def ixfr_redis_change():
            before = soa_serial(tern.port, "red.test.")
            put_red(redis, None, {"fresh": {"txt": {"ttl": 60, "records": [{"text": "new"}]}}})
            servers.wait_until(lambda: soa_serial(tern.port, "red.test.") != before, CONVERGE,
                               "tern serving the changed red.test (serial %d)" % before)
            after = soa_serial(tern.port, "red.test.")
            converge("red.test.", after)
            r = unbounds["nsd"].ask("fresh.red.test.", "TXT")
            expect(r.rcode() == dns.rcode.NOERROR and r.answer and r.flags & dns.flags.AD,
                   "fresh.red.test. via NSD: %s" % r)
            for name, srv in secondaries:
                verify(axfr_text(srv.port, "red.test."), "red.test.", work, name + "-redis")
            print("  red.test serial %d -> %d on an HSET; NSD and BIND follow" % (before, after))

        def ixfr_after_resign():
            z0 = verify(axfr_text(tern.port, "geo.test."), "geo.test.", work, "tern-before")
            before, inc0 = z0.find_rdataset("geo.test.", dns.rdatatype.SOA)[0].serial, \
                rrsig_inception(z0, "geo.test.")
            red0 = soa_serial(tern.port, "red.test.")
            servers.wait_until(lambda: soa_serial(tern.port, "geo.test.") != before, RESIGN_WAIT,
                               "tern signing geo.test again (serial %d)" % before)
            servers.wait_until(lambda: soa_serial(tern.port, "red.test.") != red0, RESIGN_WAIT,
                               "tern signing red.test again (serial %d)" % red0)
            red1 = soa_serial(tern.port, "red.test.")
            converge("red.test.", red1)
            for name, srv in secondaries:
                verify(axfr_text(srv.port, "red.test."), "red.test.", work, name + "-red-resign")
            expect(tern.log_has("signing a new version for its secondaries"),
                   "no re-sign logged:\n" + tern.log_text())
            after = soa_serial(tern.port, "geo.test.")
            converge("geo.test.", after)
            for name, srv in secondaries:
                z = verify(axfr_text(srv.port, "geo.test."), "geo.test.", work, name + "-resign")
                inc = rrsig_inception(z, "geo.test.")
                expect(inc > inc0, "%s: inception %d, was %d" % (name, inc, inc0))
            servers.wait_until(lambda: tern.log_has("IXFR geo.test serial %d to" % after),
                               CONVERGE, "tern logging an IXFR of geo.test to %d" % after)
            check_validated("NSD", unbounds["nsd"], True)
            print("  serial %d -> %d by the signature refresh; NSD and BIND follow" %
                  (before, after))

        def update_raised():
            before = soa_serial(tern.port, "sig.test.")
            u = dns.update.UpdateMessage("sig.test.", keyring=dns.tsigkeyring.from_text(
                {"upd": UPD_SECRET}), keyname="upd", keyalgorithm=dns.tsig.HMAC_SHA256)
            u.add("dyn.sig.test.", 60, "TXT", '"by update"')
            r = dns.query.tcp(u, LOOPBACK, port=tern.port, timeout=30)
            expect(r.rcode() == dns.rcode.NOERROR, "UPDATE: %s\n%s" % (r, tern.log_text()))
            a = dns.query.udp(dns.message.make_query("dyn.sig.test.", "TXT"), LOOPBACK,
                              port=tern.port, timeout=2)
            expect(a.answer, "dyn.sig.test not served right after NOERROR")
            after = soa_serial(tern.port, "sig.test.")
            expect(after != before, "serial still %s" % after)
            converge("sig.test.", after)
            for name, srv in secondaries:
                verify(axfr_text(srv.port, "sig.test."), "sig.test.", work, name + "-update")
            print("  UPDATE over a raised serial: served at once, serial %d -> %d" %
                  (before, after))

        def unsigned_no_export():
            text = axfr_text(tern.port, "plain.test.")
            expect(" RRSIG " not in text.replace("\t", " ") and
                   " NSEC " not in text.replace("\t", " "), "unsigned zone has DNSSEC:\n" + text)
            expect(soa_serial(tern.port, "plain.test.") == 1, "plain.test serial raised")

        for name, fn in (("axfr_verifies", axfr_verifies),
                         ("secondaries_valid", secondaries_valid),
                         ("ixfr_after_change", ixfr_after_change),
                         ("ixfr_redis_change", ixfr_redis_change),
                         ("ixfr_after_resign", ixfr_after_resign),
                         ("update_raised", update_raised),
                         ("unsigned_no_export", unsigned_no_export)):
            run_check(results, name, fn)
    finally:
        for u in unbounds.values():
            u.stop()
        named.stop()
        nsd.stop()
        tern.stop()
        redis.stop()
    rc = servers.finish(tern, results)
    if rc != 0:
        print(nsd.log_text())
        print(named.log_text())
    else:
        shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
