"""demos/formats.py: CSV text, a whole-table .npy and a per-column .npy give the manifest's mean.

The demo converts a dataset's CSV files into binary layouts in a scratch directory of the
workspace, times reading the mean from each, and removes what it wrote. Timings are not
checked; the answers, the bytes per layout, the one-sentence error and the cleanup are.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import build_dataset, run_script

from iolab.core import dataset as ds
from iolab.core.markers import MADE_MARKER


def run_formats(data: Path, *extra: str):
    return run_script("demos/formats.py", "--data", data, "--repeats", "2", *extra, check=False)


def leftovers(workspace: Path) -> list[str]:
    """What is left in the workspace's tmp/ besides its marker."""
    tmp = workspace / "tmp"
    return sorted(p.name for p in tmp.iterdir() if p.name != MADE_MARKER) if tmp.is_dir() else []


@pytest.mark.slow
def test_every_layout_gives_the_manifest_mean_and_nothing_is_left(
    workspace: Path, tmp_path: Path
) -> None:
    data = build_dataset(tmp_path / "dataset", files=45, seed=3, archive=False)
    manifest = ds.load_manifest(data)
    proc = run_formats(data, "--json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout
    result = json.loads(lines[0])
    rows = {row["format"]: row for row in result["formats"]}
    assert set(rows) == {"csv files", "table .csv", "table .npy", "column .npy"}
    assert result["expected_mean"] == manifest["expected_mean"]
    for row in rows.values():
        assert row["mean"] == manifest["expected_mean"], row  # exactly, not approximately
        assert row["matches_manifest"] is True
        assert row["median_s"] > 0
    n = manifest["total_rows"]
    assert rows["csv files"]["files_opened"] == 45
    assert rows["csv files"]["bytes_read"] == manifest["total_bytes"]
    assert rows["table .npy"]["bytes_read"] == 128 + n * 3 * 8  # three int64 columns
    assert rows["column .npy"]["bytes_read"] == 128 + n * 8  # one int64 column
    assert rows["column .npy"]["bytes_read"] < rows["table .npy"]["bytes_read"]
    assert leftovers(workspace) == []


@pytest.mark.slow
def test_text_output_is_one_table_with_units(workspace: Path, small_dataset: Path) -> None:
    proc = run_formats(small_dataset)
    assert proc.returncode == 0, proc.stderr
    header = next(line for line in proc.stdout.splitlines() if line.startswith("| format"))
    for column in ("files_opened", "bytes_read", "median_s", "matches_manifest"):
        assert column in header
    assert repr(ds.load_manifest(small_dataset)["expected_mean"]) in proc.stdout
    assert leftovers(workspace) == []


@pytest.mark.slow
def test_a_missing_dataset_is_one_sentence(workspace: Path, tmp_path: Path) -> None:
    proc = run_formats(tmp_path / "no-such-dataset")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "generate_data.py" in lines[0]
    assert proc.stdout == ""
    assert leftovers(workspace) == []


@pytest.mark.slow
def test_a_damaged_dataset_is_refused_and_cleaned_up(workspace: Path, tmp_path: Path) -> None:
    data = build_dataset(tmp_path / "dataset", files=12, seed=4, archive=False)
    victim = data / ds.load_manifest(data)["files"][5]["path"]
    victim.write_text(victim.read_text().replace(",1\n", ",2\n", 1).replace(",3\n", ",4\n", 1))
    proc = run_formats(data)
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "manifest" in proc.stderr
    assert leftovers(workspace) == []
