#!/usr/bin/python3
"""What online DNSSEC signing costs: tern signed and unsigned, beside Knot with mod-onlinesign.

    /usr/bin/python3 bench/dnssec.py                      # 3 interleaved runs of 10 s
    /usr/bin/python3 bench/dnssec.py --runs 1 --secs 3    # a quick look
    /usr/bin/python3 bench/dnssec.py --parts steered --configs tern-steered-signed

Every server runs one UDP worker pinned to CPU 0 (taskset); dnsperf (-c 4 -q 200) runs on CPU 1.
The keys are made once per invocation by `ternctl dnssec keygen bench.test. -a 13` (a KSK and a
ZSK, BIND files); Knot imports the same two files (`keymgr import-bind`). Three parts, each run
once per --runs round (configs in a rotated order, each server started fresh):

cost     the 100k-name bench zone (bench/gen_zone.py) at --rate q/s (default 50,000). The
         server's CPU (utime+stime of its process tree, /proc/PID/stat) per answered query for
           tern-unsigned     the zone unsigned, DO=1 queries (dnsperf -D)
           tern-signed-do0   the zone signed by ternd, DO=0 queries (no EDNS, as dnsperf sends
                             without -D): the price of being signed for clients that do not ask
           tern-signed       the same signed zone, DO=1
           tern-signed-2alg  the zone mid algorithm rollover (a key policy, 13 -> 15, its new
                             KSK's DS awaited): every RRset signed by an ECDSA and an Ed25519
                             ZSK, so a per-query signature is two (the state is made once per
                             invocation, see two_alg_state(), and copied into each run)
           knot-unsigned     Knot (bench/run.py's config), DO=1
           knot-onlinesign   Knot with mod-onlinesign and the same keys, DO=1
         on two query files: "all" = queries.txt, and "nonx" = queries.txt without its 5%
         NXDOMAIN lines (the random "nx-..." names): signed, those are answered NOERROR with a
         compact-denial (tern) or "black lies" (Knot) NSEC made per query. Wildcard answers and
         NODATA proofs are also signed per query by both (tern keeps each in its worker's
         signature cache, keyed by content; Knot signs every answer). Each config first gets a
         --warm seconds pass (not measured) on queries.txt, so tern's cache is in its steady
         state, and tern's /metrics give the cache hits, misses and signatures of each measured
         window. --cost-files all,nonx,nxflood adds nxflood.txt (random names, every one new).
         Before the load (first round): dig +dnssec checks (A, NXDOMAIN, NODATA, wildcard,
         CNAME chain, MX, referral, DNSKEY): every answer and authority RRset of a signed DO=1
         answer must carry its RRSIG (NS at a cut excepted), NXDOMAIN and NODATA an NSEC, and
         an unsigned or DO=0 answer no DNSSEC record; never TC. --dnssec-cache N sets ternd's
         per-worker cache size (default: ternd's, 16384).
steered  a redins JSON zone (written here) of 250 labels with 4 A records each, filter
         {"count": "single", "order": "rr", "geo_filter": "none"}: one record picked at random
         per query, so 1,000 distinct one-record subsets, each signed per query on a miss.
         Queries: the 250 names, A, DO=1. tern-steered-unsigned and tern-steered-signed, each
         after a --steer-warm seconds pass (default 3) that fills the worker's signature cache;
         then tern_dnssec_cache_total{result=hit|miss} and tern_dnssec_signatures_total from
         /metrics over the measured window. The project's target: signed/unsigned <= 1.3.
sign     bench/dnssec_sign.c (built here against build-bench's static libraries) pinned to CPU
         0: µs per signature of a 2-record A RRset for algorithms 13, 15, 8 (RSA 2048), a miss
         and a hit through a worker's signature cache; medians of 5 batches.

Medians over the runs, raw data in bench/results/dnssec-<date>.json, a summary in
bench/results/latest-dnssec.md. As root, ternd is told allow_root. Only processes started here
are stopped (their own process groups); all traffic stays on loopback.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True
import run  # noqa: E402  (zone, dnsperf argv and parsing, CPU accounting, server lifecycle)

ORIGIN = run.ORIGIN  # bench.test.: the cost zone and the steered zone alike (run.Running's probe)
STEER_LABELS = 250
STEER_RECORDS = 4
SIGN_N = 2000  # dnssec_sign's batch size (RSA: a tenth)


def log(*a):
    print("[%s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


# ---- servers ----------------------------------------------------------------------------------

class Tern(run.Tern):
    """ternd from a ternd.yaml: one worker, the zone (RFC 1035 or redins JSON by its name),
    optionally signed with the key stems, and the metrics endpoint on a port of its own."""

    def __init__(self, args, zonefile, workdir, keys=None):
        super().__init__(args, zonefile, workdir)
        self.keys = keys
        self.metrics_port = run.free_port()
        while self.metrics_port == self.port:
            self.metrics_port = run.free_port()

    def argv(self):
        conf = os.path.join(self.dir, "ternd.yaml")
        with open(conf, "w") as f:
            f.write('listen: ["127.0.0.1:%d"]\nworkers: 1\nmetrics_listen: "127.0.0.1:%d"\n'
                    % (self.port, self.metrics_port))
            if os.geteuid() == 0:
                f.write("allow_root: true\n")
            if self.args.dnssec_cache:
                f.write("dnssec_cache: %d\n" % self.args.dnssec_cache)
            f.write('zones:\n  - origin: "%s"\n    file: "%s"\n' % (ORIGIN, self.zonefile))
            if isinstance(self.keys, str):  # a key state to resume (two_alg_state())
                state = os.path.join(self.dir, "state")
                shutil.copytree(self.keys, state)
                f.write("    dnssec: {policy: bench}\n" + TWO_ALG_POLICY % (15, state))
            elif self.keys:
                f.write("    dnssec:\n      keys: [%s]\n"
                        % ", ".join('"%s"' % k for k in self.keys))
        return [self.args.ternd, "-c", conf]


# Short waits, so two_alg_state() reaches the rollover's middle in seconds; no parents: the new
# KSK's DS is never seen, so the zone stays signed with both algorithms.
TWO_ALG_POLICY = """dnssec_policies:
  - {name: bench, algorithm: %d, zsk_lifetime: 0, propagation_delay: 2, dnskey_ttl: 5,
     parent_ds_ttl: 5, zone_max_ttl: 5}
dnssec_state_dir: "%s"
"""


def two_alg_state(args, zonefile, work):
    """A key state directory where the zone is in the middle of an algorithm rollover: a ternd
    signs it under a policy of algorithm 13, its KSK's DS is said seen (ternctl ds-seen), then
    the policy says 15 and is reloaded; once the new keys are published and the new KSK's DS is
    wanted, both algorithms sign every RRset until that DS is seen, which it never is here."""
    d = os.path.join(work, "two-alg")
    state = os.path.join(d, "state")
    os.makedirs(d)
    conf, sock = os.path.join(d, "ternd.yaml"), os.path.join(d, "ctl.sock")
    port = run.free_port()

    def write(alg):
        with open(conf, "w") as f:
            f.write('listen: ["127.0.0.1:%d"]\nworkers: 1\ncontrol_socket: "%s"\n' % (port, sock))
            if os.geteuid() == 0:
                f.write("allow_root: true\n")
            f.write('zones:\n  - origin: "%s"\n    file: "%s"\n    dnssec: {policy: bench}\n'
                    % (ORIGIN, zonefile) + TWO_ALG_POLICY % (alg, state))

    def ctl(*a):
        return subprocess.run([args.ternctl, "-s", sock] + list(a), capture_output=True,
                              text=True, timeout=120)

    def wait(pattern, what, secs=180):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            out = ctl("dnssec", "status", ORIGIN).stdout
            if re.search(pattern, out, re.M):
                return
            time.sleep(0.5)
        raise RuntimeError("two_alg_state: %s never came:\n%s" % (what, out))
    write(13)
    logf = open(os.path.join(d, "server.log"), "w")
    proc = subprocess.Popen([args.ternd, "-c", conf], stdout=logf, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        wait(r"^ds_wanted", "the first KSK's DS wanted")
        if ctl("dnssec", "ds-seen", ORIGIN).returncode != 0:
            raise RuntimeError("two_alg_state: ds-seen refused")
        wait(r"^KSK \d+ alg 13 active", "the first KSK active")
        write(15)
        if ctl("reload").returncode != 0:
            raise RuntimeError("two_alg_state: the reload failed")
        wait(r"^KSK \d+ alg 15 ready", "the new KSK ready")
        wait(r"^ds_wanted", "the new KSK's DS wanted")
    finally:
        proc.terminate()
        proc.wait(60)
        logf.close()
    return state


KNOT_SIGNING = """# the imported keys as they are: no generation, no rollover, NSEC
policy:
  - id: bindkeys
    algorithm: ecdsap256sha256
    manual: on
    nsec3: off
mod-onlinesign:
  - id: tern
    policy: bindkeys
"""


class Knot(run.Knot):
    """run.py's Knot; with keys, mod-onlinesign on the zone with those keys imported."""

    def __init__(self, args, zonefile, workdir, keys=None):
        super().__init__(args, zonefile, workdir)
        self.keys = keys

    def argv(self):
        argv = super().argv()
        if not self.keys:
            return argv
        conf = argv[-1]
        with open(conf) as f:
            text = f.read()
        if "template:\n" not in text or not text.endswith('"\n'):
            raise RuntimeError("run.Knot's config changed shape: cannot add mod-onlinesign")
        text = text.replace("template:\n", KNOT_SIGNING + "template:\n", 1)
        text += "    module: mod-onlinesign/tern\n"  # the zone entry is the config's last
        with open(conf, "w") as f:
            f.write(text)
        os.makedirs(os.path.join(self.dir, "db"), exist_ok=True)
        for stem in self.keys:
            r = subprocess.run(["keymgr", "-c", conf, ORIGIN, "import-bind", stem],
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                raise RuntimeError("keymgr import-bind %s: %s%s" % (stem, r.stdout, r.stderr))
        return argv


# name: (server, zone kind, signed, DO bit)
COST = {
    "tern-unsigned": ("tern", "cost", False, True),
    "tern-signed-do0": ("tern", "cost", True, False),
    "tern-signed": ("tern", "cost", True, True),
    "tern-signed-2alg": ("tern", "cost", True, True),
    "knot-unsigned": ("knot", "cost", False, True),
    "knot-onlinesign": ("knot", "cost", True, True),
}
STEERED = {
    "tern-steered-unsigned": ("tern", "steer", False, True),
    "tern-steered-signed": ("tern", "steer", True, True),
}
RATIOS = [  # (signed, unsigned) pairs reported
    ("tern-signed", "tern-unsigned"), ("tern-signed-do0", "tern-unsigned"),
    ("tern-signed-2alg", "tern-signed"),
    ("knot-onlinesign", "knot-unsigned"), ("tern-signed", "knot-onlinesign"),
    ("tern-unsigned", "knot-unsigned"), ("tern-steered-signed", "tern-steered-unsigned"),
]


def start(args, name, zonefile):
    server, _, signed, _ = {**COST, **STEERED}[name]
    wd = tempfile.mkdtemp(prefix="tern-dnssec-%s-" % name, dir=os.path.join(run.CACHE, "run"))
    cls = {"tern": Tern, "knot": Knot}[server]
    keys = args.two_alg if name == "tern-signed-2alg" else args.keys
    srv = cls(args, os.path.abspath(zonefile), wd, keys if signed else None)
    try:
        r = run.Running(srv)
    except Exception:
        shutil.rmtree(wd, ignore_errors=True)
        raise
    if not r.wait_ready(args.load_timeout):
        tail = r.log_tail()
        r.stop()
        shutil.rmtree(wd, ignore_errors=True)
        raise RuntimeError("%s did not come up on port %d:\n%s" % (name, srv.port, tail))
    return r


def stop(r):
    r.stop()
    shutil.rmtree(r.srv.dir, ignore_errors=True)


# ---- /metrics ---------------------------------------------------------------------------------

def metrics(r):
    """ternd's DNSSEC counters, or {} for other servers (or when the endpoint does not answer)."""
    port = getattr(r.srv, "metrics_port", None)
    if not port:
        return {}
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as f:
            text = f.read().decode()
    except OSError as e:
        log("  metrics: %s" % e)
        return {}
    out = {}
    for key, pat in (("hits", r'^tern_dnssec_cache_total\{result="hit"\} (\S+)'),
                     ("misses", r'^tern_dnssec_cache_total\{result="miss"\} (\S+)'),
                     ("signatures", r"^tern_dnssec_signatures_total (\S+)"),
                     ("sign_s", r"^tern_dnssec_sign_seconds_total (\S+)"),
                     ("sign_failures", r"^tern_dnssec_sign_failures_total (\S+)")):
        m = re.search(pat, text, re.M)
        if m:
            out[key] = float(m.group(1))
    return out


def delta(a, b):
    d = {k: b[k] - a.get(k, 0) for k in b}
    n = d.get("hits", 0) + d.get("misses", 0)
    if n:
        d["hit_pct"] = round(100.0 * d["hits"] / n, 3)
    return d


# ---- dig checks -------------------------------------------------------------------------------

def dig(port, name, qtype, do):
    """One answer as dig prints it: status, flags, size, and per section (owner, type, covered,
    rdata) of every record (covered: the type an RRSIG covers)."""
    argv = ["dig", "@127.0.0.1", "-p", str(port), "+norec", "+time=2", "+tries=1", "+noall",
            "+comments", "+answer", "+authority", "+additional", "+stats", name, qtype]
    argv += ["+dnssec", "+bufsize=4096"] if do else ["+noedns"]
    d = run.dig_parse(subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout)
    d["sections"] = {k: [(p[0].lower(), p[3], p[4] if p[3] == "RRSIG" else None, " ".join(p[4:]))
                         for p in v if len(p) >= 5] for k, v in d["sections"].items()}
    return d


def check_one(r, name, qtype, status, signed, do, want_an=(), denial=False):
    """The answer to name/qtype, and '' or what is wrong with it. status NXDOMAIN: a signed DO=1
    answer may be NOERROR (compact denial, black lies). denial: a signed DO=1 answer must have an
    NSEC in its authority section."""
    a = dig(r.srv.port, name, qtype, do)
    secure = signed and do
    probs = []
    ok = {status} | ({"NOERROR"} if secure and status == "NXDOMAIN" else set())
    if a["status"] not in ok:
        probs.append("status %s, want %s" % (a["status"], "/".join(sorted(ok))))
    if "tc" in a["flags"]:
        probs.append("TC set")
    types = [x[1] for x in a["sections"]["ANSWER"]]
    for t in want_an:
        if t not in types:
            probs.append("no %s in the answer" % t)
    referral = "aa" not in a["flags"]
    for sec in ("ANSWER", "AUTHORITY"):
        rrs = a["sections"][sec]
        sets = {(x[0], x[1]) for x in rrs if x[1] != "RRSIG"}
        sigs = {(x[0], x[2]) for x in rrs if x[1] == "RRSIG"}
        if secure:
            if sec == "AUTHORITY" and referral:
                sets = {(o, t) for o, t in sets if t != "NS"}  # NS at a cut is not signed
            missing = sets - sigs
            if missing:
                probs.append("%s: no RRSIG for %s" % (sec, sorted(missing)))
            if denial and sec == "AUTHORITY" and not any(x[1] == "NSEC" for x in rrs):
                probs.append("no NSEC in the authority section")
        elif sigs or any(x[1] in ("NSEC", "NSEC3") for x in rrs):
            probs.append("%s: DNSSEC records in an answer that should have none" % sec)
    return a, "; ".join(probs)


def checks(r, manifest, signed, do):
    """dig the sample names of the zone (bench/gen_zone.py's manifest): sizes and failures."""
    s = manifest["samples"]
    cases = [("a", s["a"], "A", "NOERROR", ["A"], False),
             ("nx", s["nx"], "A", "NXDOMAIN", [], True),
             ("nodata", s["a"], "TXT", "NOERROR", [], True),
             ("wild", s["wild"], "A", "NOERROR", ["A"], False),
             ("cname", s["cname"], "A", "NOERROR", ["CNAME", "A"], False),
             ("mx", s["mx"], "MX", "NOERROR", ["MX"], False),
             ("referral", s["deleg_glue"], "A", "NOERROR", [], False),
             ("dnskey", ORIGIN, "DNSKEY", "NOERROR", ["DNSKEY"] if signed else [], False)]
    sizes, fails = {}, []
    for label, name, qt, status, an, denial in cases:
        a, prob = check_one(r, name, qt, status, signed, do, an, denial)
        sizes[label] = a["size"]
        if prob:
            fails.append("%s %s %s: %s (%s)" % (label, name, qt, prob, json.dumps(a)))
    return sizes, fails


def steer_check(r, signed):
    """s000 A, DO=1, 40 times: one A record each time (+ its RRSIG when signed), and more than
    one record picked over the 40."""
    picks, fails, size = set(), [], None
    name = "s000." + ORIGIN
    for _ in range(40):
        a, prob = check_one(r, name, "A", "NOERROR", signed, True, ["A"])
        size = a["size"]
        addrs = [x[3] for x in a["sections"]["ANSWER"] if x[1] == "A"]
        if not prob and len(addrs) != 1:
            prob = "%d A records, want 1" % len(addrs)
        if prob:
            fails.append("%s A: %s (%s)" % (name, prob, json.dumps(a)))
            break
        picks.update(addrs)
    if not fails and len(picks) < 2:
        fails.append("%s A: the same record in 40 answers (%s): not steered" % (name, picks))
    return size, sorted(picks), fails


# ---- load -------------------------------------------------------------------------------------

def dnsperf(port, qfile, secs, rate, do):
    argv = run.dnsperf_argv(port, qfile, secs, rate=rate)
    return argv + (["-D"] if do else [])


def sizes(out):
    m = re.search(r"Average packet size:\s+request (\d+), response (\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def load(r, qfile, secs, rate, do):
    """One measured dnsperf window: server CPU per answered query and dnsperf's figures."""
    m0 = metrics(r)
    cpu, drops, wall, outs = run.run_jobs(r, [dnsperf(r.srv.port, qfile, secs, rate, do)], secs)
    m1 = metrics(r)
    p = run.parse_dnsperf(outs[0])
    if p["completed"] is None:
        raise RuntimeError("dnsperf failed:\n" + outs[0][-2000:])
    req, resp = sizes(outs[0])
    n = sum(p["rcodes"].values())
    return {"completed": p["completed"], "sent": p["sent"], "lost": p["lost"], "qps": p["qps"],
            "lat_avg_ms": p["lat_avg_ms"], "req_size": req, "resp_size": resp,
            "rcode_pct": {k: round(100.0 * v / n, 2) for k, v in sorted(p["rcodes"].items())}
            if n else {},
            "rcvbuf_errors": drops, "server_cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
            "cpu_us_per_q": round(cpu * 1e6 / p["completed"], 3) if p["completed"] else None,
            "dnssec": delta(m0, m1) if m1 else {}}


def warm(r, qfile, secs, rate, do):
    if secs <= 0:
        return {}
    m0 = metrics(r)
    run.run_jobs(r, [dnsperf(r.srv.port, qfile, secs, rate, do)], secs)
    return delta(m0, metrics(r)) if m0 else {}


def pss_mib(r):
    return round(run.pss_kb(r.pids()) / 1024.0, 1)


def cost_run(args, name, zd, manifest, qfiles, check):
    server, _, signed, do = COST[name]
    rec = {"config": name, "loadavg": open("/proc/loadavg").read().split()[:3]}
    r = start(args, name, os.path.join(zd, ORIGIN + "zone"))
    try:
        rec["load_s"] = round(r.load_s, 3)
        time.sleep(0.5)
        rec["pss_mib"] = pss_mib(r)
        if check:
            rec["dig_sizes"], rec["check_failures"] = checks(r, manifest, signed, do)
            for f in rec["check_failures"]:
                log("  CHECK FAIL %s: %s" % (name, f))
        rec["warm"] = warm(r, qfiles["all"], args.warm, args.rate, do)
        for label, qf in qfiles.items():
            rec[label] = load(r, qf, args.secs, args.rate, do)
        rec["pss_mib_after"] = pss_mib(r)
    finally:
        stop(r)
    return rec


def steered_run(args, name, zonefile, qfile, check):
    _, _, signed, do = STEERED[name]
    rec = {"config": name, "loadavg": open("/proc/loadavg").read().split()[:3]}
    r = start(args, name, zonefile)
    try:
        rec["load_s"] = round(r.load_s, 3)
        if check:
            rec["dig_size"], rec["picks"], rec["check_failures"] = steer_check(r, signed)
            for f in rec["check_failures"]:
                log("  CHECK FAIL %s: %s" % (name, f))
        rec["warm"] = warm(r, qfile, args.steer_warm, args.rate, do)
        rec["steer"] = load(r, qfile, args.secs, args.rate, do)
        rec["metrics_total"] = metrics(r)
    finally:
        stop(r)
    return rec


def sign_run(args):
    out = subprocess.run(["taskset", "-c", run.SERVER_CPU, args.sign_bin, str(args.sign_n)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError("dnssec_sign failed:\n%s%s" % (out.stdout, out.stderr))
    log("  " + "\n  ".join(out.stdout.splitlines()[:-1]))
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- preparation ------------------------------------------------------------------------------

def build(args, targets):
    bd = os.path.join(run.ROOT, "build-bench")
    if not os.path.exists(os.path.join(bd, "build.ninja")):
        subprocess.run(["cmake", "-S", run.ROOT, "-B", bd, "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True, timeout=300)
    r = subprocess.run(["cmake", "--build", bd, "--target"] + targets, capture_output=True,
                       text=True, timeout=1800)
    if r.returncode != 0:
        sys.exit("build failed:\n" + (r.stdout + r.stderr)[-3000:])
    return bd


def build_sign(bd):
    """bench/.cache/dnssec_sign from dnssec_sign.c and build-bench's static libraries."""
    src, exe = os.path.join(BENCH, "dnssec_sign.c"), os.path.join(run.CACHE, "dnssec_sign")
    libs = [os.path.join(bd, "src", d, "libtern_%s.a" % d)
            for d in ("dnssec", "zone", "wire", "health", "common")]
    pc = subprocess.run(["pkg-config", "--libs", "libcrypto", "ldns", "jansson", "liburcu-qsbr",
                         "jemalloc"], capture_output=True, text=True, check=True).stdout.split()
    subprocess.run(["cc", "-std=c17", "-O2", "-g", "-Wall", "-Wextra", "-Werror",
                    "-I" + os.path.join(run.ROOT, "include"), "-o", exe, src] + libs + pc +
                   ["-ldl", "-lpthread", "-lm"], check=True)
    return exe


def keygen(args, kdir):
    """A KSK and a ZSK (algorithm 13) for bench.test.: the two stems ternctl prints."""
    r = subprocess.run([args.ternctl, "dnssec", "keygen", ORIGIN, "-d", kdir, "-a", "13"],
                       capture_output=True, text=True, timeout=60)
    stems = [l.strip() for l in r.stdout.splitlines() if l.strip()]
    if r.returncode != 0 or len(stems) != 2:
        sys.exit("ternctl dnssec keygen failed:\n%s%s" % (r.stdout, r.stderr))
    return stems


def nonx_file(zd, d):
    """queries.txt without its NXDOMAIN lines: gen_zone.py makes them "nx-<label>.<origin> A",
    and no owner of the zone starts with "nx-" (checked)."""
    out = os.path.join(d, "queries-nonx.txt")
    with open(os.path.join(zd, ORIGIN + "zone")) as f:
        if any(line.startswith("nx-") for line in f):
            sys.exit("the zone has owners named nx-*: cannot tell NXDOMAIN queries by name")
    with open(os.path.join(zd, "queries.txt")) as f:
        lines = f.readlines()
    keep = [l for l in lines if not l.startswith("nx-")]
    with open(out, "w") as f:
        f.writelines(keep)
    return out, len(lines) - len(keep), len(keep)


def steer_zone(d):
    """The steered redins zone (deterministic) and its query file: 250 names × 4 A records,
    one picked at random per query."""
    recs = {"@": {"ns": {"ttl": 3600, "records": [{"host": "ns1." + ORIGIN}]}},
            "ns1": {"a": {"ttl": 3600, "records": [{"ip": "192.0.2.53"}]}}}
    for i in range(STEER_LABELS):
        recs["s%03d" % i] = {"a": {
            "ttl": 60,
            "filter": {"count": "single", "order": "rr", "geo_filter": "none"},
            "records": [{"ip": "10.%d.%d.%d" % (i // 200, i % 200, j + 1)}
                        for j in range(STEER_RECORDS)]}}
    zone = {"config": {"soa": {"ttl": 300, "ns": "ns1." + ORIGIN, "mbox": "hostmaster." + ORIGIN,
                               "refresh": 3600, "retry": 600, "expire": 86400, "minttl": 60,
                               "serial": 2026112501},
                       "domain_id": "bench-steered"},
            "records": recs}
    zf, qf = os.path.join(d, "steer.json"), os.path.join(d, "steer-queries.txt")
    with open(zf, "w") as f:
        json.dump(zone, f, indent=1)
    with open(qf, "w") as f:
        f.writelines("s%03d.%s A\n" % (i, ORIGIN) for i in range(STEER_LABELS))
    return zf, qf


# ---- summary ----------------------------------------------------------------------------------

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def f(v, fmt="%.2f"):
    return "—" if v is None else fmt % v


def rcodes(recs, key):
    tot = {}
    for r in recs:
        for k, v in r.get(key, {}).get("rcode_pct", {}).items():
            tot.setdefault(k, []).append(v)
    return " ".join("%s %.1f%%" % (k, med(v)) for k, v in sorted(tot.items()))


def loadavgs(results):
    xs = [float(r["loadavg"][0]) for k in ("cost", "steered") for rs in results[k].values()
          for r in rs if "loadavg" in r]
    return "%.2f–%.2f" % (min(xs), max(xs)) if xs else "—"


def summarize(results, args, meta):
    lines = ["# DNSSEC — %s, %d run(s) of %d s at %d q/s" % (meta["date"], args.runs, args.secs,
                                                             args.rate), "",
             "Server CPU µs per answered query (utime+stime, one UDP worker on CPU %s, dnsperf "
             "`-c 4 -q 200` on CPU %s), medians of the runs; keys: ECDSA P-256 (algorithm 13), "
             "a KSK and a ZSK from `ternctl dnssec keygen`, the same files imported into Knot. "
             "1-min loadavg at the starts of the runs: %s." % (
                 run.SERVER_CPU, run.CLIENT_CPU, loadavgs(results)), ""]
    summ, saturated = {}, {}
    cost = results["cost"]
    if cost:
        files = [k for k in ("all", "nonx", "nxflood") if k in args.cost_files]
        lines += ["## cost — the 100k zone at %d q/s offered" % args.rate, "",
                  "Query files: %s." % ", ".join(
                      {"all": "`all` = queries.txt", "nonx": "`nonx` = queries.txt without its "
                       "%d NXDOMAIN lines (%d left)" % (meta.get("nonx_removed", 0),
                                                        meta.get("nonx_left", 0)),
                       "nxflood": "`nxflood` = nxflood.txt (random names, 1-5 labels deep)"}[k]
                      for k in files), "",
                  "| config | DO | queries | µs/q | qps | lat avg ms | resp bytes | rcodes | lost "
                  "| tern cache hit % | tern signatures/s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for name in COST:
            rs = cost.get(name)
            if not rs:
                continue
            s = summ[name] = {k: med([r[k]["cpu_us_per_q"] for r in rs]) for k in files}
            for k in files:
                sigs = med([r[k]["dnssec"].get("signatures", 0) / r[k]["wall_s"]
                            for r in rs]) if rs[0][k].get("dnssec") else None
                qps = med([r[k]["qps"] for r in rs])
                if qps is not None and qps < 0.98 * args.rate:
                    share = med([r[k]["server_cpu_s"] / r[k]["wall_s"] for r in rs])
                    saturated.setdefault(name, []).append("%s (%.0f q/s, the server at %.0f%% "
                                                          "of its core)" % (k, qps, 100 * share))
                lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    name, COST[name][3], k, f(s[k]), f(qps, "%.0f"),
                    f(med([r[k]["lat_avg_ms"] for r in rs]), "%.2f"),
                    f(med([r[k]["resp_size"] for r in rs]), "%.0f"), rcodes(rs, k),
                    f(med([r[k]["lost"] for r in rs]), "%.0f"),
                    f(med([r[k]["dnssec"].get("hit_pct") for r in rs]), "%.1f"),
                    f(sigs, "%.0f")))
        lines += ["", "| config | load s (exec → first answer) | PSS MiB |", "|---|---|---|"]
        for name in COST:
            rs = cost.get(name)
            if rs:
                lines.append("| %s | %s | %s |" % (name, f(med([r["load_s"] for r in rs])),
                                                   f(med([r["pss_mib"] for r in rs]), "%.1f")))
        lines.append("")
        for a, b in RATIOS:
            if a in summ and b in summ:
                lines.append("- µs/q %s / %s: %s" % (a, b, ", ".join(
                    "%s %s" % (k, f(summ[a][k] / summ[b][k] if summ[a][k] and summ[b][k]
                                    else None)) for k in files)))
        for name, ks in saturated.items():
            lines.append("- **%s fell short** of %d q/s: %s. dnsperf keeps 200 queries in "
                         "flight, so a saturated server slows it down instead of losing queries "
                         "(a server well below 100%% means the client's core was the limit): "
                         "µs/q there is at the rate reached" % (name, args.rate, "; ".join(ks)))
        dsz = {}
        for name, rs in cost.items():
            for r in rs:
                if r.get("dig_sizes"):
                    dsz[name] = r["dig_sizes"]
        if dsz:
            cases = list(next(iter(dsz.values())).keys())
            lines += ["", "Response bytes of the dig checks (DO=1 with +bufsize=4096, DO=0 without "
                      "EDNS):", "", "| config | " + " | ".join(cases) + " |",
                      "|---|" + "---|" * len(cases)]
            for name in COST:
                if name in dsz:
                    lines.append("| %s | %s |" % (name, " | ".join(
                        f(dsz[name].get(c), "%d") for c in cases)))
        fails = [x for rs in cost.values() for r in rs for x in r.get("check_failures", [])]
        lines += ["", "Answer checks (dig, before the load): %s" % (
            "every RRset of the signed DO=1 answers carried its RRSIG; none in the unsigned "
            "and DO=0 ones" if not fails else "**%d FAILED** (see the JSON)" % len(fails)), "",
                  "Notes: signed and DO=1, a name that does not exist is answered NOERROR (tern: "
                  "compact denial, RFC 9824; Knot's onlinesign: a \"black lies\" NSEC), so the "
                  "rcode mix moves from NXDOMAIN to NOERROR. Those NSECs, wildcard answers and "
                  "NODATA proofs are signed per query by both servers. Knot's mod-onlinesign "
                  "computes the signatures of every answer as it answers (static data "
                  "included); tern signs the static RRsets at load and keeps what it signs per "
                  "query in its worker's cache (`dnssec_cache`, %s entries, 4-way), keyed "
                  "by content, so a name asked again is a hit until the entry is evicted (hit "
                  "rate and signatures over each measured window, from /metrics, after a %d s "
                  "warm-up; dnsperf loops over the 100k-line file). `nonx` drops the NXDOMAIN "
                  "lines; the wildcard and NODATA share stays. tern-signed-do0's queries carry "
                  "no EDNS (dnsperf without -D), the others DO=1." % (
                      "{:,}".format(args.dnssec_cache or 16384), args.warm), ""]
    st = results["steered"]
    if st:
        lines += ["## steered — %d labels × %d A records, one picked at random per query "
                  "(`count: single, order: rr`), DO=1, after a %d s warm-up" % (
                      STEER_LABELS, STEER_RECORDS, args.steer_warm), "",
                  "| config | µs/q | qps | resp bytes | lost | cache hits | misses | hit % | "
                  "signatures (window) | misses in the warm-up |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for name in STEERED:
            rs = st.get(name)
            if not rs:
                continue
            summ[name] = {"steer": med([r["steer"]["cpu_us_per_q"] for r in rs])}
            d = [r["steer"]["dnssec"] for r in rs]
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, f(summ[name]["steer"]), f(med([r["steer"]["qps"] for r in rs]), "%.0f"),
                f(med([r["steer"]["resp_size"] for r in rs]), "%.0f"),
                f(med([r["steer"]["lost"] for r in rs]), "%.0f"),
                f(med([x.get("hits") for x in d]), "%.0f"),
                f(med([x.get("misses") for x in d]), "%.0f"),
                f(med([x.get("hit_pct") for x in d]), "%.3f"),
                f(med([x.get("signatures") for x in d]), "%.0f"),
                f(med([r["warm"].get("misses") for r in rs]), "%.0f")))
        a, b = "tern-steered-signed", "tern-steered-unsigned"
        if a in summ and b in summ and summ[a]["steer"] and summ[b]["steer"]:
            ratio = summ[a]["steer"] / summ[b]["steer"]
            lines += ["", "- signed / unsigned: **%.3f** (target ≤ 1.3: %s)" % (
                ratio, "met" if ratio <= 1.3 else "NOT met")]
        fails = [x for rs in st.values() for r in rs for x in r.get("check_failures", [])]
        if fails:
            lines.append("- answer checks: **%d FAILED** (see the JSON)" % len(fails))
        lines.append("")
    sg = results["sign"]
    if sg:
        lines += ["## sign — bench/dnssec_sign.c, pinned to CPU %s, medians of 5 batches "
                  "(and of the runs), µs per call from the thread's CPU clock" % run.SERVER_CPU,
                  "", "| algorithm | signature bytes | dnssec_sign (2 A) | cache miss "
                  "(dnssec_online) | cache hit |", "|---|---|---|---|---|"]
        for alg in ("13", "15", "8"):
            xs = [r["algs"][alg] for r in sg if alg in r.get("algs", {})]
            if xs:
                lines.append("| %s (%s) | %d | %s | %s | %s |" % (
                    alg, xs[0]["name"], xs[0]["siglen"], f(med([x["sign_cpu_us"] for x in xs])),
                    f(med([x["miss_cpu_us"] for x in xs])),
                    f(med([x["hit_cpu_us"] for x in xs]), "%.3f")))
        lines.append("")
    return "\n".join(lines), summ


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--secs", type=int, default=10, help="seconds per measured window")
    ap.add_argument("--rate", type=int, default=50000, help="offered load, q/s")
    ap.add_argument("--parts", default="cost,steered,sign")
    ap.add_argument("--configs", default="", help="only these configs (comma list; default all)")
    ap.add_argument("--cost-files", default="all,nonx", help="all, nonx, nxflood")
    ap.add_argument("--warm", type=int, default=3, help="cost: unmeasured seconds first")
    ap.add_argument("--steer-warm", type=int, default=3, help="steered: unmeasured seconds first")
    ap.add_argument("--dnssec-cache", type=int, default=0,
                    help="ternd's dnssec_cache (per-worker signatures; 0: its default, 16384)")
    ap.add_argument("--sign-n", type=int, default=SIGN_N, help="sign: signatures per batch")
    ap.add_argument("--ternd", default=os.path.join(run.ROOT, "build-bench", "ternd"))
    ap.add_argument("--ternctl", default=os.path.join(run.ROOT, "build-bench", "ternctl"))
    ap.add_argument("--build", action=argparse.BooleanOptionalAction, default=True,
                    help="build ternd, ternctl (and the sign bench's libraries) in build-bench "
                         "first (default: yes)")
    ap.add_argument("--load-timeout", type=float, default=180)
    ap.add_argument("--tag", default="", help="suffix for the results file name")
    args = ap.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    for p in parts:
        if p not in ("cost", "steered", "sign"):
            ap.error("unknown part %s" % p)
    args.cost_files = [x for x in args.cost_files.split(",") if x]
    for x in args.cost_files:
        if x not in ("all", "nonx", "nxflood"):
            ap.error("unknown cost file %s" % x)
    if "all" not in args.cost_files:
        args.cost_files.insert(0, "all")
    want = [c for c in args.configs.split(",") if c]
    for c in want:
        if c not in COST and c not in STEERED:
            ap.error("unknown config %s (known: %s)" % (c, ", ".join(list(COST) + list(STEERED))))
    cost_cfgs = [c for c in COST if not want or c in want] if "cost" in parts else []
    steer_cfgs = [c for c in STEERED if not want or c in want] if "steered" in parts else []
    for tool in ("dnsperf", "dig") + (("knotd", "keymgr") if any(
            c.startswith("knot") for c in cost_cfgs) else ()):
        if shutil.which(tool) is None:
            sys.exit("%s not installed: .ci/install-deps --bench" % tool)

    os.makedirs(os.path.join(run.CACHE, "run"), exist_ok=True)
    os.makedirs(run.RESULTS, exist_ok=True)
    targets = ["ternd", "ternctl"] + (["tern_dnssec", "tern_zone", "tern_wire", "tern_health",
                                       "tern_common"] if "sign" in parts else [])
    if args.build or not (os.path.exists(args.ternd) and os.path.exists(args.ternctl)) or \
            ("sign" in parts and not os.path.exists(os.path.join(
                run.ROOT, "build-bench", "src", "dnssec", "libtern_dnssec.a"))):
        bd = build(args, targets)
    else:
        bd = os.path.join(run.ROOT, "build-bench")
    if "sign" in parts:
        args.sign_bin = build_sign(bd)

    args.zone = "100k"
    zd, manifest = run.ensure_zone(args)
    work = tempfile.mkdtemp(prefix="tern-dnssec-", dir=os.path.join(run.CACHE, "run"))
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "args": {
        k: v for k, v in vars(args).items()}, "kernel": os.uname().release,
        "ternd": run._first_line([args.ternd, "--version"]),
        "knotd": run._first_line(["knotd", "-V"]),
        "dnsperf": run._first_line(["dnsperf", "-h"], want="Version")}
    results = {"cost": {}, "steered": {}, "sign": []}
    try:
        args.keys = keygen(args, work)
        meta["keys"] = [os.path.basename(k) for k in args.keys]
        if "tern-signed-2alg" in cost_cfgs:
            args.two_alg = two_alg_state(args, os.path.join(zd, ORIGIN + "zone"), work)
        qfiles = {"all": os.path.join(zd, "queries.txt")}
        if "nonx" in args.cost_files:
            qfiles["nonx"], meta["nonx_removed"], meta["nonx_left"] = nonx_file(zd, work)
        if "nxflood" in args.cost_files:
            qfiles["nxflood"] = os.path.join(zd, "nxflood.txt")
        szone, squeries = steer_zone(work)
        for i in range(args.runs):
            for cfgs, kind in ((cost_cfgs, "cost"), (steer_cfgs, "steered")):
                k = i % len(cfgs) if cfgs else 0
                for name in cfgs[k:] + cfgs[:k]:
                    log("run %d/%d %s %s" % (i + 1, args.runs, kind, name))
                    try:
                        if kind == "cost":
                            rec = cost_run(args, name, zd, manifest, qfiles, check=(i == 0))
                        else:
                            rec = steered_run(args, name, szone, squeries, check=(i == 0))
                    except RuntimeError as e:
                        log("  %s: %s" % (name, e))
                        results[kind].setdefault(name, []).append({"config": name,
                                                                    "error": str(e)[:4000]})
                        continue
                    results[kind].setdefault(name, []).append(rec)
                    for ph in ("all", "nonx", "nxflood", "steer"):
                        if ph in rec:
                            p = rec[ph]
                            log("  %-7s %6s µs/q  resp %s B  lost %s  rcodes %s%s" % (
                                ph, p["cpu_us_per_q"], p["resp_size"], p["lost"],
                                p["rcode_pct"], ("  dnssec %s" % json.dumps(p["dnssec"]))
                                if p["dnssec"] else ""))
                            if p["dnssec"].get("sign_failures"):
                                log("  SIGN FAILURES in %s %s: %s" % (name, ph,
                                                                      p["dnssec"]["sign_failures"]))
            if "sign" in parts:
                log("run %d/%d sign" % (i + 1, args.runs))
                results["sign"].append(sign_run(args))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    ok = {k: {n: [r for r in rs if "error" not in r] for n, rs in v.items()}
          for k, v in results.items() if k != "sign"}
    ok["sign"] = results["sign"]
    text, summ = summarize(ok, args, meta)
    print(text)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    jpath = os.path.join(run.RESULTS, "dnssec-%s%s.json" % (stamp, "-" + args.tag if args.tag
                                                            else ""))
    meta["args"].pop("keys", None)
    with open(jpath, "w") as fh:
        json.dump({"meta": meta, "results": results, "summary": summ}, fh, indent=1)
    with open(os.path.join(run.RESULTS, "latest-dnssec.md"), "w") as fh:
        fh.write(text + "\nraw: %s\n" % os.path.relpath(jpath, run.ROOT))
    print("raw runs: %s" % jpath)
    errors = [r for v in results.values() if isinstance(v, dict) for rs in v.values()
              for r in rs if "error" in r]
    fails = [x for v in results.values() if isinstance(v, dict) for rs in v.values()
             for r in rs for x in r.get("check_failures", [])]
    return 1 if errors or fails else 0


if __name__ == "__main__":
    sys.exit(main())
