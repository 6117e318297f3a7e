"""The program's requests at POSIX and STDIO: too small, out of order, unaligned, badly
buffered, read again, synced too often, or stalled. Reads and writes are judged apart: a
write-heavy checkpoint must not hide random reads."""

from __future__ import annotations

import pandas as pd

from iolab.diagnosis.facts import Run
from iolab.diagnosis.rules import storage
from iolab.diagnosis.rules.base import (
    MIN_COUNT,
    TOP_FILES,
    Finding,
    charged,
    layer_records,
    library_read_backs,
    proof_names,
    share_of,
    top_paths,
)

SMALL_BYTES = 1024**2  # Drishti: small_bytes
SMALL_SHARE = 0.10  # Drishti: small_requests
RANDOM_SHARE = 0.20  # Drishti: random_operations


def _own_share(records: pd.DataFrame, part: pd.Series, whole: pd.Series) -> pd.Series:
    """Each record's file's share: part over whole, summed per file (the files a finding
    names are those where the pattern is the rule there, not a few requests among many)."""
    per_file = pd.DataFrame({"part": part, "whole": whole}).groupby(records["path"]).sum()
    share = per_file.part / per_file.whole.where(per_file.whole > 0)
    return share.reindex(records["path"]).fillna(0).set_axis(records.index)


def direction_rules(run: Run) -> list[Finding]:
    """small-reads/writes and random-reads/writes: each direction judged on its own, on the
    program's own requests (not ROMIO's reads before writing)."""
    every = layer_records(run, "POSIX")
    if every.empty:
        return []
    read_backs = every.path.isin(library_read_backs(run))
    found = []
    for op, time in (("read", "read_time_s"), ("write", "write_time_s")):
        # ROMIO's reads before writing are not the program's: read-modify-write names them.
        posix = every[~read_backs] if op == "read" else every
        posix.attrs = every.attrs
        requests = posix[f"{op}s"]
        total = float(requests.sum())
        small = posix[f"small_{op}s"].fillna(0)
        if small.sum() >= MIN_COUNT and share_of(small.sum(), total) > SMALL_SHARE:
            part = posix[time] * (small / requests.where(requests > 0)).fillna(0)
            cost, claims = charged(posix, **{op: part})
            files = top_paths(
                posix, small.where(_own_share(posix, small, requests) > SMALL_SHARE, 0)
            )
            names = proof_names(
                run,
                {
                    "small": (f"POSIX_SIZE_{op.upper()}_0_100..100K_1M", f"{op} calls under 1 MiB"),
                    "all": (f"POSIX_{op.upper()}S", f"{op} calls"),
                },
            )
            found.append(
                Finding(
                    f"small-{op}s",
                    f"small {op}s",
                    cost,
                    f"{small.sum():,.0f} of {total:,.0f} {op}s "
                    f"({share_of(small.sum(), total):.0%}) move less than 1 MiB",
                    f"{op} in larger blocks: {storage.gather_advice(run, files, op)}",
                    files=files,
                    counters={names["small"]: float(small.sum()), names["all"]: total},
                    cost_formula=f"the busiest rank's {op} seconds times the share of its {op}s "
                    "under 1 MiB",
                    claims=claims,
                )
            )
        known = posix[posix[f"seq_{op}s"].notna()]
        backwards = (known[f"{op}s"] - known[f"seq_{op}s"]).clip(lower=0)
        judged = float(known[f"{op}s"].sum())
        if backwards.sum() >= MIN_COUNT and share_of(backwards.sum(), judged) > RANDOM_SHARE:
            part = known[time] * (backwards / known[f"{op}s"].where(known[f"{op}s"] > 0)).fillna(0)
            cost, claims = charged(known, **{op: part})
            names = proof_names(
                run,
                {
                    "seq": (f"POSIX_SEQ_{op.upper()}S", f"sequential {op} calls"),
                    "all": (f"POSIX_{op.upper()}S", f"{op} calls"),
                },
            )
            found.append(
                Finding(
                    f"random-{op}s",
                    f"random {op}s",
                    cost,
                    f"{backwards.sum():,.0f} of {judged:,.0f} {op}s "
                    f"({share_of(backwards.sum(), judged):.0%}) go back to an earlier offset",
                    f"{op} in file order where the algorithm allows, or gather the pieces into "
                    "larger sequential requests (sort them, read whole chunks)",
                    files=top_paths(known, backwards),
                    counters={names["all"]: judged, names["seq"]: float(known[f"seq_{op}s"].sum())},
                    cost_formula=f"the busiest rank's {op} seconds times the share of its {op}s "
                    "that go back to an earlier offset",
                    claims=claims,
                )
            )
    return found


MISALIGNED_SHARE = 0.10  # Drishti: misaligned_requests


def _align_advice(run: Run, records: pd.DataFrame, files: list[str], unit: str) -> str:
    """Align to the unit, in the direction the job moved data, with the setting of the
    library it called and where the file system states its unit."""
    side = storage.direction_of(records[records.path.isin(files)])
    what = {
        "read": "start each read at a multiple of",
        "write": "start each write at a multiple of",
    }.get(side, "align offsets and sizes to")
    kind = storage.storage_of(run, files)
    return (
        f"{what} {unit} and move whole units, with "
        f"{storage.ALIGN_SETTING[storage.library_of(run, files)]}"
        f". The log checked that unit; on "
        f"{storage.KIND_NAMES[kind] if kind else 'your file system'} the unit that matters is "
        f"{storage.ALIGNMENT_UNIT[kind]}"
    )


def misaligned(run: Run) -> list[Finding]:
    """Requests that start off the alignment unit (the log's own; for a trace, the page
    size): each straddles one more block of the file system than it needs."""
    posix = layer_records(run, "POSIX")
    if posix.empty:
        return []
    known = posix[posix.unaligned.notna()]
    requests = known.reads + known.writes
    bad = known.unaligned
    if bad.sum() < MIN_COUNT or share_of(bad.sum(), requests.sum()) <= MISALIGNED_SHARE:
        return []
    unit = int(known.alignment.mode().iloc[0]) if known.alignment.notna().any() else 4096
    # ROMIO's reads before writing are charged by read-modify-write, not twice.
    own_reads = known.read_time_s.where(~known.path.isin(library_read_backs(run)), 0.0)
    off = (bad / requests.where(requests > 0)).fillna(0)
    files = top_paths(known, bad)
    cost, claims = charged(known, read=own_reads * off, write=known.write_time_s * off)
    names = proof_names(
        run,
        {
            "bad": ("POSIX_FILE_NOT_ALIGNED", "calls at an unaligned offset"),
            "unit": ("POSIX_FILE_ALIGNMENT", "alignment checked (page size)"),
        },
    )
    return [
        Finding(
            "misaligned",
            "misaligned requests",
            cost,
            f"{bad.sum():,.0f} of {requests.sum():,.0f} requests "
            f"({share_of(bad.sum(), requests.sum()):.0%}) "
            f"start off a {_size(unit)} boundary, the file system's alignment unit in this "
            f"{'log' if run.source == 'darshan' else 'trace'}",
            _align_advice(run, known, files, _size(unit)),
            files=files,
            counters={names["bad"]: float(bad.sum()), names["unit"]: unit},
            cost_formula="the busiest rank's read and write seconds times the share of its "
            "requests off the unit (ROMIO's reads before writing left out: read-modify-write "
            "counts them)",
            claims=claims,
        )
    ]


def _size(nbytes: float) -> str:
    """A byte count in its largest whole unit ("4 KiB"), for advice a person reads."""
    for unit, name in ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")):
        if nbytes >= unit and nbytes % unit == 0:
            return f"{nbytes // unit:.0f} {name}"
    return f"{nbytes:,.0f} bytes"


#: The lab's own: requests through stdio this small on average are not being buffered well.
STDIO_SMALL_BYTES = 4096


def stdio(run: Run) -> list[Finding]:
    """Files moved in tiny fread/fwrite/fprintf calls: stdio's buffer is too small or flushed.
    Judged per file (one log file of 13-byte lines hides behind a big output file's mean);
    the stdio opens' time belongs to the metadata rule."""
    frame = layer_records(run, "STDIO")
    if frame.empty:
        return []
    requests = frame.reads + frame.writes
    moved = frame.bytes_read + frame.bytes_written
    per_file = pd.DataFrame({"requests": requests, "moved": moved}).groupby(frame.path).sum()
    tiny = per_file[
        (per_file.requests > 0) & (per_file.moved < STDIO_SMALL_BYTES * per_file.requests)
    ]
    if tiny.requests.sum() < MIN_COUNT:
        return []
    records = frame[frame.path.isin(tiny.index)]
    tiny["seconds"] = (records.read_time_s + records.write_time_s).groupby(records.path).sum()
    top = tiny.seconds.idxmax()
    cost, claims = charged(records, read=records.read_time_s, write=records.write_time_s)
    return [
        Finding(
            "stdio",
            "tiny requests through stdio",
            cost,
            f"{tiny.requests.sum():,.0f} stdio reads and writes of "
            f"{tiny.moved.sum() / tiny.requests.sum():,.0f} "
            f"bytes on average on {len(tiny)} file(s); {top}: {tiny.loc[top, 'requests']:,.0f} "
            f"requests of {tiny.loc[top, 'moved'] / tiny.loc[top, 'requests']:,.0f} bytes",
            "give each stream a large buffer (setvbuf, or open(..., buffering=1 << 20)), write "
            "whole records or blocks, and do not flush or reopen per line",
            files=list(tiny.sort_values("seconds", ascending=False).index[:TOP_FILES]),
            counters={
                "STDIO_WRITES + STDIO_READS": float(tiny.requests.sum()),
                "STDIO_BYTES_WRITTEN + STDIO_BYTES_READ": float(tiny.moved.sum()),
            },
            cost_formula="the busiest rank's stdio read and write seconds on the files of tiny "
            "requests",
            claims=claims,
        )
    ]


#: The lab's own: a file read more than this many times its used range counts as re-read
#: (Drishti flags any byte read twice; a format that reads its header again is no problem).
REREAD_FACTOR = 2.0


def rereads(run: Run) -> list[Finding]:
    """Files read more than REREAD_FACTOR times over their used range: the same bytes
    paid for again (by the program: ROMIO's reads before writing are read-modify-write's)."""
    every = layer_records(run, "POSIX")
    posix = every[~every.path.isin(library_read_backs(run))]
    posix.attrs = every.attrs
    if posix.empty:
        return []
    per_file = posix.groupby("path").agg(
        bytes_read=("bytes_read", "sum"), used=("max_byte_read", "max"), reads=("reads", "sum")
    )
    again = per_file[
        (per_file.used > 0)
        & (per_file.bytes_read > REREAD_FACTOR * per_file.used)
        & ((per_file.bytes_read - per_file.used >= SMALL_BYTES) | (per_file.reads >= MIN_COUNT))
    ]
    if again.empty:
        return []
    records = posix[posix.path.isin(again.index)]
    spare = (1 - again.used / again.bytes_read).reindex(records.path).to_numpy()
    cost, claims = charged(records, read=records.read_time_s * spare)
    top = again.bytes_read.idxmax()
    return [
        Finding(
            "reread",
            "the same data read again",
            cost,
            f"{len(again)} file(s) read at least {REREAD_FACTOR:.0f} times over; {top}: "
            f"{again.loc[top, 'bytes_read']:,.0f} bytes read of a "
            f"{again.loc[top, 'used']:,.0f}-byte range",
            "read once and keep it in memory (or read on one rank and broadcast), or convert "
            "once to a format cheap to load",
            files=list(again.sort_values("bytes_read", ascending=False).index[:TOP_FILES]),
            counters={
                "POSIX_BYTES_READ": float(again.bytes_read.sum()),
                "POSIX_MAX_BYTE_READ + 1": float(again.used.sum()),
            },
            cost_formula="the busiest rank's read seconds on those files times the share of "
            "their bytes read beyond the used range",
            claims=claims,
        )
    ]


#: The lab's own: a sync for every this many writes or fewer is a sync per transaction.
WRITES_PER_SYNC = 10
MIN_SYNCS = 100


def syncs(run: Run) -> list[Finding]:
    """A sync every few writes: each one waits for the storage to confirm."""
    posix = layer_records(run, "POSIX")
    if posix.empty:
        return []
    count, writes = posix.syncs.sum(), posix.writes.sum()
    if count < MIN_SYNCS or writes > WRITES_PER_SYNC * count:
        return []
    # A trace times syncs apart; a Darshan log counts them in its write seconds.
    timed_apart = bool(posix.sync_time_s.notna().any())
    seconds = posix.sync_time_s.fillna(0) if timed_apart else posix.write_time_s
    cost, claims = charged(posix, **{"sync" if timed_apart else "write": seconds})
    return [
        Finding(
            "syncs",
            "a sync every few writes",
            cost,
            f"{count:,.0f} fsync/fdatasync calls for {writes:,.0f} writes "
            f"(one per {share_of(writes, count):,.1f} writes)",
            "sync once per batch, not per record: one transaction around many inserts "
            "(BEGIN ... COMMIT in SQLite), a checkpoint's fsync at its end only",
            files=top_paths(posix, posix.syncs),
            counters={
                proof_names(
                    run,
                    {
                        "s": (
                            "POSIX_FSYNCS + POSIX_FDSYNCS",
                            "fsync, fdatasync and sync_file_range calls",
                        )
                    },
                )["s"]: float(count),
                "writes": float(writes),
            },
            cost_formula="the busiest rank's sync seconds (a Darshan log counts syncs in the "
            "write seconds, so there its write seconds: an upper bound)",
            claims=claims,
        )
    ]


#: The lab's own (Drishti has no such rule): a single request of at most SMALL_BYTES that
#: took this long waited (a lock, a busy server): no disk needs a second for a MiB.
STALL_S = 1.0


def _stall_advice(run: Run, side: str, files: list[str]) -> str:
    """What a stalled small request waited for on this file system, and the fix for its
    direction: readers share what one read, writers hand their pieces to one."""
    kind = storage.storage_of(run, files)
    fix = (
        "read the small pieces once, on one rank, and share them (MPI_Bcast), or read whole "
        "aligned blocks"
        if side == "read"
        else "write the small pieces from one rank or to a file of their own, aligned to "
        + storage.ALIGNMENT_UNIT[kind]
    )
    return (
        "a small request needs milliseconds from any disk, so these waited, most likely for "
        f"{storage.SMALL_PIECES_WAIT[kind]}; {fix}; if it recurs on one server, tell your centre"
    )


def stalled_requests(run: Run) -> list[Finding]:
    """Single small requests that took seconds: they waited, for a lock or a server.

    Darshan keeps each record's slowest read and write with its size (a trace, each call's
    time). The cost is a lower bound: per rank, the sum of its stalled requests' seconds
    (one per record), and a shared record's stall is one rank's."""
    posix = layer_records(run, "POSIX")
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
        # The stalls the finding holds: every rank's (the cost is the busiest one's), or, where
        # one shared record's stall is larger, that one alone.
        if len(own) and own.max() >= cost:
            held = per_rank[f"slowest_{side}_s"]
        else:
            held = shared[[shared.idxmax()]]
        where = f"rank {int(worst['rank'])}" if worst["rank"] >= 0 else "one rank"
        files = top_paths(stalled, stalled[f"slowest_{side}_s"])
        proof = proof_names(
            run,
            {
                "s": (
                    f"POSIX_F_MAX_{side.upper()}_TIME",
                    f"the slowest {side} call's time (strace -T)",
                ),
                "b": (f"POSIX_MAX_{side.upper()}_TIME_SIZE", "its size"),
            },
        )
        found.append(
            Finding(
                f"stalled-{side}s",
                f"{side}s of a MiB or less that took seconds",
                cost,
                f"{len(stalled):,} record(s) whose slowest {side} moved at most 1 MiB yet took at "
                f"least {STALL_S:.0f} s; the worst: {worst[f'slowest_{side}_bytes']:,.0f} bytes in "
                f"{worst[f'slowest_{side}_s']:,.2f} s, {where}, on {worst['path']}",
                _stall_advice(run, side, files),
                files=files,
                ranks=[int(r) for r in own.sort_values(ascending=False).index[:TOP_FILES]],
                counters={
                    proof["s"]: float(worst[f"slowest_{side}_s"]),
                    proof["b"]: float(worst[f"slowest_{side}_bytes"]),
                    "records": float(len(stalled)),
                },
                cost_formula=f"per rank, the seconds of its stalled {side}s (one per record), "
                "the largest: a lower bound",
                claims=held.astype("float64").to_frame(side),
            )
        )
    return found
