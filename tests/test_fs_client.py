"""A learner's own cluster file system: recognised by its mount, counted through its client.

No Lustre, NFS or GPFS is at hand here (the kernel has none of them), so their counters are
read from files in the formats their code prints (tests/fixtures/fs_client, each naming the
code it follows); `lctl` is a stand-in script on PATH. The FUSE client of the lab's own
CephFS is recognised live in tests/test_cephfs.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.hpc import fs_client
from iolab.measure.context import MountInfo

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "fs_client"
ROOT = Path(__file__).resolve().parents[1]


def mounts(*entries: tuple[str, str, str]) -> list[MountInfo]:
    return [MountInfo(point, fs_type, source, "rw") for point, fs_type, source in entries]


TABLE = mounts(
    ("/", "ext4", "/dev/vda1"),
    ("/scratch", "lustre", "10.0.0.1@o2ib:/scratch"),
    ("/home", "nfs4", "nfs.example.org:/home"),
    ("/project", "ceph", "10.0.0.2:6789:/"),
    ("/work", "fuse.ceph-fuse", "ceph-fuse"),
    ("/gpfs", "gpfs", "gpfs0"),
    ("/remote", "fuse.sshfs", "me@host:/data"),
    ("/fusemystery", "fuse", "whatever"),
)


@pytest.mark.parametrize(
    ("path", "kind", "name"),
    [
        ("/scratch/me/data", "lustre", "Lustre"),
        ("/home/me", "nfs", "NFS"),
        ("/project/x", "ceph", "CephFS (kernel client)"),
        ("/work/x", "ceph-fuse", "CephFS (FUSE client)"),
        ("/gpfs/x", "gpfs", "GPFS (IBM Storage Scale)"),
        ("/remote/x", "other-network", "fuse.sshfs"),
        ("/tmp/x", "other", "ext4"),
    ],
)
def test_each_file_system_is_recognised_by_its_mount(path: str, kind: str, name: str) -> None:
    view = fs_client.identify(path, TABLE)
    assert (view.kind, view.name) == (kind, name)
    assert view.user_counters and view.needs_admin


def test_a_bare_fuse_mount_is_named_by_statfs_magic() -> None:
    """A mount table that says only "fuse" is resolved by the kernel's magic number."""
    assert fs_client.identify("/fusemystery/a", TABLE, magic_type="lustre").kind == "lustre"
    assert fs_client.identify("/fusemystery/a", TABLE, magic_type=None).kind == "other"


def test_what_needs_an_administrator_is_said_for_each_kind() -> None:
    assert "root" in fs_client.identify("/gpfs/x", TABLE).user_counters
    assert "debugfs" in fs_client.identify("/project/x", TABLE).user_counters
    for path in ("/scratch/a", "/home/a", "/project/a", "/work/a", "/gpfs/a"):
        assert "server" in fs_client.identify(path, TABLE).needs_admin


def test_lustre_statistics_are_counted_per_counter_and_summed_over_devices() -> None:
    counts = fs_client.parse_lustre_stats((FIXTURES / "lctl_llite_mdc_stats.txt").read_text())
    assert counts["open"] == 7300 and counts["close"] == 7300
    assert counts["read_bytes"] == 7300 and counts["read_bytes_sum"] == 1_408_900
    assert counts["open_usec"] == 1_971_000
    assert counts["mds_getattr"] == 241 and counts["mds_close"] == 7300
    assert counts["ldlm_ibits_enqueue"] == 7301 and "ldlm_ibits_enqueue_sum" not in counts
    assert "snapshot_time" not in counts and "elapsed_time" not in counts
    doubled = fs_client.parse_lustre_stats((FIXTURES / "lctl_llite_mdc_stats.txt").read_text() * 2)
    assert doubled["open"] == 2 * 7300


def test_nfs_mountstats_are_read_for_the_one_mount_asked_for() -> None:
    text = (FIXTURES / "mountstats.txt").read_text()
    home = fs_client.parse_nfs_mountstats(text, "/home")
    assert home == {
        "NULL": 1,
        "NULL_rtt_ms": 0,
        "READ": 7300,
        "READ_rtt_ms": 3650,
        "OPEN": 7300,
        "OPEN_rtt_ms": 5110,
        "CLOSE": 7300,
        "CLOSE_rtt_ms": 2190,
        "GETATTR": 241,
        "GETATTR_rtt_ms": 120,
        "LOOKUP": 7541,
        "LOOKUP_rtt_ms": 4525,
        "READDIR": 241,
        "READDIR_rtt_ms": 410,
    }
    assert fs_client.parse_nfs_mountstats(text, "/scratch") == {"READ": 5, "READ_rtt_ms": 9}
    assert fs_client.parse_nfs_mountstats(text, "/") is None  # ext4, not NFS
    assert fs_client.parse_nfs_mountstats(text, "/nowhere") is None


def test_lustre_counters_come_from_lctl_for_that_file_system_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lctl get_param` is asked for the mount's own file system (its name from the mount
    source), and a missing lctl gives no counters rather than a guess."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    asked = tmp_path / "asked"
    lctl = bin_dir / "lctl"
    lctl.write_text(
        f'#!/bin/sh\necho "$@" > {asked}\ncat {FIXTURES / "lctl_llite_mdc_stats.txt"}\n'
    )
    lctl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    view = fs_client.identify("/scratch/me", TABLE)
    counters = fs_client.client_counters(view, TABLE)
    assert counters is not None and counters["open"] == 7300
    assert asked.read_text().split() == [
        "get_param",
        "llite.scratch-*.stats",
        "mdc.scratch-*.stats",
    ]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert fs_client.client_counters(view, TABLE) is None


def test_kinds_a_user_cannot_count_give_none() -> None:
    for path in ("/project/a", "/gpfs/a", "/tmp/a"):
        assert fs_client.client_counters(fs_client.identify(path, TABLE), TABLE) is None


def test_delta_keeps_only_what_moved() -> None:
    assert fs_client.delta({"open": 5, "close": 5}, {"open": 12, "close": 5, "getattr": 2}) == {
        "open": 7,
        "getattr": 2,
    }


def test_the_command_says_kind_counters_and_limits_in_plain_lines(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "iolab", "pfs", "client", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{tmp_path} is on ")
    assert lines[1].startswith("what you can count here: ")
    assert lines[-1].startswith("what needs an administrator: ")
    missing = subprocess.run(
        [sys.executable, "-m", "iolab", "pfs", "client", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().count("\n") == 0 and "does not exist" in missing.stderr
