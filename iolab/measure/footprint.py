"""What a run holds on disk while it runs: bytes, allocated bytes and files of a folder, and
their peak per phase, sampled in the background (with the most processes and threads the
run held, iolab.measure.process_tree).

`make lab` records this for every step and notebook (lab-budget.json), so the workshop
pages quote the learner's own budget, not a figure measured once by hand. A peak shorter
than the sampling interval can be missed; the start and end of every phase are always
measured.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from iolab.measure.process_tree import Tasks, tree_tasks

#: Seconds between two samples: a walk of the workspace (about 20,000 entries at its peak)
#: takes a small fraction of that, so sampling stays gentle on a login node.
SAMPLE_INTERVAL_S = 5.0
#: Seconds between two counts of a run's processes: one read of /proc, cheap, and often
#: enough to catch a demo's MPI ranks or a DataLoader's workers, which live a few seconds.
TASKS_INTERVAL_S = 0.5


@dataclass(frozen=True)
class Footprint:
    """A folder's size: its files' and links' bytes, the blocks of everything below it (as
    `du`) and the number of entries below it (files, folders and links, as `find | wc -l`
    minus the folder itself)."""

    bytes: int = 0
    allocated_bytes: int = 0
    files: int = 0

    def larger(self, other: Footprint) -> Footprint:
        """Each field's maximum: a peak over two samples."""
        return Footprint(
            max(self.bytes, other.bytes),
            max(self.allocated_bytes, other.allocated_bytes),
            max(self.files, other.files),
        )


def footprint(paths: Path | str | Iterable[Path], skip: Iterable[Path] = ()) -> Footprint:
    """The size of the folder `paths` (or the sum over several), links counted and never
    followed; `skip` are folders left out with everything below them. A folder that is
    missing is empty; entries that vanish during the walk (a notebook deleting its files)
    are not counted."""
    skipped = {str(Path(p)) for p in skip}
    size = allocated = count = 0
    roots = [str(paths)] if isinstance(paths, (str, Path)) else [str(p) for p in paths]
    pending = []
    for root in roots:
        try:
            info = os.lstat(root)
        except OSError:  # missing: empty
            continue
        if stat.S_ISLNK(info.st_mode):  # a link given as a folder (a class workspace's
            count += 1  # `dataset`, to the class's copy) is one entry, as below
            size += info.st_size
            allocated += info.st_blocks * 512
        else:
            pending.append(root)
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:  # gone, or not ours to read
            continue
        for entry in entries:
            if entry.path in skipped:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            count += 1
            size += info.st_size if not stat.S_ISDIR(info.st_mode) else 0
            allocated += info.st_blocks * 512
            if stat.S_ISDIR(info.st_mode):
                pending.append(entry.path)
    return Footprint(size, allocated, count)


@dataclass
class Phase:
    """One phase of a run: its places' size at its start, at most and at its end, and the
    most processes and threads its run held at once (None when not counted)."""

    name: str
    start: dict[str, Footprint]
    peak: dict[str, Footprint]
    end: dict[str, Footprint] | None = None
    seconds: float | None = None
    status: str = "running"
    tasks: Tasks | None = None

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "seconds": self.seconds,
            "status": self.status,
            **({"tasks_peak": asdict(self.tasks)} if self.tasks is not None else {}),
            **{
                when: {place: asdict(size) for place, size in sizes.items()}
                for when, sizes in (
                    ("start", self.start),
                    ("peak", self.peak),
                    ("end", self.end or {}),
                )
            },
        }


class PhaseSampler:
    """Sizes of a few places, sampled every `interval_s` seconds in a background thread,
    kept per phase; with `tasks_of` (a pid), also the most processes and threads of that
    process and its descendants, counted every TASKS_INTERVAL_S. Use as a context manager;
    `begin(name)` ends the running phase and starts the next, `finish(status)` ends the
    running one."""

    def __init__(
        self,
        places: Mapping[str, Path | Iterable[Path] | Callable[[], Iterable[Path]]],
        interval_s: float = SAMPLE_INTERVAL_S,
        skip: Iterable[Path] = (),
        tasks_of: int | None = None,
    ) -> None:
        # a callable is asked again at each sample: the folders may come and go
        self.places = {
            name: where if isinstance(where, (str, Path)) or callable(where) else tuple(where)
            for name, where in places.items()
        }
        self.interval_s = interval_s
        self.skip = tuple(skip)
        self.tasks_of = tasks_of
        self.phases: list[Phase] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)
        self._started = 0.0

    def __enter__(self) -> PhaseSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish("stopped" if exc[0] is not None else "done")
        self._stop.set()
        self._thread.join()

    def sizes(self) -> dict[str, Footprint]:
        return {
            name: footprint(where() if callable(where) else where, self.skip)
            for name, where in self.places.items()
        }

    def tasks(self) -> Tasks | None:
        return None if self.tasks_of is None else tree_tasks(self.tasks_of)

    def begin(self, name: str) -> None:
        self.finish("done")
        sizes = self.sizes()
        with self._lock:
            self.phases.append(Phase(name, sizes, dict(sizes), tasks=self.tasks()))
            self._started = time.perf_counter()

    def finish(self, status: str) -> None:
        """End the running phase (if any) with `status`, measuring its places once more."""
        with self._lock:
            running = self.phases[-1] if self.phases and self.phases[-1].end is None else None
        if running is None:
            return
        sizes, tasks = self.sizes(), self.tasks()
        with self._lock:
            running.seconds = time.perf_counter() - self._started
            running.end = sizes
            running.status = status
            self._raise_peak(running, sizes, tasks)

    def _raise_peak(
        self, phase: Phase, sizes: dict[str, Footprint], tasks: Tasks | None = None
    ) -> None:
        for place, size in sizes.items():
            phase.peak[place] = phase.peak[place].larger(size)
        if tasks is not None and phase.tasks is not None:
            phase.tasks = phase.tasks.larger(tasks)

    def _sample_until_stopped(self) -> None:
        tick = self.interval_s if self.tasks_of is None else min(self.interval_s, TASKS_INTERVAL_S)
        next_walk = time.monotonic() + self.interval_s
        while not self._stop.wait(tick):
            walk = time.monotonic() >= next_walk
            if walk:
                next_walk += self.interval_s
            sizes = self.sizes() if walk else {}
            tasks = self.tasks()
            with self._lock:
                if self.phases and self.phases[-1].end is None:
                    self._raise_peak(self.phases[-1], sizes, tasks)

    def as_list(self) -> list[dict]:
        with self._lock:
            return [phase.as_dict() for phase in self.phases]
