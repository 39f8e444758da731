#!/usr/bin/python3
"""ternd under floods: access lists, redins' ratelimit, RRL, DNS Cookies and TCP per client.

Every client here is a real socket bound to its own address of 127/8 (all of it is local on
Linux), so ternd sees distinct sources; every flood is paced and bounded in count and time.

  acl               the global acl (REFUSED with the question echoed, or silence), a zone's acl,
                    and a CNAME chain into a zone the client may not see stopping at the CNAME
  ratelimit         redins' ratelimit with redins' arithmetic (burst + 1 at once, then one per
                    60/rate s), whitelist, blacklist; a reload to action drop keeps the budget
                    already spent; a reload without the block lifts it
  rrl_flood         one source floods one name over four sockets (two workers: one shared
                    budget) while a client of another prefix at 20 q/s and a cookie client of
                    the flooding address at 100 q/s get every answer; the flooder gets at most
                    rate x time + burst full answers, every 2nd limited one as TC (slip 2), and
                    never more bytes than it sent; the newly limited prefix is logged
  nxdomain_flood    random names (NXDOMAIN) from one source: limited by zone, not by name
  cookies           RFC 7873/9018 server cookies: layout and timestamp, FORMERR on bad lengths
                    and a second COOKIE, require (TC without a cookie, BADCOOKIE for a client
                    cookie alone, a forged one, or one minted for another address), TCP exempt,
                    dig's own cookie handling
  knot_cookies      tern and Knot (mod-cookies) sharing a secret accept each other's cookies
  tcp_per_client    one address opens 2000 connections and keeps reconnecting: it holds at most
                    tcp_max_per_client of them while another client's TCP queries are answered
  tcp_evict         a pool full of idle connections, however fresh: a newcomer evicts one
                    at once and is answered (test_tcp_limits.py: many addresses reconnecting)

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Only processes
started here are stopped.

    test_limit.py --ternd build/ternd --ternctl build/ternctl
"""

import argparse
import os
import random
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import dns.edns
import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

Failure = servers.Failure
expect = servers.expect
run_check = servers.run_check

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
ZONES = [("diff.test", os.path.join(DATA, "diff.zone")),
         ("other.test", os.path.join(DATA, "other.zone"))]
SECRET = "e5e973e5a6b2a43f48e7dc849e37bfcf"  # shared by tern and Knot in knot_cookies
COOKIE = 10  # EDNS option code
BADCOOKIE = 23
TIMEOUT = 1.0  # a query that must be answered
SILENCE = 0.5  # how long a dropped query is waited for


class Tern(servers.Ternd):
    """ternd with a control socket and per-zone YAML (a zone's acl)."""

    def __init__(self, work, args, extra="", zone_extra=None, workers=1):
        self.sock = None
        self.zone_extra = zone_extra or {}
        super().__init__(work, ZONES, args.ternd, extra_yaml=extra, workers=workers)
        self.sock = os.path.join(self.dir, "ctl.sock")
        self.ternctl = args.ternctl

    def command(self):
        conf = os.path.join(self.dir, "ternd.yaml")
        with open(conf + ".tmp", "w") as f:
            f.write('listen: ["%s:%d"]\nworkers: %d\n' % (servers.LOOPBACK, self.port,
                                                           self.workers))
            if os.geteuid() == 0:
                f.write("allow_root: true\n")
            f.write('control_socket: "%s"\n' % os.path.join(self.dir, "ctl.sock"))
            f.write(self.extra_yaml)
            f.write("zones:\n")
            for origin, path in self.zones:
                f.write('  - origin: "%s"\n    file: "%s"\n' % (origin, path))
                if origin in self.zone_extra:
                    f.write("    %s\n" % self.zone_extra[origin])
        os.rename(conf + ".tmp", conf)
        return [self.binary, "-c", conf]

    def reload(self, extra):
        """Rewrite the config with extra and apply it (ternctl reload waits for the result)."""
        self.extra_yaml = extra
        self.command()
        self.ctl("reload")

    def ctl(self, *cmd):
        out = subprocess.run([self.ternctl, "-s", self.sock, *cmd], capture_output=True,
                             text=True, timeout=30)
        expect(out.returncode == 0, "ternctl %s: %s%s" % (" ".join(cmd), out.stdout, out.stderr))
        return out.stdout

    def stat(self, key):
        for line in self.ctl("stats").splitlines():
            if line.startswith(key + ": "):
                return int(line.split(": ", 1)[1])
        raise Failure("ternctl stats has no %s" % key)


def query(port, name, qtype="A", src="127.0.0.1", cookie=None, options=None, tcp=False,
          timeout=TIMEOUT, edns=True):
    """One query from src; the response, or None if none came within timeout."""
    opts = list(options or [])
    if cookie is not None:
        opts.append(dns.edns.GenericOption(COOKIE, cookie))
    q = dns.message.make_query(name, qtype, use_edns=0 if (edns or opts) else False,
                               options=opts, payload=1232)
    try:
        if tcp:
            return dns.query.tcp(q, servers.LOOPBACK, port=port, timeout=timeout, source=src)
        return dns.query.udp(q, servers.LOOPBACK, port=port, timeout=timeout, source=src,
                             ignore_trailing=True)
    except dns.exception.Timeout:
        return None


def cookie_of(r):
    """The COOKIE option's bytes in response r, or None."""
    for o in r.options:
        if o.otype == COOKIE:
            return o.to_wire()
    return None


def rcode(r):
    return r.rcode() if r is not None else None


def addresses(r):
    return sorted(rd.address for rrset in r.answer for rd in rrset
                  if rrset.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA))


def expect_refused(r, name, what):
    expect(r is not None, "%s: no answer, expected REFUSED" % what)
    expect(r.rcode() == dns.rcode.REFUSED, "%s: %s, expected REFUSED" %
           (what, dns.rcode.to_text(r.rcode())))
    expect(len(r.question) == 1 and r.question[0].name.to_text() == name + ".",
           "%s: REFUSED without the question" % what)
    expect(not r.answer, "%s: REFUSED with an answer" % what)


def expect_answer(r, what):
    expect(r is not None, "%s: no answer" % what)
    expect(r.rcode() == dns.rcode.NOERROR and r.answer and not r.flags & dns.flags.TC,
           "%s: %s%s" % (what, dns.rcode.to_text(r.rcode()),
                         " TC" if r.flags & dns.flags.TC else ""))


# ---- acl -------------------------------------------------------------------------------------

def check_acl(args, work):
    extra = ("acl:\n  allow: [127.0.0.0/8]\n  deny: [127.0.0.66, 127.0.9.0/24]\n"
             "  action: refuse\n")
    t = Tern(work, args, extra,
             zone_extra={"other.test": "acl: {allow: [127.0.0.1/32], action: drop}"})
    t.start("diff.test")
    try:
        expect_answer(query(t.port, "www.diff.test"), "127.0.0.1 www.diff.test")
        expect_refused(query(t.port, "www.diff.test", src="127.0.0.66"), "www.diff.test",
                       "127.0.0.66 (denied)")
        expect_refused(query(t.port, "www.other.test", src="127.0.9.200"), "www.other.test",
                       "127.0.9.200 (denied prefix)")
        expect_refused(query(t.port, "www.diff.test", src="127.0.9.1", tcp=True),
                       "www.diff.test", "127.0.9.1 over TCP")
        # the zone's own list: silence for others, its data never leaks through a CNAME
        expect_answer(query(t.port, "www.other.test"), "127.0.0.1 www.other.test")
        expect(query(t.port, "www.other.test", src="127.0.0.7", timeout=SILENCE) is None,
               "127.0.0.7 www.other.test: answered, expected silence (zone acl, drop)")
        expect_answer(query(t.port, "www.diff.test", src="127.0.0.7"), "127.0.0.7 www.diff.test")
        r = query(t.port, "to-other.diff.test", src="127.0.0.7")
        expect(r is not None and r.rcode() == dns.rcode.NOERROR, "127.0.0.7 to-other: %s" % r)
        expect(not addresses(r) and len(r.answer) == 1,
               "127.0.0.7 to-other.diff.test: the chain went on into other.test: %s" % r)
        r = query(t.port, "to-other.diff.test")
        expect(addresses(r) == ["192.0.2.11"], "127.0.0.1 to-other.diff.test: %s" % r)
        expect(t.stat("refused_acl") == 3, "refused_acl %d, expected 3" % t.stat("refused_acl"))
        expect(t.stat("dropped_zone_acl") == 1,
               "dropped_zone_acl %d, expected 1" % t.stat("dropped_zone_acl"))
        # reloaded: the deny list gone, the action of the zone's list now refuse
        t.zone_extra = {"other.test": "acl: {allow: [127.0.0.1/32]}"}
        t.reload("acl:\n  allow: [127.0.0.0/8]\n")
        expect_answer(query(t.port, "www.diff.test", src="127.0.0.66"),
                      "127.0.0.66 after the reload")
        expect_refused(query(t.port, "www.other.test", src="127.0.0.7"), "www.other.test",
                       "127.0.0.7 after the reload")
    finally:
        t.stop()


# ---- redins' ratelimit -----------------------------------------------------------------------

def burst_of(port, src, n=30):
    """n queries back to back from src: how many were answered before the first REFUSED, and
    whether every later one was REFUSED."""
    codes = [rcode(query(port, "www.diff.test", src=src)) for _ in range(n)]
    ok = 0
    while ok < n and codes[ok] == dns.rcode.NOERROR:
        ok += 1
    return ok, codes[ok:]


def check_ratelimit(args, work):
    rl = ("ratelimit:\n  enable: true\n  rate: 60\n  burst: 10\n"
          "  whitelist: [127.0.0.3]\n  blacklist: [127.0.0.4]\n%s")
    t = Tern(work, args, rl % "")
    t.start("diff.test")
    try:
        start = time.monotonic()
        ok, rest = burst_of(t.port, "127.0.0.2")
        took = time.monotonic() - start
        # redins: the first query fills one step, then burst more fit before the budget is
        # over (size > burst x step); one more step drains per second
        expect(11 <= ok <= 11 + int(took) + 1, "127.0.0.2: %d answered at once, expected 11 "
               "(burst 10 + 1) in %.2f s" % (ok, took))
        expect(rest and all(c == dns.rcode.REFUSED for c in rest),
               "127.0.0.2 past its burst: %s" % rest)
        expect_refused(query(t.port, "www.diff.test", src="127.0.0.2"), "www.diff.test",
                       "127.0.0.2 over the limit")
        ok3, rest3 = burst_of(t.port, "127.0.0.3")
        expect(ok3 == 30, "127.0.0.3 (whitelisted): %d of 30 answered" % ok3)
        expect_refused(query(t.port, "www.diff.test", src="127.0.0.4"), "www.diff.test",
                       "127.0.0.4 (blacklisted)")
        ok1, _ = burst_of(t.port, "127.0.0.1", 5)
        expect(ok1 == 5, "127.0.0.1 (its own budget): %d of 5 answered" % ok1)
        time.sleep(1.1)  # one step (60 s / 60) drains
        expect_answer(query(t.port, "www.diff.test", src="127.0.0.2"), "127.0.0.2 a second on")
        spent = time.monotonic()
        # a reload keeps what was spent, and can turn REFUSED into silence. Each second since the
        # budget was spent drains one more step (a reload on a busy machine can take more than
        # one), so that many answers may come before the silence; a budget the reload reset
        # would answer 11.
        t.reload(rl % "  action: drop\n  blacklist_action: drop\n")
        answered = 0
        while answered < 11 and query(t.port, "www.diff.test", src="127.0.0.2",
                                      timeout=SILENCE) is not None:
            answered += 1
        # the step in progress when it was spent had run at most ~0.2 s (the 1.1 s sleep)
        since = time.monotonic() - spent
        drained = int(since + 0.5)
        expect(answered <= drained and answered < 11,
               "127.0.0.2 after the reload: %d answered before silence, expected at most %d "
               "(its budget is spent; %.1f s since)" % (answered, drained, since))
        expect(query(t.port, "www.diff.test", src="127.0.0.4", timeout=SILENCE) is None,
               "127.0.0.4 after the reload: answered, expected silence")
        expect(t.stat("refused_ratelimit") >= 20 and t.stat("dropped_ratelimit") >= 1 and
               t.stat("refused_blacklist") >= 1 and t.stat("dropped_blacklist") >= 1,
               "ternctl stats: %s" % [l for l in t.ctl("stats").splitlines()
                                      if "ratelimit" in l or "blacklist" in l])
        t.reload("")
        expect_answer(query(t.port, "www.diff.test", src="127.0.0.2"),
                      "127.0.0.2 with the ratelimit block gone")
    finally:
        t.stop()


# ---- floods ----------------------------------------------------------------------------------

def wire_query(name, qid):
    q = dns.message.make_query(name, "A", use_edns=0, payload=1232)
    q.id = qid
    return q.to_wire()


class Flood:
    """Paced UDP queries from src over nsock sockets; counts what comes back."""

    def __init__(self, port, src, names, qps, seconds, nsock=4):
        self.port, self.qps, self.seconds = port, qps, seconds
        self.wires = [wire_query(n, i & 0xFFFF) for i, n in enumerate(names)]
        self.socks = []
        for _ in range(nsock):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((src, 0))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            s.connect((servers.LOOPBACK, port))
            s.setblocking(False)
            self.socks.append(s)
        self.sent = self.bytes_out = self.bytes_in = 0
        self.full = self.tc = self.other = 0
        self.rcodes = {}

    def _drain(self):
        for s in self.socks:
            while True:
                try:
                    d = s.recv(65535)
                except (BlockingIOError, ConnectionRefusedError):
                    break
                self.bytes_in += len(d)
                if len(d) < 12:
                    self.other += 1
                    continue
                flags = struct.unpack("!H", d[2:4])[0]
                rc = flags & 0xF
                if flags & 0x0200:
                    self.tc += 1
                else:
                    self.full += 1
                    self.rcodes[rc] = self.rcodes.get(rc, 0) + 1

    def run(self):
        start = time.monotonic()
        end = start + self.seconds
        i = 0
        while True:
            now = time.monotonic()
            if now >= end:
                break
            due = min(int((now - start) * self.qps) - self.sent, 256)
            for _ in range(max(due, 0)):
                w = self.wires[i % len(self.wires)]
                try:
                    self.socks[i % len(self.socks)].send(w)
                    self.sent += 1
                    self.bytes_out += len(w)
                except (BlockingIOError, ConnectionRefusedError):
                    pass
                i += 1
            self._drain()
            if due <= 0:
                time.sleep(0.001)
        self.elapsed = time.monotonic() - start
        drain_end = time.monotonic() + 0.5
        while time.monotonic() < drain_end:
            self._drain()
            time.sleep(0.01)
        for s in self.socks:
            s.close()


def served(client):
    """What a well-behaved client under a flood must see: never a refusal, a truncation or
    another rcode (that would be the limiter's doing), and an answer to all but 1% of its
    questions after three tries a second apart. The 1%: with two workers and the kernel's hash,
    the client can share a socket with the flood, whose receive queue the flood keeps full, so
    a datagram now and then is dropped by the kernel before any limiter sees it (an ASan build
    answers a third as fast, and drops such a one in a few runs of ten)."""
    return client.wrong == 0 and client.unanswered <= max(1, client.asked // 100)


class Steady(threading.Thread):
    """A well-behaved client: one question every 1/qps s from src until stop, asked again after
    a second of silence up to twice, as a resolver does (a packet the kernel dropped while the
    flood had the CPU is not the limiter's doing; a limiter that refused this client would
    refuse the retries too). Counts questions never answered, and first tries that were not."""

    def __init__(self, port, src, qps, name="www.diff.test", cookies=False):
        super().__init__(daemon=True)
        self.port, self.src, self.qps, self.name, self.cookies = port, src, qps, name, cookies
        self.stopping = threading.Event()
        self.asked = self.answered = self.retried = 0
        self.misses = []
        self.max_lag = 0.0   # the furthest behind schedule it fell, in seconds
        self.unanswered = 0  # no answer to any of the three tries
        self.wrong = 0       # an answer, but not a full NOERROR one (REFUSED, TC, ...)
        self.client = os.urandom(8)
        self.server = b""

    def run(self):
        next_at = time.monotonic()
        while not self.stopping.is_set():
            cookie = self.client + self.server if self.cookies else None
            r = query(self.port, self.name, src=self.src, cookie=cookie)
            for _ in range(2):
                if r is not None:
                    break
                self.retried += 1
                r = query(self.port, self.name, src=self.src, cookie=cookie)
            self.asked += 1
            if r is None or r.rcode() != dns.rcode.NOERROR or r.flags & dns.flags.TC:
                if r is None:
                    self.unanswered += 1
                else:
                    self.wrong += 1
                if len(self.misses) < 5:
                    self.misses.append("no answer" if r is None else
                                       "%s%s" % (dns.rcode.to_text(r.rcode()),
                                                 " TC" if r.flags & dns.flags.TC else ""))
            else:
                self.answered += 1
            if self.cookies and r is not None:
                c = cookie_of(r)
                if c and len(c) > 8:
                    self.server = c[8:]
            # behind schedule (the flood's sender held the GIL), it catches up on at most half
            # a second of questions: a backlog sent at once beyond RRL's burst would be this
            # client flooding, and limited rightly (seen once: 1 TC in 328)
            now = time.monotonic()
            self.max_lag = max(self.max_lag, now - next_at)
            next_at = max(next_at + 1.0 / self.qps, now - 0.5)
            delay = next_at - now
            if delay > 0:
                self.stopping.wait(delay)


RRL_RATE = 200
RRL_BURST = 200
# As fast as Python sends (the "full speed"); a ThreadSanitizer build of ternd answers a
# tenth of that, and a server short of CPU drops what it cannot read, the legitimate client's
# packets with the rest: TERN_FLOOD_QPS paces the flood for such builds.
FLOOD_QPS = int(os.environ.get("TERN_FLOOD_QPS", "1000000"))
FLOOD_SECONDS = 3.0


def rrl_yaml():
    return ("rrl:\n  rate: %d\n  burst: %d\n  slip: 2\ncookies:\n  secret: \"%s\"\n"
            % (RRL_RATE, RRL_BURST, SECRET))


def flood_bound(f):
    """At most rate x (time + drain) + burst full answers, with 10% for timer slack."""
    return int((RRL_RATE * (f.elapsed + 0.5) + RRL_BURST) * 1.1) + 2


def check_rrl_flood(args, work):
    t = Tern(work, args, rrl_yaml(), workers=2)
    t.start("diff.test")
    try:
        legit = Steady(t.port, "127.0.1.1", 100)
        cookie = Steady(t.port, "127.0.0.2", 100, cookies=True)
        legit.start()
        cookie.start()
        time.sleep(0.2)
        f = Flood(t.port, "127.0.0.2", ["www.diff.test"], FLOOD_QPS, FLOOD_SECONDS)
        f.run()
        legit.stopping.set()
        cookie.stopping.set()
        legit.join(5)
        cookie.join(5)
        print("  flood: %d sent in %.2f s, %d full answers (bound %d), %d TC, %d/%d bytes in/out;"
              " legit %d/%d (%d retried, %.2f s behind at most), cookie client %d/%d (%d retried)"
              % (f.sent, f.elapsed, f.full, flood_bound(f), f.tc, f.bytes_in, f.bytes_out,
                 legit.answered, legit.asked, legit.retried, legit.max_lag, cookie.answered,
                 cookie.asked, cookie.retried))
        # as fast as Python sends (~150k q/s here); a flood far beyond the limit in any case
        expect(f.sent >= 30 * (RRL_RATE * FLOOD_SECONDS + RRL_BURST),
               "the flood sent only %d" % f.sent)
        expect(f.full <= flood_bound(f), "the flooder got %d full answers, bound %d"
               % (f.full, flood_bound(f)))
        expect(f.full >= RRL_RATE * f.elapsed * 0.5,
               "the flooder got only %d full answers: RRL is stricter than its rate" % f.full)
        limited = f.sent - f.full
        expect(0 < f.tc <= limited // 2 + 2, "%d TC slips for %d limited (slip 2)"
               % (f.tc, limited))
        expect(f.bytes_in <= f.bytes_out, "amplification: %d bytes back for %d sent"
               % (f.bytes_in, f.bytes_out))
        expect(served(legit) and legit.asked >= 20,
               "the client of 127.0.1.1 missed %d of %d: %s"
               % (legit.asked - legit.answered, legit.asked, legit.misses))
        # 20, as for the other client: how many it asks is up to the CPU the flood's sender
        # leaves it (39 with a CPU hog on the other core: seen failing a bound of 50)
        expect(served(cookie) and cookie.asked >= 20,
               "the cookie client of 127.0.0.2 missed %d of %d: %s"
               % (cookie.asked - cookie.answered, cookie.asked, cookie.misses))
        # every question of the cookie client after its first carries the server cookie it
        # learned; how many it asks is up to the GIL the flood's sender holds (20 to 300)
        expect(t.stat("dropped_rrl") > 0 and t.stat("rrl_slipped") > 0 and
               t.stat("cookies_valid") >= min(100, cookie.answered - 1),
               "ternctl stats: dropped_rrl %d rrl_slipped %d cookies_valid %d (the cookie "
               "client had %d answers)" % (t.stat("dropped_rrl"), t.stat("rrl_slipped"),
                                           t.stat("cookies_valid"), cookie.answered))
        deadline = time.monotonic() + 3
        while "rrl: limiting 127.0.0.0/24" not in t.log_text(100000):
            expect(time.monotonic() < deadline, "no log line for the limited prefix:\n%s"
                   % t.log_text())
            time.sleep(0.1)
    finally:
        t.stop()


def check_nxdomain_flood(args, work):
    t = Tern(work, args, rrl_yaml(), workers=2)
    t.start("diff.test")
    try:
        legit = Steady(t.port, "127.0.1.1", 100)
        legit.start()
        rnd = random.Random(7)
        names = ["x%08x.diff.test" % rnd.getrandbits(32) for _ in range(4000)]
        f = Flood(t.port, "127.0.0.2", names, FLOOD_QPS, FLOOD_SECONDS)
        f.run()
        legit.stopping.set()
        legit.join(5)
        print("  nxdomain flood: %d sent, %d full answers %s (bound %d), %d TC; legit %d/%d "
              "(%d retried, %.2f s behind at most)"
              % (f.sent, f.full, f.rcodes, flood_bound(f), f.tc, legit.answered, legit.asked,
                 legit.retried, legit.max_lag))
        expect(f.full <= flood_bound(f), "the flooder got %d NXDOMAIN answers, bound %d"
               % (f.full, flood_bound(f)))
        expect(f.rcodes.get(dns.rcode.NXDOMAIN, 0) == f.full, "rcodes %s" % f.rcodes)
        expect(f.tc > 0 and f.bytes_in <= f.bytes_out, "%d TC, %d/%d bytes in/out"
               % (f.tc, f.bytes_in, f.bytes_out))
        expect(served(legit), "the client of 127.0.1.1 missed %d of %d: %s"
               % (legit.asked - legit.answered, legit.asked, legit.misses))
    finally:
        t.stop()


# ---- cookies ---------------------------------------------------------------------------------

def expect_server_cookie(c, client, what):
    expect(c is not None and len(c) == 24 and c[:8] == client,
           "%s: cookie %s, expected the client's 8 bytes and a 16-byte server cookie"
           % (what, c.hex() if c else None))
    version, ts = c[8], struct.unpack("!I", c[12:16])[0]
    expect(version == 1 and c[9:12] == b"\0\0\0", "%s: server cookie %s is not RFC 9018's "
           "version 1" % (what, c[8:].hex()))
    expect(abs(ts - time.time()) < 300, "%s: timestamp %d is not now" % (what, ts))


def check_cookies(args, work):
    t = Tern(work, args, "cookies:\n  enable: true\n")
    t.start("diff.test")
    try:
        client = os.urandom(8)
        r = query(t.port, "www.diff.test", cookie=client)
        expect_answer(r, "client cookie only")
        c = cookie_of(r)
        expect_server_cookie(c, client, "client cookie only")
        r = query(t.port, "www.diff.test", cookie=c)
        expect_answer(r, "with the server cookie")
        expect_server_cookie(cookie_of(r), client, "with the server cookie")
        expect(cookie_of(query(t.port, "www.diff.test")) is None,
               "a query without a cookie got one")
        for bad, what in ((client[:5], "5 bytes"), (c[:15], "a 7-byte server cookie"),
                          (c + b"x" * 17, "41 bytes")):
            r = query(t.port, "www.diff.test", cookie=bad)
            expect(rcode(r) == dns.rcode.FORMERR, "cookie of %s: %s, expected FORMERR"
                   % (what, rcode(r)))
        r = query(t.port, "www.diff.test", cookie=c,
                  options=[dns.edns.GenericOption(COOKIE, client)])
        expect(rcode(r) == dns.rcode.FORMERR, "two COOKIE options: %s, expected FORMERR"
               % rcode(r))
        expect(t.stat("cookies_valid") == 1, "cookies_valid %d" % t.stat("cookies_valid"))

        t.reload("cookies:\n  enable: true\n  require: true\n")
        r = query(t.port, "www.diff.test")
        expect(r is not None and r.flags & dns.flags.TC and not r.answer,
               "require, no cookie over UDP: %s, expected TC and no answer" % r)
        r = query(t.port, "www.diff.test", cookie=client)
        expect(rcode(r) == BADCOOKIE and not r.answer, "require, client cookie only: %s" % r)
        fresh = cookie_of(r)
        expect_server_cookie(fresh, client, "BADCOOKIE")
        expect_answer(query(t.port, "www.diff.test", cookie=fresh), "require, valid cookie")
        forged = fresh[:-1] + bytes([fresh[-1] ^ 1])
        expect(rcode(query(t.port, "www.diff.test", cookie=forged)) == BADCOOKIE,
               "require, forged server cookie: not BADCOOKIE")
        expect(rcode(query(t.port, "www.diff.test", cookie=fresh, src="127.0.0.9")) == BADCOOKIE,
               "require, the cookie of 127.0.0.1 sent from 127.0.0.9: not BADCOOKIE")
        expect_answer(query(t.port, "www.diff.test", tcp=True), "require, no cookie over TCP")
        dig = servers.find_program("dig")
        if dig:
            out = subprocess.run([dig, "@127.0.0.1", "-p", str(t.port), "www.diff.test", "A",
                                  "+cookie", "+tries=3", "+time=2"], capture_output=True,
                                 text=True, timeout=30).stdout
            expect("status: NOERROR" in out and "192.0.2.80" in out,
                   "dig +cookie with cookies required:\n%s" % out)
        expect(t.stat("badcookie") >= 3, "badcookie %d" % t.stat("badcookie"))
    finally:
        t.stop()


class KnotCookies(servers.Server):
    """Knot with mod-cookies and a fixed secret (the RFC 9018 algorithm it implements)."""

    name = "knot-cookies"

    def command(self):
        d = self.dir
        conf = os.path.join(d, "knot.conf")
        with open(conf, "w") as f:
            f.write(servers.knot_conf_head(d, self.port))
            f.write(f"""mod-cookies:
  - id: shared
    secret: 0x{SECRET}
template:
  - id: default
    storage: "{d}"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
    global-module: mod-cookies/shared
zone:
""")
            for origin, path in self.zones:
                f.write(f'  - domain: "{origin}"\n    file: "{path}"\n')
        return [servers.find_program("knotd"), "-c", conf]


def check_knot_cookies(args, work):
    expect(servers.find_program("knotd"), "knotd is not installed (apt-get install knot)")
    t = Tern(work, args, "cookies:\n  secret: \"%s\"\n" % SECRET)
    k = KnotCookies(work, ZONES)
    t.start("diff.test")
    try:
        # required (so an invalid cookie is BADCOOKIE) once the startup probe, cookieless, is in
        t.reload("cookies:\n  secret: \"%s\"\n  require: true\n" % SECRET)
        k.start("diff.test")
        client = os.urandom(8)
        # Knot answers a client cookie alone over UDP with BADCOOKIE and its own cookie
        r = query(k.port, "www.diff.test", cookie=client)
        expect(rcode(r) == BADCOOKIE, "Knot, client cookie only: %s" % rcode(r))
        kc = cookie_of(r)
        expect_server_cookie(kc, client, "Knot's cookie")
        expect_answer(query(t.port, "www.diff.test", cookie=kc), "tern given Knot's cookie")
        r = query(t.port, "www.diff.test", cookie=client)
        tc = cookie_of(r)
        expect_server_cookie(tc, client, "tern's cookie")
        r = query(k.port, "www.diff.test", cookie=tc)
        expect_answer(r, "Knot given tern's cookie")
        expect(cookie_of(r) == tc, "Knot did not take tern's cookie as valid (it echoes a valid "
               "one): sent %s, got %s" % (tc.hex(), (cookie_of(r) or b"").hex()))
        forged = tc[:-1] + bytes([tc[-1] ^ 0x80])
        expect(rcode(query(k.port, "www.diff.test", cookie=forged)) == BADCOOKIE,
               "Knot took a forged cookie: the comparison above proves nothing")
    finally:
        k.stop()
        t.stop()


# ---- TCP -------------------------------------------------------------------------------------

def tcp_connect(src, port, timeout=2.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(timeout)
    try:
        s.connect((servers.LOOPBACK, port))
    except OSError:
        s.close()
        return None
    return s


def closed(s):
    """Whether the server closed s (EOF or reset), without blocking or consuming data."""
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLERR | select.POLLHUP)
    ev = p.poll(0)
    if not ev:
        return False
    if ev[0][1] & (select.POLLERR | select.POLLHUP):
        return True
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def tcp_query(s, name="www.diff.test"):
    q = dns.message.make_query(name, "A")
    try:
        dns.query.send_tcp(s, q)
        r, _ = dns.query.receive_tcp(s, time.time() + TIMEOUT)
        return r
    except (OSError, EOFError, dns.exception.Timeout):
        return None


def check_tcp_per_client(args, work):
    cap = 16
    t = Tern(work, args, "tcp_max_per_client: %d\ntcp_max_connections: 512\n"
             "tcp_idle_timeout: 30\n" % cap)
    t.start("diff.test")
    held = []
    try:
        start = time.monotonic()
        timeouts = 0
        while len(held) < 2000 and time.monotonic() - start < 20 and timeouts < 5:
            s = tcp_connect("127.0.0.2", t.port)
            if s is None:
                timeouts += 1
                continue
            held.append(s)
        time.sleep(0.5)
        open_now = [s for s in held if not closed(s)]
        print("  %d connections opened from 127.0.0.2 in %.1f s, %d still open"
              % (len(held), time.monotonic() - start, len(open_now)))
        expect(len(held) >= 1000, "only %d connections could be opened" % len(held))
        expect(len(open_now) <= cap, "127.0.0.2 holds %d connections, cap %d"
               % (len(open_now), cap))
        expect(len(open_now) == cap, "127.0.0.2 holds %d connections: the cap %d should "
               "still let it have that many" % (len(open_now), cap))
        # keep reconnecting from 127.0.0.2 while 127.0.0.3 opens ten and asks on each
        stop = threading.Event()

        def churn():
            end = time.monotonic() + 5
            while not stop.is_set() and time.monotonic() < end:
                s = tcp_connect("127.0.0.2", t.port, 0.5)
                if s is not None:
                    s.close()

        th = threading.Thread(target=churn, daemon=True)
        th.start()
        try:
            for i in range(10):
                s = tcp_connect("127.0.0.3", t.port)
                expect(s is not None, "127.0.0.3 could not connect (%d)" % i)
                held.append(s)
                expect_answer(tcp_query(s), "127.0.0.3 TCP query %d" % i)
            for s in held[-10:]:
                expect_answer(tcp_query(s), "127.0.0.3 again on a held connection")
        finally:
            stop.set()
            th.join(10)
        expect(t.stat("tcp_client_capped") >= len(held) - 10 - cap,
               "tcp_client_capped %d" % t.stat("tcp_client_capped"))
    finally:
        for s in held:
            s.close()
        t.stop()


def check_tcp_evict(args, work):
    pool = 20
    t = Tern(work, args, "tcp_max_per_client: 0\ntcp_max_connections: %d\n"
             "tcp_idle_timeout: 30\n" % pool)
    t.start("diff.test")
    held = []
    try:
        for _ in range(pool):
            s = tcp_connect("127.0.0.2", t.port)
            expect(s is not None, "could not fill the pool")
            held.append(s)
        # every held connection is idle (connected, silent): a newcomer takes one's slot at
        # once, however fresh they are
        s = tcp_connect("127.0.0.3", t.port)
        expect(s is not None, "127.0.0.3 could not connect")
        held.append(s)
        expect_answer(tcp_query(s), "127.0.0.3 in a pool full of idle connections")
        time.sleep(0.2)
        gone = sum(closed(h) for h in held[:pool])
        expect(gone == 1, "%d held connections closed, expected the one evicted" % gone)
        expect(t.stat("tcp_evicted") == 1, "tcp_evicted %d" % t.stat("tcp_evicted"))
    finally:
        for s in held:
            s.close()
        t.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--ternctl", default=os.environ.get("TERNCTL"))
    ap.add_argument("--only", help="run only this check")
    args = ap.parse_args()
    if not args.ternd or not args.ternctl:
        ap.error("--ternd and --ternctl are required")
    checks = [("acl", check_acl), ("ratelimit", check_ratelimit),
              ("rrl_flood", check_rrl_flood), ("nxdomain_flood", check_nxdomain_flood),
              ("cookies", check_cookies), ("knot_cookies", check_knot_cookies),
              ("tcp_per_client", check_tcp_per_client), ("tcp_evict", check_tcp_evict)]
    work = tempfile.mkdtemp(prefix="tern-limit-")
    results = []
    try:
        for name, fn in checks:
            if args.only and name != args.only:
                continue
            d = os.path.join(work, name)
            os.makedirs(d)
            run_check(results, name, lambda: fn(args, d))
        return servers.report(results)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
