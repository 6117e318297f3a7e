"""The plots that show a diagnosis: request sizes, time per rank, bytes and time per OST, and
the DXT timeline. Each takes a tidy frame and returns a matplotlib Figure (None when the
frame has nothing to draw), for the HTML report and the notebooks alike."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg", force=False)
import matplotlib.pyplot as plt  # noqa: E402  (after the backend choice)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from iolab.diagnosis.facts import Run  # noqa: E402
from iolab.diagnosis.rules import rank_io_seconds  # noqa: E402

READ, WRITE, META = "#1b9e77", "#d95f02", "#7570b3"
RANK_BARS = 256  # past this many ranks, a bar each costs more to draw than a reader can see
OST_LABELS = 20  # past this many OSTs, every k-th is labelled


def rank_seconds(run: Run) -> pd.DataFrame:
    """Seconds per rank in reads, writes and metadata on the application's per-rank POSIX
    records (shared records cannot be split by rank: Darshan keeps only their extremes)."""
    posix = run.data("POSIX")
    own = posix[posix["rank"] >= 0]
    frame = own.groupby("rank")[["read_time_s", "write_time_s", "meta_time_s"]].sum()
    return frame.reset_index().astype({"rank": "int64"})


def size_bars(histogram: pd.DataFrame, title: str = "Request sizes") -> Figure | None:
    """Reads and writes per request-size bin (columns request_size, reads, writes)."""
    if histogram.empty or not (histogram.reads.sum() + histogram.writes.sum()):
        return None
    figure, ax = plt.subplots(figsize=(7, 3))
    positions = range(len(histogram))
    ax.bar([p - 0.2 for p in positions], histogram.reads, width=0.4, color=READ, label="reads")
    ax.bar([p + 0.2 for p in positions], histogram.writes, width=0.4, color=WRITE, label="writes")
    ax.set_xticks(list(positions), histogram.request_size, rotation=30)
    ax.set_xlabel("request size (bytes)")
    ax.set_ylabel("requests")
    ax.set_title(title)
    ax.legend()
    plt.close(figure)
    return figure


def rank_time_bars(seconds: pd.DataFrame) -> Figure | None:
    """Stacked seconds per rank: a straggler or an idle rank shows at a glance."""
    if len(seconds) < 2:
        return None
    figure, ax = plt.subplots(figsize=(7, 3))
    bottom = pd.Series(0.0, index=seconds.index)
    many = len(seconds) > RANK_BARS
    if many:  # one filled outline per layer instead of a bar per rank: same picture, faster
        ranks = range(int(seconds["rank"].min()), int(seconds["rank"].max()) + 1)
        seconds = seconds.set_index("rank").reindex(ranks, fill_value=0.0).reset_index()
        bottom = pd.Series(0.0, index=seconds.index)
        edges = np.arange(ranks.start, ranks.stop + 1) - 0.5  # a rank without records is 0 s
    for column, colour, label in (
        ("read_time_s", READ, "read"),
        ("write_time_s", WRITE, "write"),
        ("meta_time_s", META, "metadata"),
    ):
        top = bottom + seconds[column]
        if many:
            ax.stairs(top, edges, baseline=bottom, fill=True, color=colour, label=label)
        else:
            ax.bar(
                seconds["rank"], seconds[column], bottom=bottom, color=colour, label=label, width=1
            )
        bottom = top
    ax.set_xlabel("rank")
    ax.set_ylabel("time in I/O calls (s)")
    ax.set_title("Time per rank (per-rank records)")
    ax.legend()
    plt.close(figure)
    return figure


def io_and_wait(run: Run) -> Figure | None:
    """Per rank, its I/O seconds against its seconds waiting in MPI (APMPI): ranks that wait
    for the I/O ranks line up from top left to bottom right."""
    if len(run.mpi) < 2:
        return None
    figure, ax = plt.subplots(figsize=(7, 3))
    ax.scatter(
        rank_io_seconds(run).to_numpy(), run.mpi.wait_s.to_numpy(), s=12, color=WRITE, alpha=0.6
    )
    ax.set_xlabel("time in POSIX and STDIO calls (s)")
    ax.set_ylabel("time in MPI_Barrier and MPI_Wait (s)")
    ax.set_title("I/O and MPI waiting, one dot per rank (APMPI)")
    plt.close(figure)
    return figure


def ost_bars(osts: pd.DataFrame) -> Figure | None:
    """Bytes and transfer seconds per Lustre OST (columns ost, bytes, seconds)."""
    if osts.empty:
        return None
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7, 4), sharex=True)
    labels = osts.ost.astype(str)
    top.bar(labels, osts.bytes / 1e9, color=WRITE)
    top.set_ylabel("data (GB)")
    top.set_title("Bytes and time per OST")
    bottom.bar(labels, osts.seconds, color=META)
    bottom.set_ylabel("transfer time (s)")
    bottom.set_xlabel("OST")
    if len(osts) > OST_LABELS:
        every = -(-len(osts) // OST_LABELS)
        bottom.set_xticks(range(0, len(osts), every), labels.iloc[::every])
        bottom.tick_params(axis="x", labelrotation=90, labelsize=6)
    plt.close(figure)
    return figure


TIMELINE_BINS = 1400  # twice the columns of pixels the 7-inch figure gets at 100 dpi
TIMELINE_ROWS = 400  # past this many ranks, neighbouring ranks share a row


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


def dxt_timeline(dxt: pd.DataFrame) -> Figure | None:
    """When each rank had a traced read or write in flight (DXT), one row per rank.

    Requests are merged at the figure's resolution (`busy_spans`), so the time to draw does
    not grow with the number of requests; past TIMELINE_ROWS ranks, a row is a band of ranks.
    """
    if dxt.empty:
        return None
    ranks = dxt["rank"].to_numpy(dtype=np.int64)
    span = max(int(ranks.max()) + 1, 1)
    band = -(-span // TIMELINE_ROWS)  # ranks per row, rounded up
    n_rows = -(-span // band)
    run_s = max(float(dxt["end_s"].max()), 1e-9)
    figure, ax = plt.subplots(figsize=(7, 3))
    for operation, colour in (("read", READ), ("write", WRITE)):
        part = dxt[dxt.operation == operation]
        if len(part):
            row, begin, stop = busy_spans(
                part["rank"].to_numpy(dtype=np.int64) // band,
                part["start_s"].to_numpy(dtype=float),
                part["end_s"].to_numpy(dtype=float),
                n_rows,
                run_s,
            )
            ax.hlines(row * band, begin, stop, colors=colour, label=operation, linewidth=4)
    ax.set_xlabel("time since the job started (s)")
    ax.set_ylabel("rank" if band == 1 else f"rank (rows of {band} ranks)")
    ax.set_title(f"DXT timeline: {len(dxt):,} requests, when each rank had one in flight")
    ax.legend()
    plt.close(figure)
    return figure
