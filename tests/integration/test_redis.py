#!/usr/bin/python3
"""Zones from Redis in the redins schema, end to end, against a real redis-server.

Starts redis-server on a free loopback port (keyspace notifications on, no persistence but an
explicit SAVE), writes a zone the way redins keeps it (set redins:zones, hash
redins:zones:<zone>, string redins:zones:<zone>:config), and checks with dnspython:

  same_as_file      a ternd serving the zone from Redis answers like a ternd serving the same
                    data from an RFC 1035 zone file (every query of a list: rcode, flags,
                    sections)
  live_change       HSET of a label: the new answer within 1 s (the test polls and reports it)
  live_add_delete   a new label answers, an HDEL'd label is NXDOMAIN, within 1 s
  zone_add_remove   SADD of a new zone (config + hash first) serves it; SREM stops it (REFUSED)
  bad_json          a label with invalid JSON is skipped and logged with zone and label; the
                    rest of the zone is served
  no_soa            a zone whose config has no SOA is rejected whole, logged; an update that
                    breaks the SOA of a served zone keeps the previous version
  one_zone_two_members  "\\101xample.test." and "example.test." in the set (one zone: \\101 is
                    'e'): the canonical member is served, one error names both, once; a file
                    zone edited and SIGHUP'd is reloaded (a duplicate must never fail a reload)
  bad_label_not_frozen  a label of 70,000 records (over what an RRset holds) and a second label
                    for one owner ("ALIAS" beside "alias" with a CNAME) are skipped and logged;
                    the zone serves its other labels, and later changes to them arrive
  label_patch       a 20,000-label zone: HSET then PUBLISH "<zone> <label>" on the change
                    channel patches the label into the zone served (no rebuild, logged as a
                    patch); a new name two labels deep, an HDEL'd label and a changed MX target
                    in one message; an HSET and an HDEL with no label named are found by
                    comparing label digests and patched too; so is the apex, named or not
  redis_down_up     Redis stopped: answers continue; Redis restarted with data changed while it
                    was away (edited through a second, temporary redis-server on the saved dump):
                    the change arrives
  down_at_start     a second ternd whose Redis is not running yet serves its file zone at once,
                    and the Redis zones once Redis comes up
  clean_exit        ternd exits 0 on SIGTERM

Prints one line per check and "N passed, N failed"; exits 1 on any failure. Every wait is
bounded; only the processes started here are stopped, by PID.

    test_redis.py --ternd build/ternd
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import dns.message
import dns.query
import dns.rcode

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import (LOOPBACK, Failure, Ternd, clean_exit_result, expect, report,  # noqa: E402
                     run_check)

ZONE = "mig.test."
TIMEOUT = 2.0
LIVE_LIMIT = 1.0  # seconds: the bound for a change to reach answers
WAIT = 15.0       # bound of every other wait

SOA = {"ttl": 3600, "ns": "ns1.mig.test.", "MBox": "hostmaster.mig.test.", "refresh": 3600,
       "retry": 600, "expire": 86400, "minttl": 300, "serial": 2024010101}
LABELS = {
    "@": {"ns": {"ttl": 3600, "records": [{"host": "ns1.mig.test."}, {"host": "ns2.mig.test."}]},
          "mx": {"ttl": 300, "records": [{"host": "mail.mig.test.", "preference": 10}]},
          "txt": {"ttl": 300, "records": [{"text": "v=spf1 -all"}]},
          "caa": {"ttl": 300, "records": [{"tag": "issue", "value": "ca.example", "flag": 0}]}},
    "ns1": {"a": {"ttl": 3600, "records": [{"ip": "192.0.2.53"}]}},
    "ns2": {"a": {"ttl": 3600, "records": [{"ip": "192.0.2.54"}]}},
    "www": {"a": {"ttl": 300, "records": [{"ip": "192.0.2.10"}, {"ip": "192.0.2.11"}]},
            "aaaa": {"ttl": 300, "records": [{"ip": "2001:db8::10"}]}},
    "mail": {"a": {"ttl": 300, "records": [{"ip": "192.0.2.25"}]}},
    "alias": {"cname": {"ttl": 300, "host": "www.mig.test."}},
    "_sip._udp": {"srv": {"ttl": 300, "records": [{"target": "sip.mig.test.", "port": 5060,
                                                   "priority": 10, "weight": 5}]}},
    "sip": {"a": {"ttl": 300, "records": [{"ip": "192.0.2.60"}]}},
    "a.b": {"txt": {"ttl": 60, "records": [{"text": "deep"}]}},
}
ZONE_FILE = """$ORIGIN mig.test.
@        3600 IN SOA ns1.mig.test. hostmaster.mig.test. 2024010101 3600 600 86400 300
@        3600 IN NS  ns1.mig.test.
@        3600 IN NS  ns2.mig.test.
@         300 IN MX  10 mail.mig.test.
@         300 IN TXT "v=spf1 -all"
@         300 IN CAA 0 issue "ca.example"
ns1      3600 IN A   192.0.2.53
ns2      3600 IN A   192.0.2.54
www       300 IN A   192.0.2.10
www       300 IN A   192.0.2.11
www       300 IN AAAA 2001:db8::10
mail      300 IN A   192.0.2.25
alias     300 IN CNAME www.mig.test.
_sip._udp 300 IN SRV 10 5 5060 sip.mig.test.
sip       300 IN A   192.0.2.60
a.b        60 IN TXT "deep"
"""
QUERIES = [("mig.test.", "SOA"), ("mig.test.", "NS"), ("mig.test.", "MX"), ("mig.test.", "TXT"),
           ("mig.test.", "CAA"), ("www.mig.test.", "A"), ("WWW.Mig.Test.", "AAAA"),
           ("www.mig.test.", "TXT"), ("alias.mig.test.", "A"), ("_sip._udp.mig.test.", "SRV"),
           ("nope.mig.test.", "A"), ("b.mig.test.", "TXT"), ("a.b.mig.test.", "TXT"),
           ("mail.mig.test.", "A"), ("x.nope.mig.test.", "AAAA")]


class Redis(servers.Redis):
    """servers.Redis whose zones get this test's SOA unless told otherwise."""

    def put_zone(self, zone, labels, soa=SOA):
        super().put_zone(zone, labels, soa)


def ask(port, name, rtype):
    q = dns.message.make_query(name, rtype)
    return dns.query.udp(q, LOOPBACK, port=port, timeout=TIMEOUT)


def summary(r):
    """What must match between two servers: rcode, flags, and each section as sorted text."""
    def section(rrsets):
        return sorted(sorted(rrset.to_text().lower().split("\n")) for rrset in rrsets)
    return (dns.rcode.to_text(r.rcode()), dns.flags.to_text(r.flags), section(r.answer),
            section(r.authority), section(r.additional))


def addresses(port, name):
    try:
        r = ask(port, name, "A")
    except Exception:  # noqa: BLE001 - a timeout is "no answer yet"
        return None
    if r.rcode() != dns.rcode.NOERROR:
        return dns.rcode.to_text(r.rcode())
    return sorted(rd.address for rrset in r.answer for rd in rrset if rrset.rdtype == 1)


def wait_for(port, name, want, limit):
    """Seconds until name's A answer is want (list, or an rcode text); Failure after limit."""
    start = time.monotonic()
    last = None
    while time.monotonic() - start < limit:
        last = addresses(port, name)
        if last == want:
            return time.monotonic() - start
        time.sleep(0.02)
    raise Failure("%s: still %s after %.1f s, want %s" % (name, last, limit, want))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    args = ap.parse_args()
    if not args.ternd:
        ap.error("--ternd is required")
    if not servers.find_program("redis-server"):
        print("redis-server is not installed (.ci/install-deps --test)")
        return 1
    work = tempfile.mkdtemp(prefix="tern-redis-")
    redis = tern = ftern = None
    results = []
    timings = []

    def check(name, fn):
        run_check(results, name, fn)

    try:
        redis = Redis(work)
        redis.start()
        redis.put_zone(ZONE, LABELS)
        zfile = os.path.join(work, "mig.zone")
        with open(zfile, "w") as f:
            f.write(ZONE_FILE)
        ftern = Ternd(work + "/file", [(ZONE, zfile)], args.ternd)
        ftern.start(ZONE)
        # an anchor zone from a file, so the Redis ternd has something before Redis answers
        anchor = os.path.join(work, "anchor.zone")
        with open(anchor, "w") as f:
            f.write("$ORIGIN anchor.test.\n@ 60 IN SOA ns. h. 1 60 60 60 60\n@ 60 IN NS ns.\n")
        # the bounds let a 70,000-record label (1.5 MB) through to the RRset limit itself
        extra = ('redis:\n  address: "%s:%d"\n  zone_reload: 600\n  connect_timeout: 500\n'
                 '  read_timeout: 2000\n  max_value_bytes: 4194304\n  max_rrset_records: 65535\n'
                 % (LOOPBACK, redis.port))
        tern = Ternd(work, [("anchor.test.", anchor)], args.ternd, extra_yaml=extra)
        tern.start(ZONE)  # waits until the Redis zone answers

        def same_as_file():
            for name, rtype in QUERIES:
                a, b = summary(ask(tern.port, name, rtype)), summary(ask(ftern.port, name, rtype))
                expect(a == b, "%s %s: from Redis %s, from the file %s" % (name, rtype, a, b))

        check("same_as_file (%d queries)" % len(QUERIES), same_as_file)

        def live_change():
            redis.cmd("HSET", "redins:zones:" + ZONE, "www",
                      json.dumps({"a": {"ttl": 300, "records": [{"ip": "192.0.2.99"}]}}))
            t = wait_for(tern.port, "www.mig.test.", ["192.0.2.99"], WAIT)
            timings.append(("HSET www", t))
            expect(t <= LIVE_LIMIT, "the change took %.2f s to reach answers" % t)

        check("live_change", live_change)

        def live_add_delete():
            redis.cmd("HSET", "redins:zones:" + ZONE, "new",
                      json.dumps({"a": {"records": [{"ip": "192.0.2.77"}]}}))
            t = wait_for(tern.port, "new.mig.test.", ["192.0.2.77"], WAIT)
            timings.append(("HSET new label", t))
            expect(t <= LIVE_LIMIT, "the new label took %.2f s" % t)
            redis.cmd("HDEL", "redins:zones:" + ZONE, "mail")
            t = wait_for(tern.port, "mail.mig.test.", "NXDOMAIN", WAIT)
            timings.append(("HDEL mail", t))
            expect(t <= LIVE_LIMIT, "the deletion took %.2f s" % t)

        check("live_add_delete", live_add_delete)

        def zone_add_remove():
            redis.put_zone("two.test.", {"@": {"ns": {"records": [{"host": "ns1.two.test."}]}},
                                         "x": {"a": {"records": [{"ip": "198.51.100.1"}]}}},
                           soa=dict(SOA, ns="ns1.two.test.", MBox="h.two.test."))
            t = wait_for(tern.port, "x.two.test.", ["198.51.100.1"], WAIT)
            timings.append(("SADD zone", t))
            expect(t <= LIVE_LIMIT, "the new zone took %.2f s" % t)
            redis.cmd("SREM", "redins:zones", "two.test.")
            t = wait_for(tern.port, "x.two.test.", "REFUSED", WAIT)
            timings.append(("SREM zone", t))
            expect(t <= LIVE_LIMIT, "removing the zone took %.2f s" % t)

        check("zone_add_remove", zone_add_remove)

        def bad_json():
            redis.cmd("HSET", "redins:zones:" + ZONE, "broken", '{"a": {"records": [')
            redis.cmd("HSET", "redins:zones:" + ZONE, "after",
                      json.dumps({"a": {"records": [{"ip": "192.0.2.88"}]}}))
            wait_for(tern.port, "after.mig.test.", ["192.0.2.88"], WAIT)
            expect(addresses(tern.port, "broken.mig.test.") == "NXDOMAIN",
                   "the broken label answers %s" % addresses(tern.port, "broken.mig.test."))
            expect(addresses(tern.port, "www.mig.test.") == ["192.0.2.99"],
                   "the rest of the zone is not served")
            log = tern.log_text(20000)
            expect("broken" in log and "mig.test" in log,
                   "no log line naming the zone and the label:\n%s" % log[-2000:])

        check("bad_json", bad_json)

        def no_soa():
            redis.put_zone("nosoa.test.", {"x": {"a": {"records": [{"ip": "198.51.100.2"}]}}},
                           soa=None)
            # a later zone shows the source went past it
            redis.put_zone("three.test.", {"@": {"ns": {"records": [{"host": "ns.three.test."}]}},
                                           "x": {"a": {"records": [{"ip": "198.51.100.3"}]}}},
                           soa=dict(SOA, ns="ns.three.test.", MBox="h.three.test."))
            wait_for(tern.port, "x.three.test.", ["198.51.100.3"], WAIT)
            expect(addresses(tern.port, "x.nosoa.test.") == "REFUSED",
                   "a zone without SOA is served")
            expect("nosoa.test" in tern.log_text(20000), "no log line naming nosoa.test")
            # break the SOA of a served zone: the previous version keeps answering
            redis.cmd("SET", "redins:zones:three.test.:config", json.dumps({"soa": {"ns": ""}}))
            redis.cmd("HSET", "redins:zones:three.test.", "x",
                      json.dumps({"a": {"records": [{"ip": "198.51.100.33"}]}}))
            time.sleep(1.0)
            expect(addresses(tern.port, "x.three.test.") == ["198.51.100.3"],
                   "a zone whose SOA broke: answers %s, want the previous version"
                   % addresses(tern.port, "x.three.test."))

        check("no_soa", no_soa)

        def one_zone_two_members():
            def labels(zone, ip):
                return {"@": {"ns": {"records": [{"host": "ns1." + zone}]}},
                        "ns1": {"a": {"records": [{"ip": "192.0.2.53"}]}},
                        "www": {"a": {"records": [{"ip": ip}]}}}
            # the member as redins could hold it: the same zone, an escape in its name
            odd = "\\101xample.test."
            redis.put_zone(odd, labels(odd, "192.0.2.201"),
                           soa=dict(SOA, ns="ns1." + odd, MBox="h." + odd))
            redis.put_zone("example.test.", labels("example.test.", "192.0.2.202"),
                           soa=dict(SOA, ns="ns1.example.test.", MBox="h.example.test."))
            time.sleep(LIVE_LIMIT)  # both members seen by the source
            # a file zone edited, then SIGHUP: the reload must apply whatever the set holds
            with open(anchor, "w") as f:
                f.write("$ORIGIN anchor.test.\n@ 60 IN SOA ns. h. 2 60 60 60 60\n@ 60 IN NS ns.\n"
                        "probe 60 IN A 192.0.2.250\n")
            tern.proc.send_signal(signal.SIGHUP)
            t = wait_for(tern.port, "probe.anchor.test.", ["192.0.2.250"], WAIT)
            timings.append(("SIGHUP, file edited", t))
            # the member written canonically is served, whatever order SMEMBERS gives
            wait_for(tern.port, "www.example.test.", ["192.0.2.202"], WAIT)
            log = tern.log_text(1 << 20)
            lines = [ln for ln in log.splitlines() if "is named by 2 members" in ln]
            expect(len(lines) == 1 and 'serving "example.test."' in lines[0]
                   and 'ignoring "\\\\101xample.test."' in lines[0],
                   "want one error naming both members, got %r" % lines)
            redis.cmd("SREM", "redins:zones", odd)

        check("one_zone_two_members", one_zone_two_members)

        def bad_label_not_frozen():
            zone = "huge.test."
            pool = {"a": {"ttl": 60, "records": [
                {"ip": "10.%d.%d.%d" % (i >> 16 & 255, i >> 8 & 255, i & 255)}
                for i in range(70000)]}}
            redis.put_zone(zone, {"@": {"ns": {"records": [{"host": "ns1.huge.test."}]}},
                                  "ns1": {"a": {"records": [{"ip": "192.0.2.53"}]}},
                                  "www": {"a": {"records": [{"ip": "192.0.2.1"}]}},
                                  "pool": pool,
                                  "alias": {"cname": {"host": "www.huge.test."}},
                                  "ALIAS": {"a": {"records": [{"ip": "192.0.2.66"}]}}},
                           soa=dict(SOA, ns="ns1.huge.test.", MBox="h.huge.test."))
            wait_for(tern.port, "www.huge.test.", ["192.0.2.1"], WAIT)
            expect(addresses(tern.port, "pool.huge.test.") == "NXDOMAIN",
                   "the 70,000-record label answers %s" % addresses(tern.port, "pool.huge.test."))
            for i in range(3):  # the zone is not frozen: every change arrives
                ip = "192.0.2.%d" % (10 + i)
                redis.cmd("HSET", "redins:zones:" + zone, "www",
                          json.dumps({"a": {"records": [{"ip": ip}]}}))
                t = wait_for(tern.port, "www.huge.test.", [ip], WAIT)
                timings.append(("change beside a bad label", t))
                expect(t <= 3.0, "a change beside the bad label took %.2f s" % t)
            log = tern.log_text(1 << 20)
            expect(sum("label pool" in ln and "70000 records" in ln for ln in log.splitlines()) == 1,
                   "want one line about label pool:\n%s" % log[-3000:])
            expect("is given by another label" in log, "no line about ALIAS beside alias")

        check("bad_label_not_frozen", bad_label_not_frozen)

        def label_patch():
            big = "big.test."
            key = "redins:zones:" + big
            n = 20000
            redis.cmd("SET", key + ":config",
                      json.dumps({"soa": dict(SOA, ns="ns1.big.test.", MBox="h.big.test.")}))
            redis.cmd("HSET", key, "@", json.dumps({"ns": {"records": [{"host": "ns1.big.test."}]}}),
                      "mx", json.dumps({"mx": {"records": [{"host": "h7.big.test.",
                                                            "preference": 1}]}}))
            for start in range(0, n, 2000):
                pairs = []
                for i in range(start, start + 2000):
                    pairs += ["h%d" % i, json.dumps({"a": {"records": [
                        {"ip": "10.%d.%d.%d" % (i >> 16, (i >> 8) & 255, i & 255)}]}})]
                redis.cmd("HSET", key, *pairs)
            redis.cmd("SADD", "redins:zones", big)
            wait_for(tern.port, "h19999.big.test.", ["10.0.78.31"], WAIT)
            channel = "redins:zones:changed"
            # a changed label, named on the change channel: patched into the zone served
            redis.cmd("HSET", key, "h5", json.dumps({"a": {"records": [{"ip": "192.0.2.5"}]}}))
            redis.cmd("PUBLISH", channel, big + " h5")
            t = wait_for(tern.port, "h5.big.test.", ["192.0.2.5"], WAIT)
            timings.append(("HSET + PUBLISH label, 20k-label zone", t))
            # a new name two labels deep, a deleted one, and the MX target changed, in one message
            redis.cmd("HSET", key, "x.new", json.dumps({"a": {"records": [{"ip": "192.0.2.6"}]}}),
                      "h7", json.dumps({"a": {"records": [{"ip": "192.0.2.7"}]}}))
            redis.cmd("HDEL", key, "h6")
            redis.cmd("PUBLISH", channel, big + " x.new h6 h7")
            t = wait_for(tern.port, "x.new.big.test.", ["192.0.2.6"], WAIT)
            timings.append(("add + delete + change, one message", t))
            expect(addresses(tern.port, "h6.big.test.") == "NXDOMAIN", "h6 was not deleted")
            expect(addresses(tern.port, "h7.big.test.") == ["192.0.2.7"], "h7 did not change")
            r = ask(tern.port, "new.big.test.", "A")
            expect(r.rcode() == dns.rcode.NOERROR and not r.answer,
                   "new.big.test. is not an empty non-terminal: %s" % r)
            r = ask(tern.port, "mx.big.test.", "MX")
            glue = sorted(rd.address for rrset in r.additional for rd in rrset if rrset.rdtype == 1)
            expect(glue == ["192.0.2.7"], "the MX target's address in additional: %s" % glue)
            log = tern.log_text(1 << 20)
            expect("zone big.test patched: 1 names" in log, "no log line for the first patch")
            expect("zone big.test patched: 3 names" in log, "no log line for the second patch")
            # a keyspace event alone, no label named: the zone is read once, compared label by
            # label with what was built (digests), and what differs is patched
            before = log.count("zone big.test patched")
            redis.cmd("HSET", key, "h9", json.dumps({"a": {"records": [{"ip": "192.0.2.9"}]}}))
            t = wait_for(tern.port, "h9.big.test.", ["192.0.2.9"], WAIT)
            timings.append(("HSET alone, 20k-label zone (read, diff, patch)", t))
            redis.cmd("HDEL", key, "h10")
            wait_for(tern.port, "h10.big.test.", "NXDOMAIN", WAIT)
            expect(addresses(tern.port, "h5.big.test.") == ["192.0.2.5"], "h5 lost its change")
            expect(addresses(tern.port, "h6.big.test.") == "NXDOMAIN", "h6 came back")
            log = tern.log_text(1 << 20)
            expect(log.count("zone big.test patched") >= before + 2,
                   "the keyspace-only changes were not patched")
            # the apex named, and the apex changed with no name given: patched like any label
            for how, name in (("named", " @"), ("found by digest", None)):
                before = tern.log_text(1 << 20).count("zone big.test patched")
                hosts = ["ns1.big.test.", "ns9.other.test."] + (["ns8.other.test."] if name is None
                                                               else [])
                redis.cmd("HSET", key, "@", json.dumps({"ns": {"records": [
                    {"host": h} for h in hosts]}}))
                if name:
                    redis.cmd("PUBLISH", channel, big + name)
                deadline = time.monotonic() + WAIT
                while time.monotonic() < deadline:
                    r = ask(tern.port, big, "NS")
                    if len([rd for rrset in r.answer for rd in rrset]) == len(hosts):
                        break
                    time.sleep(0.05)
                else:
                    raise Failure("the apex change (%s) did not arrive" % how)
                log = tern.log_text(1 << 20)
                expect(log.count("zone big.test patched") > before,
                       "the apex change (%s) was not patched" % how)
                expect(addresses(tern.port, "h5.big.test.") == ["192.0.2.5"],
                       "h5 lost its change after the apex patch (%s)" % how)

        check("label_patch", label_patch)

        def redis_down_up():
            redis.cmd("SAVE")
            redis.stop()
            for _ in range(5):
                expect(addresses(tern.port, "www.mig.test.") == ["192.0.2.99"],
                       "no answer while Redis is down")
                time.sleep(0.2)
            # change the data while ternd cannot see it: a second server on the saved dump
            side = Redis(work, name="redis")  # same directory: loads dump.rdb
            side.port = servers.free_port()
            side.start()
            side.cmd("HSET", "redins:zones:" + ZONE, "www",
                     json.dumps({"a": {"records": [{"ip": "192.0.2.123"}]}}))
            side.cmd("SAVE")
            side.stop()
            redis.start()  # the original port, the changed dump
            t = wait_for(tern.port, "www.mig.test.", ["192.0.2.123"], WAIT)
            timings.append(("Redis back, resync", t))

        check("redis_down_up", redis_down_up)

        def down_at_start():
            late = Redis(work, name="late")
            t2 = Ternd(work + "/late", [("anchor.test.", anchor)], args.ternd,
                       extra_yaml='redis:\n  address: "%s:%d"\n  connect_timeout: 300\n'
                       % (LOOPBACK, late.port))
            try:
                t0 = time.monotonic()
                t2.start("anchor.test.")
                up = time.monotonic() - t0
                expect(up < 5.0, "serving the file zone took %.1f s with Redis down" % up)
                expect(addresses(t2.port, "www.mig.test.") == "REFUSED",
                       "a Redis zone answers before Redis exists")
                late.start()
                late.put_zone(ZONE, LABELS)
                t = wait_for(t2.port, "www.mig.test.", ["192.0.2.10", "192.0.2.11"], WAIT)
                timings.append(("Redis up after start", t))
                log = t2.log_text(20000)
                expect(log.count("not available") + log.count("unreachable") <= 2,
                       "the retries are logged more than once:\n%s" % log[-2000:])
            finally:
                t2.stop()
                late.stop()

        check("down_at_start", down_at_start)

        tern.stop()
        r = clean_exit_result(tern)
        results.append(r if r else ("clean_exit", None))
        for what, t in timings:
            print("  %-22s %.3f s" % (what, t))
        if any(err for _, err in results):
            print(tern.log_text(6000))
        return report(results)
    finally:
        for p in (tern, ftern, redis):
            if p is not None:
                p.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
