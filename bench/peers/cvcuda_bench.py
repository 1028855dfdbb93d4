#!/usr/bin/env python3
"""cvcuda_bench.py -- NVIDIA CV-CUDA's SIFT, matcher and homography (issue 19 item 5) on the four photos of
bench/sift_bench.cpp, in tables shaped like bench/peers/cudasift_bench.cpp's, so that the ratios come from one run.

    python3 bench/peers/cvcuda_bench.py [--photos DIR] [--runs N] [--warmup N] [--batch N] [--batch-runs N]
                                        [--batch-warmup N] [--batch-chunk N] [--no-single] [--no-batch] [--no-match] [--device N]

SIFT: cvcuda.sift_into with OpenCV's parameters (cv::SIFT_create's defaults: 3 layers per octave, contrast
threshold 0.04 -- CV-CUDA scales it by 0.5 / layers * 255 as OpenCV does --, edge threshold 10, sigma 1.6), with
(cvcuda.SIFT.USE_EXPANDED_INPUT, OpenCV's default) and without (USE_ORIGINAL_INPUT) the doubled first octave.
The output tensors hold CV-CUDA's default capacity (5 % of the pixels per image) and are allocated once, in
PyTorch (cvcuda.as_tensor wraps them; PyTorch's and CV-CUDA's work go to the same stream).
  image on GPU: sift_into on the 8-bit image already in device memory; the features stay there.
  end to end:   the 8-bit grey NumPy image (pageable) copied to the device, sift_into, and the features
                (coordinates, metadata, u8 descriptors of the images' found features) copied back to the host.
Each run ends with torch.cuda.synchronize(); time.perf_counter; median of --runs after --warmup runs. Batches, last
in the run (--batch copies of kleiber 1080p as sift_into calls over NHWC tensors of --batch-chunk images, --batch-runs
runs after --batch-warmup; one tensor of 100 stopped at an illegal address inside CV-CUDA in the sixth session): the
figures are per image (run time / images).

Matching: elephants 4K without upsampling against a perspective-warped copy (cv2.warpPerspective with the
matrix kWarp of bench/peers/cudasift_bench.cpp), descriptors already on the device: cvcuda.match_into with the
L2 norm (the default norm of u8 sets is HAMMING, wrong for SIFT) -- best match per descriptor, best two with
distances and Lowe's ratio test (0.8) on the host, and the cross check --, then cvcuda.findhomography on up to
10,000 of the ratio-test matches. CV-CUDA's findhomography is a least-squares fit (normalised DLT and
Levenberg-Marquardt) over every correspondence given, not RANSAC: the table says how far its model is from the
true one, on the ratio-test matches and on their true inliers only.

The images are read with cv2.imread(..., IMREAD_GRAYSCALE), as bench/sift_peers.py reads them. Needs numpy,
cv2, torch (CUDA) and cvcuda (pip install cvcuda-cu13, or the unpacked wheel on PYTHONPATH, which
scripts/device-peers.sh arranges); a missing one is named and the script exits with status 3.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
# .photos/ in the repository (the device machine's copy), else ../shared/data/photos beside it.
DEFAULT_PHOTOS = next((p for p in (os.path.join(ROOT, ".photos"),
                                   os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "photos")))
                       if os.path.isdir(p)), os.path.join(ROOT, ".photos"))
PHOTOS = [("kleiber_1920x1080.jpg", "kleiber 1080p"), ("elephants_1920x1080.jpg", "elephants 1080p"),
          ("kleiber_3840x2160.jpg", "kleiber 4K"), ("elephants_3840x2160.jpg", "elephants 4K")]
# bench/peers/cudasift_bench.cpp's kWarp: (x, y) of the photo lands at kWarp (x, y, 1) in the warped copy.
K_WARP = [[0.93, 0.05, 140.0], [-0.04, 0.94, 110.0], [1.5e-5, -1.0e-5, 1.0]]
# cv::SIFT_create's defaults.
OPENCV_SIFT = dict(num_octave_layers=3, contrast_threshold=0.04, edge_threshold=10.0, init_sigma=1.6)
RATIO = 0.8
MAX_HOMOGRAPHY_POINTS = 10000


def parse_args(argv):
    p = argparse.ArgumentParser(description="CV-CUDA SIFT, matching and homography on the issue 19 photos")
    p.add_argument("--photos", default=DEFAULT_PHOTOS, help="folder of the four photos (default: %(default)s)")
    p.add_argument("--runs", type=int, default=100, help="timed runs per figure (default 100)")
    p.add_argument("--warmup", type=int, default=20, help="warm-up runs before timing (default 20)")
    p.add_argument("--batch", type=int, default=100, help="copies of kleiber 1080p in the batch (default 100)")
    p.add_argument("--batch-runs", type=int, default=None, help="timed runs of the batch (default --runs)")
    p.add_argument("--batch-warmup", type=int, default=None, help="warm-up runs of the batch (default --warmup)")
    p.add_argument("--no-single", action="store_true", help="skip the one-image rows")
    p.add_argument("--batch-chunk", type=int, default=20,
                   help="images per sift_into call of the batch rows (default 20; the batch is --batch images)")
    p.add_argument("--no-batch", action="store_true", help="skip the batch rows")
    p.add_argument("--no-match", action="store_true", help="skip matching and homography")
    p.add_argument("--device", type=int, default=0, help="CUDA device (default 0)")
    a = p.parse_args(argv)
    if a.runs < 1 or a.warmup < 0 or a.batch < 1 or a.batch_chunk < 1 or (a.batch_runs is not None and a.batch_runs < 1) \
            or (a.batch_warmup is not None and a.batch_warmup < 0):
        p.error("--runs, --batch and --batch-runs must be >= 1, --warmup and --batch-warmup >= 0")
    a.batch_runs = a.runs if a.batch_runs is None else a.batch_runs
    a.batch_warmup = a.warmup if a.batch_warmup is None else a.batch_warmup
    return a


def import_peers():
    """numpy, cv2, torch and cvcuda, or a message naming what is missing and exit status 3."""
    mods, missing = {}, []
    for name, hint in (("numpy", "pip install numpy"), ("cv2", "pip install opencv-python-headless"),
                       ("torch", "PyTorch with CUDA, for the device tensors"),
                       ("cvcuda", "pip install cvcuda-cu13, or put the unpacked wheel on PYTHONPATH "
                                  "(scripts/device-peers.sh run installs it under /tmp/peers/site)")):
        try:
            mods[name] = __import__(name)
        except Exception as e:  # noqa: BLE001 -- an ImportError, or an OSError of a shared library
            missing.append(f"{name} ({type(e).__name__}: {e}; {hint})")
    if missing:
        print("CV-CUDA benchmark not run: cannot import " + "; ".join(missing), flush=True)
        sys.exit(3)
    if not mods["torch"].cuda.is_available():
        print("CV-CUDA benchmark not run: torch.cuda.is_available() is False (no CUDA device)", flush=True)
        sys.exit(3)
    return mods["numpy"], mods["cv2"], mods["torch"], mods["cvcuda"]


class _DeviceFloats:
    """float32 device memory at a raw address, seen through the CUDA array interface (to fill a 2F32 tensor)."""

    def __init__(self, address, shape, strides):
        self.__cuda_array_interface__ = dict(version=3, data=(address, False), shape=shape, strides=strides,
                                             typestr="<f4", stream=None)


class Bench:
    def __init__(self, np, cv2, torch, cvcuda, args):
        self.np, self.cv2, self.torch, self.cvcuda, self.a = np, cv2, torch, cvcuda, args
        torch.cuda.set_device(args.device)
        self.stream = cvcuda.as_stream(torch.cuda.current_stream())

    def timed(self, fn, runs, warmup):
        """Median ms of fn() (each call closed by a device synchronise) over runs after warmup calls; fn's last result."""
        out = None
        for _ in range(warmup):
            out = fn()
        self.torch.cuda.synchronize()
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            out = fn()
            self.torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times), out

    # ---- SIFT ----------------------------------------------------------------------------------------------

    def sift_plan(self, host, upsample):
        """Device buffers for a (N, H, W) u8 host array and the two timed calls: on_gpu() and end_to_end()."""
        torch, cvcuda = self.torch, self.cvcuda
        n, h, w = host.shape
        cap = max(w * h // 20, 1)  # CV-CUDA's default capacity: 5 % of the pixels
        src = torch.from_numpy(host).view(n, h, w, 1)  # pageable host memory
        d_img = torch.empty((n, h, w, 1), dtype=torch.uint8, device="cuda")
        coords = torch.empty((n, cap, 4), dtype=torch.float32, device="cuda")
        meta = torch.empty((n, cap, 3), dtype=torch.float32, device="cuda")
        desc = torch.empty((n, cap, 128), dtype=torch.uint8, device="cuda")
        count = torch.empty((n, 1), dtype=torch.int32, device="cuda")
        t = dict(img=cvcuda.as_tensor(d_img, "NHWC"), coords=cvcuda.as_tensor(coords, "NMC"),
                 meta=cvcuda.as_tensor(meta, "NMC"), desc=cvcuda.as_tensor(desc, "NMD"),
                 count=cvcuda.as_tensor(count, "NC"))
        flags = cvcuda.SIFT.USE_EXPANDED_INPUT if upsample else cvcuda.SIFT.USE_ORIGINAL_INPUT
        d_img.copy_(src)

        def on_gpu():
            cvcuda.sift_into(t["coords"], t["meta"], t["desc"], t["count"], t["img"], flags=flags,
                             stream=self.stream, **OPENCV_SIFT)

        def end_to_end():
            d_img.copy_(src)
            on_gpu()
            counts = count.cpu().view(-1)
            k = min(int(counts.max()), cap)
            return counts, coords[:, :k].cpu(), meta[:, :k].cpu(), desc[:, :k].cpu()

        return on_gpu, end_to_end, (coords, desc, count, cap)

    def sift_rows(self, images):
        print("\nCV-CUDA SIFT (cvcuda.sift_into, OpenCV's parameters), per image; median of "
              f"{self.a.runs} runs after {self.a.warmup} warm-up runs\n")
        print("| image | size | upsample | batch | features | image on GPU ms | end to end ms |")
        print("|---|---|---|---:|---:|---:|---:|", flush=True)
        for label, img in images:
            for up in (False, True):
                self.sift_row(label, img[None], up, self.a.runs, self.a.warmup)

    def batch_rows(self, images):
        """The batch rows, last in the run: an error inside CV-CUDA (the sixth session's batch of 100 in one tensor
        stopped at an illegal address) leaves the CUDA context unusable for every later call. The --batch copies
        of kleiber 1080p go through sift_into in tensors of --batch-chunk images (a timed run = every chunk's
        upload, SIFT and read-back); the figures are per image."""
        kleiber = dict(images).get("kleiber 1080p")
        print(f"\nCV-CUDA SIFT batches: {self.a.batch} copies of kleiber 1080p in tensors of {self.a.batch_chunk} "
              f"(NHWC), {self.a.batch_runs} runs after {self.a.batch_warmup}; per image\n")
        print("| image | size | upsample | batch | features | image on GPU ms | end to end ms |")
        print("|---|---|---|---:|---:|---:|---:|", flush=True)
        if kleiber is None:
            print("| kleiber 1080p | - | - | - | - | photo missing | - |")
            return
        chunk = min(self.a.batch_chunk, self.a.batch)
        batch = self.np.ascontiguousarray(self.np.broadcast_to(kleiber, (chunk,) + kleiber.shape))
        calls = -(-self.a.batch // chunk)
        for up in (False, True):
            self.sift_row("kleiber 1080p", batch, up, self.a.batch_runs, self.a.batch_warmup, calls=calls)

    def sift_row(self, label, host, up, runs, warmup, calls=1):
        """One table row: host is (n, H, W); a timed run makes `calls` calls over it (n calls images in all)."""
        n, h, w = host.shape
        try:
            on_gpu, end_to_end, _ = self.sift_plan(host, up)
            gpu_ms, _ = self.timed(lambda: [on_gpu() for _ in range(calls)], runs, warmup)
            e2e_ms, outs = self.timed(lambda: [end_to_end() for _ in range(calls)], runs, warmup)
            out = outs[-1]
            counts = out[0]
            feats = str(int(counts[0])) if n == 1 else f"{int(counts.min())}..{int(counts.max())}"
            print(f"| {label} | {w}x{h} | {'yes' if up else 'no'} | {n * calls} | {feats} | {gpu_ms / (n * calls):.3f} | "
                  f"{e2e_ms / (n * calls):.3f} |",
                  flush=True)
        except Exception as e:  # noqa: BLE001 -- report the row's failure and go on with the others
            print(f"| {label} | {w}x{h} | {'yes' if up else 'no'} | {n} | - | failed: {type(e).__name__}: {e} | - |",
                  flush=True)
        finally:
            self.torch.cuda.empty_cache()

    # ---- matching and homography --------------------------------------------------------------------------

    def features_on_device(self, img):
        """cvcuda SIFT of one image without upsampling: (n, xy (n, 2) on the host, descriptors (1, n, 128) on the device)."""
        on_gpu, _, (coords, desc, count, cap) = self.sift_plan(img[None], False)
        on_gpu()
        n = min(int(count.cpu()[0, 0]), cap)
        return n, coords[0, :n, :2].cpu().numpy().astype("float64"), desc[:, :n].contiguous()

    def matching_rows(self, elephants):
        np, cv2, torch, cvcuda = self.np, self.cv2, self.torch, self.cvcuda
        h, w = elephants.shape
        warp = np.array(K_WARP, dtype=np.float64)
        warped = cv2.warpPerspective(elephants, warp, (w, h), flags=cv2.INTER_LINEAR)
        n1, xy1, d1 = self.features_on_device(elephants)
        n2, xy2, d2 = self.features_on_device(warped)
        s1, s2 = cvcuda.as_tensor(d1, "NMD"), cvcuda.as_tensor(d2, "NMD")
        runs, warmup = self.a.runs, self.a.warmup

        def true_error(i1, i2):
            """Distance in px between kWarp (feature i1 of the photo) and feature i2 of the warped copy."""
            p = np.c_[xy1[i1], np.ones(len(i1))] @ warp.T
            return np.hypot(p[:, 0] / p[:, 2] - xy2[i2, 0], p[:, 1] / p[:, 2] - xy2[i2, 1])

        def matcher(k, cross):
            cap = max(n1, n2) * k
            m = torch.empty((1, cap, 2), dtype=torch.int32, device="cuda")
            nm = torch.empty((1,), dtype=torch.int32, device="cuda")
            dist = torch.empty((1, cap), dtype=torch.float32, device="cuda")
            tm, tn, td = cvcuda.as_tensor(m, "NMA"), cvcuda.as_tensor(nm, "N"), cvcuda.as_tensor(dist, "NM")

            def run():
                cvcuda.match_into(tm, tn, td, s1, s2, cross_check=cross, matches_per_point=k,
                                  norm_type=cvcuda.Norm.L2, stream=self.stream)

            def back():
                run()
                c = min(int(nm.cpu()[0]), cap)
                return m[0, :c].cpu().numpy(), dist[0, :c].cpu().numpy()

            return run, back

        rows = []
        run1, back1 = matcher(1, False)
        on_ms, _ = self.timed(run1, runs, warmup)
        e2e_ms, (m, _) = self.timed(back1, runs, warmup)
        ok = int((true_error(m[:, 0], m[:, 1]) <= 5).sum())
        rows.append(("best match (L2)", on_ms, e2e_ms, f"{len(m)} matches, {ok} within 5 px of the true position"))

        run2, back2 = matcher(2, False)

        def ratio_matches():
            m, d = back2()
            order = np.lexsort((d, m[:, 0]))  # by query, then distance
            m, d = m[order], d[order]
            starts = np.flatnonzero(np.r_[True, m[1:, 0] != m[:-1, 0]]) if len(m) else np.zeros(0, dtype=np.int64)
            has_two = np.diff(np.r_[starts, len(m)]) >= 2  # a second-best candidate for the query
            best, second = starts[has_two], starts[has_two] + 1
            keep = d[best] < RATIO * d[second]
            return m[best[keep]]

        on2_ms, _ = self.timed(run2, runs, warmup)
        ratio_ms, rm = self.timed(ratio_matches, runs, warmup)
        ok_r = true_error(rm[:, 0], rm[:, 1]) <= 5
        rows.append((f"best two (L2) + ratio {RATIO} on the host", on2_ms, ratio_ms,
                     f"{len(rm)} matches, {int(ok_r.sum())} within 5 px"))

        run3, back3 = matcher(1, True)
        on3_ms, _ = self.timed(run3, runs, warmup)
        cross_ms, (mc, _) = self.timed(back3, runs, warmup)
        rows.append(("cross check (L2)", on3_ms, cross_ms,
                     f"{len(mc)} matches, {int((true_error(mc[:, 0], mc[:, 1]) <= 5).sum())} within 5 px"))

        print(f"\nCV-CUDA matching, elephants {w}x{h} without upsampling against its perspective-warped copy "
              f"(kWarp); {n1} x {n2} descriptors already on the GPU; median of {runs} runs after {warmup} warm-up runs\n")
        print("| job | on GPU ms | with matches back ms | result |\n|---|---:|---:|---|")
        for job, a_ms, b_ms, text in rows:
            print(f"| cvcuda.match_into, {job} | {a_ms:.3f} | {b_ms:.3f} | {text} |")
        self.homography_rows(rm, ok_r, xy1, xy2, warp, w, h)

    def points_2f32(self, xy):
        """A (1, n) tensor of 2F32 points, the form cvcuda.findhomography takes (rank 2, data type 2F32), holding xy (n, 2)."""
        torch, cvcuda = self.torch, self.cvcuda
        n = len(xy)
        t = cvcuda.Tensor((1, n), cvcuda.Type._2F32, "NW")
        cai = t.cuda().__cuda_array_interface__
        row = cai["strides"][0] if cai.get("strides") else n * 8
        view = torch.as_tensor(_DeviceFloats(cai["data"][0], (1, n, 2), (row, 8, 4)), device="cuda")
        view.copy_(torch.from_numpy(self.np.ascontiguousarray(xy, dtype=self.np.float32)).view(1, n, 2))
        return t

    def homography_rows(self, rm, ok, xy1, xy2, warp, w, h):
        np, torch, cvcuda = self.np, self.torch, self.cvcuda
        print("\n| cvcuda.findhomography (least squares, no RANSAC) | points | ms | largest corner error vs kWarp |\n"
              "|---|---:|---:|---:|")
        corners = np.array([[0, 0, 1], [w - 1, 0, 1], [0, h - 1, 1], [w - 1, h - 1, 1]], dtype=np.float64)
        for what, sel in (("ratio-test matches", rm[:MAX_HOMOGRAPHY_POINTS]),
                          ("their true inliers only", rm[ok][:MAX_HOMOGRAPHY_POINTS])):
            if len(sel) < 4:
                print(f"| {what} | {len(sel)} | - | too few points |")
                continue
            try:
                ts, td = self.points_2f32(xy1[sel[:, 0]]), self.points_2f32(xy2[sel[:, 1]])
                model = torch.empty((1, 3, 3), dtype=torch.float32, device="cuda")
                tm = cvcuda.as_tensor(model, "NHW")
                if hasattr(cvcuda, "findhomography_into_with_op"):  # a held operator: no cache look-up per call
                    op = cvcuda.get_findhomography_operator(1, len(sel))
                    run = lambda: cvcuda.findhomography_into_with_op(tm, ts, td, op, stream=self.stream)  # noqa: E731
                else:
                    run = lambda: cvcuda.findhomography_into(tm, ts, td, stream=self.stream)  # noqa: E731

                def fit():
                    run()
                    return model.cpu().numpy()[0].astype(np.float64)

                ms, hm = self.timed(fit, self.a.runs, self.a.warmup)
                p, q = corners @ hm.T, corners @ warp.T
                err = np.hypot(p[:, 0] / p[:, 2] - q[:, 0] / q[:, 2], p[:, 1] / p[:, 2] - q[:, 1] / q[:, 2]).max()
                print(f"| {what} | {len(sel)} | {ms:.3f} | {err:.2f} px |", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"| {what} | {len(sel)} | - | failed: {type(e).__name__}: {e} |", flush=True)


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    np, cv2, torch, cvcuda = import_peers()
    images = []
    for name, label in PHOTOS:
        path = os.path.join(a.photos, name)
        img = cv2.imread(path, cv2.IMREAD_GRAYSCALE) if os.path.isfile(path) else None
        if img is None:
            print(f"PHOTO MISSING: {path} (pass --photos DIR) -- not timed")
            continue
        images.append((label, np.ascontiguousarray(img)))
    if not images:
        print(f"NO PHOTOS FOUND in {a.photos}: nothing timed")
        return 1
    b = Bench(np, cv2, torch, cvcuda, a)
    print(f"CV-CUDA {getattr(cvcuda, '__version__', '?')} on {torch.cuda.get_device_name(a.device)} "
          f"(PyTorch {torch.__version__}, CUDA {torch.version.cuda})")
    if not a.no_single:
        b.sift_rows(images)
    if not a.no_match:
        elephants = dict(images).get("elephants 4K")
        if elephants is None:
            print("\nCV-CUDA matching not timed: elephants_3840x2160.jpg missing")
        else:
            try:
                b.matching_rows(elephants)
            except Exception as e:  # noqa: BLE001 -- the SIFT tables above stand; say why matching stopped
                print(f"\nCV-CUDA matching failed: {type(e).__name__}: {e}", flush=True)
                return 1
    if not a.no_batch:
        b.batch_rows(images)
    return 0


if __name__ == "__main__":
    sys.exit(main())
