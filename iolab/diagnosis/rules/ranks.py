"""The ranks against one another: unequal shares of a file, equal work in unequal time, and
ranks with little I/O waiting in MPI for the ranks with much. The job waits for its slowest
rank, so a spread between ranks is time lost by all the others."""

from __future__ import annotations

import numpy as np
import pandas as pd

from iolab.diagnosis.facts import Run
from iolab.diagnosis.rules import storage
from iolab.diagnosis.rules.base import (
    TOP_FILES,
    Finding,
    by_side,
    layer_records,
    minor_line,
    top_paths,
)

#: Ranks differing by more than this share of the larger (Drishti: imbalance_size 30 %,
#: imbalance_stragglers 15 %); the lab asks both of a file's bytes and of its time.
BYTES_IMBALANCE = 0.30
TIME_IMBALANCE = 0.15
#: The lab's own: below this a file's imbalance is noise whatever its share (544 bytes per
#: rank differ by 100 % and cost nothing).
IMBALANCE_MIN_BYTES = 1024**2
#: The lab's own: a file's imbalance costing under this share of the minor line is noise.
NOISE_SHARE = 0.1
#: What an imbalance of bytes costs: what an even split over the file's ranks would save.
IMBALANCE_FORMULA = (
    "the slowest rank's seconds on the file less the mean over its ranks (a shared record: "
    "the file's seconds over all the job's ranks)"
)
#: What ranks slow on equal work cost: the wait beyond the ranks that did the same work. Ranks
#: that only opened the file (ROMIO opens it on every rank) would pull the mean down.
WAIT_FORMULA = (
    "the slowest rank's seconds on the file less the mean over the ranks that moved its bytes "
    "(a shared record: the file's seconds over (Σb)²/Σb² ranks, from Darshan's variance of the "
    "ranks' bytes b: the number of ranks that moved it, where they moved equal shares)"
)


def active_ranks(total_bytes: pd.Series, variance: pd.Series, ranks: int) -> pd.Series:
    """How many of a shared record's `ranks` moved its bytes, from Darshan's population
    variance of the ranks' bytes: (Σb)²/Σb², with Σb² = ranks·(variance + mean²). It is exact
    when the ranks that moved anything moved equal shares, and fewer otherwise (one rank with
    everything counts 1). Where the variance is missing or impossible, or nothing was moved:
    all `ranks`."""
    total = total_bytes.astype("float64")
    mean = total / max(ranks, 1)
    squares = ranks * (variance.astype("float64") + mean**2)
    usable = (total > 0) & (variance >= 0) & (squares > 0)
    counted = (total**2 / squares.where(usable)).clip(lower=1, upper=max(ranks, 1))
    return counted.fillna(float(max(ranks, 1)))


def _rank_spread(run: Run, layer: str) -> pd.DataFrame:
    """Per file of one layer: how many ranks, the most and least bytes a rank moved, the
    slowest rank's seconds, the mean over all its ranks and over those that moved bytes, and
    which ranks (per-rank records give every rank; a shared record Darshan's fastest and
    slowest). At MPI-IO only files without a collective call count: in a collective call the
    aggregators do the file system's work for the others, so their longer time is their
    role, not a wait."""
    records = layer_records(run, layer)
    if layer == "MPI-IO":
        records = records[records.collective == 0]
    if records.empty:
        return pd.DataFrame()
    moved = records.bytes_read + records.bytes_written
    seconds = records.read_time_s + records.write_time_s + records.meta_time_s
    # Files several ranks wrote with per-rank records: extremes by rank.
    own = records[records["rank"] >= 0].assign(
        moved=moved, seconds=seconds, moving=(moved > 0).astype("int64")
    )
    # Per file with per-rank records of several ranks; most logs have none (one rank, or
    # shared records), and the group-bys below cost ~10 ms each even on nothing.
    per_file = pd.DataFrame()
    if own.path.duplicated().any():
        per_file = own.groupby("path").agg(
            ranks=("rank", "nunique"),
            active_ranks=("moving", "sum"),
            most_bytes=("moved", "max"),
            least_bytes=("moved", "min"),
            slowest_s=("seconds", "max"),
            mean_s=("seconds", "mean"),
        )
        # The ranks that moved the file's bytes; a file nobody moved bytes of: all its ranks.
        active_mean = own.seconds.where(own.moved > 0).groupby(own.path).mean()
        per_file["active_mean_s"] = active_mean.reindex(per_file.index).fillna(per_file.mean_s)
        per_file["active_ranks"] = per_file.active_ranks.where(
            per_file.active_ranks > 0, per_file.ranks
        )
        by_path = own.groupby("path")
        per_file["heavy_rank"] = own.loc[by_path.moved.idxmax()].set_index("path")["rank"]
        per_file["slow_rank"] = own.loc[by_path.seconds.idxmax()].set_index("path")["rank"]
        per_file["fast_bytes"] = own.loc[by_path.seconds.idxmin()].set_index("path")["moved"]
        per_file["slow_bytes"] = own.loc[by_path.seconds.idxmax()].set_index("path")["moved"]
        per_file["record"] = by_path.seconds.idxmax()
        per_file = per_file[per_file.ranks > 1]
    # Shared records: Darshan keeps the fastest and slowest rank, their bytes and seconds,
    # and the variance of the ranks' bytes.
    shared = records[records["rank"] < 0]
    extremes = shared[["fastest_rank_bytes", "slowest_rank_bytes"]]
    movers = active_ranks(moved[shared.index], shared.rank_bytes_variance, run.processes)
    shared_file = pd.DataFrame(
        {
            "ranks": run.processes,
            "active_ranks": movers.round().to_numpy(),
            "most_bytes": extremes.max(axis=1).to_numpy(),
            "least_bytes": extremes.min(axis=1).to_numpy(),
            "slowest_s": shared.slowest_rank_s.to_numpy(),
            "mean_s": (seconds[shared.index] / max(run.processes, 1)).to_numpy(),
            "active_mean_s": (seconds[shared.index] / movers).to_numpy(),
            "heavy_rank": np.where(
                shared.slowest_rank_bytes >= shared.fastest_rank_bytes,
                shared.slowest_rank,
                shared.fastest_rank,
            ),
            "slow_rank": shared.slowest_rank.to_numpy(),
            "fast_bytes": shared.fastest_rank_bytes.to_numpy(),
            "slow_bytes": shared.slowest_rank_bytes.to_numpy(),
            "record": shared.index.to_numpy(),
        },
        index=shared.path.to_numpy(),
    )
    files = [frame for frame in (per_file, shared_file) if len(frame)]
    if not files:
        return pd.DataFrame()
    files = pd.concat(files).dropna(subset=["most_bytes", "slowest_s"])
    files["cost_s"] = (files.slowest_s - files.mean_s).clip(lower=0)
    files["wait_s"] = (files.slowest_s - files.active_mean_s).clip(lower=0)
    return files.assign(layer=layer)


def _mpiio_shares(run: Run, path: str) -> tuple[float, float] | None:
    """The least and most bytes a rank moved through MPI-IO on `path`: from a shared
    record's extremes, or from per-rank records when every rank has one (a rank without a
    record moved nothing there); None where the log cannot tell."""
    mpiio = layer_records(run, "MPI-IO")
    mine = mpiio[mpiio.path == path]
    shared = mine[mine["rank"] < 0]
    if len(shared):
        low, high = sorted(shared[["fastest_rank_bytes", "slowest_rank_bytes"]].iloc[0])
        return float(low), float(high)
    moved = (mine.bytes_read + mine.bytes_written).groupby(mine["rank"]).sum()
    if len(moved) < max(run.processes, 2):
        return None
    return float(moved.min()), float(moved.max())


def _slowest_record(run: Run, file: pd.Series, cost: str) -> pd.DataFrame:
    """The cost of one file's spread, claimed on its slowest rank's record (a shared
    record: the file's one record), over its kinds of call as their times go."""
    record = run.records.loc[[int(file["record"])]]
    return pd.DataFrame(by_side(record, pd.Series(float(file[cost]), index=record.index)))


def rank_imbalance(run: Run) -> list[Finding]:
    """Per file: ranks that moved different bytes (the application's split) or equal bytes
    in different time (the file system or the striping). Bytes are judged at POSIX, where
    they reach the file system; time at POSIX and at independent MPI-IO, whichever shows
    more (an MPI-IO call's waits for locks and other ranks never reach POSIX)."""
    posix_files = _rank_spread(run, "POSIX")
    layers = [frame for frame in (posix_files, _rank_spread(run, "MPI-IO")) if len(frame)]
    if not layers:
        return []
    files = pd.concat(layers)
    # Below a tenth of the minor line a file's spread is noise, not even worth listing.
    noise = NOISE_SHARE * minor_line(run)
    posix = files[(files.layer == "POSIX") & (files.cost_s >= noise)]
    byte_spread = (
        (posix.most_bytes - posix.least_bytes) / posix.most_bytes.where(posix.most_bytes > 0)
    ).fillna(0)
    by_bytes = posix[(byte_spread > BYTES_IMBALANCE) & (posix.most_bytes >= IMBALANCE_MIN_BYTES)]
    # Equal work in unequal time: found against the mean over the file's ranks, charged
    # against the mean over those that moved its bytes (what evening out would save).
    timed = files[files.wait_s >= noise]
    time_spread = (
        (timed.slowest_s - timed.mean_s) / timed.slowest_s.where(timed.slowest_s > 0)
    ).fillna(0)
    # Equal work: the slowest and fastest ranks moved about the same, or so little that the
    # bytes cannot explain the seconds.
    equal = (
        (timed.slow_bytes - timed.fast_bytes).abs()
        <= BYTES_IMBALANCE * timed[["slow_bytes", "fast_bytes"]].max(axis=1)
    ) | (timed.most_bytes < IMBALANCE_MIN_BYTES)
    by_time = timed[(time_spread > TIME_IMBALANCE) & equal & ~timed.index.isin(by_bytes.index)]
    # A file once, at the layer where its ranks' spread costs most.
    by_time = by_time.sort_values("wait_s", ascending=False, kind="stable")
    by_time = by_time[~by_time.index.duplicated()]
    found = []
    if len(by_bytes):
        worst = by_bytes.sort_values("cost_s", ascending=False).iloc[0]
        evidence = (
            f"on {worst.name} ({int(worst.ranks):,} ranks) one rank moved "
            f"{worst.most_bytes:,.0f} bytes and another {worst.least_bytes:,.0f}; the "
            f"slowest rank spent {worst.slowest_s:,.1f} s on it against "
            f"{worst.mean_s:,.1f} s on average"
            + (f" ({len(by_bytes)} files like this)" if len(by_bytes) > 1 else "")
        )
        advice = (
            "split the data evenly (equal blocks per rank) or let collective MPI-IO "
            "spread it over aggregators: the job waits for the rank with the most"
        )
        shares = _mpiio_shares(run, str(worst.name))
        if shares is not None:
            low, high = shares
            if high and (high - low) <= BYTES_IMBALANCE * high:
                evidence += (
                    f"; at the MPI-IO layer the ranks' shares are even ({low:,.0f} to "
                    f"{high:,.0f} bytes), so the split below is collective I/O's"
                )
                kind = storage.kind_of(run, str(worst.name))
                advice = (
                    "the application splits evenly; ROMIO gave the POSIX work to few "
                    f"aggregators, {storage.AGGREGATORS.get(kind, storage.AGGREGATORS[''])}"
                )
        found.append(
            Finding(
                "rank-imbalance-bytes",
                "ranks given unequal shares of a file",
                float(by_bytes.cost_s.max()),
                evidence,
                advice,
                files=list(by_bytes.sort_values("cost_s", ascending=False).index[:TOP_FILES]),
                ranks=[int(worst.heavy_rank)],
                counters={
                    "bytes of the heaviest rank": float(worst.most_bytes),
                    "bytes of the lightest rank": float(worst.least_bytes),
                    "seconds of the slowest rank": float(worst.slowest_s),
                },
                cost_formula=IMBALANCE_FORMULA,
                claims=_slowest_record(run, worst, "cost_s"),
            )
        )
    if len(by_time):
        worst = by_time.iloc[0]
        at_posix = worst.layer == "POSIX"
        found.append(
            Finding(
                "rank-imbalance-time",
                "ranks slow on equal work",
                float(worst.wait_s),
                f"on {worst.name} ({int(worst.ranks):,} ranks) ranks moved about the same bytes "
                f"but the slowest spent {worst.slowest_s:,.1f} s in {worst.layer} calls against "
                f"{worst.active_mean_s:,.1f} s on average over the "
                + (
                    f"{int(worst.active_ranks):,} ranks that moved its bytes"
                    if worst.active_ranks < worst.ranks
                    else "ranks"
                ),
                "equal work taking unequal time points at the file system: "
                + storage.SLOW_SERVER_CHECK[storage.kind_of(run, str(worst.name))]
                if at_posix
                else "equal work taking unequal time inside MPI-IO calls: the ranks waited there, "
                "for locks or for one another, in turn (see the MPI-IO waits finding if it is "
                "raised); collective calls on a parallel file system even the turns out",
                files=list(by_time.index[:TOP_FILES]),
                ranks=[int(worst.slow_rank)],
                counters={
                    f"{'POSIX' if at_posix else 'MPIIO'}_F_SLOWEST_RANK_TIME": float(
                        worst.slowest_s
                    ),
                    "mean seconds per rank that moved bytes": float(worst.active_mean_s),
                    "ranks that moved bytes": float(worst.active_ranks),
                },
                cost_formula=WAIT_FORMULA,
                claims=_slowest_record(run, worst, "wait_s"),
            )
        )
    return found


#: ranks-wait-for-io: across ranks, MPI waiting must fall this strongly as I/O time rises
#: (Pearson's r), and the I/O ranks are those with at least this share of the busiest's I/O.
WAIT_CORRELATION = -0.8
IO_RANK_SHARE = 0.5
#: What to change where the other ranks wait for the I/O ranks.
WAIT_FOR_IO_FIX = (
    "the job runs at the pace of the ranks doing its I/O, so the findings on their files are "
    "where its time goes; then spread the I/O over more ranks (more MPI-IO aggregators: the "
    "cb_nodes hint; more writers) or take it off the others' path (dedicated I/O ranks, or "
    "asynchronous I/O such as HDF5's asynchronous VOL connector)"
)


def rank_io_seconds(run: Run) -> pd.Series:
    """Per rank of run.mpi, its seconds in POSIX and STDIO calls on the application's files,
    from its own records (0 for a rank with none)."""
    data = run.data()
    data = data[data.layer.isin(("POSIX", "STDIO")) & (data["rank"] >= 0)]
    seconds = data.read_time_s + data.write_time_s + data.meta_time_s
    return (
        seconds.groupby(data["rank"].astype("int64"))
        .sum()
        .reindex(run.mpi["rank"].astype("int64"), fill_value=0.0)
    )


def ranks_wait_for_io(run: Run) -> list[Finding]:
    """Ranks with little I/O waiting in MPI for the ranks with much (APMPI's per-rank MPI time).

    Per rank: its seconds in POSIX and STDIO calls on the application's files (the layer the
    data meets the file system; MPI-IO's time would count it twice) and its seconds in
    MPI_Barrier and the MPI_Wait family. When, across ranks, the waiting falls as the I/O
    rises (r at most WAIT_CORRELATION), the ranks with little I/O were waiting for the ranks
    with much; the cost is how much longer the median such rank waited than the median I/O
    rank. Only per-rank records can be split by rank: if shared records hold most of the
    I/O time, the rule says nothing."""
    if len(run.mpi) < 4:
        return []
    data = run.data()
    data = data[data.layer.isin(("POSIX", "STDIO"))]
    seconds = data.read_time_s + data.write_time_s + data.meta_time_s
    own = data["rank"] >= 0
    if seconds[own].sum() <= seconds[~own].sum():
        return []
    ranks = run.mpi.set_index("rank")
    io_s = rank_io_seconds(run)
    if io_s.max() <= 0 or io_s.std() == 0 or ranks.wait_s.std() == 0:
        return []
    heavy = io_s >= IO_RANK_SHARE * io_s.max()
    if heavy.all():
        return []
    r = float(np.corrcoef(io_s.to_numpy(), ranks.wait_s.to_numpy())[0, 1])
    others_wait, io_wait = ranks.wait_s[~heavy].median(), ranks.wait_s[heavy].median()
    if r > WAIT_CORRELATION or others_wait <= io_wait:
        return []
    io_ranks = io_s[heavy].sort_values(ascending=False, kind="stable")
    on_io_ranks = data[own & data["rank"].isin(io_ranks.index)]
    nodes = ranks.node[heavy].nunique()
    little = io_s[~heavy].max()
    evidence = (
        f"{int((~heavy).sum())} of {len(ranks)} ranks did "
        + ("no I/O of their own" if little < 0.05 else f"at most {little:,.1f} s of I/O")
        + " and waited a median "
        f"{others_wait:,.0f} s in MPI_Barrier and MPI_Wait calls, against "
        f"{io_wait:,.0f} s for the {int(heavy.sum())} ranks on {nodes} node(s) that "
        f"did the I/O ({io_ranks.median():,.0f} s of POSIX and STDIO time each, median); "
        f"across the ranks, the waiting falls as the I/O time rises (r = {r:.2f}): the "
        "others were waiting for the I/O ranks"
    )
    return [
        Finding(
            "ranks-wait-for-io",
            "ranks waiting in MPI for the ranks doing I/O",
            float(others_wait - io_wait),
            evidence,
            WAIT_FOR_IO_FIX,
            files=top_paths(
                on_io_ranks,
                on_io_ranks.read_time_s + on_io_ranks.write_time_s + on_io_ranks.meta_time_s,
            ),
            ranks=[int(rank) for rank in io_ranks.index[:TOP_FILES]],
            counters={
                "MPI_BARRIER_TOTAL_TIME + MPI_WAIT*_TOTAL_TIME, median of the other ranks": float(
                    others_wait
                ),
                "MPI_BARRIER_TOTAL_TIME + MPI_WAIT*_TOTAL_TIME, median of the I/O ranks": float(
                    io_wait
                ),
                "POSIX_F_*_TIME + STDIO_F_*_TIME, median of the I/O ranks": float(
                    io_ranks.median()
                ),
                "correlation of I/O and MPI waiting across ranks": r,
            },
            cost_formula="the median MPI waiting of the other ranks less that of the I/O ranks",
        )
    ]
