"""The class queue: at most `slots` heavy steps at once, first come first served, across real
processes; dead, stopped and hogging holders, forged tickets, planted files and bad input
never block or break it, and a ticket speaks only for its file's owner."""

from __future__ import annotations

import contextlib
import fcntl
import json
import multiprocessing
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from itertools import pairwise
from pathlib import Path

import pytest

from iolab.core.class_queue import TICKET, queue_summary, turn, waiting
from iolab.core.errors import LabError
from iolab.core.safe_input import printable

POLL_S = 0.02
#: How long the tests wait for a child process to reach a point before failing.
PATIENCE_S = 20.0
SPAWN = multiprocessing.get_context("spawn")
#: The bounds the child learners keep: a heartbeat every SILENT_S / 4 s; no turn times out.
SILENT_S, TURN_S = 1.0, 600.0
#: Users without an account that root's tests play: each a learner of their own.
OTHER_UIDS = (61001, 61002, 61003, 61004)
ROOT_ONLY = pytest.mark.skipif(os.getuid() != 0, reason="only root can act as other users")


def take_turn(
    queue: str,
    slots: int,
    index: int,
    log: str,
    go: str,
    holding: str,
    release: str,
    hold_s: float,
    uid: int | None,
) -> None:
    """A learner's step in a child process (as `uid` if given): arrive when `go` exists, then
    hold the turn for `hold_s` or until `release` exists, and log (index, start, end)."""
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    wait_for(lambda: Path(go).exists())
    with turn(
        Path(queue),
        slots,
        f"step {index}",
        poll_s=POLL_S,
        say=lambda message: None,
        silent_s=SILENT_S,
        turn_s=TURN_S,
    ):
        start = time.time()
        Path(holding).touch()
        while time.time() - start < hold_s and not Path(release).exists():
            time.sleep(0.005)
        with open(f"{log}.{index}", "w") as out:
            out.write(f"{index} {start} {time.time()}\n")


def wait_for(condition: Callable[[], bool], what: str = "a child process") -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.005)


def tickets(queue: Path) -> list[str]:
    return sorted(name for name in os.listdir(queue) if TICKET.fullmatch(name))


def whole(ticket: Path) -> bool:
    """Whether a ticket holds its one line of text (a file being made has none yet)."""
    try:
        return ticket.read_text().endswith("\n")
    except OSError:
        return False


def must_not_wait(message: str) -> None:
    raise AssertionError(f"the turn waited: {message}")


def clock_past(folder: Path, ctime_ns: int) -> bool:
    """Whether a file changed now in `folder` gets a later ctime than `ctime_ns`."""
    probe = folder / "clock-probe"
    probe.touch()
    return os.stat(probe).st_ctime_ns > ctime_ns


class Learners:
    """Child processes that each take one turn; `arrive(i)` lets learner i take a ticket and
    returns once it has one (or already ran), so arrival order is the order of the calls."""

    def __init__(
        self,
        tmp: Path,
        queue: Path,
        slots: int,
        count: int,
        hold_s: float,
        uids: tuple[int, ...] | None = None,
    ) -> None:
        self.tmp, self.queue, self.log = tmp, queue, tmp / "turns.log"
        self.processes = [
            SPAWN.Process(
                target=take_turn,
                args=(
                    str(queue),
                    slots,
                    i,
                    str(self.log),
                    str(tmp / f"go-{i}"),
                    str(tmp / f"holding-{i}"),
                    str(tmp / f"release-{i}"),
                    hold_s,
                    uids[i] if uids else None,
                ),
            )
            for i in range(count)
        ]
        for process in self.processes:
            process.start()

    def arrive(self, index: int) -> None:
        """Let learner `index` take a ticket; return once it has one (or already ran) and the
        file system's clock has moved past it, so the next arrival comes strictly later."""
        (self.tmp / f"go-{index}").touch()
        pid = self.processes[index].pid

        def mine() -> list[str]:
            """Learner `index`'s ticket once whole: its text is its last change, so from then
            on its ctime (the learner's place) is final; a bare new file's would still move."""
            return [
                name
                for name in tickets(self.queue)
                if f"-{pid}-" in name and whole(self.queue / name)
            ]

        wait_for(
            lambda: bool(mine()) or (self.tmp / f"holding-{index}").exists(),
            f"learner {index}'s ticket",
        )
        for name in mine():
            with contextlib.suppress(FileNotFoundError):  # gone: it ran and is over
                arrived_ns = os.stat(self.queue / name).st_ctime_ns
                wait_for(partial(clock_past, self.tmp, arrived_ns), "the file system's clock")

    def finish(self) -> list[tuple[int, float, float]]:
        """Wait for everyone; the logged turns in the order they started."""
        for process in self.processes:
            process.join(PATIENCE_S)
            assert process.exitcode == 0
        turns = [Path(f"{self.log}.{i}").read_text().split() for i in range(len(self.processes))]
        return sorted(
            ((int(i), float(start), float(end)) for i, start, end in turns),
            key=lambda logged: logged[1],
        )

    def stop(self) -> None:
        for process in self.processes:
            if process.is_alive():
                process.kill()
            process.join()


@pytest.fixture
def queue(tmp_path: Path) -> Path:
    """A class queue folder as the setup makes it: group-writable, setgid and sticky."""
    folder = tmp_path / "queue"
    folder.mkdir()
    folder.chmod(0o3770)
    return folder


@pytest.fixture
def learners(tmp_path: Path, queue: Path) -> Iterator[Callable[..., Learners]]:
    started: list[Learners] = []

    def start(
        slots: int,
        count: int,
        hold_s: float,
        uids: tuple[int, ...] | None = None,
        folder: Path | None = None,
    ) -> Learners:
        """`count` learners of the queue `folder` (default: `queue`), as `uids` if given."""
        folder = folder or queue
        started.append(Learners(folder.parent, folder, slots, count, hold_s, uids))
        return started[-1]

    yield start
    for group in started:
        group.stop()


@pytest.fixture
def shared_queue() -> Iterator[Path]:
    """A queue folder that learners of other uids can reach, with their own scratch beside it
    (root's tmp_path is private to root)."""
    top = Path(tempfile.mkdtemp(prefix="iolab-queue-", dir="/tmp"))
    top.chmod(0o1777)
    folder = top / "queue"
    folder.mkdir()
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(top)


def plant_ticket(queue: Path, text: str, uid: int, tag: str) -> int:
    """A live ticket of `uid` as a classmate makes one by hand (text of their choosing), locked
    by the returned descriptor, with a fresh heartbeat; its dates set to 1970."""
    ticket, beat = queue / f"ticket-1-{tag}", queue / f"beat-1-{tag}"
    beat.touch()
    fd = os.open(ticket, os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, text.encode())
    fcntl.flock(fd, fcntl.LOCK_EX)
    for path in (ticket, beat):
        os.chown(path, uid, uid)
    os.utime(ticket, (1, 1))
    return fd


def most_at_once(turns: list[tuple[int, float, float]]) -> int:
    """The largest number of turns held at the same moment (an end before a start at a tie)."""
    events = sorted([(start, 1) for _, start, _ in turns] + [(end, -1) for _, _, end in turns])
    held = peak = 0
    for _, change in events:
        held += change
        peak = max(peak, held)
    return peak


@pytest.mark.slow
def test_one_slot_serves_learners_in_arrival_order(queue: Path, learners) -> None:
    group = learners(slots=1, count=4, hold_s=0.2)
    for index in (2, 0, 3, 1):
        group.arrive(index)
    turns = group.finish()
    assert [index for index, _, _ in turns] == [2, 0, 3, 1]
    assert most_at_once(turns) == 1
    assert all(earlier[2] <= later[1] for earlier, later in pairwise(turns))
    assert os.listdir(queue) == []


@ROOT_ONLY
def test_two_slots_never_run_three_at_once(shared_queue: Path, learners) -> None:
    group = learners(slots=2, count=4, hold_s=0.3, uids=OTHER_UIDS, folder=shared_queue)
    for index in range(4):
        group.arrive(index)
    turns = group.finish()
    assert sorted(index for index, _, _ in turns) == [0, 1, 2, 3]
    assert most_at_once(turns) == 2  # the second slot is used, a third never
    assert os.listdir(shared_queue) == []


def test_a_learners_second_step_waits_behind_their_first(queue: Path, learners) -> None:
    """One place per learner: with a slot free, the same user's second step still waits."""
    group = learners(slots=2, count=1, hold_s=0.3)
    group.arrive(0)
    wait_for(lambda: (queue.parent / "holding-0").exists())
    messages: list[str] = []
    with turn(queue, 2, "fio", poll_s=POLL_S, say=messages.append):
        assert Path(f"{group.log}.0").exists()  # the first step has finished
    assert messages[0] == "fio: waiting for your own earlier heavy step to finish"


@ROOT_ONLY
def test_many_tickets_of_one_learner_take_one_place(queue: Path) -> None:
    held = [plant_ticket(queue, "{}", OTHER_UIDS[0], f"{index:016x}") for index in range(3)]
    try:
        with turn(queue, 2, "fio", poll_s=POLL_S, say=must_not_wait):
            assert len(waiting(queue)) == 4
    finally:
        for fd in held:
            os.close(fd)


def test_a_killed_holder_does_not_block_the_class(tmp_path: Path, queue: Path, learners) -> None:
    group = learners(slots=1, count=1, hold_s=60)
    group.arrive(0)
    wait_for(lambda: (tmp_path / "holding-0").exists())
    group.processes[0].kill()  # SIGKILL: no cleanup runs, the ticket stays
    group.processes[0].join()
    [left] = tickets(queue)
    started = time.monotonic()
    with turn(queue, 1, "fio", poll_s=POLL_S, say=must_not_wait):
        assert time.monotonic() - started < 1
    assert tickets(queue) == [left]  # too fresh to be sure nobody is still locking it
    old = time.time() - 60
    os.utime(queue / left, (old, old))
    assert waiting(queue) == []
    assert os.listdir(queue) == []  # our own dead ticket, old enough: removed, its heartbeat too


def test_a_stopped_holder_holds_nobody_back_longer_than_the_silence_bound(
    tmp_path: Path, queue: Path, learners
) -> None:
    """Ctrl-Z or SIGSTOP: the lock stays held, but the heartbeat stops; a waiter goes once it
    is SILENT_S old. (The backstop: the holder is continued after 5 s and then leaves.)"""
    group = learners(slots=1, count=1, hold_s=4)
    group.arrive(0)
    wait_for(lambda: (tmp_path / "holding-0").exists())
    pid = group.processes[0].pid
    os.kill(pid, signal.SIGSTOP)
    backstop = threading.Timer(5, os.kill, (pid, signal.SIGCONT))
    backstop.start()
    started = time.monotonic()
    try:
        with turn(
            queue, 1, "fio", poll_s=POLL_S, say=lambda message: None, silent_s=SILENT_S, turn_s=600
        ):
            waited = time.monotonic() - started
            assert len(tickets(queue)) == 2  # its ticket stays: the learner may come back
    finally:
        backstop.cancel()
        os.kill(pid, signal.SIGCONT)
    assert waited < SILENT_S + 1.5


@ROOT_ONLY
def test_a_holder_that_keeps_its_turn_too_long_holds_nobody_back_longer(
    shared_queue: Path, learners
) -> None:
    """A live holder, beating, that never lets go (hostile, or stuck) is passed after turn_s."""
    queue = shared_queue
    group = learners(slots=1, count=1, hold_s=5, uids=OTHER_UIDS, folder=queue)
    group.arrive(0)
    wait_for(lambda: (queue.parent / "holding-0").exists())
    started = time.monotonic()
    with turn(
        queue, 1, "fio", poll_s=POLL_S, say=lambda message: None, silent_s=SILENT_S, turn_s=0.5
    ):
        waited = time.monotonic() - started
        assert not Path(f"{group.log}.0").exists()  # the holder still holds it
    assert 0.5 <= waited < 3


def test_the_instructors_bounds_come_from_class_json(queue: Path) -> None:
    from iolab.core.class_queue import SILENT_S as DEFAULT_SILENT_S
    from iolab.core.class_queue import TURN_S as DEFAULT_TURN_S
    from iolab.core.class_queue import bounds

    assert bounds(queue) == (DEFAULT_SILENT_S, DEFAULT_TURN_S)
    (queue.parent / "class.json").write_text(json.dumps({"queue_silent_s": 12, "queue_turn_s": 60}))
    assert bounds(queue) == (12.0, 60.0)
    (queue.parent / "class.json").write_text(json.dumps({"queue_silent_s": 0.001}))
    with pytest.raises(LabError, match="queue_silent_s is not a number of seconds") as raised:
        bounds(queue)
    assert one_sentence(str(raised.value))


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_another_users_dead_ticket_is_ignored_and_left_alone(queue: Path) -> None:
    dead = queue / f"ticket-1-{0:016x}"
    dead.write_text("{}\n")
    os.chown(dead, 65534, 65534)
    old = time.time() - 3600
    os.utime(dead, (old, old))
    with turn(queue, 1, "fio", poll_s=POLL_S, say=must_not_wait):
        pass
    assert tickets(queue) == [dead.name]


@ROOT_ONLY
def test_a_waiting_learner_is_told_their_place_then_their_turn(
    shared_queue: Path, learners
) -> None:
    queue = shared_queue
    group = learners(slots=1, count=1, hold_s=0.3, uids=OTHER_UIDS, folder=queue)
    group.arrive(0)  # some fifteen polls of the waiter
    wait_for(lambda: (queue.parent / "holding-0").exists())
    messages: list[str] = []
    seen_waiting: list[list[dict]] = []

    def say(message: str) -> None:
        messages.append(message)
        seen_waiting.append(waiting(queue))

    with turn(queue, 1, "fio", poll_s=POLL_S, say=say):
        assert Path(f"{group.log}.0").exists()  # the holder has left
    assert messages[0] == "fio: waiting for a turn, place 2 of 2 (1 at a time in this class)"
    assert len(messages) == 2  # the place did not change while waiting: said once
    assert re.fullmatch(r"fio: your turn after \d+ s", messages[1])
    assert [entry["what"] for entry in seen_waiting[0]] == ["step 0", "fio"]
    assert seen_waiting[0][0]["pid"] == group.processes[0].pid
    assert seen_waiting[0][0]["user"] == f"uid{OTHER_UIDS[0]}"  # the file's owner


def test_a_ticket_says_who_waits_and_is_readable_by_the_class(queue: Path) -> None:
    previous = os.umask(0o077)
    try:
        with turn(queue, 3, "sweep", poll_s=POLL_S, say=must_not_wait):
            [name] = tickets(queue)
            mode = stat.S_IMODE(os.lstat(queue / name).st_mode)
            described = waiting(queue)
            with open(queue / name) as handle:  # the holder's lock is exclusive
                with pytest.raises(BlockingIOError):
                    fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    finally:
        os.umask(previous)
    assert re.fullmatch(rf"ticket-{os.getpid()}-[0-9a-f]{{16}}", name)
    assert mode == 0o644
    assert [{key: entry[key] for key in ("pid", "what")} for entry in described] == [
        {"pid": os.getpid(), "what": "sweep"}
    ]
    assert set(described[0]) == {"user", "pid", "what", "since"}
    assert json.loads(json.dumps(described))  # plain JSON, for the instructor's view


def test_a_step_inside_a_step_with_the_turn_goes_at_once(queue: Path) -> None:
    with turn(queue, 1, "sweep", poll_s=POLL_S, say=must_not_wait):
        [outer] = tickets(queue)
        with turn(queue, 1, "fio", poll_s=POLL_S, say=must_not_wait):
            assert tickets(queue) == [outer]
        assert tickets(queue) == [outer]
    assert os.listdir(queue) == []


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_leaving_by_an_error_removes_the_ticket(queue: Path, error: type) -> None:
    with pytest.raises(error):
        with turn(queue, 1, "fio", poll_s=POLL_S, say=must_not_wait):
            assert len(tickets(queue)) == 1
            raise error("stop")
    assert os.listdir(queue) == []


def test_planted_files_are_ignored_and_left_alone(tmp_path: Path, queue: Path) -> None:
    """A symlink to a locked file, a FIFO or a folder under a ticket's name never counts as a
    learner ahead (nor blocks as someone entering), and nothing planted is touched."""
    target = tmp_path / "elsewhere"
    target.write_text("{}\n")
    planted = {
        f"ticket-1-{10:016x}": "link",
        f"ticket-1-{11:016x}": "fifo",
        f"ticket-1-{12:016x}": "dir",
        "entering-mallory-1-dd": "link",
        f"beat-1-{10:016x}": "fifo",
        "notes.txt": "file",
    }
    for name, kind in planted.items():
        path = queue / name
        if kind == "link":
            path.symlink_to(target)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "dir":
            path.mkdir()
        else:
            path.write_text("not a ticket\n")
    # locked by their planter, the link's target, the FIFO and the folder would look alive
    held = [
        os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        for path in [target]
        + [queue / name for name, kind in planted.items() if kind in ("fifo", "dir")]
    ]
    try:
        for fd in held:
            fcntl.flock(fd, fcntl.LOCK_EX)
        with turn(queue, 1, "fio", poll_s=POLL_S, say=must_not_wait):
            assert len(os.listdir(queue)) == len(planted) + 2  # our ticket and heartbeat
        assert waiting(queue) == []
    finally:
        for fd in held:
            os.close(fd)
    assert sorted(os.listdir(queue)) == sorted(planted)
    assert (queue / "notes.txt").read_text() == "not a ticket\n"
    assert target.read_text() == "{}\n"


@pytest.mark.slow
def test_a_held_entering_file_holds_nobody_back(queue: Path) -> None:
    """The old queue's "entering" flag, locked forever by a stopped or hostile process, made
    every heavy step wait; order now comes from the kernel and no such flag is read."""
    entering = queue / "entering-alice-1-ab"
    fd = os.open(entering, os.O_CREAT | os.O_WRONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    timer = threading.Timer(3, os.close, (fd,))  # the backstop if it did hold the turn back
    started = time.monotonic()
    timer.start()
    try:
        with turn(queue, 1, "fio", poll_s=POLL_S, say=must_not_wait):
            waited = time.monotonic() - started
    finally:
        timer.join()
    assert waited < 1
    assert sorted(os.listdir(queue)) == [entering.name]


@ROOT_ONLY
def test_tickets_dated_1970_and_made_later_come_later(shared_queue: Path, learners) -> None:
    """Two tickets a classmate planted after us, dated 1970 and locked, are behind us: when
    the holder leaves we go at once, never at "place 3" (turn_s = 3 s is the backstop)."""
    queue = shared_queue
    group = learners(slots=1, count=1, hold_s=60, uids=OTHER_UIDS[1:], folder=queue)
    group.arrive(0)
    wait_for(lambda: (queue.parent / "holding-0").exists())
    messages: list[str] = []
    planted: list[int] = []
    left: list[float] = []

    def say(message: str) -> None:
        messages.append(message)
        if not planted:  # we wait at place 2; now the classmate plants, then the holder leaves
            planted.extend(
                plant_ticket(
                    queue,
                    json.dumps({"since": "1970-01-01T00:00:00"}),
                    OTHER_UIDS[0],
                    f"{index:016x}",
                )
                for index in range(2)
            )
            (queue.parent / "release-0").touch()
            left.append(time.monotonic())

    try:
        with turn(queue, 1, "fio", poll_s=POLL_S, say=say, silent_s=600, turn_s=3):
            waited = time.monotonic() - left[0]
    finally:
        for fd in planted:
            os.close(fd)
    assert messages[0] == "fio: waiting for a turn, place 2 of 2 (1 at a time in this class)"
    assert not any("place 3" in message for message in messages), messages
    assert waited < 2


@ROOT_ONLY
def test_a_ticket_naming_another_user_blames_its_owner_and_is_shown_escaped(queue: Path) -> None:
    text = json.dumps(
        {"user": "vbob", "pid": 7, "what": "fio\x1b[2J\x1b]0;owned\x07\u202e", "since": "now\r"}
    )
    fd = plant_ticket(queue, text, OTHER_UIDS[0], "ab" * 8)
    try:
        summary = queue_summary(queue, 2)
        [entry] = waiting(queue)
    finally:
        os.close(fd)
    assert entry["user"] == f"uid{OTHER_UIDS[0]}" and "vbob" not in summary
    assert summary == (
        f"heavy-step queue (2 at a time): running uid{OTHER_UIDS[0]} "
        "(fio\\x1b[2J\\x1b]0;owned\\x07\\u202e)"
    )
    assert not any(ord(char) < 32 or 0x7F <= ord(char) < 0xA0 for char in summary)


def test_printable_escapes_every_control_and_format_character() -> None:
    assert printable("a\x1b[31mb\r\n\t\x7f\x9b\u202e\u2028c") == (
        "a\\x1b[31mb\\r\\n\\t\\x7f\\x9b\\u202e\\u2028c"
    )
    assert printable("éß 名前") == "éß 名前"
    assert printable("x" * 300, 10) == "x" * 10 + "..."


def one_sentence(text: str) -> bool:
    return "\n" not in text and ". " not in text and "Traceback" not in text


def test_bad_input_is_one_sentence(tmp_path: Path, queue: Path) -> None:
    with pytest.raises(LabError, match="at least 1") as raised:
        with turn(queue, 0, "fio", poll_s=POLL_S, say=must_not_wait):
            pass
    assert one_sentence(str(raised.value))
    missing = tmp_path / "no-such-class" / "queue"
    for call in (lambda: turn(missing, 2, "fio").__enter__(), lambda: waiting(missing)):
        with pytest.raises(LabError, match="class setup") as raised:
            call()
        assert str(missing) in str(raised.value)
        assert "missing or not writable" in str(raised.value)
        assert one_sentence(str(raised.value))
    assert os.listdir(queue) == []
    assert not missing.parent.exists()


@pytest.mark.skipif(os.getuid() == 0, reason="root may write into any folder")
def test_a_folder_the_learner_cannot_write_is_one_sentence(queue: Path) -> None:
    queue.chmod(0o555)
    try:
        with pytest.raises(LabError, match="missing or not writable"):
            with turn(queue, 1, "fio"):
                pass
    finally:
        queue.chmod(0o3770)


def test_the_block_gets_its_ticket_whose_change_time_is_the_arrival(tmp_path: Path) -> None:
    before = time.time_ns()
    with turn(tmp_path, 1, "timed") as ticket:
        assert TICKET.fullmatch(ticket) and os.path.exists(tmp_path / ticket)
        assert before - 0.1e9 <= os.stat(tmp_path / ticket).st_ctime_ns <= time.time_ns()
        with turn(tmp_path, 1, "nested") as inner:
            assert inner is None  # a turn inside a turn takes no ticket
    assert os.listdir(tmp_path) == []


def test_the_summary_names_who_runs_and_who_waits_in_order(queue: Path, monkeypatch) -> None:
    import iolab.core.class_queue as class_queue

    entries = [
        {"user": "ann", "what": "fio"},
        {"user": "bob", "what": "sweep"},
        {"user": "cat", "what": "mdrates"},
    ]
    monkeypatch.setattr(class_queue, "waiting", lambda queue_dir: entries)
    assert class_queue.queue_summary(queue, 2) == (
        "heavy-step queue (2 at a time): running ann (fio), bob (sweep); waiting cat (mdrates)"
    )
    assert class_queue.queue_summary(queue, 3).endswith("cat (mdrates)")
    assert "waiting" not in class_queue.queue_summary(queue, 3)


#: A classmate's own ticket, made by hand as a hostile learner would: naming another user,
#: dated 1970, escape codes in its text; locked, its heartbeat kept fresh until stopped.
FORGED_TICKET = r"""
import fcntl, json, os, sys, time
queue, tag = sys.argv[1], sys.argv[2]
ticket, beat = os.path.join(queue, "ticket-1-" + tag), os.path.join(queue, "beat-1-" + tag)
open(beat, "w").close()
fd = os.open(ticket, os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, json.dumps({"user": "vbob", "pid": 1, "what": "fio\x1b[2J",
                         "since": "1970-01-01T00:00:00"}).encode())
fcntl.flock(fd, fcntl.LOCK_EX)
os.utime(ticket, (0, 0))
print(os.getpid(), flush=True)
while True:
    os.utime(beat)
    time.sleep(0.05)
"""
MALLORY = "iolab-mallory"


@pytest.fixture
def mallory() -> Iterator[str]:
    """A real second user, made for the test if missing and removed again."""
    made = subprocess.run(["id", MALLORY], capture_output=True).returncode != 0
    if made:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", MALLORY], check=True)
    yield MALLORY
    if made:
        subprocess.run(["userdel", MALLORY], capture_output=True)


@pytest.mark.needs("users")
def test_a_real_classmates_forged_ticket_blames_them_and_times_out_when_stopped(
    shared_queue: Path, mallory: str
) -> None:
    proc = subprocess.Popen(
        [
            "runuser",
            "-u",
            mallory,
            "--",
            "/usr/bin/python3",
            "-c",
            FORGED_TICKET,
            str(shared_queue),
            "cd" * 8,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    pid = 0
    try:
        pid = int(proc.stdout.readline())  # runuser's child: the classmate's own process
        summary = queue_summary(shared_queue, 1)
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        with turn(
            shared_queue, 1, "fio", poll_s=POLL_S, say=lambda message: None, silent_s=1, turn_s=10
        ):
            waited = time.monotonic() - started
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
        proc.kill()  # runuser stops itself when its child is stopped: it would never reap
        proc.wait()
    assert summary == (f"heavy-step queue (1 at a time): running {mallory} (fio\\x1b[2J)")
    assert waited < 2.5
