"""What any program does with files, file by file and process by process: the trace reader of
the diagnosis (`python -m iolab profile -- CMD`, and `diagnose` of a command or saved trace).

The readers of the lessons are traced with the dataset known in advance; a learner's own
program is not, so this profile makes no assumption about where the data lies. One strace run
(-f -y -T) gives every call on a file with the path behind each descriptor and the time spent
in it. Every call that moves or syncs data counts: read and write in all their forms, the
copies made inside the kernel (copy_file_range, sendfile, splice: `cp` moves its bytes so,
never through read and write), mmap, the syncs, and opens with O_SYNC or O_DIRECT.

Whether an access continues where the previous one ended (sequential) needs its offset, and a
file position belongs to the open file *description*, not to the descriptor number: `dd
of=X` and a shell's `> X` write through a descriptor dup'd onto 1, a forked child through its
parent's. So descriptions are followed through dup, fcntl(F_DUPFD), fork and clone, an lseek
on any alias moves them all, and O_APPEND writes land at the end. Files are sorted into the
program's data, its software environment's and the system's (iolab.diagnosis.origins),
because a short script spends most of its calls importing, not reading its data.

Where strace is missing or ptrace is denied, the kernel's per-process counters
(/proc/<pid>/io) still give the calls and bytes of the whole run, without a per-file split.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError
from iolab.core.workspace import public_text
from iolab.diagnosis.facts import Run, complete
from iolab.diagnosis.origins import origins as path_origins
from iolab.diagnosis.origins import this_interpreter
from iolab.measure.strace_parse import (
    COPIES,
    DUPS,
    FORKS,
    MMAPS,
    OPENS,
    PROFILE_OPTIONS,
    READS,
    SEEKS,
    STATS,
    SYNCS,
    WRITES,
    TraceCall,
    TraceReader,
    annotation_path,
    fd_annotation,
    fd_number,
    offset_arg,
    string_arg,
)
from iolab.measure.strace_run import (
    check_command,
    require_strace,
    run_scratch,
    run_strace,
    strace_status,
)
from iolab.measure.syscall_fallback import run_counting_io

METHODS = ("auto", "strace", "proc-io")
#: Request-size classes (bytes, upper bound exclusive): the lab's own five, on powers of two a
#: learner can read at a glance. They are not Darshan's bins, whose bounds are decimal (100 B,
#: 1 KB, 10 KB, 100 KB, 1 MB, 4 MB, 10 MB, 100 MB, 1 GB); only the 1 MiB bound is shared in
#: spirit (Darshan's 1 MB, Drishti's small-request limit).
SIZE_BINS = (
    (4 * 1024, "<4KiB"),
    (64 * 1024, "4KiB-64KiB"),
    (1024**2, "64KiB-1MiB"),
    (16 * 1024**2, "1MiB-16MiB"),
    (float("inf"), ">=16MiB"),
)
#: A small request, as Darshan's histogram and Drishti count it: under 1 MiB.
SMALL_BYTES = 1024**2
#: The alignment a transfer's offset is checked against: the page size, and a divisor of
#: every Lustre stripe size and GPFS block size (Darshan checks the file system's own).
ALIGNMENT = 4096
_PATH_ARG = {
    "open": 0,
    "creat": 0,
    "openat": 1,
    "openat2": 1,
    "stat": 0,
    "lstat": 0,
    "stat64": 0,
    "lstat64": 0,
    "newfstatat": 1,
    "fstatat64": 1,
    "statx": 1,
    "access": 0,
    "faccessat": 1,
    "faccessat2": 1,
    "readlink": 0,
    "readlinkat": 1,
}
_FLAGS_ARG = {"open": 1, "openat": 2, "openat2": 2}
_DUP_COMMANDS = ("F_DUPFD", "F_DUPFD_CLOEXEC")
_SYNC_FLAGS = {"O_SYNC", "O_DSYNC", "O_RSYNC"}
#: The file a Python looks for to find its prefix (Modules/getpath.py): lib/pythonX.Y/os.py.
_LANDMARK = re.compile(r"^(/.+)/lib/python\d+\.\d+/os\.py$")


def size_class(nbytes: int) -> str:
    """The request-size class of a read or write of `nbytes`."""
    return next(label for bound, label in SIZE_BINS if nbytes < bound)


@dataclass
class FileProfile:
    """Everything one process did to one file (or, merged, every process)."""

    path: str
    opens: int = 0
    lookups: int = 0  # stat, access, readlink: metadata without opening
    reads: int = 0
    writes: int = 0
    seeks: int = 0
    syncs: int = 0  # fsync, fdatasync, sync_file_range, syncfs
    mmaps: int = 0
    other: int = 0  # close, fcntl, getdents, ioctl, ...
    sync_opens: int = 0  # opens with O_SYNC or O_DSYNC: every write waits for the disk
    direct_opens: int = 0  # opens with O_DIRECT: no page cache
    bytes_read: int = 0
    bytes_written: int = 0
    seq_reads: int = 0  # Darshan's: starting at or after the end of the previous read
    seq_writes: int = 0
    random_reads: int = 0  # transfers that go back before the end of the previous one
    random_writes: int = 0
    unaligned: int = 0  # transfers at a known offset that is not a multiple of ALIGNMENT
    max_byte_read: int = 0  # the highest byte read + 1
    max_byte_written: int = 0
    read_time_s: float = 0.0
    write_time_s: float = 0.0
    slowest_read_s: float = 0.0  # the single slowest read, and its size
    slowest_read_bytes: int = 0
    slowest_write_s: float = 0.0
    slowest_write_bytes: int = 0
    sync_time_s: float = 0.0
    meta_time_s: float = 0.0  # opens, lookups, seeks, closes and the other calls
    read_sizes: Counter = field(default_factory=Counter)
    write_sizes: Counter = field(default_factory=Counter)
    _read_end: int | None = None  # where the previous read of this record ended
    _write_end: int | None = None

    @property
    def calls(self) -> int:
        return (
            self.opens
            + self.lookups
            + self.reads
            + self.writes
            + self.seeks
            + self.syncs
            + self.mmaps
            + self.other
        )

    @property
    def io_time_s(self) -> float:
        return self.read_time_s + self.write_time_s + self.sync_time_s + self.meta_time_s

    @property
    def sequential(self) -> int:
        return self.seq_reads + self.seq_writes

    @property
    def random(self) -> int:
        return self.random_reads + self.random_writes

    def reopened(self) -> None:
        """A new open starts a new pass: its first access at 0 is sequential again (reading
        a file twice shows as bytes read beyond its size, not as random access)."""
        self._read_end = self._write_end = None

    def transfer(
        self,
        is_read: bool,
        offset: int | None,
        nbytes: int,
        seconds: float,
        succeeded: bool = True,
        appended: bool = False,
    ) -> None:
        """Count one read or write of `nbytes` at `offset` (None: unknown); an appended
        write is sequential wherever the end of the file was."""
        if is_read:
            self.reads += 1
            self.bytes_read += nbytes
            self.read_time_s += seconds
        else:
            self.writes += 1
            self.bytes_written += nbytes
            self.write_time_s += seconds
        side = "read" if is_read else "write"
        if seconds > getattr(self, f"slowest_{side}_s"):
            setattr(self, f"slowest_{side}_s", seconds)
            setattr(self, f"slowest_{side}_bytes", nbytes)
        if succeeded:  # an empty read at the end is a request too, as in Darshan
            (self.read_sizes if is_read else self.write_sizes)[size_class(nbytes)] += 1
        if offset is None and not appended:
            return
        previous = self._read_end if is_read else self._write_end
        if nbytes <= 0:  # the empty read at the end: a request at an offset, as in Darshan
            if offset is not None and succeeded:
                self._count_order(is_read, offset >= (previous or 0))
            return
        # unless appended, the offset is known here (returned above otherwise)
        self._count_order(is_read, appended or (offset is not None and offset >= (previous or 0)))
        if offset is None:
            return
        self.unaligned += offset % ALIGNMENT != 0
        end = offset + nbytes
        if is_read:
            self._read_end, self.max_byte_read = end, max(self.max_byte_read, end)
        else:
            self._write_end, self.max_byte_written = end, max(self.max_byte_written, end)

    def _count_order(self, is_read: bool, onward: bool) -> None:
        """Darshan's sequential (at or after the previous end) or a step back (random)."""
        if not onward and is_read:
            self.random_reads += 1
        elif not onward:
            self.random_writes += 1
        elif is_read:
            self.seq_reads += 1
        else:
            self.seq_writes += 1

    def add(self, other: FileProfile) -> None:
        """Add another record's counts (of the same file, another process) to this one."""
        for side in ("read", "write"):  # the slowest request, with its own size
            if getattr(other, f"slowest_{side}_s") > getattr(self, f"slowest_{side}_s"):
                for part in ("s", "bytes"):
                    name = f"slowest_{side}_{part}"
                    setattr(self, name, getattr(other, name))
        for item in fields(self):
            name = item.name
            if name == "path" or name.startswith(("_", "slowest_")):
                continue
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(self, name, max(mine, theirs) if name.startswith("max_") else mine + theirs)


def per_file(records: Mapping[tuple[str, str], FileProfile]) -> dict[str, FileProfile]:
    """The (file, process) records merged into one profile per file."""
    files: dict[str, FileProfile] = {}
    for (path, _), record in records.items():
        files.setdefault(path, FileProfile(path)).add(record)
    return files


@dataclass
class _Description:
    """An open file description: what dup'd and inherited descriptors share."""

    path: str
    position: int | None  # None: unknown (opened before the trace began)
    append: bool = False


def _result(call: TraceCall) -> int | None:
    """What a call returned if it succeeded (a descriptor, a byte count), else None."""
    return call.ret if call.succeeded else None


class _Tally:
    """Folds traced calls into one FileProfile per (file, process), following descriptors."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.records: dict[tuple[str, str], FileProfile] = {}
        self.tables: dict[str, dict[int, _Description]] = {}  # pid -> descriptors (threads share)
        self.sizes: dict[str, int] = {}  # sizes the trace made known: where appends land
        self.early: dict[str, list[TraceCall]] = {}  # a child's calls before its clone returned
        self.seconds: defaultdict[str, float] = defaultdict(float)  # pid -> s in traced calls

    def record(self, path: str, pid: str) -> FileProfile:
        return self.records.setdefault((path, pid), FileProfile(path))

    def add(self, call: TraceCall) -> None:
        """Count one call; a process the trace has not seen created yet waits for its clone
        (strace prints a new child's first calls before its parent's clone returns)."""
        if call.pid not in self.tables:
            if self.tables:
                self.early.setdefault(call.pid, []).append(call)
                return
            self.tables[call.pid] = {}  # the traced command itself
        self._add(call)

    def finish(self) -> dict[tuple[str, str], FileProfile]:
        """The records, after the calls of processes whose creation the trace did not show."""
        while self.early:
            pid = next(iter(self.early))
            self.tables[pid] = {}
            self._replay(pid)
        return self.records

    def _replay(self, pid: str) -> None:
        for call in self.early.pop(pid, []):
            self._add(call)

    def _add(self, call: TraceCall) -> None:
        self.seconds[call.pid] += call.duration_s or 0.0
        name = call.syscall
        if name in FORKS:
            self._forked(call)
        elif name in _PATH_ARG:
            self._named(call, name)
        elif name in COPIES:
            self._copy(call)
        elif name == "close_range":
            self._close_range(call)
        elif name in MMAPS:
            description = self._description(call.pid, call.args[4]) if len(call.args) > 4 else None
            if description is not None:
                record = self.record(description.path, call.pid)
                record.mmaps += 1
                record.meta_time_s += call.duration_s or 0.0
        elif call.args:
            self._on_descriptor(call, name)

    def _forked(self, call: TraceCall) -> None:
        """A child inherits a copy of its parent's descriptors; a thread shares them."""
        if not call.succeeded or call.ret == 0:
            return
        parent, child = self.tables[call.pid], str(call.ret)
        shared = call.syscall.startswith("clone") and "CLONE_FILES" in ",".join(call.args)
        self.tables[child] = parent if shared else dict(parent)
        self._replay(child)

    def _description(self, pid: str, arg: str) -> _Description | None:
        """The open file description behind a descriptor argument; None if no file's."""
        raw = fd_annotation(arg)
        path = annotation_path(raw) if raw is not None else None
        fd = fd_number(arg)
        if path is None or fd is None:
            return None  # a pipe, a socket, a terminal, AT_FDCWD or no descriptor at all
        table = self.tables[pid]
        description = table.get(fd)
        if description is None or description.path != path:  # opened before the trace
            description = table[fd] = _Description(path, None)
        return description

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
        record = self.record(path, call.pid)
        record.meta_time_s += call.duration_s or 0.0
        if name not in OPENS:
            record.lookups += 1
            return
        record.opens += 1
        where = _FLAGS_ARG.get(name)
        flags = set(
            re.findall(
                r"O_[A-Z]+",
                "O_TRUNC"
                if name == "creat"
                else call.args[where]
                if where is not None and len(call.args) > where
                else "",
            )
        )
        record.sync_opens += bool(flags & _SYNC_FLAGS)
        record.direct_opens += "O_DIRECT" in flags
        fd = _result(call)
        if fd is not None:
            record.reopened()
            self.tables[call.pid][fd] = _Description(path, 0, "O_APPEND" in flags)
            if "O_TRUNC" in flags:
                self.sizes[path] = 0

    def _on_descriptor(self, call: TraceCall, name: str) -> None:
        """A call on the descriptor in its first argument."""
        table = self.tables[call.pid]
        description = self._description(call.pid, call.args[0])
        if name in DUPS or (
            name.startswith("fcntl") and len(call.args) > 1 and call.args[1] in _DUP_COMMANDS
        ):
            fd = _result(call)
            if fd is not None and description is None:
                table.pop(fd, None)  # the new descriptor is now a pipe's, or a socket's
            elif fd is not None and description is not None:
                table[fd] = description
        elif name == "close":
            closed = fd_number(call.args[0])
            if closed is not None:
                table.pop(closed, None)  # the description lives on in its aliases
        if description is None:
            return
        record = self.record(description.path, call.pid)
        seconds = call.duration_s or 0.0
        if name in READS or name in WRITES:
            explicit = offset_arg(call.args[3]) if name[0] == "p" and len(call.args) > 3 else None
            self._move(record, description, name in READS, explicit, call, seconds)
        elif name in SYNCS:
            record.syncs += 1
            record.sync_time_s += seconds
        else:
            record.meta_time_s += seconds
            self._meta(call, name, record, description)

    def _meta(
        self, call: TraceCall, name: str, record: FileProfile, description: _Description
    ) -> None:
        if name in SEEKS:
            record.seeks += 1
            if call.succeeded:  # _llseek returns 0 and prints the new offset as [N]
                description.position = (
                    call.ret
                    if name == "lseek"
                    else next((offset_arg(a) for a in call.args[1:] if a.startswith("[")), None)
                )
        elif name in STATS:
            record.lookups += 1
        else:
            record.other += 1
            if name == "ftruncate" and call.succeeded and len(call.args) > 1:
                self.sizes[description.path] = offset_arg(call.args[1]) or 0
            elif name.startswith("fcntl") and call.args[1:2] == ["F_SETFL"] and call.succeeded:
                description.append = "O_APPEND" in call.args[2]

    def _move(
        self,
        record: FileProfile,
        description: _Description,
        is_read: bool,
        explicit: int | None,
        call: TraceCall,
        seconds: float,
    ) -> None:
        """A transfer at `explicit` (pread, pwrite: the position stays) or at the file
        position, which it moves; an O_APPEND write lands at the end, if the size is known."""
        nbytes = _result(call) or 0
        explicit = None if explicit is not None and explicit < 0 else explicit  # preadv2(-1)
        appended = not is_read and description.append
        offset = (
            explicit
            if explicit is not None
            else self.sizes.get(description.path)
            if appended
            else description.position
        )
        if explicit is None and call.succeeded:
            description.position = None if offset is None else offset + nbytes
        if not is_read and offset is not None and description.path in self.sizes:
            size = self.sizes[description.path]
            self.sizes[description.path] = max(size, offset + nbytes)
        record.transfer(is_read, offset, nbytes, seconds, call.succeeded, appended)

    def _copy(self, call: TraceCall) -> None:
        """copy_file_range, sendfile, splice: a read of one side, a write of the other, each
        at its offset argument or, where that is NULL, at its file position; the call's time
        is split between the sides that are files (a pipe or a socket is not). A copy that
        returns 0 is the end of the source: a read request, and no write."""
        args = call.args
        if len(args) < 4:
            return
        if call.syscall.startswith("sendfile"):  # sendfile(out_fd, in_fd, offset, count)
            sides = ((args[1], args[2], True), (args[0], "NULL", False))
        else:  # copy_file_range and splice: (fd_in, off_in, fd_out, off_out, len, flags)
            sides = ((args[0], args[1], True), (args[2], args[3], False))
        found = [
            (self._description(call.pid, fd), offset, is_read) for fd, offset, is_read in sides
        ]
        files = [
            (d, offset, is_read)
            for d, offset, is_read in found
            if d is not None and (is_read or call.ret != 0)
        ]
        for description, offset, is_read in files:
            record = self.record(description.path, call.pid)
            self._move(
                record,
                description,
                is_read,
                offset_arg(offset),
                call,
                (call.duration_s or 0.0) / len(files),
            )

    def _close_range(self, call: TraceCall) -> None:
        """close_range(first, last, flags) closes a whole range (unless it only marks them)."""
        if len(call.args) < 3 or "CLOSE_RANGE_CLOEXEC" in call.args[2] or not call.succeeded:
            return
        if "CLOSE_RANGE_UNSHARE" in call.args[2]:
            self.tables[call.pid] = dict(self.tables[call.pid])
        first, last = offset_arg(call.args[0]), offset_arg(call.args[1])
        table = self.tables[call.pid]
        for fd in [fd for fd in table if (first or 0) <= fd and (last is None or fd <= last)]:
            del table[fd]


def read_trace(
    lines: Iterable[str], cwd: str | os.PathLike
) -> tuple[dict[tuple[str, str], FileProfile], float]:
    """(file, pid) -> FileProfile from the text of `strace` with PROFILE_OPTIONS, in order of
    first touch, and the busiest process's seconds in traced calls."""
    tally = _Tally(os.path.abspath(cwd))
    for call in TraceReader().calls(lines):
        tally.add(call)
    return tally.finish(), max(tally.seconds.values(), default=0.0)


def traced_prefixes(paths: Iterable[str]) -> tuple[str, ...]:
    """The prefixes of the Pythons a trace shows starting, found by their landmark as Python
    finds its own; a Python installed in the system's folders (/usr) is left to them."""
    found = list(dict.fromkeys(m.group(1) for m in map(_LANDMARK.match, paths) if m))
    kinds: Iterable[str] = path_origins(pd.Series(found, dtype=object)) if found else []
    return tuple(prefix for prefix, kind in zip(found, kinds) if kind == "data")


@dataclass
class Profile:
    """A program's file I/O: per file and process with strace, whole-process counters without."""

    command: list[str]
    method: str  # "strace" or "proc-io"
    exit_code: int
    records: dict[tuple[str, str], FileProfile]  # (path, pid) -> what it did to the file
    process_io: dict[str, int] | None  # /proc/<pid>/io counters (proc-io only)
    note: str
    stdout: str = ""
    stderr: str = ""
    wall_time_s: float = 0.0  # the traced command's, strace's slowdown included
    untraced_wall_s: list[float] = field(default_factory=list)  # the same command, no tracer
    ran_here: bool = False  # a command traced now, not a trace saved earlier

    @property
    def tracer_slowdown(self) -> float | None:
        """The traced run's wall time over the median untraced one; None if not measured."""
        if not self.untraced_wall_s or self.method != "strace":
            return None
        untraced = statistics.median(self.untraced_wall_s)
        return self.wall_time_s / untraced if untraced > 0 else None

    @property
    def files(self) -> dict[str, FileProfile]:
        return per_file(self.records)

    def origins(self) -> dict[str, str]:
        """Each file's origin (iolab.diagnosis.origins), with the prefixes of this Python and
        of the Pythons the trace shows starting."""
        paths = list(dict.fromkeys(path for path, _ in self.records))
        if not paths:
            return {}
        prefixes = (*this_interpreter(), *traced_prefixes(paths))
        found = dict(zip(paths, map(str, path_origins(pd.Series(paths, dtype=object), prefixes))))
        # A folder Python searched for modules (the script's own, a source checkout on
        # sys.path) is the environment's: it holds environment files and moved no data.
        searched = {os.path.dirname(path) for path, kind in found.items() if kind == "environment"}
        files = self.files
        for path in searched & {p for p, kind in found.items() if kind == "data"}:
            done = files[path]
            if done.reads + done.writes + done.syncs + done.mmaps == 0:
                found[path] = "environment"
        return found

    def frame(self) -> pd.DataFrame:
        """One row per file, the busiest first; units in the column names."""
        origins = self.origins()
        columns = [
            "path",
            "origin",
            "calls",
            "opens",
            "lookups",
            "reads",
            "writes",
            "seeks",
            "syncs",
            "mmaps",
            "bytes_read",
            "bytes_written",
            "sequential",
            "random",
            "io_time_ms",
        ]
        rows = [
            {
                **{name: getattr(f, name) for name in columns[2:-1]},
                "path": public_text(f.path),
                "origin": origins[f.path],
                "io_time_ms": round(f.io_time_s * 1000, 3),
            }
            for f in self.files.values()
        ]
        frame = pd.DataFrame(rows, columns=columns)
        return frame.sort_values(["calls", "path"], ascending=[False, True], ignore_index=True)

    def by_origin(self) -> pd.DataFrame:
        """Totals for the program's data, its environment's files and the system's."""
        frame = self.frame().drop(columns="path")
        totals = frame.groupby("origin").sum(numeric_only=True)
        return totals.reindex(["data", "environment", "system"], fill_value=0).reset_index()

    def size_histogram(self, origin: str = "data") -> pd.DataFrame:
        """How many reads and writes fell in each size class, for files of one origin."""
        reads: Counter[str] = Counter()
        writes: Counter[str] = Counter()
        origins = self.origins()
        for f in self.files.values():
            if origins[f.path] == origin:
                reads.update(f.read_sizes)
                writes.update(f.write_sizes)
        labels = [label for _, label in SIZE_BINS]
        return pd.DataFrame(
            {
                "request_size": labels,
                "reads": [reads[x] for x in labels],
                "writes": [writes[x] for x in labels],
            }
        )

    def run(self) -> Run:
        """The trace as the diagnosis's facts: one POSIX record per file and process, ranked
        in the order the processes first touched a file."""
        origins = self.origins()
        ranks = {pid: rank for rank, pid in enumerate(dict.fromkeys(p for _, p in self.records))}
        small = [label for bound, label in SIZE_BINS if bound <= SMALL_BYTES]
        rows = [
            {
                "layer": "POSIX",
                "path": public_text(path),
                "rank": ranks[pid],
                "origin": origins[path],
                "opens": r.opens,
                "stats": r.lookups,
                "reads": r.reads,
                "writes": r.writes,
                "syncs": r.syncs,
                "sync_opens": r.sync_opens,
                "direct_opens": r.direct_opens,
                "mmaps": r.mmaps,
                "collective": 0,
                "bytes_read": r.bytes_read,
                "bytes_written": r.bytes_written,
                "small_reads": sum(r.read_sizes[x] for x in small),
                "small_writes": sum(r.write_sizes[x] for x in small),
                # a request at an unknown offset (a descriptor older than the trace) is no
                # evidence of random access: only the steps seen going back count
                "seq_reads": r.reads - r.random_reads,
                "seq_writes": r.writes - r.random_writes,
                "unaligned": r.unaligned,
                "alignment": ALIGNMENT,
                "max_byte_read": r.max_byte_read,
                "max_byte_written": r.max_byte_written,
                "read_time_s": r.read_time_s,
                "slowest_read_s": r.slowest_read_s,
                "slowest_read_bytes": r.slowest_read_bytes,
                "slowest_write_s": r.slowest_write_s,
                "slowest_write_bytes": r.slowest_write_bytes,
                "write_time_s": r.write_time_s,
                "meta_time_s": r.meta_time_s,
                "sync_time_s": r.sync_time_s,
            }
            for (path, pid), r in self.records.items()
        ]
        records = complete(pd.DataFrame(rows))
        numbers = [c for c in records.columns if c not in ("layer", "path", "origin")]
        return Run(
            "strace",
            " ".join(public_text(part) for part in self.command),
            len(ranks),
            self.wall_time_s,
            records.astype({c: "float64" for c in numbers}),
            facts={
                "method": self.method,
                "exit_code": self.exit_code,
                "ran_here": self.ran_here,
                **self._tracer_facts(),
            },
        )

    def _tracer_facts(self) -> dict[str, float | int]:
        slowdown = self.tracer_slowdown
        if slowdown is None:
            return {}
        return {
            "tracer_slowdown": slowdown,
            "untraced_runs": len(self.untraced_wall_s),
            "untraced_wall_median_s": statistics.median(self.untraced_wall_s),
            "untraced_wall_min_s": min(self.untraced_wall_s),
            "untraced_wall_max_s": max(self.untraced_wall_s),
        }

    def to_json_dict(self) -> dict:
        findings = []
        if self.method == "strace":
            from iolab.diagnosis.report import findings_records
            from iolab.diagnosis.rules import diagnose

            findings = findings_records(diagnose(self.run()))
        return {
            "command": [public_text(part) for part in self.command],
            "method": self.method,
            "exit_code": self.exit_code,
            "note": self.note,
            "wall_time_s": self.wall_time_s,
            **self._tracer_facts(),
            "files": self.frame().to_dict(orient="records"),
            "by_origin": self.by_origin().to_dict(orient="records"),
            "data_request_sizes": self.size_histogram().to_dict(orient="records"),
            "findings": findings,
            "process_io": self.process_io,
        }


def profile_command(
    cmd: Sequence[str],
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    method: str = "auto",
    untraced_runs: int = 0,
) -> Profile:
    """Run `cmd` once and profile its file I/O (see the module docstring).

    untraced_runs > 0: run it that many times without the tracer first, to measure how much
    strace slowed it (Profile.tracer_slowdown). Each run repeats what the command does.
    """
    if method not in METHODS:
        raise LabError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    cmd = check_command(cmd, cwd, env)
    status = strace_status()
    if method == "strace" or (method == "auto" and status.available):
        untraced = [_untraced_wall_s(cmd, cwd, env) for _ in range(untraced_runs)]
        profile = _traced(cmd, cwd, env)
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


def _traced(cmd: list[str], cwd, env) -> Profile:
    require_strace()
    with run_scratch("profile") as scratch:
        trace = scratch / "trace.txt"
        started = time.perf_counter()
        finished = run_strace(PROFILE_OPTIONS, cmd, cwd, env, trace)
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


def format_profile(profile: Profile, top: int = 10) -> str:
    """The report a learner reads: totals by origin, the busiest files, data request sizes,
    and the diagnosis of the run."""
    from iolab.core.tables import to_markdown

    lines = [
        f"command:   {' '.join(public_text(p) for p in profile.command)}",
        f"method:    {profile.method} ({profile.note})",
        f"exit code: {profile.exit_code}",
        f"wall time: {profile.wall_time_s:.3f} s",
        "",
    ]
    if profile.method == "proc-io":
        io = profile.process_io or {}
        for key, label in (
            ("syscr", "read calls"),
            ("syscw", "write calls"),
            ("rchar", "bytes read (any source)"),
            ("wchar", "bytes written (any target)"),
            ("read_bytes", "bytes read from storage"),
        ):
            lines.append(f"  {label:<28}{io.get(key, 'n/a'):>14}")
        return "\n".join(lines)
    from iolab.diagnosis.report import format_findings
    from iolab.diagnosis.rules import diagnose

    run = profile.run()
    lines += [
        "Totals by origin (data = your program's files)",
        to_markdown(profile.by_origin()),
        "",
        f"Busiest files (top {top} by calls)",
        to_markdown(profile.frame().head(top)),
        "",
        "Request sizes on data files",
        to_markdown(profile.size_histogram()),
        "",
        format_findings(diagnose(run), run),
    ]
    return "\n".join(lines)
