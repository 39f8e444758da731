#!/usr/bin/python3
"""Dynamic updates (RFC 2136) end to end, with the real clients and a real secondary.

One ternd serves:
  u.test  a master file, allow_update: [upd-key]; a real Knot is its secondary (allow_transfer,
          NOTIFY), so every change must reach Knot by IXFR;
  o.test  a master file, allow_update: [{address: 127.0.0.1}] (unsigned from loopback),
          update_rate 5 a second, update_max_records 20;
  n.test  a master file without allow_update;
  s.test  a secondary zone (its primary is down).

Checks (nsupdate from bind9-dnsutils, knsupdate from knot-dnsutils, dnspython for exact
messages; every answer is read back with a query):
  nsupdate_add_delete     add, then delete RR / RRset / name, over UDP and TCP (nsupdate -v);
                          each change is served at once and the serial goes up by one
  prerequisites           each of RFC 2136's five kinds, true and false, with nsupdate: the
                          rcodes (YXDOMAIN, NXDOMAIN, YXRRSET, NXRRSET) and nothing applied
  knsupdate               knsupdate with the key adds and deletes
  refusals                a wrong secret (NOTAUTH/BADSIG), no key (REFUSED), a zone without
                          allow_update (REFUSED), a secondary zone (NOTAUTH), a zone tern does
                          not serve (NOTAUTH), a name outside the zone (NOTZONE), too many
                          records (REFUSED), a CNAME beside data (ignored: NOERROR, unchanged)
  unsigned_by_address     o.test takes unsigned updates from 127.0.0.1
  rate_limit              a burst over update_rate: the excess REFUSED, the rest applied
  ixfr_to_knot            Knot serves each change (NOTIFY, IXFR) and tern logged an IXFR
  ternctl_zone            the journal and the last changes with who made them
  restart_replays         SIGTERM, start again: every change served (the journal replayed)
  kill9_after_answer      SIGKILL right after a NOERROR: the change is served after a start
  flush                   ternctl zone flush: the file holds the changes, the journal is empty,
                          a restart serves the same; a later update still applies
  journal_out_of_sync     the file edited with another serial while changes are pending: a
                          reload fails and says why, the old version stays served
  metrics                 /metrics counts the changes applied and the answers by rcode
  redis_zone              r.test lives in a real redis-server (a zones: entry with allow_update,
                          no file): nsupdate adds to a geo-steered A set and deletes a TXT; the
                          change is served at once, Redis holds it in redins' schema (the staying
                          record keeps its country, the set its filter), the config's serial is
                          the new one, a second ternd reading the same Redis serves it too, a
                          type redins' schema has no place for is REFUSED
  signed_zone             sig.test, signed by tern (keys from ternctl dnssec keygen): an added
                          name and a deleted one validate with delv from the zone's DS
                          (fully validated; the deletion as a validated NXDOMAIN)
  zonefile_sync           a second ternd with zonefile_sync: 1 writes its zone's file back on
                          its own a second or two after a change, and empties the journal
  clean_exit              ternd exits 0 on SIGTERM

    test_update.py --ternd build/ternd --ternctl build/ternctl
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsig
import dns.tsigkeyring
import dns.update

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, Failure, expect, find_program, free_port, run_check  # noqa: E402

KEY_NAME = "upd-key"
SECRET = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="
WRONG = "d3JvbmdrZXl3cm9uZ2tleXdyb25na2V5d3JvbmdrZXk="
TIMEOUT = 5.0
CONVERGE = 15.0
KEYRING = dns.tsigkeyring.from_text({KEY_NAME: SECRET})


def zone_text(origin, serial):
    return f"""$ORIGIN {origin}.
@ 3600 IN SOA ns1 hostmaster {serial} 3600 600 86400 300
@ 3600 IN NS ns1
ns1 3600 IN A 192.0.2.1
www 300 IN A 192.0.2.10
www 300 IN A 192.0.2.11
www 300 IN TXT "hello"
mail 300 IN MX 10 mx.example.
"""


def ask(port, name, rdtype, tcp=False):
    q = dns.message.make_query(name, rdtype)
    fn = dns.query.tcp if tcp else dns.query.udp
    return fn(q, LOOPBACK, port=port, timeout=TIMEOUT)


def rdatas(port, name, rdtype):
    r = ask(port, name, rdtype)
    if r.rcode() != dns.rcode.NOERROR or not r.answer:
        return set()
    return {rd.to_text() for rd in r.answer[0]}


def serial_of(port, origin):
    r = ask(port, origin, "SOA")
    if r.rcode() != dns.rcode.NOERROR or not r.answer:
        return None
    return r.answer[0][0].serial


wait_for = servers.wait_until


class Ternd(servers.YamlTernd):
    def restart(self, probe="u.test"):
        self.stop()
        self.start(probe)

    def kill9(self):
        self.proc.kill()
        self.proc.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None


class Knot(servers.Server):
    """Knot as the secondary of u.test, transferred from tern."""

    name = "knot"

    def __init__(self, workdir, tern_port):
        self.tern_port = tern_port
        super().__init__(workdir, [])
        os.makedirs(os.path.join(self.dir, "db"), exist_ok=True)

    def command(self):
        d = self.dir
        conf = os.path.join(d, "knot.conf")
        with open(conf, "w") as f:
            f.write(servers.knot_conf_head(d, self.port, log="info"))
            f.write(f"""remote:
  - id: tern
    address: {LOOPBACK}@{self.tern_port}
acl:
  - id: from_tern
    address: {LOOPBACK}
    action: notify
template:
  - id: default
    storage: "{d}"
    zonefile-sync: -1
    journal-content: changes
zone:
  - domain: u.test
    file: u.test.secondary
    master: tern
    acl: from_tern
""")
        return [find_program("knotd"), "-c", conf]


# update_rate is 5 a second (per key and per address): the checks that are not about the rate
# space their updates this far apart so they never meet it.
SPACING = 0.21


def nsupdate(port, lines, key=SECRET, tcp=False, binary="nsupdate"):
    """Run nsupdate with lines (server and send added); (exit status, output)."""
    time.sleep(SPACING)
    script = "server %s %d\n%s\nsend\n" % (LOOPBACK, port, "\n".join(lines))
    cmd = [find_program(binary)]
    if tcp:
        cmd.append("-v")
    if key:
        cmd += ["-y", "hmac-sha256:%s:%s" % (KEY_NAME, key)]
    p = subprocess.run(cmd, input=script, capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout + p.stderr


def knsupdate(port, lines):
    time.sleep(SPACING)
    script = "server %s %d\nkey hmac-sha256:%s %s\n%s\nsend\nanswer\n" % (
        LOOPBACK, port, KEY_NAME, SECRET, "\n".join(lines))
    p = subprocess.run([find_program("knsupdate")], input=script, capture_output=True, text=True,
                       timeout=30)
    return p.returncode, p.stdout + p.stderr


def send_update(port, upd, tcp=False, spaced=True):
    if spaced:
        time.sleep(SPACING)
    fn = dns.query.tcp if tcp else dns.query.udp
    return fn(upd, LOOPBACK, port=port, timeout=TIMEOUT).rcode()


def signed_update(zone):
    return dns.update.UpdateMessage(zone, keyring=KEYRING, keyname=KEY_NAME,
                                    keyalgorithm=dns.tsig.HMAC_SHA256)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl", required=True)
    args = ap.parse_args()
    for prog in ("nsupdate", "knsupdate", "knotd", "delv", "redis-server"):
        if find_program(prog) is None:
            print("%s not found: skipped" % prog)
            return 77
    work = tempfile.mkdtemp(prefix="tern-update-")
    results = []
    zdir = os.path.join(work, "zones")
    os.makedirs(zdir)
    paths = {}
    for z in ("u.test", "o.test", "n.test", "sig.test"):
        paths[z] = os.path.join(zdir, z + ".zone")
        servers.write_atomic(paths[z], zone_text(z, 1))
    kdir = os.path.join(work, "keys")
    os.makedirs(kdir)
    kg = subprocess.run([args.ternctl, "dnssec", "keygen", "sig.test", "-a", "13", "-d", kdir],
                        capture_output=True, text=True, timeout=30)
    stems = kg.stdout.split()
    if kg.returncode != 0 or len(stems) != 2:
        raise RuntimeError("ternctl dnssec keygen: %s %s" % (kg.stdout, kg.stderr))
    tern_port = free_port()
    knot = Knot(work, tern_port)
    redis = servers.Redis(work)
    dead = free_port()
    mport = free_port()
    yaml = f"""tsig_keys:
  - {{name: {KEY_NAME}, algorithm: hmac-sha256, secret: "{SECRET}"}}
update_rate: 5
update_max_records: 20
metrics_listen: "{LOOPBACK}:{mport}"
redis:
  address: "{LOOPBACK}:{redis.port}"
  connect_timeout: 500
zones:
  - origin: r.test
    allow_update: [{KEY_NAME}]
  - origin: u.test
    file: "{paths['u.test']}"
    allow_update: [{KEY_NAME}]
    allow_transfer: [127.0.0.1]
    notify: ["{LOOPBACK}@{knot.port}"]
  - origin: o.test
    file: "{paths['o.test']}"
    allow_update: [{{address: 127.0.0.1}}]
  - origin: n.test
    file: "{paths['n.test']}"
  - origin: s.test
    primary: "{LOOPBACK}@{dead}"
  - origin: sig.test
    file: "{paths['sig.test']}"
    allow_update: [{KEY_NAME}]
    dnssec: {{keys: [{stems[0]}, {stems[1]}]}}
"""
    tern = Ternd(work, args.ternd, yaml, ternctl=args.ternctl)
    tern.port = tern_port
    started = []
    port = tern_port
    try:
        redis.start()
        started.append(redis)
        redis.put_zone("r.test.", {
            "@": {"ns": {"ttl": 300, "records": [{"host": "ns1.r.test."}]}},
            "ns1": {"a": {"ttl": 300, "records": [{"ip": "192.0.2.53"}]}},
            "www": {"a": {"ttl": 300, "filter": {"count": "multi", "order": "none",
                                                 "geo_filter": "none"},
                          "records": [{"ip": "192.0.2.1", "country": ["DE"], "weight": 5}]},
                    "txt": {"ttl": 300, "records": [{"text": "old"}]}},
        }, {"ttl": 300, "ns": "ns1.r.test.", "MBox": "hostmaster.r.test.", "refresh": 3600,
            "retry": 600, "expire": 86400, "minttl": 60, "serial": 7})
        tern.start("u.test")
        started.append(tern)
        knot.start("u.test")
        started.append(knot)

        def nsupdate_add_delete():
            s0 = serial_of(port, "u.test")
            rc, out = nsupdate(port, ["zone u.test", "update add new.u.test. 60 A 192.0.2.50"])
            expect(rc == 0, "nsupdate add: %s" % out)
            expect(rdatas(port, "new.u.test", "A") == {"192.0.2.50"}, "new.u.test not served")
            expect(serial_of(port, "u.test") == s0 + 1, "serial not one up")
            rc, out = nsupdate(port, ["zone u.test", "update delete www.u.test. A 192.0.2.10",
                                      "update add txt.u.test. 60 TXT \"a b\" \"c\""], tcp=True)
            expect(rc == 0, "nsupdate -v: %s" % out)
            expect(rdatas(port, "www.u.test", "A") == {"192.0.2.11"}, "one A not deleted")
            expect(rdatas(port, "txt.u.test", "TXT") == {'"a b" "c"'}, "TXT not added")
            rc, out = nsupdate(port, ["zone u.test", "update delete www.u.test. TXT",
                                      "update delete mail.u.test."])
            expect(rc == 0, "nsupdate delete: %s" % out)
            expect(not rdatas(port, "www.u.test", "TXT"), "TXT RRset not deleted")
            expect(ask(port, "mail.u.test", "MX").rcode() == dns.rcode.NXDOMAIN,
                   "mail.u.test not deleted")
            expect(serial_of(port, "u.test") == s0 + 3, "serial not three up")

        def prerequisites():
            cases = [  # (prereq line, expected nsupdate failure or None)
                ("prereq nxdomain www.u.test.", "YXDOMAIN"),
                ("prereq yxdomain nothere.u.test.", "NXDOMAIN"),
                ("prereq nxrrset www.u.test. A", "YXRRSET"),
                ("prereq yxrrset www.u.test. AAAA", "NXRRSET"),
                ("prereq yxrrset www.u.test. A 192.0.2.99", "NXRRSET"),
                ("prereq nxdomain free.u.test.", None),
                ("prereq yxdomain www.u.test.", None),
                ("prereq nxrrset www.u.test. AAAA", None),
                ("prereq yxrrset www.u.test. A", None),
                ("prereq yxrrset www.u.test. A 192.0.2.11", None),
            ]
            for i, (pre, fail) in enumerate(cases):
                name = "p%d.u.test." % i
                rc, out = nsupdate(port, ["zone u.test", pre, "update add %s 60 A 192.0.2.7" % name])
                got = rdatas(port, name, "A")
                if fail:
                    expect(rc != 0 and fail in out, "%s: want %s, got rc %d: %s" % (pre, fail, rc,
                                                                                 out))
                    expect(not got, "%s failed but %s was added" % (pre, name))
                else:
                    expect(rc == 0, "%s: %s" % (pre, out))
                    expect(got == {"192.0.2.7"}, "%s: %s not added" % (pre, name))

        def knsupdate_check():
            rc, out = knsupdate(port, ["zone u.test.", "add k.u.test. 60 AAAA 2001:db8::1"])
            expect(rc == 0, "knsupdate add: %s" % out)
            expect(rdatas(port, "k.u.test", "AAAA") == {"2001:db8::1"}, "k.u.test not served")
            rc, out = knsupdate(port, ["zone u.test.", "del k.u.test. AAAA"])
            expect(rc == 0, "knsupdate del: %s" % out)
            expect(not rdatas(port, "k.u.test", "AAAA"), "k.u.test AAAA still served")

        def refusals():
            rc, out = nsupdate(port, ["zone u.test", "update add w.u.test. 60 A 192.0.2.1"],
                               key=WRONG)
            expect(rc != 0 and "NOTAUTH" in out, "wrong secret: %s" % out)
            rc, out = nsupdate(port, ["zone u.test", "update add w.u.test. 60 A 192.0.2.1"],
                               key=None)
            expect(rc != 0 and "REFUSED" in out, "unsigned: %s" % out)
            expect(not rdatas(port, "w.u.test", "A"), "a refused update was applied")
            cases = [("n.test", dns.rcode.REFUSED), ("s.test", dns.rcode.NOTAUTH),
                     ("x.test", dns.rcode.NOTAUTH)]
            for zone, want in cases:
                u = signed_update(zone)
                u.add("a." + zone + ".", 60, "A", "192.0.2.1")
                got = send_update(port, u)
                expect(got == want, "%s: %s, want %s" % (zone, dns.rcode.to_text(got),
                                                        dns.rcode.to_text(want)))
            u = signed_update("u.test")
            u.add("a.example.", 60, "A", "192.0.2.1")
            expect(send_update(port, u) == dns.rcode.NOTZONE, "outside the zone: not NOTZONE")
            u = signed_update("u.test")
            for i in range(21):
                u.add("m%d.u.test." % i, 60, "A", "192.0.2.1")
            expect(send_update(port, u, tcp=True) == dns.rcode.REFUSED, "21 records: not REFUSED")
            s0 = serial_of(port, "u.test")
            u = signed_update("u.test")
            u.add("www.u.test.", 60, "CNAME", "other.example.")
            expect(send_update(port, u) == dns.rcode.NOERROR, "CNAME beside data: not NOERROR")
            expect(serial_of(port, "u.test") == s0, "an ignored CNAME changed the serial")
            expect(tern.log_has("REFUSED from %s" % LOOPBACK), "no refusal logged")

        def unsigned_by_address():
            u = dns.update.UpdateMessage("o.test")
            u.add("un.o.test.", 60, "A", "192.0.2.60")
            expect(send_update(port, u) == dns.rcode.NOERROR, "unsigned from loopback refused")
            expect(rdatas(port, "un.o.test", "A") == {"192.0.2.60"}, "un.o.test not served")

        def rate_limit():
            time.sleep(1.2)  # the bucket full again
            codes = []
            for i in range(12):
                u = dns.update.UpdateMessage("o.test")
                u.add("r%d.o.test." % i, 60, "A", "192.0.2.1")
                codes.append(send_update(port, u, tcp=True, spaced=False))
            ok = codes.count(dns.rcode.NOERROR)
            refused = codes.count(dns.rcode.REFUSED)
            expect(ok + refused == 12 and 5 <= ok < 12 and refused >= 1,
                   "12 quick updates at 5/s: %d NOERROR, %d REFUSED" % (ok, refused))
            expect(tern.log_has("more than update_rate"), "rate refusal not logged")

        def ixfr_to_knot():
            s = serial_of(port, "u.test")
            took = wait_for(lambda: serial_of(knot.port, "u.test") == s, CONVERGE,
                            "Knot at serial %d" % s)
            for name, t in (("new.u.test", "A"), ("www.u.test", "A"), ("txt.u.test", "TXT")):
                expect(rdatas(knot.port, name, t) == rdatas(port, name, t),
                       "%s %s differs on Knot" % (name, t))
            expect(ask(knot.port, "mail.u.test", "MX").rcode() == dns.rcode.NXDOMAIN,
                   "Knot still has mail.u.test")
            expect(tern.log_has("IXFR u.test serial"), "tern logged no IXFR to Knot")
            print("  Knot at serial %d %.2f s after the last check" % (s, took))

        def ternctl_zone():
            out = tern.ctl("zone", "u.test")
            expect(out.returncode == 0, "ternctl zone: %s" % out.stderr)
            expect(re.search(r"update_journal: \S+ changes \d+", out.stdout), "no journal line:\n"
                   + out.stdout)
            expect("by key upd-key from 127.0.0.1" in out.stdout, "no update line:\n"
                   + out.stdout)

        def restart_replays():
            before = {n: rdatas(port, n, "A") for n in ("new.u.test", "www.u.test", "p5.u.test")}
            s = serial_of(port, "u.test")
            tern.restart()
            expect(serial_of(port, "u.test") == s, "serial after restart")
            for n, v in before.items():
                expect(rdatas(port, n, "A") == v, "%s after restart: %s" % (n, rdatas(port, n, "A")))
            expect(tern.log_has("changes from"), "no journal replay logged")

        def kill9_after_answer():
            rc, out = nsupdate(port, ["zone u.test", "update add k9.u.test. 60 A 192.0.2.99"])
            expect(rc == 0, "nsupdate: %s" % out)
            tern.kill9()
            tern.start("u.test")
            expect(rdatas(port, "k9.u.test", "A") == {"192.0.2.99"}, "lost after SIGKILL")

        def flush():
            s = serial_of(port, "u.test")
            out = tern.ctl("zone", "flush", "u.test")
            expect(out.returncode == 0 and "written back" in out.stdout,
                   "flush: %s %s" % (out.stdout, out.stderr))
            text = open(paths["u.test"]).read()
            expect("k9.u.test." in text and "192.0.2.99" in text, "the file lacks k9")
            expect(" %d " % s in text, "the file's SOA is not serial %d" % s)
            out = tern.ctl("zone", "u.test")
            expect("update_journal:" not in out.stdout, "journal not empty after flush:\n" + out.stdout)
            tern.restart()
            expect(rdatas(port, "k9.u.test", "A") == {"192.0.2.99"}, "k9 after flush + restart")
            rc, out = nsupdate(port, ["zone u.test", "update add after.u.test. 60 A 192.0.2.3"])
            expect(rc == 0 and rdatas(port, "after.u.test", "A") == {"192.0.2.3"},
                   "update after flush: %s" % out)

        def journal_out_of_sync():
            rc, out = nsupdate(port, ["zone u.test", "update add pend.u.test. 60 A 192.0.2.4"])
            expect(rc == 0, "nsupdate: %s" % out)
            servers.write_atomic(paths["u.test"], zone_text("u.test", 999999))
            out = tern.ctl("reload")
            expect(out.returncode != 0, "a reload with the journal out of sync succeeded")
            expect(rdatas(port, "pend.u.test", "A") == {"192.0.2.4"}, "old version not served")
            expect(tern.log_has("u.test"), "no reason logged")

        def signed_zone():
            out = tern.ctl("dnssec", "ds", "sig.test")
            ds = [ln.split() for ln in out.stdout.splitlines() if " DS " in ln]
            expect(out.returncode == 0 and ds, "no DS: %s %s" % (out.stdout, out.stderr))
            tag, alg, dtype, digest = ds[0][-4:]
            anchors = os.path.join(work, "anchors.conf")
            with open(anchors, "w") as f:
                f.write('trust-anchors {\n    sig.test. static-ds %s %s %s "%s";\n};\n'
                        % (tag, alg, dtype, digest))

            def delv(name, rtype):
                cmd = [find_program("delv"), "@" + LOOPBACK, "-p", str(port), "-a", anchors,
                       "+root=sig.test", name, rtype]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
                return p.stdout + p.stderr

            rc, out = nsupdate(port, ["zone sig.test", "update add new.sig.test. 60 A 192.0.2.70",
                                      "update delete mail.sig.test."])
            expect(rc == 0, "nsupdate on the signed zone: %s" % out)
            v = delv("new.sig.test", "A")
            expect("fully validated" in v and "192.0.2.70" in v, "new.sig.test: %s" % v)
            v = delv("mail.sig.test", "MX")
            expect("fully validated" in v and ("NXDOMAIN" in v or "ncache" in v or
                                               "negative" in v), "mail.sig.test: %s" % v)
            v = delv("www.sig.test", "A")
            expect("fully validated" in v, "www.sig.test: %s" % v)
            u = signed_update("sig.test")
            u.delete("sig.test.", "DNSKEY")
            expect(send_update(port, u) == dns.rcode.REFUSED, "a DNSKEY update not REFUSED")

        def metrics():
            import urllib.request
            text = urllib.request.urlopen("http://%s:%d/metrics" % (LOOPBACK, mport),
                                          timeout=TIMEOUT).read().decode()
            vals = {}
            for ln in text.splitlines():
                m = re.match(r'^(tern_update_\w+(?:\{[^}]*\})?) (\d+)$', ln)
                if m:
                    vals[m.group(1)] = int(m.group(2))
            expect(vals.get("tern_update_applied_total", 0) >= 10, "applied: %s" % vals)
            expect(vals.get('tern_update_answers_total{rcode="REFUSED"}', 0) >= 3,
                   "REFUSED answers: %s" % vals)
            expect(vals.get('tern_update_answers_total{rcode="NXRRSET"}', 0) >= 1,
                   "NXRRSET answers: %s" % vals)
            expect(vals.get("tern_update_refused_rate_total", 0) >= 1, "rate: %s" % vals)

        def redis_zone():
            wait_for(lambda: serial_of(port, "r.test") == 7, CONVERGE, "r.test served")
            rc, out = nsupdate(port, ["zone r.test", "update add www.r.test. 300 A 192.0.2.2",
                                      "update delete www.r.test. TXT"])
            expect(rc == 0, "nsupdate on the Redis zone: %s" % out)
            expect(rdatas(port, "www.r.test", "A") == {"192.0.2.1", "192.0.2.2"},
                   "www.r.test A: %s" % rdatas(port, "www.r.test", "A"))
            expect(not rdatas(port, "www.r.test", "TXT"), "the TXT is still served")
            expect(serial_of(port, "r.test") == 8, "serial %s, want 8" % serial_of(port, "r.test"))
            www = json.loads(redis.cmd("HGET", "redins:zones:r.test.", "www"))
            a = www["a"]
            expect(a.get("filter", {}).get("count") == "multi", "the filter was lost: %s" % www)
            recs = {r["ip"]: r for r in a["records"]}
            expect(recs.get("192.0.2.1", {}).get("country") == ["DE"] and
                   recs["192.0.2.1"].get("weight") == 5, "the geo fields were lost: %s" % www)
            expect("192.0.2.2" in recs and "txt" not in www, "Redis holds %s" % www)
            cfg = json.loads(redis.cmd("GET", "redins:zones:r.test.:config"))
            expect(cfg["soa"]["serial"] == 8, "config serial: %s" % cfg)
            # the new SOA rides on the patch of the labels named: the zone is not read again
            expect(tern.log_has("zone r.test patched"), "the Redis source read r.test whole")
            rc, out = nsupdate(port, ["zone r.test", "update add new.r.test. 60 HINFO \"a\" \"b\""])
            expect(rc != 0 and "REFUSED" in out, "HINFO on a Redis zone: %s" % out)
            other = servers.YamlTernd(work, args.ternd, f"""redis:
  address: "{LOOPBACK}:{redis.port}"
  connect_timeout: 500
""", name="tern2")
            other.start("r.test")
            try:
                expect(rdatas(other.port, "www.r.test", "A") == {"192.0.2.1", "192.0.2.2"},
                       "the second ternd serves %s" % rdatas(other.port, "www.r.test", "A"))
                expect(serial_of(other.port, "r.test") == 8, "the second ternd's serial")
            finally:
                other.stop()

        def zonefile_sync():
            zpath = os.path.join(zdir, "sync.test.zone")
            servers.write_atomic(zpath, zone_text("sync.test", 1))
            other = Ternd(work, args.ternd, f"""tsig_keys:
  - {{name: {KEY_NAME}, algorithm: hmac-sha256, secret: "{SECRET}"}}
zonefile_sync: 1
zones:
  - origin: sync.test
    file: "{zpath}"
    allow_update: [{KEY_NAME}]
""", name="tern-sync", ternctl=args.ternctl)
            other.start("sync.test")
            try:
                rc, out = nsupdate(other.port, ["zone sync.test",
                                                "update add s.sync.test. 60 A 192.0.2.33"])
                expect(rc == 0, "nsupdate: %s" % out)
                wait_for(lambda: "192.0.2.33" in open(zpath).read(), 10,
                         "sync.test.zone written back")
                info = other.ctl("zone", "sync.test").stdout
                expect("update_journal:" not in info, "journal not emptied:\n" + info)
                expect(other.log_has("written back"), "no log line for the write-back")
            finally:
                other.stop()

        run_check(results, "zonefile_sync", zonefile_sync)
        run_check(results, "redis_zone", redis_zone)
        run_check(results, "signed_zone", signed_zone)
        run_check(results, "nsupdate_add_delete", nsupdate_add_delete)
        run_check(results, "prerequisites", prerequisites)
        run_check(results, "knsupdate", knsupdate_check)
        run_check(results, "refusals", refusals)
        run_check(results, "unsigned_by_address", unsigned_by_address)
        run_check(results, "rate_limit", rate_limit)
        run_check(results, "ixfr_to_knot", ixfr_to_knot)
        run_check(results, "ternctl_zone", ternctl_zone)
        run_check(results, "metrics", metrics)
        run_check(results, "restart_replays", restart_replays)
        run_check(results, "kill9_after_answer", kill9_after_answer)
        run_check(results, "flush", flush)
        run_check(results, "journal_out_of_sync", journal_out_of_sync)
    finally:
        for s in reversed(started):
            s.stop()
    rc = servers.finish(tern, results)
    if rc:
        print(knot.log_text())
    else:
        shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
