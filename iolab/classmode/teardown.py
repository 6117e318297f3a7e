"""`iolab class clean DIR`: remove a class the instructor set up, and say what was freed.

Only a folder with this instructor's class marker is touched, and in it only what the setup
makes (iolab.classmode.layout.MADE), in that order: what makes it a class for learners
first, the marker last. Everything goes through held handles: the class folder is opened
once without following a link and checked through that handle, and every entry is removed
relative to it, so a class folder's name swapped for a link meanwhile leads nowhere. The
setup's folders carry its marker and are deleted by the lab's one remover
(iolab.core.owned.remove_marked). Whatever learners left in `queue/` and `wall/` (files,
links, FIFOs, folders with content) goes first: it exists only because the class let learners
write there, and as the owner of those sticky folders the instructor may delete it; links
are removed, never followed, and a file system mounted there is never entered. What cannot
be removed is reported, never a traceback, and the marker then stays, so the next clean
finishes the job. Each learner's own workspace is theirs: `python -m iolab clean`, run by
the learner, removes it. `iolab class reset DIR USER` removes one learner's entries from
queue/ and wall/ the same way, during the class.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from iolab.classmode.layout import CLASS_MARKER, FOLDER_MADE, LEARNER_WRITABLE, MADE
from iolab.core import owned
from iolab.core.errors import LabError, interrupts_held
from iolab.core.markers import MADE_MARKER
from iolab.core.owned import fd_has_marker, open_dir, remove_file, remove_marked, same_mount
from iolab.measure.footprint import Footprint

#: The markers that prove a folder of the class the setup's: each is marked when made, the
#: datasets' with the lab's creation marker (which their generators expect), the others with
#: the class marker (iolab.classmode.setup.make_marked_dir).
FOLDER_MARKERS = (CLASS_MARKER, MADE_MARKER)
#: How deep clean follows a learner's nested folders (each level holds a handle open).
MAX_DEPTH = 64
#: What an entry a learner left is called in the report, by its type.
KINDS = (
    (stat.S_ISDIR, "folder"),
    (stat.S_ISLNK, "link"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISREG, "file"),
)


@dataclass(frozen=True)
class Freed:
    """What a clean removed (entries and bytes, whether the class folder itself went, what
    learners had left in their folders) and what it could not remove, each with why."""

    files: int
    bytes: int
    folder_removed: bool
    leftovers: tuple[str, ...] = ()
    left: tuple[str, ...] = ()


@contextlib.contextmanager
def opened_class(root: Path) -> Iterator[tuple[int, int]]:
    """Handles on the folder holding `root` (resolved once: it may be a link of the
    instructor's own) and on `root` itself (never a link), checked to be a class this user
    set up; both stay open for the block, so nothing below is looked up by name again."""
    missing = f"{root} does not exist; name the class folder given to `iolab class setup`"
    try:
        parent = open_dir(root.parent.resolve())
    except OSError:
        raise LabError(missing) from None
    try:
        try:
            fd = open_dir(root.name, dir_fd=parent)
        except FileNotFoundError:
            raise LabError(missing) from None
        except OSError as err:
            why = "a link or a file" if err.errno in (errno.ELOOP, errno.ENOTDIR) else err.strerror
            raise LabError(f"{root} is not a folder ({why})") from None
        try:
            if os.fstat(fd).st_uid != os.getuid() or not fd_has_marker(fd, CLASS_MARKER):
                raise LabError(
                    f"{root} is not a class you set up (no class marker of yours); "
                    "nothing was removed"
                )
            yield parent, fd
        finally:
            os.close(fd)
    finally:
        os.close(parent)


def marker_text(fd: int) -> str:
    """The text of the class marker of the open class folder `fd` (proved by opened_class):
    whether the setup made the folder itself."""
    marker = os.open(
        CLASS_MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd
    )
    try:
        return os.read(marker, 4096).decode("utf-8", "replace")
    finally:
        os.close(marker)


def _described(info: os.stat_result) -> str:
    """`a FIFO of bob`: an entry's type and owner, for the report."""
    kind = next((name for test, name in KINDS if test(info.st_mode)), "device")
    try:
        owner = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        owner = f"uid {info.st_uid}"
    return f"a {kind} of {owner}"


def _remove_any(fd: int, name: str, where: str, left: list[str], depth: int = 0) -> bool:
    """Remove the entry `name` of the open folder `fd`, whoever's and whatever it is: a link
    itself, never what it leads to; a folder emptied through its own handle, unless a file
    system is mounted there or it is nested deeper than MAX_DEPTH. True if it is gone; what
    cannot go is named in `left` once, with why (not again as its folders that stay)."""
    try:
        if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            if depth >= MAX_DEPTH:
                left.append(f"{where} (nested deeper than {MAX_DEPTH} folders)")
                return False
            child = open_dir(name, dir_fd=fd)
            try:
                if not same_mount(fd, child):
                    left.append(f"{where} (a file system is mounted there)")
                    return False
                emptied = all(
                    [
                        _remove_any(child, inner, f"{where}/{inner}", left, depth + 1)
                        for inner in os.listdir(child)
                    ]
                )
            finally:
                os.close(child)
            if not emptied:
                return False
            os.rmdir(name, dir_fd=fd)
        else:
            os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        return True  # gone meanwhile
    except OSError as err:
        left.append(f"{where} ({err.strerror})")
        return False
    return True


def _remove_learner_entries(
    fd: int, name: str, left: list[str], uid: int | None = None
) -> list[tuple[str, bool]]:
    """Remove what learners made in the class's folder `name` (queue/ or wall/): everything
    (a clean, which first closes the folder to them so nothing new arrives), or only the
    entries of `uid` (a reset). Each top-level entry as it was (type and owner) and whether
    it went. A folder gone, or not provably the setup's, is left untouched (remove_made
    names it)."""
    try:
        folder = open_dir(name, dir_fd=fd)
    except OSError:
        return []
    try:
        if not fd_has_marker(folder, CLASS_MARKER):
            return []
        if uid is None:
            os.fchmod(folder, 0o700)
        done = []
        for entry in sorted(os.listdir(folder)):
            if entry == CLASS_MARKER:  # the setup's own; a learner cannot replace it (sticky)
                continue
            with contextlib.suppress(FileNotFoundError):
                info = os.stat(entry, dir_fd=folder, follow_symlinks=False)
                if uid is not None and info.st_uid != uid:
                    continue
                where = f"{name}/{entry}"
                gone = _remove_any(folder, entry, where, left)
                done.append((f"{where} ({_described(info)})", gone))
        return done
    finally:
        os.close(folder)


def remove_made(fd: int) -> tuple[list[str], list[str]]:
    """Remove what the setup made in the open class folder `fd` (proved by opened_class), in
    MADE's order, going on past what cannot be removed; the marker stays. Returns what
    learners had left and what could not be removed, each with why."""
    leftovers: list[str] = []
    left: list[str] = []
    for name in MADE:
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            try:
                remove_file(fd, name)
            except OSError as err:
                left.append(f"{name} ({err.strerror})")
            continue
        if name in LEARNER_WRITABLE:
            known = len(left)
            leftovers += [what for what, _ in _remove_learner_entries(fd, name, left)]
            if len(left) > known:
                continue  # named already; the folder itself cannot go before its contents
        try:
            if not remove_marked(fd, name, FOLDER_MARKERS, Path(name)):
                left.append(f"{name} (not provably the setup's: it has no class marker of yours)")
        except LabError as err:
            left.append(f"{name} ({err})")
    return leftovers, left


def held_size(fd: int, depth: int = 0) -> Footprint:
    """The size of what is in the open folder `fd`, counted as iolab.measure.footprint counts
    it, but walked through handles: each folder opened from the one above, never through a
    link. The clean measures before it closes queue/ and wall/ to learners, so a learner may
    swap a folder of theirs for a link while the walk is under way; a walk by path would
    follow it (to / if they like). Folders that cannot be opened, or nested deeper than
    MAX_DEPTH, count as one entry each. The setup measures the class so too, once queue/
    and wall/ are the group's."""
    size = allocated = files = 0
    for name in os.listdir(fd):
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        files += 1
        allocated += info.st_blocks * 512
        if not stat.S_ISDIR(info.st_mode):
            size += info.st_size
            continue
        if depth >= MAX_DEPTH:
            continue
        try:
            child = open_dir(name, dir_fd=fd)
        except OSError:
            continue  # swapped for a link meanwhile, or not ours to enter
        try:
            inner = held_size(child, depth + 1)
        finally:
            os.close(child)
        size += inner.bytes
        allocated += inner.allocated_bytes
        files += inner.files
    return Footprint(size, allocated, files)


def clean_class(root: Path) -> Freed:
    """Remove the class in `root` (and the folder, if the setup made it and it is empty then);
    what was freed, what learners had left, and what could not be removed."""
    root = root.expanduser().absolute()
    with opened_class(root) as (parent, fd):
        made_folder = FOLDER_MADE in marker_text(fd)
        if owned.before_delete is not None:  # the removers' test hook, right after the check
            owned.before_delete(root.name)
        before = held_size(fd)
        leftovers, left = remove_made(fd)
        removed = False
        if not left:
            with interrupts_held():  # the marker goes last: a clean cut short is finished
                remove_file(fd, CLASS_MARKER)  # by the next
                if made_folder:
                    removed = _remove_emptied(parent, root, fd, left)
        after = held_size(fd)
    return Freed(
        before.files - after.files,
        before.bytes - after.bytes,
        removed,
        tuple(leftovers),
        tuple(left),
    )


def _remove_emptied(parent: int, root: Path, fd: int, left: list[str]) -> bool:
    """Remove the class folder's name if it still leads to the emptied folder `fd`; True if
    removed. A name swapped meanwhile is not ours to touch: said in `left`."""
    try:
        now = os.stat(root.name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        now = None
    then = os.fstat(fd)
    if now is None or (now.st_dev, now.st_ino) != (then.st_dev, then.st_ino):
        left.append(
            f"{root} itself (its name was moved or swapped during the clean; the "
            "emptied class folder is wherever it was moved to)"
        )
        return False
    try:
        os.rmdir(root.name, dir_fd=parent)
    except OSError:
        return False  # something of the instructor's is in it now: it stays
    return True


@dataclass(frozen=True)
class Reset:
    """What `class reset` removed of one learner (each entry with its type) and what it could
    not remove, with why."""

    removed: tuple[str, ...]
    left: tuple[str, ...]


def reset_learner(root: Path, user: str) -> Reset:
    """Remove what the learner `user` has in the class's queue/ and wall/ (their results,
    a stuck ticket, anything they made there), whatever its type and without following a
    link, so that they start the class afresh; the class and everyone else's stay. Only in a
    class this instructor set up (opened_class)."""
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        raise LabError(
            f"{user!r} is not a user on this machine; give a learner's login name"
        ) from None
    removed: list[str] = []
    left: list[str] = []
    with opened_class(root.expanduser().absolute()) as (_, fd):
        for name in LEARNER_WRITABLE:
            done = _remove_learner_entries(fd, name, left, uid)
            removed += [what for what, gone in done if gone]
    return Reset(tuple(removed), tuple(left))
