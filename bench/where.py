#!/usr/bin/python3
"""Where a server's CPU per query goes, at a fixed rate: kernel receive and send, waking the
client, sleeping and waking, epoll, and in ternd parse, lookup, render, prefetch, the batch loop.

    /usr/bin/python3 bench/where.py tern=build-bench/ternd gdnsd reflector
    /usr/bin/python3 bench/where.py tern=build-bench/ternd gdnsd --q nxflood.txt

Each variant (LABEL=PATH of a ternd, or a peer's name) is started alone, one worker on CPU 0,
dnsperf on CPU 1 at --rate q/s. Over --secs seconds of that load, `perf record -a -C 0 -g`
samples CPU 0 (this VM has no PMU: the samples are cpu-clock ticks) while the server's own
utime+stime and /proc/interrupts are read at both ends. Each sample of the server's processes
is put in one bucket by its stack (kernel stacks are whole; user stacks are the leaf function,
a Release ternd keeps no frame pointers), and each bucket's share of the samples is turned into
µs per query with the server's measured CPU per query. Also printed: the inter-processor
interrupts CPU 1 received per query (the client woken by a reply: its cost is on the sending
CPU, the server's) and CPU 0 received (the server woken by a query).

Needs perf (linux-perf) and root. Runs once per variant; compare shapes, not third digits.
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True
import run as R  # noqa: E402

BUCKETS = [
    "user: parse", "user: lookup", "user: render", "user: prefetch", "user: answer (other)",
    "user: batch loop, counters", "user: libc", "user: other",
    "kernel: receive (recvmmsg)", "kernel: send (sendmmsg)",
    "kernel: send, waking the client", "kernel: epoll", "kernel: sleep, wake, IRQs",
    "kernel: other",
]

USER = [
    ("user: parse", ("wire_parse_query", "parse_records", "dname_check",
                     "dname_view_init")),
    ("user: lookup", ("zone_lookup", "zone_find_node", "zone_table_find", "zone_node_rrset",
                      "=lookup", "=resolve", "chase")),
    ("user: render", ("write_rrs", "put_", "wire_write", "wire_writer", "msg_name", "comp_add",
                      "wire_rdata_layout")),
    ("user: prefetch", ("answer_prefetch", "find_slot", "find_node")),
    ("user: batch loop, counters", ("udp_", "worker_", "net_count", "answer_batch", "mmsg_",
                                    "=prepare", "send_all", "tern_rcu", "rcu_", "tcp_")),
    ("user: answer (other)", ("answer_", "select_", "limit_")),
]


def _match(sym, pats):
    return any(sym == p[1:] if p.startswith("=") else sym.startswith(p) for p in pats)


def classify(frames, user_leaf):
    """frames: kernel symbols leaf first (empty for a user sample); user_leaf: the leaf's symbol
    and DSO when the sample was in user space."""
    if user_leaf:
        sym, dso = user_leaf
        for bucket, prefixes in USER:
            if _match(sym, prefixes):
                return bucket
        if "libc" in dso:
            return "user: libc"
        return "user: other"
    s = set(frames)
    joined = " ".join(frames)
    if "__sys_sendmmsg" in s or "__x64_sys_sendmmsg" in s or "__sys_sendmsg" in s:
        if "sock_def_readable" in s or "try_to_wake_up" in s or "__wake_up_sync_key" in s:
            return "kernel: send, waking the client"
        return "kernel: send (sendmmsg)"
    if "__sys_recvmmsg" in s or "__x64_sys_recvmmsg" in s or "__sys_recvmsg" in s:
        if "schedule" in joined:
            return "kernel: sleep, wake, IRQs"
        return "kernel: receive (recvmmsg)"
    if "epoll" in joined:
        return "kernel: epoll"
    if any(k in joined for k in ("schedule", "irq", "apic", "ttwu", "wake_up", "finish_task_switch",
                                 "idle", "tick", "hrtimer", "softirq")):
        return "kernel: sleep, wake, IRQs"
    return "kernel: other"


def read_samples(data, pids):
    """Bucket counts for the samples of pids in perf.data at data."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "pid,ip,sym,dso"],
                         capture_output=True, text=True, timeout=600).stdout
    counts, leaves = collections.Counter(), collections.Counter()
    pid, frames, user_leaf, first = None, [], None, True

    def flush():
        if pid in pids:
            b = classify(frames, user_leaf)
            counts[b] += 1
            leaves[(b, user_leaf[0] if user_leaf else (frames[0] if frames else "?"))] += 1

    for line in out.splitlines():
        if not line.strip():
            continue
        if not line.startswith((" ", "\t")):
            if pid is not None:
                flush()
            try:
                pid = int(line.split()[0])
            except ValueError:
                pid = None
            frames, user_leaf, first = [], None, True
            continue
        parts = line.split(None, 1)
        rest = parts[1] if len(parts) > 1 else ""
        sym = rest.split(" (", 1)[0].split("+", 1)[0].strip()
        dso = rest.rsplit("(", 1)[-1].rstrip(")") if "(" in rest else ""
        kernel = "kernel.kallsyms" in dso or dso.startswith("[")
        if first:
            first = False
            if not kernel:
                user_leaf = (sym, dso)
        if kernel and user_leaf is None:
            frames.append(sym)
    if pid is not None:
        flush()
    return counts, leaves


def ipis():
    """{'CAL': (cpu0, cpu1), 'RES': (...)}"""
    res = {}
    with open("/proc/interrupts") as f:
        for line in f:
            p = line.split()
            if p and p[0] in ("CAL:", "RES:"):
                res[p[0][:-1]] = (int(p[1]), int(p[2]))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("variants", nargs="+", help="LABEL=PATH of a ternd, or a peer's name")
    ap.add_argument("--secs", type=int, default=8)
    ap.add_argument("--rate", type=int, default=50000)
    ap.add_argument("--q", default="queries.txt", help="the query file of the zone directory")
    ap.add_argument("--zone", default="z100k")
    ap.add_argument("--detail", type=int, default=0, help="print the N costliest leaf functions")
    a = ap.parse_args()
    zd = os.path.join(R.CACHE, a.zone)
    if not os.path.exists(os.path.join(zd, "manifest.json")):
        sys.exit("no %s: run bench/run.py once (or gen_zone.py) to make it" % zd)
    os.makedirs(os.path.join(R.CACHE, "run"), exist_ok=True)
    table, extra = {}, {}

    class Args:
        load_timeout = 120

    for v in a.variants:
        label, _, path = v.partition("=")
        args = Args()
        args.ternd = os.path.abspath(path) if path else None
        run = R.start_server(args, "tern" if path else label, os.path.join(zd, R.ORIGIN + "zone"))
        tmp = tempfile.mkdtemp(prefix="where-", dir=os.path.join(R.CACHE, "run"))
        data = os.path.join(tmp, "perf.data")
        try:
            time.sleep(0.3)
            argv = R.dnsperf_argv(run.srv.port, os.path.join(zd, a.q), a.secs + 4, rate=a.rate)
            dp = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            time.sleep(2)
            pids = set(run.pids())
            i0, c0, t0 = ipis(), R.cpu_ticks(pids), time.monotonic()
            subprocess.run(["perf", "record", "-q", "-a", "-C", R.SERVER_CPU, "-g", "-o", data,
                            "--", "sleep", str(a.secs)], capture_output=True, timeout=a.secs + 60)
            i1, c1, t1 = ipis(), R.cpu_ticks(pids), time.monotonic()
            out, _ = dp.communicate(timeout=a.secs + 30)
            d = R.parse_dnsperf(out)
            if d["completed"] is None or d["lost"]:
                print("%s: dnsperf lost %s: the figures assume every query answered" % (label, d["lost"]))
            queries = a.rate * (t1 - t0)
            us_q = (c1 - c0) * 1e6 / queries
            counts, leaves = read_samples(data, pids)
        finally:
            run.stop()
            subprocess.run(["rm", "-rf", tmp])
        total = sum(counts.values()) or 1
        table[label] = {b: us_q * counts[b] / total for b in BUCKETS}
        table[label]["total"] = us_q
        extra[label] = {
            "client woken (CPU 1 IPIs) per query": ((i1["CAL"][1] - i0["CAL"][1]) +
                                                   (i1["RES"][1] - i0["RES"][1])) / queries,
            "server woken (CPU 0 IPIs) per query": ((i1["CAL"][0] - i0["CAL"][0]) +
                                                   (i1["RES"][0] - i0["RES"][0])) / queries,
            "samples": total,
        }
        print("%s: %.2f µs/query, %d samples" % (label, us_q, total), flush=True)
        for (b, sym), n in leaves.most_common(a.detail):
            print("    %-34s %-36s %.3f µs/q" % (b, sym, us_q * n / total))

    labels = list(table)
    print()
    print("| µs per query (%s, %d q/s) | %s |" % (a.q, a.rate, " | ".join(labels)))
    print("|---|%s" % ("---|" * len(labels)))
    for b in BUCKETS + ["total"]:
        print("| %s | %s |" % (b, " | ".join("%.2f" % table[x][b] for x in labels)))
    for k in ("client woken (CPU 1 IPIs) per query", "server woken (CPU 0 IPIs) per query"):
        print("| %s | %s |" % (k, " | ".join("%.3f" % extra[x][k] for x in labels)))


if __name__ == "__main__":
    main()
