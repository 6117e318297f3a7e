"""The toolkit's command line: one module per command, each with setup_parser and main.

    python -m iolab check-tools
    python -m iolab syscalls --data DIR --json -- python demos/read_files.py --data DIR
    python -m iolab time --repeats 5 -- python demos/read_archive.py --data DIR
    python -m iolab lab | bench | clean

A command module `iolab/cli/<name>.py` defines `setup_parser(subparsers)`, which adds its
parser and sets `func=main`, and `main(args) -> int`; a test can build the parser and call
main in-process. Modules are imported only when the parser is built, and `clean` needs only
the standard library, so `make clean` works even without the .venv.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from iolab.core.errors import run_cli

#: Command modules under iolab.cli, in the order `--help` lists them. `clean` comes first
#: and alone needs no third-party package.
COMMAND_MODULES = (
    "clean", "check_tools", "locations", "syscalls", "profile", "darshan", "time", "over_sshfs",
    "perception", "fio", "sweep", "mdrates", "lustre", "hygiene", "checkpoint", "mpiio",
    "accelerator", "advise", "lab", "bench",
)


def build_parser(full: bool = True) -> argparse.ArgumentParser:
    """All subcommands; with full=False only those that need no third-party package."""
    parser = argparse.ArgumentParser(prog="python -m iolab", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES if full else COMMAND_MODULES[:1]:
        importlib.import_module(f"iolab.cli.{name}").setup_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(full=argv[:1] != ["clean"]).parse_args(argv)
    return args.func(args)


def run() -> NoReturn:
    """The `iolab` command that `pip install -e .` puts beside the venv's python."""
    run_cli(main)
