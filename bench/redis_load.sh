#!/usr/bin/env bash
# The Redis zone source on a large zone: how long fetch + build take, and what Redis feels.
#   bench/redis_load.sh [labels]          # default 1,000,000 labels in one zone
# Builds tern_redis and the libraries below it in build-bench (Release; REDIS_BUILD=dir for another
# build dir) and bench/.cache/redis_bench (linked with them), starts its
# own redis-server on a free 127.0.0.1 port in a scratch directory (killed by its PID on exit),
# fills it with bench/gen_redis.py through redis-cli --pipe, and runs redis_bench: initial load,
# verify, forced rebuild, one live change, worst PING latency of another client meanwhile.
# redis-server runs on CPU 1, the source on CPU 0 (when there are two).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
labels=${1:-1000000}
bd=${REDIS_BUILD:-$root/build-bench}
cache=$here/.cache
mkdir -p "$cache" "$here/results"

[ -f "$bd/build.ninja" ] || cmake -S "$root" -B "$bd" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$bd" --target tern_redis tern_redis_conn tern_redis_settings tern_zone tern_dnssec tern_health \
    tern_wire tern_common >/dev/null
libs="$(pkg-config --libs hiredis jansson ldns liburcu-qsbr libcrypto libcurl) -lm -lpthread -ldl"
if grep -q '^TERN_JEMALLOC:BOOL=ON' "$bd/CMakeCache.txt"; then
    libs="$libs $(pkg-config --libs jemalloc)"
fi
# shellcheck disable=SC2086
cc -std=c17 -O2 -g -D_GNU_SOURCE -Wall -Wextra -Werror -I"$root/include" \
    -o "$cache/redis_bench" "$here/redis_bench.c" "$bd/src/redis/libtern_redis.a" \
    "$bd/src/redis/libtern_redis_conn.a" "$bd/src/redis/libtern_redis_settings.a" \
    "$bd/src/zone/libtern_zone.a" "$bd/src/dnssec/libtern_dnssec.a" \
    "$bd/src/health/libtern_health.a" "$bd/src/zone/libtern_zone.a" "$bd/src/wire/libtern_wire.a" \
    "$bd/src/common/libtern_common.a" \
    $libs

pin_redis=() pin_bench=()
if [ "$(nproc)" -ge 2 ]; then
    pin_redis=(taskset -c 1)
    pin_bench=(taskset -c 0)
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
tmp=$(mktemp -d /tmp/tern-redis-bench-XXXXXX)
redis_pid=
cleanup() {
    if [ -n "$redis_pid" ]; then
        kill "$redis_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$redis_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$redis_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
"${pin_redis[@]}" redis-server --port "$port" --bind 127.0.0.1 --dir "$tmp" --save "" \
    --appendonly no --daemonize no --notify-keyspace-events KEA --logfile "$tmp/redis.log" &
redis_pid=$!
for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.05
done

out=$here/results/redis-$(date +%Y%m%d-%H%M%S).txt
{
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
    echo "# $(redis-server --version | cut -d' ' -f1-3), $labels labels, build $(basename "$bd")"
    t0=$(date +%s.%N)
    python3 "$here/gen_redis.py" --labels "$labels" | redis-cli -p "$port" --pipe | tail -1
    t1=$(date +%s.%N)
    printf 'filled Redis in %.1f s; %s\n' "$(echo "$t1 - $t0" | bc)" \
        "$(redis-cli -p "$port" info memory | grep -m1 '^used_memory_human' | tr -d '\r')"
    # Redis' own account of how long it was blocked: every command slower than 1 ms from now on
    redis-cli -p "$port" config set slowlog-log-slower-than 1000 >/dev/null
    redis-cli -p "$port" config set slowlog-max-len 100000 >/dev/null
    redis-cli -p "$port" slowlog reset >/dev/null
    redis-cli -p "$port" config resetstat >/dev/null
    "${pin_bench[@]}" "$cache/redis_bench" 127.0.0.1 "$port" bench.test.
    redis-cli -p "$port" info commandstats | tr -d '\r' |
        sed -n 's/^cmdstat_\(hscan\|get\|smembers\):calls=\([0-9]*\),usec=[0-9]*,usec_per_call=\([0-9.]*\).*/redis: \1 \2 calls, \3 us per call/p'
    redis-cli -p "$port" --no-raw slowlog get 100000 >"$tmp/slowlog.txt"
    python3 - "$tmp/slowlog.txt" <<'PY'
import re, sys
# redis-cli --no-raw: entries "N) 1) (integer) id / 2) (integer) time / 3) (integer) usec / 4) args"
text = open(sys.argv[1]).read()
durs = [int(m) for m in re.findall(r"^\s*3\) \(integer\) (\d+)$", text, re.M)]
print("redis slowlog: %d commands over 1 ms, the slowest %.1f ms" % (len(durs), max(durs, default=0) / 1000))
PY
} | tee "$out"
echo "saved: $out"
