"""The toolkit's command line: one module per command, each with setup_parser and main.

    python -m iolab check-tools
    python -m iolab syscalls --data DIR --json -- python demos/read_files.py --data DIR
    python -m iolab time --repeats 5 -- python demos/read_archive.py --data DIR
    python -m iolab lab | bench | clean

A command module `iolab/cli/<name>.py` defines `setup_parser(subparsers)`, which adds its
parser and sets `func=main`, and `main(args) -> int`; a test can build the parser and call
main in-process. Modules are imported only when the parser is built, and `clean` needs only
the standard library, so `make clean` works even without the .venv. `--help` is written for
a learner: what the toolkit is, and the commands grouped by the lesson that uses them
(BY_LESSON). A renamed command's old spelling works for one release, with a notice
(RENAMED_COMMANDS).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
from typing import NoReturn

from iolab.cli.options import CommandLine
from iolab.core.errors import run_cli
from iolab.core.options import renamed_notice

#: Command modules under iolab.cli, in the order `--help` lists them. `clean` comes first
#: and alone needs no third-party package.
COMMAND_MODULES = (
    "clean",
    "check_tools",
    "locations",
    "syscalls",
    "profile",
    "darshan",
    "diagnose",
    "time",
    "over_sshfs",
    "perception",
    "fio",
    "sweep",
    "mdrates",
    "lustre",
    "pfs",
    "hygiene",
    "checkpoint",
    "mpiio",
    "node_runs",
    "accelerator",
    "advise",
    "lab",
    "jupyter",
    "bench",
    "bench_diagnosis",
    "answer",
    "classroom",
)

#: Commands whose module has another name (`class` is a Python keyword).
MODULE_OF = {"class": "classroom"}

#: Old spellings of a command (the words that start the command line) and their new ones:
#: they keep working for one release, with a notice (issue 39: three things were "check",
#: three "bench"). Rewritten in `main`, not argparse aliases, so --help lists each command
#: once under its lesson.
RENAMED_COMMANDS = {
    ("check",): ("answer",),
    ("class", "check"): ("class", "preflight"),
    ("class", "bench"): ("class", "load-test"),
}


#: The commands by the lesson that uses them, in the order a learner meets them (--help).
BY_LESSON = (
    ("start here", ("lab", "jupyter", "check-tools", "locations", "bench", "clean", "answer")),
    ("01-03 how a program reads files", ("syscalls", "time")),
    ("04 the page cache, a network file system", ("over-sshfs",)),
    ("05 benchmarking storage with fio", ("fio",)),
    ("06 file sizes and metadata", ("sweep", "mdrates", "perception")),
    ("07 Lustre striping, and a parallel file system of your own", ("lustre", "pfs")),
    ("08 MPI-IO, and jobs across nodes", ("mpiio", "node-runs")),
    ("09 feeding a DataLoader", ("accelerator",)),
    ("10 checkpoints", ("checkpoint",)),
    ("11 keeping storage tidy, and where to put what", ("hygiene", "advise")),
    ("12 profiling your own program", ("diagnose", "profile", "darshan", "bench-diagnosis")),
    ("instructors: a workshop on one cluster", ("class",)),
)
HELP_WIDTH = 88
DESCRIPTION = (
    "The storage I/O lab's measuring toolkit. Each command measures one thing on this machine "
    "-- system calls, timings, bandwidth, metadata rates, layouts -- and prints a table. "
    "New here? Run `make lab` once, then follow the lessons; `python -m iolab COMMAND --help` "
    "explains a command."
)


def lesson_guide(helps: dict[str, str]) -> str:
    """Every command with its one-line help, under the lesson that uses it."""
    width = max(len(name) for _, names in BY_LESSON for name in names) + 2
    lines = []
    for lesson, names in BY_LESSON:
        lines.append(f"{lesson}:")
        for name in (name for name in names if name in helps):
            first, *rest = textwrap.wrap(helps[name], HELP_WIDTH - width - 2) or [""]
            lines.append(f"  {name:<{width}}{first}")
            lines += [" " * (width + 2) + line for line in rest]
        lines.append("")
    return "\n".join(lines).rstrip()


def build_parser(full: bool = True, only: str | None = None) -> argparse.ArgumentParser:
    """All subcommands; with full=False only those that need no third-party package; with
    `only`, that one command's module (a command starts without importing every other)."""
    parser = CommandLine(
        prog="python -m iolab",
        description=textwrap.fill(DESCRIPTION, HELP_WIDTH),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        help="one of the commands below, listed by lesson",
    )
    names = COMMAND_MODULES if full else COMMAND_MODULES[:1]
    for name in [only] if only in names else names:
        importlib.import_module(f"iolab.cli.{name}").setup_parser(commands)
    # argparse lists subcommands in one flat group; the lessons' groups replace that list.
    helps = {action.dest: action.help or "" for action in commands._choices_actions}
    commands._choices_actions = []
    parser.epilog = lesson_guide(helps)
    return parser


def renamed(argv: list[str]) -> list[str]:
    """The command line with an old command name replaced by its new one, after the notice."""
    for old, new in RENAMED_COMMANDS.items():
        if tuple(argv[: len(old)]) == old:
            spelled = ("`python -m iolab " + " ".join(words) + "`" for words in (old, new))
            print(renamed_notice(*spelled), file=sys.stderr)
            return [*new, *argv[len(old) :]]
    return argv


def main(argv: list[str] | None = None) -> int:
    argv = renamed(sys.argv[1:] if argv is None else argv)
    named = argv[0].replace("-", "_") if argv and not argv[0].startswith("-") else None
    if named is not None:
        named = MODULE_OF.get(named, named)
    args = build_parser(full=argv[:1] != ["clean"], only=named).parse_args(argv)
    return args.func(args)


def run() -> NoReturn:
    """The `iolab` command that `pip install -e .` puts beside the venv's python."""
    run_cli(main, fast_exit=True)
