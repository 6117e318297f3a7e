"""What a stopped MPI run leaves outside its folder is removed, and only what is proven its."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mpich_leftovers import STAND_IN_SYSV_BYTES

from iolab.hpc import mpi_leftovers


def test_only_the_mpich_files_a_run_created_are_removed(tmp_path: Path) -> None:
    """The proof is the run's trace: a file it created (O_CREAT|O_EXCL) goes, the same kind of
    file it did not create stays, and so does one it created that is now a link."""
    made = []
    for prefix in mpi_leftovers.MPICH_FILES:
        for tag in ("created", "other", "link"):
            path = f"{prefix}iolabtest{os.getpid()}{tag}"
            if tag == "link":
                os.symlink(tmp_path / "target", path)
            else:
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            made.append(path)
    trace = tmp_path / "trace.txt"
    trace.write_text(
        "".join(
            f'4242 openat(AT_FDCWD</x>, "{path}", O_RDWR|O_CREAT|O_EXCL, 0600) = 11<{path}>\n'
            for path in made
            if not path.endswith("other")
        )
        + "".join(  # opened, not created: no proof
            f'4243 openat(AT_FDCWD</x>, "{path}", O_RDWR|O_CREAT, 0600) = 12<{path}>\n'
            for path in made
            if path.endswith("other")
        )
    )
    try:
        run = mpi_leftovers.made_by_run(trace)
        assert run.files == {path for path in made if not path.endswith("other")}
        assert run.pids == {4242, 4243}
        mpi_leftovers.remove_made(run)
        assert [path for path in made if os.path.lexists(path)] == [
            path for path in made if not path.endswith("created")
        ]
    finally:
        for path in made:
            if os.path.lexists(path):
                os.unlink(path)


#: A stand-in rank: maps its first argument and closes it (as MPICH does with its segment),
#: holds the second open, opens the third and unlinks it (as UCX does), then waits.
MAPPER = (
    "import mmap, os, sys, time\n"
    "fd = os.open(sys.argv[1], os.O_RDWR); kept = mmap.mmap(fd, 4096); os.close(fd)\n"
    "held = open(sys.argv[2], 'rb'); gone = open(sys.argv[3], 'rb'); os.unlink(sys.argv[3])\n"
    "print('ready', flush=True); time.sleep(30)\n"
)


def test_what_a_process_maps_or_holds_open_is_found_and_removed() -> None:
    """Mapped (MPICH's segment), open (Hydra's topology file, UCX's segment between creating
    and unlinking it): each proves the file the run's. One already unlinked is not listed."""
    tag = f"iolabtest{os.getpid()}"
    mapped = Path(mpi_leftovers.SEGMENT_DIR) / f"{mpi_leftovers.MPICH_SEGMENT_PREFIX}{tag}_0"
    held = Path(f"/tmp/hydra_hwloc_xmlfile_{tag}")
    unlinked = Path(mpi_leftovers.SEGMENT_DIR) / f"{mpi_leftovers.UCX_SEGMENT_PREFIX}{tag}"
    for path in (mapped, held, unlinked):
        path.write_bytes(b"\0" * 4096)
    holder = subprocess.Popen(
        [sys.executable, "-c", MAPPER, str(mapped), str(held), str(unlinked)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        found = mpi_leftovers.held_files([holder.pid])
        assert found == {(str(mapped), mapped.stat().st_ino), (str(held), held.stat().st_ino)}
        holder.kill()
        holder.wait()
        mpi_leftovers.remove_held(found)
        assert not mapped.exists() and not held.exists()
    finally:
        holder.kill()
        holder.wait()
        for path in (mapped, held, unlinked):
            path.unlink(missing_ok=True)


def test_a_name_that_now_holds_another_file_is_left() -> None:
    """Removed and made again meanwhile (another job's segment under a reused name): the
    inode differs, so it stays."""
    path = Path(mpi_leftovers.SEGMENT_DIR) / f"{mpi_leftovers.MPICH_SEGMENT_PREFIX}iolabtest_x"
    path.write_bytes(b"old")
    inode = path.stat().st_ino
    try:
        replacement = path.with_name(path.name + ".new")
        replacement.write_bytes(b"new")
        replacement.replace(path)
        assert path.stat().st_ino != inode
        mpi_leftovers.remove_held({(str(path), inode)})
        assert path.read_bytes() == b"new"
    finally:
        path.unlink(missing_ok=True)


def test_the_kernels_table_of_system_v_segments_is_read_by_its_header(tmp_path: Path) -> None:
    table = tmp_path / "shm"
    table.write_text(
        "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid"
        "  cgid      atime      dtime      ctime                   rss                  swap\n"
        "         0      32769  1600               4296704  4242  4242      1  1003  1003  1003"
        "  1003 1796020681          0 1796020681                  4096                     0\n"
        "         0      32770   600                  4096  4243     0      0  1003  1003  1003"
        "  1003          0          0 1796020681                     0                     0\n"
    )
    assert mpi_leftovers.sysv_segments(table) == [
        mpi_leftovers.SysvSegment(32769, 4296704, 4242, 1, 1003, marked_for_removal=True),
        mpi_leftovers.SysvSegment(32770, 4096, 4243, 0, 1003, marked_for_removal=False),
    ]
    assert mpi_leftovers.sysv_segments(tmp_path / "absent") == []


@pytest.fixture
def left_segment() -> Iterator[tuple[int, int]]:
    """A System V segment as a rank stopped before removing it leaves one: (id, creator pid),
    made by a child that exits at once; removed at the end whatever the test did. Its size
    marks it as the tests', so the leftover check of a test beside it does not count it."""
    made = subprocess.run(
        [
            sys.executable,
            "-c",
            "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "  # IPC_PRIVATE,
            f"print(libc.shmget(0, {STAND_IN_SYSV_BYTES}, 0o1600), os.getpid())",  # IPC_CREAT
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    shmid, creator = map(int, made.stdout.split())
    if shmid < 0:
        pytest.skip("System V shared memory is not available here (shmget failed)")
    yield shmid, creator
    import ctypes

    ctypes.CDLL(None).shmctl(shmid, mpi_leftovers.IPC_RMID, None)


def _present(shmid: int) -> bool:
    return any(segment.shmid == shmid for segment in mpi_leftovers.sysv_segments())


def test_a_system_v_segment_is_removed_only_when_a_process_of_the_run_made_it(
    left_segment: tuple[int, int],
) -> None:
    shmid, creator = left_segment
    assert _present(shmid)
    assert shmid not in mpi_leftovers.remove_sysv_segments({creator + 1, os.getpid()})
    assert _present(shmid), "a segment another process made was removed"
    assert shmid in mpi_leftovers.remove_sysv_segments({creator})
    assert not _present(shmid)
