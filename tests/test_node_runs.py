"""Gathering the job scripts' results (iolab.hpc.node_runs, `iolab node-runs`).

The recorded runs in reference/node-runs-recorded/ are what the four job scripts copied back
on the tests' two-node Slurm (tests/record_node_runs.py): the counts read back from them are
exact facts of those runs. Broken or unfinished results are made here in tmp_path.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from iolab.cli import main as cli_main
from iolab.core.errors import LabError
from iolab.hpc.node_runs import (
    TIMED,
    completed_runs,
    fio_tables,
    latest,
    mpiio_table,
    stage_in_saving,
    stage_in_table,
    storm_table,
)

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "reference" / "node-runs-recorded"
#: The dataset's files (data_generators/generate_data.py): what one task would open.
FILES = 7300


@pytest.fixture(scope="module")
def runs():
    return completed_runs(RECORDED)


def test_the_recording_holds_the_four_scripts_on_two_nodes_of_one_machine(runs):
    assert sorted(run.script for run in runs) == [
        "fio-node",
        "metadata-storm",
        "mpiio",
        "small-files-local",
    ]
    for run in runs:
        assert run.nodes == ("n1", "n2") and run.machines == 1
        assert run.shares_one_machine
        assert run.label.endswith("(2 nodes on one machine: n1 n2)")
    machine = json.loads((RECORDED / "machine.json").read_text())
    assert machine["label"] and machine["slurm"].startswith("slurm")


def test_stage_in_counts_once_per_node(runs):
    run = latest(runs, "small-files-local", min_nodes=2)
    table = stage_in_table(run)
    assert list(table["node"]) == ["n1", "n2", "total"]
    assert list(table["stage_ins"]) == [1, 1, 2]
    assert list(table["tasks"]) == [2, 2, 4]
    assert list(table["shared_files_opened"]) == [3, 3, 6]
    assert list(table["local_files_created"]) == [FILES + 3, FILES + 3, 2 * (FILES + 3)]
    assert not set(TIMED) & set(table.columns)  # one machine: no times
    assert stage_in_saving(run) == {
        "nodes": 2,
        "tasks": 4,
        "shared_opens_staged": 6,
        "shared_opens_per_task": 4 * FILES,
        "files_per_task": FILES,
    }


def test_mpiio_has_one_aggregator_per_node(runs):
    table = mpiio_table(latest(runs, "mpiio", min_nodes=2)).set_index("mode")
    assert list(table.index) == ["independent", "collective", "file-per-process"]
    assert table["verified"].all()
    assert set(table["ranks_per_node"]) == {"n1: 2, n2: 2"}
    assert table.loc["collective", "aggregators"] == "0 (n1) 2 (n2)"
    assert (table.loc["collective", "cb_nodes"], table.loc["collective", "cb_config_list"]) == (
        "2",
        "*:1",
    )


def test_storm_counts_per_node_and_total(runs):
    table = storm_table(latest(runs, "metadata-storm", min_nodes=2)).set_index("node")
    assert list(table.index) == ["n1", "n2", "total"]
    per_task = 1000  # the script's default IOLAB_STORM_FILES
    assert list(table["tasks"]) == [2, 2, 4]
    for column in ("files_created", "stats", "removes"):
        assert list(table[column]) == [2 * per_task, 2 * per_task, 4 * per_task]
    assert not set(TIMED) & set(table.columns)


def test_fio_on_every_node_without_rates_from_one_machine(runs):
    per_node, total = fio_tables(latest(runs, "fio-node", min_nodes=2))
    assert per_node.groupby(["node", "location"]).size().to_dict() == {
        (node, place): 6 for node in ("n1", "n2") for place in ("node-local", "scratch")
    }
    assert set(total["nodes"]) == {2}
    assert not set(TIMED) & set(per_node.columns) | set(TIMED) & set(total.columns)


def test_rates_are_kept_from_separate_machines(runs, tmp_path):
    run_dir = tmp_path / latest(runs, "fio-node").path.name
    shutil.copytree(latest(runs, "fio-node").path, run_dir)
    facts = json.loads((run_dir / "job.json").read_text())
    (run_dir / "job.json").write_text(json.dumps({**facts, "machines": 2}))
    (run,) = completed_runs(tmp_path)
    per_node, total = fio_tables(run)
    assert {"bw_MiB_per_s", "iops"} <= set(per_node.columns) & set(total.columns)


def test_unfinished_and_failed_jobs_are_left_out(runs, tmp_path):
    source = latest(runs, "mpiio").path
    for name, status in (("101", "FAILED 2\n"), ("102", None), ("103", "COMPLETED\n")):
        shutil.copytree(source, tmp_path / name)
        if status is None:
            (tmp_path / name / "status").unlink()
        else:
            (tmp_path / name / "status").write_text(status)
    assert [run.path.name for run in completed_runs(tmp_path)] == ["103"]
    assert completed_runs(tmp_path / "missing") == []


def test_a_broken_result_is_one_sentence(runs, tmp_path):
    shutil.copytree(latest(runs, "mpiio").path, tmp_path / "7")
    (tmp_path / "7" / "job.json").write_text("{not json")
    with pytest.raises(LabError, match=r"7/job.json is not the JSON the job scripts write"):
        completed_runs(tmp_path)
    (tmp_path / "7" / "job.json").write_text(json.dumps({"script": "mpiio"}))
    with pytest.raises(LabError, match="lacks what the job scripts write"):
        completed_runs(tmp_path)


def test_the_command_prints_each_run_and_says_when_there_is_none(tmp_path, capsys):
    assert cli_main(["node-runs", "--results", str(RECORDED)]) == 0
    out = capsys.readouterr().out
    assert out.count("nodes on one machine: n1 n2)") == 4
    assert "| n1 " in out and "| total " in out and "0 (n1) 2 (n2)" in out
    assert cli_main(["node-runs", "--results", str(tmp_path)]) == 0
    assert "No completed job in" in capsys.readouterr().out


def test_site_needs_a_make_lab_first(tmp_path, monkeypatch):
    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "workspace"))
    with pytest.raises(
        LabError,
        match=r"there is no site to add the runs to yet .* run "
        r"`make lab` once first",
    ):
        cli_main(["node-runs", "--site"])
    with pytest.raises(LabError, match="--site shows the workspace's slurm-results/ only"):
        cli_main(["node-runs", "--site", "--results", str(tmp_path)])


def test_recorded_tables_are_small_enough_to_commit():
    sizes = [p.stat().st_size for p in RECORDED.rglob("*") if p.is_file()]
    assert sum(sizes) < 2 * 2**20 and all(isinstance(s, int) for s in sizes)


def test_every_recorded_table_reads_back(runs):
    for run in runs:
        for csv in run.path.glob("*.csv"):
            assert len(pd.read_csv(csv)) > 0, csv


@pytest.mark.slow
def test_one_command_puts_a_learners_own_cluster_runs_into_the_site(tmp_path, monkeypatch, capsys):
    """`node-runs --site`: the learner's jobs (here the recorded ones, as if from two
    separate machines of a cluster called mycluster) appear on the page of the site their
    last `make lab` built, with the rates that only separate machines give."""
    from iolab.core.lab_dirs import ensure_writable_dir, results_dir
    from iolab.core.workspace import WorkspaceEntry

    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "workspace"))
    own = ensure_writable_dir(WorkspaceEntry.SLURM_RESULTS.path())
    for run in completed_runs(RECORDED):
        shutil.copytree(run.path, own / run.path.name)
        facts = json.loads((run.path / "job.json").read_text())
        (own / run.path.name / "job.json").write_text(
            json.dumps({**facts, "cluster": "mycluster", "machines": 2})
        )
    (results_dir() / "notebooks").mkdir()  # what `make lab` executed (here: nothing)
    assert cli_main(["node-runs", "--site"]) == 0
    out = capsys.readouterr().out
    assert "node-runs.html" in out
    page = (results_dir() / "site" / "reference" / "node-runs.html").read_text()
    for job in ("1", "2", "3", "4"):
        assert f"Yours: job {job} on mycluster (2 nodes: n1 n2)" in page
    assert "bw_MiB_per_s" in page and "create_s" in page  # their rates, not the recording's
    assert "your completed jobs: 4" in page
    assert page.count("<img ") == 2  # the recorded stage-in bars and your fio per node


def test_the_per_node_picture_has_a_bar_per_node_job_and_place(runs):
    import matplotlib.pyplot as plt

    from iolab.hpc.node_runs_plots import fio_per_node_bars

    per_node = pd.read_csv(latest(runs, "fio-node").path / "fio-per-node.csv")
    fig = fio_per_node_bars(per_node)
    try:
        panels = fig.axes
        assert [ax.get_title() for ax in panels] == ["node-local", "scratch"]
        for ax, place in zip(panels, ("node-local", "scratch"), strict=True):
            heights = sorted(round(bar.get_height(), 6) for bar in ax.patches)
            rows = per_node[per_node["location"] == place]["bw_MiB_per_s"]
            assert heights == sorted(round(value, 6) for value in rows)  # 2 nodes x 6 jobs
    finally:
        plt.close(fig)


def test_an_unreadable_status_is_one_sentence(runs, tmp_path):
    shutil.copytree(latest(runs, "mpiio").path, tmp_path / "8")
    (tmp_path / "8" / "status").write_bytes(b"\xff\xfe")
    with pytest.raises(LabError, match=r"cannot read .*8/status"):
        completed_runs(tmp_path)
