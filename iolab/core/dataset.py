"""What the lab's dataset is, and whether a copy on disk is complete and intact.

The dataset mimics the classic small-files teaching demo (one CSV per day, 24 hourly rows) so
material written for that demo works unchanged, but it is deterministic from a seed and
described by a manifest: per-file sha256, row counts and the exact expected mean. A dataset
counts as complete only when its manifest exists and every file matches it; the manifest is
written last, so an interrupted run never looks complete. Its archive (data.tar) is
described by archive.json (size, sha256, and the manifest it was made from) and checked too.
Both files are written and read here only (the generators call the writers): their bytes are
compared by tests and committed notebooks, so key order and indent are part of the format.

Writers of a dataset directory take its lock (writer_lock), so two runs into one directory
cannot mix their files; readers compare what they read with the manifest (compare_reading).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import time
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Callable, Iterator, Sequence, TypeVar

from iolab.core.errors import LabError, interrupts_held
from iolab.core.workspace import ensure_writable_dir, replace_json

FIRST_DAY = date(2004, 1, 1)
DEFAULT_FILES = 7300
DEFAULT_SEED = 1
HOURS_PER_FILE = 24
HEADER = ",hour,activity_level\n"
DATA_DIR = "data"
MANIFEST_NAME = "manifest.json"
MARKER_NAME = ".iolab-dataset"
ARCHIVE_NAME = "data.tar"
ARCHIVE_INFO_NAME = "archive.json"
LOCK_NAME = ".iolab-lock"
#: The dataset's own bookkeeping files, as opposed to its data (data/ and data.tar): reading
#: them is the lab checking the dataset, so syscall counts keep them apart from data access.
BOOKKEEPING_NAMES = (MANIFEST_NAME, ARCHIVE_INFO_NAME, MARKER_NAME, LOCK_NAME)
FORMAT_VERSION = 1
T = TypeVar("T")


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


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's contents."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def create_command(dataset_dir: Path | str) -> str:
    """The command that (re)creates the dataset in `dataset_dir`, for messages."""
    return f"`python data_generators/generate_data.py --data {dataset_dir}`"


def verify_command(dataset_dir: Path | str) -> str:
    """The command that checks the dataset in `dataset_dir` (files and archive), for messages."""
    return f"`python data_generators/generate_data.py --data {dataset_dir} --verify`"


# --------------------------------------------------------------------------- the manifest


def manifest_entry(rel: str, payload: bytes, rows: int) -> dict:
    """One data file as the manifest lists it."""
    return {"path": rel, "sha256": hashlib.sha256(payload).hexdigest(), "rows": rows,
            "bytes": len(payload)}


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


def _why_no_manifest(dataset_dir: Path) -> str:
    """Why there is no manifest, in the words the user needs: missing folder, a file, or unfinished."""
    try:
        dataset_dir.stat()
    except PermissionError:
        return (f"{dataset_dir} cannot be reached: a folder on its path is not readable by you; "
                "fix its permissions (chmod u+rx) or choose another folder")
    except OSError:
        pass
    if not dataset_dir.exists():
        return (f"no dataset at {dataset_dir}: the folder does not exist; create it with "
                f"{create_command(dataset_dir)}")
    if not dataset_dir.is_dir():
        return (f"{dataset_dir} is a file, not a dataset folder; give the folder that holds "
                f"{MANIFEST_NAME} (by default workspace/dataset)")
    if (dataset_dir / DATA_DIR).exists() or (dataset_dir / LOCK_NAME).exists():
        return (f"no complete dataset in {dataset_dir} (no {MANIFEST_NAME}: its generation was "
                f"interrupted or is still running); create it with {create_command(dataset_dir)}")
    return (f"no dataset manifest at {dataset_dir / MANIFEST_NAME}; create the dataset with "
            f"{create_command(dataset_dir)}")


def load_manifest(dataset_dir: Path) -> dict:
    """Read DIR/manifest.json, or raise a LabError that says what is wrong and how to fix it."""
    dataset_dir = Path(dataset_dir)
    path = dataset_dir / MANIFEST_NAME
    try:
        text = path.read_text()
    except OSError:
        raise LabError(_why_no_manifest(dataset_dir)) from None
    try:
        manifest = json.loads(text)
        entries = [(e["path"], e["sha256"], e["bytes"], e["rows"]) for e in manifest["files"]]
        manifest["total_rows"], manifest["expected_mean"], manifest["activity_sum"]
        if len(entries) != manifest["file_count"]:
            raise ValueError("file count")
    except (ValueError, KeyError, TypeError):
        raise LabError(f"the manifest {path} is corrupted; rebuild the dataset with "
                       f"{create_command(dataset_dir)}") from None
    return manifest


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
    """Problems of the data files: a sha256 that differs, a file missing, a file not listed."""
    dataset_dir = Path(dataset_dir)
    problems: list[str] = []
    expected = {entry["path"]: entry["sha256"] for entry in manifest["files"]}
    for rel, digest in expected.items():
        path = dataset_dir / rel
        if not path.is_file():
            problems.append(f"{rel} is missing")
        elif sha256_of(path) != digest:
            problems.append(f"{rel} differs from the manifest")
    on_disk = {
        Path(root, name).relative_to(dataset_dir).as_posix()
        for root, _dirs, names in os.walk(dataset_dir / DATA_DIR)
        for name in names
    }
    problems.extend(f"{rel} is not in the manifest" for rel in sorted(on_disk - expected.keys()))
    return problems


def new_archive_info(dataset_dir: Path, archive: Path, members: int, payload_bytes: int,
                     default_format_bytes: int) -> dict:
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


def load_archive_info(dataset_dir: Path) -> dict | None:
    """DIR/archive.json, None if there is none, or a LabError if it cannot be read."""
    path = Path(dataset_dir) / ARCHIVE_INFO_NAME
    try:
        info = json.loads(path.read_text())
        info["archive_bytes"], info["archive_sha256"], info["manifest_sha256"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        raise LabError(f"{path} is corrupted") from None
    return info


def verify_archive(dataset_dir: Path) -> list[str]:
    """Problems of DIR/data.tar: its size and sha256 against archive.json, and whether it was
    made from the dataset's current manifest. No archive at all is not a problem."""
    dataset_dir = Path(dataset_dir)
    archive = dataset_dir / ARCHIVE_NAME
    rebuild = f"rebuild it with `python data_generators/create_archive.py --data {dataset_dir}`"
    try:
        info = load_archive_info(dataset_dir)
    except LabError as err:
        return [f"{err}; {rebuild}"]
    if info is None:
        return [f"{ARCHIVE_NAME} has no {ARCHIVE_INFO_NAME} to check it against; {rebuild}"] \
            if archive.exists() else []
    if not archive.is_file():
        return [f"{ARCHIVE_NAME} is missing though {ARCHIVE_INFO_NAME} describes it; {rebuild}"]
    size = archive.stat().st_size
    if size != info["archive_bytes"]:
        return [f"{ARCHIVE_NAME} has {size} bytes, {ARCHIVE_INFO_NAME} says "
                f"{info['archive_bytes']} (truncated or replaced); {rebuild}"]
    if sha256_of(archive) != info["archive_sha256"]:
        return [f"{ARCHIVE_NAME} differs from its sha256 in {ARCHIVE_INFO_NAME}; {rebuild}"]
    manifest = dataset_dir / MANIFEST_NAME
    if not manifest.is_file() or sha256_of(manifest) != info["manifest_sha256"]:
        return [f"{ARCHIVE_NAME} was made from another version of the dataset; {rebuild}"]
    return []


def verify_dataset(dataset_dir: Path, archive: bool = True) -> Verification:
    """Check every file's sha256 against the manifest, that no file is missing or extra, and
    (with archive=True) that data.tar, if there is one, matches archive.json and the manifest."""
    dataset_dir = Path(dataset_dir)
    try:
        manifest = load_manifest(dataset_dir)
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


def compare_reading(manifest: dict, observed: Sequence[tuple[str, int]], unit: str,
                    rows: int, activity_sum: int) -> list[str]:
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
        problems.append(f"{missing[0]} is missing" + (f" ({len(missing)} files in all)"
                                                      if len(missing) > 1 else ""))
    if extra:
        problems.append(f"{extra[0]} is not in the manifest" + (f" ({len(extra)} files in all)"
                                                                if len(extra) > 1 else ""))
    if len(observed) != manifest["file_count"] and not (missing or extra):
        problems.append(f"{len(observed)} files were read, the manifest lists "
                        f"{manifest['file_count']} (a file was read twice)")
    wrong = [(rel, n) for rel, n in observed if rel in expected and n != expected[rel][unit]]
    if wrong:
        rel, n = wrong[0]
        problems.append(f"{rel} has {n} {unit}, the manifest says {expected[rel][unit]}")
    if not problems and rows != manifest["total_rows"]:
        problems.append(f"{rows} rows were parsed, the manifest says {manifest['total_rows']}")
    if not problems and activity_sum != manifest["activity_sum"]:
        problems.append(f"the activity levels add up to {activity_sum}, the manifest says "
                        f"{manifest['activity_sum']} (a value was changed)")
    return problems


# --------------------------------------------------------------------------- one writer at a time


def _holder_line() -> str:
    """Who holds a lock: process id, host and start time, one line."""
    return f"{os.getpid()} {socket.gethostname()} {time.strftime('%Y-%m-%d %H:%M:%S')}\n"


def _read_holder(path: Path) -> tuple[int, str, str] | None:
    """(pid, host, since) from a lock file, None when it is gone, empty or unreadable."""
    try:
        pid, host, since = path.read_text().split(" ", 2)
        return int(pid), host, since.strip()
    except (OSError, ValueError):
        return None


def _is_stale(holder: tuple[int, str, str] | None) -> bool:
    """Whether the run that holds a lock is known to be gone (killed on this very host)."""
    if holder is None or holder[1] != socket.gethostname() or holder[0] == os.getpid():
        return False
    try:
        os.kill(holder[0], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's process
    return False


def _held_message(directory: Path, path: Path, holder: tuple[int, str, str] | None) -> str:
    if holder is None:
        who = "(it started a moment ago)"
    else:
        pid, host, since = holder
        where = "" if host == socket.gethostname() else f" on {host}"
        who = f"since {since}, by PID {pid}{where}"
    return (f"another run is writing {directory} {who}; wait for it to finish and try again "
            f"(if that run no longer exists, delete {path})")


def _claim(directory: Path, path: Path) -> str:
    """Create the lock file exclusively (O_EXCL works on NFS and Lustre, unlike flock on some
    mounts), taking over a lock whose run was killed on this host; returns our holder line."""
    line = _holder_line()
    for attempt in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = _read_holder(path)
            if attempt == 0 and _is_stale(holder):
                path.unlink(missing_ok=True)
                continue
            raise LabError(_held_message(directory, path, holder)) from None
        except OSError as err:
            raise LabError(f"cannot write in {directory} ({err.strerror}); choose a writable "
                           "location") from None
        with os.fdopen(fd, "w") as handle:
            handle.write(line)
        return line
    raise LabError(_held_message(directory, path, _read_holder(path)))


@contextlib.contextmanager
def writer_lock(directory: Path) -> Iterator[None]:
    """Be the only writer of `directory` for the block, or raise a LabError naming the other.

    The lock is a file holding the writer's PID, host and start time; it is removed when the
    block ends, however it ends. A lock left by a writer killed with SIGKILL on this host is
    taken over; one from another host names that host, so the user can judge.
    """
    directory = Path(directory)
    path = directory / LOCK_NAME
    line = None
    try:
        with interrupts_held():  # a lock file without its holder line would block every rerun
            line = _claim(directory, path)
        yield
    finally:
        with contextlib.suppress(OSError):
            if line is not None and path.read_text() == line:
                path.unlink()


def build_once(directory: Path, reuse: Callable[[Path], T | None], build: Callable[[Path], T],
               *, create: bool = True) -> tuple[T, bool]:
    """What `reuse(directory)` finds, else what `build(directory)` makes under the writer lock;
    returns (result, reused).

    The order is what makes two runs at once safe. Reuse is tried first without the lock
    (only reads, so a valid result in a read-only place is still used); then the directory
    is made (create=True) and locked, and reuse is tried *again*: a second run may have
    finished the same result while this one waited for the lock, and building it again would
    replace a complete result for nothing (or refuse as busy). `build` runs with the lock
    held, so it may remove what a killed run left behind.
    """
    found = reuse(Path(directory))
    if found is not None:
        return found, True
    directory = ensure_writable_dir(directory) if create else Path(directory)
    with writer_lock(directory):
        found = reuse(directory)
        if found is not None:
            return found, True
        return build(directory), False
