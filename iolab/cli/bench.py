"""`make bench`: how fast this machine generates the data and reads it, against the raw floor.

The floor is the time to move the same bytes with no parsing at all: `cat` of the archive,
and `cat` of all 7300 files. The gap between a reader's own timer and its floor is what the
reader itself costs (Python, tar parsing, pandas); the floor is what the storage costs.
Starting Python and importing pandas is timed too: every reader process pays it once.

With `--classic DIR` (`make bench CLASSIC=DIR`), a checkout of the classic demo's repository,
its readers run unchanged beside the lab's on the same dataset, taking turns
(iolab.measure.classic): the lab/classic ratios of the readers' own timers and of whole
processes, with their spread, show how much of what the lab reports is its own Python.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from iolab.core.atomic import atomic_output
from iolab.core.builder import archive_dataset, generate_dataset
from iolab.core.dataset import ARCHIVE_NAME, DATA_DIR
from iolab.core.lab_dirs import remove_tree, results_dir, scratch_dir
from iolab.core.options import Bounds, int_option, path_option

if TYPE_CHECKING:
    import pandas as pd

# pandas and iolab.measure are imported in the functions that use them: a refused option or
# --help starts in a fraction of a second.

#: What `--classic` writes beside bench.csv: every run, and the ratios with the machine.
CLASSIC_RUNS, CLASSIC_RECORD = "bench-classic-runs.csv", "bench-classic.json"

#: Timed repeats of every reader and floor.
REPEATS = Bounds(
    1,
    20,
    "repeats",
    "each repeat runs every reader over the 7300-file dataset "
    "and every raw-read floor again, and a median settles within a few",
)


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="this machine's timings against the raw floor")
    parser.add_argument(
        "--repeats",
        type=int_option("--repeats", REPEATS),
        default=5,
        help="timed repeats per reader (default: 5)",
    )
    parser.add_argument(
        "--classic",
        type=path_option("--classic"),
        metavar="DIR",
        help="a checkout of the classic demo (coderefinery/ttt4hpc-io-examples): "
        "run its readers unchanged beside the lab's, taking turns",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    return run_bench(args.repeats, args.classic)


def timed(build_step: Callable[[Path], None], dataset_dir: Path) -> float:
    """Wall seconds of one build step: its generator script run to completion, start-up included."""
    start = time.perf_counter()
    build_step(dataset_dir)
    return time.perf_counter() - start


def floor_commands(dataset_dir: Path) -> dict[str, list[str]]:
    """Raw reads of the same bytes: the archive in one stream, and every small file."""
    return {
        "cat data.tar (floor for archive readers)": ["cat", str(dataset_dir / ARCHIVE_NAME)],
        "cat every file (floor for per-file readers)": [
            "sh",
            "-c",
            'find "$1" -type f -name "*.csv" -print0 | xargs -0 cat',
            "sh",
            str(dataset_dir / DATA_DIR),
        ],
        "python -c 'import pandas' (start-up in every reader)": [
            sys.executable,
            "-c",
            "import pandas",
        ],
    }


def checkout_commit(checkout: Path) -> str | None:
    """The commit a git checkout is at, or None (not a git checkout, or no git)."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def run_bench(repeats: int = 5, classic: Path | None = None) -> int:
    """Print and save the benchmark table for this machine (and the classic comparison)."""
    import pandas as pd

    from iolab.core.manifest import load_manifest
    from iolab.core.tables import to_markdown
    from iolab.measure.classic import classic_scripts, stage, take_turns, turns_frame
    from iolab.measure.context import machine_context
    from iolab.measure.readers import time_readers, timing_frame
    from iolab.measure.timing import summarize, time_command

    scripts = classic_scripts(classic) if classic is not None else None  # before any work
    dataset_dir = scratch_dir("bench") / "dataset"
    try:
        generate_s = timed(generate_dataset, dataset_dir)
        archive_s = timed(archive_dataset, dataset_dir)
        readers = time_readers(dataset_dir, repeats=repeats)
        floors = [
            time_command(cmd, repeats=repeats, warmup=1, label=label, location=dataset_dir)
            for label, cmd in floor_commands(dataset_dir).items()
        ]
        context = machine_context(dataset_dir)
        turns = None
        if scripts is not None:
            print(
                f"Taking turns with the classic readers of {classic} ({repeats} rounds)...",
                file=sys.stderr,
            )
            workdir = stage(dataset_dir, dataset_dir.parent / "classic")
            turns = turns_frame(
                take_turns(
                    dataset_dir,
                    scripts,
                    workdir,
                    load_manifest(dataset_dir)["expected_mean"],
                    repeats,
                )
            )
    finally:
        remove_tree(dataset_dir.parent)
    table = pd.concat(
        [timing_frame(readers), summarize(floors).rename(columns={"label": "reader"})],
        ignore_index=True,
    )
    archive_floor, files_floor = floors[0].wall_median_s, floors[1].wall_median_s
    table["floor_s"] = [
        files_floor if m.label.startswith("read_files") else archive_floor for m in readers
    ] + [None] * len(floors)
    table["in_reader_x_floor"] = table["in_reader_median_s"] / table["floor_s"]
    setup = pd.DataFrame(
        [
            {"step": "generate 7300 files", "wall_s": generate_s},
            {"step": "create data.tar", "wall_s": archive_s},
        ]
    )
    print(
        f"Machine: {context.get('cpu_model')}, {context.get('cpu_count')} CPUs, kernel "
        f"{context.get('kernel')}, file system {context.get('location_fs_type')} "
        "(warm page cache)\n"
    )
    print(to_markdown(setup))
    print()
    print(
        to_markdown(
            table[
                [
                    "reader",
                    "repeats",
                    "wall_median_s",
                    "wall_min_s",
                    "wall_max_s",
                    "cpu_median_s",
                    "in_reader_median_s",
                    "floor_s",
                    "in_reader_x_floor",
                ]
            ]
        )
    )
    print(
        "\nwall_* and cpu_* time the whole process (start-up included); in_reader_* is the "
        "reader's own timer around reading and parsing, compared with the raw-read floor."
    )
    results = results_dir()
    with atomic_output(results / "bench.csv") as partial:
        table.to_csv(partial, index=False)
    print(f"\nSaved: {results / 'bench.csv'}")
    if turns is not None and classic is not None:
        report_classic(turns, classic, context, table, results)
    return 0


def report_classic(
    turns: pd.DataFrame, classic: Path, context: dict, table: pd.DataFrame, results: Path
) -> None:
    """Print the lab/classic ratios and save every run, the ratios and a plot."""
    from iolab.core.tables import to_markdown
    from iolab.measure.classic import REPOSITORY, ratio_table
    from iolab.measure.plots import classic_bars

    ratios = ratio_table(turns)
    print(
        f"\nThe lab's readers against the classic demo's ({REPOSITORY}), taking turns on the "
        "same dataset:\n"
    )
    print(to_markdown(ratios.round(3)))
    print(
        "\nown_*: each reader's own timer; wall_*: the whole process. A ratio is lab/classic "
        "per round; its median, smallest and largest are shown."
    )
    floors = table.set_index("reader")["wall_median_s"]
    record = {
        "recorded_on": datetime.date.today().isoformat(),
        "machine": {
            key: context.get(key)
            for key in ("cpu_model", "cpu_count", "kernel", "location_fs_type", "python")
        },
        "classic_repository": REPOSITORY,
        "classic_commit": checkout_commit(classic),
        "floors_wall_median_s": {
            label: float(floors[label])
            for label in floors.index
            if label.startswith(("cat ", "python -c"))
        },
        "pairs": ratios.to_dict(orient="records"),
    }
    with atomic_output(results / CLASSIC_RUNS) as partial:
        turns.to_csv(partial, index=False)
    with atomic_output(results / CLASSIC_RECORD) as partial:
        partial.write_text(json.dumps(record, indent=1) + "\n")
    figure = classic_bars(ratios, record["floors_wall_median_s"]).get_figure(root=True)
    assert figure is not None  # the bars are drawn on a figure of their own
    figure.savefig(results / "bench-classic.png", dpi=120, bbox_inches="tight")
    print(
        f"Saved: {results / CLASSIC_RUNS}, {results / CLASSIC_RECORD}, "
        f"{results / 'bench-classic.png'}"
    )
