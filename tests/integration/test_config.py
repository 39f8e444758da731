#!/usr/bin/python3
"""ternd's configuration and command line, end to end: the real binary on loopback ports.

Every check starts its own ternd(s) in its own directory under one temporary directory:

  listen_protocol_flags      listen entries with tcp: false / udp: false serve only that protocol
                             (the other is refused or unanswered); the startup log says (udp)/(tcp)
  listen_ipv6                "[::1]:P" answers UDP and TCP (skipped when ::1 is unavailable)
  listen_port_zero           "127.0.0.1:0": the log names the real port, UDP and TCP answer on it
  pid_file                   a relative pid_file lands next to the config (not in the cwd), holds
                             ternd's pid, and is removed when SIGTERM ends ternd (exit 0, < 2 s)
  sigterm_exit / sigint_exit exit status 0 within 2 s
  reload_identity_version    SIGHUP applies a new identity/version (CHAOS id.server, version.bind)
  reload_listen_restart_only a changed listen list + SIGHUP warns "listen changed; it applies
                             only on restart"; the old port keeps answering, the new one is not
                             served
  reload_tcp_restart_only    tcp_max_lifetime changed + SIGHUP: the warning names it; then
                             tcp_max_inflight too: one line names both (against the startup
                             config); the reload itself succeeds
  reload_zones_add_remove    a zone added to the config is served after SIGHUP; removed, REFUSED
  reload_bad_config          invalid config (unknown key, line 3) + SIGHUP: "reload ... failed"
                             naming file:3, the old data keeps answering; fixed, it reloads
  check_config               --check-config: conf/ternd.yaml is valid (its tern account is named
                             with its line where it does not exist; with --user nobody it passes);
                             an unknown key and a zone syntax error fail with file:line; what a
                             start refuses is refused: no listen address, an empty file, "{}"
  check_config_runtime       a user or group that does not exist: --check-config and startup exit
                             1 naming file:line (or the --user/--group flag) before binding; a
                             pid_file two missing levels down is an error with its line; one
                             missing level is announced by --check-config (not created) and
                             created (mode 755) by ternd, which writes its pid file and control
                             socket there
  config_error_no_leak       a config error after options that allocate exits 1 with file:line
                             and nothing else (no LeakSanitizer report in ASan builds)
  root_refused               as root, no user and no allow_root: ternd refuses to serve and
                             removes its pid file (skipped when not root; every other config
                             here says allow_root: true when run as root)
  cli                        --version, --help, no listen address, --listen bogus
  redins_json                conf/redins-example.json checks out; a redins-style JSON config
                             with one udp "server" entry serves UDP only; redins' redis keys at
                             the top level are refused naming the line and pointing at
                             "handler"; handler.upstream (ANAME upstreams) checks out,
                             upstream_fallback: true is refused ("open resolver")
  redins_json_merge          udp + tcp "server" entries for one ip:port become one UDP+TCP
                             listener
  health_config              --check-config (and startup) of bad health: blocks exit 1 naming
                             file:line and the key (a check's port 0, protocol ftp, a duplicate
                             check, a zone-source key in health's redis, a log without path,
                             health beside redins' healthcheck, handler.healthcheck's log target
                             kafka); a valid health block and a redins handler.healthcheck pass,
                             a log path whose directory does not exist included
  limit_config               --check-config (and startup) of bad flood-resistance settings exit 1
                             naming file:line and the key path (a prefix with host bits set in
                             acl.allow[2], a zone's acl, ratelimit rate 0, rrl slip, a cookie
                             secret of the wrong length or beside rotate_s, tcp_client_prefix_v6,
                             rate 0 in redins' JSON); a config with every block, and a redins
                             config.json with its ratelimit block, pass and serve
  reload_limit               SIGHUP applies a new acl (a denied client is REFUSED, then answered
                             again) without a restart-only warning; tcp_max_per_client and
                             tcp_client_prefix_v4 are named as restart-only
  log_level_error_*          log_level: error hides the info lines (listening on, loaded, ready)
                             and the server still answers
  log_target_stdout          log_target: stdout puts every log line on stdout, none on stderr

Every ternd is stopped with SIGTERM by its pid (SIGKILL if it does not go) and must exit 0; a
sanitizer report in any ternd's output is a failure (ASan builds). Prints one line per check and
"N passed, N failed, N skipped"; exits 1 on any failure.

    test_config.py --ternd build/ternd      (or TERND=build/ternd test_config.py)
"""

import argparse
import grp
import os
import pwd
import re
import shutil
import signal
import socket
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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))

LOOPBACK = servers.LOOPBACK
LOOPBACK6 = "::1"
START_TIMEOUT = 15.0     # seconds until a started ternd answers (ASan builds start slowly)
QUERY_TIMEOUT = 1.0      # one query; also how long "no answer" is waited for
PROBE_TIMEOUT = 0.3      # one query while waiting for a starting ternd
POLL_TIMEOUT = 5.0       # from SIGHUP until the new data (or the log line) must be there
EXIT_TIMEOUT = 2.0       # from SIGTERM/SIGINT until ternd must have exited
KILL_TIMEOUT = 5.0
RUN_TIMEOUT = 20.0       # one ternd --check-config / --version / ... run

ZONE_A = "cfg.test"
ZONE_B = "added.test"

# CI runs as root; ternd refuses to stay root unless told (the zone files live in root-only temp
# dirs, so dropping to another user is no option). Every config that serves says allow_root then.
AS_ROOT = os.geteuid() == 0




class Skip(Exception):
    pass




# --- files



def zone_text(origin, tag):
    """A small zone; www.<origin> TXT is "<tag>" so each zone's data is recognisable."""
    return "\n".join([
        "$ORIGIN %s." % origin,                              # 1
        "$TTL 60",                                            # 2
        "@ IN SOA ns1 hostmaster 2024010100 3600 600 86400 60",  # 3
        "@ IN NS ns1",                                        # 4
        "ns1 IN A 192.0.2.1",                                 # 5
        'www IN TXT "%s"' % tag,                              # 6
    ]) + "\n"


def zones_yaml(zones):
    """The zones: block for [(origin, file)]."""
    out = "zones:\n"
    for origin, path in zones:
        out += '  - origin: "%s"\n    file: "%s"\n' % (origin, path)
    return out


# --- ports and queries

def free_port6():
    """A port free for UDP and TCP on ::1, reserved like servers.free_port() (outside the
    ephemeral range, locked for this process); None if ::1 cannot be bound here."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as t:
            t.bind((LOOPBACK6, 0))
    except OSError:
        return None
    for _ in range(20):
        port = servers.free_port()
        try:
            with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as t:
                t.bind((LOOPBACK6, port))
                with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as u:
                    u.bind((LOOPBACK6, port))
        except OSError:
            continue
        return port
    return None


def query(name, qtype, port, host=LOOPBACK, tcp=False, rdclass="IN", timeout=QUERY_TIMEOUT):
    q = dns.message.make_query(name, qtype, rdclass)
    if tcp:
        return dns.query.tcp(q, host, port=port, timeout=timeout)
    # ignore_unexpected: under a parallel ctest another test's server may answer a port this
    # client's ephemeral port was before (seen once: BadResponse in pid_file); only ternd's
    # reply from host:port counts
    return dns.query.udp(q, host, port=port, timeout=timeout, ignore_unexpected=True)


def txt_of(r):
    """The first TXT string of the answer, or None."""
    if r.rcode() != dns.rcode.NOERROR or not r.answer:
        return None
    return b"".join(r.answer[0][0].strings).decode("utf-8", "replace")


def www_txt(origin, port, host=LOOPBACK, tcp=False, timeout=QUERY_TIMEOUT):
    """The TXT of www.<origin> over UDP or TCP; raises on no answer."""
    r = query("www.%s" % origin, "TXT", port, host, tcp, timeout=timeout)
    expect(r.rcode() == dns.rcode.NOERROR,
           "www.%s TXT over %s to %s port %d: %s" % (origin, "TCP" if tcp else "UDP", host, port,
                                                      dns.rcode.to_text(r.rcode())))
    return txt_of(r)


def expect_answers(origin, tag, port, host=LOOPBACK, tcp=False):
    proto = "TCP" if tcp else "UDP"
    try:
        got = www_txt(origin, port, host, tcp)
    except (dns.exception.Timeout, OSError) as e:
        raise Failure("www.%s over %s to %s port %d: no answer (%s: %s)"
                      % (origin, proto, host, port, type(e).__name__, e))
    expect(got == tag, "www.%s over %s to %s port %d: TXT %r, want %r"
           % (origin, proto, host, port, got, tag))


def expect_no_udp_answer(port, host=LOOPBACK, timeout=QUERY_TIMEOUT):
    """A UDP query to port gets nothing back (timeout, or ICMP port unreachable)."""
    try:
        r = query(ZONE_A, "SOA", port, host, timeout=timeout)
    except dns.exception.Timeout:
        return
    except ConnectionRefusedError:
        return
    raise Failure("UDP query to %s port %d was answered (%s); no UDP service expected there"
                  % (host, port, dns.rcode.to_text(r.rcode())))


def expect_tcp_refused(port, host=LOOPBACK):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.settimeout(QUERY_TIMEOUT)
        try:
            s.connect((host, port))
        except ConnectionRefusedError:
            return
        except OSError as e:
            raise Failure("TCP connect to %s port %d: %s, want connection refused"
                          % (host, port, e))
    raise Failure("TCP connect to %s port %d succeeded; no TCP service expected there"
                  % (host, port))


def chaos_txt(name, port):
    """The CHAOS TXT answer for name, or the rcode's name when there is none; None on no answer."""
    try:
        r = query(name, "TXT", port, rdclass="CH")
    except (dns.exception.Timeout, OSError):
        return None
    got = txt_of(r)
    return got if got is not None else dns.rcode.to_text(r.rcode())


def poll(fn, want, timeout=POLL_TIMEOUT):
    """Call fn until it returns want (bounded); (ok, last value)."""
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got == want:
            return True, got
        if time.monotonic() >= deadline:
            return False, got
        time.sleep(0.05)


# --- ternd

SANITIZER = re.compile(r"ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:")


def sanitizer_report(text):
    """The first line of a sanitizer report in text, or None (a non-sanitizer build has none)."""
    for line in text.split("\n"):
        if SANITIZER.search(line):
            return line
    return None


def run_ternd(binary, args, cwd=None):
    """Run ternd to completion (bounded); (exit status, stdout, stderr). A sanitizer report on
    stderr is a failure whatever the exit status."""
    try:
        p = subprocess.run([binary] + args, cwd=cwd, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failure("ternd %s did not exit within %.0f s" % (" ".join(args), RUN_TIMEOUT))
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    if sanitizer_report(err):
        raise Failure("ternd %s (exit %d): %s\n%s" % (" ".join(args), p.returncode,
                                                      sanitizer_report(err), err[:1500]))
    return p.returncode, out, err


class Tern:
    """One ternd with a config file in its own directory; output goes to a log file."""

    def __init__(self, ctx, name, config_name="ternd.yaml"):
        self.binary = ctx.binary
        self.dir = os.path.join(ctx.workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.conf = os.path.join(self.dir, config_name)
        self.log_path = os.path.join(self.dir, "output.log")
        self.proc = None
        self._log = None
        self._err = None
        ctx.started.append(self)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write_config(self, text):
        """Write the config; a YAML one gets "allow_root: true" appended when we are root (at
        the end, so the line numbers of what text holds stay as written)."""
        if AS_ROOT and not self.conf.endswith(".json"):
            text += "allow_root: true\n"
        write_atomic(self.conf, text)

    def write_zone(self, origin, tag):
        p = self.path(origin + ".zone")
        write_atomic(p, zone_text(origin, tag))
        return p

    def start(self, ready, cwd=None, args=(), split=False):
        """Start ternd -c conf and wait (bounded) until ready() is true. Its stdout and stderr
        go to output.log, or with split=True stdout to output.log and stderr to stderr.log."""
        self._log = open(self.log_path, "wb")
        err = subprocess.STDOUT
        if split:
            self._err = err = open(self.path("stderr.log"), "wb")
        self.proc = subprocess.Popen([self.binary, "-c", self.conf] + list(args),
                                     stdout=self._log, stderr=err,
                                     stdin=subprocess.DEVNULL, cwd=cwd or self.dir)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failure("ternd exited with status %s during startup:\n%s"
                              % (self.proc.returncode, self.log_text()))
            try:
                if ready():
                    return
            except (dns.exception.Timeout, OSError, Failure):
                pass
            time.sleep(0.1)
        raise Failure("ternd did not become ready within %.0f s:\n%s"
                      % (START_TIMEOUT, self.log_text()))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        expect(self.alive(), "ternd is not running (exit %s):\n%s"
               % (self.proc.returncode if self.proc else None, self.log_text()))
        os.kill(self.proc.pid, sig)

    def wait_exit(self, timeout):
        """Exit status within timeout, or None (the process is left running)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        """SIGTERM, then SIGKILL; returns the exit status (None if never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=KILL_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=KILL_TIMEOUT)
        for f in (self._log, self._err):
            if f is not None:
                f.close()
        self._log = self._err = None
        return self.proc.returncode

    # the log

    def lines(self):
        try:
            with open(self.log_path, "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except OSError:
            return []
        return data.split("\n")[:-1]  # complete lines only

    def log_text(self, limit=3000):
        return "\n".join(self.lines())[-limit:]

    def mark(self):
        return len(self.lines())

    def wait_log(self, pred, mark=0, timeout=POLL_TIMEOUT):
        """The first line after mark satisfying pred (bounded wait), or None."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines()[mark:]:
                if pred(line):
                    return line
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.02)

    def wait_ready_line(self):
        line = self.wait_log(lambda l: "ready:" in l)
        expect(line is not None, "no 'ready:' log line within %.0f s:\n%s"
               % (POLL_TIMEOUT, self.log_text()))


def answers(origin, tag, port, host=LOOPBACK, tcp=False):
    """A ready() probe: www.<origin> TXT answers with tag."""
    return lambda: www_txt(origin, port, host, tcp, timeout=PROBE_TIMEOUT) == tag


def simple_config(port, zones, extra=""):
    return 'listen: ["%s:%d"]\nworkers: 1\n%s%s' % (LOOPBACK, port, extra, zones_yaml(zones))


def is_reload_ok(line):
    low = line.lower()
    return "reload" in low and re.search(r"\bok\b", low) is not None and "failed" not in low


def is_reload_failed(line):
    low = line.lower()
    return "reload" in low and "failed" in low


# --- the checks

def check_listen_protocol_flags(ctx):
    t = Tern(ctx, "protoflags")
    p1, p2 = servers.free_port(), servers.free_port()
    while p2 == p1:
        p2 = servers.free_port()
    za = t.write_zone(ZONE_A, "a")
    t.write_config('listen:\n'
                   '  - {address: "%s:%d", tcp: false}\n'
                   '  - {address: "%s:%d", udp: false}\n'
                   'workers: 1\n%s' % (LOOPBACK, p1, LOOPBACK, p2, zones_yaml([(ZONE_A, za)])))
    t.start(answers(ZONE_A, "a", p1))
    t.wait_ready_line()
    expect_answers(ZONE_A, "a", p1)                 # UDP on P1
    expect_tcp_refused(p1)                          # no TCP on P1
    expect_answers(ZONE_A, "a", p2, tcp=True)       # TCP on P2
    expect_no_udp_answer(p2)                        # no UDP on P2
    log = t.lines()
    l1 = [l for l in log if "listening on" in l and ":%d " % p1 in l]
    l2 = [l for l in log if "listening on" in l and ":%d " % p2 in l]
    expect(l1 and "(udp)" in l1[0], "no 'listening on ...:%d (udp)' line:\n%s"
           % (p1, t.log_text()))
    expect(l2 and "(tcp)" in l2[0], "no 'listening on ...:%d (tcp)' line:\n%s"
           % (p2, t.log_text()))


def check_listen_ipv6(ctx):
    port = free_port6()
    if port is None:
        raise Skip("::1 is not available on this host")
    t = Tern(ctx, "ipv6")
    za = t.write_zone(ZONE_A, "v6")
    t.write_config('listen: ["[::1]:%d"]\nworkers: 1\n%s' % (port, zones_yaml([(ZONE_A, za)])))
    t.start(answers(ZONE_A, "v6", port, host=LOOPBACK6))
    expect_answers(ZONE_A, "v6", port, host=LOOPBACK6)
    expect_answers(ZONE_A, "v6", port, host=LOOPBACK6, tcp=True)
    t.wait_ready_line()
    expect(any("listening on [::1]:%d (udp, tcp)" % port in l for l in t.lines()),
           "no 'listening on [::1]:%d (udp, tcp)' line:\n%s" % (port, t.log_text()))


def check_listen_port_zero(ctx):
    t = Tern(ctx, "port0")
    za = t.write_zone(ZONE_A, "zero")
    t.write_config('listen: ["%s:0"]\nworkers: 2\n%s' % (LOOPBACK, zones_yaml([(ZONE_A, za)])))
    t.start(lambda: any("ready:" in l for l in t.lines()))
    lines = [l for l in t.lines() if "listening on" in l]
    m = re.search(r"listening on 127\.0\.0\.1:(\d+) \(udp, tcp\)", lines[0]) if lines else None
    expect(m, "no 'listening on 127.0.0.1:PORT (udp, tcp)' line:\n%s" % t.log_text())
    port = int(m.group(1))
    expect(port != 0, "the log names port 0, not the ephemeral port: %s" % lines[0])
    expect_answers(ZONE_A, "zero", port)
    expect_answers(ZONE_A, "zero", port, tcp=True)


def check_pid_file(ctx):
    t = Tern(ctx, os.path.join("pidfile", "conf"))
    cwd = os.path.dirname(t.dir)  # ternd runs one directory up: relative means the config's dir
    port = servers.free_port()
    za = t.write_zone(ZONE_A, "pid")
    t.write_config(simple_config(port, [(ZONE_A, za)], 'pid_file: "ternd.pid"\n'))
    pid_path = t.path("ternd.pid")
    t.start(answers(ZONE_A, "pid", port), cwd=cwd)
    ok, _ = poll(lambda: os.path.exists(pid_path), True)
    expect(ok, "no pid file %s within %.0f s (files there: %s)"
           % (pid_path, POLL_TIMEOUT, sorted(os.listdir(t.dir))))
    expect(not os.path.exists(os.path.join(cwd, "ternd.pid")),
           "a pid file appeared in the working directory, not the config's")
    with open(pid_path) as f:
        text = f.read()
    expect(text.strip() == str(t.proc.pid), "the pid file holds %r, ternd's pid is %d"
           % (text, t.proc.pid))
    expect(text.endswith("\n"), "the pid file does not end with a newline: %r" % text)
    t0 = time.monotonic()
    t.signal(signal.SIGTERM)
    rc = t.wait_exit(EXIT_TIMEOUT)
    expect(rc is not None, "ternd still running %.0f s after SIGTERM" % EXIT_TIMEOUT)
    expect(rc == 0, "ternd exited with %s on SIGTERM:\n%s" % (rc, t.log_text()))
    print("  pid_file: exit after SIGTERM in %.0f ms" % ((time.monotonic() - t0) * 1000))
    expect(not os.path.exists(pid_path), "the pid file is still there after ternd exited")
    leftovers = [n for n in os.listdir(t.dir) if n.startswith("ternd.pid")]
    expect(not leftovers, "pid file leftovers: %s" % leftovers)


def signal_exit(ctx, sig, name):
    t = Tern(ctx, "exit-" + name)
    port = servers.free_port()
    za = t.write_zone(ZONE_A, name)
    t.write_config(simple_config(port, [(ZONE_A, za)]))
    t.start(answers(ZONE_A, name, port))
    t.wait_ready_line()
    t0 = time.monotonic()
    t.signal(sig)
    rc = t.wait_exit(EXIT_TIMEOUT)
    ms = (time.monotonic() - t0) * 1000
    expect(rc is not None, "ternd still running %.0f s after %s" % (EXIT_TIMEOUT, name))
    expect(rc == 0, "ternd exited with %s on %s:\n%s" % (rc, name, t.log_text()))
    print("  %s: exit 0 in %.0f ms" % (name, ms))


def check_sigterm_exit(ctx):
    signal_exit(ctx, signal.SIGTERM, "SIGTERM")


def check_sigint_exit(ctx):
    signal_exit(ctx, signal.SIGINT, "SIGINT")


def check_reload_identity_version(ctx):
    t = Tern(ctx, "identity")
    port = servers.free_port()
    za = t.write_zone(ZONE_A, "a")
    t.write_config(simple_config(port, [(ZONE_A, za)], 'identity: "a"\nversion: "v-one"\n'))
    t.start(answers(ZONE_A, "a", port))
    expect(chaos_txt("id.server", port) == "a", "CH TXT id.server: %r, want 'a'"
           % chaos_txt("id.server", port))
    expect(chaos_txt("version.bind", port) == "v-one", "CH TXT version.bind: %r, want 'v-one'"
           % chaos_txt("version.bind", port))
    t.write_config(simple_config(port, [(ZONE_A, za)], 'identity: "b"\nversion: "v-two"\n'))
    t.signal(signal.SIGHUP)
    ok, got = poll(lambda: chaos_txt("id.server", port), "b")
    expect(ok, "CH TXT id.server still %r %.0f s after SIGHUP, want 'b'" % (got, POLL_TIMEOUT))
    ok, got = poll(lambda: chaos_txt("version.bind", port), "v-two")
    expect(ok, "CH TXT version.bind %r after the reload, want 'v-two'" % got)
    # unset again: CHAOS queries are refused
    t.write_config(simple_config(port, [(ZONE_A, za)]))
    t.signal(signal.SIGHUP)
    ok, got = poll(lambda: chaos_txt("id.server", port), "REFUSED")
    expect(ok, "CH TXT id.server %r after identity was removed, want REFUSED" % got)
    expect_answers(ZONE_A, "a", port)


def check_reload_listen_restart_only(ctx):
    t = Tern(ctx, "relisten")
    port = servers.free_port()
    za = t.write_zone(ZONE_A, "a")
    t.write_config(simple_config(port, [(ZONE_A, za)], 'identity: "one"\n'))
    t.start(answers(ZONE_A, "a", port))
    t.wait_ready_line()
    new_port = servers.free_port()
    while new_port == port:
        new_port = servers.free_port()
    mark = t.mark()
    t.write_config(simple_config(new_port, [(ZONE_A, za)], 'identity: "two"\n'))
    t.signal(signal.SIGHUP)
    warn = t.wait_log(lambda l: "only on restart" in l, mark)
    expect(warn is not None, "no 'only on restart' warning within %.0f s after a listen "
           "change:\n%s" % (POLL_TIMEOUT, "\n".join(t.lines()[mark:])))
    expect("reload: listen changed; it applies only on restart" in warn,
           "the restart warning does not name listen alone: %s" % warn)
    done = t.wait_log(lambda l: is_reload_ok(l) or is_reload_failed(l), mark)
    expect(done is not None and is_reload_ok(done), "the reload with a new listen list did not "
           "succeed: %s" % done)
    # the rest of the config did apply; the sockets did not change
    ok, got = poll(lambda: chaos_txt("id.server", port), "two")
    expect(ok, "CH TXT id.server %r on the old port after the reload, want 'two'" % got)
    expect_answers(ZONE_A, "a", port)
    expect_answers(ZONE_A, "a", port, tcp=True)
    expect_no_udp_answer(new_port, timeout=0.5)
    expect_tcp_refused(new_port)


def check_reload_tcp_restart_only(ctx):
    t = Tern(ctx, "retcp")
    port = servers.free_port()
    za = t.write_zone(ZONE_A, "a")
    t.write_config(simple_config(port, [(ZONE_A, za)]))
    t.start(answers(ZONE_A, "a", port))
    t.wait_ready_line()
    for extra, want in [
            ("tcp_max_lifetime: 60\n",
             "reload: tcp_max_lifetime changed; it applies only on restart"),
            ("tcp_max_lifetime: 60\ntcp_max_inflight: 8\n",
             "reload: tcp_max_lifetime, tcp_max_inflight changed; they apply only on restart")]:
        mark = t.mark()
        t.write_config(simple_config(port, [(ZONE_A, za)], extra))
        t.signal(signal.SIGHUP)
        done = t.wait_log(lambda l: is_reload_ok(l) or is_reload_failed(l), mark)
        expect(done is not None and is_reload_ok(done), "the reload with %r did not succeed: %s"
               % (extra, done))
        warn = [l for l in t.lines()[mark:] if "only on restart" in l]
        expect(len(warn) == 1 and want in warn[0], "after %r + SIGHUP, want one line with %r, "
               "got %s" % (extra, want, warn))
    expect_answers(ZONE_A, "a", port, tcp=True)


def check_reload_zones_add_remove(ctx):
    t = Tern(ctx, "addzone")
    port = servers.free_port()
    za = t.write_zone(ZONE_A, "a")
    zb = t.write_zone(ZONE_B, "b")
    t.write_config(simple_config(port, [(ZONE_A, za)]))
    t.start(answers(ZONE_A, "a", port))

    def rcode_b():
        try:
            return dns.rcode.to_text(query("www.%s" % ZONE_B, "TXT", port).rcode())
        except (dns.exception.Timeout, OSError) as e:
            return type(e).__name__

    expect(rcode_b() == "REFUSED", "%s before it is configured: %s, want REFUSED"
           % (ZONE_B, rcode_b()))
    t.write_config(simple_config(port, [(ZONE_A, za), (ZONE_B, zb)]))
    t.signal(signal.SIGHUP)

    def b_txt():
        try:
            return www_txt(ZONE_B, port)
        except (dns.exception.Timeout, OSError, Failure) as e:
            return str(e)

    ok, got = poll(b_txt, "b")
    expect(ok, "%s not served %.0f s after it was added + SIGHUP (%s)"
           % (ZONE_B, POLL_TIMEOUT, got))
    expect_answers(ZONE_A, "a", port)
    expect_answers(ZONE_B, "b", port, tcp=True)
    t.write_config(simple_config(port, [(ZONE_A, za)]))
    t.signal(signal.SIGHUP)
    ok, got = poll(rcode_b, "REFUSED")
    expect(ok, "%s answers %s %.0f s after it was removed + SIGHUP, want REFUSED"
           % (ZONE_B, got, POLL_TIMEOUT))
    expect_answers(ZONE_A, "a", port)


def check_reload_bad_config(ctx):
    t = Tern(ctx, "badconf")
    port = servers.free_port()
    za = t.write_zone(ZONE_A, "a")
    good = simple_config(port, [(ZONE_A, za)], 'identity: "good"\n')
    t.write_config(good)
    t.start(answers(ZONE_A, "a", port))
    t.wait_ready_line()
    # line 3 is the unknown key; the rest would be a valid change
    bad = ('listen: ["%s:%d"]\nworkers: 1\nno_such_option: 7\nidentity: "bad"\n%s'
           % (LOOPBACK, port, zones_yaml([(ZONE_A, za)])))
    mark = t.mark()
    t.write_config(bad)
    t.signal(signal.SIGHUP)
    line = t.wait_log(lambda l: is_reload_ok(l) or is_reload_failed(l), mark)
    expect(line is not None, "no reload result line within %.0f s:\n%s"
           % (POLL_TIMEOUT, "\n".join(t.lines()[mark:])))
    expect(is_reload_failed(line), "a config with an unknown key reloaded: %s" % line)
    base = os.path.basename(t.conf)
    expect(base + ":3:" in line, "the failed line does not name %s:3: %s" % (base, line))
    expect("no_such_option" in line, "the failed line does not name the key: %s" % line)
    expect(t.alive(), "ternd exited after a bad config:\n%s" % t.log_text())
    for _ in range(5):  # the old data (zones and identity) keeps answering
        expect_answers(ZONE_A, "a", port)
        got = chaos_txt("id.server", port)
        expect(got == "good", "CH TXT id.server %r after the failed reload, want 'good'" % got)
        time.sleep(0.05)
    # fixed: the next SIGHUP reloads
    mark = t.mark()
    t.write_config(good.replace('"good"', '"fixed"'))
    t.signal(signal.SIGHUP)
    ok, got = poll(lambda: chaos_txt("id.server", port), "fixed")
    expect(ok, "CH TXT id.server %r after the config was fixed, want 'fixed'" % got)
    line = t.wait_log(lambda l: is_reload_ok(l) or is_reload_failed(l), mark)
    expect(line is not None and is_reload_ok(line), "no reload ok line after the fix: %s" % line)


def check_check_config(ctx):
    b = ctx.binary
    example = os.path.join(REPO, "conf", "ternd.yaml")
    expect(os.path.exists(example), "%s is missing" % example)
    # the example runs as tern:tern; where that account does not exist, --check-config says so
    # with the lines, and the rest of the file checks out with an account that does
    with open(example) as f:
        user_line = 1 + [l.split(":")[0] for l in f].index("user")
    rc, out, err = run_ternd(b, ["--check-config", "-c", "conf/ternd.yaml"], cwd=REPO)
    if have_account("tern", "tern"):
        expect(rc == 0, "--check-config -c conf/ternd.yaml exited %d:\n%s%s" % (rc, out, err))
    else:
        expect(rc == 1 and "conf/ternd.yaml:%d: user 'tern': no such user" % user_line in err,
               "--check-config -c conf/ternd.yaml without a tern account: want exit 1 naming "
               "line %d, got %d:\n%s%s" % (user_line, rc, out, err))
    rc, out, err = run_ternd(b, ["--check-config", "-c", "conf/ternd.yaml", "--user", "nobody",
                                 "--group", NOGROUP], cwd=REPO)
    expect(rc == 0, "--check-config -c conf/ternd.yaml --user nobody exited %d:\n%s%s"
           % (rc, out, err))
    d = os.path.join(ctx.workdir, "checkconfig")
    os.makedirs(d)
    za = os.path.join(d, "ok.zone")
    write_atomic(za, zone_text(ZONE_A, "ok"))
    # no listen address: a start refuses it, so --check-config does; --listen completes it
    ok_conf = os.path.join(d, "nolisten.yaml")
    write_atomic(ok_conf, "workers: 1\n" + zones_yaml([(ZONE_A, "ok.zone")]))
    rc, out, err = run_ternd(b, ["--check-config", "-c", ok_conf])
    expect(rc == 1 and "no listen address" in err,
           "--check-config of a config without listen: want exit 1 and 'no listen address', "
           "got %d:\n%s%s" % (rc, out, err))
    rc, out, err = run_ternd(b, ["--check-config", "-c", ok_conf, "--listen", "127.0.0.1:53"])
    expect(rc == 0, "--check-config of a config without listen, --listen given, exited %d:\n%s%s"
           % (rc, out, err))
    # a truncated file (empty, or only "{}") is never "all defaults": refused, saying why
    for text, why in (("", "holds no options"), ("{}\n", "empty mapping")):
        empty = os.path.join(d, "empty.yaml")
        write_atomic(empty, text)
        for args in (["--check-config", "-c", empty],
                     ["--check-config", "-c", empty, "--listen", "127.0.0.1:53"]):
            rc, out, err = run_ternd(b, args)
            expect(rc == 1 and why in err and "empty.yaml" in err,
                   "%s of %r: want exit 1 naming empty.yaml and '%s', got %d:\n%s%s"
                   % (" ".join(args), text, why, rc, out, err))
    # unknown key on line 3
    bad_conf = os.path.join(d, "unknown.yaml")
    write_atomic(bad_conf, 'listen: ["127.0.0.1:53"]\nworkers: 1\nfrobnicate: yes\n'
                 + zones_yaml([(ZONE_A, "ok.zone")]))
    rc, out, err = run_ternd(b, ["--check-config", "-c", bad_conf])
    expect(rc != 0, "--check-config of a config with an unknown key exited 0:\n%s%s" % (out, err))
    expect("unknown.yaml:3" in err and "frobnicate" in err,
           "--check-config: stderr does not name unknown.yaml:3 and the key 'frobnicate':\n%s"
           % err)
    # a zone with a syntax error on line 6
    zbad = os.path.join(d, "broken.zone")
    write_atomic(zbad, zone_text(ZONE_A, "x").replace('www IN TXT "x"', "www IN A 300.1.2.3"))
    zconf = os.path.join(d, "badzone.yaml")
    write_atomic(zconf, 'listen: ["127.0.0.1:53"]\nworkers: 1\n'
                 + zones_yaml([(ZONE_A, "broken.zone")]))
    rc, out, err = run_ternd(b, ["--check-config", "-c", zconf])
    expect(rc != 0, "--check-config with a broken zone exited 0:\n%s%s" % (out, err))
    m = re.search(r"broken\.zone:(\d+)", err)
    expect(m, "--check-config: stderr does not name broken.zone:LINE:\n%s" % err)
    expect(int(m.group(1)) in (6, 7), "--check-config names broken.zone:%s, the error is on "
           "line 6:\n%s" % (m.group(1), err))
    # --check-config serves nothing: it exits even with a listen address that is in use
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind((LOOPBACK, 0))
        busy = u.getsockname()[1]
        conf = os.path.join(d, "busy.yaml")
        write_atomic(conf, 'listen: ["%s:%d"]\nworkers: 1\n' % (LOOPBACK, busy)
                     + zones_yaml([(ZONE_A, "ok.zone")]))
        rc, out, err = run_ternd(b, ["--check-config", "-c", conf])
        expect(rc == 0, "--check-config with a listen address in use exited %d:\n%s%s"
               % (rc, out, err))


def have_account(user, group):
    try:
        pwd.getpwnam(user)
        grp.getgrnam(group)
        return True
    except KeyError:
        return False


NOGROUP = "nogroup"  # Debian's group of nobody


def config_dir(ctx, name):
    """A fresh directory for one check with a good zone (ok.zone), and the config pieces around
    what the check varies: the base (listen, workers: lines 1 and 2), the zones, allow_root."""
    d = os.path.join(ctx.workdir, name)
    os.makedirs(d)
    write_atomic(os.path.join(d, "ok.zone"), zone_text(ZONE_A, "ok"))
    base = 'listen: ["%s:%d"]\nworkers: 1\n' % (LOOPBACK, servers.free_port())
    zones = zones_yaml([(ZONE_A, "ok.zone")])
    allow = "allow_root: true\n" if AS_ROOT else ""
    return d, base, zones, allow


def check_check_config_runtime(ctx):
    """What the config names outside ternd, reported by --check-config and at startup."""
    b = ctx.binary
    d, base, zones, allow = config_dir(ctx, "runtime")
    conf = os.path.join(d, "accounts.yaml")
    # lines 3 and 4: an account and a group that do not exist; both named, with their lines
    write_atomic(conf, base + "user: no-such-tern-user\ngroup: no-such-tern-group\n" + zones + allow)
    for args in (["--check-config", "-c", conf], ["-c", conf]):
        rc, out, err = run_ternd(b, args)
        expect(rc == 1, "ternd %s with a missing user exited %d:\n%s" % (" ".join(args), rc, err))
        want = ("%s:3: user 'no-such-tern-user': no such user; %s:4: group 'no-such-tern-group': "
                "no such group" % (conf, conf))
        expect(want in err, "ternd %s: want %r in:\n%s" % (" ".join(args), want, err))
        expect("listening" not in err, "ternd %s bound its sockets before saying so:\n%s"
               % (" ".join(args), err))
    # the same from the flags: named by the flag
    write_atomic(conf, base + zones + allow)
    rc, out, err = run_ternd(b, ["--check-config", "-c", conf, "--user", "no-such-flag-user"])
    expect(rc == 1 and "user 'no-such-flag-user' (--user): no such user" in err,
           "--user no-such-flag-user: want \"user 'no-such-flag-user' (--user): no such user\":\n%s"
           % err)
    rc, out, err = run_ternd(b, ["--check-config", "-c", conf, "--group", "no-such-flag-group"])
    expect(rc == 1 and "group 'no-such-flag-group' (--group): no such group" in err,
           "--group no-such-flag-group: no error naming the flag:\n%s" % err)
    # a file value replaced by a flag is named by the flag, not by the file's line
    write_atomic(conf, base + "user: nobody\n" + zones + allow)
    rc, out, err = run_ternd(b, ["--check-config", "-c", conf, "--user", "no-such-flag-user"])
    expect(rc == 1 and "user 'no-such-flag-user' (--user)" in err and conf + ":3" not in err,
           "--user over the file's user: want the flag named, not line 3:\n%s" % err)
    # run directories: one missing level is created at startup (and only announced by
    # --check-config); two missing levels are an error naming the line
    write_atomic(conf, base + 'pid_file: "two/levels/ternd.pid"\n' + zones + allow)
    rc, out, err = run_ternd(b, ["--check-config", "-c", conf])
    want = ("%s:3: pid_file '%s/two/levels/ternd.pid': directory %s/two/levels does not exist, "
            "nor does %s/two to create it in" % (conf, d, d, d))
    expect(rc == 1 and want in err, "--check-config with pid_file two levels down: want %r, got "
           "%d:\n%s" % (want, rc, err))
    write_atomic(conf, base + 'pid_file: "run/ternd.pid"\ncontrol_socket: "run/ternd.sock"\n'
                 + zones + allow)
    rc, out, err = run_ternd(b, ["--check-config", "-c", conf])
    expect(rc == 0, "--check-config with a creatable run directory exited %d:\n%s" % (rc, err))
    expect("directory %s/run does not exist; ternd will create it" % d in err,
           "--check-config does not say it will create the run directory:\n%s" % err)
    expect(not os.path.exists(os.path.join(d, "run")), "--check-config created the run directory")
    # a directory name from the config reaches the log escaped, on one line
    write_atomic(conf, base + 'pid_file: "r\\nun/ternd.pid"\n' + zones + allow)
    rc, out, err = run_ternd(b, ["--check-config", "-c", conf])
    expect(rc == 0 and "directory %s/r\\010un does not exist; ternd will create it" % d in err,
           "--check-config with a newline in pid_file's directory: want it escaped:\n%s" % err)
    t = Tern(ctx, "runtime")
    port = servers.free_port()
    za = t.write_zone(ZONE_A, "run")
    t.write_config(simple_config(port, [(ZONE_A, za)],
                                 'pid_file: "run/ternd.pid"\ncontrol_socket: "run/ternd.sock"\n'))
    t.start(answers(ZONE_A, "run", port))
    run = t.path("run")
    ok, _ = poll(lambda: os.path.exists(os.path.join(run, "ternd.pid")), True)
    expect(ok, "no pid file in the created %s:\n%s" % (run, t.log_text()))
    mode = os.stat(run).st_mode & 0o7777
    expect(mode == 0o755, "the created run directory has mode %o, want 755" % mode)
    expect(os.path.exists(os.path.join(run, "ternd.sock")), "no control socket in %s" % run)


def check_config_error_no_leak(ctx):
    """A config error at startup (after options that allocate) exits 1 with the error only."""
    d = os.path.join(ctx.workdir, "conferror")
    os.makedirs(d)
    write_atomic(os.path.join(d, "ok.zone"), zone_text(ZONE_A, "ok"))
    conf = os.path.join(d, "late.yaml")
    write_atomic(conf, 'identity: "id"\nversion: "v"\n' + zones_yaml([(ZONE_A, "ok.zone")])
                 + "unknown_at_the_end: 1\n")
    line = 6  # identity, version, zones:, - origin, file, the unknown key
    for args in (["-c", conf], ["--check-config", "-c", conf]):
        rc, out, err = run_ternd(ctx.binary, args)  # raises on a sanitizer (leak) report
        expect(rc == 1, "ternd %s exited %d, want 1:\n%s" % (" ".join(args), rc, err))
        expect("late.yaml:%d" % line in err and "unknown_at_the_end" in err,
               "ternd %s: stderr does not name late.yaml:%d and the key:\n%s"
               % (" ".join(args), line, err))


def check_root_refused(ctx):
    """As root without allow_root (and no user): ternd refuses to serve and leaves no pid file."""
    if not AS_ROOT:
        raise Skip("not running as root")
    d = os.path.join(ctx.workdir, "root")
    os.makedirs(d)
    write_atomic(os.path.join(d, "ok.zone"), zone_text(ZONE_A, "ok"))
    conf = os.path.join(d, "root.yaml")
    write_atomic(conf, 'listen: ["%s:%d"]\nworkers: 1\npid_file: "ternd.pid"\n'
                 % (LOOPBACK, servers.free_port()) + zones_yaml([(ZONE_A, "ok.zone")]))
    rc, out, err = run_ternd(ctx.binary, ["-c", conf])
    expect(rc != 0, "ternd as root without allow_root exited 0:\n%s%s" % (out, err))
    expect("allow_root" in err, "ternd as root without allow_root: stderr does not mention "
           "allow_root:\n%s" % err)
    left = [n for n in os.listdir(d) if n.startswith("ternd.pid")]
    expect(not left, "pid file left behind after the refusal: %s" % left)


def check_cli(ctx):
    b = ctx.binary
    rc, out, err = run_ternd(b, ["--version"])
    expect(rc == 0, "--version exited %d:\n%s" % (rc, err))
    expect(out.startswith("ternd "), "--version printed %r, want 'ternd VERSION'" % out)
    rc, out, err = run_ternd(b, ["--help"])
    expect(rc == 0, "--help exited %d:\n%s" % (rc, err))
    expect("log_level" in out, "--help does not list log_level:\n%s" % out[:2000])
    for key in ("listen", "pid_file", "identity", "workers"):
        expect(key in out, "--help does not list %s" % key)
    # every key of a zone, each on a row of its own under "zones"
    for key in ("origin", "file", "format", "acl", "dnssec", "keys", "primary", "notify",
                "allow_transfer", "transfer_key", "allow_notify"):
        expect(re.search(r"(?m)^    +%s +\S" % key, out),
               "--help does not list the zone key %s:\n%s" % (key, out[:3000]))
    d = os.path.join(ctx.workdir, "cli")
    os.makedirs(d)
    rc, out, err = run_ternd(b, [], cwd=d)
    expect(rc != 0, "ternd without a listen address exited 0:\n%s%s" % (out, err))
    expect("listen" in err, "ternd without a listen address: stderr does not mention listen:\n%s"
           % err)
    rc, out, err = run_ternd(b, ["--listen", "bogus"], cwd=d)
    expect(rc != 0, "--listen bogus exited 0:\n%s%s" % (out, err))
    expect("bogus" in err, "--listen bogus: stderr does not name the value:\n%s" % err)
    rc, out, err = run_ternd(b, ["--no-such-flag"], cwd=d)
    expect(rc != 0, "--no-such-flag exited 0")
    rc, out, err = run_ternd(b, ["-c", os.path.join(d, "missing.yaml")], cwd=d)
    expect(rc != 0, "-c with a missing file exited 0")
    expect("missing.yaml" in err, "-c with a missing file: stderr does not name it:\n%s" % err)


def redins_config(port, protocols, zone_file, extra=""):
    server = ",\n".join('    {"ip": "%s", "port": %d, "protocol": "%s"}' % (LOOPBACK, port, p)
                        for p in protocols)
    if AS_ROOT:
        extra += '  "allow_root": true,\n'
    return ('{\n  "server": [\n%s\n  ],\n%s'
            '  "zones": [{"origin": "%s", "file": "%s"}]\n}\n'
            % (server, extra, ZONE_A, zone_file))


def check_redins_json(ctx):
    b = ctx.binary
    rc, out, err = run_ternd(b, ["--check-config", "-c", "conf/redins-example.json"], cwd=REPO)
    expect(rc == 0, "--check-config -c conf/redins-example.json exited %d:\n%s%s"
           % (rc, out, err))
    # "server" with one UDP entry: UDP only
    t = Tern(ctx, "redins-udp", "config.json")
    port = servers.free_port()
    t.write_zone(ZONE_A, "json")
    t.write_config(redins_config(port, ["udp"], ZONE_A + ".zone",
                                 '  "error_log": {"enable": true, "level": "info", '
                                 '"target": "stderr", "format": "text"},\n'))
    t.start(answers(ZONE_A, "json", port))
    expect_answers(ZONE_A, "json", port)
    expect_tcp_refused(port)
    t.wait_ready_line()
    expect(any("listening on 127.0.0.1:%d (udp)" % port in l for l in t.lines()),
           "no 'listening on 127.0.0.1:%d (udp)' line:\n%s" % (port, t.log_text()))
    # a "redis" block: refused, naming its line (3)
    conf = t.path("redis.json")
    write_atomic(conf, '{\n  "server": [{"ip": "127.0.0.1", "port": %d, "protocol": "udp"}],\n'
                 '  "redis": {"ip": "127.0.0.1", "port": 6379},\n'
                 '  "zones": [{"origin": "%s", "file": "%s.zone"}]\n}\n'
                 % (servers.free_port(), ZONE_A, ZONE_A))
    for args in (["--check-config", "-c", conf], ["-c", conf]):
        rc, out, err = run_ternd(b, args)
        expect(rc != 0, "ternd %s with a redis block exited 0:\n%s%s" % (" ".join(args), out, err))
        expect("handler" in err, "ternd %s: redins' redis keys at the top level: no hint that "
               "they belong under handler:\n%s" % (" ".join(args), err))
        expect("redis.json:3" in err and "redis" in err.replace("redis.json", ""),
               "ternd %s: the error does not name redis.json:3 and the key:\n%s"
               % (" ".join(args), err))
    # handler.upstream is ANAME's upstream list now; upstream_fallback: true stays refused
    conf = t.path("upstream.json")
    write_atomic(conf, '{\n  "server": [{"ip": "127.0.0.1", "port": %d, "protocol": "udp"}],\n'
                 '  "handler": {\n    "upstream": [{"ip": "1.1.1.1", "port": 53}]\n  },\n'
                 '  "zones": [{"origin": "%s", "file": "%s.zone"}]\n}\n'
                 % (servers.free_port(), ZONE_A, ZONE_A))
    rc, out, err = run_ternd(b, ["--check-config", "-c", conf])
    expect(rc == 0, "ternd --check-config with handler.upstream (ANAME upstreams):\n%s" % err)
    conf = t.path("fallback.json")
    write_atomic(conf, '{\n  "server": [{"ip": "127.0.0.1", "port": %d, "protocol": "udp"}],\n'
                 '  "handler": {\n    "upstream_fallback": true\n  },\n'
                 '  "zones": [{"origin": "%s", "file": "%s.zone"}]\n}\n'
                 % (servers.free_port(), ZONE_A, ZONE_A))
    rc, out, err = run_ternd(b, ["--check-config", "-c", conf])
    expect(rc != 0 and "open resolver" in err and "fallback.json:4" in err,
           "ternd --check-config with upstream_fallback: true: want 'open resolver' at line 4:\n%s"
           % err)


def check_redins_json_merge(ctx):
    """udp and tcp entries for one ip:port become one listener serving both."""
    t = Tern(ctx, "redins-merge", "config.json")
    port = servers.free_port()
    t.write_zone(ZONE_A, "merged")
    t.write_config(redins_config(port, ["udp", "tcp"], ZONE_A + ".zone"))
    t.start(answers(ZONE_A, "merged", port))
    expect_answers(ZONE_A, "merged", port)
    expect_answers(ZONE_A, "merged", port, tcp=True)
    t.wait_ready_line()
    lines = [l for l in t.lines() if "listening on" in l]
    expect(len(lines) == 1 and "(udp, tcp)" in lines[0],
           "want one 'listening on 127.0.0.1:%d (udp, tcp)' line, got %s" % (port, lines))


def check_health_config(ctx):
    """Health-check settings are validated by --check-config and at startup, with file:line."""
    b = ctx.binary
    d, base, zones, allow = config_dir(ctx, "health")
    bad = [
        ("port.yaml",
         "health:\n"                       # 3
         "  check_interval_ms: 5000\n"     # 4
         "  checks:\n"                     # 5
         "    - address: 192.0.2.1\n"      # 6
         "    - address: 192.0.2.2\n"      # 7
         "      protocol: https\n"         # 8
         "    - address: 192.0.2.3\n"      # 9
         "      port: 0\n",                # 10
         10, "health: checks[2]: port: 0 is out of range 1..65535"),
        ("proto.yaml",
         "health:\n  checks:\n    - address: \"2001:db8::1\"\n      protocol: ftp\n",
         6, 'health: checks[0]: protocol: expected http, https, tcp, icmp or ping, got "ftp"'),
        ("twice.yaml",
         "health:\n  checks:\n    - {address: 192.0.2.1, protocol: tcp, port: 22}\n"
         "    - {address: 192.0.2.1, protocol: tcp, port: 22, timeout: 5}\n",
         6, "health: checks[1]: 192.0.2.1:22 tcp is given twice (first at line 5)"),
        ("redis.yaml",
         "health:\n  redis:\n    address: 127.0.0.1:6379\n    zone_reload: 60\n",
         6, "health: redis: zone_reload: not a key of health: redis"),
        ("log.yaml",
         "health:\n  log:\n    format: text\n",
         5, 'health: log: missing "path" (target file writes to it)'),
        ("both.yaml",
         "health: {}\nhealthcheck:\n  enable: false\n",
         4, "healthcheck: conflicts with health at line 3 (give one of them)"),
        ("handler.yaml",
         "handler:\n  healthcheck:\n    enable: true\n    log:\n      target: kafka\n",
         7, 'handler: healthcheck: log: target: "kafka" is not supported'),
    ]
    for name, text, line, want in bad:
        conf = os.path.join(d, name)
        write_atomic(conf, base + text + zones + allow)
        for args in (["--check-config", "-c", conf], ["-c", conf]):
            rc, out, err = run_ternd(b, args)  # raises on a sanitizer (leak) report
            expect(rc == 1, "ternd %s exited %d, want 1:\n%s" % (" ".join(args), rc, err))
            full = "%s:%d: %s" % (conf, line, want)
            expect(full in err, "ternd %s: want %r in:\n%s" % (" ".join(args), full, err))
            expect("listening" not in err, "ternd %s bound its sockets before the error:\n%s"
                   % (" ".join(args), err))
    # valid: every kind of check, a log file in a directory that does not exist (yet)
    conf = os.path.join(d, "good.yaml")
    write_atomic(conf, base +
                 "health:\n"
                 "  check_interval_ms: 1000\n"
                 "  log: {target: file, path: nowhere/yet/health.log, format: text}\n"
                 "  checks:\n"
                 "    - {address: 127.0.0.1, owner: www.cfg.test, uri: /health, expect: [200, 204]}\n"
                 "    - {address: \"::1\", protocol: https, tls_verify: false}\n"
                 "    - {address: 127.0.0.1, protocol: tcp, port: 22}\n"
                 "    - {address: 127.0.0.1, protocol: icmp}\n" + zones + allow)
    rc, out, err = run_ternd(b, ["--check-config", "-c", conf])
    expect(rc == 0, "--check-config of a valid health block exited %d:\n%s" % (rc, err))
    expect(not os.path.exists(os.path.join(d, "nowhere")),
           "--check-config created the health log's directory")
    # valid: redins' healthcheck in handler, with its own Redis and a log file
    conf = os.path.join(d, "redins.json")
    write_atomic(conf, '{\n  "handler": {\n    "healthcheck": {\n      "enable": true,\n'
                 '      "max_requests": 10, "max_pending_requests": 100,\n'
                 '      "update_interval": 600, "check_interval": 600,\n'
                 '      "redis": {"ip": "127.0.0.1", "port": 6379, "prefix": "healthcheck_",\n'
                 '                "connection": {"connect_timeout": 500}},\n'
                 '      "log": {"enable": true, "level": "info", "target": "file",\n'
                 '              "format": "json", "path": "nowhere/healthcheck.log"}}},\n'
                 '  "zones": [{"origin": "%s", "file": "ok.zone"}]\n}\n' % ZONE_A)
    rc, out, err = run_ternd(b, ["--check-config", "-c", conf, "--listen", "127.0.0.1:53"])
    expect(rc == 0, "--check-config of redins' handler.healthcheck exited %d:\n%s" % (rc, err))


LIMIT_YAML = (
    "acl:\n"
    "  allow: [127.0.0.0/8, \"::1\", 192.0.2.0/24]\n"
    "  deny: 127.0.0.66\n"
    "  action: refuse\n"
    "ratelimit:\n"
    "  enable: true\n"
    "  rate: 6000\n"
    "  burst: 100\n"
    "  whitelist: [127.0.0.1]\n"
    "  blacklist: [\"2001:db8::/32\"]\n"
    "  action: drop\n"
    "  blacklist_action: refuse\n"
    "  table_size: 4096\n"
    "rrl:\n"
    "  rate: 1000\n"
    "  burst: 0\n"
    "  slip: 2\n"
    "  ipv4_prefix: 24\n"
    "  ipv6_prefix: 56\n"
    "  whitelist: [127.0.0.1]\n"
    "  table_size: 4096\n"
    "  log: true\n"
    "cookies:\n"
    "  enable: true\n"
    "  secret: \"000102030405060708090a0b0c0d0e0f\"\n"
    "  require: false\n"
    "tcp_max_per_client: 32\n"
    "tcp_client_prefix_v4: 32\n"
    "tcp_client_prefix_v6: 64\n")


def check_limit_config(ctx):
    """The flood-resistance blocks are validated by --check-config and at startup, with
    file:line and the key's path; valid ones (tern's YAML, redins' JSON) pass and serve."""
    b = ctx.binary
    d, base, zones, allow = config_dir(ctx, "limit")
    bad = [
        ("hostbits.yaml",
         "acl:\n"                                                   # 3
         "  allow: [192.0.2.0/24, \"2001:db8::/32\", 192.0.2.1/24]\n",  # 4
         4, 'acl: allow[2]: bad prefix "192.0.2.1/24": host bits set; did you mean '
            '192.0.2.0/24?'),
        ("zoneacl.yaml",
         "zones:\n  - origin: b.test\n    file: ok.zone\n    acl:\n      deny:\n"
         "        - 10.0.0.0/33\n",
         8, 'zones[0]: acl: deny[0]: bad prefix "10.0.0.0/33": length 33 is out of range '
            '0..32 for an IPv4 prefix'),
        ("action.yaml",
         "acl: {deny: [10.0.0.0/8], action: reject}\n",
         3, 'acl: action: expected refuse or drop, got "reject"'),
        ("rate0.yaml",
         "ratelimit:\n  whitelist: [127.0.0.1]\n  rate: 0\n",
         5, "ratelimit: rate: 0 is out of range 1..6000000 (to turn the limit off, give "
            "enable: false)"),
        ("slip.yaml",
         "rrl:\n  rate: 10\n  slip: 101\n",
         5, "rrl: slip: 101 is out of range 0..100"),
        ("secret.yaml",
         'cookies:\n  secret: "0011"\n',
         4, "cookies: secret: expected 32 hex digits (16 bytes), got 4 characters"),
        ("rotate.yaml",
         'cookies:\n  secret: "000102030405060708090a0b0c0d0e0f"\n  rotate_s: 3600\n',
         5, "cookies: rotate_s: not with secret (a shared secret is never rotated; give one "
            "of them)"),
        ("tcpv6.yaml",
         "tcp_client_prefix_v6: 8\n",
         3, "tcp_client_prefix_v6: 8 is out of range 16..128"),
    ]
    for name, text, line, want in bad:
        conf = os.path.join(d, name)
        write_atomic(conf, base + text + (zones if "zones:" not in text else "") + allow)
        for args in (["--check-config", "-c", conf], ["-c", conf]):
            rc, out, err = run_ternd(b, args)  # raises on a sanitizer (leak) report
            expect(rc == 1, "ternd %s exited %d, want 1:\n%s" % (" ".join(args), rc, err))
            full = "%s:%d: %s" % (conf, line, want)
            expect(full in err, "ternd %s: want %r in:\n%s" % (" ".join(args), full, err))
            expect("listening" not in err, "ternd %s bound its sockets before the error:\n%s"
                   % (" ".join(args), err))
    # redins' JSON: rate 0 is refused (redins divided by it), naming the line
    conf = os.path.join(d, "rate0.json")
    write_atomic(conf, '{\n  "server": [{"ip": "127.0.0.1", "port": %d}],\n'
                 '  "ratelimit": {"enable": false,\n    "rate": 0, "burst": 10},\n'
                 '  "zones": [{"origin": "%s", "file": "ok.zone"}]\n}\n'
                 % (servers.free_port(), ZONE_A))
    rc, out, err = run_ternd(b, ["--check-config", "-c", conf])
    want = "%s:4: ratelimit: rate: 0 is out of range 1..6000000" % conf
    expect(rc == 1 and want in err, "redins' rate 0: want exit 1 and %r, got %d:\n%s"
           % (want, rc, err))
    # valid: every block with every key, checked and then served
    t = Tern(ctx, "limit-good")
    port = servers.free_port()
    za = t.write_zone(ZONE_A, "limited")
    t.write_config(simple_config(port, [(ZONE_A, za)], LIMIT_YAML))
    rc, out, err = run_ternd(b, ["--check-config", "-c", t.conf])
    expect(rc == 0, "--check-config of every flood-resistance block exited %d:\n%s" % (rc, err))
    t.start(answers(ZONE_A, "limited", port))
    expect_answers(ZONE_A, "limited", port)
    expect_answers(ZONE_A, "limited", port, tcp=True)
    # valid: redins' config.json with its ratelimit block (enable left out: off, as in redins)
    r = Tern(ctx, "limit-redins", "config.json")
    rport = servers.free_port()
    r.write_zone(ZONE_A, "redins")
    r.write_config(redins_config(rport, ["udp", "tcp"], ZONE_A + ".zone",
                                 '  "ratelimit": {"rate": 1, "burst": 0, '
                                 '"whitelist": ["127.0.0.2"], "blacklist": ["10.10.10.1"]},\n'))
    rc, out, err = run_ternd(b, ["--check-config", "-c", r.conf])
    expect(rc == 0, "--check-config of redins' ratelimit exited %d:\n%s" % (rc, err))
    r.start(answers(ZONE_A, "redins", rport))
    # rate 1 a minute, burst 0 would refuse the second query if the block were on
    for _ in range(5):
        expect_answers(ZONE_A, "redins", rport)


def check_reload_limit(ctx):
    t = Tern(ctx, "relimit")
    port = servers.free_port()
    za = t.write_zone(ZONE_A, "a")
    t.write_config(simple_config(port, [(ZONE_A, za)], "acl: {allow: [127.0.0.0/8]}\n"))
    t.start(answers(ZONE_A, "a", port))
    t.wait_ready_line()

    def reload(extra):
        mark = t.mark()
        t.write_config(simple_config(port, [(ZONE_A, za)], extra))
        t.signal(signal.SIGHUP)
        done = t.wait_log(lambda l: is_reload_ok(l) or is_reload_failed(l), mark)
        expect(done is not None and is_reload_ok(done), "the reload with %r did not succeed: %s"
               % (extra, done))
        return [l for l in t.lines()[mark:] if "only on restart" in l]

    warn = reload("acl: {allow: [127.0.0.0/8], deny: 127.0.0.1/32}\n")
    expect(not warn, "an acl change warned: %s" % warn)
    r = query("www." + ZONE_A, "TXT", port)
    expect(r.rcode() == dns.rcode.REFUSED, "127.0.0.1 denied by the reloaded acl: rcode %s"
           % dns.rcode.to_text(r.rcode()))
    warn = reload("acl: ~\ntcp_max_per_client: 8\ntcp_client_prefix_v4: 24\n")
    expect(len(warn) == 1 and "reload: tcp_max_per_client, tcp_client_prefix_v4 changed; they "
           "apply only on restart" in warn[0], "want one restart-only line naming "
           "tcp_max_per_client and tcp_client_prefix_v4, got %s" % warn)
    expect_answers(ZONE_A, "a", port)  # the acl is gone


INFO_LINE = re.compile(r"^ternd: (info|warning|debug):")


def log_level_error_server(ctx, name):
    t = Tern(ctx, name)
    port = servers.free_port()
    za = t.write_zone(ZONE_A, "quiet")
    t.write_config(simple_config(port, [(ZONE_A, za)], "log_level: error\n"))
    t.start(answers(ZONE_A, "quiet", port))
    expect_answers(ZONE_A, "quiet", port)
    expect_answers(ZONE_A, "quiet", port, tcp=True)
    rc = t.stop()
    expect(rc == 0, "ternd exited with %s on SIGTERM:\n%s" % (rc, t.log_text()))
    return t.lines()


def check_log_level_error_no_listening(ctx):
    lines = log_level_error_server(ctx, "quiet-listen")
    bad = [l for l in lines if "listening on" in l or "ready:" in l]
    expect(not bad, "log_level: error, yet: %s" % bad)


def check_log_level_error_no_info(ctx):
    lines = log_level_error_server(ctx, "quiet-info")
    bad = [l for l in lines if INFO_LINE.match(l)]
    expect(not bad, "log_level: error, yet %d info/warning line(s) on stderr: %s"
           % (len(bad), bad))


def check_log_target_stdout(ctx):
    """log_target: stdout sends every log line to stdout, none to stderr."""
    t = Tern(ctx, "stdout")
    port = servers.free_port()
    za = t.write_zone(ZONE_A, "out")
    t.write_config(simple_config(port, [(ZONE_A, za)], "log_target: stdout\n"))
    t.start(answers(ZONE_A, "out", port), split=True)
    t.wait_ready_line()  # the "ready:" line arrives on stdout (output.log)
    rc = t.stop()
    expect(rc == 0, "ternd exited with %s on SIGTERM:\n%s" % (rc, t.log_text()))
    with open(t.path("stderr.log"), "rb") as f:
        err = f.read().decode("utf-8", "replace")
    bad = [l for l in err.split("\n") if l.startswith("ternd: ")]
    expect(not bad, "log_target: stdout, yet %d log line(s) on stderr: %s" % (len(bad), bad))


CHECKS = [
    ("listen_protocol_flags", check_listen_protocol_flags),
    ("listen_ipv6", check_listen_ipv6),
    ("listen_port_zero", check_listen_port_zero),
    ("pid_file", check_pid_file),
    ("sigterm_exit", check_sigterm_exit),
    ("sigint_exit", check_sigint_exit),
    ("reload_identity_version", check_reload_identity_version),
    ("reload_listen_restart_only", check_reload_listen_restart_only),
    ("reload_tcp_restart_only", check_reload_tcp_restart_only),
    ("reload_zones_add_remove", check_reload_zones_add_remove),
    ("reload_bad_config", check_reload_bad_config),
    ("check_config", check_check_config),
    ("check_config_runtime", check_check_config_runtime),
    ("config_error_no_leak", check_config_error_no_leak),
    ("root_refused", check_root_refused),
    ("cli", check_cli),
    ("redins_json", check_redins_json),
    ("redins_json_merge", check_redins_json_merge),
    ("health_config", check_health_config),
    ("limit_config", check_limit_config),
    ("reload_limit", check_reload_limit),
    ("log_level_error_no_listening", check_log_level_error_no_listening),
    ("log_level_error_no_info", check_log_level_error_no_info),
    ("log_target_stdout", check_log_target_stdout),
]


class Ctx:
    def __init__(self, binary, workdir):
        self.binary = binary
        self.workdir = workdir
        self.started = []  # Tern instances, stopped after each check


def run_check(ctx, fn):
    """Run one check; (status, message) with status "ok", "FAIL" or "skip"."""
    ctx.started = []
    status, msg = "ok", None
    try:
        fn(ctx)
    except Skip as e:
        status, msg = "skip", str(e)
    except Failure as e:
        status, msg = "FAIL", str(e)
    except Exception as e:
        status, msg = "FAIL", "%s: %s" % (type(e).__name__, e)
        if os.environ.get("VERBOSE"):
            traceback.print_exc()
    finally:
        for t in ctx.started:
            was_running = t.alive()
            rc = t.stop()
            # every ternd must end cleanly: status 0 (ASan/LSan reports make it non-zero)
            if was_running and rc != 0 and status != "FAIL":
                status, msg = "FAIL", ("ternd exited with %s on SIGTERM:\n%s"
                                       % (rc, t.log_text()))
            report = sanitizer_report("\n".join(t.lines()))
            if report and status != "FAIL":
                status, msg = "FAIL", "sanitizer report in %s: %s\n%s" % (
                    t.log_path, report, t.log_text())
            if status == "FAIL" and os.environ.get("VERBOSE"):
                print("--- %s log ---\n%s\n--- end ---" % (t.dir, t.log_text()))
    return status, msg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("only", nargs="*", help="run only these checks")
    args = ap.parse_args()
    if not args.ternd or not os.access(args.ternd, os.X_OK):
        print("test_config: no ternd binary (--ternd PATH or $TERND), got %r" % args.ternd)
        return 2
    checks = [(n, f) for n, f in CHECKS if not args.only or n in args.only]
    if args.only and len(checks) != len(args.only):
        print("test_config: unknown check(s); known: %s" % " ".join(n for n, _ in CHECKS))
        return 2
    ctx = Ctx(os.path.abspath(args.ternd), tempfile.mkdtemp(prefix="tern-config-"))
    counts = {"ok": 0, "FAIL": 0, "skip": 0}
    try:
        for name, fn in checks:
            t0 = time.monotonic()
            status, msg = run_check(ctx, fn)
            counts[status] += 1
            text = {"ok": "ok", "skip": "skip: %s" % msg, "FAIL": "FAIL: %s" % msg}[status]
            print("%-30s %s (%.1f s)" % (name, text, time.monotonic() - t0), flush=True)
    finally:
        if args.keep:
            print("kept %s" % ctx.workdir)
        else:
            shutil.rmtree(ctx.workdir, ignore_errors=True)
    print("%d passed, %d failed, %d skipped" % (counts["ok"], counts["FAIL"], counts["skip"]))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
