"""A centre's archive of Darshan logs, ranked: `iolab diagnose DIR`.

Every `*.darshan` file below DIR (links are not followed) is diagnosed in a pool of worker
processes, one row per log: its verdict, its ranks and run time, and its top finding with
the seconds it costs. The jobs are ranked by those seconds: the top finding's, not the sum
of all, since two findings can charge the same seconds. A log that cannot be read costs one
row, with the sentence why, never the run. All the findings of all the logs can be saved as
one CSV, one row per finding.

Each log is read as `iolab diagnose LOG` reads it (iolab.diagnosis.inputs), so the archive
and the single report never disagree; no figures are drawn.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError

#: The columns of the ranking, one row per log.
ROW_COLUMNS = [
    "log",
    "verdict",
    "processes",
    "run_time_s",
    "top_rule",
    "top_cost_s",
    "findings",
    "problem",
]
#: The columns of the findings CSV, one row per finding of every log.
FINDING_COLUMNS = [
    "log",
    "rule",
    "title",
    "cost_s",
    "counted_elsewhere_s",
    "counted_under",
    "minor",
    "files",
    "ranks",
    "osts",
    "evidence",
]
#: One log's row of the ranking and the rows of its findings.
Result = tuple[dict, list[dict]]
#: A log whose data cannot be read gets this verdict (and no other column but its problem).
UNREADABLE = "unreadable"


def archive_logs(folder: Path) -> list[Path]:
    """The Darshan logs below `folder`, by path: regular files named *.darshan, links left out
    (a link could lead anywhere); a folder without any is one sentence."""
    if not folder.is_dir():
        raise LabError(f"{folder} is not a folder of Darshan logs")
    logs = sorted(
        path for path in folder.rglob("*.darshan") if path.is_file() and not path.is_symlink()
    )
    if not logs:
        raise LabError(
            f"{folder} is a folder with no *.darshan file below it; give a Darshan log, or the "
            "folder that holds the logs"
        )
    return logs


def diagnose_one(log: str, changed: dict[str, float]) -> Result:
    """The ranking's row of one log and the rows of its findings (in a worker process, with
    the thresholds `changed` as the parent's --config set them)."""
    from iolab.diagnosis import thresholds
    from iolab.diagnosis.inputs import darshan_findings
    from iolab.diagnosis.report import verdict

    thresholds.apply(changed)

    try:
        run, diagnosed = darshan_findings(Path(log))
    except LabError as err:  # unreadable, truncated, damaged: one sentence, one row
        return {"log": log, "verdict": UNREADABLE, "findings": 0, "problem": str(err)}, []
    findings = sorted(diagnosed, key=lambda finding: finding.cost_s, reverse=True)
    top = findings[0] if findings else None
    row = {
        "log": log,
        "verdict": verdict(run, diagnosed),
        "processes": run.processes,
        "run_time_s": round(run.run_time_s, 3),
        "top_rule": top.rule if top else "",
        "top_cost_s": round(top.cost_s, 3) if top else 0.0,
        "findings": len(findings),
        "problem": "",
    }
    found = [
        {
            "log": log,
            "rule": finding.rule,
            "title": finding.title,
            "cost_s": round(finding.cost_s, 6),
            # seconds this finding also reckoned that others charge (rules.overlaps): a sum
            # of cost_s counts them once
            "counted_elsewhere_s": round(finding.counted_elsewhere_s, 6),
            "counted_under": "; ".join(finding.counted_under),
            "minor": finding.minor,
            "files": "; ".join(finding.files),
            "ranks": " ".join(map(str, finding.ranks)),
            "osts": " ".join(map(str, finding.osts)),
            "evidence": finding.evidence,
        }
        for finding in findings
    ]
    return row, found


def local_results(logs: list[Path], workers: int, changed: dict[str, float]) -> Iterator[Result]:
    """Each log's rows as a pool of `workers` processes on this machine finishes them."""
    context = multiprocessing.get_context("spawn")  # no copy of this process's threads
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        try:
            pending = [pool.submit(diagnose_one, str(log), changed) for log in logs]
            for future in concurrent.futures.as_completed(pending):
                yield future.result()
        except BaseException:  # Ctrl-C, SIGTERM, a worker that died: no log is started after
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def ranked(
    results: Iterable[Result], total: int, progress: Callable[[int, int], None] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ranking (the costliest top finding first, unreadable logs last) and every finding,
    from each log's rows wherever they were made; `progress(done, total)` after each log."""
    rows: list[dict] = []
    found: list[dict] = []
    for done, (row, findings) in enumerate(results, 1):
        rows.append(row)
        found += findings
        if progress is not None:
            progress(done, total)
    ranking = pd.DataFrame(rows, columns=ROW_COLUMNS).astype(
        {"processes": "Int64", "findings": "Int64"}  # whole numbers, empty for an unreadable log
    )
    ranking["unreadable"] = ranking["verdict"] == UNREADABLE
    ranking = ranking.sort_values(
        ["unreadable", "top_cost_s", "log"], ascending=[True, False, True], kind="stable"
    ).drop(columns="unreadable")
    return ranking.reset_index(drop=True), pd.DataFrame(found, columns=FINDING_COLUMNS)


def rank_archive(
    logs: list[Path],
    workers: int,
    progress: Callable[[int, int], None] | None = None,
    changed: dict[str, float] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Diagnose `logs` in `workers` processes on this machine, with the thresholds `changed`
    (--config): the ranking and every finding (ranked)."""
    return ranked(local_results(logs, workers, changed or {}), len(logs), progress)


def ranking_records(ranking: pd.DataFrame) -> list[dict]:
    """The ranking as JSON-ready rows: numbers as JSON numbers, a missing one as null."""
    from iolab.diagnosis.report import json_ready

    return [
        json_ready({key: None if pd.isna(value) else value for key, value in row.items()})
        for row in ranking.to_dict(orient="records")
    ]


def default_workers(logs: int, most: int) -> int:
    """Worker processes: one per core, at most `most` (the login-node budget's) and logs."""
    return max(1, min(os.cpu_count() or 1, most, logs))
