"""`python -m iolab lustre status PATH | getstripe FILE|-`: is a path on Lustre, and a file's
layout as a table (iolab.hpc.lustre)."""

from __future__ import annotations

import argparse
import sys

from iolab.core.errors import LabError
from iolab.core.options import path_option, text_option
from iolab.core.user_paths import existing_path

# heavy imports in the subcommands: a refused option or --help starts in a fraction of a second


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lustre",
        help="is a path on Lustre; read lfs getstripe layouts as a table",
        description="Check whether a path is on Lustre (mount table and statfs magic) and "
        "whether lfs is installed, or show a file's layout: run lfs getstripe "
        "on Lustre, or read a saved `lfs getstripe` output anywhere.",
    )
    parser.set_defaults(func=main)
    commands = parser.add_subparsers(dest="lustre_command", required=True)
    status = commands.add_parser("status", help="is PATH on Lustre, and is lfs installed")
    status.add_argument("path", type=path_option("PATH"), help="a file or directory")
    show = commands.add_parser(
        "getstripe",
        help="a layout as a table (extent, stripe size, count, OSTs)",
        description="FILE on Lustre: run lfs getstripe on it. Otherwise FILE (or - for "
        "standard input) holds a saved `lfs getstripe` output to read.",
    )
    show.add_argument(
        "source",
        metavar="FILE|-",
        help="a file, or - to read standard input",
        type=text_option("FILE", "a file, or - for standard input"),
    )
    show.add_argument(
        "--parse", action="store_true", help="read FILE as saved output even when it is on Lustre"
    )
    show.add_argument(
        "--allow-partial",
        action="store_true",
        help="accept an excerpt whose obdidx table is shorter than the count",
    )


def _status(args: argparse.Namespace) -> int:
    """`lustre status PATH`: the witnesses and whether lfs is installed, as a table."""
    from iolab.core.tables import to_markdown
    from iolab.hpc.lustre import lustre_status

    status = lustre_status(existing_path(args.path, "give an existing file or folder to check"))
    print(to_markdown(status.frame()))
    return 0


def _getstripe(args: argparse.Namespace) -> int:
    """`lustre getstripe FILE|-`: the live layout on Lustre, else the saved output parsed."""
    from iolab.core.tables import to_markdown
    from iolab.hpc.lustre import getstripe, is_lustre, layout_frame, lfs_command
    from iolab.hpc.lustre_parse import parse_getstripe

    if args.source == "-":
        layout = parse_getstripe(sys.stdin.read(), allow_partial=args.allow_partial)
    else:
        source = existing_path(
            args.source,
            "give a saved `lfs getstripe` output, a file on Lustre, or - for standard input",
        )
        if source.is_dir() and not is_lustre(source):
            raise LabError(
                f"{source} is a folder, not a file: give a saved `lfs getstripe` "
                "output, a file or folder on Lustre, or - for standard input"
            )
        if not args.parse and is_lustre(source) and lfs_command() is not None:
            layout = getstripe(source)
        else:
            layout = parse_getstripe(
                source.read_text(encoding="utf-8", errors="replace"),
                allow_partial=args.allow_partial,
            )
    print(to_markdown(layout_frame(layout)))
    return 0


def main(args: argparse.Namespace) -> int:
    """Run the chosen subcommand, status or getstripe."""
    return {"status": _status, "getstripe": _getstripe}[args.lustre_command](args)
