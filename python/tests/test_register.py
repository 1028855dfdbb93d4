"""match(), register() and warp(): the CLI's bits, the result's fields, NoModelError and accept_weak."""
import numpy as np
import pytest

import spectrasift as ss
from conftest import run_cli


def test_match_is_the_clis(ctx, cli, test_data, sample_data):
    a, b = sample_data / "box.png", sample_data / "box_in_scene.png"
    j = run_cli(cli, "match", str(a), str(b), "--ratio", "0.75")
    m = ss.match(ctx, ss.read_image(a), ss.read_image(b), ratio=0.75)
    assert m.dtype == ss.MATCH_DTYPE and len(m) == j["match_count"] > 50
    assert [int(v) for v in m["query"]] == [x["query"] for x in j["matches"]]
    assert [int(v) for v in m["train"]] == [x["train"] for x in j["matches"]]
    assert np.array_equal(m["distance"], np.array([x["distance"] for x in j["matches"]], np.float32))


def test_register_is_bit_identical_to_the_cli(ctx, cli, sample_data, tmp_path):
    fixed, moving = sample_data / "box_in_scene.png", sample_data / "box.png"
    warped_png = tmp_path / "warped.png"
    j = run_cli(cli, "register", str(fixed), str(moving), "-o", str(warped_png))
    r = ss.register(ctx, ss.read_image(fixed), ss.read_image(moving))
    assert r.matrix.dtype == np.float64 and r.matrix.shape == (3, 3)
    assert np.array_equal(r.matrix, np.array(j["matrix"], np.float64))
    assert (r.inlier_count, r.match_count, r.iterations) == (j["inliers"], j["match_count"], j["iterations"])
    assert r.rms_px == j["rms_px"] and r.reliable and j["reliable"]
    assert r.inliers.dtype == bool and r.inliers.shape == (r.match_count,) and r.inliers.sum() == r.inlier_count
    assert r["matrix"] is r.matrix and set(r.times_ms) >= {"sift", "match", "ransac", "total"}
    assert r.verdict["log10_nfa"] == j["verdict"]["log10_nfa"]
    # warp: the CLI's warped picture (MOVING as stored, into FIXED's frame).
    fixed_img = ss.read_image(fixed)
    warped = ss.warp(ctx, ss.read_image(moving, gray=False), r.matrix, fixed_img.shape[1], fixed_img.shape[0])
    assert np.array_equal(warped, ss.read_image(warped_png, gray=False))


def test_register_options_and_features_input(ctx, cli, sample_data):
    fixed, moving = sample_data / "box_in_scene.png", sample_data / "box.png"
    j = run_cli(cli, "register", str(fixed), str(moving), "--model", "affine", "--threshold", "2", "--seed", "7",
                "--ratio", "0.7", "--msac", "--max-features", "400")
    ff = ss.sift(ctx, ss.read_image(fixed), max_features=400)
    fm = ss.sift(ctx, ss.read_image(moving), max_features=400)
    r = ss.register(ctx, ff, fm, model="affine", threshold=2, seed=7, ratio=0.7, msac=True)
    assert r.model == "affine" and np.array_equal(r.matrix, np.array(j["matrix"]))
    assert np.array_equal(r.matrix[2], [0, 0, 1])
    assert r.inlier_count == j["inliers"]


def test_no_model_raises_and_accept_weak_keeps_it(ctx, test_data):
    rng = np.random.default_rng(1)
    noise = [(rng.random((160, 160)) * 255).astype(np.uint8) for _ in range(2)]
    with pytest.raises(ss.NoModelError) as e:
        ss.register(ctx, noise[0], noise[1])
    assert isinstance(e.value, RuntimeError) and e.value.result.reliable is False
    # A wrong pair with a "model" (README: graf1 onto box_in_scene folds and mirrors): refused, or kept weakly.
    fixed, moving = ss.read_image(test_data / "box.png"), ss.read_image(test_data / "graf1_gray.png")
    try:
        ss.register(ctx, fixed, moving)
        pytest.fail("an unreliable model was accepted")
    except ss.NoModelError as err:
        if err.result.match_count >= 8 and "no model" not in str(err):
            with pytest.warns(RuntimeWarning):
                weak = ss.register(ctx, fixed, moving, accept_weak=True)
            assert weak.reliable is False and weak.verdict["problems"]


def test_warp_keeps_type_and_channels(ctx):
    img = (np.arange(40 * 30 * 3) % 251).astype(np.uint16).reshape(30, 40, 3)
    shift = np.array([[1, 0, 2], [0, 1, 1], [0, 0, 1]], np.float64)
    out = ss.warp(ctx, img, shift, 50, 35)
    assert out.shape == (35, 50, 3) and out.dtype == np.uint16
    assert np.array_equal(out[1:31, 2:42], img)
