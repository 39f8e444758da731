#!/usr/bin/python3
"""A catalog zone (RFC 9432, version 2) made by tern, consumed by real BIND 9.18 and Knot 3.2.

One ternd is the primary of a.test and b.test (zone files) and of r1.test (Redis, from a
redis-server started here; later r2.test, and api.test made through the HTTP API), all
members of catalog.invalid (members: all); a.test and r1.test carry the group "blue"
(catalog_group), b.test a coo property (catalog_coo). named
(catalog-zones) and knotd (catalog-role: interpret, catalog-template: [default, blue]) are told
of it by NOTIFY and transfer it and every member from tern.

Checks (dnspython; the peers' answers and files):
  catalog_content     AXFR of the catalog: SOA, NS invalid., version TXT "2", one PTR per member
                      under <id>.zones with the ids tern's hash gives, group TXT and coo PTR
  bind_provisions     named answers SOA and A of every member, authoritatively, as tern does
  knot_provisions     the same for knotd
  group_reaches_peers the catalog copies of named and knotd (AXFR from each) hold the group
                      TXT records; knotd built the members of group blue from template blue
                      (their zone files written where only that template puts them)
  sighup_removes      b.test out of ternd.yaml, SIGHUP: a new serial; IXFR from the old one is
                      exactly the member's PTR and coo removed; named and knotd stop serving it
  redis_add_remove    r2.test added to Redis: in the catalog, served by both peers; r1.test
                      removed from the Redis zone set (SREM): out of the catalog and both peers
  api_add_remove      api.test made by the HTTP API (POST, kept in Redis): served by both peers;
                      deleted (DELETE): dropped by both
  no_churn            SIGHUP with nothing changed: the catalog keeps its serial
  restart_stable      ternd restarted: the same member ids, a serial not below the last one
  clean_exit          ternd exits 0 on SIGTERM

Exits 77 when named, knotd or redis-server is missing. Every wait is bounded; only the
processes started here are stopped.

    test_catalog_producer.py --ternd build/ternd
"""

import argparse
import os
import shutil
import signal
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
from servers import (LOOPBACK, Named, Redis, Server, YamlTernd, expect,  # noqa: E402
                     find_program, finish, free_port, knot_conf_head, run_checks, wait_until,
                     write_atomic)
from test_api import OPS, ZONES, Api, wait_api  # noqa: E402

CATALOG = "catalog.invalid."
TIMEOUT = 2.0
CONVERGE = 20.0  # NOTIFY, the catalog's IXFR, the member's AXFR; BIND waits 1 s between updates
SOA = {"ttl": 300, "ns": "ns1.r.test.", "MBox": "h.r.test.", "refresh": 3600, "retry": 600,
       "expire": 86400, "minttl": 300, "serial": 1}


def zone_text(origin, addr):
    return ("$ORIGIN %s.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 300\n@ NS ns1\n"
            "ns1 A 192.0.2.53\nwww A %s\n" % (origin, addr))


def ask(port, name, rdtype):
    q = dns.message.make_query(name, rdtype)
    q.flags &= ~dns.flags.RD
    return dns.query.udp(q, LOOPBACK, port=port, timeout=TIMEOUT)


def xfr_rrs(port, zone, rdtype="AXFR", serial=0):
    """Every record of an AXFR (or IXFR from serial) over TCP, in order, as (name, type, text)."""
    out = []
    for r in dns.query.xfr(LOOPBACK, zone, rdtype=rdtype, serial=serial, port=port,
                           timeout=TIMEOUT * 3, lifetime=TIMEOUT * 5, relativize=False):
        for rrset in r.answer:
            for rd in rrset:
                out.append((rrset.name.to_text().lower(), dns.rdatatype.to_text(rrset.rdtype),
                            rd.to_text().lower()))
    return out


def serial_of(port):
    r = ask(port, CATALOG, "SOA")
    return r.answer[0][0].serial


def members(rrs):
    """{member name: (id, group or None, coo or None)} of a catalog's records."""
    ptr, group, coo = {}, {}, {}
    suffix = ".zones." + CATALOG
    for name, rtype, text in rrs:
        if not name.endswith(suffix):
            continue
        head = name[:-len(suffix)].split(".")
        if len(head) == 1 and rtype == "PTR":
            ptr[head[0]] = text
        elif len(head) == 2 and head[0] == "group" and rtype == "TXT":
            group[head[1]] = text.strip('"')
        elif len(head) == 2 and head[0] == "coo" and rtype == "PTR":
            coo[head[1]] = text
    return {m: (i, group.get(i), coo.get(i)) for i, m in ptr.items()}


def serves(port, zone, addr):
    """The server at port answers A www.<zone> with addr, authoritatively."""
    r = ask(port, "www." + zone, "A")
    return (r.rcode() == dns.rcode.NOERROR and bool(r.flags & dns.flags.AA)
            and any(rd.to_text() == addr for rs in r.answer for rd in rs))


def gone(port, zone):
    r = ask(port, zone, "SOA")
    return r.rcode() != dns.rcode.NOERROR or not (r.flags & dns.flags.AA)


def converge(peers, fn, what):
    """Wait until fn(peer) holds for every peer, polling them together; print the seconds each
    took from now."""
    t0, took = time.monotonic(), {}
    while len(took) < len(peers) and time.monotonic() - t0 < CONVERGE:
        for peer in peers:
            try:
                if peer.name not in took and fn(peer):
                    took[peer.name] = time.monotonic() - t0
            except (dns.exception.DNSException, OSError):
                pass
        time.sleep(0.02)
    late = [p.name for p in peers if p.name not in took]
    expect(not late, "%s: not within %.0f s for %s" % (what, CONVERGE, ", ".join(late)))
    print("%s: %s" % (what, ", ".join("%s %.2f s" % kv for kv in sorted(took.items()))))


class CatNamed(Named):
    """servers.Named, the secondary of catalog.invalid from tern, with catalog-zones on it."""

    def __init__(self, workdir):
        self.primary = None  # tern's port, set before start()
        super().__init__(workdir, [])

    def command(self):
        self.secondaries = [(CATALOG, self.primary)]
        argv = super().command()
        d, conf = self.dir, os.path.join(self.dir, "named.conf")
        os.makedirs(os.path.join(d, "catz"), exist_ok=True)
        with open(conf) as f:
            text = f.read()
        catz = f"""options {{
    catalog-zones {{
        zone "{CATALOG}" default-primaries {{ {LOOPBACK} port {self.primary}; }}
            zone-directory "{d}/catz" in-memory yes min-update-interval 1;
    }};
"""
        expect("options {\n" in text, "servers.Named's named.conf changed shape")
        with open(conf, "w") as f:
            f.write(text.replace("options {\n", catz, 1))
        return argv


class CatKnot(Server):
    """knotd interpreting catalog.invalid from tern; group blue's members from template blue,
    whose zone files (written at once) land in blue/."""

    name = "knot"

    def __init__(self, workdir):
        self.primary = None
        super().__init__(workdir, [])

    def command(self):
        d, p = self.dir, self.primary
        os.makedirs(os.path.join(d, "blue"), exist_ok=True)
        os.makedirs(os.path.join(d, "db"), exist_ok=True)  # the catalog database lives there
        conf = os.path.join(d, "knot.conf")
        with open(conf, "w") as f:
            f.write(knot_conf_head(d, self.port, log="info"))
            f.write(f"""remote:
  - id: tern
    address: {LOOPBACK}@{p}
acl:
  - id: from_tern
    address: {LOOPBACK}
    action: notify
  - id: xfr_out
    address: {LOOPBACK}
    action: transfer
template:
  - id: default
    storage: "{d}"
    master: tern
    acl: [from_tern, xfr_out]
    zonefile-sync: -1
    zonefile-load: none
    journal-content: none
  - id: blue
    storage: "{d}/blue"
    file: "{d}/blue/%s.zone"
    master: tern
    acl: [from_tern, xfr_out]
    zonefile-sync: 0
    journal-content: none
zone:
  - domain: {CATALOG}
    catalog-role: interpret
    catalog-template: [default, blue]
""")
        return [find_program("knotd"), "-c", conf]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    for prog in ("named", "knotd", "redis-server"):
        if not find_program(prog):
            print("SKIP: %s not installed" % prog)
            return 77
    work = tempfile.mkdtemp(prefix="tern-catprod-")
    for z, a in (("a.test", "192.0.2.1"), ("b.test", "192.0.2.2")):
        write_atomic(os.path.join(work, z + ".zone"), zone_text(z, a))
    redis = Redis(work)
    named = CatNamed(work)
    knot = CatKnot(work)
    xfr = "    allow_transfer: [%s]\n" % LOOPBACK
    api_port = free_port()
    api = Api("http://%s:%d" % (LOOPBACK, api_port))

    def tern_yaml(with_b=True, r2=False):
        y = ('redis:\n  address: "%s:%d"\n  connect_timeout: 500\n' % (LOOPBACK, redis.port)
             + 'api:\n  listen: "%s:%d"\n  keys: [{name: ops, key: "%s"}]\n'
             % (LOOPBACK, api_port, OPS)
             + "catalogs:\n  - origin: %s\n    members: all\n" % CATALOG + xfr
             + '    notify: ["%s@%d", "%s@%d"]\n' % (LOOPBACK, named.port, LOOPBACK, knot.port)
             + "zones:\n"
             + '  - origin: a.test\n    file: "%s/a.test.zone"\n' % work + xfr
             + "    catalog_group: blue\n")
        if with_b:
            y += ('  - origin: b.test\n    file: "%s/b.test.zone"\n' % work + xfr
                  + "    catalog_coo: new-catalog.invalid.\n")
        y += "  - origin: r1.test\n" + xfr + "    catalog_group: blue\n"
        if r2:
            y += "  - origin: r2.test\n" + xfr
        y += "  - origin: api.test\n" + xfr  # its transfer settings, for when the API makes it
        return y

    tern = YamlTernd(work, args.ternd, tern_yaml())
    named.primary = knot.primary = tern.port
    results, state = [], {}
    try:
        redis.start()
        redis.put_zone("r1.test.", {"@": {"ns": {"records": [{"host": "ns1.r.test."}]}},
                                    "www": {"a": {"records": [{"ip": "192.0.2.11"}]}}}, SOA)
        tern.start(CATALOG)
        wait_until(lambda: "r1.test." in members(xfr_rrs(tern.port, CATALOG)), CONVERGE,
                   "r1.test in the catalog")
        named.start(CATALOG)
        knot.start("a.test.")  # a member served: the catalog was interpreted
        want = {"a.test.": "192.0.2.1", "b.test.": "192.0.2.2", "r1.test.": "192.0.2.11"}

        def catalog_content():
            rrs = xfr_rrs(tern.port, CATALOG)
            kinds = {(n, t) for n, t, _ in rrs}
            expect((CATALOG, "NS") in kinds and ("version." + CATALOG, "TXT") in kinds,
                   "no NS or version: %s" % rrs)
            expect(("version." + CATALOG, "TXT", '"2"') in rrs, "version is not 2: %s" % rrs)
            expect((CATALOG, "NS", "invalid.") in rrs, "NS is not invalid.: %s" % rrs)
            m = members(rrs)
            expect(set(m) == set(want), "members %s, want %s" % (sorted(m), sorted(want)))
            expect(m["a.test."][1] == "blue" and m["r1.test."][1] == "blue"
                   and m["b.test."][1] is None, "groups: %s" % m)
            expect(m["b.test."][2] == "new-catalog.invalid." and m["a.test."][2] is None,
                   "coo: %s" % m)
            ids = {v[0] for v in m.values()}
            expect(len(ids) == 3 and all(len(i) == 16 and int(i, 16) >= 0 for i in ids),
                   "ids: %s" % ids)
            state["ids"] = {k: v[0] for k, v in m.items()}
            state["serial"] = serial_of(tern.port)

        def provisions(server):
            def check():
                for z, a in want.items():
                    wait_until(lambda: serves(server.port, z, a), CONVERGE,
                               "%s serving %s" % (server.name, z))
                    r = ask(server.port, z, "SOA")
                    expect(r.flags & dns.flags.AA and r.answer, "%s: SOA of %s: %s"
                           % (server.name, z, r))
            return check

        def group_reaches_peers():
            for server in (named, knot):
                m = members(xfr_rrs(server.port, CATALOG))
                expect(m.get("a.test.", (0, None))[1] == "blue"
                       and m.get("r1.test.", (0, None))[1] == "blue",
                       "%s's copy of the catalog: %s" % (server.name, m))
            for z in ("a.test", "r1.test"):
                path = os.path.join(knot.dir, "blue", z + ".zone")
                wait_until(lambda: os.path.exists(path), CONVERGE, "knot's %s from template blue"
                           % z)
            expect(not os.path.exists(os.path.join(knot.dir, "blue", "b.test.zone")),
                   "b.test (no group) was built from template blue")

        def sighup_removes():
            old = serial_of(tern.port)
            tern.yaml = tern_yaml(with_b=False)
            tern.command()  # writes the config again
            tern.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: serial_of(tern.port) != old, CONVERGE, "a new catalog serial")
            diff = xfr_rrs(tern.port, CATALOG, "IXFR", old)
            bid = state["ids"]["b.test."]
            body = [r for r in diff if r[1] != "SOA"]
            want_gone = {("%s.zones.%s" % (bid, CATALOG), "PTR", "b.test."),
                         ("coo.%s.zones.%s" % (bid, CATALOG), "PTR", "new-catalog.invalid.")}
            soas = [r for r in diff if r[1] == "SOA"]
            expect(len(soas) == 4 and set(body) == want_gone,
                   "IXFR from %d is not the removal of b.test: %s" % (old, diff))
            converge((named, knot), lambda p: gone(p.port, "b.test."), "b.test removed (SIGHUP)")
            for server in (named, knot):
                expect(serves(server.port, "a.test.", "192.0.2.1"), "%s lost a.test"
                       % server.name)

        def redis_add_remove():
            tern.yaml = tern_yaml(with_b=False, r2=True)
            tern.command()
            tern.proc.send_signal(signal.SIGHUP)
            redis.put_zone("r2.test.", {"@": {"ns": {"records": [{"host": "ns1.r.test."}]}},
                                        "www": {"a": {"records": [{"ip": "192.0.2.12"}]}}}, SOA)
            for server in (named, knot):
                wait_until(lambda: serves(server.port, "r2.test.", "192.0.2.12"), CONVERGE,
                           "%s serving r2.test from Redis" % server.name)
            redis.cmd("SREM", "redins:zones", "r1.test.")
            wait_until(lambda: "r1.test." not in members(xfr_rrs(tern.port, CATALOG)), CONVERGE,
                       "r1.test out of the catalog")
            converge((named, knot), lambda p: gone(p.port, "r1.test."), "r1.test removed (SREM)")
            state["ids"] = {k: v[0] for k, v in members(xfr_rrs(tern.port, CATALOG)).items()}

        def api_add_remove():
            wait_api(api)
            body = {"name": "api.test.", "kind": "Native", "nameservers": ["ns1.api.test."],
                    "rrsets": [{"name": "www.api.test.", "type": "A", "ttl": 60,
                                "records": [{"content": "192.0.2.13", "disabled": False}]}]}
            api.json("POST", ZONES, 201, body=body)
            converge((named, knot), lambda p: serves(p.port, "api.test.", "192.0.2.13"),
                     "api.test created (POST)")
            api.json("DELETE", ZONES + "/api.test.", 204)
            converge((named, knot), lambda p: gone(p.port, "api.test."),
                     "api.test deleted (DELETE)")

        def no_churn():
            old = serial_of(tern.port)
            tern.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: tern.log_text(400000).count("reload #") >= 3, CONVERGE,
                       "the third reload")
            time.sleep(1.0)
            expect(serial_of(tern.port) == old, "the catalog's serial moved from %d to %d"
                   % (old, serial_of(tern.port)))

        def restart_stable():
            old = serial_of(tern.port)
            tern.stop()
            tern.start(CATALOG)
            m = members(xfr_rrs(tern.port, CATALOG))
            expect({k: v[0] for k, v in m.items()} == state["ids"],
                   "ids after a restart: %s, before %s" % (m, state["ids"]))
            new = serial_of(tern.port)
            expect((new - old) % 2**32 < 2**31, "serial went back: %d -> %d" % (old, new))

        checks = [("catalog_content", catalog_content),
                  ("bind_provisions", provisions(named)),
                  ("knot_provisions", provisions(knot)),
                  ("group_reaches_peers", group_reaches_peers),
                  ("sighup_removes", sighup_removes),
                  ("redis_add_remove", redis_add_remove),
                  ("api_add_remove", api_add_remove),
                  ("no_churn", no_churn),
                  ("restart_stable", restart_stable)]
        run_checks(results, checks, args.only)
    finally:
        for s in (named, knot):
            s.stop()
        tern.stop()
        redis.stop()
        if any(err for _, err in results):
            for s in (named, knot):
                print("---- %s\n%s" % (s.name, s.log_text(3000)))
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("kept", work)
    return finish(tern, results)


if __name__ == "__main__":
    sys.exit(main())
