"""The storage areas a machine or a cluster offers for files: one table, read by every list.

Discovery (iolab.storage.locations) lists the areas in this table's order, the advice
(iolab.storage.advise) calls the temporary ones temporary, the class preflight
(iolab.classmode.preflight) puts workspaces in the ranked ones, a class
(iolab.core.class_folder) finds its ranked area again, and `clean` (iolab.core.cleanup) looks
in every one. An area added here is therefore listed, judged and cleaned everywhere at once;
tests/test_storage_areas.py fails when a list is written out by hand instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StorageArea:
    """One storage area and the facts about it that the lab acts on.

    `variable` is the environment variable that names the area's directory; `default` is
    where the area is when that variable is unset or empty ("~": the home the password
    database gives), None for an area that exists only where a cluster announces it.
    `temporary`: its data goes when the job ends or the node reboots, so nothing that must
    last is put there. `shared`: every node sees the same files, as a class's workspaces
    need. `workspace_rank` orders the places a class's workspaces may go, lowest first; None
    where they must not go.
    """

    name: str
    variable: str | None
    default: str | None
    temporary: bool
    shared: bool
    workspace_rank: int | None = None

    def directory(self) -> Path | None:
        """Where the area is on this machine now; None where no one announces it."""
        value = os.environ.get(self.variable) if self.variable else None
        if value:
            return Path(value).expanduser()
        return Path(self.default).expanduser() if self.default else None


#: Every storage area once, in listing order: the places every machine has, then the ones
#: clusters announce in environment variables, each named after its variable, lowercased.
#: Workspaces go to scratch-like places first (made for data, larger quotas), home last
#: (small, backed up).
STORAGE_AREAS = (
    StorageArea("home", "HOME", "~", temporary=False, shared=True, workspace_rank=5),
    # Slurm sites point TMPDIR at node-local disk for each job.
    StorageArea("tmp", "TMPDIR", "/tmp", temporary=True, shared=False),
    # A tmpfs in RAM, emptied at reboot.
    StorageArea("shm", None, "/dev/shm", temporary=True, shared=False),
    # The parallel file system's scratch and work areas (WRKDIR on Aalto's Triton).
    StorageArea("scratch", "SCRATCH", None, temporary=False, shared=True, workspace_rank=1),
    StorageArea("wrkdir", "WRKDIR", None, temporary=False, shared=True, workspace_rank=2),
    StorageArea("work", "WORK", None, temporary=False, shared=True, workspace_rank=3),
    # Node-local disks (SNIC_TMP at the Swedish NAISS centres).
    StorageArea("local_scratch", "LOCAL_SCRATCH", None, temporary=True, shared=False),
    StorageArea("local_scratch_dir", "LOCAL_SCRATCH_DIR", None, temporary=True, shared=False),
    StorageArea("localscratch", "LOCALSCRATCH", None, temporary=True, shared=False),
    StorageArea("snic_tmp", "SNIC_TMP", None, temporary=True, shared=False),
    # A per-job directory on the parallel file system at OSC, removed when the job ends.
    StorageArea("pfsdir", "PFSDIR", None, temporary=True, shared=True),
    # Shared project space.
    StorageArea("project", "PROJECT", None, temporary=False, shared=True, workspace_rank=4),
)


def storage_area(name: str) -> StorageArea | None:
    """The area called `name`, or None when no area has that name."""
    return next((area for area in STORAGE_AREAS if area.name == name), None)
