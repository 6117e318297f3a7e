#!/usr/bin/env python3
"""Stage the dataset's archive onto this node's local disk: one step per node, not per task.

    srun --ntasks-per-node=1 python demos/slurm/stage_in.py --archive-dir DATASET \
        --into "$JOB_LOCAL/dataset" --report-dir RESULTS/stage-in

Copies data.tar with its two small descriptions (manifest.json, archive.json) from the
shared place, unpacks it with tar on the local disk, and writes one JSON report per node,
named after the node, to --report-dir (on shared storage, where the batch script can read
it): how many files it opened on the shared place and how many bytes it read there, how
many files it created on the local disk, and how long the copy and the unpacking took.
The counts are what the stage-in pattern saves; the times depend on the node and the day.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

#: What a node takes from the shared place: the archive and what checks it.
STAGED = ("data.tar", "manifest.json", "archive.json")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--archive-dir",
        type=Path,
        required=True,
        help="the dataset directory holding data.tar (shared storage)",
    )
    parser.add_argument(
        "--into",
        type=Path,
        required=True,
        help="an empty or missing directory on this node's local disk",
    )
    parser.add_argument(
        "--report-dir",
        type=Path,
        required=True,
        help="where this node's JSON report goes (shared storage)",
    )
    return parser.parse_args(argv)


def files_under(directory: Path) -> int:
    """Regular files below `directory`: what the stage-in created there."""
    return sum(len(files) for _, _, files in os.walk(directory))


def stage_in(archive_dir: Path, into: Path) -> dict:
    """Copy the archive to `into`, unpack it there, and count what was read and created."""
    missing = [name for name in STAGED if not (archive_dir / name).is_file()]
    if missing:
        raise SystemExit(
            f"error: {archive_dir} lacks {', '.join(missing)}: build the dataset "
            "and its archive first (data_generators/create_archive.py)"
        )
    into.mkdir(parents=True, exist_ok=True)
    if any(into.iterdir()):
        raise SystemExit(f"error: {into} is not empty: stage into a fresh directory")
    start = time.perf_counter()
    for name in STAGED:
        shutil.copyfile(archive_dir / name, into / name)
    copied = time.perf_counter()
    subprocess.run(["tar", "-xf", str(into / "data.tar"), "-C", str(into)], check=True)
    unpacked = time.perf_counter()
    return {
        "node": os.environ.get("SLURMD_NODENAME", socket.gethostname()),
        "hostname": socket.gethostname(),
        "shared_files_opened": len(STAGED),
        "shared_bytes_read": sum((archive_dir / name).stat().st_size for name in STAGED),
        "local_files_created": files_under(into),
        "copy_s": round(copied - start, 3),
        "unpack_s": round(unpacked - copied, 3),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = stage_in(args.archive_dir, args.into)
    except (OSError, subprocess.CalledProcessError) as err:
        print(f"error: staging into {args.into} failed: {err}", file=sys.stderr)
        return 1
    args.report_dir.mkdir(parents=True, exist_ok=True)
    (args.report_dir / f"{report['node']}.json").write_text(json.dumps(report) + "\n")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
