"""Metadata rates in the manner of mdtest: an "mdtest-lite" for a laptop or a login node.

Many small files are slow on a parallel or network file system because of metadata, not
bytes: every create, stat, open and unlink asks a metadata server, one round trip each.
mdtest (part of the IOR suite, and the source of IO500's md phases) measures these rates,
but it needs MPI and a build. This module measures mdtest's four file phases with Python
processes on one machine:

* File creation: open(O_CREAT|O_EXCL), write the payload (if any), close;
* File stat: stat(), which also checks that each file has the payload's size;
* File read: open, read the payload, close (open and close only for empty files, as mdtest);
* File removal: unlink.

P processes handle n files each, either in one directory per process (mdtest -u; IO500's
mdtest-easy, with empty files) or all in one shared directory (IO500's mdtest-hard, which
writes 3901 bytes per file). Every phase starts on the parent's word, sent to all processes
at once (a barrier, like mdtest's MPI_Barrier), so all begin together, and its rate is all
processes' operations divided by the time of the slowest process, the way mdtest rates a
phase. Repeating the run (iterations, mdtest -i) gives
mdtest's SUMMARY columns Max, Min, Mean and Std Dev over the iterations (the standard
deviation divided by N, as mdtest computes it).

The read phase follows the create phase as in mdtest on one node, so the files are still
in this machine's caches; making metadata cold needs root (drop_caches) or a second node.

Processes are started with "spawn": a Jupyter kernel runs threads, and forking a process
with threads can deadlock the child, while spawn works alike from a shell, a notebook and
macOS. Starting them is not timed: all are running before the first phase starts.

Everything happens in a fresh directory inside the target, removed with its contents at
the end, also on an error or Ctrl-C (the worker processes are stopped first, so none is
still creating files). The defaults are gentle on a shared login node: 1000 files per
process, and outside a batch job no more files and processes than the login-node budget
allows (iolab.core.budget).
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import cast

import pandas as pd
from tqdm import tqdm

from iolab.core.budget import check
from iolab.core.capacity import check_capacity
from iolab.core.class_folder import heavy_turn
from iolab.core.errors import LabError, interrupts_held
from iolab.core.wording import counted
from iolab.core.workspace import public_text
from iolab.measure.context import mount_for
from iolab.storage.run_sizes import DEFAULT_FILES_PER_PROCESS, MAX_FILE_BYTES
from iolab.storage.sweep import run_directory

#: mdtest's name of each phase, in the order the phases run.
OPERATIONS = {
    "create": "File creation",
    "stat": "File stat",
    "read": "File read",
    "remove": "File removal",
}
RATE_COLUMNS = ["Max (ops/s)", "Min (ops/s)", "Mean (ops/s)", "Std Dev (ops/s)"]
#: The file size of IO500's mdtest-hard phase (mdtest -w 3901 -e 3901).
IO500_HARD_FILE_BYTES = 3901
#: How long the parent waits for a worker to stop before it kills it.
STOP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class _Layout:
    """Where each process's files live; sent to every worker, so plain picklable data."""

    run_dir: str
    files_per_process: int
    processes: int
    shared_dir: bool
    file_bytes: int

    def iteration_dir(self, iteration: int) -> Path:
        return Path(self.run_dir) / f"iteration.{iteration}"

    def process_dir(self, iteration: int, rank: int) -> Path:
        """The shared directory, or the directory of process `rank` (mdtest -u)."""
        name = "shared" if self.shared_dir else f"process.{rank}"
        return self.iteration_dir(iteration) / name

    def directories(self, iteration: int) -> list[Path]:
        return sorted({self.process_dir(iteration, rank) for rank in range(self.processes)})

    def files(self, iteration: int, rank: int) -> list[str]:
        """File names carry the rank, so processes never collide in a shared directory."""
        directory = self.process_dir(iteration, rank)
        return [str(directory / f"file.{rank}.{index}") for index in range(self.files_per_process)]


def _create(paths: list[str], payload: bytes) -> int:
    """Create every file (failing if it exists, as a fresh create must) and write the payload."""
    for path in paths:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            if payload and os.write(fd, payload) != len(payload):
                raise OSError(f"short write to {path}")
        finally:
            os.close(fd)
    return 0


def _stat(paths: list[str], payload: bytes) -> int:
    """Stat every file; the number of files whose size is not the payload's."""
    return sum(os.stat(path).st_size != len(payload) for path in paths)


def _read(paths: list[str], payload: bytes) -> int:
    """Open, read and close every file; the number of files that returned too few bytes."""
    short = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            if payload and len(os.read(fd, len(payload))) != len(payload):
                short += 1
        finally:
            os.close(fd)
    return short


def _remove(paths: list[str], payload: bytes) -> int:
    """Unlink every file."""
    for path in paths:
        os.unlink(path)
    return 0


#: What each phase does to a process's files; each returns how many files were wrong.
_PHASES: dict[str, Callable[[list[str], bytes], int]] = {
    "create": _create,
    "stat": _stat,
    "read": _read,
    "remove": _remove,
}


def _describe(err: BaseException) -> str:
    """An error as a short phrase without the home directory or the user name."""
    if isinstance(err, OSError) and err.strerror:
        return f"{err.strerror}: {public_text(err.filename)}" if err.filename else err.strerror
    return f"{type(err).__name__}: {public_text(str(err))}"


def _worker(rank: int, layout: _Layout, iterations: int, parent: Connection) -> None:
    """One process: every phase of every iteration on its own files, each on the parent's word.

    The parent sends "go" to every process at once to start a phase, and each answers with
    its timing when done; an error goes back as text instead. Ctrl-C is left to the parent,
    which stops the run by closing the pipes (a waiting process sees the end and returns).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    phase = "create"
    try:
        payload = os.urandom(layout.file_bytes)
        for iteration in range(iterations):
            paths = layout.files(iteration, rank)
            for phase, run_phase in _PHASES.items():
                parent.recv()
                start = time.perf_counter()
                wrong = run_phase(paths, payload)
                parent.send(
                    ("done", (iteration, phase, time.perf_counter() - start, len(paths), wrong))
                )
    except (EOFError, BrokenPipeError):
        return  # the parent stopped the run; it reports why
    except Exception as err:  # any failure reaches the parent as text, not as a traceback
        with contextlib.suppress(OSError):
            parent.send(("error", (phase, _describe(err))))


def _stop(processes: list) -> None:
    """End every worker still running and wait for it, so none writes after the cleanup."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(STOP_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            process.join()


def _died(process: BaseProcess) -> LabError:
    """A worker's pipe closed before it answered: it was killed or ran out of memory."""
    process.join(STOP_TIMEOUT_S)
    code = process.exitcode if process.exitcode is not None else "?"
    return LabError(
        f"a test process ended unexpectedly (exit code {code}); check the "
        "machine's memory and process limits, then try again"
    )


def _run_phase(workers: dict[Connection, tuple[int, BaseProcess]], directory: Path) -> list[tuple]:
    """Start one phase in every worker together and wait until all have finished it.

    Returns (rank, iteration, phase, seconds, ops, wrong) per worker. A worker that fails
    says why; one that dies closes its pipe, which ends the wait too.
    """
    for connection, (_, process) in workers.items():
        try:
            connection.send("go")
        except BrokenPipeError:
            raise _died(process) from None
    rows = []
    waiting = set(workers)
    while waiting:
        # wait returns those of the connections given that are ready (typeshed: any kind)
        for connection in cast("list[Connection]", wait(list(waiting))):
            rank, process = workers[connection]
            try:
                kind, detail = connection.recv()
            except EOFError:
                raise _died(process) from None
            if kind == "error":
                phase, reason = detail
                raise LabError(
                    f"process {rank} failed in the {OPERATIONS[phase].lower()} "
                    f"phase ({reason}); make sure {public_text(directory)} has room "
                    "and that nothing else changes it during the run, then try again"
                )
            rows.append((rank, *detail))
            waiting.discard(connection)
    return rows


#: A hook run in this process while the workers wait: the operation's name and the
#: iteration's directory.
PhaseHook = Callable[[str, Path], None]


def _run_processes(
    layout: _Layout,
    iterations: int,
    show: bool,
    between_phases: PhaseHook | None,
    before_phases: PhaseHook | None = None,
) -> list[tuple]:
    """Start the workers, lead them through the phases, and return their timings.

    Plain pipes, one per worker, carry the parent's "go" and the workers' answers: they hold
    no named semaphores, so an interrupted run leaves nothing for the resource tracker to
    report (a Barrier and a Queue did, after the lab's one-sentence exit).
    """
    context = multiprocessing.get_context("spawn")
    workers: dict[Connection, tuple[int, BaseProcess]] = {}
    try:
        # A "spawn" start writes the worker's arguments down a pipe to the new interpreter; a
        # Ctrl-C in the middle of that write leaves the worker reading half of them, and it
        # prints a traceback (seen in CI). The interrupt waits until every worker has all.
        with interrupts_held():
            for rank in range(layout.processes):
                mine, theirs = context.Pipe()
                process = context.Process(
                    target=_worker,
                    name=f"iolab-mdrates-{rank}",
                    daemon=True,
                    args=(rank, layout, iterations, theirs),
                )
                workers[mine] = (rank, process)
                process.start()
                theirs.close()  # its end now lives in the worker; a death reads as EOF here
        rows = []
        with tqdm(
            total=iterations * len(OPERATIONS), desc="mdtest-lite", disable=not show, leave=False
        ) as bar:
            for iteration in range(iterations):
                for directory in layout.directories(iteration):
                    directory.mkdir(parents=True)
                for operation in OPERATIONS.values():
                    bar.set_postfix_str(f"{operation}, iteration {iteration + 1}")
                    if before_phases is not None:
                        before_phases(operation, layout.iteration_dir(iteration))
                    rows += _run_phase(workers, Path(layout.run_dir).parent)
                    if between_phases is not None:
                        between_phases(operation, layout.iteration_dir(iteration))
                    bar.update()
                for directory in layout.directories(iteration):
                    directory.rmdir()
                layout.iteration_dir(iteration).rmdir()
        return rows
    finally:
        for connection in workers:
            connection.close()  # a worker waiting for "go" sees the end and returns
        _stop([process for _, process in workers.values()])


def _check_request(
    files_per_process: int,
    processes: int,
    file_bytes: int,
    iterations: int,
    compute_node: bool | None,
) -> None:
    """Refuse settings that make no sense or that exceed the login-node budget here."""
    if files_per_process < 1 or processes < 1 or iterations < 1:
        raise LabError(
            "files per process, processes and iterations must each be at least 1; "
            "pass positive numbers"
        )
    if not 0 <= file_bytes <= MAX_FILE_BYTES:
        raise LabError(
            f"{file_bytes} bytes per file is outside 0..{MAX_FILE_BYTES}; measure "
            "larger files with `python -m iolab sweep`"
        )
    total = files_per_process * processes
    check(
        f"a run of {total} files in {counted(processes, 'process')}",
        files=total,
        processes=processes,
        fix="use fewer files or processes",
        compute_node=compute_node,
    )


def _table(timings: list[tuple], layout: _Layout, iterations: int, directory: Path) -> pd.DataFrame:
    """mdtest's SUMMARY table: per operation the rate over iterations, with the settings."""
    frame = pd.DataFrame(timings, columns=["rank", "iteration", "phase", "seconds", "ops", "wrong"])
    per_phase = frame.groupby(["phase", "iteration"]).agg(
        seconds=("seconds", "max"), ops=("ops", "sum"), wrong=("wrong", "sum")
    )
    wrong = int(per_phase["wrong"].sum())
    if wrong:
        raise LabError(
            f"{wrong} files did not have the {layout.file_bytes} bytes written to "
            f"them; make sure nothing else changes {public_text(directory)} during "
            "the run"
        )
    rows = []
    for phase, operation in OPERATIONS.items():
        phase_rows = per_phase.loc[phase]
        rates = list(phase_rows["ops"] / phase_rows["seconds"])
        rows.append(
            {
                "Operation": operation,
                "Max (ops/s)": max(rates),
                "Min (ops/s)": min(rates),
                "Mean (ops/s)": statistics.fmean(rates),
                "Std Dev (ops/s)": statistics.pstdev(rates),
                "ops_per_iteration": int(phase_rows["ops"].iloc[0]),
                "iterations": iterations,
                "processes": layout.processes,
                "files_per_process": layout.files_per_process,
                "shared_dir": layout.shared_dir,
                "file_bytes": layout.file_bytes,
                "location": public_text(directory.resolve()),
                "fs_type": mount_for(directory).fs_type,
            }
        )
    return pd.DataFrame(rows)


def run_mdtest(
    directory: Path | str,
    files_per_process: int = DEFAULT_FILES_PER_PROCESS,
    processes: int = 1,
    shared_dir: bool = False,
    file_bytes: int = 0,
    iterations: int = 1,
    *,
    progress: bool | None = None,
    compute_node: bool | None = None,
    between_phases: PhaseHook | None = None,
    before_phases: PhaseHook | None = None,
) -> pd.DataFrame:
    """Create, stat, read and remove files_per_process x processes files; mdtest's table.

    One row per operation ("File creation", "File stat", "File read", "File removal") with
    Max, Min, Mean and Std Dev of the rate over the iterations in ops/s, the operations per
    iteration, the settings, and the location with its file-system type. `between_phases`,
    if given, is called in this process after every phase with the operation's name and the
    iteration's directory, while the workers wait: a way to look at the layout a phase left
    (tests and demonstrations do); `before_phases` likewise just before every phase starts,
    so that a server's counters read in the two hooks enclose that phase and nothing else
    (iolab.storage.cephfs_mdrates). A progress bar is shown when `progress` is True, or when
    it is None and stderr is a terminal. The login-node budget applies unless `compute_node`
    or a batch job lifts it (iolab.core.budget).
    """
    _check_request(files_per_process, processes, file_bytes, iterations, compute_node)
    directory = Path(directory)
    total = files_per_process * processes
    show = sys.stderr.isatty() if progress is None else progress
    with heavy_turn("mdrates"), run_directory(directory, "mdrates") as run_dir:
        blocks = -(-file_bytes // 4096) * 4096
        check_capacity(run_dir, total * blocks, total + processes + 1)
        layout = _Layout(str(run_dir), files_per_process, processes, shared_dir, file_bytes)
        timings = _run_processes(layout, iterations, show, between_phases, before_phases)
    return _table(timings, layout, iterations, directory)


def mdtest_grid(
    directory: Path | str,
    processes: Sequence[int] = (1, 2),
    files_per_process: int = DEFAULT_FILES_PER_PROCESS,
    shared_dir: Sequence[bool] = (False, True),
    file_bytes: Sequence[int] = (0, IO500_HARD_FILE_BYTES),
    iterations: int = 1,
    *,
    progress: bool | None = None,
    compute_node: bool | None = None,
) -> pd.DataFrame:
    """run_mdtest for every combination of processes, directory sharing and file size.

    The defaults cover IO500's two md phases in miniature: empty files in one directory per
    process (mdtest-easy) and 3901-byte files in one shared directory (mdtest-hard), plus
    the two mixed cases. Every combination is checked before the first one runs.
    """
    combinations = list(itertools.product(processes, shared_dir, file_bytes))
    for count, _, size in combinations:
        _check_request(files_per_process, count, size, iterations, compute_node)
    show = sys.stderr.isatty() if progress is None else progress
    tables = []
    for count, shared, size in tqdm(
        combinations, desc="mdtest-lite grid", disable=not show, leave=False
    ):
        tables.append(
            run_mdtest(
                directory,
                files_per_process,
                count,
                shared,
                size,
                iterations,
                progress=False,
                compute_node=compute_node,
            )
        )
    return pd.concat(tables, ignore_index=True)


def describe_run(table: pd.DataFrame) -> str:
    """One line that says what a run_mdtest table measured, like mdtest's header."""
    first = table.iloc[0]
    sharing = "one shared directory" if first["shared_dir"] else "one directory per process"

    return (
        f"mdtest-lite: {counted(first['processes'], 'process')} x "
        f"{counted(first['files_per_process'], 'file')}, {sharing}, "
        f"{first['file_bytes']}-byte files, {counted(first['iterations'], 'iteration')}, in "
        f"{first['location']} ({first['fs_type']})"
    )
