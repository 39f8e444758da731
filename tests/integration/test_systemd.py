#!/usr/bin/env python3
"""Service integration: the real ternd talking systemd's notify protocol, privileges, the unit.

A UNIX datagram socket stands in for systemd (NOTIFY_SOCKET); the checks read what ternd sends:
  ready        READY=1 and a STATUS= naming the zones once every listener is open
  reload       SIGHUP -> RELOADING=1 with MONOTONIC_USEC, then READY=1 and STATUS "reload ok"
  failed       a broken zone -> READY=1 again and STATUS "FAILED" with file:line; old data served
  stop         SIGTERM -> STOPPING=1, exit 0 within a second
  root         as root without allow_root: refuses to run (exit 1, says why); with --user nobody
               the process runs as nobody and answers
  unit         the unit configured from conf/ternd.service.in in the build directory runs the
               ternd of its install prefix, has RuntimeDirectory=tern with mode 0755, and
               systemd-analyze verify accepts it (its ternd path pointed at this ternd)
Every wait is bounded; only the processes started here are signalled, by PID.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

import dns.message
import dns.query
import dns.rdatatype

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

Failed = servers.Failure
write = servers.write_atomic
expect = servers.expect

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WAIT = 5.0  # seconds for any one notification or answer






def zone_text(serial, addr, broken=False):
    bad = "oops A 192.0.2.999\n" if broken else ""
    return ("$ORIGIN svc.test.\n$TTL 300\n@ SOA ns1 hostmaster %d 3600 600 86400 60\n"
            "@ NS ns1\nns1 A 192.0.2.53\nwww A %s\n%s" % (serial, addr, bad))


def query_a(port, name="www.svc.test"):
    q = dns.message.make_query(name, "A")
    r = dns.query.udp(q, servers.LOOPBACK, port=port, timeout=1.0)
    for rrset in r.answer:
        if rrset.rdtype == dns.rdatatype.A:
            return rrset[0].address
    return None


class Service:
    """ternd with NOTIFY_SOCKET pointing at our datagram socket."""

    def __init__(self, binary, workdir, extra_args=(), allow_root=True, keep_zone=False):
        self.dir = workdir
        self.port = servers.free_port()
        self.zone = os.path.join(workdir, "svc.zone")
        if not keep_zone:
            write(self.zone, zone_text(1, "192.0.2.1"))
        self.sock_path = os.path.join(workdir, "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.sock_path)
        os.chmod(self.sock_path, 0o777)  # like /run/systemd/notify: ternd may have dropped root
        self.sock.settimeout(WAIT)
        env = dict(os.environ, NOTIFY_SOCKET=self.sock_path)
        argv = [binary, "--listen", "%s:%d" % (servers.LOOPBACK, self.port),
                "--zone", "svc.test=" + self.zone] + list(extra_args)
        if allow_root and os.geteuid() == 0:
            argv.append("--allow-root")
        self.log = open(os.path.join(workdir, "ternd.log"), "wb")
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)

    def next_message(self):
        try:
            data = self.sock.recv(4096)
        except socket.timeout:
            raise Failed("no notification within %.0f s; log:\n%s" % (WAIT, self.log_text()))
        return dict(line.split("=", 1) for line in data.decode().split("\n") if "=" in line)

    def wait_for(self, key, value=None):
        """Messages until one has key (=value); returns it and everything seen before."""
        seen = []
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            m = self.next_message()
            seen.append(m)
            if key in m and (value is None or m[key] == value):
                return m, seen
        raise Failed("no %s=%s within %.0f s; got %r" % (key, value, WAIT, seen))

    def log_text(self):
        self.log.flush()
        with open(os.path.join(self.dir, "ternd.log"), "rb") as f:
            return f.read()[-3000:].decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=WAIT)
        self.sock.close()
        self.log.close()


def check_notify(args, workdir):
    s = Service(args.ternd, workdir)
    try:
        m, _ = s.wait_for("READY", "1")
        status = m.get("STATUS") or s.wait_for("STATUS")[0]["STATUS"]
        expect("1 zones" in status, "STATUS after start does not count the zone: %r" % status)
        expect(query_a(s.port) == "192.0.2.1", "not answering after READY=1")

        write(s.zone, zone_text(2, "192.0.2.2"))
        s.proc.send_signal(signal.SIGHUP)
        m, _ = s.wait_for("RELOADING", "1")
        expect(m.get("MONOTONIC_USEC", "").isdigit(),
               "RELOADING=1 without MONOTONIC_USEC: %r" % m)
        usec = int(m["MONOTONIC_USEC"])
        now = time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6
        expect(abs(now - usec) < 10e6, "MONOTONIC_USEC %d is not CLOCK_MONOTONIC (%d)" % (usec, now))
        m, seen = s.wait_for("READY", "1")
        statuses = [x["STATUS"] for x in seen if "STATUS" in x]
        if "STATUS" not in m:
            statuses.append(s.wait_for("STATUS")[0]["STATUS"])
        else:
            statuses.append(m["STATUS"])
        expect(any("reload ok" in x for x in statuses), "no 'reload ok' STATUS: %r" % statuses)
        expect(query_a(s.port) == "192.0.2.2", "new data not served after READY=1")

        write(s.zone, zone_text(3, "192.0.2.3", broken=True))
        s.proc.send_signal(signal.SIGHUP)
        s.wait_for("RELOADING", "1")
        m, seen = s.wait_for("READY", "1")
        statuses = [x["STATUS"] for x in seen + [m] if "STATUS" in x]
        if not any("FAILED" in x for x in statuses):
            statuses.append(s.wait_for("STATUS")[0]["STATUS"])
        expect(any("FAILED" in x and "svc.zone:7" in x for x in statuses),
               "failed reload STATUS lacks FAILED and svc.zone:7: %r" % statuses)
        expect(query_a(s.port) == "192.0.2.2", "old data not served after a failed reload")

        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        s.wait_for("STOPPING", "1")
        rc = s.proc.wait(timeout=WAIT)
        took = time.monotonic() - t0
        expect(rc == 0, "exit %d after SIGTERM" % rc)
        expect(took < 1.0, "SIGTERM took %.2f s (want < 1 s)" % took)
    finally:
        s.stop()


def check_root(args, workdir):
    binary = args.ternd
    if os.geteuid() != 0:
        print("  (not root: root refusal and --user are not testable here)")
        return
    s = Service(binary, workdir, allow_root=False)
    try:
        rc = s.proc.wait(timeout=WAIT)
        expect(rc != 0, "stayed up as root without allow_root")
        expect("refusing to run as root" in s.log_text(), "no reason given:\n" + s.log_text())
    finally:
        s.stop()
    # nobody must be able to read the zone: a world-readable directory
    os.umask(0o022)
    d = os.path.join(workdir, "nobody")
    os.makedirs(d)
    os.chmod(workdir, 0o755)
    os.chmod(d, 0o755)
    s = Service(binary, d, extra_args=["--user", "nobody"], allow_root=False)
    try:
        s.wait_for("READY", "1")
        with open("/proc/%d/status" % s.proc.pid) as f:
            uids = [line.split()[1:] for line in f if line.startswith("Uid:")][0]
        expect(all(u == "65534" for u in uids), "not running as nobody: Uid %r" % uids)
        expect(query_a(s.port) == "192.0.2.1", "no answer after dropping to nobody")
    finally:
        s.stop()


def check_zones_read_as_user(args, workdir):
    """Zones are read after dropping to the user: a zone file, or a file it includes, that only
    root may read fails startup as it would fail a reload, naming the file."""
    if os.geteuid() != 0:
        print("  (not root: nothing to drop)")
        return
    os.umask(0o022)
    os.chmod(workdir, 0o755)
    secret = os.path.join(workdir, "secret.zone")
    write(secret, "www2 A 192.0.2.66\n")
    os.chmod(secret, 0o600)
    for name in ("own", "include"):
        d = os.path.join(workdir, name)
        os.makedirs(d)
        zone = os.path.join(d, "svc.zone")
        if name == "own":
            write(zone, zone_text(1, "192.0.2.1"))
            os.chmod(zone, 0o600)
        else:
            write(zone, zone_text(1, "192.0.2.1") + "$INCLUDE %s\n" % secret)
        s = Service(args.ternd, d, extra_args=["--user", "nobody"], allow_root=False, keep_zone=True)
        try:
            rc = s.proc.wait(timeout=WAIT)
            log = s.log_text()
            expect(rc != 0, "%s: started although the user cannot read the zone" % name)
            want = zone if name == "own" else secret
            expect("%s: Permission denied" % want in log,
                   "%s: the error does not name the unreadable file:\n%s" % (name, log))
            expect("running as uid 65534" in log, "%s: not read as the user:\n%s" % (name, log))
        finally:
            s.stop()


def check_unit(args, workdir):
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        raise Failed("systemd-analyze not found (package systemd)")
    with open(args.unit) as f:
        text = f.read()
    lines = dict(line.split("=", 1) for line in text.splitlines()
                 if "=" in line and not line.startswith("#"))
    for key in ("ExecStartPre", "ExecStart"):
        cmd = lines.get(key, "").split()
        expect(cmd and cmd[0] == args.installed_ternd, "%s=%s, want the installed %s"
               % (key, lines.get(key), args.installed_ternd))
    expect(lines.get("RuntimeDirectory") == "tern" and lines.get("RuntimeDirectoryMode") == "0755",
           "want RuntimeDirectory=tern and RuntimeDirectoryMode=0755, got %r and %r"
           % (lines.get("RuntimeDirectory"), lines.get("RuntimeDirectoryMode")))
    unit = os.path.join(workdir, "ternd.service")
    with open(unit, "w") as f:
        f.write(text.replace(args.installed_ternd, os.path.abspath(args.ternd)))
    p = subprocess.run([analyze, "verify", unit], capture_output=True, timeout=30)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    # only complaints about this unit count (the host's own units may produce noise)
    ours = [line for line in out.splitlines() if "ternd.service" in line]
    expect(p.returncode == 0 and not ours, "systemd-analyze verify:\n%s" % out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--unit", required=True, help="the configured ternd.service (build dir)")
    ap.add_argument("--installed-ternd", required=True,
                    help="where the install puts ternd (CMAKE_INSTALL_FULL_SBINDIR/ternd)")
    args = ap.parse_args()
    checks = [check_notify, check_root, check_zones_read_as_user, check_unit]
    failed = 0
    for check in checks:
        workdir = tempfile.mkdtemp(prefix="tern-systemd-")
        try:
            check(args, workdir)
            print("ok    %s" % check.__name__)
        except Failed as e:
            failed += 1
            print("FAIL  %s: %s" % (check.__name__, e))
        except Exception:
            failed += 1
            print("FAIL  %s:\n%s" % (check.__name__, traceback.format_exc()))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    print("%d passed, %d failed" % (len(checks) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
