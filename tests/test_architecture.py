"""ARCHITECTURE.md's owner table names every module of iolab, so a new maintainer can find
where each fact lives, and a module added without a row fails here, not in review.

A row's owner cell names modules in backticks: a full path (`iolab/core/dataset.py`), a name
beside the last full path's folder (`plots.py` after `iolab/diagnosis/report.py`), a folder
(`iolab/ml/checkpoint/`: every module under it) or a pattern (`iolab/storage/hygiene*.py`).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
TABLE_START = "Each fact has one owner"
CODE = re.compile(r"`([^`]+)`")


def owner_cells(text: str) -> list[str]:
    """The last cell of every row of the owner table (the first table after TABLE_START),
    header and rule left out."""
    lines = text.split(TABLE_START, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return [line.rstrip(" |").rsplit("|", 1)[1] for line in lines[start + 2 : end]]


def named_modules(cells: list[str], modules: set[str]) -> set[str]:
    """The modules of `modules` (repository paths) that the owner cells name."""
    named: set[str] = set()
    for cell in cells:
        folder = None
        for token in CODE.findall(cell):
            path = PurePosixPath(token)
            if token.startswith("iolab/"):
                folder = path if token.endswith("/") else path.parent
                named |= {
                    m
                    for m in modules
                    if PurePosixPath(m).match(token)
                    or (token.endswith("/") and m.startswith(token))
                }
            elif folder is not None and re.fullmatch(r"[\w*]+\.py", token):
                named |= {m for m in modules if PurePosixPath(m).match(str(folder / token))}
    return named


def library_modules() -> set[str]:
    """Every module of iolab outside the command line, whose row covers `iolab/cli/`."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "iolab").rglob("*.py")
        if path.name not in ("__init__.py", "__main__.py") and "cli" not in path.parts
    }


def test_every_module_of_iolab_has_an_owner_row() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    modules = library_modules()
    assert "`iolab/cli/`" in text
    missing = sorted(modules - named_modules(owner_cells(text), modules))
    assert not missing, f"ARCHITECTURE.md's owner table names no row for: {missing}"


def test_the_table_reader_sees_a_module_left_out() -> None:
    """The check above can fail: a table without one row leaves that module unnamed."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    modules = library_modules()
    cells = [cell for cell in owner_cells(text) if "iolab/diagnosis/judge.py" not in cell]
    assert "iolab/diagnosis/judge.py" in modules - named_modules(cells, modules)
