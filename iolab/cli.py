"""The toolkit's command line: one subcommand per job.

    python -m iolab check-tools
    python -m iolab syscalls --data-dir DIR --json -- python demos/read_files.py --data DIR
    python -m iolab time --repeats 5 -- python demos/read_archive.py --data DIR
    python -m iolab lab | bench | clean

`clean` needs only the standard library, so `make clean` works even without the .venv.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from iolab.cleanup import clean
from iolab.errors import run_cli


def build_parser(full: bool = True) -> argparse.ArgumentParser:
    """All subcommands; with full=False only those that need no third-party package."""
    parser = argparse.ArgumentParser(prog="python -m iolab", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("clean", help="remove everything the lab wrote").set_defaults(
        func=lambda args: clean())
    if not full:
        return parser

    from iolab import (accelerator, checkpoint, fio, hygiene, locations, lustre, mdrates,
                       measure, mpiio, netmount, perception, sweep, syscalls, tools)
    from iolab.bench import run_bench
    from iolab.lab import run_lab

    tools.add_cli(commands)
    locations.add_cli(commands)
    syscalls.add_cli(commands)
    measure.add_cli(commands)
    netmount.add_cli(commands)
    perception.add_cli(commands)
    fio.add_cli(commands)
    sweep.add_cli(commands)
    mdrates.add_cli(commands)
    lustre.add_cli(commands)
    hygiene.add_cli(commands)
    checkpoint.add_cli(commands)
    mpiio.add_cli(commands)
    accelerator.add_cli(commands)
    lab = commands.add_parser("lab", help="the whole lab on this machine (make lab)")
    lab.add_argument("--repeats", type=int, default=5, help="timed repeats per reader")
    lab.set_defaults(func=lambda args: run_lab(args.repeats))
    bench = commands.add_parser("bench", help="this machine's timings against the raw floor")
    bench.add_argument("--repeats", type=int, default=5, help="timed repeats per reader")
    bench.set_defaults(func=lambda args: run_bench(args.repeats))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(full=argv[:1] != ["clean"]).parse_args(argv)
    return args.func(args)


def run() -> NoReturn:
    """The `iolab` command that `pip install -e .` puts beside the venv's python."""
    run_cli(main)
