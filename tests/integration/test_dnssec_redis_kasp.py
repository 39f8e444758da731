#!/usr/bin/env python3
"""Keys tern manages for a Redis zone ("dnssec_policy" in its config JSON), shared by a fleet:
two ternd read one real redis-server; one of them, the holder of the zone's lock, drives the key
state; both sign with the keys kept in Redis.

rk.test. is a redins zone whose config names the policy fast (TTLs of 5 s, propagation delay 2 s,
a ZSK lifetime of 30 s): the two nodes have the same ternd.yaml.

Checks:
  first_signing     no state in Redis: one node takes redins:zones:rk.test.:kasp:lock, makes a
                    KSK and a ZSK (two keys in :kasp:keys, the state in :kasp); both nodes
                    publish the same DNSKEY set, signed by the same ZSK; an Unbound anchored at
                    the KSK's DS and asking both nodes validates (AD=1); `ternctl dnssec status`
                    on each node shows the keys and the driving node; `ds-seen` given to the node
                    that does not drive reaches the one that does (through Redis) and the KSK
                    becomes active on both
  rollover_once     the ZSK rolls by its lifetime: exactly one new ZSK appears in :kasp:keys
                    (not one per node); both nodes publish the same DNSKEY set once each has
                    built the new state; the Unbound asks every 0.3 s: AD=1, never SERVFAIL;
                    `ternctl dnssec rollover` meanwhile is refused with the reason
  holder_killed     the holder is SIGKILLed (by the pid in its lock) while the new ZSK is
                    published but not yet signing: the other node takes the lock after it
                    expires, writes the state on, and the rollover finishes (the old ZSK leaves
                    its DNSKEY set and the state in Redis says removed); an Unbound asking the
                    survivor validates throughout
  restart_same_keys the killed node started again: it publishes the survivor's DNSKEY set (the
                    state and keys from Redis, no key made) and does not take the lock; the
                    survivor stopped (SIGTERM) releases the lock and the restarted node takes it
                    at once
  unknown_policy    a zone naming a policy ternd.yaml lacks is refused with a message naming its
                    config key; redins' static keys are not asked for
  parent_ds_check   ds.test., a second zone of the fleet under a real Knot serving test. (the
                    policy's parents): its CDS put at Knot as a DS by the test (the registrar);
                    the node holding ds.test's lock, and only it, asks Knot, sees the DS and
                    makes the KSK active on both nodes with no ds-seen
  unsign            un.test., a third zone (policy slow: fast with no ZSK rollover), its DS said seen
                    (the node stopped in restart_same_keys started again: two nodes): a config
                    dropping "dnssec_policy" while its keys are in use is refused on both nodes
                    (the log says why, the signed version keeps serving); "dnssec_unsign": true
                    in its config puts CDS DELETE ("0 0 0 00") on both nodes; `ternctl dnssec
                    ds-gone` on the node that does not drive reaches the driver, and a DS TTL +
                    propagation delay later both serve the zone with no DNSKEY or RRSIG; then
                    dropping the policy is accepted, and naming it again signs the zone anew;
                    ds.test. unsigned beside it, its DS deleted at Knot on its CDS DELETE: its
                    driver's check finds it gone (no ds-gone typed), unsigned on both nodes
Skips (77) when unbound, knotd or redis-server is missing.
"""

import argparse
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time

import dns.dnssec
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.update

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, expect, find_program  # noqa: E402
from test_dnssec_kasp import KnotParent  # noqa: E402
from test_dnssec_kasp import Watch as KaspWatch  # noqa: E402

ZONE = "rk.test."
POLICY = """dnssec_policies:
  - name: fast
    algorithm: 13
    zsk_lifetime: 30
    propagation_delay: 2
    dnskey_ttl: 5
    parent_ds_ttl: 5
    zone_max_ttl: 5
"""
SOA = {"ttl": 5, "ns": "ns1.rk.test.", "MBox": "hostmaster.rk.test.", "refresh": 3600,
       "retry": 600, "expire": 86400, "minttl": 5, "serial": 1}
LABELS = {
    "@": {"ns": {"ttl": 5, "records": [{"host": "ns1.rk.test."}]}},
    "ns1": {"a": {"ttl": 5, "records": [{"ip": "192.0.2.1"}]}},
    "www": {"a": {"ttl": 5, "records": [{"ip": "192.0.2.3"}]}},
}
STEP = 0.3  # seconds between the validator's questions
LOCK_S = 15  # REDIS_SOURCE_DEFAULT_KASP_LOCK


def ask(port, name, rtype):
    q = dns.message.make_query(name, rtype, want_dnssec=True)
    return dns.query.udp(q, LOOPBACK, port=port, timeout=2.0)


def dnskeys(port):
    """{tag: (flags, rdata)} of the DNSKEY RRset a node serves."""
    out = {}
    for rrset in ask(port, ZONE, "DNSKEY").answer:
        if rrset.rdtype == dns.rdatatype.DNSKEY:
            for rd in rrset:
                out[dns.dnssec.key_id(rd)] = (rd.flags, rd)
    return out


def zsks(port):
    return {t for t, (f, _) in dnskeys(port).items() if f == 256}


def rrsig_tags(port, name, rtype):
    r = ask(port, name, rtype)
    return {rd.key_tag for rrset in r.answer if rrset.rdtype == dns.rdatatype.RRSIG
            for rd in rrset if rd.type_covered == dns.rdatatype.from_text(rtype)}


class FleetUnbound(servers.Unbound):
    """A validating Unbound whose stub zone asks every node of the fleet."""

    def __init__(self, work, name, ports, ds):
        super().__init__(work, name, [(ZONE, ports[0], ds)])
        self.ports = ports

    def config_text(self):
        text = super().config_text()
        one = "    stub-addr: %s@%d\n" % (LOOPBACK, self.ports[0])
        return text.replace(one, "".join("    stub-addr: %s@%d\n" % (LOOPBACK, p)
                                         for p in self.ports))


class Watch:
    """Unbounds validating rk.test. (test_dnssec_kasp's watch for each), each asked an answer
    and a denial every STEP."""

    def __init__(self, unbounds):
        self.ws = [KaspWatch(u, names=(("www.rk.test.", "A"), ("nx%d.rk.test.", "A")))
                   for u in unbounds]

    @property
    def asked(self):
        return sum(w.asked for w in self.ws)

    def run(self, seconds, until=None):
        end = time.monotonic() + seconds
        while True:
            for w in self.ws:
                w.run(0)  # one round of questions
            if (until and until()) or time.monotonic() >= end:
                return bool(until and until())
            time.sleep(STEP)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl", required=True)
    args = ap.parse_args()
    for prog in ("unbound", "redis-server", "knotd"):
        if find_program(prog) is None:
            print("%s not found: skipped" % prog)
            return 77
    work = tempfile.mkdtemp(prefix="tern-rkasp-")
    results = []
    redis = servers.Redis(work)
    redis.start()
    knot = KnotParent(work, [])
    knot.start("test.")
    parented = POLICY.replace("name: fast", "name: parented") + (
        '    parents: ["%s@%d"]\n    ds_check_interval: 1\n' % (LOOPBACK, knot.port))
    # un.test.'s policy: fast with no ZSK rollover during the test, so unsigning is all it does
    slow = POLICY.replace("name: fast", "name: slow").replace("zsk_lifetime: 30",
                                                              "zsk_lifetime: 3600")
    yaml = POLICY + parented[len("dnssec_policies:\n"):] + slow[len("dnssec_policies:\n"):] + ('redis:\n  address: "%s:%d"\n  connect_timeout: 500\n  read_timeout: 2000\n'
                     % (LOOPBACK, redis.port))
    cfg = dict(soa=SOA, dnssec_policy="fast")
    redis.cmd("SET", "redins:zones:%s:config" % ZONE, json.dumps(cfg))
    for label, value in LABELS.items():
        redis.cmd("HSET", "redins:zones:" + ZONE, label, json.dumps(value))
    redis.cmd("SADD", "redins:zones", ZONE)
    dcfg = {"soa": dict(SOA, ns="ns1.ds.test.", MBox="hostmaster.ds.test."),
            "dnssec_policy": "parented"}
    redis.cmd("SET", "redins:zones:ds.test.:config", json.dumps(dcfg))
    redis.cmd("HSET", "redins:zones:ds.test.", "@",
              json.dumps({"ns": {"ttl": 5, "records": [{"host": "ns1.ds.test."}]}}))
    redis.cmd("HSET", "redins:zones:ds.test.", "ns1", json.dumps(LABELS["ns1"]))
    redis.cmd("SADD", "redins:zones", "ds.test.")
    UZ = "un.test."
    usoa = dict(SOA, ns="ns1.un.test.", MBox="hostmaster.un.test.")
    redis.cmd("SET", "redins:zones:%s:config" % UZ, json.dumps({"soa": usoa,
                                                                "dnssec_policy": "slow"}))
    redis.cmd("HSET", "redins:zones:" + UZ, "@",
              json.dumps({"ns": {"ttl": 5, "records": [{"host": "ns1.un.test."}]}}))
    redis.cmd("HSET", "redins:zones:" + UZ, "www", json.dumps(LABELS["www"]))
    redis.cmd("SADD", "redins:zones", UZ)
    nodes = [servers.YamlTernd(work, args.ternd, yaml, name="tern-%s" % n, ternctl=args.ternctl)
             for n in "ab"]
    ports = [t.port for t in nodes]
    unbounds = []
    extra = []
    ctx = {}

    def rkey(tail):
        return "redins:zones:%s%s" % (ZONE, tail)

    def key_ids():
        """The ids of the keys in Redis: {id: flags}."""
        h = redis.cmd("HGETALL", rkey(":kasp:keys")) or []
        out = {}
        for i in range(0, len(h), 2):
            if h[i].endswith(".key"):
                m = re.search(r"DNSKEY (\d+) 3 13", h[i + 1])
                out[h[i][:-4]] = int(m.group(1)) if m else 0
        return out

    def holder():
        v = redis.cmd("GET", rkey(":kasp:lock"))
        return v

    def node_of(lock):
        """The node whose process holds the lock ("host:pid")."""
        pid = int(lock.rsplit(":", 1)[1])
        for t in nodes:
            if t.proc and t.proc.pid == pid:
                return t
        return None

    def same_set():
        a, b = (sorted(dnskeys(p)) for p in ports)
        return a == b and len(a) >= 2

    try:
        for t in nodes:
            t.start(ZONE)

        def first_signing():
            servers.wait_until(same_set, 20, "both nodes publish the same two keys")
            keys = dnskeys(ports[0])
            ksk = [t for t, (f, _) in keys.items() if f == 257]
            zsk = [t for t, (f, _) in keys.items() if f == 256]
            expect(len(ksk) == 1 and len(zsk) == 1, "DNSKEY: %s" % keys)
            ctx["ksk"], ctx["zsk"] = ksk[0], zsk[0]
            ids = key_ids()
            expect(len(ids) == 2, "keys in Redis: %s" % ids)
            state = redis.cmd("GET", rkey(":kasp")) or ""
            expect(state.startswith("tern-kasp 1") and "end keys=2" in state,
                   "state in Redis: %r" % state)
            lock = holder()
            expect(lock and node_of(lock), "the lock %r names no node of ours" % lock)
            for p in ports:
                expect(rrsig_tags(p, "www.rk.test.", "A") == {ctx["zsk"]},
                       "www on port %d not signed by ZSK %d" % (p, ctx["zsk"]))
            ds = dns.dnssec.make_ds(dns.name.from_text(ZONE), keys[ctx["ksk"]][1], "SHA256")
            u = FleetUnbound(work, "unbound-both", ports, ds.to_text())
            u.start()
            unbounds.append(u)
            # one Unbound per node too: after a node is killed, the other's asks only it
            for i, p in enumerate(ports):
                ui = servers.Unbound(work, "unbound-%d" % i, [(ZONE, p, ds.to_text())])
                ui.start()
                unbounds.append(ui)
            ctx["ds"] = ds.to_text()
            Watch(unbounds).run(1)
            # ternctl on either node: the same keys, who drives; ds-seen given to the node that
            # does not drive goes through Redis to the one that does
            drv = node_of(lock)
            other = nodes[1 - nodes.index(drv)]
            out = drv.ctl("dnssec", "status", "rk.test")
            expect(out.returncode == 0 and "(this node)" in out.stdout and
                   re.search(r"^ZSK %d alg 13 active" % ctx["zsk"], out.stdout, re.M),
                   "status on the driver: %s %s" % (out.stdout, out.stderr))
            servers.wait_until(lambda: "ds_wanted" in other.ctl("dnssec", "status",
                                                                 "rk.test").stdout or
                               re.search(r"^KSK %d alg 13 ready" % ctx["ksk"],
                                         other.ctl("dnssec", "status", "rk.test").stdout, re.M),
                               20, "the KSK ready on the other node")
            out = other.ctl("dnssec", "status", "rk.test")
            expect("driver: %s" % lock in out.stdout and "(this node)" not in out.stdout,
                   "status on the other node: %s %s" % (out.stdout, out.stderr))
            out = other.ctl("dnssec", "ds-seen", "rk.test", str(ctx["ksk"]))
            expect(out.returncode == 0, "ds-seen via the other node: %s %s"
                   % (out.stdout, out.stderr))
            for t in nodes:
                servers.wait_until(lambda: re.search(
                    r"^KSK %d alg 13 active" % ctx["ksk"],
                    t.ctl("dnssec", "status", "rk.test").stdout, re.M), 15,
                    "the KSK active on %s" % t.name)
            expect(drv.log_has('request "ds-seen %d" done' % ctx["ksk"]), "not logged by the driver")
            print("  KSK %d and ZSK %d made by %s; the same on both nodes"
                  % (ctx["ksk"], ctx["zsk"], node_of(lock).name))

        def parent_ds_check():
            lock = redis.cmd("GET", "redins:zones:ds.test.:kasp:lock")
            drv = node_of(lock or "x:0")
            expect(drv is not None, "ds.test's lock: %r" % lock)
            other = nodes[1 - nodes.index(drv)]
            cds = []

            def published():
                r = dns.query.udp(dns.message.make_query("ds.test.", "CDS"), LOOPBACK,
                                  port=other.port, timeout=2)
                cds[:] = [rd for rrset in r.answer if rrset.rdtype == dns.rdatatype.CDS
                          for rd in rrset]
                return bool(cds)
            servers.wait_until(published, 30, "ds.test's CDS")
            u = dns.update.UpdateMessage("test.")
            for rd in cds:
                u.add("ds.test.", 3, "DS", rd.to_text())
            r = dns.query.tcp(u, LOOPBACK, port=knot.port, timeout=5)
            expect(r.rcode() == dns.rcode.NOERROR, "Knot refused the DS: %s" % r)
            for t in nodes:
                servers.wait_until(lambda: re.search(
                    r"^KSK \d+ alg 13 active", t.ctl("dnssec", "status", "ds.test").stdout,
                    re.M), 20, "ds.test's KSK active on %s" % t.name)
            expect(drv.log_has("seen at every server of the parent"), "the check not logged")
            expect(not other.log_has("seen at every server of the parent"),
                   "the node that does not drive asked the parent:\n" + other.log_text())
            print("  the DS at Knot seen by %s (which drives ds.test) alone; KSK active on both"
                  % drv.name)

        def unsign():
            for t in list(nodes):
                if t.proc.poll() is not None:
                    restart(t)
            def signed_on(p, name=UZ, rtype="DNSKEY"):
                return any(rr.rdtype in (dns.rdatatype.DNSKEY, dns.rdatatype.RRSIG)
                           for rr in ask(p, name, rtype).answer)

            def cds_delete(p, zone=UZ):
                r = dns.query.udp(dns.message.make_query(zone, "CDS"), LOOPBACK, port=p,
                                  timeout=2)
                return any(rd.to_text() == "0 0 0 00" for rr in r.answer
                           if rr.rdtype == dns.rdatatype.CDS for rd in rr)

            def config(soa=usoa, **extra):
                redis.cmd("SET", "redins:zones:%s:config" % UZ, json.dumps(dict(soa=soa, **extra)))
            for p in ports:
                servers.wait_until(lambda p=p: signed_on(p), 20, "un.test signed on %d" % p)
            drv = node_of(redis.cmd("GET", "redins:zones:%s:kasp:lock" % UZ) or "x:0")
            expect(drv is not None, "un.test's lock")
            other = nodes[1 - nodes.index(drv)]
            servers.wait_until(lambda: other.ctl("dnssec", "ds-seen", "un.test").returncode == 0,
                               20, "ds-seen for un.test accepted")
            for t in nodes:
                servers.wait_until(lambda: re.search(
                    r"^KSK \d+ alg 13 active", t.ctl("dnssec", "status", "un.test").stdout,
                    re.M), 15, "un.test's KSK active on %s" % t.name)
            # the policy dropped while its keys are in use: refused, the signed version stays
            config()
            why = 'still has keys in use: set "dnssec_unsign": true first'
            for t in nodes:
                servers.wait_until(lambda: t.log_has(why), 10, "the refusal logged by " + t.name)
            for p in ports:
                expect(signed_on(p) and signed_on(p, "www." + UZ, "A"),
                       "un.test no longer signed on %d" % p)
            config(dnssec_policy="slow", dnssec_unsign=True)
            # ds.test too (mid ZSK rollover, maybe): its driver's check at Knot finds the DS gone
            redis.cmd("SET", "redins:zones:ds.test.:config",
                      json.dumps(dict(dcfg, dnssec_unsign=True)))
            for p in ports:
                servers.wait_until(lambda p=p: cds_delete(p) and cds_delete(p, "ds.test."), 10,
                                   "CDS DELETE on %d" % p)
            u = dns.update.UpdateMessage("test.")  # the registrar acts on the CDS DELETE
            u.delete("ds.test.", "DS")
            r = dns.query.tcp(u, LOOPBACK, port=knot.port, timeout=5)
            expect(r.rcode() == dns.rcode.NOERROR, "Knot kept the DS: %s" % r)
            out = other.ctl("dnssec", "ds-gone", "un.test")
            expect(out.returncode == 0, "ds-gone via the other node: %s %s"
                   % (out.stdout, out.stderr))
            t0 = time.monotonic()
            servers.wait_until(lambda: not any(signed_on(p) or signed_on(p, "www." + UZ, "A")
                                               for p in ports), 20,
                               "un.test served unsigned by both nodes")
            took = time.monotonic() - t0
            servers.wait_until(lambda: not any(signed_on(p, "ds.test.") for p in ports), 20,
                               "ds.test served unsigned by both nodes")
            expect(any(t.log_has('zone ds.test: request "ds-gone" done') for t in nodes),
                   "ds.test's DS gone not found by its driver")
            expect(drv.log_has('zone un.test: request "ds-gone" done'), "not done by the driver")
            expect(took >= 5, "the keys went %.1f s after ds-gone, before the DS TTL" % took)
            # unsigned to the end: dropping the policy is accepted (the new serial served)
            config(soa=dict(usoa, serial=2))
            for p in ports:
                servers.wait_until(lambda p=p: ask(p, UZ, "SOA").answer[0][0].serial == 2, 10,
                                   "the config without a policy served on %d" % p)
                expect(not signed_on(p), "signed again on %d" % p)
            # the policy named again, without dnssec_unsign: signed anew from scratch
            config(soa=dict(usoa, serial=3), dnssec_policy="slow")
            for p in ports:
                servers.wait_until(lambda p=p: signed_on(p) and signed_on(p, "www." + UZ, "A"),
                                   15, "un.test signed again on %d" % p)
            print("  CDS DELETE on both; ds-gone via %s; unsigned on both %.1f s later; ds.test's "
                  "DS found gone at Knot" % (other.name, took))

        def rollover_once():
            w = Watch(unbounds)
            old = ctx["zsk"]
            w.run(60, until=lambda: len(zsks(ports[0])) == 2 or len(zsks(ports[1])) == 2)
            ids = key_ids()
            expect(len(ids) == 3, "one rollover, one new key: %s" % ids)
            new = [t for t in zsks(ports[0]) | zsks(ports[1]) if t != old]
            expect(len(new) == 1, "new ZSKs %s" % new)
            ctx["new"] = new[0]
            servers.wait_until(lambda: zsks(ports[0]) == zsks(ports[1]) == {old, new[0]}, 3,
                               "both nodes publish the new ZSK")
            # both keep the same set while it stays published before it signs
            for _ in range(5):
                expect(same_set(), "the nodes differ: %s / %s"
                       % (sorted(dnskeys(ports[0])), sorted(dnskeys(ports[1]))))
                expect(rrsig_tags(ports[0], "www.rk.test.", "A") == {old},
                       "the new ZSK signs before its DNSKEY is cached")
                time.sleep(0.2)
            expect(len(key_ids()) == 3, "a second new key: %s" % key_ids())
            out = nodes[0].ctl("dnssec", "rollover", "rk.test", "zsk")
            expect(out.returncode != 0 and "rollover" in out.stderr,
                   "a rollover during a rollover: %s %s" % (out.stdout, out.stderr))
            ctx["watch"] = w
            print("  ZSK %d -> %d: one new key in Redis, both nodes publish %s"
                  % (old, new[0], sorted(dnskeys(ports[0]))))

        def holder_killed():
            old, new = ctx["zsk"], ctx["new"]
            lock = holder()
            victim = node_of(lock)
            expect(victim is not None, "lock %r" % lock)
            vi = nodes.index(victim)
            survivor = nodes[1 - vi]
            t0 = time.monotonic()
            os.kill(victim.proc.pid, signal.SIGKILL)
            victim.proc.wait(timeout=10)
            w = Watch([unbounds[1 + (1 - vi)]])  # the survivor's own Unbound
            sp = survivor.port
            # the rollover goes on (the survivor's builds step the state by its timeline)
            w.run(30, until=lambda: rrsig_tags(sp, "www.rk.test.", "A") == {new})
            expect(rrsig_tags(sp, "www.rk.test.", "A") == {new}, "ZSK %d never signed" % new)
            w.run(LOCK_S + 15, until=lambda: (holder() or "").endswith(":%d" % survivor.proc.pid))
            took = time.monotonic() - t0
            expect((holder() or "").endswith(":%d" % survivor.proc.pid),
                   "the survivor never took the lock: %r" % holder())
            expect(survivor.log_has("drives its keys now"), "take-over not logged")
            w.run(30, until=lambda: old not in dnskeys(sp))
            expect(old not in dnskeys(sp), "old ZSK %d never removed" % old)

            def removed_in_redis():
                st = redis.cmd("GET", rkey(":kasp")) or ""
                line = [ln for ln in st.splitlines() if " tag=%d " % old in ln]
                return line and not re.search(r" remove=0\b", line[0])
            w.run(15, until=removed_in_redis)
            expect(removed_in_redis(), "the state in Redis does not say ZSK %d removed" % old)
            expect(len(key_ids()) == 3, "keys made twice: %s" % key_ids())
            ctx["survivor"], ctx["victim"] = survivor, victim
            print("  node %s killed; %s took the lock after %.1f s and finished the rollover; "
                  "%d validated answers" % (victim.name, survivor.name, took, w.asked))

        def restart(victim):
            """victim (stopped) started again on its port, in its place in nodes."""
            again = servers.YamlTernd(work, args.ternd, yaml, name=victim.name,
                                      ternctl=args.ternctl)
            again.port = victim.port
            extra.append(again)
            nodes[nodes.index(victim)] = again
            again.start(ZONE)
            return again

        def restart_same_keys():
            victim, survivor = ctx["victim"], ctx["survivor"]
            again = restart(victim)
            servers.wait_until(lambda: sorted(dnskeys(again.port)) ==
                               sorted(dnskeys(survivor.port)), 10,
                               "the restarted node publishes the survivor's keys")
            expect(not again.log_has("generated"), "the restarted node made a key")
            expect((holder() or "").endswith(":%d" % survivor.proc.pid),
                   "the lock moved: %r" % holder())
            Watch(unbounds[:1]).run(2)
            # the driver stopped (SIGTERM) releases its lock: the restarted node takes it at its
            # next tick, not after the lock's expiry
            survivor.stop()
            expect(survivor.proc.returncode in (0, -15), "exit %s" % survivor.proc.returncode)
            expect(survivor.log_has("key lock released"), "release not logged")
            servers.wait_until(lambda: (holder() or "").endswith(":%d" % again.proc.pid),
                               LOCK_S / 3 + 3, "the restarted node takes the released lock")
            ctx["survivor"] = again
            print("  restarted: DNSKEY %s, as the survivor's; the survivor stopped and released "
                  "its lock to it" % sorted(dnskeys(again.port)))

        def unknown_policy():
            bad = "bad.test."
            redis.cmd("SET", "redins:zones:%s:config" % bad,
                      json.dumps({"soa": dict(SOA, ns="ns1.bad.test."), "dnssec_policy": "nope"}))
            redis.cmd("HSET", "redins:zones:" + bad, "www", json.dumps(LABELS["www"]))
            redis.cmd("SADD", "redins:zones", bad)
            t = ctx["survivor"]
            want = ('"dnssec_policy": "nope" in redins:zones:bad.test.:config names no policy')
            servers.wait_until(lambda: t.log_has(want), 5, "the refusal logged")
            r = ask(t.port, "www.bad.test.", "A")
            expect(r.rcode() == dns.rcode.REFUSED or not r.answer, "bad.test served: %s" % r)
            print("  refused: %s" % want)

        servers.run_checks(results, (("first_signing", first_signing),
                                     ("parent_ds_check", parent_ds_check),
                                     ("rollover_once", rollover_once),
                                     ("holder_killed", holder_killed),
                                     ("restart_same_keys", restart_same_keys),
                                     ("unknown_policy", unknown_policy),
                                     ("unsign", unsign)))
    finally:
        for u in unbounds:
            u.stop()
        for t in nodes + extra:
            t.stop()
        knot.stop()
        redis.stop()
    failed = servers.report(results)
    if not failed:
        shutil.rmtree(work, ignore_errors=True)
    else:
        for t in nodes:
            print("--- %s\n%s" % (t.name, t.log_text()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
