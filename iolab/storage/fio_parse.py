"""fio's JSON output as a tidy table (one row per job and direction, units in every column),
and its latency distribution (plotted by iolab.storage.fio_plots).

fio's JSON changes with its version and with how a job was written, and the quick scripts that
read it break on both. The classic extractor read `d["jobs"][0][jobname]` and
`d["global options"]["numjobs"]`: it works only while the job is named "read" or "write",
and while numjobs stands before the first --name. This parser relies on neither:

* options: fio reports options given before the first --name (or in a job file's [global]
  section) under the top-level "global options", the others under each job's "job options";
  a job's options are the two merged, its own winning. Flags such as --group_reporting or
  --stonewall are often not reported at all, so nothing here depends on them. When the
  output holds no options at all (fio 2.1), they are unknown (NA), not guessed.
* group_reporting: fio then reports the numjobs clones of a job as one entry; without it,
  as numjobs entries with the same name. Entries that share a group and a name are counted,
  and each stands for numjobs / count processes (`processes`): the number Little's law needs.
  (A group that mixes different jobs is one entry whose name and options may even come from
  different jobs, fio#2132; `processes` then counts the clones of the job named only.)
* units: fio 3.x reports latencies in ns (`clat_ns`, `lat_ns`) and io_bytes in bytes; fio 2.x in
  microseconds (`clat`, `lat`) with io_bytes in KiB despite its name (the 3.x output adds
  `io_kbytes`, the sign that io_bytes means bytes). `bw_bytes` (B/s) is missing from fio 2.x and
  early 3.x (3.1) outputs; `bw` (KiB/s) is then the source. Percentiles are found by value
  ("99.900000" is 99.9), so other percentile lists and fio 2.x's stray "0.00" key do no harm.

Little's law (requests in flight = throughput x time in the system) turns a queue into a
latency: processes x iodepth / IOPS is the mean latency a full queue forces, whatever the
device. A measured mean latency close to it is queueing, not device latency; one far below
it means the queue was not kept full (synchronous engines and buffered libaio keep one
request in flight per process whatever iodepth says). In a mixed read/write job the queue
is shared, so the value uses the job's total IOPS and compares with the IOPS-weighted mean
latency of its directions.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError

DIRECTIONS = ("read", "write", "trim")
#: fio's defaults for the options the table reports, used when a job does not set them.
FIO_DEFAULTS = {"rw": "read", "bs": "4k", "iodepth": "1", "numjobs": "1", "direct": "0"}
#: fio's long option names and the short ones the parser uses.
_CANONICAL = {"readwrite": "rw", "blocksize": "bs"}
#: The percentiles the table shows, with their column names.
PERCENTILES = {50.0: "clat_p50_us", 99.0: "clat_p99_us", 99.9: "clat_p99_9_us"}

COLUMNS = [
    "job_index",
    "job",
    "rw",
    "direction",
    "block_size_bytes",
    "iodepth",
    "numjobs",
    "processes",
    "direct",
    "bw_bytes_per_s",
    "iops",
    "lat_mean_us",
    "clat_mean_us",
    "clat_p50_us",
    "clat_p99_us",
    "clat_p99_9_us",
    "io_bytes",
    "runtime_s",
    "littles_law_lat_us",
]
SUMMARY_COLUMNS = [
    "job",
    "direction",
    "block_size_bytes",
    "iodepth",
    "processes",
    "bw_MiB_per_s",
    "iops",
    "lat_mean_us",
    "clat_p50_us",
    "clat_p99_us",
    "littles_law_lat_us",
]
CDF_COLUMNS = ["job_index", "job", "direction", "clat_us", "count", "cumulative_fraction"]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?)b?\s*$", re.IGNORECASE)


def parse_size_bytes(text: str, kb_base: int = 1024) -> int:
    """A fio size such as '4k', '1M', '16KiB' or '4096' in bytes.

    fio's default kb_base=1024 makes 'k' mean 1024 (unlike SI); with kb_base=1000 only the
    'KiB' forms are binary.
    """
    match = _SIZE.match(str(text))
    if match is None:
        raise LabError(f"cannot read the fio size {text!r}; write it like 4k, 1m or 4096")
    number, prefix, binary = match.groups()
    base = 1024 if binary or kb_base != 1000 else 1000
    return int(float(number) * base ** " kmgtp".find(prefix.lower() or " "))


def block_size_bytes(options: dict[str, str], direction: str) -> int | None:
    """The block size a job used in one direction, following fio's rules for bs=R,W,T.

    'bs=8k,32k' is 8k for reads and 32k for writes and trims; an empty entry ('bs=,8k') keeps
    the default for that direction; a trailing comma stops a value from carrying on. Jobs
    that draw sizes from a range or a split (bsrange, bssplit) have no single size: None.
    """
    if {"bsrange", "blocksize_range", "bssplit"} & options.keys():
        return None
    options = _canonical(options)
    kb_base = int(options.get("kb_base", 1024))
    entries = _option(options, "bs").split(",")
    index = DIRECTIONS.index(direction)
    if index >= len(entries):  # the last value carries on unless it ended with a comma
        index = len(entries) - 1
    value = entries[index].strip()
    return parse_size_bytes(value or FIO_DEFAULTS["bs"], kb_base)


def _canonical(options: dict[str, str]) -> dict[str, str]:
    """The options with fio's long names (readwrite, blocksize) as the short ones."""
    return {_CANONICAL.get(key, key): value for key, value in options.items()}


def _option(options: dict[str, str], name: str) -> str:
    """An option of canonical `options`, else fio's default."""
    return options.get(name, FIO_DEFAULTS[name])


def loads_fio(text: str) -> dict:
    """fio's JSON from its output text, skipping lines fio printed before the JSON.

    fio writes notes and warnings ('fio: ...', 'note: ...') to the same stream as the JSON
    when both go to stdout; the JSON starts at the first line that is a lone '{'. fio copies
    paths into its strings unescaped, so a folder whose name holds a newline or a tab gives
    control characters inside strings, which strict JSON refuses: they are accepted here.
    """
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == "{"), None)
    if start is None:
        raise LabError("the fio output holds no JSON; run fio with --output-format=json")
    try:
        result = json.loads("".join(lines[start:]), strict=False)
    except json.JSONDecodeError as err:
        raise LabError(f"the fio JSON is cut short or damaged ({err}); run fio again") from None
    if not isinstance(result.get("jobs"), list):
        raise LabError("the JSON has no 'jobs' list, so it is not fio's; pass a fio JSON output")
    return result


def load_fio(path: Path | str) -> dict:
    """A fio JSON (or json+) output file, parsed."""
    try:
        return loads_fio(Path(path).read_text(encoding="utf-8", errors="replace"))
    except OSError as err:
        raise LabError(
            f"cannot read the fio output {path} ({err.strerror}); check the path"
        ) from None


def _options(result: dict, job: dict) -> dict[str, str] | None:
    """The job's options, its own over the global ones; None when fio reported none."""
    if "job options" not in job and "global options" not in result:
        return None
    return {
        **_canonical(result.get("global options", {})),
        **_canonical(job.get("job options", {})),
    }


def _latency(section: dict, name: str) -> tuple[dict, float]:
    """The latency record `name` ('clat' or 'lat') and the factor from its unit to us."""
    if f"{name}_ns" in section:
        return section[f"{name}_ns"], 1e-3
    return section.get(name, {}), 1.0


def _percentile_us(clat: dict, to_us: float, wanted: float) -> float:
    """The clat percentile `wanted` in us, NaN if fio did not report it."""
    for key, value in clat.get("percentile", {}).items():
        if math.isclose(float(key), wanted, abs_tol=1e-6):
            return value * to_us
    return math.nan


def _io_bytes(section: dict) -> int:
    """Bytes moved: fio 2.x's io_bytes is KiB (it has no io_kbytes beside it)."""
    return section["io_bytes"] if "io_kbytes" in section else section["io_bytes"] * 1024


def _direct(options: dict[str, str]) -> bool:
    """Whether the job bypassed the page cache: direct=1, or its synonym buffered=0."""
    return _option(options, "direct") in ("1", "true") or options.get("buffered") == "0"


def _processes(result: dict, options: list[dict[str, str] | None]) -> list[int | None]:
    """How many processes each entry of jobs[] stands for (see the module docstring)."""
    keys = [(job.get("groupid"), job["jobname"]) for job in result["jobs"]]
    counts = {key: keys.count(key) for key in keys}
    numjobs = [int(_option(o, "numjobs")) if o else None for o in options]
    return [n and max(1, n // counts[key]) for n, key in zip(numjobs, keys, strict=True)]


def fio_frame(result: dict) -> pd.DataFrame:
    """One row per job entry and direction that moved data (columns: COLUMNS).

    `job_index` is the entry's position in fio's jobs[], which tells apart the clones fio
    reports under one name without group_reporting. `numjobs` is the option as given;
    `processes` the number of processes the row stands for. Options fio did not report are NA.
    """
    options = [_options(result, job) for job in result["jobs"]]
    processes = _processes(result, options)
    rows = []
    for index, (job, opts, procs) in enumerate(
        zip(result["jobs"], options, processes, strict=True)
    ):
        active = [d for d in DIRECTIONS if d in job and _io_bytes(job[d]) > 0]
        total_iops = sum(job[d]["iops"] for d in active)
        depth = int(_option(opts, "iodepth")) if opts else None
        for direction in active:
            section = job[direction]
            clat, clat_to_us = _latency(section, "clat")
            lat, lat_to_us = _latency(section, "lat")
            rows.append(
                {
                    "job_index": index,
                    "job": job["jobname"],
                    "rw": _option(opts, "rw") if opts else None,
                    "direction": direction,
                    "block_size_bytes": block_size_bytes(opts, direction) if opts else None,
                    "iodepth": depth,
                    "numjobs": int(_option(opts, "numjobs")) if opts else None,
                    "processes": procs,
                    "direct": _direct(opts) if opts else None,
                    "bw_bytes_per_s": float(section.get("bw_bytes", section["bw"] * 1024)),
                    "iops": float(section["iops"]),
                    "lat_mean_us": lat.get("mean", math.nan) * lat_to_us,
                    "clat_mean_us": clat.get("mean", math.nan) * clat_to_us,
                    **{
                        column: _percentile_us(clat, clat_to_us, percentile)
                        for percentile, column in PERCENTILES.items()
                    },
                    "io_bytes": _io_bytes(section),
                    "runtime_s": section["runtime"] / 1000,
                    "littles_law_lat_us": procs * depth / total_iops * 1e6
                    if procs and depth and total_iops
                    else math.nan,
                }
            )
    frame = pd.DataFrame(rows, columns=COLUMNS)
    for column in ("block_size_bytes", "iodepth", "numjobs", "processes", "io_bytes"):
        frame[column] = frame[column].astype("Int64")
    frame["direct"] = frame["direct"].astype("boolean")
    return frame


def latency_cdf(json_plus: dict) -> pd.DataFrame:
    """The completion-latency distribution of every job and direction, for a CDF plot.

    fio's json+ output adds `clat_ns.bins` (bin value in ns -> number of requests); the
    percentiles alone cannot show a second mode or a long tail. One row per bin (columns:
    CDF_COLUMNS), sorted by latency, with the running fraction of requests done by then.
    Outputs without bins (plain json) give an empty frame.
    """
    frames = []
    for index, job in enumerate(json_plus["jobs"]):
        for direction in DIRECTIONS:
            clat, to_us = _latency(job.get(direction, {}), "clat")
            bins = sorted((float(value), count) for value, count in clat.get("bins", {}).items())
            if not bins:
                continue
            frame = pd.DataFrame(bins, columns=["clat_us", "count"])
            frame["clat_us"] *= to_us
            frame["cumulative_fraction"] = frame["count"].cumsum() / frame["count"].sum()
            frame.insert(0, "direction", direction)
            frame.insert(0, "job", job["jobname"])
            frame.insert(0, "job_index", index)
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=CDF_COLUMNS)
    return pd.concat(frames, ignore_index=True)[CDF_COLUMNS]


def summary_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns to compare at a glance (SUMMARY_COLUMNS), bandwidth in MiB/s (2^20 B/s)."""
    return frame.assign(bw_MiB_per_s=frame["bw_bytes_per_s"] / 2**20)[SUMMARY_COLUMNS]
