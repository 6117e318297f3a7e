#!/usr/bin/env python3
"""One task of a metadata storm: create, stat and remove many empty files, then report counts.

Why: on a shared (parallel) file system every create, stat and unlink is a request to the
metadata server, which all nodes share. One task doing this is harmless; every task of a
job doing it at the same moment is what slows the file system down for everybody. The job
script demos/slurm/metadata-storm.sbatch starts this on every task with srun; alone it is
one task (rank 0 of 1):

    python demos/slurm/metadata_storm.py --workdir DIR --files 1000

The tasks start together: each creates ready-<rank> in DIR/barrier and waits (bounded) until
SLURM_NTASKS of them exist. Those barrier files, and the task's directory DIR/task-<rank>
(made before and removed after its files), are not in the counts. The files are empty, so
every operation counted is metadata. Prints one JSON line; with --results it also writes it
to RESULTS/task-<rank>.json. The counts are exact; the seconds are a cluster's only where
every node is a machine of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time
from pathlib import Path

from iolab.core.errors import LabError, run_cli
from iolab.core.options import Bounds, int_option, path_option

#: Files each task creates; the job script checks IOLAB_STORM_FILES against the same range.
FILES = Bounds(
    1,
    100_000,
    "files",
    "each task keeps them all in one directory at once, and "
    "100,000 per task is already a storm that other users of the file system notice",
)
#: How long a task waits for the others at the barrier.
BARRIER_S = Bounds(1, 3600, "s", "a task that has not started within an hour is not coming")
#: Seconds between two looks at the barrier directory (each look is a metadata request too).
POLL_S = 0.1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Create, stat and remove many empty files in a directory of this task's "
        "own, after waiting for every task of the Slurm job step; print counts "
        "and times as one JSON line.",
        epilog="Example (one task): python demos/slurm/metadata_storm.py --workdir "
        "$SCRATCH/storm --files 1000. In a job: srun python ... (see "
        "demos/slurm/metadata-storm.sbatch).",
    )
    parser.add_argument(
        "--workdir",
        type=path_option("--workdir"),
        required=True,
        metavar="DIR",
        help="an existing directory on the place to test, "
        "shared by all tasks (task-<rank>/ and barrier/ are made in it)",
    )
    parser.add_argument(
        "--files",
        type=int_option("--files", FILES),
        default=1000,
        metavar="N",
        help=f"files per task, {FILES.text()} (default: 1000)",
    )
    parser.add_argument(
        "--results",
        type=path_option("--results"),
        metavar="DIR",
        help="also write the JSON line to DIR/task-<rank>.json",
    )
    parser.add_argument(
        "--barrier-timeout",
        type=int_option("--barrier-timeout", BARRIER_S),
        default=120,
        metavar="S",
        help="seconds to wait for the other tasks (default: 120: on NFS a "
        "directory listing may be cached for up to a minute)",
    )
    return parser.parse_args(argv)


def task_identity() -> dict[str, object]:
    """Who this task is: Slurm's rank, task count and node, and the host it runs on."""
    boot_id = Path("/proc/sys/kernel/random/boot_id")
    return {
        "rank": int(os.environ.get("SLURM_PROCID", "0")),
        "ntasks": int(os.environ.get("SLURM_NTASKS", "1")),
        "node_index": int(os.environ.get("SLURM_NODEID", "0")),
        "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
        "hostname": socket.gethostname(),
        # one per running kernel: nodes that report the same one share a machine
        "boot_id": boot_id.read_text().strip() if boot_id.exists() else "",
    }


def wait_for_all(barrier: Path, rank: int, ntasks: int, timeout_s: float) -> int:
    """Announce this task (ready-<rank>) and wait until all `ntasks` have; the files seen."""
    barrier.mkdir(exist_ok=True)
    (barrier / f"ready-{rank}").touch()
    deadline = time.monotonic() + timeout_s
    while True:
        ready = sum(1 for name in os.listdir(barrier) if name.startswith("ready-"))
        if ready >= ntasks:
            return ready
        if time.monotonic() > deadline:
            raise LabError(
                f"only {ready} of {ntasks} tasks reached the barrier in {barrier} "
                f"within {timeout_s:g} s: a task did not start, or the directory "
                "is not shared by the nodes"
            )
        time.sleep(POLL_S)


def storm(directory: Path, files: int) -> dict[str, object]:
    """Create `files` empty files in a new `directory`, stat them, remove them and it."""
    directory.mkdir()
    paths = [str(directory / f"f{i:06d}") for i in range(files)]
    counts = {"files_created": 0, "stats": 0, "removes": 0}
    start = time.perf_counter()
    for path in paths:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        counts["files_created"] += 1
    created = time.perf_counter()
    for path in paths:
        os.stat(path)
        counts["stats"] += 1
    statted = time.perf_counter()
    for path in paths:
        os.unlink(path)
        counts["removes"] += 1
    directory.rmdir()
    removed = time.perf_counter()
    return {
        **counts,
        "create_s": round(created - start, 6),
        "stat_s": round(statted - created, 6),
        "remove_s": round(removed - statted, 6),
        "dir_removed": not directory.exists(),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.workdir.is_dir():
        raise LabError(
            f"--workdir {args.workdir} is not a directory; create it first (on the "
            "shared place to test)"
        )
    if args.results is not None and not args.results.is_dir():
        raise LabError(f"--results {args.results} is not a directory; create it first")
    task = task_identity()
    try:
        seen = wait_for_all(
            args.workdir / "barrier", task["rank"], task["ntasks"], args.barrier_timeout
        )
        released = time.time()
        result = storm(args.workdir / f"task-{task['rank']}", args.files)
        line = json.dumps(
            {
                **task,
                "files": args.files,
                "barrier_files": seen,
                "released_at": round(released, 6),
                **result,
            }
        )
        if args.results is not None:
            target = args.results / f"task-{task['rank']}.json"
            partial = target.with_suffix(".part")
            partial.write_text(line + "\n")
            partial.rename(target)  # whole or absent: the job script reads every task's file
    except OSError as err:
        raise LabError(f"task {task['rank']} on {task['node']}: {err}") from None
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    run_cli(main)
