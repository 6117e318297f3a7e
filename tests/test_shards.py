"""Shards and the image-like dataset: tar layout, reproducibility, completeness, same results as
files."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, build_dataset, run_script

from iolab.core import dataset as ds
from iolab.core import loader, shards
from iolab.core.errors import LabError
from iolab.core.samples import ACTIVITY, IMAGES, Dataset
from iolab.ml import pipeline

FILES, SEED = 37, 7


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    """37 daily files (not a multiple of the shard size) and their shards, 10 samples each."""
    data = tmp_path_factory.mktemp("sharded") / "dataset"
    build_dataset(data, FILES, SEED, archive=False)
    run_script("data_generators/make_shards.py", "--data", data, "--samples-per-shard", 10)
    return data


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    """12 samples of 100 KB in shards of at most 0.5 MB: 4 samples per shard."""
    out = tmp_path_factory.mktemp("images") / "images"
    run_script(
        "data_generators/make_images.py",
        "--data",
        out,
        "--count",
        12,
        "--sample-kb",
        100,
        "--shard-mb",
        0.5,
        "--seed",
        3,
    )
    return out


def gnu_tar_list(path: Path) -> list[str]:
    if shutil.which("tar") is None:
        pytest.skip("GNU tar is not installed")
    return subprocess.run(
        ["tar", "-tf", str(path)], capture_output=True, text=True, check=True
    ).stdout.split()


def test_gnu_tar_lists_one_member_per_day_in_order(sharded: Path) -> None:
    index = shards.load_shard_index(sharded / "shards")
    assert [entry["samples"] for entry in index["shards"]] == [10, 10, 10, 7]
    names = [
        name
        for path in shards.shard_paths(sharded / "shards", index)
        for name in gnu_tar_list(path)
    ]
    assert len(names) == FILES
    assert names[:2] == ["2004-01-01.csv", "2004-01-02.csv"]
    assert names[-1] == "2004-02-06.csv"
    assert index["sample_count"] == FILES and index["kind"] == "activity"


def test_shards_are_byte_identical_across_runs(sharded: Path, tmp_path: Path) -> None:
    run_script(
        "data_generators/make_shards.py",
        "--data",
        sharded,
        "--out",
        tmp_path / "again",
        "--samples-per-shard",
        10,
    )
    first = json.loads((sharded / "shards" / shards.INDEX_NAME).read_text())
    second = json.loads((tmp_path / "again" / shards.INDEX_NAME).read_text())
    assert [e["sha256"] for e in first["shards"]] == [e["sha256"] for e in second["shards"]]
    for entry in first["shards"]:
        assert (sharded / "shards" / entry["name"]).read_bytes() == (
            tmp_path / "again" / entry["name"]
        ).read_bytes()


def test_size_budget_cuts_shards_by_bytes(sharded: Path, tmp_path: Path) -> None:
    # each 193-byte day takes 1024 bytes (header + one block): 9 fit in 10,000 bytes, 10 do not
    run_script(
        "data_generators/make_shards.py",
        "--data",
        sharded,
        "--out",
        tmp_path,
        "--shard-size-mb",
        0.01,
    )
    index = shards.load_shard_index(tmp_path)
    assert [e["samples"] for e in index["shards"]] == [9, 9, 9, 9, 1]
    assert [e["bytes"] for e in index["shards"]] == [10240] * 5  # padded to one 20-block record


def test_webdataset_reads_the_same_samples_as_the_files(sharded: Path) -> None:
    from_files = list(loader.file_samples(sharded))
    from_shards = list(loader.shard_samples(sharded))
    assert from_files == from_shards
    assert from_files[0][0] == "2004-01-01"


@pytest.mark.parametrize("source", loader.SOURCES)
def test_full_read_gives_the_manifest_mean_exactly(sharded: Path, source: str) -> None:
    result = loader.read_throughput(sharded, source, batch_size=8)
    expected = ds.load_manifest(sharded)
    assert result.samples == FILES
    assert result.payload_bytes == expected["total_bytes"]
    assert result.mean == expected["expected_mean"] == loader.expected_result(sharded)["mean"]


@pytest.mark.slow
def test_default_dataset_mean_from_files_and_shards(default_dataset: Path) -> None:
    run_script("data_generators/make_shards.py", "--data", default_dataset)
    expected = ds.load_manifest(default_dataset)["expected_mean"]
    for source in loader.SOURCES:
        result = loader.read_throughput(default_dataset, source)
        assert (result.samples, result.mean) == (7300, expected)


@pytest.mark.slow
def test_demo_prints_one_json_line_and_limit_stops_early(sharded: Path) -> None:
    out = run_script(
        "demos/read_samples.py",
        "--source",
        "shards",
        "--data",
        sharded,
        "--limit",
        5,
        "--batch-size",
        4,
    ).stdout
    result = json.loads(out)
    assert (result["source"], result["workers"], result["samples"]) == ("shards", "none", 5)
    assert result["payload_bytes"] == 5 * 193


@pytest.mark.slow
def test_interrupted_build_is_not_taken_as_complete(sharded: Path, tmp_path: Path) -> None:
    out = tmp_path / "s"
    run_script(
        "data_generators/make_shards.py", "--data", sharded, "--out", out, "--samples-per-shard", 10
    )
    (out / shards.INDEX_NAME).unlink()  # as if the run died before writing the index
    with pytest.raises(LabError, match="never finished"):
        shards.require_shards(out)
    proc = run_script(
        "data_generators/make_shards.py", "--data", sharded, "--out", out, "--samples-per-shard", 10
    )
    assert "written" in proc.stdout and not shards.verify_shards(out)
    victim = out / "shard-000002.tar"
    victim.write_bytes(victim.read_bytes()[:2048])  # a shard cut short
    assert shards.verify_shards(out) == ["shard-000002.tar differs from the index"]
    proc = run_script(
        "data_generators/make_shards.py", "--data", sharded, "--out", out, "--samples-per-shard", 10
    )
    assert "written" in proc.stdout and not shards.verify_shards(out)
    proc = run_script(
        "data_generators/make_shards.py", "--data", sharded, "--out", out, "--samples-per-shard", 10
    )
    assert "reused" in proc.stdout


def test_missing_dataset_is_one_sentence(tmp_path: Path) -> None:
    proc = run_script("data_generators/make_shards.py", "--data", tmp_path / "none", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: no dataset at") and "Traceback" not in proc.stderr
    proc = run_script(
        "demos/read_samples.py", "--source", "shards", "--data", tmp_path, check=False
    )
    assert (
        proc.returncode == 2 and proc.stderr.count("\n") == 1 and "holds no dataset" in proc.stderr
    )


def test_a_dataset_is_resolved_once_into_its_kind_parts_and_manifest(
    sharded: Path, images: Path
) -> None:
    activity, image = Dataset.at(sharded), Dataset.at(images)
    assert (activity.kind, activity.samples_dir, activity.shards_dir) == (
        ACTIVITY,
        sharded / "data",
        sharded / "shards",
    )
    assert (image.kind, image.samples_dir) == (IMAGES, images / "files")
    assert activity.manifest == ds.load_manifest(sharded)
    assert image.manifest["count"] == len(image.sample_files()) == 12
    assert [key for key, _ in activity.sample_files()][:2] == ["2004-01-01", "2004-01-02"]


def test_shards_of_another_directory_are_not_deleted(sharded: Path, tmp_path: Path) -> None:
    foreign = tmp_path / "shard-000000.tar"
    foreign.write_bytes(b"not ours")
    proc = run_script(
        "data_generators/make_shards.py", "--data", sharded, "--out", tmp_path, check=False
    )
    assert proc.returncode == 2 and "did not write" in proc.stderr
    assert foreign.read_bytes() == b"not ours"


# ------------------------------------------------------------------ image-like dataset


def test_images_files_and_shards_hold_the_same_samples(images: Path) -> None:
    manifest = json.loads((images / "manifest.json").read_text())
    index = shards.load_shard_index(images / "shards")
    assert [e["samples"] for e in index["shards"]] == [4, 4, 4]
    assert gnu_tar_list(images / "shards" / "shard-000000.tar")[:3] == [
        "000000.bin",
        "000000.cls",
        "000001.bin",
    ]
    by_key = {entry["key"]: entry for entry in manifest["samples"]}
    for source in (loader.file_samples(images), loader.shard_samples(images)):
        seen = [(key, hashlib.sha256(data).hexdigest(), data[0] % 10) for key, data in source]
        assert seen == [(k, by_key[k]["sha256"], by_key[k]["label"]) for k in sorted(by_key)]
    assert (
        manifest["label_sum"] == index["label_sum"] == sum(e["label"] for e in manifest["samples"])
    )
    for source in loader.SOURCES:
        result = loader.read_throughput(images, source)
        assert (result.samples, result.payload_bytes) == (12, 12 * 100 * 1024)
        assert result.value_sum == manifest["label_sum"]


def test_images_are_deterministic_from_the_seed(images: Path, tmp_path: Path) -> None:
    run_script(
        "data_generators/make_images.py",
        "--data",
        tmp_path,
        "--count",
        12,
        "--sample-kb",
        100,
        "--shard-mb",
        0.5,
        "--seed",
        3,
    )
    assert (tmp_path / "manifest.json").read_bytes() == (images / "manifest.json").read_bytes()
    assert (tmp_path / "shards" / "shards.json").read_bytes() == (
        images / "shards" / "shards.json"
    ).read_bytes()


@pytest.mark.parametrize("kb", ["99", "8193"])
def test_image_sample_size_out_of_range_is_one_sentence(tmp_path: Path, kb: str) -> None:
    proc = run_script(
        "data_generators/make_images.py", "--data", tmp_path / "x", "--sample-kb", kb, check=False
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "--sample-kb" in proc.stderr and "100 to 8192" in proc.stderr
    assert not (tmp_path / "x").exists()


# ------------------------------------------------------------------ syscalls and workers


@pytest.mark.slow
@pytest.mark.needs("strace")
def test_opens_per_sample_files_vs_shards(sharded: Path) -> None:
    reports = {
        source: pipeline.count_read_syscalls(sharded, source, method="strace")
        for source in loader.SOURCES
    }
    frame = pipeline.syscalls_per_sample_frame(reports).set_index("run")
    assert frame.loc["files", "sample_file_opens"] == FILES  # one open per sample
    assert frame.loc["shards", "sample_file_opens"] == 4  # one open per shard
    assert reports["shards"].dataset_open_counts["shards/shards.json"] == 1
    assert (frame["samples"] == FILES).all()


def test_workers_without_torch_is_one_sentence(sharded: Path, monkeypatch) -> None:
    monkeypatch.setattr(loader, "torch_available", lambda: False)
    with pytest.raises(LabError, match="PyTorch is not installed"):
        loader.batches(sharded, "shards", workers=2)
    assert sum(len(b) for b in loader.batches(sharded, "shards")) == FILES  # webdataset alone


def test_shards_read_with_webdataset_alone_when_torch_is_absent(sharded: Path) -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"  # makes `import torch` fail, as without it
        "from iolab.core import loader\n"
        f"r = loader.read_throughput({str(sharded)!r}, 'shards')\n"
        "print(loader.torch_available(), r.samples, r.mean)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert proc.stdout.split() == [
        "False",
        str(FILES),
        repr(ds.load_manifest(sharded)["expected_mean"]),
    ]


@pytest.mark.needs("torch")
@pytest.mark.parametrize("source", loader.SOURCES)
def test_dataloader_with_two_workers_reads_every_sample_once(sharded: Path, source: str) -> None:
    keys = [
        key
        for batch in loader.batches(sharded, source, workers=2, batch_size=4)
        for key, _ in batch
    ]
    assert len(keys) == FILES
    assert sorted(keys) == [key for key, _ in loader.file_samples(sharded)]
