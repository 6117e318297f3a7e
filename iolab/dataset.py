"""What the lab's dataset is, and whether a copy on disk is complete and intact.

The dataset mimics the classic small-files teaching demo (one CSV per day, 24 hourly rows) so
material written for that demo works unchanged, but it is deterministic from a seed and
described by a manifest: per-file sha256, row counts and the exact expected mean. A dataset
counts as complete only when its manifest exists and every file matches it; the manifest is
written last, so an interrupted run never looks complete.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Iterator

from iolab.errors import LabError

FIRST_DAY = date(2004, 1, 1)
DEFAULT_FILES = 7300
DEFAULT_SEED = 1
HOURS_PER_FILE = 24
HEADER = ",hour,activity_level\n"
MANIFEST_NAME = "manifest.json"
MARKER_NAME = ".iolab-dataset"
FORMAT_VERSION = 1


def day_path(day: date) -> str:
    """Relative path of one day's file, month and day not zero-padded (as in the classic demo)."""
    y, m, d = day.year, day.month, day.day
    return f"data/activity_{y}_{m}/activity_{y}_{m}_{d}.csv"


def days(n_files: int) -> Iterator[date]:
    """The consecutive days covered by a dataset of `n_files` files."""
    for offset in range(n_files):
        yield FIRST_DAY + timedelta(days=offset)


def csv_text(levels: list[int]) -> str:
    """One file's text, byte-for-byte what pandas' to_csv writes with its index column."""
    rows = "".join(f"{hour},{hour},{level}\n" for hour, level in enumerate(levels))
    return HEADER + rows


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's contents."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_manifest(dataset_dir: Path) -> dict:
    """Read DIR/manifest.json, or raise a LabError that says how to create the dataset."""
    path = Path(dataset_dir) / MANIFEST_NAME
    if not path.is_file():
        raise LabError(
            f"no dataset manifest at {path}; create the dataset with "
            f"`python data_generators/generate_data.py --out {dataset_dir}`"
        )
    try:
        manifest = json.loads(path.read_text())
        manifest["files"], manifest["total_rows"], manifest["expected_mean"]
    except (ValueError, KeyError, TypeError):
        raise LabError(
            f"the manifest {path} is corrupted; rebuild the dataset with "
            f"`python data_generators/generate_data.py --out {dataset_dir}`"
        ) from None
    return manifest


@dataclass
class Verification:
    """Outcome of checking a dataset directory against its manifest."""

    dataset_dir: Path
    ok: bool
    problems: list[str] = field(default_factory=list)
    manifest: dict | None = None

    def summary(self) -> str:
        """One line for a terminal."""
        if self.ok:
            m = self.manifest or {}
            return (
                f"{self.dataset_dir}: OK, {m['file_count']} files, {m['total_rows']} rows, "
                f"{m['total_bytes']} bytes, expected mean {m['expected_mean']!r}"
            )
        shown = "; ".join(self.problems[:3])
        more = f" (and {len(self.problems) - 3} more)" if len(self.problems) > 3 else ""
        return f"{self.dataset_dir}: NOT VALID: {shown}{more}"


def verify_dataset(dataset_dir: Path) -> Verification:
    """Check every file's sha256 against the manifest, and that no file is missing or extra."""
    dataset_dir = Path(dataset_dir)
    try:
        manifest = load_manifest(dataset_dir)
    except LabError as err:
        return Verification(dataset_dir, False, [str(err)])
    problems: list[str] = []
    expected = {entry["path"]: entry["sha256"] for entry in manifest["files"]}
    for rel, digest in expected.items():
        path = dataset_dir / rel
        if not path.is_file():
            problems.append(f"{rel} is missing")
        elif sha256_of(path) != digest:
            problems.append(f"{rel} differs from the manifest")
    on_disk = {
        str(Path(root, name).relative_to(dataset_dir))
        for root, _dirs, names in os.walk(dataset_dir / "data")
        for name in names
    }
    problems.extend(f"{rel} is not in the manifest" for rel in sorted(on_disk - expected.keys()))
    return Verification(dataset_dir, not problems, problems, manifest)


def require_verified(dataset_dir: Path) -> dict:
    """The manifest of a dataset that verifies, or a LabError naming the first problem."""
    load_manifest(dataset_dir)  # a missing or corrupted manifest has its own message
    result = verify_dataset(dataset_dir)
    if not result.ok:
        raise LabError(
            f"the dataset in {dataset_dir} does not match its manifest ({result.problems[0]}); "
            f"rebuild it with `python data_generators/generate_data.py --out {dataset_dir}`"
        )
    assert result.manifest is not None
    return result.manifest
