"""`python -m iolab`: the syscall counts the issue promises, the lab's safety rules, clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from iolab.lab import execute_notebook
from iolab.cleanup import clean
from iolab.netmount import loopback_sshfs, sshfs_status
from iolab.syscalls import strace_status
from iolab.workspace import ensure_writable_dir, user_name

ROOT = Path(__file__).resolve().parent.parent
needs_strace = pytest.mark.needs("strace")


def iolab(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "iolab", *args], cwd=ROOT, text=True,
                          capture_output=True, env={**os.environ, **(env or {})}, timeout=600)


@pytest.mark.slow
@needs_strace
@pytest.mark.parametrize("reader,opens", [("read_files", 7300), ("read_archive", 1)])
def test_dataset_opens_of_the_default_dataset_are_exact(default_dataset: Path, reader: str,
                                                        opens: int) -> None:
    data = str(default_dataset)
    proc = iolab("syscalls", "--data-dir", data, "--json", "--",
                 sys.executable, f"demos/{reader}.py", "--data", data)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["method"] == "strace"
    assert report["dataset_opens"] == opens
    # The imports cost far more opens than the archive reader's one data file.
    assert report["other_opens"] > 100


@pytest.mark.slow
def test_fallback_without_strace_still_counts_the_dataset_opens(small_dataset: Path) -> None:
    data = str(small_dataset)
    proc = iolab("syscalls", "--data-dir", data, "--json", "--method", "fallback", "--",
                 sys.executable, "demos/read_files.py", "--data", data)
    report = json.loads(proc.stdout)
    assert report["method"] == "audit-hook+proc-io"
    assert report["dataset_opens"] == 37


def test_notebooks_execute_into_a_copy_and_leave_the_source_alone(tmp_path: Path) -> None:
    source = tmp_path / "src" / "n.ipynb"
    source.parent.mkdir()
    notebook = new_notebook(cells=[new_code_cell("import os\nprint(os.getcwd())")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    nbformat.write(notebook, source)
    before = source.read_bytes()
    target = tmp_path / "out" / "n.ipynb"
    execute_notebook(source, target, timeout_s=120)
    assert source.read_bytes() == before
    executed = nbformat.read(target, as_version=4)
    assert executed.cells[0].outputs[0]["text"].strip() == str(source.parent)


def test_unusable_workspace_is_one_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = iolab("lab", env={"IOLAB_WORKDIR": str(blocker / "ws")})
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: cannot create the directory") and "Traceback" not in proc.stderr


def test_clean_removes_what_the_lab_wrote_and_nothing_else(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "scratch-of-a-user"
    monkeypatch.setenv("IOLAB_WORKDIR", str(workspace))
    marked, unmarked = tmp_path / "tmpbase", tmp_path / "otherbase"
    (marked / f"iolab-{user_name()}").mkdir(parents=True)
    (marked / f"iolab-{user_name()}" / ".iolab-location").write_text("")
    (unmarked / f"iolab-{user_name()}").mkdir(parents=True)
    for name in ("dataset", "tmp", "lab", "loc", "images", "slurm-results"):  # made by the lab
        (ensure_writable_dir(workspace / name) / "f").write_text("x")
    (workspace / "my-own-results.txt").write_text("keep")
    env = {**os.environ, "IOLAB_WORKDIR": str(workspace), "TMPDIR": str(marked),
           "SCRATCH": str(unmarked)}
    proc = subprocess.run([sys.executable, "-m", "iolab", "clean"], cwd=ROOT, text=True,
                          capture_output=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in workspace.iterdir()) == [".iolab-made", "my-own-results.txt"]
    assert "left alone" in proc.stdout and "my-own-results.txt" in proc.stdout
    assert not (marked / f"iolab-{user_name()}").exists()
    assert (unmarked / f"iolab-{user_name()}").is_dir()  # no marker: not the lab's
    (workspace / "my-own-results.txt").unlink()
    subprocess.run([sys.executable, "-m", "iolab", "clean"], cwd=ROOT, check=True,
                   capture_output=True, env={**os.environ, "IOLAB_WORKDIR": str(workspace)})
    assert not workspace.exists()  # an empty workspace the lab made goes too


@pytest.mark.needs("sshfs")
def test_clean_unmounts_first_and_never_deletes_through_a_mount(tmp_path: Path,
                                                                 monkeypatch) -> None:
    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "ws"))
    export = tmp_path / "export"
    export.mkdir()
    (export / "precious.txt").write_text("keep")
    with loopback_sshfs(export) as mount:
        assert (mount.mount_point / "precious.txt").read_text() == "keep"
        clean()
        assert not mount.mount_point.exists()
    assert (export / "precious.txt").read_text() == "keep"
    assert not (tmp_path / "ws").exists()
