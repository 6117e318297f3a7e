"""Options that mean the same in every command, defined once; commands import them from here.

`--data DIR` is the dataset (or the data a command reads, inspects or mounts) everywhere;
names it had before (`--data-dir`, `--out`, `--export`, ...) still work for one release and
print a notice naming the new flag (defined in iolab.core.options, which the data
generators share). `--directory DIR` is, in every command that has it, the place where the
command makes its own test files and removes them. `--i-am-on-a-compute-node` is the one
flag that lifts the login-node budget (iolab.core.budget). Numbers and paths are read with
the bounded types of iolab.core.options; `--top` means the same range everywhere.
"""

from __future__ import annotations

import argparse
from typing import Sequence

from iolab.core.budget import FLAG
from iolab.core.options import Bounds, add_data_option, add_renamed, int_option

__all__ = ["TOP_ROWS", "add_budget_option", "add_data_option", "add_renamed", "add_top_option"]

#: Rows of a busiest-first table (hygiene du and checkpoints, profile, darshan): a ranking is
#: read on a terminal, and a thousand rows are already dozens of screens of it.
TOP_ROWS = Bounds(1, 1000, "rows", "a table meant to be read; a thousand rows is already "
                  "dozens of screens")


def add_top_option(parser: argparse.ArgumentParser, help: str) -> None:
    """`--top N` into `args.top`: the rows of the busiest-first table (default 10)."""
    parser.add_argument("--top", type=int_option("--top", TOP_ROWS), default=10, metavar="N",
                        help=f"{help} (default: 10)")


def add_budget_option(parser: argparse.ArgumentParser, old_names: Sequence[str] = ()) -> None:
    """The budget flag into `args.compute_node`: True when given, else None (ask the batch
    system), the value every budget check takes; `old_names` are the command's old switches."""
    parser.add_argument(FLAG, dest="compute_node", action="store_const", const=True,
                        default=None, help="lift the login-node limits: only on a node that is "
                        "yours alone (inside a batch job they are lifted already)")
    add_renamed(parser, FLAG, old_names, dest="compute_node", nargs=0, const=True)
