"""A real network file system on any Linux machine: sshfs through a private sshd on 127.0.0.1.

On a cluster, $HOME and scratch are network file systems already, and the lesson compares
them with node-local disk. A laptop or a CI machine has none, so the lab makes one: it starts
an sshd of its own as the ordinary user (no root, no system service, nothing in ~/.ssh read
or changed), bound to 127.0.0.1 on a free port, with throwaway keys and configuration in the
workspace, and mounts a directory of the workspace through it with sshfs. Loopback removes
the wire but not the round trips: every open, stat or read the client does not answer from a
cache becomes an SFTP request to another process and back, which is what makes many small
files slow on NFS or Lustre too.

A FUSE mount or an sshd left running would outlive the lesson on a shared machine, so the
mount is undone and every process and file the lab started is gone afterwards, also after an
error, Ctrl-C or SIGTERM; lab_leftovers() lets a test prove it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from iolab.core.errors import (
    LabError,
    forget_undo,
    interrupts_held,
    sigterm_as_interrupt,
    undo_if_cut_off,
)
from iolab.core.lab_dirs import ensure_writable_dir, remove_tree, scratch_dir
from iolab.core.user_paths import existing_dir
from iolab.core.workspace import WorkspaceEntry, workdir
from iolab.measure.context import parse_proc_mounts
from iolab.measure.tools import fuse_problem

FS_TYPE = "fuse.sshfs"
LOOPBACK = "127.0.0.1"
#: The name the client's private ssh_config gives the lab's sshd; also the mount's source.
HOST_ALIAS = "iolab-loopback"
#: sshfs keeps the names and attributes of what it has listed for 20 s by default (dir_cache),
#: so a stat or an open after a listing skips the server, and the per-file metadata cost the
#: lesson is about disappears: stat of 300 listed files took 3.5 ms with it, 34 ms without
#: it (1.2 ms locally; open and read of each: 90 ms, 133 ms, 3 ms; a 2-CPU VM, sshfs 3.7.3).
#: So it is off, and each first lookup of a name is an SFTP round trip, as on a network file
#: system whose client cache has expired. The kernel's FUSE caches keep their defaults, as
#: an NFS client keeps its own: names and attributes for 1 s, contents re-read at each open.
SSHFS_OPTIONS = ("dir_cache=no",)
#: Debian and Ubuntu build sshd with this privilege-separation directory, which exists only
#: while the system's sshd service runs; sshd started as root refuses to start without it.
PRIVSEP_DIR = Path("/run/sshd")
SBIN_PATH = os.pathsep.join(("/usr/sbin", "/usr/local/sbin"))
PROC = Path("/proc")
PROC_MOUNTS = PROC / "self" / "mounts"
#: The commands whose processes a loopback mount starts (sshd's session children keep "sshd").
MOUNT_COMMANDS = frozenset({"sshd", "sshfs", "ssh"})

START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0
UNMOUNT_ATTEMPTS = 5
UNMOUNT_RETRY_S = 0.2
POLL_S = 0.05
LOG_TAIL_LINES = 4

#: Package of each tool: (Debian/Ubuntu, Fedora/RHEL).
PACKAGES = {
    "sshfs": ("sshfs", "fuse-sshfs"),
    "ssh": ("openssh-client", "openssh-clients"),
    "ssh-keygen": ("openssh-client", "openssh"),
    "sshd": ("openssh-server", "openssh-server"),
    "fusermount3": ("fuse3", "fuse3"),
}
ON_A_CLUSTER = (
    "on a cluster, your $HOME and scratch file systems are already network file "
    "systems: compare those instead"
)


# --------------------------------------------------------------------------- status


@dataclass(frozen=True)
class NetmountStatus:
    """Whether a loopback sshfs mount can be made here; `reason` is one sentence to act on."""

    available: bool
    reason: str
    sshfs: str | None = None
    sshfs_version: str | None = None
    sshd: str | None = None
    sshd_version: str | None = None
    ssh: str | None = None
    ssh_keygen: str | None = None
    fusermount: str | None = None


def sshfs_status() -> NetmountStatus:
    """Find sshfs, ssh, ssh-keygen, sshd and fusermount, and check FUSE and sshd can work here.

    sshd is also looked for in /usr/sbin and /usr/local/sbin, which an ordinary user's PATH
    often lacks.
    """
    found = {name: shutil.which(name) for name in ("sshfs", "ssh", "ssh-keygen")}
    found["sshd"] = shutil.which("sshd") or shutil.which("sshd", path=SBIN_PATH)
    found["fusermount3"] = shutil.which("fusermount3") or shutil.which("fusermount")
    problem = (
        _missing_problem([name for name, path in found.items() if path is None])
        or fuse_problem()
        or _account_problem()
        or _privsep_problem(found["sshd"])
    )
    sshfs_version = found["sshfs"] and _version([found["sshfs"], "-V"], r"SSHFS version (\S+)")
    sshd_version = found["sshd"] and _version([found["sshd"], "-V"], r"OpenSSH_([\w.]+)")
    reason = (
        f"{problem}; {ON_A_CLUSTER}"
        if problem
        else f"sshfs {sshfs_version} and OpenSSH {sshd_version} sshd can mount a loopback "
        "network file system here"
    )
    return NetmountStatus(
        available=problem is None,
        reason=reason,
        sshfs=found["sshfs"],
        sshfs_version=sshfs_version,
        sshd=found["sshd"],
        sshd_version=sshd_version,
        ssh=found["ssh"],
        ssh_keygen=found["ssh-keygen"],
        fusermount=found["fusermount3"],
    )


def sshfs_problem() -> str | None:
    """None if a loopback sshfs mount can be made here, else the sentence that says why not."""
    status = sshfs_status()
    return None if status.available else status.reason


def _missing_problem(missing: list[str]) -> str | None:
    """Which tools are missing and the packages that bring them, for apt and dnf."""
    if not missing:
        return None
    apt = " ".join(dict.fromkeys(PACKAGES[name][0] for name in missing))
    dnf = " ".join(dict.fromkeys(PACKAGES[name][1] for name in missing))
    names = ", ".join(name if name != "fusermount3" else "fusermount3 (FUSE)" for name in missing)
    verb, pronoun = ("is", "it") if len(missing) == 1 else ("are", "them")
    return (
        f"{names} {verb} not installed, and the lab needs {pronoun} to mount a network file "
        f"system over sshfs: install with `apt-get install {apt}` (Debian/Ubuntu) or "
        f"`dnf install {dnf}` (Fedora/RHEL)"
    )


def _account_problem() -> str | None:
    """sshd logs in only users it can look up; containers sometimes run under a bare user id."""
    try:
        pwd.getpwuid(os.geteuid())
    except KeyError:
        return (
            f"your user id {os.geteuid()} has no account entry (in /etc/passwd or the "
            "directory service), and sshd logs in only known users: run the lab as a "
            "user that has one"
        )
    return None


def _privsep_problem(sshd: str | None) -> str | None:
    """As root, sshd needs its privilege-separation directory; the lab does not create it.
    None also without sshd (_missing_problem says that)."""
    if (
        sshd is None
        or os.geteuid() != 0
        or PRIVSEP_DIR.is_dir()
        or not _mentions(sshd, str(PRIVSEP_DIR))
    ):
        return None
    return (
        f"as root, sshd needs {PRIVSEP_DIR}: create it with `mkdir -p {PRIVSEP_DIR}`, "
        "or run the lab as an ordinary user"
    )


def _mentions(binary: str, text: str) -> bool:
    """Whether a program file contains `text`: how sshd's built-in directory is recognised."""
    try:
        return text.encode() in Path(binary).read_bytes()
    except OSError:
        return False


def _version(cmd: list[str], pattern: str) -> str | None:
    """The version a tool prints (on stdout or stderr), found by `pattern`; None if it does not
    say."""
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            errors="replace",
            stdin=subprocess.DEVNULL,
            timeout=STOP_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, proc.stdout + proc.stderr)
    return match.group(1) if match else None


# --------------------------------------------------------------------------- the mount


@dataclass(frozen=True)
class SshfsMount:
    """A live loopback sshfs mount: `export_dir` as seen through sshd at `mount_point`."""

    mount_point: Path
    export_dir: Path
    port: int
    sshd_pid: int
    fs_type: str


@dataclass(frozen=True)
class _Tools:
    """The programs a mount runs, by path (a status that is available has found them all)."""

    ssh_keygen: str
    sshd: str
    sshfs: str
    fusermount: str


def _tools(status: NetmountStatus) -> _Tools:
    """The programs of an available status; LabError with its reason when it is not."""
    if (
        not status.available
        or status.ssh_keygen is None
        or status.sshd is None
        or status.sshfs is None
        or status.fusermount is None
    ):
        raise LabError(status.reason)
    return _Tools(status.ssh_keygen, status.sshd, status.sshfs, status.fusermount)


@contextlib.contextmanager
def loopback_sshfs(export_dir: Path, name: str = "sshfs") -> Iterator[SshfsMount]:
    """Mount `export_dir` over sshfs through a private sshd; undo everything on exit.

    The mount point is a fresh directory under <workspace>/mnt (never under tmp/, which
    `make clean` deletes recursively); keys, configuration and logs go to a scratch
    directory under <workspace>/tmp. Inside the block SIGTERM raises KeyboardInterrupt like
    Ctrl-C, and during cleanup both are held back until it is done, so the mount and the
    processes are gone however the block ends. Raises LabError when sshfs cannot work here.
    """
    tools = _tools(sshfs_status())
    export = existing_dir(export_dir, "give --data an existing folder to mount").resolve()
    with sigterm_as_interrupt():
        cleanup = contextlib.ExitStack()
        # an interrupt handled in contextlib's own steps skips this generator's finally
        token = undo_if_cut_off(cleanup.close)
        try:
            yield _mount(cleanup, tools, export, name)
        finally:
            with interrupts_held():
                cleanup.close()
            forget_undo(token)


def _mount(cleanup: contextlib.ExitStack, tools: _Tools, export: Path, name: str) -> SshfsMount:
    """Start sshd and sshfs, registering each undo step on `cleanup` as soon as it is needed.

    Steps unwind in reverse: unmount and stop sshfs, stop sshd, end any process still
    naming our files, remove the mount point, remove the scratch files.
    """
    scratch = scratch_dir(name)
    cleanup.callback(remove_tree, scratch)
    mounts = ensure_writable_dir(WorkspaceEntry.MNT.path())
    mount_point = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=mounts))
    cleanup.callback(_remove_mount_point, mount_point)
    cleanup.callback(_end_processes_naming, (scratch, mount_point))
    port = _free_port()
    _write_keys_and_configs(tools, scratch, port)
    sshd = _start_sshd(cleanup, tools, scratch, port)
    _start_sshfs(cleanup, tools, export, mount_point, scratch)
    return SshfsMount(mount_point, export, port, sshd.pid, FS_TYPE)


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def _write_keys_and_configs(tools: _Tools, scratch: Path, port: int) -> None:
    """Throwaway host and client keys, sshd_config and the client's ssh_config, in scratch.

    The client trusts exactly the new host key (its own known_hosts), so if another program
    grabbed the port first, sshfs fails instead of talking to it.
    """
    user = pwd.getpwuid(os.geteuid()).pw_name  # the account sshd checks, whatever $USER says
    host_key, client_key = scratch / "host_key", scratch / "client_key"
    for key in (host_key, client_key):
        _run(
            [tools.ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-C", HOST_ALIAS, "-f", str(key)],
            "ssh-keygen could not create a key",
        )
    (scratch / "authorized_keys").write_text(client_key.with_suffix(".pub").read_text())
    (scratch / "known_hosts").write_text(
        f"[{LOOPBACK}]:{port} {host_key.with_suffix('.pub').read_text()}"
    )
    _write_private(
        scratch / "sshd_config",
        f"""\
Port {port}
ListenAddress {LOOPBACK}
HostKey "{host_key}"
AuthorizedKeysFile "{scratch / "authorized_keys"}"
PidFile "{scratch / "sshd.pid"}"
AllowUsers {user}
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowTcpForwarding no
Subsystem sftp internal-sftp
ForceCommand internal-sftp
""",
    )
    _write_private(
        scratch / "ssh_config",
        f"""\
Host {HOST_ALIAS}
    HostName {LOOPBACK}
    Port {port}
    User {user}
    IdentityFile "{client_key}"
    IdentitiesOnly yes
    BatchMode yes
    StrictHostKeyChecking yes
    UserKnownHostsFile "{scratch / "known_hosts"}"
    LogLevel ERROR
""",
    )


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner may change: ssh refuses configurations others can edit."""
    path.write_text(text)
    path.chmod(0o600)


def _run(cmd: Sequence[str], failure: str) -> None:
    """Run a short helper command; a failure becomes a LabError with its last message."""
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        errors="replace",
        stdin=subprocess.DEVNULL,
        timeout=START_TIMEOUT_S,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        raise LabError(f"{failure} ({last})")


def _started(
    cleanup: contextlib.ExitStack,
    cmd: Sequence[str],
    log: Path,
    undo: Callable[[subprocess.Popen], object],
    ready: Callable[[], bool],
    late: Callable[[], str],
    died: Callable[[], str],
) -> subprocess.Popen:
    """Run `cmd` in the foreground as our child, in its own session, logging to `log`, with
    `undo(process)` registered at once; return it when `ready()`. A LabError with `late()`
    after START_TIMEOUT_S, or with `died()` if it exits first."""
    with open(log, "wb") as out:
        process = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    cleanup.callback(undo, process)
    deadline = time.monotonic() + START_TIMEOUT_S
    while process.poll() is None:
        if ready():
            return process
        if time.monotonic() > deadline:
            raise LabError(late())
        time.sleep(POLL_S)
    raise LabError(died())


def _start_sshd(
    cleanup: contextlib.ExitStack, tools: _Tools, scratch: Path, port: int
) -> subprocess.Popen:
    """Run sshd and wait until it listens. sshd re-executes itself for each connection, so it
    must be started by absolute path."""
    log = scratch / "sshd.log"
    return _started(
        cleanup,
        [tools.sshd, "-D", "-e", "-f", str(scratch / "sshd_config")],
        log,
        undo=lambda sshd: _stop_sshd(sshd, scratch),
        ready=lambda: _accepts(port),
        late=lambda: (
            f"the lab's sshd did not listen on {LOOPBACK}:{port} within "
            f"{START_TIMEOUT_S:g} s (sshd said: {_tail(log)}); {ON_A_CLUSTER}"
        ),
        died=lambda: (
            f"the lab's sshd stopped right after starting (sshd said: {_tail(log)}); {ON_A_CLUSTER}"
        ),
    )


def _accepts(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:port."""
    try:
        socket.create_connection((LOOPBACK, port), timeout=POLL_S * 10).close()
    except OSError:
        return False
    return True


def _start_sshfs(
    cleanup: contextlib.ExitStack, tools: _Tools, export: Path, mount_point: Path, scratch: Path
) -> None:
    """Run sshfs and wait until the mount appears as fuse.sshfs. When it fails, sshd's log is
    quoted too: a refused login is explained only there."""
    cmd = [
        tools.sshfs,
        f"{HOST_ALIAS}:{export}",
        str(mount_point),
        "-f",
        "-F",
        str(scratch / "ssh_config"),
        "-o",
        ",".join(SSHFS_OPTIONS),
    ]
    _started(
        cleanup,
        cmd,
        scratch / "sshfs.log",
        undo=lambda sshfs: _unmount_and_stop(tools.fusermount, mount_point, sshfs),
        ready=lambda: _fs_type(mount_point) == FS_TYPE,
        late=lambda: (
            f"sshfs did not mount {export} within {START_TIMEOUT_S:g} s "
            f"({_said(scratch)}); {ON_A_CLUSTER}"
        ),
        died=lambda: (
            f"sshfs could not mount {export} ({_said(scratch)}); in a container, FUSE "
            f"also needs `--device /dev/fuse --cap-add SYS_ADMIN`; {ON_A_CLUSTER}"
        ),
    )


def _said(scratch: Path) -> str:
    """What sshfs and sshd last logged, for an error message."""
    return f"sshfs said: {_tail(scratch / 'sshfs.log')}; sshd said: {_tail(scratch / 'sshd.log')}"


def _tail(log: Path) -> str:
    """The last lines a helper logged, joined into one line for an error message."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    except OSError:
        return "no log"
    return " / ".join([line for line in lines if line][-LOG_TAIL_LINES:]) or "nothing logged"


def _fs_type(mount_point: Path) -> str | None:
    """The type of the file system mounted exactly at mount_point, None if nothing is."""
    try:
        table = parse_proc_mounts(PROC_MOUNTS.read_text())
    except OSError:
        return None
    types = [m.fs_type for m in table if m.mount_point == str(mount_point)]
    return types[-1] if types else None


# --------------------------------------------------------------------------- undoing it


def _unmount_and_stop(fusermount: str, mount_point: Path, sshfs: subprocess.Popen) -> None:
    """Unmount (retrying while busy, lazily as a last resort), then make sure sshfs ended.

    A lazy unmount detaches the mount at once, but programs that still had files open there
    get errors from then on; that is reported on stderr. If even that fails, LabError.
    """
    problem = None
    for _ in range(UNMOUNT_ATTEMPTS):
        if _fs_type(mount_point) is None:
            break
        problem = _fusermount(fusermount, "-u", mount_point)
        if problem is None:
            break
        time.sleep(UNMOUNT_RETRY_S)
    else:
        if _fs_type(mount_point) is not None:
            lazy_problem = _fusermount(fusermount, "-uz", mount_point)
            if lazy_problem is None:
                print(
                    f"note: {mount_point} was still in use ({problem}), so it was detached "
                    "lazily; programs that had files open there can no longer use them",
                    file=sys.stderr,
                )
    _stop(sshfs)
    if _fs_type(mount_point) is not None:
        raise LabError(
            f"could not unmount {mount_point} ({problem}); close the programs "
            f"using it and run `{fusermount} -u {mount_point}`"
        )


def _fusermount(fusermount: str, flags: str, mount_point: Path) -> str | None:
    """Run fusermount; None on success, else its last message."""
    try:
        proc = subprocess.run(
            [fusermount, flags, str(mount_point)],
            capture_output=True,
            text=True,
            errors="replace",
            stdin=subprocess.DEVNULL,
            timeout=STOP_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return f"fusermount {flags} did not finish within {STOP_TIMEOUT_S:g} s"
    if proc.returncode == 0:
        return None
    return (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]


def _stop(proc: subprocess.Popen) -> None:
    """End a child started in its own session, with its process group: politely, then not."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(STOP_TIMEOUT_S)
            return


def _stop_sshd(sshd: subprocess.Popen, scratch: Path) -> None:
    """Stop sshd once the connection's own sshd processes have ended after the unmount.

    They live in sessions of their own, so stopping sshd's group does not reach them, and
    sshd reaps them only while it runs.
    """
    _wait_until(lambda: all(p.pid == sshd.pid for p in _processes_naming([scratch])))
    _stop(sshd)


def _end_processes_naming(roots: Sequence[Path]) -> None:
    """End what the stops above did not: a connection's sshd that hung on, or a process
    started just before an interrupt and not yet registered for cleanup."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [proc.pid for proc in _processes_naming(roots)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if not pids or _wait_until(lambda: not _processes_naming(roots)):
            return


def _wait_until(condition: Callable[[], bool], timeout: float = STOP_TIMEOUT_S) -> bool:
    """Poll condition until it holds (True) or timeout seconds have passed (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def _remove_mount_point(mount_point: Path) -> None:
    """Remove the empty mount point; <workspace>/mnt, marked as the lab's, stays for `clean`.

    Only rmdir, never a recursive delete: if the unmount failed, a recursive delete would
    go through the mount and delete the exported files.
    """
    with contextlib.suppress(OSError):
        mount_point.rmdir()


# --------------------------------------------------------------------------- leftovers


@dataclass(frozen=True)
class _Process:
    pid: int
    ppid: int
    command: str
    cmdline: str


def lab_leftovers() -> list[str]:
    """What the lab's loopback mounts left behind under workdir(): mounts and live processes.

    An empty list means every sshfs mount is gone and no sshd, sshfs or ssh process that
    names or holds open a file in the workspace (or descends from one) is still running.
    """
    root = workdir()
    try:
        table = parse_proc_mounts(PROC_MOUNTS.read_text())
    except OSError:
        table = []
    mounts = [
        f"{m.fs_type} mount at {m.mount_point}"
        for m in table
        if m.fs_type == FS_TYPE and _names(m.mount_point, root)
    ]
    processes = [f"{p.command} process {p.pid}: {p.cmdline}" for p in _processes_naming([root])]
    return mounts + processes


def _processes_naming(roots: Sequence[Path]) -> list[_Process]:
    """Live sshd, sshfs and ssh processes naming or holding open a path under roots, and
    their descendants (sshd's session children rewrite their command line)."""
    candidates = _mount_processes()
    ours = {
        p.pid
        for p in candidates
        if any(_names(text, root) for text in [p.cmdline, *_open_files(p.pid)] for root in roots)
    }
    while children := {p.pid for p in candidates if p.ppid in ours} - ours:
        ours |= children
    return [p for p in candidates if p.pid in ours]


def _names(text: str, root: Path) -> bool:
    """Whether text contains the path root or a path under it."""
    return re.search(re.escape(str(root)) + r"(/|\s|$)", text) is not None


def _mount_processes() -> list[_Process]:
    """Every running (not zombie) process whose command is sshd, sshfs or ssh."""
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # ended meanwhile
        command = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if command in MOUNT_COMMANDS and state != "Z":
            text = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
            found.append(_Process(int(entry.name), int(ppid), command, text))
    return found


def _open_files(pid: int) -> list[str]:
    """The paths a process has open (empty when we may not look)."""
    fd_dir = PROC / str(pid) / "fd"
    try:
        fds = list(fd_dir.iterdir())
    except OSError:
        return []
    paths = []
    for fd in fds:
        with contextlib.suppress(OSError):
            paths.append(os.readlink(fd))
    return paths
