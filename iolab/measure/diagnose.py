"""One set of I/O diagnosis rules for two sources: the lab's strace profile and a Darshan log.

Both sources are first reduced to the same neutral facts per file (IOSummary): counts of
opens, lookups, reads and writes, how many requests were small or unaligned, sequential
against random, the highest byte touched, metadata time, bytes per process or rank, and for
MPI-IO independent against collective operations. The rules read only those facts, so a
finding means the same whichever tool measured it, and a rule that a source cannot feed
(strace sees no MPI-IO layer) says so instead of staying silent.

Thresholds follow Drishti, the Darshan-based advisor of the HPC I/O group at LBNL
(hpc-io/drishti-io, drishti/includes/config.py): small is below 1 MiB, 10 % of requests
small or unaligned, 20 % random, 50 % independent MPI-IO, 15 % imbalance of time between
ranks (stragglers), 30 % imbalance of bytes, 30 s of metadata time. Where the lab differs it
says why beside the constant. "Sequential" is Darshan's: a request that starts at or after
the end of the previous one; a request that goes back is random.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

SMALL_BYTES = 1024**2  # Drishti: small_bytes
SMALL_SHARE = 0.10  # Drishti: small_requests
MISALIGNED_SHARE = 0.10  # Drishti: misaligned_requests
RANDOM_SHARE = 0.20  # Drishti: random_operations
INDEPENDENT_SHARE = 0.50  # Drishti: collective_operations
STRAGGLER_SHARE = 0.15  # Drishti: imbalance_stragglers
SIZE_IMBALANCE = 0.30  # Drishti: imbalance_size
METADATA_TIME_S = 30.0  # Drishti: metadata_time_rank
#: Drishti's absolute floor for small, random and independent requests; the lab applies it
#: to every count-based rule, so a ten-line test program does not get a lecture.
MIN_COUNT = 1000
#: The lab's own: how many times its used range a file must be read to count as re-read
#: (Drishti flags any byte read twice; a format that reads its header again is not a problem).
REREAD_FACTOR = 2.0
#: The lab's own: opens and lookups per MiB moved above which a program is metadata-bound.
LOOKUPS_PER_MIB = 100
#: The lab's own (Drishti has no per-OST rule): an OST whose files ran at less than this
#: share of the typical OST's median rate is a slow server, not a slow program.
SLOW_OST_SHARE = 0.5


@dataclass
class FileIO:
    """What one program did to one file, in the terms both sources can give."""

    path: str
    opens: int = 0
    lookups: int = 0
    reads: int = 0
    writes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    small: int = 0  # reads and writes of less than SMALL_BYTES
    sequential: int | None = None  # requests starting where the previous one ended
    random: int | None = None
    unaligned: int | None = None
    max_byte: int | None = None  # highest byte touched + 1
    meta_time_s: float | None = None
    bytes_by_rank: dict[str, int] = field(default_factory=dict)  # rank or process -> bytes
    seconds_by_rank: dict[str, float] = field(default_factory=dict)  # rank -> time in I/O


@dataclass
class IOSummary:
    """The facts of one run, from one source."""

    source: str  # "strace" or "darshan"
    files: list[FileIO]
    mpiio: dict[str, int] | None = None  # independent/collective reads/writes, if MPI-IO ran
    ost_bytes: dict[str, int] | None = None  # bytes per OST (Darshan's Lustre module)
    ost_mibps: dict[str, float] | None = None  # median rate of the files on each OST
    processes: int = 1  # ranks of the job, or processes the trace saw


@dataclass
class Finding:
    """One diagnosis: what is wrong, the measured evidence, and what to do."""

    rule: str
    evidence: str
    advice: str


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def small_requests(run: IOSummary) -> Finding | None:
    ops = sum(f.reads + f.writes for f in run.files)
    small = sum(f.small for f in run.files)
    if small >= MIN_COUNT and _share(small, ops) > SMALL_SHARE:
        return Finding("small requests", f"{small:,} of {ops:,} reads and writes "
                       f"({_share(small, ops):.0%}) move less than 1 MiB",
                       "read and write in larger blocks (buffer in memory, larger chunks, "
                       "a packed format), so each request carries more data")
    return None


def misaligned_requests(run: IOSummary) -> Finding | None:
    known = [f for f in run.files if f.unaligned is not None]
    ops = sum(f.reads + f.writes for f in known)
    unaligned = sum(f.unaligned or 0 for f in known)
    if unaligned >= MIN_COUNT and _share(unaligned, ops) > MISALIGNED_SHARE:
        return Finding("misaligned requests", f"{unaligned:,} of {ops:,} requests "
                       f"({_share(unaligned, ops):.0%}) start off a 4 KiB boundary",
                       "align offsets and sizes to the file system's block or stripe size "
                       "(pad records, or use the library's alignment setting)")
    return None


def random_access(run: IOSummary) -> Finding | None:
    known = [f for f in run.files if f.random is not None]
    rand = sum(f.random or 0 for f in known)
    ordered = rand + sum(f.sequential or 0 for f in known)
    if rand >= MIN_COUNT and _share(rand, ordered) > RANDOM_SHARE:
        return Finding("random access", f"{rand:,} of {ordered:,} requests "
                       f"({_share(rand, ordered):.0%}) go back to an earlier offset",
                       "read in file order where the algorithm allows, or gather the pieces "
                       "into larger sequential reads (sort requests, read whole chunks)")
    return None


def metadata_load(run: IOSummary) -> Finding | None:
    lookups = sum(f.opens + f.lookups for f in run.files)
    mib = sum(f.bytes_read + f.bytes_written for f in run.files) / 1024**2
    meta_s = sum(f.meta_time_s or 0.0 for f in run.files)
    per_mib = lookups / mib if mib else float(lookups)
    if lookups >= MIN_COUNT and per_mib > LOOKUPS_PER_MIB:
        return Finding("many opens and lookups", f"{lookups:,} opens and stat-like calls for "
                       f"{mib:,.1f} MiB moved ({per_mib:,.0f} per MiB), "
                       f"{meta_s:.2f} s in them",
                       "pack many small files into an archive or shards, keep a file open "
                       "instead of reopening it, and cache what stat returned")
    per_process = meta_s / max(run.processes, 1)  # Drishti counts ranks above the limit
    if per_process > METADATA_TIME_S:
        return Finding("metadata time", f"{per_process:.1f} s per process spent in opens "
                       f"and lookups ({run.processes} processes)",
                       "fewer files, fewer opens: on a parallel file system each is a round "
                       "trip to the metadata server")
    return None


def independent_mpiio(run: IOSummary) -> Finding | None:
    if run.mpiio is None:
        return None
    indep = run.mpiio.get("independent_reads", 0) + run.mpiio.get("independent_writes", 0)
    total = indep + run.mpiio.get("collective_reads", 0) + run.mpiio.get("collective_writes", 0)
    if indep >= MIN_COUNT and _share(indep, total) > INDEPENDENT_SHARE:
        return Finding("no collective MPI-IO", f"{indep:,} of {total:,} MPI-IO operations "
                       f"({_share(indep, total):.0%}) are independent",
                       "use the collective calls (MPI_File_write_all, read_all) so ROMIO's "
                       "aggregators combine the ranks' pieces into large requests")
    return None


def _spread(values: dict) -> float:
    """(most - least) / most: 0 when balanced, near 1 when one does almost nothing."""
    most = max(values.values())
    return (most - min(values.values())) / most if most else 0.0


def imbalance(run: IOSummary) -> Finding | None:
    for facts, limit, what in (("seconds_by_rank", STRAGGLER_SHARE, "time in I/O"),
                               ("bytes_by_rank", SIZE_IMBALANCE, "bytes")):
        spread, worst = max(((_spread(getattr(f, facts)), f) for f in run.files
                             if len(getattr(f, facts)) > 1), default=(0.0, None),
                            key=lambda pair: pair[0])
        if worst is not None and spread > limit:
            return Finding("imbalance across processes", f"on {worst.path}, the processes' "
                           f"{what} differ by {spread:.0%} of the largest "
                           f"({len(getattr(worst, facts))} processes)",
                           "share the work evenly (equal blocks per rank, or collective "
                           "I/O): the job waits for its slowest process")
    if run.ost_mibps and len(run.ost_mibps) >= 4:
        typical = float(pd.Series(run.ost_mibps).median())
        slowest = min(run.ost_mibps, key=run.ost_mibps.get)
        if typical and run.ost_mibps[slowest] < SLOW_OST_SHARE * typical:
            return Finding("a slow OST", f"files on OST {slowest} were written at a median "
                           f"{run.ost_mibps[slowest]:.1f} MiB/s, against {typical:.1f} MiB/s "
                           f"typical of the {len(run.ost_mibps)} OSTs",
                           "report it to your centre's support with the job id; meanwhile "
                           "stripe over more OSTs so no file depends on one server alone")
    if run.ost_bytes and len(run.ost_bytes) > 1:
        values = list(run.ost_bytes.values())
        mean = sum(values) / len(values)
        if mean and max(values) / mean - 1 > SIZE_IMBALANCE:
            return Finding("imbalance across OSTs", f"the busiest of {len(values)} OSTs took "
                           f"{max(values) / mean:.1f} times the mean bytes",
                           "stripe the file over more OSTs or align each rank's share to the "
                           "stripe size (lfs setstripe)")
    return None


def repeated_reads(run: IOSummary) -> Finding | None:
    reread = [f for f in run.files if f.max_byte and f.bytes_read > REREAD_FACTOR * f.max_byte]
    if not reread:
        return None
    top = max(reread, key=lambda f: f.bytes_read)
    return Finding("the same data read again", f"{len(reread)} file(s) read at least "
                   f"{REREAD_FACTOR:.0f} times over; {top.path}: {top.bytes_read:,} bytes read "
                   f"of a {top.max_byte:,}-byte range",
                   "read once and keep the result in memory, or convert once to a format "
                   "that is cheap to load (lesson 02, formats)")


RULES = (small_requests, misaligned_requests, random_access, metadata_load,
         independent_mpiio, imbalance, repeated_reads)


def diagnose(run: IOSummary) -> list[Finding]:
    """Every rule's finding for one run, in the order of RULES."""
    return [finding for rule in RULES if (finding := rule(run)) is not None]


def findings_frame(findings: list[Finding]) -> pd.DataFrame:
    return pd.DataFrame([vars(f) for f in findings], columns=["rule", "evidence", "advice"])


def format_findings(findings: list[Finding]) -> str:
    """The diagnosis as a learner reads it: each finding, its evidence, what to do."""
    lines = ["Diagnosis (rules of iolab.measure.diagnose, thresholds after Drishti)"]
    lines += [f"- {f.rule}: {f.evidence}.\n  What to do: {f.advice}." for f in findings] or [
        "- no rule fired: nothing in this run's file I/O stands out"]
    return "\n".join(lines)
