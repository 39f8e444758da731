#!/usr/bin/python3
"""A/B: two (or more) ternd builds, or a peer, alternated round by round at a fixed rate.

    /usr/bin/python3 bench/ab.py base=/tmp/ternd-old head=build-bench/ternd [--runs 7]
    /usr/bin/python3 bench/ab.py head=build-bench/ternd gdnsd

Each variant is LABEL=PATH (a ternd binary) or a peer's name (gdnsd, knot, nsd, reflector).
Every round starts each variant fresh in a rotated order (one worker on CPU 0, dnsperf on CPU 1
at --rate q/s for --secs on the --zone bench zone) and records the server's CPU per answered
query. Printed: each variant's median, its ratio to the first variant's median, and the median
of the per-round ratios (the figure to quote: the machine's drift cancels within a round).
"""
import argparse
import os
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True
import run as R  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("variants", nargs="+", help="LABEL=PATH of a ternd, or a peer's name")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--secs", type=int, default=6)
    ap.add_argument("--rate", type=int, default=50000)
    ap.add_argument("--q", default="queries.txt", help="the query file of the zone directory")
    ap.add_argument("--zone", default="z100k")
    a = ap.parse_args()
    zd = os.path.join(R.CACHE, a.zone)
    if not os.path.exists(os.path.join(zd, "manifest.json")):
        sys.exit("no %s: run bench/run.py once (or gen_zone.py) to make it" % zd)
    os.makedirs(os.path.join(R.CACHE, "run"), exist_ok=True)
    res = {}

    class Args:
        load_timeout = 120

    for r in range(a.runs):
        order = a.variants[r % len(a.variants):] + a.variants[:r % len(a.variants)]
        for v in order:
            label, _, path = v.partition("=")
            args = Args()
            args.ternd = os.path.abspath(path) if path else None
            name = "tern" if path else label
            srv = R.start_server(args, name, os.path.join(zd, R.ORIGIN + "zone"))
            try:
                time.sleep(0.3)
                m = R.measure(srv, [R.dnsperf_argv(srv.srv.port, os.path.join(zd, a.q), a.secs,
                                                   rate=a.rate)], a.secs)
            finally:
                srv.stop()
            res.setdefault(label, []).append(m["cpu_us_per_q"])
            print("run %d %-10s %.3f us/q lost %d" % (r, label, m["cpu_us_per_q"], m["lost"]),
                  flush=True)
    base = a.variants[0].partition("=")[0]
    mb = statistics.median(res[base])
    for k, v in res.items():
        rr = [x / y for x, y in zip(v, res[base])]
        print("%-10s median %.3f us/q  ratio %.3f  median of per-round ratios %.3f  %s" % (
            k, statistics.median(v), statistics.median(v) / mb, statistics.median(rr),
            [round(x, 3) for x in rr]))


if __name__ == "__main__":
    main()
