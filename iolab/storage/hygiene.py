"""Keeping shared storage tidy: free space and inodes, what files really occupy, who uses it.

A shared file system runs out in two ways: bytes and inodes (one per file or directory). A
project of millions of tiny files can fill the inode table while `df -h` still shows room,
and each tiny file occupies at least one allocation unit, so its real footprint can be many
times its byte count. These tools read the lab's workspace the way `df`, `du` and `find`
would, run those real commands beside a Python reading to compare, and return tidy frames
(units in every column name). Nothing here writes or deletes anything.

Facts quoted from elsewhere come from Stas Bekman's "Machine Learning Engineering", chapter
"Storage" (inodes, block sizes, the 80 % rule, /tmp on compute nodes, checkpoint sprawl).
"""

from __future__ import annotations

import fnmatch
import math
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError
from iolab.core.user_paths import existing_dir
from iolab.core.workspace import public_text, workdir
from iolab.measure.context import fs_kind, mount_for

KIB, MIB = 1024, 1024**2
#: Allocation units to compare: 4 KiB (ext4, xfs: "native Linux file systems typically use a
#: block size of 4k"), 64 KiB, 1 MiB, 4 MiB, and 16 MiB (the GPFS block size at Jean Zay
#: that made tiny files so costly there). Both real figures: Bekman, "Storage".
ALLOCATION_UNITS_BYTES = (4 * KIB, 64 * KIB, MIB, 4 * MIB, 16 * MIB)
#: Checkpoint file names, as in Bekman's one-liner (pt, pth, ckpt, safetensors), plus the
#: older Hugging Face weight files.
CHECKPOINT_PATTERNS = ("*.pt", "*.pth", "*.ckpt", "*.safetensors", "pytorch_model*.bin")
#: Where temporary files may go: variables first (as Python's tempfile consults TMPDIR, TEMP,
#: TMP; SLURM_TMPDIR and LOCAL_SCRATCH as clusters set them), then the usual directories.
TMP_VARIABLES = ("TMPDIR", "SLURM_TMPDIR", "LOCAL_SCRATCH", "TEMP", "TMP")
TMP_DIRECTORIES = ("/tmp", "/var/tmp", "/dev/shm")
#: How much of a file system can be relied on, with where each figure comes from.
USABLE_FRACTIONS = (
    (0.80, "distributed storage, IO engineers' rule (Bekman, Storage)"),
    (0.89, "GCP Filestore, its known-issues page (via Bekman, Storage)"),
    (1.00, "GPFS, according to Sycomp (via Bekman, Storage)"),
)
DU_TIMEOUT_S = 300

WHY_INODES = (
    "Every file and directory takes one inode; on ext4 and ldiskfs (Lustre's usual target "
    "format) their number is fixed when the file system is formatted (XFS, ZFS and btrfs "
    "allocate them as needed), and quotas count them too, so many tiny files can run out of "
    "inodes while bytes are still free: then writes fail with 'No space left on device' or "
    "'Disk quota exceeded' although `df -h` shows room."
)
WHY_TMPDIR = (
    "On compute nodes /tmp usually lives on the node's small root file system and is only "
    "emptied at reboot, so an untar or a cache that lands there can fail with 'No space left "
    "on device'; export TMPDIR to the node-local disk your centre documents (SLURM_TMPDIR, "
    "LOCAL_SCRATCH, TMPDIR set by the batch system) in the job script, after checking with "
    "`df -hT` on a compute node that it is a local file system: a /scratch path is the shared "
    "Lustre or GPFS scratch at many sites, not a local disk."
)


# -- df: bytes and inodes ---------------------------------------------------------------------

DF_FIELDS = "source,fstype,size,used,avail,pcent,itotal,iused,iavail,ipcent,target"
DF_COLUMNS = [
    "measured_by",
    "fs_type",
    "mount_point",
    "size_bytes",
    "used_bytes",
    "avail_bytes",
    "reserved_bytes",
    "used_pct",
    "inodes_total",
    "inodes_used",
    "inodes_free",
    "inodes_used_pct",
]


def _existing_dir(path: Path | str) -> Path:
    """`path` resolved, or a LabError if it is not a directory."""
    return existing_dir(path, "pass an existing folder to inspect").resolve()


def _run(command: list[str]) -> str:
    """Standard output of a read-only command, or a LabError naming the missing tool."""
    if shutil.which(command[0]) is None:
        raise LabError(f"`{command[0]}` is not on PATH; install GNU coreutils to run this check")
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=DU_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0 and not proc.stdout:
        first = (proc.stderr.strip().splitlines() or ["no message"])[0]
        raise LabError(f"`{' '.join(command[:3])} ...` failed ({first}); GNU coreutils is needed")
    return proc.stdout


def _pct(part: int, whole: int) -> int | None:
    """A percentage rounded up, as df prints it; None when there is no whole."""
    return math.ceil(100 * part / whole) if whole else None


def _number(field: str) -> int | None:
    """A df field as an int: '-' (no inode count) and '42%' handled."""
    field = field.rstrip("%")
    return None if field == "-" else int(field)


def df_report(path: Path | str | None = None) -> pd.DataFrame:
    """Bytes and inodes of the file system holding `path`, from `df` and from os.statvfs.

    Two rows that should agree (up to what other users wrote in between). `reserved_bytes` is
    free space you may not use (ext4 keeps 5 % for root by default), which is why used plus
    available is less than the size. used_pct is computed like df: used / (used + available).
    """
    path = _existing_dir(workdir() if path is None else path)
    out = _run(["df", "-B1", f"--output={DF_FIELDS}", str(path)]).splitlines()
    fields = out[-1].split(None, 10)
    size, used, avail = (int(f) for f in fields[2:5])
    itotal, iused, ifree = (_number(f) for f in fields[6:9])
    from_df = [
        "df",
        fields[1],
        fields[10],
        size,
        used,
        avail,
        None,
        _number(fields[5]),
        itotal,
        iused,
        ifree,
        _number(fields[9]),
    ]
    st = os.statvfs(path)
    size_sv, free_sv = st.f_blocks * st.f_frsize, st.f_bfree * st.f_frsize
    avail_sv, used_sv = st.f_bavail * st.f_frsize, size_sv - free_sv
    inodes = st.f_files or None  # 0: the file system does not count inodes
    mount = mount_for(path)
    from_statvfs = [
        "os.statvfs",
        mount.fs_type,
        mount.mount_point,
        size_sv,
        used_sv,
        avail_sv,
        free_sv - avail_sv,
        _pct(used_sv, used_sv + avail_sv),
        inodes,
        inodes and st.f_files - st.f_ffree,
        inodes and st.f_ffree,
        inodes and _pct(st.f_files - st.f_ffree, st.f_files),
    ]
    frame = pd.DataFrame([from_df, from_statvfs], columns=DF_COLUMNS)
    frame["mount_point"] = frame["mount_point"].map(public_text)
    return frame


def usable_capacity(total_bytes: int, fraction: float = 0.8) -> int:
    """Bytes of `total_bytes` that can be relied on when only `fraction` is safely usable.

    On a distributed file system one of its many disks can fill before the whole does, and
    rebalancing is rare, so writes may fail well before `df` shows 100 %: the rule of thumb
    is 80 %, so 100 TB of reliable space needs 125 TB bought (Bekman, "Storage").
    """
    if not 0 < fraction <= 1:
        raise LabError(f"the usable fraction must be in (0, 1], not {fraction}")
    return math.floor(total_bytes * fraction)


def capacity_to_buy(needed_bytes: int, fraction: float = 0.8) -> int:
    """Bytes to provision so that `needed_bytes` stay within the reliably usable fraction."""
    if not 0 < fraction <= 1:
        raise LabError(f"the usable fraction must be in (0, 1], not {fraction}")
    return math.ceil(needed_bytes / fraction)


def usable_capacity_report(path: Path | str | None = None) -> pd.DataFrame:
    """The file system of `path` under each published usable fraction: room left before trouble.

    `headroom_bytes` is the reliably usable size minus what is used now (negative: past the
    line already).
    """
    row = df_report(path).iloc[1]  # the statvfs row
    size, used = int(row["size_bytes"]), int(row["used_bytes"])
    return pd.DataFrame(
        [
            {
                "usable_fraction": f,
                "source": source,
                "size_bytes": size,
                "usable_bytes": usable_capacity(size, f),
                "used_bytes": used,
                "headroom_bytes": usable_capacity(size, f) - used,
            }
            for f, source in USABLE_FRACTIONS
        ]
    )


# -- what the files really occupy --------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One file-system entry as du sees it: path, depth below the root, type, sizes, owner, age."""

    path: Path
    depth: int
    is_dir: bool
    is_file: bool
    apparent_bytes: int
    allocated_bytes: int
    uid: int
    mtime_s: float


def walk(root: Path | str, one_file_system: bool = True) -> Iterator[Entry]:
    """Every entry under `root` (root first), symlinks not followed, hard links counted once.

    Like du: the allocated size is st_blocks x 512 (st_blocks counts 512-byte units whatever
    the file system's block size), and with `one_file_system` (du -x) nothing on another
    mount is entered. Entries that vanish while walking (other users' scratch) are skipped.
    """
    root = _existing_dir(root)
    device = root.stat().st_dev
    seen: set[tuple[int, int]] = set()
    pending = [(root, 0)]
    while pending:
        path, depth = pending.pop()
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if one_file_system and st.st_dev != device:
            continue
        if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
        is_dir = stat.S_ISDIR(st.st_mode)
        yield Entry(
            path,
            depth,
            is_dir,
            stat.S_ISREG(st.st_mode),
            st.st_size,
            st.st_blocks * 512,
            st.st_uid,
            st.st_mtime,
        )
        if is_dir:
            try:
                children = sorted(os.scandir(path), key=lambda e: e.name, reverse=True)
            except (FileNotFoundError, PermissionError):
                continue
            pending.extend((Path(child.path), depth + 1) for child in children)


def file_sizes(root: Path | str) -> pd.DataFrame:
    """One row per regular file under `root`: relative path, bytes, allocated bytes."""
    root = _existing_dir(root)
    rows = [
        (str(e.path.relative_to(root)), e.apparent_bytes, e.allocated_bytes)
        for e in walk(root)
        if e.is_file
    ]
    return pd.DataFrame(rows, columns=["path", "size_bytes", "allocated_bytes"])


def du_total(root: Path | str, apparent: bool = False) -> int:
    """What the real `du -s -B1 [--apparent-size]` reports for `root`, in bytes."""
    root = _existing_dir(root)
    flags = ["--apparent-size"] if apparent else []
    return int(_run(["du", "-s", "-x", "-B1", *flags, str(root)]).split()[0])


def allocation_report(root: Path | str) -> pd.DataFrame:
    """Bytes versus allocated space under `root`, measured three ways.

    Regular files alone (what the data is), the whole tree with its directories as Python
    reads it, and the whole tree as `du -s` and `du -s --apparent-size` print it; the last two
    should match exactly when nobody writes in between.
    """
    root = _existing_dir(root)
    entries = list(walk(root))
    files = [e for e in entries if e.is_file]

    def row(measured_by: str, what: str, chosen: list[Entry]) -> dict:
        apparent = sum(e.apparent_bytes for e in chosen)
        allocated = sum(e.allocated_bytes for e in chosen)
        return {
            "measured_by": measured_by,
            "what": what,
            "entries": len(chosen),
            "apparent_bytes": apparent,
            "allocated_bytes": allocated,
            "allocated_per_apparent": allocated / apparent if apparent else math.nan,
        }

    rows = [row("python lstat", "regular files", files), row("python lstat", "whole tree", entries)]
    apparent, allocated = du_total(root, apparent=True), du_total(root)
    rows.append(
        {
            "measured_by": "du -s",
            "what": "whole tree",
            "entries": None,
            "apparent_bytes": apparent,
            "allocated_bytes": allocated,
            "allocated_per_apparent": allocated / apparent if apparent else math.nan,
        }
    )
    return pd.DataFrame(rows)


def rounded_allocation(
    sizes_bytes: Sequence[int], units_bytes: Sequence[int] = ALLOCATION_UNITS_BYTES
) -> pd.DataFrame:
    """Arithmetic, not a measurement: the space files would take if each rounds up to a unit.

    A non-empty file occupies at least one whole allocation unit (block) and an empty one
    none; real file systems add metadata and may pack tails (ext4 inline data, GPFS
    sub-blocks), so this is the simple model Bekman's "16 MB blocks for 16 KB files use 1000
    times the space" rests on.
    """
    sizes = pd.Series(list(sizes_bytes), dtype="int64")
    if (sizes < 0).any():
        raise LabError("file sizes cannot be negative")
    apparent = int(sizes.sum())
    rows = []
    for unit in units_bytes:
        if unit <= 0:
            raise LabError(f"an allocation unit must be a positive number of bytes, not {unit}")
        would = int((-(-sizes // unit) * unit).sum())
        rows.append(
            {
                "unit_bytes": unit,
                "files": len(sizes),
                "apparent_bytes": apparent,
                "would_allocate_bytes": would,
                "times_apparent": would / apparent if apparent else math.nan,
            }
        )
    return pd.DataFrame(rows)


# -- biggest consumers -----------------------------------------------------------------------


def _tree_totals(root: Path, depth: int) -> list[tuple[Entry, int, int]]:
    """Entries at depth 1..`depth` with their subtree totals (apparent, allocated), like du -a."""
    entries = list(walk(root))
    totals = {e.path: [e.apparent_bytes, e.allocated_bytes] for e in entries}
    for e in sorted(entries, key=lambda e: e.depth, reverse=True):
        if e.depth > 0:
            parent = totals[e.path.parent]
            parent[0] += totals[e.path][0]
            parent[1] += totals[e.path][1]
    return [(e, totals[e.path][0], totals[e.path][1]) for e in entries if 0 < e.depth <= depth]


def du_consumers(root: Path | str, depth: int = 1) -> pd.DataFrame:
    """The real `du -x -a -B1 --max-depth=DEPTH ROOT`, parsed: relative path, allocated bytes."""
    root = _existing_dir(root)
    rows = []
    for line in _run(["du", "-x", "-a", "-B1", f"--max-depth={depth}", str(root)]).splitlines():
        size, _, name = line.partition("\t")
        if Path(name) != root:
            rows.append((str(Path(name).relative_to(root)), int(size)))
    return pd.DataFrame(rows, columns=["path", "du_allocated_bytes"])


def biggest_consumers(root: Path | str, top: int = 10, depth: int = 1) -> pd.DataFrame:
    """The `top` entries under `root` (down to `depth`) taking the most disk, Python beside du.

    Python's totals and du's should agree byte for byte on a tree nobody is writing to; a
    directory's total includes everything below it, as with `du -ahd1 DIR | sort -rh`.
    """
    if top < 1 or depth < 1:
        raise LabError("--top and --depth must be at least 1")
    root = _existing_dir(root)
    rows = [
        {
            "path": str(e.path.relative_to(root)) + ("/" if e.is_dir else ""),
            "depth": e.depth,
            "apparent_bytes": apparent,
            "allocated_bytes": allocated,
        }
        for e, apparent, allocated in _tree_totals(root, depth)
    ]
    ours = pd.DataFrame(rows, columns=["path", "depth", "apparent_bytes", "allocated_bytes"])
    theirs = du_consumers(root, depth)
    ours["key"] = ours["path"].str.rstrip("/")
    merged = ours.merge(theirs.rename(columns={"path": "key"}), on="key", how="left")
    merged = merged.sort_values(["allocated_bytes", "path"], ascending=[False, True])
    return merged.drop(columns="key").head(top).reset_index(drop=True)


# -- checkpoints -----------------------------------------------------------------------------


def owner_name(uid: int) -> str:
    """The login name of `uid`, or uid<N> when the passwd database does not know it."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid{uid}"


def find_checkpoints(
    root: Path | str, patterns: Sequence[str] = CHECKPOINT_PATTERNS, now: float | None = None
) -> pd.DataFrame:
    """Checkpoint files under `root`: who owns them, how big, how old (in whole days).

    The Python counterpart of ``find ROOT -type f -regex '.*\\.(pt|pth|ckpt|safetensors)$'``
    with stat; `now` (seconds since the epoch) fixes the ages for tests.
    """
    root = _existing_dir(root)
    now = time.time() if now is None else now
    rows = []
    for e in walk(root):
        if e.is_file and any(fnmatch.fnmatch(e.path.name, p) for p in patterns):
            rows.append(
                {
                    "path": str(e.path.relative_to(root)),
                    "owner": owner_name(e.uid),
                    "size_bytes": e.apparent_bytes,
                    "allocated_bytes": e.allocated_bytes,
                    "age_days": int((now - e.mtime_s) // 86400),
                }
            )
    columns = ["path", "owner", "size_bytes", "allocated_bytes", "age_days"]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.sort_values(["size_bytes", "path"], ascending=[False, True], ignore_index=True)


def checkpoints_by_owner(checkpoints: pd.DataFrame) -> pd.DataFrame:
    """Per owner: files, bytes, and the oldest and newest age; the biggest owner first."""
    grouped = checkpoints.groupby("owner").agg(
        files=("path", "size"),
        size_bytes=("size_bytes", "sum"),
        allocated_bytes=("allocated_bytes", "sum"),
        oldest_age_days=("age_days", "max"),
        newest_age_days=("age_days", "min"),
    )
    return grouped.reset_index().sort_values(
        ["size_bytes", "owner"], ascending=[False, True], ignore_index=True
    )


# -- temporary files -------------------------------------------------------------------------


def tmpdir_report() -> pd.DataFrame:
    """Where temporary files would go here, on which file system, and how much room is there.

    The first row is Python's own choice (tempfile.gettempdir(), which follows TMPDIR); then
    each variable that clusters use, then the usual directories.
    """
    candidates: list[tuple[str, str | None]] = [("tempfile.gettempdir()", tempfile.gettempdir())]
    candidates += [(f"${name}", os.environ.get(name) or None) for name in TMP_VARIABLES]
    candidates += [(directory, directory) for directory in TMP_DIRECTORIES]
    rows = []
    for name, value in candidates:
        row = {
            "name": name,
            "path": public_text(value) if value else "unset",
            "exists": False,
            "fs_type": None,
            "kind": None,
            "size_bytes": None,
            "free_bytes": None,
            "free_inodes": None,
        }
        if value and Path(value).is_dir():
            st = os.statvfs(value)
            fs_type = mount_for(value).fs_type
            row.update(
                exists=True,
                fs_type=fs_type,
                kind=fs_kind(fs_type),
                size_bytes=st.f_blocks * st.f_frsize,
                free_bytes=st.f_bavail * st.f_frsize,
                free_inodes=st.f_favail if st.f_files else None,
            )
        rows.append(row)
    return pd.DataFrame(rows)
