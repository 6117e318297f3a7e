"""Loopback sshfs: real mounts through the lab's own sshd, and proof that nothing is left.

Nothing is mocked: every mount is real, and the tests that need one skip with the reason
and the fix where sshfs, sshd or FUSE are missing. IOLAB_WORKDIR points at a temporary
directory, so the real workspace is never touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.core.errors import LabError
from iolab.core.markers import MADE_MARKER
from iolab.measure.context import parse_proc_mounts
from iolab.storage.netmount import lab_leftovers, loopback_sshfs, sshfs_status

ROOT = Path(__file__).resolve().parent.parent
needs_sshfs = pytest.mark.needs("sshfs")

# Mounts the export given as argv[1], says where, then waits to be interrupted.
INTERRUPTED_CHILD = """
import sys, time
from pathlib import Path
from iolab.storage.netmount import loopback_sshfs
try:
    with loopback_sshfs(Path(sys.argv[1])) as mount:
        print("mounted", mount.mount_point, mount.sshd_pid, flush=True)
        time.sleep(60)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


@pytest.fixture
def export(workspace: Path) -> Path:
    directory = workspace / "export"
    directory.mkdir(parents=True)
    (directory / "f.txt").write_text("a small file\n")
    return directory


def mounted_type(path: Path) -> str | None:
    table = parse_proc_mounts(Path("/proc/self/mounts").read_text())
    return next((m.fs_type for m in table if m.mount_point == str(path)), None)


def running(pid: int) -> bool:
    """Whether pid is a live process (an exited child not yet reaped does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def assert_cleaned_up(mount_point: Path, sshd_pid: int, workspace: Path) -> None:
    assert mounted_type(mount_point) is None
    assert not mount_point.exists()
    assert [p.name for p in (workspace / "mnt").iterdir()] == [MADE_MARKER]  # for `clean`
    assert not running(sshd_pid)
    assert [p.name for p in (workspace / "tmp").iterdir()] == [MADE_MARKER]
    assert lab_leftovers() == []


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "iolab", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@needs_sshfs
def test_mount_serves_the_export_both_ways_and_leaves_nothing(export: Path, workspace: Path):
    payload = bytes(range(256)) * 41
    (export / "data.bin").write_bytes(payload)
    sigterm_handler = signal.getsignal(signal.SIGTERM)
    with loopback_sshfs(export) as mount:
        assert mount.fs_type == mounted_type(mount.mount_point) == "fuse.sshfs"
        assert mount.mount_point.parent == workspace / "mnt"
        assert mount.export_dir == export
        assert running(mount.sshd_pid)
        assert (mount.mount_point / "data.bin").read_bytes() == payload
        (mount.mount_point / "written.txt").write_text("through the mount\n")
        assert (export / "written.txt").read_text() == "through the mount\n"
        assert any("fuse.sshfs mount" in entry for entry in lab_leftovers())
    assert_cleaned_up(mount.mount_point, mount.sshd_pid, workspace)
    assert signal.getsignal(signal.SIGTERM) is sigterm_handler


@needs_sshfs
def test_an_error_inside_propagates_and_everything_is_cleaned_up(export: Path, workspace: Path):
    with pytest.raises(RuntimeError, match="failed in the middle"):
        with loopback_sshfs(export) as mount:
            raise RuntimeError("failed in the middle")
    assert_cleaned_up(mount.mount_point, mount.sshd_pid, workspace)


@pytest.mark.slow
@needs_sshfs
def test_a_mount_still_in_use_is_detached_lazily(export: Path, workspace: Path, capsys):
    with loopback_sshfs(export) as mount:
        held = open(mount.mount_point / "f.txt", "rb")
    with contextlib.suppress(OSError):
        held.close()
    assert "detached lazily" in capsys.readouterr().err
    assert_cleaned_up(mount.mount_point, mount.sshd_pid, workspace)


@needs_sshfs
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.slow
def test_an_interrupted_program_leaves_no_mount_and_no_sshd(
    export: Path, workspace: Path, sig: signal.Signals
):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "IOLAB_WORKDIR": str(workspace)}
    child = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_CHILD, str(export)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = child.stdout.readline()
        assert line.startswith("mounted "), line + child.stderr.read()
        _, mount_point, sshd_pid = line.split()
        child.send_signal(sig)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130, err
    assert "interrupted" in out
    assert_cleaned_up(Path(mount_point), int(sshd_pid), workspace)


CUT_OFF_CHILD = """
import sys
from pathlib import Path
from iolab.core.errors import Interrupted, run_cli
from iolab.storage.netmount import loopback_sshfs

def main():
    held = loopback_sshfs(Path(sys.argv[1]))
    mount = held.__enter__()
    print("mounted", mount.mount_point, mount.sshd_pid, flush=True)
    raise Interrupted()

run_cli(main)
"""


@needs_sshfs
@pytest.mark.slow
def test_an_interrupt_between_the_context_managers_steps_leaves_no_mount(
    export: Path, workspace: Path
):
    """A signal handled inside contextlib's own code, after the mount and before the
    with-body, leaves the generator suspended, and the lab ends an interrupted command with
    os._exit: the mount and sshd must go all the same (errors.undo_if_cut_off). The handler
    raising there is played by raising Interrupted right after __enter__."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "IOLAB_WORKDIR": str(workspace)}
    proc = subprocess.run(
        [sys.executable, "-c", CUT_OFF_CHILD, str(export)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 130 and proc.stderr.strip() == "interrupted.", proc.stderr
    _, mount_point, sshd_pid = proc.stdout.split()
    assert_cleaned_up(Path(mount_point), int(sshd_pid), workspace)


@pytest.mark.slow
@needs_sshfs
def test_cli_runs_the_command_on_the_mount(export: Path, workspace: Path):
    proc = run_cli("over-sshfs", "--data", str(export), "--", "cat", "{}/f.txt")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "a small file\n"
    assert "mounted over sshfs" in proc.stderr
    assert lab_leftovers() == []


@pytest.mark.slow
@needs_sshfs
def test_cli_passes_the_exit_code_through(export: Path, workspace: Path):
    proc = run_cli(
        "over-sshfs", "--data", str(export), "--", "sh", "-c", "test -f {}/f.txt && exit 3"
    )
    assert proc.returncode == 3, proc.stderr
    assert lab_leftovers() == []


def test_status_names_the_missing_tool_and_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    status = sshfs_status()
    assert not status.available
    assert status.sshfs is None
    assert "sshfs" in status.reason and "apt-get install sshfs" in status.reason
    assert "dnf install fuse-sshfs" in status.reason
    assert "$HOME and scratch" in status.reason


def test_without_sshfs_the_lab_says_why_in_one_sentence(
    export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(LabError, match="apt-get install sshfs"):
        with loopback_sshfs(export):
            pass
    proc = run_cli("over-sshfs", "--data", str(export), "--", "true")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "apt-get install sshfs" in proc.stderr
    assert "Traceback" not in proc.stderr
