"""`python -m iolab advise [--json] [--budget-s 180] [--places NAME ...]`: measure every
place the lab finds, briefly, and say where environments, datasets, checkpoints and
temporary files should go, each with its measured reason (iolab.storage.advise, rules in
iolab.storage.advice_rules)."""

from __future__ import annotations

import argparse
import json

from iolab.cli.options import add_budget_option, add_json_option
from iolab.core.budget import LIMITS
from iolab.core.options import Bounds, int_option
from iolab.storage.advise_options import (
    DEFAULT_BUDGET_S,
    DEFAULT_FILES,
    DEFAULT_MIB,
    MIN_FILES,
    MIN_MIB,
)

# iolab.storage.advise (pandas) is imported in main: a refused option or --help starts in a
# fraction of a second.

# --budget-s is checked by budget_seconds (above 0, at most MAX_BUDGET_S), first in main.
#: MiB one place holds at a time.
MIB_PER_PLACE = Bounds(
    MIN_MIB,
    16 * 1024,
    "MiB",
    "fewer measure nothing reliable, and every "
    "place is measured, $HOME and quota-limited ones too, where 16 GiB is "
    "a quota's worth; on a login node the budget allows "
    f"{LIMITS['data_mib'].most} MiB",
)
#: Files one place holds at a time.
FILES_PER_PLACE = Bounds(
    MIN_FILES,
    1_000_000,
    "files",
    "fewer give no rate, and every place "
    "is measured, $HOME too, where a million files is an inode quota's "
    f"worth; on a login node the budget allows {LIMITS['files'].most}",
)


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "advise",
        help="your storage: measure each place briefly and advise where things should live",
        description=(
            "Measure each place the lab finds (workspace, $HOME, $TMPDIR or /tmp, /dev/shm, "
            "$SCRATCH and other cluster areas, and a loopback sshfs mount where one can be "
            "made): small files read cold and warm, streaming write and read, file create "
            "and stat rates, the import time of a generated package, free space and inodes, "
            "quota. Then advise where a Python environment, a many-file dataset, checkpoints "
            "and TMPDIR should go, with the measured reason. Login-safe: the time bound and "
            "the bytes and files per place are printed first; everything written is removed."
        ),
    )
    parser.add_argument(
        "--budget-s",
        default=str(DEFAULT_BUDGET_S),
        metavar="S",
        help=f"time for the whole run in seconds (default: {DEFAULT_BUDGET_S:.0f})",
    )
    parser.add_argument(
        "--places",
        nargs="+",
        metavar="NAME",
        help="measure only these places (names as `python -m iolab locations` "
        "shows them, and sshfs)",
    )
    parser.add_argument(
        "--mib",
        type=int_option("--mib", MIB_PER_PLACE),
        default=DEFAULT_MIB,
        help=f"most MiB one place holds at a time (default: {DEFAULT_MIB})",
    )
    parser.add_argument(
        "--files",
        type=int_option("--files", FILES_PER_PLACE),
        default=DEFAULT_FILES,
        help=f"most files one place holds at a time (default: {DEFAULT_FILES})",
    )
    add_json_option(parser, "print one JSON object (measurements and advice) instead")
    add_budget_option(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print the bound, measure (one progress line per place on stderr), print the report."""
    from iolab.storage.advise import budget_seconds, eprint, measure_places, text_report

    budget_s = budget_seconds(args.budget_s)
    places = (
        [name for part in args.places for name in part.split(",") if name] if args.places else None
    )

    def announce(text: str) -> None:
        if args.json:
            eprint(text)
        else:
            print(text, flush=True)

    result = measure_places(
        places,
        budget_s,
        args.mib,
        args.files,
        compute_node=args.compute_node,
        announce=announce,
        progress=eprint,
    )
    if args.json:
        print(json.dumps(result))
    else:
        print()
        print(text_report(result))
    return 0
