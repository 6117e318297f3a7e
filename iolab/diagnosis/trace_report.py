"""The text a learner reads of a Profile (`python -m iolab profile`): apart from the
Profile itself, whose JSON form stays with it.
"""

from __future__ import annotations

from iolab.core.workspace import public_text
from iolab.diagnosis.trace_profile import Profile


def format_profile(profile: Profile, top: int = 10) -> str:
    """The report a learner reads: totals by origin, the busiest files, data request sizes,
    and the diagnosis of the run."""
    from iolab.core.tables import to_markdown

    lines = [
        f"command:   {' '.join(public_text(p) for p in profile.command)}",
        f"method:    {profile.method} ({profile.note})",
        f"exit code: {profile.exit_code}",
        f"wall time: {profile.wall_time_s:.3f} s",
        "",
    ]
    if profile.method == "proc-io":
        io = profile.process_io or {}
        for key, label in (
            ("syscr", "read calls"),
            ("syscw", "write calls"),
            ("rchar", "bytes read (any source)"),
            ("wchar", "bytes written (any target)"),
            ("read_bytes", "bytes read from storage"),
        ):
            lines.append(f"  {label:<28}{io.get(key, 'n/a'):>14}")
        return "\n".join(lines)
    from iolab.diagnosis.report import format_findings
    from iolab.diagnosis.rules import diagnose

    run = profile.run()
    lines += [
        "Totals by origin (data = your program's files)",
        to_markdown(profile.by_origin()),
        "",
        f"Busiest files (top {top} by calls)",
        to_markdown(profile.frame().head(top)),
        "",
        "Request sizes on data files",
        to_markdown(profile.size_histogram()),
        "",
        format_findings(diagnose(run), run),
    ]
    return "\n".join(lines)
