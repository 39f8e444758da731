#!/usr/bin/env python3
"""Keys tern manages (dnssec: {policy}): generated, published, rolled and retired on tern's clock
while a validating Unbound keeps getting AD=1 answers.

One ternd serves pol.test with an accelerated policy (TTLs of 5 s, propagation delay 2 s, a ZSK
lifetime of 20 s), its key state and keys in a state directory of the test's.

Checks:
  first_signing       no state: a KSK and a ZSK are generated (files in the state directory),
                      the zone is signed at once, the KSK is published then ready with its CDS
                      and CDNSKEY at the apex; `ternctl dnssec status` says its DS is wanted;
                      `ternctl dnssec ds-seen` makes it active
  zsk_rollovers       two ZSK rollovers by lifetime (pre-publish: the new ZSK in DNSKEY before it
                      signs, the old one kept until its signatures have expired from caches),
                      each step logged; an Unbound anchored at the KSK's DS asked every 0.3 s
                      the whole time: NOERROR and AD=1 for an answer and for a denial, never
                      SERVFAIL
  restart_resumes     ternd stopped in the middle of a ZSK rollover and started again: the same
                      keys in the same states (the state file), and the rollover finishes
  ksk_rollover        `ternctl dnssec rollover pol.test ksk`: a new KSK signs DNSKEY beside the
                      old, its CDS replaces the old one's once ready, `ds-seen` with its tag makes
                      it active, and the old KSK leaves; an Unbound anchored at the new KSK's
                      DS validates the zone
  parent_ds_check     a second ternd with zones ds.test and csk.test whose parent test. is a
                      real Knot signing it (dnssec-signing: on): tern publishes the new KSK's
                      CDS; a registrar (this script) reads it and adds the DS to Knot by UPDATE;
                      tern's checker sees it at Knot and makes the KSK active with no ds-seen;
                      an Unbound anchored at test. (Knot's KSK) validates www.ds.test through
                      the chain
  (each rollover below: DNSViz probes tern and Knot and groks the chain anchored at Knot's
   DNSKEY at every stage, i.e. whenever the set of live keys and their states changes: no error
   and the delegation SECURE each time)
  parent_ksk_rollover a KSK rollover through the parent: the registrar keeps Knot's DS set equal
                      to tern's CDS, tern sees the new DS by itself and retires the old KSK; the
                      chain validates (answers and denials, AD=1) every 0.3 s throughout, and
                      the ternd is restarted once the new KSK is published (it resumes)
  algorithm_rollover  the policy's algorithm changed 13 -> 15 and reloaded (RFC 6781 §4.1.4):
                      the new keys sign beside the old (www carries RRSIGs of both algorithms),
                      are published, the DS at Knot moves to the new KSK, the old keys leave;
                      at the end DNSKEY, the RRSIGs and the parent's DS are all algorithm 15;
                      validated every 0.3 s throughout, restarted with both published
  csk_rollover        csk.test, one combined key (csk: true): its DS by the registrar, then
                      `ternctl dnssec rollover csk.test csk`: both CSKs sign www at once, the
                      DS moves, the old CSK leaves; validated throughout, restarted mid-way
  unsign              dropping ds.test's dnssec from the config is refused (its DS is at the
                      parent); csk.test with unsign: true (RFC 8078): CDS DELETE published, the
                      registrar removes the DS, tern's checker sees it gone, the keys leave and
                      the zone is served unsigned; Unbound never answers SERVFAIL; DNSViz: no
                      error or warning, the delegation INSECURE
  serial_kept         date.test (serial 2026120601, ahead of the Unix time, and transferred, so
                      each signed version needs a higher one): a change without a new serial is
                      served as ...02; after a restart the next version is ...03, not the file's
                      ...01 (the serial served is kept in the state directory)
  refusals            a ds-seen for a tag no key waits for, an unknown zone, a CSK rollover of
                      a KSK/ZSK zone: refused with the reason
Skips (77) when unbound, knotd or dnsviz is missing.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import dns.dnssec
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.update

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dnsviz  # noqa: E402
import servers  # noqa: E402
from servers import LOOPBACK, Failure, expect, find_program, free_port  # noqa: E402

ZONE = "pol.test."
ZONE_TEXT = """$ORIGIN pol.test.
$TTL 5
@ IN SOA ns1 hostmaster 1 3600 600 86400 5
@ NS ns1
ns1 A 192.0.2.1
www A 192.0.2.3
"""
POLICY = """dnssec_policies:
  - name: fast
    algorithm: 13
    zsk_lifetime: 20
    propagation_delay: 2
    dnskey_ttl: 5
    parent_ds_ttl: 5
    zone_max_ttl: 5
"""
STEP = 0.3  # seconds between the validator's questions


def ask(port, name, rtype, do=True):
    q = dns.message.make_query(name, rtype, want_dnssec=do)
    return dns.query.udp(q, LOOPBACK, port=port, timeout=2.0)


def dnskeys(port, zone=ZONE):
    """{tag: (flags, rdata)} of the zone's DNSKEY RRset as tern serves it."""
    r = ask(port, zone, "DNSKEY")
    out = {}
    for rrset in r.answer:
        if rrset.rdtype == dns.rdatatype.DNSKEY:
            for rd in rrset:
                out[dns.dnssec.key_id(rd)] = (rd.flags, rd)
    return out


def rrsig_tags(port, name, rtype):
    r = ask(port, name, rtype)
    return {rd.key_tag for rrset in r.answer if rrset.rdtype == dns.rdatatype.RRSIG
            for rd in rrset if rd.type_covered == dns.rdatatype.from_text(rtype)}


def cds_tags(port):
    r = ask(port, ZONE, "CDS")
    return {rd.key_tag for rrset in r.answer if rrset.rdtype == dns.rdatatype.CDS for rd in rrset}


def ds_text(port, tag):
    flags, rd = dnskeys(port)[tag]
    ds = dns.dnssec.make_ds(dns.name.from_text(ZONE), rd, "SHA256")
    return ds.to_text()


class KnotParent(servers.Server):
    """Knot serving test., signing it itself, taking UPDATEs from loopback (the registrar)."""

    name = "knot-parent"

    def command(self):
        d = self.dir
        for sub in ("db", "keys"):  # Knot's timer and key databases
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        with open(os.path.join(d, "test.zone"), "w") as f:
            f.write("""$ORIGIN test.
$TTL 3
@ SOA ns hostmaster 1 3600 600 86400 3
@ NS ns
ns A 127.0.0.1
ds NS ns1.ds
ns1.ds A 127.0.0.1
csk NS ns1.csk
ns1.csk A 127.0.0.1
""")
        with open(os.path.join(d, "knot.conf"), "w") as f:
            f.write(servers.knot_conf_head(d, self.port))
            f.write(f"""acl:
  - id: registrar
    address: {LOOPBACK}
    action: update
zone:
  - domain: test.
    file: "{d}/test.zone"
    storage: "{d}"
    dnssec-signing: on
    acl: registrar
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: changes
""")
        return [find_program("knotd"), "-c", os.path.join(d, "knot.conf")]


class Watch:
    """An Unbound validating pol.test through tern, asked an answer and a denial every STEP."""

    def __init__(self, unbound, names=(("www.pol.test.", "A"), ("nx%d.pol.test.", "A"))):
        self.u = unbound
        self.names = names  # an answer and (with %d: a new name each time) a denial
        self.asked = 0

    def run(self, seconds, until=None):
        """Ask for seconds (or until until() holds); a bad answer raises Failure."""
        end = time.monotonic() + seconds
        while True:
            for name, rtype in self.names:
                name = name % self.asked if "%d" in name else name
                r = self.u.ask(name, rtype)
                rcode = dns.rcode.NOERROR
                self.asked += 1
                expect(r.rcode() == rcode and r.flags & dns.flags.AD,
                       "%s %s via Unbound at %.1f s: %s AD=%s\n%s" % (
                           name, rtype, time.monotonic(), dns.rcode.to_text(r.rcode()),
                           bool(r.flags & dns.flags.AD), self.u.log_text()))
            if until and until():
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(STEP)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl", required=True)
    ap.add_argument("--only", help="comma-separated checks to run (others skipped; a check "
                    "named after one it needs, e.g. parent_ds_check, must be given too)")
    args = ap.parse_args()
    for prog in ("unbound", "knotd"):
        if find_program(prog) is None:
            print("%s not found: skipped" % prog)
            return 77
    if not dnsviz.available():
        print("dnsviz not found: skipped")
        return 77
    work = tempfile.mkdtemp(prefix="tern-kasp-")
    results = []
    zone = os.path.join(work, "pol.test.zone")
    state = os.path.join(work, "state")
    servers.write_atomic(zone, ZONE_TEXT)
    port = free_port()
    yaml = POLICY + f"""dnssec_state_dir: "{state}"
zones:
  - origin: pol.test
    file: "{zone}"
    dnssec: {{policy: fast}}
"""

    def new_tern():
        t = servers.YamlTernd(work, args.ternd, yaml, ternctl=args.ternctl)
        t.port = port
        return t

    tern = new_tern()
    cur = [tern]  # the ternd running (restart_resumes starts another)
    unbounds = []
    others = []  # servers parent_ds_check starts
    ctx = {}
    try:
        tern.start(ZONE)

        def status():
            out = cur[0].ctl("dnssec", "status", "pol.test")
            expect(out.returncode == 0, "dnssec status: %s %s" % (out.stdout, out.stderr))
            return out.stdout

        def key_states(t=None):
            """{tag: (role, state)} from the status text (of t, else the ternd running)."""
            out = (t or cur[0]).ctl("dnssec", "status", "pol.test")
            expect(out.returncode == 0, "dnssec status: %s %s" % (out.stdout, out.stderr))
            return {int(m.group(2)): (m.group(1), m.group(3)) for m in
                    re.finditer(r"^(KSK|ZSK|CSK) (\d+) alg \d+ (\S+)", out.stdout, re.M)}

        def resumed(zone, before, after):
            """After a restart, zone's keys resumed, not begun again: every key of before still
            there (same role and algorithm), none gone back in its life. An event may fall due
            while the ternd is down (a ZSK lifetime of 20 s), so a key may have moved on."""
            order = ("generated", "pre-active", "published", "ready", "active", "retired",
                     "post-active", "removed")
            for tag, was in before.items():
                now = after.get(tag)
                expect(now and now[:-1] == was[:-1] and
                       order.index(now[-1]) >= order.index(was[-1]),
                       "%s after the restart %s, before %s" % (zone, after, before))

        def first_signing():
            keys = dnskeys(port)
            expect(len(keys) == 2, "DNSKEY: %s" % keys)
            ksk = [t for t, (f, _) in keys.items() if f == 257]
            zsk = [t for t, (f, _) in keys.items() if f == 256]
            expect(len(ksk) == 1 and len(zsk) == 1, "flags: %s" % keys)
            ctx["ksk"], ctx["zsk"] = ksk[0], zsk[0]
            files = os.listdir(os.path.join(state, "keys"))
            expect(len([f for f in files if f.endswith(".private")]) == 2, "key files %s" % files)
            expect(os.path.exists(os.path.join(state, "pol.test.kasp")), "no state file")
            expect(rrsig_tags(port, "www.pol.test.", "A") == {ctx["zsk"]}, "www not ZSK-signed")
            servers.wait_until(lambda: "ds_wanted: %d" % ctx["ksk"] in status(), 30,
                               "the KSK ready, its DS wanted")
            # the status moves at the key step, the CDS with the version built after it
            servers.wait_until(lambda: cds_tags(port) == {ctx["ksk"]}, 10,
                               "the KSK's CDS published")
            u = servers.Unbound(work, "unbound", [(ZONE, port, ds_text(port, ctx["ksk"]))])
            u.start()
            unbounds.append(u)
            ctx["watch"] = Watch(u)
            ctx["watch"].run(1)
            out = tern.ctl("dnssec", "ds-seen", "pol.test")
            expect(out.returncode == 0 and "ok" in out.stdout, "ds-seen: %s %s" %
                   (out.stdout, out.stderr))
            servers.wait_until(lambda: key_states().get(ctx["ksk"], ("", ""))[1] == "active", 10,
                               "the KSK active")
            print("  KSK %d and ZSK %d made; DS seen; KSK active" % (ctx["ksk"], ctx["zsk"]))

        def zsk_rollovers():
            w = ctx["watch"]
            seen = [ctx["zsk"]]
            for n in range(2):
                old = seen[-1]
                # the successor appears in DNSKEY first, then signs, then the old one leaves
                w.run(60, until=lambda: len([t for t, (f, _) in dnskeys(port).items()
                                             if f == 256]) == 2)
                new = [t for t, (f, _) in dnskeys(port).items() if f == 256 and t != old]
                expect(len(new) == 1, "no new ZSK published: %s" % status())
                new = new[0]
                expect(rrsig_tags(port, "www.pol.test.", "A") == {old},
                       "the new ZSK %d signs before its DNSKEY is cached" % new)
                w.run(30, until=lambda: rrsig_tags(port, "www.pol.test.", "A") == {new})
                expect(rrsig_tags(port, "www.pol.test.", "A") == {new}, "ZSK %d never signed" % new)
                expect(old in dnskeys(port), "old ZSK %d left before its signatures expired" % old)
                w.run(30, until=lambda: old not in dnskeys(port))
                expect(old not in dnskeys(port), "old ZSK %d never removed" % old)
                seen.append(new)
                if n == 0:
                    ctx["mid_zsk"] = new
            expect(tern.log_has("ZSK %d: published" % seen[1]) or
                   tern.log_has("ZSK %d: generated" % seen[1]),
                   "transitions not logged:\n" + tern.log_text())
            ctx["zsk"] = seen[-1]
            print("  ZSKs %s; %d validated answers, none bogus" % (seen, w.asked))

        def restart_resumes():
            w = ctx["watch"]
            old = ctx["zsk"]
            w.run(60, until=lambda: len([t for t, (f, _) in dnskeys(port).items()
                                         if f == 256]) == 2)
            before = key_states()
            live = {t: st for t, st in before.items() if st[1] != "removed"}
            expect(len(live) == 3, "not mid-rollover: %s" % before)
            tern.stop()
            t2 = new_tern()
            cur[0] = t2
            t2.start(ZONE)
            resumed(ZONE, before, key_states(t2))
            w.run(40, until=lambda: old not in dnskeys(port))
            expect(old not in dnskeys(port), "the rollover did not finish after the restart")
            print("  restarted mid-rollover with %s; finished" % before)

        def ksk_rollover():
            t = cur[0]
            old = ctx["ksk"]
            out = t.ctl("dnssec", "rollover", "pol.test", "ksk")
            expect(out.returncode == 0, "rollover: %s %s" % (out.stdout, out.stderr))
            again = t.ctl("dnssec", "rollover", "pol.test", "ksk")
            expect(again.returncode != 0 and again.stderr.strip(),
                   "a second KSK rollover was not refused: %s" % again.stdout)
            servers.wait_until(lambda: len([k for k, (f, _) in dnskeys(port).items()
                                            if f == 257]) == 2, 10, "a second KSK published")
            new = [k for k, (f, _) in dnskeys(port).items() if f == 257 and k != old][0]
            expect(rrsig_tags(port, ZONE, "DNSKEY") == {old, new},
                   "DNSKEY signed by %s" % rrsig_tags(port, ZONE, "DNSKEY"))
            ctx["watch"].run(30, until=lambda: cds_tags(port) == {new})
            expect(cds_tags(port) == {new}, "CDS %s, want the new KSK %d" % (cds_tags(port), new))
            bad = t.ctl("dnssec", "ds-seen", "pol.test", "1")
            expect(bad.returncode != 0, "ds-seen for tag 1 accepted")
            out = t.ctl("dnssec", "ds-seen", "pol.test", str(new))
            expect(out.returncode == 0, "ds-seen %d: %s %s" % (new, out.stdout, out.stderr))
            servers.wait_until(lambda: old not in dnskeys(port), 30, "the old KSK removed")
            u = servers.Unbound(work, "unbound-new", [(ZONE, port, ds_text(port, new))])
            u.start()
            unbounds.append(u)
            ctx["u_new"] = u
            Watch(u).run(2)
            print("  KSK %d -> %d; CDS followed; the new anchor validates" % (old, new))

        def parent_ds_check():
            knot = KnotParent(work, [])
            others.append(knot)
            knot.start("test.")
            ctx["knot"] = knot
            y2 = POLICY.replace("name: fast", "name: parent") + f"""    parents: ["{LOOPBACK}@{knot.port}"]
    ds_check_interval: 1
""" + POLICY.split("\n", 1)[1].replace("name: fast", "name: csk").replace(
                "    zsk_lifetime: 20\n", "    csk: true\n") + f"""    parents: ["{LOOPBACK}@{knot.port}"]
    ds_check_interval: 1
dnssec_state_dir: "{state}-2"
zones:
"""
            for z in ("ds", "csk"):
                zt = os.path.join(work, "%s.test.zone" % z)
                servers.write_atomic(zt, ZONE_TEXT.replace("pol.test.", "%s.test." % z))
                y2 += f"""  - origin: {z}.test
    file: "{zt}"
    dnssec: {{policy: {"parent" if z == "ds" else "csk"}}}
"""
            t2 = servers.YamlTernd(work, args.ternd, y2, name="tern-2", ternctl=args.ternctl)
            others.append(t2)
            t2.start("ds.test.")
            ctx["t2"] = t2
            # the registrar: the CDS once published, as a DS at the parent
            servers.wait_until(lambda: cds_of("ds.test."), 30, "ds.test's CDS")
            out = t2.ctl("dnssec", "status", "ds.test")
            expect(re.search(r"^KSK \d+ alg 13 ready", out.stdout, re.M),
                   "the KSK not ready: %s" % out.stdout)
            expect(registrar("ds.test."), "no DS to add")
            servers.wait_until(lambda: re.search(r"^KSK \d+ alg 13 active",
                                                 t2.ctl("dnssec", "status", "ds.test").stdout,
                                                 re.M), 20, "tern seeing the DS at Knot")
            expect(t2.log_has("seen at every server of the parent"), "the check not logged")
            keys = dns.query.udp(dns.message.make_query("test.", "DNSKEY"), LOOPBACK,
                                 port=knot.port, timeout=2)
            ksk = [rd for rrset in keys.answer for rd in rrset
                   if rrset.rdtype == dns.rdatatype.DNSKEY and rd.flags == 257]
            expect(ksk, "Knot has no KSK for test.: %s" % keys)
            anchor = dns.dnssec.make_ds(dns.name.from_text("test."), ksk[0], "SHA256").to_text()
            u2 = servers.Unbound(work, "unbound-chain", [("test.", knot.port, anchor),
                                                         ("ds.test.", t2.port, None),
                                                         ("csk.test.", t2.port, None)])
            u2.start()
            unbounds.append(u2)
            ctx["u2"] = u2
            r = u2.ask("www.ds.test.", "A")
            expect(r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AD,
                   "www.ds.test through the chain: %s\n%s" % (r, u2.log_text()))
            print("  DS of ds.test at Knot by the registrar; tern saw it; the chain validates")

        def cds_of(zone):
            """tern's CDS RRs for zone, as text."""
            r = ask(ctx["t2"].port, zone, "CDS", do=False)
            return {rd.to_text() for rrset in r.answer if rrset.rdtype == dns.rdatatype.CDS
                    for rd in rrset}

        def registrar(zone):
            """Make Knot's DS set for zone equal to tern's CDS (RFC 7344); True when it changed."""
            want = cds_of(zone)
            have = ctx.setdefault("at_parent", {}).get(zone, set())
            if not want or want == have:
                return False
            u = dns.update.UpdateMessage("test.")
            u.delete(zone, "DS")
            for text in want:
                if text.split()[:3] != ["0", "0", "0"]:  # CDS DELETE (RFC 8078): no DS
                    u.add(zone, 3, "DS", text)
            r = dns.query.tcp(u, LOOPBACK, port=ctx["knot"].port, timeout=5)
            expect(r.rcode() == dns.rcode.NOERROR, "Knot refused the DS: %s" % r)
            ctx["at_parent"][zone] = want
            return True

        def keys_of(zone):
            """{tag: (role, alg, state)} of zone's keys on the second ternd."""
            out = ctx["t2"].ctl("dnssec", "status", zone)
            expect(out.returncode == 0, "dnssec status %s: %s %s" % (zone, out.stdout, out.stderr))
            return {int(m.group(2)): (m.group(1), int(m.group(3)), m.group(4)) for m in
                    re.finditer(r"^(KSK|ZSK|CSK) (\d+) alg (\d+) (\S+)", out.stdout, re.M)}

        def restart_t2():
            """Stop the second ternd and start it again on its port and state: it resumes."""
            old = ctx["t2"]
            before = {z: keys_of(z) for z in ("ds.test.", "csk.test.")}
            old.stop()
            t = servers.YamlTernd(work, args.ternd, old.yaml, name="tern-2", ternctl=args.ternctl)
            t.port = old.port
            others.append(t)
            t.start("ds.test.")
            ctx["t2"] = t
            after = {z: keys_of(z) for z in ("ds.test.", "csk.test.")}
            for z in before:
                resumed(z, before[z], after[z])
            return before

        def through_parent(zone, done, restart_when, what, seconds=180):
            """The registrar keeping Knot's DS for zone equal to tern's CDS while an Unbound
            anchored at test. validates zone every STEP, until done(keys) holds; the second
            ternd restarted once, the first time restart_when(keys) holds. Returns what was
            seen: the DS updates, the validated answers, the RRSIG algorithms of www's A."""
            w = Watch(ctx["u2"], names=(("www." + zone, "A"), ("nx%d." + zone, "A")))
            seen = {"updates": 0, "restarted": None, "algs": set(), "stages": 0, "warnings": []}
            stage = None
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds:
                w.run(0)
                if registrar(zone):
                    seen["updates"] += 1
                r = ask(ctx["t2"].port, "www." + zone, "A")
                seen["algs"].add(tuple(sorted(rd.algorithm for rrset in r.answer
                                              if rrset.rdtype == dns.rdatatype.RRSIG
                                              for rd in rrset)))
                keys = keys_of(zone)
                now = sorted((t, k) for t, k in keys.items() if k[2] != "removed")
                if now != stage:  # a new stage of the rollover: DNSViz's verdict on it
                    stage = now
                    seen["stages"] += 1
                    seen["warnings"] += viz(zone, "%s-%d" % (what.split()[-2], seen["stages"]),
                                            now)
                if seen["restarted"] is None and restart_when(keys):
                    seen["restarted"] = restart_t2()[zone]
                    continue
                if done(keys):
                    break
                time.sleep(STEP)
            keys = keys_of(zone)
            expect(done(keys), "%s did not finish in %d s: %s" % (what, seconds, keys))
            expect(seen["restarted"], "%s: never restarted mid-way: %s" % (what, keys))
            w.run(1)
            seen["asked"] = w.asked
            for text in sorted(set(seen["warnings"])):
                print("    DNSViz warning (%s): %s" % (what, text))
            return seen

        def viz(zone, name, stage, want="SECURE"):
            """DNSViz (probe of tern and Knot, grok anchored at Knot's DNSKEY): no error, and
            the delegation's status want, at this stage; its warnings."""
            anchor = dnsviz.dnskey_anchor("test.", LOOPBACK, ctx["knot"].port)
            where = {zone: [(LOOPBACK, ctx["t2"].port)], "test.": [(LOOPBACK, ctx["knot"].port)]}
            r = dnsviz.dnsviz_check(zone, where, [anchor], os.path.join(work, "viz", name))
            ctx["viz"] = ctx.get("viz", 0) + 1
            expect(not r.errors and r.status == want,
                   "DNSViz at %s %s: %s, errors %s, warnings %s" % (name, stage, r.status,
                                                                    r.errors, r.warnings))
            return r.warnings

        def live(keys):
            return {t: k for t, k in keys.items() if k[2] != "removed"}

        def parent_ksk_rollover():
            # a KSK rollover through the parent, restarted once the new KSK is published
            old = [t for t, k in keys_of("ds.test.").items() if k[0] == "KSK" and k[2] == "active"]
            expect(len(old) == 1, "no single active KSK: %s" % keys_of("ds.test."))
            out = ctx["t2"].ctl("dnssec", "rollover", "ds.test", "ksk")
            expect(out.returncode == 0, "rollover: %s %s" % (out.stdout, out.stderr))

            def done(keys):
                return old[0] not in live(keys) and any(
                    k[0] == "KSK" and k[2] == "active" for k in keys.values())
            seen = through_parent("ds.test.", done, lambda keys: len(
                [k for k in live(keys).values() if k[0] == "KSK"]) == 2, "the KSK rollover")
            expect(old[0] not in dnskeys(ctx["t2"].port, "ds.test."),
                   "the old KSK is still in DNSKEY")
            print("  KSK %d rolled through the parent (%d DS updates, restarted at %s), "
                  "%d validated answers, DNSViz clean at %d stages" % (
                      old[0], seen["updates"], seen["restarted"], seen["asked"], seen["stages"]))

        def algorithm_rollover():
            # RFC 6781 §4.1.4, 13 -> 15: the policy's algorithm changed and reloaded; the new
            # keys sign first, then are published, the DS moves, the old keys leave last
            t2 = ctx["t2"]
            old = set(live(keys_of("ds.test.")))
            t2.yaml = t2.yaml.replace("algorithm: 13", "algorithm: 15", 1)
            servers.write_atomic(os.path.join(t2.dir, "ternd.yaml"), open(
                os.path.join(t2.dir, "ternd.yaml")).read().replace("algorithm: 13",
                                                                   "algorithm: 15", 1))
            out = t2.ctl("reload")
            expect(out.returncode == 0, "reload: %s %s" % (out.stdout, out.stderr))

            def done(keys):
                lv = live(keys)
                return lv and all(k[1] == 15 for k in lv.values()) and any(
                    k[0] == "KSK" and k[2] == "active" for k in lv.values())

            def mid(keys):  # both algorithms published
                return {k[1] for k in live(keys).values() if k[2] in ("published", "ready",
                                                                       "active")} == {13, 15}
            seen = through_parent("ds.test.", done, mid, "the algorithm rollover", 200)
            expect((13, 15) in seen["algs"], "never signed with both algorithms: %s" % seen["algs"])
            servers.wait_until(lambda: {rd.algorithm for rrset in ask(
                ctx["t2"].port, "www.ds.test.", "A").answer if rrset.rdtype == dns.rdatatype.RRSIG
                for rd in rrset} == {15}, 30, "the old algorithm's signatures gone")
            keys = dnskeys(ctx["t2"].port, "ds.test.")
            expect({rd.algorithm for _, rd in keys.values()} == {15}, "DNSKEY %s" % keys)
            expect(not (old & set(live(keys_of("ds.test.")))), "old keys live")
            ds = ctx["at_parent"]["ds.test."]
            expect(all(text.split()[1] == "15" for text in ds), "DS at the parent %s" % ds)
            print("  algorithm 13 -> 15 (%d DS updates, restarted at %s; signatures seen %s), "
                  "%d validated answers, DNSViz clean at %d stages" % (
                      seen["updates"], seen["restarted"], sorted(seen["algs"]), seen["asked"],
                      seen["stages"]))

        def csk_rollover():
            # one combined key: its first DS by the registrar, then a CSK rollover (the new CSK
            # signs everything beside the old one from its publication), restarted mid-way
            servers.wait_until(lambda: registrar("csk.test.") or "csk.test." in ctx.get(
                "at_parent", {}), 30, "csk.test's CDS")
            servers.wait_until(lambda: any(k[0] == "CSK" and k[2] == "active"
                                           for k in keys_of("csk.test.").values()), 20,
                               "the CSK active")
            first = [t for t, k in keys_of("csk.test.").items() if k[2] == "active"]
            expect(len(first) == 1 and len(live(keys_of("csk.test."))) == 1,
                   "not one CSK: %s" % keys_of("csk.test."))
            expect(rrsig_tags(ctx["t2"].port, "www.csk.test.", "A") == set(first),
                   "www not signed by the CSK")
            Watch(ctx["u2"], names=(("www.csk.test.", "A"), ("nx%d.csk.test.", "A"))).run(1)
            out = ctx["t2"].ctl("dnssec", "rollover", "csk.test", "csk")
            expect(out.returncode == 0, "rollover: %s %s" % (out.stdout, out.stderr))
            both = []

            def two(keys):
                if len(rrsig_tags(ctx["t2"].port, "www.csk.test.", "A")) == 2:
                    both.append(True)
                return len(live(keys)) == 2

            def done(keys):
                two(keys)
                lv = live(keys)
                return first[0] not in lv and any(k[2] == "active" for k in lv.values())
            seen = through_parent("csk.test.", done, two, "the CSK rollover")
            expect(both, "the two CSKs never both signed www")
            print("  CSK %d rolled through the parent (%d DS updates, restarted at %s), "
                  "%d validated answers, DNSViz clean at %d stages" % (
                      first[0], seen["updates"], seen["restarted"], seen["asked"],
                      seen["stages"]))

        def unsign():
            # RFC 8078 on csk.test: unsign: true publishes CDS DELETE, the registrar removes the
            # DS, tern's checker sees it gone, the keys leave a DS TTL later; the zone goes from
            # secure to insecure with no SERVFAIL on the way. Dropping ds.test's dnssec at once
            # is refused instead.
            t2 = ctx["t2"]
            conf = os.path.join(t2.dir, "ternd.yaml")
            text = open(conf).read()
            servers.write_atomic(conf, text.replace("    dnssec: {policy: parent}\n", ""))
            out = t2.ctl("reload")
            expect(out.returncode != 0 and "unsign: true" in out.stdout + out.stderr,
                   "dropping a signed zone's dnssec was not refused: %s %s" %
                   (out.stdout, out.stderr))
            expect(t2.log_has("its managed keys are in use"), "the refusal not logged")
            t2.yaml = t2.yaml.replace("dnssec: {policy: csk}", "dnssec: {policy: csk, unsign: true}")
            servers.write_atomic(conf, text.replace("dnssec: {policy: csk}",
                                                    "dnssec: {policy: csk, unsign: true}"))
            out = t2.ctl("reload")
            expect(out.returncode == 0, "reload: %s %s" % (out.stdout, out.stderr))
            servers.wait_until(lambda: any(t.split()[:3] == ["0", "0", "0"]
                                           for t in cds_of("csk.test.")), 10, "CDS DELETE")
            u = ctx["u2"]
            asked = 0
            t0 = time.monotonic()
            while time.monotonic() - t0 < 90:
                registrar("csk.test.")
                for name, ok in (("www.csk.test.", (dns.rcode.NOERROR,)),
                                 # compact denial while signed, NXDOMAIN once unsigned
                                 ("nx%d.csk.test." % asked,
                                  (dns.rcode.NOERROR, dns.rcode.NXDOMAIN))):
                    r = u.ask(name, "A")
                    asked += 1
                    expect(r.rcode() in ok, "%s via Unbound: %s\n%s" % (
                        name, dns.rcode.to_text(r.rcode()), u.log_text()))
                if not dnskeys(ctx["t2"].port, "csk.test."):
                    break
                time.sleep(STEP)
            expect(not dnskeys(ctx["t2"].port, "csk.test."), "the keys never left: %s" %
                   keys_of("csk.test."))
            expect(ctx["t2"].log_has("its DS is gone from every server of the parent"),
                   "the checker did not see the DS go")
            expect(not rrsig_tags(ctx["t2"].port, "www.csk.test.", "A"), "www still signed")
            r = ask(ctx["knot"].port, "csk.test.", "DS")
            expect(not [x for x in r.answer if x.rdtype == dns.rdatatype.DS], "DS at Knot: %s" % r)
            warn = viz("csk.test.", "unsigned", "unsigned", want="INSECURE")
            expect(not warn, "DNSViz warns of the unsigned zone: %s" % warn)
            # insecure once Unbound's last signed answer (TTL 5) has expired
            servers.wait_until(lambda: not u.ask("www.csk.test.", "A").flags & dns.flags.AD,
                               15, "www.csk.test insecure (AD=0)")
            print("  csk.test unsigned through CDS DELETE (%d answers, none SERVFAIL); "
                  "dropping ds.test's dnssec refused" % asked)

        def serial_kept():
            zd = os.path.join(work, "date.test.zone")
            text = ZONE_TEXT.replace("pol.test.", "date.test.").replace(
                "hostmaster 1 ", "hostmaster 2026120601 ")
            servers.write_atomic(zd, text)
            y3 = POLICY + f"""dnssec_state_dir: "{state}-3"
zones:
  - origin: date.test
    file: "{zd}"
    allow_transfer: [127.0.0.1]
    dnssec: {{policy: fast}}
"""

            def serial(t):
                r = ask(t.port, "date.test.", "SOA")
                return [rd.serial for rrset in r.answer if rrset.rdtype == dns.rdatatype.SOA
                        for rd in rrset][0]
            t3 = servers.YamlTernd(work, args.ternd, y3, name="tern-3", ternctl=args.ternctl)
            others.append(t3)
            t3.start("date.test.")
            expect(serial(t3) == 2026120601, "first serial %d" % serial(t3))
            servers.write_atomic(zd, text + "more TXT \"same serial\"\n")
            out = t3.ctl("reload")
            expect(out.returncode == 0, "reload: %s %s" % (out.stdout, out.stderr))
            expect(serial(t3) == 2026120602, "after a change: %d" % serial(t3))
            t3.stop()
            t4 = servers.YamlTernd(work, args.ternd, y3, name="tern-3", ternctl=args.ternctl)
            t4.port = t3.port
            others.append(t4)
            t4.start("date.test.")
            expect(serial(t4) == 2026120603, "after a restart: %d, want 2026120603" % serial(t4))
            print("  2026120601 -> ...02 on a change -> ...03 after a restart")

        def refusals():
            t = cur[0]
            out = t.ctl("dnssec", "status", "other.test")
            expect(out.returncode != 0 and "policy" in out.stderr, "status of an unknown zone: "
                   "%s %s" % (out.stdout, out.stderr))
            out = t.ctl("dnssec", "ds-seen", "pol.test")
            expect(out.returncode != 0, "ds-seen with no DS wanted accepted: %s" % out.stdout)
            out = t.ctl("dnssec", "rollover", "pol.test", "csk")
            expect(out.returncode != 0 and out.stderr.strip(),
                   "a CSK rollover of a KSK/ZSK zone accepted: %s" % out.stdout)
            Watch(ctx["u_new"]).run(1)

        servers.run_checks(results, (("first_signing", first_signing),
                                     ("zsk_rollovers", zsk_rollovers),
                                     ("restart_resumes", restart_resumes),
                                     ("ksk_rollover", ksk_rollover),
                                     ("parent_ds_check", parent_ds_check),
                                     ("parent_ksk_rollover", parent_ksk_rollover),
                                     ("algorithm_rollover", algorithm_rollover),
                                     ("csk_rollover", csk_rollover),
                                     ("unsign", unsign),
                                     ("serial_kept", serial_kept),
                                     ("refusals", refusals)),
                           only=args.only.split(",") if args.only else None,
                           always=("first_signing",))
    finally:
        for u in unbounds:
            u.stop()
        for o in others:
            o.stop()
        cur[0].stop()
        tern.stop()
    rc = servers.finish(cur[0], results)
    if rc == 0:
        shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
