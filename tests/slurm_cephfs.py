"""The lab's private CephFS mounted on every node of the several-node test Slurm.

On a cluster each node mounts the parallel file system as a client of its own: the MDS
hands each node its own capabilities and locks, so two nodes writing one file must take
turns. The test nodes (tests/slurm_cluster.py) are mount namespaces of one host; here each
gets a ceph-fuse client of its own (client.n1, client.n2, each with its key), mounted inside
that namespace at one path, `<slurm root>/cephfs`, so a job sees the same path on every
node, as it would see /scratch. The host sees none of these mounts. Needs root (nsenter),
as the several-node Slurm does. Shared by tests/test_cephfs.py and the recorder
tests/record_pfs_nodes.py.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from slurm_jobs import job_places, results_of, submit

from iolab.hpc import cephfs_mpiio
from iolab.storage import cephfs

#: Seconds one mode's job may take (the recorded size, 64 MiB, takes under a minute).
MODE_TIMEOUT_S = 600


@contextlib.contextmanager
def cephfs_on_nodes(slurm, cluster: cephfs.Cluster) -> Iterator[Path]:
    """Mount `cluster` on every node of `slurm` as a client of its own; yield the path the
    jobs see it at. Every client is unmounted and ended on leaving."""
    mount_point = slurm.root / "cephfs"
    mount_point.mkdir()
    try:
        with contextlib.ExitStack() as clients:
            for node, pid in slurm.node_pids.items():
                clients.enter_context(
                    cephfs.client(cluster, f"client.{node}", mount_point, namespace_of=pid)
                )
            yield mount_point
    finally:
        mount_point.rmdir()


def mpiio_on_nodes(slurm, cluster: cephfs.Cluster, demo_args: str) -> list[dict]:
    """demos/slurm/mpiio.sbatch on every node of `slurm`, scratch on `cluster`, one job per
    mode; a row per mode of what the demo and the servers counted (cephfs_mpiio.mode_row)."""
    rows = []
    with cephfs_on_nodes(slurm, cluster) as scratch:
        for mode in cephfs_mpiio.MODES:
            with job_places() as places:
                before = cephfs_mpiio.ServerCounts.now(cluster)
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
                after = cephfs_mpiio.ServerCounts.now(cluster)
                if job.state != "COMPLETED":
                    raise AssertionError(f"the {mode} job ended {job.state}:\n{job.output}")
                result = json.loads((results_of(places, job) / f"mpiio-{mode}.json").read_text())
                rows.append(cephfs_mpiio.mode_row(result, before, after))
    return rows
