"""Measuring the sample pipeline: read rates over sources and worker counts, and the system
calls per sample of each layout.

The reading itself (samples from files or shards, batches, a timed read checked against the
manifest) is iolab.core.loader, which the demo read_samples.py uses; this module measures and
tabulates it:

    throughput_frame(dataset_dir, sources, workers, repeats=3, limit=None) -> DataFrame (warm)
    read_samples_command(dataset_dir, source, workers=None, limit=None) -> argv of the demo
    count_read_syscalls(dataset_dir, source, workers=None, limit=None, method="auto")
        -> SyscallReport
    syscalls_per_sample_frame({label: SyscallReport}) -> DataFrame

Shuffle orders, their locality and the resumable EpochSampler are in iolab.ml.shuffling.

Why both layouts: one file per sample costs an open (and a directory lookup) per sample,
which a shared file system's metadata server pays for every reader at once; a shard costs
one open per few hundred samples and is read sequentially. The numbers that prove it
(dataset-file opens per sample) are deterministic; the timings depend on the machine.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from iolab.core.loader import NO_TORCH, SOURCES, read_throughput, torch_available
from iolab.core.workspace import repo_root


def throughput_frame(
    dataset_dir: Path,
    sources: Sequence[str] = SOURCES,
    workers: Sequence[int | None] = (None, 0, 1, 2, 4),
    repeats: int = 3,
    limit: int | None = None,
) -> pd.DataFrame:
    """Warm read rates: each (source, workers) is read once untimed, then `repeats` times.

    Worker counts need PyTorch; without it only workers=None is measured (and the frame's
    attrs["note"] says why). One row per timed repeat; see iolab.core.loader.ReadResult.row for
    the columns.
    """
    have_torch = torch_available()
    rows = []
    for source in sources:
        for count in workers:
            if count is not None and not have_torch:
                continue
            read_throughput(dataset_dir, source, count, limit=limit)  # warm-up: page cache, imports
            rows += [
                {**read_throughput(dataset_dir, source, count, limit=limit).row(), "repeat": r}
                for r in range(1, repeats + 1)
            ]
    frame = pd.DataFrame(rows)
    frame.attrs["note"] = "" if have_torch else NO_TORCH
    return frame


def read_samples_command(
    dataset_dir: Path, source: str, workers: int | None = None, limit: int | None = None
) -> list[str]:
    """The command line of demos/read_samples.py, as a learner would type it."""
    cmd = [
        sys.executable,
        str(repo_root() / "demos" / "read_samples.py"),
        "--source",
        source,
        "--data",
        str(dataset_dir),
    ]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    if limit is not None:
        cmd += ["--limit", str(limit)]
    return cmd


def count_read_syscalls(
    dataset_dir: Path,
    source: str,
    workers: int | None = None,
    limit: int | None = None,
    method: str = "auto",
):
    """Attributed system calls of one demo run (iolab.measure.syscall_report.SyscallReport)."""
    from iolab.measure.syscalls import count_syscalls

    return count_syscalls(
        read_samples_command(dataset_dir, source, workers, limit), dataset_dir, method=method
    )


def sample_file_opens(open_counts: dict[str, int]) -> int:
    """Opens of files that hold samples (shards or per-sample files), not of indexes or
    manifests."""
    holders = (".tar", ".csv", ".bin")
    return sum(count for path, count in open_counts.items() if path.endswith(holders))


def syscalls_per_sample_frame(reports: dict) -> pd.DataFrame:
    """One row per labelled run: samples read (from the demo's JSON line) and calls per sample."""
    rows = []
    for label, report in reports.items():
        result = json.loads(report.stdout.strip().splitlines()[-1])
        opens = (
            None
            if report.dataset_open_counts is None
            else sample_file_opens(report.dataset_open_counts)
        )
        rows.append(
            {
                "run": label,
                "method": report.method,
                "samples": result["samples"],
                "sample_file_opens": opens,
                "opens_per_sample": None if opens is None else opens / result["samples"],
                "dataset_reads": report.dataset_reads,
                "reads_per_sample": (
                    None
                    if report.dataset_reads is None
                    else report.dataset_reads / result["samples"]
                ),
                "dataset_dir_opens": report.dataset_dir_opens,
                "other_calls": report.other_calls,
            }
        )
    return pd.DataFrame(rows)
