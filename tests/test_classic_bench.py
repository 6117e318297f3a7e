"""`make bench CLASSIC=DIR`: the classic demo's readers beside the lab's, and the record quoted.

The README and lesson 02 quote the lab/classic ratios of a recorded bench; the lesson glues
them from notebook 02, the README is checked here against the same record.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from iolab.core import manifest as ds
from iolab.core.errors import LabError
from iolab.measure.classic import (
    PAIRS,
    SCRIPTS_DIR,
    classic_own_time,
    classic_scripts,
    ratio_table,
    stage,
    take_turns,
    turns_frame,
)

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "reference" / "bench-recorded" / "bench-classic.json"


def fake_checkout(root: Path, mean: float, seconds: float = 0.25) -> Path:
    """A folder laid out like the classic repository, whose readers check that data/ and
    data.tar are where the real ones look, then print what the real ones print."""
    folder = root / SCRIPTS_DIR
    folder.mkdir(parents=True)
    for _lab, script in PAIRS:
        (folder / script).write_text(
            "import os\n"
            "assert os.path.isdir('data') and os.path.isfile('data.tar')\n"
            f"print('Time taken: {seconds} seconds')\nprint('Mean: {mean!r}')\n"
        )
    return root


def test_a_folder_without_the_classic_readers_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="not a checkout of the classic demo .*git|clone"):
        classic_scripts(tmp_path)


def test_a_classic_run_counts_only_with_the_datasets_mean() -> None:
    script = Path("read_files.py")
    printed = "Time taken reading to memory: 0.5 seconds\nTime taken: 0.125 seconds\nMean: 2.5\n"
    assert classic_own_time(script, printed, 2.5) == 0.125  # the last 'Time taken:' line
    with pytest.raises(LabError, match="did not read the same data"):
        classic_own_time(script, printed, 2.4997)
    with pytest.raises(LabError, match="printed no"):
        classic_own_time(script, "Traceback (most recent call last):\n", 2.5)


def test_ratios_are_per_round_with_their_spread() -> None:
    rows = []
    for round_number, (lab, classic) in enumerate([(1.0, 2.0), (3.0, 2.0), (2.0, 2.0)], 1):
        rows += [
            {
                "pair": "read_files",
                "side": "lab",
                "round": round_number,
                "own_s": lab,
                "wall_s": lab + 1,
                "cpu_s": lab,
            },
            {
                "pair": "read_files",
                "side": "classic",
                "round": round_number,
                "own_s": classic,
                "wall_s": classic + 1,
                "cpu_s": classic,
            },
        ]
    row = ratio_table(pd.DataFrame(rows)).iloc[0]
    assert (row.rounds, row.own_ratio_median, row.own_ratio_min, row.own_ratio_max) == (
        3,
        1.0,
        0.5,
        1.5,
    )
    assert (row.lab_own_median_s, row.classic_own_median_s) == (2.0, 2.0)
    assert (
        row.wall_ratio_median == 1.0 and row.wall_ratio_min == 2 / 3 and row.wall_ratio_max == 4 / 3
    )


@pytest.mark.slow
def test_the_two_sides_take_turns_on_one_dataset(tmp_path: Path, small_dataset: Path) -> None:
    mean = ds.load_manifest(small_dataset)["expected_mean"]
    scripts = classic_scripts(fake_checkout(tmp_path / "classic", mean))
    workdir = stage(small_dataset, tmp_path / "work")
    frame = turns_frame(take_turns(small_dataset, scripts, workdir, mean, repeats=2))
    # two timed rounds (the warm-up round is dropped), both sides of every pair
    assert sorted(frame["round"].unique()) == [1, 2]
    assert len(frame) == 2 * 2 * len(PAIRS)
    assert set(frame[frame.side == "classic"].own_s) == {0.25}
    assert (frame.wall_s > 0).all() and (frame.own_s > 0).all()
    # the classic side ran in the staged folder and saw the lab's dataset through links
    assert (workdir / "data").resolve() == (small_dataset / ds.DATA_DIR).resolve()
    # which side goes first alternates: round 1 starts with the classic script
    assert frame.iloc[0].side == "classic" and frame.iloc[2 * len(PAIRS)].side == "lab"


@pytest.mark.slow
def test_a_classic_reader_that_read_other_data_stops_the_bench(
    tmp_path: Path, small_dataset: Path
) -> None:
    scripts = classic_scripts(fake_checkout(tmp_path / "classic", 1.0))
    workdir = stage(small_dataset, tmp_path / "work")
    mean = ds.load_manifest(small_dataset)["expected_mean"]
    with pytest.raises(LabError, match="did not read the same data"):
        take_turns(small_dataset, {"read_files": scripts["read_files"]}, workdir, mean, 0)


def test_the_recorded_bench_is_whole() -> None:
    record = json.loads(RECORD.read_text())
    assert {pair["reader"] for pair in record["pairs"]} == {lab for lab, _script in PAIRS}
    assert (
        re.fullmatch(r"[0-9a-f]{40}", record["classic_commit"] or "")
        or record["classic_commit"] is None
    )
    for pair in record["pairs"]:
        assert pair["rounds"] >= 5
        for kind in ("own", "wall"):
            low, mid, high = (pair[f"{kind}_ratio_{k}"] for k in ("min", "median", "max"))
            assert 0 < low <= mid <= high


def test_the_readme_quotes_the_recorded_ratios() -> None:
    """The README cannot glue; its figures are checked against the record instead."""
    pairs = {pair["reader"]: pair for pair in json.loads(RECORD.read_text())["pairs"]}
    readme = (ROOT / "README.md").read_text()
    for reader, kind in [("read_files", "own"), ("read_files", "wall"), ("read_archive", "own")]:
        quoted = f"{pairs[reader][f'{kind}_ratio_median']:.2f}x ({reader}, {kind}"
        assert quoted in readme, f"README should quote {quoted!r}"
