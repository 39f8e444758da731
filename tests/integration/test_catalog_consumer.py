#!/usr/bin/python3
"""Catalog zones consumed (RFC 9432 version 2): tern as the secondary of real primaries'
catalogs, with real peers on loopback.

  - Knot 3.2 generates catalog.test (catalog-role: generate) from its member zones m1.test and
    m2.test (catalog-role: member); tern follows it with a TSIG key (catalog_consumer).
  - BIND 9.18 serves a hand-written catalog2.test listing b1.test (on BIND) and b2.test with the
    group property "special", which tern's config maps to another primary (Knot, with the key).

Checks, in order (each builds on the one before):
  knot_members        every member answers as Knot has it (every RRset of Knot's AXFR, from
                      tern over UDP), and each member's copy is in the catalogs' directory
  configured_wins     m9.test, in Knot's catalog and in tern's config (a file): the file is served,
                      the clash logged
  knot_member_added   m3.test added on Knot (knotc reload): served after Knot's NOTIFY
  knot_member_removed m2.test removed on Knot: REFUSED, its copy gone, m1/m3 still served
  bind_group          b1.test from BIND, b2.test (group special) from Knot: both as their
                      primaries have them
  bind_reset          b1.test's unique id changed: reset logged, b1.test served again
  bad_version         catalog2.test with version "1" (and a new member): refused with a log line
                      naming the zone and the label; b1/b2 still served, the new one not
  missing_version     the same with no version at all
  restart_offline     Knot and BIND stopped, tern restarted: m1, m3, b1, b2 answered at once
                      from the directory, equal to before

    test_catalog_consumer.py --ternd build/ternd
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsigkeyring
import dns.zone

import servers
from servers import (LOOPBACK, Failure, Server, YamlTernd, expect, find_program, named_conf,
                     run_checks, wait_until, write_atomic)

KEY = "cat-key"
SECRET = "c2VjcmV0LWZvci10aGUtY2F0YWxvZy10ZXN0cyEhIQ=="
CONVERGE = 20.0  # seconds for a NOTIFY'd change to be served


def zone_text(origin, serial, extra=""):
    return f"""$ORIGIN {origin}.
$TTL 300
@ IN SOA ns1.{origin}. hostmaster.{origin}. {serial} 2 2 3600 60
@ IN NS ns1.{origin}.
ns1 IN A 192.0.2.53
www IN A 192.0.2.{serial % 200 + 1}
www IN AAAA 2001:db8::{serial}
mail IN MX 10 mx.{origin}.
txt IN TXT "member {origin} serial {serial}"
{extra}"""


def catalog2_text(serial, version='version 0 IN TXT "2"\n', b1_id="b1id", extra=""):
    return f"""$ORIGIN catalog2.test.
$TTL 0
@ IN SOA invalid. invalid. {serial} 2 2 3600 0
@ IN NS invalid.
{version}{b1_id}.zones IN PTR b1.test.
b2id.zones IN PTR b2.test.
group.b2id.zones IN TXT "special"
{extra}"""


class Knot(Server):
    name = "knot"

    def __init__(self, workdir, tern_port):
        self.tern_port = tern_port
        self.members = ["m1.test", "m2.test", "m9.test"]
        super().__init__(workdir, [])
        for z in ("m1.test", "m2.test", "m3.test", "m9.test", "b2.test"):
            write_atomic(os.path.join(self.dir, z + ".zone"), zone_text(z, 1 + len(z) % 7))
        self.conf = os.path.join(self.dir, "knot.conf")

    def write_conf(self):
        d = self.dir
        zones = "".join(f"""  - domain: {z}
    file: {z}.zone
    catalog-role: member
    catalog-zone: catalog.test
""" for z in self.members)
        with open(self.conf, "w") as f:
            f.write(servers.knot_conf_head(d, self.port, log="info"))
            f.write(f"""key:
  - id: {KEY}
    algorithm: hmac-sha256
    secret: {SECRET}
remote:
  - id: tern
    address: {LOOPBACK}@{self.tern_port}
    key: {KEY}
acl:
  - id: xfr
    address: {LOOPBACK}
    key: {KEY}
    action: transfer
template:
  - id: default
    storage: "{d}"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
    notify: tern
    acl: xfr
zone:
  - domain: catalog.test
    catalog-role: generate
  - domain: b2.test
    file: b2.test.zone
{zones}""")

    def command(self):
        os.makedirs(os.path.join(self.dir, "db"), exist_ok=True)
        self.write_conf()
        return [find_program("knotd"), "-c", self.conf]

    def reload(self):
        self.write_conf()
        r = subprocess.run([find_program("knotc"), "-c", self.conf, "reload"],
                           capture_output=True, text=True, timeout=20)
        expect(r.returncode == 0, "knotc reload: %s %s" % (r.stdout, r.stderr))


class Named(Server):
    """BIND 9 as the primary of catalog2.test and b1.test, NOTIFYing tern."""

    name = "named"

    def __init__(self, workdir, tern_port):
        self.tern_port = tern_port
        super().__init__(workdir, [])
        self.cat_path = os.path.join(self.dir, "catalog2.test.db")
        write_atomic(self.cat_path, catalog2_text(1))
        write_atomic(os.path.join(self.dir, "b1.test.db"), zone_text("b1.test", 5))

    def command(self):
        d = self.dir
        conf = os.path.join(d, "named.conf")
        zones = "".join(f"""zone "{z}" {{
    type primary;
    file "{d}/{z}.db";
    notify explicit;
    also-notify {{ {LOOPBACK} port {self.tern_port}; }};
}};
""" for z in ("catalog2.test", "b1.test"))
        with open(conf, "w") as f:
            f.write(named_conf(d, self.port,
                               ("allow-transfer { 127.0.0.0/8; };", "allow-query { any; };"), zones))
        return [find_program("named"), "-g", "-c", conf, "-n", "1"]

    def set_catalog(self, text):
        write_atomic(self.cat_path, text)
        self.proc.send_signal(signal.SIGHUP)  # reloads the zones whose files changed


def query(port, name, rdtype):
    q = dns.message.make_query(name, rdtype)
    return dns.query.udp(q, LOOPBACK, port=port, timeout=1.0)


def rcode_of(port, name):
    return query(port, name, "SOA").rcode()


def primary_rrsets(port, zone, keyring=None):
    """{(name, type): sorted rdata texts} of zone by AXFR from port."""
    kw = {"keyring": keyring, "keyname": KEY, "keyalgorithm": "hmac-sha256"} if keyring else {}
    z = dns.zone.from_xfr(dns.query.xfr(LOOPBACK, zone, port=port, timeout=5, lifetime=10,
                                        relativize=False, **kw), relativize=False)
    out = {}
    for name, node in z.nodes.items():
        for rds in node.rdatasets:
            out[(name.to_text(), dns.rdatatype.to_text(rds.rdtype))] = sorted(
                r.to_text() for r in rds)
    return out


def tern_rrsets(port, want):
    """The same keys as want, asked of tern over UDP (answer section)."""
    out = {}
    for (name, rdtype) in want:
        r = query(port, name, rdtype)
        if r.rcode() != dns.rcode.NOERROR:
            out[(name, rdtype)] = "rcode %s" % dns.rcode.to_text(r.rcode())
            continue
        rrs = [a for a in r.answer if a.rdtype == dns.rdatatype.from_text(rdtype)]
        out[(name, rdtype)] = sorted(x.to_text() for a in rrs for x in a)
    return out


def same_as(tern_port, primary_port, zone, keyring=None):
    want = primary_rrsets(primary_port, zone, keyring)
    got = tern_rrsets(tern_port, want)
    diff = [(k, want[k], got[k]) for k in want if want[k] != got[k]]
    expect(not diff, "%s: tern differs from its primary: %s" % (zone, diff[:3]))
    return want


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    for prog in ("knotd", "knotc", "named"):
        if not find_program(prog):
            print("%s not installed: skipped" % prog)
            return 77
    work = tempfile.mkdtemp(prefix="tern-catalog-")
    keyring = dns.tsigkeyring.from_text({KEY: SECRET})
    catdir = os.path.join(work, "catalogs")
    tern_port = servers.free_port()
    knot = Knot(work, tern_port)
    named = Named(work, tern_port)
    m9_path = os.path.join(work, "m9.zone")
    write_atomic(m9_path, zone_text("m9.test", 150, 'own IN TXT "from tern\'s own file"\n'))
    yaml = f"""log_level: info
tsig_keys: [{{name: {KEY}, algorithm: hmac-sha256, secret: "{SECRET}"}}]
catalogs:
  - {{origin: mine.test, members: all, allow_transfer: [{LOOPBACK}]}}
zones:
  - origin: m9.test
    file: "{m9_path}"
  - origin: catalog.test
    primary: {{address: "{LOOPBACK}@{knot.port}", key: {KEY}}}
    catalog_consumer: {{directory: "{catdir}"}}
  - origin: catalog2.test
    primary: "{LOOPBACK}@{named.port}"
    catalog_consumer:
      directory: "{catdir}"
      groups:
        special: {{primary: {{address: "{LOOPBACK}@{knot.port}", key: {KEY}}}}}
"""
    tern = YamlTernd(work, args.ternd, yaml)
    tern.port = tern_port
    results = []
    before = {}

    def served(zone):
        return rcode_of(tern.port, zone) == dns.rcode.NOERROR and query(
            tern.port, zone, "SOA").answer

    def knot_members():
        for z in ("m1.test", "m2.test"):
            wait_until(lambda z=z: served(z), CONVERGE, "tern serves " + z)
            same_as(tern.port, knot.port, z, keyring)
            wait_until(lambda z=z: os.path.exists(os.path.join(catdir, z + ".zone")), 5,
                       "the copy of " + z)
        expect(os.path.exists(os.path.join(catdir, "catalog.test.members")), "no member list")

    def configured_wins():
        # m9.test is in Knot's catalog and in tern's config: the configured one is served
        wait_until(lambda: "zone m9.test is also configured from a file; serving the file"
                   in tern.log_text(200000), CONVERGE, "the clash logged")
        r = query(tern.port, "own.m9.test", "TXT")
        expect(r.rcode() == dns.rcode.NOERROR and r.answer, "m9.test not from tern's file")
        expect(query(tern.port, "m9.test", "SOA").answer[0][0].serial == 150, "m9's serial")

    def produced_without_members():
        # tern's own catalog (members: all) lists its file zone, never the zones it holds as
        # a consumer's copies, nor the catalogs it consumes
        def members():
            xfr = dns.query.xfr(LOOPBACK, "mine.test", port=tern.port, lifetime=10)
            z = dns.zone.from_xfr(xfr)
            return sorted(str(rd.target) for _, rds in z.iterate_rdatasets(dns.rdatatype.PTR)
                          for rd in rds)
        wait_until(lambda: "m9.test." in members(), CONVERGE, "mine.test lists m9.test")
        got = members()
        expect(got == ["m9.test."], "mine.test's members: %s" % got)

    def knot_member_added():
        knot.members.append("m3.test")
        knot.reload()
        took = wait_until(lambda: served("m3.test"), CONVERGE, "tern serves m3.test")
        same_as(tern.port, knot.port, "m3.test", keyring)
        print("m3.test served %.2f s after knotc reload" % took)

    def knot_member_removed():
        knot.members.remove("m2.test")
        knot.reload()
        wait_until(lambda: rcode_of(tern.port, "m2.test") == dns.rcode.REFUSED, CONVERGE,
                   "m2.test REFUSED")
        expect(not os.path.exists(os.path.join(catdir, "m2.test.zone")), "m2's copy is still there")
        for z in ("m1.test", "m3.test"):
            same_as(tern.port, knot.port, z, keyring)

    def bind_group():
        for z in ("b1.test", "b2.test"):
            wait_until(lambda z=z: served(z), CONVERGE, "tern serves " + z)
        same_as(tern.port, named.port, "b1.test")
        same_as(tern.port, knot.port, "b2.test", keyring)  # the group's primary

    def bind_reset():
        named.set_catalog(catalog2_text(2, b1_id="b1new"))
        wait_until(lambda: "unique id b1id is now b1new" in tern.log_text(200000), CONVERGE,
                   "the reset logged")
        wait_until(lambda: served("b1.test"), CONVERGE, "b1.test served again")
        same_as(tern.port, named.port, "b1.test")

    def refused_catalog(serial, version, line):
        named.set_catalog(catalog2_text(serial, version=version, b1_id="b1new",
                                        extra="b3id.zones IN PTR b3.test.\n"))
        wait_until(lambda: line in tern.log_text(200000), CONVERGE, "the refusal logged")
        expect(rcode_of(tern.port, "b3.test") == dns.rcode.REFUSED, "b3.test served")
        same_as(tern.port, named.port, "b1.test")
        same_as(tern.port, knot.port, "b2.test", keyring)

    def bad_version():
        refused_catalog(3, 'version 0 IN TXT "1"\n',
                        'catalog catalog2.test: version.catalog2.test TXT is "1", not "2"')

    def missing_version():
        refused_catalog(4, "", "catalog catalog2.test: no version property (version.catalog2.test")

    def restart_offline():
        for z in ("m1.test", "m3.test"):
            before[z] = same_as(tern.port, knot.port, z, keyring)
        before["b1.test"] = same_as(tern.port, named.port, "b1.test")
        before["b2.test"] = same_as(tern.port, knot.port, "b2.test", keyring)
        knot.stop()
        named.stop()
        tern.stop()
        tern.start("m1.test")  # answers NOERROR with data before any primary could be asked
        for z, want in before.items():
            got = tern_rrsets(tern.port, want)
            expect(got == want, "%s after the restart: %s" % (z, [
                (k, want[k], got[k]) for k in want if want[k] != got[k]][:3]))
        expect(rcode_of(tern.port, "m2.test") == dns.rcode.REFUSED, "m2.test back")

    try:
        knot.start("m1.test")
        named.start("b1.test")
        tern.start("catalog.test")
        run_checks(results, [
            ("knot_members", knot_members),
            ("configured_wins", configured_wins),
            ("produced_without_members", produced_without_members),
            ("knot_member_added", knot_member_added),
            ("knot_member_removed", knot_member_removed),
            ("bind_group", bind_group),
            ("bind_reset", bind_reset),
            ("bad_version", bad_version),
            ("missing_version", missing_version),
            ("restart_offline", restart_offline),
        ])
    except (Failure, RuntimeError) as e:
        results.append(("setup", str(e)))
    finally:
        tern.stop()
        knot.stop()
        named.stop()
    rc = servers.finish(tern, results)
    if rc:
        print(knot.log_text())
        print(named.log_text())
    if args.keep:
        print("kept", work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
