"""Python overhead per call against the C++ call (docs/performance/python.md).

    PYTHONPATH=build/python python python/benchmarks/overhead.py IMAGE [--backend cpu] [--runs 9] [--cli build/bin/spectrasift]

Runs sift() on IMAGE (read with read_image, as the CLI reads it) `runs` times after one warm-up, and reports the
median wall time of the Python call, the median time of the library call inside it (the binding's timer around
detect_and_compute: the same call a C++ program makes), and the overhead = (Python - C++) / C++. With --cli,
also the median of `spectrasift sift IMAGE --json`'s times_ms.sift (the CLI's timer around the same call).
The same for spectral() on a cube when --cube is given."""
import argparse
import json
import statistics
import subprocess
import tempfile
import time

import spectrasift as ss


def measure(call, runs, between=None):
    """Median wall time of `call` and of the library call inside it; `between` runs after each (not timed)."""
    call()  # warm up: plans, buffers, kernels
    outer, inner = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        call()
        outer.append((time.perf_counter() - t0) * 1e3)
        inner.append(ss._core._last_call_ms())
        if between:
            between()
    return statistics.median(outer), statistics.median(inner)


def report(what, outer, inner):
    print(f"{what}: Python {outer:.3f} ms, library call {inner:.3f} ms, overhead {outer - inner:.3f} ms "
          f"= {100 * (outer - inner) / inner:.2f} %")


def cli_sift_ms(cli, image, backend, threads, tmp):
    out = subprocess.run([cli, "sift", image, "--json", "-q", "--backend", backend, "--threads", str(threads), "-o",
                          f"{tmp}/f.bin"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["times_ms"]["sift"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("image")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--cli")
    p.add_argument("--cube")
    a = p.parse_args()
    img = ss.read_image(a.image)
    with ss.Context(a.backend, threads=a.threads) as ctx, tempfile.TemporaryDirectory() as tmp:
        print(f"{ss.__version__} on {ctx.describe()}; {a.image}: {img.shape[1]} x {img.shape[0]} {img.dtype}, "
              f"median of {a.runs}")
        f = ss.sift(ctx, img)
        cli_times = []
        # The CLI runs between the Python calls (interleaved: both see the same load on the machine).
        between = (lambda: cli_times.append(cli_sift_ms(a.cli, a.image, a.backend, a.threads, tmp))) if a.cli else None
        report(f"sift ({len(f)} keypoints)", *measure(lambda: ss.sift(ctx, img), a.runs, between))
        if a.cli:
            print(f"CLI sift --json times_ms.sift (interleaved): median {statistics.median(cli_times):.3f} ms")
        if a.cube:
            cube = ss.open_envi(a.cube)
            refs = ss.reference_pixels(cube, [(0, 0), (5, 5)])
            report("spectral sam best of 2", *measure(lambda: ss.spectral(ctx, cube, refs, best=True), a.runs))


if __name__ == "__main__":
    main()
