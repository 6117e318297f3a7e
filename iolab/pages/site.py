"""The learner's site: a staged copy of the site's sources whose notebooks and executed pages
are this machine's, built with Sphinx into the workspace."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from iolab.core.errors import LabError
from iolab.core.lab_dirs import results_dir
from iolab.core.owned import discard_owned
from iolab.core.workspace import repo_root
from iolab.core.writer_lock import writer_lock
from iolab.pages.notebooks import EXECUTED_PAGES, JOBS_PAGE, execute_notebook, failure_logs

#: What the site is built from; `iolab` and `demos` too, since the lessons quote their code
#: (literalinclude): a staging copy without them loses those excerpts; `_static` holds the
#: site's own style sheet (tables that scroll, icons from a shipped font).
SITE_SOURCES = (
    "conf.py",
    "index.md",
    "lessons",
    "workshop",
    "reference",
    "demos",
    "data_generators",
    "iolab",
    "_static",
)


def mark_recorded_lesson(stage: Path, notebook: str, log: Path | None) -> None:
    """Tell the reader of a staged lesson that its figures are the recorded run, not theirs:
    this machine's run of its notebook failed (the note names the error's file) or did not
    happen. Goes right under the title, before anything else."""
    lesson = stage / "lessons" / f"{Path(notebook).stem}.md"
    if not lesson.is_file():
        return
    why = (
        f"failed in `make lab` (the error: `{log}`)"
        if log is not None
        else "was not run by `make lab`"
    )
    note = (
        f":::{{warning}}\nYour run of this lesson's notebook ({notebook}) {why}, so the "
        "figures on this page are the recorded run named in its table, not your "
        "machine's.\n:::\n\n"
    )
    title, _, rest = lesson.read_text().partition("\n")
    lesson.write_text(f"{title}\n\n{note}{rest.lstrip(chr(10))}")


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
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(stage), str(site)],
        text=True,
        capture_output=True,
    )
    warnings = [line for line in proc.stderr.splitlines() if "WARNING" in line]
    if proc.returncode != 0:
        print(proc.stderr.strip())
    elif warnings:
        print(f"  the site has {len(warnings)} warnings, e.g. figures not measured here:")
        print("\n".join(f"    {line}" for line in warnings[:3]))
    return proc.returncode == 0, committed


def show_own_jobs() -> Path:
    """Execute the jobs' page again (it reads the workspace's slurm-results/) and rebuild the
    site of the last `make lab` with it; returns the page in the site."""
    out = results_dir()
    executed = out / "notebooks"
    if not executed.is_dir():
        raise LabError(
            f"there is no site to add the runs to yet ({executed} is missing): "
            "run `make lab` once first"
        )
    with writer_lock(out):
        execute_notebook(repo_root() / JOBS_PAGE, out / "pages" / JOBS_PAGE)
        ok, _ = build_site(executed, out / "site")
    if not ok:
        raise LabError("the site did not build (see above)")
    return out / "site" / Path(JOBS_PAGE).with_suffix(".html")
