"""No leak over 1,000 calls: the resident set stays flat (sift, match, register's pieces, spectral, warp, errors)."""
import os

import numpy as np

import spectrasift as ss


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_rss_is_flat_over_1000_calls(test_data, sample_data):
    img = np.ascontiguousarray(ss.read_image(test_data / "box.png")[:96, :96])
    cube = ss.open_envi(sample_data / "sandiego_plane_60.hdr")
    refs = ss.reference_pixels(cube, [(3, 4), (20, 30)])
    with ss.Context("cpu", threads=2) as c:
        def one_round():
            f = ss.sift(c, img)
            ss.match(c, f, f)
            ss.spectral(c, cube, refs, best=True)
            ss.spectral(c, cube.array, refs.spectra, top=2)
            ss.warp(c, img, np.eye(3), 80, 80)
            try:
                ss.sift(c, img, sigma=-1)
            except ValueError:
                pass
            return f

        for _ in range(100):  # warm up: plans, buffers, allocator pools
            one_round()
        before = rss_bytes()
        for _ in range(1000):
            f = one_round()
        grown = rss_bytes() - before
    assert len(f) > 0
    # A leak of one feature set (~100 keypoints x 544 bytes) or one score cube (7 KB) per round would be 7 MB and more.
    assert grown < 4 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 1,000 rounds"
