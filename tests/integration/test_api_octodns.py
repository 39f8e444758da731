#!/usr/bin/python3
"""octoDNS, unchanged, syncing a YAML zone to tern through the PowerDNS provider
(octodns-powerdns) and tern's API (src/api): the same client a PowerDNS shop runs.

The packages come from PyPI into a venv kept in a cache directory ($TERN_TEST_CACHE, else
$XDG_CACHE_HOME/tern-test, else ~/.cache/tern-test), made on the first run; without PyPI (or
without the venv module) the test is skipped (exit 77).

Checks:
  create       a first sync creates the records of the YAML in a zone tern serves (every one
               read back with dnspython)
  change       the YAML changed (values replaced, a record deleted, a CNAME added): a second
               sync makes exactly those changes
  no_changes   a third run plans nothing (what octoDNS reads back is what it wrote)

    test_api_octodns.py --ternd build/ternd
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import LOOPBACK, expect, free_port, run_check  # noqa: E402
from test_api import OPS, Api, Ternd, served, wait_api  # noqa: E402

PACKAGES = ["octodns==1.*", "octodns-powerdns==1.*"]


def venv_dir():
    base = os.environ.get("TERN_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tern-test")
    return os.path.join(base, "octodns-venv")


def octodns_sync():
    """The venv's octodns-sync, installing it first if needed; None when PyPI is unreachable."""
    d = venv_dir()
    sync = os.path.join(d, "bin", "octodns-sync")
    if os.path.exists(sync):
        return sync
    try:
        subprocess.run([sys.executable, "-m", "venv", d], check=True, timeout=120,
                       capture_output=True)
        subprocess.run([os.path.join(d, "bin", "pip"), "install", "-q", "--timeout", "20"]
                       + PACKAGES, check=True, timeout=600, capture_output=True)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        print("cannot install %s from PyPI: %s" % (" ".join(PACKAGES), e))
        shutil.rmtree(d, ignore_errors=True)
        return None
    return sync


ZONE = """$ORIGIN o.test.
@ 3600 IN SOA ns1 hostmaster 1 3600 600 86400 300
@ 3600 IN NS ns1
ns1 3600 IN A 192.0.2.1
"""

# the apex NS and its address, as in the zone file: octoDNS changes neither
YAML_HEAD = """---
'':
  type: NS
  ttl: 3600
  value: ns1.o.test.
ns1:
  type: A
  ttl: 3600
  value: 192.0.2.1
"""

YAML_1 = YAML_HEAD + """www:
  type: A
  ttl: 300
  values: [192.0.2.10, 192.0.2.11]
mail:
  type: MX
  ttl: 300
  value: {preference: 10, exchange: mx.example.}
txt:
  type: TXT
  ttl: 120
  value: hello world
"""

YAML_2 = YAML_HEAD + """www:
  type: A
  ttl: 60
  values: [192.0.2.20]
mail:
  type: MX
  ttl: 300
  value: {preference: 10, exchange: mx.example.}
alias:
  type: CNAME
  ttl: 300
  value: www.o.test.
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    args = ap.parse_args()
    sync = octodns_sync()
    if sync is None:
        return 77
    work = tempfile.mkdtemp(prefix="tern-octodns-")
    zfile = os.path.join(work, "o.test.zone")
    servers.write_atomic(zfile, ZONE)
    ydir = os.path.join(work, "yaml")
    os.makedirs(ydir)
    api_port = free_port()
    tern = Ternd(work, os.path.abspath(args.ternd), f"""api:
  listen: "{LOOPBACK}:{api_port}"
  keys: [{{name: octodns, key: "{OPS}"}}]
""", f"""  - origin: o.test
    file: "{zfile}"
""")
    cfg = os.path.join(work, "octodns.yaml")
    with open(cfg, "w") as f:
        f.write(f"""---
providers:
  config:
    class: octodns.provider.yaml.YamlProvider
    directory: {ydir}
    enforce_order: false
  tern:
    class: octodns_powerdns.PowerDnsProvider
    host: {LOOPBACK}
    port: {api_port}
    api_key: {OPS}
    timeout: 10
zones:
  o.test.:
    sources: [config]
    targets: [tern]
""")
    results = []

    def run(doit):
        out = subprocess.run([sync, "--config-file", cfg] + (["--doit"] if doit else []),
                             capture_output=True, text=True, timeout=120, cwd=work)
        expect(out.returncode == 0, "octodns-sync: %d\n%s%s" % (out.returncode, out.stdout,
                                                                out.stderr))
        return out.stdout + out.stderr

    def put_yaml(text):
        servers.write_atomic(os.path.join(ydir, "o.test.yaml"), text)

    try:
        tern.start("o.test")
        port = tern.port
        wait_api(Api("http://%s:%d" % (LOOPBACK, api_port)))

        def create():
            put_yaml(YAML_1)
            run(True)
            expect(served(port, "www.o.test", "A") == ["192.0.2.10", "192.0.2.11"], "www")
            expect(served(port, "mail.o.test", "MX") == ["10 mx.example."], "mail")
            expect(served(port, "txt.o.test", "TXT") == ['"hello world"'], "txt")
            expect(tern.log_has("by api key octodns from 127.0.0.1"), "no audit of the sync")

        def change():
            put_yaml(YAML_2)
            run(True)
            expect(served(port, "www.o.test", "A") == ["192.0.2.20"], "www not changed")
            expect(served(port, "txt.o.test", "TXT") == [], "txt not deleted")
            expect(served(port, "alias.o.test", "CNAME") == ["www.o.test."], "alias not made")
            expect(served(port, "mail.o.test", "MX") == ["10 mx.example."], "mail lost")

        def no_changes():
            text = run(False)
            expect("No changes were planned" in text, "a sync after a sync plans:\n" + text)

        for name, fn in (("create", create), ("change", change), ("no_changes", no_changes)):
            run_check(results, name, fn)
        tern.stop()
        return servers.finish(tern, results)
    finally:
        tern.stop()
        if not os.environ.get("TERN_KEEP"):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
