"""`python -m iolab check-tools [--strict]`: which system tools the lab uses, which are here,
and how to get the others (iolab.measure.tools)."""

from __future__ import annotations

import argparse

from iolab.measure.tools import check_tools, format_report


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check-tools",
        help="list the system tools the lab uses, which are present, and how to get the others",
        description=(
            "Report each system tool the lab uses: its version when present, otherwise why it "
            "matters and how to get it (apt, dnf, module load). Missing optional tools are not "
            "an error."
        ),
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit with status 1 if a tool the current lessons need is missing",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print the report; fail only with --strict and a missing required tool."""
    statuses = check_tools()
    print(format_report(statuses))
    missing = [s.name for s in statuses if s.required and not s.found]
    return 1 if args.strict and missing else 0
