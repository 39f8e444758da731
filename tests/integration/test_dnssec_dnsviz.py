#!/usr/bin/env python3
"""A zone whose keys tern manages, judged by DNSViz through its real parent, and watched through
/metrics while its keys move.

One ternd serves ds.test with an accelerated policy (5 s TTLs, a 20 s ZSK lifetime) whose parent
is a real Knot signing test. (test_dnssec_kasp.py's KnotParent); a registrar (this script) puts
tern's CDS into Knot as the DS by UPDATE, and tern's DS checker sees it there. An NSD secondary
takes the signed zone by transfer.

Checks:
  metrics_first_signing  /metrics: tern_dnssec_keys{zone="ds.test"} has the KSK published and
                         the ZSK active, tern_dnssec_next_event_seconds counts down to the KSK
                         being ready, then tern_dnssec_ds_wanted is 1 with the KSK ready; the DS
                         at Knot: the KSK active and ds_wanted 0
  metrics_zsk_rollover   the ZSK's successor by lifetime: two ZSKs (published + active), then the
                         new one active and the old retired; the gauges survive `ternctl reload`
  dnsviz_chain           DNSViz (probe of tern and Knot, grok anchored at Knot's DNSKEY): the
                         delegation is SECURE and there is no error
  dnsviz_zone_alone      DNSViz asking tern alone, anchored at the zone's KSK (the helper as
                         test_dnssec_kasp's zones without a parent use it): SECURE, no error;
                         anchored at the ZSK: errors, not SECURE
  dnsviz_secondary       the same as dnsviz_chain of the NSD secondary's copy (at tern's serial)
  dnsviz_catches_bad_ds  Knot's DS for ds.test replaced by one with a wrong digest: DNSViz
                         reports errors and the delegation is not SECURE (the helper can fail)
  guard_refuses          the helper's loopback guard refuses a socket aimed elsewhere
Skips (77) when knotd, nsd, named or dnsviz is missing.
"""

import argparse
import os
import re
import sys
import tempfile
import time
import urllib.request

import dns.dnssec
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.update

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dnsviz  # noqa: E402
import servers  # noqa: E402
from servers import LOOPBACK, expect, find_program, free_port, run_check  # noqa: E402
from test_dnssec_kasp import POLICY, ZONE_TEXT, KnotParent  # noqa: E402

ZONE = "ds.test."
# test_dnssec_kasp's zone and policy (5 s TTLs, a 20 s ZSK lifetime) as its ds.test has them
ZONE_TEXT = ZONE_TEXT.replace("pol.test.", ZONE)
POLICY += "    ds_check_interval: 1\n"


def scrape(port):
    """{(name, ((label, value), ...)): value} of GET /metrics."""
    body = urllib.request.urlopen("http://%s:%d/metrics" % (LOOPBACK, port), timeout=5).read()
    out = {}
    for line in body.decode().splitlines():
        m = re.match(r"^([a-z_]+)(?:\{(.*)\})? (\S+)$", line)
        if m:
            labels = tuple(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def keys_gauge(metrics, role, state):
    return metrics.get(("tern_dnssec_keys", (("zone", "ds.test"), ("role", role),
                                             ("state", state))))


def zone_gauge(metrics, name):
    return metrics.get((name, (("zone", "ds.test"),)))


def serial(port, zone=ZONE):
    r = dns.query.udp(dns.message.make_query(zone, "SOA"), LOOPBACK, port=port, timeout=2)
    return r.answer[0][0].serial if r.answer else None


def dns_keys(port):
    """{tag: flags} of ds.test's DNSKEY RRset."""
    r = dns.query.udp(dns.message.make_query(ZONE, "DNSKEY"), LOOPBACK, port=port, timeout=2)
    return {dns.dnssec.key_id(rd): rd.flags for rrset in r.answer
            if rrset.rdtype == dns.rdatatype.DNSKEY for rd in rrset}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl", required=True)
    args = ap.parse_args()
    # named: DNSViz serves the parent of a zone checked alone with one
    missing = [p for p in ("knotd", "nsd", "named") if find_program(p) is None]
    missing += [] if dnsviz.available() else ["dnsviz"]
    if missing:
        print("%s not found: skipped" % ", ".join(missing))
        return 77
    work = tempfile.mkdtemp(prefix="tern-dnsviz-")
    results = []
    knot = KnotParent(work, [])
    tern_port, mport = free_port(), free_port()
    nsd = servers.Nsd(work, [], "nsd", "nsd", extra_conf=f"""server:
    xfrd-reload-timeout: 0
zone:
    name: "{ZONE}"
    zonefile: "{{dir}}/ds.test.zone"
    request-xfr: {LOOPBACK}@{tern_port} NOKEY
    allow-notify: {LOOPBACK} NOKEY
""")
    zfile = os.path.join(work, "ds.test.zone")
    servers.write_atomic(zfile, ZONE_TEXT)
    yaml = POLICY + f"""    parents: ["{LOOPBACK}@{knot.port}"]
metrics_listen: "{LOOPBACK}:{mport}"
dnssec_state_dir: "{work}/state"
zones:
  - origin: ds.test
    file: "{zfile}"
    dnssec: {{policy: fast}}
    allow_transfer: [127.0.0.0/8]
    notify: ["{LOOPBACK}@{nsd.port}"]
"""
    tern = servers.YamlTernd(work, args.ternd, yaml, ternctl=args.ternctl)
    tern.port = tern_port
    started = []
    ctx = {}
    try:
        knot.start("test.")
        started.append(knot)
        tern.start(ZONE)
        started.append(tern)
        nsd.start(ZONE)
        started.append(nsd)
        chain = {ZONE: [(LOOPBACK, tern.port)], "test.": [(LOOPBACK, knot.port)]}

        def set_ds(rdatas):
            """The registrar: Knot's DS set for ds.test becomes rdatas (texts)."""
            u = dns.update.UpdateMessage("test.")
            u.delete(ZONE, "DS")
            for text in rdatas:
                u.add(ZONE, 3, "DS", text)
            r = dns.query.tcp(u, LOOPBACK, port=knot.port, timeout=5)
            expect(r.rcode() == dns.rcode.NOERROR, "Knot refused the DS: %s" % r)

        def metrics_first_signing():
            m = scrape(mport)
            expect(keys_gauge(m, "ksk", "published") == 1 and keys_gauge(m, "zsk", "active") == 1,
                   "after the first signing: %s" % {k: v for k, v in m.items()
                                                    if k[0] == "tern_dnssec_keys" and v})
            expect(keys_gauge(m, "csk", "active") is None, "a csk series without a CSK")
            expect(zone_gauge(m, "tern_dnssec_ds_wanted") == 0, "a DS wanted before ready")
            left = zone_gauge(m, "tern_dnssec_next_event_seconds")
            expect(left is not None and 0 <= left <= 7, "next event in %s s, want <= 7" % left)
            servers.wait_until(lambda: zone_gauge(scrape(mport), "tern_dnssec_ds_wanted") == 1,
                               20, "tern_dnssec_ds_wanted 1")
            m = scrape(mport)
            expect(keys_gauge(m, "ksk", "ready") == 1 and keys_gauge(m, "ksk", "published") == 0,
                   "the KSK not ready while its DS is wanted")
            cds = []

            def published():  # the gauge is set at the step, the CDS served once built
                r = dns.query.udp(dns.message.make_query(ZONE, "CDS"), LOOPBACK,
                                  port=tern.port, timeout=2)
                cds[:] = [rd.to_text() for rrset in r.answer
                          if rrset.rdtype == dns.rdatatype.CDS for rd in rrset]
                return bool(cds)
            servers.wait_until(published, 5, "the CDS while the DS is wanted")
            ctx["ds"] = cds
            set_ds(cds)
            servers.wait_until(lambda: keys_gauge(scrape(mport), "ksk", "active") == 1, 20,
                               "the KSK active once Knot has its DS")
            m = scrape(mport)
            expect(zone_gauge(m, "tern_dnssec_ds_wanted") == 0, "a DS still wanted")
            print("  KSK published -> ready (ds_wanted 1) -> active (ds_wanted 0) in /metrics")

        def metrics_zsk_rollover():
            servers.wait_until(lambda: keys_gauge(scrape(mport), "zsk", "published") == 1, 30,
                               "the ZSK's successor published")
            expect(keys_gauge(scrape(mport), "zsk", "active") == 1, "no active ZSK beside it")
            servers.wait_until(lambda: keys_gauge(scrape(mport), "zsk", "retired") == 1, 20,
                               "the old ZSK retired")
            m = scrape(mport)
            expect(keys_gauge(m, "zsk", "active") == 1 and keys_gauge(m, "zsk", "published") == 0,
                   "the new ZSK not active")
            out = tern.ctl("reload")
            expect(out.returncode == 0, "reload: %s %s" % (out.stdout, out.stderr))
            m = scrape(mport)
            expect(keys_gauge(m, "ksk", "active") == 1 and keys_gauge(m, "zsk", "active") == 1
                   and zone_gauge(m, "tern_dnssec_next_event_seconds") is not None,
                   "the gauges after a reload: %s" % {k: v for k, v in m.items()
                                                      if k[0].startswith("tern_dnssec_k")})

        def check(name, where):
            anchor = dnsviz.dnskey_anchor("test.", LOOPBACK, knot.port)
            r = dnsviz.dnsviz_check(ZONE, where, [anchor], os.path.join(work, name))
            print("  %s: %s, %d errors, %d warnings in %.1f s" % (
                name, r.status, len(r.errors), len(r.warnings), r.seconds))
            for w in r.warnings:
                print("    warning: %s" % w)
            return r

        def dnsviz_chain():
            r = check("chain", chain)
            expect(not r.errors, "DNSViz errors:\n  " + "\n  ".join(r.errors))
            expect(r.status == "SECURE", "delegation %s, not SECURE" % r.status)

        def dnsviz_zone_alone():
            # no parent asked: anchored at the zone's own KSK, as a validator holding its DS
            ksk = [t for t, flags in dns_keys(tern.port).items() if flags == 257]
            expect(len(ksk) == 1, "KSKs: %s" % ksk)
            anchor = dnsviz.dnskey_anchor(ZONE, LOOPBACK, tern.port, tags=ksk)
            r = dnsviz.dnsviz_check(ZONE, {ZONE: [(LOOPBACK, tern.port)]}, [anchor],
                                    os.path.join(work, "alone"))
            print("  alone: %s, %d errors, %d warnings in %.1f s" % (
                r.status, len(r.errors), len(r.warnings), r.seconds))
            expect(not r.errors, "DNSViz errors:\n  " + "\n  ".join(r.errors))
            expect(r.status == "SECURE", "zone %s, not SECURE" % r.status)
            # anchored at the ZSK, which signs no DNSKEY RRset: not SECURE
            zsk = [t for t in dns_keys(tern.port) if t not in ksk]
            anchor = dnsviz.dnskey_anchor(ZONE, LOOPBACK, tern.port, tags=zsk[:1])
            r = dnsviz.dnsviz_check(ZONE, {ZONE: [(LOOPBACK, tern.port)]}, [anchor],
                                    os.path.join(work, "alone-zsk"))
            print("  alone at the ZSK: %s, %d errors" % (r.status, len(r.errors)))
            expect(r.status != "SECURE" and r.errors, "SECURE with a DS of the ZSK")

        def dnsviz_secondary():
            servers.wait_until(lambda: serial(nsd.port) == serial(tern.port), 20,
                               "NSD at tern's serial")
            r = check("secondary", {ZONE: [(LOOPBACK, nsd.port)],
                                    "test.": [(LOOPBACK, knot.port)]})
            expect(not r.errors, "DNSViz errors:\n  " + "\n  ".join(r.errors))
            expect(r.status == "SECURE", "delegation %s, not SECURE" % r.status)

        def dnsviz_catches_bad_ds():
            good = ctx["ds"][0].split()
            # the digest's first hex digit changed: a DS that matches no key
            good[3] = ("0" if good[3][0] != "0" else "1") + good[3][1:]
            bad = " ".join(good)
            set_ds([bad])

            def served():
                r = dns.query.udp(dns.message.make_query(ZONE, "DS"), LOOPBACK, port=knot.port,
                                  timeout=2)
                return any(rd.to_text().lower() == bad.lower() for rrset in r.answer
                           if rrset.rdtype == dns.rdatatype.DS for rd in rrset)
            servers.wait_until(served, 10, "Knot serving the wrong DS")
            r = check("bad_ds", chain)
            expect(r.errors, "DNSViz found nothing wrong with a DS of a wrong digest")
            expect(r.status != "SECURE", "delegation SECURE with a wrong DS")
            print("    first error: %s" % r.errors[0])

        def guard_refuses():
            # a UDP connect sends nothing, so this probes the guard without a packet leaving
            prog = os.path.join(work, "reach.py")
            with open(prog, "w") as f:
                f.write("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                        "s.connect(('127.0.0.1', 53))\n"
                        "s.connect(('192.0.2.1', 53))\nprint('not refused')\n")
            p = dnsviz.guarded([prog], work)
            expect("dnsviz-guard: refused ('192.0.2.1', 53)" in p.stderr
                   and "not refused" not in p.stdout and p.returncode != 0,
                   "the guard let it through: %s %s" % (p.stdout, p.stderr))

        for name, fn in (("guard_refuses", guard_refuses),
                         ("metrics_first_signing", metrics_first_signing),
                         ("dnsviz_chain", dnsviz_chain),
                         ("dnsviz_zone_alone", dnsviz_zone_alone),
                         ("dnsviz_secondary", dnsviz_secondary),
                         ("metrics_zsk_rollover", metrics_zsk_rollover),
                         ("dnsviz_catches_bad_ds", dnsviz_catches_bad_ds)):
            t0 = time.monotonic()
            run_check(results, name, fn)
            print("  %s: %.1f s" % (name, time.monotonic() - t0))
    finally:
        for s in reversed(started):
            s.stop()
    if any(err for _, err in results):
        print(knot.log_text())
    rc = servers.finish(tern, results)
    if rc == 0:
        servers.shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
