#!/usr/bin/env bash
# IP → ASN table benchmark on the real ip-location-db/asn data set (CC BY 4.0).
#   bench/asn.sh [lookups]          # default 16,000,000 lookups per timed pass
# Fetches the data once into bench/.cache/asn/ (`npm pack @ip-location-db/asn`; never committed),
# builds tern_geo/tern_common in build-bench (Release; ASN_BUILD=dir to use another build dir) and
# bench/.cache/asn_bench, then runs it ASN_RUNS times (default 3; this machine's speed drifts, so
# quote the medians) pinned to CPU ASN_CPU (default 0): file size, compile time, lookups/s of the
# table, of its prefix lookups and of a plain binary search over the same boundaries (v4/v6;
# uniform, 2000::/3 and in-range addresses; best of 5 passes each) and exactness against a
# reference resolution of the input (every range's start-1/start/end/end+1 + 1M random per
# family, also through the prefix lookups). Ends with the median of each figure over the runs.
# TERN_ASN_TABLE_SCALAR=1 measures the table's portable (non-AVX2) descent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
lookups=${1:-16000000}
bd=${ASN_BUILD:-$root/build-bench}
runs=${ASN_RUNS:-3}
cpu=${ASN_CPU:-0}
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
# libmaxminddb: the compiler reads MaxMind ASN databases too (asn_compile.h)
cc -std=c17 -O2 -g -Wall -Wextra -Werror -I"$root/include" -o "$cache/asn_bench" \
    "$here/asn_bench.c" "$bd/src/geo/libtern_geo.a" "$bd/src/common/libtern_common.a" \
    $(pkg-config --libs libmaxminddb)

# median of every "label  table X  prefix Y  bsearch Z  M lookups/s" figure, labels in order
medians() {
    awk -v runs="$runs" '
        function med(arr, l, c,   i, j, x, a) {
            for (i = 1; i <= c; i++) {
                x = arr[l, i] + 0
                for (j = i - 1; j >= 1 && a[j] > x; j--)
                    a[j + 1] = a[j]
                a[j + 1] = x
            }
            return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
        }
        /M lookups\/s/ {
            l = $1 " " $2
            if (!(l in cnt)) name[++m] = l
            c = ++cnt[l]
            tb[l, c] = $4; pf[l, c] = $6; bs[l, c] = $8
        }
        END {
            printf "# median of %d runs, M lookups/s\n", runs
            for (i = 1; i <= m; i++) {
                l = name[i]
                printf "%-12s table %7.2f  prefix %7.2f  bsearch %7.2f\n", l, med(tb, l, cnt[l]),
                       med(pf, l, cnt[l]), med(bs, l, cnt[l])
            }
        }'
}

ver=$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$data/package/package.json")
out=$here/results/asn-$(date +%Y%m%d-%H%M%S).txt
{
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
    echo "# @ip-location-db/asn $ver, $runs runs on CPU $cpu, load $(cut -d' ' -f1-3 /proc/loadavg)"
    for i in $(seq 1 "$runs"); do
        echo "## run $i"
        taskset -c "$cpu" "$cache/asn_bench" "$cache/asn.tbl" "$lookups" \
            "$data/package/asn-ipv4.csv" "$data/package/asn-ipv6.csv"
    done
} | tee "$out.tmp"
medians <"$out.tmp" | tee -a "$out.tmp"
mv "$out.tmp" "$out"
echo "saved: $out"
