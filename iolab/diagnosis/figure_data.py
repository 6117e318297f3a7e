"""What the report's figures show, as numbers and without matplotlib: their colours, the
seconds per rank, and the DXT requests merged into busy spans, which svg_charts draws (the
HTML page must not pay matplotlib's import)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from iolab.diagnosis.facts import Run

READ, WRITE, META = "#1b9e77", "#d95f02", "#7570b3"
RANK_BARS = 256  # past this many ranks, a bar each costs more to draw than a reader can see
OST_LABELS = 20  # past this many OSTs, every k-th is labelled
TIMELINE_BINS = 1400  # time steps per row: finer than the widest chart (640 px) can show
TIMELINE_ROWS = 400  # past this many ranks, neighbouring ranks share a row


def rank_seconds(run: Run) -> pd.DataFrame:
    """Seconds per rank in reads, writes and metadata on the application's per-rank POSIX
    records (shared records cannot be split by rank: Darshan keeps only their extremes)."""
    posix = run.data("POSIX")
    own = posix[posix["rank"] >= 0]
    frame = own.groupby("rank")[["read_time_s", "write_time_s", "meta_time_s"]].sum()
    return frame.reset_index().astype({"rank": "int64"})


def ost_label_step(count: int) -> int:
    """Every how many OSTs one is labelled: each up to OST_LABELS, then about OST_LABELS in
    all (labels of a thousand OSTs would overlap into a black band)."""
    return max(1, -(-count // OST_LABELS))


def busy_spans(
    rows: np.ndarray, start_s: np.ndarray, end_s: np.ndarray, n_rows: int, run_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, start_s, end_s) of the time spans in which each row had a request in flight,
    at TIMELINE_BINS steps over `run_s`: a million requests become as many lines as the
    figure can show. A request shorter than a step still marks the step it falls in."""
    step = run_s / TIMELINE_BINS
    first = np.clip((start_s / step).astype(np.int64), 0, TIMELINE_BINS - 1)
    last = np.clip((end_s / step).astype(np.int64), first, TIMELINE_BINS - 1)
    edges = np.zeros((n_rows, TIMELINE_BINS + 1), dtype=np.int64)
    np.add.at(edges, (rows, first), 1)
    np.add.at(edges, (rows, last + 1), -1)
    busy = np.cumsum(edges[:, :-1], axis=1) > 0
    padded = np.zeros((n_rows, TIMELINE_BINS + 2), dtype=np.int8)
    padded[:, 1:-1] = busy
    change = np.diff(padded, axis=1)
    begin_row, begin_bin = np.nonzero(change == 1)
    _, stop_bin = np.nonzero(change == -1)  # row-major: the n-th stop closes the n-th begin
    return begin_row, begin_bin * step, stop_bin * step


@dataclass(frozen=True)
class Timeline:
    """A DXT frame's busy spans per operation: row r holds ranks r*band to (r+1)*band - 1."""

    band: int  # ranks per row (1 up to TIMELINE_ROWS ranks)
    n_rows: int
    run_s: float  # the last request's end: the time axis
    spans: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # operation: busy_spans'


def timeline(dxt: pd.DataFrame) -> Timeline:
    """The busy spans of a non-empty DXT frame (columns rank, operation, start_s, end_s), for
    reads and writes apart; past TIMELINE_ROWS ranks, a row is a band of ranks."""
    ranks = dxt["rank"].to_numpy(dtype=np.int64)
    span = max(int(ranks.max()) + 1, 1)
    band = -(-span // TIMELINE_ROWS)  # ranks per row, rounded up
    n_rows = -(-span // band)
    run_s = max(float(dxt["end_s"].max()), 1e-9)
    spans = {}
    for operation in ("read", "write"):
        part = dxt[dxt.operation == operation]
        if len(part):
            spans[operation] = busy_spans(
                part["rank"].to_numpy(dtype=np.int64) // band,
                part["start_s"].to_numpy(dtype=float),
                part["end_s"].to_numpy(dtype=float),
                n_rows,
                run_s,
            )
    return Timeline(band, n_rows, run_s, spans)
