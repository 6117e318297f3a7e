"""The diagnosis rules: what is slow, where, proven by which counters, worth how many seconds.

Every rule reads Run.records (iolab.diagnosis.facts) with whole-column operations and returns
Findings (base: the Finding, its cost on the busiest rank, the minor line). The rules live by
family, each beside its thresholds and advice: posix (the program's requests: size, order,
alignment, buffering, re-reads, syncs, stalls), metadata (opens and lookups, of the data and
of the software environment), mpiio (independent MPI-IO, waits inside the library, ROMIO's
reads before writing, collective calls costing most above POSIX), libraries (HDF5 and
PnetCDF calls costing most above the layer beneath), ranks
(imbalance, ranks waiting for the I/O ranks) and lustre (a slow OST, a shared file on one).
Advice is worded for the file system, library and direction of the files concerned
(storage: Lustre, GPFS, CephFS, NFS, DAOS or local; HDF5, PnetCDF, MPI-IO or POSIX).
`diagnose` runs them all, takes seconds two findings would both charge off one of them where
the counters prove the overlap (overlaps), and ranks the findings by cost.

Count thresholds follow Drishti, the Darshan-based advisor of the HPC I/O group at LBNL
(hpc-io/drishti-io, drishti/includes/config.py): small is below 1 MiB, 10 % of a direction's
requests small or unaligned, 20 % random, 50 % independent MPI-IO, at least 1000 requests.
Where the lab differs it says why beside the constant; reads and writes are always judged
apart (a write-heavy checkpoint must not hide random reads).
"""

from __future__ import annotations

from iolab.diagnosis.facts import Run
from iolab.diagnosis.rules import libraries, lustre, metadata, mpiio, overlaps, posix, ranks
from iolab.diagnosis.rules.base import (
    MAJOR_SHARE,
    MINOR_S,
    MINOR_SHARE,
    Finding,
    busiest_rank_seconds,
    is_minor,
)
from iolab.diagnosis.rules.ranks import rank_io_seconds

__all__ = [
    "MAJOR_SHARE",
    "MINOR_S",
    "MINOR_SHARE",
    "RULE_IDS",
    "Finding",
    "busiest_rank_seconds",
    "diagnose",
    "rank_io_seconds",
]

#: Every rule, in the order their findings are listed when they cost the same.
RULES = (
    posix.direction_rules,
    posix.misaligned,
    metadata.metadata,
    mpiio.independent_mpiio,
    mpiio.mpiio_waits,
    mpiio.read_modify_write,
    mpiio.collective_time,
    libraries.library_time,
    ranks.rank_imbalance,
    lustre.lustre,
    posix.stdio,
    posix.rereads,
    posix.syncs,
    metadata.environment,
    posix.stalled_requests,
    ranks.ranks_wait_for_io,
)

#: Every rule id a finding can carry: stable, as scripts and dashboards key on them (the
#: JSON report's "rule"; lesson 12 lists them). A rule renamed keeps its old id.
RULE_IDS = (
    "small-reads",
    "small-writes",
    "random-reads",
    "random-writes",
    "misaligned",
    "metadata",
    "no-collective-mpiio",
    "mpiio-read-waits",
    "mpiio-write-waits",
    "read-modify-write",
    "collective-mpiio-time",
    "library-time",
    "rank-imbalance-bytes",
    "rank-imbalance-time",
    "slow-ost",
    "few-stripes",
    "stdio",
    "reread",
    "syncs",
    "environment",
    "stalled-reads",
    "stalled-writes",
    "ranks-wait-for-io",
)


def diagnose(run: Run) -> list[Finding]:
    """Every rule's findings, proven overlaps taken off once, the costliest first; minor ones
    after, marked."""
    found = [finding for rule in RULES for finding in rule(run)]
    overlaps.resolve(run, found)
    for finding in found:
        # plain float and bool, not numpy's: a report's JSON has numbers and true/false
        finding.cost_s = float(finding.cost_s)
        if run.run_time_s > 0:  # more than the run means threads overlapped: count it once
            finding.cost_s = min(finding.cost_s, float(run.run_time_s))
        finding.minor = bool(is_minor(finding.cost_s, run))
    return sorted(found, key=lambda f: (f.minor, -f.cost_s))
