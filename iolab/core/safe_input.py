"""Reading what may be anyone's: only regular files, never through a link, never waiting on a
FIFO, and bookkeeping JSON checked against its schema before any field is used.

A login node is shared, and a dataset folder may hold what the lab did not put there: a link
that leads out of the dataset, a FIFO (reading it waits forever), a device, a file the user
may not read, a manifest whose fields have the wrong type. Every reader of the lab's files
goes through open_regular or read_checked_json, and whatever they refuse becomes one
sentence (UnsafeInput), never a traceback and never a hang.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Mapping
from datetime import date
from pathlib import Path
from typing import BinaryIO

from iolab.core.errors import LabError

#: The most a manifest, archive.json or shard index may hold: the manifest of the largest
#: dataset (MAX_FILES files) is about 15 MB, so a larger file is not the lab's, and reading it
#: whole could take a shared login node's memory.
MAX_BOOKKEEPING_BYTES = 64 * 1024**2
#: The largest number a manifest field may hold: every JSON reader (jq, a browser, pandas)
#: holds integers exactly up to a double's 53-bit mantissa, and a dataset's counts and sizes
#: stay far below it.
MAX_FIELD_INT = 2**53 - 1
_SHA256 = re.compile(r"[0-9a-f]{64}")


class UnsafeInput(LabError):
    """Input the lab refuses to read at all: not readable by the user, not a regular file, a
    link or a path that may lead out of the dataset, or bookkeeping unlike what the lab writes.

    Unlike damage (a file missing or changed), which a rebuild repairs, someone else put it
    there: every command refuses it in one sentence, --verify included, and no writer
    replaces it.
    """


class NotRegularFile(OSError):
    """A FIFO, device, socket, folder or link where a regular file was expected."""

    def __init__(self, path: Path, mode: int) -> None:
        self.mode = mode
        self.kind = file_kind(mode)
        super().__init__(errno.EINVAL, f"{path} is {self.kind}, not a regular file")


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def file_kind(mode: int) -> str:
    """What a file is, in words ("a FIFO (named pipe)"), from its st_mode."""
    return next((kind for test, kind in _KINDS if test(mode)), "a special file")


def open_regular(
    path: Path | str, follow_links: bool = True, dir_fd: int | None = None
) -> BinaryIO:
    """`path` open for reading if it is a regular file, else NotRegularFile (an OSError).

    O_NONBLOCK makes opening a FIFO return at once instead of waiting for a writer that never
    comes, and the type is taken from the open file (fstat), so a name swapped after a check
    cannot slip through. With follow_links=False a link is refused (ELOOP). With `dir_fd`,
    `path` is a name in that held folder, which a swapped parent cannot redirect.
    """
    extra = os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)
    # the file object owns the descriptor from the start: a Ctrl-C at any moment closes it once
    handle = open(
        path, "rb", opener=lambda name, flags: os.open(name, flags | extra, dir_fd=dir_fd)
    )
    try:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(Path(path), mode)
    except BaseException:
        handle.close()
        raise
    return handle


def printable(text: object, limit: int = 200) -> str:
    """`text` as it may reach a terminal or a log: every control or format character (an
    escape code, a carriage return, a bidi override) written as its Python escape, and cut to
    `limit` characters, since what another user wrote must not move a cursor or recolour,
    hide or reorder what the reader sees."""
    shown = str(text)
    cut = shown[:limit]
    escaped = "".join(
        char.encode("unicode_escape").decode("ascii")
        if unicodedata.category(char)[0] == "C" or unicodedata.category(char) in ("Zl", "Zp")
        else char
        for char in cut
    )
    return escaped + ("..." if len(shown) > limit else "")


def unreadable(path: Path, err: OSError, fix: str) -> UnsafeInput:
    """The one sentence for a file the lab cannot or will not read: what it is, and the fix."""
    if isinstance(err, PermissionError):
        why = "you may not read it (make it readable with `chmod u+r`, or ask its owner)"
    elif err.errno == errno.ELOOP or (isinstance(err, NotRegularFile) and stat.S_ISLNK(err.mode)):
        why = "it is a symbolic link, and the lab follows no link: it may lead out of the dataset"
    elif isinstance(err, NotRegularFile):
        why = f"it is {err.kind}, not a regular file"
    else:
        why = err.strerror or str(err)
    return UnsafeInput(f"cannot read {path}: {why}; {fix}")


def _unreachable(folder: Path) -> str:
    return (
        f"{folder} cannot be reached: a folder on its path is not readable by you; fix its "
        "permissions (chmod u+rx) or choose another folder"
    )


def regular_files(dataset_dir: Path, folder: str, fix: str) -> set[str]:
    """The regular files below DIR/`folder`, relative to DIR ("data/..."); none if no folder.

    Listed as any reader lists them (os.scandir: the file types come with the names, at no
    extra call), and anything else there is UnsafeInput naming it: a link (it may lead out of
    the dataset), a FIFO (reading it waits forever), a device or socket, a folder the user
    cannot read.
    """
    dataset_dir = Path(dataset_dir)
    root = dataset_dir / folder
    try:
        mode = root.lstat().st_mode
    except FileNotFoundError:
        return set()
    except OSError as err:
        raise unreadable(root, err, fix) from None
    if not stat.S_ISDIR(mode):
        raise unreadable(root, NotRegularFile(root, mode), fix)
    # Strings, not a Path per entry: readers time this listing, and a Path per file costs
    # more than the listing itself on a warm cache.
    skip = len(os.path.join(dataset_dir, ""))
    found: set[str] = set()
    pending = [os.fspath(root)]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as listing:
                entries = list(listing)
        except OSError as err:
            raise unreadable(Path(current), err, fix) from None
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                found.add(entry.path[skip:])
            else:
                mode = entry.stat(follow_symlinks=False).st_mode
                raise unreadable(Path(entry.path), NotRegularFile(Path(entry.path), mode), fix)
    return found


# --------------------------------------------------------------------------- schemas

#: A field's check: what is wrong with a value, naming the field; None if nothing.
Check = Callable[[object, str], "str | None"]


#: What each field_check accepts, for checking a long list of records a field at a time.
_ACCEPTS: dict[Check, Callable[[object], bool]] = {}


def field_check(accepts: Callable[[object], bool], what: str) -> Check:
    """A Check that passes what `accepts` and otherwise says the field is not `what`."""

    def check(value: object, name: str) -> str | None:
        return None if accepts(value) else f"{name} is not {what}"

    _ACCEPTS[check] = accepts
    return check


def _is_day(value: object) -> bool:
    try:
        date.fromisoformat(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


# exactly int: true and false are not counts
COUNT = field_check(
    lambda v: type(v) is int and 0 <= v <= MAX_FIELD_INT,
    f"a whole number from 0 to {MAX_FIELD_INT}",
)
INTEGER = field_check(
    lambda v: type(v) is int and -MAX_FIELD_INT <= v <= MAX_FIELD_INT, "a whole number"
)
# abs() <= bound also rules out NaN and infinity (JSON's 1e999 reads as infinity)
NUMBER = field_check(
    lambda v: type(v) in (int, float) and abs(v) <= MAX_FIELD_INT,  # type: ignore[arg-type]
    "a finite number",
)
TEXT = field_check(lambda v: isinstance(v, str), "text")
SHA256 = field_check(
    lambda v: isinstance(v, str) and _SHA256.fullmatch(v) is not None, "a sha256 (64 hex digits)"
)
DAY = field_check(_is_day, "a date (YYYY-MM-DD)")


def record_problem(record: object, schema: Mapping[str, Check], name: str = "") -> str | None:
    """The first field of a JSON object that is missing or not what `schema` says, named as in
    `files[3].sha256`; None if every field is right. Fields not in the schema are not read."""
    if not isinstance(record, dict):
        return f"{name or 'its content'} is not a JSON object"
    for key, check in schema.items():
        field_name = f"{name}.{key}" if name else key
        if key not in record:
            return f"{field_name} is missing"
        problem = check(record[key], field_name)
        if problem:
            return problem
    return None


def listing_problem(
    record: object, schema: Mapping[str, Check], count: str, listed: str, key: str
) -> str | None:
    """record_problem, then whether the list `listed` holds `record[count]` entries and no
    two with the same `key`: how a manifest shows that it lists exactly what it counts."""
    problem = record_problem(record, schema)
    if problem or not isinstance(record, dict):
        return problem
    entries = record[listed]
    if len(entries) != record[count]:
        return f"{count} is {record[count]} but {listed} lists {len(entries)}"
    if len({entry[key] for entry in entries}) != len(entries):
        return f"{listed} lists a {key} twice"
    return None


def list_of(schema: Mapping[str, Check]) -> Check:
    """A Check for a list of JSON objects, each checked against `schema`.

    A manifest lists thousands of files and every reader loads it at start-up, so the items
    are first checked a field at a time over the whole list (the loops run in C); only when
    that finds something are they checked one by one, to name the first field at fault.
    """

    def check(value: object, name: str) -> str | None:
        if not isinstance(value, list):
            return f"{name} is not a list"
        if _every_field_accepted(value, schema):
            return None
        return next(
            (
                problem
                for i, item in enumerate(value)
                if (problem := record_problem(item, schema, f"{name}[{i}]"))
            ),
            None,
        )

    return check


def _every_field_accepted(items: list, schema: Mapping[str, Check]) -> bool:
    """True when every item is a plain JSON object whose fields all pass `schema`; False when
    any does not, or a check is not a field_check (then the caller checks item by item)."""
    if not all(type(item) is dict for item in items):
        return False
    for key, check in schema.items():
        accepts = _ACCEPTS.get(check)
        if accepts is None:
            return False
        try:
            values = [item[key] for item in items]
        except KeyError:
            return False
        if not all(map(accepts, values)):
            return False
    return True


def read_checked_json(
    path: Path, problem_of: Callable[[object], str | None], what: str, fix: str
) -> dict:
    """The JSON file `path` (a manifest or an index), read safely and checked by `problem_of`
    (its schema) before any field is used: the one way every such file is read.

    Not read through a link, never waited on if it is a FIFO, never read beyond
    MAX_BOOKKEEPING_BYTES. FileNotFoundError and NotADirectoryError pass through (each caller
    knows what a missing file means); a folder on the way the user cannot search is a plain
    LabError (the place is wrong, not the file); anything else is UnsafeInput naming `path`.
    """
    try:
        with open_regular(path, follow_links=False) as handle:
            data = handle.read(MAX_BOOKKEEPING_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except PermissionError as err:
        if not os.access(path.parent, os.X_OK):
            raise LabError(_unreachable(path.parent)) from None
        raise unreadable(path, err, fix) from None
    except OSError as err:
        raise unreadable(path, err, fix) from None
    if len(data) > MAX_BOOKKEEPING_BYTES:
        raise UnsafeInput(
            f"{what} {path} is larger than {MAX_BOOKKEEPING_BYTES // 2**20} MiB, "
            f"far larger than any the lab writes; {fix}"
        )
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        raise UnsafeInput(f"{what} {path} is corrupted: it is not valid JSON; {fix}") from None
    problem = problem_of(value)
    if problem:
        raise UnsafeInput(f"{what} {path} is corrupted: {problem}; {fix}")
    return value
