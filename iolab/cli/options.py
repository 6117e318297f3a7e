"""Options that mean the same in every command, defined once; commands import them from here.

`--data DIR` is the dataset (or the data a command reads, inspects or mounts) everywhere;
names it had before (`--data-dir`, `--out`, `--export`, ...) still work for one release and
print a notice naming the new flag (defined in iolab.core.options, which the data
generators share). `--directory DIR` is, in every command that has it, the place where the
command makes its own test files and removes them. `--i-am-on-a-compute-node` is the one
flag that lifts the login-node budget (iolab.core.budget). Numbers and paths are read with
the bounded types of iolab.core.options; `--top` means the same range everywhere. `--json`
prints one JSON value instead of the tables. `-- CMD ...` is a program to run with its own
arguments, never read as the command's options (add_command_argument); where a positional
comes before it as well (`diagnose LOG --json` or `diagnose --json -- CMD`), CommandLine
splits it off before parsing (add_input_or_command).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from iolab.core.options import Bounds, add_budget_option, add_data_option, add_renamed, int_option

__all__ = [
    "TOP_ROWS",
    "CommandLine",
    "add_budget_option",
    "add_command_argument",
    "add_data_option",
    "add_input_or_command",
    "add_json_option",
    "add_renamed",
    "add_top_option",
]

#: Rows of a busiest-first table (hygiene du and checkpoints, profile, darshan): a ranking is
#: read on a terminal, and a thousand rows are already dozens of screens of it.
TOP_ROWS = Bounds(
    1, 1000, "rows", "a table meant to be read; a thousand rows is already dozens of screens"
)


def add_top_option(parser: argparse.ArgumentParser, help: str) -> None:
    """`--top N` into `args.top`: the rows of the busiest-first table (default 10)."""
    parser.add_argument(
        "--top",
        type=int_option("--top", TOP_ROWS),
        default=10,
        metavar="N",
        help=f"{help} (default: 10)",
    )


def add_json_option(parser: argparse.ArgumentParser, help: str = "print one JSON object") -> None:
    """`--json` into `args.json`: one JSON value on stdout in place of the tables, for scripts."""
    parser.add_argument("--json", action="store_true", help=help)


class _Command(argparse.Action):
    """Stores the program to run without the `--` that separates it from our options."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values[1:] if values[:1] == ["--"] else values)


def add_command_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """`-- CMD ...` into `args.command` ([] without one): the program and its arguments whole,
    so that its options (`--json`, `--data`) stay the program's."""
    parser.add_argument("command", nargs=argparse.REMAINDER, action=_Command, help=help)


class CommandLine(argparse.ArgumentParser):
    """The parser of `python -m iolab`, and so of every command (add_subparsers makes its
    parsers of the parent's class). For a command set up by add_input_or_command, the words
    after the first `--` go to `args.command` untouched, split off before the rest is parsed:
    argparse alone cannot read both `LOG --json` and `--json -- CMD` (a REMAINDER after LOG
    would take `--json` too, and LOG would take CMD's first word)."""

    #: Whether the words after `--` are a program to run (add_input_or_command sets it).
    splits_command = False

    def parse_known_args(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        if not self.splits_command or "--" not in words:
            return super().parse_known_args(words, namespace)
        cut = words.index("--")
        parsed, extras = super().parse_known_args(words[:cut], namespace)
        parsed.command = words[cut + 1 :]
        return parsed, extras


def add_input_or_command(
    parser: argparse.ArgumentParser, read: Callable[[str], Any], metavar: str, help: str
) -> None:
    """An optional positional into `args.input` (read by `read`) and, after `--`, a program to
    run into `args.command` ([] without one). The command needs the parser to be a
    CommandLine (`iolab.cli.build_parser`); any parser reads the positional."""
    parser.add_argument("input", nargs="?", type=read, metavar=metavar, help=help)
    parser.set_defaults(command=[])
    if isinstance(parser, CommandLine):
        parser.splits_command = True
