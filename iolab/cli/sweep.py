"""`python -m iolab sweep --directory DIR [--min SIZE] [--max SIZE]`: write and cold-read
throughput per file size, elbencho's storage_sweep scaled to a login node
(iolab.storage.sweep)."""

from __future__ import annotations

import argparse

from iolab.core.atomic import atomic_output
from iolab.core.options import Bounds, int_option, path_option
from iolab.core.user_paths import output_file
from iolab.storage.run_sizes import DEFAULT_MAX_BYTES, DEFAULT_MIN_BYTES, parse_size

# heavy imports in main: a refused option or --help starts in a fraction of a second

#: Runs of the whole sweep, whose median per size is printed.
REPEATS = Bounds(
    1,
    10,
    "repeats",
    "each repeat writes, fsyncs, evicts and reads back every "
    "point again, 2.8 GiB in 14,000 files by default, on a disk others share, and "
    "a median settles within a few",
)


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="file-size sweep: write and cold-read throughput from 4 KiB to 64 MiB files",
        description=(
            "Write, evict, read back and delete files of each power-of-two size, like "
            "elbencho's storage_sweep scaled to a login node: 2048 files per point up to "
            "128 KiB, 256 MiB per point above, one point on disk at a time, every file "
            "fsync'ed, every read cold. Prints the median per size; --dry-run only prints "
            "the plan."
        ),
    )
    parser.add_argument(
        "--directory",
        type=path_option("--directory"),
        required=True,
        metavar="DIR",
        help="where to write (a fresh subdirectory is made and removed)",
    )
    parser.add_argument(
        "--min",
        type=parse_size,
        default=DEFAULT_MIN_BYTES,
        metavar="SIZE",
        help="smallest file size, a power of two (default: 4K)",
    )
    parser.add_argument(
        "--max",
        type=parse_size,
        default=DEFAULT_MAX_BYTES,
        metavar="SIZE",
        help="largest file size, a power of two (default: 64M)",
    )
    parser.add_argument(
        "--repeats",
        type=int_option("--repeats", REPEATS),
        default=3,
        help="runs of the sweep (default: 3)",
    )
    parser.add_argument(
        "--csv", type=path_option("--csv"), metavar="FILE", help="save every repeat as CSV"
    )
    parser.add_argument(
        "--plot",
        type=path_option("--plot"),
        metavar="FILE",
        help="save the plot (.png, or .svg, which needs no fonts on a server)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the sizes, counts and room needed; write nothing",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print the plan (--dry-run), or run it and print the summary table."""
    from iolab.core.tables import to_markdown
    from iolab.storage.sweep import (
        WRITE_FLUSH,
        existing_directory,
        plan,
        plan_text,
        run_sweep,
        summarize_sweep,
    )

    points = plan(args.min, args.max)
    existing_directory(args.directory)
    if args.dry_run:
        print(plan_text(points, args.directory, args.repeats))
        return 0
    for output, option in ((args.csv, "--csv"), (args.plot, "--plot")):
        if output is not None:
            output_file(output, option)
    rows = run_sweep(args.directory, points, args.repeats)
    summary = summarize_sweep(rows)
    if args.csv is not None:
        with atomic_output(args.csv) as partial:
            rows.to_csv(partial, index=False)
    if args.plot is not None:
        from iolab.storage.sweep_plots import plot_sweep  # matplotlib only when a plot is asked for

        ax = plot_sweep(summary, title=f"file-size sweep, {summary['fs_type'].iloc[0]}")
        figure = ax.get_figure(root=True)
        assert figure is not None  # the sweep is drawn on a figure of its own
        with atomic_output(args.plot) as partial:
            figure.savefig(partial, bbox_inches="tight")
    print(
        to_markdown(
            summary[
                [
                    "file_size",
                    "files",
                    "direction",
                    "files_per_s_median",
                    "MiB_per_s_median",
                    "GB_per_s_median",
                    "Gbit_per_s_median",
                    "resident_before_max_pct",
                ]
            ]
        )
    )
    print(
        f"\n{rows['location'].iloc[0]} ({rows['fs_type'].iloc[0]}); writes: {WRITE_FLUSH}; "
        f"medians of {args.repeats} repeats" + (f"; every repeat in {args.csv}" if args.csv else "")
    )
    return 0
