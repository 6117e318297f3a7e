"""Two ordinary users on one machine, as on a login node: one runs the lab, the other owns,
links or swaps the per-user places in a shared, world-writable folder (a /tmp of their own).

Needs root to create the users and to switch between them (CI's part 5); elsewhere skipped
with the reason. The users run `clean` and the per-user place code with the interpreter's
standard library only (as `make clean` does), from a copy of iolab/ that both can read.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from iolab.core.markers import LOCATION_MARKER

pytestmark = pytest.mark.needs("users")

ROOT = Path(__file__).resolve().parent.parent
RUNNER, OTHER = "iolab-runner", "iolab-other"


def user_ids(name: str) -> tuple[int, int]:
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


@pytest.fixture(scope="module")
def stage() -> Path:
    """A folder both users can read: the code, a shared sticky folder (their /tmp), a home each."""
    for name in (RUNNER, OTHER):
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)
    top = Path(tempfile.mkdtemp(prefix="iolab-two-users-", dir="/tmp"))
    top.chmod(0o755)
    code = top / "code"
    code.mkdir()
    shutil.copytree(ROOT / "iolab", code / "iolab", ignore=shutil.ignore_patterns("__pycache__"))
    (code / "data_generators").mkdir()  # how iolab finds its checkout
    for path in [code, *code.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    shared = top / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    for name in (RUNNER, OTHER):
        home = top / name
        home.mkdir()
        os.chown(home, *user_ids(name))
        home.chmod(0o700)
    yield top
    shutil.rmtree(top)


def as_user(stage: Path, name: str, code: str, **env: str) -> subprocess.CompletedProcess:
    """Run Python `code` as user `name`, with the shared folder as its TMPDIR."""
    base_env = {
        "HOME": str(stage / name),
        "USER": name,
        "LOGNAME": name,
        "PATH": "/usr/bin:/bin",
        "TMPDIR": str(stage / "shared"),
        "PYTHONPATH": str(stage / "code"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "IOLAB_WORKDIR": str(stage / name / "ws"),
    }
    python = shutil.which("python3", path="/usr/bin:/bin")
    return subprocess.run(
        [
            "runuser",
            "-u",
            name,
            "--",
            "env",
            "-i",
            *(f"{k}={v}" for k, v in {**base_env, **env}.items()),
            python,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def clean_as(stage: Path, name: str, **env: str) -> subprocess.CompletedProcess:
    """`python -m iolab clean` as `name`, /tmp and /dev/shm left out (the shared folder
    stands in for them, so the machine's real ones are never touched)."""
    return as_user(
        stage,
        name,
        "import iolab.core.cleanup as c; c.SYSTEM_BASES = (); "
        "import sys; sys.argv[1:] = ['clean']; from iolab.cli import run; run()",
        **env,
    )


def snapshot(root: Path) -> dict[str, bytes | str]:
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            found[rel] = path.read_bytes()
        else:
            found[rel] = "dir"
    return found


def place(stage: Path, name: str) -> Path:
    """The predictable per-user place of `name` in the shared folder."""
    return stage / "shared" / f"iolab-{name}"


def assert_fine(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "chmod" not in proc.stderr + proc.stdout


@pytest.fixture
def fresh(stage: Path):
    """Empty the shared folder and the homes after each test."""
    yield stage
    for sub in ("shared", RUNNER, OTHER):
        for path in (stage / sub).iterdir():
            if not path.is_symlink() and path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()


@pytest.mark.slow
def test_another_users_folder_by_my_name_is_never_entered(fresh: Path) -> None:
    """The other user takes iolab-<runner> first and marks it the way the lab would."""
    taken = place(fresh, RUNNER)
    made = as_user(
        fresh,
        OTHER,
        f"""
from iolab.core.owned import make_private_dir
from pathlib import Path
p = Path({str(taken)!r})
make_private_dir(p, {LOCATION_MARKER!r}, "a marker of the other user")
(p / "their-results.txt").write_text("theirs")
p.chmod(0o777)
""",
    )
    assert made.returncode == 0, made.stderr
    before = snapshot(taken)
    assert_fine(clean_as(fresh, RUNNER))
    assert snapshot(taken) == before
    probe = as_user(
        fresh,
        RUNNER,
        f"""
from iolab.core.workspace import make_location_dir
from pathlib import Path
print(make_location_dir(Path({str(taken)!r})))
""",
    )
    assert_fine(probe)
    mine = Path(probe.stdout.strip())
    assert mine != taken and mine.parent == taken.parent
    assert probe.stderr.count("\n") == 1 and "left it alone" in probe.stderr
    assert mine.stat().st_uid == user_ids(RUNNER)[0] and mine.stat().st_mode & 0o777 == 0o700
    assert_fine(clean_as(fresh, RUNNER))
    assert not mine.exists() and snapshot(taken) == before


@pytest.fixture
def protected_symlinks() -> Iterator[None]:
    """fs.protected_symlinks=1, most distributions' default (systemd's 50-default.conf): in a
    sticky world-writable folder a link is followed only by its owner or the folder's."""
    setting = Path("/proc/sys/fs/protected_symlinks")
    before = setting.read_text()
    setting.write_text("1")
    try:
        yield
    finally:
        setting.write_text(before)


@pytest.mark.parametrize("target", ["dangling", "to-a-folder-of-the-other"])
def test_another_users_link_by_my_name_under_protected_symlinks(
    fresh: Path, target: str, protected_symlinks: None
) -> None:
    """Following the link fails (EACCES) for the runner, however it points: the lab works in a
    private folder beside it and says so in one sentence, and `clean` leaves the link alone."""
    name = place(fresh, RUNNER)
    theirs = fresh / "shared" / "their-folder"
    to = "/nonexistent/x" if target == "dangling" else str(theirs)
    planted = as_user(
        fresh, OTHER, f"import os; os.makedirs({str(theirs)!r}); os.symlink({to!r}, {str(name)!r})"
    )
    assert planted.returncode == 0, planted.stderr
    probe = as_user(
        fresh,
        RUNNER,
        f"""
from iolab.core.workspace import location_dir, make_location_dir
from pathlib import Path
made = make_location_dir(Path({str(name)!r}))
assert location_dir(made.parent) == made
print(made)
""",
    )
    assert_fine(probe)
    mine = Path(probe.stdout.strip())
    assert mine != name and mine.parent == name.parent
    assert probe.stderr.count("\n") == 1 and "left it alone" in probe.stderr
    assert_fine(clean_as(fresh, RUNNER))
    assert not mine.exists() and os.readlink(name) == to and list(theirs.iterdir()) == []


@pytest.mark.parametrize("planted", ["link-to-home", "file", "fifo"])
@pytest.mark.slow
def test_what_another_user_plants_by_my_name_leads_nowhere(fresh: Path, planted: str) -> None:
    """A link from the runner's predictable name to a place of the runner's own that the lab
    made and marked for the runner elsewhere (so a remover that followed the link would find
    it provably the lab's and delete it), a file, or a FIFO in its place."""
    made = as_user(
        fresh,
        RUNNER,
        f"""
from pathlib import Path
from iolab.core.workspace import make_location_dir
keep = Path({str(fresh / RUNNER / "keep")!r})
keep.mkdir()
place = make_location_dir(keep / "iolab-{RUNNER}")
(place / "thesis.tex").write_text("years of work")
""",
    )
    assert made.returncode == 0, made.stderr
    home = fresh / RUNNER
    before = snapshot(home)
    name = place(fresh, RUNNER)
    target = home / "keep" / f"iolab-{RUNNER}"
    plant = {
        "link-to-home": f"os.symlink({str(target)!r}, {str(name)!r})",
        "file": f"open({str(name)!r}, 'w').write('x')",
        "fifo": f"os.mkfifo({str(name)!r})",
    }[planted]
    assert as_user(fresh, OTHER, f"import os; {plant}").returncode == 0
    assert_fine(clean_as(fresh, RUNNER, IOLAB_WORKDIR=str(fresh / "elsewhere")))
    assert snapshot(home) == before and os.path.lexists(name)


def test_a_swap_between_check_and_delete_deletes_nothing_else(fresh: Path) -> None:
    """The runner's own place, paused by the remover's hook right after its check; then (as
    root, who alone may rename another's entry in a sticky folder) it is swapped for a link
    to the runner's files. The delete goes on through the handle it checked."""
    hooks = fresh / RUNNER / "hooks"
    hooks.mkdir()
    os.chown(hooks, *user_ids(RUNNER))
    made = as_user(
        fresh,
        RUNNER,
        f"""
from iolab.core.workspace import make_location_dir
from pathlib import Path
p = make_location_dir(Path({str(place(fresh, RUNNER))!r}))
(p / "scratch.bin").write_bytes(b"0" * 4096)
keep = Path({str(fresh / RUNNER / "keep")!r})
keep.mkdir()
(keep / "thesis.tex").write_text("years of work")
""",
    )
    assert made.returncode == 0, made.stderr
    name = place(fresh, RUNNER)
    (hooks / f"pause-{name.name}").touch()
    keep_before = snapshot(fresh / RUNNER / "keep")
    env = {
        "HOME": str(fresh / RUNNER),
        "USER": RUNNER,
        "PATH": "/usr/bin:/bin",
        "TMPDIR": str(fresh / "shared"),
        "PYTHONPATH": str(fresh / "code"),
        "IOLAB_WORKDIR": str(fresh / "elsewhere"),
        "IOLAB_TEST_PAUSE_DIR": str(hooks),
    }
    proc = subprocess.Popen(
        [
            "runuser",
            "-u",
            RUNNER,
            "--",
            "env",
            "-i",
            *(f"{k}={v}" for k, v in env.items()),
            shutil.which("python3", path="/usr/bin:/bin"),
            "-c",
            "import iolab.core.cleanup as c; c.SYSTEM_BASES = (); import sys; "
            "sys.argv[1:] = ['clean']; from iolab.cli import run; run()",
        ],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not (hooks / f"paused-{name.name}").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    parked = fresh / "shared" / "parked"
    name.rename(parked)
    name.symlink_to(fresh / RUNNER / "keep")
    (hooks / f"resume-{name.name}").touch()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert snapshot(fresh / RUNNER / "keep") == keep_before
    assert list(parked.iterdir()) == []


def test_the_runners_files_are_private_whatever_the_umask(fresh: Path) -> None:
    """Folders the lab makes in a shared place are 0700 and its files 0600, even under
    umask 022; the other user can list none of them."""
    made = as_user(
        fresh,
        RUNNER,
        f"""
import os, sys
os.umask(0o022)
from pathlib import Path
from iolab.core.workspace import make_location_dir
from iolab.core.errors import run_cli
def main():
    p = make_location_dir(Path({str(place(fresh, RUNNER))!r}))
    (p / "result.json").write_text("{{}}")
    print(p)
run_cli(main)
""",
    )
    assert made.returncode == 0, made.stderr
    folder = Path(made.stdout.strip())
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / "result.json").stat().st_mode & 0o777 == 0o600
    peek = as_user(fresh, OTHER, f"import os; print(os.listdir({str(folder)!r}))")
    assert peek.returncode != 0 and "PermissionError" in peek.stderr


def test_another_users_file_inside_a_lab_folder_is_named_not_deleted(fresh: Path) -> None:
    """The runner opened a lab folder to everyone (chmod 777) and the other user dropped a
    file in it: `clean` deletes everything else, keeps that file and the folder's marker (so
    a later `clean` finishes the job), and says so in one sentence."""
    made = as_user(
        fresh,
        RUNNER,
        """
from iolab.core.lab_dirs import ensure_writable_dir
from iolab.core.workspace import workdir
shared = ensure_writable_dir(workdir() / "dataset")
(shared / "mine.csv").write_text("1")
for opened in (workdir().parent, workdir()):
    opened.chmod(0o711)
shared.chmod(0o777)
(ensure_writable_dir(workdir() / "lab") / "result.csv").write_text("2")
""",
    )
    assert made.returncode == 0, made.stderr
    dataset = fresh / RUNNER / "ws" / "dataset"
    dropped = as_user(fresh, OTHER, f"open({str(dataset / 'theirs.txt')!r}, 'w').write('x')")
    assert dropped.returncode == 0, dropped.stderr
    proc = clean_as(fresh, RUNNER)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "theirs.txt" in proc.stderr
    assert sorted(p.name for p in dataset.iterdir()) == [".iolab-made", "theirs.txt"]
    assert not (fresh / RUNNER / "ws" / "lab").exists()
