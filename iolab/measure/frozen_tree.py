"""Stop a tool's whole process tree at one moment, so what it held can be read first.

Two tools the lab runs start processes no group signal reaches. Hydra starts each MPI proxy
and rank in a session of its own; asked to stop (SIGTERM) it forwards the signal, except at
the wrong moment: signalled while its ranks were in MPI_Init, it hung until it was killed,
30 s later, and left its topology file and the ranks' shared memory behind (2-core VM,
2026-11-30; CI had found the files). fio's job processes each call setsid(); killed during
a run, fio left them waiting forever on a lock in memory they shared with it (four found
after a CI run, 2026-12-02, up to 103 minutes old).

So the run is frozen instead: SIGSTOP to the tool and to every process below it, each
checked to be the child of one already frozen, through a pidfd so that a pid reused
meanwhile is never signalled. A frozen process can neither make a file nor start another, so
what the tree holds, read from /proc then, is all it will ever have made and not removed;
then every process is killed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from iolab.measure.process_tree import descendants_top_down, parent_of, process_state

#: State letters of proc(5) a frozen tree may show: stopped, stopped under a tracer, ended.
STILL = frozenset("TtZXx")
#: How often the states are read while waiting.
POLL_S = 0.005


@dataclass
class FrozenTree:
    """The processes of a tree this process has stopped, each with its pidfd (None on a
    kernel without pidfd_open, Linux before 5.3: then the pid is signalled)."""

    root: int
    handles: dict[int, int | None] = field(default_factory=dict)

    @property
    def pids(self) -> set[int]:
        return set(self.handles)

    def close(self) -> None:
        for handle in self.handles.values():
            if handle is not None:
                with contextlib.suppress(OSError):
                    os.close(handle)


def freeze(root: int, timeout_s: float) -> FrozenTree:
    """SIGSTOP `root` (a child of this process, not yet waited for) and everything below it,
    until a look at the tree finds no process not yet stopped; a process that has not stopped
    within `timeout_s` (one in uninterruptible I/O) is left as it is."""
    tree = FrozenTree(root)
    deadline = time.monotonic() + timeout_s
    seen: set[int] = set()  # each pid is judged once: a frozen tree starts no new ones
    try:
        while True:
            new = [pid for pid in descendants_top_down(root) if pid not in seen]
            for pid in new:
                seen.add(pid)
                _stop(tree, pid)
            if not new or not _wait(tree, deadline, lambda pid: process_state(pid) in STILL):
                return tree
    except BaseException:
        kill(tree, timeout_s)  # never leave a process of the tree stopped for good
        raise


def _stop(tree: FrozenTree, pid: int) -> None:
    """SIGSTOP pid if it is the tree's root or the child of a process already frozen."""
    try:
        handle: int | None = os.pidfd_open(pid)
    except ProcessLookupError:  # ended meanwhile
        return
    except OSError:  # no pidfd_open on this kernel
        handle = None
    if pid != tree.root and parent_of(pid) not in tree.handles:
        _close(handle)  # ended, and its pid given to a stranger: not ours to stop
        return
    try:
        _signal(pid, handle, signal.SIGSTOP)
    except OSError:  # ended meanwhile, or not this user's to signal
        _close(handle)
        return
    tree.handles[pid] = handle


def kill(tree: FrozenTree, timeout_s: float) -> None:
    """SIGKILL every process of the frozen tree and wait until each has ended (at most
    `timeout_s`); then its pidfds are closed. A process that ended has let go of its shared
    memory."""
    try:
        for pid, handle in tree.handles.items():
            with contextlib.suppress(OSError):
                _signal(pid, handle, signal.SIGKILL)
        _wait(tree, time.monotonic() + timeout_s, lambda pid: _ended(pid, tree.handles[pid]))
    finally:
        tree.close()


def _signal(pid: int, handle: int | None, sig: int) -> None:
    if handle is not None:
        signal.pidfd_send_signal(handle, sig)
    else:
        os.kill(pid, sig)


def _ended(pid: int, handle: int | None) -> bool:
    """True once the process has exited (a pidfd reads as ready then)."""
    if handle is not None:
        return bool(select.select([handle], [], [], 0)[0])
    return process_state(pid) in (None, "Z", "X", "x")


def _wait(tree: FrozenTree, deadline: float, done: Callable[[int], bool]) -> bool:
    """Wait until done(pid) for every pid of the tree; False if the deadline came first."""
    while not all(done(pid) for pid in tree.handles):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def _close(handle: int | None) -> None:
    if handle is not None:
        os.close(handle)
