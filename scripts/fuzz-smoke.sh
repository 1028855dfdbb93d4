#!/usr/bin/env bash
# Builds the libFuzzer targets (clang + libFuzzer, ASan + UBSan; the "fuzz" preset) and runs each one for
# SECONDS seconds (default 20) on its committed seed corpus (fuzz/corpus/<target>/, read-only: new inputs
# go to a scratch directory), with its dictionary. Exits non-zero on the first crash, leak, timeout or
# out-of-memory; the reproducer is left in $FUZZ_OUT (default build-fuzz/findings/<target>/).
#
#   scripts/fuzz-smoke.sh [SECONDS] [TARGET...]      e.g. scripts/fuzz-smoke.sh 20
#   FUZZ_BUILD=build-fuzz JOBS=2 FUZZ_EXTRA="-jobs=1" scripts/fuzz-smoke.sh 600 envi_cube
#
# Needs: clang (Debian clang-14) and libclang-rt-14-dev (libFuzzer and the sanitizer runtimes).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-20}
shift || true
ALL=(image envi_header envi_cube library features cli_args)
TARGETS=("${@:-${ALL[@]}}")
BUILD=${FUZZ_BUILD:-build-fuzz}
JOBS=${JOBS:-2}

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  CC=clang CXX=clang++ cmake --preset fuzz -B "$BUILD" >/dev/null
fi
cmake --build "$BUILD" -j"$JOBS" --target $(printf '%s_fuzz ' "${TARGETS[@]}")

declare -A DICT=([image]=image [envi_header]=envi [envi_cube]=envi [library]=envi [features]=features
                 [cli_args]=cli)
status=0
for t in "${TARGETS[@]}"; do
  out=${FUZZ_OUT:-$BUILD/findings}/$t
  work=$(mktemp -d)
  mkdir -p "$out"
  # -rss_limit_mb: the targets cap decoded sizes far below this, so hitting it means a leak or an
  # allocation the limits should have refused. -timeout: a single input taking 10 s is a hang.
  log="$out/log.txt"
  if "$BUILD/bin/${t}_fuzz" "$work" "fuzz/corpus/$t" -dict="fuzz/dict/${DICT[$t]}.dict" \
       -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$out/" -print_final_stats=1 ${FUZZ_EXTRA:-} >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz $t: ok, $runs executions in ${SECONDS_EACH} s"
  else
    echo "fuzz $t: FAILED (see $log; reproducer in $out/)"
    grep -m3 -E 'ERROR|runtime error|SUMMARY' "$log" || true
    status=1
  fi
  rm -rf "$work"
done
exit $status
