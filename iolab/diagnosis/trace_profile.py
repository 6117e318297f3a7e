"""A traced program's whole file I/O (Profile): the per-file records sorted by whose file
each is, as tables and as the diagnosis's facts (Run). Apart from the running (trace) and the
reading of strace (trace_tally), because a saved trace and a command traced now end here alike.

Files are sorted into the program's data, its software environment's and the system's
(iolab.diagnosis.origins), because a short script spends most of its calls importing, not
reading its data.
"""

from __future__ import annotations

import os
import re
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from iolab.core.workspace import public_text
from iolab.diagnosis.facts import Run, complete
from iolab.diagnosis.origins import origins as path_origins
from iolab.diagnosis.origins import this_interpreter
from iolab.diagnosis.trace_files import ALIGNMENT, SIZE_BINS, SMALL_BYTES, FileProfile, per_file

#: The file a Python looks for to find its prefix (Modules/getpath.py): lib/pythonX.Y/os.py.
_LANDMARK = re.compile(r"^(/.+)/lib/python\d+\.\d+/os\.py$")


def traced_prefixes(paths: Iterable[str]) -> tuple[str, ...]:
    """The prefixes of the Pythons a trace shows starting, found by their landmark as Python
    finds its own; a Python installed in the system's folders (/usr) is left to them."""
    found = list(dict.fromkeys(m.group(1) for m in map(_LANDMARK.match, paths) if m))
    kinds: Iterable[str] = path_origins(pd.Series(found, dtype=object)) if found else []
    return tuple(prefix for prefix, kind in zip(found, kinds, strict=True) if kind == "data")


@dataclass
class Profile:
    """A program's file I/O: per file and process with strace, whole-process counters without."""

    command: list[str]
    method: str  # "strace" or "proc-io"
    exit_code: int
    records: dict[tuple[str, str], FileProfile]  # (path, pid) -> what it did to the file
    process_io: dict[str, int] | None  # /proc/<pid>/io counters (proc-io only)
    note: str
    stdout: str = ""
    stderr: str = ""
    wall_time_s: float = 0.0  # the traced command's, strace's slowdown included
    untraced_wall_s: list[float] = field(default_factory=list)  # the same command, no tracer
    ran_here: bool = False  # a command traced now, not a trace saved earlier

    @property
    def tracer_slowdown(self) -> float | None:
        """The traced run's wall time over the median untraced one; None if not measured."""
        if not self.untraced_wall_s or self.method != "strace":
            return None
        untraced = statistics.median(self.untraced_wall_s)
        return self.wall_time_s / untraced if untraced > 0 else None

    @property
    def files(self) -> dict[str, FileProfile]:
        return per_file(self.records)

    def origins(self) -> dict[str, str]:
        """Each file's origin (iolab.diagnosis.origins), with the prefixes of this Python and
        of the Pythons the trace shows starting."""
        paths = list(dict.fromkeys(path for path, _ in self.records))
        if not paths:
            return {}
        prefixes = (*this_interpreter(), *traced_prefixes(paths))
        kinds = map(str, path_origins(pd.Series(paths, dtype=object), prefixes))
        found = dict(zip(paths, kinds, strict=True))
        # A folder Python searched for modules (the script's own, a source checkout on
        # sys.path) is the environment's: it holds environment files and moved no data.
        searched = {os.path.dirname(path) for path, kind in found.items() if kind == "environment"}
        files = self.files
        for path in searched & {p for p, kind in found.items() if kind == "data"}:
            done = files[path]
            if done.reads + done.writes + done.syncs + done.mmaps == 0:
                found[path] = "environment"
        return found

    def frame(self) -> pd.DataFrame:
        """One row per file, the busiest first; units in the column names."""
        origins = self.origins()
        columns = [
            "path",
            "origin",
            "calls",
            "opens",
            "lookups",
            "reads",
            "writes",
            "seeks",
            "syncs",
            "mmaps",
            "bytes_read",
            "bytes_written",
            "sequential",
            "random",
            "io_time_ms",
        ]
        rows = [
            {
                **{name: getattr(f, name) for name in columns[2:-1]},
                "path": public_text(f.path),
                "origin": origins[f.path],
                "io_time_ms": round(f.io_time_s * 1000, 3),
            }
            for f in self.files.values()
        ]
        frame = pd.DataFrame(rows, columns=columns)
        return frame.sort_values(["calls", "path"], ascending=[False, True], ignore_index=True)

    def by_origin(self) -> pd.DataFrame:
        """Totals for the program's data, its environment's files and the system's."""
        frame = self.frame().drop(columns="path")
        totals = frame.groupby("origin").sum(numeric_only=True)
        return totals.reindex(["data", "environment", "system"], fill_value=0).reset_index()

    def size_histogram(self, origin: str = "data") -> pd.DataFrame:
        """How many reads and writes fell in each size class, for files of one origin."""
        reads: Counter[str] = Counter()
        writes: Counter[str] = Counter()
        origins = self.origins()
        for f in self.files.values():
            if origins[f.path] == origin:
                reads.update(f.read_sizes)
                writes.update(f.write_sizes)
        labels = [label for _, label in SIZE_BINS]
        return pd.DataFrame(
            {
                "request_size": labels,
                "reads": [reads[x] for x in labels],
                "writes": [writes[x] for x in labels],
            }
        )

    def run(self) -> Run:
        """The trace as the diagnosis's facts: one POSIX record per file and process, ranked
        in the order the processes first touched a file."""
        origins = self.origins()
        ranks = {pid: rank for rank, pid in enumerate(dict.fromkeys(p for _, p in self.records))}
        small = [label for bound, label in SIZE_BINS if bound <= SMALL_BYTES]
        rows = [
            {
                "layer": "POSIX",
                "path": public_text(path),
                "rank": ranks[pid],
                "origin": origins[path],
                "opens": r.opens,
                "stats": r.lookups,
                "reads": r.reads,
                "writes": r.writes,
                "syncs": r.syncs,
                "sync_opens": r.sync_opens,
                "direct_opens": r.direct_opens,
                "mmaps": r.mmaps,
                "collective": 0,
                "bytes_read": r.bytes_read,
                "bytes_written": r.bytes_written,
                "small_reads": sum(r.read_sizes[x] for x in small),
                "small_writes": sum(r.write_sizes[x] for x in small),
                # a request at an unknown offset (a descriptor older than the trace) is no
                # evidence of random access: only the steps seen going back count
                "seq_reads": r.reads - r.random_reads,
                "seq_writes": r.writes - r.random_writes,
                "unaligned": r.unaligned,
                "alignment": ALIGNMENT,
                "max_byte_read": r.max_byte_read,
                "max_byte_written": r.max_byte_written,
                "read_time_s": r.read_time_s,
                "slowest_read_s": r.slowest_read_s,
                "slowest_read_bytes": r.slowest_read_bytes,
                "slowest_write_s": r.slowest_write_s,
                "slowest_write_bytes": r.slowest_write_bytes,
                "write_time_s": r.write_time_s,
                "meta_time_s": r.meta_time_s,
                "sync_time_s": r.sync_time_s,
            }
            for (path, pid), r in self.records.items()
        ]
        records = complete(pd.DataFrame(rows))
        numbers = [c for c in records.columns if c not in ("layer", "path", "origin")]
        return Run(
            "strace",
            " ".join(public_text(part) for part in self.command),
            len(ranks),
            self.wall_time_s,
            records.astype({c: "float64" for c in numbers}),
            facts={
                "method": self.method,
                "exit_code": self.exit_code,
                "ran_here": self.ran_here,
                **self._tracer_facts(),
            },
        )

    def _tracer_facts(self) -> dict[str, float | int]:
        slowdown = self.tracer_slowdown
        if slowdown is None:
            return {}
        return {
            "tracer_slowdown": slowdown,
            "untraced_runs": len(self.untraced_wall_s),
            "untraced_wall_median_s": statistics.median(self.untraced_wall_s),
            "untraced_wall_min_s": min(self.untraced_wall_s),
            "untraced_wall_max_s": max(self.untraced_wall_s),
        }

    def to_json_dict(self) -> dict:
        findings = []
        if self.method == "strace":
            from iolab.diagnosis.report import findings_records
            from iolab.diagnosis.rules import diagnose

            findings = findings_records(diagnose(self.run()))
        return {
            "command": [public_text(part) for part in self.command],
            "method": self.method,
            "exit_code": self.exit_code,
            "note": self.note,
            "wall_time_s": self.wall_time_s,
            **self._tracer_facts(),
            "files": self.frame().to_dict(orient="records"),
            "by_origin": self.by_origin().to_dict(orient="records"),
            "data_request_sizes": self.size_histogram().to_dict(orient="records"),
            "findings": findings,
            "process_io": self.process_io,
        }
