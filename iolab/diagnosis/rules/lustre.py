"""Lustre layouts, from the LUSTRE module: one OST slower than its peers is a slow server, not
a slow program; a big file shared by ranks on a single OST queues every request on it."""

from __future__ import annotations

import pandas as pd

from iolab.diagnosis.facts import Run
from iolab.diagnosis.rules.base import TOP_FILES, Finding, by_side, charged, layer_records

#: The lab's own (Drishti has no per-OST rule): an OST whose files ran at less than this share
#: of the typical OST's median rate is a slow server, not a slow program.
SLOW_OST_SHARE = 0.5
#: The lab's own: a file shared by ranks that moved at least this much on a single OST.
FEW_STRIPES_MIN_BYTES = 1024**3


def lustre(run: Run) -> list[Finding]:
    """slow-ost (one server slower than its peers) and few-stripes (a big shared file on too
    few OSTs), from the LUSTRE module's layouts."""
    if run.osts.empty:
        return []
    posix = layer_records(run, "POSIX")
    found = []
    per_file = posix.groupby("path").agg(
        bytes_read=("bytes_read", "sum"),
        bytes_written=("bytes_written", "sum"),
        read_s=("read_time_s", "sum"),
        write_s=("write_time_s", "sum"),
        ranks=("rank", "nunique"),
    )
    per_file["bytes"] = per_file.bytes_read + per_file.bytes_written
    per_file["seconds"] = per_file.read_s + per_file.write_s
    # MPI-IO's view of the same file: where POSIX moved less than MPI-IO, Darshan ran out of
    # POSIX records (a partial log) and the file's POSIX rate means nothing.
    mpiio = layer_records(run, "MPI-IO")
    mpiio_bytes = (mpiio.bytes_read + mpiio.bytes_written).groupby(mpiio.path).sum()
    per_file["mpiio_bytes"] = mpiio_bytes.reindex(per_file.index).fillna(0)
    per_file["complete"] = per_file.bytes >= per_file.mpiio_bytes
    per_file["shared"] = (
        (pd.concat([posix, mpiio])["rank"] < 0)
        .groupby(pd.concat([posix, mpiio]).path)
        .any()
        .reindex(per_file.index)
        .fillna(False)
    )
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
            cost, claims = charged(records, **by_side(records, record_lost, ("read", "write")))
            found.append(
                Finding(
                    "slow-ost",
                    "a slow OST",
                    cost,
                    f"the {len(on_it)} files on OST {slowest} moved data at a median "
                    f"{per_ost[slowest] / 1024**2:,.1f} MiB/s, against "
                    f"{typical / 1024**2:,.1f} MiB/s typical of the {len(per_ost)} OSTs; "
                    f"{lost.sum():,.1f} s lost over all ranks",
                    "report it to your centre's support with the job id and OST; meanwhile stripe "
                    "over more OSTs so no file depends on one server alone",
                    files=list(on_it.sort_values("seconds", ascending=False).path[:TOP_FILES]),
                    osts=[slowest],
                    counters={
                        "median MiB/s on the OST": per_ost[slowest] / 1024**2,
                        "typical MiB/s": typical / 1024**2,
                    },
                    cost_formula="per rank, its seconds on the OST's files less what they would "
                    "take at the typical OST's rate, on the busiest rank",
                    claims=claims,
                )
            )
    width = placed.groupby("path").ost.size()
    big = per_file[
        (per_file.shared | (per_file.ranks > 1)) & (per_file.moved >= FEW_STRIPES_MIN_BYTES)
    ]
    narrow = big[width.reindex(big.index).fillna(0) == 1]
    if len(narrow):
        records = pd.concat(
            [posix[posix.path.isin(narrow.index)], mpiio[mpiio.path.isin(narrow.index)]]
        )
        records.attrs["processes"] = run.processes
        layer_cost = {
            layer: charged(part, read=part.read_time_s, write=part.write_time_s)
            for layer, part in records.groupby("layer")
        }
        cost, claims = max(layer_cost.values(), key=lambda pair: pair[0])
        path = narrow.moved.idxmax()
        ost = int(placed.loc[placed.path == path, "ost"].iloc[0])
        ranks = run.processes if narrow.loc[path, "shared"] else int(narrow.loc[path, "ranks"])
        found.append(
            Finding(
                "few-stripes",
                "a shared file on one OST",
                cost,
                f"{path} ({narrow.loc[path, 'moved'] / 1e9:,.1f} GB, shared by {ranks:,} ranks) "
                f"lies on OST {ost} alone: every request queues on one server, and collective "
                "MPI-IO uses one aggregator per stripe"
                + (f" ({len(narrow)} files like this)" if len(narrow) > 1 else ""),
                "stripe it over many OSTs before writing (lfs setstripe -c -1, or -c 8..32, on "
                "its folder), and align each rank's block to the stripe size",
                files=list(narrow.sort_values("moved", ascending=False).index[:TOP_FILES]),
                osts=[ost],
                counters={
                    "LUSTRE_STRIPE_WIDTH": 1.0,
                    "bytes (POSIX or MPI-IO)": float(narrow.loc[path, "moved"]),
                },
                cost_formula="the busiest rank's read and write seconds on the one-stripe files, "
                "at POSIX or MPI-IO, whichever is more",
                claims=claims,
            )
        )
    return found
