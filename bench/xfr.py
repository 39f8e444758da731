#!/usr/bin/python3
"""Zone transfers: how long a 1M-record zone takes to move, what it costs in memory on both
sides, what an outgoing AXFR costs the workers, and how fast a change reaches secondaries.

    /usr/bin/python3 bench/xfr.py                       # every part
    /usr/bin/python3 bench/xfr.py --parts latency       # one part

Parts (ternd pinned to CPU 0, the other side on CPU 1, all on loopback):

axfr      the 1M-name bench zone (gen_zone.py --names 1000000, 1.33M records) served by ternd
          with allow_transfer; fetched by a real NSD and a real Knot as secondaries (exec to the
          first answer of the zone's SOA, peak RSS (VmHWM) of the secondary's processes and
          ternd's VmHWM before and after), and by `kdig +tcp AXFR` to /dev/null (the stream
          alone). Then the other way: Knot serves the zone, ternd is its secondary: time from
          exec to serving it, ternd's peak RSS.
workers   ternd (one worker) on the 100k zone at --rate q/s for --secs: the worker thread's CPU
          per answered query, with no transfer and with back-to-back AXFRs of the 100k zone
          (kdig on CPU 1) the whole time; --runs interleaved rounds, medians and ratio.
latency   a small zone with NSD and Knot as secondaries: --changes changes (a record and the
          serial, SIGHUP), each the time until both secondaries answer the new serial (NOTIFY +
          IXFR); medians.

Raw data in bench/results/xfr-<date>.json. Only processes started here are stopped.
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True
import run  # noqa: E402

ORIGIN = run.ORIGIN.rstrip(".")


def log(*a):
    run.log(*a)


def hwm_kb(pids):
    """Peak resident set (VmHWM) summed over pids, KiB."""
    total = 0
    for p in pids:
        try:
            with open("/proc/%d/status" % p) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


class TernX(run.Server):
    """ternd from a config file: the zone with allow_transfer (and notify), or as secondary."""
    name = "tern"

    def __init__(self, args, zonefile, workdir, extra=""):
        super().__init__(args, zonefile, workdir)
        self.extra = extra

    def argv(self):
        conf = os.path.join(self.dir, "ternd.yaml")
        with open(conf, "w") as f:
            f.write('listen: ["127.0.0.1:%d"]\nworkers: 1\nallow_root: true\n' % self.port)
            f.write(self.extra)
        return [self.args.ternd, "-c", conf]


class NsdSec(run.Server):
    name = "nsd"

    def __init__(self, args, primary_port, workdir, zone=ORIGIN):
        super().__init__(args, None, workdir)
        self.primary_port, self.zone = primary_port, zone

    def argv(self):
        d = self.dir
        conf = os.path.join(d, "nsd.conf")
        with open(conf, "w") as f:
            f.write(f"""server:
    ip-address: 127.0.0.1@{self.port}
    port: {self.port}
    do-ip6: no
    username: ""
    chroot: ""
    zonesdir: "{d}"
    database: ""
    pidfile: "{d}/nsd.pid"
    xfrdfile: "{d}/xfrd.state"
    xfrdir: "{d}"
    zonelistfile: "{d}/zone.list"
    logfile: "{d}/nsd.log"
    server-count: 1
    rrl-ratelimit: 0
    xfrd-reload-timeout: 0
remote-control:
    control-enable: no
zone:
    name: "{self.zone}"
    zonefile: "{self.zone}.zone"
    request-xfr: 127.0.0.1@{self.primary_port} NOKEY
    allow-notify: 127.0.0.1 NOKEY
""")
        return [shutil.which("nsd", path="/usr/sbin:/usr/bin"), "-d", "-c", conf]


class KnotX(run.Server):
    """Knot as secondary of ternd (primary_port) or as primary of zonefile (notify to tern)."""
    name = "knot"

    def __init__(self, args, workdir, zone=ORIGIN, primary_port=None, zonefile=None,
                 notify_port=None):
        super().__init__(args, zonefile, workdir)
        self.zone, self.primary_port, self.notify_port = zone, primary_port, notify_port
        os.makedirs(os.path.join(workdir, "db"), exist_ok=True)

    def argv(self):
        d = self.dir
        conf = os.path.join(d, "knot.conf")
        with open(conf, "w") as f:
            f.write(f"""server:
    rundir: "{d}"
    listen: 127.0.0.1@{self.port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "{d}/db"
log:
  - target: stderr
    any: warning
acl:
  - id: lo
    address: 127.0.0.1
    action: [transfer, notify]
""")
            if self.primary_port:
                f.write(f"remote:\n  - id: p\n    address: 127.0.0.1@{self.primary_port}\n")
            if self.notify_port:
                f.write(f"remote:\n  - id: t\n    address: 127.0.0.1@{self.notify_port}\n")
            f.write(f"""template:
  - id: default
    storage: "{d}"
    zonefile-sync: -1
    journal-content: none
zone:
  - domain: {self.zone}
    acl: lo
""")
            if self.primary_port:
                f.write("    master: p\n    file: %s/secondary.zone\n" % d)
            else:
                f.write("    file: %s\n" % self.zonefile)
        return [shutil.which("knotd", path="/usr/sbin:/usr/bin"), "-c", conf]


def started(srv, timeout, zone=ORIGIN, want_serial=None):
    """Run srv on the CPUs run.Running uses (SERVER_CPU); ready when zone's SOA answers."""
    r = run.Running(srv)
    deadline = r.t0 + timeout
    while time.monotonic() < deadline:
        if r.proc.poll() is not None:
            raise RuntimeError("%s exited:\n%s" % (srv.name, r.log_tail()))
        a = run.udp_query(srv.port, zone + ".", 6, timeout=0.05)
        if a is not None and a[0] == 0 and a[2] >= 1:
            r.load_s = time.monotonic() - r.t0
            return r
        time.sleep(0.005)
    tail = r.log_tail()
    r.stop()
    raise RuntimeError("%s did not serve %s in %.0f s:\n%s" % (srv.name, zone, timeout, tail))


def on_cpu(r, cpu):
    for p in r.pids():
        subprocess.run(["taskset", "-a", "-p", "-c", cpu, str(p)], capture_output=True)


def workdir(tag):
    return tempfile.mkdtemp(prefix="xfr-%s-" % tag, dir=os.path.join(run.CACHE, "run"))


def part_axfr(args, res):
    zd = os.path.join(run.CACHE, "z1m")
    if not os.path.exists(os.path.join(zd, "manifest.json")):
        subprocess.run([sys.executable, os.path.join(BENCH, "gen_zone.py"), "--names", "1000000",
                        "--out", zd], check=True)
    zf = os.path.join(zd, "bench.test.zone")
    extra = 'zones:\n  - origin: %s\n    file: "%s"\n    allow_transfer: [127.0.0.1]\n' % (
        ORIGIN, zf)
    out = {}
    tern = started(TernX(args, zf, workdir("p"), extra), args.load_timeout)
    try:
        tern_pids = tern.pids()
        base_hwm = hwm_kb(tern_pids)
        out["tern_load_s"] = round(tern.load_s, 2)
        out["tern_hwm_before_kib"] = base_hwm
        # the stream alone
        t0 = time.monotonic()
        k = subprocess.run(["taskset", "-c", run.CLIENT_CPU, "kdig", "@127.0.0.1", "-p",
                            str(tern.srv.port), "+tcp", ORIGIN, "AXFR"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=300)
        out["kdig_axfr_s"] = round(time.monotonic() - t0, 2)
        out["kdig_records"] = sum(1 for line in k.stdout.split(b"\n")
                                  if line and not line.startswith(b";"))
        for name, cls in (("nsd", NsdSec), ("knot", None)):
            d = workdir(name)
            sec = NsdSec(args, tern.srv.port, d) if cls else KnotX(args, d,
                                                                   primary_port=tern.srv.port)
            r = run.Running(sec)
            on_cpu(r, run.CLIENT_CPU)
            try:
                deadline = r.t0 + 600
                while time.monotonic() < deadline:
                    a = run.udp_query(sec.port, ORIGIN + ".", 6, timeout=0.05)
                    if a is not None and a[0] == 0 and a[2] >= 1:
                        break
                    time.sleep(0.01)
                out[name + "_axfr_s"] = round(time.monotonic() - r.t0, 2)
                out[name + "_hwm_kib"] = hwm_kb(r.pids())
            finally:
                r.stop()
                shutil.rmtree(d, ignore_errors=True)
            log("%s secondary: %.2f s, peak %d MiB" % (name, out[name + "_axfr_s"],
                                                        out[name + "_hwm_kib"] // 1024))
        out["tern_hwm_after_kib"] = hwm_kb(tern_pids)
    finally:
        tern.stop()
    log("tern serving 1M: load %.2f s, VmHWM %d -> %d MiB over three transfers out, kdig AXFR "
        "%.2f s (%d records)" % (out["tern_load_s"], out["tern_hwm_before_kib"] // 1024,
                                 out["tern_hwm_after_kib"] // 1024, out["kdig_axfr_s"],
                                 out["kdig_records"]))
    # tern as the secondary of Knot
    kd = workdir("kp")
    knot = KnotX(args, kd, zonefile=zf)
    kr = run.Running(knot)
    on_cpu(kr, run.CLIENT_CPU)
    try:
        deadline = kr.t0 + 300
        while run.udp_query(knot.port, ORIGIN + ".", 6, timeout=0.05) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("knot did not load the zone")
            time.sleep(0.05)
        extra = 'zones:\n  - origin: %s\n    primary: "127.0.0.1@%d"\nxfr_timeout_ms: 60000\n' % (
            ORIGIN, knot.port)
        t = started(TernX(args, None, workdir("s"), extra), 600)
        out["tern_secondary_s"] = round(t.load_s, 2)
        out["tern_secondary_hwm_kib"] = hwm_kb(t.pids())
        time.sleep(1)
        out["tern_secondary_pss_kib"] = run.pss_kb(t.pids())
        t.stop()
    finally:
        kr.stop()
    log("tern as secondary of Knot: %.2f s exec to serving, VmHWM %d MiB, PSS after %d MiB" % (
        out["tern_secondary_s"], out["tern_secondary_hwm_kib"] // 1024,
        out["tern_secondary_pss_kib"] // 1024))
    res["axfr"] = out


def worker_cpu(pid):
    """CPU seconds of ternd's worker threads (named tern-worker)."""
    return sum(run.thread_cpu(pid, "tern-worker").values())


def part_workers(args, res):
    zd, _ = run.ensure_zone("100k")
    zf = os.path.join(zd, "bench.test.zone")
    rows = {"off": [], "axfr": []}
    for i in range(args.runs):
        for kind in (["off", "axfr"] if i % 2 == 0 else ["axfr", "off"]):
            extra = 'zones:\n  - origin: %s\n    file: "%s"\n    allow_transfer: [127.0.0.1]\n' % (
                ORIGIN, zf)
            t = started(TernX(args, zf, workdir("w"), extra), args.load_timeout)
            loop = None
            try:
                time.sleep(0.3)
                if kind == "axfr":
                    loop = subprocess.Popen(
                        ["taskset", "-c", run.CLIENT_CPU, "sh", "-c",
                         "end=$(($(date +%%s) + %d)); while [ $(date +%%s) -lt $end ]; do "
                         "kdig @127.0.0.1 -p %d +tcp %s AXFR > /dev/null; done"
                         % (args.secs + 2, t.srv.port, ORIGIN)],
                        start_new_session=True)
                    time.sleep(0.5)
                pid = t.proc.pid
                # ternd runs under taskset: the pid Popen has is ternd itself
                c0 = worker_cpu(pid)
                m = run.measure(t, [run.dnsperf_argv(t.srv.port, os.path.join(zd, "queries.txt"),
                                                     args.secs, rate=args.rate)], args.secs)
                c1 = worker_cpu(pid)
                us = (c1 - c0) * 1e6 / m["completed"]
                rows[kind].append({"worker_us_per_q": round(us, 3),
                                   "server_us_per_q": m["cpu_us_per_q"], "lost": m["lost"]})
                log("round %d %-4s worker %.3f us/q, whole server %.3f us/q, lost %d" % (
                    i, kind, us, m["cpu_us_per_q"], m["lost"]))
            finally:
                if loop and loop.poll() is None:
                    os.killpg(loop.pid, signal.SIGTERM)
                    loop.wait(timeout=10)
                t.stop()
    off = statistics.median(r["worker_us_per_q"] for r in rows["off"])
    on = statistics.median(r["worker_us_per_q"] for r in rows["axfr"])
    per = [a["worker_us_per_q"] / b["worker_us_per_q"] for a, b in zip(rows["axfr"], rows["off"])]
    print("workers: %.3f us/q without transfers, %.3f during back-to-back AXFRs: %.3f "
          "(per-round %s)" % (off, on, on / off, [round(x, 3) for x in per]))
    res["workers"] = rows


def small_zone(serial, addr):
    lines = ["$ORIGIN lat.test.", "$TTL 300",
             "@ SOA ns1.lat.test. h.lat.test. %d 3600 600 86400 60" % serial,
             "@ NS ns1.lat.test.", "ns1 A 192.0.2.53", "www A %s" % addr]
    lines += ["h%d A 198.51.100.%d" % (i, i % 250) for i in range(200)]
    return "\n".join(lines) + "\n"


def part_latency(args, res):
    d = workdir("lat")
    zf = os.path.join(d, "lat.zone")
    with open(zf, "w") as f:
        f.write(small_zone(1, "192.0.2.1"))
    nsd_port, knot_port = run.free_port(), run.free_port()
    extra = ('zones:\n  - origin: lat.test\n    file: "%s"\n    allow_transfer: [127.0.0.1]\n'
             '    notify: ["127.0.0.1@%d", "127.0.0.1@%d"]\n' % (zf, nsd_port, knot_port))
    t = started(TernX(args, zf, workdir("lt"), extra), args.load_timeout, zone="lat.test")
    nsd = NsdSec(args, t.srv.port, workdir("ln"), zone="lat.test")
    nsd.port = nsd_port
    knot = KnotX(args, workdir("lk"), zone="lat.test", primary_port=t.srv.port)
    knot.port = knot_port
    secs = []
    try:
        for s in (nsd, knot):
            r = run.Running(s)
            on_cpu(r, run.CLIENT_CPU)
            secs.append(r)
        for r in secs:
            deadline = time.monotonic() + 30
            while run.udp_query(r.srv.port, "lat.test.", 6, timeout=0.05) is None:
                if time.monotonic() > deadline:
                    raise RuntimeError("%s has no lat.test" % r.srv.name)
                time.sleep(0.05)
        times = {"nsd": [], "knot": []}
        for i in range(args.changes):
            serial = i + 2
            with open(zf + ".tmp", "w") as f:
                f.write(small_zone(serial, "192.0.2.%d" % serial))
            os.replace(zf + ".tmp", zf)
            t0 = time.monotonic()
            t.proc.send_signal(signal.SIGHUP)
            pending = {r.srv.name: r for r in secs}
            while pending and time.monotonic() - t0 < 10:
                for name, r in list(pending.items()):
                    q = serial_of(r.srv.port)
                    if q == serial:
                        times[name].append(time.monotonic() - t0)
                        del pending[name]
                time.sleep(0.002)
            for name in pending:
                times[name].append(None)
            time.sleep(0.5)
        for name, v in times.items():
            ok = [x for x in v if x is not None]
            print("latency %s: median %.0f ms, max %.0f ms over %d changes (%d missed)" % (
                name, 1000 * statistics.median(ok) if ok else -1, 1000 * max(ok) if ok else -1,
                len(v), len(v) - len(ok)))
        res["latency"] = times
    finally:
        for r in secs:
            r.stop()
        t.stop()


def serial_of(port):
    """The serial of lat.test's SOA as the server at port answers it, or None."""
    import dns.exception
    import dns.message
    import dns.query
    try:
        r = dns.query.udp(dns.message.make_query("lat.test.", "SOA"), "127.0.0.1", port=port,
                          timeout=0.05)
    except (dns.exception.DNSException, OSError):
        return None
    for rrset in r.answer:
        if rrset.rdtype == 6:
            return rrset[0].serial
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="axfr,workers,latency")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--secs", type=int, default=6)
    ap.add_argument("--rate", type=int, default=50000)
    ap.add_argument("--changes", type=int, default=10)
    ap.add_argument("--ternd", default=os.path.join(run.ROOT, "build-bench", "ternd"))
    ap.add_argument("--load-timeout", type=float, default=120)
    args = ap.parse_args()
    os.makedirs(os.path.join(run.CACHE, "run"), exist_ok=True)
    os.makedirs(run.RESULTS, exist_ok=True)
    res = {"meta": {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S UTC"),
                    "args": vars(args)}}
    parts = args.parts.split(",")
    if "axfr" in parts:
        part_axfr(args, res)
    if "workers" in parts:
        part_workers(args, res)
    if "latency" in parts:
        part_latency(args, res)
    out = os.path.join(run.RESULTS, "xfr-%s.json" %
                       datetime.datetime.utcnow().strftime("%Y%m%d-%H%M%S"))
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    log("raw data: %s" % out)


if __name__ == "__main__":
    main()
