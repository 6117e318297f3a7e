"""Words around numbers: one rule for "1 process" and "2 processes" across the lab."""

from __future__ import annotations

_ES_ENDINGS = ("s", "x", "sh", "ch")


def counted(number: int, noun: str) -> str:
    """`1 account`, `0 files`, `6 processes`: the lab's lines are read aloud to a room and
    quoted in notes, so a number and its noun agree."""
    if number == 1:
        return f"{number} {noun}"
    return f"{number} {noun}{'es' if noun.endswith(_ES_ENDINGS) else 's'}"
