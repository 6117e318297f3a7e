"""`python -m iolab fio [--profile P] [--directory DIR | --location NAME]`: bandwidth, IOPS and
latency of a location with fio, gently on a login node (iolab.storage.fio)."""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from iolab.cli.options import add_budget_option
from iolab.core.atomic import atomic_output
from iolab.core.budget import LIMITS
from iolab.core.cluster import JOB_VARIABLES
from iolab.core.errors import LabError
from iolab.core.lab_dirs import ensure_writable_dir, results_dir
from iolab.core.options import Bounds, float_option, int_option, path_option, text_option
from iolab.core.user_paths import output_file
from iolab.core.workspace import WorkspaceEntry, public_text
from iolab.storage.fio_profiles import PROFILES
from iolab.storage.locations import discover_locations, user_dir

# heavy imports in main: a refused option or --help starts in a fraction of a second

#: How much larger or smaller every file of a profile may be made.
SIZE_SCALE = Bounds(
    0,
    1000,
    "",
    "at 600 the evaluation profile is already the NERC "
    "evaluation's 300 GB, beyond 1000 no profile fits a compute node's disk, and "
    f"on a login node the files must fit {LIMITS['data_mib'].most} MiB besides",
    above=True,
)
#: Seconds per fio job.
RUNTIME_S = Bounds(
    1,
    3600,
    "s",
    "twice the NERC evaluation's 30 minutes per job; on a login "
    f"node the budget allows {LIMITS['job_s'].most} s per job",
)


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fio",
        help="bandwidth, IOPS and latency of a location with fio, gently on a login node",
        description=(
            "Run a named fio profile in a fresh directory, print one row per job and direction "
            "(bandwidth, IOPS, mean and percentile latency, and the latency Little's law "
            "predicts from the queue), save fio's JSON, and remove every file fio wrote, also "
            "on Ctrl-C. Profiles: "
            + "; ".join(f"{p.name}: {p.purpose}" for p in PROFILES.values())
            + "."
        ),
        epilog=(
            f"Outside a batch job on a compute node ({' or '.join(JOB_VARIABLES)} set) a run "
            f"must fit a shared login node: at most {LIMITS['data_mib'].most} MiB on disk, "
            f"{LIMITS['job_s'].most} s per job and {LIMITS['processes'].most} processes per "
            "job; it runs at idle I/O priority. Running fio by hand, beware its stale files: "
            "fio reuses an existing work file of the right size without writing it again, so "
            "a write test of an old file, or a read of a file still in the page cache, "
            "measures something else. Use a fresh directory per run (as this command does) "
            "or unlink=1."
        ),
    )
    parser.add_argument(
        "--profile",
        choices=list(PROFILES),
        default="login",
        help="which jobs to run (default: login)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--directory",
        type=path_option("--directory"),
        metavar="DIR",
        help="run in a new subdirectory of DIR (default: the workspace's tmp)",
    )
    where.add_argument(
        "--location",
        metavar="NAME",
        type=text_option("--location", "a name `python -m iolab locations` lists"),
        help="run in a location of `python -m iolab locations`, e.g. tmp or shm",
    )
    parser.add_argument(
        "--json-out",
        type=path_option("--json-out"),
        metavar="FILE",
        help="where to save fio's JSON (default: workspace/lab/fio/)",
    )
    parser.add_argument(
        "--csv", type=path_option("--csv"), metavar="FILE", help="also save the table as CSV"
    )
    parser.add_argument(
        "--size-scale",
        type=float_option("--size-scale", SIZE_SCALE),
        default=1.0,
        metavar="F",
        help="multiply every file size by F (default: 1)",
    )
    parser.add_argument(
        "--runtime",
        type=int_option("--runtime", RUNTIME_S),
        metavar="S",
        help="seconds per job: time-based jobs run this long, others stop by then",
    )
    add_budget_option(parser)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the fio command, the jobs and the disk footprint; run nothing",
    )
    parser.set_defaults(func=main)


def _target(args: argparse.Namespace, create: bool) -> Path:
    """The directory a run works in: --directory, --location's per-user dir, or workspace/tmp."""
    if args.location is not None:
        locations = {loc.name: loc for loc in discover_locations(probe=False)}
        if args.location not in locations:
            raise LabError(
                f"there is no location {args.location!r} here; choose one of "
                f"{', '.join(locations)} (see `python -m iolab locations`)"
            )
        location = locations[args.location]
        return user_dir(location) if create else location.path
    if args.directory is not None:
        return args.directory
    return ensure_writable_dir(WorkspaceEntry.TMP.path()) if create else WorkspaceEntry.TMP.path()


def main(args: argparse.Namespace) -> int:
    """Run a profile (or show it with --dry-run) and print the tidy table."""
    from iolab.core.tables import to_markdown
    from iolab.storage.fio import (
        FIO_MISSING,
        MIB,
        checked_profile,
        dry_run,
        footprint,
        job_duration_s,
        run_profile,
        scaled_profile,
    )
    from iolab.storage.fio_parse import summary_frame

    profile = scaled_profile(args.profile, args.size_scale, args.runtime)
    if args.dry_run:
        print(dry_run(profile, _target(args, create=False), args.compute_node))
        return 0
    disk_bytes, _ = footprint(checked_profile(profile, args.compute_node))  # refuse before writing
    if shutil.which("fio") is None:
        raise LabError(FIO_MISSING)
    _target(args, create=False)  # an unknown --location, too, before the results folder is made
    # where the results go is checked before anything runs: a result that cannot be saved
    # after minutes of measuring is lost, and a refusal is then the only line printed
    if args.csv is not None:
        output_file(args.csv, "--csv")
    json_out = args.json_out or results_dir() / "fio" / (
        f"{profile.name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    ensure_writable_dir(json_out.parent, option="--json-out" if args.json_out else None)
    output_file(json_out, "--json-out")
    target = _target(args, create=True)
    seconds = sum(job_duration_s(profile.options(job)) for job in profile.jobs)
    print(
        f"fio profile {profile.name}: {len(profile.jobs)} jobs, at most {seconds:.0f} s and "
        f"{disk_bytes / MIB:.0f} MiB, in {public_text(target)}",
        flush=True,
    )
    run = run_profile(profile, target, json_out=json_out, compute_node=args.compute_node)
    print(to_markdown(summary_frame(run.frame)))
    for note in run.notes:
        print(f"note: {note}")
    print(f"\nfio's JSON (json+): {json_out}")
    if args.csv is not None:
        with atomic_output(args.csv) as partial:
            run.frame.to_csv(partial, index=False)
        print(f"table as CSV: {args.csv}")
    return 0
