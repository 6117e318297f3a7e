"""The HTML page's charts as inline SVG, written by hand: importing matplotlib added most of
a second to every page, so on a small log a page drawn with it cost over twice the text.
The figures, from tidy frames and figure_data's numbers: request sizes, time per rank, I/O
against MPI waiting, bytes and time per OST, the DXT timeline.
Each returns one <svg> element as text (None when there is nothing to draw).

Every text is escaped (file names and labels come from logs), nothing is fetched (no script,
no font or style from elsewhere), and the viewBox lets a chart shrink to a phone's width.
The size stays bounded whatever the log: the timeline draws figure_data's merged spans, and
past RANK_BARS ranks a layer is one outline of at most OUTLINE_STEPS steps.
"""

from __future__ import annotations

import html
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd

from iolab.diagnosis.facts import Run
from iolab.diagnosis.figure_data import (
    META,
    RANK_BARS,
    READ,
    WRITE,
    ost_label_step,
    timeline,
)
from iolab.diagnosis.rules import rank_io_seconds

WIDTH = 480  # viewBox units: a 13-unit text is about 10 px on a 390 px phone, 17 px at MAX_PX
MAX_PX = 640  # wider, a chart's text would grow past the page's own
FONT = 13
LEFT, RIGHT = 72, 16  # room for the y tick labels and the y axis label
PLOT_W = WIDTH - LEFT - RIGHT
CHAR_EM = 0.58  # a sans-serif character's average width, in ems: to fit labels without a font
OUTLINE_STEPS = 2 * PLOT_W  # past this many ranks, a step of the outline is a band of ranks
DOT_GRID = 2.0  # scatter dots closer than this (units) are drawn once: a bounded page
LAYERS = (
    ("read_time_s", READ, "read"),
    ("write_time_s", WRITE, "write"),
    ("meta_time_s", META, "metadata"),
)

#: A tick label's y is the middle of its glyphs, not their baseline: centred on its tick.
CENTRAL = {"dominant_baseline": "central"}
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def esc(text: object) -> str:
    """`text` safe inside an SVG element or attribute: markup escaped, and the characters XML
    forbids (a log's file name may hold any byte) replaced."""
    return html.escape(_NOT_XML.sub("\ufffd", str(text)), quote=True)


def _n(value: float) -> str:
    """A coordinate, to a hundredth of a unit (far below a pixel)."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def nice_ticks(low: float, high: float, count: int = 5, integer: bool = False) -> list[float]:
    """Round tick values (1, 2, 2.5 or 5 times a power of ten apart), the first at or below
    `low` and the last at or above `high`, about `count` steps in all."""
    if not high > low:
        high = low + 1.0
    raw = (high - low) / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = 10 * power
    for mantissa in (1.0, 2.0, 2.5, 5.0):
        if mantissa * power >= raw and not (integer and mantissa == 2.5 and power < 10):
            step = mantissa * power
            break
    if integer:
        step = max(step, 1.0)
    first = math.floor(low / step + 1e-9)
    last = math.ceil(high / step - 1e-9)
    return [round((first + i) * step, 12) for i in range(last - first + 1)]


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """Labels of evenly spaced ticks in one unit for the whole axis (1,500 below 10,000, then
    20k, 2.5M, 3G), with as many decimals as the step needs."""
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    top = max(abs(tick) for tick in ticks)
    scale, suffix = 1.0, ""
    for divisor, name in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if top >= max(divisor, 1e4):
            scale, suffix = divisor, name
            break
    exponent = math.floor(math.log10(step / scale) + 1e-9)
    quarter = exponent <= 0 and round(step / scale / 10.0**exponent, 6) == 2.5
    decimals = max(0, -exponent) + quarter
    if decimals > 4:
        return [f"{tick:.2g}" for tick in ticks]
    return ["0" if tick == 0 else f"{tick / scale:,.{decimals}f}{suffix}" for tick in ticks]


def _width(text: str, size: float = FONT) -> float:
    return len(text) * size * CHAR_EM


Value = TypeVar("Value", float, np.ndarray)


@dataclass(frozen=True)
class Scale:
    """Data values (one, or an array at once) onto viewBox units: `low` lands at `start`,
    `high` at `end`."""

    low: float
    high: float
    start: float
    end: float

    def __call__(self, value: Value) -> Value:
        return self.start + (value - self.low) * (self.end - self.start) / (self.high - self.low)


def _text(x: float, y: float, text: str, anchor: str = "middle", **attributes: object) -> str:
    extra = "".join(
        f' {name.rstrip("_").replace("_", "-")}="{esc(value)}"'
        for name, value in attributes.items()
    )
    return f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}"{extra}>{esc(text)}</text>'


def _title_lines(title: str, size: float) -> list[str]:
    """The title in one line, or two split at the space nearest its middle if it is wider
    than the chart."""
    if _width(title, size) <= WIDTH - 16 or " " not in title:
        return [title]
    spaces = [i for i, c in enumerate(title) if c == " "]
    cut = min(spaces, key=lambda i: abs(i - len(title) / 2))
    return [title[:cut], title[cut + 1 :]]


@dataclass(frozen=True)
class Frame:
    """A chart's outer parts: its title and legend above the plots, and where they end."""

    parts: list[str]
    top: float  # the first unit below the legend


def _frame(title: str, legend: Sequence[tuple[str, str]]) -> Frame:
    """Title (bold, centred) and legend (a swatch and a name per series, in one row above the
    plot: never over the data)."""
    size = FONT + 2
    lines = _title_lines(title, size)
    parts = [
        _text(WIDTH / 2, 20 + 18 * i, line, font_size=size, font_weight="bold")
        for i, line in enumerate(lines)
    ]
    y = 20 + 18 * len(lines) + 4
    x = float(LEFT)
    items = []
    for colour, name in legend:
        items.append(
            f'<rect x="{_n(x)}" y="{_n(y - 10)}" width="12" height="12" fill="{esc(colour)}"/>'
            + _text(x + 17, y, name, anchor="start")
        )
        x += 17 + _width(name) + 18
    parts.append(f'<g class="legend">{"".join(items)}</g>')
    return Frame(parts, y + 14)


def _y_axis(scale: Scale, ticks: Sequence[float], label: str, left: float, right: float) -> str:
    """Grid lines and labels at `ticks`, and the axis label turned upright along the left."""
    lines, texts = [], []
    for tick, text in zip(ticks, tick_labels(ticks), strict=True):
        y = scale(tick)
        lines.append(f"M{_n(left)} {_n(y)}H{_n(right)}")
        texts.append(_text(left - 6, y, text, anchor="end", **CENTRAL))
    middle = (scale.start + scale.end) / 2
    return (
        f'<path d="{"".join(lines)}" stroke="#ddd" stroke-width="1" fill="none"/>'
        f'<g class="y ticks">{"".join(texts)}</g>'
        + _text(16, middle, label, transform=f"rotate(-90 16 {_n(middle)})", class_="y label")
    )


def _x_axis(
    places: Sequence[tuple[float, str]], label: str, bottom: float, size: float = FONT
) -> tuple[str, float]:
    """Tick marks and labels under the plot at `places` (unit, text), turned 30 degrees if
    they would touch (90 and small past OST_LABELS), and the axis label under them; returns
    them and the units they take below `bottom`."""
    widest = max((_width(text, size) for _, text in places), default=0.0)
    room = min((b[0] - a[0] for a, b in itertools.pairwise(places)), default=float(PLOT_W))
    turn = 0 if widest <= room - 4 else (90 if size < FONT else 30)
    marks, texts = [], []
    for x, text in places:  # each label centred on its tick's x (dominant-baseline central)
        marks.append(f"M{_n(x)} {_n(bottom)}v5")
        if turn == 0:
            texts.append(_text(x, bottom + 8 + size / 2, text, font_size=size, **CENTRAL))
            continue
        # turned about its end, which sits under the tick: the text runs down (to the left)
        y = bottom + 7 + (size * 0.45 if turn == 30 else 0)
        turned = f"rotate({-turn} {_n(x)} {_n(y)})"
        texts.append(_text(x, y, text, "end", font_size=size, transform=turned, **CENTRAL))
    drop = {0: 8 + size, 30: 8 + widest * 0.5 + size, 90: 10 + widest}[turn]
    label_y = bottom + drop + FONT + 8
    return (
        f'<path d="{"".join(marks)}" stroke="#333" stroke-width="1"/>'
        f'<g class="x ticks">{"".join(texts)}</g>'
        + _text(LEFT + PLOT_W / 2, label_y, label, class_="x label"),
        label_y + 8 - bottom,
    )


def _places(scale: Scale, ticks: Sequence[float]) -> list[tuple[float, str]]:
    """Where a numeric axis's ticks go, and their labels."""
    return list(zip([scale(t) for t in ticks], tick_labels(ticks), strict=True))


def _box(top: float, bottom: float) -> str:
    """The plot's left and bottom axis lines."""
    return (
        f'<path d="M{_n(LEFT)} {_n(top)}V{_n(bottom)}H{_n(LEFT + PLOT_W)}" '
        'stroke="#333" stroke-width="1" fill="none"/>'
    )


def _svg(title: str, description: str, height: float, parts: Sequence[str]) -> str:
    """One chart: sized by its viewBox to the page's width (a phone's too), named for a screen
    reader by its title and described by `description`."""
    return (
        f'<svg viewBox="0 0 {WIDTH} {_n(height)}" role="img" aria-label="{esc(title)}" '
        f'style="width:100%;height:auto;max-width:{MAX_PX}px;display:block" '
        f'font-family="sans-serif" font-size="{FONT}" class="chart">'
        f"<title>{esc(title)}</title><desc>{esc(description)}</desc>" + "".join(parts) + "</svg>"
    )


def _values(column: pd.Series) -> np.ndarray:
    """A column as finite floats; a missing or negative value (Darshan's -1: unknown) is 0."""
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return np.clip(np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0), 0.0, None)


def _bars(
    name: str,
    colour: str,
    lefts: Sequence[float],
    width: float,
    tops: np.ndarray,
    bottoms: np.ndarray,
    tips: Sequence[str],
) -> str:
    """One series of bars, a rect each (a zero one too), each with its value as a tooltip."""
    rects = "".join(
        f'<rect x="{_n(x)}" y="{_n(top)}" width="{_n(width)}" height="{_n(bottom - top)}">'
        f"<title>{esc(tip)}</title></rect>"
        for x, top, bottom, tip in zip(lefts, tops, bottoms, tips, strict=True)
    )
    return f'<g class="{esc(name)}" fill="{esc(colour)}">{rects}</g>'


def size_bars(histogram: pd.DataFrame, title: str = "Request sizes") -> str | None:
    """Reads and writes per request-size bin (columns request_size, reads, writes)."""
    if histogram.empty:
        return None
    reads, writes = _values(histogram["reads"]), _values(histogram["writes"])
    if not (reads.sum() + writes.sum()):
        return None
    bins = [str(size) for size in histogram["request_size"]]
    frame = _frame(title, [(READ, "reads"), (WRITE, "writes")])
    top, bottom = frame.top + 10, frame.top + 10 + 190
    ticks = nice_ticks(0, float(max(reads.max(), writes.max())))
    y = Scale(0, ticks[-1], bottom, top)
    slot = PLOT_W / len(bins)
    centres = [LEFT + slot * (i + 0.5) for i in range(len(bins))]
    axis, below = _x_axis(list(zip(centres, bins, strict=True)), "request size (bytes)", bottom)
    parts = [*frame.parts, _y_axis(y, ticks, "requests", LEFT, LEFT + PLOT_W)]
    for name, colour, values, shift in (
        ("reads", READ, reads, -0.4),
        ("writes", WRITE, writes, 0.0),
    ):
        parts.append(
            _bars(
                name,
                colour,
                [c + shift * slot for c in centres],
                0.4 * slot,
                y(values),
                np.full(len(values), bottom),
                [f"{b}: {v:,.0f} {name}" for b, v in zip(bins, values, strict=True)],
            )
        )
    parts += [_box(top, bottom), axis]
    description = "Requests per size bin: " + "; ".join(
        f"{b}: {r:,.0f} reads, {w:,.0f} writes" for b, r, w in zip(bins, reads, writes, strict=True)
    )
    return _svg(title, description, bottom + below, parts)


def _steps(edges: np.ndarray, values: np.ndarray) -> list[tuple[float, float]]:
    """The corners of a step line over `edges` (one more than `values`), left to right, a
    corner only where the value changes."""
    change = np.flatnonzero(np.diff(values)) + 1
    corners = [(edges[0], values[0])]
    for i in change:
        corners += [(edges[i], values[i - 1]), (edges[i], values[i])]
    corners.append((edges[-1], values[-1]))
    return corners


def _rank_outline(seconds: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int]:
    """Edges (in ranks) and layers (3 x steps) of the outline, and the ranks per step: a rank
    without records is 0 s; past OUTLINE_STEPS ranks, a step is a band of ranks shown by its
    busiest one (a straggler stays in sight). Only the ranks given are visited, so a log
    whose ranks run to a billion costs OUTLINE_STEPS steps, not a billion."""
    ranks = seconds["rank"].to_numpy(dtype=np.int64)
    given = np.vstack([_values(seconds[column]) for column, _, _ in LAYERS])
    first, last = int(ranks.min()), int(ranks.max())
    band = -(-(last - first + 1) // OUTLINE_STEPS)
    steps = -(-(last - first + 1) // band)
    step = (ranks - first) // band
    order = np.lexsort((given.sum(axis=0), step))  # by step, the busiest rank last in each
    busiest = order[np.append(step[order][1:] != step[order][:-1], True)]
    layers = np.zeros((3, steps))
    layers[:, step[busiest]] = given[:, busiest]
    edges = np.minimum(first + band * np.arange(steps + 1), last + 1) - 0.5
    return edges, layers, band


def rank_time_bars(seconds: pd.DataFrame) -> str | None:
    """Stacked seconds per rank: a straggler or an idle rank shows at a glance. Past RANK_BARS
    ranks, one outline per layer instead of a bar per rank."""
    if len(seconds) < 2:
        return None
    title = "Time per rank (per-rank records)"
    frame = _frame(title, [(colour, name) for _, colour, name in LAYERS])
    top, bottom = frame.top + 10, frame.top + 10 + 190
    ranks = seconds["rank"].to_numpy(dtype=np.int64)
    layers = np.vstack([_values(seconds[column]) for column, _, _ in LAYERS])
    stacked = np.cumsum(layers, axis=0)
    ticks = nice_ticks(0, float(stacked[-1].max()))
    y = Scale(0, ticks[-1], bottom, top)
    x = Scale(ranks.min() - 0.5, ranks.max() + 0.5, LEFT, LEFT + PLOT_W)
    parts = [*frame.parts, _y_axis(y, ticks, "time in I/O calls (s)", LEFT, LEFT + PLOT_W)]
    note = ""
    if len(seconds) <= RANK_BARS:
        width = max(x(1.0) - x(0.0), 1.0)  # a rank each; a unit at least, if ranks are sparse
        base = np.zeros(len(ranks))
        for (_, colour, name), layer, upper in zip(LAYERS, layers, stacked, strict=True):
            parts.append(
                _bars(
                    name,
                    colour,
                    list(x(ranks.astype(float)) - width / 2),
                    width,
                    y(upper),
                    y(base),
                    [f"rank {r}: {v:.3g} s {name}" for r, v in zip(ranks, layer, strict=True)],
                )
            )
            base = upper
    else:
        edges, outline, band = _rank_outline(seconds)
        levels = np.vstack([np.zeros(outline.shape[1]), np.cumsum(outline, axis=0)])
        for i, (_, colour, name) in enumerate(LAYERS):
            corners = _steps(edges, levels[i + 1]) + _steps(edges, levels[i])[::-1]
            points = " ".join(f"{_n(x(a))},{_n(y(b))}" for a, b in corners)
            parts.append(f'<polygon class="{name}" fill="{colour}" points="{points}"/>')
        if band > 1:
            note = f"; each step is the busiest of {band} ranks"
    shown = [t for t in nice_ticks(ranks.min(), ranks.max(), integer=True) if x.low < t < x.high]
    axis, below = _x_axis(_places(x, shown), "rank", bottom)
    parts += [_box(top, bottom), axis]
    totals = stacked[-1]
    busiest = int(np.argmax(totals))
    description = (
        f"Seconds in reads, writes and metadata of {len(ranks):,} ranks' own records, stacked "
        f"per rank{note}: rank {ranks[busiest]} is the busiest with {totals[busiest]:.3g} s; "
        f"the median rank spends {float(np.median(totals)):.3g} s."
    )
    return _svg(title, description, bottom + below, parts)


def io_and_wait(run: Run) -> str | None:
    """Per rank, its I/O seconds against its seconds waiting in MPI (APMPI): ranks that wait
    for the I/O ranks line up from top left to bottom right."""
    if len(run.mpi) < 2:
        return None
    title = "I/O and MPI waiting, one dot per rank (APMPI)"
    io_s = _values(pd.Series(rank_io_seconds(run).to_numpy()))
    wait_s = _values(run.mpi["wait_s"])
    frame = _frame(title, [(WRITE, "one rank")])
    top, bottom = frame.top + 10, frame.top + 10 + 190
    x_ticks, y_ticks = nice_ticks(0, float(io_s.max())), nice_ticks(0, float(wait_s.max()))
    x = Scale(0, x_ticks[-1], LEFT, LEFT + PLOT_W)
    y = Scale(0, y_ticks[-1], bottom, top)
    spots = sorted(
        {
            (round(x(a) / DOT_GRID), round(y(b) / DOT_GRID))
            for a, b in zip(io_s, wait_s, strict=True)
        }
    )
    dots = "".join(
        f'<circle cx="{_n(a * DOT_GRID)}" cy="{_n(b * DOT_GRID)}" r="3"/>' for a, b in spots
    )
    axis, below = _x_axis(_places(x, x_ticks), "time in POSIX and STDIO calls (s)", bottom)
    parts = [
        *frame.parts,
        _y_axis(y, y_ticks, "MPI_Barrier and MPI_Wait (s)", LEFT, LEFT + PLOT_W),
        f'<g class="ranks" fill="{WRITE}" fill-opacity="0.6">{dots}</g>',
        _box(top, bottom),
        axis,
    ]
    description = (
        f"{len(wait_s):,} ranks: seconds in I/O calls (0 to {io_s.max():.3g} s) against seconds "
        f"waiting in MPI_Barrier and MPI_Wait (median {float(np.median(wait_s)):.3g} s)."
    )
    return _svg(title, description, bottom + below, parts)


def ost_bars(osts: pd.DataFrame) -> str | None:
    """Bytes and transfer seconds per Lustre OST (columns ost, bytes, seconds), two panels
    over the same OSTs; past OST_LABELS OSTs, every k-th is labelled."""
    if osts.empty:
        return None
    title = "Bytes and time per OST"
    labels = [str(ost) for ost in osts["ost"]]
    data_gb, seconds = _values(osts["bytes"]) / 1e9, _values(osts["seconds"])
    frame = _frame(title, [(WRITE, "data (GB)"), (META, "transfer time (s)")])
    slot = PLOT_W / len(labels)
    centres = [LEFT + slot * (i + 0.5) for i in range(len(labels))]
    parts = list(frame.parts)
    top = frame.top + 10
    for name, colour, values, label in (
        ("bytes", WRITE, data_gb, "data (GB)"),
        ("seconds", META, seconds, "transfer time (s)"),
    ):
        bottom = top + 130
        ticks = nice_ticks(0, float(values.max()))
        y = Scale(0, ticks[-1], bottom, top)
        parts += [
            _y_axis(y, ticks, label, LEFT, LEFT + PLOT_W),
            _bars(
                name,
                colour,
                [c - 0.4 * slot for c in centres],
                0.8 * slot,
                y(values),
                np.full(len(values), bottom),
                [f"OST {o}: {v:.3g} {label}" for o, v in zip(labels, values, strict=True)],
            ),
            _box(top, bottom),
        ]
        top = bottom + 24
    every = ost_label_step(len(labels))
    shown = [(centres[i], labels[i]) for i in range(0, len(labels), every)]
    size = FONT if every == 1 else FONT - 3
    axis, below = _x_axis(shown, "OST", bottom, size)
    parts.append(axis)
    busiest = int(np.argmax(seconds))
    description = (
        f"{len(labels):,} OSTs, {data_gb.sum():.3g} GB in all; OST {labels[busiest]} took the "
        f"longest, {seconds[busiest]:.3g} s for {data_gb[busiest]:.3g} GB."
    )
    return _svg(title, description, bottom + below, parts)


def _tenths(value: int) -> str:
    """An integer count of tenths as a decimal, exactly: the timeline's moves are sums of
    these, so a row of many spans does not drift."""
    whole, tenth = divmod(abs(value), 10)
    return ("-" if value < 0 else "") + str(whole) + (f".{tenth}" if tenth else "")


def dxt_timeline(dxt: pd.DataFrame) -> str | None:
    """When each rank had a traced read or write in flight (DXT), one row per rank, reads in
    its upper half and writes in its lower; figure_data.timeline's merged spans, so the SVG's
    size does not grow with the requests (past TIMELINE_ROWS ranks, a row is a band)."""
    if dxt.empty:
        return None
    drawn = timeline(dxt)
    band, n_rows = drawn.band, drawn.n_rows
    title = f"DXT timeline: {len(dxt):,} requests, when each rank had one in flight"
    colours = {"read": READ, "write": WRITE}
    frame = _frame(title, [(colours[op], op) for op in drawn.spans])
    top, bottom = frame.top + 10, frame.top + 10 + 200
    x_ticks = nice_ticks(0, drawn.run_s)
    x = Scale(0, x_ticks[-1], LEFT, LEFT + PLOT_W)
    y = Scale(-0.5 * band, (n_rows - 0.5) * band, bottom, top)
    thick = max(min(0.9 * (y(0) - y(band)), 16.0), 1.0) / 2  # each operation: half a row
    parts = list(frame.parts)
    y_ticks = [
        t for t in nice_ticks(0, (n_rows - 1) * band, integer=True) if t <= (n_rows - 1) * band
    ]
    parts.append(
        _y_axis(
            y, y_ticks, "rank" if band == 1 else f"rank (rows of {band} ranks)", LEFT, LEFT + PLOT_W
        )
    )
    counts = []
    for operation, offset in (("read", -0.5), ("write", 0.5)):
        if operation not in drawn.spans:
            continue
        row, begin, stop = drawn.spans[operation]
        counts.append(f"{len(row):,} busy spans of {operation}s")
        starts = np.rint(x(begin) * 10).astype(np.int64)  # in tenths of a unit
        ends = np.rint(x(stop) * 10).astype(np.int64)
        heights = np.rint((y(row * float(band)) + offset * thick) * 10).astype(np.int64)
        moves, previous_row, pen = [], -1, 0
        for r, a, b, h in zip(
            row.tolist(), starts.tolist(), ends.tolist(), heights.tolist(), strict=True
        ):
            if r != previous_row:  # a new row: one absolute move, then relative ones
                moves.append(f"M{_tenths(a)} {_tenths(h)}h{_tenths(b - a)}")
                previous_row = r
            else:
                moves.append(f"m{_tenths(a - pen)} 0h{_tenths(b - a)}")
            pen = b
        parts.append(
            f'<path class="{operation}" d="{"".join(moves)}" stroke="{colours[operation]}" '
            f'stroke-width="{_n(thick)}" fill="none"/>'
        )
    axis, below = _x_axis(_places(x, x_ticks), "time since the job started (s)", bottom)
    parts += [_box(top, bottom), axis]
    description = (
        f"{len(dxt):,} traced requests on {n_rows:,} rows of {band} rank(s) over "
        f"{drawn.run_s:.3g} s, merged into {', '.join(counts)}."
    )
    return _svg(title, description, bottom + below, parts)
