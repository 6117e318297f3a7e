"""Freezing a launcher's process tree whole (iolab.measure.frozen_tree): every process below it,
in any session, stopped before anything is read; strangers never signalled; then all killed."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from iolab.measure import frozen_tree
from iolab.measure.process_tree import descendants, process_state

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

#: A shell with a child in a session of its own (as Hydra starts its proxies and ranks),
#: which has a child of its own, and a second child.
ACROSS_SESSIONS = "setsid sh -c 'sleep 60 & wait' & sleep 60 & wait"
#: A shell that starts a new process every 20 ms until it is stopped.
FORKING = "while :; do sleep 60 & sleep 0.02; done"


def _started(script: str, processes: int) -> subprocess.Popen:
    proc = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True)
    deadline = time.monotonic() + 20
    while len(descendants(proc.pid)) < processes:
        assert time.monotonic() < deadline, f"{script!r} never started {processes} processes"
        time.sleep(0.01)
    return proc


def _all_in(pids: set[int], states: set[str | None], seconds: float) -> bool:
    """True once every one of pids is in one of states (None: no such process) within
    seconds: signals land, and a stopped or ended process is seen, a moment after they are
    sent."""
    deadline = time.monotonic() + seconds
    while {process_state(pid) for pid in pids} - states:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _gone(pids: set[int]) -> bool:
    """True once none of pids is alive (an orphan is reaped by init a moment after it ends)."""
    return _all_in(pids, {None, "Z"}, 20)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen]]:
    """The trees a test starts: killed and waited for however the test ends."""
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        for pid in descendants(proc.pid):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        proc.wait()


def test_a_tree_across_sessions_is_frozen_whole_then_killed(started) -> None:
    proc = _started(ACROSS_SESSIONS, 4)
    started.append(proc)
    tree = frozen_tree.freeze(proc.pid, 10)
    try:
        assert tree.pids == descendants(proc.pid) and len(tree.pids) == 4
        assert {process_state(pid) for pid in tree.pids} == {"T"}
    finally:
        frozen_tree.kill(tree, 10)
    assert proc.wait(timeout=10) == -9
    assert _gone(tree.pids)


def test_a_tree_that_keeps_starting_processes_is_caught_whole(started) -> None:
    proc = _started(FORKING, 6)
    started.append(proc)
    tree = frozen_tree.freeze(proc.pid, 10)
    try:
        time.sleep(0.2)  # ten more would have started by now, had one process escaped
        now = descendants(proc.pid)
        # tree.pids may also hold a sleep that ended as the shell stopped, reaped meanwhile
        assert now <= tree.pids
        # one caught in uninterruptible I/O (D) as the tree was stopped has SIGSTOP pending
        # and stops as it leaves the kernel (seen once in CI, 2026-12-03, under heavy load)
        assert _all_in(now, {"T", "Z", None}, 10), {pid: process_state(pid) for pid in now}
        assert descendants(proc.pid) <= tree.pids  # and none started meanwhile
    finally:
        frozen_tree.kill(tree, 10)
    assert _gone(tree.pids)


def test_a_process_not_below_the_root_is_never_signalled(started, monkeypatch) -> None:
    """A pid listed as the tree's, but whose parent is not (ended, its pid reused by a
    stranger): left alone."""
    proc = _started("sleep 60", 1)
    stranger = _started("sleep 60", 1)
    started.extend([proc, stranger])
    monkeypatch.setattr(frozen_tree, "descendants_top_down", lambda root: [proc.pid, stranger.pid])
    tree = frozen_tree.freeze(proc.pid, 10)
    frozen_tree.kill(tree, 10)
    assert tree.pids == {proc.pid}
    assert proc.wait(timeout=10) == -9
    assert process_state(stranger.pid) not in ("T", "t") and stranger.poll() is None


def test_without_pidfd_open_the_pids_are_signalled(started, monkeypatch) -> None:
    """Linux before 5.3 (older cluster login nodes) has no pidfd_open: still frozen, killed."""

    def no_pidfd(pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    proc = _started(ACROSS_SESSIONS, 4)
    started.append(proc)
    tree = frozen_tree.freeze(proc.pid, 10)
    try:
        assert set(tree.handles.values()) == {None} and len(tree.pids) == 4
        assert {process_state(pid) for pid in tree.pids} == {"T"}
    finally:
        frozen_tree.kill(tree, 10)
    assert proc.wait(timeout=10) == -9
    assert _gone(tree.pids)


def test_a_freeze_that_fails_halfway_leaves_nothing_stopped(started, monkeypatch) -> None:
    """Stopped for good, a process would hold its files and slots until someone noticed: what
    was frozen before the failure is killed."""
    proc = _started(ACROSS_SESSIONS, 4)
    started.append(proc)

    def failing_state(pid: int) -> str:
        raise RuntimeError("reading /proc failed")

    monkeypatch.setattr(frozen_tree, "process_state", failing_state)
    with pytest.raises(RuntimeError):
        frozen_tree.freeze(proc.pid, 10)
    assert proc.wait(timeout=10) == -9
