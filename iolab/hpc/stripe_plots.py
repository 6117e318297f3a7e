"""Pictures of Lustre striping: the architecture, a file's stripes by OST, writers x OSTs.

Drawn with matplotlib only (no external images), so the notebook and the lesson's saved
figure come from the same code. `python -m iolab.hpc.stripe_plots OUT.svg` writes the
architecture figure the lesson page shows (lessons/img/lustre-architecture.svg).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import FancyBboxPatch
from matplotlib.typing import ColorType

from iolab.hpc.stripes import MDT, Layout, pieces

MiB = 1024**2


def _ost_colours(osts: list) -> dict:
    """A stable colour per OST (MDT in grey), in the order the OSTs first appear."""
    distinct = list(dict.fromkeys(o for o in osts if o != MDT))
    palette: Sequence[ColorType] = (
        matplotlib.color_sequences["tab20"]
        if len(distinct) <= 20
        else [
            plt.get_cmap("nipy_spectral")(0.05 + 0.9 * i / (len(distinct) - 1))
            for i in range(len(distinct))
        ]
    )
    colours: dict[object, ColorType] = {}
    next_colour = 0
    for ost in osts:
        if ost in colours:
            continue
        if ost == MDT:
            colours[ost] = "#9e9e9e"
        else:
            colours[ost] = palette[next_colour % len(palette)]
            next_colour += 1
    return colours


def stripes_by_ost(
    layout: Layout, size_bytes: int, *, title: str = "", ax: Axes | None = None
) -> Axes:
    """The file's byte range as one bar, each stripe unit coloured by its OST and labelled
    with the OST index; PFL component boundaries as dashed lines."""
    ax = ax or plt.subplots(figsize=(10, 2.4), layout="constrained")[1]
    runs = list(pieces(layout, 0, size_bytes))
    colours = _ost_colours([run.ost for run in runs])
    for run in runs:
        ax.barh(
            0,
            run.length / MiB,
            left=run.file_offset / MiB,
            height=0.8,
            color=colours[run.ost],
            edgecolor="white",
            linewidth=0.6,
        )
        if run.length / size_bytes > 0.012:
            ax.text(
                (run.file_offset + run.length / 2) / MiB,
                0,
                str(run.ost),
                ha="center",
                va="center",
                fontsize=7 if len(runs) <= 40 else 5.5,
                rotation=0 if len(str(run.ost)) < 3 else 90,
            )
    for comp in layout.components[1:]:
        if comp.start < size_bytes:
            ax.axvline(comp.start / MiB, color="black", linestyle="--", linewidth=1.2)
            ax.text(
                comp.start / MiB,
                0.48,
                f" component from {comp.start / MiB:g} MiB",
                fontsize=7,
                va="bottom",
            )
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour) for colour in colours.values()]
    ax.legend(
        handles,
        [f"OST {ost}" if ost != MDT else MDT for ost in colours],
        ncol=12,
        fontsize=6.5,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.45),
        frameon=False,
    )
    ax.set_xlim(0, size_bytes / MiB)
    ax.set_ylim(-0.5, 0.75)
    ax.set_yticks([])
    ax.set_xlabel("file offset (MiB); each segment is one stripe unit, labelled with its OST")
    ax.set_title(title)
    return ax


def grid_heatmap(grid: pd.DataFrame, *, title: str = "", ax: Axes | None = None) -> Axes:
    """Writers (rows) x OSTs (columns), shaded by the MiB each writer sends to each OST."""
    ax = ax or plt.subplots(figsize=(5, 4))[1]
    table = (
        grid.pivot_table(
            index="writer", columns="ost", values="data_bytes", aggfunc="sum", fill_value=0
        )
        / MiB
    )
    image = ax.imshow(table.to_numpy(), aspect="auto", cmap="Oranges", vmin=0)
    ax.set_xticks(range(table.shape[1]), [str(c) for c in table.columns], fontsize=7)
    ax.set_yticks(range(table.shape[0]), [str(r) for r in table.index], fontsize=7)
    ax.set_xlabel("OST index")
    ax.set_ylabel("writer (rank)")
    ax.set_title(title, fontsize="medium")
    plt.colorbar(image, ax=ax, label="data sent (MiB)")
    return ax


def grid_pair(
    aligned: pd.DataFrame, unaligned: pd.DataFrame, aligned_title: str, unaligned_title: str
) -> plt.Figure:
    """Aligned and unaligned writer x OST grids side by side, for the same layout."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    grid_heatmap(aligned, title=aligned_title, ax=left)
    grid_heatmap(unaligned, title=unaligned_title, ax=right)
    fig.tight_layout()
    return fig


def _box(ax: Axes, x: float, y: float, w: float, h: float, text: str, colour: str) -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0.02",
            facecolor=colour,
            edgecolor="black",
            linewidth=0.8,
        )
    )
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=8)


def architecture_figure() -> plt.Figure:
    """Clients, network, MGS, MDS with MDTs and OSS with OSTs, and who talks to whom when."""
    fig, ax = plt.subplots(figsize=(9, 5.2))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 6.2)
    ax.axis("off")
    for i in range(4):
        _box(ax, 0.3 + i * 2.45, 5.0, 2.0, 0.8, f"client {i + 1}\n(compute/login node)", "#e0ecf4")
    _box(ax, 0.3, 3.9, 9.35, 0.55, "network (InfiniBand / Slingshot / Ethernet, LNet)", "#f0f0f0")
    _box(ax, 0.3, 2.3, 1.6, 1.0, "MGS + MGT\nconfiguration", "#fde0dd")
    _box(ax, 2.2, 2.3, 2.2, 1.0, "MDS\nmetadata server", "#fcc5c0")
    for i in range(2):
        _box(ax, 2.2 + i * 1.15, 0.7, 1.05, 1.0, f"MDT{i}\nnames,\nlayouts", "#fa9fb5")
    for j in range(2):
        x = 4.8 + j * 2.5
        _box(ax, x, 2.3, 2.3, 1.0, f"OSS {j + 1}\nobject storage server", "#c7e9c0")
        for k in range(3):
            _box(ax, x + k * 0.78, 0.7, 0.72, 1.0, f"OST\n{3 * j + k}", "#a1d99b")
    for x in (1.1, 3.3, 5.95, 8.45):
        ax.annotate("", (x, 3.35), (x, 3.9), arrowprops={"arrowstyle": "<->", "lw": 0.8})
    for x in (2.75, 3.9):
        ax.annotate("", (x, 1.7), (x, 2.3), arrowprops={"arrowstyle": "-", "lw": 0.8})
    for j in range(2):
        for k in range(3):
            ax.annotate(
                "",
                (4.8 + j * 2.5 + k * 0.78 + 0.36, 1.7),
                (5.95 + j * 2.5, 2.3),
                arrowprops={"arrowstyle": "-", "lw": 0.6},
            )
    ax.text(
        0.3,
        0.15,
        "open, create, stat, ls -l, rm: MDS (plus OSTs for sizes, unless "
        "size-on-MDT)    read/write data: straight to the OSSs, the MDS is not involved",
        fontsize=7.5,
    )
    ax.set_title("A Lustre file system: one namespace, metadata and data on separate servers")
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    """Write the architecture figure to a file (format from the suffix: .svg, .png)."""
    parser = argparse.ArgumentParser(
        description="Draw the Lustre architecture figure the lesson page shows."
    )
    parser.add_argument(
        "output", type=Path, help="file to write, e.g. lessons/img/lustre-architecture.svg"
    )
    args = parser.parse_args(argv)
    plt.switch_backend("Agg")  # a file is written; no display is needed
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: small, searchable files
    plt.rcParams["svg.hashsalt"] = "iolab"  # the same figure gives the same file
    fig = architecture_figure()
    fig.savefig(args.output, metadata={"Date": None} if args.output.suffix == ".svg" else None)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
