"""`make lab`: the whole lab on this machine, from tools to a site showing this machine's results.

Steps: report the system tools; generate (or reuse) the dataset and archive in the
workspace; time and trace the five readers; execute every notebook into the workspace (the
committed reference notebooks are never overwritten); build the site from those executed
copies; print a summary table.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Literal

import pandas as pd

from iolab.core.atomic import atomic_output
from iolab.core.builder import build_dataset
from iolab.core.class_folder import active_class
from iolab.core.lab_dirs import results_dir, tool_caches
from iolab.core.owned import discard_owned
from iolab.core.workspace import default_dataset_dir, workdir
from iolab.core.writer_lock import writer_lock
from iolab.measure.lab_budget import BUDGET_ENV, LabBudget
from iolab.pages.missing import missing_names, missing_pieces, not_run_here
from iolab.pages.notebooks import execute_notebooks
from iolab.pages.site import build_site

#: What `make lab` has just added to the learner's results: the readers' figures, then the
#: executed notebooks.
Stage = Literal["readers", "notebooks"]
#: Called after each Stage: the command line passes one that shows the results on the class
#: wall (classmode, a sibling of pages, which therefore cannot call it itself).
Share = Callable[[Stage], None]


def step(number: int, total: int, text: str) -> None:
    print(f"\n[{number}/{total}] {text}", flush=True)


def measure_readers(dataset_dir: Path, manifest: dict, repeats: int) -> pd.DataFrame:
    """Time each reader warm and cold, then count its system calls in a separate traced run.

    In a class the dataset is the class's, which a learner may not evict (evict() leaves
    another user's files cached for the others), so the readers are timed warm only and the
    cold columns stay empty; lesson 02's notebook compares cold on a private subset.
    """
    from iolab.measure.readers import (
        READER_NAMES,
        count_reader_syscalls,
        syscalls_frame,
        time_readers,
        timing_frame,
    )

    shared = active_class() is not None
    if shared:
        print(
            "  in a class the dataset is shared: timed warm only (a cold run would evict it "
            "for every classmate; lesson 02 compares cold on a subset of your own)",
            flush=True,
        )
    warm, cold = [], []
    for name in READER_NAMES:
        warm += time_readers(dataset_dir, names=(name,), repeats=repeats)
        if shared:
            print(f"  {name}: median {warm[-1].wall_median_s:.3f} s warm", flush=True)
            continue
        cold += time_readers(dataset_dir, names=(name,), repeats=repeats, cache="cold")
        cached = cold[-1].resident_before_max_pct
        proof = (
            f"at most {cached:.0f}% cached before a cold run"
            if cached is not None
            else "NOT evicted: the dataset is another user's, so this cold run may be warm"
        )
        print(
            f"  {name}: median {warm[-1].wall_median_s:.3f} s warm, "
            f"{cold[-1].wall_median_s:.3f} s cold ({proof})",
            flush=True,
        )
    times = timing_frame(warm)
    cold_times = timing_frame(cold) if cold else None
    for column in ("wall_median_s", "in_reader_median_s"):
        times[f"cold_{column}"] = float("nan") if cold_times is None else cold_times[column]
    times["rows"] = [m.result["rows"] for m in warm]
    times["mean_matches_manifest"] = [
        all(m.result["mean"] == manifest["expected_mean"] for m in runs)
        for runs in (zip(warm, cold, strict=True) if cold else ((m,) for m in warm))
    ]
    reports = {}
    for name in READER_NAMES:
        reports.update(count_reader_syscalls(dataset_dir, names=(name,)))
        print(
            f"  {name}: {reports[name].dataset_opens} dataset-file opens ({reports[name].method})",
            flush=True,
        )
    return times.merge(syscalls_frame(reports), on="reader")


#: The lesson whose subject the readers' step measures (and whose exercise checks it).
READERS_LESSON = "02"


def run_lab(
    repeats: int = 5, share: Share | None = None, lessons: Collection[str] | None = None
) -> int:
    """The `make lab` sequence, for the notebooks of `lessons` (all if None); returns the
    exit code. The readers are timed only with their lesson (READERS_LESSON).

    One run at a time: a second `make lab` would empty the notebooks and site the first is
    writing, and both would report a site built from a mix of the two. The results
    directory must be the lab's own (results_dir): make lab replaces what it made there.
    """
    out = results_dir()
    tool_caches()
    with writer_lock(out):
        return _run_steps(out, repeats, share or (lambda stage: None), lessons)


def _run_steps(out: Path, repeats: int, share: Share, lessons: Collection[str] | None) -> int:
    """The five steps, writing into `out` (the caller holds its lock)."""
    from iolab.core.tables import to_markdown
    from iolab.measure.tools import check_tools, format_report
    from iolab.storage.locations import discover_locations, locations_frame

    total = 5
    step(1, total, "System tools and the places to compare")
    tools = check_tools()
    print(format_report(tools))
    print()
    print(
        to_markdown(
            locations_frame(discover_locations())[
                ["name", "path", "fs_type", "kind", "free_GB", "o_direct"]
            ]
        )
    )

    budget_file = out / "lab-budget.json"
    os.environ[BUDGET_ENV] = str(budget_file)
    with LabBudget(budget_file, missing=missing_names(tools)) as budget:
        step(2, total, f"Dataset and archive (workspace: {workdir()})")
        budget.begin("dataset")
        dataset_dir = default_dataset_dir()
        manifest = build_dataset(dataset_dir, echo=True).manifest

        summary = None
        if lessons is None or READERS_LESSON in lessons:
            step(
                3,
                total,
                f"The five readers: {repeats} timed repeats warm and cold each, "
                "then one traced run each",
            )
            budget.begin("readers")
            summary = measure_readers(dataset_dir, manifest, repeats)
            with atomic_output(out / "readers.csv") as partial:
                summary.to_csv(partial, index=False)
            budget.finish("done")
            share("readers")
        else:
            step(3, total, f"The five readers: skipped (they belong to lesson {READERS_LESSON})")

        chosen = "every notebook" if lessons is None else f"lessons {', '.join(sorted(lessons))}"
        step(4, total, f"Executing {chosen} on this machine (committed notebooks untouched)")
        executed = out / "notebooks"
        if lessons is None:  # a lab in stages keeps the notebooks of the earlier stages
            discard_owned(executed)
        fallback_log = out / "not-run-here.txt"
        failed = execute_notebooks(executed, fallback_log, budget, lessons)

    share("notebooks")
    step(5, total, "Building the site from this machine's notebooks")
    site_ok, shown_committed = build_site(executed, out / "site")

    columns = [
        "reader",
        "wall_median_s",
        "in_reader_median_s",
        "cold_wall_median_s",
        "cold_in_reader_median_s",
        "dataset_file_opens",
        "total_calls",
        "rows",
        "mean_matches_manifest",
    ]
    if summary is not None:
        print("\nSummary (this machine; warm, and cold = dataset evicted before each repeat)")
        print(to_markdown(summary[[c for c in columns if c in summary.columns]]))
        print(f"\nResults: {out / 'readers.csv'}; what each step took: {budget_file}")
    else:
        print(f"\nWhat each step took: {budget_file}")
    print(f"Executed notebooks: {executed}")
    print(f"Site: {out / 'site' / 'index.html'}" if site_ok else "Site: build FAILED (see above)")
    missing = not_run_here(fallback_log)
    if missing:
        print("\nNot measured on this machine (the site shows the recorded runs there):")
        for line in missing:
            print(f"  - {line}")
    absent = missing_pieces(tools)
    if absent:
        print("\nOptional pieces missing here (the lessons still run; these add what they need):")
        for line in absent:
            print(f"  - {line}")
    if failed:
        print(f"Notebooks that failed: {', '.join(failed)}")
    if shown_committed:
        print(f"The site shows the committed run for: {', '.join(shown_committed)}")
    return 0 if site_ok and not failed else 1
