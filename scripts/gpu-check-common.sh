# Sourced by the GPU check scripts (cuda-sift-check.sh, cuda-sift-batch.sh, ransac-gpu-check.sh,
# match-filter-gpu-check.sh): the repository root as the working folder, OUT (default out), BUILD (default the
# first argument), JOBS (default nproc), the log $OUT/<second argument> emptied, `run CMD...` (logs the step, keeps
# going after a failure and sets failed=1) and the CUDA toolkit on PATH.
# Usage: source "$(dirname "$0")/gpu-check-common.sh" DEFAULT_BUILD_FOLDER LOG_NAME
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}
BUILD=${BUILD:-$1}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
log="$OUT/$2"; : >"$log"
failed=0
run() { echo "==== $*" | tee -a "$log"; "$@" >>"$log" 2>&1 || { echo "FAILED: $*" | tee -a "$log"; failed=1; }; }
export PATH=/usr/local/cuda/bin:$PATH
