#!/usr/bin/python3
"""ternd's limits, cookies, query log and transfer hand-off over AF_XDP, end to end: the real
ternd in test_xdp.py's network namespaces with "xdp: listen: [<veth>]", asked from the client
namespace (through the XSK socket) and, for the same checks, from 127.0.0.1 in the server
namespace (its UDP socket path). Every check also reads tern_xdp_rx_total before and after, so a
check that the kernel's stack answered instead would fail. Checks:

  zone_acl        a zone whose acl denies the client: REFUSED with the question echoed (refuse),
                  silence (drop); the socket path's client, allowed, gets the answer; a zone
                  denying both: the same REFUSED response both ways
  rrl             one name flooded from one client (rrl rate 20, burst 20, slip 2): at most the
                  budget's full answers, the limited rest either dropped or slipped as TC (about
                  every 2nd), as on the socket path
  cookies         a client cookie gets a server cookie minted for the client's address, which is
                  valid when sent back (tern_cookies_valid); after a reload with require: no
                  cookie is TC, a client cookie alone or a forged server cookie BADCOOKIE with a
                  fresh one, a valid cookie the answer; the socket path answers alike
  qlog            the request log (JSON lines) has the XDP queries, IPv4 and IPv6, with the
                  client's address as source_ip and the server's as server_ip
  tsig_soa        a TSIG-signed SOA query (handed to the transfer thread) over IPv4 and IPv6:
                  NOERROR, the zone's SOA, a reply signed with the key (dnspython verifies it)
                  and sent from the address asked; a wrong key: BADSIG
  tsig_notify     a signed NOTIFY for a secondary zone from its primary's address: NOERROR,
                  signed, and the zone is refreshed ("refreshing" in the log); unsigned: NOTAUTH
  per_queue       /metrics' per-socket families (interface and queue labels) and ternctl stats'
                  xdp_ lines: the one queue's rx, tx and every drop stage equal the totals

ternd listens on 127.0.0.1 first, so a hand-off's reply must pick the socket of the address
the query was sent to, not the first one. Needs root (namespaces, BPF); exits 77 (skipped)
where namespaces or BPF are refused.

    test_xdp_limits.py --ternd build/ternd --ternctl build/ternctl --bpf build/.../tern_xdp.bpf.o
"""

import json
import os
import re
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import expect, free_port, run_check  # noqa: E402
from test_xdp import CLIENT4, PY, SERVER4, SERVER6, run  # noqa: E402
from test_xdp_ternd import (METRICS, ZONE, not_started, report_with_log,  # noqa: E402
                            start_ternd, ternd_main)  # noqa: E402

SECRET = "e5e973e5a6b2a43f48e7dc849e37bfcf"  # the cookie secret
KEY_NAME = "xdp-key"
KEY = "c2VjcmV0LWtleS1vZi10aGUteGRwLXRlc3Q="
WRONG = "d3Jvbmcta2V5LW9mLXRoZS14ZHAtdGVzdCE="
RRL_RATE, RRL_BURST, FLOOD = 20, 20, 200

PRIVATE = ZONE.replace("example.test.", "private.test.")
QUIET = ZONE.replace("example.test.", "quiet.test.")
DENY = '[10.77.0.0/24, "fd77::/64"]'  # the client namespace's addresses
ZONES = [("example.test", ZONE, ""),
         ("private.test", PRIVATE, "acl: {deny: %s}" % DENY),
         ("quiet.test", QUIET, "acl: {deny: %s, action: drop}" % DENY),
         ("both.test", ZONE.replace("example.test.", "both.test."),
          "acl: {deny: %s}" % DENY.replace("]", ", 127.0.0.0/8]")),
         # a secondary of the client's address (nothing serves it: NOTIFY only starts a refresh)
         ("sec.test", None, 'primary: {address: "%s@5399", key: %s}' % (CLIENT4, KEY_NAME))]

# Runs in a namespace: argv = scenario, server, JSON arguments; prints JSON.
CLIENT = r"""
import json, socket, sys, time
import dns.edns, dns.flags, dns.message, dns.opcode, dns.query, dns.rcode, dns.rdatatype
import dns.tsig, dns.tsigkeyring
what, server, arg = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
COOKIE = 10

def ask(name, qtype="A", cookie=None, timeout=1.0):
    opts = [dns.edns.GenericOption(COOKIE, bytes.fromhex(cookie))] if cookie else []
    q = dns.message.make_query(name, qtype, use_edns=0, options=opts, payload=1232)
    try:
        r = dns.query.udp(q, server, port=53, timeout=timeout)
    except dns.exception.Timeout:
        return None
    c = [o.to_wire().hex() for o in r.options if o.otype == COOKIE]
    return {"rcode": r.rcode(), "tc": bool(r.flags & dns.flags.TC), "answer": len(r.answer),
            "question": [str(x.name) for x in r.question], "cookie": c[0] if c else None}

def flood(name, n, wait):
    # n queries at once from one socket, then every reply that comes within wait seconds
    fam = socket.AF_INET6 if ":" in server else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    start = time.time()
    for i in range(n):
        q = dns.message.make_query(name, "TXT", use_edns=0)
        q.id = i
        s.sendto(q.to_wire(), (server, 53))
    sent = time.time() - start
    full = tc = 0
    s.settimeout(0.2)
    end = time.time() + wait
    while time.time() < end:
        try:
            r = dns.message.from_wire(s.recv(4096), ignore_trailing=True)
        except socket.timeout:
            continue
        if r.flags & dns.flags.TC:
            tc += 1
        elif r.answer:
            full += 1
    return {"full": full, "tc": tc, "seconds": sent}

def signed(name, qtype, key, opcode=dns.opcode.QUERY):
    q = dns.message.make_query(name, qtype)
    if opcode == dns.opcode.NOTIFY:
        q.flags = dns.flags.AA  # the opcode is in the same word: set after
    q.set_opcode(opcode)
    if key:
        ring = dns.tsigkeyring.from_text({arg["name"]: key})
        q.use_tsig(ring, keyname=arg["name"], algorithm=dns.tsig.HMAC_SHA256)
    fam = socket.AF_INET6 if ":" in server else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(3.0)
    s.sendto(q.to_wire(), (server, 53))
    wire, src = s.recvfrom(4096)  # where the reply came from, then what it says
    try:
        r = dns.message.from_wire(wire, keyring=q.keyring, request_mac=q.mac)
    except dns.tsig.PeerBadSignature:
        return {"from": src[0], "error": "BADSIG"}
    except dns.tsig.PeerError as e:
        return {"from": src[0], "error": type(e).__name__}
    return {"from": src[0], "rcode": r.rcode(), "opcode": r.opcode(), "signed": r.had_tsig,
            "answer": [str(x) for x in r.answer]}

if what == "ask":
    out = [ask(*q) for q in arg]
elif what == "flood":
    out = flood(arg["name"], arg["n"], arg["wait"])
else:
    out = [signed(*q) for q in arg["queries"]]
print(json.dumps(out))
"""


def main():
    return ternd_main(run_checks, "--ternctl")


def config(d, require=False):
    return ('control_socket: "%s"\n'
            "tsig_keys:\n  - {name: %s, algorithm: hmac-sha256, secret: \"%s\"}\n"
            "rrl:\n  rate: %d\n  burst: %d\n  slip: 2\n"
            'cookies:\n  secret: "%s"\n  require: %s\n'
            'query_log:\n  requests:\n    target: file\n    format: json\n    path: "%s"\n'
            % (os.path.join(d, "ctl.sock"), KEY_NAME, KEY, RRL_RATE, RRL_BURST, SECRET,
               "true" if require else "false", os.path.join(d, "requests.log")))


class Checks:
    """What the checks share: the namespaces, ternd's metrics port and control socket."""

    def __init__(self, net, args, d, mport):
        self.net, self.args, self.d, self.mport = net, args, d, mport

    def client(self, ns, what, server, arg):
        r = run(*self.net.exec(ns, PY, "-c", CLIENT, what, server, json.dumps(arg)), check=False)
        expect(r.returncode == 0, "client (%s %s): %s" % (what, server, r.stderr.strip()[-800:]))
        return json.loads(r.stdout)

    def xdp(self, what, server, arg):
        """The client namespace's run of a scenario (over XDP), and how many frames the XSK
        sockets received meanwhile."""
        before = self.metric("tern_xdp_rx_total")
        out = self.client(self.net.cli, what, server, arg)
        return out, self.metric("tern_xdp_rx_total") - before

    def sock(self, what, arg):
        """The same scenario from 127.0.0.1 in the server namespace: the UDP socket path."""
        return self.client(self.net.srv, what, "127.0.0.1", arg)

    def metric(self, name):
        r = run(*self.net.exec(self.net.srv, PY, "-c", METRICS, str(self.mport)), check=False)
        for line in r.stdout.splitlines():
            if line.startswith(name + " "):
                return int(float(line.split()[1]))
        return 0

    def ctl(self, *cmd):
        r = run(self.args.ternctl, "-s", os.path.join(self.d, "ctl.sock"), *cmd, check=False)
        expect(r.returncode == 0, "ternctl %s: %s%s" % (" ".join(cmd), r.stdout, r.stderr))
        return r.stdout


def check_zone_acl(c):
    qs = [("www.private.test.", "A"), ("www.quiet.test.", "A"), ("www.example.test.", "A")]
    for server in (SERVER4, SERVER6):
        got, rx = c.xdp("ask", server, qs)
        expect(rx >= len(qs), "%s: %d frames through XDP for %d queries" % (server, rx, len(qs)))
        refused, silent, allowed = got
        expect(refused and refused["rcode"] == 5 and refused["question"] == [qs[0][0]] and
               not refused["answer"], "%s, refusing zone acl: %s" % (server, refused))
        expect(silent is None, "%s, dropping zone acl: answered %s" % (server, silent))
        expect(allowed and allowed["rcode"] == 0 and allowed["answer"] == 1,
               "%s, zone without acl: %s" % (server, allowed))
    got = c.sock("ask", qs)
    expect(all(r and r["rcode"] == 0 and r["answer"] == 1 for r in got),
           "the socket path's client (not denied): %s" % got)
    # a zone denying both clients: the same refusal over XDP and over the socket
    both = [("www.both.test.", "A")]
    want = c.sock("ask", both)
    expect(want[0] and want[0]["rcode"] == 5, "socket path, both denied: %s" % want)
    for server in (SERVER4, SERVER6):
        got, _ = c.xdp("ask", server, both)
        expect(got == want, "%s, both denied: %s, the socket path %s" % (server, got, want))


def check_rrl(c):
    def judge(f, where):
        # the budget: burst + rate x the flood's duration and the drain, 10% timer slack
        budget = (RRL_BURST + RRL_RATE * (f["seconds"] + 1.0)) * 1.1
        limited = FLOOD - f["full"]
        expect(0 < f["full"] <= budget, "%s: %d full answers, budget %.0f" %
               (where, f["full"], budget))
        # a limited reply is slipped (TC) or dropped: about half each; at least a quarter
        # slipped, so both happened (a slip lost on the way only lowers the count)
        expect(limited > FLOOD // 2 and limited // 4 <= f["tc"] <= limited // 2 + 2,
               "%s: %d TC slips for %d limited (slip 2)" % (where, f["tc"], limited))
    arg = {"name": "txt.example.test.", "n": FLOOD, "wait": 1.0}
    got, rx = c.xdp("flood", SERVER4, arg)
    expect(rx >= FLOOD, "%d frames through XDP for a flood of %d" % (rx, FLOOD))
    judge(got, "over XDP")
    judge(c.sock("flood", arg), "socket path")
    dropped = c.metric('tern_limited_total{rule="rrl",action="dropped"}')
    expect(dropped > 0, "tern_limited_total{rrl, dropped}: %d" % dropped)


def check_cookies(c):
    client = os.urandom(8).hex()
    q = "www.example.test."
    got, rx = c.xdp("ask", SERVER4, [(q, "A", client)])
    first = got[0]
    expect(first and first["rcode"] == 0 and first["answer"] == 1 and first["cookie"] and
           len(first["cookie"]) == 48 and first["cookie"].startswith(client),
           "client cookie only: %s" % first)
    got, rx2 = c.xdp("ask", SERVER4, [(q, "A", first["cookie"])])
    expect(got[0] and got[0]["rcode"] == 0 and got[0]["cookie"].startswith(client),
           "with the server cookie: %s" % got[0])
    expect(rx + rx2 >= 2, "%d frames through XDP" % (rx + rx2))
    stats = c.ctl("stats")
    expect(re.search(r"^cookies_valid: [1-9]", stats, re.M),
           "the server cookie minted over XDP was not valid when sent back: %s" % stats)

    with open(os.path.join(c.d, "ternd.yaml")) as f:
        yaml = f.read()
    with open(os.path.join(c.d, "ternd.yaml"), "w") as f:
        f.write(yaml.replace("require: false", "require: true"))
    c.ctl("reload")

    def required(ask, tag):
        none, alone = ask("ask", [(q, "A"), (q, "A", client)])
        expect(none and none["tc"] and not none["answer"], "%s, no cookie: %s" % (tag, none))
        expect(alone and alone["rcode"] == 23 and not alone["answer"] and alone["cookie"],
               "%s, client cookie alone: %s" % (tag, alone))
        fresh = alone["cookie"]
        forged = fresh[:-2] + "%02x" % (int(fresh[-2:], 16) ^ 1)
        good, bad = ask("ask", [(q, "A", fresh), (q, "A", forged)])
        expect(good and good["rcode"] == 0 and good["answer"] == 1 and
               good["cookie"].startswith(client), "%s, valid cookie: %s" % (tag, good))
        expect(bad and bad["rcode"] == 23, "%s, forged cookie: %s" % (tag, bad))
    for server in (SERVER4, SERVER6):
        required(lambda what, arg, s=server: c.xdp(what, s, arg)[0], "over XDP " + server)
    required(c.sock, "socket path")
    badcookie = int(re.search(r"^badcookie: (\d+)", c.ctl("stats"), re.M).group(1))
    expect(badcookie >= 6, "badcookie %d" % badcookie)


def check_qlog(c):
    names = {SERVER4: "qlog4.example.test.", SERVER6: "qlog6.example.test."}
    for server, name in names.items():
        c.xdp("ask", server, [(name, "A")])
    path = os.path.join(c.d, "requests.log")
    found = {}
    deadline = time.time() + 5
    while len(found) < 2 and time.time() < deadline:
        time.sleep(0.2)
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                for server, name in names.items():
                    if rec.get("record") in (name, name.rstrip(".")):
                        found[server] = rec
    for server, client in ((SERVER4, CLIENT4), (SERVER6, "fd77::2")):
        rec = found.get(server)
        expect(rec is not None, "no request log line for %s over XDP" % names[server])
        expect(rec["source_ip"] == client and rec["server_ip"] == server and
               rec["response_code"] == 3, "request log line: %s" % rec)


def check_tsig_soa(c):
    arg = {"name": KEY_NAME,
           "queries": [("example.test.", "SOA", KEY), ("example.test.", "SOA", WRONG)]}
    want = None
    for server in (SERVER4, SERVER6):
        (good, wrong), rx = c.xdp("signed", server, arg)
        expect(rx >= 2, "%s: %d frames through XDP for 2 queries" % (server, rx))
        expect(good.get("from") == server, "%s: the reply came from %s" % (server, good))
        expect(good.get("rcode") == 0 and good["signed"] and len(good["answer"]) == 1 and
               " SOA ns1.example.test. " in good["answer"][0], "%s: %s" % (server, good))
        expect(wrong.get("error") == "BADSIG", "%s, wrong key: %s" % (server, wrong))
        want = want or (good, wrong)
    good, wrong = c.sock("signed", arg)
    expect((dict(good, **{"from": ""}), wrong.get("error")) ==
           (dict(want[0], **{"from": ""}), want[1].get("error")),
           "the socket path answers %s, %s; XDP %s" % (good, wrong, want))


def check_tsig_notify(c):
    notify = 4  # dns.opcode.NOTIFY
    arg = {"name": KEY_NAME, "queries": [("sec.test.", "SOA", KEY, notify),
                                         ("sec.test.", "SOA", None, notify)]}
    (good, unsigned), rx = c.xdp("signed", SERVER4, arg)
    expect(rx >= 2, "%d frames through XDP for 2 NOTIFYs" % rx)
    expect(good.get("from") == SERVER4 and good.get("rcode") == 0 and good["opcode"] == notify
           and good["signed"], "signed NOTIFY: %s" % good)
    expect(unsigned.get("rcode") == 9, "unsigned NOTIFY: %s, expected NOTAUTH" % unsigned)
    with open(os.path.join(c.d, "ternd.log")) as f:
        log = f.read()
    expect(re.search(r"NOTIFY for sec\.test\. from %s@\d+: refreshing" % re.escape(CLIENT4), log),
           "no refresh logged for the NOTIFY")


def check_per_queue(c):
    r = run(*c.net.exec(c.net.srv, PY, "-c", METRICS, str(c.mport)), check=False)
    m = dict(line.rsplit(" ", 1) for line in r.stdout.splitlines()
             if line.startswith("tern_xdp_") and not line.startswith("#"))
    q = 'interface="%s",queue="0"' % c.net.srv_if
    for what in ("rx", "tx"):
        expect(m.get("tern_xdp_queue_%s_total{%s}" % (what, q)) == m["tern_xdp_%s_total" % what],
               "queue 0's %s is not the total (one queue): %s" % (what, m))
    stages = ("parse", "answer", "tx_full", "fill_short", "rx_ring_full", "fill_empty",
              "kernel_other", "invalid")
    for stage in stages:
        expect(m.get('tern_xdp_queue_dropped_total{%s,stage="%s"}' % (q, stage)) ==
               m['tern_xdp_dropped_total{stage="%s"}' % stage], "stage %s: %s" % (stage, m))
    # the RRL flood's drops and the hand-offs were answered by no XDP reply
    expect(int(m['tern_xdp_dropped_total{stage="answer"}']) > 0, "no answer-stage drops: %s" % m)
    stats = dict(line.split(": ", 1) for line in c.ctl("stats").splitlines() if ": " in line)
    pre = "xdp_%s_0_" % c.net.srv_if
    expect(stats.get("xdp_rx") and stats.get(pre + "rx") == stats["xdp_rx"] and
           stats.get(pre + "tx") == stats["xdp_tx"] and
           all(stats.get(pre + "dropped_" + s) == stats.get("xdp_dropped_" + s) for s in stages),
           "ternctl stats: %s" % {k: v for k, v in stats.items() if k.startswith("xdp")})


def run_checks(net, args, d):
    mport = free_port()
    proc, text = start_ternd(net, args, d, mport, extra=config(d), zones=ZONES,
                             listen=["127.0.0.1:53", "%s:53" % SERVER4, "[%s]:53" % SERVER6])
    if proc is None:
        return not_started(text)
    c = Checks(net, args, d, mport)
    results = []
    try:
        run_check(results, "zone_acl", lambda: check_zone_acl(c))
        run_check(results, "qlog", lambda: check_qlog(c))
        run_check(results, "tsig_soa", lambda: check_tsig_soa(c))
        run_check(results, "tsig_notify", lambda: check_tsig_notify(c))
        run_check(results, "rrl", lambda: check_rrl(c))
        run_check(results, "per_queue", lambda: check_per_queue(c))
        run_check(results, "cookies", lambda: check_cookies(c))  # last: it requires cookies
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    return report_with_log(results, d)


if __name__ == "__main__":
    sys.exit(main())
