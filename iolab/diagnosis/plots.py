"""The plots that show a diagnosis: request sizes, time per rank, bytes and time per OST, and
the DXT timeline. Each takes a tidy frame and returns a matplotlib Figure (None when the
frame has nothing to draw), for the HTML report and the notebooks alike."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg", force=False)
import matplotlib.pyplot as plt  # noqa: E402  (after the backend choice)
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from iolab.diagnosis.facts import Run  # noqa: E402
from iolab.diagnosis.rules import rank_io_seconds  # noqa: E402

READ, WRITE, META = "#1b9e77", "#d95f02", "#7570b3"


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
    for column, colour, label in (
        ("read_time_s", READ, "read"),
        ("write_time_s", WRITE, "write"),
        ("meta_time_s", META, "metadata"),
    ):
        ax.bar(
            seconds["rank"], seconds[column], bottom=bottom, color=colour, label=label, width=1.0
        )
        bottom += seconds[column]
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
    if len(osts) > 20:
        bottom.tick_params(axis="x", labelrotation=90, labelsize=6)
    plt.close(figure)
    return figure


def dxt_timeline(dxt: pd.DataFrame, max_requests: int = 200_000) -> Figure | None:
    """Each traced request as a line from its start to its end, one row per rank (DXT)."""
    if dxt.empty:
        return None
    shown = dxt if len(dxt) <= max_requests else dxt.sample(max_requests, random_state=0)
    figure, ax = plt.subplots(figsize=(7, 3))
    for operation, colour in (("read", READ), ("write", WRITE)):
        part = shown[shown.operation == operation]
        if len(part):
            ax.hlines(
                part["rank"], part.start_s, part.end_s, colors=colour, label=operation, linewidth=4
            )
    ax.set_xlabel("time since the job started (s)")
    ax.set_ylabel("rank")
    title = "DXT timeline"
    ax.set_title(
        title if len(shown) == len(dxt) else f"{title} ({len(shown):,} of {len(dxt):,} requests)"
    )
    ax.legend()
    plt.close(figure)
    return figure
