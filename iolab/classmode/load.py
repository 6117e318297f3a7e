"""What a class of N learners asks of a cluster: files, bytes and processes, from three
recordings, each named in the letter with its date and machine.

- Each learner alone (their own checkout, environment and datasets): one recorded `make lab`
  (workshop/lab-budget-recorded.json) times N.
- Class mode, what `iolab class setup` makes: the shared install once, as the recorded class
  setup measured it (workshop/class-bench-recorded.json), and per learner what the recorded
  `make lab` wrote beyond the activity dataset, which a class shares: the results it keeps,
  the most one lesson adds at once and removes again. In a class, lessons 02 and 04 do
  their cold-cache and RAM-disk comparisons on a private subset of the dataset instead of
  the shared one (iolab.storage.compare), and lesson 09 its cold accelerator runs on a
  private copy of some image samples (iolab.ml.accelerator.sweep_images), so each adds that
  copy, and /dev/shm holds lesson 02's subset, not a whole dataset: the copies' sizes are
  constants here that a test measures by building them. These are upper bounds: the kept
  results include the image dataset, which a class shares too.

- Processes and threads per learner: the most one learner's lab held at once in any
  recorded class rehearsal (workshop/class-rehearsal-recorded.json).

A learner's own run on the cluster differs in time, not in files and bytes (the dataset and
the environment are the same everywhere, give or take the file system's block size).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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
#: The notebooks that, in a class, make a private subset of the dataset for their cold-cache
#: and RAM-disk comparisons (lesson 02 also copies it to /dev/shm); a test holds this to them.
MAKE_A_SUBSET = ("02-small-files", "04-page-cache")
#: That subset (iolab.core.class_folder.CLASS_SUBSET_FILES data files, with its archive), as
#: tests/test_class_check.py measures it by building one: entries and bytes written (exact
#: but for a few bytes of archive.json's notes), and the memory it takes in /dev/shm.
SUBSET_FILES = 760
SUBSET_BYTES = 1_019_026
SUBSET_SHM_BYTES = 3_883_008
#: In a class, notebook 09's cold accelerator runs read a private copy of the image samples
#: they need (iolab.ml.accelerator.CLASS_SWEEP_SAMPLES), one at a time; its entries and
#: bytes as tests/test_class_check.py measures them by building one.
SWEEP_IMAGES_NOTEBOOK = "09-dataloader"
IMAGE_COPY_FILES = 138
IMAGE_COPY_BYTES = 67_352_191
#: The recorded class setup and load test, whose install size class mode quotes.
RECORDED_SETUP = Path("workshop") / "class-bench-recorded.json"
#: The recorded rehearsals (`iolab class rehearse`, `class load-test --lessons`): the busiest
#: learner in them gives the processes and threads one learner's lab holds at once.
RECORDED_REHEARSAL = Path("workshop") / "class-rehearsal-recorded.json"


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
    processes: int  # the login-node budget of one benchmark step (iolab.core.budget)
    recorded_on: str
    machine: str
    shared_files: int = 0  # class mode: the class's install, once (class setup, recorded)
    shared_bytes: int = 0
    shared_recorded_on: str = ""
    shared_machine: str = ""
    kept_files: int = 0  # class mode, per learner: results left after the whole lab
    kept_bytes: int = 0
    lesson_files: int = 0  # class mode, per learner: the most one lesson adds and removes
    lesson_bytes: int = 0
    shm_files: int = 0  # class mode, per learner: /dev/shm at its fullest (lesson 02's subset)
    shm_bytes: int = 0
    # class mode, per learner: the most processes and threads one learner's lab held at
    # once in any recorded rehearsal; that run had `rehearsed_learners` and `rehearsed_lessons`
    processes_each: int = 0
    threads_each: int = 0
    rehearsed_learners: int = 0
    rehearsed_lessons: str = ""
    rehearsed_on: str = ""
    rehearsal_machine: str = ""

    @property
    def class_files_each(self) -> int:
        """A learner's private workspace at its largest in class mode (an upper bound)."""
        return self.kept_files + self.lesson_files

    @property
    def class_bytes_each(self) -> int:
        return self.kept_bytes + self.lesson_bytes

    @property
    def class_files_all(self) -> int:
        return self.learners * self.class_files_each

    @property
    def class_bytes_all(self) -> int:
        return self.learners * self.class_bytes_each

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


def class_load(
    learners: int,
    budget: dict | None = None,
    setup: dict | None = None,
    rehearsals: dict | None = None,
) -> Load:
    """The load of `learners` learners, alone and in class mode (one sentence if the number
    is not a class size); `budget`, `setup` and `rehearsals` default to the recordings."""
    if not 1 <= learners <= MAX_LEARNERS:
        raise LabError(f"--learners {learners} is not a class size: give 1 to {MAX_LEARNERS}")
    if budget is None:
        budget = json.loads((repo_root() / RECORDED).read_text())
    if setup is None:
        setup = json.loads((repo_root() / RECORDED_SETUP).read_text())
    if rehearsals is None:
        rehearsals = json.loads((repo_root() / RECORDED_REHEARSAL).read_text())
    # the run in which one learner's lab held the most processes (the lessons with MPI ranks
    # and DataLoader workers, where a run covered them)
    rehearsed = max(
        rehearsals["runs"],
        key=lambda run: max(each["processes_peak"] or 0 for each in run["per_learner"]),
    )
    phases = {phase["name"]: phase for phase in budget["phases"]}
    peak = {
        key: max(phase["peak"]["workspace"][key] for phase in budget["phases"])
        for key in ("files", "bytes")
    }
    dataset = phases["dataset"]
    shared = {key: dataset["end"]["workspace"][key] for key in ("files", "bytes")}
    copies = {name: {"files": SUBSET_FILES, "bytes": SUBSET_BYTES} for name in MAKE_A_SUBSET}
    copies[SWEEP_IMAGES_NOTEBOOK] = {"files": IMAGE_COPY_FILES, "bytes": IMAGE_COPY_BYTES}
    last = budget["phases"][-1]["end"]["workspace"]
    lesson = {  # the most one lesson added over its start, with a class's private copies
        key: max(
            phase["peak"]["workspace"][key]
            - phase["start"]["workspace"][key]
            + copies.get(phase["name"], {}).get(key, 0)
            for phase in budget["phases"]
            if phase["name"] != "dataset"
        )
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
        shared_files=setup["class_files"],
        shared_bytes=setup["class_bytes"],
        shared_recorded_on=setup["date"],
        shared_machine=setup["machine"],
        kept_files=last["files"] - shared["files"],
        kept_bytes=last["bytes"] - shared["bytes"],
        lesson_files=lesson["files"],
        lesson_bytes=lesson["bytes"],
        shm_files=SUBSET_FILES,
        shm_bytes=SUBSET_SHM_BYTES,
        processes_each=max(each["processes_peak"] for each in rehearsed["per_learner"]),
        threads_each=max(each["threads_peak"] for each in rehearsed["per_learner"]),
        rehearsed_learners=rehearsed["learners"],
        rehearsed_lessons=rehearsed["lessons"],
        rehearsed_on=rehearsed["date"],
        rehearsal_machine=rehearsed["machine"],
    )
