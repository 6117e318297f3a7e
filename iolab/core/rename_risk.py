"""Whether another user could rename a folder, or swap it for a link or a copy of their own.

Whoever may write into a folder without the sticky bit may rename what is in it. The class
folder is where learners run an environment and read a dataset from: the setup refuses a
place where a classmate could swap it, and each learner's command checks again before it
trusts the class (a folder above it may have been opened to the group since).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path


def _owners_group_only(info: os.stat_result) -> bool:
    """Whether a folder's group is its owner's private group (a user private group, as many
    distributions give each account): group-writable then means writable by the owner."""
    try:
        group, owner = grp.getgrgid(info.st_gid), pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        return False
    return group.gr_name == owner and set(group.gr_mem) <= {owner}


def rename_risk(folder: Path) -> str | None:
    """Why someone else could rename `folder`, or a folder above it, or None.

    Whoever may write into a folder without the sticky bit may rename what is in it: a
    classmate could swap the class folder (or a folder on its path) for a link or a class of
    their own while the setup fills it, or make learners run their `env`. Checked on the real
    path, from the folder's parent up to /.
    """
    parent = Path(folder).absolute().parent.resolve()
    for above in [parent, *parent.parents]:
        try:
            info = above.stat()
        except OSError:
            continue  # not made yet: the setup says so, or makes the folder itself
        mode = stat.S_IMODE(info.st_mode)
        if mode & stat.S_ISVTX:
            continue
        if mode & stat.S_IWOTH:
            who = "everyone"
        elif mode & stat.S_IWGRP and not _owners_group_only(info):
            try:
                who = f"the group {grp.getgrgid(info.st_gid).gr_name}"
            except KeyError:
                who = f"the group {info.st_gid}"
        else:
            continue
        return (
            f"{above} is writable by {who} without the sticky bit (mode {mode:04o}), so "
            f"others can rename what is in it and swap {folder} for a link or a folder of "
            "their own"
        )
    return None


#: What to do about a rename_risk.
RENAME_FIX = (
    "put the class folder under folders only you (or root) can write, or ask their "
    "owner to set the sticky bit (`chmod +t`), as /tmp has"
)
