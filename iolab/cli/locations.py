"""`python -m iolab locations [--add DIR] [--json] [--no-probe]`: the places on this machine
a learner can compare (iolab.storage.locations)."""

from __future__ import annotations

import argparse
import json

from iolab.cli.options import add_json_option
from iolab.core.options import path_option
from iolab.storage.locations import discover_locations, locations_frame


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "locations",
        help="list the directories to compare: file system, free space, O_DIRECT support",
        description=(
            "List the places on this machine a learner can compare (the workspace, $HOME, "
            "$TMPDIR or /tmp, /dev/shm, cluster areas such as $SCRATCH, and any --add DIR) "
            "with their file-system type, free space and inodes, and whether O_DIRECT works. "
            "The O_DIRECT probe writes one small file in a per-user directory and removes it."
        ),
    )
    parser.add_argument(
        "--add",
        action="append",
        default=[],
        type=path_option("--add"),
        metavar="DIR",
        help="another directory to compare (repeatable)",
    )
    add_json_option(parser, "print one JSON array instead")
    parser.add_argument(
        "--no-probe", action="store_true", help="write nothing: skip the O_DIRECT probe"
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print the table, or one JSON array of all fields."""
    from iolab.core.tables import to_markdown  # pandas only when a table is printed

    locations = discover_locations(args.add, probe=not args.no_probe)
    if args.json:
        print(json.dumps([location.public_dict() for location in locations]))
    else:
        print(to_markdown(locations_frame(locations)))
    return 0
