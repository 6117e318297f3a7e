"""`python -m iolab time [--repeats N] [--data DIR] -- CMD...`: repeated wall and CPU times of
a command, with the machine and file system it ran on (iolab.measure.timing).

`--data` is the data the timed command reads, as in every other command; its old name
`--location` meant a place of `python -m iolab locations` elsewhere (fio).
"""

from __future__ import annotations

import argparse
import json

from iolab.cli.options import add_data_option, add_json_option
from iolab.core.options import Bounds, int_option, text_option
from iolab.core.user_paths import existing_dir
from iolab.measure.context import context_frame

# heavy imports in main: a refused option or --help starts in a fraction of a second

#: Timed runs of the command.
REPEATS = Bounds(
    1,
    100,
    "runs",
    "each run repeats the whole command, perhaps a full read of "
    "a dataset on a disk others share, and a median and spread settle within tens",
)
#: Untimed runs first.
WARMUP = Bounds(
    0, 10, "runs", "one run fills the page cache, and further ones only keep a shared node busy"
)


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "time",
        help="time a command: repeats, median and spread of wall and CPU time",
        description=(
            "Run a command once untimed (warm-up) and then several times timed, and print "
            "the median, minimum and maximum wall time and the median CPU time, with the "
            "machine it ran on. Put the command after --, e.g. "
            "`python -m iolab time --repeats 5 -- python demos/read_files.py --data DIR`."
        ),
    )
    parser.add_argument(
        "--repeats",
        type=int_option("--repeats", REPEATS),
        default=5,
        help="timed runs (default: 5)",
    )
    parser.add_argument(
        "--warmup",
        type=int_option("--warmup", WARMUP),
        default=1,
        help="untimed runs first (default: 1)",
    )
    parser.add_argument(
        "--label",
        type=text_option("--label", "a name for the table"),
        help="name in the table (default: the command)",
    )
    add_data_option(
        parser,
        "directory the command reads; its file system is recorded",
        old_names=("--location",),
    )
    add_json_option(parser, "print one JSON object instead of tables")
    parser.add_argument("cmd", nargs="+", metavar="CMD", help="the command to time, after --")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Measure the command and print a markdown summary, or one JSON object."""
    from iolab.core.tables import to_markdown
    from iolab.measure.timing import summarize, time_command

    measurement = time_command(
        args.cmd,
        repeats=args.repeats,
        warmup=args.warmup,
        label=args.label,
        location=None
        if args.dataset_dir is None
        else existing_dir(args.dataset_dir, "give --data the folder the command reads"),
    )
    if args.json:
        print(json.dumps(measurement.to_dict()))
        return 0
    print(to_markdown(summarize([measurement])))
    if measurement.result is not None:
        print(f"\nresult of the last repeat: {json.dumps(measurement.result)}")
    print()
    print(to_markdown(context_frame(measurement.context)))
    return 0
