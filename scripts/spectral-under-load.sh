#!/usr/bin/env bash
# Spectral matching on the CPU backend with a competing load (issue 20, item 6; docs/performance/spectral.md,
# "Threads under load"): the median time of `spectral --json` (times_ms.match_total: the library call) on the
# HYDICE cube, default thread count against --threads 1, first on the machine as it is, then with LOAD busy
# processes (default: one per core) competing for the cores. A benchmark, not a test: it prints the figures.
#
#   bash scripts/spectral-under-load.sh            # CLI=build/bin/spectrasift RUNS=15 LOAD=$(nproc)
#   CLI=/path/to/spectrasift RUNS=31 LOAD=4 bash scripts/spectral-under-load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CLI=${CLI:-build/bin/spectrasift}
CUBE=${CUBE:-tests/data/hydice_data.hdr}
RUNS=${RUNS:-15}
LOAD=${LOAD:-$(nproc)}
REFS=(--ref-pixel 10,10 --ref-pixel 40,50 --ref-pixel 70,20 --ref-pixel 5,90)
out=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$out"
}
trap cleanup EXIT

# median min max of times_ms.match_total over RUNS runs; $@: extra flags
measure() {
  for _ in $(seq "$RUNS"); do
    "$CLI" spectral --backend cpu --quiet "$CUBE" "${REFS[@]}" --best -o "$out/o.hdr" --json "$@" |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["times_ms"]["match_total"])'
  done | sort -g | awk '{v[NR] = $1} END {printf "median %.2f ms (min %.2f, max %.2f, %d runs)", v[int((NR + 1) / 2)], v[1], v[NR], NR}'
}

echo "host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $("$CLI" --version)"
echo "cube: $CUBE; 4 references, --best; $RUNS runs each"
echo "no added load:   default threads: $(measure)"
echo "no added load:   --threads 1:     $(measure --threads 1)"
for _ in $(seq "$LOAD"); do
  (while :; do :; done) &
  pids+=($!)
done
sleep 1
echo "$LOAD busy processes: default threads: $(measure)"
echo "$LOAD busy processes: --threads 1:     $(measure --threads 1)"
