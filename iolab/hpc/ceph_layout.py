"""CephFS layouts through the lab's striping model, checked object by object on a live cluster.

A CephFS file layout has Lustre's two numbers, a stripe unit (Lustre's stripe size) and a
stripe count, and one Lustre lacks: the object size. Lustre keeps writing a stripe into the
same object forever; CephFS fills `stripe_count` objects of `object_size` bytes (an object
set) with stripe units dealt round-robin, then starts the next set of objects. Inside one
object set that is exactly Lustre's RAID0 rule, so the model here is the lab's Lustre model
(iolab.hpc.stripes.locate) applied to the offset inside the set, with the set's number added
to the object number. Object names are `<inode in hex>.<object number as 8 hex digits>`.

CRUSH, not the layout, chooses each object's OSD; `ceph osd map` tells it. So a file written
on the private cluster is checked object by object: the names and sizes the model predicts
against `rados ls` / `rados stat`, the OSD of each from `ceph osd map`, and the bytes per OSD
against the OSDs' own write counters.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError
from iolab.hpc.stripes import Layout, locate
from iolab.storage import cephfs

MIB = 2**20


@dataclass(frozen=True)
class CephLayout:
    """A CephFS file layout (the `ceph.file.layout` xattr's numbers)."""

    stripe_unit: int
    stripe_count: int
    object_size: int

    def __post_init__(self) -> None:
        if (
            min(self.stripe_unit, self.stripe_count, self.object_size) <= 0
            or self.object_size % self.stripe_unit
        ):
            raise LabError(
                f"{self} is not a CephFS layout: all three must be positive and the "
                "object size a multiple of the stripe unit"
            )

    @property
    def set_bytes(self) -> int:
        """Bytes of file in one object set: stripe_count objects of object_size."""
        return self.stripe_count * self.object_size


def object_of(layout: CephLayout, offset: int) -> tuple[int, int]:
    """(object number, offset inside the object) of file byte `offset`, by the Lustre model
    applied inside the byte's object set."""
    object_set, inside = divmod(offset, layout.set_bytes)
    raid0 = Layout.plain(layout.stripe_unit, tuple(range(layout.stripe_count)))
    place = locate(raid0, inside)
    return object_set * layout.stripe_count + int(place.ost), place.object_offset


def predicted_objects(layout: CephLayout, size: int) -> dict[int, int]:
    """For a file of `size` bytes written from 0: each object's size (its highest byte + 1),
    walking the file a stripe unit at a time."""
    sizes: dict[int, int] = {}
    for start in range(0, size, layout.stripe_unit):
        length = min(layout.stripe_unit, size - start)
        number, inside = object_of(layout, start)
        sizes[number] = max(sizes.get(number, 0), inside + length)
    return dict(sorted(sizes.items()))


def object_name(inode: int, number: int) -> str:
    return f"{inode:x}.{number:08x}"


def set_dir_layout(folder: Path, layout: CephLayout) -> None:
    """Give `folder` a layout that files created in it inherit (the ceph.dir.layout xattrs)."""
    for field, value in (
        ("stripe_unit", layout.stripe_unit),
        ("stripe_count", layout.stripe_count),
        ("object_size", layout.object_size),
    ):
        os.setxattr(folder, f"ceph.dir.layout.{field}", str(value).encode())


def file_layout(path: Path) -> CephLayout:
    """The layout CephFS gave a file, read back from its ceph.file.layout xattr."""
    fields = dict(
        part.split("=", 1) for part in os.getxattr(path, "ceph.file.layout").decode().split()
    )
    return CephLayout(
        int(fields["stripe_unit"]), int(fields["stripe_count"]), int(fields["object_size"])
    )


def check_file(cluster: cephfs.Cluster, path: Path) -> pd.DataFrame:
    """One row per object the model predicts for `path`: its name, predicted and stored size,
    its OSD, and whether it agrees; objects the model did not predict are rows too."""
    layout, inode, size = file_layout(path), os.stat(path).st_ino, os.stat(path).st_size
    predicted = {object_name(inode, n): s for n, s in predicted_objects(layout, size).items()}
    prefix = f"{inode:x}."
    stored = {
        name: _object_size(cluster, name)
        for name in _rados(cluster, "ls").split()
        if name.startswith(prefix)
    }
    rows = []
    for name in sorted(predicted.keys() | stored.keys()):
        rows.append(
            {
                "object": name,
                "predicted_bytes": predicted.get(name),
                "stored_bytes": stored.get(name),
                "osd": _osd_of(cluster, name),
                "agrees": predicted.get(name) is not None
                and predicted.get(name) == stored.get(name),
            }
        )
    return pd.DataFrame(rows)


def bytes_per_osd(objects: pd.DataFrame) -> dict[int, int]:
    """The predicted bytes each OSD stores, from the per-object check."""
    return {
        int(osd): int(total)
        for osd, total in objects.groupby("osd")["predicted_bytes"].sum().items()
    }


def _object_size(cluster: cephfs.Cluster, name: str) -> int:
    # `rados stat` prints "<pool>/<name> mtime <time>, size <bytes>"
    out = _rados(cluster, "stat", name)
    return int(out.rsplit("size", 1)[1].strip())


def _osd_of(cluster: cephfs.Cluster, name: str) -> int:
    mapping = json.loads(
        cephfs.ceph_cli(cluster, "osd", "map", cephfs.DATA_POOL, name, "--format", "json")
    )
    return int(mapping["acting_primary"])


def _rados(cluster: cephfs.Cluster, *args: str) -> str:
    return cephfs.run_tool(
        ["rados", "-c", str(cluster.conf), "-n", "client.admin", "-p", cephfs.DATA_POOL, *args]
    )
