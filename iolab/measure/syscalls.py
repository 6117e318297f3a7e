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
strace's text is read by iolab.measure.strace_parse; this module runs strace (or the
fallback) and attributes and counts what it saw.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import pandas as pd

from iolab.core.dataset import BOOKKEEPING_NAMES
from iolab.core.errors import LabError
from iolab.core.owned import discard_owned
from iolab.core.workspace import existing_dir, scratch_dir
from iolab.measure.recorded import Recordings
from iolab.measure.strace_parse import (OPENS, READS, SEEKS, STATS, SUMMARY_OPTIONS, TRACE_OPTIONS,
                                        WRITES, TraceCall, TraceReader, annotation_path,
                                        fd_annotation, parse_strace_summary, string_arg)

#: Where a call is attributed: a dataset file, any other file, or no file at all.
TARGETS = ("dataset", "other_files", "no_path")
METHODS = ("auto", "strace", "fallback")
FALLBACK_PYTHON = "audit-hook+proc-io"
FALLBACK_OTHER = "proc-io"

# Calls whose first argument is a directory descriptor and whose second is a path relative to
# it; most end in "at" (openat, newfstatat, readlinkat, ...), these do not.
DIRFD_CALLS = frozenset({"statx", "open_tree", "fspick", "mount_setattr"})
# A string argument that is an output buffer, not a file the call touches.
NO_PATH_CALLS = frozenset({"getcwd"})

MISSING_STRACE = (
    "strace is not installed; install it with `apt-get install strace` (Debian/Ubuntu), "
    "`dnf install strace`, or `module load strace` on a cluster"
)
PTRACE_DENIED = (
    "strace is installed at {path} but may not trace processes here ({detail}): the kernel "
    "refuses ptrace (kernel.yama.ptrace_scope, a seccomp profile, or a container without "
    "CAP_SYS_PTRACE); ask your administrators for ptrace permission (Docker: "
    "`--cap-add=SYS_PTRACE`), or run on a machine or compute node that allows it"
)

_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?")
_VERSION = re.compile(r"version\s+(\S+)")


# --------------------------------------------------------------------------- strace status


@dataclass(frozen=True)
class StraceStatus:
    """Whether strace can trace here; `reason` is one sentence a learner can act on."""

    available: bool
    path: str | None
    version: str | None
    reason: str


def strace_status() -> StraceStatus:
    """Find strace on PATH and prove it may trace, once per strace binary and process."""
    return _probe_strace(shutil.which("strace"))


@functools.cache
def _probe_strace(path: str | None) -> StraceStatus:
    """Run `strace true`: only a real trace shows whether the kernel permits ptrace."""
    if path is None:
        return StraceStatus(False, None, None, MISSING_STRACE)
    version = _strace_version(path)
    try:
        probe = subprocess.run(
            [path, "-f", "-qq", "-o", os.devnull, "--", "true"],
            capture_output=True, text=True, errors="replace", timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return StraceStatus(False, path, version, f"strace at {path} could not be started ({err}); "
                            "check that `strace true` works in your shell")
    if probe.returncode == 0:
        return StraceStatus(True, path, version, f"strace {version} at {path} can trace processes here")
    detail = next((line for line in probe.stderr.splitlines() if line.strip()), "no message")
    if re.search(r"Operation not permitted|EPERM|ptrace|Function not implemented", probe.stderr, re.I):
        return StraceStatus(False, path, version, PTRACE_DENIED.format(path=path, detail=detail))
    return StraceStatus(False, path, version, f"strace at {path} failed a test run ({detail}); "
                        "check that `strace true` works in your shell")


def _strace_version(path: str) -> str | None:
    """The version strace reports (`strace -V`), or None if it does not say."""
    try:
        out = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(out)
    return match.group(1) if match else None


def require_strace() -> StraceStatus:
    status = strace_status()
    if not status.available:
        raise LabError(status.reason)
    return status


# --------------------------------------------------------------------------- running


@dataclass
class _Finished:
    """What a measured run left behind besides its counts."""

    exit_code: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def run_scratch(name: str) -> Iterator[Path]:
    """A per-run directory in the workspace that is removed however the run ends."""
    path = scratch_dir(name)
    try:
        yield path
    finally:
        discard_owned(path)


def check_command(cmd: Sequence[str], cwd: str | os.PathLike | None,
                   env: Mapping[str, str] | None) -> list[str]:
    """Fail early, in one sentence, on an empty or unknown command (as subprocess would look it up)."""
    cmd = [str(part) for part in cmd]
    if not cmd:
        raise LabError("no command to measure was given; put it after `--`, e.g. "
                       "`python -m iolab syscalls --data DIR -- python demos/read_files.py --data DIR`")
    exe = cmd[0]
    if os.sep in exe:
        candidate = Path(cwd or ".") / exe
        found = candidate.is_file() and os.access(candidate, os.X_OK)
    else:
        search_path = os.pathsep.join(os.get_exec_path(dict(env) if env is not None else None))
        found = shutil.which(exe, path=search_path) is not None
    if not found:
        raise LabError(f"the command {exe!r} was not found; check its spelling, install it, "
                       "or give its full path")
    return cmd


def run_strace(options: Sequence[str], cmd: list[str], cwd, env, trace_file: Path) -> _Finished:
    """Run cmd under strace writing to trace_file; the command's output is captured."""
    status = require_strace()
    proc = subprocess.run(
        [status.path, *options, "-o", str(trace_file.resolve()), "--", *cmd],
        cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
    )
    if not trace_file.exists() or trace_file.stat().st_size == 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise LabError(f"strace could not trace {cmd[0]!r} ({last}); run the command without "
                       "iolab to check that it works")
    return _Finished(proc.returncode, proc.stdout, proc.stderr)


def _dataset_roots(dataset_dir: str | os.PathLike) -> tuple[str, ...]:
    """The data directory as written and with symlinks resolved: a trace may show either."""
    path = existing_dir(dataset_dir, "pass the dataset's folder as --data (create the dataset "
                        "with `python data_generators/generate_data.py --data DIR`)")
    spelled = os.path.normpath(os.path.abspath(path))
    return tuple(dict.fromkeys((spelled, os.path.realpath(path))))


def _relative_to_roots(path: str, roots: Sequence[str]) -> str | None:
    """path relative to the first root containing it ("." for a root itself), else None."""
    for root in roots:
        if path == root:
            return "."
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            return path[len(prefix):]
    return None


def _join(base: str, path: str) -> str:
    return os.path.normpath(os.path.join(base, path)) if path else base


# --------------------------------------------------------------------------- strace -c


def strace_summary(cmd: Sequence[str], cwd: str | os.PathLike | None = None,
                   env: Mapping[str, str] | None = None) -> pd.DataFrame:
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
    frame.attrs.update(command=cmd, exit_code=finished.exit_code,
                       stdout=finished.stdout, stderr=finished.stderr)
    return frame


# --------------------------------------------------------------------------- attribution


@dataclass
class Attribution:
    """Traced file and descriptor calls of one command, split by what they touched.

    Targets: `dataset` (the path, from an argument or from the descriptor's -y annotation,
    lies in dataset_dir, the directory itself included), `other_files` (any other path:
    interpreter, libraries, /proc, /dev, ..., and the dataset's own bookkeeping files such
    as manifest.json, iolab.core.dataset.BOOKKEEPING_NAMES, which readers read to check the data) and `no_path` (no file: anonymous mmap, pipes,
    sockets, event fds, or a descriptor strace could not name). Only %file and %desc calls
    are traced, so `total_calls` is not every system call (see strace_summary for that).
    `dataset_open_counts` maps each dataset file (path relative to dataset_dir) to its
    successful opens, e.g. to check that each of 7300 files was opened exactly once.
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
            base = (self.cwd if args[0] == "AT_FDCWD"
                    else annotation_path(fd_annotation(args[0]) or ""))
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
        frame = pd.DataFrame(rows, columns=["syscall", "target", "calls"]).astype({"calls": "int64"})
        frame = frame.sort_values(["calls", "syscall", "target"], ascending=[False, True, True])
        return frame.reset_index(drop=True)

    def calls_on(self, dataset: bool) -> int:
        return sum(n for (_, target), n in self.by_syscall.items() if (target == "dataset") == dataset)


def trace_attributed(cmd: Sequence[str], dataset_dir: str | os.PathLike,
                     cwd: str | os.PathLike | None = None,
                     env: Mapping[str, str] | None = None) -> Attribution:
    """Trace cmd (and its children) with `strace -f -y` and attribute every call.

    Relative paths are resolved against the directory strace shows for AT_FDCWD (which
    follows chdir) or, for old-style calls such as open/stat/access, against cwd. A relative
    dataset_dir is taken relative to this process's working directory. The trace file lives in
    the workspace only while it is read, line by line, and is deleted afterwards.
    """
    roots = _dataset_roots(dataset_dir)
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
        command=cmd, dataset_dir=roots[0], exit_code=finished.exit_code,
        stdout=finished.stdout, stderr=finished.stderr, by_syscall=tally.frame(),
        dataset_opens=tally.numbers["dataset_opens"],
        dataset_dir_opens=tally.numbers["dataset_dir_opens"],
        other_opens=tally.numbers["other_opens"],
        dataset_calls=tally.calls_on(dataset=True), other_calls=tally.calls_on(dataset=False),
        dataset_reads=tally.numbers["dataset_reads"],
        dataset_bytes_read=tally.numbers["dataset_bytes_read"],
        dataset_seeks=tally.numbers["dataset_seeks"], dataset_stats=tally.numbers["dataset_stats"],
        dataset_open_counts=dict(sorted(tally.open_counts.items())),
        unparsed_lines=reader.unparsed,
    )


# --------------------------------------------------------------------------- one report, any method


@dataclass
class SyscallReport:
    """Syscall counts of one command from whichever method could run here.

    method is "strace", "audit-hook+proc-io" (a Python command counted from inside) or
    "proc-io" (another command: only /proc/<pid>/io); note says why that method was used
    and what it cannot see. A number the method cannot know is None, not 0. The read_/
    write_syscalls, chars_* and storage_bytes_read fields cover the whole process (all
    files); from strace they count traced read/write calls and the byte fields are None.
    """

    method: str
    note: str
    command: list[str]
    dataset_dir: str
    exit_code: int
    stdout: str
    stderr: str
    dataset_opens: int | None = None
    dataset_dir_opens: int | None = None
    other_opens: int | None = None
    dataset_calls: int | None = None
    other_calls: int | None = None
    total_calls: int | None = None
    dataset_reads: int | None = None
    dataset_bytes_read: int | None = None
    dataset_seeks: int | None = None
    dataset_stats: int | None = None
    read_syscalls: int | None = None
    write_syscalls: int | None = None
    chars_read: int | None = None
    chars_written: int | None = None
    storage_bytes_read: int | None = None
    by_syscall: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        {"syscall": pd.Series(dtype=object), "target": pd.Series(dtype=object),
         "calls": pd.Series(dtype="int64")}))
    dataset_open_counts: dict[str, int] | None = None

    def to_json_dict(self) -> dict:
        """The report as plain JSON types (by_syscall as a list of rows), no captured output."""
        numbers = ("dataset_opens", "dataset_dir_opens", "other_opens", "dataset_calls",
                   "other_calls", "total_calls", "dataset_reads", "dataset_bytes_read",
                   "dataset_seeks", "dataset_stats", "read_syscalls", "write_syscalls",
                   "chars_read", "chars_written", "storage_bytes_read")
        return {
            "method": self.method, "note": self.note, "command": self.command,
            "dataset_dir": self.dataset_dir,
            **{name: _plain(getattr(self, name)) for name in numbers},
            "by_syscall": [{"syscall": str(r.syscall), "target": str(r.target), "calls": int(r.calls)}
                           for r in self.by_syscall.itertuples(index=False)],
            "exit_code": self.exit_code,
        }

    @classmethod
    def from_json_dict(cls, value: dict) -> SyscallReport:
        """A report read back from to_json_dict (a recorded run): the counts, no captured output."""
        fields = {name: item for name, item in value.items() if name != "by_syscall"}
        by_syscall = pd.DataFrame(value["by_syscall"], columns=["syscall", "target", "calls"])
        return cls(stdout="", stderr="", by_syscall=by_syscall.astype({"calls": "int64"}),
                   **fields)


def _plain(value: int | None) -> int | None:
    return None if value is None else int(value)


def count_syscalls(cmd: Sequence[str], dataset_dir: str | os.PathLike, method: str = "auto",
                   cwd: str | os.PathLike | None = None,
                   env: Mapping[str, str] | None = None) -> SyscallReport:
    """Count cmd's system calls on the dataset and elsewhere, with strace if it can trace.

    method "auto" uses strace when strace_status() allows it and falls back otherwise;
    "strace" raises a LabError saying how to get strace; "fallback" never traces.
    """
    if method not in METHODS:
        raise LabError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")
    status = strace_status()
    if method == "strace" or (method == "auto" and status.available):
        return _report_from_attribution(trace_attributed(cmd, dataset_dir, cwd, env), status)
    why = ("the fallback method was asked for" if method == "fallback"
           else f"strace was not used because {status.reason}")
    return _count_from_inside(cmd, dataset_dir, cwd, env, why)


def strace_problem() -> str | None:
    """None if strace can trace here, else the sentence that says why not and what to do."""
    status = strace_status()
    return None if status.available else status.reason


def traced_or_recorded(recordings: Recordings, key: str, commands: Mapping[str, Sequence[str]],
                       dataset_dir: str | os.PathLike, **kwargs) -> dict[str, SyscallReport]:
    """count_syscalls of each command with strace; where strace cannot trace here, the strace
    runs recorded under `key`, so a notebook's exact counts read the same on every machine.
    """
    value = recordings.data(
        key, lambda: {label: count_syscalls(cmd, dataset_dir, method="strace", **kwargs).to_json_dict()
                      for label, cmd in commands.items()},
        strace_problem())
    return {label: SyscallReport.from_json_dict(report) for label, report in value.items()}


def strace_excerpt(cmd: Sequence[str], syscalls: Sequence[str], dataset_dir: str | os.PathLike,
                   label: str = "DATA") -> str:
    """What `strace -y -e trace=SYSCALLS` prints for the calls of cmd on files under dataset_dir.

    The command runs in dataset_dir, and dataset_dir is shown as `label`, so the excerpt reads the
    same wherever the dataset lives.
    """
    require_strace()
    roots = _dataset_roots(dataset_dir)
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
        note=(f"strace {status.version} traced every file and descriptor system call of the "
              "command and its child processes, each attributed by the path it touched"),
        command=att.command, dataset_dir=att.dataset_dir, exit_code=att.exit_code,
        stdout=att.stdout, stderr=att.stderr,
        dataset_opens=att.dataset_opens, dataset_dir_opens=att.dataset_dir_opens,
        other_opens=att.other_opens, dataset_calls=att.dataset_calls,
        other_calls=att.other_calls, total_calls=att.total_calls,
        dataset_reads=att.dataset_reads, dataset_bytes_read=att.dataset_bytes_read,
        dataset_seeks=att.dataset_seeks, dataset_stats=att.dataset_stats,
        read_syscalls=read_calls, write_syscalls=write_calls,
        by_syscall=att.by_syscall, dataset_open_counts=att.dataset_open_counts,
    )


# --------------------------------------------------------------------------- fallback


def _is_python(exe: str) -> bool:
    return bool(_PYTHON_NAME.fullmatch(os.path.basename(exe)))


def _wrap_python(cmd: list[str], dataset_dir: str, counts_file: Path) -> list[str]:
    """Run the program under iolab/measure/audit_open.py, keeping the interpreter and its options.

    The wrapper is started by file path and uses only the standard library, so it works in
    whatever directory and environment the program runs in.
    """
    options: list[str] = []
    rest = cmd[1:]
    while rest and rest[0].startswith("-") and rest[0] not in ("-c", "-m", "-", "--"):
        takes_value = rest[0] in ("-X", "-W")
        options += rest[: 2 if takes_value else 1]
        rest = rest[2 if takes_value else 1:]
    rest = rest[1:] if rest[:1] == ["--"] else rest
    if not rest or rest[0] == "-" or (rest[0] in ("-c", "-m") and len(rest) < 2):
        raise LabError("without strace only Python programs given as a script, `-c CODE` or "
                       "`-m MODULE` can be counted; give the program that way")
    wrapper = Path(__file__).with_name("audit_open.py")
    return [cmd[0], *options, str(wrapper), "--data", dataset_dir, "--out", str(counts_file.resolve()),
            "--bookkeeping", ",".join(BOOKKEEPING_NAMES), "--", *rest]


def _count_from_inside(cmd: Sequence[str], dataset_dir, cwd, env, why: str) -> SyscallReport:
    """Count without a tracer: an audit hook for a Python program's opens, /proc/<pid>/io for all."""
    roots = _dataset_roots(dataset_dir)
    cmd = check_command(cmd, cwd, env)
    python = _is_python(cmd[0])
    with run_scratch("audit") as scratch:
        counts_file = scratch / "opens.json"
        run_cmd = _wrap_python(cmd, roots[0], counts_file) if python else cmd
        finished, io = run_counting_io(run_cmd, cwd, env, scratch)
        opens = json.loads(counts_file.read_text()) if counts_file.exists() else None
    report = SyscallReport(
        method=FALLBACK_PYTHON if python else FALLBACK_OTHER,
        note=_fallback_note(why, python, opens is not None, io is not None),
        command=cmd, dataset_dir=roots[0], exit_code=finished.exit_code,
        stdout=finished.stdout, stderr=finished.stderr,
    )
    if opens is not None:
        report.dataset_opens = opens["dataset_opens"]
        report.dataset_dir_opens = opens["dataset_dir_opens"]
        report.other_opens = opens["other_opens"]
        report.dataset_open_counts = opens["dataset_open_counts"]
    if io is not None:
        report.read_syscalls, report.write_syscalls = io.get("syscr"), io.get("syscw")
        report.chars_read, report.chars_written = io.get("rchar"), io.get("wchar")
        report.storage_bytes_read = io.get("read_bytes")
    return report


def _fallback_note(why: str, python: bool, have_opens: bool, have_io: bool) -> str:
    parts = [why]
    if python and have_opens:
        parts.append("file and directory opens were counted by a Python audit hook (in the "
                     "Python process only; files the interpreter opened while starting up are "
                     "not seen)")
    elif python:
        parts.append("the program ended without saving its open counts (os._exit?), so "
                     "opens are unknown")
    else:
        parts.append("opens cannot be counted for a program that is not Python")
    parts.append("read/write system calls and bytes come from /proc/<pid>/io (the whole "
                 "process and the children it waited for)" if have_io else
                 "/proc/<pid>/io could not be read here, so read/write counts are unknown")
    parts.append("reads, seeks and stats per file need strace")
    return "; ".join(parts)


#: Runs the command with its output to the file $1, then closes its own stdout (telling the
#: parent the command ended and was reaped) and waits for a line on its stdin before exiting
#: with the command's status. The kernel adds a reaped child's I/O counters to its parent's,
#: and a live shell's /proc/<pid>/io is readable by its owner, while an exited (zombie)
#: process's is readable only with CAP_SYS_PTRACE, i.e. by root.
_HOLDING_SHELL = 'out=$1; shift; "$@" </dev/null >"$out"; status=$?; exec >&-; read -r _; exit $status'


def run_counting_io(cmd: list[str], cwd, env, scratch: Path) -> tuple[_Finished, dict | None]:
    """Run cmd with output captured to files; its /proc/<pid>/io counts, complete, as well.

    The command runs under a shell that stays alive after reaping it (see _HOLDING_SHELL), so
    the counts include everything the command and the children it waited for did, and the
    shell itself makes no read or write call before they are read.
    """
    out_path, err_path = scratch / "stdout.txt", scratch / "stderr.txt"
    done_r, done_w = os.pipe()
    go_r, go_w = os.pipe()
    try:
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(["/bin/sh", "-c", _HOLDING_SHELL, "sh", str(out_path), *cmd],
                                    cwd=cwd, env=env, stdin=go_r, stdout=done_w, stderr=err)
        os.close(done_w)
        os.close(go_r)
        done_w = go_r = -1
        try:
            os.read(done_r, 1)  # end of file: the command has ended and was reaped
            io = _read_proc_io(proc.pid)
            os.write(go_w, b"\n")
            exit_code = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    finally:
        for fd in (done_r, done_w, go_r, go_w):
            if fd >= 0:
                os.close(fd)
    finished = _Finished(exit_code, out_path.read_text(errors="replace"),
                         err_path.read_text(errors="replace"))
    return finished, io


def _read_proc_io(pid: int) -> dict[str, int] | None:
    """The kernel's I/O counters of a process (syscr, syscw, rchar, wchar, read_bytes, ...)."""
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return None
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {key.strip(): int(value) for key, value in pairs}


# --------------------------------------------------------------------------- reading a report


def format_report(report: SyscallReport, top: int = 12) -> str:
    """A small readable table of a report: dataset numbers, everything else, busiest calls."""
    def show(value: int | None) -> str:
        return "n/a" if value is None else f"{value:,}"

    sections = {
        "on the dataset's files": [
            ("file opens", report.dataset_opens), ("directory opens", report.dataset_dir_opens),
            ("reads", report.dataset_reads), ("bytes read", report.dataset_bytes_read),
            ("seeks", report.dataset_seeks), ("stat calls", report.dataset_stats),
            ("all traced calls", report.dataset_calls)],
        "everything else": [("file opens", report.other_opens), ("all traced calls", report.other_calls)],
        "whole process": [
            ("read calls", report.read_syscalls), ("write calls", report.write_syscalls),
            ("bytes read (all files)", report.chars_read),
            ("bytes read from storage", report.storage_bytes_read)],
    }
    lines = [f"command:  {' '.join(report.command)}", f"data dir: {report.dataset_dir}",
             f"method:   {report.method} ({report.note})", f"exit code: {report.exit_code}"]
    for title, rows in sections.items():
        lines += ["", title] + [f"  {label:<26}{show(value):>12}" for label, value in rows]
    if not report.by_syscall.empty:
        table = report.by_syscall.pivot_table(index="syscall", columns="target", values="calls",
                                              aggfunc="sum", fill_value=0)
        table = table.reindex(columns=list(TARGETS), fill_value=0)
        table = table.loc[table.sum(axis=1).sort_values(ascending=False).index[:top]]
        lines += ["", f"busiest traced system calls (top {top}, calls)", table.to_string()]
    return "\n".join(lines)
