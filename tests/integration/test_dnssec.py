#!/usr/bin/python3
"""DNSSEC end to end: a signer's answers validate with real validators (Unbound, BIND's delv).

The signer under test is pluggable (--signer):

  knot    the stand-in that proved this harness before ternd could sign (still the default of
          the script, which then needs no ternd; ctest runs --signer ternd): Knot serving the
          zone's unsteered data from an RFC 1035 file, signed with BIND keys from dnssec-keygen,
          in two flavours run one after the other (--knot-mode picks one):
            zone    dnssec-signing: on (the zone signed at load, NSEC chain: real NXDOMAIN)
            online  mod-onlinesign (each answer signed when asked: NXDOMAIN comes back as
                    NOERROR with a "black lies" NSEC, the compact-denial branch below)
  ternd   ternd serving the redins-schema JSON zone with geo-steered RRsets, signing it online
          with keys from `ternctl dnssec keygen` (the zone's dnssec: keys in ternd.yaml) and
          steering by the source address, which a MaxMind DB fixture
          (data/dnssec/clients_mmdb.pl) and an ASN table map to AU / AS64500 (127.0.0.2),
          GB / AS64501 (127.0.0.3) and unknown (127.0.0.4)

What is checked, per signer:

  keys        a KSK and a ZSK (knot: dnssec-keygen, make_keys; ternd: ternctl dnssec keygen ZONE
              -a ALG -d DIR, ternctl_keys: two stems on stdout, flags 257 and 256); the signer's
              DNSKEY RRset is exactly the two key files' and the DS of its KSK is the DS the
              validators are given: dnssec-dsfromkey's for Knot; for ternd the one the running
              ternd gives (ternctl -s SOCKET dnssec ds ZONE: "ok", then the DS line), which
              must be dnssec-dsfromkey -2 of the KSK file
  unbound     three validating Unbounds (-d, a config of their own, a stub zone to the signer
              and the DS as trust anchor), one per client address (outgoing-interface), the
              third over TCP to the signer: every name below answers with AD=1, an RRSIG for
              every answer RRset and the expected data; with ternd each client gets its own
              steered subset, with Knot the whole (unsteered) RRset
                SOA, DNSKEY, MX, TXT; plain A; country / asn / location / weighted / rr A and a
                CNAME to a steered name (and, ternd only, an ANAME to it); a wildcard (the
                RRSIG's labels say so); an in-zone CNAME chain of two hops; NODATA; NXDOMAIN
                (or NOERROR with an empty answer from a compact-denial signer: accepted and
                said which); an empty non-terminal
  delv        a sample asked of the signer directly (delv -a anchors +root=ZONE, one over TCP,
              one from a steered source with -b): "; fully validated" (or "; negative
              response, fully validated") and the expected data
  negative    an Unbound given the DS of another KSK: SERVFAIL and a validation failure in its
              log; delv with that DS: a broken trust chain. So the checks above can fail.

and with ternd (signed), the same ternd (algorithm 13) asked directly with dnspython, whose own
validation (dns.dnssec.validate against the key files' DNSKEYs) checks the RRSIGs it gets:

  DO=0        plain A, NXDOMAIN (rcode NXDOMAIN) and a steered A, with EDNS DO=0 and without
              EDNS: no RRSIG, NSEC or NSEC3 in any section, AD=0, the right data
  NXNAME      DO=1 for names that do not exist: NOERROR, no answer, one NSEC at the name whose
              bitmap has type 128 (NXNAME, RFC 9824) and no A, its RRSIG verified
  size        big. (ten TXT strings of ~200 bytes): DO=1 with EDNS payload 512 over UDP: TC=1;
              over TCP: the whole RRset and its RRSIG, verified; an Unbound gets it with AD=1
  metrics     metrics_listen: /metrics' tern_dnssec_cache_total{result="hit"} grows with each
              repeated steered DO=1 query (the worker's signature cache), and
              tern_dnssec_signatures_total > 0
  bad keys    ternd -c CONF --check-config with a .key beside another key's .private (renamed):
              exit non-zero, the message naming the zone and the key file (the same config with
              the right .private: exit 0). Last: the running ternd's ZSK .private is replaced
              (by rename) by one whose PrivateKey is cut short; ternctl reload exits 1 naming
              the zone and the key file, and the old signed version keeps answering (the same
              DNSKEYs, AD=1 from every Unbound for a name none has cached, steered answers
              signed per query with the old ZSK)

then three short ternd runs, one Unbound each (AU, 127.0.0.2), asked SOA, DNSKEY, a steered A,
a wildcard, NODATA and NXDOMAIN (SAMPLE), the trust anchor again from ternctl dnssec ds:

  alg 15      keys from ternctl dnssec keygen -a 15 (Ed25519)
  alg 8       keys from ternctl dnssec keygen -a 8 -b 2048 (RSA/SHA-256)
  redis       a redis-server of its own with the zone in redins' layout (the set redins:zones
              with member "sec.test.", the hash redins:zones:sec.test. of labels, the config
              redins:zones:sec.test.:config with "dnssec": true) and a dnssec-keygen KSK and ZSK
              at redins:zones:sec.test.:zsk:pub, :zsk:priv, :ksk:pub, :ksk:priv (zsk:pub and
              ksk:priv with real newlines, the other two with backslash-n); ternd's redis:
              block serves it. Then HSET of a label: served signed within LIVE_WAIT and AD=1
              from the Unbound; then zsk:priv SET to another key's private text (and a label
              changed with it): ternd logs an error naming the zone and the key, and the
              previous version keeps answering, signed and validating

--unsigned serves the same zone unsigned (no keys, validators without a trust anchor: AD=0
expected): a check of the harness's steering expectations against today's ternd (the main ternd
run only, without the checks above that need signatures).

Prints one line per check and "N passed, N failed"; exits 1 on any failure, or at once with a
clear message when a program it needs is missing (unbound, delv, dnssec-keygen, redis-server,
knotd, ...). Every wait is bounded; only the processes started here are stopped, by their pid;
the temporary directory is removed (--keep keeps it).

    test_dnssec.py --ternd build/ternd --ternctl build/ternctl [--signer knot|ternd]
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import dns.dnssec
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, Failure, expect, find_program, report, run_check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS_MMDB = os.path.join(HERE, "data", "dnssec", "clients_mmdb.pl")
ZONE = "sec.test."
ALG = "ECDSAP256SHA256"
TIMEOUT = 5.0  # one answer from a validating resolver (it fetches the DNSKEY RRset first)
TOOL_TIMEOUT = 30  # dnssec-keygen, keymgr, delv, perl, ternctl
CTL_WAIT = 10.0  # from ternd's first answer until its control socket must answer
LIVE_WAIT = 5.0  # a change in Redis reaching signed answers (test_redis.py checks 1 s unsigned)

# The clients ternd steers: Unbound's outgoing-interface (delv's -b). Kept in step with
# data/dnssec/clients_mmdb.pl and ASN_CSV.
Client = collections.namedtuple("Client", "label addr country asn")
CLIENTS = [Client("AU", "127.0.0.2", "AU", 64500), Client("GB", "127.0.0.3", "GB", 64501),
           Client("--", "127.0.0.4", None, None)]
BAD_CLIENT = "127.0.0.5"  # the Unbound given the wrong DS
ASN_CSV = """127.0.0.2,127.0.0.2,64500,"Example AU"
127.0.0.3,127.0.0.3,64501,"Example GB"
"""


# ---- the zone --------------------------------------------------------------------------------

def _ip(addr, **kw):
    r = {"ip": addr}
    r.update(kw)
    return r


SOA = {"ttl": 300, "ns": "ns1.sec.test.", "mbox": "hostmaster.sec.test.", "refresh": 3600,
       "retry": 600, "expire": 86400, "minttl": 60, "serial": 2024010101}
# redins' schema (conf/example-geo.json). Names: ns1, mail, plain (unsteered A), country / asn /
# near / wrr / rr (steered or ordered A), *.wild (wildcard), chain -> hop -> plain (two in-zone
# CNAME hops), alias -> country, leaf.sub.ent (sub.ent and ent are empty non-terminals), info
# (TXT); MX and TXT at the apex.
RECORDS = {
    "@": {"ns": {"ttl": 3600, "records": [{"host": "ns1.sec.test."}]},
          "mx": {"ttl": 3600, "records": [{"host": "mail.sec.test.", "preference": 10}]},
          "txt": {"ttl": 3600, "records": [{"text": "v=spf1 mx -all"}]}},
    "ns1": {"a": {"ttl": 3600, "records": [_ip("192.0.2.53")]}},
    "mail": {"a": {"ttl": 3600, "records": [_ip("192.0.2.25")]}},
    "plain": {"a": {"ttl": 60, "records": [_ip("192.0.2.100"), _ip("192.0.2.101")]}},
    "country": {"a": {"ttl": 60, "filter": {"count": "multi", "order": "none",
                                             "geo_filter": "country"},
                      "records": [_ip("192.0.2.1", country="AU"),
                                  _ip("192.0.2.2", country=["GB", "IE"]),
                                  _ip("192.0.2.3")]}},
    "asn": {"a": {"ttl": 60, "filter": {"count": "multi", "order": "none", "geo_filter": "asn"},
                  "records": [_ip("192.0.2.11", asn=64500), _ip("192.0.2.12", asn=[64501, 1]),
                              _ip("192.0.2.13", asn=0)]}},
    # record coordinates come from the geoip database: 1.2.3.10 Brisbane, 81.2.69.130 London
    "near": {"a": {"ttl": 60, "filter": {"count": "single", "order": "none",
                                          "geo_filter": "location"},
                   "records": [_ip("1.2.3.10"), _ip("81.2.69.130")]}},
    "wrr": {"a": {"ttl": 60, "filter": {"count": "single", "order": "weighted"},
                  "records": [_ip("192.0.2.31", weight=1), _ip("192.0.2.32", weight=0),
                              _ip("192.0.2.33", weight=3)]}},
    "rr": {"a": {"ttl": 60, "filter": {"count": "multi", "order": "rr"},
                 "records": [_ip("192.0.2.41"), _ip("192.0.2.42"), _ip("192.0.2.43")]}},
    "*.wild": {"a": {"ttl": 60, "records": [_ip("192.0.2.60")]}},
    "chain": {"cname": {"ttl": 60, "host": "hop.sec.test."}},
    "hop": {"cname": {"ttl": 60, "host": "plain.sec.test."}},
    "alias": {"cname": {"ttl": 60, "host": "country.sec.test."}},
    # ternd only (Knot has no ANAME): the target's steered A, synthesised and signed per query
    "anamed": {"aname": {"location": "country.sec.test."}},
    "leaf.sub.ent": {"a": {"ttl": 60, "records": [_ip("192.0.2.70")]}},
    "info": {"txt": {"ttl": 60, "records": [{"text": "signed by the server under test"}]}},
    # an RRset too large for a 512-byte UDP answer (asked of ternd directly: TC=1, then TCP)
    "big": {"txt": {"ttl": 60, "records": [{"text": "%02d %s" % (i, "0123456789abcdef" * 12)}
                                           for i in range(10)]}},
}


def zone_json(dnssec=True):
    """The zone in the redins schema, as ternd reads it (geo filters and all)."""
    return {"config": {"soa": SOA, "dnssec": dnssec}, "records": RECORDS}


def zone_rfc1035():
    """The same data unsteered, as an RFC 1035 master file (for Knot): every record of a
    steered RRset is served, whatever its filter says. No DNSKEY: the signer adds it."""
    lines = ["$ORIGIN %s" % ZONE,
             "@ %d IN SOA %s %s %d %d %d %d %d" % (SOA["ttl"], SOA["ns"], SOA["mbox"],
                                                   SOA["serial"], SOA["refresh"], SOA["retry"],
                                                   SOA["expire"], SOA["minttl"])]
    for label, rrsets in RECORDS.items():
        for rtype, rrset in rrsets.items():
            ttl = rrset.get("ttl", 300)
            if rtype == "cname":
                lines.append("%s %d IN CNAME %s" % (label, ttl, rrset["host"]))
                continue
            if rtype == "aname":
                continue  # Knot has no ANAME: the case is asked of ternd only (TERND_CASES)
            for rec in rrset["records"]:
                if rtype in ("a", "aaaa"):
                    data = rec["ip"]
                elif rtype == "ns":
                    data = rec["host"]
                elif rtype == "mx":
                    data = "%d %s" % (rec["preference"], rec["host"])
                elif rtype == "txt":
                    data = '"%s"' % rec["text"]
                else:
                    raise ValueError("zone_rfc1035: no writer for %s" % rtype)
                lines.append("%s %d IN %s %s" % (label, ttl, rtype.upper(), data))
    return "\n".join(lines) + "\n"


def a_records(label):
    return [r["ip"] for r in RECORDS[label]["a"]["records"]]


# ---- keys ------------------------------------------------------------------------------------

Keys = collections.namedtuple("Keys", "ksk zsk ds")  # ksk/zsk: K-file stems; ds: DS rdata text


def keygen(directory, zone, alg, ksk):
    """One key from dnssec-keygen in directory: its K-file stem."""
    os.makedirs(directory, exist_ok=True)
    extra = ["-f", "KSK"] if ksk else []
    out = subprocess.run([find_program("dnssec-keygen"), "-q", "-a", alg, *extra, "-K", directory,
                          zone], capture_output=True, text=True, timeout=TOOL_TIMEOUT)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError("dnssec-keygen %s: %s" % (" ".join(extra), out.stderr.strip()))
    return os.path.join(directory, out.stdout.strip())


DS_LINE = re.compile(r"^(\S+)\s+(?:\d+\s+)?(?:IN\s+)?DS\s+(\d+ \d+ \d+ [0-9A-Fa-f]+)\s*$")


def dsfromkey(stem):
    """The SHA-256 DS rdata text of a key file, as dnssec-dsfromkey -2 gives it."""
    out = subprocess.run([find_program("dnssec-dsfromkey"), "-2", stem + ".key"],
                         capture_output=True, text=True, timeout=TOOL_TIMEOUT)
    m = DS_LINE.match(out.stdout.strip())
    if out.returncode != 0 or not m:
        raise RuntimeError("dnssec-dsfromkey: %r %s" % (out.stdout, out.stderr.strip()))
    return m.group(2)


def make_keys(directory, zone, alg):
    """A KSK and a ZSK for zone in directory (BIND's K<zone>+<alg>+<tag>.key/.private) and the
    SHA-256 DS of the KSK (the knot mode's and the Redis zone's keys)."""
    ksk = keygen(directory, zone, alg, True)
    zsk = keygen(directory, zone, alg, False)
    return Keys(ksk, zsk, dsfromkey(ksk))


def ternctl_keys(ternctl, directory, zone, alg=13, bits=None):
    """A KSK and a ZSK from `ternctl dnssec keygen ZONE -a ALG [-b BITS] -d DIR` (ternd mode):
    two stems on stdout, the KSK's first, each with its .key (flags 257 / 256, algorithm alg)
    and .private; the DS is dnssec-dsfromkey's of the KSK (the online DS is checked against
    it)."""
    os.makedirs(directory, exist_ok=True)
    cmd = [ternctl, "dnssec", "keygen", zone, "-a", str(alg), "-d", directory]
    if bits:
        cmd += ["-b", str(bits)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT)
    stems = out.stdout.split()
    if out.returncode != 0 or len(stems) != 2:
        raise RuntimeError("%s: exit %d, stdout %r, stderr %r"
                           % (" ".join(cmd), out.returncode, out.stdout, out.stderr))
    for stem, flags in zip(stems, (257, 256)):
        k = key_dnskey(stem)
        if (k.flags, k.algorithm) != (flags, alg) or not os.path.isfile(stem + ".private"):
            raise RuntimeError("ternctl dnssec keygen: %s: flags %d algorithm %d, want %d %d "
                               "and a .private" % (stem, k.flags, k.algorithm, flags, alg))
    return Keys(stems[0], stems[1], dsfromkey(stems[0]))


def key_dnskey(stem):
    """The DNSKEY rdata of a BIND .key file."""
    with open(stem + ".key") as f:
        for line in f:
            m = re.match(r"^\S+\s+(?:\d+\s+)?(?:IN\s+)?DNSKEY\s+(.*)$", line.strip())
            if m and not line.startswith(";"):
                return dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.DNSKEY, m.group(1))
    raise RuntimeError("%s.key: no DNSKEY" % stem)


def ds_parts(ds):
    tag, alg, dtype, digest = ds.split()
    return int(tag), int(alg), int(dtype), digest.upper()


# ---- the signers -----------------------------------------------------------------------------

class KnotSigner(servers.Server):
    """Knot signing the RFC 1035 zone with the BIND keys (keymgr import-bind), on a loopback
    port: at load (dnssec-signing: on) or per answer (mod-onlinesign)."""

    def __init__(self, work, zonefile, keys, online, sign=True):
        self.name = "knot-online" if online else "knot-zone"
        self.online = online
        self.sign = sign
        self.keys = keys
        super().__init__(work, [(ZONE, zonefile)])

    def command(self):
        d = self.dir
        conf = os.path.join(d, "knot.conf")
        os.makedirs(os.path.join(d, "db"), exist_ok=True)
        if not self.sign:
            signing = ""
        elif self.online:
            signing = "    module: mod-onlinesign/tern\n"
        else:
            signing = "    dnssec-signing: on\n    dnssec-policy: bindkeys\n"
        with open(conf, "w") as f:
            f.write(servers.knot_conf_head(d, self.port, log="info"))
            f.write(f"""# the imported keys as they are: no generation, no rollover, NSEC
policy:
  - id: bindkeys
    algorithm: ecdsap256sha256
    manual: on
    nsec3: off
mod-onlinesign:
  - id: tern
    policy: bindkeys
template:
  - id: default
    storage: "{d}"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
  - domain: "{ZONE}"
    file: "{self.zones[0][1]}"
{signing}""")
        if self.sign:
            for stem in (self.keys.ksk, self.keys.zsk):
                out = subprocess.run([find_program("keymgr"), "-c", conf, ZONE, "import-bind",
                                      stem], capture_output=True, text=True,
                                     timeout=TOOL_TIMEOUT)
                if out.returncode != 0:
                    raise RuntimeError("keymgr import-bind %s: %s%s"
                                       % (stem, out.stdout, out.stderr))
        return [find_program("knotd"), "-c", conf]


class TerndSigner(servers.Server):
    """ternd serving the JSON zone, signed with the key files (the zone's dnssec: keys), or a
    zone from Redis (redis_port: redins' layout, "dnssec": true and its keys in Redis), with the
    geoip database and ASN table that steer the clients, a control socket (ternctl) and, given a
    port, the metrics endpoint."""

    def __init__(self, work, zonefile, keys, binary, geoip_db, asn_table, sign=True,
                 name="ternd", ternctl=None, metrics_port=None, redis_port=None):
        self.name = name
        self.binary = binary
        self.ternctl = ternctl
        self.keys = keys
        self.sign = sign
        self.geoip_db = geoip_db
        self.asn_table = asn_table
        self.metrics_port = metrics_port
        self.redis_port = redis_port
        super().__init__(work, [(ZONE, zonefile)] if zonefile else [])
        self.conf = os.path.join(self.dir, "ternd.yaml")
        self.socket = os.path.join(self.dir, "ternd.sock")

    def config_text(self):
        lines = ['listen: ["%s:%d"]' % (LOOPBACK, self.port), "workers: 1"]
        if os.geteuid() == 0:
            lines.append("allow_root: true")  # see servers.Ternd
        lines += ['geoip_db: "%s"' % self.geoip_db, 'asn_table: "%s"' % self.asn_table,
                  'control_socket: "%s"' % self.socket]
        if self.metrics_port:
            lines.append('metrics_listen: "%s:%d"' % (LOOPBACK, self.metrics_port))
        if self.redis_port:
            lines += ["redis:", '  address: "%s:%d"' % (LOOPBACK, self.redis_port),
                      "  connect_timeout: 500", "  read_timeout: 2000"]
        if self.zones:
            lines += ["zones:", '  - origin: "%s"' % ZONE, '    file: "%s"' % self.zones[0][1]]
            if self.sign:
                lines += ["    dnssec:",
                          '      keys: ["%s", "%s"]' % (self.keys.ksk, self.keys.zsk)]
        return "\n".join(lines) + "\n"

    def command(self):
        with open(self.conf, "w") as f:
            f.write(self.config_text())
        return [self.binary, "-c", self.conf]

    def ctl(self, *argv):
        """ternctl -s SOCKET argv... (bounded): the CompletedProcess."""
        try:
            return subprocess.run([self.ternctl, "-s", self.socket, *argv], capture_output=True,
                                  text=True, timeout=TOOL_TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise Failure("ternctl %s did not exit within %d s" % (" ".join(argv), TOOL_TIMEOUT))

    def online_ds(self):
        """The zone's DS as the running ternd gives it (ternctl -s SOCKET dnssec ds ZONE: an
        "ok" line, then one DS line per KSK): the DS rdata text of its one KSK. Waits (bounded)
        for the control socket, which may come up just after the first DNS answer."""
        deadline = time.monotonic() + CTL_WAIT
        while True:
            out = self.ctl("dnssec", "ds", ZONE)
            if out.returncode != 2 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        lines = out.stdout.splitlines()
        what = "ternctl -s %s dnssec ds %s: exit %d\n%s%s" % (self.socket, ZONE, out.returncode,
                                                              out.stdout, out.stderr)
        expect(out.returncode == 0 and lines and lines[0] == "ok", what)
        ds = [DS_LINE.match(ln) for ln in lines[1:]]
        expect(len(ds) == 1 and ds[0] and dns.name.from_text(ds[0].group(1)) ==
               dns.name.from_text(ZONE), "want one DS line for %s: %s" % (ZONE, what))
        return ds[0].group(2)


# ---- the validators --------------------------------------------------------------------------

class Unbound(servers.Unbound):
    """A validating Unbound asking only the signer (a stub zone for ZONE) from one source
    address, with ds as the zone's trust anchor (None: no anchor, nothing validates)."""

    def __init__(self, work, name, signer_port, ds, outgoing, tcp_upstream=False):
        super().__init__(work, name, [(ZONE, signer_port, ds)], outgoing,
                         tcp_upstream=tcp_upstream, timeout=TIMEOUT)


def delv(port, anchors, name, rtype, source=None, tcp=False):
    """delv asking the signer directly, validating from anchors (a trust-anchors file for ZONE):
    (stdout, stderr)."""
    cmd = [find_program("delv"), "@" + LOOPBACK, "-p", str(port), "-a", anchors,
           "+root=" + ZONE.rstrip(".")]
    if source:
        cmd += ["-b", source]
    if tcp:
        cmd.append("+tcp")
    cmd += [name, rtype]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT)
    return out.stdout, out.stderr


def write_anchors(path, ds):
    tag, alg, dtype, digest = ds_parts(ds)
    with open(path, "w") as f:
        f.write('trust-anchors {\n    %s static-ds %d %d %d "%s";\n};\n'
                % (ZONE, tag, alg, dtype, digest))


# ---- what a validated answer must be ---------------------------------------------------------

Exact = collections.namedtuple("Exact", "values")  # the final RRset's rdata, in any order
OneOf = collections.namedtuple("OneOf", "values")  # a single record, one of these


def want_a(label, client, steered):
    """What client gets for label's A RRset: the whole RRset from an unsteering signer (Knot),
    the steered subset from ternd."""
    recs = a_records(label)
    if not steered:
        return Exact(recs)
    if label == "country":
        return Exact([{"AU": "192.0.2.1", "GB": "192.0.2.2"}.get(client.country, "192.0.2.3")])
    if label == "asn":
        return Exact([{64500: "192.0.2.11", 64501: "192.0.2.12"}.get(client.asn, "192.0.2.13")])
    if label == "near":
        if client.country in ("AU", "GB"):
            return Exact(["1.2.3.10" if client.country == "AU" else "81.2.69.130"])
        return OneOf(recs)  # nothing to be near to: any one of them
    if label == "wrr":
        return OneOf([r["ip"] for r in RECORDS["wrr"]["a"]["records"] if r["weight"] > 0])
    return Exact(recs)


# (title, qname, qtype, kind, want(client, steered) -> (cnames, Exact/OneOf) for kind "data")
Case = collections.namedtuple("Case", "title qname qtype kind want")
CASES = [
    Case("SOA", ZONE, "SOA", "data", lambda c, s: ([], Exact([
        "%s %s %d %d %d %d %d" % (SOA["ns"], SOA["mbox"], SOA["serial"], SOA["refresh"],
                                  SOA["retry"], SOA["expire"], SOA["minttl"])]))),
    Case("DNSKEY", ZONE, "DNSKEY", "data", None),  # filled in per run: the key files' DNSKEYs
    Case("MX", ZONE, "MX", "data", lambda c, s: ([], Exact(["10 mail.sec.test."]))),
    Case("TXT apex", ZONE, "TXT", "data", lambda c, s: ([], Exact(['"v=spf1 mx -all"']))),
    Case("TXT", "info." + ZONE, "TXT", "data",
         lambda c, s: ([], Exact(['"signed by the server under test"']))),
    Case("plain A", "plain." + ZONE, "A", "data", lambda c, s: ([], want_a("plain", c, s))),
    Case("country A", "country." + ZONE, "A", "data",
         lambda c, s: ([], want_a("country", c, s))),
    Case("asn A", "asn." + ZONE, "A", "data", lambda c, s: ([], want_a("asn", c, s))),
    Case("location A (single)", "near." + ZONE, "A", "data",
         lambda c, s: ([], want_a("near", c, s))),
    Case("weighted A (single)", "wrr." + ZONE, "A", "data",
         lambda c, s: ([], want_a("wrr", c, s))),
    Case("rr A (multi)", "rr." + ZONE, "A", "data", lambda c, s: ([], want_a("rr", c, s))),
    Case("CNAME to a steered name", "alias." + ZONE, "A", "data",
         lambda c, s: ([("alias." + ZONE, "country." + ZONE)], want_a("country", c, s))),
    Case("CNAME chain, 2 hops", "chain." + ZONE, "A", "data",
         lambda c, s: ([("chain." + ZONE, "hop." + ZONE), ("hop." + ZONE, "plain." + ZONE)],
                       want_a("plain", c, s))),
    Case("wildcard", "x.wild." + ZONE, "A", "data", lambda c, s: ([], want_a("*.wild", c, s))),
    Case("wildcard, 2 labels deep", "a.b.wild." + ZONE, "A", "data",
         lambda c, s: ([], want_a("*.wild", c, s))),
    Case("NODATA", "plain." + ZONE, "AAAA", "nodata", None),
    Case("NODATA at a wildcard", "x.wild." + ZONE, "AAAA", "nodata", None),
    Case("NODATA at the CNAME chain's end", "chain." + ZONE, "TXT", "nodata-cname", None),
    Case("NXDOMAIN", "nope." + ZONE, "A", "nxdomain", None),
    Case("NXDOMAIN below a name", "x.plain." + ZONE, "A", "nxdomain", None),
    Case("empty non-terminal", "ent." + ZONE, "A", "nodata", None),
    Case("empty non-terminal, deeper", "sub.ent." + ZONE, "A", "nodata", None),
    Case("below the empty non-terminal", "leaf.sub.ent." + ZONE, "A", "data",
         lambda c, s: ([], want_a("leaf.sub.ent", c, s))),
]
# ternd's main run also asks for an ANAME's A: the steered subset of its target, owned by the
# ANAME's name and signed per query
TERND_CASES = CASES + [
    Case("ANAME to a steered name", "anamed." + ZONE, "A", "data",
         lambda c, s: ([], want_a("country", c, s))),
]
# what the short runs (algorithms 15 and 8, the Redis zone) ask their one Unbound
SAMPLE = [c for c in CASES if c.title in ("SOA", "DNSKEY", "country A", "wildcard", "NODATA",
                                           "NXDOMAIN")]


def rrset_texts(rrset):
    return sorted(rd.to_text() for rd in rrset)


def check_signed(r, what):
    """Every RRset of the answer section has an RRSIG over it at the same owner."""
    covered = {(rs.name, rs.covers) for rs in r.answer if rs.rdtype == dns.rdatatype.RRSIG}
    for rs in r.answer:
        if rs.rdtype != dns.rdatatype.RRSIG:
            expect((rs.name, rs.rdtype) in covered, "%s: no RRSIG over %s %s in the answer"
                   % (what, rs.name, dns.rdatatype.to_text(rs.rdtype)))


def check_data(r, case, want, what):
    cnames, final = want
    expect(r.rcode() == dns.rcode.NOERROR, "%s: %s" % (what, dns.rcode.to_text(r.rcode())))
    qtype = dns.rdatatype.from_text(case.qtype)
    owner = dns.name.from_text(case.qname)
    for frm, to in cnames:
        rs = [x for x in r.answer if x.rdtype == dns.rdatatype.CNAME and x.name == owner]
        expect(owner == dns.name.from_text(frm) and len(rs) == 1 and
               rrset_texts(rs[0]) == [to], "%s: no CNAME %s -> %s in %s"
               % (what, frm, to, [x.to_text() for x in r.answer]))
        owner = dns.name.from_text(to)
    rs = [x for x in r.answer if x.rdtype == qtype and x.name == owner]
    expect(len(rs) == 1, "%s: no %s RRset at %s: %s"
           % (what, case.qtype, owner, [x.to_text() for x in r.answer]))
    got = rrset_texts(rs[0])
    if isinstance(final, Exact):
        expect(got == sorted(final.values), "%s: %s, want %s" % (what, got, sorted(final.values)))
    else:
        expect(len(got) == 1 and got[0] in final.values, "%s: %s, want one of %s"
               % (what, got, final.values))
    return rs[0]


def check_case(case, r, want, signed, what):
    """r (from a validator) is what case expects; returns a note on how a wildcard or an
    NXDOMAIN was answered (they may differ between signers), else None."""
    ad = bool(r.flags & dns.flags.AD)
    expect(ad == signed, "%s: AD=%d (rcode %s), want AD=%d" % (what, ad,
                                                              dns.rcode.to_text(r.rcode()),
                                                              signed))
    if signed:
        check_signed(r, what)
    if case.kind == "data":
        rs = check_data(r, case, want, what)
        if signed and case.qname.startswith(("x.wild.", "a.b.wild.")):
            # a wildcard expansion: the RRSIG's label count is that of *.wild.sec.test. less the
            # asterisk (the validator then needed the NSEC proof that no closer name exists), or
            # an online signer signs the synthesized RRset as the query name's own (Knot's
            # mod-onlinesign does): either validates, anything else is wrong
            sigs = [x for x in r.answer if x.rdtype == dns.rdatatype.RRSIG and
                    x.covers == rs.rdtype and x.name == rs.name]
            wild = len(dns.name.from_text("wild." + ZONE).labels) - 1
            own = len(rs.name.labels) - 1
            got = sorted({s.labels for s in sigs[0]}) if sigs else []
            expect(got in ([wild], [own]), "%s: RRSIG labels %s, want %d (a wildcard expansion) "
                   "or %d (signed as the name)" % (what, got, wild, own))
            return ("RRSIG labels %d: a wildcard expansion" % wild if got == [wild]
                    else "RRSIG labels %d: signed as the name itself" % own)
        return None
    if case.kind == "nodata-cname":
        # the chain is answered, its end has no TXT
        expect(r.rcode() == dns.rcode.NOERROR, "%s: %s" % (what, dns.rcode.to_text(r.rcode())))
        types = {x.rdtype for x in r.answer} - {dns.rdatatype.RRSIG}
        expect(types == {dns.rdatatype.CNAME} and len(r.answer) >= 2,
               "%s: %s, want the two CNAMEs and nothing else"
               % (what, [x.to_text() for x in r.answer]))
        return None
    expect(not r.answer, "%s: an answer %s" % (what, [x.to_text() for x in r.answer]))
    if case.kind == "nodata":
        expect(r.rcode() == dns.rcode.NOERROR, "%s: %s, want NOERROR (NODATA)"
               % (what, dns.rcode.to_text(r.rcode())))
        return None
    # NXDOMAIN, or NOERROR with an empty answer from a compact-denial signer
    expect(r.rcode() in (dns.rcode.NXDOMAIN, dns.rcode.NOERROR), "%s: %s, want NXDOMAIN (or "
           "NOERROR, empty: compact denial)" % (what, dns.rcode.to_text(r.rcode())))
    return "NXDOMAIN" if r.rcode() == dns.rcode.NXDOMAIN else "NOERROR, empty (compact denial)"


# ---- one signer ------------------------------------------------------------------------------

class Run:
    """One signer and its validators: the checks of one --signer (flavour). clients: one
    Unbound each (the last over TCP when there are several); cases: what they are asked; full:
    delv and the wrong-DS negatives too."""

    def __init__(self, label, signer, keys, bad_keys, steered, signed, work, clients=CLIENTS,
                 cases=CASES, full=True):
        self.label = label
        self.signer = signer
        self.keys = keys
        self.bad_keys = bad_keys
        self.steered = steered
        self.signed = signed
        self.work = work
        self.clients = clients
        self.cases = cases
        self.full = full
        self.anchor = None  # the DS the validators are given
        self.unbounds = []
        self.bad = None
        self.results = []

    def check(self, name, fn):
        run_check(self.results, "%s: %s" % (self.label, name), fn)

    def start(self):
        self.signer.start(ZONE)
        # ternd's trust anchor comes from ternd itself (ternctl dnssec ds ZONE, checked against
        # dnssec-dsfromkey below); Knot's from dnssec-dsfromkey
        self.anchor = self.keys.ds if self.signed else None
        if self.signed and isinstance(self.signer, TerndSigner):
            self.anchor = self.signer.online_ds()
        for i, c in enumerate(self.clients):
            # the last one asks the signer over TCP
            u = Unbound(self.work, "unbound-%s-%s" % (self.label.replace(" ", "-"), c.addr),
                        self.signer.port, self.anchor, c.addr,
                        tcp_upstream=(len(self.clients) > 1 and i == len(self.clients) - 1))
            self.unbounds.append((c, u))
            u.start()
        if self.signed and self.full:
            self.bad = Unbound(self.work, "unbound-%s-bad-ds" % self.label.replace(" ", "-"),
                               self.signer.port, self.bad_keys.ds, BAD_CLIENT)
            self.bad.start()

    def stop(self):
        for _, u in self.unbounds:
            u.stop()
        if self.bad:
            self.bad.stop()
        self.signer.stop()

    def run(self):
        try:
            self.start()
        except Exception as e:  # noqa: BLE001
            self.results.append(("%s: start" % self.label, "%s: %s" % (type(e).__name__, e)))
            self.stop()
            return self.results
        try:
            self.checks()
        finally:
            self.stop()
        if any(err for _, err in self.results):
            print("--- %s log:\n%s" % (self.signer.name, self.signer.log_text()))
            for _, u in self.unbounds + ([(None, self.bad)] if self.bad else []):
                print("--- %s log:\n%s" % (u.name, u.log_text()))
        return self.results

    def dnskeys(self):
        return sorted(key_dnskey(s).to_text() for s in (self.keys.ksk, self.keys.zsk))

    def checks(self):
        signed = self.signed
        if signed and isinstance(self.signer, TerndSigner):
            self.check("keys: ternctl dnssec ds %s (online) = dnssec-dsfromkey -2 KSK" % ZONE,
                       self.check_online_ds)
        if signed:
            self.check("DNSKEY: the key files', DS of the served KSK", self.check_dnskey)
        for case in self.cases:
            if case.title == "DNSKEY":
                if not signed:
                    continue
                case = case._replace(want=lambda c, s: ([], Exact(self.dnskeys())))
            self.check("unbound x%d: %s (%s %s)" % (len(self.unbounds), case.title,
                                                    case.qname, case.qtype),
                       lambda case=case: self.check_unbounds(case))
        if signed and self.full:
            self.check("delv: sample fully validated", self.check_delv)
            self.check("negative: wrong DS, unbound SERVFAIL", self.check_bad_unbound)
            self.check("negative: wrong DS, delv broken chain", self.check_bad_delv)

    def check_online_ds(self):
        expect(ds_parts(self.anchor) == ds_parts(self.keys.ds), "ternd's DS %s (the validators' "
               "trust anchor) is not dnssec-dsfromkey's %s" % (self.anchor, self.keys.ds))

    def check_dnskey(self):
        q = dns.message.make_query(ZONE, "DNSKEY", want_dnssec=True, payload=1232)
        r = dns.query.tcp(q, LOOPBACK, port=self.signer.port, timeout=TIMEOUT)
        rs = r.get_rrset(r.answer, dns.name.from_text(ZONE), dns.rdataclass.IN,
                         dns.rdatatype.DNSKEY)
        expect(rs is not None, "the signer answers no DNSKEY RRset: %s" % r)
        expect(rrset_texts(rs) == self.dnskeys(), "the signer's DNSKEY RRset %s is not the key "
               "files' %s" % (rrset_texts(rs), self.dnskeys()))
        ksks = [k for k in rs if k.flags & 1]  # SEP bit
        expect(len(ksks) == 1, "%d KSKs (SEP) in %s" % (len(ksks), rrset_texts(rs)))
        ds = dns.dnssec.make_ds(ZONE, ksks[0], "SHA256")
        tag, alg, dtype, digest = ds_parts(self.anchor)
        expect((ds.key_tag, ds.algorithm, ds.digest_type, ds.digest.hex().upper()) ==
               (tag, alg, dtype, digest), "DS of the served KSK %s, the validators have %s"
               % (ds.to_text(), self.anchor))

    def check_unbounds(self, case):
        seen = set()
        for c, u in self.unbounds:
            what = "%s %s from %s (%s)" % (case.qname, case.qtype, c.addr, c.label)
            r = u.ask(case.qname, case.qtype)
            want = case.want(c, self.steered) if case.want else None
            note = check_case(case, r, want, self.signed, what)
            if note:
                seen.add(note)
        if seen:
            print("  %s: %s %s answered %s" % (self.label, case.qname, case.qtype,
                                               " / ".join(sorted(seen))))

    def check_delv(self):
        anchors = os.path.join(self.work, "anchors-%s.conf" % self.label)
        write_anchors(anchors, self.anchor)
        au = CLIENTS[0]
        # (name, type, source client or None for 127.0.0.1 (unknown), tcp, want addresses or
        # None for a negative answer)
        sample = [(ZONE, "SOA", None, False, None), ("plain." + ZONE, "A", None, False, "plain"),
                  ("chain." + ZONE, "A", None, True, "plain"),
                  ("x.wild." + ZONE, "A", None, False, "*.wild"),
                  ("country." + ZONE, "A", au, False, "country"),
                  ("nope." + ZONE, "A", None, False, None),
                  ("plain." + ZONE, "AAAA", None, False, None)]
        unknown = Client("--", LOOPBACK, None, None)
        for name, rtype, client, tcp, label in sample:
            out, err = delv(self.signer.port, anchors, name, rtype,
                            source=client.addr if client else None, tcp=tcp)
            what = "delv %s %s%s%s" % (name, rtype, " -b %s" % client.addr if client else "",
                                        " +tcp" if tcp else "")
            first = out.splitlines()[0] if out.strip() else ""
            negative = rtype == "AAAA" or name.startswith("nope.")
            if negative:
                expect(first == "; negative response, fully validated",
                       "%s: %r, want '; negative response, fully validated'\n%s%s"
                       % (what, first, out, err))
                continue
            expect(first == "; fully validated", "%s: %r, want '; fully validated'\n%s%s"
                   % (what, first, out, err))
            if label is None:
                continue
            got = sorted(m.group(1) for m in re.finditer(
                r"^%s\s+\d+\s+IN\s+A\s+(\S+)$" % re.escape(
                    "plain." + ZONE if name.startswith("chain.") else name), out, re.M))
            want = want_a(label, client or unknown, self.steered)
            ok = (got == sorted(want.values) if isinstance(want, Exact)
                  else len(got) == 1 and got[0] in want.values)
            expect(ok, "%s: A %s, want %s\n%s" % (what, got, want, out))

    def check_bad_unbound(self):
        for name, rtype in (("plain." + ZONE, "A"), (ZONE, "SOA")):
            r = self.bad.ask(name, rtype)
            expect(r.rcode() == dns.rcode.SERVFAIL and not r.answer,
                   "%s %s with a wrong DS: %s, want SERVFAIL" % (name, rtype,
                                                              dns.rcode.to_text(r.rcode())))
        deadline = time.monotonic() + 3
        while "validation failure" not in self.bad.log_text(100000):
            expect(time.monotonic() < deadline, "SERVFAIL, but no validation failure in the "
                   "log of unbound %s:\n%s" % (self.bad.name, self.bad.log_text()))
            time.sleep(0.1)

    def check_bad_delv(self):
        anchors = os.path.join(self.work, "anchors-%s-bad.conf" % self.label)
        write_anchors(anchors, self.bad_keys.ds)
        out, err = delv(self.signer.port, anchors, "plain." + ZONE, "A")
        expect("fully validated" not in out and "broken trust chain" in err,
               "delv with a wrong DS: %r %r, want a broken trust chain" % (out, err))


# ---- ternd asked directly --------------------------------------------------------------------

DNSSEC_TYPES = {dns.rdatatype.RRSIG, dns.rdatatype.NSEC, dns.rdatatype.NSEC3}
NXNAME = 128  # RFC 9824: the compact-denial NSEC of a name that does not exist


def query(port, name, rtype, do=True, edns=0, payload=1232, tcp=False, source=None):
    """One query to the signer itself (edns None: no OPT record at all)."""
    q = dns.message.make_query(name, rtype, use_edns=edns if edns is not None else False,
                               want_dnssec=do, payload=payload if edns is not None else None)
    try:
        if tcp:
            return dns.query.tcp(q, LOOPBACK, port=port, timeout=TIMEOUT, source=source)
        return dns.query.udp(q, LOOPBACK, port=port, timeout=TIMEOUT, source=source)
    except dns.exception.Timeout:
        raise Failure("%s %s: no answer from the signer within %.0f s" % (name, rtype, TIMEOUT))


def sections(r):
    return list(r.answer) + list(r.authority) + list(r.additional)


def nsec_types(rd):
    """The types in an NSEC rdata's bitmap."""
    types = set()
    for window, bitmap in rd.windows:
        for i, byte in enumerate(bitmap):
            for bit in range(8):
                if byte & (0x80 >> bit):
                    types.add(window * 256 + i * 8 + bit)
    return types


def dnskey_rrset(keys):
    return dns.rrset.from_rdata(ZONE, 3600, *(key_dnskey(s) for s in (keys.ksk, keys.zsk)))


def validate_section(rrsets, keys, what):
    """Every RRset (but the RRSIGs) of rrsets has an RRSIG over it that verifies with the key
    files' DNSKEYs (dnspython's own validation, beside the validators')."""
    zone = dns.name.from_text(ZONE)
    for rs in rrsets:
        if rs.rdtype == dns.rdatatype.RRSIG:
            continue
        sigs = [x for x in rrsets if x.rdtype == dns.rdatatype.RRSIG and x.covers == rs.rdtype
                and x.name == rs.name]
        expect(sigs, "%s: no RRSIG over %s %s" % (what, rs.name,
                                                 dns.rdatatype.to_text(rs.rdtype)))
        try:
            dns.dnssec.validate(rs, sigs[0], {zone: dnskey_rrset(keys)})
        except dns.dnssec.ValidationFailure as e:
            raise Failure("%s: the RRSIG over %s %s does not verify: %s"
                          % (what, rs.name, dns.rdatatype.to_text(rs.rdtype), e))


def a_of(r, name):
    rs = [x for x in r.answer if x.rdtype == dns.rdatatype.A and x.name ==
          dns.name.from_text(name)]
    return rrset_texts(rs[0]) if rs else None


def metric(body, name):
    m = re.search(r"^%s (\d+)$" % re.escape(name), body, re.M)
    expect(m, "/metrics has no %s" % name)
    return int(m.group(1))


class TerndRun(Run):
    """The main ternd run (algorithm 13, keys from ternctl): Run's checks, then ternd asked
    directly (the DO bit, compact denial, truncation), its metrics, a mismatched key pair at
    --check-config, and (last: it breaks a key file) a reload that must fail and keep serving."""

    def checks(self):
        super().checks()
        if not self.signed:
            return
        self.check("DO=0: no RRSIG/NSEC (A, NXDOMAIN, steered A; EDNS DO=0, no EDNS)",
                   self.check_do0)
        self.check("DO=1 NXDOMAIN: NOERROR, NSEC with NXNAME (128), verified", self.check_nxname)
        self.check("big TXT: DO=1 UDP 512 TC=1; TCP whole, signed; unbound AD=1",
                   self.check_big)
        self.check("metrics: tern_dnssec_cache_total hit > 0, signatures > 0",
                   self.check_metrics)
        self.check("check-config: .key/.private not a pair: exit 1 naming zone and file",
                   self.check_config_bad_pair)
        self.check("reload, a key file broken: ternctl reload fails naming it; old version "
                   "served, AD=1", self.check_reload_broken_key)

    def check_do0(self):
        au = CLIENTS[0]
        for name, rtype, source, rcode, want in (
                ("plain." + ZONE, "A", None, dns.rcode.NOERROR, a_records("plain")),
                ("nope." + ZONE, "A", None, dns.rcode.NXDOMAIN, None),
                ("country." + ZONE, "A", au.addr, dns.rcode.NOERROR,
                 want_a("country", au, True).values)):
            for edns in (0, None):
                what = "%s %s DO=0%s%s" % (name, rtype, "" if edns == 0 else " (no EDNS)",
                                           " from %s" % source if source else "")
                r = query(self.signer.port, name, rtype, do=False, edns=edns, source=source)
                expect(r.rcode() == rcode, "%s: %s, want %s" % (what, dns.rcode.to_text(
                    r.rcode()), dns.rcode.to_text(rcode)))
                extra = [x.to_text() for x in sections(r) if x.rdtype in DNSSEC_TYPES]
                expect(not extra, "%s: DNSSEC records in the response: %s" % (what, extra))
                expect(not r.flags & dns.flags.AD, "%s: AD set" % what)
                if want:
                    expect(a_of(r, name) == sorted(want), "%s: A %s, want %s"
                           % (what, a_of(r, name), sorted(want)))

    def check_nxname(self):
        for name in ("nope." + ZONE, "x.plain." + ZONE):
            what = "%s A DO=1" % name
            r = query(self.signer.port, name, "A")
            expect(r.rcode() == dns.rcode.NOERROR and not r.answer, "%s: %s %s, want NOERROR "
                   "and no answer (compact denial)" % (what, dns.rcode.to_text(r.rcode()),
                                                       [x.to_text() for x in r.answer]))
            nsec = [x for x in r.authority if x.rdtype == dns.rdatatype.NSEC]
            expect(len(nsec) == 1 and nsec[0].name == dns.name.from_text(name),
                   "%s: want one NSEC at the name, authority %s"
                   % (what, [x.to_text() for x in r.authority]))
            types = nsec_types(nsec[0][0])
            expect(NXNAME in types, "%s: the NSEC's bitmap %s lacks NXNAME (128)"
                   % (what, sorted(types)))
            expect(dns.rdatatype.A not in types, "%s: the NSEC says A exists: %s"
                   % (what, nsec[0].to_text()))
            validate_section(list(r.authority), self.keys, what)

    def check_big(self):
        name = "big." + ZONE
        want = sorted('"%s"' % rec["text"] for rec in RECORDS["big"]["txt"]["records"])
        r = query(self.signer.port, name, "TXT", payload=512)
        expect(r.flags & dns.flags.TC, "%s TXT DO=1, payload 512, UDP: TC=0 (%d bytes), want "
               "TC=1" % (name, len(r.to_wire())))
        r = query(self.signer.port, name, "TXT", payload=512, tcp=True)
        size = len(r.to_wire())
        expect(not r.flags & dns.flags.TC and size > 512, "%s TXT over TCP: TC=%d, %d bytes"
               % (name, bool(r.flags & dns.flags.TC), size))
        rs = r.get_rrset(r.answer, dns.name.from_text(name), dns.rdataclass.IN,
                         dns.rdatatype.TXT)
        expect(rs is not None and rrset_texts(rs) == want, "%s TXT over TCP: %s, want the %d "
               "strings" % (name, rrset_texts(rs) if rs else None, len(want)))
        validate_section(list(r.answer), self.keys, "%s TXT over TCP" % name)
        # a validator gets it too (its UDP answer is truncated: it asks again over TCP)
        c, u = self.unbounds[0]
        r = u.ask(name, "TXT")
        expect(r.flags & dns.flags.AD and r.rcode() == dns.rcode.NOERROR,
               "%s TXT from unbound %s: %s AD=%d" % (name, c.addr, dns.rcode.to_text(r.rcode()),
                                                     bool(r.flags & dns.flags.AD)))
        rs = r.get_rrset(r.answer, dns.name.from_text(name), dns.rdataclass.IN,
                         dns.rdatatype.TXT)
        expect(rs is not None and rrset_texts(rs) == want, "%s TXT from unbound: %s"
               % (name, rrset_texts(rs) if rs else None))

    def scrape(self):
        url = "http://%s:%d/metrics" % (LOOPBACK, self.signer.metrics_port)
        deadline = time.monotonic() + CTL_WAIT
        while True:
            try:
                with urllib.request.urlopen(url, timeout=TIMEOUT) as f:
                    return f.read().decode("utf-8", "replace")
            except OSError as e:
                expect(time.monotonic() < deadline, "%s: %s" % (url, e))
                time.sleep(0.1)

    def check_metrics(self):
        hit = 'tern_dnssec_cache_total{result="hit"}'
        before = metric(self.scrape(), hit)
        # a steered answer, signed per query: the first may be signed (a miss), the rest are hits
        gb = CLIENTS[1]
        n = 5
        for _ in range(n):
            r = query(self.signer.port, "country." + ZONE, "A", source=gb.addr)
            expect(a_of(r, "country." + ZONE) == want_a("country", gb, True).values,
                   "country A from %s: %s" % (gb.addr, a_of(r, "country." + ZONE)))
            validate_section(list(r.answer), self.keys, "country A DO=1 from %s" % gb.addr)
        body = self.scrape()
        after, sigs = metric(body, hit), metric(body, "tern_dnssec_signatures_total")
        print("  %s: %s %d -> %d over %d steered queries, tern_dnssec_signatures_total %d"
              % (self.label, hit, before, after, n, sigs))
        expect(after > 0 and after - before >= n - 1, "%s %d -> %d after %d repeated steered "
               "queries" % (hit, before, after, n))
        expect(sigs > 0, "tern_dnssec_signatures_total %d" % sigs)

    def check_config(self, directory, zsk):
        """ternd -c CONF --check-config with the zone signed by the KSK and zsk: the result."""
        conf = os.path.join(directory, "ternd.yaml")
        with open(conf, "w") as f:
            f.write('listen: ["%s:%d"]\n%szones:\n  - origin: "%s"\n    file: "%s"\n'
                    '    dnssec: {keys: ["%s", "%s"]}\n'
                    % (LOOPBACK, servers.free_port(),
                       "allow_root: true\n" if os.geteuid() == 0 else "", ZONE,
                       self.signer.zones[0][1], self.keys.ksk, zsk))
        try:
            return subprocess.run([self.signer.binary, "-c", conf, "--check-config"],
                                  capture_output=True, text=True, timeout=TOOL_TIMEOUT,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise Failure("ternd --check-config did not exit within %d s" % TOOL_TIMEOUT)

    def check_config_bad_pair(self):
        d = os.path.join(self.work, "bad-pair")
        os.makedirs(d, exist_ok=True)
        out = self.check_config(d, self.keys.zsk)
        expect(out.returncode == 0, "the good keys: ternd --check-config exit %d\n%s%s"
               % (out.returncode, out.stdout, out.stderr))
        # the ZSK's .key beside the .private of another key, renamed to match
        stem = os.path.join(d, os.path.basename(self.keys.zsk))
        shutil.copy(self.keys.zsk + ".key", stem + ".key")
        shutil.copy(self.bad_keys.zsk + ".private", stem + ".private")
        out = self.check_config(d, stem)
        msg = out.stdout + out.stderr
        expect(out.returncode != 0, "a .key/.private that are no pair: ternd --check-config "
               "exit 0\n%s" % msg)
        expect(ZONE.rstrip(".") in msg and os.path.basename(stem) in msg,
               "ternd --check-config (exit %d) names not the zone %s and the key file %s:\n%s"
               % (out.returncode, ZONE, stem, msg))
        print("  %s: --check-config says: %s" % (self.label, msg.strip().splitlines()[-1]))

    def check_reload_broken_key(self):
        # the ZSK's .private replaced (by rename) with one whose private key is cut short
        priv = self.keys.zsk + ".private"
        with open(priv) as f:
            text = f.read()
        broken = re.sub(r"^(PrivateKey:\s*)(\S+)$", lambda m: m.group(1) + m.group(2)[:12],
                        text, flags=re.M)
        expect(broken != text, "%s has no PrivateKey line:\n%s" % (priv, text))
        servers.write_atomic(priv, broken)
        out = self.signer.ctl("reload")
        msg = out.stdout + out.stderr
        expect(out.returncode == 1, "ternctl reload with a broken key file: exit %d, want 1\n%s"
               % (out.returncode, msg))
        expect(os.path.basename(self.keys.zsk) in msg and ZONE.rstrip(".") in msg,
               "ternctl reload's error names not the zone and the key file %s:\n%s"
               % (priv, msg))
        print("  %s: ternctl reload says: %s" % (self.label, " | ".join(
            ln for ln in msg.splitlines() if os.path.basename(self.keys.zsk) in ln)))
        expect(self.signer.proc.poll() is None, "ternd exited after the failed reload")
        # the old signed version: the same DNSKEYs, a name no validator asked yet validates,
        # and steered answers are still signed per query with the old ZSK
        r = query(self.signer.port, ZONE, "DNSKEY", tcp=True)
        rs = r.get_rrset(r.answer, dns.name.from_text(ZONE), dns.rdataclass.IN,
                         dns.rdatatype.DNSKEY)
        expect(rs is not None and rrset_texts(rs) == self.dnskeys(), "DNSKEY after the failed "
               "reload: %s" % (rrset_texts(rs) if rs else None))
        for c, u in self.unbounds:
            r = u.ask("mail." + ZONE, "A")
            expect(r.flags & dns.flags.AD and a_of(r, "mail." + ZONE) == a_records("mail"),
                   "mail A from unbound %s after the failed reload: %s AD=%d %s"
                   % (c.addr, dns.rcode.to_text(r.rcode()), bool(r.flags & dns.flags.AD),
                      a_of(r, "mail." + ZONE)))
        unknown = CLIENTS[2]
        r = query(self.signer.port, "asn." + ZONE, "A", source=unknown.addr)
        expect(a_of(r, "asn." + ZONE) == want_a("asn", unknown, True).values,
               "asn A from %s: %s" % (unknown.addr, a_of(r, "asn." + ZONE)))
        validate_section(list(r.answer), self.keys, "asn A from %s after the failed reload"
                         % unknown.addr)


class RedisRun(Run):
    """ternd serving the zone from a real redis-server in redins' layout: the labels' hash, a
    config with "dnssec": true, and the four key strings (a KSK and a ZSK from dnssec-keygen,
    two stored with real newlines, two with backslash-n); one Unbound (AU) with the DS ternd
    gives. Then a label changed, then a zsk:priv that is another key's."""

    def __init__(self, label, signer, redis, keys, other, work):
        super().__init__(label, signer, keys, None, True, True, work, clients=CLIENTS[:1],
                         cases=SAMPLE, full=False)
        self.redis = redis
        self.other = other  # the stem of a key that is neither of the zone's

    def key(self, suffix=""):
        return "redins:zones:%s%s" % (ZONE, suffix)  # the member as written: "sec.test."

    def start(self):
        self.redis.start()
        r = self.redis
        r.cmd("SET", self.key(":config"), json.dumps({"soa": SOA, "dnssec": True}))
        for label, value in RECORDS.items():
            r.cmd("HSET", self.key(), label, json.dumps(value))
        texts = {}
        for role, stem in (("zsk", self.keys.zsk), ("ksk", self.keys.ksk)):
            for part, ext in (("pub", ".key"), ("priv", ".private")):
                with open(stem + ext) as f:
                    texts[role, part] = f.read()
        # redins takes both: real newlines, or the two characters backslash-n
        for (role, part), text in texts.items():
            escaped = (role, part) in (("zsk", "priv"), ("ksk", "pub"))
            r.cmd("SET", self.key(":%s:%s" % (role, part)),
                  text.replace("\n", "\\n") if escaped else text)
        r.cmd("SADD", "redins:zones", ZONE)
        super().start()

    def stop(self):
        super().stop()
        self.redis.stop()

    def checks(self):
        super().checks()
        self.check("HSET plain: served signed and validated (AD=1) within %.0f s" % LIVE_WAIT,
                   self.check_live_change)
        self.check("zsk:priv of another key: rejected, logged (zone, key); previous version "
                   "served, AD=1", self.check_bad_priv)

    def wait_plain(self, want):
        """Seconds until ternd answers plain A (DO=1) with want, signed; Failure after
        LIVE_WAIT."""
        start = time.monotonic()
        while True:
            r = query(self.signer.port, "plain." + ZONE, "A")
            if a_of(r, "plain." + ZONE) == want:
                validate_section(list(r.answer), self.keys, "plain A (DO=1) from ternd")
                return time.monotonic() - start
            expect(time.monotonic() - start < LIVE_WAIT, "plain A still %s after %.0f s, want "
                   "%s" % (a_of(r, "plain." + ZONE), LIVE_WAIT, want))
            time.sleep(0.05)

    def check_live_change(self):
        self.redis.cmd("HSET", self.key(), "plain",
                       json.dumps({"a": {"ttl": 60, "records": [_ip("192.0.2.150")]}}))
        t = self.wait_plain(["192.0.2.150"])
        print("  %s: HSET plain served, signed, after %.2f s" % (self.label, t))
        c, u = self.unbounds[0]  # it never asked plain A: nothing cached
        r = u.ask("plain." + ZONE, "A")
        expect(r.flags & dns.flags.AD and a_of(r, "plain." + ZONE) == ["192.0.2.150"],
               "plain A from unbound %s after HSET: %s AD=%d %s"
               % (c.addr, dns.rcode.to_text(r.rcode()), bool(r.flags & dns.flags.AD),
                  a_of(r, "plain." + ZONE)))

    def check_bad_priv(self):
        seen = os.path.getsize(self.signer.log_path)  # only what is logged from now on counts
        with open(self.other + ".private") as f:
            self.redis.cmd("SET", self.key(":zsk:priv"), f.read())
        # a change that the rejected version holds: it must not be served
        self.redis.cmd("HSET", self.key(), "plain",
                       json.dumps({"a": {"ttl": 60, "records": [_ip("192.0.2.151")]}}))
        deadline = time.monotonic() + LIVE_WAIT
        while True:
            with open(self.signer.log_path, "rb") as f:
                f.seek(seen)
                new = f.read().decode("utf-8", "replace")
            lines = [ln for ln in new.splitlines() if self.key(":zsk") in ln]
            if lines:
                break
            expect(time.monotonic() < deadline, "no log line naming %s within %.0f s:\n%s"
                   % (self.key(":zsk:priv"), LIVE_WAIT, self.signer.log_text()))
            time.sleep(0.05)
        print("  %s: ternd logs: %s" % (self.label, lines[0]))
        # the key as "<zone>:zsk:{pub,priv} (private key)": both strings named, the private one
        # blamed (dnssec_key.h's "WHERE (private key)")
        expect(ZONE.rstrip(".") in lines[0].replace(self.key(":zsk"), "") and
               self.key(":zsk:{pub,priv} (private key)") in lines[0],
               "the log line names not the zone and the zsk:priv key: %s" % lines[0])
        for _ in range(10):  # the previous version, for a second
            r = query(self.signer.port, "plain." + ZONE, "A")
            expect(a_of(r, "plain." + ZONE) == ["192.0.2.150"], "plain A %s after a bad "
                   "zsk:priv, want the previous version's 192.0.2.150"
                   % a_of(r, "plain." + ZONE))
            validate_section(list(r.answer), self.keys, "plain A (DO=1) after a bad zsk:priv")
            time.sleep(0.1)
        c, u = self.unbounds[0]
        for label in ("mail", "asn"):  # names it never asked, one steered (per-query signed)
            r = u.ask(label + "." + ZONE, "A")
            want = want_a(label, c, True).values
            expect(r.flags & dns.flags.AD and a_of(r, label + "." + ZONE) == sorted(want),
                   "%s A from unbound %s after a bad zsk:priv: %s AD=%d %s, want %s"
                   % (label, c.addr, dns.rcode.to_text(r.rcode()), bool(r.flags & dns.flags.AD),
                      a_of(r, label + "." + ZONE), want))


# ---- main ------------------------------------------------------------------------------------

def missing_programs(signer, unsigned):
    need = {"unbound": "unbound", "dnssec-keygen": "bind9-utils",
            "dnssec-dsfromkey": "bind9-utils"}
    if not unsigned:
        need["delv"] = "bind9-dnsutils"
    if signer == "knot":
        need.update({"knotd": "knot", "keymgr": "knot"})
    else:
        need["perl"] = "perl (and libmaxmind-db-writer-perl)"
        if not unsigned:
            need["redis-server"] = "redis-server"
    return ["%s (apt-get install %s)" % (p, pkg) for p, pkg in need.items()
            if not find_program(p)]


def ternd_fixtures(args, work):
    """The geoip database and ASN table that steer the clients (ternd mode)."""
    data = os.path.join(work, "geo")
    os.makedirs(data)
    mmdb = os.path.join(data, "clients.mmdb")
    subprocess.run(["perl", CLIENTS_MMDB, mmdb], check=True, timeout=TOOL_TIMEOUT)
    csv = os.path.join(data, "asn.csv")
    with open(csv, "w") as f:
        f.write(ASN_CSV)
    table = os.path.join(data, "asn.bin")
    subprocess.run([args.ternctl, "asn", "compile", "-o", table, csv], check=True,
                   timeout=TOOL_TIMEOUT, stdout=subprocess.DEVNULL)
    return mmdb, table


def print_keys(label, keys):
    print("  %s keys: KSK %s, ZSK %s; DS %s" % (label, os.path.basename(keys.ksk),
                                                os.path.basename(keys.zsk), keys.ds))


def ternd_runs(args, work, signed):
    """ternd mode: the main run (algorithm 13, every client and case, the direct checks), then
    (signed) a short run for algorithms 15 and 8 each and one for a zone in Redis."""
    zonefile = os.path.join(work, "sec.test.json")
    with open(zonefile, "w") as f:
        json.dump(zone_json(dnssec=signed), f, indent=1)
    mmdb, table = ternd_fixtures(args, work)
    keys = ternctl_keys(args.ternctl, os.path.join(work, "keys"), ZONE, 13)
    # a KSK the zone is not signed with: its DS must not validate anything
    bad_keys = ternctl_keys(args.ternctl, os.path.join(work, "other-keys"), ZONE, 13)
    print_keys("ternd", keys)
    signer = TerndSigner(work, zonefile, keys, args.ternd, mmdb, table, sign=signed,
                         ternctl=args.ternctl, metrics_port=servers.free_port())
    runs = [TerndRun("ternd", signer, keys, bad_keys, True, signed, work, cases=TERND_CASES)]
    if not signed:
        return runs
    for alg, bits in ((15, None), (8, 2048)):
        label = "ternd alg %d" % alg
        k = ternctl_keys(args.ternctl, os.path.join(work, "keys-%d" % alg), ZONE, alg, bits)
        print_keys(label, k)
        signer = TerndSigner(work, zonefile, k, args.ternd, mmdb, table,
                             name="ternd-alg%d" % alg, ternctl=args.ternctl)
        runs.append(Run(label, signer, k, None, True, True, work, clients=CLIENTS[:1],
                        cases=SAMPLE, full=False))
    # the Redis zone's keys are dnssec-keygen's, as redins users make them
    rkeys = make_keys(os.path.join(work, "redis-keys"), ZONE, ALG)
    other = keygen(os.path.join(work, "redis-keys"), ZONE, ALG, False)
    print_keys("ternd redis", rkeys)
    redis = servers.Redis(work)
    signer = TerndSigner(work, None, rkeys, args.ternd, mmdb, table, name="ternd-redis",
                         ternctl=args.ternctl, redis_port=redis.port)
    runs.append(RedisRun("ternd redis", signer, redis, rkeys, other, work))
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--ternctl", default=os.environ.get("TERNCTL"))
    ap.add_argument("--signer", choices=["knot", "ternd"], default="knot",
                    help="the server under test (default knot, the stand-in)")
    ap.add_argument("--knot-mode", choices=["zone", "online", "both"], default="both",
                    help="knot: signed at load, mod-onlinesign, or both (default)")
    ap.add_argument("--unsigned", action="store_true",
                    help="serve the zone unsigned, validators without a trust anchor (AD=0)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    if args.signer == "ternd" and (not args.ternd or not args.ternctl):
        ap.error("--signer ternd needs --ternd and --ternctl")
    missing = missing_programs(args.signer, args.unsigned)
    if missing:
        print("test_dnssec.py: missing programs: %s" % ", ".join(missing))
        return 1

    work = tempfile.mkdtemp(prefix="tern-dnssec-")
    results = []
    try:
        signed = not args.unsigned
        runs = []
        if args.signer == "knot":
            keys = make_keys(os.path.join(work, "keys"), ZONE, ALG)
            # a KSK the zone is not signed with: its DS must not validate anything
            bad_keys = make_keys(os.path.join(work, "other-keys"), ZONE, ALG)
            print_keys("knot", keys)
            zonefile = os.path.join(work, "sec.test.zone")
            with open(zonefile, "w") as f:
                f.write(zone_rfc1035())
            modes = ["zone", "online"] if args.knot_mode == "both" else [args.knot_mode]
            for mode in modes:
                signer = KnotSigner(work, zonefile, keys, online=(mode == "online"),
                                    sign=signed)
                runs.append(Run(signer.name, signer, keys, bad_keys, False, signed, work))
        else:
            runs = ternd_runs(args, work, signed)
        for run in runs:
            results += run.run()
        return report(results, width=96)
    finally:
        if args.keep:
            print("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
