#!/usr/bin/python3
"""ANAME end to end: steered in-zone targets, out-of-zone targets from a real upstream, Redis.

One ternd serves test_geo's steered zone (geo.test., MaxMind fixtures from
tests/data/make_mmdb.pl), a redins JSON zone apex.test. and a zone file file.test. whose owners
have ANAMEs (JSON "aname": {"location"}, zone-file ANAME and ALIAS), and a Redis zone in redins'
layout (a real redis-server). A real Knot on loopback serves up.test. and is tern's upstream
(aname.upstreams in ternd.yaml). Checks (dnspython):

  - in-zone: the apex's A/AAAA is the steered label's answer for each client country (ECS),
    owned by the apex, with the ECS scope of that decision; MX/NS at the apex are its own;
    qtype ANAME (65305) answers the record itself; a zone-file ALIAS follows an in-zone CNAME;
  - out-of-zone: the owner answers the address Knot serves; after the target changes in Knot
    (file edited, knotc zone-reload) tern follows within the TTL; a type the target lacks is
    NODATA; a target no upstream answers stays SERVFAIL; Knot stopped: the last answer keeps
    being served; Knot started again with another address: tern follows;
  - Redis: the same apex data from Redis in redins' layout gives the steered answers; a label
    with an out-of-zone ANAME added by HSET and named on the change channel (a patched zone
    version) answers its target's address.

With --restart it runs the start-up checks instead, against Knot behind a relay that holds
every answer for SLOW_S (a slow upstream), with systemd's NOTIFY_SOCKET and STATE_DIRECTORY:

  - READY=1 comes only once the out-of-zone owner answers: the query sent right after it gets
    NOERROR with the address, not SERVFAIL;
  - ternd keeps the last good answer in $STATE_DIRECTORY/aname.state; restarted with the
    upstream (Knot and relay) gone, the owner still answers it;
  - a state file that is cut short is logged with its name and line and ignored (no crash).

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded; only the processes started here are stopped.

    test_aname.py --ternd build/ternd [--restart]
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import dns.edns
import dns.exception
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
import test_geo  # noqa: E402  (the steered zone, its client and its checks)
from servers import LOOPBACK, Failure, Knot, Ternd, expect, run_check  # noqa: E402

TIMEOUT = 2.0
UP_TTL = 2  # seconds: the upstream's TTL, so a change shows within a few of them
AU, GB, SE = ("1.2.3.0", 24), ("81.2.69.128", 26), ("2a02:1234:5678::", 48)


def apex_json():
    soa = {"ttl": 300, "ns": "ns1.apex.test.", "MBox": "hostmaster.apex.test.", "refresh": 3600,
           "retry": 600, "expire": 86400, "minttl": 60, "serial": 1}
    return {"config": {"soa": soa}, "records": {
        "@": {"aname": {"location": "country.geo.test."},
              "ns": {"ttl": 3600, "records": [{"host": "ns1.apex.test."}]},
              "mx": {"ttl": 300, "records": [{"host": "mail.apex.test.", "preference": 10}]}},
        "ns1": {"a": {"ttl": 3600, "records": [{"ip": "192.0.2.53"}]}},
        "mail": {"a": {"ttl": 300, "records": [{"ip": "192.0.2.25"}]}},
        "cdn": {"aname": {"location": "target.up.test."}},
        "never": {"aname": {"location": "x.unserved.test."}},
    }}


FILE_ZONE = """$ORIGIN file.test.
$TTL 300
@ SOA ns1.file.test. h.file.test. 1 7200 3600 1209600 60
@ NS ns1.file.test.
ns1 A 192.0.2.53
@ ALIAS alias.geo.test.
www ANAME target.up.test.
"""


def up_zone(serial, addr):
    return """$ORIGIN up.test.
$TTL %d
@ SOA ns.up.test. h.up.test. %d 60 60 600 %d
@ NS ns.up.test.
ns A 192.0.2.200
target A %s
""" % (UP_TTL, serial, UP_TTL, addr)


def ask(port, name, rtype, ecs=None):
    opts = []
    if ecs is not None:
        opts.append(dns.edns.ECSOption(ecs[0], ecs[1]))
    q = dns.message.make_query(name, rtype, use_edns=0, options=opts)
    return dns.query.udp(q, LOOPBACK, port=port, timeout=TIMEOUT)


def addrs_of(r):
    out = []
    for rrset in r.answer:
        if rrset.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
            out.extend(rd.address for rd in rrset)
    return out


def check_owner(r, owner):
    for rrset in r.answer:
        expect(rrset.name.to_text().lower() == owner,
               "answer owned by %s, want %s" % (rrset.name, owner))


def wait_answer(port, name, rtype, want, timeout):
    """Poll (every 100 ms) until name answers exactly the addresses want; the last response."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = ask(port, name, rtype)
            if last.rcode() == dns.rcode.NOERROR and addrs_of(last) == want:
                return last
        except dns.exception.Timeout:
            pass
        time.sleep(0.1)
    raise Failure("%s %s: want %s within %.0f s, last %s" % (
        name, rtype, want, timeout, last and (dns.rcode.to_text(last.rcode()), addrs_of(last))))


def in_zone_checks(port, results, origin="apex.test."):
    c = test_geo.Client(port)

    def steered(ecs, want, scope, rtype="A"):
        test_geo.check_pick(c, origin, ecs, want, scope, rtype)
        check_owner(ask(port, origin, rtype, ecs), origin)

    run_check(results, "%s A from AU: the target's AU answer, scope /24" % origin,
              lambda: steered(AU, ["192.0.2.1"], 24))
    run_check(results, "%s A from GB: scope /26" % origin,
              lambda: steered(GB, ["192.0.2.2"], 26))
    run_check(results, "%s A without ECS: the fallback" % origin,
              lambda: steered(None, ["192.0.2.3"], 0))
    run_check(results, "%s AAAA from SE (IPv6 client): scope /32" % origin,
              lambda: steered(SE, ["2001:db8::1"], 32, "AAAA"))


SLOW_S = 1.0  # the relay holds each answer this long: longer than ternd's start-up takes
NOTIFY_WAIT = 20.0  # seconds for READY=1 (ternd holds it at most aname.ready_wait, 5 s)


class SlowRelay:
    """A UDP relay on loopback that passes each query to a real server (Knot) and its answer
    back SLOW_S later: a slow upstream. A thread per query, each bounded by its timeouts."""

    def __init__(self, target_port):
        self.target = (LOOPBACK, target_port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((LOOPBACK, 0))
        self.port = self.sock.getsockname()[1]
        self.sock.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.running:
            try:
                data, peer = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._relay, args=(data, peer), daemon=True).start()

    def _relay(self, data, peer):
        time.sleep(SLOW_S)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(2.0)
            try:
                s.sendto(data, self.target)
                answer = s.recv(65535)
                if self.running:
                    self.sock.sendto(answer, peer)
            except OSError:
                pass

    def stop(self):
        self.running = False
        self.thread.join(timeout=5)
        self.sock.close()


class NotifiedTernd:
    """ternd (servers.Ternd's config) run with NOTIFY_SOCKET at our datagram socket and
    STATE_DIRECTORY at state_dir, as systemd's Type=notify and StateDirectory= would."""

    def __init__(self, tern, state_dir, tag):
        self.tern = tern
        self.sock_path = os.path.join(tern.dir, "notify-%s.sock" % tag)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.sock_path)
        env = dict(os.environ, NOTIFY_SOCKET=self.sock_path, STATE_DIRECTORY=state_dir)
        tern._log = open(tern.log_path, "ab")
        tern.proc = subprocess.Popen(tern.command(), env=env, stdout=tern._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=tern.dir)

    def wait_ready(self):
        """Read notifications until READY=1 (bounded); the monotonic time it came."""
        deadline = time.monotonic() + NOTIFY_WAIT
        while time.monotonic() < deadline:
            if self.tern.proc.poll() is not None:
                raise Failure("ternd exited with %s:\n%s"
                              % (self.tern.proc.returncode, self.tern.log_text()))
            self.sock.settimeout(max(0.1, min(1.0, deadline - time.monotonic())))
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            if b"READY=1" in data.split(b"\n"):
                return time.monotonic()
        raise Failure("no READY=1 within %.0f s:\n%s" % (NOTIFY_WAIT, self.tern.log_text()))

    def stop(self):
        self.tern.stop()
        self.sock.close()


def wait_file(path, text, timeout):
    """Poll until path exists and holds text (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                if text in f.read():
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise Failure("%s does not hold %r within %.0f s" % (path, text, timeout))


def restart_checks(args, work, data):
    """READY after the first round, and the state file across a restart (see the docstring)."""
    results = []
    upz = os.path.join(data, "up.test.zone")
    with open(upz, "w") as f:
        f.write(up_zone(1, "198.51.100.1"))
    fzone = os.path.join(data, "file.test.zone")
    with open(fzone, "w") as f:
        f.write(FILE_ZONE.replace("@ ALIAS alias.geo.test.\n", ""))  # one target only
    state_dir = os.path.join(work, "state")
    os.makedirs(state_dir)
    state = os.path.join(state_dir, "aname.state")
    knot = Knot(work, [("up.test.", upz)], "knot", "knot")
    relay = run = None
    try:
        knot.start("up.test.")
        relay = SlowRelay(knot.port)
        # the timeout well above the relay's delay: every query of the first round is answered
        extra = ('control_socket: ctl.sock\naname:\n  upstreams:\n    - address: %s\n'
                 '      port: %d\n      timeout: 3000\n' % (LOOPBACK, relay.port))
        tern = Ternd(work, [("file.test.", fzone)], args.ternd, extra_yaml=extra)
        ctl = os.path.join(tern.dir, "ctl.sock")
        ternctl = os.path.join(os.path.dirname(os.path.abspath(args.ternd)), "ternctl")

        def ready_after_round():
            nonlocal run
            t0 = time.monotonic()
            run = NotifiedTernd(tern, state_dir, "1")
            # a reload asked for while READY waits (the relay holds the round's answers) ends
            # long before the round: it must not say READY=1 for the start
            deadline = time.monotonic() + 5
            while not os.path.exists(ctl) and time.monotonic() < deadline:
                time.sleep(0.02)
            out = subprocess.run([ternctl, "-s", ctl, "reload"], capture_output=True, text=True,
                                 timeout=30)
            expect(out.returncode == 0, "ternctl reload while READY waits: exit %d %s%s"
                   % (out.returncode, out.stdout, out.stderr))
            print("  (READY=1 %.1f s after start, the relay holding answers %.1f s)"
                  % (run.wait_ready() - t0, SLOW_S))
            r = ask(tern.port, "www.file.test.", "A")
            expect(r.rcode() == dns.rcode.NOERROR and addrs_of(r) == ["198.51.100.1"],
                   "right after READY=1: %s %s (want NOERROR 198.51.100.1)"
                   % (dns.rcode.to_text(r.rcode()), addrs_of(r)))
            expect(" ready: " in tern.log_text(), "no \"ready\" log line")

        run_check(results, "READY=1 after the first ANAME round, a reload in between",
                  ready_after_round)

        def saved_and_restarted():
            nonlocal run
            wait_file(state, "198.51.100.1", 10)
            run.stop()
            relay.stop()
            knot.stop()
            t0 = time.monotonic()
            run = NotifiedTernd(tern, state_dir, "2")
            print("  (READY=1 %.1f s after a start with the upstream down)"
                  % (run.wait_ready() - t0))
            r = ask(tern.port, "www.file.test.", "A")
            expect(r.rcode() == dns.rcode.NOERROR and addrs_of(r) == ["198.51.100.1"],
                   "restarted with the upstream down: %s %s (want the saved 198.51.100.1)"
                   % (dns.rcode.to_text(r.rcode()), addrs_of(r)))

        run_check(results, "restart, upstream down: the saved answer", saved_and_restarted)

        def truncated_file():
            nonlocal run
            run.stop()
            with open(state) as f:
                text = f.read()
            with open(state, "w") as f:
                f.write(text[:text.index("\nend ") + 1])  # the end line lost
            run = NotifiedTernd(tern, state_dir, "3")
            run.wait_ready()
            r = ask(tern.port, "www.file.test.", "A")
            expect(r.rcode() == dns.rcode.SERVFAIL, "a truncated file's answer is served: %s"
                   % dns.rcode.to_text(r.rcode()))
            expect(state + ": line " in tern.log_text(), "no log line naming the file and line")

        run_check(results, "a truncated state file: logged and ignored", truncated_file)
        if run is not None:
            run.stop()
        return servers.finish(tern, results)
    finally:
        if run is not None:
            run.stop()
        if relay is not None:
            relay.stop()
        knot.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--restart", action="store_true",
                    help="only the start-up checks: READY after the first round, the state file")
    args = ap.parse_args()
    if not args.ternd:
        ap.error("--ternd is required")
    if args.restart:
        work = tempfile.mkdtemp(prefix="tern-aname-restart-")
        try:
            data = os.path.join(work, "data")
            os.makedirs(data)
            return restart_checks(args, work, data)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    work = tempfile.mkdtemp(prefix="tern-aname-")
    tern = knot = redis = None
    results = []
    try:
        data = os.path.join(work, "data")
        os.makedirs(data)
        subprocess.run(["perl", servers.MAKE_MMDB, data], check=True, timeout=60)
        geo = os.path.join(data, "geo.json")
        with open(geo, "w") as f:
            json.dump(test_geo.zone_json(), f)
        apex = os.path.join(data, "apex.json")
        with open(apex, "w") as f:
            json.dump(apex_json(), f)
        fzone = os.path.join(data, "file.test.zone")
        with open(fzone, "w") as f:
            f.write(FILE_ZONE)
        upz = os.path.join(data, "up.test.zone")
        with open(upz, "w") as f:
            f.write(up_zone(1, "198.51.100.1"))
        knot = Knot(work, [("up.test.", upz)], "knot", "knot")
        knot.start("up.test.")
        redis = servers.Redis(work)
        redis.start()
        extra = ('geoip_db: "%s"\n'
                 'aname:\n  upstreams:\n    - address: %s\n      port: %d\n      timeout: 300\n'
                 'redis:\n  address: "%s:%d"\n  zone_reload: 600\n  connect_timeout: 500\n'
                 % (os.path.join(data, "nested6.mmdb"), LOOPBACK, knot.port, LOOPBACK,
                    redis.port))
        tern = Ternd(work, [("geo.test.", geo), ("apex.test.", apex), ("file.test.", fzone)],
                     args.ternd, extra_yaml=extra)
        tern.start("apex.test.")
        port = tern.port

        in_zone_checks(port, results)

        def own_data():
            r = ask(port, "apex.test.", "MX")
            expect(r.rcode() == dns.rcode.NOERROR and len(r.answer) == 1 and
                   r.answer[0].rdtype == dns.rdatatype.MX, "MX at the apex: %s" % r)
            r = ask(port, "apex.test.", "TYPE65305")
            expect(len(r.answer) == 1 and r.answer[0].rdtype == 65305,
                   "qtype ANAME: %s" % r.answer)

        run_check(results, "apex MX and qtype ANAME: the owner's own data", own_data)
        run_check(results, "zone-file ALIAS at the apex through an in-zone CNAME",
                  lambda: test_geo.check_pick(test_geo.Client(port), "file.test.", AU,
                                              ["192.0.2.1"], 24))

        def first():
            wait_answer(port, "cdn.apex.test.", "A", ["198.51.100.1"], 5)
            r = wait_answer(port, "www.file.test.", "A", ["198.51.100.1"], 5)
            check_owner(r, "www.file.test.")
            expect(r.answer[0].ttl <= UP_TTL, "TTL %d above the target's %d"
                   % (r.answer[0].ttl, UP_TTL))

        run_check(results, "out of zone: the upstream's address", first)

        def nodata():
            r = ask(port, "cdn.apex.test.", "AAAA")
            expect(r.rcode() == dns.rcode.NOERROR and not r.answer and r.authority,
                   "AAAA the target lacks: %s" % r)

        run_check(results, "out of zone: a type the target lacks is NODATA", nodata)

        def never():
            r = ask(port, "never.apex.test.", "A")
            expect(r.rcode() == dns.rcode.SERVFAIL, "unanswered target: %s"
                   % dns.rcode.to_text(r.rcode()))

        run_check(results, "out of zone: a target no upstream answers is SERVFAIL", never)

        def follows_change():
            with open(upz, "w") as f:
                f.write(up_zone(2, "198.51.100.2"))
            subprocess.run([servers.find_program("knotc"), "-s",
                            os.path.join(knot.dir, "knot.sock"), "zone-reload", "up.test."],
                           check=True, timeout=10, capture_output=True)
            t0 = time.monotonic()
            wait_answer(port, "cdn.apex.test.", "A", ["198.51.100.2"], 3 * UP_TTL + 3)
            print("  (followed the change in %.1f s)" % (time.monotonic() - t0))

        run_check(results, "out of zone: a change upstream is followed within the TTL",
                  follows_change)

        def upstream_down():
            knot.stop()
            time.sleep(3 * UP_TTL)  # several refreshes fail
            r = ask(port, "cdn.apex.test.", "A")
            expect(r.rcode() == dns.rcode.NOERROR and addrs_of(r) == ["198.51.100.2"],
                   "upstream stopped: %s %s" % (dns.rcode.to_text(r.rcode()), addrs_of(r)))
            expect("aname" in tern.log_text(), "no log line about the failing upstream")

        run_check(results, "upstream stopped: the last answer stays", upstream_down)

        def upstream_back():
            with open(upz, "w") as f:
                f.write(up_zone(3, "198.51.100.3"))
            knot.start("up.test.")  # same port, same config
            wait_answer(port, "cdn.apex.test.", "A", ["198.51.100.3"], 30 + 3 * UP_TTL)

        run_check(results, "upstream back: changes flow again", upstream_back)

        def from_redis():
            recs = apex_json()["records"]
            soa = dict(apex_json()["config"]["soa"], ns="ns1.redapex.test.")
            redis.put_zone("redapex.test.", {
                "@": {"aname": recs["@"]["aname"],
                      "ns": {"ttl": 3600, "records": [{"host": "ns1.redapex.test."}]}},
                "ns1": recs["ns1"]}, soa)
            deadline = time.monotonic() + 5
            while ask(port, "redapex.test.", "SOA").rcode() != dns.rcode.NOERROR:
                if time.monotonic() > deadline:
                    raise Failure("the Redis zone is not served within 5 s")
                time.sleep(0.1)
            sub = []
            in_zone_checks(port, sub, "redapex.test.")
            bad = [err for _, err in sub if err]
            expect(not bad, "; ".join(bad))

        run_check(results, "Redis (redins layout): the steered apex", from_redis)

        def redis_patch():
            # a label named on the change channel is patched in; its target is new to the resolver
            redis.cmd("HSET", "redins:zones:redapex.test.", "cdn",
                      json.dumps({"aname": {"location": "target.up.test."}}))
            redis.cmd("PUBLISH", "redins:zones:changed", "redapex.test. cdn")
            wait_answer(port, "cdn.redapex.test.", "A", ["198.51.100.3"], 10)

        run_check(results, "Redis label patch: a new ANAME label follows its target", redis_patch)

        tern.stop()
        return servers.finish(tern, results)
    finally:
        for p in (tern, knot, redis):
            if p is not None:
                p.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
