#!/usr/bin/python3
"""What flood resistance costs, and what it holds: tern beside Knot and NSD.

    /usr/bin/python3 bench/limit.py                      # 3 interleaved runs of 10 s
    /usr/bin/python3 bench/limit.py --runs 1 --secs 3    # a quick look

Every server runs one UDP worker pinned to CPU 0 (taskset) on the 100k-name bench zone
(bench/gen_zone.py); every load generator runs on CPU 1. Two parts, interleaved over --runs:

cost     dnsperf at --rate q/s (default 50,000; -c 4 -q 200) on queries.txt from 127.0.0.1, every
         query carrying the same 8-byte client cookie (-E 10:...), so every config sees the same
         packets. The server's CPU (utime+stime of its whole process tree, /proc/PID/stat) per
         answered query, for:
           tern-off           no limits
           tern-rrl+cookies   rrl (rate high enough never to limit this load: the bookkeeping,
                              not the limiting, is measured) and cookies (a server cookie made
                              for every answer)
           tern-all           the same, plus a global acl of 100 prefixes and redins' ratelimit
           knot-off, knot-rrl Knot with mod-rrl at the same rate (its mod-cookies answers a
                              client cookie alone with BADCOOKIE over UDP, so it would not be
                              the same work: Knot's cookies are only in the flood part)
           nsd-off, nsd-rrl   NSD's rrl (Debian's NSD 4.6 has no cookies)
         and the ratios on/off per server.

flood    RRL as deployed (20 responses/s per /24 and class, slip 2; tern and Knot with cookies):
           one-source   bench/spoof.c at --flood-rate q/s (default 100,000) asking
                        "bench.test. MX" from 127.0.0.2, one port, where it listens itself as
                        the victim of the reflection and counts what it gets (dnsperf cannot
                        flood: it waits for answers a limiter drops), while a legitimate
                        client (dnsperf -a 127.0.1.1, 100 q/s on queries.txt) asks beside it
           random-source  bench/spoof.c (a raw socket: random sources in 127.16.0.0/12, so
                        every /24 is a different client) at --flood-rate q/s on nxflood.txt,
                        the same legitimate client beside it
           .../off      the same floods on tern without any limit, for contrast
         Reported: the legitimate client's losses, the bytes the victim received / the bytes of
         the queries (DNS payloads: the amplification), the share of queries answered at all
         and truncated (slips), the server CPU per offered query, kernel receive-buffer drops
         (RcvbufErrors).

Medians over the runs, raw data in bench/results/limit-<date>.json, a summary in
bench/results/latest-limit.md. Needs root (spoof's raw socket; taskset). Only processes started
here are stopped; all traffic stays on loopback.
"""

import argparse
import datetime
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True
import run  # noqa: E402  (zone, dnsperf argv and parsing, CPU accounting, server lifecycle)

COOKIE_HEX = "0123456789abcdef"  # the client cookie every cost query carries
SECRET = "e5e973e5a6b2a43f48e7dc849e37bfcf"
HIGH = 1000000  # an RRL rate that never limits the cost load
DEPLOYED_RATE = 20
LEGIT_SRC = "127.0.1.1"
ATTACK_SRC = "127.0.0.2"


def log(*a):
    print("[%s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


# ---- servers with their limit configs ------------------------------------------------------

def tern_limits(kind, rate):
    if kind == "off":
        return ""
    y = "rrl:\n  rate: %d\n  slip: 2\ncookies:\n  secret: \"%s\"\n" % (rate, SECRET)
    if kind == "all":
        rnd = random.Random(13)
        deny = ", ".join("10.%d.%d.0/24" % (rnd.randrange(256), rnd.randrange(256))
                         for _ in range(99))
        y += ("acl:\n  allow: [127.0.0.0/8]\n  deny: [192.0.2.0/24, %s]\n" % deny +
              "ratelimit:\n  rate: 6000000\n  burst: 100000\n  whitelist: [127.0.0.3]\n")
    return y


class Tern(run.Tern):
    def __init__(self, args, zonefile, workdir, kind="off", rate=HIGH):
        super().__init__(args, zonefile, workdir)
        self.kind, self.rate = kind, rate

    def argv(self):
        conf = os.path.join(self.dir, "ternd.yaml")
        with open(conf, "w") as f:
            f.write('listen: ["127.0.0.1:%d"]\nworkers: 1\n' % self.port)
            if os.geteuid() == 0:
                f.write("allow_root: true\n")
            f.write(tern_limits(self.kind, self.rate))
            f.write('zones:\n  - origin: "%s"\n    file: "%s"\n' % (run.ORIGIN, self.zonefile))
        return [self.args.ternd, "-c", conf]


def edited(argv, edit):
    """argv of a run.py server whose config file (its last argument) edit(text) rewrites."""
    with open(argv[-1]) as f:
        text = f.read()
    with open(argv[-1], "w") as f:
        f.write(edit(text))
    return argv


class Knot(run.Knot):
    def __init__(self, args, zonefile, workdir, kind="off", rate=HIGH):
        super().__init__(args, zonefile, workdir)
        self.kind, self.rate = kind, rate

    def argv(self):
        if self.kind == "off":
            return super().argv()
        mods = "mod-rrl:\n  - id: r\n    rate-limit: %d\n    slip: 2\n" % self.rate
        glob = "mod-rrl/r"
        if self.kind != "rrl":
            mods += "mod-cookies:\n  - id: c\n    secret: 0x%s\n" % SECRET
            glob = "[mod-cookies/c, mod-rrl/r]"
        return edited(super().argv(), lambda t: t.replace("template:\n", mods + "template:\n", 1)
                      .replace("    semantic-checks: off\n",
                               "    semantic-checks: off\n    global-module: %s\n" % glob, 1))


class Nsd(run.Nsd):
    def __init__(self, args, zonefile, workdir, kind="off", rate=HIGH):
        super().__init__(args, zonefile, workdir)
        self.kind, self.rate = kind, rate

    def argv(self):
        if self.kind == "off":
            return super().argv()
        rrl = ("    rrl-ratelimit: %d\n    rrl-slip: 2\n    rrl-size: 1000000\n"
               "    rrl-whitelist-ratelimit: %d\n" % (self.rate, self.rate))
        return edited(super().argv(), lambda t: t.replace("    rrl-ratelimit: 0\n", rrl, 1))


CLASSES = {"tern": Tern, "knot": Knot, "nsd": Nsd}


def start(args, server, kind, rate, zonefile):
    wd = tempfile.mkdtemp(prefix="tern-limit-%s-" % server, dir=os.path.join(run.CACHE, "run"))
    srv = CLASSES[server](args, os.path.abspath(zonefile), wd, kind, rate)
    r = run.Running(srv)
    if not r.wait_ready(args.load_timeout):
        tail = r.log_tail()
        r.stop()
        raise RuntimeError("%s (%s) did not come up:\n%s" % (server, kind, tail))
    return r


# ---- load ------------------------------------------------------------------------------------

def dnsperf(port, qfile, secs, rate, src="127.0.0.1", clients=4, outstanding=200, extra=()):
    argv = run.dnsperf_argv(port, qfile, secs, rate=rate, clients=clients,
                            outstanding=outstanding)
    return argv[:3] + ["dnsperf", "-a", src] + argv[4:] + list(extra)


def sizes(out):
    m = re.search(r"Average packet size:\s+request (\d+), response (\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def parsed(out):
    p = run.parse_dnsperf(out)
    if p["completed"] is None:
        raise RuntimeError("dnsperf failed:\n" + out[-2000:])
    p["req_size"], p["resp_size"] = sizes(out)
    return p


def cost_run(args, zd, server, kind):
    r = start(args, server, kind, HIGH, os.path.join(zd, "bench.test.zone"))
    try:
        cpu, drops, _, outs = run.run_jobs(r, [dnsperf(r.srv.port, os.path.join(zd, "queries.txt"),
                                                args.secs, args.rate,
                                                extra=["-E", "10:" + COOKIE_HEX])], args.secs)
        p = parsed(outs[0])
        rec = {"completed": p["completed"], "lost": p["lost"], "qps": p["qps"],
               "rcodes": p["rcodes"], "rcvbuf_errors": drops,
               "cpu_us_per_q": round(cpu * 1e6 / p["completed"], 3) if p["completed"] else None}
    finally:
        r.stop()
    return rec


def flood_run(args, zd, server, kind):
    kind_cfg = kind if server != "nsd" else "rrl"
    if kind.endswith("/off"):  # the same flood on a server without limits, for contrast
        kind, kind_cfg = kind[:-4], "off"
    r = start(args, server, kind_cfg, DEPLOYED_RATE, os.path.join(zd, "bench.test.zone"))
    port = r.srv.port
    legit = dnsperf(port, os.path.join(zd, "queries.txt"), args.secs, 100, src=LEGIT_SRC,
                    clients=1, outstanding=10)
    try:
        if kind == "one-source":
            mx = os.path.join(run.CACHE, "run", "mx.txt")
            with open(mx, "w") as f:
                f.write("bench.test. MX\n")
            attack = ["taskset", "-c", run.CLIENT_CPU, args.spoof, "-p", str(port), "-d", mx,
                      "-Q", str(args.flood_rate), "-l", str(args.secs), "-s", ATTACK_SRC + "/32",
                      "-v", str(run.free_port())]
        else:
            attack = ["taskset", "-c", run.CLIENT_CPU, args.spoof, "-p", str(port), "-d",
                      os.path.join(zd, "nxflood.txt"), "-Q", str(args.flood_rate), "-l",
                      str(args.secs)]
        cpu, drops, _, outs = run.run_jobs(r, [attack, legit], args.secs)
        lg = parsed(outs[1])
        rec = {"legit_sent": lg["sent"], "legit_lost": lg["lost"], "rcvbuf_errors": drops}
        m = re.match(r"sent (\d+) in", outs[0])
        if not m:
            raise RuntimeError("spoof failed:\n" + outs[0][-2000:])
        sent = rec["attack_sent"] = int(m.group(1))
        v = re.search(r"victim: received (\d+) responses \((\d+) truncated\), (\d+) bytes for "
                      r"(\d+) query bytes", outs[0])
        if kind == "one-source":
            if not v:
                raise RuntimeError("spoof reported no victim:\n" + outs[0][-2000:])
            resp, tc, rb, qb = (int(x) for x in v.groups())
            rec.update({"answered_pct": round(100.0 * resp / sent, 2),
                        "truncated_pct": round(100.0 * tc / sent, 2),
                        "full_answers": resp - tc,
                        "amplification": round(rb / qb, 4)})
        rec["cpu_us_per_offered_q"] = round(cpu * 1e6 / (sent + lg["sent"]), 3)
    finally:
        r.stop()
    return rec


COST = [("tern", "off"), ("tern", "rrl+cookies"), ("tern", "all"), ("knot", "off"),
        ("knot", "rrl"), ("nsd", "off"), ("nsd", "rrl")]
FLOOD = [(s, k) for k in ("one-source", "random-source") for s in ("tern", "knot", "nsd")] + [
    ("tern", "one-source/off"), ("tern", "random-source/off")]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--secs", type=int, default=10)
    ap.add_argument("--rate", type=int, default=50000, help="cost load, q/s")
    ap.add_argument("--flood-rate", type=int, default=100000, help="attacker q/s")
    ap.add_argument("--parts", default="cost,flood")
    ap.add_argument("--servers", default="tern,knot,nsd")
    ap.add_argument("--ternd", default=os.path.join(run.ROOT, "build-bench", "ternd"))
    ap.add_argument("--build", action="store_true", help="rebuild build-bench/ternd first")
    ap.add_argument("--load-timeout", type=float, default=120)
    args = ap.parse_args()
    if os.geteuid() != 0:
        ap.error("needs root (raw socket for the spoofed flood, taskset)")
    os.makedirs(os.path.join(run.CACHE, "run"), exist_ok=True)
    if not run.ensure_ternd(args):
        return 1
    args.spoof = os.path.join(run.CACHE, "spoof")
    src = os.path.join(BENCH, "spoof.c")
    if not os.path.exists(args.spoof) or os.path.getmtime(args.spoof) < os.path.getmtime(src):
        subprocess.run(["cc", "-std=c17", "-O2", "-Wall", "-Wextra", "-Werror", "-o", args.spoof,
                        src], check=True)
    args.zone = "100k"
    zd, _ = run.ensure_zone(args)
    servers = args.servers.split(",")
    parts = args.parts.split(",")
    results = {"cost": {}, "flood": {}}
    for i in range(args.runs):
        if "cost" in parts:
            for s, k in COST:
                if s in servers:
                    rec = cost_run(args, zd, s, k)
                    log("run %d cost %s %s: %s" % (i + 1, s, k, json.dumps(rec)))
                    results["cost"].setdefault("%s %s" % (s, k), []).append(rec)
        if "flood" in parts:
            for s, k in FLOOD:
                if s in servers:
                    rec = flood_run(args, zd, s, k)
                    log("run %d flood %s %s: %s" % (i + 1, s, k, json.dumps(rec)))
                    results["flood"].setdefault("%s %s" % (s, k), []).append(rec)

    lines = ["# flood resistance: %s, %d runs of %d s" % (datetime.date.today(), args.runs,
                                                            args.secs), ""]
    if results["cost"]:
        lines += ["## cost at %d q/s (server CPU µs per answered query, medians)" % args.rate, "",
                  "| server config | µs/query | vs its off | lost | rcvbuf drops |",
                  "|---|---|---|---|---|"]
        meds = {k: med([r["cpu_us_per_q"] for r in v]) for k, v in results["cost"].items()}
        for k, v in results["cost"].items():
            off = meds.get(k.split()[0] + " off")
            ratio = "%.3f" % (meds[k] / off) if off and meds[k] else "-"
            lines.append("| %s | %.3f | %s | %s | %s |" % (k, meds[k], ratio,
                                                           med([r["lost"] for r in v]),
                                                           med([r["rcvbuf_errors"] for r in v])))
        lines.append("")
    if results["flood"]:
        lines += ["## floods at %d q/s, RRL %d/s slip 2 (medians)" % (args.flood_rate,
                                                                     DEPLOYED_RATE), "",
                  "| server flood | attacker sent | answered % | TC % | full answers "
                  "| amplification | legit lost | µs/offered query | rcvbuf drops |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for k, v in results["flood"].items():
            def m(key):
                x = med([r.get(key) for r in v])
                return "-" if x is None else ("%g" % x)
            lines.append("| %s | %s | %s | %s | %s | %s | %s of %s | %s | %s |" % (
                k, m("attack_sent"), m("answered_pct"), m("truncated_pct"), m("full_answers"),
                m("amplification"), m("legit_lost"), m("legit_sent"), m("cpu_us_per_offered_q"),
                m("rcvbuf_errors")))
        lines.append("")
    text = "\n".join(lines)
    print(text)
    os.makedirs(run.RESULTS, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    with open(os.path.join(run.RESULTS, "limit-%s.json" % stamp), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(run.RESULTS, "latest-limit.md"), "w") as f:
        f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
