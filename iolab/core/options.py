"""Command-line values checked as they are read, and renamed flags.

Bounded values: every number a command, demo or generator takes is checked against its
range while the command line is parsed, before any work, and a value out of range (or nan,
inf, or an empty path) is refused with one sentence naming the option, the value, the range
and why that range (`Bounds.why`): a LabError, which run_cli prints as `error: ...` with exit
status 2, as every other problem a learner can fix. A script must therefore parse its
arguments inside run_cli. The ranges that only keep a shared login node usable are the
login-node budget's (iolab.core.budget), checked where the request is known whole and lifted
on a compute node; the ranges here hold everywhere.

Renamed flags: an old spelling keeps working for one release, with a notice (renamed_notice,
which the renamed commands of iolab.cli.RENAMED_COMMANDS print too).

Here in core (standard library only) so that the data generators and demos, which import
nothing but iolab.core, read their arguments the same way the toolkit's commands do
(iolab.cli.options).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iolab.core.budget import FLAG, LIMITS
from iolab.core.errors import LabError


@dataclass(frozen=True)
class Bounds:
    """The values a numeric option may take, its unit and why that range (as budget.Limit).

    `low` None: the code the value is for checks the lower end itself, with its own sentence.
    `above`: `low` itself is excluded (a scale must be above 0, not 0).
    """

    low: float | None
    high: float
    unit: str
    why: str
    above: bool = False

    def text(self) -> str:
        """The range in words: '1 to 10 repeats', 'above 0 and at most 1000', 'at most 60 s'."""
        unit = f" {self.unit}" if self.unit else ""
        high = _number(self.high)
        if self.low is None:
            return f"at most {high}{unit}"
        if self.above:
            return f"above {_number(self.low)} and at most {high}{unit}"
        return f"{_number(self.low)} to {high}{unit}"

    def contains(self, value: float) -> bool:
        """Whether `value` is a finite number in the range (nan and inf never are)."""
        if not math.isfinite(value) or value > self.high:
            return False
        return self.low is None or (value > self.low if self.above else value >= self.low)


def _number(value: float) -> str:
    """67,108,864 rather than 67108864.0; 0.5 as it is."""
    return f"{int(value):,}" if float(value).is_integer() else str(value)


@dataclass(frozen=True)
class BoundedNumber:
    """An argparse type: a number of `kind` (int or float) within `bounds`, else a LabError
    naming `option`, the value, the range and why (nan and inf are never within)."""

    option: str
    bounds: Bounds
    kind: type = int

    def __call__(self, text: str) -> int | float:
        try:
            value = self.kind(text)
        except ValueError:
            noun = "a whole number" if self.kind is int else "a number"
            raise LabError(
                f"{self.option} takes {noun}, not {text!r}; choose {self.bounds.text()}"
            ) from None
        if not self.bounds.contains(value):
            raise LabError(
                f"{self.option} {text} is out of range; choose {self.bounds.text()} "
                f"({self.bounds.why})"
            )
        return value


def int_option(option: str, bounds: Bounds) -> BoundedNumber:
    """The argparse type of a whole-number option, e.g. type=int_option("--repeats", REPEATS)."""
    return BoundedNumber(option, bounds, int)


def float_option(option: str, bounds: Bounds) -> BoundedNumber:
    """The argparse type of a finite-number option within `bounds`."""
    return BoundedNumber(option, bounds, float)


def text_option(option: str, what: str) -> Callable[[str], str]:
    """An argparse type: non-blank text, else a LabError naming `option` and what it names."""

    def parse(text: str) -> str:
        if not text.strip():
            raise LabError(f"{option} was given an empty value; give {what}")
        return text

    return parse


def path_option(option: str) -> Callable[[str], Path]:
    """An argparse type: a path, but never an empty one, which Path would read as the current
    directory, so that a command would write or inspect there unasked."""
    check = text_option(option, "a path (`.` for the current directory)")
    return lambda text: Path(check(text))


#: The most processes (workers, ranks) one run starts even where the login-node budget is
#: lifted: the cores of the largest two-socket nodes (2 x 128).
MOST_PROCESSES = 256


def process_bounds(low: int, unit: str) -> Bounds:
    """`low` to MOST_PROCESSES processes of one kind (workers, ranks, processes)."""
    return Bounds(
        low,
        MOST_PROCESSES,
        unit,
        "more than the largest nodes have cores would "
        "only take turns, and measure the scheduler rather than the storage",
    )


#: Shuffle seeds.
SEEDS = Bounds(
    0,
    2**32 - 1,
    "",
    "random.Random shuffles -n exactly as n, and numpy and torch take seeds up to 2**32 - 1",
)
#: The largest sample make_images.py writes (its MAX_SAMPLE_KB), in MiB.
LARGEST_SAMPLE_MIB = 8
#: Samples per batch, all held in memory at once.
BATCH_SAMPLES = Bounds(
    1,
    LIMITS["data_mib"].most // LARGEST_SAMPLE_MIB,
    "samples",
    "a batch "
    f"is held in memory, and this many samples of up to {LARGEST_SAMPLE_MIB} "
    f"MiB are the {LIMITS['data_mib'].most} MiB a run may hold on a login node",
)


def renamed_notice(old: str, new: str) -> str:
    """The one line an old spelling (a flag, or a command: iolab.cli.main) prints when used."""
    return f"note: {old} is now {new}; the old name will be removed in the next release"


class RenamedOption(argparse.Action):
    """An old flag name: stores into the new option's destination after a one-line notice.

    With nargs=0 it is a switch and stores `const`, like the store_const flag it renames.
    """

    def __init__(
        self, option_strings: Sequence[str], dest: str, new_name: str = "", **kwargs: Any
    ) -> None:
        self.new_name = new_name
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(renamed_notice(str(option_string), self.new_name), file=sys.stderr)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_renamed(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    new_name: str,
    old_names: Sequence[str],
    dest: str,
    **kwargs: Any,
) -> None:
    """Accept `old_names` as hidden spellings of `new_name` (same destination and type)."""
    for old in old_names:
        parser.add_argument(
            old,
            dest=dest,
            action=RenamedOption,
            new_name=new_name,
            help=argparse.SUPPRESS,
            **kwargs,
        )


def add_data_option(
    parser: argparse.ArgumentParser,
    help: str,
    *,
    required: bool = False,
    default: Path | None = None,
    old_names: Sequence[str] = (),
) -> None:
    """`--data DIR` into `args.dataset_dir`, with the command's old names for it."""
    where = parser.add_mutually_exclusive_group(required=required) if old_names else parser
    kwargs: dict[str, Any] = {
        "type": path_option("--data"),
        "metavar": "DIR",
        "dest": "dataset_dir",
    }
    if not required:
        kwargs["default"] = default
    if where is parser:
        parser.add_argument("--data", required=required, help=help, **kwargs)
        return
    where.add_argument("--data", help=help, **kwargs)
    add_renamed(where, "--data", old_names, dest="dataset_dir", type=kwargs["type"], metavar="DIR")


def add_budget_option(parser: argparse.ArgumentParser, old_names: Sequence[str] = ()) -> None:
    """The budget flag into `args.compute_node`: True when given, else None (ask the batch
    system), the value every budget check takes; `old_names` are the command's old switches."""
    parser.add_argument(
        FLAG,
        dest="compute_node",
        action="store_const",
        const=True,
        default=None,
        help="lift the login-node limits: only on a node that is "
        "yours alone (inside a batch job they are lifted already)",
    )
    add_renamed(parser, FLAG, old_names, dest="compute_node", nargs=0, const=True)
