"""The metadata storm (demos/slurm/metadata-storm.sbatch and metadata_storm.py).

On the two-node test Slurm (tests/slurm_cluster.py) the job is submitted unchanged with
`sbatch --nodes=2`: 2 tasks on each node create, stat and remove their files on the shared
scratch at once. The checks are counts and names; the nodes share this host, so no time is
asserted. Without Slurm: the helper run alone as one task, and bad input refused in one
sentence by the helper and by the job script.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from slurm_jobs import ROOT, SLURM_DEMOS, assert_completed, on_nodes, results_of, submit

from iolab.core.markers import LOCATION_MARKER

HELPER = SLURM_DEMOS / "metadata_storm.py"
SCRIPT = SLURM_DEMOS / "metadata-storm.sbatch"
#: All a job leaves in scratch: the per-user directory the lab made, with its mark.
LAB_MARKS = [LOCATION_MARKER]
PER_NODE_COLUMNS = [
    "node",
    "hostname",
    "tasks",
    "files_created",
    "stats",
    "removes",
    "create_s",
    "stat_s",
    "remove_s",
]


def without_slurm() -> dict[str, str]:
    """This environment minus the variables a Slurm job or step sets."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SLURM") and not k.startswith("IOLAB_STORM_")
    }


def run_helper(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(HELPER), *args],
        cwd=ROOT,
        env=without_slurm(),
        capture_output=True,
        text=True,
        timeout=60,
    )


# --- without Slurm -------------------------------------------------------------------------


def test_the_helper_alone_is_one_task_and_leaves_only_its_barrier_file(tmp_path):
    proc = run_helper("--workdir", str(tmp_path), "--files", "50")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["rank"], result["ntasks"], result["barrier_files"]) == (0, 1, 1)
    assert (result["files_created"], result["stats"], result["removes"]) == (50, 50, 50)
    assert result["dir_removed"] is True
    assert [p.relative_to(tmp_path).as_posix() for p in sorted(tmp_path.rglob("*"))] == [
        "barrier",
        "barrier/ready-0",
    ]


@pytest.mark.parametrize("files", ["0", "-3", "abc", "1e3", "100001", ""])
@pytest.mark.slow
def test_the_helper_refuses_a_bad_file_count_in_one_sentence(tmp_path, files):
    proc = run_helper("--workdir", str(tmp_path), "--files", files)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: --files ")
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # refused before anything was made


def test_the_helper_refuses_a_missing_workdir_in_one_sentence(tmp_path):
    proc = run_helper("--workdir", str(tmp_path / "absent"), "--files", "5")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: --workdir {tmp_path / 'absent'} is not a directory; "
        "create it first (on the shared place to test)\n"
    )


def run_script(**extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT)],
        cwd=ROOT,
        env={**without_slurm(), **extra},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("files", ["0", "-3", "abc", "1e3", "100001", "9999999999999999999999"])
def test_the_job_script_refuses_a_bad_file_count_in_one_sentence(files):
    proc = run_script(IOLAB_STORM_FILES=files)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        f"error: IOLAB_STORM_FILES={files} is not a number of files per task from 1 to 100000\n"
    )


@pytest.mark.parametrize("files", ["1", "100000"])
def test_the_job_script_and_the_helper_accept_the_same_range(files):
    proc = run_script(IOLAB_STORM_FILES=files)  # past the check: only Slurm is missing
    assert proc.stderr.startswith("error: this is a Slurm job script"), proc.stderr
    spec = importlib.util.spec_from_file_location("metadata_storm", HELPER)
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    assert helper.parse_args(["--workdir", ".", "--files", files]).files == int(files)
    assert (helper.FILES.low, helper.FILES.high) == (1, 100000)


def test_the_job_script_refuses_a_storm_larger_than_the_bound_in_one_sentence():
    proc = run_script(IOLAB_STORM_FILES="1000", SLURM_NTASKS="201")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "error: 201 tasks x 1000 files = 201000 files at once is more than "
        "IOLAB_STORM_MAX_TOTAL=200000: ask your site's support first, then "
        "export IOLAB_STORM_MAX_TOTAL to allow it\n"
    )
    allowed = run_script(
        IOLAB_STORM_FILES="1000", SLURM_NTASKS="201", IOLAB_STORM_MAX_TOTAL="201000"
    )
    assert allowed.stderr.startswith("error: this is a Slurm job script"), allowed.stderr


# --- on the two-node Slurm -----------------------------------------------------------------


@on_nodes
def test_the_storm_runs_every_task_on_both_nodes_and_leaves_nothing(slurm_nodes, node_places):
    job = submit(
        slurm_nodes,
        "metadata-storm.sbatch",
        node_places,
        "--nodes=2",
        IOLAB_STORM_FILES="200",
        SBATCH_OVERCOMMIT="1",
    )
    assert_completed(job)
    results = results_of(node_places, job)
    per_node = pd.read_csv(results / "metadata-storm-per-node.csv")
    assert list(per_node.columns) == PER_NODE_COLUMNS
    assert list(per_node["node"]) == ["n1", "n2"]
    assert list(per_node["hostname"]) == ["n1", "n2"]  # each task ran on its own node
    assert list(per_node["tasks"]) == [2, 2]
    for column in ("files_created", "stats", "removes"):
        assert list(per_node[column]) == [400, 400], column
    tasks = [json.loads(p.read_text()) for p in sorted((results / "tasks").glob("task-*.json"))]
    assert [(t["rank"], t["node"], t["barrier_files"]) for t in tasks] == [
        (0, "n1", 4),
        (1, "n1", 4),
        (2, "n2", 4),
        (3, "n2", 4),
    ]
    table = (results / "metadata-storm.md").read_text()
    (total,) = [line for line in table.splitlines() if line.startswith("| total ")]
    assert [cell.strip() for cell in total.strip("|").split("|")][:6] == [
        "total",
        "",
        "4",
        "800",
        "800",
        "800",
    ]
    assert "Times are NOT meaningful here: the nodes n1, n2 run on one machine" in table
    assert (
        "RESULT: 2 nodes x 2 tasks created, statted and removed 800 files on the shared "
        "place (200 per task)"
    ) in job.output
    # scratch holds only the per-user directory the lab made, empty but for its marks
    (user_dir,) = node_places["scratch"].iterdir()
    assert sorted(p.name for p in user_dir.iterdir()) == LAB_MARKS  # storm-<jobid> removed
    for name in slurm_nodes.nodes:
        assert list(slurm_nodes.local_dir(name).iterdir()) == [], name
