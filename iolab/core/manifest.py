"""The dataset's manifest: its format, reading it safely, and comparing a reading with it.

Split from iolab.core.dataset so that the reader demos, which only load a manifest and
compare what they read with it, import this small module and not the generators' machinery
(folder claims, locks, atomic writers): a reader's start-up is part of what the lessons
time, and the lab should add as little to it as Python allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from iolab.core.errors import LabError
from iolab.core.safe_input import (
    COUNT,
    DAY,
    INTEGER,
    NUMBER,
    SHA256,
    TEXT,
    field_check,
    list_of,
    listing_problem,
    read_checked_json,
)

DATA_DIR = "data"
MANIFEST_NAME = "manifest.json"
ARCHIVE_NAME = "data.tar"
#: The most daily files generate_data.py makes (274 years; each file an inode of a shared
#: file system): the bound of every count of files or samples a user asks for.
MAX_FILES = 100_000


def create_command(dataset_dir: Path | str) -> str:
    """The command that (re)creates the dataset in `dataset_dir`, for messages."""
    return f"`python data_generators/generate_data.py --data {dataset_dir}`"


def verify_command(dataset_dir: Path | str) -> str:
    """The command that checks the dataset in `dataset_dir` (files and archive), for messages."""
    return f"`python data_generators/generate_data.py --data {dataset_dir} --verify`"


def rebuild_hint(dataset_dir: Path | str) -> str:
    """The fix for a file of the dataset the lab will not read: move it, build anew."""
    return f"move it away and rebuild the dataset with {create_command(dataset_dir)}"


def _is_data_path(value: object) -> bool:
    """A path below data/ without an empty, `.` or `..` part: it cannot lead out of the dataset."""
    if not isinstance(value, str) or "\0" in value:
        return False
    parts = value.split("/")
    return len(parts) > 1 and parts[0] == DATA_DIR and not {"", ".", ".."} & set(parts)


DATA_PATH = field_check(_is_data_path, f"a path inside the dataset's {DATA_DIR}/ folder")


ENTRY_SCHEMA = {"path": DATA_PATH, "sha256": SHA256, "rows": COUNT, "bytes": COUNT}
MANIFEST_SCHEMA = {
    "format_version": COUNT,
    "generator": TEXT,
    "seed": INTEGER,
    "first_day": DAY,
    "file_count": COUNT,
    "directory_count": COUNT,
    "total_rows": COUNT,
    "total_bytes": COUNT,
    "activity_sum": COUNT,
    "expected_mean": NUMBER,
    "files": list_of(ENTRY_SCHEMA),
}


def manifest_problem(manifest: object) -> str | None:
    """What makes `manifest` unlike one generate_data.py writes: a field missing or of the
    wrong kind, a path that leaves data/, a count that disagrees; None if nothing."""
    return listing_problem(manifest, MANIFEST_SCHEMA, "file_count", "files", "path")


def _why_no_manifest(dataset_dir: Path) -> str:
    """Why there is no manifest, in the words the user needs: missing folder, a file, or
    unfinished."""
    if not dataset_dir.exists():
        return (
            f"no dataset at {dataset_dir}: the folder does not exist; create it with "
            f"{create_command(dataset_dir)}"
        )
    if not dataset_dir.is_dir():
        return (
            f"{dataset_dir} is a file, not a dataset folder; give the folder that holds "
            f"{MANIFEST_NAME} (by default workspace/dataset)"
        )
    from iolab.core.writer_lock import LOCK_NAME  # only on this error path: readers start fast

    if (dataset_dir / DATA_DIR).exists() or (dataset_dir / LOCK_NAME).exists():
        return (
            f"no complete dataset in {dataset_dir} (no {MANIFEST_NAME}: its generation was "
            f"interrupted or is still running); create it with {create_command(dataset_dir)}"
        )
    return (
        f"no dataset manifest at {dataset_dir / MANIFEST_NAME}; create the dataset with "
        f"{create_command(dataset_dir)}"
    )


def load_manifest(dataset_dir: Path) -> dict:
    """DIR/manifest.json, checked against its schema, or a LabError that says what is wrong
    and how to fix it (UnsafeInput for a manifest the lab did not write as it is)."""
    dataset_dir = Path(dataset_dir)
    try:
        return read_checked_json(
            dataset_dir / MANIFEST_NAME, manifest_problem, "the manifest", rebuild_hint(dataset_dir)
        )
    except (FileNotFoundError, NotADirectoryError):
        raise LabError(_why_no_manifest(dataset_dir)) from None


def compare_reading(
    manifest: dict, observed: Sequence[tuple[str, int]], unit: str, rows: int, activity_sum: int
) -> list[str]:
    """Problems of a reading against the manifest; empty when it read exactly the dataset.

    `observed` is what a reader saw, one (path, amount) per file or archive member in the
    order read; `unit` says what the amount is ("bytes" or "rows"). Costs no I/O: a reader
    passes what it read anyway, so its system calls stay those of the data access.
    """
    expected = {entry["path"]: entry for entry in manifest["files"]}
    seen = dict(observed)
    missing = sorted(expected.keys() - seen.keys())
    extra = sorted(seen.keys() - expected.keys())
    problems = []
    if missing:
        problems.append(
            f"{missing[0]} is missing"
            + (f" ({len(missing)} files in all)" if len(missing) > 1 else "")
        )
    if extra:
        problems.append(
            f"{extra[0]} is not in the manifest"
            + (f" ({len(extra)} files in all)" if len(extra) > 1 else "")
        )
    if len(observed) != manifest["file_count"] and not (missing or extra):
        problems.append(
            f"{len(observed)} files were read, the manifest lists "
            f"{manifest['file_count']} (a file was read twice)"
        )
    wrong = [(rel, n) for rel, n in observed if rel in expected and n != expected[rel][unit]]
    if wrong:
        rel, n = wrong[0]
        problems.append(f"{rel} has {n} {unit}, the manifest says {expected[rel][unit]}")
    if not problems and rows != manifest["total_rows"]:
        problems.append(f"{rows} rows were parsed, the manifest says {manifest['total_rows']}")
    if not problems and activity_sum != manifest["activity_sum"]:
        problems.append(
            f"the activity levels add up to {activity_sum}, the manifest says "
            f"{manifest['activity_sum']} (a value was changed)"
        )
    return problems
