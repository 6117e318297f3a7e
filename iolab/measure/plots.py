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


def timing_bars(
    frame: pd.DataFrame,
    label: str = "label",
    median: str = "wall_median_s",
    low: str = "wall_min_s",
    high: str = "wall_max_s",
    *,
    title: str = "",
    ax: Axes | None = None,
) -> Axes:
    """Horizontal bars of median time, with whiskers from the fastest to the slowest repeat."""
    ax = ax or plt.subplots(figsize=(7, 0.5 + 0.45 * len(frame)))[1]
    errors = [frame[median] - frame[low], frame[high] - frame[median]]
    ax.barh(frame[label], frame[median], xerr=errors, color=DATA_COLOUR, capsize=3)
    ax.invert_yaxis()
    ax.set_xlabel("wall time (s): median, whiskers min to max")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return ax


def split_count_bars(
    frame: pd.DataFrame,
    label: str,
    dataset: str,
    other: str,
    *,
    unit: str = "calls",
    title: str = "",
    log: bool = True,
    ax: Axes | None = None,
) -> Axes:
    """Side-by-side bars: calls on the dataset's files vs calls of the interpreter and libraries."""
    ax = ax or plt.subplots(figsize=(7, 0.5 + 0.55 * len(frame)))[1]
    positions = range(len(frame))
    ax.barh(
        [p - 0.2 for p in positions],
        frame[dataset],
        height=0.4,
        color=DATA_COLOUR,
        label="on the dataset's files",
    )
    ax.barh(
        [p + 0.2 for p in positions],
        frame[other],
        height=0.4,
        color=OTHER_COLOUR,
        label="interpreter, libraries, system",
    )
    ax.set_yticks(list(positions), frame[label])
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(f"{unit} (log scale)" if log else unit)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    return ax


def site_grid(
    grid: pd.DataFrame, value: str = "in_reader_median_s", *, title: str = ""
) -> plt.Figure:
    """One panel per site; per reader a cold and a warm bar, on a shared log scale."""
    sites = list(dict.fromkeys(grid["site"]))
    readers = list(dict.fromkeys(grid["reader"]))
    fig, axes = plt.subplots(
        1,
        len(sites),
        figsize=(4.2 * len(sites), 0.6 + 0.5 * len(readers)),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    colours = {"cold": "#1b9e77", "warm": DATA_COLOUR}
    for ax, site in zip(axes[0], sites, strict=True):
        rows = grid[grid["site"] == site]
        for offset, cache in ((-0.2, "cold"), (0.2, "warm")):
            values = rows[rows["cache_state"] == cache].set_index("reader").reindex(readers)[value]
            ax.barh(
                [i + offset for i in range(len(readers))],
                values,
                height=0.4,
                color=colours[cache],
                label=cache,
            )
        ax.set_yticks(range(len(readers)), readers)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_title(site, fontsize="medium")
        ax.set_xlabel(f"{value} (log scale)")
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].legend(loc="lower right", fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def classic_bars(ratios: pd.DataFrame, floors: dict[str, float], *, ax: Axes | None = None) -> Axes:
    """The lab's and the classic demo's readers by their own timers, side by side, with the
    raw `cat` floors as lines: what each reader adds above moving the bytes."""
    ax = ax or plt.subplots(figsize=(7, 0.8 + 0.6 * len(ratios)))[1]
    positions = range(len(ratios))
    ax.barh(
        [p - 0.2 for p in positions],
        ratios["lab_own_median_s"],
        height=0.4,
        color=DATA_COLOUR,
        label="the lab's reader",
    )
    ax.barh(
        [p + 0.2 for p in positions],
        ratios["classic_own_median_s"],
        height=0.4,
        color=OTHER_COLOUR,
        label="the classic demo's reader",
    )
    ax.set_yticks(list(positions), ratios["reader"])
    ax.invert_yaxis()
    # strict=False: three line styles; a floor beyond the third is not drawn.
    for (label, seconds), style in zip(sorted(floors.items()), (":", "--", "-."), strict=False):
        if label.startswith("cat "):
            ax.axvline(seconds, color="black", linestyle=style, label=label)
    ax.set_xscale("log")  # the naive readers take many times the others
    ax.set_xlabel("reader's own timer (s, log scale), median of the rounds")
    ax.set_title("The lab's readers and the classic demo's, same dataset, taking turns")
    ax.legend(fontsize="small", loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return ax
