"""`python -m iolab mpiio [--ranks N] [--no-trace]`: MPI-IO's ways of writing one interleaved
pattern, verified byte for byte and counted by strace (iolab.hpc.mpiio)."""

from __future__ import annotations

import argparse

from iolab.cli.options import add_budget_option
from iolab.core import budget
from iolab.core.atomic import atomic_output
from iolab.core.errors import LabError
from iolab.core.options import Bounds, int_option, path_option
from iolab.core.user_paths import output_file

# iolab.hpc.mpiio and the tables (numpy, pandas) are imported in main: a refused option or
# --help starts in a fraction of a second.
KIB, MIB = 1024, 1024**2

#: MPI ranks started on this node, iolab.hpc.mpiio's own range.
RANKS = Bounds(
    1,
    64,
    "ranks",
    "ranks on one node beyond 64 only take turns on its cores; on a "
    f"login node the budget allows {budget.LIMITS['processes'].most}",
)
#: Bytes per block, one request of the interleaved pattern (a multiple of 8, checked there).
BLOCK_BYTES = Bounds(
    8,
    64 * MIB,
    "bytes",
    "blocks far above ROMIO's 16 MiB collective buffer "
    "are no longer the small interleaved requests the comparison is about",
)
#: Blocks each rank writes.
BLOCKS_PER_RANK = Bounds(
    1,
    2**20,
    "blocks",
    "a rank builds all its blocks in memory for its one "
    "write call: 2^20 blocks of 4 KiB are 4 GiB per rank; on a login node "
    f"all ranks' blocks must fit {budget.LIMITS['data_mib'].most} MiB",
)


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "mpiio",
        help="MPI-IO: file per process vs shared file, independent vs collective, counted",
        description=(
            "Run demos/mpiio/mpiio_demo.py with mpiexec for each way of writing interleaved "
            "blocks (file per process; one shared file written independently, with and "
            "without data sieving; collectively with 1 and 2 aggregators), verify every byte, "
            "and print the system calls on the data files (strace) and the untraced timings. "
            "Files go to a workspace scratch directory that is removed afterwards. Every rank "
            "runs on this node, also inside a Slurm job (for several nodes, see "
            "demos/slurm/mpiio.sbatch)."
        ),
        epilog="Needs MPICH and mpi4py (`pip install mpich mpi4py`, no root). Counts are "
        "deterministic; MiB/s on a shared machine are not.",
    )
    parser.add_argument(
        "--ranks", type=int_option("--ranks", RANKS), default=4, help="MPI ranks (default: 4)"
    )
    parser.add_argument(
        "--block-size",
        type=int_option("--block-size", BLOCK_BYTES),
        default=4 * KIB,
        metavar="BYTES",
        help="bytes per block (default: 4096)",
    )
    parser.add_argument(
        "--blocks-per-rank",
        type=int_option("--blocks-per-rank", BLOCKS_PER_RANK),
        default=256,
        metavar="N",
        help="blocks each rank writes (default: 256, 1 MiB per rank)",
    )
    parser.add_argument(
        "--no-trace",
        action="store_true",
        help="skip the strace runs (only timings and verification)",
    )
    parser.add_argument(
        "--csv",
        type=path_option("--csv"),
        metavar="FILE",
        help="also save the syscall table as CSV",
    )
    add_budget_option(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run every comparison, print the syscall table (unless --no-trace) and the timings."""
    from iolab.core.tables import to_markdown
    from iolab.hpc.mpiio import compare_modes, syscall_frame, timing_frame

    total_mib = args.ranks * args.block_size * args.blocks_per_rank / MIB
    budget.check(
        f"an MPI-IO comparison of {args.ranks} ranks writing {total_mib:.0f} MiB",
        processes=args.ranks,
        data_mib=total_mib,
        fix="use fewer --ranks, --blocks-per-rank or a smaller --block-size",
        compute_node=args.compute_node,
    )
    if args.csv:
        output_file(args.csv, "--csv")  # before the runs: a result that cannot be saved is lost
        if args.no_trace:
            raise LabError(
                "--csv saves the system-call table, which --no-trace skips; drop one of the two"
            )
    timed, traced = compare_modes(
        args.ranks, args.block_size, args.blocks_per_rank, trace=not args.no_trace
    )
    total = timed[0].total_bytes
    print(
        f"{args.ranks} ranks, {total} bytes in blocks of {args.block_size} bytes: every run "
        "verified byte for byte"
    )
    if traced:
        table = syscall_frame(traced)
        print("\nSystem calls on the data files (strace -f; deterministic):")
        print(to_markdown(table.drop(columns=["aggregators_reported"])))
        if args.csv:
            with atomic_output(args.csv) as partial:
                table.to_csv(partial, index=False)
    print("\nUntraced timings (noise on a shared machine; do not compare closely):")
    print(to_markdown(timing_frame(timed).drop(columns=["verified"]), floatfmt=".3g"))
    return 0
