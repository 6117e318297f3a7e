"""`iolab answer NN` and the class wall: answers computed from the lab's facts agree with the
lessons' solutions and with real tools; a learner's file is theirs alone; the wall's spread,
outliers and progress are exact for known records; the page loads nothing from elsewhere."""

from __future__ import annotations

import argparse
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

from iolab.classmode.exercises import (
    EXERCISES,
    given_value,
    shown,
    straddling_records,
    tar_bytes,
)
from iolab.classmode.wall import (
    OUTLIER_FACTOR,
    figures_frame,
    learner_name,
    not_on_the_wall,
    outliers,
    progress_frame,
    publish,
    read_wall,
    scan_wall,
    three_digits,
    wall_page,
    where_i_sit,
)
from iolab.cli.answer import main as answer_main
from iolab.core.class_folder import CLASS_ENV, CLASS_FILE, CLASS_SCHEMA, read_class
from iolab.core.errors import LabError
from iolab.core.workspace import user_name

ROOT = Path(__file__).resolve().parent.parent


def solution_after(lesson: str, title: str) -> str:
    """The text of the solution that follows the exercise `title` in lesson `lesson`."""
    text = next((ROOT / "lessons").glob(f"{lesson}-*.md")).read_text()
    start = text.index(f":::{{exercise}} {title}")
    solution = text.index(":::{solution}", start)
    return text[solution : text.index("\n:::\n", solution)]


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
    return subprocess.run(
        [sys.executable, "-m", "iolab", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
def test_answer_says_right_or_not_yet_without_giving_the_answer_away() -> None:
    right = iolab("answer", "02", "tar-size", "7,485,440")
    assert right.returncode == 0 and right.stdout.startswith("right: The size of a tar archive")
    wrong = iolab("answer", "2", "tar-size", "7476224")
    assert wrong.returncode == 1 and wrong.stdout.startswith("not yet: 7,476,224 bytes is too low")
    assert "7,485,440" not in wrong.stdout and "7485440" not in wrong.stdout
    listed = iolab("answer", "07")
    assert listed.returncode == 0 and listed.stdout.startswith("straddle: Find the misalignment")


def exercise(lesson: str, key: str):
    return next(e for e in EXERCISES if (e.lesson, e.key) == (lesson, key))


@pytest.mark.parametrize(
    "typed, unit, value",
    [
        ("7,485,440", "bytes", 7_485_440),
        ("7485440 bytes", "bytes", 7_485_440),
        ("7310 KiB", "bytes", 7_485_440),
        ("7.48544 mb", "bytes", 7_485_440),
        ("36.5", "s", 36.5),
        ("36500 ms", "s", 36.5),
        ("2 min", "s", 120),
        ("31 calls", "calls", 31),
        ("31 call", "calls", 31),
    ],
)
def test_an_answer_may_carry_its_unit(typed: str, unit: str, value: float) -> None:
    assert given_value(typed, unit) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize(
    "typed, unit, says",
    [
        ("36 s", "bytes", "this exercise asks for bytes, and 's' is not a unit of bytes"),
        ("3 MiB", "s", "this exercise asks for s, and 'MiB' is not a unit of s"),
        ("seven", "bytes", "'seven' is not a number"),
        ("1.2.3", "bytes", "'1.2.3' is not a number"),
    ],
)
def test_an_answer_in_a_unit_of_something_else_is_refused(typed: str, unit: str, says: str):
    with pytest.raises(LabError, match=re.escape(says)):
        given_value(typed, unit)


def test_a_right_figure_in_another_unit_gets_a_hint_not_the_answer() -> None:
    tar, reads = exercise("02", "tar-size"), exercise("03", "random-reads")
    assert tar.judge(7310) == (
        False,
        "not yet: 7,310 bytes is too low, but it is the right figure in KiB: give it in bytes "
        "(or type the unit after it)",
    )
    assert reads.judge(36_500)[1].startswith("not yet: 36,500 s is too high, but it is the right")
    assert "in ms" in reads.judge(36_500)[1]
    rounded = tar.judge(given_value("7.1386 MiB", "bytes"))
    assert rounded[0] is False and "not a whole number" in rounded[1]
    assert "7,485,440" not in rounded[1]


@pytest.mark.parametrize(
    "args, says",
    [
        (["13"], "lesson 13 has no exercise with one right answer"),
        (["02", "nope", "3"], "choose one of: tar-size, naive-opens, npy-bytes"),
        (["02", "tar-size", "seven"], "'seven' is not a number"),
        (["02", "tar-size"], "give your answer after the exercise"),
    ],
)
@pytest.mark.slow
def test_answer_refuses_bad_input_in_one_sentence(args: list[str], says: str) -> None:
    done = iolab("answer", *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.fixture
def class_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A minimal finished class (its description and a sticky wall), joined."""
    root = tmp_path / "class"
    (root / "wall").mkdir(parents=True)
    (root / "wall").chmod(0o3770)
    (root / CLASS_FILE).write_text(
        json.dumps(
            {
                "schema": CLASS_SCHEMA,
                "name": "class",
                "learners": 5,
                "slots": 2,
                "workspaces_in": "home",
                "made_by": user_name(),
            }
        )
    )
    monkeypatch.setenv(CLASS_ENV, str(root))
    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "ws"))
    return root


def test_a_learners_file_is_theirs_readable_by_the_class_and_keeps_earlier_checks(
    class_folder: Path,
) -> None:
    joined = read_class(class_folder)
    path = publish(joined, {"02-tar-size": {"right": False}})
    publish(joined, {"03-random-reads": {"right": True}})
    assert path == class_folder / "wall" / f"{learner_name(os.getuid())}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    record = json.loads(path.read_text())
    assert record["checks"] == {"02-tar-size": {"right": False}, "03-random-reads": {"right": True}}
    assert [p.name for p in (class_folder / "wall").iterdir()] == [path.name]  # no partials


def test_a_right_answer_stays_right_whatever_comes_after_it(class_folder: Path) -> None:
    joined = read_class(class_folder)
    publish(joined, {"02-tar-size": {"right": False}})
    publish(joined, {"02-tar-size": {"right": True}, "03-random-reads": {"right": False}})
    path = publish(joined, {"02-tar-size": {"right": False}})
    checks = json.loads(path.read_text())["checks"]
    assert checks == {"02-tar-size": {"right": True}, "03-random-reads": {"right": False}}


ME = learner_name(os.getuid())


def fallback(number: int) -> str:
    """A name of mine publish may fall back to (ME~HEX.json)."""
    return f"{ME}~{number:016x}.json"


def wall_record(**changed: object) -> dict:
    """A wall file as publish writes it, with `changed` fields."""
    return {
        "node": "n1",
        "workspace_fs": "ext4",
        "user": "whoever",
        "updated": "10:00",
        "readers": {
            "read_files": {
                "wall_median_s": 0.5,
                "cold_wall_median_s": 1.0,
                "dataset_file_opens": 7300.0,
                "total_calls": None,
            }
        },
        "fio": {},
        "checks": {"02-tar-size": {"right": True, "at": "10:00:00"}},
        **changed,
    }


GOOD = json.dumps(wall_record())
#: Files a classmate (or a broken run) may leave under a learner's name, and why each is out.
MALFORMED = {
    "checks a list": (json.dumps(wall_record(checks=[1])), "not a wall record"),
    "readers a list": (json.dumps(wall_record(readers=["x"])), "not a wall record"),
    "a check not an object": (
        json.dumps(wall_record(checks={"02-tar-size": 1})),
        "not a wall record",
    ),
    "right not true or false": (
        json.dumps(wall_record(checks={"02-x": {"right": "yes"}})),
        "not a wall record",
    ),
    "escape codes in a reader": (
        json.dumps(wall_record(readers={"\x1b[2Jr": {}})),
        "not a wall record",
    ),
    "escape codes in the node": (
        json.dumps(wall_record(node="n1\x1b]0;owned\x07")),
        "not a wall record",
    ),
    "mathtext in a reader": (
        json.dumps(wall_record(readers={"r$\\frac{$": {}})),
        "not a wall record",
    ),
    "an infinite figure": (GOOD.replace("0.5", "1e999"), "not a wall record"),
    "an unknown figure": (json.dumps(wall_record(readers={"r": {"evil": 1}})), "not a wall record"),
    "nested 32,000 deep": ("[" * 32_000 + "]" * 32_000, "not valid JSON"),
    "not JSON": ("{not json", "not valid JSON"),
    "not an object": ("[]", "not a wall record"),
    "larger than the lab writes": (json.dumps(wall_record(pad="x" * 70_000)), "larger than 64 KiB"),
}


@pytest.mark.parametrize("content, why", MALFORMED.values(), ids=list(MALFORMED))
@pytest.mark.slow
def test_a_malformed_file_is_left_out_counted_and_the_wall_still_renders(
    class_folder: Path, capsys: pytest.CaptureFixture, content: str, why: str
) -> None:
    from iolab.cli import main as cli_main

    wall = class_folder / "wall"
    (wall / f"{ME}.json").write_text(GOOD)
    (wall / fallback(1)).write_text(content)
    os.utime(wall / fallback(1), (2e9, 2e9))  # the newest of mine: it would be the one read
    found = scan_wall(read_class(class_folder))
    assert [record["user"] for record in found.records] == [ME]
    assert found.ignored == {why: 1}
    assert cli_main(["class", "wall"]) == 0
    out = capsys.readouterr().out
    assert f"class wall: 1 of 5 learners; 1 file ignored (1 {why}) -> " in out
    assert "\x1b" not in out


def test_links_fifos_folders_and_misnamed_files_are_left_out_without_waiting(
    class_folder: Path,
) -> None:
    wall = class_folder / "wall"
    (wall / f"{ME}.json").write_text(GOOD)
    (wall / "someone-else.json").write_text(GOOD)  # mine, but named after someone else
    (wall / "notes.txt").write_text("hello")
    os.mkfifo(wall / fallback(1))  # opened to read, a FIFO would wait for a writer forever
    (wall / fallback(2)).symlink_to(wall / f"{ME}.json")
    (wall / fallback(3)).mkdir()
    found = scan_wall(read_class(class_folder))
    assert [record["user"] for record in found.records] == [ME]
    assert found.ignored == {"not named after its owner": 2, "not a regular file": 2, "a link": 1}
    assert found.ignored_text() == (
        "5 files ignored (1 a link, 2 not a regular file, 2 not named after its owner)"
    )


def test_a_learner_counts_once_whatever_files_or_hard_links_they_keep(
    class_folder: Path, capsys: pytest.CaptureFixture
) -> None:
    from iolab.cli import main as cli_main

    wall = class_folder / "wall"
    (wall / f"{ME}.json").write_text(json.dumps(wall_record(node="old")))
    os.utime(wall / f"{ME}.json", (1e9, 1e9))
    (wall / fallback(1)).write_text(json.dumps(wall_record(node="new")))
    os.link(wall / fallback(1), wall / fallback(2))
    found = scan_wall(read_class(class_folder))
    assert [(record["user"], record["node"]) for record in found.records] == [(ME, "new")]
    assert found.ignored == {"an older copy of a learner's file": 2}
    assert len(figures_frame(found.records)) == 3  # one learner's figures, once
    assert cli_main(["class", "wall"]) == 0
    assert (
        "class wall: 1 of 5 learners; 2 files ignored (2 an older copy of a learner's file)"
        in capsys.readouterr().out
    )


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_a_file_counts_for_its_owner_only_under_their_name(class_folder: Path) -> None:
    wall = class_folder / "wall"
    (wall / "uid61001.json").write_text(GOOD)  # a learner without a passwd entry: named so
    os.chown(wall / "uid61001.json", 61001, 61001)
    (wall / f"{ME}.json").write_text(GOOD)
    os.chown(wall / f"{ME}.json", 61002, 61002)  # a classmate's file under my name
    found = scan_wall(read_class(class_folder))
    assert [record["user"] for record in found.records] == ["uid61001"]
    assert found.ignored == {"not named after its owner": 1}


def test_my_own_broken_file_does_not_stop_publishing(class_folder: Path) -> None:
    (class_folder / "wall" / f"{ME}.json").write_text(json.dumps({"checks": [1]}))
    path = publish(read_class(class_folder), {"02-tar-size": {"right": True}})
    assert json.loads(path.read_text())["checks"] == {"02-tar-size": {"right": True}}
    assert scan_wall(read_class(class_folder)).ignored == {}


@pytest.mark.slow
def test_answer_and_lab_go_on_without_a_wall(
    class_folder: Path, capsys: pytest.CaptureFixture
) -> None:
    from iolab.cli.lab import to_the_wall

    (class_folder / "wall").rmdir()
    done = iolab(
        "answer",
        "02",
        "tar-size",
        "7,485,440",
        env={CLASS_ENV: str(class_folder), "IOLAB_WORKDIR": str(class_folder.parent / "ws")},
    )
    assert done.returncode == 0 and done.stdout.startswith("right: ")
    assert "(not on the class wall: cannot write your results to the class wall" in done.stderr
    assert "Traceback" not in done.stderr
    to_the_wall(read_class(class_folder))
    assert "  not on the class wall: cannot write" in capsys.readouterr().out


def learner(user: str, node: str, cold: float) -> dict:
    return {
        "user": user,
        "node": node,
        "workspace_fs": "ext4",
        "readers": {
            "read_files": {
                "wall_median_s": 0.6,
                "cold_wall_median_s": cold,
                "dataset_file_opens": 7300.0,
            }
        },
        "checks": {"02-tar-size": {"right": user != "dan"}},
    }


RECORDS = [
    learner("ann", "n1", 1.0),
    learner("bob", "n1", 1.2),
    learner("cat", "n2", 0.9),
    learner("dan", "n3", 4.0),
    learner("eve", "n2", 1.1),
]


def test_spread_outliers_progress_and_rank_are_exact() -> None:
    frame = figures_frame(RECORDS)
    assert len(frame) == 5 * 3
    flagged = outliers(frame)
    assert flagged[["user", "node", "figure"]].values.tolist() == [["dan", "n3", "cold (s)"]]
    assert flagged["times_median"].iloc[0] == round(4.0 / 1.1, 2) >= OUTLIER_FACTOR
    progress = progress_frame(RECORDS, ["02-tar-size", "03-random-reads"])
    assert progress.set_index("user")["02-tar-size"].to_dict() == {
        "ann": "right",
        "bob": "right",
        "cat": "right",
        "dan": "tried",
        "eve": "right",
    }
    assert set(progress["03-random-reads"]) == {""}
    assert "read_files cold (s): 4.000, 5 of 5 (class median 1.100)" in where_i_sit(frame, "dan")


def test_the_page_is_self_contained(class_folder: Path) -> None:
    page = wall_page(read_class(class_folder), RECORDS, ["02-tar-size"])
    assert "data:image/png;base64," in page and "5 of 5 learners have results" in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert ">dan<" in page  # the outlier and the progress name the learner


def test_fio_figures_come_from_the_learners_own_notebook_05_unless_it_showed_the_recorded_run(
    class_folder: Path,
) -> None:
    from iolab.classmode.wall import FIO_FIGURES, own_fio_figures
    from iolab.core.lab_dirs import results_dir

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
        "05-fio: network: no FUSE here\n"
    )  # the network part only: the local run is theirs
    assert own_fio_figures() == figures
    (results_dir() / "not-run-here.txt").write_text("05-fio: local: fio is not installed\n")
    assert own_fio_figures() == {}


def test_the_wall_command_says_who_runs_and_who_waits_in_the_queue(
    class_folder: Path, capsys: pytest.CaptureFixture
) -> None:
    from iolab.cli import main as cli_main
    from iolab.core.class_queue import turn

    (class_folder / "queue").mkdir()
    (class_folder / "queue").chmod(0o3770)
    assert cli_main(["class", "wall"]) == 0
    assert "heavy-step queue (2 at a time): nobody running or waiting" in capsys.readouterr().out
    with turn(class_folder / "queue", 2, "fio"):
        assert cli_main(["class", "wall"]) == 0
    out = capsys.readouterr().out
    assert f"heavy-step queue (2 at a time): running {ME} (fio)\n" in out


def test_the_wall_rounds_figures_to_three_digits() -> None:
    shown_as = [three_digits(v) for v in (7694.322271, 0.012345, 1.2345, 999.6, 0.0)]
    assert shown_as == ["7,694", "0.0123", "1.23", "1,000", "0"]


def test_the_page_says_how_it_stays_fresh_and_shows_the_queue(class_folder: Path) -> None:
    joined = read_class(class_folder)
    once = wall_page(joined, RECORDS, ["02-tar-size"], queue="heavy-step queue: nobody <b>")
    assert 'http-equiv="refresh"' not in once and "rerun <code>iolab class wall</code>" in once
    assert "<h2>Heavy steps now</h2><p>heavy-step queue: nobody &lt;b&gt;</p>" in once
    assert 'name="viewport"' in once and '<div class="scroll">' in once
    assert "7694.322271" not in once
    watched = wall_page(joined, RECORDS, ["02-tar-size"], refresh_s=30)
    assert '<meta http-equiv="refresh" content="30">' in watched
    assert "reloads itself every 30 s while <code>iolab class wall --watch 30</code>" in watched


def test_the_wall_names_the_class_group_members_with_nothing_on_it(
    class_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Who has not joined yet: the group's members less those with results and less the
    instructor, in order; a folder whose group has no entry lists nobody."""
    import grp

    from iolab.classmode import wall

    joined = read_class(class_folder)
    members = ["zoe", "ann", joined.made_by, "bob", "yan", "cat", "dan", "eve"]
    group = grp.struct_group(("class", "x", os.stat(class_folder).st_gid, members))
    monkeypatch.setattr(wall.grp, "getgrgid", lambda gid: group)
    assert not_on_the_wall(joined, RECORDS) == ["yan", "zoe"]
    page = wall_page(joined, RECORDS, ["02-tar-size"], absent=["yan", "zoe"])
    assert "<h2>Nothing on the wall yet (2)</h2><p>yan, zoe</p>" in page

    def no_such_group(gid: int) -> grp.struct_group:
        raise KeyError(gid)

    monkeypatch.setattr(wall.grp, "getgrgid", no_such_group)
    assert not_on_the_wall(joined, RECORDS) == []


def test_dots_are_anonymous_unless_the_instructor_asks_for_names() -> None:
    import io as bytes_io

    import matplotlib.pyplot as plt

    from iolab.classmode.wall import TIME_FIGURES
    from iolab.classmode.wall_plots import strip_plot

    frame = figures_frame([*RECORDS, learner("$x$", "n1", 2.0)])
    anonymous = strip_plot(frame, TIME_FIGURES)
    named = strip_plot(frame, TIME_FIGURES, named=True)
    assert anonymous is not None and named is not None
    assert [text for ax in anonymous.axes for text in ax.texts] == []
    names = sorted(text.get_text() for ax in named.axes for text in ax.texts)
    assert names == sorted(2 * ["ann", "bob", "cat", "dan", "eve", r"\$x\$"])  # two panels
    named.savefig(bytes_io.BytesIO(), format="png")  # a $ in a name is text, not mathtext
    assert [ax.get_position().x0 for ax in named.axes][0] == named.axes[1].get_position().x0
    plt.close("all")


def test_the_wall_watch_rebuilds_until_ctrl_c(
    class_folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from iolab.cli import classroom
    from iolab.cli import main as cli_main

    naps: list[float] = []

    def nap(seconds: float) -> None:  # the instructor presses Ctrl-C during the third wait
        naps.append(seconds)
        if len(naps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(classroom.time, "sleep", nap)
    out = class_folder / "wall-watch.html"
    assert cli_main(["class", "wall", "--watch", "15", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert naps == [15, 15, 15] and said.count(" class wall: ") == 3
    assert said.rstrip().endswith("stopped watching; the page stays as last built")
    assert '<meta http-equiv="refresh" content="15">' in out.read_text()


@pytest.mark.parametrize("seconds", ["5", "0", "4000"])
def test_a_watch_out_of_range_is_refused(class_folder: Path, seconds: str) -> None:
    from iolab.cli import main as cli_main
    from iolab.core.errors import LabError

    with pytest.raises(LabError, match=f"--watch {seconds} is out of range; choose 10 to 3,600 s"):
        cli_main(["class", "wall", "--watch", seconds])


#: A classmate's file under the victim's name, made as the classmate (stdlib only).
PLANT = """
import json, sys
with open(sys.argv[1], "w") as out:
    json.dump({"checks": [1], "user": "victim"}, out)
"""


def check_as(uid: int, gid: int, home: Path) -> int:
    """`iolab answer 02 tar-size 7485440` in a forked child running as `uid` (the modules it
    needs are loaded already: the interpreter's own folder may be closed to other users)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.environ.update(
                {
                    "HOME": str(home),
                    "IOLAB_WORKDIR": str(home / "ws"),
                    "XDG_STATE_HOME": str(home / "state"),
                }
            )
            code = answer_main(argparse.Namespace(lesson="02", key="tar-size", value="7485440"))
        except BaseException as err:  # noqa: BLE001 - reported through the exit code
            print(f"the victim's check failed: {err!r}", file=sys.stderr)
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.needs("users")
def test_a_classmates_file_under_my_name_does_not_stop_my_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Real users: the classmate plants wall/<victim>.json; the victim's check still passes and
    their answer reaches the wall under a name of theirs; the classmate's file is counted out."""
    import pwd
    import tempfile

    from iolab.classmode.bench import make_learners, remove_learners

    victim, classmate = "iolab-wall-victim", "iolab-wall-mallory"
    top = Path(tempfile.mkdtemp(prefix="iolab-wall-users-", dir="/tmp"))
    top.chmod(0o755)
    made = make_learners([victim, classmate], "iolab-wall-test", top)
    try:
        root = top / "class"
        (root / "wall").mkdir(parents=True)
        (root / "wall").chmod(0o1777)  # the class's group, played by everyone: sticky
        (root / CLASS_FILE).write_text(
            json.dumps(
                {
                    "schema": CLASS_SCHEMA,
                    "name": "class",
                    "learners": 3,
                    "slots": 1,
                    "workspaces_in": "home",
                    "made_by": "root",
                }
            )
        )
        root.chmod(0o755)
        planted = root / "wall" / f"{victim}.json"
        subprocess.run(
            ["runuser", "-u", classmate, "--", "/usr/bin/python3", "-c", PLANT, str(planted)],
            check=True,
        )
        monkeypatch.setenv(CLASS_ENV, str(root))
        entry = pwd.getpwnam(victim)
        assert check_as(entry.pw_uid, entry.pw_gid, top / victim) == 0
        found = scan_wall(read_class(root))
        assert [(record["user"], record["checks"]) for record in found.records] == [
            (victim, {"02-tar-size": {"right": True}})
        ]
        assert found.ignored == {"not named after its owner": 1}
        assert planted.stat().st_uid == pwd.getpwnam(classmate).pw_uid  # left alone
    finally:
        shutil.rmtree(top)
        remove_learners(made)
