"""A real one-node Slurm (munged, slurmctld, slurmd) living in one temporary directory.

The job scripts in demos/slurm/ are meant for real clusters, so the tests submit them to a
real Slurm rather than imitating one. Everything the daemons need (slurm.conf, the munge
key and socket, state and spool directories, logs, pid files) is written to a fresh
directory and named explicitly, so nothing in /etc, /run or /var is touched and two test
runs cannot meet. The daemons run in the foreground as our own children, so we hold their
process ids and can always stop them, also when a test fails.

The configuration is the minimal one that works without cgroups or accounting
(proctrack/linuxproc, task/none, select/cons_tres), verified with slurm-wlm 22.05.8 and
munge 0.5.15 on Debian 12. The node line is copied from `slurmd -C`: a node declared
larger than the hardware is drained.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

#: The command each daemon or client needs, and the Debian package that provides it.
PACKAGES = {"munged": "munge", "mungekey": "munge", "slurmctld": "slurmctld",
            "slurmd": "slurmd", "sbatch": "slurm-client", "sinfo": "slurm-client",
            "scontrol": "slurm-client", "scancel": "slurm-client", "squeue": "slurm-client"}
#: How long the node may take to come up idle, and daemons to exit after SIGTERM.
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 15
#: A job pending longer than this cannot start on the test node.
PENDING_LIMIT_S = 20
#: Hardware fields of `slurmd -C` copied to the node line.
NODE_FIELDS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore",
               "RealMemory")


def skip_reason() -> str | None:
    """Why a Slurm cannot be started here (not root, a package missing), or None."""
    missing = sorted({pkg for cmd, pkg in PACKAGES.items() if shutil.which(cmd) is None})
    if missing:
        return ("a test Slurm needs the Debian packages " + ", ".join(missing)
                + " (apt-get install slurmctld slurmd slurm-client munge)")
    if os.geteuid() != 0:
        return "a test Slurm must run as root (its daemons switch users); run as CI's root"
    return None


def _free_port() -> int:
    """A TCP port nobody listens on now (the kernel's choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def node_name() -> str:
    """This host's short name when it resolves, else localhost (slurmd must find itself)."""
    name = socket.gethostname().split(".")[0]
    try:
        socket.gethostbyname(name)
    except OSError:
        return "localhost"
    return name


def node_hardware() -> str:
    """The node's CPUs, sockets, cores, threads and memory as `slurmd -C` reports them."""
    text = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True,
                          timeout=30).stdout
    fields = dict(re.findall(r"(\w+)=(\S+)", text))
    return " ".join(f"{key}={fields[key]}" for key in NODE_FIELDS if key in fields)


def slurm_conf(root: Path, node: str, hardware: str) -> str:
    """A minimal slurm.conf whose every path lies inside `root`."""
    return f"""\
ClusterName=iolabtest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/sock/munge.socket
SlurmUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
NodeName={node} NodeAddr=127.0.0.1 {hardware} State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class JobResult:
    """What a finished batch job left: sbatch's exit code, its state and its output file."""

    job_id: str
    returncode: int
    state: str
    exit_code: str
    output: str


class SlurmCluster:
    """The running daemons, and the client commands pointed at them."""

    def __init__(self, root: Path):
        self.root = root
        self.node = node_name()
        self.env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
        self.daemons: list[subprocess.Popen] = []

    def client(self, *command: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """Run a Slurm client command against this cluster."""
        return subprocess.run(list(command), env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def _daemon(self, name: str, *command: str) -> None:
        log = open(self.root / "log" / f"{name}.stdout", "w")
        with log:
            self.daemons.append(subprocess.Popen(
                list(command), env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True))

    def start(self) -> None:
        """Write the configuration, start munged, slurmctld and slurmd, wait for idle."""
        for sub in ("munge", "sock", "state", "spool", "run", "log"):
            (self.root / sub).mkdir()
        # munged wants its socket directory (and the path to it) searchable by all, and its
        # key readable by its owner only.
        for path in (self.root, self.root / "sock"):
            path.chmod(0o711)
        (self.root / "munge").chmod(0o700)
        key = self.root / "munge" / "munge.key"
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True,
                       capture_output=True, timeout=30)
        (self.root / "slurm.conf").write_text(slurm_conf(self.root, self.node, node_hardware()))
        self._daemon("munged", "munged", "--foreground", f"--key-file={key}",
                     f"--socket={self.root}/sock/munge.socket",
                     f"--pid-file={self.root}/munge/munged.pid",
                     f"--log-file={self.root}/munge/munged.log",
                     f"--seed-file={self.root}/munge/munged.seed")
        self._wait_for(lambda: (self.root / "sock" / "munge.socket").exists(), "munged")
        self._daemon("slurmctld", "slurmctld", "-D", "-i")
        self._daemon("slurmd", "slurmd", "-D", "-N", self.node)
        self._wait_for(self._idle, "the node to show idle in sinfo")

    def _idle(self) -> bool:
        proc = self.client("sinfo", "--noheader", "--format=%T")
        return proc.returncode == 0 and proc.stdout.strip() == "idle"

    def _wait_for(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            dead = [p.args[0] for p in self.daemons if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"the test Slurm did not come up waiting for {what} "
                                   f"(exited: {dead or 'none'}):\n{self.log_tail()}")
            time.sleep(0.3)

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of every daemon log, to explain a failure."""
        parts = []
        for log in sorted([*(self.root / "log").glob("*"), self.root / "munge" / "munged.log"]):
            if log.is_file():
                tail = log.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"== {log.name}\n" + "\n".join(tail))
        return "\n".join(parts)

    def job_state(self, job_id: str) -> tuple[str, str]:
        """JobState and ExitCode from `scontrol show job` (no accounting, so no sacct)."""
        text = self.client("scontrol", "show", "job", job_id).stdout
        state = re.search(r"JobState=(\S+)", text)
        code = re.search(r"\bExitCode=(\S+)", text)
        return (state.group(1) if state else "UNKNOWN", code.group(1) if code else "?")

    def sbatch(self, script: Path, *options: str, cwd: Path, env: dict[str, str],
               timeout: float = 120,
               while_running: Callable[[str], None] | None = None) -> JobResult:
        """Submit `script` unchanged with `sbatch --wait`, bounded, and collect its result.

        `options` may only be sbatch options such as --export or --output; `env` is added
        to the cluster's environment (sbatch exports it to the job). `while_running` is
        called with the job id about once a second while the job runs.
        """
        output = Path(tempfile.mkstemp(prefix="job-", suffix=".out", dir=self.root)[1])
        command = ["sbatch", "--wait", "--parsable", f"--output={output}", *options, str(script)]
        proc = subprocess.Popen(command, cwd=cwd, env={**self.env, **env},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self._wait_while_running(proc, timeout, while_running)
        except AssertionError as err:
            proc.kill()
            proc.communicate()
            self.cancel_all()
            raise AssertionError(f"{script.name}: {err}\n"
                                 f"{output.read_text(errors='replace')}") from None
        stdout, stderr = proc.communicate()
        job_id = stdout.strip().split(";")[0]
        if not job_id:
            raise AssertionError(f"sbatch refused {script.name}: {stderr.strip()}")
        state, exit_code = self.job_state(job_id)
        return JobResult(job_id, proc.returncode, state, exit_code,
                         output.read_text(errors="replace"))

    def _wait_while_running(self, proc: subprocess.Popen, timeout: float,
                            while_running: Callable[[str], None] | None) -> None:
        """Wait for sbatch --wait; fail early when the job stays pending (the tests run one
        job at a time, so a pending job asked for more than the node has)."""
        deadline = time.monotonic() + timeout
        pending_since = None
        while proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"the job did not finish in {timeout} s")
            job = self.client("squeue", "--noheader", "--format=%i %T %r").stdout.split()
            if job[1:2] == ["PENDING"]:
                pending_since = pending_since or time.monotonic()
                if time.monotonic() - pending_since > PENDING_LIMIT_S:
                    raise AssertionError(f"the job stayed pending ({' '.join(job[2:])}): "
                                         "it asks for more than the test node has")
            elif job[1:2] == ["RUNNING"] and while_running is not None:
                while_running(job[0])
            time.sleep(1)

    def cancel_all(self) -> None:
        """Cancel every job and wait (bounded) until the queue is empty."""
        self.client("scancel", "--full", f"--user={os.getuid()}")
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            queue = self.client("squeue", "--noheader", "--format=%i")
            if queue.returncode != 0 or not queue.stdout.strip():
                return
            time.sleep(0.5)

    def stop(self) -> None:
        """Cancel jobs, then stop slurmd, slurmctld and munged in that order, and wait."""
        with contextlib.suppress(Exception):
            if any(p.poll() is None for p in self.daemons):
                self.cancel_all()
        for proc in reversed(self.daemons):
            _terminate(proc)
        for pid in processes_using(self.env["SLURM_CONF"]):
            _kill_pid(pid)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while processes_using(self.env["SLURM_CONF"]) and time.monotonic() < deadline:
            time.sleep(0.2)

    def job_processes(self) -> list[int]:
        """Live processes of this cluster other than its daemons (job steps and jobs).

        slurmctld forks a helper, slurmscriptd, that lives and dies with it.
        """
        daemons = {p.pid for p in self.daemons}
        return [pid for pid in processes_using(self.env["SLURM_CONF"])
                if pid not in daemons and not (_comm(pid) == "slurmscriptd"
                                               and _parent(pid) in daemons)]

    def leftovers(self) -> list[int]:
        """Processes of this cluster still alive after stop(): must be none."""
        alive = [p.pid for p in self.daemons if p.poll() is None]
        return alive + processes_using(self.env["SLURM_CONF"])


def _terminate(proc: subprocess.Popen) -> None:
    """SIGTERM one daemon; SIGKILL it if it has not exited within STOP_TIMEOUT_S."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def processes_using(conf: str) -> list[int]:
    """Processes left behind by this cluster (job steps): those whose environment names
    this cluster's own slurm.conf, a path no other process can carry."""
    needle = f"SLURM_CONF={conf}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
    return found


def _comm(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/comm").read_text().strip()
    return ""


def _parent(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return 0


def _kill_pid(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def running_cluster() -> Iterator[SlurmCluster]:
    """A started cluster in a fresh directory; stopped and removed afterwards, always."""
    root = Path(tempfile.mkdtemp(prefix="iolab-slurm-"))
    cluster = SlurmCluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
