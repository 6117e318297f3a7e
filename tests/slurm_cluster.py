"""A real Slurm of one or more nodes (munged, slurmctld, slurmd) in one temporary directory.

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

Several nodes on one host (`nodes=2` to 4): one slurmd per node (`slurmd -N n1`), each on its
own port, and each started inside its own UTS and mount namespace (`unshare --uts --mount`)
so that it is a host of its own to what runs there:

* `hostname` and MPI_Get_processor_name say n1, n2, ...: MPI and ROMIO tell nodes apart by
  that name (one aggregator per node, shared memory only within a node);
* a hosts file naming every node is bound over /etc/hosts inside the namespace only, so
  MPI's launcher and ranks can resolve n1, n2 (all 127.0.0.1);
* `<root>/local` is the node-local disk: the same path on every node, as /tmp or
  $TMPDIR is on a real cluster, bound to `<root>/nodes/<node>` in that node's namespace, so
  what a job leaves there can be checked per node from outside.

Nothing outside the namespaces sees any of this: the host's /etc/hosts and name are
untouched. What one host cannot give is stated where it matters: the nodes share its CPUs,
memory, disk and page cache, so rates measured here are not a cluster's.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: The command each daemon or client needs, and the Debian package that provides it.
PACKAGES = {
    "munged": "munge",
    "mungekey": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sbatch": "slurm-client",
    "sinfo": "slurm-client",
    "scontrol": "slurm-client",
    "scancel": "slurm-client",
    "squeue": "slurm-client",
}
#: How long the node may take to come up idle, and daemons to exit after SIGTERM.
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 15
#: A job pending longer than this cannot start on the test node.
PENDING_LIMIT_S = 20
#: How often a submitted job's state is asked for, and the states it ends in.
POLL_S = 0.25
FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)
#: The most nodes one host runs (each slurmd and its jobs share the host's cores).
MAX_NODES = 4
#: Hardware fields of `slurmd -C` copied to the node line.
NODE_FIELDS = (
    "CPUs",
    "Boards",
    "SocketsPerBoard",
    "CoresPerSocket",
    "ThreadsPerCore",
    "RealMemory",
)


def skip_reason() -> str | None:
    """Why a Slurm cannot be started here (not root, a package missing), or None."""
    missing = sorted({pkg for cmd, pkg in PACKAGES.items() if shutil.which(cmd) is None})
    if missing:
        return (
            "a test Slurm needs the Debian packages "
            + ", ".join(missing)
            + " (apt-get install slurmctld slurmd slurm-client munge)"
        )
    if os.geteuid() != 0:
        return "a test Slurm must run as root (its daemons switch users); run as CI's root"
    return None


def multinode_skip_reason() -> str | None:
    """Why several nodes cannot run on this host (on top of skip_reason), or None."""
    reason = skip_reason()
    if reason:
        return reason
    if shutil.which("unshare") is None:
        return "a several-node test Slurm needs unshare (Debian package util-linux)"
    proc = subprocess.run(
        ["unshare", "--uts", "--mount", "--propagation", "private", "hostname", "iolab-probe"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if proc.returncode != 0:
        return (
            "a several-node test Slurm needs new UTS and mount namespaces, which this "
            f"machine refuses ({proc.stderr.strip() or proc.returncode})"
        )
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
    text = subprocess.run(
        ["slurmd", "-C"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    fields = dict(re.findall(r"(\w+)=(\S+)", text))
    return " ".join(f"{key}={fields[key]}" for key in NODE_FIELDS if key in fields)


def node_names(nodes: int) -> list[str]:
    """The nodes' names: this host's own for one node, else n1, n2, ..."""
    if not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"a test Slurm has 1 to {MAX_NODES} nodes, not {nodes}")
    return [node_name()] if nodes == 1 else [f"n{i}" for i in range(1, nodes + 1)]


def node_lines(names: list[str], hardware: str) -> str:
    """The NodeName lines: one node on this host, or several each on a port of its own."""
    if len(names) == 1:
        return f"NodeName={names[0]} NodeAddr=127.0.0.1 {hardware} State=UNKNOWN"
    host = node_name()
    return "\n".join(
        f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 "
        f"Port={_free_port()} {hardware} State=UNKNOWN"
        for name in names
    )


def slurm_conf(root: Path, names: list[str], hardware: str) -> str:
    """A minimal slurm.conf whose every path lies inside `root`."""
    host = node_name()
    return f"""\
ClusterName=iolabtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/sock/munge.socket
SlurmUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
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
{node_lines(names, hardware)}
PartitionName=debug Nodes={",".join(names)} Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class JobResult:
    """What a finished batch job left: its exit status (what `sbatch --wait` would return),
    its state and exit code as Slurm reports them, and its output file."""

    job_id: str
    returncode: int
    state: str
    exit_code: str
    output: str


class SlurmCluster:
    """The running daemons, and the client commands pointed at them."""

    def __init__(self, root: Path, nodes: int = 1):
        self.root = root
        self.nodes = node_names(nodes)
        self.node = self.nodes[0]
        self.env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
        self.daemons: list[subprocess.Popen] = []
        #: Per node of several, the slurmd whose mount namespace is the node's (nsenter).
        self.node_pids: dict[str, int] = {}

    def client(self, *command: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """Run a Slurm client command against this cluster."""
        return subprocess.run(
            list(command), env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def _daemon(self, name: str, *command: str) -> None:
        log = open(self.root / "log" / f"{name}.stdout", "w")
        with log:
            self.daemons.append(
                subprocess.Popen(
                    list(command),
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def start(self) -> None:
        """Write the configuration, start munged, slurmctld and slurmd, wait for idle."""
        for sub in ("munge", "sock", "state", "spool", "run", "log", "local"):
            (self.root / sub).mkdir()
        for name in self.nodes:
            (self.root / "spool" / name).mkdir()
            (self.root / "nodes" / name).mkdir(parents=True)
        # munged wants its socket directory (and the path to it) searchable by all, and its
        # key readable by its owner only.
        for path in (self.root, self.root / "sock"):
            path.chmod(0o711)
        (self.root / "munge").chmod(0o700)
        key = self.root / "munge" / "munge.key"
        subprocess.run(
            ["mungekey", "--create", f"--keyfile={key}"],
            check=True,
            capture_output=True,
            timeout=30,
        )
        (self.root / "slurm.conf").write_text(slurm_conf(self.root, self.nodes, node_hardware()))
        (self.root / "hosts").write_text(
            f"127.0.0.1 localhost {node_name()} " + " ".join(self.nodes) + "\n"
        )
        self._daemon(
            "munged",
            "munged",
            "--foreground",
            f"--key-file={key}",
            f"--socket={self.root}/sock/munge.socket",
            f"--pid-file={self.root}/munge/munged.pid",
            f"--log-file={self.root}/munge/munged.log",
            f"--seed-file={self.root}/munge/munged.seed",
        )
        self._wait_for(lambda: (self.root / "sock" / "munge.socket").exists(), "munged")
        self._daemon("slurmctld", "slurmctld", "-D", "-i")
        if len(self.nodes) == 1:
            self._daemon("slurmd", "slurmd", "-D", "-N", self.node)
        else:
            for name in self.nodes:
                self._daemon(f"slurmd-{name}", *self.node_command(name))
                # unshare and sh exec slurmd: this pid is the node's slurmd, in its namespaces
                self.node_pids[name] = self.daemons[-1].pid
        self._wait_for(self._idle, "every node to show idle in sinfo")

    def node_command(self, name: str) -> list[str]:
        """slurmd for one of several nodes, in namespaces that make it a host of its own."""
        setup = (
            f"mount --bind {self.root}/hosts /etc/hosts"
            f" && mount --bind {self.root}/nodes/{name} {self.root}/local"
            f" && hostname {name} && exec slurmd -D -N {name}"
        )
        return ["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", setup]

    def local_dir(self, name: str) -> Path:
        """Node `name`'s node-local disk as seen from outside the nodes."""
        return self.root / "nodes" / name

    def _idle(self) -> bool:
        proc = self.client("sinfo", "--noheader", "--format=%T %D")
        return proc.returncode == 0 and proc.stdout.split() == ["idle", str(len(self.nodes))]

    def _wait_for(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            dead = [p.args[0] for p in self.daemons if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the test Slurm did not come up waiting for {what} "
                    f"(exited: {dead or 'none'}):\n{self.log_tail()}"
                )
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

    def sbatch(
        self,
        script: Path,
        *options: str,
        cwd: Path,
        env: dict[str, str],
        timeout: float = 120,
        while_running: Callable[[str], None] | None = None,
    ) -> JobResult:
        """Submit `script` unchanged, wait (bounded) until the job ends, collect its result.

        `options` may only be sbatch options such as --export or --output; `env` is added
        to the cluster's environment (sbatch exports it to the job). `while_running` is
        called with the job id about once a second while the job runs. Not `sbatch --wait`:
        its poll interval grows to 10 s, which made every short job here take 10 s.
        """
        output = Path(tempfile.mkstemp(prefix="job-", suffix=".out", dir=self.root)[1])
        command = ["sbatch", "--parsable", f"--output={output}", *options, str(script)]
        proc = subprocess.run(
            command, cwd=cwd, env={**self.env, **env}, capture_output=True, text=True, timeout=30
        )
        job_id = proc.stdout.strip().split(";")[0]
        if proc.returncode != 0 or not job_id:
            raise AssertionError(f"sbatch refused {script.name}: {proc.stderr.strip()}")
        try:
            state, exit_code = self._wait_until_done(job_id, timeout, while_running)
        except AssertionError as err:
            self.cancel_all()
            raise AssertionError(
                f"{script.name}: {err}\n{output.read_text(errors='replace')}"
            ) from None
        return JobResult(
            job_id, job_returncode(exit_code), state, exit_code, output.read_text(errors="replace")
        )

    def _wait_until_done(
        self, job_id: str, timeout: float, while_running: Callable[[str], None] | None
    ) -> tuple[str, str]:
        """The job's final state and exit code; fail early when it stays pending (the tests
        run one job at a time, so a pending job asked for more than the node has)."""
        deadline = time.monotonic() + timeout
        pending_since = None
        called_at = 0.0
        while True:
            state, exit_code = self.job_state(job_id)
            if state in FINAL_STATES:
                return state, exit_code
            now = time.monotonic()
            if now > deadline:
                raise AssertionError(f"the job did not finish in {timeout} s")
            if state == "PENDING":
                pending_since = pending_since or now
                if now - pending_since > PENDING_LIMIT_S:
                    reason = self.client("squeue", "--noheader", "--format=%r", "--job", job_id)
                    raise AssertionError(
                        f"the job stayed pending ({reason.stdout.strip()}): "
                        "it asks for more than the test node has"
                    )
            elif state == "RUNNING" and while_running is not None and now - called_at >= 1:
                called_at = now
                while_running(job_id)
            time.sleep(POLL_S)

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
        return [
            pid
            for pid in processes_using(self.env["SLURM_CONF"])
            if pid not in daemons and not (_comm(pid) == "slurmscriptd" and _parent(pid) in daemons)
        ]

    def leftovers(self) -> list[int]:
        """Processes of this cluster still alive after stop(): must be none."""
        alive = [p.pid for p in self.daemons if p.poll() is None]
        return alive + processes_using(self.env["SLURM_CONF"])


def job_returncode(exit_code: str) -> int:
    """The exit status a shell would report for Slurm's ExitCode "status:signal"."""
    status, _, signal_number = exit_code.partition(":")
    if not status.isdigit() or not signal_number.isdigit():
        return 1
    return int(status) or (128 + int(signal_number) if int(signal_number) else 0)


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
def running_cluster(nodes: int = 1) -> Iterator[SlurmCluster]:
    """A started cluster in a fresh directory; stopped and removed afterwards, always."""
    root = Path(tempfile.mkdtemp(prefix="iolab-slurm-"))
    cluster = SlurmCluster(root, nodes)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
