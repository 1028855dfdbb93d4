"""Scale-out on Dask: many registrations, feature extractions or spectral matches, one task per item.

    from spectrasift import batch
    df = batch.register_pairs([("scene.png", "object.png"), ...], "out/", workers=4, backend="cuda")
    df = batch.extract_features(["a.png", "b.tif"], "out/")
    df = batch.match_cubes(["c1.hdr", "c2.hdr"], "out/", library="minerals.sli", metric="sam", best=True)

Each item is one task of a ``dask.distributed`` graph, run on a :class:`distributed.LocalCluster` made here
(``workers`` processes of one thread each; the default) or on an existing cluster (``scheduler="tcp://host:8786"``
or ``client=`` a :class:`distributed.Client`). Every worker process holds ONE :class:`spectrasift.Context` for its
life (:class:`ContextPlugin`, made on the worker's first item, closed when the worker ends); its calls are
serialised, so a worker with several threads is correct but gains nothing: give workers one thread.

Devices: ``device=None`` (the default) binds the worker named or ranked ``i`` to device ``i % n`` of the backend
(n = the devices of that backend the worker sees): LocalCluster names its workers 0, 1, ...; on another cluster
name them so (``dask worker --name 3``), or give each worker one GPU with ``CUDA_VISIBLE_DEVICES`` (then n = 1),
or pass ``device=`` to put every worker on one device. A worker whose name is not a number is ranked by a hash of
its name. Without a cluster of its own making, ``threads=0`` is the Context's default (all cores); a LocalCluster
made here gives each CPU Context cores / workers threads, so that the workers do not oversubscribe the machine.

The result is a pandas DataFrame, one row per item in the input order: the inputs, the output file, the model or
counts, ``time_ms`` (the item's wall time on its worker: read, compute, write), the stage times, ``worker`` and
``error`` ("" when the item succeeded, else ``"ExceptionType: message"``; an item never stops the others, and an
item that keeps killing its worker gets a ``KilledWorker`` row). With ``out_dir``, each item that succeeded
writes ``out_dir/<name>.json`` (its row) and, for features and spectral, ``out_dir/<name>.npz`` (the arrays),
each written whole or not at all; ``results.csv`` gathers the rows. A rerun with the same ``out_dir`` skips
(``resume=True``) the items whose ``.json`` exists and takes their rows from it (``resumed`` True); ``<name>`` is
the input's stem and a hash of the inputs' absolute paths and the options, so a changed option recomputes.

The functions are the package's public ones (read_image, register, sift, open_envi, spectral): the matrices are
the CLI's bits (``spectrasift register --json``) for the same pair and options. ``spectrasift-batch``
(:mod:`spectrasift.batch_cli`) is the command line over this module.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import pathlib
import sys
import threading
import time
import uuid
import weakref
import zlib
from typing import Any, Callable, Iterator, Sequence

import distributed
import numpy as np
import pandas as pd

from . import Context, Library, NoModelError, devices, open_envi, read_image, read_library, reference_pixels
from . import register as _register
from . import sift as _sift
from . import spectral as _spectral

__all__ = ["register_pairs", "extract_features", "match_cubes", "read_results", "write_results", "ContextPlugin",
           "warm_up", "cluster_client", "COLUMNS"]

PLUGIN_NAME = "spectrasift-context"

#: The columns of each kind's DataFrame and results.csv, in order.
COLUMNS = {
    "register": ["fixed", "moving", "output", "matrix", "model", "inliers", "matches", "rms_px", "reliable",
                 "time_ms", "sift_ms", "match_ms", "ransac_ms", "worker", "resumed", "error"],
    "features": ["image", "output", "features", "width", "height", "time_ms", "sift_ms", "worker", "resumed", "error"],
    "spectral": ["cube", "output", "lines", "samples", "bands", "references", "metric", "reduction", "valid_pixels",
                 "time_ms", "compute_ms", "worker", "resumed", "error"],
}
_INTEGER_COLUMNS = ("inliers", "matches", "features", "width", "height", "lines", "samples", "bands", "references",
                    "valid_pixels")
_INPUTS = {"register": ("fixed", "moving"), "features": ("image",), "spectral": ("cube",)}


# ---- one Context per worker process --------------------------------------------------------------------------------

def _rank(name: Any) -> int:
    """A worker's rank: its name when that is a number (LocalCluster: 0, 1, ...), else a hash of the name."""
    try:
        return int(name)
    except (TypeError, ValueError):
        return zlib.crc32(str(name).encode())


class _ContextHolder:
    """One Context, made on first use in the thread of the first item (a CUDA context is best made where it is
    used) and kept; ``lock`` serialises the items of a process (a Context is used by one thread at a time)."""

    def __init__(self, spec: tuple[str, int | None, int], rank: int) -> None:
        self.spec, self.rank = spec, rank
        self.lock = threading.Lock()
        self._ctx: Context | None = None

    def context(self) -> Context:
        """The Context (the caller holds ``lock``)."""
        if self._ctx is None or self._ctx.closed:
            backend, device, threads = self.spec
            if device is not None:
                self._ctx = Context(backend, device, threads)
            else:
                # Device i % n of the backend the Context resolves to ("auto" picks one; ask it which).
                ctx = Context(backend, 0, threads)
                n = max(1, sum(1 for d in devices() if d["backend"] == ctx.backend))
                if self.rank % n != 0:
                    resolved = ctx.backend
                    ctx.close()
                    ctx = Context(resolved, self.rank % n, threads)
                self._ctx = ctx
        return self._ctx

    def close(self) -> None:
        with self.lock:
            if self._ctx is not None:
                self._ctx.close()
                self._ctx = None


class ContextPlugin(distributed.WorkerPlugin):
    """Worker plugin that gives each worker process one Context (``backend``, ``device`` = None: i % n by the
    worker's rank, ``threads``) for its life: made on the worker's first item, closed at the worker's teardown.
    Registered by the functions of this module under the name ``"spectrasift-context"`` (a new registration with
    other settings replaces it)."""

    name = PLUGIN_NAME

    def __init__(self, backend: str = "auto", device: int | None = None, threads: int = 0) -> None:
        self.spec = (backend, device, threads)
        self.holder: _ContextHolder | None = None

    def setup(self, worker: Any) -> None:
        self.holder = _ContextHolder(self.spec, _rank(worker.name))

    def teardown(self, worker: Any) -> None:
        if self.holder is not None:
            self.holder.close()


_PROCESS_HOLDERS: dict[tuple[Any, ...], _ContextHolder] = {}
_PROCESS_LOCK = threading.Lock()


def _holder(spec: tuple[str, int | None, int]) -> tuple[_ContextHolder, str]:
    """The Context holder of this worker (its plugin's) and the worker's name; outside a worker that has the
    plugin for these settings (run in the client's process, or a plugin for other settings), one per process."""
    try:
        worker = distributed.get_worker()
    except ValueError:
        worker = None
    plugin = worker.plugins.get(PLUGIN_NAME) if worker is not None else None
    if isinstance(plugin, ContextPlugin) and plugin.spec == spec and plugin.holder is not None:
        return plugin.holder, str(worker.name)
    name = str(worker.name) if worker is not None else f"pid {os.getpid()}"
    with _PROCESS_LOCK:
        key = (os.getpid(), spec)
        if key not in _PROCESS_HOLDERS:
            _PROCESS_HOLDERS[key] = _ContextHolder(spec, _rank(worker.name) if worker is not None else 0)
        return _PROCESS_HOLDERS[key], name


def _context_description(spec: tuple[str, int | None, int]) -> str:
    holder, name = _holder(spec)
    with holder.lock:
        return f"worker {name}: {holder.context().describe()}"


def warm_up(client: distributed.Client, backend: str = "auto", device: int | None = None,
            threads: int = 0) -> list[str]:
    """Registers the plugin and makes every worker's Context now (one task pinned to each worker), so that
    timings leave out the Contexts' creation. Returns one description per worker ("worker 0: cpu:0 ...")."""
    _register_plugin(client, ContextPlugin(backend, device, threads))
    spec = (backend, device, threads)
    futures = [client.submit(_context_description, spec, workers=[w], allow_other_workers=False, pure=False)
               for w in client.scheduler_info()["workers"]]
    return client.gather(futures)


# The plugin settings registered through each Client: registering the same again would replace the plugin and
# close the workers' Contexts (made by warm_up, or by the previous job).
_REGISTERED: "weakref.WeakKeyDictionary[distributed.Client, tuple]" = weakref.WeakKeyDictionary()


def _register_plugin(client: distributed.Client, plugin: ContextPlugin) -> None:
    if _REGISTERED.get(client) == plugin.spec:
        return
    _REGISTERED[client] = plugin.spec
    # distributed >= 2023.9 has register_plugin; register_worker_plugin (older) is deprecated there.
    if hasattr(client, "register_plugin"):
        client.register_plugin(plugin, name=PLUGIN_NAME)
    else:
        client.register_worker_plugin(plugin, name=PLUGIN_NAME)


# ---- the jobs ------------------------------------------------------------------------------------------------------

def _run_register(ctx: Context, item: dict[str, Any], options: dict[str, Any]) -> tuple[dict[str, Any], dict]:
    fixed, moving = read_image(item["fixed_path"]), read_image(item["moving_path"])
    row: dict[str, Any] = {}
    try:
        r = _register(ctx, fixed, moving, **options)
    except NoModelError as e:
        weak = getattr(e, "result", None)
        if weak is not None:
            row.update(inliers=weak.inlier_count, matches=weak.match_count)
        raise _ItemError(e, row) from e
    row.update(matrix=r.matrix, model=r.model, inliers=r.inlier_count, matches=r.match_count, rms_px=r.rms_px,
               reliable=r.reliable, sift_ms=r.times_ms["sift"], match_ms=r.times_ms["match"],
               ransac_ms=r.times_ms["ransac"])
    return row, {}


def _run_features(ctx: Context, item: dict[str, Any], options: dict[str, Any]) -> tuple[dict[str, Any], dict]:
    image = read_image(item["image_path"])
    t0 = time.perf_counter()
    f = _sift(ctx, image, **options)
    sift_ms = (time.perf_counter() - t0) * 1e3
    row = {"features": len(f), "width": int(image.shape[1]), "height": int(image.shape[0]), "sift_ms": sift_ms}
    arrays = {"keypoints": f.keypoints, "descriptors": f.descriptors,
              "image_size": np.array([image.shape[1], image.shape[0]], np.int64)}
    return row, arrays


def _run_spectral(ctx: Context, item: dict[str, Any], options: dict[str, Any]) -> tuple[dict[str, Any], dict]:
    options = dict(options)
    cube = open_envi(item["cube_path"])
    library, ref_pixels = options.pop("library", None), options.pop("ref_pixels", None)
    refs = library if library is not None else reference_pixels(cube, ref_pixels)
    r = _spectral(ctx, cube, refs, **options)
    lines, samples, bands = cube.shape
    valid = int(np.count_nonzero(r.index[..., 0] >= 0)) if r.index is not None else None
    reduction = ("best" if options.get("best") else "top" if options.get("top") else
                 "threshold" if options.get("threshold") is not None else "all")
    row = {"lines": lines, "samples": samples, "bands": bands, "references": len(r.names),
           "metric": options.get("metric", "sam"), "reduction": reduction, "valid_pixels": valid,
           "compute_ms": r.times_ms.get("match_total", math.nan)}
    arrays = {"scores": r.scores} if r.index is None else {"scores": r.scores, "index": r.index}
    return row, arrays


_JOBS: dict[str, Callable[[Context, dict[str, Any], dict[str, Any]], tuple[dict[str, Any], dict]]] = {
    "register": _run_register, "features": _run_features, "spectral": _run_spectral}


class _ItemError(Exception):
    """An item's failure with what was learnt before it (e.g. the match count of a pair with no model)."""

    def __init__(self, cause: BaseException, row: dict[str, Any]) -> None:
        super().__init__(str(cause))
        self.cause, self.row = cause, row


def _error_text(e: BaseException) -> str:
    cause = e.cause if isinstance(e, _ItemError) else e
    return f"{type(cause).__name__}: {cause}".strip()


def _json_value(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v


def _write_atomically(path: pathlib.Path, write: Callable[[Any], None], mode: str) -> None:
    """Writes to a temporary file beside `path`, then renames it: a reader sees the whole file or none."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, mode) as f:
        write(f)
    os.replace(tmp, path)


def _run_item(kind: str, item: dict[str, Any], out_dir: str | None, spec: tuple[str, int | None, int],
              options: dict[str, Any]) -> dict[str, Any]:
    """One item on a worker: its row. Never raises (an error is recorded in the row)."""
    t0 = time.perf_counter()
    row: dict[str, Any] = {k: item[k] for k in _INPUTS[kind]}
    row.update(output=item["output"], resumed=False, error="")
    worker = "?"
    try:
        holder, worker = _holder(spec)
        with holder.lock:
            fields, arrays = _JOBS[kind](holder.context(), item, options)
        row.update(fields)
        if out_dir is not None:
            base = pathlib.Path(out_dir) / item["output"]
            if arrays:
                _write_atomically(base.with_suffix(".npz"), lambda f: np.savez(f, **arrays), "wb")
            row["time_ms"] = (time.perf_counter() - t0) * 1e3
            row["worker"] = worker
            record = {k: _json_value(v) for k, v in row.items()}
            _write_atomically(base.with_suffix(".json"), lambda f: json.dump(record, f), "w")
    except Exception as e:  # noqa: BLE001 - one bad item never stops the others: it is recorded in its row
        if isinstance(e, _ItemError):
            row.update(e.row)
        row["error"] = _error_text(e)
    row["time_ms"] = (time.perf_counter() - t0) * 1e3
    row["worker"] = worker
    return row


# ---- driving a job -------------------------------------------------------------------------------------------------

def _output_name(kind: str, paths: Sequence[str], options: dict[str, Any]) -> str:
    """<stem(s)>-<hash of kind, absolute inputs and options>: the same item with the same options, the same name."""
    stems = "_on_".join(pathlib.Path(p).stem for p in reversed(paths))  # register: MOVING_on_FIXED
    digest = hashlib.sha1(json.dumps([kind, list(paths), options], sort_keys=True, default=_digest_of).encode())
    return f"{stems}-{digest.hexdigest()[:12]}"


def _digest_of(value: Any) -> str:
    """A JSON stand-in for an option JSON cannot hold (a Library, an array): a digest of all its values."""
    if isinstance(value, Library):
        value = [value.spectra, value.names, value.wavelength, value.fwhm, value.wavelength_units]
        return hashlib.sha1(json.dumps(value, default=_digest_of).encode()).hexdigest()
    if isinstance(value, np.ndarray):
        return hashlib.sha1(str((value.dtype.str, value.shape)).encode() + value.tobytes()).hexdigest()
    return repr(value)


def _resumed_row(kind: str, path: pathlib.Path) -> dict[str, Any] | None:
    try:
        row = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if kind == "register" and row.get("matrix") is not None:
        row["matrix"] = np.array(row["matrix"], np.float64)
    row["resumed"] = True
    return row


@contextlib.contextmanager
def cluster_client(client: distributed.Client | None = None, scheduler: str | None = None,
                   workers: int | None = None) -> Iterator[distributed.Client]:
    """The Client to use: ``client`` as given; else one connected to ``scheduler``; else a new LocalCluster of
    ``workers`` processes (default: the CPU count) with one thread each, closed on exit."""
    if client is not None:
        yield client
        return
    if scheduler is not None:
        with distributed.Client(scheduler) as c:
            yield c
        return
    n = workers if workers is not None else (os.cpu_count() or 1)
    with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, distributed.Client(cluster) as c:
        yield c


def _progress_bar(kind: str) -> Callable[[int, int, int], None]:
    """A one-line bar on stderr: 'register  37/50 [##########.....]  1 error  3.2 /s'."""
    t0 = time.perf_counter()

    def show(done: int, total: int, errors: int) -> None:
        width = 30
        filled = width * done // max(total, 1)
        rate = done / max(time.perf_counter() - t0, 1e-9)
        err = f"  {errors} error{'s' if errors != 1 else ''}" if errors else ""
        sys.stderr.write(f"\r{kind} {done:>{len(str(total))}}/{total} [{'#' * filled}{'.' * (width - filled)}]"
                         f"{err}  {rate:.1f} /s")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _run_job(kind: str, items: list[dict[str, Any]], out_dir: Any, options: dict[str, Any], *,
             client: distributed.Client | None, scheduler: str | None, workers: int | None, backend: str,
             device: int | None, threads: int, resume: bool, progress: Any, timeout: float | None) -> pd.DataFrame:
    out = None
    if out_dir is not None:
        out = pathlib.Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any] | None] = [None] * len(items)
    todo = []
    for i, item in enumerate(items):
        item["output"] = _output_name(kind, [item[k + "_path"] for k in _INPUTS[kind]], options)
        done = _resumed_row(kind, out / (item["output"] + ".json")) if (out is not None and resume) else None
        if done is not None:
            rows[i] = done
        else:
            todo.append(i)
    report = _progress_bar(kind) if progress is True else (progress or None)
    if report:
        report(len(items) - len(todo), len(items), 0)
    if todo:
        own_cluster = client is None and scheduler is None
        if own_cluster and threads == 0:
            threads = max(1, (os.cpu_count() or 1) // (workers or os.cpu_count() or 1))
        spec = (backend, device, threads)
        with cluster_client(client, scheduler, workers) as c:
            _register_plugin(c, ContextPlugin(*spec))
            job = uuid.uuid4().hex[:8]  # a rerun on the same cluster must not reuse this run's results
            futures = {c.submit(_run_item, kind, items[i], None if out is None else str(out), spec, options,
                                key=f"spectrasift-{kind}-{job}-{i}", pure=False): i for i in todo}
            _collect_rows(kind, c, futures, items, rows, timeout, report, len(items) - len(todo))
            for i in todo:  # not finished: the job's time ran out (or the cluster cancelled it)
                if rows[i] is None:
                    rows[i] = _complete(kind, {k: items[i][k] for k in _INPUTS[kind]})
                    rows[i].update(output=items[i]["output"], resumed=False,
                                   error=(f"TimeoutError: not finished within the job's {timeout} s"
                                          if timeout is not None else "CancelledError: the task was cancelled"))
    frame = _typed(pd.DataFrame([_complete(kind, r) for r in rows], columns=COLUMNS[kind]))
    if out is not None:
        write_results(frame, out / "results.csv")
    return frame


# Seconds a job waits, once its time is up and its unfinished tasks were cancelled, for them to come out of
# as_completed before it stops waiting (a cancel that never reaches the scheduler must not hang the job).
_CANCEL_GRACE_S = 10.0


def _collect_rows(kind: str, c: distributed.Client, futures: dict[distributed.Future, int],
                  items: list[dict[str, Any]], rows: list[dict[str, Any] | None], timeout: float | None,
                  report: Any, already: int) -> list[int]:
    """Fills rows[i] for each task as it ends; returns the indices filled. A row is decided by what arrived (the
    task's dict, or its error), never by the future's status afterwards: a finished future whose worker then dies
    turns "lost", and one cancelled at the deadline just after it finished turns "cancelled", yet its row is
    already here. Each future is dropped once collected, so that a worker's death does not recompute it.

    as_completed tracks each future once and fetches its row on the client's event loop as it ends. (A loop of
    distributed.wait(FIRST_COMPLETED) over the pending set re-registered every pending future per completion:
    O(items^2) work on that loop, which with a LocalCluster is also the scheduler's, and at 16 workers on the GPU
    host it left the workers 28 % idle.) At the deadline a timer cancels the unfinished tasks, which then come out
    of the iterator; should they not within _CANCEL_GRACE_S, the iterator is emptied and the job goes on."""
    ended = distributed.as_completed(list(futures), loop=c.loop, with_results=True, raise_errors=False)
    filled: list[int] = []
    errors = 0
    stop = threading.Event()

    def out_of_time() -> None:
        with contextlib.suppress(Exception):  # the job must end even if the cancel fails
            c.cancel([f for f in list(futures) if not f.done()])
        if not stop.wait(_CANCEL_GRACE_S):
            ended.clear()

    timer = None
    if timeout is not None:
        timer = threading.Timer(max(0.0, timeout), out_of_time)
        timer.daemon = True
        timer.start()
    try:
        for batch in ended.batches():
            for f, result in batch:
                i = futures.pop(f, None)
                if i is None or rows[i] is not None:
                    continue
                if isinstance(result, dict):
                    rows[i] = result
                elif isinstance(result, tuple) and len(result) == 3 and isinstance(result[1], BaseException):
                    rows[i] = _failed_row(kind, items[i], result[1])  # the task failed in Dask itself
                else:
                    continue  # cancelled: a row is made by the caller
                filled.append(i)
                errors += bool(rows[i]["error"])
            if report:
                report(already + len(filled), len(items), errors)
    except BaseException:
        with contextlib.suppress(Exception):
            c.cancel([f for f in list(futures) if not f.done()])
        raise
    finally:
        stop.set()
        if timer is not None:
            timer.cancel()
            timer.join(_CANCEL_GRACE_S + 5.0)  # a cancel in flight ends before the client closes
    return filled


def _failed_row(kind: str, item: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    """The row of a task that failed in Dask itself (e.g. it killed its worker more often than the scheduler's
    allowed-failures)."""
    row = {k: item[k] for k in _INPUTS[kind]}
    row.update(output=item["output"], resumed=False, error=_error_text(exc))
    return row


def _complete(kind: str, row: dict[str, Any] | None) -> dict[str, Any]:
    row = dict(row or {})
    for col in COLUMNS[kind]:
        row.setdefault(col, "" if col == "error" else None)
    return row


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Counts as integers that may be missing (pandas "Int64"; a failed item has none)."""
    for col in _INTEGER_COLUMNS:
        if col in frame:
            frame[col] = frame[col].astype("Int64")
    return frame


def write_results(frame: pd.DataFrame, path: Any) -> None:
    """Writes a job's DataFrame as CSV: ``matrix`` as 9 numbers, row-major, separated by spaces (each printed
    exactly: ``float(text)`` gives the same double back), empty for a failed pair; ``error`` empty on success."""
    table = frame.copy()
    if "matrix" in table:
        table["matrix"] = [" ".join(repr(float(v)) for v in np.asarray(m).ravel()) if m is not None else ""
                           for m in table["matrix"]]
    _write_atomically(pathlib.Path(path), lambda f: table.to_csv(f, index=False), "w")


def read_results(path: Any) -> pd.DataFrame:
    """results.csv as a DataFrame: ``matrix`` back as 3x3 float64 arrays (None for a failed pair), ``error`` "" on
    success."""
    frame = pd.read_csv(path, dtype={"error": str, "output": str}, keep_default_na=False, na_values=[""])
    frame["error"] = frame["error"].fillna("")
    if "matrix" in frame:
        frame["matrix"] = [np.array([float(v) for v in m.split()], np.float64).reshape(3, 3) if isinstance(m, str)
                           else None for m in frame["matrix"]]
    return _typed(frame)


# ---- the public functions ------------------------------------------------------------------------------------------

def _paths(values: Sequence[Any], relative_to: Any) -> list[str]:
    base = os.path.abspath(os.fspath(relative_to)) if relative_to is not None else os.getcwd()
    return [os.path.normpath(os.path.join(base, os.fspath(v))) for v in values]


def register_pairs(pairs: Any, out_dir: Any = None, *, client: distributed.Client | None = None,
                   scheduler: str | None = None, workers: int | None = None, backend: str = "auto",
                   device: int | None = None, threads: int = 0, resume: bool = True, progress: Any = None,
                   timeout: float | None = None, relative_to: Any = None, **options: Any) -> pd.DataFrame:
    """Registers each (FIXED, MOVING) pair as ``spectrasift register FIXED MOVING`` does (the images read grey as
    the CLI reads them; ``options`` are :func:`spectrasift.register`'s: model, threshold, ratio, seed,
    max_features, accept_weak...). ``pairs``: (fixed, moving) path tuples, or a DataFrame with columns ``fixed``
    and ``moving``; relative paths are relative to ``relative_to`` (default: the current folder) and kept as
    given in the rows. Returns one row per pair (``COLUMNS["register"]``): ``matrix`` 3x3 float64, MOVING pixel ->
    FIXED pixel, None when the pair failed (no reliable model: ``NoModelError`` in ``error``, with the match
    and inlier counts). ``progress``: True for a bar on stderr, or a callable(done, total, errors). ``timeout``:
    seconds for the whole job; the items not finished by then are cancelled and get a ``TimeoutError`` row.
    See the module's docstring for the cluster and the files."""
    if isinstance(pairs, pd.DataFrame):
        pairs = list(zip(pairs["fixed"], pairs["moving"]))
    items = [{"fixed": os.fspath(f), "moving": os.fspath(m), "fixed_path": fp, "moving_path": mp}
             for (f, m), fp, mp in zip(pairs, _paths([p[0] for p in pairs], relative_to),
                                         _paths([p[1] for p in pairs], relative_to))]
    return _run_job("register", items, out_dir, options, client=client, scheduler=scheduler, workers=workers,
                    backend=backend, device=device, threads=threads, resume=resume, progress=progress,
                    timeout=timeout)


def extract_features(images: Any, out_dir: Any = None, *, client: distributed.Client | None = None,
                     scheduler: str | None = None, workers: int | None = None, backend: str = "auto",
                     device: int | None = None, threads: int = 0, resume: bool = True, progress: Any = None,
                     timeout: float | None = None, relative_to: Any = None, **options: Any) -> pd.DataFrame:
    """SIFT of each image (read grey, as the CLI; ``options`` are :func:`spectrasift.sift`'s). ``images``: paths,
    or a DataFrame with a column ``image``. Rows: ``COLUMNS["features"]``; ``out_dir/<name>.npz`` holds
    ``keypoints`` (:data:`spectrasift.KEYPOINT_DTYPE`), ``descriptors`` (N x 128 float32, or uint8 with
    ``descriptor_type="u8"``) and ``image_size`` (width, height):
    ``spectrasift.Features(z["keypoints"], z["descriptors"], *z["image_size"])`` (u8 features from uint8 ones)."""
    if isinstance(images, pd.DataFrame):
        images = list(images["image"])
    items = [{"image": os.fspath(p), "image_path": a} for p, a in zip(images, _paths(images, relative_to))]
    return _run_job("features", items, out_dir, options, client=client, scheduler=scheduler, workers=workers,
                    backend=backend, device=device, threads=threads, resume=resume, progress=progress,
                    timeout=timeout)


def match_cubes(cubes: Any, out_dir: Any = None, *, library: Any = None,
                ref_pixels: Sequence[tuple[int, int]] | None = None, client: distributed.Client | None = None,
                scheduler: str | None = None, workers: int | None = None, backend: str = "auto",
                device: int | None = None, threads: int = 0, resume: bool = True, progress: Any = None,
                timeout: float | None = None, relative_to: Any = None, **options: Any) -> pd.DataFrame:
    """Every pixel of each ENVI cube against reference spectra, as ``spectrasift spectral``: ``library`` (a
    :class:`spectrasift.Library`, or the path of an ENVI .sli or CSV library, read once here and resampled onto
    each cube's wavelengths) or ``ref_pixels`` ((x, y) pixels, taken from each cube). ``options`` are
    :func:`spectrasift.spectral`'s (metric, best, top, threshold, chunk_lines...). ``cubes``: header paths, or a
    DataFrame with a column ``cube``. Rows: ``COLUMNS["spectral"]`` (``valid_pixels``: pixels with a reference,
    for best/top/threshold); ``out_dir/<name>.npz`` holds ``scores`` and ``index`` (lines, samples, k)."""
    if (library is None) == (ref_pixels is None):
        raise ValueError("give one of library and ref_pixels")
    if library is not None and not isinstance(library, Library):
        library = read_library(library)
    if isinstance(cubes, pd.DataFrame):
        cubes = list(cubes["cube"])
    items = [{"cube": os.fspath(p), "cube_path": a} for p, a in zip(cubes, _paths(cubes, relative_to))]
    options = dict(options, **({"library": library} if library is not None else
                               {"ref_pixels": [tuple(int(v) for v in xy) for xy in ref_pixels]}))
    return _run_job("spectral", items, out_dir, options, client=client, scheduler=scheduler, workers=workers,
                    backend=backend, device=device, threads=threads, resume=resume, progress=progress,
                    timeout=timeout)
