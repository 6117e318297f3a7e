"""A class day drawn at random: two learners and a hostile classmate, real users, act on one
class folder in any order, then the instructor runs `class clean`.

Hypothesis draws the instructor (root, or an ordinary user of the class's group) and a
sequence of actions: learners join, run a light lab step, publish to the wall, take and
release a queue ticket, build the wall page, clean their own workspace; the instructor
resets a learner or builds the wall page; the classmate plants links, FIFOs, sockets,
folders (nested past the clean's depth limit, too), hard links and files owned by others in
the class's queue/ and wall/ (aimed at the instructor's checkout, the learners' notes, a
decoy folder of the instructor's with class-marked folders in it), takes a learner's
predictable workspace names first, writes junk JSON to the wall, swaps an entry of theirs
for a link, or arms a swap for the middle of the instructor's next command (right before
it opens that folder). What must hold:

* after every action, the files planted outside the class folder (the instructor's
  checkout with its `.git` and notes, each learner's notes with a folder the lab made for
  them, the decoy folder) are byte for byte, mode for mode, owner and mtime unchanged;
* an instructor's command changes nothing at all outside the class folder (but the
  instructor's own marker registry), and nothing of another user's inside it but what a
  reset is for; a learner's changes nothing outside it that is not theirs;
* no command ends in anything but its result or a one-sentence LabError (never a traceback
  or a hang);
* `class clean` then removes the class folder, or says what it could not remove and leaves
  only that (and the class marker, for the next clean), and counts as freed only what the
  class held, never what a link in it leads to.

Every user runs as themselves: a child forked from this process that drops root
(setgroups, setresgid, setresuid), with the environment the lab would see in their shell,
so an action costs milliseconds, not an interpreter's start. That test needs root (CI's
part 5), as tests/test_class_hostile.py's real users do; the setup's pip and data
generation are replaced by stand-ins, as its quick_setup does, and the copy of the lab by a
copy of a small checkout. The last test, a race found while writing it (the class measured
by path while learners could swap names in it), needs neither.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st
from user_processes import (
    Entry,
    Outcome,
    as_user,
    changed,
    one_sentence,
    owner_of,
    snapshot,
    without_mtime_of_folders,
)

from iolab.classmode import setup as class_setup
from iolab.classmode import teardown
from iolab.classmode.bench import make_learners, remove_learners
from iolab.classmode.layout import CLASS_MARKER, CLASS_MARKER_TEXT
from iolab.classmode.teardown import Freed, clean_class, reset_learner
from iolab.classmode.wall import publish
from iolab.cli import main
from iolab.core import cleanup
from iolab.core.class_folder import CLASS_ENV, active_class, heavy_turn
from iolab.core.lab_dirs import results_dir
from iolab.core.markers import MADE_MARKER, MADE_MARKER_TEXT
from iolab.core.owned import has_marker, make_private_dir, write_marker
from iolab.core.workspace import workdir

LEARNERS = ("iolab-sf-ann", "iolab-sf-bob")
ANN, BOB = LEARNERS
MATE = "iolab-sf-eve"
TEACHER = "iolab-sf-tom"
GROUP = "iolab-sf-class"
CLASS = "day"
#: The instructor: root (None), or an ordinary user of the class's group.
INSTRUCTORS = (None, TEACHER)
#: A user id no account has: the owner of a file left by an account since deleted.
NO_ACCOUNT_UID = 4_242_424
SHARED = ("queue", "wall")


class Swapper:
    """A process of root's, started by an instructor's child before it drops root, that
    swaps a name for a link as the classmate when the instructor's command asks, and answers
    when that is done: a race in the middle of the command, made certain."""

    def __init__(self, env: dict[str, str], close: list[int]) -> None:
        ask_r, self.ask = os.pipe()
        self.answer, answer_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the swapper
            try:
                for fd in (*close, self.ask, self.answer):
                    os.close(fd)
                with open(ask_r, "rb") as asks, open(answer_w, "wb", buffering=0) as answers:
                    for line in asks:
                        path, target = json.loads(line)
                        done = as_user(MATE, env, partial(swap_for_link, Path(path), target))
                        answers.write(f"{done.kind}\n".encode())
            finally:
                os._exit(0)
        os.close(ask_r)
        os.close(answer_w)

    def swap(self, path: Path, target: str) -> str:
        os.write(self.ask, (json.dumps([str(path), target]) + "\n").encode())
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = os.read(self.answer, 64)
            if not chunk:
                break
            answer += chunk
        return answer.decode().strip()

    def stop(self) -> None:
        os.close(self.ask)
        os.close(self.answer)
        os.waitpid(self.pid, 0)


def swap_for_link(path: Path, target: str) -> str:
    """The classmate moves their entry `path` aside and puts a link to `target` in its place
    (the sticky folder lets them move only their own)."""
    aside = path.with_name(f".{path.name}.moved-{time.monotonic_ns()}")
    with contextlib.suppress(FileNotFoundError):
        os.rename(path, aside)
    os.symlink(target, path)
    return str(aside)


# --------------------------------------------------------------------------- the stage


@dataclass(frozen=True)
class Stage:
    """The users, their homes and a small checkout to set the class up from (module-wide)."""

    top: Path

    def home(self, user: str | None) -> Path:
        return self.top / (user or "root-home")

    @property
    def checkout(self) -> Path:
        return self.top / "checkout"


@pytest.fixture(scope="module")
def stage() -> Iterator[Stage]:
    """The two learners, the classmate and the teacher in the class's group, a home each
    (root's stand-in one too), and a checkout of a few files; all gone again at the end."""
    import matplotlib.pyplot  # noqa: F401  # once here, not once per forked child

    top = Path(tempfile.mkdtemp(prefix="iolab-class-stateful-", dir="/tmp"))
    top.chmod(0o755)
    made: list[str] = []
    try:
        made = make_learners([*LEARNERS, MATE, TEACHER], GROUP, top)
        (top / "root-home").mkdir(mode=0o700)
        small_checkout(top / "checkout")
        yield Stage(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)
        remove_learners(made)


def small_checkout(checkout: Path) -> None:
    """A few files (and a link) for the setup to copy as the lab, readable by everyone."""
    for name, text in (
        ("README.md", "the lab\n"),
        ("requirements.txt", "pandas\n"),
        ("iolab/__init__.py", '__version__ = "0"\n'),
        ("data_generators/generate_data.py", "print('data')\n"),
    ):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text(text)
    (checkout / "README.link").symlink_to("README.md")
    for path in [checkout, *checkout.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.fixture
def stand_ins(stage: Stage, quick_setup: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """quick_setup, with the stage's small checkout as the lab to copy (not a walk of this
    one's 400 MB, which the teacher's git would not list). Forked children inherit them."""
    monkeypatch.setattr(class_setup, "repo_root", lambda: stage.checkout)


# --------------------------------------------------------------------------- one class day

#: Where the classmate's links and the learners' squatted names point: every kind of thing
#: a remover that followed a link would damage, the class's own project folder included.
TARGETS = (
    "decoy",
    "decoy/precious.txt",
    "decoy/sheet.txt",
    "decoy/marked",
    "decoy/made",
    "home/checkout",
    "home/checkout/notes.md",
    "home/checkout/.git",
    "home/checkout/env",
    "notes-ann",
    "notes-ann/old-run",
    "notes-bob/notes.txt",
    "workspace-ann",
    "project",
    "relative",
)
#: Names the classmate plants in queue/ or wall/: the learners' wall names, the name publish
#: falls back to, a ticket's and a heartbeat's, the class's marker and description, any.
NAMES = (
    f"{ANN}.json",
    f"{BOB}.json",
    f"{ANN}~0123456789abcdef.json",
    "ticket-1-0123456789abcdef",
    "beat-1-0123456789abcdef",
    CLASS_MARKER,
    "class.json",
    "x",
)
PLANTS = (
    "link",
    "fifo",
    "socket",
    "file",
    "dir-700",
    "dir-755",
    "dir-777",
    "dir-500",
    "deep",
    "hardlink",
    "foreign-bob",
    "foreign-instructor",
    "foreign-no-account",
)
#: The learner's predictable names in scratch: the class workspace, the per-user place that
#: `iolab clean` looks at, and one like the workspace's private fallback.
SQUAT_NAMES = (f"iolab-{CLASS}-{{}}", "iolab-{}", f"iolab-{CLASS}-{{}}-0123abcd")
#: What the classmate leaves there: folders open to all, closed to the learner, or with a
#: hand-made marker; a link to a folder the learner's lab made for them elsewhere (the
#: worst case: it is private and provably the lab's), to the instructor's class-marked
#: folder, or to nowhere; a FIFO; a file.
SQUATS = (
    "dir-777",
    "dir-755",
    "dir-marked",
    "link-own-lab",
    "link-decoy",
    "link-dangling",
    "fifo",
    "file",
)
JUNK_NAMES = (
    f"{MATE}.json",
    f"{ANN}.json",
    f"{BOB}~0123456789abcdef.json",
    f"{MATE}~0123456789abcdef.json",
    ".hidden.partial",
)
JUNK = (
    b"",
    b"not json",
    b"[" * 50_000,  # nested deeper than the parser goes
    json.dumps(
        {
            "user": ANN,  # a record claiming to be another learner's
            "node": "n1",
            "workspace_fs": "ext4",
            "readers": {"read_archive": {"wall_median_s": 0.001}},
            "fio": {},
            "checks": {"02-tar-size": {"right": True}},
        }
    ).encode(),
    b'{"node": "<b>n1</b>", "workspace_fs": "ext4", "readers": {"r": {"wall_median_s": NaN}},'
    b' "fio": {}, "checks": {}}',
    b'{"node": "n1", "workspace_fs": "ext4", "readers": [], "fio": {}, "checks": {"x": 1}}',
    b"\xff\xfe\x00 not text",
    b"{" + b" " * (70 * 1024) + b"}",  # larger than a wall file may be
)

LEARNER_COMMANDS = ("join", "step", "publish", "heavy", "clean", "wall-me")
TARGET = st.sampled_from(TARGETS)
#: Each learner command a branch of its own, so that learners act about as often as the
#: classmate attacks; the instructor now and then.
ACTION = st.one_of(
    *(st.tuples(st.just(command), st.sampled_from(LEARNERS)) for command in LEARNER_COMMANDS),
    st.tuples(st.just("reset"), st.sampled_from((*LEARNERS, MATE))),
    st.just(("wall",)),
    st.tuples(
        st.just("plant"),
        st.sampled_from(SHARED),
        st.sampled_from(PLANTS),
        st.sampled_from(NAMES),
        TARGET,
    ),
    st.tuples(
        st.just("squat"),
        st.sampled_from(LEARNERS),
        st.sampled_from(SQUAT_NAMES),
        st.sampled_from(SQUATS),
    ),
    st.tuples(st.just("junk"), st.sampled_from(JUNK_NAMES), st.integers(0, len(JUNK) - 1)),
    st.tuples(st.just("swap"), st.sampled_from(SHARED), st.sampled_from(NAMES), TARGET),
    st.tuples(
        st.just("race"), st.sampled_from(SHARED), st.sampled_from(NAMES), st.booleans(), TARGET
    ),
)


class ClassDay:
    """One class folder in a project folder of the instructor's, a shared scratch for the
    learners' workspaces, and what must never change: all in a folder of its own."""

    def __init__(self, stage: Stage, instructor: str | None) -> None:
        self.stage, self.instructor = stage, instructor
        self.run = Path(tempfile.mkdtemp(prefix="day-", dir=stage.top))
        self.run.chmod(0o755)
        self.project = self.run / "project"
        self.root = self.project / CLASS
        self.scratch = self.run / "scratch"
        self.decoy = self.run / "decoy"
        self.checkout = self.run / "instructor-home" / "checkout"
        self.armed: list[tuple[Path, str]] = []

    # ---------------------------------------------------------------- who is who

    def uid(self, user: str | None) -> int:
        return pwd.getpwnam(user).pw_uid if user else 0

    def env(self, user: str | None) -> dict[str, str]:
        """What the lab sees in `user`'s shell: their home, the shared scratch, the class
        joined (learners and the instructor's `class wall`)."""
        name = user or "root"
        return {
            "HOME": str(self.stage.home(user)),
            "USER": name,
            "LOGNAME": name,
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "SCRATCH": str(self.scratch),
            CLASS_ENV: str(self.root),
        }

    def target(self, name: str) -> str:
        """The path a link of the classmate's leads to (`relative`: to the decoy, from a
        name in queue/ or wall/)."""
        if name == "relative":
            return "../../../decoy"
        first, _, rest = name.partition("/")
        base = {
            "decoy": self.decoy,
            "home": self.checkout.parent,
            "notes-ann": self.stage.home(ANN) / "notes",
            "notes-bob": self.stage.home(BOB) / "notes",
            "workspace-ann": self.scratch / f"iolab-{CLASS}-{ANN}",
            "project": self.project,
        }[first]
        return str(base / rest) if rest else str(base)

    def precious_tops(self) -> list[Path]:
        return [
            self.decoy,
            self.checkout.parent,
            *(self.stage.home(learner) / "notes" for learner in LEARNERS),
        ]

    def precious(self) -> dict[str, Entry]:
        return snapshot(self.precious_tops())

    def outside(self) -> dict[str, Entry]:
        """Everything outside the class folder the users may reach or own: the day's folder
        and the learners' and classmate's homes (the instructor's home holds only their
        marker registry, which a clean changes)."""
        shot = snapshot(
            [self.run, *(self.stage.home(user) for user in (*LEARNERS, MATE))], skip=(self.root,)
        )
        # the project folder's mtime moves when the class folder in it goes
        shot[str(self.project)] = shot[str(self.project)]._replace(mtime_ns=0)
        return shot

    def inside(self) -> dict[str, Entry]:
        return {
            path: entry for path, entry in snapshot([self.root]).items() if path != str(self.root)
        }

    # ---------------------------------------------------------------- the morning

    def prepare(self) -> None:
        """The instructor's files and the learners' notes, then the class (as the
        instructor, in a project folder of theirs that nobody else may rename in)."""
        self.scratch.mkdir(mode=0o755)
        self.scratch.chmod(0o1777)
        for path in (self.project, self.decoy, self.checkout.parent):
            path.mkdir()
            os.chown(path, self.uid(self.instructor), -1)
        self.checkout.parent.chmod(0o700)
        self.must(self.instructor, self.plant_instructors_files, "the instructor's files")
        for learner in LEARNERS:
            notes = self.stage.home(learner) / "notes"
            self.must(learner, partial(plant_notes, notes), f"{learner}'s notes")

        def set_up() -> None:
            os.environ.pop(CLASS_ENV)  # the instructor has not joined the class
            class_setup.setup_class(
                self.root, len(LEARNERS), group=GROUP, python=sys.executable, say=lambda t: None
            )

        self.must(self.instructor, set_up, "the class setup")
        assert json.loads((self.root / "class.json").read_text())["workspaces_in"] == "scratch"

    def plant_instructors_files(self) -> None:
        """The decoy folder (a world-writable sheet a classmate may hard-link, folders the
        instructor's lab provably made) and a checkout in the instructor's home."""
        os.chmod(self.decoy, 0o755)
        for name, text, mode in (
            ("precious.txt", "the instructor's", 0o644),
            ("secret.txt", "the instructor's only", 0o600),
            ("sheet.txt", "sign up here", 0o666),
            ("marked/thesis.tex", "years of work", 0o644),
            ("made/results.csv", "1,2,3", 0o644),
        ):
            (self.decoy / name).parent.mkdir(exist_ok=True)
            (self.decoy / name).write_text(text)
            os.chmod(self.decoy / name, mode)
        write_marker(self.decoy / "marked", CLASS_MARKER, CLASS_MARKER_TEXT)
        write_marker(self.decoy / "made", MADE_MARKER, MADE_MARKER_TEXT)
        for name, text in (
            (".git/HEAD", "ref: refs/heads/main\n"),
            (".git/config", "[core]\n"),
            ("notes.md", "what to say at 10:00\n"),
            ("class.json", "my notes"),
            ("activate", "my script"),
            ("wall.html", "my page"),
            ("env/bin/tool", "mine"),
            ("lab/thesis.tex", "years of work"),
        ):
            (self.checkout / name).parent.mkdir(parents=True, exist_ok=True)
            (self.checkout / name).write_text(text)
        write_marker(self.checkout / "env", CLASS_MARKER, CLASS_MARKER_TEXT)
        write_marker(self.checkout / "lab", MADE_MARKER, MADE_MARKER_TEXT)

    def markers_still_prove(self) -> Outcome:
        """The instructor's lab still proves the decoy's and the checkout's marked folders
        its own (no clean forgot their seals)."""
        return as_user(
            self.instructor,
            self.env(self.instructor),
            lambda: [
                has_marker(self.decoy / "marked", CLASS_MARKER),
                has_marker(self.decoy / "made", MADE_MARKER),
                has_marker(self.checkout / "env", CLASS_MARKER),
                has_marker(self.checkout / "lab", MADE_MARKER),
            ],
        )

    def must(self, user: str | None, work: Callable[[], Any], what: str) -> Any:
        done = as_user(user, self.env(user), work)
        assert done.kind == "ok", f"{what} failed: {done.text}\n{done.printed}"
        return done.value

    # ---------------------------------------------------------------- the day

    def do(self, action: tuple) -> None:
        """One action; the classmate's are attacks, whose outcome is only noted."""
        kind, *args = action
        if kind in ("plant", "squat", "junk", "swap", "race"):
            said = getattr(self, kind)(*args)
            note(f"{action}: {said}")
            event(f"{kind}: {said.split(':')[0]}")
            return
        user = self.instructor if kind in ("reset", "wall") else args[0]
        outside, inside = self.outside(), self.inside()
        if kind == "reset":
            done = self.instructor_does(lambda: reset_learner(self.root, args[0]))
        else:
            done = as_user(user, self.env(user), self.learner_work(kind, user))
        note(f"{action}: {done.kind} {done.text or done.value!r}")
        event(f"{kind}: {done.kind}")
        one_sentence(done, str(action))
        if user != self.instructor:  # a learner changes nothing of anyone else's outside
            mine = self.uid(user)
            theirs = changed(
                without_mtime_of_folders(outside), without_mtime_of_folders(self.outside())
            )
            theirs = [change for change in theirs if owner_of(change) != mine]
            assert theirs == [], f"{action} changed what is not {user}'s: {theirs}"
            return
        assert changed(outside, self.outside()) == [], f"{action} changed something outside"
        if kind == "reset":
            gone = self.entries_of(inside, self.uid(args[0]))
            kept = [
                change
                for change in changed(inside, self.inside())
                if not any(change[0] == top or change[0].startswith(top + "/") for top in gone)
                and change[0] not in {str(self.root / name) for name in SHARED}
                and not (change[1] is None and owner_of(change) == self.uid(args[0]))
            ]
            assert kept == [], f"{action} changed what is not {args[0]}'s: {kept}"
        else:  # the page, and maybe a dead ticket of the instructor's own in queue/
            others = [
                change
                for change in changed(inside, self.inside())
                if change[0] != str(self.root / "wall.html")
                and owner_of(change) != self.uid(self.instructor)
            ]
            assert others == [], f"{action} changed another's file in the class: {others}"

    def entries_of(self, inside: dict[str, Entry], uid: int) -> set[str]:
        """The entries of `uid` in the class's queue/ and wall/ (what a reset removes)."""
        return {
            path
            for path, entry in inside.items()
            if entry.uid == uid and Path(path).parent in {self.root / name for name in SHARED}
        }

    def learner_work(self, kind: str, user: str | None) -> Callable[[], Any]:
        """A learner's command (or the instructor's `class wall`), as their lab runs it."""

        def step() -> str:
            out = results_dir()
            figure = 0.5 if user == ANN else 0.7
            (out / "readers.csv").write_text(
                "reader,wall_median_s,cold_wall_median_s,dataset_file_opens,total_calls\n"
                f"read_archive,{figure},{3 * figure},1,200\n"
            )
            return str(workdir())

        def put_on_wall() -> str:
            joined = active_class()
            assert joined is not None
            return str(publish(joined, {"02-tar-size": {"right": user == ANN}}))

        def heavy() -> str:
            with heavy_turn("a light step") as ticket:
                assert ticket is not None and (self.root / "queue" / ticket).is_file()
                (results_dir() / "heavy.bin").write_bytes(b"0" * 4096)
            mine = (f"ticket-{os.getpid()}-", f"beat-{os.getpid()}-")
            left = [name for name in os.listdir(self.root / "queue") if name.startswith(mine)]
            assert left == [], f"the ticket stayed: {left}"
            return str(ticket)

        def clean_own() -> int:
            cleanup.SYSTEM_BASES = ()  # the machine's /tmp and /dev/shm are not the stage's
            return main(["clean"])

        return {
            "join": lambda: main(["class", "joined"]),
            "step": step,
            "publish": put_on_wall,
            "heavy": heavy,
            "clean": clean_own,
            "wall-me": lambda: main(["class", "wall", "--me"]),
            "wall": lambda: main(["class", "wall"]),
        }[kind]

    def instructor_does(self, work: Callable[[], Any]) -> Outcome:
        """`work` as the instructor, with the armed races (the classmate swaps an entry for
        a link right before the command opens it as a folder), which it uses up."""
        armed, self.armed = self.armed, []
        swapper: list[Swapper] = []
        fired: list[str] = []

        def start(close: list[int]) -> None:
            if armed:
                swapper.append(Swapper(self.env(MATE), close))

        def racing() -> Any:
            real_open_dir = teardown.open_dir
            pending = {str(path): target for path, target in armed}

            def open_dir(path: Path | str, dir_fd: int | None = None) -> int:
                if dir_fd is not None:
                    where = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), str(path))
                    if where in pending:
                        answer = swapper[0].swap(Path(where), pending.pop(where))
                        fired.append(f"{where}: {answer}")
                return real_open_dir(path, dir_fd=dir_fd)

            setattr(teardown, "open_dir", open_dir)  # noqa: B010  # in the child only
            try:
                result = work()
            finally:
                if swapper:
                    swapper[0].stop()
            return (result, fired)

        done = as_user(self.instructor, self.env(self.instructor), racing, start)
        if done.kind == "ok":
            result, fired = done.value
            if fired:
                note(f"races fired: {fired}")
            return done._replace(value=result)
        return done

    # ---------------------------------------------------------------- the classmate

    def as_mate(self, work: Callable[[], Any]) -> str:
        """`work` as the classmate: "ok", or "refused" with the last line of why (the
        kernel's refusal of another's name in a sticky folder, a name taken already)."""
        done = as_user(MATE, self.env(MATE), work)
        why = (done.text.strip().splitlines() or [""])[-1]
        return "ok" if done.kind == "ok" else f"refused: {why}"

    def plant(self, folder: str, kind: str, name: str, target: str) -> str:
        path = self.root / folder / name
        aim = self.target(target)
        if kind == "hardlink":
            if not (Path(aim).is_file() and not Path(aim).is_symlink()):
                aim = str(self.decoy / "precious.txt")
            if aim == str(self.decoy / "sheet.txt"):  # world-writable: fs.protected_hardlinks
                return self.as_mate(lambda: os.link(aim, path))  # lets the classmate link it
            # Any other file: as a classmate could where fs.protected_hardlinks=0 (made by root).
            with contextlib.suppress(OSError):
                os.link(aim, path)
                return "made by root"
            return "refused"
        if kind.startswith("foreign-"):
            owner = {
                "foreign-bob": self.uid(BOB),
                "foreign-instructor": self.uid(self.instructor),
                "foreign-no-account": NO_ACCOUNT_UID,
            }[kind]
            with contextlib.suppress(OSError):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                os.write(fd, b'{"node": "n1"}')
                os.fchown(fd, owner, -1)
                os.close(fd)
                return "made by root"
            return "refused"
        return self.as_mate(lambda: make_entry(path, kind, aim))

    def squat(self, learner: str, pattern: str, kind: str) -> str:
        path = self.scratch / pattern.format(learner)
        target = {
            "link-own-lab": str(self.stage.home(learner) / "notes" / "old-run"),
            "link-decoy": self.target("decoy/marked"),
            "link-dangling": str(self.run / "nowhere"),
        }.get(kind, "")
        made = "link" if kind.startswith("link-") else kind
        return self.as_mate(lambda: make_entry(path, made, target))

    def junk(self, name: str, which: int) -> str:
        path = self.root / "wall" / name

        def write() -> None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as out:
                out.write(JUNK[which])

        return self.as_mate(write)

    def swap(self, folder: str, name: str, target: str) -> str:
        path, aim = self.root / folder / name, self.target(target)
        return self.as_mate(lambda: swap_for_link(path, aim))

    def race(self, folder: str, name: str, nested: bool, target: str) -> str:
        """A folder of the classmate's (with one inside) whose name, or the inner one's, they
        will swap for a link in the middle of the instructor's next command."""
        path = self.root / folder / name

        def make() -> None:
            with contextlib.suppress(FileExistsError):
                make_entry(path, "dir-777", self.target(target))

        said = self.as_mate(make)
        self.armed.append((path / "inner" if nested else path, self.target(target)))
        return said

    # ---------------------------------------------------------------- the evening

    def clean(self) -> None:
        """`class clean` as the instructor: it ends in its report or one sentence; nothing
        outside the class folder changed; it counts only the class's entries as freed; the
        class folder is gone, or what is left is what it names."""
        before, entries, races = self.outside(), len(self.inside()), len(self.armed)
        done = self.instructor_does(lambda: clean_class(self.root))
        note(f"clean: {done.kind} {done.text or done.value!r}")
        removed = done.kind == "ok" and done.value.folder_removed
        event(f"class clean: {done.kind}, the folder {'gone' if removed else 'stays'}")
        one_sentence(done, "class clean")
        assert changed(before, self.outside()) == []
        if done.kind == "lab":
            return
        freed: Freed = done.value
        # it measured the class, not what a link in it leads to (a race adds one link)
        assert freed.files <= entries + races, (freed.files, entries, races)
        if freed.folder_removed:
            assert not os.path.lexists(self.root) and freed.left == ()
            return
        assert freed.left, "the class folder stayed, and the clean did not say why"
        named = {left.split(" ")[0].split("/")[0] for left in freed.left}
        assert set(os.listdir(self.root)) <= named | {CLASS_MARKER}, (freed.left, named)

    def remove(self) -> None:
        """Everything the day made, whatever happened (as root)."""
        shutil.rmtree(self.run, ignore_errors=True)
        for learner in LEARNERS:
            shutil.rmtree(self.stage.home(learner) / "notes", ignore_errors=True)


def plant_notes(notes: Path) -> None:
    """A learner's notes in their home, with a folder their lab made for them (the worst
    case: a remover that followed a link there would find it provably the lab's)."""
    notes.mkdir(mode=0o700)
    (notes / "notes.txt").write_text("what I learned")
    make_private_dir(notes / "old-run", MADE_MARKER, MADE_MARKER_TEXT)
    (notes / "old-run" / "thesis.tex").write_text("years of work")


def make_entry(path: Path, kind: str, target: str) -> None:
    """What the classmate leaves at `path`: a link to `target`, a FIFO, a socket, a file, a
    folder (its mode last) holding a file, a link to `target`, a FIFO and a private folder,
    or a chain of folders deeper than clean follows with a link at its end."""
    if kind == "link":
        os.symlink(target, path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as bound:
            bound.bind(str(path))
    elif kind == "file":
        path.write_text("{}")
    elif kind == "dir-marked":  # hand-made: a marker of the classmate's proves nothing to another
        os.mkdir(path, 0o700)
        (path / MADE_MARKER).write_text(MADE_MARKER_TEXT)
    elif kind == "deep":
        os.mkdir(path)
        deepest = path
        for _ in range(teardown.MAX_DEPTH + 2):
            deepest /= "d"
            os.mkdir(deepest)
        os.symlink(target, deepest / "to")
    else:
        os.mkdir(path)
        (path / "file").write_text("theirs")
        os.symlink(target, path / "to")
        os.mkfifo(path / "fifo")
        os.mkdir(path / "inner", 0o700)
        (path / "inner" / "file").write_text("theirs")
        os.chmod(path, int(kind.removeprefix("dir-"), 8))


# --------------------------------------------------------------------------- the property


@pytest.mark.needs("users")
@pytest.mark.slow
@settings(
    max_examples=25,
    deadline=None,
    database=None,  # nothing written into the checkout
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(instructor=st.sampled_from(INSTRUCTORS), actions=st.lists(ACTION, max_size=12))
# The worst cases, always tried: a link from the learner's workspace name to a folder their lab
# made for them elsewhere; a link in queue/ to the instructor's class-marked folder, and a
# folder the classmate swaps for a link to the instructor's checkout during a reset; a chain
# of folders deeper than clean follows, and a private one the instructor cannot enter, with
# junk and a record claiming another learner's on the wall; hard links to the instructor's
# files under the names of a ticket and a learner's wall file, while a learner waits in turn.
@example(
    instructor=None,
    actions=[("squat", ANN, SQUAT_NAMES[0], "link-own-lab"), ("step", ANN), ("clean", ANN)],
)
@example(
    instructor=TEACHER,
    actions=[
        ("plant", "queue", "link", "x", "decoy/marked"),
        ("race", "wall", "x", True, "home/checkout"),
        ("reset", MATE),
    ],
)
@example(
    instructor=TEACHER,
    actions=[
        ("plant", "wall", "deep", "x", "decoy"),
        ("plant", "queue", "dir-700", "x", "notes-ann/old-run"),
        ("junk", f"{ANN}.json", 3),
        ("publish", ANN),
        ("wall",),
        ("wall-me", BOB),
    ],
)
@example(
    instructor=None,
    actions=[
        ("plant", "queue", "hardlink", "ticket-1-0123456789abcdef", "decoy/sheet.txt"),
        ("plant", "wall", "hardlink", f"{BOB}.json", "home/checkout/notes.md"),
        ("plant", "queue", "fifo", "beat-1-0123456789abcdef", "decoy"),
        ("heavy", ANN),
        ("publish", BOB),
        ("reset", BOB),
    ],
)
def test_after_any_class_day_clean_removes_the_class_and_nothing_else(
    stage: Stage, stand_ins: None, instructor: str | None, actions: list[tuple]
) -> None:
    day = ClassDay(stage, instructor)
    try:
        day.prepare()
        precious = day.precious()
        for action in actions:
            day.do(action)
            assert changed(precious, day.precious()) == [], action
        day.clean()
        assert changed(precious, day.precious()) == []
        proved = day.markers_still_prove()
        assert proved.kind == "ok" and proved.value == [True] * 4, proved
    finally:
        day.remove()


# --------------------------------------------------------------------------- found on the way


@pytest.mark.parametrize("command", ["setup", "clean"])
def test_a_folder_swapped_for_a_link_while_the_class_is_measured_is_not_walked(
    tmp_path: Path, quick_setup: None, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """The setup measures the class once queue/ and wall/ are the group's, and `class clean`
    before it closes them again. A classmate who swaps a folder of theirs there for a link,
    between the walk's look at it and its descent, must not send the walk along the link (to
    / if they like: a command that walks the whole machine, and counts it). Found while
    writing the test above; the swap is made certain where a walk could descend, by path
    (os.scandir, as iolab.measure.footprint walks) or by handle (open_dir)."""
    small_checkout(tmp_path / "checkout")
    monkeypatch.setattr(class_setup, "repo_root", lambda: tmp_path / "checkout")
    elsewhere = tmp_path / "elsewhere"
    for number in range(300):
        (elsewhere / f"d{number // 30}").mkdir(parents=True, exist_ok=True)
        (elsewhere / f"d{number // 30}" / f"f{number}").write_text("not the class's")
    root = tmp_path / "day"
    theirs = root / "wall" / "x"

    swapped: list[str] = []

    def swap() -> None:
        if not swapped:
            theirs.rename(theirs.with_name(".x-moved"))
            theirs.symlink_to(elsewhere)
            swapped.append(str(theirs))

    real_scandir, real_open_dir = os.scandir, teardown.open_dir

    def scandir(path: Any = ".") -> Any:
        if str(path).endswith("/wall/x"):
            swap()
        return real_scandir(path)

    def open_dir(path: Path | str, dir_fd: int | None = None) -> int:
        if str(path) == "x" and dir_fd is not None:
            swap()
        return real_open_dir(path, dir_fd=dir_fd)

    if command == "setup":
        real_share = class_setup.share_with_group

        def share_then_plant(fd: int, gid: int, mode: int = 0o2750, learners: Any = ()) -> None:
            real_share(fd, gid, mode, learners)
            if learners:  # the class folder's own call: queue/ and wall/ are the group's now
                theirs.mkdir()

        monkeypatch.setattr(class_setup, "share_with_group", share_then_plant)
    else:
        class_setup.setup_class(root, 2, say=lambda text: None)
        theirs.mkdir()
        entries = sum(1 for _ in root.rglob("*"))  # counted before the walk is hooked
    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(teardown, "open_dir", open_dir)
    if command == "setup":
        measured = class_setup.setup_class(root, 2, say=lambda text: None).files
        monkeypatch.setattr(os, "scandir", real_scandir)
        entries = sum(1 for _ in root.rglob("*")) - 1  # class.json, written after the walk
    else:
        freed = clean_class(root)
        measured = freed.files
        assert freed.folder_removed
    assert swapped, "the swap never happened"
    assert measured <= entries + 1, f"{measured} entries measured, the class had {entries}"
    assert sum(1 for _ in elsewhere.rglob("*")) == 310
