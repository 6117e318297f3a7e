"""Which system tools the lab uses, which are present, and how to get the missing ones.

A learner on a login node cannot always install packages, so for every tool the lab names
what it is for and every way to get it: the Debian/Ubuntu and Fedora/RHEL packages, the
environment module most clusters provide, or another route (a PyPI wheel, the cluster
itself). Missing optional tools are reported, never fatal: the lab shows what it still can.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from iolab.core.errors import LabError
from iolab.measure.context import tool_version

if TYPE_CHECKING:  # pandas only for the table: `class preflight` runs without it
    import pandas as pd

PTRACE_CHECK_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ToolSpec:
    """A tool the lab uses: why it matters and every way to get it."""

    name: str
    purpose: str
    required: bool
    apt: str | None = None
    dnf: str | None = None
    module: str | None = None
    other: str | None = None
    fallback: str | None = None
    executables: tuple[str, ...] = ()

    @property
    def how_to_get(self) -> str:
        """'apt-get install X (or: dnf install Y, module load Z)', plus any other route."""
        routes = [f"dnf install {self.dnf}"] if self.dnf else []
        routes += [f"module load {self.module}"] if self.module else []
        routes += [self.other] if self.other else []
        if self.apt:
            first = f"apt-get install {self.apt}"
        else:
            first, routes = routes[0], routes[1:]
        return f"{first} (or: {', '.join(routes)})" if routes else first


#: The tools of the current lessons (required) and of later ones, in report order.
TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "strace",
        "counts the system calls each reader makes",
        required=True,
        apt="strace",
        dnf="strace",
        module="strace",
        fallback="without it the lab counts file opens with Python audit hooks",
    ),
    ToolSpec("tar", "lists and unpacks the archive dataset", required=True, apt="tar", dnf="tar"),
    ToolSpec("dd", "writes test files of a given size", True, apt="coreutils", dnf="coreutils"),
    ToolSpec("ls", "lists the dataset's directories", True, apt="coreutils", dnf="coreutils"),
    ToolSpec("cat", "reads files from the shell", True, apt="coreutils", dnf="coreutils"),
    ToolSpec(
        "fio",
        "measures bandwidth and IOPS of a storage location",
        required=False,
        apt="fio",
        dnf="fio",
        module="fio",
        fallback="without it the fio lesson shows the recorded runs",
    ),
    ToolSpec(
        "fincore",
        "cross-checks how much of a file is in the page cache",
        required=False,
        apt="util-linux",
        dnf="util-linux",
        fallback="the lab asks the kernel itself (mincore) without it",
    ),
    ToolSpec(
        "sshfs",
        "mounts the workspace over ssh: a real network file system on any machine",
        required=False,
        apt="sshfs",
        dnf="fuse-sshfs",
        fallback="without it (or sshd) the lessons leave out the network file system",
    ),
    ToolSpec(
        "sshd",
        "serves the loopback sshfs mount, started by the lab as you",
        required=False,
        apt="openssh-server",
        dnf="openssh-server",
        fallback="without it (or sshfs) the lessons leave out the network file system",
        executables=("sshd", "/usr/sbin/sshd"),
    ),
    ToolSpec(
        "lfs",
        "shows and sets Lustre striping",
        required=False,
        other="it comes with the Lustre client on clusters that use Lustre, not from apt",
    ),
    ToolSpec(
        "mpiexec",
        "runs the MPI-IO programs on many ranks",
        required=False,
        apt="mpich",
        dnf="mpich",
        module="mpich",
        other="pip install mpich mpi4py (in the lab's requirements.txt; no root)",
        # The PyPI mpich wheel puts mpiexec beside the venv's python, which may not be on PATH.
        executables=("mpiexec", "mpirun", str(Path(sys.executable).parent / "mpiexec")),
    ),
    ToolSpec(
        "sbatch",
        "submits the job scripts to Slurm",
        required=False,
        other="it exists only on a cluster that runs Slurm",
    ),
)
TOOLS_BY_NAME = {spec.name: spec for spec in TOOLS}


@dataclass(frozen=True)
class ToolStatus:
    """Whether one tool is present and usable here; `problem` says why a present tool is not."""

    name: str
    found: bool
    path: str | None
    version: str | None
    purpose: str
    how_to_get: str
    required: bool
    problem: str | None = None

    @property
    def state(self) -> str:
        """'ok', 'missing', or 'limited' (present but unusable, e.g. ptrace denied)."""
        if not self.found:
            return "missing"
        return "limited" if self.problem else "ok"


def fuse_problem() -> str | None:
    """Why FUSE file systems cannot be mounted here, judged by the FUSE device."""
    device = "/dev/fuse"
    if not os.path.exists(device):
        return (
            f"{device} does not exist, so no FUSE file system can be mounted here: load the "
            "kernel module (`modprobe fuse`, as root) or start the container with "
            "`--device /dev/fuse`"
        )
    if not os.access(device, os.R_OK | os.W_OK):
        return (
            f"{device} is not readable and writable by you, so you cannot mount FUSE file "
            "systems here: ask your administrators for FUSE access"
        )
    return None


def _spec_for(name: str) -> ToolSpec:
    """The table entry for `name`, or a generic one for a tool the lab does not know."""
    return TOOLS_BY_NAME.get(name) or ToolSpec(
        name, "not one of the lab's tools", required=False, apt=name, module=name
    )


def install_hint(name: str) -> str | None:
    """How to get a tool of the lab's table, with why it matters; None for other commands."""
    spec = TOOLS_BY_NAME.get(name)
    return f"{name} {spec.purpose}; get it with {spec.how_to_get}" if spec else None


def ptrace_problem(strace: str) -> str | None:
    """None if strace may trace a child here, else the reason in one phrase.

    Containers without CAP_SYS_PTRACE, Yama's ptrace_scope and some cluster policies forbid
    tracing; strace is then installed but useless, so we try it on `true` once.
    """
    try:
        proc = subprocess.run(
            [strace, "-f", "-qq", "-o", "/dev/null", "true"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PTRACE_CHECK_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"strace did not finish tracing `true` within {PTRACE_CHECK_TIMEOUT_S:g} s"
    except OSError as err:
        return f"strace could not be started ({err.strerror})"
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    reason = lines[-1] if lines else f"exit code {proc.returncode}"
    return f"ptrace is not permitted here ({reason})"


def check_tools(names: list[str] | None = None) -> list[ToolStatus]:
    """The status of each named tool (default: the lab's whole table), in the given order."""
    statuses = []
    for name in names or [spec.name for spec in TOOLS]:
        spec = _spec_for(name)
        found = next(
            ((exe, path) for exe in spec.executables or (name,) if (path := shutil.which(exe))),
            None,
        )
        problem = (
            ptrace_problem(found[1])
            if found and name == "strace"
            else fuse_problem()
            if found and name == "sshfs"
            else None
        )
        statuses.append(
            ToolStatus(
                name=name,
                found=found is not None,
                path=found[1] if found else None,
                version=tool_version(found[0]) if found else None,
                purpose=spec.purpose,
                how_to_get=spec.how_to_get,
                required=spec.required,
                problem=f"{problem}; {spec.fallback}" if problem and spec.fallback else problem,
            )
        )
    return statuses


FRAME_COLUMNS = ["tool", "state", "required", "version", "path", "purpose", "how_to_get", "problem"]


def tools_frame(statuses: list[ToolStatus]) -> pd.DataFrame:
    """One row per tool, for a notebook table."""
    import pandas as pd

    rows = [
        [s.name, s.state, s.required, s.version, s.path, s.purpose, s.how_to_get, s.problem]
        for s in statuses
    ]
    return pd.DataFrame(rows, columns=FRAME_COLUMNS)


def _detail(status: ToolStatus) -> str:
    """The text after the state: the version when ok, else why it matters and how to fix it."""
    if status.state == "ok":
        return status.version or status.path or ""
    if status.state == "limited":
        return f"{status.version}; {status.problem}"
    spec = TOOLS_BY_NAME.get(status.name)
    if spec is None:
        return f"{status.purpose}; try {status.how_to_get}"
    role = "required" if spec.required else "optional" if spec.fallback else "used by later lessons"
    fallback = f"; {spec.fallback}" if spec.fallback else ""
    return f"{role} ({spec.purpose}{fallback}): {spec.how_to_get}"


def format_report(statuses: list[ToolStatus]) -> str:
    """One aligned line per tool: name, state, and the version or how to get it."""
    width = max((len(s.name) for s in statuses), default=0) + 2
    return "\n".join(f"{s.name:<{width}}{s.state:<9}{_detail(s)}" for s in statuses)


def apt_packages(path: Path | str) -> list[str]:
    """The packages of an apt.txt (Binder's convention: one per line, '#' starts a comment)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise LabError(
            f"cannot read the package list {path} ({err.strerror}); check the path"
        ) from None
    entries = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [entry for entry in entries if entry]
