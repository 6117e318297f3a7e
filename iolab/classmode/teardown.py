"""`iolab class clean DIR`: remove a class the instructor set up, and say what was freed.

Only a folder with this instructor's class marker is touched, and in it only what the setup
makes (iolab.classmode.layout.MADE). Learners' files in `queue/` and `wall/` are removed too:
they exist only because the class folder let learners write there, and as the owner of those
sticky folders the instructor may delete them. Each learner's own workspace is theirs:
`python -m iolab clean`, run by the learner, removes it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from iolab.classmode.layout import CLASS_MARKER, FOLDER_MADE, LEARNER_WRITABLE, MADE
from iolab.core.errors import LabError, interrupts_held
from iolab.core.owned import fd_has_marker, open_dir, remove_owned
from iolab.measure.footprint import Footprint, footprint


@dataclass(frozen=True)
class Freed:
    """What a clean removed: entries and bytes, and whether the class folder itself went."""

    files: int
    bytes: int
    folder_removed: bool


def _check_ours(root: Path) -> None:
    """Refuse a folder that is not a class this user set up (marker bound to the folder)."""
    try:
        fd = open_dir(root)
    except FileNotFoundError:
        raise LabError(f"{root} does not exist; name the class folder given to "
                       "`iolab class setup`") from None
    except OSError as err:
        raise LabError(f"{root} is not a folder ({err.strerror})") from None
    try:
        if os.fstat(fd).st_uid != os.getuid() or not fd_has_marker(fd, CLASS_MARKER):
            raise LabError(f"{root} is not a class you set up (no class marker of yours); "
                           "nothing was removed")
    finally:
        os.close(fd)


def _remove_learner_files(folder: Path) -> None:
    """Unlink the regular files and links learners left in `folder` (never a subfolder of
    theirs, whose contents are not ours to judge); what stays makes the removal fail later."""
    with contextlib.suppress(FileNotFoundError), os.scandir(folder) as entries:
        for entry in entries:
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)


def remove_made(root: Path) -> None:
    """Remove what the setup made in `root` (checked to be this user's class)."""
    _check_ours(root)
    for name in LEARNER_WRITABLE:
        if (root / name).is_dir() and not (root / name).is_symlink():
            _remove_learner_files(root / name)
    for name in MADE:
        path = root / name
        if path.is_dir() and not path.is_symlink():
            remove_owned(path)
        elif path.is_symlink() or path.is_file():
            path.unlink()


def clean_class(root: Path) -> Freed:
    """Remove the class in `root` (and the folder, if the setup made it); what was freed."""
    root = root.expanduser().absolute()
    _check_ours(root)
    made_folder = FOLDER_MADE in (root / CLASS_MARKER).read_text()
    before = footprint([root])
    remove_made(root)
    removed = False
    with interrupts_held():  # the marker goes last: a clean cut short is finished by the next
        os.unlink(root / CLASS_MARKER)
        if made_folder:
            with contextlib.suppress(OSError):  # something else is in it now: it stays
                root.rmdir()
                removed = True
    after = footprint([root]) if root.exists() else Footprint()
    return Freed(before.files - after.files, before.bytes - after.bytes, removed)
