"""Whether there is room for a write: free space and free inodes, with a margin.

Before writing, callers check free space and free inodes with a margin: on a shared login
node running out of either hurts everyone, not only the lab. The check is one statvfs of
the target, for generators and writers alike, wherever they write.
"""

from __future__ import annotations

import os
from pathlib import Path

from iolab.core.errors import LabError

#: Headroom kept free beyond what a write needs (bytes, inodes).
SPACE_MARGIN_BYTES = 256 * 1024**2
INODE_MARGIN = 10_000


def check_capacity(path: Path, bytes_needed: int, inodes_needed: int) -> None:
    """Refuse to start a write that would leave the file system of `path` nearly full."""
    st = os.statvfs(path)
    free_bytes = st.f_bavail * st.f_frsize
    if free_bytes < bytes_needed + SPACE_MARGIN_BYTES:
        raise LabError(
            f"not enough free space in {path}: {free_bytes / 1e6:.0f} MB free, "
            f"{(bytes_needed + SPACE_MARGIN_BYTES) / 1e6:.0f} MB needed with a safety margin; "
            "free some space or point IOLAB_WORKDIR (or --data) at a larger file system"
        )
    # f_files == 0 means the file system does not count inodes (e.g. btrfs, some FUSE mounts);
    # CephFS's client reports -1 free inodes, its way of saying they are not counted.
    if st.f_files and st.f_favail >= 0 and st.f_favail < inodes_needed + INODE_MARGIN:
        raise LabError(
            f"not enough free inodes in {path}: {st.f_favail} free, "
            f"{inodes_needed + INODE_MARGIN} needed with a safety margin; remove small files "
            "(check with `df -i`) or use another file system"
        )
