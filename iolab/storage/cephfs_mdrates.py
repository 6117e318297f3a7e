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
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from iolab.core.lab_dirs import ensure_writable_dir
from iolab.core.workspace import WorkspaceEntry
from iolab.storage import cephfs, mdrates

#: Files per run: lesson 06's comparison of places (one process, one directory, empty files).
FILES = mdrates.DEFAULT_FILES_PER_PROCESS
#: The CephFS runs: whether the client is mounted afresh before every phase.
CLIENTS = {"same client": False, "fresh client": True}
#: A record's rows of MDS requests: per phase (operation) and client, each request type.
BY_TYPE_COLUMNS = ["operation", "client", "request_type", "mds_requests", "mds_mean_latency_ms"]


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


def metadata_rates(
    cluster: cephfs.Cluster, files: int = FILES, local_dir: Path | None = None
) -> dict:
    """Create, stat, read and remove `files` empty files with one process on the local disk
    (`local_dir`, by default the workspace's tmp) and on the CephFS, same client and fresh
    client: per operation the rates (ops/s) and the MDS's requests, in all and by type with
    their mean latency (ms). A record for pfs.json (iolab.hpc.cephfs_lessons)."""
    directory = local_dir or ensure_writable_dir(WorkspaceEntry.TMP.path())
    local = mdrates.run_mdtest(directory, files, processes=1, progress=False, compute_node=True)
    local_rates = local.set_index("Operation")["Mean (ops/s)"]
    rates, by_type = [], []
    fs_type = None
    for client, fresh in CLIENTS.items():
        table, seen = _cephfs_run(cluster, files, fresh)
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
