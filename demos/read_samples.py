#!/usr/bin/env python3
"""Read a dataset's samples as a training loop would: one file each, or from webdataset shards.

Prints one JSON line: samples, payload bytes, the mean value read (for the activity dataset
the mean activity level, which must equal the manifest's expected mean; for the image-like
dataset the mean label), wall and CPU seconds, samples/s and MiB/s. Run it under strace (or
`python -m iolab syscalls --data DIR -- ...`) to count the opens per sample of each layout.

    python demos/read_samples.py --source files --data workspace/dataset
    python demos/read_samples.py --source shards --data workspace/dataset --workers 2
"""

from __future__ import annotations

import argparse
import json

from iolab.core.errors import quiet_interrupts, run_cli

quiet_interrupts()  # first: Ctrl-C during a slow import (webdataset, torch) is one sentence

from iolab.core.dataset import MAX_FILES  # noqa: E402
from iolab.core.loader import SOURCES, check_full_read, read_throughput  # noqa: E402
from iolab.core.options import BATCH_SAMPLES, Bounds, int_option, path_option, process_bounds  # noqa: E402

#: Samples read before stopping; a limit beyond the dataset reads all of it.
LIMIT = Bounds(
    1,
    MAX_FILES,
    "samples",
    f"no dataset of the lab holds more than {MAX_FILES:,} "
    "samples, so a larger limit reads the same",
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--source",
        choices=SOURCES,
        required=True,
        help="files: DIR/data or DIR/files, one open per sample; shards: DIR/shards",
    )
    parser.add_argument(
        "--data", type=path_option("--data"), required=True, help="dataset directory"
    )
    parser.add_argument(
        "--workers",
        type=int_option("--workers", process_bounds(0, "workers")),
        help="PyTorch DataLoader workers (0 = DataLoader in this process); "
        "omit to read without a DataLoader",
    )
    parser.add_argument(
        "--batch-size",
        type=int_option("--batch-size", BATCH_SAMPLES),
        default=32,
        help="samples per batch (default 32)",
    )
    parser.add_argument(
        "--limit", type=int_option("--limit", LIMIT), help="stop after this many samples"
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    result = read_throughput(args.data, args.source, args.workers, args.batch_size, args.limit)
    if args.limit is None:  # a full read is checked against the manifest or index: no I/O on data
        check_full_read(args.data, args.source, result)
    print(json.dumps(result.row()))
    return 0


if __name__ == "__main__":
    run_cli(main)
