"""A centre's archive diagnosed in Slurm jobs, when one machine is too small:
`iolab diagnose DIR --slurm-jobs N` (Dask through dask-jobqueue, `make dask`).

The scheduler runs in this process, on the login node; each Slurm job runs one Dask worker
of one core, which diagnoses one log at a time exactly as `iolab diagnose DIR` does
(iolab.diagnosis.archive.diagnose_one), so the two rankings never disagree.

A login node is shared, and a Dask scheduler runs whatever task it is sent, as its user, on
its workers: so the scheduler and the workers speak TLS with keys made for this run alone
(Dask's temporary security), the workers' in 0600 files of a private folder of the
workspace, which the nodes share. Everything the run writes (Dask's configuration, the job
scripts, the jobs' output, the workers' scratch) goes into that folder, removed when the run
ends; the jobs are cancelled then too, also after Ctrl-C or an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from iolab.core.errors import LabError
from iolab.core.lab_dirs import ensure_writable_dir, fresh_run_dir
from iolab.core.workspace import WorkspaceEntry
from iolab.diagnosis.archive import UNREADABLE, Result, diagnose_one

#: The Slurm commands dask-jobqueue calls.
SLURM_COMMANDS = ("sbatch", "squeue", "scancel")
#: Each job: one worker process of one thread on one core, and the memory it asks for. The
#: diagnosis of the largest corpus log peaks far below this (`make bench-archive`).
JOB_CORES = 1
JOB_MEMORY = "2GiB"
#: A worker whose scheduler has gone ends itself after this long (its job with it).
WORKER_DEATH_TIMEOUT_S = 60
#: How often the jobs' states are looked at while nothing arrives, and the pause between
#: looks for finished logs.
POLL_S = 5.0
WAIT_S = 0.1
#: How long fetching a finished log's rows may take before they count as lost.
FETCH_S = 10.0
#: How long Slurm's controller may take to answer sbatch --test-only or squeue.
SLURM_ANSWER_S = 60
#: The name of the jobs in squeue.
JOB_NAME = "iolab-diagnose"


def dask_problem() -> str | None:
    """Why the logs cannot be diagnosed in Slurm jobs from here, in one sentence, or None."""
    if importlib.util.find_spec("dask_jobqueue") is None:
        return (
            "dask-jobqueue is not installed, which --slurm-jobs needs: run `make dask` in the "
            "lab's checkout (or `pip install -r requirements-dask.txt`), or leave out "
            "--slurm-jobs to use this machine's cores"
        )
    missing = [name for name in SLURM_COMMANDS if shutil.which(name) is None]
    if missing:
        return (
            f"{', '.join(missing)} not found on PATH, so no Slurm job can be submitted from "
            "here: run this on a Slurm cluster's login node (`module load slurm` on some), or "
            "leave out --slurm-jobs to use this machine's cores"
        )
    return None


def check_interface(name: str) -> None:
    """A network interface this machine has, or one sentence naming the ones it has."""
    have = sorted(found for _, found in socket.if_nameindex())
    if name not in have:
        raise LabError(
            f"--slurm-interface {name!r} is not a network interface of this machine (it has "
            f"{', '.join(have)}); `ip -brief address` shows which one the compute nodes reach"
        )


class GatherExitFilter(logging.Filter):
    """Drops asyncio's report of a task that ended in Dask's `AllExit`, the exception
    distributed raises to leave a gather early. A fetch given up after FETCH_S (its worker
    gone mid-fetch) leaves such a task behind, and it ends so when the client closes; asyncio
    then logs it with a traceback, though the run's outcome is the sentence that follows."""

    def filter(self, record: logging.LogRecord) -> bool:
        raised = record.exc_info[1] if record.exc_info else None
        return not (
            raised is not None
            and type(raised).__name__ == "AllExit"
            and type(raised).__module__ == "distributed.client"
        )


def _quiet_gather_exits() -> None:
    """GatherExitFilter on asyncio's logger, once per process (the tasks are reported when
    they are collected, which may be after the run)."""
    asyncio_log = logging.getLogger("asyncio")
    if not any(isinstance(kept, GatherExitFilter) for kept in asyncio_log.filters):
        asyncio_log.addFilter(GatherExitFilter())


def diagnose_where(log: str, changed: dict[str, float]) -> tuple[Result, str]:
    """A worker's task: one log's rows, and the node that read it."""
    return diagnose_one(log, changed), socket.gethostname()


def slurm_results(
    logs: list[Path],
    jobs: int,
    walltime: str,
    changed: dict[str, float],
    say: Callable[[str], None],
    hosts: Counter[str],
    interface: str | None = None,
) -> Iterator[Result]:
    """Each log's rows as the workers of `jobs` Slurm jobs finish them; `hosts` counts the
    logs each node read; `interface` names the network the scheduler and the workers use.
    Fails, cancelling the jobs, when they end before every log is read."""
    problem = dask_problem()
    if problem:
        raise LabError(problem)
    if interface is not None:
        check_interface(interface)
    base = ensure_writable_dir(WorkspaceEntry.TMP.path())
    _quiet_gather_exits()
    with fresh_run_dir(base, "diagnose-slurm-") as run, _dask_config_in(run):
        from distributed import Client, as_completed

        with _cluster(run, jobs, walltime, interface) as cluster, Client(cluster) as client:
            say(f"submitted {jobs} Slurm jobs named {JOB_NAME}; the logs go out as workers start")
            pending = {
                client.submit(diagnose_where, str(log), changed, pure=False): log for log in logs
            }
            finished = as_completed(list(pending))
            quiet_since = looked = time.monotonic()
            jobs_seen: set[str] = set()
            while not finished.is_empty():
                arrived = 0
                for future in finished.next_batch(block=False):
                    outcome = _outcome(future, pending[future], hosts)
                    if outcome is None:  # its result was lost with its worker: wait again
                        finished.add(future)
                        continue
                    del pending[future]
                    arrived += 1
                    yield outcome
                now = time.monotonic()
                if arrived:  # a lost result is not a sign of life
                    quiet_since = now
                    continue
                if now - looked >= POLL_S:
                    looked = now
                    if _jobs_gone(cluster, client, quiet_since, jobs_seen):
                        raise LabError(
                            f"the Slurm jobs ended with {len(pending)} of {len(logs)} logs "
                            f"unread (their time limit, {walltime}, or the node's); give a "
                            "longer --slurm-walltime or more --slurm-jobs. The jobs' last "
                            "words: " + _job_output(run)
                        )
                time.sleep(WAIT_S)


def _outcome(future: Any, log: Path, hosts: Counter[str]) -> Result | None:
    """The rows of a finished task; a task that failed costs its log one row. None when the
    result went with a worker that ended before it was fetched (Dask computes it again)."""
    if future.status in ("lost", "pending"):  # known lost: no need to wait FETCH_S for it
        return None
    try:
        result, host = future.result(timeout=FETCH_S)
    except (TimeoutError, asyncio.TimeoutError):
        return None
    except Exception as err:  # a worker that died on it: Dask gives up after a few tries
        return {
            "log": str(log),
            "verdict": UNREADABLE,
            "findings": 0,
            "problem": f"the Dask worker diagnosing it failed: {type(err).__name__}: {err}",
        }, []
    hosts[host] += 1
    return result


@contextlib.contextmanager
def _dask_config_in(run: Path) -> Iterator[None]:
    """Dask's configuration folder inside the run's folder, unless the user chose theirs:
    dask-jobqueue writes a jobqueue.yaml there on import, which would go to ~/.config."""
    if os.environ.get("DASK_CONFIG") is not None:
        yield
        return
    os.environ["DASK_CONFIG"] = str(run / "dask-config")
    try:
        yield
    finally:
        os.environ.pop("DASK_CONFIG", None)


def _job_class(run: Path) -> Any:
    """dask-jobqueue's Slurm job, its job script written into the run's folder rather than
    the shared /tmp (where the stock class puts it, through tempfile)."""
    from dask.utils import tmpfile
    from dask_jobqueue.slurm import SLURMJob

    class RunFolderJob(SLURMJob):
        @contextlib.contextmanager
        def job_file(self) -> Iterator[str]:
            with tmpfile(extension="sh", dir=str(run)) as name:
                with open(name, "w") as script:
                    script.write(self.job_script())
                yield name

    return RunFolderJob


@contextlib.contextmanager
def _cluster(run: Path, jobs: int, walltime: str, interface: str | None = None) -> Iterator[Any]:
    """dask-jobqueue's SLURMCluster with `jobs` jobs asked for, its submission checked by
    Slurm first; closed (its jobs cancelled) afterwards."""
    from dask_jobqueue import SLURMCluster

    cluster = SLURMCluster(
        job_cls=_job_class(run),
        job_name=JOB_NAME,
        cores=JOB_CORES,
        processes=1,
        memory=JOB_MEMORY,
        walltime=walltime,
        python=sys.executable,
        security=_run_keys(run),
        log_directory=str(run / "jobs"),
        local_directory=str(run / "workers"),
        death_timeout=WORKER_DEATH_TIMEOUT_S,
        interface=interface,  # the scheduler's and the workers' (None: the one routing out)
        scheduler_options={"dashboard_address": None},  # no web page on a shared node
    )
    try:
        _check_submission(cluster.job_script())
        cluster.scale(jobs=jobs)
        yield cluster
    finally:
        cluster.close()


def _run_keys(run: Path) -> Any:
    """TLS for this run alone: a certificate authority and keys made now (Dask's temporary
    security); the workers' parts in 0600 files of the run's folder, which the nodes share
    and which is removed with it, the scheduler's and this client's kept in memory."""
    from distributed.security import Security

    made = Security.temporary()
    on_disk = {}
    for part in ("tls_ca_file", "tls_worker_cert", "tls_worker_key"):
        path = run / f"{part}.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(getattr(made, part))
        on_disk[part] = str(path)
    return Security(
        require_encryption=True,
        **on_disk,
        **{
            part: getattr(made, part)
            for part in (
                "tls_scheduler_cert",
                "tls_scheduler_key",
                "tls_client_cert",
                "tls_client_key",
            )
        },
    )


def _check_submission(script: str) -> None:
    """Slurm's own verdict on the job script (`sbatch --test-only`), before any job is
    queued: a wrong account, partition or limit is one sentence, not a silent wait."""
    checked = _ask_slurm(["sbatch", "--test-only"], script)
    if checked.returncode != 0:
        said = " ".join((checked.stderr or checked.stdout).split())
        raise LabError(
            f"Slurm refused the workers' job ({said}); check the SBATCH_* variables set "
            "here (SBATCH_ACCOUNT and SBATCH_PARTITION choose where the jobs run) and "
            "--slurm-walltime"
        )


def _jobs_gone(cluster: Any, client: Any, since: float, seen: set[str]) -> bool:
    """True when no worker is connected and none of the run's jobs is queued or running any
    longer (after a worker's grace to connect). `seen` gathers every job id the cluster has
    held: dask-jobqueue forgets a job once its worker is gone."""
    seen.update(str(job.job_id) for job in cluster.workers.values() if getattr(job, "job_id", None))
    if client.scheduler_info().get("workers"):
        return False
    if time.monotonic() - since < WORKER_DEATH_TIMEOUT_S:
        return False
    if not seen:  # not one job was ever submitted
        return True
    listed = _ask_slurm(["squeue", "--noheader", "--format=%i", f"--jobs={','.join(sorted(seen))}"])
    # squeue refuses ids Slurm has already forgotten: those jobs are gone too
    return listed.returncode != 0 or not listed.stdout.split()


def _ask_slurm(command: list[str], script: str | None = None) -> subprocess.CompletedProcess:
    """A Slurm command's answer; a controller that does not answer is one sentence."""
    try:
        return subprocess.run(
            command, input=script, capture_output=True, text=True, timeout=SLURM_ANSWER_S
        )
    except subprocess.TimeoutExpired:
        raise LabError(
            f"Slurm's controller did not answer `{' '.join(command[:2])}` within "
            f"{SLURM_ANSWER_S} s, so the run stopped (its jobs are cancelled): try again when "
            "`squeue` answers, or leave out --slurm-jobs to use this machine's cores"
        ) from None


def _job_output(run: Path) -> str:
    """What the jobs' output says about their end (Slurm's own line, e.g. "CANCELLED" or
    "DUE TO TIME LIMIT", where it wrote one; else their last lines), for the sentence of a
    failed run."""
    lines: list[str] = []
    for path in sorted((run / "jobs").glob("*.err")):
        with contextlib.suppress(OSError):
            lines += path.read_text(errors="replace").splitlines()[-20:]
    slurm = [line for line in lines if "slurmstepd" in line]
    return " | ".join(line.strip() for line in (slurm or lines)[-2:]) or "none"
