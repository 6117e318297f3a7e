"""Directories the lab makes in the workspace and removes again.

A directory the lab creates under a name of its own (the folder asked for, the workspace,
its entries -- never a parent of a path the user named) is made private and marked at once
(iolab.core.markers), and the lab writes or deletes only in such folders (lab_owned_dir).
Scratch folders of single runs (scratch_dir, fresh_run_dir) and folders for Unix sockets
(socket_dir) are made here too, and removed through one handle (iolab.core.owned); a tree
is deleted only inside the workspace and never through a mount (remove_tree).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

from iolab.core.errors import LabError, interrupts_held
from iolab.core.markers import CREATION_MARKERS, MADE_MARKER, MADE_MARKER_TEXT, marked_soon
from iolab.core.owned import discard_owned, has_old_marker, make_private_dir, remove_owned
from iolab.core.workspace import WorkspaceEntry, public_text, workdir

#: sockaddr_un.sun_path holds 108 bytes on Linux, the final NUL included (unix(7)).
SOCKET_PATH_MAX_BYTES = 107
_MOUNTS_ESCAPE = re.compile(r"\\([0-7]{3})")


def _missing_levels(path: Path) -> list[Path]:
    """The directories that creating `path` with parents would create, outermost first."""
    missing = []
    while not path.exists() and not path.is_symlink() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing[::-1]


def _lab_named(level: Path, target: Path) -> bool:
    """Whether the lab may mark `level` when it creates it: the folder asked for, the
    workspace, or one of the workspace's entries -- never a parent of a path the user named
    (`--data ~/projects/iolab-data` must not make `~/projects` the lab's to delete)."""
    if level == target:
        return True
    root = workdir()
    return level == root or (
        level.parent == root and level.name in {entry.dirname for entry in WorkspaceEntry}
    )


def _make_level(level: Path, mark: bool) -> None:
    """Create one directory; a lab folder is private (0700) and marked in the same breath."""
    try:
        if mark:
            make_private_dir(level, MADE_MARKER, MADE_MARKER_TEXT)
        else:
            level.mkdir()
    except FileExistsError:
        return  # made in the meantime by someone else: not ours to mark


#: How to fix a workspace folder the lab cannot use (no option named it).
WORKSPACE_FIX = "choose a writable location with --data or set IOLAB_WORKDIR to a directory you own"


def ensure_writable_dir(path: Path, option: str | None = None) -> Path:
    """Create `path` if needed (marking the folders the lab names) and prove it is writable.

    Raises a LabError that says why when the path is a file or cannot be created or written,
    naming `option` (the command-line option that gave the path) as the one to change.
    """
    path = Path(path)
    fix = f"give {option} a folder you can write" if option else WORKSPACE_FIX
    try:
        is_file = path.exists() and not path.is_dir()
    except OSError as err:  # a folder on the way that is not searchable
        raise LabError(
            f"cannot reach {path} ({err.strerror}): a folder on its path is not "
            f"readable by you; {fix}"
        ) from None
    if is_file:
        raise LabError(f"{path} exists but is not a directory; {fix}")
    try:
        for level in _missing_levels(path):
            _make_level(level, _lab_named(level, path))
    except OSError as err:
        raise LabError(f"cannot create the directory {path} ({err.strerror}); {fix}") from None
    if not path.is_dir():
        raise LabError(f"{path} is not a directory; {fix}")
    if not os.access(path, os.W_OK | os.X_OK):
        raise LabError(f"the directory {path} is not writable by you; {fix}")
    return path


def lab_owned_dir(path: Path) -> Path:
    """A directory the lab may delete and overwrite things in: made (and marked) by the lab.

    An existing directory without the marker may be the user's own (a `lab` folder in
    $HOME), so the lab refuses to write or delete there.
    """
    path = ensure_writable_dir(path)
    if not marked_soon(path):
        if any(has_old_marker(path, marker) for marker in CREATION_MARKERS):
            raise LabError(
                f"{path} was made by an older version of the lab, whose mark a copy "
                "restored from a backup carries too, so the lab no longer writes or "
                "deletes in it; check that nothing of yours is in it, delete it "
                f"(`rm -r {path}`) and run again"
            )
        raise LabError(
            f"{path} exists but was not made by the lab for you (it has no valid "
            f"{MADE_MARKER} marker; a copy of a lab folder, or one restored from a "
            "backup, has none), so the lab will not write or delete in it; move it "
            "away, or point IOLAB_WORKDIR at a folder of the lab's own, e.g. "
            "$SCRATCH/iolab"
        )
    return path


def results_dir() -> Path:
    """<workspace>/lab, where results are saved: made and marked here if missing, and refused
    if it is a `lab` folder of the user's own."""
    return lab_owned_dir(WorkspaceEntry.LAB.path())


#: The tools whose own folders (~/.cache/matplotlib and ~/.config/matplotlib, ~/.ipython)
#: the lab points into the workspace, by the variable each reads, so that `iolab clean`
#: leaves nothing of the lab in the learner's home.
TOOL_CACHES = {"MPLCONFIGDIR": "matplotlib", "IPYTHONDIR": "ipython"}


def tool_caches() -> dict[str, str]:
    """Point matplotlib and IPython (in this process and every kernel it starts) at folders
    in <workspace>/cache, made now; a variable the user set stays theirs. Call it before
    either is imported. Returns the variables set."""
    chosen = {}
    for variable, name in TOOL_CACHES.items():
        if variable not in os.environ:
            chosen[variable] = str(ensure_writable_dir(WorkspaceEntry.CACHE.path() / name))
    os.environ.update(chosen)
    return chosen


def scratch_dir(name: str) -> Path:
    """A fresh, uniquely named directory under <workspace>/tmp for one run's scratch files."""
    base = ensure_writable_dir(WorkspaceEntry.TMP.path())
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base))


def socket_dir(name: str, longest_socket: str) -> Path:
    """A fresh private folder for Unix sockets named up to `longest_socket`: scratch_dir(name)
    when its path is short enough, else a private folder in $TMPDIR or /tmp.

    A socket's whole path must fit in sun_path (unix(7)); on a cluster a workspace such as
    /scratch/project_2001234/<user>/... easily makes it too long, and the bind then fails
    where nobody sees it (a notebook kernel that never answers). The caller removes the
    folder (iolab.core.owned.discard_owned).
    """

    def fits(folder: Path) -> bool:
        return len(os.fsencode(folder / longest_socket)) <= SOCKET_PATH_MAX_BYTES

    folder = scratch_dir(name)
    if fits(folder):
        return folder
    os.rmdir(folder)  # just made, still empty
    for base in dict.fromkeys([tempfile.gettempdir(), "/tmp"]):
        if fits(Path(base) / f"iolab-{name}-XXXXXXXX"):
            with contextlib.suppress(OSError):
                return Path(tempfile.mkdtemp(prefix=f"iolab-{name}-", dir=base))  # 0700
    raise LabError(
        f"no folder has a path short enough for Unix sockets (at most "
        f"{SOCKET_PATH_MAX_BYTES} bytes): set TMPDIR to a short writable folder, "
        "e.g. `export TMPDIR=/tmp`"
    )


def mounts_under(root: Path) -> list[Path]:
    """Mount points at or below `root`, from the kernel's mount table."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    root = Path(root)
    points = [
        Path(_MOUNTS_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), line.split()[1]))
        for line in lines
        if line.strip()
    ]
    return [p for p in points if p == root or root in p.parents]


def remove_tree(path: Path) -> None:
    """Delete a folder of this user inside the workspace, refusing anything outside the
    workspace, another user's folder, or one with a mount inside.

    A recursive delete walks into mounted file systems, so one that holds a mount point
    would delete the files exported through it. The delete goes through one open handle
    (iolab.core.owned), so a name swapped for a link meanwhile is not followed.
    """
    path = Path(path).parent.resolve() / Path(path).name  # a link itself, never its target
    root = workdir().resolve()
    if path == root or root not in path.parents:
        raise LabError(f"refusing to delete {path}: it is not inside the lab's workspace {root}")
    mounted = mounts_under(path)
    if mounted:
        raise LabError(
            f"refusing to delete {path}: {mounted[0]} is mounted inside it; "
            f"unmount it (`fusermount3 -u {mounted[0]}` or `umount`) first"
        )
    remove_owned(path)


@contextlib.contextmanager
def fresh_run_dir(parent: Path, prefix: str) -> Iterator[Path]:
    """A new directory <prefix>XXXXXXXX in `parent`, removed with its contents afterwards.

    It is made with interrupts held, inside the try whose finally removes it: a Ctrl-C at the
    very moment of the mkdir (CI caught `iolab mdrates` leaving its directory so) cannot
    leave it behind.
    """
    path: Path | None = None
    try:
        with interrupts_held():
            path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        yield path
    finally:
        if path is not None and not discard_owned(path):
            warnings.warn(
                f"could not remove all of {public_text(path)}; delete it by hand", stacklevel=3
            )
