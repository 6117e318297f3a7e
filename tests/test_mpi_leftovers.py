"""What a stopped MPI run leaves outside its folder is removed, and only what is proven its."""

from __future__ import annotations

import os
import subprocess
import sys
import time
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


def test_a_ucx_segment_a_rank_holds_is_found_and_removed(tmp_path: Path) -> None:
    """UCX names its segment only between creating and unlinking it: a process of the run
    that holds it open under its name then (stopped in between) proves it the run's."""
    path = (
        Path(mpi_leftovers.SEGMENT_DIR)
        / f"{mpi_leftovers.UCX_SEGMENT_PREFIX}iolabtest{os.getpid()}"
    )
    path.write_bytes(b"\0" * 4096)
    holder = subprocess.Popen(["/bin/sh", "-c", f"exec 3<'{path}'; sleep 30"])
    try:
        deadline = time.monotonic() + 10
        while not mpi_leftovers.shared_segments(holder.pid):
            assert time.monotonic() < deadline, "the holder never opened the segment"
            time.sleep(0.01)
        found = mpi_leftovers.shared_segments(holder.pid)
        assert found == {(path.name, path.stat().st_ino)}
        holder.kill()
        holder.wait()
        mpi_leftovers.remove_segments(found)
        assert not path.exists()
    finally:
        holder.kill()
        holder.wait()
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
