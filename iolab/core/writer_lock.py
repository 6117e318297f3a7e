"""One writer at a time: the lock file a writer of a folder holds, and build_once, which
makes two runs at once safe (the second reuses what the first made, or waits its turn).

The lock is a file created exclusively (O_EXCL works on NFS and Lustre, unlike flock on some
mounts) holding the writer's PID, host and start time, so a user told "another run is
writing" can judge whether that run still exists.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from iolab.core.errors import LabError, forget_undo, interrupts_held, undo_if_cut_off
from iolab.core.lab_dirs import ensure_writable_dir
from iolab.core.safe_input import file_kind, open_regular

#: The lock file's name in the folder it guards.
LOCK_NAME = ".iolab-lock"
#: How old an empty or unreadable lock file must be to count as left by a crash: a live
#: writer fills in its holder line microseconds after creating the file; ten seconds also
#: cover clocks that differ a little between the hosts sharing a network file system.
STALE_EMPTY_LOCK_SECONDS = 10
#: The lock file is the user's alone: nobody else needs to read who holds it.
LOCK_MODE = 0o600
#: A holder line is under a hundred bytes; a longer lock file is not one of the lab's.
HOLDER_MAX_BYTES = 4096
T = TypeVar("T")


def _holder_line() -> str:
    """Who holds a lock: process id, host and start time, one line."""
    return f"{os.getpid()} {socket.gethostname()} {time.strftime('%Y-%m-%d %H:%M:%S')}\n"


def _lock_text(path: Path) -> str | None:
    """A lock file's text, None when it is gone, unreadable, not a regular file or not text."""
    try:
        with open_regular(path, follow_links=False) as handle:
            return handle.read(HOLDER_MAX_BYTES).decode()
    except (OSError, ValueError):
        return None


def _read_holder(path: Path) -> tuple[int, str, str] | None:
    """(pid, host, since) from a lock file, None when it is gone, empty or unreadable."""
    try:
        pid, host, since = (_lock_text(path) or "").split(" ", 2)
        return int(pid), host, since.strip()
    except ValueError:
        return None


def _is_stale(holder: tuple[int, str, str] | None, seen: os.stat_result) -> bool:
    """Whether the run that holds a lock is known to be gone: killed on this very host, or
    it left the file empty or unreadable (a crash between creating and writing it) for
    longer than STALE_EMPTY_LOCK_SECONDS."""
    if holder is None:
        return time.time() - seen.st_mtime > STALE_EMPTY_LOCK_SECONDS
    if holder[1] != socket.gethostname() or holder[0] == os.getpid():
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
    return (
        f"another run is writing {directory} {who}; wait for it to finish and try again "
        f"(if that run no longer exists, delete {path})"
    )


def _take_over_if_stale(directory: Path, path: Path, last: bool) -> None:
    """Remove an existing lock whose run is gone, or raise the LabError that names its holder.

    Only a regular file is a lock of the lab's (a link or FIFO under its name is refused, not
    removed), and it is removed only if it is still the very file judged stale: another run
    may have taken the lock over in the meantime.
    """
    try:
        seen = path.lstat()
    except FileNotFoundError:
        return  # released meanwhile: try again
    if not stat.S_ISREG(seen.st_mode):
        raise LabError(
            f"{path} is {file_kind(seen.st_mode)}, not a lock file of the lab, so "
            "the lab leaves it alone; remove it yourself and try again"
        )
    holder = _read_holder(path)
    if last or not _is_stale(holder, seen):
        raise LabError(_held_message(directory, path, holder))
    with contextlib.suppress(FileNotFoundError):
        if path.lstat().st_ino == seen.st_ino:
            path.unlink()


def _write_holder(directory: Path, path: Path, fd: int, line: str) -> None:
    """Write the holder line into the new lock file, or remove the file and say why in one
    sentence: an empty lock left by a full disk (ENOSPC, EDQUOT) or a failing one (EIO)
    would stop every later run. On a network file system close() reports such errors too."""
    data = line.encode()
    try:
        try:
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
    except OSError as err:
        with contextlib.suppress(OSError):  # if even this fails, the empty lock goes stale
            path.unlink()
        raise LabError(
            f"cannot write the lock file {path} ({err.strerror or err}): the file "
            f"system of {directory} is full, over quota or failing; free some space "
            "(`df -h`, and your quota) and try again"
        ) from None


def _claim(directory: Path, path: Path) -> str:
    """Create the lock file exclusively (O_EXCL works on NFS and Lustre, unlike flock on some
    mounts), taking over a lock whose run is gone; returns our holder line.

    O_NOFOLLOW: a link planted under the lock's name is never written through.
    """
    line = _holder_line()
    for attempt in range(2):
        try:
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, LOCK_MODE
            )
        except FileExistsError:
            fd = None
        except OSError as err:
            raise LabError(
                f"cannot write in {directory} ({err.strerror}); choose a writable location"
            ) from None
        if fd is None:
            _take_over_if_stale(directory, path, last=attempt == 1)
            continue
        _write_holder(directory, path, fd, line)
        return line
    raise LabError(_held_message(directory, path, _read_holder(path)))


@contextlib.contextmanager
def writer_lock(directory: Path) -> Iterator[None]:
    """Be the only writer of `directory` for the block, or raise a LabError naming the other.

    The lock is a file holding the writer's PID, host and start time; it is removed when the
    block ends, however it ends. A lock left by a writer killed with SIGKILL on this host, or
    left empty by a crash, is taken over; one from another host names that host, so the user
    can judge.
    """
    directory = Path(directory)
    path = directory / LOCK_NAME
    line = None
    token = None
    try:
        with interrupts_held():  # a lock file without its holder line would block every rerun
            line = _claim(directory, path)
            # an interrupt handled in contextlib's own steps skips this generator's finally
            token = undo_if_cut_off(functools.partial(_release, path, line))
        yield
    finally:
        # A Ctrl-C or SIGTERM may land in the very bytecodes that release the lock (seen when
        # a writer was stopped just as it finished): held back there, and if one slips in
        # before the hold begins, the release is done again before the interrupt goes on.
        try:
            with interrupts_held():
                _release(path, line)
        except BaseException:
            _release(path, line)
            raise
        finally:
            if token is not None:
                forget_undo(token)


def _release(path: Path, line: str | None) -> None:
    """Remove the lock file if it still holds our line (never another writer's)."""
    with contextlib.suppress(OSError):
        if line is not None and _lock_text(path) == line:
            path.unlink()


def build_once(
    directory: Path,
    reuse: Callable[[Path], T | None],
    build: Callable[[Path], T],
    *,
    create: bool = True,
) -> tuple[T, bool]:
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
