"""Seconds two findings would both charge, taken off one of them and said in its evidence:
a report whose costs add up to more than the run misleads whoever adds them.

A pair is resolved only where the counters prove the overlap, in two ways.

Calls on the same file by the same rank (a ledger over the findings' claims, base.charged):
on each rank's calls on each file the busiest rank spent at most so many seconds, whatever
the layer (POSIX and STDIO side by side add up; MPI-IO, HDF5 and PnetCDF contain the calls
beneath them). Findings whose claims there add up to more cannot all be saved: the seconds
go first to the finding nearest the cause (CAUSE_ORDER: the requests themselves, where the
file lies, the I/O libraries, how the time spread over the ranks), the smaller claim first
within a tier, and a later claim gives up what is left over. A 32-byte write that stood
21.6 s is the stall's, not the imbalance it made; one stripe is the cause of one aggregator
doing a file's POSIX work. A shared record (rank -1) stands for the file's slowest rank.

Ranks waiting in MPI (ranks-wait-for-io, from APMPI) and collective MPI-IO calls
(collective-mpiio-time): a rank that spent at least F s in collective MPI-IO calls and W s
in MPI_Barrier and MPI_Wait, in a run of R s, spent at least F + W - R s of the waiting
inside those calls, where the collective finding already counts it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from iolab.diagnosis.facts import Run
from iolab.diagnosis.rules.base import SIDES, Finding, busiest_parts, rank_total

WAITED = "MPI_BARRIER_TOTAL_TIME + MPI_WAIT*_TOTAL_TIME, median of the other ranks"
#: Layers whose calls on a file reach the file system side by side: their seconds add up.
#: Every other layer (MPI-IO, HDF5, PnetCDF, DFS) contains the calls it makes beneath it.
SIDE_BY_SIDE = ("POSIX", "STDIO")
#: Who keeps seconds two findings claim: the requests' own shape and stalls first, then
#: where the file lies, then the I/O libraries' own time (MPI-IO, HDF5, PnetCDF), then how
#: the time spread over the ranks (a symptom of all the others). Rules not named come last.
CAUSE_ORDER = (
    (
        "stalled-reads",
        "stalled-writes",
        "small-reads",
        "small-writes",
        "random-reads",
        "random-writes",
        "misaligned",
        "stdio",
        "reread",
        "syncs",
        "metadata",
        "environment",
        "read-modify-write",
    ),
    ("slow-ost", "few-stripes"),
    (
        "no-collective-mpiio",
        "mpiio-read-waits",
        "mpiio-write-waits",
        "collective-mpiio-time",
        "library-time",
    ),
    ("rank-imbalance-bytes", "rank-imbalance-time"),
)
#: The calls of each side, as the evidence names them.
CALLS = {
    "read": "reads",
    "write": "writes",
    "meta": "opens, seeks and stats",
    "sync": "syncs",
    "all": "all its calls",
}
#: The side of a shared record's seconds: Darshan keeps its slowest rank's in all calls only.
ALL = "all"
#: Every side a key can have, and each one's place in a key.
KEY_SIDES = (*SIDES, ALL)
PLACE = {side: place for place, side in enumerate(KEY_SIDES)}
#: Less than this taken off a claim is rounding in the counters, not an overlap to report.
ROUNDING_S = 0.005


def resolve(run: Run, found: list[Finding]) -> None:
    """Take proven shared seconds off one claim of each overlapping pair, in place."""
    _waits_inside_collectives(run, found)
    _same_calls(run, found)


def _waits_inside_collectives(run: Run, found: list[Finding]) -> None:
    by_rule = {finding.rule: finding for finding in found}
    wait, collective = by_rule.get("ranks-wait-for-io"), by_rule.get("collective-mpiio-time")
    if wait is None or collective is None or run.run_time_s <= 0:
        return
    inside = collective.counters["MPIIO_F_FASTEST_RANK_TIME"]
    waited = wait.counters[WAITED]
    overlap = inside + waited - run.run_time_s
    taken = min(wait.cost_s, collective.cost_s, max(overlap, 0.0))
    if taken <= 0:
        return
    wait.cost_s -= taken
    _counted_under(wait, taken, ["collective-mpiio-time"])
    wait.evidence += (
        f"; every rank spent at least {inside:,.0f} s in collective MPI-IO calls, so the "
        f"median waiting rank's {inside:,.0f} + {waited:,.0f} s exceed the "
        f"{run.run_time_s:,.0f} s run and at least {overlap:,.0f} s of its waiting lies inside "
        f"those calls: {taken:,.0f} s of this finding's cost are counted by "
        "collective-mpiio-time, not here"
    )


class CallKeys:
    """Each (rank, path, side) of a run's records as an integer, so the ledger works on numpy
    arrays (a log of 100,000 records has as many keys): the (rank, path) pair's code times
    len(KEY_SIDES), plus the side's place; a shared record's sides are all ALL."""

    def __init__(self, run: Run) -> None:
        records = run.records
        codes, self.pairs = pd.MultiIndex.from_arrays([records["rank"], records.path]).factorize()
        self.size = len(self.pairs) * len(KEY_SIDES)
        self._code = pd.Series(codes, index=records.index)
        self._shared = pd.Series(records["rank"].to_numpy() < 0, index=records.index)

    def of(self, records: pd.Index | np.ndarray, sides: np.ndarray) -> np.ndarray:
        """The key of each (record, side) pair."""
        codes, names = pd.factorize(sides)  # a few distinct sides: map those, not every row
        place = np.array([PLACE[name] for name in names], dtype="int64")[codes]
        place = np.where(self._shared.reindex(records).to_numpy(), PLACE[ALL], place)
        return self._code.reindex(records).to_numpy() * len(KEY_SIDES) + place

    def name(self, key: int) -> tuple[int, str, str]:
        """The rank, path and side of a key."""
        rank, path = self.pairs[key // len(KEY_SIDES)]
        return int(rank), str(path), KEY_SIDES[key % len(KEY_SIDES)]


def seconds_available(run: Run, keys: CallKeys) -> np.ndarray:
    """Per key, the busiest rank's seconds in that kind of call on the file: the most any
    findings together can save there. A shared record stands for the file's slowest rank,
    whose seconds Darshan keeps only in all calls together (ALL)."""
    records = run.records.copy(deep=False)
    records.attrs["processes"] = run.processes
    layer = records.layer.to_numpy()
    side_by_side = np.isin(layer, SIDE_BY_SIDE)
    bottom = np.zeros(keys.size)
    per_layer = {name: np.zeros(keys.size) for name in np.unique(layer[~side_by_side])}
    for side in SIDES:
        key = keys.of(records.index, np.full(len(records), side))
        parts = busiest_parts(records, records[f"{side}_time_s"].fillna(0.0)).to_numpy()
        bottom += np.bincount(key[side_by_side], parts[side_by_side], minlength=keys.size)
        for name, seconds in per_layer.items():
            mine = layer == name
            seconds += np.bincount(key[mine], parts[mine], minlength=keys.size)
    return np.maximum.reduce([bottom, *per_layer.values()])


def claimed_calls(run: Run, keys: CallKeys, claims: pd.DataFrame) -> pd.DataFrame:
    """A finding's claims one row per record and side it holds seconds of (record, side,
    seconds, key)."""
    values = claims.fillna(0.0).to_numpy(dtype="float64")
    long = pd.DataFrame(  # row by row, each record's sides in the columns' order
        {
            "record": np.repeat(claims.index.to_numpy(), values.shape[1]),
            "side": np.tile(claims.columns.to_numpy(dtype=object), values.shape[0]),
            "seconds": values.ravel(),
        }
    )
    long = long[long.seconds > 0]
    return long.assign(key=keys.of(long.record.to_numpy(), long.side.to_numpy()))


def _same_calls(run: Run, found: list[Finding]) -> None:
    """The ledger: each (rank, file, kind of call)'s seconds go to the claims nearest the
    cause first; a claim left short where other findings hold the seconds loses what it
    cannot have, and says which."""
    claimants = [f for f in found if f.claims is not None and f.claims.to_numpy().sum() > 0]
    if len(claimants) < 2:
        return
    keys = CallKeys(run)
    available = seconds_available(run, keys)
    remaining = available.copy()
    held = np.zeros(keys.size, dtype=bool)  # some finding holds seconds there
    held_by: dict[str, np.ndarray] = {}  # each rule's keys, to name who holds them
    for finding in sorted(claimants, key=lambda f: (_tier(f.rule), f.cost_s)):
        assert finding.claims is not None
        claims = finding.claims.fillna(0.0)
        long = claimed_calls(run, keys, claims)
        at, row_key = np.unique(long.key.to_numpy(), return_inverse=True)
        wanted = np.bincount(row_key, weights=long.seconds.to_numpy())
        left = remaining[at].clip(min=0.0)
        # Only seconds other findings hold are proof of an overlap; a claim above a file's
        # seconds where nobody else claims is this rule's own bound, not a shared second.
        given = np.where(held[at], np.minimum(wanted, left), wanted)
        remaining[at] = (left - given).clip(min=0.0)
        lost = at[wanted - given > 0]
        owners = sorted(rule for rule, mine in held_by.items() if mine[lost].any())
        held[at[given > 0]] = True
        held_by.setdefault(finding.rule, np.zeros(keys.size, dtype=bool))[at[given > 0]] = True
        if not len(lost):
            continue
        kept = long.seconds.to_numpy() * (given / wanted)[row_key]
        ranks = run.records.loc[claims.index, "rank"].to_numpy()
        # The claims it keeps (a cut on a rank other than the busiest leaves its cost as it was).
        keeps = np.zeros(claims.shape)
        np.add.at(
            keeps,
            (claims.index.get_indexer(long.record), claims.columns.get_indexer(long.side)),
            kept,
        )
        finding.claims = pd.DataFrame(keeps, index=claims.index, columns=claims.columns)
        taken = min(
            rank_total(ranks, claims.sum(axis=1).to_numpy()) - rank_total(ranks, keeps.sum(axis=1)),
            finding.cost_s,
        )
        owners = [rule for rule in owners if rule != finding.rule]
        if taken < ROUNDING_S or not owners:
            continue
        finding.cost_s -= taken
        _counted_under(finding, taken, owners)
        worst = int(at[(wanted - given).argmax()])
        rank, path, side = keys.name(worst)
        who = f"rank {rank}" if rank >= 0 else "its slowest rank"
        finding.evidence += (
            f"; {taken:,.2f} s of this cost are counted under {_listed(owners)} instead: they "
            f"charge the same calls, and on {path} (the largest such overlap) {who} spent "
            f"{available[worst]:,.2f} s in {CALLS[side]}, less than the findings together claim"
        )


def _counted_under(finding: Finding, taken: float, owners: list[str]) -> None:
    """Note in the finding what it gave up, and to whom (the JSON's counted_elsewhere_s)."""
    finding.counted_elsewhere_s += float(taken)
    finding.counted_under = sorted(set(finding.counted_under) | set(owners))


def _tier(rule: str) -> int:
    """The rule's place in CAUSE_ORDER (after them all if it has none)."""
    return next((n for n, tier in enumerate(CAUSE_ORDER) if rule in tier), len(CAUSE_ORDER))


def _listed(names: list[str]) -> str:
    """Rule ids as a reader lists them: "a", "a and b", "a, b and c"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
