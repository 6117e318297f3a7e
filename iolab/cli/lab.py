"""`python -m iolab lab` (`make lab`): the whole lab on this machine (iolab.pages.lab); in a
class, its results go to the class wall too (iolab.classmode.wall), which only the command
line may join to it: classmode and pages are siblings."""

from __future__ import annotations

import argparse

from iolab.classmode.wall import own_fio_figures, publish
from iolab.core.class_folder import ClassFolder, active_class
from iolab.core.errors import LabError
from iolab.pages.lab import Stage, run_lab


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("lab", help="the whole lab on this machine (make lab)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per reader")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    return run_lab(args.repeats, share=to_the_class)


def to_the_class(stage: Stage) -> None:
    """In a class, put what `make lab` just measured on the wall; alone, nothing."""
    joined = active_class()
    if joined is None:
        return
    if stage == "notebooks":
        print(f"  fio figures for the class wall: {len(own_fio_figures())}", flush=True)
    to_the_wall(joined)


def to_the_wall(joined: ClassFolder) -> None:
    """Publish this learner's results on the class wall, or say why not and go on: the lab's
    own results do not depend on the wall."""
    try:
        print(f"  on the class wall: {publish(joined).name} in {joined.wall}", flush=True)
    except LabError as err:
        print(f"  not on the class wall: {err}", flush=True)
