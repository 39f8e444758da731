#!/usr/bin/python3
"""Zone load time: exec to the first authoritative answer, tern against its peers, one zone.

    /usr/bin/python3 bench/load.py [--zone 1m] [--runs 3] [--cpus 0] [tern gdnsd knot nsd]

Each round starts every server fresh in a rotated order on the bench zone (bench/gen_zone.py;
1m: 1,000,000 names, 1.33M records; 1m-rich: the same names, ~1.9M records, the richer mix of
gen_zone.py --mix rich) and records the time from exec to its first NOERROR SOA
answer and its PSS once loaded. --cpus is the taskset list the servers run on: "0" (one CPU, as
bench/run.py pins them) or "0,1" (the whole machine, as at a real startup). Medians, and each
server's ratio to tern's.
"""
import argparse
import os
import statistics
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True
import run as R  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("servers", nargs="*", default=["tern", "gdnsd", "knot", "nsd"])
    ap.add_argument("--zone", default="1m", choices=("100k", "1m", "1m-rich"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cpus", default=R.SERVER_CPU)
    ap.add_argument("--ternd", default=os.path.join(R.ROOT, "build-bench", "ternd"))
    ap.add_argument("--load-timeout", type=float, default=300)
    args = ap.parse_args()
    args.build = False
    zd, _ = R.ensure_zone(args)
    zf = os.path.join(zd, R.ORIGIN + "zone")
    R.SERVER_CPU = args.cpus
    os.makedirs(os.path.join(R.CACHE, "run"), exist_ok=True)
    res = {}
    n = len(args.servers)
    for rnd in range(args.runs):
        for name in args.servers[rnd % n:] + args.servers[:rnd % n]:
            r = R.start_server(args, name, zf)
            pss = R.pss_kb(r.pids())
            r.stop()
            res.setdefault(name, []).append((r.load_s, pss))
            R.log("round %d %-6s %.2f s, PSS %d MiB" % (rnd, name, r.load_s, pss // 1024))
    base = statistics.median(x[0] for x in res[args.servers[0]])
    for name, v in res.items():
        t = statistics.median(x[0] for x in v)
        print("%-6s load %.2f s (ratio to %s %.2f), PSS %d MiB" % (
            name, t, args.servers[0], t / base, statistics.median(x[1] for x in v) // 1024))


if __name__ == "__main__":
    main()
