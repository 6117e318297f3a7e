"""How long a command takes: repeated wall and CPU times, without a tracer.

One run of a reader says little: the page cache, other users of a login node and CPU
frequency make single timings vary by several times. So a command is run a few times
after an untimed warm-up, and the record keeps every repeat (wall time from
time.perf_counter, the child's user and system CPU time from os.wait4) with its median and
spread, the cache state, and the machine and file system it ran on. Comparing wall with
CPU time tells whether a reader waits for storage or is busy parsing.

Warm runs measure the page cache as much as the storage. A cold run evicts the command's input
before every timed repeat (a `before_each` hook, e.g. iolab.measure.cache.evict), and the record
keeps what the hook reported, so the table shows how much was still cached when each repeat
started instead of asking to be trusted.

Timings are taken here without strace: tracing slows every system call and would distort
exactly what is being measured. Syscall counts come from iolab.measure.syscalls, separately.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from io import BufferedIOBase
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from iolab.core.errors import LabError, interrupts_held
from iolab.core.repeats import allowed_repeats
from iolab.core.workspace import public_text
from iolab.measure.cache import Eviction
from iolab.measure.context import machine_context
from iolab.measure.tools import install_hint

#: What a record may say about the page cache: after warm-up runs, or after eviction.
CACHE_STATES = ("warm", "cold")

#: How much of a command's output is kept (the end of it, where the JSON result line is).
OUTPUT_TAIL_BYTES = 64 * 1024

SUMMARY_COLUMNS = [
    "label",
    "repeats",
    "wall_median_s",
    "wall_min_s",
    "wall_max_s",
    "cpu_median_s",
    "cache_state",
    "resident_before_max_pct",
    "location",
    "fs_type",
]


@dataclass
class Measurement:
    """Repeated timings of one command with everything needed to judge them.

    Lists hold one entry per timed repeat, in seconds. `result` is the JSON object the command
    printed as its last line in the last repeat (the lab's readers do with --json), `results`
    the same per repeat (None where a repeat printed none). `location` is the directory the
    command worked on; it and `command` have the home directory and the user name masked (see
    iolab.measure.context.public_text), since records end up in published notebooks. `prepared`
    holds what the `before_each` hook returned before each timed repeat, and
    `resident_pct_before` the percentage of the input still cached when each repeat started
    (from the hook's Eviction; None where the hook did not say, or there was no hook).
    """

    label: str
    command: list[str]
    repeats: int
    warmup: int
    wall_s: list[float]
    user_s: list[float]
    sys_s: list[float]
    cache_state: str
    location: str | None
    result: dict | None
    results: list[dict | None]
    context: dict = field(repr=False)
    prepared: list = field(default_factory=list)
    resident_pct_before: list[float | None] = field(default_factory=list)

    @property
    def cpu_s(self) -> list[float]:
        """User plus system CPU time per repeat: the time the command kept a CPU busy."""
        return [user + system for user, system in zip(self.user_s, self.sys_s, strict=True)]

    @property
    def wall_median_s(self) -> float:
        """The typical wall time: the median resists one slow repeat on a busy node."""
        return statistics.median(self.wall_s)

    @property
    def wall_min_s(self) -> float:
        return min(self.wall_s)

    @property
    def wall_max_s(self) -> float:
        return max(self.wall_s)

    @property
    def cpu_median_s(self) -> float:
        """Median CPU time; far below the wall time means the command waited (for I/O)."""
        return statistics.median(self.cpu_s)

    @property
    def resident_before_max_pct(self) -> float | None:
        """The most of the input any repeat found cached; None when no repeat knew.

        A cold run is only cold if this is near 0: one warm repeat would hide in the median.
        """
        known = [pct for pct in self.resident_pct_before if pct is not None]
        return max(known) if known else None

    def runs_frame(self) -> pd.DataFrame:
        """One row per timed repeat (numbered from 1), tidy for plotting and pooling."""
        return pd.DataFrame(
            {
                "label": self.label,
                "repeat": range(1, len(self.wall_s) + 1),
                "wall_s": self.wall_s,
                "user_s": self.user_s,
                "sys_s": self.sys_s,
                "cpu_s": self.cpu_s,
            }
        )

    def summary_row(self) -> dict:
        """Median and spread of the repeats with where they ran: one row of a summary table."""
        return {
            "label": self.label,
            "repeats": self.repeats,
            "wall_median_s": self.wall_median_s,
            "wall_min_s": self.wall_min_s,
            "wall_max_s": self.wall_max_s,
            "cpu_median_s": self.cpu_median_s,
            "cache_state": self.cache_state,
            "resident_before_max_pct": self.resident_before_max_pct,
            "location": self.location,
            "fs_type": self.context.get("location_fs_type"),
        }

    def to_dict(self) -> dict:
        """The whole record, JSON-ready, with the summary row under 'summary'."""
        return {"summary": self.summary_row(), **asdict(self)}


def summarize(measurements: list[Measurement]) -> pd.DataFrame:
    """One summary row per measurement, in the given order."""
    return pd.DataFrame([m.summary_row() for m in measurements], columns=SUMMARY_COLUMNS)


def _drain(stream: BufferedIOBase, tail: bytearray) -> None:
    """Read a pipe to its end, keeping only its last OUTPUT_TAIL_BYTES (output may be large)."""
    while chunk := stream.read1(65536):
        tail += chunk
        del tail[:-OUTPUT_TAIL_BYTES]


def _last_line(tail: bytearray) -> str:
    """The last non-empty line of captured output, '' if there is none."""
    lines = tail.decode("utf-8", errors="replace").strip().splitlines()
    return lines[-1].strip() if lines else ""


def _json_result(stdout_tail: bytearray) -> dict | None:
    """The JSON object on the last line of the output, None if that line is not one."""
    last = _last_line(stdout_tail)
    if not last.startswith("{"):
        return None
    try:
        parsed = json.loads(last)
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


@dataclass
class Run:
    """One timed run: seconds of wall, user and system time, its JSON result if any, and the
    end of what it printed (for programs that print text, such as the classic demo's readers)."""

    wall_s: float
    user_s: float
    sys_s: float
    result: dict | None
    output: str = ""


def run_once(
    cmd: list[str],
    cwd: Path | str | None = None,
    env: dict | None = None,
    timeout: float | None = None,
    late: str = "",
) -> Run:
    """Run `cmd` once; wall time around the child, its CPU time from wait4's rusage.

    wait4 reports the child's own CPU time plus that of the processes it waited for, so a
    shell wrapper is counted fully, and nothing else this process runs is mixed in. With
    `timeout`, a child still running after that many seconds is killed and the LabError
    says so, followed by `late` (what to check): a server that stopped answering (a
    network or parallel file system) must not make the lab wait forever.
    """
    display = shlex.join(cmd)
    start = time.perf_counter()
    proc = None
    watchdog = (
        threading.Timer(timeout, lambda: proc.kill() if proc is not None else None)
        if timeout is not None
        else None
    )
    try:
        # A Ctrl-C or SIGTERM is raised once the handle that stops the child exists.
        with interrupts_held():
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
            )
        assert proc.stdout is not None and proc.stderr is not None  # both piped
        tails = (bytearray(), bytearray())
        readers = [
            threading.Thread(target=_drain, args=(stream, tail), daemon=True)
            for stream, tail in zip((proc.stdout, proc.stderr), tails, strict=True)
        ]
        for reader in readers:
            reader.start()
        if watchdog is not None:
            watchdog.start()
        _, status, usage = os.wait4(proc.pid, 0)
    except FileNotFoundError:
        hint = install_hint(cmd[0]) or "check the spelling, or install it and put it on PATH"
        raise LabError(f"the command {cmd[0]} was not found; {hint}") from None
    except PermissionError:
        raise LabError(f"{cmd[0]} is not executable; check its path and permissions") from None
    except BaseException:  # Ctrl-C or a notebook interrupt: leave no orphan behind.
        if proc is not None:
            proc.kill()
            proc.wait()
        raise
    finally:
        if watchdog is not None:
            watchdog.cancel()
    wall_s = time.perf_counter() - start
    if timeout is not None and wall_s >= timeout and status != 0:
        for reader in readers:
            reader.join(timeout=1)
        raise LabError(
            f"`{display}` did not finish within {timeout:.0f} s and was stopped"
            f"{'; ' + late if late else ''}"
        )
    proc.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join()
    proc.stdout.close()
    proc.stderr.close()
    if proc.returncode != 0:
        how = (
            f"was killed by signal {-proc.returncode}"
            if proc.returncode < 0
            else f"failed with exit code {proc.returncode}"
        )
        detail = _last_line(tails[1]) or "it printed no error message"
        raise LabError(f"`{display}` {how} ({detail}); run it by hand to see the full error")
    return Run(
        wall_s,
        usage.ru_utime,
        usage.ru_stime,
        _json_result(tails[0]),
        tails[0].decode("utf-8", errors="replace"),
    )


def _resident_pct_after(prepared: object) -> float | None:
    """How much was cached after a before_each hook ran, if the hook says (an Eviction does)."""
    return prepared.after.resident_pct if isinstance(prepared, Eviction) else None


def time_command(
    cmd: list[str],
    *,
    repeats: int = 5,
    warmup: int = 1,
    label: str | None = None,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    location: Path | str | None = None,
    cache_state: str = "warm",
    before_each: Callable[[], object] | None = None,
    progress: bool | None = None,
) -> Measurement:
    """Run `cmd` `warmup` times untimed, then `repeats` times timed, and record it all.

    `location` is the directory the command reads or writes; its file system is recorded.
    `cache_state` ("warm" or "cold") is recorded as given: "warm" means after the warm-up
    runs, which leave the command's files in the page cache; "cold" should come with a
    `before_each` that evicts them, e.g. `lambda: iolab.measure.cache.evict(path)`. The hook runs
    untimed before every timed repeat; what it returns is kept in `prepared`, and an
    Eviction's after-residency in `resident_pct_before`, the proof that the run was cold.
    `env` replaces the child's environment as in subprocess (None inherits). A progress bar
    is shown when `progress` is True, or when it is None and stderr is a terminal. A failing
    or missing command raises LabError.
    """
    if not cmd:
        raise LabError("no command to time was given; pass the command and its arguments")
    if repeats < 1 or warmup < 0:
        raise LabError(
            f"repeats must be at least 1 and warmup at least 0 (got {repeats} and {warmup})"
        )
    repeats = allowed_repeats(repeats)
    if cache_state not in CACHE_STATES:
        raise LabError(
            f"cache_state must be 'warm' or 'cold', not {cache_state!r}; pass one of those"
        )
    if cwd is not None and not Path(cwd).is_dir():
        raise LabError(f"the working directory {cwd} does not exist; pass an existing cwd")
    cmd = [str(arg) for arg in cmd]
    context = machine_context(location)
    show = sys.stderr.isatty() if progress is None else progress
    runs, prepared = [], []
    with tqdm(total=warmup + repeats, desc=label or cmd[0], disable=not show, leave=False) as bar:
        for index in range(warmup + repeats):
            timed = index >= warmup
            if timed and before_each is not None:
                prepared.append(before_each())
            run = run_once(cmd, cwd, env)
            if timed:
                runs.append(run)
            bar.update()
    results = [run.result for run in runs]
    resident_pct_before: list[float | None] = (
        [_resident_pct_after(p) for p in prepared] if before_each is not None else [None] * repeats
    )
    public_command = [public_text(arg) for arg in cmd]
    return Measurement(
        label=label or shlex.join(public_command),
        command=public_command,
        repeats=repeats,
        warmup=warmup,
        wall_s=[run.wall_s for run in runs],
        user_s=[run.user_s for run in runs],
        sys_s=[run.sys_s for run in runs],
        cache_state=cache_state,
        location=public_text(Path(location).resolve()) if location is not None else None,
        result=results[-1],
        results=results,
        context=context,
        prepared=prepared,
        resident_pct_before=resident_pct_before,
    )
