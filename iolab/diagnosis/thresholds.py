"""The rules' thresholds by name, and a centre's file that overrides some (`--config FILE`).

Each threshold lives beside its rule (iolab.diagnosis.rules.*, with why it has its value);
this module only finds them and changes them for one run. A name that several rule modules
share (MIN_COUNT, from rules.base) is one threshold, changed everywhere at once. The file is
one JSON object of names and numbers, e.g. {"SMALL_SHARE": 0.2, "MIN_COUNT": 500}, checked
whole before anything changes: an unknown name, a count that is not a whole number, a share
outside 0 to 1 is one sentence. A report made with changed thresholds says which (the
`thresholds` field of the JSON, a line of the text report), so nobody mistakes it for one
made with the lab's own.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType

from iolab.core.errors import LabError
from iolab.core.safe_input import read_checked_json

#: Constants of the rule modules that are not thresholds: how many files a finding names.
NOT_THRESHOLDS = frozenset({"TOP_FILES"})
#: A correlation is between -1 and 1; a share between 0 and 1; anything else at least 0.
CORRELATION_SUFFIX, SHARE_SUFFIX = "_CORRELATION", "_SHARE"
#: The thresholds this process runs with that differ from the lab's own (apply), and the
#: lab's own values of those (reset).
_changed: dict[str, float] = {}
_lab_values: dict[str, float] = {}


def rule_modules() -> list[ModuleType]:
    """The rules package and every module of it, where a threshold may be bound."""
    from iolab.diagnosis import rules
    from iolab.diagnosis.rules import base, libraries, lustre, metadata, mpiio, posix, ranks

    return [rules, base, libraries, lustre, metadata, mpiio, posix, ranks]


def defaults() -> dict[str, float]:
    """Every threshold with the value it has now, by name."""
    found: dict[str, float] = {}
    for module in rule_modules():
        for name, value in vars(module).items():
            if name.isupper() and type(value) in (int, float) and name not in NOT_THRESHOLDS:
                found.setdefault(name, value)
    return found


def _problem(name: str, value: object, default: float) -> str | None:
    """What is wrong with `value` for the threshold `name`; None if nothing."""
    if type(value) not in (int, float) or not math.isfinite(float(value)):  # type: ignore[arg-type]
        return f"{name} must be a number, not {value!r}"
    number = float(value)  # type: ignore[arg-type]
    if type(default) is int and not number.is_integer():
        return f"{name} is a count and must be a whole number, not {value!r}"
    low, high = (
        (-1.0, 1.0)
        if name.endswith(CORRELATION_SUFFIX)
        else (0.0, 1.0)
        if name.endswith(SHARE_SUFFIX)
        else (0.0, math.inf)
    )
    if not low <= number <= high:
        span = f"from {low:g} to {high:g}" if high < math.inf else f"{low:g} or more"
        return f"{name} must be {span}, not {value!r}"
    return None


def read_config(path: Path) -> dict[str, float]:
    """The thresholds `path` changes, checked against the known ones (one sentence if not)."""
    known = defaults()

    def problem(config: object) -> str | None:
        if not isinstance(config, dict):
            return "it is not a JSON object of threshold names and numbers"
        for name, value in config.items():
            if name not in known:
                return f"{name!r} is not a threshold; the thresholds are {', '.join(sorted(known))}"
            wrong = _problem(name, value, known[name])
            if wrong:
                return wrong
        return None

    fix = 'give a JSON object such as {"SMALL_SHARE": 0.2}'
    try:
        config = read_checked_json(Path(path), problem, "the thresholds file", fix)
    except (FileNotFoundError, NotADirectoryError):
        raise LabError(f"--config {path} does not exist; {fix}") from None
    return {
        name: int(value) if type(known[name]) is int else float(value)
        for name, value in config.items()
    }


def apply(changed: dict[str, float]) -> None:
    """Set the thresholds `changed` in every rule module that binds them (for this process)."""
    now = defaults()
    for name in changed:
        _lab_values.setdefault(name, now[name])
    for module in rule_modules():
        for name, value in changed.items():
            if hasattr(module, name):
                setattr(module, name, value)
    _changed.update(changed)


def changed() -> dict[str, float]:
    """The thresholds set by apply in this process, for the report to say."""
    return dict(_changed)


def reset() -> None:
    """The lab's own thresholds again (a notebook or a test that applied a file)."""
    apply(dict(_lab_values))
    _changed.clear()
