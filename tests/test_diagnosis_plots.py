"""The report's figures stay cheap to draw however large the log (issue 36, item 7): the DXT
timeline merges requests at the figure's resolution, the rank chart becomes one outline per
layer past RANK_BARS ranks, and the DXT frame is read once, without PyDarshan's deep copy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection
from matplotlib.patches import StepPatch

from iolab.diagnosis import plots
from iolab.diagnosis.plots import TIMELINE_BINS, busy_spans, dxt_timeline, rank_time_bars

LOGS = Path(__file__).parent / "fixtures" / "darshan"
PARTIAL_DXT = LOGS / "partial_data_dxt" / "partial_data_dxt.darshan"


def spans(rows, starts, ends, n_rows=2, run_s=float(TIMELINE_BINS)):
    """busy_spans as a list of (row, start, end), one step per second of a TIMELINE_BINS s run."""
    row, begin, stop = busy_spans(
        np.array(rows), np.array(starts, dtype=float), np.array(ends, dtype=float), n_rows, run_s
    )
    return list(zip(row.tolist(), begin.tolist(), stop.tolist(), strict=True))


def test_overlapping_requests_on_a_row_become_one_span() -> None:
    assert spans([0, 0], [10.2, 11.5], [12.7, 20.1]) == [(0, 10.0, 21.0)]


def test_a_gap_of_a_whole_step_keeps_two_spans_and_rows_stay_apart() -> None:
    assert spans([0, 0, 1], [1.0, 5.0, 1.0], [2.5, 6.0, 2.5]) == [
        (0, 1.0, 3.0),
        (0, 5.0, 7.0),
        (1, 1.0, 3.0),
    ]


def test_a_request_shorter_than_a_step_still_marks_its_step() -> None:
    assert spans([1], [7.25], [7.26]) == [(1, 7.0, 8.0)]


def test_a_request_ending_with_the_run_stays_inside_the_figure() -> None:
    assert spans([0], [TIMELINE_BINS - 0.5], [TIMELINE_BINS]) == [
        (0, TIMELINE_BINS - 1.0, float(TIMELINE_BINS))
    ]


def test_the_timeline_draws_spans_not_requests() -> None:
    rng = np.random.default_rng(0)
    n = 300_000
    start = np.sort(rng.uniform(0, 100, n))
    dxt = pd.DataFrame(
        {
            "rank": rng.integers(0, 8, n),
            "operation": np.where(rng.random(n) < 0.5, "read", "write"),
            "start_s": start,
            "end_s": start + 1e-4,
        }
    )
    figure = dxt_timeline(dxt)
    assert figure is not None
    lines = [c for c in figure.axes[0].collections if isinstance(c, LineCollection)]
    drawn = sum(len(c.get_segments()) for c in lines)
    assert 0 < drawn <= 2 * 8 * TIMELINE_BINS // 2  # two operations, 8 rows, alternate steps
    assert "300,000 requests" in figure.axes[0].get_title()


def test_past_the_row_limit_neighbouring_ranks_share_a_row() -> None:
    ranks = np.arange(2000)
    dxt = pd.DataFrame(
        {"rank": ranks, "operation": "write", "start_s": ranks * 0.01, "end_s": ranks * 0.01 + 1}
    )
    figure = dxt_timeline(dxt)
    assert figure is not None
    ax = figure.axes[0]
    assert ax.get_ylabel() == "rank (rows of 5 ranks)"
    rows = {float(y) for c in ax.collections for seg in c.get_segments() for y in seg[:, 1]}
    assert rows == {float(5 * r) for r in range(400)}


def test_many_ranks_are_drawn_as_one_outline_per_layer_with_idle_ranks_at_zero() -> None:
    ranks = [r for r in range(plots.RANK_BARS + 100) if r % 7]  # every 7th rank has no records
    seconds = pd.DataFrame(
        {
            "rank": ranks,
            "read_time_s": [1.0] * len(ranks),
            "write_time_s": [2.0] * len(ranks),
            "meta_time_s": [0.5] * len(ranks),
        }
    )
    figure = rank_time_bars(seconds)
    assert figure is not None
    steps = [p for p in figure.axes[0].patches if isinstance(p, StepPatch)]
    assert len(steps) == 3
    top = steps[-1].get_data()
    first = ranks[0]
    heights = dict(zip(range(first, first + len(top.values)), top.values.tolist(), strict=True))
    assert heights[14] == 0.0 and heights[15] == 3.5  # stacked: 1 + 2 + 0.5 s
    assert list(top.edges[:2]) == [first - 0.5, first + 0.5]


def test_a_few_ranks_keep_a_bar_each() -> None:
    seconds = pd.DataFrame(
        {"rank": [0, 1, 2], "read_time_s": 1.0, "write_time_s": 0.0, "meta_time_s": 0.0}
    )
    figure = rank_time_bars(seconds)
    assert figure is not None
    assert len(figure.axes[0].patches) == 9  # three layers, a bar per rank each


@pytest.mark.needs("darshan")
def test_the_dxt_frame_is_read_once_and_matches_pydarshans_own_frames() -> None:
    from iolab.diagnosis import darshan

    log = darshan.read_log(PARTIAL_DXT)
    frame = log.dxt_frame()
    assert log.dxt_frame() is frame
    expected = [
        len(record[f"{op}_segments"])
        for module in ("DXT_POSIX", "DXT_MPIIO")
        for record in log.report.records[module].to_df()
        for op in ("read", "write")
    ]
    assert len(frame) == sum(expected) == 131_065
    posix = log.report.records["DXT_POSIX"].to_df()[0]["read_segments"]
    mine = frame[(frame.layer == "POSIX") & (frame.operation == "read")]
    assert mine["start_s"].tolist() == posix["start_time"].tolist()
    assert mine["length"].tolist() == posix["length"].tolist()
