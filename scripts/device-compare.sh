#!/usr/bin/env bash
# Builds two trees on the GPU machine and runs their benchmarks in alternating rounds, so that a change that
# should not move performance (a refactor) is measured against the tree before it on the same machine in
# the same run. Writes ${OUT:-out}/compare.md (the tables of every round) and compare.log (everything).
#
# Usage (from the repository root of the NEW tree):
#   bash scripts/device-compare.sh OLD_TREE build     # configure + build both trees (sm_90a, benches on)
#   bash scripts/device-compare.sh OLD_TREE bench [ROUNDS]   # ROUNDS (default 2) of old, new per benchmark
# OLD_TREE is a copy of the older sources (e.g. `git archive BASE | tar -x -C .old` into an ignored folder,
# carried with the call). BENCHES (default "spectral_gpu_bench spectral_opencl_bench spectral_bench") picks
# which benchmarks run; each runs with the --quick settings of scripts/device-check.sh. ORDER (default "old new")
# is the order of the trees inside a round: run it both ways to tell a difference from an order effect.
set -u
cd "$(dirname "$0")/.."
old=${1:?usage: device-compare.sh OLD_TREE build|bench [ROUNDS]}
what=${2:?usage: device-compare.sh OLD_TREE build|bench [ROUNDS]}
rounds=${3:-2}
OUT=${OUT:-out}
mkdir -p "$OUT"
log="$OUT/compare.log"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi

build_tree() {  # build_tree SRC BUILD
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DSPECTRASIFT_WITH_CUDA=ON -DSPECTRASIFT_CUDA_ARCH=90a \
    -DSPECTRASIFT_WERROR=OFF >>"$log" 2>&1 && cmake --build "$2" -j"$(nproc)" >>"$log" 2>&1
}

bench_args() {
  case "$1" in
    spectral_gpu_bench) echo "--quick --reps 5" ;;
    spectral_opencl_bench) echo "--quick --reps 5" ;;
    spectral_bench) echo "--backend all --repeat 3 --no-spy" ;;
    *) echo "" ;;
  esac
}

case "$what" in
  build)
    t0=$(date +%s)
    build_tree "$old" build-old && echo "old tree built" || { echo "old tree: build FAILED (see compare.log)"; exit 1; }
    build_tree . build-new && echo "new tree built" || { echo "new tree: build FAILED (see compare.log)"; exit 1; }
    echo "builds took $(( $(date +%s) - t0 )) s"
    ;;
  bench)
    md="$OUT/compare.md"
    : >"$md"
    for name in ${BENCHES:-spectral_gpu_bench spectral_opencl_bench spectral_bench}; do
      for r in $(seq 1 "$rounds"); do
        for tree in ${ORDER:-old new}; do
          b="build-$tree/bin/$name"
          [ -x "$b" ] || { echo "$b: not built" | tee -a "$md"; continue; }
          echo "## $name, round $r, $tree tree ($(bench_args "$name"))" >>"$md"
          tmp=$(mktemp)
          # shellcheck disable=SC2046
          timeout 240 "$b" $(bench_args "$name") >"$tmp" 2>&1
          cat "$tmp" >>"$log"
          grep -E '^\||total |median' "$tmp" >>"$md"
          echo >>"$md"
          rm -f "$tmp"
        done
      done
    done
    echo "tables in $md"
    ;;
  *) echo "usage: device-compare.sh OLD_TREE build|bench [ROUNDS]" >&2; exit 2 ;;
esac
