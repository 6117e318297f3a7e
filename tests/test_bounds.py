"""Every bounded command-line value is refused before any work, in one sentence, with exit 2.

A shared login node must not be asked for nan seconds, -3 repeats, a file scaled by 1e308 or
an empty path that quietly means the current directory. Each bad command line below runs as
a learner would run it, in an empty directory of its own with a workspace of its own, and
must end with exit status 2 and one `error: ...` sentence that names the option, leave both
empty, and print no traceback. Each value sits just outside a bound, and the rest of the
command line is chosen so that without the bound the command would fail differently or do
work, so removing any bound fails a test here (`test_every_bounded_option_is_tested` keeps
the list complete). Boundary values inside the ranges are accepted. The subprocesses run
concurrently, two or more at a time, to keep the file fast.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from iolab.cli import build_parser
from iolab.core.budget import FLAG
from iolab.core.cluster import JOB_VARIABLES
from iolab.core.options import BoundedNumber

ROOT = Path(__file__).resolve().parent.parent
#: Stands for the case's own empty directory in a command line (also its working directory).
PLACE = "{place}"
MISSING = f"{PLACE}/missing"


@dataclass(frozen=True)
class Case:
    """A command line after the interpreter, and how its one error sentence starts."""

    argv: tuple[str, ...]
    says: str

    @property
    def id(self) -> str:
        return " ".join(part or "''" for part in self.argv).replace(str(ROOT) + "/", "")


#: `python -m iolab`, after the interpreter.
IOLAB = ("-m", "iolab")


def demo(script: str) -> str:
    return str(ROOT / "demos" / script)


def refused(
    prefix: tuple[str, ...], option: str, values: tuple[str, ...], suffix: tuple[str, ...] = ()
) -> list[Case]:
    """One case per value: prefix, the option and the value, then suffix; refused naming it."""
    return [Case((*prefix, option, value, *suffix), option) for value in values]


FIO = (*IOLAB, "fio", "--dry-run", "--directory", PLACE)
SWEEP = (*IOLAB, "sweep", "--dry-run", "--directory", PLACE)
#: Without a bound these fail later on their own (a missing directory or dataset, a size of 0
#: MiB), so that removing a bound is seen here without the command doing any work.
MDRATES = (*IOLAB, "mdrates", "--directory", MISSING)
CHECKPOINT = (*IOLAB, "checkpoint", "--size-mib", "0")
ACCELERATOR = (*IOLAB, "accelerator", "--data", MISSING)
PERCEPTION = (*IOLAB, "perception", "--directory", MISSING)
HYGIENE = (*IOLAB, "hygiene", "usage", "--data", PLACE)
TAR_TRAP = (demo("tar_lookup_trap.py"), "--data", PLACE)
SAMPLES = (demo("read_samples.py"), "--source", "files", "--data", PLACE)
MPIIO_DEMO = (demo("mpiio/mpiio_demo.py"), "--directory", PLACE)
TRUE = ("--", "true")

BAD: list[Case] = [
    # fio: the file scale and the seconds per job
    *refused(FIO, "--size-scale", ("1e308", "nan", "inf", "0", "1001")),
    *refused(FIO, "--runtime", ("0", "3601")),
    *refused((*IOLAB, "fio", "--dry-run"), "--directory", ("",)),
    *refused(FIO, "--json-out", ("",)),
    *refused(FIO, "--csv", ("",)),
    *refused((*IOLAB, "fio", "--dry-run"), "--location", ("",)),
    # sweep: repeats and paths
    *refused(SWEEP, "--repeats", ("-3", "11")),
    *refused((*IOLAB, "sweep", "--dry-run"), "--directory", ("",)),
    *refused(SWEEP, "--csv", ("",)),
    *refused(SWEEP, "--plot", ("",)),
    # mdrates: files, processes, bytes, iterations
    *refused(MDRATES, "--files-per-process", ("0", "1000001")),
    *refused(MDRATES, "--processes", ("0", "257")),
    *refused(MDRATES, "--bytes", ("-1", "1048577")),
    *refused(MDRATES, "--iterations", ("0", "11")),
    *refused((*IOLAB, "mdrates"), "--directory", ("",)),
    # checkpoint: the state, the loop and what it keeps
    *refused((*IOLAB, "checkpoint"), "--size-mib", ("262145",)),
    *refused(CHECKPOINT, "--steps", ("0", "1001")),
    *refused(CHECKPOINT, "--step-s", ("-1", "nan", "61")),
    *refused(CHECKPOINT, "--keep", ("17",)),
    *refused(CHECKPOINT, "--target", ("",)),
    # accelerator: workers, compute time, batch, steps
    *refused(ACCELERATOR, "--workers", ("-1", "257")),
    *refused(ACCELERATOR, "--compute-ms", ("-1", "nan", "10001")),
    *refused(ACCELERATOR, "--batch-size", ("0", "129")),
    *refused(ACCELERATOR, "--steps", ("1", "100001")),
    *refused((*IOLAB, "accelerator"), "--data", ("",)),
    # mpiio: ranks and the pattern
    *refused((*IOLAB, "mpiio"), "--ranks", ("0", "65")),
    *refused((*IOLAB, "mpiio"), "--block-size", ("7", "67108865")),
    *refused((*IOLAB, "mpiio"), "--blocks-per-rank", ("0", "1048577")),
    *refused((*IOLAB, "mpiio"), "--csv", ("",)),
    # advise: the footprint per place
    *refused((*IOLAB, "advise"), "--mib", ("3", "16385")),
    *refused((*IOLAB, "advise"), "--files", ("49", "1000001")),
    # the busiest-first tables
    *refused(HYGIENE, "--top", ("-1", "1001")),
    *refused((*IOLAB, "hygiene", "du", "--data", PLACE), "--depth", ("0", "11")),
    *refused((*IOLAB, "hygiene", "df"), "--data", ("",)),
    *refused((*IOLAB, "darshan", f"{PLACE}/x.darshan"), "--top", ("0", "1001")),
    Case((*IOLAB, "darshan", ""), "LOG"),
    *refused((*IOLAB, "darshan"), "--example", ("",)),
    *refused((*IOLAB, "profile"), "--top", ("0", "1001"), TRUE),
    *refused((*IOLAB, "diagnose"), "--top", ("0", "1001"), (f"{PLACE}/x.darshan",)),
    *refused((*IOLAB, "diagnose", f"{PLACE}/x.darshan"), "--top", ("1001",)),  # after INPUT
    *refused((*IOLAB, "diagnose", f"{PLACE}/x.darshan"), "--html", ("",)),
    # an empty folder: without the bound, "no *.darshan file below it", another sentence
    *refused((*IOLAB, "diagnose", PLACE), "--workers", ("0", "257")),
    *refused((*IOLAB, "diagnose", PLACE), "--slurm-jobs", ("0", "257")),
    *refused((*IOLAB, "diagnose", PLACE), "--config", ("",)),
    *refused((*IOLAB, "diagnose"), "--untraced-runs", ("-1", "11"), ("--", "true")),
    *refused((*IOLAB, "diagnose"), "--traced-runs", ("0", "11"), ("--", "true")),
    # --lessons 99 would be refused next, naming itself: no lab starts without the bound
    *refused((*IOLAB, "lab"), "--repeats", ("0", "51"), ("--lessons", "99")),
    Case((*IOLAB, "diagnose", ""), "INPUT"),
    # time, perception, bench: repeats
    *refused((*IOLAB, "time"), "--repeats", ("0", "101"), TRUE),
    *refused((*IOLAB, "time"), "--warmup", ("-1", "11"), TRUE),
    *refused((*IOLAB, "time"), "--label", ("",), TRUE),
    *refused((*IOLAB, "time"), "--data", ("",), TRUE),
    *refused(PERCEPTION, "--repeats", ("0", "11")),
    *refused(PERCEPTION, "--tests", (",",)),
    *refused((*IOLAB, "perception"), "--directory", ("",)),
    *refused((*IOLAB, "bench"), "--repeats", ("0", "21")),
    # paths that would otherwise mean the current directory
    *refused((*IOLAB, "locations", "--no-probe"), "--add", ("",)),
    Case((*IOLAB, "lustre", "status", ""), "PATH"),
    Case((*IOLAB, "lustre", "getstripe", ""), "FILE"),
    *refused((*IOLAB, "syscalls"), "--data", ("",), TRUE),
    *refused((*IOLAB, "over-sshfs"), "--data", ("",), TRUE),
    # demos
    *refused(TAR_TRAP, "--sizes", ("0", "-5", "50001")),
    *refused(TAR_TRAP, "--seed", ("-1", "4294967296")),
    *refused((demo("tar_lookup_trap.py"),), "--data", ("",)),
    *refused((demo("read_files.py"),), "--data", ("",)),
    *refused((demo("read_archive_random.py"), "--data", PLACE), "--seed", ("-1", "4294967296")),
    *refused((demo("read_archive_random.py"), "--data", PLACE), "--order-out", ("",)),
    *refused((demo("read_random_chunked.py"), "--data", PLACE), "--buffer", ("0", "100001")),
    *refused(SAMPLES, "--workers", ("-1", "257")),
    *refused(SAMPLES, "--batch-size", ("0", "129")),
    *refused(SAMPLES, "--limit", ("0", "100001")),
    *refused((demo("read_samples.py"), "--source", "files"), "--data", ("",)),
    *refused((demo("formats.py"), "--data", PLACE), "--repeats", ("0", "51")),
    *refused((demo("formats.py"),), "--data", ("",)),
    *refused((demo("io_patterns.py"), "small-reads"), "--data", ("",)),
    *refused(MPIIO_DEMO, "--block-size", ("4", "12", "67108872")),
    *refused(MPIIO_DEMO, "--blocks-per-rank", ("0", "1048577")),
    *refused(MPIIO_DEMO, "--hint", ("cb_nodes",)),
    *refused((demo("mpiio/mpiio_demo.py"),), "--directory", ("",)),
]

#: Within the bounds but beyond the login-node budget: refused, naming the one flag.
TOO_BIG: list[Case] = [
    Case(
        (*ACCELERATOR, "--workers", "0", "8"),
        "a DataLoader with 8 workers is too big for a shared login node",
    ),
    Case(
        (*IOLAB, "mpiio", "--ranks", "8"),
        "an MPI-IO comparison of 8 ranks writing 8 MiB is too big for a shared login node",
    ),
    Case(
        (*IOLAB, "mpiio", "--blocks-per-rank", "1048576"),
        "an MPI-IO comparison of 4 ranks writing 16384 MiB is too big for a shared login node",
    ),
]

#: Values at the ends of their ranges, accepted by a path that writes nothing: a dry run, or
#: --help after them (argparse reads every value before it, so each is checked first).
ACCEPTED: list[tuple[str, ...]] = [
    (*FIO, "--profile", "node", "--size-scale", "1000", "--runtime", "3600", FLAG),
    (*FIO, "--size-scale", "0.125", "--runtime", "1"),
    (*SWEEP, "--repeats", "10"),
    (*TAR_TRAP, "--sizes", "1", "50000", "--seed", "0", "--seed", "4294967295", "--help"),
    (
        demo("read_random_chunked.py"),
        "--data",
        PLACE,
        "--buffer",
        "1",
        "--buffer",
        "100000",
        "--seed",
        "4294967295",
        "--order-out",
        "order.txt",
        "--help",
    ),
    (
        *SAMPLES,
        "--workers",
        "0",
        "--workers",
        "256",
        "--batch-size",
        "128",
        "--limit",
        "100000",
        "--help",
    ),
    (demo("formats.py"), "--data", PLACE, "--repeats", "1", "--repeats", "50", "--help"),
    (
        *MPIIO_DEMO,
        "--block-size",
        "8",
        "--block-size",
        "67108864",
        "--blocks-per-rank",
        "1048576",
        "--hint",
        "cb_nodes=2",
        "--help",
    ),
]


@dataclass(frozen=True)
class Run:
    """A finished case: the process, its own directory, and its workspace (never made)."""

    proc: subprocess.CompletedProcess
    place: Path
    workspace: Path


def _run(argv: tuple[str, ...], root: Path) -> Run:
    """Run `argv` in root/place as its working directory, with root/workspace as workspace."""
    place, workspace = root / "place", root / "workspace"
    place.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in JOB_VARIABLES}
    env["IOLAB_WORKDIR"] = str(workspace)
    proc = subprocess.run(
        [sys.executable, *(part.replace(PLACE, str(place)) for part in argv)],
        cwd=place,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return Run(proc, place, workspace)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], Run]:
    """Every command line run once, as on a login node (no batch job), several at a time."""
    argvs = [case.argv for case in BAD + TOO_BIG] + ACCEPTED
    roots = [tmp_path_factory.mktemp("case") for _ in argvs]
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        return dict(zip(argvs, pool.map(_run, argvs, roots), strict=True))


def _assert_refused(run: Run, says: str) -> None:
    err = run.proc.stderr
    assert run.proc.returncode == 2, err
    assert "Traceback" not in err, err
    assert err.count("\n") == 1 and err.startswith(f"error: {says}"), err
    assert run.proc.stdout == ""
    assert list(run.place.iterdir()) == [] and not run.workspace.exists()


Runs = dict[tuple[str, ...], Run]


@pytest.mark.parametrize("case", BAD, ids=lambda case: case.id)
@pytest.mark.slow  # every command line runs once, in the module's `runs`
def test_a_value_out_of_range_is_one_sentence_before_any_work(case: Case, runs: Runs) -> None:
    _assert_refused(runs[case.argv], case.says)


@pytest.mark.parametrize("case", TOO_BIG, ids=lambda case: case.id)
@pytest.mark.slow  # every command line runs once, in the module's `runs`
def test_beyond_the_login_node_budget_is_refused_with_the_flag(case: Case, runs: Runs) -> None:
    _assert_refused(runs[case.argv], case.says)
    assert FLAG in runs[case.argv].proc.stderr


@pytest.mark.parametrize("argv", ACCEPTED, ids=lambda argv: Case(argv, "").id)
@pytest.mark.slow  # every command line runs once, in the module's `runs`
def test_values_at_the_ends_of_a_range_are_accepted(argv: tuple[str, ...], runs: Runs) -> None:
    run = runs[argv]
    assert run.proc.returncode == 0 and run.proc.stdout, run.proc.stderr
    assert list(run.place.iterdir()) == [] and not run.workspace.exists()


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each command's parser by name, and each lustre subcommand's as `lustre NAME`."""

    def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return dict(action.choices)

    commands = subparsers(build_parser())
    commands.update(
        {f"lustre {name}": parser for name, parser in subparsers(commands["lustre"]).items()}
    )
    return commands


def bounded_options() -> Iterator[tuple[str, BoundedNumber]]:
    """(command, type) of every numeric option of every command that has bounds."""
    for name, parser in command_parsers().items():
        for action in parser._actions:
            if isinstance(action.type, BoundedNumber):
                yield name, action.type


def values_given(command: str, option: str) -> list[float]:
    """The numbers BAD gives `option` of `python -m iolab command`."""
    values = []
    for case in BAD:
        argv = case.argv[len(IOLAB) :] if case.argv[: len(IOLAB)] == IOLAB else ()
        if argv[:1] == (command,) and option in argv:
            text = argv[argv.index(option) + 1]
            try:
                values.append(float(text))
            except ValueError:
                continue
    return values


@pytest.mark.parametrize(
    "command,bounded", list(bounded_options()), ids=lambda value: getattr(value, "option", value)
)
def test_every_bounded_option_is_tested(command: str, bounded: BoundedNumber) -> None:
    """BAD holds a value above every range, below every lower end, and nan for floats."""
    values = values_given(command, bounded.option)
    bounds = bounded.bounds
    assert any(value > bounds.high for value in values), (command, bounded.option)
    if bounds.low is not None:
        assert any(
            value < bounds.low or (bounds.above and value == bounds.low) for value in values
        ), (command, bounded.option)
    if bounded.kind is float:
        assert any(math.isnan(value) for value in values), (command, bounded.option)


@pytest.mark.parametrize("name,parser", list(command_parsers().items()))
def test_every_default_is_within_its_own_bounds(name: str, parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if action.type is None or action.default in (None, argparse.SUPPRESS):
            continue
        defaults = action.default if isinstance(action.default, list) else [action.default]
        for default in defaults:
            if default is not None:
                action.type(str(default))  # raises LabError if out of range


@pytest.mark.parametrize(
    "argv,dest,expected",
    [
        (["fio", "--size-scale", "1000", "--runtime", "3600"], "size_scale", 1000.0),
        (["fio", "--size-scale", "0.001", "--runtime", "1"], "runtime", 1),
        (["sweep", "--directory", "D", "--repeats", "1"], "repeats", 1),
        (
            [
                "mdrates",
                "--directory",
                "D",
                "-n",
                "1000000",
                "-P",
                "256",
                "--bytes",
                "1048576",
                "--iterations",
                "10",
            ],
            "iterations",
            10,
        ),
        (["mdrates", "--directory", "D", "--bytes", "0"], "bytes", 0),
        (
            [
                "checkpoint",
                "--size-mib",
                "262144",
                "--steps",
                "1000",
                "--step-s",
                "60",
                "--keep",
                "16",
            ],
            "step_s",
            60.0,
        ),
        (["checkpoint", "--step-s", "0", "--steps", "1"], "steps", 1),
        (
            [
                "accelerator",
                "--workers",
                "0",
                "256",
                "--compute-ms",
                "0",
                "10000",
                "--batch-size",
                "128",
                "--steps",
                "100000",
            ],
            "workers",
            [0, 256],
        ),
        (["accelerator", "--batch-size", "1", "--steps", "2"], "steps", 2),
        (
            ["mpiio", "--ranks", "64", "--block-size", "67108864", "--blocks-per-rank", "1048576"],
            "ranks",
            64,
        ),
        (["mpiio", "--ranks", "1", "--block-size", "8", "--blocks-per-rank", "1"], "block_size", 8),
        (["advise", "--mib", "4", "--files", "1000000"], "files", 1_000_000),
        (["advise", "--mib", "16384", "--files", "50"], "mib", 16384),
        (["hygiene", "du", "--top", "1000", "--depth", "10"], "depth", 10),
        (["hygiene", "du", "--top", "1", "--depth", "1"], "top", 1),
        (["darshan", "x.darshan", "--top", "1000"], "top", 1000),
        (["profile", "--top", "1", "--", "true"], "top", 1),
        (["diagnose", "--top", "1000", "x.darshan"], "top", 1000),
        (["time", "--repeats", "100", "--warmup", "10", "--", "true"], "warmup", 10),
        (["time", "--repeats", "1", "--warmup", "0", "--", "true"], "repeats", 1),
        (["perception", "--directory", "D", "--repeats", "10"], "repeats", 10),
        (["bench", "--repeats", "20"], "repeats", 20),
        (["locations", "--add", "."], "add", [Path(".")]),
    ],
)
def test_values_at_the_ends_of_a_range_are_read_in_process(
    argv: list[str], dest: str, expected: object
) -> None:
    assert getattr(build_parser().parse_args(argv), dest) == expected
