"""`.ci/without-tools`, CI's machine without the optional tools (part 4): the tools of
apt.txt are hidden, everything else is found, and what is made under it still works after it
has exited and taken its folder of links with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WITHOUT_TOOLS = ROOT / ".ci" / "without-tools"


def _without_tools(*command: str, path: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(WITHOUT_TOOLS), *command],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": path},
    )


def test_the_optional_tools_are_hidden_and_the_rest_is_found(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("strace", "fio", "ceph-fuse", "sbatch", "chromium", "ls"):
        (bin_dir / name).symlink_to("/bin/true")
    looked_up = _without_tools(
        "bash",
        "-c",
        "for p in strace fio ceph-fuse sbatch chromium ls make; do command -v $p || true; done",
        path=f"{bin_dir}:{os.environ['PATH']}",
    )
    assert looked_up.returncode == 0, looked_up.stderr
    found = {Path(line).name for line in looked_up.stdout.split()}
    assert found == {"ls", "make"}


def test_a_venv_made_under_it_still_runs_after_it_exits(tmp_path: Path) -> None:
    """A .venv links to the interpreter that made it: not to the folder of links, which goes
    when the command ends."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(os.path.realpath(sys.executable))
    venv = tmp_path / "venv"
    made = _without_tools(
        "python3", "-m", "venv", "--without-pip", str(venv), path=f"{bin_dir}:{os.environ['PATH']}"
    )
    assert made.returncode == 0, made.stderr
    runs = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert runs.returncode == 0, runs.stderr
    assert Path(runs.stdout.strip()) == venv
