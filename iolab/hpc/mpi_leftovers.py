"""What an MPI run makes outside its own folder, and its removal once the run is stopped.

MPICH removes all of it as a run ends. A run stopped before MPI_Finalize (Ctrl-C, a timeout,
a traced run stopped mid-way) leaves it on a login node shared by everybody:

* Hydra's topology file for its proxies, /tmp/hydra_hwloc_xmlfile_*;
* each node's shared memory, /dev/shm/mpich_shm_* (2 MiB);
* the shared memory of UCX, which an MPICH built for ch4:ucx (the pip wheel) starts in every
  rank: /dev/shm/ucx_shm_posix_* (4 MiB) and System V segments. UCX removes each name right
  after making it (openucx/ucx pull request 871, 2016-07-05), so only a rank stopped in
  between leaves one; CI found a ucx_shm_posix_ file after traced runs were stopped under load.

Only what is proven the run's is removed: a file a process of the run holds (read from /proc
while the run is frozen, iolab.measure.frozen_tree), a file the run's strace trace shows it
created (O_CREAT|O_EXCL), a System V segment whose creator was a process of the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from iolab.measure.strace_parse import TraceReader, unescape_strace

#: Where MPICH's and UCX's shared-memory files live.
SEGMENT_DIR = "/dev/shm"
MPICH_SEGMENT_PREFIX = "mpich_shm_"
UCX_SEGMENT_PREFIX = "ucx_shm_posix_"
SEGMENT_PATHS = tuple(
    os.path.join(SEGMENT_DIR, prefix) for prefix in (MPICH_SEGMENT_PREFIX, UCX_SEGMENT_PREFIX)
)
#: Every name MPICH (with the UCX it is built with) makes outside the run's folder.
MPICH_FILES = (*SEGMENT_PATHS, "/tmp/hydra_hwloc_xmlfile_")
#: The kernel's table of System V segments, one per line under a header.
SYSV_TABLE = Path("/proc/sysvipc/shm")
#: shmctl's command to remove a segment, and the mode bit of one already marked for removal.
IPC_RMID, SHM_DEST = 0, 0o1000


def held_files(pids: Iterable[int]) -> set[tuple[str, int]]:
    """(path, inode) of each of MPICH_FILES that one of `pids` has mapped or holds open, read
    from /proc/PID/maps and /proc/PID/fd: proof that it is this run's, not another job's.
    Open counts too: Hydra's proxy keeps its topology file open for the whole run, and a rank
    stopped during MPI_Init has created its segment (open, sized) but may not have mapped it
    yet. Read while the run is frozen (iolab.measure.frozen_tree), this is all it made and kept."""
    found: set[tuple[str, int]] = set()
    for pid in pids:
        found |= _mapped_files(pid, MPICH_FILES) | _open_files(pid, MPICH_FILES)
    return found


def _mapped_files(pid: int, prefixes: tuple[str, ...]) -> set[tuple[str, int]]:
    found = set()
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.rstrip("\n").split(None, 5)
                if (
                    len(fields) == 6
                    and fields[5].startswith(prefixes)
                    and not fields[5].endswith(" (deleted)")
                ):
                    found.add((fields[5], int(fields[4])))
    except (OSError, ValueError):  # gone meanwhile
        return set()
    return found


def _open_files(pid: int, prefixes: tuple[str, ...]) -> set[tuple[str, int]]:
    found = set()
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone meanwhile
        return set()
    for fd in descriptors:
        link = f"/proc/{pid}/fd/{fd}"
        try:
            target = os.readlink(link)
            if target.startswith(prefixes) and not target.endswith(" (deleted)"):
                found.add((target, os.stat(link).st_ino))
        except OSError:  # closed meanwhile
            continue
    return found


def remove_held(files: Iterable[tuple[str, int]]) -> None:
    """Unlink each (path, inode) the run held that is still under its name with that inode."""
    for path, inode in files:
        _unlink_mine(path, inode)


def _unlink_mine(path: str, inode: int | None) -> None:
    """Unlink path if it is a regular file of this user (with this inode, if given). /tmp and
    /dev/shm are sticky, so nobody else can rename or replace a file of ours there; a name
    now owned by another user, or holding another inode, is someone else's and stays."""
    folder_path, name = os.path.split(path)
    try:
        folder = os.open(folder_path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if (
            found.st_uid == os.getuid()
            and stat.S_ISREG(found.st_mode)
            and inode in (None, found.st_ino)
        ):
            os.unlink(name, dir_fd=folder)
    except FileNotFoundError:  # MPICH removed it itself
        pass
    finally:
        os.close(folder)


@dataclass
class MadeByRun:
    """What a traced run's own trace proves it made: the MPICH_FILES it created, and the
    processes it ran (the creators of its System V segments)."""

    files: set[str] = field(default_factory=set)
    pids: set[int] = field(default_factory=set)


def made_by_run(trace_file: Path) -> MadeByRun:
    """The MPICH_FILES the traced run created itself (open with O_CREAT|O_EXCL succeeded, as
    its trace shows), and every pid in the trace: proof that a leftover is the run's, not
    another job's."""
    made = MadeByRun()
    with (
        contextlib.suppress(OSError),
        open(trace_file, encoding="utf-8", errors="surrogateescape") as lines,
    ):
        for call in TraceReader().calls(lines):
            made.pids.add(int(call.pid))
            path = call.ret_annotation
            if (
                call.syscall in {"open", "openat"}
                and call.succeeded
                and path is not None
                and path.startswith(MPICH_FILES)
                and any("O_CREAT" in arg and "O_EXCL" in arg for arg in call.args)
            ):
                made.files.add(unescape_strace(path))
    return made


def remove_made(made: MadeByRun) -> None:
    """Remove what the run's trace proves it made and left: its files, then the System V
    segments its processes created."""
    remove_mpich_files(made.files)
    remove_sysv_segments(made.pids)


def remove_mpich_files(paths: Iterable[str]) -> None:
    """Unlink each path that is still a regular file of this user."""
    for path in paths:
        _unlink_mine(path, None)


@dataclass(frozen=True)
class SysvSegment:
    """One line of /proc/sysvipc/shm, the fields that tell whose it is and whether it is left."""

    shmid: int
    size_bytes: int
    creator_pid: int
    attached: int
    uid: int
    marked_for_removal: bool


def sysv_segments(table: Path = SYSV_TABLE) -> list[SysvSegment]:
    """Every System V segment the kernel lists; none where there is no such table."""
    try:
        header, *rows = table.read_text(encoding="ascii").splitlines()
    except (OSError, ValueError):
        return []
    column = {name: index for index, name in enumerate(header.split())}
    found = []
    for row in rows:
        fields = row.split()
        try:
            found.append(
                SysvSegment(
                    shmid=int(fields[column["shmid"]]),
                    size_bytes=int(fields[column["size"]]),
                    creator_pid=int(fields[column["cpid"]]),
                    attached=int(fields[column["nattch"]]),
                    uid=int(fields[column["uid"]]),
                    marked_for_removal=bool(int(fields[column["perms"]], 8) & SHM_DEST),
                )
            )
        except (KeyError, IndexError, ValueError):
            continue
    return found


def remove_sysv_segments(creators: set[int], table: Path = SYSV_TABLE) -> list[int]:
    """Remove each System V segment of this user that one of `creators` made and left: not
    marked for removal and attached by nobody (its creator is gone). The ids removed.

    A segment removed meanwhile frees its id, which the kernel then gives out with a new
    sequence number, so the id checked is not another's a moment later."""
    removed = []
    libc = ctypes.CDLL(None, use_errno=True)
    for segment in sysv_segments(table):
        if (
            segment.creator_pid in creators
            and segment.uid == os.getuid()
            and not segment.marked_for_removal
            and segment.attached == 0
            and libc.shmctl(segment.shmid, IPC_RMID, None) == 0
        ):
            removed.append(segment.shmid)
    return removed
