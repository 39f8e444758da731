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
cmake --build "$bd" --target tern_geo >/dev/null
cc -std=c17 -O2 -g -Wall -Wextra -Werror -I"$root/include" -o "$cache/latency_map_bench" \
    "$here/latency_map_bench.c" "$bd/src/geo/libtern_geo.a" "$bd/src/common/libtern_common.a" \
    $(pkg-config --libs libmaxminddb) -lm
exec "$cache/latency_map_bench" "${1:-1000000}" "${2:-10000000}"
