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


def _servers(cluster: cephfs.Cluster) -> dict[str, int]:
    osds = cephfs.osd_counters(cluster)
    mds = cephfs.mds_requests(cluster)
    return {
        "osd_reads": sum(row["reads"] for row in osds),
        "osd_read_bytes": sum(row["read_bytes"] for row in osds),
        "mds_requests": mds.get("all", 0),
        "mds_opens": mds.get("open", 0),
        "mds_lookups": mds.get("lookup", 0),
        "mds_getattrs": mds.get("getattr", 0),
        "mds_readdirs": mds.get("readdir", 0),
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
            before = _servers(cluster)
            run = run_once(reader_command(name, dataset_dir), timeout=timeout, late=STALLED)
            after = _servers(cluster)
            rows.append(
                {
                    "reader": name,
                    "client": client,
                    "in_reader_s": float((run.result or {}).get("time_s", float("nan"))),
                    "wall_s": run.wall_s,
                    **{key: after[key] - before[key] for key in after},
                }
            )
    return pd.DataFrame(rows)
