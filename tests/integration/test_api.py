#!/usr/bin/python3
"""The HTTP API of PowerDNS' zone subset (src/api) end to end: a real ternd, Python's urllib as
the client, dnspython to read every change back from the DNS side.

One ternd serves:
  a.test    a master file; notify: a UDP socket of this test (so PUT notify is seen arriving)
  n.test    a master file without notify
  s.test    a secondary zone (its primary is down)
  geo.test  a redins JSON zone with steered RRsets (weighted, round robin)
  d.test    a master file tern signs (keys from ternctl dnssec keygen)
and the API on loopback with four keys: ops (every zone), ro (read_only), one (a.test only) and
small bodies (max_body_bytes 4096). A second ternd serves the API over TLS with a self-signed
certificate made here with the openssl CLI.

The shapes are compared with PowerDNS' (pdns/ws-api.cc getServerDetail(), pdns/ws-auth.cc
getZoneInfo() and fillZone(), pdns/webserver.cc setErrorResult()): the same field names with
the same JSON types.

    test_api.py --ternd build/ternd --ternctl build/ternctl
"""

import argparse
import json
import os
import shutil
import socket
import ssl
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import dns.message
import dns.opcode
import dns.query
import dns.rcode
import dns.rdatatype

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, Failure, expect, find_program, free_port, run_check  # noqa: E402

OPS = "ops-0123456789abcdef"
RO = "ro-0123456789abcdef"
ONE = "one-0123456789abcdef"
TIMEOUT = 5.0
ZONES = "/api/v1/servers/localhost/zones"

# pdns/ws-api.cc getServerDetail() (autoprimaries_url aside: tern has no autoprimaries)
SERVER_SHAPE = {"type": str, "id": str, "url": str, "daemon_type": str, "version": str,
                "config_url": str, "zones_url": str}
# pdns/ws-auth.cc getZoneInfo()
ZONE_SHAPE = {"id": str, "url": str, "name": str, "kind": str, "catalog": str, "account": str,
              "masters": list, "serial": int, "notified_serial": int, "edited_serial": int,
              "last_check": int, "dnssec": bool}
# ... and what fillZone() adds
DETAIL_SHAPE = dict(ZONE_SHAPE, soa_edit_api=str, soa_edit=str, nsec3param=str,
                    nsec3narrow=bool, api_rectify=bool, master_tsig_key_ids=list,
                    slave_tsig_key_ids=list, rrsets=list, record_count=int)
RRSET_SHAPE = {"name": str, "type": str, "ttl": int, "records": list, "comments": list}
RECORD_SHAPE = {"content": str, "disabled": bool}


def zone_text(origin, serial):
    return f"""$ORIGIN {origin}.
@ 3600 IN SOA ns1 hostmaster {serial} 3600 600 86400 300
@ 3600 IN NS ns1
ns1 3600 IN A 192.0.2.1
www 300 IN A 192.0.2.10
www 300 IN A 192.0.2.11
www 300 IN TXT "hello"
"""


def geo_json():
    soa = {"ttl": 300, "ns": "ns1.geo.test.", "MBox": "hostmaster.geo.test.", "refresh": 3600,
           "retry": 600, "expire": 86400, "minttl": 60, "serial": 7}
    return {"config": {"soa": soa}, "records": {
        "@": {"ns": {"ttl": 3600, "records": [{"host": "ns1.geo.test."}]}},
        "ns1": {"a": {"ttl": 3600, "records": [{"ip": "192.0.2.53"}]}},
        "wrr": {"a": {"ttl": 60, "filter": {"count": "single", "order": "weighted"},
                      "records": [{"ip": "192.0.2.31", "weight": 1},
                                  {"ip": "192.0.2.32", "weight": 3}]}},
        "rr": {"a": {"ttl": 60, "filter": {"count": "multi", "order": "rr"},
                     "records": [{"ip": "192.0.2.41"}, {"ip": "192.0.2.42"},
                                 {"ip": "192.0.2.43"}]}}}}


class Ternd(servers.Ternd):
    """servers.Ternd with zone entries of this test's own (notify, primary) after its list."""

    def __init__(self, workdir, binary, extra_yaml, zones_yaml, name="tern"):
        self.name = name
        self.zones_yaml = zones_yaml
        super().__init__(workdir, [], binary, extra_yaml=extra_yaml, workers=2)

    def command(self):
        argv = super().command()
        with open(os.path.join(self.dir, "ternd.yaml"), "a") as f:
            f.write(self.zones_yaml)
        return argv

    def log_has(self, text):
        return text in self.log_text(limit=400000)

    def kill9(self):
        self.proc.kill()
        self.proc.wait(timeout=5)
        self._log.close()
        self._log = None


class Api:
    """HTTP to the API: (status, headers, body bytes) for every status, errors included."""

    def __init__(self, base, ctx=None):
        self.base = base
        self.ctx = ctx

    def call(self, method, path, key=OPS, body=None, headers=None):
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if key is not None:
            req.add_header("X-API-Key", key)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT, context=self.ctx) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def json(self, method, path, want, key=OPS, body=None):
        status, headers, raw = self.call(method, path, key, body)
        expect(status == want, "%s %s: status %d, want %d: %r" % (method, path, status, want, raw))
        if status == 204:
            expect(raw == b"" and headers.get("Content-Type") is None,
                   "204 with a body or a Content-Type: %r %r" % (raw, headers))
            return None
        expect(headers.get("Content-Type", "").startswith("application/json"),
               "%s %s: Content-Type %r" % (method, path, headers.get("Content-Type")))
        return json.loads(raw)

    def error(self, method, path, want, key=OPS, body=None, text=None):
        """An error answer: PowerDNS' {"error": str} with want, containing text if given."""
        doc = self.json(method, path, want, key, body)
        expect(isinstance(doc, dict) and list(doc) == ["error"] and isinstance(doc["error"], str),
               "%s %s: not {\"error\": str}: %r" % (method, path, doc))
        if text is not None:
            expect(text in doc["error"], "%s %s: error %r lacks %r" % (method, path, doc["error"],
                                                                       text))
        return doc["error"]


def shape(obj, fields, what):
    expect(isinstance(obj, dict), "%s: not an object: %r" % (what, obj))
    for k, t in fields.items():
        expect(k in obj, "%s: no %r: %r" % (what, k, obj))
        v = obj[k]
        ok = isinstance(v, t) and not (t is int and isinstance(v, bool))
        expect(ok, "%s: %r is %r, want %s" % (what, k, v, t.__name__))


def rrset_of(doc, name, rtype):
    for s in doc["rrsets"]:
        if s["name"] == name and s["type"] == rtype:
            return s
    return None


def contents(doc, name, rtype):
    s = rrset_of(doc, name, rtype)
    return sorted(r["content"] for r in s["records"]) if s else []


def ask(port, name, rtype):
    q = dns.message.make_query(name, rtype)
    return dns.query.udp(q, LOOPBACK, port=port, timeout=TIMEOUT)


def served(port, name, rtype):
    r = ask(port, name, rtype)
    return sorted(rd.to_text() for s in r.answer if s.rdtype == dns.rdatatype.from_text(rtype)
                  for rd in s)


def serial_of(port, origin):
    return ask(port, origin, "SOA").answer[0][0].serial


def replace(name, rtype, ttl, *values):
    return {"rrsets": [{"name": name, "type": rtype, "ttl": ttl, "changetype": "REPLACE",
                        "records": [{"content": v, "disabled": False} for v in values],
                        "comments": []}]}


def make_cert(d):
    cert, key = os.path.join(d, "api.pem"), os.path.join(d, "api.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1", "-addext",
                    "subjectAltName=IP:127.0.0.1"], check=True, timeout=60,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl", required=True)
    args = ap.parse_args()
    args.ternd = os.path.abspath(args.ternd)
    work = tempfile.mkdtemp(prefix="tern-api-")
    zdir = os.path.join(work, "zones")
    os.makedirs(zdir)
    paths = {}
    for z in ("a.test", "n.test", "d.test"):
        paths[z] = os.path.join(zdir, z + ".zone")
        servers.write_atomic(paths[z], zone_text(z, 1))
    kdir = os.path.join(work, "keys")
    os.makedirs(kdir)
    for _ in range(2):  # a KSK and a ZSK
        subprocess.run([args.ternctl, "dnssec", "keygen", "d.test", "-d", kdir], check=True,
                       timeout=60, capture_output=True)
    dkeys = sorted(os.path.join(kdir, f[:-4]) for f in os.listdir(kdir) if f.endswith(".key"))
    paths["geo.test"] = os.path.join(zdir, "geo.test.json")
    servers.write_atomic(paths["geo.test"], json.dumps(geo_json()))
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind((LOOPBACK, 0))
    listener.settimeout(TIMEOUT)
    nport = listener.getsockname()[1]
    dead = free_port()
    api_port = free_port()
    zones_yaml = f"""  - origin: a.test
    file: "{paths['a.test']}"
    notify: ["{LOOPBACK}@{nport}"]
  - origin: n.test
    file: "{paths['n.test']}"
  - origin: s.test
    primary: "{LOOPBACK}@{dead}"
  - origin: geo.test
    file: "{paths['geo.test']}"
  - origin: d.test
    file: "{paths['d.test']}"
    dnssec: {{keys: [{", ".join(dkeys)}]}}
"""
    api_yaml = f"""api:
  listen: "{LOOPBACK}:{api_port}"
  max_body_bytes: 4096
  keys:
    - {{name: ops, key: "{OPS}"}}
    - {{name: ro, key: "{RO}", read_only: true}}
    - {{name: one, key: "{ONE}", zones: [A.test.]}}
"""
    tern = Ternd(work, args.ternd, api_yaml, zones_yaml)
    tls = None
    results = []
    api = Api("http://%s:%d" % (LOOPBACK, api_port))
    try:
        tern.start("a.test")
        port = tern.port
        wait_api(api)

        def servers_shape():
            doc = api.json("GET", "/api", 200)
            expect(doc == [{"url": "/api/v1", "version": 1}], "/api: %r" % doc)
            doc = api.json("GET", "/api/v1", 200)
            # pdns/ws-api.cc apiDiscovery() and apiDiscoveryV1()
            expect(doc == [{"server_url": "/api/v1/servers{/server}", "api_features": []}],
                   "/api/v1: %r" % doc)
            doc = api.json("GET", "/api/v1/servers", 200)
            expect(isinstance(doc, list) and len(doc) == 1, "servers: %r" % doc)
            shape(doc[0], SERVER_SHAPE, "servers[0]")
            doc = api.json("GET", "/api/v1/servers/localhost", 200)
            shape(doc, SERVER_SHAPE, "server")
            expect(doc["type"] == "Server" and doc["id"] == "localhost"
                   and doc["daemon_type"] == "authoritative"
                   and doc["url"] == "/api/v1/servers/localhost"
                   and doc["zones_url"] == "/api/v1/servers/localhost/zones{/zone}", repr(doc))

        def zones_list():
            doc = api.json("GET", ZONES, 200)
            byname = {z["name"]: z for z in doc}
            expect(set(byname) >= {"a.test.", "n.test.", "geo.test."}, "zones: %r" % list(byname))
            for z in doc:
                shape(z, ZONE_SHAPE, "zone " + z.get("name", "?"))
                expect("rrsets" not in z, "a listed zone has rrsets: %r" % z)
                expect(z["url"] == ZONES + "/" + z["id"], "url %r of id %r" % (z["url"], z["id"]))
            a = byname["a.test."]
            expect(a["id"] == "a.test." and a["kind"] == "Master" and a["serial"] >= 1, repr(a))
            expect(byname["n.test."]["kind"] == "Native", repr(byname["n.test."]))
            expect(byname["geo.test."]["kind"] == "Native", repr(byname["geo.test."]))
            if "s.test." in byname:
                s = byname["s.test."]
                expect(s["kind"] == "Slave" and s["masters"] == ["%s:%d" % (LOOPBACK, dead)],
                       repr(s))
            only = api.json("GET", ZONES + "?zone=n.test.", 200)
            expect([z["name"] for z in only] == ["n.test."], "?zone=: %r" % only)

        def zone_detail():
            doc = api.json("GET", ZONES + "/a.test.", 200)
            shape(doc, DETAIL_SHAPE, "a.test.")
            for s in doc["rrsets"]:
                shape(s, RRSET_SHAPE, "rrset")
                for r in s["records"]:
                    shape(r, RECORD_SHAPE, "record")
            expect(contents(doc, "www.a.test.", "A") == ["192.0.2.10", "192.0.2.11"], repr(doc))
            expect(contents(doc, "www.a.test.", "TXT") == ['"hello"'], repr(doc))
            expect(rrset_of(doc, "www.a.test.", "A")["ttl"] == 300, repr(doc))
            soa = contents(doc, "a.test.", "SOA")
            expect(len(soa) == 1 and soa[0].startswith("ns1.a.test. hostmaster.a.test. "), soa)
            expect(doc["record_count"] == 6, "record_count %r" % doc["record_count"])
            # the id without its final dot names the same zone (pdns apiZoneIdToName())
            expect(api.json("GET", ZONES + "/a.test", 200)["name"] == "a.test.", "no final dot")
            doc = api.json("GET", ZONES + "/a.test.?rrsets=false", 200)
            expect("rrsets" not in doc, "rrsets=false still lists them")
            doc = api.json("GET", ZONES + "/a.test.?rrset_name=www.a.test.&rrset_type=TXT", 200)
            expect([(s["name"], s["type"]) for s in doc["rrsets"]] == [("www.a.test.", "TXT")],
                   repr(doc["rrsets"]))
            api.error("GET", ZONES + "/a.test.?rrsets=maybe", 422, text="'rrsets'")

        def signed_zone():
            # the records tern's keys make are not rrsets (pdns keeps them out for the zones it
            # signs); the zone says it is signed
            doc = api.json("GET", ZONES + "/d.test.", 200)
            expect(doc["dnssec"] is True, "dnssec %r" % doc["dnssec"])
            types = sorted({s["type"] for s in doc["rrsets"]})
            expect(types == ["A", "NS", "SOA", "TXT"], "signed zone's rrsets: %r" % types)
            expect(doc["record_count"] == 6, "record_count %r" % doc["record_count"])
            r = ask(port, "d.test", "DNSKEY")
            expect(len(r.answer) >= 1, "d.test not signed: no DNSKEY served")
            status, _, raw = api.call("GET", ZONES + "/d.test./export")
            expect(status == 200 and b"RRSIG" not in raw and b"DNSKEY" not in raw, raw.decode())
            # a change of a signed zone: served signed at once (the zone is built and signed
            # again with its journal)
            api.json("PATCH", ZONES + "/d.test.", 204,
                     body=replace("patched.d.test.", "TXT", 60, '"signed change"'))
            q = dns.message.make_query("patched.d.test", "TXT", want_dnssec=True)
            r = dns.query.udp(q, LOOPBACK, port=port, timeout=5)
            types = {rr.rdtype for rr in r.answer}
            expect(dns.rdatatype.TXT in types and dns.rdatatype.RRSIG in types,
                   "patched.d.test: %s" % r)

        def export():
            status, headers, raw = api.call("GET", ZONES + "/a.test./export")
            expect(status == 200 and headers["Content-Type"].startswith("text/plain"),
                   "%d %r" % (status, headers["Content-Type"]))
            lines = raw.decode().splitlines()
            expect("www.a.test.\t300\tIN\tA\t192.0.2.10" in lines, "export: %r" % lines)
            expect(len(lines) == 6 and all(len(x.split("\t")) == 5 for x in lines), repr(lines))
            status, headers, raw = api.call("GET", ZONES + "/a.test./export",
                                            headers={"Accept": "application/json"})
            doc = json.loads(raw)
            expect(status == 200 and list(doc) == ["zone"] and "192.0.2.11" in doc["zone"],
                   repr(doc))

        def patch_served():
            before = serial_of(port, "a.test")
            api.json("PATCH", ZONES + "/a.test.", 204,
                     body=replace("www.a.test.", "A", 60, "192.0.2.20", "192.0.2.21"))
            # served when the 204 comes: no wait
            got = served(port, "www.a.test", "A")
            expect(got == ["192.0.2.20", "192.0.2.21"], "served %r" % got)
            expect(serial_of(port, "a.test") == before + 1, "serial not bumped once")
            body = {"rrsets": [
                {"name": "new.a.test.", "type": "MX", "ttl": 120, "changetype": "REPLACE",
                 "records": [{"content": "10 mx", "disabled": False},
                             {"content": "20 mx.example.", "disabled": False}]},
                {"name": "www.a.test.", "type": "TXT", "changetype": "DELETE"},
                {"name": "www.a.test.", "type": "AAAA", "ttl": 60, "changetype": "EXTEND",
                 "records": [{"content": "2001:db8::1"}]},
                {"name": "www.a.test.", "type": "A", "changetype": "PRUNE",
                 "records": [{"content": "192.0.2.21"}]}]}
            api.json("PATCH", ZONES + "/a.test.", 204, body=body)
            expect(served(port, "new.a.test", "MX") == ["10 mx.a.test.", "20 mx.example."],
                   "MX %r" % served(port, "new.a.test", "MX"))
            expect(served(port, "www.a.test", "TXT") == [], "TXT not deleted")
            expect(served(port, "www.a.test", "AAAA") == ["2001:db8::1"], "AAAA not extended")
            expect(served(port, "www.a.test", "A") == ["192.0.2.20"], "A not pruned")
            expect(serial_of(port, "a.test") == before + 2, "one serial per PATCH")
            doc = api.json("GET", ZONES + "/a.test.", 200)
            expect(contents(doc, "new.a.test.", "MX") == ["10 mx.a.test.", "20 mx.example."],
                   repr(doc["rrsets"]))
            # comments only: accepted and ignored, nothing changes
            api.json("PATCH", ZONES + "/a.test.", 204, body={"rrsets": [
                {"name": "www.a.test.", "type": "A", "changetype": "REPLACE",
                 "comments": [{"content": "x", "account": "y"}]}]})
            expect(serial_of(port, "a.test") == before + 2, "a comment changed the zone")
            expect(tern.log_has("by api key ops from 127.0.0.1"), "no audit line for the key")

        def errors():
            path = ZONES + "/a.test."
            api.error("PATCH", path, 422, body=b"{not json", text="JSON")
            api.error("PATCH", path, 422, body={"nothing": 1}, text="No rrsets given")
            api.error("GET", ZONES + "/nope.test.", 404, text="Not Found")
            api.error("PATCH", ZONES + "/nope.test.", 404, body=replace("x.nope.test.", "A", 1,
                                                                        "192.0.2.1"))
            bad = replace("www.a.test.", "A", 60, "192.0.2.1")
            bad["rrsets"][0]["changetype"] = "MERGE"
            api.error("PATCH", path, 422, body=bad, text="Changetype 'MERGE' is not a valid value")
            api.error("PATCH", path, 422, body=replace("www.a.test.", "A", 60, "999.0.0.1"),
                      text="Record www.a.test./A '999.0.0.1'")
            api.error("PATCH", path, 422, body=replace("www.b.test.", "A", 60, "192.0.2.1"),
                      text="out of zone")
            before = serial_of(port, "a.test")
            big = replace("www.a.test.", "TXT", 60, '"%s"' % ("x" * 250))
            big["rrsets"][0]["records"] *= 30
            status, headers, raw = api.call("PATCH", path, body=big)
            expect(status == 413 and json.loads(raw).get("error", "").startswith("Request Entity"),
                   "over max_body_bytes: %d %r" % (status, raw))
            expect(serial_of(port, "a.test") == before, "a refused PATCH changed the zone")
            # no redis: configured here: a zone cannot be created (test_api_redis.py creates)
            api.error("POST", ZONES, 422, body={"name": "c.test.", "kind": "Native"},
                      text="tern creates zones in Redis; configure redis:")
            api.error("DELETE", ZONES + "/a.test.", 422,
                      text="zone a.test is configured in ternd.yaml: remove it there")
            api.error("DELETE", ZONES + "/nope.test.", 404)
            api.error("GET", "/api/v1/servers/localhost/statistics", 404)
            api.error("PUT", ZONES + "/a.test./export", 405)

        def auth():
            for key in (None, "wrong-key-0123456789"):
                status, headers, raw = api.call("GET", ZONES, key=key)
                expect(status == 401 and json.loads(raw) == {"error": "Unauthorized"}
                       and "X-API-Key" in headers.get("WWW-Authenticate", ""),
                       "key %r: %d %r %r" % (key, status, raw, headers))
            # read_only: GET yes, changes no (403), and nothing changes
            api.json("GET", ZONES + "/a.test.", 200, key=RO)
            before = serial_of(port, "a.test")
            # refusals are logged 10 a second at most: the checks above used this second's
            time.sleep(1.1)
            api.error("PATCH", ZONES + "/a.test.", 403, key=RO,
                      body=replace("ro.a.test.", "A", 60, "192.0.2.1"), text="read-only")
            api.error("PUT", ZONES + "/a.test./notify", 403, key=RO)
            expect(serial_of(port, "a.test") == before, "a read-only key changed the zone")
            # a key for a.test only: the others do not exist for it
            names = [z["name"] for z in api.json("GET", ZONES, 200, key=ONE)]
            expect(names == ["a.test."], "key one lists %r" % names)
            api.error("GET", ZONES + "/n.test.", 404, key=ONE)
            api.error("PATCH", ZONES + "/n.test.", 404, key=ONE,
                      body=replace("x.n.test.", "A", 60, "192.0.2.1"))
            api.json("PATCH", ZONES + "/a.test.", 204, key=ONE,
                     body=replace("one.a.test.", "A", 60, "192.0.2.77"))
            expect(served(port, "one.a.test", "A") == ["192.0.2.77"], "key one's change")
            expect(served(port, "x.n.test", "A") == [], "key one changed n.test")
            expect(tern.log_has("PATCH /api/v1/servers/localhost/zones/a.test. from 127.0.0.1 "
                                "with key ro: 403"), "no refusal logged")

        def not_master_file():
            doc = api.json("GET", ZONES + "/geo.test.", 200)
            expect(contents(doc, "wrr.geo.test.", "A") == ["192.0.2.31", "192.0.2.32"],
                   "steered wrr: %r" % doc["rrsets"])
            expect(contents(doc, "rr.geo.test.", "A") == ["192.0.2.41", "192.0.2.42",
                                                           "192.0.2.43"], repr(doc["rrsets"]))
            api.error("PATCH", ZONES + "/geo.test.", 422,
                      body=replace("x.geo.test.", "A", 60, "192.0.2.1"), text="redins JSON")
            if any(z["name"] == "s.test." for z in api.json("GET", ZONES, 200)):
                api.error("PATCH", ZONES + "/s.test.", 422,
                          body=replace("x.s.test.", "A", 60, "192.0.2.1"), text="secondary")

        def notify():
            # drain NOTIFYs of the changes above
            listener.settimeout(0.2)
            try:
                while True:
                    listener.recvfrom(4096)
            except OSError:
                pass
            listener.settimeout(TIMEOUT)
            doc = api.json("PUT", ZONES + "/a.test./notify", 200)
            expect(doc == {"result": "Notification queued"}, repr(doc))
            data, peer = listener.recvfrom(4096)
            m = dns.message.from_wire(data)
            expect(m.opcode() == dns.opcode.NOTIFY and m.question[0].name.to_text() == "a.test.",
                   "not a NOTIFY for a.test: %s" % m)
            listener.sendto(dns.message.make_response(m).to_wire(), peer)
            api.error("PUT", ZONES + "/n.test./notify", 422, text="no secondaries")

        def keys_follow_reload():
            # a reload's keys apply to the next requests: one added, one removed (SIGHUP)
            conf = os.path.join(tern.dir, "ternd.yaml")
            text = open(conf).read()
            new_key = "new-0123456789abcdef"
            changed = text.replace('    - {name: ro, key: "%s", read_only: true}\n' % RO,
                                   '    - {name: new, key: "%s"}\n' % new_key)
            expect(changed != text, "the ro key line was not found in ternd.yaml")
            servers.write_atomic(conf, changed)
            tern.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 10
            while api.call("GET", "/api/v1/servers", key=new_key)[0] != 200:
                expect(time.monotonic() < deadline, "the new key not in force 10 s after SIGHUP")
                time.sleep(0.1)
            api.error("GET", "/api/v1/servers", 401, key=RO)
            api.json("GET", "/api/v1/servers", 200)
            servers.write_atomic(conf, text)
            tern.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 10
            while api.call("GET", "/api/v1/servers", key=RO)[0] != 200:
                expect(time.monotonic() < deadline, "the ro key not back 10 s after SIGHUP")
                time.sleep(0.1)

        def check_config_cert():
            # ternd --check-config reads the API's certificate as a start would
            conf = os.path.join(work, "badcert.yaml")
            with open(conf, "w") as f:
                f.write(f"""listen: ["{LOOPBACK}:{free_port()}"]
allow_root: true
api:
  listen: "{LOOPBACK}:{free_port()}"
  cert: "{work}/no-such-cert.pem"
  cert_key: "{work}/no-such-key.pem"
  keys: [{{name: ops, key: "{OPS}"}}]
""")
            p = subprocess.run([args.ternd, "--check-config", "-c", conf], capture_output=True,
                               text=True, timeout=30)
            expect(p.returncode != 0 and "no-such-cert.pem" in p.stderr,
                   "check-config with a missing cert: %d %s" % (p.returncode, p.stderr))

        def restart_keeps():
            tern.stop()
            tern.start("a.test")
            wait_api(api)
            expect(served(port, "www.a.test", "A") == ["192.0.2.20"], "lost across a restart")
            expect(served(port, "one.a.test", "A") == ["192.0.2.77"], "lost across a restart")

        def kill9_after_204():
            wait_api(api)
            api.json("PATCH", ZONES + "/n.test.", 204,
                     body=replace("k9.n.test.", "A", 60, "192.0.2.99"))
            tern.kill9()
            tern.start("n.test")
            expect(served(port, "k9.n.test", "A") == ["192.0.2.99"], "lost after SIGKILL")
            wait_api(api)
            doc = api.json("GET", ZONES + "/n.test.", 200)
            expect(contents(doc, "k9.n.test.", "A") == ["192.0.2.99"], "API lost it")

        def tls_check():
            nonlocal tls
            if find_program("openssl") is None:
                raise Failure("openssl not found")
            cert, key = make_cert(work)
            tport = free_port()
            tls = Ternd(work, args.ternd, f"""api:
  listen: "{LOOPBACK}:{tport}"
  cert: "{cert}"
  cert_key: "{key}"
  keys: [{{name: ops, key: "{OPS}"}}]
""", f"""  - origin: a.test
    file: "{paths['a.test']}"
""", name="tern-tls")
            tls.start("a.test")
            ctx = ssl.create_default_context(cafile=cert)
            sapi = Api("https://%s:%d" % (LOOPBACK, tport), ctx)
            wait_api(sapi)
            shape(sapi.json("GET", "/api/v1/servers/localhost", 200), SERVER_SHAPE, "server/TLS")
            # plain HTTP to the TLS port gets no HTTP answer
            plain = Api("http://%s:%d" % (LOOPBACK, tport))
            try:
                status, _, _ = plain.call("GET", "/api/v1/servers")
                bad = status == 200
            except (OSError, urllib.error.URLError, ConnectionError):
                bad = False
            expect(not bad, "plain HTTP answered on the TLS port")
            sapi.json("PATCH", ZONES + "/a.test.", 204,
                      body=replace("tls.a.test.", "A", 60, "192.0.2.55"))
            expect(served(tls.port, "tls.a.test", "A") == ["192.0.2.55"], "TLS PATCH not served")
            tls.stop()

        for name, fn in (("servers_shape", servers_shape), ("zones_list", zones_list),
                         ("zone_detail", zone_detail), ("signed_zone", signed_zone),
                         ("export", export),
                         ("patch_served", patch_served), ("errors", errors), ("auth", auth),
                         ("not_master_file", not_master_file), ("notify", notify),
                         ("keys_follow_reload", keys_follow_reload),
                         ("check_config_cert", check_config_cert),
                         ("restart_keeps", restart_keeps), ("kill9_after_204", kill9_after_204)):
            run_check(results, name, fn)
        tern.stop()
        run_check(results, "tls", tls_check)
        return servers.finish(tern, results)
    finally:
        listener.close()
        tern.stop()
        if tls is not None:
            tls.stop()
        if not os.environ.get("TERN_KEEP"):
            shutil.rmtree(work, ignore_errors=True)


def wait_api(api):
    """The API answers (it starts once the first view is out, after the DNS side)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            if api.call("GET", "/api/v1/servers/localhost")[0] == 200:
                return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise Failure("the API did not answer")
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
