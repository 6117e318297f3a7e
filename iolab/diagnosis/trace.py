"""What any program does with files, file by file and process by process: the trace reader of
the diagnosis (`python -m iolab profile -- CMD`, and `diagnose` of a command or saved trace).

The readers of the lessons are traced with the dataset known in advance; a learner's own
program is not, so this profile makes no assumption about where the data lies. One strace run
(-f -y -T) gives every call on a file with the path behind each descriptor and the time spent
in it. Every call that moves or syncs data counts: read and write in all their forms, the
copies made inside the kernel (copy_file_range, sendfile, splice: `cp` moves its bytes so,
never through read and write), mmap, the syncs, and opens with O_SYNC or O_DIRECT.

The reading is split by concern: trace_files (one file's counts), trace_tally (strace's
lines into them, descriptors followed through dup and fork), trace_profile (the whole run,
by origin, as the diagnosis's facts) and trace_report (the text a learner reads); this module
runs the command, or reads a saved trace.

Where strace is missing or ptrace is denied, the kernel's per-process counters
(/proc/<pid>/io) still give the calls and bytes of the whole run, without a per-file split.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from iolab.core.errors import LabError
from iolab.diagnosis.trace_profile import Profile
from iolab.diagnosis.trace_tally import read_trace
from iolab.measure.strace_parse import PROFILE_OPTIONS
from iolab.measure.strace_run import (
    PROFILE_METHODS,
    check_command,
    require_strace,
    run_scratch,
    run_strace,
    strace_status,
)
from iolab.measure.syscall_fallback import run_counting_io


def profile_command(
    cmd: Sequence[str],
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    method: str = "auto",
    untraced_runs: int = 0,
    timeout: float | None = None,
    late: str = "",
) -> Profile:
    """Run `cmd` once and profile its file I/O (see the module docstring).

    untraced_runs > 0: run it that many times without the tracer first, to measure how much
    strace slowed it (Profile.tracer_slowdown). Each run repeats what the command does.
    timeout: a traced run still going after that many seconds is stopped, and the LabError
    says so, followed by `late` (what to check: a file server that stopped answering).
    """
    if method not in PROFILE_METHODS:
        raise LabError(f"unknown method {method!r}; choose one of {', '.join(PROFILE_METHODS)}")
    cmd = check_command(cmd, cwd, env)
    status = strace_status()
    if method == "strace" or (method == "auto" and status.available):
        untraced = [_untraced_wall_s(cmd, cwd, env) for _ in range(untraced_runs)]
        profile = _traced(cmd, cwd, env, timeout, late)
        profile.untraced_wall_s, profile.ran_here = untraced, True
        return profile
    why = "asked for" if method == "proc-io" else status.reason
    with run_scratch("profile") as scratch:
        started = time.perf_counter()
        finished, io = run_counting_io(cmd, cwd, env, scratch)
        wall = time.perf_counter() - started
    note = (
        f"strace not used ({why}): whole-process counters from /proc/<pid>/io, no per-file split"
        if io
        else f"strace not used ({why}) and /proc/<pid>/io unreadable: nothing could be measured"
    )
    return Profile(
        cmd, "proc-io", finished.exit_code, {}, io, note, finished.stdout, finished.stderr, wall
    )


def _untraced_wall_s(cmd: list[str], cwd, env) -> float:
    """Wall seconds of one run of `cmd` without a tracer, its output discarded."""
    started = time.perf_counter()
    subprocess.run(
        cmd,
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - started


def _traced(cmd: list[str], cwd, env, timeout: float | None = None, late: str = "") -> Profile:
    require_strace()
    with run_scratch("profile") as scratch:
        trace = scratch / "trace.txt"
        started = time.perf_counter()
        finished = run_strace(PROFILE_OPTIONS, cmd, cwd, env, trace, timeout, late)
        wall = time.perf_counter() - started
        with open(trace, encoding="utf-8", errors="replace") as lines:
            records, _ = read_trace(lines, Path(cwd or ".").resolve())
    return Profile(
        cmd,
        "strace",
        finished.exit_code,
        records,
        None,
        "strace -f -y -T: every call on a file, with the time spent in it",
        finished.stdout,
        finished.stderr,
        wall,
    )


def profile_saved_trace(path: str | os.PathLike, cwd: str | os.PathLike = ".") -> Profile:
    """A trace saved with `strace -f -y -T -o FILE CMD`, relative paths resolved against `cwd`.
    It has no wall clock: its run time is the busiest process's seconds in traced calls, a
    lower bound."""
    with open(path, encoding="utf-8", errors="replace") as lines:
        records, busiest_s = read_trace(lines, Path(cwd).resolve())
    return Profile(
        [str(path)],
        "strace",
        0,
        records,
        None,
        "a saved strace trace; run time: the busiest process's seconds in its calls",
        wall_time_s=busiest_s,
    )
