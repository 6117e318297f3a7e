"""`iolab class setup` / `class clean` and joining a class (IOLAB_CLASS).

Here the environment step is replaced by a link to this test's interpreter (building a real
one takes a minute and the package index; tests/test_class_users.py builds it for real and
joins it as other users); everything else is the real setup: the checkout copied, the
datasets generated and verified, the permissions, class.json written last.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from class_stand_ins import linked_environment

from iolab.classmode import setup as class_setup
from iolab.classmode.layout import CLASS_MARKER, FOLDER_MADE, LEARNER_WRITABLE
from iolab.classmode.teardown import clean_class
from iolab.core import budget
from iolab.core.class_folder import CLASS_ENV, CLASS_FILE, active_class, read_class
from iolab.core.dataset import DEFAULT_FILES
from iolab.core.errors import LabError
from iolab.core.markers import MADE_MARKER
from iolab.core.workspace import (
    WorkspaceEntry,
    default_dataset_dir,
    user_name,
    workdir,
)
from iolab.measure.footprint import footprint

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def class_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One class of 30 learners, 2 heavy steps at a time, built once for this module."""
    root = tmp_path_factory.mktemp("classes") / "storage-day"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(class_setup, "build_environment", linked_environment)
        patch.delenv(CLASS_ENV, raising=False)
        class_setup.setup_class(root, 30, say=lambda text: None)
    return root


def test_the_class_holds_the_lab_and_verified_datasets(class_dir: Path) -> None:
    described = json.loads((class_dir / CLASS_FILE).read_text())
    assert described["learners"] == 30 and described["slots"] == 2
    assert described["made_by"] == user_name()
    assert FOLDER_MADE in (class_dir / CLASS_MARKER).read_text()  # clean removes the folder
    assert described["files"] == footprint([class_dir]).files - 1  # all but class.json itself
    assert (class_dir / "lab" / "data_generators" / "generate_data.py").is_file()
    assert not (class_dir / "lab" / "workspace").exists()
    assert len(list((class_dir / "dataset" / "data").rglob("*.csv"))) == DEFAULT_FILES
    for name in ("data.tar", "shards", "manifest.json"):
        assert (class_dir / "dataset" / name).exists(), name
    assert (class_dir / "images" / "manifest.json").is_file()
    kernel = json.loads((class_dir / "share/jupyter/kernels/iolab-class/kernel.json").read_text())
    assert kernel["env"] == {CLASS_ENV: str(class_dir)}
    assert kernel["argv"][0] == str(class_dir / "env" / "bin" / "python")


def test_learners_may_read_all_but_write_only_their_two_folders(class_dir: Path) -> None:
    for path in [class_dir, *class_dir.rglob("*")]:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode) or path.name in (CLASS_MARKER, MADE_MARKER):
            continue  # a link has no mode of its own; markers stay the instructor's (0600)
        mode = stat.S_IMODE(info.st_mode)
        assert mode & 0o007 == 0, f"{path} is open to others: {mode:04o}"
        assert info.st_gid == os.getgid(), path
        if path.parent == class_dir and path.name in LEARNER_WRITABLE:
            assert mode == 0o3770, f"{path}: {mode:04o}"  # sticky: each deletes only theirs
        else:
            assert not mode & stat.S_IWGRP, f"{path} is writable by learners: {mode:04o}"
            assert mode & stat.S_IRGRP, f"{path} is hidden from learners: {mode:04o}"


def test_a_joined_learner_reads_the_class_data_and_writes_a_private_workspace(
    class_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CLASS_ENV, str(class_dir))
    monkeypatch.delenv("IOLAB_WORKDIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert workdir() == tmp_path / f"iolab-storage-day-{user_name()}"
    assert default_dataset_dir() == class_dir / "dataset"
    assert WorkspaceEntry.IMAGES.path() == class_dir / "images"
    assert WorkspaceEntry.LAB.path() == workdir() / "lab"  # results are the learner's own
    assert active_class().slots == 2
    # The heavy steps' budget is the node's divided by the runs allowed at once.
    assert budget.most("files") == budget.LIMITS["files"].most // 2
    assert budget.most("job_s") == budget.LIMITS["job_s"].most
    assert budget.most("processes") == budget.LIMITS["processes"].most  # a fio profile's jobs
    with pytest.raises(LabError, match=r"15000 files > 10000 files, this class's share"):
        budget.check("a run", files=15_000, compute_node=False)
    budget.check("a run", files=9_000, compute_node=False)


def test_the_learner_command_and_make_lab_refuse_an_unfinished_class(tmp_path: Path) -> None:
    half = tmp_path / "half"
    half.mkdir()
    env = {**os.environ, CLASS_ENV: str(half)}
    joined = subprocess.run(
        [sys.executable, "-m", "iolab", "class", "joined"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert joined.returncode == 2 and "Traceback" not in joined.stderr
    assert "is not a finished class folder" in joined.stderr
    make = subprocess.run(["make", "-s", "lab"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert make.returncode != 0 and "is not a finished class folder" in make.stdout


def test_a_setup_cut_short_is_never_joined_and_the_next_one_redoes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "cut"
    monkeypatch.setattr(class_setup, "build_environment", linked_environment)

    def interrupted(root: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(class_setup, "build_data", interrupted)
    with pytest.raises(KeyboardInterrupt):
        class_setup.setup_class(root, 5, say=lambda text: None)
    assert (root / CLASS_MARKER).exists() and not (root / CLASS_FILE).exists()
    assert stat.S_IMODE(root.stat().st_mode) == 0o700  # nobody sees a half-built class
    with pytest.raises(LabError, match="not a finished class folder"):
        read_class(root)
    monkeypatch.setattr(class_setup, "build_data", lambda root: None)  # made empty
    class_setup.setup_class(root, 5, say=lambda text: None)
    assert read_class(root).learners == 5
    assert FOLDER_MADE in (root / CLASS_MARKER).read_text()
    freed = clean_class(root)
    assert freed.folder_removed and not root.exists()


def test_clean_removes_what_setup_made_and_learners_left_and_says_how_much(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "mine"
    root.mkdir()  # made by the instructor: the folder itself stays
    monkeypatch.setattr(class_setup, "build_environment", linked_environment)
    monkeypatch.setattr(class_setup, "build_data", lambda root: None)  # made empty
    class_setup.setup_class(root, 3, say=lambda text: None)
    (root / "wall" / "learner.json").write_text("{}")
    before = footprint([root])
    freed = clean_class(root)
    assert not freed.folder_removed and sorted(os.listdir(root)) == []
    assert (freed.files, freed.bytes) == (before.files, before.bytes)


@pytest.mark.parametrize(
    "prepare, says",
    [
        (lambda root: (root.mkdir(), (root / "notes.txt").write_text("mine")), "is not empty"),
        (lambda root: root.write_text("a file"), "is not a folder"),
    ],
)
def test_setup_refuses_a_folder_that_is_not_new_or_empty(
    tmp_path: Path, prepare, says: str
) -> None:
    root = tmp_path / "class"
    prepare(root)
    before = sorted(os.listdir(tmp_path)), (root.read_bytes() if root.is_file() else None)
    with pytest.raises(LabError, match=says):
        class_setup.setup_class(root, 3, say=lambda text: None)
    assert (sorted(os.listdir(tmp_path)), root.read_bytes() if root.is_file() else None) == before
    if root.is_dir():
        assert os.listdir(root) == ["notes.txt"]


def test_setup_refuses_a_folder_that_already_holds_a_class(class_dir: Path) -> None:
    with pytest.raises(LabError, match="already holds a class"):
        class_setup.setup_class(class_dir, 3, say=lambda text: None)


def test_clean_refuses_a_folder_without_the_class_marker(tmp_path: Path) -> None:
    (tmp_path / "lab").mkdir()
    (tmp_path / CLASS_FILE).write_text("{}")
    with pytest.raises(LabError, match="not a class you set up"):
        clean_class(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [CLASS_FILE, "lab"]


@pytest.mark.parametrize(
    "argv, says",
    [
        (["class", "setup", "D", "--learners", "30", "--slots", "9"], "--slots"),
        (
            ["class", "setup", "D", "--learners", "30", "--group", "no-such-group-iolab"],
            "there is no group",
        ),
        (["class", "clean", "/nonexistent/iolab-class"], "does not exist"),
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_sentence(tmp_path: Path, argv: list[str], says: str) -> None:
    argv = [str(tmp_path / "c") if arg == "D" else arg for arg in argv]
    done = subprocess.run(
        [sys.executable, "-m", "iolab", *argv], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert says in done.stderr and len(done.stderr.strip().splitlines()) <= 2, done.stderr
    assert not (tmp_path / "c").exists()


def test_the_benchmark_counts_a_learner_overtaken_in_the_queue() -> None:
    from iolab.classmode.bench import _overtaken

    fair = [
        {"asked_at": 0.0, "got_at": 1.0},
        {"asked_at": 0.1, "got_at": 3.0},
        {"asked_at": 0.2, "got_at": 3.2},
    ]
    assert _overtaken(fair) == 0
    unfair = [*fair, {"asked_at": 0.3, "got_at": 1.1}]  # asked last, served before two
    assert _overtaken(unfair) == 2


def test_the_benchmark_bounds_a_class_by_its_cpu_seconds() -> None:
    """4 learners of 1.5 CPU-s each on 2 cores: the last cannot finish before 3 s, 3x a
    lone learner's 1 s; twice alone for all four needs 3 cores (6 CPU-s in 2 s)."""
    from iolab.classmode.bench import cpu_floor

    class_ = [{"first_cpu": 1.5}] * 4
    assert cpu_floor(class_, cores=2, lone_s=1.0) == {
        "first_cpu_total_s": 6.0,
        "first_cpu_median_s": 1.5,
        "first_result_floor_s": 3.0,
        "first_result_floor_ratio": 3.0,
        "cores_for_twice_alone": 3,
    }


def load_test(*options: str) -> subprocess.CompletedProcess:
    """`python -m iolab class load-test OPTIONS` from the checkout, its output kept."""
    return subprocess.run(
        [sys.executable, "-m", "iolab", "class", "load-test", *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root may create users: the refusal is for others")
def test_the_benchmark_refuses_an_ordinary_user_in_one_sentence() -> None:
    done = load_test("--learners", "2")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "creates real users, which needs root" in done.stderr
    with_lessons = load_test("--learners", "2", "--lessons", "1")
    assert with_lessons.returncode == 2 and with_lessons.stderr == done.stderr


def test_the_accounts_rehearsal_checks_its_lessons_before_anything_is_made() -> None:
    """Before root is even asked for: a lesson list that names no lesson is one sentence."""
    done = load_test("--lessons", "99")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--lessons '99' names no lesson with a notebook" in done.stderr


def test_one_learner_is_only_for_the_documented_path() -> None:
    """The benchmark compares a lone learner with the class: one learner alone gets one
    sentence naming the fix, before root is asked for or anything is made."""
    done = load_test("--learners", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--learners 1 leaves the benchmark nobody to compare" in done.stderr
    assert "add --lessons NN" in done.stderr


def test_a_checkout_git_will_not_list_is_copied_by_walking_it(tmp_path: Path) -> None:
    """git refuses a checkout another user owns ("dubious ownership"): the walk still copies
    the lab's files, and never the builds, caches or the workspace."""
    source = tmp_path / "checkout"
    for name in (
        "lessons/01.md",
        ".git/HEAD",
        ".venv/bin/python",
        "workspace/lab/x.csv",
        "iolab/__pycache__/a.pyc",
        "iolab/core/x.py",
    ):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text("x")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert class_setup.copy_checkout(source, fd, "copy") == 2
    finally:
        os.close(fd)
    assert sorted(
        str(p.relative_to(tmp_path / "copy"))
        for p in (tmp_path / "copy").rglob("*")
        if p.is_file() and p.name != CLASS_MARKER
    ) == ["iolab/core/x.py", "lessons/01.md"]


def test_in_a_class_the_places_are_compared_on_a_private_subset(
    class_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Lesson 02's reader grid never evicts or copies the shared dataset: the workspace site
    and the RAM-disk site are a subset of the learner's own, gone afterwards (issue 37)."""
    from iolab.core.class_folder import CLASS_SUBSET_FILES
    from iolab.storage import compare, locations

    monkeypatch.setenv(CLASS_ENV, str(class_dir))
    monkeypatch.delenv("IOLAB_WORKDIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    # On /dev/shm the copy is a private folder of this run's own (locations.private_scratch):
    # a test beside, or another run of the same user, has its own.
    shm_here = [loc for loc in locations.discover_locations(probe=False) if loc.name == "shm"]
    with compare.dataset_sites(network=False) as sites:
        places = [site.dataset_dir for site in sites]
        for place in places:
            assert class_dir not in place.parents, place
            assert len(list((place / "data").rglob("*.csv"))) == CLASS_SUBSET_FILES, place
        assert workdir() in places[0].parents  # the learner's own workspace
    assert len(places) == (2 if shm_here and shm_here[0].writable else 1)
    assert not any(place.exists() for place in places)
    assert len(list((class_dir / "dataset" / "data").rglob("*.csv"))) == DEFAULT_FILES


def test_in_a_class_the_cold_sweeps_read_a_private_copy_of_the_images(
    class_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Lesson 09's cold runs never evict the class's shared images: they read the learner's
    own copy of the samples they need, identical to the shared ones, gone afterwards."""
    from iolab.core.samples import load_images_manifest
    from iolab.ml import accelerator

    monkeypatch.setenv(CLASS_ENV, str(class_dir))
    monkeypatch.delenv("IOLAB_WORKDIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    shared = class_dir / "images"
    with accelerator.sweep_images(shared) as copy:
        assert class_dir not in copy.parents and workdir() in copy.parents
        mine = load_images_manifest(copy)["samples"]
        assert len(mine) == accelerator.CLASS_SWEEP_SAMPLES
        assert mine == load_images_manifest(shared)["samples"][: len(mine)]  # same bytes
    assert not copy.exists()
    assert len(list((shared / "files").iterdir())) == 512


def test_the_private_copy_is_made_the_way_the_class_made_its_images(
    class_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An instructor may build the class's images with other options: the copy then follows
    the class's manifest (sample size, seed, shards), not make_images.py's defaults, and asks
    for no more samples than the class has."""
    from iolab.core.builder import run_generator
    from iolab.core.samples import load_images_manifest
    from iolab.ml import accelerator

    monkeypatch.setenv(CLASS_ENV, str(class_dir))
    monkeypatch.delenv("IOLAB_WORKDIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    shared = tmp_path / "their-images"
    options = ["--count", "6", "--sample-kb", "100", "--seed", "7", "--shard-mb", "0.25"]
    run_generator("make_images.py", shared, *options)
    theirs = load_images_manifest(shared)
    with accelerator.sweep_images(shared, samples=100) as copy:
        mine = load_images_manifest(copy)
        assert mine["samples"] == theirs["samples"]  # all 6, the same bytes
        assert (mine["sample_bytes"], mine["shard_count"]) == (102_400, theirs["shard_count"])
    assert not copy.exists()


def test_in_a_class_make_labs_readers_are_timed_warm_only(
    class_dir: Path, small_dataset: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    """The readers' step cannot make the shared dataset cold for one learner, so it leaves
    the cold columns empty and says why, instead of calling warm runs cold. The class decides
    this, not the dataset: a small one is read here (the class's 7,300 files took a minute)."""
    from iolab.core.dataset import load_manifest
    from iolab.pages.lab import measure_readers

    monkeypatch.setenv(CLASS_ENV, str(class_dir))
    monkeypatch.delenv("IOLAB_WORKDIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    table = measure_readers(small_dataset, load_manifest(small_dataset), repeats=1)
    assert table["cold_wall_median_s"].isna().all() and table["wall_median_s"].notna().all()
    assert table["mean_matches_manifest"].all() and len(table) == 5
    assert "in a class the dataset is shared: timed warm only" in capsys.readouterr().out


def test_in_a_class_iolab_accelerator_runs_cold_on_a_copy_of_the_workspaces_images(
    class_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    """The lesson's live command, as a learner types it in a class: cold and warm, on a
    private copy of just the samples it reads, never on the class's images."""
    import argparse

    from iolab.cli.accelerator import setup_parser

    monkeypatch.setenv(CLASS_ENV, str(class_dir))
    monkeypatch.delenv("IOLAB_WORKDIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    parser = argparse.ArgumentParser()
    setup_parser(parser.add_subparsers(dest="command", required=True))
    argv = ["accelerator", "--compute-ms", "1", "--steps", "3", "--batch-size", "2"]
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "read your own copy of 6 samples" in out
    assert out.count("| shards ") == 2 and "| cold " in out and "| warm " in out
    assert [p.name for p in (workdir() / "tmp").iterdir()] == [MADE_MARKER]  # copy gone


def test_two_runs_of_one_user_compare_places_without_touching_each_others_copy(
    class_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A rehearsal's simulated learners share one user id, as do a user's two workspaces:
    each run's RAM-disk copy is its own, and the first to end leaves the other's alone."""
    from iolab.storage import compare

    monkeypatch.setenv(CLASS_ENV, str(class_dir))
    monkeypatch.delenv("IOLAB_WORKDIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with compare.dataset_sites(network=False) as first:
        if len(first) < 2:
            pytest.skip("no writable /dev/shm here: nothing shared to collide in")
        with compare.dataset_sites(network=False) as second:
            assert first[1].dataset_dir != second[1].dataset_dir
        assert (first[1].dataset_dir / "data.tar").is_file()  # still there for the first run
    assert not first[1].dataset_dir.exists() and not second[1].dataset_dir.exists()


#: A stand-in for `iolab lab` in a rehearsal: a first result, a heavy step in the class's
#: queue (held long enough that the other learner waits for it), its budget and the wall.
STAND_IN_LAB = """
import sys, time
from iolab.classmode.wall import publish
from iolab.core.class_folder import active_class, heavy_turn
from iolab.core.lab_dirs import results_dir
from iolab.measure.lab_budget import LabBudget
with LabBudget(results_dir() / "lab-budget.json") as budget:
    budget.begin("lessons " + sys.argv[1])
    print("  read_files: median 0.100 s warm", flush=True)
    publish(active_class())
    with heavy_turn("stand-in"):
        time.sleep(5)
"""


def test_a_rehearsal_reports_each_learner_and_leaves_the_class_as_it_was(
    class_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two simulated learners at once: each one's first result, the one queue wait their
    shared user id makes, their runs' peaks; afterwards no workspace, wall file or ticket."""
    from iolab.classmode import rehearsal

    monkeypatch.delenv(CLASS_ENV, raising=False)
    monkeypatch.setattr(rehearsal, "LEARNER_ARGV", ("-c", STAND_IN_LAB))
    before = sorted(os.listdir(class_dir / "wall")), sorted(os.listdir(class_dir / "queue"))
    said: list[str] = []
    figures = rehearsal.rehearse(class_dir, 2, "01,02", say=said.append)
    assert figures["all_finished"] and figures["learners"] == 2 and figures["lessons"] == "01,02"
    rows = figures["per_learner"]
    assert all(row["first_result_s"] is not None for row in rows)
    assert sorted(row["queue_waits"] for row in rows) == [0, 1]  # one user id: one place
    assert all(list(row["steps_s"]) == ["lessons 01,02"] for row in rows)
    assert all(row["processes_peak"] >= 1 and row["threads_peak"] >= 1 for row in rows)
    assert all(row["steps_processes"] == {"lessons 01,02": row["processes_peak"]} for row in rows)
    assert figures["processes_peak_all"] >= 3  # the rehearsal and both learners at least
    assert figures["cpu_s"] > 0 and figures["cpu_floor_s"] == round(
        figures["cpu_s"] / figures["cores"], 1
    )
    assert said[0].startswith("2 simulated learners run `python -m iolab lab --lessons 01,02`")
    assert (sorted(os.listdir(class_dir / "wall")), sorted(os.listdir(class_dir / "queue"))) == (
        before
    )
    assert not [p for p in (workdir() / "tmp").iterdir() if p.name.startswith("class-rehearsal")]
    assert len(rehearsal.rehearsal_frame(figures)) == 2


def test_a_stopped_rehearsal_leaves_no_process_of_a_learner_that_ignores_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A learner deaf to SIGTERM, whose child runs in a session of its own (as a notebook
    kernel and fio's jobs do): killing the learner's group left that child running."""
    from iolab.classmode import rehearsal
    from iolab.measure.process_tree import descendants, process_state

    proc = subprocess.Popen(
        ["/bin/sh", "-c", "trap '' TERM; setsid sleep 60 & wait"],
        start_new_session=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while len(tree := descendants(proc.pid)) < 2:
        assert time.monotonic() < deadline, "the learner's child never started"
        time.sleep(0.01)
    monkeypatch.setattr(rehearsal, "STOP_S", 0.5)
    rehearsal._stop([rehearsal.Learner("learner-1", tmp_path, proc, time.monotonic())])
    assert proc.returncode == -signal.SIGKILL
    time.sleep(0.5)  # the child, an orphan once killed, is reaped by init
    assert [pid for pid in tree if process_state(pid) not in (None, "Z")] == []


def test_a_rehearsal_of_a_bad_lesson_list_is_one_sentence_before_anything_starts(
    class_dir: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "iolab", "class", "rehearse", str(class_dir), "--lessons", "99"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "--lessons '99' names no lesson" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.slow
def test_a_rehearsal_of_the_documented_path_sees_a_learner_through_to_the_site(
    class_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real `python -m iolab lab --lessons 01` of one simulated learner: it must end
    well (a class's lab once failed on its budget page), with a first result and its
    run's peaks on record."""
    from iolab.classmode import rehearsal

    monkeypatch.delenv(CLASS_ENV, raising=False)
    figures = rehearsal.rehearse(class_dir, 1, "01", say=lambda text: None)
    (row,) = figures["per_learner"]
    assert row["exit"] == 0, "\n".join(row["last_lines"])
    assert row["first_result_s"] is not None and row["first_result_s"] <= row["done_s"]
    assert "01-file-access" in row["steps_s"] and "readers" not in row["steps_s"]
    assert row["processes_peak"] >= 2  # the lab and the notebook's kernel


def test_the_accounts_rehearsal_saves_apart_from_the_benchmark(monkeypatch, capsys) -> None:
    """The two hold different figures: --lessons must not overwrite the benchmark's JSON."""
    from iolab.classmode import rehearsal
    from iolab.cli import classroom
    from iolab.core.lab_dirs import results_dir

    recorded = json.loads((ROOT / "workshop" / "class-rehearsal-recorded.json").read_text())
    figures = recorded["runs"][0]
    monkeypatch.setattr(rehearsal, "rehearse_with_accounts", lambda learners, lessons: figures)
    benchmark = results_dir() / "class-load-test.json"
    benchmark.parent.mkdir(parents=True, exist_ok=True)
    benchmark.write_text('{"learners": 30}\n')
    try:
        args = argparse.Namespace(lessons="1", learners=1, out=None)
        assert classroom.load_test_main(args) == 0
        saved = results_dir() / "class-load-test-lessons.json"
        assert json.loads(saved.read_text()) == figures
        assert benchmark.read_text() == '{"learners": 30}\n'
        said = capsys.readouterr().out
        assert f"saved: {saved}" in said
        assert "\n1 learner, lessons 01,02, on " in said  # one, not "1 learners"
    finally:
        benchmark.unlink()
        (results_dir() / "class-load-test-lessons.json").unlink(missing_ok=True)
