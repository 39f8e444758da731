#!/usr/bin/python3
"""The AF_XDP listener end to end, in two network namespaces of the test's own joined by a veth
pair: xdp_echo (tests/integration/xdp_echo.c) attaches tern's XDP program to the server end in
native mode, serves queue 0 through an XSK socket (copy mode: veth has no zero-copy) and echoes
each DNS query back with QR set. From the client namespace:

  udp4_echo        DNS queries over IPv4 come back through the XSK socket (id, question, QR)
  udp6_echo        the same over IPv6 (neighbour discovery still reaches the kernel)
  tcp_to_kernel    TCP to the served port reaches a kernel listener in the server namespace
  udp_other_port   UDP to another port reaches a kernel socket there
  counters         xdp_echo received and sent every query it answered
  detached         after SIGTERM it exits 0 and no XDP program is left on the interface
  errors           a missing interface, a driver without native XDP (lo) and a missing privilege
                   are refused with clear messages

Needs root (namespaces, BPF); exits 77 (skipped) where namespaces or BPF are refused.

    test_xdp.py --echo build/tests/integration/xdp_echo --bpf build/src/net/tern_xdp.bpf.o
"""

import argparse
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import Failure, expect, report, run_check  # noqa: E402

SKIP = 77
PY = "/usr/bin/python3"
SERVER4, CLIENT4 = "10.77.0.1", "10.77.0.2"
SERVER6, CLIENT6 = "fd77::1", "fd77::2"
QUERIES = 20

CLIENT_UDP = r"""
import sys, dns.message, dns.query
server, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    q = dns.message.make_query("q%d.example." % i, "AAAA" if ":" in server else "A")
    r = dns.query.udp(q, server, port=53, timeout=2.0)
    assert r.id == q.id, "id"
    assert r.flags & 0x8000, "QR not set"
    assert r.question == q.question, "question"
print("ok")
"""

CLIENT_STREAM = r"""
import socket, sys
kind, server, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "tcp":
    s = socket.create_connection((server, port), timeout=3)
    print(s.recv(16).decode())
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(b"ping", (server, port))
    print(s.recv(16).decode())
"""

KERNEL_SERVER = r"""
import socket, sys
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind((sys.argv[1], 53))
tcp.listen(4)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind((sys.argv[1], 5353))
print("listening", flush=True)
c, _ = tcp.accept()
c.sendall(b"kernel-tcp")
c.close()
_, peer = udp.recvfrom(16)
udp.sendto(b"kernel-udp", peer)
"""


def run(*args, check=True):
    return subprocess.run(list(args), check=check, timeout=20, capture_output=True, text=True)


class Netns:
    """Two namespaces and a veth pair between them, removed on close."""

    def __init__(self):
        tag = "tx%d" % (os.getpid() % 100000)
        self.srv, self.cli = tag + "s", tag + "c"
        self.srv_if, self.cli_if = tag + "s0", tag + "c0"

    def up(self):
        run("ip", "netns", "add", self.srv)
        run("ip", "netns", "add", self.cli)
        run("ip", "link", "add", self.srv_if, "type", "veth", "peer", "name", self.cli_if)
        for ns, dev, a4, a6 in ((self.srv, self.srv_if, SERVER4, SERVER6),
                                (self.cli, self.cli_if, CLIENT4, CLIENT6)):
            run("ip", "link", "set", dev, "netns", ns)
            run("ip", "-n", ns, "addr", "add", a4 + "/24", "dev", dev)
            run("ip", "-n", ns, "addr", "add", a6 + "/64", "dev", dev, "nodad")
            run("ip", "-n", ns, "link", "set", dev, "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")

    def close(self):
        for ns in (self.srv, self.cli):
            run("ip", "netns", "del", ns, check=False)

    def exec(self, ns, *args):
        return ["ip", "netns", "exec", ns, *args]


def netns_main(fn):
    """fn(net) in a fresh pair of namespaces (removed after): its exit status, or SKIP where root
    or network namespaces are missing."""
    if os.geteuid() != 0:
        print("SKIP: needs root (network namespaces, BPF)")
        return SKIP
    net = Netns()
    try:
        net.up()
    except subprocess.CalledProcessError as e:
        print("SKIP: cannot create network namespaces: %s" % e.stderr.strip())
        net.close()
        return SKIP
    try:
        return fn(net)
    finally:
        net.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--echo", required=True)
    ap.add_argument("--bpf", required=True)
    args = ap.parse_args()
    return netns_main(lambda net: run_checks(net, args))


def start_echo(net, args):
    """xdp_echo in the server namespace, once it says it is serving; None when BPF is refused."""
    echo = subprocess.Popen(net.exec(net.srv, args.echo, net.srv_if, args.bpf, "53"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = echo.stdout.readline()
    if line.startswith("ready"):
        return echo
    out, err = echo.communicate(timeout=10)
    if "Operation not permitted" in err:
        print("SKIP: the kernel refuses BPF here: " + err.strip())
        return None
    raise RuntimeError("xdp_echo did not start: %s%s%s" % (line, out, err))


def run_checks(net, args):
    kernel = subprocess.Popen(net.exec(net.srv, PY, "-c", KERNEL_SERVER, SERVER4),
                              stdout=subprocess.PIPE, text=True)
    expect(kernel.stdout.readline().startswith("listening"), "kernel listeners did not start")
    echo = start_echo(net, args)
    if echo is None:
        kernel.kill()
        return SKIP
    results = []

    def udp(server):
        def check():
            r = run(*net.exec(net.cli, PY, "-c", CLIENT_UDP, server, str(QUERIES)), check=False)
            expect(r.stdout.strip() == "ok", "client: %s %s" % (r.stdout, r.stderr))
        return check

    def stream(kind, port, want):
        def check():
            r = run(*net.exec(net.cli, PY, "-c", CLIENT_STREAM, kind, SERVER4, str(port)),
                    check=False)
            expect(r.stdout.strip() == want, "got %r %s" % (r.stdout, r.stderr.strip()))
        return check

    run_check(results, "udp4_echo", udp(SERVER4))
    run_check(results, "udp6_echo", udp(SERVER6))
    run_check(results, "tcp_to_kernel", stream("tcp", 53, "kernel-tcp"))
    run_check(results, "udp_other_port", stream("udp", 5353, "kernel-udp"))
    echo.terminate()
    out, err = echo.communicate(timeout=10)
    kernel.kill()
    kernel.wait()

    def counters():
        stats = dict(kv.split("=") for kv in out.split())
        expect(int(stats["rx"]) >= 2 * QUERIES and stats["tx"] == stats["rx"],
               "counters: %s" % out.strip())

    def detached():
        expect(echo.returncode == 0, "xdp_echo exited %s: %s" % (echo.returncode, err))
        link = run("ip", "-n", net.srv, "link", "show", "dev", net.srv_if).stdout
        expect("xdp" not in link, "a program is still attached: %s" % link)

    def errors():
        r = run(*net.exec(net.srv, args.echo, "tern-no-such0", args.bpf, "53"), check=False)
        expect(r.returncode == 1 and "no interface tern-no-such0" in r.stderr,
               "missing interface: %d %s" % (r.returncode, r.stderr))
        r = run(*net.exec(net.srv, args.echo, "lo", args.bpf, "53"), check=False)
        expect(r.returncode == 1 and "the driver has no native XDP mode" in r.stderr,
               "loopback (no native XDP): %d %s" % (r.returncode, r.stderr))
        r = run(*net.exec(net.srv, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          args.echo, net.srv_if, args.bpf, "53"), check=False)
        expect(r.returncode == 1 and "needs root" in r.stderr,
               "unprivileged: %d %s" % (r.returncode, r.stderr))
        link = run("ip", "-n", net.srv, "link", "show", "dev", net.srv_if).stdout
        expect("xdp" not in link, "a refused attach left a program: %s" % link)

    run_check(results, "counters", counters)
    run_check(results, "detached", detached)
    run_check(results, "errors", errors)
    return report(results)


if __name__ == "__main__":
    sys.exit(main())
