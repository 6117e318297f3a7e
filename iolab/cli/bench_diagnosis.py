"""`python -m iolab bench-diagnosis [--drishti PATH]` (`make bench-diagnosis`): the lab's
diagnosis and Drishti's on the 24 real logs of tests/fixtures/darshan, against the ground
truth written from their counters: hits, misses, false alarms, seconds and peak memory of
each tool per log; the lab's HTML page against its text report, per log; and a centre's
archive, `iolab diagnose DIR` on copies of the logs: seconds per log and the memory a worker
needs (iolab.diagnosis.benchmark)."""

from __future__ import annotations

import argparse
import datetime
import json
import sys

from iolab.core.atomic import atomic_output
from iolab.core.errors import LabError
from iolab.core.lab_dirs import results_dir
from iolab.core.options import path_option
from iolab.core.workspace import repo_root

RESULT = "diagnosis-vs-drishti.json"


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench-diagnosis",
        help="the lab's diagnosis against Drishti on 24 real Darshan logs",
        description=(
            "Run `iolab diagnose` and, with --drishti, Drishti on each log of "
            "tests/fixtures/darshan, each in a fresh process, and score both against the "
            "logs' ground truth: findings, misses, false alarms, median wall seconds of "
            "5 runs (the tools taking turns), largest peak memory; and the lab's text "
            "report against its HTML page (figures drawn), each timed alone; the rules on "
            "synthetic jobs of growing size; and `iolab diagnose DIR` on an archive of "
            "copies of the logs, in 1 and 2 processes (seconds per log, peak memory). "
            f"Saves workspace/lab/{RESULT}. `make bench-diagnosis` builds Drishti's own "
            "environment (.venv-drishti) first."
        ),
    )
    parser.add_argument(
        "--drishti",
        type=path_option("--drishti"),
        help="the drishti executable (e.g. .venv-drishti/bin/drishti)",
    )
    parser.add_argument(
        "--logs",
        type=path_option("--logs"),
        default=repo_root() / "tests" / "fixtures" / "darshan",
        help="a folder of logs with their ground_truth.json",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from iolab.core.tables import to_markdown
    from iolab.diagnosis.benchmark import compare
    from iolab.diagnosis.darshan import darshan_problem
    from iolab.measure.context import machine_context, machine_label

    problem = darshan_problem()
    if problem:
        raise LabError(problem)
    if not (args.logs / "ground_truth.json").is_file():
        raise LabError(
            f"{args.logs} has no ground_truth.json; pass --logs with the folder "
            "of tests/fixtures/darshan"
        )
    if args.drishti and not args.drishti.is_file():
        raise LabError(
            f"{args.drishti} is not a file; build it with `make bench-diagnosis` "
            "or pass the path of an installed drishti"
        )
    import pandas as pd

    def tell(done: int, total: int, row: dict) -> None:
        drishti = f", Drishti {row['drishti_seconds']:.2f} s" if "drishti_seconds" in row else ""
        print(
            f"[{done}/{total}] {row['log']}: lab {row['lab_seconds']:.2f} s{drishti}, "
            f"HTML page {row['html_over_text']:.2f}x the text",
            file=sys.stderr,
            flush=True,
        )

    rows = compare(args.logs, args.drishti, progress=tell)
    frame = pd.DataFrame(rows)
    context = machine_context(args.logs)
    shown = frame.drop(columns=[c for c in frame if c.endswith("_error") and not frame[c].any()])
    print(to_markdown(shown))
    for tool in ("lab", "drishti"):
        if f"{tool}_hits" in frame:
            print(
                f"{tool}: {frame[f'{tool}_hits'].sum()} of {frame.must.sum()} findings, "
                f"{frame[f'{tool}_misses'].map(len).sum()} missed, "
                f"{frame[f'{tool}_false_alarms'].map(len).sum()} false alarms; slowest log "
                f"{frame[f'{tool}_seconds'].max():.2f} s (median of {frame.repeats.max()} runs), "
                f"largest peak {frame[f'{tool}_peak_MiB'].max():.0f} MiB"
            )
    worst = frame.loc[frame.html_over_text.idxmax()]
    print(
        f"HTML page: at most {worst.html_over_text:.2f}x the text report's time "
        f"({worst.log}: {worst.html_seconds:.2f} s against {worst.text_seconds:.2f} s, "
        f"medians of {frame.repeats.max()}); the target is 2x"
    )
    from iolab.diagnosis.benchmark import scaling

    grows = scaling()
    print("\nThe rules alone on synthetic jobs (median of 3):")
    print(to_markdown(pd.DataFrame(grows)))
    from iolab.diagnosis.benchmark import archive_rates

    archive = archive_rates(
        args.logs, progress=lambda line: print(line, file=sys.stderr, flush=True)
    )
    print("\nA centre's archive: `iolab diagnose DIR` on copies of every log (median of 3):")
    print(to_markdown(pd.DataFrame(archive)))
    target = results_dir() / RESULT
    with atomic_output(target) as partial:
        partial.write_text(
            json.dumps(
                {
                    "machine": machine_label(context),
                    "context": context,
                    "date": datetime.date.today().isoformat(),
                    "drishti": str(args.drishti or ""),
                    "rows": rows,
                    "scaling": grows,
                    "archive": archive,
                },
                indent=1,
                default=str,
            )
        )
    print(f"saved {target}")
    return 0
