#!/usr/bin/env bash
# ANAME cost per query, in answer_query() (parse → answer → render, no network):
#   bench/aname.sh [rounds]
# Takes the 100k-name bench zone, adds 2,000 ANAME owners — 1,000 whose targets are A names of
# the zone itself (in-zone: the target is looked up and written per query), 1,000 whose targets
# are outside it (answered from a results table like the resolver thread's, MICRO_ANAME) — and
# times three query mixes over the same 1,000 targets, interleaved, ROUNDS times (default 5):
#   plain   A at the target names themselves
#   in      A at the in-zone ANAME owners
#   out     A at the out-of-zone ANAME owners
# Prints each mix's ns/query per round and the medians' ratios in/plain and out/plain.
# Run it when nothing else uses the CPU; it pins itself to CPU 1 (CPU 0 with one core).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
rounds=${1:-5}
cache=$here/.cache
work=$cache/aname
mkdir -p "$work" "$here/results"
# the micro binary and the 100k zone (micro.sh builds both; no callgrind, a token run)
MICRO_NO_CALLGRIND=1 "$here/micro.sh" 100k 1000 >/dev/null
zone=$cache/z100k/bench.test.zone
/usr/bin/python3 - "$zone" "$work" <<'PY'
import random, sys
zone, work = sys.argv[1], sys.argv[2]
names = []
for line in open(zone):
    f = line.split()
    # "name IN A addr" lines of single-label hosts, not the apex or a wildcard
    if len(f) == 4 and f[1] == "IN" and f[2] == "A" and "." not in f[0] and f[0] not in ("@", "*"):
        names.append(f[0])
rng = random.Random(20261126)
targets = rng.sample(sorted(set(names)), 1000)
with open(work + "/bench.test.zone", "w") as out:
    out.write(open(zone).read())
    for i, t in enumerate(targets):
        out.write("alias-in-%d IN ANAME %s\n" % (i, t))
        out.write("alias-out-%d IN ANAME t%d.elsewhere.test.\n" % (i, i))
with open(work + "/results.txt", "w") as r:
    for i in range(1000):
        r.write("t%d.elsewhere.test. 198.51.100.%d\n" % (i, i % 250 + 1))
for mix, fmt in (("plain", "%s.bench.test."), ("in", "alias-in-%d.bench.test."),
                 ("out", "alias-out-%d.bench.test.")):
    with open("%s/%s.txt" % (work, mix), "w") as q:
        for i, t in enumerate(targets):
            q.write((fmt % (t if mix == "plain" else i)) + " A\n")
PY
cpu=$(( $(nproc) > 1 ? 1 : 0 ))
declare -A all
for r in $(seq 1 "$rounds"); do
    for mix in plain in out; do
        ns=$(MICRO_ANAME=$work/results.txt taskset -c "$cpu" "$cache/micro" --mix "$work/$mix.txt" \
             "$work/bench.test.zone" bench.test. 2000 | sed -n 's/.* rounds \([0-9.]*\) ns\/query.*/\1/p')
        all[$mix]="${all[$mix]:-} $ns"
        echo "round $r $mix $ns ns/query"
    done
done
out=$here/results/aname-$(date -u +%Y%m%d-%H%M%S).txt
/usr/bin/python3 - "${all[plain]}" "${all[in]}" "${all[out]}" <<'PY' | tee "$out"
import statistics, sys
p, i, o = ([float(x) for x in a.split()] for a in sys.argv[1:4])
mp, mi, mo = statistics.median(p), statistics.median(i), statistics.median(o)
print("medians ns/query: plain A %.1f, in-zone ANAME %.1f, out-of-zone ANAME %.1f" % (mp, mi, mo))
print("in/plain %.2f  out/plain %.2f" % (mi / mp, mo / mp))
PY
