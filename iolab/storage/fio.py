"""Bandwidth, IOPS and latency of a storage location with fio, without hurting a shared node.

fio measures what a storage location delivers for one access pattern (block size, queue
depth, direction, page cache or not). Four named profiles (iolab.storage.fio_profiles) hold
the patterns the lessons use (each is also a commented job file, demos/fio/NAME.fio, to run by
hand with `DIR=/path/to/dir fio demos/fio/NAME.fio`):

* ``login`` (default): a short scan a shared login node can afford: 1 MiB sequential writes
  and reads, buffered and direct, and 4 KiB random reads and writes at queue depth 1 and 16;
* ``node``: stas00's fio-scan for a compute node: 16 KiB / 1 MiB / 1 GiB files x read/write,
  4 KiB blocks, 16 processes at depth 64, direct, 3 minutes each. With time_based a "16 KiB
  file" is read over and over (each process cycles through the same 4 blocks for 3 minutes):
  it is not a test of many small files;
* ``pairs``: John Strunk's fs-performance-container pairs on one 500 MiB file, each a write
  then a read: 1 MiB sequential at depth 32 (bandwidth), 4 KiB random at depth 1 (latency),
  4 KiB random at depth 32 (IOPS), 2 minutes each;
* ``evaluation``: the NERC storage evaluation's five benchmarks (streaming, maximal latency,
  minimal latency, maximal random throughput, small working-set streaming reads), login-sized;
  `--size-scale 600 --runtime 1800` on a compute node comes near the evaluation's own 300 GB
  and 30 minutes per job.

Login limits. A login node is shared, so unless this process runs in a batch job on a
compute node or the user says --i-am-on-a-compute-node, a run must fit the login-node
budget (iolab.core.budget): its files on disk, the duration of each job (ramp_time +
runtime; size-bounded jobs carry a runtime as a cap) and the processes per job; the login
profile must fit it everywhere. There every job also runs at nice 19 and in the idle I/O
class (prioclass=3, allowed without root). The I/O class is a request, not a guarantee: only
the BFQ scheduler (and partly mq-deadline) honours it, the `none` scheduler of most NVMe
drives ignores it, and it never reaches the server of a network file system (Lustre, NFS,
GPFS); it acts on reads and direct writes, while buffered writes are flushed later by the
kernel at normal priority (ionice(1); the kernel's ioprio documentation). What keeps the
login profile gentle is its size and duration.

Every run works in a fresh directory (fio-XXXXXXXX inside the target directory) that is
removed afterwards, also on Ctrl-C or SIGTERM (Slurm's time limit): fio and each of its job
processes (each in a session of its own) are frozen and killed first, then its files are
deleted. This also avoids fio's stale-file pitfall: fio reuses an existing work file of the
right size without laying it out again, so a "write" test of a file left by an earlier run,
or a read of a file still in the page cache, measures something else. Reusing a file is
deliberate only inside one run of a profile, where the jobs share one file: overwrite=1
makes fio write all of it before the first job starts (else a time-limited first write
leaves blocks that were only allocated, which many file systems "read" as zeros without
touching the device), and fio drops its cached pages before every job (its default
invalidate=1).

O_DIRECT is probed in the run directory first (iolab.storage.locations.probe_o_direct). Where it
fails (FUSE mounts such as sshfs, tmpfs before Linux 6.6), the direct jobs are skipped with
a note: run buffered they would measure the page cache, which answers another question. A
profile left with no job is refused.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from iolab.core.atomic import atomic_output
from iolab.core.budget import excess, lifted, refusal
from iolab.core.capacity import check_capacity
from iolab.core.class_folder import heavy_turn
from iolab.core.errors import LabError, interrupts_held, sigterm_as_interrupt
from iolab.core.lab_dirs import ensure_writable_dir, fresh_run_dir
from iolab.core.tables import to_markdown
from iolab.core.user_paths import existing_dir
from iolab.core.workspace import public_text
from iolab.measure.context import machine_context
from iolab.measure.frozen_tree import freeze, kill
from iolab.measure.recorded import Recordings
from iolab.storage.fio_parse import fio_frame, latency_cdf, loads_fio, parse_size_bytes
from iolab.storage.fio_profiles import GENTLE_OPTIONS, PROFILES, FioJob, Profile
from iolab.storage.locations import probe_o_direct

MIB = 1024**2
GIB = 1024**3
#: How long fio's processes may take to stop, and then to end once killed.
STOP_TIMEOUT_S = 10
#: Option names that give a file size, scaled by --size-scale.
SIZE_OPTIONS = ("size", "filesize")
FIO_MISSING = (
    "fio is not installed; install it with `apt-get install fio` "
    "(or dnf install fio, module load fio)"
)
OUTPUT_NAME = ".fio-output.json"
STDERR_NAME = ".fio-stderr.txt"


def _scaled_options(
    options: dict[str, str], size_scale: float, runtime_s: int | None
) -> dict[str, str]:
    """`options` with file sizes times `size_scale` (whole 4 KiB) and the runtime replaced."""
    new = dict(options)
    for key in SIZE_OPTIONS:
        if key in new:
            scaled = max(4096, int(parse_size_bytes(new[key]) * size_scale) // 4096 * 4096)
            unit, factor = next(
                (u, f) for u, f in (("g", GIB), ("m", MIB), ("k", 1024)) if scaled % f == 0
            )
            new[key] = f"{scaled // factor}{unit}"
    if runtime_s is not None and "runtime" in new:
        new["runtime"] = str(runtime_s)
    return new


def scaled_profile(
    name: str = "login", size_scale: float = 1.0, runtime_s: int | None = None
) -> Profile:
    """The profile `name` with its files `size_scale` times as large and `runtime_s` s per job.

    The runtime is how long a time-based job runs, and the cap of a size-bounded one.
    """
    if name not in PROFILES:
        raise LabError(f"there is no fio profile {name!r}; choose one of {', '.join(PROFILES)}")
    if size_scale <= 0 or (runtime_s is not None and runtime_s < 1):
        raise LabError(
            "--size-scale must be above 0 and --runtime at least 1 s; pass larger values"
        )
    profile = PROFILES[name]
    jobs = tuple(
        replace(job, options=_scaled_options(job.options, size_scale, runtime_s))
        for job in profile.jobs
    )
    scaled = replace(
        profile,
        jobs=jobs,
        global_options=_scaled_options(profile.global_options, size_scale, runtime_s),
    )
    for job in scaled.jobs:
        options = scaled.options(job)
        file_bytes = _file_bytes(options)
        if file_bytes < parse_size_bytes(options.get("bs", "4k").split(",")[0]):
            raise LabError(
                f"with --size-scale {size_scale:g} the file of job {job.name} "
                f"({file_bytes} bytes) is smaller than one block; use a larger scale"
            )
    return scaled


def _file_bytes(options: dict[str, str]) -> int:
    """The size of each file a job works on."""
    return parse_size_bytes(options.get("filesize", options.get("size", "0")))


def _job_files(job: FioJob, options: dict[str, str]) -> list[str]:
    """The files a job uses: its shared `filename`, or fio's own NAME.N.0 per process."""
    if "filename" in options:
        return [options["filename"]]
    return [f"{job.name}.{clone}.0" for clone in range(int(options.get("numjobs", "1")))]


def footprint(profile: Profile) -> tuple[int, int]:
    """The most bytes and files a run has on disk at once.

    Files persist from job to job (a shared file takes the largest size any job gives it)
    unless a job has unlink=1, which removes its files when it ends.
    """
    present: dict[str, int] = {}
    peak_bytes = peak_files = 0
    for job in profile.jobs:
        options = profile.options(job)
        names = _job_files(job, options)
        for name in names:
            present[name] = max(present.get(name, 0), _file_bytes(options))
        peak_bytes = max(peak_bytes, sum(present.values()))
        peak_files = max(peak_files, len(present))
        if options.get("unlink") == "1":
            for name in names:
                present.pop(name)
    return peak_bytes, peak_files


def job_duration_s(options: dict[str, str]) -> float:
    """The longest a job runs: ramp_time plus runtime (fio stops a job at its runtime)."""
    return float(options.get("ramp_time", 0)) + float(options["runtime"])


def _processes(profile: Profile) -> int:
    """The most processes any job of the profile runs at once (fio's numjobs)."""
    return max(int(profile.options(job).get("numjobs", "1")) for job in profile.jobs)


def login_limit_problems(profile: Profile) -> list[str]:
    """How the profile exceeds the login-node budget, one phrase each; empty when it fits."""
    options = [profile.options(job) for job in profile.jobs]
    uncapped = [
        job.name for job, o in zip(profile.jobs, options, strict=True) if "runtime" not in o
    ]
    durations = [job_duration_s(o) for o in options if "runtime" in o]
    problems = excess(
        data_mib=footprint(profile)[0] / MIB,
        job_s=max(durations, default=0),
        processes=_processes(profile),
    )
    if uncapped:
        problems.append(f"no runtime caps the jobs {', '.join(uncapped)}")
    return problems


def checked_profile(profile: Profile, compute_node: bool | None = None) -> Profile:
    """The profile as it may run here: within the login-node budget and gentle, or refused.

    `compute_node` None asks the batch system (iolab.core.budget.lifted); True is the
    user's --i-am-on-a-compute-node. A login-sized profile must fit the budget everywhere.
    """
    if lifted(compute_node) and not profile.login_sized:
        return profile
    problems = login_limit_problems(profile)
    if problems and profile.login_sized:
        raise LabError(
            f"the {profile.name} profile must fit a shared login node, but "
            f"{'; '.join(problems)}; use a smaller --size-scale or --runtime"
        )
    if problems:
        shrinks = not excess(processes=_processes(profile))  # no option scales numjobs
        raise refusal(
            f"the {profile.name} profile",
            problems,
            "shrink it with --size-scale and --runtime" if shrinks else "",
        )
    return replace(profile, global_options={**profile.global_options, **GENTLE_OPTIONS})


def _arguments(options: dict[str, str]) -> list[str]:
    return [f"--{key}" if value == "" else f"--{key}={value}" for key, value in options.items()]


def fio_command(profile: Profile, run_dir: Path | str, output: Path | str) -> list[str]:
    """The fio command line: global options before the first --name, then each job's.

    json+ output holds the percentiles of json and the latency histogram bins besides.
    """
    command = [
        "fio",
        "--output-format=json+",
        f"--output={output}",
        "--eta=never",
        f"--directory={run_dir}",
        *_arguments(profile.global_options),
    ]
    for job in profile.jobs:
        command += [f"--name={job.name}", *_arguments(job.options)]
    return command


def plan_frame(profile: Profile) -> pd.DataFrame:
    """One row per job: what it does, how big its files are and how long it may run."""
    rows = []
    for job in profile.jobs:
        options = profile.options(job)
        rows.append(
            {
                "job": job.name,
                "rw": options.get("rw", "read"),
                "bs": options.get("bs", "4k"),
                "iodepth": int(options.get("iodepth", "1")),
                "numjobs": int(options.get("numjobs", "1")),
                "direct": options.get("direct", "0") == "1",
                "file_MiB": _file_bytes(options) / MIB,
                "max_duration_s": job_duration_s(options),
            }
        )
    return pd.DataFrame(rows)


def _without_direct_jobs(profile: Profile, note: str) -> tuple[Profile, str]:
    """The profile without its direct=1 jobs, and the note that says which were skipped."""
    kept = tuple(job for job in profile.jobs if profile.options(job).get("direct") != "1")
    skipped = [job.name for job in profile.jobs if job not in kept]
    if not kept:
        raise LabError(
            f"O_DIRECT does not work here ({note}) and every job of the "
            f"{profile.name} profile needs it; choose another location or the login "
            "profile, which also has buffered jobs"
        )
    return replace(profile, jobs=kept), (
        f"O_DIRECT does not work here ({note}); skipped the direct jobs {', '.join(skipped)}"
    )


def _stop(proc: subprocess.Popen) -> None:
    """Stop fio and every job process it forked before their files are deleted.

    Each job calls setsid(), so no group signal reaches it. Killed 0.2 to 4 s into the login
    profile, fio 3.33 left one to four jobs waiting forever on a lock in memory they shared
    with it (2-core VM, 2026-12-02); the old stop killed fio when SIGINT had not ended it
    within STOP_TIMEOUT_S, as under load in CI. So the whole tree is frozen and killed at
    once (iolab.measure.frozen_tree); a second Ctrl-C waits until it is done.
    """
    with interrupts_held():
        kill(freeze(proc.pid, STOP_TIMEOUT_S), STOP_TIMEOUT_S)
        proc.wait()


def _run_fio(command: list[str], run_dir: Path) -> str:
    """Run fio in its own process group; its JSON output, or a LabError with its last words."""
    proc = None
    with open(run_dir / STDERR_NAME, "w") as stderr:
        try:
            with interrupts_held():  # a Ctrl-C is raised once the handle that stops fio exists
                proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                    start_new_session=True,
                )
            proc.wait()
        except FileNotFoundError:
            raise LabError(FIO_MISSING) from None
        except BaseException:
            if proc is not None:
                _stop(proc)
            raise
    if proc.returncode != 0:
        raise LabError(
            f"fio failed with exit code {proc.returncode} ({_failure(run_dir)}); "
            "run the command of --dry-run by hand to see the full error"
        )
    return (run_dir / OUTPUT_NAME).read_text(errors="replace")


def _failure(run_dir: Path) -> str:
    """Why fio failed: the first job its JSON gives an error number for, else its last words.

    A job that fails (e.g. O_DIRECT with a misaligned block) is reported in the JSON; some
    such failures print nothing on stderr.
    """
    with contextlib.suppress(OSError, LabError):
        for job in loads_fio((run_dir / OUTPUT_NAME).read_text(errors="replace"))["jobs"]:
            if job.get("error"):
                return f"job {job['jobname']}: {os.strerror(job['error'])}"
    lines = (run_dir / STDERR_NAME).read_text(errors="replace").strip().splitlines()
    return lines[-1] if lines else "it printed no error message"


@dataclass
class FioRun:
    """One run of a profile: the command, fio's JSON, the tidy table, notes and context.

    `frame` has one row per job and direction (see iolab.storage.fio_parse.fio_frame); `notes` says
    what the run changed or skipped; `context` is the machine and the location's file system.
    """

    profile: str
    command: list[str]
    result: dict = field(repr=False)
    frame: pd.DataFrame = field(repr=False)
    notes: list[str]
    context: dict = field(repr=False)

    def latency_cdf(self) -> pd.DataFrame:
        """The completion-latency CDF of every job and direction (json+ bins)."""
        return latency_cdf(self.result)

    def to_json_dict(self) -> dict:
        """The run as plain JSON: fio's own JSON, the command, notes and context."""
        return {
            "profile": self.profile,
            "command": self.command,
            "result": self.result,
            "notes": self.notes,
            "context": self.context,
        }

    @classmethod
    def from_json_dict(cls, value: dict) -> FioRun:
        """A run read back from to_json_dict (a recorded run), its table parsed anew."""
        return cls(
            value["profile"],
            value["command"],
            value["result"],
            fio_frame(value["result"]),
            value["notes"],
            value["context"],
        )


def fio_problem() -> str | None:
    """None if fio is installed here, else the sentence that says how to get it."""
    return None if shutil.which("fio") else FIO_MISSING


def run_or_recorded(
    recordings: Recordings, key: str, run: Callable[[], FioRun], missing: str | None = None
) -> FioRun:
    """`run()` (a run_profile call) where fio and whatever else it needs are here, else
    the run recorded under `key`; `missing` names a further missing need (a mount)."""
    value = recordings.data(key, lambda: run().to_json_dict(), fio_problem() or missing)
    return FioRun.from_json_dict(value)


def run_profile(
    profile: Profile,
    directory: Path | str,
    *,
    json_out: Path | str | None = None,
    compute_node: bool | None = None,
) -> FioRun:
    """Run `profile` in a fresh directory inside `directory` and remove it afterwards.

    The profile is checked against the login limits first (checked_profile), then the free
    space; fio's raw JSON is copied to `json_out` if given. See the module docstring for
    the cleanup on interruption and for O_DIRECT.
    """
    profile = checked_profile(profile, compute_node)
    if shutil.which("fio") is None:
        raise LabError(FIO_MISSING)
    directory = existing_dir(directory, "create it or pass another folder").absolute()
    check_capacity(directory, *footprint(profile))
    gentle = profile.global_options.get("prioclass") == GENTLE_OPTIONS["prioclass"]
    notes = (
        [
            "ran at nice 19 in the idle I/O class, which only the BFQ scheduler honours (not "
            "`none`, not a network file system's server)"
        ]
        if gentle
        else []
    )
    with heavy_turn(f"fio {profile.name}"):
        with fresh_run_dir(directory, "fio-") as run_dir:
            with sigterm_as_interrupt():
                direct_io = probe_o_direct(run_dir)
                if direct_io.supported is False:
                    profile, note = _without_direct_jobs(profile, direct_io.note)
                    notes.append(note)
                elif direct_io.note:
                    notes.append(f"O_DIRECT: {direct_io.note}")
                command = fio_command(profile, run_dir, run_dir / OUTPUT_NAME)
                text = _run_fio(command, run_dir)
    if json_out is not None:
        ensure_writable_dir(Path(json_out).parent)
        with atomic_output(json_out) as partial:
            partial.write_text(text, encoding="utf-8")
    result = loads_fio(text)
    return FioRun(
        profile.name,
        [public_text(arg) for arg in command],
        result,
        fio_frame(result),
        notes,
        machine_context(directory, tools=("fio",)),
    )


def dry_run(profile: Profile, directory: Path | str, compute_node: bool | None = None) -> str:
    """What a run would do, writing nothing: the fio command, the jobs, disk and time."""
    profile = checked_profile(profile, compute_node)
    run_dir = Path(directory) / "fio-XXXXXXXX"
    disk_bytes, files = footprint(profile)
    existing = next(
        p for p in [Path(directory).absolute(), *Path(directory).absolute().parents] if p.is_dir()
    )
    st = os.statvfs(existing)
    free_bytes = st.f_bavail * st.f_frsize
    return "\n".join(
        [
            shlex.join(fio_command(profile, run_dir, run_dir / OUTPUT_NAME)),
            "",
            to_markdown(plan_frame(profile)),
            "",
            f"disk footprint: at most {disk_bytes / MIB:.0f} MiB in at most {files} files "
            f"({free_bytes / MIB:.0f} MiB free), removed after the run",
            f"time: at most {sum(job_duration_s(profile.options(j)) for j in profile.jobs):.0f} s "
            "plus laying out the files; direct jobs are skipped where O_DIRECT fails",
        ]
    )
