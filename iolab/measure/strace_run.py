"""Whether strace can trace here, and running a command under it (or just in a scratch folder).

strace needs the kernel's permission to trace (ptrace), which containers and some clusters
withhold; the only sure test is a real trace of `true`, made once per strace binary and
process (strace_status). Everything that runs a measured command -- the attributed trace,
`strace -c`, the per-file profile and the fallback without strace -- starts it through here,
with its output captured and its scratch files removed however the run ends.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from iolab.core.errors import LabError
from iolab.core.lab_dirs import scratch_dir
from iolab.core.owned import discard_owned
from iolab.core.user_paths import existing_dir

MISSING_STRACE = (
    "strace is not installed; install it with `apt-get install strace` (Debian/Ubuntu), "
    "`dnf install strace`, or `module load strace` on a cluster"
)
PTRACE_DENIED = (
    "strace is installed at {path} but may not trace processes here ({detail}): the kernel "
    "refuses ptrace (kernel.yama.ptrace_scope, a seccomp profile, or a container without "
    "CAP_SYS_PTRACE); ask your administrators for ptrace permission (Docker: "
    "`--cap-add=SYS_PTRACE`), or run on a machine or compute node that allows it"
)
_VERSION = re.compile(r"version\s+(\S+)")
#: How `syscalls` counts a command's calls (iolab.measure.syscalls) and how `profile` traces
#: it (iolab.diagnosis.trace): here, where --method is checked without importing pandas.
COUNT_METHODS = ("auto", "strace", "fallback")
PROFILE_METHODS = ("auto", "strace", "proc-io")


@dataclass(frozen=True)
class StraceStatus:
    """Whether strace can trace here; `reason` is one sentence a learner can act on."""

    available: bool
    path: str | None
    version: str | None
    reason: str


def strace_status() -> StraceStatus:
    """Find strace on PATH and prove it may trace, once per strace binary and process."""
    return _probe_strace(shutil.which("strace"))


@functools.cache
def _probe_strace(path: str | None) -> StraceStatus:
    """Run `strace true`: only a real trace shows whether the kernel permits ptrace."""
    if path is None:
        return StraceStatus(False, None, None, MISSING_STRACE)
    version = _strace_version(path)
    try:
        probe = subprocess.run(
            [path, "-f", "-qq", "-o", os.devnull, "--", "true"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return StraceStatus(
            False,
            path,
            version,
            f"strace at {path} could not be started ({err}); "
            "check that `strace true` works in your shell",
        )
    if probe.returncode == 0:
        return StraceStatus(
            True, path, version, f"strace {version} at {path} can trace processes here"
        )
    detail = next((line for line in probe.stderr.splitlines() if line.strip()), "no message")
    if re.search(
        r"Operation not permitted|EPERM|ptrace|Function not implemented", probe.stderr, re.I
    ):
        return StraceStatus(False, path, version, PTRACE_DENIED.format(path=path, detail=detail))
    return StraceStatus(
        False,
        path,
        version,
        f"strace at {path} failed a test run ({detail}); "
        "check that `strace true` works in your shell",
    )


def _strace_version(path: str) -> str | None:
    """The version strace reports (`strace -V`), or None if it does not say."""
    try:
        out = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(out)
    return match.group(1) if match else None


def require_strace() -> str:
    """The path of a strace that can trace here, or a LabError with strace_status's sentence."""
    status = strace_status()
    if not status.available or status.path is None:  # an available strace has its path
        raise LabError(status.reason)
    return status.path


@dataclass
class Finished:
    """What a measured run left behind besides its counts."""

    exit_code: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def run_scratch(name: str) -> Iterator[Path]:
    """A per-run directory in the workspace that is removed however the run ends."""
    path = scratch_dir(name)
    try:
        yield path
    finally:
        discard_owned(path)


def check_command(
    cmd: Sequence[str], cwd: str | os.PathLike | None, env: Mapping[str, str] | None
) -> list[str]:
    """Fail early, in one sentence, on an empty or unknown command (as subprocess would look it
    up)."""
    cmd = [str(part) for part in cmd]
    if not cmd:
        raise LabError(
            "no command to measure was given; put it after `--`, e.g. "
            "`python -m iolab syscalls --data DIR -- python demos/read_files.py --data DIR`"
        )
    exe = cmd[0]
    if os.sep in exe:
        candidate = Path(cwd or ".") / exe
        found = candidate.is_file() and os.access(candidate, os.X_OK)
    else:
        search_path = os.pathsep.join(os.get_exec_path(dict(env) if env is not None else None))
        found = shutil.which(exe, path=search_path) is not None
    if not found:
        raise LabError(
            f"the command {exe!r} was not found; check its spelling, install it, "
            "or give its full path"
        )
    return cmd


def run_strace(
    options: Sequence[str],
    cmd: list[str],
    cwd,
    env,
    trace_file: Path,
    timeout: float | None = None,
    late: str = "",
) -> Finished:
    """Run cmd under strace writing to trace_file; the command's output is captured. With
    `timeout`, strace and the traced command are killed together after that many seconds
    and the LabError says so, followed by `late` (what to check)."""
    strace = require_strace()
    proc = subprocess.Popen(
        [strace, *options, "-o", str(trace_file.resolve()), "--", *cmd],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=timeout is not None,  # its own group: the tracee dies with strace
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException as err:  # past the limit, or Ctrl-C: neither strace nor it goes on
        with contextlib.suppress(ProcessLookupError):
            if timeout is None:
                proc.kill()
            else:
                os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        if not isinstance(err, subprocess.TimeoutExpired):
            raise
        raise LabError(
            f"{Path(cmd[0]).name} {' '.join(cmd[1:2])} was still running under strace after "
            f"{timeout:g} s and was stopped" + (f": {late}" if late else "")
        ) from None
    if not trace_file.exists() or trace_file.stat().st_size == 0:
        last = (stderr.strip().splitlines() or ["no message"])[-1]
        raise LabError(
            f"strace could not trace {cmd[0]!r} ({last}); run the command without "
            "iolab to check that it works"
        )
    return Finished(proc.returncode, stdout, stderr)


def dataset_roots(dataset_dir: str | os.PathLike) -> tuple[str, ...]:
    """The data directory as written and with symlinks resolved: a trace may show either."""
    path = existing_dir(
        dataset_dir,
        "pass the dataset's folder as --data (create the dataset "
        "with `python data_generators/generate_data.py --data DIR`)",
    )
    spelled = os.path.normpath(os.path.abspath(path))
    return tuple(dict.fromkeys((spelled, os.path.realpath(path))))


def strace_problem() -> str | None:
    """None if strace can trace here, else the sentence that says why not and what to do."""
    status = strace_status()
    return None if status.available else status.reason
