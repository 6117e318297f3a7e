"""Taking turns at heavy steps: at most `slots` at once across a class, first come first served,
and no learner can stall the class or speak for another.

The queue is a folder of the class's group (setgid + sticky: each learner creates and deletes
only their own files). A waiting or running step owns two files there, a ticket and its
heartbeat, and nothing a learner writes into them is trusted:

- Order is the ticket's inode change time (st_ctime), set by the kernel when its owner has
  made it and written its one line; its owner can move it later (any change does) but never
  earlier, so a name or a date in the text (1970, say) buys no place. It needs no server: the
  file system's clock is the only clock. A waiter decides only once its own heartbeat shows
  that clock past its ticket's time, so any ticket made after it looked comes after it.
- Liveness: the ticket is flock-held while its process lives (a free lock is a SIGKILL or a
  lost SSH session); the heartbeat is touched every `silent_s` / 4 s, so one not touched for
  `silent_s` is a stopped process (Ctrl-Z, SIGSTOP) or a hung node; and a holder that has kept
  a slot for `turn_s` while this waiter watched no longer holds it back, so even a live,
  hostile holder stalls nobody for longer. The instructor sets both bounds in class.json.
- Identity: a ticket is its file's owner's (st_uid), whatever its text says, and a learner
  holds one place: their second step waits behind their first.

Text from tickets is shown with control characters escaped. Nothing here follows a symlink,
opens what is not a regular file or deletes another user's file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import re
import secrets
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from iolab.core.errors import LabError
from iolab.core.safe_input import (
    INTEGER,
    NUMBER,
    TEXT,
    printable,
    read_checked_json,
    record_problem,
)

#: A ticket: process id and random hex (the owner is the file's, the order the kernel's).
TICKET = re.compile(r"ticket-\d+-[0-9a-f]{16}")
#: Tickets are readable by the class, so that everyone can tell who waits and probe the lock.
TICKET_MODE = 0o644
#: A free-locked file younger than this may be one its owner has made but not locked yet.
STALE_AFTER_S = 5.0
#: A ticket holds one line of JSON; more than this is not one of the lab's.
TICKET_MAX_BYTES = 4096
#: How long a heartbeat may go untouched before its holder counts as stopped: long enough for
#: a busy login node to schedule a sleeping thread, short enough that a Ctrl-Z costs the class
#: half a minute.
SILENT_S = 30.0
#: How long one step may keep a slot while others wait: a sweep or fio under the login-node
#: budget takes minutes; a turn held longer is stuck or hostile.
TURN_S = 900.0
#: The keys of class.json where the instructor sets the two bounds, and their ranges.
BOUND_KEYS = {"queue_silent_s": (2.0, 600.0), "queue_turn_s": (10.0, 86_400.0)}
#: What a ticket's text holds (shown only; none of it decides anything).
TICKET_SCHEMA = {"pid": INTEGER, "what": TEXT, "since": TEXT}
#: The lines `turn` says while a learner waits, for a caller that relays them (`make lab`
#: shows a notebook's waits on the terminal).
QUEUE_NEWS = re.compile(
    r": (waiting for a turn|waiting for your own earlier heavy step|your turn after)"
)
#: The tickets this process holds: they are alive (we are), and probing one would release its
#: lock on NFS, where a process's locks on a file go with any of its fds.
_HELD: dict[str, Seen] = {}
#: Queue folders where this process has its turn: a heavy step inside another (a sweep that
#: runs fio) is part of it, and waiting behind itself would never end.
_RUNNING: set[Path] = set()


@dataclass(frozen=True)
class Seen:
    """A live ticket as the kernel tells it: owner, arrival (ctime, ns), last heartbeat."""

    name: str
    uid: int
    arrived_ns: int
    beat_ns: int
    text: str


def user_of(uid: int) -> str:
    """The login name of `uid` (uid<N> for an account without a passwd entry)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid{uid}"


def _unusable(queue_dir: Path) -> LabError:
    return LabError(
        f"the class queue folder {queue_dir} is missing or not writable; ask the "
        "instructor to run `python -m iolab class setup` again"
    )


def bounds(queue_dir: Path) -> tuple[float, float]:
    """(silent_s, turn_s) as the instructor set them in the class's class.json (the queue
    folder's parent), else SILENT_S and TURN_S."""

    def problem(value: object) -> str | None:
        if not isinstance(value, dict):
            return "its content is not a JSON object"
        for key, (low, high) in BOUND_KEYS.items():
            if key in value and (
                record_problem(value, {key: NUMBER}) or not low <= value[key] <= high
            ):
                return f"{key} is not a number of seconds from {low:g} to {high:g}"
        return None

    try:
        described = read_checked_json(
            Path(queue_dir).parent / "class.json",
            problem,
            "the class description",
            "ask the instructor to run `class setup` again",
        )
    except (FileNotFoundError, NotADirectoryError):
        described = {}
    return (
        float(described.get("queue_silent_s", SILENT_S)),
        float(described.get("queue_turn_s", TURN_S)),
    )


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


def _beat_of(ticket: str) -> str:
    return "beat-" + ticket[len("ticket-") :]


def _beat_ns(queue_dir: Path, ticket: str, uid: int) -> int | None:
    """The last heartbeat (ctime) of `ticket`'s owner `uid`; None if it has none of theirs."""
    with contextlib.suppress(OSError):
        seen = os.lstat(queue_dir / _beat_of(ticket))
        if stat.S_ISREG(seen.st_mode) and seen.st_uid == uid:
            return seen.st_ctime_ns
    return None


def _probe(queue_dir: Path, name: str) -> Seen | None:
    """The ticket `name` if its owner holds its lock; None if the owner is dead, the file is
    gone, unreadable or not a regular file. Our own dead tickets old enough are removed."""
    try:  # O_NONBLOCK: a FIFO planted under a ticket's name must not hang us
        fd = os.open(queue_dir / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        seen = os.fstat(fd)
        if not stat.S_ISREG(seen.st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, TICKET_MAX_BYTES).decode(errors="replace")
            beat = _beat_ns(queue_dir, name, seen.st_uid)
            return Seen(name, seen.st_uid, seen.st_ctime_ns, max(beat or 0, seen.st_ctime_ns), text)
        if seen.st_uid == os.getuid() and time.time() - seen.st_mtime > STALE_AFTER_S:
            for left in (name, _beat_of(name)):
                with contextlib.suppress(OSError):
                    os.unlink(queue_dir / left)
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def _live(queue_dir: Path, now_ns: int, silent_s: float) -> list[Seen]:
    """Tickets whose owner holds the lock and beat within `silent_s` of `now_ns`, in order of
    arrival (ties, within the file system's clock tick, by name: the same for everyone)."""
    try:
        names = os.listdir(queue_dir)
    except OSError:
        raise _unusable(queue_dir) from None
    found = [
        seen
        for name in names
        if TICKET.fullmatch(name)
        and (seen := _HELD.get(name) or _probe(queue_dir, name)) is not None
        and (name in _HELD or now_ns - seen.beat_ns <= silent_s * 1e9)
    ]
    return sorted(found, key=lambda seen: (seen.arrived_ns, seen.name))


def _firsts(live: list[Seen]) -> list[Seen]:
    """Each learner's earliest ticket, in order: one place per learner."""
    firsts: dict[int, Seen] = {}
    for seen in live:
        firsts.setdefault(seen.uid, seen)
    return list(firsts.values())


def _ahead(
    places: list[Seen], mine: str, slots: int, in_slot: dict[str, float], turn_s: float
) -> int:
    """How many learners hold `mine` back: those before it, less any that has held a slot for
    more than `turn_s` since this waiter first saw it there (`in_slot`, monotonic seconds)."""
    ahead, now = 0, time.monotonic()
    for seen in places:
        if seen.name == mine:
            break
        if ahead < slots and now - in_slot.setdefault(seen.name, now) > turn_s:
            continue
        ahead += 1
    return ahead


class _Heartbeat:
    """Our heartbeat file, touched now (`beat`) and by a thread every `every_s` until stopped:
    a stopped process stops it, a running one keeps it fresh whatever the step is doing."""

    def __init__(self, fd: int, every_s: float) -> None:
        self.fd, self.every_s = fd, every_s
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="class-queue-heartbeat", daemon=True)
        self.thread.start()

    def beat(self) -> int:
        """Touch it; the file system's clock now (its ctime), in ns."""
        os.utime(self.fd)
        return os.fstat(self.fd).st_ctime_ns

    def _run(self) -> None:
        while not self.done.wait(self.every_s):
            with contextlib.suppress(OSError):
                self.beat()

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


def _say_on_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def turn(
    queue_dir: Path,
    slots: int,
    what: str,
    *,
    poll_s: float = 0.5,
    say: Callable[[str], None] | None = None,
    silent_s: float | None = None,
    turn_s: float | None = None,
) -> Iterator[str | None]:
    """Wait until fewer than `slots` learners who arrived earlier are still waiting or running
    (alive, and not past the bounds: see the module), then run the block; a waiting learner is
    told their place whenever it changes. The block gets the ticket's name (None for a turn
    inside a turn, which takes no ticket). The bounds default to the class's (`bounds`)."""
    if slots < 1:
        raise LabError(f"a class queue needs at least 1 slot, not {slots}")
    queue_dir = Path(queue_dir)
    if not (queue_dir.is_dir() and os.access(queue_dir, os.W_OK | os.X_OK)):
        raise _unusable(queue_dir)
    key = queue_dir.resolve()
    if key in _RUNNING:
        yield None
        return
    if silent_s is None or turn_s is None:
        class_silent_s, class_turn_s = bounds(queue_dir)
        silent_s, turn_s = silent_s or class_silent_s, turn_s or class_turn_s
    say = say or _say_on_stderr
    name = f"ticket-{os.getpid()}-{secrets.token_hex(8)}"
    try:  # the heartbeat first: a ticket is never seen without its owner's heartbeat name taken
        beat_fd = os.open(
            queue_dir / _beat_of(name),
            os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW,
            TICKET_MODE,
        )
    except OSError:
        raise _unusable(queue_dir) from None
    fd, heart = -1, None
    try:
        try:
            fd = _create_locked(queue_dir / name)
        except OSError:
            raise _unusable(queue_dir) from None
        since = datetime.now().astimezone().isoformat(timespec="seconds")
        text = json.dumps({"pid": os.getpid(), "what": what, "since": since}) + "\n"
        os.write(fd, text.encode())
        arrived = os.fstat(fd)  # after the last change: our place is fixed from here on
        _HELD[name] = Seen(name, arrived.st_uid, arrived.st_ctime_ns, arrived.st_ctime_ns, text)
        heart = _Heartbeat(beat_fd, silent_s / 4)
        started, shown = time.monotonic(), None
        in_slot: dict[str, float] = {}
        while True:
            now_ns = heart.beat()
            if now_ns > arrived.st_ctime_ns:  # a ticket made from now on comes after ours
                places = _firsts(_live(queue_dir, now_ns, silent_s))
                behind_own = name not in {seen.name for seen in places}
                place = _ahead(places, name, slots, in_slot, turn_s)
                if not behind_own and place < slots:
                    break
                message = (
                    f"{what}: waiting for your own earlier heavy step to finish"
                    if behind_own
                    else f"{what}: waiting for a turn, place {place + 1} of {len(places)} "
                    f"({slots} at a time in this class)"
                )
                if message != shown:
                    say(message)
                    shown = message
            time.sleep(poll_s if shown else min(poll_s, 0.005))
        if shown is not None:
            say(f"{what}: your turn after {time.monotonic() - started:.0f} s")
        _RUNNING.add(key)
        yield name
    finally:
        _RUNNING.discard(key)
        _HELD.pop(name, None)
        if heart is not None:
            heart.stop()
        for left in (name, _beat_of(name)):
            with contextlib.suppress(OSError):
                os.unlink(queue_dir / left)
        os.close(beat_fd)
        if fd >= 0:
            os.close(fd)


def waiting(queue_dir: Path) -> list[dict]:
    """The live tickets in arrival order, each learner's first ticket first (the running
    ones lead): the instructor's view of who holds or waits for a turn. The user is the
    ticket's owner; pid, what and since are what its text says, "?" where it says nothing
    usable. Dead, stopped and unreadable tickets are left out."""
    queue_dir = Path(queue_dir)
    live = _live(queue_dir, time.time_ns(), bounds(queue_dir)[0])
    firsts = _firsts(live)
    found = []
    for seen in firsts + [seen for seen in live if seen not in firsts]:
        described: object = None
        with contextlib.suppress(ValueError, RecursionError):
            described = json.loads(seen.text)
        usable = isinstance(described, dict) and not record_problem(described, TICKET_SCHEMA)
        found.append(
            {
                "user": user_of(seen.uid),
                **{
                    key: described[key] if usable else "?"  # type: ignore[index]
                    for key in TICKET_SCHEMA
                },
            }
        )
    return found


def queue_summary(queue_dir: Path, slots: int) -> str:
    """One line for the instructor: who holds a turn of the heavy steps now and who waits,
    learners' text escaped (a ticket's "what" is theirs to write)."""
    entries = waiting(queue_dir)
    if not entries:
        return f"heavy-step queue ({slots} at a time): nobody running or waiting"

    def who(entry: dict) -> str:
        return f"{printable(entry['user'], 64)} ({printable(entry['what'], 80)})"

    holding = min(slots, len({entry["user"] for entry in entries}))  # one slot per learner
    running = ", ".join(who(entry) for entry in entries[:holding])
    line = f"heavy-step queue ({slots} at a time): running {running}"
    if len(entries) > holding:
        line += f"; waiting {', '.join(who(entry) for entry in entries[holding:])}"
    return line
