"""`python -m iolab darshan LOG [--json] [--top N]`: a Darshan log's I/O by layer and file,
and the same diagnosis as `iolab profile` gives a traced command (iolab.measure.darshan_log)."""

from __future__ import annotations

import argparse
import json

from iolab.cli.options import add_top_option
from iolab.core.errors import LabError
from iolab.core.options import path_option, text_option


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "darshan",
        help="read a Darshan log and diagnose its I/O with the lab's rules",
        description=(
            "Read a Darshan log (PyDarshan, `make darshan`) and print its I/O per layer, the "
            "files that moved the most bytes, the request sizes and the diagnosis of the "
            "rules `iolab profile` applies to a traced command. `--example NAME` reads one of "
            "the real logs bundled with PyDarshan (sample-badost, dxt, ior_hdf5_example, ...)."
        ),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("log", nargs="?", type=path_option("LOG"), help="the *.darshan file")
    source.add_argument("--example", type=text_option("--example", "a bundled log's name"),
                        help="a log bundled with PyDarshan, by name")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    add_top_option(parser, "how many of the busiest files to list")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from iolab.core.tables import to_markdown
    from iolab.measure.darshan_log import example_logs, read_log
    from iolab.measure.diagnose import diagnose, findings_frame, format_findings

    path = args.log
    if args.example:
        logs = example_logs()
        if args.example not in logs:
            raise LabError(f"no bundled log is called {args.example!r}; choose one of "
                           f"{', '.join(logs)}")
        path = logs[args.example]
    run = read_log(path)
    findings = diagnose(run.summary())
    if args.json:
        print(json.dumps({"log": run.name, "job": run.job(),
                          "modules": run.modules_frame().to_dict(orient="records"),
                          "files": run.files_frame().head(args.top).to_dict(orient="records"),
                          "posix_request_sizes": run.size_histogram().to_dict(orient="records"),
                          "findings": findings_frame(findings).to_dict(orient="records")}))
        return 0
    job = run.job()
    print(f"log: {run.name}: {job['processes']} processes, {job['run_time_s']:.0f} s, "
          f"modules {job['modules']}\n")
    print("I/O per layer", to_markdown(run.modules_frame()), "", sep="\n")
    print(f"Files by bytes moved (top {args.top})", to_markdown(run.files_frame().head(args.top)),
          "", sep="\n")
    print("POSIX request sizes", to_markdown(run.size_histogram()), "", sep="\n")
    print(format_findings(findings))
    return 0
