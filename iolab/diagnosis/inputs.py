"""One entry for the three things a user can bring: a Darshan log, a saved strace trace, or a
command to run under strace. Each becomes a Diagnosis: the facts, the ranked findings, the
tables and the figures of the report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError
from iolab.diagnosis.facts import Run
from iolab.diagnosis.rules import Finding, diagnose


@dataclass
class Diagnosis:
    """A run, its findings, and the tables and figures (inline SVG, by title) that show them."""

    run: Run
    findings: list[Finding]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, str] = field(default_factory=dict)
    exit_code: int = 0  # the traced command's, for `-- CMD`
    output: str = ""  # the traced command's stdout and stderr


def _figures(
    run: Run, sizes: pd.DataFrame, osts: pd.DataFrame | None = None, dxt: pd.DataFrame | None = None
) -> dict[str, str]:
    """The HTML page's charts, drawn as SVG (svg_charts: the page never imports matplotlib)."""
    from iolab.diagnosis import svg_charts
    from iolab.diagnosis.figure_data import rank_seconds

    drawn = {
        "Request sizes (the application's files)": svg_charts.size_bars(sizes),
        "Time per rank": svg_charts.rank_time_bars(rank_seconds(run)),
        "Bytes and time per OST": svg_charts.ost_bars(osts if osts is not None else pd.DataFrame()),
        "DXT timeline": svg_charts.dxt_timeline(dxt if dxt is not None else pd.DataFrame()),
        "I/O and MPI waiting per rank (APMPI)": svg_charts.io_and_wait(run),
    }
    return {title: chart for title, chart in drawn.items() if chart is not None}


def from_darshan(path: Path | str, *, figures: bool = True) -> Diagnosis:
    """Diagnose a Darshan log."""
    from iolab.diagnosis.darshan import read_log

    log = read_log(path)
    run = log.run()
    osts = log.ost_frame()
    tables = {
        "I/O per layer": log.modules_frame(),
        "Files by bytes moved": log.files_frame(),
        "POSIX request sizes": log.size_histogram("POSIX"),
        "Bytes and time per OST": osts,
        "MPI time per node (APMPI)": log.mpi_nodes_frame(),
    }
    drawn = _figures(run, tables["POSIX request sizes"], osts, log.dxt_frame()) if figures else {}
    return Diagnosis(run, diagnose(run), tables, drawn)


def darshan_findings(path: Path | str) -> tuple[Run, list[Finding]]:
    """A Darshan log's facts and findings without the report's tables, which a ranking of an
    archive never shows and which take a sixth to a third of a small log's time."""
    from iolab.diagnosis.darshan import read_log

    run = read_log(path).run()
    return run, diagnose(run)


def from_trace(path: Path | str, cwd: Path | str = ".", *, figures: bool = True) -> Diagnosis:
    """Diagnose a saved `strace -f -y -T` trace (relative paths resolved against `cwd`); a
    file with no strace call in its first lines is refused, never reported as a clean run."""
    from iolab.diagnosis.trace import profile_saved_trace

    if input_kind(Path(path).expanduser()) != "trace":
        raise LabError(
            f"{path} is a Darshan log, not a trace; diagnose it as a log "
            "(python -m iolab diagnose LOG)"
        )
    return _from_profile(profile_saved_trace(path, cwd), figures)


def from_command(
    command: Sequence[str],
    *,
    figures: bool = True,
    untraced_runs: int = 0,
    traced_runs: int = 1,
) -> Diagnosis:
    """Run `command` under strace and diagnose what it did; untraced_runs > 0 runs it that
    many times without strace first, to measure the tracer's slowdown. traced_runs > 1 traces
    it that many times: the report is the run of median wall time, and a table gives each
    finding's cost over all of them, so a finding near a threshold is seen to be so rather
    than flipping between reports."""
    from iolab.diagnosis.trace import profile_command

    profiles = [
        profile_command(command, method="strace", untraced_runs=untraced_runs if i == 0 else 0)
        for i in range(traced_runs)
    ]
    ordered = sorted(profiles, key=lambda profile: profile.wall_time_s)
    shown = ordered[(len(ordered) - 1) // 2]
    if shown is not profiles[0]:  # the tracer's slowdown was measured beside the first run
        shown.untraced_wall_s = profiles[0].untraced_wall_s
    result = _from_profile(shown, figures)
    if traced_runs > 1:
        result.tables["Findings over the traced runs"] = findings_spread(
            [diagnose(profile.run()) for profile in profiles]
        )
    return result


def findings_spread(runs: Sequence[list[Finding]]) -> pd.DataFrame:
    """Per rule found in any run: in how many runs, its cost's smallest, median and largest
    seconds (0 where a run did not find it), and in how many it was more than minor."""
    rules = list(dict.fromkeys(f.rule for found in runs for f in found))
    rows = []
    for rule in rules:
        costs = [sum(f.cost_s for f in found if f.rule == rule) for found in runs]
        rows.append(
            {
                "rule": rule,
                "runs": len(runs),
                "found_in_runs": sum(any(f.rule == rule for f in found) for found in runs),
                "major_in_runs": sum(
                    any(f.rule == rule and not f.minor for f in found) for found in runs
                ),
                "cost_min_s": min(costs),
                "cost_median_s": float(pd.Series(costs).median()),
                "cost_max_s": max(costs),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "rule",
            "runs",
            "found_in_runs",
            "major_in_runs",
            "cost_min_s",
            "cost_median_s",
            "cost_max_s",
        ],
    )


def _from_profile(profile, figures: bool) -> Diagnosis:
    run = profile.run()
    tables = {
        "Totals by origin": profile.by_origin(),
        "Busiest files": profile.frame().head(20),
        "Request sizes (data files)": profile.size_histogram(),
    }
    drawn = _figures(run, tables["Request sizes (data files)"]) if figures else {}
    return Diagnosis(
        run, diagnose(run), tables, drawn, profile.exit_code, profile.stdout + profile.stderr
    )


#: What `diagnose` takes as a file, for the sentence that refuses anything else.
INPUT_WANTED = "a Darshan log (*.darshan) or a trace saved with `strace -f -y -T -o FILE CMD`"
#: The lines and bytes of a file looked at to tell an strace trace from other text (a
#: traced command's execve line alone can be long).
TRACE_SNIFF_LINES = 50
TRACE_SNIFF_BYTES = 1024**2


def is_strace_text(head: bytes) -> bool:
    """Whether the first lines hold a call as `strace` prints it (`openat(...) = 3`): a trace
    always starts with its execve, a log, a script or a zero-byte file holds none."""
    from iolab.measure.strace_parse import TraceReader

    text = head.decode("utf-8", "replace")
    lines = text.splitlines()[:TRACE_SNIFF_LINES]
    return any(True for _ in TraceReader().calls(lines))


def input_kind(path: Path) -> str:
    """'darshan' or 'trace', by the file's content whatever its name; one sentence for
    anything else (a folder, a FIFO, an empty or text file, a Darshan 2.x log)."""
    from iolab.diagnosis.darshan import log_version, read_head

    head = read_head(path, INPUT_WANTED, TRACE_SNIFF_BYTES)
    try:
        if log_version(head) is not None:
            return "darshan"
    except LabError as err:
        raise LabError(f"{path}: {err}") from None
    if is_strace_text(head):
        return "trace"
    what = "it is empty (0 bytes)" if not head else "it holds no Darshan header and no strace call"
    raise LabError(
        f"{path} is neither a Darshan log nor an strace trace: {what}; pass {INPUT_WANTED}"
    )


def from_path(path: Path | str, cwd: Path | str = ".", *, figures: bool = True) -> Diagnosis:
    """Diagnose a Darshan log or a saved trace, told apart by content (input_kind)."""
    path = Path(path).expanduser()
    if input_kind(path) == "darshan":
        return from_darshan(path, figures=figures)
    return from_trace(path, cwd, figures=figures)
