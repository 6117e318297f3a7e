"""Submitting the job scripts of demos/slurm/ to a test Slurm (tests/slurm_cluster.py).

Each job gets its own workspace, node-local disk ($TMPDIR) and scratch ($SCRATCH) in a
temporary directory, so a test can check that the job cleaned up after itself. Shared by
the one-node tests (test_slurm.py) and the several-node ones (test_slurm_nodes.py).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SLURM_DEMOS = ROOT / "demos" / "slurm"
#: Variables of the outer environment that would steer a job elsewhere, blanked per job.
STEERING = (
    "IOLAB_NODE_LOCAL",
    "SLURM_TMPDIR",
    "LOCAL_SCRATCH",
    "IOLAB_FIO_SIZE_SCALE",
    "IOLAB_FIO_RUNTIME_S",
    "IOLAB_MPI_LAUNCH",
    "IOLAB_MPIIO_ARGS",
    "IOLAB_MPIIO_MODES",
    "IOLAB_STORM_FILES",
    "IOLAB_STORM_MAX_TOTAL",
)


@contextlib.contextmanager
def job_places() -> Iterator[dict[str, Path]]:
    """A job's workspace, node-local disk and scratch, in a directory removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="iolab-slurm-job-"))
    dirs = {name: base / name for name in ("workspace", "local", "scratch")}
    for path in dirs.values():
        path.mkdir()
    try:
        yield dirs
    finally:
        shutil.rmtree(base)


def job_env(places: dict[str, Path], **extra: str) -> dict[str, str]:
    """The environment sbatch passes on: the places above, nothing from the outer shell."""
    return {
        **{name: "" for name in STEERING},
        "IOLAB_WORKDIR": str(places["workspace"]),
        "TMPDIR": str(places["local"]),
        "SCRATCH": str(places["scratch"]),
        **extra,
    }


def submit(
    cluster, name: str, places, *options: str, timeout: float = 240, while_running=None, **extra
):
    """Submit demos/slurm/`name` unchanged (sbatch `options` only) and wait for it."""
    return cluster.sbatch(
        SLURM_DEMOS / name,
        *options,
        cwd=ROOT,
        env=job_env(places, **extra),
        timeout=timeout,
        while_running=while_running,
    )


def found_while_running(directory: Path, pattern: str) -> list[Path]:
    """`directory.glob(pattern)` while a job runs; [] when the job's end removes a directory
    in the middle of the listing (its cleanup races the poll)."""
    try:
        return list(directory.glob(pattern))
    except FileNotFoundError:
        return []


def assert_completed(job) -> None:
    assert (job.returncode, job.state, job.exit_code) == (0, "COMPLETED", "0:0"), job.output
    assert job.output.rstrip().endswith(f"job {job.job_id}: COMPLETED")


#: The nodes of the several-node test Slurm (fixture slurm_nodes in conftest.py).
NODES = 2


def results_of(places: dict[str, Path], job) -> Path:
    """Where a job's results were copied back to: workspace/slurm-results/<jobid>/."""
    return places["workspace"] / "slurm-results" / job.job_id


def on_nodes(test):
    """A test on the several-node Slurm: slow, and run only where one can be started."""
    return pytest.mark.slow(pytest.mark.needs("slurm_nodes")(test))
