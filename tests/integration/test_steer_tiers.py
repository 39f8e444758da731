#!/usr/bin/python3
"""Failover tiers and sticky answers (issue 33), end to end: ternd with real HTTP health
endpoints on loopback addresses (every address of 127/8 is local on Linux), a real redis-server,
a validating Unbound, ternctl and dnspython.

  tiers_http     tier 0 (127.0.0.2, .3) needs min_healthy 2; tier 1 (127.0.0.4, .5). Stopping
                 one tier-0 server drops the answer to tier 1 once fewer than 2 are healthy;
                 starting it again brings tier 0 back
  tiers_redis    a redins-schema zone in Redis: HSET a label whose record takes a worse priority
                 and the answer moves to the other tier once the source picks it up
  sticky         300 ECS /24 subnets, each asked from three of its hosts: the same record every
                 time, and the ECS scope is 24 (the prefix hashed)
  sticky_reload  one record of 8 removed by a zone reload (SIGHUP): about 1/8 of the subnets
                 move (<= 1.2/8), and only those that had the removed record
  signed         a signed zone's tiered and sticky answers validate in Unbound (AD), and are
                 what ternd answers its address
  explain        ternctl explain says which tier was answered and why tier 0 was passed over,
                 and which network the sticky order hashed
  clean_exit     ternd exits 0 on SIGTERM

    test_steer_tiers.py --ternd build/ternd --ternctl build/ternctl [--only sticky,signed]
"""

import argparse
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import dns.edns
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, Failure, Redis, Unbound, YamlTernd, expect, run_check  # noqa: E402

INTERVAL = 200    # ms between checks of one endpoint
TIMEOUT_MS = 300  # per check
WAIT = 15.0       # bound of every wait for a change to show
SUBNETS = 300
SOA = {"ttl": 300, "ns": "ns1.tiers.test.", "MBox": "hostmaster.tiers.test.", "refresh": 3600,
       "retry": 600, "expire": 86400, "minttl": 60, "serial": 2024010101}
DS_LINE = re.compile(r"^(\S+)\s+(?:\d+\s+)?(?:IN\s+)?DS\s+(\d+ \d+ \d+ [0-9A-Fa-f]+)\s*$")


class Backend:
    """An HTTP server on one loopback address answering 200 to everything; stopped, its port is
    closed (connection refused: the health check fails)."""

    def __init__(self, addr, port):
        self.addr, self.port = addr, port
        self.server = self.thread = None

    def start(self):
        self.server, self.thread = servers.http_ok_server(self.addr, self.port)

    def stop(self):
        if self.server:
            servers.http_stop(self.server, self.thread, WAIT)
            self.server = None


def start_backends(addrs):
    """Backends on one fresh port; a port taken meanwhile by another test: new port, bounded."""
    for _ in range(5):
        port = servers.free_port()
        bs = {a: Backend(a, port) for a in addrs}
        started = []
        try:
            for b in bs.values():
                b.start()
                started.append(b)
            return port, bs
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            for b in started:
                b.stop()
    raise Failure("no free port for the backends in 5 tries")


def ip(addr, **kw):
    r = {"ip": addr}
    r.update(kw)
    return r


def sticky_records(n):
    return [ip("192.0.2.%d" % i, weight=1) for i in range(1, n + 1)]


def tiers_zone(hc_port, nsticky):
    hc = {"enable": True, "protocol": "http", "port": hc_port, "uri": "/", "up_count": 1,
          "down_count": 1, "timeout": TIMEOUT_MS}
    return {"config": {"soa": SOA}, "records": {
        "@": {"ns": {"ttl": 3600, "records": [{"host": "ns1.tiers.test."}]}},
        "ns1": {"a": {"ttl": 3600, "records": [ip("192.0.2.53")]}},
        "t": {"a": {"ttl": 5, "filter": {"count": "multi", "order": "none", "min_healthy": 2},
                    "records": [ip("127.0.0.2"), ip("127.0.0.3"), ip("127.0.0.4", priority=1),
                                ip("127.0.0.5", priority=1)],
                    "health_check": hc}},
        "s": {"a": {"ttl": 60, "filter": {"count": "single", "order": "sticky"},
                    "records": sticky_records(nsticky)}},
    }}


def sig_zone():
    soa = dict(SOA, ns="ns1.sig.test.", MBox="h.sig.test.")
    return {"config": {"soa": soa}, "records": {
        "@": {"ns": {"ttl": 3600, "records": [{"host": "ns1.sig.test."}]}},
        "ns1": {"a": {"ttl": 3600, "records": [ip("192.0.2.53")]}},
        "t": {"a": {"ttl": 60, "filter": {"min_healthy": {"0": 2}},
                    "records": [ip("192.0.2.10", priority=1), ip("192.0.2.11", priority=1),
                                ip("192.0.2.12")]}},
        "s": {"a": {"ttl": 60, "filter": {"count": "single", "order": "sticky"},
                    "records": sticky_records(6)}},
    }}


def redis_labels(prio21):
    return {"@": {"ns": {"records": [{"host": "ns1.redis.test."}]}},
            "r": {"a": {"ttl": 5, "records": [ip("192.0.2.21", priority=prio21),
                                              ip("192.0.2.22", priority=1)]}}}


class Env:
    def __init__(self, tern, work):
        self.tern = tern
        self.work = work

    def ask(self, name, ecs=None):
        """(sorted addresses, ECS scope, response) of an A query (None when no answer came)."""
        opts = [dns.edns.ECSOption(*ecs)] if ecs else []
        q = dns.message.make_query(name, "A", use_edns=0, options=opts)
        try:
            r = dns.query.udp(q, LOOPBACK, port=self.tern.port, timeout=1.0)
        except Exception:  # noqa: BLE001 - a lost datagram is "no answer yet"
            return None, 0, None
        expect(r.rcode() == dns.rcode.NOERROR, "%s: rcode %s" % (name, dns.rcode.to_text(r.rcode())))
        scope = 0
        for o in r.options:
            if isinstance(o, dns.edns.ECSOption):
                scope = o.scopelen
        return sorted(rd.address for rs in r.answer if rs.rdtype == dns.rdatatype.A
                      for rd in rs), scope, r

    def wait_for(self, name, want, what):
        start = time.monotonic()
        got = None
        while time.monotonic() - start < WAIT:
            got = self.ask(name)[0]
            if got == sorted(want):
                return time.monotonic() - start
            time.sleep(0.05)
        raise Failure("%s: %s: got %s, want %s within %.0f s" % (what, name, got, sorted(want),
                                                                  WAIT))

    def explain(self, *args):
        p = self.tern.ctl("explain", *args, "--json")
        expect(p.returncode == 0, "explain %s: exit %d %s" % (args, p.returncode, p.stderr))
        return json.loads(p.stdout)

    def sticky_picks(self, host=1):
        """{subnet index: (answer, scope)} for SUBNETS /24s asked from host."""
        out = {}
        for i in range(SUBNETS):
            a, scope, _ = self.ask("s.tiers.test.", ("10.%d.%d.%d" % (i // 256, i % 256, host), 32))
            expect(a is not None and len(a) == 1, "subnet %d: answer %s" % (i, a))
            out[i] = (a[0], scope)
        return out


def check_tiers_http(env, backends):
    t = env.wait_for("t.tiers.test.", ["127.0.0.2", "127.0.0.3"], "all up: tier 0")
    print("  tier 0 answered after %.2f s" % t)
    backends["127.0.0.3"].stop()
    t = env.wait_for("t.tiers.test.", ["127.0.0.4", "127.0.0.5"], "one of tier 0 down")
    print("  fell to tier 1 %.2f s after one of tier 0 stopped (min_healthy 2)" % t)
    # tier 1 loses one too: no tier has 2, the fullest (1 each) with the better priority
    backends["127.0.0.5"].stop()
    env.wait_for("t.tiers.test.", ["127.0.0.2"], "one left in each tier")
    backends["127.0.0.3"].start()
    backends["127.0.0.5"].start()
    t = env.wait_for("t.tiers.test.", ["127.0.0.2", "127.0.0.3"], "back up: tier 0")
    print("  back to tier 0 %.2f s after the servers started again" % t)


def check_tiers_redis(env, redis):
    env.wait_for("r.redis.test.", ["192.0.2.21"], "tier 0 from Redis")
    redis.cmd("HSET", "redins:zones:redis.test.", "r", json.dumps(redis_labels(2)["r"]))
    t = env.wait_for("r.redis.test.", ["192.0.2.22"], "priority changed by HSET")
    print("  HSET of a worse priority: tier 1 answered after %.2f s" % t)
    redis.cmd("HSET", "redins:zones:redis.test.", "r", json.dumps(redis_labels(0)["r"]))
    env.wait_for("r.redis.test.", ["192.0.2.21"], "priority restored by HSET")


def check_sticky(env):
    first = env.sticky_picks(1)
    counts = {}
    for host in (77, 254):
        again = env.sticky_picks(host)
        moved = [i for i in first if again[i][0] != first[i][0]]
        expect(not moved, "hosts of one /24 answered differently: subnets %s" % moved[:10])
    for i, (a, scope) in first.items():
        expect(scope == 24, "subnet %d: scope %d, want 24 (the prefix hashed)" % (i, scope))
        counts[a] = counts.get(a, 0) + 1
    expect(len(counts) == 8, "the 8 records are not all used: %s" % counts)
    print("  %d subnets x 3 hosts: the same answer each; picks per record %s"
          % (SUBNETS, sorted(counts.values())))
    # a /20 sent by the resolver: never more of it hashed than it sent
    _, scope, _ = env.ask("s.tiers.test.", ("10.0.16.0", 20))
    expect(scope == 20, "ECS /20: scope %d, want 20" % scope)


def check_sticky_reload(env, zone_path, hc_port):
    before = env.sticky_picks(1)
    with open(zone_path + ".new", "w") as f:
        json.dump(tiers_zone(hc_port, 7), f, indent=1)  # 192.0.2.8 removed
    os.replace(zone_path + ".new", zone_path)
    os.kill(env.tern.proc.pid, signal.SIGHUP)
    deadline = time.monotonic() + WAIT
    while True:
        after = env.sticky_picks(1)
        if all(a != "192.0.2.8" for a, _ in after.values()):
            break
        expect(time.monotonic() < deadline, "192.0.2.8 still answered %.0f s after SIGHUP" % WAIT)
        time.sleep(0.2)
    moved = [i for i in before if after[i][0] != before[i][0]]
    wrong = [i for i in moved if before[i][0] != "192.0.2.8"]
    expect(not wrong, "subnets moved that did not have the removed record: %s" % wrong[:10])
    frac = len(moved) / float(SUBNETS)
    print("  one record of 8 removed: %d of %d subnets moved (%.3f; 1/N = %.3f, bound %.3f)"
          % (len(moved), SUBNETS, frac, 1 / 8.0, 1.2 / 8))
    expect(0 < frac <= 1.2 / 8, "moved %.3f, want 0 < moved <= %.3f" % (frac, 1.2 / 8))


def check_signed(env, unbound):
    r = unbound.ask("t.sig.test.", "A")
    got = sorted(rd.address for rs in r.answer if rs.rdtype == dns.rdatatype.A for rd in rs)
    expect(r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AD,
           "t.sig.test: rcode %s flags %s" % (dns.rcode.to_text(r.rcode()),
                                              dns.flags.to_text(r.flags)))
    expect(got == ["192.0.2.10", "192.0.2.11"],
           "t.sig.test: %s, want tier 1 (tier 0 has 1 of its min_healthy 2)" % got)
    r = unbound.ask("s.sig.test.", "A")
    got = sorted(rd.address for rs in r.answer if rs.rdtype == dns.rdatatype.A for rd in rs)
    expect(r.flags & dns.flags.AD, "s.sig.test: not validated: %s" % dns.flags.to_text(r.flags))
    mine = env.ask("s.sig.test.")[0]  # Unbound asks from 127.0.0.1 too, without ECS
    expect(len(got) == 1 and got == mine, "s.sig.test via unbound %s, ternd %s" % (got, mine))
    print("  Unbound validated the tiered answer %s and the sticky answer %s (AD)"
          % (["192.0.2.10", "192.0.2.11"], got))


def check_explain(env, backends):
    backends["127.0.0.2"].stop()
    env.wait_for("t.tiers.test.", ["127.0.0.4", "127.0.0.5"], "tier 0 short of min_healthy")
    ex = env.explain("t.tiers.test.", "A", "--client", "127.0.0.1")
    sel = ex["selection"][0]
    tiers = sel.get("tiers")
    expect(tiers and tiers["answered"] == 1 and tiers["passed_over"] == 1,
           "explain tiers: %s" % tiers)
    expect(tiers["tiers_passed_over"] == [{"priority": 0, "candidates": 1, "min_healthy": 2}],
           "explain's passed-over tiers: %s" % tiers["tiers_passed_over"])
    fates = {r["rdata"]: r["fate"] for r in sel["record"]}
    expect(fates["127.0.0.3"] == "not in the failover tier answered", "fates %s" % fates)
    expect(fates["127.0.0.2"] == "dropped by health", "fates %s" % fates)
    backends["127.0.0.2"].start()
    ex = env.explain("s.tiers.test.", "A", "--client", "127.0.0.1", "--ecs", "10.1.2.3/32")
    sel = ex["selection"][0]
    st = sel.get("sticky")
    expect(st and st["network"] == "10.1.2.0/24" and st["prefix"] == 24, "explain sticky %s" % st)
    given = sel["given"]
    a = env.ask("s.tiers.test.", ("10.1.2.3", 32))[0]
    expect(given == a, "explain gives %s, the server %s" % (given, a))
    print("  explain: tier 1 answered, tier 0 had 1 of 2; sticky hashed %s" % st["network"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl", required=True)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tern-tiers-")
    tern = redis = unbound = None
    backends = {}
    try:
        hc_port, backends = start_backends(["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"])
        data = os.path.join(work, "data")
        os.makedirs(data)
        zone_path = os.path.join(data, "tiers.json")
        with open(zone_path, "w") as f:
            json.dump(tiers_zone(hc_port, 8), f, indent=1)
        with open(os.path.join(data, "sig.json"), "w") as f:
            json.dump(sig_zone(), f, indent=1)
        out = subprocess.run([args.ternctl, "dnssec", "keygen", "sig.test", "-d", data],
                             check=True, timeout=60, capture_output=True, text=True).stdout
        keys = [os.path.join(data, os.path.basename(s)) for s in out.split()]
        redis = Redis(work)
        redis.start()
        redis.put_zone("redis.test.", redis_labels(0), dict(SOA, ns="ns1.redis.test."))
        yaml = ('health: {check_interval_ms: %d}\n'
                'steering: {sticky_prefix_v4: 24, sticky_prefix_v6: 56}\n'
                'redis:\n  address: "%s:%d"\n  zone_reload: 600\n'
                'zones:\n  - origin: tiers.test.\n    file: "%s"\n'
                '  - origin: sig.test.\n    file: "%s"\n    dnssec: {keys: [%s]}\n'
                % (INTERVAL, LOOPBACK, redis.port, zone_path, os.path.join(data, "sig.json"),
                   ", ".join('"%s"' % k for k in keys)))
        tern = YamlTernd(work, args.ternd, yaml, ternctl=args.ternctl)
        tern.start("tiers.test.")
        env = Env(tern, work)
        p = tern.ctl("dnssec", "ds", "sig.test.")
        ds = [DS_LINE.match(ln) for ln in p.stdout.splitlines()[1:]]
        expect(p.returncode == 0 and ds and ds[0], "ternctl dnssec ds: %s %s" % (p.stdout, p.stderr))
        unbound = Unbound(work, "unbound", [("sig.test.", tern.port, ds[0].group(2))])
        unbound.start()
        checks = [("tiers_http", lambda: check_tiers_http(env, backends)),
                  ("tiers_redis", lambda: check_tiers_redis(env, redis)),
                  ("sticky", lambda: check_sticky(env)),
                  ("signed", lambda: check_signed(env, unbound)),
                  ("explain", lambda: check_explain(env, backends)),
                  ("sticky_reload", lambda: check_sticky_reload(env, zone_path, hc_port))]
        only = set(args.only.split(",")) if args.only else None
        results = []
        for name, fn in checks:
            if only is None or name in only:
                run_check(results, name, fn)
        unbound.stop()
        unbound = None
        tern.stop()
        return servers.finish(tern, results)
    finally:
        for x in (unbound, tern, redis):
            if x is not None:
                x.stop()
        for b in backends.values():
            b.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
