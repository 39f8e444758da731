#!/usr/bin/python3
"""ternd's AF_XDP listener (xdp: listen:) end to end, in two network namespaces joined by a veth
pair (test_xdp.py's Netns): ternd runs in the server namespace with "xdp: listen: [<veth>]" and a
zone, and also listens on 127.0.0.1 there, where XDP is not attached. Checks:

  same_answers4    over IPv4 UDP from the client namespace (through the XSK socket) every query
                   of the set (NOERROR, NXDOMAIN, NODATA, CNAME, referral) is answered exactly as
                   the same ternd answers it over its UDP socket
  same_answers6    the same over IPv6
  through_xdp      /metrics: tern_xdp_rx_total and tern_xdp_tx_total counted those queries
  tcp_socket       TCP to the served port still reaches ternd's socket path, same answers
  detached         SIGTERM: ternd exits 0 and no XDP program is left on the interface
  missing_iface    an xdp: interface that does not exist stops ternd at start, saying so

Needs root (namespaces, BPF); exits 77 (skipped) where namespaces or BPF are refused.

    test_xdp_ternd.py --ternd build/ternd --bpf build/src/net/tern_xdp.bpf.o
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import expect, free_port, report, run_check  # noqa: E402
from test_xdp import PY, SERVER4, SERVER6, SKIP, netns_main, run  # noqa: E402

ZONE = """$ORIGIN example.test.
$TTL 300
@       IN SOA ns1 hostmaster 1 3600 600 86400 300
@       IN NS  ns1
ns1     IN A   192.0.2.1
www     IN A   192.0.2.10
www     IN AAAA 2001:db8::10
alias   IN CNAME www
txt     IN TXT "hello over xdp"
sub     IN NS  ns.sub
ns.sub  IN A   192.0.2.53
"""

QUERIES = [("example.test.", "SOA"), ("example.test.", "NS"), ("www.example.test.", "A"),
           ("www.example.test.", "AAAA"), ("www.example.test.", "MX"),
           ("alias.example.test.", "A"), ("txt.example.test.", "TXT"),
           ("nope.example.test.", "A"), ("host.sub.example.test.", "A"),
           ("other.invalid.", "A")]

# Runs in a namespace: each query over udp or tcp, the answer as comparable text.
CLIENT = r"""
import json, sys, dns.message, dns.query, dns.flags
proto, server, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
out = []
for name, qtype in queries:
    q = dns.message.make_query(name, qtype, use_edns=0)
    q.flags &= ~dns.flags.RD
    ask = dns.query.udp if proto == "udp" else dns.query.tcp
    r = ask(q, server, port=53, timeout=3.0)
    assert r.id == q.id
    out.append({"rcode": r.rcode(), "flags": r.flags,
                "answer": sorted(str(x) for x in r.answer),
                "authority": sorted(str(x) for x in r.authority),
                "additional": sorted(str(x) for x in r.additional), "size": len(r.to_wire())})
print(json.dumps(out))
"""

METRICS = r"""
import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=3).read().decode())
"""


def ternd_main(run, *more):
    """run(net, args, d) in fresh namespaces and a temporary directory d, args from the command
    line: --ternd, --bpf and the options named in more; its exit status (SKIP without root)."""
    ap = argparse.ArgumentParser()
    for opt in ("--ternd", "--bpf") + more:
        ap.add_argument(opt, required=True)
    args = ap.parse_args()

    def checks(net):
        with tempfile.TemporaryDirectory() as d:
            return run(net, args, d)
    return netns_main(checks)


def main():
    return ternd_main(run_checks)


def start_ternd(net, args, d, mport, iface=None, extra="", zones=None, listen=None):
    """ternd in the server namespace with xdp: listen: [iface] (the veth by default), extra YAML
    before the zones, zones as [(origin, text, zone YAML)] (example.test alone by default) and
    the listen addresses listen (SERVER4, SERVER6, 127.0.0.1 by default). (process, None) once
    it is ready; (None, its log) when it stopped or never got ready."""
    zones = zones or [("example.test", ZONE, "")]
    listen = listen or ["%s:53" % SERVER4, "[%s]:53" % SERVER6, "127.0.0.1:53"]
    conf = os.path.join(d, "ternd.yaml")
    with open(conf, "w") as f:
        f.write("listen: [%s]\n" % ", ".join('"%s"' % a for a in listen))
        f.write("workers: 1\nallow_root: true\nlog_level: debug\n")
        f.write('metrics_listen: "127.0.0.1:%d"\n' % mport)
        f.write("xdp:\n  listen: [%s]\n" % (iface or net.srv_if))
        f.write(extra)
        f.write("zones:\n")
        for origin, text, zone_yaml in zones:
            path = os.path.join(d, origin + ".zone")
            if text is not None:
                with open(path, "w") as z:
                    z.write(text)
            f.write('  - origin: %s\n' % origin)
            if text is not None:
                f.write('    file: "%s"\n' % path)
            f.write("".join("    %s\n" % line for line in zone_yaml.splitlines()))
    env = dict(os.environ, TERN_XDP_OBJ=os.path.abspath(args.bpf))
    log = open(os.path.join(d, "ternd.log"), "w+")
    proc = subprocess.Popen(net.exec(net.srv, args.ternd, "-c", conf), stdout=log, stderr=log,
                            env=env)
    deadline = time.time() + 20
    while time.time() < deadline:
        log.seek(0)
        text = log.read()
        if "ready:" in text:
            return proc, None
        if proc.poll() is not None:
            return None, text
        time.sleep(0.1)
    proc.kill()
    log.seek(0)
    return None, "ternd did not get ready: " + log.read()


def not_started(text):
    """The exit status when start_ternd() returned (None, text): SKIP where the kernel refused
    BPF, else a failure (its log printed)."""
    if "Operation not permitted" in text or "needs root" in text:
        print("SKIP: the kernel refuses BPF here: " + text.strip()[-400:])
        return SKIP
    print("FAIL: ternd did not start:\n" + text[-3000:])
    return 1


def report_with_log(results, d):
    """report(results), with the end of ternd's log in d when a check failed."""
    if any(err is not None for _, err in results):
        with open(os.path.join(d, "ternd.log")) as f:
            print(f.read()[-4000:])
    return report(results)


def ask(net, ns, proto, server):
    r = run(*net.exec(ns, PY, "-c", CLIENT, proto, server, json.dumps(QUERIES)), check=False)
    expect(r.returncode == 0, "client (%s %s): %s" % (proto, server, r.stderr.strip()[-600:]))
    return json.loads(r.stdout)


def run_checks(net, args, d):
    mport = free_port()
    proc, text = start_ternd(net, args, d, mport)
    if proc is None:
        return not_started(text)
    results = []
    want = ask(net, net.srv, "udp", "127.0.0.1")  # the socket path

    def same(server, proto="udp"):
        def check():
            got = ask(net, net.cli, proto, server)
            for q, g, w in zip(QUERIES, got, want):
                expect(g == w, "%s %s over %s: %s != socket's %s" % (q + (server, g, w)))
        return check

    def through_xdp():
        r = run(*net.exec(net.srv, PY, "-c", METRICS, str(mport)), check=False)
        m = dict(line.split() for line in r.stdout.splitlines()
                 if line.startswith("tern_xdp_") and "{" not in line)
        expect(int(m.get("tern_xdp_rx_total", 0)) >= 2 * len(QUERIES) and
               int(m.get("tern_xdp_tx_total", 0)) >= 2 * len(QUERIES),
               "xdp counters: %s" % m)

    run_check(results, "same_answers4", same(SERVER4))
    run_check(results, "same_answers6", same(SERVER6))
    run_check(results, "through_xdp", through_xdp)
    run_check(results, "tcp_socket", same(SERVER4, "tcp"))
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=20)

    def detached():
        expect(rc == 0, "ternd exited %s" % rc)
        link = run("ip", "-n", net.srv, "link", "show", "dev", net.srv_if).stdout
        expect("xdp" not in link, "a program is still attached: %s" % link)

    run_check(results, "detached", detached)

    def missing_iface():
        p, text = start_ternd(net, args, d, free_port(), "tern-no-such0")
        if p is not None:
            p.kill()
            p.wait()
        expect(p is None and "no interface tern-no-such0" in text, "got: %s" % text[-600:])

    run_check(results, "missing_iface", missing_iface)
    return report_with_log(results, d)


if __name__ == "__main__":
    sys.exit(main())
