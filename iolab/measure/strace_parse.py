"""What strace prints, as data: the calls of `strace -f -y` and the table of `strace -c`.

Kept apart from running strace and from attributing calls (iolab.measure.syscalls), so the
parser can be fed captured text in a test and reused by other tracers (iolab.hpc.mpiio).

strace's text is hard to split naively: with several threads or processes a call is printed
in two halves (`<unfinished ...>`, `<... name resumed>`), and a path with spaces, commas or
parentheses appears inside a quoted argument or a `-y` annotation (`3</a b/c>`) in which
strace escapes quotes, `<`, `>` and non-ASCII bytes C-style. The `-c` table gains columns
in newer versions and repeats syscalls in one section per personality.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pandas as pd

# Trace every call that names a file (%file) or takes a descriptor (%desc: read, lseek, close,
# fstat, getdents64, mmap of a file, ...); -y prints the path behind each descriptor, -s 1 keeps
# data buffers out of the trace, -qq drops attach/exit messages, signal=none drops signal lines.
TRACE_OPTIONS = ("-f", "-y", "-qq", "-s", "1", "-e", "trace=%file,%desc", "-e", "signal=none")
SUMMARY_OPTIONS = ("-c", "-f")

#: Calls that move data without read or write, sync it, or map a file. %desc holds them in
#: strace 6.1 but classes change between versions, so they are named as well.
COPIES = frozenset({"copy_file_range", "sendfile", "sendfile64", "splice"})
SYNCS = frozenset({"fsync", "fdatasync", "sync_file_range", "sync_file_range2", "syncfs"})
MMAPS = frozenset({"mmap", "mmap2"})
DUPS = frozenset({"dup", "dup2", "dup3"})
#: New processes and threads: their parent's descriptors are inherited (or shared).
FORKS = frozenset({"clone", "clone3", "fork", "vfork"})
#: The per-file profile's trace: every call on a file, plus the calls that create processes
#: (not in %desc) so inherited descriptors keep their file positions. `?name` lets strace
#: skip a call this architecture lacks (fork and vfork on arm64) instead of failing.
PROFILE_OPTIONS = (
    "-f",
    "-y",
    "-T",
    "-qq",
    "-s",
    "1",
    "-e",
    "trace=%file,%desc,"
    + ",".join(
        f"?{name}"
        for name in sorted(
            COPIES
            | SYNCS
            | MMAPS
            | DUPS
            | FORKS
            | {"fcntl", "fcntl64", "close_range", "lseek", "_llseek", "ftruncate"}
        )
    ),
    "-e",
    "signal=none",
)

#: Families of system calls, by the names strace prints on x86-64 and other architectures.
OPENS = frozenset({"open", "openat", "openat2", "creat"})
READS = frozenset({"read", "pread64", "readv", "preadv", "preadv2"})
WRITES = frozenset({"write", "pwrite64", "writev", "pwritev", "pwritev2"})
SEEKS = frozenset({"lseek", "_llseek"})
STATS = frozenset(
    {
        "stat",
        "lstat",
        "fstat",
        "newfstatat",
        "fstatat64",
        "statx",
        "stat64",
        "lstat64",
        "fstat64",
        "oldstat",
        "oldlstat",
        "oldfstat",
    }
)

_CALL_START = re.compile(r"([A-Za-z_][A-Za-z0-9_]*|\?\?\?)\(")
_RESUMED = re.compile(r"<\.\.\. ([A-Za-z0-9_?]+) resumed>(.*)$")
_UNFINISHED = " <unfinished ...>"
_RESULT = re.compile(r"\s*=\s*(-?\d+|0x[0-9a-fA-F]+|\?)(?:<((?:[^<>\\]|\\.)*)>)?")
_DURATION = re.compile(r"<(\d+\.\d+)>\s*$")  # strace -T: ` <0.000012>` after the result
_FD_ANNOTATION = re.compile(r"(?:-?\d+|AT_FDCWD)<((?:[^<>\\]|\\.)*)>")
_TOKEN = re.compile(
    r'(?P<str>"(?:[^"\\]|\\.)*"(?:\.\.\.)?)'
    r"|(?P<ann><(?:[^<>\\]|\\.)*>)"
    r"|(?P<open>[(\[{])|(?P<close>[)\]}])|(?P<comma>,)"
    r'|(?P<other>/\*.*?\*/|[^"<,()\[\]{}/]+|.)'
)
_FD_NUMBER = re.compile(r"(-?\d+)(?:<|$)")
_OFFSET = re.compile(r"\[?(-?\d+|0x[0-9a-fA-F]+)\]?(?:\s|$)")
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)", re.S)
_SIMPLE_ESCAPES = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "a": 7, "b": 8}


# --------------------------------------------------------------------------- strace -c


def parse_strace_summary(lines: Iterable[str]) -> pd.DataFrame:
    """Parse the table `strace -c` writes, tolerating extra columns and several sections.

    Columns are found from the header line, so versions that add columns still parse; an
    empty errors cell means 0; rows of a syscall listed in several sections (processes of
    different personalities) are added up, and usecs_per_call is recomputed from them.
    """
    header: list[str] | None = None
    rows: list[dict[str, str]] = []
    for line in lines:
        text = line.strip()
        if text.startswith("% time"):
            header = text.replace("% time", "%time", 1).split()
        elif header and text and not text.startswith("-") and text[0].isdigit():
            row = _summary_row(header, text.split())
            if row and row["syscall"] != "total":
                rows.append(row)
    return _summary_frame(rows)


def _summary_row(header: list[str], cells: list[str]) -> dict[str, str] | None:
    if len(cells) == len(header) - 1 and "errors" in header:
        cells.insert(header.index("errors"), "0")
    return dict(zip(header, cells, strict=False)) if len(cells) == len(header) else None


def _summary_frame(rows: list[dict[str, str]]) -> pd.DataFrame:
    columns = ["syscall", "calls", "errors", "time_pct", "time_s", "usecs_per_call"]
    raw = pd.DataFrame(rows, columns=["syscall", "calls", "errors", "%time", "seconds"])
    frame = pd.DataFrame(
        {
            "syscall": raw["syscall"].astype(str),
            "calls": raw["calls"].astype("int64"),
            "errors": raw["errors"].astype("int64"),
            "time_pct": raw["%time"].astype(float),
            "time_s": raw["seconds"].astype(float),
        }
    )
    frame = frame.groupby("syscall", as_index=False, sort=False).sum()
    frame["usecs_per_call"] = frame["time_s"] * 1e6 / frame["calls"].where(frame["calls"] > 0)
    frame = frame.sort_values(["calls", "syscall"], ascending=[False, True], kind="stable")
    return frame.reset_index(drop=True)[columns]


# --------------------------------------------------------------------------- strace -f -y


@dataclass
class TraceCall:
    """One system call from `strace -f -y`, with its arguments as strace printed them."""

    pid: str
    syscall: str
    args: list[str]
    ret: int | None
    ret_annotation: str | None  # the raw -y path behind a returned descriptor, e.g. of openat
    duration_s: float | None = None  # time spent in the call, printed with strace -T

    @property
    def succeeded(self) -> bool:
        return self.ret is not None and self.ret >= 0


def parse_call(pid: str, text: str) -> TraceCall | None:
    """Parse `name(args) = ret` (without the pid); None if the text is not a whole call."""
    start = _CALL_START.match(text)
    if not start:
        return None
    args, end = _split_args(text, start.end())
    if end is None:
        return None
    result = _RESULT.match(text, end)
    ret = None
    if result and result.group(1) != "?":
        ret = int(result.group(1), 0)
    duration = _DURATION.search(text, result.end() if result else end)
    return TraceCall(
        pid,
        start.group(1),
        args,
        ret,
        result.group(2) if result else None,
        float(duration.group(1)) if duration else None,
    )


def _split_args(text: str, start: int) -> tuple[list[str], int | None]:
    """Split top-level arguments up to the call's closing parenthesis.

    Quoted strings and <...> path annotations are single tokens (strace escapes quotes, <
    and > inside them), so paths with spaces, commas or parentheses do not split arguments.
    """
    args: list[str] = []
    depth, begin = 0, start
    for token in _TOKEN.finditer(text, start):
        kind = token.lastgroup
        if kind == "open":
            depth += 1
        elif kind == "close":
            if depth == 0:
                args.append(text[begin : token.start()].strip())
                return ([] if args == [""] else args), token.end()
            depth -= 1
        elif kind == "comma" and depth == 0:
            args.append(text[begin : token.start()].strip())
            begin = token.end()
    return args, None


class TraceReader:
    """Turns the lines of `strace -f` into whole calls, each counted once.

    With several threads or processes strace splits a call into `name(args <unfinished ...>`
    and, later, `<... name resumed>rest`; the halves are joined per pid before parsing.
    `unparsed` counts lines that were neither a call nor a known status line.
    """

    def __init__(self) -> None:
        self.pending: dict[str, str] = {}
        self.unparsed = 0

    def calls(self, lines: Iterable[str]) -> Iterator[TraceCall]:
        for line in lines:
            call = self._feed(line.rstrip("\n"))
            if call is not None:
                yield call
        for pid, text in self.pending.items():  # never resumed: the process died mid-call
            call = parse_call(pid, text + ") = ?")
            if call is not None:
                yield call
        self.pending.clear()

    def _feed(self, line: str) -> TraceCall | None:
        pid, _, rest = line.partition(" ")
        if not pid.isdigit():
            pid, rest = "0", line
        rest = rest.lstrip()
        if not rest or rest.startswith(("+++", "---", "[ ")):
            return None
        if rest.endswith(_UNFINISHED):
            self.pending[pid] = rest[: -len(_UNFINISHED)]
            return None
        resumed = _RESUMED.match(rest)
        if resumed:
            return self._resume(pid, resumed.group(1), resumed.group(2))
        return self._parsed(pid, rest)

    def _resume(self, pid: str, name: str, tail: str) -> TraceCall | None:
        head = self.pending.pop(pid, None)
        if head is None or not head.startswith(name + "("):
            # The first half was not seen: count the call, without arguments to attribute.
            return TraceCall(pid, name, [], None, None)
        return self._parsed(pid, head + tail)

    def _parsed(self, pid: str, text: str) -> TraceCall | None:
        call = parse_call(pid, text)
        if call is None:
            self.unparsed += 1
        return call


# --------------------------------------------------------------------------- paths in arguments


def unescape_strace(text: str) -> str:
    """Undo strace's C-style escapes (\\303\\251, \\", \\n, \\76 for >) to get the real path."""
    if "\\" not in text:
        return text
    out = bytearray()
    pos = 0
    for match in _ESCAPE.finditer(text):
        out += text[pos : match.start()].encode("utf-8", "surrogateescape")
        code = match.group(1)
        if code[0] == "x" and len(code) == 3:
            out.append(int(code[1:], 16))
        elif code[0] in "01234567":
            out.append(int(code, 8) & 0xFF)
        else:
            out += bytes([_SIMPLE_ESCAPES[code]]) if code in _SIMPLE_ESCAPES else code.encode()
        pos = match.end()
    out += text[pos:].encode("utf-8", "surrogateescape")
    return os.fsdecode(bytes(out))


def fd_annotation(arg: str) -> str | None:
    """The raw path strace -y printed behind a descriptor argument (`3</a/b>`), else None."""
    match = _FD_ANNOTATION.fullmatch(arg)
    return match.group(1) if match else None


def annotation_path(raw: str) -> str | None:
    """A file-system path from an annotation; pipes, sockets and anon inodes have none."""
    path = unescape_strace(raw)
    return path if path.startswith("/") else None


def fd_number(arg: str) -> int | None:
    """The descriptor in an argument as strace prints it (`3</a/b>`, `3`), else None."""
    match = _FD_NUMBER.match(arg)
    return int(match.group(1)) if match else None


def offset_arg(arg: str) -> int | None:
    """An offset passed by value (`4096`) or by pointer (`[4096]`, `[0] => [6]`); None for
    NULL, where the call uses and moves the descriptor's file position instead."""
    match = _OFFSET.match(arg)
    return int(match.group(1), 0) if match else None


def string_arg(arg: str) -> str:
    """The text of a quoted argument (`"a b"` or a truncated `"a b"...`), unescaped."""
    return unescape_strace(arg.removesuffix("...")[1:-1])
