"""What machine and which file system a measurement ran on.

A timing means little without its surroundings: the same reader is fast on a laptop's page
cache and slow on a metadata-bound Lustre or NFS mount. So every measurement carries the
kernel, the CPUs it could use, the memory, the tool and library versions, and for the
directory it read, the file-system type, mount point, mount options and the room left.

Committed notebooks are published, so nothing here records the host name or the user name:
paths under the home directory are shown as ``~``, a path component equal to the user name
as ``$USER``, and mount options that carry addresses or account names are dropped.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from iolab import __version__ as iolab_version
from iolab.core.errors import LabError
from iolab.core.workspace import public_text

if TYPE_CHECKING:  # pandas only for the table: `class preflight` runs without it
    import pandas as pd


#: File systems whose data lives on another machine: every metadata operation (open, stat,
#: readdir) can be a network round trip, which is what makes many small files slow on them.
NETWORK_FS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "beegfs", "ceph", "fuse.ceph", "fuse.sshfs"}
)
#: File systems a virtual machine or container shares with its host (WSL2, Docker Desktop,
#: VM shared folders). Not a network, but each call crosses the hypervisor boundary, so they
#: behave between a local disk and NFS; we call them "host-shared".
HOST_SHARED_FS = frozenset({"9p", "virtiofs"})
#: File systems kept in RAM: there is no device behind them, only the page cache.
MEMORY_FS = frozenset({"tmpfs", "ramfs"})

#: Mount options whose values name a server address or an account; dropped before recording.
PRIVATE_MOUNT_OPTIONS = frozenset({"addr", "clientaddr", "mountaddr", "username", "user", "domain"})

#: Most tools print their version with --version; these use another flag.
VERSION_FLAGS = {"strace": "-V", "sshd": "-V", "/usr/sbin/sshd": "-V"}
VERSION_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class MountInfo:
    """The mount a path lives on: where it is mounted, its type, its source and options."""

    mount_point: str
    fs_type: str
    source: str
    options: str


UNKNOWN_MOUNT = MountInfo(mount_point="unknown", fs_type="unknown", source="", options="")


def _unescape(field: str) -> str:
    r"""Undo the kernel's octal escapes in mount tables (\040 space, \011 tab, \134 backslash)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _merge_options(*option_lists: str) -> str:
    """Join comma-separated option lists, keeping the first occurrence of each option."""
    merged: dict[str, None] = {}
    for options in option_lists:
        merged.update(dict.fromkeys(o for o in options.split(",") if o))
    return ",".join(merged)


def parse_mountinfo(text: str) -> list[MountInfo]:
    """Parse /proc/self/mountinfo; options are the per-mount then the superblock options.

    Each line is ``ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - TYPE SOURCE
    SUPER_OPTIONS``; the number of optional fields varies, hence the split on " - ".
    """
    mounts = []
    for line in text.splitlines():
        before, separator, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not separator or len(fields) < 6 or len(tail) < 2:
            continue
        super_options = tail[2] if len(tail) > 2 else ""
        mounts.append(
            MountInfo(
                mount_point=_unescape(fields[4]),
                fs_type=_unescape(tail[0]),
                source=_unescape(tail[1]),
                options=_merge_options(fields[5], super_options),
            )
        )
    return mounts


def parse_proc_mounts(text: str) -> list[MountInfo]:
    """Parse /proc/mounts (``SOURCE MOUNT_POINT TYPE OPTIONS DUMP PASS``), the older table."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            source, mount_point, fs_type, options = (_unescape(f) for f in fields[:4])
            mounts.append(MountInfo(mount_point, fs_type, source, options))
    return mounts


def _system_mounts(process: str = "self") -> list[MountInfo]:
    """The mount table of `process` (this one by default, or a pid: its mount namespace's),
    or [] where /proc does not exist (macOS, Windows)."""
    for name, parse in (("mountinfo", parse_mountinfo), ("mounts", parse_proc_mounts)):
        try:
            text = Path("/proc", process, name).read_text(
                encoding="utf-8", errors="surrogateescape"
            )
        except OSError:
            continue
        return parse(text)
    return []


def mount_for(path: Path | str, mounts: list[MountInfo] | None = None) -> MountInfo:
    """The mount holding `path`: the longest mount point that contains its resolved form.

    Symlinks are resolved first, because the file system that serves the bytes is the one
    of the link's target. When a directory is mounted over twice, the later mount (further
    down the table) is the visible one. `mounts` defaults to this process's mount table;
    without one (not Linux) the result says "unknown" rather than guessing.
    """
    target = str(Path(path).resolve())
    best: MountInfo | None = None
    for mount in _system_mounts() if mounts is None else mounts:
        point = mount.mount_point
        inside = point == "/" or target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.mount_point)):
            best = mount
    return best or UNKNOWN_MOUNT


def listed_as_mounted(path: Path | str, mounts_of: str = "self") -> bool:
    """Whether the mount table lists `path` as a mount point. Unlike os.path.ismount, nothing
    is asked of the mount itself: a FUSE client whose server has stopped would never answer
    that stat (a hang, not an error). Only `path`'s parent is resolved. `mounts_of` names
    another process (a pid) whose mount namespace to look in."""
    path = Path(path)
    target = os.path.join(os.path.realpath(path.parent), path.name)
    return any(mount.mount_point == target for mount in _system_mounts(mounts_of))


def is_network_fs(fs_type: str) -> bool:
    """True for file systems served by another machine (see NETWORK_FS for the list)."""
    return fs_type in NETWORK_FS


def fs_kind(fs_type: str) -> str:
    """A one-word class of a file system: network, host-shared, memory, local or unknown."""
    if fs_type in NETWORK_FS:
        return "network"
    if fs_type in HOST_SHARED_FS:
        return "host-shared"
    if fs_type in MEMORY_FS:
        return "memory"
    return "unknown" if fs_type == "unknown" else "local"


def public_mount_options(options: str) -> str:
    """Mount options without those that carry server addresses or account names."""
    kept = (o for o in options.split(",") if o.partition("=")[0] not in PRIVATE_MOUNT_OPTIONS)
    return ",".join(kept)


def tool_version(name: str) -> str | None:
    """The version line a tool prints, None if the tool is not on PATH; never raises.

    The first line naming the tool and holding a digit is taken (sshfs prints fusermount's
    version first), else the first line with a digit (MPICH's mpiexec starts with a "HYDRA
    build details:" heading); a tool that fails its version flag gives "unknown".
    """
    path = shutil.which(name)
    if path is None:
        return None
    try:
        proc = subprocess.run(
            [path, VERSION_FLAGS.get(name, "--version")],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=VERSION_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = [line.strip() for line in (proc.stdout or proc.stderr).splitlines() if line.strip()]
    name = Path(name).name
    if proc.returncode != 0 or not lines:
        return "unknown"
    versioned = [line for line in lines if any(c.isdigit() for c in line)]
    named = [line for line in versioned if name.lower() in line.lower()]
    return (named or versioned or lines)[0]


def _proc_field(path: str, key: str) -> str | None:
    """The value of `key` in a 'key : value' file such as /proc/cpuinfo, or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                name, _, value = line.partition(":")
                if name.strip() == key:
                    return value.strip()
    except OSError:
        pass
    return None


def _memory_gib() -> float | None:
    """Total RAM in GiB from /proc/meminfo (reported there in kB), None where unavailable."""
    total = _proc_field("/proc/meminfo", "MemTotal")
    return round(int(total.split()[0]) / 1024**2, 1) if total else None


def _os_name() -> str:
    """The distribution's name (e.g. 'Debian GNU/Linux 12 (bookworm)'), else the OS name."""
    try:
        return platform.freedesktop_os_release()["PRETTY_NAME"]
    except (OSError, KeyError):
        return f"{platform.system()} {platform.release()}"


def _package_version(name: str) -> str | None:
    """The installed version of a Python distribution, None if it is not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def location_context(location: Path | str) -> dict:
    """The file system of `location`: type, kind, mount point and options, free bytes and inodes.

    Free inodes are None where the file system does not count them (btrfs, many FUSE mounts).
    """
    location = Path(location)
    try:
        st = os.statvfs(location)
    except OSError as err:
        raise LabError(
            f"cannot inspect the location {location} ({err.strerror}); pass a directory that exists"
        ) from None
    mount = mount_for(location)
    return {
        "location_path": public_text(location.resolve()),
        "location_fs_type": mount.fs_type,
        "location_fs_kind": fs_kind(mount.fs_type),
        "location_mount_point": public_text(mount.mount_point),
        "location_mount_options": public_mount_options(mount.options),
        "location_free_bytes": st.f_bavail * st.f_frsize,
        "location_free_inodes": st.f_favail if st.f_files else None,
    }


def machine_context(
    location: Path | str | None = None, tools: tuple[str, ...] = ("strace",)
) -> dict:
    """Everything needed to judge a measurement, as a flat JSON-ready dict.

    cpu_count is what the machine has; cpu_count_usable is what this process may run on
    (its affinity mask, which Slurm and containers narrow). A tool that is not installed
    has the version None.
    """
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    context = {
        "kernel": platform.release(),
        "os": _os_name(),
        "machine": platform.machine(),
        "cpu_model": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "cpu_count_usable": affinity,
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "numpy": _package_version("numpy"),
        "pandas": _package_version("pandas"),
        "iolab": iolab_version,
    }
    context.update({f"{tool}_version": tool_version(tool) for tool in tools})
    if location is not None:
        context.update(location_context(location))
    return context


def machine_tag(
    machine_id: Path = Path("/etc/machine-id"), kernel: str | None = None, host: str | None = None
) -> str:
    """A short, stable tag telling machines apart without naming them: 8 hex digits of a
    hash of /etc/machine-id, the kernel release and the host name. Virtual machines cloned
    from one image share a machine-id (seen: two machines with different kernels got one
    tag), so the id alone does not tell them apart; the id itself, which systemd treats as
    confidential, and the host name are not shown."""
    try:
        ident = machine_id.read_text().strip()
    except OSError:
        ident = ""
    kernel = platform.release() if kernel is None else kernel
    host = socket.gethostname() if host is None else host
    return hashlib.sha256(f"iolab:{ident}:{kernel}:{host}".encode()).hexdigest()[:8]


def machine_label(context: dict) -> str:
    """One line naming the machine a notebook ran on, for the site's "recorded on" column."""
    parts = [
        context.get("cpu_model") or context.get("machine"),
        f"{context.get('cpu_count_usable') or context.get('cpu_count')} CPUs",
        f"{context.get('memory_gib')} GiB",
        context.get("os"),
        f"kernel {context.get('kernel')}",
        f"machine {machine_tag()}",
    ]
    return ", ".join(str(part) for part in parts if part)


def context_frame(context: dict) -> pd.DataFrame:
    """The context as two text columns (item, value) for display; None shows as 'n/a'."""
    import pandas as pd

    return pd.DataFrame(
        {
            "item": list(context),
            "value": ["n/a" if value is None else str(value) for value in context.values()],
        }
    )
