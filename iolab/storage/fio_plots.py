"""Plots of fio results: bandwidth and IOPS against block size or queue depth, latency CDFs.

Kept out of iolab.storage.fio_parse so the parser (and the command line) need no matplotlib.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure


def throughput_plot(frame: pd.DataFrame, x: str = "block_size_bytes", *, title: str = "") -> Figure:
    """Bandwidth and IOPS against `x` (block_size_bytes or iodepth), log2 axis, two panels.

    One line per access pattern: rows that differ only in `x` are joined, so a sweep over
    block sizes or queue depths shows as a curve and an unswept pattern as a single point.
    """
    pattern = [
        c
        for c in ("rw", "direction", "direct", "block_size_bytes", "iodepth", "processes")
        if c != x
    ]
    fig, (bw_ax, iops_ax) = plt.subplots(1, 2, figsize=(11, 4))
    for key, rows in frame.dropna(subset=[x]).groupby(pattern, dropna=False):
        rows = rows.sort_values(x)
        label = " ".join(f"{name}={value}" for name, value in zip(pattern, key, strict=True))
        bw_ax.plot(rows[x], rows["bw_bytes_per_s"] / 2**20, marker="o", label=label)
        iops_ax.plot(rows[x], rows["iops"], marker="o", label=label)
    for ax, unit in ((bw_ax, "bandwidth (MiB/s)"), (iops_ax, "IOPS")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(x)
        ax.set_ylabel(f"{unit}, log scale")
        ax.grid(alpha=0.3)
    iops_ax.legend(fontsize="x-small", loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def latency_cdf_plot(cdf: pd.DataFrame, *, title: str = "", ax: Axes | None = None) -> Axes:
    """The latency CDF of each job and direction (from latency_cdf), on a log time axis."""
    ax = ax or plt.subplots(figsize=(7, 4))[1]
    for (_, job, direction), rows in cdf.groupby(["job_index", "job", "direction"], sort=False):
        ax.step(
            rows["clat_us"], rows["cumulative_fraction"], where="post", label=f"{job} ({direction})"
        )
    ax.set_xscale("log")
    ax.set_xlabel("completion latency (us, log scale)")
    ax.set_ylabel("fraction of requests completed")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", loc="lower right")
    return ax
