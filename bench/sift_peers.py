#!/usr/bin/env python3
"""sift_peers.py -- the peers of bench/sift_bench.cpp on the same photos, in the same run, in its table format:
silx's OpenCL SIFT (silx.opencl.sift.SiftPlan, the established OpenCL SIFT) on a chosen OpenCL platform and
device, and OpenCV's cv2.SIFT_create() on the host cores.

    python3 bench/sift_peers.py [--photos DIR] [--runs N] [--warmup N] [--quick] [--platform P] [--device D]
                                [--threads N] [--no-silx] [--no-opencv]

End to end = an 8-bit grey numpy image in, keypoints and descriptors out on the host (silx: SiftPlan.keypoints,
which uploads, runs and reads back; the plan is built once per image size, as ours is kept in the Context),
steady clock (time.perf_counter), median of --runs after --warmup runs. The images are read with
cv2.imread(..., IMREAD_GRAYSCALE), as sift_bench does when built with OpenCV.

Upsampling: cv2.SIFT always doubles the first octave (OpenCV 4.6 has no switch), silx never does (it has no
such option), so each appears in one upsample column only; the table says so in its rows.

Needs numpy and cv2; silx needs pyopencl and silx. --wheels DIR (default: .whl/ of the repository, an ignored
folder, when it exists; "none" to skip): the wheels there whose tags fit this Python (pyopencl, silx, pytools,
platformdirs, siphash24, typing_extensions, packaging, filelock) are unpacked once into DIR/unpacked-cpXY and put
first on sys.path, so that the GPU machine, which has no package access, runs silx without pip. Elsewhere
PYTHONPATH works too. A missing peer is reported and skipped, never fatal.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# ../shared/data/photos beside the repository root, else shared/data/photos inside it (the device machine's copy).
DEFAULT_PHOTOS = next((p for p in (os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data", "photos")),
                                   os.path.normpath(os.path.join(HERE, "..", "shared", "data", "photos")))
                       if os.path.isdir(p)), os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data", "photos")))
NAMES = ["kleiber_1920x1080.jpg", "elephants_1920x1080.jpg", "kleiber_3840x2160.jpg", "elephants_3840x2160.jpg"]


def use_wheels(folder):
    """Unpacks the wheels of folder that fit this interpreter (pure Python, or this cpXY) into
    folder/unpacked-cpXY (once; a wheel is a zip archive) and puts that first on sys.path. Returns a note."""
    import zipfile
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    wheels = sorted(f for f in os.listdir(folder) if f.endswith(".whl"))
    fit = [f for f in wheels if f.endswith("-py3-none-any.whl") or f"-{tag}-{tag}-" in f]
    other = [f for f in wheels if f not in fit]
    target = os.path.join(folder, f"unpacked-{tag}")
    for f in fit:
        stamp = os.path.join(target, ".done-" + f)
        if not os.path.exists(stamp):
            with zipfile.ZipFile(os.path.join(folder, f)) as z:
                z.extractall(target)
            open(stamp, "w").close()
    if fit:
        sys.path.insert(0, target)
    note = f"wheels from {folder} for {tag}: {len(fit)} used"
    return note + (f"; not for this Python: {', '.join(other)}" if other else "")


def timed(fn, runs, warmup):
    """Median ms of fn() over runs after warmup calls, and fn's last result."""
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), out


def row(image, shape, upsample, impl, device, ms, kps, stages="-"):
    print(f"| {image} | {shape[1]}x{shape[0]} | {upsample} | {impl} | {device} | {ms:.2f} | {kps} | {stages} |", flush=True)


def run_silx(cl, SiftPlan, version, images, platform, device_index, a):
    """silx on one OpenCL device: a SiftPlan per image size (built once), then its keypoints() timed."""
    try:
        dev = cl.get_platforms()[platform].get_devices()[device_index]
        device = f"{dev.platform.name}: {dev.name.strip()}"
    except Exception as e:  # noqa: BLE001
        print(f"| - | - | - | silx | - | - | - | OpenCL platform {platform} device {device_index}: {e} |")
        return
    plans = {}
    for name, img in images:
        try:
            if img.shape not in plans:
                plans[img.shape] = SiftPlan(template=img, platformid=platform, deviceid=device_index)
            plan = plans[img.shape]
            ms, kp = timed(lambda: plan.keypoints(img), a.runs, a.warmup)
            row(name, img.shape, "no (never)", f"silx {version}", device, ms, kp.shape[0])
        except Exception as e:  # noqa: BLE001 - report and go on with the next image
            print(f"| {name} | - | no | silx | {device} | - | - | failed: {type(e).__name__}: {e} |")
        sys.stdout.flush()


def add_vendor_icds():
    """The pyopencl wheel carries its own ICD loader (ocl-icd), which reads only /etc/OpenCL/vendors (or
    OCL_ICD_VENDORS). On the GPU machine that folder lists PoCL alone, while NVIDIA's OpenCL is found by the system's
    own loader, so silx saw one platform there. When OCL_ICD_VENDORS is unset and NVIDIA's driver library loads,
    a temporary vendors folder lists the system's .icd files plus NVIDIA's library. Returns a note or None."""
    if os.environ.get("OCL_ICD_VENDORS"):
        return None
    import atexit
    import ctypes
    import shutil
    import tempfile
    try:
        ctypes.CDLL("libnvidia-opencl.so.1")
    except OSError:
        return None
    system = "/etc/OpenCL/vendors"
    icds = [f for f in (os.listdir(system) if os.path.isdir(system) else []) if f.endswith(".icd")]
    def names_nvidia(icd):
        with open(os.path.join(system, icd)) as f:
            return f.read().strip().startswith("libnvidia-opencl")

    if any(names_nvidia(f) for f in icds):
        return None
    folder = tempfile.mkdtemp(prefix="sift_peers_icd_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for f in icds:
        os.symlink(os.path.join(system, f), os.path.join(folder, f))
    with open(os.path.join(folder, "nvidia.icd"), "w") as out:
        out.write("libnvidia-opencl.so.1\n")
    os.environ["OCL_ICD_VENDORS"] = folder
    return f"OCL_ICD_VENDORS={folder} ({len(icds)} system .icd files and NVIDIA's libnvidia-opencl.so.1)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--photos", default=DEFAULT_PHOTOS)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="3 runs after 1 warm-up")
    ap.add_argument("--platform", default="0", help="pyopencl platform index for silx, or 'all' (default 0)")
    ap.add_argument("--device", type=int, default=0, help="device index within that platform (default 0)")
    ap.add_argument("--threads", type=int, default=0, help="cv2.setNumThreads (0: OpenCV's default)")
    ap.add_argument("--no-silx", action="store_true")
    ap.add_argument("--no-opencv", action="store_true")
    ap.add_argument("--wheels", default=os.path.normpath(os.path.join(HERE, "..", ".whl")),
                    help="folder of wheels to unpack and import silx and pyopencl from ('none': do not)")
    a = ap.parse_args()
    if a.quick:
        a.runs, a.warmup = min(a.runs, 3), min(a.warmup, 1)

    try:
        import numpy as np
        import cv2
    except ImportError as e:
        print(f"sift_peers: numpy and cv2 are needed ({e}); nothing timed")
        return 0

    images = []
    for n in NAMES:
        path = os.path.join(a.photos, n)
        if not os.path.exists(path):
            print(f"PHOTO MISSING: {path} (pass --photos DIR; the photos live in ../shared/data/photos) -- not timed")
            continue
        images.append((n, np.ascontiguousarray(cv2.imread(path, cv2.IMREAD_GRAYSCALE))))
    if not images:
        print(f"NO PHOTOS FOUND in {a.photos}: nothing timed")
        return 0

    print(f"Peers: end to end (8-bit grey host image -> keypoints and descriptors on the host), "
          f"median of {a.runs} runs after {a.warmup} warm-up runs\n")
    print("| image | size | upsample | implementation | device | end-to-end ms | keypoints | stages (ms) |")
    print("|---|---|---|---|---|---:|---:|---|")

    if not a.no_opencv:
        if a.threads > 0:
            cv2.setNumThreads(a.threads)
        sift = cv2.SIFT_create()
        for name, img in images:
            ms, (kp, _) = timed(lambda: sift.detectAndCompute(img, None), a.runs, a.warmup)
            row(name, img.shape, "yes (always)", f"OpenCV cv2.SIFT {cv2.__version__}",
                f"host, {cv2.getNumThreads()} threads", ms, len(kp))

    if not a.no_silx:
        if a.wheels != "none" and os.path.isdir(a.wheels):
            print(f"sift_peers: {use_wheels(a.wheels)}")
        note = add_vendor_icds()  # before pyopencl's loader first reads the vendors
        if note:
            print(f"sift_peers: {note}")
        try:
            import pyopencl as cl
            from silx.opencl.sift import SiftPlan
            import silx
        except Exception as e:  # noqa: BLE001 - any import failure means "no silx here"
            print(f"| - | - | - | silx | - | - | - | not available: {type(e).__name__}: {e} |")
            return 0
        platforms = range(len(cl.get_platforms())) if a.platform == "all" else [int(a.platform)]
        for p in platforms:
            run_silx(cl, SiftPlan, silx.version, images, p, 0 if a.platform == "all" else a.device, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
