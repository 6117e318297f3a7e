"""Lesson 11's stage-in measured on the private CephFS: the dataset taken to a local disk as
one archive, against its folder copied file by file, with what the servers served for each.

A job that stages its data pays the shared file system once, then reads the node's own
disk. How much it pays depends on the shape of what it copies: the lab's own stage-in
(`demos/slurm/stage_in.py`, which the Slurm job of lesson 11 runs on every node) reads
data.tar and two small files, where `cp -R` of the folder opens every small file. Both run
on a fresh client (just mounted, as a compute node that never saw the files), into a private
folder of the workspace's local disk, and `read_files.py` then reads the staged copy; beside
them, the same reader straight from the CephFS. The OSDs' and MDS's counters are read around
each whole (the local reads ask the servers nothing).
"""

from __future__ import annotations

import sys
from pathlib import Path

from iolab.core.lab_dirs import ensure_writable_dir, fresh_run_dir
from iolab.core.workspace import WorkspaceEntry, repo_root
from iolab.measure.readers import reader_command
from iolab.measure.timing import run_once
from iolab.storage import cephfs, cephfs_readers

#: The lab's stage-in, the one the Slurm job of lesson 11 runs on each node.
STAGE_IN = Path("demos") / "slurm" / "stage_in.py"
#: How the dataset reaches read_files.py: (name, how it is staged: None where it lies).
METHODS = (
    ("read where it lies (no staging)", None),
    ("stage the archive (stage_in.py)", "archive"),
    ("stage the folder file by file (cp -R)", "folder"),
)
#: The longest a stage-in may take on the private CephFS: past it, a server stopped answering.
STAGE_TIMEOUT_S = cephfs_readers.READER_TIMEOUT_S


def _stage(dataset_dir: Path, into: Path, how: str) -> tuple[float, int, Path]:
    """Take the dataset into `into` by the archive or the folder: wall seconds, the files
    that made on the local disk, and the staged dataset's folder."""
    if how == "archive":
        staged = into / "dataset"
        command = [
            sys.executable,
            str(repo_root() / STAGE_IN),
            "--archive-dir",
            str(dataset_dir),
            "--into",
            str(staged),
            "--report-dir",
            str(into / "report"),
        ]
        run = run_once(command, timeout=STAGE_TIMEOUT_S, late=cephfs_readers.STALLED)
        return run.wall_s, int((run.result or {})["local_files_created"]), staged
    staged = into / "copy"
    staged.mkdir()
    command = [
        "cp",
        "-R",
        str(dataset_dir / "data"),
        str(dataset_dir / "manifest.json"),
        str(staged),
    ]
    run = run_once(command, timeout=STAGE_TIMEOUT_S, late=cephfs_readers.STALLED)
    created = sum(1 for path in staged.rglob("*") if path.is_file())
    return run.wall_s, created, staged


def staging_from_cephfs(cluster: cephfs.Cluster, dataset_dir: Path) -> list[dict]:
    """read_files.py on a fresh client: straight from the CephFS, or after staging the
    dataset to the local disk by the archive or file by file. Seconds of each step, the files
    made on the local disk, and what the servers served for the whole."""
    rows = []
    local = ensure_writable_dir(WorkspaceEntry.TMP.path())
    for method, how in METHODS:
        cephfs.remount(cluster)
        with fresh_run_dir(local, "stage-in-") as into:
            before = cephfs.ServerCounts.now(cluster)
            seconds, created, staged = (
                (0.0, 0, dataset_dir) if how is None else (_stage(dataset_dir, into, how))
            )
            run = run_once(
                reader_command("read_files", staged),
                timeout=cephfs_readers.READER_TIMEOUT_S,
                late=cephfs_readers.STALLED,
            )
            after = cephfs.ServerCounts.now(cluster)
        read_s = float((run.result or {})["time_s"])
        rows.append(
            {
                "method": method,
                "stage_s": round(seconds, 3),
                "read_files_s": round(read_s, 3),
                "total_s": round(seconds + read_s, 3),
                "local_files_created": created,
                "osd_reads": after.osd_added(before, "reads"),
                "osd_read_bytes": after.osd_added(before, "read_bytes"),
                "mds_requests": after.mds_added(before),
            }
        )
    return rows
