"""demos/slurm/fio-node.sbatch across nodes: submitted unchanged with `sbatch --nodes=2` to
the real two-node Slurm on this one host (fixture slurm_nodes, tests/slurm_cluster.py).

Every node runs the fio node profile (scaled down) on its own node-local disk, then in its
own subdirectory of scratch; the job collects the nodes' results into a per-node and a
total table. The nodes share this host's CPUs and disk, so the checks are names, counts,
sizes and sums; no rate, and no ordering of rates, is asserted.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from slurm_jobs import NODES, assert_completed, on_nodes, results_of, submit

from iolab.core.markers import LOCATION_MARKER
from iolab.storage.fio import PROFILES, scaled_profile
from iolab.storage.fio_parse import loads_fio

NODE_JOBS = [job.name for job in PROFILES["node"].jobs]
PLACES = ["node-local", "scratch"]
#: The fio node profile as the test scales it: files x 0.001 (4 KiB to 1 MiB), 1 s per job.
SMALL_FIO_PROFILE = scaled_profile("node", 0.001, 1)
SMALL_FIO_SIZES = [SMALL_FIO_PROFILE.options(job)["filesize"] for job in SMALL_FIO_PROFILE.jobs]
CAVEAT = (
    "When several nodes share one machine (as in the lab's tests) the sum is not a "
    "cluster's aggregate bandwidth; only on separate nodes is it."
)


@on_nodes
@pytest.mark.needs("fio")
def test_fio_job_runs_on_every_node_and_sums_the_nodes(slurm_nodes, node_places):
    job = submit(
        slurm_nodes,
        "fio-node.sbatch",
        node_places,
        f"--nodes={NODES}",
        IOLAB_FIO_SIZE_SCALE="0.001",
        IOLAB_FIO_RUNTIME_S="1",
    )
    assert_completed(job)
    nodes = slurm_nodes.nodes
    assert len(nodes) == NODES
    results = results_of(node_places, job)
    # scratch: every node in its own subdirectory of the job's directory in the lab's one
    (user_dir,) = node_places["scratch"].iterdir()
    scratch_dir = user_dir / f"fio-node-{job.job_id}"
    assert (
        f"RESULT: fio node profile ran all 6 jobs on node-local disk and scratch on "
        f"2 nodes ({' '.join(nodes)})"
    ) in job.output

    # every node's own results, on shared storage under names of their own
    for node in nodes:
        for place in PLACES:
            stem = results / f"fio-node-{node}-{place}"
            assert list(pd.read_csv(stem.with_suffix(".csv"))["job"]) == NODE_JOBS
            result = loads_fio(stem.with_suffix(".json").read_text())
            sizes = [j["job options"]["filesize"] for j in result["jobs"]]
            assert sizes == SMALL_FIO_SIZES  # the scale reached fio on this node
            where = Path(result["global options"]["directory"])  # fio's run directory
            if place == "scratch":
                assert where.parent == scratch_dir / node
            else:  # the job's directory on the node's own disk (the same path on each)
                assert where.parent.parent == node_places["local"]
                assert where.parent.name.startswith(f"iolab-fio-node-{job.job_id}-")
            assert "| read-16k" in stem.with_suffix(".md").read_text()

    per_node = pd.read_csv(results / "fio-per-node.csv")
    assert list(per_node.columns) == [
        "node",
        "location",
        "job",
        "direction",
        "bw_MiB_per_s",
        "iops",
    ]
    assert sorted(
        zip(per_node["node"], per_node["location"], per_node["job"], strict=True)
    ) == sorted((node, place, name) for node in nodes for place in PLACES for name in NODE_JOBS)

    total = pd.read_csv(results / "fio-total.csv")
    assert list(total.columns) == ["location", "job", "direction", "bw_MiB_per_s", "iops", "nodes"]
    assert sorted(zip(total["location"], total["job"], strict=True)) == sorted(
        (place, name) for place in PLACES for name in NODE_JOBS
    )
    assert set(total["nodes"]) == {NODES}
    keys = ["location", "job", "direction"]
    summed = per_node.groupby(keys, as_index=False)[["bw_MiB_per_s", "iops"]].sum()
    merged = total.merge(summed, on=keys, suffixes=("", "_nodes"), validate="one_to_one")
    assert len(merged) == len(total) == len(summed)
    for column in ("bw_MiB_per_s", "iops"):
        assert list(merged[column]) == pytest.approx(
            list(merged[f"{column}_nodes"]), rel=1e-9, abs=1e-9
        )

    summary = (results / "summary.md").read_text()
    assert CAVEAT in summary and "| n2 " in summary

    # nothing left on scratch but the lab's per-user directory and its mark; every node's
    # local disk is checked empty by the node_places fixture
    assert [p.name for p in node_places["scratch"].iterdir()] == [user_dir.name]
    assert sorted(p.name for p in user_dir.iterdir()) == [LOCATION_MARKER]
