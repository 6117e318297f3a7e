"""What any program does with files, file by file: `python -m iolab profile -- CMD ...`.

The readers of the lessons are traced with the dataset known in advance; a learner's own
program is not, so this profile makes no assumption about where the data lies. One strace run
(-f -y -T) gives every call on a file with the path behind each descriptor and the time spent
in it; from that each file gets its opens, metadata lookups, reads and writes with their
sizes, seeks, whether its accesses continue where the previous one ended (sequential) or jump
(random), and the time in its calls. Files are sorted into the program's data, the Python
interpreter's own files (modules, extension libraries) and the system's (/etc, /proc, ...),
because a short script spends most of its calls importing, not reading its data.

Where strace is missing or ptrace is denied, the kernel's per-process counters
(/proc/<pid>/io) still give the calls and bytes of the whole run, without a per-file split.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

from iolab.core.errors import LabError
from iolab.core.workspace import public_text
from iolab.measure.diagnose import (SMALL_BYTES, FileIO, IOSummary, diagnose, findings_frame,
                                    format_findings)
from iolab.measure.strace_parse import (OPENS, READS, SEEKS, STATS, TRACE_OPTIONS, WRITES,
                                        TraceCall, TraceReader, annotation_path, fd_annotation,
                                        string_arg)
from iolab.measure.strace_run import (check_command, require_strace, run_scratch, run_strace,
                                      strace_status)
from iolab.measure.syscall_fallback import run_counting_io

PROFILE_OPTIONS = (*TRACE_OPTIONS, "-T")
METHODS = ("auto", "strace", "proc-io")
#: Request-size classes (bytes, upper bound exclusive), the bins Darshan's POSIX module uses
#: up to 1 GiB, merged into five a learner can read at a glance.
SIZE_BINS = ((4 * 1024, "<4KiB"), (64 * 1024, "4KiB-64KiB"), (1024**2, "64KiB-1MiB"),
             (16 * 1024**2, "1MiB-16MiB"), (float("inf"), ">=16MiB"))
#: The alignment a transfer's offset is checked against: the page size, and a divisor of
#: every Lustre stripe size and GPFS block size (Darshan checks the file system's own).
ALIGNMENT = 4096
LOOKUPS = STATS | {"access", "faccessat", "faccessat2", "readlink", "readlinkat"}
_PATH_ARG = {"open": 0, "creat": 0, "openat": 1, "openat2": 1, "stat": 0, "lstat": 0,
             "stat64": 0, "lstat64": 0, "newfstatat": 1, "fstatat64": 1, "statx": 1,
             "access": 0, "faccessat": 1, "faccessat2": 1, "readlink": 0, "readlinkat": 1}
_SYSTEM_ROOTS = ("/proc", "/sys", "/dev", "/etc", "/usr", "/lib", "/lib64", "/bin", "/sbin",
                 "/run", "/var/lib", "/var/cache", "/opt/conda/pkgs")
_INTERPRETER_SUFFIXES = (".py", ".pyc", ".so", ".pth", ".pyi")


def size_class(nbytes: int) -> str:
    """The request-size class of a read or write of `nbytes`."""
    return next(label for bound, label in SIZE_BINS if nbytes < bound)


def origin_of(path: str, prefixes: Sequence[str] = ()) -> str:
    """'interpreter' (Python's modules and libraries), 'system' (/etc, /proc, /usr, ...) or
    'data' (everything else: what the program itself reads and writes)."""
    prefixes = prefixes or tuple({sys.prefix, sys.base_prefix, sys.exec_prefix})
    if any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes):
        return "interpreter"
    if path.endswith(_INTERPRETER_SUFFIXES) or "/__pycache__/" in path or "site-packages" in path:
        return "interpreter"
    if any(path == root or path.startswith(root + "/") for root in _SYSTEM_ROOTS):
        return "system"
    return "data"


@dataclass
class FileProfile:
    """Everything one program did to one file."""

    path: str
    opens: int = 0
    lookups: int = 0  # stat, access, readlink: metadata without opening
    reads: int = 0
    writes: int = 0
    seeks: int = 0
    other: int = 0  # close, fcntl, mmap, getdents, ...
    bytes_read: int = 0
    bytes_written: int = 0
    sequential: int = 0  # reads and writes at or after the end of the previous one
    random: int = 0  # those that go back
    io_time_s: float = 0.0
    meta_time_s: float = 0.0  # the part of io_time_s spent in opens and lookups
    unaligned: int = 0  # transfers at a known offset that is not a multiple of ALIGNMENT
    max_end: int = 0  # the highest byte touched + 1: at least the bytes of the file used
    read_sizes: Counter = field(default_factory=Counter)
    write_sizes: Counter = field(default_factory=Counter)
    bytes_by_process: Counter = field(default_factory=Counter)  # pid -> bytes moved
    _end: int | None = None  # where the last read or write of this file ended

    @property
    def calls(self) -> int:
        return self.opens + self.lookups + self.reads + self.writes + self.seeks + self.other

    def reopened(self) -> None:
        """A new open starts a new pass: its first access at 0 is sequential again (reading
        a file twice shows as bytes read beyond its size, not as random access)."""
        self._end = None

    def access(self, offset: int | None, nbytes: int) -> None:
        """Count a transfer at `offset` (None: unknown) as sequential or random."""
        if nbytes <= 0:
            return
        if offset is not None:
            expected = 0 if self._end is None else self._end
            if offset >= expected:  # Darshan's "sequential": at or after the previous end
                self.sequential += 1
            else:
                self.random += 1
            self.unaligned += offset % ALIGNMENT != 0
            self._end = offset + nbytes
            self.max_end = max(self.max_end, self._end)


class _Tally:
    """Folds traced calls into FileProfiles, keeping each descriptor's file position."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.files: dict[str, FileProfile] = {}
        self.positions: dict[tuple[str, str], int] = {}  # (descriptor, path) -> offset

    def file(self, path: str) -> FileProfile:
        return self.files.setdefault(path, FileProfile(path))

    def add(self, call: TraceCall) -> None:
        name = call.syscall
        if name in _PATH_ARG:
            self._named(call, name)
            return
        if not call.args:
            return
        raw = fd_annotation(call.args[0])
        path = annotation_path(raw) if raw is not None else None
        if path is None:
            return  # a pipe, a socket, a terminal, or no descriptor at all
        profile = self.file(path)
        profile.io_time_s += call.duration_s or 0.0
        key = (call.args[0].split("<", 1)[0], path)
        if name in READS or name in WRITES:
            self._transfer(call, profile, key, name in READS)
        elif name in SEEKS:
            profile.seeks += 1
            if call.succeeded:
                self.positions[key] = call.ret
        elif name in STATS:
            profile.lookups += 1
            profile.meta_time_s += call.duration_s or 0.0
        else:
            profile.other += 1
            if name == "close":
                self.positions.pop(key, None)

    def _named(self, call: TraceCall, name: str) -> None:
        index = _PATH_ARG[name]
        if len(call.args) <= index:
            return
        spelled = string_arg(call.args[index]) if call.args[index].startswith('"') else ""
        if not spelled and index == 1:  # fstatat(fd, "", ..., AT_EMPTY_PATH): the fd's file
            raw = fd_annotation(call.args[0])
            spelled = annotation_path(raw) or "" if raw else ""
        if not spelled:
            return
        base = self.cwd
        if index == 1 and not spelled.startswith("/"):
            raw = fd_annotation(call.args[0])
            base = (annotation_path(raw) if raw else None) or self.cwd
        path = call.ret_annotation and annotation_path(call.ret_annotation)
        path = path or os.path.normpath(os.path.join(base, spelled))
        profile = self.file(path)
        profile.io_time_s += call.duration_s or 0.0
        profile.meta_time_s += call.duration_s or 0.0
        if name in OPENS:
            profile.opens += 1
            if call.succeeded:
                self.positions[(str(call.ret), path)] = 0
                profile.reopened()
        else:
            profile.lookups += 1

    def _transfer(self, call: TraceCall, profile: FileProfile, key: tuple[str, str],
                  is_read: bool) -> None:
        nbytes = call.ret if call.succeeded else 0
        positional = call.syscall.startswith("p")  # pread64, pwritev, ...: offset is an argument
        offset = None
        if positional and len(call.args) >= 4:
            try:
                offset = int(call.args[3], 0)
            except ValueError:
                offset = None
        elif not positional:
            offset = self.positions.get(key)
            if offset is not None:
                self.positions[key] = offset + nbytes
        profile.bytes_by_process[call.pid] += nbytes
        if is_read:
            profile.reads += 1
            profile.bytes_read += nbytes
            if call.succeeded:  # an empty read at the end is a request too, as in Darshan
                profile.read_sizes[size_class(nbytes)] += 1
        else:
            profile.writes += 1
            profile.bytes_written += nbytes
            if call.succeeded:
                profile.write_sizes[size_class(nbytes)] += 1
        profile.access(offset, nbytes)


def profile_trace(lines: Iterable[str], cwd: str | os.PathLike) -> dict[str, FileProfile]:
    """Per-file profiles from the text of `strace -f -y -T -e trace=%file,%desc`."""
    tally = _Tally(os.path.abspath(cwd))
    for call in TraceReader().calls(lines):
        tally.add(call)
    return tally.files


@dataclass
class Profile:
    """A program's file I/O: per file with strace, whole-process counters without it."""

    command: list[str]
    method: str  # "strace" or "proc-io"
    exit_code: int
    files: dict[str, FileProfile]
    process_io: dict[str, int] | None  # /proc/<pid>/io counters (proc-io only)
    note: str
    stdout: str = ""
    stderr: str = ""

    def origins(self) -> dict[str, str]:
        """Each file's origin; a folder Python searched for modules (the parent of an
        interpreter file, like the script's own folder) counts as the interpreter's."""
        origins = {path: origin_of(path) for path in self.files}
        searched = {os.path.dirname(p) for p, origin in origins.items() if origin == "interpreter"}
        return {p: "interpreter" if p in searched else origin for p, origin in origins.items()}

    def frame(self) -> pd.DataFrame:
        """One row per file, the busiest first; units in the column names."""
        origins = self.origins()
        rows = [{"path": public_text(f.path), "origin": origins[f.path], "calls": f.calls,
                 "opens": f.opens, "lookups": f.lookups, "reads": f.reads, "writes": f.writes,
                 "seeks": f.seeks, "bytes_read": f.bytes_read, "bytes_written": f.bytes_written,
                 "sequential": f.sequential, "random": f.random,
                 "io_time_ms": round(f.io_time_s * 1000, 3)} for f in self.files.values()]
        columns = ["path", "origin", "calls", "opens", "lookups", "reads", "writes", "seeks",
                   "bytes_read", "bytes_written", "sequential", "random", "io_time_ms"]
        frame = pd.DataFrame(rows, columns=columns)
        return frame.sort_values(["calls", "path"], ascending=[False, True], ignore_index=True)

    def by_origin(self) -> pd.DataFrame:
        """Totals for the program's data, the interpreter's files and the system's."""
        frame = self.frame().drop(columns="path")
        totals = frame.groupby("origin").sum(numeric_only=True)
        return totals.reindex(["data", "interpreter", "system"], fill_value=0).reset_index()

    def size_histogram(self, origin: str = "data") -> pd.DataFrame:
        """How many reads and writes fell in each size class, for files of one origin."""
        reads, writes = Counter(), Counter()
        origins = self.origins()
        for f in self.files.values():
            if origins[f.path] == origin:
                reads.update(f.read_sizes)
                writes.update(f.write_sizes)
        labels = [label for _, label in SIZE_BINS]
        return pd.DataFrame({"request_size": labels, "reads": [reads[x] for x in labels],
                             "writes": [writes[x] for x in labels]})

    def summary(self) -> IOSummary:
        """The data files' facts in the terms of the diagnosis rules (iolab.measure.diagnose);
        the interpreter's and the system's files are not the program's I/O to fix."""
        origins = self.origins()
        below_1mib = [label for bound, label in SIZE_BINS if bound <= SMALL_BYTES]
        files = [FileIO(public_text(f.path), f.opens, f.lookups, f.reads, f.writes,
                        f.bytes_read, f.bytes_written,
                        sum(f.read_sizes[x] + f.write_sizes[x] for x in below_1mib),
                        f.sequential, f.random, f.unaligned, f.max_end, f.meta_time_s,
                        {pid: n for pid, n in f.bytes_by_process.items()})
                 for f in self.files.values() if origins[f.path] == "data"]
        pids = {pid for f in self.files.values() for pid in f.bytes_by_process}
        return IOSummary("strace", files, processes=max(len(pids), 1))

    def to_json_dict(self) -> dict:
        return {"command": [public_text(part) for part in self.command], "method": self.method,
                "exit_code": self.exit_code, "note": self.note,
                "files": self.frame().to_dict(orient="records"),
                "by_origin": self.by_origin().to_dict(orient="records"),
                "data_request_sizes": self.size_histogram().to_dict(orient="records"),
                "findings": findings_frame(diagnose(self.summary())).to_dict(orient="records")
                if self.method == "strace" else [],
                "process_io": self.process_io}


def profile_command(cmd: Sequence[str], cwd: str | os.PathLike | None = None,
                    env: Mapping[str, str] | None = None, method: str = "auto") -> Profile:
    """Run `cmd` once and profile its file I/O (see the module docstring)."""
    if method not in METHODS:
        raise LabError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    cmd = check_command(cmd, cwd, env)
    status = strace_status()
    if method == "strace" or (method == "auto" and status.available):
        return _traced(cmd, cwd, env)
    why = "asked for" if method == "proc-io" else status.reason
    with run_scratch("profile") as scratch:
        finished, io = run_counting_io(cmd, cwd, env, scratch)
    note = (f"strace not used ({why}): whole-process counters from /proc/<pid>/io, no "
            "per-file split" if io else f"strace not used ({why}) and /proc/<pid>/io "
            "unreadable: nothing could be measured")
    return Profile(cmd, "proc-io", finished.exit_code, {}, io, note,
                   finished.stdout, finished.stderr)


def _traced(cmd: list[str], cwd, env) -> Profile:
    require_strace()
    with run_scratch("profile") as scratch:
        trace = scratch / "trace.txt"
        finished = run_strace(PROFILE_OPTIONS, cmd, cwd, env, trace)
        with open(trace, encoding="utf-8", errors="replace") as lines:
            files = profile_trace(lines, Path(cwd or ".").resolve())
    return Profile(cmd, "strace", finished.exit_code, files, None,
                   "strace -f -y -T: every call on a file, with the time spent in it",
                   finished.stdout, finished.stderr)


def format_profile(profile: Profile, top: int = 10) -> str:
    """The report a learner reads: totals by origin, the busiest files, data request sizes."""
    from iolab.core.tables import to_markdown

    lines = [f"command:   {' '.join(public_text(p) for p in profile.command)}",
             f"method:    {profile.method} ({profile.note})",
             f"exit code: {profile.exit_code}", ""]
    if profile.method == "proc-io":
        io = profile.process_io or {}
        for key, label in (("syscr", "read calls"), ("syscw", "write calls"),
                           ("rchar", "bytes read (any source)"),
                           ("wchar", "bytes written (any target)"),
                           ("read_bytes", "bytes read from storage")):
            lines.append(f"  {label:<28}{io.get(key, 'n/a'):>14}")
        return "\n".join(lines)
    lines += ["Totals by origin (data = your program's files)", to_markdown(profile.by_origin()),
              "", f"Busiest files (top {top} by calls)",
              to_markdown(profile.frame().head(top)), "",
              "Request sizes on data files", to_markdown(profile.size_histogram()), ""]
    lines.append(format_findings(diagnose(profile.summary())))
    return "\n".join(lines)
