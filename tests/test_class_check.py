"""`iolab class preflight` (iolab.classmode): the instructor's preflight a week before a workshop.

The class's load is the recorded `make lab` run scaled exactly; Slurm's answers are read from
fake `sbatch` and `scontrol` programs put first on PATH (the lab's real one-node Slurm is
tested in tests/test_slurm.py); the class folder's permissions are judged as a shared folder
must be; the command writes the letter and the site profile and nothing else.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from iolab.classmode.letter import letter
from iolab.classmode.load import (
    IMAGE_COPY_BYTES,
    IMAGE_COPY_FILES,
    MAKE_A_SUBSET,
    RECORDED_REHEARSAL,
    RECORDED_SETUP,
    SUBSET_BYTES,
    SUBSET_FILES,
    SUBSET_SHM_BYTES,
    SWEEP_IMAGES_NOTEBOOK,
    class_load,
)
from iolab.classmode.preflight import check_class_dir, check_places, check_slurm
from iolab.core.errors import LabError
from iolab.core.workspace import repo_root
from iolab.measure.lab_budget import RECORDED
from iolab.storage.locations import discover_locations

ROOT = Path(__file__).resolve().parent.parent


def test_the_load_is_the_recorded_run_times_the_class() -> None:
    budget = json.loads((repo_root() / RECORDED).read_text())
    load = class_load(30)
    peak_files = max(p["peak"]["workspace"]["files"] for p in budget["phases"])
    each = budget["environment"]["files"] + budget["checkout"]["files"] + peak_files
    assert load.files_each == each and load.files_all == 30 * each
    assert load.bytes_all == 30 * (
        budget["environment"]["bytes"]
        + budget["checkout"]["bytes"]
        + max(p["peak"]["workspace"]["bytes"] for p in budget["phases"])
    )
    assert load.processes_all == 30 * 4 and load.recorded_on == budget["date"]


def test_processes_per_learner_are_the_most_any_rehearsed_learner_held() -> None:
    """Not the budget of one step (4): what one learner's lab held at once, the most over the
    recorded rehearsals (the whole lab's, with MPI ranks and DataLoader workers, holds more
    than the morning's two lessons), named with that run's learners, lessons, date and
    machine."""
    runs = json.loads((repo_root() / RECORDED_REHEARSAL).read_text())["runs"]
    busiest = max(runs, key=lambda run: max(e["processes_peak"] for e in run["per_learner"]))
    load = class_load(30)
    assert load.processes_each == max(
        e["processes_peak"] for run in runs for e in run["per_learner"]
    )
    assert load.threads_each == max(e["threads_peak"] for e in busiest["per_learner"])
    assert load.processes_each > 4  # a kernel and what it starts, beside the lab itself
    report = {"workspaces_in": None, "checks": [], "reservations": [], "fallbacks": []}
    text = letter(report, load, "teacher", "login1", "2026-12-01", "intro")
    assert (
        f"measured in a rehearsal of {busiest['learners']} learners running lessons "
        f"{busiest['lessons']} ({busiest['date']}, on {busiest['machine']})"
    ) in " ".join(text.split())
    assert f"| {load.processes_each} ({load.threads_each}) | {30 * load.processes_each:,} (" in text
    with pytest.raises(LabError, match="not a class size"):
        class_load(0)


def test_the_busiest_rehearsed_learner_sizes_the_processes_not_the_largest_class() -> None:
    """A run of one learner through the whole lab beats six learners through two lessons."""

    def run(learners: int, lessons: str, processes: list[int]) -> dict:
        each = [{"processes_peak": p, "threads_peak": 10 * p} for p in processes]
        return {
            "learners": learners,
            "lessons": lessons,
            "date": "d",
            "machine": "m",
            "per_learner": each,
        }

    rehearsals = {"runs": [run(6, "01,02", [7, 8, 7, 7, 7, 7]), run(1, "01,08,09", [15])]}
    load = class_load(30, rehearsals=rehearsals)
    assert (load.processes_each, load.threads_each) == (15, 150)
    assert (load.rehearsed_learners, load.rehearsed_lessons) == (1, "01,08,09")


def test_class_mode_figures_are_the_recordings_counters() -> None:
    """The shared install as the recorded class setup measured it; per learner, what the
    recorded lab wrote beyond the activity dataset: kept at the end, and the most one lesson
    added (lessons 02 and 04 with their class-mode subset); /dev/shm holds lesson 02's
    subset."""
    budget = json.loads((repo_root() / RECORDED).read_text())
    setup = json.loads((repo_root() / RECORDED_SETUP).read_text())
    load = class_load(30)
    assert (load.shared_files, load.shared_bytes) == (setup["class_files"], setup["class_bytes"])
    phases = {phase["name"]: phase for phase in budget["phases"]}

    def count(phase: str, when: str, key: str) -> int:
        return phases[phase][when]["workspace"][key]

    for key, kept, lesson, subset, images in (
        ("files", load.kept_files, load.lesson_files, SUBSET_FILES, IMAGE_COPY_FILES),
        ("bytes", load.kept_bytes, load.lesson_bytes, SUBSET_BYTES, IMAGE_COPY_BYTES),
    ):
        dataset = count("dataset", "end", key)
        assert kept == budget["phases"][-1]["end"]["workspace"][key] - dataset
        growth = {
            name: count(name, "peak", key) - count(name, "start", key)
            for name in phases
            if name != "dataset"
        }
        for name in MAKE_A_SUBSET:
            growth[name] += subset
        growth[SWEEP_IMAGES_NOTEBOOK] += images
        assert lesson == max(growth.values())
    assert (load.shm_files, load.shm_bytes) == (SUBSET_FILES, SUBSET_SHM_BYTES)
    assert load.class_files_all == 30 * (load.kept_files + load.lesson_files)
    for name, made_by in zip(
        MAKE_A_SUBSET, ("dataset_sites(", "files=CLASS_SUBSET_FILES"), strict=True
    ):  # the notebooks still make the subset the figures add
        assert made_by in (repo_root() / "notebooks" / f"{name}.ipynb").read_text(), name
    sweeps = (repo_root() / "notebooks" / f"{SWEEP_IMAGES_NOTEBOOK}.ipynb").read_text()
    assert sweeps.count("acc.sweep_images(IMAGES)") == 2  # and the copy of the images


def test_the_image_copy_figures_are_what_building_one_measures(tmp_path: Path) -> None:
    """IMAGE_COPY_* are the size of the copy lesson 09's cold runs read in a class."""
    from iolab.core.builder import run_generator
    from iolab.measure.footprint import footprint
    from iolab.ml.accelerator import CLASS_SWEEP_SAMPLES

    run_generator("make_images.py", tmp_path / "images", "--count", str(CLASS_SWEEP_SAMPLES))
    built = footprint(tmp_path / "images")
    assert built.files == IMAGE_COPY_FILES
    assert abs(built.bytes - IMAGE_COPY_BYTES) <= 100


def test_the_subset_figures_are_what_building_one_measures(tmp_path: Path) -> None:
    """SUBSET_* are a real subset's size: entries exactly, bytes within a few (archive.json's
    note on tar's default format varies by some digits), and its memory in /dev/shm."""
    from iolab.core.builder import build_dataset
    from iolab.core.class_folder import CLASS_SUBSET_FILES
    from iolab.measure.footprint import footprint

    built = footprint(build_dataset(tmp_path / "dataset", files=CLASS_SUBSET_FILES).dataset_dir)
    assert built.files == SUBSET_FILES
    assert abs(built.bytes - SUBSET_BYTES) <= 100
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="iolab-subset-test-", dir=shm))
        try:
            on_shm = footprint(
                build_dataset(folder / "dataset", files=CLASS_SUBSET_FILES).dataset_dir
            )
        finally:
            shutil.rmtree(folder)
        assert on_shm.files == SUBSET_FILES
        assert abs(on_shm.allocated_bytes - SUBSET_SHM_BYTES) <= 8192  # two pages


def fake_slurm(folder: Path, sbatch_exit: int, reservations: str) -> None:
    """sbatch that answers --test-only like Slurm does, and scontrol listing `reservations`."""
    folder.mkdir()
    (folder / "sbatch").write_text(
        "#!/bin/sh\n"
        f"[ {sbatch_exit} = 0 ] && echo 'sbatch: Job 42 to start at 2026-12-01T09:00:00 using 1 "
        "processors on nodes n1 in partition debug' >&2\n"
        f"[ {sbatch_exit} = 0 ] || echo 'sbatch: error: Invalid account or account/partition "
        "combination specified' >&2\n"
        f"exit {sbatch_exit}\n"
    )
    (folder / "scontrol").write_text(f"#!/bin/sh\nprintf '%s' '{reservations}'\n")
    for name in ("sbatch", "scontrol"):
        (folder / name).chmod(0o755)


RESERVATION = (
    "ReservationName=iolab-day StartTime=2026-12-01T09:00:00 EndTime=2026-12-01T17:00:00 "
    "Duration=08:00:00 Nodes=n1 NodeCnt=1 Users=alice,bob Accounts=(null)\n"
)


def slurm_answers(
    folder: Path, monkeypatch, sbatch_exit: int, reservations: str, wanted: str | None
):
    """check_slurm() against the fake Slurm in `folder`, asking for reservation `wanted`."""
    fake_slurm(folder, sbatch_exit, reservations)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    if wanted is None:
        monkeypatch.delenv("SBATCH_RESERVATION", raising=False)
    else:
        monkeypatch.setenv("SBATCH_RESERVATION", wanted)
    return check_slurm()


def test_slurm_that_takes_the_job_and_shows_the_reservation(tmp_path: Path, monkeypatch) -> None:
    submit, reserved = slurm_answers(tmp_path / "bin", monkeypatch, 0, RESERVATION, "iolab-day")
    assert submit.state == "ok" and "Job 42 to start" in submit.found
    assert (reserved.state, reserved.found) == ("ok", "visible: iolab-day")


def test_slurm_that_refuses_the_job_or_lacks_the_reservation(tmp_path: Path, monkeypatch) -> None:
    submit, reserved = slurm_answers(tmp_path / "bin", monkeypatch, 1, RESERVATION, "another-day")
    assert submit.state == "fail" and "Invalid account" in submit.found
    assert "SBATCH_ACCOUNT" in submit.todo
    assert (
        reserved.state == "fail"
        and "another-day" in reserved.found
        and "iolab-day" in reserved.found
    )
    nothing = "No reservations in the system\n"
    assert slurm_answers(tmp_path / "bin2", monkeypatch, 0, nothing, None)[1].state == "warn"


@pytest.mark.parametrize(
    ("message", "fix"),
    [
        ("Batch job submission failed: Invalid partition name specified", "SBATCH_PARTITION to a"),
        ("Batch job submission failed: Invalid qos specification", "set SBATCH_QOS"),
        (
            "Batch job submission failed: Job violates accounting/QOS policy (job submit limit, "
            "user's size and/or time limits)",
            "ask the admins which the class should use",
        ),
        (
            "Batch job submission failed: Requested time limit is invalid (missing or exceeds "
            "some limit)",
            "refuses a 5-minute job",
        ),
        ("Batch job submission failed: Access/permission denied", "ask the admins for access"),
        ("Unable to contact slurm controller (connect failure)", "did not answer"),
        ("something only this site says", "read Slurm's message above"),
    ],
)
def test_each_slurm_refusal_gets_its_own_fix(
    tmp_path: Path, monkeypatch, message: str, fix: str
) -> None:
    """The letter's fix follows Slurm's words, not one stock answer for every refusal."""
    folder = tmp_path / "bin"
    folder.mkdir()
    said = shlex.quote(f"sbatch: error: {message}")
    (folder / "sbatch").write_text(f"#!/bin/sh\necho {said} >&2\nexit 1\n")
    (folder / "scontrol").write_text("#!/bin/sh\necho 'No reservations in the system'\n")
    for name in ("sbatch", "scontrol"):
        (folder / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    submit, _ = check_slurm()
    assert submit.state == "fail" and message in submit.found
    assert fix in submit.todo
    assert ("SBATCH_ACCOUNT" in submit.todo) == ("read Slurm" in fix)


def test_no_slurm_is_a_fallback_not_a_failure(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing here
    submit, reserved = check_slurm()
    assert (submit.state, reserved.state) == ("warn", "warn")
    assert "job scripts" in submit.todo


@pytest.mark.parametrize(
    "mode, state, says",
    [
        (0o2750, "ok", "group-readable"),
        (0o770, "fail", "chmod go-w"),
        (0o757, "fail", "chmod go-w"),
        (0o700, "warn", "chmod g+rx"),
    ],
)
def test_the_class_folder_is_shared_but_never_writable_by_others(
    tmp_path: Path, mode: int, state: str, says: str
) -> None:
    folder = tmp_path / "class"
    folder.mkdir()
    folder.chmod(mode)
    check = check_class_dir(folder)
    assert check.state == state and says in check.found + check.todo
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert check_class_dir(link).state == "fail"  # a link is not the folder itself
    assert check_class_dir(tmp_path / "missing").todo.startswith("create it")


def test_room_is_judged_for_the_whole_class(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SCRATCH", str(tmp_path))  # one place, two names: the first stays
    places = discover_locations(probe=False)
    home = next(p for p in places if p.name == "home")
    fits = class_load(1)
    checks, chosen = check_places(fits, places)
    assert chosen is not None and chosen.base == home.base
    too_many = class_load(500)
    crowded = [
        p
        if p.name != "home"
        else type(p)(**{**p.__dict__, "free_inodes": too_many.class_files_all - 1})
        for p in places
    ]
    checks, chosen = check_places(too_many, crowded)
    room = next(c for c in checks if c.name == "room in home")
    assert room.state == "fail" and f"{too_many.class_files_all:,} inodes needed" in room.found
    assert chosen is None or chosen.name != "home"


def test_each_place_shows_the_quota_its_tool_states(tmp_path: Path, monkeypatch) -> None:
    """The preflight quotes `quota` for each place, and says so when no tool answers."""
    monkeypatch.setenv("HOME", str(tmp_path))
    tools = tmp_path / "bin"
    tools.mkdir()
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    quota = tools / "quota"
    quota.write_text(
        '#!/bin/sh\n[ "$1 $2 $3" = "-s -w -f" ] || exit 1\n'
        "echo 'Disk quotas for user alice (uid 1000):'\n"
        'echo "$4 12M 50G 55G - 8123 500k 550k -"\n'
    )
    quota.chmod(0o755)
    checks, _ = check_places(class_load(1), discover_locations(probe=False))
    home = next(c for c in checks if c.name == "room in home")
    assert "your quota: Disk quotas for user alice (uid 1000): | " in home.found
    assert "8123 500k 550k" in home.found
    quota.unlink()
    checks, _ = check_places(class_load(1), discover_locations(probe=False))
    home = next(c for c in checks if c.name == "room in home")
    assert home.found.endswith("your quota: unknown (neither `lfs quota` nor `quota` answered)")


def test_the_command_writes_the_letter_and_the_profile(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "IOLAB_WORKDIR": str(tmp_path / "ws"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab",
            "class",
            "preflight",
            "--learners",
            "25",
            "--class-dir",
            str(tmp_path),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # the two reports, in a folder the lab made (marked, so `clean` may remove it)
    assert sorted(p.name for p in out.iterdir()) == [
        ".iolab-made",
        "letter.md",
        "site-profile.json",
    ]
    profile = json.loads((out / "site-profile.json").read_text())
    load = class_load(25)
    assert profile["learners"] == 25 and profile["load"]["files_all"] == load.files_all
    assert {c["name"] for c in profile["checks"]} >= {
        "ptrace",
        "fuse",
        "slurm",
        "reservation",
        "python",
        "class folder",
    }
    text = (out / "letter.md").read_text()
    assert "with `python -m iolab class preflight`." in text  # the command's name today
    assert f"| the shared install (read-only) | {load.shared_files:,} files, " in text
    assert f"| {load.class_files_each:,} files, " in text
    assert f"{load.class_files_all:,} files, " in text
    assert f"would take {load.files_each:,} files" in text and f"{load.files_all:,} files" in text
    assert "Learners install\nnothing." in text and "learners install before" not in text
    assert f"all at once) | | 4,000 | {25 * 4000:,} |" in text  # 2 nodes x 2 tasks x 1000 files
    assert "CoreCnt=200" in text  # 25 learners x 8 tasks (tests/test_reservation.py)
    assert "scontrol create reservation" in text
    assert "Only root or the Slurm user can create one" in text.replace("\n", " ")
    assert not (tmp_path / "ws").exists()  # --out given: nothing else written


#: The lab's third-party packages, which a cluster's system python3 usually lacks.
LAB_PACKAGES = ("pandas", "numpy", "matplotlib", "scipy", "nbformat", "jupyter_client")


def test_the_preflight_runs_on_a_python_without_the_labs_packages(tmp_path: Path) -> None:
    """The natural first command, before any environment exists: `/usr/bin/python3 -m iolab
    class preflight` on a cluster whose python3 has none of the lab's packages."""
    out = tmp_path / "out"
    blocked = f"import sys; sys.modules.update(dict.fromkeys({LAB_PACKAGES!r}))"
    argv = ["iolab", "class", "preflight", "--learners", "3", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-c", f"{blocked}; sys.argv = {argv!r}; from iolab.cli import run; run()"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "IOLAB_WORKDIR": str(tmp_path / "ws"), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "letter.md").read_text().startswith("# A storage I/O workshop for 3 learners")
    assert json.loads((out / "site-profile.json").read_text())["learners"] == 3


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--learners", "0"], "--learners 0 is out of range"),
        (["--learners", "many"], "whole number"),
        (["--learners", "3", "--out", ""], "empty value"),
        (["--learners", "3", "--out", "{a_file}/letters"], "give --out a folder you can write"),
    ],
)
def test_bad_input_is_one_sentence(tmp_path: Path, argv: list[str], says: str) -> None:
    a_file = tmp_path / "a-file"
    a_file.touch()
    argv = [arg.replace("{a_file}", str(a_file)) for arg in argv]
    proc = subprocess.run(
        [sys.executable, "-m", "iolab", "class", "preflight", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, "IOLAB_WORKDIR": str(tmp_path / "ws")},
    )
    assert proc.returncode == 2 and says in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_the_letter_names_what_was_not_found(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no strace, sshfs, sbatch
    from iolab.classmode.preflight import preflight

    load = class_load(12)
    report = preflight(load, None)
    text = letter(report, load, "teacher", "login1", "2026-12-01")
    assert text.startswith("# A storage I/O workshop for 12 learners on login1")
    for tool in ("strace", "sshfs", "sbatch"):
        assert f"without {tool}:" in text
    assert report["checks"][0]["state"] == "warn" and stat.S_ISDIR(os.stat(tmp_path).st_mode)


def test_the_letters_job_figures_are_the_job_scripts_defaults() -> None:
    """The storm's size in the letter is what demos/slurm/metadata-storm.sbatch does unless
    told otherwise, and the nodes are what lesson 08 submits with."""
    from iolab.classmode import load as class_load_module

    script = (ROOT / "demos" / "slurm" / "metadata-storm.sbatch").read_text()
    assert re.search(r"^#SBATCH --ntasks-per-node=(\d+)$", script, re.M).group(1) == str(
        class_load_module.STORM_TASKS_PER_NODE
    )
    files, most = class_load_module.STORM_FILES_PER_TASK, class_load_module.STORM_MAX_TOTAL
    assert f"FILES=${{IOLAB_STORM_FILES:-{files}}}" in script
    assert f"STORM_MAX_TOTAL=${{IOLAB_STORM_MAX_TOTAL:-{most}}}" in script
    lesson = (ROOT / "lessons" / "08-mpi-io.md").read_text()
    assert (
        f"sbatch --nodes={class_load_module.JOB_NODES} demos/slurm/metadata-storm.sbatch" in lesson
    )


def test_the_fallbacks_follow_their_own_checks(monkeypatch) -> None:
    """A tool's fallback is listed when the check named for it is not ok, and only then."""
    from iolab.classmode import preflight

    monkeypatch.setattr(
        preflight, "check_ptrace", lambda: preflight.Check("ptrace", "ok", "strace may trace")
    )
    monkeypatch.setattr(
        preflight, "check_fuse", lambda: preflight.Check("fuse", "warn", "sshfs is not installed")
    )
    monkeypatch.setattr(
        preflight,
        "check_slurm",
        lambda: (
            preflight.Check("slurm", "ok", "sbatch accepts a job"),
            preflight.Check("reservation", "warn", "no reservation is visible to you"),
        ),
    )
    report = preflight.preflight(class_load(1), None)
    assert report["fallbacks"] == [f"without sshfs: {preflight.FALLBACKS['sshfs']}"]
