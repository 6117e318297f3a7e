"""`make lab`'s own budget (iolab.measure.footprint, iolab.measure.lab_budget): sizes counted
exactly as `du` and `find` count them, peaks caught while a step runs, one phase per
notebook saved as it ends, and the workshop pages' figures read back from that record."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from iolab.core.lab_dirs import ensure_writable_dir
from iolab.core.workspace import WorkspaceEntry, repo_root
from iolab.measure.footprint import Footprint, PhaseSampler, footprint
from iolab.measure.lab_budget import (
    BUDGET_ENV,
    RECORDED,
    LabBudget,
    budget_frame,
    duration_text,
    load_budget,
)
from iolab.pages import missing, notebooks


def make_tree(root: Path) -> None:
    """3 files (1000, 5000 and 0 bytes), 1 folder, 1 link to a large file outside."""
    root.mkdir()
    (root / "a.bin").write_bytes(b"a" * 1000)
    (root / "sub").mkdir()
    (root / "sub" / "b.bin").write_bytes(b"b" * 5000)
    (root / "sub" / "empty").write_bytes(b"")
    big = root.parent / "outside.bin"
    big.write_bytes(b"c" * 1_000_000)
    (root / "link").symlink_to(big)


def test_footprint_counts_as_du_and_find_do(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    make_tree(root)
    found = footprint(root)
    link_bytes = len(str(tmp_path / "outside.bin"))  # a link's size is its target's name
    assert found.files == 5  # a.bin, sub, b.bin, empty, link (find | wc -l minus the root)
    assert found.bytes == 1000 + 5000 + link_bytes  # the link is not followed
    if shutil.which("du"):
        du = subprocess.run(["du", "-s", "-B1", str(root)], capture_output=True, text=True)
        root_blocks = os.stat(root).st_blocks * 512
        assert found.allocated_bytes == int(du.stdout.split()[0]) - root_blocks
    skipped = footprint(root, skip=[root / "sub"])
    assert (skipped.bytes, skipped.files) == (1000 + link_bytes, 2)
    assert footprint(tmp_path / "missing") == Footprint()
    assert footprint([root / "sub", root / "a.bin"]).files == 2  # a file is not a folder
    # a folder given by a link (a class workspace's `dataset`, to the class's shared copy)
    # is the link alone: the shared files are not the learner's
    (tmp_path / "dataset").symlink_to(root)
    linked = footprint(tmp_path / "dataset")
    assert (linked.bytes, linked.files) == (len(str(root)), 1)


def test_a_peak_inside_a_phase_is_caught_and_the_end_measured(tmp_path: Path) -> None:
    place = tmp_path / "place"
    place.mkdir()
    with PhaseSampler({"place": place}, interval_s=0.02) as sampler:
        sampler.begin("holds a file for a while")
        (place / "big.bin").write_bytes(b"x" * 3_000_000)
        time.sleep(1.0)  # fifty sampling intervals
        (place / "big.bin").unlink()
        sampler.begin("next")
        (place / "kept.bin").write_bytes(b"y" * 1000)
    first, second = sampler.phases
    assert first.peak["place"].bytes == 3_000_000
    assert first.start["place"] == first.end["place"] == Footprint()
    assert second.end["place"].bytes == 1000 and second.status == "done"
    assert first.seconds >= 1.0


@pytest.mark.slow
def test_make_lab_records_one_phase_per_notebook_saved_as_it_ends(
    workspace: Path, monkeypatch
) -> None:
    """execute_notebooks with a budget: every notebook a phase, a failed one marked so, and
    the file on disk complete after each phase (the budget page reads it before the end)."""
    stems = [p.stem for p in sorted((repo_root() / "notebooks").glob("*.ipynb"))]
    seen_on_disk: list[list[str]] = []
    budget_file = ensure_writable_dir(workspace) / "lab-budget.json"

    def fake_execute(source: Path, target: Path, timeout_s: int = 1800, say: object = None) -> None:
        seen_on_disk.append([p["name"] for p in json.loads(budget_file.read_text())["phases"]])
        if source.stem == stems[1]:
            raise RuntimeError("ZeroDivisionError: division by zero")
        scratch = ensure_writable_dir(WorkspaceEntry.TMP.path())
        (scratch / f"{source.stem}.bin").write_bytes(b"z" * 2_000_000)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("{}")

    monkeypatch.setattr(notebooks, "execute_notebook", fake_execute)
    monkeypatch.setattr(notebooks, "EXECUTED_PAGES", ())
    with LabBudget(budget_file, interval_s=60, missing=["fio", "torch"]) as budget:
        failed = notebooks.execute_notebooks(workspace / "lab" / "notebooks", budget=budget)
    assert failed == [f"{stems[1]}.ipynb"]
    assert seen_on_disk[0] == [stems[0]] and seen_on_disk[-1] == stems
    recorded = json.loads(budget_file.read_text())
    assert recorded["missing"] == ["fio", "torch"]  # what the budget page says was not here
    assert [p["name"] for p in recorded["phases"]] == stems
    statuses = {p["name"]: p["status"] for p in recorded["phases"]}
    assert statuses.pop(stems[1]) == "failed" and set(statuses.values()) == {"done"}
    third = (
        recorded["phases"][2]["end"]["workspace"]["bytes"]
        - recorded["phases"][2]["start"]["workspace"]["bytes"]
    )
    assert third == 2_000_000 + len("{}")  # its file and its executed copy, measured at its end
    monkeypatch.setenv(BUDGET_ENV, str(budget_file))
    again, this_run = load_budget()
    assert this_run and again == recorded
    frame = budget_frame(again)
    assert list(frame["step"]) == stems
    assert frame.loc[2, "workspace_kept_MB"] == 2.0
    # the run itself at least: every phase counted the lab's processes and threads
    assert all(phase["tasks_peak"]["processes"] >= 1 for phase in recorded["phases"])
    assert (frame["threads_peak"] >= frame["processes_peak"]).all()


@pytest.mark.parametrize(
    "seconds, text",
    [
        (None, "not recorded"),
        (0.4, "0 s"),
        (59.4, "59 s"),
        (59.6, "1 min 0 s"),
        (138, "2 min 18 s"),
        (3599.4, "59 min 59 s"),
        (3600, "1 h 0 min"),
        (3780, "1 h 3 min"),
    ],
)
def test_durations_read_as_a_person_says_them(seconds: float | None, text: str) -> None:
    assert duration_text(seconds) == text


def test_the_recorded_budget_is_a_whole_make_lab_run(monkeypatch) -> None:
    """The run the published site quotes covers every step and notebook, on a named machine."""
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    budget, this_run = load_budget()
    assert not this_run
    assert budget == json.loads((repo_root() / RECORDED).read_text())
    stems = [p.stem for p in sorted((repo_root() / "notebooks").glob("*.ipynb"))]
    assert [p["name"] for p in budget["phases"]] == ["dataset", "readers", *stems]
    assert all(p["seconds"] > 0 and p["end"] for p in budget["phases"])
    assert budget["machine"] and budget["date"] and budget["environment"]["files"] > 1000
    assert isinstance(budget["missing"], list)


@pytest.mark.slow
def test_the_ram_disk_column_counts_every_lab_folder_of_the_user_there(
    tmp_path: Path, monkeypatch
) -> None:
    """/dev/shm holds the per-user place and the hidden scratch folders of short jobs (a
    copy of the dataset, a 128 MiB test file): both count; another name does not."""
    import getpass

    from iolab.measure import lab_budget

    shm = tmp_path / "shm"
    shm.mkdir()
    user = getpass.getuser()
    (shm / f"iolab-{user}").mkdir()
    (shm / f"iolab-{user}" / "copy.bin").write_bytes(b"a" * 1000)
    (shm / f".iolab-{user}-probe-x1").mkdir()
    (shm / f".iolab-{user}-probe-x1" / "test.bin").write_bytes(b"b" * 5000)
    (shm / "someone-else").mkdir()
    (shm / "someone-else" / "theirs.bin").write_bytes(b"c" * 7000)
    monkeypatch.setattr(lab_budget, "SHM", shm)
    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "ws"))
    budget = LabBudget(tmp_path / "budget.json", interval_s=60)
    assert budget.sampler.sizes()["shm"].bytes == 6000


def test_the_budget_names_the_missing_tools_then_packages(monkeypatch) -> None:
    from types import SimpleNamespace

    statuses = [
        SimpleNamespace(name="fio", state="missing"),
        SimpleNamespace(name="strace", state="ok"),
        SimpleNamespace(name="sshfs", state="unusable"),
    ]
    monkeypatch.setattr(
        missing.importlib.util, "find_spec", lambda name: None if name == "torch" else object()
    )
    assert missing.missing_names(statuses) == ["fio", "sshfs", "torch"]


@pytest.mark.slow
def test_the_budget_page_runs_for_an_environment_this_run_did_not_build(
    tmp_path: Path, monkeypatch
) -> None:
    """In a class the environment is the class's: no build time was recorded, and the page
    must still run (it failed `iolab lab` in every class until a rehearsal showed it)."""
    import nbformat
    from nbclient import NotebookClient

    budget = json.loads((repo_root() / RECORDED).read_text())
    budget["environment"]["build_seconds"] = None
    budget_file = tmp_path / "lab-budget.json"
    budget_file.write_text(json.dumps(budget))
    monkeypatch.setenv(BUDGET_ENV, str(budget_file))
    page = nbformat.read(repo_root() / "workshop" / "lab-budget.ipynb", as_version=4)
    NotebookClient(page, timeout=300, kernel_name="python3").execute()
    printed = "".join(
        output.get("text", "") for cell in page.cells for output in cell.get("outputs", [])
    )
    assert "(no environment built by this run)" in printed
    assert "environment_build: not recorded" in printed
