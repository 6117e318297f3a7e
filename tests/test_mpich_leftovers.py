"""The check that fails a test leaving MPICH's files in /tmp or /dev/shm (conftest.py)."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import mpich_leftovers
import pytest

from iolab.hpc.mpi_leftovers import MPICH_FILES


@pytest.fixture
def made() -> Iterator[list[str]]:
    """Names this test makes in /tmp and /dev/shm, removed whatever happens."""
    paths: list[str] = []
    yield paths
    for path in paths:
        if os.path.lexists(path):
            os.unlink(path)


@pytest.mark.parametrize("prefix", MPICH_FILES)
def test_a_new_file_of_this_user_is_a_leftover_once_no_mpi_runs(
    prefix: str, made: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if not os.path.isdir(os.path.dirname(prefix)):
        pytest.skip(f"no {os.path.dirname(prefix)} on this machine")
    monkeypatch.setattr(mpich_leftovers, "mpi_running", lambda: False)
    before = mpich_leftovers.mpich_files(stand_ins=True)
    path = f"{prefix}{mpich_leftovers.STAND_IN}{os.getpid()}"
    made.append(path)
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    assert mpich_leftovers.left_since(before, stand_ins=True) == [path]
    assert mpich_leftovers.left_since(before) == []  # the tests' stand-ins are not MPICH's
    # present before: not this test's
    now = mpich_leftovers.mpich_files(stand_ins=True)
    assert mpich_leftovers.left_since(now, stand_ins=True) == []
    # gone since the listing: not reported
    os.unlink(path)
    assert mpich_leftovers.left_since(before, stand_ins=True) == []


def test_nothing_is_a_leftover_while_an_mpi_program_of_this_user_runs(
    tmp_path: Path, made: list[str]
) -> None:
    program = tmp_path / "mpiexec"
    program.write_text("#!/bin/sh\nsleep 60\n")
    program.chmod(stat.S_IRWXU)
    before = mpich_leftovers.mpich_files(stand_ins=True)
    path = f"{MPICH_FILES[0]}{mpich_leftovers.STAND_IN}{os.getpid()}"
    made.append(path)
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    running = subprocess.Popen(["/bin/sh", str(program)])
    try:
        # until the child has exec'd the shell, /proc shows the forked python (seen in CI)
        deadline = time.monotonic() + 30
        while str(program).encode() not in Path(f"/proc/{running.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the stand-in mpiexec never started"
            time.sleep(0.01)
        assert mpich_leftovers.mpi_running()
        assert mpich_leftovers.left_since(before, stand_ins=True) == []
    finally:
        running.kill()
        running.wait()
