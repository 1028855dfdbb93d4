"""Pairs per second against Dask workers (docs/performance/python.md, "Scale-out on Dask"; issue 23: >= 0.8 x linear).

    PYTHONPATH=build/python python python/benchmarks/batch_scaling.py [--workers 1,2,4] [--pairs 32] [--runs 1]
        [--backend cpu] [--threads 1] [--image data/box.png] [--json OUT.json]

Makes PAIRS warps of IMAGE (rotation and scale varying with the pair; PGM files in a temporary folder), then for
each worker count N: a LocalCluster of N worker processes of one thread each, every worker's Context made first
(spectrasift.batch.warm_up: leaves out process start and Context creation), then the wall time of
spectrasift.batch.register_pairs(IMAGE, warp k) over all pairs (no output folder: nothing written or resumed), the
best of RUNS. The same pairs for every N. Prints pairs/s, the speed-up over 1 worker and the efficiency (speed-up
/ N), and the share of the workers' time spent inside items (sum of the items' time_ms / (N x wall time):
what Dask's scheduling and idle workers leave; it holds on a loaded machine where the speed-up does not). --plain
also times the same pairs on N plain processes (concurrent.futures, one Context each, no Dask): the speed-up the
machine itself allows, against which Dask's is judged on a shared machine; --plain also times a pure-Python
arithmetic loop (no memory traffic, no spectrasift) on N plain processes: the speed-up the host's cores give any
CPU-bound work (on a virtual machine whose virtual CPUs share physical cores it stays well under N).
--workers defaults to 1, 2, 4, ... up to the CPU count. --threads: CPU threads of each worker's Context
(1: N workers use N cores; with --backend cuda the workers share the GPUs, worker i on device i % n)."""
import argparse
import json
import logging
import multiprocessing
import os
import pathlib
import platform
import tempfile
import time

import distributed
import numpy as np

import spectrasift as ss
from concurrent.futures import ProcessPoolExecutor

from spectrasift import batch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def make_pairs(image_path, count, folder):
    """(image, warp k) pairs: each warp turns the image about its centre by -20..20 degrees and scales it
    0.8..1.2, into a frame 10 % larger."""
    image = ss.read_image(image_path)
    h, w = image.shape
    size = (int(w * 1.1), int(h * 1.1))
    pairs = []
    with ss.Context("cpu") as ctx:
        for k in range(count):
            t = k / max(count - 1, 1)
            a, s = np.radians(-20 + 40 * t), 0.8 + 0.4 * ((k * 5) % count) / max(count - 1, 1)
            to_origin = np.array([[1, 0, -w / 2], [0, 1, -h / 2], [0, 0, 1]])
            turn = np.array([[s * np.cos(a), -s * np.sin(a), 0], [s * np.sin(a), s * np.cos(a), 0], [0, 0, 1]])
            to_frame = np.array([[1, 0, size[0] / 2], [0, 1, size[1] / 2], [0, 0, 1]])
            warped = ss.warp(ctx, image, to_frame @ turn @ to_origin, *size)
            path = pathlib.Path(folder) / f"warp{k:03d}.pgm"
            path.write_bytes(b"P5\n%d %d\n255\n" % size + np.ascontiguousarray(warped, np.uint8).tobytes())
            pairs.append((str(image_path), str(path)))
    return pairs


def pairs_per_second(pairs, workers, backend, threads, runs):
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(workers, timeout=300)
        described = batch.warm_up(client, backend, None, threads)
        best, busy = None, None
        for _ in range(runs):
            t0 = time.perf_counter()
            frame = batch.register_pairs(pairs, client=client, backend=backend, threads=threads)
            seconds = time.perf_counter() - t0
            failed = frame[frame["error"] != ""]
            if len(failed):
                raise SystemExit(f"{len(failed)} pairs failed: {failed['error'].iloc[0]}")
            if best is None or seconds < best:
                # The share of the workers' wall time spent inside items: 1 - what Dask and idling cost.
                best, busy = seconds, frame["time_ms"].sum() / 1e3 / (workers * seconds)
        return len(pairs) / best, busy, described


_CONTEXT = None


def _open_context(backend, threads):
    global _CONTEXT  # noqa: PLW0603 - one Context per pool process, as batch keeps one per worker
    _CONTEXT = ss.Context(backend, 0, threads)


def _register_one(pair):
    return ss.register(_CONTEXT, ss.read_image(pair[0]), ss.read_image(pair[1])).inlier_count


def plain_pairs_per_second(pairs, workers, backend, threads, runs):
    """The same pairs on N plain processes (no Dask): what the machine gives N workers."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=spawn, initializer=_open_context,
                             initargs=(backend, threads)) as pool:
        list(pool.map(_register_one, pairs[:workers]))  # start the processes, make the Contexts
        best = None
        for _ in range(runs):
            t0 = time.perf_counter()
            list(pool.map(_register_one, pairs))
            seconds = time.perf_counter() - t0
            best = seconds if best is None else min(best, seconds)
    return len(pairs) / best


def _spin(_):
    total = 0
    for i in range(2_000_000):
        total += i * i
    return total


def spin_rate(workers, tasks_per_worker=6, runs=3):
    """Throughput (loops per second) of a CPU-bound pure-Python loop on N plain processes, best of RUNS."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=spawn) as pool:
        list(pool.map(_spin, range(workers)))  # start the processes
        best = None
        for _ in range(runs):
            t0 = time.perf_counter()
            list(pool.map(_spin, range(workers * tasks_per_worker)))
            seconds = time.perf_counter() - t0
            best = seconds if best is None else min(best, seconds)
    return workers * tasks_per_worker / best


def main():
    cpus = os.cpu_count() or 1
    default_workers = [n for n in (1, 2, 4, 8, 16, 32, 64) if n <= cpus] or [1]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default=",".join(map(str, default_workers)), help="worker counts, comma-separated")
    p.add_argument("--pairs", type=int, default=32)
    p.add_argument("--runs", type=int, default=1, help="timed runs per worker count (the best is kept)")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of each worker's Context (default 1)")
    p.add_argument("--image", default=str(ROOT / "data" / "box.png"))
    p.add_argument("--json", help="also write the figures here")
    p.add_argument("--plain", action="store_true",
                   help="also time the same pairs on N plain processes (no Dask): the machine's own scaling")
    a = p.parse_args()
    counts = [int(n) for n in a.workers.split(",")]
    # The one-process loop rate is taken first, on a quiet machine (measured after a cluster it read up to 1.5x
    # low while the cluster's processes were still exiting), and each N is judged against it.
    spin_one = spin_rate(1, runs=5) if a.plain else None
    with tempfile.TemporaryDirectory() as folder:
        pairs = make_pairs(a.image, a.pairs, folder)
        rows = []
        for n in counts:
            rate, busy, described = pairs_per_second(pairs, n, a.backend, a.threads, a.runs)
            rows.append({"workers": n, "pairs_per_s": rate, "busy": busy, "contexts": described})
            base = rows[0]["pairs_per_s"] / rows[0]["workers"]
            plain = ""
            if a.plain:
                rows[-1]["plain_pairs_per_s"] = plain_rate = plain_pairs_per_second(pairs, n, a.backend, a.threads,
                                                                                    a.runs)
                rows[-1]["cpu_loop_speed_up"] = spin = spin_rate(n) / spin_one
                plain_base = rows[0]["plain_pairs_per_s"] / rows[0]["workers"]
                plain = (f", plain processes {plain_rate:7.2f} pairs/s (speed-up {plain_rate / plain_base:5.2f};"
                         f" Dask / plain {rate / plain_rate:5.2f}), a pure CPU loop on {n} processes {spin:5.2f}x")
            print(f"{n:>3} workers: {rate:7.2f} pairs/s, speed-up {rate / base:5.2f}, efficiency "
                  f"{rate / base / n:5.2f}, workers busy {busy:5.1%}{plain}   ({described[0]})", flush=True)
    info = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host": platform.node(), "cpus": cpus,
            "load_average": os.getloadavg(), "python": platform.python_version(), "dask": distributed.__version__,
            "backend": a.backend, "threads": a.threads, "pairs": a.pairs, "image": a.image, "runs": a.runs,
            "results": rows}
    print(json.dumps({k: v for k, v in info.items() if k != "results"}))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
