"""The generator and the archive: layout, determinism, manifest truth, and refusing bad states."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import build_dataset, run_script

from iolab.core import dataset as ds
from iolab.core.capacity import check_capacity
from iolab.core.errors import LabError
from iolab.core.lab_dirs import ensure_writable_dir

_spec = importlib.util.spec_from_file_location(
    "generate_data", Path(__file__).resolve().parent.parent / "data_generators/generate_data.py"
)
generate_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate_data)


def test_default_layout_and_schema(default_dataset: Path) -> None:
    manifest = ds.load_manifest(default_dataset)
    assert manifest["file_count"] == 7300
    assert manifest["total_rows"] == 7300 * 24
    assert manifest["directory_count"] == 240  # 2004-01 .. 2023-12
    paths = [e["path"] for e in manifest["files"]]
    assert paths[0] == "data/activity_2004_1/activity_2004_1_1.csv"
    assert "data/activity_2004_2/activity_2004_2_29.csv" in paths  # a leap day, no padding
    assert "data/activity_2005_2/activity_2005_2_29.csv" not in paths
    assert paths[-1] == "data/activity_2023_12_26.csv".replace("data/", "data/activity_2023_12/")
    text = (default_dataset / paths[0]).read_text()
    lines = text.splitlines()
    assert lines[0] == ",hour,activity_level"
    assert len(lines) == 25
    frame = pd.read_csv(default_dataset / paths[0], index_col=0)
    assert list(frame["hour"]) == list(range(24))
    assert set(frame["activity_level"]) <= {1, 2, 3, 4}


def test_manifest_facts_match_the_files(small_dataset: Path) -> None:
    manifest = ds.load_manifest(small_dataset)
    frames = [pd.read_csv(small_dataset / e["path"], index_col=0) for e in manifest["files"]]
    data = pd.concat(frames)
    assert manifest["total_rows"] == len(data) == 37 * 24
    assert manifest["activity_sum"] == int(data["activity_level"].sum())
    assert manifest["expected_mean"] == data["activity_level"].mean()
    assert manifest["total_bytes"] == sum(
        (small_dataset / e["path"]).stat().st_size for e in manifest["files"]
    )
    for entry in manifest["files"]:
        digest = hashlib.sha256((small_dataset / entry["path"]).read_bytes()).hexdigest()
        assert entry["sha256"] == digest


@pytest.mark.slow
def test_same_seed_gives_identical_bytes_and_other_seed_differs(tmp_path: Path) -> None:
    a = build_dataset(tmp_path / "a", files=60, seed=3)
    b = build_dataset(tmp_path / "b", files=60, seed=3)
    c = build_dataset(tmp_path / "c", files=60, seed=4)
    files = lambda d: [e["sha256"] for e in ds.load_manifest(d)["files"]]  # noqa: E731
    assert files(a) == files(b)
    assert files(a) != files(c)
    assert (a / "data.tar").read_bytes() == (b / "data.tar").read_bytes()


@pytest.mark.slow
def test_verify_detects_corruption_missing_and_extra_files(tmp_path: Path) -> None:
    out = build_dataset(tmp_path / "d", files=20)
    assert ds.verify_dataset(out).ok
    target = out / "data/activity_2004_1/activity_2004_1_5.csv"
    target.write_text(target.read_text().replace("\n0,0,", "\n0,0,9", 1))
    result = ds.verify_dataset(out)
    assert not result.ok and "activity_2004_1_5.csv differs" in result.problems[0]
    proc = run_script("data_generators/generate_data.py", "--data", out, "--verify", check=False)
    assert proc.returncode == 1 and "NOT VALID" in proc.stdout
    target.unlink()
    assert "is missing" in ds.verify_dataset(out).problems[0]
    run_script("data_generators/generate_data.py", "--data", out, "--files", "20", "--quiet")
    assert ds.verify_dataset(out).ok  # a failed verification triggers a rebuild
    (out / "data/activity_2004_1/extra.csv").write_text("x\n")
    assert "extra.csv is not in the manifest" in ds.verify_dataset(out).problems[0]


def test_interrupted_generation_never_looks_complete(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "cut"
    real_text, calls = ds.csv_text, []

    def failing_text(levels):
        calls.append(1)
        if len(calls) == 10:
            raise KeyboardInterrupt
        return real_text(levels)

    monkeypatch.setattr(ds, "csv_text", failing_text)
    with pytest.raises(KeyboardInterrupt, match="half-written files were removed"):
        generate_data.generate(out, files=30, seed=1, quiet=True)
    assert not list(out.rglob("*.csv")), "nothing half-written is kept"
    assert not (out / ds.MANIFEST_NAME).exists() and not (out / ds.LOCK_NAME).exists()
    assert not ds.verify_dataset(out).ok
    monkeypatch.setattr(ds, "csv_text", real_text)
    manifest, reused = generate_data.generate(out, files=30, seed=1, quiet=True)
    assert not reused and manifest["file_count"] == 30 and ds.verify_dataset(out).ok


def test_reuses_a_verified_dataset_and_rebuilds_on_other_request(tmp_path: Path) -> None:
    out = tmp_path / "r"
    _, reused = generate_data.generate(out, files=15, seed=2, quiet=True)
    assert not reused
    _, reused = generate_data.generate(out, files=15, seed=2, quiet=True)
    assert reused
    manifest, reused = generate_data.generate(out, files=16, seed=2, quiet=True)
    assert not reused and manifest["file_count"] == 16
    assert len(list((out / "data").rglob("*.csv"))) == 16


def test_refuses_to_replace_data_it_did_not_write(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    (foreign / "data").mkdir(parents=True)
    (foreign / "data" / "precious.txt").write_text("keep me")
    proc = run_script("data_generators/generate_data.py", "--data", foreign, check=False)
    assert proc.returncode == 2
    assert "was not written by this lab" in proc.stderr and "Traceback" not in proc.stderr
    assert (foreign / "data" / "precious.txt").read_text() == "keep me"


def test_bad_locations_and_full_disks_get_one_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = run_script("data_generators/generate_data.py", "--data", blocker / "sub", check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: cannot create the directory")
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    with pytest.raises(LabError, match="not enough free space"):
        check_capacity(tmp_path, 10**18, 0)
    with pytest.raises(LabError, match="not a directory"):
        ensure_writable_dir(blocker)
    if os.statvfs(tmp_path).f_files:
        with pytest.raises(LabError, match="not enough free inodes"):
            check_capacity(tmp_path, 0, 10**15)


def test_archive_is_compact_sorted_ustar_and_records_default_size(default_dataset: Path) -> None:
    info = json.loads((default_dataset / "archive.json").read_text())
    tar_path = default_dataset / "data.tar"
    assert info["members"] == 7300 and info["payload_bytes"] == 7300 * 193
    # ustar: one 512-byte header + one data block per 193-byte member, two end blocks,
    # padded to tarfile's 10240-byte record.
    raw = 7300 * 1024 + 1024
    assert info["archive_bytes"] == tar_path.stat().st_size == -(-raw // 10240) * 10240
    # Python's default (PAX + float mtime) adds a 1024-byte extended header per member.
    assert info["default_format_bytes"] == -(-(7300 * 2048 + 1024) // 10240) * 10240
    with tarfile.open(tar_path) as tar:
        names = tar.getnames()
        assert tar.getmembers()[0].pax_headers == {}
    assert names == sorted(names)
    listed = subprocess.run(
        ["tar", "-tf", str(tar_path)], capture_output=True, text=True, check=True
    ).stdout.split()
    assert listed == names


@pytest.mark.slow
def test_archive_needs_a_verified_dataset_and_rebuilds_when_damaged(tmp_path: Path) -> None:
    out = tmp_path / "x"
    proc = run_script("data_generators/create_archive.py", "--data", out, check=False)
    assert proc.returncode == 2 and "generate_data.py --data" in proc.stderr
    build_dataset(out, files=12)
    good = (out / "data.tar").read_bytes()
    (out / "data.tar").write_bytes(good[:-10240])  # truncated, e.g. by a full disk
    proc = run_script("data_generators/create_archive.py", "--data", out)
    assert "written in" in proc.stdout
    assert (out / "data.tar").read_bytes() == good


@pytest.mark.parametrize(
    "script, argv, says",
    [
        (
            "data_generators/generate_data.py",
            ["--files", "30000"],
            "generating 30000 files is too big for a shared login node (30000 files > 20000 "
            "files); use fewer --files,",
        ),
        (
            "data_generators/make_images.py",
            ["--count", "5000", "--sample-kb", "128"],
            "5000 samples of 128 KB is too big for a shared login node (1250 MiB > 1024 MiB); "
            "use fewer --count or a smaller --sample-kb,",
        ),
    ],
)
def test_the_generators_keep_to_the_login_node_budget(
    tmp_path: Path, login_node: None, script: str, argv: list[str], says: str
) -> None:
    """A dataset is a run like any other on a shared login node: one too large for its
    budget is one sentence naming the option and the flag, before anything is written."""
    done = run_script(script, "--data", tmp_path / "data", *argv, check=False)
    assert done.returncode == 2 and done.stderr.startswith(f"error: {says}"), done.stderr
    assert "--i-am-on-a-compute-node" in done.stderr and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "data").exists()
