#!/usr/bin/python3
"""Idle and trickling clients cannot hold /metrics or the control socket, nor delay exit.

Starts one ternd with metrics_listen and control_socket, then, in order:

  metrics_fresh_client     16 connections that send nothing and 16 that trickle a request head
                           one byte every 0.5 s (never finishing it) are open on /metrics; a
                           fresh client's GET /metrics is answered within ANSWER_BOUND
  metrics_trickle_cut      every trickling connection is closed by ternd before its trickle
                           ends (TRICKLE s): the request head has a deadline of its own, which
                           each byte does not renew
  ctl_status_queued        18 connections to the control socket that send nothing; `ternctl
                           status` answers within ANSWER_BOUND
  ctl_trickle_cut          a control connection that trickles its request line is answered
                           "error: no request within ..." and closed before its trickle ends
  sigterm_with_idle        16 idle connections on /metrics and 8 on the control socket; after
                           SIGTERM ternd exits 0 within EXIT_BOUND

Bounds are generous (a busy 2-core machine, an ASan build): the old code missed each by far
(a fresh client waited ~10 s or as long as the trickle lasted; `ternctl status` behind 18 idle
connections waited 3 s per connection; exit took ~9 s). Every wait is bounded; only the ternd
started here is stopped. Prints one line per check and "N passed, N failed"; exits 1 on a
failure.

    test_slow_clients.py --ternd build/ternd --ternctl build/ternctl
"""

import argparse
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import Failure, expect, run_check  # noqa: E402

ZONE = ("diff.test", os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "diff.zone"))

IDLE = 16             # connections that send nothing (what used to fill /metrics' pool)
TRICKLING = 16        # connections that trickle a request head
CTL_IDLE = 18         # idle connections on the control socket (more than its old backlog)
TRICKLE = 20.0        # how long a trickling client keeps sending, seconds
TRICKLE_STEP = 0.5    # one byte per connection this often
ANSWER_BOUND = 5.0    # a fresh request must be answered within this, seconds
EXIT_BOUND = 4.0      # ternd must exit within this after SIGTERM, seconds
CONNECT_TIMEOUT = 2.0

SANITIZER = re.compile(r"ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:")

# a request head that never ends within TRICKLE at one byte per TRICKLE_STEP
HEAD = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200


def connect_tcp(port):
    s = socket.create_connection((servers.LOOPBACK, port), timeout=CONNECT_TIMEOUT)
    s.setblocking(False)
    return s


def connect_unix(path):
    """A connected UNIX socket, or None when the server's backlog is full (that is the old
    code's queue: what is connected is enough to show it)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(0.2)
    try:
        s.connect(path)
    except (socket.timeout, BlockingIOError):
        s.close()
        return None
    s.setblocking(False)
    return s


def closed_by_peer(s):
    """True when the peer has closed s (EOF or reset); reads and drops whatever it sent."""
    r, _, _ = select.select([s], [], [], 0)
    if not r:
        return False
    try:
        return s.recv(65536) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class Trickler(threading.Thread):
    """Sends one byte of HEAD on each socket every TRICKLE_STEP for TRICKLE seconds and notes
    when ternd closed each."""

    def __init__(self, socks):
        super().__init__(daemon=True)
        self.socks = socks
        self.closed_at = [None] * len(socks)
        self.start_time = time.monotonic()
        self.stop_flag = threading.Event()

    def run(self):
        i = 0
        end = self.start_time + TRICKLE
        # one byte per open socket each step; ends after TRICKLE or when all are closed
        while time.monotonic() < end and not self.stop_flag.is_set():
            for k, s in enumerate(self.socks):
                if self.closed_at[k] is not None:
                    continue
                if closed_by_peer(s):
                    self.closed_at[k] = time.monotonic()
                    continue
                try:
                    s.send(HEAD[i % len(HEAD):i % len(HEAD) + 1])
                except BlockingIOError:
                    pass
                except OSError:
                    self.closed_at[k] = time.monotonic()
            if all(t is not None for t in self.closed_at):
                return
            i += 1
            self.stop_flag.wait(TRICKLE_STEP)

    def stop(self):
        self.stop_flag.set()
        self.join(timeout=TRICKLE_STEP * 4)


def get_metrics(port, bound):
    """GET /metrics on a fresh connection; the response text, all within bound seconds."""
    deadline = time.monotonic() + bound
    s = socket.create_connection((servers.LOOPBACK, port), timeout=bound)
    try:
        s.setblocking(False)
        s.sendall(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        data = b""
        # reads until ternd closes (HTTP/1.0) or the bound
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure("GET /metrics not answered within %.0f s (%d bytes so far)"
                              % (bound, len(data)))
            r, _, _ = select.select([s], [], [], left)
            if not r:
                continue
            chunk = s.recv(65536)
            if not chunk:
                return data.decode("utf-8", "replace")
            data += chunk
    finally:
        s.close()


class Ctx:
    def __init__(self, ternd, ternctl, workdir):
        self.ternctl = ternctl
        self.sock = os.path.join(workdir, "ternd.sock")
        self.metrics_port = servers.free_port()
        extra = ('control_socket: "%s"\nmetrics_listen: "%s:%d"\n'
                 % (self.sock, servers.LOOPBACK, self.metrics_port))
        self.tern = servers.Ternd(workdir, [ZONE], ternd, extra_yaml=extra)
        self.held = []  # sockets to close at the end

    def close_held(self):
        for s in self.held:
            s.close()
        self.held = []


def check_metrics_fresh_client(ctx):
    idle = [connect_tcp(ctx.metrics_port) for _ in range(IDLE)]
    ctx.held += idle
    trickling = [connect_tcp(ctx.metrics_port) for _ in range(TRICKLING)]
    ctx.held += trickling
    ctx.trickler = Trickler(trickling)
    ctx.trickler.start()
    t0 = time.monotonic()
    text = get_metrics(ctx.metrics_port, ANSWER_BOUND)
    took = time.monotonic() - t0
    expect(text.startswith("HTTP/1.") and " 200 " in text.split("\r\n", 1)[0],
           "GET /metrics: not a 200: %r" % text[:200])
    expect("tern_build_info" in text, "GET /metrics: no tern_build_info in the body")
    print("  fresh GET /metrics answered in %.2f s beside %d idle and %d trickling connections"
          % (took, IDLE, TRICKLING))


def check_metrics_trickle_cut(ctx):
    tr = ctx.trickler
    tr.join(timeout=TRICKLE + 2 * TRICKLE_STEP)
    still = [k for k, t in enumerate(tr.closed_at) if t is None]
    tr.stop()
    ctx.close_held()
    expect(not still, "%d of %d trickling connections still open after %.0f s of trickle"
           % (len(still), TRICKLING, TRICKLE))
    print("  trickling connections closed after %.1f..%.1f s"
          % (min(tr.closed_at) - tr.start_time, max(tr.closed_at) - tr.start_time))


def ternctl_status(ctx, bound):
    t0 = time.monotonic()
    try:
        p = subprocess.run([ctx.ternctl, "-s", ctx.sock, "-t", "30", "status"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=bound)
    except subprocess.TimeoutExpired:
        raise Failure("ternctl status not answered within %.0f s" % bound)
    out = p.stdout.decode("utf-8", "replace")
    expect(p.returncode == 0 and "zones: 1" in out,
           "ternctl status exit %d:\n%s" % (p.returncode, out))
    return time.monotonic() - t0


def check_ctl_status_queued(ctx):
    socks = [connect_unix(ctx.sock) for _ in range(CTL_IDLE)]
    queued = [s for s in socks if s is not None]
    ctx.held += queued
    took = ternctl_status(ctx, ANSWER_BOUND)
    ctx.close_held()
    print("  ternctl status answered in %.2f s behind %d idle connections" % (took, len(queued)))


def check_ctl_trickle_cut(ctx):
    s = connect_unix(ctx.sock)
    expect(s is not None, "cannot connect to the control socket")
    ctx.held.append(s)
    line = b"status" + b" " * 200  # never ends within TRICKLE at one byte per step
    t0 = time.monotonic()
    data = b""
    i = 0
    # one byte per step until ternd answers and closes, or TRICKLE
    while time.monotonic() - t0 < TRICKLE:
        r, _, _ = select.select([s], [], [], TRICKLE_STEP)
        if r:
            try:
                chunk = s.recv(4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            data += chunk
            continue
        try:
            s.send(line[i % len(line):i % len(line) + 1])
        except OSError:
            break
        i += 1
    took = time.monotonic() - t0
    ctx.close_held()
    text = data.decode("utf-8", "replace")
    expect(took < TRICKLE, "a trickling control connection was still open after %.0f s" % took)
    expect(text.startswith("error: no request within"),
           "a trickling control connection got %r" % text[:200])
    print("  trickling control connection answered %r after %.1f s" % (text.strip(), took))


def check_sigterm_with_idle(ctx):
    ctx.held += [connect_tcp(ctx.metrics_port) for _ in range(IDLE)]
    ctx.held += [s for s in (connect_unix(ctx.sock) for _ in range(8)) if s is not None]
    proc = ctx.tern.proc
    t0 = time.monotonic()
    proc.terminate()
    try:
        rc = proc.wait(timeout=EXIT_BOUND)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.monotonic() - t0
    ctx.close_held()
    expect(rc is not None, "ternd still running %.0f s after SIGTERM with idle clients"
           % EXIT_BOUND)
    expect(rc == 0, "ternd exited with %s on SIGTERM:\n%s" % (rc, ctx.tern.log_text()))
    print("  ternd exited %.2f s after SIGTERM" % took)


CHECKS = [
    ("metrics_fresh_client", check_metrics_fresh_client),
    ("metrics_trickle_cut", check_metrics_trickle_cut),
    ("ctl_status_queued", check_ctl_status_queued),
    ("ctl_trickle_cut", check_ctl_trickle_cut),
    ("sigterm_with_idle", check_sigterm_with_idle),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--ternctl", default=os.environ.get("TERNCTL"))
    args = ap.parse_args()
    for name in ("ternd", "ternctl"):
        path = getattr(args, name)
        if not path or not os.access(path, os.X_OK):
            print("test_slow_clients: no %s binary (--%s PATH), got %r" % (name, name, path))
            return 2
    workdir = tempfile.mkdtemp(prefix="tern-slow-")
    ctx = Ctx(os.path.abspath(args.ternd), os.path.abspath(args.ternctl), workdir)
    results = []
    try:
        run_check(results, "start", lambda: ctx.tern.start("diff.test"))
        if results[-1][1] is None:
            for name, fn in CHECKS:
                run_check(results, name, lambda: fn(ctx))
                if name == "metrics_trickle_cut" and getattr(ctx, "trickler", None):
                    ctx.trickler.stop()
    finally:
        ctx.close_held()
        ctx.tern.stop()
        if SANITIZER.search(ctx.tern.log_text(1 << 20)):
            results.append(("sanitizer", "sanitizer report:\n" + ctx.tern.log_text()))
        shutil.rmtree(workdir, ignore_errors=True)
    return servers.report(results, 24)


if __name__ == "__main__":
    sys.exit(main())
