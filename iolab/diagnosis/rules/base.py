"""What every diagnosis rule shares: the Finding, its cost on the busiest rank, the minor
line, Drishti's floor of requests, and the helpers that read a Run's records.

A finding's cost is the time in the calls it concerns, seen from the busiest rank
(`busiest_rank_seconds`): the job waits for that rank, so its seconds are what the run could
at most save. A finding under MINOR_SHARE of the run time or under MINOR_S is kept but
listed as minor: a ten-line test and a sub-second run do not get lectures. One of MAJOR_SHARE
of the run or more is never minor, however short the run: a report must not call a third of
the run "not what makes this run slow".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from iolab.diagnosis.facts import Run

MIN_COUNT = 1000  # Drishti's absolute floor for small, random and independent requests
#: A finding worth less than this share of the run, or less than MINOR_S, is minor.
MINOR_SHARE = 0.01
MINOR_S = 1.0
#: A finding worth at least this share of the run is never minor.
MAJOR_SHARE = 0.10
TOP_FILES = 8  # the files a finding names, the most concerned first


@dataclass
class Finding:
    """One diagnosis: what is wrong, what it costs, where, the proof, and what to do."""

    rule: str  # a stable id: small-reads, rank-imbalance-bytes, slow-ost, ...
    title: str
    cost_s: float  # seconds in the calls concerned, on the busiest rank
    evidence: str
    advice: str
    files: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    osts: list[int] = field(default_factory=list)
    counters: dict[str, float] = field(default_factory=dict)  # the numbers that prove it
    minor: bool = False
    #: How cost_s was reckoned, in words and counters: what the fix would save at most.
    cost_formula: str = ""
    #: Seconds of its own reckoning that other findings charge too, counted under them
    #: (counted_under) and taken off cost_s: the rules.overlaps ledger.
    counted_elsewhere_s: float = 0.0
    counted_under: list[str] = field(default_factory=list)
    #: Per record of Run.records (rows) and kind of call (SIDES, columns), the busiest rank's
    #: seconds the finding holds (base.charged); None where its cost is not seconds in a
    #: file's calls. Never in a report: the overlap ledger reads it.
    claims: pd.DataFrame | None = field(default=None, repr=False, compare=False)


def busiest_parts(records: pd.DataFrame, seconds: pd.Series) -> pd.Series:
    """Per record, the part of `seconds` (one value per record) that falls on its busiest
    rank: all of a per-rank record's. A shared record (rank -1) sums its seconds over all
    ranks; Darshan keeps the slowest rank's total on the file, so its part is `seconds`
    scaled by slowest_rank_s over the record's own total (or, without it, an even share
    over the ranks)."""
    value = np.nan_to_num(seconds.reindex(records.index).to_numpy(dtype="float64"))
    shared = records["rank"].to_numpy() < 0
    if shared.any():
        total = (
            records.read_time_s.to_numpy()
            + records.write_time_s.to_numpy()
            + records.meta_time_s.to_numpy()
        )[shared]
        ranks = max(int(records.attrs.get("processes", 1)), 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.minimum(
                records.slowest_rank_s.to_numpy(dtype="float64")[shared]
                / np.where(total > 0, total, np.nan),
                1.0,
            )
        value[shared] *= np.where(np.isnan(share), 1.0 / ranks, share)
    return pd.Series(value, index=records.index)


def rank_total(ranks: np.ndarray, parts: np.ndarray) -> float:
    """The busiest rank's seconds from per-record parts: per-rank records summed by rank and
    the largest sum taken, every shared record's part added to it."""
    if len(ranks) == 0:
        return 0.0
    per_rank = ranks >= 0
    own = 0.0
    if per_rank.any():  # numpy, not groupby: this runs once per finding, on every log
        _, which = np.unique(ranks[per_rank], return_inverse=True)
        own = float(np.bincount(which, weights=parts[per_rank]).max())
    return own + float(np.sum(parts[~per_rank]))


def busiest_rank_seconds(records: pd.DataFrame, seconds: pd.Series) -> float:
    """The seconds of the busiest rank in the calls concerned (`seconds`, one value per
    record), as busiest_parts and rank_total reckon them."""
    if records.empty:
        return 0.0
    return rank_total(records["rank"].to_numpy(), busiest_parts(records, seconds).to_numpy())


#: The kinds of call a record times apart, as the overlap ledger keeps them: a finding about
#: writes and one about reads never share a second.
SIDES = ("read", "write", "meta", "sync")


def charged(records: pd.DataFrame, **seconds: pd.Series) -> tuple[float, pd.DataFrame]:
    """A finding's cost on the busiest rank, from its seconds by kind of call (read=, write=,
    meta=, sync=; one value per record), and the per-record parts it draws from: its claims,
    which the overlap ledger checks against other findings' on the same calls."""
    if records.empty:
        return 0.0, pd.DataFrame(columns=list(seconds), dtype="float64")
    parts = pd.DataFrame({side: busiest_parts(records, part) for side, part in seconds.items()})
    total = parts.sum(axis=1).to_numpy()
    return rank_total(records["rank"].to_numpy(), total), parts


def by_side(
    records: pd.DataFrame, seconds: pd.Series, sides: tuple[str, ...] = ("read", "write", "meta")
) -> dict[str, pd.Series]:
    """`seconds` (one value per record) split over the record's calls of `sides` in
    proportion to their times: for a cost reckoned on the record's time in all of them."""
    times = pd.DataFrame({side: records[f"{side}_time_s"].fillna(0.0) for side in sides})
    whole = times.sum(axis=1)
    value = seconds.reindex(records.index).fillna(0.0)
    return {
        side: value * (times[side] / whole.where(whole > 0)).fillna(1.0 / len(sides))
        for side in sides
    }


def minor_line(run: Run) -> float:
    """The cost under which a finding is minor: 1 % of the run, and at least a second."""
    return max(MINOR_SHARE * run.run_time_s, MINOR_S)


def is_minor(cost_s: float, run: Run) -> bool:
    """Under the minor line, and under MAJOR_SHARE of the run."""
    large_share = run.run_time_s > 0 and cost_s >= MAJOR_SHARE * run.run_time_s
    return cost_s < minor_line(run) and not large_share


def share_of(part: float, whole: float) -> float:
    """part over whole, 0 for nothing at all: a log without a layer has no share to judge."""
    return part / whole if whole else 0.0


def top_paths(records: pd.DataFrame, weight: pd.Series, n: int = TOP_FILES) -> list[str]:
    """The paths carrying most of `weight`, largest first."""
    per_path = weight.groupby(records["path"]).sum()
    return list(per_path[per_path > 0].sort_values(ascending=False, kind="stable").index[:n])


def proof_names(run: Run, names: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Each proof's name: Darshan's counters for a log, the system calls for a trace."""
    return {key: pair[0] if run.source == "darshan" else pair[1] for key, pair in names.items()}


def layer_records(run: Run, layer: str) -> pd.DataFrame:
    """One layer's records, carrying the run's process count that busiest_rank_seconds
    needs for shared records."""
    frame = run.data(layer)
    frame.attrs["processes"] = run.processes
    return frame


def library_read_backs(run: Run) -> list[str]:
    """Files the application only wrote through MPI-IO (no MPI-IO read) that POSIX read
    anyway: those reads are ROMIO's, reading a block before writing it back (data sieving,
    or collective buffering filling the holes between the ranks' pieces), not the
    program's, so the rules about the program's reads leave them out. Four rules ask;
    it is worked out once per run."""
    return run.once("library_read_backs", _library_read_backs)


def _library_read_backs(run: Run) -> list[str]:
    mpiio = run.data("MPI-IO")
    if mpiio.empty:
        return []
    per_file = mpiio.groupby("path")[["reads", "bytes_read", "writes"]].sum()
    written_only = per_file[
        (per_file.reads == 0) & (per_file.bytes_read == 0) & (per_file.writes > 0)
    ].index
    posix = run.data("POSIX")
    return sorted(set(posix.path[posix.path.isin(written_only) & (posix.reads > 0)]))
