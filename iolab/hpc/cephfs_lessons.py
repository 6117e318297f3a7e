"""The lessons' parallel-file-system effects measured on the private CephFS, as one record.

`iolab pfs measure` (and `make record-pfs`) runs them on a cluster that is up: the layout
check of lesson 07 for stripe counts 1 and 4, and the five readers of lesson 02 on a fresh
and a warm client with the servers' counters. The record names the machine, the Ceph
version, the OSD count and the date, so a page that shows it says where it came from.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from pathlib import Path

from iolab.hpc import ceph_layout as cl
from iolab.measure.context import machine_context
from iolab.storage import cephfs, cephfs_readers

#: The test file of the layout check: 10 MiB and a few bytes, so the last object is partial.
LAYOUT_FILE_BYTES = 10 * cl.MIB + 123
LAYOUT = dict(stripe_unit=cl.MIB, object_size=4 * cl.MIB)


def layout_check(cluster: cephfs.Cluster, stripe_count: int) -> dict:
    """Write the test file into a folder with that stripe count; each object against the
    model, and the bytes per OSD the model gives against the OSDs' own write counters."""
    folder = Path(tempfile.mkdtemp(prefix=f"layout-{stripe_count}-", dir=cluster.mount_point))
    cl.set_dir_layout(folder, cl.CephLayout(stripe_count=stripe_count, **LAYOUT))
    before = {row["osd"]: row["write_bytes"] for row in cephfs.osd_counters(cluster)}
    path = folder / "file.bin"
    with open(path, "wb") as handle:
        handle.write(os.urandom(LAYOUT_FILE_BYTES))
        handle.flush()
        os.fsync(handle.fileno())  # the objects are on the OSDs when the counters are read
    after = {row["osd"]: row["write_bytes"] for row in cephfs.osd_counters(cluster)}
    objects = cl.check_file(cluster, path)
    return {
        "stripe_count": stripe_count,
        "file_bytes": LAYOUT_FILE_BYTES,
        "objects": objects.to_dict(orient="records"),
        "agree": int(objects["agrees"].sum()),
        "objects_checked": len(objects),
        "model_bytes_per_osd": {str(k): v for k, v in cl.bytes_per_osd(objects).items()},
        "counted_write_bytes_per_osd": {str(osd): after[osd] - before[osd] for osd in after},
    }


def measure_all(cluster: cephfs.Cluster) -> dict:
    """Every measurement of the lessons on this cluster, with where and when it ran."""
    state = cephfs.status(cluster)
    context = machine_context(cluster.mount_point)
    layouts = [layout_check(cluster, count) for count in (1, 4)]
    readers = cephfs_readers.reader_servers(cluster, cephfs_readers.dataset_on(cluster))
    return {
        "recorded_on": datetime.date.today().isoformat(),
        "machine": {key: context.get(key) for key in ("cpu_model", "cpu_count", "kernel")},
        "ceph_version": state["ceph_version"],
        "osds": cluster.osds,
        "up_s": state["started_s"],
        "resident_mib": state["resident_mib"],
        "layouts": layouts,
        "readers": readers.to_dict(orient="records"),
    }
