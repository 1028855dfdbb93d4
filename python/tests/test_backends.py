"""Every other backend with a device on this machine (OpenCL on PoCL here; CUDA and NVIDIA OpenCL on the GPU
machine) gives the CPU backend's SIFT bits and spectral best matches through the package, as in the C++ suite."""
import numpy as np
import pytest

import spectrasift as ss

BACKENDS = sorted({d["backend"] for d in ss.devices()} - {"cpu"})


@pytest.mark.parametrize("backend", BACKENDS or [pytest.param("none", marks=pytest.mark.skip("no other backend"))])
def test_backend_agrees_with_the_cpu(backend, test_data, sample_data):
    img = ss.read_image(test_data / "box.png")
    cube = ss.open_envi(sample_data / "sandiego_plane_60.hdr")
    refs = ss.reference_pixels(cube, [(10, 10), (40, 50), (33, 3)])
    with ss.Context("cpu") as c:
        f_cpu = ss.sift(c, img)
        s_cpu, i_cpu = ss.spectral(c, cube, refs, best=True)
    with ss.Context(backend) as c:
        assert c.backend == backend
        f = ss.sift(c, img)
        s, i = ss.spectral(c, cube, refs, best=True)
        m = ss.match(c, f, f_cpu)
    assert np.array_equal(f.keypoints, f_cpu.keypoints) and np.array_equal(f.descriptors, f_cpu.descriptors)
    assert np.array_equal(m["query"], m["train"]) or len(m) == 0  # each keypoint matches itself (or ties fail)
    assert (i == i_cpu).mean() >= 0.9999
    assert np.allclose(s, s_cpu, rtol=0, atol=1e-6)
