"""The five readers agree with the manifest, for the default dataset and for other sizes and
seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import build_dataset, run_script

from iolab.core import dataset as ds

READERS = [
    "read_files_naive",
    "read_files",
    "read_archive",
    "read_archive_random",
    "read_random_chunked",
]


def run_reader(name: str, data: Path, *extra: str) -> dict:
    proc = run_script(f"demos/{name}.py", "--data", data, "--json", *extra)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.slow
def test_reader_matches_manifest_on_default_dataset(reader: str, default_dataset: Path) -> None:
    manifest = ds.load_manifest(default_dataset)
    result = run_reader(reader, default_dataset)
    assert result["reader"] == reader
    assert result["rows"] == manifest["total_rows"] == 175200
    assert result["mean"] == manifest["expected_mean"]
    assert result["members"] == 7300
    assert result["time_s"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("files,seed", [(1, 5), (37, 7), (500, 11)])
def test_all_readers_agree_for_other_sizes_and_seeds(tmp_path: Path, files: int, seed: int) -> None:
    data = build_dataset(tmp_path / "d", files=files, seed=seed)
    manifest = ds.load_manifest(data)
    for reader in READERS:
        result = run_reader(reader, data)
        assert (result["rows"], result["mean"], result["members"]) == (
            manifest["total_rows"],
            manifest["expected_mean"],
            files,
        ), reader


def test_text_output_names_time_rows_and_mean(small_dataset: Path) -> None:
    out = run_script("demos/read_files.py", "--data", small_dataset).stdout
    manifest = ds.load_manifest(small_dataset)
    assert "Time taken: " in out
    assert f"Rows: {manifest['total_rows']}" in out
    assert f"Mean activity_level: {manifest['expected_mean']!r}" in out


def names_in_order(path: Path) -> list[str]:
    return path.read_text().split()


@pytest.mark.slow
def test_random_reader_is_a_seeded_permutation(small_dataset: Path, tmp_path: Path) -> None:
    archive_order = sorted(e["path"] for e in ds.load_manifest(small_dataset)["files"])
    orders = {}
    for seed in ("1", "1", "2"):
        out = tmp_path / f"order-{seed}-{len(orders)}.txt"
        run_reader("read_archive_random", small_dataset, "--seed", seed, "--order-out", str(out))
        orders[out.name] = names_in_order(out)
    first, again, other = orders.values()
    assert sorted(first) == archive_order and first != archive_order
    assert first == again and first != other


@pytest.mark.parametrize("buffer", [1, 10, 36, 37, 100])
@pytest.mark.slow
def test_chunked_shuffle_loses_no_member(small_dataset: Path, tmp_path: Path, buffer: int) -> None:
    out = tmp_path / "order.txt"
    result = run_reader(
        "read_random_chunked", small_dataset, "--buffer", str(buffer), "--order-out", str(out)
    )
    order = names_in_order(out)
    archive_order = sorted(e["path"] for e in ds.load_manifest(small_dataset)["files"])
    assert result["members"] == 37 and sorted(order) == archive_order
    # The shuffle is local: nothing moves further than one buffer length.
    moves = [abs(i - archive_order.index(name)) for i, name in enumerate(order)]
    assert max(moves) < buffer
    if buffer == 1:
        assert order == archive_order


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.slow
def test_missing_dataset_is_one_sentence(reader: str, tmp_path: Path) -> None:
    proc = run_script(f"demos/{reader}.py", "--data", tmp_path / "nothing", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: no ") and "Traceback" not in proc.stderr
    assert "data_generators/" in proc.stderr


@pytest.mark.slow
def test_damaged_file_is_reported_not_traced_back(tmp_path: Path) -> None:
    data = build_dataset(tmp_path / "d", files=5)
    victim = data / "data/activity_2004_1/activity_2004_1_3.csv"
    victim.write_bytes(b"\xff\xfe\x00garbage")
    proc = run_script("demos/read_files.py", "--data", data, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--verify" in proc.stderr
