"""The learner's own pages (iolab.pages): notebooks executed into a copy, quietly and over
private sockets, and the summary of what this machine lacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from iolab.pages.notebooks import execute_notebook


def test_notebooks_execute_into_a_copy_and_leave_the_source_alone(tmp_path: Path) -> None:
    source = tmp_path / "src" / "n.ipynb"
    source.parent.mkdir()
    notebook = new_notebook(cells=[new_code_cell("import os\nprint(os.getcwd())")])
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(notebook, source)
    before = source.read_bytes()
    target = tmp_path / "out" / "n.ipynb"
    execute_notebook(source, target, timeout_s=120)
    assert source.read_bytes() == before
    executed = nbformat.read(target, as_version=4)
    assert executed.cells[0].outputs[0]["text"].strip() == str(source.parent)


@pytest.mark.slow
def test_make_lab_runs_notebooks_quietly_over_private_sockets(
    tmp_path: Path, workspace: Path
) -> None:
    """No kernel warning per notebook in the `make lab` log, no colour codes in a failure, no
    socket left behind: the kernel talks over Unix sockets in a private scratch folder."""
    code = (
        "import sys, nbformat\n"
        "from pathlib import Path\n"
        "from iolab.pages.notebooks import execute_notebook, plain\n"
        "d = Path(sys.argv[1])\n"
        "execute_notebook(d / 'ok.ipynb', d / 'out' / 'ok.ipynb')\n"
        "try:\n"
        "    execute_notebook(d / 'fails.ipynb', d / 'out' / 'fails.ipynb')\n"
        "except Exception as err:\n"
        "    print('FAILED:', plain(str(err)).strip().splitlines()[-1])\n"
    )
    nbformat.write(new_notebook(cells=[new_code_cell("print(6 * 7)")]), tmp_path / "ok.ipynb")
    nbformat.write(new_notebook(cells=[new_code_cell("1 / 0")]), tmp_path / "fails.ipynb")
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "without encryption" not in proc.stderr and "\x1b[" not in proc.stdout
    assert "FAILED: ZeroDivisionError: division by zero" in proc.stdout
    assert "42" in nbformat.read(tmp_path / "out" / "ok.ipynb", 4).cells[0].outputs[0]["text"]
    assert [p.name for p in (workspace / "tmp").iterdir()] == [".iolab-made"]


def test_make_labs_summary_names_every_missing_piece(monkeypatch) -> None:
    """A learner without PyTorch, PyDarshan or a tool is told so at the end, with the fix."""
    import importlib.util

    from iolab.measure.tools import ToolStatus
    from iolab.pages import missing

    statuses = [
        ToolStatus("fio", False, None, None, "measures bandwidth", "apt-get install fio", False),
        ToolStatus(
            "strace",
            True,
            "/usr/bin/strace",
            "6.1",
            "counts calls",
            "apt",
            True,
            problem="ptrace is denied here",
        ),
        ToolStatus("tar", True, "/usr/bin/tar", "1.34", "unpacks", "apt", True),
    ]
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    lines = missing.missing_pieces(statuses)
    assert any(line.startswith("fio ") and "apt-get install fio" in line for line in lines)
    assert any(line.startswith("strace ") and "ptrace is denied" in line for line in lines)
    assert not any(line.startswith("tar ") for line in lines)
    assert any(line.startswith("torch ") and "make torch" in line for line in lines)
