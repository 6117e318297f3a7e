"""The workspace and its layout: where the lab may write, and the per-user places outside it.

All generated data lives under one per-user workspace (IOLAB_WORKDIR, default
<checkout>/workspace, git-ignored) so that `make clean` can remove everything the lab wrote
and nothing else. The workspace may be a directory that already holds the user's own files
($SCRATCH, $HOME), so a name alone proves nothing: the lab works only in folders it made and
marked (iolab.core.markers). In a class, the workspace is a private folder of the learner's
own (class_workspace); a location outside the workspace gets a per-user folder
(location_dir), a private one beside it when another user took the name.

The workspace's entries are named once, in WorkspaceEntry; everything else (the writers, `clean`)
takes the names from there. Making and removing directories in it is iolab.core.lab_dirs.
"""

from __future__ import annotations

import contextlib
import enum
import getpass
import os
import re
import secrets
import sys
import tempfile
from collections.abc import Collection
from pathlib import Path

from iolab.core.class_folder import ClassFolder, active_class
from iolab.core.errors import LabError
from iolab.core.markers import (
    LOCATION_MARKER,
    LOCATION_MARKER_TEXT,
    MADE_MARKER,
    MADE_MARKER_TEXT,
    marked_soon,
)
from iolab.core.owned import fd_has_marker, has_marker, make_private_dir, open_dir, write_marker


class WorkspaceEntry(enum.Enum):
    """The workspace's entries: the only names the lab writes at its top, each a directory
    made (and marked) when first needed. Value: (directory name, what lives there)."""

    DATASET = "dataset", "the default activity dataset: data/, manifest.json, data.tar, shards/"
    IMAGES = "images", "the image-like dataset: files/, shards/, manifest.json"
    LAB = "lab", "results: make lab's notebooks and site, readers.csv, bench.csv, fio's JSON"
    TMP = "tmp", "scratch directories of single runs (scratch_dir), removed when they end"
    MNT = "mnt", "mount points of the lab's loopback sshfs mounts (iolab.storage.netmount)"
    LOC = "loc", "the workspace's own per-location directory (iolab.storage.locations)"
    SLURM_RESULTS = "slurm-results", "what the Slurm jobs copy back (demos/slurm/job-common.sh)"
    PFS = "pfs", "the private CephFS of `iolab pfs up`: its daemons' data, keys and logs"
    CACHE = "cache", "matplotlib's and IPython's files while the lab runs them (tool_caches)"

    def __init__(self, dirname: str, holds: str) -> None:
        self.dirname = dirname
        self.holds = holds

    def path(self) -> Path:
        """This entry in the current workspace (it may not exist yet); in a class, the
        datasets are the class's shared read-only copies (iolab.core.class_folder)."""
        joined = active_class() if self in SHARED_IN_CLASS else None
        return (joined.root if joined is not None else workdir()) / self.dirname


#: The entries a class shares read-only instead of each learner making their own.
SHARED_IN_CLASS = (WorkspaceEntry.DATASET, WorkspaceEntry.IMAGES)


def user_name() -> str:
    """The login name, or uid<N> in a container whose user has no passwd entry."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid{os.getuid()}"


def repo_root() -> Path:
    """The checkout this toolkit lives in (holds demos/, data_generators/, notebooks/).

    iolab is installed editable (`make` runs `pip install -e .`), so its files stay in the
    checkout and the scripts and notebooks beside them are found from any working directory.
    """
    root = Path(__file__).resolve().parents[2]
    if not (root / "data_generators").is_dir():
        raise LabError(
            f"iolab is installed at {root}, outside the lab's checkout, so the demos "
            "and data generators cannot be found: install it editable from the "
            "checkout (`pip install -e .`, as `make` does)"
        )
    return root


def lesson_notebooks(
    lessons: Collection[str] | None = None, root: Path | None = None
) -> list[Path]:
    """The lessons' notebooks in order: those of `lessons` ("01", "02"), or all of them; in
    the checkout `root` (this one by default)."""
    every = sorted(((root or repo_root()) / "notebooks").glob("*.ipynb"))
    return every if lessons is None else [path for path in every if path.name[:2] in lessons]


def workdir() -> Path:
    """The lab's workspace: IOLAB_WORKDIR if set; in a class, a private folder of the
    learner's own where the class's setup chose (class_workspace); else <checkout>/workspace."""
    configured = os.environ.get("IOLAB_WORKDIR")
    if configured:
        return Path(configured).expanduser().resolve()
    joined = active_class()
    if joined is not None:
        return class_workspace(joined)
    return repo_root() / "workspace"


def _is_private_lab_dir(path: Path) -> bool:
    """Whether `path` is a folder (not a link) of this user's that nobody else may enter or
    write (no group or other bits) and that the lab made (MADE_MARKER written into this very
    folder), all checked through one handle."""
    try:
        fd = open_dir(path)
    except OSError:
        return False
    try:
        return not os.fstat(fd).st_mode & 0o077 and fd_has_marker(fd, MADE_MARKER)
    finally:
        os.close(fd)


def class_workspace(joined: ClassFolder) -> Path:
    """The learner's workspace in the class `joined`: `<base>/iolab-<class>-<user>`, or a
    private `iolab-<class>-<user>-XXXXXXXX` beside it when that name is taken.

    The name is predictable and the base may be a scratch folder the whole class writes in,
    so a classmate can make it first: open to them (0777: they could swap what the lab
    writes there for links) or closed to the learner (0755). It is used only while it is a
    private folder the lab made for this user, checked on every call; otherwise the first such
    fallback beside it (found again by its name and its marker), else a new one, with one
    sentence. The folder is made here, exclusively and marked at once, never by a first
    writer that would accept a folder someone else made in between.
    """
    base = joined.workspace_base()
    usual = base / f"iolab-{joined.name}-{user_name()}"
    if _is_private_lab_dir(usual):
        return usual
    with contextlib.suppress(OSError):
        fd = open_dir(base.resolve())  # $SCRATCH may be a link of the user's own
        try:
            names = sorted(name for name in os.listdir(fd) if name.startswith(usual.name + "-"))
        finally:
            os.close(fd)
        for name in names:
            if _is_private_lab_dir(base / name):
                return base / name
    if not os.path.lexists(usual):
        try:
            make_private_dir(usual, MADE_MARKER, MADE_MARKER_TEXT)
            return usual
        except FileExistsError:  # another command of this user a moment earlier, or not
            if marked_soon(usual, _is_private_lab_dir):
                return usual
        except OSError as err:
            raise LabError(
                f"cannot create your class workspace {usual} ({err.strerror}); tell "
                "your instructor, or set IOLAB_WORKDIR to a folder of your own"
            ) from None
    fresh = base / f"{usual.name}-{secrets.token_hex(4)}"
    try:
        make_private_dir(fresh, MADE_MARKER, MADE_MARKER_TEXT)
    except OSError as err:
        raise LabError(
            f"{usual} is not a private folder the lab made for you, and no private "
            f"folder can be made beside it ({err.strerror}); set IOLAB_WORKDIR to a "
            "folder of your own"
        ) from None
    print(
        f"note: {usual} is not a private folder the lab made for you (another user's, a "
        f"link, or open to others), so the lab left it alone and works in {fresh} instead",
        file=sys.stderr,
    )
    return fresh


def public_text(text: Path | str) -> str:
    """`text` (a path or a command argument) as a reader of a published notebook should see it.

    The workspace reads `workspace/...` (or `$IOLAB_WORKDIR/...` when that is set elsewhere),
    the checkout is left out (`demos/...`), the home is `~`, and a path component equal to the
    user name is `$USER`: the committed pages and a learner's own run then read the same, and
    no page names the machine's folders or people.
    """
    text = str(text)
    root, work = str(repo_root()), str(workdir())
    if not work.startswith(root + os.sep):
        text = re.sub(re.escape(work) + r"(?=/|$|[\s\"'])", "$IOLAB_WORKDIR", text)
    text = re.sub(re.escape(root) + r"/", "", text)
    text = re.sub(re.escape(root) + r"(?=$|[\s\"'])", ".", text)
    home = str(Path.home())
    if home != "/":
        text = re.sub(re.escape(home) + r"(?=/|$)", "~", text)
    return "/".join("$USER" if part == user_name() else part for part in text.split("/"))


def default_dataset_dir() -> Path:
    """Where the default 7300-file dataset and its archive live."""
    return WorkspaceEntry.DATASET.path()


def _location_prefix() -> str:
    return f"iolab-{user_name()}"


def location_names(base_fd: int) -> list[str]:
    """Names in the open folder `base_fd` that may be this user's per-user places: the usual
    `iolab-<user>` and the private fallbacks `iolab-<user>-XXXXXXXX` (make_location_dir)."""
    prefix = _location_prefix()
    return sorted(
        name for name in os.listdir(base_fd) if name == prefix or name.startswith(prefix + "-")
    )


def scratch_names(base_fd: int) -> list[str]:
    """Names in the open folder `base_fd` that may be this user's short-job scratch folders,
    `.iolab-<user>-<job>-XXXXXXXX` (iolab.storage.locations.private_scratch), left behind by a
    job killed before its own cleanup; each is deleted only if it carries MADE_MARKER."""
    prefix = "." + _location_prefix() + "-"
    return sorted(name for name in os.listdir(base_fd) if name.startswith(prefix))


def lab_entries(base: Path) -> list[Path]:
    """This user's lab folders directly in `base` (per-user places and short-job scratch
    folders), by name; empty if `base` cannot be read. Whether each is the lab's is not
    proved here: for measuring, not for deleting."""
    try:
        fd = open_dir(base)
    except OSError:
        return []
    try:
        return [Path(base) / name for name in location_names(fd) + scratch_names(fd)]
    finally:
        os.close(fd)


def location_dir(base: Path) -> Path:
    """The per-user folder the lab works in at a location's `base` (outside the workspace).

    Usually `<base>/iolab-<user>`. In a shared place that name is predictable, so another
    user may have taken it; then the lab works in a private folder of its own beside it
    (make_location_dir), and this finds that one again.
    """
    usual = Path(base) / _location_prefix()
    if not os.path.lexists(usual) or has_marker(usual, LOCATION_MARKER):
        return usual
    try:
        fd = open_dir(base)
    except OSError:
        return usual
    try:
        for name in location_names(fd):
            if name != usual.name and has_marker(Path(base) / name, LOCATION_MARKER):
                return Path(base) / name
    finally:
        os.close(fd)
    return usual


def make_location_dir(path: Path) -> Path:
    """Create (or reuse) the private per-user folder `path` of a location; returns where the
    lab works. A name taken by something that is not provably this user's lab folder (another
    user's folder, a link, a file, a copy) is never entered: a fresh private folder beside it
    is made instead, and one sentence says so."""
    path = Path(path)
    if has_marker(path, LOCATION_MARKER):
        return path
    try:
        make_private_dir(path, LOCATION_MARKER, LOCATION_MARKER_TEXT)
        return path
    except FileExistsError:  # perhaps another lab process of this user, a moment earlier
        if marked_soon(path, lambda folder: has_marker(folder, LOCATION_MARKER)):
            return path
    except OSError as err:
        raise LabError(
            f"cannot create {path} ({err.strerror}); free some space or choose another location"
        ) from None
    if path.parent == workdir():
        raise LabError(
            f"{path} exists but was not made by the lab for you (no valid "
            f"{LOCATION_MARKER} marker); move it away or choose another location"
        )
    try:
        fresh = Path(tempfile.mkdtemp(prefix=_location_prefix() + "-", dir=path.parent))
        try:
            write_marker(fresh, LOCATION_MARKER, LOCATION_MARKER_TEXT)
        except LabError:  # no registry: the unmarked folder would stay for good
            os.rmdir(fresh)
            raise
    except OSError as err:
        raise LabError(
            f"cannot create a private folder in {path.parent} ({err.strerror}); "
            "choose another location"
        ) from None
    print(
        f"note: {path} is not a folder the lab made for you (another user's, a link, a "
        "copy, or made by an older version of the lab), so the lab left it alone and works "
        f"in {fresh} instead",
        file=sys.stderr,
    )
    return fresh
