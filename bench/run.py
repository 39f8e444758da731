#!/usr/bin/python3
"""tern side by side with gdnsd, Knot, NSD and the kernel floor (a UDP reflector).

    /usr/bin/python3 bench/run.py                        # compare + adversarial, 100k zone, 3 runs
    /usr/bin/python3 bench/run.py --mode capacity        # CPU-limited cgroup, bisect max rate
    /usr/bin/python3 bench/run.py --mode all --zone 1m   # everything on the 1,000,000-name zone
    /usr/bin/python3 bench/run.py --servers tern,reflector --runs 1 --secs 3   # quick look
    /usr/bin/python3 bench/run.py --servers tern,tern-base,gdnsd --ternd-base OLD/ternd  # before/after

Every server runs alone with one UDP worker, pinned to CPU 0; dnsperf is pinned to CPU 1. The
figure that ranks servers is the server's own CPU time per answered query at a fixed offered load
(utime+stime of every process of the server, all threads, from /proc/PID/stat, over the dnsperf
run). Raw runs go to bench/results/<mode>-<date>.json, the summary to bench/results/latest-<mode>.md.
See bench/README.md.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
CACHE = os.path.join(BENCH, ".cache")
RESULTS = os.path.join(BENCH, "results")
CLK_TCK = os.sysconf("SC_CLK_TCK")
SERVER_CPU = "0"
CLIENT_CPU = "1"
ORIGIN = "bench.test."
ALL_SERVERS = ("tern", "tern-base", "gdnsd", "knot", "nsd", "reflector")


def log(*a):
    print("[%s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# small helpers: ports, DNS probes, /proc accounting


def free_port():
    """A port free for both UDP and TCP on 127.0.0.1 (a tiny race is acceptable here)."""
    for _ in range(50):
        port = random.randint(20000, 60000)
        try:
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                s = socket.socket(socket.AF_INET, kind)
                s.bind(("127.0.0.1", port))
                s.close()
            return port
        except OSError:
            continue
    raise RuntimeError("no free port")


def wire_name(name):
    out = b""
    for lab in name.rstrip(".").split("."):
        out += bytes([len(lab)]) + lab.encode()
    return out + b"\0"


def udp_query(port, name, qtype=6, timeout=0.2):
    """One query; returns (rcode, flags, ancount) or None on timeout."""
    qid = random.randint(0, 65535)
    pkt = struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 0) + wire_name(name) + struct.pack(">HH", qtype, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(pkt, ("127.0.0.1", port))
        while True:
            data, _ = s.recvfrom(4096)
            if len(data) >= 12 and struct.unpack(">H", data[:2])[0] == qid:
                _, flags, _, an, _, _ = struct.unpack(">HHHHHH", data[:12])
                return flags & 0xF, flags, an
    except (socket.timeout, ConnectionRefusedError):
        return None
    finally:
        s.close()


def proc_tree(root):
    """root and every descendant pid (NSD forks a server child and xfrd)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def thread_cpu(pid, prefix):
    """CPU seconds (utime+stime) of each thread of pid whose name starts with prefix, by tid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                if not f.read().startswith(prefix):
                    continue
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        out[tid] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def cpu_ticks(pids):
    """utime+stime (all threads of each process) summed, in seconds."""
    total = 0
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])  # fields 14, 15 of stat(5)
    return total / CLK_TCK


def pss_kb(pids):
    total = 0
    for p in pids:
        try:
            with open("/proc/%d/smaps_rollup" % p) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total


def udp_sock_rcvbuf(port):
    """The listening UDP socket's receive buffer limit (skmem rb) as the kernel applied it."""
    try:
        out = subprocess.run(["ss", "-uanm", "sport = :%d" % port], capture_output=True,
                             text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"rb(\d+)", out)
    return int(m.group(1)) if m else None


def udp_rcvbuf_errors():
    with open("/proc/net/snmp") as f:
        rows = [l.split() for l in f if l.startswith("Udp:")]
    return int(dict(zip(rows[0][1:], rows[1][1:]))["RcvbufErrors"])


# ---------------------------------------------------------------------------------------------
# servers: each writes its own config into a private temp dir and runs in the foreground


class Server:
    name = "?"
    dns = True  # does real DNS work (answer checks apply)
    tcp = True

    def __init__(self, args, zonefile, workdir):
        self.args, self.zonefile, self.dir = args, zonefile, workdir
        self.port = free_port()
        self.addr = "127.0.0.1"  # bench/xdp.py serves a veth's address in a namespace instead

    def argv(self):
        raise NotImplementedError

    def available(self):
        return shutil.which(self.argv()[0]) is not None or os.path.exists(self.argv()[0])

    def version(self):
        return ""


class Tern(Server):
    name = "tern"

    def argv(self):
        # as root (the harness pins and cgroups servers), ternd must be told it may stay root
        root = ["--allow-root"] if os.geteuid() == 0 else []
        return [self.args.ternd, "--listen", "%s:%d" % (self.addr, self.port),
                "--zone", "%s=%s" % (ORIGIN, self.zonefile), "--workers", "1"] + root

    def version(self):
        return _first_line([self.args.ternd, "--version"])


class TernBase(Tern):
    """Another ternd build (--ternd-base), e.g. the commit before a refactor: run in the same
    interleaved rounds as tern, so a before/after ratio does not ride the machine's drift."""
    name = "tern-base"

    def argv(self):
        a = super().argv()
        a[0] = self.args.ternd_base or "/nonexistent/ternd-base"
        return a

    def version(self):
        return _first_line([self.args.ternd_base, "--version"]) if self.args.ternd_base else ""


class Gdnsd(Server):
    name = "gdnsd"

    def argv(self):
        cfg = os.path.join(self.dir, "etc")
        os.makedirs(os.path.join(cfg, "zones"), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "run"), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "state"), exist_ok=True)
        zf = os.path.join(cfg, "zones", ORIGIN.rstrip("."))
        if not os.path.exists(zf):
            os.symlink(self.zonefile, zf)
        with open(os.path.join(cfg, "config"), "w") as f:
            f.write("""options => {
  listen => [ %s ]
  dns_port => %d
  udp_threads => 1
  tcp_threads => 1
  zones_rfc1035_threads => 1
  udp_rcvbuf => 1048576
  udp_sndbuf => 1048576
  experimental_no_chain => false
  run_dir => %s/run
  state_dir => %s/state
}
""" % (self.addr, self.port, self.dir, self.dir))
        return ["gdnsd", "-c", cfg, "start"]

    def version(self):
        return _first_line(["gdnsd", "-h"], want="version")


class Knot(Server):
    name = "knot"

    def argv(self):
        conf = os.path.join(self.dir, "knot.conf")
        with open(conf, "w") as f:
            f.write("""server:
    rundir: "{d}"
    pidfile: "{d}/knot.pid"
    listen: {a}@{p}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "{d}/db"
log:
  - target: stderr
    any: warning
template:
  - id: default
    storage: "{d}"
    journal-content: none
    zonefile-sync: -1
    zonefile-load: whole
    semantic-checks: off
zone:
  - domain: {o}
    file: "{z}"
""".format(d=self.dir, a=self.addr, p=self.port, o=ORIGIN, z=self.zonefile))
        return ["knotd", "-c", conf]

    def version(self):
        return _first_line(["knotd", "-V"])


class Nsd(Server):
    name = "nsd"

    def argv(self):
        conf = os.path.join(self.dir, "nsd.conf")
        with open(conf, "w") as f:
            f.write("""server:
    ip-address: 127.0.0.1@{p}
    do-ip6: no
    server-count: 1
    username: ""
    chroot: ""
    zonesdir: ""
    database: ""
    zonelistfile: "{d}/zone.list"
    xfrdfile: "{d}/xfrd.state"
    xfrdir: "{d}"
    pidfile: "{d}/nsd.pid"
    logfile: "{d}/nsd.log"
    verbosity: 0
    rrl-ratelimit: 0
    tcp-count: 256
    receive-buffer-size: 4194304
    send-buffer-size: 4194304
remote-control:
    control-enable: no
zone:
    name: {o}
    zonefile: "{z}"
""".format(d=self.dir, p=self.port, o=ORIGIN, z=self.zonefile))
        return ["nsd", "-d", "-c", conf]

    def version(self):
        return _first_line(["nsd", "-v"])


class Reflector(Server):
    name = "reflector"
    dns = False
    tcp = False

    def argv(self):
        return [os.path.join(CACHE, "reflector"), "127.0.0.1:%d" % self.port]


SERVER_CLASSES = {c.name: c for c in (Tern, TernBase, Gdnsd, Knot, Nsd, Reflector)}


def _first_line(argv, want=None):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    for line in (r.stdout + r.stderr).splitlines():
        if want is None or want in line:
            return line.strip()
    return ""


def stop_group(proc):
    """Ends a server started in a session of its own (its pid is its process group): SIGTERM,
    SIGKILL after 10 s."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass


class Running:
    """A started server: process group, readiness, accounting, teardown."""

    def __init__(self, srv, cgroup=None):
        self.srv = srv
        argv = ["taskset", "-c", SERVER_CPU] + srv.argv()
        if cgroup:
            # enter the cgroup before exec, so every thread and child process is limited
            argv = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup] + argv
        self.logf = open(os.path.join(srv.dir, "server.log"), "w")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=self.logf, stderr=subprocess.STDOUT,
                                     start_new_session=True, cwd=srv.dir)
        self.load_s = None

    def wait_ready(self, timeout):
        """Zone load time: from exec to the first authoritative SOA answer."""
        deadline = self.t0 + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            r = udp_query(self.srv.port, ORIGIN, 6, timeout=0.05)
            if r is not None and (not self.srv.dns or (r[0] == 0 and r[2] >= 1)):
                self.load_s = time.monotonic() - self.t0
                return True
            time.sleep(0.005)
        return False

    def pids(self):
        return proc_tree(self.proc.pid)

    def stop(self):
        stop_group(self.proc)
        self.logf.close()

    def log_tail(self, n=15):
        try:
            with open(os.path.join(self.srv.dir, "server.log")) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


# ---------------------------------------------------------------------------------------------
# answer checks (dig): a few queries per case before anything is timed


def dig_parse(out):
    """dig's output (+comments with the sections): status, flags, the message size when +stats
    printed it, and per section the fields of every record line."""
    m = re.search(r"status: (\w+)", out)
    fl = re.search(r"flags: ([a-z ]*);", out)
    sz = re.search(r"MSG SIZE\s+rcvd: (\d+)", out)
    sec, rrs = None, {"ANSWER": [], "AUTHORITY": [], "ADDITIONAL": []}
    for line in out.splitlines():
        h = re.match(r";; (ANSWER|AUTHORITY|ADDITIONAL) SECTION:", line)
        if h:
            sec = h.group(1)
        elif sec and line and not line.startswith(";"):
            parts = line.split()
            if len(parts) >= 4:
                rrs[sec].append(parts)
    return {"status": m.group(1) if m else "TIMEOUT", "flags": fl.group(1).split() if fl else [],
            "size": int(sz.group(1)) if sz else None, "sections": rrs}


def dig(port, name, qtype, tcp=False):
    argv = ["dig", "@127.0.0.1", "-p", str(port), "+norec", "+time=2", "+tries=1", "+noall",
            "+comments", "+answer", "+authority", "+additional", name, qtype]
    if tcp:
        argv.insert(1, "+tcp")
    d = dig_parse(subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout)
    types = {k: [p[3] for p in v] for k, v in d["sections"].items()}
    return {"status": d["status"], "flags": d["flags"],
            "an": types["ANSWER"], "ns": types["AUTHORITY"], "ar": types["ADDITIONAL"]}


def check_answers(srv, manifest):
    """Returns a list of failures (empty: all good)."""
    s = manifest["samples"]
    # (name, type, status, aa, answer types that must appear, authority types that must appear)
    cases = [
        (ORIGIN, "SOA", "NOERROR", True, ["SOA"], []),
        (s["a"], "A", "NOERROR", True, ["A"], []),
        (s["dual"], "AAAA", "NOERROR", True, ["AAAA"], []),
        (s["aaaa"], "AAAA", "NOERROR", True, ["AAAA"], []),
        (s["cname"], "A", "NOERROR", True, ["CNAME", "A"], []),
        (s["wild"], "A", "NOERROR", True, ["A"], []),
        (s["nx"], "A", "NXDOMAIN", True, [], ["SOA"]),
        (s["a"], "TXT", "NOERROR", True, [], ["SOA"]),
        (s["mx"], "MX", "NOERROR", True, ["MX"], []),
        (s["txt"], "TXT", "NOERROR", True, ["TXT"], []),
        (s["srv"], "SRV", "NOERROR", True, ["SRV"], []),
        (s["deleg_glue"], "A", "NOERROR", False, [], ["NS"]),
        (s["deleg"], "A", "NOERROR", False, [], ["NS"]),
    ]
    fails = []
    for name, qt, status, aa, an, ns in cases:
        for tcp in ((False, True) if srv.tcp and name == s["a"] and qt == "A" else (False,)):
            r = dig(srv.port, name, qt, tcp)
            ok = (r["status"] == status and (("aa" in r["flags"]) == aa)
                  and all(t in r["an"] for t in an) and all(t in r["ns"] for t in ns))
            if name == s["cname"] and ok:
                ok = r["an"][-1] == "A"  # the chain was chased to the end
            if name == s["deleg_glue"] and ok:
                ok = "A" in r["ar"]  # glue
            if not ok:
                fails.append("%s %s%s: want %s%s an=%s ns=%s, got %s" % (
                    name, qt, "/tcp" if tcp else "", status, " aa" if aa else "", an, ns,
                    json.dumps(r)))
    return fails


# ---------------------------------------------------------------------------------------------
# dnsperf


def parse_dnsperf(out):
    def num(pat, cast=float):
        m = re.search(pat, out)
        return cast(m.group(1)) if m else None

    return {
        "sent": num(r"Queries sent:\s+(\d+)", int),
        "completed": num(r"Queries completed:\s+(\d+)", int),
        "lost": num(r"Queries lost:\s+(\d+)", int),
        "qps": num(r"Queries per second:\s+([\d.]+)"),
        "lat_avg_ms": _ms(num(r"Average Latency \(s\):\s+([\d.]+)")),
        "lat_max_ms": _ms(num(r"Average Latency \(s\):.*max ([\d.]+)")),
        "lat_min_ms": _ms(num(r"Average Latency \(s\):.*min ([\d.]+)")),
        "lat_sd_ms": _ms(num(r"Latency StdDev \(s\):\s+([\d.]+)")),
        # the rcode mix must be the same for every DNS server on the same query file
        "rcodes": {k: int(v) for k, v in re.findall(r"(\w+) (\d+) \([\d.]+%\)",
                                                    _line(out, "Response codes:"))},
    }


def _line(out, prefix):
    for line in out.splitlines():
        if line.strip().startswith(prefix):
            return line
    return ""


def _ms(v):
    return None if v is None else round(v * 1000, 4)


def dnsperf_argv(port, qfile, secs, rate=None, mode="udp", clients=4, outstanding=200,
                 timeout=2, bufkb=None):
    argv = ["taskset", "-c", CLIENT_CPU, "dnsperf", "-s", "127.0.0.1", "-p", str(port),
            "-d", qfile, "-c", str(clients), "-q", str(outstanding), "-T", "1",
            "-l", str(secs), "-t", str(timeout), "-m", mode]
    if rate:
        argv += ["-Q", str(int(rate))]
    if bufkb:
        argv += ["-b", str(bufkb)]
    return argv


def _pct_merge(res):
    tot = {}
    for r in res:
        for k, v in r["rcodes"].items():
            tot[k] = tot.get(k, 0) + v
    n = sum(tot.values())
    return {k: round(100.0 * v / n, 2) for k, v in sorted(tot.items())} if n else {}


def run_jobs(run, jobs, secs):
    """Run the load generators (argv lists) together against run: the server's CPU seconds and
    the kernel's UDP receive-buffer drops over the window, its wall time, and each output."""
    pids = run.pids()
    rcv0 = udp_rcvbuf_errors()
    c0, t0 = cpu_ticks(pids), time.monotonic()
    procs = [subprocess.Popen(j, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for j in jobs]
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=secs + 30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        outs.append(out)
    return cpu_ticks(pids) - c0, udp_rcvbuf_errors() - rcv0, time.monotonic() - t0, outs


def measure(run, jobs, secs):
    """Run the dnsperf jobs (argv lists) concurrently against run; server CPU over the window."""
    cpu, rcvbuf_errors, wall, outs = run_jobs(run, jobs, secs)
    res = [parse_dnsperf(o) for o in outs]
    for r, o in zip(res, outs):
        if r["completed"] is None:
            raise RuntimeError("dnsperf failed:\n" + o[-2000:])
    completed = sum(r["completed"] for r in res)
    sent = sum(r["sent"] for r in res)
    lost = sum(r["lost"] for r in res)
    return {
        "sent": sent, "completed": completed, "lost": lost,
        "loss_pct": round(100.0 * lost / sent, 4) if sent else None,
        "qps": round(sum(r["qps"] for r in res), 1),
        "lat_avg_ms": res[0]["lat_avg_ms"], "lat_max_ms": max(r["lat_max_ms"] for r in res),
        "server_cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
        "cpu_us_per_q": round(cpu * 1e6 / completed, 3) if completed else None,
        "rcvbuf_errors": rcvbuf_errors,
        "rcode_pct": _pct_merge(res),
        "parts": res,
    }


# ---------------------------------------------------------------------------------------------
# modes


def start_server(args, name, zonefile, cgroup=None):
    wd = tempfile.mkdtemp(prefix="tern-bench-%s-" % name, dir=os.path.join(CACHE, "run"))
    srv = SERVER_CLASSES[name](args, os.path.abspath(zonefile), wd)
    run = Running(srv, cgroup)
    if not run.wait_ready(args.load_timeout):
        tail = run.log_tail()
        run.stop()
        raise RuntimeError("%s did not come up on port %d:\n%s" % (name, srv.port, tail))
    return run


def one_run(args, name, zd, manifest, phases, check):
    rec = {"server": name, "loadavg": open("/proc/loadavg").read().split()[:3]}
    run = start_server(args, name, os.path.join(zd, ORIGIN + "zone"))
    srv = run.srv
    try:
        rec["load_s"] = round(run.load_s, 3)
        time.sleep(0.5)  # let background loaders settle before reading memory
        pids = run.pids()
        rec["pss_kb"] = pss_kb(pids)
        rec["processes"] = len(pids)
        rec["udp_rcvbuf"] = udp_sock_rcvbuf(srv.port)
        if check and srv.dns:
            fails = check_answers(srv, manifest)
            rec["check_failures"] = fails
            for f in fails:
                log("  CHECK FAIL %s: %s" % (name, f))
        qfile = os.path.join(zd, "queries.txt")
        nxfile = os.path.join(zd, "nxflood.txt")
        S = args.secs
        if "max" in phases:
            rec["max"] = measure(run, [dnsperf_argv(srv.port, qfile, S)], S)
        if "fixed" in phases:
            rec["fixed"] = measure(run, [dnsperf_argv(srv.port, qfile, S, args.rate)], S)
        if "nxflood" in phases:
            rec["nxflood"] = measure(run, [dnsperf_argv(srv.port, nxfile, S, args.rate)], S)
        if "tcpmix" in phases and srv.tcp:
            tcp_rate = args.rate * args.tcp_share
            rec["tcpmix"] = measure(run, [
                dnsperf_argv(srv.port, qfile, S, args.rate - tcp_rate),
                dnsperf_argv(srv.port, qfile, S, tcp_rate, mode="tcp", clients=args.tcp_conns,
                             outstanding=args.tcp_outstanding, timeout=5),
            ], S)
        rec["pss_kb_after"] = pss_kb(run.pids())
        return rec
    finally:
        run.stop()
        shutil.rmtree(srv.dir, ignore_errors=True)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


SUMMARY_FIELDS = [
    # (label, path into a run record, format)
    ("qps max", ("max", "qps"), "%.0f"),
    ("lost@max", ("max", "lost"), "%.0f"),
    ("lat avg ms", ("max", "lat_avg_ms"), "%.3f"),
    ("lat max ms", ("max", "lat_max_ms"), "%.2f"),
    ("µs/q @fixed", ("fixed", "cpu_us_per_q"), "%.2f"),
    ("lost@fixed", ("fixed", "lost"), "%.0f"),
    ("µs/q nxflood", ("nxflood", "cpu_us_per_q"), "%.2f"),
    ("µs/q tcpmix", ("tcpmix", "cpu_us_per_q"), "%.2f"),
    ("lost tcpmix", ("tcpmix", "lost"), "%.0f"),
    ("PSS MiB", ("pss_kb",), None),
    ("load s", ("load_s",), "%.3f"),
]


def get(rec, path):
    for k in path:
        if not isinstance(rec, dict) or k not in rec:
            return None
        rec = rec[k]
    return rec


def summarize(runs_by_server):
    summ = {}
    for name, runs in runs_by_server.items():
        s = {}
        for label, path, _ in SUMMARY_FIELDS:
            v = median([get(r, path) for r in runs])
            if path == ("pss_kb",) and v is not None:
                v = v / 1024.0
            s[label] = v
        s["runs"] = len(runs)
        summ[name] = s
    return summ


def fmt(v, f):
    if v is None:
        return "—"
    return (f or "%.1f") % v


def table(summ, order):
    cols = [f[0] for f in SUMMARY_FIELDS]
    lines = ["| server | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name in order:
        if name in summ:
            lines.append("| %s | " % name + " | ".join(
                fmt(summ[name][c], f) for c, _, f in SUMMARY_FIELDS) + " |")
    return "\n".join(lines)


def ratios(summ, base="tern"):
    """tern / X for the CPU figures (lower is better: < 1 means tern is cheaper)."""
    if base not in summ:
        return ""
    lines = []
    for c in ("µs/q @fixed", "µs/q nxflood", "µs/q tcpmix", "qps max", "PSS MiB", "load s"):
        parts = []
        for other, s in summ.items():
            if other == base or s.get(c) in (None, 0) or summ[base].get(c) is None:
                continue
            parts.append("%s %.2f" % (other, summ[base][c] / s[c]))
        if parts:
            lines.append("- tern/peer %s: %s" % (c, ", ".join(parts)))
    return "\n".join(lines)


def mode_compare(args, zd, manifest, phases):
    raw = {n: [] for n in args.servers}
    for i in range(args.runs):
        order = args.servers[i % len(args.servers):] + args.servers[:i % len(args.servers)]
        for name in order:
            log("run %d/%d %s" % (i + 1, args.runs, name))
            try:
                rec = one_run(args, name, zd, manifest, phases, check=(i == 0))
            except RuntimeError as e:
                log("  %s: %s" % (name, e))
                raw[name].append({"server": name, "error": str(e)[:4000]})
                continue
            raw[name].append(rec)
            log("  rcodes@fixed %s" % get(rec, ("fixed", "rcode_pct")))
            log("  " + ", ".join("%s=%s" % (p, get(rec, (p, "cpu_us_per_q"))) for p in phases)
                + " max_qps=%s load=%.2fs pss=%dKiB" % (get(rec, ("max", "qps")), rec["load_s"],
                                                         rec["pss_kb"]))
    ok = {n: [r for r in rs if "error" not in r] for n, rs in raw.items()}
    return raw, summarize({n: rs for n, rs in ok.items() if rs})


# --- capacity -----------------------------------------------------------------------------------

CG_ROOT = "/sys/fs/cgroup"


def make_cgroup(quota_pct, period_us):
    """A CPU-limited cgroup (v1 cpu.cfs_quota_us, or v2 cpu.max); returns (path, remover)."""
    name = "tern-bench-%d" % os.getpid()
    quota = int(period_us * quota_pct / 100)
    v1 = os.path.join(CG_ROOT, "cpu")
    if os.path.exists(os.path.join(v1, "cpu.cfs_quota_us")):
        path = os.path.join(v1, name)
        os.mkdir(path)
        with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
            f.write(str(period_us))
        with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
            f.write(str(quota))
        kind = "v1"
    else:
        base = CG_ROOT if os.path.exists(os.path.join(CG_ROOT, "cgroup.controllers")) else \
            os.path.join(CG_ROOT, "unified")
        path = os.path.join(base, name)
        os.mkdir(path)
        with open(os.path.join(path, "cpu.max"), "w") as f:
            f.write("%d %d" % (quota, period_us))
        kind = "v2"

    def remove():
        for _ in range(50):
            try:
                os.rmdir(path)
                return
            except OSError:
                time.sleep(0.1)
    return path, kind, remove


def bisect_capacity(args, run, qfile):
    lo, hi = 0, args.cap_hi
    probes = []
    best = None
    while hi - lo > max(args.cap_resolution, lo * 0.01):
        rate = (lo + hi) // 2
        # dnsperf is closed-loop (at most -q queries in flight): a throttled server slows it down
        # instead of losing queries, so a probe passes only if the offered rate was achieved too.
        # The deeper -q and dnsperf's bigger buffers (-b) keep the client from being the limit.
        m = measure(run, [dnsperf_argv(run.srv.port, qfile, args.probe_secs, rate, timeout=1,
                                       outstanding=args.cap_outstanding, bufkb=2048)],
                    args.probe_secs)
        ok = (m["sent"] > 0 and m["lost"] / m["sent"] < 0.001 and m["rcvbuf_errors"] == 0
              and m["qps"] >= 0.98 * rate)
        probes.append({"rate": rate, "ok": ok, "qps": m["qps"], "lost": m["lost"],
                       "sent": m["sent"], "rcvbuf_errors": m["rcvbuf_errors"],
                       "cpu_us_per_q": m["cpu_us_per_q"]})
        log("    %-9s Q=%6d got %6.0f/s lost=%d/%d rcvbuf+%d %s" % (
            run.srv.name, rate, m["qps"], m["lost"], m["sent"], m["rcvbuf_errors"],
            "ok" if ok else "FAIL"))
        if ok:
            lo, best = rate, m
        else:
            hi = rate
        time.sleep(0.5)  # let a failed probe's backlog drain
    return lo, probes


def mode_capacity(args, zd, manifest):
    path, kind, remove = make_cgroup(args.cap_pct, args.cap_period)
    log("capacity: cgroup %s (%s) %d%% of one core, period %d µs" % (path, kind, args.cap_pct,
                                                                     args.cap_period))
    raw = {n: [] for n in args.servers}
    qfile = os.path.join(zd, "queries.txt")
    try:
        for i in range(args.runs):
            order = args.servers[i % len(args.servers):] + args.servers[:i % len(args.servers)]
            for name in order:
                log("round %d/%d %s" % (i + 1, args.runs, name))
                try:
                    run = start_server(args, name, os.path.join(zd, ORIGIN + "zone"), path)
                except RuntimeError as e:
                    log("  %s" % e)
                    raw[name].append({"server": name, "round": i, "error": str(e)[:4000]})
                    continue
                try:
                    if i == 0 and run.srv.dns:
                        fails = check_answers(run.srv, manifest)
                        for f in fails:
                            log("  CHECK FAIL %s: %s" % (name, f))
                    cap, probes = bisect_capacity(args, run, qfile)
                    raw[name].append({"server": name, "round": i, "capacity_qps": cap,
                                      "udp_rcvbuf": udp_sock_rcvbuf(run.srv.port),
                                      "probes": probes, "load_s": run.load_s,
                                      "loadavg": open("/proc/loadavg").read().split()[:3]})
                    log("  %s capacity %d qps" % (name, cap))
                finally:
                    run.stop()
                    shutil.rmtree(run.srv.dir, ignore_errors=True)
    finally:
        remove()
    summ = {}
    for n, rs in raw.items():
        caps = [r["capacity_qps"] for r in rs if "capacity_qps" in r]
        if caps:
            summ[n] = {"capacity_qps": median(caps), "rounds": caps}
    return raw, summ, kind


def capacity_table(summ, order):
    lines = ["| server | capacity qps (median) | rounds | ×floor | tern/server |",
             "|---|---|---|---|---|"]
    floor = summ.get("reflector", {}).get("capacity_qps")
    tern = summ.get("tern", {}).get("capacity_qps")
    for n in order:
        if n not in summ:
            continue
        c = summ[n]["capacity_qps"]
        lines.append("| %s | %d | %s | %s | %s |" % (
            n, c, " ".join(str(x) for x in summ[n]["rounds"]),
            "%.2f" % (c / floor) if floor else "—", "%.2f" % (tern / c) if tern and c else "—"))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# preparation: zone data, reflector, ternd


def ensure_zone(args):
    """The zone directory and manifest of args.zone (or a zone name: "100k", "1m"), generated
    once into the cache."""
    zone = args if isinstance(args, str) else args.zone
    names = {"100k": 100000, "1m": 1000000, "1m-rich": 1000000}[zone]
    zd = os.path.join(CACHE, "z" + zone)
    if not os.path.exists(os.path.join(zd, "manifest.json")):
        log("generating %s zone" % zone)
        mix = ["--mix", "rich"] if zone.endswith("-rich") else []
        subprocess.run([sys.executable, os.path.join(BENCH, "gen_zone.py"), "--names",
                        str(names), "--out", zd] + mix, check=True)
    with open(os.path.join(zd, "manifest.json")) as f:
        return zd, json.load(f)


def ensure_reflector():
    src, exe = os.path.join(BENCH, "reflector.c"), os.path.join(CACHE, "reflector")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.run(["cc", "-std=c17", "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe, src],
                       check=True)


def ensure_ternd(args):
    if os.path.exists(args.ternd) and not args.build:
        return True
    return build_ternd(os.path.join(ROOT, "build-bench")) and os.path.exists(args.ternd)


def build_ternd(bd):
    """Configure bd (Release) if needed and build ternd there; False (logged) on failure."""
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
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--mode", default="compare",
                    choices=("compare", "adversarial", "standard", "capacity", "all"),
                    help="compare: max + fixed-rate + adversarial (default); standard: max + "
                         "fixed only; adversarial: nxflood + tcpmix only; capacity: cgroup "
                         "bisection; all: compare then capacity")
    ap.add_argument("--zone", default="100k", choices=("100k", "1m"))
    ap.add_argument("--servers", default=",".join(s for s in ALL_SERVERS if s != "tern-base"))
    ap.add_argument("--runs", type=int, default=3, help="runs (capacity: rounds), medians taken")
    ap.add_argument("--secs", type=int, default=10, help="seconds per dnsperf measurement")
    ap.add_argument("--rate", type=int, default=50000, help="fixed offered load, queries/s")
    ap.add_argument("--tcp-share", type=float, default=0.2, help="TCP share of the tcp mix")
    ap.add_argument("--tcp-conns", type=int, default=4, help="TCP connections in the tcp mix")
    ap.add_argument("--tcp-outstanding", type=int, default=100,
                    help="queries in flight over the TCP connections (pipelined)")
    ap.add_argument("--cap-pct", type=int, default=40, help="capacity: %% of one core")
    ap.add_argument("--cap-period", type=int, default=5000, help="capacity: CFS period, µs")
    ap.add_argument("--cap-hi", type=int, default=150000, help="capacity: bisection upper bound")
    ap.add_argument("--cap-resolution", type=int, default=500, help="capacity: qps resolution")
    ap.add_argument("--cap-outstanding", type=int, default=1000,
                    help="capacity: dnsperf -q (queries in flight)")
    ap.add_argument("--probe-secs", type=int, default=5, help="capacity: seconds per probe")
    ap.add_argument("--load-timeout", type=float, default=300, help="seconds to wait for a zone")
    ap.add_argument("--ternd", default=os.path.join(ROOT, "build-bench", "ternd"))
    ap.add_argument("--ternd-base", default="",
                    help="a second ternd (server tern-base), e.g. built from an older commit")
    ap.add_argument("--build", action=argparse.BooleanOptionalAction, default=True,
                    help="(re)build ternd in build-bench first (default: yes)")
    ap.add_argument("--tag", default="", help="suffix for the results file names")
    args = ap.parse_args()

    args.servers = [s for s in args.servers.split(",") if s]
    for s in args.servers:
        if s not in SERVER_CLASSES:
            sys.exit("unknown server %s (known: %s)" % (s, ", ".join(ALL_SERVERS)))
    if shutil.which("dnsperf") is None:
        sys.exit("dnsperf not installed: .ci/install-deps --bench")
    os.makedirs(os.path.join(CACHE, "run"), exist_ok=True)
    os.makedirs(RESULTS, exist_ok=True)
    zd, manifest = ensure_zone(args)
    ensure_reflector()
    if "tern" in args.servers and not ensure_ternd(args):
        log("ternd not available: skipping tern")
        args.servers.remove("tern")
    avail = []
    for s in args.servers:
        probe = SERVER_CLASSES[s](args, "/dev/null", tempfile.mkdtemp(dir=os.path.join(CACHE,
                                                                                         "run")))
        argv0 = probe.argv()[0]
        shutil.rmtree(probe.dir, ignore_errors=True)
        if shutil.which(argv0) or os.path.exists(argv0):
            avail.append(s)
        else:
            log("%s not installed: skipped" % s)
    args.servers = avail

    stamp = time.strftime("%Y%m%d-%H%M%S")
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "zone": args.zone,
        "zone_names": manifest["names"], "args": {k: v for k, v in vars(args).items()},
        "kernel": os.uname().release, "cpus": os.cpu_count(),
        "versions": {s: SERVER_CLASSES[s](args, "", "/tmp").version() for s in args.servers},
        "dnsperf": _first_line(["dnsperf", "-h"], want="Version"),
    }
    report = ["## %s (%s zone, %d names) — %s" % (args.mode, args.zone, manifest["names"],
                                                  meta["date"]), ""]
    out = {"meta": meta}
    if args.mode in ("compare", "standard", "adversarial", "all"):
        phases = {"compare": ("max", "fixed", "nxflood", "tcpmix"), "all": (
            "max", "fixed", "nxflood", "tcpmix"), "standard": ("max", "fixed"),
            "adversarial": ("nxflood", "tcpmix")}[args.mode]
        raw, summ = mode_compare(args, zd, manifest, phases)
        out["compare"] = {"raw": raw, "summary": summ}
        report += ["Medians of %d runs; one UDP worker pinned to CPU %s, dnsperf on CPU %s; "
                   "fixed load %d q/s for %d s; tcpmix = %d%% of it over TCP (%d connections, "
                   "%d in flight)." % (args.runs, SERVER_CPU, CLIENT_CPU, args.rate, args.secs,
                                       int(args.tcp_share * 100), args.tcp_conns,
                                       args.tcp_outstanding), "",
                   table(summ, ALL_SERVERS), "", ratios(summ), ""]
        if "reflector" in summ and "tern" in summ:
            f = summ["reflector"]["µs/q @fixed"]
            t = summ["tern"]["µs/q @fixed"]
            if f and t:
                report.append("- tern/floor µs/q @fixed: %.2f (tern does %.2f µs of DNS work per "
                              "query above the floor)" % (t / f, t - f))
        report.append("")
    if args.mode in ("capacity", "all"):
        raw, summ, kind = mode_capacity(args, zd, manifest)
        out["capacity"] = {"raw": raw, "summary": summ, "cgroup": kind}
        report += ["### capacity: cgroup %s, %d%% of one core (period %d µs), highest rate with "
                   "< 0.1%% loss and no RcvbufErrors, %d s probes, %d interleaved rounds" % (
                       kind, args.cap_pct, args.cap_period, args.probe_secs, args.runs), "",
                   capacity_table(summ, ALL_SERVERS), ""]
    tag = ("-" + args.tag) if args.tag else ""
    jpath = os.path.join(RESULTS, "%s-%s-%s%s.json" % (args.mode, args.zone, stamp, tag))
    with open(jpath, "w") as f:
        json.dump(out, f, indent=1)
    text = "\n".join(report)
    with open(os.path.join(RESULTS, "latest-%s-%s.md" % (args.mode, args.zone)), "w") as f:
        f.write(text + "\nraw: %s\n" % os.path.relpath(jpath, ROOT))
    print(text)
    print("raw runs: %s" % jpath)


if __name__ == "__main__":
    main()
