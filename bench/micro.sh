#!/usr/bin/env bash
# Micro benchmark of answer_query() (parse → answer → render), no network.
#   bench/micro.sh [100k|1m] [iterations]
# Builds bench/.cache/micro against the static libraries in build-bench (building them first),
# prints ns/query per case, then instructions/query per case from callgrind
# (--toggle-collect=answer_query: only instructions executed inside answer_query are counted).
# MICRO_EDNS=1 adds an EDNS OPT record to every query. MICRO_NO_CALLGRIND=1 skips callgrind.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
zone=${1:-100k}
iters=${2:-1000000}
bd=$root/build-bench
cache=$here/.cache
mkdir -p "$cache" "$here/results"

[ -f "$cache/z$zone/manifest.json" ] ||
    /usr/bin/python3 "$here/gen_zone.py" --names "$([ "$zone" = 1m ] && echo 1000000 || echo 100000)" \
        --out "$cache/z$zone"
[ -f "$bd/build.ninja" ] || cmake -S "$root" -B "$bd" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$bd" --target tern_answer tern_dnssec tern_zone tern_geo tern_wire tern_health tern_limit \
    tern_common >/dev/null
# the zone builder returns memory through jemalloc (mem.c) when the build has it
jem=""
if grep -q '^TERN_JEMALLOC:BOOL=ON' "$bd/CMakeCache.txt"; then
    jem=$(pkg-config --libs jemalloc)
fi
# shellcheck disable=SC2086
cc -std=c17 -O2 -g -Wall -Wextra -Werror -I"$root/include" -o "$cache/micro" "$here/micro.c" \
    "$bd/src/answer/libtern_answer.a" "$bd/src/dnssec/libtern_dnssec.a" "$bd/src/zone/libtern_zone.a" "$bd/src/geo/libtern_geo.a" \
    "$bd/src/wire/libtern_wire.a" "$bd/src/health/libtern_health.a" "$bd/src/limit/libtern_limit.a" \
    "$bd/src/common/libtern_common.a" \
    $(pkg-config --libs libmaxminddb jansson ldns liburcu-qsbr libsodium libcrypto) -ldl -lpthread -lm $jem

# The cases come from the generated zone's manifest: one name per kind of answer.
mapfile -t cases < <(/usr/bin/python3 - "$cache/z$zone/manifest.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["samples"]
for label, key, t in (("exact", "a", "A"), ("exact_aaaa", "dual", "AAAA"), ("nxdomain", "nx", "A"),
                      ("nodata", "a", "TXT"), ("wildcard", "wild", "A"), ("cname_chain", "cname", "A"),
                      ("referral", "deleg_glue", "A"), ("mx_addl", "mx", "MX")):
    print("%s=%s/%s" % (label, s[key], t))
PY
)
zfile=$cache/z$zone/bench.test.zone
out=$here/results/micro-$zone-$(date +%Y%m%d-%H%M%S).txt
{
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
    taskset -c 0 "$cache/micro" "$zfile" bench.test. "$iters" "${cases[@]}"
    if [ "${MICRO_NO_CALLGRIND:-0}" != 1 ]; then
        ci=20000
        echo
        printf '%-12s %12s   (callgrind, inside answer_query, %d calls)\n' case instr/query "$ci"
        for c in "${cases[@]}"; do
            label=${c%%=*}
            cg=$(mktemp "$cache/callgrind.XXXXXX")
            valgrind --tool=callgrind --toggle-collect=answer_query --callgrind-out-file="$cg" \
                "$cache/micro" --one "$label" "$zfile" bench.test. "$ci" "$c" >/dev/null 2>&1
            # totals counts ci + 1 calls (the checked one plus the loop)
            ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$cg")
            printf '%-12s %12.0f\n' "$label" "$(echo "$ir / ($ci + 1)" | bc -l)"
            rm -f "$cg"
        done
    fi
} | tee "$out"
echo "saved: $out"
