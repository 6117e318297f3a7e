"""Record lesson 08's MPI-IO demo across two nodes on the private CephFS (`make
record-pfs-nodes`, as root: the several-node Slurm and the nodes' ceph-fuse mounts need it).

    .venv/bin/python tests/record_pfs_nodes.py reference/bench-recorded/pfs-mpiio-nodes.json

Starts a CephFS of 4 OSDs in a temporary workspace and the tests' two-node Slurm, mounts the
CephFS on each node as a client of its own (tests/slurm_cephfs.py), submits
demos/slurm/mpiio.sbatch unchanged once per mode with scratch on the CephFS, and writes what
the demo and the servers counted (iolab.hpc.cephfs_mpiio), with the machine, Ceph version,
OSD count and date. Then re-execute notebooks/08-mpi-io.ipynb, which shows it.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile
from pathlib import Path

import slurm_cluster
from slurm_cephfs import mpiio_on_nodes
from slurm_jobs import NODES

from iolab.core.atomic import atomic_output
from iolab.hpc import cephfs_mpiio
from iolab.measure.context import machine_context
from iolab.storage import cephfs


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
                rows = mpiio_on_nodes(slurm, cluster, cephfs_mpiio.RECORD_DEMO_ARGS)
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
        "demo_args": cephfs_mpiio.RECORD_DEMO_ARGS,
        "modes": rows,
    }
    with atomic_output(target) as out:
        out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"recorded {len(rows)} modes in {target}")


if __name__ == "__main__":
    record(Path(sys.argv[1]) if len(sys.argv) > 1 else cephfs_mpiio.RECORD)
