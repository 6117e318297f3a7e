"""How the data generators report, in the same words: how a result came to be (made now, in
so many seconds, or an earlier one reused after it verified), and `--verify`'s one line."""

from __future__ import annotations

import time
from pathlib import Path

#: --verify names this many problems; the rest are counted.
SHOWN_PROBLEMS = 3


def made_how(reused: bool, started: float) -> str:
    """The end of a generator's summary line; `started` is time.perf_counter() before it."""
    return "reused (verified)" if reused else f"written in {time.perf_counter() - started:.2f} s"


def verify_report(where: Path, problems: list[str]) -> int:
    """Print `--verify`'s line for `where` (OK, or NOT VALID and the first problems) and
    return the exit code: 0 if valid."""
    more = len(problems) - SHOWN_PROBLEMS
    shown = "; ".join(problems[:SHOWN_PROBLEMS]) + (f" (and {more} more)" if more > 0 else "")
    print(f"{where}: " + (f"NOT VALID: {shown}" if problems else "OK"))
    return 1 if problems else 0
