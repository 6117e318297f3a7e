"""`python -m iolab class check --learners N [--class-dir DIR] [--out DIR]`: the instructor's
preflight a week before a workshop (iolab.classmode): a letter for the centre's admins and a
site profile, both written to --out."""

from __future__ import annotations

import argparse
import getpass
import json
import socket
import time

from iolab.classmode import MAX_LEARNERS
from iolab.core.options import Bounds, int_option, path_option

LEARNERS = Bounds(1, MAX_LEARNERS, "learners", "a workshop's size, not a campus's")


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "class", help="instructors: check a cluster for a workshop and write the admins a letter",
        description="Tools for running the lab with a whole class on one cluster.")
    parser.set_defaults(func=main)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check", help="preflight: ptrace, FUSE, Slurm and reservations, room for N learners, "
                      "Python, the class folder; writes letter.md and site-profile.json",
        description="Check this cluster for a workshop of N learners, a week before. Nothing "
                    "is submitted or installed; two reports are written.")
    check.add_argument("--learners", type=int_option("--learners", LEARNERS), required=True,
                       help="how many learners will take part")
    check.add_argument("--class-dir", type=path_option("--class-dir"), default=None,
                       help="the folder the class will share (checked, never changed)")
    check.add_argument("--out", type=path_option("--out"), default=None,
                       help="where to write letter.md and site-profile.json "
                            "(default: <workspace>/lab/class-check)")
    check.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """The action named (so far `check`: the preflight and its two reports)."""
    from iolab.classmode.letter import letter
    from iolab.classmode.load import class_load
    from iolab.classmode.preflight import preflight
    from iolab.core.workspace import atomic_output, ensure_writable_dir, results_dir

    load = class_load(args.learners)
    report = preflight(load, args.class_dir)
    out = ensure_writable_dir(args.out) if args.out else ensure_writable_dir(
        results_dir() / "class-check")
    host = socket.gethostname()
    text = letter(report, load, getpass.getuser(), host, time.strftime("%Y-%m-%d"))
    with atomic_output(out / "letter.md") as partial:
        partial.write_text(text)
    with atomic_output(out / "site-profile.json") as partial:
        partial.write_text(json.dumps({"host": host, **report}, indent=1) + "\n")
    width = max(len(check["name"]) for check in report["checks"])
    for check in report["checks"]:
        todo = f" -> {check['todo']}" if check["todo"] else ""
        print(f"{check['name']:<{width}}  {check['state']:<4}  {check['found']}{todo}")
    print(f"\nletter for the admins: {out / 'letter.md'}\nsite profile: {out / 'site-profile.json'}")
    return 0
