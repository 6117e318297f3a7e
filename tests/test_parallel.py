"""`make test` runs on two pytest-xdist workers; what must share one worker does.

The notebooks share the user's per-user folders in /dev/shm and /tmp (one per user, not per
run), so they run one after another in one worker; the site's three modules share one
build; any other module stays whole. conftest.py's scheduler groups by node id.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import ROOT, SITE_MODULES, worker_group

NOTEBOOK_IDS = [
    f"notebooks/{path.name}::Cell 0" for path in sorted((ROOT / "notebooks").glob("*.ipynb"))
]


def test_every_notebook_is_in_one_group_and_the_site_modules_in_another() -> None:
    reference = [f"reference/{path.name}::Cell 3" for path in (ROOT / "reference").glob("*.ipynb")]
    assert len(NOTEBOOK_IDS) >= 12 and reference
    as_pytest_92_writes = [nodeid.replace(".ipynb::", "::ipynb::") for nodeid in NOTEBOOK_IDS]
    assert {worker_group(nodeid) for nodeid in NOTEBOOK_IDS + reference + as_pytest_92_writes} == {
        "notebooks"
    }
    assert {worker_group(f"tests/{name}::test_x[a::b]") for name in SITE_MODULES} == {"site"}
    assert all((ROOT / "tests" / name).is_file() for name in SITE_MODULES)
    assert worker_group("tests/test_layers.py::test_a") == "tests/test_layers.py"
    assert worker_group("tests/test_layers.py::test_b[x]") == "tests/test_layers.py"


def tiny_notebook(path: Path, cells: int) -> Path:
    """A notebook of `cells` one-line code cells, each printing its own number."""
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(f"print({n})") for n in range(cells)]
    nbformat.write(notebook, path)
    return path


@pytest.mark.slow  # starts two kernels
def test_two_notebooks_run_in_one_worker_in_order(tmp_path: Path) -> None:
    """Left to pytest-xdist's own `--dist loadscope`, two notebooks go to two workers.

    Two small notebooks show it as well as two of the lab's (a group is chosen by the node
    id alone), in seconds rather than the lab's notebooks' minute.
    """
    first, second = (tiny_notebook(tmp_path / f"{name}.ipynb", 4) for name in ("first", "second"))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadscope",
            "-v",
            # the lab's settings; a root above both places, since a node id outside the root
            # loses its path (pytest 9.2: "::Cell 0" for every notebook)
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            os.path.commonpath([ROOT, tmp_path]),
            "-p",
            "no:cacheprovider",
            str(first),
            str(second),
            # a test of tests/ loads tests/conftest.py (its workspace and its scheduler)
            "tests/test_parallel.py::test_every_notebook_is_in_one_group_and_the_site_modules_in_another",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    ran = re.findall(
        r"^\[(gw\d+)\] \[\s*\d+%\] PASSED \S*?(first|second)(?:\.ipynb|::ipynb)::Cell (\d+)",
        result.stdout,
        re.MULTILINE,
    )
    workers: dict[str, set[str]] = defaultdict(set)
    cells: dict[str, list[int]] = defaultdict(list)
    for worker, notebook, cell in ran:
        workers[notebook].add(worker)
        cells[notebook].append(int(cell))
    assert cells == {"first": [0, 1, 2, 3], "second": [0, 1, 2, 3]}, result.stdout[-3000:]
    assert len(set.union(*workers.values())) == 1, workers
