#!/usr/bin/env bash
# Builds spectrasift on the GPU machine for the H200 (sm_90), runs every test and the benchmarks there,
# and writes every log and table to ${OUT:-out}/ (at most 10 files):
#   system.txt   machine, driver, toolchain, `spectrasift devices`
#   build.log    configure + build
#   ctest.log    the whole test suite (CUDA tests run here; CI has no GPU)
#   bench.log    every benchmark's full output
#   tables.md    the benchmark tables (for docs/performance/*.md, with the run kept in bench/results/)
#   summary.txt  one line per step with its status and duration
#   gpu_memory.txt  GPU memory (nvidia-smi) during longrun_test on CUDA (LONGRUN_N, default 1000); longrun.log
# Usage (from the repository root): bash scripts/device-check.sh [--quick] [--no-tests] [--no-bench]
# Environment: OUT (output folder, default out), BUILD (build folder, default build-device), JOBS (default nproc),
# CTEST_JOBS (default 8), CTEST_TIMEOUT (s per test, default 300), BENCHES (names of the benchmarks to run, default all built), BENCH_TIMEOUT (s, default 150),
# COMMIT (reported when the tree has no .git).
# Steps that cannot run (a benchmark not built, no PyTorch) are skipped and say so; the script keeps going
# after a failing step and exits non-zero at the end if any step failed.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
BUILD=${BUILD:-build-device}
JOBS=${JOBS:-$(nproc)}
quick=0; run_tests=1; run_bench=1
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    --no-tests) run_tests=0 ;;
    --no-bench) run_bench=0 ;;
    *) echo "usage: $0 [--quick] [--no-tests] [--no-bench]" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
summary="$OUT/summary.txt"; : >"$summary"
failed=0
t_all=$(date +%s)

# step NAME LOG CMD...: runs CMD with stdout+stderr appended to LOG, records status and duration.
step() {
  local name=$1 log=$2; shift 2
  local t0=$(date +%s)
  echo "==== $name: $*" >>"$log"
  "$@" >>"$log" 2>&1
  local rc=$?
  local dt=$(( $(date +%s) - t0 ))
  if [ $rc -eq 0 ]; then echo "ok      ${dt}s  $name" >>"$summary"
  else echo "FAILED  ${dt}s  $name (exit $rc, see $(basename "$log"))" >>"$summary"; failed=1; fi
  return $rc
}
skip() { echo "skipped       $1" >>"$summary"; }

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi

# ---- the machine ----
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo "${COMMIT:-unknown (no .git here; set COMMIT)}")"
  echo "host: $(uname -a)"
  echo "cpus: $(nproc); $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null)"
  echo; nvidia-smi 2>&1 || echo "nvidia-smi: not available"
  echo; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv 2>&1
  echo; nvcc --version 2>&1 | tail -2; cmake --version | head -1; g++ --version | head -1
  echo "python3: $(command -v python3) $(python3 -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)' 2>&1)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>&1
} >"$OUT/system.txt" 2>&1

# ---- build ----
build_log="$OUT/build.log"; : >"$build_log"
if ! step configure "$build_log" cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSPECTRASIFT_WITH_CUDA=ON \
     -DSPECTRASIFT_CUDA_ARCH=90a -DSPECTRASIFT_WERROR=OFF; then
  echo "configure failed: see $build_log"; cat "$summary"; exit 1
fi
# Build everything; if a target fails, still build and run what can be built.
step build "$build_log" cmake --build "$BUILD" -j"$JOBS" || step build-keep-going "$build_log" cmake --build "$BUILD" -j"$JOBS" -- -k
grep -E "warning|error" "$build_log" | grep -v "^====" | sort | uniq -c | sort -rn | head -40 >"$OUT/build-warnings.txt" || true
[ -s "$OUT/build-warnings.txt" ] || rm -f "$OUT/build-warnings.txt"
cli="$BUILD/bin/spectrasift"
{
  echo; echo "---- spectrasift devices ----"
  if [ -x "$cli" ]; then "$cli" devices 2>&1; "$cli" devices --json 2>&1; else echo "CLI not built"; fi
} >>"$OUT/system.txt"
# The demo with --backend auto (CUDA here): SIFT and matching run on the CPU backend until their GPU ports land.
[ -x "$cli" ] && step demo "$OUT/system.txt" "$cli" demo --out "$BUILD/demo-out" -v

# ---- tests ----
if [ $run_tests = 1 ]; then
  step ctest "$OUT/ctest.log" ctest --test-dir "$BUILD" --output-on-failure -j"${CTEST_JOBS:-8}" --timeout "${CTEST_TIMEOUT:-300}"
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.log" | tail -30 >>"$summary"
else
  skip "ctest (--no-tests)"
fi

# ---- long run on the GPU: host RSS (the test's own check) and GPU memory sampled by nvidia-smi ----
if [ $run_tests = 1 ] && [ -x "$BUILD/bin/longrun_test" ] && command -v nvidia-smi >/dev/null; then
  gpumem="$OUT/gpu_memory.txt"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 >"$gpumem.raw" 2>&1 &
  smi=$!
  step "longrun cuda N=${LONGRUN_N:-1000}" "$OUT/longrun.log" env SPECTRASIFT_LONGRUN_N="${LONGRUN_N:-1000}" \
    SPECTRASIFT_LONGRUN_BACKEND=cuda timeout 300 "$BUILD/bin/longrun_test"
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  # memory.used (MiB) over the run: the first samples are before the Context exists.
  awk 'NF {v[NR]=$1} END {n=NR; q=int(n/4); min=1e9; max=0; for (i=q+1; i<=n; i++) {if (v[i]<min) min=v[i]; if (v[i]>max) max=v[i]}
       printf "nvidia-smi memory.used: %d samples every 250 ms; first %s MiB, after the first quarter min %s max %s MiB, last %s MiB\n", n, v[1], min, max, v[n]}' \
      "$gpumem.raw" >"$gpumem"
  grep -E "\[longrun\]" "$OUT/longrun.log" >>"$gpumem" || true
  rm -f "$gpumem.raw"
  cat "$gpumem" >>"$summary"
fi

# ---- benchmarks ----
bench_log="$OUT/bench.log"; : >"$bench_log"
tables="$OUT/tables.md"
{
  echo "# device-check tables, $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo "${COMMIT:-unknown}")"
  echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1); $(nproc) host cores"
  echo
} >"$tables"
# bench_args NAME: the short settings of each known benchmark (others run with no argument).
bench_args() {
  case "$1" in
    spectral_gpu_bench) if [ $quick = 1 ]; then echo "--quick --reps 5"; else echo "--reps 20"; fi ;;
    spectral_opencl_bench) if [ $quick = 1 ]; then echo "--quick --reps 5"; else echo "--reps 10"; fi ;;
    spectral_bench) echo "--backend all --repeat 3" ;;  # median of 3: one run gave 13.7x and 20.6x vs SPy
    sift_bench) if [ $quick = 1 ]; then echo "--quick --backend all"; else echo "--runs 5 --warmup 2 --backend all"; fi ;;
    match_bench) echo "--runs 3" ;;
    *) echo "" ;;
  esac
}
if [ $run_bench = 1 ]; then
  found=0
  run_bench_bin() {  # run_bench_bin PATH: one benchmark, its tables appended to tables.md
    local b=$1 name args limit tmp
    name=$(basename "$b")
    if [ -n "${BENCHES:-}" ] && ! [[ " $BENCHES " == *" $name "* ]]; then skip "$name (not in BENCHES)"; return; fi
    found=1
    args=$(bench_args "$name")
    limit=${BENCH_TIMEOUT:-150}
    # spectral_gpu_bench prints its sections as they finish and needs about a minute.
    [ "$name" = spectral_gpu_bench ] && [ "$limit" -lt 150 ] && limit=150
    # sift_bench: four photos (1080p, 4K) x 2 settings x 3 backends, then 16384 x 16384 matching on each.
    [ "$name" = sift_bench ] && [ "$limit" -lt 400 ] && limit=400
    echo "## $name $args" >>"$tables"
    tmp=$(mktemp)
    # shellcheck disable=SC2086
    step "$name" "$bench_log" bash -o pipefail -c "timeout $limit '$b' $args 2>&1 | tee '$tmp'"
    # Keep the Markdown tables (and their captions) of the output.
    grep -E '^\||^[A-Z#(].*[:)]$|^(One|Best|cube|#|Score)' "$tmp" >>"$tables"; echo >>"$tables"
    rm -f "$tmp"
  }
  # spectral_gpu_bench first: it writes the cube that pytorch_spectral.py reads; PyTorch's figures next,
  # so that a slow benchmark later cannot take them away.
  [ -x "$BUILD/bin/spectral_gpu_bench" ] && run_bench_bin "$BUILD/bin/spectral_gpu_bench"
  if [ -f bench/pytorch_spectral.py ] && python3 -c 'import torch' 2>/dev/null && [ -f /tmp/spectrasift_gpu_bench/cube_bip.img ]; then
    echo "## bench/pytorch_spectral.py" >>"$tables"
    tmp=$(mktemp)
    step pytorch_spectral "$bench_log" bash -o pipefail -c "PYTHONUNBUFFERED=1 timeout 240 python3 bench/pytorch_spectral.py 2>&1 | tee '$tmp'"
    grep -E '^\|' "$tmp" >>"$tables"; echo >>"$tables"
    rm -f "$tmp"
  else
    skip "pytorch_spectral.py (no torch, or no cube from spectral_gpu_bench)"
  fi
  for b in $(ls "$BUILD"/bin/*_bench 2>/dev/null | grep -v '/spectral_gpu_bench$'); do
    [ -x "$b" ] && run_bench_bin "$b"
  done
  [ $found = 1 ] || skip "benchmarks (none built)"
  # The SIFT peers of sift_bench on the same photos: OpenCV's cv2.SIFT on the host cores and silx on every
  # OpenCL platform (pyopencl and silx from the wheels on PYTHONPATH); a missing peer is reported as such.
  if [ -f bench/sift_peers.py ] && python3 -c 'import numpy, cv2' 2>/dev/null; then
    peers_args="--platform all"; [ $quick = 1 ] && peers_args="--quick --platform all"
    echo "## bench/sift_peers.py $peers_args" >>"$tables"
    tmp=$(mktemp)
    # shellcheck disable=SC2086
    step sift_peers "$bench_log" bash -o pipefail -c "PYTHONUNBUFFERED=1 timeout 400 python3 bench/sift_peers.py $peers_args 2>&1 | tee '$tmp'"
    grep -E '^\||^[A-Z].*:' "$tmp" >>"$tables"; echo >>"$tables"
    rm -f "$tmp"
  else
    skip "sift_peers.py (python3 has no numpy or cv2)"
  fi
else
  skip "benchmarks (--no-bench)"
fi

echo "total $(( $(date +%s) - t_all ))s" >>"$summary"
echo; echo "==== tables"; cat "$tables"; echo; echo "==== summary"; cat "$summary"
exit $failed
