"""Renamed command-line flags: an old spelling keeps working for one release, with a notice.

Here in core (standard library only) so that the data generators, which import nothing but
iolab.core, name the dataset `--data` and keep their old flag names the same way the
toolkit's commands do (iolab.cli.options).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence


class RenamedOption(argparse.Action):
    """An old flag name: stores into the new option's destination after a one-line notice.

    With nargs=0 it is a switch and stores `const`, like the store_const flag it renames.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, new_name: str = "",
                 **kwargs: Any) -> None:
        self.new_name = new_name
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"note: {option_string} is now {self.new_name}; the old name will be removed in "
              "the next release", file=sys.stderr)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_renamed(parser: argparse.ArgumentParser | argparse._ArgumentGroup, new_name: str,
                old_names: Sequence[str], dest: str, **kwargs: Any) -> None:
    """Accept `old_names` as hidden spellings of `new_name` (same destination and type)."""
    for old in old_names:
        parser.add_argument(old, dest=dest, action=RenamedOption, new_name=new_name,
                            help=argparse.SUPPRESS, **kwargs)


def add_data_option(parser: argparse.ArgumentParser, help: str, *, required: bool = False,
                    default: Path | None = None, old_names: Sequence[str] = ()) -> None:
    """`--data DIR` into `args.dataset_dir`, with the command's old names for it."""
    where = parser.add_mutually_exclusive_group(required=required) if old_names else parser
    kwargs: dict[str, Any] = {"type": Path, "metavar": "DIR", "dest": "dataset_dir"}
    if not required:
        kwargs["default"] = default
    if where is parser:
        parser.add_argument("--data", required=required, help=help, **kwargs)
        return
    where.add_argument("--data", help=help, **kwargs)
    add_renamed(where, "--data", old_names, dest="dataset_dir", type=Path, metavar="DIR")
