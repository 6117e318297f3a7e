"""`python -m iolab darshan LOG [--json] [--html FILE] [--top N]`: a Darshan log's I/O by
layer and file, and the ranked diagnosis (iolab.diagnosis); `iolab diagnose` takes a log,
a trace or a command alike."""

from __future__ import annotations

import argparse

from iolab.cli import diagnose
from iolab.cli.options import add_top_option
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
    source.add_argument("--example", type=text_option("--example", "a bundled log's name"),
                        help="a log bundled with PyDarshan, by name")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--html", type=path_option("--html"), metavar="FILE",
                        help="also write the report as one self-contained HTML page")
    add_top_option(parser, "how many of the busiest files to list")
    parser.set_defaults(func=main, rest=[], cwd=None, darshan_only=True)


def main(args: argparse.Namespace) -> int:
    return diagnose.main(args)
