"""Threads: the GIL is released while the library computes; a Context used from two threads raises
RuntimeError (never crashes); two Contexts on two threads give the results of running one after the other."""
import threading
import time

import numpy as np
import pytest

import spectrasift as ss


def big_image(test_data) -> np.ndarray:
    img = ss.read_image(test_data / "camera.png")
    return np.ascontiguousarray(np.tile(img, (3, 3)))


def test_gil_is_released_during_sift(test_data):
    img = big_image(test_data)
    with ss.Context("cpu", threads=1) as c:
        ss.sift(c, img)  # warm up (plans, buffers)
        ticks = 0
        done = threading.Event()

        def work():
            ss.sift(c, img)
            done.set()

        t = threading.Thread(target=work)
        t0 = time.perf_counter()
        t.start()
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)
        t.join()
        elapsed = time.perf_counter() - t0
    # With the GIL held for the whole call this thread could not run until it ended.
    assert elapsed > 0.05 and ticks >= 10


def test_context_used_from_two_threads_raises(test_data):
    img = big_image(test_data)
    errors: list[BaseException] = []
    with ss.Context("cpu", threads=1) as c:
        started = threading.Event()

        def first():
            started.set()
            ss.sift(c, img)

        t = threading.Thread(target=first)
        t.start()
        started.wait()
        time.sleep(0.05)  # the first call is inside the library now
        for _ in range(20):
            try:
                ss.sift(c, img[:64, :64])
            except RuntimeError as e:
                errors.append(e)
                break
            time.sleep(0.01)
        t.join()
        assert errors and "another thread" in str(errors[0])
        assert len(ss.sift(c, img[:200, :200])) > 0  # the Context still works afterwards


def test_two_contexts_on_two_threads_agree(test_data):
    img = ss.read_image(test_data / "box.png")
    with ss.Context("cpu") as c:
        expected = ss.sift(c, img)
    results = [None, None]

    def run(i):
        with ss.Context("cpu", threads=1) as c:
            results[i] = ss.sift(c, img)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        assert np.array_equal(r.keypoints, expected.keypoints) and np.array_equal(r.descriptors, expected.descriptors)
