"""The lab's private CephFS mounted on every node of the several-node test Slurm.

On a cluster each node mounts the parallel file system as a client of its own: the MDS
hands each node its own capabilities and locks, so two nodes writing one file must take
turns. The test nodes (tests/slurm_cluster.py) are mount namespaces of one host; here each
gets a ceph-fuse client of its own (client.n1, client.n2, each with its key), mounted inside
that namespace at one path, `<slurm root>/cephfs`, so a job sees the same path on every
node, as it would see /scratch. The host sees none of these mounts. Needs root (nsenter),
as the several-node Slurm does. Shared by tests/test_cephfs.py and the recorder
tests/record_pfs_nodes.py.

Two kinds of job run there: demos/slurm/mpiio.sbatch unchanged, once per mode (lesson 08),
and lesson 11's stage-in as the pieces of small-files-local.sbatch that matter to the
servers, one job per way (STAGING_JOB): every task reading the shared copy, or
demos/slurm/stage_in.py once per node and every task reading its node's copy. That job
script also builds the dataset and reads the shared copy from its batch task, which would
mix other requests into the servers' counts.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from slurm_jobs import ROOT, job_env, job_places, results_of, submit

from iolab.hpc import cephfs_nodes
from iolab.storage import cephfs

#: Seconds one mode's job may take (the recorded size, 64 MiB, takes under a minute).
MODE_TIMEOUT_S = 600


@contextlib.contextmanager
def cephfs_on_nodes(slurm, cluster: cephfs.Cluster, page_cache: bool = True) -> Iterator[Path]:
    """Mount `cluster` on every node of `slurm` as a client of its own (with the kernel's
    page cache, or without: cephfs.client); yield the path the jobs see it at. Every client
    is unmounted and ended on leaving."""
    mount_point = slurm.root / "cephfs"
    mount_point.mkdir()
    try:
        with contextlib.ExitStack() as clients:
            for node, pid in slurm.node_pids.items():
                clients.enter_context(
                    cephfs.client(
                        cluster, f"client.{node}", mount_point, pid, page_cache=page_cache
                    )
                )
            yield mount_point
    finally:
        mount_point.rmdir()


def _mpiio_job(slurm, scratch: Path, places, mode: str, demo_args: str) -> dict:
    """One mpiio.sbatch job of one mode: the demo's result, also when its bytes did not
    verify (the job then fails, after copying the result back); any other failure raises."""
    job = submit(
        slurm,
        "mpiio.sbatch",
        places,
        f"--nodes={len(slurm.nodes)}",
        timeout=MODE_TIMEOUT_S,
        SCRATCH=str(scratch),
        IOLAB_MPIIO_MODES=mode,
        IOLAB_MPIIO_ARGS=demo_args,
    )
    path = results_of(places, job) / f"mpiio-{mode}.json"
    result = json.loads(path.read_text()) if path.exists() else None
    if job.state != "COMPLETED" and (result is None or result["verified"]):
        raise AssertionError(f"the {mode} job ended {job.state}:\n{job.output}")
    assert result is not None
    return result


def mpiio_on_nodes(slurm, cluster: cephfs.Cluster, demo_args: str) -> list[dict]:
    """demos/slurm/mpiio.sbatch on every node of `slurm`, scratch on `cluster`, one job per
    mode; a row per mode of what the demo and the servers counted (cephfs_nodes.mode_row)."""
    rows = []
    with cephfs_on_nodes(slurm, cluster) as scratch:
        for mode in cephfs_nodes.MODES:
            with job_places() as places:
                before = cephfs.ServerCounts.now(cluster)
                result = _mpiio_job(slurm, scratch, places, mode, demo_args)
                after = cephfs.ServerCounts.now(cluster)
                rows.append(cephfs_nodes.mode_row(result, before, after))
    return rows


def mpiio_verified(
    slurm, cluster: cephfs.Cluster, mode: str, runs: int, demo_args: str, page_cache: bool = True
) -> dict:
    """The same mpiio.sbatch job of one mode `runs` times, on clients with the kernel's page
    cache or without: how often its bytes read back wrong, and how many each time."""
    wrong = []
    with cephfs_on_nodes(slurm, cluster, page_cache) as scratch:
        for _ in range(runs):
            with job_places() as places:
                wrong.append(_mpiio_job(slurm, scratch, places, mode, demo_args)["wrong_bytes"])
    return {
        "mode": mode,
        "page_cache": page_cache,
        "runs": runs,
        "failed": sum(1 for count in wrong if count),
        "wrong_bytes": wrong,
    }


#: Lesson 11's stage-in as one job per way (IOLAB_HOW: shared or stage), on all the job's
#: nodes and tasks; what it reads and stages goes to IOLAB_OUT, outside the nodes.
STAGING_JOB = """#!/bin/bash
set -euo pipefail
nodes=(--nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1)
data=$IOLAB_DATASET
if [[ $IOLAB_HOW == stage ]]; then
    data=$IOLAB_LOCAL/staged-$SLURM_JOB_ID
    srun "${nodes[@]}" --kill-on-bad-exit=1 "$IOLAB_PY" "$IOLAB_CHECKOUT/demos/slurm/stage_in.py" \
        --archive-dir "$IOLAB_DATASET" --into "$data" --report-dir "$IOLAB_OUT/stage-in" >/dev/null
fi
srun --kill-on-bad-exit=1 --output="$IOLAB_OUT/task-%N-%t.json" \
    "$IOLAB_PY" "$IOLAB_CHECKOUT/demos/read_files.py" --data "$data" --json
if [[ $IOLAB_HOW == stage ]]; then
    srun "${nodes[@]}" rm -rf -- "$data"
fi
"""


def staging_on_nodes(slurm, cluster: cephfs.Cluster, dataset: Path, tasks_per_node: int = 2):
    """Lesson 11's two ways on every node of `slurm`, `dataset` (a folder on the CephFS, as
    the host sees it, with data.tar) read by every task: a row per way (cephfs_nodes.
    staging_row), each on fresh clients, so that no node starts with anything cached."""
    script = slurm.root / "staging-job.sh"
    script.write_text(STAGING_JOB)
    rows = []
    for method, how in zip(cephfs_nodes.STAGING_METHODS, ("shared", "stage"), strict=True):
        with cephfs_on_nodes(slurm, cluster) as shared, job_places() as places:
            before = cephfs.ServerCounts.now(cluster)
            job = slurm.sbatch(
                script,
                f"--nodes={len(slurm.nodes)}",
                f"--ntasks-per-node={tasks_per_node}",
                "--overcommit",
                cwd=ROOT,
                env=job_env(
                    places,
                    IOLAB_HOW=how,
                    IOLAB_PY=sys.executable,
                    IOLAB_CHECKOUT=str(ROOT),
                    IOLAB_DATASET=str(shared / dataset.relative_to(cluster.mount_point)),
                    IOLAB_LOCAL=str(slurm.root / "local"),
                    IOLAB_OUT=str(places["workspace"]),
                ),
                timeout=MODE_TIMEOUT_S,
            )
            after = cephfs.ServerCounts.now(cluster)
            if job.state != "COMPLETED":
                raise AssertionError(f"the {how} job ended {job.state}:\n{job.output}")
            out = places["workspace"]
            readings = [json.loads(p.read_text()) for p in sorted(out.glob("task-*.json"))]
            reports = [json.loads(p.read_text()) for p in sorted(out.glob("stage-in/*.json"))]
            rows.append(
                cephfs_nodes.staging_row(method, len(slurm.nodes), readings, reports, before, after)
            )
    return rows
