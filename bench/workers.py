#!/usr/bin/python3
"""How evenly queries spread over workers, and what a second worker costs per query.

    /usr/bin/python3 bench/workers.py [--runs 3] [--secs 5] [--rate 40000] [--clients 4]

ternd on the 100k-name bench zone, not pinned (its workers may use both CPUs; with udp_steering
cpu it pins worker i to CPU i itself), dnsperf (--clients sockets in --threads threads, -q 200)
at --rate q/s, also unpinned: on loopback the receiving CPU is the sender's, so two sending
threads stand in for a NIC's receive queues. Variants, interleaved over --runs rounds:
  w1          one worker (the kernel's hash has nothing to choose)
  w2-hash     two workers, udp_steering: hash (the default: a 4-tuple hash per datagram)
  w2-random   two workers, udp_steering: random (a cBPF program: a random socket per datagram)
  w2-cpu      two workers, udp_steering: cpu (cBPF: the receiving CPU's worker, pinned)
Reported per variant (medians): the busiest worker's share of the workers' CPU, and the sum of
the workers' CPU per answered query, with its ratio to w1.

Raw data in bench/results/workers-<date>.json. Only processes started here are stopped.
"""

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True
import run  # noqa: E402

VARIANTS = {"w1": (1, "hash"), "w2-hash": (2, "hash"), "w2-random": (2, "random"),
            "w2-cpu": (2, "cpu")}


def worker_cpu(pid):
    return run.thread_cpu(pid, "tern-worker")


def one(args, zd, workers, steering):
    d = os.path.join(run.CACHE, "run")
    os.makedirs(d, exist_ok=True)
    port = run.free_port()
    conf = os.path.join(d, "workers-%d.yaml" % os.getpid())
    with open(conf, "w") as f:
        f.write('listen: ["127.0.0.1:%d"]\nworkers: %d\nallow_root: true\nudp_steering: %s\n'
                'zones:\n  - origin: bench.test\n    file: "%s/bench.test.zone"\n'
                % (port, workers, steering, zd))
    p = subprocess.Popen([args.ternd, "-c", conf], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + args.load_timeout
        while run.udp_query(port, run.ORIGIN, 6, timeout=0.05) is None:
            if time.monotonic() > deadline or p.poll() is not None:
                raise RuntimeError("ternd did not start")
            time.sleep(0.05)
        time.sleep(0.3)
        c0 = worker_cpu(p.pid)
        out = subprocess.run(["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d",
                              os.path.join(zd, "queries.txt"), "-l", str(args.secs), "-c",
                              str(args.clients), "-T", str(args.threads), "-q", "200", "-Q",
                              str(args.rate)],
                             capture_output=True, text=True, timeout=args.secs + 30).stdout
        c1 = worker_cpu(p.pid)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)
        os.unlink(conf)
    done = run.parse_dnsperf(out)["completed"]
    per = sorted((c1[t] - c0.get(t, 0) for t in c1), reverse=True)
    total = sum(per)
    return {"completed": done, "cpu_s": per, "share": per[0] / total if total else None,
            "us_per_q": total * 1e6 / done if done else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--secs", type=int, default=5)
    ap.add_argument("--rate", type=int, default=40000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2,
                    help="dnsperf threads: 2, so its datagrams leave from both CPUs")
    ap.add_argument("--ternd", default=os.path.join(run.ROOT, "build-bench", "ternd"))
    ap.add_argument("--load-timeout", type=float, default=120)
    args = ap.parse_args()
    zd, _ = run.ensure_zone("100k")
    names = list(VARIANTS)
    res = {n: [] for n in names}
    for i in range(args.runs):
        for n in names[i % len(names):] + names[:i % len(names)]:
            r = one(args, zd, *VARIANTS[n])
            res[n].append(r)
            run.log("round %d %-9s share %.2f  %.3f us/q  per worker %s" % (
                i, n, r["share"], r["us_per_q"], [round(x, 2) for x in r["cpu_s"]]))
    base = statistics.median(r["us_per_q"] for r in res["w1"])
    for n in names:
        us = statistics.median(r["us_per_q"] for r in res[n])
        print("%-9s busiest worker's share %.2f  workers' CPU %.3f us/q  ratio to w1 %.3f" % (
            n, statistics.median(r["share"] for r in res[n]), us, us / base))
    os.makedirs(run.RESULTS, exist_ok=True)
    out = os.path.join(run.RESULTS, "workers-%s.json" %
                       datetime.datetime.utcnow().strftime("%Y%m%d-%H%M%S"))
    with open(out, "w") as f:
        json.dump({"args": vars(args), "runs": res}, f, indent=1)
    run.log("raw data: %s" % out)


if __name__ == "__main__":
    main()
