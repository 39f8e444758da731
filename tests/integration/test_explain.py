#!/usr/bin/python3
"""`ternctl explain` against the real ternd: its answer is the workers' answer, and it says why.

One ternd serves a redins JSON zone with steered RRsets (geo.test: by country, by ASN, by
ASN+country, by location, weighted, health-checked, a CNAME to a steered name), a signed JSON
zone (sig.test, keys from `ternctl dnssec keygen`), and a zone file with a DNAME into geo.test
(chain.test), over the MaxMind DB fixtures of tests/data/make_mmdb.pl and a tiny ASN table. The
global acl refuses 198.51.100.0/24; redins' rate limit (1 a minute, no burst) and RRL (1 a second)
are on, with 127.0.0.1 (where the queries below come from) whitelisted.

  many_clients  200 ECS prefixes, each asked of country, asn, both and near (order none, so the
                answer is deterministic): explain's records and ECS scope equal the server's own
                response to the same query from loopback (dnspython with the ECS option);
                weighted: what the server answers is among the records explain gives a chance
  signed        explain --do on sig.test: the zone is signed, the plain RRset's RRSIG was made
                ahead, the key tags are the keygen ZSK's; a steered subset and NXDOMAIN's NSEC
                are made per query, then found in the explain context's cache the second time
  fail_open     every record of a health-checked RRset forced down: explain says fail open and
                gives all records, as the server does
  dname         a name below chain.test's DNAME: the DNAME hop, the CNAME into geo.test, the
                steered RRset there, and the records equal the server's
  acl           a client in the acl's deny list: refused, by the global acl
  not_charged   explain for one client many times: the rate limit (1/min) and RRL would have
                stopped the second if they had been charged; every explain says pass
  text          the human form has the same facts as lines

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded; only the ternd started here is stopped.

    test_explain.py --ternd build/ternd --ternctl build/ternctl
"""

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import dns.edns
import dns.message
import dns.query
import dns.rdatatype

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, YamlTernd, expect, run_check  # noqa: E402

from test_geo import ASN_CSV  # noqa: E402  (the same ASN ranges as test_geo's fixtures)

TIMEOUT = 2.0
SOA = {"ttl": 300, "ns": "ns1.geo.test.", "MBox": "hostmaster.geo.test.", "refresh": 3600,
       "retry": 600, "expire": 86400, "minttl": 60, "serial": 2024010101}


def ip(addr, **kw):
    r = {"ip": addr}
    r.update(kw)
    return r


def geo_zone(closed_port):
    hc = {"enable": True, "protocol": "http", "port": closed_port, "uri": "/", "up_count": 1,
          "down_count": 1, "timeout": 200}
    return {"config": {"soa": SOA}, "records": {
        "@": {"ns": {"ttl": 3600, "records": [{"host": "ns1.geo.test."}]}},
        "ns1": {"a": {"ttl": 3600, "records": [ip("192.0.2.53")]}},
        "country": {"a": {"ttl": 60, "filter": {"count": "multi", "order": "none",
                                                 "geo_filter": "country"},
                          "records": [ip("192.0.2.1", country="AU"),
                                      ip("192.0.2.2", country=["GB", "IE"]),
                                      ip("192.0.2.3", country="SE"), ip("192.0.2.4")]}},
        "asn": {"a": {"ttl": 60, "filter": {"order": "none", "geo_filter": "asn"},
                      "records": [ip("192.0.2.11", asn=64500), ip("192.0.2.12", asn=[64501, 1]),
                                  ip("192.0.2.13", asn=0)]}},
        "both": {"a": {"ttl": 60, "filter": {"order": "none", "geo_filter": "asn+country"},
                       "records": [ip("192.0.2.21", asn=64500, country="GB"),
                                   ip("192.0.2.22", asn=64500, country="AU"),
                                   ip("192.0.2.23", asn=64501)]}},
        "near": {"a": {"ttl": 60, "filter": {"count": "single", "order": "none",
                                              "geo_filter": "location"},
                       "records": [ip("1.2.3.10"), ip("81.2.69.130"), ip("89.160.20.112")]}},
        "wrr": {"a": {"ttl": 60, "filter": {"count": "single", "order": "weighted"},
                      "records": [ip("192.0.2.31", weight=1), ip("192.0.2.32", weight=0),
                                  ip("192.0.2.33", weight=3)]}},
        "hc": {"a": {"ttl": 5, "filter": {"count": "multi", "order": "none",
                                           "geo_filter": "country"},
                     "records": [ip("127.0.0.61", country="GB"), ip("127.0.0.62"),
                                 ip("127.0.0.63")],
                     "health_check": hc}},
        "alias": {"cname": {"ttl": 60, "host": "country.geo.test."}},
    }}


def sig_zone():
    soa = dict(SOA, ns="ns1.sig.test.", MBox="h.sig.test.")
    return {"config": {"soa": soa}, "records": {
        "@": {"ns": {"ttl": 3600, "records": [{"host": "ns1.sig.test."}]}},
        "ns1": {"a": {"ttl": 3600, "records": [ip("192.0.2.53")]}},
        "www": {"a": {"ttl": 60, "records": [ip("192.0.2.80")]}},
        "steer": {"a": {"ttl": 60, "filter": {"count": "multi", "order": "none",
                                               "geo_filter": "country"},
                        "records": [ip("192.0.2.81", country="GB"), ip("192.0.2.82")]}},
    }}


CHAIN_ZONE = """$ORIGIN chain.test.
@    300 IN SOA ns1.chain.test. h.chain.test. 1 3600 600 86400 60
@    300 IN NS  ns1.chain.test.
ns1  300 IN A   192.0.2.53
geo  300 IN DNAME geo.test.
"""


class Env:
    def __init__(self, tern, ternctl):
        self.tern = tern
        self.ternctl = ternctl

    def explain(self, *args):
        p = self.tern.ctl("explain", *args, "--json")
        expect(p.returncode == 0, "explain %s: exit %d %s" % (args, p.returncode, p.stderr))
        return json.loads(p.stdout)

    def explain_text(self, *args):
        p = self.tern.ctl("explain", *args)
        expect(p.returncode == 0, "explain %s: exit %d %s" % (args, p.returncode, p.stderr))
        return p.stdout

    def ask(self, name, rtype="A", ecs=None, do=False):
        opts = [dns.edns.ECSOption(*ecs)] if ecs else []
        q = dns.message.make_query(name, rtype, use_edns=0, options=opts, want_dnssec=do)
        r = dns.query.udp(q, LOOPBACK, port=self.tern.port, timeout=TIMEOUT)
        scope = 0
        for o in r.options:
            if isinstance(o, dns.edns.ECSOption):
                scope = o.scopelen
        addrs = [rd.address for rs in r.answer
                 if rs.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA) for rd in rs]
        return addrs, scope, r


def addrs_of(ex):
    """The A/AAAA addresses of explain's response, in answer order."""
    out = []
    for line in ex["response"]["answer"]:
        f = line.split()
        if f[3] in ("A", "AAAA"):
            out.append(f[4])
    return out


def prefixes(n):
    """n ECS prefixes over the fixture's networks (and some it does not know)."""
    rnd = random.Random(32)
    v4 = ["81.2.69.%d", "1.2.3.%d", "10.1.%d.0", "89.160.20.%d", "175.16.199.%d",
          "216.160.83.%d", "202.196.224.%d", "198.18.%d.0"]
    v6 = ["2a02:1234::%x", "2001:218::%x", "2001:db8::%x", "2a02:d300::%x"]
    out = []
    for i in range(n):
        if i % 5 == 4:
            out.append((rnd.choice(v6) % rnd.randrange(1, 0xffff), rnd.choice([32, 48, 56, 64])))
        else:
            a = rnd.choice(v4) % rnd.randrange(1, 255)
            out.append((a, rnd.choice([16, 20, 24, 28, 32])))
    return out


def check_many_clients(env):
    bad = []
    for addr, plen in prefixes(200):
        net = "%s/%d" % (addr, plen)
        for name in ("country.geo.test.", "asn.geo.test.", "both.geo.test.", "near.geo.test."):
            ex = env.explain(name, "A", "--client", "127.0.0.1", "--ecs", net)
            got, scope, _ = env.ask(name, ecs=(addr, plen))
            if addrs_of(ex) != got or ex["response"]["ecs_scope"] != scope:
                bad.append("%s from %s: explain %s scope %s, server %s scope %s"
                           % (name, net, addrs_of(ex), ex["response"]["ecs_scope"], got, scope))
            if not ex["selection"] or ex["selection"][0]["given"] != got:
                bad.append("%s from %s: selection %s" % (name, net, ex["selection"]))
    for addr, plen in prefixes(20):
        ex = env.explain("wrr.geo.test.", "--client", "127.0.0.1", "--ecs", "%s/%d" % (addr, plen))
        sel = ex["selection"][0]
        possible = {r["rdata"] for r in sel["record"] if r.get("probability_first", 0) > 0}
        expect(possible == {"192.0.2.31", "192.0.2.33"}, "wrr possible %s" % possible)
        got, _, _ = env.ask("wrr.geo.test.", ecs=(addr, plen))
        if len(got) != 1 or got[0] not in possible or addrs_of(ex)[0] not in possible:
            bad.append("wrr from %s/%d: server %s, explain %s" % (addr, plen, got, addrs_of(ex)))
    expect(not bad, "%d differences, first: %s" % (len(bad), bad[:3]))


def check_country_detail(env):
    ex = env.explain("country.geo.test.", "A", "--client", "127.0.0.1", "--ecs", "81.2.69.160/27")
    sel = ex["selection"][0]
    expect(sel["filter"] == "country" and sel["filter_1"]["client"] == "GB"
           and sel["filter_1"]["result"] == "matched", "filter %s" % sel)
    expect(sel["client"]["geo_prefix"] > 0 and sel["client"]["country"] == "GB", "client %s" % sel)
    fates = {r["rdata"]: r["fate"] for r in sel["record"]}
    expect(fates == {"192.0.2.1": "dropped by filter 1", "192.0.2.2": "given",
                     "192.0.2.3": "dropped by filter 1", "192.0.2.4": "dropped by filter 1"},
           "fates %s" % fates)
    expect(ex["zone"]["name"] == "geo.test." and ex["zone"]["serial"] == 2024010101
           and ex["zone"]["source"].endswith("geo.json"), "zone %s" % ex["zone"])
    ex = env.explain("near.geo.test.", "--client", "127.0.0.1", "--ecs", "81.2.69.160/27")
    dist = {r["rdata"]: r.get("distance_km") for r in ex["selection"][0]["record"]}
    expect(dist["81.2.69.130"] is not None and dist["81.2.69.130"] < dist["1.2.3.10"],
           "distances %s" % dist)
    ex = env.explain("nothere.geo.test.", "--client", "127.0.0.1")
    expect([s["step"] for s in ex["path"]] == ["lookup", "nxdomain"]
           and ex["response"]["rcode"] == "NXDOMAIN", "nxdomain path %s" % ex["path"])
    ex = env.explain("alias.geo.test.", "--client", "127.0.0.1", "--ecs", "1.2.3.0/24")
    steps = [s["step"] for s in ex["path"]]
    expect(steps == ["lookup", "cname", "lookup", "answer"], "cname path %s" % steps)
    expect(addrs_of(ex) == ["192.0.2.1"], "alias from AU: %s" % addrs_of(ex))


def zsk_tag(keys):
    for stem in keys:
        with open(stem + ".key") as f:
            text = f.read()
        if re.search(r"DNSKEY\s+256\s", text):
            return int(re.search(r"\+(\d+)$", stem).group(1))
    raise AssertionError("no ZSK among %s" % keys)


def check_signed(env, keys):
    tag = zsk_tag(keys)
    ex = env.explain("www.sig.test.", "A", "--client", "127.0.0.1", "--do")
    expect(ex["zone"]["signed"] is True, "zone %s" % ex["zone"])
    sigs = ex["dnssec"]
    expect(sigs and sigs[0]["signature"] == "made ahead by the loader", "sigs %s" % sigs)
    expect(tag in ex["response"]["rrsig_key_tags"], "tags %s, zsk %d"
           % (ex["response"]["rrsig_key_tags"], tag))
    _, _, r = env.ask("www.sig.test.", do=True)
    expect(any(rs.rdtype == dns.rdatatype.RRSIG for rs in r.answer), "server sent no RRSIG")
    for name, t in (("steer.sig.test.", "A"), ("none.sig.test.", "A")):
        first = env.explain(name, t, "--client", "127.0.0.1", "--do", "--ecs", "81.2.69.160/27")
        again = env.explain(name, t, "--client", "127.0.0.1", "--do", "--ecs", "81.2.69.160/27")
        h1 = [s["signature"] for s in first["dnssec"]]
        h2 = [s["signature"] for s in again["dnssec"]]
        expect(any("made now" in h for h in h1), "%s first: %s" % (name, h1))
        expect(all("made now" not in h for h in h2) and any("own cache" in h for h in h2),
               "%s again: %s" % (name, h2))
    ex = env.explain("www.sig.test.", "A", "--client", "127.0.0.1")
    expect(ex["dnssec"] == [] and not ex["response"]["rrsig_key_tags"], "no DO: %s" % ex["dnssec"])


def check_fail_open(env):
    for a in ("127.0.0.61", "127.0.0.62", "127.0.0.63"):
        p = env.tern.ctl("health", "set", a, "down")
        expect(p.returncode == 0, "health set: %s" % p.stderr)
    ex = env.explain("hc.geo.test.", "--client", "127.0.0.1", "--ecs", "81.2.69.160/27")
    sel = ex["selection"][0]
    expect(sel["fail_open"] is True and sel["after_health"] == 3, "health %s" % sel)
    expect(all(r["health"] == "down" and r.get("check_state") for r in sel["record"]),
           "records %s" % sel["record"])
    got, _, _ = env.ask("hc.geo.test.", ecs=("81.2.69.160", 27))
    expect(addrs_of(ex) == got == ["127.0.0.61"], "fail open: explain %s, server %s"
           % (addrs_of(ex), got))
    env.tern.ctl("health", "set", "127.0.0.61", "up")
    ex = env.explain("hc.geo.test.", "--client", "127.0.0.1", "--ecs", "1.2.3.0/24")
    sel = ex["selection"][0]
    expect(sel["fail_open"] is False and addrs_of(ex) == ["127.0.0.61"]
           and [r["fate"] for r in sel["record"]][1:] == ["dropped by health"] * 2,
           "one up: %s" % sel)


def check_dname(env):
    ex = env.explain("country.geo.chain.test.", "--client", "127.0.0.1", "--ecs",
                     "81.2.69.160/27")
    steps = [s["step"] for s in ex["path"]]
    expect(steps == ["lookup", "dname", "lookup", "answer"], "path %s" % ex["path"])
    expect(ex["path"][1]["target"] == "country.geo.test."
           and ex["path"][1]["dname_owner"] == "geo.chain.test.", "dname %s" % ex["path"][1])
    got, scope, _ = env.ask("country.geo.chain.test.", ecs=("81.2.69.160", 27))
    expect(addrs_of(ex) == got == ["192.0.2.2"] and ex["response"]["ecs_scope"] == scope,
           "records: explain %s, server %s" % (addrs_of(ex), got))


def check_acl(env):
    ex = env.explain("country.geo.test.", "--client", "198.51.100.7")
    p = ex["policy"]
    expect(p["client"] == "refuse" and p["client_rule"] == "the global acl"
           and p["client_acl_rule"] == "the client is in its deny list", "policy %s" % p)
    expect(ex["response"]["rcode"] == "REFUSED" and ex["path"] == [], "response %s" % ex)
    ex = env.explain("country.geo.test.", "--client", "198.51.101.7")
    expect(ex["policy"]["client"] == "pass", "other client %s" % ex["policy"])
    # chain.test's own acl: the zone's rule, and only for its names
    ex = env.explain("ns1.chain.test.", "--client", "198.51.102.9")
    p = ex["policy"]
    expect(p["client"] == "pass" and p["zone_acl"] == "refuse" and p["zone_acl_of"] == "chain.test."
           and p["zone_acl_rule"] == "the client is in its deny list"
           and ex["response"]["rcode"] == "REFUSED", "zone acl %s %s" % (p, ex["response"]))
    ex = env.explain("country.geo.test.", "--client", "198.51.102.9")
    expect(ex["policy"]["zone_acl"] == "pass" and addrs_of(ex), "geo.test for it %s" % ex)


def check_not_charged(env):
    for i in range(6):
        ex = env.explain("www.sig.test.", "--client", "203.0.113.9")
        p = ex["policy"]
        expect(p["client"] == "pass" and p["rrl"] == "pass" and p["rate_charged"] is False
               and p["rrl_charged"] is False, "explain %d: %s" % (i, p))
    ex = env.explain("www.sig.test.", "--client", "203.0.113.9", "--tcp")
    expect(ex["policy"]["rrl"] == "not applied (tcp)", "tcp %s" % ex["policy"])


def check_text(env):
    out = env.explain_text("country.geo.test.", "A", "--client", "127.0.0.1", "--ecs",
                           "81.2.69.160/27")
    for want in ("ok\n", "zone: name=geo.test. serial=2024010101", "path: step=lookup",
                 "filter_1: by=country client=GB result=matched", "record: rdata=192.0.2.2 "
                 "fate=given", "ecs_scope=26"):
        expect(want in out, "%r not in:\n%s" % (want, out))
    p = env.tern.ctl("explain", "country.geo.test.")
    expect(p.returncode == 2 and "usage" in p.stderr, "no --client: %d %s" % (p.returncode,
                                                                              p.stderr))
    p = env.tern.ctl("explain", "country.geo.test.", "BOGUS", "--client", "127.0.0.1")
    expect(p.returncode == 1 and "unknown type" in p.stderr, "bad type: %s" % p.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--ternctl", default=os.environ.get("TERNCTL"))
    ap.add_argument("--only", help="run only these checks (comma-separated)")
    args = ap.parse_args()
    if not args.ternd or not args.ternctl:
        ap.error("--ternd and --ternctl are required")
    work = tempfile.mkdtemp(prefix="tern-explain-")
    tern = None
    try:
        data = os.path.join(work, "data")
        os.makedirs(data)
        table = servers.geo_fixtures(args.ternctl, data, ASN_CSV)
        out = subprocess.run([args.ternctl, "dnssec", "keygen", "sig.test", "-d", data],
                             check=True, timeout=60, capture_output=True, text=True).stdout
        keys = [os.path.join(data, os.path.basename(s)) for s in out.split()]
        for name, z in (("geo.json", geo_zone(servers.free_port())), ("sig.json", sig_zone())):
            with open(os.path.join(data, name), "w") as f:
                json.dump(z, f, indent=1)
        with open(os.path.join(data, "chain.zone"), "w") as f:
            f.write(CHAIN_ZONE)
        yaml = ('geoip_db: "%s"\nasn_table: "%s"\nhealth: {check_interval_ms: 60000}\n'
                'acl: {deny: [198.51.100.0/24]}\n'
                'ratelimit: {rate: 1, burst: 0, whitelist: [127.0.0.1]}\n'
                'rrl: {rate: 1, whitelist: [127.0.0.1]}\n'
                'zones:\n  - origin: geo.test.\n    file: "%s"\n'
                '  - origin: sig.test.\n    file: "%s"\n    dnssec: {keys: [%s]}\n'
                '  - origin: chain.test.\n    file: "%s"\n'
                '    acl: {deny: [198.51.102.0/24]}\n'
                % (os.path.join(data, "nested6.mmdb"), table, os.path.join(data, "geo.json"),
                   os.path.join(data, "sig.json"), ", ".join('"%s"' % k for k in keys),
                   os.path.join(data, "chain.zone")))
        tern = YamlTernd(work, args.ternd, yaml, ternctl=args.ternctl)
        tern.start("geo.test.")
        env = Env(tern, args.ternctl)
        checks = [("many_clients", check_many_clients), ("detail", check_country_detail),
                  ("signed", lambda e: check_signed(e, keys)), ("fail_open", check_fail_open),
                  ("dname", check_dname), ("acl", check_acl), ("not_charged", check_not_charged),
                  ("text", check_text)]
        only = set(args.only.split(",")) if args.only else None
        results = []
        for name, fn in checks:
            if only is None or name in only:
                run_check(results, name, lambda fn=fn: fn(env))
        tern.stop()
        return servers.finish(tern, results)
    finally:
        if tern is not None:
            tern.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
