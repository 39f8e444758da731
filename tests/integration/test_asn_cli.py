#!/usr/bin/env python3
"""ternctl asn compile / lookup: the real binary on small generated inputs (both text formats and
MaxMind ASN databases written by tests/data/make_mmdb.pl).

Checks the printed ASN, country and name at range boundaries, "no ASN" in gaps, that a bad
input line fails with file:line and leaves no output, and that a truncated table is refused;
for MaxMind DBs: every network read once (the IPv4 aliases skipped), the input kind taken from
the content (a .mmdb named .csv), a bad record named by its network, a truncated .mmdb refused.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

CSV = ('1.0.0.0,1.0.0.255,13335,"Cloudflare, Inc."\n'
       '8.8.8.0,8.8.8.255,15169,"Google LLC"\n'
       '2001:4860::,2001:4860:ffff:ffff:ffff:ffff:ffff:ffff,15169,"Google LLC"\n')
TSV = "9.9.9.0\t9.9.9.255\t19281\tCH\tQUAD9-AS-1\n"
MAKE_MMDB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "make_mmdb.pl")


def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def mmdb_checks(ternctl, d, expect):
    data = os.path.join(d, "mmdb")
    subprocess.run(["perl", MAKE_MMDB, data], check=True, timeout=60)
    out = os.path.join(d, "geolite.bin")
    rc, so, se = run([ternctl, "asn", "compile", "-o", out, os.path.join(data, "asn_geolite.mmdb")])
    expect(rc == 0 and "7 MaxMind DB networks (3 copies of the IPv4 data skipped)" in so
           and "5 IPv4 and 2 IPv6 ranges" in so, "compile GeoLite2-ASN-like: %r %r" % (so, se))
    cases = [("1.0.0.1", "AS13335 - CLOUDFLARENET"), ("81.2.69.7", "AS64500 - Example 64500"),
             ("10.1.0.1", "AS64501"), ("1.0.1.0", "no ASN"), ("2001:4860::1", "AS15169 - GOOGLE"),
             ("::ffff:1.0.0.1", "no ASN"), ("2002:100:1::", "no ASN")]
    for ip, want in cases:
        rc, so, se = run([ternctl, "asn", "lookup", out, ip])
        expect(rc == 0 and want in so, "mmdb lookup %s -> %s (got %r)" % (ip, want, so.strip()))
    disguised = os.path.join(d, "asn-ipv4.csv")  # the content decides, not the name
    shutil.copy(os.path.join(data, "asn_flat4.mmdb"), disguised)
    rc, so, se = run([ternctl, "asn", "compile", "-o", out, disguised])
    expect(rc == 0 and "MaxMind DB networks" in so, "a .mmdb named .csv: %r %r" % (so, se))
    rc, so, se = run([ternctl, "asn", "lookup", out, "9.9.9.9"])
    expect(rc == 0 and "AS19281 - Quad9" in so, "flat IPv4 .mmdb lookup (got %r)" % so.strip())
    bad = os.path.join(d, "bad.bin")
    rc, so, se = run([ternctl, "asn", "compile", "-o", bad, os.path.join(data, "asn_bad_type.mmdb")])
    expect(rc == 1 and "asn_bad_type.mmdb: network 1.2.3.0/24: autonomous_system_number is a "
           "string" in se, "bad record named by its network (%r)" % se.strip())
    expect(not os.path.exists(bad), "no output after a bad record")
    trunc = os.path.join(d, "trunc.mmdb")
    with open(os.path.join(data, "asn_geolite.mmdb"), "rb") as f, open(trunc, "wb") as g:
        g.write(f.read()[:1000])
    rc, so, se = run([ternctl, "asn", "compile", "-o", bad, trunc])
    expect(rc == 1 and "metadata marker" in se, "truncated .mmdb refused (%r)" % se.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternctl", required=True)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="tern-asn-")
    failures = []

    def expect(cond, what):
        print("%-60s %s" % (what, "ok" if cond else "FAIL"))
        if not cond:
            failures.append(what)

    try:
        with open(os.path.join(d, "asn.csv"), "w") as f:
            f.write(CSV)
        with open(os.path.join(d, "asn.tsv"), "w") as f:
            f.write(TSV)
        out = os.path.join(d, "asn.bin")
        rc, so, se = run([args.ternctl, "asn", "compile", "-o", out,
                          os.path.join(d, "asn.csv"), os.path.join(d, "asn.tsv")])
        expect(rc == 0 and so.startswith("OK:"), "compile CSV + TSV: %r %r" % (so, se))
        cases = [("1.0.0.0", "AS13335 - Cloudflare, Inc."), ("1.0.0.255", "AS13335"),
                 ("0.255.255.255", "no ASN"), ("1.0.1.0", "no ASN"),
                 ("9.9.9.9", "AS19281 CH QUAD9-AS-1"), ("2001:4860::1", "AS15169 - Google LLC"),
                 ("2001:4861::", "no ASN")]
        for ip, want in cases:
            rc, so, se = run([args.ternctl, "asn", "lookup", out, ip])
            expect(rc == 0 and want in so, "lookup %s -> %s (got %r)" % (ip, want, so.strip()))
        bad = os.path.join(d, "bad.csv")
        with open(bad, "w") as f:
            f.write("1.0.0.0,1.0.0.255,13335,x\n1.2.3.4,1.2.3.1,5,y\n")
        rc, so, se = run([args.ternctl, "asn", "compile", "-o", os.path.join(d, "bad.bin"), bad])
        expect(rc == 1 and "bad.csv:2" in se, "bad line fails with file:line (%r)" % se.strip())
        expect(not os.path.exists(os.path.join(d, "bad.bin")), "no output after a bad input")
        trunc = os.path.join(d, "trunc.bin")
        with open(out, "rb") as f, open(trunc, "wb") as g:
            g.write(f.read()[:40])
        rc, so, se = run([args.ternctl, "asn", "lookup", trunc, "1.0.0.1"])
        expect(rc == 1 and "truncated" in se, "truncated table refused (%r)" % se.strip())
        rc, so, se = run([args.ternctl, "asn", "lookup", out, "not-an-ip"])
        expect(rc == 2, "a bad address is a usage error")
        mmdb_checks(args.ternctl, d, expect)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
