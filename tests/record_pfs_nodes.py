"""Record jobs on two nodes that are clients of the private CephFS (`make record-pfs-nodes`,
as root: the several-node Slurm and the nodes' ceph-fuse mounts need it).

    .venv/bin/python tests/record_pfs_nodes.py reference/bench-recorded/pfs-nodes.json

Starts a CephFS of 4 OSDs in a temporary workspace and the tests' two-node Slurm, mounts the
CephFS on each node as a client of its own (tests/slurm_cephfs.py), then runs lesson 08's
demos/slurm/mpiio.sbatch unchanged once per mode with scratch on the CephFS, and lesson 11's
two ways for 2 tasks per node to read the 7300-file dataset on it (in place, or staged once
per node). Writes what the jobs and the servers counted (iolab.hpc.cephfs_nodes), with the
machine, Ceph version, OSD count and date. Then re-execute notebooks 08 and 11.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile
from pathlib import Path

import slurm_cluster
from slurm_cephfs import mpiio_on_nodes, mpiio_verified, staging_on_nodes
from slurm_jobs import NODES

from iolab.core.atomic import atomic_output
from iolab.hpc import cephfs_nodes
from iolab.measure.context import machine_context
from iolab.storage import cephfs, cephfs_readers


def record(target: Path) -> None:
    reason = slurm_cluster.multinode_skip_reason() or cephfs.cephfs_problem()
    if reason:
        raise SystemExit(f"error: cannot record: {reason}")
    with tempfile.TemporaryDirectory(prefix="iolab-record-pfs-nodes-") as workspace:
        os.environ["IOLAB_WORKDIR"] = workspace
        cluster = cephfs.up(4, compute_node=True, progress=lambda step: print(step, flush=True))
        try:
            version = cephfs.status(cluster)["ceph_version"]
            with slurm_cluster.running_cluster(nodes=NODES) as slurm:
                print(f"the three modes on {' and '.join(slurm.nodes)}", flush=True)
                rows = mpiio_on_nodes(slurm, cluster, cephfs_nodes.RECORD_DEMO_ARGS)
                print(f"the shared-file modes {cephfs_nodes.REPEATS} times each", flush=True)
                repeats = [
                    mpiio_verified(
                        slurm,
                        cluster,
                        mode,
                        cephfs_nodes.REPEATS,
                        cephfs_nodes.REPEAT_DEMO_ARGS,
                        page_cache,
                    )
                    for mode, page_cache in cephfs_nodes.REPEATED
                ]
                print("the dataset on the CephFS, then the two ways to read it", flush=True)
                dataset = cephfs_readers.dataset_on(cluster)
                staging = staging_on_nodes(slurm, cluster, dataset)
                nodes = slurm.nodes
        finally:
            cephfs.down()
    context = machine_context()
    record = {
        "recorded_on": datetime.date.today().isoformat(),
        "machine": {key: context.get(key) for key in ("cpu_model", "cpu_count", "kernel")},
        "ceph_version": version,
        "osds": cluster.osds,
        "nodes": nodes,
        "mpiio": {
            "demo_args": cephfs_nodes.RECORD_DEMO_ARGS,
            "modes": rows,
            "repeats": {"demo_args": cephfs_nodes.REPEAT_DEMO_ARGS, "rows": repeats},
        },
        "staging": {"tasks_per_node": 2, "rows": staging},
    }
    with atomic_output(target) as out:
        out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"recorded {len(rows)} modes and {len(staging)} ways to stage in {target}")


if __name__ == "__main__":
    record(Path(sys.argv[1]) if len(sys.argv) > 1 else cephfs_nodes.RECORD)
