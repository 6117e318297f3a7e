"""`python -m iolab diagnose LOG|TRACE [--json] [--html FILE]` or `... diagnose -- CMD`: why a
job is slow on the file system, findings ranked by the seconds they cost
(iolab.diagnosis)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from iolab.cli.options import add_top_option
from iolab.core.errors import LabError
from iolab.core.options import path_option, text_option


def add_options(parser: argparse.ArgumentParser) -> None:
    """The options of `diagnose` (and of `darshan`, which takes a log only)."""
    parser.add_argument("--example", type=text_option("--example", "a bundled log's name"),
                        help="a Darshan log bundled with PyDarshan, by name (e.g. sample-badost)")
    parser.add_argument("--cwd", type=path_option("--cwd"), default=Path("."),
                        help="for a saved trace: the folder the traced program ran in")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--html", type=path_option("--html"), metavar="FILE",
                        help="also write the report as one self-contained HTML page")
    add_top_option(parser, "how many rows of each table to print")


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "diagnose",
        help="why is my job slow on the file system: a Darshan log, a saved strace trace, "
             "or a command",
        description=(
            "Diagnose a job's file I/O: pass a Darshan log (*.darshan, PyDarshan from `make "
            "darshan`), a saved trace (`strace -f -y -T -o FILE ...`), or `-- CMD` to run and "
            "trace a command. Prints the findings ranked by the seconds they cost, each with "
            "its files, ranks and OSTs, the counters that prove it and what to do. `--html "
            "FILE` writes one self-contained page to send to your support team."
        ),
    )
    add_options(parser)
    # One catch-all: `-- CMD ...` is a command to trace; anything else is a log or trace
    # followed by options, parsed again in main (argparse cannot have both side by side).
    parser.add_argument("rest", nargs=argparse.REMAINDER, metavar="LOG | TRACE | -- CMD",
                        help="a Darshan log, a saved strace trace, or -- and a command")
    parser.set_defaults(func=main, input=None)


def _split(args: argparse.Namespace) -> list[str]:
    """The command to trace (after --), or [] after parsing INPUT and its options into args."""
    rest = getattr(args, "rest", [])
    if rest[:1] == ["--"]:
        return rest[1:]
    if rest:
        again = argparse.ArgumentParser(prog="python -m iolab diagnose")
        add_options(again)
        again.add_argument("input", type=path_option("INPUT"))
        again.parse_args(rest, namespace=args)
    return []


def main(args: argparse.Namespace) -> int:
    from iolab.core.tables import to_markdown
    from iolab.diagnosis import inputs
    from iolab.diagnosis.report import format_findings, html_report, job_line, report_dict

    command = _split(args)
    given = [x for x in (args.input, args.example, command) if x]
    if len(given) != 1:
        raise LabError("give exactly one of: a Darshan log or saved trace, --example NAME, "
                       "or -- CMD (e.g. `python -m iolab diagnose -- python train.py`)")
    if args.html and args.html.exists() and not args.html.is_file():
        raise LabError(f"--html {args.html} is not a file; name the page to write, e.g. "
                       "--html report.html")
    want_figures = args.html is not None
    if command:
        result = inputs.from_command(command, figures=want_figures)
        sys.stderr.write(result.output)
    elif args.example:
        from iolab.diagnosis.darshan import example_logs

        logs = example_logs()
        if args.example not in logs:
            raise LabError(f"no bundled log is called {args.example!r}; choose one of "
                           f"{', '.join(logs)}")
        result = inputs.from_darshan(logs[args.example], figures=want_figures)
    elif getattr(args, "darshan_only", False):
        result = inputs.from_darshan(args.input, figures=want_figures)
    else:  # a log or a trace by its content, whatever its name; anything else is refused
        result = inputs.from_path(args.input, args.cwd, figures=want_figures)
    if args.html:
        args.html.write_text(html_report(result.run, result.findings, result.tables,
                                         result.figures), encoding="utf-8")
    if args.json:
        print(json.dumps(report_dict(result.run, result.findings,
                                     {k: v.head(args.top) for k, v in result.tables.items()}),
                         allow_nan=False))
    else:
        print(job_line(result.run), "", sep="\n")
        for title, frame in result.tables.items():
            if len(frame):
                print(title, to_markdown(frame.head(args.top)), "", sep="\n")
        print(format_findings(result.findings, result.run))
        if args.html:
            print(f"\nreport written to {args.html}")
    return result.exit_code
