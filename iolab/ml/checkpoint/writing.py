"""Atomic, hashed writes: a file appears under its name only when complete, hashed on the way.

A checkpoint is written under a hidden temporary name and renamed when complete, and its
sha256 is taken while writing (no second read); a `NAME.sha256` sidecar in sha256sum format,
written after the rename, marks it complete. With fsync the data, the sidecar and both
directory entries are on stable storage before the call returns.
"""

from __future__ import annotations

import errno
import hashlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from iolab.core.errors import LabError

SIDECAR_SUFFIX = ".sha256"

#: fsync on a directory is refused by some file systems (FUSE without the call, some NFS
#: clients); the data file's fsync has then already run, so only this one step is skipped.
_DIR_FSYNC_UNSUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.ENOSYS, errno.EBADF, errno.EIO}


@dataclass(frozen=True)
class Saved:
    """A complete checkpoint: where, how many bytes, their sha256, and how long the save took."""

    path: Path
    size_bytes: int
    sha256: str
    seconds: float


class HashingWriter:
    """Hashes every byte on its way into the file, so verifying needs no second read."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self.sha256 = hashlib.sha256()
        self.size_bytes = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data)
        self.sha256.update(view)
        self.size_bytes += view.nbytes
        return self._handle.write(view)

    def flush(self) -> None:
        self._handle.flush()


def sidecar(path: Path) -> Path:
    """The sha256sum-format file that marks `path` complete."""
    return path.with_name(path.name + SIDECAR_SUFFIX)


def fsync_dir(directory: Path) -> None:
    """Make a rename durable: the new name lives in the directory, which has to reach the disk
    too."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in _DIR_FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[HashingWriter], object], fsync: bool) -> Saved:
    """Write under a hidden temporary name and rename it to `path` only when complete.

    A crash or an exception leaves either no file or the complete one under `path`, never a
    partial file there; the temporary file is removed on any exception, Ctrl-C included.
    """
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    start = time.perf_counter()
    try:
        with open(temporary, "wb") as handle:
            writer = HashingWriter(handle)
            write(writer)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException as err:
        temporary.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise LabError(
                f"writing {path} failed ({err.strerror or err}); check that the "
                "directory is writable and has room, or choose another target"
            ) from None
        raise
    return Saved(path, writer.size_bytes, writer.sha256.hexdigest(), time.perf_counter() - start)


def write_sidecar(path: Path, digest: str, fsync: bool) -> None:
    """Mark `path` complete; with fsync, also make both renames durable."""
    text = f"{digest}  {path.name}\n".encode()
    atomic_write(sidecar(path), lambda writer: writer.write(text), fsync)
    if fsync:
        fsync_dir(path.parent)


def write_complete(path: Path, write: Callable[[HashingWriter], None], fsync: bool) -> Saved:
    """atomic_write, then the sidecar: the record's seconds cover both, as a save call does."""
    saved = atomic_write(path, write, fsync)
    start = time.perf_counter()
    write_sidecar(saved.path, saved.sha256, fsync)
    return Saved(
        saved.path, saved.size_bytes, saved.sha256, saved.seconds + time.perf_counter() - start
    )
