"""The file-size sweep's plot: throughput against file size, one line per direction.

Kept out of iolab.storage.sweep so running a sweep needs no matplotlib.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes

from iolab.measure.plots import DATA_COLOUR, OTHER_COLOUR
from iolab.storage.sweep import size_label


def plot_sweep(summary: pd.DataFrame, *, title: str = "", ax: Axes | None = None) -> Axes:
    """Throughput against file size, both on log scales: one line per direction (and location).

    The y axis is logarithmic too because flushed small-file writes can be a thousand times
    slower than large-file reads, and a linear axis would flatten them onto zero.
    """
    ax = ax or plt.subplots(figsize=(7, 4))[1]
    locations = list(dict.fromkeys(summary["location"]))
    colours = {"write": OTHER_COLOUR, "read": DATA_COLOUR}
    styles = ["-", "--", ":", "-."]
    for (location, direction), rows in summary.groupby(["location", "direction"], sort=False):
        median = rows["GB_per_s_median"]
        ax.errorbar(
            rows["file_bytes"],
            median,
            yerr=[median - rows["GB_per_s_min"], rows["GB_per_s_max"] - median],
            color=colours.get(direction),
            marker="o",
            capsize=3,
            linestyle=styles[locations.index(location) % len(styles)],
            label=direction if len(locations) == 1 else f"{direction}, {location}",
        )
    sizes = sorted(set(summary["file_bytes"]))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes, [size_label(size) for size in sizes], rotation=45)
    ax.minorticks_off()
    ax.set_xlabel("file size (log scale)")
    ax.set_ylabel("GB/s (median; whiskers min to max)")
    ax.set_title(title)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return ax
