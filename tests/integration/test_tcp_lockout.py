#!/usr/bin/python3
"""ternd's TCP admission under a full pool of idle connections held from many addresses.

Starts one ternd (one worker, so every connection competes for one pool) with
tcp_max_connections 40, tcp_max_per_client 4 and a long idle timeout (30 s: the timeout does not
rescue anyone during the test), then:

  1. an attacker opens idle connections from 20 loopback addresses (127.0.1.1-20), 4 from each
     (its cap: 80 wanted for 40 slots), sends nothing, and reconnects as soon as one is closed,
     for the whole round (bounded: ATTACK_SECONDS at most);
  2. meanwhile a well-behaved client on 127.0.2.1 asks QUERIES questions, each on a new
     connection (as a resolver sent to TCP by a truncated answer does), retrying once on a second
     connection when the first is closed or times out: at least 90% must be answered;
  3. the attack was real: it made many more connections than the pool holds;
  4. the same again with one connection from each of 80 addresses (127.0.3.1-80): every
     holder then holds as many as the client, and the client must still get its answers;
  5. once the attacks stop, ternd still answers over TCP.

Before the fix (a full pool evicted only a connection quiet for 1 s, and instant reconnects keep
every connection younger than that), the client got a few answers in 30. Every wait is bounded;
only the ternd started here is stopped.

    test_tcp_lockout.py --ternd build/ternd      (or TERND=build/ternd test_tcp_lockout.py)
"""

import argparse
import errno
import os
import selectors
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time

import dns.message
import dns.rcode

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

expect = servers.expect
run_check = servers.run_check

HERE = os.path.dirname(os.path.abspath(__file__))
ZONES = [("diff.test", os.path.join(HERE, "data", "diff.zone"))]

POOL = 40              # tcp_max_connections
PER_CLIENT = 4         # tcp_max_per_client: each attacker address holds at most this many
# (name, addresses, connections from each): 80 wanted for 40 slots either way
ROUNDS = [("spread", ["127.0.1.%d" % i for i in range(1, 21)], PER_CLIENT),
          ("one_each", ["127.0.3.%d" % i for i in range(1, 81)], 1)]
CLIENT = "127.0.2.1"   # the well-behaved client, on an address of its own
QUERIES = 30           # questions it asks, one connection each
ANSWER_TIMEOUT = 2.0   # per attempt; generous for a loaded 2-core machine
SHARE = 0.9            # of the questions that must be answered
WARMUP = 2.0           # seconds of attack (at most) before the client starts: the pool is full
ATTACK_SECONDS = 25.0  # hard bound on the attack, whatever happens

# Linux: let connect() pick the source port, so the 4-tuple is unique even while the server
# holds many of this address's recent connections in TIME_WAIT.
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)


class Attacker(threading.Thread):
    """Holds up to PER_CLIENT idle connections from each attacker address, reopening each one
    the moment the server closes it, until stopped or ATTACK_SECONDS pass."""

    def __init__(self, port, addresses, each):
        super().__init__(daemon=True)
        self.port = port
        self.addresses = addresses
        self.each = each
        self.stop_ev = threading.Event()
        self.connects = 0   # connections opened
        self.closed = 0     # ... that the server closed
        self.open_now = 0

    def _open(self, sel, src):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            s.bind((src, 0))
            s.setblocking(False)
            rc = s.connect_ex((servers.LOOPBACK, self.port))
            if rc not in (0, errno.EINPROGRESS):
                s.close()
                return False
        except OSError:
            s.close()
            return False
        sel.register(s, selectors.EVENT_READ, src)
        self.connects += 1
        return True

    def run(self):
        sel = selectors.DefaultSelector()
        want = {src: self.each for src in self.addresses}  # connections to (re)open, by address
        end = time.monotonic() + ATTACK_SECONDS
        try:
            while not self.stop_ev.is_set() and time.monotonic() < end:
                for src in self.addresses:
                    while want[src] > 0 and self._open(sel, src):
                        want[src] -= 1
                for key, _ in sel.select(timeout=0.01):
                    s = key.fileobj
                    try:
                        data = s.recv(512)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if data:
                        continue  # nothing is asked, so nothing is expected; ignore it
                    sel.unregister(s)
                    s.close()
                    self.closed += 1
                    want[key.data] += 1
                self.open_now = len(sel.get_map())
        finally:
            for key in list(sel.get_map().values()):
                key.fileobj.close()
            sel.close()


def ask_once(port, qid):
    """One question on a new connection from CLIENT; True when answered correctly."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        s.bind((CLIENT, 0))
        s.settimeout(ANSWER_TIMEOUT)
        deadline = time.monotonic() + ANSWER_TIMEOUT
        s.connect((servers.LOOPBACK, port))
        q = dns.message.make_query("www.diff.test", "A")
        q.id = qid
        wire = q.to_wire()
        s.sendall(struct.pack("!H", len(wire)) + wire)
        buf = b""
        while True:
            if len(buf) >= 2 and len(buf) >= 2 + struct.unpack("!H", buf[:2])[0]:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            s.settimeout(left)
            chunk = s.recv(4096)
            if not chunk:
                return False  # closed by the server: refused, or evicted before it asked
            buf += chunk
        n = struct.unpack("!H", buf[:2])[0]
        r = dns.message.from_wire(buf[2:2 + n])
        return r.id == qid and r.rcode() == dns.rcode.NOERROR and bool(r.answer)
    except (OSError, dns.exception.DNSException):
        return False
    finally:
        s.close()


def attack_round(tern, results, name, addresses, each):
    port = tern.port
    attacker = Attacker(port, addresses, each)
    attacker.start()
    try:
        # let the attacker fill the pool (bounded), so every question below meets a full pool
        deadline = time.monotonic() + WARMUP
        while time.monotonic() < deadline and attacker.connects < 2 * POOL:
            time.sleep(0.05)
        answered = retried = 0
        for i in range(QUERIES):
            ok = ask_once(port, 0x1000 + i)
            if not ok:
                retried += 1
                ok = ask_once(port, 0x2000 + i)  # a real client tries once more
            answered += ok
        connects = attacker.connects
    finally:
        attacker.stop_ev.set()
        attacker.join(ATTACK_SECONDS + 5)
    print("%s: client %d of %d answered (%d needed a retry); attacker (%d addresses x %d): %d "
          "connections opened, %d closed by ternd" % (name, answered, QUERIES, retried,
                                                      len(addresses), each, connects,
                                                      attacker.closed))

    def client_answered():
        expect(answered >= SHARE * QUERIES, "the client got %d of %d answers (%d retried) while "
               "%d addresses held the pool with idle connections" %
               (answered, QUERIES, retried, len(addresses)))
    run_check(results, name + "_newcomer_answered", client_answered)

    def attack_was_real():
        expect(connects > 2 * POOL, "the attacker only opened %d connections" % connects)
        expect(not attacker.is_alive(), "the attacker thread did not stop")
    run_check(results, name + "_attack_filled_the_pool", attack_was_real)


def scenario(tern, results):
    for name, addresses, each in ROUNDS:
        attack_round(tern, results, name, addresses, each)
    port = tern.port

    def served_after():
        deadline = time.monotonic() + 10
        while not ask_once(port, 0x4242):
            expect(time.monotonic() < deadline, "no TCP answer after the attack stopped")
            time.sleep(0.2)
        expect(tern.proc.poll() is None, "ternd exited:\n%s" % tern.log_text())
    run_check(results, "tcp_served_after_attack", served_after)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if not args.ternd or not os.access(args.ternd, os.X_OK):
        print("test_tcp_lockout: no ternd binary (--ternd PATH or $TERND), got %r" % args.ternd)
        return 2
    workdir = tempfile.mkdtemp(prefix="tern-tcp-lockout-")
    extra_yaml = ("tcp_max_connections: %d\ntcp_max_per_client: %d\ntcp_idle_timeout: 30\n"
                  "log_level: warning\n" % (POOL, PER_CLIENT))
    tern = servers.Ternd(workdir, ZONES, os.path.abspath(args.ternd), extra_yaml=extra_yaml,
                         workers=1)
    results = []
    try:
        try:
            tern.start("diff.test")
        except RuntimeError as e:
            results.append(("start", str(e)))
        else:
            scenario(tern, results)
    finally:
        tern.stop()
        bad = servers.clean_exit_result(tern)
        if bad:
            results.append(bad)
        if args.keep:
            print("kept %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return servers.report(results, 40)


if __name__ == "__main__":
    sys.exit(main())
