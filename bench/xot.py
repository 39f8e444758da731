#!/usr/bin/python3
"""XFR over TLS (RFC 9103) into tern: what TLS costs a secondary taking a 1M-name zone.

    /usr/bin/python3 bench/xot.py --ternd build-rel/ternd [--runs 3]

BIND 9.18 (named, on CPU 1) serves the 1M-name bench zone (gen_zone.py --names 1000000, 1.33M
records) on a clear TCP port and on a TLS port (a CA and certificate made here; allow-transfer
for both). ternd (release build, CPU 0) starts as its secondary, once over clear TCP and once over
TLS (strict, name + CA), --runs rounds interleaved: from exec to serving the zone's SOA (the
transfer and the loader's publish; ternd's start without a zone is the same in both), and
ternd's CPU time (user + system, /proc) at that point. Medians, and the TLS/clear ratios.

Raw data in bench/results/xot-<date>.json. Only processes started here are stopped.
"""

import argparse
import datetime
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
import run  # noqa: E402
from xfr import TernX  # noqa: E402

ORIGIN = run.ORIGIN.rstrip(".")


def cpu_s(pid):
    """User + system CPU seconds of process pid (all its threads)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / run.CLK_TCK


def make_pki(d):
    ossl = shutil.which("openssl")

    def sh(*a):
        subprocess.run(a, check=True, capture_output=True, timeout=60)
    sh(ossl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem", "-days", "2", "-subj", "/CN=bench CA")
    sh(ossl, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
       f"{d}/srv.key", "-out", f"{d}/srv.csr", "-subj", "/CN=primary.example")
    with open(f"{d}/srv.ext", "w") as f:
        f.write("subjectAltName=DNS:primary.example\n")
    sh(ossl, "x509", "-req", "-in", f"{d}/srv.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key",
       "-CAcreateserial", "-out", f"{d}/srv.pem", "-days", "2", "-extfile", f"{d}/srv.ext")


class Named(run.Server):
    name = "named"

    def __init__(self, args, zonefile, workdir):
        super().__init__(args, zonefile, workdir)
        self.tls_port = run.free_port()

    def argv(self):
        d = self.dir
        with open(os.path.join(d, "named.conf"), "w") as f:
            f.write(f"""tls srv {{ key-file "{d}/srv.key"; cert-file "{d}/srv.pem"; }};
options {{
    directory "{d}";
    pid-file "{d}/named.pid";
    listen-on port {self.port} {{ 127.0.0.1; }};
    listen-on port {self.tls_port} tls srv {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
    notify no;
    allow-transfer {{ 127.0.0.1; }};
    session-keyfile "{d}/session.key";
    managed-keys-directory "{d}";
}};
controls {{ }};
zone "{ORIGIN}" {{ type primary; file "{self.zonefile}"; }};
""")
        return [shutil.which("named", path="/usr/sbin:/usr/bin"), "-g", "-n", "1", "-c",
                os.path.join(d, "named.conf")]


def pull(args, primary):
    """ternd as secondary of primary: (seconds exec to serving, its CPU seconds then)."""
    d = tempfile.mkdtemp(prefix="xot-s-", dir=os.path.join(run.CACHE, "run"))
    extra = "xfr_timeout_ms: 60000\nzones:\n  - origin: %s\n    primary: %s\n" % (ORIGIN, primary)
    r = run.Running(TernX(args, None, d, extra))
    try:
        deadline = r.t0 + 600
        while time.monotonic() < deadline:
            if r.proc.poll() is not None:
                raise RuntimeError("ternd exited:\n" + r.log_tail())
            a = run.udp_query(r.srv.port, ORIGIN + ".", 6, timeout=0.05)
            if a is not None and a[0] == 0 and a[2] >= 1:
                return time.monotonic() - r.t0, cpu_s(r.proc.pid)
            time.sleep(0.005)
        raise RuntimeError("ternd did not serve the zone:\n" + r.log_tail())
    finally:
        r.stop()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    args.ternd = os.path.abspath(args.ternd)
    os.makedirs(os.path.join(run.CACHE, "run"), exist_ok=True)
    zd = os.path.join(run.CACHE, "z1m")
    if not os.path.exists(os.path.join(zd, "manifest.json")):
        subprocess.run([sys.executable, os.path.join(BENCH, "gen_zone.py"), "--names", "1000000",
                        "--out", zd], check=True)
    zf = os.path.join(zd, "bench.test.zone")
    nd = tempfile.mkdtemp(prefix="xot-n-", dir=os.path.join(run.CACHE, "run"))
    make_pki(nd)
    named = Named(args, zf, nd)
    nr = run.Running(named)
    subprocess.run(["taskset", "-a", "-p", "-c", run.CLIENT_CPU, str(nr.proc.pid)],
                   capture_output=True)
    res = {"clear": [], "tls": []}
    try:
        deadline = nr.t0 + 600
        while run.udp_query(named.port, ORIGIN + ".", 6, timeout=0.1) is None:
            if time.monotonic() > deadline or nr.proc.poll() is not None:
                raise RuntimeError("named did not load the zone:\n" + nr.log_tail())
            time.sleep(0.1)
        run.log("named serving the 1M zone after %.1f s" % (time.monotonic() - nr.t0))
        modes = {
            "clear": '"127.0.0.1@%d"' % named.port,
            "tls": '{address: "127.0.0.1@%d", tls: {name: primary.example, ca: "%s/ca.pem"}}' % (
                named.tls_port, nd),
        }
        for i in range(args.runs):
            for mode in ("clear", "tls") if i % 2 == 0 else ("tls", "clear"):
                s, c = pull(args, modes[mode])
                res[mode].append({"s": round(s, 2), "cpu_s": round(c, 2)})
                run.log("run %d %-5s: %.2f s to serving, ternd CPU %.2f s" % (i + 1, mode, s, c))
    finally:
        nr.stop()
        shutil.rmtree(nd, ignore_errors=True)
    summ = {m: {"s": statistics.median(r["s"] for r in res[m]),
                "cpu_s": statistics.median(r["cpu_s"] for r in res[m])} for m in res}
    summ["ratio_s"] = round(summ["tls"]["s"] / summ["clear"]["s"], 3)
    summ["ratio_cpu"] = round(summ["tls"]["cpu_s"] / summ["clear"]["cpu_s"], 3)
    run.log("medians of %d: clear %.2f s, CPU %.2f s; TLS %.2f s, CPU %.2f s; TLS/clear: time "
            "x%.3f, CPU x%.3f" % (args.runs, summ["clear"]["s"], summ["clear"]["cpu_s"],
                                  summ["tls"]["s"], summ["tls"]["cpu_s"], summ["ratio_s"],
                                  summ["ratio_cpu"]))
    os.makedirs(run.RESULTS, exist_ok=True)
    out = os.path.join(run.RESULTS, "xot-%s.json" % datetime.date.today().isoformat())
    with open(out, "w") as f:
        json.dump({"runs": res, "median": summ}, f, indent=1)
    run.log("raw data in %s" % out)


if __name__ == "__main__":
    main()
