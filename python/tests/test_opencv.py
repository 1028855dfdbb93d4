"""Agreement with cv2.SIFT (OpenCV 4.6) on the pictures and with the limits of tests/sift_test.cpp, and the
cv2.KeyPoint conversion (OpenCV's packed octave)."""
import numpy as np
import pytest

import spectrasift as ss

cv2 = pytest.importorskip("cv2")


def agreement(ours: ss.Features, ck, cd):
    """OpenCV keypoints that have one of ours within 1 px, size within 10 %, angle within 10 degrees."""
    kp = ours.keypoints
    cx = np.array([k.pt[0] for k in ck])
    cy = np.array([k.pt[1] for k in ck])
    cs = np.array([k.size for k in ck])
    ca = np.array([k.angle for k in ck])
    dist = np.hypot(kp["x"][None, :] - cx[:, None], kp["y"][None, :] - cy[:, None])
    dang = np.abs(kp["angle"][None, :] - ca[:, None]) % 360
    close = (dist <= 1) & (np.abs(kp["size"][None, :] - cs[:, None]) <= 0.1 * cs[:, None]) & \
            (np.minimum(dang, 360 - dang) <= 10)
    dist = np.where(close, dist, np.inf)
    best = dist.argmin(axis=1)
    matched = np.isfinite(dist.min(axis=1))
    desc = np.linalg.norm(ours.descriptors[best[matched]].astype(np.float64) - cd[matched], axis=1)
    return matched, best, close.any(axis=0).mean(), desc


@pytest.mark.parametrize("name", ["box.png", "camera.png", "coins.png"])
def test_keypoints_and_descriptors_agree_with_cv2(ctx, test_data, name):
    img = cv2.imread(str(test_data / name), cv2.IMREAD_GRAYSCALE)
    ck, cd = cv2.SIFT_create().detectAndCompute(img, None)
    ours = ss.sift(ctx, img)
    assert len(ck) > 100
    matched, best, precision, desc = agreement(ours, ck, cd)
    assert matched.mean() >= 0.99
    assert precision >= 0.99
    assert np.median(desc) <= 1.0
    assert np.percentile(desc, 95) <= 4.0
    # The packed octave of to_cv2_keypoints is OpenCV's: octave and layer exactly, the sub-layer offset byte
    # (round((offset + 0.5) * 255)) within one step (positions agree to ~1e-4 px, not to the bit).
    ours_cv = ss.to_cv2_keypoints(ours)
    pairs = [(ours_cv[j].octave, ck[i].octave) for i, j in zip(np.flatnonzero(matched), best[matched])]
    assert np.mean([(a & 0xFFFF) == (b & 0xFFFF) for a, b in pairs]) >= 0.99
    assert max(abs((a >> 16) - (b >> 16)) for a, b in pairs) <= 1


def test_u8_descriptors_agree_with_cv2_cv_8u(ctx, test_data):
    # cv2.SIFT_create(..., descriptorType=cv2.CV_8U) and descriptor_type="u8": both uint8, and ours agree with
    # OpenCV's as the float ones do. By keyword: from OpenCV 4.8 on a sixth positional argument can be taken as
    # enable_precise_upscale (another overload), which left float32 descriptors on the GPU machine's OpenCV 5.
    img = cv2.imread(str(test_data / "box.png"), cv2.IMREAD_GRAYSCALE)
    ck, cd = cv2.SIFT_create(0, 3, 0.04, 10, 1.6, descriptorType=cv2.CV_8U).detectAndCompute(img, None)
    ours = ss.sift(ctx, img, descriptor_type="u8")
    assert cd.dtype == ours.descriptors.dtype == np.uint8
    matched, _, precision, desc = agreement(ours, ck, cd.astype(np.float64))
    assert matched.mean() >= 0.99 and precision >= 0.99
    assert np.median(desc) <= 1.0


def test_cv2_computes_our_descriptors_from_our_keypoints(ctx, test_data):
    img = cv2.imread(str(test_data / "box.png"), cv2.IMREAD_GRAYSCALE)
    ours = ss.sift(ctx, img)
    kps = ours.to_cv2()
    assert all(isinstance(k, cv2.KeyPoint) for k in kps) and len(kps) == len(ours)
    kps2, cd = cv2.SIFT_create().compute(img, kps)
    assert len(kps2) == len(kps)
    diff = np.linalg.norm(cd.astype(np.float64) - ours.descriptors, axis=1)
    assert np.median(diff) <= 1.0
