"""Per-pair time and minor page faults of `register` on the CPU backend (one thread), in 1 and in N processes
running at once (no Dask, no scheduling): how much one item of a batch slows down when N run together, and
whether the hot path allocates (docs/performance/python.md, "Scale-out on Dask").

    PYTHONPATH=build/python python python/benchmarks/concurrent_items.py [N ...]   (default: 1 2)

Each process makes its Context, registers data/box.png against one warp of it once, waits until every process
has done so (a barrier: on a loaded host spawning N processes takes long), then registers the pair 40 times: the median time per pair and the minor page faults per pair are printed,
the median (least, most) over the N processes."""
import multiprocessing as mp
import pathlib
import resource
import statistics
import sys
import tempfile
import time

import numpy as np

import spectrasift as ss

BOX = str(pathlib.Path(__file__).resolve().parents[2] / "data" / "box.png")


def work(args):
    """In one process: its Context, one warm-up register, then the median time and minor faults per pair."""
    fixed_path, moving_path, reps, ready = args
    ctx = ss.Context("cpu", 0, 1)
    fixed, moving = ss.read_image(fixed_path), ss.read_image(moving_path)
    ss.register(ctx, fixed, moving)
    ready.wait()  # all processes start together
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        ss.register(ctx, fixed, moving)
        times.append(time.perf_counter() - t0)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return statistics.median(times) * 1e3, faults / reps


def main():
    image = ss.read_image(BOX)
    h, w = image.shape
    size = (int(w * 1.1), int(h * 1.1))
    folder = tempfile.mkdtemp()
    with ss.Context("cpu") as ctx:
        turn = np.array([[0.95, -0.2, 30], [0.2, 0.95, 5], [0, 0, 1]])
        warped = ss.warp(ctx, image, turn, *size)
    moving = pathlib.Path(folder) / "warp.pgm"
    moving.write_bytes(b"P5\n%d %d\n255\n" % size + np.ascontiguousarray(warped, np.uint8).tobytes())
    spawn = mp.get_context("spawn")
    for n in [int(x) for x in sys.argv[1:]] or [1, 2]:
        # n items on n processes: a process waiting at the barrier takes no second item, so each takes one.
        with spawn.Manager() as manager, spawn.Pool(n) as pool:
            ready = manager.Barrier(n)
            results = pool.map(work, [(BOX, str(moving), 40, ready)] * n, chunksize=1)
        ms = [r[0] for r in results]
        faults = [r[1] for r in results]
        print(f"{n:>3} processes: per pair median {statistics.median(ms):.2f} ms (least {min(ms):.2f}, most "
              f"{max(ms):.2f}), minor faults per pair {statistics.median(faults):.0f}", flush=True)
    moving.unlink()
    pathlib.Path(folder).rmdir()


if __name__ == "__main__":
    main()
