"""How many processes and threads a run holds at once: one process and all its descendants.

A login node limits each user's tasks (`ulimit -u` counts threads as well as processes), and
an admin sizing a class asks how many one learner's run holds at its busiest: the lab, its
notebook kernel, the demos it starts, an MPI launcher and its ranks. This reads the answer
from /proc, without tools and without root (a user may read the status of their own
processes); elsewhere it reports nothing rather than a guess.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Tasks:
    """Processes and their threads (a process with one thread counts once in each)."""

    processes: int = 0
    threads: int = 0

    def larger(self, other: Tasks) -> Tasks:
        """Each field's maximum: a peak over two samples."""
        return Tasks(max(self.processes, other.processes), max(self.threads, other.threads))


def _parent_and_threads(stat_text: str) -> tuple[int, int]:
    """(parent pid, threads) from the text of /proc/PID/stat.

    The command name, field 2, is in parentheses and may itself hold spaces and ")", so the
    fields are counted from the last ")": state, ppid, ... num_threads (field 20 of proc(5)).
    """
    fields = stat_text[stat_text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[17])


def _read_stat(pid: int | str, proc: Path) -> tuple[int, int] | None:
    """(parent pid, threads) of one process; None once it is gone."""
    try:
        return _parent_and_threads((proc / str(pid) / "stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


def _all_processes(proc: Path) -> dict[int, tuple[int, int]]:
    """(parent pid, threads) of every process now; those that end while it looks are left
    out, and so is everything where there is no /proc."""
    try:
        entries = [entry.name for entry in os.scandir(proc) if entry.name.isdigit()]
    except OSError:
        return {}
    found = {}
    for name in entries:
        stat = _read_stat(name, proc)
        if stat is not None:
            found[int(name)] = stat
    return found


def parent_of(pid: int, proc: Path = PROC) -> int | None:
    """The parent of process `pid`; None once it is gone."""
    stat = _read_stat(pid, proc)
    return None if stat is None else stat[0]


def children_of(pid: int, proc: Path = PROC) -> list[int]:
    """The processes whose parent is `pid` now."""
    return [child for child, (parent, _) in _all_processes(proc).items() if parent == pid]


def _tree(root_pid: int, processes: dict[int, tuple[int, int]]) -> list[int]:
    """`root_pid` and the processes below it, each after its parent."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    tree: dict[int, None] = {}
    pending = [root_pid] if root_pid in processes else []
    while pending:
        pid = pending.pop()
        if pid not in tree:
            tree[pid] = None
            pending.extend(children.get(pid, ()))
    return list(tree)


def descendants(root_pid: int, proc: Path = PROC) -> set[int]:
    """`root_pid` and every process below it now; empty once it is gone. Not a group or a
    session: a launcher such as Hydra starts each rank in a session of its own."""
    return set(_tree(root_pid, _all_processes(proc)))


def descendants_top_down(root_pid: int, proc: Path = PROC) -> list[int]:
    """descendants(), each process listed after its parent: the order to signal them in when
    each must be checked to be a child of one already signalled."""
    return _tree(root_pid, _all_processes(proc))


def process_state(pid: int, proc: Path = PROC) -> str | None:
    """The state letter of proc(5) (R running, S sleeping, T stopped, t stopped by a tracer,
    Z ended, ...); None once the process is gone."""
    try:
        text = (proc / str(pid) / "stat").read_text()
        return text[text.rindex(")") + 2]
    except (OSError, ValueError, IndexError):
        return None


def tree_tasks(root_pid: int, proc: Path = PROC) -> Tasks:
    """The processes and threads of `root_pid` and all its descendants now; empty where there
    is no /proc or the process is gone."""
    processes = _all_processes(proc)
    tree = _tree(root_pid, processes)
    return Tasks(len(tree), sum(processes[pid][1] for pid in tree))
