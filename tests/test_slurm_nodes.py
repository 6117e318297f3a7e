"""The job scripts of demos/slurm/ across nodes: submitted unchanged with `sbatch --nodes=2`
to a real two-node Slurm on this one host (tests/slurm_slurm_nodes.py).

Each node is its own host to what runs there (its own name, seen by MPI) and has its own
node-local disk at the same path ($TMPDIR = <cluster>/local). The checks are counts, names
and bytes; the nodes share this host's CPUs and disk, so no rate measured here is a
cluster's and none is asserted.
"""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd
import pytest
import slurm_cluster
from slurm_jobs import (
    NODES,
    assert_completed,
    found_while_running,
    on_nodes,
    results_of,
    submit,
)

from iolab.core.markers import LOCATION_MARKER


@on_nodes
def test_the_nodes_are_hosts_of_their_own(slurm_nodes, node_places):
    proc = slurm_nodes.client(
        "srun",
        f"--nodes={NODES}",
        "--ntasks-per-node=1",
        "--label",
        "sh",
        "-c",
        f"hostname; touch {slurm_nodes.root}/local/here",
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == ["0:", "1:", "n1", "n2"]
    for name in slurm_nodes.nodes:  # one file per node-local disk, each on its own node
        assert [p.name for p in slurm_nodes.local_dir(name).iterdir()] == ["here"]
        (slurm_nodes.local_dir(name) / "here").unlink()


@on_nodes
def test_mpiio_across_two_nodes_has_one_aggregator_on_each(slurm_nodes, node_places):
    """The same script on 2 nodes: ROMIO's default (cb_config_list *:1) puts one aggregator
    on each node, told apart by the node's own host name."""
    job = submit(slurm_nodes, "mpiio.sbatch", node_places, f"--nodes={NODES}")
    assert_completed(job)
    results = results_of(node_places, job)
    job_facts = json.loads((results / "job.json").read_text())
    assert (job_facts["nodes"], job_facts["machines"], job_facts["tasks"]) == (["n1", "n2"], 1, 4)
    for mode in ("independent", "collective", "file-per-process"):
        result = json.loads((results / f"mpiio-{mode}.json").read_text())
        assert result["verified"], result
        assert result["hosts"] == ["n1", "n1", "n2", "n2"]  # block distribution, 2 per node
        text = (results / f"mpiio-{mode}.txt").read_text()
        assert text.startswith(f"{mode}: 4 ranks on 2 nodes (n1: 2, n2: 2) wrote "), text
    collective = json.loads((results / "mpiio-collective.json").read_text())
    assert collective["aggregators"] == [0, 2]
    assert (collective["hints"]["cb_nodes"], collective["hints"]["cb_config_list"]) == ("2", "*:1")
    assert (
        "aggregators: rank 0 on n1, rank 2 on n2" in (results / "mpiio-collective.txt").read_text()
    )
    assert (
        "RESULT: 4 ranks on 2 nodes wrote and verified the data in 3 modes "
        "(independent collective file-per-process)"
    ) in job.output
    (user_dir,) = node_places["scratch"].iterdir()  # mpiio-<jobid> removed, the lab's dir kept
    assert [p.name for p in user_dir.iterdir()] == [LOCATION_MARKER]


@on_nodes
def test_small_files_stage_in_once_per_node_and_every_task_reads_its_nodes_copy(
    slurm_nodes, node_places
):
    job = submit(
        slurm_nodes,
        "small-files-local.sbatch",
        node_places,
        f"--nodes={NODES}",
        "--ntasks-per-node=2",
    )
    assert_completed(job)
    results = results_of(node_places, job)
    manifest = json.loads((node_places["workspace"] / "dataset" / "manifest.json").read_text())
    files = manifest["file_count"]
    per_node = pd.read_csv(results / "stage-in-per-node.csv")
    assert per_node[["node", "hostname", "tasks", "stage_ins"]].values.tolist() == [
        ["n1", "n1", 2, 1],
        ["n2", "n2", 2, 1],
    ]
    shared_bytes = sum(
        (node_places["workspace"] / "dataset" / name).stat().st_size
        for name in ("data.tar", "manifest.json", "archive.json")
    )
    assert list(per_node["shared_files_opened"]) == [3, 3]
    assert list(per_node["shared_bytes_read"]) == [shared_bytes] * 2
    # the archive's members plus the three staged files, created on each node's own disk
    assert list(per_node["local_files_created"]) == [files + 3] * 2
    assert list(per_node["files_read_locally"]) == [2 * files] * 2
    readings = sorted(p.name for p in (results / "task-readings").iterdir())
    assert readings == ["n1-task-0.json", "n1-task-1.json", "n2-task-2.json", "n2-task-3.json"]
    for path in (results / "task-readings").iterdir():
        reading = json.loads(path.read_text())
        assert (reading["members"], reading["mean"]) == (files, manifest["expected_mean"])
    summary = (results / "summary.md").read_text()
    assert (
        f"Files opened on the shared place: 6 by 2 stage-ins (one per node), where 4 "
        f"tasks reading the shared copy would open {4 * files}"
    ) in summary
    assert "staged once on each of 2 nodes, 4 tasks read their node's copy" in job.output


@on_nodes
def test_sigterm_before_the_time_limit_cleans_every_nodes_local_disk(slurm_nodes, node_places):
    """What `#SBATCH --signal=B:TERM@60` sends on two nodes: the trap stops the step and
    removes the job's directory on the other node too (node_places checks both disks)."""
    signalled = []

    def term_once_both_nodes_staged(job_id: str) -> None:
        if signalled:
            return  # the trap is removing the directories now
        staged = [
            found_while_running(slurm_nodes.local_dir(node), "iolab-small-files-*/dataset/data.tar")
            for node in slurm_nodes.nodes
        ]
        if all(staged):
            slurm_nodes.client("scancel", "--batch", "--signal=TERM", job_id)
            signalled.append(job_id)

    job = submit(
        slurm_nodes,
        "small-files-local.sbatch",
        node_places,
        f"--nodes={NODES}",
        while_running=term_once_both_nodes_staged,
    )
    assert signalled, job.output
    assert (job.state, job.exit_code) == ("FAILED", "143:0"), job.output
    assert "SIGTERM (time limit or scancel): stopping" in job.output
    assert (results_of(node_places, job) / "status").read_text() == "FAILED 143\n"


def test_a_test_slurm_has_one_to_four_nodes():
    assert slurm_cluster.node_names(3) == ["n1", "n2", "n3"]
    assert slurm_cluster.node_names(1) == [slurm_cluster.node_name()]
    for nodes in (0, 5):
        with pytest.raises(ValueError, match="1 to 4 nodes"):
            slurm_cluster.node_names(nodes)


@on_nodes
def test_four_nodes_start_each_its_own_host_with_its_own_local_disk():
    with slurm_cluster.running_cluster(nodes=4) as cluster:
        proc = cluster.client(
            "srun",
            "--nodes=4",
            "--ntasks-per-node=1",
            "--overcommit",
            "sh",
            "-c",
            f"hostname > {cluster.root}/local/me",
        )
        assert proc.returncode == 0, proc.stderr
        for name in cluster.nodes:
            assert (cluster.local_dir(name) / "me").read_text() == f"{name}\n"
    assert cluster.leftovers() == [] and not cluster.root.exists()


@on_nodes
def test_a_node_local_name_another_user_made_first_stops_the_job(slurm_nodes, node_places):
    """The job's directory name shows in the first node's /tmp; a directory of that name made
    beforehand by someone else on another node is never taken over (nor deleted)."""
    planted = []

    def plant_on_n2(job_id: str) -> None:
        if planted:
            return
        made = found_while_running(slurm_nodes.local_dir("n1"), "iolab-small-files-*")
        if made:
            other = slurm_nodes.local_dir("n2") / made[0].name
            other.mkdir(exist_ok=True)
            os.chown(other, 65534, 65534)  # nobody's
            (other / "theirs").write_text("not the lab's")
            planted.append(other)

    # Planted before the stage-in: the job generates the dataset first, which takes seconds.
    job = submit(
        slurm_nodes,
        "small-files-local.sbatch",
        node_places,
        f"--nodes={NODES}",
        while_running=plant_on_n2,
    )
    assert planted, job.output
    assert job.state == "FAILED", job.output
    assert "is not this job's" in job.output
    other = planted[0]
    assert (other / "theirs").read_text() == "not the lab's"  # left alone
    shutil.rmtree(other)  # the test's own planting, so that node_places finds n2 clean
