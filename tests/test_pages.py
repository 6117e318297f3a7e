"""The learner's own pages (iolab.pages): notebooks executed into a copy, quietly and over
private sockets, and the summary of what this machine lacks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from iolab.core.lab_dirs import TOOL_CACHES, tool_caches
from iolab.core.markers import MADE_MARKER
from iolab.pages import notebooks
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


CACHE_PROBE = """
import os, sys
from pathlib import Path
import nbformat
from nbformat.v4 import new_code_cell, new_notebook
from iolab.core.lab_dirs import tool_caches
from iolab.pages.notebooks import execute_notebook

tool_caches()
source = Path(sys.argv[1])
notebook = new_notebook(cells=[new_code_cell(
    "import matplotlib.pyplot as plt\\nplt.plot([1, 2])\\nplt.savefig('/dev/null', format='png')\\n"
    "print(get_ipython().profile_dir.location)"
)])
notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                   "language": "python"}
nbformat.write(notebook, source)
execute_notebook(source, source.with_name("done.ipynb"), timeout_s=120)
"""


@pytest.mark.slow
def test_the_tools_caches_go_to_the_workspace_and_clean_removes_them(tmp_path: Path) -> None:
    """A learner's home keeps nothing of matplotlib's or IPython's after the lab ran them
    (no ~/.cache/matplotlib, ~/.config/matplotlib, ~/.ipython), and `iolab clean` removes
    their folders with the workspace."""
    home, workspace = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("XDG_") and key not in TOOL_CACHES
    }
    env.update(HOME=str(home), IOLAB_WORKDIR=str(workspace))
    run = subprocess.run(
        [sys.executable, "-c", CACHE_PROBE, str(tmp_path / "probe.ipynb")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert not {".cache", ".config", ".ipython"} & {entry.name for entry in home.iterdir()}
    assert list((workspace / "cache" / "matplotlib").glob("fontlist*.json"))
    done = nbformat.read(tmp_path / "done.ipynb", as_version=4)
    profile = done.cells[0].outputs[0]["text"].strip()
    assert Path(profile) == workspace / "cache" / "ipython" / "profile_default"
    cleaned = subprocess.run(
        [sys.executable, "-m", "iolab", "clean"], env=env, capture_output=True, text=True
    )
    assert cleaned.returncode == 0, cleaned.stderr
    assert not (workspace / "cache").exists()


def test_a_cache_folder_the_user_chose_stays_theirs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "ws"))
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mine"))
    monkeypatch.delenv("IPYTHONDIR", raising=False)
    assert tool_caches() == {"IPYTHONDIR": str(tmp_path / "ws" / "cache" / "ipython")}
    assert os.environ["MPLCONFIGDIR"] == str(tmp_path / "mine")
    assert not (tmp_path / "mine").exists()


STOPPED_LAB = """
import sys
from pathlib import Path
import iolab.pages.notebooks as notebooks
from iolab.core.errors import run_cli

notebooks.repo_root = lambda: Path(sys.argv[1])  # a checkout of two notebooks
run_cli(lambda: notebooks.execute_notebooks(Path(sys.argv[2])) and 1)
"""


def two_notebooks(root: Path) -> tuple[Path, Path]:
    """notebooks/a (says its kernel's pid, then sleeps two minutes) and b (leaves a file)."""
    started, b_ran = root / "a-started", root / "b-ran"
    cells = {
        "a.ipynb": "import os, time\n"
        f"open({str(started)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)",
        "b.ipynb": f"open({str(b_ran)!r}, 'w').write('ran')",
    }
    (root / "notebooks").mkdir(parents=True)
    for name, code in cells.items():
        notebook = new_notebook(cells=[new_code_cell(code)])
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        nbformat.write(notebook, root / "notebooks" / name)
    return started, b_ran


@pytest.mark.slow
@pytest.mark.parametrize("how", ["Ctrl-C to the terminal's group", "SIGTERM to the lab"])
def test_ctrl_c_and_sigterm_stop_the_notebooks_at_once(tmp_path: Path, how: str) -> None:
    """nbclient takes SIGINT and SIGTERM for itself and lets the cell run on; the lab must
    stop the kernel, skip every notebook after it and leave no kernel, socket or key."""
    started, b_ran = two_notebooks(tmp_path / "checkout")
    env = {**os.environ, "IOLAB_WORKDIR": str(tmp_path / "ws")}
    lab = subprocess.Popen(
        [sys.executable, "-c", STOPPED_LAB, str(tmp_path / "checkout"), str(tmp_path / "out")],
        env=env,
        start_new_session=True,  # its own group, as a terminal gives a command
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (started.exists() and started.read_text()):
            assert lab.poll() is None and time.monotonic() < deadline, lab.stdout.read()
            time.sleep(0.1)
        kernel = int(started.read_text())
        if how.startswith("Ctrl-C"):
            os.killpg(lab.pid, signal.SIGINT)
        else:
            os.kill(lab.pid, signal.SIGTERM)
        output = lab.communicate(timeout=60)[0]  # the cell would sleep for two minutes
    finally:
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGKILL)
    assert lab.returncode == 130 and "interrupted" in output, output
    assert not b_ran.exists()
    for _ in range(50):  # the kernel was told to go; give it a moment to be reaped
        if (
            not Path(f"/proc/{kernel}").exists()
            or " Z " in Path(f"/proc/{kernel}/stat").read_text()
        ):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the kernel {kernel} still runs")
    left = [path.name for path in (tmp_path / "ws" / "tmp").iterdir()]
    assert left == [MADE_MARKER]  # the kernel's sockets and key are gone


def tiny_notebook(path: Path, code: str) -> None:
    notebook = new_notebook(cells=[new_code_cell(code)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)


@pytest.mark.slow
def test_a_lab_in_stages_runs_the_lessons_chosen_and_keeps_the_earlier_ones(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    checkout, executed = tmp_path / "checkout", tmp_path / "lab" / "notebooks"
    for name in ("01-a", "02-b", "03-c"):
        tiny_notebook(checkout / "notebooks" / f"{name}.ipynb", f"print({name[:2]!r})")
    monkeypatch.setattr(notebooks, "repo_root", lambda: checkout)
    monkeypatch.setattr(notebooks, "EXECUTED_PAGES", ())
    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "ws"))
    assert notebooks.execute_notebooks(executed, lessons={"01"}) == []
    assert sorted(path.name for path in executed.iterdir()) == ["01-a.ipynb"]
    assert notebooks.execute_notebooks(executed, lessons={"03"}) == []
    assert sorted(path.name for path in executed.iterdir()) == ["01-a.ipynb", "03-c.ipynb"]
    said = capsys.readouterr().out
    assert "02-b" not in said and "  03-c.ipynb: running" in said


def test_a_running_notebook_relays_its_queue_lines_and_says_where_it_is(
    tmp_path: Path, monkeypatch
) -> None:
    """A learner waiting for a class turn inside a notebook sees it on the terminal, and a
    long cell is named every HEARTBEAT_S, with the wait and its place while it lasts; the
    cells' other output stays in the notebook."""
    source = tmp_path / "q.ipynb"
    tiny_notebook(
        source,
        "import sys, time\n"
        "print('fio: waiting for a turn, place 2 of 3 (1 at a time in this class)', "
        "file=sys.stderr, flush=True)\n"
        "print('a table the lesson shows', flush=True)\n"
        "time.sleep(4)\n"
        "print('fio: your turn after 4 s', file=sys.stderr, flush=True)\n"
        "time.sleep(3)",
    )
    monkeypatch.setattr(notebooks, "HEARTBEAT_S", 1.0)
    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "ws"))
    said: list[str] = []
    notebooks.execute_notebook(source, tmp_path / "out.ipynb", timeout_s=120, say=said.append)
    # in order; a heartbeat may come first when the kernel starts slowly on a busy machine
    assert [line for line in said if line.startswith("q.ipynb: fio: ")] == [
        "q.ipynb: fio: waiting for a turn, place 2 of 3 (1 at a time in this class)",
        "q.ipynb: fio: your turn after 4 s",
    ]
    still = "q.ipynb: cell 1 of 1 still fio: waiting for a turn, place 2 of 3 (1 at a time"
    waiting = [i for i, line in enumerate(said) if line.startswith(still)]
    turn = said.index("q.ipynb: fio: your turn after 4 s")
    assert waiting and waiting[-1] < turn  # the wait repeated while it lasted, not after
    assert any(line.startswith("q.ipynb: cell 1 of 1 running; 0 min ") for line in said[turn + 1 :])
    assert not any("a table" in line for line in said)


@pytest.mark.parametrize(
    "given, says",
    [("99", "--lessons '99' names no lesson"), (",", "--lessons ',' names no lesson")],
)
def test_lessons_that_have_no_notebook_are_one_sentence(tmp_path: Path, given, says) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "iolab", "lab", "--lessons", given],
        env={**os.environ, "IOLAB_WORKDIR": str(tmp_path / "ws")},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and run.stderr.startswith(f"error: {says}")
    assert len(run.stderr.strip().splitlines()) == 1 and "01, 02, 03" in run.stderr
    assert not (tmp_path / "ws").exists()  # refused before anything ran
