#!/usr/bin/python3
"""Health-checked failover, end to end: ternd with real HTTP, HTTPS and TCP servers on loopback
addresses (every address of 127/8 is local on Linux), a real redis-server, ternctl and dnspython.

Zones: a redins JSON zone (health.test) whose A RRsets carry redins' health_check objects, and a
zone file (file.test) whose records are checked through ternd.yaml's health: checks. Checks run
every INTERVAL ms with up_count 2 and down_count 2, so each bound below is
  leave:  (interval + timeout) x (|down_count| + 1), plus SLACK for scheduling and the poll
  return: interval x (up_count + 1), plus SLACK
and every measured time is printed.

  all_up            every record is served once its checks pass; the HTTP checks send HEAD of
                    the uri with the owner as Host
  http_500          a server answering 500 leaves the answers within the bound
  http_hang         a server that never answers (timeout) leaves within the bound
  refused           a stopped server (connection refused) leaves; with every record down the
                    RRset is served whole (fail open) and counted in ternctl stats
  recovery          the server comes back and returns within the bound
  admin             ternctl health set ADDR down removes a healthy record at once, survives a
                    reload, and auto brings it back
  geo_after_health  country filter after health: the GB client's record down, the GB client gets
                    the record without a country (redins' fallback), not another country's
  https             a certificate for the owner (from the configured CA) is up; one for another
                    name is down (verification on by default); tls_verify false accepts it
  zone_file         a zone-file record checked by address (tcp) leaves when its port closes
  ternctl_health    ternctl health lists every endpoint with state, counter and error
  metrics_and_log   /metrics has the endpoint families and the fail-open count; the health log
                    (redins' healthcheck log) has one JSON line per result with redins' fields
  bad_specs         port 0, an unknown protocol and a negative timeout are load errors naming
                    zone, label and field (ternd --check-config)
  fleet             two ternd share a redis-server, one configured as tern, one with a redins
                    config.json (handler.redis, handler.healthcheck): the zone, with redins'
                    health_check, from Redis; state in redins' key format; one node's checks
                    adopted by the other (the server sees one check per interval between them);
                    a restarted node starts with the state from Redis; Redis stopped, each
                    node checks on its own (an endpoint coming back is seen) and answers on
  clean_exit        ternd exits 0 on SIGTERM
  big_body          a GET check of a server answering 200 with a 100 MB body is up, and each
                    check takes the status and headers only: the server gets under 1 MiB of the
                    body into the connection before the checker closes it
  capacity          endpoints whose timeouts add up to more than max_requests can check in
                    check_interval_ms: one warning at load naming the achievable interval,
                    not repeated by later rounds of checks, and one more at a reload

    test_health.py --ternd build/ternd --ternctl build/ternctl [--only big_body,capacity]
"""

import argparse
import errno
import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import dns.edns
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import (LOOPBACK, Failure, Redis, Ternd, clean_exit_result, expect, report,  # noqa: E402
                     run_check)

INTERVAL = 200   # ms between checks of one endpoint
TIMEOUT_MS = 300  # per check
UP, DOWN = 2, 2
SLACK = 1.5      # seconds allowed beyond each bound (scheduling, the test's own polling)
WAIT = 15.0      # bound of every other wait
LEAVE = (INTERVAL + TIMEOUT_MS) / 1000.0 * (DOWN + 1)
RETURN = INTERVAL / 1000.0 * (UP + 1)
GB = ("81.2.69.130", 32)  # GB in the fixture database (tests/data/make_mmdb.pl)

BIG_BODY = 100 * 1000 * 1000  # bytes: the defect's 100 MB health page
BODY_CHUNK = 64 * 1024        # the server writes the body in pieces of this size
BODY_LIMIT = 1 << 20          # a check that stops after the headers leaves the server below this
# The server's send buffer, fixed: what sendall() counts is then what went towards the checker
# (this buffer and the checker's receive window), not what Linux lets a sender queue on its own
# side (tcp_wmem's autotuning, up to 4 MiB, in the time the checker takes to close).
BODY_SNDBUF = 64 * 1024


class Backend:
    """An HTTP(S) server on one loopback address whose behaviour the test sets: "ok" (200),
    "500", "hang" (no answer for 5 s), "big" (200 and, to a GET, a body of BIG_BODY bytes
    written in BODY_CHUNK pieces through a BODY_SNDBUF send buffer), or stopped (the port
    closed: connection refused). body_sent() lists, per finished "big" answer, how many body
    bytes went into the connection before the client closed it (a piece counts once sendall()
    returned: exact to one piece)."""

    def __init__(self, addr, port, tls=None):
        self.addr, self.port, self.tls = addr, port, tls
        self.mode = "ok"
        self.requests = []  # (method, path, Host) of each request
        self.bodies = []  # body bytes sent per finished "big" answer
        self.lock = threading.Lock()
        self.httpd = None
        self.thread = None

    def start(self):
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def answer(self):
                with backend.lock:
                    backend.requests.append((self.command, self.path, self.headers.get("Host")))
                    mode = backend.mode
                if mode == "hang":
                    time.sleep(5)
                    return
                if mode == "big":
                    self.big()
                    return
                self.send_response(200 if mode == "ok" else 500)
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()

            def big(self):
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BODY_SNDBUF)
                self.send_response(200)
                self.send_header("Content-Length", str(BIG_BODY))
                self.end_headers()
                self.wfile.flush()
                self.close_connection = True
                if self.command != "GET":
                    return
                chunk, sent = b"x" * BODY_CHUNK, 0
                try:
                    while sent < BIG_BODY:
                        n = min(BODY_CHUNK, BIG_BODY - sent)
                        self.connection.sendall(chunk[:n])
                        sent += n
                except OSError:
                    pass  # the checker closed (reset) the connection: what the check wants
                with backend.lock:
                    backend.bodies.append(sent)

            do_HEAD = answer
            do_GET = answer

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address):
                pass  # a checker that gave up (timeout) resets its connection: not news

        self.httpd = Server((self.addr, self.port), Handler)
        if self.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*self.tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True,
                                                do_handshake_on_connect=False)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def stop(self):
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.thread.join(timeout=WAIT)
            self.httpd = None

    def set(self, mode):
        with self.lock:
            self.mode = mode

    def seen(self):
        with self.lock:
            return list(self.requests)

    def body_sent(self):
        with self.lock:
            return list(self.bodies)


class Client:
    def __init__(self, port):
        self.port = port

    def addrs(self, name, ecs=None):
        """Sorted addresses of the answer (None when no answer came)."""
        opts = [dns.edns.ECSOption(*ecs)] if ecs else []
        q = dns.message.make_query(name, "A", use_edns=0, options=opts)
        try:
            r = dns.query.udp(q, LOOPBACK, port=self.port, timeout=1.0)
        except Exception:  # noqa: BLE001 - a lost datagram is "no answer yet"
            return None
        expect(r.rcode() == dns.rcode.NOERROR, "%s: rcode %s" % (name, dns.rcode.to_text(r.rcode())))
        return sorted(rd.address for rrset in r.answer if rrset.rdtype == dns.rdatatype.A
                      for rd in rrset)

    def wait_for(self, name, want, limit, ecs=None):
        """Poll until the answer is exactly want (sorted); the seconds it took, or Failure."""
        start = time.monotonic()
        got = None
        while time.monotonic() - start < limit:
            got = self.addrs(name, ecs)
            if got == sorted(want):
                return time.monotonic() - start
            time.sleep(0.02)
        raise Failure("%s: got %s, want %s within %.1f s" % (name, got, sorted(want), limit))


def ternctl(args, tern, *cmd):
    out = subprocess.run([args.ternctl, "-s", tern.sock, *cmd], capture_output=True, text=True,
                         timeout=30)
    expect(out.returncode == 0, "ternctl %s: %s%s" % (" ".join(cmd), out.stdout, out.stderr))
    return out.stdout


def endpoints(args, tern):
    """ternctl health as {"ADDR[:PORT] host": {key: value}} and the summary keys."""
    text = ternctl(args, tern, "health")
    eps, summary = {}, {}
    for line in text.splitlines():
        if line.startswith("endpoint: "):
            words = line[len("endpoint: "):].split(" ")
            key = words[0]
            kv = {}
            i = 1
            while i + 1 < len(words):
                if words[i] == "error":
                    kv["error"] = " ".join(words[i + 1:])
                    break
                kv[words[i]] = words[i + 1]
                i += 2
            eps["%s %s" % (key, kv.get("host"))] = kv
        elif ": " in line:
            k, v = line.split(": ", 1)
            summary[k] = v
    return eps, summary


def stat(args, tern, key):
    for line in ternctl(args, tern, "stats").splitlines():
        if line.startswith(key + ": "):
            return int(line.split(": ", 1)[1])
    raise Failure("ternctl stats has no %s" % key)


def make_certs(d):
    """A CA, a certificate for secure.health.test and one for another name (openssl CLI)."""
    def run(*cmd):
        subprocess.run(cmd, check=True, timeout=60, cwd=d, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("openssl", "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=tern test CA")
    for name in ("secure.health.test", "other.name.test"):
        run("openssl", "req", *ec, "-keyout", name + ".key", "-out", name + ".csr",
            "-subj", "/CN=" + name)
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write("subjectAltName=DNS:%s\n" % name)
        run("openssl", "x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext")
    return {n: (os.path.join(d, n + ".pem"), os.path.join(d, n + ".key"))
            for n in ("secure.health.test", "other.name.test")}


def hc(port, proto="http", **extra):
    c = {"enable": True, "protocol": proto, "port": port, "uri": "/health", "up_count": UP,
         "down_count": DOWN, "timeout": TIMEOUT_MS}
    c.update(extra)
    return c


def health_zone(port, tls_port):
    soa = {"ttl": 300, "ns": "ns1.health.test.", "mbox": "h.health.test.", "refresh": 3600,
           "retry": 600, "expire": 86400, "minttl": 60, "serial": 1}
    a = lambda *ips, **kw: [dict(ip=ip, **kw) for ip in ips]  # noqa: E731
    return {"config": {"soa": soa},
            "records": {
                "@": {"ns": {"records": [{"host": "ns1.health.test."}]}},
                "ns1": {"a": {"records": a("192.0.2.53")}},
                "www": {"a": {"ttl": 5, "records": a("127.0.0.2", "127.0.0.3", "127.0.0.4"),
                              "health_check": hc(port)}},
                "geo": {"a": {"ttl": 5,
                              "records": [{"ip": "127.0.0.5", "country": "GB"},
                                          {"ip": "127.0.0.6", "country": "AU"},
                                          {"ip": "127.0.0.7"}],
                              "filter": {"count": "multi", "geo_filter": "country"},
                              "health_check": hc(port)}},
                "secure": {"a": {"records": a("127.0.0.8", "127.0.0.9"),
                                 "health_check": hc(tls_port, "https")}},
                "insecure": {"a": {"records": a("127.0.0.9", "127.0.0.10"),
                                   "health_check": hc(tls_port, "https", tls_verify=False)}},
            }}


FILE_ZONE = """$ORIGIN file.test.
@    300 IN SOA ns1.file.test. h.file.test. 1 3600 600 86400 60
@    300 IN NS  ns1.file.test.
ns1  300 IN A   192.0.2.53
svc    5 IN A   127.0.0.20
svc    5 IN A   127.0.0.21
"""


def listen_tcp(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((addr, port))
        s.listen(64)
    except OSError:
        s.close()
        raise
    return s


def start_backends(certs):
    """The HTTP(S) backends and the two TCP listeners on fresh ports. A port free when picked
    can be taken by a test running beside this one before it is bound here: then every
    listener started is closed and new ports are picked (a bounded number of times)."""
    for _ in range(5):
        port, tls_port, tcp_port = (servers.free_port() for _ in range(3))
        backends = {ip: Backend(ip, port) for ip in
                    ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6",
                     "127.0.0.7")}
        backends["127.0.0.8"] = Backend("127.0.0.8", tls_port, certs["secure.health.test"])
        backends["127.0.0.9"] = Backend("127.0.0.9", tls_port, certs["other.name.test"])
        backends["127.0.0.10"] = Backend("127.0.0.10", tls_port, certs["other.name.test"])
        closers = []  # of what is open, should a port be taken
        try:
            for b in backends.values():
                b.start()
                closers.append(b.stop)
            tcp = listen_tcp("127.0.0.20", tcp_port)
            closers.append(tcp.close)
            tcp21 = listen_tcp("127.0.0.21", tcp_port)
            return port, tls_port, tcp_port, backends, tcp, tcp21
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            for close in closers:
                close()
    raise Failure("no free ports for the backends in 5 tries")


def run_checks(args, work, results):
    certs = make_certs(work)
    data = os.path.join(work, "data")
    os.makedirs(data)
    subprocess.run(["perl", servers.MAKE_MMDB, data], check=True, timeout=60)
    port, tls_port, tcp_port, backends, tcp, tcp21 = start_backends(certs)

    zone = os.path.join(work, "health.json")
    with open(zone, "w") as f:
        json.dump(health_zone(port, tls_port), f, indent=1)
    fzone = os.path.join(work, "file.zone")
    with open(fzone, "w") as f:
        f.write(FILE_ZONE)
    sock = os.path.join(work, "ternd.sock")
    mport = servers.free_port()
    hlog = os.path.join(work, "health.log")
    extra = """control_socket: "%s"
geoip_db: "%s"
metrics_listen: "127.0.0.1:%d"
health:
  check_interval_ms: %d
  max_requests: 64
  ca_file: "%s"
  log: {target: file, path: "%s", format: json}
  checks:
    - {address: 127.0.0.20, protocol: tcp, port: %d, timeout: %d, up_count: %d, down_count: %d}
    - {address: 127.0.0.21, protocol: tcp, port: %d, timeout: %d, up_count: %d, down_count: %d}
""" % (sock, os.path.join(data, "nested6.mmdb"), mport, INTERVAL, os.path.join(work, "ca.pem"),
       hlog, tcp_port, TIMEOUT_MS, UP, DOWN, tcp_port, TIMEOUT_MS, UP, DOWN)
    tern = Ternd(work, [("health.test", zone), ("file.test", fzone)], args.ternd, extra_yaml=extra)
    tern.sock = sock
    tern.start("health.test")
    c = Client(tern.port)
    www = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    try:
        def all_up():
            t = c.wait_for("www.health.test", www, WAIT)
            # a recovering endpoint is already answered; "up" takes one more passing check,
            # which a busy machine may delay past the answer
            until = time.monotonic() + WAIT
            while True:
                eps, _ = endpoints(args, tern)
                states = [(eps.get("%s:%d www.health.test" % (ip, port)) or {}).get("state")
                          for ip in www]
                if all(st == "up" for st in states) or time.monotonic() > until:
                    break
                time.sleep(0.1)
            for ip in www:
                e = eps.get("%s:%d www.health.test" % (ip, port))
                expect(e and e["state"] == "up", "%s not up: %s" % (ip, e))
            reqs = backends["127.0.0.2"].seen()
            expect(reqs and reqs[-1][0] == "HEAD" and reqs[-1][1] == "/health"
                   and reqs[-1][2].startswith("www.health.test"),
                   "request %s: want HEAD /health, Host www.health.test" % (reqs[-1:],))
            print("  all up after %.2f s" % t)
        run_check(results, "all_up", all_up)

        def http_500():
            backends["127.0.0.3"].set("500")
            t = c.wait_for("www.health.test", ["127.0.0.2", "127.0.0.4"], LEAVE + SLACK)
            print("  500: left after %.2f s (bound %.2f + %.1f)" % (t, LEAVE, SLACK))
        run_check(results, "http_500", http_500)

        def http_hang():
            backends["127.0.0.4"].set("hang")
            t = c.wait_for("www.health.test", ["127.0.0.2"], LEAVE + SLACK)
            print("  hang: left after %.2f s (bound %.2f + %.1f)" % (t, LEAVE, SLACK))
        run_check(results, "http_hang", http_hang)

        def refused():
            before = stat(args, tern, "health_fail_open")
            backends["127.0.0.2"].stop()
            # every record down (after the last one's down_count checks): all served again
            t = c.wait_for("www.health.test", www, LEAVE + SLACK)
            time.sleep(0.1)
            c.addrs("www.health.test")
            expect(stat(args, tern, "health_fail_open") > before, "fail open not counted")
            eps, _ = endpoints(args, tern)
            e = eps["127.0.0.2:%d www.health.test" % port]
            expect(e["state"] == "down" and "connect" in e["error"].lower(),
                   "127.0.0.2: %s" % e)
            print("  refused: all down, fail open after %.2f s" % t)
        run_check(results, "refused", refused)

        def recovery():
            backends["127.0.0.2"].start()
            t = c.wait_for("www.health.test", ["127.0.0.2"], RETURN + SLACK)
            print("  recovery: back after %.2f s (bound %.2f + %.1f)" % (t, RETURN, SLACK))
            backends["127.0.0.3"].set("ok")
            backends["127.0.0.4"].set("ok")
            c.wait_for("www.health.test", www, RETURN + LEAVE + SLACK)
        run_check(results, "recovery", recovery)

        def admin():
            out = ternctl(args, tern, "health", "set", "127.0.0.3", "down")
            expect("matched: 1" in out, out)
            c.wait_for("www.health.test", ["127.0.0.2", "127.0.0.4"], 0.5)
            ternctl(args, tern, "reload")
            time.sleep(3 * INTERVAL / 1000.0)
            expect(c.addrs("www.health.test") == ["127.0.0.2", "127.0.0.4"],
                   "the override did not survive a reload")
            eps, _ = endpoints(args, tern)
            expect(eps["127.0.0.3:%d www.health.test" % port]["override"] == "down",
                   "ternctl health does not show the override")
            ternctl(args, tern, "health", "set", "127.0.0.3", "auto")
            c.wait_for("www.health.test", www, 0.5)
        run_check(results, "admin", admin)

        def geo_after_health():
            c.wait_for("geo.health.test", ["127.0.0.5"], WAIT, ecs=GB)
            backends["127.0.0.5"].set("500")
            t = c.wait_for("geo.health.test", ["127.0.0.7"], LEAVE + SLACK, ecs=GB)
            print("  geo: GB client moved to the record without a country after %.2f s" % t)
            backends["127.0.0.5"].set("ok")
            c.wait_for("geo.health.test", ["127.0.0.5"], RETURN + SLACK, ecs=GB)
        run_check(results, "geo_after_health", geo_after_health)

        def https():
            c.wait_for("secure.health.test", ["127.0.0.8"], WAIT)
            eps, _ = endpoints(args, tern)
            bad = eps["127.0.0.9:%d secure.health.test" % tls_port]
            expect(bad["state"] == "down" and ("certificate" in bad["error"].lower()
                                               or "ssl" in bad["error"].lower()),
                   "127.0.0.9 with another name's certificate: %s" % bad)
            # tls_verify false: the same server is fine
            c.wait_for("insecure.health.test", ["127.0.0.10", "127.0.0.9"], WAIT)
            ok = eps.get("127.0.0.9:%d insecure.health.test" % tls_port)
            expect(ok is not None, "no endpoint for insecure")
        run_check(results, "https", https)

        def zone_file():
            c.wait_for("svc.file.test", ["127.0.0.20", "127.0.0.21"], WAIT)
            tcp21.close()
            t = c.wait_for("svc.file.test", ["127.0.0.20"], LEAVE + SLACK)
            print("  zone file (tcp check by address): left after %.2f s" % t)
        run_check(results, "zone_file", zone_file)

        def ternctl_health():
            deadline = time.monotonic() + LEAVE + SLACK
            while True:  # the closed port's endpoint reaches down_count
                eps, summary = endpoints(args, tern)
                e = eps["127.0.0.21:%d -" % tcp_port]
                if e["state"] == "down" or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            expect(int(summary["endpoints"]) == len(eps) and len(eps) >= 12,
                   "endpoints: %s listed, %d lines" % (summary.get("endpoints"), len(eps)))
            expect(e["protocol"] == "tcp" and e["state"] == "down" and e["status"] == "-2/-2..2"
                   and "refused" in e["error"].lower(), "127.0.0.21: %s" % e)
            expect(int(summary["checks"]) > 50, "checks: %s" % summary["checks"])
        run_check(results, "ternctl_health", ternctl_health)

        def metrics_and_log():
            body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport,
                                          timeout=10).read().decode()
            want = ('tern_health_endpoint_up{endpoint="127.0.0.2:%d",protocol="http",'
                    'host="www.health.test"} 1' % port)
            expect(want in body, "/metrics lacks %s" % want)
            for fam in ("tern_health_endpoints{state=\"down\"}", "tern_health_endpoint_status{",
                        "tern_health_endpoint_checks_total{", "tern_health_checks_total{",
                        "tern_health_endpoint_latency_seconds{"):
                expect(fam in body, "/metrics lacks %s" % fam)
            fo = [l for l in body.splitlines() if l.startswith("tern_health_fail_open_total ")]
            expect(fo and int(fo[0].split()[1]) > 0, "tern_health_fail_open_total: %s" % fo)
            with open(hlog) as f:
                lines = [json.loads(l) for l in f if l.strip()]
            expect(len(lines) > 50, "%d lines in the health log" % len(lines))
            bad = [l for l in lines if l["ip"] == "127.0.0.3" and l["status"] == -DOWN]
            expect(bad and bad[0]["error"] == "HTTP status 500" and bad[0]["port"] == port
                   and bad[0]["host"] == "www.health.test" and bad[0]["uri"] == "/health"
                   and bad[0]["log_type"] == "healthcheck",
                   "no log line of 127.0.0.3 down with its error: %s" % bad[:1])
        run_check(results, "metrics_and_log", metrics_and_log)
    finally:
        tern.stop()
        for b in backends.values():
            b.stop()
        tcp.close()
        tcp21.close()
    r = clean_exit_result(tern)
    if r:
        results.append(r)
    if any(err for _, err in results):
        print(tern.log_text())


def bad_specs(args, work):
    cases = [({"enable": True, "port": 0}, "a.health_check: port 0 is not a port"),
             ({"enable": True, "protocol": "gopher"},
              "a.health_check.protocol: \"gopher\" is not a check protocol"),
             ({"enable": True, "timeout": -10}, "a.health_check.timeout: -10 is negative")]
    for i, (check, want) in enumerate(cases):
        z = health_zone(80, 443)
        z["records"]["bad"] = {"a": {"records": [{"ip": "192.0.2.1"}], "health_check": check}}
        path = os.path.join(work, "bad%d.json" % i)
        with open(path, "w") as f:
            json.dump(z, f)
        conf = os.path.join(work, "bad%d.yaml" % i)
        with open(conf, "w") as f:
            f.write('listen: ["127.0.0.1:0"]\nallow_root: true\nhealth: {check_interval_ms: 1000}\n'
                    'zones:\n  - {origin: health.test, file: "%s"}\n' % path)
        out = subprocess.run([args.ternd, "--check-config", "-c", conf], capture_output=True,
                             text=True, timeout=30)
        text = out.stdout + out.stderr
        expect(out.returncode != 0 and "zone health.test label bad: " in text and want in text,
               "check %s: exit %d, %s" % (check, out.returncode, text.strip()))


class RedinsTernd(Ternd):
    """ternd started with a redins config.json: zones and health state in Redis, redins' keys."""

    def __init__(self, workdir, binary, redis_port, sock):
        self.redis_port, self.sock = redis_port, sock
        super().__init__(workdir, [], binary)

    def command(self):
        conf = os.path.join(self.dir, "config.json")
        redis = {"ip": LOOPBACK, "port": self.redis_port, "db": 0, "password": "",
                 "prefix": "", "suffix": "", "connection": {"connect_timeout": 500,
                                                            "read_timeout": 500}}
        with open(conf, "w") as f:
            json.dump({"server": [{"ip": LOOPBACK, "port": self.port, "protocol": "udp"},
                                  {"ip": LOOPBACK, "port": self.port, "protocol": "tcp"}],
                       "handler": {"redis": redis, "max_ttl": 300,
                                   "healthcheck": {"enable": True, "max_requests": 10,
                                                   "max_pending_requests": 100,
                                                   "update_interval": 600, "check_interval": 1,
                                                   "redis": redis}},
                       "allow_root": os.geteuid() == 0, "control_socket": self.sock}, f)
        return [self.binary, "-c", conf]


def fleet(args, work):
    """Two ternd on one redis-server, one configured as tern, one with a redins config.json:
    the zone (with redins' health_check) and the health state both in Redis, redins' keys."""
    port = servers.free_port()
    redis = Redis(work, name="fleet-redis")
    redis.start()
    b1, b2 = Backend("127.0.0.30", port), Backend("127.0.0.31", port)
    b1.start()
    b2.start()
    interval = 1000
    soa = {"ttl": 300, "ns": "ns1.fleet.test.", "mbox": "h.fleet.test.", "serial": 1}
    redis.put_zone("fleet.test.", {
        "@": {"ns": {"records": [{"host": "ns1.fleet.test."}]}},
        "www": {"a": {"ttl": 5, "records": [{"ip": "127.0.0.30"}, {"ip": "127.0.0.31"}],
                      "health_check": hc(port)}}}, soa)
    other = os.path.join(work, "other.zone")
    with open(other, "w") as f:
        f.write("$ORIGIN other.test.\n@ 300 IN SOA ns1 h 1 3600 600 86400 60\n@ 300 IN NS ns1\n"
                "ns1 300 IN A 192.0.2.53\n")
    nodes = []

    def node(name, redins=False):
        sock = os.path.join(work, name + ".sock")
        if redins:
            t = RedinsTernd(os.path.join(work, name), args.ternd, redis.port, sock)
        else:
            extra = ('control_socket: "%s"\nredis: {address: "127.0.0.1:%d"}\nhealth:\n'
                     '  check_interval_ms: %d\n  redis: {address: "127.0.0.1:%d"}\n'
                     % (sock, redis.port, interval, redis.port))
            t = Ternd(os.path.join(work, name), [("other.test", other)], args.ternd,
                      extra_yaml=extra)
            t.sock = sock
        t.start("fleet.test")
        nodes.append(t)
        return t

    try:
        a = node("a")
        ca = Client(a.port)
        ca.wait_for("www.fleet.test", ["127.0.0.30", "127.0.0.31"], WAIT)
        key = "redins:healthcheck:www.fleet.test.:127.0.0.30"
        raw = redis.cmd("GET", key)
        expect(raw is not None, "no %s in Redis" % key)
        item = json.loads(raw)
        for k in ("protocol", "uri", "port", "status", "lastcheck", "timeout", "up_count",
                  "down_count", "enable"):
            expect(k in item, "%s: no %r in %s" % (key, k, raw))
        expect(item["port"] == port and item["uri"] == "/health" and item["status"] > 0,
               "%s: %s" % (key, raw))
        ttl = redis.cmd("TTL", key)
        expect(ttl > 0, "%s has no expiry (TTL %s)" % (key, ttl))

        b = node("b", redins=True)
        cb = Client(b.port)
        cb.wait_for("www.fleet.test", ["127.0.0.30", "127.0.0.31"], WAIT)
        time.sleep(4 * interval / 1000.0)
        ea, _ = endpoints(args, a)
        eb, _ = endpoints(args, b)
        k30 = "127.0.0.30:%d www.fleet.test" % port
        n_a, n_b = int(ea[k30]["checks"]), int(eb[k30]["checks"])
        seen = len([r for r in b1.seen()])
        print("  fleet: node a checked %d times, node b %d, the server saw %d requests"
              % (n_a, n_b, seen))
        # one check per interval between the two of them, not two: the other one adopts it
        expect(seen <= n_a + n_b + 1, "more requests (%d) than checks (%d)" % (seen, n_a + n_b))
        _, sb = endpoints(args, b)
        _, sa = endpoints(args, a)
        expect(int(sa["adopted"]) + int(sb["adopted"]) >= 2,
               "no node adopted the other's results: a %s, b %s" % (sa["adopted"], sb["adopted"]))

        b1.stop()
        t = ca.wait_for("www.fleet.test", ["127.0.0.31"], (interval / 1000.0 + 0.3) * 3 + SLACK)
        cb.wait_for("www.fleet.test", ["127.0.0.31"], interval / 1000.0 + SLACK)
        print("  fleet: 127.0.0.30 left both nodes' answers after %.2f s" % t)
        time.sleep(2 * interval / 1000.0)  # down_count reached
        item = json.loads(redis.cmd("GET", key))
        expect(item["status"] == -DOWN, "state in Redis: %s" % item)

        # a restarted node starts from the state in Redis: down at once (a node of its own would
        # be at -1, "failing", after one failed check), whether it read a state fresh enough to
        # stand for a check or went on from it with one check of its own
        b.stop()
        nodes.remove(b)
        b = node("b2", redins=True)
        deadline = time.monotonic() + 0.9 * interval / 1000.0  # less than a second own check
        while True:
            eb, _ = endpoints(args, b)
            e = eb.get(k30)
            if (e and e["state"] == "down") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        expect(e is not None and e["state"] == "down" and e["status"] == "-2/-2..2"
               and int(e["checks"]) <= 1, "restarted node: %s" % e)
        expect(Client(b.port).addrs("www.fleet.test") == ["127.0.0.31"],
               "restarted node serves the down endpoint")

        # Redis gone: every node checks on its own and answers on
        _, before = endpoints(args, a)
        redis.stop()
        b1.start()  # and the endpoint comes back meanwhile
        ca.wait_for("www.fleet.test", ["127.0.0.30", "127.0.0.31"],
                    (interval / 1000.0) * (UP + 1) + SLACK)
        _, after = endpoints(args, a)
        expect(after["redis"] == "disconnected" and int(after["redis_errors"]) > 0
               and int(after["checks"]) > int(before["checks"]),
               "without Redis: %s (before: %s)" % (after, before))
        for t in nodes:
            t.stop()
            r = clean_exit_result(t)
            expect(r is None, r[1] if r else "")
    except Failure:
        for t in nodes:
            print("--- %s log:\n%s" % (t.dir, t.log_text(6000)))
        raise
    finally:
        for t in nodes:
            t.stop()
        b1.stop()
        b2.stop()
        redis.stop()




def mini_zone(origin, records):
    """A redins JSON zone of origin with the given records (label -> {type: rrset})."""
    soa = {"ttl": 300, "ns": "ns1." + origin + ".", "mbox": "h." + origin + ".", "serial": 1}
    recs = {"@": {"ns": {"records": [{"host": "ns1." + origin + "."}]}},
            "ns1": {"a": {"records": [{"ip": "192.0.2.53"}]}}}
    recs.update(records)
    return {"config": {"soa": soa}, "records": recs}


def big_body(args, work):
    """GET of a 100 MB health page: up, and under BODY_LIMIT of the body sent per check."""
    d = os.path.join(work, "big")
    os.makedirs(d)
    for _ in range(5):  # a port taken between free_port() and bind: pick again
        port = servers.free_port()
        srv = Backend("127.0.0.40", port)
        srv.set("big")
        try:
            srv.start()
            break
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
    else:
        raise Failure("no free port for the big-body server in 5 tries")
    zone = os.path.join(d, "big.json")
    with open(zone, "w") as f:
        json.dump(mini_zone("big.test", {
            "www": {"a": {"ttl": 5, "records": [{"ip": "127.0.0.40"}],
                          "health_check": hc(port, method="GET", up_count=1, down_count=-1,
                                             timeout=5000)}}}), f)
    sock = os.path.join(d, "ternd.sock")
    tern = Ternd(d, [("big.test", zone)], args.ternd,
                 extra_yaml='control_socket: "%s"\nhealth: {check_interval_ms: %d}\n'
                 % (sock, INTERVAL))
    tern.sock = sock
    tern.start("big.test")
    try:
        deadline = time.monotonic() + WAIT
        while len(srv.body_sent()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        eps, _ = endpoints(args, tern)
        e = eps.get("127.0.0.40:%d www.big.test" % port)
        sent = srv.body_sent()
        print("  big body: %d checks, body bytes the server got out per check: %s; endpoint %s"
              % (len(sent), sent[:8], e))
        expect(len(sent) >= 3, "only %d checks finished within %.0f s" % (len(sent), WAIT))
        expect(e and e["state"] == "up" and e.get("error", "") in ("", "-"),
               "the 200 answer did not count as up: %s" % e)
        expect(max(sent) < BODY_LIMIT,
               "the checker read the body: %s bytes sent for one check (limit %d)"
               % (max(sent), BODY_LIMIT))
    except Failure:
        print(tern.log_text())
        raise
    finally:
        tern.stop()
        srv.stop()
    r = clean_exit_result(tern)
    expect(r is None, r[1] if r else "")


def capacity(args, work):
    """Four endpoints of 1000 ms timeout, max_requests 1, every 1000 ms: 4000 ms of checks per
    round when every check runs to its timeout, so one warning at load (achievable 4000 ms),
    and one at each reload."""
    d = os.path.join(work, "capacity")
    os.makedirs(d)
    port = servers.free_port()  # nothing listens: every check is refused at once
    ips = ["127.0.0.%d" % i for i in range(41, 45)]
    zone = os.path.join(d, "cap.json")
    with open(zone, "w") as f:
        json.dump(mini_zone("cap.test", {
            "www": {"a": {"ttl": 5, "records": [{"ip": ip} for ip in ips],
                          "health_check": hc(port, timeout=1000)}}}), f)
    sock = os.path.join(d, "ternd.sock")
    tern = Ternd(d, [("cap.test", zone)], args.ternd,
                 extra_yaml='control_socket: "%s"\nhealth: {check_interval_ms: 1000, '
                 'max_requests: 1}\n' % sock)
    tern.sock = sock
    tern.start("cap.test")
    want = "achievable interval is 4000 ms"

    def warnings():
        return [l for l in tern.log_text(1 << 20).splitlines() if "max_requests" in l]

    try:
        deadline = time.monotonic() + WAIT
        while not any(want in l for l in warnings()) and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = warnings()
        expect(len(lines) == 1 and want in lines[0],
               "want one warning with %r at load, got %s" % (want, lines))
        # once: several rounds of checks later it has not been said again
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            _, summary = endpoints(args, tern)
            if int(summary["checks"]) >= 3 * len(ips):
                break
            time.sleep(0.1)
        expect(int(summary["checks"]) >= 3 * len(ips), "checks: %s" % summary["checks"])
        expect(len(warnings()) == 1, "the warning repeats: %s" % warnings())
        print("  capacity: %s" % lines[0].strip())
        # a reload is a load: said once more
        ternctl(args, tern, "reload")
        deadline = time.monotonic() + WAIT
        while len(warnings()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        expect(len(warnings()) == 2 and want in warnings()[1],
               "want the warning once more after a reload: %s" % warnings())
    except Failure:
        print(tern.log_text())
        raise
    finally:
        tern.stop()
    r = clean_exit_result(tern)
    expect(r is None, r[1] if r else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--ternctl", default=os.environ.get("TERNCTL"))
    ap.add_argument("--only", help="comma-separated scenario groups: checks (the first list "
                    "above), bad_specs, fleet, big_body, capacity; default all")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    if not args.ternd or not args.ternctl:
        ap.error("--ternd and --ternctl are required")
    work = tempfile.mkdtemp(prefix="tern-health-")
    results = []
    try:
        if only is None or "checks" in only:
            run_checks(args, work, results)
        for name, fn in (("bad_specs", bad_specs), ("fleet", fleet), ("big_body", big_body),
                         ("capacity", capacity)):
            if only is None or name in only:
                run_check(results, name, lambda: fn(args, work))
        return report(results)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
