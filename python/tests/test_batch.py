"""spectrasift.batch and spectrasift-batch on a LocalCluster of 2 workers (issue 23, part 2): 50 registered pairs
with the serial CLI's matrices (bit for bit), one corrupt file = one error row and 49 results, a worker killed
mid-run retried by Dask with a complete result, resume, the features and spectral jobs, the command line.

The pairs are warps of data/box.png made here (PGM files). Skipped where dask.distributed or pandas is missing
(the device host); scripts/setup-debian.sh installs them for CI."""
import json
import logging
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import spectrasift as ss
from conftest import run_cli

distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")
from spectrasift import batch  # noqa: E402 - after the skips

PAIRS = 50
TIMEOUT_S = 300  # per job: a hung cluster fails the test instead of hanging CI
OPTIONS = {"backend": "cpu", "threads": 1, "timeout": TIMEOUT_S}


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, distributed.Client(cluster) as c:
        c.wait_for_workers(2, timeout=120)
        yield c


def write_pgm(path, image):
    """A binary PGM (P5) the library reads: the test's own writer, so that the pairs need no image library."""
    with open(path, "wb") as f:
        f.write(b"P5\n%d %d\n255\n" % (image.shape[1], image.shape[0]))
        f.write(np.ascontiguousarray(image, np.uint8).tobytes())


def homography(k):
    """The k-th test warp: rotation, scale, shift and a little perspective, all varying with k."""
    angle = np.radians(-25 + 50 * k / (PAIRS - 1))
    scale = 0.8 + 0.4 * ((k * 7) % PAIRS) / (PAIRS - 1)
    c, s = scale * np.cos(angle), scale * np.sin(angle)
    h = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    centre = np.array([[1, 0, 180], [0, 1, 130], [0, 0, 1]]) @ h @ np.array([[1, 0, -162], [0, 1, -111], [0, 0, 1]])
    centre[2, :2] = [1e-5 * ((k % 5) - 2), 1e-5 * ((k % 3) - 1)]
    return centre


@pytest.fixture(scope="module")
def pairs(tmp_path_factory, sample_data, cli):
    """PAIRS (fixed, moving) paths: box.png and its k-th warp; with the serial CLI's matrix of each pair."""
    folder = tmp_path_factory.mktemp("pairs")
    fixed = sample_data / "box.png"
    box = ss.read_image(fixed)
    with ss.Context("cpu", threads=1) as ctx:
        for k in range(PAIRS):
            write_pgm(folder / f"warp{k:02d}.pgm", ss.warp(ctx, box, homography(k), 360, 260))
    result = [(str(fixed), str(folder / f"warp{k:02d}.pgm")) for k in range(PAIRS)]
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda p: run_cli(cli, "register", p[0], p[1], "--threads", "1"), result))
    return result, [np.array(j["matrix"], np.float64) for j in runs]


def assert_matrices(frame, expected, skip=()):
    for k, (m, e) in enumerate(zip(frame["matrix"], expected)):
        if k not in skip:
            assert m is not None and m.dtype == np.float64 and np.array_equal(m, e), (k, m, e)


def test_50_pairs_have_the_serial_clis_matrices(client, pairs, tmp_path):
    items, expected = pairs
    seen = []
    frame = batch.register_pairs(items, tmp_path, client=client, progress=lambda *a: seen.append(a), **OPTIONS)
    assert list(frame.columns) == batch.COLUMNS["register"] and len(frame) == PAIRS
    assert (frame["error"] == "").all(), frame["error"].tolist()
    assert list(frame["fixed"]) == [f for f, _ in items] and list(frame["moving"]) == [m for _, m in items]
    assert_matrices(frame, expected)
    assert (frame["inliers"] >= 8).all() and frame["reliable"].all() and not frame["resumed"].any()
    assert set(frame["worker"]) == {"0", "1"}  # both workers took part
    assert seen[0] == (0, PAIRS, 0) and seen[-1] == (PAIRS, PAIRS, 0)
    # results.csv: the same rows, the matrix as 9 numbers that parse back to the same bits.
    written = batch.read_results(tmp_path / "results.csv")
    assert list(written["output"]) == list(frame["output"])
    assert_matrices(written, expected)
    first = pd.read_csv(tmp_path / "results.csv", dtype=str, keep_default_na=False).iloc[0]
    assert len(first["matrix"].split()) == 9 and first["error"] == ""
    record = json.loads((tmp_path / (frame["output"][0] + ".json")).read_text())
    assert np.array_equal(np.array(record["matrix"]), expected[0])


def test_a_corrupt_file_is_one_error_row_and_resume_redoes_only_it(client, pairs, tmp_path):
    items, expected = pairs
    bad = 17
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(open(items[bad][1], "rb").read()[:200])  # a truncated file
    items = list(items)
    items[bad] = (items[bad][0], str(corrupt))
    out = tmp_path / "out"
    frame = batch.register_pairs(items, out, client=client, **OPTIONS)
    errors = frame[frame["error"] != ""]
    assert list(errors.index) == [bad] and errors["error"][bad].startswith("OSError: ")
    assert frame["matrix"][bad] is None and pd.isna(frame["inliers"][bad])
    assert_matrices(frame, expected, skip=(bad,))
    assert not (out / (frame["output"][bad] + ".json")).exists()
    # The file mended: a rerun takes the 49 from their outputs and computes the one.
    corrupt.write_bytes(open(pairs[0][bad][1], "rb").read())
    again = batch.register_pairs(items, out, client=client, **OPTIONS)
    assert (again["error"] == "").all() and list(again["resumed"]) == [k != bad for k in range(PAIRS)]
    assert_matrices(again, expected)
    assert list(batch.read_results(out / "results.csv")["resumed"]) == list(again["resumed"])


def test_a_worker_killed_mid_run_is_retried_and_the_result_is_complete(client, pairs, tmp_path):
    items, expected = pairs
    before = client.run(os.getpid)
    killed = []

    def kill_one_worker(done, total, errors):
        # After a few results, with most pairs still queued or running: SIGKILL one worker process (its nanny
        # starts a new one; the scheduler reschedules the tasks that worker held).
        if 5 <= done <= total - 10 and not killed:
            pid = sorted(before.values())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append((pid, done))

    frame = batch.register_pairs(items, tmp_path, client=client, progress=kill_one_worker, **OPTIONS)
    assert killed, "the worker was not killed mid-run"
    assert len(frame) == PAIRS and (frame["error"] == "").all(), frame["error"].tolist()
    assert_matrices(frame, expected)
    client.wait_for_workers(2, timeout=120)
    after = client.run(os.getpid)
    assert killed[0][0] not in after.values() and len(after) == 2


def test_one_context_per_worker_held_across_jobs(client, pairs, tmp_path):
    items, _ = pairs
    client.wait_for_workers(2, timeout=120)
    described = batch.warm_up(client, "cpu", None, 1)
    assert sorted(d.split(":")[0] for d in described) == ["worker 0", "worker 1"]
    assert all("cpu:0" in d for d in described)

    def context_id(dask_worker):
        return id(dask_worker.plugins[batch.PLUGIN_NAME].holder._ctx)

    ids = client.run(context_id)
    batch.register_pairs(items[:4], client=client, **OPTIONS)
    batch.register_pairs(items[4:8], client=client, **OPTIONS)
    assert client.run(context_id) == ids  # the same Context object in each worker, not one per item or job


def test_features_and_spectral_jobs(client, sample_data, tmp_path):
    images = [sample_data / "box.png", sample_data / "box_in_scene.png", tmp_path / "missing.png"]
    frame = batch.extract_features(images, tmp_path / "f", client=client, max_features=300, **OPTIONS)
    assert list(frame["error"] != "") == [False, False, True] and frame["error"][2].startswith("OSError")
    with ss.Context("cpu", threads=1) as ctx:
        for k in range(2):
            z = np.load(tmp_path / "f" / (frame["output"][k] + ".npz"))
            f = ss.sift(ctx, ss.read_image(images[k]), max_features=300)
            assert frame["features"][k] == len(f) and np.array_equal(z["keypoints"], f.keypoints)
            assert np.array_equal(z["descriptors"], f.descriptors)
            assert list(z["image_size"]) == [frame["width"][k], frame["height"][k]]
        # descriptor_type="u8": uint8 rows in the .npz, which rebuild u8 Features.
        u8 = batch.extract_features(images[:1], tmp_path / "u", client=client, max_features=300,
                                    descriptor_type="u8", **OPTIONS)
        z = np.load(tmp_path / "u" / (u8["output"][0] + ".npz"))
        f = ss.sift(ctx, ss.read_image(images[0]), max_features=300, descriptor_type="u8")
        assert z["descriptors"].dtype == np.uint8 and np.array_equal(z["descriptors"], f.descriptors)
        assert ss.Features(z["keypoints"], z["descriptors"], *z["image_size"]).descriptor_type == "u8"

        cube = sample_data / "sandiego_plane_60.hdr"
        broken = tmp_path / "broken.hdr"
        broken.write_text("ENVI\nsamples = 3\n")
        s = batch.match_cubes([cube, broken], tmp_path / "s", ref_pixels=[(30, 30), (5, 5)], best=True, **OPTIONS,
                              client=client)
        assert s["error"][0] == "" and s["error"][1].startswith("OSError")
        assert (s["lines"][0], s["samples"][0], s["bands"][0], s["references"][0]) == (60, 60, 189, 2)
        z = np.load(tmp_path / "s" / (s["output"][0] + ".npz"))
        e = ss.open_envi(cube)
        want = ss.spectral(ctx, e, ss.reference_pixels(e, [(30, 30), (5, 5)]), best=True)
        assert np.array_equal(z["scores"], want.scores) and np.array_equal(z["index"], want.index)
        assert s["valid_pixels"][0] == np.count_nonzero(want.index >= 0)
        # A library file (CSV: a wavelength column, one column per spectrum), read once and sent to the workers.
        refs = ss.reference_pixels(e, [(30, 30), (5, 5)]).spectra.astype(np.float64)
        library = tmp_path / "library.csv"
        rows = "".join(f"{b},{float(p)!r},{float(g)!r}\n" for b, p, g in zip(range(1, 190), refs[0], refs[1]))
        library.write_text("wavelength,plane,ground\n" + rows)
        lib = batch.match_cubes([cube], tmp_path / "l", library=library, metric="sid", top=2, client=client, **OPTIONS)
        want = ss.spectral(ctx, e, ss.read_library(library), metric="sid", top=2)
        z = np.load(tmp_path / "l" / (lib["output"][0] + ".npz"))
        assert lib["error"][0] == "" and (lib["metric"][0], lib["reduction"][0]) == ("sid", "top")
        assert np.array_equal(z["scores"], want.scores) and np.array_equal(z["index"], want.index)


def batch_command(*args):
    return subprocess.run([sys.executable, "-m", "spectrasift.batch_cli", *args], capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)


def test_the_command_line(client, pairs, tmp_path):
    items, expected = pairs
    # LIST.csv with paths relative to its folder, and one missing file.
    rows = [(os.path.relpath(f, tmp_path), os.path.relpath(m, tmp_path)) for f, m in items[:3]]
    rows.append((rows[0][0], "missing.png"))
    (tmp_path / "list.csv").write_text("fixed,moving\n" + "".join(f"{f},{m}\n" for f, m in rows))
    # A LocalCluster of its own (no set-up)...
    p = batch_command("register", str(tmp_path / "list.csv"), "--out", str(tmp_path / "out"), "--workers", "2",
                      "--backend", "cpu", "--threads", "1")
    assert p.returncode == 4, p.stderr + p.stdout
    assert "missing.png" in p.stderr and "4 items, 3 done, 0 resumed, 1 failed" in p.stdout
    table = pd.read_csv(tmp_path / "out" / "results.csv", dtype=str, keep_default_na=False)
    assert {"fixed", "moving", "matrix", "inliers", "rms_px", "time_ms", "error"} <= set(table.columns)
    assert list(table["fixed"]) == [f for f, _ in rows] and list(table["error"] == "") == [True] * 3 + [False]
    for k in range(3):
        assert np.array_equal(np.array([float(v) for v in table["matrix"][k].split()]).reshape(3, 3), expected[k])
    # ... and the existing cluster by its address: the 3 resumed, the missing one failed again.
    p = batch_command("register", str(tmp_path / "list.csv"), "--out", str(tmp_path / "out"), "--scheduler",
                      client.scheduler_info()["address"], "--backend", "cpu", "-q")
    assert p.returncode == 4 and "3 resumed, 1 failed" in p.stdout, p.stderr + p.stdout
    # The features job's --descriptor-type.
    (tmp_path / "images.csv").write_text(f"image\n{os.path.relpath(items[0][1], tmp_path)}\n")
    p = batch_command("features", str(tmp_path / "images.csv"), "--out", str(tmp_path / "feat"), "--descriptor-type",
                      "u8", "--scheduler", client.scheduler_info()["address"], "--backend", "cpu", "-q")
    assert p.returncode == 0, p.stderr + p.stdout
    (npz,) = (tmp_path / "feat").glob("*.npz")
    assert np.load(npz)["descriptors"].dtype == np.uint8
    # Usage errors: exit 2.
    (tmp_path / "bad.csv").write_text("a,b\nx,y\n")
    p = batch_command("register", str(tmp_path / "bad.csv"), "--out", str(tmp_path / "o2"))
    assert p.returncode == 2 and "no column fixed, moving" in p.stderr


def test_worker_i_takes_device_i_mod_n(monkeypatch):
    """The device rule, with a backend of 3 devices faked: rank i -> device i % 3 of the backend "auto" resolved
    to; an explicit device wins; a worker name that is not a number is ranked by a hash."""
    opened = []

    class FakeContext:
        def __init__(self, backend, device, threads):
            self.backend, self.closed = ("cuda" if backend == "auto" else backend), False
            opened.append((backend, device, threads))

        def close(self):
            self.closed = True

    monkeypatch.setattr(batch, "Context", FakeContext)
    monkeypatch.setattr(batch, "devices", lambda: [{"backend": "cuda"}] * 3 + [{"backend": "cpu"}])
    cases = ((0, [("auto", 0, 2)]), (4, [("auto", 0, 2), ("cuda", 1, 2)]), (5, [("auto", 0, 2), ("cuda", 2, 2)]))
    for rank, want in cases:
        opened.clear()
        batch._ContextHolder(("auto", None, 2), rank).context()
        assert opened == want, (rank, opened)
    opened.clear()
    batch._ContextHolder(("cuda", 1, 0), 5).context()
    assert opened == [("cuda", 1, 0)]
    assert batch._rank(7) == 7 and batch._rank("7") == 7 and batch._rank("tcp://a:1") == batch._rank("tcp://a:1") >= 0


def test_a_job_out_of_time_gets_timeout_rows(client, pairs, tmp_path):
    items, _ = pairs
    frame = batch.register_pairs(items[:6], tmp_path, client=client, backend="cpu", threads=1, timeout=0.001)
    late = frame[frame["error"].str.startswith("TimeoutError")]
    assert len(frame) == 6 and len(late) >= 1 and frame["matrix"][late.index[0]] is None
    assert (tmp_path / "results.csv").exists()


def test_a_client_that_is_not_the_default_runs_the_job(pairs, tmp_path):
    """The job follows the client it is given (its futures tracked on that client's loop), also when no default
    client exists: a fresh process with one Client(set_as_default=False)."""
    items, _ = pairs
    script = (
        "import json, logging, sys, distributed\n"
        "from spectrasift import batch\n"
        "items = json.loads(sys.argv[1])\n"
        "with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,\n"
        "                              silence_logs=logging.ERROR) as cluster, \\\n"
        "     distributed.Client(cluster, set_as_default=False) as c:\n"
        "    frame = batch.register_pairs(items, client=c, backend='cpu', threads=1, timeout=120)\n"
        "print(json.dumps(list(frame['error'])))\n")
    done = subprocess.run([sys.executable, "-c", script, json.dumps(items[:2])], capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["", ""]
