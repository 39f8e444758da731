#!/bin/sh
# latency_map.sh — build the latency map bench against the Release libraries (build-rel) and run
# it: the compile time and size of a generated map, and the per-query lookup cost.
#   bench/latency_map.sh [lines] [lookups]     # defaults 1,000,000 and 10,000,000
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bd=${BUILD_DIR:-$root/build-rel}
cache=$here/.cache
mkdir -p "$cache"
cmake -S "$root" -B "$bd" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$bd" --target tern_answer tern_dnssec tern_zone tern_geo tern_wire tern_health \
    tern_limit tern_common >/dev/null
# the zone builder returns memory through jemalloc (mem.c) when the build has it
jem=""
if grep -q '^TERN_JEMALLOC:BOOL=ON' "$bd/CMakeCache.txt"; then
    jem=$(pkg-config --libs jemalloc)
fi
# shellcheck disable=SC2086
cc -std=c17 -O2 -g -Wall -Wextra -Werror -I"$root/include" -o "$cache/latency_map_bench" \
    "$here/latency_map_bench.c" "$bd/src/answer/libtern_answer.a" "$bd/src/dnssec/libtern_dnssec.a" \
    "$bd/src/zone/libtern_zone.a" "$bd/src/geo/libtern_geo.a" "$bd/src/wire/libtern_wire.a" \
    "$bd/src/health/libtern_health.a" "$bd/src/limit/libtern_limit.a" \
    "$bd/src/common/libtern_common.a" \
    $(pkg-config --libs libmaxminddb jansson ldns liburcu-qsbr libsodium libcrypto) -ldl -lpthread \
    -lm $jem
exec "$cache/latency_map_bench" "${1:-1000000}" "${2:-10000000}"
