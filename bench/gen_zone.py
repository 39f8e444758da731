#!/usr/bin/python3
"""Deterministic benchmark zone and dnsperf query-file generator.

    /usr/bin/python3 bench/gen_zone.py --names 100000 --out bench/.cache/z100k

writes, for origin bench.test. (override with --origin):
    <out>/bench.test.zone     RFC 1035 master file (also valid for gdnsd, Knot, NSD, ldns)
    <out>/queries.txt         dnsperf data file (name type), shuffled
    <out>/nxflood.txt         random-subdomain NXDOMAIN flood (random labels 1-5 deep)
    <out>/manifest.json       what was generated (counts, seed, sample names for answer checks)

Same arguments, same bytes: everything comes from random.Random(seed).

Zone shape ("names" counts owner names, glue and chain targets included):
    apex            SOA, NS x2, MX x2, TXT, A, AAAA
    hosts ~84%      A (1-2 RRs), A+AAAA, or AAAA only
    mail   ~2%      MX x2 pointing at in-zone hosts
    txt    ~3%      TXT (SPF-like / verification strings)
    srv    ~2%      _sip._tcp.<x> SRV pointing at in-zone hosts
    cname  ~8%      CNAME chains of 1-3 hops ending at an A/AAAA host
    deleg  ~1%      NS delegations, half with in-bailiwick glue (A+AAAA)
    *.wild          a wildcard with A and AAAA (and an explicit sibling below it)

--mix rich (zone "1m-rich" of bench/load.py): the start-up mix of issue 34, ~1.9M records for 1M
names: AAAA on ~75% of hosts (A+AAAA 67%, AAAA only 8%), a second A on 45%, cname ~10%,
mail 3%, txt 4%, srv 3%; the rest as above.

Query mix (of --queries lines):
    75% existing A/AAAA, 10% A at the head of a CNAME chain, 5% wildcard hits,
    5% NXDOMAIN, 5% other: NODATA (AAAA at A-only host), MX, TXT, SRV, referrals.
"""

import argparse
import json
import os
import random
import string
import sys

ALNUM = string.ascii_lowercase + string.digits
WORDS = ("www api cdn img static mail app edge auth login shop blog docs m portal admin "
         "dev stage beta git vpn db cache search news video media files status").split()


def label(rng, lo=4, hi=10):
    return "".join(rng.choice(ALNUM) for _ in range(rng.randint(lo, hi)))


def ip4(rng):
    return "%d.%d.%d.%d" % (rng.randint(1, 223), rng.randint(0, 255), rng.randint(0, 255),
                            rng.randint(1, 254))


def ip6(rng):
    return "2001:db8:%x:%x::%x" % (rng.randint(0, 0xffff), rng.randint(0, 0xffff),
                                   rng.randint(1, 0xffff))


# Shares of the two mixes: hosts A-only / A+AAAA (the rest AAAA only), a second A, and the
# percentages of names given to each other kind.
MIXES = {
    "plain": dict(a_only=0.70, dual=0.92, a2=0.2, cname=8, srv=2, txt=3, mail=2),
    "rich": dict(a_only=0.25, dual=0.92, a2=0.45, cname=10, srv=3, txt=4, mail=3),
}


def generate(names, nqueries, origin, seed, out, mix="plain"):
    mx = MIXES[mix]
    rng = random.Random(seed)
    os.makedirs(out, exist_ok=True)
    origin = origin.rstrip(".") + "."
    o = origin

    lines = []
    w = lines.append
    w("$ORIGIN %s" % o)
    w("$TTL 3600")
    w("@ IN SOA ns1.%s hostmaster.%s 2024010101 7200 3600 1209600 300" % (o, o))
    w("@ IN NS ns1.%s" % o)
    w("@ IN NS ns2.%s" % o)
    w("@ IN MX 10 mx1.%s" % o)
    w("@ IN MX 20 mx2.%s" % o)
    w('@ IN TXT "v=spf1 mx -all"')
    w("@ IN A 192.0.2.1")
    w("@ IN AAAA 2001:db8::1")
    for n in ("ns1", "ns2", "mx1", "mx2"):
        w("%s IN A %s" % (n, ip4(rng)))
        w("%s IN AAAA %s" % (n, ip6(rng)))
    # wildcard, an explicit sibling under it, an empty non-terminal above a host
    w("*.wild IN A 192.0.2.80")
    w("*.wild IN AAAA 2001:db8::80")
    w("www.wild IN A 192.0.2.81")
    count = 1 + 4 + 2 + 1

    used = set(["ns1", "ns2", "mx1", "mx2", "wild", "*.wild", "www.wild"])

    def fresh():
        while True:
            r = rng.random()
            if r < 0.5:
                n = "%s-%s" % (rng.choice(WORDS), label(rng, 3, 8))
            elif r < 0.8:
                n = "%s.%s" % (rng.choice(WORDS), label(rng, 4, 10))
            else:
                n = label(rng, 5, 12)
            if n not in used and not n.startswith("_") and n.split(".")[-1] != "wild":
                used.add(n)
                return n

    a_only, aaaa_only, dual = [], [], []
    mail, txt, srv, chains, delegs = [], [], [], [], []

    remaining = names - count
    n_deleg = max(1, remaining // 100)
    n_cname = remaining * mx["cname"] // 100
    n_srv = remaining * mx["srv"] // 100
    n_txt = remaining * mx["txt"] // 100
    n_mail = remaining * mx["mail"] // 100
    # delegations with glue use 2 (or 3 with the child's ns) names; chains use ~2 names each
    n_hosts = remaining - n_deleg * 2 - n_cname - n_srv - n_txt - n_mail
    hosts = []
    for _ in range(n_hosts):
        n = fresh()
        r = rng.random()
        if r < mx["a_only"]:
            w("%s IN A %s" % (n, ip4(rng)))
            if rng.random() < mx["a2"]:
                w("%s IN A %s" % (n, ip4(rng)))
            a_only.append(n)
        elif r < mx["dual"]:
            w("%s IN A %s" % (n, ip4(rng)))
            if mix != "plain" and rng.random() < mx["a2"]:
                w("%s IN A %s" % (n, ip4(rng)))
            w("%s IN AAAA %s" % (n, ip6(rng)))
            dual.append(n)
        else:
            w("%s IN AAAA %s" % (n, ip6(rng)))
            aaaa_only.append(n)
        hosts.append(n)
    count += n_hosts
    for _ in range(n_mail):
        n = fresh()
        w("%s IN MX 10 %s" % (n, rng.choice(hosts)))
        w("%s IN MX 20 %s" % (n, rng.choice(hosts)))
        mail.append(n)
    count += n_mail
    for _ in range(n_txt):
        n = fresh()
        w('%s IN TXT "v=spf1 include:_spf.%s ~all" "site-verification=%s"' %
          (n, o, label(rng, 24, 32)))
        txt.append(n)
    count += n_txt
    for _ in range(n_srv):
        n = "_sip._tcp." + fresh()
        w("%s IN SRV 10 60 5060 %s" % (n, rng.choice(hosts)))
        srv.append(n)
    count += n_srv
    made = 0
    a_targets = a_only + dual
    while made < n_cname:
        hops = rng.choice((1, 1, 2, 3))
        chain = [fresh() for _ in range(hops)]
        end = rng.choice(a_targets) if rng.random() < 0.9 else rng.choice(a_only)
        for i, n in enumerate(chain):
            w("%s IN CNAME %s" % (n, chain[i + 1] if i + 1 < hops else end))
        chains.append(chain[0])
        made += hops
    count += made
    for i in range(n_deleg):
        n = "sub%d-%s" % (i, label(rng, 3, 6))
        used.add(n)
        if i % 2 == 0:
            w("%s IN NS ns.%s" % (n, n))
            w("ns.%s IN A %s" % (n, ip4(rng)))
            w("ns.%s IN AAAA %s" % (n, ip6(rng)))
            count += 2
        else:
            w("%s IN NS ns1.provider.example." % n)
            w("%s IN NS ns2.provider.example." % n)
            count += 1
        delegs.append(n)
    while count < names:  # top up with plain hosts to the exact name count
        n = fresh()
        w("%s IN A %s" % (n, ip4(rng)))
        a_only.append(n)
        count += 1

    zpath = os.path.join(out, origin + "zone")
    with open(zpath, "w") as f:
        f.write("\n".join(lines) + "\n")

    def fq(n):
        return n + "." + o

    q = []
    for _ in range(nqueries):
        r = rng.random()
        if r < 0.75:
            s = rng.random()
            if s < 0.55:
                q.append((fq(rng.choice(a_only)), "A"))
            elif s < 0.85:
                q.append((fq(rng.choice(dual)), rng.choice(("A", "AAAA"))))
            else:
                q.append((fq(rng.choice(aaaa_only)), "AAAA"))
        elif r < 0.85:
            q.append((fq(rng.choice(chains)), "A"))
        elif r < 0.90:
            q.append((label(rng, 3, 10) + ".wild." + o, rng.choice(("A", "A", "AAAA"))))
        elif r < 0.95:
            q.append(("nx-" + label(rng, 4, 10) + "." + o, "A"))
        else:
            s = rng.random()
            if s < 0.4:
                q.append((fq(rng.choice(a_only)), "AAAA"))  # NODATA
            elif s < 0.6:
                q.append((fq(rng.choice(mail)), "MX"))
            elif s < 0.75:
                q.append((fq(rng.choice(txt)), "TXT"))
            elif s < 0.85:
                q.append((fq(rng.choice(srv)), "SRV"))
            else:
                q.append(("www." + fq(rng.choice(delegs)), "A"))  # referral
    with open(os.path.join(out, "queries.txt"), "w") as f:
        f.write("".join("%s %s\n" % x for x in q))

    # Random-subdomain ("water torture") flood: 1-5 random labels under the origin, all NXDOMAIN
    # (the "nx" first label keeps them clear of the wildcard and of delegations).
    with open(os.path.join(out, "nxflood.txt"), "w") as f:
        for _ in range(nqueries):
            depth = rng.randint(1, 5)
            labs = [label(rng, 3, 12) for _ in range(depth - 1)] + ["nx" + label(rng, 3, 8)]
            f.write("%s.%s %s\n" % (".".join(labs), o, rng.choice(("A", "A", "AAAA"))))

    manifest = {
        "origin": origin, "seed": seed, "mix": mix, "names": count, "queries": nqueries,
        "zone": zpath, "lines": len(lines),
        "samples": {
            "a": fq(a_only[0]), "dual": fq(dual[0]), "aaaa": fq(aaaa_only[0]),
            "cname": fq(chains[0]), "wild": "xyz.wild." + o, "nx": "nx-none." + o,
            "mx": fq(mail[0]), "txt": fq(txt[0]), "srv": fq(srv[0]),
            "deleg_glue": "www." + fq(delegs[0]), "deleg": "www." + fq(delegs[1]),
        },
    }
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--names", type=int, default=100000)
    ap.add_argument("--queries", type=int, default=None,
                    help="query lines (default: min(names, 200000))")
    ap.add_argument("--origin", default="bench.test.")
    ap.add_argument("--seed", type=int, default=20240101)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mix", default="plain", choices=sorted(MIXES))
    a = ap.parse_args()
    if a.names < 1000:
        sys.exit("gen_zone: --names must be >= 1000")
    m = generate(a.names, a.queries or min(a.names, 200000), a.origin, a.seed, a.out, a.mix)
    print("gen_zone: %d names, %d zone lines, %d queries -> %s" %
          (m["names"], m["lines"], m["queries"], a.out))


if __name__ == "__main__":
    main()
