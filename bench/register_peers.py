"""`register` of two 4K photographs, whole job in one process: spectrasift against OpenCV on the host cores, same run
(issue 19's row "register two 4K photographs, whole command in process: >= 100x OpenCV on 16 cores").

    PYTHONPATH=build/python python bench/register_peers.py [--image PHOTO] [--backend cuda] [--runs 10]
        [--cv-threads 16]

MOVING is PHOTO warped by a planted homography (turn 8 degrees, scale 0.9, a shift; cv2.warpPerspective, written
as PNG in a temporary folder), so that both tools read the same two files and the answer is known. Each run times,
in one process:
  read       decode both files (ours: spectrasift.read_image; OpenCV: cv2.imread, grey);
  register   SIFT of both images, matching with the ratio test 0.8, RANSAC homography (threshold 3 px);
  warp       MOVING warped into FIXED's frame (the CLI's output picture), back in host memory;
and the whole = read + register + warp (the PNG encoding of the picture is left out of both: it is the same
library call whichever tool made the pixels). Medians of --runs after one warm-up; ours with one Context made
before the runs, as a process serving many jobs keeps it. The corner error of each tool's model against the
planted homography is printed with its row, so that a fast wrong answer shows.
"""
import argparse
import pathlib
import statistics
import sys
import tempfile
import time

import cv2
import numpy as np

import spectrasift as ss

ROOT = pathlib.Path(__file__).resolve().parents[1]


def default_photo():
    """The benchmark photo beside the repository (as sift_bench looks for it), else in an ignored .photos copy."""
    for folder in (ROOT.parent / "shared" / "data" / "photos", ROOT / "shared" / "data" / "photos", ROOT / ".photos"):
        if (folder / "kleiber_3840x2160.jpg").is_file():
            return folder / "kleiber_3840x2160.jpg"
    return ROOT.parent / "shared" / "data" / "photos" / "kleiber_3840x2160.jpg"


def planted(w, h):
    a, s = np.radians(8.0), 0.9
    c = np.array([[1, 0, -w / 2], [0, 1, -h / 2], [0, 0, 1]])
    t = np.array([[s * np.cos(a), -s * np.sin(a), w / 2 + 40], [s * np.sin(a), s * np.cos(a), h / 2 - 25], [0, 0, 1]])
    return t @ c  # FIXED pixel -> MOVING pixel


def corner_error(model, truth, w, h):
    """Largest distance (px) between the corners of FIXED mapped by model and by truth (both MOVING -> FIXED)."""
    corners = np.array([[0, 0, 1], [w, 0, 1], [w, h, 1], [0, h, 1]], float).T
    a, b = model @ corners, truth @ corners
    return float(np.max(np.hypot(a[0] / a[2] - b[0] / b[2], a[1] / a[2] - b[1] / b[2])))


def time_ours(ctx, fixed_path, moving_path):
    t0 = time.perf_counter()
    fixed, moving = ss.read_image(fixed_path), ss.read_image(moving_path)
    t1 = time.perf_counter()
    r = ss.register(ctx, fixed, moving)
    t2 = time.perf_counter()
    h, w = fixed.shape
    warped = ss.warp(ctx, moving, r.matrix, w, h)
    t3 = time.perf_counter()
    return (t1 - t0, t2 - t1, t3 - t2), np.asarray(r.matrix), r.inlier_count, warped


def time_opencv(fixed_path, moving_path):
    t0 = time.perf_counter()
    fixed = cv2.imread(fixed_path, cv2.IMREAD_GRAYSCALE)
    moving = cv2.imread(moving_path, cv2.IMREAD_GRAYSCALE)
    t1 = time.perf_counter()
    sift = cv2.SIFT_create()
    kf, df = sift.detectAndCompute(fixed, None)
    km, dm = sift.detectAndCompute(moving, None)
    pairs = cv2.BFMatcher(cv2.NORM_L2).knnMatch(dm, df, k=2)
    good = [p[0] for p in pairs if len(p) == 2 and p[0].distance < 0.8 * p[1].distance]
    src = np.float32([km[m.queryIdx].pt for m in good])
    dst = np.float32([kf[m.trainIdx].pt for m in good])
    model, mask = cv2.findHomography(src, dst, cv2.RANSAC, 3.0)
    t2 = time.perf_counter()
    warped = cv2.warpPerspective(moving, model, (fixed.shape[1], fixed.shape[0]))
    t3 = time.perf_counter()
    return (t1 - t0, t2 - t1, t3 - t2), model, int(mask.sum()), warped


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--image", default=str(default_photo()),
                   help="default: kleiber_3840x2160.jpg of ../shared/data/photos, ./shared/data/photos or .photos")
    p.add_argument("--backend", default="cuda")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--cv-threads", type=int, default=16)
    a = p.parse_args()
    cv2.setNumThreads(a.cv_threads)
    image = cv2.imread(a.image, cv2.IMREAD_GRAYSCALE)
    if image is None:
        sys.exit(f"register_peers: cannot read {a.image}")
    h, w = image.shape
    fixed_to_moving = planted(w, h)
    truth = np.linalg.inv(fixed_to_moving)  # MOVING -> FIXED, the convention of both tools' models here
    with tempfile.TemporaryDirectory() as folder:
        fixed_path, moving_path = str(pathlib.Path(folder) / "fixed.png"), str(pathlib.Path(folder) / "moving.png")
        cv2.imwrite(fixed_path, image)
        cv2.imwrite(moving_path, cv2.warpPerspective(image, fixed_to_moving, (w, h)))
        rows = {}
        with ss.Context(a.backend, a.device) as ctx:
            tools = {f"spectrasift {ctx.backend}": lambda: time_ours(ctx, fixed_path, moving_path),
                     f"OpenCV {cv2.__version__} ({a.cv_threads} threads)": lambda: time_opencv(fixed_path, moving_path)}
            for name, run in tools.items():
                run()  # warm-up
                times, model, inliers = [], None, 0
                for _ in range(a.runs):
                    t, model, inliers, _ = run()
                    times.append(t)
                med = [statistics.median(x[i] for x in times) * 1e3 for i in range(3)]
                rows[name] = (med, sum(med), inliers, corner_error(model, truth, w, h))
    print(f"register {w}x{h} ({pathlib.Path(a.image).name} and its planted warp), median of {a.runs}, ms")
    print("| tool | read | register | warp | whole | inliers | corner error (px) |")
    print("|---|---|---|---|---|---|---|")
    for name, (med, whole, inliers, err) in rows.items():
        print(f"| {name} | {med[0]:.1f} | {med[1]:.1f} | {med[2]:.1f} | {whole:.1f} | {inliers} | {err:.2f} |")
    ours, cv = list(rows.values())
    print(f"OpenCV / spectrasift: whole {cv[1] / ours[1]:.1f}x, register alone {cv[0][1] / ours[0][1]:.1f}x")


if __name__ == "__main__":
    main()
