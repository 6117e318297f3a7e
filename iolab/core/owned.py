"""Proof that a folder is the lab's, for this user, and deletes that re-resolve nothing.

A login node is shared: any other user can create, link or swap names in /tmp, /dev/shm and
a scratch file system while the lab runs, and the user's own tools copy folders (`cp -r`,
`rsync`, a restore from backup). Three rules follow, and every remover in the lab keeps them:

* **A marker proves "the lab made this very folder".** A marker file records the identity
  (inode, device, file-system id) of the folder it was written into, and a random secret. The
  secret names an entry in the user's private registry (`registry_dir`, under
  $XDG_STATE_HOME) that seals the marker: the folder's inode, the marker's own inode, and the
  marker's birth time where the file system keeps one (statx), else its ctime. Inode numbers
  come back after a delete and a restore (`tar xpf`, `cp -a` on ext4 reuse them), but the
  kernel sets birth time and ctime when a file is created, and no restore can set them
  back: a restored or copied marker never matches its seal. A marker that is a link, or is
  not the user's, is ignored; a folder that is not the user's is never entered. A lab folder
  stays the lab's when files are added to it or it is renamed or moved within its file system
  (the marker is untouched); with ctime as the seal (no birth time, e.g. on NFS),
  `chmod`/`touch` of the marker itself also unseals it, and the lab then leaves it alone.
  A marker of the previous version (no secret) is never trusted: a restore forges it.
* **Check and delete through one open handle.** A folder is opened once without following
  links (O_NOFOLLOW | O_DIRECTORY), checked with fstat, and everything in it is deleted
  relative to that handle (dir_fd). A name swapped for a link after the check changes
  nothing: the handle still points at the folder that was checked.
* **Never delete through a mount point.** Each folder's mount id is compared with its
  parent's before anything in it is changed (`same_mount`): a bind mount of the same file
  system has the same device number but its own mount id, and deleting through it would
  delete what is mounted there.

This module uses only the standard library, so `make clean` works without the .venv.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from iolab.core.errors import LabError, interrupts_held

#: How a folder is opened for a check or a delete: never through a link, never a file.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Folders the lab makes are the user's alone; sharing (a class's read-only copy) is explicit.
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
#: A marker is a line of text and one identity line; anything longer is not one of ours.
MARKER_MAX_BYTES = 4096
IDENTITY_PREFIX = "identity:"
#: Every marker's name starts so; removing such a file also forgets its registry entry.
MARKER_PREFIX = ".iolab-"
#: The registry of markers: one small file per marker, named by its secret, under
#: $XDG_STATE_HOME (else ~/.local/state), outside anything `clean` removes.
STATE_ENV = "XDG_STATE_HOME"
REGISTRY_PARTS = ("iolab", "markers")
SECRET_BITS = 128
#: Test hook (tests/test_two_users.py): a folder where a remover announces each check
#: (`paused-<name>`) and waits for `resume-<name>` before it deletes, when `pause-<name>` is
#: there. It makes the race between a check and a delete certain instead of lucky.
PAUSE_ENV = "IOLAB_TEST_PAUSE_DIR"
PAUSE_LIMIT_SECONDS = 60.0


# --------------------------------------------------------------------------- what the kernel says


class _StatxTime(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_int64), ("nsec", ctypes.c_uint32), ("reserved", ctypes.c_int32)]


class _Statx(ctypes.Structure):
    """struct statx of <linux/stat.h> (256 bytes), named up to stx_mnt_id."""

    _fields_ = [
        ("mask", ctypes.c_uint32),
        ("blksize", ctypes.c_uint32),
        ("attributes", ctypes.c_uint64),
        ("nlink", ctypes.c_uint32),
        ("uid", ctypes.c_uint32),
        ("gid", ctypes.c_uint32),
        ("mode", ctypes.c_uint16),
        ("spare0", ctypes.c_uint16),
        ("ino", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
        ("blocks", ctypes.c_uint64),
        ("attributes_mask", ctypes.c_uint64),
        ("atime", _StatxTime),
        ("btime", _StatxTime),
        ("ctime", _StatxTime),
        ("mtime", _StatxTime),
        ("rdev_major", ctypes.c_uint32),
        ("rdev_minor", ctypes.c_uint32),
        ("dev_major", ctypes.c_uint32),
        ("dev_minor", ctypes.c_uint32),
        ("mnt_id", ctypes.c_uint64),
        ("spare", ctypes.c_uint64 * 13),
    ]


_AT_EMPTY_PATH = 0x1000
STATX_BTIME = 0x800
STATX_MNT_ID = 0x1000


@functools.cache
def _statx_call() -> Callable[..., int] | None:
    """glibc's statx (2.28+), or None: os has no statx before Python 3.15."""
    try:
        call = ctypes.CDLL(None, use_errno=True).statx
    except (OSError, AttributeError):
        return None
    call.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_Statx),
    ]
    call.restype = ctypes.c_int
    return call


def statx_field(fd: int, want: int) -> int | None:
    """The statx field `want` (STATX_BTIME: birth time in ns; STATX_MNT_ID: mount id) of the
    open file `fd`, or None where the kernel, the C library or the file system lacks it."""
    call = _statx_call()
    found = _Statx()
    if call is None or call(fd, b"", _AT_EMPTY_PATH, want, ctypes.byref(found)) != 0:
        return None
    if not found.mask & want:
        return None
    if want == STATX_BTIME:
        return found.btime.sec * 1_000_000_000 + found.btime.nsec
    return found.mnt_id


def parse_mount_id(fdinfo: str) -> int | None:
    """The `mnt_id:` of a /proc/<pid>/fdinfo/<fd> text, or None if it has none."""
    for line in fdinfo.splitlines():
        key, _, value = line.partition(":")
        if key == "mnt_id":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def mount_id(fd: int) -> int | None:
    """The id of the mount the open file `fd` is reached through: a bind mount has its own,
    though its device number is its source's. statx (Linux 5.8) first, then
    /proc/self/fdinfo (Linux 3.15: RHEL 8's 4.18 needs it); None without /proc on an older
    kernel, and callers then have only the device number (same_mount)."""
    found = statx_field(fd, STATX_MNT_ID)
    if found is not None:
        return found
    try:
        with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as info:
            return parse_mount_id(info.read())
    except OSError:
        return None


def same_mount(outer: int, inner: int) -> bool:
    """Whether the open folder `inner` (inside `outer`) is on `outer`'s very mount, so that
    deleting in it deletes nothing mounted there. Another device is another file system;
    the same device with another mount id is a bind mount. Where no mount id can be read
    (no /proc and no statx) only the device check is left, which a bind mount passes."""
    if os.fstat(outer).st_dev != os.fstat(inner).st_dev:
        return False
    ids = mount_id(outer), mount_id(inner)
    return None in ids or ids[0] == ids[1]


# --------------------------------------------------------------------------- the registry


def registry_dir() -> Path:
    """Where the seals of this user's markers live: $XDG_STATE_HOME/iolab/markers, else
    ~/.local/state/iolab/markers (the XDG default; a relative value is ignored, as XDG says)."""
    base = os.environ.get(STATE_ENV, "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base, *REGISTRY_PARTS)


def _open_registry(create: bool) -> int | None:
    """A handle on the registry, which must be a folder of the user's that nobody else can
    write; None if it is missing (and not to be made) or not such a folder."""
    path = registry_dir()
    if not path.is_absolute():  # no home known (a container's user without one)
        return None
    try:
        if create:
            path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        fd = open_dir(path)
    except OSError:
        return None
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        os.close(fd)
        return None
    return fd


def _entry_name(secret: int) -> str:
    return f"{secret:0{SECRET_BITS // 4}x}"


def _seal(marker: int, folder: int) -> str:
    """What ties the open marker to the open folder and cannot be restored: both inodes and
    the marker's birth time (else its ctime), which the kernel sets when the file is made."""
    st = os.fstat(marker)
    born = statx_field(marker, STATX_BTIME)
    made = f"btime={born}" if born is not None else f"ctime={st.st_ctime_ns}"
    return f"folder={os.fstat(folder).st_ino} marker={st.st_ino} {made}"


def _seal_of(folder: int, name: str) -> str:
    """The seal of marker `name` of the open `folder`, opened afresh: a network file system
    revalidates attributes on open, so the ctime is the server's, not a cached one."""
    marker = os.open(
        name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder
    )
    try:
        return _seal(marker, folder)
    finally:
        os.close(marker)


def _record(secret: int, seal: str) -> None:
    """Write the registry entry of a new marker, created afresh (never through a link)."""
    registry = _open_registry(create=True)
    if registry is None:
        raise LabError(
            f"cannot keep the lab's record of its folders in {registry_dir()}: it "
            f"must be a folder of yours that only you can write; fix it, or set "
            f"{STATE_ENV} to a folder of your own"
        )
    try:
        entry = os.open(
            _entry_name(secret),
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            PRIVATE_FILE_MODE,
            dir_fd=registry,
        )
        try:
            os.write(entry, (seal + "\n").encode())
        finally:
            os.close(entry)
    except OSError as err:
        raise LabError(
            f"cannot write the lab's record of its folders in {registry_dir()} "
            f"({err.strerror or err}); free some space there, or set {STATE_ENV} "
            "to a folder of your own"
        ) from None
    finally:
        os.close(registry)


def _sealed(secret: int, seal: str) -> bool:
    """Whether the registry holds `seal` for `secret` (a regular file of the user's)."""
    registry = _open_registry(create=False)
    if registry is None:
        return False
    try:
        entry = os.open(
            _entry_name(secret),
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            dir_fd=registry,
        )
    except OSError:
        return False
    finally:
        os.close(registry)
    try:
        st = os.fstat(entry)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            return False
        return os.read(entry, MARKER_MAX_BYTES).decode("ascii", "replace").strip() == seal
    finally:
        os.close(entry)


def _forget(secret: int) -> None:
    """Drop a deleted marker's registry entry, so not even a snapshot of it can match again."""
    registry = _open_registry(create=False)
    if registry is None:
        return
    with contextlib.suppress(OSError):
        os.unlink(_entry_name(secret), dir_fd=registry)
    os.close(registry)


# --------------------------------------------------------------------------- identity markers


def _identity(fd: int) -> dict[str, int]:
    """What names this very folder: inode and device, and the file system's id, which stays
    the same across a remount of a network file system where the device number may not."""
    st = os.fstat(fd)
    fsid = getattr(os.fstatvfs(fd), "f_fsid", 0)
    return {"ino": st.st_ino, "dev": st.st_dev, "fsid": fsid, "uid": st.st_uid}


def _identity_line(fd: int, secret: int) -> str:
    fields = {**_identity(fd), "secret": secret}
    return IDENTITY_PREFIX + " " + " ".join(f"{k}={v}" for k, v in fields.items()) + "\n"


def _parse_identity(text: str) -> dict[str, int] | None:
    for line in text.splitlines():
        if line.startswith(IDENTITY_PREFIX):
            try:
                return {
                    key: int(value)
                    for key, value in (
                        item.split("=", 1) for item in line[len(IDENTITY_PREFIX) :].split()
                    )
                }
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


def _read_marker(fd: int, name: str) -> tuple[dict[str, int], str] | None:
    """The record of marker `name` in the open folder `fd` if it names this very folder, with
    the marker's seal as it is now; None for a link, a FIFO, another user's file, a copy."""
    try:
        if not is_own_dir(fd):
            return None
        marker = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd
        )
    except OSError:
        return None
    try:
        st = os.fstat(marker)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            return None
        recorded = _parse_identity(os.read(marker, MARKER_MAX_BYTES).decode("utf-8", "replace"))
        if recorded is None or not _same_folder(recorded, _identity(fd)):
            return None
        return recorded, _seal(marker, fd)
    except OSError:
        return None
    finally:
        os.close(marker)


def _marker_secret(fd: int, name: str) -> int | None:
    """The secret of marker `name` if it proves the open folder `fd` is the lab's: bound to
    this folder and sealed in the registry (a restored or copied marker is not)."""
    found = _read_marker(fd, name)
    if found is None or "secret" not in found[0]:
        return None
    secret = found[0]["secret"]
    return secret if _sealed(secret, found[1]) else None


def fd_has_marker(fd: int, name: str) -> bool:
    """Whether the open folder `fd` holds marker `name` written into this very folder by this
    user and never copied or restored since: a regular file (not a link, not a FIFO), the
    user's, recording the folder's identity, its seal in the user's registry."""
    return _marker_secret(fd, name) is not None


def has_old_marker(directory: Path | str, name: str) -> bool:
    """Whether `directory` carries marker `name` as the previous version wrote it (bound to
    the folder, no secret): never trusted, since a restore brings it back whole; asked only to
    say so in a refusal."""
    try:
        fd = open_dir(directory)
    except OSError:
        return False
    try:
        found = _read_marker(fd, name)
        return found is not None and "secret" not in found[0]
    finally:
        os.close(fd)


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
    """Write marker `name` into the open folder `fd`, bound to its identity, mode 0600, and
    seal it in the user's registry.

    An old marker is replaced, never written through: the new one is written under a name of
    its own, created exclusively (a link planted there cannot send the write elsewhere), and
    renamed over the marker's name, so a run cut short at any moment leaves the old marker or
    the new one, never an empty marker that the next run would not recognise as the lab's.
    The seal is taken after the rename, which sets the marker's ctime, with Ctrl-C held
    until it is recorded; if it cannot be recorded (no registry), the new marker goes again
    and the LabError says why.
    """
    if not is_own_dir(fd):
        raise LabError(
            "refusing to mark a folder that is not yours as the lab's; choose a "
            "folder of your own (--data, or IOLAB_WORKDIR)"
        )
    replaced = _marker_secret(fd, name)
    secret = secrets.randbits(SECRET_BITS)
    partial = f"{name}.{os.getpid()}.partial"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(partial, dir_fd=fd)
    state = "partial"
    try:  # opened before the file is: Ctrl-C just after its creation still removes it
        marker = os.open(
            partial,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            PRIVATE_FILE_MODE,
            dir_fd=fd,
        )
        try:
            os.fchmod(marker, PRIVATE_FILE_MODE)
            os.write(marker, (text.rstrip("\n") + "\n" + _identity_line(fd, secret)).encode())
            if statx_field(marker, STATX_BTIME) is None:
                # ctime will seal it: no write may reach the file after the seal (Lustre's
                # client sends written data later; NFS's sends it on the close below).
                os.fsync(marker)
        finally:
            os.close(marker)
        with interrupts_held():  # from the rename to the seal, the folder has no marker
            os.rename(partial, name, src_dir_fd=fd, dst_dir_fd=fd)
            state = "unsealed"
            _record(secret, _seal_of(fd, name))
            state = "sealed"
    except BaseException:  # an error or an interrupt: no partial or unsealed marker stays
        if state != "sealed":
            with contextlib.suppress(OSError):
                os.unlink(partial if state == "partial" else name, dir_fd=fd)
        raise
    if replaced is not None:
        _forget(replaced)


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
            except (OSError, LabError):
                # No marker (a full disk, no registry): the empty folder goes again, or
                # `clean` would leave it alone for good as the user's.
                with contextlib.suppress(OSError):
                    os.rmdir(path.name, dir_fd=parent)
                raise
            finally:
                os.close(fd)
    finally:
        os.close(parent)


# ------------------------------------------------------------------------- deletes through a handle


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


def remove_file(fd: int, name: str) -> None:
    """Unlink the file `name` of the open folder `fd` (gone already is fine); a marker that
    proved the folder the lab's takes its registry entry with it."""
    secret = _marker_secret(fd, name) if name.startswith(MARKER_PREFIX) else None
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=fd)
    if secret is not None:
        _forget(secret)


def _delete_entry(fd: int, name: str, left: list[str], prefix: str) -> None:
    """Delete the entry `name` of the open folder `fd` if it is the user's.

    A sub-folder is opened without following links, checked to be the user's and on the same
    mount (another device, or a bind mount of this one, is a mount point: deleting through it
    would delete what is mounted there), and emptied through its own handle. What is not the
    user's, or is mounted, is named in `left` and stays.
    """
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return  # deleted meanwhile (a second `clean`)
    if st.st_uid != os.getuid():
        left.append(prefix + name)
        return
    if not stat.S_ISDIR(st.st_mode):
        remove_file(fd, name)
        return
    try:
        child = open_dir(name, dir_fd=fd)
    except FileNotFoundError:
        return
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link or a file meanwhile
            return
        raise
    kept = len(left)
    try:
        if os.fstat(child).st_uid != os.getuid() or not same_mount(fd, child):
            left.append(prefix + name)
            return
        _empty_folder(child, left, prefix + name + "/")
    finally:
        os.close(child)
    if len(left) == kept:  # else it still holds what stays, named in `left`
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(name, dir_fd=fd)


def _empty_folder(fd: int, left: list[str], prefix: str = "", keep: tuple[str, ...] = ()) -> None:
    """Delete what the user owns in the open folder `fd`, all relative to the handle."""
    with contextlib.suppress(OSError):
        os.fchmod(fd, PRIVATE_DIR_MODE)  # a folder of ours made read-only must not stop us
    with os.scandir(fd) as entries:
        names = [entry.name for entry in entries if entry.name not in keep]
    for name in names:
        _delete_entry(fd, name, left, prefix)


def _delete_checked(parent: int, name: str, fd: int, markers: tuple[str, ...], path: Path) -> None:
    """Empty the checked folder `fd`, then its markers, then remove its name from `parent`.

    The markers go last, so a delete cut short leaves the folder still marked and the next
    `clean` finishes it instead of leaving it alone as the user's. Raises a LabError naming
    what could not be deleted (another user's file, a mount point); nothing else is touched.
    A folder that is itself a mount point (a bind mount included) is refused before anything
    in it changes, its mode included.
    """
    if before_delete is not None:
        before_delete(name)
    _pause_for_test(name)
    if not same_mount(parent, fd):
        raise LabError(
            f"refusing to delete {path}: a file system is mounted there (a bind "
            "mount, or another device); unmount it first"
        )
    left: list[str] = []
    try:
        _empty_folder(fd, left, keep=markers)
        if left:
            raise LabError(
                f"left {path / left[0]} in place: it is another user's, or a file "
                "system is mounted there; ask its owner, or unmount it"
            )
        with interrupts_held():  # an unmarked, empty folder would be left alone for good
            for marker in markers:
                remove_file(fd, marker)
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
        raise LabError(
            f"cannot delete {path} ({err.strerror or err}); nothing outside it was touched"
        ) from None


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
            raise LabError(
                f"refusing to delete {path}: it is not a folder ({err.strerror})"
            ) from None
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
