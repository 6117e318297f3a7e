"""The reservation the preflight's letter asks for: sized from the learners and the track,
from the job scripts' own #SBATCH lines, and none for a track without batch jobs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.classmode import reservation as sizing
from iolab.classmode.letter import letter
from iolab.classmode.load import class_load
from iolab.core.errors import LabError

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "workshop" / "instructor-guide.md").read_text()
#: Each track's heading in the instructor guide.
HEADINGS = {
    "intro": "### A 3-hour introduction",
    "full-day": "### A full day",
    "ml": "### An ML track",
    "parallel-io": "### A parallel-I/O track",
}


def _guide_lessons(track: str) -> set[int]:
    """The lesson numbers in the schedule table under the track's heading."""
    section = GUIDE.split(HEADINGS[track], 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    return {int(n) for n in re.findall(r"^\| [\d:]+ \| (\d\d) ", section, re.M)}


def _listed(track: str) -> set[int]:
    """The lessons TRACK_LESSONS names, with ranges expanded."""
    numbers: set[int] = set()
    for part in sizing.TRACK_LESSONS[track].split(", "):
        first, _, last = part.partition("-")
        numbers |= set(range(int(first), int(last or first) + 1))
    return numbers


@pytest.mark.parametrize("track", sorted(HEADINGS))
def test_each_track_lists_the_guides_lessons_and_needs_jobs_only_with_lesson_08(
    track: str,
) -> None:
    assert _listed(track) == _guide_lessons(track)
    assert (track in sizing.TRACKS_WITH_JOBS) == (8 in _listed(track))
    assert (sizing.reservation(30, track) is None) == (8 not in _listed(track))


def test_the_jobs_are_read_from_the_scripts_as_the_guide_submits_them() -> None:
    """mpiio.sbatch: 4 tasks (#SBATCH --ntasks=4) over --nodes=2, 4G per node, 15 min;
    small-files-local.sbatch: --nodes=2 --ntasks-per-node=2, 2G per node, 15 min."""
    for script in sizing.SUBMITTED_TOGETHER:
        assert f"demos/slurm/{script}" in GUIDE, script
    jobs = {j.script: j for j in sizing.reservation(1, "course").jobs}
    assert jobs["mpiio.sbatch"] == sizing.Job("mpiio.sbatch", 2, 4, 4096, 15)
    assert jobs["small-files-local.sbatch"] == sizing.Job(
        "small-files-local.sbatch", 2, 4, 2048, 15
    )


def test_the_peak_is_n_times_the_jobs_submitted_together() -> None:
    reserved = sizing.reservation(30, "parallel-io")
    assert reserved is not None
    assert reserved.cores == 30 * (4 + 4)
    assert reserved.mem_gib == 30 * (4 * 2 + 2 * 2)
    assert reserved.nodes == 2
    assert reserved.minutes == sizing.LESSON_08_MINUTES + 15
    assert sizing.reservation(1, "parallel-io").cores == 8


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("15", 15),
        ("10:30", 11),
        ("00:15:00", 15),
        ("01:00:01", 61),
        ("1-02", 1560),
        ("2-0:30", 2910),
    ],
)
def test_slurm_times_in_minutes(text: str, minutes: int) -> None:
    assert sizing._minutes(text) == minutes


@pytest.mark.parametrize(
    ("text", "mib"), [("512", 512), ("4G", 4096), ("1T", 1048576), ("100K", 1)]
)
def test_slurm_memory_in_mib(text: str, mib: int) -> None:
    assert sizing._mib(text) == mib


@pytest.mark.parametrize("line", ["mem=4G", "time=00:20:00"])
def test_a_script_without_its_mem_or_time_line_is_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    scripts = tmp_path / "demos" / "slurm"
    scripts.mkdir(parents=True)
    (scripts / "edited.sbatch").write_text(f"#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --{line}\n")
    monkeypatch.setattr(sizing, "repo_root", lambda: tmp_path)
    absent = "time" if line.startswith("mem") else "mem"
    with pytest.raises(LabError, match=rf"edited.sbatch has no `#SBATCH --{absent}=` line"):
        sizing.job("edited.sbatch", {})


def test_an_unknown_track_is_one_sentence() -> None:
    with pytest.raises(LabError, match=r"--track sprint is not a track; choose one of course, "):
        sizing.reservation(30, "sprint")
    done = subprocess.run(
        [sys.executable, "-m", "iolab", "class", "preflight", "--learners", "3", "--track", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "invalid choice: 'x'" in done.stderr
    assert "Traceback" not in done.stderr


def _letter(track: str, learners: int = 25) -> str:
    report = {"workspaces_in": None, "checks": [], "reservations": [], "fallbacks": []}
    return letter(report, class_load(learners), "teacher", "login1", "2026-12-01", track)


def test_the_letter_asks_for_the_sized_reservation_or_for_none() -> None:
    text = _letter("course")
    assert "**200 cores and 300 GiB of memory**" in text  # 25 x 8 cores, 25 x 12 GiB
    assert "Duration=01:10:00 Users=<learners> CoreCnt=200" in text
    assert "NodeCnt=2" not in text  # the old request: two nodes for the whole class
    ml = _letter("ml")
    assert "1. **No reservation.** The track we teach (ml: lessons 01-04, 09-11)" in ml
    assert "scontrol create reservation" not in ml
