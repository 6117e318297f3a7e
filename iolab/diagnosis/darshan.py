"""Darshan logs, read with PyDarshan, as the neutral facts of the diagnosis.

Darshan is the I/O characterisation tool HPC centres run in production: linked into (or
preloaded under) an application, it keeps counters per file and per rank for each I/O layer
(POSIX, MPI-IO, STDIO, HDF5, PnetCDF), Lustre layouts, and, with DXT, every request's offset,
size and time. PyDarshan (PyPI `darshan`, optional here: `make darshan`) reads the logs; its
wheel carries the reading library and real example logs.

Every layer is turned into Run.records with whole-column operations (no Python loop per
record), so the cost grows linearly with the log. Two traps are avoided on purpose: the
LUSTRE module may hold one layout record per rank for the same file (joined on the file id
alone, a file's bytes would be counted once per rank), and a shared record (rank -1) sums its
time over all ranks (the busiest rank's share is its sum divided by the ranks).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from iolab.core.errors import LabError
from iolab.diagnosis.facts import (MPI_COLUMNS, OST_COLUMNS, REQUEST_COLUMNS, Run, complete,
                                   empty_records)
from iolab.diagnosis.origins import origins

INSTALL_HINT = ("install PyDarshan with `make darshan` (PyPI `darshan`, wheels for CPython "
                "3.7 to 3.12)")
_SMALL_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M")  # Darshan's bins below 1 MiB
#: Seconds a fresh interpreter may take to read one log's APMPI module.
CHILD_TIMEOUT_S = 120
#: APMPI's counters of the calls in which a rank waits for others.
MPI_WAIT_COUNTERS = ("MPI_BARRIER_TOTAL_TIME", "MPI_WAIT_TOTAL_TIME", "MPI_WAITALL_TOTAL_TIME",
                     "MPI_WAITANY_TOTAL_TIME", "MPI_WAITSOME_TOTAL_TIME")
#: See _small: a record whose mean request is at least this is not "small" in the last bin.
MEDIUM_BYTES = 256 * 1024
SIZE_BINS = (*_SMALL_BINS, "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")
#: The layers read into records, with their counter prefix; HEATMAP, APMPI and APXC are
#: listed among the modules but hold no per-file records (APMPI's per-rank MPI time is read
#: by DarshanLog.mpi_frame; no log at hand has APXC's Cray network counters).
LAYERS = {"POSIX": "POSIX", "MPI-IO": "MPIIO", "STDIO": "STDIO", "H5F": "H5F", "H5D": "H5D",
          "PNETCDF_FILE": "PNETCDF_FILE", "PNETCDF_VAR": "PNETCDF_VAR"}


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


def read_log(path: Path | str) -> DarshanLog:
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
    return DarshanLog(report, path.name, path)


def _sum(frame: pd.DataFrame, *names: str) -> pd.Series:
    """The sum of those columns the frame has (Darshan versions differ); 0 if none."""
    present = [frame[name].to_numpy(dtype="float64") for name in names if name in frame]
    total = np.nansum(present, axis=0) if present else np.zeros(len(frame))
    return pd.Series(total, index=frame.index)  # column by column: no frame built per sum


def _collective(frame: pd.DataFrame, p: str) -> pd.Series:
    """The requests made collectively. H5D counts none, only whether a dataset used
    collective MPI-IO at all (H5D_USE_MPIIO_COLLECTIVE): then all its requests count."""
    if p == "H5D":
        used = _sum(frame, "H5D_USE_MPIIO_COLLECTIVE") > 0
        return _sum(frame, "H5D_READS", "H5D_WRITES").where(used, 0.0)
    return _sum(frame, f"{p}_COLL_READS", f"{p}_COLL_WRITES")


def _or_nan(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame[name].astype("float64") if name in frame else pd.Series(np.nan, index=frame.index)


def _small(frame: pd.DataFrame, prefix: str, moved: pd.Series, requests: pd.Series) -> pd.Series:
    """Requests under 1 MiB. Darshan's last small bin (100 KiB to 1 MiB) cannot tell 1 MB
    requests, which are fine, from 120 KB ones; the lab counts it as small only where the
    record's mean request is under MEDIUM_BYTES (Drishti counts it always)."""
    below = _sum(frame, *(f"{prefix}{b}" for b in _SMALL_BINS[:-1]))
    mean = moved / requests.where(requests > 0)
    return below + _sum(frame, f"{prefix}{_SMALL_BINS[-1]}").where(mean.fillna(0) < MEDIUM_BYTES, 0)


#: The magic number of APMPI's header record: the letters "APMPI".
APMPI_MAGIC = int.from_bytes(b"APMPI", "big")
#: Reads one log's APMPI rows in a fresh interpreter (see apmpi_rows); prints them as JSON.
_APMPI_CHILD = """
import json, sys
import darshan
from iolab.diagnosis.darshan import apmpi_rows
with darshan.DarshanReport(sys.argv[1], read_all=False) as report:
    report.mod_read_all_apmpi_records("APMPI", warnings=False)
print(json.dumps(apmpi_rows(report.records.get("APMPI"))))
"""


def apmpi_rows(collection, processes: int | None = None) -> list[tuple] | None:
    """(rank, node, MPI seconds, waiting seconds) of each APMPI record after the header;
    with `processes`, None unless there is one record for each rank 0 .. processes - 1.

    PyDarshan's to_df cannot tabulate APMPI, so the records are read one by one. Darshan's
    reader of the module keeps state for the whole process: in PyDarshan 3.5 the second log
    with APMPI read in one process comes back misread, its header intact but every rank's
    record zeros of rank 0, one record short (seen on both corpus logs with APMPI). APMPI
    writes one record per rank, so a misread shows in the ranks.
    """
    if collection is None or not len(collection):
        return []
    try:
        if collection[0]["magic"] != APMPI_MAGIC:
            return None
        rows = []
        for index in range(1, len(collection)):
            record = collection[index]
            counters = record["all_counters"]
            rows.append((int(record["rank"]), str(record["node_name"]),
                         float(counters.get("MPI_TOTAL_COMM_TIME", 0.0)),
                         float(sum(counters.get(name, 0.0) for name in MPI_WAIT_COUNTERS))))
    except KeyError:
        return None
    if processes is not None and sorted(row[0] for row in rows) != list(range(processes)):
        return None
    return rows


def _apmpi_rows_in_child(path: Path) -> list[tuple]:
    """APMPI's rows read by a fresh interpreter, where the reader has not been used yet."""
    done = subprocess.run([sys.executable, "-c", _APMPI_CHILD, str(path)], capture_output=True,
                          text=True, timeout=CHILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
    rows = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else None
    if rows is None:
        raise LabError(f"the APMPI module of {path} could not be read ({done.stderr.strip()[-200:]}); "
                       "diagnose this log in a process of its own: python -m iolab diagnose LOG")
    return [tuple(row) for row in rows]


class DarshanLog:
    """One Darshan log: its records as Run facts, and tidy frames for tables and plots."""

    def __init__(self, report, name: str, path: Path | None = None) -> None:
        self.report = report
        self.name = name
        self.path = path
        self.names = dict(report.name_records)
        self._run: Run | None = None
        self._tabulated: dict[str, pd.DataFrame] = {}

    def _frames(self, module: str) -> pd.DataFrame:
        """A module's counters and fcounters side by side, one row per record; empty if absent.
        Tabulated once per module (the facts, the tables and the histogram all read them)."""
        if module not in self._tabulated:
            self._tabulated[module] = self._tabulate(module)
        return self._tabulated[module]

    def _tabulate(self, module: str) -> pd.DataFrame:
        if module not in self.report.records:
            return pd.DataFrame()
        try:
            frames = self.report.records[module].to_df()
        except (KeyError, ValueError, TypeError):  # a module PyDarshan cannot tabulate (APMPI)
            return pd.DataFrame()
        counters = frames["counters"]
        fcounters = frames.get("fcounters")
        if fcounters is not None and len(fcounters) == len(counters):
            merged = pd.concat([counters, fcounters.drop(columns=["rank", "id"])], axis=1)
        else:
            merged = counters
        merged = merged.copy()
        merged["path"] = merged["id"].map(self.names).fillna(merged["id"].astype(str))
        return merged

    def job(self) -> dict:
        """The job's facts: ranks, run time, modules, executable."""
        job = self.report.metadata["job"]
        run_time = job.get("run_time")
        if run_time is None:
            run_time = (job["end_time_sec"] + job.get("end_time_nsec", 0) / 1e9
                        - job["start_time_sec"] - job.get("start_time_nsec", 0) / 1e9)
        exe = self.report.metadata.get("exe", "")
        return {"processes": int(job["nprocs"]), "run_time_s": float(run_time),
                "modules": ", ".join(self.report.modules), "jobid": job.get("jobid"),
                "executable": exe.split()[0] if exe else "",
                "darshan_version": job.get("metadata", {}).get("lib_ver", "")}

    def run(self) -> Run:
        """Every layer's records as Run facts (computed once)."""
        if self._run is None:
            job = self.job()
            layers = [self._layer_records(layer, prefix) for layer, prefix in LAYERS.items()]
            layers = [frame for frame in layers if not frame.empty]
            records = pd.concat(layers, ignore_index=True) if layers else empty_records()
            records["origin"] = origins(records["path"])  # once for all layers' paths
            self._run = Run("darshan", self.name, job["processes"], job["run_time_s"],
                            complete(records), self.ost_layout(),
                            tuple(self.report.modules), job,
                            tuple((str(point), str(kind))
                                  for point, kind in self.report.data.get("mounts") or ()),
                            self.dxt_frame, self.mpi_frame())
        return self._run

    def _layer_records(self, layer: str, p: str) -> pd.DataFrame:
        frame = self._frames(layer)
        if frame.empty:
            return frame
        rank = frame["rank"].astype("int64")
        shared = rank < 0
        has_sizes = f"{p}_SIZE_READ_0_100" in frame or f"{p}_SIZE_READ_AGG_0_100" in frame
        agg = "AGG_" if f"{p}_SIZE_READ_AGG_0_100" in frame else ""
        bytes_read, bytes_written = _sum(frame, f"{p}_BYTES_READ"), _sum(frame, f"{p}_BYTES_WRITTEN")
        records = pd.DataFrame({
            "layer": layer, "path": frame["path"], "rank": rank,
            "opens": _sum(frame, f"{p}_OPENS", f"{p}_CREATES", f"{p}_FDOPENS",
                          f"{p}_INDEP_OPENS", f"{p}_COLL_OPENS"),
            "stats": _sum(frame, f"{p}_STATS"),
            "reads": _sum(frame, f"{p}_READS", f"{p}_INDEP_READS", f"{p}_COLL_READS",
                          f"{p}_SPLIT_READS", f"{p}_NB_READS"),
            "writes": _sum(frame, f"{p}_WRITES", f"{p}_INDEP_WRITES", f"{p}_COLL_WRITES",
                           f"{p}_SPLIT_WRITES", f"{p}_NB_WRITES"),
            "syncs": _sum(frame, f"{p}_FSYNCS", f"{p}_FDSYNCS", f"{p}_SYNCS", f"{p}_FLUSHES"),
            "mmaps": _or_nan(frame, f"{p}_MMAPS").clip(lower=0),
            "collective": _collective(frame, p),
            "bytes_read": bytes_read, "bytes_written": bytes_written,
            "small_reads": _small(frame, f"{p}_SIZE_READ_{agg}", bytes_read,
                                  _sum(frame, f"{p}_READS", f"{p}_INDEP_READS", f"{p}_COLL_READS"))
            if has_sizes else np.nan,
            "small_writes": _small(frame, f"{p}_SIZE_WRITE_{agg}", bytes_written,
                                   _sum(frame, f"{p}_WRITES", f"{p}_INDEP_WRITES",
                                        f"{p}_COLL_WRITES"))
            if has_sizes else np.nan,
            "seq_reads": _or_nan(frame, f"{p}_SEQ_READS"),
            "seq_writes": _or_nan(frame, f"{p}_SEQ_WRITES"),
            "unaligned": _or_nan(frame, f"{p}_FILE_NOT_ALIGNED"),
            "alignment": _or_nan(frame, f"{p}_FILE_ALIGNMENT"),
            # MAX_BYTE is the offset of the last byte touched: + 1 is the range used.
            "max_byte_read": np.where(bytes_read > 0, _sum(frame, f"{p}_MAX_BYTE_READ") + 1, 0),
            "max_byte_written": np.where(bytes_written > 0,
                                         _sum(frame, f"{p}_MAX_BYTE_WRITTEN") + 1, 0),
            # Darshan keeps each record's slowest single read and write, and its size
            "slowest_read_s": _or_nan(frame, f"{p}_F_MAX_READ_TIME"),
            "slowest_read_bytes": _or_nan(frame, f"{p}_MAX_READ_TIME_SIZE"),
            "slowest_write_s": _or_nan(frame, f"{p}_F_MAX_WRITE_TIME"),
            "slowest_write_bytes": _or_nan(frame, f"{p}_MAX_WRITE_TIME_SIZE"),
            "read_time_s": _sum(frame, f"{p}_F_READ_TIME"),
            "write_time_s": _sum(frame, f"{p}_F_WRITE_TIME"),
            "meta_time_s": _sum(frame, f"{p}_F_META_TIME", f"{p}_F_WAIT_TIME"),
        })
        for side in ("fastest", "slowest"):
            upper = side.upper()
            records[f"{side}_rank"] = _or_nan(frame, f"{p}_{upper}_RANK").where(shared)
            records[f"{side}_rank_s"] = _or_nan(frame, f"{p}_F_{upper}_RANK_TIME").where(shared)
            records[f"{side}_rank_bytes"] = _or_nan(frame, f"{p}_{upper}_RANK_BYTES").where(shared)
        return records

    def ost_layout(self) -> pd.DataFrame:
        """Which OSTs hold each file (LUSTRE module), one row per file and OST, each once.

        A log may repeat a file's layout once per rank that opened it; only the first record
        of each (file, component) is kept."""
        if "LUSTRE" not in self.report.records:
            return pd.DataFrame(columns=OST_COLUMNS)
        frames = self.report.records["LUSTRE"].to_df()
        frame = frames.get("components", frames.get("counters"))
        if frame is None or frame.empty or "LUSTRE_OST_IDS" not in frame:
            return pd.DataFrame(columns=OST_COLUMNS)
        frame = frame.assign(path=frame["id"].map(self.names).fillna(frame["id"].astype(str)))
        keys = [key for key in ("id", "LUSTRE_COMP_EXT_START", "LUSTRE_COMP_MIRROR_ID")
                if key in frame]
        frame = frame.drop_duplicates(subset=keys)
        size = "LUSTRE_COMP_STRIPE_SIZE" if "LUSTRE_COMP_STRIPE_SIZE" in frame else "LUSTRE_STRIPE_SIZE"
        count = ("LUSTRE_COMP_STRIPE_COUNT" if "LUSTRE_COMP_STRIPE_COUNT" in frame
                 else "LUSTRE_STRIPE_WIDTH")
        layout = frame[["path", "LUSTRE_OST_IDS", size, count]].explode("LUSTRE_OST_IDS")
        layout = layout.dropna(subset=["LUSTRE_OST_IDS"])
        layout.columns = ["path", "ost", "stripe_size", "stripe_count"]
        return layout.astype({"ost": "int64", "stripe_size": "int64", "stripe_count": "int64"}
                             ).drop_duplicates(["path", "ost"]).reset_index(drop=True)

    def modules_frame(self) -> pd.DataFrame:
        """Per I/O layer: records (file x rank), opens, reads, writes, bytes."""
        records = self.run().records
        frame = records.groupby("layer", sort=False).agg(
            records=("path", "size"), opens=("opens", "sum"), reads=("reads", "sum"),
            writes=("writes", "sum"), bytes_read=("bytes_read", "sum"),
            bytes_written=("bytes_written", "sum"))
        return frame.astype("int64").rename_axis("module").reset_index()

    def files_frame(self) -> pd.DataFrame:
        """POSIX files by bytes moved, with their ranks, origin and time per kind of call."""
        posix = self.run().records
        posix = posix[posix.layer == "POSIX"]
        frame = posix.groupby("path").agg(
            origin=("origin", "first"), ranks=("rank", "nunique"),
            bytes_read=("bytes_read", "sum"), bytes_written=("bytes_written", "sum"),
            read_time_s=("read_time_s", "sum"), write_time_s=("write_time_s", "sum"),
            meta_time_s=("meta_time_s", "sum"))
        shared = (posix["rank"] < 0).groupby(posix["path"]).any()
        frame.loc[shared, "ranks"] = self.run().processes  # one record for all ranks
        frame = frame.astype({"bytes_read": "int64", "bytes_written": "int64"})
        moved = frame.bytes_read + frame.bytes_written
        return frame.loc[moved.sort_values(ascending=False, kind="stable").index].reset_index()

    def size_histogram(self, module: str = "POSIX") -> pd.DataFrame:
        """How many reads and writes fell in each of Darshan's request-size bins."""
        prefix = LAYERS.get(module, module)
        frame = self._frames(module)
        agg = "AGG_" if f"{prefix}_SIZE_READ_AGG_0_100" in frame else ""
        rows = [{"request_size": size.replace("_", "-"),
                 "reads": int(_sum(frame, f"{prefix}_SIZE_READ_{agg}{size}").sum()),
                 "writes": int(_sum(frame, f"{prefix}_SIZE_WRITE_{agg}{size}").sum())}
                for size in SIZE_BINS]
        return pd.DataFrame(rows)

    def mpi_frame(self) -> pd.DataFrame:
        """Per rank, its seconds in MPI calls and in those that wait for other ranks (APMPI),
        in MPI_COLUMNS; empty without the module. Read again by a fresh interpreter when
        this process's read does not hold every rank once (see apmpi_rows)."""
        if "APMPI" not in self.report.modules:
            return pd.DataFrame(columns=list(MPI_COLUMNS))
        rows = apmpi_rows(self.report.records.get("APMPI"), self.job()["processes"])
        if rows is None and self.path is not None:
            rows = _apmpi_rows_in_child(self.path)
        return pd.DataFrame(rows or [], columns=list(MPI_COLUMNS))

    def mpi_nodes_frame(self) -> pd.DataFrame:
        """Per node, its ranks' seconds in MPI and waiting in it (APMPI; empty without)."""
        mpi = self.run().mpi
        if mpi.empty:
            return pd.DataFrame()
        return mpi.groupby("node", as_index=False, sort=True).agg(
            ranks=("rank", "size"), mpi_median_s=("mpi_s", "median"),
            wait_median_s=("wait_s", "median"), wait_max_s=("wait_s", "max")).round(2)

    def dxt_frame(self) -> pd.DataFrame:
        """Every traced request (DXT), in REQUEST_COLUMNS."""
        pieces = []
        for module in ("DXT_POSIX", "DXT_MPIIO"):
            if module not in self.report.records:
                continue
            for record in self.report.records[module].to_df():  # one per file and rank
                for operation in ("read", "write"):
                    segments = record[f"{operation}_segments"]
                    if len(segments):
                        pieces.append(segments.assign(
                            rank=int(record["rank"]), layer=module[4:], operation=operation,
                            path=self.names.get(record["id"], str(record["id"]))))
        if not pieces:
            return pd.DataFrame(columns=REQUEST_COLUMNS)
        frame = pd.concat(pieces, ignore_index=True).rename(
            columns={"start_time": "start_s", "end_time": "end_s"})
        return frame[REQUEST_COLUMNS]

    def ost_frame(self) -> pd.DataFrame:
        """Per Lustre OST: the files on it, their bytes and transfer seconds, each counted once.

        Darshan keeps no bytes per OST; a file striped over k OSTs is counted as k equal
        shares (exact for files much larger than k stripes). The median rate is over the
        files on the OST that moved data."""
        layout = self.run().osts
        posix = self.run().records
        posix = posix[posix.layer == "POSIX"]
        if layout.empty or posix.empty:
            return pd.DataFrame(columns=["ost", "files", "bytes", "seconds", "median_MiBps"])
        per_file = posix.groupby("path").agg(bytes_read=("bytes_read", "sum"),
                                             bytes_written=("bytes_written", "sum"),
                                             read_time_s=("read_time_s", "sum"),
                                             write_time_s=("write_time_s", "sum"))
        per_file["bytes"] = per_file.bytes_read + per_file.bytes_written
        per_file["seconds"] = per_file.read_time_s + per_file.write_time_s
        placed = layout.merge(per_file[["bytes", "seconds"]], left_on="path", right_index=True)
        width = placed.groupby("path")["ost"].transform("size")
        placed["rate"] = (placed.bytes / placed.seconds / 1024**2).where(
            (placed.bytes > 0) & (placed.seconds > 0))
        placed["bytes"] = placed.bytes / width
        placed["seconds"] = placed.seconds / width
        frame = placed.groupby("ost").agg(files=("path", "nunique"), bytes=("bytes", "sum"),
                                          seconds=("seconds", "sum"),
                                          median_MiBps=("rate", "median"))
        frame["bytes"] = frame.bytes.round().astype("int64")
        return frame.reset_index().sort_values("ost", ignore_index=True)
