"""`python -m iolab answer NN [KEY VALUE]`: is my answer to a lesson's exercise right?

Without an answer it lists the lesson's checkable exercises and judges what the learner's
own run measured for them; with one it judges the answer. In a class the outcome also goes
to the learner's file on the class wall (iolab.classmode.wall).
"""

from __future__ import annotations

import argparse
import sys
import time

from iolab.core.errors import LabError


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "answer",
        help="check your answer to a lesson's exercise (and, in a class, show it on the wall)",
        description="Check an answer to one of a lesson's exercises that has one right "
        "answer (a count, a size in bytes, a time from given figures). Without "
        "KEY, list the lesson's checkable exercises and judge your own run's "
        "measurements.",
    )
    parser.add_argument("lesson", metavar="NN", help="the lesson's number, e.g. 02")
    parser.add_argument("key", metavar="KEY", nargs="?", help="the exercise (listed without it)")
    parser.add_argument(
        "value",
        metavar="VALUE",
        nargs="?",
        help="your answer, a number in the unit listed (7485440 or 7,485,440), or with its "
        "unit (7.14 MiB, 3650 ms)",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from iolab.classmode.exercises import EXERCISES, given_value, lesson_exercises, shown
    from iolab.classmode.wall import publish
    from iolab.core.class_folder import active_class

    exercises = lesson_exercises(args.lesson)
    if not exercises:
        lessons = ", ".join(sorted({exercise.lesson for exercise in EXERCISES}))
        raise LabError(
            f"lesson {args.lesson} has no exercise with one right answer; these "
            f"lessons have some: {lessons}"
        )
    checks = {}
    if args.key is None:
        for exercise in exercises:
            print(f"{exercise.key}: {exercise.title} -- give the {exercise.asks} ({exercise.unit})")
            if exercise.measured is not None:
                measured = exercise.measured()
                if measured is None:
                    print("  your run: not measured yet (`make lab` measures it)")
                    continue
                right, _ = exercise.judge(measured)
                print(
                    f"  your run measured {shown(measured)} {exercise.unit}: "
                    f"{'as it must be' if right else 'not what it must be: rerun make lab'}"
                )
                checks[f"{exercise.lesson}-{exercise.key}-measured"] = {
                    "right": right,
                    "at": time.strftime("%H:%M:%S"),
                }
        code = 0
    else:
        chosen = {exercise.key: exercise for exercise in exercises}
        if args.key not in chosen:
            raise LabError(
                f"lesson {args.lesson.zfill(2)} has no checkable exercise "
                f"{args.key!r}; choose one of: {', '.join(chosen)}"
            )
        if args.value is None:
            raise LabError(
                f"give your answer after the exercise: `python -m iolab answer "
                f"{args.lesson} {args.key} NUMBER` ({chosen[args.key].unit})"
            )
        exercise = chosen[args.key]
        right, sentence = exercise.judge(given_value(args.value, exercise.unit))
        print(sentence)
        checks[f"{chosen[args.key].lesson}-{args.key}"] = {
            "right": right,
            "at": time.strftime("%H:%M:%S"),
        }
        code = 0 if right else 1
    joined = active_class()
    if joined is not None and checks:
        try:
            print(f"(on the class wall: {publish(joined, checks).name})")
        except LabError as err:  # the answer stands; the wall is the instructor's to fix
            print(f"(not on the class wall: {err})", file=sys.stderr)
    return code
