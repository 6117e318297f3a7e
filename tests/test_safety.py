"""Nothing lost, nothing false: every command that deletes, writes a result or reads data.

Guards the promises of issue 11 for the whole toolkit, one test id per command x case:

(a) a user's own files beside (and inside) the places the lab writes survive every command;
(b) two runs at once: each either succeeds or says "another run is writing" in one sentence,
    the result on disk verifies, and nobody reports success for what is not there;
(c) SIGINT and SIGTERM at a seeded random moment, repeated: afterwards there is the old or
    the complete new result or none, never a half result that passes as complete, no
    `.partial` leftovers, one sentence on stderr, and a rerun succeeds;
(d) a damaged input (deleted file, changed byte, truncated data.tar, empty or half CSV,
    corrupted checkpoint) is one `error:` sentence with a non-zero exit, never a traceback;
(e) a read-only place: a path under a file (works as root too), and chmod a-w (skipped as
    root, for whom chmod does not stop writes) -- a valid result there is still used.

Commands: `python -m iolab clean` (deletes), data_generators/{generate_data, create_archive,
make_shards, make_images}.py and `python -m iolab sweep --csv` (write), demos/read_*.py
(`--order-out` writes too) and iolab.ml.checkpoint.load_checkpoint (read). Datasets are small
(300 files); the whole file takes well under a minute and a half on two cores.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from processes import processes_naming

from iolab.core.errors import LabError
from iolab.core.lab_dirs import ensure_writable_dir
from iolab.core.markers import MADE_MARKER
from iolab.core.workspace import WorkspaceEntry
from iolab.hpc.mpiio import STOP_TIMEOUT_S
from iolab.ml import checkpoint as ck

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
FILES = 300
IS_ROOT = os.geteuid() == 0
not_as_root = pytest.mark.skipif(
    IS_ROOT, reason="as root chmod a-w does not stop writes; the path-under-a-file cases cover root"
)
BUSY = "another run is writing"
# `clean` also removes marked iolab-<user> folders in /tmp and /dev/shm; a test must not take
# those from a lab run going on beside it, so the command runs with that one step disabled.
CLEAN = [
    "-c",
    "import iolab.core.cleanup as c; c.location_dirs = lambda: []; "
    "import sys; sys.argv[1:] = ['clean']; from iolab.cli import run; run()",
]


# --------------------------------------------------------------------------- helpers


def command(name: str, *args: str | Path) -> list[str]:
    """argv of a lab script (path relative to the checkout) or of `python -m iolab ...`."""
    if name == "iolab":
        return [PY, "-m", "iolab", *map(str, args)]
    if name == "clean":
        return [PY, *CLEAN]
    return [PY, str(ROOT / name), *map(str, args)]


def run(argv: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def start(argv: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def assert_one_error(proc, *, starts: str = "error:") -> None:
    """A refusal: non-zero exit, one line on stderr starting `starts`, no traceback."""
    err = proc.stderr.strip() if isinstance(proc.stderr, str) else proc.stderr
    assert proc.returncode != 0, f"exit 0 though it should have failed:\n{proc.stdout}"
    assert "Traceback" not in err, err
    assert err.startswith(starts) and len(err.splitlines()) == 1, err


def assert_ok(proc) -> None:
    assert proc.returncode == 0, f"{proc.args}\n{proc.stdout}\n{proc.stderr}"


def snapshot(root: Path) -> dict[str, str]:
    """Every file below `root` with a hash of its bytes."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def leftovers(root: Path) -> list[str]:
    return [
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if "partial" in p.name or p.name.startswith(".data.replaced")
    ]


def place_user_files(*folders: Path) -> dict[Path, str]:
    """A user's own notes in each folder; returns what must still be there, byte for byte."""
    mine = {}
    for n, folder in enumerate(folders):
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("notes.txt", "manifest.json.bak", ".hidden-thesis.tex"):
            mine[folder / name] = f"user data {n} {name}\n"
    for path, text in mine.items():
        path.write_text(text)
    return mine


def assert_user_files_intact(mine: dict[Path, str]) -> None:
    for path, text in mine.items():
        assert path.is_file() and path.read_text() == text, f"{path} was changed or deleted"


def verify_dataset(d: Path) -> subprocess.CompletedProcess:
    return run(command("data_generators/generate_data.py", "--data", d, "--verify"))


@pytest.fixture(scope="session")
def template(tmp_path_factory) -> Path:
    """A 300-file dataset with archive and shards, copied by each test that changes one."""
    d = tmp_path_factory.mktemp("safety-template") / "dataset"
    assert_ok(
        run(command("data_generators/generate_data.py", "--data", d, "--files", FILES, "--quiet"))
    )
    assert_ok(run(command("data_generators/create_archive.py", "--data", d)))
    assert_ok(
        run(command("data_generators/make_shards.py", "--data", d, "--samples-per-shard", 50))
    )
    return d


@pytest.fixture
def dataset(template: Path, tmp_path: Path) -> Path:
    d = tmp_path / "dataset"
    shutil.copytree(template, d, symlinks=True)
    return d


# --------------------------------------------------------------------------- the writers


def writer_argv(name: str, d: Path, variant: int = 0) -> list[str]:
    """The command that writes `name`'s result for the dataset folder `d`; variants differ."""
    if name == "generate":
        return command(
            "data_generators/generate_data.py",
            "--data",
            d,
            "--files",
            FILES,
            "--quiet",
            "--seed",
            1 + variant,
        )
    if name == "archive":
        return command("data_generators/create_archive.py", "--data", d)
    if name == "shards":
        return command(
            "data_generators/make_shards.py",
            "--data",
            d,
            "--out",
            d / "shards",
            "--samples-per-shard",
            50 + 10 * variant,
        )
    if name == "images":
        return command(
            "data_generators/make_images.py",
            "--data",
            d.parent / "images",
            "--count",
            12,
            "--sample-kb",
            100,
            "--shard-mb",
            0.5,
            "--seed",
            1 + variant,
        )
    if name == "sweep-csv":
        return command(
            "iolab",
            "sweep",
            "--directory",
            d.parent / "sweep",
            "--min",
            "4K",
            "--max",
            "4K",
            "--repeats",
            1,
            "--csv",
            d.parent / "sweep.csv",
        )
    if name == "order-out":
        return command(
            "demos/read_archive_random.py",
            "--data",
            d,
            "--order-out",
            d.parent / "order.txt",
            "--seed",
            1 + variant,
        )
    raise ValueError(name)


def writer_input(name: str, d: Path) -> None:
    """Take away the result `name` writes, so the run has to write it."""
    if name == "archive":
        (d / "data.tar").unlink()
        (d / "archive.json").unlink()
    elif name == "shards":
        shutil.rmtree(d / "shards")
    elif name == "generate":
        shutil.rmtree(d)
    elif name == "sweep-csv":
        (d.parent / "sweep").mkdir()


def writer_verifies(name: str, d: Path) -> bool:
    """Whether the result of `name` is on disk and checks out (False: not there or broken)."""
    if name == "generate":
        return verify_dataset(d).returncode == 0
    if name == "archive":
        return verify_dataset(d).returncode == 0 and (d / "data.tar").exists()
    if name == "shards":
        return (
            run(
                command(
                    "data_generators/make_shards.py", "--data", d, "--out", d / "shards", "--verify"
                )
            ).returncode
            == 0
        )
    if name == "images":
        return (
            run(
                command("data_generators/make_images.py", "--data", d.parent / "images", "--verify")
            ).returncode
            == 0
        )
    if name == "sweep-csv":
        lines = (d.parent / "sweep.csv").read_text().splitlines()
        return len(lines) > 1 and "file_size" in lines[0]
    if name == "order-out":
        return len((d.parent / "order.txt").read_text().splitlines()) == FILES
    raise ValueError(name)


def result_exists(name: str, d: Path) -> bool:
    """Whether anything claims to be `name`'s complete result (its proof file is there)."""
    proof = {
        "generate": d / "manifest.json",
        "archive": d / "archive.json",
        "shards": d / "shards" / "shards.json",
        "images": d.parent / "images" / "manifest.json",
        "sweep-csv": d.parent / "sweep.csv",
        "order-out": d.parent / "order.txt",
    }[name]
    return proof.exists()


WRITERS = [
    "generate",
    "archive",
    "shards",
    "images",
    "order-out",
    pytest.param("sweep-csv", marks=pytest.mark.slow),
]


# --------------------------------------------------------------------------- (a) the user's files


@pytest.mark.parametrize("name", WRITERS)
@pytest.mark.slow
def test_writer_leaves_the_users_files_alone(name: str, dataset: Path) -> None:
    writer_input(name, dataset)
    beside = place_user_files(dataset.parent, dataset.parent / "mine")
    inside = place_user_files(dataset) if name != "generate" else {}
    assert_ok(run(writer_argv(name, dataset)))
    assert writer_verifies(name, dataset)
    assert_user_files_intact({**beside, **inside})


def test_generate_into_a_users_folder_keeps_the_users_files(tmp_path: Path) -> None:
    d = tmp_path / "my-folder"
    mine = place_user_files(d, d / "data-notes")
    assert_ok(run(writer_argv("generate", d)))
    assert verify_dataset(d).returncode == 0
    assert_user_files_intact(mine)


def test_generate_refuses_a_data_folder_it_did_not_write(tmp_path: Path) -> None:
    d = tmp_path / "my-folder"
    mine = place_user_files(d, d / "data")
    assert_one_error(run(writer_argv("generate", d)))
    assert_user_files_intact(mine)


@pytest.mark.parametrize(
    "reader",
    [
        "read_files",
        "read_files_naive",
        "read_archive",
        "read_archive_random",
        "read_random_chunked",
    ],
)
@pytest.mark.slow
def test_reader_changes_nothing(reader: str, dataset: Path) -> None:
    mine = place_user_files(dataset.parent)
    before = snapshot(dataset.parent)
    proc = run(command(f"demos/{reader}.py", "--data", dataset))
    assert_ok(proc)
    assert "Mean activity_level" in proc.stdout
    assert snapshot(dataset.parent) == before
    assert_user_files_intact(mine)


#: A user's own folders that happen to carry the names of the workspace's entries, and one more.
USER_FOLDERS = [*(entry.dirname for entry in WorkspaceEntry), "projects"]


def test_clean_removes_every_workspace_entry_the_lab_made(tmp_path: Path) -> None:
    home = tmp_path / "home"
    mine = place_user_files(home / "projects")
    for entry in WorkspaceEntry:
        made = ensure_writable_dir(home / entry.dirname)  # as every writer makes its entry
        (made / "result.txt").write_text(entry.holds)
    assert_ok(run(command("clean"), {"IOLAB_WORKDIR": str(home)}))
    assert sorted(p.name for p in home.iterdir()) == ["projects"]
    assert_user_files_intact(mine)


def test_clean_deletes_only_what_the_lab_made(tmp_path: Path) -> None:
    home = tmp_path / "home"
    mine = place_user_files(home, *(home / name for name in USER_FOLDERS))
    (home / "mnt" / "empty-mount-point").mkdir()
    env = {"IOLAB_WORKDIR": str(home)}
    assert_ok(run(writer_argv("generate", home / "lab-made")))
    made = ensure_writable_dir(home / "tmp" / "scratch")  # a lab folder inside a user's one
    (made / "x").write_text("scratch")
    proc = run(command("clean"), env)
    assert_ok(proc)
    assert "Traceback" not in proc.stderr
    assert_user_files_intact(mine)
    assert (home / "mnt" / "empty-mount-point").is_dir() and home.is_dir()
    assert not (home / "lab-made").exists() and (home / "tmp").is_dir()
    assert "left alone" in proc.stdout


# --------------------------------------------------------------------------- (b) two runs at once


def both_at_once(first: list[str], second: list[str]) -> list[subprocess.CompletedProcess]:
    procs = [start(first), start(second)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def assert_success_or_busy(results: list[subprocess.CompletedProcess]) -> list[int]:
    """Each run succeeded or said another run is writing; returns the indices that succeeded."""
    ok = []
    for i, proc in enumerate(results):
        if proc.returncode == 0:
            ok.append(i)
        else:
            assert_one_error(proc)
            assert BUSY in proc.stderr, proc.stderr
    assert ok, "neither run succeeded"
    return ok


@pytest.mark.parametrize("name", WRITERS)
@pytest.mark.slow
def test_two_writers_at_once(name: str, dataset: Path) -> None:
    writer_input(name, dataset)
    if name == "order-out":
        results = both_at_once(writer_argv(name, dataset, 0), writer_argv(name, dataset, 1))
        assert [r.returncode for r in results] == [0, 0]  # readers need no lock
        assert writer_verifies(name, dataset) and not leftovers(dataset.parent)
        return
    results = both_at_once(writer_argv(name, dataset, 0), writer_argv(name, dataset, 1))
    ok = assert_success_or_busy(results)
    assert writer_verifies(name, dataset), [r.stdout + r.stderr for r in results]
    assert not leftovers(dataset.parent)
    if name == "generate":  # the dataset on disk is one that a successful run reported
        expected = verify_dataset(dataset).stdout.rsplit("expected mean ", 1)[1].strip()
        assert any(f"Expected mean activity_level: {expected}" in results[i].stdout for i in ok)


def test_two_generators_with_different_sizes_leave_one_valid_dataset(tmp_path: Path) -> None:
    d = tmp_path / "dataset"
    small = command("data_generators/generate_data.py", "--data", d, "--files", 200, "--quiet")
    large = command("data_generators/generate_data.py", "--data", d, "--files", 1500, "--quiet")
    results = both_at_once(large, small)
    ok = assert_success_or_busy(results)
    check = verify_dataset(d)
    assert check.returncode == 0, check.stdout
    count = int(check.stdout.split(" OK, ")[1].split()[0])
    assert any(f": {count} files" in results[i].stdout for i in ok)


@pytest.mark.parametrize("reader", ["read_files", "read_archive"])
@pytest.mark.slow
def test_a_reader_during_a_regeneration_is_right_or_refuses(reader: str, dataset: Path) -> None:
    means = {
        run(writer_argv("generate", dataset.parent / f"ref{seed}", seed - 1))
        .stdout.rsplit(": ", 1)[1]
        .strip()
        for seed in (1, 2)
    }
    regenerate = command(
        "data_generators/generate_data.py",
        "--data",
        dataset,
        "--files",
        3000,
        "--quiet",
        "--seed",
        2,
    )
    results = both_at_once(regenerate, command(f"demos/{reader}.py", "--data", dataset))
    assert_ok(results[0])
    read = results[1]
    if read.returncode == 0:
        mean = read.stdout.rsplit("Mean activity_level: ", 1)[1].strip()
        expected = verify_dataset(dataset).stdout  # the 3000-file mean, or one of the old ones
        assert mean in means or mean in expected, read.stdout
    else:
        assert_one_error(read)


def test_two_cleans_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    mine = place_user_files(home, home / "tmp")
    for n in range(30):
        made = ensure_writable_dir(home / f"lab-{n}") / "a" / "b"
        made.mkdir(parents=True)
        for i in range(20):
            (made / f"f{i}").write_text("x")
    env = {**os.environ, "IOLAB_WORKDIR": str(home)}
    procs = [
        subprocess.Popen(
            command("clean"),
            cwd=ROOT,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "Traceback" not in err, err
    assert_user_files_intact(mine)
    assert sorted(p.name for p in home.iterdir()) == [
        ".hidden-thesis.tex",
        "manifest.json.bak",
        "notes.txt",
        "tmp",
    ]


def test_clean_tolerates_an_entry_deleted_under_it(tmp_path: Path, monkeypatch, capsys) -> None:
    """The window two cleans race in, made certain: an entry vanishes right after the check
    that it is the lab's. Clean must go on, and not list it as left alone."""
    from iolab.core import cleanup, owned

    home = tmp_path / "home"
    monkeypatch.setenv("IOLAB_WORKDIR", str(home))  # first: the lab makes and marks it
    for n in range(3):
        (ensure_writable_dir(home / f"lab-{n}") / "a").mkdir()

    def the_other_clean_was_quicker(name: str) -> None:
        if name == "lab-1":
            shutil.rmtree(home / name)

    monkeypatch.setattr(cleanup, "location_dirs", lambda: [])
    monkeypatch.setattr(owned, "before_delete", the_other_clean_was_quicker)
    assert cleanup.clean() == 0
    monkeypatch.undo()
    assert not home.exists(), sorted(p.name for p in home.iterdir())
    assert "left alone" not in capsys.readouterr().out


@pytest.mark.usefixtures("workspace")
def test_two_commands_started_at_once_both_take_the_results_folder() -> None:
    """CI26: three `iolab fio` runs started together; one found <workspace>/lab made by
    another a moment before its marker was written, and refused it as the user's own. A
    folder that is empty and seconds old now gets a moment to be marked."""
    import threading

    from iolab.core.lab_dirs import results_dir
    from iolab.core.markers import MADE_MARKER, MADE_MARKER_TEXT
    from iolab.core.owned import write_marker
    from iolab.core.workspace import WorkspaceEntry

    made_now = WorkspaceEntry.LAB.path()
    made_now.parent.mkdir(parents=True, exist_ok=True)
    made_now.mkdir(mode=0o700)  # the other run's mkdir; its marker follows 0.2 s later,
    # first under a name of its own (as write_marker_at writes it; CI27 met that moment)
    (made_now / f"{MADE_MARKER}.{os.getpid()}.partial").write_text("")
    later = threading.Timer(0.2, write_marker, (made_now, MADE_MARKER, MADE_MARKER_TEXT))
    later.start()
    try:
        assert results_dir() == made_now
    finally:
        later.join()


def test_two_commands_started_at_once_share_one_per_user_place(tmp_path: Path, capsys) -> None:
    """The same race on a per-user place (/dev/shm/iolab-$USER): the second run used to make
    a fresh private folder beside the first one's, and say it was not the user's."""
    import threading

    from iolab.core.markers import LOCATION_MARKER, LOCATION_MARKER_TEXT
    from iolab.core.owned import write_marker
    from iolab.core.workspace import location_dir, make_location_dir

    usual = location_dir(tmp_path)
    usual.mkdir(mode=0o700)  # the other run's mkdir; its marker follows 0.2 s later
    (usual / f"{LOCATION_MARKER}.{os.getpid()}.partial").write_text("")
    later = threading.Timer(0.2, write_marker, (usual, LOCATION_MARKER, LOCATION_MARKER_TEXT))
    later.start()
    try:
        assert make_location_dir(usual) == usual
    finally:
        later.join()
    assert sorted(tmp_path.iterdir()) == [usual] and "note:" not in capsys.readouterr().err


@pytest.mark.usefixtures("workspace")
def test_the_users_own_results_folder_is_refused_at_once() -> None:
    """A `lab` folder with the user's files in it is never waited for."""
    from iolab.core.lab_dirs import results_dir
    from iolab.core.workspace import WorkspaceEntry

    users = WorkspaceEntry.LAB.path()
    mine = place_user_files(users)
    started = time.monotonic()
    with pytest.raises(LabError, match="was not made by the lab for you"):
        results_dir()
    assert time.monotonic() - started < 1.0
    assert_user_files_intact(mine)


@pytest.mark.usefixtures("workspace")
def test_a_second_make_lab_refuses_while_one_runs() -> None:
    """Two `make lab` would empty each other's notebooks and site: the second says who runs."""
    from iolab.core.lab_dirs import results_dir
    from iolab.core.writer_lock import writer_lock

    out = results_dir()
    (out / "site").mkdir()
    (out / "site" / "index.html").write_text("the first run's site")
    with writer_lock(out):  # the first run, still going
        proc = run(command("iolab", "lab"))
    assert_one_error(proc)
    assert "another run is writing" in proc.stderr
    assert (out / "site" / "index.html").read_text() == "the first run's site"


def test_an_interrupt_landing_in_the_release_still_removes_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM that arrives while the writer is releasing its lock (CI23: a writer stopped
    just as it finished) must not leave the lock file behind: the interrupt goes on, the
    lock goes. The signal's handler raising at that bytecode is played by the first read of
    the lock file raising Interrupted."""
    from iolab.core import writer_lock as lock_module
    from iolab.core.errors import Interrupted

    real_text = lock_module._lock_text
    calls = []

    def interrupted_once(path: Path):
        calls.append(path)
        if len(calls) == 1:
            raise Interrupted()
        return real_text(path)

    with pytest.raises(Interrupted):
        with lock_module.writer_lock(tmp_path):
            assert (tmp_path / lock_module.LOCK_NAME).is_file()
            monkeypatch.setattr(lock_module, "_lock_text", interrupted_once)
    assert len(calls) == 2
    assert not (tmp_path / lock_module.LOCK_NAME).exists()


CUT_OFF_SCRIPT = """
import sys
from pathlib import Path
from iolab.core.errors import Interrupted, run_cli
from iolab.core.writer_lock import writer_lock

def main():
    held = writer_lock(Path(sys.argv[1]))
    held.{step}
    raise Interrupted()

run_cli(main)
"""


@pytest.mark.parametrize("step", ["__enter__()", "__enter__(); held.__exit__"])
def test_an_interrupt_between_the_lock_managers_steps_still_removes_the_lock(
    step: str, tmp_path: Path
) -> None:
    """CI41: SIGTERM handled inside contextlib's own code (after the generator took the lock,
    before the with-body began; or in __exit__ before the generator resumed) leaves the
    generator suspended, and exit_interrupted ends the process at once: its `finally` never
    runs. The lock must go all the same. The handler raising there is played by raising
    Interrupted right after __enter__ (the second case also fetches __exit__ and never calls
    it)."""
    script = CUT_OFF_SCRIPT.format(step=step)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 130 and proc.stderr.strip() == "interrupted.", proc.stderr
    assert not (tmp_path / ".iolab-lock").exists()


CUT_OFF_TARGET_SCRIPT = """
import sys
from pathlib import Path
from iolab.core.errors import Interrupted, run_cli
from iolab.ml.checkpoint.compare import target_dir

def main():
    held = target_dir(sys.argv[1], Path(sys.argv[2]))
    held.{step}
    raise Interrupted()

run_cli(main)
"""


@pytest.mark.parametrize("step", ["__enter__()", "__enter__(); held.__exit__"])
def test_any_context_manager_cut_off_by_an_interrupt_still_cleans_up(
    step: str, tmp_path: Path, workspace: Path
) -> None:
    """CI42: the same cut as above left a checkpoint run's iolab-checkpoint-* folder in the
    user's target. target_dir registers no undo step of its own: exit_interrupted clears the
    unwound frames, so the suspended generator is closed and its `finally` runs."""
    target = tmp_path / "target"
    mine = place_user_files(target)
    script = CUT_OFF_TARGET_SCRIPT.format(step=step)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(target), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "IOLAB_WORKDIR": str(workspace)},
    )
    assert proc.returncode == 130 and proc.stderr.strip() == "interrupted.", proc.stderr
    assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in mine)
    assert_user_files_intact(mine)


# --------------------------------------------------------------------------- (c) interrupted


SIGNALS = [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM")]
REPEATS = 3


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a SIGTERM handler yet (bit 15 of SigCgt in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask, 16) & (1 << (signal.SIGTERM - 1)))


def when_started(proc: subprocess.Popen) -> subprocess.Popen:
    """Wait until the command's own code runs (it handles SIGTERM), or it has ended.

    Before that the interpreter is still starting, and no program can catch a signal; the
    random moment is counted from here, so it does not depend on how busy the machine is.
    """
    deadline = time.monotonic() + 20
    while proc.poll() is None and not catches_sigterm(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.002)
    return proc


def interrupted(argv: list[str], delay: float, env: dict | None = None) -> subprocess.Popen:
    proc = when_started(start(argv, env))
    time.sleep(delay)
    return proc


#: Seconds a signalled command gets to end: an MPI-IO run stops in up to three stages of
#: STOP_TIMEOUT_S (freezing its processes, their end once killed, its output), and several
#: stopped at once on a busy 2-core machine have needed more than 60 s (CI, 2026-11-30).
STOPPED_WITHIN_S = {"mpiio": 3 * STOP_TIMEOUT_S + 30}
SIGNALLED_WITHIN_S = 60


def signal_and_collect(
    proc: subprocess.Popen, sig: int, within_s: float = SIGNALLED_WITHIN_S
) -> subprocess.CompletedProcess:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=within_s)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def assert_interrupt_reported(proc: subprocess.CompletedProcess, done: str) -> None:
    """Either the run finished first, or it said so in one sentence, with no traceback.

    Finished means exit 0, or killed by the signal while the interpreter was shutting down
    after it had printed its whole result (`done` is the result's last line's start).
    """
    if proc.returncode == 0 or (
        proc.returncode < 0
        and not proc.stderr
        and any(line.startswith(done) for line in proc.stdout.splitlines())
    ):
        return
    err = proc.stderr.strip()
    assert "Traceback" not in err, err
    assert err.startswith("interrupted") and len(err.splitlines()) == 1, (proc.returncode, err)


def delays(seed: str, low: float, high: float) -> list[float]:
    """Seeded random moments after the command has started (see when_started)."""
    rng = random.Random(seed)
    return [rng.uniform(low, high) for _ in range(REPEATS)]


WRITER_DONE = {
    "generate": "Expected mean",
    "archive": "Python's default",
    "shards": "Shards ",
    "images": "Images ",
    "order-out": "Mean activity_level",
}
INTERRUPTED_WRITERS = [
    pytest.param("generate", marks=pytest.mark.slow),
    "archive",
    "shards",
    "images",
    "order-out",
]


@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("name", INTERRUPTED_WRITERS)
@pytest.mark.slow
def test_writer_interrupted_at_a_random_moment(name: str, sig: int, dataset: Path) -> None:
    mine = place_user_files(dataset.parent)
    for variant, delay in enumerate(delays(f"{name}-{sig}", 0.0, 0.4), start=1):
        # another variant each time, so that every run has to write (over the old result);
        # generate writes 3000 files so that the moment often falls inside the writing
        argv = writer_argv(name, dataset, variant)
        if name == "generate":
            argv = [a if a != str(FILES) else "3000" for a in argv]
        if name == "archive":
            writer_input(name, dataset)
        proc = signal_and_collect(interrupted(argv, delay), sig)
        assert_interrupt_reported(proc, WRITER_DONE[name])
        assert not leftovers(dataset.parent), leftovers(dataset.parent)
        if result_exists(name, dataset):  # whatever claims to be complete is complete
            assert writer_verifies(name, dataset), (delay, proc.stderr)
        # interrupted (an exit status, or the signal Python re-raises on an uncaught Ctrl-C
        # after printing the sentence) or finished; either way never success without a result
        assert proc.returncode != 0 or result_exists(name, dataset)
        assert (
            not (dataset / ".iolab-lock").exists()
            and not (dataset.parent / "images" / ".iolab-lock").exists()
        )
        rerun = run(argv)
        assert_ok(rerun)
        assert writer_verifies(name, dataset)
    assert_user_files_intact(mine)


@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("reader", ["read_files", "read_archive"])
@pytest.mark.slow
def test_reader_interrupted_prints_no_result(reader: str, sig: int, template: Path) -> None:
    for delay in delays(f"{reader}-{sig}", 0.0, 0.5):
        proc = signal_and_collect(
            interrupted(command(f"demos/{reader}.py", "--data", template), delay), sig
        )
        assert_interrupt_reported(proc, "Mean activity_level")
        if proc.returncode > 0:
            assert "Mean activity_level" not in proc.stdout


@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.slow
def test_clean_interrupted_deletes_nothing_of_the_user(sig: int, tmp_path: Path) -> None:
    home = tmp_path / "home"
    mine = place_user_files(home, home / "tmp", home / "dataset")
    env = {"IOLAB_WORKDIR": str(home)}
    for delay in delays(f"clean-{sig}", 0.0, 0.1):
        for n in range(20):
            made = ensure_writable_dir(home / f"lab-{n}")
            for i in range(50):
                (made / f"f{i}").write_text("x")
        proc = interrupted(command("clean"), delay, env)
        assert_interrupt_reported(signal_and_collect(proc, sig), "left alone")
        assert_user_files_intact(mine)
        assert_ok(run(command("clean"), env))
        assert not any(home.glob("lab-*"))
    assert_user_files_intact(mine)


# --------------------------------------------------------------------------- (d) damaged input


def delete_file(d: Path) -> None:
    next((d / "data").rglob("*.csv")).unlink()


def change_byte(d: Path) -> None:
    path = sorted((d / "data").rglob("*.csv"))[5]
    data = bytearray(path.read_bytes())
    data[-2] = ord("3") if data[-2] != ord("3") else ord("2")  # same size, other value
    path.write_bytes(bytes(data))


def empty_csv(d: Path) -> None:
    sorted((d / "data").rglob("*.csv"))[7].write_bytes(b"")


def half_csv(d: Path) -> None:
    path = sorted((d / "data").rglob("*.csv"))[9]
    path.write_bytes(path.read_bytes()[:60])


def truncate_tar(d: Path) -> None:
    with open(d / "data.tar", "r+b") as handle:
        handle.truncate((d / "data.tar").stat().st_size // 3 + 100)


def change_tar_byte(d: Path) -> None:
    with open(d / "data.tar", "r+b") as handle:
        handle.seek(600)  # inside the first member's data
        byte = handle.read(1)
        handle.seek(600)
        handle.write(b"3" if byte != b"3" else b"2")


def no_manifest(d: Path) -> None:
    (d / "manifest.json").unlink()


def bad_manifest(d: Path) -> None:
    (d / "manifest.json").write_text('{"files": [')


FILE_DAMAGE = [delete_file, change_byte, empty_csv, half_csv, no_manifest, bad_manifest]
TAR_DAMAGE = [truncate_tar, change_tar_byte, no_manifest]
FILE_READERS = ["read_files", "read_files_naive"]
TAR_READERS = ["read_archive", "read_archive_random", "read_random_chunked"]
DAMAGED = [(r, f, v) for r in FILE_READERS for f in FILE_DAMAGE for v in ("", "--verify")] + [
    (r, f, v) for r in TAR_READERS for f in TAR_DAMAGE for v in ("", "--verify")
]


@pytest.mark.parametrize(
    "reader,damage,verify",
    DAMAGED,
    ids=[f"{r}-{f.__name__}{v.replace('--', '-')}" for r, f, v in DAMAGED],
)
@pytest.mark.slow
def test_reader_refuses_damaged_input(reader: str, damage, verify: str, dataset: Path) -> None:
    damage(dataset)
    order = ["--order-out", dataset.parent / "order.txt"] if reader.endswith("random") else []
    proc = run(command(f"demos/{reader}.py", "--data", dataset, *order, *filter(None, [verify])))
    assert_one_error(proc)
    assert "Mean activity_level" not in proc.stdout
    assert not (dataset.parent / "order.txt").exists()  # no result from a refused reading


DAMAGED_WRITERS = [
    ("archive", delete_file),
    ("archive", change_byte),
    ("archive", bad_manifest),
    ("shards", delete_file),
    ("shards", half_csv),
    ("shards", no_manifest),
]


@pytest.mark.parametrize(
    "name,damage", DAMAGED_WRITERS, ids=[f"{n}-{f.__name__}" for n, f in DAMAGED_WRITERS]
)
def test_writer_refuses_damaged_input(name: str, damage, dataset: Path) -> None:
    writer_input(name, dataset)
    damage(dataset)
    assert_one_error(run(writer_argv(name, dataset)))
    assert not result_exists(name, dataset) and not leftovers(dataset.parent)


@pytest.mark.parametrize(
    "damage", [truncate_tar, change_tar_byte, delete_file], ids=lambda f: f.__name__
)
def test_verify_reports_damage(damage, dataset: Path) -> None:
    damage(dataset)
    proc = verify_dataset(dataset)
    assert proc.returncode == 1 and "NOT VALID" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["demos/read_files.py", "--data", "{file}"],
        ["demos/read_archive.py", "--data", "{missing}"],
        ["data_generators/create_archive.py", "--data", "{file}"],
        ["data_generators/make_shards.py", "--data", "{missing}"],
        ["iolab", "lustre", "status", "{missing}"],
        ["iolab", "syscalls", "--data", "{file}", "--", "true"],
        ["iolab", "sweep", "--directory", "{file}", "--dry-run"],
    ],
    ids=[
        "read_files-file",
        "read_archive-missing",
        "archive-file",
        "shards-missing",
        "lustre-missing",
        "syscalls-file",
        "sweep-file",
    ],
)
@pytest.mark.slow
def test_wrong_kind_of_path_is_one_sentence(argv: list[str], tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    args = [a.format(file=tmp_path / "a-file", missing=tmp_path / "nowhere") for a in argv]
    proc = run(command(args[0] if args[0] == "iolab" else args[0], *args[1:]))
    assert_one_error(proc)


def damage_checkpoint(kind: str, path: Path) -> None:
    if kind == "truncated":
        with open(path, "r+b") as handle:
            handle.truncate(path.stat().st_size // 2)
    elif kind == "changed-byte":
        data = bytearray(path.read_bytes())
        data[-3] ^= 0xFF
        path.write_bytes(bytes(data))
    elif kind == "no-sidecar":
        ck.sidecar(path).unlink()
    elif kind == "missing":
        path.unlink()


@pytest.mark.parametrize("kind", ["truncated", "changed-byte", "no-sidecar", "missing"])
def test_checkpoint_load_refuses_damage(kind: str, tmp_path: Path) -> None:
    state = {"w": np.arange(1000, dtype=np.float32), "b": np.ones(3)}
    saved = ck.save_checkpoint(state, tmp_path / ck.checkpoint_name(1))
    assert all(np.array_equal(a, state[k]) for k, a in ck.load_checkpoint(saved.path).items())
    damage_checkpoint(kind, saved.path)
    assert not ck.verify_checkpoint(saved.path)
    with pytest.raises(LabError) as caught:
        ck.load_checkpoint(saved.path)
    assert len(str(caught.value).splitlines()) == 1


# --------------------------------------------------------------------------- (e) read-only places


@pytest.mark.parametrize("name", ["generate", "images", "shards", "order-out", "sweep-csv"])
def test_writer_under_a_file_is_one_sentence(name: str, dataset: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    if name == "shards":
        argv = command(
            "data_generators/make_shards.py", "--data", dataset, "--out", blocker / "shards"
        )
    elif name == "order-out":
        argv = command(
            "demos/read_archive_random.py", "--data", dataset, "--order-out", blocker / "order.txt"
        )
    elif name == "sweep-csv":
        (tmp_path / "sweep").mkdir()
        argv = command(
            "iolab",
            "sweep",
            "--directory",
            tmp_path / "sweep",
            "--min",
            "4K",
            "--max",
            "4K",
            "--repeats",
            1,
            "--csv",
            blocker / "out.csv",
        )
    else:
        argv = writer_argv(name, blocker / "dataset")
    assert_one_error(run(argv))
    assert blocker.read_text() == "mine"


@pytest.fixture
def read_only(tmp_path: Path):
    """chmod a-w (or a-rwx) on folders for one test, restored afterwards."""
    changed: list[tuple[Path, int]] = []

    def make(path: Path, mode: int = 0o555) -> Path:
        for p in [path, *(q for q in path.rglob("*") if q.is_dir())] if mode == 0o555 else [path]:
            changed.append((p, p.stat().st_mode))
            p.chmod(mode)
        return path

    yield make
    for path, mode in reversed(changed):
        path.chmod(mode)


@not_as_root
@pytest.mark.parametrize("name", ["generate", "archive", "shards", "images"])
def test_valid_result_in_a_read_only_place_is_reused(name: str, dataset: Path, read_only) -> None:
    if name == "images":
        assert_ok(run(writer_argv(name, dataset)))
    read_only(dataset.parent)
    proc = run(writer_argv(name, dataset))
    assert_ok(proc)
    assert "reused (verified)" in proc.stdout


@not_as_root
@pytest.mark.parametrize("reader", ["read_files", "read_archive_random"])
def test_reader_of_a_read_only_dataset(reader: str, dataset: Path, read_only) -> None:
    read_only(dataset.parent)
    assert_ok(run(command(f"demos/{reader}.py", "--data", dataset, "--verify")))
    if reader == "read_archive_random":
        assert_one_error(
            run(
                command(
                    f"demos/{reader}.py",
                    "--data",
                    dataset,
                    "--order-out",
                    dataset.parent / "order.txt",
                )
            )
        )


@not_as_root
@pytest.mark.parametrize("name", ["generate", "archive", "shards", "images", "sweep-csv"])
def test_new_result_in_a_read_only_place_is_one_sentence(
    name: str, dataset: Path, read_only
) -> None:
    writer_input(name, dataset)
    if name == "generate":
        dataset.mkdir()
    read_only(dataset.parent)
    before = snapshot(dataset.parent)
    assert_one_error(run(writer_argv(name, dataset)))
    assert snapshot(dataset.parent) == before


@not_as_root
@pytest.mark.parametrize("name", ["generate", "generate-verify", "read_files", "archive"])
def test_unsearchable_parent_is_one_sentence(name: str, tmp_path: Path, read_only) -> None:
    d = tmp_path / "locked" / "dataset"
    d.parent.mkdir()
    read_only(d.parent, 0o000)
    argv = {
        "generate": writer_argv("generate", d),
        "generate-verify": command("data_generators/generate_data.py", "--data", d, "--verify"),
        "read_files": command("demos/read_files.py", "--data", d),
        "archive": writer_argv("archive", d),
    }[name]
    proc = run(argv)
    if name == "generate-verify":
        assert (
            proc.returncode == 1 and "Traceback" not in proc.stderr and "NOT VALID" in proc.stdout
        )
    else:
        assert_one_error(proc)


@not_as_root
def test_clean_of_a_read_only_workspace_is_one_sentence(tmp_path: Path, read_only) -> None:
    home = tmp_path / "home"
    mine = place_user_files(home)
    (ensure_writable_dir(home / "lab-made") / "f").write_text("x")
    read_only(home)
    proc = run(command("clean"), {"IOLAB_WORKDIR": str(home)})
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode != 0:
        assert_one_error(proc)
    assert_user_files_intact(mine)


# --------------------------------------------------------------------------- readers of shards


def truncate_shard(d: Path) -> None:
    shard = d / "shards" / "shard-000002.tar"
    with open(shard, "r+b") as handle:
        handle.truncate(shard.stat().st_size // 2)


def change_shard_byte(d: Path) -> None:
    """One activity level in a shard's payload becomes another level: same size, other value."""
    shard = d / "shards" / "shard-000003.tar"
    data = bytearray(shard.read_bytes())
    at = data.index(b"\n23,23,") + len(b"\n23,23,")  # the last row of the shard's first sample
    data[at] = ord("3") if data[at] != ord("3") else ord("2")
    shard.write_bytes(bytes(data))


def missing_shard(d: Path) -> None:
    (d / "shards" / "shard-000004.tar").unlink()


def missing_index(d: Path) -> None:
    (d / "shards" / "shards.json").unlink()


SHARD_DAMAGE = [truncate_shard, change_shard_byte, missing_shard, missing_index]
SHARD_READERS = {
    "read_samples-shards": lambda d: command(
        "demos/read_samples.py", "--source", "shards", "--data", d
    ),
    "read_samples-files": lambda d: command(
        "demos/read_samples.py", "--source", "files", "--data", d
    ),
    "accelerator": lambda d: command(
        "iolab",
        "accelerator",
        "--data",
        d,
        "--source",
        "shards",
        "--steps",
        3,
        "--compute-ms",
        1,
        "--cache",
        "warm",
    ),
    "accelerator-files": lambda d: command(
        "iolab",
        "accelerator",
        "--data",
        d,
        "--source",
        "files",
        "--steps",
        3,
        "--compute-ms",
        1,
        "--cache",
        "warm",
    ),
}
SAMPLE_DAMAGED = (
    [(r, f) for r in ("read_samples-shards", "accelerator") for f in SHARD_DAMAGE]
    + [("read_samples-files", f) for f in (delete_file, change_byte, empty_csv, half_csv)]
    + [("accelerator-files", f) for f in (delete_file, change_byte)]
)


@pytest.mark.parametrize(
    "reader,damage", SAMPLE_DAMAGED, ids=[f"{r}-{f.__name__}" for r, f in SAMPLE_DAMAGED]
)
@pytest.mark.slow
def test_sample_reader_refuses_damaged_input(reader: str, damage, dataset: Path) -> None:
    damage(dataset)
    proc = run(SHARD_READERS[reader](dataset))
    assert_one_error(proc)
    assert '"mean"' not in proc.stdout and "pass line" not in proc.stdout


@pytest.mark.parametrize("damage", ["truncate", "change_byte", "delete"])
@pytest.mark.slow
def test_accelerator_refuses_damaged_image_files(damage: str, tmp_path: Path) -> None:
    images = tmp_path / "images"
    assert_ok(run(writer_argv("images", tmp_path / "dataset")))
    sample = sorted((images / "files").iterdir())[5]
    if damage == "truncate":
        os.truncate(sample, sample.stat().st_size // 2)
    elif damage == "change_byte":
        data = bytearray(sample.read_bytes())
        data[100] ^= 0x01
        sample.write_bytes(bytes(data))
    else:
        sample.unlink()
    proc = run(SHARD_READERS["accelerator-files"](images))
    assert_one_error(proc)
    assert sample.name in proc.stderr and "pass line" not in proc.stdout


@pytest.mark.parametrize(
    "reader", [pytest.param("read_samples-shards", marks=pytest.mark.slow), "read_samples-files"]
)
def test_sample_reader_of_an_intact_dataset(reader: str, template: Path) -> None:
    proc = run(SHARD_READERS[reader](template))
    assert_ok(proc)
    expected = verify_dataset(template).stdout.rsplit("expected mean ", 1)[1].strip()
    assert f'"samples": {FILES},' in proc.stdout and f'"mean": {expected}' in proc.stdout


# --------------------------------------------------------------------- `python -m iolab checkpoint`


def checkpoint_argv(target: Path, background: bool = False) -> list[str]:
    return command(
        "iolab",
        "checkpoint",
        "--size-mib",
        1,
        "--steps",
        6,
        "--every",
        1,
        "--step-s",
        0.05,
        "--keep",
        2,
        "--target",
        target,
        *(["--background"] if background else []),
    )


def lab_files(root: Path) -> list[str]:
    """Files below `root` other than the lab's folder markers: what a run left behind."""
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if not p.is_dir() and p.name != MADE_MARKER
    )


@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.slow
def test_checkpoint_interrupted_leaves_nothing(sig: int, tmp_path: Path, workspace: Path) -> None:
    target = tmp_path / "target"
    mine = place_user_files(target)
    for n, delay in enumerate(delays(f"checkpoint-{sig}", 0.0, 1.5)):
        proc = signal_and_collect(interrupted(checkpoint_argv(target, n % 2 == 1), delay), sig)
        assert_interrupt_reported(proc, "sync:" if n % 2 == 0 else "background:")
        # no checkpoint, sidecar or temporary file is left to pass as a complete checkpoint
        assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in mine)
        assert lab_files(workspace) == [], (delay, proc.stderr)
    assert_user_files_intact(mine)


def test_two_checkpoint_runs_at_once(tmp_path: Path, workspace: Path) -> None:
    target = tmp_path / "target"
    mine = place_user_files(target)
    procs = [start(checkpoint_argv(target, background)) for background in (False, True)]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "the loop was blocked" in out, err
    assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in mine)
    assert lab_files(workspace) == []
    assert_user_files_intact(mine)


def test_checkpoint_target_under_a_file_is_one_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    assert_one_error(run(checkpoint_argv(blocker / "target")))
    assert blocker.read_text() == "mine"


@not_as_root
def test_checkpoint_read_only_target_is_one_sentence(tmp_path: Path, read_only) -> None:
    target = tmp_path / "target"
    mine = place_user_files(target)
    read_only(target)
    assert_one_error(run(checkpoint_argv(target)))
    assert_user_files_intact(mine)
    assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in mine)


# ------------------------------------------------------------------------ `python -m iolab hygiene`
# The hygiene sub-commands only read: even `caches` is a dry run that prints the cleaning
# commands; hygiene_caches.apply_cleanup, which does delete, has no command of its own.


def cache_tree(root: Path) -> dict[str, str]:
    """Caches of pip, conda, Hugging Face and torch below `root`, as the environment names them."""
    for rel in ("pip/http/a", "conda/pkgs/numpy-1", "hf/hub/models--x/blob", "torch/hub/w.pt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x" * 100)
    return {
        "PIP_CACHE_DIR": str(root / "pip"),
        "CONDA_PKGS_DIRS": str(root / "conda" / "pkgs"),
        "HF_HOME": str(root / "hf"),
        "TORCH_HOME": str(root / "torch"),
        "XDG_CACHE_HOME": str(root / "xdg"),
    }


def test_hygiene_caches_deletes_nothing(tmp_path: Path) -> None:
    caches = tmp_path / "caches"
    env = cache_tree(caches)
    mine = place_user_files(caches, caches / "pip", tmp_path)
    before = snapshot(caches)
    proc = run(
        command("iolab", "hygiene", "caches"), {**env, "MPLCONFIGDIR": str(tmp_path / "mpl")}
    )  # matplotlib's own font cache
    assert_ok(proc)
    assert "nothing was deleted" in proc.stdout
    after = snapshot(caches)
    # Only what was there counts: matplotlib, imported by the command line, may add its
    # fontconfig cache under XDG_CACHE_HOME for a user who has none yet.
    assert {name: after.get(name) for name in before} == before
    assert_user_files_intact(mine)


@pytest.mark.parametrize(
    "action,path",
    [("df", "missing"), ("usage", "file"), ("du", "missing"), ("checkpoints", "file")],
)
@pytest.mark.slow
def test_hygiene_bad_path_is_one_sentence(action: str, path: str, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("mine")
    where = tmp_path / ("a-file" if path == "file" else "nowhere")
    assert_one_error(run(command("iolab", "hygiene", action, "--data", where)))
    assert (tmp_path / "a-file").read_text() == "mine" and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.slow
def test_hygiene_interrupted_is_one_sentence_and_changes_nothing(sig: int, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    for n in range(40):
        folder = tree / f"d{n}"
        folder.mkdir(parents=True)
        for i in range(50):
            (folder / f"f{i}.pt").write_bytes(b"x" * i)
    before = snapshot(tmp_path)
    for delay in delays(f"hygiene-{sig}", 0.0, 1.2):
        proc = signal_and_collect(
            interrupted(command("iolab", "hygiene", "usage", "--data", tree), delay), sig
        )
        assert_interrupt_reported(proc, "(arithmetic")
        assert snapshot(tmp_path) == before


def test_apply_cleanup_deletes_the_plan_only(tmp_path: Path, monkeypatch) -> None:
    from iolab.storage.hygiene_caches import apply_cleanup, cache_cleanup_plan

    caches = tmp_path / "caches"
    for name, value in cache_tree(caches).items():
        monkeypatch.setenv(name, value)
    beside = place_user_files(tmp_path, caches)  # beside the caches, not inside one
    plan = cache_cleanup_plan()
    assert apply_cleanup(plan, caches) == 4
    assert_user_files_intact(beside)
    assert all(not any(d.iterdir()) for d in (caches / "pip", caches / "conda" / "pkgs"))


@not_as_root
def test_apply_cleanup_of_a_read_only_cache_is_one_sentence(
    tmp_path: Path, monkeypatch, read_only
) -> None:
    from iolab.storage.hygiene_caches import apply_cleanup, cache_cleanup_plan

    caches = tmp_path / "caches"
    for name, value in cache_tree(caches).items():
        monkeypatch.setenv(name, value)
    mine = place_user_files(tmp_path)
    read_only(caches / "pip")
    with pytest.raises(LabError) as caught:
        apply_cleanup(cache_cleanup_plan(), caches)
    assert len(str(caught.value).splitlines()) == 1 and "cannot delete" in str(caught.value)
    assert_user_files_intact(mine)


# ----------------------------------------------------------------------- `python -m iolab` starting


@pytest.mark.parametrize("sig", SIGNALS)
def test_iolab_interrupted_while_starting_is_one_sentence(sig: int, tmp_path: Path) -> None:
    """The moment falls in the imports: __main__ handles signals before iolab.cli loads."""
    for delay in delays(f"start-{sig}", 0.0, 0.3):
        proc = signal_and_collect(
            interrupted(command("iolab", "hygiene", "df", "--data", tmp_path), delay), sig
        )
        assert_interrupt_reported(proc, "| os.statvfs")


# -------------------------------------------------------------------- result files of fio and mpiio


def result_argv(name: str, out: Path, tmp: Path) -> list[str]:
    """A small run of `name` that saves its result to `out` (fio runs in tmp/run, made here)."""
    (tmp / "run").mkdir(exist_ok=True)
    if name.startswith("fio"):
        option = "--csv" if name == "fio-csv" else "--json-out"
        return command(
            "iolab",
            "fio",
            "--directory",
            tmp / "run",
            "--size-scale",
            0.02,
            "--runtime",
            1,
            option,
            out,
        )
    return command("iolab", "mpiio", "--ranks", 2, "--blocks-per-rank", 8, "--csv", out)


def result_complete(name: str, out: Path) -> bool:
    text = out.read_text()
    if name == "fio-json-out":
        import json

        return bool(json.loads(text)["jobs"])
    lines = text.splitlines()
    return len(lines) > 1 and lines[0].startswith(("job_index,", "run,")) and text.endswith("\n")


RESULT_FILES = [
    pytest.param("fio-csv", marks=pytest.mark.needs("fio")),
    pytest.param("fio-json-out", marks=pytest.mark.needs("fio")),
    pytest.param("mpiio-csv", marks=[pytest.mark.needs("mpi"), pytest.mark.needs("strace")]),
]


@pytest.mark.parametrize("name", RESULT_FILES)
@pytest.mark.slow
def test_result_file_under_a_file_is_refused_before_the_run(name: str, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    proc = run(result_argv(name, blocker / "result", tmp_path))
    assert_one_error(proc)
    assert proc.stdout == ""  # refused before anything ran or was announced
    assert blocker.read_text() == "mine" and not any((tmp_path / "run").iterdir())


@not_as_root
@pytest.mark.parametrize("name", RESULT_FILES)
def test_result_file_in_a_read_only_folder_is_refused_before_the_run(
    name: str, tmp_path: Path, read_only
) -> None:
    folder = tmp_path / "results"
    mine = place_user_files(folder)
    read_only(folder)
    proc = run(result_argv(name, folder / "result", tmp_path))
    assert_one_error(proc)
    assert proc.stdout == "" and not any((tmp_path / "run").iterdir())
    assert_user_files_intact(mine)


@pytest.mark.needs("mpi")
def test_mpiio_csv_without_trace_is_refused(tmp_path: Path) -> None:
    """--no-trace makes no syscall table: --csv used to be ignored, the run reported success."""
    argv = result_argv("mpiio-csv", tmp_path / "calls.csv", tmp_path) + ["--no-trace"]
    proc = run(argv)
    assert_one_error(proc)
    assert proc.stdout == "" and not (tmp_path / "calls.csv").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("name", RESULT_FILES)
def test_result_file_interrupted_is_whole_or_absent(name: str, sig: int, tmp_path: Path) -> None:
    """The seeded moments are played at once, each run in a folder of its own: what is
    checked is each run's result file, never a time, so they need not wait for each other."""

    def interrupted_run(delay: float, root: Path) -> None:
        folder = root / "results"
        mine = place_user_files(folder)
        out = folder / ("result.json" if name == "fio-json-out" else "result.csv")
        within_s = STOPPED_WITHIN_S.get(name.split("-")[0], SIGNALLED_WITHIN_S)
        proc = signal_and_collect(interrupted(result_argv(name, out, root), delay), sig, within_s)
        if proc.returncode != 0:
            assert_interrupt_reported(proc, "")
        assert not out.exists() or result_complete(name, out), (delay, proc.stderr)
        assert not leftovers(folder) and not any((root / "run").iterdir())
        assert processes_naming(str(root / "run")) == []  # fio's jobs: a session each
        assert_user_files_intact(mine)

    moments = delays(f"{name}-{sig}", 0.5, 8.0)
    roots = [tmp_path / f"run-{index}" for index in range(len(moments))]
    with ThreadPoolExecutor(max_workers=len(moments)) as pool:
        list(pool.map(interrupted_run, moments, roots))  # re-raises a run's failed assert


@pytest.mark.slow
@pytest.mark.parametrize("name", RESULT_FILES)
def test_two_runs_into_one_result_file(name: str, tmp_path: Path) -> None:
    out = tmp_path / ("result.json" if name == "fio-json-out" else "result.csv")
    procs = [start(result_argv(name, out, tmp_path)) for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert result_complete(name, out) and not leftovers(tmp_path)


def _interrupted_right_after_mkdir(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make tempfile.mkdtemp send this process Ctrl-C as soon as the directory exists: the
    moment CI once caught (`iolab mdrates` interrupted at its start left its directory)."""
    real = tempfile.mkdtemp

    def mkdtemp(*args, **kwargs) -> str:
        path = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)


@pytest.mark.parametrize("make", ["fresh_run_dir", "run_directory", "perception"])
def test_ctrl_c_the_moment_a_run_directory_is_made_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: str
) -> None:
    from iolab.core.lab_dirs import fresh_run_dir
    from iolab.storage.perception_timing import run_dir
    from iolab.storage.sweep import run_directory

    opened = {
        "fresh_run_dir": lambda: fresh_run_dir(tmp_path, "iolab-test-"),
        "run_directory": lambda: run_directory(tmp_path, "test"),
        "perception": lambda: run_dir(tmp_path, "test", 0, 1),
    }[make]
    _interrupted_right_after_mkdir(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        with opened():
            pytest.fail("the interrupt must end the run before its body starts")
    assert list(tmp_path.iterdir()) == []
