"""The HTML page's charts as inline SVG (iolab.diagnosis.svg_charts, issue 36 item 7): the
page costs at most twice the text report because it never imports matplotlib. Each chart is
parsed back with xml.etree and held to the numbers it was given: a bar per row, heights in
proportion, the timeline's strokes exactly figure_data's busy spans, hostile text escaped."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iolab.diagnosis import svg_charts
from iolab.diagnosis.benchmark import synthetic_run
from iolab.diagnosis.figure_data import (
    OST_LABELS,
    RANK_BARS,
    TIMELINE_BINS,
    busy_spans,
    ost_label_step,
)
from iolab.diagnosis.rules import rank_io_seconds
from iolab.diagnosis.svg_charts import (
    dxt_timeline,
    io_and_wait,
    nice_ticks,
    ost_bars,
    rank_time_bars,
    size_bars,
    tick_labels,
)

LOGS = Path(__file__).parent / "fixtures" / "darshan"
ROOT = Path(__file__).resolve().parent.parent
HOSTILE = "</text></svg><script>alert('x')</script>&amp; \x1b[31m \"quoted\""


def parse(svg: str | None) -> ET.Element:
    assert svg is not None
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    assert root.tag == "svg"
    return root


def series(root: ET.Element, name: str) -> list[ET.Element]:
    """The rects of one series (its <g class=name>)."""
    group = root.find(f".//g[@class='{name}']")
    assert group is not None, name
    return group.findall("rect")


def number(label: str) -> float:
    """A tick label's value: 1,500 / 40k / 2.5M."""
    factor = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}.get(label[-1], 1.0)
    return float(label.rstrip("kMGT").replace(",", "")) * factor


def axis(root: ET.Element, which: str, panel: int = 0):
    """The chart's own value-to-unit map along `which` ('x' or 'y'), read from its first and
    last tick labels (their x or y is their tick's: labels are centred on them)."""
    texts = root.findall(f".//g[@class='{which} ticks']")[panel].findall("text")
    (v0, u0), (v1, u1) = (
        (number(t.text or ""), float(t.get(which, "nan"))) for t in texts[:: len(texts) - 1]
    )
    return lambda value: u0 + (np.asarray(value, dtype=float) - v0) * (u1 - u0) / (v1 - v0)


def heights(rects: list[ET.Element]) -> np.ndarray:
    return np.array([float(r.get("height", "nan")) for r in rects])


def test_nice_ticks_and_their_labels() -> None:
    assert nice_ticks(0, 50_486) == [0, 20_000, 40_000, 60_000]
    assert tick_labels(nice_ticks(0, 50_486)) == ["0", "20k", "40k", "60k"]
    assert nice_ticks(0, 45_000) == [0, 10_000, 20_000, 30_000, 40_000, 50_000]
    assert nice_ticks(0, 0.023) == [0, 0.005, 0.01, 0.015, 0.02, 0.025]
    assert tick_labels([0, 0.25, 0.5]) == ["0", "0.25", "0.50"]
    assert tick_labels(nice_ticks(0, 1450)) == ["0", "500", "1,000", "1,500"]
    assert tick_labels([0, 2.5e6, 5e6]) == ["0", "2.5M", "5.0M"]
    assert nice_ticks(0, 0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]  # nothing to show: still an axis
    assert nice_ticks(0, 3, integer=True) == [0, 1, 2, 3]  # a rank axis never says 2.5
    assert all(t == int(t) for t in nice_ticks(3, 17, integer=True))


def test_the_size_bars_have_a_bar_per_row_in_proportion() -> None:
    histogram = pd.DataFrame(
        {
            "request_size": ["0-100", "100-1K", "1K-10K", "10K-100K"],
            "reads": [0, 10, 40, 5],
            "writes": [20, 0, 10, 0],
        }
    )
    root = parse(size_bars(histogram))
    reads, writes = series(root, "reads"), series(root, "writes")
    assert len(reads) == len(writes) == 4  # a zero bar too
    drawn = np.concatenate([heights(reads), heights(writes)])
    given = np.array([0, 10, 40, 5, 20, 0, 10, 0], dtype=float)
    assert drawn == pytest.approx(given * drawn.max() / given.max(), abs=0.02)
    y = axis(root, "y")
    assert [float(r.get("y")) + float(r.get("height")) for r in reads] == pytest.approx(
        [float(y(0))] * 4, abs=0.02
    )
    assert float(reads[2].get("y")) == pytest.approx(float(y(40)), abs=0.02)  # the axis is right
    labels = [t.text for t in root.findall(".//g[@class='x ticks']/text")]
    assert labels == list(histogram.request_size)
    assert [t.text for t in root.findall(".//g[@class='legend']/text")] == ["reads", "writes"]
    assert root.findtext("title") == "Request sizes"
    assert root.get("aria-label") == "Request sizes" and root.get("role") == "img"
    assert "40 reads" in (root.findtext("desc") or "")
    assert root.get("viewBox", "").startswith("0 0 ") and "width:100%" in root.get("style", "")
    assert root.findtext(".//text[@class='y label']") == "requests"
    assert root.findtext(".//text[@class='x label']") == "request size (bytes)"


def test_nothing_to_draw_gives_none() -> None:
    zero = pd.DataFrame({"request_size": ["0-100"], "reads": [0], "writes": [0]})
    assert size_bars(zero) is None
    assert size_bars(pd.DataFrame(columns=["request_size", "reads", "writes"])) is None
    one = pd.DataFrame({"rank": [0], "read_time_s": 1.0, "write_time_s": 0.0, "meta_time_s": 0.0})
    assert rank_time_bars(one) is None
    assert ost_bars(pd.DataFrame(columns=["ost", "bytes", "seconds"])) is None
    assert dxt_timeline(pd.DataFrame(columns=["rank", "operation", "start_s", "end_s"])) is None
    assert io_and_wait(synthetic_run(10, ranks=2)) is None  # no APMPI


def test_a_few_ranks_are_stacked_bars_one_per_rank_and_layer() -> None:
    seconds = pd.DataFrame(
        {
            "rank": [0, 1, 2],
            "read_time_s": [1.0, 0.0, 3.0],
            "write_time_s": [2.0, 4.0, 0.0],
            "meta_time_s": [0.5, 0.5, 1.0],
        }
    )
    root = parse(rank_time_bars(seconds))
    layers = [series(root, name) for name in ("read", "write", "metadata")]
    assert [len(rects) for rects in layers] == [3, 3, 3]
    y = axis(root, "y")
    below = np.zeros(3)
    for rects, column in zip(layers, ("read_time_s", "write_time_s", "meta_time_s"), strict=True):
        values = seconds[column].to_numpy()
        assert heights(rects) == pytest.approx(y(0) - y(values), abs=0.02)  # in proportion
        bottoms = [float(r.get("y", "nan")) + float(r.get("height", "nan")) for r in rects]
        assert bottoms == pytest.approx(y(below), abs=0.02)  # on the layer below: stacked
        below = below + values


def test_many_ranks_are_one_outline_per_layer_with_idle_ranks_at_zero() -> None:
    ranks = [r for r in range(RANK_BARS + 100) if r % 7]  # every 7th rank has no records
    seconds = pd.DataFrame(
        {"rank": ranks, "read_time_s": 1.0, "write_time_s": 2.0, "meta_time_s": 0.5}
    )
    root = parse(rank_time_bars(seconds))
    polygons = root.findall(".//polygon")
    assert [p.get("class") for p in polygons] == ["read", "write", "metadata"]
    assert not root.findall(".//rect[title]")  # no bar per rank
    x, y = axis(root, "x"), axis(root, "y")
    corners = [
        [tuple(map(float, point.split(","))) for point in p.get("points", "").split()]
        for p in polygons
    ]
    at_edge = {round(b, 1) for a, b in corners[2] if abs(a - float(x(14.5))) < 0.02}
    # the metadata layer's corners between idle rank 14 and rank 15: 0 s, then 3 s to 3.5 s
    assert at_edge == {round(float(y(v)), 1) for v in (0.0, 3.0, 3.5)}
    assert min(b for _, b in corners[0]) == pytest.approx(float(y(1.0)), abs=0.02)


def test_past_outline_steps_a_step_is_the_busiest_rank_of_its_band() -> None:
    n = 20 * svg_charts.OUTLINE_STEPS
    rng = np.random.default_rng(1)
    seconds = pd.DataFrame(
        {
            "rank": np.arange(n),
            "read_time_s": rng.random(n),
            "write_time_s": rng.random(n),
            "meta_time_s": rng.random(n),
        }
    )
    seconds.loc[12_345, "write_time_s"] = 50.0  # one straggler
    svg = rank_time_bars(seconds)
    root = parse(svg)
    y = axis(root, "y")
    top = root.findall(".//polygon")[2].get("points", "").split()
    assert len(top) <= 4 * svg_charts.OUTLINE_STEPS + 4  # bounded, whatever the ranks
    highest = min(float(p.split(",")[1]) for p in top)
    assert highest == pytest.approx(float(y(seconds.iloc[12_345, 1:].sum())), abs=0.02)
    assert "busiest of 20 ranks" in (root.findtext("desc") or "")
    assert len(svg or "") < 200_000


def test_ranks_far_apart_cost_outline_steps_not_the_span() -> None:
    """A hostile log's rank of a billion beside 300 real ones: the outline visits the ranks
    given, never an array as long as the span."""
    ranks = [*range(300), 10**9]
    seconds = pd.DataFrame(
        {"rank": ranks, "read_time_s": 1.0, "write_time_s": 0.0, "meta_time_s": 0.0}
    )
    root = parse(rank_time_bars(seconds))
    for polygon in root.findall(".//polygon"):
        assert len(polygon.get("points", "").split()) <= 4 * svg_charts.OUTLINE_STEPS + 4


def test_the_ost_panels_have_a_bar_per_ost_and_thin_their_labels() -> None:
    osts = pd.DataFrame({"ost": [3, 7, 11], "bytes": [2e9, 0, 1e9], "seconds": [1.0, 4.0, 2.0]})
    root = parse(ost_bars(osts))
    data, time = series(root, "bytes"), series(root, "seconds")
    assert len(data) == len(time) == 3
    assert heights(data) == pytest.approx(
        float(axis(root, "y", 0)(0)) - axis(root, "y", 0)([2, 0, 1]), abs=0.02
    )
    assert heights(time) == pytest.approx(
        float(axis(root, "y", 1)(0)) - axis(root, "y", 1)([1, 4, 2]), abs=0.02
    )
    assert [t.text for t in root.findall(".//g[@class='x ticks']/text")] == ["3", "7", "11"]
    many = pd.DataFrame({"ost": range(45), "bytes": 1e9, "seconds": 1.0})
    root = parse(ost_bars(many))
    assert len(series(root, "bytes")) == 45
    every = ost_label_step(45)
    assert 45 > OST_LABELS and every == 3
    shown = [t.text for t in root.findall(".//g[@class='x ticks']/text")]
    assert shown == [str(i) for i in range(0, 45, every)]


def path_segments(d: str) -> list[tuple[float, float, float]]:
    """(y, x0, x1) of each horizontal stroke of a path made of M/m moves and h lines."""
    segments, pen_x, pen_y = [], 0.0, 0.0
    for command, args in re.findall(r"([MmhH])([^MmhH]*)", d):
        values = [float(v) for v in args.replace(",", " ").split()]
        if command == "M":
            pen_x, pen_y = values
        elif command == "m":
            pen_x, pen_y = pen_x + values[0], pen_y + values[1]
        else:
            end = pen_x + values[0] if command == "h" else values[0]
            segments.append((pen_y, pen_x, end))
            pen_x = end
    return segments


def strokes(root: ET.Element, operation: str) -> list[tuple[float, float, float]]:
    """(y, x0, x1) of an operation's strokes, y at the row's centre: reads are drawn in the
    upper half of their row, writes in the lower, each half a stroke-width away."""
    stroke = root.find(f".//path[@class='{operation}']")
    assert stroke is not None, operation
    half = float(stroke.get("stroke-width", "nan")) / 2 * (1 if operation == "read" else -1)
    return [(h + half, a, b) for h, a, b in path_segments(stroke.get("d", ""))]


def test_the_timeline_draws_exactly_the_busy_spans() -> None:
    rng = np.random.default_rng(0)
    n = 50_000
    start = np.sort(rng.uniform(0, 100, n))
    dxt = pd.DataFrame(
        {
            "rank": rng.integers(0, 12, n),
            "operation": np.where(rng.random(n) < 0.3, "read", "write"),
            "start_s": start,
            "end_s": start + rng.exponential(0.002, n),
        }
    )
    root = parse(dxt_timeline(dxt))
    x, y = axis(root, "x"), axis(root, "y")
    row_of = lambda h: round(float((y(0) - h) / (y(0) - y(1))))  # noqa: E731
    run_s = float(dxt.end_s.max())
    step_units = float(x(run_s / TIMELINE_BINS) - x(0))
    for operation in ("read", "write"):
        part = dxt[dxt.operation == operation]
        row, begin, stop = busy_spans(
            part["rank"].to_numpy(), part.start_s.to_numpy(), part.end_s.to_numpy(), 12, run_s
        )
        bins = [np.rint(s / run_s * TIMELINE_BINS).astype(int).tolist() for s in (begin, stop)]
        expected = sorted(zip(row.tolist(), *bins, strict=True))
        drawn = strokes(root, operation)
        got = sorted(
            (row_of(h), round(float(a - x(0)) / step_units), round(float(b - x(0)) / step_units))
            for h, a, b in drawn
        )
        assert len(drawn) == len(row) and got == expected
    assert "50,000 requests" in (root.findtext("title") or "")
    assert [t.text for t in root.findall(".//g[@class='legend']/text")] == ["read", "write"]


def test_past_the_row_limit_neighbouring_ranks_share_a_row() -> None:
    ranks = np.arange(2000)
    dxt = pd.DataFrame(
        {"rank": ranks, "operation": "write", "start_s": ranks * 0.01, "end_s": ranks * 0.01 + 1}
    )
    root = parse(dxt_timeline(dxt))
    assert root.findtext(".//text[@class='y label']") == "rank (rows of 5 ranks)"
    y = axis(root, "y")
    rows = {round(float((y(0) - h) / (y(0) - y(5)))) for h, _, _ in strokes(root, "write")}
    assert rows == set(range(400))
    assert root.find(".//path[@class='read']") is None
    assert [t.text for t in root.findall(".//g[@class='legend']/text")] == ["write"]


def test_the_timeline_stays_bounded_for_the_worst_pattern() -> None:
    """400 ranks each busy in every other step: the most spans busy_spans can give."""
    rows, steps = np.meshgrid(np.arange(400), np.arange(0, TIMELINE_BINS, 2), indexing="ij")
    dxt = pd.DataFrame(
        {
            "rank": rows.ravel(),
            "operation": "read",
            "start_s": steps.ravel() + 0.25,
            "end_s": steps.ravel() + 0.5,
        }
    )
    dxt.loc[len(dxt)] = [0, "read", TIMELINE_BINS - 0.5, float(TIMELINE_BINS)]
    svg = dxt_timeline(dxt)
    assert len(strokes(parse(svg), "read")) == 400 * TIMELINE_BINS // 2
    assert len(svg or "") < 14 * 400 * TIMELINE_BINS // 2  # bytes per span, whatever the requests


def test_io_and_wait_has_a_dot_per_rank_where_its_seconds_are() -> None:
    run = synthetic_run(4, ranks=4)
    run = dataclasses.replace(
        run,
        mpi=pd.DataFrame(
            {"rank": [0, 1, 2, 3], "node": "n0", "mpi_s": 50.0, "wait_s": [40.0, 10.0, 5.0, 30.0]}
        ),
    )
    root = parse(io_and_wait(run))
    dots = root.findall(".//g[@class='ranks']/circle")
    assert len(dots) == 4
    x, y = axis(root, "x"), axis(root, "y")
    expected = sorted(
        zip(
            x(rank_io_seconds(run).to_numpy()).tolist(),
            y([40.0, 10.0, 5.0, 30.0]).tolist(),
            strict=True,
        )
    )
    drawn = sorted((float(d.get("cx")), float(d.get("cy"))) for d in dots)
    assert np.abs(np.array(drawn) - np.array(expected)).max() <= svg_charts.DOT_GRID / 2 + 0.01
    assert root.findtext(".//text[@class='y label']") == "MPI_Barrier and MPI_Wait (s)"


def test_hostile_text_is_escaped_and_the_chart_still_parses() -> None:
    histogram = pd.DataFrame({"request_size": [HOSTILE, "1K"], "reads": [1, 2], "writes": [0, 1]})
    svg = size_bars(histogram, title=HOSTILE)
    assert svg is not None and "<script" not in svg and "</svg>" not in svg[:-6]
    root = parse(svg)
    clean = HOSTILE.replace("\x1b", "\ufffd")  # XML has no ESC: replaced, the rest kept
    assert root.findtext("title") == clean and root.get("aria-label") == clean
    assert root.find(".//g[@class='x ticks']/text").text == clean
    assert not root.findall(".//script")


@pytest.mark.needs("darshan")
@pytest.mark.parametrize(
    "log, charts",
    [
        (
            "mpi_io_test_with_dxt/treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan",
            3,
        ),
        ("e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan", 4),
    ],
)
def test_the_page_of_a_corpus_log_has_its_charts_and_never_imports_matplotlib(
    tmp_path, log, charts
) -> None:
    """In a fresh interpreter, as `diagnose LOG --html` runs: the page's charts are SVG and
    matplotlib is never imported (its import alone cost more than a small log's report)."""
    page = tmp_path / "report.html"
    script = (
        "import sys\n"
        "from iolab.cli import main\n"
        f"code = main(['diagnose', {str(LOGS / log)!r}, '--html', {str(page)!r}])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    text = page.read_text(encoding="utf-8")
    svgs = re.findall(r"<svg .*?</svg>", text, re.S)
    assert len(svgs) == text.count("<svg") == charts
    for svg in svgs:
        parse(svg)
    assert "<img" not in text and "data:image" not in text and "<script" not in text
    assert "http://" not in text and "https://" not in text
