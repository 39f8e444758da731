#!/usr/bin/python3
"""A stalled log reader must not hang ternd: reload and shutdown go on, lines are dropped.

ternd runs with its standard output and standard error on one pipe that this test holds open
and never reads (a stuck journal), and the request log on stdout. Checks:

  - queries fill the pipe: answers go on (the request log and the server log never wait);
  - a zone change sent with SIGHUP is served within a generous bound (the loader, and the
    signal thread that logs "SIGHUP: reloading", do not block on the full pipe);
  - the request log's drops are counted (tern_qlog_requests_dropped_total);
  - SIGTERM: ternd exits within STOP_BOUND seconds (it is SIGKILLed after that, and the check
    fails), with status 0.

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded; only the process started here is stopped.

    test_log_stall.py --ternd build/ternd
"""

import argparse
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import time

import dns.exception
import dns.message
import dns.query
import dns.rcode

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from test_qlog import metrics  # noqa: E402
from servers import LOOPBACK, Failure, expect, report, run_check  # noqa: E402

TIMEOUT = 1.0
START_BOUND = 20.0  # seconds for ternd to answer after start (a sanitizer build is slow)
RELOAD_BOUND = 10.0  # seconds from SIGHUP until the change is served
STOP_BOUND = 10.0  # seconds from SIGTERM until ternd has exited (the README promises < 1 s)
MAX_QUERIES = 20000  # a bound on the load that fills the pipe (a line is ~300 bytes)

ZONE = """$ORIGIN stall.test.
$TTL 60
@ SOA ns1 hostmaster {serial} 3600 600 86400 60
@ NS ns1
ns1 A 192.0.2.53
www A 192.0.2.{last}
"""


def write_zone(path, serial, last):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(ZONE.format(serial=serial, last=last))
    os.rename(tmp, path)


def ask(port, name="www.stall.test.", timeout=TIMEOUT):
    q = dns.message.make_query(name, "A")
    return dns.query.udp(q, LOOPBACK, port=port, timeout=timeout)


def address(port):
    try:
        r = ask(port)
    except (dns.exception.Timeout, OSError):
        return None
    for rrset in r.answer:
        for rd in rrset:
            return rd.address
    return None


def pipe_bytes(fd):
    """Bytes waiting in the pipe, read without reading them (FIONREAD)."""
    buf = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    return int.from_bytes(buf, sys.byteorder)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    args = ap.parse_args()
    if not args.ternd:
        ap.error("--ternd is required")
    work = tempfile.mkdtemp(prefix="tern-stall-")
    proc = None
    rfd = wfd = -1
    results = []
    try:
        zone = os.path.join(work, "stall.zone")
        write_zone(zone, 1, 1)
        port, mport = servers.free_port(), servers.free_port()
        conf = os.path.join(work, "ternd.yaml")
        with open(conf, "w") as f:
            f.write('listen: ["%s:%d"]\nworkers: 1\nmetrics_listen: "127.0.0.1:%d"\n'
                    % (LOOPBACK, port, mport))
            if os.geteuid() == 0:
                f.write("allow_root: true\n")
            f.write("query_log:\n  requests:\n    target: stdout\n    format: json\n")
            f.write('zones:\n  - origin: "stall.test."\n    file: "%s"\n' % zone)
        rfd, wfd = os.pipe()
        # the reader is this test, which never reads: a journal that stopped reading (wfd is
        # kept to fill the pipe's last bytes)
        proc = subprocess.Popen([os.path.abspath(args.ternd), "-c", conf], stdin=subprocess.DEVNULL, stdout=wfd,
                                stderr=wfd, cwd=work)
        deadline = time.monotonic() + START_BOUND
        while address(port) != "192.0.2.1":
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("ternd did not start (status %s)" % proc.poll())
            time.sleep(0.1)
        size = fcntl.fcntl(rfd, 1032)  # F_GETPIPE_SZ

        def fill():
            # full: more than half the pipe's size, and 300 more queries add nothing (a pipe
            # takes whole pages, so full is somewhat below its size)
            sent, last, still = 0, -1, 0
            while still < 3 and sent < MAX_QUERIES:
                for _ in range(100):
                    ask(port, timeout=2.0)
                sent += 100
                time.sleep(0.1)  # the writer drains the rings every 20 ms
                now = pipe_bytes(rfd)
                still = still + 1 if now == last and now > size // 2 else 0
                last = now
            expect(still >= 3, "the pipe did not fill after %d queries (%d of %d bytes)"
                   % (sent, pipe_bytes(rfd), size))
            # to the last byte: a short line may still fit the last page's rest, and a stuck
            # journal's pipe ends up with none (our own non-blocking description of the pipe,
            # so ternd's stays as it was)
            top = os.open("/proc/self/fd/%d" % wfd, os.O_WRONLY | os.O_NONBLOCK)
            try:
                for chunk in (4096, 512, 64, 1):
                    while True:
                        try:
                            os.write(top, b"\n" * chunk)
                        except BlockingIOError:
                            break
            finally:
                os.close(top)
            # and past full: the writers now meet a pipe that takes nothing
            for _ in range(500):
                r = ask(port, timeout=2.0)
                expect(r.rcode() == dns.rcode.NOERROR, "rcode %s" % dns.rcode.to_text(r.rcode()))

        run_check(results, "queries fill the unread pipe, answers go on", fill)

        def reload():
            write_zone(zone, 2, 2)
            os.kill(proc.pid, signal.SIGHUP)
            deadline = time.monotonic() + RELOAD_BOUND
            while address(port) != "192.0.2.2":
                if time.monotonic() > deadline:
                    raise Failure("the change was not served %.0f s after SIGHUP" % RELOAD_BOUND)
                time.sleep(0.2)

        run_check(results, "SIGHUP with the pipe full: the change is served", reload)

        def counted():
            m = metrics(mport, "tern_")
            expect(m.get("tern_qlog_requests_dropped_total", 0) > 0,
                   "no request-log drops counted: %s" % {k: v for k, v in m.items()
                                                         if "drop" in k})
            # the server log's few lines since the pipe filled wait in its backlog: none lost
            expect("tern_log_dropped_total" in m, "no tern_log_dropped_total in the metrics")

        run_check(results, "drops counted in the metrics", counted)

        def stop():
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(timeout=STOP_BOUND)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
                raise Failure("ternd still running %.0f s after SIGTERM (killed)" % STOP_BOUND)
            expect(rc == 0, "exit status %s" % rc)
            print("  exited %.2f s after SIGTERM" % (time.monotonic() - t0))

        run_check(results, "SIGTERM with the pipe full: ternd exits", stop)
        return report(results)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for fd in (rfd, wfd):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
