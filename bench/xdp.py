#!/usr/bin/python3
"""Flood benchmark of the AF_XDP listener and of the socket path: tern (xdp: listen:), tern on
sockets, tern on busy-polling sockets (tern-bp), Knot on sockets, Knot in XDP mode and gdnsd (also
as gdnsd-defer: under tern-bp's device setting), on a veth pair between two network namespaces.

    /usr/bin/python3 bench/xdp.py                      # 3 interleaved rounds, all seven servers
    /usr/bin/python3 bench/xdp.py --rounds 1 --secs 5 --servers tern-xdp,knot-xdp   # quick look

Needs root (namespaces, BPF) and kxdpgun (knot-dnsutils); exits 77 (skipped) with a message when
root, network namespaces or XDP (kxdpgun's own attach) are refused. A server whose XDP program
cannot attach is reported with its log and left out; the others still run.

Per round, every server in turn (the order rotates each round, so drift over the run falls on
each server alike): the server in namespace A, pinned to CPU 0 with taskset, serving the 100k zone
of bench/gen_zone.py on the veth's address; kxdpgun in namespace B, pinned to CPU 1, sending the
zone's query file (bench/.cache/z100k/queries.txt, "name TYPE" lines: kxdpgun's format) from an
AF_XDP socket. Both veth ends have GRO on (which gives veth a NAPI instance without XDP too) and
threaded NAPI; the server end's NAPI kthread is pinned to CPU 0 and its CPU counted with the
server's, the client end's to CPU 1. tern-bp busy-polls (udp_busy_poll_us 50, budget 64, prefer,
udp_rcvbuf 256 KiB) with the server end's napi_defer_hard_irqs 2 and gro_flush_timeout 1 ms, the
setting the README gives for it ("Floods on sockets"); gdnsd-defer is gdnsd under that same
device setting, so the gain is not the setting's alone. reflector is the floor of the socket
path: bench/reflector.c, recvmmsg/sendmmsg with no DNS work (it echoes each query with QR set,
which kxdpgun counts as a NOERROR reply), so what a socket server answers under flood is set
against what the kernel leaves for any server on that CPU. Three phases:

  light     1k q/s for 3 s from bench/udp_latency.py: round-trip times (what deferring the
            device's interrupts costs a query when traffic is light)
  normal    --rate q/s (50k) for --secs: the server's CPU (utime+stime of all its threads, plus
            the NAPI kthread) per answered query
  overload  --flood q/s offered (600k, or what kxdpgun really manages: its "sent" is reported)
            for --secs: replies per second

Medians over rounds, with ratios against tern-xdp, gdnsd and the reflector, are printed; raw
records go to bench/results/xdp-<date>.json. See bench/README.md ("AF_XDP flood").
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(os.path.dirname(BENCH), "tests", "integration"))
from run import (CACHE, CLIENT_CPU, ORIGIN, RESULTS, ROOT, SERVER_CPU, Gdnsd, Knot,  # noqa: E402
                 Reflector, Tern, _first_line, build_ternd, cpu_ticks, ensure_reflector,
                 ensure_zone, log, median, proc_tree, stop_group)
from test_xdp import SERVER4, SKIP, netns_main  # noqa: E402

ALL = ("tern-xdp", "tern", "tern-bp", "knot-xdp", "knot", "gdnsd", "gdnsd-defer", "reflector")
# The server end's NAPI deferral for the busy-polling runs (tern-bp, and gdnsd-defer to show what
# the device setting alone does for a server that does not busy-poll), the README's ("Floods on
# sockets"): a worker keeps the device queue only while it comes back to poll within the
# timeout, and answering what one poll brings (up to 128 datagrams) takes it 300-600 µs, so the
# kernel's example 200 µs (Documentation/networking/napi.rst) hands the queue back to the NAPI
# thread under flood (so do 500 µs); 1 ms keeps it. Every other run has the kernel's 0 and 0.
DEFER_HARD_IRQS, GRO_FLUSH_TIMEOUT_NS = 2, 1000000
# tern-bp's udp_rcvbuf: small enough that a worker finds its socket empty, and polls, within one
# of the NAPI thread's CPU slices (with 4 MiB the thread keeps it full and the queue); large
# enough for what one poll brings (truesize about 2 KiB a datagram here).
BP_RCVBUF = 262144
# The light-load phase: bench/udp_latency.py at this rate, what a query waits when the device's
# interrupts are deferred and the worker sleeps.
LIGHT_RATE, LIGHT_SECS = 1000, 3
DEFERRED = ("tern-bp", "gdnsd-defer")
BOUND = 20  # seconds for any one setup command: ip, sysctl writes, dig

# Sets an ethtool flag of an interface in the namespace it runs in (argv: interface, ethtool
# command number, value) through SIOCETHTOOL, as ethtool itself is not always installed. On
# veth, GRO (ETHTOOL_SGRO) gives the receiving end a NAPI instance without an XDP program, and
# the sending end must not offer TSO (ETHTOOL_STSO off) or veth_xmit() skips that NAPI for
# netif_rx() (veth_skb_is_eligible_for_gro()); with both, the socket servers' receive path runs
# in the server end's NAPI kthread (threaded NAPI, counted) as the XDP servers' does, rather
# than in the sender's softirq on the load generator's CPU.
ETHTOOL_SET = r"""
import ctypes, fcntl, socket, struct, sys
val = ctypes.create_string_buffer(struct.pack("II", int(sys.argv[2]), int(sys.argv[3])))
ifr = struct.pack("16sP", sys.argv[1].encode(), ctypes.addressof(val)).ljust(40, b"\0")
fcntl.ioctl(socket.socket(socket.AF_INET, socket.SOCK_DGRAM), 0x8946, ifr)
"""
ETHTOOL_SGRO, ETHTOOL_STSO = 0x2C, 0x1F


def sh(*argv, check=True, timeout=BOUND):
    return subprocess.run(list(argv), check=check, timeout=timeout, capture_output=True,
                          text=True)


class TernConf(Tern):
    """ternd with a small config file of conf() beside the flags (which give the rest)."""
    iface = None

    def conf(self):
        raise NotImplementedError

    def argv(self):
        path = os.path.join(self.dir, self.name + ".yaml")
        with open(path, "w") as f:
            f.write(self.conf())
        return super().argv() + ["-c", path]


class TernXdp(TernConf):
    """ternd with xdp: listen: [the veth]."""
    name = "tern-xdp"

    def conf(self):
        return "xdp:\n  listen: [%s]\n" % self.iface


class TernBp(TernConf):
    """ternd on sockets with busy polling (udp_busy_poll_us; README "Floods on sockets")."""
    name = "tern-bp"

    def conf(self):
        return ("udp_busy_poll_us: 50\nudp_busy_poll_budget: 64\nudp_prefer_busy_poll: true\n"
                "udp_rcvbuf: %d\n" % BP_RCVBUF)


class GdnsdDefer(Gdnsd):
    """gdnsd as is, run with the server end's NAPI deferral set as for tern-bp."""
    name = "gdnsd-defer"


class XdpReflector(Reflector):
    """bench/reflector.c on the server namespace's address (run.py's runs it on loopback)."""

    def argv(self):
        return [os.path.join(CACHE, "reflector"), "%s:%d" % (self.addr, self.port)]

    def version(self):
        return "bench/reflector.c"


class KnotXdp(Knot):
    """knotd with xdp: listen: <the veth> (Knot 3.2's XDP mode), logging at info so a refused
    attach says why."""
    name = "knot-xdp"
    iface = None

    def argv(self):
        a = super().argv()
        conf = a[-1]
        with open(conf) as f:
            text = f.read().replace("any: warning", "any: info")
        with open(conf, "w") as f:
            f.write(text + "xdp:\n    listen: %s@%d\n" % (self.iface, self.port))
        return a


CLASSES = {"tern-xdp": TernXdp, "tern": Tern, "tern-bp": TernBp, "knot-xdp": KnotXdp,
           "knot": Knot, "gdnsd": Gdnsd, "gdnsd-defer": GdnsdDefer, "reflector": XdpReflector}
XDP_SERVERS = ("tern-xdp", "knot-xdp")


# ---------------------------------------------------------------------------------------------
# the veth's NAPI kthreads


def napi_threads(dev):
    """pids of the threaded-NAPI kthreads of dev ("napi/<dev>-<id>", comm cut at 15 chars)."""
    want = ("napi/" + dev)[:15]
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % d) as f:
                if f.read().startswith(want):
                    out.append(int(d))
        except OSError:
            continue
    return out


def pin(pids, cpu):
    for p in pids:
        sh("taskset", "-p", "-c", cpu, str(p), check=False)


def napi_defer(net, on):
    """The server end's napi_defer_hard_irqs and gro_flush_timeout: DEFER_HARD_IRQS and
    GRO_FLUSH_TIMEOUT_NS when on, else the kernel's defaults (0, 0)."""
    d, g = (DEFER_HARD_IRQS, GRO_FLUSH_TIMEOUT_NS) if on else (0, 0)
    sh(*net.exec(net.srv, "sh", "-c", "echo %d > /sys/class/net/%s/napi_defer_hard_irqs && "
                 "echo %d > /sys/class/net/%s/gro_flush_timeout" % (d, net.srv_if, g, net.srv_if)))


def threaded_napi(net):
    """GRO and threaded NAPI on both veth ends; False (logged) when the kernel refuses."""
    for ns, dev in ((net.srv, net.srv_if), (net.cli, net.cli_if)):
        for cmd, val in ((ETHTOOL_SGRO, 1), (ETHTOOL_STSO, 0)):
            r = sh(*net.exec(ns, "/usr/bin/python3", "-c", ETHTOOL_SET, dev, str(cmd), str(val)),
                   check=False)
            if r.returncode:
                log("ethtool %#x on %s refused: %s" % (cmd, dev, r.stderr.strip()[-300:]))
                return False
        w = sh(*net.exec(ns, "sh", "-c", "echo 1 > /sys/class/net/%s/threaded" % dev),
               check=False)
        if w.returncode:
            log("threaded NAPI on %s refused: %s" % (dev, w.stderr.strip()))
            return False
    return True


# ---------------------------------------------------------------------------------------------
# a server in the server namespace


class NsServer:
    """One server started in net.srv pinned to SERVER_CPU, in a session of its own (stopped by
    its own process group: ip netns exec and taskset exec the server, so the pid is the
    server's)."""

    def __init__(self, args, net, name, zonefile):
        self.net, self.name = net, name
        wd = tempfile.mkdtemp(prefix="tern-xdp-%s-" % name, dir=os.path.join(CACHE, "run"))
        cls = CLASSES[name]
        self.srv = cls(args, zonefile, wd)
        self.srv.addr, self.srv.port = SERVER4, 53
        self.srv.iface = net.srv_if
        env = dict(os.environ, TERN_XDP_OBJ=os.path.abspath(args.bpf))
        self.logf = open(os.path.join(wd, "server.log"), "w+")
        self.proc = subprocess.Popen(net.exec(net.srv, "taskset", "-c", SERVER_CPU,
                                              *self.srv.argv()),
                                     stdout=self.logf, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True, cwd=wd)

    def wait_ready(self, timeout):
        """True once an SOA query from the client namespace is answered (through XDP for the
        XDP servers); False when the server exited or the time ran out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if self.name == "reflector":  # an echo: any reply with a header will do
                r = sh(*self.net.exec(self.net.cli, "dig", "+time=1", "+tries=1", "+norecurse",
                                      "@" + SERVER4, ORIGIN, "SOA"), check=False)
                if "->>HEADER<<-" in r.stdout:
                    return True
                time.sleep(0.2)
                continue
            r = sh(*self.net.exec(self.net.cli, "dig", "+time=1", "+tries=1", "+short",
                                  "+norecurse", "@" + SERVER4, ORIGIN, "SOA"), check=False)
            if "hostmaster" in r.stdout:
                return True
            time.sleep(0.2)
        return False

    def xdp_attached(self):
        return "xdp" in sh("ip", "-n", self.net.srv, "link", "show", "dev",
                           self.net.srv_if).stdout

    def cpu(self, napi):
        """CPU seconds so far of the server's processes and the NAPI kthreads napi."""
        return cpu_ticks(proc_tree(self.proc.pid)), cpu_ticks(napi)

    def stop(self):
        stop_group(self.proc)
        self.logf.close()

    def log_tail(self, n=20):
        with open(os.path.join(self.srv.dir, "server.log")) as f:
            return "".join(f.readlines()[-n:])


# ---------------------------------------------------------------------------------------------
# load: kxdpgun in the client namespace


def parse_kxdpgun(out):
    """kxdpgun's summary: queries and replies (totals and its pps), rcodes."""
    rec = {}
    m = re.search(r"total queries:\s+(\d+) \((\d+) pps\)", out)
    if m:
        rec["sent"], rec["sent_pps"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"total replies:\s+(\d+) \((\d+) pps\)", out)
    if m:
        rec["replies"], rec["replies_pps"] = int(m.group(1)), int(m.group(2))
    rec["rcodes"] = {k: int(v) for k, v in re.findall(r"responded (\w+):\s+(\d+)", out)}
    m = re.search(r"duration: (\d+) s", out)
    if m:
        rec["duration_s"] = int(m.group(1))
    return rec


def kxdpgun(net, mac, qfile, rate, secs):
    return net.exec(net.cli, "taskset", "-c", CLIENT_CPU, "kxdpgun", "-t", str(secs), "-Q",
                    str(rate), "-F", CLIENT_CPU, "-i", qfile, "-I", net.cli_if, "-R", mac,
                    SERVER4)


def perf_top(data, pids, n=25):
    """The n symbols with most samples among the tasks pids (the server's and its NAPI
    kthread's) in perf.data, as (percent, task, symbol) text lines."""
    r = sh("perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "comm,sym",
           "--pid", ",".join(str(p) for p in pids), "-g", "none", "--percent-limit", "0.5",
           check=False, timeout=120)
    lines = [ln for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    return lines[:n]


def phase(args, net, mac, qfile, srv, rate, profile=False):
    """One kxdpgun run at rate against srv: its counts and the server's CPU over it; with
    profile, where CPU 0 went meanwhile (perf record of the server's and the NAPI kthread's
    samples; --perf)."""
    napi = napi_threads(net.srv_if)
    pin(napi, SERVER_CPU)
    s0, n0 = srv.cpu(napi)
    perf = None
    if profile:
        data = os.path.join(srv.srv.dir, "perf.data")
        perf = subprocess.Popen(["perf", "record", "-q", "-C", SERVER_CPU, "-g", "-o", data,
                                 "--", "sleep", str(args.secs)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    p = subprocess.Popen(kxdpgun(net, mac, qfile, rate, args.secs),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        time.sleep(0.5)  # kxdpgun's XDP attach may (re)create the client end's kthread
        pin(napi_threads(net.cli_if), CLIENT_CPU)
        out, _ = p.communicate(timeout=args.secs + 30)
    except subprocess.TimeoutExpired:
        raise RuntimeError("kxdpgun did not finish in %d s" % (args.secs + 30))
    finally:  # on a timeout, or SIGTERM's exit while waiting: the generator goes too
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
    s1, n1 = srv.cpu(napi)
    rec = parse_kxdpgun(out)
    if perf is not None:
        perf.wait(timeout=args.secs + 60)
        rec["profile"] = perf_top(data, proc_tree(srv.proc.pid) + napi)
    if p.returncode != 0 or "replies" not in rec:
        raise RuntimeError("kxdpgun failed (%s): %s" % (p.returncode, out[-1500:]))
    rec.update(offered=rate, server_cpu_s=round(s1 - s0, 3), napi_cpu_s=round(n1 - n0, 3),
               napi_threads=len(napi))
    rec["answered_pct"] = round(100.0 * rec["replies"] / max(rec["sent"], 1), 2)
    rec["cpu_us_per_q"] = (round(1e6 * (s1 - s0 + n1 - n0) / rec["replies"], 3)
                           if rec["replies"] else None)
    return rec


def light(net):
    """bench/udp_latency.py from the client namespace: round trips at LIGHT_RATE q/s."""
    r = sh(*net.exec(net.cli, "taskset", "-c", CLIENT_CPU, "/usr/bin/python3",
                     os.path.join(BENCH, "udp_latency.py"), SERVER4, "53", str(LIGHT_RATE),
                     str(LIGHT_SECS), ORIGIN), check=False, timeout=LIGHT_SECS + 30)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError("udp_latency.py failed: %s" % (r.stdout + r.stderr)[-800:])


def one_round(args, net, mac, qfile, zonefile, name):
    rec = {"server": name, "loadavg": open("/proc/loadavg").read().split()[:3]}
    napi_defer(net, name in DEFERRED)
    srv = NsServer(args, net, name, zonefile)
    try:
        if not srv.wait_ready(args.load_timeout):
            raise RuntimeError("%s did not answer on %s:\n%s" % (name, SERVER4, srv.log_tail()))
        attached = srv.xdp_attached()
        if attached != (name in XDP_SERVERS):
            raise RuntimeError("%s: XDP program %s on %s:\n%s" % (
                name, "attached" if attached else "not attached", net.srv_if, srv.log_tail()))
        time.sleep(1)  # let background loaders settle
        rec["light"] = light(net)
        rec["normal"] = phase(args, net, mac, qfile, srv, args.rate)
        time.sleep(1)
        rec["overload"] = phase(args, net, mac, qfile, srv, args.flood, profile=args.perf)
        if args.perf:
            log("  %s under flood, top symbols (server and NAPI kthread):\n    %s" % (
                name, "\n    ".join(rec["overload"]["profile"])))
        return rec
    finally:
        srv.stop()
        if srv.xdp_attached():
            # knotd 3.2 leaves its program attached on stop; the next server must find the
            # interface bare
            rec["left_attached"] = True
            log("  %s left an XDP program on %s: detached" % (name, net.srv_if))
            sh("ip", "-n", net.srv, "link", "set", "dev", net.srv_if, "xdp", "off", check=False)
        shutil.rmtree(srv.srv.dir, ignore_errors=True)  # its log is in rec on error


# ---------------------------------------------------------------------------------------------
# summary


FIELDS = [  # (label, phase, key, format)
    ("sent/s flood", "overload", "sent_pps", "%.0f"),
    ("replies/s flood", "overload", "replies_pps", "%.0f"),
    ("answered % flood", "overload", "answered_pct", "%.1f"),
    ("µs/q @rate", "normal", "cpu_us_per_q", "%.3f"),
    ("of it NAPI µs/q", "normal", "napi_us_per_q", "%.3f"),
    ("answered % @rate", "normal", "answered_pct", "%.2f"),
    ("p50 µs @1k", "light", "p50_us", "%.0f"),
    ("p99 µs @1k", "light", "p99_us", "%.0f"),
]


def summarize(raw):
    summ = {}
    for name, recs in raw.items():
        ok = [r for r in recs if "error" not in r]
        if not ok:
            continue
        for r in ok:
            n = r["normal"]
            n["napi_us_per_q"] = (round(1e6 * n["napi_cpu_s"] / n["replies"], 3)
                                  if n["replies"] else None)
        s = {label: median([r[ph].get(k) for r in ok]) for label, ph, k, _ in FIELDS}
        s["replies/s per round"] = [r["overload"]["replies_pps"] for r in ok]
        s["rounds"] = len(ok)
        summ[name] = s
    return summ


def table(summ):
    cols = [f[0] for f in FIELDS]
    lines = ["| server | " + " | ".join(cols) + " | replies/s per round |",
             "|---" * (len(cols) + 2) + "|"]
    for name in ALL:
        if name in summ:
            s = summ[name]
            lines.append("| %s | " % name + " | ".join(
                "—" if s[c] is None else f % s[c] for c, _, _, f in FIELDS) +
                " | %s |" % ", ".join("%dk" % round(v / 1000) for v in s["replies/s per round"]))
    return "\n".join(lines)


def ratios(summ):
    lines = []
    for base in ("tern-xdp", "gdnsd", "reflector"):
        if base not in summ:
            continue
        for c in ("replies/s flood", "µs/q @rate"):
            b = summ[base][c]
            parts = ["%s %.2f×" % (n, s[c] / b) for n, s in summ.items()
                     if n != base and b and s[c]]
            if parts:
                lines.append("- %s / %s: %s" % (c, base, ", ".join(parts)))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def bench(args, net, zonefile, qfile):
    if not threaded_napi(net):
        log("continuing without threaded NAPI: receive work on the veth is not counted")
    mac = re.search(r"link/ether (\S+)", sh("ip", "-n", net.srv, "link", "show", "dev",
                                          net.srv_if).stdout).group(1)
    # kxdpgun itself needs XDP on the client end: a short run with no server says whether the
    # kernel allows it at all (no replies expected)
    r = sh(*kxdpgun(net, mac, qfile, 1000, 1), check=False, timeout=60)
    if r.returncode != 0 or "total queries" not in r.stdout:
        print("SKIP: kxdpgun cannot send over XDP here: %s" % (r.stdout + r.stderr)[-800:])
        return SKIP
    raw = {n: [] for n in args.servers}
    for i in range(args.rounds):
        k = i % len(args.servers)
        for name in args.servers[k:] + args.servers[:k]:
            log("round %d/%d %s" % (i + 1, args.rounds, name))
            try:
                rec = one_round(args, net, mac, qfile, zonefile, name)
            except RuntimeError as e:
                log("  %s: %s" % (name, e))
                raw[name].append({"server": name, "error": str(e)[-4000:]})
                continue
            raw[name].append(rec)
            n, o = rec["normal"], rec["overload"]
            log("  @%d: %.3f µs/q (NAPI %.3f s of %.3f s), answered %.2f%%; flood: sent %d/s, "
                "replies %d/s (NAPI %.2f s); @%d: p50 %s µs, p99 %s µs" % (
                    args.rate, n["cpu_us_per_q"] or 0, n["napi_cpu_s"],
                    n["server_cpu_s"] + n["napi_cpu_s"], n["answered_pct"], o["sent_pps"],
                    o["replies_pps"], o["napi_cpu_s"], LIGHT_RATE, rec["light"]["p50_us"],
                    rec["light"]["p99_us"]))
    summ = summarize(raw)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "kernel": os.uname().release,
            "cpus": os.cpu_count(), "args": vars(args), "veth": [net.srv_if, net.cli_if],
            "versions": {n: CLASSES[n](args, "", "/tmp").version() for n in args.servers},
            "kxdpgun": _first_line(["kxdpgun", "-V"])}
    os.makedirs(RESULTS, exist_ok=True)
    jpath = os.path.join(RESULTS, "xdp-%s.json" % stamp)
    with open(jpath, "w") as f:
        json.dump({"meta": meta, "raw": raw, "summary": summ}, f, indent=1)
    print("## AF_XDP flood on a veth pair — %s\n" % meta["date"])
    print("Medians of %d interleaved rounds; server on CPU %s (+ its veth NAPI kthread), "
          "kxdpgun on CPU %s; %d s per phase; flood offered %d q/s, normal rate %d q/s.\n" % (
              args.rounds, SERVER_CPU, CLIENT_CPU, args.secs, args.flood, args.rate))
    print(table(summ) + "\n\n" + ratios(summ))
    for name, recs in raw.items():
        for r in recs:
            if "error" in r:
                print("\n%s failed: %s" % (name, r["error"][-1500:]))
                break
    print("\nraw: %s" % os.path.relpath(jpath, ROOT))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--servers", default=",".join(ALL))
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds, medians taken")
    ap.add_argument("--secs", type=int, default=10, help="seconds per phase")
    ap.add_argument("--rate", type=int, default=50000, help="normal offered load, queries/s")
    ap.add_argument("--flood", type=int, default=600000, help="overload offered, queries/s")
    ap.add_argument("--perf", action="store_true",
                    help="profile CPU 0 during each flood (perf record) and print the top symbols")
    ap.add_argument("--load-timeout", type=float, default=120, help="seconds to wait for a zone")
    ap.add_argument("--ternd", default=os.path.join(ROOT, "build-bench", "ternd"))
    ap.add_argument("--bpf", default=os.path.join(ROOT, "build-bench", "src", "net",
                                                  "tern_xdp.bpf.o"))
    ap.add_argument("--build", action=argparse.BooleanOptionalAction, default=True,
                    help="(re)build ternd and its XDP program in build-bench first")
    args = ap.parse_args()
    args.servers = [s for s in args.servers.split(",") if s]
    for s in args.servers:
        if s not in CLASSES:
            sys.exit("unknown server %s (known: %s)" % (s, ", ".join(ALL)))
    for tool in ("kxdpgun", "dig", "taskset"):
        if not shutil.which(tool):
            print("SKIP: %s not installed (knot-dnsutils, bind9-dnsutils, util-linux)" % tool)
            return SKIP
    if args.build and any(s.startswith("tern") for s in args.servers):
        bd = os.path.join(ROOT, "build-bench")
        if not build_ternd(bd) or sh("cmake", "--build", bd, "--target", "tern_xdp_bpf",
                                     check=False, timeout=600).returncode:
            sys.exit("ternd or tern_xdp.bpf.o did not build in %s" % bd)
    exe = {"tern-xdp": args.ternd, "tern": args.ternd, "tern-bp": args.ternd, "knot-xdp": "knotd",
           "knot": "knotd", "gdnsd": "gdnsd", "gdnsd-defer": "gdnsd",
           "reflector": "cc"}
    for s in list(args.servers):
        if not shutil.which(exe[s]):
            log("%s not installed (%s): skipped" % (s, exe[s]))
            args.servers.remove(s)
    os.makedirs(os.path.join(CACHE, "run"), exist_ok=True)
    if "reflector" in args.servers:
        ensure_reflector()
    zd, _ = ensure_zone("100k")
    zonefile, qfile = os.path.join(zd, ORIGIN + "zone"), os.path.join(zd, "queries.txt")
    # SIGTERM unwinds like an error, so the servers stop and the namespaces go
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return netns_main(lambda net: bench(args, net, zonefile, qfile))


if __name__ == "__main__":
    sys.exit(main())
