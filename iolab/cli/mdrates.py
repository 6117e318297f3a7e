"""`python -m iolab mdrates --directory DIR [-n N] [-P P] [--shared] [--bytes B]`: metadata
rates like mdtest, file create, stat, read and remove per second (iolab.storage.mdrates)."""

from __future__ import annotations

import argparse
import json

from iolab.cli.options import add_budget_option, add_json_option
from iolab.core.budget import FLAG, LIMITS
from iolab.core.options import Bounds, int_option, path_option, process_bounds
from iolab.storage.run_sizes import DEFAULT_FILES_PER_PROCESS, MAX_FILE_BYTES

# heavy imports in main: a refused option or --help starts in a fraction of a second

#: Files each process creates, stats, reads and removes.
FILES_PER_PROCESS = Bounds(
    1,
    1_000_000,
    "files",
    "a million files is beyond most users' inode "
    "quota on a cluster file system, so a larger run would fail halfway; "
    f"on a login node the budget allows {LIMITS['files'].most} in all",
)
#: Bytes written to and read from each file.
FILE_BYTES = Bounds(
    0,
    MAX_FILE_BYTES,
    "bytes",
    "mdrates measures metadata; measure larger files with `python -m iolab sweep`",
)
#: Repeats of the four phases, for mdtest's Max, Min, Mean and Std Dev.
ITERATIONS = Bounds(
    1,
    10,
    "iterations",
    "each repeats all four phases over every file on a "
    "metadata server every user shares, and the statistics settle within a few",
)


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "mdrates",
        help="metadata rates like mdtest: file create, stat, read and remove per second",
        description=(
            "Create, stat, read and remove small files with P processes that start every "
            "phase together, and print the rates in mdtest's SUMMARY columns. --bytes 3901 "
            "--shared is IO500's mdtest-hard in miniature; empty files in a directory per "
            "process is mdtest-easy. Everything happens in a fresh subdirectory of DIR, "
            "removed afterwards."
        ),
    )
    parser.add_argument(
        "--directory",
        type=path_option("--directory"),
        required=True,
        metavar="DIR",
        help="where to create the files (a fresh subdirectory is made and removed)",
    )
    parser.add_argument(
        "-n",
        "--files-per-process",
        type=int_option("--files-per-process", FILES_PER_PROCESS),
        default=DEFAULT_FILES_PER_PROCESS,
        metavar="N",
        help=f"files per process (default: {DEFAULT_FILES_PER_PROCESS})",
    )
    parser.add_argument(
        "-P",
        "--processes",
        type=int_option("--processes", process_bounds(1, "processes")),
        default=1,
        help=f"processes, at most {LIMITS['processes'].most} unless {FLAG} (default: 1)",
    )
    parser.add_argument(
        "--shared",
        action="store_true",
        help="all processes in one directory (default: one directory each, as mdtest -u)",
    )
    parser.add_argument(
        "--bytes",
        type=int_option("--bytes", FILE_BYTES),
        default=0,
        metavar="B",
        help="bytes written and read per file (default: 0; IO500 hard: 3901)",
    )
    parser.add_argument(
        "--iterations",
        type=int_option("--iterations", ITERATIONS),
        default=1,
        help="repeats for Max/Min/Mean/Std Dev (default: 1)",
    )
    add_json_option(parser, "print one JSON array instead")
    add_budget_option(parser, old_names=("--allow-large",))
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print mdtest's SUMMARY table, or one JSON array of its rows."""
    from iolab.core.tables import to_markdown
    from iolab.storage.mdrates import RATE_COLUMNS, describe_run, run_mdtest

    table = run_mdtest(
        args.directory,
        args.files_per_process,
        args.processes,
        args.shared,
        args.bytes,
        args.iterations,
        compute_node=args.compute_node,
    )
    if args.json:
        print(json.dumps(table.to_dict(orient="records")))
        return 0
    print(describe_run(table))
    print()
    print(to_markdown(table[["Operation", *RATE_COLUMNS]]))
    return 0
