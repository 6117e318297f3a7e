"""Recorded results: measured live where the tool is here, else the recording with one sentence.

Also checks the committed recordings themselves: every notebook that reads one has it, and
each entry says which machine and day it came from.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iolab.core.errors import LabError
from iolab.hpc import cephfs_lessons, cephfs_nodes
from iolab.measure.recorded import FALLBACK_LOG_ENV, RECORD_ENV, Recordings, recordings_dir
from iolab.pages.missing import not_run_here
from iolab.storage import cephfs

ROOT = Path(__file__).resolve().parent.parent


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "reader": ["read_files", "read_archive"],
            "opens": [7300, 1],
            "mean": [2.4997488584474885, np.nan],
            "exact": [True, False],
        },
        index=pd.Index(["a", "b"], name="key"),
    )


def test_live_results_are_not_saved_unless_recording_is_asked_for(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(RECORD_ENV, raising=False)
    rec = Recordings("nb", tmp_path)
    assert rec.frame("t", frame, None).equals(frame())
    assert not rec.path.exists()


def test_a_recorded_frame_reads_back_equal_with_exact_floats(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv(RECORD_ENV, "1")
    rec = Recordings("nb", tmp_path)
    rec.frame("t", frame, None)
    assert capsys.readouterr().out == ""
    monkeypatch.delenv(RECORD_ENV)
    shown = rec.frame("t", lambda: pytest.fail("must not measure"), "fio is not installed")
    pd.testing.assert_frame_equal(shown, frame())
    assert shown.loc["a", "mean"] == 2.4997488584474885
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(
        r"fio is not installed; shown instead: the result recorded on "
        r"\d{4}-\d\d-\d\d on .+ CPUs, .+ GiB, .+\.",
        line,
    )


def test_text_and_data_keep_their_order_and_other_keys_survive(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(RECORD_ENV, "1")
    rec = Recordings("nb", tmp_path)
    rec.text("trace", lambda: "openat(...) = 3\nclose(3) = 0", None)
    rec.data("counts", lambda: {"ls": 2, "ls -l": 33, "du -s": 34}, None)
    assert rec.text("trace", str, "strace is missing") == "openat(...) = 3\nclose(3) = 0"
    assert list(rec.data("counts", dict, "strace is missing")) == ["ls", "ls -l", "du -s"]


def test_recordings_hold_no_path_of_the_recording_checkout(tmp_path, monkeypatch) -> None:
    """Committed recordings are shown on other machines: workspace/..., not /work/.../"""
    from iolab.core.workspace import repo_root

    monkeypatch.setenv(RECORD_ENV, "1")
    monkeypatch.delenv("IOLAB_WORKDIR", raising=False)
    root = repo_root()
    rec = Recordings("nb", tmp_path)
    rec.data(
        "run",
        lambda: {
            "command": [f"{root}/.venv/bin/python", f"{root}/demos/x.py"],
            "dataset_dir": f"{root}/workspace/dataset",
            "calls": 3,
            "user": "root",
        },
        None,
    )
    saved = rec.path.read_text()
    assert str(root) not in saved
    assert rec.data("run", dict, "strace is missing") == {
        "command": [".venv/bin/python", "demos/x.py"],
        "dataset_dir": "workspace/dataset",
        "calls": 3,
        "user": "root",
    }


def test_fallbacks_are_logged_for_make_lab(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(RECORD_ENV, "1")
    rec = Recordings("05-fio", tmp_path)
    rec.data("local", lambda: [1], None)
    monkeypatch.delenv(RECORD_ENV)
    log = tmp_path / "fallbacks.txt"
    monkeypatch.setenv(FALLBACK_LOG_ENV, str(log))
    rec.data("local", list, "fio is not installed.")
    assert log.read_text() == "05-fio: local: fio is not installed\n"


@pytest.mark.parametrize("problem", [None, "ceph-mon is missing, so the lab cannot start one"])
def test_the_cephfs_records_shown_instead_reach_make_labs_summary(
    tmp_path, monkeypatch, problem
) -> None:
    """The lessons' CephFS cells show reference/bench-recorded/ where no CephFS of the
    learner's ran; `make lab`'s "Not measured on this machine" says so, and why."""
    log = tmp_path / "not-run-here.txt"
    monkeypatch.setenv(FALLBACK_LOG_ENV, str(log))
    monkeypatch.setattr(cephfs, "cephfs_problem", lambda: problem)
    shown = cephfs_lessons.recorded_instead("02-small-files", "pfs-readers")
    assert shown == cephfs_lessons.recorded()
    cephfs_lessons.recorded_instead("07-lustre-striping", "pfs-layouts")
    cephfs_lessons.recorded_instead("12-profiling", "pfs-profile", "strace is missing.")
    assert cephfs_nodes.recorded_instead("08-mpi-io", "pfs-nodes") == cephfs_nodes.recorded()
    cephfs_nodes.recorded_instead("11-storage-hygiene", "pfs-nodes")
    no_cephfs = problem or cephfs_lessons.no_cephfs_reason()
    assert problem or "`python -m iolab pfs up` starts one" in no_cephfs
    summary = not_run_here(log)
    assert len(summary) == 3
    assert summary[0] == (
        f"{no_cephfs} (recorded results shown in 02-small-files, 07-lustre-striping)"
    )
    assert summary[1] == "strace is missing (recorded results shown in 12-profiling)"
    assert summary[2] == (
        f"{cephfs_nodes.RECORDED_ONLY} (recorded results shown in 08-mpi-io, 11-storage-hygiene)"
    )


def test_a_missing_recording_is_one_sentence(tmp_path) -> None:
    with pytest.raises(LabError, match="no recorded result 'x' in .*make record"):
        Recordings("nb", tmp_path).frame("x", frame, "sshfs is not installed")


def test_a_damaged_recording_is_one_sentence(tmp_path) -> None:
    (tmp_path / "nb.json").write_text("{not json")
    with pytest.raises(LabError, match="cannot read the recordings .*git checkout"):
        Recordings("nb", tmp_path).frame("x", frame, "sshfs is not installed")


def keys_notebooks_read(notebook: Path) -> set[str]:
    """The recording keys a notebook's code asks for (rec.frame/text/data and the helpers)."""
    code = "\n".join(
        "".join(c["source"])
        for c in json.loads(notebook.read_text())["cells"]
        if c["cell_type"] == "code"
    )
    pattern = (
        r'rec\.(?:frame|text|data)\(\s*"([^"]+)"|'
        r'(?:traced_or_recorded|reader_syscalls_or_recorded|run_or_recorded)\(rec,\s*"([^"]+)"'
    )
    return {a or b for a, b in re.findall(pattern, code)}


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
FALLING_BACK = [notebook for notebook in NOTEBOOKS if keys_notebooks_read(notebook)]


def test_notebooks_show_the_cephfs_records_only_as_noted_fallbacks() -> None:
    """A bare `recorded()` would show reference/bench-recorded/pfs*.json and leave it out of
    `make lab`'s "Not measured on this machine"."""
    showing = []
    for notebook in NOTEBOOKS:
        code = "\n".join(
            "".join(c["source"])
            for c in json.loads(notebook.read_text())["cells"]
            if c["cell_type"] == "code"
        )
        assert not re.search(r"\brecorded\(\)", code), notebook.name
        if "recorded_instead(" in code:
            showing.append(notebook.stem)
    assert len(showing) == 6, showing


def test_recordings_belong_to_notebooks_that_read_them() -> None:
    assert {p.stem for p in recordings_dir().glob("*.json")} == {p.stem for p in FALLING_BACK}


@pytest.mark.parametrize("notebook", FALLING_BACK, ids=lambda p: p.stem)
def test_every_result_a_notebook_may_fall_back_to_is_recorded(notebook: Path) -> None:
    keys = keys_notebooks_read(notebook)
    entries = json.loads((recordings_dir() / f"{notebook.stem}.json").read_text())
    assert keys <= set(entries), f"record them with `make record`; missing: {keys - set(entries)}"
    assert set(entries) <= keys, f"stale recordings: {set(entries) - keys}"
    for key in keys:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", entries[key]["date"])
        assert "CPUs" in entries[key]["machine"]
