"""The five reader demos as the toolkit sees them: commands to run, timed or traced.

Notebooks, `make lab` and `make bench` all measure the readers through these functions, so
every table in the lab is produced the same way: the demo script is run as a separate
process exactly as a learner would type it, timings without a tracer, system calls in a
separate traced run.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.workspace import repo_root


@dataclass(frozen=True)
class Reader:
    """One demo script and what its access pattern is."""

    name: str
    pattern: str


READERS = (
    Reader("read_files_naive", "one pandas.read_csv per file"),
    Reader("read_files", "read every file, parse once"),
    Reader("read_archive", "stream the tar sequentially"),
    Reader("read_archive_random", "tar members in random order, offset index"),
    Reader("read_random_chunked", "stream the tar, shuffle in a buffer of 10"),
)
READER_NAMES = tuple(reader.name for reader in READERS)


def reader_command(name: str, dataset_dir: Path, *extra: str) -> list[str]:
    """The command line that runs one reader with --json on a dataset."""
    if name not in READER_NAMES:
        raise ValueError(f"unknown reader {name!r}; choose one of {', '.join(READER_NAMES)}")
    script = repo_root() / "demos" / f"{name}.py"
    return [sys.executable, str(script), "--data", str(dataset_dir), "--json", *extra]


def time_readers(
    dataset_dir: Path, names=READER_NAMES, repeats: int = 5, cache: str = "warm"
) -> list:
    """Time each reader, warm or cold, returning iolab.measure.timing Measurements.

    "warm": one untimed warm-up run first, so every timed repeat reads from the page cache.
    "cold": no warm-up; before every repeat the whole dataset directory (data/ and data.tar,
    whichever the reader uses) is flushed and evicted, and the residency left is recorded.
    Cold = the dataset is evicted, not the interpreter: Python and pandas stay cached, as do
    the dataset's directory entries and inodes, so start-up and lookups remain warm.
    """
    from iolab.measure.cache import evict
    from iolab.measure.timing import time_command

    cold = cache == "cold"
    return [
        time_command(
            reader_command(name, dataset_dir),
            repeats=repeats,
            warmup=0 if cold else 1,
            label=name,
            location=dataset_dir,
            cache_state=cache,
            before_each=(lambda: evict(dataset_dir)) if cold else None,
        )
        for name in names
    ]


def timing_frame(measurements: list) -> pd.DataFrame:
    """Summary of reader timings, plus the readers' own timer (which excludes start-up).

    The process wall time includes starting Python and importing pandas; each reader also
    reports the time it spent reading and parsing (`time_s` in its JSON line). The gap
    between the two is the cost of starting the program, paid once per run.
    """
    from statistics import median

    from iolab.measure.timing import summarize

    frame = summarize(measurements).rename(columns={"label": "reader"})
    frame.insert(
        frame.columns.get_loc("cpu_median_s") + 1,
        "in_reader_median_s",
        [median(r["time_s"] for r in m.results if r) for m in measurements],
    )
    return frame


def count_reader_syscalls(dataset_dir: Path, names=READER_NAMES, method: str = "auto") -> dict:
    """Attributed system-call counts of each reader: {name: SyscallReport}."""
    from iolab.measure.syscalls import count_syscalls

    return {
        name: count_syscalls(reader_command(name, dataset_dir), dataset_dir, method=method)
        for name in names
    }


def reader_syscalls_or_recorded(
    recordings, key: str, dataset_dir: Path, names=READER_NAMES
) -> dict:
    """Each reader traced with strace, or (where strace cannot trace) the recorded traces."""
    from iolab.measure.syscalls import traced_or_recorded

    return traced_or_recorded(
        recordings, key, {name: reader_command(name, dataset_dir) for name in names}, dataset_dir
    )


def syscalls_frame(reports: dict) -> pd.DataFrame:
    """One row per reader: method, opens on dataset files and elsewhere, total calls."""
    rows = []
    for name, report in reports.items():
        rows.append(
            {
                "reader": name,
                "method": report.method,
                "dataset_file_opens": report.dataset_opens,
                "dataset_dir_opens": report.dataset_dir_opens,
                "dataset_calls": report.dataset_calls,
                "other_calls": report.other_calls,
                "total_calls": report.total_calls,
            }
        )
    return pd.DataFrame(rows)
