"""strace's lines folded into one FileProfile per file and process: the bookkeeping that
follows descriptors, kept apart from what the records are (trace_files) and what is made of
them (trace_profile).

Whether an access continues where the previous one ended (sequential) needs its offset, and a
file position belongs to the open file *description*, not to the descriptor number: `dd
of=X` and a shell's `> X` write through a descriptor dup'd onto 1, a forked child through its
parent's. So descriptions are followed through dup, fcntl(F_DUPFD), fork and clone, an lseek
on any alias moves them all, and O_APPEND writes land at the end.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from iolab.diagnosis.trace_files import FileProfile
from iolab.measure.strace_parse import (
    COPIES,
    DUPS,
    FORKS,
    MMAPS,
    OPENS,
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
