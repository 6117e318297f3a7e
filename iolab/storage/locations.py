"""The places on this machine a learner can compare, and what each file system is.

The same reader can be ten times faster in /dev/shm than on a network mount, so a lesson
that compares storage needs to know which directories there are to compare. Candidates,
in this order:

- ``workspace``: the lab's own workspace (IOLAB_WORKDIR);
- the storage areas of iolab.core.storage_areas, in its order: ``home`` ($HOME, often a
  small, backed-up network file system on a cluster), ``tmp`` ($TMPDIR if set, else /tmp),
  ``shm`` (/dev/shm, a tmpfs in RAM), then the directories clusters announce in environment
  variables: the parallel file system's scratch and work areas, node-local scratch, and
  project space, each named after its variable, lowercased (e.g. ``scratch``);
- directories the user names (``extra``), called ``extra:<basename>`` or what a mapping says.

A candidate that does not exist is dropped; one that resolves to a directory already listed
is dropped too, so the first name wins (TMPDIR=/tmp shows once, as ``tmp``). An ``extra``
path that is not a directory raises a LabError: the user asked for it, so silence would hide
a typo.

Nothing outside the lab's own directories is touched. Each location gets a per-user working
directory, ``<base>/iolab-<user>`` (for the workspace ``<workspace>/loc``), holding a marker
file; only a directory with that marker, owned by the user, is ever deleted. Discovery
probes O_DIRECT in a private temporary folder (inside that directory where the lab has made
it, else in the base) and leaves every base as it found it.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from iolab.core.errors import LabError, interrupts_held
from iolab.core.lab_dirs import ensure_writable_dir
from iolab.core.markers import LOCATION_MARKER, MADE_MARKER, MADE_MARKER_TEXT
from iolab.core.owned import discard_owned, has_marker, opened_parent, remove_marked, write_marker
from iolab.core.storage_areas import STORAGE_AREAS
from iolab.core.workspace import (
    WorkspaceEntry,
    location_dir,
    make_location_dir,
    public_text,
    user_name,
    workdir,
)
from iolab.measure.context import fs_kind, is_network_fs, mount_for, public_mount_options

if TYPE_CHECKING:  # pandas only for the table: `class preflight` runs without it
    import pandas as pd

#: How long `lfs quota` or `quota` may take: a hung file system must not hang a report.
QUOTA_TIMEOUT_S = 10.0

#: Buffer sizes tried for O_DIRECT, smallest first: the logical block of most disks, then
#: the 4 KiB that newer disks and many file systems require.
ALIGNMENTS_BYTES = (512, 4096)
#: The folder a private_scratch job works in, one level below the marked scratch folder.
SCRATCH_WORK = "work"


@dataclass(frozen=True)
class Location:
    """A directory to compare, its file system, the room left, and whether O_DIRECT works.

    `path` is the per-user working directory inside `base`; it need not exist yet (see
    user_dir). `free_inodes` is None where the file system does not count inodes; `o_direct`
    is None when it was not probed, and `o_direct_note` says why or what the result means.
    """

    name: str
    base: Path
    path: Path
    fs_type: str
    mount_point: Path
    mount_options: str
    kind: str
    networked: bool
    free_bytes: int
    free_inodes: int | None
    writable: bool
    o_direct: bool | None = None
    o_direct_note: str = ""
    alignment_bytes: int | None = None

    def public_dict(self) -> dict:
        """All fields, JSON-ready, with paths that name neither the home nor the user."""
        record = asdict(self)
        for key in ("base", "path", "mount_point", "o_direct_note"):
            record[key] = _public(record[key])
        return record


@dataclass(frozen=True)
class DirectIO:
    """What an O_DIRECT probe found: whether it works, the buffer alignment, and a note."""

    supported: bool | None
    alignment_bytes: int | None
    note: str


def _public(text: Path | str) -> str:
    """public_text, plus the user name inside 'iolab-<user>', which it does not mask."""
    return public_text(text).replace(f"iolab-{user_name()}", "iolab-$USER")


def _extra_candidates(
    extra: Sequence[Path | str] | Mapping[str, Path | str],
) -> list[tuple[str, Path]]:
    """Named user directories; a path that is not a directory raises a LabError."""
    if isinstance(extra, Mapping):
        named = list(extra.items())
    else:
        named = [(f"extra:{Path(p).expanduser().resolve().name or p}", p) for p in extra]
    candidates = []
    for name, given in named:
        path = Path(given).expanduser()
        if not path.is_dir():
            what = "a file" if path.exists() else "missing"
            raise LabError(f"the location {given} is {what}; pass an existing directory to compare")
        candidates.append((name, path))
    return candidates


def _candidates(
    extra: Sequence[Path | str] | Mapping[str, Path | str],
) -> list[tuple[str, Path]]:
    """Every (name, base) to consider in listing order, missing and repeated ones included."""
    candidates = [("workspace", workdir())]
    candidates += [
        (area.name, path) for area in STORAGE_AREAS if (path := area.directory()) is not None
    ]
    return candidates + _extra_candidates(extra)


def _unique_existing(candidates: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """Existing directories, resolved, each once under the first name that reached it."""
    seen: dict[Path, str] = {}
    for name, path in candidates:
        if path.is_dir():
            seen.setdefault(path.resolve(), name)
    return [(name, base) for base, name in seen.items()]


def _working_dir(name: str, base: Path) -> Path:
    """The per-user directory the lab works in at `base`."""
    return base / WorkspaceEntry.LOC.dirname if name == "workspace" else location_dir(base)


def _inspect(name: str, base: Path) -> Location:
    """A location's file system and free room, without writing anything."""
    path = _working_dir(name, base)
    mount = mount_for(base)
    st = os.statvfs(base)
    return Location(
        name=name,
        base=base,
        path=path,
        fs_type=mount.fs_type,
        mount_point=Path(mount.mount_point),
        mount_options=public_mount_options(mount.options),
        kind=fs_kind(mount.fs_type),
        networked=is_network_fs(mount.fs_type),
        free_bytes=st.f_bavail * st.f_frsize,
        # f_files == 0: the file system does not count inodes (btrfs, many FUSE mounts).
        free_inodes=st.f_favail if st.f_files else None,
        # os.path.exists: a place whose folder we may not search is not ours to write in
        writable=os.access(path if os.path.exists(path) else base, os.W_OK | os.X_OK),
    )


def _error_note(err: OSError) -> str:
    """'ENOSPC: No space left on device' for an OSError."""
    code = errno.errorcode.get(err.errno, str(err.errno)) if err.errno is not None else "error"
    return f"{code}: {err.strerror}"


def _write_and_read_back(fd: int, size: int) -> None:
    """Write `size` bytes at offset 0 from a page-aligned buffer and read them back.

    Anonymous mmap memory is page-aligned, which O_DIRECT needs for the buffer as well as
    for the size and the offset; a size the device cannot take raises OSError(EINVAL).
    """
    with mmap.mmap(-1, size) as buffer:
        os.pwrite(fd, buffer, 0)
        os.preadv(fd, [buffer], 0)


def _success_note(fs_type: str, alignment_bytes: int) -> str:
    """What a working O_DIRECT means on this kind of file system."""
    kind = fs_kind(fs_type)
    if kind == "memory":
        return f"{fs_type} takes O_DIRECT since Linux 6.6, but keeps data in RAM: nothing to bypass"
    if kind == "network":
        return "bypasses this machine's page cache only; the server may still cache"
    if alignment_bytes > ALIGNMENTS_BYTES[0]:
        return f"needs {alignment_bytes}-byte aligned I/O ({ALIGNMENTS_BYTES[0]} bytes: EINVAL)"
    return ""


def probe_o_direct(directory: Path) -> DirectIO:
    """Whether O_DIRECT I/O works in `directory`, with the smallest alignment that works.

    O_DIRECT asks the kernel to skip the page cache, the way databases and some benchmarks
    measure the device instead of memory. File systems differ: tmpfs refused it before
    Linux 6.6 (EINVAL at open), disks demand aligned buffers, and the answer decides whether
    a "cold" read can be had without dropping caches as root. The probe file is removed
    whatever happens.
    """
    if not hasattr(os, "O_DIRECT"):
        return DirectIO(None, None, "not probed: this system has no O_DIRECT flag")
    fs_type = mount_for(directory).fs_type
    probe = directory / f".iolab-odirect-probe-{os.getpid()}"
    flags = os.O_RDWR | os.O_CREAT | os.O_DIRECT
    try:
        try:
            fd = os.open(probe, flags, 0o600)
        except OSError as err:
            if err.errno == errno.EINVAL:
                return DirectIO(False, None, f"EINVAL: {fs_type} does not support O_DIRECT")
            return DirectIO(None, None, f"not probed: {_error_note(err)}")
        try:
            for size in ALIGNMENTS_BYTES:
                try:
                    _write_and_read_back(fd, size)
                except OSError as err:
                    if err.errno != errno.EINVAL:
                        return DirectIO(None, None, f"not probed: {_error_note(err)}")
                else:
                    return DirectIO(True, size, _success_note(fs_type, size))
            sizes = " and ".join(map(str, ALIGNMENTS_BYTES))
            return DirectIO(False, None, f"EINVAL: {fs_type} refused O_DIRECT I/O of {sizes} bytes")
        finally:
            os.close(fd)
    finally:
        probe.unlink(missing_ok=True)


@contextlib.contextmanager
def private_scratch(location: Location, name: str) -> Iterator[Path]:
    """A fresh private folder on `location` for one short job, removed afterwards: inside the
    per-user directory if the lab has made it, else straight in the base.

    The per-user directory itself is never made and removed again for such a job: another
    process of the same user (a notebook, a second terminal) may make and fill it meanwhile,
    and removing it afterwards would take that process's files along. Raises LabError (one
    sentence) when the place cannot be written.
    """
    if location.name == "workspace":
        ensure_writable_dir(workdir())
    inside = user_dir(location) if has_marker(location.path, LOCATION_MARKER) else location.base
    folder: Path | None = None
    try:
        with interrupts_held():  # made and marked inside the try that removes it, or not at all
            try:
                folder = Path(tempfile.mkdtemp(prefix=f".{location.path.name}-{name}-", dir=inside))
                # Marked, so that `clean` finds it should this process be killed before its
                # `finally`; the job works one level down, where the marker is not listed.
                write_marker(folder, MADE_MARKER, MADE_MARKER_TEXT)
                (folder / SCRATCH_WORK).mkdir()
            except OSError as err:
                raise LabError(f"cannot write in {inside}: {_error_note(err)}") from None
        yield folder / SCRATCH_WORK
    finally:
        if folder is not None:
            discard_owned(folder)


def _probed(location: Location) -> Location:
    """`location` with its O_DIRECT result, probed in a private scratch folder of its own."""
    try:
        with private_scratch(location, "probe") as folder:
            return _with_probe(location, probe_o_direct(folder))
    except LabError as err:
        return replace(location, writable=False, o_direct_note=f"not probed: {err}")


def _with_probe(location: Location, result: DirectIO) -> Location:
    """`location`, writable, with what its O_DIRECT probe found."""
    return replace(
        location,
        writable=True,
        o_direct=result.supported,
        o_direct_note=result.note,
        alignment_bytes=result.alignment_bytes,
    )


def discover_locations(
    extra: Sequence[Path | str] | Mapping[str, Path | str] = (), probe: bool = True
) -> list[Location]:
    """The directories on this machine worth comparing, in the order of the module docstring.

    `extra` adds directories: a sequence names them ``extra:<basename>``, a mapping gives
    names. With `probe`, the lab's own workspace is created if missing and each location's
    O_DIRECT support is probed in its per-user directory; without it nothing is written
    anywhere and `o_direct` stays None.
    """
    if probe:
        ensure_writable_dir(workdir())
    locations = [_inspect(name, base) for name, base in _unique_existing(_candidates(extra))]
    return [_probed(location) for location in locations] if probe else locations


def user_dir(location: Location) -> Path:
    """Create (if needed) and mark the private per-user working directory of `location`.

    On a shared base such as /tmp another user could have made <base>/iolab-<you> first, or a
    link by that name: the lab never enters it and works in a fresh private folder beside it
    (iolab.core.workspace.make_location_dir), saying so in one sentence.
    """
    if location.name == "workspace":
        ensure_writable_dir(workdir())
    return make_location_dir(_working_dir(location.name, location.base))


def remove_user_dir(location: Location) -> None:
    """Delete the per-user working directory of `location` with everything in it, if the lab
    made it for this user; anything else by that name (another user's) is left as it is.

    The folder is checked and emptied through one open handle (iolab.core.owned), so a name
    swapped for a link meanwhile leads nowhere.
    """
    path = _working_dir(location.name, location.base)  # again: a fallback may be new
    if not os.path.lexists(path):
        return
    with opened_parent(path) as parent:
        remove_marked(parent, path.name, (LOCATION_MARKER,), path)


FRAME_COLUMNS = [
    "name",
    "path",
    "fs_type",
    "kind",
    "free_GB",
    "free_inodes",
    "writable",
    "o_direct",
    "o_direct_alignment_bytes",
    "o_direct_note",
    "mount_options",
]


def locations_frame(locations: Sequence[Location]) -> pd.DataFrame:
    """One row per location for a table; free space in GB (10^9 bytes), paths made public."""
    import pandas as pd

    rows = [
        [
            loc.name,
            _public(loc.path),
            loc.fs_type,
            loc.kind,
            loc.free_bytes / 1e9,
            loc.free_inodes,
            loc.writable,
            loc.o_direct,
            loc.alignment_bytes,
            _public(loc.o_direct_note),
            loc.mount_options,
        ]
        for loc in locations
    ]
    return pd.DataFrame(rows, columns=FRAME_COLUMNS)


def quota_text(fs_type: str, mount_point: str) -> str:
    """What `lfs quota -u $USER MOUNT` (Lustre) or `quota -s -w -f MOUNT` says, in one line;
    "n/a" where the tool is missing, fails or says nothing."""
    if fs_type == "lustre" and shutil.which("lfs"):
        command = ["lfs", "quota", "-h", "-u", user_name(), mount_point]
    elif shutil.which("quota"):
        command = ["quota", "-s", "-w", "-f", mount_point]
    else:
        return "n/a"
    try:
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=QUOTA_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "n/a"
    lines = [" ".join(line.split()) for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        return "n/a"
    return public_text(" | ".join(lines))[:300]
