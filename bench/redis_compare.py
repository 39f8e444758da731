#!/usr/bin/python3
"""Does tern cost the same per query serving a zone from Redis as serving it from a zone file?

    /usr/bin/python3 bench/redis_compare.py                     # 100,000 labels, 3 runs of 10 s
    /usr/bin/python3 bench/redis_compare.py --runs 1 --secs 3   # a quick look
    /usr/bin/python3 bench/redis_compare.py --help              # every knob

One zone, two sources. bench/gen_redis.py writes a redins-schema zone (bench.test., --labels
labels) into a redis-server started here (loopback, free port, no persistence, keyspace
notifications on, pinned to the load generator's CPU: it is idle while queries run — its CPU
over each measurement is recorded to show it) and, in the same pass, the same records as an RFC
1035 master file (--zonefile; geo-filtered labels become plain A RRsets of the same records
there). Then, per run, a fresh ternd (Release, one worker, pinned to CPU 1; dnsperf on CPU 0):

  redis  ternd -c conf with only a redis: block (the zone comes from Redis)
  file   ternd -c conf with the zone file under zones:

and for each: load time (exec to the first authoritative SOA answer; for Redis also ternd's own
"initial read ... in N ms" log figure), PSS / RSS / VmHWM, then dnsperf (-c 4 -q 200 -T 1):

  max     queries.txt, no rate limit, --secs s: qps, ternd CPU µs/query and its CPU share
  fixed   queries.txt at --rate (20k) q/s: ternd CPU µs/query (utime+stime of all its threads
          from /proc/PID/stat over the run, divided by the answers dnsperf received)
  nx2     nx2.txt at --rate: random <rand>.<rand>.bench.test. A, NXDOMAIN two labels deep

queries.txt holds one query per (name, type) present in the zone (SOA and NS at the apex, A,
AAAA, MX, TXT, SRV; A at every CNAME), shuffled. Before the runs both servers run side by side
once and answer a sample of both files; the answers must match (rcode, flags, every section),
except the geo-filtered labels, where Redis answers one of the file's three A records.

Medians over --runs runs (the two sources alternate which goes first) are printed as a table
with the ratios redis/file; raw data goes to bench/results/redis-compare-<labels>-<date>.json.
Only processes started here are stopped, by PID/process group; all traffic is on 127.0.0.1.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import gen_redis  # noqa: E402
import run as benchrun  # noqa: E402  (Server/Running, dnsperf argv/parsing, /proc accounting)

ROOT = benchrun.ROOT
CACHE = benchrun.CACHE
RESULTS = benchrun.RESULTS
ORIGIN = benchrun.ORIGIN
SERVER_CPU, CLIENT_CPU = "1", "0"
# run.py reads these module globals when it builds taskset argv: ternd on CPU 1, dnsperf on CPU 0
benchrun.SERVER_CPU, benchrun.CLIENT_CPU = SERVER_CPU, CLIENT_CPU
SOURCES = ("redis", "file")
WAIT = 30.0  # bound of every wait that is not a measurement


def log(*a):
    benchrun.log(*a)


# ---------------------------------------------------------------------------------------------
# data: Redis + master file from one gen_redis pass, query files from the master file


def zone_index(zonefile):
    """{owner: set of types}, and the owners of geo-filtered labels (A with TTL 60: only the
    generator's geo labels have it)."""
    types, geo = {}, set()
    with open(zonefile) as f:
        for line in f:
            if not line.strip() or line[0] in ";$":
                continue
            owner, ttl, _, rtype = line.split()[:4]
            name = ORIGIN if owner == "@" else owner + "." + ORIGIN
            types.setdefault(name, set()).add(rtype)
            if rtype == "A" and ttl == "60":
                geo.add(name)
    return types, geo


def write_queries(zonefile, qfile, nxfile, nx_count, seed):
    types, geo = zone_index(zonefile)
    rng = random.Random(seed)
    qs = []
    for name in sorted(types):
        for t in sorted(types[name]):
            qs.append((name, "A" if t == "CNAME" else t))
    rng.shuffle(qs)
    with open(qfile, "w") as f:
        f.writelines("%s %s\n" % q for q in qs)
    alnum = string.ascii_lowercase + string.digits
    with open(nxfile, "w") as f:
        for _ in range(nx_count):
            a = "".join(rng.choice(alnum) for _ in range(rng.randint(6, 12)))
            b = "".join(rng.choice(alnum) for _ in range(rng.randint(6, 12)))
            f.write("%s.%s.%s A\n" % (a, b, ORIGIN))
    mix = {}
    for _, t in qs:
        mix[t] = mix.get(t, 0) + 1
    return {"queries": len(qs), "types": mix, "geo_labels": len(geo), "owners": len(types),
            "nx2": nx_count}


class Redis:
    """Our own redis-server: started, filled, stopped by PID."""

    def __init__(self, workdir, cpu):
        self.dir = os.path.join(workdir, "redis")
        os.makedirs(self.dir, exist_ok=True)
        self.port = benchrun.free_port()
        self.proc = subprocess.Popen(
            ["taskset", "-c", cpu, "redis-server", "--port", str(self.port), "--bind",
             "127.0.0.1", "--dir", self.dir, "--save", "", "--appendonly", "no",
             "--notify-keyspace-events", "KEA", "--logfile", os.path.join(self.dir, "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if self.cli("PING").strip() == "PONG":
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not start on port %d" % self.port)

    def cli(self, *args):
        try:
            r = subprocess.run(["redis-cli", "-p", str(self.port)] + list(args),
                               capture_output=True, text=True, timeout=WAIT)
            return r.stdout
        except subprocess.TimeoutExpired:
            return ""

    def fill(self, labels, zonefile):
        """gen_redis straight into redis-cli --pipe, the master file written in the same pass."""
        t0 = time.monotonic()
        p = subprocess.Popen(["redis-cli", "-p", str(self.port), "--pipe"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        ngeo = gen_redis.generate(labels, ORIGIN, "", "", 1, p.stdin, zonefile)
        p.stdin.close()
        out = p.stdout.read().decode(errors="replace")
        rc = p.wait(timeout=300)
        if rc != 0 or "errors: 0" not in out:
            raise RuntimeError("redis-cli --pipe failed:\n" + out[-2000:])
        secs = time.monotonic() - t0
        hlen = int(self.cli("HLEN", "redins:zones:" + ORIGIN).strip() or 0)
        mem = re.search(r"used_memory:(\d+)", self.cli("INFO", "memory"))
        return {"fill_s": round(secs, 2), "hlen": hlen, "geo_labels": ngeo,
                "used_memory_mib": round(int(mem.group(1)) / 2 ** 20, 1) if mem else None,
                "version": subprocess.run(["redis-server", "--version"], capture_output=True,
                                          text=True).stdout.split()[2]}

    def cpu_s(self):
        return benchrun.cpu_ticks([self.proc.pid])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=WAIT)


# ---------------------------------------------------------------------------------------------
# ternd with either source


class TernSource(benchrun.Server):
    """ternd from a config file: the zone file under zones:, or only a redis: block."""

    def __init__(self, args, source, zonefile, redis_port, workdir):
        super().__init__(args, zonefile, workdir)
        self.name = source
        self.redis_port = redis_port

    def argv(self):
        conf = os.path.join(self.dir, "ternd.yaml")
        with open(conf, "w") as f:
            f.write('listen: ["127.0.0.1:%d"]\nworkers: 1\n' % self.port)
            if os.geteuid() == 0:
                f.write("allow_root: true\n")
            if self.name == "redis":
                f.write('redis:\n  address: "127.0.0.1:%d"\n  zone_reload: 600\n'
                        % self.redis_port)
            else:
                f.write('zones:\n  - origin: "%s"\n    file: "%s"\n' % (ORIGIN, self.zonefile))
        return [self.args.ternd, "-c", conf]


def start(args, source, zonefile, redis_port):
    wd = tempfile.mkdtemp(prefix="tern-rcmp-%s-" % source, dir=os.path.join(CACHE, "run"))
    srv = TernSource(args, source, os.path.abspath(zonefile), redis_port, wd)
    r = benchrun.Running(srv)
    if not r.wait_ready(args.load_timeout):
        tail = r.log_tail()
        r.stop()
        shutil.rmtree(wd, ignore_errors=True)
        raise RuntimeError("ternd (%s) did not answer for %s:\n%s" % (source, ORIGIN, tail))
    return r


def finish(r):
    r.stop()
    shutil.rmtree(r.srv.dir, ignore_errors=True)


def mem(pid):
    """PSS and RSS (smaps_rollup) and VmHWM (status), KiB."""
    out = {}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                k = line.split(":")[0]
                if k in ("Rss", "Pss"):
                    out[k.lower() + "_kb"] = int(line.split()[1])
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    out["hwm_kb"] = int(line.split()[1])
    except OSError:
        pass
    return out


def redis_read_ms(r):
    """ternd's own figure for the initial Redis read (fetch + build), from its log."""
    try:
        with open(os.path.join(r.srv.dir, "server.log")) as f:
            m = re.search(r"initial read: \d+ zones read in (\d+) ms", f.read())
    except OSError:
        return None
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------------------------------------
# answers: both sources side by side on a sample of each query file


def compare_answers(args, zd, zonefile, redis_port, geo):
    import dns.message
    import dns.query
    import dns.rcode

    def summary(resp):
        def sec(rrsets):
            return sorted(sorted(x.to_text().lower().split("\n")) for x in rrsets)
        return (dns.rcode.to_text(resp.rcode()), dns.flags.to_text(resp.flags), sec(resp.answer),
                sec(resp.authority), sec(resp.additional))

    sample = []
    for fname, n in (("queries.txt", args.check), ("nx2.txt", args.check // 10)):
        with open(os.path.join(zd, fname)) as f:
            sample += [tuple(l.split()) for _, l in zip(range(n), f)]
    # every geo label the sample missed is worth one query too, up to 200
    sample += [(g, "A") for g in sorted(geo)[:200]]
    runs = [start(args, s, zonefile, redis_port) for s in SOURCES]
    res = {"queries": len(sample), "same": 0, "geo_subset": 0, "mismatch": 0, "examples": []}
    try:
        for name, t in sample:
            a = []
            for r in runs:
                q = dns.message.make_query(name, t)
                a.append(summary(dns.query.udp(q, "127.0.0.1", port=r.srv.port, timeout=2)))
            if a[0] == a[1]:
                res["same"] += 1
            elif (name in geo and a[0][:2] == a[1][:2] and a[0][3:] == a[1][3:]
                  and len(a[0][2]) == len(a[1][2]) == 1 and set(a[0][2][0]) <= set(a[1][2][0])):
                res["geo_subset"] += 1  # Redis: one weighted pick of the file's A RRset
            else:
                res["mismatch"] += 1
                if len(res["examples"]) < 5:
                    res["examples"].append({"q": "%s %s" % (name, t), "redis": a[0], "file": a[1]})
    finally:
        for r in runs:
            finish(r)
    return res


# ---------------------------------------------------------------------------------------------
# one run of one source


def one_run(args, source, zd, zonefile, redis):
    rec = {"source": source, "loadavg": open("/proc/loadavg").read().split()[:3]}
    r = start(args, source, zonefile, redis.port)
    try:
        rec["load_s"] = round(r.load_s, 3)
        if source == "redis":
            rec["redis_read_ms"] = redis_read_ms(r)
        time.sleep(0.5)
        rec["mem"] = mem(r.proc.pid)
        rec["threads"] = len(os.listdir("/proc/%d/task" % r.proc.pid))
        port, S = r.srv.port, args.secs
        files = {"max": ("queries.txt", None), "fixed": ("queries.txt", args.rate),
                 "nx2": ("nx2.txt", args.rate)}
        for phase in args.phases:
            qf, rate = files[phase]
            rc0 = redis.cpu_s()
            m = benchrun.measure(r, [benchrun.dnsperf_argv(port, os.path.join(zd, qf), S, rate)],
                                 S)
            m["redis_server_cpu_s"] = round(redis.cpu_s() - rc0, 3)
            m["ternd_cpu_share"] = round(m["server_cpu_s"] / m["wall_s"], 3) if m["wall_s"] else None
            m.pop("parts", None)
            rec[phase] = m
            log("  %-5s %-5s qps=%.0f lost=%d µs/q=%s ternd-cpu=%.0f%% rcodes=%s redis-cpu=%.2fs" % (
                source, phase, m["qps"], m["lost"], m["cpu_us_per_q"],
                100 * (m["ternd_cpu_share"] or 0), m["rcode_pct"], m["redis_server_cpu_s"]))
        rec["mem_after"] = mem(r.proc.pid)
        rec["log_tail"] = r.log_tail(8)
        return rec
    finally:
        finish(r)


# ---------------------------------------------------------------------------------------------
# summary

ROWS = [
    # (label, path, format, scale)
    ("µs/q @%dk (queries.txt)", ("fixed", "cpu_us_per_q"), "%.2f", 1),
    ("µs/q @%dk nx2 (NXDOMAIN 2 deep)", ("nx2", "cpu_us_per_q"), "%.2f", 1),
    ("lost @fixed / nx2", None, None, None),
    ("qps max (dnsperf -c 4 -q 200)", ("max", "qps"), "%.0f", 1),
    ("µs/q @max", ("max", "cpu_us_per_q"), "%.2f", 1),
    ("ternd CPU share @max", ("max", "ternd_cpu_share"), "%.2f", 1),
    ("PSS MiB", ("mem", "pss_kb"), "%.1f", 1 / 1024),
    ("RSS MiB", ("mem", "rss_kb"), "%.1f", 1 / 1024),
    ("VmHWM MiB (peak RSS)", ("mem", "hwm_kb"), "%.1f", 1 / 1024),
    ("RSS MiB after the runs", ("mem_after", "rss_kb"), "%.1f", 1 / 1024),
    ("load s (exec → first SOA answer)", ("load_s",), "%.3f", 1),
    ("ternd's Redis initial read ms", ("redis_read_ms",), "%.0f", 1),
]


def summarize(raw, args):
    summ = {}
    for s in SOURCES:
        runs = [x for x in raw[s] if "error" not in x]
        d = {}
        for label, path, _, scale in ROWS:
            if path is None:
                continue
            v = benchrun.median([benchrun.get(x, path) for x in runs])
            d[label] = None if v is None else v * scale
        d["lost"] = "%s / %s" % (sum(benchrun.get(x, ("fixed", "lost")) or 0 for x in runs),
                                 sum(benchrun.get(x, ("nx2", "lost")) or 0 for x in runs))
        d["runs"] = len(runs)
        d["each µs/q fixed"] = [benchrun.get(x, ("fixed", "cpu_us_per_q")) for x in runs]
        d["each µs/q nx2"] = [benchrun.get(x, ("nx2", "cpu_us_per_q")) for x in runs]
        summ[s] = d
    return summ


def table(summ, args):
    k = args.rate // 1000
    lines = ["| figure (median of %d) | redis | file | redis/file |" % args.runs,
             "|---|---|---|---|"]
    for label, path, f, _ in ROWS:
        lab = label % k if "%d" in label else label
        if path is None:
            lines.append("| %s | %s | %s | |" % (lab, summ["redis"]["lost"], summ["file"]["lost"]))
            continue
        a, b = summ["redis"].get(label), summ["file"].get(label)
        if a is None and b is None:
            continue
        ratio = "%.2f" % (a / b) if a is not None and b else ""
        lines.append("| %s | %s | %s | %s |" % (lab, benchrun.fmt(a, f), benchrun.fmt(b, f), ratio))
    return "\n".join(lines)


def ensure_ternd(args):
    if not args.build:
        return os.path.exists(args.ternd)
    bd = os.path.dirname(os.path.abspath(args.ternd))
    return benchrun.build_ternd(bd) and os.path.exists(args.ternd)
    bd = os.path.dirname(os.path.abspath(args.ternd))
    try:
        if not os.path.exists(os.path.join(bd, "build.ninja")):
            subprocess.run(["cmake", "-S", ROOT, "-B", bd, "-G", "Ninja",
                            "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True,
                           timeout=300)
        subprocess.run(["cmake", "--build", bd, "--target", "ternd"], check=True,
                       capture_output=True, timeout=900)
    except subprocess.CalledProcessError as e:
        log("ternd build failed:\n" + (e.stdout or b"").decode()[-3000:])
        return False
    return os.path.exists(args.ternd)


def build_type(ternd):
    cache = os.path.join(os.path.dirname(os.path.abspath(ternd)), "CMakeCache.txt")
    try:
        with open(cache) as f:
            m = re.search(r"^CMAKE_BUILD_TYPE:STRING=(\S*)", f.read(), re.M)
            return m.group(1) if m else "?"
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--labels", type=int, default=100000, help="labels of the zone (>= 4)")
    ap.add_argument("--runs", type=int, default=3, help="runs per source; medians are taken")
    ap.add_argument("--secs", type=int, default=10, help="seconds per dnsperf measurement")
    ap.add_argument("--rate", type=int, default=20000, help="fixed offered load, queries/s")
    ap.add_argument("--nx", type=int, default=100000, help="lines of nx2.txt")
    ap.add_argument("--check", type=int, default=3000,
                    help="queries.txt lines asked of both servers before the runs (0: none)")
    ap.add_argument("--phases", default="max,fixed,nx2", help="any of max,fixed,nx2")
    ap.add_argument("--load-timeout", type=float, default=120,
                    help="seconds to wait for ternd's first answer")
    ap.add_argument("--ternd", default=os.path.join(ROOT, "build-rbench", "ternd"))
    ap.add_argument("--build", action=argparse.BooleanOptionalAction, default=True,
                    help="build ternd (Release) in --ternd's directory first (default: yes)")
    ap.add_argument("--tag", default="", help="suffix for the results file names")
    args = ap.parse_args()
    args.phases = [p for p in args.phases.split(",") if p]
    if any(p not in ("max", "fixed", "nx2") for p in args.phases):
        sys.exit("--phases: max, fixed, nx2")
    if args.labels < 4:
        sys.exit("--labels must be at least 4")
    for prog in ("dnsperf", "redis-server", "redis-cli", "taskset"):
        if shutil.which(prog) is None:
            sys.exit("%s not installed" % prog)
    if not ensure_ternd(args):
        sys.exit("no ternd at %s" % args.ternd)
    if build_type(args.ternd) not in ("Release", "RelWithDebInfo"):
        log("warning: %s is a %s build" % (args.ternd, build_type(args.ternd)))

    os.makedirs(os.path.join(CACHE, "run"), exist_ok=True)
    os.makedirs(RESULTS, exist_ok=True)
    zd = os.path.join(CACHE, "rz%d" % args.labels)
    os.makedirs(zd, exist_ok=True)
    zonefile = os.path.join(zd, ORIGIN + "zone")
    work = tempfile.mkdtemp(prefix="tern-rcmp-", dir=os.path.join(CACHE, "run"))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "labels": args.labels,
            "args": vars(args), "kernel": os.uname().release, "cpus": os.cpu_count(),
            "ternd": args.ternd, "build_type": build_type(args.ternd),
            "ternd_version": benchrun._first_line([args.ternd, "--version"]),
            "dnsperf": benchrun._first_line(["dnsperf", "-h"], want="Version"),
            "pinning": {"ternd": SERVER_CPU, "dnsperf": CLIENT_CPU, "redis-server": CLIENT_CPU}}
    out = {"meta": meta}
    redis = None
    try:
        redis = Redis(work, CLIENT_CPU)
        log("filling Redis (port %d) with %d labels; master file %s" % (redis.port, args.labels,
                                                                        zonefile))
        out["redis"] = redis.fill(args.labels, zonefile)
        log("  %s" % out["redis"])
        out["queries"] = write_queries(zonefile, os.path.join(zd, "queries.txt"),
                                       os.path.join(zd, "nx2.txt"), args.nx, 7)
        log("  queries.txt: %s" % out["queries"])
        if args.check:
            log("answer check: both sources side by side")
            _, geo = zone_index(zonefile)
            out["check"] = compare_answers(args, zd, zonefile, redis.port, geo)
            log("  %s" % {k: v for k, v in out["check"].items() if k != "examples"})
            for ex in out["check"]["examples"]:
                log("  MISMATCH %s" % json.dumps(ex))
        raw = {s: [] for s in SOURCES}
        for i in range(args.runs):
            order = SOURCES if i % 2 == 0 else SOURCES[::-1]
            for s in order:
                log("run %d/%d %s" % (i + 1, args.runs, s))
                try:
                    rec = one_run(args, s, zd, zonefile, redis)
                except RuntimeError as e:
                    log("  %s: %s" % (s, e))
                    raw[s].append({"source": s, "error": str(e)[:4000]})
                    continue
                raw[s].append(rec)
                log("  load %.3f s%s, pss %.1f MiB, rss %.1f MiB, hwm %.1f MiB" % (
                    rec["load_s"], " (ternd: read in %s ms)" % rec.get("redis_read_ms")
                    if s == "redis" else "", rec["mem"].get("pss_kb", 0) / 1024,
                    rec["mem"].get("rss_kb", 0) / 1024, rec["mem"].get("hwm_kb", 0) / 1024))
        out["raw"] = raw
    finally:
        if redis:
            redis.stop()
        shutil.rmtree(work, ignore_errors=True)

    summ = summarize(raw, args)
    out["summary"] = summ
    q = out["queries"]
    report = [
        "## tern: zone from Redis vs the same zone from a file — %s" % meta["date"], "",
        "%d labels (bench/gen_redis.py, seed 1), %s; %s (%s), one worker on CPU %s; "
        "dnsperf `-c 4 -q 200 -T 1` on CPU %s, %d s per measurement; redis-server %s on CPU %s "
        "(%.1f MiB used, filled in %.1f s). Medians of %d runs, a fresh ternd per run." % (
            args.labels, ORIGIN, meta["ternd_version"] or "?", meta["build_type"], SERVER_CPU,
            CLIENT_CPU, args.secs, out["redis"]["version"], CLIENT_CPU,
            out["redis"]["used_memory_mib"] or 0, out["redis"]["fill_s"], args.runs),
        "",
        "queries.txt: %d queries, one per (name, type) in the zone (%s); nx2.txt: %d random "
        "`<rand>.<rand>.%s` A. The file has the %d geo-filtered labels as plain A RRsets "
        "(Redis answers one weighted pick of their 3 A records)." % (
            q["queries"], ", ".join("%s %d" % kv for kv in sorted(q["types"].items())), q["nx2"],
            ORIGIN, q["geo_labels"]),
        "",
    ]
    if "check" in out:
        c = out["check"]
        report += ["Answer check (both servers, %d queries): %d identical, %d geo (Redis's one A "
                   "is among the file's), %d mismatches." % (c["queries"], c["same"],
                                                             c["geo_subset"], c["mismatch"]), ""]
    report += [table(summ, args), ""]
    for s in SOURCES:
        report.append("- %s µs/q @fixed per run: %s; nx2: %s" % (
            s, summ[s]["each µs/q fixed"], summ[s]["each µs/q nx2"]))
    rc = [benchrun.get(x, ("fixed", "redis_server_cpu_s")) for x in raw["redis"] + raw["file"]
          if "error" not in x]
    report.append("- redis-server CPU during each fixed-rate run: max %.2f s" % max(rc or [0]))
    tag = ("-" + args.tag) if args.tag else ""
    jpath = os.path.join(RESULTS, "redis-compare-%d-%s%s.json" % (args.labels, stamp, tag))
    with open(jpath, "w") as f:
        json.dump(out, f, indent=1)
    text = "\n".join(report)
    with open(os.path.join(RESULTS, "latest-redis-compare-%d.md" % args.labels), "w") as f:
        f.write(text + "\nraw: %s\n" % os.path.relpath(jpath, ROOT))
    print(text)
    print("raw runs: %s" % jpath)
    errors = sum(1 for s in SOURCES for x in raw[s] if "error" in x)
    sys.exit(1 if errors or out.get("check", {}).get("mismatch") else 0)


if __name__ == "__main__":
    main()
