"""The diagnosis as a user sends it to their support team: text, JSON, or one HTML page.

The HTML page is self-contained (charts as inline SVG, no script, no style sheet or font from
another host), so it can be mailed, attached to a ticket or opened offline.
"""

from __future__ import annotations

import html
import math
from dataclasses import fields
from typing import overload

import numpy as np
import pandas as pd

from iolab.diagnosis.facts import Run
from iolab.diagnosis.rules import MAJOR_SHARE, MINOR_S, MINOR_SHARE, Finding
from iolab.diagnosis.thresholds import changed as changed_thresholds

#: The version of report_dict's layout (the JSON of `diagnose --json`, described in lesson 12):
#: raised when a field changes meaning or type, not when one is added.
SCHEMA_VERSION = 1
#: A finding's fields in the JSON: all but its per-record claims.
REPORTED = tuple(f.name for f in fields(Finding) if f.name != "claims")
#: The verdict every report carries, one of these stable values (the JSON's "verdict").
VERDICTS = {
    "io-costs-time": "at least one finding costs enough to be worth changing",
    "nothing-worth-changing": "no finding costs enough alone to be worth changing (the text "
    "report says whether the minor ones add up to a tenth of the run)",
    "incomplete-log": "no finding costs enough in what the log holds, but Darshan dropped "
    "records of a module (it marked it partial), so the run is not cleared",
    "no-io": "the Darshan log holds no record of any I/O (no module recorded anything): there "
    "is nothing to judge, so the run is neither cleared nor blamed",
}


def no_io(run: Run | None) -> bool:
    """Whether `run` is a Darshan log without a single I/O record (a job that did no I/O
    Darshan saw): no rule has anything to read, so no verdict on its I/O can be given. A
    module marked partial had records, which were dropped: that log is incomplete instead."""
    return run is not None and run.source == "darshan" and run.records.empty and not run.incomplete


def verdict(run: Run | None, findings: list[Finding]) -> str:
    """The report's verdict (a key of VERDICTS): a log missing records is never cleared, and
    one without any is not judged."""
    if any(not f.minor for f in findings):
        return "io-costs-time"
    if no_io(run):
        return "no-io"
    return "incomplete-log" if run is not None and run.incomplete else "nothing-worth-changing"


#: The report's line for a log without any I/O record (verdict no-io).
NO_IO_LINE = (
    "- no I/O to judge: Darshan recorded no I/O in this job (no module holds a record), so "
    "nothing here says whether its I/O was slow; if the job did read or write files, Darshan "
    "did not see them (check that it was loaded in the processes that did)"
)


@overload
def json_ready(value: dict) -> dict: ...
@overload
def json_ready(value: object) -> object: ...
def json_ready(value: object) -> object:
    """`value` in JSON's own types: numpy's numbers and booleans as plain ones (json.dumps
    would otherwise need default=str and print `"False"`), NaN and infinities as null (JSON
    has none), tuples as lists, anything else as its text."""
    if isinstance(value, dict):
        return {str(key): json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None if value is pd.NA or value is pd.NaT else str(value)


def _unknown_as_na(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its nullable-integer columns' missing counts written "n/a": to_html's
    na_rep reaches floats' NaN but not pandas' NA (a counter Darshan did not keep)."""
    shown = frame.copy()
    for column in shown:
        if isinstance(shown[column].dtype, pd.Int64Dtype):
            shown[column] = shown[column].astype(object).where(shown[column].notna(), "n/a")
    return shown


def findings_records(findings: list[Finding]) -> list[dict]:
    """The findings as JSON-ready dicts, in their ranked order (without the per-record
    claims, which only the overlap ledger reads)."""
    return [
        json_ready(
            {
                **{k: getattr(f, k) for k in REPORTED},
                "cost_s": round(f.cost_s, 6),
                "counted_elsewhere_s": round(f.counted_elsewhere_s, 6),
            }
        )
        for f in findings
    ]


def findings_frame(findings: list[Finding]) -> pd.DataFrame:
    """One row per finding: rule, cost, minor, evidence, advice."""
    return pd.DataFrame(
        [
            {
                "rule": f.rule,
                "cost_s": round(f.cost_s, 3),
                "minor": f.minor,
                "evidence": f.evidence,
                "advice": f.advice,
            }
            for f in findings
        ],
        columns=["rule", "cost_s", "minor", "evidence", "advice"],
    )


def job_line(run: Run) -> str:
    """One line on what was measured: source, name, processes, run time, layers."""
    if run.modules:
        layers = ", ".join(run.modules)
    else:  # a trace's records are POSIX calls; a Darshan log without a module recorded none
        layers = "none recorded" if run.source == "darshan" else "POSIX calls"
    return (
        f"{run.source}: {run.name}: {run.processes:,} process(es), "
        f"{run.run_time_s:,.1f} s run time, layers: {layers}"
    )


#: strace's slowdown from which the report says the tracer, not the I/O, fills the run time.
TRACER_DOMINATES = 2.0


def tracer_line(run: Run) -> str | None:
    """What strace did to a traced command's times: measured (`diagnose --untraced-runs N`),
    or a sentence that it was not; None for a Darshan log or a saved trace."""
    if run.source != "strace" or not run.facts.get("ran_here"):
        return None
    slowdown = run.facts.get("tracer_slowdown")
    if slowdown is None:
        return (
            "strace's own slowdown was not measured (add --untraced-runs 3 to run the command "
            "3 times without it first): the seconds below include it; counts and bytes are exact"
        )
    runs = int(run.facts["untraced_runs"])
    line = (
        f"strace slowed the command {slowdown:.1f}x: {run.run_time_s:.3g} s traced against "
        f"{run.facts['untraced_wall_median_s']:.3g} s without it ("
        + (
            f"median of {runs} runs, {run.facts['untraced_wall_min_s']:.3g} to "
            f"{run.facts['untraced_wall_max_s']:.3g} s)"
            if runs > 1
            else "one run)"
        )
    )
    if slowdown >= TRACER_DOMINATES:
        line += (
            "; the tracer dominates, so the seconds below are mostly strace's own and rank the "
            "findings only roughly; the counts and bytes are exact"
        )
    return line


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


def _where(finding: Finding) -> str:
    parts = []
    if finding.files:
        parts.append("files: " + ", ".join(finding.files))
    if finding.ranks:
        parts.append("ranks: " + ", ".join(map(str, finding.ranks)))
    if finding.osts:
        parts.append("OSTs: " + ", ".join(map(str, finding.osts)))
    return "; ".join(parts)


def _share(finding: Finding, run: Run | None) -> str:
    if run is None or not run.run_time_s:
        return f"{finding.cost_s:,.2f} s"
    return f"{finding.cost_s:,.2f} s, {finding.cost_s / run.run_time_s:.0%} of the run"


def no_major_line(minor: list[Finding], run: Run | None) -> str:
    """The headline when no finding is worth changing alone: the I/O is cleared only if the
    minor findings together stay under MAJOR_SHARE of the run too."""
    together = sum(f.cost_s for f in minor)
    if run is not None and run.run_time_s > 0 and together >= MAJOR_SHARE * run.run_time_s:
        return (
            f"- no single finding costs {MAJOR_SHARE:.0%} of the run or {MINOR_S:g} s, but the "
            f"minor ones below add up to {together / run.run_time_s:.0%} of it (their calls "
            "may overlap): together they are worth a look"
        )
    return (
        "- nothing costs enough to be worth changing: the file I/O is not what makes this run slow"
    )


def format_findings(findings: list[Finding], run: Run | None = None) -> str:
    """The ranked diagnosis as a user reads it: cost, evidence, where, proof, what to do."""
    lines = ["Diagnosis, costliest first (seconds in the calls concerned, on the busiest rank)"]
    major = [f for f in findings if not f.minor]
    minor = [f for f in findings if f.minor]
    for number, f in enumerate(major, 1):
        lines.append(f"{number}. {f.title} [{f.rule}] ({_share(f, run)}): {f.evidence}.")
        if _where(f):
            lines.append(f"   where: {_where(f)}")
        lines.append("   proof: " + ", ".join(f"{k} = {_number(v)}" for k, v in f.counters.items()))
        if f.cost_formula:
            lines.append(f"   cost: {f.cost_formula}")
        lines.append(f"   what to do: {f.advice}.")
    if run is not None and run.incomplete:
        lines.insert(
            1,
            "Incomplete log: Darshan ran out of memory for "
            f"{', '.join(run.incomplete)} and kept only part of the records; what it "
            "dropped is not judged, and the costs below are lower bounds",
        )
    if no_io(run):
        lines.append(NO_IO_LINE)
    elif not major and run is not None and run.incomplete:
        lines.append(
            "- no finding costs enough in the records the log holds, but it is "
            "incomplete: it cannot clear this run's file I/O"
        )
    elif not major:
        lines.append(no_major_line(minor, run))
    if minor:
        lines.append(
            f"Minor (under {MINOR_SHARE:.0%} of the run time or {MINOR_S:g} s, and under "
            f"{MAJOR_SHARE:.0%} of the run):"
        )
        lines += [f"- {f.title} [{f.rule}] ({_share(f, run)}): {f.evidence}" for f in minor]
    return "\n".join(lines)


def report_dict(run: Run, findings: list[Finding], tables: dict[str, pd.DataFrame]) -> dict:
    """The whole report as one JSON-ready object, in the layout lesson 12 documents."""
    return json_ready(
        {
            "schema_version": SCHEMA_VERSION,
            "source": run.source,
            "name": run.name,
            "processes": run.processes,
            "run_time_s": run.run_time_s,
            "modules": list(run.modules),
            "verdict": verdict(run, findings),
            "incomplete_modules": list(run.incomplete),
            "thresholds": changed_thresholds(),
            "job": {
                k: v for k, v in run.facts.items() if isinstance(v, (str, int, float, np.number))
            },
            "findings": findings_records(findings),
            **{name: frame.to_dict(orient="records") for name, frame in tables.items()},
        }
    )


#: Job facts the page's table already shows under its own names.
_SHOWN = {"processes", "run_time_s", "modules"}


def html_report(
    run: Run, findings: list[Finding], tables: dict[str, pd.DataFrame], figures: dict[str, str]
) -> str:
    """One self-contained page: job facts, ranked findings with evidence, tables, charts
    (`figures`: inline SVG by caption, from svg_charts, which escapes its own text)."""

    def esc(text: object) -> str:
        return html.escape(str(text))

    items = []
    for f in findings:
        proof = "".join(
            f"<li><code>{esc(k)}</code> = {_number(v)}</li>" for k, v in f.counters.items()
        )
        items.append(
            f"<li class='{'minor' if f.minor else 'major'}'><h3>{esc(f.title)} "
            f"<small>[{esc(f.rule)}]</small> — {esc(_share(f, run))}"
            f"{' (minor)' if f.minor else ''}</h3><p>{esc(f.evidence)}.</p>"
            + (f"<p><b>Where:</b> {esc(_where(f))}</p>" if _where(f) else "")
            + f"<p><b>Proof:</b></p><ul>{proof}</ul>"
            + (f"<p><b>Cost:</b> {esc(f.cost_formula)}.</p>" if f.cost_formula else "")
            + f"<p><b>What to do:</b> {esc(f.advice)}.</p></li>"
        )
    if no_io(run):
        body = f"<li>{esc(NO_IO_LINE[2].upper() + NO_IO_LINE[3:])}.</li>"
    else:
        body = "".join(items) or (
            "<li>No rule fired in the records the log holds, but it is incomplete: it cannot "
            "clear this run's file I/O.</li>"
            if run.incomplete
            else "<li>No rule fired: the file I/O is not what makes this run slow.</li>"
        )
    note = (
        f"<p><b>Incomplete log:</b> Darshan ran out of memory for "
        f"{esc(', '.join(run.incomplete))} and kept only part of the records; what it "
        "dropped is not judged, and the costs are lower bounds.</p>"
        if run.incomplete
        else ""
    )
    tracer = f"<p>{esc(tracer_line(run))}</p>" if tracer_line(run) else ""
    plots = "".join(
        f"<figure>{chart}<figcaption>{esc(title)}</figcaption></figure>"
        for title, chart in figures.items()
    )
    frames = "".join(
        f"<h2>{esc(title)}</h2>{_unknown_as_na(frame).to_html(index=False, border=0, na_rep='n/a')}"
        for title, frame in tables.items()
        if len(frame)
    )
    facts = "".join(
        f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>"
        for k, v in (
            ("source", run.source),
            ("name", run.name),
            ("processes", f"{run.processes:,}"),
            ("run time", f"{run.run_time_s:,.2f} s"),
            ("layers", ", ".join(run.modules)),
            *(
                (k, v)
                for k, v in run.facts.items()
                if isinstance(v, (str, int, float)) and v != "" and k not in _SHOWN
            ),
        )
    )
    style = (
        "body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
        "li.major{border-left:4px solid #d95f02;padding-left:.6em;margin:.8em 0;list-style:none}"
        "li.minor{border-left:4px solid #999;padding-left:.6em;color:#555;list-style:none}"
        "li{overflow-wrap:anywhere}"
        "table{border-collapse:collapse;display:block;overflow-x:auto;max-width:100%}"
        "td,th{padding:.2em .6em;text-align:left}"
        "figure{margin:1.5em 0}figcaption{color:#555;font-size:.9em}"
    )
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>I/O diagnosis: {esc(run.name)}</title><style>{style}</style></head><body>"
        f"<h1>Why is this job slow on the file system?</h1><table>{facts}</table>"
        f"<h2>Findings, costliest first</h2><p>Cost: seconds in the calls each finding "
        f"concerns, on the busiest rank. Minor: under {MINOR_SHARE:.0%} of the run time "
        f"or {MINOR_S:g} s, and under {MAJOR_SHARE:.0%} of the run.</p>{note}{tracer}"
        f"<ol>{body}</ol>{plots}{frames}"
        "<p><small>Made by iolab (the lab's diagnosis rules, iolab.diagnosis).</small></p>"
        "</body></html>"
    )
