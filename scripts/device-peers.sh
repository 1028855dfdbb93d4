#!/usr/bin/env bash
# The peers of issue 19 item 5 on the GPU machine, in one run: CudaSift (built from its own source beside our
# bench: bench/peers/cudasift_bench.cpp), NVIDIA CV-CUDA (cvcuda-cu13 0.19.0, bench/peers/cvcuda_bench.py), our
# CUDA and OpenCL SIFT (bench/sift_bench.cpp) and OpenCV's cv2.SIFT on the host cores (bench/sift_peers.py), on the
# four photos. Every table goes to $OUT/peers.md (written as each step ends), everything else to $OUT/peers.log.
#
# The CV-CUDA files (libcvcuda alone is 187 MB) do not fit in one call (64 MiB with the working tree), so they
# travel xz-compressed in parts, one folder per call, and wait in /tmp/peers on the machine, which keeps /tmp
# while it stays warm (about 30 s after a call): make the calls back to back.
#
# Before the calls (here, once), the ignored folders .peers/1..3 (seventh session's recipe; keep them out of git:
# grep -qx '/.peers/' .git/info/exclude || echo /.peers/ >> .git/info/exclude):
#     pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#         --implementation cp -d /tmp/cv cvcuda-cu13==0.19.0
#     mkdir /tmp/cv/site && cd /tmp/cv/site && unzip -q ../cvcuda_cu13-0.19.0-*.whl
#     rm cvcuda/_cvcuda.cpython-31[0134]*.so      # the device's Python is 3.12
#     tar -cf - . | xz -9 -T2 > ../cvcuda.tar.xz && cd .. && split -b 37921000 cvcuda.tar.xz cvcuda.tar.xz.part-
#     part aa into .peers/1 (beside CudaSift.tar.gz: git archive of its Pascal branch without data/, and
#     CUDASIFT_COMMIT), ab into .peers/2, ac into .peers/3; one SHA256SUMS listing every part, the whole
#     cvcuda.tar.xz and CudaSift's two files, copied into each of the three folders.
# and the photos in .photos/ (kleiber_1920x1080.jpg ... elephants_3840x2160.jpg, already there).
# .peers/1 = part aa of cvcuda.tar.xz + CudaSift.tar.gz (Pascal branch, data/ left out) + CUDASIFT_COMMIT +
# SHA256SUMS: 38.4 MB; .peers/2 and .peers/3 = parts ab and ac + SHA256SUMS: 38.0 MB each (36.3 MiB);
# .photos: 11.8 MB. cvcuda.tar.xz (114.0 MB) holds the cvcuda-cu13 0.19.0 wheel's files with the cp312 binding only.
#
# The device calls (each well under 10 minutes; carry = the ignored paths named in the call):
#   1. carry [".peers/1", ".photos"]  command: bash scripts/device-peers.sh stage 1 && bash scripts/device-peers.sh build
#   2. carry [".peers/2"]             command: bash scripts/device-peers.sh stage 2
#   3. carry [".peers/3"]             command: bash scripts/device-peers.sh stage 3 && bash scripts/device-peers.sh run
# Call 1 carries 48 MiB besides the working tree (7 MiB at this commit): if the tree has grown past 15 MiB, carry
# .photos alone first (carry [".photos"], command: bash scripts/device-peers.sh stage photos) and leave it out of
# call 1. The tables come back in peers.md of the last call. If a call finds the machine fresh (stage or run says a
# part or the build is missing), begin again at the first call. `run STEP...` runs some steps only (cudasift
# ours-cuda cvcuda ours-opencl opencv, in that order by default; caps 60+90+220+110+60 s; silx, 150 s, only when
# named: silx 3.1.3 on every OpenCL platform from the wheels of the ignored .whl/, carried), e.g. to finish in a
# further call: bash scripts/device-peers.sh run opencv
#
# Steps:
#   stage N  copies .peers/N/* to /tmp/peers/parts (each file checked against the SHA256SUMS it carries) and the
#            photos of .photos/ to /tmp/peers/photos.
#   build    unpacks CudaSift (CudaSift.tar.gz, its Pascal branch) to /tmp/peers/CudaSift and builds this tree's
#            cudasift_bench and sift_bench in /tmp/peers/build: Release, CUDA sm_90a, -DSPECTRASIFT_CUDASIFT_DIR.
#   run      joins the parts (sha256 of the whole archive checked), unpacks the CV-CUDA wheel's files to
#            /tmp/peers/site (on PYTHONPATH), then times each step with RUNS runs after WARMUP warm-up runs.
# Environment: COMMIT (the tree's commit for the report; the device's copy of the tree may carry a stale .git), RUNS (100), WARMUP (20), BATCH (100 copies of kleiber 1080p), BATCH_RUNS (20), BATCH_WARMUP (3),
# BATCH_CHUNK (images per CV-CUDA call of the batch, 20),
# CV_RUNS (runs of cv2.SIFT, 10), JOBS (nproc), PEERS (/tmp/peers), OUT (out), OPENCL_DEVICE (1: the H200 machine lists
# PoCL's CPU device first and NVIDIA's GPU second; without it the OpenCL step timed PoCL, fifth session).
set -u
cd "$(dirname "$0")/.." || exit 1
PEERS=${PEERS:-/tmp/peers}
OUT=${OUT:-out}
RUNS=${RUNS:-100}
WARMUP=${WARMUP:-20}
mkdir -p "$OUT" "$PEERS/parts"
md="$OUT/peers.md"
log="$OUT/peers.log"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
die() { echo "device-peers: $*" | tee -a "$log" >&2; exit 1; }

sums_check() {  # sums_check DIR FILE...: each FILE's sha256 against DIR/SHA256SUMS
  local dir=$1; shift
  local f want got
  for f in "$@"; do
    want=$(awk -v f="$f" '$2 == f {print $1}' "$dir/SHA256SUMS")
    [ -n "$want" ] || continue
    got=$(sha256sum "$PEERS/parts/$f" | cut -d' ' -f1)
    [ "$want" = "$got" ] || die "$f: sha256 $got, expected $want (copy damaged: carry .peers again)"
  done
}

stage_photos() {
  ls .photos/*.jpg >/dev/null 2>&1 || return 0
  { mkdir -p "$PEERS/photos" && cp -f .photos/*.jpg "$PEERS/photos/"; } || die "cannot copy .photos"
}

stage() {
  local n=${1:?stage N}
  if [ "$n" = photos ]; then
    stage_photos
    echo "staged $(find "$PEERS/photos" -name '*.jpg' 2>/dev/null | wc -l) photos"
    return
  fi
  local src=.peers/$n
  [ -d "$src" ] || die "$src missing: name it in the call's carry"
  local files=()
  for f in "$src"/*; do
    [ -f "$f" ] || continue
    cp -f "$f" "$PEERS/parts/" || die "cannot copy $f"
    files+=("$(basename "$f")")
  done
  sums_check "$src" "${files[@]}"
  stage_photos
  echo "staged $src: ${files[*]} ($(du -sh "$PEERS/parts" | cut -f1) in $PEERS/parts; photos: $(find "$PEERS/photos" -name '*.jpg' 2>/dev/null | wc -l))"
}

build() {
  [ -f "$PEERS/parts/CudaSift.tar.gz" ] || die "CudaSift.tar.gz not staged (stage 1 first)"
  rm -rf "$PEERS/CudaSift"
  { mkdir -p "$PEERS/CudaSift" && tar -xzf "$PEERS/parts/CudaSift.tar.gz" -C "$PEERS/CudaSift"; } || die "cannot unpack CudaSift"
  local t0
  t0=$(date +%s)
  {
    cmake -S . -B "$PEERS/build" -DCMAKE_BUILD_TYPE=Release -DSPECTRASIFT_WITH_CUDA=ON -DSPECTRASIFT_CUDA_ARCH=90a \
      -DSPECTRASIFT_BUILD_TESTS=OFF -DSPECTRASIFT_BUILD_BENCH=ON -DSPECTRASIFT_WERROR=OFF \
      -DSPECTRASIFT_CUDASIFT_DIR="$PEERS/CudaSift" &&
      cmake --build "$PEERS/build" -j"${JOBS:-$(nproc)}" --target cudasift_bench sift_bench
  } >>"$log" 2>&1 || { tail -40 "$log"; die "build failed (see peers.log)"; }
  echo "built cudasift_bench and sift_bench in $(( $(date +%s) - t0 )) s"
}

install_cvcuda() {  # joins the parts and unpacks the wheel's files into $PEERS/site (once)
  [ -f "$PEERS/site/.verified" ] && return 0
  rm -rf "$PEERS/site"
  local parts=("$PEERS"/parts/cvcuda.tar.xz.part-*)
  [ -f "${parts[0]}" ] || die "no cvcuda.tar.xz.part-* staged"
  local sums=$PEERS/parts/SHA256SUMS
  local expect_parts want got
  expect_parts=$(grep -c 'cvcuda.tar.xz.part-' "$sums")
  [ "${#parts[@]}" -eq "$expect_parts" ] || die "${#parts[@]} of $expect_parts parts staged (stage every .peers/N first)"
  want=$(awk '$2 == "cvcuda.tar.xz" {print $1}' "$sums")
  got=$(cat "${parts[@]}" | sha256sum | cut -d' ' -f1)
  [ "$want" = "$got" ] || die "joined cvcuda.tar.xz: sha256 $got, expected $want"
  mkdir -p "$PEERS/site"
  if command -v xz >/dev/null; then
    cat "${parts[@]}" | xz -dc | tar -x -C "$PEERS/site" || die "cannot unpack cvcuda.tar.xz"
  else  # Python's lzma, always there
    cat "${parts[@]}" | python3 -c "import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall(sys.argv[1])" \
      "$PEERS/site" || die "cannot unpack cvcuda.tar.xz"
  fi
  # The files as the wheel's RECORD lists them (sha256, urlsafe base64).
  python3 - "$PEERS/site" <<'EOF' || die "CV-CUDA files differ from the wheel's RECORD"
import base64, csv, glob, hashlib, os, sys
site = sys.argv[1]
bad = 0
for rec in glob.glob(os.path.join(site, "*.dist-info", "RECORD")):
    for row in csv.reader(open(rec)):
        if len(row) < 2 or not row[1].startswith("sha256=") or not os.path.exists(os.path.join(site, row[0])):
            continue  # the other Python versions' bindings were left out of the payload
        h = base64.urlsafe_b64encode(hashlib.sha256(open(os.path.join(site, row[0]), "rb").read()).digest()).rstrip(b"=")
        if h.decode() != row[1][7:]:
            print("RECORD mismatch:", row[0]); bad += 1
sys.exit(1 if bad else 0)
EOF
  touch "$PEERS/site/.verified"
  echo "CV-CUDA installed in $PEERS/site"
}

step() {  # step TITLE TIMEOUT CMD...: the command's stdout into peers.md (with its stderr's tail when it fails), all into peers.log
  local title=$1 limit=$2; shift 2
  local t0 tmp err rc
  t0=$(date +%s)
  tmp=$(mktemp)
  err=$(mktemp)
  echo "==== $title: $*" >>"$log"
  timeout "$limit" "$@" >"$tmp" 2>"$err"
  rc=$?
  {
    echo "## $title"; echo
    echo "\`$*\` (exit $rc, $(( $(date +%s) - t0 )) s$([ $rc -eq 124 ] && echo ", stopped at the ${limit} s limit"))"; echo
    cat "$tmp"; echo
    if [ $rc -ne 0 ] && [ -s "$err" ]; then echo "stderr (last lines):"; echo '```'; tail -5 "$err"; echo '```'; echo; fi
  } >>"$md"
  cat "$tmp" "$err" >>"$log"
  rm -f "$tmp" "$err"
  echo "$title: exit $rc in $(( $(date +%s) - t0 )) s"
}

run() {
  local steps=("$@")
  [ ${#steps[@]} -gt 0 ] || steps=(cudasift ours-cuda cvcuda ours-opencl opencv)
  local bin=$PEERS/build/bin photos=$PEERS/photos
  [ -d "$photos" ] || photos=.photos
  [ -x "$bin/sift_bench" ] || die "no build in $PEERS/build (run build first)"
  if [ ! -s "$md" ]; then
    {
      echo "# Peers of issue 19 item 5 ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
      echo
      echo "- commit: ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}; CudaSift: $(cat "$PEERS/parts/CUDASIFT_COMMIT" 2>/dev/null || echo unknown)"
      echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | head -1); host: $(nproc) cores"
      echo "- photos: $photos; $RUNS runs after $WARMUP warm-up runs unless a table says otherwise"
      echo
    } >>"$md"
  fi
  local s
  for s in "${steps[@]}"; do
    case "$s" in
      cudasift) step "CudaSift" 60 "$bin/cudasift_bench" --photos "$photos" --runs "$RUNS" --warmup "$WARMUP" ;;
      ours-cuda) step "spectrasift CUDA" 90 "$bin/sift_bench" --backend cuda --photos "$photos" --runs "$RUNS" --warmup "$WARMUP" ;;
      cvcuda)  # in a subshell: a failed install is reported and the other steps still run
        (
          install_cvcuda
          export PYTHONPATH="$PEERS/site${PYTHONPATH:+:$PYTHONPATH}"
          step "CV-CUDA" 220 python3 -u bench/peers/cvcuda_bench.py --photos "$photos" --runs "$RUNS" --warmup "$WARMUP" \
            --batch "${BATCH:-100}" --batch-runs "${BATCH_RUNS:-20}" --batch-warmup "${BATCH_WARMUP:-3}" \
            --batch-chunk "${BATCH_CHUNK:-20}"
        ) || echo "## CV-CUDA: not run (see peers.log)" >>"$md" ;;
      ours-opencl) step "spectrasift OpenCL" 110 "$bin/sift_bench" --backend opencl --device "${OPENCL_DEVICE:-1}" \
                     --photos "$photos" --runs "$RUNS" --warmup "$WARMUP" ;;
      opencv) step "OpenCV cv2.SIFT, host cores" 60 python3 -u bench/sift_peers.py --no-silx --photos "$photos" \
                --runs "${CV_RUNS:-10}" --warmup 2 ;;
      silx) step "silx OpenCL SIFT (every platform)" 150 python3 -u bench/sift_peers.py --no-opencv --photos "$photos" \
              --runs "${SILX_RUNS:-10}" --warmup 2 --platform all ;;  # the wheels of the ignored .whl/ (carried)
      *) die "unknown run step $s (cudasift ours-cuda cvcuda ours-opencl opencv silx)" ;;
    esac
  done
  echo "tables in $md"
}

what=${1:-}
[ $# -gt 0 ] && shift
case "$what" in
  stage) stage "$@" ;;
  build) build ;;
  run) run "$@" ;;
  *) echo "usage: scripts/device-peers.sh stage N|photos | build | run [cudasift ours-cuda cvcuda ours-opencl opencv silx]" >&2
     exit 2 ;;
esac
