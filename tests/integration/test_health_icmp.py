#!/usr/bin/python3
"""ICMP echo checks (redins' "ping"), end to end, in a network namespace of the test's own.

Run inside a fresh network namespace (ctest runs it under `unshare --net`), so the test may bring
up lo, add and remove addresses and change net.ipv4.ping_group_range (per namespace) without
touching the machine's own network:

  up_down       A records 192.0.2.1 (on lo: echo answered) and 192.0.2.2 (no route: the echo
                fails at once) and AAAA ::1 and 2001:db8::99: only the reachable ones are served;
                adding 192.0.2.2 to lo brings it back, removing 192.0.2.1 takes it out
  forbidden     with ping_group_range excluding ternd's group, every check fails with an error
                that names the sysctl; all records are down, so all are served (fail open)
  clean_exit    ternd exits 0 on SIGTERM

    unshare --net -- test_health_icmp.py --ternd build/ternd --ternctl build/ternctl
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import dns.message
import dns.query
import dns.rdatatype

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import (LOOPBACK, Failure, Ternd, clean_exit_result, expect, report,  # noqa: E402
                     run_check)

INTERVAL = 200
WAIT = 10.0
PING_RANGE = "/proc/sys/net/ipv4/ping_group_range"


def ip(*args):
    subprocess.run(["ip", *args], check=True, timeout=10)


def addrs(port, name, rtype):
    q = dns.message.make_query(name, rtype)
    try:
        r = dns.query.udp(q, LOOPBACK, port=port, timeout=1.0)
    except Exception:  # noqa: BLE001 - no answer yet
        return None
    want = dns.rdatatype.from_text(rtype)
    return sorted(rd.address for rrset in r.answer if rrset.rdtype == want for rd in rrset)


def wait_for(port, name, rtype, want, limit=WAIT):
    start = time.monotonic()
    got = None
    while time.monotonic() - start < limit:
        got = addrs(port, name, rtype)
        if got == sorted(want):
            return time.monotonic() - start
        time.sleep(0.02)
    raise Failure("%s %s: got %s, want %s within %.0f s" % (name, rtype, got, sorted(want), limit))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl", required=True)
    args = ap.parse_args()
    # a namespace of our own: lo is down and 127.0.0.1 unreachable until brought up
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=10)
    if len(links.stdout.splitlines()) != 1:
        print("test_health_icmp: run me in a fresh network namespace (unshare --net)")
        return 2
    ip("link", "set", "lo", "up")
    ip("addr", "add", "192.0.2.1/32", "dev", "lo")
    with open(PING_RANGE, "w") as f:
        f.write("0 2147483647")
    work = tempfile.mkdtemp(prefix="tern-icmp-")
    results = []
    tern = None
    try:
        soa = {"ttl": 300, "ns": "ns1.icmp.test.", "mbox": "h.icmp.test.", "serial": 1}
        check = {"enable": True, "protocol": "ping", "port": 80, "up_count": 2, "down_count": 2,
                 "timeout": 300}
        zone = {"config": {"soa": soa}, "records": {
            "@": {"ns": {"records": [{"host": "ns1.icmp.test."}]}},
            "host": {"a": {"ttl": 5, "records": [{"ip": "192.0.2.1"}, {"ip": "192.0.2.2"}],
                           "health_check": check},
                     "aaaa": {"ttl": 5, "records": [{"ip": "::1"}, {"ip": "2001:db8::99"}],
                              "health_check": check}}}}
        path = os.path.join(work, "icmp.json")
        with open(path, "w") as f:
            json.dump(zone, f)
        sock = os.path.join(work, "ternd.sock")
        extra = 'control_socket: "%s"\nhealth: {check_interval_ms: %d}\n' % (sock, INTERVAL)
        tern = Ternd(work, [("icmp.test", path)], args.ternd, extra_yaml=extra)
        tern.start("icmp.test")
        port = tern.port

        def up_down():
            wait_for(port, "host.icmp.test", "A", ["192.0.2.1"])
            wait_for(port, "host.icmp.test", "AAAA", ["::1"])
            ip("addr", "add", "192.0.2.2/32", "dev", "lo")
            t = wait_for(port, "host.icmp.test", "A", ["192.0.2.1", "192.0.2.2"])
            ip("addr", "del", "192.0.2.1/32", "dev", "lo")
            t2 = wait_for(port, "host.icmp.test", "A", ["192.0.2.2"])
            print("  icmp: back after %.2f s, gone after %.2f s" % (t, t2))
        run_check(results, "up_down", up_down)

        def forbidden():
            with open(PING_RANGE, "w") as f:
                f.write("1 0")  # nobody may open ping sockets
            wait_for(port, "host.icmp.test", "AAAA", ["::1", "2001:db8::99"])  # all down: all
            out = subprocess.run([args.ternctl, "-s", sock, "health"], capture_output=True,
                                 text=True, timeout=30)
            line = [l for l in out.stdout.splitlines() if l.startswith("endpoint: ::1 ")]
            expect(line and "ping_group_range" in line[0] and " state down " in line[0],
                   "ternctl health: %s" % out.stdout)
            expect("forbids unprivileged ping sockets" in tern.log_text(20000),
                   "the log does not say why ICMP checks fail")
        run_check(results, "forbidden", forbidden)
        tern.stop()
        r = clean_exit_result(tern)
        results.append(r if r else ("clean_exit", None))
        if any(err for _, err in results):
            print(tern.log_text())
        return report(results)
    finally:
        if tern is not None:
            tern.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
