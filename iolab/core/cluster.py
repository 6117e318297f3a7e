"""What a cluster's environment says: storage-area variables and whether a batch job runs here.

One owner for these names: the locations the lab compares, the directories `clean` looks in,
and the login-node budget all read them from here.
"""

from __future__ import annotations

import os

#: Environment variables through which clusters name their storage areas, in listing order:
#: SCRATCH, WRKDIR and WORK (parallel file-system scratch and work areas; WRKDIR on Aalto's
#: Triton), LOCAL_SCRATCH, LOCAL_SCRATCH_DIR, LOCALSCRATCH and SNIC_TMP (node-local disks;
#: SNIC_TMP at the Swedish NAISS centres), PFSDIR (a per-job directory on the parallel file
#: system at OSC) and PROJECT (shared project space).
STORAGE_VARIABLES = (
    "SCRATCH",
    "WRKDIR",
    "WORK",
    "LOCAL_SCRATCH",
    "LOCAL_SCRATCH_DIR",
    "LOCALSCRATCH",
    "SNIC_TMP",
    "PFSDIR",
    "PROJECT",
)
#: Variables a batch system sets inside a job on a compute node (Slurm sets SLURM_JOB_ID on
#: login nodes too when a user runs salloc, so the node name is what counts).
JOB_VARIABLES = ("SLURMD_NODENAME", "PBS_JOBID")


def on_compute_node() -> bool:
    """Whether a batch system shows that this process runs inside a job on a compute node."""
    return any(os.environ.get(name) for name in JOB_VARIABLES)
