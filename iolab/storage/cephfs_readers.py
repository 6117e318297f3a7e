"""The five readers on the private CephFS, seen by its servers: OSD reads and MDS requests.

A reader's time on a laptop's disk says little about a parallel file system; the servers'
own counters say what each access pattern asks of one. Each reader runs once on a fresh
client (unmounted and mounted again: no cached names, capabilities or data, as on a node
that never saw the files) and once right after on the warm client. The counters are read
from every OSD's and the MDS's admin socket before and after the run; the difference is what
that reader asked, its start-up's reads of the manifest included.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from iolab.core.builder import build_dataset
from iolab.measure.readers import READER_NAMES, reader_command
from iolab.measure.timing import run_once
from iolab.storage import cephfs

#: The longest a reader may run on the private CephFS: the naive reader on a fresh client
#: took 41 s on a 2-core VM; past this a server has stopped answering.
READER_TIMEOUT_S = 300
STALLED = (
    "the CephFS stopped answering (an OSD or the metadata server is stopped or "
    "hung): `python -m iolab pfs status` shows which, `python -m iolab pfs down` ends it"
)


def dataset_on(cluster: cephfs.Cluster, files: int | None = None) -> Path:
    """The lab's dataset (by default 7300 files, and data.tar) generated on the CephFS,
    reused if whole."""
    dataset_dir = cluster.mount_point / ("dataset" if files is None else f"dataset-{files}")
    build_dataset(dataset_dir, files=files)
    return dataset_dir


def _served(after: cephfs.ServerCounts, before: cephfs.ServerCounts) -> dict[str, int]:
    """What the OSDs and the MDS did for one run, by the columns of reader_servers."""
    return {
        "osd_reads": after.osd_added(before, "reads"),
        "osd_read_bytes": after.osd_added(before, "read_bytes"),
        "mds_requests": after.mds_added(before),
        "mds_opens": after.mds_added(before, "open"),
        "mds_lookups": after.mds_added(before, "lookup"),
        "mds_getattrs": after.mds_added(before, "getattr"),
        "mds_readdirs": after.mds_added(before, "readdir"),
    }


def reader_servers(
    cluster: cephfs.Cluster,
    dataset_dir: Path,
    names: tuple[str, ...] = READER_NAMES,
    timeout: float = READER_TIMEOUT_S,
) -> pd.DataFrame:
    """Per reader and client state (fresh, warm): its own time, the whole process's, and what
    the OSDs and the MDS served for it."""
    rows = []
    for name in names:
        for client in ("fresh", "warm"):
            if client == "fresh":
                cephfs.remount(cluster)
            before = cephfs.ServerCounts.now(cluster)
            run = run_once(reader_command(name, dataset_dir), timeout=timeout, late=STALLED)
            after = cephfs.ServerCounts.now(cluster)
            rows.append(
                {
                    "reader": name,
                    "client": client,
                    "in_reader_s": float((run.result or {}).get("time_s", float("nan"))),
                    "wall_s": run.wall_s,
                    **_served(after, before),
                }
            )
    return pd.DataFrame(rows)
