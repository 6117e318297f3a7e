"""A private CephFS on one machine: the parallel file system of a laptop, a VM or CI.

The lessons are about what a parallel file system does with small files, stripes, shared
files and metadata. Where the learner has none, the lab starts a real one as the running
user, with Debian's Ceph packages: one monitor, one manager (needed: `ceph fs status`,
which tells whether the MDS is active, is a manager module), OSDs storing their objects
(BlueStore) in files of the workspace, one metadata server (MDS), a CephFS over two pools,
and a ceph-fuse client mounted in the workspace. Everything listens on 127.0.0.1 only, on
ports the kernel hands out, and cephx is on with keys readable by the user alone, so no other
user of the machine can read or write the learner's file system.

It lives between commands (`iolab pfs up`, `status`, `down`): what was started is recorded
in the cluster folder (cluster.json), every daemon by its pid, proven ours before it is
signalled (its command line names our configuration, and it runs as us). `down` unmounts,
ends every process it started and removes every file: nothing is left, no process, port,
mount or file. A daemon that does not answer within COMMAND_TIMEOUT_S is a fault said in one
sentence, never a hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from iolab.core.atomic import atomic_output
from iolab.core.budget import check as check_budget
from iolab.core.errors import LabError, forget_undo, interrupts_held, undo_if_cut_off
from iolab.core.lab_dirs import ensure_writable_dir, remove_tree, socket_dir
from iolab.core.owned import discard_owned
from iolab.core.workspace import WorkspaceEntry
from iolab.measure.context import listed_as_mounted

LOOPBACK = "127.0.0.1"
FS_NAME = "iolabfs"
DATA_POOL, METADATA_POOL = "cephfs_data", "cephfs_metadata"
#: Debian's packages of the daemons and tools (Ceph 16 "Pacific" in Debian 12).
PACKAGES = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph-mds", "ceph-fuse", "ceph-common")
#: The commands `up` runs, and the package each comes in.
COMMANDS = {
    "ceph-mon": "ceph-mon",
    "monmaptool": "ceph-mon",
    "ceph-mgr": "ceph-mgr",
    "ceph-osd": "ceph-osd",
    "ceph-mds": "ceph-mds",
    "ceph-fuse": "ceph-fuse",
    "ceph": "ceph-common",
    "ceph-authtool": "ceph-common",
    "rados": "ceph-common",
}
DEFAULT_OSDS = 4
#: Each OSD's BlueStore file: BlueStore's smallest workable device is about 1 GiB; the
#: file is sparse, so it takes only what is written.
OSD_FILE_MIB = 1024
#: The most the file system holds: a quota on its root (ceph.quota.max_bytes), which every
#: ceph-fuse client enforces as it writes ("Disk quota exceeded"), so the OSDs' sparse files
#: fill with about this much file data at most, whatever a lesson or a learner writes (a few
#: MiB more: quotas are imprecise by what is in flight, docs.ceph.com/en/pacific/cephfs/quota).
QUOTA_MIB = 512
#: The MDS journal's bound: segments of 4 MiB objects in the metadata pool (Ceph's default
#: keeps 128 before trimming, 512 MiB on a busy run).
MDS_LOG_SEGMENTS = 16
MDS_JOURNAL_MIB = 4 * MDS_LOG_SEGMENTS
#: Keeps each OSD near 50-80 MB resident (its default aims at 4 GiB of cache).
OSD_MEMORY_TARGET = 512 * 2**20
#: How long one ceph command or one wait may take before it is a fault, not a hang.
COMMAND_TIMEOUT_S = 30
UP_TIMEOUT_S = 240
POLL_S = 0.5
STATE = "cluster.json"
DAEMONS = ("mon.a", "mgr.x", "mds.a")  # plus osd.0 .. osd.N-1
MOUNT_COMMAND = "ceph-fuse"
QUOTA_XATTR = "ceph.quota.max_bytes"


@dataclass
class Cluster:
    """A started cluster, as cluster.json records it."""

    folder: Path
    run_dir: Path
    mount_point: Path
    mon_port: int
    osds: int
    fsid: str
    pids: dict[str, int]
    started_s: float = 0.0

    @property
    def conf(self) -> Path:
        return self.folder / "ceph.conf"

    def socket(self, daemon: str) -> Path:
        """The admin socket of a daemon (e.g. "osd.0"), where its counters are read."""
        return self.run_dir / f"{daemon}.asok"

    def to_json(self) -> dict:
        return {
            "folder": str(self.folder),
            "run_dir": str(self.run_dir),
            "mount_point": str(self.mount_point),
            "mon_port": self.mon_port,
            "osds": self.osds,
            "fsid": self.fsid,
            "pids": self.pids,
            "started_s": self.started_s,
        }

    @classmethod
    def from_json(cls, record: dict) -> Cluster:
        return cls(
            Path(record["folder"]),
            Path(record["run_dir"]),
            Path(record["mount_point"]),
            int(record["mon_port"]),
            int(record["osds"]),
            str(record["fsid"]),
            {str(k): int(v) for k, v in record["pids"].items()},
            float(record.get("started_s", 0.0)),
        )


# --------------------------------------------------------------------------- what is missing


def missing_commands() -> list[str]:
    """The commands of COMMANDS not found (on PATH or in /usr/sbin, /usr/bin)."""
    return [name for name in COMMANDS if _which(name) is None]


def cephfs_problem() -> str | None:
    """Why a private CephFS cannot be started and mounted here, in one sentence; None if it can."""
    missing = missing_commands()
    if missing:
        packages = sorted({COMMANDS[name] for name in missing})
        return (
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing, so the lab "
            f"cannot start a CephFS of its own: install {' '.join(PACKAGES)} "
            f"(`apt-get install --no-install-recommends {' '.join(packages)}`, as root); the "
            "lessons show the recorded run meanwhile"
        )
    from iolab.measure.tools import fuse_problem  # here: `make clean` may run without pandas

    fuse = fuse_problem()
    if fuse:
        return f"{fuse}; the CephFS servers could start, but its client (ceph-fuse) cannot mount"
    return None


def _which(name: str) -> str | None:
    """A command on PATH (Debian puts all of Ceph's in /usr/bin)."""
    return shutil.which(name)


# --------------------------------------------------------------------------- up


def up(
    osds: int = DEFAULT_OSDS,
    *,
    compute_node: bool | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> Cluster:
    """Start a private CephFS and mount it; refuse on a login node unless told otherwise.

    On any failure or interrupt, everything started so far is stopped and removed again.
    """
    problem = cephfs_problem()
    if problem:
        raise LabError(problem)
    existing = current()
    if existing is not None:
        raise LabError(
            f"a CephFS of yours is already up, mounted at {existing.mount_point}; "
            "use it, or end it with `python -m iolab pfs down`"
        )
    check_budget(  # the OSDs' files are sparse: they take what the quota and journal allow
        "a private CephFS",
        compute_node=compute_node,
        data_mib=QUOTA_MIB + MDS_JOURNAL_MIB,
        processes=len(DAEMONS) + osds + 1,
    )
    folder = _fresh_folder()
    started = time.monotonic()
    cluster = Cluster(
        folder,
        socket_dir("pfs-run", "client.admin.asok"),
        Path(),
        _free_port(),
        osds,
        str(uuid.uuid4()),
        {},
    )
    try:
        _bootstrap(cluster, progress)
        cluster.started_s = time.monotonic() - started
        _save(cluster)
        return cluster
    except BaseException:
        with interrupts_held():
            _teardown(cluster)
        raise


def _fresh_folder() -> Path:
    """<workspace>/pfs/cluster, made anew and private (0700)."""
    folder = ensure_writable_dir(WorkspaceEntry.PFS.path()) / "cluster"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        raise LabError(
            f"{folder} holds files of an earlier CephFS that was not ended cleanly; "
            "remove them with `python -m iolab pfs down`"
        ) from None
    return folder


def _bootstrap(cluster: Cluster, progress: Callable[[str], None]) -> None:
    _write_conf(cluster)
    _write_keys(cluster)
    progress("monitor")
    run_tool(
        [
            "monmaptool",
            "--create",
            "--clobber",
            "--fsid",
            cluster.fsid,
            "--addv",
            "a",
            f"[v2:{LOOPBACK}:{cluster.mon_port}]",
            str(cluster.folder / "monmap"),
        ]
    )
    run_tool(
        [
            "ceph-mon",
            "-c",
            str(cluster.conf),
            "--mkfs",
            "-i",
            "a",
            "--monmap",
            str(cluster.folder / "monmap"),
            "--keyring",
            str(cluster.folder / "mon.keyring"),
        ]
    )
    _start(cluster, "mon.a", ["ceph-mon", "-i", "a"])
    _wait(lambda: ceph_json(cluster, "mon", "stat") is not None, "the monitor to answer")
    progress("manager")
    _daemon_key(cluster, "mgr.x", ["mon", "allow profile mgr", "osd", "allow *", "mds", "allow *"])
    _start(cluster, "mgr.x", ["ceph-mgr", "-i", "x"])
    for osd in range(cluster.osds):
        progress(f"OSD {osd + 1} of {cluster.osds}")
        _add_osd(cluster, osd)
    _wait(lambda: _osds_up(cluster) == cluster.osds, f"{cluster.osds} OSDs to be up")
    progress("metadata server and file system")
    for pool, pgs in ((DATA_POOL, 32), (METADATA_POOL, 16)):
        ceph_cli(cluster, "osd", "pool", "create", pool, str(pgs))
        ceph_cli(cluster, "osd", "pool", "set", pool, "size", "1", "--yes-i-really-mean-it")
    ceph_cli(cluster, "fs", "new", FS_NAME, METADATA_POOL, DATA_POOL)
    _daemon_key(
        cluster,
        "mds.a",
        [
            "mon",
            "allow profile mds",
            "osd",
            "allow rwx",
            "mds",
            "allow",
            "mgr",
            "allow profile mds",
        ],
    )
    _start(cluster, "mds.a", ["ceph-mds", "-i", "a"])
    _wait(lambda: _mds_active(cluster), "the metadata server to become active")
    progress("mount (ceph-fuse)")
    _mount(cluster)
    os.setxattr(cluster.mount_point, QUOTA_XATTR, str(QUOTA_MIB * 2**20).encode())


def _write_conf(cluster: Cluster) -> None:
    d, run = cluster.folder, cluster.run_dir
    for name in ("log", "mon", "mgr", "mds", "osd"):
        (d / name).mkdir(mode=0o700)
    conf = f"""[global]
fsid = {cluster.fsid}
mon host = v2:{LOOPBACK}:{cluster.mon_port}
public addr = {LOOPBACK}
ms bind msgr1 = false
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = {d}/$name.keyring
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon allow pool delete = true
osd crush chooseleaf type = 0
run dir = {run}
admin socket = {run}/$name.asok
pid file = {run}/$name.pid
log file = {d}/log/$name.log
mon data = {d}/mon/$id
mgr data = {d}/mgr/$id
mds data = {d}/mds/$id
osd data = {d}/osd/$id
osd objectstore = bluestore
bluestore block create = true
bluestore block size = {OSD_FILE_MIB * 2**20}
osd memory target = {OSD_MEMORY_TARGET}
mon osd full ratio = 0.97
mon osd nearfull ratio = 0.9
mgr initial modules =
auth allow insecure global id reclaim = false
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
mds log max segments = {MDS_LOG_SEGMENTS}
"""
    _write_private(cluster.conf, conf)


def _write_keys(cluster: Cluster) -> None:
    """The monitor's key and the admin's, each in a file of mode 0600."""
    mon, admin = cluster.folder / "mon.keyring", cluster.folder / "client.admin.keyring"
    run_tool(
        [
            "ceph-authtool",
            "--create-keyring",
            str(mon),
            "--gen-key",
            "-n",
            "mon.",
            "--cap",
            "mon",
            "allow *",
        ]
    )
    run_tool(
        [
            "ceph-authtool",
            "--create-keyring",
            str(admin),
            "--gen-key",
            "-n",
            "client.admin",
            "--cap",
            "mon",
            "allow *",
            "--cap",
            "osd",
            "allow *",
            "--cap",
            "mds",
            "allow *",
            "--cap",
            "mgr",
            "allow *",
        ]
    )
    run_tool(["ceph-authtool", str(mon), "--import-keyring", str(admin)])
    for keyring in (mon, admin):
        os.chmod(keyring, 0o600)


def _daemon_key(cluster: Cluster, name: str, caps: list[str]) -> None:
    keyring = cluster.folder / f"{name}.keyring"
    ceph_cli(cluster, "auth", "get-or-create", name, *caps, "-o", str(keyring))
    os.chmod(keyring, 0o600)


def _add_osd(cluster: Cluster, osd: int) -> None:
    osd_uuid = str(uuid.uuid4())
    number = ceph_cli(cluster, "osd", "new", osd_uuid).strip()
    if number != str(osd):
        raise LabError(
            f"the monitor numbered the new OSD {number!r}, not {osd}; end the cluster "
            "with `python -m iolab pfs down` and start it again"
        )
    (cluster.folder / "osd" / str(osd)).mkdir(mode=0o700)
    _daemon_key(
        cluster,
        f"osd.{osd}",
        ["mon", "allow profile osd", "mgr", "allow profile osd", "osd", "allow *"],
    )
    run_tool(
        ["ceph-osd", "-c", str(cluster.conf), "-i", str(osd), "--mkfs", "--osd-uuid", osd_uuid]
    )
    _start(cluster, f"osd.{osd}", ["ceph-osd", "-i", str(osd)])


def _mount(cluster: Cluster) -> None:
    mounts = ensure_writable_dir(WorkspaceEntry.MNT.path())
    cluster.mount_point = Path(tempfile.mkdtemp(prefix="cephfs-", dir=mounts))
    _start(
        cluster,
        "client.admin",
        ["ceph-fuse", "-n", "client.admin", "--client_fs", FS_NAME, str(cluster.mount_point)],
    )
    _wait(lambda: listed_as_mounted(cluster.mount_point), "the ceph-fuse mount to appear")


#: The second client's name: its own id, key and capabilities (ceph-fuse refuses a second
#: mount under an id already mounted).
SECOND_CLIENT = "client.second"


@contextlib.contextmanager
def second_client(cluster: Cluster) -> Iterator[Path]:
    """A second ceph-fuse client of the same file system at a mount point of its own, as a
    second node of a job would be: the MDS hands each client capabilities of its own. It is
    unmounted and ended on leaving, and `down` ends it too if the lab is cut off."""
    mounts = ensure_writable_dir(WorkspaceEntry.MNT.path())
    mount_point = Path(tempfile.mkdtemp(prefix="cephfs-second-", dir=mounts))
    try:
        with client(cluster, SECOND_CLIENT, mount_point):
            yield mount_point
    finally:
        with contextlib.suppress(OSError):
            mount_point.rmdir()


@contextlib.contextmanager
def client(
    cluster: Cluster,
    name: str,
    mount_point: Path,
    namespace_of: int | None = None,
    page_cache: bool = True,
) -> Iterator[None]:
    """One more ceph-fuse client, `name` (e.g. "client.n1", with a key of its own), mounted at
    the empty folder `mount_point`; with `namespace_of` (a pid, e.g. a test node's slurmd)
    it is mounted in that process's mount namespace (nsenter, as root), seen only by what
    runs there, as each node of a cluster mounts the file system as a client of its own.
    Unmounted and ended on leaving; `down` ends it too if the lab is cut off. With
    `page_cache` False the kernel keeps no pages of its files (`fuse_disable_pagecache`):
    every read goes to ceph-fuse, as lesson 08's data-sieving comparison needs."""
    if not (cluster.folder / f"{name}.keyring").exists():
        _daemon_key(cluster, name, ["mon", "allow r", "mds", "allow rw", "osd", "allow rw"])
    enter = () if namespace_of is None else ("nsenter", "--target", str(namespace_of), "--mount")
    table = "self" if namespace_of is None else str(namespace_of)

    def mounted() -> bool:
        return listed_as_mounted(mount_point, mounts_of=table)

    fuse = _which("ceph-fuse") or "ceph-fuse"
    try:
        options = () if page_cache else ("--fuse_disable_pagecache=true",)
        _start(
            cluster,
            name,
            [*enter, fuse, "-n", name, "--client_fs", FS_NAME, *options, str(mount_point)],
        )
        _wait(mounted, f"the ceph-fuse mount of {name} to appear", COMMAND_TIMEOUT_S)
        yield
    finally:
        if mounted():
            _unmount(mount_point, enter, mounted)
        _end(cluster.pids.pop(name, 0), cluster)
        _save(cluster)


def remount(cluster: Cluster) -> None:
    """Unmount and mount the client again: a fresh client has no cached names, attributes,
    capabilities or data, like a job's first read on a node that never saw the files."""
    if listed_as_mounted(cluster.mount_point):
        _unmount(cluster.mount_point)
    _end(cluster.pids.pop("client.admin", 0), cluster)
    _start(
        cluster,
        "client.admin",
        ["ceph-fuse", "-n", "client.admin", "--client_fs", FS_NAME, str(cluster.mount_point)],
    )
    _wait(
        lambda: listed_as_mounted(cluster.mount_point),
        "the ceph-fuse mount to appear",
        COMMAND_TIMEOUT_S,
    )
    _save(cluster)


def _start(cluster: Cluster, name: str, cmd: list[str]) -> None:
    """Start one daemon in the foreground of a process of its own (so its pid is known at
    once and it is not any shell's child), and record the pid before anything else."""
    binary = _which(cmd[0]) or cmd[0]
    log = open(cluster.folder / "log" / f"{name}.out", "ab")
    with log:
        proc = subprocess.Popen(
            [binary, *cmd[1:], "-c", str(cluster.conf), "-f"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    cluster.pids[name] = proc.pid
    _save(cluster)
    time.sleep(0.1)
    if proc.poll() is not None:
        raise LabError(
            f"{name} ({cmd[0]}) stopped at once (exit {proc.returncode}): "
            f"{_tail(cluster.folder / 'log' / f'{name}.out')}"
        )


# --------------------------------------------------------------------------- status and counters


def state_file() -> Path:
    return WorkspaceEntry.PFS.path() / "cluster" / STATE


def current() -> Cluster | None:
    """The cluster recorded in the workspace, None if there is none."""
    path = state_file()
    try:
        text = path.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return Cluster.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError):
        raise LabError(
            f"{path} is damaged; end what is left with `python -m iolab pfs down`"
        ) from None


def status(cluster: Cluster) -> dict:
    """What a learner (or a test) needs to know: daemons alive, OSDs up, MDS active, the
    mount, and the resident memory of everything started."""
    alive = {name: _ours(pid, cluster) for name, pid in cluster.pids.items()}
    health = ceph_json(cluster, "status")
    return {
        "mount_point": str(cluster.mount_point),
        "mounted": listed_as_mounted(cluster.mount_point),
        "daemons_alive": alive,
        "osds_up": _osds_up(cluster) if health is not None else 0,
        "osds": cluster.osds,
        "mds_active": _mds_active(cluster) if health is not None else False,
        "health": (health or {}).get("health", {}).get("status", "no answer from the monitor"),
        "resident_mib": round(sum(_rss_kib(pid) for pid in cluster.pids.values()) / 1024, 1),
        "quota_mib": QUOTA_MIB,
        "osd_files_on_disk_mib": round(osd_files_on_disk(cluster) / 2**20, 1),
        "started_s": round(cluster.started_s, 1),
        "mon_port": cluster.mon_port,
        "ceph_version": _ceph_version(),
    }


def osd_files_on_disk(cluster: Cluster) -> int:
    """Bytes the OSDs' files take on the disk (their blocks: the files are sparse)."""
    total = 0
    for osd in range(cluster.osds):
        with contextlib.suppress(FileNotFoundError):
            total += (cluster.folder / "osd" / str(osd) / "block").stat().st_blocks * 512
    return total


def set_client_option(cluster: Cluster, option: str, value: str) -> None:
    """Change an option of the running ceph-fuse client through its admin socket, as a
    learner would try one; `remount` starts a client with the configured value again."""
    run_tool(
        ["ceph", "--admin-daemon", str(cluster.socket("client.admin")), "config", "set"]
        + [option, value]
    )


def perf_dump(cluster: Cluster, daemon: str) -> dict:
    """A daemon's own counters (`perf dump` on its admin socket): the servers' view."""
    out = run_tool(["ceph", "--admin-daemon", str(cluster.socket(daemon)), "perf", "dump"])
    return json.loads(out)


def osd_counters(cluster: Cluster) -> list[dict]:
    """Per OSD: read and write operations and bytes, as the OSD counted them."""
    rows = []
    for osd in range(cluster.osds):
        counters = perf_dump(cluster, f"osd.{osd}")["osd"]
        rows.append(
            {
                "osd": osd,
                "reads": counters["op_r"],
                "writes": counters["op_w"],
                "read_bytes": counters["op_r_out_bytes"],
                "write_bytes": counters["op_w_in_bytes"],
            }
        )
    return rows


@dataclass(frozen=True)
class MdsRequests:
    """The MDS's own account of the client requests it answered, at one moment.

    Per request type (create, getattr, lookup, open, readdir, unlink, ...) the requests
    answered and the seconds they took together, each from its arrival at the MDS to the
    MDS's reply (`mds_server.req_<type>_latency` in `perf dump`: avgcount and sum); `total`
    is every client request the MDS handled (`handle_client_request`). The counters only
    grow, so two readings enclose what happened between them (`since`).
    """

    requests: dict[str, int]
    seconds: dict[str, float]
    total: int

    @classmethod
    def from_perf_dump(cls, dump: dict) -> MdsRequests:
        """Read from an MDS's `perf dump` (Ceph 16's layout, see tests/fixtures/ceph)."""
        try:
            server = dump["mds_server"]
            pairs = {
                key[len("req_") : -len("_latency")]: value
                for key, value in server.items()
                if key.startswith("req_") and key.endswith("_latency")
            }
            return cls(
                {kind: int(value["avgcount"]) for kind, value in pairs.items()},
                {kind: float(value["sum"]) for kind, value in pairs.items()},
                int(server["handle_client_request"]),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise LabError(
                f"the metadata server's `perf dump` lacks its request counters ({err}); "
                "this lab reads the layout of Ceph 16 (Pacific)"
            ) from None

    def since(self, earlier: MdsRequests) -> list[dict]:
        """The request types the MDS answered between `earlier` and this reading, most first:
        how many, and their mean latency in ms (the seconds added over the requests added)."""
        rows = []
        for kind, count in self.requests.items():
            added = count - earlier.requests.get(kind, 0)
            if added > 0:
                seconds = self.seconds[kind] - earlier.seconds.get(kind, 0.0)
                rows.append(
                    {
                        "request_type": kind,
                        "mds_requests": added,
                        "mds_mean_latency_ms": 1000 * seconds / added,
                    }
                )
        return sorted(rows, key=lambda row: (-row["mds_requests"], row["request_type"]))


def mds_request_counters(cluster: Cluster) -> MdsRequests:
    """The MDS's request counters now, with the seconds they took (see MdsRequests)."""
    return MdsRequests.from_perf_dump(perf_dump(cluster, "mds.a"))


@dataclass(frozen=True)
class ServerCounts:
    """Every OSD's and the MDS's counters at one moment. They only grow, so two readings
    taken around a run enclose what the servers did for it: the one way the lab reads them."""

    osds: tuple[dict, ...]
    mds: MdsRequests

    @classmethod
    def now(cls, cluster: Cluster) -> ServerCounts:
        return cls(tuple(osd_counters(cluster)), mds_request_counters(cluster))

    def osd_added(self, earlier: ServerCounts, key: str) -> int:
        """What all OSDs added to one counter of osd_counters (reads, writes, read_bytes,
        write_bytes) since `earlier`."""
        return sum(now[key] - then[key] for now, then in zip(self.osds, earlier.osds, strict=True))

    def mds_added(self, earlier: ServerCounts, kind: str | None = None) -> int:
        """The MDS's requests of one type (open, lookup, setfilelock, ...) since `earlier`;
        without a type, all its client requests."""
        if kind is None:
            return self.mds.total - earlier.mds.total
        return self.mds.requests.get(kind, 0) - earlier.mds.requests.get(kind, 0)


def _osds_up(cluster: Cluster) -> int:
    stat = ceph_json(cluster, "osd", "stat")
    return int((stat or {}).get("num_up_osds", 0))


def _mds_active(cluster: Cluster) -> bool:
    dump = ceph_json(cluster, "fs", "status", FS_NAME)
    return any(row.get("state") == "active" for row in (dump or {}).get("mdsmap", []))


def _ceph_version() -> str | None:
    with contextlib.suppress(LabError):
        return run_tool(["ceph", "--version"]).split(" (")[0].replace("ceph version ", "")
    return None


def _rss_kib(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# --------------------------------------------------------------------------- down


def down() -> bool:
    """Unmount, end every process the cluster started and remove its files; False if there
    was no cluster. Safe to run after a fault (a daemon already dead, a damaged record)."""
    try:
        cluster = current()
    except LabError:
        cluster = None
    folder = WorkspaceEntry.PFS.path()
    if cluster is None and not folder.exists():
        return False
    with interrupts_held():
        if cluster is not None:
            _teardown(cluster)
        else:
            remove_tree(folder)
    return True


def _teardown(cluster: Cluster) -> None:
    """Every undo step, each tolerant of what is already gone; the files last.

    The clients end first: with the MDS stopped, a request in flight holds its process in
    the kernel, unkillable, and an unmount tool that looks at the mount point would wait
    with it, for ever. Once its client has ended, the mount answers every request at once
    (not connected), and comes off."""
    for name in [name for name in cluster.pids if name.startswith("client.")]:
        _end(cluster.pids[name], cluster)
    if cluster.mount_point != Path() and listed_as_mounted(cluster.mount_point):
        _unmount(cluster.mount_point)
    if SECOND_CLIENT in cluster.pids:  # cut off inside second_client: its mount is left too
        for second in WorkspaceEntry.MNT.path().glob("cephfs-second-*"):
            if listed_as_mounted(second):
                _unmount(second)
            with contextlib.suppress(OSError):
                second.rmdir()
    for name in sorted(cluster.pids, key=lambda n: (n != "client.admin", n.startswith("mon"))):
        _end(cluster.pids[name], cluster)
    if cluster.mount_point != Path():
        with contextlib.suppress(OSError):
            cluster.mount_point.rmdir()
    discard_owned(cluster.run_dir)  # socket_dir may have put it outside the workspace
    remove_tree(WorkspaceEntry.PFS.path())


def _unmount(
    mount_point: Path, enter: tuple[str, ...] = (), mounted: Callable[[], bool] | None = None
) -> None:
    """Unmount (run after `enter`, in the mount namespace the client lives in), lazily at
    last: a client that hangs on a dead server is ended next anyway."""
    still_mounted = mounted or (lambda: listed_as_mounted(mount_point))
    for cmd in (
        ["fusermount3", "-u", str(mount_point)],
        ["fusermount", "-u", str(mount_point)],
        ["umount", str(mount_point)],
    ):
        binary = _which(cmd[0])
        if binary is None:
            continue
        subprocess.run([*enter, binary, *cmd[1:]], capture_output=True, timeout=COMMAND_TIMEOUT_S)
        if not still_mounted():
            return
    binary = _which("fusermount3") or _which("umount")
    if binary is not None:
        flag = "-uz" if binary.endswith("fusermount3") else "-l"
        subprocess.run(
            [*enter, binary, flag, str(mount_point)],
            capture_output=True,
            timeout=COMMAND_TIMEOUT_S,
        )


def _ours(pid: int, cluster: Cluster) -> bool:
    """Whether `pid` is still a process of this user whose command line names our
    configuration: a recycled pid is someone else's process and is never signalled."""
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.getuid():
            return False
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(cluster.conf).encode() in cmdline


def _end(pid: int, cluster: Cluster) -> None:
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if not _ours(pid, cluster):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
            os.kill(pid, signal.SIGCONT)  # a stopped daemon acts on SIGTERM only once it runs
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _ours(pid, cluster):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap it when it is our child (up's failure)
            time.sleep(0.05)


# --------------------------------------------------------------------------- plumbing


def _save(cluster: Cluster) -> None:
    with atomic_output(cluster.folder / STATE) as partial:
        partial.write_text(json.dumps(cluster.to_json(), indent=1) + "\n")


def ceph_cli(cluster: Cluster, *args: str) -> str:
    return run_tool(
        [
            "ceph",
            "-c",
            str(cluster.conf),
            "-n",
            "client.admin",
            f"--connect-timeout={COMMAND_TIMEOUT_S}",
            *args,
        ]
    )


def ceph_json(cluster: Cluster, *args: str) -> dict | None:
    """A ceph command's JSON answer, None when the cluster does not answer."""
    try:
        return json.loads(ceph_cli(cluster, *args, "--format", "json"))
    except (LabError, ValueError):
        return None


def run_tool(cmd: list[str]) -> str:
    binary = _which(cmd[0]) or cmd[0]
    try:
        done = subprocess.run(
            [binary, *cmd[1:]],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S + 5,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise LabError(
            f"`{' '.join(cmd[:4])} ...` got no answer within {COMMAND_TIMEOUT_S} s: a "
            "daemon of the CephFS is stopped or hung; `python -m iolab pfs status` "
            "shows which, `python -m iolab pfs down` ends it all"
        ) from None
    except FileNotFoundError:
        raise LabError(cephfs_problem() or f"{cmd[0]} was not found") from None
    if done.returncode != 0:
        last = (
            done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no message"]
        )[-1]
        raise LabError(f"`{' '.join(cmd[:4])} ...` failed (exit {done.returncode}: {last})")
    return done.stdout


def _wait(condition: Callable[[], bool], what: str, timeout: float = UP_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise LabError(
                f"waited {timeout:.0f} s for {what}, in vain: a daemon of the CephFS "
                "is stopped or hung (`python -m iolab pfs status` shows which; its log "
                "is in the cluster folder's log/), `python -m iolab pfs down` ends it"
            )
        time.sleep(POLL_S)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _tail(path: Path, lines: int = 3) -> str:
    with contextlib.suppress(OSError):
        text = path.read_text(errors="replace").strip().splitlines()[-lines:]
        return " / ".join(line.strip() for line in text) or "it printed nothing"
    return "its log could not be read"


@contextlib.contextmanager
def running(osds: int = DEFAULT_OSDS, *, compute_node: bool | None = None) -> Iterator[Cluster]:
    """A cluster for the length of a block (tests, a notebook cell): up, then down."""
    # an interrupt handled in contextlib's own steps skips this generator's finally
    token = undo_if_cut_off(down)
    try:
        yield up(osds, compute_node=compute_node)
    finally:
        down()
        forget_undo(token)
