#!/usr/bin/python3
"""What query logging costs, and what a stalled reader does: tern with and without its logs.

    /usr/bin/python3 bench/qlog.py                      # 5 interleaved rounds of 6 s
    /usr/bin/python3 bench/qlog.py --runs 1 --secs 3    # a quick look

ternd runs one worker pinned to CPU 0 on the 100k-name bench zone; dnsperf (-c 4 -q 200) runs on
CPU 1, as in run.py. Two parts:

cost     dnsperf at --rate q/s (default 50,000) on queries.txt; the server's CPU (its whole
         process: the worker, the log writer, fstrm's I/O thread) per answered query for
           off        no query_log
           dnstap     dnstap, queries and responses, to a real fstrm_capture writing a file
                      (the reader runs on CPU 1 with dnsperf: its CPU is not tern's)
           requests   redins' JSON request log to a file
           both       both sinks
         interleaved over --runs, medians and the ratios to off.
stalled  dnstap (both directions) to an fstrm_capture that is stopped (SIGSTOP) before the load:
         dnsperf at --stall-rate q/s (default 100,000) for --secs; reported: queries answered and
         lost, records logged, records the ring dropped, dnstap messages Frame Streams refused
         (from /metrics), and the server CPU per answered query.

Raw data in bench/results/qlog-<date>.json. Only processes started here are stopped; all traffic
stays on loopback.
"""

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True
import run  # noqa: E402

KINDS = ["off", "dnstap", "requests", "both"]


def log(*a):
    run.log(*a)


class Capture:
    """fstrm_capture reading dnstap from a UNIX socket into a file, on the client CPU."""

    def __init__(self, d):
        self.sock = os.path.join(d, "dnstap.sock")
        self.out = os.path.join(d, "capture.fstrm")
        self.proc = subprocess.Popen(
            ["taskset", "-c", run.CLIENT_CPU, "fstrm_capture", "-t", "protobuf:dnstap.Dnstap",
             "-u", self.sock, "-w", self.out], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 5
        while not os.path.exists(self.sock):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("fstrm_capture did not start")
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def start(args, kind, d, zonefile):
    """ternd with the query log of kind (and metrics); the capture, if any."""
    cap = Capture(d) if kind in ("dnstap", "both") else None
    mport = run.free_port()
    conf = os.path.join(d, "qlog.yaml")
    with open(conf, "w") as f:
        f.write('metrics_listen: "127.0.0.1:%d"\n' % mport)
        if kind != "off":
            f.write("query_log:\n")
        if cap:
            f.write('  dnstap:\n    socket: "%s"\n' % cap.sock)
        if kind in ("requests", "both"):
            f.write('  requests:\n    target: file\n    format: json\n    path: "%s"\n'
                    % os.path.join(d, "requests.log"))
    orig = run.Tern.argv
    run.Tern.argv = lambda self: orig(self) + ["-c", conf]
    try:
        r = run.start_server(args, "tern", zonefile)
    except Exception:
        if cap:
            cap.stop()
        raise
    finally:
        run.Tern.argv = orig
    return r, cap, mport


def metrics(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("tern_qlog_"):
            k, v = line.split()
            out[k] = float(v)
    return out


def cost_run(args, zd, kind):
    d = tempfile.mkdtemp(prefix="qlog-", dir=os.path.join(run.CACHE, "run"))
    r, cap, mport = start(args, kind, d, os.path.join(zd, "bench.test.zone"))
    try:
        time.sleep(0.3)
        m = run.measure(r, [run.dnsperf_argv(r.srv.port, os.path.join(zd, "queries.txt"),
                                             args.secs, rate=args.rate)], args.secs)
        rec = {"cpu_us_per_q": m["cpu_us_per_q"], "lost": m["lost"], "qps": m["qps"]}
        rec.update(metrics(mport))
    finally:
        r.stop()
        if cap:
            cap.stop()
        subprocess.run(["rm", "-rf", d])
    return rec


def stall_run(args, zd):
    d = tempfile.mkdtemp(prefix="qlog-", dir=os.path.join(run.CACHE, "run"))
    r, cap, mport = start(args, "dnstap", d, os.path.join(zd, "bench.test.zone"))
    try:
        time.sleep(0.5)
        cap.proc.send_signal(signal.SIGSTOP)  # the reader stalls: the socket fills, then fstrm
        m = run.measure(r, [run.dnsperf_argv(r.srv.port, os.path.join(zd, "queries.txt"),
                                             args.secs, rate=args.stall_rate)], args.secs)
        rec = {"sent": m["sent"], "completed": m["completed"], "lost": m["lost"],
               "qps": m["qps"], "cpu_us_per_q": m["cpu_us_per_q"]}
        rec.update(metrics(mport))
    finally:
        r.stop()
        cap.stop()
        subprocess.run(["rm", "-rf", d])
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--secs", type=int, default=6)
    ap.add_argument("--rate", type=int, default=50000)
    ap.add_argument("--stall-rate", type=int, default=100000)
    ap.add_argument("--parts", default="cost,stalled")
    ap.add_argument("--ternd", default=os.path.join(run.ROOT, "build-bench", "ternd"))
    ap.add_argument("--load-timeout", type=float, default=120)
    args = ap.parse_args()
    zd, _ = run.ensure_zone("100k")
    os.makedirs(os.path.join(run.CACHE, "run"), exist_ok=True)
    os.makedirs(os.path.join(BENCH, "results"), exist_ok=True)
    parts = args.parts.split(",")
    res = {"meta": {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S UTC"),
                    "args": vars(args)}, "cost": {k: [] for k in KINDS}, "stalled": []}
    if "cost" in parts:
        for i in range(args.runs):
            order = KINDS[i % len(KINDS):] + KINDS[:i % len(KINDS)]
            for kind in order:
                rec = cost_run(args, zd, kind)
                res["cost"][kind].append(rec)
                log("round %d %-8s %.3f us/q lost %d dropped %s" % (
                    i, kind, rec["cpu_us_per_q"], rec["lost"],
                    rec.get("tern_qlog_dropped_total", "-")))
        base = statistics.median(r["cpu_us_per_q"] for r in res["cost"]["off"])
        for kind in KINDS:
            v = [r["cpu_us_per_q"] for r in res["cost"][kind]]
            per = [a / b["cpu_us_per_q"] for a, b in zip(v, res["cost"]["off"])]
            print("%-8s median %.3f us/q  ratio %.3f  (per-round ratios %s)" % (
                kind, statistics.median(v), statistics.median(v) / base,
                [round(x, 3) for x in per]))
    if "stalled" in parts:
        rec = stall_run(args, zd)
        res["stalled"].append(rec)
        print("stalled reader at %d q/s: answered %d of %d (lost %d), %.3f us/q; records %d, "
              "ring drops %d, dnstap refused %d" % (
                  args.stall_rate, rec["completed"], rec["sent"], rec["lost"],
                  rec["cpu_us_per_q"], rec.get("tern_qlog_records_total", 0),
                  rec.get("tern_qlog_dropped_total", 0),
                  rec.get("tern_qlog_dnstap_dropped_total", 0)))
    out = os.path.join(BENCH, "results",
                       "qlog-%s.json" % datetime.datetime.utcnow().strftime("%Y%m%d-%H%M%S"))
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    log("raw data: %s" % out)


if __name__ == "__main__":
    main()
