"""`make clean`: remove everything the lab wrote, and nothing else.

The workspace may be a directory that also holds the user's own files (IOLAB_WORKDIR=$SCRATCH
or $HOME), so only what the lab provably made is deleted: a directory that carries the
marker written when the lab created it (iolab.core.workspace.MADE_MARKER), and the workspace
itself only when the lab created it and nothing else is left in it. Everything unmarked,
including what older versions of the lab made before they wrote markers, is listed and left
alone. Per-user directories elsewhere (/tmp, /dev/shm, $SCRATCH, ...; workspace.location_dir)
are removed only when they carry the lab's location marker. Names come from the workspace's
WorkspaceEntry and markers, so `clean` looks where the writers write.

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

from iolab.core.cluster import STORAGE_VARIABLES
from iolab.core.errors import LabError, interrupts_held
from iolab.core.workspace import (CREATION_MARKERS, LOCATION_MARKER, MADE_MARKER, WorkspaceEntry,
                                  is_lab_made, location_dir, mounts_under, workdir)

#: Where per-user location directories may have been made (see iolab.storage.locations).
LOCATION_BASES = ("HOME", "TMPDIR", *STORAGE_VARIABLES)
#: Places every machine has, where locations.discover_locations also makes per-user dirs.
SYSTEM_BASES = ("/tmp", "/dev/shm")
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
        raise LabError(f"{still[0]} is still mounted; unmount it (`fusermount3 -u {still[0]}` "
                       "or `umount`) and run `make clean` again")


def location_dirs() -> list[Path]:
    """Marked per-user directories the lab may have made outside its workspace."""
    bases = [os.environ.get(name) for name in LOCATION_BASES] + list(SYSTEM_BASES)
    found = []
    for base in dict.fromkeys(b for b in bases if b):
        candidate = location_dir(Path(base))
        if (candidate / LOCATION_MARKER).is_file() and not candidate.is_symlink():
            found.append(candidate)
    return found


def _remove(target: Path) -> bool:
    """Delete a lab-made directory unless something is mounted inside it; True if deleted."""
    if mounts_under(target):
        return False
    print(f"removing {target}")
    try:
        _delete_marker_last(target)
    except OSError as err:
        raise LabError(f"cannot delete {err.filename or target} ({err.strerror or err}); make "
                       "its folder writable (chmod u+w) and run `make clean` again") from None
    return True


def _delete_marker_last(target: Path) -> None:
    """Delete a marked directory's contents, then its marker, then the directory.

    A `clean` interrupted halfway must leave the directory still marked, so that the next
    `clean` finishes the job instead of leaving it alone as the user's.
    """
    markers = [target / name for name in CREATION_MARKERS]
    try:
        entries = list(target.iterdir())
    except FileNotFoundError:
        return  # another `clean` removed it
    for entry in entries:
        if entry in markers:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, onerror=_unless_gone)
        else:
            entry.unlink(missing_ok=True)
    with interrupts_held():  # an unmarked, empty directory would be left alone for good
        for marker in markers:
            marker.unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError):  # another `clean` may have been quicker
            target.rmdir()


def _unless_gone(function, path, exc_info) -> None:
    """rmtree's error handler: what another `clean` deleted meanwhile is fine, the rest is not."""
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


def _remove_workspace_if_empty(root: Path) -> None:
    """Remove the workspace itself when the lab created it and only its marker is left."""
    if not is_lab_made(root) or mounts_under(root) != []:
        return
    with contextlib.suppress(FileNotFoundError):  # another `clean` may be just as quick
        if [entry.name for entry in root.iterdir()] != [MADE_MARKER]:
            return
        (root / MADE_MARKER).unlink()
        root.rmdir()
        print(f"removing {root}")


def _report_left_alone(root: Path, left: list[Path]) -> None:
    """Name what was not the lab's to delete, so nothing disappears or stays silently."""
    if not left:
        return
    names = ", ".join(entry.name for entry in left[:SHOWN_LEFT_ALONE])
    more = f" and {len(left) - SHOWN_LEFT_ALONE} more" if len(left) > SHOWN_LEFT_ALONE else ""
    print(f"left alone in {root} (no mark of the lab, or a mount inside): {names}{more}; "
          "anything there made by an older version of the lab carries no mark: delete it "
          "yourself once you have checked it is not yours")


def clean() -> int:
    """Remove the lab-made entries of the workspace, the workspace if the lab made it, and
    marked location directories; list and keep everything else."""
    root = workdir()
    if root.exists() and not root.is_dir():
        raise LabError(f"the workspace {root} is a file, not a folder; fix IOLAB_WORKDIR")
    left: list[Path] = []
    if root.is_dir():
        unmount_lab_mounts(root)
        for entry in sorted(root.iterdir()):
            if entry.name == MADE_MARKER:
                continue
            if is_lab_made(entry) and _remove(entry):
                continue
            if os.path.lexists(entry):  # not gone meanwhile through a second `clean`
                left.append(entry)
    for target in location_dirs():
        _remove(target)
    if root.is_dir():
        _remove_workspace_if_empty(root)
        _report_left_alone(root, left)
    return 0
