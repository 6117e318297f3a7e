"""Plots of checkpoint runs: blocked time per strategy, and a timeline of steps and copies."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes

from iolab.ml.checkpoint.loop import LoopRun


def blocked_bars(summary: pd.DataFrame, *, title: str = "", ax: Axes | None = None) -> Axes:
    """Horizontal bars: seconds the training loop was blocked per checkpoint, per strategy."""
    ax = ax or plt.subplots(figsize=(8, 0.6 + 0.45 * len(summary)))[1]
    colours = ["#1b9e77" if s == "background" else "#d95f02" for s in summary["strategy"]]
    ax.barh(summary["label"], summary["blocked_per_checkpoint_s"], color=colours)
    for y, value in enumerate(summary["blocked_per_checkpoint_s"]):
        ax.annotate(f" {value:.2f} s", (value, y), va="center", fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel("training blocked per checkpoint (s)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return ax


def timeline_plot(runs: Sequence[LoopRun], *, title: str = "") -> plt.Figure:
    """Per run, one lane of steps (computing, writing, waiting for a copy) and one of copies."""
    colours = {"compute": "#cccccc", "writing": "#d95f02", "waiting": "#e7298a", "copy": "#1b9e77"}
    fig, ax = plt.subplots(figsize=(10, 0.8 + 0.7 * len(runs)))
    labels, ticks = [], []
    for lane, run in enumerate(runs):
        y = lane * 1.4
        t = run.timeline
        ax.broken_barh(
            list(zip(t["start_s"], t["compute_s"], strict=True)),
            (y, 0.6),
            facecolors=colours["compute"],
            edgecolor="white",
            linewidth=0.5,
        )
        compute_end = t["start_s"] + t["compute_s"]
        ax.broken_barh(
            list(zip(compute_end, t["waiting_for_copy_s"], strict=True)),
            (y, 0.6),
            facecolors=colours["waiting"],
        )
        ax.broken_barh(
            list(zip(compute_end + t["waiting_for_copy_s"], t["writing_s"], strict=True)),
            (y, 0.6),
            facecolors=colours["writing"],
        )
        if run.copies:
            ax.broken_barh(
                [(c.start_s, c.end_s - c.start_s) for c in run.copies],
                (y + 0.65, 0.3),
                facecolors=colours["copy"],
                edgecolor="white",
                linewidth=0.5,
            )
        labels.append(run.label)
        ticks.append(y + 0.3)
    ax.set_yticks(ticks, labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the training loop started")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    ax.legend(
        handles,
        [
            "computing (a step)",
            "writing a checkpoint (blocked)",
            "waiting for the previous copy (blocked)",
            "background copy + verify",
        ],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.12 - 0.4 / len(runs)),
        ncol=2,
        fontsize="small",
    )
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
