"""The diagnosis rules: what is slow, where, proven by which counters, worth how many seconds.

Every rule reads Run.records (iolab.diagnosis.facts) with whole-column operations and returns
Findings. A finding's cost is the time in the calls it concerns, seen from the busiest rank
(`busiest_rank_seconds`): the job waits for that rank, so its seconds are what the run could
at most save. A finding under MINOR_SHARE of the run time or under MINOR_S is kept but
listed as minor: a ten-line test and a sub-second run do not get lectures.

Count thresholds follow Drishti, the Darshan-based advisor of the HPC I/O group at LBNL
(hpc-io/drishti-io, drishti/includes/config.py): small is below 1 MiB, 10 % of a direction's
requests small or unaligned, 20 % random, 50 % independent MPI-IO, at least 1000 requests.
Where the lab differs it says why beside the constant; reads and writes are always judged
apart (a write-heavy checkpoint must not hide random reads).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from iolab.diagnosis.facts import Run

SMALL_BYTES = 1024**2  # Drishti: small_bytes
SMALL_SHARE = 0.10  # Drishti: small_requests
MISALIGNED_SHARE = 0.10  # Drishti: misaligned_requests
RANDOM_SHARE = 0.20  # Drishti: random_operations
INDEPENDENT_SHARE = 0.50  # Drishti: collective_operations
MIN_COUNT = 1000  # Drishti's absolute floor for small, random and independent requests
#: Ranks differing by more than this share of the larger (Drishti: imbalance_size 30 %,
#: imbalance_stragglers 15 %); the lab asks both of a file's bytes and of its time.
BYTES_IMBALANCE = 0.30
TIME_IMBALANCE = 0.15
#: The lab's own: below this a file's imbalance is noise whatever its share (544 bytes per
#: rank differ by 100 % and cost nothing).
IMBALANCE_MIN_BYTES = 1024**2
#: The lab's own: opens and lookups per MiB moved above which a program is metadata-bound.
LOOKUPS_PER_MIB = 100
#: The lab's own: a file read more than this many times its used range counts as re-read
#: (Drishti flags any byte read twice; a format that reads its header again is no problem).
REREAD_FACTOR = 2.0
#: The lab's own (Drishti has no per-OST rule): an OST whose files ran at less than this share
#: of the typical OST's median rate is a slow server, not a slow program.
SLOW_OST_SHARE = 0.5
#: The lab's own: a file shared by ranks that moved at least this much on a single OST.
FEW_STRIPES_MIN_BYTES = 1024**3
#: The lab's own: a sync for every this many writes or fewer is a sync per transaction.
WRITES_PER_SYNC = 10
MIN_SYNCS = 100
#: The lab's own: requests through stdio this small on average are not being buffered well.
STDIO_SMALL_BYTES = 4096
#: The environment's opens and lookups from which an import cost is reported.
ENVIRONMENT_MIN_CALLS = 100
#: The lab's own (Drishti has no such rule): a single request of at most SMALL_BYTES that
#: took this long waited (a lock, a busy server): no disk needs a second for a MiB.
STALL_S = 1.0
#: The lab's own (Drishti compares no layers): independent MPI-IO time of which at least this
#: share lies above the POSIX calls the library made, at least WAIT_PER_CALL_S per call on
#: average, was spent waiting in the library (its own work per call takes microseconds).
LIBRARY_WAIT_SHARE = 0.5
WAIT_PER_CALL_S = 0.001
#: A finding worth less than this share of the run, or less than MINOR_S, is minor.
#: ranks-wait-for-io: across ranks, MPI waiting must fall this strongly as I/O time rises
#: (Pearson's r), and the I/O ranks are those with at least this share of the busiest's I/O.
WAIT_CORRELATION = -0.8
IO_RANK_SHARE = 0.5
MINOR_SHARE = 0.01
MINOR_S = 1.0
#: The lab's own: a file's imbalance costing under this share of the minor line is noise.
NOISE_SHARE = 0.1
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


def busiest_rank_seconds(records: pd.DataFrame, seconds: pd.Series) -> float:
    """The seconds of the busiest rank in the calls concerned (`seconds`, one value per record).

    Per-rank records are summed by rank and the largest sum taken. A shared record (rank -1)
    sums its seconds over all ranks; Darshan keeps the slowest rank's total on the file, so
    the record adds that rank's part: `seconds` scaled by slowest_rank_s over the record's
    own total (or, without it, an even share over the ranks)."""
    if records.empty:
        return 0.0
    rank = records["rank"].to_numpy()
    value = np.nan_to_num(seconds.reindex(records.index).to_numpy(dtype="float64"))
    per_rank = rank >= 0
    own = 0.0
    if per_rank.any():  # numpy, not groupby: this runs once per finding, on every log
        _, which = np.unique(rank[per_rank], return_inverse=True)
        own = float(np.bincount(which, weights=value[per_rank]).max())
    if per_rank.all():
        return own
    shared = ~per_rank
    total = (records.read_time_s.to_numpy() + records.write_time_s.to_numpy()
             + records.meta_time_s.to_numpy())[shared]
    ranks = max(int(records.attrs.get("processes", 1)), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.minimum(records.slowest_rank_s.to_numpy(dtype="float64")[shared]
                           / np.where(total > 0, total, np.nan), 1.0)
    share = np.where(np.isnan(share), 1.0 / ranks, share)
    return own + float(np.sum(value[shared] * share))


def _share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def _top(records: pd.DataFrame, weight: pd.Series, n: int = TOP_FILES) -> list[str]:
    """The paths carrying most of `weight`, largest first."""
    per_path = weight.groupby(records["path"]).sum()
    return list(per_path[per_path > 0].sort_values(ascending=False, kind="stable").index[:n])


def _own_share(records: pd.DataFrame, part: pd.Series, whole: pd.Series) -> pd.Series:
    """Each record's file's share: part over whole, summed per file (the files a finding
    names are those where the pattern is the rule there, not a few requests among many)."""
    per_file = pd.DataFrame({"part": part, "whole": whole}).groupby(records["path"]).sum()
    share = per_file.part / per_file.whole.where(per_file.whole > 0)
    return share.reindex(records["path"]).fillna(0).set_axis(records.index)


def _names(run: Run, names: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Each proof's name: Darshan's counters for a log, the system calls for a trace."""
    return {key: pair[0] if run.source == "darshan" else pair[1] for key, pair in names.items()}


def _data(run: Run, layer: str) -> pd.DataFrame:
    frame = run.data(layer)
    frame.attrs["processes"] = run.processes
    return frame


def direction_rules(run: Run) -> list[Finding]:
    """small-reads/writes and random-reads/writes: each direction judged on its own."""
    posix = _data(run, "POSIX")
    if posix.empty:
        return []
    found = []
    for op, time in (("read", "read_time_s"), ("write", "write_time_s")):
        requests = posix[f"{op}s"]
        total = float(requests.sum())
        small = posix[f"small_{op}s"].fillna(0)
        if small.sum() >= MIN_COUNT and _share(small.sum(), total) > SMALL_SHARE:
            part = posix[time] * (small / requests.where(requests > 0)).fillna(0)
            names = _names(run, {"small": (f"POSIX_SIZE_{op.upper()}_0_100..100K_1M",
                                           f"{op} calls under 1 MiB"),
                                 "all": (f"POSIX_{op.upper()}S", f"{op} calls")})
            found.append(Finding(
                f"small-{op}s", f"small {op}s", busiest_rank_seconds(posix, part),
                f"{small.sum():,.0f} of {total:,.0f} {op}s ({_share(small.sum(), total):.0%}) "
                "move less than 1 MiB",
                f"{op} in larger blocks: buffer in memory, larger chunks, a packed format; "
                "with MPI-IO, collective buffering gathers the ranks' pieces",
                files=_top(posix, small.where(_own_share(posix, small, requests) > SMALL_SHARE, 0)),
                counters={names["small"]: float(small.sum()),
                                                    names["all"]: total}))
        known = posix[posix[f"seq_{op}s"].notna()]
        backwards = (known[f"{op}s"] - known[f"seq_{op}s"]).clip(lower=0)
        judged = float(known[f"{op}s"].sum())
        if backwards.sum() >= MIN_COUNT and _share(backwards.sum(), judged) > RANDOM_SHARE:
            part = known[time] * (backwards / known[f"{op}s"].where(known[f"{op}s"] > 0)).fillna(0)
            names = _names(run, {"seq": (f"POSIX_SEQ_{op.upper()}S", f"sequential {op} calls"),
                                 "all": (f"POSIX_{op.upper()}S", f"{op} calls")})
            found.append(Finding(
                f"random-{op}s", f"random {op}s", busiest_rank_seconds(known, part),
                f"{backwards.sum():,.0f} of {judged:,.0f} {op}s "
                f"({_share(backwards.sum(), judged):.0%}) go back to an earlier offset",
                f"{op} in file order where the algorithm allows, or gather the pieces into "
                "larger sequential requests (sort them, read whole chunks)",
                files=_top(known, backwards),
                counters={names["all"]: judged, names["seq"]: float(known[f"seq_{op}s"].sum())}))
    return found


def misaligned(run: Run) -> list[Finding]:
    posix = _data(run, "POSIX")
    if posix.empty:
        return []
    known = posix[posix.unaligned.notna()]
    requests = known.reads + known.writes
    bad = known.unaligned
    if bad.sum() < MIN_COUNT or _share(bad.sum(), requests.sum()) <= MISALIGNED_SHARE:
        return []
    unit = int(known.alignment.mode().iloc[0]) if known.alignment.notna().any() else 4096
    part = (known.read_time_s + known.write_time_s) * (bad / requests.where(requests > 0)).fillna(0)
    names = _names(run, {"bad": ("POSIX_FILE_NOT_ALIGNED", "calls at an unaligned offset"),
                         "unit": ("POSIX_FILE_ALIGNMENT", "alignment checked (page size)")})
    return [Finding(
        "misaligned", "misaligned requests", busiest_rank_seconds(known, part),
        f"{bad.sum():,.0f} of {requests.sum():,.0f} requests ({_share(bad.sum(), requests.sum()):.0%}) "
        f"start off a {_size(unit)} boundary, the file system's alignment unit in this "
        f"{'log' if run.source == 'darshan' else 'trace'}",
        f"align offsets and sizes to {_size(unit)} (pad records, or the library's alignment "
        "setting, e.g. H5Pset_alignment or the Lustre stripe size)",
        files=_top(known, bad), counters={names["bad"]: float(bad.sum()), names["unit"]: unit})]


def _size(nbytes: float) -> str:
    for unit, name in ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")):
        if nbytes >= unit and nbytes % unit == 0:
            return f"{nbytes // unit:.0f} {name}"
    return f"{nbytes:,.0f} bytes"


def metadata(run: Run) -> list[Finding]:
    """Opens and lookups on the application's files (POSIX and STDIO)."""
    frame = run.data()
    frame = frame[frame.layer.isin(["POSIX", "STDIO"])]
    frame.attrs["processes"] = run.processes
    calls = frame.opens + frame.stats
    moved_mib = float((frame.bytes_read + frame.bytes_written).sum()) / 1024**2
    per_mib = calls.sum() / moved_mib if moved_mib else float(calls.sum())
    cost = busiest_rank_seconds(frame, frame.meta_time_s)
    heavy_share = _share(cost, run.run_time_s) > 0.10
    if not ((calls.sum() >= MIN_COUNT and per_mib > LOOKUPS_PER_MIB) or heavy_share):
        return []
    in_git = frame.path.str.contains("/.git/", regex=False)
    is_git = run.source == "strace" and (os.path.basename(run.name.split()[0]) == "git"
                                         if run.name else False) or calls[in_git].sum() > calls.sum() / 2
    advice = ("let git remember what it already checked: `git config core.untrackedCache true` "
              "and `core.fsmonitor true`, or keep the work tree on node-local disk" if is_git else
              "pack many small files into an archive or shards, keep a file open instead of "
              "reopening it, and cache what stat returned: each is a round trip to the "
              "metadata server")
    slowest = frame.meta_time_s.groupby(frame.path).sum()
    if len(slowest) and slowest.max() > MINOR_S:
        advice += (f"; {slowest.idxmax()} alone spent {slowest.max():,.1f} s in opens: an open "
                   "that waits that long is a named pipe, a lock or a hung server")
    names = _names(run, {"opens": ("POSIX_OPENS + STDIO_OPENS", "open calls"),
                         "stats": ("POSIX_STATS", "stat, access and readlink calls"),
                         "time": ("POSIX_F_META_TIME + STDIO_F_META_TIME",
                                  "seconds in those calls")})
    return [Finding(
        "metadata", "many opens and lookups", cost,
        f"{calls.sum():,.0f} opens and stat-like calls for {moved_mib:,.1f} MiB moved "
        f"({per_mib:,.0f} per MiB), {frame.meta_time_s.sum():,.2f} s in metadata over all ranks",
        advice, files=_top(frame, calls),
        counters={names["opens"]: float(frame.opens.sum()), names["stats"]: float(frame.stats.sum()),
                  names["time"]: float(frame.meta_time_s.sum())})]


#: What to change where the application calls MPI-IO itself, or through HDF5 or PnetCDF (the
#: layer it calls is where the fix goes: an HDF5 program has no MPI_File_write_all to call).
#: Sources: MPI 4.1 standard, section 14.4 (the _all calls); HDF5 reference manual,
#: H5Pset_dxpl_mpio, H5Pset_coll_metadata_write and H5Pset_all_coll_metadata_ops (1.10 on);
#: PnetCDF C interface guide, data mode functions.
COLLECTIVE_FIX = {
    "MPI-IO": "use the collective calls (MPI_File_write_all, read_all) so ROMIO's aggregators "
              "combine the ranks' pieces into large requests",
    "HDF5": "make the dataset transfers collective: H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE) "
            "on a dataset transfer property list passed to H5Dwrite and H5Dread, so that HDF5 "
            "calls MPI-IO's collective operations and ROMIO's aggregators combine the ranks' "
            "pieces into large requests",
    "HDF5 metadata": "make HDF5's metadata I/O collective too: H5Pset_coll_metadata_write(fapl, 1) "
                     "and H5Pset_all_coll_metadata_ops(fapl, 1) on the file access property "
                     "list (HDF5 1.10 on), so one rank reads and writes the metadata for all",
    "PnetCDF": "call the collective API (ncmpi_put_vara_all, ncmpi_get_vara_all and the other "
               "_all calls) in collective data mode, not the independent calls after "
               "ncmpi_begin_indep_data, so ROMIO's aggregators combine the ranks' pieces",
}


def _library(run: Run, paths: list[str]) -> str:
    """Which layer the application called for these MPI-IO files: HDF5 or PnetCDF where the
    log has their records of the same file (H5F/H5D, PNETCDF_FILE/_VAR; a dataset's or a
    variable's record is named "<file>:<name>"), else MPI-IO itself."""
    records = run.data()
    files = records.path.str.rsplit(":", n=1).str[0].where(
        records.layer.isin(["H5D", "PNETCDF_VAR"]), records.path)
    used = set(records.layer[files.isin(paths)])
    if used & {"PNETCDF_FILE", "PNETCDF_VAR"}:
        return "PnetCDF"
    if used & {"H5F", "H5D"}:
        return "HDF5"
    return "MPI-IO"


def _library_proof(run: Run, library: str, independent: float) -> tuple[str, str, dict]:
    """The fix, a note for the evidence, and the library's own counters.

    PnetCDF counts its independent and collective requests. HDF5 flags each dataset that used
    collective MPI-IO (H5D_USE_MPIIO_COLLECTIVE): where every dataset did, and the independent
    MPI-IO operations outnumber all the datasets' requests, they are HDF5's own metadata I/O,
    which H5Pset_dxpl_mpio does not make collective."""
    if library == "PnetCDF":
        var = _data(run, "PNETCDF_VAR")
        requests = var.reads + var.writes
        return COLLECTIVE_FIX[library], "", {
            "PNETCDF_VAR_INDEP_*": float((requests - var.collective).sum()),
            "PNETCDF_VAR_COLL_*": float(var.collective.sum())}
    if library == "HDF5":
        datasets = _data(run, "H5D")
        collective = float((datasets.collective > 0).sum())
        requests = float((datasets.reads + datasets.writes).sum())
        counters = {"H5D datasets": float(len(datasets)), "H5D_USE_MPIIO_COLLECTIVE": collective,
                    "H5D_READS + H5D_WRITES": requests}
        if len(datasets) and collective == len(datasets) and independent > requests:
            return COLLECTIVE_FIX["HDF5 metadata"], (
                f"; every dataset already used collective MPI-IO, and its {requests:,.0f} "
                "requests cannot account for them: they are HDF5's metadata I/O"), counters
        return COLLECTIVE_FIX[library], "", counters
    return COLLECTIVE_FIX[library], "", {}


def independent_mpiio(run: Run) -> list[Finding]:
    """Independent MPI-IO where collective calls would combine the ranks' requests; the fix
    is named at the layer the application calls (MPI-IO, HDF5 or PnetCDF)."""
    if run.processes < 2:  # one process: nothing to combine
        return []
    mpiio = _data(run, "MPI-IO")
    if mpiio.empty:
        return []
    requests = mpiio.reads + mpiio.writes
    indep = requests - mpiio.collective
    if indep.sum() < MIN_COUNT or _share(indep.sum(), requests.sum()) <= INDEPENDENT_SHARE:
        return []
    part = (mpiio.read_time_s + mpiio.write_time_s) * (indep / requests.where(requests > 0)).fillna(0)
    files = _top(mpiio, indep)
    library = _library(run, files)
    fix, note, proof = _library_proof(run, library, float(indep.sum()))
    through = f", through {library}" if library != "MPI-IO" else ""
    return [Finding(
        "no-collective-mpiio", f"independent MPI-IO{through}", busiest_rank_seconds(mpiio, part),
        f"{indep.sum():,.0f} of {requests.sum():,.0f} MPI-IO operations "
        f"({_share(indep.sum(), requests.sum()):.0%}) are independent{through}{note}",
        fix, files=files, counters={"MPIIO_INDEP_*": float(indep.sum()),
                                    "MPIIO_COLL_*": float(mpiio.collective.sum()), **proof})]


def _rank_spread(run: Run, layer: str) -> pd.DataFrame:
    """Per file of one layer: how many ranks, the most and least bytes a rank moved, the
    slowest rank's seconds and the mean, and which ranks (per-rank records give every rank;
    a shared record Darshan's fastest and slowest). At MPI-IO only files without a collective
    call count: in a collective call the aggregators do the file system's work for the
    others, so their longer time is their role, not a wait."""
    records = _data(run, layer)
    if layer == "MPI-IO":
        records = records[records.collective == 0]
    if records.empty:
        return pd.DataFrame()
    moved = records.bytes_read + records.bytes_written
    seconds = records.read_time_s + records.write_time_s + records.meta_time_s
    # Files several ranks wrote with per-rank records: extremes by rank.
    own = records[records["rank"] >= 0].assign(moved=moved, seconds=seconds)
    per_file = own.groupby("path").agg(ranks=("rank", "nunique"), most_bytes=("moved", "max"),
                                       least_bytes=("moved", "min"), slowest_s=("seconds", "max"),
                                       mean_s=("seconds", "mean"))
    by_path = own.groupby("path")
    per_file["heavy_rank"] = own.loc[by_path.moved.idxmax()].set_index("path")["rank"]
    per_file["slow_rank"] = own.loc[by_path.seconds.idxmax()].set_index("path")["rank"]
    per_file["fast_bytes"] = own.loc[by_path.seconds.idxmin()].set_index("path")["moved"]
    per_file["slow_bytes"] = own.loc[by_path.seconds.idxmax()].set_index("path")["moved"]
    per_file = per_file[per_file.ranks > 1]
    # Shared records: Darshan keeps the fastest and slowest rank, their bytes and seconds.
    shared = records[records["rank"] < 0]
    extremes = shared[["fastest_rank_bytes", "slowest_rank_bytes"]]
    shared_file = pd.DataFrame({
        "ranks": run.processes, "most_bytes": extremes.max(axis=1).to_numpy(),
        "least_bytes": extremes.min(axis=1).to_numpy(),
        "slowest_s": shared.slowest_rank_s.to_numpy(),
        "mean_s": (seconds[shared.index] / max(run.processes, 1)).to_numpy(),
        "heavy_rank": np.where(shared.slowest_rank_bytes >= shared.fastest_rank_bytes,
                               shared.slowest_rank, shared.fastest_rank),
        "slow_rank": shared.slowest_rank.to_numpy(),
        "fast_bytes": shared.fastest_rank_bytes.to_numpy(),
        "slow_bytes": shared.slowest_rank_bytes.to_numpy()}, index=shared.path.to_numpy())
    files = [frame for frame in (per_file, shared_file) if len(frame)]
    if not files:
        return pd.DataFrame()
    files = pd.concat(files).dropna(subset=["most_bytes", "slowest_s"])
    files["cost_s"] = (files.slowest_s - files.mean_s).clip(lower=0)
    return files.assign(layer=layer)


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
    files = files[files.cost_s >= NOISE_SHARE * minor_line(run)]
    posix = files[files.layer == "POSIX"]
    byte_spread = ((posix.most_bytes - posix.least_bytes) / posix.most_bytes.where(posix.most_bytes > 0)).fillna(0)
    by_bytes = posix[(byte_spread > BYTES_IMBALANCE) & (posix.most_bytes >= IMBALANCE_MIN_BYTES)]
    time_spread = ((files.slowest_s - files.mean_s) / files.slowest_s.where(files.slowest_s > 0)).fillna(0)
    # Equal work: the slowest and fastest ranks moved about the same, or so little that the
    # bytes cannot explain the seconds.
    equal = (((files.slow_bytes - files.fast_bytes).abs()
              <= BYTES_IMBALANCE * files[["slow_bytes", "fast_bytes"]].max(axis=1))
             | (files.most_bytes < IMBALANCE_MIN_BYTES))
    by_time = files[(time_spread > TIME_IMBALANCE) & equal & ~files.index.isin(by_bytes.index)]
    # A file once, at the layer where its ranks' spread costs most.
    by_time = by_time.sort_values("cost_s", ascending=False, kind="stable")
    by_time = by_time[~by_time.index.duplicated()]
    found = []
    if len(by_bytes):
        worst = by_bytes.sort_values("cost_s", ascending=False).iloc[0]
        evidence = (f"on {worst.name} ({int(worst.ranks):,} ranks) one rank moved "
                    f"{worst.most_bytes:,.0f} bytes and another {worst.least_bytes:,.0f}; the "
                    f"slowest rank spent {worst.slowest_s:,.1f} s on it against "
                    f"{worst.mean_s:,.1f} s on average"
                    + (f" ({len(by_bytes)} files like this)" if len(by_bytes) > 1 else ""))
        advice = ("split the data evenly (equal blocks per rank) or let collective MPI-IO "
                  "spread it over aggregators: the job waits for the rank with the most")
        mpiio = _data(run, "MPI-IO")
        above = mpiio[(mpiio.path == worst.name) & (mpiio["rank"] < 0)]
        if len(above):
            low, high = sorted(above[["fastest_rank_bytes", "slowest_rank_bytes"]].iloc[0])
            if high and (high - low) <= BYTES_IMBALANCE * high:
                evidence += (f"; at the MPI-IO layer the ranks' shares are even ({low:,.0f} to "
                             f"{high:,.0f} bytes), so the split below is collective I/O's")
                advice = ("the application splits evenly; ROMIO gave the POSIX work to few "
                          "aggregators (one per stripe by default on Lustre): stripe the file "
                          "over more OSTs or raise the cb_nodes hint")
        found.append(Finding(
            "rank-imbalance-bytes", "ranks given unequal shares of a file",
            float(by_bytes.cost_s.max()), evidence, advice,
            files=list(by_bytes.sort_values("cost_s", ascending=False).index[:TOP_FILES]),
            ranks=[int(worst.heavy_rank)],
            counters={"bytes of the heaviest rank": float(worst.most_bytes),
                      "bytes of the lightest rank": float(worst.least_bytes),
                      "seconds of the slowest rank": float(worst.slowest_s)}))
    if len(by_time):
        worst = by_time.iloc[0]
        at_posix = worst.layer == "POSIX"
        found.append(Finding(
            "rank-imbalance-time", "ranks slow on equal work", float(worst.cost_s),
            f"on {worst.name} ({int(worst.ranks):,} ranks) ranks moved about the same bytes "
            f"but the slowest spent {worst.slowest_s:,.1f} s in {worst.layer} calls against "
            f"{worst.mean_s:,.1f} s on average",
            "equal work taking unequal time points at the file system: check the file's "
            "striping (lfs getstripe) and whether some OSTs or nodes are slower" if at_posix
            else "equal work taking unequal time inside MPI-IO calls: the ranks waited there, "
                 "for locks or for one another, in turn (see the MPI-IO waits finding if it is "
                 "raised); collective calls on a parallel file system even the turns out",
            files=list(by_time.index[:TOP_FILES]),
            ranks=[int(worst.slow_rank)],
            counters={f"{'POSIX' if at_posix else 'MPIIO'}_F_SLOWEST_RANK_TIME": float(worst.slowest_s),
                      "mean seconds per rank": float(worst.mean_s)}))
    return found


def lustre(run: Run) -> list[Finding]:
    """slow-ost (one server slower than its peers) and few-stripes (a big shared file on too
    few OSTs), from the LUSTRE module's layouts."""
    if run.osts.empty:
        return []
    posix = _data(run, "POSIX")
    found = []
    per_file = posix.groupby("path").agg(bytes_read=("bytes_read", "sum"),
                                         bytes_written=("bytes_written", "sum"),
                                         read_s=("read_time_s", "sum"), write_s=("write_time_s", "sum"),
                                         ranks=("rank", "nunique"))
    per_file["bytes"] = per_file.bytes_read + per_file.bytes_written
    per_file["seconds"] = per_file.read_s + per_file.write_s
    # MPI-IO's view of the same file: where POSIX moved less than MPI-IO, Darshan ran out of
    # POSIX records (a partial log) and the file's POSIX rate means nothing.
    mpiio = _data(run, "MPI-IO")
    mpiio_bytes = (mpiio.bytes_read + mpiio.bytes_written).groupby(mpiio.path).sum()
    per_file["mpiio_bytes"] = mpiio_bytes.reindex(per_file.index).fillna(0)
    per_file["complete"] = per_file.bytes >= per_file.mpiio_bytes
    per_file["shared"] = (pd.concat([posix, mpiio])["rank"] < 0).groupby(
        pd.concat([posix, mpiio]).path).any().reindex(per_file.index).fillna(False)
    per_file["moved"] = per_file[["bytes", "mpiio_bytes"]].max(axis=1)
    placed = run.osts.merge(per_file, left_on="path", right_index=True)
    moving = placed[(placed.bytes > 0) & (placed.seconds > 0) & placed.complete].copy()
    moving["rate"] = moving.bytes / moving.seconds
    per_ost = moving.groupby("ost").rate.median()
    if len(per_ost) >= 4:
        typical = float(per_ost.median())
        slowest = int(per_ost.idxmin())
        if typical and per_ost[slowest] < SLOW_OST_SHARE * typical:
            on_it = moving[moving.ost == slowest]
            lost = (on_it.seconds - on_it.bytes / typical).clip(lower=0)
            records = posix[posix.path.isin(on_it.path)]
            expected = (records.bytes_read + records.bytes_written) / typical
            record_lost = (records.read_time_s + records.write_time_s - expected).clip(lower=0)
            found.append(Finding(
                "slow-ost", "a slow OST", busiest_rank_seconds(records, record_lost),
                f"the {len(on_it)} files on OST {slowest} moved data at a median "
                f"{per_ost[slowest] / 1024**2:,.1f} MiB/s, against {typical / 1024**2:,.1f} MiB/s "
                f"typical of the {len(per_ost)} OSTs; {lost.sum():,.1f} s lost over all ranks",
                "report it to your centre's support with the job id and OST; meanwhile stripe "
                "over more OSTs so no file depends on one server alone",
                files=list(on_it.sort_values("seconds", ascending=False).path[:TOP_FILES]),
                osts=[slowest], counters={"median MiB/s on the OST": per_ost[slowest] / 1024**2,
                                          "typical MiB/s": typical / 1024**2}))
    width = placed.groupby("path").ost.size()
    big = per_file[(per_file.shared | (per_file.ranks > 1)) & (per_file.moved >= FEW_STRIPES_MIN_BYTES)]
    narrow = big[width.reindex(big.index).fillna(0) == 1]
    if len(narrow):
        records = pd.concat([posix[posix.path.isin(narrow.index)], mpiio[mpiio.path.isin(narrow.index)]])
        records.attrs["processes"] = run.processes
        layer_cost = {layer: busiest_rank_seconds(part, part.read_time_s + part.write_time_s)
                      for layer, part in records.groupby("layer")}
        path = narrow.moved.idxmax()
        ost = int(placed.loc[placed.path == path, "ost"].iloc[0])
        ranks = run.processes if narrow.loc[path, "shared"] else int(narrow.loc[path, "ranks"])
        found.append(Finding(
            "few-stripes", "a shared file on one OST", max(layer_cost.values()),
            f"{path} ({narrow.loc[path, 'moved'] / 1e9:,.1f} GB, shared by {ranks:,} ranks) "
            f"lies on OST {ost} alone: every request queues on one server, and collective "
            "MPI-IO uses one aggregator per stripe"
            + (f" ({len(narrow)} files like this)" if len(narrow) > 1 else ""),
            "stripe it over many OSTs before writing (lfs setstripe -c -1, or -c 8..32, on "
            "its folder), and align each rank's block to the stripe size",
            files=list(narrow.sort_values("moved", ascending=False).index[:TOP_FILES]),
            osts=[ost], counters={"LUSTRE_STRIPE_WIDTH": 1.0,
                                  "bytes (POSIX or MPI-IO)": float(narrow.loc[path, "moved"])}))
    return found


def stdio(run: Run) -> list[Finding]:
    """Files moved in tiny fread/fwrite/fprintf calls: stdio's buffer is too small or flushed.
    Judged per file (one log file of 13-byte lines hides behind a big output file's mean);
    the stdio opens' time belongs to the metadata rule."""
    frame = _data(run, "STDIO")
    if frame.empty:
        return []
    requests = frame.reads + frame.writes
    moved = frame.bytes_read + frame.bytes_written
    per_file = pd.DataFrame({"requests": requests, "moved": moved}).groupby(frame.path).sum()
    tiny = per_file[(per_file.requests > 0)
                    & (per_file.moved < STDIO_SMALL_BYTES * per_file.requests)]
    if tiny.requests.sum() < MIN_COUNT:
        return []
    records = frame[frame.path.isin(tiny.index)]
    tiny["seconds"] = (records.read_time_s + records.write_time_s).groupby(records.path).sum()
    top = tiny.seconds.idxmax()
    return [Finding(
        "stdio", "tiny requests through stdio",
        busiest_rank_seconds(records, records.read_time_s + records.write_time_s),
        f"{tiny.requests.sum():,.0f} stdio reads and writes of {tiny.moved.sum() / tiny.requests.sum():,.0f} "
        f"bytes on average on {len(tiny)} file(s); {top}: {tiny.loc[top, 'requests']:,.0f} "
        f"requests of {tiny.loc[top, 'moved'] / tiny.loc[top, 'requests']:,.0f} bytes",
        "give each stream a large buffer (setvbuf, or open(..., buffering=1 << 20)), write "
        "whole records or blocks, and do not flush or reopen per line",
        files=list(tiny.sort_values("seconds", ascending=False).index[:TOP_FILES]),
        counters={"STDIO_WRITES + STDIO_READS": float(tiny.requests.sum()),
                  "STDIO_BYTES_WRITTEN + STDIO_BYTES_READ": float(tiny.moved.sum())})]


def rereads(run: Run) -> list[Finding]:
    posix = _data(run, "POSIX")
    if posix.empty:
        return []
    per_file = posix.groupby("path").agg(bytes_read=("bytes_read", "sum"),
                                         used=("max_byte_read", "max"),
                                         reads=("reads", "sum"))
    again = per_file[(per_file.used > 0) & (per_file.bytes_read > REREAD_FACTOR * per_file.used)
                     & ((per_file.bytes_read - per_file.used >= SMALL_BYTES)
                        | (per_file.reads >= MIN_COUNT))]
    if again.empty:
        return []
    records = posix[posix.path.isin(again.index)]
    spare = (1 - again.used / again.bytes_read).reindex(records.path).to_numpy()
    cost = busiest_rank_seconds(records, records.read_time_s * spare)
    top = again.bytes_read.idxmax()
    return [Finding(
        "reread", "the same data read again", cost,
        f"{len(again)} file(s) read at least {REREAD_FACTOR:.0f} times over; {top}: "
        f"{again.loc[top, 'bytes_read']:,.0f} bytes read of a {again.loc[top, 'used']:,.0f}-byte range",
        "read once and keep it in memory (or read on one rank and broadcast), or convert "
        "once to a format cheap to load",
        files=list(again.sort_values("bytes_read", ascending=False).index[:TOP_FILES]),
        counters={"POSIX_BYTES_READ": float(again.bytes_read.sum()),
                  "POSIX_MAX_BYTE_READ + 1": float(again.used.sum())})]


def syncs(run: Run) -> list[Finding]:
    posix = _data(run, "POSIX")
    if posix.empty:
        return []
    count, writes = posix.syncs.sum(), posix.writes.sum()
    if count < MIN_SYNCS or writes > WRITES_PER_SYNC * count:
        return []
    seconds = posix.sync_time_s.fillna(0) if posix.sync_time_s.notna().any() else posix.write_time_s
    return [Finding(
        "syncs", "a sync every few writes", busiest_rank_seconds(posix, seconds),
        f"{count:,.0f} fsync/fdatasync calls for {writes:,.0f} writes "
        f"(one per {_share(writes, count):,.1f} writes)",
        "sync once per batch, not per record: one transaction around many inserts "
        "(BEGIN ... COMMIT in SQLite), a checkpoint's fsync at its end only",
        files=_top(posix, posix.syncs),
        counters={_names(run, {"s": ("POSIX_FSYNCS + POSIX_FDSYNCS",
                                      "fsync, fdatasync and sync_file_range calls")})["s"]:
                  float(count),
                  "writes": float(writes)})]


def environment(run: Run) -> list[Finding]:
    """The software environment's files: imports and libraries, read by every rank."""
    frame = run.records[(run.records.origin == "environment") & (run.records.layer == "POSIX")]
    frame.attrs["processes"] = run.processes
    calls = frame.opens + frame.stats
    if calls.sum() < ENVIRONMENT_MIN_CALLS:
        return []
    seconds = frame.meta_time_s + frame.read_time_s
    return [Finding(
        "environment", "your environment's import cost", busiest_rank_seconds(frame, seconds),
        f"{calls.sum():,.0f} opens and lookups on {frame.path.nunique():,} files of the "
        f"software environment (interpreter, libraries, site-packages), "
        f"{seconds.sum():,.2f} s over all ranks",
        "start from a container image or squashfs, or copy the environment to node-local "
        "disk: every rank's imports are metadata round trips on a shared file system",
        files=_top(frame, calls), counters={"opens": float(frame.opens.sum()),
                                            "lookups": float(frame.stats.sum())})]


def stalled_requests(run: Run) -> list[Finding]:
    """Single small requests that took seconds: they waited, for a lock or a server.

    Darshan keeps each record's slowest read and write with its size (a trace, each call's
    time). The cost is a lower bound: per rank, the sum of its stalled requests' seconds
    (one per record), and a shared record's stall is one rank's."""
    posix = _data(run, "POSIX")
    found = []
    for side in ("read", "write"):
        seconds, size = posix[f"slowest_{side}_s"], posix[f"slowest_{side}_bytes"]
        stalled = posix[(seconds >= STALL_S) & (size <= SMALL_BYTES)]
        if stalled.empty:
            continue
        worst = stalled.loc[stalled[f"slowest_{side}_s"].idxmax()]
        per_rank = stalled[stalled["rank"] >= 0]
        own = per_rank[f"slowest_{side}_s"].groupby(per_rank["rank"]).sum()
        shared = stalled.loc[stalled["rank"] < 0, f"slowest_{side}_s"]
        cost = max(own.max() if len(own) else 0.0, shared.max() if len(shared) else 0.0)
        where = f"rank {int(worst['rank'])}" if worst["rank"] >= 0 else "one rank"
        proof = _names(run, {"s": (f"POSIX_F_MAX_{side.upper()}_TIME",
                                   f"the slowest {side} call's time (strace -T)"),
                             "b": (f"POSIX_MAX_{side.upper()}_TIME_SIZE", "its size")})
        found.append(Finding(
            f"stalled-{side}s", f"{side}s of a MiB or less that took seconds",
            cost,
            f"{len(stalled):,} record(s) whose slowest {side} moved at most 1 MiB yet took at "
            f"least {STALL_S:.0f} s; the worst: {worst[f'slowest_{side}_bytes']:,.0f} bytes in "
            f"{worst[f'slowest_{side}_s']:,.2f} s, {where}, on {worst['path']}",
            "a small request needs milliseconds from any disk, so these waited: for a lock "
            "(small pieces of a file that other ranks write in bulk: on Lustre, extent locks "
            "per stripe), for a busy server, or for the client's cache to drain; write the "
            "small pieces from one rank or to a file of their own, aligned to the stripe, "
            "and if it recurs on one server, tell your centre",
            files=_top(stalled, stalled[f"slowest_{side}_s"]),
            ranks=[int(r) for r in own.sort_values(ascending=False).index[:TOP_FILES]],
            counters={proof["s"]: float(worst[f"slowest_{side}_s"]),
                      proof["b"]: float(worst[f"slowest_{side}_bytes"]),
                      "records": float(len(stalled))}))
    return found


MPIIO_WAIT_FIX = {
    "nfs": "on NFS, ROMIO wraps its reads and writes in fcntl byte-range locks (MPICH's NFS "
           "driver, ad_nfs_read.c and ad_nfs_write.c), so the ranks queue at the lock "
           "server: put files written through MPI-IO on the parallel file system or on "
           "node-local disk, or write with collective calls (MPI_File_write_all) so that a "
           "few aggregators take few locks for large pieces",
    "": "the library waited, not the disk: atomic mode (MPI_File_set_atomicity) locks every "
        "access, a sync after every write waits for the server, and ranks can wait for one "
        "another inside a call; use non-atomic mode, sync once at the end, and collective "
        "calls on a parallel file system",
}


def _requests_within(requests: pd.DataFrame, path: str, side: str) -> pd.DataFrame:
    """DXT: each MPI-IO request on `path` in direction `side` with the POSIX requests it
    made (same rank, inside its interval): seconds before the first began and after the
    last ended."""
    mine = requests[(requests.path == path) & (requests.operation == side)]
    above = mine[mine.layer == "MPIIO"].sort_values("start_s")
    below = mine[mine.layer == "POSIX"].sort_values("start_s")
    if above.empty or below.empty:
        return pd.DataFrame(columns=["before_s", "after_s"])
    above = above.assign(call=np.arange(len(above)), call_start=above.start_s,
                         call_end=above.end_s)
    inner = pd.merge_asof(below, above[["rank", "call", "call_start", "call_end"]],
                          left_on="start_s", right_on="call_start", by="rank")
    inner = inner[inner.end_s <= inner.call_end]
    per_call = inner.groupby("call").agg(first=("start_s", "min"), last=("end_s", "max"),
                                         call_start=("call_start", "first"),
                                         call_end=("call_end", "first"))
    return pd.DataFrame({"before_s": per_call["first"] - per_call.call_start,
                         "after_s": per_call.call_end - per_call["last"]})


def _most_at_once(requests: pd.DataFrame) -> int:
    """The most requests in flight at one moment (a sweep over their starts and ends)."""
    if requests.empty:
        return 0
    times = np.concatenate([requests.start_s.to_numpy(), requests.end_s.to_numpy()])
    steps = np.concatenate([np.ones(len(requests)), -np.ones(len(requests))])
    order = np.lexsort((steps, times))  # at a tie, an end comes before a start
    return int(np.cumsum(steps[order]).max())


def mpiio_waits(run: Run) -> list[Finding]:
    """Independent MPI-IO calls that took far longer than the POSIX calls they made: the time
    went to waiting inside the library (locks, syncs, other ranks), not to the file system.

    Per file, rank and direction: the MPI-IO seconds minus the POSIX seconds of the same file
    and rank (Darshan times both layers), on records without a collective call (a collective
    call also exchanges data between ranks, which is no wait, and Darshan does not split its
    time from the independent calls'). DXT, where the log has it, shows when in each call
    the wait came and how many POSIX requests were ever in flight at once."""
    mpiio, posix = _data(run, "MPI-IO"), _data(run, "POSIX")
    if mpiio.empty or posix.empty:
        return []
    below = posix.groupby(["path", "rank"])[["read_time_s", "write_time_s"]].sum()
    found = []
    for side in ("read", "write"):
        seconds = f"{side}_time_s"
        independent = mpiio[(mpiio[f"{side}s"] > 0) & (mpiio.collective == 0)]
        pairs = independent.join(below[[seconds]].add_suffix("_posix"), on=["path", "rank"],
                                 how="inner")
        if pairs.empty:
            continue
        wait = (pairs[seconds] - pairs[f"{seconds}_posix"]).clip(lower=0)
        if (wait.sum() < LIBRARY_WAIT_SHARE * pairs[seconds].sum()
                or wait.sum() < WAIT_PER_CALL_S * pairs[f"{side}s"].sum()):
            continue
        pairs.attrs["processes"] = run.processes
        worst_path = wait.groupby(pairs.path).sum().idxmax()
        on_file = pairs[pairs.path == worst_path]
        ranks = on_file[on_file["rank"] >= 0]
        shown = ranks if len(ranks) else on_file
        spans = {layer: (shown[column].min(), shown[column].max())
                 for layer, column in (("MPI-IO", seconds), ("POSIX", f"{seconds}_posix"))}
        share = wait[on_file.index].sum() / on_file[seconds].sum()
        proof = _names(run, {"mpi": (f"MPIIO_F_{side.upper()}_TIME", "MPI-IO seconds"),
                             "posix": (f"POSIX_F_{side.upper()}_TIME", "POSIX seconds")})
        per = "per rank" if len(ranks) else "in all"
        evidence = (f"{side}s through MPI-IO on {worst_path} took {spans['MPI-IO'][0]:,.2f} to "
                    f"{spans['MPI-IO'][1]:,.2f} s {per} ({proof['mpi']}), the POSIX {side}s "
                    f"beneath them {spans['POSIX'][0]:,.3f} to {spans['POSIX'][1]:,.3f} s "
                    f"({proof['posix']}): {share:.0%} of the MPI-IO time was spent in the "
                    "library, not in the file system")
        counters = {proof["mpi"]: float(on_file[seconds].sum()),
                    proof["posix"]: float(on_file[f"{seconds}_posix"].sum())}
        traced = run.requests() if "DXT_MPIIO" in run.modules else pd.DataFrame()
        if len(traced):
            calls = _requests_within(traced, worst_path, side)
            at_once = _most_at_once(traced[(traced.path == worst_path)
                                           & (traced.operation == side)
                                           & (traced.layer == "POSIX")])
            if len(calls):
                evidence += (f"; DXT: in the median MPI-IO {side} the POSIX {side} began "
                             f"{calls.before_s.median():,.2f} s after the call and the call "
                             f"returned {calls.after_s.median():,.2f} s after it ended; at most "
                             f"{at_once} POSIX {side}(s) of its {on_file['rank'].nunique()} "
                             "rank record(s) were in flight at any moment")
                counters.update({"DXT median seconds before the POSIX call": float(calls.before_s.median()),
                                 "DXT most POSIX requests at once": float(at_once)})
        kind = run.file_system(worst_path)
        found.append(Finding(
            f"mpiio-{side}-waits", f"MPI-IO {side}s waiting above the file system",
            busiest_rank_seconds(pairs, wait), evidence + (f" (file system: {kind})" if kind else ""),
            MPIIO_WAIT_FIX.get(kind, MPIIO_WAIT_FIX[""]),
            files=_top(pairs, wait),
            ranks=[int(r) for r in wait[pairs["rank"] >= 0].groupby(pairs["rank"]).sum()
                   .sort_values(ascending=False).index[:TOP_FILES]],
            counters=counters))
    return found


WAIT_FOR_IO_FIX = (
    "the job runs at the pace of the ranks doing its I/O, so the findings on their files are "
    "where its time goes; then spread the I/O over more ranks (more MPI-IO aggregators: the "
    "cb_nodes hint; more writers) or take it off the others' path (dedicated I/O ranks, or "
    "asynchronous I/O such as HDF5's asynchronous VOL connector)")


def rank_io_seconds(run: Run) -> pd.Series:
    """Per rank of run.mpi, its seconds in POSIX and STDIO calls on the application's files,
    from its own records (0 for a rank with none)."""
    data = run.data()
    data = data[data.layer.isin(("POSIX", "STDIO")) & (data["rank"] >= 0)]
    seconds = data.read_time_s + data.write_time_s + data.meta_time_s
    return seconds.groupby(data["rank"].astype("int64")).sum().reindex(
        run.mpi["rank"].astype("int64"), fill_value=0.0)


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
    evidence = (f"{int((~heavy).sum())} of {len(ranks)} ranks did "
                + ("no I/O of their own" if little < 0.05 else f"at most {little:,.1f} s of I/O")
                + " and waited a median "
                f"{others_wait:,.0f} s in MPI_Barrier and MPI_Wait calls, against "
                f"{io_wait:,.0f} s for the {int(heavy.sum())} ranks on {nodes} node(s) that "
                f"did the I/O ({io_ranks.median():,.0f} s of POSIX and STDIO time each, median); "
                f"across the ranks, the waiting falls as the I/O time rises (r = {r:.2f}): the "
                "others were waiting for the I/O ranks")
    return [Finding(
        "ranks-wait-for-io", "ranks waiting in MPI for the ranks doing I/O",
        float(others_wait - io_wait), evidence, WAIT_FOR_IO_FIX,
        files=_top(on_io_ranks, on_io_ranks.read_time_s + on_io_ranks.write_time_s
                   + on_io_ranks.meta_time_s),
        ranks=[int(rank) for rank in io_ranks.index[:TOP_FILES]],
        counters={"MPI_BARRIER_TOTAL_TIME + MPI_WAIT*_TOTAL_TIME, median of the other ranks":
                  float(others_wait),
                  "MPI_BARRIER_TOTAL_TIME + MPI_WAIT*_TOTAL_TIME, median of the I/O ranks":
                  float(io_wait),
                  "POSIX_F_*_TIME + STDIO_F_*_TIME, median of the I/O ranks":
                  float(io_ranks.median()),
                  "correlation of I/O and MPI waiting across ranks": r})]


RULES = (direction_rules, misaligned, metadata, independent_mpiio, mpiio_waits, rank_imbalance,
         lustre, stdio, rereads, syncs, environment, stalled_requests, ranks_wait_for_io)

#: Every rule id a finding can carry: stable, as scripts and dashboards key on them (the
#: JSON report's "rule"; lesson 12 lists them). A rule renamed keeps its old id.
RULE_IDS = ("small-reads", "small-writes", "random-reads", "random-writes", "misaligned",
            "metadata", "no-collective-mpiio", "mpiio-read-waits", "mpiio-write-waits",
            "rank-imbalance-bytes", "rank-imbalance-time", "slow-ost", "few-stripes", "stdio",
            "reread", "syncs", "environment", "stalled-reads", "stalled-writes",
            "ranks-wait-for-io")


def minor_line(run: Run) -> float:
    """The cost under which a finding is minor: 1 % of the run, and at least a second."""
    return max(MINOR_SHARE * run.run_time_s, MINOR_S)


def diagnose(run: Run) -> list[Finding]:
    """Every rule's findings, the costliest first; minor ones after, marked."""
    found = [finding for rule in RULES for finding in rule(run)]
    floor = minor_line(run)
    for finding in found:
        # plain float and bool, not numpy's: a report's JSON has numbers and true/false
        finding.cost_s = float(finding.cost_s)
        if run.run_time_s > 0:  # more than the run means threads overlapped: count it once
            finding.cost_s = min(finding.cost_s, float(run.run_time_s))
        finding.minor = bool(finding.cost_s < floor)
    return sorted(found, key=lambda f: (f.minor, -f.cost_s))
