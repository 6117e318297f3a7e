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


def tree_tasks(root_pid: int, proc: Path = PROC) -> Tasks:
    """The processes and threads of `root_pid` and all its descendants now; empty where there
    is no /proc or the process is gone. Processes that end while it looks are left out."""
    parents: dict[int, int] = {}
    threads: dict[int, int] = {}
    try:
        entries = list(os.scandir(proc))
    except OSError:
        return Tasks()
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            text = (proc / entry.name / "stat").read_text()
            parent, count = _parent_and_threads(text)
        except (OSError, ValueError, IndexError):
            continue
        pid = int(entry.name)
        parents[pid], threads[pid] = parent, count
    if root_pid not in parents:
        return Tasks()
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    tree, pending = [], [root_pid]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending.extend(children.get(pid, ()))
    return Tasks(len(tree), sum(threads[pid] for pid in tree))
