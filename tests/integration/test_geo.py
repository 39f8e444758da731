#!/usr/bin/python3
"""Geo-steered answers end to end: a redins-schema JSON zone, MaxMind DB fixtures, an ASN table.

Generates the .mmdb fixtures (tests/data/make_mmdb.pl, Debian's libmaxmind-db-writer-perl) and a
tiny ASN table (ternctl asn compile), starts one ternd serving a JSON zone with every filter, and
queries it over UDP and TCP with EDNS Client Subnet options from different countries, networks
and ASNs (dnspython):

  - country / asn / asn+country filters pick the client's records, else the fallback records;
  - location picks the nearest record (record coordinates come from the same database);
  - the ECS scope in each response is the prefix the decision depended on (the database's
    network, the ASN range), 0 for plain data and for a source prefix of 0;
  - no ECS option in the query: none in the response, the packet's source address decides;
  - weighted single answers follow the weights (never a zero-weight record), rr rotates;
  - IPv6 clients are located through the IPv6 data;
  - asn_db: a second ternd given a MaxMind ASN database (GeoLite2-ASN-like, from make_mmdb.pl)
    compiles it beside the .mmdb and steers by it; after the database is replaced by rename with
    a release mapping the client's network to another ASN, SIGHUP changes the answer; a
    truncated replacement fails the reload and the last table keeps answering.

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded; only the ternd started here is stopped.

    test_geo.py --ternd build/ternd --ternctl build/ternctl
"""

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import dns.edns
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, Failure, Ternd, clean_exit_result, expect, run_check  # noqa: E402

ORIGIN = "geo.test."
TIMEOUT = 2.0

# ASN ranges (ip-location-db CSV): 81.2.69.0/24 is AS64500 (so London clients have an ASN),
# 10.1.0.0/16 AS64501, 2a02:1234::/32 AS64502.
ASN_CSV = """81.2.69.0,81.2.69.255,64500,"Example London"
10.1.0.0,10.1.255.255,64501,"Example Ten"
2a02:1234::,2a02:1234:ffff:ffff:ffff:ffff:ffff:ffff,64502,"Example Stockholm"
"""


def zone_json():
    def ip(addr, **kw):
        r = {"ip": addr}
        r.update(kw)
        return r

    soa = {"ttl": 300, "ns": "ns1.geo.test.", "MBox": "hostmaster.geo.test.", "refresh": 3600,
           "retry": 600, "expire": 86400, "minttl": 60, "serial": 2024010101}
    records = {
        "@": {"ns": {"ttl": 3600, "records": [{"host": "ns1.geo.test."}]}},
        "ns1": {"a": {"ttl": 3600, "records": [ip("192.0.2.53")]}},
        "plain": {"a": {"ttl": 60, "records": [ip("192.0.2.100"), ip("192.0.2.101")]}},
        "country": {"a": {"ttl": 60, "filter": {"count": "multi", "order": "none",
                                                 "geo_filter": "country"},
                          "records": [ip("192.0.2.1", country="AU"),
                                      ip("192.0.2.2", country=["GB", "IE"]),
                                      ip("192.0.2.3")]},
                    "aaaa": {"ttl": 60, "filter": {"geo_filter": "country"},
                             "records": [ip("2001:db8::1", country="SE"),
                                         ip("2001:db8::2", country="")]}},
        "asn": {"a": {"ttl": 60, "filter": {"geo_filter": "asn"},
                      "records": [ip("192.0.2.11", asn=64500), ip("192.0.2.12", asn=[64501, 1]),
                                  ip("192.0.2.13", asn=0)]}},
        "both": {"a": {"ttl": 60, "filter": {"geo_filter": "asn+country"},
                       "records": [ip("192.0.2.21", asn=64500, country="GB"),
                                   ip("192.0.2.22", asn=64500, country="AU"),
                                   ip("192.0.2.23", asn=64501)]}},
        # record coordinates come from the database: 1.2.3.10 is Brisbane, 81.2.69.130 London
        "near": {"a": {"ttl": 60, "filter": {"count": "single", "geo_filter": "location"},
                       "records": [ip("1.2.3.10"), ip("81.2.69.130")]}},
        "wrr": {"a": {"ttl": 60, "filter": {"count": "single", "order": "weighted"},
                      "records": [ip("192.0.2.31", weight=1), ip("192.0.2.32", weight=0),
                                  ip("192.0.2.33", weight=3)]}},
        "rr": {"a": {"ttl": 60, "filter": {"count": "multi", "order": "rr"},
                     "records": [ip("192.0.2.41"), ip("192.0.2.42"), ip("192.0.2.43")]}},
        "alias": {"cname": {"ttl": 60, "host": "country.geo.test."}},
    }
    return {"config": {"soa": soa}, "records": records}


class Client:
    def __init__(self, port):
        self.port = port

    def ask(self, name, rtype="A", ecs=None, tcp=False):
        """(addresses in answer order, ecs option of the response or None, response)."""
        opts = []
        if ecs is not None:
            addr, plen = ecs
            opts.append(dns.edns.ECSOption(addr, plen))
        q = dns.message.make_query(name, rtype, use_edns=0, options=opts)
        if tcp:
            r = dns.query.tcp(q, LOOPBACK, port=self.port, timeout=TIMEOUT)
        else:
            r = dns.query.udp(q, LOOPBACK, port=self.port, timeout=TIMEOUT)
        expect(r.rcode() == dns.rcode.NOERROR, "%s %s: rcode %s" % (name, rtype,
                                                                     dns.rcode.to_text(r.rcode())))
        addrs = []
        for rrset in r.answer:
            if rrset.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
                addrs.extend(rd.address for rd in rrset)
        opt = None
        for o in r.options:
            if isinstance(o, dns.edns.ECSOption):
                opt = o
        return addrs, opt, r


def check_pick(c, name, ecs, want, scope, rtype="A", tcp=False):
    addrs, opt, _ = c.ask(name, rtype, ecs, tcp)
    expect(addrs == want, "%s %s from %s: got %s, want %s" % (name, rtype, ecs, addrs, want))
    if ecs is None:
        expect(opt is None, "%s: ECS in the response to a query without one" % name)
    else:
        expect(opt is not None, "%s from %s: no ECS option in the response" % (name, ecs))
        if scope is None:  # an unknown address: the not-found network, at most the source's
            expect(opt.scopelen <= ecs[1], "%s from %s: scope /%d is longer than the source"
                   % (name, ecs, opt.scopelen))
        else:
            expect(opt.scopelen == scope, "%s from %s: scope /%d, want /%d"
                   % (name, ecs, opt.scopelen, scope))


def run_checks(c):
    results = []

    def check(name, fn):
        run_check(results, name, fn)

    au, gb, se = ("1.2.3.0", 24), ("81.2.69.128", 26), ("2a02:1234:5678::", 48)
    check("country AU", lambda: check_pick(c, "country.geo.test", au, ["192.0.2.1"], 24))
    check("country GB (list), TCP",
          lambda: check_pick(c, "country.geo.test", gb, ["192.0.2.2"], 26, tcp=True))
    check("country unknown: fallback", lambda: check_pick(
        c, "country.geo.test", ("10.1.2.0", 24), ["192.0.2.3"], None))
    check("country: no ECS, source 127.0.0.1", lambda: check_pick(
        c, "country.geo.test", None, ["192.0.2.3"], 0))
    check("country: source prefix 0", lambda: check_pick(
        c, "country.geo.test", ("0.0.0.0", 0), ["192.0.2.3"], 0))
    check("country AAAA from SE (IPv6 client)", lambda: check_pick(
        c, "country.geo.test", se, ["2001:db8::1"], 32, rtype="AAAA"))
    check("country AAAA from AU: \"\" fallback", lambda: check_pick(
        c, "country.geo.test", au, ["2001:db8::2"], 24, rtype="AAAA"))
    # an IPv4 client in an IPv6 option (::ffff:1.2.3.0/120) is looked up as IPv4: its /24 is a
    # /120 in the option's family (RFC 7871 §6)
    check("country AU, IPv4-mapped in family 2: scope /120", lambda: check_pick(
        c, "country.geo.test", ("::ffff:1.2.3.0", 120), ["192.0.2.1"], 120))
    check("CNAME to a steered name", lambda: check_pick(
        c, "alias.geo.test", au, ["192.0.2.1"], 24))
    check("asn 64500", lambda: check_pick(c, "asn.geo.test", gb, ["192.0.2.11"], 24))
    check("asn 64501 (list)", lambda: check_pick(
        c, "asn.geo.test", ("10.1.2.0", 24), ["192.0.2.12"], 16))
    # 1.2.3.0 is in no range: the gap 0.0.0.0-10.0.255.255 holds it, /5 (0.0.0.0/5) at most
    check("asn none: fallback", lambda: check_pick(c, "asn.geo.test", au, ["192.0.2.13"], 5))
    check("asn+country GB in AS64500", lambda: check_pick(c, "both.geo.test", gb,
                                                          ["192.0.2.21"], 26))
    check("asn+country: AS-less AU client", lambda: check_pick(
        c, "both.geo.test", au, ["192.0.2.22"], 24))
    check("location: Brisbane client", lambda: check_pick(c, "near.geo.test", au,
                                                          ["1.2.3.10"], 24))
    check("location: London client", lambda: check_pick(c, "near.geo.test", gb,
                                                        ["81.2.69.130"], 26))
    check("location: Stockholm (IPv6) client", lambda: check_pick(c, "near.geo.test", se,
                                                                  ["81.2.69.130"], 32))
    check("location: unknown client keeps all", lambda: check_pick(
        c, "near.geo.test", ("10.1.2.0", 24), ["1.2.3.10"], None))
    check("plain data: scope 0", lambda: check_pick(
        c, "plain.geo.test", au, ["192.0.2.100", "192.0.2.101"], 0))

    def weighted():
        n = 400
        seen = collections.Counter()
        for _ in range(n):
            addrs, opt, _ = c.ask("wrr.geo.test", "A", au)
            expect(len(addrs) == 1, "weighted single: %s" % addrs)
            expect(opt.scopelen == 0, "weighted without geo filter: scope %d" % opt.scopelen)
            seen[addrs[0]] += 1
        expect(seen["192.0.2.32"] == 0, "a zero-weight record was chosen: %s" % dict(seen))
        share = seen["192.0.2.33"] / n  # expected 0.75; 400 draws: sd 0.022, bounds ~5 sd
        expect(0.63 < share < 0.87, "weight 3 of 4 chosen %.2f of the time: %s"
               % (share, dict(seen)))

    check("weighted single (400 queries)", weighted)

    def rotation():
        firsts = collections.Counter()
        for _ in range(150):
            addrs, _, _ = c.ask("rr.geo.test", "A")
            expect(sorted(addrs) == ["192.0.2.41", "192.0.2.42", "192.0.2.43"],
                   "rr multi returned %s" % addrs)
            i = ["192.0.2.41", "192.0.2.42", "192.0.2.43"].index(addrs[0])
            rot = ["192.0.2.41", "192.0.2.42", "192.0.2.43"][i:] + \
                ["192.0.2.41", "192.0.2.42", "192.0.2.43"][:i]
            expect(addrs == rot, "not a rotation: %s" % addrs)
            firsts[addrs[0]] += 1
        expect(len(firsts) == 3 and min(firsts.values()) >= 20,
               "rr starts unevenly: %s" % dict(firsts))

    check("rr multi rotates (150 queries)", rotation)
    return results


def wait_for(pred, what, timeout=5.0):
    """Poll pred() (every 50 ms) until it is true; Failure(what) after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise Failure(what)
        time.sleep(0.05)


def asn_db_checks(args, work, data, zone):
    """A ternd with asn_db (no asn_table): the compiled cache, steering, a new release, a bad one."""
    d = os.path.join(work, "asn_db")
    os.makedirs(d)
    db = os.path.join(d, "GeoLite2-ASN.mmdb")
    cache = db + ".tern-asn"
    shutil.copy(os.path.join(data, "asn_geolite.mmdb"), db)
    tern = Ternd(d, [(ORIGIN, zone)], args.ternd, extra_yaml='asn_db: "%s"\n' % db)
    results = []

    def check(name, fn):
        run_check(results, name, fn)

    def replace_db(src, cut=None):
        with open(src, "rb") as f:
            blob = f.read()
        with open(db + ".new", "wb") as f:
            f.write(blob[:cut] if cut else blob)
        os.replace(db + ".new", db)  # as geoipupdate does

    london = ("81.2.69.0", 24)  # AS64500 in asn_geolite.mmdb, AS64501 in asn_geolite_b.mmdb
    c = Client(tern.port)
    try:
        tern.start(ORIGIN)
        check("asn_db: compiled beside the .mmdb", lambda: expect(
            os.path.exists(cache) and "compiled into %s" % cache in tern.log_text(),
            "no %s or no compile line in the log:\n%s" % (cache, tern.log_text())))
        check("asn_db: ternctl asn lookup on the cache", lambda: expect(
            "81.2.69.1 AS64500 - Example 64500" in subprocess.run(
                [args.ternctl, "asn", "lookup", cache, "81.2.69.1"], capture_output=True,
                text=True, timeout=30).stdout, "ternctl asn lookup %s 81.2.69.1" % cache))
        check("asn_db: AS64500 from the .mmdb", lambda: check_pick(
            c, "asn.geo.test", london, ["192.0.2.11"], 24))
        check("asn_db: no ASN in the .mmdb: fallback", lambda: check_pick(
            c, "asn.geo.test", ("1.2.3.0", 24), ["192.0.2.13"], None))

        def new_release():
            replace_db(os.path.join(data, "asn_geolite_b.mmdb"))
            tern.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: c.ask("asn.geo.test", "A", london)[0] == ["192.0.2.12"],
                     "the answer did not change after SIGHUP:\n%s" % tern.log_text())
            check_pick(c, "asn.geo.test", london, ["192.0.2.12"], 24)

        check("asn_db: replaced + SIGHUP: AS64501", new_release)

        def bad_release():
            replace_db(os.path.join(data, "asn_geolite.mmdb"), cut=1000)
            tern.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "failed: asn_db: %s: not a valid MaxMind DB file" % db
                     in tern.log_text(), "no failed reload in the log:\n%s" % tern.log_text())
            check_pick(c, "asn.geo.test", london, ["192.0.2.12"], 24)

        check("asn_db: truncated + SIGHUP: old table kept", bad_release)
        tern.stop()
        r = clean_exit_result(tern)
        if r:
            results.append(r)
    finally:
        tern.stop()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--ternctl", default=os.environ.get("TERNCTL"))
    args = ap.parse_args()
    if not args.ternd or not args.ternctl:
        ap.error("--ternd and --ternctl are required")
    work = tempfile.mkdtemp(prefix="tern-geo-")
    tern = None
    try:
        data = os.path.join(work, "data")
        os.makedirs(data)
        subprocess.run(["perl", servers.MAKE_MMDB, data], check=True, timeout=60)
        csv = os.path.join(data, "asn.csv")
        with open(csv, "w") as f:
            f.write(ASN_CSV)
        table = os.path.join(data, "asn.bin")
        subprocess.run([args.ternctl, "asn", "compile", "-o", table, csv], check=True,
                       timeout=60, stdout=subprocess.DEVNULL)
        zone = os.path.join(data, "geo.json")
        with open(zone, "w") as f:
            json.dump(zone_json(), f, indent=1)
        extra = 'geoip_db: "%s"\nasn_table: "%s"\n' % (os.path.join(data, "nested6.mmdb"), table)
        tern = Ternd(work, [(ORIGIN, zone)], args.ternd, extra_yaml=extra)
        tern.start(ORIGIN)
        results = run_checks(Client(tern.port))
        results += asn_db_checks(args, work, data, zone)
        out = subprocess.run([args.ternctl, "geoip", "lookup", os.path.join(data, "nested6.mmdb"),
                              "81.2.69.130"], capture_output=True, text=True, timeout=30)
        want = "country GB location 51.5142,-0.0931 network /26"
        results.append(("ternctl geoip lookup",
                        None if out.returncode == 0 and want in out.stdout
                        else "got %r %r, want %r" % (out.stdout, out.stderr, want)))
        tern.stop()
        return servers.finish(tern, results)
    finally:
        if tern is not None:
            tern.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
