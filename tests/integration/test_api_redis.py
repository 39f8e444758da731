#!/usr/bin/python3
"""The HTTP API's zones in Redis (src/api/api_zones.c) end to end: a real ternd reading a real
redis-server, Python's urllib as the client, dnspython to see what is served, and the Redis
keys read back in redins' schema.

  create      POST a zone (nameservers, rrsets) -> 201 with pdns' zone object; served at once;
              in Redis as redins writes it (the set, the config's SOA, a hash of labels); listed
  conflict    POST it again, or a zone ternd.yaml configures -> 409
  bad_data    a missing name, a bad record, an RRset redins cannot hold, another kind -> 422
  keys        a read-only key 403, a key limited to other zones 403 (POST) / 404
  redins      GET a label's JSON as Redis holds it; PUT a steered label (a country filter),
              served steered (ECS from AU and GB) with the serial one up, read back; a label the
              reader refuses -> 422 with the reader's message; DELETE a label
  delete      DELETE the zone -> 204, no longer served, gone from Redis; a configured zone 422;
              an unknown zone 404

    test_api_redis.py --ternd build/ternd
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import dns.edns
import dns.message
import dns.query
import dns.rcode

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, expect, find_program, free_port, run_check  # noqa: E402
from test_api import OPS, RO, ONE, ZONES, Api, served, serial_of, wait_api, zone_text  # noqa

TIMEOUT = 5.0
AU, GB = ("1.2.3.0", 24), ("81.2.69.128", 26)  # countries in tests/data/make_mmdb.pl's nested6

NEW = {"name": "new.test.", "kind": "Native", "nameservers": ["ns1.new.test.", "ns2.new.test."],
       "soa_edit_api": "DEFAULT",
       "rrsets": [
           {"name": "www.new.test.", "type": "A", "ttl": 60,
            "records": [{"content": "192.0.2.7", "disabled": False},
                        {"content": "192.0.2.8", "disabled": False}], "comments": []},
           {"name": "www.new.test.", "type": "TXT", "ttl": 60,
            "records": [{"content": '"hello"', "disabled": False}]},
           {"name": "new.test.", "type": "MX", "ttl": 300,
            "records": [{"content": "10 mail.new.test.", "disabled": False}]},
           {"name": "ns1.new.test.", "type": "A", "ttl": 3600,
            "records": [{"content": "192.0.2.53", "disabled": False}]}]}

GEO_LABEL = {"a": {"ttl": 60, "filter": {"count": "multi", "order": "none",
                                         "geo_filter": "country"},
                   "records": [{"ip": "192.0.2.1", "country": "AU"},
                               {"ip": "192.0.2.2", "country": ["GB", "IE"]},
                               {"ip": "192.0.2.3"}]}}


def ask_ecs(port, name, ecs):
    q = dns.message.make_query(name, "A", use_edns=0,
                               options=[dns.edns.ECSOption(ecs[0], ecs[1])])
    r = dns.query.udp(q, LOOPBACK, port=port, timeout=TIMEOUT)
    return sorted(rd.to_text() for s in r.answer for rd in s)


def rcode_of(port, name, rtype):
    q = dns.message.make_query(name, rtype)
    return dns.query.udp(q, LOOPBACK, port=port, timeout=TIMEOUT).rcode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl")
    args = ap.parse_args()
    args.ternd = os.path.abspath(args.ternd)
    if not find_program("redis-server") or not shutil.which("perl"):
        print("SKIP: redis-server or perl not found")
        return 77
    work = tempfile.mkdtemp(prefix="tern-api-redis-")
    data = os.path.join(work, "data")
    os.makedirs(data)
    subprocess.run(["perl", servers.MAKE_MMDB, data], check=True, timeout=60)
    fzone = os.path.join(data, "f.test.zone")
    servers.write_atomic(fzone, zone_text("f.test", 1))
    redis = servers.Redis(work)
    api_port = free_port()
    extra = f"""geoip_db: "{os.path.join(data, 'nested6.mmdb')}"
control_socket: "{os.path.join(work, 'ctl.sock')}"
redis:
  address: "{LOOPBACK}:{redis.port}"
  zone_reload: 600
  connect_timeout: 500
api:
  listen: "{LOOPBACK}:{api_port}"
  keys:
    - {{name: ops, key: "{OPS}"}}
    - {{name: ro, key: "{RO}", read_only: true}}
    - {{name: one, key: "{ONE}", zones: [a.test]}}
"""
    tern = servers.Ternd(work, [("f.test.", fzone)], args.ternd, extra_yaml=extra, workers=2)
    api = Api("http://%s:%d" % (LOOPBACK, api_port))
    results = []
    try:
        redis.start()
        tern.start("f.test")
        port = tern.port
        wait_api(api)
        path = ZONES + "/new.test."

        def create():
            t0 = time.monotonic()
            doc = api.json("POST", ZONES, 201, body=NEW)
            took = time.monotonic() - t0
            print("POST to served: %.0f ms" % (took * 1000))
            expect(doc["name"] == "new.test." and doc["id"] == "new.test." and
                   doc["kind"] == "Native" and isinstance(doc["rrsets"], list),
                   "201 body: %r" % doc)
            www = [s for s in doc["rrsets"] if s["name"] == "www.new.test." and s["type"] == "A"]
            expect(www and sorted(r["content"] for r in www[0]["records"]) ==
                   ["192.0.2.7", "192.0.2.8"], "201 rrsets: %r" % doc["rrsets"])
            # served at once: the 201 came after the view had it
            expect(served(port, "www.new.test", "A") == ["192.0.2.7", "192.0.2.8"],
                   "www A served: %r" % served(port, "www.new.test", "A"))
            expect(served(port, "new.test", "NS") == ["ns1.new.test.", "ns2.new.test."],
                   "apex NS: %r" % served(port, "new.test", "NS"))
            expect(served(port, "new.test", "MX") == ["10 mail.new.test."], "MX")
            serial = serial_of(port, "new.test")
            today = int(time.strftime("%Y%m%d", time.gmtime())) * 100 + 1
            expect(serial in (today, today + 100), "serial %d, want YYYYMMDD01" % serial)
            expect(doc["serial"] == serial, "zone object serial %r" % doc["serial"])
            # Redis holds it as redins does
            expect(redis.cmd("SISMEMBER", "redins:zones", "new.test.") == 1, "not in the set")
            cfg = json.loads(redis.cmd("GET", "redins:zones:new.test.:config"))
            expect(cfg["soa"]["ns"] == "a.misconfigured.dns.server.invalid." and
                   cfg["soa"]["mbox"] == "hostmaster.new.test." and cfg["soa"]["serial"] == serial
                   and cfg["soa"]["refresh"] == 10800 and cfg["soa"]["minttl"] == 3600,
                   "config: %r" % cfg)
            w = json.loads(redis.cmd("HGET", "redins:zones:new.test.", "www"))
            expect(sorted(r["ip"] for r in w["a"]["records"]) == ["192.0.2.7", "192.0.2.8"] and
                   w["a"]["ttl"] == 60 and w["txt"]["records"][0]["text"] == "hello",
                   "www label: %r" % w)
            apex = json.loads(redis.cmd("HGET", "redins:zones:new.test.", "@"))
            expect(sorted(r["host"] for r in apex["ns"]["records"]) ==
                   ["ns1.new.test.", "ns2.new.test."] and apex["mx"]["records"][0]["preference"]
                   == 10, "apex label: %r" % apex)
            names = [z["name"] for z in api.json("GET", ZONES, 200)]
            expect("new.test." in names and "f.test." in names, "GET zones: %r" % names)
            if args.ternctl:  # the create is in the zone's list of changes, with who made it
                out = subprocess.run([args.ternctl, "-s", os.path.join(work, "ctl.sock"), "zone",
                                      "new.test"], capture_output=True, text=True, timeout=30)
                expect("by api key ops from" in out.stdout, "ternctl zone:\n" + out.stdout)

        def conflict():
            api.error("POST", ZONES, 409, body=NEW, text="new.test")
            api.error("POST", ZONES, 409, body={"name": "f.test.", "kind": "Native"},
                      text="ternd.yaml")

        def bad_data():
            api.error("POST", ZONES, 422, body={"kind": "Native"}, text="Key 'name'")
            api.error("POST", ZONES, 422, body=b"{nope", text="JSON")
            api.error("POST", ZONES, 422, body={"name": "b.test.", "kind": "Slave"},
                      text="kind Slave")
            bad = {"name": "b.test.", "kind": "Native", "rrsets": [
                {"name": "x.b.test.", "type": "A", "ttl": 60, "records": [{"content": "1.2.3"}]}]}
            api.error("POST", ZONES, 422, body=bad, text="New RRsets are invalid: Record x.b.test.")
            hinfo = {"name": "b.test.", "kind": "Native", "rrsets": [
                {"name": "x.b.test.", "type": "HINFO", "ttl": 60,
                 "records": [{"content": '"cpu" "os"'}]}]}
            api.error("POST", ZONES, 422, body=hinfo, text="RRset x.b.test. IN HINFO")
            api.error("POST", ZONES, 422, body={"name": "b.test.", "kind": "Native",
                                                "nameservers": ["ns1.b.test"]},
                      text="Nameserver is not canonical")
            expect(redis.cmd("SISMEMBER", "redins:zones", "b.test.") == 0,
                   "a refused POST wrote to Redis")
            expect(rcode_of(port, "b.test", "SOA") == dns.rcode.REFUSED, "b.test served")

        def keys():
            api.error("POST", ZONES, 403, key=RO, body={"name": "k.test.", "kind": "Native"})
            api.error("POST", ZONES, 403, key=ONE, body={"name": "k.test.", "kind": "Native"})
            api.error("DELETE", path, 403, key=RO)
            api.error("DELETE", path, 404, key=ONE)
            api.error("PUT", path + "/redins/www", 403, key=RO, body=GEO_LABEL)
            api.error("GET", path + "/redins/www", 404, key=ONE)
            status, _, raw = api.call("GET", path + "/redins/www", key=RO)
            expect(status == 200 and json.loads(raw)["a"]["ttl"] == 60, "ro GET: %r" % raw)

        def redins():
            status, headers, raw = api.call("GET", path + "/redins/www")
            expect(status == 200 and headers.get("Content-Type", "").startswith(
                "application/json") and raw.decode() ==
                redis.cmd("HGET", "redins:zones:new.test.", "www"), "GET www: %r" % raw)
            api.error("GET", path + "/redins/nolabel", 404)
            before = serial_of(port, "new.test")
            api.json("PUT", path + "/redins/geo", 204, body=GEO_LABEL)
            expect(serial_of(port, "new.test") == before + 1, "serial not one up")
            expect(ask_ecs(port, "geo.new.test", AU) == ["192.0.2.1"], "AU: %r"
                   % ask_ecs(port, "geo.new.test", AU))
            expect(ask_ecs(port, "geo.new.test", GB) == ["192.0.2.2"], "GB: %r"
                   % ask_ecs(port, "geo.new.test", GB))
            expect(api.json("GET", path + "/redins/geo", 200) == GEO_LABEL, "geo read back")
            # a label the reader refuses: its message, nothing written
            bad = {"a": {"ttl": 60, "records": [{"ip": "192.0.2.9"}, {"ip": "999.0.0.1"}]}}
            api.error("PUT", path + "/redins/geo", 422, body=bad, text="a.records[1].ip")
            api.error("PUT", path + "/redins/geo", 422, body=b"[1, 2", text="not a JSON object")
            cname = {"cname": {"ttl": 60, "host": "x.new.test."}, "a": GEO_LABEL["a"]}
            api.error("PUT", path + "/redins/geo", 422, body=cname, text="CNAME")
            expect(api.json("GET", path + "/redins/geo", 200) == GEO_LABEL, "a 422 wrote")
            expect(serial_of(port, "new.test") == before + 1, "a 422 changed the serial")
            api.json("DELETE", path + "/redins/geo", 204)
            expect(rcode_of(port, "geo.new.test", "A") == dns.rcode.NXDOMAIN, "geo still served")
            expect(redis.cmd("HGET", "redins:zones:new.test.", "geo") is None, "geo in Redis")
            api.error("DELETE", path + "/redins/geo", 404)
            api.error("GET", ZONES + "/f.test./redins/www", 422, text="not in Redis")

        def delete():
            api.error("DELETE", ZONES + "/f.test.", 422,
                      text="zone f.test is configured in ternd.yaml: remove it there")
            api.error("DELETE", ZONES + "/nope.test.", 404)
            api.json("DELETE", path, 204)
            expect(rcode_of(port, "www.new.test", "A") == dns.rcode.REFUSED, "still served")
            expect(redis.cmd("SISMEMBER", "redins:zones", "new.test.") == 0 and
                   redis.cmd("EXISTS", "redins:zones:new.test.") == 0 and
                   redis.cmd("EXISTS", "redins:zones:new.test.:config") == 0, "left in Redis")
            names = [z["name"] for z in api.json("GET", ZONES, 200)]
            expect("new.test." not in names, "still listed: %r" % names)
            api.error("DELETE", path, 404)
            expect(serial_of(port, "f.test") == 1, "the configured zone changed")

        for name, fn in (("create", create), ("conflict", conflict), ("bad_data", bad_data),
                         ("keys", keys), ("redins", redins), ("delete", delete)):
            run_check(results, name, fn)
        tern.stop()
        return servers.finish(tern, results)
    finally:
        tern.stop()
        redis.stop()
        if not os.environ.get("TERN_KEEP"):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
