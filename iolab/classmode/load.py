"""What a class of N learners asks of a cluster when each runs the lab alone: files, bytes
and processes, scaled from one recorded `make lab` (workshop/lab-budget-recorded.json).

The figures are the recorded run's, named as such in the letter: a learner's own run on the
cluster will differ in time, not in files and bytes (the dataset and the environment are
the same everywhere, give or take the file system's block size).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from iolab.classmode import MAX_LEARNERS
from iolab.core.budget import LIMITS
from iolab.core.errors import LabError
from iolab.core.workspace import repo_root
from iolab.measure.lab_budget import RECORDED

#: Lesson 08's job scripts at their defaults, as the lesson submits them (demos/slurm/; a
#: test reads each value from its script): the nodes per learner, and the metadata storm.
JOB_NODES = 2  # `sbatch --nodes=2 ...`
STORM_TASKS_PER_NODE = 2  # metadata-storm.sbatch: #SBATCH --ntasks-per-node
STORM_FILES_PER_TASK = 1000  # metadata-storm.sbatch: IOLAB_STORM_FILES
STORM_MAX_TOTAL = 200_000  # metadata-storm.sbatch: IOLAB_STORM_MAX_TOTAL, per job


@dataclass(frozen=True)
class Load:
    """One learner's footprint and the class's, as the recorded run measured it."""

    learners: int
    environment_files: int  # .venv
    environment_bytes: int
    checkout_files: int
    checkout_bytes: int
    workspace_peak_files: int  # the dataset, results and scratch at their largest
    workspace_peak_bytes: int
    dataset_files: int  # the workspace once the dataset is made (what is written at once)
    processes: int  # the login-node budget per learner (iolab.core.budget)
    recorded_on: str
    machine: str

    @property
    def files_each(self) -> int:
        return self.environment_files + self.checkout_files + self.workspace_peak_files

    @property
    def bytes_each(self) -> int:
        return self.environment_bytes + self.checkout_bytes + self.workspace_peak_bytes

    @property
    def files_all(self) -> int:
        return self.learners * self.files_each

    @property
    def bytes_all(self) -> int:
        return self.learners * self.bytes_each

    @property
    def processes_all(self) -> int:
        return self.learners * self.processes

    @property
    def storm_files_each(self) -> int:
        """Files one learner's metadata-storm job creates, stats and removes on scratch."""
        return JOB_NODES * STORM_TASKS_PER_NODE * STORM_FILES_PER_TASK

    @property
    def storm_files_all(self) -> int:
        return self.learners * self.storm_files_each


def class_load(learners: int, budget: dict | None = None) -> Load:
    """The load of `learners` learners each running the lab alone (one sentence if the number
    is not a class size)."""
    if not 1 <= learners <= MAX_LEARNERS:
        raise LabError(f"--learners {learners} is not a class size: give 1 to {MAX_LEARNERS}")
    if budget is None:
        budget = json.loads((repo_root() / RECORDED).read_text())
    phases = {phase["name"]: phase for phase in budget["phases"]}
    peak = {
        key: max(phase["peak"]["workspace"][key] for phase in budget["phases"])
        for key in ("files", "bytes")
    }
    return Load(
        learners=learners,
        environment_files=budget["environment"]["files"],
        environment_bytes=budget["environment"]["bytes"],
        checkout_files=budget["checkout"]["files"],
        checkout_bytes=budget["checkout"]["bytes"],
        workspace_peak_files=peak["files"],
        workspace_peak_bytes=peak["bytes"],
        dataset_files=phases["dataset"]["end"]["workspace"]["files"],
        processes=LIMITS["processes"].most,
        recorded_on=budget["date"],
        machine=budget["machine"],
    )
