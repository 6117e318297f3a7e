"""`diagnose --config FILE` (iolab.diagnosis.thresholds): a centre's thresholds instead of the
lab's, checked whole before anything changes, applied in every rule module that binds the
name, said in the report, and passed to the archive's workers (issue 36, item 6)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from iolab.core.errors import LabError
from iolab.diagnosis import thresholds
from iolab.diagnosis.rules import base, metadata, posix

ROOT = Path(__file__).resolve().parents[1]
LOGS = Path(__file__).parent / "fixtures" / "darshan"
#: Five findings, every one minor with the lab's thresholds.
ALL_MINOR = LOGS / "nonmpi_dxt_anonymized" / "nonmpi_dxt_anonymized.darshan"


@pytest.fixture(autouse=True)
def lab_thresholds() -> Iterator[None]:
    """Every test ends with the lab's own thresholds, whatever it applied."""
    yield
    thresholds.reset()


def test_the_thresholds_are_the_rule_modules_numbers_by_name() -> None:
    found = thresholds.defaults()
    assert found["SMALL_SHARE"] == posix.SMALL_SHARE == 0.10  # Drishti's small_requests
    assert found["MIN_COUNT"] == base.MIN_COUNT == 1000
    assert "TOP_FILES" not in found  # how many files a finding names is no threshold
    assert all(type(value) in (int, float) for value in found.values())


def test_a_name_bound_in_several_modules_changes_in_all() -> None:
    thresholds.apply({"MIN_COUNT": 500})
    assert base.MIN_COUNT == posix.MIN_COUNT == metadata.MIN_COUNT == 500
    assert thresholds.changed() == {"MIN_COUNT": 500}
    thresholds.reset()
    assert base.MIN_COUNT == posix.MIN_COUNT == 1000 and thresholds.changed() == {}


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"MIN_COUNTS": 1}', "'MIN_COUNTS' is not a threshold; the thresholds are "),
        ('{"MIN_COUNT": 1.5}', "MIN_COUNT is a count and must be a whole number, not 1.5"),
        ('{"SMALL_SHARE": 2}', "SMALL_SHARE must be from 0 to 1, not 2"),
        ('{"WAIT_CORRELATION": -2}', "WAIT_CORRELATION must be from -1 to 1, not -2"),
        ('{"STALL_S": -1}', "STALL_S must be 0 or more, not -1"),
        ('{"STALL_S": true}', "STALL_S must be a number, not True"),
        ("[1, 2]", "it is not a JSON object of threshold names and numbers"),
    ],
)
def test_a_bad_file_is_one_sentence_and_changes_nothing(
    tmp_path: Path, text: str, says: str
) -> None:
    config = tmp_path / "centre.json"
    config.write_text(text)
    with pytest.raises(LabError) as refused:
        thresholds.read_config(config)
    assert says in str(refused.value)
    assert thresholds.changed() == {} and posix.SMALL_SHARE == 0.10
    with pytest.raises(LabError, match="does not exist"):
        thresholds.read_config(tmp_path / "missing.json")


def test_counts_stay_whole_and_shares_become_numbers(tmp_path: Path) -> None:
    config = tmp_path / "centre.json"
    config.write_text('{"MIN_COUNT": 500.0, "MINOR_S": 0}')
    read = thresholds.read_config(config)
    assert read == {"MIN_COUNT": 500, "MINOR_S": 0.0}
    assert type(read["MIN_COUNT"]) is int and type(read["MINOR_S"]) is float


@pytest.mark.needs("darshan")
def test_the_report_uses_the_file_and_says_so(tmp_path: Path) -> None:
    """With nothing minor (MINOR_S and MINOR_SHARE 0) every finding counts: the verdict turns;
    the JSON and the text both name what was changed."""
    config = tmp_path / "centre.json"
    config.write_text('{"MINOR_S": 0, "MINOR_SHARE": 0}')
    lab = json.loads(iolab("diagnose", str(ALL_MINOR), "--json").stdout)
    centre = json.loads(iolab("diagnose", str(ALL_MINOR), "--json", "--config", str(config)).stdout)
    assert lab["verdict"] == "nothing-worth-changing" and lab["thresholds"] == {}
    assert all(finding["minor"] for finding in lab["findings"])
    assert centre["verdict"] == "io-costs-time"
    assert centre["thresholds"] == {"MINOR_S": 0.0, "MINOR_SHARE": 0.0}
    assert not any(finding["minor"] for finding in centre["findings"])
    text = iolab("diagnose", str(ALL_MINOR), "--config", str(config)).stdout
    assert "thresholds changed by --config: MINOR_S = 0, MINOR_SHARE = 0" in text


@pytest.mark.needs("darshan")
def test_the_archives_workers_use_the_file_too(tmp_path: Path) -> None:
    from iolab.diagnosis.archive import rank_archive

    lab, _ = rank_archive([ALL_MINOR], workers=1)
    centre, _ = rank_archive([ALL_MINOR], workers=1, changed={"MINOR_S": 0.0, "MINOR_SHARE": 0.0})
    assert list(lab["verdict"]) == ["nothing-worth-changing"]
    assert list(centre["verdict"]) == ["io-costs-time"]


def iolab(*argv: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "iolab", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done
