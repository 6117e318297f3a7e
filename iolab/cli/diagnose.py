"""`python -m iolab diagnose LOG|TRACE [--json] [--html FILE]` or `... diagnose -- CMD`: why a
job is slow on the file system, findings ranked by the seconds they cost
(iolab.diagnosis). `darshan` prints the same report of a Darshan log (example_log, report).
`... diagnose DIR [--csv FILE]` ranks every Darshan log below DIR (iolab.diagnosis.archive)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from iolab.cli.options import (
    add_budget_option,
    add_input_or_command,
    add_json_option,
    add_top_option,
)
from iolab.core.budget import FLAG, LIMITS
from iolab.core.errors import LabError
from iolab.core.options import Bounds, int_option, path_option, process_bounds, text_option

if TYPE_CHECKING:
    from iolab.diagnosis.inputs import Diagnosis

#: Untraced runs of a command before its traced one: each repeats the command's work.
UNTRACED_RUNS = Bounds(
    0,
    10,
    "runs",
    "each run repeats the whole command; the median of a few is enough to see the "
    "tracer's slowdown",
)
#: Slurm jobs of one Dask worker each, for a folder of logs (iolab.diagnosis.archive_slurm).
SLURM_JOBS = Bounds(
    1,
    256,
    "jobs",
    "each job is one core diagnosing one log at a time; a few dozen read thousands of logs "
    "in minutes",
)
#: A Slurm time limit as sbatch takes it: [days-]hours:minutes:seconds.
WALLTIME = re.compile(r"(\d+-)?\d{1,2}:\d{2}:\d{2}")
#: Traced runs of a command: each repeats its work, under the tracer's slowdown.
TRACED_RUNS = Bounds(
    1,
    10,
    "runs",
    "each run repeats the whole command under strace; a few show whether a finding's cost "
    "holds from run to run",
)


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
            "FILE` writes one self-contained page to send to your support team. Given a "
            "folder, it ranks every *.darshan log below it by the seconds its top finding "
            "costs, one row per job (`--csv FILE` saves all their findings)."
        ),
    )
    parser.add_argument(
        "--example",
        type=text_option("--example", "a bundled log's name"),
        help="a Darshan log bundled with PyDarshan, by name (e.g. sample-badost)",
    )
    parser.add_argument(
        "--cwd",
        type=path_option("--cwd"),
        default=Path("."),
        help="for a saved trace: the folder the traced program ran in",
    )
    add_json_option(parser)
    parser.add_argument(
        "--html",
        type=path_option("--html"),
        metavar="FILE",
        help="also write the report as one self-contained HTML page",
    )
    add_top_option(parser, "how many rows of each table to print")
    parser.add_argument(
        "--config",
        type=path_option("--config"),
        metavar="FILE",
        help='a JSON object of thresholds to use instead of the lab\'s, e.g. {"SMALL_SHARE": '
        "0.2}; the report says which it changed",
    )
    parser.add_argument(
        "--csv",
        type=path_option("--csv"),
        metavar="FILE",
        help="with a folder: every finding of every log, one row each",
    )
    parser.add_argument(
        "--workers",
        type=int_option("--workers", process_bounds(1, "workers")),
        help=f"with a folder: logs read at once (default: one per core, at most "
        f"{LIMITS['processes'].most} unless {FLAG})",
    )
    parser.add_argument(
        "--slurm-jobs",
        type=int_option("--slurm-jobs", SLURM_JOBS),
        metavar="N",
        help="with a folder: diagnose the logs in N Slurm jobs of one core each, through Dask "
        "(`make dask`), when this machine is too small; SBATCH_ACCOUNT and SBATCH_PARTITION "
        "choose where they run",
    )
    parser.add_argument(
        "--slurm-walltime",
        type=walltime_option,
        default="00:30:00",
        metavar="HH:MM:SS",
        help="with --slurm-jobs: each job's time limit (default 00:30:00)",
    )
    parser.add_argument(
        "--slurm-interface",
        metavar="NAME",
        help="with --slurm-jobs: the network interface the Dask scheduler here and its workers "
        "on the nodes talk over (e.g. ib0), where the nodes cannot reach the one that routes "
        "out (default: that one)",
    )
    parser.add_argument(
        "--untraced-runs",
        type=int_option("--untraced-runs", UNTRACED_RUNS),
        default=0,
        metavar="N",
        help="with -- CMD: first run the command N times without strace, to measure how much "
        "the tracer slows it (each run repeats what the command does)",
    )
    parser.add_argument(
        "--traced-runs",
        type=int_option("--traced-runs", TRACED_RUNS),
        default=1,
        metavar="N",
        help="with -- CMD: trace the command N times (each run repeats its work); the report "
        "is the run of median time, and a table shows each finding's cost over all N",
    )
    add_budget_option(parser)
    add_input_or_command(
        parser,
        path_option("INPUT"),
        metavar="LOG | TRACE | -- CMD",
        help="a Darshan log, a saved strace trace, or -- and a command",
    )
    parser.set_defaults(func=main)


def walltime_option(text: str) -> str:
    """An argparse type: a Slurm time limit, HH:MM:SS or D-HH:MM:SS."""
    if not WALLTIME.fullmatch(text):
        raise LabError(
            f"--slurm-walltime {text!r} is not a Slurm time limit; give HH:MM:SS, e.g. 01:00:00"
        )
    return text


def main(args: argparse.Namespace) -> int:
    from iolab.diagnosis import inputs

    if len([given for given in (args.input, args.example, args.command) if given]) != 1:
        raise LabError(
            "give exactly one of: a Darshan log or saved trace, --example NAME, "
            "or -- CMD (e.g. `python -m iolab diagnose -- python train.py`)"
        )
    if args.config is not None:
        from iolab.diagnosis import thresholds

        thresholds.apply(thresholds.read_config(args.config))
    if args.input is not None and args.input.is_dir():
        return archive_main(args)
    if (args.untraced_runs or args.traced_runs > 1) and not args.command:
        raise LabError(
            "--untraced-runs and --traced-runs go with a command: `diagnose --traced-runs 3 -- CMD`"
        )
    if args.csv or args.workers or args.slurm_jobs or args.slurm_interface:
        raise LabError(
            "--csv, --workers and the --slurm options go with a folder of logs: "
            "`diagnose DIR --csv FILE`"
        )
    check_page(args.html)
    figures = args.html is not None
    if args.command:
        result = inputs.from_command(
            args.command,
            figures=figures,
            untraced_runs=args.untraced_runs,
            traced_runs=args.traced_runs,
        )
        sys.stderr.write(result.output)
    elif args.example:
        result = inputs.from_darshan(example_log(args.example), figures=figures)
    else:  # a log or a trace by its content, whatever its name; anything else is refused
        result = inputs.from_path(args.input, args.cwd, figures=figures)
    return report(result, args.json, args.html, args.top)


def archive_main(args: argparse.Namespace) -> int:
    """Rank the logs below the folder args.input; print the ranking (or JSON), save --csv."""
    from iolab.core.budget import check
    from iolab.core.tables import to_markdown
    from iolab.core.user_paths import output_file
    from iolab.diagnosis.archive import (
        UNREADABLE,
        archive_logs,
        default_workers,
        local_results,
        ranked,
        ranking_records,
    )

    if args.html:
        raise LabError("--html is for one log; for a folder, --csv FILE saves every finding")
    if args.workers and args.slurm_jobs:
        raise LabError(
            "--workers counts this machine's processes and --slurm-jobs Slurm's jobs: give one"
        )
    if args.slurm_interface and not args.slurm_jobs:
        raise LabError("--slurm-interface goes with --slurm-jobs N: the jobs' network")
    if args.csv:
        output_file(args.csv, "--csv")
    logs = archive_logs(args.input)
    on_terminal = sys.stderr.isatty() and not args.json

    def say(done: int, total: int) -> None:
        if on_terminal:  # one line, rewritten: a log's progress is not worth a line each
            print(f"\r{done} of {total} logs read", end="", file=sys.stderr, flush=True)

    from iolab.diagnosis.thresholds import changed

    hosts: Counter[str] = Counter()
    if args.slurm_jobs:
        from iolab.diagnosis.archive_slurm import slurm_results

        def tell(line: str) -> None:
            print(line, file=sys.stderr, flush=True)

        results = slurm_results(
            logs,
            args.slurm_jobs,
            args.slurm_walltime,
            changed(),
            tell,
            hosts,
            interface=args.slurm_interface,
        )
    else:
        workers = args.workers or default_workers(len(logs), LIMITS["processes"].most)
        check(
            f"reading {len(logs)} logs in {workers} processes",
            fix="give fewer --workers",
            compute_node=args.compute_node,
            processes=workers,
        )
        results = local_results(logs, workers, changed())
    ranking, findings = ranked(results, len(logs), say)
    if on_terminal:
        print(file=sys.stderr)
    if hosts:
        shares = ", ".join(f"{host} {count}" for host, count in sorted(hosts.items()))
        print(f"logs read per Slurm node: {shares}", file=sys.stderr)
    ranking["log"] = [str(Path(log).relative_to(args.input)) for log in ranking["log"]]
    findings["log"] = [str(Path(log).relative_to(args.input)) for log in findings["log"]]
    if args.csv:
        from iolab.core.atomic import atomic_output

        with atomic_output(args.csv) as partial:
            findings.to_csv(partial, index=False)
    if args.json:
        print(json.dumps(ranking_records(ranking), allow_nan=False))
        return 0
    unreadable = int((ranking["verdict"] == UNREADABLE).sum())
    costly = int((ranking["verdict"] == "io-costs-time").sum())
    print(
        f"{len(ranking)} logs below {args.input}: {costly} where I/O costs time, "
        f"{unreadable} unreadable; ranked by the seconds their top finding costs (findings "
        "can overlap, so they are not added up)"
    )
    print(to_markdown(ranking.head(args.top)))
    if args.csv:
        print(f"every finding ({len(findings)}): {args.csv}")
    return 0


def thresholds_line() -> str:
    """The thresholds this report used instead of the lab's, in one line."""
    from iolab.diagnosis.thresholds import changed

    shown = ", ".join(f"{name} = {value:g}" for name, value in sorted(changed().items()))
    return f"thresholds changed by --config: {shown} (the others are the lab's)"


def check_page(html: Path | None) -> None:
    """Refuse an --html that names a folder (or anything else but a file) before any work."""
    if html and html.exists() and not html.is_file():
        raise LabError(
            f"--html {html} is not a file; name the page to write, e.g. --html report.html"
        )


def example_log(name: str) -> Path:
    """The Darshan log bundled with PyDarshan called `name` (`--example`)."""
    from iolab.diagnosis.darshan import example_logs

    logs = example_logs()
    if name not in logs:
        raise LabError(f"no bundled log is called {name!r}; choose one of {', '.join(logs)}")
    return logs[name]


def report(result: Diagnosis, as_json: bool, html: Path | None, top: int) -> int:
    """Print the diagnosis (tables and findings, or one JSON object), write the --html page;
    returns the exit code (a traced command's own)."""
    from iolab.core.tables import to_markdown
    from iolab.diagnosis.report import (
        format_findings,
        html_report,
        job_line,
        report_dict,
        tracer_line,
    )
    from iolab.diagnosis.thresholds import changed as changed_thresholds

    if html:
        html.write_text(
            html_report(result.run, result.findings, result.tables, result.figures),
            encoding="utf-8",
        )
    if as_json:
        print(
            json.dumps(
                report_dict(
                    result.run, result.findings, {k: v.head(top) for k, v in result.tables.items()}
                ),
                allow_nan=False,
            )
        )
    else:
        print(job_line(result.run), "", sep="\n")
        if tracer_line(result.run):
            print(tracer_line(result.run), "", sep="\n")
        if changed_thresholds():
            print(thresholds_line(), "", sep="\n")
        for title, frame in result.tables.items():
            if len(frame):
                print(title, to_markdown(frame.head(top)), "", sep="\n")
        print(format_findings(result.findings, result.run))
        if html:
            print(f"\nreport written to {html}")
    return result.exit_code
