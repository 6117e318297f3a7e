"""Which shared file system a path is on, and what its client lets an ordinary user count.

The private CephFS shows the servers' side because the learner runs the servers. On a real
cluster the servers belong to the centre: a user sees only the client. What the client
exposes differs by file system, so the lab names it for each one and says what only an
administrator can see:

- Lustre: the client's `llite` (file operations) and `mdc` (requests to the metadata
  servers) statistics, through `lctl get_param`, readable by users on most systems. The
  format is `name count samples [unit] min max sum [sumsq]`, printed by
  `lprocfs_stats_seq_show` (lustre/obdclass/lprocfs_status.c).
- NFS: `/proc/self/mountstats`, per mount and per operation (GETATTR, LOOKUP, READ, ...):
  calls, bytes, queue, round-trip and execution times (Linux net/sunrpc/stats.c).
- CephFS with the FUSE client: the client's admin socket, owned by whoever mounted it; with
  the kernel client: debugfs, root only.
- GPFS (IBM Storage Scale): `mmpmon` and `mmdiag`, root only.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError
from iolab.hpc.lustre import statfs_magic
from iolab.measure.context import MountInfo, is_network_fs, mount_for
from iolab.measure.readers import READER_NAMES, reader_command
from iolab.measure.timing import run_once

#: statfs(2) f_type magic numbers, for when the mount table says only "fuse" or nothing.
MAGIC_TYPES = {0x0BD00BD0: "lustre", 0x47504653: "gpfs", 0x6969: "nfs", 0x00C36400: "ceph"}
LCTL_TIMEOUT_S = 10.0
#: The longest one reader may run on a shared file system before the lab gives up on it.
READER_TIMEOUT_S = 600
MOUNTSTATS = Path("/proc/self/mountstats")


@dataclass(frozen=True)
class FileSystemKind:
    """What a user can count on one kind of file system, and what needs its administrator."""

    name: str
    user_counters: str
    needs_admin: str


_SERVERS = "the servers' own counters"
KINDS = {
    "lustre": FileSystemKind(
        "Lustre",
        "the client's llite and mdc statistics (`lctl get_param llite.*.stats mdc.*.stats`)",
        f"{_SERVERS} (the MDTs' md_stats, the OSTs' stats, job_stats) are read on the "
        "servers: ask your centre's storage team",
    ),
    "nfs": FileSystemKind(
        "NFS",
        "per-operation calls and round-trip times of this mount (/proc/self/mountstats)",
        f"{_SERVERS} (nfsd's /proc/net/rpc/nfsd) are on the NFS server: ask its administrator",
    ),
    "ceph-fuse": FileSystemKind(
        "CephFS (FUSE client)",
        "the client's admin socket (`ceph daemon SOCKET perf dump`), for whoever mounted it",
        f"{_SERVERS} (`ceph tell mds.* perf dump`, the OSDs' perf dump) need the cluster's "
        "admin key: ask your centre, or run the lab's own CephFS (`python -m iolab pfs up`)",
    ),
    "ceph": FileSystemKind(
        "CephFS (kernel client)",
        "none: the kernel client's counters are in debugfs (/sys/kernel/debug/ceph), root only",
        f"{_SERVERS} (`ceph tell mds.* perf dump`) and the client's debugfs need an "
        "administrator; the lab's own CephFS (`python -m iolab pfs up`) shows both sides",
    ),
    "gpfs": FileSystemKind(
        "GPFS (IBM Storage Scale)",
        "none: `mmpmon` and `mmdiag` need root",
        "the client's and the NSD servers' counters (`mmpmon`, `mmdiag --iohist`) need root: "
        "ask your centre's storage team",
    ),
}
_BY_TYPE = {
    "lustre": "lustre",
    "nfs": "nfs",
    "nfs4": "nfs",
    "ceph": "ceph",
    "fuse.ceph": "ceph-fuse",
    "fuse.ceph-fuse": "ceph-fuse",
    "gpfs": "gpfs",
}


@dataclass(frozen=True)
class ClientView:
    """The file system holding a path, as its client sees it."""

    path: str
    fs_type: str
    mount_point: str
    kind: str
    name: str
    user_counters: str
    needs_admin: str

    def to_dict(self) -> dict:
        return asdict(self)


def statfs_type(path: Path | str) -> str | None:
    """The file-system type statfs's magic number names, or None (unknown, not Linux)."""
    try:
        return MAGIC_TYPES.get(statfs_magic(path))
    except LabError:
        return None


def identify(
    path: Path | str, mounts: list[MountInfo] | None = None, magic_type: str | None = None
) -> ClientView:
    """The kind of file system `path` is on, from the mount table (the longest mount point
    holding it), with statfs's magic number where the table says only "fuse"."""
    mount = mount_for(path, mounts)
    fs_type = mount.fs_type
    key = _BY_TYPE.get(fs_type)
    if key is None and fs_type in ("fuse", "fuseblk", "unknown"):
        key = _BY_TYPE.get(magic_type or statfs_type(path) or "")
    if key is None:
        remote = is_network_fs(fs_type)
        return ClientView(
            str(path),
            fs_type,
            mount.mount_point,
            "other-network" if remote else "other",
            fs_type,
            f"no client counters the lab knows of for {fs_type}"
            if remote
            else "no shared-file-system client here: the lessons' own tools (strace, the "
            "page cache, /proc/diskstats) are what there is to count",
            "its server's view: ask whoever runs the server"
            if remote
            else "nothing: no server stands behind this file system",
        )
    kind = KINDS[key]
    return ClientView(
        str(path),
        fs_type,
        mount.mount_point,
        key,
        kind.name,
        kind.user_counters,
        kind.needs_admin,
    )


_STATS_LINE = re.compile(r"^\s*(\w+)\s+(\d+)\s+samples\s+\[(\w+)\](?:\s+(\d+)\s+(\d+)\s+(\d+))?")


def parse_lustre_stats(text: str) -> dict[str, int]:
    """{counter: count} summed over every block of `lctl get_param ...stats` output; a
    counter in bytes adds `<name>_sum` (the bytes), one in microseconds `<name>_usec`."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        match = _STATS_LINE.match(line)
        if not match:
            continue
        name, count, unit, total = (
            match.group(1),
            int(match.group(2)),
            match.group(3),
            match.group(6),
        )
        counts[name] = counts.get(name, 0) + count
        if total is not None and unit in ("bytes", "usec", "usecs"):
            suffix = "_sum" if unit == "bytes" else "_usec"
            counts[name + suffix] = counts.get(name + suffix, 0) + int(total)
    return counts


def parse_nfs_mountstats(text: str, mount_point: str) -> dict[str, int] | None:
    """{operation: calls} of the NFS mount at `mount_point` in /proc/self/mountstats text,
    with `<OP>_rtt_ms` (the round trips' total milliseconds); None if it is not there."""
    ops: dict[str, int] | None = None
    in_ops = False
    for line in text.splitlines():
        if line.startswith("device "):
            if ops is not None:
                break
            fields = line.split()
            here = len(fields) > 4 and fields[3] == "on" and fields[4] == mount_point
            ops = {} if here and " with fstype nfs" in line else None
            in_ops = False
            continue
        if ops is None:
            continue
        stripped = line.strip()
        if stripped.startswith("per-op statistics"):
            in_ops = True
        elif in_ops and re.match(r"^[A-Z_0-9]+:", stripped):
            name, _, rest = stripped.partition(":")
            values = [int(v) for v in rest.split()]
            if values and values[0]:
                ops[name] = values[0]
                if len(values) > 6:
                    ops[f"{name}_rtt_ms"] = values[6]
    return ops


def lctl_stats(fsname: str) -> str | None:
    """`lctl get_param` of the client's llite and mdc statistics for one Lustre file system,
    or None where lctl is missing or refuses."""
    lctl = shutil.which("lctl")
    if lctl is None:
        return None
    try:
        done = subprocess.run(
            [lctl, "get_param", f"llite.{fsname}-*.stats", f"mdc.{fsname}-*.stats"],
            capture_output=True,
            text=True,
            timeout=LCTL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 and done.stdout.strip() else None


def lustre_fsname(source: str) -> str:
    """The file system's name from a Lustre mount source (`10.0.0.1@o2ib:/scratch`)."""
    return source.rsplit(":/", 1)[-1].strip("/") or source


def client_counters(
    view: ClientView, mounts: list[MountInfo] | None = None
) -> dict[str, int] | None:
    """The counters an ordinary user can read for `view`'s mount now, or None where the
    file system gives a user none (say `view.needs_admin` then)."""
    if view.kind == "nfs":
        try:
            text = MOUNTSTATS.read_text(errors="replace")
        except OSError:
            return None
        return parse_nfs_mountstats(text, view.mount_point)
    if view.kind == "lustre":
        stats = lctl_stats(lustre_fsname(mount_for(view.path, mounts).source))
        return None if stats is None else parse_lustre_stats(stats)
    return None


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """What changed between two readings, counters that did not move left out."""
    return {
        key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key, 0)
    }


def reader_client_counters(
    view: ClientView,
    dataset_dir: Path,
    names: tuple[str, ...] = READER_NAMES,
    timeout: float = READER_TIMEOUT_S,
) -> pd.DataFrame | None:
    """Each reader once on a learner's own shared file system, with what its client counted
    (llite and mdc on Lustre, per-operation calls on NFS); None where a user can count
    nothing there. The counters are the node's: anyone else's I/O on the same mount in those
    seconds is counted too, so run it where you are alone (a compute node of your own)."""
    if client_counters(view) is None:
        return None
    rows = []
    for name in names:
        before = client_counters(view) or {}
        run = run_once(reader_command(name, dataset_dir), timeout=timeout)
        after = client_counters(view) or {}
        rows.append(
            {
                "reader": name,
                "in_reader_s": float((run.result or {}).get("time_s", float("nan"))),
                "wall_s": run.wall_s,
                **delta(before, after),
            }
        )
    return pd.DataFrame(rows).fillna(0)
