#!/usr/bin/python3
"""The transfer thread's connection pool: connections that hold a slot without work must not lock
a secondary out of its transfer (RFC 7766 §10, RFC 5936 §4.1).

A worker hands the transfer thread every TCP connection that carries an AXFR/IXFR, a NOTIFY or a
TSIG-signed message, and that thread keeps at most 64 (src/xfr/xfr.c, XFR_CONNS_MAX). One ternd
is the primary of pool.test (allow_transfer: 127.0.0.0/8). Hoarders, each from an address of its
own (127.0.x.y), connect, send one NOTIFY for pool.test (answered NOTAUTH: not a secondary zone
here; the connection stays open), and then hold the connection; one closed is opened again.

Checks (dnspython):
  idle_hoarders_axfr    70 hoarders, silent after their answer: an AXFR from another address
                        succeeds within AXFR_WAIT (the old pool closed every newcomer until the
                        hoarders' 30 s idle timeout)
  stalled_hoarders_axfr 70 hoarders that send the first byte of a next message and stall: the
                        AXFR succeeds all the same (a stalled one makes room after 2 s)
  per_address_cap       one address opens 12 connections, one NOTIFY each, one after another:
                        its 4 oldest are closed, the 8 newest stay open (XFR_CONNS_PER_ADDR)
  clean_exit            ternd exits 0 on SIGTERM

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded, the hoarders stop with their check, only the process started here is stopped.

    test_xfr_pool.py --ternd build/ternd
"""

import argparse
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time

import dns.exception
import dns.flags
import dns.message
import dns.opcode
import dns.query
import dns.rcode
import dns.zone

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import (LOOPBACK, Failure, clean_exit_result, expect, report,  # noqa: E402
                     run_check, write_atomic)
from test_xfr import Ternd, wait_for  # noqa: E402

HOARDERS = 70  # more than the pool's 64 slots
FILL_WAIT = 20.0  # seconds for the hoarders to get their answers (or be closed) on a busy box
# An AXFR must succeed within this, attempts included: well under the old lockout (30 s, the
# pool's idle timeout) and well over what it takes when a slot is made for it (milliseconds, or
# 2 s behind stalled connections)
AXFR_WAIT = 15.0
PER_ADDR = 8  # XFR_CONNS_PER_ADDR


ZONE = """$ORIGIN pool.test.
$TTL 300
@ SOA ns1 h 7 3600 600 86400 60
@ NS ns1
ns1 A 192.0.2.53
www A 192.0.2.1
mail A 192.0.2.2
"""


def notify_wire():
    m = dns.message.make_query("pool.test", "SOA")
    m.set_opcode(dns.opcode.NOTIFY)
    m.flags |= dns.flags.AA
    m.flags &= ~dns.flags.RD
    w = m.to_wire()
    return struct.pack("!H", len(w)) + w


def hold(src, port, stall):
    """Connect from src, send a NOTIFY, read its answer; with stall, send the first byte of a
    next message. The socket, or None when the server closed it before answering."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(3.0)
        s.bind((src, 0))
        s.connect((LOOPBACK, port))
        s.sendall(notify_wire())
        got = b""
        while len(got) < 2 or len(got) < 2 + struct.unpack("!H", got[:2])[0]:
            k = s.recv(4096)
            if not k:
                s.close()
                return None
            got += k
        if stall:
            s.sendall(b"\x00")
        return s
    except OSError:
        s.close()
        return None


class Hoarders:
    """n connections from addresses of their own, each held open and opened again (after a pause)
    when the server closes it, until stop()."""

    def __init__(self, port, n, net, stall=False):
        self.port = port
        self.stall = stall
        self.srcs = ["127.%d.%d.%d" % (net, 1 + i // 200, 1 + i % 200) for i in range(n)]
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.holding = set()  # sources with an answered connection open now
        self.answered = set()  # sources answered at least once
        self.threads = [threading.Thread(target=self._run, args=(src,), daemon=True)
                        for src in self.srcs]
        for t in self.threads:
            t.start()

    def _run(self, src):
        end = time.monotonic() + 60.0  # stop by themselves even if the test forgets them
        while not self.stopping.is_set() and time.monotonic() < end:
            s = hold(src, self.port, self.stall)
            if s is None:
                self.stopping.wait(0.05)
                continue
            with self.lock:
                self.holding.add(src)
                self.answered.add(src)
            s.settimeout(0.2)
            while not self.stopping.is_set():
                try:
                    if not s.recv(4096):
                        break
                except socket.timeout:
                    continue
                except OSError:
                    break
            s.close()
            with self.lock:
                self.holding.discard(src)
            self.stopping.wait(0.05)

    def counts(self):
        with self.lock:
            return len(self.holding), len(self.answered)

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=5.0)


def axfr_within(port, src, limit):
    """AXFR of pool.test from src, attempted until it succeeds or limit seconds pass: the seconds
    it took and the attempts, or Failure with the last error."""
    t0 = time.monotonic()
    last, tries = None, 0
    while time.monotonic() - t0 < limit:
        tries += 1
        try:
            z = dns.zone.from_xfr(dns.query.xfr(LOOPBACK, "pool.test", port=port, timeout=2.0,
                                                lifetime=4.0, source=src))
            expect("www" in [str(n) for n in z.nodes], "the AXFR holds www")
            return time.monotonic() - t0, tries
        except (dns.exception.DNSException, OSError, EOFError) as e:
            last = "%s: %s" % (type(e).__name__, e)
        time.sleep(0.1)
    raise Failure("no AXFR within %.0f s (%d attempts; last: %s)" % (limit, tries, last))


def locked_out(tern, port, net, stall):
    h = Hoarders(port, HOARDERS, net, stall)
    try:
        # full: 64 answered and holding (the rest are opened and closed, or wait their turn)
        wait_for(lambda: h.counts()[0] >= 64 and h.counts()[1] >= 64, FILL_WAIT,
                 "64 hoarders holding a connection")
        if stall:
            time.sleep(0.3)  # their stray byte is read: the connections are busy, not idle
        took, tries = axfr_within(port, "127.%d.250.250" % net, AXFR_WAIT)
        holding, answered = h.counts()
        print("  AXFR after %.2f s, %d attempt(s); hoarders holding %d, answered %d"
              % (took, tries, holding, answered))
    finally:
        h.stop()
    expect(tern.proc.poll() is None, "ternd is running")


def per_address_cap(port):
    socks = []
    try:
        for _ in range(PER_ADDR + 4):
            s = hold("127.77.0.1", port, False)
            expect(s is not None, "each NOTIFY is answered")
            socks.append(s)

        def closed(s):
            s.settimeout(0.05)
            try:
                return s.recv(1) == b""
            except socket.timeout:
                return False
            except OSError:
                return True

        wait_for(lambda: all(closed(s) for s in socks[:4]), 10.0,
                 "the address's 4 oldest connections closed")
        expect(not any(closed(s) for s in socks[4:]), "its %d newest are open" % PER_ADDR)
    finally:
        for s in socks:
            s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    args = ap.parse_args()
    args.ternd = os.path.abspath(args.ternd)
    work = tempfile.mkdtemp(prefix="tern-xfr-pool-")
    results = []
    path = os.path.join(work, "pool.zone")
    write_atomic(path, ZONE)
    tern = Ternd(work, args.ternd, yaml=f"""zones:
  - origin: pool.test
    file: "{path}"
    allow_transfer: [127.0.0.0/8]
""")
    try:
        tern.start("pool.test")
        run_check(results, "idle_hoarders_axfr", lambda: locked_out(tern, tern.port, 10, False))
        run_check(results, "stalled_hoarders_axfr",
                  lambda: locked_out(tern, tern.port, 11, True))
        run_check(results, "per_address_cap", lambda: per_address_cap(tern.port))
    finally:
        tern.stop()
    r = clean_exit_result(tern)
    results.append(r if r else ("clean_exit", None))
    if any(err for _, err in results):
        print(tern.log_text(limit=3000))
    else:
        shutil.rmtree(work, ignore_errors=True)
    return report(results)


if __name__ == "__main__":
    sys.exit(main())
