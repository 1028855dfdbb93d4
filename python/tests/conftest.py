"""Shared fixtures of the Python suite. Run by ctest (python/CMakeLists.txt) on the build tree's module with
SPECTRASIFT_CLI (the CLI of the same build), SPECTRASIFT_TEST_DATA and SPECTRASIFT_DATA_DIR set; by hand:
PYTHONPATH=build/python SPECTRASIFT_CLI=build/bin/spectrasift python -m pytest python/tests"""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import spectrasift as ss

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def test_data() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SPECTRASIFT_TEST_DATA", ROOT / "tests" / "data"))


@pytest.fixture(scope="session")
def sample_data() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SPECTRASIFT_DATA_DIR", ROOT / "data"))


@pytest.fixture(scope="session")
def cli() -> str:
    """The CLI of the same build (bit-identity tests compare against it)."""
    path = os.environ.get("SPECTRASIFT_CLI", str(ROOT / "build" / "bin" / "spectrasift"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"the CLI {path} is missing: set SPECTRASIFT_CLI")
    return path


def run_cli(cli: str, *args: str) -> dict:
    """Runs the CLI on the CPU backend with --json; returns its JSON object."""
    p = subprocess.run([cli, *args, "--backend", "cpu", "--json", "-q"], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr + p.stdout
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture
def ctx():
    with ss.Context("cpu") as c:
        yield c


def read_features_bin(path) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The CLI's binary feature file, parsed from its documented layout (io.hpp), not by the library: version 1
    (float32 descriptors) or 2 (a descriptor type at offset 24: 0 float32, 1 uint8)."""
    raw = pathlib.Path(path).read_bytes()
    assert raw[:4] == b"SSFT"
    version, count, dsize, width, height = np.frombuffer(raw, "<u4", 5, 4)
    assert version in (1, 2) and dsize == 128
    header, dtype = 24, "<f4"
    if version == 2:
        header, dtype = 28, {0: "<f4", 1: "u1"}[int(np.frombuffer(raw, "<u4", 1, 24)[0])]
    kp_type = np.dtype([("x", "<f4"), ("y", "<f4"), ("size", "<f4"), ("angle", "<f4"), ("response", "<f4"),
                        ("octave", "<i4"), ("layer", "<i4")])
    kp = np.frombuffer(raw, kp_type, int(count), header)
    desc = np.frombuffer(raw, dtype, int(count) * 128, header + kp.nbytes).reshape(-1, 128)
    assert header + kp.nbytes + desc.nbytes == len(raw)
    return kp, desc, int(width), int(height)
