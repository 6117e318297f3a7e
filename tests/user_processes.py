"""Running code as another user without starting an interpreter, and telling what changed
on disk: shared by the class-mode tests that play real users (test_class_stateful.py,
test_class_soak.py). They need root, which drops to each user in a forked child."""

from __future__ import annotations

import os
import pickle
import pwd
import select
import signal
import stat
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

from iolab.core.errors import LabError

#: Any one command of a learner, the classmate or the instructor ends within this, or hangs.
ACTION_TIMEOUT_S = 30.0


# --------------------------------------------------------------------------- running as a user


class Outcome(NamedTuple):
    """How a command run as a user ended: "ok" (with its value), "lab" (a LabError, its
    sentence), or "crash" (anything else, or a hang: the traceback or why)."""

    kind: str
    value: Any
    text: str
    printed: str


def drop_to(user: str) -> None:
    """Become `user` for good: their groups, group and user ids, real, effective and saved."""
    entry = pwd.getpwnam(user)
    os.setgroups(os.getgrouplist(user, entry.pw_gid))
    os.setresgid(entry.pw_gid, entry.pw_gid, entry.pw_gid)
    os.setresuid(entry.pw_uid, entry.pw_uid, entry.pw_uid)


def _child(
    user: str | None,
    env: dict[str, str],
    work: Callable[[], Any],
    before_drop: Callable[[list[int]], None] | None,
    result_fd: int,
    printed_fd: int,
) -> None:
    """The forked child of as_user: never returns."""
    try:
        os.dup2(printed_fd, 1)
        os.dup2(printed_fd, 2)
        # pytest's own sys.stdout (and its lock) are the parent's: fresh ones on fd 1 and 2
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = sys.stdout
        if before_drop is not None:
            before_drop([result_fd])
        if user is not None:
            drop_to(user)
        os.environ.clear()
        os.environ.update(env)
        os.umask(0o022)  # a shell's: the lab keeps its files private whatever the umask
        os.chdir(env["HOME"])
        try:
            report: tuple[str, Any, str] = ("ok", work(), "")
        except LabError as err:
            report = ("lab", None, str(err))
        except BaseException:
            report = ("crash", None, traceback.format_exc())
        payload = pickle.dumps(report)
    except BaseException:
        payload = pickle.dumps(("crash", None, traceback.format_exc()))
    try:
        sys.stdout.flush()
        view = memoryview(payload)
        while view:
            view = view[os.write(result_fd, view) :]
    finally:
        os._exit(0)


@dataclass
class Forked:
    """A child started by start_as_user: its pid, the pipe of its answer, what it printed."""

    pid: int
    answer_fd: int
    printed: IO[bytes]


def start_as_user(
    user: str | None,
    env: dict[str, str],
    work: Callable[[], Any],
    before_drop: Callable[[list[int]], None] | None = None,
) -> Forked:
    """Start `work` in a forked child as `user` (root for None) with environment `env`, in
    their HOME, and return at once (answer_of waits for it). `before_drop` runs in the child
    while it is still root, with the descriptors any process it starts must close."""
    result_r, result_w = os.pipe()
    printed = tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(result_r)
        _child(user, env, work, before_drop, result_w, printed.fileno())
    os.close(result_w)
    return Forked(pid, result_r, printed)


def answer_of(forked: Forked, timeout_s: float = ACTION_TIMEOUT_S) -> Outcome:
    """How a started child's `work` ended, and what it printed; one that has not answered
    within `timeout_s` is killed and counts as a hang."""
    chunks = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([forked.answer_fd], [], [], left)[0]:
                os.kill(forked.pid, signal.SIGKILL)
                break
            chunk = os.read(forked.answer_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(forked.answer_fd)
        os.waitpid(forked.pid, 0)
        with forked.printed:
            forked.printed.seek(0)
            said = forked.printed.read().decode(errors="replace")
    if not chunks:
        return Outcome("crash", None, f"no answer within {timeout_s:g} s (a hang)", said)
    kind, value, text = pickle.loads(b"".join(chunks))
    return Outcome(kind, value, text, said)


def as_user(
    user: str | None,
    env: dict[str, str],
    work: Callable[[], Any],
    before_drop: Callable[[list[int]], None] | None = None,
) -> Outcome:
    """`work` as `user`, waited for (start_as_user, then answer_of)."""
    return answer_of(start_as_user(user, env, work, before_drop))


# --------------------------------------------------------------------------- what must not change


class Entry(NamedTuple):
    """One entry as lstat and its content tell it (a link's target, a file's bytes)."""

    kind: str
    mode: int
    uid: int
    gid: int
    mtime_ns: int
    data: bytes | str | None


def snapshot(tops: list[Path], skip: tuple[Path, ...] = ()) -> dict[str, Entry]:
    """Every entry at or below `tops` (links not followed, FIFOs never opened, `skip` and what
    is below it left out), by path."""
    found: dict[str, Entry] = {}
    for top in tops:
        if not os.path.lexists(top):
            continue
        for folder, dirs, files in os.walk(top):
            here = Path(folder)
            dirs[:] = [name for name in dirs if here / name not in skip]
            for path in [here, *(here / name for name in [*dirs, *files])]:
                if path in skip or str(path) in found:
                    continue
                info = path.lstat()
                data: bytes | str | None = None
                if stat.S_ISLNK(info.st_mode):
                    kind, data = "link", os.readlink(path)
                elif stat.S_ISREG(info.st_mode):
                    kind, data = "file", path.read_bytes()
                elif stat.S_ISDIR(info.st_mode):
                    kind = "dir"
                else:
                    kind = "other"
                found[str(path)] = Entry(
                    kind,
                    stat.S_IMODE(info.st_mode),
                    info.st_uid,
                    info.st_gid,
                    info.st_mtime_ns,
                    data,
                )
    return found


def changed(
    before: dict[str, Entry], after: dict[str, Entry]
) -> list[tuple[str, Entry | None, Entry | None]]:
    """What differs between two snapshots: (path, before, after), None where missing."""
    return [
        (path, before.get(path), after.get(path))
        for path in sorted(before.keys() | after.keys())
        if before.get(path) != after.get(path)
    ]


def owner_of(change: tuple[str, Entry | None, Entry | None]) -> int:
    """Whose entry it is that changed: its owner before, or after if it is new."""
    entry = change[1] or change[2]
    assert entry is not None
    return entry.uid


def without_mtime_of_folders(shot: dict[str, Entry]) -> dict[str, Entry]:
    """A folder's mtime moves whenever anyone adds a name to it (scratch, a home)."""
    return {
        path: entry._replace(mtime_ns=0) if entry.kind == "dir" else entry
        for path, entry in shot.items()
    }


def one_sentence(outcome: Outcome, what: str) -> None:
    """A command ended in its result, or in one sentence; never a traceback or a hang."""
    assert outcome.kind != "crash", f"{what} crashed:\n{outcome.text}\n{outcome.printed}"
    assert "Traceback" not in outcome.printed, f"{what} printed a traceback:\n{outcome.printed}"
    if outcome.kind == "lab":
        assert "\n" not in outcome.text.strip(), f"{what}: not one sentence: {outcome.text}"
