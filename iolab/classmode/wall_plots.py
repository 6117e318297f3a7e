"""The class wall's strip plots: one dot per learner, one row per reader, coloured by node."""

from __future__ import annotations

import zlib

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FormatStrFormatter, LogLocator


def strip_plot(frame: pd.DataFrame, labels: list[str], named: bool = False) -> Figure | None:
    """The class's spread of the figures `labels` (iolab.classmode.wall.figures_frame), one
    panel each on a log axis, stacked so that the page reads on a phone too; with `named`,
    each dot carries its learner's login name (the instructor's choice: anonymous by
    default). None without data."""
    shown = frame[frame["figure"].isin(labels)]
    if shown.empty:
        return None
    panels = [label for label in labels if label in set(shown["figure"])]
    readers = sorted(shown["reader"].unique())
    figure, axes = plt.subplots(
        len(panels), 1, squeeze=False, figsize=(7, len(panels) * (0.6 * len(readers) + 1.5))
    )
    nodes = sorted(shown["node"].unique())
    colours = {node: plt.cm.tab10(index % 10) for index, node in enumerate(nodes)}
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        for row in shown[shown["figure"] == panel].itertuples():
            spread = zlib.crc32(row.user.encode()) % 100 / 100 - 0.5  # the same every build
            y = readers.index(row.reader) + spread * 0.4
            ax.scatter(row.value, y, color=colours[row.node], s=25)
            if named:  # a login name, never mathtext: a $ stays a $
                ax.annotate(
                    row.user.replace("$", r"\$"),
                    (row.value, y),
                    xytext=(3, 3),
                    textcoords="offset points",
                    fontsize="small",
                )
        ax.set_xscale("log")
        # labels at 1, 2 and 5 of each decade only: every minor tick labelled overlaps (0.09
        # beside 0.1)
        ax.xaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        for set_formatter in (ax.xaxis.set_major_formatter, ax.xaxis.set_minor_formatter):
            set_formatter(FormatStrFormatter("%g"))
        ax.set_xlabel(f"{panel}, one dot per learner")
        ax.set_yticks(range(len(readers)), readers)
        ax.grid(axis="x", alpha=0.3)
    handles = [
        plt.Line2D([], [], marker="o", linestyle="", color=colours[node], label=node)
        for node in nodes
    ]
    axes[0][0].legend(handles=handles, title="node", loc="best", fontsize="small")
    figure.tight_layout()
    return figure
