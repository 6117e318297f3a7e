"""What the lab's dataset is, and whether a copy on disk is complete and intact.

The dataset mimics the classic small-files teaching demo (one CSV per day, 24 hourly rows) so
material written for that demo works unchanged, but it is deterministic from a seed and
described by a manifest: per-file sha256, row counts and the exact expected mean. A dataset
counts as complete only when its manifest exists and every file matches it; the manifest is
written last, so an interrupted run never looks complete. Its archive (data.tar) is
described by archive.json (size, sha256, and the manifest it was made from) and checked too.
Both files are written and read here only (the generators call the writers): their bytes are
compared by tests and committed notebooks, so key order and indent are part of the format.

Writers of a dataset directory take its lock (iolab.core.writer_lock), so two runs into one
directory cannot mix their files; readers compare what they read with the manifest
(compare_reading).

A login node is shared, so what lies in a dataset folder may be anyone's. The lab reads only
regular files, never through a link and never waiting on a FIFO, and checks a manifest,
archive.json or shard index against its schema before any field is used
(iolab.core.safe_input); and a writer claims a folder before replacing anything in it
(claim_folder): what the lab did not write is refused, never overwritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import BinaryIO

from iolab.core.atomic import replace_json
from iolab.core.errors import LabError

# The manifest's format and reading live in iolab.core.manifest (what the readers import);
# they are named here too, as every writer and checker of a dataset uses them.
from iolab.core.manifest import (  # noqa: F401
    ARCHIVE_NAME,
    DATA_DIR,
    ENTRY_SCHEMA,
    MANIFEST_NAME,
    MANIFEST_SCHEMA,
    MAX_FILES,
    compare_reading,
    create_command,
    load_manifest,
    manifest_problem,
    rebuild_hint,
    verify_command,
)
from iolab.core.owned import discard_owned, has_marker, write_marker
from iolab.core.safe_input import (
    COUNT,
    NUMBER,
    SHA256,
    NotRegularFile,
    UnsafeInput,
    open_regular,
    read_checked_json,
    record_problem,
    regular_files,
    unreadable,
)
from iolab.core.writer_lock import LOCK_NAME

FIRST_DAY = date(2004, 1, 1)
DEFAULT_FILES = 7300
DEFAULT_SEED = 1
HOURS_PER_FILE = 24
HEADER = ",hour,activity_level\n"
MARKER_NAME = ".iolab-dataset"
ARCHIVE_INFO_NAME = "archive.json"
#: The dataset's own bookkeeping files, as opposed to its data (data/ and data.tar): reading
#: them is the lab checking the dataset, so syscall counts keep them apart from data access.
BOOKKEEPING_NAMES = (MANIFEST_NAME, ARCHIVE_INFO_NAME, MARKER_NAME, LOCK_NAME)
FORMAT_VERSION = 1
#: What the dataset marker says to whoever finds it; write_marker adds the folder's identity.
MARKER_TEXT = "written by the storage I/O lab's generate_data.py: this folder holds a lab dataset"


def day_path(day: date) -> str:
    """Relative path of one day's file, month and day not zero-padded (as in the classic demo)."""
    y, m, d = day.year, day.month, day.day
    return f"{DATA_DIR}/activity_{y}_{m}/activity_{y}_{m}_{d}.csv"


def days(n_files: int) -> Iterator[date]:
    """The consecutive days covered by a dataset of `n_files` files."""
    for offset in range(n_files):
        yield FIRST_DAY + timedelta(days=offset)


def csv_text(levels: list[int]) -> str:
    """One file's text, byte-for-byte what pandas' to_csv writes with its index column."""
    rows = "".join(f"{hour},{hour},{level}\n" for hour, level in enumerate(levels))
    return HEADER + rows


def sha256_of(path: Path, follow_links: bool = True) -> str:
    """Hex sha256 of a regular file's contents (NotRegularFile, an OSError, for a FIFO: it
    would never end)."""
    digest = hashlib.sha256()
    with open_regular(path, follow_links) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_in_dataset(path: Path, fix: str) -> str:
    """sha256 of a file of a dataset, not through a link and not of a FIFO or device; anything
    that cannot be read is UnsafeInput naming the file."""
    try:
        return sha256_of(path, follow_links=False)
    except OSError as err:
        raise unreadable(path, err, fix) from None


def read_data_file(dataset_dir: Path, rel: str) -> bytes:
    """A data file's bytes, read as verification reads it, for the writers that pack a
    verified dataset (the file may have been swapped since it verified)."""
    path = Path(dataset_dir) / rel
    try:
        with open_regular(path, follow_links=False) as handle:
            return handle.read()
    except OSError as err:
        raise unreadable(path, err, rebuild_hint(dataset_dir)) from None


# --------------------------------------------------------------------------- the manifest


def manifest_entry(rel: str, payload: bytes, rows: int) -> dict:
    """One data file as the manifest lists it."""
    return {
        "path": rel,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "rows": rows,
        "bytes": len(payload),
    }


def new_manifest(seed: int, entries: list[dict], directory_count: int, activity_sum: int) -> dict:
    """The manifest of a freshly generated dataset, from its files' entries (manifest_entry)."""
    total_rows = sum(entry["rows"] for entry in entries)
    return {
        "format_version": FORMAT_VERSION,
        "generator": "data_generators/generate_data.py",
        "seed": seed,
        "first_day": FIRST_DAY.isoformat(),
        "file_count": len(entries),
        "directory_count": directory_count,
        "total_rows": total_rows,
        "total_bytes": sum(entry["bytes"] for entry in entries),
        "activity_sum": activity_sum,
        "expected_mean": activity_sum / total_rows,
        "files": entries,
    }


def write_manifest(dataset_dir: Path, manifest: dict) -> None:
    """Write DIR/manifest.json in one rename: the generator's last step, proof of completion."""
    replace_json(Path(dataset_dir) / MANIFEST_NAME, manifest, indent=0)


# --------------------------------------------------------------------------- verification


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


def verify_files(dataset_dir: Path, manifest: dict) -> list[str]:
    """Problems of the data files: a sha256 that differs, a file missing, a file not listed.

    What must not be read at all (a link, a FIFO, a device, an unreadable file or folder in
    data/) is UnsafeInput, raised rather than listed: it is not damage a rebuild repairs.
    """
    dataset_dir = Path(dataset_dir)
    fix = rebuild_hint(dataset_dir)
    on_disk = regular_files(dataset_dir, DATA_DIR, fix)
    problems: list[str] = []
    expected = {entry["path"]: entry["sha256"] for entry in manifest["files"]}
    for rel, digest in expected.items():
        if rel not in on_disk:
            problems.append(f"{rel} is missing")
        elif sha256_in_dataset(dataset_dir / rel, fix) != digest:
            problems.append(f"{rel} differs from the manifest")
    problems.extend(f"{rel} is not in the manifest" for rel in sorted(on_disk - expected.keys()))
    return problems


def new_archive_info(
    dataset_dir: Path, archive: Path, members: int, payload_bytes: int, default_format_bytes: int
) -> dict:
    """What archive.json records about a finished archive (`archive` may have a partial name).

    `default_format_bytes` is the size Python's default tar format would have had: the
    per-member overhead of an archive format is part of the lesson.
    """
    size = archive.stat().st_size
    return {
        "archive": ARCHIVE_NAME,
        "format": "ustar",
        "members": members,
        "member_order": "sorted by path",
        "payload_bytes": payload_bytes,
        "archive_bytes": size,
        "archive_sha256": sha256_of(archive),
        "bytes_per_member": size / members,
        "overhead_ratio": size / payload_bytes,
        "default_format": "pax (Python's tarfile default, float mtimes from tar.add)",
        "default_format_bytes": default_format_bytes,
        "default_overhead_ratio": default_format_bytes / payload_bytes,
        "manifest_sha256": sha256_of(Path(dataset_dir) / MANIFEST_NAME),
    }


def write_archive_info(dataset_dir: Path, info: dict) -> None:
    """Write DIR/archive.json in one rename, after data.tar is in place."""
    replace_json(Path(dataset_dir) / ARCHIVE_INFO_NAME, info, indent=1)


ARCHIVE_INFO_SCHEMA = {
    "members": COUNT,
    "payload_bytes": COUNT,
    "archive_bytes": COUNT,
    "archive_sha256": SHA256,
    "overhead_ratio": NUMBER,
    "default_format_bytes": COUNT,
    "default_overhead_ratio": NUMBER,
    "manifest_sha256": SHA256,
}


def _archive_fix(dataset_dir: Path) -> str:
    return f"rebuild it with `python data_generators/create_archive.py --data {dataset_dir}`"


def load_archive_info(dataset_dir: Path) -> dict | None:
    """DIR/archive.json checked against its schema, None if there is none, UnsafeInput if it
    cannot be read or is not what the lab writes."""
    dataset_dir = Path(dataset_dir)
    try:
        return read_checked_json(
            dataset_dir / ARCHIVE_INFO_NAME,
            lambda info: record_problem(info, ARCHIVE_INFO_SCHEMA),
            "the archive description",
            f"move it away and {_archive_fix(dataset_dir)}",
        )
    except (FileNotFoundError, NotADirectoryError):
        return None


def _regular_or_none(path: Path, fix: str) -> os.stat_result | None:
    """lstat of a file of the dataset, None if there is none; UnsafeInput if it is not a
    regular file (a link, a FIFO) or cannot be looked at."""
    try:
        st = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        raise unreadable(path, err, fix) from None
    if not stat.S_ISREG(st.st_mode):
        raise unreadable(path, NotRegularFile(path, st.st_mode), fix)
    return st


def verify_archive(dataset_dir: Path) -> list[str]:
    """Problems of DIR/data.tar: its size and sha256 against archive.json, and whether it was
    made from the dataset's current manifest. No archive at all is not a problem; an
    archive.json or data.tar the lab will not read is UnsafeInput."""
    dataset_dir = Path(dataset_dir)
    archive = dataset_dir / ARCHIVE_NAME
    rebuild = _archive_fix(dataset_dir)
    fix = f"move it away and {rebuild}"
    info = load_archive_info(dataset_dir)
    archive_st = _regular_or_none(archive, fix)
    if info is None:
        return (
            [f"{ARCHIVE_NAME} has no {ARCHIVE_INFO_NAME} to check it against; {rebuild}"]
            if archive_st is not None
            else []
        )
    if archive_st is None:
        return [f"{ARCHIVE_NAME} is missing though {ARCHIVE_INFO_NAME} describes it; {rebuild}"]
    if archive_st.st_size != info["archive_bytes"]:
        return [
            f"{ARCHIVE_NAME} has {archive_st.st_size} bytes, {ARCHIVE_INFO_NAME} says "
            f"{info['archive_bytes']} (truncated or replaced); {rebuild}"
        ]
    if sha256_in_dataset(archive, fix) != info["archive_sha256"]:
        return [f"{ARCHIVE_NAME} differs from its sha256 in {ARCHIVE_INFO_NAME}; {rebuild}"]
    manifest = dataset_dir / MANIFEST_NAME
    if (
        _regular_or_none(manifest, rebuild_hint(dataset_dir)) is None
        or sha256_in_dataset(manifest, rebuild_hint(dataset_dir)) != info["manifest_sha256"]
    ):
        return [f"{ARCHIVE_NAME} was made from another version of the dataset; {rebuild}"]
    return []


def verify_dataset(dataset_dir: Path, archive: bool = True) -> Verification:
    """Check every file's sha256 against the manifest, that no file is missing or extra, and
    (with archive=True) that data.tar, if there is one, matches archive.json and the manifest.

    Damage is a verdict (ok=False with the problems); input the lab will not read at all is
    UnsafeInput, raised.
    """
    dataset_dir = Path(dataset_dir)
    try:
        manifest = load_manifest(dataset_dir)
    except UnsafeInput:
        raise  # not a verdict on the data: the check itself was refused
    except LabError as err:
        return Verification(dataset_dir, False, [str(err)])
    problems = verify_files(dataset_dir, manifest)
    if archive:
        problems += verify_archive(dataset_dir)
    return Verification(dataset_dir, not problems, problems, manifest)


def require_verified(dataset_dir: Path) -> dict:
    """The manifest of a dataset whose data files verify, or a LabError naming the first problem."""
    load_manifest(dataset_dir)  # a missing or corrupted manifest has its own message
    result = verify_dataset(dataset_dir, archive=False)
    if not result.ok:
        raise LabError(
            f"the dataset in {dataset_dir} does not match its manifest ({result.problems[0]}); "
            f"rebuild it with {create_command(dataset_dir)}"
        )
    assert result.manifest is not None
    return result.manifest


# --------------------------------------------------------------------------- whose folder it is


def present(directory: Path, names: Sequence[str]) -> list[str]:
    """Which of `names` are in `directory` (a link counts, wherever it points)."""
    return [name for name in names if os.path.lexists(Path(directory) / name)]


def claim_folder(
    directory: Path,
    found: Sequence[str],
    marker: str,
    text: str,
    verified: Callable[[Path], bool],
    hint: str,
) -> None:
    """Make `directory` the lab's before a writer replaces anything in it, or refuse in one
    sentence naming the first of `found` (the names it would replace that are there).

    They are the lab's only if the folder carries the lab's `marker` written into this very
    folder (a copy made with `cp -r`, a hand-made marker or one that is a link does not
    count), or if what is there verifies as a complete result of the lab (`verified`, only
    asked when needed: it reads everything). Then the marker is written, before anything
    else, so what a run cut short leaves behind is the next run's to clean up.
    """
    directory = Path(directory)
    if has_marker(directory, marker):
        return
    if found and not verified(directory):
        raise LabError(
            f"{directory / found[0]} exists but was not written by this lab, and the "
            f"lab does not replace or delete what it did not write; {hint}"
        )
    try:
        write_marker(directory, marker, text)
    except OSError as err:
        raise LabError(
            f"cannot write {directory / marker} ({err.strerror or err}); choose a "
            "folder of yours that you can write in"
        ) from None


def create_new(path: Path) -> BinaryIO:
    """`path` made afresh for writing, in a folder the lab claimed: what a killed run left
    under the name goes first, and the new file is created exclusively without following
    links, so a link planted under the name cannot send the write to another file."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return open(path, "xb", opener=lambda name, flags: os.open(name, flags | os.O_NOFOLLOW, 0o666))


def discard_path(path: Path) -> None:
    """Remove what a killed run of the lab left at `path` in a folder it claimed: a folder
    with its files, or whatever else is under the name -- never what a link there points to."""
    if path.is_dir() and not path.is_symlink():
        discard_owned(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
