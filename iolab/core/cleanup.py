"""`make clean`: remove everything the lab wrote, and nothing else.

The workspace may be a directory that also holds the user's own files (IOLAB_WORKDIR=$SCRATCH
or $HOME), so only what the lab provably made is deleted: a directory that carries the
marker written into that very folder when the lab created it (iolab.core.owned), and the
workspace itself only when the lab created it and nothing else is left in it. Everything
else -- unmarked, copied from a lab folder, made by an older version of the lab, another
user's -- is listed and left alone. Per-user places elsewhere (/tmp, /dev/shm, $SCRATCH, ...;
workspace.location_dir) are removed only when they carry the lab's location marker written
for this user; another user's folder of that name is never entered. The hidden scratch
folders of short jobs (.iolab-<user>-<job>-XXXXXXXX, left by a job killed before its own
cleanup) are removed when they carry the lab's creation marker. Every check and delete goes
through one open handle, so a name swapped for a link meanwhile leads nowhere. Names come
from the workspace's WorkspaceEntry and markers, so `clean` looks where the writers write.

The lab's loopback mounts live in a marked <workspace>/mnt; they are unmounted first, and
nothing is ever deleted through a live mount: a recursive delete into a mount would delete
the exported files. The core uses only the standard library, so `make clean` works without
the .venv.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from iolab.core.class_folder import active_class
from iolab.core.errors import LabError
from iolab.core.lab_dirs import mounts_under
from iolab.core.lesson_paths import remove_checkout_link, remove_join_link
from iolab.core.markers import (
    CREATION_MARKERS,
    LOCATION_MARKER,
    MADE_MARKER,
    is_lab_made,
    remove_if_only_marked,
)
from iolab.core.owned import open_dir, opened_parent, remove_marked
from iolab.core.storage_areas import STORAGE_AREAS
from iolab.core.workspace import WorkspaceEntry, location_names, scratch_names, workdir

#: Where per-user location directories may have been made (see iolab.storage.locations):
#: the directory each storage area's variable names...
LOCATION_BASES = tuple(area.variable for area in STORAGE_AREAS if area.variable)
#: ...and where an area is without its variable ("~", /tmp, /dev/shm), as another session
#: may have seen it.
SYSTEM_BASES = tuple(area.default for area in STORAGE_AREAS if area.default)
#: How many names of what was left alone are printed before "and N more".
SHOWN_LEFT_ALONE = 10


def unmount_lab_mounts(root: Path) -> None:
    """Unmount the lab's leftover FUSE mounts in its own mount directory, or refuse.

    Only mounts inside a marked <workspace>/mnt are the lab's: a user whose workspace is
    their home may have mounts of their own there, which are not touched.
    """
    mounts = root / WorkspaceEntry.MNT.dirname
    if not is_lab_made(mounts):
        return
    for point in mounts_under(mounts):
        for tool in ("fusermount3", "fusermount"):
            if shutil.which(tool):
                subprocess.run([tool, "-u", str(point)], capture_output=True)
                break
    still = mounts_under(mounts)
    if still:
        raise LabError(
            f"{still[0]} is still mounted; unmount it (`fusermount3 -u {still[0]}` "
            "or `umount`) and run `make clean` again"
        )


def location_dirs() -> list[tuple[Path, str]]:
    """Names of per-user places the lab may have made outside its workspace, in every base,
    each with the marker that proves it: the usual iolab-<user> and private fallbacks
    (LOCATION_MARKER), and the scratch folders of short jobs killed before their cleanup
    (MADE_MARKER). Whether each is the lab's is proved when it is opened for the delete."""
    bases = [os.environ.get(name) for name in LOCATION_BASES] + list(SYSTEM_BASES)
    found = []
    # resolved, as $SCRATCH may be a link; expanded, as "~" is the home without $HOME
    for base in dict.fromkeys(Path(b).expanduser().resolve() for b in bases if b):
        try:
            fd = open_dir(base)
        except OSError:
            continue
        try:
            found += [(base / name, LOCATION_MARKER) for name in location_names(fd)]
            found += [(base / name, MADE_MARKER) for name in scratch_names(fd)]
        finally:
            os.close(fd)
    return found


def _remove(parent: int, target: Path, markers: tuple[str, ...], problems: list[str]) -> bool:
    """Delete `target` (a name in the open folder `parent`) if the lab provably made it for
    this user and nothing is mounted inside; True if deleted. A folder of the lab's that
    could not be emptied (another user's file inside, a mount) is noted in `problems`."""
    if mounts_under(target):
        return False
    try:
        removed = remove_marked(parent, target.name, markers, target)
    except LabError as err:
        problems.append(str(err))
        return False
    if removed:
        print(f"removed {target}")
    return removed


def _report_left_alone(root: Path, left: list[Path]) -> None:
    """Name what was not the lab's to delete, so nothing disappears or stays silently."""
    if not left:
        return
    names = ", ".join(entry.name for entry in left[:SHOWN_LEFT_ALONE])
    more = f" and {len(left) - SHOWN_LEFT_ALONE} more" if len(left) > SHOWN_LEFT_ALONE else ""
    print(
        f"left alone in {root} (no mark of the lab, or a mount inside): {names}{more}; "
        "anything there made by an older version of the lab, or copied from a lab folder, "
        "carries no valid mark: delete it yourself once you have checked it is not yours"
    )


def _clean_workspace(root: Path, problems: list[str]) -> list[Path]:
    """Delete the workspace's lab-made entries; returns what was left alone."""
    left: list[Path] = []
    unmount_lab_mounts(root)
    try:
        fd = open_dir(root)
    except OSError as err:
        raise LabError(
            f"cannot open the workspace {root} ({err.strerror}); fix IOLAB_WORKDIR"
        ) from None
    joined = active_class()
    try:
        for name in sorted(os.listdir(fd)):
            if name in CREATION_MARKERS:
                continue
            entry = root / name
            if remove_join_link(fd, name, joined):
                print(f"removed {entry} (a link to the class's copy)")
                continue
            if not _remove(fd, entry, CREATION_MARKERS, problems) and os.path.lexists(entry):
                left.append(entry)  # not gone meanwhile through a second `clean`
    finally:
        os.close(fd)
    return left


def clean() -> int:
    """Remove the lab-made entries of the workspace, the workspace if the lab made it, and
    the lab's per-user places elsewhere; list and keep everything else.

    Every folder is checked and deleted through one open handle (iolab.core.owned). A
    problem with one folder does not stop the others: all are tried, then the problems are
    reported.
    """
    root = workdir()
    if root.exists() and not root.is_dir():
        raise LabError(f"the workspace {root} is a file, not a folder; fix IOLAB_WORKDIR")
    problems: list[str] = []
    left = _clean_workspace(root, problems) if root.is_dir() else []
    for target, marker in location_dirs():
        with contextlib.suppress(OSError), opened_parent(target) as parent:
            _remove(parent, target, (marker,), problems)
    with contextlib.suppress(OSError, LabError):  # no checkout beside an installed toolkit
        if remove_checkout_link():
            print("removed the checkout's link workspace (it led to your workspace)")
    if root.is_dir():
        if not mounts_under(root) and remove_if_only_marked(root):
            print(f"removed {root}")
        else:
            _report_left_alone(root, left)
    if problems:
        more = f" ({len(problems) - 1} more such folders)" if len(problems) > 1 else ""
        raise LabError(problems[0] + more)
    return 0
