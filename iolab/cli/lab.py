"""`python -m iolab lab` (`make lab`): the whole lab on this machine (iolab.pages.lab); in a
class, its results go to the class wall too (iolab.classmode.wall), which only the command
line may join to it: classmode and pages are siblings."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from iolab.core.class_folder import ClassFolder, active_class
from iolab.core.errors import LabError
from iolab.core.options import Bounds, int_option
from iolab.core.workspace import lesson_notebooks

if TYPE_CHECKING:
    from iolab.pages.lab import Stage

# the pages and the class wall (pandas, numpy) are imported where they are used: a refused
# option or --help starts in a fraction of a second.


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("lab", help="the whole lab on this machine (make lab)")
    parser.add_argument(
        "--repeats",
        type=int_option("--repeats", REPEATS),
        default=5,
        help="timed repeats per reader",
    )
    parser.add_argument(
        "--lessons",
        type=lessons_option,
        metavar="NN,NN",
        help="only these lessons' notebooks, e.g. 01,02 (a lab in stages: the notebooks of "
        "earlier stages stay in the site); the readers are timed only with lesson 02",
    )
    parser.set_defaults(func=main)


#: Timed repeats per reader: a median needs three; more than 50 only keeps a login node busy.
REPEATS = Bounds(1, 50, "repeats", "each repeat reads the whole dataset twice, warm and cold")


def lessons_option(text: str) -> frozenset[str]:
    """`--lessons 1,02`: the lessons' two-digit numbers, each one that has a notebook."""
    have = sorted({path.name[:2] for path in lesson_notebooks()})
    chosen = [part.strip().zfill(2) for part in text.split(",") if part.strip()]
    unknown = [number for number in chosen if number not in have]
    if not chosen or unknown:
        raise LabError(
            f"--lessons {text!r} names no lesson with a notebook; give numbers separated by "
            f"commas, from {', '.join(have)}"
        )
    return frozenset(chosen)


def main(args: argparse.Namespace) -> int:
    from iolab.pages.lab import run_lab

    return run_lab(args.repeats, share=to_the_class, lessons=args.lessons)


def to_the_class(stage: Stage) -> None:
    """In a class, put what `make lab` just measured on the wall; alone, nothing."""
    joined = active_class()
    if joined is None:
        return
    if stage == "notebooks":
        from iolab.classmode.wall import own_fio_figures

        print(f"  fio figures for the class wall: {len(own_fio_figures())}", flush=True)
    to_the_wall(joined)


def to_the_wall(joined: ClassFolder) -> None:
    """Publish this learner's results on the class wall, or say why not and go on: the lab's
    own results do not depend on the wall."""
    from iolab.classmode.wall import publish

    try:
        print(f"  on the class wall: {publish(joined).name} in {joined.wall}", flush=True)
    except LabError as err:
        print(f"  not on the class wall: {err}", flush=True)
