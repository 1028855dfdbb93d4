#!/usr/bin/python3
"""Times Spectral Python's spectral_angles with one reference on an ENVI cube (called by
bench/spectral_bench.cpp in the same run, on the same file; run with Debian's /usr/bin/python3).

usage: spy_bench.py CUBE.hdr [--x X] [--y Y] [--repeat R]
Prints one JSON object: SPy version, load time, median spectral_angles time (on the loaded array, as
SPy users call it), and the same angles written directly with NumPy for reference (float32 einsum)."""
import argparse
import json
import statistics
import time

import numpy as np
import spectral


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cube")
    ap.add_argument("--x", type=int, default=100)
    ap.add_argument("--y", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    t0 = time.perf_counter()
    img = spectral.open_image(a.cube).load()  # float32 ImageArray, lines x samples x bands
    load_ms = (time.perf_counter() - t0) * 1e3
    ref = np.asarray(img)[a.y, a.x, :].astype(np.float64).reshape(1, -1)
    times = []
    for r in range(a.repeat + 1):  # the first run warms up
        t0 = time.perf_counter()
        angles = spectral.spectral_angles(img, ref)
        if r:
            times.append((time.perf_counter() - t0) * 1e3)
    arr = np.asarray(img)
    r32 = ref[0].astype(np.float32)
    ntimes = []
    for r in range(a.repeat + 1):
        t0 = time.perf_counter()
        dots = np.einsum("ijk,k->ij", arr, r32)
        norms = np.sqrt(np.einsum("ijk,ijk->ij", arr, arr))
        ang = np.arccos(np.clip(dots / (norms * np.linalg.norm(r32)), -1, 1))
        if r:
            ntimes.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({
        "version": spectral.__version__,
        "shape": list(arr.shape),
        "load_ms": load_ms,
        "spectral_angles_ms": statistics.median(times),
        "numpy_ms": statistics.median(ntimes),
        "checksum": float(np.nansum(angles)),
        "numpy_checksum": float(np.nansum(ang)),
    }))


if __name__ == "__main__":
    main()
