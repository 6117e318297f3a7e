"""Shared fixtures: datasets built once per test session in temporary directories."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def run_script(script: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run one of the lab's scripts exactly as a learner would, from the repo root."""
    proc = subprocess.run([PY, str(ROOT / script), *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} {args} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def build_dataset(out: Path, files: int | None = None, seed: int | None = None) -> Path:
    """Generate a dataset and its archive in `out`."""
    extra = []
    if files is not None:
        extra += ["--files", str(files)]
    if seed is not None:
        extra += ["--seed", str(seed)]
    run_script("data_generators/generate_data.py", "--out", out, "--quiet", *extra)
    run_script("data_generators/create_archive.py", "--out", out)
    return out


@pytest.fixture(scope="session")
def default_dataset(tmp_path_factory) -> Path:
    """The full 7300-file dataset with its archive."""
    return build_dataset(tmp_path_factory.mktemp("default") / "dataset")


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory) -> Path:
    """A 37-file dataset (not a multiple of the shuffle buffer) with another seed."""
    return build_dataset(tmp_path_factory.mktemp("small") / "dataset", files=37, seed=7)
