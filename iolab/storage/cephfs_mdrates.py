"""Lesson 06's metadata rates on the private CephFS, seen by its metadata server (MDS).

mdrates (mdtest's four file phases: create, stat, read, remove) gives the rate of each
operation on any directory; on a CephFS the MDS's own counters add which requests each
operation cost it and how long it took to answer them. The same test runs in one go on the
local disk (the workspace) and on the CephFS, with the MDS's `perf dump` read right before
and right after every phase, while mdrates' processes wait (its before_phases and
between_phases hooks): the difference is that phase's requests, by type, with their mean
latency.

On the CephFS it runs twice. Once as mdtest runs on one node: every phase on the client that
created the files, which holds their capabilities. Once with the client mounted afresh
before every phase, as if each phase ran on a node that never saw the files: nothing cached,
no capabilities held.

Each CephFS run happens in a process of its own that is ended after RUN_TIMEOUT_S: with the
MDS stopped, a phase's file operations and the removal of its files after them would wait
for ever, so the lab's own process never touches the mount. A worker caught in the middle
of a request cannot be killed at all until the client ends (`pfs down` ends it first).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError, run_cli
from iolab.core.lab_dirs import ensure_writable_dir
from iolab.core.workspace import WorkspaceEntry
from iolab.storage import cephfs, cephfs_readers, mdrates

#: Files per run: lesson 06's comparison of places (one process, one directory, empty files).
FILES = mdrates.DEFAULT_FILES_PER_PROCESS
#: The CephFS runs: whether the client is mounted afresh before every phase.
CLIENTS = {"same client": False, "fresh client": True}
#: A record's rows of MDS requests: per phase (operation) and client, each request type.
BY_TYPE_COLUMNS = ["operation", "client", "request_type", "mds_requests", "mds_mean_latency_ms"]
#: The longest one CephFS run (four phases of FILES files, with remounts) may take: 1000 files
#: took under 10 s on a 2-core VM; past this the MDS or an OSD has stopped answering.
RUN_TIMEOUT_S = 300
#: How long a run's process, told to stop, gets to stop its workers before it is killed.
STOP_GRACE_S = 15


def _cephfs_run(cluster: cephfs.Cluster, files: int, fresh: bool) -> tuple[pd.DataFrame, dict]:
    """mdrates on the mount, and per phase what the MDS answered during it: its requests in
    all, and per request type (MdsRequests.since)."""
    before: dict[str, cephfs.MdsRequests] = {}
    seen: dict[str, dict] = {}

    def start(operation: str, _directory: Path) -> None:
        if fresh:
            cephfs.remount(cluster)  # before the reading: the mount's own requests stay out
        before[operation] = cephfs.mds_request_counters(cluster)

    def end(operation: str, _directory: Path) -> None:
        after = cephfs.mds_request_counters(cluster)
        seen[operation] = {
            "all": after.total - before[operation].total,
            "by_type": after.since(before[operation]),
        }

    # the cluster is up, so the budget was settled when it started (cephfs.up)
    table = mdrates.run_mdtest(
        cluster.mount_point,
        files,
        processes=1,
        progress=False,
        compute_node=True,
        before_phases=start,
        between_phases=end,
    )
    return table, seen


def _run_alone(argv: list[str]) -> None:
    """The run's own process (`python -m iolab.storage.cephfs_mdrates FOLDER FILES CLIENT`):
    one CephFS run on the cluster recorded in the workspace, its table and the MDS's counts
    written to stdout as JSON."""
    folder, files, client = argv
    cluster = cephfs.current()
    if cluster is None or str(cluster.folder) != folder:
        raise LabError("the CephFS that was asked for is no longer up: start it again")
    table, seen = _cephfs_run(cluster, int(files), CLIENTS[client])
    json.dump({"table": table.to_dict(orient="list"), "seen": seen}, sys.stdout, default=float)


def _end(proc: subprocess.Popen) -> None:
    """Stop the run's process: SIGTERM (it stops its workers), then SIGKILL. A process in the
    middle of a request to a stopped MDS cannot be killed until the request ends; it is left
    to `pfs down`, which ends the client and with it the request."""
    for stop in (proc.terminate, proc.kill):
        if proc.poll() is not None:
            return
        stop()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(STOP_GRACE_S)


def _bounded_run(
    cluster: cephfs.Cluster, files: int, client: str, timeout: float
) -> tuple[pd.DataFrame, dict]:
    """_cephfs_run in a process of its own, ended if it takes longer than `timeout`."""
    cmd = [sys.executable, "-m", __name__, str(cluster.folder), str(files), client]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LabError(
            f"the metadata run on the CephFS did not finish within {timeout:.0f} s: "
            f"{cephfs_readers.STALLED}"
        ) from None
    finally:
        _end(proc)
        latest = cephfs.current()  # a fresh client's remount started a new ceph-fuse
        if latest is not None and latest.folder == cluster.folder:
            cluster.pids.update(latest.pids)
    if proc.returncode != 0:
        last = (err.strip().splitlines() or ["no message"])[-1].removeprefix("error: ")
        raise LabError(f"the metadata run on the CephFS failed: {last}")
    answer = json.loads(out)
    return pd.DataFrame(answer["table"]), answer["seen"]


def metadata_rates(
    cluster: cephfs.Cluster,
    files: int = FILES,
    local_dir: Path | None = None,
    timeout: float = RUN_TIMEOUT_S,
) -> dict:
    """Create, stat, read and remove `files` empty files with one process on the local disk
    (`local_dir`, by default the workspace's tmp) and on the CephFS, same client and fresh
    client: per operation the rates (ops/s) and the MDS's requests, in all and by type with
    their mean latency (ms). A record for pfs.json (iolab.hpc.cephfs_lessons). Each CephFS
    run that takes longer than `timeout` seconds is ended with one sentence (a LabError)."""
    directory = local_dir or ensure_writable_dir(WorkspaceEntry.TMP.path())
    local = mdrates.run_mdtest(directory, files, processes=1, progress=False, compute_node=True)
    local_rates = local.set_index("Operation")["Mean (ops/s)"]
    rates, by_type = [], []
    fs_type = None
    for client in CLIENTS:
        table, seen = _bounded_run(cluster, files, client, timeout)
        fs_type = str(table["fs_type"].iloc[0])
        cephfs_rates = table.set_index("Operation")["Mean (ops/s)"]
        for operation, phase in mdrates.OPERATIONS.items():
            rates.append(
                {
                    "operation": operation,
                    "client": client,
                    "files": files,
                    "local_disk_ops_per_s": float(local_rates[phase]),
                    "cephfs_ops_per_s": float(cephfs_rates[phase]),
                    "mds_requests": int(seen[phase]["all"]),
                }
            )
            by_type += [
                {"operation": operation, "client": client, **row} for row in seen[phase]["by_type"]
            ]
    return {
        "files": files,
        "processes": 1,
        "file_bytes": 0,
        "local_fs_type": str(local["fs_type"].iloc[0]),
        "cephfs_fs_type": fs_type,
        "rates": rates,
        "mds_by_type": by_type,
    }


def side_by_side(record: dict) -> pd.DataFrame:
    """One row per operation: ops/s on the local disk and on the CephFS, and what the MDS
    answered, for the same client and a fresh one (the notebook's table)."""
    rates = pd.DataFrame(record["rates"])
    by_type = pd.DataFrame(record["mds_by_type"], columns=BY_TYPE_COLUMNS)
    order = list(mdrates.OPERATIONS)
    columns = {}
    for client, slug in (("same client", "same_client"), ("fresh client", "fresh_client")):
        mine = rates[rates["client"] == client].set_index("operation").reindex(order)
        columns[f"cephfs_{slug}_ops_per_s"] = mine["cephfs_ops_per_s"]
        columns[f"mds_requests_{slug}"] = mine["mds_requests"]
        kinds = by_type[by_type["client"] == client]
        columns[f"mds_requests_by_type_{slug}"] = pd.Series(
            {
                operation: ", ".join(
                    f"{row.request_type} {row.mds_requests}"
                    for row in kinds[kinds["operation"] == operation].itertuples()
                )
                or "none"
                for operation in order
            }
        )
    local = rates[rates["client"] == "same client"].set_index("operation").reindex(order)
    table = pd.DataFrame({"local_disk_ops_per_s": local["local_disk_ops_per_s"], **columns})
    return table.rename_axis("operation")


def latencies(record: dict) -> pd.DataFrame:
    """Per operation, client and request type: the MDS's requests and their mean latency (ms),
    beside the client's own time per operation (ms) that the rate implies."""
    rates = pd.DataFrame(record["rates"]).set_index(["operation", "client"])
    rows = pd.DataFrame(record["mds_by_type"], columns=BY_TYPE_COLUMNS)
    per_op = 1000 / rates["cephfs_ops_per_s"]
    rows["client_ms_per_op"] = [
        float(per_op[(row.operation, row.client)]) for row in rows.itertuples()
    ]
    return rows


if __name__ == "__main__":
    run_cli(lambda: _run_alone(sys.argv[1:]))
