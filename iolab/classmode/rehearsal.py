"""`iolab class rehearse DIR --learners K`: the morning of the workshop, tried beforehand by the
instructor alone, without root.

K simulated learners (processes of the instructor's, each with a private workspace of its
own) join the class in DIR at once and take the documented path, `python -m iolab lab
--lessons 01,02`, with the class's environment as `source DIR/activate` sets it. The
rehearsal follows what each one prints and what their runs hold, and reports what the morning
will look like: each learner's time to a first result and to the end, their queue waits and
places, the most processes, threads, files and bytes one learner held, the class's total, and
the floor the machine's cores set.

What it cannot show: simulated learners share the instructor's user id, and the class's queue
gives each user one place (iolab.core.class_queue), so their heavy steps take turns one at a
time whatever the class's slots: the waits are an upper bound. The rehearsal leaves the class
as it found it: the learners' workspaces go, and so do the instructor's wall and queue entries
if there were none before.

Real accounts need root: `class load-test --learners N --lessons NN` (rehearse_with_accounts)
creates N users and a class of their own, and each joins with `. DIR/activate` and runs the
same path as themselves, with a place each in the queue; the figures are the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from iolab.classmode.teardown import reset_learner
from iolab.classmode.wall import learner_name
from iolab.core.class_folder import CLASS_ENV, ClassFolder, read_class
from iolab.core.errors import LabError
from iolab.core.lab_dirs import remove_tree, scratch_dir
from iolab.core.wording import counted
from iolab.core.workspace import lab_entries
from iolab.measure.context import machine_context, machine_label, mount_for
from iolab.measure.footprint import PhaseSampler
from iolab.measure.frozen_tree import freeze, kill
from iolab.measure.lab_budget import SHM

if TYPE_CHECKING:
    import pandas as pd

#: A line that shows a measured number: a reader's median, or a notebook run to its end.
FIRST_RESULT = re.compile(r"median [\d.]+ s warm|: executed in \d+ s")
WAITING = re.compile(r"waiting for a turn, place (\d+) of (\d+)")
#: Waiting now: for a place, or (a simulated learner) behind another with the same user id.
WAITING_NOW = re.compile(r"waiting for (a turn|your own earlier heavy step)")
TURN_AFTER = re.compile(r"your turn after (\d+) s")
#: What each simulated learner runs, with the lessons after it: the documented path.
LEARNER_ARGV = ("-m", "iolab", "lab", "--lessons")
#: Seconds between two progress lines on the instructor's terminal.
PROGRESS_S = 15.0
#: Lines of a failed learner's output kept in the figures.
LAST_LINES = 15
#: Seconds a learner gets to end after SIGTERM before SIGKILL, when the rehearsal stops.
STOP_S = 10.0


@dataclass
class Learner:
    """One simulated learner: their run and what it printed, each line with its time."""

    name: str
    workspace: Path
    proc: subprocess.Popen
    started: float
    lines: list[tuple[float, str]] = field(default_factory=list)
    ended: float | None = None  # seconds from its start to the end of its output

    def follow(self) -> None:
        """Keep each line the run prints, with the seconds since its start (a thread)."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.started, line.rstrip("\n")))
        self.ended = time.monotonic() - self.started

    def first(self, pattern: re.Pattern[str]) -> float | None:
        return next((at for at, line in self.lines if pattern.search(line)), None)

    def summary(self) -> dict:
        """The learner's figures: times in seconds since they joined, their waits, their
        run's peaks (from the lab-budget.json their `iolab lab` wrote)."""
        places = [int(m[1]) for _, line in self.lines if (m := WAITING.search(line))]
        waits = [int(m[1]) for _, line in self.lines if (m := TURN_AFTER.search(line))]
        budget_file = self.workspace / "lab" / "lab-budget.json"
        phases = json.loads(budget_file.read_text())["phases"] if budget_file.is_file() else []
        tasks = [phase["tasks_peak"] for phase in phases if "tasks_peak" in phase]
        return {
            "learner": self.name,
            "exit": self.proc.returncode,
            "first_result_s": _rounded(self.first(FIRST_RESULT)),
            "done_s": _rounded(self.ended),
            "queue_waits": len(waits),
            "queue_wait_s": sum(waits),
            "worst_place": max(places, default=None),
            "steps_s": {phase["name"]: _rounded(phase["seconds"]) for phase in phases},
            "processes_peak": max((t["processes"] for t in tasks), default=None),
            "steps_processes": {
                phase["name"]: phase["tasks_peak"]["processes"]
                for phase in phases
                if "tasks_peak" in phase
            },
            "threads_peak": max((t["threads"] for t in tasks), default=None),
            "workspace_peak_files": max(
                (p["peak"]["workspace"]["files"] for p in phases), default=None
            ),
            "workspace_peak_bytes": max(
                (p["peak"]["workspace"]["bytes"] for p in phases), default=None
            ),
            # what a failed run said last, for the instructor to read
            "last_lines": [line for _, line in self.lines[-LAST_LINES:]]
            if self.proc.returncode
            else [],
        }


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def learner_environment(root: Path, workspace: Path) -> dict[str, str]:
    """The environment `source root/activate` gives, with a workspace of the learner's own."""
    return {
        **os.environ,
        CLASS_ENV: str(root),
        "IOLAB_WORKDIR": str(workspace),
        "PATH": f"{root / 'env' / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "JUPYTER_PATH": str(root / "share" / "jupyter"),
        "PYTHONUNBUFFERED": "1",
    }


def _own_entries(root: Path) -> list[str]:
    """This user's entries in the class's queue/ and wall/ (what a reset would remove)."""
    found = []
    for folder in ("queue", "wall"):
        try:
            with os.scandir(root / folder) as listing:
                found += [
                    f"{folder}/{entry.name}"
                    for entry in listing
                    if entry.stat(follow_symlinks=False).st_uid == os.getuid()
                    and not entry.name.startswith(".iolab")
                ]
        except OSError:
            continue
    return found


def _stop(learners: list[Learner]) -> None:
    """SIGTERM every learner's whole process group; after STOP_S, kill what is left of each
    learner's tree, in any session (notebook kernels and fio's jobs each have their own)."""
    running = [each for each in learners if each.proc.poll() is None]
    for each in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(each.proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_S
    for each in running:
        with contextlib.suppress(subprocess.TimeoutExpired):
            each.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    for each in running:
        if each.proc.poll() is None:
            kill(freeze(each.proc.pid, STOP_S), STOP_S)
            each.proc.wait()


def rehearse(root: Path, learners: int, lessons: str, say: Callable[[str], None] = print) -> dict:
    """Run the rehearsal with simulated learners and return its figures (see the module)."""
    joined = read_class(root.expanduser().resolve())
    root = joined.root
    if root.stat().st_uid != os.getuid():
        raise LabError(
            f"{root} is not a class you set up: rehearse your own class (the rehearsal "
            "removes what its simulated learners leave in the class's wall and queue)"
        )
    python = root / "env" / "bin" / "python"
    had_entries = _own_entries(root)
    stage = scratch_dir("class-rehearsal")

    def start(index: int) -> Learner:
        name = f"learner-{index:02d}"
        workspace = stage / name
        proc = subprocess.Popen(
            [str(python), *LEARNER_ARGV, lessons],
            cwd=stage,
            env=learner_environment(root, workspace),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own group: the rehearsal can stop it all
        )
        return Learner(name, workspace, proc, time.monotonic())

    try:
        say(
            f"{counted(learners, 'simulated learner')} run "
            f"`python -m iolab lab --lessons {lessons}` at once, in {stage}"
        )
        return {**_follow(joined, learners, lessons, start, stage, say), "accounts": False}
    finally:
        remove_tree(stage)
        if not had_entries:
            reset_learner(root, learner_name(os.getuid()))


def rehearse_with_accounts(learners: int, lessons: str, say: Callable[[str], None] = print) -> dict:
    """The rehearsal with K real accounts (root, in a VM of one's own, as `class load-test`):
    K accounts in a group, a class of their own (Debian's python3, readable by the group),
    each learner following the documented path as themselves. The accounts, their homes and
    the class are gone afterwards."""
    from iolab.classmode.bench import (
        GROUP,
        PREFIX,
        PYTHON,
        SLOTS,
        make_learners,
        remove_learners,
        require_root,
    )
    from iolab.classmode.setup import setup_class

    require_root()
    stage = Path(tempfile.mkdtemp(prefix="iolab-class-rehearsal-", dir="/tmp"))
    stage.chmod(0o755)
    homes = stage / "homes"
    homes.mkdir()
    homes.chmod(0o755)  # the accounts go through it to their homes, whatever the umask
    made: list[str] = []
    try:
        names = [f"{PREFIX}{number:02d}" for number in range(1, learners + 1)]
        made = make_learners(names, GROUP, homes)
        root = stage / "class"
        say(f"setting up a class for {counted(learners, 'account')} in {root} (a few minutes)")
        setup_class(root, learners, slots=SLOTS, group=GROUP, python=PYTHON, say=lambda _: None)
        figures = follow_accounts(root, names, homes, lessons, say)
        return {**figures, "left_outside_homes": remove_left_by(names, ("/tmp", "/dev/shm"))}
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        remove_learners(made)


def remove_left_by(names: list[str], places: tuple[str, ...]) -> list[str]:
    """What the accounts `names`, made for this run, left at the top of `places` (a file,
    link or folder of theirs): listed, then removed before the accounts go, so that no file
    of a deleted user stays on the machine."""
    uids = {pwd.getpwnam(name).pw_uid for name in names}
    left = []
    for place in places:
        with contextlib.suppress(OSError), os.scandir(place) as listing:
            for entry in listing:
                if entry.stat(follow_symlinks=False).st_uid in uids:
                    left.append(entry.path)
    for path in left:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
    return left


def follow_accounts(
    root: Path, names: list[str], homes: Path, lessons: str, say: Callable[[str], None] = print
) -> dict:
    """Accounts `names` (each with a home in `homes`, in the class's group) join the class in
    `root` with `. DIR/activate`, as the pages tell them, and run the documented path at once;
    the rehearsal's figures."""
    from iolab.classmode.bench import as_learner

    joined = read_class(root)
    documented = f". {shlex.quote(str(root / 'activate'))} && exec python " + shlex.join(
        [*LEARNER_ARGV, lessons]
    )

    def start(index: int) -> Learner:
        name = names[index - 1]
        proc = as_learner(name, homes, root, "sh", "-c", documented, followed=True)
        return Learner(name, homes / name / f"iolab-{joined.name}-{name}", proc, time.monotonic())

    say(
        f"{counted(len(names), 'account')} run "
        f"`. DIR/activate && python -m iolab lab --lessons {lessons}`"
    )
    return {**_follow(joined, len(names), lessons, start, homes, say), "accounts": True}


def _follow(
    joined: ClassFolder,
    learners: int,
    lessons: str,
    start: Callable[[int], Learner],
    workspaces: Path,
    say: Callable[[str], None],
) -> dict:
    """Start the learners at once, follow them to their end with a line every PROGRESS_S,
    and return the figures; `workspaces` holds their workspaces (its peak is theirs)."""
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    running: list[Learner] = []
    readers: list[threading.Thread] = []
    started = time.monotonic()
    try:
        with PhaseSampler(
            {"learners": workspaces, "shm": lambda: lab_entries(SHM)}, tasks_of=os.getpid()
        ) as sampler:
            sampler.begin("rehearsal")
            for index in range(1, learners + 1):
                learner = start(index)
                readers.append(threading.Thread(target=learner.follow, daemon=True))
                readers[-1].start()
                running.append(learner)
            next_line = started + PROGRESS_S
            while any(each.proc.poll() is None for each in running):
                time.sleep(0.5)
                if time.monotonic() >= next_line:
                    say(_progress(running, time.monotonic() - started))
                    next_line += PROGRESS_S
            sampler.finish("done")
        for reader in readers:  # the last lines, read after the run ended
            reader.join(timeout=STOP_S)
        phase = sampler.phases[0]
        per_learner = [each.summary() for each in running]
    finally:
        _stop(running)
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = round(
        (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime), 1
    )  # rounded once, so that the floor shown is the CPU time shown over the cores
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    firsts = [each["first_result_s"] for each in per_learner if each["first_result_s"]]
    dones = [each["done_s"] for each in per_learner if each["done_s"]]
    return {
        "machine": machine_label(machine_context(tools=())),
        "date": time.strftime("%Y-%m-%d"),
        "class": joined.root.name,
        "learners": learners,
        "lessons": lessons,
        "slots": joined.slots,
        "workspaces_fs": mount_for(workspaces).fs_type,
        "class_workspaces_fs": mount_for(joined.workspace_base()).fs_type,
        "all_finished": all(each["exit"] == 0 for each in per_learner),
        "first_result_median_s": _rounded(statistics.median(firsts)) if firsts else None,
        "first_result_max_s": max(firsts, default=None),
        "done_median_s": _rounded(statistics.median(dones)) if dones else None,
        "done_max_s": max(dones, default=None),
        "processes_peak_all": phase.tasks.processes if phase.tasks else None,
        "threads_peak_all": phase.tasks.threads if phase.tasks else None,
        "learners_peak_files": phase.peak["learners"].files,
        "learners_peak_bytes": phase.peak["learners"].bytes,
        "shm_peak_files": phase.peak["shm"].files,
        "shm_peak_bytes": phase.peak["shm"].bytes,
        "cpu_s": cpu_s,
        "cores": cores,
        "cpu_floor_s": round(cpu_s / cores, 1),
        "per_learner": per_learner,
    }


def _progress(running: list[Learner], elapsed: float) -> str:
    """One line for the instructor's terminal: who has a first result, who waits, who is done."""
    done = sum(each.proc.poll() is not None for each in running)
    first = sum(each.first(FIRST_RESULT) is not None for each in running)
    waiting = sum(
        bool(each.lines) and WAITING_NOW.search(each.lines[-1][1]) is not None for each in running
    )
    busy = next((each for each in running if each.proc.poll() is None and each.lines), None)
    now = f"; {busy.name}: {busy.lines[-1][1].strip()[:60]}" if busy else ""
    return (
        f"  {elapsed:5.0f} s: {first}/{len(running)} have a first result, {waiting} waiting "
        f"for a turn, {done}/{len(running)} done{now}"
    )


def run_key(run: dict, every_lesson: Collection[str]) -> str:
    """A recorded run's name in the pages' glue keys: `k` for simulated learners, `a` for
    accounts, the number of learners, and its lessons (`all` when they are `every_lesson`),
    e.g. k6_l0102, a30_l01, k1_all."""
    numbers = sorted(run["lessons"].split(","))
    lessons = "all" if numbers == sorted(every_lesson) else "l" + "".join(numbers)
    return f"{'a' if run.get('accounts') else 'k'}{run['learners']}_{lessons}"


def rehearsal_frame(figures: dict) -> pd.DataFrame:
    """One row per learner, units in the column names."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "learner": each["learner"],
                "exit": each["exit"],
                "first_result_s": each["first_result_s"],
                "done_s": each["done_s"],
                "queue_waits": each["queue_waits"],
                "queue_wait_s": each["queue_wait_s"],
                "worst_place": each["worst_place"],
                "processes_peak": each["processes_peak"],
                "threads_peak": each["threads_peak"],
                "workspace_peak_files": each["workspace_peak_files"],
                "workspace_peak_MB": None
                if each["workspace_peak_bytes"] is None
                else round(each["workspace_peak_bytes"] / 1e6, 1),
            }
            for each in figures["per_learner"]
        ]
    )
