#!/usr/bin/env python3
"""graf1 -> graf3 accuracy of `spectrasift register` over RANSAC seeds (docs/performance/matching.md,
'Accuracy on graf1 -> graf3').

Runs `spectrasift register tests/data/graf3_gray.png tests/data/graf1_gray.png --backend B --seed N
[--threshold T] [--msac | --no-msac] --json` (FIXED = graf3, MOVING = graf1, the CLI's matching: query = MOVING) and
prints, per setting, the inliers and the mean corner error against tests/data/H1to3p.xml: the mean distance
between the four corners (0,0), (w-1,0), (w-1,h-1), (0,h-1) of the 800 x 640 MOVING image mapped by the
CLI's matrix and by H1to3p (both MOVING -> FIXED pixels), as tests/harness_util.hpp's mean_corner_error.

    python3 bench/graf_accuracy.py [--cli build/bin/spectrasift] [--backend cpu] [--seeds 8]
"""
import argparse
import json
import math
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def h1to3p():
    text = (DATA / "H1to3p.xml").read_text()
    return [float(v) for v in re.search(r"<data>(.*?)</data>", text, re.S).group(1).split()]


def apply(h, x, y):
    w = h[6] * x + h[7] * y + h[8]
    return (h[0] * x + h[1] * y + h[2]) / w, (h[3] * x + h[4] * y + h[5]) / w


def mean_corner_error(a, b, w, h):
    corners = [(0, 0), (w - 1, 0), (w - 1, h - 1), (0, h - 1)]
    return sum(math.dist(apply(a, *c), apply(b, *c)) for c in corners) / 4


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=str(ROOT / "build" / "bin" / "spectrasift"))
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--seeds", type=int, default=8)
    args = ap.parse_args()
    truth = h1to3p()
    for threshold in (3, 2):
        for msac in (False, True):
            label = f"--threshold {threshold}" + (" --msac" if msac else " --no-msac")
            cells, errors = [], []
            for seed in range(args.seeds):
                cmd = [args.cli, "register", str(DATA / "graf3_gray.png"), str(DATA / "graf1_gray.png"), "--backend",
                       args.backend, "--seed", str(seed), "--threshold", str(threshold), "--json", "--quiet"]
                cmd.append("--msac" if msac else "--no-msac")
                j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
                m = [v for row in j["matrix"] for v in row]
                e = mean_corner_error(m, truth, j["moving"]["width"], j["moving"]["height"])
                errors.append(e)
                cells.append(f"{j['inliers']} / {e:.2f}")
            print(f"| {label} ({j['match_count']} matches) | " + " | ".join(cells) +
                  f" | {sum(errors) / len(errors):.2f} |")


if __name__ == "__main__":
    main()
