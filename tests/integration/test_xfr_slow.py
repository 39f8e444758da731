#!/usr/bin/python3
"""Transfers in that must not wait on each other: slow and dead primaries beside a good one.

A secondary ternd keeps five zones:
  - good.test from a second ternd (the primary: a zone file, allow_transfer, NOTIFY);
  - drip.test from a primary written here that answers the SOA, then drips its AXFR answer one
    byte a second (every byte is progress: only a per-message deadline ends it);
  - trickle.test from one that sends a small complete message every second and never the
    closing SOA (every message is progress: only the transfer's total deadline ends it);
  - dead.test from a port whose UDP never answers (the SOA query times out);
  - hole.test from one that answers the SOA but whose TCP port never completes a connect (its
    accept queue is full, so the SYNs are dropped).

Checks (dnspython, the secondary's log):
  good_change_not_held   with the drip under way for a while, the primary's change of good.test
                         (NOTIFY) is served by the secondary within a bound (the old transfer
                         thread held it until the drip ended)
  drip_cut               the dripped AXFR fails: no message within xfr_timeout_ms
  trickle_cut            the trickled AXFR fails at xfr_total_timeout_ms, its total deadline
  dead_primaries         both dead primaries' failures are logged (SOA unanswered, connect
                         timed out)
  sigterm_prompt         SIGTERM while a drip is in progress: the secondary exits 0 within a
                         bound

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded, the hand-written primaries stop by themselves, only processes started here are stopped.

    test_xfr_slow.py --ternd build/ternd
"""

import argparse
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import dns.exception
import dns.flags
import dns.message
import dns.rrset

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import (LOOPBACK, Failure, expect, free_port, report, run_check,  # noqa: E402
                     write_atomic)
from test_xfr import Ternd, read_query, serial_of, wait_for  # noqa: E402

# What the secondary is configured with: short, so the test is short; the defaults are longer
PROGRESS_MS = 3000  # xfr_timeout_ms
TOTAL_MS = 6000  # xfr_total_timeout_ms
# A change of good.test must be served within this (NOTIFY + IXFR take well under a second
# when nothing waits; the old code waited for the drippers, which never end)
CONVERGE = 8.0
LOG_WAIT = 25.0  # seconds for an expected log line
LIFE = 90.0  # the hand-written primaries stop by themselves after this


def good_text(serial):
    return """$ORIGIN good.test.
$TTL 300
@ SOA ns1 h %d 3600 600 86400 60
@ NS ns1
ns1 A 192.0.2.53
www A 192.0.2.%d
""" % (serial, serial)


def log_has(server, *texts):
    log = server.log_text(limit=400000)
    return all(t in log for t in texts)


class BadPrimary:
    """A primary for one zone, misbehaving by mode: drip (the AXFR answer one byte a second),
    trickle (a one-record message a second, never the end), dead (nothing answers), hole (the
    SOA answers, TCP connects never complete). Stops by itself after LIFE seconds."""

    def __init__(self, zone, mode):
        self.zone, self.mode = zone, mode
        self.port = free_port()
        self.stop = False
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.conn_start = None  # when the transfer being sent now began (None: none)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind((LOOPBACK, self.port))
        self.udp.settimeout(0.2)
        self.threads = [threading.Thread(target=self.serve_udp, daemon=True)]
        self.tcp = self.filler = None
        if mode in ("drip", "trickle", "hole"):
            self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.tcp.bind((LOOPBACK, self.port))
            if mode == "hole":
                # an accept queue of one, filled by us and never accepted: Linux drops every
                # further SYN, so a connect hangs as to a host that is gone
                self.tcp.listen(0)
                self.filler = socket.create_connection((LOOPBACK, self.port), timeout=1)
            else:
                self.tcp.listen(8)
                self.tcp.settimeout(0.2)
                self.threads.append(threading.Thread(target=self.serve_tcp, daemon=True))
        for t in self.threads:
            t.start()

    def alive(self):
        return not self.stop and time.monotonic() - self.t0 < LIFE

    def soa(self):
        z = self.zone
        return dns.rrset.from_text(z + ".", 300, "IN", "SOA", "ns1.%s. h.%s. 1 3600 600 86400 60"
                                   % (z, z))

    def serve_udp(self):
        while self.alive():
            try:
                data, peer = self.udp.recvfrom(4096)
                q = dns.message.from_wire(data)
            except (OSError, dns.exception.DNSException):
                continue
            if self.mode == "dead":
                continue
            r = dns.message.make_response(q)
            r.flags |= dns.flags.AA
            r.answer.append(self.soa())
            self.udp.sendto(r.to_wire(), peer)

    def message(self, q, rrsets):
        r = dns.message.make_response(q)
        r.flags |= dns.flags.AA
        r.answer = rrsets
        w = r.to_wire()
        return struct.pack("!H", len(w)) + w

    def send_slowly(self, c, q):
        z = self.zone
        ns = dns.rrset.from_text(z + ".", 300, "IN", "NS", "ns1.%s." % z)
        a = dns.rrset.from_text("ns1.%s." % z, 300, "IN", "A", "192.0.2.53")
        with self.lock:
            self.conn_start = time.monotonic()
        if self.mode == "drip":
            data = self.message(q, [self.soa(), ns, a, self.soa()])
            for i in range(len(data)):
                if not self.alive():
                    return
                c.sendall(data[i:i + 1])
                time.sleep(1.0)
            return
        c.sendall(self.message(q, [self.soa(), ns, a]))
        for i in range(10000):
            if not self.alive():
                return
            time.sleep(1.0)
            h = dns.rrset.from_text("h%d.%s." % (i, z), 300, "IN", "A", "192.0.2.1")
            c.sendall(self.message(q, [h]))

    def serve_tcp(self):
        while self.alive():
            try:
                c, _ = self.tcp.accept()
            except OSError:
                continue
            try:
                c.settimeout(3)
                self.send_slowly(c, read_query(c))
            except (OSError, dns.exception.DNSException, struct.error):
                pass  # the secondary gave up and closed: wait for its next try
            finally:
                with self.lock:
                    self.conn_start = None
                c.close()

    def sending_for(self):
        """Seconds the transfer being sent now has been going, 0 if none."""
        with self.lock:
            return time.monotonic() - self.conn_start if self.conn_start else 0.0

    def close(self):
        self.stop = True
        for t in self.threads:
            t.join(timeout=3)
        for s in (self.udp, self.tcp, self.filler):
            if s:
                s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    args = ap.parse_args()
    args.ternd = os.path.abspath(args.ternd)  # the servers run in their own directories
    work = tempfile.mkdtemp(prefix="tern-xfr-slow-")
    results = []
    good_path = os.path.join(work, "good.zone")
    write_atomic(good_path, good_text(1))
    bad = {m: BadPrimary("%s.test" % m, m) for m in ("drip", "trickle", "dead", "hole")}
    sec_port = free_port()
    primary = Ternd(work, args.ternd, name="primary", yaml=f"""zones:
  - origin: good.test
    file: "{good_path}"
    allow_transfer: [127.0.0.0/8]
    notify: ["{LOOPBACK}@{sec_port}"]
""")
    zones = "".join('  - origin: %s.test\n    primary: "%s@%d"\n' % (m, LOOPBACK, b.port)
                    for m, b in bad.items())
    secondary = Ternd(work, args.ternd, name="secondary", yaml=f"""xfr_timeout_ms: {PROGRESS_MS}
xfr_total_timeout_ms: {TOTAL_MS}
zones:
  - origin: good.test
    primary: "{LOOPBACK}@{primary.port}"
{zones}""")
    secondary.port = sec_port
    started = []
    try:
        primary.start("good.test")
        started.append(primary)
        secondary.start("good.test")
        started.append(secondary)

        def good_change_not_held():
            wait_for(lambda: bad["drip"].sending_for() > 2, LOG_WAIT, "the drip under way")
            write_atomic(good_path, good_text(2))
            primary.proc.send_signal(signal.SIGHUP)
            took = wait_for(lambda: serial_of(secondary.port, "good.test") == 2, CONVERGE,
                            "the secondary serving good.test serial 2 (drip at %.0f s, trickle "
                            "at %.0f s)" % (bad["drip"].sending_for(),
                                            bad["trickle"].sending_for()))
            print("  good.test serial 2 on the secondary %.2f s after SIGHUP" % took)

        run_check(results, "good_change_not_held", good_change_not_held)

        def drip_cut():
            wait_for(lambda: log_has(secondary, "zone drip.test: refresh failed",
                                     "message 1: not done in %d ms" % PROGRESS_MS),
                     LOG_WAIT, "the dripped transfer's failure logged")

        def trickle_cut():
            wait_for(lambda: log_has(secondary, "zone trickle.test: refresh failed",
                                     "not done within %d ms (xfr_total_timeout_ms)" % TOTAL_MS),
                     LOG_WAIT, "the trickled transfer's failure logged")

        def dead_primaries():
            wait_for(lambda: log_has(secondary, "zone dead.test: refresh failed",
                                     "zone hole.test: refresh failed",
                                     "connect to %s@%d" % (LOOPBACK, bad["hole"].port)),
                     LOG_WAIT, "the dead primaries' failures logged")

        run_check(results, "drip_cut", drip_cut)
        run_check(results, "trickle_cut", trickle_cut)
        run_check(results, "dead_primaries", dead_primaries)

        def sigterm_prompt():
            wait_for(lambda: bad["drip"].sending_for() > 1, LOG_WAIT, "a drip in progress")
            secondary.proc.send_signal(signal.SIGTERM)
            try:
                rc = secondary.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                raise Failure("the secondary still runs 5 s after SIGTERM")
            expect(rc == 0, "the secondary exited with %s" % rc)

        run_check(results, "sigterm_prompt", sigterm_prompt)
    finally:
        for s in started:
            s.stop()
        for b in bad.values():
            b.close()
    rc = report(results, width=24)
    if rc:
        print("--- secondary log ---\n" + secondary.log_text(limit=20000))
    shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
