"""A file-size sweep in the manner of elbencho's storage_sweep, scaled down to a login node.

How fast storage moves data depends on the size of the files it comes in. Small files each
cost a fixed amount of work (create, open, flush, close) whatever their size, so files/s
stays roughly flat and bytes/s grows with the file size; from some size on, bandwidth is
the limit instead. The published elbencho sweep (mtelbencho.sh, 8 NVMe drives in RAID-0)
shows that curve: 1.72 Gbit/s at 4 KiB, 79-94 Gbit/s from 256 KiB on. This module draws
the same curve on the learner's machine with the same design, about a thousand times smaller:

* file sizes are powers of two (default 4 KiB to 64 MiB);
* small files come in a constant count (default 2048 per point), large ones in a constant
  byte total (default 256 MiB per point), so no point holds more than 256 MiB or 2048 files;
* each point writes its files, evicts them from the page cache, reads them back cold and
  deletes them before the next point starts: at most one point is on disk at a time;
* the whole sweep is repeated (default 3 times), repeats outermost as graph_sweep.sh does,
  so a busy minute on a shared node hits one repeat of many sizes rather than every repeat of
  one size; the summary keeps the median and the spread.

Writes are honest: every file is fsync'ed before it is closed and counted, so the time
includes getting the data to storage, not only into the page cache. The flush is per file
and not one sync at the end because sync(2) and syncfs(2) would flush, and time, every
other user's dirty data on a shared node too. This makes small-file writes as slow as one
flush each, which is what a program that needs every file safe (a checkpoint writer) sees;
elbencho's 56 threads without a flush per file hide that latency. Reads are cold: the files
are evicted with iolab.measure.cache.evict (no root needed) and each read row records how much was
still cached just before reading. Nothing can be evicted on tmpfs (/dev/shm); there the
rows say so.

The data is random and different in every file, so storage that compresses or deduplicates
cannot store it for free. Everything is written in a fresh directory inside the target,
which is removed with its contents at the end, also on an error or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pandas as pd
from tqdm import tqdm

from iolab.core.budget import check
from iolab.core.capacity import check_capacity
from iolab.core.class_folder import heavy_turn
from iolab.core.errors import LabError, sigterm_as_interrupt
from iolab.core.lab_dirs import fresh_run_dir
from iolab.core.repeats import allowed_repeats
from iolab.core.tables import to_markdown
from iolab.core.user_paths import existing_dir
from iolab.core.workspace import public_text
from iolab.measure.cache import evict
from iolab.measure.context import machine_context, mount_for
from iolab.storage.run_sizes import DEFAULT_MAX_BYTES, DEFAULT_MIN_BYTES, GIB, KIB, MIB
from iolab.storage.run_sizes import parse_size as parse_size  # tests read it here

#: The constant file count of the small-file points (elbencho's sweep uses 1,048,576).
DEFAULT_SMALL_FILES = 2048
#: The constant byte total of the large-file points (elbencho's sweep uses 1 TiB).
DEFAULT_POINT_BYTES = 256 * MIB
#: Bytes per write and read call: elbencho's default block size (-b 1M).
BLOCK_BYTES = MIB
#: Files start at different offsets of one random buffer. Offsets fewer than 4 KiB apart are
#: never a whole number of blocks apart, so no two files share a block a deduplicating file
#: system could store once.
DISTINCT_OFFSETS = 4095
WRITE_FLUSH = "fsync per file"
SUMMARY_KEYS = ["location", "fs_type", "file_size", "file_bytes", "files", "direction"]


def size_label(size_bytes: int) -> str:
    """'4KiB', '64MiB', '512B': the labels of the published elbencho sweep."""
    for unit, factor in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size_bytes >= factor and size_bytes % factor == 0:
            return f"{size_bytes // factor}{unit}"
    return f"{size_bytes}B"


def _check_power_of_two(name: str, size_bytes: int) -> None:
    if size_bytes < 1 or size_bytes & (size_bytes - 1):
        raise LabError(
            f"the {name} file size of {size_bytes} bytes is not a power of two; "
            "choose sizes such as 4K, 64K or 64M"
        )


def plan(
    min_bytes: int = DEFAULT_MIN_BYTES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    small_files: int = DEFAULT_SMALL_FILES,
    point_bytes: int = DEFAULT_POINT_BYTES,
    *,
    compute_node: bool | None = None,
) -> pd.DataFrame:
    """The points of a sweep: one row per file size, with its file count and bytes on disk.

    Each size gets min(small_files, point_bytes // size) files: a constant count up to the
    crossover size point_bytes / small_files, and a constant byte total above it, so no
    point holds more than `point_bytes` or `small_files` files. A point must fit the
    login-node budget (iolab.core.budget) unless `compute_node` or a batch job lifts it.
    """
    _check_power_of_two("smallest", min_bytes)
    _check_power_of_two("largest", max_bytes)
    if min_bytes > max_bytes:
        raise LabError(
            f"the smallest file size ({size_label(min_bytes)}) is above the largest "
            f"({size_label(max_bytes)}); swap --min and --max"
        )
    if point_bytes < max_bytes:
        raise LabError(
            f"the bytes per point ({size_label(point_bytes)}) are fewer than one file "
            f"of the largest size ({size_label(max_bytes)}); choose a smaller --max"
        )
    if small_files < 1:
        raise LabError(f"{small_files} files per point measure nothing; choose at least 1")
    check(
        "a sweep point",
        data_mib=point_bytes / MIB,
        files=small_files,
        fix="choose fewer bytes or files per point",
        compute_node=compute_node,
    )
    rows = []
    for exponent in range(min_bytes.bit_length() - 1, max_bytes.bit_length()):
        size = 2**exponent
        files = min(small_files, point_bytes // size)
        rows.append(
            {
                "file_size": size_label(size),
                "file_bytes": size,
                "files": files,
                "point_bytes": files * size,
                "point_MiB": files * size / MIB,
                "regime": "constant count" if files == small_files else "constant bytes",
            }
        )
    return pd.DataFrame(rows)


def existing_directory(directory: Path | str) -> Path:
    """`directory` as a Path if it exists and is writable, else a LabError that says what to do."""
    directory = existing_dir(
        directory, "pass an existing folder (`python -m iolab locations` lists candidates)"
    )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise LabError(
            f"the directory {directory} is not writable by you; pass one you can write to"
        )
    return directory


@contextlib.contextmanager
def run_directory(directory: Path | str, name: str) -> Iterator[Path]:
    """A fresh directory iolab-<name>-XXXXXXXX inside `directory`, removed with its contents after.

    A benchmark writes only there, so cleaning up can never touch anything else in
    `directory`, and the finally clause removes it after an error, Ctrl-C or SIGTERM as well.
    """
    with fresh_run_dir(existing_directory(directory), f"iolab-{name}-") as run_dir:
        with sigterm_as_interrupt():
            yield run_dir


def _write_all(fd: int, data: memoryview) -> None:
    """Write all of `data`: a write(2) to a regular file may take less than it was given."""
    while data:
        data = data[os.write(fd, data) :]


def _write_files(paths: list[Path], pool: memoryview, file_bytes: int) -> float:
    """Create each file, write it in BLOCK_BYTES blocks, fsync and close it; seconds taken."""
    start = time.perf_counter()
    for index, path in enumerate(paths):
        offset = index % DISTINCT_OFFSETS
        content = pool[offset : offset + file_bytes]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            for block in range(0, file_bytes, BLOCK_BYTES):
                _write_all(fd, content[block : block + BLOCK_BYTES])
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - start


def _read_files(paths: list[Path], expected_bytes: int) -> float:
    """Open each file, read it to its end in BLOCK_BYTES blocks and close it; seconds taken."""
    buffer = bytearray(BLOCK_BYTES)
    total = 0
    start = time.perf_counter()
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            while count := os.readv(fd, [buffer]):
                total += count
        finally:
            os.close(fd)
    seconds = time.perf_counter() - start
    if total != expected_bytes:
        raise LabError(
            f"read back {total} bytes instead of the {expected_bytes} written; "
            "make sure nothing else changes the directory during the sweep"
        )
    return seconds


class _Point(Protocol):
    """One point of a sweep: a row of `plan`, as DataFrame.itertuples gives it."""

    @property
    def file_size(self) -> str: ...  # its label, e.g. "4KiB"
    @property
    def file_bytes(self) -> int: ...
    @property
    def files(self) -> int: ...
    @property
    def point_bytes(self) -> int: ...


def _row(
    point: _Point, direction: str, repeat: int, seconds: float, resident_pct: float | None
) -> dict:
    """One measurement with its rates in every unit the lesson compares."""
    bytes_per_s = point.point_bytes / seconds
    return {
        "file_size": point.file_size,
        "file_bytes": point.file_bytes,
        "files": point.files,
        "point_bytes": point.point_bytes,
        "direction": direction,
        "repeat": repeat,
        "seconds_s": seconds,
        "files_per_s": point.files / seconds,
        "bytes_per_s": bytes_per_s,
        "MiB_per_s": bytes_per_s / MIB,
        "GB_per_s": bytes_per_s / 1e9,
        "Gbit_per_s": bytes_per_s * 8 / 1e9,
        "resident_before_pct": resident_pct,
    }


def _measure_point(run_dir: Path, point: _Point, repeat: int) -> list[dict]:
    """Write the point's files, evict them, read them cold, and delete them whatever happens."""
    paths = [run_dir / f"{point.file_size}.{index:05d}" for index in range(point.files)]
    pool = memoryview(os.urandom(point.file_bytes + DISTINCT_OFFSETS))
    try:
        write_s = _write_files(paths, pool, point.file_bytes)
        resident_pct = evict(run_dir).after.resident_pct
        read_s = _read_files(paths, point.point_bytes)
    finally:
        for path in paths:
            path.unlink(missing_ok=True)
    return [
        _row(point, "write", repeat, write_s, None),
        _row(point, "read", repeat, read_s, resident_pct),
    ]


def run_sweep(
    directory: Path | str, plan: pd.DataFrame, repeats: int = 3, progress: bool | None = None
) -> pd.DataFrame:
    """Measure every point of `plan` in `directory`, `repeats` times; one row per measurement.

    Rows hold size, direction ("write" with fsync per file, "read" after eviction), repeat
    (from 1), seconds, files/s and the throughput in bytes/s, MiB/s, GB/s and Gbit/s, the
    residency before a read, and the location and its file-system type. Free space and
    inodes are checked before every point. The machine context is in `.attrs["context"]`.
    A progress bar is shown when `progress` is True, or when it is None and stderr is a
    terminal.
    """
    if repeats < 1:
        raise LabError(f"repeats must be at least 1 (got {repeats}); pass --repeats 1 or more")
    repeats = allowed_repeats(repeats)
    points = list(plan.itertuples(index=False))
    show = sys.stderr.isatty() if progress is None else progress
    rows = []
    with (
        heavy_turn("sweep"),
        run_directory(directory, "sweep") as run_dir,
        tqdm(total=repeats * len(points), desc="sweep", disable=not show, leave=False) as bar,
    ):
        for repeat in range(1, repeats + 1):
            for point in points:
                bar.set_postfix_str(f"{point.files} x {point.file_size}, repeat {repeat}")
                check_capacity(run_dir, point.point_bytes, point.files)
                rows += _measure_point(run_dir, point, repeat)
                bar.update()
    frame = pd.DataFrame(rows)
    frame.insert(0, "location", public_text(Path(directory).resolve()))
    frame.insert(1, "fs_type", mount_for(directory).fs_type)
    frame.attrs["context"] = {**machine_context(directory, tools=()), "write_flush": WRITE_FLUSH}
    return frame


def summarize_sweep(df: pd.DataFrame) -> pd.DataFrame:
    """Median and spread per location, size and direction, in size order, write before read.

    The highest residency before any read repeat is kept: a read is cold only if it is
    near 0, and one warm repeat would hide in the median.
    """
    return (
        df.groupby(SUMMARY_KEYS, sort=False)
        .agg(
            repeats=("repeat", "count"),
            files_per_s_median=("files_per_s", "median"),
            MiB_per_s_median=("MiB_per_s", "median"),
            GB_per_s_median=("GB_per_s", "median"),
            GB_per_s_min=("GB_per_s", "min"),
            GB_per_s_max=("GB_per_s", "max"),
            Gbit_per_s_median=("Gbit_per_s", "median"),
            resident_before_max_pct=("resident_before_pct", "max"),
        )
        .reset_index()
    )


def plan_text(points: pd.DataFrame, directory: Path | str, repeats: int) -> str:
    """What a sweep would do and how much room it needs, as printed by --dry-run."""
    st = os.statvfs(directory)
    per_repeat = int(points["point_bytes"].sum())
    inodes = f", {st.f_favail} inodes" if st.f_files else ""
    return "\n".join(
        [
            f"sweep of {len(points)} file sizes x {repeats} repeats in {public_text(directory)} "
            f"({mount_for(directory).fs_type}): write ({WRITE_FLUSH}), evict, read cold, delete",
            "",
            to_markdown(points),
            "",
            f"on disk at a time: at most {points['point_bytes'].max() / MIB:.0f} MiB in "
            f"{points['files'].max()} files (one point; each is deleted before the next)",
            f"written and read per repeat: {per_repeat / MIB:.0f} MiB in {points['files'].sum()} "
            f"files; whole sweep: {repeats * per_repeat / GIB:.1f} GiB each way",
            f"free now: {st.f_bavail * st.f_frsize / 1e9:.1f} GB{inodes}",
            "dry run: nothing was written",
        ]
    )
