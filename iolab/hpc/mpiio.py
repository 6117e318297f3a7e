"""MPI-IO runs measured by what is deterministic: hints in effect and system calls.

demos/mpiio/mpiio_demo.py writes interleaved blocks from every rank to one shared file
(independently or collectively) or to one file per rank, reads them back and verifies them.
This module launches it with `mpiexec`, checks the written bytes again from Python, and
turns what the run reports into tables:

* hints: what was set (MPI.Info at open, or a ROMIO_HINTS file), what the open file reports
  back (`File.Get_info()`), and what MPICH prints with ROMIO_PRINT_HINTS=1;
* system calls: traced with strace (iolab.measure.syscalls), the pwrite64/pread64/write/read
  calls on the output file(s) are counted apart from everything else the interpreter and MPI
  do, per process, so the ranks that really wrote (the aggregators of collective I/O) are
  visible.

Counts, not bandwidth, are what a learner can check: on a shared two-core VM the MiB/s
figures change from run to run, while "collective I/O with one aggregator and a 16 MiB
buffer writes 64 MiB in 4 pwrite calls" holds every time. Timings come from untraced runs.

Output goes to a fresh scratch directory in the workspace that is removed afterwards, also
on Ctrl-C or SIGTERM, unless the caller names its own directory.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from iolab.core.capacity import check_capacity
from iolab.core.errors import Interrupted, LabError, interrupts_held, sigterm_as_interrupt
from iolab.core.lab_dirs import ensure_writable_dir, remove_tree, scratch_dir
from iolab.core.workspace import repo_root
from iolab.hpc.mpi_leftovers import (
    held_files,
    made_by_run,
    remove_held,
    remove_made,
    remove_sysv_segments,
)
from iolab.measure.frozen_tree import freeze, kill
from iolab.measure.strace_parse import READS, TRACE_OPTIONS, WRITES, TraceReader, unescape_strace
from iolab.measure.syscalls import strace_status

MODES = ("independent", "collective", "file-per-process")
DEMO = Path("demos") / "mpiio" / "mpiio_demo.py"
EXAMPLE_HINTS_FILE = Path("demos") / "mpiio" / "romio-hints.txt"
#: The demo's byte pattern: 8-byte word k of the shared file holds k XOR this constant.
PATTERN_XOR = 0x9E3779B97F4A7C15
WORD = 8
KIB = 1024
MIB = 1024**2
#: The hints the lesson explains, shown in every hints table even when left at their defaults.
LESSON_HINTS = (
    "striping_unit",
    "cb_config_list",
    "cb_nodes",
    "romio_cb_write",
    "romio_ds_write",
    "cb_buffer_size",
)
#: A run may not take longer than this (a hung MPI job must not hang a notebook).
RUN_TIMEOUT_S = 600
#: How long a stopped run's processes get to freeze, and then to end once killed: seconds
#: even on a busy login node, unless one is stuck in uninterruptible I/O.
STOP_TIMEOUT_S = 30

MISSING_MPIEXEC = (
    "mpiexec was not found next to {python} nor on PATH; install MPICH and mpi4py without root "
    "with `pip install mpich mpi4py`, or on a cluster `module load mpich` (or your site's MPI) "
    "and build mpi4py against it"
)
MISSING_MPI4PY = (
    "mpi4py is not installed for {python}; install it with `pip install mpich mpi4py` "
    "(no root needed), or `module load mpich` and `pip install mpi4py`"
)
_PRINTED_HINT = re.compile(r"^key = (\S+)\s+value = (.*?)\s*$")
_DATA_FD = re.compile(r"^-?\d+<(.*)>$")


# --------------------------------------------------------------------------- finding MPI


def find_mpiexec(python: str = sys.executable) -> str:
    """The mpiexec that belongs to this Python (a venv's MPICH wheel), else the one on PATH.

    The one next to the interpreter comes first: an mpiexec from another MPI on PATH would
    start ranks that cannot talk to the MPI library mpi4py was built against.
    """
    beside = Path(python).parent / "mpiexec"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("mpiexec")
    if found is None:
        raise LabError(MISSING_MPIEXEC.format(python=python))
    return found


def mpi_available() -> tuple[bool, str]:
    """Whether MPI runs can start here, and one sentence saying why (not)."""
    try:
        mpiexec = find_mpiexec()
    except LabError as err:
        return False, str(err)
    if importlib.util.find_spec("mpi4py") is None:
        return False, MISSING_MPI4PY.format(python=sys.executable)
    return True, f"MPI runs start with {mpiexec}"


# --------------------------------------------------------------------------- one run


@dataclass
class DemoRun:
    """One run of the demo: its settings, its JSON result and what was traced.

    `result` is the demo's JSON (hints read back, aggregators, pids, timings); `printed_hints`
    are the ROMIO_PRINT_HINTS lines (empty unless asked for); `file_hints` the ROMIO_HINTS
    file's values; `wrong_bytes` the bytes that Python, reading the files after the run,
    found different from the expected pattern. With trace=True `data_calls` counts calls on
    the output files per (pid, syscall) with their bytes, and `other_calls` every other
    traced file or descriptor call (interpreter, MPI library, pipes, shared memory).
    """

    label: str
    mode: str
    ranks: int
    block_size: int
    blocks_per_rank: int
    hints: dict[str, str]
    file_hints: dict[str, str]
    result: dict
    printed_hints: dict[str, str]
    wrong_bytes: int
    command: list[str]
    data_calls: pd.DataFrame | None = None
    other_calls: int | None = None
    stdout: str = field(default="", repr=False)

    @property
    def verified(self) -> bool:
        return bool(self.result.get("verified")) and self.wrong_bytes == 0

    @property
    def total_bytes(self) -> int:
        return self.ranks * self.block_size * self.blocks_per_rank


def read_hints_file(path: str | os.PathLike) -> dict[str, str]:
    """The `key value` lines of a ROMIO_HINTS file (comments and blank lines skipped)."""
    path = Path(path)
    if not path.is_file():
        raise LabError(
            f"the ROMIO_HINTS file {path} does not exist; MPICH would silently "
            f"ignore it, so give an existing file such as {EXAMPLE_HINTS_FILE}"
        )
    hints = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split(None, 1)
        if len(parts) != 2:
            raise LabError(
                f"line {number} of {path} is not `key value` (got {line.strip()!r}); "
                "write one hint per line, e.g. `cb_nodes 2`"
            )
        hints[parts[0]] = parts[1].strip()
    return hints


def parse_printed_hints(text: str) -> dict[str, str]:
    """The `key = K value = V` lines ROMIO_PRINT_HINTS=1 prints at each open, as a dict.

    MPICH prints one block per collective open (the demo opens twice: write, read back);
    the values are the same, so later blocks simply confirm earlier ones.
    """
    hints = {}
    for line in text.splitlines():
        match = _PRINTED_HINT.match(line.strip())
        if match:
            hints[match.group(1)] = match.group(2)
    return hints


def run_demo(
    ranks: int,
    mode: str,
    out_dir: str | os.PathLike | None = None,
    hints: Mapping[str, str] | None = None,
    hints_file: str | os.PathLike | None = None,
    print_hints: bool = False,
    block_size: int = 4 * KIB,
    blocks_per_rank: int = 256,
    trace: bool = False,
    label: str | None = None,
) -> DemoRun:
    """Run `mpiexec -n ranks python mpiio_demo.py --mode mode ... --json` and collect the evidence.

    Without out_dir the files go to a fresh workspace scratch directory that is removed
    afterwards (also on Ctrl-C or SIGTERM); with out_dir they stay there for the caller.
    The demo's own check and an independent one from Python must both pass, else LabError.
    """
    _check_settings(ranks, mode, block_size, blocks_per_rank)
    hints = {str(k): str(v) for k, v in (hints or {}).items()}
    file_hints = read_hints_file(hints_file) if hints_file is not None else {}
    total = ranks * block_size * blocks_per_rank
    with sigterm_as_interrupt(), _output_dir(out_dir) as directory:
        check_capacity(directory, total * 2, ranks + 2)
        cmd = _demo_command(ranks, mode, directory, hints, block_size, blocks_per_rank)
        env = _demo_env(hints_file, print_hints)
        if trace:
            stdout, stderr, code, data_calls, other = _traced(cmd, env, directory)
        else:
            stdout, stderr, code = _untraced(cmd, env)
            data_calls, other = None, None
        result = _result(stdout, stderr, code, cmd)
        wrong = count_wrong_bytes(directory, mode, ranks, block_size, blocks_per_rank)
    run = DemoRun(
        label or mode,
        mode,
        ranks,
        block_size,
        blocks_per_rank,
        hints,
        file_hints,
        result,
        parse_printed_hints(stdout),
        wrong,
        cmd,
        data_calls,
        other,
        stdout,
    )
    if not run.verified:
        raise LabError(
            f"the {mode} run with {ranks} ranks wrote wrong data ({wrong} bytes differ "
            "from the expected pattern); check the file system and the hints"
        )
    return run


def _check_settings(ranks: int, mode: str, block_size: int, blocks_per_rank: int) -> None:
    if mode not in MODES:
        raise LabError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if not 1 <= ranks <= 64:
        raise LabError(f"{ranks} ranks is out of range; use 1 to 64 (on a login node 2 to 8)")
    if block_size <= 0 or block_size % WORD:
        raise LabError(f"block size {block_size} must be a positive multiple of {WORD} bytes")
    if blocks_per_rank <= 0:
        raise LabError("blocks per rank must be at least 1")


@contextlib.contextmanager
def _output_dir(out_dir: str | os.PathLike | None) -> Iterator[Path]:
    """The caller's directory, or a workspace scratch directory removed however the run ends."""
    if out_dir is not None:
        yield ensure_writable_dir(Path(out_dir))
        return
    directory = scratch_dir("mpiio")
    try:
        yield directory
    except KeyboardInterrupt as interrupt:  # true once `finally` has removed the directory
        raise Interrupted("nothing half-written is kept") from interrupt
    finally:
        remove_tree(directory)


def _demo_command(
    ranks: int,
    mode: str,
    directory: Path,
    hints: Mapping[str, str],
    block_size: int,
    blocks_per_rank: int,
) -> list[str]:
    ok, reason = mpi_available()
    if not ok:
        raise LabError(reason)
    cmd = [
        find_mpiexec(),
        "-n",
        str(ranks),
        sys.executable,
        str(repo_root() / DEMO),
        "--directory",
        str(directory),
        "--mode",
        mode,
        "--block-size",
        str(block_size),
        "--blocks-per-rank",
        str(blocks_per_rank),
        "--json",
    ]
    for key, value in hints.items():
        cmd += ["--hint", f"{key}={value}"]
    return cmd


#: Hydra's launcher and resource manager for the demo: it runs on this node, its proxies
#: forked by mpiexec. Inside a Slurm job Hydra would otherwise start them through srun, under
#: slurmstepd, out of reach of _stop_run; and a killed srun can leave its ranks running
#: (radical-cybertools/radical.pilot issue 3267, 2024-11-26). Other MPIs ignore these.
LOCAL_LAUNCH = {"HYDRA_LAUNCHER": "fork", "HYDRA_RMK": "user"}


def _demo_env(hints_file: str | os.PathLike | None, print_hints: bool) -> dict[str, str]:
    """This environment without inherited ROMIO settings, plus the ones asked for, launched
    on this node (LOCAL_LAUNCH)."""
    env = {k: v for k, v in os.environ.items() if k not in ("ROMIO_HINTS", "ROMIO_PRINT_HINTS")}
    env.update(LOCAL_LAUNCH)
    if hints_file is not None:
        env["ROMIO_HINTS"] = str(Path(hints_file).resolve())
    if print_hints:
        env["ROMIO_PRINT_HINTS"] = "1"
    return env


def _untraced(cmd: list[str], env: dict[str, str]) -> tuple[str, str, int]:
    proc = _start(cmd, env)
    return proc.stdout, proc.stderr, proc.returncode


def _start(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run cmd (mpiexec, or strace running it) to its end; on Ctrl-C, SIGTERM or a timeout,
    stop every process it started and remove what they held (_stop_run).

    Started with interrupts held back, so that a Ctrl-C cannot land between the launcher's
    start and the handle that stops it: it is raised once the handle is there.
    """
    proc = None
    try:
        with interrupts_held():
            proc = subprocess.Popen(
                cmd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                start_new_session=True,
            )
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        assert proc is not None  # only communicate() times out
        _stop_run(proc)
        raise LabError(
            f"the MPI run did not finish within {RUN_TIMEOUT_S} s; run the command by "
            f"hand to see where it hangs: {' '.join(cmd)}"
        ) from None
    except BaseException:
        if proc is not None:
            _stop_run(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _stop_run(proc: subprocess.Popen) -> None:
    """Freeze the run's whole process tree, note the files of MPICH_FILES its processes hold,
    kill them all, then remove those files and the System V segments they made.

    Stopped politely instead (SIGTERM), Hydra removes its topology file and its ranks their
    shared memory, but not when the signal comes while the ranks are in MPI_Init: Hydra then
    hung until it was killed and left both (iolab.measure.frozen_tree). A second Ctrl-C waits
    until this is done.
    """
    with interrupts_held():
        tree = freeze(proc.pid, STOP_TIMEOUT_S)
        try:
            held = held_files(tree.pids)
        finally:
            kill(tree, STOP_TIMEOUT_S)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=STOP_TIMEOUT_S)
        remove_held(held)
        remove_sysv_segments(tree.pids)


def _result(stdout: str, stderr: str, code: int, cmd: list[str]) -> dict:
    """The demo's JSON line, or a LabError quoting its last message."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    last = (stderr.strip().splitlines() or stdout.strip().splitlines() or ["no output"])[-1]
    raise LabError(
        f"the MPI demo failed (exit {code}: {last}); run it by hand to see why: "
        f"{' '.join(cmd[:3])} ... {DEMO}"
    )


# --------------------------------------------------------------------------- tracing


def _traced(cmd: list[str], env: dict[str, str], directory: Path):
    """Run cmd under `strace -f -y` and count the reads and writes on files in directory."""
    status = strace_status()
    if not status.available or status.path is None:  # an available strace has its path
        raise LabError(status.reason)
    roots = tuple(dict.fromkeys((os.path.abspath(directory), os.path.realpath(directory))))
    tally: Counter[tuple[int, str]] = Counter()
    nbytes: Counter[tuple[int, str]] = Counter()
    other = 0
    with _trace_file() as trace_file:
        try:
            proc = _start([status.path, *TRACE_OPTIONS, "-o", str(trace_file), "--", *cmd], env)
        except BaseException:
            remove_made(made_by_run(trace_file))
            raise
        with open(trace_file, encoding="utf-8", errors="surrogateescape") as lines:
            for call in TraceReader().calls(lines):
                path = _descriptor_path(call.args[0]) if call.args else None
                on_data = path is not None and any(path.startswith(r + "/") for r in roots)
                if on_data and call.syscall in READS | WRITES:
                    tally[(int(call.pid), call.syscall)] += 1
                    nbytes[(int(call.pid), call.syscall)] += max(call.ret or 0, 0)
                elif not on_data:
                    other += 1
    rows = [(pid, name, calls, nbytes[(pid, name)]) for (pid, name), calls in sorted(tally.items())]
    frame = pd.DataFrame(rows, columns=["pid", "syscall", "calls", "bytes"])
    return proc.stdout, proc.stderr, proc.returncode, frame, other


@contextlib.contextmanager
def _trace_file() -> Iterator[Path]:
    directory = scratch_dir("mpiio-strace")
    try:
        yield directory / "trace.txt"
    finally:
        remove_tree(directory)


def _descriptor_path(arg: str) -> str | None:
    """The path strace -y shows behind a descriptor argument such as `29</dir/shared.dat>`."""
    match = _DATA_FD.match(arg)
    return unescape_strace(match.group(1)) if match else None


# --------------------------------------------------------------------------- checking the bytes


def count_wrong_bytes(
    directory: str | os.PathLike, mode: str, ranks: int, block_size: int, blocks_per_rank: int
) -> int:
    """Bytes of the output files that differ from the pattern (a missing file counts fully).

    Checked from the file's side, independently of the demo: word k of the shared file must
    hold k XOR PATTERN_XOR; rank r's own file holds its blocks in order, i.e. the shared
    file's words of blocks r, r+P, r+2P, ...
    """
    directory = Path(directory)
    if mode == "file-per-process":
        return sum(
            _wrong_in(
                directory / f"rank-{r:04d}.dat",
                _rank_words(r, ranks, block_size),
                block_size * blocks_per_rank,
            )
            for r in range(ranks)
        )
    return _wrong_in(
        directory / "shared.dat",
        lambda first, n: np.arange(first, first + n, dtype=np.uint64),
        ranks * block_size * blocks_per_rank,
    )


def _rank_words(rank: int, ranks: int, block_size: int):
    """For rank's own file: the shared-file word numbers of its words first..first+n-1."""
    per_block = block_size // WORD

    def words(first: int, n: int) -> np.ndarray:
        local = np.arange(first, first + n, dtype=np.uint64)
        block, within = local // np.uint64(per_block), local % np.uint64(per_block)
        return (block * np.uint64(ranks) + np.uint64(rank)) * np.uint64(per_block) + within

    return words


def _wrong_in(path: Path, word_numbers, size: int, chunk_words: int = 2 * MIB) -> int:
    if not path.is_file():
        return size
    wrong = abs(path.stat().st_size - size)
    with open(path, "rb") as handle:
        for first in range(0, min(size, path.stat().st_size) // WORD, chunk_words):
            got = np.frombuffer(handle.read(chunk_words * WORD), dtype="<u8")
            expected = word_numbers(first, len(got)) ^ np.uint64(PATTERN_XOR)
            wrong += int(np.count_nonzero(got != expected)) * WORD
    return wrong


# --------------------------------------------------------------------------- tables


def hints_frame(run: DemoRun, keys: Sequence[str] | None = None) -> pd.DataFrame:
    """hint, value_set, value_read_back, source for the lesson's six hints and all set ones.

    source says where the value in effect came from: "MPI.Info" (set in code; it wins over
    the file), "ROMIO_HINTS file", or "default" (nobody set it).
    """
    read_back = run.result.get("hints", {})
    names = (
        list(keys)
        if keys is not None
        else list(dict.fromkeys([*LESSON_HINTS, *run.hints, *run.file_hints]))
    )
    rows = []
    for name in names:
        if name in run.hints:
            source, value_set = "MPI.Info", run.hints[name]
        elif name in run.file_hints:
            source, value_set = "ROMIO_HINTS file", run.file_hints[name]
        else:
            source, value_set = "default", ""
        rows.append((name, value_set, read_back.get(name, "(not reported)"), source))
    return pd.DataFrame(rows, columns=["hint", "value_set", "value_read_back", "source"])


def syscall_frame(runs: Sequence[DemoRun]) -> pd.DataFrame:
    """Per traced run: data-file pwrite/pread calls and bytes, and which ranks wrote.

    Writes are counted as pwrite64 plus write (and their vector forms); ranks are found by
    mapping the writing pids to the pids each rank reported. `other_calls` are the traced file
    and descriptor calls that did not touch the output files.
    """
    rows = []
    for run in runs:
        if run.data_calls is None:
            raise LabError(f"the run {run.label!r} was not traced; run it with trace=True")
        calls = run.data_calls
        writes = calls[calls["syscall"].isin(WRITES)]
        reads = calls[calls["syscall"].isin(READS)]
        rank_of = {pid: rank for rank, pid in enumerate(run.result["pids"])}
        writers = sorted(rank_of[pid] for pid in writes["pid"].unique() if pid in rank_of)
        rows.append(
            {
                "run": run.label,
                "mode": run.mode,
                "ranks": run.ranks,
                "data_bytes": run.total_bytes,
                "data_write_calls": int(writes["calls"].sum()),
                "data_read_calls": int(reads["calls"].sum()),
                "data_write_bytes": int(writes["bytes"].sum()),
                "data_read_bytes": int(reads["bytes"].sum()),
                "writer_ranks": " ".join(map(str, writers)),
                "aggregators_reported": " ".join(map(str, run.result.get("aggregators", []))),
                "other_calls": run.other_calls,
            }
        )
    return pd.DataFrame(rows)


def timing_frame(runs: Sequence[DemoRun]) -> pd.DataFrame:
    """Wall time and bandwidth of untraced runs: shown to look at, never asserted."""
    return pd.DataFrame(
        [
            {
                "run": run.label,
                "mode": run.mode,
                "ranks": run.ranks,
                "data_bytes": run.total_bytes,
                "write_s": run.result["write_s"],
                "read_s": run.result["read_s"],
                "write_MiBps": run.result["write_MiBps"],
                "read_MiBps": run.result["read_MiBps"],
                "verified": run.verified,
            }
            for run in runs
        ]
    )


def collective_writes_one_aggregator(total_bytes: int, cb_buffer_size: int) -> int:
    """pwrite calls of a collective write with one aggregator: one per cb_buffer_size piece."""
    return math.ceil(total_bytes / cb_buffer_size)


def sieving_writes(ranks: int, total_bytes: int, ind_wr_buffer_size: int = 512 * KIB) -> int:
    """pwrite calls of independent interleaved writes with data sieving.

    Each rank's blocks span the whole file, so each rank writes the file back once in
    windows of ind_wr_buffer_size (ROMIO's default 512 KiB).
    """
    return ranks * math.ceil(total_bytes / ind_wr_buffer_size)


#: The runs the `mpiio` subcommand and the notebook compare: label, mode, hints.
COMPARISON: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("file-per-process", "file-per-process", {}),
    ("independent", "independent", {}),
    ("independent, no data sieving", "independent", {"romio_ds_write": "disable"}),
    ("collective", "collective", {}),
    ("collective, 2 aggregators", "collective", {"cb_config_list": "*:2", "cb_nodes": "2"}),
)


def compare_modes(
    ranks: int = 4, block_size: int = 4 * KIB, blocks_per_rank: int = 256, trace: bool = True
) -> tuple[list[DemoRun], list[DemoRun]]:
    """Run every COMPARISON entry untraced (for timings) and, if trace, traced (for counts)."""
    timed = [
        run_demo(
            ranks,
            mode,
            hints=hints,
            block_size=block_size,
            blocks_per_rank=blocks_per_rank,
            label=label,
        )
        for label, mode, hints in COMPARISON
    ]
    traced = (
        [
            run_demo(
                ranks,
                mode,
                hints=hints,
                block_size=block_size,
                blocks_per_rank=blocks_per_rank,
                label=label,
                trace=True,
            )
            for label, mode, hints in COMPARISON
        ]
        if trace
        else []
    )
    return timed, traced
