"""The lab's readers beside the classic demo's own, run unchanged on the same dataset.

The lab's readers descend from the CodeRefinery demo (coderefinery/ttt4hpc-io-examples,
`data_formats_1/`). Whether the lab's numbers show the cost of small files, and not the lab's
own Python, is settled by running both on the same files: the classic scripts unchanged from
a checkout the user gives, in a folder where `data/` and `data.tar` are the lab's dataset (the
names those scripts open), taking turns with the lab's readers so that a machine's drift hits
both alike. Each side is measured twice: by its own timer (what it prints; the classic
scripts print `Time taken: ... seconds`) and as a whole process (start-up included). A
classic script counts only if it printed the dataset's own mean: then it read the same data.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError
from iolab.core.manifest import ARCHIVE_NAME, DATA_DIR
from iolab.measure.readers import reader_command
from iolab.measure.timing import run_once

#: Where the classic readers live in a checkout of the demo repository.
SCRIPTS_DIR = "data_formats_1"
#: (the lab's reader, the classic script that does the same work). The classic
#: read_archive_random.py is left out: it reads the members in archive order, each looked up
#: by name (a scan of the member list per lookup), so it is not the lab's random reader.
PAIRS = (
    ("read_files_naive", "read_files_simple.py"),
    ("read_files", "read_files.py"),
    ("read_archive", "read_archive.py"),
    ("read_random_chunked", "read_random_chunked.py"),
)
REPOSITORY = "https://github.com/coderefinery/ttt4hpc-io-examples"
_OWN_TIME = re.compile(r"^Time taken: ([0-9.eE+-]+) seconds$", re.MULTILINE)
_MEAN = re.compile(r"^Mean: ([0-9.eE+-]+)$", re.MULTILINE)


@dataclass(frozen=True)
class Turn:
    """One run of one side of a pair: its own timer and the whole process, in seconds."""

    pair: str
    side: str  # "lab" or "classic"
    round: int
    own_s: float
    wall_s: float
    cpu_s: float


def classic_scripts(checkout: Path) -> dict[str, Path]:
    """{lab reader: classic script} in `checkout`, or one sentence saying what is wrong."""
    folder = Path(checkout) / SCRIPTS_DIR
    missing = [script for _lab, script in PAIRS if not (folder / script).is_file()]
    if missing:
        raise LabError(
            f"{checkout} is not a checkout of the classic demo ({SCRIPTS_DIR}/"
            f"{missing[0]} is missing): clone {REPOSITORY} and give its folder, "
            "e.g. `make bench CLASSIC=~/ttt4hpc-io-examples`"
        )
    return {lab: folder / script for lab, script in PAIRS}


def stage(dataset_dir: Path, folder: Path) -> Path:
    """Make `folder` what the classic scripts expect as their working folder: `data/` and
    `data.tar` in it, here links to the lab's dataset (nothing is copied)."""
    folder.mkdir(mode=0o700)
    os.symlink(Path(dataset_dir).resolve() / DATA_DIR, folder / "data")
    os.symlink(Path(dataset_dir).resolve() / ARCHIVE_NAME, folder / "data.tar")
    return folder


def classic_own_time(script: Path, output: str, expected_mean: float) -> float:
    """The seconds a classic script's own timer printed, once its mean proves it read the
    dataset; a LabError in one sentence otherwise."""
    times, means = _OWN_TIME.findall(output), _MEAN.findall(output)
    if not times or not means:
        raise LabError(
            f"{script} printed no 'Time taken: ... seconds' and 'Mean: ...' lines: it "
            f"is not the classic reader the bench knows; use a checkout of {REPOSITORY}"
        )
    if abs(float(means[-1]) - expected_mean) > 1e-9:
        raise LabError(
            f"{script} printed the mean {means[-1]}, the dataset's is {expected_mean!r}: "
            "it did not read the same data, so its time is not comparable"
        )
    return float(times[-1])


def take_turns(
    dataset_dir: Path, scripts: dict[str, Path], workdir: Path, expected_mean: float, repeats: int
) -> list[Turn]:
    """Run every pair `repeats` times, lab and classic taking turns (which goes first
    alternates from round to round), after one untimed warm-up of each."""
    turns = []
    for round_number in range(repeats + 1):
        for lab_name, script in scripts.items():
            sides: list[tuple[str, str | Path]] = [("lab", lab_name), ("classic", script)]
            for side, what in sides if round_number % 2 == 0 else sides[::-1]:
                turn = _one_turn(
                    lab_name, side, what, dataset_dir, workdir, expected_mean, round_number
                )
                if round_number > 0:  # round 0 warms the page cache and the interpreter
                    turns.append(turn)
    return turns


def _one_turn(
    pair: str,
    side: str,
    what: str | Path,
    dataset_dir: Path,
    workdir: Path,
    expected_mean: float,
    round_number: int,
) -> Turn:
    if side == "lab":
        run = run_once(reader_command(str(what), dataset_dir))
        if run.result is None or run.result.get("mean") != expected_mean:
            raise LabError(
                f"the lab's {what} did not print the dataset's mean; run "
                f"`python demos/{what}.py --data {dataset_dir}` to see why"
            )
        own_s = float(run.result["time_s"])
    else:
        run = run_once([sys.executable, str(what)], cwd=workdir)
        own_s = classic_own_time(Path(what), run.output, expected_mean)
    return Turn(pair, side, round_number, own_s, run.wall_s, run.user_s + run.sys_s)


def turns_frame(turns: list[Turn]) -> pd.DataFrame:
    """One row per run: pair, side, round, own_s, wall_s, cpu_s."""
    return pd.DataFrame([vars(turn) for turn in turns])


def ratio_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per pair: each side's median own timer and whole-process wall time, and lab/classic as
    the median of the per-round ratios with their smallest and largest (the spread)."""
    rows = []
    for pair, runs in frame.groupby("pair", sort=False):
        lab = runs[runs.side == "lab"].set_index("round")
        classic = runs[runs.side == "classic"].set_index("round")
        own = (lab.own_s / classic.own_s).dropna()
        wall = (lab.wall_s / classic.wall_s).dropna()
        rows.append(
            {
                "reader": pair,
                "rounds": len(own),
                "lab_own_median_s": statistics.median(lab.own_s),
                "classic_own_median_s": statistics.median(classic.own_s),
                "own_ratio_median": statistics.median(own),
                "own_ratio_min": own.min(),
                "own_ratio_max": own.max(),
                "lab_wall_median_s": statistics.median(lab.wall_s),
                "classic_wall_median_s": statistics.median(classic.wall_s),
                "wall_ratio_median": statistics.median(wall),
                "wall_ratio_min": wall.min(),
                "wall_ratio_max": wall.max(),
            }
        )
    return pd.DataFrame(rows)
