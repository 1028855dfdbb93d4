"""spectrasift-batch: the command line of :mod:`spectrasift.batch` (jobs over a list, on Dask).

    spectrasift-batch register LIST.csv --out DIR [--workers N] [--scheduler ADDR] [--backend B]
    spectrasift-batch features LIST.csv --out DIR ...
    spectrasift-batch spectral LIST.csv --out DIR (--library LIB | --ref-pixel X,Y ...) [--metric M] [--best] ...

LIST.csv has a header line and the columns ``fixed,moving`` (register), ``image`` (features) or ``cube`` (spectral:
ENVI headers); relative paths are relative to the folder of LIST.csv. DIR/results.csv gets one row per item
(spectrasift.batch.COLUMNS), DIR/<name>.json (+ .npz) each item's outputs; items whose outputs exist are skipped
(--no-resume recomputes them). Exit status: 0 when every item succeeded, 4 when some failed (their rows say why),
2 for a usage error or a list that cannot be read.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time
from typing import Any, Sequence

_COLUMNS = {"register": ("fixed", "moving"), "features": ("image",), "spectral": ("cube",)}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spectrasift-batch", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Module documentation: python -m pydoc spectrasift.batch")
    sub = p.add_subparsers(dest="kind", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("list", metavar="LIST.csv", help="the items, one a row, with a header line")
    common.add_argument("--out", required=True, metavar="DIR", help="output folder (results.csv, one file per item)")
    common.add_argument("--workers", type=int, metavar="N",
                        help="workers of the LocalCluster made here (default: the CPU count), one thread each")
    common.add_argument("--scheduler", metavar="ADDR", help="run on this existing cluster (tcp://host:8786)")
    common.add_argument("--backend", default="auto", help="auto|cpu|cuda|opencl (default auto)")
    common.add_argument("--device", type=int, metavar="I",
                        help="every worker on this device (default: worker i on device i %% n)")
    common.add_argument("--threads", type=int, default=0, metavar="T",
                        help="CPU threads per worker's Context (default 0: the cores / workers of a LocalCluster "
                             "made here, all cores on another cluster)")
    common.add_argument("--no-resume", action="store_true", help="recompute items whose outputs exist")
    common.add_argument("--timeout", type=float, metavar="S",
                        help="cancel the items not finished after S seconds (their rows say so; default: none)")
    common.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar (it is shown only when stderr is a terminal)")

    sift = argparse.ArgumentParser(add_help=False)
    sift.add_argument("--max-features", type=int, default=0, help="keep the N strongest keypoints (default 0 = all)")
    sift.add_argument("--no-upsample", action="store_true", help="start at the input size (default: doubled)")

    r = sub.add_parser("register", parents=[common, sift], help="register each MOVING onto its FIXED",
                       description="LIST.csv columns: fixed,moving. As `spectrasift register FIXED MOVING`.")
    r.add_argument("--model", default="homography", choices=("homography", "affine", "similarity"))
    r.add_argument("--threshold", type=float, default=3.0, help="RANSAC inlier threshold in FIXED pixels (3)")
    r.add_argument("--ratio", type=float, default=0.8, help="Lowe's ratio test (0.8)")
    r.add_argument("--seed", type=int, default=0, help="RANSAC seed (0)")
    r.add_argument("--accept-weak", action="store_true", help="keep a model that is not reliable")

    f = sub.add_parser("features", parents=[common, sift], help="SIFT features of each image",
                       description="LIST.csv column: image. Writes DIR/<name>.npz (keypoints, descriptors).")
    f.add_argument("--root-sift", action="store_true", help="RootSIFT descriptors")
    f.add_argument("--descriptor-type", default="f32", choices=("f32", "u8"),
                   help="descriptors saved as float32 (f32, default) or uint8 (u8: the same values; not with "
                        "--root-sift)")

    s = sub.add_parser("spectral", parents=[common], help="match each ENVI cube against reference spectra",
                       description="LIST.csv column: cube (ENVI headers). Writes DIR/<name>.npz (scores, index).")
    refs = s.add_mutually_exclusive_group(required=True)
    refs.add_argument("--library", help="ENVI .sli (+ .hdr) or CSV library, resampled onto each cube")
    refs.add_argument("--ref-pixel", action="append", metavar="X,Y", help="reference at pixel X,Y of each cube")
    s.add_argument("--metric", default="sam", choices=("sam", "ed", "scc", "sid"))
    reduce = s.add_mutually_exclusive_group()
    reduce.add_argument("--best", action="store_true", help="keep the best reference per pixel")
    reduce.add_argument("--top", type=int, default=0, metavar="K", help="keep the K best references per pixel")
    reduce.add_argument("--threshold", type=float, metavar="T", help="like --best; pixels failing T get -1")
    return p


def _read_list(path: str, kind: str) -> list[list[str]]:
    """The input columns of LIST.csv."""
    import pandas as pd  # noqa: PLC0415 - after argparse, so that --help is quick

    table = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    missing = [c for c in _COLUMNS[kind] if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: no column {', '.join(missing)} (the header line has {', '.join(table.columns)})")
    return [list(table[c]) for c in _COLUMNS[kind]]


def _pixel(text: str) -> tuple[int, int]:
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"--ref-pixel wants X,Y (two integers from 0), not {text!r}")
    return int(parts[0]), int(parts[1])


def _options(a: argparse.Namespace) -> dict[str, Any]:
    if a.kind == "spectral":
        o: dict[str, Any] = {"metric": a.metric, "best": a.best, "top": a.top, "threshold": a.threshold}
        if a.library:
            o["library"] = a.library
        else:
            o["ref_pixels"] = [_pixel(xy) for xy in a.ref_pixel]
        return o
    o = {"max_features": a.max_features, "no_upsample": a.no_upsample}
    if a.kind == "register":
        o.update(model=a.model, threshold=a.threshold, ratio=a.ratio, seed=a.seed, accept_weak=a.accept_weak)
    else:
        o["root_sift"] = a.root_sift
        o["descriptor_type"] = a.descriptor_type
    return o


def main(argv: Sequence[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    try:
        from . import batch  # noqa: PLC0415 - needs dask.distributed and pandas
    except ImportError as e:
        print(f"spectrasift-batch: {e} (install dask[distributed] and pandas: pip install 'spectrasift[batch]')",
              file=sys.stderr)
        return 2
    try:
        columns = _read_list(a.list, a.kind)
        if a.kind == "spectral" and a.ref_pixel:
            _options(a)  # X,Y parse errors are usage errors
    except (OSError, ValueError) as e:
        print(f"spectrasift-batch: {e}", file=sys.stderr)
        return 2
    run = {"register": batch.register_pairs, "features": batch.extract_features, "spectral": batch.match_cubes}
    items = list(zip(*columns)) if a.kind == "register" else columns[0]
    t0 = time.perf_counter()
    frame = run[a.kind](items, a.out, scheduler=a.scheduler, workers=a.workers, backend=a.backend, device=a.device,
                        threads=a.threads, resume=not a.no_resume, timeout=a.timeout,
                        relative_to=pathlib.Path(a.list).resolve().parent,
                        progress=not a.quiet and sys.stderr.isatty(), **_options(a))
    seconds = time.perf_counter() - t0
    failed = frame[frame["error"] != ""]
    resumed = int(frame["resumed"].sum())
    for _, row in failed.head(10).iterrows():
        print(f"spectrasift-batch: {' '.join(str(row[c]) for c in _COLUMNS[a.kind])}: {row['error']}", file=sys.stderr)
    if len(failed) > 10:
        print(f"spectrasift-batch: ... and {len(failed) - 10} more (see results.csv)", file=sys.stderr)
    computed = len(frame) - resumed
    print(f"{a.kind}: {len(frame)} items, {computed - len(failed)} done, {resumed} resumed, {len(failed)} failed in "
          f"{seconds:.1f} s ({computed / max(seconds, 1e-9):.2f} items/s) -> {os.path.join(a.out, 'results.csv')}")
    return 4 if len(failed) else 0


if __name__ == "__main__":
    sys.exit(main())
