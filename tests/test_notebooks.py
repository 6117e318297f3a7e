"""The committed notebooks: executed, clean, validated by nbval, and nbval really compares them.

nbval itself re-runs every notebook (pytest collects notebooks/ with --nbval-lax); these tests
check what nbval cannot: that the committed copies are complete real runs, and that a changed
deterministic output would be caught. Kernels and the pytest run below inherit the run's
temporary IOLAB_WORKDIR (conftest.py), so all notebooks share one generated dataset there.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHECK = "# NBVAL_CHECK_OUTPUT"


def code_cells(notebook) -> list:
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def test_every_lesson_has_its_notebook() -> None:
    lessons = {p.stem for p in (ROOT / "lessons").glob("[0-9][0-9]-*.md")}
    assert lessons and lessons == {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebook_is_a_complete_clean_run(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    assert notebook.cells[0].cell_type == "markdown" and notebook.cells[0].source.startswith("# ")
    cells = code_cells(notebook)
    assert [cell.execution_count for cell in cells] == list(range(1, len(cells) + 1)), (
        "re-execute the notebook top to bottom (jupyter execute --inplace)"
    )
    outputs = [output for cell in cells for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    checked = [cell for cell in cells if CHECK in cell.source.splitlines()]
    assert len(checked) >= 3, "deterministic facts must be compared by nbval"
    assert all(cell.outputs for cell in checked), "a checked cell without output checks nothing"
    assert any("image/png" in o.get("data", {}) for o in outputs), "each notebook has a plot"
    assert path.stat().st_size < 2_000_000


def truncated_copy(tmp_path: Path, mutate: bool) -> Path:
    """Notebook 01 up to its first checked cell, outside the checkout (iolab finds it itself)."""
    notebook = nbformat.read(ROOT / "notebooks/01-file-access.ipynb", as_version=4)
    first_check = next(
        i
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "code" and CHECK in cell.source
    )
    notebook.cells = copy.deepcopy(notebook.cells[: first_check + 1])
    if mutate:
        output = notebook.cells[-1].outputs[0]
        assert "files: 7300" in output.text
        output.text = output.text.replace("files: 7300", "files: 7301")
    target = tmp_path / "notebooks" / "check.ipynb"
    target.parent.mkdir(exist_ok=True)
    nbformat.write(notebook, target)
    return target


@pytest.mark.slow
@pytest.mark.parametrize("mutate", [False, True], ids=["unchanged", "one-output-changed"])
def test_nbval_fails_when_a_deterministic_output_changes(tmp_path: Path, mutate: bool) -> None:
    target = truncated_copy(tmp_path, mutate)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--nbval-lax",
            "--nbval-current-env",
            "-c",
            os.devnull,
            "--rootdir",
            str(tmp_path),
            str(target),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if mutate:
        assert proc.returncode == 1, proc.stdout[-3000:]
        assert "files: 7301" in proc.stdout and "files: 7300" in proc.stdout
    else:
        assert proc.returncode == 0, proc.stdout[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("kernel_dir", [".", "notebooks"], ids=["repository-root", "notebooks"])
def test_a_notebook_runs_the_same_wherever_its_kernel_starts(kernel_dir: str) -> None:
    """VS Code starts kernels at the repository root, Jupyter in the notebook's folder."""
    from nbclient import NotebookClient

    committed = nbformat.read(ROOT / "notebooks/01-file-access.ipynb", as_version=4)
    first_check = next(
        i
        for i, cell in enumerate(committed.cells)
        if cell.cell_type == "code" and CHECK in cell.source
    )
    notebook = copy.deepcopy(committed)
    notebook.cells = notebook.cells[: first_check + 1]
    NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(ROOT / kernel_dir)}},
    ).execute()
    text = lambda cell: "".join(o.get("text", "") for o in cell.outputs)  # noqa: E731
    assert text(notebook.cells[first_check]) == text(committed.cells[first_check])
    assert "files: 7300" in text(notebook.cells[first_check])


@pytest.mark.slow
def test_notebook_09_without_pytorch_glues_every_figure_its_lesson_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A learner without PyTorch: the runs without a DataLoader are measured, the DataLoader
    rows are the recorded run and say so, and the lesson loses no figure and shows no nan."""
    import math
    import re

    from iolab.pages.notebooks import execute_notebook

    blocker = tmp_path / "no-torch"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(blocker), os.environ.get("PYTHONPATH")]))
    )
    executed = tmp_path / "09-dataloader.ipynb"
    execute_notebook(ROOT / "notebooks" / "09-dataloader.ipynb", executed)

    glued = {}
    for cell in nbformat.read(executed, as_version=4).cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                glued[name] = next(iter(output["data"].values()))
    lesson = (ROOT / "lessons" / "09-dataloader.md").read_text()
    wanted = set(re.findall(r"09-dataloader\.ipynb::(\w+)", lesson))
    assert wanted - set(glued) == set(), "figures of lesson 09 lost without PyTorch"
    for name in wanted:
        value = str(glued[name]).strip("'\"")
        assert value.lower() != "nan" and "not measured" not in value, (name, value)
        with_number = re.fullmatch(r"-?[\d.]+(e[-+]?\d+)?", value)
        assert not with_number or math.isfinite(float(value)), (name, value)
    assert glued["au_local_plain_run"].strip("'\"") == "this run"
    for key in ("au_local_loader_run", "rates_dataloader_run"):
        assert glued[key].strip("'\"").startswith("recorded 20"), (key, glued[key])
