"""What MPICH left of this user's runs in /tmp and /dev/shm: the check every test ends with.

A run stopped the wrong way leaves Hydra's topology file (/tmp/hydra_hwloc_xmlfile_*), its
ranks' shared memory (/dev/shm/mpich_shm_*, 2 MiB each) and UCX's (/dev/shm/ucx_shm_posix_*
and System V segments, 4 MiB) on a login node shared by everybody; CI found such files after
passing runs, with no test to blame. A System V segment is left when nobody has it attached,
it is not marked for removal and its creator is gone. conftest.py lists
these files before and after each test and at the ends of the session, and fails the test
(or the run) that left one. Files of other users, and files present before, are not counted;
while an MPI process of this user is still alive (another test's run, beside this one under
pytest-xdist) nothing can be told apart, and the check waits for the session's end.
"""

from __future__ import annotations

import os

from iolab.hpc.mpi_leftovers import MPICH_FILES, sysv_segments

#: Programs whose files may still be in use: a leftover is only one once none of them runs.
MPI_PROGRAMS = (b"mpiexec", b"hydra_pmi_proxy", b"mpiio_demo.py")
#: In the names of the stand-ins tests make for MPICH's files (and remove): not MPICH's, and
#: made beside the other test worker's checks.
STAND_IN = "iolabtest"
#: The size of the System V segments tests make as stand-ins: not one UCX or MPICH asks for.
STAND_IN_SYSV_BYTES = 4099


def mpich_files(stand_ins: bool = False) -> set[tuple[str, int]]:
    """(path, inode) of each MPICH file of this user in /tmp and /dev/shm, and (a name,
    creator pid) of each System V segment of this user left; the tests' own stand-ins only if
    asked for."""
    found = {
        (f"System V shared memory {segment.shmid}", segment.creator_pid)
        for segment in sysv_segments()
        if segment.uid == os.getuid()
        and (segment.size_bytes != STAND_IN_SYSV_BYTES or stand_ins)
        and segment.attached == 0
        and not segment.marked_for_removal
        and not os.path.exists(f"/proc/{segment.creator_pid}")
    }
    for prefix in MPICH_FILES:
        folder, start = os.path.split(prefix)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.startswith(start) or (STAND_IN in entry.name and not stand_ins):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:  # removed meanwhile
                continue
            if st.st_uid == os.getuid():
                found.add((entry.path, st.st_ino))
    return found


def mpi_running() -> bool:
    """True while a process of this user runs mpiexec, a Hydra proxy or the MPI-IO demo."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != os.getuid():
                continue
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                words = cmdline.read().split(b"\0")
        except OSError:  # ended meanwhile
            continue
        if any(os.path.basename(word) in MPI_PROGRAMS for word in words[:3]):
            return True
    return False


def left_since(before: set[tuple[str, int]], stand_ins: bool = False) -> list[str]:
    """The MPICH files made since `before` that are still there with nothing of MPI running
    (checked after listing them, so a run that ended meanwhile took its files with it);
    [] when an MPI run of this user is still alive and may yet remove its own."""
    new = mpich_files(stand_ins) - before
    if not new or mpi_running():
        return []
    still = mpich_files(stand_ins)
    return sorted(path for path, inode in new if (path, inode) in still)
