#!/usr/bin/python3
"""Keys tern manages, on the 100,000-name zone: what each rollover step costs to sign, and what
a rollover costs the query path.

    /usr/bin/python3 bench/dnssec_keys.py                     # build-bench/ternd, both parts
    /usr/bin/python3 bench/dnssec_keys.py --parts steps
    /usr/bin/python3 bench/dnssec_keys.py --parts workers --runs 5 --secs 14 --rate 20000

ternd (release build, pinned to CPU 0, one worker, log_level debug) serves a private copy of
bench/.cache/z100k/bench.test.zone with `dnssec: {policy}` (algorithm 13; TTLs of 5 s and a
propagation delay of 1 s, so a ZSK rollover takes about 12 s) and allow_transfer, so every
version also gets its NSEC chain and RRSIGs for secondaries (tern/dnssec/dnssec_export.h).

  steps    each signing of the zone as the loader logs it (signatures made anew, taken over from
           the previous version, the export's, milliseconds on the loader thread), labelled by
           the key events of the same build: the first signing, the KSK's DS seen, one name
           added by UPDATE, and the three steps of a ZSK rollover (the new key published, the
           swap, the old key removed).
  workers  dnsperf at --rate q/s for --secs, ternd's worker thread's CPU per query, quiet and
           with a ZSK rollover started at the beginning of the window (all three of its steps
           fall inside it), rounds interleaved (--runs); the medians and their ratio.

Raw data: bench/results/dnssec_keys-<date>.json.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import run  # noqa: E402
import update as benchupdate  # noqa: E402  (its TSIG key)
import xfr as benchxfr  # noqa: E402  (TernX: ternd from a YAML config; started())

import dns.query  # noqa: E402
import dns.tsig  # noqa: E402
import dns.tsigkeyring  # noqa: E402
import dns.update  # noqa: E402

ORIGIN = run.ORIGIN
KEY, SECRET = benchupdate.KEY, benchupdate.SECRET
SIGNED = re.compile(r"dnssec: zone (\S+) serial (\d+): (\d+) signatures made, (\d+) taken over;"
                    r" export (\d+) made, (\d+) taken over; (\d+) ms")
EVENT = re.compile(r"dnssec: zone \S+: ((?:KSK|ZSK) \d+: \S+ → \S+|DS .* seen.*|\S+ rollover "
                   r"asked for)")


def start(args, tag):
    zd, _ = run.ensure_zone("100k")
    d = benchxfr.workdir(tag)
    zf = os.path.join(d, "bench.test.zone")
    shutil.copy(os.path.join(zd, "bench.test.zone"), zf)
    extra = f"""control_socket: "{d}/ctl.sock"
log_level: debug
tsig_keys:
  - {{name: {KEY}, algorithm: hmac-sha256, secret: "{SECRET}"}}
update_rate: 100000
dnssec_state_dir: "{d}/state"
dnssec_policies:
  - name: bench
    zsk_lifetime: 0
    propagation_delay: 1
    dnskey_ttl: 5
    parent_ds_ttl: 5
    zone_max_ttl: 5
zones:
  - origin: {ORIGIN}
    file: "{zf}"
    allow_update: [{KEY}]
    allow_transfer: [127.0.0.1]
    dnssec: {{policy: bench}}
"""
    t = benchxfr.started(benchxfr.TernX(args, zf, d, extra), args.load_timeout)
    t.dir = d
    return t, zd


def ctl(args, t, *words):
    return subprocess.run([args.ternctl, "-s", os.path.join(t.dir, "ctl.sock")] + list(words),
                          capture_output=True, text=True, timeout=120)


def log_text(t):
    with open(os.path.join(t.srv.dir, "server.log"), errors="replace") as f:
        return f.read()


def signings(t):
    """The signings logged so far, each with the key events logged just before it."""
    out, events = [], []
    for line in log_text(t).splitlines():
        m = EVENT.search(line)
        if m:
            events.append(m.group(1))
            continue
        m = SIGNED.search(line)
        if m:
            out.append({"serial": int(m.group(2)), "made": int(m.group(3)),
                        "reused": int(m.group(4)), "export_made": int(m.group(5)),
                        "export_reused": int(m.group(6)), "ms": int(m.group(7)),
                        "events": events})
            events = []
    return out


def wait_signings(t, n, limit):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if len(signings(t)) >= n:
            return
        time.sleep(0.2)
    raise RuntimeError("fewer than %d signings within %.0f s:\n%s" % (n, limit, log_text(t)[-3000:]))


def part_steps(args, res):
    t, _ = start(args, "steps")
    rows = []
    try:
        wait_signings(t, 1, 30)
        # the KSK is ready after dnskey/zone max TTL + propagation: its DS said seen
        t0 = time.monotonic()
        while "ds_wanted" not in ctl(args, t, "dnssec", "status").stdout:
            if time.monotonic() - t0 > 60:
                raise RuntimeError("no DS wanted: " + ctl(args, t, "dnssec", "status").stdout)
            time.sleep(0.5)
        n = len(signings(t))
        out = ctl(args, t, "dnssec", "ds-seen", ORIGIN)
        if out.returncode:
            raise RuntimeError("ds-seen: " + out.stderr)
        wait_signings(t, n + 1, 60)
        # one name added by UPDATE
        n = len(signings(t))
        u = dns.update.UpdateMessage(ORIGIN, keyring=dns.tsigkeyring.from_text({KEY: SECRET}),
                                     keyname=KEY, keyalgorithm=dns.tsig.HMAC_SHA256)
        u.add("bench-added." + ORIGIN, 60, "A", "198.51.100.7")
        dns.query.udp(u, "127.0.0.1", port=t.srv.port, timeout=60)
        wait_signings(t, n + 1, 60)
        # a ZSK rollover: published, swapped, removed
        n = len(signings(t))
        out = ctl(args, t, "dnssec", "rollover", ORIGIN, "zsk")
        if out.returncode:
            raise RuntimeError("rollover: " + out.stderr)
        wait_signings(t, n + 3, 90)
        labels = ["first signing", "KSK DS seen", "one name added (UPDATE)",
                  "ZSK rollover: new key published", "ZSK rollover: swap",
                  "ZSK rollover: old key removed"]
        got = signings(t)
        for label, s in zip(labels, got[:1] + got[-5:]):
            s["label"] = label
            rows.append(s)
            run.log("%-32s made %7d taken over %7d | export made %7d taken over %7d | %6d ms | %s" %
                (label, s["made"], s["reused"], s["export_made"], s["export_reused"], s["ms"],
                 "; ".join(s["events"])))
    finally:
        t.stop()
    res["steps"] = rows


def part_workers(args, res):
    rows = {"quiet": [], "rollover": []}
    for i in range(args.runs):
        for kind in (["quiet", "rollover"] if i % 2 == 0 else ["rollover", "quiet"]):
            t, zd = start(args, "w")
            try:
                wait_signings(t, 1, 30)
                t0 = time.monotonic()
                while "ds_wanted" not in ctl(args, t, "dnssec", "status").stdout:
                    if time.monotonic() - t0 > 60:
                        raise RuntimeError("no DS wanted")
                    time.sleep(0.5)
                n = len(signings(t))
                ctl(args, t, "dnssec", "ds-seen", ORIGIN)
                wait_signings(t, n + 1, 60)
                n = len(signings(t))
                if kind == "rollover":
                    ctl(args, t, "dnssec", "rollover", ORIGIN, "zsk")
                pid = t.proc.pid
                c0 = benchxfr.worker_cpu(pid)
                m = run.measure(t, [run.dnsperf_argv(t.srv.port, os.path.join(zd, "queries.txt"),
                                                     args.secs, rate=args.rate)], args.secs)
                c1 = benchxfr.worker_cpu(pid)
                steps = len(signings(t)) - n
                us = (c1 - c0) * 1e6 / m["completed"]
                rows[kind].append({"worker_us_per_q": round(us, 3),
                                   "server_us_per_q": m["cpu_us_per_q"], "lost": m["lost"],
                                   "signings_in_window": steps})
                run.log("round %d %-8s worker %.3f us/q, whole server %.3f us/q, lost %d, %d signings"
                    " in the window" % (i, kind, us, m["cpu_us_per_q"], m["lost"], steps))
            finally:
                t.stop()
    quiet = statistics.median(r["worker_us_per_q"] for r in rows["quiet"])
    roll = statistics.median(r["worker_us_per_q"] for r in rows["rollover"])
    print("workers: %.3f us/q quiet, %.3f during a ZSK rollover: %.3f" % (quiet, roll, roll / quiet))
    res["workers"] = rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="steps,workers")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--secs", type=int, default=16)
    ap.add_argument("--rate", type=int, default=20000)
    ap.add_argument("--ternd", default=os.path.join(run.ROOT, "build-bench", "ternd"))
    ap.add_argument("--ternctl", default=os.path.join(run.ROOT, "build-bench", "ternctl"))
    ap.add_argument("--load-timeout", type=float, default=180)
    args = ap.parse_args()
    os.makedirs(os.path.join(run.CACHE, "run"), exist_ok=True)
    os.makedirs(run.RESULTS, exist_ok=True)
    res = {"meta": {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S UTC"),
                    "args": vars(args)}}
    parts = args.parts.split(",")
    if "steps" in parts:
        part_steps(args, res)
    if "workers" in parts:
        part_workers(args, res)
    out = os.path.join(run.RESULTS, "dnssec_keys-%s.json" %
                       datetime.datetime.utcnow().strftime("%Y%m%d-%H%M%S"))
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print("raw data:", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
