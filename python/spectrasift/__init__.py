"""spectrasift: SIFT registration and hyperspectral spectral matching on CPU, CUDA and OpenCL.

The Python face of the C++ library (``include/spectrasift``), through the nanobind extension ``spectrasift._core``.
Every function takes a :class:`Context` (one device; use one per thread), checks its arguments here, and calls the
library with the GIL released. Inputs that are C-contiguous arrays of a supported type are read in place (no
copy). The options have the names and defaults of the command line (``spectrasift sift --help`` etc.), with
dashes as underscores.

Errors are Python exceptions carrying the library's message: ``ValueError`` for bad arguments, ``OSError`` for
files (missing, unreadable, malformed), ``MemoryError`` for a job over the memory budget, ``RuntimeError`` for
device errors and for a Context used from two threads at once, and :class:`NoModelError` (a ``RuntimeError``)
when :func:`register` finds no reliable model. Library exceptions have ``code`` (the CLI's JSON error code, e.g.
``"invalid_argument"``) and ``backend`` attributes.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from . import _core
from ._core import NoModelError

__version__: str = _core.__version__

__all__ = [
    "__version__", "devices", "compiled_backends", "Context", "Features", "sift", "match", "register",
    "Registration", "warp", "spectral", "SpectralResult", "open_envi", "EnviCube", "read_image", "read_features",
    "read_library", "Library", "reference_pixels", "to_cv2_keypoints", "opencv_octave", "NoModelError",
    "KEYPOINT_DTYPE", "MATCH_DTYPE",
]

#: One keypoint, as the library's ``Keypoint`` (OpenCV's conventions: (0, 0) = centre of the top-left pixel,
#: ``size`` = diameter = 2 sigma, ``angle`` in degrees [0, 360) with y down, ``response`` = |DoG| in 1/255 of the
#: grey range, ``octave`` = -1 for the doubled image, ``layer`` 1..octave_layers, ``layer_offset`` in [-0.5, 0.5]).
#: :func:`opencv_octave` packs octave, layer and offset the way ``cv2.KeyPoint.octave`` holds them.
KEYPOINT_DTYPE = np.dtype([
    ("x", "<f4"), ("y", "<f4"), ("size", "<f4"), ("angle", "<f4"), ("response", "<f4"),
    ("octave", "<i4"), ("layer", "<i4"), ("layer_offset", "<f4"),
])
#: One match: indices into the query and train features, and the two nearest distances.
MATCH_DTYPE = np.dtype([("query", "<i4"), ("train", "<i4"), ("distance", "<f4"), ("second_distance", "<f4")])

_DEFAULT_MAX_PIXELS = 1 << 30


def devices() -> list[dict[str, Any]]:
    """Every device of every backend compiled in, as ``spectrasift devices`` lists them (one dict each)."""
    return _core.devices()


def compiled_backends() -> list[str]:
    """The backends compiled into this build: ``"cpu"``, and ``"cuda"`` / ``"opencl"`` when built."""
    return _core.compiled_backends()


class Context:
    """One device of one backend, with its compiled kernels, buffers and plans: create it once and reuse it.

    ``backend``: ``"auto"`` (CUDA, then an OpenCL GPU, then the CPU), ``"cpu"``, ``"cuda"`` or ``"opencl"``; a
    backend asked for and missing raises ``RuntimeError``. ``device``: index within the backend (as
    :func:`devices` lists it). ``threads``: CPU threads, 0 = all. ``verbose``: log the backend and stage times to
    stderr. ``max_pixels``: largest image or cube (width x height), 0 = no limit (the CLI's ``--max-pixels``).
    ``max_memory``: working-memory budget of one job in bytes, 0 = half of the physical memory, ``None`` = no
    limit (``--max-memory``). Environment variables (``SPECTRASIFT_BACKEND``...) are not read.

    A Context is used by one thread at a time: a call from a second thread while one runs raises
    ``RuntimeError`` (it never crashes). Usable as a context manager (``close()`` on exit).
    """

    __slots__ = ("_core", "__weakref__")

    def __init__(self, backend: str = "auto", device: int = 0, threads: int = 0, verbose: bool = False, *,
                 max_pixels: int = _DEFAULT_MAX_PIXELS, max_memory: int | None = 0) -> None:
        if not isinstance(backend, str):
            raise ValueError(f"backend must be a string (auto, cpu, cuda, opencl), not {backend!r}")
        device = _int_arg("device", device, 0)
        threads = _int_arg("threads", threads, 0)
        max_pixels = _int_arg("max_pixels", max_pixels, 0)
        max_memory = (1 << 64) - 1 if max_memory is None else _int_arg("max_memory", max_memory, 0)
        self._core = _core.Context(backend, device, threads, bool(verbose), max_pixels, max_memory)

    @property
    def backend(self) -> str:
        """The backend that runs: ``"cpu"``, ``"cuda"`` or ``"opencl"``."""
        return self._core.backend

    @property
    def device(self) -> dict[str, Any]:
        """The device (as one entry of :func:`devices`)."""
        return self._core.device

    @property
    def closed(self) -> bool:
        return self._core.closed

    def describe(self) -> str:
        """``"cpu:0 (16 threads)"``, ``"cuda:0 NVIDIA H200"``..."""
        return self._core.describe()

    def close(self) -> None:
        """Frees the device's resources now; later calls on this Context raise ``RuntimeError``."""
        if not self._core.closed:
            self._core.close()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<spectrasift.Context closed>" if self.closed else f"<spectrasift.Context {self.describe()}>"


def _int_arg(name: str, value: Any, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, not {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum} (got {value})")
    return value


def _float_arg(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, not {value!r}")
    return float(value)


def _ctx(ctx: Any) -> Any:
    if not isinstance(ctx, Context):
        raise ValueError(f"the first argument must be a spectrasift.Context, not {type(ctx).__name__}")
    return ctx._core


# ---- images and features ---------------------------------------------------------------------------------------

_IMAGE_TYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.float32))


def _image_array(image: Any, what: str = "image") -> np.ndarray:
    """A C-contiguous (H, W) or (H, W, C) uint8/uint16/float32 array in native byte order: the array itself when it
    is one already (read in place), else a copy."""
    a = np.asarray(image)
    if a.ndim not in (2, 3):
        raise ValueError(f"{what}: an image has 2 (H, W) or 3 (H, W, C) dimensions, this array has {a.ndim}")
    if a.dtype.newbyteorder("=") not in _IMAGE_TYPES:
        raise ValueError(f"{what}: the sample type must be uint8, uint16 or float32, not {a.dtype}")
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if a.size == 0:
        raise ValueError(f"{what}: the image is empty (shape {a.shape})")
    if a.ndim == 3 and not 1 <= a.shape[2] <= 4:
        raise ValueError(f"{what}: {a.shape[2]} channels; an image has 1 to 4 (grey, grey + alpha, RGB, RGBA)")
    return np.ascontiguousarray(a)


class Features:
    """Keypoints and descriptors of one image (what :func:`sift` returns; unpacks as ``keypoints, descriptors``).

    ``keypoints``: a read-only structured array of :data:`KEYPOINT_DTYPE`; ``descriptors``: a read-only (N, 128)
    array of the features' ``descriptor_type``: float32 for ``"f32"`` (integers 0..255 with the default options,
    OpenCV's CV_32F descriptors), uint8 for ``"u8"`` (``sift(..., descriptor_type="u8")``, OpenCV's CV_8U: the same
    values in a quarter of the memory). Both are views on the library's memory. ``descriptors_u8()`` and
    ``descriptors_f32()`` give new arrays of either type whatever the features hold (floats rounded and saturated
    to uint8). ``Features(keypoints, descriptors, image_width, image_height)`` builds them from arrays (copied): a
    uint8 descriptor array gives u8 features, any other type f32 ones. Matching takes either type on either side
    (the same matches for the same values). Picklable.
    """

    __slots__ = ("_core",)

    def __init__(self, keypoints: Any, descriptors: Any, image_width: int = 0, image_height: int = 0) -> None:
        kp = np.ascontiguousarray(np.asarray(keypoints))
        if kp.dtype != KEYPOINT_DTYPE:
            if kp.dtype.names is None or not set(("x", "y", "size", "angle")) <= set(kp.dtype.names):
                raise ValueError("keypoints must be a structured array with fields x, y, size, angle (KEYPOINT_DTYPE)")
            full = np.zeros(kp.shape, KEYPOINT_DTYPE)
            for name in KEYPOINT_DTYPE.names:
                if name in kp.dtype.names:
                    full[name] = kp[name]
            kp = full
        d = np.asarray(descriptors)
        d = np.ascontiguousarray(d, dtype=np.uint8 if d.dtype == np.uint8 else np.float32)
        if kp.ndim != 1 or d.ndim != 2:
            raise ValueError(f"keypoints must be 1-D and descriptors (N, 128); got {kp.shape} and {d.shape}")
        self._core = _core.Features.from_arrays(kp.view(np.uint8).reshape(len(kp), KEYPOINT_DTYPE.itemsize), d,
                                                _int_arg("image_width", image_width, 0),
                                                _int_arg("image_height", image_height, 0))

    @classmethod
    def _wrap(cls, core: Any) -> "Features":
        f = cls.__new__(cls)
        f._core = core
        return f

    @property
    def keypoints(self) -> np.ndarray:
        return self._core.keypoint_bytes.view(KEYPOINT_DTYPE).reshape(-1)

    @property
    def descriptors(self) -> np.ndarray:
        return self._core.descriptors

    @property
    def descriptor_type(self) -> str:
        """``"f32"`` (``descriptors`` is float32) or ``"u8"`` (uint8)."""
        return self._core.descriptor_type

    def descriptors_u8(self) -> np.ndarray:
        """The descriptors as uint8, rounded and saturated to 0..255 (a new array)."""
        return self._core.descriptors_u8()

    def descriptors_f32(self) -> np.ndarray:
        """The descriptors as float32 (a new array)."""
        return self._core.descriptors_f32()

    @property
    def image_width(self) -> int:
        return self._core.image_width

    @property
    def image_height(self) -> int:
        return self._core.image_height

    def __len__(self) -> int:
        return len(self._core)

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter((self.keypoints, self.descriptors))

    def __getstate__(self) -> Any:
        return self._core.__getstate__()

    def __setstate__(self, state: Any) -> None:
        core = _core.Features.__new__(_core.Features)
        core.__setstate__(state)
        self._core = core

    def to_cv2(self) -> list:
        """The keypoints as ``cv2.KeyPoint`` objects (needs OpenCV); see :func:`to_cv2_keypoints`."""
        return to_cv2_keypoints(self)

    def __repr__(self) -> str:
        return (f"<spectrasift.Features {len(self)} keypoints, {self.descriptor_type} descriptors, "
                f"image {self.image_width} x {self.image_height}>")


def opencv_octave(keypoints: Any) -> np.ndarray:
    """``cv2.KeyPoint.octave`` as OpenCV packs it: octave & 255 | layer << 8 | round((layer_offset + 0.5) * 255) << 16."""
    kp = keypoints.keypoints if isinstance(keypoints, Features) else np.asarray(keypoints)
    offset = np.rint((kp["layer_offset"].astype(np.float32) + np.float32(0.5)) * np.float32(255)).astype(np.int64)
    packed = (kp["octave"].astype(np.int64) & 255) | (kp["layer"].astype(np.int64) << 8) | ((offset & 255) << 16)
    return packed.astype(np.int32)


def to_cv2_keypoints(keypoints: Any) -> list:
    """``cv2.KeyPoint`` objects (x, y, size, angle, response, packed octave, class_id -1) from :class:`Features` or a
    keypoint array, for ``cv2.drawKeypoints``, ``cv2.SIFT.compute``... Raises ``ImportError`` without OpenCV."""
    import cv2  # noqa: PLC0415 - OpenCV is optional

    kp = keypoints.keypoints if isinstance(keypoints, Features) else np.asarray(keypoints)
    octave = opencv_octave(kp)
    return [cv2.KeyPoint(float(k["x"]), float(k["y"]), float(k["size"]), float(k["angle"]), float(k["response"]),
                         int(o), -1) for k, o in zip(kp, octave)]


def _descriptor_type(value: Any) -> str:
    """``"f32"`` or ``"u8"`` from a name (``"f32"``, ``"float32"``, ``"u8"``, ``"uint8"``; the library checks it) or a
    NumPy type (``np.float32``, ``np.uint8``, their dtypes)."""
    if isinstance(value, str):
        return value  # a name, as the CLI's --descriptor-type (np.dtype("u8") would be uint64)
    try:
        dtype = np.dtype(value)
    except TypeError:
        dtype = None
    if dtype == np.float32:
        return "f32"
    if dtype == np.uint8:
        return "u8"
    raise ValueError(f"descriptor_type must be \"f32\" or \"u8\" (or numpy.float32 / numpy.uint8), not {value!r}")


def sift(ctx: Context, image: Any, *, max_features: int = 0, octave_layers: int = 3, sigma: float = 1.6,
         contrast_threshold: float = 0.04, edge_threshold: float = 10.0, no_upsample: bool = False,
         root_sift: bool = False, descriptor_type: Any = "f32", mask: Any = None, bgr: bool = False) -> Features:
    """SIFT keypoints and descriptors of an image (OpenCV 4.6's ``cv::SIFT`` defaults, as ``spectrasift sift``).

    ``image``: (H, W) grey or (H, W, C) with C = 2 (grey + alpha), 3 (RGB) or 4 (RGBA); uint8 (0..255), uint16
    (0..65535) or float32 (0..1). Colour is made grey with OpenCV's ``cvtColor`` weights; arrays from ``cv2.imread``
    are BGR: pass ``bgr=True`` (a copy with the channels swapped). A C-contiguous array is read in place. To get
    the pixels the CLI gets from a file, read it with :func:`read_image` (``gray=True``).

    Options (the CLI's): ``max_features`` (keep the N strongest, 0 = all), ``octave_layers`` (1..10),
    ``sigma``, ``contrast_threshold``, ``edge_threshold``, ``no_upsample`` (start at the input size instead of
    doubling it), ``root_sift``, ``descriptor_type`` (``"f32"``, the default, or ``"u8"``; also ``np.float32`` /
    ``np.uint8``: the type of ``Features.descriptors``, as OpenCV's ``descriptorType``; RootSIFT needs f32);
    ``mask``: a (H, W) array, keypoints on zero pixels are dropped.
    Returns :class:`Features` (unpacks as ``keypoints, descriptors``).
    """
    core_ctx = _ctx(ctx)
    a = _image_array(image)
    if bgr and a.ndim == 3 and a.shape[2] >= 3:
        a = np.ascontiguousarray(a[..., [2, 1, 0] + list(range(3, a.shape[2]))])
    m = None
    if mask is not None:
        m = np.asarray(mask)
        if m.ndim != 2:
            raise ValueError(f"mask: a mask has 2 dimensions (H, W), this array has {m.ndim}")
        m = np.ascontiguousarray(m != 0, dtype=np.uint8)
    return Features._wrap(_core.sift(core_ctx, a, _int_arg("octave_layers", octave_layers),
                                     _float_arg("sigma", sigma), _float_arg("contrast_threshold", contrast_threshold),
                                     _float_arg("edge_threshold", edge_threshold), not no_upsample,
                                     _int_arg("max_features", max_features), bool(root_sift),
                                     _descriptor_type(descriptor_type), m))


def _features(ctx: Context, x: Any, what: str, sift_options: dict[str, Any]) -> tuple[Features, float]:
    """Features as given, or SIFT of an image; with the SIFT time in ms."""
    if isinstance(x, Features):
        return x, 0.0
    if isinstance(x, (str, bytes)) or hasattr(x, "__fspath__"):
        raise ValueError(f"{what}: give an array (read_image(path)) or Features (read_features(path)), not a path")
    t0 = time.perf_counter()
    f = sift(ctx, x, **sift_options)
    return f, (time.perf_counter() - t0) * 1e3


def match(ctx: Context, query: Any, train: Any, *, ratio: float = 0.8, mutual: bool = False,
          max_distance: float = math.inf, **sift_options: Any) -> np.ndarray:
    """Nearest-neighbour matching with Lowe's ratio test (``spectrasift match A B``): query = A, train = B, each
    :class:`Features` or an image (then SIFT runs with ``sift_options``). Returns a structured array of
    :data:`MATCH_DTYPE` (query, train, distance, second_distance), sorted by query index."""
    core_ctx = _ctx(ctx)
    q, _ = _features(ctx, query, "query", sift_options)
    t, _ = _features(ctx, train, "train", sift_options)
    raw = _core.match(core_ctx, q._core, t._core, _float_arg("ratio", ratio), bool(mutual),
                      _float_arg("max_distance", max_distance))
    return raw.view(MATCH_DTYPE).reshape(-1)


@dataclass
class Registration:
    """What :func:`register` found (also readable as a dict: ``r["matrix"]``).

    ``matrix``: 3x3 float64, MOVING pixel -> FIXED pixel ((0, 0) = centre of the top-left pixel; the CLI's
    convention); ``inliers``: bool mask, one per match; ``inlier_count``, ``match_count``, ``rms_px`` (RMS transfer
    error of the inliers in FIXED pixels), ``reliable`` (the verdict, README "Registration verdict"),
    ``times_ms`` {sift, match, ransac, total}; also ``model``, ``iterations``, ``verdict`` (its figures and
    problems), ``matches`` (:data:`MATCH_DTYPE`, query = MOVING, train = FIXED) and both :class:`Features`.
    """

    matrix: np.ndarray
    inliers: np.ndarray
    inlier_count: int
    match_count: int
    rms_px: float
    reliable: bool
    times_ms: dict[str, float]
    model: str = "homography"
    iterations: int = 0
    verdict: dict[str, Any] = field(default_factory=dict)
    matches: np.ndarray = field(default_factory=lambda: np.zeros(0, MATCH_DTYPE))
    fixed_features: Features | None = None
    moving_features: Features | None = None

    def __getitem__(self, key: str) -> Any:
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def keys(self) -> list[str]:
        return list(self.__dataclass_fields__)


def _size_of(x: Any, f: Features) -> tuple[int, int]:
    if isinstance(x, Features):
        return f.image_width, f.image_height
    a = np.asarray(x)
    return int(a.shape[1]), int(a.shape[0])


def register(ctx: Context, fixed: Any, moving: Any, *, model: str = "homography", threshold: float = 3.0,
             confidence: float = 0.999, max_iterations: int = 10000, min_inliers: int = 0, seed: int = 0,
             msac: bool = True, accept_weak: bool = False, ratio: float = 0.8, mutual: bool = False,
             size: tuple[int, int] | None = None, **sift_options: Any) -> Registration:
    """Registers MOVING onto FIXED as ``spectrasift register FIXED MOVING`` does: SIFT (``sift_options``) on images,
    ratio-test matching (query = MOVING, train = FIXED), deterministic RANSAC (``model`` homography, affine or
    similarity; ``threshold`` in FIXED pixels; ``confidence``, ``max_iterations``, ``min_inliers``, ``seed``,
    ``msac``) and the model's verdict. ``fixed`` and ``moving`` are images or :class:`Features` (their recorded
    image size is used; ``size=(W, H)`` gives it for features that record none).

    No model, or a model that is not reliable, raises :class:`NoModelError` (its ``result`` holds the
    :class:`Registration`); with ``accept_weak=True`` an unreliable model is returned with ``reliable`` False and
    a ``RuntimeWarning``, as the CLI's ``--accept-weak``.
    """
    core_ctx = _ctx(ctx)
    t_total = time.perf_counter()
    ff, fixed_sift = _features(ctx, fixed, "fixed", sift_options)
    fm, moving_sift = _features(ctx, moving, "moving", sift_options)
    fw, fh = _size_of(fixed, ff)
    mw, mh = _size_of(moving, fm)
    if size is not None:
        w, h = (_int_arg("size[0]", size[0], 1), _int_arg("size[1]", size[1], 1))
        fw, fh = (fw, fh) if fw > 0 else (w, h)
        mw, mh = (mw, mh) if mw > 0 else (w, h)
    r = _core.register_features(core_ctx, fm._core, ff._core, mw, mh, fw, fh, _float_arg("ratio", ratio),
                                bool(mutual), str(model), _float_arg("threshold", threshold),
                                _float_arg("confidence", confidence), _int_arg("max_iterations", max_iterations),
                                _int_arg("min_inliers", min_inliers), _int_arg("seed", seed, 0), bool(msac))
    times = {"sift": fixed_sift + moving_sift, "match": r["match_ms"], "ransac": r["ransac_ms"],
             "total": (time.perf_counter() - t_total) * 1e3}
    result = Registration(matrix=r["matrix"], inliers=r["inliers"].astype(bool), inlier_count=r["inlier_count"],
                          match_count=r["match_count"], rms_px=r["rms_px"], reliable=bool(r["verdict"]["reliable"]),
                          times_ms=times, model=r["model"], iterations=r["iterations"], verdict=r["verdict"],
                          matches=r["match_bytes"].view(MATCH_DTYPE).reshape(-1), fixed_features=ff,
                          moving_features=fm)
    between = f" between fixed ({len(ff)} features) and moving ({len(fm)} features)"
    if not r["found"]:
        err = NoModelError(f"no {model} found{between}: {r['match_count']} matches, best model {r['inlier_count']} "
                           f"inliers, {r['required_inliers']} needed (do the images overlap?)")
        err.result = result
        raise err
    if not result.reliable:
        message = (f"{r['verdict']['summary']}{between} ({r['inlier_count']} inliers of {r['match_count']} matches, "
                   f"rms {r['rms_px']:.2f} px)")
        if not accept_weak:
            err = NoModelError(message + "; accept_weak=True keeps it")
            err.result = result
            raise err
        warnings.warn(message + " (kept: accept_weak)", RuntimeWarning, stacklevel=2)
    return result


def warp(ctx: Context, moving: Any, matrix: Any, width: int, height: int) -> np.ndarray:
    """Resamples ``moving`` into a ``width`` x ``height`` frame (FIXED's): output pixel p takes moving at
    matrix^-1 p, bilinear, black outside (``spectrasift register -o``). Keeps the sample type and channels.
    ``matrix``: 3x3, MOVING pixel -> FIXED pixel (``Registration.matrix``). The input is copied once."""
    core_ctx = _ctx(ctx)
    a = _image_array(moving, "moving")
    h = np.ascontiguousarray(np.asarray(matrix, dtype=np.float64))
    if h.shape != (3, 3):
        raise ValueError(f"matrix must be 3 x 3, not {h.shape}")
    return _core.warp(core_ctx, a, h, _int_arg("width", width, 1), _int_arg("height", height, 1))


def read_image(path: Any, gray: bool = True, *, max_pixels: int = _DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Reads PNG, JPEG, PGM/PPM or TIFF with the library's decoders. ``gray=True``: an 8-bit colour file becomes
    the grey that ``cv2.imread(path, IMREAD_GRAYSCALE)`` gives (what the CLI runs SIFT on; 16-bit and float colour
    stay colour); ``gray=False``: as stored (RGB order). Returns (H, W) or (H, W, C) uint8/uint16/float32."""
    return _core.read_image(_path(path), bool(gray), _int_arg("max_pixels", max_pixels, 0))


def read_features(path: Any) -> Features:
    """A feature file written by ``spectrasift sift`` (.key, .json or .bin; the format is read from the content)."""
    return Features._wrap(_core.read_features(_path(path)))


def _path(path: Any) -> str:
    if isinstance(path, bytes):
        return path.decode()
    if isinstance(path, str) or hasattr(path, "__fspath__"):
        import os  # noqa: PLC0415

        return os.fspath(path)
    raise ValueError(f"a path must be a str or os.PathLike, not {type(path).__name__}")


# ---- spectral matching ------------------------------------------------------------------------------------------

# ENVI "data type" of each NumPy sample type (complex and 8-bit signed have none).
_ENVI_TYPES = {
    np.dtype(np.uint8): 1, np.dtype(np.int16): 2, np.dtype(np.int32): 3, np.dtype(np.float32): 4,
    np.dtype(np.float64): 5, np.dtype(np.uint16): 12, np.dtype(np.uint32): 13, np.dtype(np.int64): 14,
    np.dtype(np.uint64): 15,
}


class EnviCube:
    """An ENVI cube opened by :func:`open_envi`: the header checked against the data file, the data memory-mapped.

    ``array``: a read-only (lines, samples, bands) view of the mapped samples, in the file's interleave and byte
    order (no copy); ``header``: the header's fields (``"samples"``, ``"wavelength"``, ``"bbl"``, ``"data ignore
    value"``, ..., and every key as written in ``header["fields"]``). :func:`spectral` on the cube itself uses its
    header's bad bands, data ignore value and reflectance scale factor, as the CLI does. Pickled as its path.
    """

    __slots__ = ("_core", "_header", "_array")

    def __init__(self, core: Any) -> None:
        self._core = core
        self._header: dict[str, Any] = core.header
        raw = core.raw_array
        self._array = raw.view(raw.dtype.newbyteorder(">" if core.big_endian else "<"))

    @property
    def array(self) -> np.ndarray:
        return self._array

    @property
    def header(self) -> dict[str, Any]:
        return self._header

    @property
    def path(self) -> str:
        return self._core.header_path

    @property
    def data_path(self) -> str:
        return self._core.data_path

    @property
    def shape(self) -> tuple[int, int, int]:
        return self._array.shape

    @property
    def dtype(self) -> np.dtype:
        return self._array.dtype

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._array if dtype is None else self._array.astype(dtype)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # Pickled as its path (a worker process maps the file again), not as its samples.
        return (open_envi, (self.path,))

    def __repr__(self) -> str:
        h = self._header
        return (f"<spectrasift.EnviCube {self.path}: {h['lines']} lines x {h['samples']} samples x {h['bands']} bands, "
                f"{self.dtype}, {h['interleave']}>")


def open_envi(path: Any, *, max_pixels: int = _DEFAULT_MAX_PIXELS) -> EnviCube:
    """Opens an ENVI cube from its header (or its data file with a .hdr beside it): :class:`EnviCube`."""
    return EnviCube(_core.open_envi(_path(path), _int_arg("max_pixels", max_pixels, 0)))


@dataclass
class Library:
    """Reference spectra: ``spectra`` (count, bands) float32, ``names``, and when known ``wavelength`` / ``fwhm``."""

    spectra: np.ndarray
    names: list[str]
    wavelength: list[float] = field(default_factory=list)
    fwhm: list[float] = field(default_factory=list)
    wavelength_units: str = ""


def read_library(path: Any) -> Library:
    """An ENVI spectral library (.sli + .hdr) or a CSV (wavelength column, one named column per spectrum)."""
    d = _core.read_library(_path(path))
    return Library(d["spectra"], d["names"], d["wavelength"], d["fwhm"], d["wavelength_units"])


def reference_pixels(cube: Any, xy: Sequence[tuple[int, int]]) -> Library:
    """The spectra at 0-based pixels (x, y) of a cube (``--ref-pixel X,Y``), after its reflectance scale factor."""
    pts = [(_int_arg("x", x), _int_arg("y", y)) for x, y in xy]
    if isinstance(cube, EnviCube):
        spectra, names = _core.reference_from_pixels(cube._core, pts)
        return Library(spectra, names, list(cube.header["wavelength"]), list(cube.header["fwhm"]))
    a = np.asarray(cube)
    if a.ndim != 3:
        raise ValueError(f"cube: (lines, samples, bands) expected, got shape {a.shape}")
    if not pts:
        raise ValueError("no reference pixel given")
    rows = []
    for x, y in pts:
        if not (0 <= x < a.shape[1] and 0 <= y < a.shape[0]):
            raise ValueError(f"reference pixel {x},{y} is outside the cube ({a.shape[1]} samples x {a.shape[0]} lines)")
        rows.append(a[y, x, :].astype(np.float64))
    return Library(np.asarray(rows, dtype=np.float32), [f"pixel {x},{y}" for x, y in pts])


@dataclass
class SpectralResult:
    """What :func:`spectral` returns (unpacks as ``scores, index``).

    ``scores``: (lines, samples, k) float32, k = one band per reference (all), 1 (best, threshold) or K (top);
    ``index``: (lines, samples, k) int32 reference indices (-1 = no data or rejected), ``None`` without
    best/top/threshold. Both are views on the library's band-sequential buffers (``scores[..., 0]`` is one band).
    ``times_ms``: the library's stages (upload, compute, download, match_total); ``backend``: what ran.
    """

    scores: np.ndarray
    index: np.ndarray | None
    times_ms: dict[str, float]
    backend: str
    names: list[str]

    def __iter__(self) -> Iterator[Any]:
        return iter((self.scores, self.index))


def _dense_strides(a: np.ndarray) -> list[int] | None:
    """Element strides of `a` when they describe a dense BSQ, BIL or BIP layout of (lines, samples, bands) (what
    a CubeRef reads in place), else None."""
    item = a.itemsize
    if any(s <= 0 or s % item for s in a.strides):
        return None
    strides = [s // item for s in a.strides]
    lines, samples, bands = a.shape
    for dense in ((samples, 1, lines * samples), (samples * bands, 1, samples), (samples * bands, bands, 1)):
        if all(n == 1 or s == d for s, d, n in zip(strides, dense, a.shape)):
            return strides
    return None


def _references(references: Any, bands: int, cube: Any) -> tuple[np.ndarray, list[str]]:
    if isinstance(references, Library):
        spectra, names = np.asarray(references.spectra, dtype=np.float32), list(references.names)
        wavelength = cube.header["wavelength"] if isinstance(cube, EnviCube) else []
        if spectra.shape[-1] != bands and references.wavelength and wavelength:
            fwhm = cube.header["fwhm"]
            spectra = _core.resample_library(np.ascontiguousarray(spectra), list(references.wavelength),
                                             list(references.fwhm), list(wavelength), list(fwhm))
    else:
        spectra, names = np.asarray(references, dtype=np.float32), []
    if spectra.ndim == 1:
        spectra = spectra[None, :]
    if spectra.ndim != 2 or spectra.shape[1] != bands or spectra.shape[0] == 0:
        raise ValueError(f"references must be (count, {bands}) spectra for a cube of {bands} bands, got {spectra.shape}")
    return np.ascontiguousarray(spectra), names


def spectral(ctx: Context, cube: Any, references: Any, *, metric: str = "sam", best: bool = False, top: int = 0,
             threshold: float | None = None, chunk_lines: int = 0, no_tensor_cores: bool = False,
             wavelength: Sequence[float] | None = None, bbl: Sequence[int] | None = None,
             data_ignore_value: float | None = None,
             reflectance_scale_factor: float | None = None) -> SpectralResult:
    """Every pixel of a cube against reference spectra (``spectrasift spectral``).

    ``cube``: an :class:`EnviCube` (its header's bad bands, ignore value and scale factor apply), or an array of
    shape (lines, samples, bands) of any ENVI sample type (uint8, int16, uint16, int32, uint32, int64, uint64,
    float32, float64; either byte order) in any memory order: a BSQ, BIL or BIP layout (C order is BIP) is read in
    place, any other order is copied first. For arrays, ``wavelength``, ``bbl`` (1 good, 0 bad),
    ``data_ignore_value`` and ``reflectance_scale_factor`` play the header's part.
    ``references``: (count, bands) or (bands,) spectra, or a :class:`Library` (resampled onto an EnviCube's
    wavelengths when the band counts differ, as the CLI's ``--library``).
    ``metric``: ``"sam"``, ``"ed"``, ``"scc"`` or ``"sid"``; at most one of ``best``, ``top=K`` and
    ``threshold=T`` (like best; pixels failing T get index -1); ``chunk_lines``: lines per chunk (0 = chosen);
    ``no_tensor_cores``: CUDA FP32 only. Returns :class:`SpectralResult` (unpacks as ``scores, index``).
    """
    core_ctx = _ctx(ctx)
    top = _int_arg("top", top, 0)
    if int(bool(best)) + int(top > 0) + int(threshold is not None) > 1:
        raise ValueError("give at most one of best, top and threshold")
    reduction = "best" if best else "top" if top > 0 else "threshold" if threshold is not None else "all"
    thr = 0.0 if threshold is None else _float_arg("threshold", threshold)
    if not math.isfinite(thr):
        raise ValueError(f"threshold must be finite (got {thr})")
    chunk_lines = _int_arg("chunk_lines", chunk_lines, 0)
    if not isinstance(metric, str):
        raise ValueError(f"metric must be one of sam, ed, scc, sid, not {metric!r}")
    opts = (metric.lower(), reduction, max(top, 1), thr, chunk_lines, not no_tensor_cores)
    if isinstance(cube, EnviCube):
        if any(v is not None for v in (wavelength, bbl, data_ignore_value, reflectance_scale_factor)):
            raise ValueError("wavelength, bbl, data_ignore_value and reflectance_scale_factor are for arrays; "
                             "an EnviCube has its header's")
        refs, names = _references(references, cube.header["bands"], cube)
        r = _core.spectral_envi(core_ctx, cube._core, refs, names, *opts)
    else:
        a = np.asarray(cube)
        if a.ndim != 3:
            raise ValueError(f"cube: an array of shape (lines, samples, bands) expected, got {a.shape}")
        envi_type = _ENVI_TYPES.get(a.dtype.newbyteorder("="))
        if envi_type is None:
            raise ValueError(f"cube: sample type {a.dtype} is not an ENVI type (uint8, int16, uint16, int32, uint32, "
                             "int64, uint64, float32, float64)")
        if a.size == 0:
            raise ValueError(f"cube: the cube is empty (shape {a.shape})")
        big_endian = a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and sys.byteorder == "big")
        strides = _dense_strides(a)
        if strides is None:
            a = np.ascontiguousarray(a)
            strides = _dense_strides(a)
        native = a.view(a.dtype.newbyteorder("="))  # the same bytes; the library swaps them when big_endian
        refs, names = _references(references, a.shape[2], a)
        r = _core.spectral_array(core_ctx, native, envi_type, big_endian, strides,
                                 [] if wavelength is None else [float(w) for w in wavelength],
                                 [] if bbl is None else [int(b) for b in bbl],
                                 None if data_ignore_value is None else float(data_ignore_value),
                                 None if reflectance_scale_factor is None else float(reflectance_scale_factor),
                                 refs, names, *opts)
    scores = r["scores"].transpose(1, 2, 0)
    index = None if r["index"] is None else r["index"].transpose(1, 2, 0)
    names = names or [f"reference {i}" for i in range(r["references"])]
    return SpectralResult(scores, index, r["times_ms"], r["backend"], names)
