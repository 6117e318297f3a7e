"""`python -m iolab node-runs [--results DIR] [--site]`: the Slurm jobs' results per node and
in total (iolab.hpc.node_runs); with --site, into the site `make lab` built (iolab.pages)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from iolab.core.errors import LabError
from iolab.core.options import path_option
from iolab.core.workspace import WorkspaceEntry

if TYPE_CHECKING:
    import pandas as pd

    from iolab.hpc.node_runs import NodeRun

# heavy imports (pandas, the pages) are in the functions that use them: a refused option or
# --help starts in a fraction of a second.


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "node-runs",
        help="the Slurm jobs' results (demos/slurm/) per node and in total; --site puts "
        "them into your site",
        description=(
            "List the completed runs of the job scripts in demos/slurm/ that were copied "
            "back to the workspace (slurm-results/<jobid>/), each as per-node tables with a "
            "total row: staging in once per node, MPI-IO aggregators per node, the metadata "
            "storm, fio on every node. Times and rates are left out where the nodes shared "
            "one machine. With --site, the page 'Your jobs across nodes' is executed again "
            "and the site of your last `make lab` rebuilt with it."
        ),
    )
    parser.add_argument(
        "--results",
        type=path_option("--results"),
        default=None,
        metavar="DIR",
        help="where the jobs copied their results (default: the workspace's slurm-results/)",
    )
    parser.add_argument(
        "--site", action="store_true", help="also rebuild the site of `make lab` with these runs"
    )
    parser.set_defaults(func=main)


def tables_of(run: NodeRun) -> list[tuple[str, pd.DataFrame]]:
    """The tables one run shows, with their titles."""
    from iolab.hpc.node_runs import fio_tables, mpiio_table, stage_in_table, storm_table

    if run.script == "small-files-local":
        return [("staged once per node", stage_in_table(run))]
    if run.script == "mpiio":
        return [("ranks, hints and aggregators per mode", mpiio_table(run))]
    if run.script == "metadata-storm":
        return [("created, statted and removed at once", storm_table(run))]
    if run.script == "fio-node":
        per_node, total = fio_tables(run)
        return [("fio per node", per_node), ("fio summed over nodes", total)]
    return []


def main(args: argparse.Namespace) -> int:
    from iolab.core.tables import to_markdown
    from iolab.hpc.node_runs import completed_runs
    from iolab.pages.site import show_own_jobs

    root = args.results or WorkspaceEntry.SLURM_RESULTS.path()
    runs = completed_runs(root)
    if not runs:
        print(
            f"No completed job in {root}: submit one from the checkout's root, e.g. "
            "`sbatch --nodes=2 demos/slurm/mpiio.sbatch` (lesson 08 lists them)."
        )
    for run in runs:
        print(f"\n{run.script}: {run.label}")
        if run.shares_one_machine:
            print("  (its nodes share one machine: times and rates left out)")
        for title, table in tables_of(run):
            print(f"\n{title}\n{to_markdown(table)}")
    if args.site:
        if root != WorkspaceEntry.SLURM_RESULTS.path():  # the page reads that folder only
            raise LabError("--site shows the workspace's slurm-results/ only: leave out --results")
        print(f"\nSite: {show_own_jobs()}")
    return 0
