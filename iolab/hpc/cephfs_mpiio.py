"""Lesson 08's MPI-IO demo across two nodes on the private CephFS, as the servers counted it.

The job script demos/slurm/mpiio.sbatch runs on two nodes of the tests' Slurm, each node a
ceph-fuse client of its own (tests/slurm_cephfs.py), with scratch on the CephFS: one job per
mode, so the OSDs' and the MDS's counters read before and after a job belong to that mode.
What the servers saw tells the three ways of writing one data set apart where the ranks'
own timings cannot (both nodes share one machine):

* independent writes of interleaved blocks go through data sieving: each rank reads a window
  of the file, patches its blocks in and writes the whole window back, under an fcntl lock
  that the MDS grants (`setfilelock` requests), so the OSDs are sent about ranks times the
  data;
* collective buffering ships the blocks to one aggregator per node, which write large
  contiguous pieces once, without locks;
* a file per process creates one file per rank and writes it once, without locks.

`make record-pfs-nodes` (as root) stores such a run with the lab (RECORD); lesson 08 shows
it. Counts are exact; the demo's seconds are of two nodes sharing one machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from iolab.hpc import cephfs_lessons
from iolab.storage import cephfs

#: The run `make record-pfs-nodes` stores with the lab, relative to the checkout.
RECORD = Path("reference") / "bench-recorded" / "pfs-mpiio-nodes.json"
MODES = ("independent", "collective", "file-per-process")
#: The demo's options for the record: 4 ranks x 4,096 blocks of 4 KiB, 64 MiB per mode.
RECORD_DEMO_ARGS = "--blocks-per-rank 4096 --block-size 4096"


@dataclass(frozen=True)
class ServerCounts:
    """The OSDs' and the MDS's counters at one moment (they only grow)."""

    osds: tuple[dict, ...]
    mds: cephfs.MdsRequests

    @classmethod
    def now(cls, cluster: cephfs.Cluster) -> ServerCounts:
        return cls(tuple(cephfs.osd_counters(cluster)), cephfs.mds_request_counters(cluster))


def _added(after: ServerCounts, before: ServerCounts, key: str) -> int:
    return sum(a[key] - b[key] for a, b in zip(after.osds, before.osds, strict=True))


def mode_row(result: dict, before: ServerCounts, after: ServerCounts) -> dict:
    """One mode's row: what the demo reported (`result`, its --json) and what the servers
    counted between `before` and `after` (the job alone ran in between)."""
    requests = {row["request_type"]: row["mds_requests"] for row in after.mds.since(before.mds)}
    return {
        "mode": result["mode"],
        "ranks": result["ranks"],
        "nodes": len(set(result["hosts"])),
        "hosts": result["hosts"],
        "aggregators": result["aggregators"],
        "verified": result["verified"],
        "data_bytes": result["bytes_written"],
        "files": len(result["files"]),
        "osd_writes": _added(after, before, "writes"),
        "osd_write_bytes": _added(after, before, "write_bytes"),
        "osd_reads": _added(after, before, "reads"),
        "mds_file_locks": requests.get("setfilelock", 0),
        "mds_creates": requests.get("create", 0),
        "mds_requests": after.mds.total - before.mds.total,
        "write_s": result["write_s"],
    }


def recorded() -> dict:
    """The record of `make record-pfs-nodes` kept with the lab (RECORD)."""
    return cephfs_lessons.recorded(RECORD)


def describe_record(record: dict) -> str:
    """Where and when the record was measured, for the line above the figures that show it."""
    nodes = " and ".join(record["nodes"])
    return cephfs_lessons.describe_record(record, f", nodes {nodes} on that one machine")
