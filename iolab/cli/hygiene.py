"""`python -m iolab hygiene ACTION [--data DIR]`: read-only checks for living on shared
storage: free space and inodes, real usage, biggest consumers, checkpoints, caches, tmpdir
(iolab.storage.hygiene).

`--data` (the old name `--directory` still works) is the data the checks inspect, named as
in every other command; `--directory` elsewhere is where a benchmark makes its own files.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from iolab.cli.options import add_data_option, add_top_option
from iolab.core.options import Bounds, int_option
from iolab.core.workspace import workdir

if TYPE_CHECKING:
    import pandas as pd

# heavy imports (pandas via iolab.storage.hygiene) are in the functions that use them: a
# refused option or --help starts in a fraction of a second.

ACTIONS = ("df", "usage", "du", "checkpoints", "caches", "tmpdir")
#: Levels below DIR that du lists.
DU_DEPTH = Bounds(
    1,
    10,
    "levels",
    "each level deeper stats many more entries on a metadata "
    "server every user shares, and the biggest consumers show within a few",
)


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "hygiene",
        help="free space and inodes, real disk usage, biggest consumers, checkpoints, caches",
        description=(
            "Read-only checks for living on shared storage: df: bytes and inodes of the "
            "file system (df beside os.statvfs) and how much of it is reliably usable; usage: "
            "bytes versus allocated blocks, and what larger blocks would cost; du: the "
            "biggest consumers (Python beside du); checkpoints: checkpoint files per owner; "
            "caches: what pip, conda, Hugging Face and torch caches hold and the commands to "
            "clean them (dry run); tmpdir: where temporary files go. Nothing is deleted."
        ),
    )
    parser.add_argument("action", choices=ACTIONS)
    add_data_option(
        parser, "directory to inspect (default: the lab's workspace)", old_names=("--directory",)
    )
    add_top_option(parser, "rows to show for du/checkpoints")
    parser.add_argument(
        "--depth",
        type=int_option("--depth", DU_DEPTH),
        default=1,
        help="du depth below DIR (default: 1)",
    )
    parser.set_defaults(func=main)


def _print(frame: pd.DataFrame, note: str = "") -> None:
    from iolab.core.tables import to_markdown

    print(to_markdown(frame))
    if note:
        print(f"\n{note}")


def main(args: argparse.Namespace) -> int:
    """Print the action's tables (and a sentence on why it matters)."""
    from iolab.storage.hygiene import (
        WHY_INODES,
        WHY_TMPDIR,
        allocation_report,
        biggest_consumers,
        checkpoints_by_owner,
        df_report,
        file_sizes,
        find_checkpoints,
        rounded_allocation,
        tmpdir_report,
        usable_capacity_report,
    )
    from iolab.storage.hygiene_caches import cache_cleanup_plan, cache_report

    directory = args.dataset_dir or workdir()
    if args.action == "df":
        _print(df_report(directory), WHY_INODES)
        print()
        _print(usable_capacity_report(directory))
    elif args.action == "usage":
        _print(allocation_report(directory))
        print()
        _print(
            rounded_allocation(file_sizes(directory)["size_bytes"]),
            "(arithmetic: every non-empty file rounded up to whole allocation units)",
        )
    elif args.action == "du":
        _print(biggest_consumers(directory, top=args.top, depth=args.depth))
    elif args.action == "checkpoints":
        found = find_checkpoints(directory)
        _print(found.head(args.top))
        print()
        _print(checkpoints_by_owner(found))
    elif args.action == "caches":
        _print(cache_report())
        plan = cache_cleanup_plan()
        print("\nA cleanup would remove (dry run, nothing was deleted):")
        _print(plan.frame)
        print("\nTo clean, run yourself:")
        print("\n".join(f"  {command}" for command in plan.commands) or "  (nothing to clean)")
    else:
        _print(tmpdir_report(), WHY_TMPDIR)
    return 0
