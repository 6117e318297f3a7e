"""Where the lessons' relative paths lead, so that their commands run as printed.

The lessons show commands run from the top of a checkout: `python demos/read_files.py --data
workspace/dataset`, `strace -o workspace/tmp/ls.trace ls workspace/dataset/data/...`. In a
class the learner has no checkout: they stand in their private workspace (the class's
`activate` goes there). Joining therefore puts four links into that workspace: `demos`,
`dataset` and `images` lead to the class's read-only copies, and `workspace` to the folder
itself, so `workspace/tmp` is the workspace's own scratch folder, as it is in a checkout.

A learner alone who moved the workspace off the checkout (IOLAB_WORKDIR on scratch, as the
set-up page advises) has no `workspace/` in the checkout either: `make lab` then puts a link
`workspace` there, leading to the workspace (the Makefile, not `iolab lab`: only the
learner's own command writes into their checkout, never a test or a notebook's run).

A link is the lab's when it is this user's, in the private folder the lab made for them, and
leads exactly where the lab points it; `iolab clean` removes only such links (removing a link
never touches what it leads to). A name taken by anything else is left alone and named.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from iolab.core.class_folder import ClassFolder, active_class
from iolab.core.owned import open_dir
from iolab.core.workspace import repo_root, workdir

#: The name the lessons give the workspace, relative to the top of a checkout.
CHECKOUT_LINK = "workspace"


def join_links(joined: ClassFolder) -> dict[str, str]:
    """The links a learner's class workspace holds: name -> what it leads to."""
    return {
        "demos": str(joined.root / "lab" / "demos"),
        "dataset": str(joined.root / "dataset"),
        "images": str(joined.root / "images"),
        "workspace": ".",
    }


def is_join_link(folder: int, name: str, target: str) -> bool:
    """Whether `name` in the open folder `folder` is a link of this user's leading to
    `target` (checked on the entry itself, never on what it leads to)."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        return (
            stat.S_ISLNK(info.st_mode)
            and info.st_uid == os.getuid()
            and os.readlink(name, dir_fd=folder) == target
        )
    except OSError:
        return False


def lay_out(workspace: Path, joined: ClassFolder) -> list[str]:
    """Make the join links in `workspace` (the private folder workdir() checked); returns
    the names another entry already holds, which are left as they are."""
    folder = open_dir(workspace)
    try:
        info = os.fstat(folder)
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            return list(join_links(joined))  # not private to this user (swapped since)
        taken = []
        for name, target in join_links(joined).items():
            try:
                os.symlink(target, name, dir_fd=folder)
            except FileExistsError:
                if not is_join_link(folder, name, target):
                    taken.append(name)
    finally:
        os.close(folder)
    return taken


def remove_join_link(folder: int, name: str, joined: ClassFolder | None) -> bool:
    """Unlink `name` from the open workspace `folder` if it is one of the join links of
    `joined`; True if it was removed."""
    if joined is None:
        return False
    target = join_links(joined).get(name)
    if target is None or not is_join_link(folder, name, target):
        return False
    with contextlib.suppress(FileNotFoundError):  # a second `clean` at the same moment
        os.unlink(name, dir_fd=folder)
    return True


def link_checkout_workspace() -> str | None:
    """Alone, with the workspace moved off the checkout (IOLAB_WORKDIR): make the link
    `<checkout>/workspace` to it; returns one sentence for the learner, or None when there
    is nothing to say (no move, in a class, or the link is already there)."""
    if active_class() is not None:
        return None
    top, target = repo_root(), str(workdir())
    if top / CHECKOUT_LINK == Path(target) or not os.path.isdir(target):
        return None  # the usual place, or no workspace yet (a run refused before making it)
    folder = open_dir(top)
    try:
        if is_join_link(folder, CHECKOUT_LINK, target):
            return None
        try:
            os.symlink(target, CHECKOUT_LINK, dir_fd=folder)
        except FileExistsError:
            return (
                f"note: {top / CHECKOUT_LINK} is not a link to your workspace {target}, so the "
                f"lessons' workspace/ paths do not lead there: use {target}/ in their place"
            )
        except OSError:
            return None  # a read-only checkout: the lessons' paths are told in the set-up page
    finally:
        os.close(folder)
    return f"linked {top / CHECKOUT_LINK} to your workspace {target}: the lessons' paths lead there"


def remove_checkout_link() -> bool:
    """Unlink `<checkout>/workspace` if it is the lab's link to the current workspace."""
    folder = open_dir(repo_root())
    try:
        if not is_join_link(folder, CHECKOUT_LINK, str(workdir())):
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(CHECKOUT_LINK, dir_fd=folder)
        return True
    finally:
        os.close(folder)
