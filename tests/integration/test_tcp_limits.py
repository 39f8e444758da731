#!/usr/bin/python3
"""ternd's TCP limits under abuse: a full pool, stalled and non-reading clients, normal service.

Starts one ternd (one worker, so every connection competes for the same pool) with
tcp_max_connections 8 and tcp_idle_timeout 2, then:

  1. fills the pool: three slow clients (one sends a length prefix and stalls, one sends half a
     message, one pipelines queries and never reads its answers), one active client that keeps
     querying (from 127.0.0.2), four idle holders;
  2. opens ten more connections from 127.0.0.1 and holds them: each takes the slot of the idle
     connection of 127.0.0.1 (the prefix holding the most idle ones) idle longest — the four
     holders, then the first six of the ten — while the busy slow clients and the active
     client on its own address keep theirs;
  3. meanwhile sends UDP queries (dnspython) every 100 ms and a TCP query on the active
     connection every 250 ms: all must be answered promptly;
  4. the slow clients and the last four of the ten must be closed by the idle timeout (not
     earlier than it, not much later), the active client never;
  5. once slots are free, fresh TCP connections are answered, and ternd is still running;
  6. a second ternd, limited to 48 descriptors, gets 80 connections: accept() fails with EMFILE,
     the worker must not spin (CPU time measured), must log it once, and must take
     connections again once they close.
  7. a third ternd (tcp_max_connections 40, tcp_max_per_client 4, idle timeout 30 s) has its
     pool held by idle connections from 20 addresses x 4 (then 80 x 1), each reopened the moment
     it is closed, while a client on another address asks 30 questions, each on a new
     connection, retrying once: at least 90% must be answered (issue 27: the previous rule,
     evict only a connection quiet for 1 s, gave it 0 of 30), and ternd must serve after.

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded; only the ternd started here is stopped.

    test_tcp_limits.py --ternd build/ternd      (or TERND=build/ternd test_tcp_limits.py)
"""

import argparse
import errno
import os
import select
import selectors
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time

import dns.exception
import dns.message
import dns.query
import dns.rcode

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

Failure = servers.Failure
expect = servers.expect
run_check = servers.run_check

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
ZONES = [("diff.test", "diff.zone")]

MAX_CONN = 8       # tcp_max_connections given to ternd
IDLE = 2.0         # tcp_idle_timeout given to ternd, seconds
EXTRA = 10         # connections beyond the pool
MARGIN = 2.0       # how much later than the idle timeout a close may come (sweep, a slow box)
ANSWER_TIMEOUT = 2.0   # a query that must be answered
PROMPT = 1.0       # what "answered promptly" means for the UDP and active TCP queries
SCENARIO = 12.0    # upper bound on the abuse phase, seconds
REFUSE_WAIT = 2.0  # a connection beyond the pool must have made room within this






def query_wire(name, qtype, qid):
    q = dns.message.make_query(name, qtype)
    q.id = qid
    return q.to_wire()


def framed(wire):
    return struct.pack("!H", len(wire)) + wire


def connect(port, rcvbuf=None, src=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if src:
        s.bind((src, 0))
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(ANSWER_TIMEOUT)
    s.connect((servers.LOOPBACK, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s, n, deadline):
    data = b""
    while len(data) < n:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = s.recv(n - len(data))
        if not chunk:
            raise Failure("connection closed by the server mid-answer")
        data += chunk
    return data


def tcp_roundtrip(s, qid):
    """One A query for www.diff.test on an open connection; returns the seconds it took."""
    t = time.monotonic()
    s.sendall(framed(query_wire("www.diff.test", "A", qid)))
    deadline = t + ANSWER_TIMEOUT
    n = struct.unpack("!H", recv_exact(s, 2, deadline))[0]
    r = dns.message.from_wire(recv_exact(s, n, deadline))
    expect(r.id == qid, "answer id %d, expected %d" % (r.id, qid))
    expect(r.rcode() == dns.rcode.NOERROR and r.answer, "bad TCP answer: %s" % r)
    return time.monotonic() - t


def closed_by_peer(s):
    """True when the server has closed s (EOF, reset or error), without consuming data."""
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLERR | select.POLLHUP)
    ev = p.poll(0)
    if not ev:
        return False
    mask = ev[0][1]
    if mask & (select.POLLERR | select.POLLHUP):
        return True
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def udp_query(port, qid):
    q = dns.message.make_query("www.diff.test", "A")
    q.id = qid
    t = time.monotonic()
    r = dns.query.udp(q, servers.LOOPBACK, port=port, timeout=ANSWER_TIMEOUT)
    expect(r.rcode() == dns.rcode.NOERROR and r.answer, "bad UDP answer: %s" % r)
    return time.monotonic() - t


class Watched:
    """A client connection whose close by the server is timed."""

    def __init__(self, name, sock, last_activity):
        self.name = name
        self.sock = sock
        self.last = last_activity  # when it last did something the idle timer counts
        self.closed_at = None


def scenario(port, results):
    def check(name, fn):
        try:
            fn()
            results.append((name, None))
        except Failure as e:
            results.append((name, str(e)))
        except (OSError, dns.exception.DNSException) as e:
            results.append((name, "%s: %s" % (type(e).__name__, e)))

    socks = []
    try:
        t0 = time.monotonic()
        # --- 1. the pool: three slow clients, one active, four idle holders, in accept order
        prefix = connect(port)
        socks.append(prefix)
        prefix.sendall(b"\x00\x40")  # announces 64 bytes, sends none
        half = connect(port)
        socks.append(half)
        w = query_wire("www.diff.test", "A", 7)
        half.sendall(framed(w)[:2 + len(w) // 2])
        noread = connect(port, rcvbuf=4096)
        socks.append(noread)
        noread.setblocking(False)
        pipeline = b"".join(framed(query_wire("big.diff.test", "TXT", i)) for i in range(64))
        # busy from the start: its answers pile up unread (the rest of it is sent in step 3)
        sent_noread = noread.send(pipeline)
        slow = [Watched("slow_length_prefix", prefix, time.monotonic()),
                Watched("slow_half_message", half, time.monotonic()),
                Watched("slow_never_reads", noread, time.monotonic())]
        active = connect(port, src="127.0.0.2")  # a prefix of its own
        socks.append(active)
        holders = []
        for i in range(MAX_CONN - 4):
            h = connect(port)
            socks.append(h)
            tcp_roundtrip(h, 100 + i)  # in the pool, and answered
            holders.append(Watched("idle_holder_%d" % i, h, time.monotonic()))
        tcp_roundtrip(active, 200)

        # --- 2. ten more from 127.0.0.1: each takes the slot of 127.0.0.1's connection idle
        # longest (the holders, then the earlier of the ten); the busy and 127.0.0.2 stay
        extra = []
        for i in range(EXTRA):
            s = connect(port)
            socks.append(s)
            extra.append(Watched("extra_%d" % i, s, time.monotonic()))
        made_room = [h.sock for h in holders] + [e.sock for e in extra[:EXTRA - 4]]
        gone = set()
        deadline = time.monotonic() + REFUSE_WAIT
        while len(gone) < len(made_room) and time.monotonic() < deadline:
            for i, s in enumerate(made_room):
                if i not in gone and closed_by_peer(s):
                    gone.add(i)
            time.sleep(0.02)

        def idle_made_room():
            expect(len(gone) == len(made_room), "%d of the %d idle connections idle longest "
                   "were closed for the newcomers within %.1f s"
                   % (len(gone), len(made_room), REFUSE_WAIT))
            kept = [w.name for w in slow + extra[EXTRA - 4:] if closed_by_peer(w.sock)]
            expect(not kept, "closed instead: %s" % ", ".join(kept))
            expect(not closed_by_peer(active), "the active client's connection was closed")
        check("pool_full_idle_connections_make_room", idle_made_room)

        # --- 3. service goes on while the slow ones sit there
        udp_times, tcp_times, errors = [], [], []
        next_udp = next_tcp = time.monotonic()
        qid = 1000
        active_closed = False
        watched = slow + extra[EXTRA - 4:]
        end = t0 + SCENARIO
        while time.monotonic() < end:
            now = time.monotonic()
            if all(w.closed_at for w in watched) and now - max(w.closed_at for w in watched) > 0.5:
                break
            # the non-reader keeps pushing queries while the server takes them
            if not slow[2].closed_at:
                try:
                    n = noread.send(pipeline)
                    if n > 0:
                        sent_noread += n
                        slow[2].last = now
                except BlockingIOError:
                    pass
                except OSError:
                    slow[2].closed_at = now
            for w in watched:
                if not w.closed_at and closed_by_peer(w.sock):
                    w.closed_at = now
            if now >= next_udp:
                qid += 1
                try:
                    udp_times.append(udp_query(port, qid & 0xFFFF))
                except (Failure, dns.exception.DNSException, OSError) as e:
                    errors.append("UDP query at +%.1f s: %s" % (now - t0, e))
                next_udp = now + 0.1
            if now >= next_tcp and not active_closed:
                qid += 1
                try:
                    tcp_times.append(tcp_roundtrip(active, qid & 0xFFFF))
                except (Failure, OSError) as e:
                    errors.append("active TCP query at +%.1f s: %s" % (now - t0, e))
                    active_closed = True
                next_tcp = now + 0.25
            time.sleep(0.02)

        def udp_answered():
            expect(not [e for e in errors if e.startswith("UDP")],
                   "; ".join(e for e in errors if e.startswith("UDP")))
            expect(len(udp_times) >= 20, "only %d UDP queries made" % len(udp_times))
            expect(max(udp_times) < PROMPT, "slowest UDP answer took %.2f s" % max(udp_times))
        check("udp_answered_during_abuse", udp_answered)

        def active_answered():
            expect(not active_closed, "; ".join(e for e in errors if e.startswith("active")))
            expect(len(tcp_times) >= 8, "only %d TCP queries made" % len(tcp_times))
            expect(max(tcp_times) < PROMPT, "slowest TCP answer took %.2f s" % max(tcp_times))
        check("active_tcp_answered_during_abuse", active_answered)

        # --- 4. every slow client and idle newcomer left is closed by the idle timeout
        for w in watched:
            def closed_by_idle(w=w):
                expect(w.closed_at is not None, "%s still open after %.0f s" % (w.name, SCENARIO))
                after = w.closed_at - w.last
                expect(after <= IDLE + MARGIN, "%s closed %.2f s after its last activity "
                       "(idle timeout %.0f s)" % (w.name, after, IDLE))
                since_start = w.closed_at - t0
                expect(since_start >= IDLE - 0.5, "%s closed after %.2f s, before the idle "
                       "timeout" % (w.name, since_start))
            check("closed_by_idle_timeout_" + w.name, closed_by_idle)

        def noread_pushed():
            # it sent far more than one answer's worth: the server paused it, then closed it
            expect(sent_noread > 64 * 1024, "the non-reader only sent %d bytes" % sent_noread)
        check("never_reads_was_backpressured", noread_pushed)

        # --- 5. the freed slots serve new connections; the active one is still there
        def fresh_tcp():
            for i in range(3):
                r = dns.query.tcp(dns.message.make_query("www.diff.test", "A"), servers.LOOPBACK,
                                  port=port, timeout=ANSWER_TIMEOUT)
                expect(r.rcode() == dns.rcode.NOERROR and r.answer, "bad answer %s" % r)
        check("fresh_tcp_after_idle_frees_slots", fresh_tcp)

        def active_still_open():
            expect(not active_closed, "the active connection was closed")
            tcp_roundtrip(active, 0x7777)
        check("active_connection_survived", active_still_open)
    finally:
        for s in socks:
            try:
                s.close()
            except OSError as e:
                if e.errno != errno.EBADF:
                    raise


def stop_checked(tern, results):
    """Stop a ternd started here; a dirty exit on SIGTERM is a failed check."""
    tern.stop()
    bad = servers.clean_exit_result(tern)
    if bad:
        results.append(bad)


NOFILE = 48        # descriptors ternd may hold in the EMFILE scenario (soft = hard)
FLOOD = 80         # connections opened against it: more than it can hold


class LimitedTernd(servers.Ternd):
    """ternd under prlimit: RLIMIT_NOFILE soft = hard = NOFILE, so accept() hits EMFILE."""

    def command(self):
        return ["prlimit", "--nofile=%d:%d" % (NOFILE, NOFILE), "--"] + super().command()


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def emfile_scenario(binary, workdir, results):
    """Out of descriptors, accept() fails with EMFILE while connections keep waiting: the worker
    must pause the listener instead of spinning, say so once, and take connections again once
    descriptors are free."""
    zones = [(origin, os.path.join(DATA, f)) for origin, f in ZONES]
    tern = LimitedTernd(os.path.join(workdir, "emfile"), zones, binary,
                        extra_yaml="log_level: warning\n", workers=1)
    held = []
    try:
        tern.start("diff.test")

        def flood():
            for _ in range(FLOOD):
                held.append(socket.create_connection((servers.LOOPBACK, tern.port), timeout=2))
            time.sleep(0.5)  # let the worker hit the limit
            before = cpu_seconds(tern.proc.pid)
            time.sleep(2.0)
            used = cpu_seconds(tern.proc.pid) - before
            expect(used < 0.5, "ternd used %.2f s of CPU in 2 s at EMFILE: spinning" % used)
            log = tern.log_text()
            expect(log.count("accept: Too many open files") == 1,
                   "want exactly one 'accept: Too many open files' line:\n%s" % log)

        def recovers():
            for c in held:
                c.close()
            held.clear()
            deadline = time.monotonic() + 5
            while True:
                try:
                    with connect(tern.port) as c:
                        tcp_roundtrip(c, 0x4242)
                    return
                except (Failure, OSError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)

        run_check(results, "emfile_no_spin_logged_once", flood)
        run_check(results, "emfile_recovers", recovers)
    except RuntimeError as e:
        results.append(("emfile_start", str(e)))
    finally:
        for c in held:
            c.close()
        stop_checked(tern, results)


# step 7: a full pool held by idle connections from many addresses
LOCKOUT_POOL = 40              # tcp_max_connections
LOCKOUT_PER_CLIENT = 4         # tcp_max_per_client: each attacker address holds at most this many
# (name, addresses, connections from each): 80 wanted for 40 slots either way
LOCKOUT_ROUNDS = [("spread", ["127.0.1.%d" % i for i in range(1, 21)], LOCKOUT_PER_CLIENT),
                  ("one_each", ["127.0.3.%d" % i for i in range(1, 81)], 1)]
LOCKOUT_CLIENT = "127.0.2.1"   # the well-behaved client, on an address of its own
LOCKOUT_QUERIES = 30           # questions it asks, one connection each
LOCKOUT_SHARE = 0.9            # of the questions that must be answered
LOCKOUT_WARMUP = 2.0           # attack seconds (at most) before the client asks: the pool is full
LOCKOUT_ATTACK_SECONDS = 25.0  # hard bound on the attack, whatever happens

# Linux: let connect() pick the source port, so the 4-tuple is unique even while the server
# holds many of this address's recent connections in TIME_WAIT.
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)


class Attacker(threading.Thread):
    """Holds `each` idle connections from each of `addresses`, reopening each one the moment the
    server closes it, until stopped or LOCKOUT_ATTACK_SECONDS pass."""

    def __init__(self, port, addresses, each):
        super().__init__(daemon=True)
        self.port = port
        self.addresses = addresses
        self.each = each
        self.stop_ev = threading.Event()
        self.connects = 0   # connections opened
        self.closed = 0     # ... that the server closed

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
        end = time.monotonic() + LOCKOUT_ATTACK_SECONDS
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
        finally:
            for key in list(sel.get_map().values()):
                key.fileobj.close()
            sel.close()


def ask_once(port, qid):
    """One question on a new connection from LOCKOUT_CLIENT; True when answered correctly."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        s.bind((LOCKOUT_CLIENT, 0))
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


def lockout_round(tern, results, name, addresses, each):
    port = tern.port
    attacker = Attacker(port, addresses, each)
    attacker.start()
    try:
        # let the attacker fill the pool (bounded), so every question below meets a full pool
        deadline = time.monotonic() + LOCKOUT_WARMUP
        while time.monotonic() < deadline and attacker.connects < 2 * LOCKOUT_POOL:
            time.sleep(0.05)
        answered = retried = 0
        for i in range(LOCKOUT_QUERIES):
            ok = ask_once(port, 0x1000 + i)
            if not ok:
                retried += 1
                ok = ask_once(port, 0x2000 + i)  # a real client tries once more
            answered += ok
        connects = attacker.connects
    finally:
        attacker.stop_ev.set()
        attacker.join(LOCKOUT_ATTACK_SECONDS + 5)
    print("lockout %s: client %d of %d answered (%d needed a retry); attacker (%d addresses x "
          "%d): %d connections opened, %d closed by ternd"
          % (name, answered, LOCKOUT_QUERIES, retried, len(addresses), each, connects,
             attacker.closed))

    def client_answered():
        expect(answered >= LOCKOUT_SHARE * LOCKOUT_QUERIES, "the client got %d of %d answers "
               "(%d retried) while %d addresses held the pool with idle connections"
               % (answered, LOCKOUT_QUERIES, retried, len(addresses)))
    run_check(results, "lockout_" + name + "_newcomer_answered", client_answered)

    def attack_was_real():
        expect(connects > 2 * LOCKOUT_POOL, "the attacker only opened %d connections" % connects)
        expect(not attacker.is_alive(), "the attacker thread did not stop")
    run_check(results, "lockout_" + name + "_attack_filled_the_pool", attack_was_real)


def lockout_rounds(tern, results):
    for name, addresses, each in LOCKOUT_ROUNDS:
        lockout_round(tern, results, name, addresses, each)
    port = tern.port

    def served_after():
        deadline = time.monotonic() + 10
        while not ask_once(port, 0x4242):
            expect(time.monotonic() < deadline, "no TCP answer after the attack stopped")
            time.sleep(0.2)
        expect(tern.proc.poll() is None, "ternd exited:\n%s" % tern.log_text())
    run_check(results, "lockout_tcp_served_after_attack", served_after)


def lockout_scenario(binary, workdir, results):
    """Idle connections from many addresses, reopened the moment they are closed, must not keep
    a newcomer on another address out of a full pool (see step 7)."""
    zones = [(origin, os.path.join(DATA, f)) for origin, f in ZONES]
    tern = servers.Ternd(os.path.join(workdir, "lockout"), zones, binary,
                         extra_yaml="tcp_max_connections: %d\ntcp_max_per_client: %d\n"
                         "tcp_idle_timeout: 30\nlog_level: warning\n"
                         % (LOCKOUT_POOL, LOCKOUT_PER_CLIENT), workers=1)
    try:
        tern.start("diff.test")
        lockout_rounds(tern, results)
    except RuntimeError as e:
        results.append(("lockout_start", str(e)))
    finally:
        stop_checked(tern, results)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if not args.ternd or not os.access(args.ternd, os.X_OK):
        print("test_tcp_limits: no ternd binary (--ternd PATH or $TERND), got %r" % args.ternd)
        return 2
    binary = os.path.abspath(args.ternd)
    workdir = tempfile.mkdtemp(prefix="tern-tcp-limits-")
    zones = [(origin, os.path.join(DATA, f)) for origin, f in ZONES]
    extra_yaml = ("tcp_max_connections: %d\ntcp_idle_timeout: %d\nlog_level: warning\n"
                  % (MAX_CONN, IDLE))
    tern = servers.Ternd(workdir, zones, binary, extra_yaml=extra_yaml, workers=1)
    results = []
    try:
        try:
            tern.start("diff.test")
        except RuntimeError as e:
            print("test_tcp_limits: %s" % e)
            print("0 passed, 1 failed")
            return 1
        scenario(tern.port, results)
        emfile_scenario(binary, workdir, results)
        lockout_scenario(binary, workdir, results)

        def alive():
            expect(tern.proc.poll() is None, "ternd exited (%s):\n%s"
                   % (tern.proc.returncode, tern.log_text()))
            udp_query(tern.port, 0x5555)
        try:
            alive()
            results.append(("server_alive", None))
        except (Failure, dns.exception.DNSException, OSError) as e:
            results.append(("server_alive", str(e)))
    finally:
        stop_checked(tern, results)
        if args.keep:
            print("kept %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    return servers.report(results, 48)


if __name__ == "__main__":
    sys.exit(main())
