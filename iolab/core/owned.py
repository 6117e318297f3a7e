"""Proof that a folder is the lab's, for this user, and deletes that re-resolve nothing.

A login node is shared: any other user can create, link or swap names in /tmp, /dev/shm and
a scratch file system while the lab runs, and the user's own tools copy folders (`cp -r`,
`rsync`, a restore from backup). Two rules follow, and every remover in the lab keeps them:

* **A marker proves "the lab made this very folder".** A marker file records the identity
  (inode, device, file-system id) of the folder it was written into. A copy or a restore is a
  new folder with a new inode, so its copied marker proves nothing; a marker that is a link,
  or is not the user's, is ignored; a folder that is not the user's is never entered.
* **Check and delete through one open handle.** A folder is opened once without following
  links (O_NOFOLLOW | O_DIRECTORY), checked with fstat, and everything in it is deleted
  relative to that handle (dir_fd). A name swapped for a link after the check changes
  nothing: the handle still points at the folder that was checked.

This module uses only the standard library, so `make clean` works without the .venv.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from pathlib import Path
from typing import Callable, Iterator

from iolab.core.errors import LabError, interrupts_held

#: How a folder is opened for a check or a delete: never through a link, never a file.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Folders the lab makes are the user's alone; sharing (a class's read-only copy) is explicit.
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
#: A marker is a line of text and one identity line; anything longer is not one of ours.
MARKER_MAX_BYTES = 4096
IDENTITY_PREFIX = "identity:"
#: Test hook (tests/test_two_users.py): a folder where a remover announces each check
#: (`paused-<name>`) and waits for `resume-<name>` before it deletes, when `pause-<name>` is
#: there. It makes the race between a check and a delete certain instead of lucky.
PAUSE_ENV = "IOLAB_TEST_PAUSE_DIR"
PAUSE_LIMIT_SECONDS = 60.0


class NotOurs(Exception):
    """A folder that exists but is not provably this user's lab folder."""


# --------------------------------------------------------------------------- identity markers


def _identity(fd: int) -> dict[str, int]:
    """What names this very folder: inode and device, and the file system's id, which stays
    the same across a remount of a network file system where the device number may not."""
    st = os.fstat(fd)
    fsid = getattr(os.fstatvfs(fd), "f_fsid", 0)
    return {"ino": st.st_ino, "dev": st.st_dev, "fsid": fsid, "uid": st.st_uid}


def _identity_line(fd: int) -> str:
    return IDENTITY_PREFIX + " " + " ".join(f"{k}={v}" for k, v in _identity(fd).items()) + "\n"


def _parse_identity(text: str) -> dict[str, int] | None:
    for line in text.splitlines():
        if line.startswith(IDENTITY_PREFIX):
            try:
                return {key: int(value) for key, value in
                        (item.split("=", 1) for item in line[len(IDENTITY_PREFIX):].split())}
            except ValueError:
                return None
    return None


def _same_folder(recorded: dict[str, int], actual: dict[str, int]) -> bool:
    """Whether a marker's record names the folder it lies in (a copy has another inode)."""
    if recorded.get("ino") != actual["ino"] or recorded.get("uid") != actual["uid"]:
        return False
    same_fsid = actual["fsid"] != 0 and recorded.get("fsid") == actual["fsid"]
    return recorded.get("dev") == actual["dev"] or same_fsid


def open_dir(path: Path | str, dir_fd: int | None = None) -> int:
    """An open handle on the folder `path` (relative to `dir_fd` if given), never a link."""
    return os.open(path, DIR_FLAGS, dir_fd=dir_fd)


def is_own_dir(fd: int) -> bool:
    """Whether an open handle is a folder of the running user."""
    st = os.fstat(fd)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()


def fd_has_marker(fd: int, name: str) -> bool:
    """Whether the open folder `fd` holds marker `name` written into this very folder by this
    user: a regular file (not a link, not a FIFO), the user's, recording the folder's identity."""
    try:
        if not is_own_dir(fd):
            return False
        marker = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=fd)
    except OSError:
        return False
    try:
        st = os.fstat(marker)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            return False
        text = os.read(marker, MARKER_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    finally:
        os.close(marker)
    recorded = _parse_identity(text)
    return recorded is not None and _same_folder(recorded, _identity(fd))


def has_marker(directory: Path | str, name: str) -> bool:
    """Whether `directory` is a real folder of this user carrying marker `name` written into
    this very folder (not copied, not a link, not someone else's)."""
    try:
        fd = open_dir(directory)
    except OSError:
        return False
    try:
        return fd_has_marker(fd, name)
    finally:
        os.close(fd)


def write_marker_at(fd: int, name: str, text: str) -> None:
    """Write marker `name` into the open folder `fd`, bound to its identity, mode 0600.

    An old marker is replaced, never written through: the new one is written under a name of
    its own, created exclusively (a link planted there cannot send the write elsewhere), and
    renamed over the marker's name, so a run cut short at any moment leaves the old marker or
    the new one, never an empty marker that the next run would not recognise as the lab's.
    """
    if not is_own_dir(fd):
        raise LabError("refusing to mark a folder that is not yours as the lab's; choose a "
                       "folder of your own (--data, or IOLAB_WORKDIR)")
    partial = f"{name}.{os.getpid()}.partial"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(partial, dir_fd=fd)
    marker = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     PRIVATE_FILE_MODE, dir_fd=fd)
    try:
        try:
            os.fchmod(marker, PRIVATE_FILE_MODE)
            os.write(marker, (text.rstrip("\n") + "\n" + _identity_line(fd)).encode())
        finally:
            os.close(marker)
        os.rename(partial, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:  # an error or an interrupt: no partial marker stays behind
        with contextlib.suppress(OSError):
            os.unlink(partial, dir_fd=fd)
        raise


def write_marker(directory: Path | str, name: str, text: str) -> None:
    """Write marker `name` into `directory` (not through a link), bound to its identity."""
    fd = open_dir(directory)
    try:
        write_marker_at(fd, name, text)
    finally:
        os.close(fd)


def make_private_dir(path: Path, marker: str | None, text: str = "") -> None:
    """Create the folder `path` (its parent must exist) as 0700, umask or not, and mark it.

    Raises FileExistsError when the name is taken (by anyone: it is then not ours to mark).
    The directory and its marker are made without an interrupt in between, so no folder the
    lab made is ever left unmarked and thus never cleaned.
    """
    path = Path(path)
    parent = open_dir(path.parent.resolve())  # the parent may be a link ($SCRATCH), not path
    try:
        with interrupts_held():
            os.mkdir(path.name, PRIVATE_DIR_MODE, dir_fd=parent)
            fd = open_dir(path.name, dir_fd=parent)
            try:
                os.fchmod(fd, PRIVATE_DIR_MODE)
                if marker is not None:
                    write_marker_at(fd, marker, text)
            except OSError:
                # No marker (a full disk): the empty folder goes again, or `clean` would
                # leave it alone for good as the user's.
                with contextlib.suppress(OSError):
                    os.rmdir(path.name, dir_fd=parent)
                raise
            finally:
                os.close(fd)
    finally:
        os.close(parent)


# --------------------------------------------------------------------------- deletes through a handle


def _pause_for_test(name: str) -> None:
    """The test hook of PAUSE_ENV: announce the check of `name`, wait to be told to go on."""
    folder = os.environ.get(PAUSE_ENV)
    if not folder or not os.path.exists(os.path.join(folder, f"pause-{name}")):
        return
    Path(folder, f"paused-{name}").write_text(str(os.getpid()))
    deadline = time.monotonic() + PAUSE_LIMIT_SECONDS
    while not os.path.exists(os.path.join(folder, f"resume-{name}")):
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)


#: In-process test hook: called with the name of each folder after its check, before its delete.
before_delete: Callable[[str], None] | None = None


def _delete_entry(fd: int, name: str, device: int, left: list[str], prefix: str) -> None:
    """Delete the entry `name` of the open folder `fd` if it is the user's.

    A sub-folder is opened without following links, checked to be the user's and on the same
    device (another device is a mount point: deleting through it would delete what is
    exported there), and emptied through its own handle. What is not the user's is named in
    `left` and stays.
    """
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return  # deleted meanwhile (a second `clean`)
    if st.st_uid != os.getuid():
        left.append(prefix + name)
        return
    if not stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=fd)
        return
    try:
        child = open_dir(name, dir_fd=fd)
    except FileNotFoundError:
        return
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link or a file meanwhile
            return
        raise
    try:
        child_st = os.fstat(child)
        if child_st.st_uid != os.getuid() or child_st.st_dev != device:
            left.append(prefix + name)
            return
        _empty_folder(child, device, left, prefix + name + "/")
    finally:
        os.close(child)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(name, dir_fd=fd)


def _empty_folder(fd: int, device: int, left: list[str], prefix: str = "",
                  keep: tuple[str, ...] = ()) -> None:
    """Delete what the user owns in the open folder `fd`, all relative to the handle."""
    with contextlib.suppress(OSError):
        os.fchmod(fd, PRIVATE_DIR_MODE)  # a folder of ours made read-only must not stop us
    with os.scandir(fd) as entries:
        names = [entry.name for entry in entries if entry.name not in keep]
    for name in names:
        _delete_entry(fd, name, device, left, prefix)


def _delete_checked(parent: int, name: str, fd: int, markers: tuple[str, ...],
                    path: Path) -> None:
    """Empty the checked folder `fd`, then its markers, then remove its name from `parent`.

    The markers go last, so a delete cut short leaves the folder still marked and the next
    `clean` finishes it instead of leaving it alone as the user's. Raises a LabError naming
    what could not be deleted (another user's file, a mount point); nothing else is touched.
    """
    if before_delete is not None:
        before_delete(name)
    _pause_for_test(name)
    left: list[str] = []
    try:
        _empty_folder(fd, os.fstat(fd).st_dev, left, keep=markers)
        if left:
            raise LabError(f"left {path / left[0]} in place: it is another user's, or a file "
                           "system is mounted there; ask its owner, or unmount it")
        with interrupts_held():  # an unmarked, empty folder would be left alone for good
            for marker in markers:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(marker, dir_fd=fd)
            try:
                os.rmdir(name, dir_fd=parent)
            except FileNotFoundError:
                pass  # another `clean` was quicker
            except OSError:
                # The name may have been swapped after the check (for a link, a file, another
                # user's entry in a sticky folder): the folder that was checked is empty now,
                # and what the name leads to now is not ours to touch.
                if _still_named(parent, name, fd):
                    raise
    except OSError as err:
        raise LabError(f"cannot delete {path} ({err.strerror or err}); nothing outside it was "
                       "touched") from None


def _still_named(parent: int, name: str, fd: int) -> bool:
    """Whether `name` in `parent` still leads to the folder open as `fd` (not swapped)."""
    try:
        now = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return False
    then = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)


@contextlib.contextmanager
def opened_parent(path: Path) -> Iterator[int]:
    """A handle on the folder holding `path`, closed after the block.

    The parent is resolved once, here: it may be a link of the user's own ($SCRATCH often
    is); what must never be followed is the last part, the folder to check and delete.
    """
    fd = open_dir(Path(path).parent.resolve())
    try:
        yield fd
    finally:
        os.close(fd)


def remove_marked(parent: int, name: str, markers: tuple[str, ...], path: Path) -> bool:
    """Delete the folder `name` of the open folder `parent` if it carries one of `markers`,
    written into it by this user; True if it was deleted, False if it is not provably ours.

    `path` is only for messages. The folder is opened once, checked through that handle and
    emptied through it, so a name swapped for a link after the check changes nothing.
    """
    try:
        fd = open_dir(name, dir_fd=parent)
    except OSError:
        return False  # gone, a link, a file, or not ours to enter
    try:
        if not any(fd_has_marker(fd, marker) for marker in markers):
            return False
        _delete_checked(parent, name, fd, markers, path)
        return True
    finally:
        os.close(fd)


def remove_owned(path: Path | str) -> None:
    """Delete the folder `path` with everything in it, if it is the user's (no marker needed:
    for a folder the caller just made, e.g. a run's scratch folder); gone already is fine."""
    path = Path(path)
    if not os.path.lexists(path.parent):
        return  # gone with its folder already (a `clean` while the run was still going)
    with opened_parent(path) as parent:
        try:
            fd = open_dir(path.name, dir_fd=parent)
        except FileNotFoundError:
            return
        except OSError as err:
            raise LabError(f"refusing to delete {path}: it is not a folder ({err.strerror})") \
                from None
        try:
            if not is_own_dir(fd):
                raise LabError(f"refusing to delete {path}: it belongs to another user")
            _delete_checked(parent, path.name, fd, (), path)
        finally:
            os.close(fd)


def discard_owned(path: Path | str) -> bool:
    """remove_owned for the cleanup after a run (a `finally`): never raises; True when
    nothing is left at `path`, so the caller can warn about what could not be removed."""
    with contextlib.suppress(LabError, OSError):
        remove_owned(path)
    return not os.path.lexists(path)
