"""`python -m iolab perception --directory DIR [--tests T,...]`: everyday actions (import,
git status, pytest, untar) timed cold and warm on one storage location
(iolab.storage.perception)."""

from __future__ import annotations

import argparse

from iolab.cli.options import add_json_option
from iolab.core.errors import LabError
from iolab.core.options import Bounds, int_option, path_option
from iolab.storage.perception_workloads import TESTS

# heavy imports in main: a refused option or --help starts in a fraction of a second

#: Timed runs of each action, cold and warm.
REPEATS = Bounds(
    1,
    10,
    "repeats",
    "each repeat evicts and reads again thousands of small "
    "files, a 2000-module package and a 5000-file repository among them: work for "
    "a metadata server every user of the file system waits for",
)


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "perception",
        help="time everyday actions (import, git status, pytest, untar) cold and warm",
        description=(
            "Time what users feel on a storage location: importing a package of 2000 small "
            "modules, `git status` in a repository of 5000 files, `pytest --collect-only` on "
            "1500 tests, and unpacking 2000 files with sync, each cold (files evicted from "
            "the page cache, no root) and warm, plus `import pandas` from the lab's venv. "
            "Everything is built in a fresh directory inside DIR and removed afterwards."
        ),
    )
    parser.add_argument(
        "--directory",
        type=path_option("--directory"),
        required=True,
        metavar="DIR",
        help="the directory to test in, e.g. a location's working directory",
    )
    parser.add_argument(
        "--tests",
        type=_tests_list,
        default=list(TESTS),
        help=f"comma-separated tests to run (default: {','.join(TESTS)})",
    )
    parser.add_argument(
        "--repeats",
        type=int_option("--repeats", REPEATS),
        default=3,
        help="timed runs each (default: 3)",
    )
    add_json_option(parser, "print one JSON array instead")
    parser.set_defaults(func=main)


def _tests_list(text: str) -> list[str]:
    """'git,untar' as a list of test names; at least one, or nothing would be measured."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise LabError(f"--tests {text!r} names no test; choose from {', '.join(TESTS)}")
    return names


def main(args: argparse.Namespace) -> int:
    """Print the table and its notes, or the rows as one JSON array."""
    from iolab.core.tables import to_markdown
    from iolab.storage.perception import perception_suite

    table = perception_suite(args.directory, args.tests, args.repeats)
    if args.json:
        print(table.to_json(orient="records"))
        return 0
    print(to_markdown(table.drop(columns="note")))
    notes = sorted({f"- {row.test}: {row.note}" for row in table.itertuples() if row.note})
    if notes:
        print("\n" + "\n".join(notes))
    print(
        "\ncold: the action's files evicted from the page cache before every repeat "
        "(resident_before_max_pct shows what stayed); warm: after one untimed run."
    )
    return 0
