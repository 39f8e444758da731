#!/usr/bin/env bash
# IP → ASN table benchmark on the real ip-location-db/asn data set (CC BY 4.0).
#   bench/asn.sh [lookups]          # default 16,000,000 lookups per timed pass
# Fetches the data once into bench/.cache/asn/ (`npm pack @ip-location-db/asn`; never committed),
# builds tern_geo/tern_common in build-bench (Release; ASN_BUILD=dir to use another build dir) and
# bench/.cache/asn_bench, then runs it pinned to CPU 0: file size, compile time, lookups/s
# (v4/v6, uniform and in-range addresses, best of 5) and exactness against a reference
# resolution of the input (every range's start-1/start/end/end+1 + 1M random per family).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
lookups=${1:-16000000}
bd=${ASN_BUILD:-$root/build-bench}
cache=$here/.cache
data=$cache/asn
mkdir -p "$data" "$here/results"

if [ ! -f "$data/package/asn-ipv4.csv" ] || [ ! -f "$data/package/asn-ipv6.csv" ]; then
    rm -rf "$data/package"
    (cd "$data" && npm pack --silent @ip-location-db/asn >/dev/null)
    tar -xzf "$(ls -t "$data"/ip-location-db-asn-*.tgz | head -1)" -C "$data"
fi
[ -f "$bd/build.ninja" ] || cmake -S "$root" -B "$bd" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$bd" --target tern_geo tern_common >/dev/null
cc -std=c17 -O2 -g -Wall -Wextra -Werror -I"$root/include" -o "$cache/asn_bench" \
    "$here/asn_bench.c" "$bd/src/geo/libtern_geo.a" "$bd/src/common/libtern_common.a"

ver=$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$data/package/package.json")
out=$here/results/asn-$(date +%Y%m%d-%H%M%S).txt
{
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
    echo "# @ip-location-db/asn $ver"
    taskset -c 0 "$cache/asn_bench" "$cache/asn.tbl" "$lookups" \
        "$data/package/asn-ipv4.csv" "$data/package/asn-ipv6.csv"
} | tee "$out"
echo "saved: $out"
