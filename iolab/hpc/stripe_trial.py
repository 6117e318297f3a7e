"""On a real Lustre file system: stripe directories, write files into them, read the layouts back.

The learner's own evidence that striping works the way the model says: for a few stripe
counts, `lfs setstripe` on a fresh directory, a file written into it with dd (which inherits
the directory's layout), `lfs getstripe` parsed back and checked against the request and
against `iolab.hpc.stripes.locate`, and dd's own timing beside it. The plan is plain data
(plan_trial, plan_frame, the equivalent shell commands) so it can be shown and tested on a
machine without Lustre; only run_trial calls lfs (through iolab.hpc.lustre) and dd.

Everything is written in one fresh directory, inside the lab's workspace when that is on
Lustre, otherwise inside the per-user lab directory of a Lustre location such as $SCRATCH,
and deleted afterwards, also on error or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.capacity import check_capacity
from iolab.core.errors import LabError, interrupts_held
from iolab.core.lab_dirs import remove_tree, scratch_dir
from iolab.core.owned import remove_owned
from iolab.core.workspace import workdir
from iolab.hpc import lustre
from iolab.hpc.stripes import Layout, locate
from iolab.storage.largefiles import checked_size, run_dd
from iolab.storage.locations import Location, discover_locations, user_dir

MiB = 1024**2
#: Small on purpose: a few 64 MiB files are gentle on a shared login node.
DEFAULT_SIZE_MIB = 64
DEFAULT_COUNTS = (1, 2, 4)


@dataclass(frozen=True)
class TrialStep:
    """One stripe count to try: the directory to stripe and the file dd writes into it."""

    stripe_count: int
    stripe_size_bytes: int
    size_mib: int
    directory: Path
    file: Path

    def commands(self) -> list[str]:
        """The shell commands this step amounts to, for the learner to read or rerun."""
        return [
            f"mkdir {self.directory}",
            f"lfs setstripe -c {self.stripe_count} -S {self.stripe_size_bytes} {self.directory}",
            f"dd if=/dev/zero of={self.file} bs=1M count={self.size_mib} conv=fdatasync",
            f"lfs getstripe {self.file}",
        ]


def plan_trial(
    base: Path,
    stripe_counts: tuple[int, ...] = DEFAULT_COUNTS,
    size_mib: int = DEFAULT_SIZE_MIB,
    stripe_size_bytes: int = MiB,
    osts_available: int | None = None,
) -> list[TrialStep]:
    """One step per stripe count, in `base`; counts above the OSTs there are are left out
    (Lustre would quietly use fewer and the check would fail for the wrong reason)."""
    checked_size(size_mib)
    if stripe_size_bytes < 64 * 1024 or stripe_size_bytes % (64 * 1024):
        raise LabError(
            f"stripe size {stripe_size_bytes} is not a multiple of 64 KiB, which "
            "`lfs setstripe -S` requires; use e.g. 1048576 (1 MiB)"
        )
    counts = sorted(
        {c for c in stripe_counts if c >= 1 and (osts_available is None or c <= osts_available)}
    )
    if not counts:
        raise LabError(
            f"none of the stripe counts {stripe_counts} fits the {osts_available} "
            "OSTs of this file system; choose counts from 1 up to the OST count"
        )
    return [
        TrialStep(
            c, stripe_size_bytes, size_mib, base / f"count{c}", base / f"count{c}" / "data.bin"
        )
        for c in counts
    ]


def plan_frame(plan: list[TrialStep]) -> pd.DataFrame:
    """The plan as a table: what is written where, and how much."""
    return pd.DataFrame(
        [
            {
                "stripe_count": s.stripe_count,
                "stripe_size_bytes": s.stripe_size_bytes,
                "file_size_MiB": s.size_mib,
                "setstripe_command": s.commands()[1],
            }
            for s in plan
        ]
    )


def layout_problems(layout: Layout, step: TrialStep) -> list[str]:
    """What differs between the layout read back and the one asked for, and between the
    parsed OST list and the model's answer for every stripe unit of the file (empty: all good)."""
    problems = []
    if len(layout.components) != 1:
        return [
            f"{step.file.name}: expected a plain layout, got {len(layout.components)} "
            "components (a PFL default on the directory's parent?)"
        ]
    comp = layout.components[0]
    if comp.stripe_count != step.stripe_count:
        problems.append(f"stripe count {comp.stripe_count}, asked for {step.stripe_count}")
    if comp.stripe_size != step.stripe_size_bytes:
        problems.append(f"stripe size {comp.stripe_size}, asked for {step.stripe_size_bytes}")
    if len(comp.osts) != comp.stripe_count:
        problems.append(f"{len(comp.osts)} OSTs listed for {comp.stripe_count} stripes")
        return problems
    for unit in range(step.size_mib * MiB // comp.stripe_size):
        expected = comp.osts[unit % comp.stripe_count]
        found = locate(layout, unit * comp.stripe_size).ost
        if found != expected:
            problems.append(
                f"stripe unit {unit}: model says OST {found}, getstripe row "
                f"{unit % comp.stripe_count} says {expected}"
            )
            break
    return problems


def lustre_location(extra: tuple[Path, ...] = ()) -> Location | None:
    """The first of the lab's locations (workspace, $SCRATCH, ... and `extra`) on Lustre."""
    for location in discover_locations(extra, probe=False):
        if location.fs_type == "lustre":
            return location
    return None


@contextlib.contextmanager
def trial_directory(location: Location, bytes_needed: int, files: int) -> Iterator[Path]:
    """A fresh directory on `location` for the trial, deleted with its contents afterwards."""
    in_workspace = (
        location.name == "workspace" or workdir() in Path(location.base).resolve().parents
    )
    cleanup = remove_tree if in_workspace else remove_owned
    base: Path | None = None
    try:
        with interrupts_held():  # made inside the try that removes it, even on a Ctrl-C
            base = (
                scratch_dir("stripes")
                if in_workspace
                else Path(tempfile.mkdtemp(prefix="stripes-", dir=user_dir(location)))
            )
        check_capacity(base, bytes_needed, files)
        yield base
    finally:
        if base is not None:
            cleanup(base)


def run_trial(
    location: Location,
    stripe_counts: tuple[int, ...] = DEFAULT_COUNTS,
    size_mib: int = DEFAULT_SIZE_MIB,
    stripe_size_bytes: int = MiB,
) -> pd.DataFrame:
    """Run the plan on a Lustre location: one row per stripe count with the layout read back,
    whether it matches the request and the model, and dd's write time (with fdatasync)."""
    osts_available = int((lustre.lfs_df(location.base)["kind"] == "OST").sum())
    with trial_directory(
        location, len(stripe_counts) * size_mib * MiB, 2 * len(stripe_counts)
    ) as base:
        plan = plan_trial(base, stripe_counts, size_mib, stripe_size_bytes, osts_available)
        rows = []
        for step in plan:
            step.directory.mkdir()
            lustre.setstripe(step.directory, count=step.stripe_count, size=step.stripe_size_bytes)
            dd = run_dd(
                "if=/dev/zero",
                f"of={step.file}",
                "bs=1M",
                f"count={step.size_mib}",
                "conv=fdatasync",
            )
            layout = lustre.getstripe(step.file)
            problems = layout_problems(layout, step)
            comp = layout.components[0]
            rows.append(
                {
                    "stripe_count": step.stripe_count,
                    "stripe_size_bytes": comp.stripe_size,
                    "osts_in_order": " ".join(str(o) for o in comp.osts),
                    "matches_model": not problems,
                    "problems": "; ".join(problems),
                    "file_size_MiB": step.size_mib,
                    "dd_write_s": dd.seconds,
                    "dd_write_MBps": round(dd.mb_per_s, 1),
                }
            )
    return pd.DataFrame(rows)
