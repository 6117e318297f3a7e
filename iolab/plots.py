"""Plots a learner would rather look at than read: bars with their spread, counts split by target.

Each function takes a tidy frame (one row per bar) and returns the matplotlib Axes, so a
notebook can add a reference line or a title before `plt.show()`.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes

DATA_COLOUR = "#d95f02"
OTHER_COLOUR = "#7570b3"


def timing_bars(frame: pd.DataFrame, label: str = "label", median: str = "wall_median_s",
                low: str = "wall_min_s", high: str = "wall_max_s", *, title: str = "",
                ax: Axes | None = None) -> Axes:
    """Horizontal bars of median time, with whiskers from the fastest to the slowest repeat."""
    ax = ax or plt.subplots(figsize=(7, 0.5 + 0.45 * len(frame)))[1]
    errors = [frame[median] - frame[low], frame[high] - frame[median]]
    ax.barh(frame[label], frame[median], xerr=errors, color=DATA_COLOUR, capsize=3)
    ax.invert_yaxis()
    ax.set_xlabel("wall time (s): median, whiskers min to max")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return ax


def split_count_bars(frame: pd.DataFrame, label: str, dataset: str, other: str, *,
                     unit: str = "calls", title: str = "", log: bool = True,
                     ax: Axes | None = None) -> Axes:
    """Side-by-side bars: calls on the dataset's files vs calls of the interpreter and libraries."""
    ax = ax or plt.subplots(figsize=(7, 0.5 + 0.55 * len(frame)))[1]
    positions = range(len(frame))
    ax.barh([p - 0.2 for p in positions], frame[dataset], height=0.4, color=DATA_COLOUR,
            label="on the dataset's files")
    ax.barh([p + 0.2 for p in positions], frame[other], height=0.4, color=OTHER_COLOUR,
            label="interpreter, libraries, system")
    ax.set_yticks(list(positions), frame[label])
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(f"{unit} (log scale)" if log else unit)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    return ax
