"""sift(): the CLI's bits, OpenCV's keypoints, the buffer read in place, the options, pickling."""
import pickle

import numpy as np
import pytest

import spectrasift as ss
from conftest import read_features_bin, run_cli

FIELDS = ("x", "y", "size", "angle", "response", "octave", "layer")


@pytest.mark.parametrize("name", ["box.png", "HappyFish.jpg"])
def test_sift_is_bit_identical_to_the_cli(ctx, cli, test_data, tmp_path, name):
    out = tmp_path / "f.bin"
    run_cli(cli, "sift", str(test_data / name), "-o", str(out))
    kp, desc, width, height = read_features_bin(out)
    image = ss.read_image(test_data / name)  # gray=True: the grey the CLI runs SIFT on
    f = ss.sift(ctx, image)
    assert (f.image_width, f.image_height) == (width, height) == (image.shape[1], image.shape[0])
    assert len(f) == len(kp) > 30
    for name_ in FIELDS:
        assert np.array_equal(f.keypoints[name_], kp[name_]), name_
    assert np.array_equal(f.descriptors, desc)


def test_sift_options_are_the_clis(ctx, cli, test_data, tmp_path):
    out = tmp_path / "f.bin"
    run_cli(cli, "sift", str(test_data / "box.png"), "-o", str(out), "--max-features", "100", "--octave-layers", "4",
            "--sigma", "1.8", "--contrast-threshold", "0.03", "--edge-threshold", "8", "--no-upsample", "--root-sift")
    kp, desc, _, _ = read_features_bin(out)
    f = ss.sift(ctx, ss.read_image(test_data / "box.png"), max_features=100, octave_layers=4, sigma=1.8,
                contrast_threshold=0.03, edge_threshold=8, no_upsample=True, root_sift=True)
    assert len(f) == len(kp) >= 100
    for name_ in FIELDS:
        assert np.array_equal(f.keypoints[name_], kp[name_]), name_
    assert np.array_equal(f.descriptors, desc)


def test_u8_descriptors_are_the_clis(ctx, cli, test_data, tmp_path):
    # spectrasift sift --descriptor-type u8 writes a version 2 file of uint8 rows: the same bits as sift(u8).
    out = tmp_path / "u.bin"
    assert run_cli(cli, "sift", str(test_data / "box.png"), "-o", str(out), "--descriptor-type", "u8")[
        "options"]["descriptor_type"] == "u8"
    kp, desc, _, _ = read_features_bin(out)
    assert desc.dtype == np.uint8
    f = ss.sift(ctx, ss.read_image(test_data / "box.png"), descriptor_type="u8")
    assert len(f) == len(kp) > 30
    for name_ in FIELDS:
        assert np.array_equal(f.keypoints[name_], kp[name_]), name_
    assert f.descriptors.dtype == np.uint8 and np.array_equal(f.descriptors, desc)
    r = ss.read_features(out)
    assert r.descriptor_type == "u8" and r.descriptors.dtype == np.uint8 and np.array_equal(r.descriptors, desc)


def test_descriptor_type_u8(ctx, test_data):
    image = ss.read_image(test_data / "box.png")
    f = ss.sift(ctx, image)
    u = ss.sift(ctx, image, descriptor_type="u8")
    assert f.descriptor_type == "f32" and f.descriptors.dtype == np.float32
    assert u.descriptor_type == "u8" and u.descriptors.dtype == np.uint8
    assert u.descriptors.shape == f.descriptors.shape == (len(f), 128)
    assert not u.descriptors.flags.writeable
    assert np.array_equal(u.keypoints, f.keypoints)
    # The same values (integers 0..255), either way round.
    assert np.array_equal(u.descriptors, f.descriptors.astype(np.uint8))
    assert np.array_equal(u.descriptors_f32(), f.descriptors) and u.descriptors_f32().dtype == np.float32
    assert np.array_equal(u.descriptors_u8(), u.descriptors) and np.array_equal(f.descriptors_u8(), u.descriptors)
    assert np.array_equal(f.descriptors_f32(), f.descriptors)
    kp, desc = u
    assert desc.dtype == np.uint8
    # NumPy types and the long names name the same types; the name is case-insensitive.
    for t in (np.uint8, np.dtype(np.uint8), "uint8", "U8"):
        g = ss.sift(ctx, image, descriptor_type=t)
        assert g.descriptor_type == "u8" and np.array_equal(g.descriptors, u.descriptors), t
    for t in (np.float32, np.dtype("float32"), "float32", "f32"):
        assert ss.sift(ctx, image, descriptor_type=t).descriptor_type == "f32", t
    assert "u8 descriptors" in repr(u)


def test_u8_features_match_as_f32_ones(ctx, sample_data):
    box, scene = (ss.read_image(sample_data / n) for n in ("box.png", "box_in_scene.png"))
    fq, ft = ss.sift(ctx, box), ss.sift(ctx, scene)
    uq, ut = ss.sift(ctx, box, descriptor_type="u8"), ss.sift(ctx, scene, descriptor_type="u8")
    ref = ss.match(ctx, fq, ft)
    assert len(ref) > 30
    for q, t in ((uq, ut), (uq, ft), (fq, ut)):
        assert np.array_equal(ss.match(ctx, q, t), ref)
        assert np.array_equal(ss.match(ctx, q, t, mutual=True), ss.match(ctx, fq, ft, mutual=True))
    # Images matched with descriptor_type="u8" (SIFT options pass through), and registration.
    assert np.array_equal(ss.match(ctx, box, scene, descriptor_type="u8"), ref)
    r = ss.register(ctx, scene, box, descriptor_type="u8")
    assert r.moving_features.descriptor_type == "u8"
    assert np.array_equal(r.matrix, ss.register(ctx, scene, box).matrix)


def test_features_from_uint8_arrays_and_pickles(ctx, test_data):
    f = ss.sift(ctx, ss.read_image(test_data / "box.png"))
    u8 = f.descriptors_u8()
    g = ss.Features(f.keypoints, u8, f.image_width, f.image_height)
    assert g.descriptor_type == "u8" and g.descriptors.dtype == np.uint8 and np.array_equal(g.descriptors, u8)
    # Any other type gives floats (as before u8 features): int64 from Python lists, float64.
    h = ss.Features(f.keypoints, u8.astype(np.int64), f.image_width, f.image_height)
    assert h.descriptor_type == "f32" and np.array_equal(h.descriptors, f.descriptors)
    assert ss.Features(f.keypoints, f.descriptors.astype(np.float64)).descriptor_type == "f32"
    # A non-contiguous uint8 view is copied, still u8.
    wide = np.zeros((len(f), 256), np.uint8)
    wide[:, ::2] = u8
    assert np.array_equal(ss.Features(f.keypoints, wide[:, ::2]).descriptors, u8)
    assert np.array_equal(ss.match(ctx, g, f), ss.match(ctx, f, f))
    p = pickle.loads(pickle.dumps(g))
    assert p.descriptor_type == "u8" and np.array_equal(p.descriptors, u8) and np.array_equal(p.keypoints, g.keypoints)
    assert (p.image_width, p.image_height) == (f.image_width, f.image_height)
    # f32 features pickle as before (a 4-item state, which older pickles hold too).
    assert len(f.__getstate__()) == 4 and len(g.__getstate__()) == 5
    assert pickle.loads(pickle.dumps(f)).descriptor_type == "f32"
    with pytest.raises(ValueError, match="128"):
        ss.Features(f.keypoints, u8[:, :64])


def test_u8_feature_files_read_back(ctx, cli, test_data, tmp_path):
    for fmt in ("bin", "json", "key"):
        out = tmp_path / f"u.{fmt}"
        run_cli(cli, "sift", str(test_data / "box.png"), "-o", str(out), "--descriptor-type", "u8")
        f = ss.read_features(out)
        ref = ss.sift(ctx, ss.read_image(test_data / "box.png"), descriptor_type="u8")
        # Lowe's .key names no type: it reads as f32, the same values.
        assert f.descriptor_type == ("f32" if fmt == "key" else "u8"), fmt
        assert np.array_equal(f.descriptors_u8(), ref.descriptors), fmt


def test_c_contiguous_input_is_used_in_place(ctx, test_data):
    image = ss.read_image(test_data / "box.png")
    assert image.flags.c_contiguous
    ss.sift(ctx, image)
    assert ss._core._last_input_address() == image.ctypes.data
    # A strided view is copied into a dense array first: the library sees another buffer, the same pixels.
    wide = np.zeros((image.shape[0], image.shape[1] * 2), np.uint8)
    wide[:, ::2] = image
    f = ss.sift(ctx, wide[:, ::2])
    assert ss._core._last_input_address() != wide.ctypes.data
    assert np.array_equal(f.keypoints, ss.sift(ctx, image).keypoints)


def test_sample_types_and_colour(ctx, test_data):
    grey = ss.read_image(test_data / "box.png")
    reference = ss.sift(ctx, grey)
    # uint16 = 257 x uint8 is divided by 257 exactly: the same features.
    f16 = ss.sift(ctx, grey.astype(np.uint16) * 257)
    assert np.array_equal(f16.keypoints, reference.keypoints)
    assert np.array_equal(f16.descriptors, reference.descriptors)
    # Grey as (H, W, 1) and as RGB with equal channels is the same image; BGR swaps to RGB.
    assert np.array_equal(ss.sift(ctx, grey[:, :, None]).keypoints, reference.keypoints)
    rgb = np.repeat(grey[:, :, None], 3, axis=2)
    assert np.array_equal(ss.sift(ctx, rgb).keypoints, reference.keypoints)
    colour = ss.read_image(test_data / "HappyFish_cv2_rgb.png", gray=False)
    assert colour.ndim == 3 and colour.shape[2] == 3
    bgr = np.ascontiguousarray(colour[:, :, ::-1])
    assert np.array_equal(ss.sift(ctx, bgr, bgr=True).keypoints, ss.sift(ctx, colour).keypoints)
    f32 = ss.sift(ctx, grey.astype(np.float32) / 255)
    assert abs(len(f32) - len(reference)) <= 0.02 * len(reference)


def test_mask_and_max_features(ctx, test_data):
    grey = ss.read_image(test_data / "box.png")
    all_ = ss.sift(ctx, grey)
    mask = np.zeros(grey.shape, np.uint8)
    mask[:, : grey.shape[1] // 2] = 1
    left = ss.sift(ctx, grey, mask=mask)
    x = np.rint(all_.keypoints["x"]).astype(int).clip(0, grey.shape[1] - 1)
    y = np.rint(all_.keypoints["y"]).astype(int).clip(0, grey.shape[0] - 1)
    assert len(left) == int((mask[y, x] != 0).sum()) < len(all_)
    assert len(ss.sift(ctx, grey, max_features=50)) >= 50


def test_features_unpack_pickle_and_rebuild(ctx, test_data):
    f = ss.sift(ctx, ss.read_image(test_data / "box.png"))
    kp, desc = f
    assert kp.dtype == ss.KEYPOINT_DTYPE and desc.shape == (len(f), 128) and desc.dtype == np.float32
    assert not kp.flags.writeable and not desc.flags.writeable
    u8 = f.descriptors_u8()
    assert u8.dtype == np.uint8 and np.array_equal(u8, desc.astype(np.uint8))  # integers 0..255 by default
    g = pickle.loads(pickle.dumps(f))
    assert np.array_equal(g.keypoints, kp) and np.array_equal(g.descriptors, desc)
    assert (g.image_width, g.image_height) == (f.image_width, f.image_height)
    h = ss.Features(kp, desc, f.image_width, f.image_height)
    assert np.array_equal(ss.match(ctx, h, f), ss.match(ctx, f, f))


def test_feature_files_read_back(ctx, cli, test_data, tmp_path):
    for fmt in ("bin", "json"):
        out = tmp_path / f"f.{fmt}"
        run_cli(cli, "sift", str(test_data / "box.png"), "-o", str(out))
        f = ss.read_features(out)
        ref = ss.sift(ctx, ss.read_image(test_data / "box.png"))
        for name_ in FIELDS:
            assert np.array_equal(f.keypoints[name_], ref.keypoints[name_]), (fmt, name_)


def test_an_image_without_features(ctx):
    f = ss.sift(ctx, np.full((80, 90), 128, np.uint8))
    assert len(f) == 0 and f.keypoints.shape == (0,) and f.descriptors.shape == (0, 128)
    assert (f.image_width, f.image_height) == (90, 80)
    assert len(ss.match(ctx, f, f)) == 0 and ss.match(ctx, f, f).dtype == ss.MATCH_DTYPE
    assert ss.to_cv2_keypoints(f) == [] if _has_cv2() else True
    with pytest.raises(ss.NoModelError):
        ss.register(ctx, f, f)


def _has_cv2() -> bool:
    try:
        import cv2  # noqa: F401
    except ImportError:
        return False
    return True
