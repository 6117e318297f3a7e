"""`make lab`: the whole lab on this machine, from tools to a site showing this machine's results.

Steps: report the system tools; generate (or reuse) the dataset and archive in the
workspace; time and trace the five readers; execute every notebook into the workspace (the
committed reference notebooks are never overwritten); build the site from those executed
copies; print a summary table.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from iolab.classmode.wall import own_fio_figures, publish
from iolab.core.builder import build_dataset
from iolab.core.class_folder import ClassFolder, active_class
from iolab.core.errors import LabError
from iolab.core.owned import discard_owned
from iolab.core.workspace import (atomic_output, default_dataset_dir, repo_root, results_dir,
                                  socket_dir, workdir)
from iolab.core.writer_lock import writer_lock
from iolab.measure.lab_budget import BUDGET_ENV, LabBudget
from iolab.measure.recorded import FALLBACK_LOG_ENV

#: What the site is built from; `iolab` and `demos` too, since the lessons quote their code
#: (literalinclude): a staging copy without them loses those excerpts; `_static` holds the
#: site's own style sheet (tables that scroll, icons from a shipped font).
SITE_SOURCES = ("conf.py", "index.md", "lessons", "workshop", "reference", "demos",
                "data_generators", "iolab", "_static")
#: Terminal colour and style codes (ESC [ ... m).
ANSI_CODES = re.compile(r"\x1b\[[0-9;]*m")
#: Pages outside notebooks/ that make lab executes too (into <results>/pages/, same path)
#: and stages over their committed copies: "Your storage" shows the learner's own run, the
#: budget page this run's budget, the class wall the learner's class (when in one), the
#: jobs page the learner's own Slurm jobs beside the recorded ones.
EXECUTED_PAGES = ("reference/your-storage.ipynb", "workshop/lab-budget.ipynb",
                  "workshop/class-wall.ipynb", "reference/node-runs.ipynb")


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("lab", help="the whole lab on this machine (make lab)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per reader")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    return run_lab(args.repeats)


def step(number: int, total: int, text: str) -> None:
    print(f"\n[{number}/{total}] {text}", flush=True)


def measure_readers(dataset_dir: Path, manifest: dict, repeats: int) -> pd.DataFrame:
    """Time each reader warm and cold, then count its system calls in a separate traced run."""
    from iolab.measure.readers import (READER_NAMES, count_reader_syscalls, syscalls_frame,
                                       time_readers, timing_frame)

    warm, cold = [], []
    for name in READER_NAMES:
        warm += time_readers(dataset_dir, names=(name,), repeats=repeats)
        cold += time_readers(dataset_dir, names=(name,), repeats=repeats, cache="cold")
        cached = cold[-1].resident_before_max_pct
        proof = (f"at most {cached:.0f}% cached before a cold run" if cached is not None else
                 "evicted before each cold run; the kernel hides how much stayed cached of "
                 "files you do not own")
        print(f"  {name}: median {warm[-1].wall_median_s:.3f} s warm, "
              f"{cold[-1].wall_median_s:.3f} s cold ({proof})", flush=True)
    times = timing_frame(warm)
    cold_times = timing_frame(cold)
    times["cold_wall_median_s"] = cold_times["wall_median_s"]
    times["cold_in_reader_median_s"] = cold_times["in_reader_median_s"]
    times["rows"] = [m.result["rows"] for m in warm]
    times["mean_matches_manifest"] = [
        all(m.result["mean"] == manifest["expected_mean"] for m in pair) for pair in zip(warm, cold)]
    reports = {}
    for name in READER_NAMES:
        reports.update(count_reader_syscalls(dataset_dir, names=(name,)))
        print(f"  {name}: {reports[name].dataset_opens} dataset-file opens "
              f"({reports[name].method})", flush=True)
    return times.merge(syscalls_frame(reports), on="reader")


def execute_notebook(source: Path, target: Path, timeout_s: int = 1800) -> None:
    """Run a notebook with the notebooks/ folder as its working directory; save it elsewhere.

    The kernel talks to this process over Unix sockets in a private scratch folder, not TCP:
    on a shared login node nobody else can reach them, and the kernel has no reason to warn
    that its traffic is unencrypted.
    """
    import nbformat
    from jupyter_client import KernelManager
    from nbclient import NotebookClient

    notebook = nbformat.read(source, as_version=4)
    sockets = socket_dir("kernel", "kernel-65535")  # jupyter_client names them <ip>-<port>
    manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(sockets / "kernel"))
    try:
        NotebookClient(notebook, km=manager, timeout=timeout_s,
                       resources={"metadata": {"path": str(source.parent)}}).execute()
    finally:
        if manager.has_kernel:
            manager.shutdown_kernel(now=True)
        discard_owned(sockets)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)


def plain(text: str) -> str:
    """`text` without the terminal's colour codes (an IPython traceback is full of them)."""
    return ANSI_CODES.sub("", text)


def execute_notebooks(target_dir: Path, fallback_log: Path | None = None,
                      budget: LabBudget | None = None) -> list[str]:
    """Execute every notebook into target_dir; returns the names of those that failed.

    With fallback_log, each result a notebook showed from its recording (a tool missing
    here) adds a line to that file (the kernels inherit IOLAB_FALLBACK_LOG). With budget,
    each notebook is a phase of it, saved as soon as it ends.
    """
    if fallback_log is not None:
        fallback_log.unlink(missing_ok=True)
        os.environ[FALLBACK_LOG_ENV] = str(fallback_log)
    failed = []
    logs = failure_logs(target_dir)
    discard_owned(logs)
    for source in sorted((repo_root() / "notebooks").glob("*.ipynb")):
        start = time.perf_counter()
        if budget is not None:
            budget.begin(source.stem)
        try:
            execute_notebook(source, target_dir / source.name)
        except Exception as err:  # a failing cell: report it, keep going with the others
            text = plain(str(err)).strip() or repr(err)
            logs.mkdir(exist_ok=True)
            (logs / f"{source.stem}.txt").write_text(text + "\n")
            print(f"  {source.name}: FAILED ({text.splitlines()[-1]}; the whole error: "
                  f"{logs / source.stem}.txt)")
            failed.append(source.name)
            if budget is not None:
                budget.finish("failed")
            continue
        print(f"  {source.name}: executed in {time.perf_counter() - start:.0f} s")
    if budget is not None:
        budget.finish("done")  # the pages below read the budget as it stands now
    for page in EXECUTED_PAGES:  # beside target_dir, so build_site stages it at its own path
        (target_dir.parent / "pages" / page).unlink(missing_ok=True)  # never a stale run
        try:
            execute_notebook(repo_root() / page, target_dir.parent / "pages" / page)
        except Exception as err:  # keep the committed page, as for a failed notebook
            print(f"  {page}: FAILED ({(plain(str(err)).strip().splitlines() or [repr(err)])[-1]})")
            failed.append(page)
    return failed


#: Optional Python packages some lessons use, with the command that adds each.
OPTIONAL_PACKAGES = (
    ("torch", "PyTorch: the DataLoader and checkpoint runs of lessons 09 and 10", "make torch"),
    ("darshan", "PyDarshan: reads Darshan logs in lesson 12", "make darshan"),
)


def missing_names(statuses: list) -> list[str]:
    """The names of the optional pieces missing here (tools, then Python packages)."""
    return ([s.name for s in statuses if s.state != "ok"]
            + [name for name, _, _ in OPTIONAL_PACKAGES if importlib.util.find_spec(name) is None])


def missing_pieces(statuses: list) -> list[str]:
    """Every optional piece this machine lacks -- a tool missing or unusable, a Python
    package not installed -- one line each, with the command that adds it."""
    lines = [f"{s.name} ({s.purpose}): {s.problem or 'not found'}; how to get it: "
             f"{s.how_to_get}" for s in statuses if s.state != "ok"]
    lines += [f"{name} ({what}): not installed; how to get it: `{command}`"
              for name, what, command in OPTIONAL_PACKAGES
              if importlib.util.find_spec(name) is None]
    return lines


def failure_logs(executed: Path) -> Path:
    """Where execute_notebooks keeps the error of each notebook that failed (<stem>.txt)."""
    return executed.parent / "failed-notebooks"


def mark_recorded_lesson(stage: Path, notebook: str, log: Path | None) -> None:
    """Tell the reader of a staged lesson that its figures are the recorded run, not theirs:
    this machine's run of its notebook failed (the note names the error's file) or did not
    happen. Goes right under the title, before anything else."""
    lesson = stage / "lessons" / f"{Path(notebook).stem}.md"
    if not lesson.is_file():
        return
    why = (f"failed in `make lab` (the error: `{log}`)" if log is not None
           else "was not run by `make lab`")
    note = (f":::{{warning}}\nYour run of this lesson's notebook ({notebook}) {why}, so the "
            "figures on this page are the recorded run named in its table, not your "
            "machine's.\n:::\n\n")
    title, _, rest = lesson.read_text().partition("\n")
    lesson.write_text(f"{title}\n\n{note}{rest.lstrip(chr(10))}")


def not_run_here(fallback_log: Path) -> list[str]:
    """What this machine could not measure, one line per missing tool with the notebooks
    whose cells showed the recorded run instead."""
    try:
        lines = fallback_log.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    by_reason: dict[str, list[str]] = {}
    for line in lines:
        notebook, _key, reason = line.split(": ", 2)
        by_reason.setdefault(reason, [])
        if notebook not in by_reason[reason]:
            by_reason[reason].append(notebook)
    return [f"{reason} (recorded results shown in {', '.join(notebooks)})"
            for reason, notebooks in by_reason.items()]


def build_site(executed: Path, site: Path) -> tuple[bool, list[str]]:
    """Build the site from a staging copy whose notebooks are this machine's executed ones.

    A notebook that failed here is staged as committed, so the lessons' glued figures still
    resolve (to the recorded run), and its lesson says so at the top; returns whether the
    build worked and those notebooks.
    """
    stage = results_dir() / "site-source"
    discard_owned(stage)
    stage.mkdir(parents=True)
    for name in SITE_SOURCES:
        source = repo_root() / name
        if source.is_dir():
            shutil.copytree(source, stage / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, stage / name)
    shutil.copytree(executed, stage / "notebooks")
    for page in EXECUTED_PAGES:
        if (executed.parent / "pages" / page).is_file():
            shutil.copy2(executed.parent / "pages" / page, stage / page)
    committed = []
    for notebook in sorted((repo_root() / "notebooks").glob("*.ipynb")):
        if not (stage / "notebooks" / notebook.name).exists():
            shutil.copy2(notebook, stage / "notebooks" / notebook.name)
            committed.append(notebook.name)
            log = failure_logs(executed) / f"{notebook.stem}.txt"
            mark_recorded_lesson(stage, notebook.name, log if log.is_file() else None)
    discard_owned(site)
    # Not -W (the published site's test is strict): a figure that a notebook could not
    # measure on this machine (a tool or PyTorch missing) is a warning here, not a lost site.
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html",
                           str(stage), str(site)], text=True, capture_output=True)
    warnings = [line for line in proc.stderr.splitlines() if "WARNING" in line]
    if proc.returncode != 0:
        print(proc.stderr.strip())
    elif warnings:
        print(f"  the site has {len(warnings)} warnings, e.g. figures not measured here:")
        print("\n".join(f"    {line}" for line in warnings[:3]))
    return proc.returncode == 0, committed


def run_lab(repeats: int = 5) -> int:
    """The `make lab` sequence; returns the exit code.

    One run at a time: a second `make lab` would empty the notebooks and site the first is
    writing, and both would report a site built from a mix of the two. The results
    directory must be the lab's own (results_dir): make lab replaces what it made there.
    """
    out = results_dir()
    with writer_lock(out):
        return _run_steps(out, repeats)


def to_the_wall(joined: ClassFolder) -> None:
    """Publish this learner's results on the class wall, or say why not and go on: the lab's
    own results do not depend on the wall."""
    try:
        print(f"  on the class wall: {publish(joined).name} in {joined.wall}", flush=True)
    except LabError as err:
        print(f"  not on the class wall: {err}", flush=True)


def _run_steps(out: Path, repeats: int) -> int:
    """The five steps, writing into `out` (the caller holds its lock)."""
    from iolab.core.tables import to_markdown
    from iolab.measure.tools import check_tools, format_report
    from iolab.storage.locations import discover_locations, locations_frame

    total = 5
    step(1, total, "System tools and the places to compare")
    tools = check_tools()
    print(format_report(tools))
    print()
    print(to_markdown(locations_frame(discover_locations())[
        ["name", "path", "fs_type", "kind", "free_GB", "o_direct"]]))

    budget_file = out / "lab-budget.json"
    os.environ[BUDGET_ENV] = str(budget_file)
    with LabBudget(budget_file, missing=missing_names(tools)) as budget:
        step(2, total, "Dataset and archive (workspace: %s)" % workdir())
        budget.begin("dataset")
        dataset_dir = default_dataset_dir()
        manifest = build_dataset(dataset_dir, echo=True).manifest

        step(3, total, f"The five readers: {repeats} timed repeats warm and cold each, "
                       "then one traced run each")
        budget.begin("readers")
        summary = measure_readers(dataset_dir, manifest, repeats)
        with atomic_output(out / "readers.csv") as partial:
            summary.to_csv(partial, index=False)
        budget.finish("done")
        joined = active_class()
        if joined is not None:
            to_the_wall(joined)

        step(4, total, "Executing every notebook on this machine (committed notebooks untouched)")
        executed = out / "notebooks"
        discard_owned(executed)
        fallback_log = out / "not-run-here.txt"
        failed = execute_notebooks(executed, fallback_log, budget)

    if joined is not None:
        print(f"  fio figures for the class wall: {len(own_fio_figures())}", flush=True)
        to_the_wall(joined)
    step(5, total, "Building the site from this machine's notebooks")
    site_ok, shown_committed = build_site(executed, out / "site")

    columns = ["reader", "wall_median_s", "in_reader_median_s", "cold_wall_median_s",
               "cold_in_reader_median_s", "dataset_file_opens", "total_calls", "rows",
               "mean_matches_manifest"]
    print("\nSummary (this machine; warm, and cold = dataset evicted before each repeat)")
    print(to_markdown(summary[[c for c in columns if c in summary.columns]]))
    print(f"\nResults: {out / 'readers.csv'}; what each step took: {budget_file}")
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
