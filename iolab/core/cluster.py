"""What a cluster's environment says about where this process runs: inside a batch job or not.

One owner for these names: the login-node budget and fio read them from here. The storage
areas a cluster announces are in iolab.core.storage_areas.
"""

from __future__ import annotations

import os

#: Variables a batch system sets inside a job on a compute node (Slurm sets SLURM_JOB_ID on
#: login nodes too when a user runs salloc, so the node name is what counts).
JOB_VARIABLES = ("SLURMD_NODENAME", "PBS_JOBID")


def on_compute_node() -> bool:
    """Whether a batch system shows that this process runs inside a job on a compute node."""
    return any(os.environ.get(name) for name in JOB_VARIABLES)
