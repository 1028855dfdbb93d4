"""Bad input raises the right exception with the library's message; the package's surface."""
import numpy as np
import pytest

import spectrasift as ss


def test_version_devices_and_context():
    assert ss.__version__.count(".") == 2
    devs = ss.devices()
    assert devs and devs[0]["backend"] == "cpu" and {"name", "index", "global_memory"} <= set(devs[0])
    assert "cpu" in ss.compiled_backends()
    with ss.Context("cpu", threads=2) as c:
        assert c.backend == "cpu" and c.device["backend"] == "cpu" and "cpu:0" in c.describe()
    assert c.closed
    with pytest.raises(RuntimeError, match="closed"):
        ss.sift(c, np.zeros((64, 64), np.uint8))


@pytest.mark.parametrize("call, exc, message", [
    (lambda c: ss.sift(c, np.zeros((64, 64), np.float64)), ValueError, "uint8, uint16 or float32"),
    (lambda c: ss.sift(c, np.zeros((4, 64, 64, 1), np.uint8)), ValueError, "dimensions"),
    (lambda c: ss.sift(c, np.zeros((64, 64, 5), np.uint8)), ValueError, "channels"),
    (lambda c: ss.sift(c, np.zeros((0, 64), np.uint8)), ValueError, "empty"),
    (lambda c: ss.sift(c, np.zeros((64, 64), np.uint8), octave_layers=0), ValueError, "octave_layers"),
    (lambda c: ss.sift(c, np.zeros((64, 64), np.uint8), sigma=-1), ValueError, "sigma"),
    (lambda c: ss.sift(c, np.zeros((64, 64), np.uint8), mask=np.ones((8, 8))), ValueError, "mask"),
    (lambda c: ss.sift("ctx", np.zeros((64, 64), np.uint8)), ValueError, "Context"),
    (lambda c: ss.sift(c, np.zeros((64, 64), np.uint8), descriptor_type="f16"), ValueError, "f16"),
    (lambda c: ss.sift(c, np.zeros((64, 64), np.uint8), descriptor_type=np.int16), ValueError, "descriptor_type"),
    (lambda c: ss.sift(c, np.zeros((64, 64), np.uint8), descriptor_type=None), ValueError, "descriptor_type"),
    (lambda c: ss.sift(c, np.zeros((64, 64), np.uint8), root_sift=True, descriptor_type="u8"), ValueError,
     "RootSIFT"),
    (lambda c: ss.match(c, np.zeros((64, 64), np.uint8), np.zeros((64, 64), np.uint8), ratio=2), ValueError, "ratio"),
    (lambda c: ss.register(c, np.zeros((64, 64), np.uint8), np.zeros((64, 64), np.uint8), model="rigid"), ValueError,
     "rigid"),
    (lambda c: ss.register(c, np.zeros((64, 64), np.uint8), np.zeros((64, 64), np.uint8), threshold=0), ValueError,
     "threshold"),
    (lambda c: ss.warp(c, np.zeros((8, 8), np.uint8), np.eye(2), 8, 8), ValueError, "3 x 3"),
    (lambda c: ss.spectral(c, np.zeros((4, 4, 3), np.float32), np.ones(3), metric="cos"), ValueError, "cos"),
    (lambda c: ss.spectral(c, np.zeros((4, 4, 3), np.float32), np.ones(4)), ValueError, "bands"),
    (lambda c: ss.spectral(c, np.zeros((4, 4, 3), np.int8), np.ones(3)), ValueError, "ENVI type"),
    (lambda c: ss.spectral(c, np.zeros((4, 4, 3), np.float32), np.ones(3), best=True, top=2), ValueError,
     "at most one"),
    (lambda c: ss.spectral(c, np.zeros((4, 4, 3), np.float32), np.ones((2, 3)), top=3), ValueError, "top 3"),
])
def test_bad_arguments_raise_value_error(ctx, call, exc, message):
    with pytest.raises(exc, match=message):
        call(ctx)


def test_library_errors_carry_code_and_message(ctx, tmp_path):
    with pytest.raises(ValueError) as e:
        ss.sift(ctx, np.zeros((64, 64), np.uint8), edge_threshold=0)
    assert e.value.code == "invalid_argument" and str(e.value).startswith("sift: edge_threshold")
    with pytest.raises(ValueError, match="backend"):
        ss.Context("tpu")


def test_files_raise_os_error(tmp_path):
    with pytest.raises(OSError) as e:
        ss.read_image(tmp_path / "missing.png")
    assert "missing.png" in str(e.value) and e.value.code == "io"
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    with pytest.raises(OSError, match="bad.png"):
        ss.read_image(bad)
    with pytest.raises(OSError, match="missing.hdr"):
        ss.open_envi(tmp_path / "missing.hdr")
    hdr = tmp_path / "short.hdr"
    hdr.write_text("ENVI\nsamples = 10\nlines = 10\nbands = 3\ndata type = 4\ninterleave = bsq\nbyte order = 0\n")
    (tmp_path / "short.img").write_bytes(b"\0" * 100)
    with pytest.raises(OSError, match="short"):
        ss.open_envi(hdr)
    with pytest.raises(OSError):
        ss.read_features(tmp_path / "missing.bin")


def test_missing_device_raises_runtime_error():
    backends = ss.compiled_backends()
    for name in ("cuda", "opencl"):
        has_device = any(d["backend"] == name for d in ss.devices())
        if name in backends and has_device:
            continue
        with pytest.raises(RuntimeError) as e:
            ss.Context(name)
        assert e.value.code in ("backend_unavailable", "unsupported")


def test_memory_budget_raises_memory_error():
    with ss.Context("cpu", max_memory=1 << 20) as c:
        with pytest.raises(MemoryError, match="max-memory|budget|memory"):
            ss.sift(c, np.zeros((512, 512), np.uint8))


def test_every_public_name_has_a_stub_and_a_docstring():
    import ast
    import pathlib

    stub = pathlib.Path(ss.__file__).with_name("__init__.pyi")
    assert (stub.parent / "py.typed").exists()
    tree = ast.parse(stub.read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    stubbed |= {t.id for n in tree.body if isinstance(n, ast.AnnAssign) for t in [n.target]}
    assert set(ss.__all__) - stubbed == set()
    for name in ss.__all__:
        obj = getattr(ss, name)
        if callable(obj) and not isinstance(obj, type(ss.KEYPOINT_DTYPE)):
            assert obj.__doc__, name
