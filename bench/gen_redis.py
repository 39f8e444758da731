#!/usr/bin/python3
"""Deterministic redins-schema zone for Redis, as a redis-cli --pipe stream (RESP on stdout).

    /usr/bin/python3 bench/gen_redis.py --labels 1000000 | redis-cli -p PORT --pipe

writes, for zone bench.test. (override with --zone) and key prefix/suffix P/S (default none):
    DEL   P redins:zones:<zone> S, P redins:zones:<zone>:config S
    SET   P redins:zones:<zone>:config S   {"soa": {...}}
    HSET  P redins:zones:<zone> S          <label> <RRsets JSON>   (1000 labels per command)
    SADD  P redins:zones S                 <zone>
The set member is added last, so a watching server sees the zone complete.

--zonefile PATH also writes the same records as an RFC 1035 master file (SOA from the config,
every RRset with its TTL), for serving the same zone from a file. The one difference: a
geo-filtered label (the "geo" share below) becomes a plain A RRset of all its records there —
a file has no filters — and the count of such labels is printed on stderr and written into the
file's header. The RESP stream is the same with or without --zonefile.

Same arguments, same bytes: everything comes from random.Random(seed).

Labels ("@", ns1 and ns2 included): the first half are hosts, the second half a mix, which
makes overall about
    hosts  92%   A with 1-2 records (80%), AAAA only (10%), or A+AAAA (10%)
    geo     1%   A with 3 records by country and weight, "filter": country / single / weighted
    cname   3%   CNAME to a host of the zone
    txt   1.5%   TXT (verification strings)
    mx      1%   MX x2 pointing at hosts of the zone
    srv     1%   SRV pointing at a host of the zone
"""

import argparse
import json
import random
import string
import sys

ALNUM = string.ascii_lowercase + string.digits
WORDS = ("www api cdn img static mail app edge auth login shop blog docs m portal admin "
         "dev stage beta git vpn db cache search news video media files status").split()
COUNTRIES = ("US", "DE", "FR", "GB", "IR", "NL", "JP", "BR", "IN", "")


def ip4(rng):
    return "%d.%d.%d.%d" % (rng.randint(1, 223), rng.randint(0, 255), rng.randint(0, 255),
                            rng.randint(1, 254))


def ip6(rng):
    return "2001:db8:%x:%x::%x" % (rng.randint(0, 0xffff), rng.randint(0, 0xffff),
                                   rng.randint(1, 0xffff))


def ips(rng, n, gen):
    return ",".join('{"ip":"%s"}' % gen(rng) for _ in range(n))


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


SOA_TTL = 3600


def master_lines(label, value, zone):
    """The RRsets of one label's JSON as master-file lines; (lines, geo-filtered?)."""
    owner = "@" if label == "@" else label
    sets = json.loads(value)
    lines, geo = [], False
    for kind, rrset in sets.items():
        ttl = rrset["ttl"]
        if kind in ("a", "aaaa"):
            geo = geo or "filter" in rrset
            rtype = kind.upper()
            lines += ["%s %d IN %s %s" % (owner, ttl, rtype, r["ip"]) for r in rrset["records"]]
        elif kind == "cname":
            lines.append("%s %d IN CNAME %s" % (owner, ttl, rrset["host"]))
        elif kind == "ns":
            lines += ["%s %d IN NS %s" % (owner, ttl, r["host"]) for r in rrset["records"]]
        elif kind == "mx":
            lines += ["%s %d IN MX %d %s" % (owner, ttl, r["preference"], r["host"])
                      for r in rrset["records"]]
        elif kind == "txt":
            lines += ['%s %d IN TXT "%s"' % (owner, ttl, r["text"]) for r in rrset["records"]]
        elif kind == "srv":
            lines += ["%s %d IN SRV %d %d %d %s" % (owner, ttl, r["priority"], r["weight"],
                                                   r["port"], r["target"])
                      for r in rrset["records"]]
        else:
            raise ValueError("no master-file form for %s at %s" % (kind, label))
    return lines, geo


def generate(labels, zone, prefix, suffix, seed, out, zonefile=None):
    """Writes the RESP stream to out (and the master file to zonefile); returns the number of
    geo-filtered labels."""
    rng = random.Random(seed)
    zone = zone.rstrip(".") + "."
    hkey = "%sredins:zones:%s%s" % (prefix, zone, suffix)
    ckey = "%sredins:zones:%s:config%s" % (prefix, zone, suffix)
    skey = "%sredins:zones%s" % (prefix, suffix)
    out.write(resp("DEL", hkey, ckey))
    out.write(resp("SET", ckey,
                   '{"soa":{"ttl":%d,"minttl":300,"mbox":"hostmaster.%s","ns":"ns1.%s",'
                   '"refresh":86400,"retry":7200,"expire":1209600,"serial":%d}}'
                   % (SOA_TTL, zone, zone, seed)))
    body = []  # master-file lines (only with zonefile)
    ngeo = 0

    # host labels first: CNAME, MX and SRV point at them
    names = ["%s%d" % (rng.choice(WORDS), i) for i in range(labels - 3)]
    hosts = names[: max(1, labels // 2)]
    pending = [
        ("@", '{"ns":{"ttl":3600,"records":[{"host":"ns1.%s"},{"host":"ns2.%s"}]},'
              '"a":{"ttl":300,"records":[{"ip":"192.0.2.1"}]},'
              '"mx":{"ttl":300,"records":[{"host":"%s.%s","preference":10}]}}'
              % (zone, zone, hosts[0], zone)),
        ("ns1", '{"a":{"ttl":3600,"records":[{"ip":"192.0.2.53"}]}}'),
        ("ns2", '{"a":{"ttl":3600,"records":[{"ip":"198.51.100.53"}]}}'),
    ]
    batch = []

    def flush():
        args = ["HSET", hkey]
        for k, v in batch:
            args += [k, v]
        out.write(resp(*args))
        batch.clear()

    def put(k, v):
        nonlocal ngeo
        if zonefile is not None:
            lines, geo = master_lines(k, v, zone)
            body.extend(lines)
            ngeo += geo
        batch.append((k, v))
        if len(batch) == 1000:
            flush()

    for k, v in pending:
        put(k, v)
    for i, name in enumerate(names):
        r = rng.random()
        if i < len(hosts) or r < 0.85:
            s = rng.random()
            if s < 0.80:
                v = '{"a":{"ttl":300,"records":[%s]}}' % ips(rng, rng.randint(1, 2), ip4)
            elif s < 0.90:
                v = '{"aaaa":{"ttl":300,"records":[%s]}}' % ips(rng, 1, ip6)
            else:
                v = ('{"a":{"ttl":300,"records":[%s]},"aaaa":{"ttl":300,"records":[%s]}}'
                     % (ips(rng, 1, ip4), ips(rng, 1, ip6)))
        elif r < 0.87:
            recs = ",".join('{"ip":"%s","country":"%s","weight":%d}'
                            % (ip4(rng), rng.choice(COUNTRIES), rng.randint(1, 10))
                            for _ in range(3))
            v = ('{"a":{"ttl":60,"records":[%s],"filter":{"count":"single","order":"weighted",'
                 '"geo_filter":"country"}}}' % recs)
        elif r < 0.93:
            v = '{"cname":{"ttl":300,"host":"%s.%s"}}' % (rng.choice(hosts), zone)
        elif r < 0.96:
            text = "".join(rng.choice(ALNUM) for _ in range(rng.randint(16, 48)))
            v = '{"txt":{"ttl":300,"records":[{"text":"v=verify %s"}]}}' % text
        elif r < 0.98:
            v = ('{"mx":{"ttl":300,"records":[{"host":"%s.%s","preference":10},'
                 '{"host":"%s.%s","preference":20}]}}'
                 % (rng.choice(hosts), zone, rng.choice(hosts), zone))
        else:
            v = ('{"srv":{"ttl":300,"records":[{"target":"%s.%s","port":5060,"priority":10,'
                 '"weight":100}]}}' % (rng.choice(hosts), zone))
        put(name, v)
    if batch:
        flush()
    out.write(resp("SADD", skey, zone))
    if zonefile is not None:
        with open(zonefile, "w") as f:
            f.write("; gen_redis.py --labels %d --zone %s --seed %d: the records of the Redis "
                    "zone as a master file.\n; %d geo-filtered labels (A with country/weight "
                    "filter) are plain A RRsets of all their records here.\n"
                    % (labels, zone, seed, ngeo))
            f.write("$ORIGIN %s\n@ %d IN SOA ns1.%s hostmaster.%s %d 86400 7200 1209600 300\n"
                    % (zone, SOA_TTL, zone, zone, seed))
            f.write("\n".join(body))
            f.write("\n")
    return ngeo


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--labels", type=int, default=1000000, help="hash fields (labels), >= 4")
    ap.add_argument("--zone", default="bench.test.")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--suffix", default="")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--zonefile", metavar="PATH",
                    help="also write the same records as an RFC 1035 master file (geo-filtered "
                         "labels become plain A RRsets of the same records)")
    a = ap.parse_args()
    if a.labels < 4:
        ap.error("--labels must be at least 4")
    out = sys.stdout.buffer
    ngeo = generate(a.labels, a.zone, a.prefix, a.suffix, a.seed, out, a.zonefile)
    out.flush()
    if a.zonefile:
        print("gen_redis.py: wrote %s; %d geo-filtered labels are plain A RRsets of the same "
              "records there (a file has no filters)" % (a.zonefile, ngeo), file=sys.stderr)


if __name__ == "__main__":
    main()
