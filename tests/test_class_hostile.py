"""A class among strangers: a classmate who takes a learner's workspace name, a class folder
whose name is swapped for a link while it is set up or cleaned, a project folder that lets
the group rename what is in it, and whatever learners leave in the class's folders.

The races are made certain with the removers' in-process hook (iolab.core.owned's
before_delete) or a patched build step; the cases where another user's ownership is the
point run as real users (needs root, CI's part 5), as in tests/test_two_users.py.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from iolab.classmode import setup as class_setup
from iolab.classmode.bench import make_learners, remove_learners
from iolab.classmode.layout import CLASS_MARKER, CLASS_MARKER_TEXT
from iolab.classmode.letter import letter
from iolab.classmode.load import class_load
from iolab.classmode.preflight import check_class_dir, preflight
from iolab.classmode.teardown import clean_class, reset_learner
from iolab.core import owned
from iolab.core.class_folder import CLASS_ENV, CLASS_FILE, CLASS_SCHEMA, read_class
from iolab.core.class_queue import bounds
from iolab.core.errors import LabError
from iolab.core.markers import MADE_MARKER, MADE_MARKER_TEXT
from iolab.core.owned import write_marker
from iolab.core.workspace import user_name, workdir

ROOT = Path(__file__).resolve().parent.parent
LEARNER, CLASSMATE = "iolab-hostile-learner", "iolab-hostile-mate"
GROUP = "iolab-hostile-class"


def snapshot(top: Path) -> dict[str, object]:
    """Every entry below `top` with its content (or link target) and mode."""
    found: dict[str, object] = {}
    for path in sorted(top.rglob("*")):
        info = path.lstat()
        rel = str(path.relative_to(top))
        if stat.S_ISLNK(info.st_mode):
            found[rel] = "link:" + os.readlink(path)
        elif stat.S_ISREG(info.st_mode):
            found[rel] = (path.read_bytes(), stat.S_IMODE(info.st_mode), info.st_gid)
        else:
            found[rel] = ("dir", stat.S_IMODE(info.st_mode), info.st_gid)
    return found


def instructors_home(top: Path) -> Path:
    """A home holding what a path-following remover or sharer would find under the class's
    names: notes named like the class's files, and folders the instructor's lab provably made
    (so that even a remover that checks markers would delete them if it went there)."""
    home = top / "home"
    for name, text in (
        ("class.json", "my notes"),
        ("activate", "my script"),
        ("wall.html", "my page"),
        (".git/HEAD", "ref: main"),
        ("env/bin/tool", "mine"),
        ("lab/thesis.tex", "years of work"),
    ):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    write_marker(home / "env", CLASS_MARKER, CLASS_MARKER_TEXT)
    write_marker(home / "lab", MADE_MARKER, MADE_MARKER_TEXT)
    home.chmod(0o700)
    return home


# --------------------------------------------------------------------------- swaps


def test_a_class_folder_swapped_for_a_link_during_clean_deletes_nothing_outside_it(
    tmp_path: Path, quick_setup: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after `class clean` has checked the class folder, its name becomes a link to the
    instructor's home (anyone who may rename in its parent can do this). The clean goes on
    through the handle it checked: the class is emptied, the home is not touched."""
    home = instructors_home(tmp_path)
    before = snapshot(home)
    root = tmp_path / "project" / "day"
    root.parent.mkdir()
    class_setup.setup_class(root, 3, say=lambda text: None)
    parked = tmp_path / "project" / "parked"

    def swap(name: str) -> None:
        if not parked.exists():
            root.rename(parked)
            root.symlink_to(home)

    monkeypatch.setattr(owned, "before_delete", swap)
    freed = clean_class(root)
    assert parked.exists(), "the hook never ran"
    assert snapshot(home) == before
    assert os.listdir(parked) == []  # the class itself was removed, through the handle
    assert not freed.folder_removed and "name was moved or swapped" in freed.left[0]
    assert root.is_symlink()  # what the name leads to now is not the clean's to touch


def test_a_class_folder_swapped_for_a_link_during_setup_stops_in_one_sentence(
    tmp_path: Path, quick_setup: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The class folder's name becomes a link to the instructor's home while the datasets
    are built: the setup stops in one sentence, before writing or sharing anything more, and
    the home keeps its contents, modes and group."""
    home = instructors_home(tmp_path)
    before = snapshot(home)
    root = tmp_path / "project" / "day"
    root.parent.mkdir()
    parked = tmp_path / "project" / "parked"

    def swapped(root: Path) -> None:
        root.rename(parked)
        root.symlink_to(home)

    monkeypatch.setattr(class_setup, "build_data", swapped)
    with pytest.raises(LabError, match="was moved or replaced while the setup ran"):
        class_setup.setup_class(root, 3, say=lambda text: None)
    assert snapshot(home) == before
    assert not (parked / CLASS_FILE).exists() and not (parked / "activate").exists()
    assert stat.S_IMODE(parked.stat().st_mode) == 0o700  # never shared


# --------------------------------------------------------------------------- the parent


def _others_group() -> int | None:
    """A group that is not this user's private group, which this user may give a folder."""
    me = pwd.getpwuid(os.getuid()).pw_name
    mine = set(os.getgroups()) | {os.getgid()}
    return next(
        (
            group.gr_gid
            for group in grp.getgrall()
            if group.gr_name != me and (os.getuid() == 0 or group.gr_gid in mine)
        ),
        None,
    )


@pytest.mark.parametrize("mode", [0o2770, 0o777])
@pytest.mark.slow
def test_a_class_folder_others_may_rename_is_refused_and_class_preflight_says_so(
    tmp_path: Path, mode: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project folder writable by the group (or everyone) without the sticky bit lets a
    learner rename the class folder: setup refuses it in one sentence, before making
    anything, and `class preflight` reports it in the letter; the sticky bit makes it fine."""
    project = tmp_path / "project"
    project.mkdir()
    if mode & 0o070:
        gid = _others_group()
        if gid is None:
            pytest.skip("no group other than this user's own to give the folder")
        os.chown(project, -1, gid)
    project.chmod(mode)
    root = project / "day"
    # No interpreter to build from: were the folder accepted, the setup would stop at the
    # environment, in seconds, instead of building one.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab",
            "class",
            "setup",
            str(root),
            "--learners",
            "3",
            "--python",
            str(tmp_path / "no-python"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "without the sticky bit" in done.stderr and "chmod +t" in done.stderr
    assert os.listdir(project) == []
    monkeypatch.setenv("PATH", str(tmp_path))  # no strace, sshfs or sbatch to ask
    load = class_load(3)
    report = preflight(load, root)
    checked = next(check for check in report["checks"] if check["name"] == "class folder")
    assert checked["state"] == "fail" and "without the sticky bit" in checked["found"]
    text = letter(report, load, "teacher", "login1", "2026-12-01")
    assert f"| class folder | to fix | {project} is writable by" in text
    project.chmod(mode | stat.S_ISVTX)
    assert check_class_dir(root).state == "warn"  # only "does not exist yet"


# --------------------------------------------------------------------------- leftovers


def leave_everything(folder: Path, outside: Path) -> None:
    """What a learner can leave in the class's queue/ or wall/: a FIFO, a folder with a
    file, links to a file and a folder outside the class, a file."""
    os.mkfifo(folder / "fifo")
    (folder / "dir" / "deeper").mkdir(parents=True)
    (folder / "dir" / "deeper" / "file").write_text("x")
    (folder / "to-file").symlink_to(outside / "keep.txt")
    (folder / "to-folder").symlink_to(outside)
    (folder / "plain.json").write_text("{}")


@pytest.fixture
def left_everywhere(tmp_path: Path, quick_setup: None) -> tuple[Path, Path]:
    """A class whose queue/ and wall/ hold every kind of entry a learner can leave, with links
    to a folder outside it; the class and that folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the class's")
    root = tmp_path / "day"
    class_setup.setup_class(root, 3, say=lambda text: None)
    for name in ("queue", "wall"):
        leave_everything(root / name, outside)
    return root, outside


def test_clean_removes_learner_leftovers_of_every_type_without_following_them(
    left_everywhere: tuple[Path, Path],
) -> None:
    root, outside = left_everywhere
    freed = clean_class(root)
    assert (outside / "keep.txt").read_text() == "not the class's"
    assert freed.folder_removed and not root.exists() and freed.left == ()
    me = pwd.getpwuid(os.getuid()).pw_name
    for name in ("queue", "wall"):
        for entry, kind in (
            ("fifo", "FIFO"),
            ("dir", "folder"),
            ("to-file", "link"),
            ("to-folder", "link"),
            ("plain.json", "file"),
        ):
            assert f"{name}/{entry} (a {kind} of {me})" in freed.leftovers


def test_the_queue_bounds_the_instructor_sets_reach_every_learner(
    tmp_path: Path, quick_setup: None
) -> None:
    root = tmp_path / "day"
    class_setup.setup_class(root, 3, queue_bounds=(5.0, 60.0), say=lambda text: None)
    described = json.loads((root / CLASS_FILE).read_text())
    assert (described["queue_silent_s"], described["queue_turn_s"]) == (5.0, 60.0)
    assert bounds(root / "queue") == (5.0, 60.0)
    with pytest.raises(LabError, match=r"--queue-turn-s 5 is outside 10\.\.86400 seconds"):
        class_setup.setup_class(tmp_path / "other", 3, queue_bounds=(5.0, 5.0))
    assert not (tmp_path / "other").exists()  # refused before anything was made


def test_reset_removes_one_learners_entries_of_every_type_and_nothing_else(
    left_everywhere: tuple[Path, Path],
) -> None:
    root, outside = left_everywhere
    classmate = None
    if os.getuid() == 0:  # only root can leave a file of another user's here
        classmate = root / "wall" / "nobody.json"
        classmate.write_text("{}")
        os.chown(classmate, pwd.getpwnam("nobody").pw_uid, -1)
    class_files = sorted(path.name for path in root.iterdir())
    done = reset_learner(root, user_name())
    assert done.left == () and len(done.removed) == 10
    assert f"wall/to-folder (a link of {user_name()})" in done.removed
    assert (outside / "keep.txt").read_text() == "not the class's"
    assert sorted(os.listdir(root / "queue")) == [CLASS_MARKER]
    assert sorted(os.listdir(root / "wall")) == sorted(
        [CLASS_MARKER] + (["nobody.json"] if classmate else [])
    )
    assert sorted(path.name for path in root.iterdir()) == class_files  # the class stays
    with pytest.raises(LabError, match="'no-such-learner' is not a user on this machine"):
        reset_learner(root, "no-such-learner")


def test_what_clean_cannot_remove_is_reported_and_the_next_clean_finishes(
    tmp_path: Path, quick_setup: None
) -> None:
    """A learner's folder clean cannot empty (a mount inside, as root; a folder without
    write permission, as anyone else): the rest goes, what makes it a class for learners
    first, the marker stays, the CLI says what is left in one sentence; once fixed, the
    next clean finishes."""
    root = tmp_path / "day"
    class_setup.setup_class(root, 3, say=lambda text: None)
    stuck = root / "queue" / "stuck"
    stuck.mkdir()
    mounted = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "iolab-test", str(stuck)], capture_output=True
        ).returncode
        == 0
    )
    (stuck / "inside").write_text("x")
    if not mounted:
        if os.geteuid() == 0:
            pytest.skip("root here cannot mount a tmpfs, and nothing else stops root")
        stuck.chmod(0o500)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "iolab", "class", "clean", str(root)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "could not remove queue/stuck" in done.stderr, done.stderr
        assert "queue/stuck (a folder of" in done.stdout
        left = sorted(os.listdir(root))
        assert left == [CLASS_MARKER, "queue"], left  # no class.json, activate, env ...
        assert (stuck / "inside").read_text() == "x"
    finally:
        if mounted:
            subprocess.run(["umount", str(stuck)], check=True)
        else:
            stuck.chmod(0o700)
    freed = clean_class(root)
    assert freed.folder_removed and freed.left == ()


def test_a_clean_cut_short_leaves_a_class_nobody_can_join_and_the_next_finishes(
    tmp_path: Path, quick_setup: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted as it reaches the environment, a clean has already removed what joins
    learners to the class (class.json, activate): never an `activate` without its `env`."""
    root = tmp_path / "day"
    class_setup.setup_class(root, 3, say=lambda text: None)

    def interrupted(name: str) -> None:
        if name == "env":
            raise KeyboardInterrupt

    monkeypatch.setattr(owned, "before_delete", interrupted)
    with pytest.raises(KeyboardInterrupt):
        clean_class(root)
    assert not (root / CLASS_FILE).exists() and not (root / "activate").exists()
    assert (root / "env" / "bin" / "python").exists() and (root / CLASS_MARKER).exists()
    with pytest.raises(LabError, match="not a finished class folder"):
        read_class(root)
    monkeypatch.setattr(owned, "before_delete", None)
    assert clean_class(root).folder_removed and not root.exists()


@pytest.mark.parametrize("mode", [0o777, 0o1777])
def test_a_learner_does_not_trust_a_class_others_could_swap(
    joined: Path, tmp_path: Path, mode: int
) -> None:
    """A folder above the class opened to others after the setup: a classmate could rename
    the class away and put a class of their own (an `env` the learner then runs) in its
    place. Every learner command asks for the class first, and refuses it in one sentence;
    with the sticky bit, as /tmp has, nobody can rename another's folder and all is well."""
    tmp_path.chmod(mode)
    try:
        if mode & stat.S_ISVTX:
            assert workdir().parent == joined
        else:
            with pytest.raises(LabError) as refused:
                workdir()
            said = str(refused.value)
            assert said.startswith(f"{CLASS_ENV}={tmp_path / 'day'} cannot be trusted: ")
            assert f"{tmp_path} is writable by everyone without the sticky bit" in said
            assert "\n" not in said and said.endswith(f"unset {CLASS_ENV} to work on your own")
    finally:
        tmp_path.chmod(0o700)


# --------------------------------------------------------------------------- the workspace


@pytest.fixture
def joined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A class joined in this process, whose learners' workspaces go to $SCRATCH."""
    root = tmp_path / "day"
    root.mkdir()
    (root / CLASS_FILE).write_text(
        json.dumps(
            {
                "schema": CLASS_SCHEMA,
                "name": "day",
                "learners": 3,
                "slots": 1,
                "workspaces_in": "scratch",
                "made_by": "teacher",
            }
        )
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv(CLASS_ENV, str(root))
    monkeypatch.setenv("SCRATCH", str(scratch))
    monkeypatch.delenv("IOLAB_WORKDIR", raising=False)
    return scratch


@pytest.mark.parametrize("taken", ["link", "open-to-others", "unmarked"])
def test_a_workspace_name_that_is_not_a_private_lab_folder_gets_a_fallback(
    joined: Path, taken: str, tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    usual = joined / f"iolab-day-{user_name()}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if taken == "link":
        usual.symlink_to(elsewhere)
    else:
        usual.mkdir()
        if taken == "open-to-others":
            write_marker(usual, MADE_MARKER, MADE_MARKER_TEXT)
            usual.chmod(0o777)
    first = workdir()
    said = capfd.readouterr().err
    assert first != usual and first.parent == joined and first.name.startswith(usual.name + "-")
    assert said.count("\n") == 1 and "left it alone" in said
    assert stat.S_IMODE(first.stat().st_mode) == 0o700
    assert workdir() == first and capfd.readouterr().err == ""  # found again, said once
    assert os.listdir(elsewhere) == []


def test_a_new_workspace_is_made_private_and_marked_at_once(joined: Path) -> None:
    usual = joined / f"iolab-day-{user_name()}"
    assert workdir() == usual
    assert stat.S_IMODE(usual.stat().st_mode) == 0o700 and (usual / MADE_MARKER).is_file()


# --------------------------------------------------------------------------- real users


def user_ids(name: str) -> tuple[int, int]:
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


@pytest.fixture(scope="module")
def stage() -> Iterator[Path]:
    """A learner and a classmate in the class's group, a home each, a copy of iolab both can
    run, a shared scratch (world-writable and sticky, as a project's scratch often is) and a
    class folder that names it as the place of the workspaces."""
    top = Path(tempfile.mkdtemp(prefix="iolab-class-hostile-", dir="/tmp"))
    top.chmod(0o755)
    made = make_learners([LEARNER, CLASSMATE], GROUP, top)
    try:
        code = top / "code"
        code.mkdir()
        shutil.copytree(
            ROOT / "iolab", code / "iolab", ignore=shutil.ignore_patterns("__pycache__")
        )
        (code / "data_generators").mkdir()  # how iolab finds its checkout
        for path in [code, *code.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        (top / "scratch").mkdir()
        (top / "scratch").chmod(0o1777)
        root = top / "day"
        root.mkdir()
        (root / CLASS_FILE).write_text(
            json.dumps(
                {
                    "schema": CLASS_SCHEMA,
                    "name": "day",
                    "learners": 2,
                    "slots": 1,
                    "workspaces_in": "scratch",
                    "made_by": "teacher",
                }
            )
        )
        root.chmod(0o755)
        (root / CLASS_FILE).chmod(0o644)
        yield top
    finally:
        shutil.rmtree(top)
        remove_learners(made)


def as_user(stage: Path, name: str, code: str) -> subprocess.CompletedProcess:
    """Python `code` as user `name`, joined to the stage's class, iolab from the copy."""
    env = {
        "HOME": str(stage / name),
        "USER": name,
        "LOGNAME": name,
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(stage / "code"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "SCRATCH": str(stage / "scratch"),
        CLASS_ENV: str(stage / "day"),
    }
    return subprocess.run(
        [
            "runuser",
            "-u",
            name,
            "--",
            "env",
            "-i",
            *(f"{key}={value}" for key, value in env.items()),
            shutil.which("python3", path="/usr/bin:/bin"),
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


LEARNER_WRITES = """
from iolab.core.errors import run_cli
from iolab.core.lab_dirs import results_dir
from iolab.core.workspace import workdir
def main():
    (results_dir() / "result.txt").write_text("mine")
    print(workdir())
run_cli(main)
"""


@pytest.mark.needs("users")
@pytest.mark.parametrize("mode", [0o777, 0o755])
@pytest.mark.slow
def test_a_classmate_who_takes_my_workspace_name_gets_nothing_of_mine(
    stage: Path, mode: int
) -> None:
    """The classmate makes $SCRATCH/iolab-<class>-<learner> first: open to all (they could
    swap what the learner writes there for links) or closed to the learner. The learner's
    lab works in a private folder of its own beside it, says so once, finds it again, and
    `clean` removes it; nothing is written into the classmate's folder."""
    taken = stage / "scratch" / f"iolab-day-{LEARNER}"
    made = as_user(
        stage, CLASSMATE, f"import os; os.mkdir({str(taken)!r}); os.chmod({str(taken)!r}, {mode})"
    )
    assert made.returncode == 0, made.stderr
    try:
        first = as_user(stage, LEARNER, LEARNER_WRITES)
        assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr
        mine = Path(first.stdout.strip())
        assert mine.parent == taken.parent and mine.name.startswith(taken.name + "-")
        assert first.stderr.count("\n") == 1 and "left it alone" in first.stderr
        info = mine.stat()
        assert info.st_uid == user_ids(LEARNER)[0] and stat.S_IMODE(info.st_mode) == 0o700
        assert (mine / "lab" / "result.txt").read_text() == "mine"
        assert os.listdir(taken) == [] and taken.stat().st_uid == user_ids(CLASSMATE)[0]
        again = as_user(stage, LEARNER, LEARNER_WRITES)
        assert again.returncode == 0 and again.stdout.strip() == str(mine), again.stderr
        assert again.stderr == ""
        cleaned = as_user(
            stage,
            LEARNER,
            "import iolab.core.cleanup as c; c.SYSTEM_BASES = (); "
            "import sys; sys.argv[1:] = ['clean']; from iolab.cli import run; run()",
        )
        assert cleaned.returncode == 0 and "Traceback" not in cleaned.stderr, cleaned.stderr
        assert not mine.exists() and os.listdir(taken) == []
    finally:
        shutil.rmtree(taken)


@pytest.mark.needs("users")
def test_a_real_learners_leftovers_are_removed_and_named(tmp_path: Path, quick_setup: None) -> None:
    """A learner of the class's group leaves a FIFO, a private folder with a file and links
    out of the class in queue/ and wall/; the instructor's clean (root here) removes them all
    without following a link, and names each with its owner."""
    top = Path(tempfile.mkdtemp(prefix="iolab-class-leftovers-", dir="/tmp"))
    top.chmod(0o755)
    made = make_learners([LEARNER], GROUP, top)
    try:
        outside = top / "outside"
        outside.mkdir()
        (outside / "keep.txt").write_text("the instructor's")
        root = top / "day"
        class_setup.setup_class(root, 1, group=GROUP, say=lambda text: None)
        for name in ("queue", "wall"):
            folder = root / name
            left = as_user_plain(
                top,
                LEARNER,
                f"""
import os
os.mkfifo({str(folder / "fifo")!r})
os.mkdir({str(folder / "dir")!r}, 0o700)
open({str(folder / "dir" / "file")!r}, 'w').write('x')
os.symlink({str(outside / "keep.txt")!r}, {str(folder / "to-file")!r})
os.symlink({str(outside)!r}, {str(folder / "to-folder")!r})
""",
            )
            assert left.returncode == 0, left.stderr
        freed = clean_class(root)
        assert (outside / "keep.txt").read_text() == "the instructor's"
        assert freed.folder_removed and freed.left == (), freed.left
        for name in ("queue", "wall"):
            for entry, kind in (
                ("fifo", "FIFO"),
                ("dir", "folder"),
                ("to-file", "link"),
                ("to-folder", "link"),
            ):
                assert f"{name}/{entry} (a {kind} of {LEARNER})" in freed.leftovers
    finally:
        shutil.rmtree(top)
        remove_learners(made)


def as_user_plain(top: Path, name: str, code: str) -> subprocess.CompletedProcess:
    """Python `code` as user `name`, without the lab."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    return subprocess.run(
        ["runuser", "-u", name, "--", python, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=top,
    )
