#!/usr/bin/python3
"""Load shedding (issue 33), end to end: ternd with real HTTP health endpoints on 127.0.0.x
(Python http.server) reporting a load in a response header or a JSON body that the test
changes, a real redis-server holding loads the test writes with HSET, real DNS clients
(dnspython), `ternctl explain`, and a validating Unbound for the signed zone.

Zone shed.test (a redins JSON zone, signed online with keys from `ternctl dnssec keygen`):
  hdr  A 127.0.0.31, .32  weighted, count single; load in header X-Load, low 0.5 high 0.9
  js   A 127.0.0.33, .34  rr, count single; load at stats.load of a JSON body, low 50 high 90
  rd   A 127.0.0.35, .36  weighted, count single; load in Redis (HGET tern:load <address>),
                          low 50 high 90; health_check tcp (any check holds the load cell)

Checks (health checks every INTERVAL ms; every wait is bounded by WAIT):
  header_out    .31 reports 0.95 (above high): answers move to .32 only; back to 0.1: both
  scaled        .31 at 0.7 (between 0.5 and 0.9: weight 100 -> 50): in N weighted answers its
                share is about 1/3 (loose bounds; 1/2 unloaded)
  fail_open     both above high: both answered (never empty)
  json          .33's JSON body says 95: only .34; a body over 64 KiB with the same load is not
                read (unknown load: not shed), .33 answers again; GET checks (the body is needed)
  redis         HSET tern:load 127.0.0.35 95: only .36; HDEL: .35 again (no reading: unknown)
  explain       each record's load and decision in `ternctl explain` (JSON and text)
  dnssec        the shed answer (one record) from Unbound validating with the zone's DS: AD set
  redis_stale   Redis stopped: the last loads read turn unknown after 3 polls, not before, and
                the loaded record is answered again (stale data never sheds)
  no_redis      a Redis load source without health: redis: one warning in the log
  bad_block     low >= high, two sources and a header source without a health check are load
                errors naming zone, label and field (ternd --check-config)

    test_steer_shed.py --ternd build/ternd --ternctl build/ternctl [--only json,redis]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import dns.flags
import dns.message
import dns.query
import dns.rdatatype

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, Failure, Redis, YamlTernd, expect, run_check  # noqa: E402

ZONE = "shed.test."
INTERVAL = 200  # ms between checks of one endpoint (and between Redis polls)
WAIT = 15.0     # bound of every wait for a load to take effect
N = 1500        # weighted answers sampled for the scaled share
BIG = 100 * 1024  # a JSON body past the 64 KiB the checker reads


class Backend:
    """An HTTP server on one loopback address answering 200 to HEAD and GET with header
    X-Load: <load> and, to a GET, the body {"stats": {"load": <load>}} (padded past BIG bytes
    when big). The methods it saw are kept."""

    def __init__(self, addr, port):
        self.addr, self.port = addr, port
        self.load, self.big = "0.1", False
        self.methods = []
        self.lock = threading.Lock()
        self.httpd = self.thread = None

    def start(self):
        self.httpd, self.thread = servers.serve_http(self.addr, self.port, self.answer)

    def answer(self, h):
        with self.lock:
            load, big = self.load, self.big
            self.methods.append(h.command)
        doc = {"stats": {"load": float(load)}}
        if big:
            doc["pad"] = "x" * BIG
        body = json.dumps(doc).encode()
        h.send_response(200)
        h.send_header("X-Load", load)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Connection", "close")
        h.end_headers()
        if h.command == "GET":
            try:
                h.wfile.write(body)
            except OSError:
                pass  # the checker stopped reading a body too long: what it should do

    def stop(self):
        if self.httpd:
            servers.stop_http(self.httpd, self.thread, WAIT)
            self.httpd = None

    def set(self, load, big=False):
        with self.lock:
            self.load, self.big = load, big

    def seen(self):
        with self.lock:
            return list(self.methods)


def a(*ips, **kw):
    return [dict(ip=ip, **kw) for ip in ips]


def shed_zone(http_port, tcp_port):
    soa = {"ttl": 300, "ns": "ns1.shed.test.", "mbox": "h.shed.test.", "refresh": 3600,
           "retry": 600, "expire": 86400, "minttl": 60, "serial": 1}
    hc = {"enable": True, "protocol": "http", "port": http_port, "uri": "/health",
          "up_count": 1, "down_count": 2, "timeout": 500}
    single = lambda order: {"count": "single", "order": order}  # noqa: E731
    return {"config": {"soa": soa},
            "records": {
                "@": {"ns": {"records": [{"host": "ns1.shed.test."}]}},
                "ns1": {"a": {"records": a("192.0.2.53")}},
                "hdr": {"a": {"ttl": 5, "records": a("127.0.0.31", "127.0.0.32", weight=100),
                              "filter": single("weighted"), "health_check": hc,
                              "shed": {"low": 0.5, "high": 0.9, "header": "X-Load"}}},
                "js": {"a": {"ttl": 5, "records": a("127.0.0.33", "127.0.0.34"),
                             "filter": single("rr"), "health_check": hc,
                             "shed": {"low": 50, "high": 90, "json": "stats.load"}}},
                "rd": {"a": {"ttl": 5, "records": a("127.0.0.35", "127.0.0.36", weight=1),
                             "filter": single("weighted"),
                             "health_check": {"enable": True, "protocol": "tcp",
                                              "port": tcp_port, "timeout": 500},
                             "shed": {"low": 50, "high": 90, "redis": "tern:load"}}},
            }}


class Env:
    def __init__(self, tern, backends, redis, keys, work):
        self.tern, self.backends, self.redis, self.keys, self.work = tern, backends, redis, keys, work

    def ask(self, label):
        q = dns.message.make_query(label + "." + ZONE, "A")
        r = dns.query.udp(q, LOOPBACK, port=self.tern.port, timeout=2.0)
        return sorted(rd.address for rs in r.answer if rs.rdtype == dns.rdatatype.A for rd in rs)

    def sample(self, label, n):
        seen = {}
        for _ in range(n):
            for addr in self.ask(label):
                seen[addr] = seen.get(addr, 0) + 1
        return seen

    def wait_only(self, label, want, n=40):
        """Wait until n answers in a row give exactly the addresses in want (a set): seconds."""
        start = time.monotonic()
        got = {}
        while time.monotonic() - start < WAIT:
            got = self.sample(label, n)
            if set(got) == set(want):
                return time.monotonic() - start
            time.sleep(0.05)
        raise Failure("%s: answers %s, want only %s within %.0f s" % (label, got, want, WAIT))

    def explain(self, label):
        p = self.tern.ctl("explain", label + "." + ZONE, "A", "--client", LOOPBACK, "--json")
        expect(p.returncode == 0, "explain: exit %d %s" % (p.returncode, p.stderr))
        return json.loads(p.stdout)

    def records(self, label):
        """explain's records of label's selection: {rdata: record}."""
        sel = self.explain(label)["selection"]
        expect(sel, "explain %s: no selection" % label)
        return {r["rdata"]: r for r in sel[0]["record"]}

    def wait_load(self, label, addr, load):
        """Wait until explain reads load (a number, or "unknown") for addr."""
        start = time.monotonic()
        got = None
        while time.monotonic() - start < WAIT:
            got = self.records(label)[addr].get("load")
            if got == load:
                return
            time.sleep(0.05)
        raise Failure("%s %s: explain says load %r, want %r" % (label, addr, got, load))


def check_header_out(env):
    env.backends["127.0.0.31"].set("0.95")
    env.backends["127.0.0.32"].set("0.1")
    t = env.wait_only("hdr", {"127.0.0.32"})
    print("  header 0.95: 127.0.0.31 left out after %.2f s" % t)
    env.backends["127.0.0.31"].set("0.1")
    t = env.wait_only("hdr", {"127.0.0.31", "127.0.0.32"}, n=60)
    print("  header 0.1: both again after %.2f s" % t)
    methods = set(env.backends["127.0.0.31"].seen())
    expect(methods == {"HEAD"}, "a header load needs no body: methods %s, want HEAD" % methods)


def check_scaled(env):
    env.backends["127.0.0.31"].set("0.7")
    env.backends["127.0.0.32"].set("0.1")
    env.wait_load("hdr", "127.0.0.31", 0.7)
    rec = env.records("hdr")
    expect(rec["127.0.0.31"].get("weight_scaled") == 50
           and rec["127.0.0.31"]["shed"].startswith("between low and high: kept, weight scaled"),
           "explain .31: %s" % rec["127.0.0.31"])
    got = env.sample("hdr", N)
    share = got.get("127.0.0.31", 0) / float(N)
    print("  0.7 of 0.5..0.9: 127.0.0.31 in %.3f of %d answers (expected 1/3)" % (share, N))
    # 1/3 expected; sd 0.012 at N=1500: [0.24, 0.43] is ~8 sd each way, and excludes 1/2
    expect(0.24 <= share <= 0.43, "share %.3f of .31 at load 0.7: want about 1/3" % share)
    env.backends["127.0.0.31"].set("0.1")
    env.wait_load("hdr", "127.0.0.31", 0.1)
    got = env.sample("hdr", N)
    share = got.get("127.0.0.31", 0) / float(N)
    print("  0.1: 127.0.0.31 in %.3f of %d answers (expected 1/2)" % (share, N))
    expect(0.40 <= share <= 0.60, "share %.3f of .31 unloaded: want about 1/2" % share)


def check_fail_open(env):
    env.backends["127.0.0.31"].set("0.99")
    env.backends["127.0.0.32"].set("1.5")
    env.wait_load("hdr", "127.0.0.32", 1.5)
    env.wait_load("hdr", "127.0.0.31", 0.99)
    got = env.sample("hdr", 200)
    expect(set(got) == {"127.0.0.31", "127.0.0.32"}, "all above high: answers %s" % got)
    sel = env.explain("hdr")["selection"][0]
    expect(sel["shed"]["fail_open"] is True, "explain shed %s" % sel.get("shed"))
    for b in ("127.0.0.31", "127.0.0.32"):
        env.backends[b].set("0.1")
    env.wait_load("hdr", "127.0.0.31", 0.1)


def check_json(env):
    env.backends["127.0.0.33"].set("95")
    env.backends["127.0.0.34"].set("10")
    t = env.wait_only("js", {"127.0.0.34"})
    print("  json 95: 127.0.0.33 left out after %.2f s" % t)
    methods = set(env.backends["127.0.0.33"].seen())
    expect(methods == {"GET"}, "a JSON load is read with GET: methods %s" % methods)
    env.backends["127.0.0.33"].set("95", big=True)
    env.wait_load("js", "127.0.0.33", "unknown")
    t = env.wait_only("js", {"127.0.0.33", "127.0.0.34"}, n=60)
    print("  a body over 64 KiB: load unknown, 127.0.0.33 back after %.2f s" % t)
    rec = env.records("js")["127.0.0.33"]
    expect(rec["shed"] == "load unknown: treated as unloaded", "explain .33: %s" % rec)
    # rr between the watermarks: left out by a draw, (70 - 50) / (90 - 50) = 1/2 of the time
    env.backends["127.0.0.33"].set("70")
    env.wait_load("js", "127.0.0.33", 70)
    got = env.sample("js", 800)
    share = got.get("127.0.0.33", 0) / 800.0
    print("  json 70 of 50..90, rr: 127.0.0.33 in %.3f of 800 answers (expected 1/4)" % share)
    expect(0.14 <= share <= 0.36, "share %.3f of .33 at 70 with rr: want about 1/4" % share)
    env.backends["127.0.0.33"].set("10")


def check_redis(env):
    env.redis.cmd("HSET", "tern:load", "127.0.0.35", "95")
    env.redis.cmd("HSET", "tern:load", "127.0.0.36", "12.5")
    t = env.wait_only("rd", {"127.0.0.36"})
    print("  redis 95: 127.0.0.35 left out after %.2f s" % t)
    env.wait_load("rd", "127.0.0.36", 12.5)
    env.redis.cmd("HSET", "tern:load", "127.0.0.35", "not a number")
    env.wait_load("rd", "127.0.0.35", "unknown")
    env.redis.cmd("HSET", "tern:load", "127.0.0.35", "95")
    env.wait_only("rd", {"127.0.0.36"})
    env.redis.cmd("HDEL", "tern:load", "127.0.0.35")
    t = env.wait_only("rd", {"127.0.0.35", "127.0.0.36"}, n=60)
    print("  HDEL: 127.0.0.35 back after %.2f s" % t)


def check_explain(env):
    env.backends["127.0.0.31"].set("0.95")
    env.backends["127.0.0.32"].set("0.6")
    env.wait_load("hdr", "127.0.0.31", 0.95)
    env.wait_load("hdr", "127.0.0.32", 0.6)
    ex = env.explain("hdr")
    sel = ex["selection"][0]
    expect(sel["shed"] == {"low": 0.5, "high": 0.9, "fail_open": False}, "shed %s" % sel["shed"])
    rec = {r["rdata"]: r for r in sel["record"]}
    expect(rec["127.0.0.31"]["fate"] == "dropped by load (shed)"
           and rec["127.0.0.31"]["shed"] == "at or above high: left out", "%s" % rec)
    expect(rec["127.0.0.32"]["fate"] == "given" and rec["127.0.0.32"]["weight_scaled"] == 75,
           "%s" % rec["127.0.0.32"])
    expect(sel["given"] == ["127.0.0.32"], "given %s" % sel["given"])
    text = env.tern.ctl("explain", "hdr." + ZONE, "A", "--client", LOOPBACK).stdout
    for want in ("load=0.95", "fate=dropped by load (shed)", "load=0.6"):
        expect(want in text, "explain text lacks %r:\n%s" % (want, text))
    print("  explain: .31 load 0.95 left out, .32 load 0.6 weight 100 -> 75")


def check_dnssec(env):
    env.backends["127.0.0.31"].set("0.95")
    env.backends["127.0.0.32"].set("0.1")
    env.wait_only("hdr", {"127.0.0.32"})
    u = servers.Unbound(env.work, "unbound", [(ZONE, env.tern.port, env.keys.ds)])
    u.start()
    try:
        for _ in range(3):
            r = u.ask("hdr." + ZONE, "A")
            addrs = sorted(rd.address for rs in r.answer if rs.rdtype == dns.rdatatype.A
                           for rd in rs)
            sigs = [rs for rs in r.answer if rs.rdtype == dns.rdatatype.RRSIG]
            expect(r.flags & dns.flags.AD and addrs == ["127.0.0.32"] and sigs,
                   "unbound: flags %s answer %s\n%s" % (dns.flags.to_text(r.flags), r.answer,
                                                        u.log_text()))
        print("  unbound: the shed answer %s validates (AD)" % addrs)
    finally:
        u.stop()


def check_redis_stale(env):
    env.redis.cmd("HSET", "tern:load", "127.0.0.35", "95")
    env.redis.cmd("HSET", "tern:load", "127.0.0.36", "10")
    env.wait_only("rd", {"127.0.0.36"})
    env.redis.stop()  # no more polls: the last reading ages out after 3 of them
    start = time.monotonic()
    env.wait_load("rd", "127.0.0.35", "unknown")
    t = time.monotonic() - start
    env.wait_only("rd", {"127.0.0.35", "127.0.0.36"}, n=60)
    print("  redis stopped: the loads unknown (not shed) after %.2f s (3 polls: %.1f s)"
          % (t, 3 * INTERVAL / 1000.0))
    expect(t >= 2 * INTERVAL / 1000.0, "a reading went unknown after %.2f s, before 3 polls" % t)


def check_no_redis(env, args):
    """A zone whose shed reads Redis, with no health: redis: said once in the log."""
    yaml = ('health: {check_interval_ms: %d}\nzones:\n  - origin: %s\n    file: "%s"\n'
            % (INTERVAL, ZONE, env.zpath))
    t = YamlTernd(env.work, env.tern.binary, yaml, name="tern-noredis")
    t.start(ZONE)
    try:
        want = "shed block reads loads from Redis, but health: redis is not configured"
        servers.wait_until(lambda: t.log_has(want), WAIT, "the warning %r" % want)
        time.sleep(2.5)  # more polls (1 s apart by default): still one warning
    finally:
        t.stop()
    expect(t.log_text(limit=400000).count(want) == 1, "the warning is said once")


def check_bad_block(env, args):
    soa = {"ttl": 300, "ns": "ns1.bad.test.", "mbox": "h.bad.test.", "refresh": 3600,
           "retry": 600, "expire": 86400, "minttl": 60, "serial": 1}
    hc = {"enable": True, "port": 80}
    cases = [({"low": 0.9, "high": 0.5, "header": "X"}, hc, "label www: a.shed: low (0.9) must be below"),
             ({"low": 1, "high": 2, "header": "X", "redis": "k"}, hc,
              "label www: a.shed: give one load source, not header and redis"),
             ({"low": 1, "high": 2, "header": "X"}, None,
              "label www: a.shed.header: a load source needs an enabled health_check block"),
             ({"low": 1, "high": 2, "snmp": "X"}, hc, "label www: a.shed.snmp: unknown load source"),
             ({"low": "x", "high": 2, "header": "X"}, hc, "label www: a.shed.low: expected a number")]
    for i, (shed, check, want) in enumerate(cases):
        rrset = {"records": a("192.0.2.1"), "shed": shed}
        if check:
            rrset["health_check"] = check
        z = {"config": {"soa": soa}, "records": {"www": {"a": rrset}}}
        d = os.path.join(env.work, "bad%d" % i)
        os.makedirs(d)
        with open(os.path.join(d, "bad.json"), "w") as f:
            json.dump(z, f)
        conf = os.path.join(d, "ternd.yaml")
        with open(conf, "w") as f:
            f.write('listen: ["127.0.0.1:0"]\nhealth: {}\nzones:\n  - origin: bad.test.\n'
                    '    file: "%s"\n' % os.path.join(d, "bad.json"))
        p = subprocess.run([args.ternd, "-c", conf, "--check-config"], capture_output=True,
                           text=True, timeout=60)
        out = p.stdout + p.stderr
        expect(p.returncode != 0 and "bad.test" in out and want in out,
               "case %d: exit %d, want %r in:\n%s" % (i, p.returncode, want, out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--ternctl", default=os.environ.get("TERNCTL"))
    ap.add_argument("--only", help="run only these checks (comma-separated)")
    args = ap.parse_args()
    if not args.ternd or not args.ternctl:
        ap.error("--ternd and --ternctl are required")
    work = tempfile.mkdtemp(prefix="tern-shed-")
    tern = redis = None
    backends = {}
    ok = False
    try:
        http_port, tcp_port = servers.free_port(), servers.free_port()
        for last in range(31, 35):
            addr = "127.0.0.%d" % last
            backends[addr] = Backend(addr, http_port)
            backends[addr].start()
        tcp = [servers.socket.create_server((addr, tcp_port)) for addr in
               ("127.0.0.35", "127.0.0.36")]
        redis = Redis(work)
        redis.start()
        data = os.path.join(work, "data")
        os.makedirs(data)
        out = subprocess.run([args.ternctl, "dnssec", "keygen", ZONE.rstrip("."), "-d", data],
                             check=True, timeout=60, capture_output=True, text=True).stdout
        stems = [os.path.join(data, os.path.basename(s)) for s in out.split()]
        ds = subprocess.run([servers.find_program("dnssec-dsfromkey"), "-2", stems[0] + ".key"],
                            check=True, timeout=60, capture_output=True, text=True).stdout
        m = re.search(r"DS\s+(\d+ \d+ \d+ [0-9A-Fa-f]+)\s*$", ds.strip())
        expect(m, "dnssec-dsfromkey: %r" % ds)

        class Keys:
            pass
        keys = Keys()
        keys.ds = m.group(1)
        zpath = os.path.join(data, "shed.json")
        with open(zpath, "w") as f:
            json.dump(shed_zone(http_port, tcp_port), f, indent=1)
        yaml = ('health:\n  check_interval_ms: %d\n  redis: {address: "%s:%d"}\n'
                'load: {redis_poll_ms: %d}\n'
                'zones:\n  - origin: %s\n    file: "%s"\n    dnssec: {keys: [%s]}\n'
                % (INTERVAL, LOOPBACK, redis.port, INTERVAL, ZONE, zpath,
                   ", ".join('"%s"' % s for s in stems)))
        tern = YamlTernd(work, args.ternd, yaml, ternctl=args.ternctl)
        tern.start(ZONE)
        env = Env(tern, backends, redis, keys, work)
        env.zpath = zpath
        checks = [("header_out", check_header_out), ("scaled", check_scaled),
                  ("fail_open", check_fail_open), ("json", check_json), ("redis", check_redis),
                  ("explain", check_explain), ("dnssec", check_dnssec),
                  ("redis_stale", check_redis_stale), ("no_redis", lambda e: check_no_redis(e, args)),
                  ("bad_block", lambda e: check_bad_block(e, args))]
        only = set(args.only.split(",")) if args.only else None
        results = []
        for name, fn in checks:
            if only is None or name in only:
                run_check(results, name, lambda fn=fn: fn(env))
        for s in tcp:
            s.close()
        tern.stop()
        ok = servers.finish(tern, results) == 0
        tern = None
    finally:
        if tern:
            tern.stop()
        if redis:
            redis.stop()
        for b in backends.values():
            b.stop()
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("work dir kept: %s" % work)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
