"""Options that mean the same in every command, defined once; commands import them from here.

`--data DIR` is the dataset (or the data a command reads, inspects or mounts) everywhere;
names it had before (`--data-dir`, `--out`, `--export`, ...) still work for one release and
print a notice naming the new flag (defined in iolab.core.options, which the data
generators share). `--directory DIR` is, in every command that has it, the place where the
command makes its own test files and removes them. `--i-am-on-a-compute-node` is the one
flag that lifts the login-node budget (iolab.core.budget).
"""

from __future__ import annotations

import argparse
from typing import Sequence

from iolab.core.budget import FLAG
from iolab.core.options import add_data_option, add_renamed

__all__ = ["add_budget_option", "add_data_option", "add_renamed"]


def add_budget_option(parser: argparse.ArgumentParser, old_names: Sequence[str] = ()) -> None:
    """The budget flag into `args.compute_node`: True when given, else None (ask the batch
    system), the value every budget check takes; `old_names` are the command's old switches."""
    parser.add_argument(FLAG, dest="compute_node", action="store_const", const=True,
                        default=None, help="lift the login-node limits: only on a node that is "
                        "yours alone (inside a batch job they are lifted already)")
    add_renamed(parser, FLAG, old_names, dest="compute_node", nargs=0, const=True)
