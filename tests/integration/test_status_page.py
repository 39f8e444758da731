#!/usr/bin/python3
"""The status page (GET / on the metrics listener) in a real headless Chromium, driven through the
DevTools protocol (a small websocket client below: python3-websocket is not installed).

ternd serves a zone file (status.test) whose svc A record is health-checked by address (tcp) on
a TCP listener of the test's own (127.0.0.30), with metrics_listen on loopback. Chromium loads
http://127.0.0.1:PORT/ once; then, in that same document (the page redraws from /status.json
every 2 s, it is never reloaded):

  renders       the zone row shows status.test, its serial and "unsigned"; the endpoint is up
  down          the test's listener closes: the page shows the endpoint down (state and a red
                result) within the health bound plus two refreshes
  up_again      the listener is back: the page shows it up again, its "since" moved
  slow_clients  20 idle or trickling connections to the listener (beyond its pool): the page
                still redraws
  same_origin   the page loaded nothing but itself and status.json (no external asset), and
                the response carries a Content-Security-Policy that forbids any
  json          /status.json parses and agrees with /metrics (serial, endpoint up gauge)
  screenshots   PNGs of the page up, down and up again are kept in --out
                (build/tests/integration/status_page/ under ctest)
  clean_exit    ternd exits 0 on SIGTERM

    test_status_page.py --ternd build/ternd --out DIR [--chromium /usr/bin/chromium]
"""

import argparse
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import Failure, Ternd, expect, run_check, stop_process  # noqa: E402

INTERVAL = 200    # ms between checks
TIMEOUT_MS = 300  # per check
UP, DOWN = 2, 2
REFRESH = 2.0     # the page's REFRESH_MS
# the health bound (test_health.py's LEAVE) plus two refreshes of the page and slack for
# Chromium under ASan-loaded CI
BOUND = (INTERVAL + TIMEOUT_MS) / 1000.0 * (DOWN + 1) + 2 * REFRESH + 5.0
WAIT = 30.0       # Chromium's start, the first draw
SERIAL = 2026120601
TARGET = "127.0.0.30"

ZONE = """$ORIGIN status.test.
@    300 IN SOA ns1.status.test. h.status.test. %d 3600 600 86400 60
@    300 IN NS  ns1.status.test.
ns1  300 IN A   192.0.2.53
svc    5 IN A   %s
svc    5 IN A   127.0.0.31
""" % (SERIAL, TARGET)


def listen_tcp(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)
    return s


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: text frames, client-masked, reassembled
    from continuations; pings answered."""

    def __init__(self, url, timeout=WAIT):
        assert url.startswith("ws://")
        hostport, path = url[5:].split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise Failure("DevTools closed the websocket handshake")
            head += chunk
        if not head.startswith(b"HTTP/1.1 101"):
            raise Failure("DevTools refused the websocket: %r" % head[:200])

    def _exact(self, n):
        return servers.read_exact(self.sock, n)

    def send(self, text):
        data = text.encode()
        n = len(data)
        hdr = bytes([0x81])
        if n < 126:
            hdr += bytes([0x80 | n])
        elif n < 65536:
            hdr += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            hdr += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        self.sock.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        msg = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7f
            if n == 126:
                n = struct.unpack("!H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._exact(8))[0]
            payload = self._exact(n) if n else b""
            op = b0 & 0x0f
            if op == 0x9:  # ping: pong with its payload
                self.sock.sendall(bytes([0x8a, 0x80 | len(payload)]) + b"\0\0\0\0" + payload)
                continue
            if op == 0x8:
                raise Failure("DevTools closed the websocket")
            msg += payload
            if b0 & 0x80:
                return msg.decode()

    def close(self):
        self.sock.close()


class Chromium:
    """Headless Chromium with the DevTools protocol on a loopback port; one page."""

    def __init__(self, binary, work):
        self.binary, self.dir = binary, os.path.join(work, "chromium")
        os.makedirs(self.dir, exist_ok=True)
        self.port = servers.free_port()
        self.proc = None
        self.ws = None
        self.next_id = 0

    def start(self):
        log = open(os.path.join(self.dir, "chromium.log"), "wb")
        # --no-sandbox: Chromium's sandbox refuses to run as root (CI); the pages are our own
        self.proc = subprocess.Popen(
            [self.binary, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--user-data-dir=" + os.path.join(self.dir, "profile"),
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=%d" % self.port,
             "--window-size=1280,1100", "about:blank"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + WAIT
        pages = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failure("chromium exited with %s: %s" % (self.proc.returncode, self.log()))
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % self.port,
                                            timeout=2) as r:
                    pages = [p for p in json.load(r) if p.get("type") == "page"]
                if pages:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        if not pages:
            raise Failure("no DevTools page within %.0f s: %s" % (WAIT, self.log()))
        self.ws = WebSocket(pages[0]["webSocketDebuggerUrl"])

    def log(self):
        try:
            with open(os.path.join(self.dir, "chromium.log"), "rb") as f:
                return f.read()[-3000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:  # events interleave with the answer: skip them
            m = json.loads(self.ws.recv())
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise Failure("%s: %s" % (method, m["error"]))
                return m["result"]

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            raise Failure("page script: %s" % r["exceptionDetails"])
        return r["result"].get("value")

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return os.path.getsize(path)

    def stop(self):
        if self.ws:
            self.ws.close()
        stop_process(self.proc)


# What the page shows, read from its DOM: the zone rows' cells, each endpoint's state and
# results, when it last redrew, and the marker set at load (still there: the same document).
SNAPSHOT = """JSON.stringify({
  zones: [...document.querySelectorAll('#zones tbody tr')].map(
      tr => [...tr.cells].map(td => td.textContent)),
  health: [...document.querySelectorAll('#health tbody tr[data-endpoint]')].map(tr => ({
      endpoint: tr.getAttribute('data-endpoint'),
      state: tr.querySelector('[data-state]').getAttribute('data-state'),
      since: tr.cells[4].textContent,
      ok: tr.querySelectorAll('.dot.ok').length, bad: tr.querySelectorAll('.dot.bad').length})),
  updated: document.body.getAttribute('data-updated'),
  marker: window.__tern_test_marker || null,
  error: document.getElementById('err').textContent})"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--out", required=True, help="directory for the screenshots")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = ap.parse_args()
    args.ternd = os.path.abspath(args.ternd)  # ternd runs in its own directory
    if not os.access(args.chromium, os.X_OK):
        print("chromium not found (.ci/install-deps --test installs it)")
        return 1
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tern-status-")
    results = []
    tport = servers.free_port()
    target = listen_tcp(TARGET, tport)
    other = listen_tcp("127.0.0.31", tport)
    zone = os.path.join(work, "status.zone")
    with open(zone, "w") as f:
        f.write(ZONE)
    mport = servers.free_port()
    extra = """metrics_listen: "127.0.0.1:%d"
health:
  check_interval_ms: %d
  checks:
    - {address: %s, protocol: tcp, port: %d, timeout: %d, up_count: %d, down_count: %d}
    - {address: 127.0.0.31, protocol: tcp, port: %d, timeout: %d, up_count: %d, down_count: %d}
""" % (mport, INTERVAL, TARGET, tport, TIMEOUT_MS, UP, DOWN, tport, TIMEOUT_MS, UP, DOWN)
    tern = Ternd(work, [("status.test", zone)], args.ternd, extra_yaml=extra)
    browser = Chromium(args.chromium, work)
    base = "http://127.0.0.1:%d" % mport
    ep = "%s:%d" % (TARGET, tport)
    state = {}

    def snapshot():
        return json.loads(browser.eval(SNAPSHOT))

    def wait_page(cond, limit, what):
        start = time.monotonic()
        last = None
        while time.monotonic() - start < limit:
            last = snapshot()
            if last["marker"] != 1:
                raise Failure("the page was reloaded (the marker is gone): %s" % last)
            if cond(last):
                return last, time.monotonic() - start
            time.sleep(0.25)
        raise Failure("%s: not within %.1f s; the page shows %s" % (what, limit, last))

    def endpoint(s):
        return next((h for h in s["health"] if h["endpoint"] == ep), None)

    try:
        tern.start("status.test")
        browser.start()

        def renders():
            browser.call("Page.enable")
            browser.call("Page.navigate", url=base + "/")
            # the marker lives as long as this document: a reload (meta refresh) would drop it
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                if browser.eval("document.readyState") == "complete":
                    break
                time.sleep(0.1)
            browser.eval("window.__tern_test_marker = 1")
            s, t = wait_page(lambda s: s["zones"] and endpoint(s)
                             and endpoint(s)["state"] == "up", WAIT, "the endpoint up")
            row = s["zones"][0]
            expect(row[0] == "status.test" and row[2] == str(SERIAL) and row[4] == "5"
                   and row[5] == "unsigned" and row[6] == "none",
                   "zone row: %s" % row)
            print("  rendered in %.2f s: zone %s, endpoint %s" % (t, row, endpoint(s)))
            n = browser.screenshot(os.path.join(args.out, "status-up.png"))
            expect(n > 10000, "status-up.png is %d bytes" % n)
            state["since_up"] = endpoint(s)["since"]
        run_check(results, "renders", renders)

        def down():
            target.close()
            s, t = wait_page(lambda s: endpoint(s)["state"] == "down" and endpoint(s)["bad"] > 0,
                             BOUND, "the endpoint down")
            print("  shown down after %.2f s (bound %.1f): %s" % (t, BOUND, endpoint(s)))
            expect(s["error"] == "", "the page reports an error: %s" % s["error"])
            other_ep = next(h for h in s["health"] if h["endpoint"] != ep)
            expect(other_ep["state"] == "up", "the other endpoint: %s" % other_ep)
            browser.screenshot(os.path.join(args.out, "status-down.png"))
            state["since_down"] = endpoint(s)["since"]
        run_check(results, "down", down)

        def up_again():
            nonlocal target
            target = listen_tcp(TARGET, tport)
            s, t = wait_page(lambda s: endpoint(s)["state"] == "up", BOUND, "the endpoint up again")
            e = endpoint(s)
            print("  shown up again after %.2f s: %s" % (t, e))
            expect(e["ok"] > 0 and e["since"] != state.get("since_down"),
                   "results and since: %s (down since %s)" % (e, state.get("since_down")))
            browser.screenshot(os.path.join(args.out, "status-up-again.png"))
        run_check(results, "up_again", up_again)

        def slow_clients():
            # idle connections and one that trickles its request head, more than the endpoint's
            # pool (16, 8 per address): the page keeps redrawing beside them
            held = []
            try:
                for _ in range(20):
                    held.append(socket.create_connection(("127.0.0.1", mport), timeout=5))
                held[-1].sendall(b"GET /status.json HTTP/1.1\r\nHo")
                before = snapshot()["updated"]
                s, t = wait_page(lambda s: s["updated"] != before and s["error"] == "",
                                 3 * REFRESH + 5.0, "a redraw beside 20 held connections")
                print("  redrawn beside 20 held connections after %.2f s" % t)
            finally:
                for c in held:
                    c.close()
        run_check(results, "slow_clients", slow_clients)

        def same_origin():
            urls = json.loads(browser.eval(
                "JSON.stringify(performance.getEntriesByType('resource').map(e => e.name)"
                ".concat([location.href]))"))
            foreign = [u for u in urls if not u.startswith(base + "/")]
            expect(not foreign, "requests outside the endpoint: %s" % foreign)
            expect(any(u.startswith(base + "/status.json") for u in urls),
                   "no status.json fetch: %s" % urls)
            with urllib.request.urlopen(base + "/", timeout=5) as r:
                csp = r.headers.get("Content-Security-Policy", "")
                ctype = r.headers.get("Content-Type", "")
            expect("default-src 'none'" in csp and "connect-src 'self'" in csp, "CSP: %r" % csp)
            expect(ctype.startswith("text/html"), "Content-Type %r" % ctype)
        run_check(results, "same_origin", same_origin)

        def json_agrees():
            with urllib.request.urlopen(base + "/status.json", timeout=5) as r:
                doc = json.load(r)
                expect(r.headers.get("Cache-Control") == "no-store", "Cache-Control")
            with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
                metrics = r.read().decode()
            z = doc["zones"][0]
            expect('tern_zone_serial{zone="status.test"} %d' % z["serial"] in metrics,
                   "serial %d not in /metrics" % z["serial"])
            h = next(h for h in doc["health"] if h["endpoint"] == ep)
            want = 'tern_health_endpoint_up{endpoint="%s",protocol="tcp",host=""} %d' % (
                ep, 1 if h["up"] else 0)
            expect(want in metrics, "%s not in /metrics" % want)
            expect(len(h["recent"]) > 0 and h["since"] > 0, "history: %s" % h)
        run_check(results, "json", json_agrees)

        def screenshots():
            for name in ("status-up.png", "status-down.png", "status-up-again.png"):
                p = os.path.join(args.out, name)
                with open(p, "rb") as f:
                    expect(f.read(8) == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % p)
            print("  screenshots in %s" % os.path.abspath(args.out))
        run_check(results, "screenshots", screenshots)
    except (Failure, RuntimeError, OSError) as e:
        results.append(("setup", str(e)))
    finally:
        browser.stop()
        tern.stop()
        target.close()
        other.close()
    rc = servers.finish(tern, results)
    if rc:
        print(browser.log())
    shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
