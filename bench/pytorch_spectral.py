#!/usr/bin/env python3
"""PyTorch / NumPy / Spectral Python reference figures for spectral matching (issue 4, item 7).

Reads the cube and references that bench/spectral_gpu_bench writes (--dir, default
/tmp/spectrasift_gpu_bench: cube_bip.img int16 614 x 512 x 224, ref1.f32, refs.f32) and times the
obvious implementations on the same machine, in the same run:

  torch, one reference (SAM): int16 cube resident on the GPU -> float -> dot, norms, acos (device time),
        and end to end from a pinned host tensor (upload + compute + download), and the pinned upload alone
  torch, best of N references (SAM): normalise pixels and references, matrix product, argmax; FP32 and TF32
        (and the fraction of pixels where TF32's argmax equals FP32's)
  NumPy, one reference (SAM) on the host cores; Spectral Python's spectral_angles when it is installed

Device times are CUDA-event medians after warm-up. Prints a Markdown table.
Usage: python3 bench/pytorch_spectral.py [--dir DIR] [--reps N]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

S, L, B = 614, 512, 224


def median_ms(fn, reps, torch=None, sync=None):
    times = []
    for i in range(reps + 2):
        if torch is not None:
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            t = start.elapsed_time(stop)
        else:
            t0 = time.perf_counter()
            fn()
            t = (time.perf_counter() - t0) * 1e3
        if i >= 2:  # warm-up
            times.append(t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/spectrasift_gpu_bench")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    cube = np.fromfile(os.path.join(args.dir, "cube_bip.img"), dtype="<i2").reshape(L * S, B)
    ref1 = np.fromfile(os.path.join(args.dir, "ref1.f32"), dtype="<f4")
    refs = np.fromfile(os.path.join(args.dir, "refs.f32"), dtype="<f4").reshape(-1, B)
    rows = []

    # NumPy on the host (all cores through its BLAS for the product)
    def np_sam():
        x = cube.astype(np.float32)
        dot = x @ ref1
        nrm = np.linalg.norm(x, axis=1) * np.linalg.norm(ref1)
        return np.arccos(np.clip(dot / nrm, -1, 1))

    rows.append(("NumPy %s, one reference, host (%d cores)" % (np.__version__, os.cpu_count()),
                 median_ms(np_sam, max(3, args.reps // 4))))
    try:
        import spectral  # Spectral Python

        cube3 = cube.reshape(L, S, B)
        rows.append(("Spectral Python %s spectral_angles, one reference, host" % spectral.__version__,
                     median_ms(lambda: spectral.spectral_angles(cube3, ref1[None, :]), 3)))
    except ImportError:
        rows.append(("Spectral Python: not installed on this machine", float("nan")))

    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        rows.append(("PyTorch with CUDA: not available", float("nan")))
    else:
        dev = torch.device("cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
        x16 = torch.from_numpy(cube).to(dev)
        r = torch.from_numpy(ref1).to(dev)
        rn = r.norm()

        def sam1(x):
            xf = x.float()
            return torch.acos(torch.clamp((xf @ r) / (xf.norm(dim=1) * rn), -1, 1))

        rows.append(("torch %s, one reference, device compute (int16 resident)" % torch.__version__,
                     median_ms(lambda: sam1(x16), args.reps, torch)))
        h16 = torch.from_numpy(cube).pin_memory()
        rows.append(("torch, pinned upload of the raw cube (%.1f MB)" % (cube.nbytes / 1e6),
                     median_ms(lambda: h16.to(dev, non_blocking=True), args.reps, torch)))

        def e2e():
            out = sam1(h16.to(dev, non_blocking=True))
            return out.cpu()

        rows.append(("torch, one reference, end to end from pinned host memory",
                     median_ms(e2e, args.reps, torch)))

        R = torch.from_numpy(refs).to(dev)
        Rn = R / R.norm(dim=1, keepdim=True)

        def best():
            xf = x16.float()
            xn = xf / xf.norm(dim=1, keepdim=True)
            return torch.argmax(xn @ Rn.T, dim=1)

        n = refs.shape[0]
        rows.append(("torch, best of %d references, FP32" % n, median_ms(best, max(5, args.reps // 2), torch)))
        b32 = best()
        torch.backends.cuda.matmul.allow_tf32 = True
        rows.append(("torch, best of %d references, TF32" % n, median_ms(best, max(5, args.reps // 2), torch)))
        b_tf = best()
        torch.backends.cuda.matmul.allow_tf32 = False
        agree = (b32 == b_tf).float().mean().item() * 100
        rows.append(("torch, TF32 argmax equal to FP32 argmax (%% of pixels): %.4f" % agree, float("nan")))

    print("| implementation (PyTorch written the obvious way; same cube) | median ms |")
    print("|---|---|")
    for name, ms in rows:
        print("| %s | %s |" % (name, "-" if ms != ms else "%.3f" % ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
