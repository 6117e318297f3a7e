"""The layers of iolab, checked on the source so that a wrong import fails here, not in review.

RANKS is the rule (ARCHITECTURE.md quotes it): a module imports only from its own package and
from packages of a lower rank; packages of equal rank are siblings that never import each
other. The scripts beside the toolkit (SCRIPT_DIRS) import only SCRIPT_PACKAGES, so a reader
traced by strace loads as little of iolab as possible. Every import counts, also one inside a
function, a relative one, and importlib.import_module with a literal name.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: The packages of iolab and their ranks: each may import only from lower ranks.
RANKS = {
    "core": 0,
    "measure": 1,
    "storage": 2,
    "diagnosis": 2,
    "hpc": 3,
    "ml": 3,
    "classmode": 3,
    "pages": 3,
    "cli": 4,
}
#: Folders of stand-alone scripts, and the only iolab packages they may import.
SCRIPT_DIRS = ("data_generators", "demos")
SCRIPT_PACKAGES = {"core"}
#: The package face (loaded before every module, so it imports nothing of iolab) and the
#: entry point (`python -m iolab`, which may import anything): the only files directly in iolab/.
FACE, ENTRY = "__init__.py", "__main__.py"


def imported_names(tree: ast.AST, package: str) -> Iterator[tuple[int, str]]:
    """(line, absolute dotted module name) of every import in `tree`, at any depth; relative
    imports are resolved against `package`, the one the module is in."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            if "." in base:  # from iolab.x.y import z: the module names the package
                yield node.lineno, base
            else:  # from iolab import x: each name may be a package
                yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.func, (ast.Attribute, ast.Name))
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
        ):
            first = node.args[0]
            if isinstance(first, ast.JoinedStr) and first.values:
                first = first.values[0]  # the literal prefix of an f-string
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield node.lineno, first.value.rstrip(".")


def target_package(name: str, face_names: set[str]) -> str | None:
    """The iolab package `name` belongs to: a key of RANKS, "iolab" (the face), "iolab.<x>"
    for anything that is no package (a flat module left behind), or None outside iolab."""
    parts = name.split(".")
    if parts[0] != "iolab":
        return None
    if len(parts) == 1 or parts[1] in face_names:
        return "iolab"
    return parts[1] if parts[1] in RANKS else f"iolab.{parts[1]}"


def check_source(rel: str, source: str, face_names: set[str]) -> list[str]:
    """The layer violations of one file, given by its path relative to the checkout."""
    path = Path(rel)
    top = path.parts[0]
    is_face = top == "iolab" and len(path.parts) == 2
    if is_face and path.name != FACE:
        return []  # the entry point imports anything; a flat module fails the next test
    found = []
    for line, name in imported_names(ast.parse(source, rel), ".".join(path.parent.parts)):
        target = target_package(name, face_names)
        if target is None:
            continue
        where = f"{rel}:{line}"
        if top in SCRIPT_DIRS:
            if target not in SCRIPT_PACKAGES:
                found.append(
                    f"{where}: {top} imports {name} (package {target}); scripts "
                    f"import only iolab.{', iolab.'.join(sorted(SCRIPT_PACKAGES))}"
                )
            continue
        if is_face:
            found.append(
                f"{where}: the face iolab/__init__.py imports {name} (package "
                f"{target}); it is loaded before every module, so it imports nothing "
                "of iolab"
            )
            continue
        own = path.parts[1]
        if target == own or target == "iolab":
            continue
        if target not in RANKS:
            found.append(f"{where}: {own} imports {name}: {target} is no package of the layers")
        elif RANKS[target] == RANKS[own]:
            found.append(f"{where}: {own} imports its sibling {target} (both rank {RANKS[own]})")
        elif RANKS[target] > RANKS[own]:
            found.append(
                f"{where}: {own} (rank {RANKS[own]}) imports {target} (rank "
                f"{RANKS[target]}) upward, via {name}"
            )
    return found


def face_names() -> set[str]:
    """Names iolab/__init__.py defines (`from iolab import __version__` reads the face)."""
    tree = ast.parse((ROOT / "iolab" / FACE).read_text())
    return {
        target.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }


def checked_files() -> list[Path]:
    return sorted(
        p
        for top in ("iolab", *SCRIPT_DIRS)
        for p in (ROOT / top).rglob("*.py")
        if "__pycache__" not in p.parts
    )


def test_every_import_follows_the_ranks() -> None:
    rels = [p.relative_to(ROOT) for p in checked_files()]
    # An empty or wrong glob would pass silently: every package and script folder is checked.
    checked = {rel.parts[1] if rel.parts[0] == "iolab" else rel.parts[0] for rel in rels}
    assert set(RANKS) | set(SCRIPT_DIRS) <= checked, checked
    names = face_names()
    found = [
        v for rel in rels for v in check_source(rel.as_posix(), (ROOT / rel).read_text(), names)
    ]
    assert not found, "imports against the layers (RANKS in tests/test_layers.py):\n" + "\n".join(
        found
    )


def flat_modules(package_dir: Path) -> list[str]:
    return sorted(p.name for p in package_dir.glob("*.py") if p.name not in (FACE, ENTRY))


def test_no_flat_modules_and_every_package_ranked() -> None:
    """A module directly in iolab/ or an unranked package would escape the rule."""
    flat = flat_modules(ROOT / "iolab")
    assert not flat, f"modules left directly under iolab/ (move each into a package): {flat}"
    packages = {p.parent.name for p in (ROOT / "iolab").glob("*/__init__.py")}
    assert packages == set(RANKS), f"packages on disk {sorted(packages)} vs RANKS {sorted(RANKS)}"


@pytest.mark.parametrize(
    ("rel", "source", "expected"),
    [
        (
            "iolab/core/fake.py",
            "def f():\n    import iolab.storage.fio\n",
            ["iolab/core/fake.py:2", "core (rank 0)", "storage (rank 2)"],
        ),
        ("iolab/measure/fake.py", "from ..storage import fio\n", ["fake.py:1", "storage (rank 2)"]),
        ("iolab/storage/__init__.py", "from iolab import cli\n", ["__init__.py:1", "cli (rank 4)"]),
        (
            "iolab/ml/fake.py",
            "\n\nfrom iolab.hpc.lustre import x\n",
            ["ml/fake.py:3", "sibling hpc"],
        ),
        ("iolab/hpc/fake.py", "from .. import ml\n", ["hpc/fake.py:1", "sibling ml"]),
        (
            "iolab/cli/fake.py",
            "import importlib\nimportlib.import_module(f'iolab.ghost.{n}')\n",
            ["cli/fake.py:2", "iolab.ghost is no package"],
        ),
        (
            "demos/fake.py",
            "from iolab.measure.timing import time_command\n",
            ["demos/fake.py:1", "demos imports iolab.measure.timing (package measure)"],
        ),
        (
            "data_generators/fake.py",
            "from iolab import __version__\n",
            ["data_generators/fake.py:1", "(package iolab)"],
        ),
        ("iolab/__init__.py", "from iolab.core import errors\n", ["the face"]),
    ],
)
def test_the_checker_reports_a_wrong_import(rel: str, source: str, expected: list[str]) -> None:
    found = check_source(rel, source, {"__version__"})
    assert len(found) == 1 and all(text in found[0] for text in expected), found


def test_the_checker_accepts_imports_downward_and_within_a_package() -> None:
    source = (
        "from iolab import __version__\nfrom iolab.core.errors import LabError\n"
        "from . import lustre_parse\nfrom ..storage import fio\nimport os\n"
        "def f():\n    from iolab.measure import timing\n"
    )
    assert check_source("iolab/hpc/fake.py", source, {"__version__"}) == []
    assert (
        check_source("demos/fake.py", "from iolab.core.workspace import workdir\n", {"__version__"})
        == []
    )


def test_a_flat_module_is_found(tmp_path: Path) -> None:
    for name in (FACE, ENTRY, "workspace.py"):
        (tmp_path / name).write_text("")
    assert flat_modules(tmp_path) == ["workspace.py"]


#: Python lines inside the Slurm job scripts (heredocs and `python -c` strings).
SHELL_IMPORT = re.compile(r"^\s*from (iolab(?:\.\w+)+) import ([\w, ]+)$", re.MULTILINE)


def shell_imports() -> list[tuple[str, str, str]]:
    """(script, module, name) for every `from iolab... import ...` line in demos/slurm: the job
    scripts and the Python helpers they run on the nodes."""
    found = []
    for script in sorted((ROOT / "demos" / "slurm").glob("*")):
        if not script.is_file() or script.suffix not in (".sbatch", ".sh", ".py"):
            continue  # __pycache__ of the helpers, once a test imported one
        for module, names in SHELL_IMPORT.findall(script.read_text()):
            found += [(script.name, module, name.strip()) for name in names.split(",")]
    return found


def test_the_job_scripts_import_what_exists() -> None:
    """The job scripts run Python the linters and the ranks test do not read; a renamed or
    moved name would only fail inside a Slurm job (it did once), so resolve them here."""
    imports = shell_imports()
    assert len(imports) >= 5, "no iolab imports found in demos/slurm: the pattern is stale"
    missing = [
        f"{script}: {module}.{name}"
        for script, module, name in imports
        if not hasattr(importlib.import_module(module), name)
    ]
    assert missing == []
