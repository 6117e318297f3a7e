"""Jobs on two nodes of the tests' Slurm, each node a client of the private CephFS, as the
servers counted them: lesson 08's MPI-IO demo and lesson 11's stage-in.

Each node mounts the CephFS as a ceph-fuse client of its own (tests/slurm_cephfs.py), so
what one node has cached the other has not, as on a cluster. The OSDs' and the MDS's
counters are read before and after each job, so they belong to that job alone; they tell
apart what the jobs' own timings cannot (both nodes share one machine).

MPI-IO (demos/slurm/mpiio.sbatch, one job per mode, scratch on the CephFS):

* independent writes of interleaved blocks go through data sieving: each rank reads a window
  of the file, patches its blocks in and writes the whole window back, under an fcntl lock
  that the MDS grants (`setfilelock` requests), so the OSDs are sent about ranks times the
  data;
* collective buffering ships the blocks to one aggregator per node, which write large
  contiguous pieces once, without locks;
* a file per process creates one file per rank and writes it once, without locks.

Stage-in (lesson 11): every task reads the 7300 files where they lie, or each node stages
the archive once (demos/slurm/stage_in.py, as small-files-local.sbatch does) and its tasks
read the node's copy; fresh clients for each, so every node starts with nothing cached.

`make record-pfs-nodes` (as root) stores both with the lab (RECORD); lessons 08 and 11 show
them. Counts are exact; the seconds are of two nodes sharing one machine.
"""

from __future__ import annotations

from pathlib import Path

from iolab.hpc import cephfs_lessons
from iolab.measure.recorded import log_fallback
from iolab.storage import cephfs

#: The run `make record-pfs-nodes` stores with the lab, relative to the checkout.
RECORD = Path("reference") / "bench-recorded" / "pfs-nodes.json"
MODES = ("independent", "collective", "file-per-process")
#: The demo's options for the record: 4 ranks x 4,096 blocks of 4 KiB, 64 MiB per mode.
RECORD_DEMO_ARGS = "--blocks-per-rank 4096 --block-size 4096"
#: How often the record repeats the two shared-file modes to see how often their bytes read
#: back wrong, and the smaller size it repeats them at (4 MiB in all).
REPEATS = 20
REPEAT_DEMO_ARGS = "--blocks-per-rank 256 --block-size 4096"
#: What is repeated, as (mode, page_cache): both shared-file modes on clients as mounted by
#: default, then data sieving on clients whose kernel keeps no page of the file
#: (ceph-fuse's fuse_disable_pagecache), which tells where its lost bytes came from.
REPEATED = (("independent", True), ("collective", True), ("independent", False))


def mode_row(result: dict, before: cephfs.ServerCounts, after: cephfs.ServerCounts) -> dict:
    """One mode's row: what the demo reported (`result`, its --json) and what the servers
    counted between `before` and `after` (the job alone ran in between)."""
    return {
        "mode": result["mode"],
        "ranks": result["ranks"],
        "nodes": len(set(result["hosts"])),
        "hosts": result["hosts"],
        "aggregators": result["aggregators"],
        "verified": result["verified"],
        "wrong_bytes": result["wrong_bytes"],
        "data_bytes": result["bytes_written"],
        "files": len(result["files"]),
        "osd_writes": after.osd_added(before, "writes"),
        "osd_write_bytes": after.osd_added(before, "write_bytes"),
        "osd_reads": after.osd_added(before, "reads"),
        "mds_file_locks": after.mds_added(before, "setfilelock"),
        "mds_creates": after.mds_added(before, "create"),
        "mds_requests": after.mds_added(before),
        "write_s": result["write_s"],
    }


#: Why the two-node runs are never measured by `make lab`.
RECORDED_ONLY = (
    "the CephFS runs on two Slurm nodes need root, for a test Slurm and FUSE on each node: "
    "a maintainer records them with `sudo make record-pfs-nodes`"
)


def recorded() -> dict:
    """The record of `make record-pfs-nodes` kept with the lab (RECORD)."""
    return cephfs_lessons.recorded(RECORD)


def recorded_instead(notebook: str, key: str) -> dict:
    """RECORD, which `notebook` always shows (its run needs root), noted as such for
    `make lab`'s summary."""
    log_fallback(notebook, key, RECORDED_ONLY)
    return recorded()


def describe_record(record: dict) -> str:
    """Where and when the record was measured, for the line above the figures that show it."""
    nodes = " and ".join(record["nodes"])
    return cephfs_lessons.describe_record(record, f", nodes {nodes} on that one machine")


#: How the tasks of the staging jobs reach the dataset, in the order they run.
STAGING_METHODS = ("every task reads the shared copy", "stage in once per node, read locally")


def staging_row(
    method: str,
    nodes: int,
    task_readings: list[dict],
    stage_reports: list[dict],
    before: cephfs.ServerCounts,
    after: cephfs.ServerCounts,
) -> dict:
    """One staging job's row: its tasks' readings (read_files.py --json), each node's
    stage-in report (none when reading in place), and what the servers served meanwhile."""
    return {
        "method": method,
        "nodes": nodes,
        "tasks": len(task_readings),
        "files_read_per_task": task_readings[0]["members"],
        "stage_ins": len(stage_reports),
        "shared_files_opened_by_stage_ins": sum(r["shared_files_opened"] for r in stage_reports),
        "osd_reads": after.osd_added(before, "reads"),
        "osd_read_MiB": round(after.osd_added(before, "read_bytes") / 2**20, 2),
        "mds_requests": after.mds_added(before),
        "slowest_task_read_s": round(max(r["time_s"] for r in task_readings), 3),
        "slowest_stage_in_s": round(
            max((r["copy_s"] + r["unpack_s"] for r in stage_reports), default=0.0), 3
        ),
    }
