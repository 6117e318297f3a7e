"""What this machine could not run: the optional tools and Python packages it lacks, and the
results the notebooks showed from the recorded run instead (the end of `make lab`)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from iolab.measure.tools import ToolStatus

#: Optional Python packages some lessons use, with the command that adds each.
OPTIONAL_PACKAGES = (
    ("torch", "PyTorch: the DataLoader and checkpoint runs of lessons 09 and 10", "make torch"),
    ("darshan", "PyDarshan: reads Darshan logs in lesson 12", "make darshan"),
)


def missing_names(statuses: Sequence[ToolStatus]) -> list[str]:
    """The names of the optional pieces missing here (tools, then Python packages)."""
    return [s.name for s in statuses if s.state != "ok"] + [
        name for name, _, _ in OPTIONAL_PACKAGES if importlib.util.find_spec(name) is None
    ]


def missing_pieces(statuses: Sequence[ToolStatus]) -> list[str]:
    """Every optional piece this machine lacks -- a tool missing or unusable, a Python
    package not installed -- one line each, with the command that adds it."""
    lines = [
        f"{s.name} ({s.purpose}): {s.problem or 'not found'}; how to get it: {s.how_to_get}"
        for s in statuses
        if s.state != "ok"
    ]
    lines += [
        f"{name} ({what}): not installed; how to get it: `{command}`"
        for name, what, command in OPTIONAL_PACKAGES
        if importlib.util.find_spec(name) is None
    ]
    return lines


def not_run_here(fallback_log: Path) -> list[str]:
    """What this machine could not measure, one line per missing tool with the notebooks
    whose cells showed the recorded run instead."""
    try:
        lines = fallback_log.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    by_reason: dict[str, list[str]] = {}
    for line in lines:
        notebook, _key, reason = line.split(": ", 2)
        by_reason.setdefault(reason, [])
        if notebook not in by_reason[reason]:
            by_reason[reason].append(notebook)
    return [
        f"{reason} (recorded results shown in {', '.join(notebooks)})"
        for reason, notebooks in by_reason.items()
    ]
