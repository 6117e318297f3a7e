"""The lab's creation markers, and whether a folder carries one.

A directory the lab creates under a name of its own is made private (0700) and gets a marker
bound to that very folder's identity and sealed in the user's registry (iolab.core.owned) at
the moment it is created; `clean` deletes only such folders: not a copy, not a restore from
a backup, not a folder marked by an older version of the lab. The markers' names live here,
below both of their users: the workspace (its class folder and per-user places are marked
when made: iolab.core.workspace) and the directories the lab makes in it
(iolab.core.lab_dirs), which would import each other if the markers lived in either.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from iolab.core.owned import fd_has_marker, has_marker, open_dir, remove_file

#: Written into every directory the lab creates, and only into those: the proof `clean` needs.
MADE_MARKER = ".iolab-made"
MADE_MARKER_TEXT = (
    "made by the storage I/O lab; `python -m iolab clean` deletes this "
    "directory with everything in it\n"
)
#: The marker of the per-user directories a location gets (location_dir, iolab.storage.locations).
LOCATION_MARKER = ".iolab-location"
LOCATION_MARKER_TEXT = "made by the storage I/O lab for you; `python -m iolab clean` deletes it\n"
CREATION_MARKERS = (MADE_MARKER, LOCATION_MARKER)


def is_lab_made(path: Path) -> bool:
    """Whether `path` is a real directory of this user that the lab created: it carries a
    marker written into this very folder (a copy, a link or another user's folder does not)."""
    return any(has_marker(path, marker) for marker in CREATION_MARKERS)


def remove_if_only_marked(path: Path) -> bool:
    """Remove a lab-made folder that holds nothing but its marker; True if it was removed.

    Checked and removed through one handle, so a name swapped meanwhile is not followed.
    """
    path = Path(path)
    try:
        fd = open_dir(path)
    except OSError:
        return False
    try:
        if not any(fd_has_marker(fd, marker) for marker in CREATION_MARKERS):
            return False
        if set(os.listdir(fd)) - set(CREATION_MARKERS):
            return False
        for marker in CREATION_MARKERS:
            remove_file(fd, marker)
    finally:
        os.close(fd)
    try:
        path.rmdir()  # only ever removes an empty folder, whatever the name leads to now
    except OSError:
        return False
    return True


#: How long a folder made a moment ago may wait for its marker: another lab process of this
#: user (a second command started at once) makes it and marks it in the next breath.
MARKER_WAIT_S = 2.0


def marked_soon(path: Path, marked: Callable[[Path], bool] = is_lab_made) -> bool:
    """Whether `path` is `marked`, or becomes so within MARKER_WAIT_S while it is still empty
    and new (seconds old): between another lab process's mkdir and its marker, the folder is
    briefly unmarked. A user's own folder (with contents, or older) is refused at once."""
    deadline = time.monotonic() + MARKER_WAIT_S
    while not marked(path):
        if time.monotonic() >= deadline or not _empty_and_new(path):
            return False
        time.sleep(0.01)
    return True


def _empty_and_new(path: Path) -> bool:
    """Seconds old, holding nothing but a marker being written (`<marker>.<pid>.partial`,
    or the marker itself before its seal is recorded: iolab.core.owned.write_marker_at)."""
    try:
        with os.scandir(path) as entries:
            if any(
                not (
                    entry.name in CREATION_MARKERS
                    or (entry.name.endswith(".partial") and entry.name.startswith(CREATION_MARKERS))
                )
                for entry in entries
            ):
                return False
        return time.time() - path.lstat().st_ctime < 2 * MARKER_WAIT_S
    except OSError:
        return False
