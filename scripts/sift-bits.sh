#!/usr/bin/env bash
# Checks that two builds give the same SIFT features bit for bit (a refactor of the SIFT kernels or stages
# must change no result): runs `spectrasift sift` of each build on the test images, every input type and the
# options that reach every kernel (RootSIFT with a cap, no upsampling with 4 layers, a mask), on each backend
# asked for, and compares the feature files byte for byte. Prints one line per run and exits non-zero on any
# difference or failure.
#
# Usage (from the repository root of the NEW tree, after scripts/device-compare.sh OLD_TREE build):
#   bash scripts/sift-bits.sh build-old/bin/spectrasift build-new/bin/spectrasift cuda opencl cpu
set -u
cd "$(dirname "$0")/.."
old=${1:?usage: sift-bits.sh OLD_CLI NEW_CLI BACKEND...}
new=${2:?usage: sift-bits.sh OLD_CLI NEW_CLI BACKEND...}
shift 2
[ $# -gt 0 ] || set -- cuda opencl cpu
data=tests/data
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mask="$out/mask.png"
"$new" --help >/dev/null 2>&1 || { echo "cannot run $new"; exit 2; }
python3 - "$data/graf1_gray.png" "$mask" <<'PY' 2>/dev/null || cp "$data/graf1_gray.png" "$mask"
import sys, zlib, struct
# a band mask of the size of graf1 (800 x 640), written as an 8-bit grey PNG without third-party modules
w, h = 800, 640
raw = b"".join(b"\x00" + bytes(255 if (x + y) % 300 < 170 else 0 for x in range(w)) for y in range(h))
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
open(sys.argv[2], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
                             + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
PY
fail=0
run() {  # run BACKEND NAME ARGS...
  local be=$1 name=$2
  shift 2
  "$old" sift -q --backend "$be" "$@" -o "$out/old.bin" >/dev/null 2>"$out/old.err" || { echo "FAIL (old) $be $name: $(tail -1 "$out/old.err")"; fail=1; return; }
  "$new" sift -q --backend "$be" "$@" -o "$out/new.bin" >/dev/null 2>"$out/new.err" || { echo "FAIL (new) $be $name: $(tail -1 "$out/new.err")"; fail=1; return; }
  if cmp -s "$out/old.bin" "$out/new.bin"; then echo "same  $be $name ($(stat -c %s "$out/new.bin") bytes)"
  else echo "DIFF  $be $name"; fail=1; fi
}
for be in "$@"; do
  for im in box.png graf1_gray.png camera.png coins.png HappyFish.jpg io_planar_separate_u16.tif io_tiled_u8.tif; do
    run "$be" "$im" "$data/$im"
  done
  run "$be" "root-sift+cap" --root-sift --max-features 300 "$data/graf1_gray.png"
  run "$be" "no-upsample+4-layers" --no-upsample --octave-layers 4 "$data/camera.png"
  run "$be" "mask" --mask "$mask" "$data/graf1_gray.png"
  run "$be" "sigma-6" --sigma 6 "$data/camera.png"
done
exit $fail
