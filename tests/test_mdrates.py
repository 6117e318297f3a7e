"""mdtest-lite: exact operation counts, the two directory layouts, 3901-byte files, the caps,
and nothing left behind, also when a worker or the caller fails in the middle."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from iolab.core.errors import LabError
from iolab.storage import mdrates

ROOT = Path(__file__).resolve().parent.parent
OPERATIONS = ["File creation", "File stat", "File read", "File removal"]


def layout_after_each_phase(seen: dict) -> Callable[[str, Path], None]:
    """A between_phases hook that records how many files each subdirectory holds."""

    def look(operation: str, iteration_dir: Path) -> None:
        seen[operation] = {sub.name: len(os.listdir(sub)) for sub in iteration_dir.iterdir()}

    return look


@pytest.mark.parametrize(
    "shared_dir,expected",
    [
        (False, {"process.0": 30, "process.1": 30}),
        (True, {"shared": 60}),
    ],
)
@pytest.mark.slow
def test_counts_are_exact_in_both_layouts(tmp_path: Path, shared_dir: bool, expected: dict) -> None:
    seen: dict = {}
    table = mdrates.run_mdtest(
        tmp_path,
        30,
        processes=2,
        shared_dir=shared_dir,
        progress=False,
        between_phases=layout_after_each_phase(seen),
    )
    assert list(table["Operation"]) == OPERATIONS
    assert (table["ops_per_iteration"] == 60).all()
    assert seen["File creation"] == seen["File stat"] == seen["File read"] == expected
    assert seen["File removal"] == {name: 0 for name in expected}
    for column in mdrates.RATE_COLUMNS[:3]:
        assert (table[column] > 0).all()
    # One iteration: nothing to spread over, as in mdtest.
    assert (table["Max (ops/s)"] == table["Min (ops/s)"]).all()
    assert (table["Std Dev (ops/s)"] == 0).all()
    assert (table["shared_dir"] == shared_dir).all() and (table["processes"] == 2).all()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_the_before_hook_sees_each_phase_start_and_the_after_hook_its_end(tmp_path: Path) -> None:
    """The two hooks enclose each phase and nothing else (a server's counters read in them
    are that phase's: iolab.storage.cephfs_mdrates)."""
    calls = []

    def hook(when: str) -> Callable[[str, Path], None]:
        def look(operation: str, iteration_dir: Path) -> None:
            files = sum(len(os.listdir(sub)) for sub in iteration_dir.iterdir())
            calls.append((when, operation, files))

        return look

    mdrates.run_mdtest(
        tmp_path,
        10,
        progress=False,
        before_phases=hook("before"),
        between_phases=hook("after"),
    )
    files_before = [0, 10, 10, 10]
    files_after = [10, 10, 10, 0]
    assert calls == [
        call
        for operation, before, after in zip(OPERATIONS, files_before, files_after, strict=True)
        for call in (("before", operation, before), ("after", operation, after))
    ]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_io500_hard_files_have_3901_bytes_in_every_iteration(tmp_path: Path) -> None:
    sizes: Counter = Counter()

    def stat_files(operation: str, iteration_dir: Path) -> None:
        if operation == "File creation":
            sizes.update(path.stat().st_size for path in iteration_dir.rglob("file.*"))

    table = mdrates.run_mdtest(
        tmp_path,
        25,
        processes=2,
        shared_dir=True,
        file_bytes=mdrates.IO500_HARD_FILE_BYTES,
        iterations=2,
        progress=False,
        between_phases=stat_files,
    )
    assert sizes == Counter({3901: 2 * 25 * 2})
    assert (table["iterations"] == 2).all() and (table["file_bytes"] == 3901).all()
    assert (table["Min (ops/s)"] <= table["Mean (ops/s)"]).all()
    assert (table["Mean (ops/s)"] <= table["Max (ops/s)"]).all()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("login_node")
@pytest.mark.parametrize(
    "files,processes,message",
    [
        (10_001, 2, "20002 files > 20000 files"),
        (100, 5, "5 processes > 4 processes"),
        (0, 1, "at least 1"),
    ],
)
def test_requests_beyond_the_caps_are_refused_before_anything_is_written(
    tmp_path: Path, files: int, processes: int, message: str
) -> None:
    with pytest.raises(LabError, match=message):
        mdrates.run_mdtest(tmp_path, files, processes=processes, progress=False)
    with pytest.raises(LabError, match=message):
        mdrates.mdtest_grid(
            tmp_path, processes=(1, processes), files_per_process=files, progress=False
        )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_failing_worker_is_reported_and_nothing_is_left(tmp_path: Path) -> None:
    def remove_one_file(operation: str, iteration_dir: Path) -> None:
        if operation == "File creation":
            next(iteration_dir.rglob("file.*")).unlink()

    with pytest.raises(LabError, match="failed in the file stat phase"):
        mdrates.run_mdtest(
            tmp_path, 20, processes=2, progress=False, between_phases=remove_one_file
        )
    assert multiprocessing.active_children() == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_an_interrupt_between_phases_stops_the_workers_and_removes_the_files(
    tmp_path: Path,
) -> None:
    def interrupt(operation: str, iteration_dir: Path) -> None:
        assert len(list(iteration_dir.rglob("file.*"))) == 40
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mdrates.run_mdtest(tmp_path, 20, processes=2, progress=False, between_phases=interrupt)
    assert multiprocessing.active_children() == []
    assert list(tmp_path.iterdir()) == []


def test_a_killed_worker_is_reported_and_nothing_is_left(tmp_path: Path) -> None:
    def kill_one_worker(operation: str, iteration_dir: Path) -> None:
        if operation == "File stat":
            victim = next(
                child
                for child in multiprocessing.active_children()
                if child.name.startswith("iolab-mdrates-")
            )
            os.kill(victim.pid, signal.SIGKILL)
            victim.join()

    with pytest.raises(LabError, match=rf"ended unexpectedly \(exit code -{signal.SIGKILL}\)"):
        mdrates.run_mdtest(
            tmp_path, 20, processes=2, progress=False, between_phases=kill_one_worker
        )
    assert multiprocessing.active_children() == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("delay", [0.0, 0.3, 1.5])
@pytest.mark.slow
def test_an_interrupted_command_says_one_sentence_and_leaks_nothing(
    tmp_path: Path, delay: float
) -> None:
    """Ctrl-C at some moment of `iolab mdrates`: the lab's exit skips the interpreter's
    shutdown, so anything still registered with multiprocessing's resource tracker (a
    Barrier's or a Queue's semaphores) would be reported as leaked after the sentence."""
    argv = [
        sys.executable,
        "-m",
        "iolab",
        "mdrates",
        "--directory",
        str(tmp_path),
        "-n",
        "5000",
        "-P",
        "2",
        "--iterations",
        "10",
    ]
    proc = subprocess.Popen(
        argv, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while not any(tmp_path.iterdir()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # the run has started once its directory exists
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err and "leaked" not in err, err
    if proc.returncode != 0:  # not done before the interrupt
        assert proc.returncode == 130 and err.strip().splitlines() == ["interrupted."], err
    time.sleep(0.5)  # the resource tracker speaks after the command has ended
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_the_grid_is_tidy(tmp_path: Path) -> None:
    grid = mdrates.mdtest_grid(
        tmp_path,
        processes=(1, 2),
        files_per_process=20,
        shared_dir=(False, True),
        file_bytes=(3901,),
        progress=False,
    )
    assert len(grid) == 2 * 2 * 4
    combos = grid.groupby(["processes", "shared_dir"])["Operation"].apply(list)
    assert all(operations == OPERATIONS for operations in combos)
    assert (grid["ops_per_iteration"] == grid["processes"] * 20).all()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.usefixtures("login_node")
def test_cli_prints_json_rows_and_refuses_the_cap_in_one_line(tmp_path: Path) -> None:
    def iolab(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "iolab", "mdrates", "--directory", str(tmp_path), *args],
            cwd=ROOT,
            text=True,
            capture_output=True,
            timeout=300,
        )

    proc = iolab("-n", "20", "-P", "2", "--shared", "--bytes", "3901", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [row["Operation"] for row in rows] == OPERATIONS
    assert all(row["ops_per_iteration"] == 40 and row["file_bytes"] == 3901 for row in rows)
    refused = iolab("-n", "20000", "-P", "2")
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: a run of 40000 files in 2 processes is too big")
    assert "--i-am-on-a-compute-node" in refused.stderr and "Traceback" not in refused.stderr
    assert list(tmp_path.iterdir()) == []
