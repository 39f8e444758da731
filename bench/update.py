#!/usr/bin/python3
"""Dynamic updates (RFC 2136) against the 100,000-name zone: how many a second, how long each
takes, whether the change is served when the answer arrives, and what they cost the query path.

    /usr/bin/python3 bench/update.py                       # build-bench/ternd, all parts
    /usr/bin/python3 bench/update.py --parts rate --updates 2000
    /usr/bin/python3 bench/update.py --parts workers --runs 5 --secs 8 --rate 30000

ternd (release build, pinned to CPU 0, one worker) serves a private copy of
bench/.cache/z100k/bench.test.zone with allow_update for a TSIG key (hmac-sha256) and
update_rate raised out of the way. The client is pinned to CPU 1.

  rate     --updates UPDATEs, one after another over UDP, each adding one A record to a new name
           (with TSIG): changes a second, latency (median, p99) from send to NOERROR, and for
           every update a query right after the answer — it must already return the record
           ("answer to serving": 0 when the query sees it, which the design promises). Then the
           same with --clients clients at once (the update thread takes them one at a time).
           And `ternctl zone flush` of the 100k zone after them: its time.
  redis    the rate part's one-client loop against the same 100,000 names kept in a
           redis-server of our own (bench/gen_redis.py, keyspace events on): each UPDATE is
           written into Redis in redins' schema and waited for until tern's Redis source serves
           it.
  workers  the query path's cost while changes arrive: dnsperf at --rate q/s for --secs, ternd's
           worker thread's CPU per query, without updates and with --change-rate updates a second
           from a paced client, rounds interleaved (--runs); the medians and their ratio.

Raw data: bench/results/update-<date>.json.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import run  # noqa: E402
import xfr as benchxfr  # noqa: E402  (TernX: ternd from a YAML config; started())

import dns.message  # noqa: E402
import dns.query  # noqa: E402
import dns.rcode  # noqa: E402
import dns.tsig  # noqa: E402
import dns.tsigkeyring  # noqa: E402
import dns.update  # noqa: E402

ORIGIN = run.ORIGIN
KEY = "bench-key"
SECRET = "YmVuY2hiZW5jaGJlbmNoYmVuY2hiZW5jaGJlbmNoMTI="
RING = dns.tsigkeyring.from_text({KEY: SECRET})


def log(*a):
    run.log(*a)


def start(args, tag):
    """ternd on a private copy of the 100k zone (its journal beside it)."""
    zd, _ = run.ensure_zone("100k")
    d = benchxfr.workdir(tag)
    zf = os.path.join(d, "bench.test.zone")
    shutil.copy(os.path.join(zd, "bench.test.zone"), zf)
    extra = f"""control_socket: "{d}/ctl.sock"
tsig_keys:
  - {{name: {KEY}, algorithm: hmac-sha256, secret: "{SECRET}"}}
update_rate: 100000
zones:
  - origin: {ORIGIN}
    file: "{zf}"
    allow_update: [{KEY}]
"""
    t = benchxfr.started(benchxfr.TernX(args, zf, d, extra), args.load_timeout)
    t.dir = d
    return t, zd


def one_update(port, i, tag="u"):
    u = dns.update.UpdateMessage(ORIGIN, keyring=RING, keyname=KEY,
                                 keyalgorithm=dns.tsig.HMAC_SHA256)
    u.add("%s%d.%s" % (tag, i, ORIGIN), 60, "A", "198.51.100.%d" % (i % 250 + 1))
    t0 = time.monotonic()
    r = dns.query.udp(u, "127.0.0.1", port=port, timeout=10)
    return r.rcode(), time.monotonic() - t0


def served(port, name):
    q = dns.message.make_query(name, "A")
    r = dns.query.udp(q, "127.0.0.1", port=port, timeout=2)
    return r.rcode() == dns.rcode.NOERROR and bool(r.answer)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def part_rate(args, res):
    t, _ = start(args, "rate")
    out = {}
    try:
        port = t.srv.port
        lat, seen, bad = [], 0, 0
        t0 = time.monotonic()
        for i in range(args.updates):
            rc, dt = one_update(port, i)
            if rc != dns.rcode.NOERROR:
                bad += 1
                continue
            lat.append(dt)
            seen += served(port, "u%d.%s" % (i, ORIGIN))
        # the served checks are queries between updates: count the updates' own time only
        wall = time.monotonic() - t0
        out["serial"] = {"updates": args.updates, "failed": bad,
                         "per_s_with_checks": round(args.updates / wall, 1),
                         "latency_ms_median": round(statistics.median(lat) * 1000, 2),
                         "latency_ms_p99": round(pct(lat, 0.99) * 1000, 2),
                         "served_at_answer": seen, "latency_bound_per_s":
                         round(1 / statistics.median(lat), 1)}
        log("one client: %d updates, median %.2f ms, p99 %.2f ms (about %.0f/s), %d of %d "
            "served when answered, %d failed" % (
                args.updates, out["serial"]["latency_ms_median"], out["serial"]["latency_ms_p99"],
                out["serial"]["latency_bound_per_s"], seen, len(lat), bad))
        # several clients at once
        per = args.updates // args.clients
        lats, errs = [], []

        def client(c):
            for i in range(per):
                try:
                    rc, dt = one_update(port, c * 100000 + i, tag="c")
                    (lats.append(dt) if rc == dns.rcode.NOERROR else errs.append(rc))
                except Exception as e:  # noqa: BLE001
                    errs.append(str(e))

        th = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
        t0 = time.monotonic()
        for x in th:
            x.start()
        for x in th:
            x.join()
        wall = time.monotonic() - t0
        out["parallel"] = {"clients": args.clients, "updates": per * args.clients,
                           "per_s": round(len(lats) / wall, 1), "failed": len(errs),
                           "latency_ms_median": round(statistics.median(lats) * 1000, 2),
                           "latency_ms_p99": round(pct(lats, 0.99) * 1000, 2)}
        log("%d clients: %.0f updates/s, median %.2f ms, p99 %.2f ms, %d failed" % (
            args.clients, out["parallel"]["per_s"], out["parallel"]["latency_ms_median"],
            out["parallel"]["latency_ms_p99"], len(errs)))
        t0 = time.monotonic()
        p = subprocess.run([os.path.join(os.path.dirname(args.ternd), "ternctl"), "-s",
                            os.path.join(t.dir, "ctl.sock"), "zone", "flush", ORIGIN],
                           capture_output=True, text=True, timeout=120)
        out["flush_s"] = round(time.monotonic() - t0, 3)
        log("flush of %d changes into the 100k zone: %.3f s (%s)" % (
            args.updates + per * args.clients, out["flush_s"], p.stdout.strip() or p.stderr))
    finally:
        t.stop()
    res["rate"] = out


def redis_round(args, d, r, events):
    """One ternd on the filled Redis: --updates/4 UPDATEs, one client; events: Redis's
    keyspace notifications on (each write also makes tern's Redis source check the zone's
    digests) or off (the change channel alone names what changed)."""
    r.cli("CONFIG", "SET", "notify-keyspace-events", "KEA" if events else "")
    extra = f"""tsig_keys:
  - {{name: {KEY}, algorithm: hmac-sha256, secret: "{SECRET}"}}
update_rate: 100000
redis:
  address: "127.0.0.1:{r.port}"
  zone_reload: 600
zones:
  - origin: {ORIGIN}
    allow_update: [{KEY}]
"""
    t = benchxfr.started(benchxfr.TernX(args, None, d, extra), args.load_timeout)
    try:
        port = t.srv.port
        lat, seen, bad = [], 0, 0
        n = max(1, args.updates // 4)
        tag = "re" if events else "rc"
        for i in range(n):
            rc, dt = one_update(port, i, tag=tag)
            if rc != dns.rcode.NOERROR:
                bad += 1
                continue
            lat.append(dt)
            seen += served(port, "%s%d.%s" % (tag, i, ORIGIN))
        out = {"keyspace_events": events, "updates": n, "failed": bad,
               "latency_ms_median": round(statistics.median(lat) * 1000, 2),
               "latency_ms_p99": round(pct(lat, 0.99) * 1000, 2), "served_at_answer": seen}
        log("Redis zone, keyspace events %s: %d updates, median %.2f ms, p99 %.2f ms (about "
            "%.0f/s), %d of %d served when answered, %d failed" % (
                "on " if events else "off", n, out["latency_ms_median"], out["latency_ms_p99"],
                1000 / out["latency_ms_median"], seen, len(lat), bad))
        return out
    finally:
        t.stop()


def part_redis(args, res):
    import redis_compare  # noqa: E402  (our own redis-server, filled by gen_redis)
    d = benchxfr.workdir("redis")
    r = redis_compare.Redis(d, run.CLIENT_CPU)
    try:
        fill = r.fill(100000, os.path.join(d, "unused.zone"))
        res["redis"] = {"labels": fill["hlen"],
                        "rounds": [redis_round(args, d, r, ev) for ev in (True, False)]}
    finally:
        r.stop()


def paced_updates(port, per_s, stop, counts):
    i = 0
    next_t = time.monotonic()
    while not stop.is_set():
        try:
            rc, _ = one_update(port, i, tag="p")
            counts["ok" if rc == dns.rcode.NOERROR else "bad"] += 1
        except Exception:  # noqa: BLE001
            counts["bad"] += 1
        i += 1
        next_t += 1.0 / per_s
        time.sleep(max(0, next_t - time.monotonic()))


def part_workers(args, res):
    rows = {"off": [], "on": []}
    for i in range(args.runs):
        for kind in (["off", "on"] if i % 2 == 0 else ["on", "off"]):
            t, zd = start(args, "w")
            stop = threading.Event()
            counts = {"ok": 0, "bad": 0}
            th = None
            try:
                time.sleep(0.3)
                if kind == "on":
                    th = threading.Thread(target=paced_updates,
                                          args=(t.srv.port, args.change_rate, stop, counts))
                    th.start()
                    time.sleep(0.5)
                pid = t.proc.pid
                c0 = benchxfr.worker_cpu(pid)
                m = run.measure(t, [run.dnsperf_argv(t.srv.port, os.path.join(zd, "queries.txt"),
                                                     args.secs, rate=args.rate)], args.secs)
                c1 = benchxfr.worker_cpu(pid)
                us = (c1 - c0) * 1e6 / m["completed"]
                rows[kind].append({"worker_us_per_q": round(us, 3),
                                   "server_us_per_q": m["cpu_us_per_q"], "lost": m["lost"],
                                   "updates_ok": counts["ok"], "updates_bad": counts["bad"]})
                log("round %d %-3s worker %.3f us/q, whole server %.3f us/q, lost %d, updates "
                    "%d ok %d failed" % (i, kind, us, m["cpu_us_per_q"], m["lost"], counts["ok"],
                                         counts["bad"]))
            finally:
                stop.set()
                if th:
                    th.join(timeout=20)
                t.stop()
    off = statistics.median(r["worker_us_per_q"] for r in rows["off"])
    on = statistics.median(r["worker_us_per_q"] for r in rows["on"])
    print("workers: %.3f us/q without updates, %.3f with %d updates/s: %.3f" % (
        off, on, args.change_rate, on / off))
    res["workers"] = rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="rate,redis,workers")
    ap.add_argument("--updates", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--secs", type=int, default=6)
    ap.add_argument("--rate", type=int, default=30000)
    ap.add_argument("--change-rate", type=int, default=100)
    ap.add_argument("--ternd", default=os.path.join(run.ROOT, "build-bench", "ternd"))
    ap.add_argument("--load-timeout", type=float, default=120)
    args = ap.parse_args()
    os.makedirs(os.path.join(run.CACHE, "run"), exist_ok=True)
    os.makedirs(run.RESULTS, exist_ok=True)
    res = {"meta": {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S UTC"),
                    "args": vars(args)}}
    parts = args.parts.split(",")
    if "rate" in parts:
        part_rate(args, res)
    if "redis" in parts:
        part_redis(args, res)
    if "workers" in parts:
        part_workers(args, res)
    out = os.path.join(run.RESULTS, "update-%s.json" %
                       datetime.datetime.utcnow().strftime("%Y%m%d-%H%M%S"))
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    log("raw data: %s" % out)


if __name__ == "__main__":
    main()
