"""The neutral facts a diagnosis reads, whichever tool measured them.

A Darshan log and the lab's strace profile are both reduced to one table of records: one row
per I/O layer, file and rank (or process), with the counts, bytes and seconds the rules need.
Darshan reduces a file every rank opened to one *shared* record (rank -1) and keeps only the
extremes (fastest and slowest rank, their bytes and seconds); those columns are filled for
shared records and left empty for per-rank ones. Rules are written on these columns only, as
whole-column operations, so a log of 100,000 records costs the same per record as one of ten.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import pandas as pd

T = TypeVar("T")

#: Every column of Run.requests, DXT's traced requests, one row per call.
REQUEST_COLUMNS = ["rank", "layer", "path", "operation", "offset", "length", "start_s", "end_s"]

#: Every column of Run.records, in order: what it counts, per (layer, path, rank).
RECORD_COLUMNS = {
    "layer": "POSIX, MPI-IO, STDIO, H5F, H5D, PNETCDF_FILE, PNETCDF_VAR (Darshan) or TRACE",
    "path": "the file",
    "rank": "MPI rank or traced process index; -1 for a record shared by all ranks",
    "origin": "'data' (the application's), 'environment' (interpreter, libraries, "
    "site-packages, conda) or 'system' (/proc, /etc, /dev, ...)",
    "opens": "opens (and creates)",
    "stats": "metadata lookups without an open: stat, access, readlink",
    "reads": "read requests",
    "writes": "write requests",
    "syncs": "fsync, fdatasync, sync_file_range (and STDIO flushes)",
    "sync_opens": "opens with O_SYNC or O_DSYNC (nan where unknown)",
    "direct_opens": "opens with O_DIRECT (nan where unknown)",
    "mmaps": "memory mappings of the file: its reads then happen as page faults, unseen",
    "collective": "collective reads and writes: MPI-IO and PNETCDF_VAR count them; an H5D "
    "dataset's all count if it used collective MPI-IO (0 in other layers)",
    "bytes_read": "bytes read",
    "bytes_written": "bytes written",
    "small_reads": "reads of less than 1 MiB (nan where the layer keeps no size histogram)",
    "small_writes": "writes of less than 1 MiB (nan where unknown)",
    "seq_reads": "reads starting at or after the end of the previous one (nan if unknown)",
    "seq_writes": "writes starting at or after the end of the previous one (nan if unknown)",
    "unaligned": "requests whose offset is not a multiple of `alignment` (nan if unknown)",
    "alignment": "the alignment unit the unaligned count was checked against, bytes",
    "max_byte_read": "highest byte read + 1 (0 if nothing was read)",
    "max_byte_written": "highest byte written + 1",
    "slowest_read_s": "the single slowest read's seconds (nan where unknown)",
    "slowest_read_bytes": "that read's size, bytes",
    "slowest_write_s": "the single slowest write's seconds (nan where unknown)",
    "slowest_write_bytes": "that write's size, bytes",
    "read_time_s": "seconds in reads",
    "write_time_s": "seconds in writes",
    "meta_time_s": "seconds in opens, lookups, seeks and closes",
    "sync_time_s": "seconds in syncs (nan for Darshan, which counts them in write_time_s)",
    "fastest_rank": "shared records: the rank with the least I/O time on the file",
    "fastest_rank_s": "its seconds on the file",
    "fastest_rank_bytes": "its bytes",
    "slowest_rank": "shared records: the rank with the most I/O time on the file",
    "slowest_rank_s": "its seconds on the file",
    "slowest_rank_bytes": "its bytes",
    "rank_bytes_variance": "shared records: the variance of the ranks' bytes on the file, over "
    "all the job's ranks, bytes squared (nan where unknown)",
}

#: Every column of Run.osts: one row per file and OST that holds a stripe of it.
OST_COLUMNS = ("path", "ost", "stripe_size", "stripe_count")

#: Every column of Run.mpi: one row per rank, its time in MPI calls (Darshan's APMPI module).
MPI_COLUMNS = {
    "rank": "MPI rank",
    "node": "the node the rank ran on",
    "mpi_s": "seconds in all MPI communication calls (MPI_TOTAL_COMM_TIME)",
    "wait_s": "of those, seconds in MPI_Barrier and the MPI_Wait family: waiting for others",
}


@dataclass
class Run:
    """One job or traced command, as the diagnosis sees it."""

    source: str  # "darshan" or "strace"
    name: str  # the log's file name, or the traced command
    processes: int  # MPI ranks, or the processes the trace saw
    run_time_s: float  # the job's wall time
    records: pd.DataFrame  # RECORD_COLUMNS
    osts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=OST_COLUMNS))
    modules: tuple[str, ...] = ()  # what the source measured (Darshan's module names)
    facts: dict = field(default_factory=dict)  # job facts for the report (exe, start, ...)
    mounts: tuple[tuple[str, str], ...] = ()  # (mount point, file system type): Darshan's table
    dxt: Callable[[], pd.DataFrame] | None = None  # DXT's traced requests, read on demand
    mpi: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(MPI_COLUMNS)))
    #: Modules Darshan marked partial: it ran out of memory and kept only some of their
    #: records, so what is missing cannot be cleared (a report never calls such a run clean).
    incomplete: tuple[str, ...] = ()
    _requests: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    _layers: dict = field(default_factory=dict, repr=False, compare=False)
    _derived: dict = field(default_factory=dict, repr=False, compare=False)

    def file_system(self, path: str) -> str:
        """The type of the file system holding `path`, by the mount table ("" if unknown)."""
        holding = [
            (point, kind)
            for point, kind in self.mounts
            if path == point or path.startswith(point.rstrip("/") + "/")
        ]
        return max(holding, key=lambda mount: len(mount[0]))[1] if holding else ""

    def requests(self) -> pd.DataFrame:
        """Every traced request (REQUEST_COLUMNS), empty without DXT; read the first time a
        rule asks, as most rules never need it."""
        if self._requests is None:
            self._requests = (
                self.dxt() if self.dxt is not None else pd.DataFrame(columns=REQUEST_COLUMNS)
            )
        return self._requests

    def data(self, layer: str | None = None) -> pd.DataFrame:
        """The application's own records, of one layer or all (selected once per layer: every
        rule asks, and on a small log the selecting costs more than the rule)."""
        if layer not in self._layers:
            frame = self.records[self.records.origin == "data"]
            self._layers[layer] = frame if layer is None else frame[frame.layer == layer]
        return self._layers[layer]

    def once(self, key: str, compute: Callable[[Run], T]) -> T:
        """`compute(self)`, worked out the first time any rule asks for `key` and kept: a
        fact several rules share (ROMIO's read-backs) costs one pass over the records."""
        if key not in self._derived:
            self._derived[key] = compute(self)
        return self._derived[key]


def empty_records() -> pd.DataFrame:
    """A records frame with every column and no row."""
    return pd.DataFrame(
        {
            name: pd.Series(dtype="object" if name in ("layer", "path", "origin") else "float64")
            for name in RECORD_COLUMNS
        }
    )


def complete(records: pd.DataFrame) -> pd.DataFrame:
    """Add any missing column (empty) and put the columns in RECORD_COLUMNS order."""
    for name in RECORD_COLUMNS:
        if name not in records:
            records[name] = float("nan")
    return records[list(RECORD_COLUMNS)].reset_index(drop=True)
