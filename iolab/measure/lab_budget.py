"""`make lab`'s own budget: what each of its steps took on this machine (seconds, bytes,
files), recorded as it runs, and read back as a table for the workshop pages.

The workshop's learner set-up and instructor guide quote these figures through the page
workshop/lab-budget.ipynb, which `make lab` executes last: a learner's site shows their own
run; the published site shows the run recorded in workshop/lab-budget-recorded.json.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from iolab.core.atomic import atomic_output
from iolab.core.class_folder import active_class
from iolab.core.errors import LabError
from iolab.core.workspace import WorkspaceEntry, lab_entries, repo_root, workdir
from iolab.measure.context import machine_context, machine_label
from iolab.measure.footprint import SAMPLE_INTERVAL_S, PhaseSampler, footprint

if TYPE_CHECKING:  # pandas only for the table: `class preflight` runs without it
    import pandas as pd

#: Where the kernels of `make lab` find this run's budget (set by `make lab` only).
BUDGET_ENV = "IOLAB_LAB_BUDGET"
#: The run the published site shows: a `make lab` on the machine it names.
RECORDED = Path("workshop") / "lab-budget-recorded.json"
MB = 1e6
#: The RAM disk, where lessons 02 and 04 put copies: memory shared by the whole node.
SHM = Path("/dev/shm")
#: What lives in a checkout but did not come with the clone: builds and other environments.
NOT_THE_CHECKOUT = (".venv-drishti", "_build", "jupyter_execute", ".pytest_cache")


class LabBudget:
    """What `make lab` took, phase by phase (the dataset, the readers, each notebook):
    seconds, the bytes and files of the workspace and of this user's lab folders in
    /dev/shm, at the start, at most and at the end of each, and the most processes and
    threads the run held. Saved after every phase, so the
    budget page (executed after the notebooks) quotes this run."""

    def __init__(
        self, path: Path, interval_s: float = SAMPLE_INTERVAL_S, missing: Sequence[str] = ()
    ) -> None:
        self.path = path
        # The lab's own entries only: the workspace may be $HOME, whose other files are not
        # the lab's to walk. The executed notebooks and the site are in `lab`.
        workspace = tuple(workdir() / entry.dirname for entry in WorkspaceEntry)
        self.sampler = PhaseSampler(
            {"workspace": workspace, "shm": lambda: lab_entries(SHM)},
            interval_s,
            tasks_of=os.getpid(),  # the lab, its notebook kernels and all they start
        )
        environment = Path(sys.prefix)
        joined = active_class()
        self.facts = {
            "machine": machine_label(machine_context(tools=())),
            "date": time.strftime("%Y-%m-%d"),
            "environment": {
                **asdict(footprint(environment)),
                "build_seconds": environment_build_seconds(environment),
                "torch": importlib.util.find_spec("torch") is not None,
                # in a class, the environment is the class's, built once for all
                "shared_by_class": joined.name if joined is not None else None,
            },
            "missing": list(missing),  # the optional tools and packages not here
            "checkout": asdict(
                footprint(
                    repo_root(),
                    skip=(
                        environment,
                        workdir(),
                        *(repo_root() / name for name in NOT_THE_CHECKOUT),
                    ),
                )
            ),
        }

    def __enter__(self) -> LabBudget:
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sampler.__exit__(*exc)
        self.save()

    def begin(self, name: str) -> None:
        self.sampler.begin(name)
        self.save()

    def finish(self, status: str) -> None:
        self.sampler.finish(status)
        self.save()

    def save(self) -> None:
        with atomic_output(self.path) as partial:
            partial.write_text(
                json.dumps({**self.facts, "phases": self.sampler.as_list()}, indent=1) + "\n"
            )


def environment_build_seconds(environment: Path) -> float | None:
    """How long the Makefile took to build `environment` (it writes the seconds into its
    stamp file), or None when that was not recorded (an older stamp, another builder)."""
    for stamp in environment.glob(".installed-python*"):
        try:
            return float(stamp.read_text().strip())
        except (OSError, ValueError):
            return None
    return None


def load_budget() -> tuple[dict, bool]:
    """This `make lab` run's budget when a kernel of it asks, else the recorded run's;
    and whether it is this run's."""
    here = os.environ.get(BUDGET_ENV)
    path = Path(here) if here else repo_root() / RECORDED
    try:
        return json.loads(path.read_text()), bool(here)
    except (OSError, ValueError) as err:
        raise LabError(f"cannot read the budget {path} ({err}); run `make lab` again") from None


def duration_text(seconds: float | None) -> str:
    """`seconds` as a reader says it: "48 s", "2 min 18 s", "1 h 3 min"."""
    if seconds is None:
        return "not recorded"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def budget_frame(budget: dict) -> pd.DataFrame:
    """One row per phase: its time, what the workspace and /dev/shm held, and the most
    processes and threads the run held at once (where the run counted them)."""
    import pandas as pd

    rows = []
    for phase in budget["phases"]:
        start, peak, end = (phase[when]["workspace"] for when in ("start", "peak", "end"))
        tasks = phase.get("tasks_peak")
        rows.append(
            {
                "step": phase["name"],
                "status": phase["status"],
                "time_s": round(phase["seconds"], 1) if phase["seconds"] is not None else None,
                "workspace_peak_MB": round(peak["bytes"] / MB, 1),
                "workspace_peak_over_start_MB": round((peak["bytes"] - start["bytes"]) / MB, 1),
                "workspace_peak_files": peak["files"],
                "workspace_kept_MB": round((end["bytes"] - start["bytes"]) / MB, 1),
                "shm_peak_MB": round(phase["peak"]["shm"]["allocated_bytes"] / MB, 1),
                "shm_peak_files": phase["peak"]["shm"]["files"],
                **(
                    {"processes_peak": tasks["processes"], "threads_peak": tasks["threads"]}
                    if tasks
                    else {}
                ),
            }
        )
    return pd.DataFrame(rows)
