"""MPI-IO demo and iolab.hpc.mpiio: bytes verified independently, hints read back, exact call
counts.

The counts asserted exactly are the ones ROMIO's algorithms fix (MPICH 5.0.2, one node):
a collective write with one aggregator makes one pwrite per cb_buffer_size piece; data
sieving makes one pwrite per 512 KiB window per rank; without sieving every block is one
pwrite. The reads of data sieving race with other ranks' writes and vary by a few calls, so
they are not asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ctrl_c_at_start import popen_then_ctrl_c
from processes import processes_naming

from iolab.cli.mpiio import setup_parser
from iolab.core.errors import LabError
from iolab.hpc import mpi_leftovers, mpiio
from iolab.measure.process_tree import descendants, process_state

ROOT = Path(__file__).resolve().parent.parent
needs_mpi = pytest.mark.needs("mpi")
needs_strace = pytest.mark.needs("strace")

KIB = 1024
BLOCK = 4 * KIB


#: The longest a stopped run may take by the lab's own bounds, plus a margin for a loaded
#: machine: STOP_TIMEOUT_S to freeze the run, then to let it end once killed, then for its
#: output (mpiio._stop_run); whatever a late stop leaves is still checked.
STOPPED_WITHIN_S = 3 * mpiio.STOP_TIMEOUT_S + 30


def expected_shared_words(ranks: int, blocks_per_rank: int, block: int = BLOCK) -> np.ndarray:
    """The specification: word k of the shared file holds k XOR 0x9E3779B97F4A7C15."""
    words = ranks * blocks_per_rank * block // 8
    return np.arange(words, dtype=np.uint64) ^ np.uint64(0x9E3779B97F4A7C15)


def read_words(path: Path) -> np.ndarray:
    return np.fromfile(path, dtype="<u8")


# --------------------------------------------------------------------------- without MPI


def test_missing_mpiexec_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LabError, match=r"pip install mpich mpi4py.*module load mpich"):
        mpiio.find_mpiexec(python=str(tmp_path / "python"))


def test_mpiexec_beside_the_interpreter_comes_first(tmp_path, monkeypatch):
    beside = tmp_path / "mpiexec"
    beside.write_text("#!/bin/sh\n")
    beside.chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert mpiio.find_mpiexec(python=str(tmp_path / "python")) == str(beside)


def test_hints_file_parsing_and_errors(tmp_path):
    good = tmp_path / "hints.txt"
    good.write_text("# comment\n\ncb_nodes 2   # trailing comment\ncb_config_list *:2\n")
    assert mpiio.read_hints_file(good) == {"cb_nodes": "2", "cb_config_list": "*:2"}
    example = mpiio.read_hints_file(ROOT / mpiio.EXAMPLE_HINTS_FILE)
    assert set(example) == set(mpiio.LESSON_HINTS)
    with pytest.raises(LabError, match="does not exist"):
        mpiio.read_hints_file(tmp_path / "missing.txt")
    bad = tmp_path / "bad.txt"
    bad.write_text("cb_nodes\n")
    with pytest.raises(LabError, match="line 1 .* not `key value`"):
        mpiio.read_hints_file(bad)


def test_printed_hints_are_parsed():
    text = (
        "key = cb_buffer_size            value = 1048576   \n"
        "key = romio_filesystem_type     value = UFS: Generic ROMIO driver\n"
        '{"mode": "collective"}\n'
    )
    assert mpiio.parse_printed_hints(text) == {
        "cb_buffer_size": "1048576",
        "romio_filesystem_type": "UFS: Generic ROMIO driver",
    }


def test_wrong_bytes_are_counted_from_the_file(tmp_path):
    words = expected_shared_words(2, 3)
    words.tofile(tmp_path / "shared.dat")
    assert mpiio.count_wrong_bytes(tmp_path, "collective", 2, BLOCK, 3) == 0
    words[100] ^= np.uint64(1)
    words.tofile(tmp_path / "shared.dat")
    assert mpiio.count_wrong_bytes(tmp_path, "collective", 2, BLOCK, 3) == 8
    assert mpiio.count_wrong_bytes(tmp_path, "file-per-process", 2, BLOCK, 3) == 2 * 3 * BLOCK


def test_predicted_counts():
    assert mpiio.collective_writes_one_aggregator(64 * 1024**2, 16 * 1024**2) == 4
    assert mpiio.collective_writes_one_aggregator(5 * 1024**2, 2 * 1024**2) == 3
    assert mpiio.sieving_writes(4, 64 * 1024**2) == 512


def test_bad_settings_are_refused():
    with pytest.raises(LabError, match="unknown mode"):
        mpiio.run_demo(2, "shared")
    with pytest.raises(LabError, match="multiple of 8"):
        mpiio.run_demo(2, "collective", block_size=100)


def test_demo_help_and_bad_hint():
    demo = str(ROOT / mpiio.DEMO)
    shown = subprocess.run([sys.executable, demo, "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and "--mode" in shown.stdout
    bad = subprocess.run(
        [sys.executable, demo, "--directory", "x", "--hint", "cb_nodes"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0
    assert bad.stderr.strip().splitlines() == [
        "error: --hint 'cb_nodes' is not KEY=VALUE, e.g. --hint cb_nodes=2"
    ]


# --------------------------------------------------------------------------- with MPI


@needs_mpi
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("mode", mpiio.MODES)
@pytest.mark.slow
def test_every_byte_is_written_where_it_belongs(tmp_path, ranks, mode):
    blocks = 16
    run = mpiio.run_demo(ranks, mode, out_dir=tmp_path, blocks_per_rank=blocks)
    assert run.verified and run.result["bytes_written"] == ranks * blocks * BLOCK
    expected = expected_shared_words(ranks, blocks)
    if mode == "file-per-process":
        # Rank r's file holds the shared file's blocks r, r+P, r+2P, ... in order.
        by_block = expected.reshape(blocks, ranks, BLOCK // 8)
        for rank in range(ranks):
            got = read_words(tmp_path / f"rank-{rank:04d}.dat")
            np.testing.assert_array_equal(got, by_block[:, rank, :].ravel())
        assert not (tmp_path / "shared.dat").exists()
    else:
        np.testing.assert_array_equal(read_words(tmp_path / "shared.dat"), expected)
    assert sorted(run.result["pids"]) == sorted(set(run.result["pids"]))


@needs_mpi
def test_demo_alone_prints_verified(tmp_path):
    proc = subprocess.run(
        [
            mpiio.find_mpiexec(),
            "-n",
            "2",
            sys.executable,
            str(ROOT / mpiio.DEMO),
            "--directory",
            str(tmp_path),
            "--mode",
            "independent",
            "--blocks-per-rank",
            "8",
            "--remove",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "verified" in proc.stdout and proc.stdout.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@needs_mpi
@pytest.mark.slow
def test_cb_nodes_needs_cb_config_list_on_one_node():
    alone = mpiio.run_demo(4, "collective", hints={"cb_nodes": "2"}, blocks_per_rank=8)
    assert alone.result["hints"]["cb_nodes"] == "1"
    assert alone.result["aggregators"] == [0]
    both = mpiio.run_demo(
        4, "collective", hints={"cb_nodes": "2", "cb_config_list": "*:2"}, blocks_per_rank=8
    )
    assert both.result["hints"]["cb_nodes"] == "2"
    assert both.result["hints"]["cb_config_list"] == "*:2"
    assert both.result["aggregators"] == [0, 1]


@needs_mpi
def test_hints_from_file_info_and_print_hints():
    example = ROOT / mpiio.EXAMPLE_HINTS_FILE
    run = mpiio.run_demo(
        2,
        "collective",
        hints={"cb_buffer_size": "1048576"},
        hints_file=example,
        print_hints=True,
        blocks_per_rank=8,
    )
    back = run.result["hints"]
    assert back["romio_ds_write"] == "disable"  # from the file
    assert back["striping_unit"] == "1048576"  # echoed, though UFS ignores it
    assert back["cb_buffer_size"] == "1048576"  # Info wins over the file's 4194304
    assert run.printed_hints["cb_buffer_size"] == "1048576"
    assert run.printed_hints["romio_ds_write"] == "disable"
    table = mpiio.hints_frame(run).set_index("hint")
    assert list(table.index) == list(mpiio.LESSON_HINTS)
    assert table.loc["cb_buffer_size", "source"] == "MPI.Info"
    assert table.loc["cb_nodes", "source"] == "ROMIO_HINTS file"
    assert table.loc["cb_nodes", "value_read_back"] == "2"
    quiet = mpiio.run_demo(2, "collective", blocks_per_rank=8)
    assert quiet.printed_hints == {}
    assert quiet.result["hints"]["cb_buffer_size"] == "16777216"
    assert mpiio.hints_frame(quiet).set_index("hint").loc["cb_nodes", "source"] == "default"


@pytest.mark.slow
@needs_mpi
@needs_strace
@pytest.mark.parametrize("ranks", [2, 4])
def test_syscall_counts_on_the_data_file(ranks):
    blocks = 256  # 1 MiB per rank
    total = ranks * blocks * BLOCK
    runs = [
        mpiio.run_demo(ranks, "independent", blocks_per_rank=blocks, trace=True),
        mpiio.run_demo(
            ranks,
            "independent",
            hints={"romio_ds_write": "disable"},
            blocks_per_rank=blocks,
            trace=True,
            label="no sieving",
        ),
        mpiio.run_demo(
            ranks,
            "collective",
            hints={"cb_buffer_size": str(256 * KIB)},
            blocks_per_rank=blocks,
            trace=True,
        ),
        mpiio.run_demo(
            ranks,
            "collective",
            hints={"cb_buffer_size": str(256 * KIB), "cb_nodes": "2", "cb_config_list": "*:2"},
            blocks_per_rank=blocks,
            trace=True,
            label="2 aggregators",
        ),
    ]
    table = mpiio.syscall_frame(runs).set_index("run")
    sieving, plain, collective, two = (table.iloc[i] for i in range(4))
    assert (
        sieving["data_write_calls"]
        == mpiio.sieving_writes(ranks, total)
        == ranks * total // (512 * KIB)
    )
    assert sieving["data_write_bytes"] > total  # windows are written back whole
    assert plain["data_write_calls"] == ranks * blocks
    assert plain["data_write_bytes"] == total
    assert plain["data_read_calls"] == ranks  # read-back: one 4 MiB sieve window each
    assert collective["data_write_calls"] == mpiio.collective_writes_one_aggregator(
        total, 256 * KIB
    )
    assert collective["data_read_calls"] == collective["data_write_calls"]
    assert collective["writer_ranks"] == "0"
    assert two["writer_ranks"] == "0 1" == two["aggregators_reported"]
    assert two["data_write_calls"] == collective["data_write_calls"]
    assert collective["data_write_calls"] * 50 < plain["data_write_calls"]
    assert all(table["other_calls"] > 0)


@pytest.mark.slow
@needs_mpi
def test_cli_compares_modes_without_trace(capsys):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    setup_parser(sub)
    args = parser.parse_args(["mpiio", "--ranks", "2", "--blocks-per-rank", "8", "--no-trace"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "every run verified byte for byte" in out
    for label, _, _ in mpiio.COMPARISON:
        assert f"| {label}" in out


def start_demo(workspace: Path, arguments: str) -> subprocess.Popen:
    """mpiio.run_demo(arguments) in a process of its own, as the CLI runs it (one sentence and
    exit 130 on SIGTERM), with `workspace` as its IOLAB_WORKDIR."""
    script = (
        "from iolab.hpc import mpiio; from iolab.core.errors import run_cli; "
        f"run_cli(lambda: mpiio.run_demo({arguments}) and 0)"
    )
    return subprocess.Popen(
        [sys.executable, "-c", script],
        text=True,
        env={**os.environ, "IOLAB_WORKDIR": str(workspace)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


#: What a Slurm job's environment tells Hydra: it then starts its proxies through srun.
IN_A_SLURM_JOB = {
    "SLURM_JOB_ID": "7",
    "SLURM_JOBID": "7",
    "SLURM_JOB_NODELIST": "localhost",
    "SLURM_NODELIST": "localhost",
    "SLURM_TASKS_PER_NODE": "2",
    "SLURM_JOB_NUM_NODES": "1",
    "SLURM_NNODES": "1",
}


@needs_mpi
def test_inside_a_slurm_job_the_ranks_still_start_below_the_lab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a batch job Hydra would start its proxy through srun, under slurmstepd, where a
    stop cannot reach it (tried here: Hydra then hung when srun failed). A stand-in srun that
    fails and leaves a mark must never be called."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    called = tmp_path / "srun-called"
    (bin_dir / "srun").write_text(f"#!/bin/sh\ntouch '{called}'\nexit 1\n")
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for name, value in IN_A_SLURM_JOB.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(mpiio, "RUN_TIMEOUT_S", 60)  # a hung Hydra fails the test in a minute
    run = mpiio.run_demo(2, "independent", out_dir=tmp_path / "out", blocks_per_rank=4)
    assert run.wrong_bytes == 0 and not called.exists()


@pytest.mark.slow
@needs_mpi
def test_sigterm_stops_every_rank_and_removes_the_files(tmp_path):
    workspace = tmp_path / "ws"
    proc = start_demo(
        workspace, "4, 'independent', hints={'romio_ds_write': 'disable'}, blocks_per_rank=16384"
    )
    deadline = time.monotonic() + 60
    while not list(workspace.glob("tmp/mpiio-*/shared.dat")) and proc.poll() is None:
        assert time.monotonic() < deadline, "the demo never started writing"
        time.sleep(0.05)
    # The files the run's processes hold, read as the lab reads them.
    held = mpi_leftovers.held_files(descendants(proc.pid))
    assert any(mpi_leftovers.MPICH_SEGMENT_PREFIX in path for path, _ in held), (
        "MPICH's ranks on one node share memory: the test should see a segment"
    )
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=STOPPED_WITHIN_S)
    assert proc.returncode == 130, err
    assert err.strip() == "interrupted: nothing half-written is kept."
    assert list(workspace.glob("tmp/mpiio-*")) == []
    assert processes_naming(str(workspace)) == []
    left = [path for path, inode in held if os.path.exists(path) and os.stat(path).st_ino == inode]
    assert left == [], f"the stopped run left MPICH's files behind: {left}"


@needs_mpi
@pytest.mark.slow
def test_the_notebooks_first_cell_leaves_no_shared_memory_when_its_kernel_is_stopped():
    """Notebook 08's set-up cell runs in the Jupyter kernel, which is stopped without MPI's
    finalisation: had it initialised MPI (a singleton), MPICH's /dev/shm/mpich_shm_<pid>_0
    would stay behind on a shared login node after every run of the notebook."""
    import json

    cells = json.loads((ROOT / "notebooks" / "08-mpi-io.ipynb").read_text())["cells"]
    setup = next(
        "".join(cell["source"])
        for cell in cells
        if cell["cell_type"] == "code" and "mpi_available" in "".join(cell["source"])
    )
    program = "import os\n" + setup + "\nprint('PID', os.getpid(), flush=True)\nos._exit(0)\n"
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=ROOT / "notebooks",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "MPICH" in done.stdout or "MPI" in done.stdout, done.stdout
    pid = int(done.stdout.split("PID")[1].split()[0])
    left = [
        p for p in Path("/dev/shm").glob(f"mpich_shm_{pid:x}_*") if p.stat().st_uid == os.getuid()
    ]
    for segment in left:  # named after our own child's pid, owned by us: ours to remove
        segment.unlink()
    assert not left, f"the set-up cell left {left}"


#: Moments to stop a traced run at, by what its trace shows it has made: Hydra's topology
#: file, a rank's shared memory (MPI_Init under way), the data file (writing).
STOP_AFTER = {
    "topology": "hydra_hwloc_xmlfile_",
    "shared memory": "mpich_shm_",
    "UCX shared memory": "ucx_shm_posix_",
    "data": "shared",
}


def _mpich_device() -> str:
    """The devices this MPICH was built with (`mpichversion`), e.g. "ch4:ucx ofi"."""
    version = Path(mpiio.find_mpiexec()).parent / "mpichversion"
    if not version.exists():
        return ""
    shown = subprocess.run([str(version)], capture_output=True, text=True, timeout=30).stdout
    return next((line.split(":", 1)[1] for line in shown.splitlines() if "Device" in line), "")


@pytest.mark.slow
@needs_mpi
@pytest.mark.needs("strace")
@pytest.mark.parametrize("moment", sorted(STOP_AFTER))
def test_a_traced_run_stopped_leaves_nothing_of_mpich(moment: str, tmp_path: Path) -> None:
    """Stopped under strace, the run removes what MPICH made outside its folder: Hydra,
    stopped under strace, left /tmp/hydra_hwloc_xmlfile_* behind, and a rank stopped before
    mapping its segment left /dev/shm/mpich_shm_* (a few MiB each, on a login node shared by
    everybody). The files checked are the ones this run's own trace shows it created, so other
    MPI runs on the machine cannot confuse the test."""
    if moment == "UCX shared memory" and "ucx" not in _mpich_device():
        pytest.skip("this MPICH was built without UCX (mpichversion: Device)")
    workspace = tmp_path / "ws"
    # 65,536 traced writes: seconds of work after MPI_Init, so the stop, sent once the trace
    # shows the moment, cannot come after the run has finished (it did with 16 writes)
    proc = start_demo(
        workspace,
        "2, 'independent', hints={'romio_ds_write': 'disable'}, block_size=512, "
        "blocks_per_rank=32768, trace=True",
    )
    made = mpi_leftovers.MadeByRun()
    seen = False
    deadline = time.monotonic() + 60
    while proc.poll() is None and not seen:
        assert time.monotonic() < deadline, f"the traced run never made its {moment} file"
        for trace in workspace.glob("tmp/mpiio-strace-*/trace.txt"):
            if STOP_AFTER[moment] not in trace.read_text(errors="replace"):
                continue  # the cheap look first: parsing the whole trace each time lags
            # read after the look, so it holds at least that much of the trace; and stop only
            # once Hydra's file is in it ("shared" can appear in the trace before that)
            made = mpi_leftovers.made_by_run(trace)
            seen = any("hydra_hwloc_xmlfile_" in path for path in made.files)
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be stopped: nothing was tested"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=STOPPED_WITHIN_S)
    assert proc.returncode == 130, err
    assert any("hydra_hwloc_xmlfile_" in path for path in made.files), made.files
    assert [path for path in made.files if os.path.lexists(path)] == []
    assert [
        segment.shmid
        for segment in mpi_leftovers.sysv_segments()
        if segment.creator_pid in made.pids
        and not segment.marked_for_removal
        and segment.attached == 0
    ] == []
    assert list(workspace.glob("tmp/mpiio*")) == []


#: A stand-in for a launcher: a shell that ignores SIGTERM (as Hydra did, signalled while its
#: ranks were in MPI_Init) with a child in a session of its own (as Hydra starts its ranks)
#: that holds a file named like MPICH's shared memory open.
HOLDING = "trap '' TERM; setsid sh -c 'exec 3<\"$0\"; sleep 60' \"$0\" & wait"


def test_a_stopped_run_removes_what_its_processes_held_and_nothing_else() -> None:
    """_stop_run freezes the tree, reads what it holds, kills it all (even past a SIGTERM
    trap, even in another session) and removes those files; a file of the same kind that no
    process of the run held stays: it may be another job's."""
    stem = f"{mpi_leftovers.SEGMENT_DIR}/{mpi_leftovers.MPICH_SEGMENT_PREFIX}iolabtest{os.getpid()}"
    held, other = Path(f"{stem}_held"), Path(f"{stem}_other")
    for path in (held, other):
        path.write_bytes(b"\0" * 4096)
    proc = subprocess.Popen(["/bin/sh", "-c", HOLDING, str(held)], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        # the shell, the one in a session of its own (holding the file) and its sleep
        while len(tree := descendants(proc.pid)) < 3 or not mpi_leftovers.held_files(tree):
            assert time.monotonic() < deadline, "the stand-in never started and opened its file"
            time.sleep(0.01)
        mpiio._stop_run(proc)
        assert proc.returncode == -signal.SIGKILL
        assert not held.exists() and other.exists()
        assert all(process_state(pid) in (None, "Z") for pid in tree)
    finally:
        for pid in descendants(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
        for path in (held, other):
            path.unlink(missing_ok=True)


def test_a_ctrl_c_as_the_launcher_starts_still_stops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C landing just after the launcher started, before its handle was kept: the run
    used to be left running (and leaving files) with nothing to stop it. It is raised once
    the handle is there, and the run is stopped."""
    started: list[subprocess.Popen] = []
    monkeypatch.setattr(mpiio.subprocess, "Popen", popen_then_ctrl_c(started))
    with pytest.raises(KeyboardInterrupt):
        mpiio._start(["sleep", "30"], dict(os.environ))
    assert len(started) == 1 and started[0].returncode == -signal.SIGKILL


#: Moments to stop an untraced run at, by what its processes hold: a Hydra proxy its topology
#: file (the ranks are starting), a rank its shared memory (MPI_Init under way).
HELD_AT = {"topology": "/tmp/hydra_hwloc_xmlfile_", "shared memory": "/dev/shm/mpich_shm_"}


@pytest.mark.slow
@needs_mpi
@pytest.mark.parametrize("moment", sorted(HELD_AT))
def test_a_run_stopped_while_its_ranks_start_leaves_nothing_of_mpich(
    moment: str, tmp_path: Path
) -> None:
    """The moment CI caught (2026-11-30): Hydra, asked to stop while its ranks were in
    MPI_Init, hung until it was killed and left its topology file and the ranks' shared
    memory in /tmp and /dev/shm. The files checked are those this run's processes held, so
    other MPI runs on the machine cannot confuse the test."""
    workspace = tmp_path / "ws"
    proc = start_demo(workspace, "4, 'independent', blocks_per_rank=64")
    seen: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 60
    while proc.poll() is None and not any(path.startswith(HELD_AT[moment]) for path, _ in seen):
        assert time.monotonic() < deadline, f"the run never held its {moment} file"
        seen |= mpi_leftovers.held_files(descendants(proc.pid))
    assert proc.poll() is None, "the run ended before it could be stopped: nothing was tested"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=STOPPED_WITHIN_S)
    assert proc.returncode == 130, err
    left = [path for path, inode in seen if os.path.exists(path) and os.stat(path).st_ino == inode]
    assert left == [], f"the stopped run left MPICH's files behind: {left}"
    assert list(workspace.glob("tmp/mpiio*")) == []
