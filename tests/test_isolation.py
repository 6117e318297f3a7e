"""The shared fixtures of conftest.py do what the tests rely on: a wrong one would let tests
write into the checkout, or pass on a node or a disk they never simulated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHECKOUT_WORKSPACE, tree_state

from iolab.core.capacity import SPACE_MARGIN_BYTES, check_capacity
from iolab.core.cluster import on_compute_node
from iolab.core.errors import LabError
from iolab.core.workspace import workdir


def test_the_run_and_its_subprocesses_use_a_temporary_workspace(tmp_path_factory) -> None:
    run_workspace = workdir()
    assert run_workspace != CHECKOUT_WORKSPACE.resolve()
    assert tmp_path_factory.getbasetemp().resolve() in run_workspace.parents
    child = subprocess.run(
        [sys.executable, "-c", "from iolab.core.workspace import workdir; print(workdir())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == str(run_workspace)


def test_the_workspace_fixture_is_the_tests_own(workspace: Path, tmp_path: Path) -> None:
    assert workdir() == workspace.resolve() and tmp_path in workspace.parents
    assert not workspace.exists()


def test_a_changed_workspace_is_noticed(tmp_path: Path) -> None:
    """The end-of-run check compares these states: each kind of change must show."""
    root = tmp_path / "ws"
    assert tree_state(root) == {}
    (root / "dataset").mkdir(parents=True)
    (root / "dataset" / "a.csv").write_text("1\n")
    before = tree_state(root)
    assert set(before) == {".", "dataset", "dataset/a.csv"}
    (root / "dataset" / "a.csv").write_text("12\n")
    assert tree_state(root) != before
    (root / "dataset" / "a.csv").unlink()
    assert "dataset/a.csv" not in tree_state(root)


@pytest.mark.usefixtures("login_node")
def test_login_node_is_outside_any_job() -> None:
    assert not on_compute_node()


@pytest.mark.usefixtures("compute_node")
def test_compute_node_is_inside_a_job() -> None:
    assert on_compute_node()


def test_full_disk_is_refused_for_space_and_for_inodes(
    full_disk: os.statvfs_result, tmp_path: Path
) -> None:
    assert os.statvfs(tmp_path) == full_disk
    with pytest.raises(LabError, match="not enough free space"):
        check_capacity(tmp_path, 1, 0)
    with pytest.raises(LabError, match="not enough free inodes"):
        check_capacity(tmp_path, -SPACE_MARGIN_BYTES, 1)  # room for the bytes, not the inode
