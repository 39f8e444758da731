#!/usr/bin/python3
"""ternctl against the real ternd over its control socket, and ternctl's offline checks.

Offline (no server):
  offline_check_config       check-config: a good config prints "OK: N zones, M records" (exit
                             0); an unknown key and a zone syntax error print file:line (exit 1)
  offline_check_zone         check-zone: serial and records (exit 0); a syntax error, file:line;
                             a missing file (exit 1)
  offline_cli                --version, --help (names the default socket), bad usage (exit 2),
                             no server at the socket (exit 2, the message names the path), a
                             config without control_socket (exit 2)
  offline_dnssec             dnssec keygen (algorithms 13, 15 and 8) into a temporary directory:
                             a KSK and a ZSK stem on stdout, both files of each (the .private
                             mode 0600), the ternd.yaml hint; dnssec ds on those files prints the
                             KSK's DS only (--all: both), each line what `dnssec-dsfromkey -2`
                             prints; bad usage (exit 2), a missing key file (exit 1, named)

Against one ternd (two workers, control_socket: in its YAML config), in order:
  socket_mode                the socket file exists with mode 0660
  status                     exit 0; version, workers, the zone with its serial and records;
                             -c CONFIG finds the same socket
  zone                       zone ctl.test / CTL.TEST. show its serial; an unknown zone exits 1
                             with "not served"
  stats                      non-zero query counters (UDP and TCP, by qtype and rcode) after
                             dnspython queries
  reload_ok                  a new serial + ternctl reload: exit 0, "1 changed", the new serial in
                             status and in DNS answers
  reload_failed              a zone with a syntax error + ternctl reload: exit 1 naming
                             file:line, the old serial still in status and DNS; fixed, exit 0
  unknown_command            ternctl rejects it (exit 2); the server rejects a raw one ("error:")
  dnssec_ds_online           dnssec ds ZONE asks ternd: the unsigned zone exits 1 with "not
                             signed", an unknown zone with "not served"
  second_ternd_refused       a second ternd with the same control_socket exits non-zero saying
                             so; the first still answers ternctl
  socket_removed_on_exit     SIGTERM: ternd exits 0 and removes the socket file
  stale_socket_replaced      a stale socket file (nobody listening) at the path: ternd starts,
                             replaces it, ternctl status works

Every ternd is stopped with SIGTERM by its pid (SIGKILL if it does not go); a sanitizer report in
any output fails the test. Prints one line per check and "N passed, N failed"; exits 1 on any
failure.

    test_ctl.py --ternd build/ternd --ternctl build/ternctl
"""

import argparse
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import traceback

import dns.exception
import dns.message
import dns.query
import dns.rcode

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

Failure = servers.Failure
expect = servers.expect
write_atomic = servers.write_atomic

ZONE = "ctl.test"
SERIAL0 = 2026112300
BAD_LINE = 7              # the line of the syntax error in a broken zone (see zone_text)
RECORDS = 6               # records of zone_text()'s zone
QUERY_TIMEOUT = 1.0       # one dnspython query
RUN_TIMEOUT = 30.0        # one ternctl run (a reload of a tiny zone, an RSA-1024 key: milliseconds)
SOCKET_TIMEOUT = 10.0     # from ternd answering DNS until its control socket must be there
EXIT_TIMEOUT = 5.0        # from SIGTERM until ternd must have exited

SANITIZER = re.compile(r"ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:")








def zone_text(serial, broken=False):
    lines = [
        "$ORIGIN %s." % ZONE,                                   # 1
        "$TTL 60",                                              # 2
        "@ IN SOA ns1 hostmaster %d 3600 600 86400 60" % serial,  # 3
        "@ IN NS ns1",                                          # 4
        "ns1 IN A 192.0.2.1",                                   # 5
        "www IN A 192.0.2.10",                                  # 6
    ]
    if broken:
        lines.append("bad IN A 300.1.2.3")                     # 7 = BAD_LINE
    lines += ["mail IN A 192.0.2.25", 'txt IN TXT "hello"']
    return "\n".join(lines) + "\n"


# --- running ternctl

class Result:
    def __init__(self, argv, proc):
        self.argv = argv
        self.rc = proc.returncode
        self.out = proc.stdout.decode("utf-8", "replace")
        self.err = proc.stderr.decode("utf-8", "replace")

    def __str__(self):
        return "ternctl %s: exit %s\n--- stdout ---\n%s--- stderr ---\n%s" % (
            " ".join(self.argv), self.rc, self.out, self.err)

    def value(self, key):
        """The value of the first "key: value" line on stdout, or None."""
        m = re.search(r"^%s: (.*)$" % re.escape(key), self.out, re.M)
        return m.group(1) if m else None


def ternctl(ctx, *argv):
    """Run ternctl (bounded); a sanitizer report on its stderr is a failure."""
    try:
        p = subprocess.run([ctx.ternctl] + list(argv), stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failure("ternctl %s did not exit within %.0f s" % (" ".join(argv), RUN_TIMEOUT))
    r = Result(argv, p)
    expect(not SANITIZER.search(r.err), "sanitizer report from %s" % r)
    return r


def expect_rc(r, rc):
    expect(r.rc == rc, "want exit %d from %s" % (rc, r))


# --- DNS

def query(port, name, qtype, tcp=False):
    q = dns.message.make_query(name, qtype)
    if tcp:
        return dns.query.tcp(q, servers.LOOPBACK, port=port, timeout=QUERY_TIMEOUT)
    return dns.query.udp(q, servers.LOOPBACK, port=port, timeout=QUERY_TIMEOUT)


def served_serial(port):
    try:
        r = query(port, ZONE, "SOA")
    except (dns.exception.Timeout, OSError) as e:
        raise Failure("SOA %s: no answer (%s: %s)" % (ZONE, type(e).__name__, e))
    expect(r.rcode() == dns.rcode.NOERROR and r.answer, "no SOA answer for %s" % ZONE)
    return r.answer[0][0].serial


# --- ternd with a control socket

class Tern:
    """One ternd with control_socket set; stop() checks that it ended cleanly."""

    def __init__(self, ctx, name, sock):
        self.ctx = ctx
        self.sock = sock
        workdir = os.path.join(ctx.workdir, name)
        os.makedirs(workdir, exist_ok=True)
        self.t = servers.Ternd(workdir, [(ZONE, ctx.zone_path)], ctx.ternd, workers=2,
                               extra_yaml='control_socket: "%s"\n' % sock)
        self.config = os.path.join(self.t.dir, "ternd.yaml")
        ctx.started.append(self)

    @property
    def port(self):
        return self.t.port

    def start(self):
        """Start, wait for DNS answers, then (bounded) for the control socket."""
        self.t.start(ZONE)
        deadline = time.monotonic() + SOCKET_TIMEOUT
        while not os.path.exists(self.sock):
            expect(self.t.proc.poll() is None, "ternd exited (%s):\n%s"
                   % (self.t.proc.returncode, self.t.log_text()))
            expect(time.monotonic() < deadline,
                   "ternd answers DNS but created no control socket at %s within %.0f s "
                   "(control_socket in the config is not served: is ctl wired into main.c?)\n%s"
                   % (self.sock, SOCKET_TIMEOUT, self.t.log_text()))
            time.sleep(0.05)

    def alive(self):
        return self.t.proc is not None and self.t.proc.poll() is None

    def stop(self):
        """SIGTERM (SIGKILL after EXIT_TIMEOUT); returns the exit status (None if never run)."""
        if self.t.proc is None:
            return None
        self.t.stop()
        return self.t.proc.returncode

    def log_text(self, limit=4000):
        return self.t.log_text(limit)


# --- offline checks

def check_offline_check_config(ctx):
    d = os.path.join(ctx.workdir, "offline")
    os.makedirs(d, exist_ok=True)
    good_zone = os.path.join(d, "good.zone")
    bad_zone = os.path.join(d, "bad.zone")
    write_atomic(good_zone, zone_text(SERIAL0))
    write_atomic(bad_zone, zone_text(SERIAL0, broken=True))
    # a relative zone path is resolved against the config's directory
    good = os.path.join(d, "good.yaml")
    write_atomic(good, 'zones:\n  - origin: "%s"\n    file: "good.zone"\n'
                 '  - origin: "other.test"\n    file: "%s"\n'
                 % (ZONE, os.path.join(d, "other.zone")))
    write_atomic(os.path.join(d, "other.zone"),
                 zone_text(SERIAL0).replace(ZONE, "other.test"))
    r = ternctl(ctx, "check-config", good)
    expect_rc(r, 0)
    expect("OK: 2 zones, %d records" % (2 * RECORDS) in r.out, "want 'OK: 2 zones, %d records' "
           "in %s" % (2 * RECORDS, r))

    unknown = os.path.join(d, "unknown.yaml")
    write_atomic(unknown, 'workers: 1\nbogus_key: 1\n')
    r = ternctl(ctx, "check-config", unknown)
    expect_rc(r, 1)
    expect(re.search(re.escape(unknown) + r":2\b", r.err) and "bogus_key" in r.err,
           "want %s:2 and the key named in %s" % (unknown, r))

    badz = os.path.join(d, "badzone.yaml")
    write_atomic(badz, 'zones:\n  - origin: "%s"\n    file: "bad.zone"\n' % ZONE)
    r = ternctl(ctx, "check-config", badz)
    expect_rc(r, 1)
    expect(re.search(r"bad\.zone:(%d|%d)\b" % (BAD_LINE, BAD_LINE + 1), r.err),
           "want bad.zone:%d in %s" % (BAD_LINE, r))

    r = ternctl(ctx, "check-config", os.path.join(d, "missing.yaml"))
    expect_rc(r, 1)
    expect("missing.yaml" in r.err, "want the missing file named in %s" % r)


def check_offline_check_zone(ctx):
    d = os.path.join(ctx.workdir, "offline")
    os.makedirs(d, exist_ok=True)
    good = os.path.join(d, "z-good.zone")
    bad = os.path.join(d, "z-bad.zone")
    write_atomic(good, zone_text(SERIAL0 + 5))
    write_atomic(bad, zone_text(SERIAL0, broken=True))
    r = ternctl(ctx, "check-zone", ZONE, good)
    expect_rc(r, 0)
    expect("serial %d" % (SERIAL0 + 5) in r.out and "%d records" % RECORDS in r.out,
           "want the serial and record count in %s" % r)
    r = ternctl(ctx, "check-zone", ZONE + ".", bad)
    expect_rc(r, 1)
    expect(re.search(re.escape(bad) + r":(%d|%d)\b" % (BAD_LINE, BAD_LINE + 1), r.err),
           "want %s:%d in %s" % (bad, BAD_LINE, r))
    r = ternctl(ctx, "check-zone", ZONE, os.path.join(d, "nope.zone"))
    expect_rc(r, 1)
    expect("nope.zone" in r.err, "want the missing file named in %s" % r)
    r = ternctl(ctx, "check-zone", ZONE)
    expect_rc(r, 2)


def check_offline_cli(ctx):
    r = ternctl(ctx, "--version")
    expect_rc(r, 0)
    expect(r.out.startswith("ternctl "), "want 'ternctl VERSION' from %s" % r)
    r = ternctl(ctx, "--help")
    expect_rc(r, 0)
    for word in ("reload", "status", "stats", "zone", "check-config", "check-zone",
                 "/run/tern/ternd.sock"):
        expect(word in r.out, "--help does not mention %s:\n%s" % (word, r.out))
    for argv in ((), ("frobnicate",), ("status", "extra"), ("zone",), ("zone", "a b"),
                 ("-t", "0", "status")):
        r = ternctl(ctx, *argv)
        expect_rc(r, 2)
    nowhere = os.path.join(ctx.workdir, "nobody.sock")
    r = ternctl(ctx, "-s", nowhere, "status")
    expect_rc(r, 2)
    expect(nowhere in r.err and "connect" in r.err, "want the path in %s" % r)
    conf = os.path.join(ctx.workdir, "nosock.yaml")
    write_atomic(conf, "workers: 1\n")
    r = ternctl(ctx, "-c", conf, "status")
    expect_rc(r, 2)
    expect("control_socket" in r.err, "want 'control_socket' named in %s" % r)


def dsfromkey(path):
    """`dnssec-dsfromkey -2 path` (BIND's text of the SHA-256 DS), the oracle of dnssec ds."""
    prog = servers.find_program("dnssec-dsfromkey")
    expect(prog, "dnssec-dsfromkey not found (Debian package bind9-utils): it checks dnssec ds")
    p = subprocess.run([prog, "-2", path], capture_output=True, timeout=RUN_TIMEOUT)
    expect(p.returncode == 0, "dnssec-dsfromkey -2 %s: exit %d: %s"
           % (path, p.returncode, p.stderr.decode("utf-8", "replace")))
    return p.stdout.decode("utf-8", "replace").strip()


def check_offline_dnssec(ctx):
    for alg, extra in (("13", []), ("15", []), ("8", ["-b", "1024"])):
        d = os.path.join(ctx.workdir, "keys-%s" % alg)
        os.makedirs(d)
        r = ternctl(ctx, "dnssec", "keygen", ZONE, "-a", alg, "-d", d, *extra)
        expect_rc(r, 0)
        stems = r.out.split()
        expect(len(stems) == 2, "want two stems on stdout from %s" % r)
        for stem in stems:
            expect(re.fullmatch(re.escape(d) + r"/K%s\.\+%03d\+\d{5}" % (re.escape(ZONE), int(alg)),
                                stem), "stem %r is not %s/K%s.+%03d+TAG in %s"
                   % (stem, d, ZONE, int(alg), r))
            for ext in (".key", ".private"):
                expect(os.path.isfile(stem + ext), "%s%s was not written (%s)" % (stem, ext, r))
            mode = stat.S_IMODE(os.stat(stem + ".private").st_mode)
            expect(mode == 0o600, "%s.private has mode %o, want 600" % (stem, mode))
            expect(os.path.basename(stem) in r.err, "the hint does not name %s: %s" % (stem, r))
        expect("dnssec: {keys: [" in r.err, "want the ternd.yaml hint on stderr in %s" % r)
        ksk, zsk = stems
        expect(stems[0] != stems[1], "the KSK and the ZSK have one tag: %s" % r)
        want = dsfromkey(ksk + ".key")
        # the KSK's DS only; the ZSK is skipped (noted on stderr); .private names and stems work
        r = ternctl(ctx, "dnssec", "ds", ksk, zsk + ".private")
        expect_rc(r, 0)
        expect(r.out.strip() == want, "dnssec ds: want the KSK's DS\n%s\nas dnssec-dsfromkey "
               "prints it, got %s" % (want, r))
        r = ternctl(ctx, "dnssec", "ds", "--all", ksk + ".key", zsk + ".key")
        expect_rc(r, 0)
        both = [want, dsfromkey(zsk + ".key")]
        expect(r.out.strip().split("\n") == both, "dnssec ds --all: want\n%s\ngot %s"
               % ("\n".join(both), r))
    for argv in (("dnssec",), ("dnssec", "keygen"), ("dnssec", "keygen", ZONE, "-a", "5"),
                 ("dnssec", "keygen", ZONE, "-a", "13", "-b", "2048"), ("dnssec", "ds"),
                 ("dnssec", "ds", "--bogus", "x.key")):
        r = ternctl(ctx, *argv)
        expect_rc(r, 2)
    missing = os.path.join(ctx.workdir, "Knope.+013+00001.key")
    r = ternctl(ctx, "dnssec", "ds", missing)
    expect_rc(r, 1)
    expect(missing in r.err, "want the missing file named in %s" % r)


# --- against a running ternd

def main_tern(ctx):
    if ctx.tern is None or not ctx.tern.alive():
        raise Failure("the ternd of these checks is not running%s"
                      % ("" if ctx.tern is None else ":\n" + ctx.tern.log_text()))
    return ctx.tern


def check_socket_mode(ctx):
    t = main_tern(ctx)
    st = os.lstat(t.sock)
    expect(stat.S_ISSOCK(st.st_mode), "%s is not a socket" % t.sock)
    expect(stat.S_IMODE(st.st_mode) == 0o660, "%s has mode %o, want 660"
           % (t.sock, stat.S_IMODE(st.st_mode)))


def check_status(ctx):
    t = main_tern(ctx)
    r = ternctl(ctx, "-s", t.sock, "status")
    expect_rc(r, 0)
    expect(r.out.startswith("ok\n"), "want 'ok' first in %s" % r)
    expect(r.value("workers") == "2", "want workers: 2 in %s" % r)
    expect(r.value("version"), "want a version line in %s" % r)
    expect(r.value("zones") == "1", "want zones: 1 in %s" % r)
    expect(int(r.value("uptime_seconds") or -1) >= 0, "want uptime_seconds in %s" % r)
    want = "zone: %s serial %d records %d " % (ZONE, ctx.serial, RECORDS)
    expect(want in r.out, "want '%s' in %s" % (want, r))
    expect(r.value("last_reload") == "never", "want last_reload: never in %s" % r)
    # the same through the config file
    r2 = ternctl(ctx, "-c", t.config, "status")
    expect_rc(r2, 0)
    expect(want in r2.out, "-c %s: want '%s' in %s" % (t.config, want, r2))


def check_zone(ctx):
    t = main_tern(ctx)
    for name in (ZONE, ZONE.upper() + "."):
        r = ternctl(ctx, "-s", t.sock, "zone", name)
        expect_rc(r, 0)
        expect(r.value("zone") == ZONE and r.value("serial") == str(ctx.serial)
               and r.value("records") == str(RECORDS), "zone %s: want %s serial %d in %s"
               % (name, ZONE, ctx.serial, r))
        expect(r.value("file") == ctx.zone_path, "want file: %s in %s" % (ctx.zone_path, r))
    r = ternctl(ctx, "-s", t.sock, "zone", "nope.test")
    expect_rc(r, 1)
    expect("zone nope.test is not served" in r.err, "want 'not served' in %s" % r)


def check_stats(ctx):
    t = main_tern(ctx)
    for _ in range(10):
        query(t.port, "www." + ZONE, "A")
    query(t.port, "nope." + ZONE, "AAAA")
    for _ in range(2):
        query(t.port, ZONE, "SOA", tcp=True)
    r = ternctl(ctx, "-s", t.sock, "stats")
    expect_rc(r, 0)

    def num(key):
        v = r.value(key)
        expect(v is not None and v.isdigit(), "want a number for %s in %s" % (key, r))
        return int(v)
    # the startup probe and other checks also queried: at least what we sent here
    expect(num("queries") >= 13, "want queries >= 13 in %s" % r)
    expect(num("queries_udp") >= 11, "want queries_udp >= 11 in %s" % r)
    expect(num("queries_tcp") >= 2, "want queries_tcp >= 2 in %s" % r)
    expect(num("udp_received") >= 11, "want udp_received >= 11 in %s" % r)
    expect(num("tcp_accepted") >= 2, "want tcp_accepted >= 2 in %s" % r)
    expect(num("qtype_a") >= 10, "want qtype_a >= 10 in %s" % r)
    expect(num("qtype_aaaa") >= 1, "want qtype_aaaa >= 1 in %s" % r)
    expect(num("qtype_soa") >= 2, "want qtype_soa >= 2 in %s" % r)
    expect(num("rcode_noerror") >= 12, "want rcode_noerror >= 12 in %s" % r)
    expect(num("rcode_nxdomain") >= 1, "want rcode_nxdomain >= 1 in %s" % r)
    for key in ("reloads_ok", "reloads_failed", "zones", "records", "qtype_other",
                "rcode_refused", "truncated", "edns"):
        num(key)


def check_reload_ok(ctx):
    t = main_tern(ctx)
    old = ctx.serial
    ctx.serial += 1
    write_atomic(ctx.zone_path, zone_text(ctx.serial))
    r = ternctl(ctx, "-s", t.sock, "reload")
    expect_rc(r, 0)
    expect(r.value("reload") == "ok", "want reload: ok in %s" % r)
    expect(r.value("zones_changed") == "1", "want zones_changed: 1 in %s" % r)
    want = "changed: %s serial %d -> %d" % (ZONE, old, ctx.serial)
    expect(want in r.out, "want '%s' in %s" % (want, r))
    # ternctl reload returns after the publish: the new serial is already served
    got = served_serial(t.port)
    expect(got == ctx.serial, "after ternctl reload, DNS serves serial %d, want %d"
           % (got, ctx.serial))
    r = ternctl(ctx, "-s", t.sock, "status")
    expect_rc(r, 0)
    expect("zone: %s serial %d " % (ZONE, ctx.serial) in r.out, "want serial %d in %s"
           % (ctx.serial, r))
    expect(r.value("last_reload_result") == "ok", "want last_reload_result: ok in %s" % r)
    expect(r.value("reloads_ok") == "1", "want reloads_ok: 1 in %s" % r)


def check_reload_failed(ctx):
    t = main_tern(ctx)
    write_atomic(ctx.zone_path, zone_text(ctx.serial + 1, broken=True))
    r = ternctl(ctx, "-s", t.sock, "reload")
    expect_rc(r, 1)
    base = os.path.basename(ctx.zone_path)
    m = re.search(re.escape(base) + r":(\d+)", r.err)
    expect(m and "reload failed" in r.err, "want 'reload failed' and %s:LINE in %s" % (base, r))
    expect(int(m.group(1)) in (BAD_LINE, BAD_LINE + 1), "names line %s, the error is on line "
           "%d: %s" % (m.group(1), BAD_LINE, r))
    got = served_serial(t.port)
    expect(got == ctx.serial, "after the failed reload DNS serves serial %d, want the old %d"
           % (got, ctx.serial))
    r = ternctl(ctx, "-s", t.sock, "status")
    expect_rc(r, 0)
    expect("zone: %s serial %d " % (ZONE, ctx.serial) in r.out, "want the old serial %d in %s"
           % (ctx.serial, r))
    expect(r.value("last_reload_result") == "failed", "want last_reload_result: failed in %s" % r)
    expect(base in (r.value("last_reload_error") or ""), "want the error in %s" % r)
    # fixed: reloads again
    ctx.serial += 2
    write_atomic(ctx.zone_path, zone_text(ctx.serial))
    r = ternctl(ctx, "-s", t.sock, "reload")
    expect_rc(r, 0)
    expect(served_serial(t.port) == ctx.serial, "the fixed zone is not served")


def check_unknown_command(ctx):
    t = main_tern(ctx)
    r = ternctl(ctx, "-s", t.sock, "frobnicate")
    expect_rc(r, 2)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(RUN_TIMEOUT)
        s.connect(t.sock)
        s.sendall(b"frobnicate\n")
        data = b""
        for _ in range(1000):  # bounded: until EOF
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    text = data.decode("utf-8", "replace")
    expect(text.startswith("error: unknown command 'frobnicate'"),
           "raw 'frobnicate': got %r" % text)


def check_dnssec_ds_online(ctx):
    # a name that is no file is a zone: the request goes to ternd, whose zone here is unsigned
    t = main_tern(ctx)
    r = ternctl(ctx, "-s", t.sock, "dnssec", "ds", ZONE)
    expect_rc(r, 1)
    expect("not signed" in r.err, "want 'not signed' from ternd in %s" % r)
    r = ternctl(ctx, "-s", t.sock, "dnssec", "ds", "nope.test")
    expect_rc(r, 1)
    expect("not served" in r.err, "want 'not served' in %s" % r)


def check_second_ternd_refused(ctx):
    t = main_tern(ctx)
    second = Tern(ctx, "second", t.sock)
    try:
        second.start()
        raise Failure("a second ternd started on the same control socket:\n%s"
                      % second.log_text())
    except RuntimeError:
        pass  # servers.Server.start(): it exited during startup, as it should
    log = second.log_text()
    expect(second.t.proc.returncode not in (0, None), "second ternd: exit %s"
           % second.t.proc.returncode)
    expect(t.sock in log and "control socket" in log,
           "the second ternd's error does not name the control socket:\n%s" % log)
    r = ternctl(ctx, "-s", t.sock, "status")
    expect_rc(r, 0)
    expect(r.value("pid") == str(t.t.proc.pid), "status answered by pid %s, want the first ternd "
           "(%d)" % (r.value("pid"), t.t.proc.pid))


def check_socket_removed_on_exit(ctx):
    t = main_tern(ctx)
    rc = t.stop()
    expect(rc == 0, "ternd exited with %s on SIGTERM:\n%s" % (rc, t.log_text()))
    expect(not os.path.exists(t.sock), "%s is still there after ternd exited" % t.sock)
    r = ternctl(ctx, "-s", t.sock, "status")
    expect_rc(r, 2)


def check_stale_socket_replaced(ctx):
    sock = os.path.join(ctx.workdir, "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(sock)
    s.close()  # the file stays; nobody listens: what a killed ternd leaves
    expect(stat.S_ISSOCK(os.lstat(sock).st_mode), "no stale socket file to test with")
    t = Tern(ctx, "stale", sock)
    t.start()
    r = ternctl(ctx, "-s", sock, "status")
    expect_rc(r, 0)
    expect(r.value("pid") == str(t.t.proc.pid), "status not from the new ternd: %s" % r)
    rc = t.stop()
    expect(rc == 0, "ternd exited with %s on SIGTERM:\n%s" % (rc, t.log_text()))


OFFLINE = [
    ("offline_check_config", check_offline_check_config),
    ("offline_check_zone", check_offline_check_zone),
    ("offline_cli", check_offline_cli),
    ("offline_dnssec", check_offline_dnssec),
]
ONLINE = [
    ("socket_mode", check_socket_mode),
    ("status", check_status),
    ("zone", check_zone),
    ("stats", check_stats),
    ("reload_ok", check_reload_ok),
    ("reload_failed", check_reload_failed),
    ("unknown_command", check_unknown_command),
    ("dnssec_ds_online", check_dnssec_ds_online),
    ("second_ternd_refused", check_second_ternd_refused),
    ("socket_removed_on_exit", check_socket_removed_on_exit),
    ("stale_socket_replaced", check_stale_socket_replaced),
]


class Ctx:
    def __init__(self, ternd, ternctl_path, workdir):
        self.ternd = ternd
        self.ternctl = ternctl_path
        self.workdir = workdir
        self.zone_path = os.path.join(workdir, "%s.zone" % ZONE)
        self.serial = SERIAL0
        self.tern = None
        self.started = []


def run_check(fn, ctx):
    try:
        fn(ctx)
        return None
    except Failure as e:
        return str(e)
    except Exception as e:
        if os.environ.get("VERBOSE"):
            traceback.print_exc()
        return "%s: %s" % (type(e).__name__, e)


def finish(ctx, results):
    """Stop every ternd; each must have exited 0 with no sanitizer report in its output."""
    for t in ctx.started:
        was_running = t.alive()
        rc = t.stop()
        if was_running and rc != 0:
            results.append(("clean_exit_%s" % os.path.basename(os.path.dirname(t.t.dir)),
                            "ternd exited with %s on SIGTERM:\n%s" % (rc, t.log_text())))
        m = SANITIZER.search(t.log_text(100000))
        if m:
            results.append(("sanitizer", "sanitizer report in %s:\n%s"
                            % (t.t.log_path, t.log_text())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--ternctl", default=os.environ.get("TERNCTL"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    for name in ("ternd", "ternctl"):
        path = getattr(args, name)
        if not path or not os.access(path, os.X_OK):
            print("test_ctl: no %s binary (--%s PATH or $%s), got %r"
                  % (name, name, name.upper(), path))
            return 2
    workdir = tempfile.mkdtemp(prefix="tern-ctl-")
    ctx = Ctx(os.path.abspath(args.ternd), os.path.abspath(args.ternctl), workdir)
    results = []
    try:
        for name, fn in OFFLINE:
            results.append((name, run_check(fn, ctx)))
        write_atomic(ctx.zone_path, zone_text(ctx.serial))
        ctx.tern = Tern(ctx, "main", os.path.join(workdir, "ternd.sock"))
        err = run_check(lambda c: c.tern.start(), ctx)
        results.append(("start_with_control_socket", err))
        if err is None:
            for name, fn in ONLINE:
                results.append((name, run_check(fn, ctx)))
    finally:
        finish(ctx, results)
        if args.keep:
            print("kept %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return servers.report(results, 28)


if __name__ == "__main__":
    sys.exit(main())
