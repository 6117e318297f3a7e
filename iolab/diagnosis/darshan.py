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

A log is read in a child process (forked, so nothing is imported twice) and handed back
whole: libdarshan aborts or crashes on some damaged logs (exit 134, 139), and reports other
damage only on stderr while PyDarshan goes on with what it got. So the child checks the log's
length against its header's map, reads module by module watching libdarshan's errors, and a
log that cannot be read whole is refused in one sentence naming what is missing, never
diagnosed from what was left. Modules Darshan itself marked partial (it ran out of memory and
kept only some records) are read and named in `DarshanLog.incomplete`.
"""

from __future__ import annotations

import bz2
import faulthandler
import importlib.util
import os
import pickle
import select
import signal
import struct
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from iolab.core.errors import LabError
from iolab.core.safe_input import open_regular, unreadable
from iolab.diagnosis.facts import (
    MPI_COLUMNS,
    OST_COLUMNS,
    REQUEST_COLUMNS,
    Run,
    complete,
    empty_records,
)
from iolab.diagnosis.origins import origins

INSTALL_HINT = (
    "install PyDarshan with `make darshan` (PyPI `darshan`, wheels for CPython 3.7 to 3.12)"
)
_SMALL_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M")  # Darshan's bins below 1 MiB
#: Seconds the child process may take to read one log (the corpus logs take 0.1 to 3).
CHILD_TIMEOUT_S = 120
#: Darshan's magic number, at byte 8 of every log since 3.0 (in the writer's byte order).
DARSHAN_MAGIC = 6567223
#: Bytes read to recognise a log: the largest header (3.41: 64 modules) and some to spare.
HEAD_BYTES = 4096


class _Decompressor(Protocol):
    """zlib's and bz2's decompressor objects, as log_version uses them."""

    def decompress(self, data: bytes, /) -> bytes: ...


#: Darshan 1.x and 2.x logs are one gzip or bzip2 stream (*.darshan.gz, *.darshan.bz2).
_COMPRESSED: dict[bytes, Callable[[], _Decompressor]] = {
    b"\x1f\x8b": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),
    b"BZh": bz2.BZ2Decompressor,
}
#: Sentence ends of the refusals: what a user can do with a log that cannot be read.
_FIX_COPY = (
    "copy it again from the job's Darshan log folder, or diagnose a complete log; "
    "`darshan-parser` shows what libdarshan can still read"
)
#: APMPI's counters of the calls in which a rank waits for others.
MPI_WAIT_COUNTERS = (
    "MPI_BARRIER_TOTAL_TIME",
    "MPI_WAIT_TOTAL_TIME",
    "MPI_WAITALL_TOTAL_TIME",
    "MPI_WAITANY_TOTAL_TIME",
    "MPI_WAITSOME_TOTAL_TIME",
)
#: See _small: a record whose mean request is at least this is not "small" in the last bin.
MEDIUM_BYTES = 256 * 1024
SIZE_BINS = (*_SMALL_BINS, "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")
#: The layers read into records, with their counter prefix; HEATMAP, APMPI and APXC are
#: listed among the modules but hold no per-file records (APMPI's per-rank MPI time is read
#: by DarshanLog.mpi_frame; no log at hand has APXC's Cray network counters).
LAYERS = {
    "POSIX": "POSIX",
    "MPI-IO": "MPIIO",
    "STDIO": "STDIO",
    "H5F": "H5F",
    "H5D": "H5D",
    "PNETCDF_FILE": "PNETCDF_FILE",
    "PNETCDF_VAR": "PNETCDF_VAR",
}


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


def log_version(head: bytes) -> str | None:
    """The log format version ("3.21", "3.41") of a Darshan 3 log from its first bytes; None
    if they are not a Darshan log's. A Darshan 1.x or 2.x log is refused by name: darshan-util
    3 and PyDarshan cannot read that format."""
    version = head[:8].split(b"\0")[0].decode("ascii", "replace")
    if len(head) >= 16 and DARSHAN_MAGIC in (
        struct.unpack("<q", head[8:16])[0],
        struct.unpack(">q", head[8:16])[0],
    ):
        return version
    for magic, decompressor in _COMPRESSED.items():
        if head.startswith(magic):
            try:
                inner = decompressor().decompress(head)[:8]
            except (OSError, EOFError, ValueError, zlib.error):
                return None
            old = inner.split(b"\0")[0].decode("ascii", "replace")
            if old[:2] in ("1.", "2."):
                raise LabError(
                    f"this is a Darshan {old} log (the 1.x/2.x format, written before Darshan "
                    "3.0), which PyDarshan and darshan-util 3.x cannot read; read it with "
                    "`darshan-parser` of darshan-util 2.x, or diagnose a log of Darshan 3 or "
                    "later"
                )
    return None


def read_head(path: Path, what: str, size: int = HEAD_BYTES) -> bytes:
    """The first `size` bytes of a regular file; one sentence for a folder, a FIFO (never
    waited on), a device or a file the user may not read."""
    try:
        with open_regular(path) as handle:
            return handle.read(size)
    except FileNotFoundError:
        raise LabError(f"{path} does not exist; pass {what}") from None
    except IsADirectoryError:
        raise LabError(
            f"cannot read {path}: it is a folder, not a regular file; pass {what}"
        ) from None
    except OSError as err:
        raise unreadable(path, err, f"pass {what}") from None


LOG_WANTED = (
    "a Darshan log (*.darshan), usually in your centre's Darshan log folder or where "
    "DARSHAN_LOGFILE pointed"
)


def read_log(path: Path | str) -> DarshanLog:
    """Read a whole Darshan log in a child process; one sentence if it is not a Darshan 3 log,
    is cut short or damaged, or crashes libdarshan (see the module's docstring)."""
    problem = darshan_problem()
    if problem:
        raise LabError(problem)
    path = Path(path).expanduser()
    head = read_head(path, LOG_WANTED)
    try:
        version = log_version(head)
    except LabError as err:
        raise LabError(f"{path}: {err}") from None
    if version is None:
        raise LabError(
            f"{path} could not be read as a Darshan log: "
            + ("it is empty (0 bytes)" if not head else "it does not begin with a Darshan header")
            + f"; pass {LOG_WANTED}"
        )
    report, incomplete = _read_in_child(path)
    return DarshanLog(report, path.name, path, incomplete)


@dataclass(frozen=True)
class HeaderMap:
    """Where a Darshan 3 log's regions lie, from its uncompressed header: the job record
    (from the header's end to the first region), the file names, each module's records."""

    size: int  # bytes of the header itself
    names: tuple[int, int]  # offset and length of the file names
    modules: tuple[tuple[int, int], ...]  # offset and length of each module present, file order


def header_map(head: bytes, version: str) -> HeaderMap | None:
    """The header's map; None if `head` is shorter than the header. Format 3.41 (Darshan
    3.4.1+) keeps 64 modules and a 64-bit partial flag, earlier formats 16 and 32 bits."""
    little = struct.unpack("<q", head[8:16])[0] == DARSHAN_MAGIC
    order = "<" if little else ">"
    slots, names_at = (64, 32) if version >= "3.41" else (16, 24)
    size = names_at + 16 + slots * (16 + 4)  # + the maps (offset, length) and module versions
    if len(head) < size:
        return None
    maps = [struct.unpack_from(order + "QQ", head, names_at + 16 * i) for i in range(slots + 1)]
    return HeaderMap(size, maps[0], tuple(m for m in maps[1:] if m[1] > 0))


def _missing(header: HeaderMap, present: dict, size: int) -> list[str]:
    """The parts of the log that end past its last byte, by name: what a cut took."""
    regions = [(offset, length) for offset, length in (header.names, *header.modules) if length]
    first = min((offset for offset, _ in regions), default=size)
    missing = ["the job record"] if size < first else []
    if header.names[1] and size < sum(header.names):
        missing.append("the file names")
    # libdarshan numbers the modules of older formats differently, in the same order
    named = sorted(present, key=lambda name: present[name]["idx"])
    same = [present[name]["len"] for name in named] == [m[1] for m in header.modules]
    cut = [
        named[number] if same else f"region {number + 1}"
        for number, (offset, length) in enumerate(header.modules)
        if size < offset + length
    ]
    if cut:
        missing.append(f"the {', '.join(cut)} module{'s' if len(cut) > 1 else ''}")
    return missing


def _stderr_lines() -> Callable[[], list[str]]:
    """Send this process's stderr (libdarshan prints its errors there) to a file, and return
    a function giving the error lines written since its last call."""
    sink = tempfile.TemporaryFile()
    os.dup2(sink.fileno(), 2)
    seen = 0

    def errors() -> list[str]:
        nonlocal seen
        sink.seek(seen)
        text = sink.read().decode("utf-8", "replace")
        seen += len(text.encode("utf-8", "replace"))
        return [
            line.strip()
            for line in text.splitlines()
            if line.startswith(("Error", "darshan_log_open"))
        ]

    return errors


def _read_module(report, module: str) -> None:
    """One module's records, by the PyDarshan reader for its kind (as its read_all does)."""
    if module in ("DXT_POSIX", "DXT_MPIIO"):
        report.mod_read_all_dxt_records(module, warnings=False)
    elif module == "LUSTRE":
        report.mod_read_all_lustre_records(warnings=False)
    elif module == "APMPI":
        report.mod_read_all_apmpi_records(warnings=False)
    elif module == "APXC":
        report.mod_read_all_apxc_records(warnings=False)
    elif module == "HEATMAP":
        report.read_all_heatmap_records()
    else:
        report.mod_read_all_records(module, warnings=False)


def _read_here(path: Path) -> tuple[str | None, object, tuple[str, ...]]:
    """(why the log cannot be read, or None; the closed DarshanReport; the modules Darshan
    marked partial). Runs in the child: libdarshan may abort or crash here."""
    import darshan
    from darshan.backend import cffi_backend as backend

    errors = _stderr_lines()
    with open(path, "rb") as handle:
        head = handle.read(HEAD_BYTES)
        size = os.fstat(handle.fileno()).st_size
    regions = header_map(head, log_version(head) or "")
    missing = ["its header"] if regions is None else []
    if regions is not None:
        log = backend.log_open(str(path))
        if not log["handle"]:
            said = "; ".join(errors()) or "no reason given"
            return f"{path} is damaged: libdarshan cannot open it ({said}); {_FIX_COPY}", None, ()
        missing = _missing(regions, backend.log_get_modules(log), size)
        backend.log_close(log)
    if missing:
        parts = " and ".join(filter(None, (", ".join(missing[:-1]), missing[-1])))
        return (
            (
                f"{path} is cut short or damaged: it ends at byte {size:,}, before the end of "
                f"{parts} (a job killed while Darshan wrote the log, or an interrupted copy), so "
                f"it cannot be diagnosed; {_FIX_COPY}"
            ),
            None,
            (),
        )
    report = darshan.DarshanReport(str(path), read_all=False)
    unread = ["the job record"] if errors() else []
    report.read_name_records()
    unread += ["the file names"] if errors() else []
    for module in list(report.modules):
        try:
            _read_module(report, module)
        except Exception as err:  # PyDarshan meeting data libdarshan handed over damaged
            unread.append(f"the {module} module ({type(err).__name__})")
            continue
        if errors():
            unread.append(f"the {module} module")
    if (
        "APMPI" in report.modules
        and "the APMPI module" not in unread
        and apmpi_rows(report.records.get("APMPI"), int(report.metadata["job"]["nprocs"])) is None
    ):
        unread.append("the APMPI module (not one record per rank)")
    if unread:  # said before closing the log: libdarshan may abort in its close too
        return (
            (
                f"{path} is damaged: libdarshan could not read {', '.join(unread)} whole, so it "
                f"cannot be diagnosed; {_FIX_COPY}"
            ),
            None,
            (),
        )
    report._cleanup()  # closes libdarshan's handle, which cannot be pickled
    partial = tuple(name for name, info in report.modules.items() if info.get("partial_flag"))
    return None, report, partial


def _read_in_child(path: Path) -> tuple[object, tuple[str, ...]]:
    """The DarshanReport of `path` and its partial modules, read by a forked child that sends
    them back pickled; LabError if the child refuses the log, crashes or takes too long."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns, never runs the parent's exit handlers
        os.close(reader)
        faulthandler.disable()  # a crash here is the parent's one sentence, not a dump
        code = 0
        try:
            sent = pickle.dumps(_read_here(path), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as err:  # noqa: BLE001  (anything, as one sentence for the parent)
            why = f"{type(err).__name__}: {err}"
            sent = pickle.dumps(
                (f"{path} could not be read as a Darshan log ({why}); {_FIX_COPY}", None, ())
            )
            code = 1
        with os.fdopen(writer, "wb") as out:
            out.write(sent)
        os._exit(code)
    os.close(writer)
    answered = False
    try:
        with os.fdopen(reader, "rb", buffering=0) as incoming:
            chunks, deadline = [], time.monotonic() + CHILD_TIMEOUT_S
            while True:
                ready, _, _ = select.select([incoming], [], [], max(deadline - time.monotonic(), 0))
                if not ready:
                    raise LabError(
                        f"reading {path} took more than {CHILD_TIMEOUT_S} s and was "
                        f"stopped: the log is damaged or far larger than a job's log; "
                        f"{_FIX_COPY}"
                    )
                chunk = incoming.read(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        answered = True
    finally:
        if not answered:  # a timeout, or Ctrl-C here: the child must not outlive the command
            _stop(pid)
        _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        raise LabError(
            f"{path} is damaged: libdarshan was killed by {name} while reading it "
            f"(exit {128 + os.WTERMSIG(status)}), so it cannot be diagnosed; "
            f"{_FIX_COPY}"
        )
    problem, report, partial = pickle.loads(b"".join(chunks))
    if problem:
        raise LabError(problem)
    return report, partial


def _stop(pid: int) -> None:
    """Kill the child (it may have ended already)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _sum(frame: pd.DataFrame, *names: str) -> pd.Series:
    """The sum of those columns the frame has (Darshan versions differ); 0 if none. Darshan
    writes -1 for a counter its module did not keep (PnetCDF's bytes and times in 3.3):
    that is no number, and a record whose every such column says so gets NaN, never a sum
    of -1s (a layer table of -3 bytes and -6 s)."""
    present = [frame[name].to_numpy(dtype="float64") for name in names if name in frame]
    if not present:
        return pd.Series(np.zeros(len(frame)), index=frame.index)
    kept = np.where(np.asarray(present) < 0, np.nan, present)
    known = ~np.isnan(kept).all(axis=0)
    total = np.where(known, np.nansum(kept, axis=0), np.nan)
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


def apmpi_rows(collection, processes: int | None = None) -> list[tuple] | None:
    """(rank, node, MPI seconds, waiting seconds) of each APMPI record after the header;
    with `processes`, None unless there is one record for each rank 0 .. processes - 1.

    PyDarshan's to_df cannot tabulate APMPI, so the records are read one by one. Darshan's
    reader of the module keeps state for the whole process: in PyDarshan 3.5 the second log
    with APMPI read in one process comes back misread, its header intact but every rank's
    record zeros of rank 0, one record short (seen on both corpus logs with APMPI). Every log
    is therefore read in a child forked from a process that never read one (read_log), and
    the child refuses a log whose rows fail this check: APMPI writes one record per rank.
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
            rows.append(
                (
                    int(record["rank"]),
                    str(record["node_name"]),
                    float(counters.get("MPI_TOTAL_COMM_TIME", 0.0)),
                    float(sum(counters.get(name, 0.0) for name in MPI_WAIT_COUNTERS)),
                )
            )
    except KeyError:
        return None
    if processes is not None and sorted(row[0] for row in rows) != list(range(processes)):
        return None
    return rows


class DarshanLog:
    """One Darshan log: its records as Run facts, and tidy frames for tables and plots."""

    def __init__(
        self, report, name: str, path: Path | None = None, incomplete: tuple[str, ...] = ()
    ) -> None:
        self.report = report
        self.name = name
        self.path = path
        self.incomplete = incomplete  # modules Darshan marked partial: records were dropped
        self.names = dict(report.name_records)
        self._run: Run | None = None
        self._dxt: pd.DataFrame | None = None
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
            run_time = (
                job["end_time_sec"]
                + job.get("end_time_nsec", 0) / 1e9
                - job["start_time_sec"]
                - job.get("start_time_nsec", 0) / 1e9
            )
        exe = self.report.metadata.get("exe", "")
        return {
            "processes": int(job["nprocs"]),
            "run_time_s": float(run_time),
            "modules": ", ".join(self.report.modules),
            "jobid": job.get("jobid"),
            "executable": exe.split()[0] if exe else "",
            "darshan_version": job.get("metadata", {}).get("lib_ver", ""),
        }

    def run(self) -> Run:
        """Every layer's records as Run facts (computed once)."""
        if self._run is None:
            job = self.job()
            layers = [self._layer_records(layer, prefix) for layer, prefix in LAYERS.items()]
            layers = [frame for frame in layers if not frame.empty]
            records = pd.concat(layers, ignore_index=True) if layers else empty_records()
            records["origin"] = origins(records["path"])  # once for all layers' paths
            self._run = Run(
                "darshan",
                self.name,
                job["processes"],
                job["run_time_s"],
                complete(records),
                self.ost_layout(),
                tuple(self.report.modules),
                job,
                tuple(
                    (str(point), str(kind)) for point, kind in self.report.data.get("mounts") or ()
                ),
                self.dxt_frame,
                self.mpi_frame(),
                self.incomplete,
            )
        return self._run

    def _layer_records(self, layer: str, p: str) -> pd.DataFrame:
        frame = self._frames(layer)
        if frame.empty:
            return frame
        rank = frame["rank"].astype("int64")
        shared = rank < 0
        has_sizes = f"{p}_SIZE_READ_0_100" in frame or f"{p}_SIZE_READ_AGG_0_100" in frame
        agg = "AGG_" if f"{p}_SIZE_READ_AGG_0_100" in frame else ""
        bytes_read, bytes_written = (
            _sum(frame, f"{p}_BYTES_READ"),
            _sum(frame, f"{p}_BYTES_WRITTEN"),
        )
        records = pd.DataFrame(
            {
                "layer": layer,
                "path": frame["path"],
                "rank": rank,
                "opens": _sum(
                    frame,
                    f"{p}_OPENS",
                    f"{p}_CREATES",
                    f"{p}_FDOPENS",
                    f"{p}_INDEP_OPENS",
                    f"{p}_COLL_OPENS",
                ),
                "stats": _sum(frame, f"{p}_STATS"),
                "reads": _sum(
                    frame,
                    f"{p}_READS",
                    f"{p}_INDEP_READS",
                    f"{p}_COLL_READS",
                    f"{p}_SPLIT_READS",
                    f"{p}_NB_READS",
                ),
                "writes": _sum(
                    frame,
                    f"{p}_WRITES",
                    f"{p}_INDEP_WRITES",
                    f"{p}_COLL_WRITES",
                    f"{p}_SPLIT_WRITES",
                    f"{p}_NB_WRITES",
                ),
                "syncs": _sum(frame, f"{p}_FSYNCS", f"{p}_FDSYNCS", f"{p}_SYNCS", f"{p}_FLUSHES"),
                "mmaps": _or_nan(frame, f"{p}_MMAPS").clip(lower=0),
                "collective": _collective(frame, p),
                "bytes_read": bytes_read,
                "bytes_written": bytes_written,
                "small_reads": _small(
                    frame,
                    f"{p}_SIZE_READ_{agg}",
                    bytes_read,
                    _sum(frame, f"{p}_READS", f"{p}_INDEP_READS", f"{p}_COLL_READS"),
                )
                if has_sizes
                else np.nan,
                "small_writes": _small(
                    frame,
                    f"{p}_SIZE_WRITE_{agg}",
                    bytes_written,
                    _sum(frame, f"{p}_WRITES", f"{p}_INDEP_WRITES", f"{p}_COLL_WRITES"),
                )
                if has_sizes
                else np.nan,
                "seq_reads": _or_nan(frame, f"{p}_SEQ_READS"),
                "seq_writes": _or_nan(frame, f"{p}_SEQ_WRITES"),
                "unaligned": _or_nan(frame, f"{p}_FILE_NOT_ALIGNED"),
                "alignment": _or_nan(frame, f"{p}_FILE_ALIGNMENT"),
                # MAX_BYTE is the offset of the last byte touched: + 1 is the range used.
                "max_byte_read": np.where(bytes_read > 0, _sum(frame, f"{p}_MAX_BYTE_READ") + 1, 0),
                "max_byte_written": np.where(
                    bytes_written > 0, _sum(frame, f"{p}_MAX_BYTE_WRITTEN") + 1, 0
                ),
                # Darshan keeps each record's slowest single read and write, and its size
                "slowest_read_s": _or_nan(frame, f"{p}_F_MAX_READ_TIME"),
                "slowest_read_bytes": _or_nan(frame, f"{p}_MAX_READ_TIME_SIZE"),
                "slowest_write_s": _or_nan(frame, f"{p}_F_MAX_WRITE_TIME"),
                "slowest_write_bytes": _or_nan(frame, f"{p}_MAX_WRITE_TIME_SIZE"),
                "read_time_s": _sum(frame, f"{p}_F_READ_TIME"),
                "write_time_s": _sum(frame, f"{p}_F_WRITE_TIME"),
                "meta_time_s": _sum(frame, f"{p}_F_META_TIME", f"{p}_F_WAIT_TIME"),
            }
        )
        for side in ("fastest", "slowest"):
            upper = side.upper()
            records[f"{side}_rank"] = _or_nan(frame, f"{p}_{upper}_RANK").where(shared)
            records[f"{side}_rank_s"] = _or_nan(frame, f"{p}_F_{upper}_RANK_TIME").where(shared)
            records[f"{side}_rank_bytes"] = _or_nan(frame, f"{p}_{upper}_RANK_BYTES").where(shared)
        records["rank_bytes_variance"] = _or_nan(frame, f"{p}_F_VARIANCE_RANK_BYTES").where(shared)
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
        keys = [
            key for key in ("id", "LUSTRE_COMP_EXT_START", "LUSTRE_COMP_MIRROR_ID") if key in frame
        ]
        frame = frame.drop_duplicates(subset=keys)
        size = (
            "LUSTRE_COMP_STRIPE_SIZE"
            if "LUSTRE_COMP_STRIPE_SIZE" in frame
            else "LUSTRE_STRIPE_SIZE"
        )
        count = (
            "LUSTRE_COMP_STRIPE_COUNT"
            if "LUSTRE_COMP_STRIPE_COUNT" in frame
            else "LUSTRE_STRIPE_WIDTH"
        )
        layout = frame[["path", "LUSTRE_OST_IDS", size, count]].explode("LUSTRE_OST_IDS")
        layout = layout.dropna(subset=["LUSTRE_OST_IDS"])
        layout.columns = ["path", "ost", "stripe_size", "stripe_count"]
        return (
            layout.astype({"ost": "int64", "stripe_size": "int64", "stripe_count": "int64"})
            .drop_duplicates(["path", "ost"])
            .reset_index(drop=True)
        )

    def modules_frame(self) -> pd.DataFrame:
        """Per I/O layer: records (file x rank), opens, reads, writes, bytes, and the seconds
        in its reads, writes and metadata calls summed over ranks: a layer's seconds include
        the layers below it (an MPI-IO write's time holds its POSIX writes)."""
        records = self.run().records
        columns = [
            "opens",
            "reads",
            "writes",
            "bytes_read",
            "bytes_written",
            "read_time_s",
            "write_time_s",
            "meta_time_s",
        ]
        by_layer = records.groupby("layer", sort=False)
        # a figure the layer's module never kept (Darshan's -1) stays unknown: n/a, not 0
        frame = by_layer[columns].sum(min_count=1)
        frame.insert(0, "records", by_layer.size())
        counts = [c for c in frame if not c.endswith("_s")]
        frame = frame.astype(dict.fromkeys(counts, "Int64"))
        return frame.rename_axis("module").reset_index()

    def files_frame(self) -> pd.DataFrame:
        """POSIX files by bytes moved, with their ranks, origin and time per kind of call."""
        posix = self.run().records
        posix = posix[posix.layer == "POSIX"]
        frame = posix.groupby("path").agg(
            origin=("origin", "first"),
            ranks=("rank", "nunique"),
            bytes_read=("bytes_read", "sum"),
            bytes_written=("bytes_written", "sum"),
            read_time_s=("read_time_s", "sum"),
            write_time_s=("write_time_s", "sum"),
            meta_time_s=("meta_time_s", "sum"),
        )
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
        rows = [
            {
                "request_size": size.replace("_", "-"),
                "reads": int(_sum(frame, f"{prefix}_SIZE_READ_{agg}{size}").sum()),
                "writes": int(_sum(frame, f"{prefix}_SIZE_WRITE_{agg}{size}").sum()),
            }
            for size in SIZE_BINS
        ]
        return pd.DataFrame(rows)

    def mpi_frame(self) -> pd.DataFrame:
        """Per rank, its seconds in MPI calls and in those that wait for other ranks (APMPI),
        in MPI_COLUMNS; empty without the module (read_log checked one record per rank)."""
        if "APMPI" not in self.report.modules:
            return pd.DataFrame(columns=list(MPI_COLUMNS))
        rows = apmpi_rows(self.report.records.get("APMPI"), self.job()["processes"])
        return pd.DataFrame(rows or [], columns=list(MPI_COLUMNS))

    def mpi_nodes_frame(self) -> pd.DataFrame:
        """Per node, its ranks' seconds in MPI and waiting in it (APMPI; empty without)."""
        mpi = self.run().mpi
        if mpi.empty:
            return pd.DataFrame()
        return (
            mpi.groupby("node", as_index=False, sort=True)
            .agg(
                ranks=("rank", "size"),
                mpi_median_s=("mpi_s", "median"),
                wait_median_s=("wait_s", "median"),
                wait_max_s=("wait_s", "max"),
            )
            .round(2)
        )

    def dxt_frame(self) -> pd.DataFrame:
        """Every traced request (DXT), in REQUEST_COLUMNS; built once, as rules and the
        timeline both ask. The records are read as they are: PyDarshan's `to_df` would
        deep-copy every segment first (seconds for a million requests)."""
        if self._dxt is None:
            self._dxt = self._build_dxt_frame()
        return self._dxt

    def _build_dxt_frame(self) -> pd.DataFrame:
        pieces = []
        for module in ("DXT_POSIX", "DXT_MPIIO"):
            if module not in self.report.records:
                continue
            for record in self.report.records[module]:  # one per file and rank
                for operation in ("read", "write"):
                    segments = record[f"{operation}_segments"]  # a list of dicts
                    if len(segments):
                        pieces.append(
                            pd.DataFrame(segments).assign(
                                rank=int(record["rank"]),
                                layer=module[4:],
                                operation=operation,
                                path=self.names.get(record["id"], str(record["id"])),
                            )
                        )
        if not pieces:
            return pd.DataFrame(columns=REQUEST_COLUMNS)
        frame = pd.concat(pieces, ignore_index=True).rename(
            columns={"start_time": "start_s", "end_time": "end_s"}
        )
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
        per_file = posix.groupby("path").agg(
            bytes_read=("bytes_read", "sum"),
            bytes_written=("bytes_written", "sum"),
            read_time_s=("read_time_s", "sum"),
            write_time_s=("write_time_s", "sum"),
        )
        per_file["bytes"] = per_file.bytes_read + per_file.bytes_written
        per_file["seconds"] = per_file.read_time_s + per_file.write_time_s
        placed = layout.merge(per_file[["bytes", "seconds"]], left_on="path", right_index=True)
        width = placed.groupby("path")["ost"].transform("size")
        placed["rate"] = (placed.bytes / placed.seconds / 1024**2).where(
            (placed.bytes > 0) & (placed.seconds > 0)
        )
        placed["bytes"] = placed.bytes / width
        placed["seconds"] = placed.seconds / width
        frame = placed.groupby("ost").agg(
            files=("path", "nunique"),
            bytes=("bytes", "sum"),
            seconds=("seconds", "sum"),
            median_MiBps=("rate", "median"),
        )
        frame["bytes"] = frame.bytes.round().astype("int64")
        return frame.reset_index().sort_values("ost", ignore_index=True)
