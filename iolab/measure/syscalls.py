"""System calls, counted and attributed to the dataset or to everything else.

A bare `strace -c` of a Python reader is misleading: the classic small-files demo reported
"588 opens" for an archive reader, and about 99% of them were the interpreter importing
numpy and pandas. This module therefore traces every file and descriptor system call with
the path it touched (`strace -y`) and splits the counts into calls on the dataset's files
and calls on anything else (interpreter, libraries, /proc, pipes, ...), so a learner sees
what the data access itself costs.

When strace is missing or the kernel forbids ptrace (common in containers), the same
questions are answered from inside the program instead: a Python audit hook counts the
files a Python program opens, and /proc/<pid>/io gives its read and write system calls.
Those counts are coarser, and every number a method cannot know is None, never a zero.

Where output goes: the measured command's stdout and stderr are captured and kept on the
result (`.stdout`, `.stderr`; for `strace_summary` in `frame.attrs`), so a notebook can show
them and `--json` keeps stdout to one JSON object. Timings are never taken here: a tracer
slows a program down, so timings come from iolab.measure.timing in separate, untraced runs.
strace's text is read by iolab.measure.strace_parse and strace is run by
iolab.measure.strace_run; the fallback lives in iolab.measure.syscall_fallback and the report
both methods fill in iolab.measure.syscall_report. This module attributes what strace saw and
picks the method.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from iolab.core.dataset import BOOKKEEPING_NAMES
from iolab.core.errors import LabError
from iolab.measure.recorded import Recordings
from iolab.measure.strace_parse import (
    OPENS,
    READS,
    SEEKS,
    STATS,
    SUMMARY_OPTIONS,
    TRACE_OPTIONS,
    WRITES,
    TraceCall,
    TraceReader,
    annotation_path,
    fd_annotation,
    parse_strace_summary,
    string_arg,
)
from iolab.measure.strace_run import (
    COUNT_METHODS,
    StraceStatus,
    check_command,
    dataset_roots,
    require_strace,
    run_scratch,
    run_strace,
    strace_problem,
    strace_status,
)
from iolab.measure.syscall_fallback import count_from_inside
from iolab.measure.syscall_report import SyscallReport

# Calls whose first argument is a directory descriptor and whose second is a path relative to
# it; most end in "at" (openat, newfstatat, readlinkat, ...), these do not.
DIRFD_CALLS = frozenset({"statx", "open_tree", "fspick", "mount_setattr"})
# A string argument that is an output buffer, not a file the call touches.
NO_PATH_CALLS = frozenset({"getcwd"})


def _relative_to_roots(path: str, roots: Sequence[str]) -> str | None:
    """path relative to the first root containing it ("." for a root itself), else None."""
    for root in roots:
        if path == root:
            return "."
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            return path[len(prefix) :]
    return None


def _join(base: str, path: str) -> str:
    return os.path.normpath(os.path.join(base, path)) if path else base


# --------------------------------------------------------------------------- strace -c


def strace_summary(
    cmd: Sequence[str], cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Count every system call of cmd and its children with `strace -c -f`.

    Returns columns syscall, calls, errors, time_pct, time_s, usecs_per_call, most calls
    first, without strace's total row. The run is separate from any attributed trace. The
    command's captured output and exit code are in `frame.attrs["stdout"]`, `["stderr"]`,
    `["exit_code"]` and `["command"]`. env replaces the environment, as in subprocess.
    """
    cmd = check_command(cmd, cwd, env)
    with run_scratch("strace") as scratch:
        summary_file = scratch / "summary.txt"
        finished = run_strace(SUMMARY_OPTIONS, cmd, cwd, env, summary_file)
        with open(summary_file, encoding="utf-8", errors="replace") as lines:
            frame = parse_strace_summary(lines)
    frame.attrs.update(
        command=cmd, exit_code=finished.exit_code, stdout=finished.stdout, stderr=finished.stderr
    )
    return frame


# --------------------------------------------------------------------------- attribution


@dataclass
class Attribution:
    """Traced file and descriptor calls of one command, split by what they touched.

    Targets: `dataset` (the path, from an argument or from the descriptor's -y annotation, lies
    in dataset_dir, the directory itself included), `other_files` (any other path: interpreter,
    libraries, /proc, /dev, ..., and the dataset's own bookkeeping files such as manifest.json,
    iolab.core.dataset.BOOKKEEPING_NAMES, which readers read to check the data) and `no_path`
    (no file: anonymous mmap, pipes, sockets, event fds, or a descriptor strace could not name).
    Only %file and %desc calls are traced, so `total_calls` is not every system call (see
    strace_summary for that). `dataset_open_counts` maps each dataset file (path relative to
    dataset_dir) to its successful opens, e.g. to check that each of 7300 files was opened
    exactly once.
    """

    command: list[str]
    dataset_dir: str
    exit_code: int
    stdout: str
    stderr: str
    by_syscall: pd.DataFrame
    dataset_opens: int
    dataset_dir_opens: int
    other_opens: int
    dataset_calls: int
    other_calls: int
    dataset_reads: int
    dataset_bytes_read: int
    dataset_seeks: int
    dataset_stats: int
    dataset_open_counts: dict[str, int]
    unparsed_lines: int

    @property
    def total_calls(self) -> int:
        return self.dataset_calls + self.other_calls


class _Tally:
    """Attributes each call to a target and keeps the dataset's opens, reads, seeks, stats."""

    def __init__(self, roots: Sequence[str], cwd: str) -> None:
        self.roots = roots
        self.cwd = cwd
        self.by_syscall: Counter[tuple[str, str]] = Counter()
        self.open_counts: Counter[str] = Counter()
        self.numbers: Counter[str] = Counter()

    def add(self, call: TraceCall) -> None:
        path = self._path_of(call)
        relative = _relative_to_roots(path, self.roots) if path else None
        if relative in BOOKKEEPING_NAMES:
            relative = None  # the dataset's manifest, lock, ...: the lab checking, not data access
        target = "no_path" if path is None else "dataset" if relative is not None else "other_files"
        self.by_syscall[(call.syscall, target)] += 1
        if call.syscall in OPENS and call.succeeded:
            self._count_open(call, relative)
        elif relative is not None:
            self._count_dataset_access(call)

    def _count_open(self, call: TraceCall, relative: str | None) -> None:
        is_dir = any("O_DIRECTORY" in arg for arg in call.args[1:])
        if relative is None:
            if not is_dir:
                self.numbers["other_opens"] += 1
        elif is_dir:
            self.numbers["dataset_dir_opens"] += 1
        else:
            self.numbers["dataset_opens"] += 1
            self.open_counts[relative] += 1

    def _count_dataset_access(self, call: TraceCall) -> None:
        if call.syscall in READS:
            self.numbers["dataset_reads"] += 1
            self.numbers["dataset_bytes_read"] += max(call.ret or 0, 0)
        elif call.syscall in SEEKS:
            self.numbers["dataset_seeks"] += 1
        elif call.syscall in STATS:
            self.numbers["dataset_stats"] += 1

    def _path_of(self, call: TraceCall) -> str | None:
        """The absolute path a call touched, or None when it touched no file."""
        args = call.args
        if call.syscall in OPENS and call.succeeded and call.ret_annotation is not None:
            return annotation_path(call.ret_annotation)  # the kernel's name of what was opened
        if call.syscall in NO_PATH_CALLS or not args:
            return None
        if self._takes_dirfd(call) and len(args) >= 2 and args[1].startswith('"'):
            path = string_arg(args[1])
            base = (
                self.cwd if args[0] == "AT_FDCWD" else annotation_path(fd_annotation(args[0]) or "")
            )
            return _join("/", path) if path.startswith("/") else _join(base, path) if base else None
        if args[0].startswith('"'):
            return _join(self.cwd, string_arg(args[0]))
        raw = next((ann for ann in map(fd_annotation, args) if ann is not None), None)
        return annotation_path(raw) if raw is not None else None

    @staticmethod
    def _takes_dirfd(call: TraceCall) -> bool:
        name = call.syscall
        return name in DIRFD_CALLS or (name.endswith(("at", "at2")) and name != "creat")

    def frame(self) -> pd.DataFrame:
        rows = [(name, target, calls) for (name, target), calls in self.by_syscall.items()]
        frame = pd.DataFrame(rows, columns=["syscall", "target", "calls"]).astype(
            {"calls": "int64"}
        )
        frame = frame.sort_values(["calls", "syscall", "target"], ascending=[False, True, True])
        return frame.reset_index(drop=True)

    def calls_on(self, dataset: bool) -> int:
        return sum(
            n for (_, target), n in self.by_syscall.items() if (target == "dataset") == dataset
        )


def trace_attributed(
    cmd: Sequence[str],
    dataset_dir: str | os.PathLike,
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
) -> Attribution:
    """Trace cmd (and its children) with `strace -f -y` and attribute every call.

    Relative paths are resolved against the directory strace shows for AT_FDCWD (which
    follows chdir) or, for old-style calls such as open/stat/access, against cwd. A relative
    dataset_dir is taken relative to this process's working directory. The trace file lives in
    the workspace only while it is read, line by line, and is deleted afterwards.
    """
    roots = dataset_roots(dataset_dir)
    cmd = check_command(cmd, cwd, env)
    tally = _Tally(roots, os.path.abspath(cwd or os.getcwd()))
    reader = TraceReader()
    with run_scratch("strace") as scratch:
        trace_file = scratch / "trace.txt"
        finished = run_strace(TRACE_OPTIONS, cmd, cwd, env, trace_file)
        with open(trace_file, encoding="utf-8", errors="surrogateescape") as lines:
            for call in reader.calls(lines):
                tally.add(call)
    return Attribution(
        command=cmd,
        dataset_dir=roots[0],
        exit_code=finished.exit_code,
        stdout=finished.stdout,
        stderr=finished.stderr,
        by_syscall=tally.frame(),
        dataset_opens=tally.numbers["dataset_opens"],
        dataset_dir_opens=tally.numbers["dataset_dir_opens"],
        other_opens=tally.numbers["other_opens"],
        dataset_calls=tally.calls_on(dataset=True),
        other_calls=tally.calls_on(dataset=False),
        dataset_reads=tally.numbers["dataset_reads"],
        dataset_bytes_read=tally.numbers["dataset_bytes_read"],
        dataset_seeks=tally.numbers["dataset_seeks"],
        dataset_stats=tally.numbers["dataset_stats"],
        dataset_open_counts=dict(sorted(tally.open_counts.items())),
        unparsed_lines=reader.unparsed,
    )


# --------------------------------------------------------------------------- one report, any method


def count_syscalls(
    cmd: Sequence[str],
    dataset_dir: str | os.PathLike,
    method: str = "auto",
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
) -> SyscallReport:
    """Count cmd's system calls on the dataset and elsewhere, with strace if it can trace.

    method "auto" uses strace when strace_status() allows it and falls back otherwise;
    "strace" raises a LabError saying how to get strace; "fallback" never traces.
    """
    if method not in COUNT_METHODS:
        raise LabError(f"unknown method {method!r}; use one of {', '.join(COUNT_METHODS)}")
    status = strace_status()
    if method == "strace" or (method == "auto" and status.available):
        return _report_from_attribution(trace_attributed(cmd, dataset_dir, cwd, env), status)
    why = (
        "the fallback method was asked for"
        if method == "fallback"
        else f"strace was not used because {status.reason}"
    )
    return count_from_inside(cmd, dataset_dir, cwd, env, why)


def traced_or_recorded(
    recordings: Recordings,
    key: str,
    commands: Mapping[str, Sequence[str]],
    dataset_dir: str | os.PathLike,
    **kwargs,
) -> dict[str, SyscallReport]:
    """count_syscalls of each command with strace; where strace cannot trace here, the strace
    runs recorded under `key`, so a notebook's exact counts read the same on every machine.
    """
    value = recordings.data(
        key,
        lambda: {
            label: count_syscalls(cmd, dataset_dir, method="strace", **kwargs).to_json_dict()
            for label, cmd in commands.items()
        },
        strace_problem(),
    )
    return {label: SyscallReport.from_json_dict(report) for label, report in value.items()}


def strace_excerpt(
    cmd: Sequence[str], syscalls: Sequence[str], dataset_dir: str | os.PathLike, label: str = "DATA"
) -> str:
    """What `strace -y -e trace=SYSCALLS` prints for the calls of cmd on files under dataset_dir.

    The command runs in dataset_dir, and dataset_dir is shown as `label`, so the excerpt reads the
    same wherever the dataset lives.
    """
    require_strace()
    roots = dataset_roots(dataset_dir)
    with run_scratch("excerpt") as scratch:
        trace = scratch / "trace"
        run_strace(["-y", "-e", "trace=" + ",".join(syscalls)], list(cmd), dataset_dir, None, trace)
        lines = trace.read_text(errors="replace").splitlines()

    def on_data(line: str) -> bool:  # every line names the working directory: skip that
        for root in roots:
            line = line.replace(f"AT_FDCWD<{root}>", "AT_FDCWD")
        return any(root in line for root in roots)

    picked = [line for line in lines if on_data(line)]
    shown = "\n".join(picked)
    for root in sorted(roots, key=len, reverse=True):
        shown = shown.replace(root, label)
    return shown


def _report_from_attribution(att: Attribution, status: StraceStatus) -> SyscallReport:
    calls = att.by_syscall.groupby("syscall")["calls"].sum()
    read_calls = sum(int(n) for name, n in calls.items() if name in READS)
    write_calls = sum(int(n) for name, n in calls.items() if name in WRITES)
    return SyscallReport(
        method="strace",
        note=(
            f"strace {status.version} traced every file and descriptor system call of the "
            "command and its child processes, each attributed by the path it touched"
        ),
        command=att.command,
        dataset_dir=att.dataset_dir,
        exit_code=att.exit_code,
        stdout=att.stdout,
        stderr=att.stderr,
        dataset_opens=att.dataset_opens,
        dataset_dir_opens=att.dataset_dir_opens,
        other_opens=att.other_opens,
        dataset_calls=att.dataset_calls,
        other_calls=att.other_calls,
        total_calls=att.total_calls,
        dataset_reads=att.dataset_reads,
        dataset_bytes_read=att.dataset_bytes_read,
        dataset_seeks=att.dataset_seeks,
        dataset_stats=att.dataset_stats,
        read_syscalls=read_calls,
        write_syscalls=write_calls,
        by_syscall=att.by_syscall,
        dataset_open_counts=att.dataset_open_counts,
    )
