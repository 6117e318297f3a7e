"""`iolab check NN` and the class wall: answers computed from the lab's facts agree with the
lessons' solutions and with real tools; a learner's file is theirs alone; the wall's spread,
outliers and progress are exact for known records; the page loads nothing from elsewhere."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from iolab.classmode.exercises import EXERCISES, shown, straddling_records, tar_bytes
from iolab.classmode.wall import (OUTLIER_FACTOR, figures_frame, outliers, progress_frame,
                                  publish, read_wall, wall_page, where_i_sit)
from iolab.core.class_folder import CLASS_ENV, CLASS_FILE, CLASS_SCHEMA, read_class
from iolab.core.workspace import user_name

ROOT = Path(__file__).resolve().parent.parent


def solution_after(lesson: str, title: str) -> str:
    """The text of the solution that follows the exercise `title` in lesson `lesson`."""
    text = next((ROOT / "lessons").glob(f"{lesson}-*.md")).read_text()
    start = text.index(f":::{{exercise}} {title}")
    solution = text.index(":::{solution}", start)
    return text[solution:text.index("\n:::\n", solution)]


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: f"{e.lesson}-{e.key}")
def test_every_answer_is_the_one_its_lesson_gives(exercise) -> None:
    solution = solution_after(exercise.lesson, exercise.title)
    if exercise.key == "du":  # the lesson names the parts: files, month folders, data/
        assert "7300 files, the 240 month directories and `data/` itself" in solution
        assert exercise.answer() == 7300 + 240 + 1
    else:  # the lessons write four-digit numbers without a separator (7300)
        written = shown(exercise.answer())
        if exercise.answer() < 10_000:
            written = written.replace(",", "")
        assert written in solution, (written, solution)


@pytest.mark.parametrize("members, size", [(20, 193), (7, 512), (3, 513), (300, 1)])
def test_the_tar_formula_matches_pythons_tarfile(members: int, size: int) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for index in range(members):
            info = tarfile.TarInfo(f"f{index}.csv")
            info.size = size
            archive.addfile(info, io.BytesIO(b"x" * size))
    assert len(buffer.getvalue()) == tar_bytes(members, size)


def test_straddling_records_are_the_ones_the_lesson_lists() -> None:
    listed = [5, 10, 15, 20, 26, 31, 36, 41, 47, 52, 57, 62]
    assert straddling_records(64, 200_000, 2**20) == len(listed)
    assert straddling_records(64, 262_144, 2**20) == 0


def iolab(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "iolab", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **(env or {})})


def test_check_says_right_or_not_yet_without_giving_the_answer_away() -> None:
    right = iolab("check", "02", "tar-size", "7,485,440")
    assert right.returncode == 0 and right.stdout.startswith("right: The size of a tar archive")
    wrong = iolab("check", "2", "tar-size", "7476224")
    assert wrong.returncode == 1 and wrong.stdout.startswith("not yet: 7,476,224 bytes is too low")
    assert "7,485,440" not in wrong.stdout and "7485440" not in wrong.stdout
    listed = iolab("check", "07")
    assert listed.returncode == 0 and listed.stdout.startswith("straddle: Find the misalignment")


@pytest.mark.parametrize("args, says", [
    (["13"], "lesson 13 has no exercise with one right answer"),
    (["02", "nope", "3"], "choose one of: tar-size, naive-opens, npy-bytes"),
    (["02", "tar-size", "seven"], "'seven' is not a number"),
    (["02", "tar-size"], "give your answer after the exercise"),
])
def test_check_refuses_bad_input_in_one_sentence(args: list[str], says: str) -> None:
    done = iolab("check", *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.fixture
def class_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A minimal finished class (its description and a sticky wall), joined."""
    root = tmp_path / "class"
    (root / "wall").mkdir(parents=True)
    (root / "wall").chmod(0o3770)
    (root / CLASS_FILE).write_text(json.dumps({
        "schema": CLASS_SCHEMA, "name": "class", "learners": 5, "slots": 2,
        "workspaces_in": "home", "made_by": user_name()}))
    monkeypatch.setenv(CLASS_ENV, str(root))
    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "ws"))
    return root


def test_a_learners_file_is_theirs_readable_by_the_class_and_keeps_earlier_checks(
        class_folder: Path) -> None:
    joined = read_class(class_folder)
    path = publish(joined, {"02-tar-size": {"right": False}})
    publish(joined, {"03-random-reads": {"right": True}})
    assert path == class_folder / "wall" / f"{user_name()}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    record = json.loads(path.read_text())
    assert record["checks"] == {"02-tar-size": {"right": False},
                                "03-random-reads": {"right": True}}
    assert [p.name for p in (class_folder / "wall").iterdir()] == [path.name]  # no partials


def test_the_wall_trusts_a_files_owner_not_its_name(class_folder: Path) -> None:
    wall = class_folder / "wall"
    (wall / "someone-else.json").write_text(json.dumps({"user": "someone-else", "checks": {}}))
    (wall / "big.json").write_text(json.dumps({"pad": "x" * 70_000}))
    (wall / "linked.json").symlink_to(wall / "someone-else.json")
    (wall / "broken.json").write_text("{not json")
    records = read_wall(read_class(class_folder))
    assert [record["user"] for record in records] == [user_name()]


def learner(user: str, node: str, cold: float) -> dict:
    return {"user": user, "node": node, "workspace_fs": "ext4",
            "readers": {"read_files": {"wall_median_s": 0.6, "cold_wall_median_s": cold,
                                       "dataset_file_opens": 7300.0}},
            "checks": {"02-tar-size": {"right": user != "dan"}}}


RECORDS = [learner("ann", "n1", 1.0), learner("bob", "n1", 1.2), learner("cat", "n2", 0.9),
           learner("dan", "n3", 4.0), learner("eve", "n2", 1.1)]


def test_spread_outliers_progress_and_rank_are_exact() -> None:
    frame = figures_frame(RECORDS)
    assert len(frame) == 5 * 3
    flagged = outliers(frame)
    assert flagged[["user", "node", "figure"]].values.tolist() == [["dan", "n3", "cold (s)"]]
    assert flagged["times_median"].iloc[0] == round(4.0 / 1.1, 2) >= OUTLIER_FACTOR
    progress = progress_frame(RECORDS, ["02-tar-size", "03-random-reads"])
    assert progress.set_index("user")["02-tar-size"].to_dict() == {
        "ann": "right", "bob": "right", "cat": "right", "dan": "tried", "eve": "right"}
    assert set(progress["03-random-reads"]) == {""}
    assert "read_files cold (s): 4.000, 5 of 5 (class median 1.100)" in where_i_sit(frame, "dan")


def test_the_page_is_self_contained(class_folder: Path) -> None:
    page = wall_page(read_class(class_folder), RECORDS, ["02-tar-size"])
    assert "data:image/png;base64," in page and "5 of 5 learners have results" in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert ">dan<" in page  # the outlier and the progress name the learner


def test_fio_figures_come_from_the_learners_own_notebook_05_unless_it_showed_the_recorded_run(
        class_folder: Path) -> None:
    from iolab.classmode.wall import FIO_FIGURES, own_fio_figures
    from iolab.core.workspace import results_dir

    executed = results_dir() / "notebooks"
    executed.mkdir()
    assert own_fio_figures() == {}  # notebook 05 not executed yet
    shutil.copy(ROOT / "notebooks" / "05-fio.ipynb", executed / "05-fio.ipynb")
    figures = own_fio_figures()
    assert set(figures) == set(FIO_FIGURES) and all(value > 0 for value in figures.values())
    record = json.loads(publish(read_class(class_folder)).read_text())
    assert record["fio"] == figures
    frame = figures_frame(read_wall(read_class(class_folder)))
    assert set(frame[frame["reader"] == "fio"]["figure"]) == set(FIO_FIGURES.values())
    (results_dir() / "not-run-here.txt").write_text(
        "05-fio: network: no FUSE here\n")  # the network part only: the local run is theirs
    assert own_fio_figures() == figures
    (results_dir() / "not-run-here.txt").write_text("05-fio: local: fio is not installed\n")
    assert own_fio_figures() == {}


def test_the_wall_command_says_who_runs_and_who_waits_in_the_queue(
        class_folder: Path, capsys: pytest.CaptureFixture) -> None:
    from iolab.cli import main as cli_main
    from iolab.core.class_queue import turn

    (class_folder / "queue").mkdir()
    (class_folder / "queue").chmod(0o3770)
    assert cli_main(["class", "wall"]) == 0
    assert "heavy-step queue (2 at a time): nobody running or waiting" in capsys.readouterr().out
    with turn(class_folder / "queue", 2, "fio"):
        assert cli_main(["class", "wall"]) == 0
    out = capsys.readouterr().out
    assert f"heavy-step queue (2 at a time): running {user_name()} (fio)\n" in out
