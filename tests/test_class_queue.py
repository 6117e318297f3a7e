"""The class queue: at most `slots` heavy steps at once, first come first served, across real
processes; dead holders, planted files and bad input never block or break it."""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import re
import stat
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from iolab.core.class_queue import TICKET, turn, waiting
from iolab.core.errors import LabError

POLL_S = 0.02
#: How long the tests wait for a child process to reach a point before failing.
PATIENCE_S = 20.0
SPAWN = multiprocessing.get_context("spawn")


def take_turn(queue: str, slots: int, index: int, log: str, go: str, holding: str,
              release: str, hold_s: float) -> None:
    """A learner's step in a child process: arrive when `go` exists, then hold the turn for
    `hold_s` or until `release` exists, and log (index, start, end) under the turn."""
    wait_for(lambda: Path(go).exists())
    with turn(Path(queue), slots, f"step {index}", poll_s=POLL_S, say=lambda message: None):
        start = time.time()
        Path(holding).touch()
        while time.time() - start < hold_s and not Path(release).exists():
            time.sleep(0.005)
        with open(log, "a") as out:
            out.write(f"{index} {start} {time.time()}\n")


def wait_for(condition: Callable[[], bool], what: str = "a child process") -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.005)


def tickets(queue: Path) -> list[str]:
    return sorted(name for name in os.listdir(queue) if TICKET.fullmatch(name))


def must_not_wait(message: str) -> None:
    raise AssertionError(f"the turn waited: {message}")


class Learners:
    """Child processes that each take one turn; `arrive(i)` lets learner i take a ticket and
    returns once it has one (or already ran), so arrival order is the order of the calls."""

    def __init__(self, tmp: Path, queue: Path, slots: int, count: int, hold_s: float) -> None:
        self.tmp, self.queue, self.log = tmp, queue, tmp / "turns.log"
        self.processes = [
            SPAWN.Process(target=take_turn, args=(str(queue), slots, i, str(self.log),
                                                   str(tmp / f"go-{i}"), str(tmp / f"holding-{i}"),
                                                   str(tmp / f"release-{i}"), hold_s))
            for i in range(count)]
        for process in self.processes:
            process.start()

    def arrive(self, index: int) -> None:
        (self.tmp / f"go-{index}").touch()
        pid = self.processes[index].pid
        wait_for(lambda: any(f"-{pid}-" in name for name in tickets(self.queue))
                 or (self.tmp / f"holding-{index}").exists(), f"learner {index}'s ticket")

    def finish(self) -> list[tuple[int, float, float]]:
        """Wait for everyone; the logged turns in the order they started."""
        for process in self.processes:
            process.join(PATIENCE_S)
            assert process.exitcode == 0
        turns = [line.split() for line in self.log.read_text().splitlines()]
        return sorted(((int(i), float(start), float(end)) for i, start, end in turns),
                      key=lambda logged: logged[1])

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

    def start(slots: int, count: int, hold_s: float) -> Learners:
        started.append(Learners(tmp_path, queue, slots, count, hold_s))
        return started[-1]

    yield start
    for group in started:
        group.stop()


def most_at_once(turns: list[tuple[int, float, float]]) -> int:
    """The largest number of turns held at the same moment (an end before a start at a tie)."""
    events = sorted([(start, 1) for _, start, _ in turns] + [(end, -1) for _, _, end in turns])
    held = peak = 0
    for _, change in events:
        held += change
        peak = max(peak, held)
    return peak


def test_one_slot_serves_learners_in_arrival_order(queue: Path, learners) -> None:
    group = learners(slots=1, count=4, hold_s=0.2)
    for index in (2, 0, 3, 1):
        group.arrive(index)
    turns = group.finish()
    assert [index for index, _, _ in turns] == [2, 0, 3, 1]
    assert most_at_once(turns) == 1
    assert all(earlier[2] <= later[1] for earlier, later in zip(turns, turns[1:]))
    assert os.listdir(queue) == []


def test_two_slots_never_run_three_at_once(queue: Path, learners) -> None:
    group = learners(slots=2, count=4, hold_s=0.3)
    for index in range(4):
        group.arrive(index)
    turns = group.finish()
    assert sorted(index for index, _, _ in turns) == [0, 1, 2, 3]
    assert most_at_once(turns) == 2  # the second slot is used, a third never
    assert os.listdir(queue) == []


def test_a_killed_holder_does_not_block_the_class(tmp_path: Path, queue: Path,
                                                   learners) -> None:
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
    assert tickets(queue) == []  # our own dead ticket, old enough: removed


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_another_users_dead_ticket_is_ignored_and_left_alone(queue: Path) -> None:
    dead = queue / f"{0:020d}-mallory-1-abcdef"
    dead.write_text("{}\n")
    os.chown(dead, 65534, 65534)
    old = time.time() - 3600
    os.utime(dead, (old, old))
    with turn(queue, 1, "fio", poll_s=POLL_S, say=must_not_wait):
        pass
    assert tickets(queue) == [dead.name]


def test_a_waiting_learner_is_told_their_place_then_their_turn(tmp_path: Path, queue: Path,
                                                                learners) -> None:
    group = learners(slots=1, count=1, hold_s=0.3)  # some fifteen polls of the waiter
    group.arrive(0)
    wait_for(lambda: (tmp_path / "holding-0").exists())
    messages: list[str] = []
    seen_waiting: list[list[dict]] = []

    def say(message: str) -> None:
        messages.append(message)
        seen_waiting.append(waiting(queue))

    with turn(queue, 1, "fio", poll_s=POLL_S, say=say):
        assert group.log.exists()  # the holder has left
    assert messages[0] == "fio: waiting for a turn, place 2 of 2 (1 at a time in this class)"
    assert len(messages) == 2  # the place did not change while waiting: said once
    assert re.fullmatch(r"fio: your turn after \d+ s", messages[1])
    assert [entry["what"] for entry in seen_waiting[0]] == ["step 0", "fio"]
    assert seen_waiting[0][0]["pid"] == group.processes[0].pid


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
    assert re.fullmatch(rf"\d{{20}}-.+-{os.getpid()}-[0-9a-f]+", name)
    assert abs(int(name[:20]) - time.time_ns()) < 60e9
    assert mode == 0o644
    assert [{key: entry[key] for key in ("pid", "what")} for entry in described] == [
        {"pid": os.getpid(), "what": "sweep"}]
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
    planted = {f"{0:020d}-mallory-1-aa": "link", f"{1:020d}-mallory-1-bb": "fifo",
               f"{2:020d}-mallory-1-cc": "dir", "entering-mallory-1-dd": "link",
               "notes.txt": "file"}
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
    held = [os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            for path in [target] + [queue / name for name, kind in planted.items()
                                    if kind in ("fifo", "dir")]]
    try:
        for fd in held:
            fcntl.flock(fd, fcntl.LOCK_EX)
        with turn(queue, 1, "fio", poll_s=POLL_S, say=must_not_wait):
            assert len(os.listdir(queue)) == len(planted) + 1
        assert waiting(queue) == []
    finally:
        for fd in held:
            os.close(fd)
    assert sorted(os.listdir(queue)) == sorted(planted)
    assert (queue / "notes.txt").read_text() == "not a ticket\n"
    assert target.read_text() == "{}\n"


def test_nobody_starts_while_someone_takes_a_ticket(queue: Path) -> None:
    """A locked entering file (a newcomer reading the clock) holds the turn back until it is
    released; left behind by a dead process it is ignored."""
    entering = queue / "entering-alice-1-ab"
    fd = os.open(entering, os.O_CREAT | os.O_WRONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    timer = threading.Timer(0.3, os.close, (fd,))
    started = time.monotonic()
    timer.start()
    try:
        with turn(queue, 1, "fio", poll_s=POLL_S, say=must_not_wait):
            waited = time.monotonic() - started
    finally:
        timer.join()
    assert 0.25 < waited < 5
    assert sorted(os.listdir(queue)) == [entering.name]


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


def test_the_block_gets_its_ticket_whose_name_holds_the_arrival_time(tmp_path: Path) -> None:
    before = time.time_ns()
    with turn(tmp_path, 1, "timed") as ticket:
        assert TICKET.fullmatch(ticket) and os.path.exists(tmp_path / ticket)
        assert before <= int(ticket[:20]) <= time.time_ns()
        with turn(tmp_path, 1, "nested") as inner:
            assert inner is None  # a turn inside a turn takes no ticket
    assert os.listdir(tmp_path) == []


def test_the_summary_names_who_runs_and_who_waits_in_order(queue: Path, monkeypatch) -> None:
    import iolab.core.class_queue as class_queue

    entries = [{"user": "ann", "what": "fio"}, {"user": "bob", "what": "sweep"},
               {"user": "cat", "what": "mdrates"}]
    monkeypatch.setattr(class_queue, "waiting", lambda queue_dir: entries)
    assert class_queue.queue_summary(queue, 2) == (
        "heavy-step queue (2 at a time): running ann (fio), bob (sweep); waiting cat (mdrates)")
    assert class_queue.queue_summary(queue, 3).endswith("cat (mdrates)")
    assert "waiting" not in class_queue.queue_summary(queue, 3)
