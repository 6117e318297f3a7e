"""Counting a run's processes and threads from /proc: exact for a tree we start, robust to
command names with spaces and parentheses, empty for a process that is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iolab.measure.footprint import PhaseSampler
from iolab.measure.process_tree import (
    Tasks,
    children_of,
    descendants,
    descendants_top_down,
    parent_of,
    process_state,
    tree_tasks,
)

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

#: A shell with two children that live long enough to be counted.
TREE = "sleep 30 & sleep 30 & wait"
#: A Python process with three threads of its own besides the main one.
THREADED = (
    "import threading, time; e = threading.Event()\n"
    "ts = [threading.Thread(target=e.wait) for _ in range(3)]\n"
    "[t.start() for t in ts]; print('ready', flush=True); time.sleep(30)"
)


def _settled(pid: int, processes: int) -> Tasks:
    """The tree's count once it has reached `processes` (forks take a moment)."""
    deadline = time.monotonic() + 20
    while (tasks := tree_tasks(pid)).processes < processes and time.monotonic() < deadline:
        time.sleep(0.05)
    return tasks


def test_a_shell_and_its_two_children_are_three_processes() -> None:
    shell = subprocess.Popen(["bash", "-c", TREE])
    try:
        assert _settled(shell.pid, 3) == Tasks(3, 3)
        children = children_of(shell.pid)
        assert len(children) == 2 and all(parent_of(child) == shell.pid for child in children)
        assert descendants(shell.pid) == {shell.pid, *children}
    finally:
        subprocess.run(["pkill", "-P", str(shell.pid)], check=False)
        shell.wait(timeout=30)
    assert tree_tasks(shell.pid) == Tasks()  # gone: nothing, not a guess
    assert descendants(shell.pid) == set() and parent_of(shell.pid) is None


def test_threads_are_counted_as_a_user_limit_counts_them() -> None:
    child = subprocess.Popen([sys.executable, "-c", THREADED], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        assert tree_tasks(child.pid) == Tasks(1, 4)
    finally:
        child.kill()
        child.wait(timeout=30)


def test_a_command_name_with_spaces_and_parentheses_is_parsed(tmp_path: Path) -> None:
    for pid, stat in {
        10: "10 (lab) S 1 " + "0 " * 15 + "2 0",
        11: "11 (a) b) c) S 10 " + "0 " * 15 + "5 0",
        12: "12 (other) S 1 " + "0 " * 15 + "7 0",
    }.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(stat)
    (tmp_path / "self").mkdir()
    assert tree_tasks(10, proc=tmp_path) == Tasks(2, 7)


def test_a_phase_keeps_the_most_processes_its_run_held() -> None:
    shell = subprocess.Popen(["bash", "-c", TREE])
    try:
        with PhaseSampler({}, interval_s=60, tasks_of=shell.pid) as sampler:
            sampler.begin("busy")
            _settled(shell.pid, 3)
            time.sleep(1.2)  # a background count or two
        subprocess.run(["pkill", "-P", str(shell.pid)], check=False)
    finally:
        shell.wait(timeout=30)
    (phase,) = sampler.as_list()
    assert phase["tasks_peak"] == {"processes": 3, "threads": 3}


def test_a_tree_is_listed_parents_first_with_each_state(tmp_path: Path) -> None:
    """Top down, so a signaller can check each process is the child of one already seen; a
    stopped process reads T, one gone None."""
    shell = subprocess.Popen(["bash", "-c", "bash -c 'sleep 30 & wait' & wait"])
    try:
        assert _settled(shell.pid, 3).processes == 3
        order = descendants_top_down(shell.pid)
        assert order[0] == shell.pid and set(order) == descendants(shell.pid)
        assert all(parent_of(pid) in order[:index] for index, pid in enumerate(order) if index)
        os.kill(shell.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while process_state(shell.pid) != "T":
            assert time.monotonic() < deadline, process_state(shell.pid)
            time.sleep(0.01)
    finally:
        for pid in descendants(shell.pid):
            os.kill(pid, signal.SIGKILL)
        shell.wait()
    assert process_state(shell.pid) is None and descendants_top_down(shell.pid) == []
