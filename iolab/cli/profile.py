"""`python -m iolab profile [--json] [--top N] [--method M] -- CMD...`: any program's file
I/O, file by file (iolab.diagnosis.trace)."""

from __future__ import annotations

import argparse
import json
import sys

from iolab.cli.options import add_command_argument, add_json_option, add_top_option
from iolab.measure.strace_run import PROFILE_METHODS

# heavy imports in main: a refused option or --help starts in a fraction of a second


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="trace any command and report its file I/O per file",
        description=(
            "Run your own command once under strace and report, per file: opens, metadata "
            "lookups, reads and writes with their sizes (copies inside the kernel and "
            "mmap included), syncs, seeks, sequential versus random access and the time in "
            "those calls, with your data apart from your software environment's and the "
            "system's files, and the diagnosis of what costs time. Without strace: "
            "whole-process counters from /proc/<pid>/io. The command's own output goes to "
            "stderr; exits with its exit code."
        ),
    )
    add_json_option(parser, "print one JSON object instead of tables")
    add_top_option(parser, "how many of the busiest files to list")
    parser.add_argument(
        "--method",
        choices=PROFILE_METHODS,
        default="auto",
        help="strace, proc-io (/proc/<pid>/io), or auto: strace if it can trace",
    )
    add_command_argument(parser, "the command to profile, after --")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from iolab.diagnosis.trace import profile_command
    from iolab.diagnosis.trace_report import format_profile

    profile = profile_command(args.command, method=args.method)
    sys.stderr.write(profile.stdout + profile.stderr)
    print(json.dumps(profile.to_json_dict()) if args.json else format_profile(profile, args.top))
    return profile.exit_code
