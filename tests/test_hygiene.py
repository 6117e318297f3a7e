"""The storage-hygiene tools on temporary trees: exact sizes, du agreement, safe cleanup."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from iolab.cli.hygiene import setup_parser
from iolab.core.errors import LabError
from iolab.measure.context import mount_for
from iolab.storage.hygiene import (
    allocation_report,
    biggest_consumers,
    capacity_to_buy,
    checkpoints_by_owner,
    df_report,
    file_sizes,
    find_checkpoints,
    owner_name,
    rounded_allocation,
    tmpdir_report,
    usable_capacity,
)
from iolab.storage.hygiene_caches import apply_cleanup, cache_cleanup_plan, cache_report
from iolab.storage.hygiene_checksums import (
    MANIFEST_NAME,
    copy_with_manifest,
    verify_in_python,
    verify_with_sha256sum,
)

DAY_S = 86400


def write(path: Path, size: int, seed: int = 0) -> Path:
    """A file of exactly `size` real (non-sparse) bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes((seed + i) % 251 for i in range(size)))
    return path


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# -- sizes and allocation ---------------------------------------------------------------------

SIZES = {"empty": 0, "one": 1, "block": 4096, "block_plus_one": 4097, "sub/ten_k": 10_000}


@pytest.fixture
def sized_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    for name, size in SIZES.items():
        write(root / name, size)
    return root


def test_apparent_and_allocated_bytes_are_exact_and_match_du(sized_tree: Path) -> None:
    report = allocation_report(sized_tree).set_index(["measured_by", "what"])
    files = report.loc[("python lstat", "regular files")]
    assert files["entries"] == 5
    assert files["apparent_bytes"] == sum(SIZES.values()) == 18_194
    allocated = sum(os.stat(sized_tree / name).st_blocks * 512 for name in SIZES)
    assert files["allocated_bytes"] == allocated
    python, du = report.loc[("python lstat", "whole tree")], report.loc[("du -s", "whole tree")]
    assert python["entries"] == 7  # five files, the root and sub/
    assert (python["apparent_bytes"], python["allocated_bytes"]) == (
        du["apparent_bytes"],
        du["allocated_bytes"],
    )
    sizes = file_sizes(sized_tree).set_index("path")["size_bytes"].to_dict()
    assert sizes == SIZES


def test_block_rounding_arithmetic_is_exact() -> None:
    frame = rounded_allocation([0, 1, 4096, 4097], units_bytes=(4096, 65536))
    assert frame["would_allocate_bytes"].tolist() == [4096 + 4096 + 8192, 3 * 65536]
    assert frame["apparent_bytes"].tolist() == [8194, 8194]
    assert frame["files"].tolist() == [4, 4]
    # Bekman's example: 16 KiB files on 16 MiB blocks take 1024 times their size.
    assert rounded_allocation([16 * 1024], (16 * 1024**2,))["times_apparent"].item() == 1024
    with pytest.raises(LabError, match="positive"):
        rounded_allocation([1], (0,))


# -- biggest consumers ------------------------------------------------------------------------


def test_biggest_consumers_are_ordered_and_agree_with_du(tmp_path: Path) -> None:
    root = tmp_path / "project"
    for i in range(3):
        write(root / "big" / f"part{i}", 100_000, seed=i)
    write(root / "mid" / "one", 50_000)
    write(root / "top_file", 20_000)
    write(root / "small" / "tiny", 1)
    frame = biggest_consumers(root, top=10, depth=1)
    assert frame["path"].tolist() == ["big/", "mid/", "top_file", "small/"]
    assert frame["apparent_bytes"].tolist()[1:3] == [50_000 + os.stat(root / "mid").st_size, 20_000]
    assert frame["allocated_bytes"].tolist() == frame["du_allocated_bytes"].tolist()
    assert biggest_consumers(root, top=2)["path"].tolist() == ["big/", "mid/"]
    deeper = biggest_consumers(root, top=20, depth=2)
    assert "big/part0" in deeper["path"].tolist() and len(deeper) == 4 + 5
    with pytest.raises(LabError, match="at least 1"):
        biggest_consumers(root, top=0)


# -- checkpoints ------------------------------------------------------------------------------


def test_checkpoints_are_found_with_sizes_and_ages(tmp_path: Path) -> None:
    now = 1_700_000_000.0
    made = {
        "run1/step100.pt": (1000, 40),
        "run1/step200.pt": (1500, 10),
        "run2/model.safetensors": (3000, 2),
        "run2/sub/last.ckpt": (500, 0),
        "run2/pytorch_model.bin": (700, 1),
    }
    for rel, (size, age_days) in made.items():
        path = write(tmp_path / rel, size)
        os.utime(path, (now - age_days * DAY_S - 60, now - age_days * DAY_S - 60))
    write(tmp_path / "run1" / "notes.txt", 99)
    write(tmp_path / "run1" / "data.bin", 99)  # .bin only counts as pytorch_model*.bin
    found = find_checkpoints(tmp_path, now=now)
    assert found["path"].tolist() == [
        "run2/model.safetensors",
        "run1/step200.pt",
        "run1/step100.pt",
        "run2/pytorch_model.bin",
        "run2/sub/last.ckpt",
    ]
    assert dict(zip(found["path"], found["age_days"], strict=True)) == {
        k: v[1] for k, v in made.items()
    }
    assert set(found["owner"]) == {owner_name(os.getuid())}
    mine = checkpoints_by_owner(found).iloc[0]
    assert (
        mine["files"],
        mine["size_bytes"],
        mine["oldest_age_days"],
        mine["newest_age_days"],
    ) == (5, 6700, 40, 0)


def test_checkpoints_are_summed_per_owner_biggest_first() -> None:
    found = pd.DataFrame(
        {
            "path": ["a", "b", "c", "d"],
            "owner": ["ann", "bob", "ann", "cy"],
            "size_bytes": [10, 25, 20, 1],
            "allocated_bytes": [4096] * 4,
            "age_days": [3, 9, 30, 0],
        }
    )
    per_owner = checkpoints_by_owner(found)
    assert per_owner["owner"].tolist() == ["ann", "bob", "cy"]
    assert per_owner["size_bytes"].tolist() == [30, 25, 1]
    assert per_owner["files"].tolist() == [2, 1, 1]
    assert per_owner["oldest_age_days"].tolist() == [30, 9, 0]


# -- caches -----------------------------------------------------------------------------------


@pytest.fixture
def caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip, conda, Hugging Face and torch caches in a temporary home; no conda on PATH."""
    home = tmp_path / "home"
    write(home / "pip" / "wheels" / "a.whl", 300)
    write(home / "pip" / "http-v2" / "x", 200)
    write(home / "conda" / "pkgs" / "numpy-1" / "lib.so", 1000)
    write(home / "hf" / "hub" / "models--m" / "blobs" / "w", 5000)
    write(home / "hf" / "datasets" / "downloads" / "d", 50)
    write(home / "torch" / "hub" / "checkpoints" / "r.pth", 400)
    monkeypatch.setenv("PIP_CACHE_DIR", str(home / "pip"))
    monkeypatch.setenv("CONDA_PKGS_DIRS", str(home / "conda" / "pkgs"))
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    monkeypatch.setenv("TORCH_HOME", str(home / "torch"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    return home


def test_cache_report_and_dry_run_list_everything_and_delete_nothing(caches: Path) -> None:
    before = listing(caches)
    report = cache_report().set_index("cache")
    assert report["files"].to_dict() == {
        "pip": 2,
        "conda pkgs": 1,
        "huggingface hub": 1,
        "huggingface datasets": 1,
        "torch": 1,
    }
    assert report["size_bytes"].to_dict() == {
        "pip": 500,
        "conda pkgs": 1000,
        "huggingface hub": 5000,
        "huggingface datasets": 50,
        "torch": 400,
    }
    assert report.loc["pip", "found_by"] == "$PIP_CACHE_DIR"
    plan = cache_cleanup_plan()
    assert len(plan.frame) == len(plan.paths) == 6
    assert plan.frame["size_bytes"].sum() == 6950
    assert "pip cache purge" in plan.commands and any("delete-cache" in c for c in plan.commands)
    assert listing(caches) == before


def test_apply_deletes_only_inside_its_root_and_refuses_the_rest(caches: Path) -> None:
    plan = cache_cleanup_plan()
    before = listing(caches)
    with pytest.raises(LabError, match=r"refusing to delete .* outside the cleanup root"):
        apply_cleanup(plan, caches / "pip")
    assert listing(caches) == before, "a refused plan must delete nothing"
    assert apply_cleanup(plan, caches) == 6
    assert all(
        not any(Path(d).iterdir())
        for d in [caches / "pip", caches / "conda" / "pkgs", caches / "hf" / "hub"]
    )
    assert (caches / "torch").is_dir() and (caches / "pip").is_dir()


# -- checksums --------------------------------------------------------------------------------


@pytest.fixture
def copied(tmp_path: Path, workspace: Path) -> Path:
    """A source tree copied into the test's workspace; returns the copy's manifest."""
    source = tmp_path / "source"
    for i, rel in enumerate(["a.csv", "b.csv", "deep/c.csv", "name with space.csv"]):
        write(source / rel, 100 + i, seed=i)
    return copy_with_manifest(source, workspace / "copy")


def test_a_faithful_copy_verifies_with_sha256sum_and_python(copied: Path) -> None:
    lines = copied.read_text().splitlines()
    assert len(lines) == 4 and lines[2].endswith("  deep/c.csv")
    assert not list(copied.parent.parent.glob("*.partial"))
    for check in (verify_with_sha256sum(copied), verify_in_python(copied)):
        assert check.ok and check.files == 4 and check.failed == []


def test_a_flipped_byte_and_a_missing_file_are_detected(copied: Path) -> None:
    target = copied.parent / "deep" / "c.csv"
    data = bytearray(target.read_bytes())
    data[50] ^= 0x01
    target.write_bytes(bytes(data))
    (copied.parent / "name with space.csv").unlink()
    for check in (verify_with_sha256sum(copied), verify_in_python(copied)):
        assert not check.ok
        assert sorted(check.failed) == ["deep/c.csv", "name with space.csv"]


def test_copies_go_only_to_new_places_inside_the_workspace(copied: Path, tmp_path: Path) -> None:
    with pytest.raises(LabError, match="already exists"):
        copy_with_manifest(tmp_path / "source", copied.parent)
    with pytest.raises(LabError, match="outside the lab's workspace"):
        copy_with_manifest(tmp_path / "source", tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()
    with pytest.raises(LabError, match="no manifest"):
        verify_in_python(tmp_path / "source" / MANIFEST_NAME)


def test_a_copy_racing_another_keeps_the_other_and_leaves_nothing_partial(
    copied: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import iolab.storage.hygiene_checksums as checksums

    destination = copied.parent.parent / "second"
    real_copytree = shutil.copytree

    def another_run_finishes_first(source, target, *args, **kwargs):
        if not destination.exists():  # the other run renames its copy into place first
            real_copytree(source, destination)
            (destination / "theirs.txt").write_text("kept")
        return real_copytree(source, target, *args, **kwargs)

    monkeypatch.setattr(checksums.shutil, "copytree", another_run_finishes_first)
    with pytest.raises(LabError, match="made by another run meanwhile"):
        copy_with_manifest(tmp_path / "source", destination)
    assert (destination / "theirs.txt").read_text() == "kept"
    assert not list(destination.parent.glob("*.partial"))


# -- df, capacity, tmpdir ---------------------------------------------------------------------


def test_df_and_statvfs_agree_on_bytes_and_inodes(tmp_path: Path) -> None:
    frame = df_report(tmp_path).set_index("measured_by")
    df, sv = frame.loc["df"], frame.loc["os.statvfs"]
    st = os.statvfs(tmp_path)
    assert df["size_bytes"] == sv["size_bytes"] == st.f_blocks * st.f_frsize
    assert df["fs_type"] == sv["fs_type"] == mount_for(tmp_path).fs_type
    if st.f_files:
        assert df["inodes_total"] == sv["inodes_total"] == st.f_files
        assert abs(df["inodes_used"] - sv["inodes_used"]) < 100_000  # others create files too
    # Other users write between the two readings: allow 1 % of the size.
    assert abs(df["used_bytes"] - sv["used_bytes"]) <= 0.01 * sv["size_bytes"]
    assert sv["used_bytes"] + sv["avail_bytes"] + sv["reserved_bytes"] == sv["size_bytes"]
    with pytest.raises(LabError, match="missing does not exist"):
        df_report(tmp_path / "missing")


def test_usable_capacity_arithmetic() -> None:
    assert usable_capacity(125 * 10**12) == 100 * 10**12
    assert capacity_to_buy(100 * 10**12) == 125 * 10**12
    assert usable_capacity(1000, 0.89) == 890
    with pytest.raises(LabError, match="fraction"):
        usable_capacity(1000, 1.5)


def test_tmpdir_report_follows_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("SLURM_TMPDIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir caches its first answer
    rows = tmpdir_report().set_index("name")
    assert rows.loc["$TMPDIR", "path"] == rows.loc["tempfile.gettempdir()", "path"]
    assert rows.loc["$TMPDIR", "fs_type"] == mount_for(tmp_path).fs_type
    assert rows.loc["$SLURM_TMPDIR", "path"] == "unset" and not rows.loc["$SLURM_TMPDIR", "exists"]


# -- command line -----------------------------------------------------------------------------


def run_cli(*argv: str) -> None:
    parser = argparse.ArgumentParser()
    setup_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["hygiene", *argv])
    assert args.func(args) == 0


def test_cli_actions_print_their_tables(
    sized_tree: Path, caches: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", os.pathsep.join([os.environ["PATH"], "/usr/bin", "/bin"]))
    write(sized_tree / "ckpt" / "model.pt", 123)
    for action in ("df", "usage", "du", "checkpoints", "tmpdir"):
        run_cli(action, "--data", str(sized_tree))
    run_cli("caches")
    out = capsys.readouterr().out
    for expected in (
        "inodes_total",
        "would_allocate_bytes",
        "du_allocated_bytes",
        "ckpt/model.pt",
        "tempfile.gettempdir()",
        "pip cache purge",
        "dry run, nothing was deleted",
    ):
        assert expected in out
    assert (caches / "pip" / "wheels" / "a.whl").is_file()
