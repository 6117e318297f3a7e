"""`python -m iolab checkpoint`: how long checkpoints block a simulated training loop
(iolab.ml.checkpoint)."""

from __future__ import annotations

import argparse

from iolab.cli.options import add_budget_option
from iolab.core.budget import LIMITS
from iolab.core.options import Bounds, float_option, int_option, text_option
from iolab.ml.checkpoint_options import DEFAULT_MIB, TARGETS_HELP

# iolab.ml.checkpoint (numpy) is imported in main: a refused option or --help starts in a
# fraction of a second.

# The least size (1 MiB) and the least kept (1), and --every (1 to --steps), are checked by
# iolab.ml.checkpoint, in its own sentences.
#: The model state, built in memory and written whole at every checkpoint.
SIZE_MIB = Bounds(
    None,
    256 * 1024,
    "MiB",
    "the state is held in memory while it is written, "
    "and 256 GiB is beyond the memory of most compute nodes; on a login node the "
    f"budget allows {LIMITS['data_mib'].most} MiB",
)
#: Simulated training steps, each a sleep of --step-s.
STEPS = Bounds(
    1,
    1000,
    "steps",
    "each step sleeps --step-s and every --every-th writes a "
    "whole checkpoint again to a disk others share",
)
#: Seconds one simulated step computes (sleeps).
STEP_S = Bounds(
    0, 60, "s", "a step only sleeps; a minute per step is already a long wait between checkpoints"
)
#: Checkpoints kept where the save writes, newest first.
KEEP = Bounds(None, 16, "checkpoints", "every one kept holds --size-mib on the target's disk")


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "checkpoint",
        help="measure how long checkpoints block a (simulated) training loop",
        description=(
            "Run a simulated training loop (each step a sleep) that saves a model state of "
            "--size-mib MiB (float32 arrays, incompressible) every --every steps, atomically "
            "and hashed with sha256, keeping the newest --keep checkpoints. Synchronous: the "
            "save goes straight to --target. With --background it goes to the local "
            "workspace and a thread copies it to --target (verified by sha256) while the "
            "next steps run. Prints how long the loop was blocked; every file is removed "
            "afterwards, also on Ctrl-C."
        ),
        epilog=(
            "Outside a batch job on a compute node the size is capped at "
            f"{LIMITS['data_mib'].most} MiB. Example: python -m iolab checkpoint --target sshfs "
            "--fsync --background"
        ),
    )
    parser.add_argument(
        "--size-mib",
        type=int_option("--size-mib", SIZE_MIB),
        default=DEFAULT_MIB,
        metavar="N",
        help=f"size of the model state in MiB (default: {DEFAULT_MIB})",
    )
    parser.add_argument(
        "--steps", type=int_option("--steps", STEPS), default=6, help="training steps (default: 6)"
    )
    parser.add_argument(
        "--every",
        type=int,
        default=2,
        metavar="M",
        help="checkpoint after every M-th step (default: 2)",
    )
    parser.add_argument(
        "--step-s",
        type=float_option("--step-s", STEP_S),
        default=0.5,
        metavar="S",
        help="seconds one simulated step computes (default: 0.5)",
    )
    parser.add_argument(
        "--target",
        type=text_option("--target", TARGETS_HELP),
        default="local",
        metavar="WHERE",
        help=f"where checkpoints go: {TARGETS_HELP} (default: local)",
    )
    parser.add_argument(
        "--fsync",
        action="store_true",
        help="fsync each file and its directory before the save returns",
    )
    parser.add_argument(
        "--background",
        action="store_true",
        help="save locally, copy to the target in a background thread",
    )
    parser.add_argument(
        "--keep",
        type=int_option("--keep", KEEP),
        default=2,
        metavar="N",
        help="keep the newest N checkpoints where the save writes (default: 2)",
    )
    parser.add_argument(
        "--torch", action="store_true", help="save with torch.save instead of np.save (needs torch)"
    )
    add_budget_option(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from iolab.ml.checkpoint import (
        check_loop,
        checked_size,
        model_state,
        run_strategy,
        summary_frame,
    )

    size_mib = checked_size(args.size_mib, args.compute_node)
    check_loop(args.steps, args.every, args.step_s, args.keep)
    state = model_state(size_mib)
    run = run_strategy(
        state,
        args.target,
        background=args.background,
        fsync=args.fsync,
        steps=args.steps,
        every=args.every,
        step_s=args.step_s,
        keep=args.keep,
        use_torch=args.torch,
    )
    summary = summary_frame([run])
    print(summary.drop(columns=["label"]).T.to_string(header=False, float_format="{:.3f}".format))
    row = summary.iloc[0]
    share = row["blocked_s"] / run.loop_wall_s * 100
    print(
        f"{run.label}: the loop was blocked {row['blocked_s']:.2f} s of "
        f"{run.loop_wall_s:.2f} s ({share:.0f}%) by {row['checkpoints']} checkpoints of "
        f"{row['size_MiB']:g} MiB"
        + (
            f"; {row['copies_verified']} of {row['checkpoints']} background copies verified "
            "by sha256"
            if args.background
            else ""
        )
    )
    return 0 if not args.background or row["copies_verified"] == row["checkpoints"] else 1
