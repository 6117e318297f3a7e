"""`python -m iolab darshan LOG [--json] [--html FILE] [--top N]`: a Darshan log's I/O by
layer and file, and the ranked diagnosis (iolab.diagnosis), printed as `diagnose` prints it;
`iolab diagnose` takes a log, a trace or a command alike."""

from __future__ import annotations

import argparse

from iolab.cli import diagnose
from iolab.cli.options import add_json_option, add_top_option
from iolab.core.options import path_option, text_option


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "darshan",
        help="read a Darshan log and diagnose its I/O, findings ranked by their cost",
        description=(
            "Read a Darshan log (PyDarshan, `make darshan`) and print its I/O per layer, the "
            "files that moved the most bytes, the request sizes and the diagnosis, ranked by "
            "the seconds each finding costs. `--example NAME` reads one of the real logs "
            "bundled with PyDarshan (sample-badost, dxt, ior_hdf5_example, ...). The same as "
            "`iolab diagnose LOG`."
        ),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("input", nargs="?", type=path_option("LOG"), help="the *.darshan file")
    source.add_argument(
        "--example",
        type=text_option("--example", "a bundled log's name"),
        help="a log bundled with PyDarshan, by name",
    )
    add_json_option(parser, "print one JSON object instead of tables")
    parser.add_argument(
        "--html",
        type=path_option("--html"),
        metavar="FILE",
        help="also write the report as one self-contained HTML page",
    )
    add_top_option(parser, "how many of the busiest files to list")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Read the log as a Darshan log whatever its content (`diagnose` would also take a trace)."""
    from iolab.diagnosis import inputs

    diagnose.check_page(args.html)
    log = diagnose.example_log(args.example) if args.example else args.input
    result = inputs.from_darshan(log, figures=args.html is not None)
    return diagnose.report(result, args.json, args.html, args.top)
