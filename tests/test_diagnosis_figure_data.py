"""The numbers the report's charts show stay cheap however large the log (issue 36, item 7):
the DXT timeline merges requests at the figure's resolution (busy_spans), and the DXT frame
is read once, without PyDarshan's deep copy. The charts themselves: test_diagnosis_svg.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iolab.diagnosis.figure_data import TIMELINE_BINS, busy_spans

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
