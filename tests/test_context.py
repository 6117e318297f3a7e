"""Tests of iolab.measure.context: mount tables, file-system classes, tool versions, machine
context."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from iolab.core.errors import LabError
from iolab.core.workspace import public_text
from iolab.measure.context import (
    MountInfo,
    context_frame,
    fs_kind,
    is_network_fs,
    listed_as_mounted,
    machine_context,
    mount_for,
    parse_mountinfo,
    parse_proc_mounts,
    public_mount_options,
    tool_version,
)

linux_only = pytest.mark.skipif(
    not Path("/proc/self/mountinfo").exists(), reason="needs Linux's /proc/self/mountinfo"
)

# The example line from the kernel's proc(5) documentation, with a space in the mount point
# and two optional fields before the separator.
MOUNTINFO_LINE = (
    "36 35 98:0 /mnt1 /mnt/my\\040disk rw,noatime master:1 shared:2 - ext3 /dev/root "
    "rw,errors=continue"
)


def test_parse_mountinfo_unescapes_octal_and_splits_at_separator():
    (mount,) = parse_mountinfo(MOUNTINFO_LINE + "\n")
    assert mount == MountInfo(
        mount_point="/mnt/my disk",
        fs_type="ext3",
        source="/dev/root",
        options="rw,noatime,errors=continue",
    )


def test_parse_mountinfo_merges_duplicate_options_and_skips_malformed_lines():
    text = "1 0 0:1 / / rw,relatime - tmpfs none rw,relatime,size=4k\nnot a mount line\n"
    assert parse_mountinfo(text) == [MountInfo("/", "tmpfs", "none", "rw,relatime,size=4k")]


def test_parse_proc_mounts_unescapes_octal():
    text = "server:/export /scratch/a\\040b nfs4 rw,vers=4.2 0 0\n"
    expected = MountInfo("/scratch/a b", "nfs4", "server:/export", "rw,vers=4.2")
    assert parse_proc_mounts(text) == [expected]


def test_mount_for_takes_longest_containing_mount_point_not_a_string_prefix():
    mounts = [
        MountInfo("/", "ext4", "/dev/sda1", "rw"),
        MountInfo("/home", "nfs4", "srv:/home", "rw"),
        MountInfo("/home/alice/data", "lustre", "mgs@tcp:/fs", "rw"),
    ]
    assert mount_for("/home/alicebob/x", mounts).fs_type == "nfs4"
    assert mount_for("/home/alice/data", mounts).fs_type == "lustre"
    assert mount_for("/home/alice/data/f.csv", mounts).fs_type == "lustre"
    assert mount_for("/opt", mounts).mount_point == "/"


def test_mount_for_prefers_the_later_of_two_mounts_on_one_directory():
    mounts = [MountInfo("/", "ext4", "a", "rw"), MountInfo("/", "overlay", "b", "rw")]
    assert mount_for("/x", mounts).fs_type == "overlay"


def test_mount_for_without_a_mount_table_says_unknown():
    assert mount_for("/anything", []).fs_type == "unknown"


@linux_only
def test_mount_for_root_matches_findmnt():
    mount = mount_for("/")
    assert mount.mount_point == "/"
    assert mount.fs_type
    if shutil.which("findmnt") is None:
        pytest.skip("findmnt (util-linux) is not installed")
    expected = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "--target", "/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert mount.fs_type == expected


@linux_only
@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm here")
def test_mount_for_a_directory_in_dev_shm_is_tmpfs():
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        mount = mount_for(Path(tmp) / "not-yet-created.csv")
    assert mount.fs_type == "tmpfs"
    assert mount.mount_point == "/dev/shm"


@linux_only
@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm here")
def test_a_mount_point_is_found_in_the_table_without_asking_the_mount(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/dev/shm is a mount point, also reached through a link to /dev; a folder is not. The
    mount itself is never looked at (a FUSE client with a stopped server would never answer)."""
    (tmp_path / "dev").symlink_to("/dev")
    assert listed_as_mounted("/dev/shm") and listed_as_mounted(tmp_path / "dev" / "shm")
    assert not listed_as_mounted(tmp_path)
    looked_at = []
    real_lstat = os.lstat
    monkeypatch.setattr(
        os, "lstat", lambda path, *a, **k: looked_at.append(str(path)) or real_lstat(path, *a, **k)
    )
    listed_as_mounted("/dev/shm")
    assert "/dev/shm" not in looked_at


def test_filesystem_classes():
    assert is_network_fs("nfs4") and is_network_fs("lustre") and is_network_fs("fuse.sshfs")
    assert not is_network_fs("ext4") and not is_network_fs("virtiofs")
    assert [fs_kind(t) for t in ("gpfs", "9p", "tmpfs", "xfs", "unknown")] == [
        "network",
        "host-shared",
        "memory",
        "local",
        "unknown",
    ]


def test_public_text_masks_home_and_user(monkeypatch):
    monkeypatch.setenv("HOME", "/home/alice")
    monkeypatch.setenv("LOGNAME", "alice")
    assert public_text("/home/alice/iolab/workspace") == "~/iolab/workspace"
    assert public_text("--data=/home/alice/ds") == "--data=~/ds"
    assert public_text("/scratch/project_1/alice/run") == "/scratch/project_1/$USER/run"
    assert public_text("/home/alicebob") == "/home/alicebob"


def test_public_text_shows_the_checkout_and_workspace_relative(monkeypatch):
    """A published notebook and a learner's run must print the same paths (issue 13)."""
    from iolab.core.workspace import repo_root

    root = repo_root()
    monkeypatch.delenv("IOLAB_WORKDIR", raising=False)
    assert public_text(root / "workspace" / "dataset") == "workspace/dataset"
    assert public_text(f"--data={root}/workspace/ds") == "--data=workspace/ds"
    assert public_text(root) == "."
    assert public_text(f"{root}-old/x").endswith(f"{root.name}-old/x")  # a neighbour: not "."
    monkeypatch.setenv("IOLAB_WORKDIR", "/scratch/p1/somebody/iolab")
    assert public_text("/scratch/p1/somebody/iolab/dataset") == "$IOLAB_WORKDIR/dataset"
    assert public_text(root / "demos" / "naive_reader.py") == "demos/naive_reader.py"


def test_public_mount_options_drop_addresses_and_accounts():
    options = "rw,vers=4.2,addr=10.0.0.5,clientaddr=10.0.0.9,username=alice,proto=tcp"
    assert public_mount_options(options) == "rw,vers=4.2,proto=tcp"


def test_tool_version(tmp_path, monkeypatch):
    assert tool_version("iolab-no-such-tool") is None
    assert any(c.isdigit() for c in tool_version("ls"))
    fake = tmp_path / "fakemake"
    fake.write_text("#!/bin/sh\necho 'build details:'; echo 'Version: 4.2.1'\n")
    fake.chmod(0o755)
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho 'usage: broken' >&2; exit 2\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert tool_version("fakemake") == "Version: 4.2.1"
    assert tool_version("broken") == "unknown"


@linux_only
def test_machine_context_describes_machine_and_location(tmp_path):
    ctx = machine_context(tmp_path, tools=("ls", "iolab-no-such-tool"))
    assert ctx["cpu_count"] >= ctx["cpu_count_usable"] >= 1
    assert ctx["memory_gib"] > 0
    assert ctx["python"].count(".") == 2
    assert ctx["pandas"] and ctx["numpy"]
    assert ctx["iolab-no-such-tool_version"] is None
    assert ctx["location_fs_type"] == mount_for(tmp_path).fs_type
    assert ctx["location_free_bytes"] > 0
    json.dumps(ctx)  # the record must be JSON-ready
    assert "hostname" not in ctx and "user" not in ctx
    host = socket.gethostname()
    if len(host) >= 4:
        assert host not in json.dumps(ctx)


def test_machine_context_rejects_a_missing_location(tmp_path):
    with pytest.raises(LabError, match="does not exist|cannot inspect"):
        machine_context(tmp_path / "missing")


def test_context_frame_has_item_and_value_columns():
    ctx = {"kernel": "6.1", "cpu_count": 4, "fio_version": None}
    frame = context_frame(ctx)
    assert list(frame.columns) == ["item", "value"]
    assert frame["value"].tolist() == ["6.1", "4", "n/a"]


def test_machine_tag_tells_machines_apart_without_showing_the_id(tmp_path):
    from iolab.measure.context import machine_tag

    one, other = tmp_path / "one", tmp_path / "other"
    one.write_text("4f1c0a6b9e2d4c3f8a7b6c5d4e3f2a1b\n")
    other.write_text("0123456789abcdef0123456789abcdef\n")
    tag = machine_tag(one, "6.1.0", "login1")
    assert tag == machine_tag(one, "6.1.0", "login1") != machine_tag(other, "6.1.0", "login1")
    # clones of one image share a machine-id: the kernel or the host tells them apart
    assert tag != machine_tag(one, "6.8.0", "login1") and tag != machine_tag(one, "6.1.0", "n2")
    assert len(tag) == 8 and tag not in one.read_text() and "login1" not in tag
    missing = tmp_path / "missing"
    assert machine_tag(missing, "6.1.0", "a") != machine_tag(missing, "6.1.0", "b")


def test_machine_label_names_cpu_memory_os_kernel_and_tag():
    from iolab.measure.context import machine_label, machine_tag

    context = {
        "cpu_model": "AMD EPYC",
        "cpu_count": 8,
        "cpu_count_usable": 2,
        "memory_gib": 23.5,
        "os": "Debian GNU/Linux 12 (bookworm)",
        "kernel": "6.1.0",
    }
    assert machine_label(context) == (
        "AMD EPYC, 2 CPUs, 23.5 GiB, Debian GNU/Linux 12 "
        f"(bookworm), kernel 6.1.0, machine {machine_tag()}"
    )
