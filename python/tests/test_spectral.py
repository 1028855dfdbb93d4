"""spectral() and open_envi(): the CLI's bits, every memory order and sample type, the buffer read in place,
and agreement with Spectral Python (the limits of tests/spectral_spy_test.cpp)."""
import pathlib

import numpy as np
import pytest

import spectrasift as ss
from conftest import run_cli

PIXELS = [(10, 10), (40, 50), (33, 3)]


def read_envi_f32(hdr: pathlib.Path, dtype: str, k: int, lines: int, samples: int) -> np.ndarray:
    """An output of the CLI (BSQ, little-endian) as (lines, samples, k)."""
    data = np.fromfile(hdr.with_suffix(".img"), dtype).reshape(k, lines, samples)
    return data.transpose(1, 2, 0)


@pytest.mark.parametrize("metric", ["sam", "ed", "scc", "sid"])
@pytest.mark.parametrize("reduction", [[], ["--best"], ["--top", "2"], ["--threshold", "0.2"]])
def test_spectral_is_bit_identical_to_the_cli(ctx, cli, sample_data, tmp_path, metric, reduction):
    cube_path = sample_data / "sandiego_plane_60.hdr"
    out = tmp_path / "out.hdr"
    args = ["spectral", str(cube_path), "--metric", metric, "-o", str(out)] + reduction
    for x, y in PIXELS:
        args += ["--ref-pixel", f"{x},{y}"]
    run_cli(cli, *args)
    cube = ss.open_envi(cube_path)
    refs = ss.reference_pixels(cube, PIXELS)
    kw = {"best": True} if reduction == ["--best"] else {"top": 2} if reduction[:1] == ["--top"] else \
        {"threshold": 0.2} if reduction[:1] == ["--threshold"] else {}
    r = ss.spectral(ctx, cube, refs, metric=metric, **kw)
    k = r.scores.shape[2]
    assert r.scores.shape == (60, 60, k) and k == (3 if not reduction else 2 if kw.get("top") else 1)
    assert np.array_equal(r.scores, read_envi_f32(out, "<f4", k, 60, 60), equal_nan=True)
    if reduction:
        idx_hdr = tmp_path / "out_index.hdr"
        assert np.array_equal(r.index, read_envi_f32(idx_hdr, "<i4", k, 60, 60))
    else:
        assert r.index is None
    # The same cube as an array (the mapping's view) gives the same bits.
    s2, i2 = ss.spectral(ctx, cube.array, refs.spectra, metric=metric, **kw)
    assert np.array_equal(s2, r.scores, equal_nan=True)


def test_every_memory_order_and_sample_type(ctx, sample_data):
    cube = ss.open_envi(sample_data / "sandiego_plane_60.hdr")
    bip = np.array(cube.array)  # uint16, C order = BIP
    refs = bip[[5, 20], [7, 30], :].astype(np.float32)
    ref_scores, ref_index = ss.spectral(ctx, bip, refs, best=True)
    assert ss._core._last_input_address() == bip.ctypes.data  # C-contiguous: read in place
    views = {
        "bsq": np.ascontiguousarray(bip.transpose(2, 0, 1)).transpose(1, 2, 0),
        "bil": np.ascontiguousarray(bip.transpose(0, 2, 1)).transpose(0, 2, 1),
        "fortran": np.asfortranarray(bip),  # not a BSQ/BIL/BIP layout: copied
        "strided": np.repeat(bip, 2, axis=1)[:, ::2, :],  # every other sample of a wider array: copied
        "big-endian": bip.astype(">u2"),
    }
    for name, a in views.items():
        s, i = ss.spectral(ctx, a, refs, best=True)
        assert np.array_equal(s, ref_scores) and np.array_equal(i, ref_index), name
        if name in ("bsq", "bil", "big-endian"):
            assert ss._core._last_input_address() == a.__array_interface__["data"][0], name
    for t in (np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64):
        small = (bip // 64).astype(t)  # values that every type holds exactly
        s_t, i_t = ss.spectral(ctx, small, (refs // 64), best=True)
        s_f, i_f = ss.spectral(ctx, (bip // 64).astype(np.float32), (refs // 64), best=True)
        assert np.array_equal(s_t, s_f) and np.array_equal(i_t, i_f), t


def test_array_metadata_plays_the_headers_part(ctx, sample_data):
    bip = np.array(ss.open_envi(sample_data / "sandiego_plane_60.hdr").array)
    refs = bip[3, 4, :][None, :].astype(np.float32)
    bbl = [1] * bip.shape[2]
    bbl[:20] = [0] * 20
    full = ss.spectral(ctx, bip, refs).scores
    cut = ss.spectral(ctx, bip, refs, bbl=bbl).scores
    alone = ss.spectral(ctx, np.ascontiguousarray(bip[:, :, 20:]), refs[:, 20:]).scores
    assert not np.array_equal(full, cut) and np.array_equal(cut, alone)
    ignored = ss.spectral(ctx, bip, refs, data_ignore_value=float(bip[0, 0, 0]), best=True)
    assert ignored.index[0, 0, 0] == -1 and np.isnan(ignored.scores[0, 0, 0])


def test_open_envi_header_and_view(sample_data):
    cube = ss.open_envi(sample_data / "sandiego_plane_60.hdr")
    h = cube.header
    assert (h["samples"], h["lines"], h["bands"], h["data type"], h["interleave"]) == (60, 60, 189, 12, "bip")
    assert cube.shape == (60, 60, 189) and cube.dtype == np.dtype("<u2")
    assert not cube.array.flags.writeable
    raw = np.fromfile(sample_data / "sandiego_plane_60.img", "<u2").reshape(60, 60, 189)
    assert np.array_equal(cube.array, raw) and np.array_equal(np.asarray(cube), raw)


def test_spectral_python_agrees_on_the_hydice_scene(ctx, test_data):
    spectral = pytest.importorskip("spectral")
    cube = ss.open_envi(test_data / "hydice_data.hdr")
    targets = np.asarray(ss.open_envi(test_data / "hydice_data_targets.hdr").array)[:, :, 0]
    img = cube.array.astype(np.float64)
    xy = [(10, 10), (40, 50), (79, 99), (0, 0), (33, 3)]
    refs = np.array([img[targets != 0].mean(axis=0)] + [img[y, x, :] for x, y in xy])
    ours = ss.spectral(ctx, cube, refs.astype(np.float32), metric="sam").scores.astype(np.float64)
    angles = spectral.spectral_angles(img, refs)
    assert ours.shape == angles.shape == (100, 80, 6)
    assert np.abs(np.cos(ours) - np.cos(angles)).max() < 3e-6
    assert np.abs(ours - angles)[angles > 0.01].max() < 1e-4
    assert np.abs(ours - angles).max() < 5e-4
    assert (ours.argmin(axis=2) == angles.argmin(axis=2)).mean() >= 0.999


@pytest.mark.parametrize("interleave", ["bsq", "bil", "bip"])
def test_envi_files_of_every_interleave_and_byte_order(ctx, tmp_path, interleave):
    rng = np.random.default_rng(3)
    cube = rng.integers(-500, 3000, size=(7, 9, 5)).astype(np.int16)  # (lines, samples, bands)
    order = {"bsq": (2, 0, 1), "bil": (0, 2, 1), "bip": (0, 1, 2)}[interleave]
    (tmp_path / "c.img").write_bytes(np.ascontiguousarray(cube.transpose(order)).astype(">i2").tobytes())
    (tmp_path / "c.hdr").write_text(f"ENVI\nsamples = 9\nlines = 7\nbands = 5\nheader offset = 0\ndata type = 2\n"
                                    f"interleave = {interleave}\nbyte order = 1\n")
    envi = ss.open_envi(tmp_path / "c.hdr")
    assert envi.dtype == np.dtype(">i2") and np.array_equal(envi.array, cube)
    refs = cube[[1, 4], [2, 6], :].astype(np.float32)
    from_file = ss.spectral(ctx, envi, refs, metric="ed", top=2)
    from_array = ss.spectral(ctx, cube, refs, metric="ed", top=2)
    assert np.array_equal(from_file.scores, from_array.scores) and np.array_equal(from_file.index, from_array.index)
    assert from_file.index[1, 2, 0] == 0 and from_file.scores[1, 2, 0] == 0  # reference 0 is pixel (line 1, sample 2)


def test_an_envi_cube_pickles_as_its_path(sample_data):
    import pickle

    cube = ss.open_envi(sample_data / "sandiego_plane_60.hdr")
    again = pickle.loads(pickle.dumps(cube))
    assert again.path == cube.path and np.array_equal(again.array, cube.array)
