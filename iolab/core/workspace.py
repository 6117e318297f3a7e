"""Where the lab may write, what it made there, and whether there is room.

All generated data lives under one per-user workspace (IOLAB_WORKDIR, default
<checkout>/workspace, git-ignored) so that `make clean` can remove everything the lab wrote
and nothing else. The workspace may be a directory that already holds the user's own files
($SCRATCH, $HOME), so a name alone proves nothing: a directory the lab creates under a name
of its own (the folder asked for, the workspace, its entries -- never a parent of a path the
user named) is made private (0700) and gets a marker bound to that very folder's identity
and sealed in the user's registry (iolab.core.owned) at the moment it is created, and
`clean` deletes only such folders: not a copy, not a restore from a backup, not a folder
marked by an older version of the lab.
Before writing, callers check free space and free inodes with a margin: on a
shared login node running out of either hurts everyone.

The workspace's entries are named once, in WorkspaceEntry; everything else (the writers, `clean`)
takes the names from there.
"""

from __future__ import annotations

import contextlib
import enum
import getpass
import json
import os
import re
import secrets
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from iolab.core.class_folder import ClassFolder, active_class
from iolab.core.errors import LabError, interrupts_held
from iolab.core.owned import (
    discard_owned,
    fd_has_marker,
    has_marker,
    has_old_marker,
    make_private_dir,
    open_dir,
    remove_file,
    remove_owned,
    write_marker,
)

#: Headroom kept free beyond what a write needs (bytes, inodes).
SPACE_MARGIN_BYTES = 256 * 1024**2
INODE_MARGIN = 10_000
#: sockaddr_un.sun_path holds 108 bytes on Linux, the final NUL included (unix(7)).
SOCKET_PATH_MAX_BYTES = 107
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
_MOUNTS_ESCAPE = re.compile(r"\\([0-7]{3})")


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
            if _marked_soon(usual, _is_private_lab_dir):
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


def results_dir() -> Path:
    """<workspace>/lab, where results are saved: made and marked here if missing, and refused
    if it is a `lab` folder of the user's own."""
    return lab_owned_dir(WorkspaceEntry.LAB.path())


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
        if _marked_soon(path, lambda folder: has_marker(folder, LOCATION_MARKER)):
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


# --------------------------------------------------------------------------- paths given by a user


def existing_dir(path: str | os.PathLike[str], hint: str = "pass an existing folder") -> Path:
    """`path` if it is a folder, else a LabError saying it is missing or is a file."""
    path = Path(path).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise LabError(f"{path} is a file, not a folder; {hint}")
    raise LabError(f"{path} does not exist; {hint}")


def existing_path(path: Path | str, hint: str = "pass an existing file or folder") -> Path:
    """`path` if anything exists there, else a LabError saying that it does not exist."""
    path = Path(path).expanduser()
    if not path.exists():
        raise LabError(f"{path} does not exist; {hint}")
    return path


def output_file(path: Path | str, option: str = "the output") -> Path:
    """`path` if a file can be written there, checked before a long run produces the result.

    A result that cannot be saved after a run of minutes is a result lost, so the place is
    checked first: not a folder, in an existing, writable folder.
    """
    path = Path(path).expanduser()
    if path.is_dir():
        raise LabError(f"{path} is a folder, not a file; give {option} a file name")
    folder = path.parent if str(path.parent) else Path(".")
    existing_dir(folder, f"create it first or give {option} another place")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise LabError(f"the folder {folder} is not writable by you; give {option} another place")
    return path


@contextlib.contextmanager
def atomic_output(path: Path | str) -> Iterator[Path]:
    """A temporary name beside `path` to write to; renamed to `path` only if the block succeeds.

    An interrupted or failed write leaves the previous file (or none), never half a result.
    The temporary name keeps the suffix, so writers that choose a format by it still work.
    """
    path = Path(path)
    temporary = path.with_name(f".{path.stem}.{uuid.uuid4().hex[:8]}.partial{path.suffix}")
    try:
        yield temporary
        os.replace(temporary, path)
    except OSError as err:
        raise LabError(
            f"cannot write {path} ({err.strerror or err}); check that its folder is "
            "writable and has room"
        ) from None
    finally:
        temporary.unlink(missing_ok=True)


def replace_json(path: Path, value: dict, indent: int) -> None:
    """Write `value` as JSON to `path` by way of `<path>.partial` and a rename, so a reader finds
    the previous file or the new one, never half of one. The indent is the format's own."""
    partial = path.with_name(path.name + ".partial")
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()  # a killed run's: the callers hold the folder's writer lock
    # Created afresh, never written through a link planted under the partial's name.
    fd = os.open(
        partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(value, indent=indent))
    os.replace(partial, path)


# ------------------------------------------------------------------------ directories the lab makes


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


def ensure_writable_dir(path: Path) -> Path:
    """Create `path` if needed (marking the folders the lab names) and prove it is writable.

    Raises a LabError that says why when the path is a file or cannot be created or written.
    """
    path = Path(path)
    try:
        is_file = path.exists() and not path.is_dir()
    except OSError as err:  # a folder on the way that is not searchable
        raise LabError(
            f"cannot reach {path} ({err.strerror}): a folder on its path is not "
            "readable by you; choose a writable location with --data or set "
            "IOLAB_WORKDIR to a directory you own"
        ) from None
    if is_file:
        raise LabError(f"{path} exists but is not a directory; choose another location")
    try:
        for level in _missing_levels(path):
            _make_level(level, _lab_named(level, path))
    except OSError as err:
        raise LabError(
            f"cannot create the directory {path} ({err.strerror}); choose a writable location "
            "with --data or set IOLAB_WORKDIR to a directory you own"
        ) from None
    if not path.is_dir():
        raise LabError(f"{path} is not a directory; choose another location")
    if not os.access(path, os.W_OK | os.X_OK):
        raise LabError(
            f"the directory {path} is not writable by you; choose a writable location with "
            "--data or set IOLAB_WORKDIR"
        )
    return path


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


def lab_owned_dir(path: Path) -> Path:
    """A directory the lab may delete and overwrite things in: made (and marked) by the lab.

    An existing directory without the marker may be the user's own (a `lab` folder in
    $HOME), so the lab refuses to write or delete there.
    """
    path = ensure_writable_dir(path)
    if not _marked_soon(path):
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


#: How long a folder made a moment ago may wait for its marker: another lab process of this
#: user (a second command started at once) makes it and marks it in the next breath.
MARKER_WAIT_S = 2.0


def _marked_soon(path: Path, marked: Callable[[Path], bool] = is_lab_made) -> bool:
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
