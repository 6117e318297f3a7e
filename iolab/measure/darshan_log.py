"""Darshan logs, read with PyDarshan, in the terms of the lab's diagnosis rules.

Darshan is the I/O characterisation tool HPC centres run in production: linked into (or
preloaded under) an application, it keeps counters per file and per rank for the POSIX,
MPI-IO and STDIO layers, Lustre layouts, and, with DXT, every request's offset, size and
time. PyDarshan (PyPI `darshan`, optional here: `make darshan`) reads the logs; its wheel
carries the reading library and real example logs, which the lesson reads when the learner
has no log of their own.

`DarshanRun.summary()` gives the same IOSummary as the lab's strace profile, so
iolab.measure.diagnose runs one rule set on both.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError
from iolab.measure.diagnose import FileIO, IOSummary

INSTALL_HINT = ("install PyDarshan with `make darshan` (PyPI `darshan`, wheels for CPython "
                "3.7 to 3.12)")
_SMALL_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M")  # Darshan's bins below 1 MiB
SIZE_BINS = (*_SMALL_BINS, "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")


def darshan_problem() -> str | None:
    """Why PyDarshan cannot be used here, in one sentence; None when it can."""
    if importlib.util.find_spec("darshan") is None:
        return f"PyDarshan is not installed; {INSTALL_HINT}"
    try:
        import darshan  # noqa: F401  (loads the bundled C library)
    except Exception as err:  # a broken or foreign-architecture wheel
        return f"PyDarshan does not load here ({err}); reinstall it: {INSTALL_HINT}"
    return None


def example_logs() -> dict[str, Path]:
    """The real logs bundled in the darshan wheel, by name (e.g. 'sample-badost', 'dxt')."""
    problem = darshan_problem()
    if problem:
        raise LabError(problem)
    import darshan

    folder = Path(darshan.__file__).parent / "examples" / "example_logs"
    return {path.stem: path for path in sorted(folder.glob("*.darshan"))}


def read_log(path: Path | str) -> DarshanRun:
    """Read a whole Darshan log; one clear sentence if it is missing or not a Darshan log."""
    problem = darshan_problem()
    if problem:
        raise LabError(problem)
    import darshan

    path = Path(path).expanduser()
    if not path.is_file():
        raise LabError(f"{path} is not a file; pass a Darshan log (*.darshan), usually in "
                       "your centre's Darshan log folder or where DARSHAN_LOGFILE pointed")
    try:
        # Everything is read now, and the C library's handle closed at once: left to the
        # garbage collector, its close can deadlock with the next log's read in a kernel.
        with darshan.DarshanReport(str(path), read_all=True) as report:
            pass
    except Exception as err:
        raise LabError(f"{path} could not be read as a Darshan log ({err}); check that it "
                       "is a complete *.darshan file") from None
    return DarshanRun(report, path.name)


class DarshanRun:
    """One Darshan log as tidy frames, and as the neutral facts of the diagnosis rules."""

    def __init__(self, report, name: str) -> None:
        self.report = report
        self.name = name
        self.names = dict(report.name_records)

    def _frames(self, module: str) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(counters, fcounters) of a module, with a `path` column; empty if absent."""
        if module not in self.report.records:
            return pd.DataFrame(), pd.DataFrame()
        frames = self.report.records[module].to_df()
        counters, fcounters = frames["counters"], frames.get("fcounters", pd.DataFrame())
        for frame in (counters, fcounters):
            if "id" in frame:
                frame["path"] = frame["id"].map(self.names)
        return counters, fcounters

    def job(self) -> dict:
        job = self.report.metadata["job"]
        return {"processes": int(job["nprocs"]), "run_time_s": float(job["run_time"]),
                "modules": ", ".join(self.report.modules)}

    def modules_frame(self) -> pd.DataFrame:
        """Per I/O layer: records (file x rank), opens, reads, writes, bytes."""
        rows = []
        for module, prefix in (("POSIX", "POSIX"), ("MPI-IO", "MPIIO"), ("STDIO", "STDIO")):
            counters, _ = self._frames(module)
            if counters.empty:
                continue

            def total(*names: str) -> int:
                return int(sum(counters[n].sum() for n in names if n in counters))

            rows.append({"module": module, "records": len(counters),
                         "opens": total(f"{prefix}_OPENS", f"{prefix}_INDEP_OPENS",
                                        f"{prefix}_COLL_OPENS"),
                         "reads": total(f"{prefix}_READS", f"{prefix}_INDEP_READS",
                                        f"{prefix}_COLL_READS", f"{prefix}_NB_READS"),
                         "writes": total(f"{prefix}_WRITES", f"{prefix}_INDEP_WRITES",
                                         f"{prefix}_COLL_WRITES", f"{prefix}_NB_WRITES"),
                         "bytes_read": total(f"{prefix}_BYTES_READ"),
                         "bytes_written": total(f"{prefix}_BYTES_WRITTEN")})
        return pd.DataFrame(rows, columns=["module", "records", "opens", "reads", "writes",
                                           "bytes_read", "bytes_written"])

    def files_frame(self) -> pd.DataFrame:
        """POSIX files by bytes moved, with the time spent reading, writing and in metadata."""
        counters, fcounters = self._frames("POSIX")
        if counters.empty:
            return pd.DataFrame(columns=["path", "ranks", "bytes_read", "bytes_written",
                                         "read_time_s", "write_time_s", "meta_time_s"])
        merged = counters.merge(fcounters, on=["id", "rank", "path"])
        frame = merged.groupby("path").agg(
            ranks=("rank", "nunique"), bytes_read=("POSIX_BYTES_READ", "sum"),
            bytes_written=("POSIX_BYTES_WRITTEN", "sum"), read_time_s=("POSIX_F_READ_TIME", "sum"),
            write_time_s=("POSIX_F_WRITE_TIME", "sum"), meta_time_s=("POSIX_F_META_TIME", "sum"))
        frame["bytes"] = frame.bytes_read + frame.bytes_written
        return frame.sort_values("bytes", ascending=False).drop(columns="bytes").reset_index()

    def size_histogram(self, module: str = "POSIX") -> pd.DataFrame:
        """How many reads and writes fell in each of Darshan's request-size bins."""
        prefix = {"MPI-IO": "MPIIO"}.get(module, module)
        counters, _ = self._frames(module)
        rows = []
        for size in SIZE_BINS:
            kind = "READ_AGG" if module == "MPI-IO" else "READ"  # MPI-IO bins aggregate sizes
            read = f"{prefix}_SIZE_{kind}_{size}"
            write = read.replace("_READ_", "_WRITE_")
            rows.append({"request_size": size.replace("_", "-"),
                         "reads": int(counters[read].sum()) if read in counters else 0,
                         "writes": int(counters[write].sum()) if write in counters else 0})
        return pd.DataFrame(rows)

    def dxt_frame(self) -> pd.DataFrame:
        """Every traced request (DXT): rank, layer, operation, offset, length, start, end."""
        rows = []
        for module in ("DXT_POSIX", "DXT_MPIIO"):
            if module not in self.report.records:
                continue
            for record in self.report.records[module].to_df():
                for operation in ("read", "write"):
                    segments = record[f"{operation}_segments"]
                    for seg in segments.itertuples(index=False):
                        rows.append({"rank": int(record["rank"]), "layer": module[4:],
                                     "path": self.names.get(record["id"], str(record["id"])),
                                     "operation": operation, "offset": int(seg.offset),
                                     "length": int(seg.length), "start_s": float(seg.start_time),
                                     "end_s": float(seg.end_time)})
        return pd.DataFrame(rows, columns=["rank", "layer", "path", "operation", "offset",
                                           "length", "start_s", "end_s"])

    def ost_frame(self) -> pd.DataFrame:
        """Per Lustre OST: files on it, bytes, and the median write+read rate of those files."""
        layouts = self.report.records.get("LUSTRE")
        counters, fcounters = self._frames("POSIX")
        if layouts is None or counters.empty:
            return pd.DataFrame(columns=["ost", "files", "bytes", "median_MiBps"])
        comps = layouts.to_df()["components"][["id", "LUSTRE_OST_IDS"]]
        merged = counters.merge(fcounters, on=["id", "rank", "path"]).merge(comps, on="id")
        merged["bytes"] = merged.POSIX_BYTES_READ + merged.POSIX_BYTES_WRITTEN
        merged["seconds"] = merged.POSIX_F_READ_TIME + merged.POSIX_F_WRITE_TIME
        merged = merged[(merged.bytes > 0) & (merged.seconds > 0)]
        merged["MiBps"] = merged.bytes / merged.seconds / 1024**2
        per_ost = merged.explode("LUSTRE_OST_IDS").rename(columns={"LUSTRE_OST_IDS": "ost"})
        frame = per_ost.groupby("ost").agg(files=("id", "nunique"), bytes=("bytes", "sum"),
                                           median_MiBps=("MiBps", "median"))
        return frame.reset_index().sort_values("ost", ignore_index=True)

    def summary(self) -> IOSummary:
        """The POSIX files' facts, MPI-IO's independent/collective counts and the OSTs."""
        counters, fcounters = self._frames("POSIX")
        files = []
        if not counters.empty:
            merged = counters.merge(fcounters, on=["id", "rank", "path"])
            for path, group in merged.groupby("path"):
                files.append(_file_io(str(path), group))
        mpiio = None
        mpi_counters, _ = self._frames("MPI-IO")
        if not mpi_counters.empty:
            mpiio = {key: int(mpi_counters[f"MPIIO_{name}"].sum()) for key, name in (
                ("independent_reads", "INDEP_READS"), ("independent_writes", "INDEP_WRITES"),
                ("collective_reads", "COLL_READS"), ("collective_writes", "COLL_WRITES"))}
        osts = self.ost_frame()
        return IOSummary("darshan", files, mpiio,
                         dict(zip(osts.ost.astype(str), osts.bytes.astype(int))) or None,
                         dict(zip(osts.ost.astype(str), osts.median_MiBps.astype(float))) or None,
                         processes=self.job()["processes"])


def _file_io(path: str, group: pd.DataFrame) -> FileIO:
    """One file's POSIX records (one per rank, or one shared record with rank -1)."""
    def total(name: str) -> int:
        return int(group[name].sum())

    small = sum(total(f"POSIX_SIZE_{op}_{size}")
                for op in ("READ", "WRITE") for size in _SMALL_BINS)
    ops = total("POSIX_READS") + total("POSIX_WRITES")
    sequential = total("POSIX_SEQ_READS") + total("POSIX_SEQ_WRITES")
    by_rank = group[group["rank"] >= 0]
    bytes_by_rank = {str(r): int(b) for r, b in zip(
        by_rank["rank"], by_rank.POSIX_BYTES_READ + by_rank.POSIX_BYTES_WRITTEN)}
    seconds_by_rank = {str(r): float(t) for r, t in zip(
        by_rank["rank"], by_rank.POSIX_F_READ_TIME + by_rank.POSIX_F_WRITE_TIME
        + by_rank.POSIX_F_META_TIME)}
    shared = group[group["rank"] < 0]  # reduced over ranks: Darshan keeps the extremes
    for row in shared.itertuples(index=False):
        if row.POSIX_F_SLOWEST_RANK_TIME > 0:
            seconds_by_rank = {str(row.POSIX_FASTEST_RANK): float(row.POSIX_F_FASTEST_RANK_TIME),
                               str(row.POSIX_SLOWEST_RANK): float(row.POSIX_F_SLOWEST_RANK_TIME)}
    return FileIO(path, opens=total("POSIX_OPENS"), lookups=total("POSIX_STATS"),
                  reads=total("POSIX_READS"), writes=total("POSIX_WRITES"),
                  bytes_read=total("POSIX_BYTES_READ"), bytes_written=total("POSIX_BYTES_WRITTEN"),
                  small=small, sequential=sequential, random=max(ops - sequential, 0),
                  unaligned=total("POSIX_FILE_NOT_ALIGNED"),
                  max_byte=int(max(group.POSIX_MAX_BYTE_READ.max(),
                                   group.POSIX_MAX_BYTE_WRITTEN.max())) + 1,
                  meta_time_s=float(group.POSIX_F_META_TIME.sum()),
                  bytes_by_rank=bytes_by_rank if len(bytes_by_rank) > 1 else {},
                  seconds_by_rank=seconds_by_rank if len(seconds_by_rank) > 1 else {})
