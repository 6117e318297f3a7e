"""Seconds two findings would both charge, taken off one of them and said in its evidence:
a report whose costs add up to more than the run misleads whoever adds them.

Each pair is resolved only where the counters prove the overlap. Ranks waiting in MPI
(ranks-wait-for-io, from APMPI) and collective MPI-IO calls (collective-mpiio-time): a rank
that spent at least F s in collective MPI-IO calls and W s in MPI_Barrier and MPI_Wait, in a
run of R s, spent at least F + W - R s of the waiting inside those calls, where the
collective finding already counts it."""

from __future__ import annotations

from iolab.diagnosis.facts import Run
from iolab.diagnosis.rules.base import Finding

WAITED = "MPI_BARRIER_TOTAL_TIME + MPI_WAIT*_TOTAL_TIME, median of the other ranks"


def resolve(run: Run, found: list[Finding]) -> None:
    """Take proven shared seconds off the smaller claim, in place."""
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
    wait.evidence += (
        f"; every rank spent at least {inside:,.0f} s in collective MPI-IO calls, so the "
        f"median waiting rank's {inside:,.0f} + {waited:,.0f} s exceed the "
        f"{run.run_time_s:,.0f} s run and at least {overlap:,.0f} s of its waiting lies inside "
        f"those calls: {taken:,.0f} s of this finding's cost are counted by "
        "collective-mpiio-time, not here"
    )
