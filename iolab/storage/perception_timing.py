"""Where and how a perception test is timed: a fresh run directory, the command cold and warm.

Every test of iolab.storage.perception does the same around its own command: it checks the
space, works in a directory of its own that is removed afterwards whatever happens, times the
command warm and then cold (its files evicted before every repeat) and counts the files it
touched. That shared machinery lives here, apart from what each test builds and runs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from iolab.core.capacity import check_capacity
from iolab.core.errors import LabError
from iolab.core.lab_dirs import fresh_run_dir
from iolab.core.user_paths import existing_dir
from iolab.measure.cache import EVICT_METHOD, Eviction, Residency, evict
from iolab.measure.context import fs_kind, mount_for
from iolab.measure.timing import Measurement, time_command

#: Prefix of every per-run directory, so a leftover one is easy to recognise.
RUN_PREFIX = "iolab-perception-"
#: Space a small file takes at least (one 4 KiB block on most file systems).
BLOCK_BYTES = 4096


def writable_dir(directory: Path | str) -> Path:
    """`directory` resolved, if it is a directory the user may write in; else a LabError."""
    path = existing_dir(
        directory,
        "pass an existing folder, e.g. a location's working "
        "directory from `python -m iolab locations`",
    ).resolve()
    if not os.access(path, os.W_OK | os.X_OK):
        raise LabError(f"the directory {directory} is not writable by you; pass one you own")
    return path


@contextlib.contextmanager
def run_dir(
    directory: Path | str, test: str, bytes_needed: int, inodes_needed: int
) -> Iterator[Path]:
    """A fresh directory for one test inside `directory`, removed afterwards whatever happens.

    The space and inode check comes first, so a full scratch file system is refused before
    anything is written.
    """
    parent = writable_dir(directory)
    check_capacity(parent, bytes_needed, inodes_needed)
    with fresh_run_dir(parent, f"{RUN_PREFIX}{test}-") as path:
        yield path


def on_disk_bytes(files: int, file_bytes: int) -> int:
    """Bytes `files` files of `file_bytes` each occupy, every file rounded up to whole blocks."""
    return files * -(-file_bytes // BLOCK_BYTES) * BLOCK_BYTES


def _evict_all(paths: Sequence[Path]) -> Eviction:
    """Evict several files or trees and report them as one: the sums before and after."""
    evictions = [evict(path) for path in paths]

    def total(which: str) -> Residency:
        parts = [getattr(e, which) for e in evictions]
        return Residency(
            " + ".join(p.path for p in parts),
            sum(p.files for p in parts),
            sum(p.total_bytes for p in parts),
            sum(p.resident_bytes for p in parts),
            sum(p.skipped for p in parts),
        )

    before = total("before")
    return Eviction(before.path, EVICT_METHOD, before, total("after"))


def memory_note(directory: Path) -> str:
    """The caveat for a memory file system, where a cold run cannot be cold; else ''."""
    fs_type = mount_for(directory).fs_type
    if fs_kind(fs_type) == "memory":
        return f"{fs_type} keeps files in RAM and cannot evict them: cold equals warm here"
    return ""


def cold_and_warm(
    test: str,
    cmd: list[str],
    *,
    repeats: int,
    location: Path,
    cold_paths: Sequence[Path],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    reset: Callable[[], None] | None = None,
) -> tuple[Measurement, Measurement]:
    """Time `cmd` warm (after one untimed run), then cold (`cold_paths` evicted before each).

    The warm series comes first, so its untimed run has written whatever a program writes
    on its first run before any cold repeat. `reset` restores the starting state, untimed,
    before every run (the untar test empties its destination).
    """

    def before_cold() -> Eviction:
        if reset is not None:
            reset()
        return _evict_all(cold_paths)

    if reset is not None:
        reset()
    warm = time_command(
        cmd,
        repeats=repeats,
        warmup=1,
        label=f"{test} warm",
        cwd=cwd,
        env=env,
        location=location,
        cache_state="warm",
        before_each=reset,
    )
    cold = time_command(
        cmd,
        repeats=repeats,
        warmup=0,
        label=f"{test} cold",
        cwd=cwd,
        env=env,
        location=location,
        cache_state="cold",
        before_each=before_cold,
    )
    return cold, warm


def file_count(top: Path) -> int:
    """Regular files at or below `top`."""
    return sum(len(files) for _, _, files in os.walk(top))
