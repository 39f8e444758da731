#!/usr/bin/python3
"""Zones from Redis with Sentinel: discovery, failover and reading from a replica, end to end.

Starts, on free loopback ports, a primary redis-server and a replica of it (--replicaof), both
with keyspace notifications on, and three sentinels (redis-sentinel, each with its own config:
quorum 2, down-after-milliseconds 1000, failover-timeout 3000). Two ternd read the zone through
"redis: sentinel:": ternd P from the primary, ternd R with "read_from: replica". ternd P also
checks one endpoint (TCP to a sentinel's port) and shares its state through "health: redis:"
without an address of its own, so on the node Sentinel names. Checks, with dnspython:

  served             both serve the zone put in the primary
  reads_replica      ternd R connected to the replica (its log names the replica's port)
  live_change        an HSET on the primary is served by both within LIVE_LIMIT
  failover           the primary SIGKILLed: the sentinels promote the replica (bounded wait)
  no_gap             both answered the zone every 100 ms throughout (every failure recorded)
  after_failover     an HSET on the new primary is served by both within FAILOVER_LIMIT
  health_shared      ternd P's health state is written to the primary (redis_conn.h)
  health_failover    after the failover, ternd P writes its health state to the new primary
  clean_exit         both ternd exit 0 on SIGTERM

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded; only the processes started here are stopped, by PID.

    test_redis_ha.py --ternd build/ternd
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import dns.message
import dns.query
import dns.rcode

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, Failure, Ternd, expect, report, run_check  # noqa: E402

ZONE = "ha.test."
MASTER = "mymaster"
TIMEOUT = 0.5
LIVE_LIMIT = 2.0       # seconds for a change on a healthy setup to reach answers
FAILOVER_LIMIT = 8.0   # seconds for a change made on the new primary to reach answers
PROMOTE_LIMIT = 20.0   # seconds for the sentinels to promote the replica
WAIT = 15.0            # bound of every other wait
HEALTH_MS = 300        # ternd P's check interval: a state is written about this often
HEALTH_KEYS = "tern:healthcheck:*"  # a TCP check's state key (health_redis.c)

SOA = {"ttl": 3600, "ns": "ns1.ha.test.", "MBox": "hostmaster.ha.test.", "refresh": 3600,
       "retry": 600, "expire": 86400, "minttl": 300, "serial": 1}
LABELS = {
    "@": {"ns": {"ttl": 3600, "records": [{"host": "ns1.ha.test."}]}},
    "ns1": {"a": {"ttl": 3600, "records": [{"ip": "192.0.2.53"}]}},
    "www": {"a": {"ttl": 300, "records": [{"ip": "192.0.2.10"}]}},
}


def a_record(ip):
    return json.dumps({"a": {"ttl": 300, "records": [{"ip": ip}]}})


class Sentinel(servers.Redis):
    """A redis-sentinel of our own (its config file written here), with servers.Redis' client."""

    def __init__(self, workdir, name, primary_port):
        super().__init__(workdir, name=name)
        self.conf = os.path.join(self.dir, "sentinel.conf")
        with open(self.conf, "w") as f:
            f.write("port %d\nbind %s\ndaemonize no\ndir %s\nlogfile %s\n"
                    "sentinel resolve-hostnames no\n"
                    "sentinel monitor %s %s %d 2\n"
                    "sentinel down-after-milliseconds %s 1000\n"
                    "sentinel failover-timeout %s 3000\n"
                    % (self.port, LOOPBACK, self.dir, os.path.join(self.dir, "sentinel.log"),
                       MASTER, LOOPBACK, primary_port, MASTER, MASTER))

    def argv(self):
        return [servers.find_program("redis-sentinel") or "redis-sentinel", self.conf]

    def master_port(self):
        r = self.cmd("SENTINEL", "get-master-addr-by-name", MASTER)
        return int(r[1]) if r else None


def wait_until(what, fn, limit):
    """Seconds until fn() is true; Failure after limit."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        try:
            if fn():
                return time.monotonic() - start
        except (OSError, RuntimeError):
            pass
        time.sleep(0.1)
    raise Failure("%s: not within %.0f s" % (what, limit))


def addresses(port, name):
    try:
        r = dns.query.udp(dns.message.make_query(name, "A"), LOOPBACK, port=port,
                          timeout=TIMEOUT)
    except Exception:  # noqa: BLE001 - a timeout is "no answer"
        return None
    if r.rcode() != dns.rcode.NOERROR:
        return dns.rcode.to_text(r.rcode())
    return sorted(rd.address for rrset in r.answer for rd in rrset if rrset.rdtype == 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    args = ap.parse_args()
    if not args.ternd:
        ap.error("--ternd is required")
    args.ternd = os.path.abspath(args.ternd)
    for prog in ("redis-server", "redis-sentinel"):
        if not servers.find_program(prog):
            print("%s is not installed (.ci/install-deps --test)" % prog)
            return 1
    work = tempfile.mkdtemp(prefix="tern-redis-ha-")
    procs = []
    results = []
    timings = []

    def check(name, fn):
        run_check(results, name, fn)

    try:
        primary = servers.Redis(work, name="primary")
        primary.start()
        procs.append(primary)
        primary.put_zone(ZONE, LABELS, SOA)
        replica = servers.Redis(work, name="replica",
                                args=["--replicaof", LOOPBACK, str(primary.port)])
        replica.start()
        procs.append(replica)
        wait_until("the replica in sync",
                   lambda: "master_link_status:up" in replica.cmd("INFO", "replication")
                   and replica.cmd("HGET", "redins:zones:" + ZONE, "www") is not None, WAIT)
        sentinels = []
        for i in range(3):
            s = Sentinel(work, "sentinel%d" % i, primary.port)
            s.start()
            procs.append(s)
            sentinels.append(s)
        # a failover needs the sentinels to know each other (hello messages) and the replica
        wait_until("the sentinels see each other and the replica",
                   lambda: all(len(s.cmd("SENTINEL", "sentinels", MASTER)) == 2
                               and len(s.cmd("SENTINEL", "replicas", MASTER)) == 1
                               for s in sentinels), WAIT)

        addrs = ", ".join('"%s:%d"' % (LOOPBACK, s.port) for s in sentinels)
        base = ("redis:\n  sentinel:\n    addresses: [%s]\n    master: %s\n"
                "  connect_timeout: 500\n  read_timeout: 1000\n" % (addrs, MASTER))
        anchor = os.path.join(work, "anchor.zone")
        with open(anchor, "w") as f:
            f.write("$ORIGIN anchor.test.\n@ 60 IN SOA ns. h. 1 60 60 60 60\n@ 60 IN NS ns.\n"
                    "h 60 IN A %s\n" % LOOPBACK)
        # the endpoint ternd P checks: a sentinel's port, up throughout
        health = ("health:\n  check_interval_ms: %d\n  redis: {connect_timeout: 500, "
                  "read_timeout: 1000}\n  checks:\n    - {address: %s, protocol: tcp, port: %d}\n"
                  % (HEALTH_MS, LOOPBACK, sentinels[0].port))
        tp = Ternd(work + "/p", [("anchor.test.", anchor)], args.ternd, extra_yaml=base + health)
        tr = Ternd(work + "/r", [("anchor.test.", anchor)], args.ternd,
                   extra_yaml=base + "  read_from: replica\n")
        ternds = [tp, tr]
        tp.start(ZONE)
        procs.append(tp)
        tr.start(ZONE)
        procs.append(tr)

        def served():
            for t in ternds:
                got = addresses(t.port, "www." + ZONE)
                expect(got == ["192.0.2.10"], "%s: www: %s" % (t.dir, got))

        check("served", served)

        def reads_replica():
            wait_until("ternd R's log naming the replica",
                       lambda: re.search(r"connected to the replica 127\.0\.0\.1:%d"
                                         % replica.port, tr.log_text(20000)), 5)
            expect(re.search(r"connected to the primary 127\.0\.0\.1:%d" % primary.port,
                             tp.log_text(20000)), "ternd P's log names no primary")

        check("reads_replica", reads_replica)

        def health_shared():
            wait_until("ternd P's health state on the primary",
                       lambda: primary.cmd("KEYS", HEALTH_KEYS), WAIT)

        check("health_shared", health_shared)

        def live_change():
            primary.cmd("HSET", "redins:zones:" + ZONE, "www", a_record("192.0.2.11"))
            for t, who in ((tp, "primary"), (tr, "replica")):
                s = wait_until("www 192.0.2.11 from the " + who,
                               lambda: addresses(t.port, "www." + ZONE) == ["192.0.2.11"],
                               LIVE_LIMIT)
                timings.append(("change via " + who, s))

        check("live_change", live_change)

        failures = []
        stop_poll = threading.Event()

        def poll():
            while not stop_poll.is_set():
                for t, who in ((tp, "P"), (tr, "R")):
                    got = addresses(t.port, "www." + ZONE)
                    if not (isinstance(got, list) and got):
                        failures.append("%s at %.1f s: %s" % (who, time.monotonic() - t0, got))
                stop_poll.wait(0.1)

        t0 = time.monotonic()
        poller = threading.Thread(target=poll)
        poller.start()
        try:
            def failover():
                os.kill(primary.proc.pid, signal.SIGKILL)
                primary.proc.wait(timeout=5)
                primary.sock.close()
                primary.sock = None
                s = wait_until("the sentinels promoting the replica",
                               lambda: sentinels[0].master_port() == replica.port, PROMOTE_LIMIT)
                timings.append(("promotion", s))

            check("failover", failover)

            def after_failover():
                # Sentinel's failover ends with CLIENT KILL TYPE normal on the promoted node: our
                # client, like ternd's, must connect again
                replica.sock.close()
                replica.sock = socket.create_connection((LOOPBACK, replica.port), timeout=1)
                replica.cmd("HSET", "redins:zones:" + ZONE, "www", a_record("192.0.2.12"))
                t1 = time.monotonic()
                for t, who in ((tp, "P"), (tr, "R")):
                    wait_until("www 192.0.2.12 from ternd " + who,
                               lambda: addresses(t.port, "www." + ZONE) == ["192.0.2.12"],
                               FAILOVER_LIMIT)
                    timings.append(("new primary to " + who, time.monotonic() - t1))

            check("after_failover", after_failover)

            def health_failover():
                # the state replicated before the failover goes; ternd P must write it anew, on
                # the node Sentinel names now
                for k in replica.cmd("KEYS", HEALTH_KEYS) or []:
                    replica.cmd("DEL", k)
                s = wait_until("ternd P's health state on the new primary",
                               lambda: replica.cmd("KEYS", HEALTH_KEYS), FAILOVER_LIMIT)
                timings.append(("health to new primary", s))

            check("health_failover", health_failover)
        finally:
            stop_poll.set()
            poller.join(timeout=5)

        def no_gap():
            expect(not failures, "%d failed queries: %s" % (len(failures), failures[:5]))

        check("no_gap (every 100 ms, %d s)" % int(time.monotonic() - t0), no_gap)

        for t in ternds:
            t.stop()
        bad = [t.proc.returncode for t in ternds if t.proc.returncode not in (0, -15)]
        results.append(("clean_exit", "ternd exited with %s" % bad if bad else None))
        for what, t in timings:
            print("  %-22s %.3f s" % (what, t))
        if any(err for _, err in results):
            for t in ternds:
                print(t.log_text(4000))
        return report(results)
    finally:
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
