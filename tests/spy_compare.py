#!/usr/bin/python3
"""Spectral Python's spectral_angles on an ENVI cube against spectrasift's scores (called by
tests/spectral_spy_test.cpp, run with Debian's /usr/bin/python3 and python3-spectral).

usage: spy_compare.py CUBE.hdr TARGETS.hdr OURS.f32 X,Y [X,Y ...]
References: the mean spectrum of the target map's pixels, then each pixel X,Y. OURS.f32 holds
spectrasift's SAM scores, float32, one band per reference (BSQ, little-endian). Prints one JSON object."""
import json
import sys

import numpy as np
import spectral


def auc(score, label):
    pos, neg = score[label == 1], score[label == 0]
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def main():
    cube_hdr, targets_hdr, ours_path = sys.argv[1:4]
    xy = [tuple(int(v) for v in a.split(",")) for a in sys.argv[4:]]
    img = spectral.open_image(cube_hdr).load().astype(np.float64)  # lines x samples x bands
    lines, samples, bands = img.shape
    targets = np.asarray(spectral.open_image(targets_hdr).load()).reshape(lines, samples)
    refs = [img[targets != 0].mean(axis=0)] + [img[y, x, :] for x, y in xy]
    members = np.array(refs)
    angles = spectral.spectral_angles(img, members)  # lines x samples x refs, float64
    ours = np.fromfile(ours_path, dtype="<f4").reshape(len(refs), lines, samples).transpose(1, 2, 0)
    diff = np.abs(ours.astype(np.float64) - angles)
    cos_diff = np.abs(np.cos(ours.astype(np.float64)) - np.cos(angles))
    label = (targets != 0).ravel().astype(int)
    out = {
        "spy_version": spectral.__version__,
        "pixels": int(lines * samples),
        "references": len(refs),
        "max_abs_diff_rad": float(diff.max()),
        # acos is ill-conditioned near 0: away from it the angle itself is compared tightly.
        "max_abs_diff_rad_above_0_01": float(diff[angles > 0.01].max()),
        "max_cos_diff": float(cos_diff.max()),
        "best_agreement": float((ours.argmin(axis=2) == angles.argmin(axis=2)).mean()),
        "auc_spy": auc(-angles[:, :, 0].ravel(), label),
        "auc_ours": auc(-ours[:, :, 0].astype(np.float64).ravel(), label),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
