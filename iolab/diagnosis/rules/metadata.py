"""Opens and lookups: on the program's own files (metadata), each a round trip to the metadata
server, and on its software environment's (environment), which every rank pays for at start."""

from __future__ import annotations

import os

from iolab.diagnosis.facts import Run
from iolab.diagnosis.rules import storage
from iolab.diagnosis.rules.base import (
    MIN_COUNT,
    MINOR_S,
    Finding,
    charged,
    proof_names,
    share_of,
    top_paths,
)

#: The lab's own: opens and lookups per MiB moved above which a program is metadata-bound.
LOOKUPS_PER_MIB = 100


def metadata(run: Run) -> list[Finding]:
    """Opens and lookups on the application's files (POSIX and STDIO)."""
    frame = run.data()
    frame = frame[frame.layer.isin(["POSIX", "STDIO"])]
    frame.attrs["processes"] = run.processes
    calls = frame.opens + frame.stats
    moved_mib = float((frame.bytes_read + frame.bytes_written).sum()) / 1024**2
    per_mib = calls.sum() / moved_mib if moved_mib else float(calls.sum())
    cost, claims = charged(frame, meta=frame.meta_time_s)
    heavy_share = share_of(cost, run.run_time_s) > 0.10
    if not ((calls.sum() >= MIN_COUNT and per_mib > LOOKUPS_PER_MIB) or heavy_share):
        return []
    in_git = frame.path.str.contains("/.git/", regex=False)
    is_git = (
        run.source == "strace"
        and (os.path.basename(run.name.split()[0]) == "git" if run.name else False)
        or (calls[in_git].sum() > calls.sum() / 2)
    )
    # Packing only helps a job with more files than ranks; with fewer, the calls are the
    # same few files opened and looked up again.
    many_files = frame.path.nunique() > max(run.processes, 1)
    advice = (
        "let git remember what it already checked: `git config core.untrackedCache true` "
        "and `core.fsmonitor true`, or keep the work tree on node-local disk"
        if is_git
        else ("pack many small files into an archive or shards, keep " if many_files else "keep ")
        + "a file open instead of reopening it, and cache what stat returned: "
        + (
            "each is a system call, and on a shared file system a round trip to its metadata server"
            if storage.storage_of(run, top_paths(frame, calls)) == "local"
            else "each is a round trip to the metadata server"
        )
    )
    slowest = frame.meta_time_s.groupby(frame.path).sum()
    if len(slowest) and slowest.max() > MINOR_S:
        advice += (
            f"; {slowest.idxmax()} alone spent {slowest.max():,.1f} s in opens: an open "
            "that waits that long is a named pipe, a lock or a hung server"
        )
    names = proof_names(
        run,
        {
            "opens": ("POSIX_OPENS + STDIO_OPENS", "open calls"),
            "stats": ("POSIX_STATS", "stat, access and readlink calls"),
            "time": ("POSIX_F_META_TIME + STDIO_F_META_TIME", "seconds in those calls"),
        },
    )
    return [
        Finding(
            "metadata",
            "many opens and lookups",
            cost,
            f"{calls.sum():,.0f} opens and stat-like calls for {moved_mib:,.1f} MiB moved "
            f"({per_mib:,.0f} per MiB), {frame.meta_time_s.sum():,.2f} s in metadata over all "
            "ranks",
            advice,
            files=top_paths(frame, calls),
            counters={
                names["opens"]: float(frame.opens.sum()),
                names["stats"]: float(frame.stats.sum()),
                names["time"]: float(frame.meta_time_s.sum()),
            },
            cost_formula="the busiest rank's seconds in opens, lookups, seeks and closes of "
            "the application's files",
            claims=claims,
        )
    ]


#: The environment's opens and lookups from which an import cost is reported.
ENVIRONMENT_MIN_CALLS = 100


def environment(run: Run) -> list[Finding]:
    """The software environment's files: imports and libraries, read by every rank."""
    frame = run.records[(run.records.origin == "environment") & (run.records.layer == "POSIX")]
    frame.attrs["processes"] = run.processes
    calls = frame.opens + frame.stats
    if calls.sum() < ENVIRONMENT_MIN_CALLS:
        return []
    seconds = frame.meta_time_s + frame.read_time_s
    cost, claims = charged(frame, meta=frame.meta_time_s, read=frame.read_time_s)
    return [
        Finding(
            "environment",
            "your environment's import cost",
            cost,
            f"{calls.sum():,.0f} opens and lookups on {frame.path.nunique():,} files of the "
            f"software environment (interpreter, libraries, site-packages), "
            f"{seconds.sum():,.2f} s over all ranks",
            "start from a container image or squashfs, or copy the environment to node-local "
            "disk: every rank's imports are metadata round trips on a shared file system",
            files=top_paths(frame, calls),
            counters={"opens": float(frame.opens.sum()), "lookups": float(frame.stats.sum())},
            cost_formula="the busiest rank's seconds in opens, lookups and reads of the "
            "environment's files",
            claims=claims,
        )
    ]
