"""`make clean`: remove everything the lab wrote, and nothing else.

The workspace holds only what the lab made (dataset, scratch, results, a per-location
working directory); other locations (/tmp, /dev/shm, $SCRATCH, ...) may hold an
`iolab-<user>` directory, which is removed only when it carries the lab's marker file.
A live mount under the workspace (the sshfs loopback mount) is unmounted first and never
deleted through: a recursive delete into a mount would delete the exported files. The core
uses only the standard library, so `make clean` works without the .venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from iolab.errors import LabError
from iolab.workspace import user_name, workdir

#: What the lab writes inside its workspace; removed recursively once nothing is mounted.
WORKSPACE_ENTRIES = ("dataset", "tmp", "lab", "loc", "images", "slurm-results")
#: Mount points live here; only ever removed with rmdir.
MOUNT_DIR = "mnt"
LOCATION_MARKER = ".iolab-location"
#: Where per-user location directories may have been made (see iolab.locations).
LOCATION_BASES = ("HOME", "TMPDIR", "SCRATCH", "WRKDIR", "WORK", "LOCAL_SCRATCH",
                  "LOCAL_SCRATCH_DIR", "LOCALSCRATCH", "SNIC_TMP", "PFSDIR", "PROJECT")


def mounts_under(root: Path) -> list[Path]:
    """Mount points at or below `root`, from the kernel's mount table."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    points = [Path(line.split()[1].replace("\\040", " ")) for line in lines if line.strip()]
    return [p for p in points if p == root or root in p.parents]


def unmount_all(root: Path) -> None:
    """Unmount the lab's leftover FUSE mounts under root, or refuse with the command to run."""
    for point in mounts_under(root):
        for tool in ("fusermount3", "fusermount"):
            if shutil.which(tool):
                subprocess.run([tool, "-u", str(point)], capture_output=True)
                break
    still = mounts_under(root)
    if still:
        raise LabError(f"{still[0]} is still mounted; unmount it (`fusermount3 -u {still[0]}` "
                       "or `umount`) and run `make clean` again")


def location_dirs() -> list[Path]:
    """Marked per-user directories the lab may have made outside its workspace."""
    bases = [os.environ.get(name) for name in LOCATION_BASES] + ["/tmp", "/dev/shm"]
    found = []
    for base in dict.fromkeys(b for b in bases if b):
        candidate = Path(base) / f"iolab-{user_name()}"
        if (candidate / LOCATION_MARKER).is_file() and not candidate.is_symlink():
            found.append(candidate)
    return found


def clean() -> int:
    """Remove the lab's workspace entries and marked location directories."""
    root = workdir()
    unmount_all(root)
    for target in [root / name for name in WORKSPACE_ENTRIES] + location_dirs():
        if target.exists():
            print(f"removing {target}")
            shutil.rmtree(target)
    mounts = root / MOUNT_DIR
    if mounts.is_dir():
        for point in mounts.iterdir():
            point.rmdir()  # empty once unmounted; anything else is refused by rmdir itself
        mounts.rmdir()
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()
    return 0
