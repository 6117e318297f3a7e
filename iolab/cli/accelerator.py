"""`python -m iolab accelerator [--data DIR] [--source files|shards] ...`: feed a simulated
accelerator from a dataset and report its utilization, MLPerf Storage's rule
(iolab.ml.accelerator)."""

from __future__ import annotations

import argparse
from pathlib import Path

from iolab.cli.options import add_budget_option, add_data_option
from iolab.core import budget
from iolab.core.dataset import MAX_FILES
from iolab.core.loader import batches
from iolab.core.options import BATCH_SAMPLES, Bounds, float_option, int_option, process_bounds
from iolab.core.samples import Dataset
from iolab.core.shards import require_shards
from iolab.core.workspace import WorkspaceEntry
from iolab.ml.accelerator_options import SKIP_FIRST

# iolab.ml.accelerator and the tables (pandas) are imported where they are used: a refused
# option or --help starts in a fraction of a second.

#: Milliseconds one batch "computes" (sleeps).
COMPUTE_MS = Bounds(
    0,
    10_000,
    "ms",
    "at 10 s per batch any storage keeps the accelerator busy, and longer only keeps the run going",
)
#: Batches per run: the first is warm-up and excluded.
STEPS = Bounds(
    SKIP_FIRST + 1,
    MAX_FILES,
    "batches",
    "the first batch is warm-up and not "
    f"counted, and no dataset of the lab holds more than {MAX_FILES:,} samples to "
    "feed them",
)


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "accelerator",
        help="feed a simulated accelerator from a dataset and report its utilization (AU)",
        description=(
            "Run MLPerf Storage's rule on a dataset of the lab: each batch 'computes' for a "
            "set time (a sleep), AU = compute / (compute + waiting for data), first step "
            "excluded; cold runs evict the data first (no root needed), warm runs read it first."
        ),
        epilog="Build the default dataset with `python data_generators/make_images.py`.",
    )
    add_data_option(
        parser,
        "dataset directory with files/ (or data/) and shards/ (default: <workspace>/images)",
        default=WorkspaceEntry.IMAGES.path(),
    )
    parser.add_argument(
        "--source",
        choices=("files", "shards"),
        default="shards",
        help="read one file per sample, or webdataset shards (default)",
    )
    parser.add_argument(
        "--workers",
        type=int_option("--workers", process_bounds(0, "workers")),
        nargs="+",
        default=[None],
        metavar="N",
        help="DataLoader worker counts to try (needs PyTorch); omit to read without a DataLoader",
    )
    parser.add_argument(
        "--compute-ms",
        type=float_option("--compute-ms", COMPUTE_MS),
        nargs="+",
        default=[4, 16, 64],
        metavar="MS",
        help="compute times per batch to try, in ms (default: 4 16 64)",
    )
    parser.add_argument(
        "--batch-size",
        type=int_option("--batch-size", BATCH_SAMPLES),
        default=8,
        help="samples per batch (default 8)",
    )
    parser.add_argument(
        "--steps",
        type=int_option("--steps", STEPS),
        default=16,
        help="batches per run (default 16)",
    )
    parser.add_argument(
        "--cache",
        choices=("cold", "warm", "both"),
        default="both",
        help="cache state before each run (default: both)",
    )
    add_budget_option(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Check the dataset, run the sweep, print the AU table and how many runs passed."""
    from iolab.ml.accelerator import CACHE_STATES, sweep_images

    workers = max((n for n in args.workers if n is not None), default=0)
    budget.check(
        f"a DataLoader with {workers} workers",
        processes=workers,
        fix="use fewer --workers",
        compute_node=args.compute_node,
    )
    states = CACHE_STATES if args.cache == "both" else (args.cache,)
    if (
        "cold" in states
        and Path(args.dataset_dir).resolve() == WorkspaceEntry.IMAGES.path().resolve()
    ):
        # the workspace's images, in a class the class's own: cold runs read a private copy
        with sweep_images(args.dataset_dir, args.steps * args.batch_size) as images:
            return _run(args, images, states)
    return _run(args, args.dataset_dir, states)


def _run(args: argparse.Namespace, dataset_dir: Path, states: tuple[str, ...]) -> int:
    """The sweep on `dataset_dir`, its AU table and how many runs passed."""
    from iolab.core.tables import to_markdown
    from iolab.ml.accelerator import PASS_AU_PCT, source_dir, sweep

    read_dir = source_dir(dataset_dir, args.source)
    # Every sample's sha256 against the index or manifest, before the first (cold) run
    # evicts them: a run reads only --steps batches, so damage would otherwise go unnoticed.
    if args.source == "shards":
        require_shards(read_dir, verify=True)
    else:
        Dataset.at(dataset_dir).require_intact_files()
    frame = sweep(
        lambda w: batches(dataset_dir, args.source, w, args.batch_size),
        read_dir,
        args.compute_ms,
        args.workers,
        args.steps,
        source=args.source,
        location=str(dataset_dir),
        cache_states=states,
    )
    print(
        to_markdown(
            frame[
                [
                    "source",
                    "cache_state",
                    "workers",
                    "compute_ms",
                    "resident_before_pct",
                    "au_pct",
                    "samples_per_s",
                    "MBps",
                ]
            ],
            ".1f",
        )
    )
    passed = (frame["au_pct"] >= PASS_AU_PCT).sum()
    print(f"{passed} of {len(frame)} runs reached MLPerf's {PASS_AU_PCT:.0f}% pass line")
    return 0
