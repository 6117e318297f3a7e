"""Taking turns at heavy steps: at most `slots` at once across a class, first come first served.

The queue is a folder of the class's group (setgid + sticky: each learner creates and deletes
only their own files). A waiting or running step owns a ticket there, named to sort by arrival,
and holds an exclusive flock on it while it lives: a ticket whose lock is free belongs to a dead
process (SIGKILL, a lost SSH session) and is ignored, so no crash makes the class wait. A ticket
appears a moment after its arrival time is read, so a newcomer first shows a locked "entering"
file (the "choosing" flag of Lamport's bakery) and nobody starts while one is shown: no ticket
can then appear ahead of a step that started. Nothing here follows a symlink, opens what is not
a regular file or deletes another user's file.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import os
import re
import secrets
import stat
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterator

from iolab.core.errors import LabError

#: A ticket: arrival time in ns (20 digits, so names sort by it), user, process id, random hex.
TICKET = re.compile(r"\d{20}-.+-\d+-[0-9a-f]+")
#: Shown, locked, while its owner reads the clock and makes its ticket.
ENTERING = re.compile(r"entering-.+-\d+-[0-9a-f]+")
#: Tickets are readable by the class, so that everyone can tell who waits and probe the lock.
TICKET_MODE = 0o644
#: A free-locked file younger than this may be one its owner has made but not locked yet.
STALE_AFTER_S = 5.0
#: A ticket holds one line of JSON; more than this is not one of the lab's.
TICKET_MAX_BYTES = 4096
#: The tickets this process holds, with their text: they are alive (we are), and probing one
#: would release its lock on NFS, where a process's locks on a file go with any of its fds.
_HELD: dict[str, str] = {}
#: Queue folders where this process has its turn: a heavy step inside another (a sweep that
#: runs fio) is part of it, and waiting behind itself would never end.
_RUNNING: set[Path] = set()


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME (a container's uid)
        return f"uid{os.getuid()}"


def _unusable(queue_dir: Path) -> LabError:
    return LabError(f"the class queue folder {queue_dir} is missing or not writable; ask the "
                    "instructor to run `python -m iolab class setup` again")


def _create_locked(path: Path) -> int:
    """A new file of ours, locked before anyone can find its lock free, readable by the class
    whatever the umask (another learner must be able to open it to probe the lock)."""
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, TICKET_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.fchmod(fd, TICKET_MODE)
    except BaseException:
        os.unlink(path)
        os.close(fd)
        raise
    return fd


def _live_text(path: Path) -> str | None:
    """The text of a file whose owner is alive (holds its lock); None if the owner is dead, the
    file is gone, unreadable or not a regular file. Our own dead files old enough are removed."""
    try:  # O_NONBLOCK: a FIFO planted under a ticket's name must not hang us
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        seen = os.fstat(fd)
        if not stat.S_ISREG(seen.st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.read(fd, TICKET_MAX_BYTES).decode(errors="replace")
        if seen.st_uid == os.getuid() and time.time() - seen.st_mtime > STALE_AFTER_S:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def _names(queue_dir: Path) -> list[str]:
    try:
        return sorted(os.listdir(queue_dir))
    except OSError:
        raise _unusable(queue_dir) from None


def _scan(queue_dir: Path) -> tuple[dict[str, str], bool]:
    """Live tickets (name: text) in arrival order, and whether someone is still entering.
    Entering files are probed before the folder is listed again for tickets: a ticket made
    meanwhile is then either in the second list, locked, or still announced."""
    entering = any(ENTERING.fullmatch(name) and _live_text(queue_dir / name) is not None
                   for name in _names(queue_dir))
    live = {}
    for name in _names(queue_dir):
        text = _HELD.get(name)
        if text is None and TICKET.fullmatch(name):
            text = _live_text(queue_dir / name)
        if text is not None:
            live[name] = text
    return live, entering


def _say_on_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def turn(queue_dir: Path, slots: int, what: str, *, poll_s: float = 0.5,
         say: Callable[[str], None] | None = None) -> Iterator[str | None]:
    """Wait until fewer than `slots` earlier arrivals of the class are still waiting or running,
    then run the block; a waiting learner is told their place whenever it changes. The block
    gets the ticket's name, which starts with the arrival time in ns (None for a turn inside
    a turn, which takes no ticket)."""
    if slots < 1:
        raise LabError(f"a class queue needs at least 1 slot, not {slots}")
    queue_dir = Path(queue_dir)
    if not (queue_dir.is_dir() and os.access(queue_dir, os.W_OK | os.X_OK)):
        raise _unusable(queue_dir)
    key = queue_dir.resolve()
    if key in _RUNNING:
        yield None
        return
    say = say or _say_on_stderr
    user, tag = _user(), f"{os.getpid()}-{secrets.token_hex(8)}"
    entering = queue_dir / f"entering-{user}-{tag}"
    try:
        marker = _create_locked(entering)
    except OSError:
        raise _unusable(queue_dir) from None
    try:  # the clock is read only once the entering file is locked
        name = f"{time.time_ns():020d}-{user}-{tag}"
        fd = _create_locked(queue_dir / name)
    finally:
        os.unlink(entering)
        os.close(marker)
    try:
        since = datetime.now().astimezone().isoformat(timespec="seconds")
        _HELD[name] = json.dumps({"user": user, "pid": os.getpid(), "what": what,
                                  "since": since}) + "\n"
        os.write(fd, _HELD[name].encode())
        started, shown = time.monotonic(), None
        while True:
            live, someone_entering = _scan(queue_dir)
            place = list(live).index(name)
            if place < slots and not someone_entering:
                break
            if place >= slots and place != shown:
                say(f"{what}: waiting for a turn, place {place + 1} of {len(live)} "
                    f"({slots} at a time in this class)")
                shown = place
            time.sleep(poll_s if place >= slots else min(poll_s, 0.005))
        if shown is not None:
            say(f"{what}: your turn after {time.monotonic() - started:.0f} s")
        _RUNNING.add(key)
        yield name
    finally:
        _RUNNING.discard(key)
        _HELD.pop(name, None)
        with contextlib.suppress(OSError):
            os.unlink(queue_dir / name)
        os.close(fd)


def waiting(queue_dir: Path) -> list[dict]:
    """The live tickets' descriptions in arrival order, running ones first: the instructor's
    view of who holds or waits for a turn. Unreadable and dead tickets are left out."""
    found = []
    for text in _scan(Path(queue_dir))[0].values():
        with contextlib.suppress(ValueError):
            described = json.loads(text)
            if isinstance(described, dict):
                found.append(described)
    return found


def queue_summary(queue_dir: Path, slots: int) -> str:
    """One line for the instructor: who holds a turn of the heavy steps now and who waits."""
    entries = waiting(queue_dir)
    if not entries:
        return f"heavy-step queue ({slots} at a time): nobody running or waiting"

    def who(entry: dict) -> str:
        return f"{entry.get('user', '?')} ({entry.get('what', '?')})"

    running = ", ".join(who(entry) for entry in entries[:slots])
    line = f"heavy-step queue ({slots} at a time): running {running}"
    if len(entries) > slots:
        line += f"; waiting {', '.join(who(entry) for entry in entries[slots:])}"
    return line
