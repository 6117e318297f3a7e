"""What the page cache holds of a file or a tree, and how to empty it without root.

A read that the page cache serves never reaches the storage, so a "cold" timing means
something only when the record proves the data was not cached. This module measures that
(how many bytes of each file are resident, by mincore(2) on a read-only mapping, which
neither reads nor caches anything) and evicts the pages of just the files a demo reads,
which any user may do for files they can open (the lab does it only for the user's own files:
another user's pages, such as a class's shared dataset, are left cached for them):

* flush first (fsync per file): pages that are still dirty, e.g. right after the dataset was
  generated, are not dropped by the kernel, and a "cold" run would silently be warm;
* then posix_fadvise(POSIX_FADV_DONTNEED) per file: the kernel drops the clean pages.

Only file data is evicted. Directory entries and inodes stay cached, so a "cold" run still
finds its files without asking the storage; dropping those needs /proc/sys/vm/drop_caches,
which is root-only and empties the cache of the whole machine, for every user of a shared
node. The lab therefore never drops caches by default (see drop_all_caches).

Memory file systems (tmpfs, such as /dev/shm) cannot be evicted: their pages are the file.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError
from iolab.core.workspace import public_text

#: sysconf(SC_PAGE_SIZE), read through mmap so that importing this module works everywhere.
PAGE_BYTES = mmap.PAGESIZE
#: mincore looks at this much of a file per mapping, so huge files need little memory.
MINCORE_WINDOW_BYTES = 1024**3
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
EVICT_METHOD = "fadvise(DONTNEED), then fsync+fadvise where pages stayed"
#: Files per `fincore` call, far below the kernel's limit on argument length.
FINCORE_BATCH = 512
FINCORE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Residency:
    """How many bytes of the regular files at or below `path` are in the page cache.

    `path` is the resolved path in its public form (home as ~, see
    iolab.measure.context.public_text) because residencies end up in published measurement
    records. `resident_bytes` never exceeds `total_bytes`: the cached last page of a file counts
    only up to the end of the file. `skipped` counts files that vanished or could not be opened
    while looking; `hidden` those whose residency the kernel would not show (see
    residency_visible): with any of those the share is unknown.
    """

    path: str
    files: int
    total_bytes: int
    resident_bytes: int
    skipped: int = 0
    hidden: int = 0

    @property
    def resident_fraction(self) -> float | None:
        """Resident share of the bytes, 0..1; 0.0 when there are none (nothing is cached);
        None when the kernel hid some file's residency."""
        if self.hidden:
            return None
        return self.resident_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def resident_pct(self) -> float | None:
        fraction = self.resident_fraction
        return None if fraction is None else 100.0 * fraction


@dataclass(frozen=True)
class Eviction:
    """What evict() did: the method and the residency before and after."""

    path: str
    method: str
    before: Residency
    after: Residency


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library with mmap, mincore and munmap typed (Python's mmap cannot mincore)."""
    if os.name != "posix":
        raise LabError(
            "page-cache residency needs mincore(2), which this platform lacks; run the cache "
            "demos on Linux or macOS"
        )
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.mincore.restype = ctypes.c_int
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    libc.munmap.restype = ctypes.c_int
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def _os_error(call: str) -> OSError:
    """The error of the libc call that just failed (ctypes kept its errno)."""
    err = ctypes.get_errno()
    return OSError(err, f"{call}: {os.strerror(err)}")


def _resident_in_window(fd: int, offset: int, length: int) -> int:
    """Resident bytes of file bytes [offset, offset+length), the last page cut at `length`."""
    libc = _libc()
    addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise _os_error("mmap")
    try:
        pages = -(-length // PAGE_BYTES)
        vec = (ctypes.c_ubyte * pages)()
        if libc.mincore(addr, length, vec) != 0:
            raise _os_error("mincore")
    finally:
        libc.munmap(addr, length)
    resident = sum(flags & 1 for flags in vec) * PAGE_BYTES
    if vec[-1] & 1:
        resident -= pages * PAGE_BYTES - length
    return resident


def _fd_residency(fd: int, size: int) -> int:
    """Resident bytes of an open file of `size` bytes, window by window."""
    return sum(
        _resident_in_window(fd, offset, min(MINCORE_WINDOW_BYTES, size - offset))
        for offset in range(0, size, MINCORE_WINDOW_BYTES)
    )


def residency_visible(fd: int) -> bool:
    """Whether mincore tells the truth about this open file: since Linux 5.2 it reports every
    page of a file the caller neither owns nor may write as resident (a side channel closed;
    mm/mincore.c, can_do_mincore). A class's shared dataset is such a file for a learner."""
    owner = os.fstat(fd).st_uid
    return os.geteuid() in (0, owner) or os.access(f"/proc/self/fd/{fd}", os.W_OK)


def _file_residency(path: Path) -> tuple[int, int | None]:
    """(size, resident bytes or None if hidden) of one regular file; OSError if it cannot be
    opened or mapped."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        return size, _fd_residency(fd, size) if residency_visible(fd) else None
    finally:
        os.close(fd)


def _existing(path: Path | str) -> Path:
    """`path` resolved, or a LabError if it is not a file or a directory."""
    path = Path(path).resolve()
    if not path.exists():
        raise LabError(f"there is no file or directory {path}; check the path")
    if not (path.is_file() or path.is_dir()):
        raise LabError(f"{path} is neither a regular file nor a directory; pass one of those")
    return path


def _regular_files(top: Path) -> Iterator[Path]:
    """`top` if it is a file, else every regular file below it, sorted, symlinks not followed.

    Symlinks, FIFOs and devices are left out: a symlink's target is counted where it lives,
    and opening a FIFO would block. The file type comes from the directory entries, not
    from a stat per file, which matters on a network file system (one round trip each).
    """
    if not top.is_dir():
        yield top
        return
    with os.scandir(top) as listing:
        entries = sorted(listing, key=lambda entry: entry.name)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield from _regular_files(Path(entry.path))
        elif entry.is_file(follow_symlinks=False):
            yield Path(entry.path)


def residency(path: Path | str) -> Residency:
    """How much of a file, or of every regular file below a directory, is in the page cache.

    Looking does not change the answer: mapping a file and asking mincore reads no data.
    """
    top = _existing(path)
    files = total = resident = skipped = hidden = 0
    for file in _regular_files(top):
        try:
            size, cached = _file_residency(file)
        except OSError:
            skipped += 1
            continue
        files += 1
        total += size
        if cached is None:
            hidden += 1
        else:
            resident += cached
    return Residency(public_text(top), files, total, resident, skipped, hidden)


def _evict_file(path: Path) -> tuple[int, int | None, int | None]:
    """Drop one file's cached pages; returns (size, resident before, resident after), the
    residencies None for a file that is not the user's, which is left as it is.

    One open per file (on a network file system each open is a round trip): advise
    DONTNEED, and only if pages stayed (dirty pages are skipped by DONTNEED) flush them with
    fsync and advise again. A file the user neither owns nor may write (a class's shared
    dataset) gets no advice: the kernel would drop its pages for everybody who reads it, and
    hides its residency, so nobody could see that it happened (residency_visible).
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if not residency_visible(fd):
            return size, None, None
        before = _fd_residency(fd, size)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        after = _fd_residency(fd, size)
        if after:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            after = _fd_residency(fd, size)
        return size, before, after
    finally:
        os.close(fd)


def evict(path: Path | str) -> Eviction:
    """Evict a file, or every regular file below a directory, from the page cache; no root.

    Files that vanish or cannot be opened are left as they are; the `after` residency shows
    what stayed. Pages that another process has mapped, and all pages of tmpfs, stay cached.
    Files of another user are left cached and counted as `hidden` (see _evict_file): in a
    class, one learner's cold run must not make the shared dataset cold for the others.
    """
    if not hasattr(os, "posix_fadvise"):
        raise LabError(
            "this platform has no posix_fadvise, so the lab cannot evict files from the page "
            "cache; run cold measurements on Linux, or treat every run here as warm"
        )
    top = _existing(path)
    files = total = before = after = skipped = hidden = 0
    for file in _regular_files(top):
        try:
            size, cached_before, cached_after = _evict_file(file)
        except OSError:
            skipped += 1
            continue
        files += 1
        total += size
        if cached_before is None or cached_after is None:
            hidden += 1
            continue
        before += cached_before
        after += cached_after
    shown = public_text(top)
    return Eviction(
        shown,
        EVICT_METHOD,
        Residency(shown, files, total, before, skipped, hidden),
        Residency(shown, files, total, after, skipped, hidden),
    )


def drop_caches_permitted() -> bool:
    """Whether we may write /proc/sys/vm/drop_caches (normally only root); writes nothing."""
    try:
        fd = os.open(DROP_CACHES, os.O_WRONLY)
    except OSError:
        return False
    os.close(fd)
    return True


def drop_all_caches() -> None:
    """Sync, then drop the page cache of the WHOLE machine (echo 1 > drop_caches).

    This makes every user's programs on the node read from storage again, so the lab never
    does it by default and never needs it: evict() empties just the lab's files, without
    root. Use this only on a machine of your own, and only where drop_caches_permitted().
    """
    if not drop_caches_permitted():
        raise LabError(
            f"dropping the whole page cache needs write access to {DROP_CACHES} (root); use "
            "iolab.measure.cache.evict on the files instead, which needs no root"
        )
    os.sync()
    DROP_CACHES.write_text("1")


def _fincore_resident(fincore: str, files: list[Path]) -> int | None:
    """Resident bytes `fincore` reports for `files`, None if it fails on any of them."""
    try:
        proc = subprocess.run(
            [fincore, "--bytes", "--noheadings", "--output", "RES", *map(str, files)],
            capture_output=True,
            text=True,
            timeout=FINCORE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    counts = proc.stdout.split()
    if proc.returncode != 0 or len(counts) != len(files) or not all(c.isdigit() for c in counts):
        return None
    return sum(map(int, counts))


def fincore_bytes(path: Path | str) -> int | None:
    """Resident bytes by util-linux `fincore`, to cross-check residency(); None without it.

    fincore counts whole pages, so it may exceed residency() by up to one page per file.
    None also when fincore fails on any file (e.g. one vanished): a partial sum would mislead.
    """
    fincore = shutil.which("fincore")
    if fincore is None:
        return None
    files = list(_regular_files(_existing(path)))
    total = 0
    for start in range(0, len(files), FINCORE_BATCH):
        resident = _fincore_resident(fincore, files[start : start + FINCORE_BATCH])
        if resident is None:
            return None
        total += resident
    return total


def residency_frame(residencies: list[Residency]) -> pd.DataFrame:
    """One row per residency, units in the column names, for tables in notebooks."""
    columns = ["path", "files", "total_bytes", "resident_bytes", "resident_pct"]
    return pd.DataFrame(
        [[r.path, r.files, r.total_bytes, r.resident_bytes, r.resident_pct] for r in residencies],
        columns=columns,
    )
