"""`python -m iolab syscalls --data DIR [--json] [--method M] -- CMD...`: a command's system
calls on the dataset's files apart from everything else (iolab.measure.syscalls)."""

from __future__ import annotations

import argparse
import json
import sys

from iolab.cli.options import add_command_argument, add_data_option, add_json_option
from iolab.measure.strace_run import COUNT_METHODS

# heavy imports in main: a refused option or --help starts in a fraction of a second


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "syscalls",
        help="count a command's system calls, split into the dataset's files and everything else",
        description=(
            "Run a command under strace (or, without strace, with in-process counters) and "
            "count its system calls on the dataset's files apart from those of the interpreter "
            "and its libraries. The command's own output goes to stderr; exits with its exit code."
        ),
    )
    add_data_option(
        parser,
        "directory holding the dataset; calls on paths inside it count as dataset calls",
        required=True,
        old_names=("--data-dir",),
    )
    add_json_option(parser, "print one JSON object instead of a table")
    parser.add_argument(
        "--method",
        choices=COUNT_METHODS,
        default="auto",
        help="strace, fallback (audit hook and /proc/<pid>/io), or auto: strace if it can trace",
    )
    add_command_argument(parser, "the command to measure, after --")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from iolab.measure.syscall_report import format_report
    from iolab.measure.syscalls import count_syscalls

    report = count_syscalls(args.command, args.dataset_dir, method=args.method)
    sys.stderr.write(report.stdout + report.stderr)
    print(json.dumps(report.to_json_dict()) if args.json else format_report(report))
    return report.exit_code
