"""Where the lab may write, and whether there is room.

All generated data lives under one per-user workspace (IOLAB_WORKDIR, default
<checkout>/workspace, git-ignored) so that `make clean` can remove everything the lab wrote
and nothing else. Before writing, callers check free space and free inodes with a margin:
on a shared login node running out of either hurts everyone.
"""

from __future__ import annotations

import getpass
import os
import shutil
import tempfile
from pathlib import Path

from iolab.errors import LabError

#: Headroom kept free beyond what a write needs (bytes, inodes).
SPACE_MARGIN_BYTES = 256 * 1024**2
INODE_MARGIN = 10_000


def user_name() -> str:
    """The login name, or uid<N> in a container whose user has no passwd entry."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid{os.getuid()}"


def repo_root() -> Path:
    """The checkout this toolkit lives in (holds demos/, data_generators/, notebooks/)."""
    return Path(__file__).resolve().parent.parent


def workdir() -> Path:
    """The lab's workspace: IOLAB_WORKDIR if set, else <checkout>/workspace."""
    configured = os.environ.get("IOLAB_WORKDIR")
    return Path(configured).expanduser().resolve() if configured else repo_root() / "workspace"


def default_dataset_dir() -> Path:
    """Where the default 7300-file dataset and its archive live."""
    return workdir() / "dataset"


def ensure_writable_dir(path: Path) -> Path:
    """Create `path` if needed and prove it is writable, or raise a LabError that says why."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise LabError(f"{path} exists but is not a directory; choose another location")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise LabError(
            f"cannot create the directory {path} ({err.strerror}); choose a writable location "
            "with --out or set IOLAB_WORKDIR to a directory you own"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise LabError(
            f"the directory {path} is not writable by you; choose a writable location with "
            "--out or set IOLAB_WORKDIR"
        )
    return path


def check_capacity(path: Path, bytes_needed: int, inodes_needed: int) -> None:
    """Refuse to start a write that would leave the file system of `path` nearly full."""
    st = os.statvfs(path)
    free_bytes = st.f_bavail * st.f_frsize
    if free_bytes < bytes_needed + SPACE_MARGIN_BYTES:
        raise LabError(
            f"not enough free space in {path}: {free_bytes / 1e6:.0f} MB free, "
            f"{(bytes_needed + SPACE_MARGIN_BYTES) / 1e6:.0f} MB needed with a safety margin; "
            "free some space or point IOLAB_WORKDIR (or --out) at a larger file system"
        )
    # f_files == 0 means the file system does not count inodes (e.g. btrfs, some FUSE mounts).
    if st.f_files and st.f_favail < inodes_needed + INODE_MARGIN:
        raise LabError(
            f"not enough free inodes in {path}: {st.f_favail} free, "
            f"{inodes_needed + INODE_MARGIN} needed with a safety margin; remove small files "
            "(check with `df -i`) or use another file system"
        )


def scratch_dir(name: str) -> Path:
    """A fresh, uniquely named directory under <workspace>/tmp for one run's scratch files."""
    base = ensure_writable_dir(workdir() / "tmp")
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base))


def remove_tree(path: Path) -> None:
    """Delete a directory the lab created, refusing anything outside the workspace."""
    path = Path(path).resolve()
    root = workdir().resolve()
    if path == root or root not in path.parents:
        raise LabError(f"refusing to delete {path}: it is not inside the lab's workspace {root}")
    shutil.rmtree(path, ignore_errors=True)
