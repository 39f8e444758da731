#!/usr/bin/python3
"""geo_filter "latency" end to end (issue 33): a generated latency map, a real ternd, real clients.

One ternd serves lat.test (a redins-schema JSON zone, signed online with keys from ternctl dnssec
keygen) whose www A RRset is steered by latency: records of groups fra1, ams1 (two), lhr1
(located in London by the MaxMind DB fixtures) and syd1 (Brisbane). The map is GENERATED: 10,000
IPv4 /24s and 1,000 IPv6 /48s, each with 1..4 of the groups fra1, ams1, lhr1, syd1 and sin1 (a
PoP with no record) at random latencies; the test computes the expected answer per network.

  file        latency_map: {file: ...}: 400 sampled networks asked with ECS (dnspython) get the
              records of the group with the lowest latency that has a record (every group tied at
              it), with an ECS scope of at most the network's length; IPv6 networks too;
  fallback    a client not in the map is answered by location (Brisbane, London clients); one in
              the map with only sin1 gets every record (location fallback, client not located);
  explain     ternctl explain shows the client's entry, each group's latency and the choice, and
              the fallback for an unmapped client;
  dnssec      a validating Unbound (queries from 127.0.0.1, mapped to lhr1) gets the steered
              answer with AD set;
  sighup      the map file replaced (a network's fastest group changed), SIGHUP: the answer
              follows; a broken file (bad line 3): the reload fails, the log names file:3, and
              the old map keeps answering;
  redis       a second ternd reads the map from a Redis string (servers.Redis): the same checks
              on samples; a new value and SIGHUP: the answer follows; a broken value keeps the
              old map and logs "redis key K:LINE";
  redis_stall a reload whose GET a stalled (SIGSTOPped) Redis never answers: SIGTERM still ends
              ternd at once, not after the GET's 60 s read timeout;
  startup     ternd with a broken map exits at start with file:line.

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Only the processes
started here are stopped, by PID.

    test_steer_latency.py --ternd build/ternd --ternctl build/ternctl
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import dns.edns
import dns.flags
import dns.message
import dns.query

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, Failure, expect, run_check  # noqa: E402
import test_dnssec  # noqa: E402  (ternctl_keys: keys and DS)

ZONE = "lat.test."
NAME = "www." + ZONE
TIMEOUT = 2.0
ASN_CSV = "81.2.69.0,81.2.69.255,64500,\"Example London\"\n"

RECORDS = [("192.0.2.1", "fra1"), ("192.0.2.2", "ams1"), ("192.0.2.3", "AMS1"),
           ("81.2.69.130", "lhr1"), ("1.2.3.10", "syd1")]
GROUPS = ["fra1", "ams1", "lhr1", "syd1", "sin1"]  # sin1: no record
ALL = sorted(ip for ip, _ in RECORDS)


def zone_json():
    soa = {"ttl": 300, "ns": "ns1.lat.test.", "MBox": "hostmaster.lat.test.", "refresh": 3600,
           "retry": 600, "expire": 86400, "minttl": 60, "serial": 2026120601}
    recs = [{"ip": ip, "group": g} for ip, g in RECORDS]
    records = {
        "@": {"ns": {"ttl": 3600, "records": [{"host": "ns1.lat.test."}]}},
        "ns1": {"a": {"ttl": 3600, "records": [{"ip": "192.0.2.53"}]}},
        "www": {"a": {"ttl": 60, "filter": {"count": "multi", "order": "none",
                                            "geo_filter": "latency"}, "records": recs}},
        # the request log's steer_* keys for tiers and sticky (check_request_log)
        "tier": {"a": {"ttl": 60, "filter": {"count": "single", "order": "sticky"},
                       "records": [{"ip": "192.0.2.20", "priority": 0},
                                   {"ip": "192.0.2.21", "priority": 1}]}},
    }
    return {"config": {"soa": soa, "dnssec": True}, "records": records}


def generate(seed):
    """The map: {network: {group: ms}} and its text."""
    rnd = random.Random(seed)
    nets = {}
    for i in range(10000):
        nets["10.%d.%d.0/24" % (i >> 8, i & 255)] = None
    for i in range(1000):
        nets["2001:db8:%x::/48" % i] = None
    for n in nets:
        groups = rnd.sample(GROUPS, rnd.randint(1, 4))
        nets[n] = {g: rnd.randint(1, 60) for g in groups}
    # fixed entries the checks rely on
    nets["10.0.5.0/24"] = {"fra1": 40, "ams1": 12, "lhr1": 31, "sin1": 2}
    nets["10.0.6.0/24"] = {"sin1": 3}
    nets["127.0.0.0/8"] = {"lhr1": 1, "fra1": 9}
    return nets


def map_text(nets):
    lines = ["# generated latency map"]
    for n, groups in nets.items():
        for g, ms in groups.items():
            lines.append("%s %s %d" % (n, g, ms))
    return "\n".join(lines) + "\n"


def expected(groups):
    """The records a client of a network with these groups gets: the fastest groups that have a
    record, else None (fallback to location)."""
    have = {g: ms for g, ms in groups.items() if g != "sin1"}
    if not have:
        return None
    best = min(have.values())
    fast = {g for g, ms in have.items() if ms == best}
    return sorted(ip for ip, g in RECORDS if g.lower() in fast)


def ask(port, ecs=None):
    """(sorted addresses, ECS scope or None)."""
    opts = []
    if ecs:
        addr, plen = ecs.split("/")
        opts.append(dns.edns.ECSOption(addr, int(plen)))
    q = dns.message.make_query(NAME, "A", use_edns=0, options=opts)
    r = dns.query.udp(q, LOOPBACK, port=port, timeout=TIMEOUT)
    addrs = sorted(rd.address for rrset in r.answer for rd in rrset)
    scope = None
    for o in r.options:
        if isinstance(o, dns.edns.ECSOption):
            scope = o.scopelen
    return addrs, scope


def client_of(net):
    """An ECS source inside net: the network itself at its own length."""
    return net


def check_samples(port, nets, count, seed):
    rnd = random.Random(seed)
    sample = rnd.sample(sorted(n for n in nets if n != "127.0.0.0/8"), count)
    bad = []
    for n in sample:
        want = expected(nets[n])
        got, scope = ask(port, client_of(n))
        if want is None:
            want = ALL  # fallback to location: 10/8 and 2001:db8::/32 are not located
        plen = int(n.split("/")[1])
        if got != want or scope is None or scope > plen:
            bad.append("%s %s: got %s scope %s, want %s" % (n, nets[n], got, scope, want))
    expect(not bad, "%d of %d wrong, e.g. %s" % (len(bad), count, bad[:3]))


def wait_answer(port, ecs, want, what):
    servers.wait_until(lambda: ask(port, ecs)[0] == want, 10, what)


class Env:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.data = os.path.join(work, "data")
        os.makedirs(self.data)
        servers.geo_fixtures(args.ternctl, self.data, ASN_CSV)
        self.mmdb = os.path.join(self.data, "nested6.mmdb")
        self.zonefile = os.path.join(work, "lat.json")
        with open(self.zonefile, "w") as f:
            json.dump(zone_json(), f)
        self.keys = test_dnssec.ternctl_keys(args.ternctl, os.path.join(work, "keys"), ZONE)
        self.nets = generate(1)
        self.mapfile = os.path.join(work, "latency.map")
        servers.write_atomic(self.mapfile, map_text(self.nets))
        self.tern = servers.YamlTernd(work, args.ternd, self.yaml('{file: "%s"}' % self.mapfile),
                                      ternctl=args.ternctl)
        self.tern.start(ZONE)
        self.redis = None
        self.rtern = None

    def yaml(self, latency_map, extra=""):
        return ('geoip_db: "%s"\nlatency_map: %s\n%szones:\n  - origin: "%s"\n    file: "%s"\n'
                '    dnssec:\n      keys: ["%s", "%s"]\n'
                % (self.mmdb, latency_map, extra, ZONE, self.zonefile, self.keys.ksk,
                   self.keys.zsk))

    def stop(self):
        for p in (self.tern, self.rtern, self.redis):
            if p:
                p.stop()


def check_file(env):
    check_samples(env.tern.port, env.nets, 400, 2)
    got, scope = ask(env.tern.port, "10.0.5.0/24")
    expect(got == ["192.0.2.2", "192.0.2.3"] and scope == 24,
           "10.0.5.0/24: got %s scope %s, want ams1's two at /24" % (got, scope))
    got, scope = ask(env.tern.port, "10.0.5.77/32")
    expect(got == ["192.0.2.2", "192.0.2.3"] and scope == 24,
           "10.0.5.77/32: got %s scope %s, want ams1's two, scope /24" % (got, scope))


def check_fallback(env):
    got, _ = ask(env.tern.port, "1.2.3.0/24")  # Brisbane, not in the map
    expect(got == ["1.2.3.10"], "Brisbane client: got %s, want syd1's 1.2.3.10" % got)
    got, _ = ask(env.tern.port, "81.2.69.128/26")  # London
    expect(got == ["81.2.69.130"], "London client: got %s, want lhr1's 81.2.69.130" % got)
    got, _ = ask(env.tern.port, "10.0.6.0/24")  # only sin1: no record's group
    expect(got == ALL, "10.0.6.0/24 (sin1 only): got %s, want all (location fallback)" % got)


def check_explain(env):
    p = env.tern.ctl("explain", NAME, "A", "--client", "127.0.0.1", "--ecs", "10.0.5.0/24",
                     "--json")
    expect(p.returncode == 0, "explain: exit %d %s" % (p.returncode, p.stderr))
    ex = json.loads(p.stdout)
    sel = ex["selection"][0]
    lat = sel["latency"]
    expect(sel["filter"] == "latency", "explain filter %r" % sel["filter"])
    expect(lat["group"] == "ams1" and lat["ms"] == 12, "explain choice %r" % lat)
    entry = [(e["group"], e["ms"]) for e in lat["entry"]]
    expect(entry == [("sin1", 2), ("ams1", 12), ("lhr1", 31), ("fra1", 40)],
           "explain entry %r" % entry)
    expect(lat["map_prefix"] == 24, "explain map prefix %r" % lat.get("map_prefix"))
    expect("fastest" in lat["result"], "explain result %r" % lat["result"])
    text = env.tern.ctl("explain", NAME, "A", "--client", "1.2.3.4").stdout
    expect("not in the map: fell back to location" in text,
           "explain text for an unmapped client lacks the fallback:\n%s" % text)


def check_dnssec(env):
    u = servers.Unbound(env.work, "unbound", [(ZONE, env.tern.port, env.keys.ds)],
                        outgoing="127.0.0.1")
    u.start()
    try:
        r = u.ask(NAME, "A")
        addrs = sorted(rd.address for rrset in r.answer if rrset.rdtype == 1 for rd in rrset)
        expect(addrs == ["81.2.69.130"], "via unbound (127.0.0.1 = lhr1): %s" % addrs)
        expect(r.flags & dns.flags.AD, "via unbound: AD not set (rcode %s):\n%s"
               % (r.rcode(), u.log_text()))
    finally:
        u.stop()


def check_sighup(env):
    t = env.tern
    nets = dict(env.nets)
    nets["10.0.5.0/24"] = {"fra1": 4, "ams1": 12}
    servers.write_atomic(env.mapfile, map_text(nets))
    os.kill(t.proc.pid, signal.SIGHUP)
    wait_answer(t.port, "10.0.5.0/24", ["192.0.2.1"], "10.0.5.0/24 -> fra1 after SIGHUP")
    check_samples(t.port, nets, 100, 3)
    servers.write_atomic(env.mapfile, "10.0.0.0/24 fra1 1\n10.0.1.0/24 ams1 2\n"
                                      "10.0.2.0/24 lhr1 fast\n")
    os.kill(t.proc.pid, signal.SIGHUP)
    servers.wait_until(lambda: t.log_has("%s:3: latency \"fast\"" % env.mapfile), 10,
                       "the log names the broken line")
    got, _ = ask(t.port, "10.0.5.0/24")
    expect(got == ["192.0.2.1"], "after a broken map: got %s, want the old map's fra1" % got)
    check_samples(t.port, nets, 50, 4)
    env.nets = nets


def check_redis(env):
    env.redis = servers.Redis(env.work)
    env.redis.start()
    key = "tern:latency"
    nets = generate(5)
    env.redis.cmd("SET", key, map_text(nets))
    extra = 'redis:\n  address: "%s:%d"\n' % (LOOPBACK, env.redis.port)
    env.rtern = servers.YamlTernd(env.work, env.args.ternd,
                                  env.yaml('{redis_key: "%s"}' % key, extra), name="tern-redis",
                                  ternctl=env.args.ternctl)
    env.rtern.start(ZONE)
    t = env.rtern
    check_samples(t.port, nets, 300, 6)
    nets["10.0.5.0/24"] = {"syd1": 1, "fra1": 3}
    env.redis.cmd("SET", key, map_text(nets))
    os.kill(t.proc.pid, signal.SIGHUP)
    wait_answer(t.port, "10.0.5.0/24", ["1.2.3.10"], "redis: 10.0.5.0/24 -> syd1 after SIGHUP")
    env.redis.cmd("SET", key, "# x\n10.0.0.0/33 fra1 1\n")
    os.kill(t.proc.pid, signal.SIGHUP)
    servers.wait_until(lambda: t.log_has("redis key %s:2: prefix length 33" % key), 10,
                       "the log names the key and line")
    got, _ = ask(t.port, "10.0.5.0/24")
    expect(got == ["1.2.3.10"], "after a broken value: got %s, want the old map's" % got)


def check_redis_stall(env):
    """A reload stuck on a stalled Redis (SIGSTOPped: connected, never answering) does not hold
    the stop: SIGTERM ends ternd long before the 60 s read timeout this config gives the GET."""
    redis = servers.Redis(env.work, name="redis-stall")
    redis.start()
    tern = None
    try:
        key = "tern:latency"
        redis.cmd("SET", key, map_text(generate(7)))
        extra = ('redis:\n  address: "%s:%d"\n  connect_timeout: 60000\n  read_timeout: 60000\n'
                 % (LOOPBACK, redis.port))
        tern = servers.YamlTernd(env.work, env.args.ternd,
                                 env.yaml('{redis_key: "%s"}' % key, extra), name="tern-stall",
                                 ternctl=env.args.ternctl)
        tern.start(ZONE)
        os.kill(redis.proc.pid, signal.SIGSTOP)
        try:
            os.kill(tern.proc.pid, signal.SIGHUP)
            servers.wait_until(lambda: tern.log_has("SIGHUP: reloading"), 10, "the reload starts")
            time.sleep(0.5)  # into the GET, which Redis will not answer
            expect(tern.proc.poll() is None, "ternd still runs while the reload waits")
            t0 = time.monotonic()
            tern.proc.send_signal(signal.SIGTERM)
            try:
                rc = tern.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                raise Failure("SIGTERM during a reload stalled on Redis: ternd still runs after "
                              "30 s (the GET's read timeout is 60 s)")
            took = time.monotonic() - t0
            expect(rc == 0, "exit status %s after SIGTERM:\n%s" % (rc, tern.log_text()[-2000:]))
            print("    SIGTERM during the stalled GET: exited in %.2f s" % took)
        finally:
            os.kill(redis.proc.pid, signal.SIGCONT)
    finally:
        if tern:
            tern.stop()
        redis.stop()


def check_config(env):
    """latency_map's own errors, from --check-config."""
    for block, want in [("{}", "latency_map: give one of file and redis_key"),
                        ('{file: "a", redis_key: "b"}', "give one of file and redis_key"),
                        ('{redis_key: "k"}', "latency_map: redis_key needs redis:"),
                        ('{files: "a"}', "unknown key")]:
        conf = os.path.join(env.work, "check.yaml")
        with open(conf, "w") as f:
            f.write('listen: ["127.0.0.1:53"]\nlatency_map: %s\n' % block)
        p = subprocess.run([env.args.ternd, "-c", conf, "--check-config"], capture_output=True,
                           text=True, timeout=30)
        expect(p.returncode != 0 and want in p.stderr + p.stdout,
               "latency_map: %s: exit %d, %r (want %r)"
               % (block, p.returncode, (p.stderr + p.stdout)[-300:], want))


def check_request_log(env):
    """What the rules decided reaches redins' request log as tern's steer_* keys (reqlog.h),
    only for the rules that ran, and a query no rule steered keeps redins' line."""
    log = os.path.join(env.work, "requests.log")
    extra = ('query_log:\n  requests:\n    target: file\n    format: json\n'
             '    path: "%s"\n' % log)
    mapfile = os.path.join(env.work, "reqlog.map")  # the shared one is left broken by sighup
    servers.write_atomic(mapfile, map_text(env.nets))
    t = servers.YamlTernd(env.work, env.args.ternd, env.yaml('{file: "%s"}' % mapfile, extra),
                          name="tern-reqlog")
    try:
        t.start(ZONE)
        asks = [(NAME, "10.0.5.0/24"), (NAME, "1.2.3.0/24"), ("tier." + ZONE, "10.0.7.0/24"),
                ("ns1." + ZONE, "10.0.5.0/24")]
        for name, ecs in asks:
            addr, plen = ecs.split("/")
            q = dns.message.make_query(name, "A", use_edns=0,
                                       options=[dns.edns.ECSOption(addr, int(plen))])
            dns.query.udp(q, LOOPBACK, port=t.port, timeout=TIMEOUT)

        def lines():
            if not os.path.exists(log):
                return []
            with open(log) as f:
                return [json.loads(x) for x in f if x.strip()]
        servers.wait_until(lambda: len(lines()) >= len(asks), 10, "4 request-log lines")
        got = {(x["record"], x["client_subnet"].split("/")[0]): x for x in lines()}
        m = got[(NAME, "10.0.5.0")]
        have = {g: ms for g, ms in env.nets["10.0.5.0/24"].items() if g != "sin1"}
        best = min(have, key=have.get)  # the map's fastest group with a record
        expect(m.get("steer_latency") == "matched" and m.get("steer_latency_group") == best
               and m.get("steer_latency_ms") == have[best], "matched line (want %s %d ms): %s"
               % (best, have[best], m))
        u = got[(NAME, "1.2.3.0")]
        expect(u.get("steer_latency") == "unmapped" and "steer_latency_group" not in u,
               "unmapped line: %s" % u)
        k = got[("tier." + ZONE, "10.0.7.0")]
        expect(k.get("steer_tier") == 0 and k.get("steer_tier_skipped") == 0
               and k.get("steer_sticky_prefix") == 24 and "steer_latency" not in k,
               "tier/sticky line: %s" % k)
        p = got[("ns1." + ZONE, "10.0.5.0")]
        expect(not [key for key in p if key.startswith("steer_")], "plain line: %s" % p)
    finally:
        t.stop()


def check_startup(env):
    bad = os.path.join(env.work, "bad.map")
    with open(bad, "w") as f:
        f.write("10.0.0.0/24 fra1 1\n10.0.0.1/24 ams1 2\n")
    t = servers.YamlTernd(env.work, env.args.ternd, env.yaml('{file: "%s"}' % bad),
                          name="tern-bad")
    try:
        t.start(ZONE)
        raise Failure("ternd started with a broken map")
    except RuntimeError as e:
        expect("%s:2: host bits set in 10.0.0.1/24" % bad in str(e),
               "start-up error lacks file:line: %s" % str(e)[-600:])
    finally:
        t.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl", required=True)
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="tern-latency-") as work:
        env = Env(args, work)
        try:
            for name, fn in [("file", check_file), ("fallback", check_fallback),
                             ("explain", check_explain), ("dnssec", check_dnssec),
                             ("sighup", check_sighup), ("redis", check_redis),
                             ("redis_stall", check_redis_stall),
                             ("config", check_config), ("request_log", check_request_log),
                             ("startup", check_startup)]:
                run_check(results, name, lambda fn=fn: fn(env))
        finally:
            env.stop()
    return servers.report(results)


if __name__ == "__main__":
    sys.exit(main())
