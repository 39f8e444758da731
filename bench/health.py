#!/usr/bin/python3
"""What health checks cost: the checker itself at 10,000 endpoints, and the workers per query.

    /usr/bin/python3 bench/health.py                    # 10,000 endpoints every 1 s, 3 runs
    /usr/bin/python3 bench/health.py --runs 1 --secs 5  # a quick look

One redins-schema JSON zone, bench-health.test., with --endpoints A records spread over labels
of 100 (h0, h1, ...), every RRset with a health_check (http, HEAD /, on 127.1.x.y:PORT, which
bench/http_responder.c answers with 200 for every address of 127/8), plus two query targets:
"www" (4 plain A records) and "hc" (4 A records with a health_check, all up). Two configs of
the same ternd (Release, one worker, pinned to CPU 0 but for the checker thread, which runs on
CPU 1 with dnsperf and the HTTP responder), interleaved over --runs runs:

  off  health: ~            health_check objects are validated and nothing is checked
  on   health: {check_interval_ms: 1000, max_requests: 500}

Per run: once every endpoint is up (on), an idle window of --secs: the checker thread's CPU
("tern-health", utime+stime from /proc/PID/task/TID/stat) and its checks per second (ternctl
health), ternd's RSS and PSS; then dnsperf at --rate q/s (-c 4 -q 200) for --secs on www A and
on hc A: the worker thread's CPU µs per answered query ("tern-worker"), and the checker's CPU
meanwhile. Medians over the runs and the ratios on/off are printed; raw data goes to
bench/results/health-<date>.json. Only processes started here are stopped; all traffic is on
loopback.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True
import run  # noqa: E402  (helpers: free_port, dnsperf argv and parsing, pss, build)

ORIGIN = "bench-health.test"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print("[%s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def endpoint_addr(k):
    return "127.%d.%d.%d" % (1 + k // 65536, (k // 256) % 256, k % 256)


def write_zone(path, n, port):
    check = {"enable": True, "protocol": "http", "port": port, "uri": "/", "timeout": 1000,
             "up_count": 3, "down_count": 3}
    records = {"@": {"ns": {"records": [{"host": "ns1.%s." % ORIGIN}]}},
               "ns1": {"a": {"records": [{"ip": "192.0.2.53"}]}},
               "www": {"a": {"ttl": 60, "records": [{"ip": "192.0.2.%d" % i}
                                                    for i in range(1, 5)]}},
               "hc": {"a": {"ttl": 60, "records": [{"ip": "127.2.0.%d" % i} for i in range(1, 5)],
                            "health_check": check}}}
    for lab in range((n + 99) // 100):
        ips = [endpoint_addr(k) for k in range(lab * 100, min(n, lab * 100 + 100))]
        records["h%d" % lab] = {"a": {"ttl": 60, "records": [{"ip": ip} for ip in ips],
                                      "health_check": check}}
    soa = {"ttl": 300, "ns": "ns1.%s." % ORIGIN, "mbox": "h.%s." % ORIGIN, "serial": 1}
    with open(path, "w") as f:
        json.dump({"config": {"soa": soa}, "records": records}, f)


def threads(pid):
    """{tid: (comm, cpu seconds)} of every thread of pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                comm = f.read().strip()
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        out[int(tid)] = (comm, (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return out


def cpu_of(pid, comm):
    return sum(c for n, c in threads(pid).values() if n == comm)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def health_summary(ternctl, sock):
    out = subprocess.run([ternctl, "-s", sock, "health"], capture_output=True, text=True,
                         timeout=60)
    res = {}
    for line in out.stdout.splitlines():
        if line.startswith("endpoint: "):
            continue
        if ": " in line:
            k, v = line.split(": ", 1)
            res[k] = v
    return res


class Ternd:
    def __init__(self, args, mode, work, zone):
        self.dir = tempfile.mkdtemp(prefix="tern-health-%s-" % mode, dir=work)
        self.sock = os.path.join(self.dir, "ctl.sock")
        self.port = run.free_port()
        conf = os.path.join(self.dir, "ternd.yaml")
        health = ("health: ~\n" if mode == "off" else
                  "health: {check_interval_ms: %d, max_requests: %d}\n"
                  % (args.interval_ms, args.max_requests))
        with open(conf, "w") as f:
            f.write('listen: ["127.0.0.1:%d"]\nworkers: 1\nallow_root: true\n'
                    'control_socket: "%s"\n%szones:\n  - {origin: %s, file: "%s"}\n'
                    % (self.port, self.sock, health, ORIGIN, zone))
        self.log = open(os.path.join(self.dir, "ternd.log"), "w")
        self.proc = subprocess.Popen(["taskset", "-c", run.SERVER_CPU, args.ternd, "-c", conf],
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, secs=60):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            if run.udp_query(self.port, ORIGIN + ".", 6) is not None:
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def dnsperf(args, port, qfile, pid):
    """Worker CPU µs per answered query (and the checker's CPU meanwhile) at args.rate."""
    w0, h0 = cpu_of(pid, "tern-worker"), cpu_of(pid, "tern-health")
    out = subprocess.run(run.dnsperf_argv(port, qfile, args.secs, rate=args.rate), text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         timeout=args.secs + 60).stdout
    w1, h1 = cpu_of(pid, "tern-worker"), cpu_of(pid, "tern-health")
    r = run.parse_dnsperf(out)
    if not r["completed"]:
        raise RuntimeError("dnsperf failed:\n" + out[-2000:])
    return {"completed": r["completed"], "lost": r["lost"], "qps": r["qps"],
            "worker_us_per_q": round((w1 - w0) * 1e6 / r["completed"], 3),
            "checker_cpu_pct": round(100.0 * (h1 - h0) / args.secs, 2)}


def one_run(args, mode, work, zone, files, ternctl):
    t = Ternd(args, mode, work, zone)
    rec = {"mode": mode}
    try:
        if not t.wait_ready():
            raise RuntimeError("ternd did not answer:\n" + open(t.log.name).read()[-2000:])
        pid = t.proc.pid
        # the worker keeps CPU 0 to itself: the checker joins dnsperf and the HTTP responder on
        # CPU 1, so what is compared is the worker's own cost with and without health checking
        # (rank loads, cache and memory interference), not two threads taking turns on a core
        for tid, (comm, _) in threads(pid).items():
            if comm == "tern-health":
                subprocess.run(["taskset", "-p", "-c", run.CLIENT_CPU, str(tid)], check=True,
                               stdout=subprocess.DEVNULL)
        if mode == "on":
            want = args.endpoints + 4
            end = time.monotonic() + 120
            while time.monotonic() < end:
                s = health_summary(ternctl, t.sock)
                if int(s.get("up", 0)) == want:
                    break
                time.sleep(0.5)
            else:
                raise RuntimeError("endpoints not all up within 120 s: %s" % s)
            rec["up_after_s"] = round(120 - (end - time.monotonic()), 1)
        s0 = health_summary(ternctl, t.sock)
        h0 = cpu_of(pid, "tern-health")
        time.sleep(args.secs)
        h1 = cpu_of(pid, "tern-health")
        s1 = health_summary(ternctl, t.sock)
        rec["idle_checker_cpu_pct"] = round(100.0 * (h1 - h0) / args.secs, 2)
        rec["checks_per_s"] = round((int(s1.get("checks", 0)) - int(s0.get("checks", 0)))
                                    / args.secs, 1)
        rec["failures"] = int(s1.get("failures", 0))
        rec["rss_kb"] = rss_kb(pid)
        rec["pss_kb"] = run.pss_kb([pid])
        rec["checker_threads"] = sum(1 for n, _ in threads(pid).values() if n == "tern-health")
        for name, qf in files.items():
            rec[name] = dnsperf(args, t.port, qf, pid)
        log(mode, json.dumps({k: v for k, v in rec.items() if k != "mode"}))
    finally:
        t.stop()
    return rec


def med(runs, mode, *path):
    xs = []
    for r in runs:
        if r["mode"] != mode:
            continue
        v = r
        for p in path:
            v = v.get(p) if isinstance(v, dict) else None
        if v is not None:
            xs.append(v)
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoints", type=int, default=10000)
    ap.add_argument("--interval-ms", type=int, default=1000)
    ap.add_argument("--max-requests", type=int, default=500)
    ap.add_argument("--rate", type=int, default=50000)
    ap.add_argument("--secs", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ternd", default=os.path.join(run.ROOT, "build-bench", "ternd"))
    ap.add_argument("--ternctl", default=os.path.join(run.ROOT, "build-bench", "ternctl"))
    args = ap.parse_args()
    bd = os.path.dirname(os.path.abspath(args.ternd))
    if not run.build_ternd(bd):
        return 1
    subprocess.run(["cmake", "--build", bd, "--target", "ternctl"], check=True,
                   capture_output=True, timeout=900)
    os.makedirs(run.CACHE, exist_ok=True)
    resp = os.path.join(run.CACHE, "http_responder")
    src = os.path.join(BENCH, "http_responder.c")
    if not os.path.exists(resp) or os.path.getmtime(resp) < os.path.getmtime(src):
        subprocess.run(["cc", "-std=c17", "-O2", "-Wall", "-Wextra", "-Werror", "-o", resp, src],
                       check=True)
    work = tempfile.mkdtemp(prefix="tern-bench-health-")
    hport = run.free_port()
    responder = subprocess.Popen(["taskset", "-c", run.CLIENT_CPU, resp, str(hport), "7200"],
                                 stdout=subprocess.PIPE, text=True)
    runs = []
    try:
        zone = os.path.join(work, "zone.json")
        write_zone(zone, args.endpoints, hport)
        files = {}
        for name in ("www", "hc"):
            files[name] = os.path.join(work, name + ".txt")
            with open(files[name], "w") as f:
                f.write("%s.%s A\n" % (name, ORIGIN))
        for i in range(args.runs):
            for mode in (("off", "on") if i % 2 == 0 else ("on", "off")):
                runs.append(one_run(args, mode, work, zone, files, args.ternctl))
    finally:
        responder.terminate()
        answered = responder.communicate(timeout=30)[0].strip()
        shutil.rmtree(work, ignore_errors=True)
    os.makedirs(run.RESULTS, exist_ok=True)
    out = os.path.join(run.RESULTS, "health-%s.json" % time.strftime("%Y%m%d-%H%M%S"))
    with open(out, "w") as f:
        json.dump({"args": vars(args), "runs": runs, "responder_answered": answered}, f, indent=1)
    print("\nhealth checks: %d endpoints every %d ms, max_requests %d; medians of %d runs "
          "(raw: %s)" % (args.endpoints, args.interval_ms, args.max_requests, args.runs, out))
    print("  checker: %.1f checks/s, %.2f%% of a core idle, %.2f%% under %d q/s; endpoints all "
          "up %.1f s after start; failures %s"
          % (med(runs, "on", "checks_per_s"), med(runs, "on", "idle_checker_cpu_pct"),
             med(runs, "on", "www", "checker_cpu_pct"), args.rate, med(runs, "on", "up_after_s"),
             med(runs, "on", "failures")))
    print("  memory: RSS %d KiB on, %d KiB off (+%d KiB); PSS %d / %d KiB"
          % (med(runs, "on", "rss_kb"), med(runs, "off", "rss_kb"),
             med(runs, "on", "rss_kb") - med(runs, "off", "rss_kb"), med(runs, "on", "pss_kb"),
             med(runs, "off", "pss_kb")))
    print("  %-28s %10s %10s %8s" % ("worker CPU µs/query", "off", "on", "on/off"))
    for name, what in (("www", "plain A (4 RRs)"), ("hc", "checked A (4 RRs)")):
        a, b = med(runs, "off", name, "worker_us_per_q"), med(runs, "on", name, "worker_us_per_q")
        print("  %-28s %10.3f %10.3f %8.3f" % (what, a, b, b / a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
