#!/usr/bin/python3
"""Query logging end to end: dnstap to a real Frame Streams reader, and redins' request log.

One ternd serves test_geo's steered zone (geo.test., MaxMind fixtures from
tests/data/make_mmdb.pl) with query_log: dnstap to the UNIX socket of a real `fstrm_capture`
(Debian fstrm-bin) and the request log as JSON lines to a file, metrics on. Checks:

  - dnstap: a known set of queries over UDP and TCP (dnspython); after ternd flushes, the capture
    file decoded by the real `dnstap-read -y` (BIND) holds an AUTH_QUERY and an AUTH_RESPONSE for
    every query, with the client's and the server's addresses and ports, the transport, and the
    query name and type inside the logged messages;
  - the request log: one valid JSON line per query in redins' fields and types (log_type
    "request", source_ip, record, type, the integer response_code, process_time in whole
    milliseconds); the steered answers carry the geo decision (source_country, ecs_scope and the
    client_subnet the query gave, as redins writes it);
  - a count-single pick (a "why Frankfurt" query): destination_ip is the record the client was
    given and destination_country its countries, as redins' Filter() logs them, while
    server_ip is this server's address;
  - the reader going away: fstrm_capture stopped, ternd keeps answering every query, the dnstap
    drops are counted (tern_qlog_dnstap_dropped_total); a new fstrm_capture on the same socket
    receives the queries sent after it started (ternd reconnects within a few seconds);
  - SIGHUP reopens the request log: after the file is renamed (rotation), new lines go to a new
    file at the configured path.

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded; only the processes started here are stopped.

    test_qlog.py --ternd build/ternd
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import dns.edns
import dns.message
import dns.query
import dns.rcode

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
import test_geo  # noqa: E402  (the steered zone)
from servers import (LOOPBACK, Failure, Ternd, expect, find_program,  # noqa: E402
                     run_check)

TIMEOUT = 2.0
DOMAIN_ID = "7d1c1e5a-3b0f-4c8e-9a61-2f4b8d0c6e13"  # redins' zone config domain_id
AU = ("1.2.3.0", 24)


class Capture:
    """A real fstrm_capture reading dnstap from a UNIX socket into a file."""

    def __init__(self, sock, out):
        self.sock, self.out = sock, out
        self.proc = None

    def start(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.proc = subprocess.Popen([find_program("fstrm_capture"), "-t", "protobuf:dnstap.Dnstap",
                                      "-u", self.sock, "-w", self.out],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 5
        while not os.path.exists(self.sock):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("fstrm_capture did not create %s" % self.sock)
            time.sleep(0.05)

    def stop(self):
        """SIGTERM (fstrm_capture then finishes its file), SIGKILL if it lingers."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def dnstap_messages(path):
    """(type, qname, qtype, transport, client addr, client port, server addr, server port) of
    every message in a dnstap file, from dnstap-read -y."""
    out = subprocess.run([find_program("dnstap-read"), "-y", path], capture_output=True,
                         text=True, timeout=30)
    expect(out.returncode == 0, "dnstap-read %s: %s" % (path, out.stderr[-500:]))
    msgs = []
    for doc in out.stdout.split("\n---"):
        cur = {}
        for line in doc.splitlines():
            s = line.strip()
            for key in ("type", "socket_protocol", "query_address", "query_port",
                        "response_address", "response_port"):
                if s.startswith(key + ":") and key not in cur:
                    val = s.split(":", 1)[1].strip().strip('"')
                    if key != "type" or val.startswith("AUTH_"):  # not the frame's "MESSAGE"
                        cur[key] = val
            # the logged message itself, as dnstap-read prints it: ";; QUESTION SECTION:" then
            # ";name.	IN	TYPE"
            if s.startswith(";") and "\tIN\t" in s and "question" not in cur:
                parts = s[1:].split()
                cur["question"] = (parts[0].lower(), parts[-1])
        if cur.get("type"):
            msgs.append(cur)
    return msgs


def metrics(port, prefix="tern_qlog_"):
    """The samples of /metrics whose name starts with prefix, by name (with labels)."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        text = r.read().decode()
    vals = {}
    for line in text.splitlines():
        if line.startswith(prefix):
            k, v = line.rsplit(" ", 1)
            vals[k] = float(v)
    return vals


def ask(port, name, rtype="A", tcp=False, ecs=None):
    opts = [dns.edns.ECSOption(*ecs)] if ecs else []
    q = dns.message.make_query(name, rtype, use_edns=0 if ecs else None, options=opts)
    if tcp:
        return dns.query.tcp(q, LOOPBACK, port=port, timeout=TIMEOUT)
    return dns.query.udp(q, LOOPBACK, port=port, timeout=TIMEOUT)


def wait_for(pred, what, timeout):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise Failure(what)
        time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    args = ap.parse_args()
    if not args.ternd:
        ap.error("--ternd is required")
    for prog in ("fstrm_capture", "dnstap-read"):
        if not find_program(prog):
            print("test_qlog.py: %s not found (fstrm-bin, bind9-dnsutils)" % prog)
            return 1
    work = tempfile.mkdtemp(prefix="tern-qlog-")
    tern = cap = None
    results = []
    try:
        data = os.path.join(work, "data")
        os.makedirs(data)
        subprocess.run(["perl", servers.MAKE_MMDB, data], check=True, timeout=60)
        geo = os.path.join(data, "geo.json")
        zone = test_geo.zone_json()
        zone["config"]["domain_id"] = DOMAIN_ID
        # two AU records for an AU client: a pick of one of several, which the log must name
        zone["records"]["pick"] = {"a": {"ttl": 60, "filter": {"count": "single", "order": "rr",
                                                               "geo_filter": "country"},
                                         "records": [{"ip": "192.0.2.61", "country": "AU"},
                                                     {"ip": "192.0.2.62", "country": "AU"},
                                                     {"ip": "192.0.2.63", "country": "GB"}]}}
        with open(geo, "w") as f:
            json.dump(zone, f)
        sock = os.path.join(work, "dnstap.sock")
        cap = Capture(sock, os.path.join(work, "capture1.fstrm"))
        cap.start()
        reqlog = os.path.join(work, "requests.log")
        mport = servers.free_port()
        extra = ('geoip_db: "%s"\nmetrics_listen: "127.0.0.1:%d"\n'
                 'query_log:\n  dnstap:\n    socket: "%s"\n    identity: qlog-test\n'
                 '  requests:\n    target: file\n    format: json\n    path: "%s"\n'
                 % (os.path.join(data, "nested6.mmdb"), mport, sock, reqlog))
        tern = Ternd(work, [("geo.test.", geo)], args.ternd, extra_yaml=extra)
        tern.start("geo.test.")
        port = tern.port
        # the startup probe's queries are logged too: start counting from here
        wait_for(lambda: os.path.exists(reqlog) and os.path.getsize(reqlog) > 0,
                 "no request log after startup", 5)
        time.sleep(0.2)
        skip_lines = len(open(reqlog).read().splitlines())

        asked = [("plain.geo.test.", "A", False, None), ("country.geo.test.", "A", False, AU),
                 ("nope.geo.test.", "A", False, None), ("plain.geo.test.", "TXT", True, None),
                 ("country.geo.test.", "AAAA", True, None)]

        def queries():
            for name, rtype, tcp, ecs in asked:
                r = ask(port, name, rtype, tcp, ecs)
                expect(r.rcode() in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN),
                       "%s %s: %s" % (name, rtype, dns.rcode.to_text(r.rcode())))

        run_check(results, "queries answered while logging", queries)
        time.sleep(1.5)  # the writer drains every few ms; fstrm flushes within a second

        def request_log():
            lines = open(reqlog).read().splitlines()[skip_lines:]
            expect(len(lines) == len(asked), "%d request-log lines for %d queries:\n%s"
                   % (len(lines), len(asked), "\n".join(lines)))
            for line, (name, rtype, tcp, ecs) in zip(lines, asked):
                o = json.loads(line)
                expect(o.get("record", "").lower() == name and o.get("type") == rtype,
                       "line %r for %s %s" % (line, name, rtype))
                expect(o.get("source_ip") == LOOPBACK, "source_ip in %r" % line)
                expect(o.get("msg") == "dns request" and o.get("log_type") == "request" and
                       type(o.get("process_time")) is int, "redins fields missing in %r" % line)
                expect(o.get("transport") == ("tcp" if tcp else "udp"), "transport in %r" % line)
                want_rc = dns.rcode.NXDOMAIN if name.startswith("nope") else dns.rcode.NOERROR
                expect(type(o.get("response_code")) is int and o["response_code"] == want_rc,
                       "response_code in %r" % line)
                expect(o.get("server_ip") == LOOPBACK and o.get("server_port") == port and
                       "destination_ip" not in o, "server address in %r" % line)
                expect(o.get("domain_uuid") == DOMAIN_ID, "domain_uuid in %r" % line)
                if ecs:
                    expect(o.get("source_country") == "AU" and o.get("ecs_scope") == 24 and
                           o.get("client_subnet") == "1.2.3.0/24/0",
                           "the geo decision is missing from %r" % line)

        run_check(results, "request log: one JSON line per query, geo decision", request_log)

        def destination():
            before = len(open(reqlog).read().splitlines())
            given = []
            for _ in range(8):
                r = ask(port, "pick.geo.test.", "A", ecs=AU)
                addrs = [rd.address for rrset in r.answer for rd in rrset]
                expect(len(addrs) == 1 and addrs[0] in ("192.0.2.61", "192.0.2.62"),
                       "pick.geo.test. for an AU client: %s" % addrs)
                given.append(addrs[0])
            wait_for(lambda: len(open(reqlog).read().splitlines()) >= before + len(given),
                     "no request-log lines for the picks", 5)
            lines = open(reqlog).read().splitlines()[before:before + len(given)]
            for line, addr in zip(lines, given):
                o = json.loads(line)
                expect(o.get("record") == "pick.geo.test.", "line %r" % line)
                expect(o.get("destination_ip") == addr and
                       o.get("destination_country") == ["AU"],
                       "the client was given %s, the log says %r" % (addr, line))
                expect(o.get("server_ip") == LOOPBACK, "server_ip in %r" % line)

        run_check(results, "request log: destination_ip is the record picked", destination)

        def dnstap_first():
            cap.stop()  # finishes capture1
            msgs = dnstap_messages(cap.out)
            got = [m for m in msgs if m.get("question") and
                   m["question"][0] in {n for n, _, _, _ in asked}]
            for name, rtype, tcp, _ in asked:
                mine = [m for m in got if m["question"] == (name, rtype)]
                types = sorted(m["type"] for m in mine)
                expect(len(mine) == 2 and types[0] != types[1] and
                       all(m["type"] in ("AUTH_QUERY", "AUTH_RESPONSE") for m in mine),
                       "%s %s: dnstap messages %s" % (name, rtype, mine))
                for m in mine:
                    expect(m.get("socket_protocol") == ("TCP" if tcp else "UDP"),
                           "%s %s: protocol %s" % (name, rtype, m.get("socket_protocol")))
                    expect(m.get("query_address") == LOOPBACK and
                           m.get("response_address") == LOOPBACK and
                           m.get("response_port") == str(port),
                           "%s %s: addresses %s" % (name, rtype, m))

        run_check(results, "dnstap: AUTH_QUERY and AUTH_RESPONSE per query (dnstap-read)",
                  dnstap_first)

        def reader_gone():
            before = metrics(mport).get("tern_qlog_dnstap_dropped_total", 0)
            for i in range(300):
                r = ask(port, "plain.geo.test.", "A")
                expect(r.rcode() == dns.rcode.NOERROR, "query %d without a reader: %s"
                       % (i, dns.rcode.to_text(r.rcode())))
            wait_for(lambda: metrics(mport).get("tern_qlog_dnstap_dropped_total", 0) > before,
                     "no dnstap drops counted while the reader is gone", 5)

        run_check(results, "reader gone: answers go on, drops counted", reader_gone)

        def reader_back():
            cap2 = Capture(sock, os.path.join(work, "capture2.fstrm"))
            cap2.start()
            try:
                deadline = time.monotonic() + 10
                while True:
                    ask(port, "rr.geo.test.", "A")
                    time.sleep(0.2)
                    m = metrics(mport)
                    if m.get("tern_qlog_dnstap_reconnects_total", 0) >= 1:
                        break
                    if time.monotonic() > deadline:
                        raise Failure("ternd did not reconnect to the new reader: %s" % m)
                for _ in range(5):
                    ask(port, "rr.geo.test.", "A")
                time.sleep(1.5)
            finally:
                cap2.stop()
            msgs = dnstap_messages(cap2.out)
            expect(any(m.get("question") == ("rr.geo.test.", "A") for m in msgs),
                   "the new reader got no messages for rr.geo.test. (%d messages)" % len(msgs))

        run_check(results, "reader back: reconnected, messages flow again", reader_back)

        def rotation():
            rotated = reqlog + ".1"
            os.rename(reqlog, rotated)
            os.kill(tern.proc.pid, signal.SIGHUP)
            time.sleep(0.5)
            ask(port, "wrr.geo.test.", "A")
            wait_for(lambda: os.path.exists(reqlog) and "wrr.geo.test" in open(reqlog).read(),
                     "no new request log at %s after SIGHUP" % reqlog, 5)

        run_check(results, "SIGHUP reopens the request log (rotation)", rotation)

        tern.stop()
        return servers.finish(tern, results)
    finally:
        for p in (tern, cap):
            if p is not None:
                p.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
