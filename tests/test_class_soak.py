"""A soak: a class of 30 real learners and one hostile classmate on one machine, all at once,
and the class finishes (issue 35, item 6).

Thirty accounts join a class whose heavy-step queue has one slot, each at the same moment:
they make their workspace, put a result on the wall and take a turn at a heavy step. Before
they start, the classmate (an account of the class's group too) takes the one slot and is
stopped there (SIGSTOP: a Ctrl-Z), squats one learner's workspace name in scratch, takes
another's wall name with a link to that learner's home, plants a FIFO, a folder and a link
to the instructor's files in the queue, a file claiming to be a learner, a hard link of their
own under a learner's name and junk nested past the parser's depth on the wall; while the
learners run, they keep swapping an entry of theirs between a FIFO and a link. What must
hold: every learner ends with their result (none hangs behind the stopped holder longer than
the instructor's bound), in a private workspace of their own; the wall names exactly the 30
learners, each from a file of their own, and lists the classmate as not on it; then each
learner's `iolab clean` and the instructor's `class clean` leave nothing, and nothing outside
the class folder that is not the classmate's changed.

Every user runs as a forked child of this test that drops root (tests/user_processes.py), so
30 learners cost 30 forks, not 30 interpreters; the setup's pip and data generation are
stand-ins (quick_setup). Needs root for the accounts (CI's part 5).
"""

from __future__ import annotations

import itertools
import json
import os
import pwd
import shutil
import signal
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from user_processes import (
    Forked,
    answer_of,
    as_user,
    changed,
    one_sentence,
    snapshot,
    start_as_user,
)

from iolab.classmode import setup as class_setup
from iolab.classmode.bench import make_learners, remove_learners
from iolab.classmode.teardown import clean_class
from iolab.classmode.wall import not_on_the_wall, publish, scan_wall
from iolab.cli import main
from iolab.core import cleanup
from iolab.core.class_folder import CLASS_ENV, active_class, heavy_turn, read_class
from iolab.core.lab_dirs import ensure_writable_dir, results_dir
from iolab.core.workspace import workdir

pytestmark = [pytest.mark.needs("users"), pytest.mark.slow]

LEARNERS = tuple(f"iolab-soak-{number:02d}" for number in range(1, 31))
MATE = "iolab-soak-eve"
GROUP = "iolab-soak"
CLASS = "soak"
#: The instructor's bounds (class.json): a holder whose heartbeat is silent this long no longer
#: holds the slot; a turn kept this long no longer holds anyone back.
SILENT_S, TURN_S = 5.0, 60.0
#: File times lag the clock by up to a tick of the kernel's coarse clock.
CLOCK_TICK_S = 0.05
#: The whole class's day, waited for at once: far beyond what 30 light turns take here.
DAY_TIMEOUT_S = 300.0
#: The learner whose workspace name the classmate squats, and the one whose wall name they take.
SQUATTED, WALL_TAKEN, CLAIMED, LINKED = LEARNERS[0], LEARNERS[1], LEARNERS[2], LEARNERS[3]
READERS_CSV = (
    "reader,wall_median_s,cold_wall_median_s,dataset_file_opens,total_calls\n"
    "read_archive,0.5,1.5,1,200\n"
)


@pytest.fixture(scope="module")
def accounts() -> Iterator[Path]:
    """Thirty learners and the classmate in the class's group, a private home each; all gone
    again at the end."""
    import matplotlib.pyplot  # noqa: F401  # once here, not once per forked child

    top = Path(tempfile.mkdtemp(prefix="iolab-class-soak-", dir="/tmp"))
    top.chmod(0o755)
    made: list[str] = []
    try:
        made = make_learners([*LEARNERS, MATE], GROUP, top)
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)
        remove_learners(made)


def env_of(top: Path, user: str | None) -> dict[str, str]:
    """What the lab sees in `user`'s shell: their home, the shared scratch, the class joined."""
    name = user or "root"
    return {
        "HOME": str(top / user) if user else str(top / "instructor"),
        "USER": name,
        "LOGNAME": name,
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "SCRATCH": str(top / "scratch"),
        CLASS_ENV: str(top / CLASS),
    }


def learners_day() -> dict:
    """One learner's light path: workspace, a result on the wall, a turn at a heavy step."""
    joined = active_class()
    assert joined is not None
    workspace = ensure_writable_dir(workdir())
    (results_dir() / "readers.csv").write_text(READERS_CSV)
    wall_file = publish(joined, {"02-tar-size": {"right": True}})
    with heavy_turn("soak") as ticket:
        entered = time.time()
        (results_dir() / "heavy.bin").write_bytes(b"0" * 4096)
        left = time.time()
    info = os.lstat(workspace)
    return {
        "workspace": str(workspace),
        "mode": stat.S_IMODE(info.st_mode),
        "uid": info.st_uid,
        "wall": str(wall_file),
        "ticket": ticket,
        "entered": entered,
        "left": left,
    }


def stall() -> None:
    """The classmate takes the one slot and stops there, flock and heartbeat held."""
    with heavy_turn("stall") as ticket:
        print(ticket, flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)


def plant(top: Path) -> dict:
    """The classmate's traps, laid before the learners start."""
    root, scratch = top / CLASS, top / "scratch"
    queue, wall = root / "queue", root / "wall"
    squat = scratch / f"iolab-{CLASS}-{SQUATTED}"
    squat.mkdir()
    squat.chmod(0o777)
    os.symlink(top / WALL_TAKEN, wall / f"{WALL_TAKEN}.json")
    os.symlink(top / "instructor", queue / "ticket-1-0123456789abcdef")
    os.mkfifo(queue / "beat-1-0123456789abcdef")
    (queue / "x").mkdir()
    (queue / "x" / "inside").write_text("the classmate's")
    claim = {
        "user": CLAIMED,
        "node": "n1",
        "workspace_fs": "ext4",
        "readers": {"read_archive": {"wall_median_s": 0.001}},
        "fio": {},
        "checks": {"02-tar-size": {"right": True}},
    }
    (wall / f"{CLAIMED}~0123456789abcdef.json").write_text(json.dumps(claim))
    (wall / f"{MATE}.json").write_bytes(b"[" * 50_000)
    os.link(wall / f"{MATE}.json", wall / f"{LINKED}.json")
    return {"squat": str(squat)}


def keep_swapping(top: Path) -> int:
    """While the learners run: an entry of the classmate's in the queue and on the wall,
    a FIFO one moment and a link to the instructor's files the next; how many swaps."""
    stop = top / "scratch" / "stop-swapping"
    swaps = 0
    while not stop.exists():
        for entry in (top / CLASS / "queue" / "swap", top / CLASS / "wall" / "swap.json"):
            entry.unlink(missing_ok=True)
            if swaps % 2:
                os.symlink(top / "instructor", entry)
            else:
                os.mkfifo(entry)
        swaps += 1
        time.sleep(0.02)
    return swaps


def learners_clean() -> int:
    cleanup.SYSTEM_BASES = ()  # the machine's /tmp and /dev/shm are not this test's
    return main(["clean"])


def test_thirty_learners_and_a_hostile_classmate_finish_the_day(
    accounts: Path, quick_setup: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = accounts
    scratch, instructor = top / "scratch", top / "instructor"
    scratch.mkdir()
    scratch.chmod(0o1777)
    instructor.mkdir(mode=0o755)
    (instructor / "notes.md").write_text("what to say at 10:00\n")
    for learner in LEARNERS:  # each learner's own notes beside the lab's folders
        done = as_user(learner, env_of(top, learner), lambda: Path("notes.txt").write_text("mine"))
        assert done.kind == "ok", done
    monkeypatch.setenv("SCRATCH", str(scratch))
    root = top / CLASS
    class_setup.setup_class(
        root,
        len(LEARNERS),
        slots=1,
        group=GROUP,
        queue_bounds=(SILENT_S, TURN_S),
        say=lambda text: None,
    )
    precious = [instructor, *(top / learner / "notes.txt" for learner in LEARNERS)]
    before = snapshot(precious)

    staller = start_as_user(MATE, env_of(top, MATE), stall)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _stopped(staller.pid):
        time.sleep(0.05)
    assert _stopped(staller.pid), "the classmate never took the slot"
    planted = as_user(MATE, env_of(top, MATE), lambda: plant(top))
    assert planted.kind == "ok", planted
    swapper = start_as_user(MATE, env_of(top, MATE), lambda: keep_swapping(top))

    began = time.monotonic()
    days: dict[str, Forked] = {
        learner: start_as_user(learner, env_of(top, learner), learners_day) for learner in LEARNERS
    }
    outcomes = {learner: answer_of(day, DAY_TIMEOUT_S) for learner, day in days.items()}
    took = time.monotonic() - began
    stalled_until = _last_sign_of_life(root / "queue", staller.pid) + SILENT_S
    (scratch / "stop-swapping").touch()
    swapped = answer_of(swapper)
    os.kill(staller.pid, signal.SIGKILL)
    answer_of(staller)
    assert swapped.kind == "ok" and swapped.value > 0, swapped

    for learner, outcome in outcomes.items():
        one_sentence(outcome, learner)
        assert outcome.kind == "ok", f"{learner}: {outcome.text}"
        day = outcome.value
        assert day["uid"] == pwd.getpwnam(learner).pw_uid and day["mode"] == 0o700, day
        assert Path(day["workspace"]).parent == scratch
        assert day["ticket"] is not None
    # One slot: the stopped holder kept it until its heartbeat had been silent for the
    # instructor's bound (not a moment less), then the learners took turns one at a time.
    turns = sorted(
        (outcome.value["entered"], outcome.value["left"]) for outcome in outcomes.values()
    )
    assert turns[0][0] >= stalled_until - CLOCK_TICK_S, (turns[0], stalled_until)
    for (_, earlier_left), (entered, _) in itertools.pairwise(turns):
        assert entered >= earlier_left, "two learners held the one slot at once"
    squatted = outcomes[SQUATTED].value["workspace"]
    assert squatted != planted.value["squat"]  # a fresh private name, not the classmate's
    assert Path(outcomes[WALL_TAKEN].value["wall"]).name.startswith(f"{WALL_TAKEN}~")
    print(f"30 learners' days took {took:.1f} s; the classmate swapped {swapped.value} times")

    wall = scan_wall(read_class(root))
    assert [record["user"] for record in wall.records] == sorted(LEARNERS)
    assert all(record["checks"] == {"02-tar-size": {"right": True}} for record in wall.records)
    assert sum(wall.ignored.values()) >= 4, wall.ignored  # the claim, the junk, the links
    assert not_on_the_wall(read_class(root), wall.records) == [MATE]
    learners_tickets = [
        entry.name
        for entry in (root / "queue").iterdir()
        if entry.lstat().st_uid != pwd.getpwnam(MATE).pw_uid and not entry.name.startswith(".")
    ]
    assert learners_tickets == [], learners_tickets  # every learner's went with their turn

    cleaned = {
        learner: start_as_user(learner, env_of(top, learner), learners_clean)
        for learner in LEARNERS
    }
    for learner, forked in cleaned.items():
        outcome = answer_of(forked, DAY_TIMEOUT_S)
        assert outcome.kind == "ok" and outcome.value == 0, f"{learner}: {outcome}"
        assert not Path(outcomes[learner].value["workspace"]).exists(), learner
    freed = clean_class(root)
    assert freed.folder_removed and not os.path.lexists(root), freed
    assert changed(before, snapshot(precious)) == []
    left = sorted(path.name for path in scratch.iterdir())
    assert left == sorted([Path(planted.value["squat"]).name, "stop-swapping"]), left


def _last_sign_of_life(queue: Path, pid: int) -> float:
    """When the holder `pid` last showed it lived: its ticket's or heartbeat's ctime, the
    later (what the queue's waiters go by)."""
    return max(
        entry.lstat().st_ctime
        for entry in queue.iterdir()
        if entry.name.startswith((f"ticket-{pid}-", f"beat-{pid}-"))
    )


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (state T in /proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] == "T"
