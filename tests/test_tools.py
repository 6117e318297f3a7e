"""Tests of iolab.measure.tools: presence checks, ptrace check, report, apt.txt, CLI."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from iolab.cli.check_tools import setup_parser
from iolab.core.errors import LabError
from iolab.measure.tools import TOOLS, apt_packages, check_tools, format_report, tools_frame


def _fake_tool(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def test_ls_is_found_and_a_fake_tool_is_missing_with_a_how_to():
    ls, fake = check_tools(["ls", "iolab-fake-tool"])
    assert ls.found and ls.state == "ok" and Path(ls.path).name == "ls"
    assert any(c.isdigit() for c in ls.version)
    assert not fake.found and fake.state == "missing" and fake.path is None
    assert "apt-get install iolab-fake-tool" in fake.how_to_get
    assert not fake.required


def test_default_table_covers_the_lab_tools():
    names = [spec.name for spec in TOOLS]
    for name in ("strace", "fio", "sshfs", "lfs", "mpiexec", "sbatch", "tar", "dd", "ls", "cat"):
        assert name in names
    required = {spec.name for spec in TOOLS if spec.required}
    assert "strace" in required and "fio" not in required


def test_missing_tools_are_reported_with_why_and_how(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing is installed here
    report = format_report(check_tools(["strace", "fio", "lfs", "mpiexec"])).splitlines()
    strace, fio, lfs, mpiexec = report
    assert strace.split()[:2] == ["strace", "missing"]
    assert "required" in strace and "apt-get install strace" in strace and "audit hooks" in strace
    assert "optional" in fio and "recorded runs" in fio and "apt-get install fio" in fio
    assert "used by later lessons" in lfs
    assert "module load fio" in fio
    assert "Lustre client" in lfs and "apt-get" not in lfs
    venv_mpiexec = Path(sys.executable).parent / "mpiexec"
    if venv_mpiexec.exists():  # the requirements' mpich wheel: found even off PATH
        assert mpiexec.split()[:2] == ["mpiexec", "ok"]
        (mpi,) = check_tools(["mpiexec"])
        assert mpi.path == str(venv_mpiexec)
    else:
        assert "pip install mpich" in mpiexec


def test_mpirun_alone_counts_as_mpi(monkeypatch, tmp_path):
    _fake_tool(tmp_path, "mpirun", "echo 'mpirun (Open MPI) 4.1.4'\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    (mpi,) = check_tools(["mpiexec"])
    assert mpi.found and mpi.version == "mpirun (Open MPI) 4.1.4"


def test_strace_with_ptrace_denied_is_limited(monkeypatch, tmp_path):
    _fake_tool(
        tmp_path,
        "strace",
        'if [ "$1" = "-V" ]; then echo "strace -- version 9.9"; exit 0; fi\n'
        'echo "strace: test_ptrace_get_syscall_info: PTRACE_TRACEME: Operation not permitted" >&2\n'
        "exit 1\n",
    )
    monkeypatch.setenv("PATH", str(tmp_path))
    (strace,) = check_tools(["strace"])
    assert strace.found and strace.version == "strace -- version 9.9"
    assert strace.state == "limited" and "Operation not permitted" in strace.problem
    assert "audit hooks" in format_report([strace])


def test_tools_frame_has_one_row_per_tool():
    frame = tools_frame(check_tools(["ls", "iolab-fake-tool"]))
    assert frame["tool"].tolist() == ["ls", "iolab-fake-tool"]
    assert frame["state"].tolist() == ["ok", "missing"]


def test_apt_packages_skips_comments_and_blank_lines(tmp_path):
    apt = tmp_path / "apt.txt"
    apt.write_text("# tools for Binder\nstrace\n\nfio   # later lessons\n  # indented\nsshfs\n")
    assert apt_packages(apt) == ["strace", "fio", "sshfs"]
    with pytest.raises(LabError):
        apt_packages(tmp_path / "missing.txt")


def _run_check_tools(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="iolab")
    setup_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["check-tools", *argv])
    return args.func(args)


def test_cli_fails_only_when_strict_and_a_required_tool_is_missing(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _run_check_tools() == 0
    assert "strace" in capsys.readouterr().out
    assert _run_check_tools("--strict") == 1
    for name in ("strace", "tar", "dd", "ls", "cat"):
        _fake_tool(tmp_path, name, "echo 'fake 1.0'\n")
    assert _run_check_tools("--strict") == 0
