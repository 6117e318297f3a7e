"""The lab's diagnosis against Drishti on the same real logs: findings, misses, false alarms,
time and peak memory, each tool run in a fresh process, REPEATS times, taking turns.

Drishti (`drishti-io` on PyPI, the HPC I/O group at LBNL) is never a dependency of the lab:
it runs from its own environment (`make bench-diagnosis` builds `.venv-drishti`). Its
`--csv` report flags insight codes; CODES maps those that name a problem to the lab's rule
ids (informational codes, such as "mostly sequential writes", map to nothing). Both tools are
scored by the one judge (judge.py); Drishti's CSV names no files, so it is judged by rule
only, and a ground-truth item that is about one file counts for Drishti whenever the rule
fired at all.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from iolab.core.errors import LabError
from iolab.diagnosis.judge import judge
from iolab.diagnosis.rules import Finding

#: Runs per tool and log: the median wall time is reported (on the smallest logs both tools
#: take about half a second, nearly all of it starting Python and importing pandas, so one
#: run cannot tell them apart).
REPEATS = 5
#: Copies of each corpus log in the archive benchmark (archive_rates): a few hundred logs.
ARCHIVE_COPIES = 10
#: Drishti's insight codes (drishti/includes/config.py) that name a problem, as lab rules.
CODES = {
    "S01": "stdio",
    "P05": "small-reads",
    "P15": "small-reads",
    "P06": "small-writes",
    "P16": "small-writes",
    "P08": "misaligned",
    "P09": "reread",
    "P11": "random-reads",
    "P13": "random-writes",
    "P17": "metadata",
    "P18": "rank-imbalance-bytes",
    "P21": "rank-imbalance-bytes",
    "P22": "rank-imbalance-bytes",
    "P19": "rank-imbalance-time",
    "M02": "no-collective-mpiio",
    "M03": "no-collective-mpiio",
}


@dataclass
class Measured:
    """One tool's run on one log."""

    found: list[Finding] | set[str]  # the lab's findings (major and minor); Drishti's rule ids
    seconds: float
    peak_mib: float
    error: str = ""


def run_measured(cmd: list[str], cwd: Path | None = None) -> tuple[str, float, float, int]:
    """(stdout, wall seconds, peak resident MiB, exit code) of one fresh process."""
    start = time.perf_counter()
    child = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd, text=True
    )
    out = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return out, time.perf_counter() - start, usage.ru_maxrss / 1024, child.returncode


def run_lab(log: Path) -> Measured:
    out, seconds, peak, code = run_measured(
        [sys.executable, "-m", "iolab", "diagnose", str(log), "--json", "--top", "1"]
    )
    if code:
        return Measured([], seconds, peak, f"exit {code}")
    return Measured([Finding(**f) for f in json.loads(out)["findings"]], seconds, peak)


def run_lab_report(log: Path, html: bool) -> Measured:
    """The report a person reads, timed: the text on stdout, or the HTML page with its
    figures (issue 36 asks the page to cost at most twice the text)."""
    with tempfile.TemporaryDirectory(prefix="iolab-report-") as folder:
        page = ["--html", str(Path(folder) / "report.html")] if html else []
        _, seconds, peak, code = run_measured(
            [sys.executable, "-m", "iolab", "diagnose", str(log), *page]
        )
    return Measured(set(), seconds, peak, f"exit {code}" if code else "")


def run_drishti(drishti: Path, log: Path) -> Measured:
    with tempfile.TemporaryDirectory(prefix="iolab-drishti-") as folder:
        _, seconds, peak, code = run_measured(
            [os.path.abspath(drishti), "--csv", "--export_dir", folder, str(log)], cwd=Path(folder)
        )
        tables = list(Path(folder).glob("*.csv"))
        if code or not tables:
            return Measured(set(), seconds, peak, f"exit {code}, no CSV")
        with open(tables[0], newline="") as handle:
            row = next(csv.DictReader(handle))
    return Measured(
        {CODES[c] for c, flag in row.items() if flag == "True" and c in CODES}, seconds, peak
    )


def score(truth: dict, measured: Measured) -> dict:
    """Hits, misses and false alarms of one tool against one log's ground truth."""
    judged = judge(truth, measured.found)
    return {
        "hits": len(judged.hits),
        "misses": [i["rule"] for i in judged.misses],
        "false_alarms": sorted({i["rule"] for i in judged.false_alarms}),
        "seconds": round(measured.seconds, 3),
        "peak_MiB": round(measured.peak_mib, 1),
        "error": measured.error,
    }


def _median_of(runs: list[Measured]) -> Measured:
    """The first run's findings (both tools are deterministic), the median wall time and
    the largest peak."""
    first = runs[0]
    return Measured(
        first.found,
        float(np.median([r.seconds for r in runs])),
        max(r.peak_mib for r in runs),
        first.error,
    )


def compare(
    logs: Path,
    drishti: Path | None,
    repeats: int = REPEATS,
    progress: Callable[[int, int, dict], None] | None = None,
) -> list[dict]:
    """One row per log: each tool's score, median time and largest memory peak over
    `repeats` runs, the tools taking turns to go first (Drishti's only if given).
    `progress(done, total, row)` hears of each log as it is finished."""
    truth = json.loads((logs / "ground_truth.json").read_text())
    tools = {"lab": run_lab}
    if drishti:
        tools["drishti"] = lambda log: run_drishti(drishti, log)
    rows = []
    for name, expected in truth.items():
        row = {
            "log": name.split("/")[-1][:40],
            "must": len(expected["must"]),
            "must_not": len(expected["must_not"]),
            "repeats": repeats,
        }
        runs: dict[str, list[Measured]] = {tool: [] for tool in tools}
        pages: dict[bool, list[Measured]] = {False: [], True: []}
        for turn in range(repeats):
            order = list(tools) if turn % 2 == 0 else list(tools)[::-1]
            for tool in order:
                runs[tool].append(tools[tool](logs / name))
            for html in (turn % 2 == 0, turn % 2 == 1):
                pages[html].append(run_lab_report(logs / name, html))
        for tool in tools:
            row.update(
                {
                    f"{tool}_{key}": value
                    for key, value in score(expected, _median_of(runs[tool])).items()
                }
            )
        row.update(page_times(pages[False], pages[True]))
        rows.append(row)
        if progress is not None:
            progress(len(rows), len(truth), row)
    return rows


def page_times(text: list[Measured], html: list[Measured]) -> dict:
    """The text report's and the HTML page's median seconds, and the page's cost in texts."""
    text_s, html_s = (_median_of(runs).seconds for runs in (text, html))
    return {
        "text_seconds": round(text_s, 3),
        "html_seconds": round(html_s, 3),
        "html_peak_MiB": round(_median_of(html).peak_mib, 1),
        "html_over_text": round(html_s / text_s, 2),
        "page_error": "; ".join(sorted({r.error for r in text + html if r.error})),
    }


def synthetic_run(records: int, ranks: int = 100, seed: int = 1):
    """A job of `records` POSIX records (files x ranks) with random counts: for timing the
    rules alone at sizes the corpus does not reach."""
    from iolab.diagnosis.facts import Run, complete

    rng = np.random.default_rng(seed)
    reads = rng.integers(0, 5000, records).astype(float)
    frame = pd.DataFrame(
        {
            "layer": "POSIX",
            "path": [f"/lus/f{i // ranks}" for i in range(records)],
            "rank": np.arange(records) % ranks,
            "origin": "data",
            "opens": rng.integers(1, 5, records).astype(float),
            "reads": reads,
            "writes": rng.integers(0, 5000, records).astype(float),
            "bytes_read": reads * rng.integers(1, 4 << 20, records),
            "small_reads": reads * rng.random(records),
            "seq_reads": reads * rng.random(records),
            "read_time_s": rng.random(records) * 10,
            "write_time_s": rng.random(records) * 10,
            "meta_time_s": rng.random(records),
            "max_byte_read": rng.integers(1, 1 << 30, records),
        }
    )
    for column in (
        "stats",
        "syncs",
        "collective",
        "bytes_written",
        "small_writes",
        "seq_writes",
        "unaligned",
        "max_byte_written",
    ):
        frame[column] = 0.0
    frame["alignment"] = 1048576.0
    osts = pd.DataFrame({"path": frame.path.unique()}).assign(
        ost=lambda f: np.arange(len(f)) % 64, stripe_size=1 << 20, stripe_count=1
    )
    return Run("darshan", f"synthetic-{records}", ranks, 3600.0, complete(frame), osts)


def scaling(sizes: tuple[int, ...] = (1_000, 10_000, 100_000), repeats: int = 3) -> list[dict]:
    """Seconds the rules take on synthetic jobs of growing size (median of `repeats`)."""
    from iolab.diagnosis.rules import diagnose

    rows = []
    for records in sizes:
        run = synthetic_run(records)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            diagnose(run)
            times.append(time.perf_counter() - start)
        median = float(np.median(times))
        rows.append(
            {
                "records": records,
                "rules_s": round(median, 4),
                "us_per_record": round(1e6 * median / records, 2),
            }
        )
    return rows


def archive_rates(
    logs_dir: Path,
    copies: int = ARCHIVE_COPIES,
    workers: tuple[int, ...] = (1, 2),
    repeats: int = 3,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """`iolab diagnose DIR` on `copies` of every log below `logs_dir` (hard links), with 1
    and 2 worker processes: median wall seconds, seconds per log, and the largest process's
    peak memory, which bounds a worker (it holds one log at a time)."""
    originals = sorted(
        path for path in logs_dir.rglob("*.darshan") if path.is_file() and not path.is_symlink()
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="iolab-archive-bench-") as folder:
        for copy in range(copies):
            for index, log in enumerate(originals):
                target = Path(folder) / f"{copy:03d}-{index:02d}-{log.name}"
                try:
                    os.link(log, target)
                except OSError:  # another file system, or links not allowed there
                    shutil.copyfile(log, target)
        total = copies * len(originals)
        for count in workers:
            command = [sys.executable, "-m", "iolab", "diagnose", folder, "--json"]
            runs = []
            for repeat in range(repeats):
                if progress:
                    progress(
                        f"archive of {total} logs, --workers {count}, run {repeat + 1} of {repeats}"
                    )
                _, seconds, peak, code = run_measured([*command, "--workers", str(count)])
                if code:
                    raise LabError(f"`iolab diagnose DIR` on the archive's copies ended {code}")
                runs.append((seconds, peak))
            wall = float(np.median([seconds for seconds, _ in runs]))
            rows.append(
                {
                    "logs": total,
                    "workers": count,
                    "wall_s": round(wall, 2),
                    "logs_per_s": round(total / wall, 2),
                    "worker_s_per_log": round(wall * count / total, 4),
                    "peak_MiB": round(max(peak for _, peak in runs), 1),
                }
            )
    return rows
