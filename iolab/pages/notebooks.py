"""Executing the notebooks (and the site's executed pages) on this machine, into the workspace:
the committed reference notebooks are never overwritten."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path

from iolab.core.class_queue import QUEUE_NEWS
from iolab.core.errors import interrupts_held
from iolab.core.lab_dirs import socket_dir
from iolab.core.owned import discard_owned
from iolab.core.workspace import lesson_notebooks, repo_root
from iolab.measure.lab_budget import LabBudget
from iolab.measure.recorded import FALLBACK_LOG_ENV

#: Terminal colour and style codes (ESC [ ... m).
ANSI_CODES = re.compile(r"\x1b\[[0-9;]*m")
#: The site's page of the Slurm jobs' results (recorded, and the learner's own).
JOBS_PAGE = "reference/node-runs.ipynb"
#: Pages outside notebooks/ that make lab executes too (into <results>/pages/, same path)
#: and stages over their committed copies: "Your storage" shows the learner's own run, the
#: budget page this run's budget, the class wall the learner's class (when in one), the
#: jobs page the learner's own Slurm jobs beside the recorded ones.
EXECUTED_PAGES = (
    "reference/your-storage.ipynb",
    "workshop/lab-budget.ipynb",
    "workshop/class-wall.ipynb",
    JOBS_PAGE,
)


#: How long a notebook may run without a word on the terminal before `make lab` says which
#: cell it is in: a learner who sees nothing for minutes thinks the lab hangs.
HEARTBEAT_S = 30.0
#: How long an interrupted notebook's thread is given to notice that its kernel is gone
#: (Python 3.11 here: at once; 3.13: about 10 s). It holds nothing that must be saved, and
#: as a daemon thread it ends with the process.
KERNEL_GONE_S = 2.0


class Progress:
    """What a running notebook shows on the terminal: each class-queue line its cells print
    (a wait for a turn, then the turn), and every HEARTBEAT_S of silence which cell runs and
    for how long, and, while a turn is awaited, the wait and its place again: with thirty
    learners a place can hold for minutes, and a bare "running" would hide that the cell
    waits. Read from the cells' outputs as nbclient adds them."""

    def __init__(self, cells: list, name: str, say: Callable[[str], None]) -> None:
        self.cells, self.name, self.say = cells, name, say
        self.code = [i for i, cell in enumerate(self.cells) if cell.cell_type == "code"]
        self.running: int | None = None
        self.waiting: str | None = None  # the last queue line, until its turn comes
        self.started = self.last_said = time.monotonic()
        self.seen: dict[tuple[int, int], int] = {}  # (cell, output) -> characters read

    def cell_started(self, cell_index: int, **_: object) -> None:
        """nbclient's on_cell_start hook (in the notebook's thread)."""
        self.running = cell_index
        self.waiting = None

    def tick(self) -> None:
        """Relay new queue lines; after HEARTBEAT_S without a word, say where the run is."""
        index = self.running
        if index is None:
            return
        for number, output in enumerate(list(self.cells[index].get("outputs", []))):
            text = output.get("text", "") if output.get("output_type") == "stream" else ""
            done = self.seen.get((index, number), 0)
            complete = text[done:].rpartition("\n")[0]
            if complete:
                self.seen[(index, number)] = done + len(complete) + 1
                for line in complete.splitlines():
                    if news := QUEUE_NEWS.search(line):
                        self.waiting = None if news[1] == "your turn after" else line.strip()
                        self._say(line.strip())
        if time.monotonic() - self.last_said >= HEARTBEAT_S and index in self.code:
            so_far = time.monotonic() - self.started
            where = f"still {self.waiting}" if self.waiting else "running"
            self._say(
                f"cell {self.code.index(index) + 1} of {len(self.code)} {where}; "
                f"{so_far // 60:.0f} min {so_far % 60:.0f} s into this notebook"
            )

    def _say(self, line: str) -> None:
        self.say(f"{self.name}: {line}")
        self.last_said = time.monotonic()


def execute_notebook(
    source: Path,
    target: Path,
    timeout_s: int = 1800,
    say: Callable[[str], None] | None = None,
) -> None:
    """Run a notebook with the notebooks/ folder as its working directory; save it elsewhere.

    The kernel talks to this process over Unix sockets in a private scratch folder, not TCP:
    on a shared login node nobody else can reach them, and the kernel has no reason to warn
    that its traffic is unencrypted. Its connection file (with its key) is there too, not in
    /tmp. The notebook runs in a thread while this one waits: nbclient, run here, takes
    SIGINT and SIGTERM for itself and lets the notebook go on (measured: a Ctrl-C or a
    `kill` changed nothing until the cell ended), so here Ctrl-C and SIGTERM stop the
    kernel and end the run within seconds. With `say`, the run's progress goes there as it
    happens (Progress).
    """
    import nbformat
    from jupyter_client import KernelManager
    from nbclient import NotebookClient

    notebook = nbformat.read(source, as_version=4)
    sockets = socket_dir("kernel", "kernel-65535")  # jupyter_client names them <ip>-<port>
    manager = KernelManager(
        kernel_name="python3",
        transport="ipc",
        ip=str(sockets / "kernel"),
        connection_file=str(sockets / "kernel.json"),
    )
    progress = Progress(notebook.cells, source.name, say or (lambda line: None))
    client = NotebookClient(
        notebook,
        km=manager,
        timeout=timeout_s,
        resources={"metadata": {"path": str(source.parent)}},
        on_cell_start=progress.cell_started,
    )
    failed: list[BaseException] = []

    def run() -> None:
        try:
            client.execute()
        except BaseException as err:  # handed to the waiting thread, which raises it
            failed.append(err)

    worker = threading.Thread(target=run, name=f"notebook {source.name}", daemon=True)
    try:
        worker.start()
        while worker.is_alive():
            worker.join(0.2)  # a short wait, so Ctrl-C and SIGTERM are handled at once
            progress.tick()
    finally:
        with interrupts_held():  # a second Ctrl-C must not leave the kernel running
            if manager.has_kernel:
                manager.shutdown_kernel(now=True)
            worker.join(KERNEL_GONE_S)
            discard_owned(sockets)
    if failed:
        raise failed[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)


def _indented(line: str) -> None:
    print(f"    {line}", flush=True)


def plain(text: str) -> str:
    """`text` without the terminal's colour codes (an IPython traceback is full of them)."""
    return ANSI_CODES.sub("", text)


def failure_logs(executed: Path) -> Path:
    """Where execute_notebooks keeps the error of each notebook that failed (<stem>.txt)."""
    return executed.parent / "failed-notebooks"


def execute_notebooks(
    target_dir: Path,
    fallback_log: Path | None = None,
    budget: LabBudget | None = None,
    lessons: Collection[str] | None = None,
) -> list[str]:
    """Execute the notebooks of `lessons` (all if None) into target_dir; returns the names
    of those that failed. With `lessons`, the other notebooks' runs of an earlier stage stay.

    With fallback_log, each result a notebook showed from its recording (a tool missing
    here) adds a line to that file (the kernels inherit IOLAB_FALLBACK_LOG). With budget,
    each notebook is a phase of it, saved as soon as it ends.
    """
    if fallback_log is not None:
        fallback_log.unlink(missing_ok=True)
        os.environ[FALLBACK_LOG_ENV] = str(fallback_log)
    failed = []
    logs = failure_logs(target_dir)
    if lessons is None:
        discard_owned(logs)
    for source in lesson_notebooks(lessons, root=repo_root()):
        start = time.perf_counter()
        if budget is not None:
            budget.begin(source.stem)
        # an earlier stage's run of this notebook is never shown for this one
        (target_dir / source.name).unlink(missing_ok=True)
        (logs / f"{source.stem}.txt").unlink(missing_ok=True)
        print(f"  {source.name}: running", flush=True)
        try:
            execute_notebook(source, target_dir / source.name, say=_indented)
        except Exception as err:  # a failing cell: report it, keep going with the others
            text = plain(str(err)).strip() or repr(err)
            logs.mkdir(exist_ok=True)
            (logs / f"{source.stem}.txt").write_text(text + "\n")
            print(
                f"  {source.name}: FAILED ({text.splitlines()[-1]}; the whole error: "
                f"{logs / source.stem}.txt)"
            )
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
