"""MPI-IO: independent requests that collective calls would combine (the fix named at the
layer the program calls: MPI-IO, HDF5 or PnetCDF), time spent waiting inside the library
above the POSIX calls it made, ROMIO's reads of blocks before writing them back, and
collective calls whose own time, above the file system, costs most."""

from __future__ import annotations

import numpy as np
import pandas as pd

from iolab.diagnosis.facts import Run
from iolab.diagnosis.rules import storage
from iolab.diagnosis.rules.base import (
    MAJOR_SHARE,
    MIN_COUNT,
    TOP_FILES,
    Finding,
    busiest_rank_seconds,
    by_side,
    charged,
    layer_records,
    library_read_backs,
    proof_names,
    share_of,
    top_paths,
)

INDEPENDENT_SHARE = 0.50  # Drishti: collective_operations
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


def _library_proof(run: Run, library: str, independent: float) -> tuple[str, str, dict]:
    """The fix, a note for the evidence, and the library's own counters.

    PnetCDF counts its independent and collective requests. HDF5 flags each dataset that used
    collective MPI-IO (H5D_USE_MPIIO_COLLECTIVE): where every dataset did, and the independent
    MPI-IO operations outnumber all the datasets' requests, they are HDF5's own metadata I/O,
    which H5Pset_dxpl_mpio does not make collective."""
    if library == "PnetCDF":
        var = layer_records(run, "PNETCDF_VAR")
        requests = var.reads + var.writes
        return (
            COLLECTIVE_FIX[library],
            "",
            {
                "PNETCDF_VAR_INDEP_*": float((requests - var.collective).sum()),
                "PNETCDF_VAR_COLL_*": float(var.collective.sum()),
            },
        )
    if library == "HDF5":
        datasets = layer_records(run, "H5D")
        collective = float((datasets.collective > 0).sum())
        requests = float((datasets.reads + datasets.writes).sum())
        counters = {
            "H5D datasets": float(len(datasets)),
            "H5D_USE_MPIIO_COLLECTIVE": collective,
            "H5D_READS + H5D_WRITES": requests,
        }
        if len(datasets) and collective == len(datasets) and independent > requests:
            return (
                COLLECTIVE_FIX["HDF5 metadata"],
                (
                    f"; every dataset already used collective MPI-IO, and its {requests:,.0f} "
                    "requests cannot account for them: they are HDF5's metadata I/O"
                ),
                counters,
            )
        return COLLECTIVE_FIX[library], "", counters
    return COLLECTIVE_FIX[library], "", {}


def independent_mpiio(run: Run) -> list[Finding]:
    """Independent MPI-IO where collective calls would combine the ranks' requests; the fix
    is named at the layer the application calls (MPI-IO, HDF5 or PnetCDF)."""
    if run.processes < 2:  # one process: nothing to combine
        return []
    mpiio = layer_records(run, "MPI-IO")
    if mpiio.empty:
        return []
    requests = mpiio.reads + mpiio.writes
    indep = requests - mpiio.collective
    if indep.sum() < MIN_COUNT or share_of(indep.sum(), requests.sum()) <= INDEPENDENT_SHARE:
        return []
    alone = (indep / requests.where(requests > 0)).fillna(0)
    files = top_paths(mpiio, indep)
    cost, claims = charged(mpiio, read=mpiio.read_time_s * alone, write=mpiio.write_time_s * alone)
    library = storage.library_of(run, files)
    fix, note, proof = _library_proof(run, library, float(indep.sum()))
    through = f", through {library}" if library != "MPI-IO" else ""
    return [
        Finding(
            "no-collective-mpiio",
            f"independent MPI-IO{through}",
            cost,
            f"{indep.sum():,.0f} of {requests.sum():,.0f} MPI-IO operations "
            f"({share_of(indep.sum(), requests.sum()):.0%}) are independent{through}{note}",
            fix,
            files=files,
            counters={
                "MPIIO_INDEP_*": float(indep.sum()),
                "MPIIO_COLL_*": float(mpiio.collective.sum()),
                **proof,
            },
            cost_formula="the busiest rank's MPI-IO read and write seconds times the share of "
            "its operations that are independent",
            claims=claims,
        )
    ]


#: The lab's own (Drishti compares no layers): independent MPI-IO time of which at least this
#: share lies above the POSIX calls the library made, at least WAIT_PER_CALL_S per call on
#: average, was spent waiting in the library (its own work per call takes microseconds).
LIBRARY_WAIT_SHARE = 0.5
WAIT_PER_CALL_S = 0.001


def _requests_within(requests: pd.DataFrame, path: str, side: str) -> pd.DataFrame:
    """DXT: each MPI-IO request on `path` in direction `side` with the POSIX requests it
    made (same rank, inside its interval): seconds before the first began and after the
    last ended."""
    mine = requests[(requests.path == path) & (requests.operation == side)]
    above = mine[mine.layer == "MPIIO"].sort_values("start_s")
    below = mine[mine.layer == "POSIX"].sort_values("start_s")
    if above.empty or below.empty:
        return pd.DataFrame(columns=["before_s", "after_s"])
    above = above.assign(call=np.arange(len(above)), call_start=above.start_s, call_end=above.end_s)
    inner = pd.merge_asof(
        below,
        above[["rank", "call", "call_start", "call_end"]],
        left_on="start_s",
        right_on="call_start",
        by="rank",
    )
    inner = inner[inner.end_s <= inner.call_end]
    per_call = inner.groupby("call").agg(
        first=("start_s", "min"),
        last=("end_s", "max"),
        call_start=("call_start", "first"),
        call_end=("call_end", "first"),
    )
    return pd.DataFrame(
        {
            "before_s": per_call["first"] - per_call.call_start,
            "after_s": per_call.call_end - per_call["last"],
        }
    )


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
    mpiio, posix = layer_records(run, "MPI-IO"), layer_records(run, "POSIX")
    if mpiio.empty or posix.empty:
        return []
    below = posix.groupby(["path", "rank"])[["read_time_s", "write_time_s"]].sum()
    found = []
    for side in ("read", "write"):
        seconds = f"{side}_time_s"
        independent = mpiio[(mpiio[f"{side}s"] > 0) & (mpiio.collective == 0)]
        pairs = independent.join(
            below[[seconds]].add_suffix("_posix"), on=["path", "rank"], how="inner"
        )
        if pairs.empty:
            continue
        wait = (pairs[seconds] - pairs[f"{seconds}_posix"]).clip(lower=0)
        if (
            wait.sum() < LIBRARY_WAIT_SHARE * pairs[seconds].sum()
            or wait.sum() < WAIT_PER_CALL_S * pairs[f"{side}s"].sum()
        ):
            continue
        pairs.attrs["processes"] = run.processes
        worst_path = wait.groupby(pairs.path).sum().idxmax()
        on_file = pairs[pairs.path == worst_path]
        ranks = on_file[on_file["rank"] >= 0]
        shown = ranks if len(ranks) else on_file
        spans = {
            layer: (shown[column].min(), shown[column].max())
            for layer, column in (("MPI-IO", seconds), ("POSIX", f"{seconds}_posix"))
        }
        share = wait[on_file.index].sum() / on_file[seconds].sum()
        proof = proof_names(
            run,
            {
                "mpi": (f"MPIIO_F_{side.upper()}_TIME", "MPI-IO seconds"),
                "posix": (f"POSIX_F_{side.upper()}_TIME", "POSIX seconds"),
            },
        )
        per = "per rank" if len(ranks) else "in all"
        evidence = (
            f"{side}s through MPI-IO on {worst_path} took {spans['MPI-IO'][0]:,.2f} to "
            f"{spans['MPI-IO'][1]:,.2f} s {per} ({proof['mpi']}), the POSIX {side}s "
            f"beneath them {spans['POSIX'][0]:,.3f} to {spans['POSIX'][1]:,.3f} s "
            f"({proof['posix']}): {share:.0%} of the MPI-IO time was spent in the "
            "library, not in the file system"
        )
        counters = {
            proof["mpi"]: float(on_file[seconds].sum()),
            proof["posix"]: float(on_file[f"{seconds}_posix"].sum()),
        }
        traced = run.requests() if "DXT_MPIIO" in run.modules else pd.DataFrame()
        if len(traced):
            calls = _requests_within(traced, worst_path, side)
            at_once = _most_at_once(
                traced[
                    (traced.path == worst_path)
                    & (traced.operation == side)
                    & (traced.layer == "POSIX")
                ]
            )
            if len(calls):
                evidence += (
                    f"; DXT: in the median MPI-IO {side} the POSIX {side} began "
                    f"{calls.before_s.median():,.2f} s after the call and the call "
                    f"returned {calls.after_s.median():,.2f} s after it ended; at most "
                    f"{at_once} POSIX {side}(s) of its {on_file['rank'].nunique()} "
                    "rank record(s) were in flight at any moment"
                )
                counters.update(
                    {
                        "DXT median seconds before the POSIX call": float(calls.before_s.median()),
                        "DXT most POSIX requests at once": float(at_once),
                    }
                )
        kind = storage.kind_of(run, worst_path)
        cost, claims = charged(pairs, **{side: wait})
        found.append(
            Finding(
                f"mpiio-{side}-waits",
                f"MPI-IO {side}s waiting above the file system",
                cost,
                evidence + (f" (file system: {storage.KIND_NAMES[kind]})" if kind else ""),
                storage.MPIIO_WAITS.get(kind, storage.MPIIO_WAITS[""]),
                files=top_paths(pairs, wait),
                ranks=[
                    int(r)
                    for r in wait[pairs["rank"] >= 0]
                    .groupby(pairs["rank"])
                    .sum()
                    .sort_values(ascending=False)
                    .index[:TOP_FILES]
                ],
                counters=counters,
                cost_formula=f"the busiest rank's MPI-IO {side} seconds less its POSIX {side} "
                "seconds on the same file, on files without a collective call",
                claims=claims,
            )
        )
    return found


#: What to change where ROMIO read blocks back before writing them, by how the file was
#: written. Sources: ROMIO's two-phase write (adio/common/ad_write_coll.c reads a file
#: domain that has holes before writing it) and data sieving (ad_write_str.c; the
#: romio_ds_write hint, ind_wr_buffer_size 512 KiB by default).
READ_BACK_FIX = {
    "collective": "ROMIO's collective write reads an aggregator's whole file domain before "
    "writing it whenever the ranks' pieces leave holes in it: let each collective call cover "
    "contiguous ranges (all of a record's variables in one call: in PnetCDF an ncmpi_iput_vara "
    "for each and one ncmpi_wait_all; in MPI-IO one call over a file view of them all), so "
    "no domain has holes to read",
    "independent": "ROMIO's data sieving reads a block around independent non-contiguous "
    "pieces, fills them in and writes the block back: write collectively (MPI_File_write_all), "
    "or, where each piece is large, switch it off with the romio_ds_write=disable hint",
}


def read_modify_write(run: Run) -> list[Finding]:
    """POSIX reads of files the application only wrote through MPI-IO: ROMIO read each block
    before writing it back. The cost is those reads' time on the busiest rank, which writing
    whole ranges saves; the bytes written beyond what MPI-IO was given are named, not
    charged (some of them are the data itself, rewritten)."""
    files = library_read_backs(run)
    if not files:
        return []
    posix = layer_records(run, "POSIX")
    rows = posix[posix.path.isin(files)]
    above = layer_records(run, "MPI-IO")
    above = above[above.path.isin(files)]
    given, written = float(above.bytes_written.sum()), float(rows.bytes_written.sum())
    reads, read_bytes = float(rows.reads.sum()), float(rows.bytes_read.sum())
    collective = above.collective.sum() > above.writes.sum() / 2
    top = top_paths(rows, rows.read_time_s)
    cost, claims = charged(rows, read=rows.read_time_s)
    returned = (
        "all of them past the end of the file, returning 0 bytes"
        if read_bytes == 0
        else f"{read_bytes:,.0f} bytes"
    )
    return [
        Finding(
            "read-modify-write",
            "blocks read back before writing (ROMIO's "
            + ("collective buffering" if collective else "data sieving")
            + ")",
            cost,
            f"the application only wrote {len(files)} file(s) through MPI-IO "
            f"({given:,.0f} bytes, nothing read), yet POSIX read them {reads:,.0f} times "
            f"({returned}) and wrote {written:,.0f} bytes, "
            f"{share_of(written, given):,.1f} times what MPI-IO was given; the cost is those "
            f"reads' seconds on the busiest rank (POSIX_F_READ_TIME), {cost:,.1f} s",
            READ_BACK_FIX["collective" if collective else "independent"],
            files=top or files[:TOP_FILES],
            counters={
                "MPIIO_BYTES_WRITTEN": given,
                "MPIIO_BYTES_READ": 0.0,
                "POSIX_READS": reads,
                "POSIX_BYTES_READ": read_bytes,
                "POSIX_BYTES_WRITTEN": written,
                "POSIX_F_READ_TIME": float(rows.read_time_s.sum()),
            },
            cost_formula="the busiest rank's POSIX read seconds on files only written through "
            "MPI-IO",
            claims=claims,
        )
    ]


#: The lab's own: collective MPI-IO time on a file's slowest rank worth at least MAJOR_SHARE
#: of the run, of which at least ABOVE_POSIX_SHARE lies above the POSIX calls of the file's
#: slowest POSIX rank, was spent in the library: exchanging the ranks' pieces and waiting for
#: the aggregators. The POSIX records must hold at least COVERED_SHARE of the bytes MPI-IO
#: moved (a partial POSIX module, or a file the aggregators' records lost, cannot be compared).
ABOVE_POSIX_SHARE = 0.5
COVERED_SHARE = 0.9
#: What to change where the collective calls themselves cost most.
COLLECTIVE_TIME_FIX = (
    "the collective calls spent their time above the file system, in the exchange between "
    "ranks and in the ranks waiting for the aggregators: give the file-system work to more "
    "aggregators ({aggregators}), and overlap the I/O with computing (split collectives, "
    "MPI_File_write_all_begin and _end, or HDF5's asynchronous VOL connector)"
)


def _slowest_rank_seconds(records: pd.DataFrame) -> tuple[float, float, pd.Index]:
    """A file's slowest and fastest rank's seconds in all its calls, and the records of the
    slowest: a shared record's extremes, or per-rank records' sums."""
    shared = records[records["rank"] < 0]
    if len(shared):
        return (
            float(shared.slowest_rank_s.max()),
            float(shared.fastest_rank_s.min()),
            shared.index[shared.slowest_rank_s.fillna(-1.0).to_numpy().argmax() :][:1],
        )
    seconds = (
        (records.read_time_s + records.write_time_s + records.meta_time_s)
        .groupby(records["rank"])
        .sum()
    )
    slowest = records.index[records["rank"] == seconds.idxmax()]
    return float(seconds.max()), float(seconds.min()), slowest


def collective_time(run: Run) -> list[Finding]:
    """Files mostly moved by collective MPI-IO calls that took a large share of the run,
    mostly above the POSIX calls they made: the layer that costs most is MPI-IO itself, and
    a POSIX finding beneath it explains only the part the file system took. The cost is the
    slowest rank's MPI-IO seconds less the slowest POSIX rank's seconds on the same file."""
    mpiio, posix = layer_records(run, "MPI-IO"), layer_records(run, "POSIX")
    if mpiio.empty or posix.empty or run.run_time_s <= 0:
        return []
    rows = []
    # Files mostly written or read by collective calls: independent ones are the other rules'.
    mostly = mpiio.collective.groupby(mpiio.path).sum() > (
        (mpiio.reads + mpiio.writes).groupby(mpiio.path).sum() / 2
    )
    for path, above in mpiio[mpiio.path.isin(mostly[mostly].index)].groupby("path"):
        below = posix[posix.path == path]
        given = float((above.bytes_read + above.bytes_written).sum())
        moved = float((below.bytes_read + below.bytes_written).sum())
        if below.empty or moved < COVERED_SHARE * given:
            continue
        slowest, fastest, where = _slowest_rank_seconds(above)
        beneath = busiest_rank_seconds(
            below, below.read_time_s + below.write_time_s + below.meta_time_s
        )
        # The slowest rank's records carry the cost, in proportion to their seconds.
        held = above.loc[where, ["read_time_s", "write_time_s", "meta_time_s"]].sum(axis=1)
        share = held / held.sum() if held.sum() > 0 else held
        claims = pd.DataFrame(by_side(above.loc[where], (slowest - beneath) * share))
        rows.append((str(path), slowest, fastest, beneath, slowest - beneath, claims))
    big = [
        row
        for row in rows
        if row[1] >= MAJOR_SHARE * run.run_time_s and row[4] >= ABOVE_POSIX_SHARE * row[1]
    ]
    if not big:
        return []
    path, slowest, fastest, beneath, above_s, claims = max(big, key=lambda row: row[4])
    kind = storage.kind_of(run, path)
    return [
        Finding(
            "collective-mpiio-time",
            "collective MPI-IO calls costing most above the file system",
            above_s,
            f"collective MPI-IO on {path} took {slowest:,.1f} s on its slowest rank "
            f"({share_of(slowest, run.run_time_s):.0%} of the run; every rank at least "
            f"{fastest:,.1f} s), the POSIX calls beneath it at most {beneath:,.1f} s on any "
            f"rank: {above_s:,.1f} s (the cost: MPI-IO's slowest rank less POSIX's) went to "
            "the library, not the file system"
            + (f" ({len(big)} files like this)" if len(big) > 1 else ""),
            COLLECTIVE_TIME_FIX.format(
                aggregators=storage.AGGREGATORS.get(kind, storage.AGGREGATORS[""])
            ),
            files=[row[0] for row in sorted(big, key=lambda row: -row[4])][:TOP_FILES],
            counters={
                "MPIIO_F_SLOWEST_RANK_TIME": slowest,
                "MPIIO_F_FASTEST_RANK_TIME": fastest,
                "POSIX seconds of the slowest POSIX rank": beneath,
            },
            cost_formula="the file's slowest rank's MPI-IO seconds less the slowest POSIX "
            "rank's seconds on it",
            claims=claims,
        )
    ]
