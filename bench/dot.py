#!/usr/bin/python3
"""DNS over TLS: the server's CPU per query on a resumed session and per full handshake, tern
against BIND 9.18's DoT listener on the same zone, in one interleaved run.

    /usr/bin/python3 bench/dot.py --ternd build-rel/ternd [--rounds 3]

Both servers run at once, each with one worker (ternd workers: 1; named -n 1) pinned to CPU 0,
with the same ECDSA P-256 certificate (made here) and the same small zone. The client is this
script (Python ssl, TLS 1.3, ALPN "dot") pinned to CPU 1. Each round measures, in a rotated
order of the two servers, the server process's utime+stime (/proc/PID/stat, every thread) over:

  handshake   --conns new connections without a session: full handshake, one query, close
  resumed     --conns new connections resuming a session: resumed handshake, one query, close
  query       --queries queries one after another on one connection that resumed a session

and divides by the count: microseconds of server CPU per handshake (with its one query) and
per query. Printed: each figure's median over the rounds for each server and the median of the
per-round ratios tern/BIND. Raw data in bench/results/dot-<date>.json. Only the processes
started here are stopped.
"""

import argparse
import datetime
import json
import os
import shutil
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "integration"))
import servers  # noqa: E402  (free_port, make_tls_certs, read_exact, stop_process)

HOST = "dns.test"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    """utime+stime of every thread of pid, seconds."""
    with open("/proc/%d/stat" % pid) as f:
        st = f.read()
    fields = st[st.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def zone_text():
    lines = ["$ORIGIN d.test.", "$TTL 300", "@ SOA ns1 hostmaster 1 3600 600 86400 300",
             "@ NS ns1", "ns1 A 192.0.2.53"]
    lines += ["www%d A 192.0.2.%d" % (i, i % 250 + 1) for i in range(100)]
    return "\n".join(lines) + "\n"


QUERY = None


def query_wire(i):
    global QUERY
    if QUERY is None:
        import dns.message
        QUERY = [dns.message.make_query("www%d.d.test" % k, "A").to_wire() for k in range(100)]
    w = QUERY[i % 100]
    return struct.pack("!H", len(w)) + w


def ask(t, i):
    t.sendall(query_wire(i))
    n = struct.unpack("!H", servers.read_exact(t, 2))[0]
    servers.read_exact(t, n)


class Target:
    def __init__(self, name, port, proc, ctx):
        self.name, self.port, self.proc, self.ctx = name, port, proc, ctx
        self.session = None

    def connect(self, session=None):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        return self.ctx.wrap_socket(s, server_hostname=HOST, session=session)

    def warm(self):
        t = self.connect()
        ask(t, 0)
        self.session = t.session
        t.close()

    def measure(self, kind, conns, queries):
        c0 = cpu_s(self.proc.pid)
        t0 = time.monotonic()
        reused = 0
        if kind in ("handshake", "resumed"):
            for i in range(conns):
                t = self.connect(self.session if kind == "resumed" else None)
                ask(t, i)
                reused += t.session_reused
                if kind == "resumed":
                    self.session = t.session
                t.close()
            n = conns
        else:
            t = self.connect(self.session)
            reused = t.session_reused
            for i in range(queries):
                ask(t, i)
            self.session = t.session
            t.close()
            n = queries
        wall = time.monotonic() - t0
        cpu = cpu_s(self.proc.pid) - c0
        if kind == "resumed" and reused < conns * 0.9:
            raise RuntimeError("%s: only %d of %d resumed" % (self.name, reused, conns))
        return {"us_per": cpu / n * 1e6, "n": n, "wall_s": wall, "cpu_s": cpu,
                "reused": int(reused)}


def wait_dot(port, ctx, proc, what):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit("%s exited (%s)" % (what, proc.returncode))
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
            t = ctx.wrap_socket(s, server_hostname=HOST)
            ask(t, 0)
            t.close()
            return
        except (OSError, ssl.SSLError, servers.Failure):
            time.sleep(0.2)
    sys.exit("%s does not answer DoT on %d" % (what, port))


def start_tern(args, d, cert, key):
    udp, dot = servers.free_port(), servers.free_port()
    conf = os.path.join(d, "ternd.yaml")
    with open(conf, "w") as f:
        f.write(f"""listen: ["127.0.0.1:{udp}"]
workers: 1
allow_root: true
log_level: warning
zones: [{{origin: d.test, file: {d}/d.zone}}]
tls:
  listen: ["127.0.0.1:{dot}"]
  certificate: {cert}
  key: {key}
  max_handshakes_per_client: 64
""")
    out = open(os.path.join(d, "ternd.log"), "wb")
    p = subprocess.Popen(["taskset", "-c", "0", args.ternd, "-c", conf], stdout=out,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return p, dot


def start_named(d, cert, key):
    udp, dot = servers.free_port(), servers.free_port()
    nd = os.path.join(d, "named")
    os.makedirs(nd)
    shutil.copy(os.path.join(d, "d.zone"), nd)
    conf = os.path.join(nd, "named.conf")
    with open(conf, "w") as f:
        f.write(f"""tls local-tls {{ cert-file "{cert}"; key-file "{key}"; }};
options {{
    directory "{nd}";
    pid-file "{nd}/named.pid";
    listen-on port {udp} {{ 127.0.0.1; }};
    listen-on port {dot} tls local-tls {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
    dnssec-validation no;
    notify no;
    session-keyfile "{nd}/session.key";
    managed-keys-directory "{nd}";
    querylog no;
}};
controls {{ }};
zone "d.test" {{ type primary; file "{nd}/d.zone"; }};
""")
    out = open(os.path.join(nd, "named.log"), "wb")
    p = subprocess.Popen(["taskset", "-c", "0", servers.find_program("named"), "-g", "-c",
                          conf, "-n", "1"], stdout=out, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    return p, dot


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conns", type=int, default=600)
    ap.add_argument("--queries", type=int, default=10000)
    a = ap.parse_args()
    os.sched_setaffinity(0, {1})
    d = tempfile.mkdtemp(prefix="tern_dot_bench_")
    ca, _, cert, key = servers.make_tls_certs(d, HOST)
    with open(os.path.join(d, "d.zone"), "w") as f:
        f.write(zone_text())
    ctx = ssl.create_default_context(cafile=ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_alpn_protocols(["dot"])
    procs = []
    res = {"tern": [], "bind": []}
    try:
        tp, tport = start_tern(a, d, cert, key)
        procs.append(tp)
        bp, bport = start_named(d, cert, key)
        procs.append(bp)
        wait_dot(tport, ctx, tp, "ternd")
        wait_dot(bport, ctx, bp, "named")
        targets = [Target("tern", tport, tp, ctx), Target("bind", bport, bp, ctx)]
        for t in targets:
            t.warm()
        for r in range(a.rounds):
            order = targets[r % 2:] + targets[:r % 2]
            for t in order:
                one = {k: t.measure(k, a.conns, a.queries)
                       for k in ("handshake", "resumed", "query")}
                res[t.name].append(one)
                print("round %d %-4s handshake %6.1f us  resumed %6.1f us  query %5.1f us"
                      % (r + 1, t.name, one["handshake"]["us_per"], one["resumed"]["us_per"],
                         one["query"]["us_per"]), flush=True)
    finally:
        for p in procs:
            servers.stop_process(p)
    print("\nserver CPU, median of %d rounds (us)   tern     BIND   tern/BIND (median of "
          "per-round ratios)" % a.rounds)
    summary = {}
    for k, what in (("handshake", "per full handshake + 1 query"),
                    ("resumed", "per resumed handshake + 1 query"),
                    ("query", "per query, resumed session")):
        tv = [x[k]["us_per"] for x in res["tern"]]
        bv = [x[k]["us_per"] for x in res["bind"]]
        ratio = statistics.median(t / b for t, b in zip(tv, bv) if b > 0)
        summary[k] = {"tern_us": statistics.median(tv), "bind_us": statistics.median(bv),
                      "ratio": ratio}
        print("%-34s %8.1f %8.1f   %.2f" % (what, statistics.median(tv),
                                            statistics.median(bv), ratio))
    os.makedirs(os.path.join(BENCH, "results"), exist_ok=True)
    out = os.path.join(BENCH, "results", "dot-%s.json"
                       % datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    with open(out, "w") as f:
        json.dump({"args": vars(a), "rounds": res, "summary": summary}, f, indent=1)
    print("raw: %s" % out)
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
